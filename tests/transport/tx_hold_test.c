/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Transmit batched across posts (emulator/port/port_tx.c,
 * rocemu_port_flush_posted): frames of back-to-back posts wait in the
 * port's transmit buffer for one burst. Two engines over a net_ring pair:
 * - posts followed by no verb at all still reach the peer (the progress
 *   thread's pass sends what waits: the bound without a later verb);
 * - what leaves is in post order, across QPs and with the protocol frames
 *   (ACKs) of a pass between the posts: node B's capture of what it
 *   received lists A's requests in exactly the order A posted them.
 * No timing is asserted; waits end after ~20 s as failures.
 */
#include <endian.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

#define N_POSTS 16 /* per burst; fewer than the 32 a post may hold */

static struct node A, B;

static char capture_b[256];

static struct rocemu_qp *rc_qp(struct node *n)
{
	struct rocemu_qp *qp = h_qp(n, IBV_QPT_RC, 256, NULL);

	assert_non_null(qp);
	return qp;
}

static void connect(struct rocemu_qp *qa, struct rocemu_qp *qb, uint32_t psn_a, uint32_t psn_b)
{
	assert_int_equal(h_connect(&A, qa, &B, qb, IBV_MTU_1024, psn_a, psn_b, H_ACC_ALL, false),
			 0);
}

/* A counter of node n's port (h_counter reads the engine's). */
static uint64_t port_counter(struct node *n, const char *name)
{
	struct rocemu_counter c[256];
	unsigned k = rocemu_port_counters_all(rocemu_engine_port(n->e), c, 256);

	for (unsigned i = 0; i < k && i < 256; i++)
		if (strcmp(c[i].name, name) == 0)
			return c[i].value;
	fail_msg("no port counter %s", name);
	return 0;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {0, (long)ms * 1000000L};

	nanosleep(&ts, NULL);
}

/* An 8-byte RDMA WRITE of src[i] to dst + 8 * i, signaled. */
static void post_write(struct rocemu_qp *qp, const uint64_t *src, uint32_t lkey, uint64_t *dst,
		       uint32_t rkey, unsigned i)
{
	assert_int_equal(
	    h_post1(qp, IBV_WR_RDMA_WRITE, i, (void *)(src + i), 8, lkey, (void *)(dst + i), rkey),
	    0);
}

static void expect_completions(struct rocemu_cq *cq, unsigned n)
{
	struct rocemu_wc wc;

	for (unsigned i = 0; i < n; i++) {
		assert_int_equal(h_poll(cq, &wc), 1);
		assert_int_equal(wc.status, IBV_WC_SUCCESS);
	}
}

/* One 8-byte WRITE from qa to its peer, completed: A has resolved B's
 * address (until then a post builds no frame, so none is held). */
static void warm_up(struct rocemu_qp *qa)
{
	static uint64_t one = 1, sink;
	struct rocemu_mr *m = h_reg(A.pd, &one, sizeof(one), IBV_ACCESS_LOCAL_WRITE);
	struct rocemu_mr *r = h_reg(B.pd, &sink, sizeof(sink), H_ACC_ALL);

	assert_int_equal(h_post1(qa, IBV_WR_RDMA_WRITE, 0, &one, sizeof(one), h_key(m, false),
				 &sink, h_key(r, true)),
			 0);
	expect_completions(A.scq, 1);
	rocemu_mr_dereg(m);
	rocemu_mr_dereg(r);
}

/*
 * A burst of back-to-back posts, then no verb on A at all (no poll, no post):
 * every WRITE still lands in B's memory, placed by B's progress thread, so
 * A's frames left without a later verb. At least one post held its frames
 * (tx_held_posts): the batching was in play. A post holds only when no pass
 * ran since the post before it, and A's progress thread may pass between two
 * posts of a slow (ASan, loaded) burst: the burst is tried again until one
 * held, every time checking that all of its WRITEs landed.
 */
static void test_held_frames_leave_without_a_verb(void **state)
{
	static uint64_t src[N_POSTS], dst[N_POSTS];
	struct rocemu_qp *qa = rc_qp(&A), *qb = rc_qp(&B);
	struct rocemu_mr *ms = h_reg(A.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	struct rocemu_mr *md = h_reg(B.pd, dst, sizeof(dst), H_ACC_ALL);
	uint64_t held0 = port_counter(&A, "tx_held_posts");
	unsigned round;

	(void)state;
	connect(qa, qb, 0x100, 0x200);
	warm_up(qa);
	for (round = 0; round < 50 && port_counter(&A, "tx_held_posts") == held0; round++) {
		unsigned landed = 0;

		for (unsigned i = 0; i < N_POSTS; i++)
			src[i] = 0x5eed000000000000ull | (uint64_t)round << 16 | i;
		memset(dst, 0, sizeof(dst));
		for (unsigned i = 0; i < N_POSTS; i++)
			post_write(qa, src, h_key(ms, false), dst, h_key(md, true), i);
		/* no verb on A from here until every WRITE is in B's memory */
		for (unsigned ms_waited = 0; ms_waited < 20000 && landed < N_POSTS; ms_waited++) {
			sleep_ms(1);
			landed = 0;
			for (unsigned i = 0; i < N_POSTS; i++)
				landed += __atomic_load_n(&dst[i], __ATOMIC_RELAXED) == src[i];
		}
		if (landed < N_POSTS) {
			h_dump_counters(A.e, "node A");
			h_dump_counters(B.e, "node B");
		}
		assert_int_equal(landed, N_POSTS);
		expect_completions(A.scq, N_POSTS);
	}
	print_message("bursts until one held: %u\n", round);
	assert_true(port_counter(&A, "tx_held_posts") > held0);
	rocemu_mr_dereg(ms);
	rocemu_mr_dereg(md);
	assert_int_equal(rocemu_qp_destroy(qa), 0);
	assert_int_equal(rocemu_qp_destroy(qb), 0);
}

/* One RoCEv2 frame from B's capture: source IPv4's last byte, BTH opcode,
 * destination QP, PSN. */
struct seen {
	uint8_t src_ip4;
	uint8_t opcode;
	uint32_t dqpn, psn;
};

static uint32_t be24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

/* The RoCEv2 frames (untagged IPv4) of a libpcap file, in file order. */
static unsigned read_capture(const char *path, struct seen *out, unsigned max)
{
	FILE *f = fopen(path, "rb");
	uint8_t gh[24], rh[16], frame[2048];
	unsigned n = 0;

	assert_non_null(f);
	assert_int_equal(fread(gh, 1, sizeof(gh), f), sizeof(gh));
	while (n < max && fread(rh, 1, sizeof(rh), f) == sizeof(rh)) {
		uint32_t incl;

		memcpy(&incl, rh + 8, 4); /* written in this host's byte order */
		assert_true(incl <= sizeof(frame));
		assert_int_equal(fread(frame, 1, incl, f), incl);
		if (incl < 14 + 20 + 8 + 12 || frame[12] != 0x08 || frame[13] != 0x00 ||
		    frame[14 + 9] != 17 || (frame[14 + 20 + 2] << 8 | frame[14 + 20 + 3]) != 4791)
			continue;
		out[n].src_ip4 = frame[14 + 15];
		out[n].opcode = frame[42];
		out[n].dqpn = be24(frame + 42 + 5);
		out[n].psn = be24(frame + 42 + 9);
		n++;
	}
	fclose(f);
	return n;
}

#define ROCE_RC_WRITE_ONLY  0x0a
#define ROCE_RC_ACKNOWLEDGE 0x11

/*
 * A posts WRITEs back to back, alternating between two QPs; between two such
 * bursts it polls once, and that poll's pass receives B's WRITEs on a third
 * QP pair and queues their ACKs (protocol frames) behind A's waiting
 * requests. B's capture must show A's requests in post order (each first
 * appearance: a retransmission on a slow machine comes later and is skipped)
 * and A's ACKs among them; B saw no PSN out of sequence.
 */
static void test_post_order_across_qps_and_acks(void **state)
{
	enum { N_A = 2 * 2 * N_POSTS, N_B = 8 };
	static uint64_t src_a[N_A], dst_b[N_A], src_b[N_B], dst_a[N_B];
	struct rocemu_qp *qa[3], *qb[3];
	struct rocemu_mr *msa, *mdb, *msb, *mda;
	uint32_t expect_qpn[N_A], expect_psn[N_A], psn[2] = {0x1000, 0x2000};
	static struct seen seen[4096];
	unsigned n_seen, next = 0, acks_from_a = 0;
	struct rocemu_wc wc;

	(void)state;
	for (unsigned q = 0; q < 3; q++) {
		qa[q] = rc_qp(&A);
		qb[q] = rc_qp(&B);
	}
	connect(qa[0], qb[0], psn[0], 0x300);
	connect(qa[1], qb[1], psn[1], 0x400);
	connect(qa[2], qb[2], 0x500, 0x600);
	warm_up(qa[2]);
	msa = h_reg(A.pd, src_a, sizeof(src_a), IBV_ACCESS_LOCAL_WRITE);
	mdb = h_reg(B.pd, dst_b, sizeof(dst_b), H_ACC_ALL);
	msb = h_reg(B.pd, src_b, sizeof(src_b), IBV_ACCESS_LOCAL_WRITE);
	mda = h_reg(A.pd, dst_a, sizeof(dst_a), H_ACC_ALL);
	for (unsigned i = 0; i < N_A; i++)
		src_a[i] = 0xa000000000000000ull | i;
	for (unsigned i = 0; i < N_B; i++)
		src_b[i] = 0xb000000000000000ull | i;

	/* B's WRITEs to A, for A's passes to acknowledge */
	for (unsigned i = 0; i < N_B; i++)
		post_write(qb[2], src_b, h_key(msb, false), dst_a, h_key(mda, true), i);
	/* a poll of B's receive CQ (nothing comes there): its pass sends what B's posts held */
	(void)rocemu_cq_poll(B.rcq, 1, &wc);
	for (unsigned burst = 0; burst < 2; burst++) {
		for (unsigned k = 0; k < 2 * N_POSTS; k++) {
			unsigned i = burst * 2 * N_POSTS + k, q = k & 1;

			expect_qpn[i] = rocemu_qp_num(qb[q]);
			expect_psn[i] = psn[q]++;
			post_write(qa[q], src_a, h_key(msa, false), dst_b, h_key(mdb, true), i);
		}
		if (burst == 0) {
			/* let B's WRITEs reach A's ring, then one poll: its pass
			 * sends A's waiting requests and queues the ACKs */
			sleep_ms(5);
			(void)rocemu_cq_poll(A.rcq, 1, &wc);
		}
	}
	expect_completions(A.scq, N_A);
	expect_completions(B.scq, N_B);
	for (unsigned i = 0; i < N_A; i++)
		assert_true(dst_b[i] == src_a[i]);
	for (unsigned i = 0; i < N_B; i++)
		assert_true(dst_a[i] == src_b[i]);
	assert_true(port_counter(&A, "tx_held_posts") > 0);
	assert_int_equal(h_counter(B.e, "tx_nak_psn_seq"), 0);
	assert_int_equal(h_counter(A.e, "tx_nak_psn_seq"), 0);

	rocemu_mr_dereg(msa);
	rocemu_mr_dereg(mdb);
	rocemu_mr_dereg(msb);
	rocemu_mr_dereg(mda);
	for (unsigned q = 0; q < 3; q++) {
		assert_int_equal(rocemu_qp_destroy(qa[q]), 0);
		assert_int_equal(rocemu_qp_destroy(qb[q]), 0);
	}
	/* the capture is complete once B's port is closed */
	h_teardown_all(&A, &B);
	n_seen = read_capture(capture_b, seen, 4096);
	for (unsigned i = 0; i < n_seen; i++) {
		if (seen[i].src_ip4 != 1) /* 10.77.0.1 is A */
			continue;
		if (seen[i].opcode == ROCE_RC_ACKNOWLEDGE) {
			acks_from_a++;
			continue;
		}
		if (seen[i].opcode != ROCE_RC_WRITE_ONLY || next == N_A ||
		    (seen[i].dqpn != expect_qpn[0] && seen[i].dqpn != expect_qpn[1]))
			continue; /* the warm-up on the third pair */
		if (seen[i].dqpn == expect_qpn[next] && seen[i].psn == expect_psn[next]) {
			next++;
			continue;
		}
		/* not the next one: it must be a resend of one seen before */
		for (unsigned j = 0; j < next; j++)
			if (seen[i].dqpn == expect_qpn[j] && seen[i].psn == expect_psn[j])
				goto resent;
		fprintf(stderr, "frame %u: QP 0x%x PSN 0x%x, expected QP 0x%x PSN 0x%x\n", i,
			seen[i].dqpn, seen[i].psn, expect_qpn[next], expect_psn[next]);
		fail();
	resent:;
	}
	assert_int_equal(next, N_A);
	assert_true(acks_from_a > 0);
}

static int setup_plain(void **state)
{
	(void)state;
	return h_setup(&A, &B, "txhold1", NULL) == 0 ? 0 : -1;
}

static int teardown_plain(void **state)
{
	(void)state;
	h_teardown_all(&A, &B);
	return 0;
}

static int setup_capture(void **state)
{
	const char *opts_b[] = {"capture", capture_b, NULL};

	(void)state;
	snprintf(capture_b, sizeof(capture_b), "transport-tx-hold-%d.pcap", (int)getpid());
	return h_setup_opts(&A, &B, "txhold2", NULL, NULL, opts_b) == 0 ? 0 : -1;
}

static int teardown_capture(void **state)
{
	(void)state;
	h_teardown_all(&A, &B); /* nothing left when the test got to its own */
	unlink(capture_b);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_held_frames_leave_without_a_verb, setup_plain,
					    teardown_plain),
	    cmocka_unit_test_setup_teardown(test_post_order_across_qps_and_acks, setup_capture,
					    teardown_capture),
	};

	if (rocemu_eal_init() < 0) {
		fprintf(stderr, "skip: %s\n", rocemu_eal_error());
		return 77;
	}
	return cmocka_run_group_tests_name("transport_tx_hold", tests, NULL, NULL);
}
