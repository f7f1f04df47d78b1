/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ICMP and ICMPv6 echo: answer echo requests to our addresses (so `ping`
 * reaches the emulated NIC), and send echo requests (`rocemu port --ping`),
 * counting the replies and the round-trip time of the last one. The request
 * payload starts with the send time (rocemu_now_ns) in host order.
 */
#include <errno.h>
#include <string.h>

#include <rte_icmp.h>
#include <rte_ip.h>

#include "port_internal.h"

#define ICMP6_ECHO_REQUEST 128
#define ICMP6_ECHO_REPLY   129
#define PING_PAYLOAD	   56

static void drop(struct rocemu_port *port, struct rte_mbuf *m, enum port_counter reason)
{
	rte_pktmbuf_free(m);
	port_count(port, reason);
	port_count(port, PC_RX_DROPS);
}

static uint16_t icmp4_checksum(const void *p, uint32_t len)
{
	uint16_t s = rte_raw_cksum(p, len);

	return (uint16_t)~s;
}

/*
 * An echo reply counts only when it answers one of our requests: our
 * identifier and a sequence number sent and not answered yet. Anyone on
 * the segment can send echo replies; `rocemu port --ping` must not count
 * those, nor a duplicate.
 */
static bool reply_matches(struct rocemu_port *port, const uint8_t *icmp)
{
	uint16_t id = (uint16_t)(icmp[4] << 8 | icmp[5]), seq = (uint16_t)(icmp[6] << 8 | icmp[7]);
	unsigned slot = seq % PORT_PING_SLOTS;

	if (id != port->ping_id || !port->ping_pending[slot] || port->ping_seq[slot] != seq)
		return false;
	port->ping_pending[slot] = false;
	return true;
}

/* Echo replies we send: a token bucket, PORT_ICMP_RATE per second up to
 * PORT_ICMP_BURST, so the port is no amplifier for a flood. */
static bool reply_allowed(struct rocemu_port *port, uint64_t now)
{
	uint64_t elapsed = now - port->icmp_tokens_ns;
	uint64_t add = elapsed * PORT_ICMP_RATE / 1000000000ull;

	if (port->icmp_tokens_ns == 0 || add >= PORT_ICMP_BURST) {
		port->icmp_tokens = PORT_ICMP_BURST;
		port->icmp_tokens_ns = now;
	} else if (add > 0) {
		port->icmp_tokens += (uint32_t)add;
		if (port->icmp_tokens > PORT_ICMP_BURST)
			port->icmp_tokens = PORT_ICMP_BURST;
		port->icmp_tokens_ns += add * 1000000000ull / PORT_ICMP_RATE;
	}
	if (port->icmp_tokens == 0)
		return false;
	port->icmp_tokens--;
	return true;
}

/* A broadcast or multicast IPv4 source: 0.0.0.0, 255.255.255.255, class D
 * and E, or the broadcast address of one of our subnets. */
static bool ipv4_source_is_group(const struct rocemu_port *port, uint32_t src_be)
{
	uint32_t s = rte_be_to_cpu_32(src_be);

	if (s == 0 || s == UINT32_MAX || (s >> 28) >= 0xe)
		return true;
	for (unsigned i = 1; i < port->n_gids; i++) {
		unsigned bits = port->gid_prefix[i];
		uint32_t host_mask;

		if (!port_gid_is_v4(port->gids[i]) || bits == 0 || bits >= 31)
			continue;
		host_mask = UINT32_MAX >> bits;
		if ((s & ~host_mask) ==
			(rte_be_to_cpu_32(port_gid_ipv4(port->gids[i])) & ~host_mask) &&
		    (s & host_mask) == host_mask)
			return true;
	}
	return false;
}

static void note_reply(struct rocemu_port *port, const uint8_t *payload, uint32_t len, uint64_t now)
{
	uint64_t sent;

	port_count(port, PC_PING_REPLIES);
	if (len >= sizeof(sent)) {
		memcpy(&sent, payload, sizeof(sent));
		if (sent && sent <= now && now - sent < 60000000000ull)
			__atomic_store_n(&port->ping_last_rtt_ns, now - sent, __ATOMIC_RELAXED);
	}
	/* last: a reader that sees the new count sees the RTT too */
	__atomic_store_n(&port->ping_replies, port->ping_replies + 1, __ATOMIC_RELEASE);
}

static void swap_macs(struct rte_mbuf *m)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_ether_addr t = eth->src_addr;

	eth->src_addr = eth->dst_addr;
	eth->dst_addr = t;
}

void port_icmp4_input(struct rocemu_port *port, struct rte_mbuf *m, uint32_t l3_off, uint64_t now)
{
	struct rte_ipv4_hdr *ip = rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *, l3_off);
	uint32_t ihl = (uint32_t)(ip->version_ihl & 0x0f) * 4;
	uint32_t total = rte_be_to_cpu_16(ip->total_length);
	struct rte_icmp_hdr *icmp;
	uint32_t icmp_len;
	uint32_t tmp;

	if ((ip->version_ihl >> 4) != 4 || ihl < 20 || total < ihl + sizeof(*icmp) ||
	    l3_off + total > m->data_len) {
		drop(port, m, PC_DROP_IP_BAD_HEADER);
		return;
	}
	if (rte_raw_cksum(ip, ihl) != 0xffff) {
		drop(port, m, PC_DROP_BAD_IP_CHECKSUM); /* as the codec names it */
		return;
	}
	if (ip->fragment_offset &
	    rte_cpu_to_be_16(RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK)) {
		drop(port, m, PC_DROP_IP_FRAGMENT);
		return;
	}
	icmp = (struct rte_icmp_hdr *)((uint8_t *)ip + ihl);
	icmp_len = total - ihl;
	if (icmp4_checksum(icmp, icmp_len) != 0) {
		drop(port, m, PC_DROP_ICMP_BAD_CHECKSUM);
		return;
	}
	if (icmp->icmp_type == RTE_IP_ICMP_ECHO_REPLY) {
		if (!reply_matches(port, (const uint8_t *)icmp)) {
			drop(port, m, PC_DROP_ICMP_REPLY_UNMATCHED);
			return;
		}
		note_reply(port, (const uint8_t *)(icmp + 1), icmp_len - (uint32_t)sizeof(*icmp),
			   now);
		rte_pktmbuf_free(m);
		return;
	}
	if (icmp->icmp_type != RTE_IP_ICMP_ECHO_REQUEST || icmp->icmp_code != 0) {
		drop(port, m, PC_DROP_ICMP_UNHANDLED);
		return;
	}
	/* RFC 1122 3.2.2.6, RFC 1812 4.3.2.7: no reply to a broadcast or
	 * multicast source (the reply would go to many: a smurf reflector) */
	if (ipv4_source_is_group(port, ip->src_addr) ||
	    !rte_is_unicast_ether_addr(&rte_pktmbuf_mtod(m, struct rte_ether_hdr *)->src_addr)) {
		drop(port, m, PC_DROP_ICMP_BAD_SOURCE);
		return;
	}
	port_count(port, PC_ICMP_ECHO_RX);
	{
		uint8_t dst[16];

		port_gid_from_ipv4(dst, ip->dst_addr);
		if (port_left_to_kernel(port, rocemu_port_gid_find(port, dst))) {
			rte_pktmbuf_free(m);
			return;
		}
	}
	if (!reply_allowed(port, now)) {
		drop(port, m, PC_DROP_ICMP_RATE_LIMITED);
		return;
	}
	/* the request becomes the reply (RFC 792): swap addresses, type 0 */
	rte_pktmbuf_trim(m, (uint16_t)(m->pkt_len - (l3_off + total)));
	swap_macs(m);
	tmp = ip->src_addr;
	ip->src_addr = ip->dst_addr;
	ip->dst_addr = tmp;
	ip->time_to_live = 64;
	ip->hdr_checksum = 0;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	icmp->icmp_type = RTE_IP_ICMP_ECHO_REPLY;
	icmp->icmp_cksum = 0;
	icmp->icmp_cksum = icmp4_checksum(icmp, icmp_len);
	port_count(port, PC_ICMP_ECHO_REPLIES_TX);
	rocemu_port_tx(port, m);
}

void port_icmp6_echo_input(struct rocemu_port *port, struct rte_mbuf *m, uint32_t l3_off,
			   uint32_t l4_off, uint64_t now)
{
	struct rte_ipv6_hdr *ip = rte_pktmbuf_mtod_offset(m, struct rte_ipv6_hdr *, l3_off);
	uint8_t *l4 = rte_pktmbuf_mtod_offset(m, uint8_t *, l4_off);
	uint32_t plen = rte_be_to_cpu_16(ip->payload_len);
	uint8_t src[16];
	uint16_t ck;
	int idx;

	if (l4[0] == ICMP6_ECHO_REPLY) {
		if (!reply_matches(port, l4)) {
			drop(port, m, PC_DROP_ICMP_REPLY_UNMATCHED);
			return;
		}
		note_reply(port, l4 + 8, plen - 8, now);
		rte_pktmbuf_free(m);
		return;
	}
	if (l4[1] != 0) {
		drop(port, m, PC_DROP_ICMP6_UNHANDLED);
		return;
	}
	/* RFC 4443 2.2: a multicast source is invalid; no reply to a group */
	if (ip->src_addr[0] == 0xff ||
	    !rte_is_unicast_ether_addr(&rte_pktmbuf_mtod(m, struct rte_ether_hdr *)->src_addr)) {
		drop(port, m, PC_DROP_ICMP_BAD_SOURCE);
		return;
	}
	port_count(port, PC_ICMP_ECHO_RX);
	/* reply from the address asked, or (multicast request) our best match */
	idx = rocemu_port_gid_find(port, ip->dst_addr);
	if (port_left_to_kernel(port, idx)) {
		rte_pktmbuf_free(m);
		return;
	}
	if (idx < 0)
		idx = port_pick_src(port, ip->src_addr);
	if (idx < 0) {
		drop(port, m, PC_DROP_NO_SOURCE_ADDRESS);
		return;
	}
	if (!reply_allowed(port, now)) {
		drop(port, m, PC_DROP_ICMP_RATE_LIMITED);
		return;
	}
	memcpy(src, port->gids[idx], 16);
	rte_pktmbuf_trim(m, (uint16_t)(m->pkt_len - (l4_off + plen)));
	swap_macs(m);
	{
		struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
		eth->src_addr = port->mac; /* the request may have gone to a multicast MAC */
	}
	memcpy(ip->dst_addr, ip->src_addr, 16);
	memcpy(ip->src_addr, src, 16);
	ip->hop_limits = 64;
	l4[0] = ICMP6_ECHO_REPLY;
	l4[2] = l4[3] = 0;
	ck = port_icmp6_checksum((const uint8_t *)ip, l4, plen);
	memcpy(l4 + 2, &ck, 2);
	port_count(port, PC_ICMP_ECHO_REPLIES_TX);
	rocemu_port_tx(port, m);
}

static int build_ping(struct rocemu_port *port, const uint8_t src[16], const uint8_t dst[16],
		      const uint8_t mac[6], uint16_t id, uint16_t seq)
{
	bool v4 = port_gid_is_v4(dst);
	uint16_t l3 = v4 ? sizeof(struct rte_ipv4_hdr) : sizeof(struct rte_ipv6_hdr);
	uint16_t len = RTE_ETHER_HDR_LEN + l3 + 8 + PING_PAYLOAD;
	struct rte_mbuf *m = rte_pktmbuf_alloc(port->pool);
	struct rte_ether_hdr *eth;
	uint8_t *l4, *p;
	uint64_t now;

	if (!m)
		return -ENOBUFS;
	p = (uint8_t *)rte_pktmbuf_append(m, len);
	if (!p) {
		rte_pktmbuf_free(m);
		return -ENOBUFS;
	}
	memset(p, 0, len);
	eth = (struct rte_ether_hdr *)p;
	memcpy(eth->dst_addr.addr_bytes, mac, 6);
	eth->src_addr = port->mac;
	l4 = p + RTE_ETHER_HDR_LEN + l3;
	l4[0] = v4 ? RTE_IP_ICMP_ECHO_REQUEST : ICMP6_ECHO_REQUEST;
	l4[4] = (uint8_t)(id >> 8);
	l4[5] = (uint8_t)id;
	l4[6] = (uint8_t)(seq >> 8);
	l4[7] = (uint8_t)seq;
	for (unsigned i = 8; i < PING_PAYLOAD; i++)
		l4[8 + i] = (uint8_t)i;
	now = rocemu_now_ns();
	memcpy(l4 + 8, &now, sizeof(now));
	if (v4) {
		struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
		uint16_t ck;

		eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
		ip->version_ihl = RTE_IPV4_VHL_DEF;
		ip->total_length = rte_cpu_to_be_16((uint16_t)(l3 + 8 + PING_PAYLOAD));
		ip->packet_id = rte_cpu_to_be_16(seq);
		ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
		ip->time_to_live = 64;
		ip->next_proto_id = IPPROTO_ICMP;
		ip->src_addr = port_gid_ipv4(src);
		ip->dst_addr = port_gid_ipv4(dst);
		ip->hdr_checksum = rte_ipv4_cksum(ip);
		ck = icmp4_checksum(l4, 8 + PING_PAYLOAD);
		memcpy(l4 + 2, &ck, 2);
	} else {
		struct rte_ipv6_hdr *ip = (struct rte_ipv6_hdr *)(eth + 1);
		uint16_t ck;

		eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
		ip->vtc_flow = rte_cpu_to_be_32(6u << 28);
		ip->payload_len = rte_cpu_to_be_16(8 + PING_PAYLOAD);
		ip->proto = IPPROTO_ICMPV6;
		ip->hop_limits = 64;
		memcpy(ip->src_addr, src, 16);
		memcpy(ip->dst_addr, dst, 16);
		ck = port_icmp6_checksum((const uint8_t *)ip, l4, 8 + PING_PAYLOAD);
		memcpy(l4 + 2, &ck, 2);
	}
	port_count(port, PC_PING_TX);
	return rocemu_port_tx(port, m);
}

int rocemu_port_ping(struct rocemu_port *port, const uint8_t dst[16], uint16_t id, uint16_t seq)
{
	uint8_t mac[6];
	int src, rc;

	rocemu_port_verb_enter(port, ROCEMU_VERB_CONTROL);
	src = port_pick_src(port, dst);
	if (src < 0) {
		rc = -ENETUNREACH;
		goto out;
	}
	rc = rocemu_port_resolve(port, (unsigned)src, dst, mac);
	if (rc == 0) {
		/* expect the reply to this identifier and sequence number */
		port->ping_id = id;
		port->ping_seq[seq % PORT_PING_SLOTS] = seq;
		port->ping_pending[seq % PORT_PING_SLOTS] = true;
		rc = build_ping(port, port->gids[src], dst, mac, id, seq);
	}
	if (rc == 0 || rc == -EAGAIN)
		rocemu_port_flush(port);
out:
	rocemu_port_verb_leave(port, ROCEMU_DID_CHANGE); /* the thread flushes what is left */
	return rc;
}

uint64_t rocemu_port_ping_replies(const struct rocemu_port *port)
{
	return __atomic_load_n(&port->ping_replies, __ATOMIC_ACQUIRE);
}

uint64_t rocemu_port_ping_last_rtt_ns(const struct rocemu_port *port)
{
	return __atomic_load_n(&port->ping_last_rtt_ns, __ATOMIC_RELAXED);
}
