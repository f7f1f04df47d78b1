/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Link kind `af_xdp:IFACE`: net_af_xdp on queue 0 of a kernel interface.
 * UMEM chunks must fit a page, so mbufs keep the standard 2 KB data room and
 * the MTU at most 3498. The xsk descriptor is not exposed through ethdev in
 * DPDK 22.11: nothing wakes the progress thread on a frame (1 ms naps).
 */
#include <errno.h>
#include <stdio.h>

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "port_link.h"

/* the largest MTU whose frames fit an XDP frame of a 4 KB page */
#define AF_XDP_MAX_MTU 3498

static int afxdp_check_arg(const char *arg, char *err, size_t errlen)
{
	return port_iface_check_name("af_xdp", arg, err, errlen);
}

static int afxdp_preview_mac(const struct rocemu_port_config *cfg, const char *arg, uint8_t mac[6])
{
	(void)cfg;
	return port_iface_mac(arg, mac) ? -ENODATA : 0;
}

static int afxdp_mtu(struct rocemu_port *port, const char *arg, char *err, size_t errlen)
{
	int rc = port_iface_mtu(port, arg, err, errlen);

	if (rc)
		return rc;
	if (port->eth_mtu > AF_XDP_MAX_MTU)
		return port_fail(
		    err, errlen, -EINVAL,
		    "af_xdp: MTU %u too large (XDP frames hold at most %u bytes of MTU)",
		    port->eth_mtu, AF_XDP_MAX_MTU);
	return 0;
}

static uint32_t afxdp_data_room(const struct rocemu_port *port)
{
	(void)port;
	return RTE_MBUF_DEFAULT_DATAROOM;
}

static int afxdp_create(struct rocemu_port *port, const char *arg, char *err, size_t errlen)
{
	char devargs[ROCEMU_PORT_SPEC_MAX + 128];

	snprintf(port->dev_name, sizeof(port->dev_name), "net_af_xdp_re%u", port_next_seq());
	snprintf(devargs, sizeof(devargs), "%s,iface=%s,start_queue=0,queue_count=1",
		 port->dev_name, arg);
	return port_dev_probe(port, devargs, err, errlen);
}

static void afxdp_attach(struct rocemu_port *port, const char *arg)
{
	(void)arg;
	port_iface_hold_roce_udp(port);
}

const struct port_link_ops port_link_afxdp = {
    .name = "af_xdp",
    .prefix = "af_xdp:",
    .usage = "af_xdp:IFACE",
    .check_arg = afxdp_check_arg,
    .preview_mac = afxdp_preview_mac,
    .mtu = afxdp_mtu,
    .data_room = afxdp_data_room,
    .create = afxdp_create,
    .mac = port_iface_mac_choose,
    .attach = afxdp_attach,
};
