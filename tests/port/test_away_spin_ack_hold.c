/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ACKs kept for the application's next post (emulator/port/port_progress.c,
 * port_hold_acks; port_app.c, post_answers), with two engines over a
 * net_ring pair:
 * - an application that answers its peer's requests (it posts right after
 *   a poll that found something and after a pass that had only ACKs to
 *   send, as ib_write_lat does) has its posts counted as
 *   answers (app_answers) and the ACKs of its passes kept for its next
 *   post (tx_acks_held rises), and a kept ACK still leaves when that
 *   application then calls no verb at all: the peer's WRITE completes, so
 *   the bound holds without a post;
 * - a sender that streams and polls its CQ (ib_write_bw's client: a post
 *   right after every poll that found) receives no requests, so none of
 *   its posts answers and nothing is kept on either side (the rule before
 *   took its posts for answers and napped its thread 100 us);
 * - nor does an application that answers a message its CQ returned
 *   (ib_send_lat; the test says so to the port as verbs-provider/cq.c does);
 * - ROCEMU_ACK_HOLD=0 (read when the port's thread starts) keeps none.
 * No timing is asserted; waits end after ~20 s as failures.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "port_test_util.h"

#define ATTEMPTS 200 /* rounds until one ACK was kept (a loaded machine may miss some) */

static struct node A, B;

/* Passes that kept ACKs on node n's port (0 until one did). */
static uint64_t acks_held(struct node *n)
{
	return ptu_counter(rocemu_engine_port(n->e), "tx_acks_held");
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Poll without pausing, as a latency benchmark does, until one successful
 * completion (a bail-out after 20 s, not a timing assertion). */
static void busy_poll_one(struct rocemu_cq *cq)
{
	uint64_t end = now_ms() + 20000;
	struct rocemu_wc wc;
	int n = 0;

	while (n == 0 && now_ms() < end)
		n = rocemu_cq_poll(cq, 1, &wc);
	if (n != 1) {
		h_dump_counters(A.e, "node A");
		h_dump_counters(B.e, "node B");
	}
	assert_int_equal(n, 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
}

/* Wait, calling no verb, until *p == v (placed by the progress thread). */
static void wait_value(const uint64_t *p, uint64_t v)
{
	uint64_t end = now_ms() + 20000;

	while (__atomic_load_n(p, __ATOMIC_ACQUIRE) != v && now_ms() < end)
		;
	assert_true(__atomic_load_n(p, __ATOMIC_ACQUIRE) == v);
}

/* each node's memory: the word it sends from, the word the peer writes */
struct mem {
	uint64_t src, dst;
};

struct pair {
	struct rocemu_qp *qa, *qb;
	struct mem a, b;
	struct rocemu_mr *ma, *mb;
};

static void pair_up(struct pair *p)
{
	memset(p, 0, sizeof(*p));
	p->qa = h_qp(&A, IBV_QPT_RC, 64, NULL);
	p->qb = h_qp(&B, IBV_QPT_RC, 64, NULL);
	assert_non_null(p->qa);
	assert_non_null(p->qb);
	assert_int_equal(
	    h_connect(&A, p->qa, &B, p->qb, IBV_MTU_1024, 0x10, 0x20, H_ACC_ALL, false), 0);
	p->ma = h_reg(A.pd, &p->a, sizeof(p->a), H_ACC_ALL);
	p->mb = h_reg(B.pd, &p->b, sizeof(p->b), H_ACC_ALL);
}

static void pair_down(struct pair *p)
{
	rocemu_mr_dereg(p->ma);
	rocemu_mr_dereg(p->mb);
	assert_int_equal(rocemu_qp_destroy(p->qa), 0);
	assert_int_equal(rocemu_qp_destroy(p->qb), 0);
}

/* An 8-byte WRITE of v from B to A's word, signaled. */
static void write_to_a(struct pair *p, uint64_t v)
{
	p->b.src = v;
	assert_int_equal(h_post1(p->qb, IBV_WR_RDMA_WRITE, v, &p->b.src, 8, h_key(p->mb, false),
				 &p->a.dst, h_key(p->ma, true)),
			 0);
}

/* The same from A to B's word. */
static void write_to_b(struct pair *p, uint64_t v)
{
	p->a.src = v;
	assert_int_equal(h_post1(p->qa, IBV_WR_RDMA_WRITE, v, &p->a.src, 8, h_key(p->ma, false),
				 &p->b.dst, h_key(p->mb, true)),
			 0);
}

static uint64_t answers(struct node *n)
{
	return ptu_counter(rocemu_engine_port(n->e), "app_answers");
}

/*
 * One attempt: B answers, as in ib_write_lat (B's WRITE and A's cross; B's
 * poll finds its completion in the pass that placed A's WRITE and had only
 * B's ACK to send, then B posts at once); then A writes to B and B calls no
 * verb while its progress thread places the WRITE; A waits for its
 * completion, which needs B's ACK. Returns true when B kept that ACK
 * (tx_acks_held rose): it then left without a verb of B's.
 */
static bool attempt(struct pair *p, uint64_t v)
{
	uint64_t held, answered;

	/* A answers too, in the attempt before (its post after its poll):
	 * let that end (2 ms), or A keeps its ACK for B's WRITE while this
	 * thread waits on B's side only, B's completion waits for A's thread
	 * (on a ring link no frame wakes it: two naps) and B's post below
	 * comes too late to answer */
	usleep(3000);
	answered = answers(&B);
	write_to_a(p, 2 * v);
	write_to_b(p, 2 * v); /* a request of A's for B to acknowledge */
	busy_poll_one(B.scq); /* a poll that found */
	write_to_a(p, 2 * v + 1);
	busy_poll_one(B.scq); /* B answered if the post was right after it */
	busy_poll_one(A.scq); /* A's first WRITE: B acknowledged it */
	assert_true(p->a.dst == 2 * v + 1);
	assert_true(p->b.dst == 2 * v);
	if (answers(&B) == answered)
		return false;
	held = acks_held(&B);
	write_to_b(p, 2 * v + 1);
	wait_value(&p->b.dst, 2 * v + 1); /* no verb of B's: its thread places it */
	busy_poll_one(A.scq);		  /* B's ACK came */
	return acks_held(&B) > held;
}

static void test_kept_ack_leaves_without_a_verb(void **state)
{
	struct pair p;
	bool kept = false;

	(void)state;
	pair_up(&p);
	for (uint64_t v = 1; v <= ATTEMPTS && !kept; v++)
		kept = attempt(&p, v);
	if (!kept) {
		h_dump_counters(A.e, "node A");
		h_dump_counters(B.e, "node B");
	}
	assert_true(kept);
	pair_down(&p);
}

/*
 * B streams WRITEs to A and polls its CQ, posting again as soon as a poll
 * finds a completion; A calls no verb (ib_write_bw's server). B posts
 * right after polls that found, so the rule before took every such post
 * for an answer; but no request of A's ever comes, so none answers, and
 * no pass of either side keeps an ACK.
 */
static void test_streaming_sender_never_answers(void **state)
{
	struct pair p;

	(void)state;
	pair_up(&p);
	for (uint64_t v = 1; v <= 300; v++) {
		write_to_a(&p, v);
		busy_poll_one(B.scq);
	}
	wait_value(&p.a.dst, 300);
	if (answers(&B) || acks_held(&A) || acks_held(&B)) {
		h_dump_counters(A.e, "node A");
		h_dump_counters(B.e, "node B");
	}
	assert_int_equal(answers(&B), 0);
	assert_int_equal(acks_held(&A), 0);
	assert_int_equal(acks_held(&B), 0);
	pair_down(&p);
}

/* A poll of a receive CQ until one message came, and what the provider
 * then tells the port (verbs-provider/cq.c). */
static void busy_poll_recv(struct node *n)
{
	busy_poll_one(n->rcq);
	rocemu_port_app_found_recv(rocemu_engine_port(n->e));
}

/* An 8-byte SEND of from's src word, signaled. */
static void send_word(struct rocemu_qp *qp, struct rocemu_mr *mr, uint64_t *src, uint64_t v)
{
	*src = v;
	assert_int_equal(h_post1(qp, IBV_WR_SEND, v, src, 8, h_key(mr, false), NULL, 0), 0);
}

/*
 * A and B play ib_send_lat: each SENDs as soon as its poll of the receive
 * CQ returns the peer's message. B's post comes right after such a poll
 * and after the pass that placed A's SEND with only its ACK to send, which
 * the rule before took for an answer; but B saw the message in its CQ, and
 * A polls its CQ for B's, so nothing is kept and no post answers.
 */
static void test_message_from_cq_is_no_answer(void **state)
{
	struct ibv_sge sa, sb;
	struct pair p;

	(void)state;
	pair_up(&p);
	sa = (struct ibv_sge){(uintptr_t)&p.a.dst, 8, h_key(p.ma, false)};
	sb = (struct ibv_sge){(uintptr_t)&p.b.dst, 8, h_key(p.mb, false)};
	for (uint64_t i = 0; i < 40; i++) {
		assert_int_equal(rocemu_qp_post_recv(p.qa, i, &sa, 1), 0);
		assert_int_equal(rocemu_qp_post_recv(p.qb, i, &sb, 1), 0);
	}
	for (uint64_t v = 1; v <= 40; v++) {
		send_word(p.qa, p.ma, &p.a.src, v);
		busy_poll_one(A.scq);
		busy_poll_recv(&B); /* A's message, from B's CQ */
		assert_true(p.b.dst == v);
		send_word(p.qb, p.mb, &p.b.src, v); /* B's reply at once */
		busy_poll_one(B.scq);
		busy_poll_recv(&A);
		assert_true(p.a.dst == v);
	}
	if (answers(&A) || answers(&B) || acks_held(&A) || acks_held(&B)) {
		h_dump_counters(A.e, "node A");
		h_dump_counters(B.e, "node B");
	}
	assert_int_equal(answers(&A), 0);
	assert_int_equal(answers(&B), 0);
	assert_int_equal(acks_held(&A), 0);
	assert_int_equal(acks_held(&B), 0);
	pair_down(&p);
}

static void test_ack_hold_off(void **state)
{
	struct pair p;

	(void)state;
	pair_up(&p);
	for (uint64_t v = 1; v <= 20; v++)
		assert_false(attempt(&p, v));
	assert_int_equal(answers(&A), 0);
	assert_int_equal(answers(&B), 0);
	assert_int_equal(acks_held(&A), 0);
	assert_int_equal(acks_held(&B), 0);
	pair_down(&p);
}

static int setup_on(void **state)
{
	(void)state;
	setenv("ROCEMU_ACK_HOLD", "1", 1); /* read when the ports' threads start */
	return h_setup(&A, &B, "ackhold1", NULL) == 0 ? 0 : -1;
}

static int setup_stream(void **state)
{
	(void)state;
	setenv("ROCEMU_ACK_HOLD", "1", 1);
	return h_setup(&A, &B, "ackhold3", NULL) == 0 ? 0 : -1;
}

static int setup_send(void **state)
{
	(void)state;
	setenv("ROCEMU_ACK_HOLD", "1", 1);
	return h_setup(&A, &B, "ackhold4", NULL) == 0 ? 0 : -1;
}

static int setup_off(void **state)
{
	(void)state;
	setenv("ROCEMU_ACK_HOLD", "0", 1); /* read when the ports' threads start */
	return h_setup(&A, &B, "ackhold2", NULL) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	h_teardown_all(&A, &B);
	unsetenv("ROCEMU_ACK_HOLD");
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_kept_ack_leaves_without_a_verb, setup_on,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_streaming_sender_never_answers, setup_stream,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_message_from_cq_is_no_answer, setup_send,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_ack_hold_off, setup_off, teardown),
	};

	if (rocemu_eal_init() < 0) {
		fprintf(stderr, "skip: %s\n", rocemu_eal_error());
		return 77;
	}
	return cmocka_run_group_tests_name("port_away_spin_ack_hold", tests, NULL, NULL);
}
