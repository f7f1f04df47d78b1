/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the inspector's pieces, in process: the latency histogram,
 * the frame decoder under every link type and every truncation, the PSN
 * analysis across the 24-bit wrap, and random bytes (no crash, no read out of
 * bounds: run under ASan).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <pcap/pcap.h>

#include "inspect.h"

#ifndef DLT_LINUX_SLL2
#define DLT_LINUX_SLL2 276
#endif

/* ------------------------------------------------------------------------ */
/* histogram                                                                 */

static void hist_quantiles_within_resolution(void **state)
{
	struct insp_hist *h = calloc(1, sizeof(*h));
	const double qs[] = {0.01, 0.25, 0.5, 0.9, 0.99, 0.999};

	(void)state;
	assert_non_null(h);
	assert_int_equal(insp_hist_quantile(h, 0.5), 0);
	for (uint64_t v = 1; v <= 100000; v++)
		insp_hist_add(h, v * 10); /* 10 ns .. 1 ms, uniform */
	assert_int_equal(h->n, 100000);
	assert_int_equal(h->min, 10);
	assert_int_equal(h->max, 1000000);
	for (unsigned i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		double want = qs[i] * 1000000, got = (double)insp_hist_quantile(h, qs[i]);

		/* one bucket is 1/16 of its power of two wide: within 1/16 of the value */
		assert_true(got >= want * (1 - 1.0 / 16) - 10 && got <= want * (1 + 1.0 / 16) + 10);
	}
	assert_int_equal(insp_hist_quantile(h, 0), 10);
	assert_int_equal(insp_hist_quantile(h, 1), 1000000);
	free(h);
}

static void hist_small_values_exact_and_huge_values_clamped(void **state)
{
	struct insp_hist *h = calloc(1, sizeof(*h)), *g = calloc(1, sizeof(*g));

	(void)state;
	assert_non_null(h);
	assert_non_null(g);
	for (uint64_t v = 0; v < 16; v++)
		insp_hist_add(h, v);
	assert_int_equal(insp_hist_quantile(h, 0.5), 7);
	insp_hist_add(g, UINT64_MAX);
	insp_hist_add(g, 1ull << 50);
	assert_int_equal(insp_hist_quantile(g, 0.99), UINT64_MAX);
	insp_hist_merge(h, g);
	assert_int_equal(h->n, 18);
	assert_int_equal(h->max, UINT64_MAX);
	assert_int_equal(h->min, 0);
	free(h);
	free(g);
}

/* ------------------------------------------------------------------------ */
/* opcode counters: inline for a few, a full table past them                 */

static void opcode_counts_inline_then_table(void **state)
{
	struct insp_opcounts c;

	(void)state;
	memset(&c, 0, sizeof(c));
	for (unsigned k = 0; k < 3; k++)
		for (unsigned op = 0; op < INSP_OPS_INLINE; op++)
			insp_ops_add(&c, (uint8_t)(op * 3));
	assert_null(c.all);
	assert_int_equal(insp_ops_get(&c, 3), 3);
	assert_int_equal(insp_ops_get(&c, 1), 0);
	insp_ops_add(&c, 0xFF); /* one more kind: the table takes over, counts kept */
	assert_non_null(c.all);
	assert_int_equal(insp_ops_get(&c, 0xFF), 1);
	for (unsigned op = 0; op < INSP_OPS_INLINE; op++)
		assert_int_equal(insp_ops_get(&c, (uint8_t)(op * 3)), 3);
	insp_ops_add(&c, 3);
	assert_int_equal(insp_ops_get(&c, 3), 4);
	free(c.all);
}

/* ------------------------------------------------------------------------ */
/* frames                                                                    */

/* An RC SEND ONLY of `payload` bytes from 10.0.0.1 to 10.0.0.2, built by the codec. */
static uint32_t build_send(uint8_t *buf, uint32_t room, uint32_t psn, uint32_t payload, bool vlan)
{
	struct roce_pkt p;
	int hdr;
	uint32_t len;

	memset(&p, 0, sizeof(p));
	p.path.ip_version = 4;
	roce_gid_from_ipv4(p.path.src_gid, htonl(0x0A000001));
	roce_gid_from_ipv4(p.path.dst_gid, htonl(0x0A000002));
	p.path.ttl = 64;
	p.path.udp_sport = 0xC001;
	p.path.has_vlan = vlan;
	p.path.vlan_tci = 42;
	p.opcode = ROCE_OP_SEND_ONLY;
	p.pkey = ROCE_DEFAULT_PKEY;
	p.dqpn = 0x123;
	p.psn = psn;
	p.ackreq = true;
	p.payload_len = payload;
	hdr = roce_build_headers(buf, room, &p);
	assert_true(hdr > 0);
	len = roce_frame_len(&p);
	assert_true(len <= room);
	memset(buf + hdr, 0xAB, payload);
	assert_int_equal(roce_finish(buf, len, &p), 0);
	return len;
}

static void decode_one(int dlt, const uint8_t *frame, uint32_t caplen, uint32_t len,
		       struct insp_frame *f)
{
	struct insp_decoder d = {.dlt = dlt};

	memset(f, 0, sizeof(*f));
	insp_decode(&d, frame, caplen, len, f);
	insp_decoder_free(&d);
}

static void decode_every_link_type(void **state)
{
	uint8_t eth[512], other[600];
	uint32_t n = build_send(eth, sizeof(eth), 77, 100, false), ipn = n - 14;
	const uint8_t *ip = eth + 14;
	struct insp_frame f;
	static const uint8_t sll[16] = {0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x08, 0x00};
	static const uint8_t sll2[20] = {0x08, 0x00, 0, 0, 0, 0, 0, 2, 0, 1, 0, 6};
	static const uint8_t qinq[8] = {0x88, 0xA8, 0x00, 0x07, 0x81, 0x00, 0x00, 0x64};

	(void)state;
	decode_one(DLT_EN10MB, eth, n, n, &f);
	assert_int_equal(f.cls, INSP_ROCE);
	assert_int_equal(f.icrc, INSP_ICRC_OK);
	assert_int_equal(f.dqpn, 0x123);
	assert_int_equal(f.psn, 77);
	assert_int_equal(f.pkt.payload_len, 100);

	memcpy(other, sll, 16);
	memcpy(other + 16, ip, ipn);
	decode_one(DLT_LINUX_SLL, other, ipn + 16, ipn + 16, &f);
	assert_int_equal(f.cls, INSP_ROCE);
	assert_int_equal(f.icrc, INSP_ICRC_OK);

	memcpy(other, sll2, 20);
	memcpy(other + 20, ip, ipn);
	decode_one(DLT_LINUX_SLL2, other, ipn + 20, ipn + 20, &f);
	assert_int_equal(f.cls, INSP_ROCE);
	assert_int_equal(f.icrc, INSP_ICRC_OK);

	decode_one(DLT_RAW, ip, ipn, ipn, &f);
	assert_int_equal(f.cls, INSP_ROCE);
	assert_int_equal(f.icrc, INSP_ICRC_OK);

	/* QinQ: two tags between the MACs and the ethertype */
	memcpy(other, eth, 12);
	memcpy(other + 12, qinq, 8);
	memcpy(other + 20, eth + 12, n - 12);
	decode_one(DLT_EN10MB, other, n + 8, n + 8, &f);
	assert_int_equal(f.cls, INSP_ROCE);
	assert_int_equal(f.icrc, INSP_ICRC_OK);
	assert_int_equal(f.vlans, 2);
	assert_int_equal(f.vlan_tci, 7);

	/* one tag: the codec parses the whole frame */
	n = build_send(eth, sizeof(eth), 78, 3, true);
	decode_one(DLT_EN10MB, eth, n, n, &f);
	assert_int_equal(f.cls, INSP_ROCE);
	assert_int_equal(f.icrc, INSP_ICRC_OK);
	assert_int_equal(f.pkt.pad, 1);
	assert_int_equal(insp_link_supported(DLT_EN10MB), 0);
	assert_true(insp_link_supported(147) < 0);
}

static void decode_bad_icrc_keeps_the_qp(void **state)
{
	uint8_t eth[512];
	uint32_t n = build_send(eth, sizeof(eth), 5, 64, false);
	struct insp_frame f;

	(void)state;
	eth[n - 10] ^= 0x40; /* a payload bit */
	decode_one(DLT_EN10MB, eth, n, n, &f);
	assert_int_equal(f.cls, INSP_ROCE);
	assert_int_equal(f.icrc, INSP_ICRC_BAD);
	assert_int_equal(f.dqpn, 0x123);
	assert_int_equal(f.psn, 5);
}

/* Every snaplen from 0 to the whole frame: never a bad ICRC, never out of bounds. */
static void decode_every_truncation(void **state)
{
	uint8_t eth[512];
	uint32_t n = build_send(eth, sizeof(eth), 9, 200, false);
	struct insp_frame f;

	(void)state;
	for (uint32_t cap = 0; cap < n; cap++) {
		uint8_t *copy = malloc(cap ? cap : 1);

		assert_non_null(copy);
		memcpy(copy, eth, cap);
		decode_one(DLT_EN10MB, copy, cap, n, &f);
		assert_true(f.truncated);
		assert_int_not_equal(f.icrc, INSP_ICRC_BAD);
		if (cap >= 14 + 20 + 8 + 12) {
			assert_true(f.has_bth);
			assert_int_equal(f.psn, 9);
			assert_int_equal(f.cls, INSP_ROCE);
		}
		assert_int_equal(f.headers_ok, cap >= 14 + 20 + 8 + 12);
		free(copy);
	}
	/* cut on the wire: caplen == len, the IP header says more */
	decode_one(DLT_EN10MB, eth, 100, 100, &f);
	assert_int_equal(f.cls, INSP_ROCE_MALFORMED);
	assert_true(f.has_bth);
	assert_false(f.truncated);
}

static void decode_random_bytes(void **state)
{
	struct insp_frame f;
	struct insp_state s;
	uint8_t buf[300];
	unsigned seed = 12345;
	static const int dlts[] = {DLT_EN10MB, DLT_LINUX_SLL, DLT_LINUX_SLL2, DLT_RAW};

	(void)state;
	assert_int_equal(insp_state_init(&s, true), 0);
	for (unsigned i = 0; i < 20000; i++) {
		uint32_t len = (uint32_t)(rand_r(&seed) % sizeof(buf));

		for (uint32_t k = 0; k < len; k++)
			buf[k] = (uint8_t)rand_r(&seed);
		/* often make it look like IPv4/UDP/4791 so the codec gets deep */
		if (len > 50 && (i & 1)) {
			buf[12] = 0x08;
			buf[13] = 0x00;
			buf[14] = 0x45;
			buf[23] = 17;
			buf[36] = 0x12;
			buf[37] = 0xB7;
		}
		/* rocemu's records (Ethernet only): random types and lengths, a
		 * lost frame often holding an IPv4/UDP/4791 frame */
		if (len > 24 && i % 4 == 0 && (i & 4)) {
			buf[12] = 0x88;
			buf[13] = 0xB5;
			memcpy(buf + 14, "RCMU", 4);
			buf[18] = 1;
			buf[19] = (uint8_t)(rand_r(&seed) % 5);
			if (len > 22 + 50 && (i & 8)) {
				buf[22 + 12] = 0x08;
				buf[22 + 13] = 0x00;
				buf[22 + 14] = 0x45;
				buf[22 + 23] = 17;
				buf[22 + 36] = 0x12;
				buf[22 + 37] = 0xB7;
			}
		}
		decode_one(dlts[i % 4], buf, len, len + (uint32_t)(rand_r(&seed) % 3), &f);
		f.index = i + 1;
		f.ts_ns = 1000ull * i;
		insp_flow_packet(&s, &f);
	}
	insp_flow_finish(&s);
	assert_int_equal(s.frames, 20000);
	/* and every report of whatever that made */
	{
		FILE *null = fopen("/dev/null", "w");
		const char *files[] = {"random"};
		struct insp_report_opts ro = {.max_events = 1000, .files = files, .nfiles = 1};
		struct insp_ladder_pkt pk[5] = {
		    {.ts = 1, .opcode = 0x11, .syndrome = 0x60, .from_a = false},
		    {.ts = 2000000, .opcode = 0xFF, .malformed = true, .from_a = true},
		    {.ts = 3000000, .opcode = 0x04, .notes = INSP_NOTE_RETX, .from_a = true},
		    {.ts = 3000001, .opcode = 0x04, .notes = INSP_NOTE_LOST_TX, .from_a = false},
		    {.ts = 3000002, .opcode = 0x11, .notes = INSP_NOTE_LOST_RX, .from_a = true},
		};
		struct insp_ladder l = {.pkts = pk, .n = 5, .cap = 5};

		assert_non_null(null);
		insp_report_text(null, &s, &ro);
		insp_report_json(null, &s, &ro);
		insp_report_violations(null, &s, &ro);
		assert_int_equal(insp_svg_plot(null, &s), 0);
		if (s.nhalves) {
			l.a = s.halves[0];
			l.b = s.halves[0]->peer;
			assert_int_equal(insp_svg_ladder(null, &l), 0);
		}
		fclose(null);
	}
	insp_state_free(&s);
}

/* ------------------------------------------------------------------------ */
/* Flow table under crafted collisions (issue 18, fuzzing: a keyed hash)     */

/* The unkeyed FNV-1a the flow table hashed its 40-byte key with (src GID,
 * dst GID, dest QPN, source QP): what an attacker crafting a capture knows. */
static uint64_t fnv_flow_key(const uint8_t src[16], const uint8_t dst[16], uint32_t dqpn)
{
	uint8_t k[40];
	uint64_t h = 1469598103934665603ull;
	uint32_t unknown = INSP_QPN_UNKNOWN;

	memcpy(k, src, 16);
	memcpy(k + 16, dst, 16);
	memcpy(k + 32, &dqpn, 4);
	memcpy(k + 36, &unknown, 4);
	for (size_t i = 0; i < sizeof(k); i++) {
		h ^= k[i];
		h *= 1099511628211ull;
	}
	return h ^ (h >> 29);
}

/* 1024 flows whose FNV-1a hashes share their low 16 bits (one slot for any
 * table up to 65536 entries): with the unkeyed hash every new flow walked
 * the whole chain, ~n^2/2 = 500000 probes; keyed, a handful per flow. */
static void flow_table_crafted_collisions(void **state)
{
	const unsigned n = 1024;
	struct insp_state s;
	struct insp_frame f;
	uint8_t eth[512];
	uint32_t len = build_send(eth, sizeof(eth), 1, 16, false), q = 0;

	(void)state;
	assert_int_equal(insp_state_init(&s, false), 0);
	decode_one(DLT_EN10MB, eth, len, len, &f);
	for (unsigned i = 0; i < n; i++, q++) {
		while ((fnv_flow_key(f.src_gid, f.dst_gid, q) & 0xffff) != 0x1234)
			q++;
		f.dqpn = q;
		f.index = i + 1;
		f.ts_ns = 1000ull * i;
		insp_flow_packet(&s, &f);
	}
	assert_int_equal(s.nhalves, n);
	if (s.table_probes >= 16ull * n)
		fail_msg("%llu probes for %u flows: the table degrades on crafted collisions",
			 (unsigned long long)s.table_probes, n);
	insp_state_free(&s);
}

/* ------------------------------------------------------------------------ */
/* PSN analysis                                                              */

static void feed(struct insp_state *s, uint32_t psn, uint64_t t, uint64_t index)
{
	uint8_t eth[512];
	uint32_t n = build_send(eth, sizeof(eth), psn, 16, false);
	struct insp_frame f;

	decode_one(DLT_EN10MB, eth, n, n, &f);
	f.index = index;
	f.ts_ns = t;
	insp_flow_packet(s, &f);
}

static void psn_wraps_without_a_gap(void **state)
{
	struct insp_state s;
	const uint32_t psns[] = {0xFFFFFE, 0xFFFFFF, 0, 1, 3, 2};

	(void)state;
	assert_int_equal(insp_state_init(&s, false), 0);
	for (unsigned i = 0; i < 6; i++)
		feed(&s, psns[i], 1000 * (i + 1), i + 1);
	insp_flow_finish(&s);
	assert_int_equal(s.nhalves, 1);
	assert_int_equal(s.halves[0]->req_pkts, 6);
	assert_int_equal(s.halves[0]->gaps_seen, 1); /* 2 missing when 3 came */
	assert_int_equal(s.halves[0]->reordered, 1); /* then 2 came late */
	assert_int_equal(s.halves[0]->psn_missing, 0);
	assert_int_equal(s.halves[0]->duplicates, 0);
	assert_int_equal(s.halves[0]->req_first, 0xFFFFFE);
	assert_int_equal(s.halves[0]->req_next, 4);
	assert_int_equal(s.halves[0]->msgs[INSP_MSG_SEND], 6);
	/* nothing acknowledged the sends: six messages left incomplete, no violation */
	assert_int_equal(s.halves[0]->msgs_incomplete, 6);
	assert_int_equal(s.violations, 0);
	insp_state_free(&s);
}

static void psn_timeout_retransmission_vs_duplicate(void **state)
{
	struct insp_state s;

	(void)state;
	assert_int_equal(insp_state_init(&s, false), 0);
	feed(&s, 10, 1000, 1);
	feed(&s, 10, 3000, 2);	   /* 2 us later: the network's copy */
	feed(&s, 10, 50000000, 3); /* 50 ms later: the requester's timer */
	assert_int_equal(s.halves[0]->duplicates, 1);
	assert_int_equal(s.halves[0]->retransmitted, 1);
	insp_state_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(hist_quantiles_within_resolution),
	    cmocka_unit_test(hist_small_values_exact_and_huge_values_clamped),
	    cmocka_unit_test(opcode_counts_inline_then_table),
	    cmocka_unit_test(decode_every_link_type),
	    cmocka_unit_test(decode_bad_icrc_keeps_the_qp),
	    cmocka_unit_test(decode_every_truncation),
	    cmocka_unit_test(decode_random_bytes),
	    cmocka_unit_test(flow_table_crafted_collisions),
	    cmocka_unit_test(psn_wraps_without_a_gap),
	    cmocka_unit_test(psn_timeout_retransmission_vs_duplicate),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
