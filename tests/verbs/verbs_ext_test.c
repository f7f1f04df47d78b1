/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The verbs of issue 15 beyond the basic set, through rocemu's libibverbs in
 * one process: two devices on an in-process ring pair are two hosts.
 *  - ATOMIC WRITE (annex A19): ibv_wr_atomic_write and ibv_post_send with
 *    IBV_WR_ATOMIC_WRITE place 8 bytes at once, complete IBV_WC_ATOMIC_WRITE,
 *    and the rules the verbs layer checks (alignment NAK, missing right).
 * Every byte is checked.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <infiniband/verbs.h>

#include "test_util.h"

static struct ibv_device **devs;
static int n_devs;

/* One host: context, PD, CQ, a buffer registered for everything. */
struct host {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
};

static void host_open(struct host *h, struct ibv_device *dev, unsigned mr_access)
{
	memset(h, 0, sizeof(*h));
	h->ctx = ibv_open_device(dev);
	assert_non_null(h->ctx);
	h->pd = ibv_alloc_pd(h->ctx);
	assert_non_null(h->pd);
	h->cq = ibv_create_cq(h->ctx, 64, NULL, NULL, 0);
	assert_non_null(h->cq);
	h->buf = aligned_alloc(4096, TU_BUF);
	assert_non_null(h->buf);
	memset(h->buf, 0, TU_BUF);
	h->mr = ibv_reg_mr(h->pd, h->buf, TU_BUF, (int)mr_access);
	assert_non_null(h->mr);
	assert_int_equal(ibv_query_gid(h->ctx, 1, TU_GID_INDEX, &h->gid), 0);
}

static void host_close(struct host *h)
{
	assert_int_equal(ibv_dereg_mr(h->mr), 0);
	assert_int_equal(ibv_destroy_cq(h->cq), 0);
	assert_int_equal(ibv_dealloc_pd(h->pd), 0);
	assert_int_equal(ibv_close_device(h->ctx), 0);
	free(h->buf);
}

/* An RC QP with the extended send API for ops. */
static struct ibv_qp *rc_qp(struct host *h, uint64_t ops)
{
	struct ibv_qp_init_attr_ex qa = {
	    .send_cq = h->cq,
	    .recv_cq = h->cq,
	    .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2, .max_recv_sge = 2},
	    .qp_type = IBV_QPT_RC,
	    .pd = h->pd,
	    .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
	    .send_ops_flags = ops,
	};
	struct ibv_qp *qp = ibv_create_qp_ex(h->ctx, &qa);

	assert_non_null(qp);
	return qp;
}

static void rc_connect(struct ibv_qp *qp, const union ibv_gid *dgid, uint32_t dqpn, unsigned access)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = access};

	assert_int_equal(
	    ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
	    0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.rq_psn = 7;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *dgid;
	a.ah_attr.grh.sgid_index = TU_GID_INDEX;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	assert_int_equal(ibv_modify_qp(qp, &a,
				       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
			 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 7;
	a.max_rd_atomic = 4;
	assert_int_equal(ibv_modify_qp(qp, &a,
				       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					   IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					   IBV_QP_MAX_QP_RD_ATOMIC),
			 0);
}

/* The next completion on cq within 10 s, whatever its status. */
static struct ibv_wc poll_any(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	double end = tu_now() + 10;
	int n;

	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0 && tu_now() < end)
		;
	if (n != 1)
		fail_msg("no completion within 10 s (poll returned %d)", n);
	return wc;
}

#define ALL_REMOTE (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define MR_ALL	   (IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE)

/* ------------------------------------------------------------------------ */
/* ATOMIC WRITE                                                               */

static void atomic_write_places_8_bytes(void **state)
{
	struct host a, b;
	struct ibv_qp *qa, *qb;
	struct ibv_qp_ex *x;
	struct ibv_wc wc;
	const uint8_t val[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	uint8_t legacy[8] = {0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8};

	(void)state;
	host_open(&a, devs[0], MR_ALL);
	host_open(&b, devs[1], MR_ALL);
	qa = rc_qp(&a, IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_SEND);
	qb = rc_qp(&b, IBV_QP_EX_WITH_SEND);
	rc_connect(qa, &b.gid, qb->qp_num, ALL_REMOTE);
	rc_connect(qb, &a.gid, qa->qp_num, ALL_REMOTE);
	memset(b.buf + 64, 0xEE, 24);

	/* ibv_wr_atomic_write(3): the 8 bytes are copied at the call */
	x = ibv_qp_to_qp_ex(qa);
	assert_non_null(x);
	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	{
		uint8_t tmp[8];

		memcpy(tmp, val, 8);
		ibv_wr_atomic_write(x, b.mr->rkey, (uintptr_t)b.buf + 72, tmp);
		memset(tmp, 0, 8); /* reused before ibv_wr_complete: must not matter */
	}
	assert_int_equal(ibv_wr_complete(x), 0);
	wc = tu_poll_one(a.cq);
	assert_int_equal(wc.wr_id, 1);
	assert_int_equal(wc.opcode, IBV_WC_ATOMIC_WRITE);
	assert_int_equal(wc.byte_len, 8);
	assert_memory_equal(b.buf + 72, val, 8);
	for (unsigned i = 64; i < 72; i++)
		assert_int_equal(b.buf[i], 0xEE);
	for (unsigned i = 80; i < 88; i++)
		assert_int_equal(b.buf[i], 0xEE);

	/* ibv_post_send with IBV_WR_ATOMIC_WRITE: the bytes from the one 8-byte SGE */
	memcpy(a.buf, legacy, 8);
	struct ibv_sge sge = {.addr = (uintptr_t)a.buf, .length = 8, .lkey = a.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 2,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_ATOMIC_WRITE,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	wr.wr.rdma.remote_addr = (uintptr_t)b.buf + 64;
	wr.wr.rdma.rkey = b.mr->rkey;
	assert_int_equal(ibv_post_send(qa, &wr, &bad), 0);
	wc = tu_poll_one(a.cq);
	assert_int_equal(wc.opcode, IBV_WC_ATOMIC_WRITE);
	assert_memory_equal(b.buf + 64, legacy, 8);
	/* anything but exactly 8 bytes in one SGE is refused at the post */
	sge.length = 4;
	assert_int_equal(ibv_post_send(qa, &wr, &bad), EINVAL);
	assert_ptr_equal(bad, &wr);
	/* a NULL data pointer fails the batch */
	ibv_wr_start(x);
	ibv_wr_atomic_write(x, b.mr->rkey, (uintptr_t)b.buf + 64, NULL);
	assert_int_equal(ibv_wr_complete(x), EINVAL);

	/* misaligned target: the responder NAKs invalid request (A19, C9-40) */
	ibv_wr_start(x);
	x->wr_id = 3;
	ibv_wr_atomic_write(x, b.mr->rkey, (uintptr_t)b.buf + 100, val);
	assert_int_equal(ibv_wr_complete(x), 0);
	wc = poll_any(a.cq);
	assert_int_equal(wc.wr_id, 3);
	assert_int_equal(wc.status, IBV_WC_REM_INV_REQ_ERR);
	assert_int_equal(b.buf[100], 0);

	assert_int_equal(ibv_destroy_qp(qa), 0);
	assert_int_equal(ibv_destroy_qp(qb), 0);
	host_close(&a);
	host_close(&b);
}

/* A QP created without IBV_QP_EX_WITH_ATOMIC_WRITE still has it refused by
 * neither side; a QP without REMOTE_WRITE access refuses it (A19). */
static void atomic_write_needs_remote_write(void **state)
{
	struct host a, b;
	struct ibv_qp *qa, *qb;
	struct ibv_qp_ex *x;
	struct ibv_wc wc;
	const uint64_t v = 0x1122334455667788ull;

	(void)state;
	host_open(&a, devs[0], MR_ALL);
	host_open(&b, devs[1], MR_ALL);
	qa = rc_qp(&a, IBV_QP_EX_WITH_ATOMIC_WRITE);
	qb = rc_qp(&b, IBV_QP_EX_WITH_SEND);
	rc_connect(qa, &b.gid, qb->qp_num, ALL_REMOTE);
	rc_connect(qb, &a.gid, qa->qp_num, IBV_ACCESS_REMOTE_READ);
	x = ibv_qp_to_qp_ex(qa);
	ibv_wr_start(x);
	x->wr_id = 9;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(x, b.mr->rkey, (uintptr_t)b.buf + 8, &v);
	assert_int_equal(ibv_wr_complete(x), 0);
	wc = poll_any(a.cq);
	assert_int_equal(wc.status, IBV_WC_REM_ACCESS_ERR);
	for (unsigned i = 0; i < 16; i++)
		assert_int_equal(b.buf[8 + i], 0);
	assert_int_equal(ibv_destroy_qp(qa), 0);
	assert_int_equal(ibv_destroy_qp(qb), 0);
	host_close(&a);
	host_close(&b);
}

int main(void)
{
	char path[] = "/tmp/rocemu-ext-XXXXXX";

	devs = tu_devices(path,
			  "[rocemu0]\nport = ring:ext:a\nip = 10.79.5.1/24\n"
			  "[rocemu1]\nport = ring:ext:b\nip = 10.79.5.2/24\n",
			  2, &n_devs);
	if (!devs)
		return 1;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(atomic_write_places_8_bytes),
	    cmocka_unit_test(atomic_write_needs_remote_write),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	ibv_free_device_list(devs);
	return rc;
}
