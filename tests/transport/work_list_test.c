/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The engine's work list (engine.c: rocemu_engine_schedule, run_work,
 * rocemu_engine_forget) with more frames to send than the link takes: 64
 * QPs each post four 16-packet WRITEs while node B's engine lock is held
 * (B takes nothing from the 1024-slot ring), 4096 frames against the ring
 * and the 256-frame transmit buffer, so A's passes stop on transmit credit
 * (tx_credit_waits) and put the QPs they did not reach back at the head of
 * the list. Asserted:
 * - every WRITE completes and lands (no QP is lost from the list);
 * - passes did stop on credit (the requeue was exercised), and at their
 *   frame budget (PASS_TX_BUDGET: a pass that built that many leaves the
 *   other QPs for the next pass, which receives first);
 * - two QPs destroyed while on the list, one of them its tail (read from
 *   the engine while its passes stop on credit and so keep the order),
 *   leave the list whole: the others still complete (a stale tail would
 *   lose every QP scheduled after it: its completions never come).
 * No timing is asserted; waits end after ~20 s as failures.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "harness.h"
#include "rocemu_transport.h"

#define N_QPS  64
#define MSG    (16 * 1024) /* 16 packets of MTU 1024 */
#define PER_QP 4	   /* WRITEs each QP posts at once */
#define BYTES  ((size_t)N_QPS * PER_QP * MSG)

static struct node A, B;

struct qps {
	struct rocemu_qp *qa[N_QPS], *qb[N_QPS];
	uint8_t *src, *dst;
	struct rocemu_mr *ms, *md;
	uint32_t lkey, rkey; /* read before B's lock is held: h_key takes it */
};

static void qps_up(struct qps *q)
{
	q->src = malloc(BYTES);
	q->dst = calloc(1, BYTES);
	assert_non_null(q->src);
	assert_non_null(q->dst);
	h_fill(q->src, BYTES, 17);
	q->ms = h_reg(A.pd, q->src, BYTES, IBV_ACCESS_LOCAL_WRITE);
	q->md = h_reg(B.pd, q->dst, BYTES, H_ACC_ALL);
	q->lkey = h_key(q->ms, false);
	q->rkey = h_key(q->md, true);
	for (unsigned i = 0; i < N_QPS; i++) {
		q->qa[i] = h_qp(&A, IBV_QPT_RC, 2 * PER_QP, NULL);
		q->qb[i] = h_qp(&B, IBV_QPT_RC, 2 * PER_QP, NULL);
		assert_non_null(q->qa[i]);
		assert_non_null(q->qb[i]);
		assert_int_equal(h_connect(&A, q->qa[i], &B, q->qb[i], IBV_MTU_1024, 100 + i,
					   900 + i, H_ACC_ALL, false),
				 0);
	}
}

static void qps_down(struct qps *q)
{
	for (unsigned i = 0; i < N_QPS; i++) {
		if (q->qa[i])
			assert_int_equal(rocemu_qp_destroy(q->qa[i]), 0);
		assert_int_equal(rocemu_qp_destroy(q->qb[i]), 0);
	}
	rocemu_mr_dereg(q->ms);
	rocemu_mr_dereg(q->md);
	free(q->src);
	free(q->dst);
}

/* WRITE k of QP i: src to dst at the same offset, wr_id i */
static void post_write(struct qps *q, unsigned i, unsigned k)
{
	size_t off = ((size_t)i * PER_QP + k) * MSG;

	assert_int_equal(h_post1(q->qa[i], IBV_WR_RDMA_WRITE, i, q->src + off, MSG, q->lkey,
				 q->dst + off, q->rkey),
			 0);
}

/* Every QP but the skipped posts its PER_QP WRITEs while B's engine takes
 * nothing; then the QP at the tail of A's work list and QP N_QPS / 2 are
 * destroyed if asked (gone[] says which), and B runs again. */
static void post_all_held(struct qps *q, const bool *skip, bool *gone)
{
	uint64_t waits = h_counter(A.e, "tx_credit_waits");

	rocemu_engine_lock(B.e);
	for (unsigned k = 0; k < PER_QP; k++)
		for (unsigned i = 0; i < N_QPS; i++)
			if (!skip || !skip[i])
				post_write(q, i, k);
	if (gone) {
		struct rocemu_qp *tail;

		/* B takes nothing: once a pass stopped on credit, every pass
		 * stops at its first QP and puts the list back as it was */
		for (unsigned ms = 0; h_counter(A.e, "tx_credit_waits") < waits + 2; ms++) {
			struct timespec ts = {0, 1000000};

			assert_true(ms < 20000); /* ~20 s: no pass stopped on credit */
			nanosleep(&ts, NULL);
		}
		rocemu_engine_lock(A.e);
		tail = A.e->work_tail;
		rocemu_engine_unlock(A.e);
		assert_non_null(tail);
		for (unsigned i = 0; i < N_QPS; i++)
			gone[i] = q->qa[i] == tail || i == N_QPS / 2;
		assert_true(gone[N_QPS / 2]);
		for (unsigned i = 0; i < N_QPS; i++) {
			if (!gone[i])
				continue;
			assert_int_equal(rocemu_qp_destroy(q->qa[i]), 0);
			q->qa[i] = NULL;
		}
	}
	rocemu_engine_unlock(B.e);
}

/* PER_QP successful completions on A's send CQ for each QP not skipped */
static void expect_writes(const bool *skip)
{
	unsigned seen[N_QPS] = {0}, n = 0;
	struct rocemu_wc wc;

	for (unsigned i = 0; i < N_QPS; i++)
		n += skip && skip[i] ? 0 : PER_QP;
	for (unsigned k = 0; k < n; k++) {
		assert_int_equal(h_poll(A.scq, &wc), 1);
		assert_int_equal(wc.status, IBV_WC_SUCCESS);
		assert_true(wc.wr_id < N_QPS);
		assert_false(skip && skip[wc.wr_id]);
		assert_true(++seen[wc.wr_id] <= PER_QP);
	}
}

static void expect_landed(const struct qps *q, const bool *skip)
{
	for (unsigned i = 0; i < N_QPS; i++) {
		size_t off = (size_t)i * PER_QP * MSG;

		if (!skip || !skip[i])
			assert_memory_equal(q->src + off, q->dst + off, (size_t)PER_QP * MSG);
	}
}

static void test_credit_stops_lose_no_qp(void **state)
{
	struct qps q;
	uint64_t waits0 = h_counter(A.e, "tx_credit_waits");
	uint64_t budget0 = h_counter(A.e, "pass_tx_budget_stops");

	(void)state;
	qps_up(&q);
	post_all_held(&q, NULL, NULL);
	expect_writes(NULL);
	expect_landed(&q, NULL);
	/* 4096 frames against a full ring: passes stopped on credit */
	assert_true(h_counter(A.e, "tx_credit_waits") > waits0);
	assert_true(h_counter(A.e, "pass_tx_budget_stops") > budget0);
	qps_down(&q);
}

static void test_destroyed_on_the_list(void **state)
{
	struct qps q;
	bool gone[N_QPS] = {0};

	(void)state;
	qps_up(&q);
	/* the list's tail and one in the middle go while on the list */
	post_all_held(&q, NULL, gone);
	/* a destroyed QP takes its completions from the CQ (cq_cleaned) */
	expect_writes(gone);
	/* and the list goes on working: a second round on the survivors */
	memset(q.dst, 0, BYTES);
	post_all_held(&q, gone, NULL);
	expect_writes(gone);
	expect_landed(&q, gone);
	qps_down(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_credit_stops_lose_no_qp),
	    cmocka_unit_test(test_destroyed_on_the_list),
	};

	return h_run_group("transport_work_list", tests, sizeof(tests) / sizeof(tests[0]), &A, &B,
			   "worklist", NULL);
}
