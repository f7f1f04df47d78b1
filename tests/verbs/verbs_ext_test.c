/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The verbs of issue 15 beyond the basic set, through rocemu's libibverbs in
 * one process: two devices on an in-process ring pair are two hosts.
 *  - ATOMIC WRITE (annex A19): ibv_wr_atomic_write and ibv_post_send with
 *    IBV_WR_ATOMIC_WRITE place 8 bytes at once, complete IBV_WC_ATOMIC_WRITE,
 *    and the rules the verbs layer checks (alignment NAK, missing right);
 *  - thread and parent domains: the application's allocators give the rings
 *    of CQs and QPs (and get them back), a parent domain stands for its PD;
 *  - extended CQs: IGNORE_OVERRUN, FLOW_TAG, CVLAN; TM_INFO refused;
 *  - raw packet QPs with ibv_create_flow: whole frames out and in, rule
 *    priority, tags, drop and sniffer rules, EPERM without CAP_NET_RAW.
 * Every byte is checked.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
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
#include <linux/capability.h>
#include <sys/syscall.h>

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

/* ------------------------------------------------------------------------ */
/* Thread and parent domains                                                  */

struct alloc_log {
	unsigned allocs, frees, refuse_type_hits;
	uint64_t types_seen[8];
	unsigned n_types;
	uint64_t refuse_type; /* answer NULL for this type (0: none) */
	bool use_default;     /* answer IBV_ALLOCATOR_USE_DEFAULT */
	void *last_pd_context;
};

static void *app_alloc(struct ibv_pd *pd, void *pd_context, size_t size, size_t alignment,
		       uint64_t type)
{
	struct alloc_log *l = pd_context;
	void *p;

	(void)pd;
	l->last_pd_context = pd_context;
	if (l->n_types < 8)
		l->types_seen[l->n_types++] = type;
	if (type == l->refuse_type) {
		l->refuse_type_hits++;
		return NULL;
	}
	if (l->use_default)
		return IBV_ALLOCATOR_USE_DEFAULT;
	assert_true(alignment >= 8 && (alignment & (alignment - 1)) == 0);
	p = aligned_alloc(alignment, (size + alignment - 1) & ~(alignment - 1));
	assert_non_null(p);
	memset(p, 0x5C, size); /* the engine must zero what it gets */
	l->allocs++;
	return p;
}

static void app_free(struct ibv_pd *pd, void *pd_context, void *ptr, uint64_t type)
{
	struct alloc_log *l = pd_context;

	(void)pd;
	(void)type;
	l->frees++;
	free(ptr);
}

static bool saw_type(const struct alloc_log *l, uint64_t t)
{
	for (unsigned i = 0; i < l->n_types; i++)
		if (l->types_seen[i] == t)
			return true;
	return false;
}

static void parent_domain_allocators(void **state)
{
	struct host a, b;
	struct alloc_log log = {0};
	struct ibv_td_init_attr tda = {0};
	struct ibv_td *td;
	struct ibv_pd *pdom;
	struct ibv_cq_ex *cqx;
	struct ibv_qp *qa, *qb;
	struct ibv_wc wc;

	(void)state;
	host_open(&a, devs[0], MR_ALL);
	host_open(&b, devs[1], MR_ALL);
	td = ibv_alloc_td(a.ctx, &tda);
	assert_non_null(td);
	tda.comp_mask = 1;
	assert_null(ibv_alloc_td(a.ctx, &tda));
	assert_int_equal(errno, EINVAL);
	struct ibv_parent_domain_init_attr pa = {
	    .pd = a.pd,
	    .td = td,
	    .comp_mask =
		IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
	    .alloc = app_alloc,
	    .free = app_free,
	    .pd_context = &log,
	};
	pdom = ibv_alloc_parent_domain(a.ctx, &pa);
	assert_non_null(pdom);
	assert_ptr_equal(pdom->context, a.ctx);
	/* a parent domain holds its PD and its TD */
	assert_int_equal(ibv_dealloc_pd(a.pd), EBUSY);
	assert_int_equal(ibv_dealloc_td(td), EBUSY);
	/* not from another parent domain */
	pa.pd = pdom;
	assert_null(ibv_alloc_parent_domain(a.ctx, &pa));
	assert_int_equal(errno, EINVAL);
	pa.pd = a.pd;

	/* a CQ and a QP whose rings are the application's */
	struct ibv_cq_init_attr_ex ca = {.cqe = 32,
					 .wc_flags = IBV_WC_STANDARD_FLAGS,
					 .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD,
					 .parent_domain = pdom};
	cqx = ibv_create_cq_ex(a.ctx, &ca);
	assert_non_null(cqx);
	assert_true(saw_type(&log, 0x524f0003ull)); /* ROCEMU_RES_CQ */
	ca.parent_domain = a.pd;		    /* a plain PD is no parent domain */
	assert_null(ibv_create_cq_ex(a.ctx, &ca));
	assert_int_equal(errno, EINVAL);
	struct ibv_qp_init_attr_ex qia = {
	    .send_cq = ibv_cq_ex_to_cq(cqx),
	    .recv_cq = ibv_cq_ex_to_cq(cqx),
	    .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = IBV_QPT_RC,
	    .pd = pdom,
	    .comp_mask = IBV_QP_INIT_ATTR_PD,
	};
	qa = ibv_create_qp_ex(a.ctx, &qia);
	assert_non_null(qa);
	assert_true(saw_type(&log, 0x524f0001ull)); /* ROCEMU_RES_QP_SQ */
	assert_true(saw_type(&log, 0x524f0002ull)); /* ROCEMU_RES_QP_RQ */
	assert_int_equal(log.allocs, 3);
	assert_ptr_equal(log.last_pd_context, &log);
	assert_int_equal(ibv_dealloc_pd(pdom), EBUSY); /* the QP and the CQ use it */

	/* the parent domain stands for a.pd: a.mr (registered on a.pd) works */
	qb = rc_qp(&b, IBV_QP_EX_WITH_SEND);
	rc_connect(qa, &b.gid, qb->qp_num, ALL_REMOTE);
	rc_connect(qb, &a.gid, qa->qp_num, ALL_REMOTE);
	tu_fill(a.buf, 300, 4);
	struct ibv_sge sge = {.addr = (uintptr_t)a.buf, .length = 300, .lkey = a.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 1,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	wr.wr.rdma.remote_addr = (uintptr_t)b.buf + 1000;
	wr.wr.rdma.rkey = b.mr->rkey;
	assert_int_equal(ibv_post_send(qa, &wr, &bad), 0);
	wc = tu_poll_one(ibv_cq_ex_to_cq(cqx));
	assert_int_equal(wc.opcode, IBV_WC_RDMA_WRITE);
	assert_memory_equal(b.buf + 1000, a.buf, 300);

	assert_int_equal(ibv_destroy_qp(qa), 0);
	assert_int_equal(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
	assert_int_equal(log.frees, 3); /* every ring went back */

	/* NULL from alloc: the object is not created (ENOMEM); USE_DEFAULT: ours */
	log.refuse_type = 0x524f0001ull;
	assert_null(ibv_create_qp_ex(
	    a.ctx, &(struct ibv_qp_init_attr_ex){.send_cq = a.cq,
						 .recv_cq = a.cq,
						 .cap = {.max_send_wr = 4, .max_recv_wr = 4},
						 .qp_type = IBV_QPT_RC,
						 .pd = pdom,
						 .comp_mask = IBV_QP_INIT_ATTR_PD}));
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(log.refuse_type_hits, 1);
	log.refuse_type = 0;
	log.use_default = true;
	qa = ibv_create_qp_ex(
	    a.ctx, &(struct ibv_qp_init_attr_ex){.send_cq = a.cq,
						 .recv_cq = a.cq,
						 .cap = {.max_send_wr = 4, .max_recv_wr = 4},
						 .qp_type = IBV_QPT_RC,
						 .pd = pdom,
						 .comp_mask = IBV_QP_INIT_ATTR_PD});
	assert_non_null(qa);
	assert_int_equal(ibv_destroy_qp(qa), 0);
	/* the refused QP's RQ ring (asked for after the SQ) went back too */
	assert_int_equal(log.allocs, 4);
	assert_int_equal(log.frees, 4);

	assert_int_equal(ibv_dealloc_pd(pdom), 0);
	assert_int_equal(ibv_dealloc_td(td), 0);
	assert_int_equal(ibv_destroy_qp(qb), 0);
	host_close(&a);
	host_close(&b);
}

/* ------------------------------------------------------------------------ */
/* Extended CQs                                                               */

/* Two receives complete on a one-entry CQ: with IGNORE_OVERRUN the second is
 * dropped and nothing else happens; without it the QP goes to ERR. */
static void cq_ignore_overrun(void **state)
{
	struct host a, b;

	(void)state;
	for (int ignore = 1; ignore >= 0; ignore--) {
		host_open(&a, devs[0], MR_ALL);
		host_open(&b, devs[1], MR_ALL);
		struct ibv_cq_init_attr_ex ca = {
		    .cqe = 1,
		    .wc_flags = IBV_WC_STANDARD_FLAGS,
		    .comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
		    .flags = ignore ? IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN : 0,
		};
		struct ibv_cq_ex *rcq = ibv_create_cq_ex(b.ctx, &ca);
		assert_non_null(rcq);
		assert_int_equal(ibv_cq_ex_to_cq(rcq)->cqe, 1);
		struct ibv_qp *qa = rc_qp(&a, IBV_QP_EX_WITH_SEND);
		struct ibv_qp_init_attr_ex qia = {
		    .send_cq = b.cq,
		    .recv_cq = ibv_cq_ex_to_cq(rcq),
		    .cap = {.max_send_wr = 4,
			    .max_recv_wr = 4,
			    .max_send_sge = 1,
			    .max_recv_sge = 1},
		    .qp_type = IBV_QPT_RC,
		    .pd = b.pd,
		    .comp_mask = IBV_QP_INIT_ATTR_PD,
		};
		struct ibv_qp *qb = ibv_create_qp_ex(b.ctx, &qia);
		assert_non_null(qb);
		rc_connect(qa, &b.gid, qb->qp_num, ALL_REMOTE);
		rc_connect(qb, &a.gid, qa->qp_num, ALL_REMOTE);
		for (int i = 0; i < 2; i++) {
			struct ibv_sge rs = {
			    .addr = (uintptr_t)b.buf + 64 * i, .length = 64, .lkey = b.mr->lkey};
			struct ibv_recv_wr rw = {.wr_id = 100 + i, .sg_list = &rs, .num_sge = 1},
					   *rb;
			assert_int_equal(ibv_post_recv(qb, &rw, &rb), 0);
		}
		for (int i = 0; i < 2; i++) {
			struct ibv_sge sge = {
			    .addr = (uintptr_t)a.buf, .length = 16, .lkey = a.mr->lkey};
			struct ibv_send_wr wr = {.wr_id = i,
						 .sg_list = &sge,
						 .num_sge = 1,
						 .opcode = IBV_WR_SEND,
						 .send_flags = IBV_SEND_SIGNALED},
					   *bad;
			assert_int_equal(ibv_post_send(qa, &wr, &bad), 0);
			struct ibv_wc wc = poll_any(a.cq);
			/* the overrun moved b's QP to ERR before it acknowledged: a's
			 * retries go unanswered (11.4.2.1) */
			assert_int_equal(wc.status,
					 i == 1 && !ignore ? IBV_WC_RETRY_EXC_ERR : IBV_WC_SUCCESS);
		}
		struct ibv_wc wc[2];
		assert_int_equal(ibv_poll_cq(ibv_cq_ex_to_cq(rcq), 2, wc), 1);
		assert_int_equal(wc[0].wr_id, 100);
		struct ibv_qp_attr qat;
		struct ibv_qp_init_attr qit;
		assert_int_equal(ibv_query_qp(qb, &qat, IBV_QP_STATE, &qit), 0);
		assert_int_equal(qat.qp_state, ignore ? IBV_QPS_RTS : IBV_QPS_ERR);
		struct ibv_async_event ev;
		int fl = fcntl(b.ctx->async_fd, F_GETFL);
		fcntl(b.ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
		int got = ibv_get_async_event(b.ctx, &ev);
		if (ignore) {
			assert_int_equal(got, -1); /* no CQ_ERR, no QP_FATAL */
		} else {
			assert_int_equal(got, 0);
			ibv_ack_async_event(&ev);
			while (ibv_get_async_event(b.ctx, &ev) == 0)
				ibv_ack_async_event(&ev);
		}
		assert_int_equal(ibv_destroy_qp(qa), 0);
		assert_int_equal(ibv_destroy_qp(qb), 0);
		assert_int_equal(ibv_destroy_cq(ibv_cq_ex_to_cq(rcq)), 0);
		host_close(&a);
		host_close(&b);
	}
}

static void cq_ex_variants(void **state)
{
	struct host a;

	(void)state;
	host_open(&a, devs[0], MR_ALL);
	struct ibv_cq_init_attr_ex ca = {
	    .cqe = 8,
	    .wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_CVLAN | IBV_WC_EX_WITH_FLOW_TAG |
			IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
	    .comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
	    .flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN,
	};
	struct ibv_cq_ex *c = ibv_create_cq_ex(a.ctx, &ca);
	assert_non_null(c);
	assert_int_equal(ibv_destroy_cq(ibv_cq_ex_to_cq(c)), 0);
	ca.wc_flags |= IBV_WC_EX_WITH_TM_INFO; /* no tag matching here */
	assert_null(ibv_create_cq_ex(a.ctx, &ca));
	assert_int_equal(errno, EOPNOTSUPP);
	host_close(&a);
}

/* ------------------------------------------------------------------------ */
/* Raw packet QPs                                                             */

static void mac_of(const struct host *h, uint8_t mac[6])
{
	union ibv_gid g0;

	/* GID 0 is the MAC's link-local IPv6 address (modified EUI-64) */
	assert_int_equal(ibv_query_gid(h->ctx, 1, 0, &g0), 0);
	mac[0] = g0.raw[8] ^ 2;
	mac[1] = g0.raw[9];
	mac[2] = g0.raw[10];
	mac[3] = g0.raw[13];
	mac[4] = g0.raw[14];
	mac[5] = g0.raw[15];
}

static struct ibv_qp *raw_qp(struct host *h, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr_ex qa = {
	    .send_cq = h->cq,
	    .recv_cq = cq,
	    .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = IBV_QPT_RAW_PACKET,
	    .pd = h->pd,
	    .comp_mask = IBV_QP_INIT_ATTR_PD,
	};
	struct ibv_qp *qp = ibv_create_qp_ex(h->ctx, &qa);
	struct ibv_qp_attr at = {.qp_state = IBV_QPS_INIT, .port_num = 1};

	assert_non_null(qp);
	assert_int_equal(ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PORT), 0);
	at.qp_state = IBV_QPS_RTR;
	assert_int_equal(ibv_modify_qp(qp, &at, IBV_QP_STATE), 0);
	at.qp_state = IBV_QPS_RTS;
	assert_int_equal(ibv_modify_qp(qp, &at, IBV_QP_STATE), 0);
	return qp;
}

struct eth_rule {
	struct ibv_flow_attr attr;
	struct ibv_flow_spec_eth eth;
	struct ibv_flow_spec_action_tag tag;
};

static struct ibv_flow *eth_flow(struct ibv_qp *qp, enum ibv_flow_attr_type type, uint16_t prio,
				 uint16_t ether_type, uint16_t mask, uint32_t tag)
{
	struct eth_rule r;

	memset(&r, 0, sizeof(r));
	r.attr.type = type;
	r.attr.size = sizeof(r);
	r.attr.priority = prio;
	r.attr.num_of_specs = tag ? 2 : 1;
	r.attr.port = 1;
	r.eth.type = IBV_FLOW_SPEC_ETH;
	r.eth.size = sizeof(r.eth);
	r.eth.val.ether_type = htobe16(ether_type);
	r.eth.mask.ether_type = htobe16(mask);
	r.tag.type = IBV_FLOW_SPEC_ACTION_TAG;
	r.tag.size = sizeof(r.tag);
	r.tag.tag_id = tag;
	return ibv_create_flow(qp, &r.attr);
}

static void raw_post_recv(struct host *h, struct ibv_qp *qp, uint64_t id, uint32_t off)
{
	struct ibv_sge s = {.addr = (uintptr_t)h->buf + off, .length = 2048, .lkey = h->mr->lkey};
	struct ibv_recv_wr w = {.wr_id = id, .sg_list = &s, .num_sge = 1}, *bad;

	assert_int_equal(ibv_post_recv(qp, &w, &bad), 0);
}

/* A frame of len bytes at a.buf+off: to dst, from src, ether_type, then a pattern. */
static void make_frame(uint8_t *f, const uint8_t dst[6], const uint8_t src[6], uint16_t type,
		       uint32_t len, unsigned seed)
{
	memcpy(f, dst, 6);
	memcpy(f + 6, src, 6);
	f[12] = (uint8_t)(type >> 8);
	f[13] = (uint8_t)type;
	tu_fill(f + 14, len - 14, seed);
}

static void raw_send(struct host *h, struct ibv_qp *qp, uint32_t off, uint32_t len, uint64_t id)
{
	struct ibv_sge s = {.addr = (uintptr_t)h->buf + off, .length = len, .lkey = h->mr->lkey};
	struct ibv_send_wr w = {.wr_id = id,
				.sg_list = &s,
				.num_sge = 1,
				.opcode = IBV_WR_SEND,
				.send_flags = IBV_SEND_SIGNALED},
			   *bad;

	assert_int_equal(ibv_post_send(qp, &w, &bad), 0);
}

/* Poll cqx for one completion within 5 s (0), or nothing (-1). */
static int poll_ex(struct ibv_cq_ex *cq, double secs)
{
	struct ibv_poll_cq_attr pa = {0};
	double end = tu_now() + secs;

	while (tu_now() < end) {
		if (ibv_start_poll(cq, &pa) == 0)
			return 0;
	}
	return -1;
}

static void raw_packet_steering(void **state)
{
	struct host a, b;
	uint8_t amac[6], bmac[6];
	struct ibv_cq_ex *cqx;
	struct ibv_qp *ra, *rb, *rb2, *sniff;
	struct ibv_flow *f1, *f2, *fs, *fdrop;

	(void)state;
	host_open(&a, devs[0], MR_ALL);
	host_open(&b, devs[1], MR_ALL);
	mac_of(&a, amac);
	mac_of(&b, bmac);
	struct ibv_cq_init_attr_ex ca = {
	    .cqe = 64,
	    .wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_FLOW_TAG | IBV_WC_EX_WITH_CVLAN};
	cqx = ibv_create_cq_ex(b.ctx, &ca);
	assert_non_null(cqx);
	ra = raw_qp(&a, a.cq);
	rb = raw_qp(&b, ibv_cq_ex_to_cq(cqx));
	rb2 = raw_qp(&b, ibv_cq_ex_to_cq(cqx));
	sniff = raw_qp(&b, ibv_cq_ex_to_cq(cqx));
	/* two NORMAL rules for ether type 0x88B5: priority 1 beats priority 5 */
	f2 = eth_flow(rb2, IBV_FLOW_ATTR_NORMAL, 5, 0x88B5, 0xFFFF, 7);
	f1 = eth_flow(rb, IBV_FLOW_ATTR_NORMAL, 1, 0x88B5, 0xFFFF, 42);
	assert_non_null(f1);
	assert_non_null(f2);
	/* the sniffer takes copies of 0x88B0-0x88BF only: the ports' own ARP/ND
	 * traffic would otherwise come in between */
	fs = eth_flow(sniff, IBV_FLOW_ATTR_SNIFFER, 0, 0x88B0, 0xFFF0, 99);
	assert_non_null(fs);
	/* a rule on another QP type: refused */
	struct ibv_qp *rcq = rc_qp(&b, IBV_QP_EX_WITH_SEND);
	assert_null(eth_flow(rcq, IBV_FLOW_ATTR_NORMAL, 0, 0x88B5, 0xFFFF, 0));
	assert_int_equal(errno, EOPNOTSUPP);
	assert_int_equal(ibv_destroy_qp(rcq), 0);

	for (int i = 0; i < 4; i++) {
		raw_post_recv(&b, rb, 10 + i, 4096 * i);
		raw_post_recv(&b, rb2, 20 + i, 20000 + 2048 * i);
		raw_post_recv(&b, sniff, 30 + i, 32768 + 2048 * i);
	}
	/* one 0x88B5 frame of 600 bytes: to rb (tag 42), a copy to the sniffer (tag 99) */
	make_frame(a.buf, bmac, amac, 0x88B5, 600, 5);
	raw_send(&a, ra, 0, 600, 1);
	assert_int_equal(tu_poll_one(a.cq).wr_id, 1);
	bool got_rb = false, got_sniff = false;
	for (int k = 0; k < 2; k++) {
		assert_int_equal(poll_ex(cqx, 5), 0);
		assert_int_equal(cqx->status, IBV_WC_SUCCESS);
		assert_int_equal(ibv_wc_read_opcode(cqx), IBV_WC_RECV);
		assert_int_equal(ibv_wc_read_byte_len(cqx), 600);
		assert_int_equal(ibv_wc_read_cvlan(cqx), 0);
		if (cqx->wr_id == 10) {
			got_rb = true;
			assert_int_equal(ibv_wc_read_qp_num(cqx), rb->qp_num);
			assert_int_equal(ibv_wc_read_flow_tag(cqx), 42);
			assert_memory_equal(b.buf, a.buf, 600);
		} else {
			assert_int_equal(cqx->wr_id, 30);
			got_sniff = true;
			assert_int_equal(ibv_wc_read_flow_tag(cqx), 99);
			assert_memory_equal(b.buf + 32768, a.buf, 600);
		}
		ibv_end_poll(cqx);
	}
	assert_true(got_rb && got_sniff);

	/* another ether type: no NORMAL rule, only the sniffer sees it */
	make_frame(a.buf, bmac, amac, 0x88B6, 64, 6);
	raw_send(&a, ra, 0, 64, 2);
	tu_poll_one(a.cq);
	assert_int_equal(poll_ex(cqx, 5), 0);
	assert_int_equal(cqx->wr_id, 31);
	ibv_end_poll(cqx);

	/* the priority-1 rule gone, the priority-5 one takes the next frame */
	assert_int_equal(ibv_destroy_flow(f1), 0);
	make_frame(a.buf, bmac, amac, 0x88B5, 100, 7);
	raw_send(&a, ra, 0, 100, 3);
	tu_poll_one(a.cq);
	bool got_rb2 = false;
	for (int k = 0; k < 2; k++) {
		assert_int_equal(poll_ex(cqx, 5), 0);
		if (cqx->wr_id == 20) {
			got_rb2 = true;
			assert_int_equal(ibv_wc_read_flow_tag(cqx), 7);
			assert_memory_equal(b.buf + 20000, a.buf, 100);
		}
		ibv_end_poll(cqx);
	}
	assert_true(got_rb2);

	/* a drop rule of better priority: rb2 gets nothing, the sniffer still a copy */
	struct {
		struct ibv_flow_attr attr;
		struct ibv_flow_spec_eth eth;
		struct ibv_flow_spec_action_drop drop;
	} dr;
	memset(&dr, 0, sizeof(dr));
	dr.attr.size = sizeof(dr);
	dr.attr.num_of_specs = 2;
	dr.attr.port = 1;
	dr.eth.type = IBV_FLOW_SPEC_ETH;
	dr.eth.size = sizeof(dr.eth);
	dr.eth.val.ether_type = htobe16(0x88B5);
	dr.eth.mask.ether_type = 0xFFFF;
	dr.drop.type = IBV_FLOW_SPEC_ACTION_DROP;
	dr.drop.size = sizeof(dr.drop);
	fdrop = ibv_create_flow(rb, &dr.attr);
	assert_non_null(fdrop);
	raw_send(&a, ra, 0, 100, 4);
	tu_poll_one(a.cq);
	assert_int_equal(poll_ex(cqx, 5), 0);
	assert_int_equal(cqx->wr_id, 33); /* the sniffer's, nothing for rb2 */
	ibv_end_poll(cqx);
	assert_int_equal(poll_ex(cqx, 0.3), -1);

	/* a frame shorter than an Ethernet header: LOC_LEN_ERR, the QP to SQE */
	raw_send(&a, ra, 0, 10, 5);
	struct ibv_wc wc = poll_any(a.cq);
	assert_int_equal(wc.status, IBV_WC_LOC_LEN_ERR);
	/* IBV_SEND_IP_CSUM: no checksum offload on this device */
	struct ibv_sge s = {.addr = (uintptr_t)a.buf, .length = 64, .lkey = a.mr->lkey};
	struct ibv_send_wr w = {.sg_list = &s,
				.num_sge = 1,
				.opcode = IBV_WR_SEND,
				.send_flags = IBV_SEND_IP_CSUM},
			   *bad;
	assert_int_equal(ibv_post_send(ra, &w, &bad), EINVAL);

	/* a QP with rules cannot go before them */
	assert_int_equal(ibv_destroy_qp(rb), EBUSY);
	assert_int_equal(ibv_destroy_flow(fdrop), 0);
	assert_int_equal(ibv_destroy_flow(f2), 0);
	assert_int_equal(ibv_destroy_flow(fs), 0);
	assert_int_equal(ibv_destroy_qp(rb), 0);
	assert_int_equal(ibv_destroy_qp(rb2), 0);
	assert_int_equal(ibv_destroy_qp(sniff), 0);
	assert_int_equal(ibv_destroy_qp(ra), 0);
	assert_int_equal(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
	host_close(&a);
	host_close(&b);
}

static void set_cap_net_raw(bool on)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2];

	assert_int_equal(syscall(SYS_capget, &h, d), 0);
	if (on)
		d[0].effective |= 1u << CAP_NET_RAW;
	else
		d[0].effective &= ~(1u << CAP_NET_RAW);
	assert_int_equal(syscall(SYS_capset, &h, d), 0);
}

/* Without CAP_NET_RAW in the effective set (dropped, then raised again from
 * the permitted set): EPERM for a raw packet QP and for a steering rule, as
 * the kernel's uverbs answers. */
static void raw_packet_needs_cap_net_raw(void **state)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2];
	struct host a;
	struct ibv_qp *qp;

	(void)state;
	assert_int_equal(syscall(SYS_capget, &h, d), 0);
	if (!(d[0].permitted & (1u << CAP_NET_RAW)))
		skip(); /* cannot show the difference without the capability */
	host_open(&a, devs[0], MR_ALL);
	qp = raw_qp(&a, a.cq);
	set_cap_net_raw(false);
	struct ibv_qp_init_attr_ex qa = {.send_cq = a.cq,
					 .recv_cq = a.cq,
					 .cap = {.max_send_wr = 1, .max_recv_wr = 1},
					 .qp_type = IBV_QPT_RAW_PACKET,
					 .pd = a.pd,
					 .comp_mask = IBV_QP_INIT_ATTR_PD};
	errno = 0;
	struct ibv_qp *q2 = ibv_create_qp_ex(a.ctx, &qa);
	int e1 = errno;
	struct ibv_flow *f = eth_flow(qp, IBV_FLOW_ATTR_NORMAL, 0, 0x88B5, 0xFFFF, 0);
	int e2 = errno;
	set_cap_net_raw(true);
	assert_null(q2);
	assert_int_equal(e1, EPERM);
	assert_null(f);
	assert_int_equal(e2, EPERM);
	f = eth_flow(qp, IBV_FLOW_ATTR_NORMAL, 0, 0x88B5, 0xFFFF, 0);
	assert_non_null(f);
	assert_int_equal(ibv_destroy_flow(f), 0);
	assert_int_equal(ibv_destroy_qp(qp), 0);
	host_close(&a);
}

/* The next async event of ctx within about a second, or -1. */
static int next_async_event(struct ibv_context *ctx, struct ibv_async_event *ev)
{
	int fl = fcntl(ctx->async_fd, F_GETFL);

	fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	for (int i = 0; i < 100; i++) {
		if (ibv_get_async_event(ctx, ev) == 0) {
			fcntl(ctx->async_fd, F_SETFL, fl);
			return 0;
		}
		usleep(10000);
	}
	fcntl(ctx->async_fd, F_SETFL, fl);
	return -1;
}

/*
 * IBA ch. 11 (Last WQE Reached): a QP attached to an SRQ that enters the Error state raises
 * IBV_EVENT_QP_LAST_WQE_REACHED once its last SRQ WQE has completed; a QP
 * without an SRQ does not. Storage targets wait for it before destroying
 * the QP, so that no SRQ WQE is consumed by a QP that is gone.
 */
static void last_wqe_reached_on_srq_qp(void **state)
{
	struct host a;
	struct ibv_async_event ev;

	(void)state;
	host_open(&a, devs[0], IBV_ACCESS_LOCAL_WRITE);
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 8, .max_sge = 1}};
	struct ibv_srq *srq = ibv_create_srq(a.pd, &sa);
	assert_non_null(srq);
	struct ibv_qp_init_attr qa = {.send_cq = a.cq,
				      .recv_cq = a.cq,
				      .srq = srq,
				      .cap = {.max_send_wr = 4, .max_send_sge = 1},
				      .qp_type = IBV_QPT_RC};
	struct ibv_qp *on_srq = ibv_create_qp(a.pd, &qa);
	assert_non_null(on_srq);
	qa.srq = NULL;
	qa.cap.max_recv_wr = 4;
	qa.cap.max_recv_sge = 1;
	struct ibv_qp *plain = ibv_create_qp(a.pd, &qa);
	assert_non_null(plain);
	struct ibv_qp_attr init = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	assert_int_equal(ibv_modify_qp(on_srq, &init, mask), 0);
	assert_int_equal(ibv_modify_qp(plain, &init, mask), 0);

	struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
	assert_int_equal(ibv_modify_qp(plain, &err, IBV_QP_STATE), 0);
	assert_int_equal(next_async_event(a.ctx, &ev), -1); /* no SRQ, no event */

	assert_int_equal(ibv_modify_qp(on_srq, &err, IBV_QP_STATE), 0);
	assert_int_equal(next_async_event(a.ctx, &ev), 0);
	assert_int_equal(ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
	assert_ptr_equal(ev.element.qp, on_srq);
	ibv_ack_async_event(&ev);
	/* once: a second move to ERR raises nothing */
	assert_int_equal(ibv_modify_qp(on_srq, &err, IBV_QP_STATE), 0);
	assert_int_equal(next_async_event(a.ctx, &ev), -1);

	assert_int_equal(ibv_destroy_qp(on_srq), 0);
	assert_int_equal(ibv_destroy_qp(plain), 0);
	assert_int_equal(ibv_destroy_srq(srq), 0);
	host_close(&a);
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
	    cmocka_unit_test(parent_domain_allocators),
	    cmocka_unit_test(cq_ignore_overrun),
	    cmocka_unit_test(cq_ex_variants),
	    cmocka_unit_test(raw_packet_steering),
	    cmocka_unit_test(raw_packet_needs_cap_net_raw),
	    cmocka_unit_test(last_wqe_reached_on_srq_qp),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	ibv_free_device_list(devs);
	return rc;
}
