/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Link kind `af_packet:IFACE`: net_af_packet on a kernel interface,
 * qdisc_bypass=1. A second packet socket is its receive "doorbell" (the PMD
 * has no receive interrupt): the idle progress thread sleeps in ppoll on it
 * until a frame arrives. On an interface the kernel also uses with the same
 * MAC (a real eth0 whose IP rocemu shares), the addresses the kernel owns
 * there are left to it for ARP/ND/ping.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rte_ethdev.h>

#include "port_link.h"

static int afpacket_check_arg(const char *arg, char *err, size_t errlen)
{
	return port_iface_check_name("af_packet", arg, err, errlen);
}

static int afpacket_preview_mac(const struct rocemu_port_config *cfg, const char *arg,
				uint8_t mac[6])
{
	(void)cfg;
	return port_iface_mac(arg, mac) ? -ENODATA : 0;
}

static int afpacket_mtu(struct rocemu_port *port, const char *arg, char *err, size_t errlen)
{
	return port_iface_mtu(port, arg, err, errlen);
}

/*
 * The ring frame size: a whole frame plus the TPACKET header; 2048 is the
 * PMD's default. The PMD addresses frame i at i * framesz, so blocks must
 * hold frames back to back: framesz = blocksz, a multiple of the page size.
 * It also wants the mbuf data room at least this large.
 */
static uint32_t afpacket_framesz(const struct rocemu_port *port)
{
	uint32_t need = (uint32_t)port->eth_mtu + 18 + 128;

	return need > 2048 ? (need + 4095) & ~4095u : 2048;
}

static uint32_t afpacket_data_room(const struct rocemu_port *port)
{
	uint32_t room = port_default_data_room(port);

	return room < afpacket_framesz(port) ? afpacket_framesz(port) : room;
}

static int afpacket_create(struct rocemu_port *port, const char *arg, char *err, size_t errlen)
{
	char devargs[ROCEMU_PORT_SPEC_MAX + 192];
	uint32_t framesz = afpacket_framesz(port);

	snprintf(port->dev_name, sizeof(port->dev_name), "net_af_packet_re%u", port_next_seq());
	if (framesz > 2048)
		snprintf(devargs, sizeof(devargs),
			 "%s,iface=%s,qdisc_bypass=1,blocksz=%u,framesz=%u,framecnt=512",
			 port->dev_name, arg, framesz, framesz);
	else
		snprintf(devargs, sizeof(devargs), "%s,iface=%s,qdisc_bypass=1", port->dev_name,
			 arg);
	return port_dev_probe(port, devargs, err, errlen);
}

/*
 * The doorbell: a second packet socket on the interface whose filter keeps
 * one byte of each incoming frame and whose buffer is tiny, so it costs
 * little while the thread spins (the kernel drops into a full buffer early)
 * and lets the idle thread sleep until a frame arrives instead of waking
 * every millisecond.
 */
static void open_doorbell(struct rocemu_port *port, const char *iface)
{
	struct sock_filter keep_one_byte = BPF_STMT(BPF_RET | BPF_K, 1);
	struct sock_fprog prog = {.len = 1, .filter = &keep_one_byte};
	struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL)};
	int one = 1, small = 1, fd;

	sll.sll_ifindex = (int)if_nametoindex(iface);
	if (!sll.sll_ifindex)
		return;
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	/* our own frames and the kernel's outgoing ones are not news */
	setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) ||
	    bind(fd, (struct sockaddr *)&sll, sizeof(sll))) {
		close(fd);
		return;
	}
	port->doorbell_fd = fd;
	port->frames_wake = true;
}

static void afpacket_attach(struct rocemu_port *port, const char *arg)
{
	port_iface_hold_roce_udp(port);
	port_iface_find_kernel_owned(port, arg);
	open_doorbell(port, arg);
}

const struct port_link_ops port_link_afpacket = {
    .name = "af_packet",
    .prefix = "af_packet:",
    .usage = "af_packet:IFACE",
    .check_arg = afpacket_check_arg,
    .preview_mac = afpacket_preview_mac,
    .mtu = afpacket_mtu,
    .data_room = afpacket_data_room,
    .create = afpacket_create,
    .mac = port_iface_mac_choose,
    .attach = afpacket_attach,
};
