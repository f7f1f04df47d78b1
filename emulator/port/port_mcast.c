/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Multicast groups the port takes frames for: the groups UD QPs are attached
 * to (transport/mcast.c). A group is a GID that is an IP multicast address
 * (IPv4-mapped 224.0.0.0/4, or ff00::/8); its frames come to the mapped
 * Ethernet MAC (RFC 1112 6.4, RFC 2464 7). Joining a group also tells the
 * segment, as a host's IP stack does, so that a snooping bridge or switch
 * forwards the group's frames to this port: an IGMPv2 Membership Report
 * (RFC 2236) for IPv4 groups, an MLDv1 Report (RFC 2710) for IPv6 ones, each
 * sent twice (the unsolicited report is repeated: 3.1 of RFC 2236), again in
 * answer to a Membership Query, and a Leave / Done when the last user goes.
 * All under the engine lock.
 */
#include <errno.h>
#include <string.h>

#include <rte_ethdev.h>
#include <rte_ip.h>

#include "port_link.h"

#define IGMP_QUERY	      0x11
#define IGMP_V1_REPORT	      0x12
#define IGMP_V2_REPORT	      0x16
#define IGMP_LEAVE	      0x17
#define IGMP_V3_REPORT	      0x22
#define MLD_QUERY	      130
#define MLD_REPORT	      131
#define MLD_DONE	      132
#define IPV4_OPT_ROUTER_ALERT 0x94040000u /* option 148, length 4, value 0 (RFC 2113) */
#define IGMP_FRAME_LEN	      60	  /* 14 + 24 + 8, padded to the Ethernet minimum */
#define MLD_FRAME_LEN	      86	  /* 14 + 40 + 8 (hop-by-hop) + 24 */
#define IGMP_TOS	      0xc0	  /* internetwork control, as Linux sends IGMP */

static bool gid_v4(const uint8_t gid[16])
{
	return port_gid_is_v4(gid);
}

bool rocemu_gid_is_multicast(const uint8_t gid[16])
{
	if (gid_v4(gid))
		return (gid[12] & 0xf0) == 0xe0;
	return gid[0] == 0xff;
}

void port_mcast_mac(const uint8_t gid[16], uint8_t mac[6])
{
	if (gid_v4(gid)) {
		mac[0] = 0x01;
		mac[1] = 0x00;
		mac[2] = 0x5e;
		mac[3] = gid[13] & 0x7f;
		mac[4] = gid[14];
		mac[5] = gid[15];
		return;
	}
	mac[0] = 0x33;
	mac[1] = 0x33;
	memcpy(mac + 2, gid + 12, 4);
}

static int group_find(const struct rocemu_port *port, const uint8_t gid[16])
{
	for (unsigned i = 0; i < port->n_mcast; i++)
		if (!memcmp(port->mcast[i].gid, gid, 16))
			return (int)i;
	return -1;
}

bool port_mcast_ip_joined(const struct rocemu_port *port, const uint8_t gid[16])
{
	return port->n_mcast && group_find(port, gid) >= 0;
}

bool port_mcast_mac_joined(const struct rocemu_port *port, const uint8_t mac[6])
{
	uint8_t m[6];

	for (unsigned i = 0; i < port->n_mcast; i++) {
		port_mcast_mac(port->mcast[i].gid, m);
		if (!memcmp(m, mac, 6))
			return true;
	}
	return false;
}

/* The port's first IPv4 address (network order), 0 when it has none. */
static uint32_t first_ipv4(const struct rocemu_port *port)
{
	for (unsigned i = 0; i < port->n_gids; i++)
		if (gid_v4(port->gids[i]))
			return port_gid_ipv4(port->gids[i]);
	return 0;
}

/* An IGMPv2 message of type to dst about group (both network order). */
static int igmp_send(struct rocemu_port *port, uint8_t type, uint32_t dst, uint32_t group)
{
	struct rte_mbuf *m = port_frame_alloc(port, IGMP_FRAME_LEN);
	struct rte_ether_hdr *eth;
	struct rte_ipv4_hdr *ip;
	uint8_t dgid[16], *igmp;
	uint32_t ra = rte_cpu_to_be_32(IPV4_OPT_ROUTER_ALERT);
	uint16_t ck;

	if (!m)
		return -ENOBUFS;
	eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	ip = (struct rte_ipv4_hdr *)(eth + 1);
	port_gid_from_ipv4(dgid, dst);
	port_mcast_mac(dgid, eth->dst_addr.addr_bytes);
	eth->src_addr = port->mac;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	ip->version_ihl = 0x46; /* 24 bytes: the Router Alert option */
	ip->type_of_service = IGMP_TOS;
	ip->total_length = rte_cpu_to_be_16(24 + 8);
	ip->time_to_live = 1;
	ip->next_proto_id = IPPROTO_IGMP;
	ip->src_addr = first_ipv4(port);
	ip->dst_addr = dst;
	memcpy(ip + 1, &ra, 4);
	ip->hdr_checksum = (uint16_t)~rte_raw_cksum(ip, 24);
	igmp = (uint8_t *)ip + 24;
	igmp[0] = type;
	memcpy(igmp + 4, &group, 4);
	ck = (uint16_t)~rte_raw_cksum(igmp, 8);
	memcpy(igmp + 2, &ck, 2);
	port_count(port, PC_IGMP_TX);
	return rocemu_port_tx(port, m);
}

/* The port's link-local IPv6 address (MLD's source, RFC 2710 3), or ::. */
static void link_local6(const struct rocemu_port *port, uint8_t out[16])
{
	memset(out, 0, 16);
	for (unsigned i = 0; i < port->n_gids; i++)
		if (port->gids[i][0] == 0xfe && (port->gids[i][1] & 0xc0) == 0x80) {
			memcpy(out, port->gids[i], 16);
			return;
		}
}

/* An MLDv1 message of type to dst about group. */
static int mld_send(struct rocemu_port *port, uint8_t type, const uint8_t dst[16],
		    const uint8_t group[16])
{
	struct rte_mbuf *m = port_frame_alloc(port, MLD_FRAME_LEN);
	struct rte_ether_hdr *eth;
	struct rte_ipv6_hdr *ip;
	uint8_t *hbh, *mld;
	uint16_t ck;

	if (!m)
		return -ENOBUFS;
	eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	ip = (struct rte_ipv6_hdr *)(eth + 1);
	port_mcast_mac(dst, eth->dst_addr.addr_bytes);
	eth->src_addr = port->mac;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
	ip->vtc_flow = rte_cpu_to_be_32(6u << 28);
	ip->payload_len = rte_cpu_to_be_16(8 + 24);
	ip->proto = 0; /* hop-by-hop options first */
	ip->hop_limits = 1;
	link_local6(port, ip->src_addr);
	memcpy(ip->dst_addr, dst, 16);
	hbh = (uint8_t *)(ip + 1);
	hbh[0] = IPPROTO_ICMPV6;
	hbh[1] = 0; /* 8 bytes */
	hbh[2] = 5; /* Router Alert (RFC 2711) */
	hbh[3] = 2; /* its length */
	hbh[4] = 0; /* value 0: MLD */
	hbh[5] = 0;
	hbh[6] = 1; /* PadN */
	hbh[7] = 0;
	mld = hbh + 8; /* type, code, checksum, max delay, reserved, group */
	mld[0] = type;
	memcpy(mld + 8, group, 16);
	/* the pseudo-header's next header is ICMPv6 whatever comes between */
	ck = port_icmp6_checksum((const uint8_t *)ip, mld, 24);
	memcpy(mld + 2, &ck, 2);
	port_count(port, PC_MLD_TX);
	return rocemu_port_tx(port, m);
}

static void announce(struct rocemu_port *port, const uint8_t gid[16], bool join)
{
	static const uint8_t all_routers6[16] = {0xff, 0x02, [15] = 2};
	static const uint8_t all_routers4[16] = {[10] = 0xff, 0xff, 224, 0, 0, 2};

	if (gid_v4(gid)) {
		if (join)
			igmp_send(port, IGMP_V2_REPORT, port_gid_ipv4(gid), port_gid_ipv4(gid));
		else
			igmp_send(port, IGMP_LEAVE, port_gid_ipv4(all_routers4),
				  port_gid_ipv4(gid));
		return;
	}
	if (join)
		mld_send(port, MLD_REPORT, gid, gid);
	else
		mld_send(port, MLD_DONE, all_routers6, gid);
}

/* 224.0.0.1 and ff02::1 are joined by every host without a report (RFC 2236
 * 6, RFC 2710 5); other link-local groups are reported. */
static bool needs_report(const uint8_t gid[16])
{
	static const uint8_t all_nodes6[16] = {0xff, 0x02, [15] = 1};
	static const uint8_t all_hosts4[4] = {224, 0, 0, 1};

	if (gid_v4(gid))
		return memcmp(gid + 12, all_hosts4, 4) != 0;
	return memcmp(gid, all_nodes6, 16) != 0;
}

int rocemu_port_mcast_join(struct rocemu_port *port, const uint8_t gid[16])
{
	int i;

	if (!rocemu_gid_is_multicast(gid))
		return -EINVAL;
	if (port->link->resolve) /* the host link: the host does not replicate groups */
		return -EOPNOTSUPP;
	i = group_find(port, gid);
	if (i >= 0) {
		port->mcast[i].users++;
		return 0;
	}
	if (port->n_mcast == ROCEMU_PORT_MAX_MCAST)
		return -ENOMEM;
	memcpy(port->mcast[port->n_mcast].gid, gid, 16);
	port->mcast[port->n_mcast].users = 1;
	port->n_mcast++;
	/* a NIC that filters by MAC must pass the group's: all-multicast is the
	 * one switch every driver has (memif and rings have no filter) */
	if (port->port_id != UINT16_MAX)
		rte_eth_allmulticast_enable(port->port_id);
	if (needs_report(gid)) {
		announce(port, gid, true);
		announce(port, gid, true);
	}
	return 0;
}

int rocemu_port_mcast_leave(struct rocemu_port *port, const uint8_t gid[16])
{
	int i = group_find(port, gid);

	if (i < 0)
		return -EINVAL;
	if (--port->mcast[i].users)
		return 0;
	if (needs_report(gid))
		announce(port, gid, false);
	port->mcast[i] = port->mcast[--port->n_mcast];
	return 0;
}

/* A query: report every group it asks about (a general query: all). */
static void answer_query(struct rocemu_port *port, const uint8_t *asked, bool v4)
{
	static const uint8_t zero[16];

	port_count(port, PC_MCAST_QUERIES_RX);
	for (unsigned i = 0; i < port->n_mcast; i++) {
		const uint8_t *g = port->mcast[i].gid;

		if (gid_v4(g) != v4 || !needs_report(g))
			continue;
		if (v4 ? (memcmp(asked + 12, zero, 4) && memcmp(asked + 12, g + 12, 4))
		       : (memcmp(asked, zero, 16) && memcmp(asked, g, 16)))
			continue;
		announce(port, g, true);
	}
}

void port_igmp_input(struct rocemu_port *port, struct rte_mbuf *m, uint32_t l3_off)
{
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	const struct rte_ipv4_hdr *ip = (const struct rte_ipv4_hdr *)(f + l3_off);
	uint32_t hlen = (uint32_t)(ip->version_ihl & 0xf) * 4;
	uint8_t asked[16];

	if (hlen < 20 || m->data_len < l3_off + hlen + 8 || ip->time_to_live != 1 ||
	    rte_raw_cksum(f + l3_off + hlen, 8) != 0xffff) {
		rte_pktmbuf_free(m);
		port_count(port, PC_DROP_IGMP_INVALID);
		port_count(port, PC_RX_DROPS);
		return;
	}
	/* reports of other hosts need no answer from a host (v2 suppression
	 * is optional; we always report on a query) */
	if (f[l3_off + hlen] == IGMP_QUERY) {
		port_gid_from_ipv4(asked, 0);
		memcpy(asked + 12, f + l3_off + hlen + 4, 4);
		answer_query(port, asked, true);
	}
	rte_pktmbuf_free(m);
}

void port_mld_input(struct rocemu_port *port, struct rte_mbuf *m, uint32_t l3_off)
{
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	const struct rte_ipv6_hdr *ip = (const struct rte_ipv6_hdr *)(f + l3_off);
	const uint8_t *hbh = (const uint8_t *)(ip + 1), *mld;
	uint32_t hlen;

	/* MLD comes after a hop-by-hop header (the Router Alert), hop limit 1 */
	if (m->data_len < l3_off + 40 + 8 + 24 || ip->hop_limits != 1)
		goto invalid;
	hlen = ((uint32_t)hbh[1] + 1) * 8;
	mld = hbh + hlen;
	if (hbh[0] != IPPROTO_ICMPV6 || m->data_len < l3_off + 40 + hlen + 24 ||
	    rte_be_to_cpu_16(ip->payload_len) < hlen + 24 ||
	    m->data_len < l3_off + 40 + rte_be_to_cpu_16(ip->payload_len) ||
	    port_icmp6_checksum((const uint8_t *)ip, mld,
				rte_be_to_cpu_16(ip->payload_len) - hlen) != 0)
		goto invalid;
	if (mld[0] == MLD_QUERY)
		answer_query(port, mld + 8, false);
	rte_pktmbuf_free(m);
	return;
invalid:
	rte_pktmbuf_free(m);
	port_count(port, PC_DROP_MLD_INVALID);
	port_count(port, PC_RX_DROPS);
}
