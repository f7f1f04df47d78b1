/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A hostile host on the segment against the port (issue 18, items 5 and 6):
 * forged ARP and ND that try to redirect a neighbour entry or flood the
 * cache, ICMP echo abuse, spoofed echo replies, and RoCE frames that are
 * tagged or sent to group MACs. Two ports on a ring pair: b is the victim,
 * a is both its honest peer (10.9.0.1, fd00:9::1) and, through frames this
 * test writes byte by byte and sends from a's device, the forger. Progress
 * threads are stopped; every pass is driven here.
 *
 * Rules: RFC 826 (ARP), RFC 4861 7.1 (ND validation), 7.2.3 (NS), 7.2.5
 * (NA: Override and Solicited), RFC 1812 4.3.2.7 / RFC 1122 3.2.2.6 (no
 * echo reply to broadcast or multicast sources).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include "roce_mbuf.h"
#include "roce_wire.h"
#include "rocemu_port.h"
#include "port_internal.h" /* port_rx_frame, the neighbour cache: time-controlled tests */
#include "port_test_util.h"

static unsigned pair_seq;

struct pair {
	struct rocemu_port *a, *b;
	uint8_t amac[6], bmac[6];
};

/* The pair of the running test: closed by the teardown even when the test fails. */
static struct rocemu_port *open_a, *open_b;

static const uint8_t evil_mac[6] = {0x02, 0x66, 0x66, 0x66, 0x66, 0x66};

static void set(struct rocemu_port_config *cfg, const char *opt, const char *val)
{
	char err[256];

	if (rocemu_port_config_set(cfg, opt, val, err, sizeof(err)))
		fail_msg("config %s=%s: %s", opt, val, err);
}

static void pair_up(struct pair *p)
{
	struct rocemu_port_config ca, cb;
	char spec[64], err[512];
	unsigned seq = pair_seq++;

	rocemu_port_config_init(&ca);
	rocemu_port_config_init(&cb);
	snprintf(spec, sizeof(spec), "ring:h%u:a", seq);
	set(&ca, "port", spec);
	set(&ca, "ip", "10.9.0.1/24");
	set(&ca, "ip", "fd00:9::1/64");
	set(&ca, "mbufs", "2048");
	snprintf(spec, sizeof(spec), "ring:h%u:b", seq);
	set(&cb, "port", spec);
	set(&cb, "ip", "10.9.0.2/24");
	set(&cb, "ip", "fd00:9::2/64");
	set(&cb, "mbufs", "2048");
	if (rocemu_port_open(&ca, &p->a, err, sizeof(err)))
		fail_msg("open a: %s", err);
	if (rocemu_port_open(&cb, &p->b, err, sizeof(err)))
		fail_msg("open b: %s", err);
	rocemu_port_progress_thread_stop(p->a);
	rocemu_port_progress_thread_stop(p->b);
	rocemu_port_mac(p->a, p->amac);
	rocemu_port_mac(p->b, p->bmac);
	open_a = p->a;
	open_b = p->b;
}

static bool test_ended; /* the running test got to its last pair_down */

static void ports_close(struct pair *p)
{
	rocemu_port_close(p->a);
	rocemu_port_close(p->b);
	open_a = open_b = NULL;
}

/* The end of a test: its ports close, and it passed. */
static void pair_down(struct pair *p)
{
	ports_close(p);
	test_ended = true;
}

/* Nonzero: frames skip the ring and enter b's receive dispatch directly, as
 * received at this time (rocemu_now_ns clock): tests that are about time
 * (lock time, reply rate) do not depend on how promptly they are scheduled. */
static uint64_t frame_now;

/* Each test's rule, for docs/CONFORMANCE.md (--results FILE writes one
 * tab-separated line per test, as cf_runner does: name, group, rule,
 * result, what, note). */
struct rule_row {
	const char *name, *group, *rule, *what;
};

static const struct rule_row rules[] = {
    {"arp_forged_reply_does_not_redirect", "neighbour",
     "RFC 826 (update what the table has) with a 1 s lock time (Linux locktime)",
     "an unsolicited ARP reply or gratuitous ARP naming another MAC for a fresh entry is "
     "refused; after the lock time it is taken unconfirmed and re-asked on the next use"},
    {"arp_learn_flood_keeps_confirmed", "neighbour",
     "RFC 826 (learn senders of requests for us) without evicting confirmed entries",
     "200 ARP requests from forged sources do not push out an entry our own request confirmed"},
    {"arp_learnt_entry_is_confirmed_on_use", "neighbour",
     "RFC 4861 7.3.3 (STALE: confirm on use), applied to ARP",
     "a sender learnt from its ARP request is used, and confirmed by a request of ours first"},
    {"neighbour_at_our_own_mac_refused", "neighbour",
     "RFC 826 / RFC 4861 7.2.3 (a neighbour's link-layer address is a unicast one not ours)",
     "an ARP or NS claiming a sender at our own MAC or a multicast MAC is not learnt"},
    {"nd_na_rules", "neighbour", "RFC 4861 7.1.2 (NA validation), 7.2.5 (Override, Solicited)",
     "an NA without Override cannot change a MAC; a Solicited NA to a multicast destination is "
     "invalid; an Override NA within the lock time is refused; an NA for an unknown target "
     "creates nothing"},
    {"nd_ns_learns_stale", "neighbour", "RFC 4861 7.2.3 (NS: SLLA creates a STALE entry)",
     "an NS with a source link-layer option creates an unconfirmed entry, confirmed on use; one "
     "without creates none"},
    {"icmp_echo_abuse", "icmp",
     "RFC 1122 3.2.2.6, RFC 1812 4.3.2.7 (no echo reply to group sources), RFC 791 (header "
     "checksum)",
     "echo requests with a bad IPv4 header checksum or from broadcast/multicast sources are "
     "not answered; a burst is answered at most 50 at once (1000 per second)"},
    {"ping_counts_only_its_replies", "icmp", "RFC 792 (echo identifier and sequence number)",
     "`rocemu port --ping` counts a reply only for its identifier and an outstanding sequence "
     "number: spoofed, unasked and repeated replies do not count"},
    {"roce_tagged_or_group_mac_dropped", "frames",
     "A17 (RoCEv2 over the port's Ethernet; no VLAN configured)",
     "RoCE frames with an 802.1Q tag, or to the broadcast or a multicast MAC, are dropped and "
     "counted"},
};

static FILE *results;
static unsigned test_no;

static int teardown(void **state)
{
	bool failed = !test_ended;

	(void)state;
	test_ended = false;
	frame_now = 0;
	if (open_a) {
		struct pair p = {.a = open_a, .b = open_b};

		ports_close(&p);
	}
	if (results && test_no < sizeof(rules) / sizeof(rules[0])) {
		const struct rule_row *r = &rules[test_no];

		fprintf(results, "%s\t%s\t%s\t%s\t%s\t%s\n", r->name, r->group, r->rule,
			failed ? "fail" : "pass", r->what,
			failed ? "see the test's output (test_port_hostile)" : "");
	}
	test_no++;
	return 0;
}

static void pump(struct pair *p, int passes)
{
	for (int i = 0; i < passes; i++) {
		rocemu_port_progress(p->a);
		rocemu_port_progress(p->b);
	}
}

static int resolve(struct rocemu_port *port, const char *addr, uint8_t mac[6])
{
	uint8_t gid[16];
	int rc;

	assert_int_equal(rocemu_gid_parse(addr, gid), 0);
	rocemu_port_lock(port);
	rc = rocemu_port_resolve(port, 1, gid, mac);
	rocemu_port_unlock(port);
	return rc;
}

/* b resolves addr (a's) and gets a's MAC. */
static void b_learns_a(struct pair *p, const char *addr)
{
	uint8_t mac[6];
	int rc = -EAGAIN;

	for (int i = 0; i < 10 && rc == -EAGAIN; i++) {
		rc = resolve(p->b, addr, mac);
		pump(p, 3);
	}
	assert_int_equal(rc, 0);
	assert_memory_equal(mac, p->amac, 6);
}

/* Send len raw bytes from a's device; b receives them at its next pass. */
static void queue_frame(struct pair *p, const void *frame, uint16_t len)
{
	struct rte_mbuf *m;

	rocemu_port_lock(p->a);
	m = rocemu_port_alloc_mbuf(p->a);
	assert_non_null(m);
	memcpy(rte_pktmbuf_append(m, len), frame, len);
	rocemu_port_tx(p->a, m);
	rocemu_port_flush(p->a);
	rocemu_port_unlock(p->a);
}

static void deliver_at(struct pair *p, const void *frame, uint16_t len, uint64_t now)
{
	struct rte_mbuf *m;

	rocemu_port_lock(p->b);
	m = rocemu_port_alloc_mbuf(p->b);
	assert_non_null(m);
	memcpy(rte_pktmbuf_append(m, len), frame, len);
	port_rx_frame(p->b, m, now);
	port_rx_flush_upper(p->b);
	rocemu_port_flush(p->b);
	rocemu_port_unlock(p->b);
}

/* queue_frame, then the passes that deliver it (or deliver_at frame_now). */
static void inject(struct pair *p, const void *frame, uint16_t len)
{
	if (frame_now) {
		deliver_at(p, frame, len, frame_now);
		pump(p, 1);
		return;
	}
	queue_frame(p, frame, len);
	pump(p, 2);
}

/* When b's entry for addr last had its MAC set (0: no entry). */
static uint64_t neigh_updated_ns(struct pair *p, const char *addr)
{
	uint8_t gid[16];
	uint64_t t = 0;

	assert_int_equal(rocemu_gid_parse(addr, gid), 0);
	rocemu_port_lock(p->b);
	for (unsigned i = 0; i < PORT_NEIGH_SLOTS; i++)
		if (p->b->neigh[i].state != NEIGH_FREE && !memcmp(p->b->neigh[i].gid, gid, 16))
			t = p->b->neigh[i].updated_ns;
	rocemu_port_unlock(p->b);
	return t;
}

static void put_eth(uint8_t *f, const uint8_t dst[6], const uint8_t src[6], uint16_t type)
{
	memcpy(f, dst, 6);
	memcpy(f + 6, src, 6);
	f[12] = (uint8_t)(type >> 8);
	f[13] = (uint8_t)type;
}

static uint32_t ip4(const char *s)
{
	uint8_t g[16];
	uint32_t v;

	assert_int_equal(rocemu_gid_parse(s, g), 0);
	memcpy(&v, g + 12, 4);
	return v; /* network order */
}

/* An ARP frame (60 bytes) from the forger's device (its MAC), claiming sha. */
static void send_arp(struct pair *p, uint16_t op, const uint8_t eth_dst[6], const uint8_t sha[6],
		     const char *sip, const char *tip)
{
	uint8_t f[60] = {0};
	uint32_t s = ip4(sip), t = ip4(tip);

	put_eth(f, eth_dst, p->amac, RTE_ETHER_TYPE_ARP);
	f[14] = 0, f[15] = 1;	 /* Ethernet */
	f[16] = 0x08, f[17] = 0; /* IPv4 */
	f[18] = 6, f[19] = 4;
	f[20] = (uint8_t)(op >> 8), f[21] = (uint8_t)op;
	memcpy(f + 22, sha, 6);
	memcpy(f + 28, &s, 4);
	if (op == 2)
		memcpy(f + 32, p->bmac, 6);
	memcpy(f + 38, &t, 4);
	inject(p, f, sizeof(f));
}

static uint16_t csum_fold(uint32_t sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static uint32_t csum_add(uint32_t sum, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	return sum;
}

/* An ICMPv6 ND message: type (135 NS, 136 NA), flags (NA), target, option
 * (1 SLLA, 2 TLLA, 0 none) with lla, from src to dst (eth dst edst). */
static void send_nd(struct pair *p, uint8_t type, uint8_t flags, const char *src, const char *dst,
		    const uint8_t edst[6], const char *target, uint8_t opt, const uint8_t lla[6])
{
	uint8_t f[14 + 40 + 32] = {0}, *ip = f + 14, *nd = ip + 40, ph[8] = {0};
	uint16_t plen = opt ? 32 : 24, ck;
	uint32_t sum;

	put_eth(f, edst, p->amac, RTE_ETHER_TYPE_IPV6);
	ip[0] = 0x60;
	ip[4] = 0, ip[5] = (uint8_t)plen;
	ip[6] = IPPROTO_ICMPV6;
	ip[7] = 255;
	assert_int_equal(rocemu_gid_parse(src, ip + 8), 0);
	assert_int_equal(rocemu_gid_parse(dst, ip + 24), 0);
	nd[0] = type;
	nd[4] = flags;
	assert_int_equal(rocemu_gid_parse(target, nd + 8), 0);
	if (opt) {
		nd[24] = opt;
		nd[25] = 1;
		memcpy(nd + 26, lla, 6);
	}
	ph[3] = (uint8_t)plen;
	ph[7] = IPPROTO_ICMPV6;
	sum = csum_add(0, ip + 8, 32);
	sum = csum_add(sum, ph, 8);
	sum = csum_add(sum, nd, plen);
	ck = csum_fold(sum);
	nd[2] = (uint8_t)(ck >> 8), nd[3] = (uint8_t)ck;
	inject(p, f, (uint16_t)(14 + 40 + plen));
}

/* An ICMP echo (type 8 request, 0 reply) from src to dst; bad_ip_csum spoils the IP checksum. */
static void send_echo4(struct pair *p, uint8_t type, const uint8_t esrc[6], const char *src,
		       const char *dst, uint16_t id, uint16_t seq, bool bad_ip_csum)
{
	uint8_t f[14 + 20 + 8 + 56] = {0}, *ip = f + 14, *ic = ip + 20;
	uint32_t s = ip4(src), d = ip4(dst);
	uint16_t ck;

	put_eth(f, p->bmac, esrc, RTE_ETHER_TYPE_IPV4);
	ip[0] = 0x45;
	ip[3] = 20 + 8 + 56;
	ip[8] = 64;
	ip[9] = IPPROTO_ICMP;
	memcpy(ip + 12, &s, 4);
	memcpy(ip + 16, &d, 4);
	ck = csum_fold(csum_add(0, ip, 20));
	ip[10] = (uint8_t)(ck >> 8), ip[11] = (uint8_t)ck;
	if (bad_ip_csum)
		ip[10] ^= 0x5a;
	ic[0] = type;
	ic[4] = (uint8_t)(id >> 8), ic[5] = (uint8_t)id;
	ic[6] = (uint8_t)(seq >> 8), ic[7] = (uint8_t)seq;
	ck = csum_fold(csum_add(0, ic, 8 + 56));
	ic[2] = (uint8_t)(ck >> 8), ic[3] = (uint8_t)ck;
	inject(p, f, sizeof(f));
}

/* ------------------------------------------------------------------------ */
/* RFC 826 with a lock time: a forged reply cannot redirect a fresh entry.   */

static void test_arp_forged_reply_does_not_redirect(void **state)
{
	struct pair p;
	uint8_t mac[6];
	uint64_t req;
	(void)state;

	pair_up(&p);
	b_learns_a(&p, "10.9.0.1");
	/* 1 ms after the entry got a's MAC: an unsolicited reply and a
	 * gratuitous ARP naming another MAC for a */
	frame_now = neigh_updated_ns(&p, "10.9.0.1") + 1000000;
	send_arp(&p, 2, p.bmac, evil_mac, "10.9.0.1", "10.9.0.2");
	send_arp(&p, 1, (const uint8_t[6]){0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, evil_mac,
		 "10.9.0.1", "10.9.0.1");
	frame_now = 0;
	assert_int_equal(resolve(p.b, "10.9.0.1", mac), 0);
	assert_memory_equal(mac, p.amac, 6);
	assert_int_equal(ptu_counter(p.b, "drop_neigh_locked"), 2);
	/* after the lock time a changed MAC is accepted only as unconfirmed:
	 * the next use asks again, and a's own answer puts it right */
	frame_now = neigh_updated_ns(&p, "10.9.0.1") + 1500000000ull;
	send_arp(&p, 2, p.bmac, evil_mac, "10.9.0.1", "10.9.0.2");
	frame_now = 0;
	req = ptu_counter(p.b, "arp_requests_tx");
	assert_int_equal(resolve(p.b, "10.9.0.1", mac), 0);
	assert_int_equal(ptu_counter(p.b, "arp_requests_tx"), req + 1);
	pair_down(&p);
}

/* A flood of requests from forged sources does not push out confirmed entries. */
static void test_arp_learn_flood_keeps_confirmed(void **state)
{
	struct pair p;
	uint8_t mac[6];
	uint64_t req;
	char src[32];
	(void)state;

	pair_up(&p);
	b_learns_a(&p, "10.9.0.1");
	for (int i = 0; i < 200; i++) {
		uint8_t sha[6] = {0x02, 0x77, 0, 0, (uint8_t)(i >> 8), (uint8_t)i};

		snprintf(src, sizeof(src), "10.9.%d.%d", 1 + i / 250, 1 + i % 250);
		send_arp(&p, 1, (const uint8_t[6]){0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, sha, src,
			 "10.9.0.2");
	}
	req = ptu_counter(p.b, "arp_requests_tx");
	assert_int_equal(resolve(p.b, "10.9.0.1", mac), 0);
	assert_memory_equal(mac, p.amac, 6);
	assert_int_equal(ptu_counter(p.b, "arp_requests_tx"), req);
	pair_down(&p);
}

/* A peer that asked for us is learnt unconfirmed: used, but asked first. */
static void test_arp_learnt_entry_is_confirmed_on_use(void **state)
{
	struct pair p;
	uint8_t mac[6];
	uint64_t req;
	(void)state;

	pair_up(&p);
	send_arp(&p, 1, (const uint8_t[6]){0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, evil_mac,
		 "10.9.0.99", "10.9.0.2");
	assert_int_equal(ptu_counter(p.b, "arp_replies_tx"), 1);
	req = ptu_counter(p.b, "arp_requests_tx");
	assert_int_equal(resolve(p.b, "10.9.0.99", mac), 0);
	assert_memory_equal(mac, evil_mac, 6);
	assert_int_equal(ptu_counter(p.b, "arp_requests_tx"), req + 1);
	pair_down(&p);
}

/* A claim that a neighbour sits at our own MAC (its frames would loop back
 * to us) or at a group MAC is not learnt, by ARP or by ND. */
static void test_neighbour_at_our_own_mac_refused(void **state)
{
	struct pair p;
	uint8_t mac[6];
	(void)state;

	pair_up(&p);
	send_arp(&p, 1, (const uint8_t[6]){0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, p.bmac, "10.9.0.50",
		 "10.9.0.2");
	send_nd(&p, 135, 0, "fd00:9::50", "fd00:9::2", p.bmac, "fd00:9::2", 1, p.bmac);
	send_nd(&p, 135, 0, "fd00:9::51", "fd00:9::2", p.bmac, "fd00:9::2", 1,
		(const uint8_t[6]){0x33, 0x33, 0, 0, 0, 1});
	assert_int_equal(resolve(p.b, "10.9.0.50", mac), -EAGAIN);
	assert_int_equal(resolve(p.b, "fd00:9::50", mac), -EAGAIN);
	assert_int_equal(resolve(p.b, "fd00:9::51", mac), -EAGAIN);
	/* the group SLLA never reaches the cache (7.2.3 learns unicast ones) */
	assert_int_equal(ptu_counter(p.b, "drop_neigh_bad_mac"), 2);
	pair_down(&p);
}

/* ------------------------------------------------------------------------ */
/* RFC 4861 7.2.5: Override and Solicited decide what an NA may change.     */

static void test_nd_na_rules(void **state)
{
	static const uint8_t all_nodes_mac[6] = {0x33, 0x33, 0, 0, 0, 1};
	struct pair p;
	uint8_t mac[6];
	(void)state;

	pair_up(&p);
	b_learns_a(&p, "fd00:9::1");
	frame_now = neigh_updated_ns(&p, "fd00:9::1") + 1000000; /* inside the lock time */
	/* no Override, another address: ignored (the entry only becomes doubtful) */
	send_nd(&p, 136, 0x00, "fd00:9::1", "fd00:9::2", p.bmac, "fd00:9::1", 2, evil_mac);
	assert_int_equal(resolve(p.b, "fd00:9::1", mac), 0);
	assert_memory_equal(mac, p.amac, 6);
	/* Solicited to a multicast destination: invalid (7.1.2) */
	send_nd(&p, 136, 0x60, "fd00:9::1", "ff02::1", all_nodes_mac, "fd00:9::1", 2, evil_mac);
	assert_int_equal(ptu_counter(p.b, "drop_nd_invalid"), 1);
	/* Override within the lock time: refused */
	send_nd(&p, 136, 0x20, "fd00:9::1", "fd00:9::2", p.bmac, "fd00:9::1", 2, evil_mac);
	assert_int_equal(resolve(p.b, "fd00:9::1", mac), 0);
	assert_memory_equal(mac, p.amac, 6);
	assert_true(ptu_counter(p.b, "drop_neigh_locked") >= 1);
	frame_now = 0;
	/* an NA for an address b never asked about creates nothing */
	send_nd(&p, 136, 0x60, "fd00:9::55", "fd00:9::2", p.bmac, "fd00:9::55", 2, evil_mac);
	assert_int_equal(resolve(p.b, "fd00:9::55", mac), -EAGAIN);
	pair_down(&p);
}

/* RFC 4861 7.2.3: an NS with an SLLA creates a STALE entry, one without none. */
static void test_nd_ns_learns_stale(void **state)
{
	struct pair p;
	uint8_t mac[6];
	uint64_t ns, na;
	(void)state;

	pair_up(&p);
	pump(&p, 2); /* link up: b announces its addresses */
	na = ptu_counter(p.b, "nd_adverts_tx");
	send_nd(&p, 135, 0, "fd00:9::77", "fd00:9::2", p.bmac, "fd00:9::2", 1, evil_mac);
	assert_int_equal(ptu_counter(p.b, "nd_adverts_tx"), na + 1);
	ns = ptu_counter(p.b, "nd_solicits_tx");
	assert_int_equal(resolve(p.b, "fd00:9::77", mac), 0);
	assert_memory_equal(mac, evil_mac, 6);
	assert_int_equal(ptu_counter(p.b, "nd_solicits_tx"), ns + 1); /* confirmed on use */
	/* unicast NS without SLLA: answered, nothing learnt */
	send_nd(&p, 135, 0, "fd00:9::78", "fd00:9::2", p.bmac, "fd00:9::2", 0, NULL);
	assert_int_equal(ptu_counter(p.b, "nd_adverts_tx"), na + 2);
	assert_int_equal(resolve(p.b, "fd00:9::78", mac), -EAGAIN);
	pair_down(&p);
}

/* ------------------------------------------------------------------------ */
/* ICMP echo                                                                  */

static void test_icmp_echo_abuse(void **state)
{
	struct pair p;
	uint64_t replies;
	(void)state;

	pair_up(&p);
	send_echo4(&p, 8, p.amac, "10.9.0.1", "10.9.0.2", 1, 1, false);
	assert_int_equal(ptu_counter(p.b, "icmp_echo_replies_tx"), 1);
	/* a wrong IPv4 header checksum: dropped, not answered */
	send_echo4(&p, 8, p.amac, "10.9.0.1", "10.9.0.2", 1, 2, true);
	assert_int_equal(ptu_counter(p.b, "icmp_echo_replies_tx"), 1);
	assert_int_equal(ptu_counter(p.b, "drop_bad_ip_checksum"), 1);
	/* broadcast and multicast sources are not answered (smurf reflection) */
	send_echo4(&p, 8, p.amac, "10.9.0.255", "10.9.0.2", 1, 3, false);
	send_echo4(&p, 8, p.amac, "255.255.255.255", "10.9.0.2", 1, 4, false);
	send_echo4(&p, 8, p.amac, "224.0.0.1", "10.9.0.2", 1, 5, false);
	send_echo4(&p, 8, (const uint8_t[6]){0x01, 0, 0x5e, 0, 0, 1}, "10.9.0.1", "10.9.0.2", 1, 6,
		   false);
	assert_int_equal(ptu_counter(p.b, "icmp_echo_replies_tx"), 1);
	assert_int_equal(ptu_counter(p.b, "drop_icmp_bad_source"), 4);
	/* a burst of 200 requests received at one instant: at most 50 replies
	 * (the bucket), the rest dropped; a second later 50 more are allowed */
	replies = ptu_counter(p.b, "icmp_echo_replies_tx");
	frame_now = rocemu_now_ns();
	for (int i = 0; i < 200; i++)
		send_echo4(&p, 8, p.amac, "10.9.0.1", "10.9.0.2", 2, (uint16_t)i, false);
	assert_true(ptu_counter(p.b, "icmp_echo_replies_tx") - replies <= 50);
	assert_true(ptu_counter(p.b, "drop_icmp_rate_limited") >= 150);
	assert_int_equal(ptu_counter(p.b, "icmp_echo_replies_tx") - replies +
			     ptu_counter(p.b, "drop_icmp_rate_limited"),
			 200);
	replies = ptu_counter(p.b, "icmp_echo_replies_tx");
	frame_now += 1000000000ull;
	for (int i = 0; i < 100; i++)
		send_echo4(&p, 8, p.amac, "10.9.0.1", "10.9.0.2", 3, (uint16_t)i, false);
	frame_now = 0;
	assert_int_equal(ptu_counter(p.b, "icmp_echo_replies_tx") - replies, 50);
	pair_down(&p);
}

/* `rocemu port --ping` counts a reply only for its own identifier and an
 * outstanding sequence number: spoofed and repeated replies do not count. */
static void test_ping_counts_only_its_replies(void **state)
{
	struct pair p;
	uint8_t dst[16];
	int rc = -EAGAIN;
	(void)state;

	pair_up(&p);
	assert_int_equal(rocemu_gid_parse("10.9.0.1", dst), 0);
	for (int i = 0; i < 5 && rc == -EAGAIN; i++) {
		rc = rocemu_port_ping(p.b, dst, 0x1234, 1);
		pump(&p, 3);
	}
	assert_int_equal(rc, 0);
	pump(&p, 3);
	assert_int_equal(rocemu_port_ping_replies(p.b), 1);
	/* replies b never asked for (the forger sends them from a's device) */
	send_echo4(&p, 0, p.amac, "10.9.0.1", "10.9.0.2", 0x1234, 1, false); /* answered already */
	send_echo4(&p, 0, p.amac, "10.9.0.1", "10.9.0.2", 0x1234, 2, false); /* never sent */
	send_echo4(&p, 0, p.amac, "10.9.0.1", "10.9.0.2", 0x9999, 1, false); /* not our id */
	assert_int_equal(rocemu_port_ping_replies(p.b), 1);
	assert_int_equal(ptu_counter(p.b, "drop_icmp_reply_unmatched"), 3);
	pair_down(&p);
}

/* ------------------------------------------------------------------------ */
/* RoCE only untagged and to our own MAC                                      */

struct recorder {
	unsigned n;
};

static void rec_rx(void *ctx, struct rte_mbuf **pkts, struct roce_pkt *descs, uint16_t n)
{
	struct recorder *r = ctx;

	(void)descs;
	for (uint16_t i = 0; i < n; i++)
		rte_pktmbuf_free(pkts[i]);
	r->n += n;
}

static unsigned rec_poll(void *ctx, uint64_t now)
{
	(void)ctx;
	(void)now;
	return 0;
}

static bool rec_has_work(void *ctx)
{
	(void)ctx;
	return false;
}

/* An RC SEND ONLY from a to b (10.9.0.2) as bytes, Ethernet destination dst_mac. */
static uint16_t roce_bytes(struct pair *p, uint8_t *buf, size_t cap, const uint8_t dst_mac[6])
{
	struct roce_pkt pkt;
	uint32_t flen;
	int hl;

	memset(&pkt, 0, sizeof(pkt));
	memcpy(pkt.path.dst_mac, dst_mac, 6);
	memcpy(pkt.path.src_mac, p->amac, 6);
	rocemu_port_gid(p->a, 1, pkt.path.src_gid);
	assert_int_equal(rocemu_gid_parse("10.9.0.2", pkt.path.dst_gid), 0);
	pkt.path.ip_version = 4;
	pkt.path.ttl = 64;
	pkt.path.udp_sport = 0xC001;
	pkt.path.udp_dport = ROCE_UDP_PORT;
	pkt.opcode = ROCE_OP_SEND_ONLY;
	pkt.op = roce_opcode_info(pkt.opcode);
	pkt.pkey = ROCE_DEFAULT_PKEY;
	pkt.dqpn = 0x11;
	pkt.psn = 1;
	pkt.payload_len = 16;
	hl = roce_build_headers(buf, cap, &pkt);
	assert_true(hl > 0);
	memset(buf + hl, 0xab, 16);
	flen = roce_frame_len(&pkt);
	assert_int_equal(roce_finish(buf, flen, &pkt), 0);
	return (uint16_t)flen;
}

static void test_roce_tagged_or_group_mac_dropped(void **state)
{
	static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	static const uint8_t all_nodes[6] = {0x33, 0x33, 0, 0, 0, 1};
	struct recorder rb = {0};
	struct rocemu_port_upper ub = {&rb, rec_rx, rec_poll, rec_has_work, NULL, NULL};
	uint8_t f[256], t[260];
	struct pair p;
	uint16_t n;
	(void)state;

	pair_up(&p);
	rocemu_port_set_upper(p.b, &ub);
	n = roce_bytes(&p, f, sizeof(f), p.bmac);
	inject(&p, f, n);
	assert_int_equal(rb.n, 1); /* the untagged unicast frame is delivered */
	/* the same frame with an 802.1Q tag (VLAN 5): the ICRC does not cover
	 * the Ethernet header, so it still verifies */
	memcpy(t, f, 12);
	t[12] = 0x81, t[13] = 0x00, t[14] = 0x00, t[15] = 0x05;
	memcpy(t + 16, f + 12, n - 12u);
	inject(&p, t, (uint16_t)(n + 4));
	assert_int_equal(rb.n, 1);
	assert_int_equal(ptu_counter(p.b, "drop_vlan_not_configured"), 1);
	/* to the broadcast MAC and to the IPv6 all-nodes MAC */
	n = roce_bytes(&p, f, sizeof(f), bcast);
	inject(&p, f, n);
	n = roce_bytes(&p, f, sizeof(f), all_nodes);
	inject(&p, f, n);
	assert_int_equal(rb.n, 1);
	assert_int_equal(ptu_counter(p.b, "drop_roce_not_unicast"), 2);
	pair_down(&p);
}

static int setup(void **state)
{
	(void)state;
	if (rocemu_eal_init() < 0) {
		fprintf(stderr, "EAL cannot start here: %s\n", rocemu_eal_error());
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_arp_forged_reply_does_not_redirect, teardown),
	    cmocka_unit_test_teardown(test_arp_learn_flood_keeps_confirmed, teardown),
	    cmocka_unit_test_teardown(test_arp_learnt_entry_is_confirmed_on_use, teardown),
	    cmocka_unit_test_teardown(test_neighbour_at_our_own_mac_refused, teardown),
	    cmocka_unit_test_teardown(test_nd_na_rules, teardown),
	    cmocka_unit_test_teardown(test_nd_ns_learns_stale, teardown),
	    cmocka_unit_test_teardown(test_icmp_echo_abuse, teardown),
	    cmocka_unit_test_teardown(test_ping_counts_only_its_replies, teardown),
	    cmocka_unit_test_teardown(test_roce_tagged_or_group_mac_dropped, teardown),
	};

	int rc;

	if (argc == 3 && !strcmp(argv[1], "--results")) {
		results = fopen(argv[2], "w");
		if (!results) {
			perror(argv[2]);
			return 1;
		}
	}
	if (rocemu_eal_init() < 0) {
		fprintf(stderr, "SKIP: EAL cannot start here: %s\n", rocemu_eal_error());
		return 77;
	}
	rc = cmocka_run_group_tests(tests, setup, NULL);
	if (results)
		fclose(results);
	return rc;
}
