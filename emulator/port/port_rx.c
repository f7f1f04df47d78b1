/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Receive dispatch: every frame from the device or the loopback FIFO is
 * either handed on (ARP/ND, ICMP echo, RoCEv2 to the upper layer) or dropped
 * and counted under the reason. RoCEv2 frames are parsed by the wire codec
 * with ICRC verification; its parse status names are the drop reasons.
 */
#include <string.h>

#include <rte_ether.h>
#include <rte_ip.h>

#include "../wire/roce_mbuf.h"
#include "port_internal.h"

static void drop(struct rocemu_port *port, struct rte_mbuf *m, enum port_counter reason)
{
	rte_pktmbuf_free(m);
	port_count(port, reason);
	port_count(port, PC_RX_DROPS);
}

/* The drop counter of each of the codec's parse statuses: "drop_" and the
 * status's name (the counters unit test checks that they match). */
static const enum port_counter parse_drops[ROCE_PARSE_STATUS_COUNT] = {
    [ROCE_PARSE_TRUNCATED] = PC_DROP_TRUNCATED,
    [ROCE_PARSE_NOT_IP] = PC_DROP_NOT_IP,
    [ROCE_PARSE_BAD_IP_VERSION] = PC_DROP_BAD_IP_VERSION,
    [ROCE_PARSE_BAD_IP_LENGTH] = PC_DROP_BAD_IP_LENGTH,
    [ROCE_PARSE_BAD_IP_CHECKSUM] = PC_DROP_BAD_IP_CHECKSUM,
    [ROCE_PARSE_IP_OPTIONS] = PC_DROP_IP_OPTIONS,
    [ROCE_PARSE_IP_FRAGMENT] = PC_DROP_IP_FRAGMENT,
    [ROCE_PARSE_NOT_UDP] = PC_DROP_NOT_UDP,
    [ROCE_PARSE_NOT_ROCE_PORT] = PC_DROP_NOT_ROCE_PORT,
    [ROCE_PARSE_BAD_UDP_LENGTH] = PC_DROP_BAD_UDP_LENGTH,
    [ROCE_PARSE_BAD_TVER] = PC_DROP_BAD_TVER,
    [ROCE_PARSE_UNKNOWN_OPCODE] = PC_DROP_UNKNOWN_OPCODE,
    [ROCE_PARSE_BAD_LENGTH] = PC_DROP_BAD_LENGTH,
    [ROCE_PARSE_BAD_ICRC] = PC_DROP_BAD_ICRC,
};

enum port_counter port_parse_drop(enum roce_parse_status st)
{
	return (unsigned)st < ROCE_PARSE_STATUS_COUNT && parse_drops[st] ? parse_drops[st]
									 : PC_DROP_TRUNCATED;
}

bool port_ip_is_ours(const struct rocemu_port *port, const uint8_t gid[16])
{
	return rocemu_port_gid_find(port, gid) >= 0;
}

static bool is_solicited_node_of_ours(const struct rocemu_port *port, const uint8_t *last3)
{
	for (unsigned i = 0; i < port->n_gids; i++)
		if (!port_gid_is_v4(port->gids[i]) && !memcmp(port->gids[i] + 13, last3, 3))
			return true;
	return false;
}

bool port_mac_accepted(const struct rocemu_port *port, const struct rte_ether_addr *dst)
{
	const uint8_t *d = dst->addr_bytes;

	if (rte_is_same_ether_addr(dst, &port->mac) || rte_is_broadcast_ether_addr(dst))
		return true;
	/* 224.0.0.1, every IPv4 host's group (RFC 1112 4): IGMP queries */
	if (d[0] == 0x01 && d[1] == 0 && d[2] == 0x5e && d[3] == 0 && d[4] == 0 && d[5] == 1)
		return true;
	if ((d[0] & 1) && port_mcast_mac_joined(port, d))
		return true;
	if (d[0] != 0x33 || d[1] != 0x33)
		return false;
	/* IPv6 all-nodes and our solicited-node groups (RFC 2464 section 7) */
	if (d[2] == 0 && d[3] == 0 && d[4] == 0 && d[5] == 1)
		return true;
	return d[2] == 0xff && is_solicited_node_of_ours(port, d + 3);
}

/* IPv6 destinations we accept: ours, ff02::1, our solicited-node groups. */
static bool ip6_dst_accepted(const struct rocemu_port *port, const uint8_t dst[16])
{
	static const uint8_t all_nodes[16] = {0xff, 0x02, [15] = 1};
	static const uint8_t sn_prefix[13] = {0xff, 0x02, [11] = 1, [12] = 0xff};

	if (port_ip_is_ours(port, dst) || !memcmp(dst, all_nodes, 16))
		return true;
	return !memcmp(dst, sn_prefix, 13) && is_solicited_node_of_ours(port, dst + 13);
}

void port_rx_flush_upper(struct rocemu_port *port)
{
	if (port->up_n == 0)
		return;
	port->upper.rx(port->upper.ctx, port->up_pkts, port->up_descs, port->up_n);
	port->up_n = 0;
}

static void rx_roce(struct rocemu_port *port, struct rte_mbuf *m)
{
	struct roce_pkt *desc = &port->up_descs[port->up_n];
	const struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);
	enum roce_parse_status st;

	bool group = false;

	/* RoCE is unicast to this port's MAC, or to a multicast group a UD QP
	 * is attached to: a frame to the broadcast or another multicast MAC
	 * (accepted above for ARP/ND) is no request to us. */
	if (!rte_is_same_ether_addr(&eth->dst_addr, &port->mac)) {
		if (!rte_is_multicast_ether_addr(&eth->dst_addr) ||
		    !port_mcast_mac_joined(port, eth->dst_addr.addr_bytes)) {
			drop(port, m, PC_DROP_ROCE_NOT_UNICAST);
			return;
		}
		group = true;
	}
	st = roce_mbuf_parse(m, ROCE_PARSE_VERIFY_ICRC, desc);

	if (st != ROCE_PARSE_OK) {
		drop(port, m, port_parse_drop(st));
		return;
	}
	if (group ? !port_mcast_ip_joined(port, desc->path.dst_gid)
		  : !port_ip_is_ours(port, desc->path.dst_gid)) {
		drop(port, m, PC_DROP_NOT_OUR_ADDRESS);
		return;
	}
	if (group)
		port_count(port, PC_RX_MCAST);
	if (!port->has_upper) {
		drop(port, m, PC_DROP_NO_UPPER);
		return;
	}
	port_count(port, PC_RX_ROCE);
	port->up_pkts[port->up_n++] = m;
	if (port->up_n == PORT_BURST)
		port_rx_flush_upper(port);
}

static void rx_ipv4(struct rocemu_port *port, struct rte_mbuf *m, uint64_t now)
{
	const struct rte_ipv4_hdr *ip;
	uint8_t dst[16];

	if (m->data_len < RTE_ETHER_HDR_LEN + sizeof(*ip)) {
		drop(port, m, PC_DROP_IP_TRUNCATED);
		return;
	}
	ip = rte_pktmbuf_mtod_offset(m, const struct rte_ipv4_hdr *, RTE_ETHER_HDR_LEN);
	port_gid_from_ipv4(dst, ip->dst_addr);
	if (ip->next_proto_id == IPPROTO_UDP) {
		rx_roce(port, m); /* the codec checks the headers and the destination */
		return;
	}
	if (ip->next_proto_id == IPPROTO_IGMP && rocemu_gid_is_multicast(dst)) {
		port_igmp_input(port, m, RTE_ETHER_HDR_LEN);
		return;
	}
	if (!port_ip_is_ours(port, dst)) {
		drop(port, m, PC_DROP_NOT_OUR_ADDRESS);
		return;
	}
	if (ip->next_proto_id == IPPROTO_ICMP)
		port_icmp4_input(port, m, RTE_ETHER_HDR_LEN, now);
	else
		drop(port, m, PC_DROP_UNSUPPORTED_PROTOCOL);
}

static void rx_ipv6(struct rocemu_port *port, struct rte_mbuf *m, uint64_t now)
{
	const struct rte_ipv6_hdr *ip;

	if (m->data_len < RTE_ETHER_HDR_LEN + sizeof(*ip)) {
		drop(port, m, PC_DROP_IP_TRUNCATED);
		return;
	}
	ip = rte_pktmbuf_mtod_offset(m, const struct rte_ipv6_hdr *, RTE_ETHER_HDR_LEN);
	if (ip->proto == IPPROTO_UDP) {
		rx_roce(port, m);
		return;
	}
	if (ip->proto == 0 && rocemu_gid_is_multicast(ip->dst_addr)) { /* hop-by-hop: MLD */
		port_mld_input(port, m, RTE_ETHER_HDR_LEN);
		return;
	}
	if (!ip6_dst_accepted(port, ip->dst_addr)) {
		drop(port, m, PC_DROP_NOT_OUR_ADDRESS);
		return;
	}
	if (ip->proto == IPPROTO_ICMPV6)
		port_nd_input(port, m, RTE_ETHER_HDR_LEN, now);
	else
		drop(port, m, PC_DROP_UNSUPPORTED_PROTOCOL);
}

/*
 * 802.1Q: a port without a VLAN takes untagged frames only (a tagged one
 * belongs to another segment); a port on VLAN V takes frames tagged V, with
 * the tag removed here (the stack below sees plain Ethernet), and untagged
 * ones only with --vlan-untagged accept. A tag the driver already stripped
 * (RTE_MBUF_F_RX_VLAN_STRIPPED) counts as a tag. False: dropped and counted.
 */
static bool vlan_accepted(struct rocemu_port *port, struct rte_mbuf *m)
{
	const struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);
	bool stripped = m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED;
	bool tagged = stripped || eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN);
	uint16_t tci;

	if (!tagged) {
		if (!port->cfg.vlan || port->cfg.vlan_untagged)
			return true;
		drop(port, m, PC_DROP_VLAN_UNTAGGED);
		return false;
	}
	if (!port->cfg.vlan) {
		drop(port, m, PC_DROP_VLAN_NOT_CONFIGURED);
		return false;
	}
	if (!stripped) {
		if (m->data_len < RTE_ETHER_HDR_LEN + sizeof(struct rte_vlan_hdr)) {
			drop(port, m, PC_DROP_RUNT);
			return false;
		}
		tci = rte_be_to_cpu_16(((const struct rte_vlan_hdr *)(eth + 1))->vlan_tci);
	} else {
		tci = m->vlan_tci;
	}
	if ((tci & 0xfff) != port->cfg.vlan) {
		drop(port, m, PC_DROP_VLAN_OTHER);
		return false;
	}
	if (!stripped)
		rte_vlan_strip(m);
	return true;
}

void port_rx_frame(struct rocemu_port *port, struct rte_mbuf *m, uint64_t now)
{
	const struct rte_ether_hdr *eth;

	/* the frame is freed in this thread, and its rx refills come from it */
	port_pool_thread_join(port);
	if (unlikely(m->nb_segs > 1) && rte_pktmbuf_linearize(m)) {
		drop(port, m, PC_DROP_RX_TOO_LONG);
		return;
	}
	if (unlikely(m->data_len < RTE_ETHER_HDR_LEN)) {
		drop(port, m, PC_DROP_RUNT);
		return;
	}
	/* Raw packet QPs of the upper layer: a steering rule may take the frame
	 * away from the port's stack, a sniffer gets a copy (transport/raw.c). */
	if (port->has_upper && port->upper.raw_rx && port->upper.raw_rx(port->upper.ctx, m)) {
		rte_pktmbuf_free(m);
		return;
	}
	eth = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);
	if (!port_mac_accepted(port, &eth->dst_addr)) {
		drop(port, m, PC_DROP_NOT_OUR_MAC);
		return;
	}
	if (!vlan_accepted(port, m))
		return;
	eth = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);
	switch (rte_be_to_cpu_16(eth->ether_type)) {
	case RTE_ETHER_TYPE_ARP:
		port_arp_input(port, m, now);
		return;
	case RTE_ETHER_TYPE_IPV4:
		rx_ipv4(port, m, now);
		return;
	case RTE_ETHER_TYPE_IPV6:
		rx_ipv6(port, m, now);
		return;
	default:
		drop(port, m, PC_DROP_UNSUPPORTED_ETHERTYPE);
		return;
	}
}
