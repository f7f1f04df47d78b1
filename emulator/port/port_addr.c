/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The port's addresses: its MAC (--mac, the link's, or one generated from
 * the name and spec), the GID table (link-local from the MAC, then one per
 * --ip), the Ethernet and IB MTUs, the link state; and the MAC a config will
 * give a port before it is opened (for GUIDs).
 */
#include <errno.h>
#include <string.h>

#include <rte_ethdev.h>

#include "port_link.h"

/*
 * Bytes a RoCEv2 packet adds around the IB payload at the IP layer, worst case:
 * IPv6 40 + UDP 8 + BTH 12 + 28 (the largest extension headers, AtomicETH) +
 * ICRC 4 = 92. The active MTU is chosen so that this fits the Ethernet MTU for
 * either IP version.
 */
#define ROCE_IP_OVERHEAD_MAX (40 + 8 + 12 + 28 + 4)

/* A stable locally administered unicast MAC from the device name and spec. */
void port_generated_mac(const struct rocemu_port_config *cfg, uint8_t mac[6])
{
	uint64_t h = 0xcbf29ce484222325ull;
	const char *parts[2] = {cfg->name, cfg->spec};

	for (int p = 0; p < 2; p++) {
		for (const char *c = parts[p]; *c; c++) {
			h ^= (uint8_t)*c;
			h *= 0x100000001b3ull;
		}
		h ^= 0xff;
		h *= 0x100000001b3ull;
	}
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)(h >> (8 * i));
	mac[0] = (uint8_t)((mac[0] & 0xfc) | 0x02);
}

void port_pick_mac(struct rocemu_port *port, const struct rte_ether_addr *dev_mac, bool use_dev)
{
	if (port->cfg.mac_set)
		memcpy(port->mac.addr_bytes, port->cfg.mac, 6);
	else if (use_dev && dev_mac)
		port->mac = *dev_mac;
	else
		port_generated_mac(&port->cfg, port->mac.addr_bytes);
}

int rocemu_port_config_mac(const struct rocemu_port_config *cfg, uint8_t mac[6])
{
	const struct port_link_ops *link;
	char arg[ROCEMU_PORT_SPEC_MAX];

	if (cfg->mac_set) {
		memcpy(mac, cfg->mac, 6);
		return 0;
	}
	link = port_link_parse(cfg->spec, arg, sizeof(arg), NULL, 0);
	if (!link)
		return -EINVAL;
	return link->preview_mac ? link->preview_mac(cfg, arg, mac) : -ENODATA;
}

void port_choose_mac(struct rocemu_port *port)
{
	struct rte_ether_addr dev_mac;
	bool have = port->port_id != UINT16_MAX &&
		    rte_eth_macaddr_get(port->port_id, &dev_mac) == 0 &&
		    !rte_is_zero_ether_addr(&dev_mac);

	if (port->link->mac)
		port->link->mac(port, have ? &dev_mac : NULL);
	else
		port_pick_mac(port, NULL, false);
}

void port_build_gid_table(struct rocemu_port *port)
{
	const uint8_t *m = port->mac.addr_bytes;
	uint8_t *g = port->gids[0];

	/* 0: link-local fe80::/64 with the modified EUI-64 of the MAC (RFC 4291 2.5.1) */
	memset(g, 0, 16);
	g[0] = 0xfe;
	g[1] = 0x80;
	g[8] = m[0] ^ 0x02;
	g[9] = m[1];
	g[10] = m[2];
	g[11] = 0xff;
	g[12] = 0xfe;
	g[13] = m[3];
	g[14] = m[4];
	g[15] = m[5];
	port->gid_prefix[0] = 64;
	port->n_gids = 1;
	for (unsigned i = 0; i < port->cfg.n_ips; i++) {
		memcpy(port->gids[port->n_gids], port->cfg.ips[i].gid, 16);
		port->gid_prefix[port->n_gids] = port->cfg.ips[i].prefix;
		port->n_gids++;
	}
}

void rocemu_port_mac(const struct rocemu_port *port, uint8_t mac[6])
{
	memcpy(mac, port->mac.addr_bytes, 6);
}

unsigned rocemu_port_gid_count(const struct rocemu_port *port)
{
	return port->n_gids;
}

int rocemu_port_gid(const struct rocemu_port *port, unsigned index, uint8_t gid[16])
{
	if (index >= port->n_gids)
		return -EINVAL;
	memcpy(gid, port->gids[index], 16);
	return 0;
}

int rocemu_port_gid_find(const struct rocemu_port *port, const uint8_t gid[16])
{
	for (unsigned i = 0; i < port->n_gids; i++)
		if (!memcmp(port->gids[i], gid, 16))
			return (int)i;
	return -1;
}

uint16_t rocemu_port_eth_mtu(const struct rocemu_port *port)
{
	return port->eth_mtu;
}

uint16_t rocemu_port_vlan(const struct rocemu_port *port)
{
	return port->cfg.vlan;
}

uint32_t rocemu_port_active_mtu(const struct rocemu_port *port)
{
	uint32_t room = port->eth_mtu;

	if (room > port->max_frame - 18)
		room = port->max_frame - 18;
	for (uint32_t mtu = 4096; mtu >= 256; mtu >>= 1)
		if (mtu + ROCE_IP_OVERHEAD_MAX <= room)
			return mtu;
	return 256;
}

bool rocemu_port_link_up(const struct rocemu_port *port)
{
	struct rte_eth_link link;

	if (port->link->link_up)
		return port->link->link_up(port);
	if (rte_eth_link_get_nowait(port->port_id, &link))
		return false;
	return link.link_status == RTE_ETH_LINK_UP;
}

uint32_t rocemu_port_link_speed(const struct rocemu_port *port)
{
	struct rte_eth_link link;

	if (port->port_id == UINT16_MAX || rte_eth_link_get_nowait(port->port_id, &link) ||
	    link.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN)
		return 0;
	return link.link_speed;
}
