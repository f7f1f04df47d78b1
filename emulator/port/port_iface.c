/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the links on a kernel interface share (af_packet, af_xdp): the
 * interface's MTU and MAC from sysfs, its name rules, and UDP 4791 held
 * open so that the kernel does not answer our RoCE with port unreachable,
 * and which of the port's addresses the kernel owns there.
 */
#include <ctype.h>
#include <errno.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rte_ethdev.h>

#include "port_link.h"

int port_iface_check_name(const char *what, const char *iface, char *err, size_t errlen)
{
	size_t n = strlen(iface);

	if (n == 0 || n >= 16)
		return port_fail(err, errlen, -EINVAL,
				 "%s needs an interface name of 1..15 characters", what);
	for (size_t i = 0; i < n; i++)
		if (iface[i] == '/' || iface[i] == ',' || isspace((unsigned char)iface[i]))
			return port_fail(err, errlen, -EINVAL, "%s: bad interface name '%s'", what,
					 iface);
	return 0;
}

static FILE *open_sys(const char *iface, const char *file)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/class/net/%.32s/%s", iface, file);
	return fopen(path, "r");
}

/* The interface's MTU; --mtu may only lower it. */
int port_iface_mtu(struct rocemu_port *port, const char *iface, char *err, size_t errlen)
{
	FILE *f = open_sys(iface, "mtu");
	long v = 0;
	int ok;

	if (!f)
		return port_fail(err, errlen, -ENODEV,
				 "interface '%s' not found in this network namespace", iface);
	ok = fscanf(f, "%ld", &v) == 1 && v > 0 && v <= 65535;
	fclose(f);
	if (!ok)
		return port_fail(err, errlen, -EIO, "cannot read the MTU of interface '%s'", iface);
	if (port->cfg.mtu && port->cfg.mtu > v)
		return port_fail(err, errlen, -EINVAL,
				 "--mtu %u is larger than interface %s's MTU %ld", port->cfg.mtu,
				 iface, v);
	port->eth_mtu = port->cfg.mtu ? port->cfg.mtu : (uint16_t)v;
	return 0;
}

int port_iface_mac(const char *iface, uint8_t mac[6])
{
	FILE *f = open_sys(iface, "address");
	unsigned b[6];
	int n;

	if (!f)
		return -ENODEV;
	n = fscanf(f, "%2x:%2x:%2x:%2x:%2x:%2x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]);
	fclose(f);
	if (n != 6)
		return -ENODATA;
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)b[i];
	return 0;
}

/* The interface's MAC unless --mac; another MAC needs promiscuous mode. */
void port_iface_mac_choose(struct rocemu_port *port, const struct rte_ether_addr *dev_mac)
{
	port_pick_mac(port, dev_mac, true);
	if (dev_mac && !rte_is_same_ether_addr(dev_mac, &port->mac))
		rte_eth_promiscuous_enable(port->port_id);
}

/*
 * On a kernel interface the kernel sees our RoCEv2 datagrams too; if it owns
 * one of the addresses it would answer each with ICMP port unreachable.
 * Holding UDP 4791 open (never read, smallest buffer: the kernel drops
 * quietly) stops that (ARCHITECTURE §2). Best effort: another holder (the
 * rxe module, another rocemu) is as good.
 */
void port_iface_hold_roce_udp(struct rocemu_port *port)
{
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(ROCE_UDP_PORT)};
	struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons(ROCE_UDP_PORT)};
	int one = 1, zero = 0, fd;

	fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&a6, sizeof(a6)) == 0) {
			port->udp_hold_fd = fd;
			return;
		}
		close(fd);
	}
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a4, sizeof(a4)) == 0)
		port->udp_hold_fd = fd;
	else
		close(fd);
}

/*
 * With the interface's own MAC (a real eth0 whose IP rocemu shares), the
 * kernel answers ARP, ND and ping for its own addresses, so we must not
 * answer a second time for those. Not on a VLAN (--vlan): the kernel's
 * addresses of the interface are on the untagged segment, and it sees no
 * tagged frame there, so the port answers for its addresses itself.
 */
void port_iface_find_kernel_owned(struct rocemu_port *port, const char *iface)
{
	struct rte_ether_addr dev_mac;
	struct ifaddrs *list, *ifa;

	if (port->cfg.vlan || rte_eth_macaddr_get(port->port_id, &dev_mac) ||
	    !rte_is_same_ether_addr(&dev_mac, &port->mac) || getifaddrs(&list))
		return;
	for (ifa = list; ifa; ifa = ifa->ifa_next) {
		uint8_t gid[16];
		int idx;

		if (!ifa->ifa_addr || strcmp(ifa->ifa_name, iface))
			continue;
		if (ifa->ifa_addr->sa_family == AF_INET)
			port_gid_from_ipv4(gid,
					   ((struct sockaddr_in *)ifa->ifa_addr)->sin_addr.s_addr);
		else if (ifa->ifa_addr->sa_family == AF_INET6)
			memcpy(gid, &((struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr, 16);
		else
			continue;
		idx = rocemu_port_gid_find(port, gid);
		if (idx >= 0)
			port->kernel_owned |= 1u << idx;
	}
	freeifaddrs(list);
}
