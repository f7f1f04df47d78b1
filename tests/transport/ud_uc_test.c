/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UD and UC between two engines over a net_ring pair: the 40-byte GRH area
 * (IPv4 header in its last 20 bytes, or the IPv6 header), source QP in the
 * completion, Q_Key mismatch drop, the controlled Q_Key rule, SQE on a
 * local send error and SQE -> RTS; UC SEND/WRITE/WRITE with immediate and
 * the 9.8.3 rule that a missing packet drops the whole message (with the
 * port's fault injector dropping one frame).
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

static struct node A, B;

static struct rocemu_mr *reg(struct node *n, void *p, size_t len)
{
	return h_reg(n->pd, p, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
}

static struct rocemu_ah *ah_to(struct node *from, struct node *to, bool v6)
{
	struct ibv_ah_attr a = {0};
	struct rocemu_ah *ah = NULL;

	a.is_global = 1;
	a.port_num = 1;
	a.grh.hop_limit = 64;
	a.grh.traffic_class = 0x28;
	a.grh.sgid_index = (uint8_t)(v6 ? from->gid6_index : from->gid4_index);
	memcpy(a.grh.dgid.raw, v6 ? to->gid6 : to->gid4, 16);
	assert_int_equal(rocemu_ah_create(from->pd, &a, &ah), 0);
	return ah;
}

static int ud_send(struct rocemu_qp *qp, struct rocemu_ah *ah, uint32_t dqpn, uint32_t qkey,
		   void *p, uint32_t len, uint32_t lkey, uint64_t id, bool imm)
{
	struct rocemu_send_wr wr = {
	    .wr_id = id,
	    .opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
	    .imm_data = htobe32(0xBEEF0000u | (uint32_t)id),
	    .ah = ah,
	    .remote_qpn = dqpn,
	    .remote_qkey = qkey,
	};

	return h_post_wr(qp, wr, p, len, lkey);
}

static void ud_case(bool v6)
{
	struct rocemu_qp *qa = h_qp(&A, IBV_QPT_UD, 16, NULL), *qb = h_qp(&B, IBV_QPT_UD, 16, NULL);
	struct rocemu_ah *ah;
	uint8_t src[300], dst[40 + 300];
	struct rocemu_mr *ms, *md;
	struct ibv_sge sge;
	struct rocemu_wc wc;
	uint64_t drops;

	if (v6 && A.gid6_index < 0)
		skip();
	assert_int_equal(h_ud_up(qa, 0x1234), 0);
	assert_int_equal(h_ud_up(qb, 0x1234), 0);
	ah = ah_to(&A, &B, v6);
	h_fill(src, sizeof(src), v6 ? 61 : 41);
	memset(dst, 0xCC, sizeof(dst));
	ms = reg(&A, src, sizeof(src));
	md = reg(&B, dst, sizeof(dst));
	sge = (struct ibv_sge){(uintptr_t)dst, sizeof(dst), h_key(md, false)};
	assert_int_equal(rocemu_qp_post_recv(qb, 1, &sge, 1), 0);
	assert_int_equal(
	    ud_send(qa, ah, rocemu_qp_num(qb), 0x1234, src, 300, h_key(ms, false), 7, true), 0);
	assert_int_equal(h_poll(A.scq, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.wr_id, 7);
	assert_int_equal(h_poll(B.rcq, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.opcode, IBV_WC_RECV);
	assert_int_equal(wc.byte_len, 40 + 300);
	assert_int_equal(wc.src_qp, rocemu_qp_num(qa));
	assert_true(wc.wc_flags & IBV_WC_GRH);
	assert_true(wc.wc_flags & IBV_WC_WITH_IMM);
	assert_int_equal(be32toh(wc.imm_data), 0xBEEF0007u);
	assert_memory_equal(dst + 40, src, 300);
	if (!v6) {
		static const uint8_t zero[20];

		/* RoCEv2 over IPv4: first 20 bytes zero, then the IPv4 header as received */
		assert_memory_equal(dst, zero, 20);
		assert_int_equal(dst[20], 0x45);
		/* the AH's traffic class 0x28 -> TOS, with ECT(0) filled in (--ecn) */
		assert_int_equal(dst[21], 0x2a);
		assert_int_equal(dst[20 + 9], 17); /* UDP */
		assert_int_equal((dst[22] << 8) | dst[23], 20 + 8 + 12 + 8 + 4 + 300 + 4);
		assert_memory_equal(dst + 20 + 12, A.gid4 + 12, 4);
		assert_memory_equal(dst + 20 + 16, B.gid4 + 12, 4);
	} else {
		assert_int_equal(dst[0] >> 4, 6);
		assert_int_equal(dst[6], 17); /* next header UDP */
		assert_int_equal((dst[4] << 8) | dst[5], 8 + 12 + 8 + 4 + 300 + 4);
		assert_memory_equal(dst + 8, A.gid6, 16);
		assert_memory_equal(dst + 24, B.gid6, 16);
	}

	/* Q_Key mismatch: the datagram is dropped and counted; the receive WQE stays */
	drops = h_counter(B.e, "drop_ud_qkey");
	assert_int_equal(rocemu_qp_post_recv(qb, 2, &sge, 1), 0);
	assert_int_equal(
	    ud_send(qa, ah, rocemu_qp_num(qb), 0x9999, src, 10, h_key(ms, false), 8, false), 0);
	assert_int_equal(h_poll(A.scq, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	for (int i = 0; i < 20000 && h_counter(B.e, "drop_ud_qkey") == drops; i++)
		h_poll_quiet(B.rcq, &wc, 1);
	assert_int_equal(h_counter(B.e, "drop_ud_qkey"), drops + 1);
	/* controlled Q_Key: high bit set in the WR -> the sender QP's own Q_Key (0x1234) */
	assert_int_equal(
	    ud_send(qa, ah, rocemu_qp_num(qb), 0x80000000u, src, 10, h_key(ms, false), 9, false),
	    0);
	assert_int_equal(h_poll(A.scq, &wc), 1);
	assert_int_equal(h_poll(B.rcq, &wc), 1);
	assert_int_equal(wc.wr_id, 2);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.byte_len, 50);

	/* a datagram larger than the MTU: local length error, QP to SQE, then back to RTS */
	{
		static uint8_t big[5000];
		struct rocemu_mr *mb = reg(&A, big, sizeof(big));
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS};

		assert_int_equal(ud_send(qa, ah, rocemu_qp_num(qb), 0x1234, big, sizeof(big),
					 h_key(mb, false), 10, false),
				 0);
		assert_int_equal(h_poll(A.scq, &wc), 1);
		assert_int_equal(wc.status, IBV_WC_LOC_LEN_ERR);
		assert_int_equal(rocemu_qp_state(qa), IBV_QPS_SQE);
		assert_int_equal(rocemu_qp_modify(qa, &a, IBV_QP_STATE), 0);
		assert_int_equal(rocemu_qp_state(qa), IBV_QPS_RTS);
		rocemu_mr_dereg(mb);
	}
	/* no receive posted: dropped and counted */
	drops = h_counter(B.e, "drop_ud_no_recv");
	assert_int_equal(
	    ud_send(qa, ah, rocemu_qp_num(qb), 0x1234, src, 10, h_key(ms, false), 11, false), 0);
	assert_int_equal(h_poll(A.scq, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	for (int i = 0; i < 20000 && h_counter(B.e, "drop_ud_no_recv") == drops; i++)
		h_poll_quiet(B.rcq, &wc, 1);
	assert_int_equal(h_counter(B.e, "drop_ud_no_recv"), drops + 1);

	assert_int_equal(rocemu_qp_destroy(qa), 0);
	assert_int_equal(rocemu_qp_destroy(qb), 0);
	rocemu_ah_destroy(ah);
	rocemu_mr_dereg(ms);
	rocemu_mr_dereg(md);
}

static void test_ud_ipv4(void **state)
{
	(void)state;
	ud_case(false);
}

static void test_ud_ipv6(void **state)
{
	(void)state;
	ud_case(true);
}

/* ------------------------------------------------------------------------ */

static void uc_pair(struct node *a, struct node *b, struct rocemu_qp **qa, struct rocemu_qp **qb)
{
	*qa = h_qp(a, IBV_QPT_UC, 64, NULL);
	*qb = h_qp(b, IBV_QPT_UC, 64, NULL);
	assert_int_equal(h_connect(a, *qa, b, *qb, IBV_MTU_256, 0xFFFFFE, 0x77,
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, false),
			 0);
}

static int uc_post(struct rocemu_qp *qp, enum ibv_wr_opcode op, uint64_t id, void *p, uint32_t len,
		   uint32_t lkey, void *raddr, uint32_t rkey)
{
	struct rocemu_send_wr wr = {.wr_id = id,
				    .opcode = op,
				    .imm_data = htobe32((uint32_t)id),
				    .remote_addr = (uintptr_t)raddr,
				    .rkey = rkey};

	return h_post_wr(qp, wr, p, len, lkey);
}

static void test_uc(void **state)
{
	struct rocemu_qp *qa, *qb;
	static uint8_t src[5000], dst[5000], wdst[5000];
	struct rocemu_mr *ms, *md, *mw;
	struct ibv_sge sge;
	struct rocemu_wc wc;
	struct rocemu_send_wr rd = {.opcode = IBV_WR_RDMA_READ};

	(void)state;
	uc_pair(&A, &B, &qa, &qb);
	h_fill(src, sizeof(src), 5);
	ms = reg(&A, src, sizeof(src));
	md = reg(&B, dst, sizeof(dst));
	mw = reg(&B, wdst, sizeof(wdst));
	/* READ and atomics do not exist on UC */
	assert_int_equal(rocemu_qp_post_send(qa, &rd), -EINVAL);
	sge = (struct ibv_sge){(uintptr_t)dst, sizeof(dst), h_key(md, false)};
	assert_int_equal(rocemu_qp_post_recv(qb, 1, &sge, 1), 0);
	assert_int_equal(uc_post(qa, IBV_WR_SEND, 1, src, 5000, h_key(ms, false), NULL, 0), 0);
	assert_int_equal(h_poll(A.scq, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(h_poll(B.rcq, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.byte_len, 5000);
	assert_memory_equal(src, dst, 5000);

	assert_int_equal(
	    uc_post(qa, IBV_WR_RDMA_WRITE, 2, src, 3000, h_key(ms, false), wdst, h_key(mw, true)),
	    0);
	assert_int_equal(h_poll(A.scq, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	sge = (struct ibv_sge){0, 0, 0};
	assert_int_equal(rocemu_qp_post_recv(qb, 3, &sge, 0), 0);
	assert_int_equal(uc_post(qa, IBV_WR_RDMA_WRITE_WITH_IMM, 3, src + 3000, 2000,
				 h_key(ms, false), wdst + 3000, h_key(mw, true)),
			 0);
	assert_int_equal(h_poll(A.scq, &wc), 1);
	assert_int_equal(h_poll(B.rcq, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	assert_int_equal(be32toh(wc.imm_data), 3);
	assert_int_equal(wc.byte_len, 2000);
	assert_memory_equal(src, wdst, 5000);
	assert_int_equal(rocemu_qp_destroy(qa), 0);
	assert_int_equal(rocemu_qp_destroy(qb), 0);
	rocemu_mr_dereg(ms);
	rocemu_mr_dereg(md);
	rocemu_mr_dereg(mw);
}

/* 9.8.3: with one frame of the first (28-frame) message lost, that message is dropped
 * and the next one lands in the same receive WQE. */
static void test_uc_loss(void **state)
{
	/* frame 12 falls inside the 28-frame first message whatever the few ARP/ND
	 * frames before it */
	static const char *const drop3[] = {"fault-drop-list", "tx:12", NULL};
	struct node a, b;
	struct rocemu_qp *qa, *qb;
	static uint8_t m1[7000], m2[600], dst[8000];
	struct rocemu_mr *m1r, *m2r, *md;
	struct ibv_sge sge;
	struct rocemu_wc wc;

	(void)state;
	assert_int_equal(h_setup_opts(&a, &b, "ucloss", NULL, drop3, NULL), 0);
	uc_pair(&a, &b, &qa, &qb);
	h_fill(m1, sizeof(m1), 1);
	h_fill(m2, sizeof(m2), 2);
	m1r = reg(&a, m1, sizeof(m1));
	m2r = reg(&a, m2, sizeof(m2));
	md = reg(&b, dst, sizeof(dst));
	sge = (struct ibv_sge){(uintptr_t)dst, sizeof(dst), h_key(md, false)};
	assert_int_equal(rocemu_qp_post_recv(qb, 1, &sge, 1), 0);
	assert_int_equal(rocemu_qp_post_recv(qb, 2, &sge, 1), 0);
	assert_int_equal(uc_post(qa, IBV_WR_SEND, 1, m1, sizeof(m1), h_key(m1r, false), NULL, 0),
			 0);
	assert_int_equal(h_poll(a.scq, &wc), 1);
	assert_int_equal(uc_post(qa, IBV_WR_SEND, 2, m2, sizeof(m2), h_key(m2r, false), NULL, 0),
			 0);
	assert_int_equal(h_poll(a.scq, &wc), 1);
	assert_int_equal(h_poll(b.rcq, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.wr_id, 1); /* the first WQE, reused */
	assert_int_equal(wc.byte_len, sizeof(m2));
	assert_memory_equal(dst, m2, sizeof(m2));
	assert_true(h_counter(b.e, "drop_uc_incomplete_msg") > 0);
	assert_int_equal(h_poll_quiet(b.rcq, &wc, 50), 0);
	assert_int_equal(rocemu_qp_destroy(qa), 0);
	assert_int_equal(rocemu_qp_destroy(qb), 0);
	rocemu_mr_dereg(m1r);
	rocemu_mr_dereg(m2r);
	rocemu_mr_dereg(md);
	h_teardown_all(&a, &b);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ud_ipv4),
	    cmocka_unit_test(test_ud_ipv6),
	    cmocka_unit_test(test_uc),
	    cmocka_unit_test(test_uc_loss),
	};

	const char *capture_path = NULL;

	/* --capture PATH: node A captures (check_capture.py) */
	if (argc > 2 && !strcmp(argv[1], "--capture"))
		capture_path = argv[2];
	return h_run_group("transport_ud_uc", tests, sizeof(tests) / sizeof(tests[0]), &A, &B,
			   "udt", capture_path);
}
