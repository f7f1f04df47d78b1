/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Link kind `dpdk:DEVARGS`: any DPDK port, a vdev (`dpdk:net_pcap0,iface=eth0`)
 * or a PCI device (`dpdk:0000:03:00.0`, EAL then scans the PCI bus). The
 * device's own MAC unless --mac; all-multicast on for IPv6 ND; MTU 1500
 * unless --mtu. Nothing wakes the progress thread on a frame.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rte_ethdev.h>

#include "port_link.h"

static int dpdk_check_arg(const char *arg, char *err, size_t errlen)
{
	if (!*arg || *arg == ',')
		return port_fail(err, errlen, -EINVAL,
				 "dpdk: needs DPDK device arguments, e.g. dpdk:0000:03:00.0 or "
				 "dpdk:net_pcap0,iface=eth0");
	return 0;
}

static bool dpdk_needs_pci(const char *arg)
{
	return strncmp(arg, "net_", 4) != 0;
}

static int dpdk_create(struct rocemu_port *port, const char *arg, char *err, size_t errlen)
{
	const char *comma = strchr(arg, ',');
	size_t n = comma ? (size_t)(comma - arg) : strlen(arg);
	int rc;

	snprintf(port->dev_name, sizeof(port->dev_name), "%.*s", (int)n, arg);
	rc = port_dev_probe(port, arg, err, errlen);
	port->dev_is_vdev = !strncmp(arg, "net_", 4);
	return rc;
}

/* The device's MAC, or ours given to it (promiscuous if it refuses). */
static void dpdk_mac(struct rocemu_port *port, const struct rte_ether_addr *dev_mac)
{
	port_pick_mac(port, dev_mac, true);
	if (!dev_mac || !rte_is_same_ether_addr(dev_mac, &port->mac))
		if (rte_eth_dev_default_mac_addr_set(port->port_id, &port->mac))
			rte_eth_promiscuous_enable(port->port_id);
	rte_eth_allmulticast_enable(port->port_id); /* IPv6 ND multicast */
}

const struct port_link_ops port_link_dpdk = {
    .name = "dpdk",
    .prefix = "dpdk:",
    .usage = "dpdk:DEVARGS",
    .check_arg = dpdk_check_arg,
    .needs_pci = dpdk_needs_pci,
    .create = dpdk_create,
    .set_dev_mtu = true,
    .mac = dpdk_mac,
};
