/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Neighbours: ARP (RFC 826) for IPv4 GIDs and Neighbor Discovery (RFC 4861)
 * for IPv6 GIDs. We answer for our own addresses, resolve peers with a small
 * cache (retries, expiry, failure) and announce ourselves when the link comes
 * up (gratuitous ARP, unsolicited neighbour advertisement).
 *
 * Cache states: INCOMPLETE (asked, -EAGAIN) -> REACHABLE (answered) ->
 * STALE after arp_expire (still used while a new request re-confirms it) ->
 * FAILED when arp_retries requests go unanswered (-EHOSTUNREACH for
 * arp_retries * arp_timeout, then a new attempt starts).
 */
#include <errno.h>
#include <string.h>

#include <rte_arp.h>
#include <rte_ether.h>
#include <rte_ip.h>

#include "port_link.h"

#define DEFAULT_TIMEOUT_MS 1000
#define DEFAULT_RETRIES	   3
#define DEFAULT_EXPIRE_MS  60000
#define NEIGH_POLL_NS	   1000000ull

#define ND_NS		135
#define ND_NA		136
#define ND_OPT_SLLA	1
#define ND_OPT_TLLA	2
#define ND_NA_ROUTER	0x80
#define ND_NA_SOLICITED 0x40
#define ND_NA_OVERRIDE	0x20

static uint64_t timeout_ns(const struct rocemu_port *port)
{
	return (uint64_t)(port->cfg.arp_timeout_ms ? port->cfg.arp_timeout_ms
						   : DEFAULT_TIMEOUT_MS) *
	       1000000ull;
}

static unsigned retries(const struct rocemu_port *port)
{
	return port->cfg.arp_retries ? port->cfg.arp_retries : DEFAULT_RETRIES;
}

static uint64_t expire_ns(const struct rocemu_port *port)
{
	return (uint64_t)(port->cfg.arp_expire_ms ? port->cfg.arp_expire_ms : DEFAULT_EXPIRE_MS) *
	       1000000ull;
}

static void drop(struct rocemu_port *port, struct rte_mbuf *m, enum port_counter reason)
{
	rte_pktmbuf_free(m);
	port_count(port, reason);
	port_count(port, PC_RX_DROPS);
}

static bool gid_is_link_local(const uint8_t g[16])
{
	return g[0] == 0xfe && (g[1] & 0xc0) == 0x80;
}

static bool same_prefix(const uint8_t a[16], const uint8_t b[16], unsigned bits)
{
	unsigned bytes = bits / 8, rest = bits % 8;

	if (memcmp(a, b, bytes))
		return false;
	if (!rest)
		return true;
	return ((a[bytes] ^ b[bytes]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

int port_pick_src(const struct rocemu_port *port, const uint8_t dst[16])
{
	bool v4 = port_gid_is_v4(dst);
	int any = -1;

	if (!v4 && gid_is_link_local(dst))
		return 0;
	for (unsigned i = 1; i < port->n_gids; i++) {
		const uint8_t *g = port->gids[i];
		unsigned bits = port->gid_prefix[i] + (v4 ? 96u : 0u);

		if (port_gid_is_v4(g) != v4 || (!v4 && gid_is_link_local(g)))
			continue;
		if (same_prefix(g, dst, bits))
			return (int)i;
		if (any < 0)
			any = (int)i;
	}
	if (any < 0 && !v4)
		any = 0;
	return any;
}

struct rte_mbuf *port_frame_alloc(struct rocemu_port *port, uint16_t len)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(port->pool);
	char *p;

	if (!m) {
		port_count(port, PC_DROP_MBUF_EXHAUSTED);
		port_count(port, PC_TX_DROPS);
		return NULL;
	}
	p = rte_pktmbuf_append(m, len);
	if (!p) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	memset(p, 0, len);
	return m;
}

/* ------------------------------------------------------------------------ */
/* ARP                                                                        */

static void arp_fill(struct rocemu_port *port, struct rte_mbuf *m, uint16_t op,
		     const struct rte_ether_addr *eth_dst, const struct rte_ether_addr *tha,
		     uint32_t sip, uint32_t tip)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_arp_hdr *arp = (struct rte_arp_hdr *)(eth + 1);

	eth->dst_addr = *eth_dst;
	eth->src_addr = port->mac;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
	arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
	arp->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	arp->arp_hlen = RTE_ETHER_ADDR_LEN;
	arp->arp_plen = 4;
	arp->arp_opcode = rte_cpu_to_be_16(op);
	arp->arp_data.arp_sha = port->mac;
	arp->arp_data.arp_sip = sip;
	arp->arp_data.arp_tha = *tha;
	arp->arp_data.arp_tip = tip;
}

static int arp_send_request(struct rocemu_port *port, uint32_t sip, uint32_t tip, bool gratuitous)
{
	static const struct rte_ether_addr bcast = {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
	static const struct rte_ether_addr zero;
	/* 60 bytes: the Ethernet minimum without FCS */
	struct rte_mbuf *m = port_frame_alloc(port, RTE_ETHER_MIN_LEN - RTE_ETHER_CRC_LEN);

	if (!m)
		return -ENOBUFS;
	arp_fill(port, m, RTE_ARP_OP_REQUEST, &bcast, &zero, sip, tip);
	port_count(port, gratuitous ? PC_GARP_TX : PC_ARP_REQUESTS_TX);
	return rocemu_port_tx(port, m);
}

/* ------------------------------------------------------------------------ */
/* ND                                                                         */

uint16_t port_icmp6_checksum(const uint8_t *ip6, const uint8_t *l4, uint32_t l4_len)
{
	uint32_t sum = 0;
	uint8_t ph[8];

	/* pseudo-header (RFC 8200 8.1): src, dst, upper-layer length, next header */
	sum = rte_raw_cksum(ip6 + 8, 32);
	ph[0] = (uint8_t)(l4_len >> 24);
	ph[1] = (uint8_t)(l4_len >> 16);
	ph[2] = (uint8_t)(l4_len >> 8);
	ph[3] = (uint8_t)l4_len;
	ph[4] = ph[5] = ph[6] = 0;
	ph[7] = IPPROTO_ICMPV6;
	sum += rte_raw_cksum(ph, 8);
	sum += rte_raw_cksum(l4, l4_len);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static void ip6_fill(struct rte_ipv6_hdr *ip, const uint8_t src[16], const uint8_t dst[16],
		     uint16_t plen, uint8_t hops)
{
	ip->vtc_flow = rte_cpu_to_be_32(6u << 28);
	ip->payload_len = rte_cpu_to_be_16(plen);
	ip->proto = IPPROTO_ICMPV6;
	ip->hop_limits = hops;
	memcpy(ip->src_addr, src, 16);
	memcpy(ip->dst_addr, dst, 16);
}

static void mcast_mac_of(const uint8_t ip6[16], struct rte_ether_addr *mac)
{
	mac->addr_bytes[0] = 0x33;
	mac->addr_bytes[1] = 0x33;
	memcpy(mac->addr_bytes + 2, ip6 + 12, 4);
}

/* An ND message with one link-layer address option: NS (SLLA) or NA (TLLA). */
static int nd_send(struct rocemu_port *port, uint8_t type, uint8_t na_flags, const uint8_t src[16],
		   const uint8_t dst[16], const struct rte_ether_addr *eth_dst,
		   const uint8_t target[16])
{
	const uint16_t plen = 24 + 8;
	struct rte_mbuf *m = port_frame_alloc(port, RTE_ETHER_HDR_LEN + 40 + plen);
	struct rte_ether_hdr *eth;
	struct rte_ipv6_hdr *ip;
	uint8_t *nd;
	uint16_t ck;

	if (!m)
		return -ENOBUFS;
	eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	ip = (struct rte_ipv6_hdr *)(eth + 1);
	nd = (uint8_t *)(ip + 1);
	eth->dst_addr = *eth_dst;
	eth->src_addr = port->mac;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
	ip6_fill(ip, src, dst, plen, 255); /* RFC 4861 7.1: hop limit 255 */
	nd[0] = type;
	if (type == ND_NA)
		nd[4] = na_flags;
	memcpy(nd + 8, target, 16);
	nd[24] = type == ND_NS ? ND_OPT_SLLA : ND_OPT_TLLA;
	nd[25] = 1; /* length in units of 8 bytes */
	memcpy(nd + 26, port->mac.addr_bytes, 6);
	ck = port_icmp6_checksum((const uint8_t *)ip, nd, plen);
	memcpy(nd + 2, &ck, 2);
	port_count(port, type == ND_NS ? PC_ND_SOLICITS_TX : PC_ND_ADVERTS_TX);
	return rocemu_port_tx(port, m);
}

static int nd_send_solicit(struct rocemu_port *port, const uint8_t src[16],
			   const uint8_t target[16])
{
	uint8_t sn[16] = {0xff, 0x02, [11] = 0x01, [12] = 0xff};
	struct rte_ether_addr mac;

	memcpy(sn + 13, target + 13, 3); /* solicited-node multicast, RFC 4291 2.7.1 */
	mcast_mac_of(sn, &mac);
	return nd_send(port, ND_NS, 0, src, sn, &mac, target);
}

/* ------------------------------------------------------------------------ */
/* The cache.                                                                 */

static struct port_neigh *neigh_find(struct rocemu_port *port, const uint8_t gid[16])
{
	for (unsigned i = 0; i < PORT_NEIGH_SLOTS; i++)
		if (port->neigh[i].state != NEIGH_FREE && !memcmp(port->neigh[i].gid, gid, 16))
			return &port->neigh[i];
	return NULL;
}

/*
 * A slot for a new entry. For our own resolution (evict = true): a free or
 * failed slot, else the unconfirmed (STALE) entry updated longest ago, else
 * the confirmed entry (REACHABLE, PROBE) confirmed longest ago, else the
 * oldest request. For learning from a peer's request (evict = false) only
 * free, failed and stale slots: a flood of requests from forged sources
 * cannot push out the entries our own requests confirmed. NULL when none.
 */
static struct port_neigh *neigh_slot(struct rocemu_port *port, bool evict)
{
	struct port_neigh *victim = NULL;
	unsigned best_rank = 5;

	for (unsigned i = 0; i < PORT_NEIGH_SLOTS; i++) {
		struct port_neigh *e = &port->neigh[i];
		unsigned rank;
		uint64_t age_ns, victim_ns;

		switch (e->state) {
		case NEIGH_FREE:
			return e;
		case NEIGH_FAILED:
			rank = 0;
			age_ns = e->sent_ns;
			break;
		case NEIGH_STALE:
			rank = 1;
			age_ns = e->updated_ns;
			break;
		case NEIGH_REACHABLE:
		case NEIGH_PROBE:
			rank = 2;
			age_ns = e->confirmed_ns;
			break;
		default: /* INCOMPLETE */
			rank = 3;
			age_ns = e->sent_ns;
			break;
		}
		if (!evict && rank > 1)
			continue;
		if (victim) {
			victim_ns = best_rank == 2   ? victim->confirmed_ns
				    : best_rank == 1 ? victim->updated_ns
						     : victim->sent_ns;
			if (rank > best_rank || (rank == best_rank && age_ns >= victim_ns))
				continue;
		}
		victim = e;
		best_rank = rank;
	}
	return victim;
}

static struct port_neigh *neigh_alloc(struct rocemu_port *port, const uint8_t gid[16], bool evict)
{
	struct port_neigh *e = neigh_slot(port, evict);

	if (!e)
		return NULL;
	memset(e, 0, sizeof(*e));
	memcpy(e->gid, gid, 16);
	return e;
}

static int neigh_send_request(struct rocemu_port *port, struct port_neigh *e, uint64_t now)
{
	const uint8_t *src = port->gids[e->src_index];

	e->tries++;
	e->asked = true;
	e->sent_ns = now;
	if (port_gid_is_v4(e->gid))
		return arp_send_request(port, port_gid_ipv4(src), port_gid_ipv4(e->gid), false);
	return nd_send_solicit(port, src, e->gid);
}

/* A neighbour's MAC is a unicast MAC that is not ours (a forged claim that
 * a peer sits at our own or a group MAC would loop or spray our frames). */
static bool neigh_mac_plausible(struct rocemu_port *port, const uint8_t mac[6])
{
	const struct rte_ether_addr *m = (const struct rte_ether_addr *)mac;

	if (rte_is_unicast_ether_addr(m) && !rte_is_zero_ether_addr(m) &&
	    !rte_is_same_ether_addr(m, &port->mac))
		return true;
	port_count(port, PC_DROP_NEIGH_BAD_MAC);
	return false;
}

/* Ask for e's address again from the first try, in state st. */
static void neigh_ask_again(struct rocemu_port *port, struct port_neigh *e, enum neigh_state st,
			    uint64_t now)
{
	e->state = st;
	e->tries = 0;
	neigh_send_request(port, e, now);
}

/* Whether e's MAC may become mac now: the same one, a first one, or the
 * lock time since the last change has passed (counted when refused). */
static bool neigh_mac_may_change(struct rocemu_port *port, const struct port_neigh *e,
				 const uint8_t mac[6], uint64_t now)
{
	if (e->state == NEIGH_INCOMPLETE || e->state == NEIGH_FAILED || !memcmp(e->mac, mac, 6))
		return true;
	if (now - e->updated_ns >= PORT_NEIGH_LOCK_NS)
		return true;
	port_count(port, PC_DROP_NEIGH_LOCKED);
	return false;
}

/*
 * What a neighbour told us about itself. confirmed: it answered a request
 * of ours still waiting (a unicast ARP reply to us, a solicited NA): the
 * entry becomes REACHABLE.
 * Otherwise (requests, announcements, unsolicited replies) a new or changed
 * MAC makes it STALE, to be confirmed by a request when next used, and the
 * same MAC changes nothing (RFC 4861 7.2.3, 7.2.5; RFC 826 updates what it
 * has). A different MAC within the lock time is refused.
 */
static void neigh_update(struct rocemu_port *port, struct port_neigh *e, const uint8_t mac[6],
			 bool confirmed, uint64_t now)
{
	bool same =
	    e->state != NEIGH_INCOMPLETE && e->state != NEIGH_FAILED && !memcmp(e->mac, mac, 6);

	if (!neigh_mac_plausible(port, mac) || !neigh_mac_may_change(port, e, mac, now))
		return;
	if (!same) {
		if (e->state == NEIGH_INCOMPLETE || e->state == NEIGH_FAILED)
			port_count(port, PC_ARP_RESOLVED);
		memcpy(e->mac, mac, 6);
		e->updated_ns = now;
		e->state = NEIGH_STALE;
		e->tries = 0;
	}
	if (confirmed) {
		e->state = NEIGH_REACHABLE;
		e->tries = 0;
		e->asked = false;
		e->confirmed_ns = now;
	}
}

/* A peer asked for one of our addresses: learn it (STALE) if there is room
 * that costs no confirmed entry, or update what we have. */
static void neigh_learn(struct rocemu_port *port, const uint8_t gid[16], const uint8_t mac[6],
			uint64_t now)
{
	struct port_neigh *e = neigh_find(port, gid);

	if (!e) {
		int src = port_pick_src(port, gid);

		if (!neigh_mac_plausible(port, mac))
			return;
		e = neigh_alloc(port, gid, false);
		if (!e) {
			port_count(port, PC_NEIGH_LEARN_SKIPPED);
			return;
		}
		e->src_index = (unsigned)(src < 0 ? 0 : src);
		memcpy(e->mac, mac, 6);
		e->updated_ns = now;
		e->state = NEIGH_STALE;
		return;
	}
	neigh_update(port, e, mac, false, now);
}

static bool gid_is_broadcast(const uint8_t dst[16])
{
	return port_gid_is_v4(dst) && dst[12] == 255 && dst[13] == 255 && dst[14] == 255 &&
	       dst[15] == 255;
}

int rocemu_port_resolve(struct rocemu_port *port, unsigned src_index, const uint8_t dst[16],
			uint8_t mac[6])
{
	uint64_t now = rocemu_now_ns();
	struct port_neigh *e;
	int src;

	if (port->link->resolve) /* the host link: the host resolves for all */
		return port->link->resolve(port, src_index, dst, mac);
	if (port_ip_is_ours(port, dst)) {
		memcpy(mac, port->mac.addr_bytes, 6);
		return 0;
	}
	if (gid_is_broadcast(dst)) {
		memset(mac, 0xff, 6);
		return 0;
	}
	if (rocemu_gid_is_multicast(dst)) {
		port_mcast_mac(dst, mac);
		return 0;
	}
	if (port->kneigh) /* beside the kernel, which answers ARP/ND here */
		return port_kneigh_resolve(port, dst, mac, now);
	e = neigh_find(port, dst);
	if (!e) {
		src = (int)src_index;
		if (src_index >= port->n_gids ||
		    port_gid_is_v4(port->gids[src_index]) != port_gid_is_v4(dst))
			src = port_pick_src(port, dst);
		if (src < 0)
			return -ENETUNREACH; /* no IPv4 address to ask from */
		e = neigh_alloc(port, dst, true);
		e->src_index = (unsigned)src;
		e->state = NEIGH_INCOMPLETE;
		neigh_send_request(port, e, now);
		return -EAGAIN;
	}
	switch (e->state) {
	case NEIGH_REACHABLE:
		/* expired: keep using it while it is re-confirmed */
		if (now - e->confirmed_ns >= expire_ns(port))
			neigh_ask_again(port, e, NEIGH_PROBE, now);
		memcpy(mac, e->mac, 6);
		return 0;
	case NEIGH_STALE:
		/* unconfirmed: used, and confirmed by our own request now */
		neigh_ask_again(port, e, NEIGH_PROBE, now);
		memcpy(mac, e->mac, 6);
		return 0;
	case NEIGH_PROBE:
		memcpy(mac, e->mac, 6);
		return 0;
	case NEIGH_FAILED:
		if (now < e->failed_until_ns)
			return -EHOSTUNREACH;
		neigh_ask_again(port, e, NEIGH_INCOMPLETE, now);
		return -EAGAIN;
	default:
		return -EAGAIN;
	}
}

unsigned port_neigh_poll(struct rocemu_port *port, uint64_t now)
{
	uint64_t tmo = timeout_ns(port);
	unsigned work = 0;

	port->neigh_next_check_ns = now + NEIGH_POLL_NS;
	for (unsigned i = 0; i < PORT_NEIGH_SLOTS; i++) {
		struct port_neigh *e = &port->neigh[i];

		if (e->state != NEIGH_INCOMPLETE && e->state != NEIGH_PROBE)
			continue;
		if (now - e->sent_ns < tmo)
			continue;
		if (e->tries >= retries(port)) {
			e->state = NEIGH_FAILED;
			e->failed_until_ns = now + tmo * retries(port);
			port_count(port, PC_ARP_FAILED);
		} else {
			neigh_send_request(port, e, now);
		}
		work++;
	}
	return work;
}

void port_announce(struct rocemu_port *port)
{
	static const uint8_t all_nodes[16] = {0xff, 0x02, [15] = 1};
	struct rte_ether_addr all_nodes_mac;

	mcast_mac_of(all_nodes, &all_nodes_mac);
	for (unsigned i = 0; i < port->n_gids; i++) {
		const uint8_t *g = port->gids[i];

		if (port->kernel_owned & (1u << i))
			continue;
		if (port_gid_is_v4(g))
			arp_send_request(port, port_gid_ipv4(g), port_gid_ipv4(g), true);
		else
			nd_send(port, ND_NA, ND_NA_OVERRIDE, g, all_nodes, &all_nodes_mac, g);
	}
}

/* ------------------------------------------------------------------------ */
/* Input.                                                                     */

void port_arp_input(struct rocemu_port *port, struct rte_mbuf *m, uint64_t now)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_arp_hdr *arp = (struct rte_arp_hdr *)(eth + 1);
	uint8_t sgid[16], tgid[16];
	struct port_neigh *e;
	uint16_t op;
	uint32_t sip, tip;
	bool for_us;

	if (m->data_len < RTE_ETHER_HDR_LEN + sizeof(*arp)) {
		drop(port, m, PC_DROP_ARP_TRUNCATED);
		return;
	}
	if (arp->arp_hardware != rte_cpu_to_be_16(RTE_ARP_HRD_ETHER) ||
	    arp->arp_protocol != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) ||
	    arp->arp_hlen != RTE_ETHER_ADDR_LEN || arp->arp_plen != 4) {
		drop(port, m, PC_DROP_ARP_UNSUPPORTED);
		return;
	}
	port_count(port, PC_ARP_RX);
	op = rte_be_to_cpu_16(arp->arp_opcode);
	sip = arp->arp_data.arp_sip;
	tip = arp->arp_data.arp_tip;
	port_gid_from_ipv4(sgid, sip);
	port_gid_from_ipv4(tgid, tip);
	if (sip && port_ip_is_ours(port, sgid)) {
		drop(port, m,
		     rte_is_same_ether_addr(&arp->arp_data.arp_sha, &port->mac)
			 ? PC_DROP_ARP_OWN
			 : PC_DROP_ARP_ADDRESS_CONFLICT);
		return;
	}
	if (op != RTE_ARP_OP_REQUEST && op != RTE_ARP_OP_REPLY) {
		drop(port, m, PC_DROP_ARP_UNSUPPORTED_OP);
		return;
	}
	/* A sender MAC that is a group address is no host's (RFC 1812 3.3.2). */
	if (!rte_is_unicast_ether_addr(&arp->arp_data.arp_sha)) {
		drop(port, m, PC_DROP_ARP_BAD_SENDER);
		return;
	}
	for_us = port_ip_is_ours(port, tgid);
	/* RFC 826: whatever the opcode, a sender we have an entry for updates it.
	 * Only a reply sent to us for our address answers our request
	 * (REACHABLE); anything else is unconfirmed (neigh_update). */
	e = sip ? neigh_find(port, sgid) : NULL;
	if (e)
		neigh_update(port, e, arp->arp_data.arp_sha.addr_bytes,
			     op == RTE_ARP_OP_REPLY && for_us &&
				 rte_is_same_ether_addr(&eth->dst_addr, &port->mac) && e->asked,
			     now);
	if (sip == tip || op == RTE_ARP_OP_REPLY) {
		/* an announcement (gratuitous ARP) or a reply: applied above */
		rte_pktmbuf_free(m);
		return;
	}
	if (!for_us) {
		drop(port, m, PC_DROP_ARP_NOT_FOR_US);
		return;
	}
	/* RFC 826: a request for our address from a sender we do not know:
	 * learn it (it will talk to us next), unconfirmed */
	if (!e && sip)
		neigh_learn(port, sgid, arp->arp_data.arp_sha.addr_bytes, now);
	if (port_left_to_kernel(port, rocemu_port_gid_find(port, tgid))) {
		rte_pktmbuf_free(m);
		return;
	}
	/* answer in place: the request becomes the reply */
	struct rte_ether_addr requester = arp->arp_data.arp_sha;
	arp_fill(port, m, RTE_ARP_OP_REPLY, &requester, &requester, tip, sip);
	port_count(port, PC_ARP_REPLIES_TX);
	rocemu_port_tx(port, m);
}

static const uint8_t *nd_find_lla(const uint8_t *opt, uint32_t len, uint8_t type)
{
	while (len >= 8) {
		uint32_t olen = (uint32_t)opt[1] * 8;

		if (olen == 0 || olen > len)
			return NULL; /* RFC 4861 4.6: zero length is invalid */
		if (opt[0] == type && olen >= 8)
			return opt + 2;
		opt += olen;
		len -= olen;
	}
	return NULL;
}

static bool ip6_is_multicast(const uint8_t a[16])
{
	return a[0] == 0xff;
}

/* RFC 4861 7.1.1 validation, then 7.2.3 (learn the sender), then the NA. */
static void nd_ns_input(struct rocemu_port *port, struct rte_mbuf *m, const struct rte_ipv6_hdr *ip,
			const uint8_t *nd, uint32_t len, uint64_t now)
{
	static const uint8_t unspecified[16], all_nodes[16] = {0xff, 0x02, [15] = 1};
	const struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);
	const uint8_t *target = nd + 8, *slla;
	uint8_t src[16], tgt[16];
	struct rte_ether_addr reply_mac;
	struct port_neigh *e;
	bool from_unspecified = !memcmp(ip->src_addr, unspecified, 16);
	int idx;

	if (len < 24 || ip->hop_limits != 255 || nd[1] != 0 || ip6_is_multicast(target)) {
		drop(port, m, PC_DROP_ND_INVALID);
		return;
	}
	slla = nd_find_lla(nd + 24, len - 24, ND_OPT_SLLA);
	/* DAD probes come from :: to the solicited-node group and carry no SLLA;
	 * a multicast NS from an address must carry one (7.1.1) */
	if ((from_unspecified && (slla || !ip6_is_multicast(ip->dst_addr))) ||
	    (!from_unspecified && !slla && ip6_is_multicast(ip->dst_addr)) ||
	    ip6_is_multicast(ip->src_addr)) {
		drop(port, m, PC_DROP_ND_INVALID);
		return;
	}
	idx = rocemu_port_gid_find(port, target);
	if (idx < 0 || port_gid_is_v4(target)) {
		drop(port, m, PC_DROP_ND_NOT_FOR_US);
		return;
	}
	if (port_left_to_kernel(port, idx)) {
		rte_pktmbuf_free(m);
		return;
	}
	memcpy(src, ip->src_addr, 16);
	memcpy(tgt, target, 16);
	if (from_unspecified) {
		/* duplicate address detection by someone else: defend (RFC 4862 5.4.3) */
		struct rte_ether_addr mac;

		mcast_mac_of(all_nodes, &mac);
		rte_pktmbuf_free(m);
		nd_send(port, ND_NA, ND_NA_OVERRIDE, tgt, all_nodes, &mac, tgt);
		return;
	}
	/* 7.2.3: an SLLA creates or updates the sender's entry, unconfirmed
	 * (STALE); without one the cache is not touched */
	e = neigh_find(port, src);
	if (slla && rte_is_unicast_ether_addr((const struct rte_ether_addr *)slla))
		neigh_learn(port, src, slla, now);
	if (slla)
		memcpy(reply_mac.addr_bytes, slla, 6);
	else if (e && e->state != NEIGH_INCOMPLETE && e->state != NEIGH_FAILED)
		memcpy(reply_mac.addr_bytes, e->mac, 6);
	else
		reply_mac = eth->src_addr;
	rte_pktmbuf_free(m);
	nd_send(port, ND_NA, ND_NA_SOLICITED | ND_NA_OVERRIDE, tgt, src, &reply_mac, tgt);
}

/* RFC 4861 7.1.2 validation, then the update rules of 7.2.5. */
static void nd_na_input(struct rocemu_port *port, struct rte_mbuf *m, const struct rte_ipv6_hdr *ip,
			const uint8_t *nd, uint32_t len, uint64_t now)
{
	const uint8_t *tlla;
	struct port_neigh *e;
	bool solicited = nd[4] & ND_NA_SOLICITED, override = nd[4] & ND_NA_OVERRIDE;

	if (len < 24 || ip->hop_limits != 255 || nd[1] != 0 || ip6_is_multicast(nd + 8) ||
	    (solicited && ip6_is_multicast(ip->dst_addr))) {
		drop(port, m, PC_DROP_ND_INVALID);
		return;
	}
	if (port_ip_is_ours(port, nd + 8)) {
		drop(port, m, PC_DROP_ND_ADDRESS_CONFLICT);
		return;
	}
	tlla = nd_find_lla(nd + 24, len - 24, ND_OPT_TLLA);
	if (tlla && !rte_is_unicast_ether_addr((const struct rte_ether_addr *)tlla)) {
		drop(port, m, PC_DROP_ND_INVALID);
		return;
	}
	e = neigh_find(port, nd + 8);
	rte_pktmbuf_free(m);
	if (!e || e->state == NEIGH_FAILED) {
		port_count(port, PC_ND_NA_UNSOLICITED); /* no entry: silently discarded */
		return;
	}
	if (e->state == NEIGH_INCOMPLETE) {
		/* the answer to our NS: it must say where the target is */
		if (tlla)
			neigh_update(port, e, tlla, solicited && e->asked, now);
		return;
	}
	if (tlla && memcmp(tlla, e->mac, 6) && !override) {
		/* another address without Override: keep ours, doubt it */
		if (e->state == NEIGH_REACHABLE)
			e->state = NEIGH_STALE;
		return;
	}
	/* Override set, or the address we have (or none given) */
	neigh_update(port, e, tlla ? tlla : e->mac, solicited && e->asked, now);
}

void port_nd_input(struct rocemu_port *port, struct rte_mbuf *m, uint32_t l3_off, uint64_t now)
{
	const struct rte_ipv6_hdr *ip =
	    rte_pktmbuf_mtod_offset(m, const struct rte_ipv6_hdr *, l3_off);
	uint32_t plen = rte_be_to_cpu_16(ip->payload_len);
	const uint8_t *l4 = (const uint8_t *)(ip + 1);

	if (l3_off + sizeof(*ip) + plen > m->data_len || plen < 8) {
		drop(port, m, PC_DROP_IP_TRUNCATED);
		return;
	}
	if (port_icmp6_checksum((const uint8_t *)ip, l4, plen) != 0) {
		drop(port, m, PC_DROP_ICMP6_BAD_CHECKSUM);
		return;
	}
	switch (l4[0]) {
	case 128: /* echo request */
	case 129: /* echo reply */
		port_icmp6_echo_input(port, m, l3_off, l3_off + (uint32_t)sizeof(*ip), now);
		return;
	case ND_NS:
		port_count(port, PC_ND_RX);
		nd_ns_input(port, m, ip, l4, plen, now);
		return;
	case ND_NA:
		port_count(port, PC_ND_RX);
		nd_na_input(port, m, ip, l4, plen, now);
		return;
	default:
		drop(port, m, PC_DROP_ICMP6_UNHANDLED);
		return;
	}
}
