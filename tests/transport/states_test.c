/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The named protocol states of the responder (resp-msg, resp-seq) and the
 * completer (comp), qp_states.c. The tables are walked: every state named,
 * every state reachable from the initial one and able to come back to it,
 * a list of wrong moves refused, and on a live QP every illegal change
 * counted (illegal_state_transitions) and no legal one. Then real traffic
 * runs with a trace hook on both engines (rocemu_engine_set_trace): an RNR
 * NAK cycle on a clean link, and WRITEs and READs on a link that drops 5 %
 * of the frames each way. Every traced line must continue its machine from
 * the state the previous line left it in, by a legal step, and the steps
 * the scenario exists for must show (RNR_NAKED and back, a sequence NAK,
 * a re-read of lost READ responses).
 * cmocka.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "rocemu_transport.h"

static struct node A, B;

/* ------------------------------------------------------------------------ */
/* The tables                                                                  */

static int state_by_name(enum rocemu_sm m, const char *name)
{
	for (unsigned s = 0; s < rocemu_sm_states(m); s++)
		if (!strcmp(rocemu_sm_state_name(m, s), name))
			return (int)s;
	return -1;
}

static int machine_by_name(const char *name)
{
	for (int m = 0; m < ROCEMU_SM_COUNT; m++)
		if (!strcmp(rocemu_sm_name((enum rocemu_sm)m), name))
			return m;
	return -1;
}

static void test_every_state_named(void **state)
{
	(void)state;
	for (int m = 0; m < ROCEMU_SM_COUNT; m++) {
		unsigned n = rocemu_sm_states((enum rocemu_sm)m);

		assert_true(n >= 2 && n <= 32);
		assert_int_equal(machine_by_name(rocemu_sm_name((enum rocemu_sm)m)), m);
		for (unsigned s = 0; s < n; s++) {
			const char *name = rocemu_sm_state_name((enum rocemu_sm)m, s);

			assert_string_not_equal(name, "?");
			assert_int_equal(state_by_name((enum rocemu_sm)m, name), (int)s);
		}
		assert_string_equal(rocemu_sm_state_name((enum rocemu_sm)m, n), "?");
		assert_false(rocemu_sm_legal((enum rocemu_sm)m, 0, n));
		assert_false(rocemu_sm_legal((enum rocemu_sm)m, n, 0));
	}
	assert_int_equal(rocemu_sm_states(ROCEMU_SM_RESP_MSG), RESP_MSG_STATES);
	assert_int_equal(rocemu_sm_states(ROCEMU_SM_RESP_SEQ), RESP_SEQ_STATES);
	assert_int_equal(rocemu_sm_states(ROCEMU_SM_COMP), COMP_STATES);
	assert_string_equal(rocemu_sm_name(ROCEMU_SM_COUNT), "?");
}

/* The states reachable from `from` (bit per state); backwards: those from
 * which `from` is reachable. */
static unsigned reachable(enum rocemu_sm m, unsigned from, bool backwards)
{
	unsigned n = rocemu_sm_states(m), seen = 1u << from, frontier = seen;

	while (frontier) {
		unsigned next = 0;

		for (unsigned a = 0; a < n; a++)
			for (unsigned b = 0; (frontier >> a & 1) && b < n; b++)
				if ((backwards ? rocemu_sm_legal(m, b, a)
					       : rocemu_sm_legal(m, a, b)) &&
				    !(seen >> b & 1))
					next |= 1u << b;
		seen |= next;
		frontier = next;
	}
	return seen;
}

static void test_table_walk(void **state)
{
	static const struct {
		enum rocemu_sm m;
		unsigned from, to;
	} wrong[] = {
	    /* a message ends before another begins */
	    {ROCEMU_SM_RESP_MSG, RESP_MSG_SEND, RESP_MSG_WRITE},
	    {ROCEMU_SM_RESP_MSG, RESP_MSG_WRITE, RESP_MSG_SEND},
	    {ROCEMU_SM_RESP_MSG, RESP_MSG_UC_DROP, RESP_MSG_SEND},
	    {ROCEMU_SM_RESP_MSG, RESP_MSG_UC_DROP, RESP_MSG_WRITE},
	    /* an RNR NAK answers an in-order packet only */
	    {ROCEMU_SM_RESP_SEQ, RESP_SEQ_NAKED, RESP_SEQ_RNR_NAKED},
	    {ROCEMU_SM_RESP_SEQ, RESP_SEQ_RNR_NAKED, RESP_SEQ_NAKED},
	    /* one thing changes at a time */
	    {ROCEMU_SM_COMP, COMP_STEADY, COMP_REREAD_PROBING},
	    {ROCEMU_SM_COMP, COMP_REREAD_PROBING, COMP_STEADY},
	    {ROCEMU_SM_COMP, COMP_PROBING, COMP_REREAD},
	    {ROCEMU_SM_COMP, COMP_REREAD, COMP_PROBING},
	};

	(void)state;
	for (int m = 0; m < ROCEMU_SM_COUNT; m++) {
		unsigned n = rocemu_sm_states((enum rocemu_sm)m), all = (1u << n) - 1;

		/* every state reachable from the initial one, and the way back */
		assert_int_equal(reachable((enum rocemu_sm)m, 0, false), all);
		assert_int_equal(reachable((enum rocemu_sm)m, 0, true), all);
		for (unsigned s = 0; s < n; s++)
			assert_false(rocemu_sm_legal((enum rocemu_sm)m, s, s)); /* no change */
	}
	for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++)
		assert_false(rocemu_sm_legal(wrong[i].m, wrong[i].from, wrong[i].to));
}

/* Every change through rocemu_sm_change on a live QP: the illegal ones are
 * counted, one each, the legal ones not. */
static void test_changes_counted(void **state)
{
	struct rocemu_qp *qp;
	uint64_t before, illegal = 0;

	(void)state;
	qp = h_qp(&A, IBV_QPT_RC, 4, NULL);
	assert_non_null(qp);
	before = h_counter(A.e, "illegal_state_transitions");
	rocemu_engine_lock(A.e);
	for (int m = 0; m < ROCEMU_SM_COUNT; m++)
		for (unsigned a = 0; a < rocemu_sm_states((enum rocemu_sm)m); a++)
			for (unsigned b = 0; b < rocemu_sm_states((enum rocemu_sm)m); b++) {
				uint64_t c = A.e->ctr[CTR_illegal_state_transitions];
				bool legal = rocemu_sm_legal((enum rocemu_sm)m, a, b);

				if (a == b)
					continue;
				rocemu_sm_change(qp, (enum rocemu_sm)m, a, b, "table walk");
				assert_int_equal(A.e->ctr[CTR_illegal_state_transitions],
						 c + !legal);
				illegal += !legal;
			}
	rocemu_engine_unlock(A.e);
	assert_true(illegal >= 6);
	assert_int_equal(h_counter(A.e, "illegal_state_transitions"), before + illegal);
	assert_int_equal(rocemu_qp_destroy(qp), 0);
}

/* ------------------------------------------------------------------------ */
/* Traces of real traffic                                                      */

#define MAX_LINES 4096

static struct trace {
	pthread_mutex_t lock;
	unsigned n;
	bool overflow;
	bool bad_topic; /* the hook runs on the engine's threads: no assert there */
	char line[MAX_LINES][160];
} traces[2] = {{.lock = PTHREAD_MUTEX_INITIALIZER}, {.lock = PTHREAD_MUTEX_INITIALIZER}};

static void hook(void *arg, const char *topic, const char *line)
{
	struct trace *t = arg;

	pthread_mutex_lock(&t->lock);
	if (strcmp(topic, "resp") && strcmp(topic, "comp"))
		t->bad_topic = true;
	if (t->n < MAX_LINES)
		snprintf(t->line[t->n++], sizeof(t->line[0]), "%s", line);
	else
		t->overflow = true;
	pthread_mutex_unlock(&t->lock);
}

static void trace_start(void)
{
	for (int i = 0; i < 2; i++) {
		traces[i].n = 0;
		traces[i].overflow = false;
		traces[i].bad_topic = false;
	}
	rocemu_engine_set_trace(A.e, hook, &traces[0]);
	rocemu_engine_set_trace(B.e, hook, &traces[1]);
}

static void trace_stop(void)
{
	rocemu_engine_set_trace(A.e, NULL, NULL);
	rocemu_engine_set_trace(B.e, NULL, NULL);
}

/* How many lines of t contain `what` (a QP's machine and step). */
static unsigned trace_count(struct trace *t, uint32_t qpn, const char *what)
{
	char prefix[32];
	unsigned n = 0;

	snprintf(prefix, sizeof(prefix), "qp 0x%06x ", qpn);
	pthread_mutex_lock(&t->lock);
	for (unsigned i = 0; i < t->n; i++)
		if (!strncmp(t->line[i], prefix, strlen(prefix)) && strstr(t->line[i], what))
			n++;
	pthread_mutex_unlock(&t->lock);
	return n;
}

/* Each line continues its QP's machine from where the line before left it,
 * by a legal step; every machine starts in state 0 (the QPs are new). */
static void trace_check_walk(struct trace *t, const char *label)
{
	struct {
		uint32_t qpn;
		unsigned st[ROCEMU_SM_COUNT];
	} qps[8];
	unsigned nq = 0;

	assert_false(t->overflow);
	assert_false(t->bad_topic);
	if (getenv("STATES_TEST_PRINT")) /* e.g. STATES_TEST_PRINT=1: every line, to read */
		for (unsigned i = 0; i < t->n; i++)
			fprintf(stderr, "%s: %s\n", label, t->line[i]);
	for (unsigned i = 0; i < t->n; i++) {
		char mach[32], from[32], to[32];
		unsigned qpn, k;
		int m, f, s;

		if (sscanf(t->line[i], "qp 0x%x %31s %31s -> %31s", &qpn, mach, from, to) != 4) {
			fprintf(stderr, "%s: unparsed trace line '%s'\n", label, t->line[i]);
			fail();
		}
		m = machine_by_name(mach);
		assert_true(m >= 0);
		f = state_by_name((enum rocemu_sm)m, from);
		s = state_by_name((enum rocemu_sm)m, to);
		for (k = 0; k < nq && qps[k].qpn != qpn; k++)
			;
		if (k == nq) {
			assert_true(nq < 8);
			memset(&qps[nq], 0, sizeof(qps[nq]));
			qps[nq++].qpn = qpn;
		}
		if (f != (int)qps[k].st[m] || !rocemu_sm_legal((enum rocemu_sm)m, f, s)) {
			fprintf(stderr, "%s: line %u '%s' does not continue from %s\n", label, i,
				t->line[i], rocemu_sm_state_name((enum rocemu_sm)m, qps[k].st[m]));
			fail();
		}
		qps[k].st[m] = (unsigned)s;
	}
}

static void wc_ok(struct rocemu_cq *cq, uint64_t id)
{
	struct rocemu_wc wc;

	assert_int_equal(h_poll(cq, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.wr_id, id);
}

static int cleanup(void **state)
{
	(void)state;
	h_teardown_all(&A, &B);
	return 0;
}

/* A SEND of three packets to a QP without a receive WQE: RNR NAKs until one
 * is posted. The responder goes IN_ORDER -> RNR_NAKED and back, then
 * through SEND to IDLE as it places the message. */
static void test_rnr_traced(void **state)
{
	static uint8_t src[3000], dst[3000];
	struct rocemu_qp *qa, *qb;
	struct rocemu_mr *ms, *md;
	struct rocemu_wc wc;
	struct ibv_sge sge;
	int rc;

	(void)state;
	rc = h_setup_opts(&A, &B, "states_rnr", NULL, NULL, NULL);
	if (rc == 77)
		skip();
	assert_int_equal(rc, 0);
	qa = h_qp(&A, IBV_QPT_RC, 16, NULL);
	qb = h_qp(&B, IBV_QPT_RC, 16, NULL);
	assert_int_equal(h_connect(&A, qa, &B, qb, IBV_MTU_1024, 0x100, 0x200, H_ACC_ALL, false),
			 0);
	ms = h_reg(A.pd, src, sizeof(src), H_ACC_ALL);
	md = h_reg(B.pd, dst, sizeof(dst), H_ACC_ALL);
	h_fill(src, sizeof(src), 5);
	trace_start();
	assert_int_equal(h_post1(qa, IBV_WR_SEND, 1, src, sizeof(src), h_key(ms, false), NULL, 0),
			 0);
	/* not a timing assertion: wait (bounded) until the responder said RNR */
	for (int i = 0; i < 200000 && h_counter(B.e, "tx_rnr_nak") == 0; i++) {
		rocemu_cq_poll(A.scq, 0, &wc);
		usleep(100);
	}
	assert_true(h_counter(B.e, "tx_rnr_nak") > 0);
	sge = (struct ibv_sge){(uintptr_t)dst, sizeof(dst), h_key(md, false)};
	assert_int_equal(rocemu_qp_post_recv(qb, 2, &sge, 1), 0);
	wc_ok(A.scq, 1);
	wc_ok(B.rcq, 2);
	assert_memory_equal(src, dst, sizeof(src));
	trace_stop();

	trace_check_walk(&traces[0], "A");
	trace_check_walk(&traces[1], "B");
	assert_true(trace_count(&traces[1], rocemu_qp_num(qb),
				"resp-seq IN_ORDER -> RNR_NAKED (no receive WQE)") >= 1);
	assert_true(trace_count(&traces[1], rocemu_qp_num(qb), "resp-seq RNR_NAKED -> IN_ORDER") >=
		    1);
	/* the message is placed once, as one SEND */
	assert_int_equal(trace_count(&traces[1], rocemu_qp_num(qb), "resp-msg IDLE -> SEND"), 1);
	assert_int_equal(trace_count(&traces[1], rocemu_qp_num(qb), "resp-msg SEND -> IDLE"), 1);
	/* and its last line: the SEND placed (nothing after it) */
	assert_non_null(strstr(traces[1].line[traces[1].n - 1], "resp-msg SEND -> IDLE"));
	assert_int_equal(h_counter(A.e, "illegal_state_transitions"), 0);
	assert_int_equal(h_counter(B.e, "illegal_state_transitions"), 0);
	assert_int_equal(rocemu_qp_destroy(qa), 0);
	assert_int_equal(rocemu_qp_destroy(qb), 0);
	rocemu_mr_dereg(ms);
	rocemu_mr_dereg(md);
}

#define MSG    8192 /* 8 packets at MTU 1024 */
#define ROUNDS 200

/* WRITEs and READs over a link that drops 5 % of the frames each way, until
 * the responder has NAKed a gap and the completer has re-read lost READ
 * responses (or ROUNDS pass: then the scenario did not happen, a failure). */
static void test_lossy_traced(void **state)
{
	static const char *const opts[] = {"fault-seed", "11", "fault-drop", "tx:50000", NULL};
	static uint8_t a_buf[MSG], b_buf[MSG], back[MSG];
	struct rocemu_qp *qa, *qb;
	struct rocemu_mr *ma, *mb, *mk;
	uint32_t na, nb;
	int rc, round;

	(void)state;
	rc = h_setup_opts(&A, &B, "states_lossy", NULL, opts, opts);
	if (rc == 77)
		skip();
	assert_int_equal(rc, 0);
	qa = h_qp(&A, IBV_QPT_RC, 16, NULL);
	qb = h_qp(&B, IBV_QPT_RC, 16, NULL);
	assert_int_equal(h_connect(&A, qa, &B, qb, IBV_MTU_1024, 0xFFFFF0, 0x10, H_ACC_ALL, false),
			 0);
	na = rocemu_qp_num(qa);
	nb = rocemu_qp_num(qb);
	ma = h_reg(A.pd, a_buf, sizeof(a_buf), H_ACC_ALL);
	mk = h_reg(A.pd, back, sizeof(back), H_ACC_ALL);
	mb = h_reg(B.pd, b_buf, sizeof(b_buf), H_ACC_ALL);
	trace_start();
	for (round = 0; round < ROUNDS; round++) {
		h_fill(a_buf, sizeof(a_buf), (uint32_t)round);
		assert_int_equal(h_post1(qa, IBV_WR_RDMA_WRITE, 2 * round, a_buf, MSG,
					 h_key(ma, false), b_buf, h_key(mb, true)),
				 0);
		assert_int_equal(h_post1(qa, IBV_WR_RDMA_READ, 2 * round + 1, back, MSG,
					 h_key(mk, false), b_buf, h_key(mb, true)),
				 0);
		wc_ok(A.scq, 2 * round);
		wc_ok(A.scq, 2 * round + 1);
		assert_memory_equal(a_buf, back, MSG);
		if (trace_count(&traces[1], nb, "resp-seq IN_ORDER -> NAKED (PSN gap)") &&
		    trace_count(&traces[0], na, "(READ responses missing)"))
			break;
	}
	trace_stop();
	fprintf(stderr, "lossy: %d rounds, %u lines at A, %u at B\n", round + 1, traces[0].n,
		traces[1].n);
	assert_true(round < ROUNDS);
	trace_check_walk(&traces[0], "A");
	trace_check_walk(&traces[1], "B");
	/* each NAK is answered: the gap closes on the expected PSN */
	assert_true(trace_count(&traces[1], nb, "resp-seq NAKED -> IN_ORDER (expected PSN)") >= 1);
	/* a multi-packet WRITE opens and closes a message */
	assert_true(trace_count(&traces[1], nb, "resp-msg IDLE -> WRITE") >= 1);
	assert_true(trace_count(&traces[1], nb, "resp-msg WRITE -> IDLE") >= 1);
	assert_true(trace_count(&traces[0], na, "(progress)") >= 1);
	assert_int_equal(h_counter(A.e, "illegal_state_transitions"), 0);
	assert_int_equal(h_counter(B.e, "illegal_state_transitions"), 0);
	assert_int_equal(rocemu_qp_destroy(qa), 0);
	assert_int_equal(rocemu_qp_destroy(qb), 0);
	rocemu_mr_dereg(ma);
	rocemu_mr_dereg(mk);
	rocemu_mr_dereg(mb);
}

static int setup_walk(void **state)
{
	int rc;

	(void)state;
	rc = h_setup(&A, &B, "states_walk", NULL);
	return rc == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_state_named),
	    cmocka_unit_test(test_table_walk),
	    cmocka_unit_test_setup_teardown(test_changes_counted, setup_walk, cleanup),
	    cmocka_unit_test_teardown(test_rnr_traced, cleanup),
	    cmocka_unit_test_teardown(test_lossy_traced, cleanup),
	};

	if (rocemu_eal_init() < 0) {
		fprintf(stderr, "skip: %s\n", rocemu_eal_error());
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
