/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RC data path between two engines over a net_ring pair: every opcode,
 * every path MTU, sizes from 0 bytes to 1 MiB, scatter/gather, inline,
 * the 24-bit PSN wrap inside a message, fences, unsignaled WQEs, RNR, and
 * every access check seen from both sides with guard pages around buffers.
 */
#include <endian.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

static struct node A, B;

#define ACC_ALL                                                                                    \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)

struct pair {
	struct rocemu_qp *qa, *qb;
};

static void pair_up_psn(struct pair *p, enum ibv_mtu mtu, uint32_t psn_a, uint32_t psn_b)
{
	p->qa = h_qp(&A, IBV_QPT_RC, 1024, NULL);
	p->qb = h_qp(&B, IBV_QPT_RC, 1024, NULL);
	assert_non_null(p->qa);
	assert_non_null(p->qb);
	assert_int_equal(h_connect(&A, p->qa, &B, p->qb, mtu, psn_a, psn_b, ACC_ALL, false), 0);
}

static void pair_up(struct pair *p, enum ibv_mtu mtu)
{
	pair_up_psn(p, mtu, 0x100, 0x200);
}

static void pair_down(struct pair *p)
{
	struct rocemu_wc wc;

	assert_int_equal(rocemu_qp_destroy(p->qa), 0);
	assert_int_equal(rocemu_qp_destroy(p->qb), 0);
	/* drain leftovers (flushes) so the next test starts clean */
	while (rocemu_cq_poll(A.scq, 1, &wc) > 0 || rocemu_cq_poll(A.rcq, 1, &wc) > 0 ||
	       rocemu_cq_poll(B.scq, 1, &wc) > 0 || rocemu_cq_poll(B.rcq, 1, &wc) > 0)
		;
}

static struct rocemu_mr *reg(struct node *n, void *p, size_t len, unsigned access)
{
	return h_reg(n->pd, p, len, access);
}

static uint32_t lkey(struct rocemu_mr *mr)
{
	return h_key(mr, false);
}

static uint32_t rkey(struct rocemu_mr *mr)
{
	return h_key(mr, true);
}

static void post_recv(struct rocemu_qp *qp, uint64_t id, void *p, uint32_t len, uint32_t key)
{
	struct ibv_sge sge = {.addr = (uintptr_t)p, .length = len, .lkey = key};

	assert_int_equal(rocemu_qp_post_recv(qp, id, &sge, 1), 0);
}

static int post(struct rocemu_qp *qp, enum ibv_wr_opcode op, uint64_t id, void *p, uint32_t len,
		uint32_t key, uint64_t raddr, uint32_t rk, unsigned flags)
{
	struct rocemu_send_wr wr = {
	    .wr_id = id,
	    .opcode = op,
	    .send_flags = flags,
	    .remote_addr = raddr,
	    .rkey = rk,
	    .imm_data = htobe32(0xA5A50000u | (uint32_t)(id & 0xFFFF)),
	};

	return h_post_wr(qp, wr, p, len, key);
}

static void dump_counters(void)
{
	h_dump_counters(A.e, "node A");
	h_dump_counters(B.e, "node B");
}

static void expect_wc(struct rocemu_cq *cq, uint64_t id, enum ibv_wc_status st,
		      enum ibv_wc_opcode op, struct rocemu_wc *out)
{
	struct rocemu_wc wc;

	assert_int_equal(h_poll(cq, &wc), 1);
	if (wc.status != st)
		fprintf(stderr, "wr %llu: wc status %d, expected %d\n",
			(unsigned long long)wc.wr_id, wc.status, st);
	if (wc.status != st)
		dump_counters();
	assert_int_equal(wc.status, st);
	assert_int_equal(wc.wr_id, id);
	if (st == IBV_WC_SUCCESS)
		assert_int_equal(wc.opcode, op);
	if (out)
		*out = wc;
}

/* ------------------------------------------------------------------------ */

static void test_send_basic(void **state)
{
	struct pair p;
	uint8_t src[64], dst[128];
	struct rocemu_mr *ms, *md;
	struct rocemu_wc wc;

	(void)state;
	pair_up(&p, IBV_MTU_1024);
	h_fill(src, sizeof(src), 1);
	memset(dst, 0, sizeof(dst));
	ms = reg(&A, src, sizeof(src), 0);
	md = reg(&B, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE);
	post_recv(p.qb, 77, dst, sizeof(dst), lkey(md));
	assert_int_equal(post(p.qa, IBV_WR_SEND, 11, src, sizeof(src), lkey(ms), 0, 0, 0), 0);
	expect_wc(A.scq, 11, IBV_WC_SUCCESS, IBV_WC_SEND, NULL);
	expect_wc(B.rcq, 77, IBV_WC_SUCCESS, IBV_WC_RECV, &wc);
	assert_int_equal(wc.byte_len, sizeof(src));
	assert_int_equal(wc.qp_num, rocemu_qp_num(p.qb));
	assert_int_equal(wc.src_qp, rocemu_qp_num(p.qa));
	assert_int_equal(wc.wc_flags & IBV_WC_WITH_IMM, 0);
	assert_true(wc.timestamp_ns > 0);
	assert_memory_equal(src, dst, sizeof(src));
	assert_true(h_counter(B.e, "tx_acks") > 0);
	assert_true(h_counter(A.e, "rx_acks") > 0);
	rocemu_mr_dereg(ms);
	rocemu_mr_dereg(md);
	pair_down(&p);
}

static const uint32_t sizes[] = {0,    1,    3,	   255,	 256,	257,   1023,   1024,
				 1025, 4095, 4096, 4097, 12288, 65536, 100003, 1u << 20};

enum xfer { X_SEND, X_SEND_IMM, X_WRITE, X_WRITE_IMM, X_READ };

/** One transfer of len bytes from A to B (READ: B's memory read into A's). */
static void xfer(struct pair *p, enum xfer kind, uint32_t len, uint32_t seed)
{
	struct gbuf ga, gb;
	struct rocemu_mr *ma, *mb;
	struct rocemu_wc wc;
	uint32_t n = len ? len : 1;

	assert_int_equal(h_gbuf(&ga, n, seed & 1), 0);
	assert_int_equal(h_gbuf(&gb, n, !(seed & 1)), 0);
	h_fill(ga.p, len, seed);
	h_fill(gb.p, len, seed + 1000);
	ma = reg(&A, ga.p, len, ACC_ALL);
	mb = reg(&B, gb.p, len, ACC_ALL);
	switch (kind) {
	case X_SEND:
	case X_SEND_IMM:
		post_recv(p->qb, seed, gb.p, len, lkey(mb));
		assert_int_equal(post(p->qa, kind == X_SEND ? IBV_WR_SEND : IBV_WR_SEND_WITH_IMM,
				      seed, ga.p, len, lkey(ma), 0, 0, 0),
				 0);
		expect_wc(A.scq, seed, IBV_WC_SUCCESS, IBV_WC_SEND, NULL);
		expect_wc(B.rcq, seed, IBV_WC_SUCCESS, IBV_WC_RECV, &wc);
		assert_int_equal(wc.byte_len, len);
		assert_int_equal(!!(wc.wc_flags & IBV_WC_WITH_IMM), kind == X_SEND_IMM);
		if (kind == X_SEND_IMM)
			assert_int_equal(be32toh(wc.imm_data), 0xA5A50000u | (seed & 0xFFFF));
		assert_memory_equal(ga.p, gb.p, len);
		break;
	case X_WRITE:
		assert_int_equal(post(p->qa, IBV_WR_RDMA_WRITE, seed, ga.p, len, lkey(ma),
				      (uintptr_t)gb.p, rkey(mb), 0),
				 0);
		expect_wc(A.scq, seed, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL);
		assert_memory_equal(ga.p, gb.p, len);
		break;
	case X_WRITE_IMM:
		post_recv(p->qb, seed, NULL, 0, 0);
		assert_int_equal(post(p->qa, IBV_WR_RDMA_WRITE_WITH_IMM, seed, ga.p, len, lkey(ma),
				      (uintptr_t)gb.p, rkey(mb), 0),
				 0);
		expect_wc(A.scq, seed, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL);
		expect_wc(B.rcq, seed, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, &wc);
		assert_int_equal(wc.byte_len, len);
		assert_true(wc.wc_flags & IBV_WC_WITH_IMM);
		assert_int_equal(be32toh(wc.imm_data), 0xA5A50000u | (seed & 0xFFFF));
		assert_memory_equal(ga.p, gb.p, len);
		break;
	case X_READ:
		assert_int_equal(post(p->qa, IBV_WR_RDMA_READ, seed, ga.p, len, lkey(ma),
				      (uintptr_t)gb.p, rkey(mb), 0),
				 0);
		expect_wc(A.scq, seed, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, &wc);
		assert_int_equal(wc.byte_len, len);
		assert_memory_equal(ga.p, gb.p, len);
		break;
	}
	rocemu_mr_dereg(ma);
	rocemu_mr_dereg(mb);
	h_gbuf_free(&ga);
	h_gbuf_free(&gb);
}

static void matrix(enum xfer kind)
{
	uint32_t seed = 1;

	for (enum ibv_mtu mtu = IBV_MTU_256; mtu <= IBV_MTU_4096; mtu++) {
		struct pair p;

		pair_up(&p, mtu);
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
			xfer(&p, kind, sizes[i], seed++);
		pair_down(&p);
	}
}

static void test_send_matrix(void **state)
{
	(void)state;
	matrix(X_SEND);
}

static void test_send_imm_matrix(void **state)
{
	(void)state;
	matrix(X_SEND_IMM);
}

static void test_write_matrix(void **state)
{
	(void)state;
	matrix(X_WRITE);
}

static void test_write_imm_matrix(void **state)
{
	(void)state;
	matrix(X_WRITE_IMM);
}

static void test_read_matrix(void **state)
{
	(void)state;
	matrix(X_READ);
}

/* The 24-bit PSN wraps inside each message: SEND, WRITE and READ of 64 KiB at MTU 256. */
static void test_psn_wrap(void **state)
{
	struct pair p;

	(void)state;
	pair_up_psn(&p, IBV_MTU_256, 0xFFFFF0, 0xFFFFE0);
	xfer(&p, X_SEND, 65536, 5);
	xfer(&p, X_WRITE, 65536, 6);
	xfer(&p, X_READ, 65536, 7);
	xfer(&p, X_WRITE_IMM, 5000, 8);
	pair_down(&p);
}

static void test_sgl(void **state)
{
	struct pair p;
	static uint8_t src[10000], dst[10000];
	uint32_t slen[5] = {1, 999, 4096, 3, 4901}, dlen[4] = {2500, 7, 4000, 3493};
	struct ibv_sge ss[5], ds[4];
	struct rocemu_mr *ms, *md;
	struct rocemu_send_wr wr = {0};
	struct rocemu_wc wc;
	uint64_t off = 0;

	(void)state;
	pair_up(&p, IBV_MTU_512);
	h_fill(src, sizeof(src), 42);
	memset(dst, 0, sizeof(dst));
	ms = reg(&A, src, sizeof(src), ACC_ALL);
	md = reg(&B, dst, sizeof(dst), ACC_ALL);
	/* gather from pieces in reverse order; scatter into pieces in order */
	for (int i = 4; i >= 0; i--) {
		ss[4 - i] = (struct ibv_sge){(uintptr_t)src + off, slen[4 - i], lkey(ms)};
		off += slen[4 - i];
	}
	off = 0;
	for (int i = 0; i < 4; i++) {
		ds[i] = (struct ibv_sge){(uintptr_t)dst + off, dlen[i], lkey(md)};
		off += dlen[i];
	}
	assert_int_equal(rocemu_qp_post_recv(p.qb, 5, ds, 4), 0);
	wr.wr_id = 6;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.sg_list = ss;
	wr.num_sge = 5;
	assert_int_equal(rocemu_qp_post_send(p.qa, &wr), 0);
	expect_wc(A.scq, 6, IBV_WC_SUCCESS, IBV_WC_SEND, NULL);
	expect_wc(B.rcq, 5, IBV_WC_SUCCESS, IBV_WC_RECV, &wc);
	assert_int_equal(wc.byte_len, 10000);
	assert_memory_equal(src, dst, 10000);

	/* READ with a scatter list of 4 on the local side */
	memset(dst, 0, sizeof(dst));
	wr.wr_id = 7;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.sg_list = ds;
	wr.num_sge = 4;
	wr.remote_addr = (uintptr_t)src;
	wr.rkey = rkey(ms);
	assert_int_equal(rocemu_qp_post_send(p.qb, &wr), 0);
	expect_wc(B.scq, 7, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, NULL);
	assert_memory_equal(src, dst, 10000);
	rocemu_mr_dereg(ms);
	rocemu_mr_dereg(md);
	pair_down(&p);
}

static void test_inline_and_unsignaled(void **state)
{
	struct pair p;
	uint8_t src[200], dst[256];
	struct rocemu_mr *md;
	struct ibv_sge sge = {.addr = (uintptr_t)src, .length = sizeof(src), .lkey = 0xdead};
	struct rocemu_send_wr wr = {.opcode = IBV_WR_SEND, .sg_list = &sge, .num_sge = 1};
	struct rocemu_wc wc;

	(void)state;
	pair_up(&p, IBV_MTU_256);
	md = reg(&B, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE);
	h_fill(src, sizeof(src), 9);
	/* inline: lkey is ignored and the buffer may change right after posting */
	post_recv(p.qb, 1, dst, sizeof(dst), lkey(md));
	wr.wr_id = 100;
	wr.send_flags = IBV_SEND_INLINE; /* unsignaled */
	assert_int_equal(rocemu_qp_post_send(p.qa, &wr), 0);
	uint8_t copy[200];
	memcpy(copy, src, sizeof(src));
	memset(src, 0, sizeof(src));
	expect_wc(B.rcq, 1, IBV_WC_SUCCESS, IBV_WC_RECV, &wc);
	assert_memory_equal(copy, dst, sizeof(copy));
	/* then a signaled one: only it completes on the send CQ */
	post_recv(p.qb, 2, dst, sizeof(dst), lkey(md));
	wr.wr_id = 101;
	wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
	assert_int_equal(rocemu_qp_post_send(p.qa, &wr), 0);
	expect_wc(A.scq, 101, IBV_WC_SUCCESS, IBV_WC_SEND, NULL);
	expect_wc(B.rcq, 2, IBV_WC_SUCCESS, IBV_WC_RECV, NULL);
	/* inline larger than max_inline_data is refused at post time */
	uint8_t big[300];
	sge.addr = (uintptr_t)big;
	sge.length = sizeof(big);
	assert_int_equal(rocemu_qp_post_send(p.qa, &wr), -EINVAL);
	rocemu_mr_dereg(md);
	pair_down(&p);
}

static void test_atomics(void **state)
{
	struct pair p;
	uint64_t *target, result = 0;
	struct gbuf g;
	struct rocemu_mr *mt, *mr;
	struct ibv_sge sge;
	struct rocemu_send_wr wr = {0};

	(void)state;
	pair_up(&p, IBV_MTU_1024);
	assert_int_equal(h_gbuf(&g, 64, true), 0);
	target = (uint64_t *)g.p;
	target[0] = 100;
	target[1] = 7;
	mt = reg(&B, g.p, 64, ACC_ALL);
	mr = reg(&A, &result, 8, IBV_ACCESS_LOCAL_WRITE);
	sge = (struct ibv_sge){(uintptr_t)&result, 8, lkey(mr)};
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.rkey = rkey(mt);

	/* fetch-and-add */
	wr.wr_id = 1;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.remote_addr = (uintptr_t)&target[0];
	wr.compare_add = 5;
	assert_int_equal(rocemu_qp_post_send(p.qa, &wr), 0);
	expect_wc(A.scq, 1, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, NULL);
	assert_int_equal(result, 100);
	assert_int_equal(target[0], 105);

	/* compare-and-swap that matches */
	wr.wr_id = 2;
	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr.remote_addr = (uintptr_t)&target[1];
	wr.compare_add = 7;
	wr.swap = 0x1122334455667788ull;
	assert_int_equal(rocemu_qp_post_send(p.qa, &wr), 0);
	expect_wc(A.scq, 2, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, NULL);
	assert_int_equal(result, 7);
	assert_int_equal(target[1], 0x1122334455667788ull);

	/* ... and one that does not */
	wr.wr_id = 3;
	wr.compare_add = 8;
	wr.swap = 1;
	assert_int_equal(rocemu_qp_post_send(p.qa, &wr), 0);
	expect_wc(A.scq, 3, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, NULL);
	assert_int_equal(result, 0x1122334455667788ull);
	assert_int_equal(target[1], 0x1122334455667788ull);
	assert_int_equal(h_counter(B.e, "tx_atomic_ack") >= 3, 1);

	/* misaligned: invalid request NAK, the requester gets REM_INV_REQ_ERR */
	wr.wr_id = 4;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.remote_addr = (uintptr_t)&target[0] + 4;
	assert_int_equal(rocemu_qp_post_send(p.qa, &wr), 0);
	expect_wc(A.scq, 4, IBV_WC_REM_INV_REQ_ERR, IBV_WC_FETCH_ADD, NULL);
	assert_int_equal(rocemu_qp_state(p.qa), IBV_QPS_ERR);
	assert_int_equal(rocemu_qp_state(p.qb), IBV_QPS_ERR);
	assert_int_equal(target[0], 105);
	rocemu_mr_dereg(mt);
	rocemu_mr_dereg(mr);
	h_gbuf_free(&g);
	pair_down(&p);
}

/*
 * IBV_SEND_FENCE (10.8.3.3): a fenced WR waits until every earlier READ and
 * atomic completed. The classic use: READ remote data into a buffer, then
 * SEND that buffer on. B runs no pass until both WRs are posted, so the READ
 * cannot be answered before the SEND is due: without the fence the SEND
 * gathers the buffer at once (still zeros); with it, it carries the READ's
 * data. Completions come in posting order.
 */
static void test_fence_and_order(void **state)
{
	struct pair p;
	static uint8_t remote[8192], local[8192], rbuf[8192];
	struct rocemu_mr *mr_r, *mr_l, *mrb;
	struct rocemu_wc wc;

	(void)state;
	pair_up(&p, IBV_MTU_1024);
	h_fill(remote, sizeof(remote), 3);
	memset(local, 0, sizeof(local));
	memset(rbuf, 0, sizeof(rbuf));
	mr_r = reg(&B, remote, sizeof(remote), ACC_ALL);
	mr_l = reg(&A, local, sizeof(local), ACC_ALL);
	mrb = reg(&B, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	post_recv(p.qb, 9, rbuf, sizeof(rbuf), lkey(mrb));
	rocemu_port_progress_thread_stop(rocemu_engine_port(B.e));
	assert_int_equal(post(p.qa, IBV_WR_RDMA_READ, 1, local, sizeof(local), lkey(mr_l),
			      (uintptr_t)remote, rkey(mr_r), 0),
			 0);
	assert_int_equal(
	    post(p.qa, IBV_WR_SEND, 2, local, sizeof(local), lkey(mr_l), 0, 0, IBV_SEND_FENCE), 0);
	assert_int_equal(rocemu_port_progress_thread_start(rocemu_engine_port(B.e)), 0);
	expect_wc(A.scq, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, NULL);
	expect_wc(A.scq, 2, IBV_WC_SUCCESS, IBV_WC_SEND, NULL);
	expect_wc(B.rcq, 9, IBV_WC_SUCCESS, IBV_WC_RECV, &wc);
	assert_int_equal(wc.byte_len, sizeof(rbuf));
	assert_memory_equal(local, remote, sizeof(remote));
	/* the SEND left after the READ's data arrived: it forwarded that data */
	assert_memory_equal(rbuf, remote, sizeof(remote));
	rocemu_mr_dereg(mr_r);
	rocemu_mr_dereg(mr_l);
	rocemu_mr_dereg(mrb);
	pair_down(&p);
}

static void test_send_with_inv_and_local_inv(void **state)
{
	struct pair p;
	uint8_t buf[64], target[64], rbuf[64];
	struct rocemu_mr *mb, *mt, *mrb, *ml;
	struct rocemu_send_wr wr = {0};
	struct ibv_sge sge;
	struct rocemu_wc wc;

	(void)state;
	pair_up(&p, IBV_MTU_1024);
	mb = reg(&A, buf, sizeof(buf), ACC_ALL);
	mt = reg(&B, target, sizeof(target), ACC_ALL);
	mrb = reg(&B, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	post_recv(p.qb, 1, rbuf, sizeof(rbuf), lkey(mrb));
	sge = (struct ibv_sge){(uintptr_t)buf, 16, lkey(mb)};
	wr.wr_id = 2;
	wr.opcode = IBV_WR_SEND_WITH_INV;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.invalidate_rkey = rkey(mt);
	assert_int_equal(rocemu_qp_post_send(p.qa, &wr), 0);
	/* a region registered with ibv_reg_mr may not be invalidated by the peer
	 * (only type 2 memory windows bound to the QP may, IBA 10.6.7): invalid
	 * request on both sides, and the region stays valid */
	expect_wc(A.scq, 2, IBV_WC_REM_INV_REQ_ERR, IBV_WC_SEND, NULL);
	expect_wc(B.rcq, 1, IBV_WC_REM_INV_REQ_ERR, IBV_WC_RECV, &wc);
	pair_down(&p);
	pair_up(&p, IBV_MTU_1024);
	memset(buf, 0x5e, 8);
	assert_int_equal(
	    post(p.qa, IBV_WR_RDMA_WRITE, 3, buf, 8, lkey(mb), (uintptr_t)target, rkey(mt), 0), 0);
	expect_wc(A.scq, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL);
	assert_memory_equal(target, buf, 8);
	pair_down(&p);

	/* LOCAL_INV: afterwards the lkey no longer works locally */
	pair_up(&p, IBV_MTU_1024);
	ml = reg(&A, buf, sizeof(buf), ACC_ALL);
	wr = (struct rocemu_send_wr){.wr_id = 4,
				     .opcode = IBV_WR_LOCAL_INV,
				     .send_flags = IBV_SEND_SIGNALED,
				     .invalidate_rkey = lkey(ml)};
	assert_int_equal(rocemu_qp_post_send(p.qa, &wr), 0);
	expect_wc(A.scq, 4, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV, NULL);
	assert_int_equal(
	    post(p.qa, IBV_WR_RDMA_WRITE, 5, buf, 8, lkey(ml), (uintptr_t)target, rkey(mt), 0), 0);
	expect_wc(A.scq, 5, IBV_WC_LOC_PROT_ERR, IBV_WC_RDMA_WRITE, NULL);
	rocemu_mr_dereg(mb);
	rocemu_mr_dereg(mt);
	rocemu_mr_dereg(mrb);
	rocemu_mr_dereg(ml);
	pair_down(&p);
}

/* ------------------------------------------------------------------------ */
/* Access checks                                                              */

enum acc_case { ACC_OOB_END, ACC_OOB_START, ACC_NO_RIGHT, ACC_WRONG_PD, ACC_STALE };

/** One access violation on B's region through op; nothing outside may change. */
static void access_case(enum ibv_wr_opcode op, enum acc_case c)
{
	struct pair p;
	struct gbuf g;
	uint8_t local[4096], before[4096 + 64];
	struct rocemu_mr *mt, *ml;
	struct rocemu_pd *pd2 = NULL;
	const uint32_t len = 1000;
	unsigned right = op == IBV_WR_RDMA_READ	   ? IBV_ACCESS_REMOTE_READ
			 : op == IBV_WR_RDMA_WRITE ? IBV_ACCESS_REMOTE_WRITE
						   : IBV_ACCESS_REMOTE_ATOMIC;
	unsigned acc = IBV_ACCESS_LOCAL_WRITE |
		       (c == ACC_NO_RIGHT ? (ACC_ALL & ~right & ~IBV_ACCESS_LOCAL_WRITE) : ACC_ALL);
	uint64_t raddr;
	uint32_t ln = op == IBV_WR_ATOMIC_FETCH_AND_ADD ? 8 : len;
	enum ibv_wc_opcode wop = op == IBV_WR_RDMA_READ	   ? IBV_WC_RDMA_READ
				 : op == IBV_WR_RDMA_WRITE ? IBV_WC_RDMA_WRITE
							   : IBV_WC_FETCH_ADD;

	pair_up(&p, IBV_MTU_256);
	assert_int_equal(h_gbuf(&g, 4096, true), 0);
	h_fill(g.p, 4096, 77);
	h_fill(local, sizeof(local), 78);
	if (c == ACC_WRONG_PD) {
		assert_int_equal(rocemu_pd_alloc(B.e, &pd2), 0);
		assert_int_equal(
		    rocemu_mr_reg(pd2, g.p + 64, 2048, (uintptr_t)(g.p + 64), acc, &mt), 0);
	} else {
		mt = reg(&B, g.p + 64, 2048, acc);
	}
	uint32_t rk = rkey(mt);
	if (c == ACC_STALE) {
		rocemu_mr_dereg(mt);
		mt = NULL;
	}
	/* the region is [g.p+64, g.p+64+2048) */
	raddr = (uintptr_t)g.p + 64;
	if (c == ACC_OOB_END)
		raddr =
		    (uintptr_t)g.p + 64 + 2048 - ln + (op == IBV_WR_ATOMIC_FETCH_AND_ADD ? 8 : 1);
	if (c == ACC_OOB_START)
		raddr = (uintptr_t)g.p + 64 - (op == IBV_WR_ATOMIC_FETCH_AND_ADD ? 8 : 1);
	memcpy(before, g.p, 4096);
	ml = reg(&A, local, sizeof(local), ACC_ALL);
	uint8_t lbefore[4096];
	memcpy(lbefore, local, sizeof(local));
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		struct ibv_sge sge = {(uintptr_t)local, 8, lkey(ml)};
		struct rocemu_send_wr wr = {.wr_id = 1,
					    .opcode = op,
					    .send_flags = IBV_SEND_SIGNALED,
					    .sg_list = &sge,
					    .num_sge = 1,
					    .remote_addr = raddr,
					    .rkey = rk,
					    .compare_add = 1};
		assert_int_equal(rocemu_qp_post_send(p.qa, &wr), 0);
	} else {
		assert_int_equal(post(p.qa, op, 1, local, ln, lkey(ml), raddr, rk, 0), 0);
	}
	/* requester: remote access error; responder: NAK sent, QP in ERR */
	expect_wc(A.scq, 1, IBV_WC_REM_ACCESS_ERR, wop, NULL);
	assert_true(h_counter(B.e, "tx_nak_remote_access") > 0);
	assert_int_equal(rocemu_qp_state(p.qa), IBV_QPS_ERR);
	assert_int_equal(rocemu_qp_state(p.qb), IBV_QPS_ERR);
	/* no byte changed on either side */
	assert_memory_equal(before, g.p, 4096);
	assert_memory_equal(lbefore, local, sizeof(local));
	if (mt)
		rocemu_mr_dereg(mt);
	rocemu_mr_dereg(ml);
	if (pd2)
		rocemu_pd_free(pd2);
	h_gbuf_free(&g);
	pair_down(&p);
}

static void test_access_checks(void **state)
{
	enum ibv_wr_opcode ops[] = {IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ,
				    IBV_WR_ATOMIC_FETCH_AND_ADD};

	(void)state;
	for (unsigned o = 0; o < 3; o++)
		for (enum acc_case c = ACC_OOB_END; c <= ACC_STALE; c++)
			access_case(ops[o], c);
}

/* Local side: bad lkey in the gather list fails locally with LOC_PROT_ERR. */
static void test_local_access(void **state)
{
	struct pair p;
	uint8_t buf[512], rbuf[512];
	struct rocemu_mr *m, *mb;
	struct rocemu_wc wc;

	(void)state;
	pair_up(&p, IBV_MTU_256);
	m = reg(&A, buf, 256, 0);
	mb = reg(&B, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	/* B is ready to receive: a SEND that went out anyway would complete there */
	post_recv(p.qb, 5, rbuf, sizeof(rbuf), lkey(mb));
	/* one byte past the local region */
	assert_int_equal(post(p.qa, IBV_WR_SEND, 1, buf, 257, lkey(m), 0, 0, 0), 0);
	expect_wc(A.scq, 1, IBV_WC_LOC_PROT_ERR, IBV_WC_SEND, NULL);
	assert_int_equal(rocemu_qp_state(p.qa), IBV_QPS_ERR);
	/* nothing reached B's posted receive */
	assert_int_equal(h_poll_quiet(B.rcq, &wc, 50), 0);
	rocemu_mr_dereg(m);
	rocemu_mr_dereg(mb);
	pair_down(&p);
}

/* Receive buffer too small: NAK invalid request, both sides see an error. */
static void test_recv_too_small(void **state)
{
	struct pair p;
	uint8_t src[300], dst[100];
	struct rocemu_mr *ms, *md;

	(void)state;
	pair_up(&p, IBV_MTU_256);
	ms = reg(&A, src, sizeof(src), 0);
	md = reg(&B, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE);
	post_recv(p.qb, 8, dst, sizeof(dst), lkey(md));
	assert_int_equal(post(p.qa, IBV_WR_SEND, 1, src, sizeof(src), lkey(ms), 0, 0, 0), 0);
	expect_wc(A.scq, 1, IBV_WC_REM_INV_REQ_ERR, IBV_WC_SEND, NULL);
	expect_wc(B.rcq, 8, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, NULL);
	rocemu_mr_dereg(ms);
	rocemu_mr_dereg(md);
	pair_down(&p);
}

/* ------------------------------------------------------------------------ */
/* RNR and flush                                                              */

static void test_rnr(void **state)
{
	struct pair p;
	uint8_t src[32], dst[32];
	struct rocemu_mr *ms, *md;
	struct rocemu_wc wc;
	uint64_t before = h_counter(B.e, "tx_rnr_nak");

	(void)state;
	pair_up(&p, IBV_MTU_1024);
	ms = reg(&A, src, sizeof(src), 0);
	md = reg(&B, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE);
	h_fill(src, sizeof(src), 12);
	assert_int_equal(post(p.qa, IBV_WR_SEND, 1, src, sizeof(src), lkey(ms), 0, 0, 0), 0);
	/* no receive posted: the responder answers RNR NAK, the requester keeps retrying */
	for (int i = 0; i < 200000 && h_counter(B.e, "tx_rnr_nak") == before; i++) {
		rocemu_cq_poll(A.scq, 0, &wc);
		usleep(100);
	}
	assert_true(h_counter(B.e, "tx_rnr_nak") > before);
	assert_int_equal(h_poll_quiet(A.scq, &wc, 20), 0);
	post_recv(p.qb, 2, dst, sizeof(dst), lkey(md));
	expect_wc(A.scq, 1, IBV_WC_SUCCESS, IBV_WC_SEND, NULL);
	expect_wc(B.rcq, 2, IBV_WC_SUCCESS, IBV_WC_RECV, NULL);
	assert_memory_equal(src, dst, sizeof(src));
	pair_down(&p);

	/* rnr_retry = 0: the first RNR NAK fails the WQE */
	pair_up(&p, IBV_MTU_1024);
	struct ibv_qp_attr a = {.rnr_retry = 0};
	assert_int_equal(rocemu_qp_modify(p.qa, &a, IBV_QP_RNR_RETRY),
			 -EINVAL); /* not in RTS->RTS */
	pair_down(&p);
	p.qa = h_qp(&A, IBV_QPT_RC, 16, NULL);
	p.qb = h_qp(&B, IBV_QPT_RC, 16, NULL);
	assert_int_equal(h_connect(&A, p.qa, &B, p.qb, IBV_MTU_1024, 1, 2, ACC_ALL, false), 0);
	/* h_connect sets rnr_retry 7; go through SQD to change it */
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_SQD};
	assert_int_equal(rocemu_qp_modify(p.qa, &a, IBV_QP_STATE), 0);
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_SQD, .rnr_retry = 0};
	assert_int_equal(rocemu_qp_modify(p.qa, &a, IBV_QP_STATE | IBV_QP_RNR_RETRY), 0);
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS};
	assert_int_equal(rocemu_qp_modify(p.qa, &a, IBV_QP_STATE), 0);
	assert_int_equal(post(p.qa, IBV_WR_SEND, 3, src, sizeof(src), lkey(ms), 0, 0, 0), 0);
	expect_wc(A.scq, 3, IBV_WC_RNR_RETRY_EXC_ERR, IBV_WC_SEND, NULL);
	assert_int_equal(rocemu_qp_state(p.qa), IBV_QPS_ERR);
	rocemu_mr_dereg(ms);
	rocemu_mr_dereg(md);
	pair_down(&p);
}

static void test_flush(void **state)
{
	struct pair p;
	uint8_t buf[64];
	struct rocemu_mr *m;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};

	(void)state;
	pair_up(&p, IBV_MTU_1024);
	m = reg(&A, buf, sizeof(buf), ACC_ALL);
	for (int i = 0; i < 3; i++)
		post_recv(p.qa, 10 + i, buf, sizeof(buf), lkey(m));
	assert_int_equal(rocemu_qp_modify(p.qa, &a, IBV_QP_STATE), 0);
	for (int i = 0; i < 3; i++)
		expect_wc(A.rcq, 10 + i, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, NULL);
	/* posting in ERR completes at once with a flush */
	assert_int_equal(post(p.qa, IBV_WR_SEND, 20, buf, 8, lkey(m), 0, 0, 0), 0);
	expect_wc(A.scq, 20, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND, NULL);
	post_recv(p.qa, 21, buf, sizeof(buf), lkey(m));
	expect_wc(A.rcq, 21, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, NULL);
	rocemu_mr_dereg(m);
	pair_down(&p);
}

static void test_srq(void **state)
{
	struct rocemu_srq *srq;
	struct rocemu_qp *qa, *qb;
	uint8_t src[100], dst[2][128];
	struct rocemu_mr *ms, *md;
	struct ibv_sge sge;
	struct rocemu_wc wc;

	(void)state;
	assert_int_equal(rocemu_srq_create(B.pd, 16, 4, 0, NULL, &srq), 0);
	qa = h_qp(&A, IBV_QPT_RC, 16, NULL);
	qb = h_qp(&B, IBV_QPT_RC, 16, srq);
	assert_non_null(qb);
	assert_int_equal(h_connect(&A, qa, &B, qb, IBV_MTU_256, 3, 4, ACC_ALL, false), 0);
	ms = reg(&A, src, sizeof(src), 0);
	md = reg(&B, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE);
	h_fill(src, sizeof(src), 55);
	for (int i = 0; i < 2; i++) {
		sge = (struct ibv_sge){(uintptr_t)dst[i], 128, lkey(md)};
		assert_int_equal(rocemu_srq_post_recv(srq, 40 + i, &sge, 1), 0);
	}
	assert_int_equal(rocemu_qp_post_recv(qb, 1, &sge, 1), -EINVAL);
	assert_int_equal(post(qa, IBV_WR_SEND, 1, src, sizeof(src), lkey(ms), 0, 0, 0), 0);
	expect_wc(A.scq, 1, IBV_WC_SUCCESS, IBV_WC_SEND, NULL);
	expect_wc(B.rcq, 40, IBV_WC_SUCCESS, IBV_WC_RECV, &wc);
	assert_int_equal(wc.byte_len, sizeof(src));
	assert_memory_equal(src, dst[0], sizeof(src));
	assert_int_equal(rocemu_qp_destroy(qa), 0);
	assert_int_equal(rocemu_qp_destroy(qb), 0);
	assert_int_equal(rocemu_srq_destroy(srq), 0);
	rocemu_mr_dereg(ms);
	rocemu_mr_dereg(md);
}

/* Many messages in flight at once, completions strictly in order. */
static void test_pipeline(void **state)
{
	struct pair p;
	static uint8_t src[256 * 64], dst[256 * 64];
	struct rocemu_mr *ms, *md;

	(void)state;
	pair_up(&p, IBV_MTU_256);
	h_fill(src, sizeof(src), 66);
	memset(dst, 0, sizeof(dst));
	ms = reg(&A, src, sizeof(src), ACC_ALL);
	md = reg(&B, dst, sizeof(dst), ACC_ALL);
	for (int i = 0; i < 256; i++)
		post_recv(p.qb, i, dst + i * 64, 64, lkey(md));
	for (int i = 0; i < 256; i++)
		assert_int_equal(post(p.qa, IBV_WR_SEND, i, src + i * 64, 64, lkey(ms), 0, 0, 0),
				 0);
	for (int i = 0; i < 256; i++) {
		expect_wc(A.scq, i, IBV_WC_SUCCESS, IBV_WC_SEND, NULL);
		expect_wc(B.rcq, i, IBV_WC_SUCCESS, IBV_WC_RECV, NULL);
	}
	assert_memory_equal(src, dst, sizeof(src));
	rocemu_mr_dereg(ms);
	rocemu_mr_dereg(md);
	pair_down(&p);
}

/*
 * Linux Soft-RoCE offers 128 outstanding READ/atomic requests, and perftest and
 * rdma_cm hand the peer's value to ibv_modify_qp: a QP takes 128 both ways, and
 * its responder really holds 128 requests at once (all posted before the
 * first response can come back, none refused or dropped).
 */
static void test_rd_atomic_128(void **state)
{
	struct pair p;
	static uint8_t src[128 * 64], dst[128 * 64];
	struct rocemu_mr *ms, *md;
	uint64_t naks = h_counter(B.e, "tx_nak_invalid_req");

	(void)state;
	h_rd_atomic = 128;
	pair_up(&p, IBV_MTU_1024);
	h_rd_atomic = 16;
	h_fill(src, sizeof(src), 128);
	memset(dst, 0, sizeof(dst));
	ms = reg(&B, src, sizeof(src), ACC_ALL);
	md = reg(&A, dst, sizeof(dst), ACC_ALL);
	for (int i = 0; i < 128; i++)
		assert_int_equal(post(p.qa, IBV_WR_RDMA_READ, i, dst + i * 64, 64, lkey(md),
				      (uintptr_t)(src + i * 64), rkey(ms), 0),
				 0);
	for (int i = 0; i < 128; i++)
		expect_wc(A.scq, i, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, NULL);
	assert_memory_equal(src, dst, sizeof(src));
	assert_int_equal(h_counter(B.e, "tx_nak_invalid_req"), naks);
	rocemu_mr_dereg(ms);
	rocemu_mr_dereg(md);
	pair_down(&p);
}

static void test_ipv6_path(void **state)
{
	struct pair p;

	(void)state;
	if (A.gid6_index < 0)
		skip();
	p.qa = h_qp(&A, IBV_QPT_RC, 16, NULL);
	p.qb = h_qp(&B, IBV_QPT_RC, 16, NULL);
	assert_int_equal(h_connect(&A, p.qa, &B, p.qb, IBV_MTU_1024, 9, 10, ACC_ALL, true), 0);
	xfer(&p, X_SEND, 5000, 91);
	xfer(&p, X_READ, 5000, 92);
	pair_down(&p);
}

/* SQD (11.2.5.4): WQEs posted while drained are held, RTS sends them. */
static void test_sqd_holds_work(void **state)
{
	struct pair p;
	uint8_t src[100], dst[100];
	struct rocemu_mr *ms, *md;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_SQD};
	struct rocemu_wc wc;

	(void)state;
	pair_up(&p, IBV_MTU_1024);
	ms = reg(&A, src, sizeof(src), 0);
	md = reg(&B, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE);
	h_fill(src, sizeof(src), 77);
	post_recv(p.qb, 1, dst, sizeof(dst), lkey(md));
	assert_int_equal(rocemu_qp_modify(p.qa, &a, IBV_QP_STATE), 0);
	assert_int_equal(post(p.qa, IBV_WR_SEND, 2, src, sizeof(src), lkey(ms), 0, 0, 0), 0);
	assert_int_equal(h_poll_quiet(B.rcq, &wc, 50), 0);
	a.qp_state = IBV_QPS_RTS;
	assert_int_equal(rocemu_qp_modify(p.qa, &a, IBV_QP_STATE), 0);
	expect_wc(A.scq, 2, IBV_WC_SUCCESS, IBV_WC_SEND, NULL);
	expect_wc(B.rcq, 1, IBV_WC_SUCCESS, IBV_WC_RECV, NULL);
	assert_memory_equal(src, dst, sizeof(src));
	rocemu_mr_dereg(ms);
	rocemu_mr_dereg(md);
	pair_down(&p);
}

/* Two QPs of the same engine: frames to our own GID loop back inside the port. */
static void test_loopback(void **state)
{
	struct pair p;
	struct node *a = &A;
	uint8_t src[5000], dst[5000];
	struct rocemu_mr *ms, *md;
	struct rocemu_wc wc;

	(void)state;
	p.qa = h_qp(a, IBV_QPT_RC, 16, NULL);
	p.qb = h_qp(a, IBV_QPT_RC, 16, NULL);
	assert_int_equal(h_connect(a, p.qa, a, p.qb, IBV_MTU_1024, 5, 6, ACC_ALL, false), 0);
	h_fill(src, sizeof(src), 31);
	memset(dst, 0, sizeof(dst));
	ms = reg(a, src, sizeof(src), ACC_ALL);
	md = reg(a, dst, sizeof(dst), ACC_ALL);
	post_recv(p.qb, 1, dst, sizeof(dst), lkey(md));
	assert_int_equal(post(p.qa, IBV_WR_SEND, 2, src, sizeof(src), lkey(ms), 0, 0, 0), 0);
	expect_wc(a->scq, 2, IBV_WC_SUCCESS, IBV_WC_SEND, NULL);
	expect_wc(a->rcq, 1, IBV_WC_SUCCESS, IBV_WC_RECV, &wc);
	assert_int_equal(wc.qp_num, rocemu_qp_num(p.qb));
	assert_memory_equal(src, dst, sizeof(src));
	memset(dst, 0, sizeof(dst));
	assert_int_equal(post(p.qb, IBV_WR_RDMA_READ, 3, dst, sizeof(dst), lkey(md), (uintptr_t)src,
			      rkey(ms), 0),
			 0);
	expect_wc(a->scq, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, NULL);
	assert_memory_equal(src, dst, sizeof(src));
	rocemu_mr_dereg(ms);
	rocemu_mr_dereg(md);
	pair_down(&p);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_send_basic),
	    cmocka_unit_test(test_sgl),
	    cmocka_unit_test(test_inline_and_unsignaled),
	    cmocka_unit_test(test_pipeline),
	    cmocka_unit_test(test_rd_atomic_128),
	    cmocka_unit_test(test_atomics),
	    cmocka_unit_test(test_fence_and_order),
	    cmocka_unit_test(test_send_with_inv_and_local_inv),
	    cmocka_unit_test(test_psn_wrap),
	    cmocka_unit_test(test_access_checks),
	    cmocka_unit_test(test_local_access),
	    cmocka_unit_test(test_recv_too_small),
	    cmocka_unit_test(test_rnr),
	    cmocka_unit_test(test_flush),
	    cmocka_unit_test(test_srq),
	    cmocka_unit_test(test_ipv6_path),
	    cmocka_unit_test(test_loopback),
	    cmocka_unit_test(test_sqd_holds_work),
	    cmocka_unit_test(test_send_matrix),
	    cmocka_unit_test(test_send_imm_matrix),
	    cmocka_unit_test(test_write_matrix),
	    cmocka_unit_test(test_write_imm_matrix),
	    cmocka_unit_test(test_read_matrix),
	};
	size_t ntests = sizeof(tests) / sizeof(tests[0]);
	const char *capture_path = NULL;

	/* --capture PATH: run everything but the large MTU x size matrices with
	 * node A capturing, for the tshark/ICRC check (check_capture.py). */
	if (argc > 2 && !strcmp(argv[1], "--capture")) {
		capture_path = argv[2];
		ntests = 17;
	}
	return h_run_group("transport_rc", tests, ntests, &A, &B, "rct", capture_path);
}
