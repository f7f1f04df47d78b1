/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The QP state machine (IBA 11.2.5; the table in ibv_modify_qp(3)): every
 * legal transition for RC, UC and UD, and a table of illegal ones (wrong
 * state pair, missing required attribute, attribute not allowed in that
 * transition, value out of range) each rejected with -EINVAL and the QP
 * left exactly as it was. Also posting rules per state and create limits.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "rocemu_transport.h"

static struct node A, B;

#define RC_RTR_REQ                                                                                 \
	(IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |                           \
	 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define UC_RTR_REQ (IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN)
#define RC_RTS_REQ                                                                                 \
	(IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |                    \
	 IBV_QP_MAX_QP_RD_ATOMIC)
#define INIT_REQ_CONN (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
#define INIT_REQ_UD   (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)

/** A full, valid attribute set; transitions pick from it by mask. */
static void good_attr(struct ibv_qp_attr *a, enum ibv_qp_state st)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = st;
	a->port_num = 1;
	a->pkey_index = 0;
	a->qkey = 0x11111111;
	a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	a->path_mtu = IBV_MTU_1024;
	a->dest_qp_num = 0x123;
	a->rq_psn = 0x10;
	a->sq_psn = 0x20;
	a->max_dest_rd_atomic = 4;
	a->max_rd_atomic = 4;
	a->min_rnr_timer = 12;
	a->timeout = 14;
	a->retry_cnt = 7;
	a->rnr_retry = 7;
	a->ah_attr.is_global = 1;
	a->ah_attr.port_num = 1;
	a->ah_attr.grh.sgid_index = (uint8_t)A.gid4_index;
	a->ah_attr.grh.hop_limit = 64;
	memcpy(a->ah_attr.grh.dgid.raw, B.gid4, 16);
}

static int init_mask(enum ibv_qp_type t)
{
	return IBV_QP_STATE | (t == IBV_QPT_UD ? INIT_REQ_UD : INIT_REQ_CONN);
}

static int rtr_mask(enum ibv_qp_type t)
{
	return IBV_QP_STATE | (t == IBV_QPT_RC ? RC_RTR_REQ : t == IBV_QPT_UC ? UC_RTR_REQ : 0);
}

static int rts_mask(enum ibv_qp_type t)
{
	return IBV_QP_STATE | (t == IBV_QPT_RC ? RC_RTS_REQ : IBV_QP_SQ_PSN);
}

static void go(struct rocemu_qp *qp, enum ibv_qp_state st, int mask)
{
	struct ibv_qp_attr a;
	int rc;

	good_attr(&a, st);
	a.cur_qp_state = rocemu_qp_state(qp);
	rc = rocemu_qp_modify(qp, &a, mask);
	if (rc != 0)
		fprintf(stderr, "%d -> %d mask 0x%x refused\n", a.cur_qp_state, st, mask);
	assert_int_equal(rc, 0);
	assert_int_equal(rocemu_qp_state(qp), st);
}

/** Bring qp from RESET to st along legal transitions. */
static void bring(struct rocemu_qp *qp, enum ibv_qp_type t, enum ibv_qp_state st)
{
	if (st == IBV_QPS_RESET)
		return;
	if (st == IBV_QPS_ERR) {
		go(qp, IBV_QPS_ERR, IBV_QP_STATE);
		return;
	}
	go(qp, IBV_QPS_INIT, init_mask(t));
	if (st == IBV_QPS_INIT)
		return;
	go(qp, IBV_QPS_RTR, rtr_mask(t));
	if (st == IBV_QPS_RTR)
		return;
	go(qp, IBV_QPS_RTS, rts_mask(t));
	if (st == IBV_QPS_SQD)
		go(qp, IBV_QPS_SQD, IBV_QP_STATE);
}

static const enum ibv_qp_type types[] = {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD};

static void test_legal_transitions(void **state)
{
	(void)state;
	for (unsigned ti = 0; ti < 3; ti++) {
		enum ibv_qp_type t = types[ti];
		struct rocemu_qp *qp = h_qp(&A, t, 8, NULL);
		struct ibv_qp_attr a, q;

		assert_non_null(qp);
		assert_int_equal(rocemu_qp_state(qp), IBV_QPS_RESET);
		go(qp, IBV_QPS_RESET, IBV_QP_STATE);
		go(qp, IBV_QPS_INIT, init_mask(t));
		go(qp, IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_PKEY_INDEX); /* INIT -> INIT */
		go(qp, IBV_QPS_RTR, rtr_mask(t));
		go(qp, IBV_QPS_RTS, rts_mask(t));
		go(qp, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_CUR_STATE);  /* RTS -> RTS */
		go(qp, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_RATE_LIMIT); /* a send rate limit */
		if (t == IBV_QPT_RC)
			go(qp, IBV_QPS_RTS,
			   IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_ACCESS_FLAGS);
		if (t == IBV_QPT_UD)
			go(qp, IBV_QPS_RTS, IBV_QP_QKEY); /* no STATE bit: stay in RTS */
		go(qp, IBV_QPS_SQD, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY);
		go(qp, IBV_QPS_SQD, IBV_QP_STATE | IBV_QP_PKEY_INDEX); /* SQD -> SQD */
		if (t == IBV_QPT_RC)
			go(qp, IBV_QPS_SQD, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT);
		go(qp, IBV_QPS_RTS, IBV_QP_STATE);
		/* the attributes set along the way read back */
		assert_int_equal(rocemu_qp_query(qp, &q, 0, NULL), 0);
		good_attr(&a, IBV_QPS_RTS);
		assert_int_equal(q.qp_state, IBV_QPS_RTS);
		assert_int_equal(q.sq_psn, a.sq_psn);
		if (t != IBV_QPT_UD) {
			assert_int_equal(q.dest_qp_num, a.dest_qp_num);
			assert_int_equal(q.rq_psn, a.rq_psn);
			assert_int_equal(q.path_mtu, a.path_mtu);
			assert_memory_equal(q.ah_attr.grh.dgid.raw, B.gid4, 16);
		} else {
			assert_int_equal(q.qkey, a.qkey);
		}
		if (t == IBV_QPT_RC) {
			assert_int_equal(q.timeout, a.timeout);
			assert_int_equal(q.max_rd_atomic, a.max_rd_atomic);
			assert_int_equal(q.max_dest_rd_atomic, a.max_dest_rd_atomic);
			assert_int_equal(q.min_rnr_timer, a.min_rnr_timer);
		}
		go(qp, IBV_QPS_ERR, IBV_QP_STATE);
		go(qp, IBV_QPS_ERR, IBV_QP_STATE); /* ERR -> ERR */
		go(qp, IBV_QPS_RESET, IBV_QP_STATE);
		/* every state -> ERR and -> RESET */
		for (enum ibv_qp_state s = IBV_QPS_RESET; s <= IBV_QPS_SQD; s++) {
			bring(qp, t, s);
			go(qp, IBV_QPS_ERR, IBV_QP_STATE);
			go(qp, IBV_QPS_RESET, IBV_QP_STATE);
			bring(qp, t, s);
			go(qp, IBV_QPS_RESET, IBV_QP_STATE);
		}
		assert_int_equal(rocemu_qp_destroy(qp), 0);
	}
}

struct bad_case {
	const char *what;
	enum ibv_qp_type type; /* 0xff: every type */
	enum ibv_qp_state from;
	enum ibv_qp_state to;
	int mask;
	void (*spoil)(struct ibv_qp_attr *a);
};

static void bad_port(struct ibv_qp_attr *a)
{
	a->port_num = 2;
}
static void bad_pkey(struct ibv_qp_attr *a)
{
	a->pkey_index = 1;
}
static void bad_mtu(struct ibv_qp_attr *a)
{
	a->path_mtu = (enum ibv_mtu)6;
}
static void bad_mtu0(struct ibv_qp_attr *a)
{
	a->path_mtu = (enum ibv_mtu)0;
}
static void bad_timeout(struct ibv_qp_attr *a)
{
	a->timeout = 32;
}
static void bad_retry(struct ibv_qp_attr *a)
{
	a->retry_cnt = 8;
}
static void bad_rnr(struct ibv_qp_attr *a)
{
	a->rnr_retry = 8;
}
static void bad_rnr_timer(struct ibv_qp_attr *a)
{
	a->min_rnr_timer = 32;
}
static void bad_dest_rd(struct ibv_qp_attr *a)
{
	a->max_dest_rd_atomic = 129;
}
static void bad_rd(struct ibv_qp_attr *a)
{
	a->max_rd_atomic = 129;
}
static void bad_dqpn(struct ibv_qp_attr *a)
{
	a->dest_qp_num = 0x1000000;
}
static void bad_rq_psn(struct ibv_qp_attr *a)
{
	a->rq_psn = 0x1000000;
}
static void bad_sq_psn(struct ibv_qp_attr *a)
{
	a->sq_psn = 0x1000000;
}
static void bad_access(struct ibv_qp_attr *a)
{
	a->qp_access_flags = IBV_ACCESS_MW_BIND << 8;
}
static void bad_global(struct ibv_qp_attr *a)
{
	a->ah_attr.is_global = 0;
}
static void bad_sgid(struct ibv_qp_attr *a)
{
	a->ah_attr.grh.sgid_index = 200;
}
static void bad_family(struct ibv_qp_attr *a)
{
	memset(a->ah_attr.grh.dgid.raw, 0xfd, 16);
}
static void bad_cur(struct ibv_qp_attr *a)
{
	a->cur_qp_state = IBV_QPS_SQD;
}
static void bad_state(struct ibv_qp_attr *a)
{
	a->qp_state = (enum ibv_qp_state)9;
}

#define ANY ((enum ibv_qp_type)0xff)
#define I   IBV_QPS_INIT
#define R   IBV_QPS_RTR
#define S   IBV_QPS_RTS
#define Z   IBV_QPS_RESET
#define E   IBV_QPS_ERR
#define D   IBV_QPS_SQD
#define ST  IBV_QP_STATE

static const struct bad_case bad_cases[] = {
    {"RESET->RTR", ANY, Z, R, ST | RC_RTR_REQ | INIT_REQ_CONN, NULL},
    {"RESET->RTS", ANY, Z, S, ST | RC_RTS_REQ, NULL},
    {"RESET->SQD", ANY, Z, D, ST, NULL},
    {"INIT->RTS", ANY, I, S, ST | RC_RTS_REQ, NULL},
    {"INIT->SQD", ANY, I, D, ST, NULL},
    {"RTR->INIT", ANY, R, I, ST, NULL},
    {"RTR->RTR", ANY, R, R, ST, NULL},
    {"RTR->SQD", ANY, R, D, ST, NULL},
    {"RTS->INIT", ANY, S, I, ST | INIT_REQ_CONN, NULL},
    {"RTS->RTR", ANY, S, R, ST, NULL},
    {"SQD->INIT", ANY, D, I, ST, NULL},
    {"SQD->RTR", ANY, D, R, ST, NULL},
    {"ERR->INIT", ANY, E, I, ST | INIT_REQ_CONN, NULL},
    {"ERR->RTS", ANY, E, S, ST, NULL},
    {"ERR->SQD", ANY, E, D, ST, NULL},
    {"RTS->SQE", ANY, S, IBV_QPS_SQE, ST, NULL},
    {"state out of range", ANY, S, S, ST, bad_state},
    {"CUR_STATE mismatch", ANY, S, S, ST | IBV_QP_CUR_STATE, bad_cur},
    {"RC init without ACCESS", IBV_QPT_RC, Z, I, ST | IBV_QP_PKEY_INDEX | IBV_QP_PORT, NULL},
    {"RC init without PORT", IBV_QPT_RC, Z, I, ST | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS, NULL},
    {"RC init without PKEY", IBV_QPT_RC, Z, I, ST | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, NULL},
    {"RC init with QKEY", IBV_QPT_RC, Z, I, ST | INIT_REQ_CONN | IBV_QP_QKEY, NULL},
    {"RC init with AV", IBV_QPT_RC, Z, I, ST | INIT_REQ_CONN | IBV_QP_AV, NULL},
    {"RC init port 2", IBV_QPT_RC, Z, I, ST | INIT_REQ_CONN, bad_port},
    {"RC init pkey 1", IBV_QPT_RC, Z, I, ST | INIT_REQ_CONN, bad_pkey},
    {"RC init bad access", IBV_QPT_RC, Z, I, ST | INIT_REQ_CONN, bad_access},
    {"UD init without QKEY", IBV_QPT_UD, Z, I, ST | IBV_QP_PKEY_INDEX | IBV_QP_PORT, NULL},
    {"UD init with ACCESS", IBV_QPT_UD, Z, I, ST | INIT_REQ_UD | IBV_QP_ACCESS_FLAGS, NULL},
    {"UC init with QKEY", IBV_QPT_UC, Z, I, ST | INIT_REQ_CONN | IBV_QP_QKEY, NULL},
    {"RC rtr without AV", IBV_QPT_RC, I, R, ST | (RC_RTR_REQ & ~IBV_QP_AV), NULL},
    {"RC rtr without MTU", IBV_QPT_RC, I, R, ST | (RC_RTR_REQ & ~IBV_QP_PATH_MTU), NULL},
    {"RC rtr without DEST_QPN", IBV_QPT_RC, I, R, ST | (RC_RTR_REQ & ~IBV_QP_DEST_QPN), NULL},
    {"RC rtr without RQ_PSN", IBV_QPT_RC, I, R, ST | (RC_RTR_REQ & ~IBV_QP_RQ_PSN), NULL},
    {"RC rtr without MAX_DEST_RD", IBV_QPT_RC, I, R, ST | (RC_RTR_REQ & ~IBV_QP_MAX_DEST_RD_ATOMIC),
     NULL},
    {"RC rtr without MIN_RNR", IBV_QPT_RC, I, R, ST | (RC_RTR_REQ & ~IBV_QP_MIN_RNR_TIMER), NULL},
    {"RC rtr with SQ_PSN", IBV_QPT_RC, I, R, ST | RC_RTR_REQ | IBV_QP_SQ_PSN, NULL},
    {"RC rtr with TIMEOUT", IBV_QPT_RC, I, R, ST | RC_RTR_REQ | IBV_QP_TIMEOUT, NULL},
    {"RC rtr mtu 6", IBV_QPT_RC, I, R, ST | RC_RTR_REQ, bad_mtu},
    {"RC rtr mtu 0", IBV_QPT_RC, I, R, ST | RC_RTR_REQ, bad_mtu0},
    {"RC rtr dest qpn 2^24", IBV_QPT_RC, I, R, ST | RC_RTR_REQ, bad_dqpn},
    {"RC rtr rq_psn 2^24", IBV_QPT_RC, I, R, ST | RC_RTR_REQ, bad_rq_psn},
    {"RC rtr max_dest_rd 17", IBV_QPT_RC, I, R, ST | RC_RTR_REQ, bad_dest_rd},
    {"RC rtr min_rnr 32", IBV_QPT_RC, I, R, ST | RC_RTR_REQ, bad_rnr_timer},
    {"RC rtr no GRH", IBV_QPT_RC, I, R, ST | RC_RTR_REQ, bad_global},
    {"RC rtr bad sgid index", IBV_QPT_RC, I, R, ST | RC_RTR_REQ, bad_sgid},
    {"RC rtr v4 sgid, v6 dgid", IBV_QPT_RC, I, R, ST | RC_RTR_REQ, bad_family},
    {"UC rtr with MAX_DEST_RD", IBV_QPT_UC, I, R, ST | UC_RTR_REQ | IBV_QP_MAX_DEST_RD_ATOMIC,
     NULL},
    {"UC rtr without AV", IBV_QPT_UC, I, R, ST | (UC_RTR_REQ & ~IBV_QP_AV), NULL},
    {"UD rtr with AV", IBV_QPT_UD, I, R, ST | IBV_QP_AV, NULL},
    {"UD rtr with DEST_QPN", IBV_QPT_UD, I, R, ST | IBV_QP_DEST_QPN, NULL},
    {"RC rts without SQ_PSN", IBV_QPT_RC, R, S, ST | (RC_RTS_REQ & ~IBV_QP_SQ_PSN), NULL},
    {"RC rts without TIMEOUT", IBV_QPT_RC, R, S, ST | (RC_RTS_REQ & ~IBV_QP_TIMEOUT), NULL},
    {"RC rts without RETRY", IBV_QPT_RC, R, S, ST | (RC_RTS_REQ & ~IBV_QP_RETRY_CNT), NULL},
    {"RC rts without RNR_RETRY", IBV_QPT_RC, R, S, ST | (RC_RTS_REQ & ~IBV_QP_RNR_RETRY), NULL},
    {"RC rts without MAX_RD", IBV_QPT_RC, R, S, ST | (RC_RTS_REQ & ~IBV_QP_MAX_QP_RD_ATOMIC), NULL},
    {"RC rts with DEST_QPN", IBV_QPT_RC, R, S, ST | RC_RTS_REQ | IBV_QP_DEST_QPN, NULL},
    {"RC rts with AV", IBV_QPT_RC, R, S, ST | RC_RTS_REQ | IBV_QP_AV, NULL},
    {"RC rts timeout 32", IBV_QPT_RC, R, S, ST | RC_RTS_REQ, bad_timeout},
    {"RC rts retry 8", IBV_QPT_RC, R, S, ST | RC_RTS_REQ, bad_retry},
    {"RC rts rnr_retry 8", IBV_QPT_RC, R, S, ST | RC_RTS_REQ, bad_rnr},
    {"RC rts max_rd 17", IBV_QPT_RC, R, S, ST | RC_RTS_REQ, bad_rd},
    {"RC rts sq_psn 2^24", IBV_QPT_RC, R, S, ST | RC_RTS_REQ, bad_sq_psn},
    {"UC rts with TIMEOUT", IBV_QPT_UC, R, S, ST | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT, NULL},
    {"UD rts without SQ_PSN", IBV_QPT_UD, R, S, ST, NULL},
    {"RC rts->rts with SQ_PSN", IBV_QPT_RC, S, S, ST | IBV_QP_SQ_PSN, NULL},
    {"RC rts->rts with RETRY", IBV_QPT_RC, S, S, ST | IBV_QP_RETRY_CNT, NULL},
    {"RC rts->rts with PATH_MTU", IBV_QPT_RC, S, S, ST | IBV_QP_PATH_MTU, NULL},
    {"RC rts->rts with AV", IBV_QPT_RC, S, S, ST | IBV_QP_AV, NULL},
    {"UD rts->rts with PKEY", IBV_QPT_UD, S, S, ST | IBV_QP_PKEY_INDEX, NULL},
    {"RC rts->sqd with TIMEOUT", IBV_QPT_RC, S, D, ST | IBV_QP_TIMEOUT, NULL},
    {"RC sqd->sqd with SQ_PSN", IBV_QPT_RC, D, D, ST | IBV_QP_SQ_PSN, NULL},
    {"RC sqd->rts with TIMEOUT", IBV_QPT_RC, D, S, ST | IBV_QP_TIMEOUT, NULL},
    {"any with CAP", ANY, S, S, ST | IBV_QP_CAP, NULL},
    {"any rts->sqd with RATE_LIMIT", ANY, S, D, ST | IBV_QP_RATE_LIMIT, NULL},
    {"any init->init with RATE_LIMIT", ANY, I, I, ST | IBV_QP_RATE_LIMIT, NULL},
    {"reset with PKEY", ANY, S, Z, ST | IBV_QP_PKEY_INDEX, NULL},
    {"err with PKEY", ANY, S, E, ST | IBV_QP_PKEY_INDEX, NULL},
};

static void snapshot(struct rocemu_qp *qp, struct ibv_qp_attr *a)
{
	memset(a, 0, sizeof(*a));
	assert_int_equal(rocemu_qp_query(qp, a, 0, NULL), 0);
}

static void test_illegal_transitions(void **state)
{
	unsigned checked = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *c = &bad_cases[i];

		for (unsigned ti = 0; ti < 3; ti++) {
			enum ibv_qp_type t = types[ti];
			struct rocemu_qp *qp;
			struct ibv_qp_attr a, before, after;
			int rc;

			if (c->type != ANY && c->type != t)
				continue;
			qp = h_qp(&A, t, 8, NULL);
			assert_non_null(qp);
			bring(qp, t, c->from);
			good_attr(&a, c->to);
			a.cur_qp_state = c->from;
			if (c->spoil)
				c->spoil(&a);
			snapshot(qp, &before);
			rc = rocemu_qp_modify(qp, &a, c->mask);
			if (rc != -EINVAL)
				fprintf(stderr, "case '%s' type %d: rc %d\n", c->what, t, rc);
			assert_int_equal(rc, -EINVAL);
			snapshot(qp, &after);
			/* the QP is unchanged: state and every attribute */
			assert_memory_equal(&before, &after, sizeof(before));
			assert_int_equal(rocemu_qp_state(qp), c->from);
			assert_int_equal(rocemu_qp_destroy(qp), 0);
			checked++;
		}
	}
	assert_true(checked > 100);
}

static void test_post_rules(void **state)
{
	struct rocemu_qp *qp = h_qp(&A, IBV_QPT_RC, 4, NULL);
	uint8_t buf[16];
	struct ibv_sge sge = {(uintptr_t)buf, sizeof(buf), 0};
	struct ibv_sge many[33];
	struct rocemu_send_wr wr = {.opcode = IBV_WR_SEND, .sg_list = &sge, .num_sge = 1};
	struct rocemu_wc wc;

	(void)state;
	/* RESET: neither queue takes work */
	assert_int_equal(rocemu_qp_post_send(qp, &wr), -EINVAL);
	assert_int_equal(rocemu_qp_post_recv(qp, 1, &sge, 1), -EINVAL);
	go(qp, IBV_QPS_INIT, init_mask(IBV_QPT_RC));
	/* INIT: receive yes, send no */
	assert_int_equal(rocemu_qp_post_send(qp, &wr), -EINVAL);
	assert_int_equal(rocemu_qp_post_recv(qp, 1, &sge, 1), 0);
	go(qp, IBV_QPS_RTR, rtr_mask(IBV_QPT_RC));
	assert_int_equal(rocemu_qp_post_send(qp, &wr), -EINVAL);
	/* too many SGEs */
	memset(many, 0, sizeof(many));
	assert_int_equal(rocemu_qp_post_recv(qp, 2, many, 33), -EINVAL);
	go(qp, IBV_QPS_RTS, rts_mask(IBV_QPT_RC));
	/* bad WRs are refused at post time */
	wr.opcode = (enum ibv_wr_opcode)99;
	assert_int_equal(rocemu_qp_post_send(qp, &wr), -EINVAL);
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = many;
	wr.num_sge = 33;
	assert_int_equal(rocemu_qp_post_send(qp, &wr), -EINVAL);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	/* the send queue holds max_send_wr WQEs, then -ENOMEM */
	wr.send_flags = IBV_SEND_INLINE;
	for (int i = 0; i < 4; i++) {
		wr.wr_id = 10 + i;
		assert_int_equal(rocemu_qp_post_send(qp, &wr), 0);
	}
	assert_int_equal(rocemu_qp_post_send(qp, &wr), -ENOMEM);
	/* ERR flushes everything, signaled or not, in order */
	go(qp, IBV_QPS_ERR, IBV_QP_STATE);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(h_poll(A.scq, &wc), 1);
		assert_int_equal(wc.wr_id, 10 + i);
		assert_int_equal(wc.status, IBV_WC_WR_FLUSH_ERR);
	}
	assert_int_equal(h_poll(A.rcq, &wc), 1);
	assert_int_equal(wc.wr_id, 1);
	assert_int_equal(wc.status, IBV_WC_WR_FLUSH_ERR);
	assert_int_equal(rocemu_qp_destroy(qp), 0);
}

static void test_create_limits(void **state)
{
	struct rocemu_qp_init init = {
	    .qp_type = IBV_QPT_RC,
	    .send_cq = A.scq,
	    .recv_cq = A.rcq,
	    .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 33, .max_recv_sge = 1},
	};
	struct rocemu_qp *qp = NULL;
	struct rocemu_caps caps;

	(void)state;
	rocemu_engine_caps(A.e, &caps);
	assert_true(caps.max_qp >= 1024);
	assert_true(caps.max_qp_wr >= 16384);
	assert_int_equal(caps.max_sge, 32);
	assert_true(caps.max_inline_data >= 256);
	assert_int_equal(caps.max_qp_rd_atom, 128); /* Linux Soft-RoCE's */
	assert_int_equal(rocemu_qp_create(A.pd, &init, &qp), -EINVAL);
	init.cap.max_send_sge = 2;
	init.cap.max_send_wr = caps.max_qp_wr + 1;
	assert_int_equal(rocemu_qp_create(A.pd, &init, &qp), -EINVAL);
	init.cap.max_send_wr = 16;
	init.cap.max_inline_data = caps.max_inline_data + 1;
	assert_int_equal(rocemu_qp_create(A.pd, &init, &qp), -EINVAL);
	init.cap.max_inline_data = 64;
	init.qp_type = IBV_QPT_DRIVER; /* no such transport here */
	assert_int_equal(rocemu_qp_create(A.pd, &init, &qp), -EOPNOTSUPP);
	init.qp_type = IBV_QPT_RC;
	assert_int_equal(rocemu_qp_create(A.pd, &init, &qp), 0);
	assert_true(init.cap.max_send_wr >= 16);
	assert_true(init.cap.max_inline_data >= 64);
	/* QPN 0 and 1 are reserved */
	assert_true(rocemu_qp_num(qp) >= 0x11);
	assert_int_equal(rocemu_qp_destroy(qp), 0);
}

/* The first QPN a fresh engine hands out (its own ring pair, then gone). */
static uint32_t first_qpn(const char *pair)
{
	struct node a, b;
	struct rocemu_qp *qp;
	uint32_t qpn;

	assert_int_equal(h_setup(&a, &b, pair, NULL), 0);
	qp = h_qp(&a, IBV_QPT_RC, 16, NULL);
	assert_non_null(qp);
	qpn = rocemu_qp_num(qp);
	assert_int_equal(rocemu_qp_destroy(qp), 0);
	h_teardown_all(&a, &b);
	return qpn;
}

/*
 * QPNs start at a random point of the 24-bit space and go on in sequence:
 * a process that restarts must not offer its peer the QPN of its previous
 * connection, which the peer's CM still holds in time-wait and rejects as
 * stale (IBA 12.9.8.3.2; Linux Soft-RoCE answered rocemu's REP with REJ 10
 * because every rocemu process numbered its QPs from 0x11 again).
 */
static void test_qpn_random_start(void **state)
{
	uint32_t q1 = first_qpn("qpn1"), q2 = first_qpn("qpn2"), q3 = first_qpn("qpn3");

	(void)state;
	/* three restarts, three numbers (equal by chance: about 1 in 2^23) */
	assert_true(q1 != q2 || q2 != q3);
	assert_true(q1 != 0x11 || q2 != 0x11 || q3 != 0x11);
}

/* Numbers rotate: a destroyed QP's number is not handed out again next, and
 * a QPN that shares a table slot with a live QP does not reach it. */
static void test_qpn_rotate(void **state)
{
	struct rocemu_qp *qp[64];
	uint32_t prev = 0;

	(void)state;
	for (int i = 0; i < 64; i++) {
		qp[i] = h_qp(&A, IBV_QPT_UD, 16, NULL);
		assert_non_null(qp[i]);
		uint32_t qpn = rocemu_qp_num(qp[i]);
		assert_true(qpn <= ROCEMU_QPN_MASK && qpn != ROCEMU_QPN_MULTICAST);
		assert_true(rocemu_qpn_slot(qpn) >= ROCEMU_QPN_FIRST); /* 0 and 1 stay reserved */
		if (i > 0)
			assert_int_not_equal(qpn, prev);
		assert_ptr_equal(rocemu_engine_qp_lookup(A.e, qpn), qp[i]);
		assert_null(rocemu_engine_qp_lookup(A.e, qpn ^ 0x010000));
		assert_null(rocemu_engine_qp_lookup(A.e, qpn ^ 0x800000));
		prev = qpn;
		/* destroy every other one at once: its number must not come back */
		if (i % 2 == 0) {
			assert_int_equal(rocemu_qp_destroy(qp[i]), 0);
			qp[i] = NULL;
		}
	}
	for (int i = 0; i < 64; i++)
		if (qp[i])
			assert_int_equal(rocemu_qp_destroy(qp[i]), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_legal_transitions), cmocka_unit_test(test_illegal_transitions),
	    cmocka_unit_test(test_post_rules),	      cmocka_unit_test(test_create_limits),
	    cmocka_unit_test(test_qpn_random_start),  cmocka_unit_test(test_qpn_rotate),
	};

	return h_run_group("transport_qp_state", tests, sizeof(tests) / sizeof(tests[0]), &A, &B,
			   "qps", NULL);
}
