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
 *    priority, tags, drop and sniffer rules, EPERM without CAP_NET_RAW;
 *  - memory windows: type 2 bound through the send queue (ibv_post_send,
 *    ibv_wr_bind_mw), type 1 through ibv_bind_mw, accesses through them,
 *    LOCAL_INV, the peer's SEND with Invalidate and what it may not free.
 * Every byte is checked.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
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
	tu_rc_to_rts(qa, &b.gid, TU_GID_INDEX, qb->qp_num, ALL_REMOTE);
	tu_rc_to_rts(qb, &a.gid, TU_GID_INDEX, qa->qp_num, ALL_REMOTE);
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
	wc = tu_poll_any(a.cq);
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
	tu_rc_to_rts(qa, &b.gid, TU_GID_INDEX, qb->qp_num, ALL_REMOTE);
	tu_rc_to_rts(qb, &a.gid, TU_GID_INDEX, qa->qp_num, IBV_ACCESS_REMOTE_READ);
	x = ibv_qp_to_qp_ex(qa);
	ibv_wr_start(x);
	x->wr_id = 9;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(x, b.mr->rkey, (uintptr_t)b.buf + 8, &v);
	assert_int_equal(ibv_wr_complete(x), 0);
	wc = tu_poll_any(a.cq);
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
	tu_rc_to_rts(qa, &b.gid, TU_GID_INDEX, qb->qp_num, ALL_REMOTE);
	tu_rc_to_rts(qb, &a.gid, TU_GID_INDEX, qa->qp_num, ALL_REMOTE);
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
		tu_rc_to_rts(qa, &b.gid, TU_GID_INDEX, qb->qp_num, ALL_REMOTE);
		tu_rc_to_rts(qb, &a.gid, TU_GID_INDEX, qa->qp_num, ALL_REMOTE);
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
			struct ibv_wc wc = tu_poll_any(a.cq);
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
	struct ibv_wc wc = tu_poll_any(a.cq);
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

/*
 * The same for XRC (issue 15.4): an XRC_RECV QP takes its WQEs from the XRC
 * SRQs its requests name, so entering ERR it raises
 * IBV_EVENT_QP_LAST_WQE_REACHED, once, for its handle; an XRC_SEND QP (no
 * receive side) raises nothing.
 */
static void last_wqe_reached_on_xrc_target(void **state)
{
	struct host a;
	struct ibv_async_event ev;

	(void)state;
	host_open(&a, devs[0], IBV_ACCESS_LOCAL_WRITE);
	struct ibv_xrcd_init_attr xa = {.comp_mask =
					    IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
					.fd = -1,
					.oflags = O_CREAT};
	struct ibv_xrcd *xrcd = ibv_open_xrcd(a.ctx, &xa);
	assert_non_null(xrcd);
	struct ibv_srq_init_attr_ex sa = {.attr = {.max_wr = 8, .max_sge = 1},
					  .comp_mask =
					      IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
					      IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ,
					  .srq_type = IBV_SRQT_XRC,
					  .pd = a.pd,
					  .xrcd = xrcd,
					  .cq = a.cq};
	struct ibv_srq *srq = ibv_create_srq_ex(a.ctx, &sa);
	assert_non_null(srq);
	struct ibv_qp_init_attr_ex ta = {
	    .qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = xrcd};
	struct ibv_qp *tgt = ibv_create_qp_ex(a.ctx, &ta);
	assert_non_null(tgt);
	struct ibv_qp_init_attr_ex ia = {.qp_type = IBV_QPT_XRC_SEND,
					 .comp_mask = IBV_QP_INIT_ATTR_PD,
					 .pd = a.pd,
					 .send_cq = a.cq,
					 .cap = {.max_send_wr = 4, .max_send_sge = 1}};
	struct ibv_qp *ini = ibv_create_qp_ex(a.ctx, &ia);
	assert_non_null(ini);
	struct ibv_qp_attr init = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	assert_int_equal(ibv_modify_qp(tgt, &init, mask), 0);
	assert_int_equal(ibv_modify_qp(ini, &init, mask), 0);

	struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
	assert_int_equal(ibv_modify_qp(ini, &err, IBV_QP_STATE), 0);
	assert_int_equal(next_async_event(a.ctx, &ev), -1); /* an initiator: nothing */

	assert_int_equal(ibv_modify_qp(tgt, &err, IBV_QP_STATE), 0);
	assert_int_equal(next_async_event(a.ctx, &ev), 0);
	assert_int_equal(ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
	assert_ptr_equal(ev.element.qp, tgt);
	ibv_ack_async_event(&ev);
	assert_int_equal(ibv_modify_qp(tgt, &err, IBV_QP_STATE), 0);
	assert_int_equal(next_async_event(a.ctx, &ev), -1); /* once */

	assert_int_equal(ibv_destroy_qp(ini), 0);
	assert_int_equal(ibv_destroy_qp(tgt), 0);
	assert_int_equal(ibv_destroy_srq(srq), 0);
	assert_int_equal(ibv_close_xrcd(xrcd), 0);
	host_close(&a);
}

/*
 * Destroying an object with events (ibv_get_async_event(3), ibv_get_cq_event(3)):
 * "ibv_destroy_*() will wait for all async events of that object to be
 * acknowledged", and for every completion event handed out to be acknowledged
 * with ibv_ack_cq_events(); events never handed out are dropped with it.
 */
struct destroy_call {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	int rc;
	atomic_bool done;
};

static void *destroy_in_thread(void *arg)
{
	struct destroy_call *d = arg;

	d->rc = d->qp ? ibv_destroy_qp(d->qp) : ibv_destroy_cq(d->cq);
	atomic_store(&d->done, true);
	return NULL;
}

/* An RC QP on srq in INIT moved to ERR: queues IBV_EVENT_QP_LAST_WQE_REACHED. */
static struct ibv_qp *qp_raising_last_wqe(struct host *h, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr qa = {.send_cq = h->cq,
				      .recv_cq = h->cq,
				      .srq = srq,
				      .cap = {.max_send_wr = 4, .max_send_sge = 1},
				      .qp_type = IBV_QPT_RC};
	struct ibv_qp *qp = ibv_create_qp(h->pd, &qa);
	assert_non_null(qp);
	struct ibv_qp_attr init = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	assert_int_equal(ibv_modify_qp(qp, &init, mask), 0);
	struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
	assert_int_equal(ibv_modify_qp(qp, &err, IBV_QP_STATE), 0);
	return qp;
}

static bool fd_readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, 0) == 1;
}

static void destroy_qp_waits_for_ack(void **state)
{
	struct host a;
	struct ibv_async_event ev;
	pthread_t t;

	(void)state;
	host_open(&a, devs[0], IBV_ACCESS_LOCAL_WRITE);
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 8, .max_sge = 1}};
	struct ibv_srq *srq = ibv_create_srq(a.pd, &sa);
	assert_non_null(srq);

	/* handed out, not acknowledged: the destroy waits for the ack */
	struct destroy_call d = {.qp = qp_raising_last_wqe(&a, srq)};
	assert_int_equal(next_async_event(a.ctx, &ev), 0);
	assert_ptr_equal(ev.element.qp, d.qp);
	assert_int_equal(pthread_create(&t, NULL, destroy_in_thread, &d), 0);
	usleep(200000);
	assert_false(atomic_load(&d.done)); /* a slow machine can only hide a failure */
	ibv_ack_async_event(&ev);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(d.rc, 0);

	/* queued, never handed out: dropped with the QP, async_fd not readable */
	struct ibv_qp *qp = qp_raising_last_wqe(&a, srq);
	assert_true(fd_readable(a.ctx->async_fd));
	assert_int_equal(ibv_destroy_qp(qp), 0);
	assert_false(fd_readable(a.ctx->async_fd));
	assert_int_equal(next_async_event(a.ctx, &ev), -1);

	assert_int_equal(ibv_destroy_srq(srq), 0);
	host_close(&a);
}

static void destroy_cq_waits_for_ack(void **state)
{
	struct host a;
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	pthread_t t;

	(void)state;
	host_open(&a, devs[0], IBV_ACCESS_LOCAL_WRITE);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(a.ctx);
	assert_non_null(ch);
	struct destroy_call d = {.cq = ibv_create_cq(a.ctx, 8, NULL, ch, 0)};
	assert_non_null(d.cq);
	struct ibv_qp_init_attr qa = {
	    .send_cq = d.cq,
	    .recv_cq = d.cq,
	    .cap = {.max_send_wr = 1, .max_send_sge = 1, .max_recv_wr = 1, .max_recv_sge = 1},
	    .qp_type = IBV_QPT_RC};
	struct ibv_qp *qp = ibv_create_qp(a.pd, &qa);
	assert_non_null(qp);
	struct ibv_qp_attr init = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	assert_int_equal(ibv_modify_qp(qp, &init, mask), 0);
	struct ibv_sge sge = {.addr = (uintptr_t)a.buf, .length = 8, .lkey = a.mr->lkey};
	struct ibv_recv_wr rwr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1}, *bad;
	assert_int_equal(ibv_post_recv(qp, &rwr, &bad), 0);
	assert_int_equal(ibv_req_notify_cq(d.cq, 0), 0);
	struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
	assert_int_equal(ibv_modify_qp(qp, &err, IBV_QP_STATE), 0); /* a flush completion */
	assert_int_equal(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
	assert_ptr_equal(ev_cq, d.cq);
	struct ibv_wc wc;
	assert_int_equal(ibv_poll_cq(d.cq, 1, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_WR_FLUSH_ERR);
	assert_int_equal(ibv_destroy_qp(qp), 0);

	assert_int_equal(pthread_create(&t, NULL, destroy_in_thread, &d), 0);
	usleep(200000);
	assert_false(atomic_load(&d.done));
	ibv_ack_cq_events(ev_cq, 1);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(d.rc, 0);
	assert_int_equal(ibv_destroy_comp_channel(ch), 0);
	host_close(&a);
}

/* ------------------------------------------------------------------------ */
/* Memory windows                                                             */

#define MW_MR (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND)
#define MW_RW (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

/* A client a and a server b, RC QPs joined; b's region is MW_MR only (no
 * remote right of its own: the windows grant them, as in rdma-core's tests). */
struct mw_pair {
	struct host a, b;
	struct ibv_qp *qa, *qb;
};

static void mw_qps(struct mw_pair *p, struct ibv_qp **qa, struct ibv_qp **qb, uint64_t b_ops)
{
	*qa = rc_qp(&p->a, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_INV);
	*qb = rc_qp(&p->b, b_ops);
	tu_rc_to_rts(*qa, &p->b.gid, TU_GID_INDEX, (*qb)->qp_num, ALL_REMOTE);
	tu_rc_to_rts(*qb, &p->a.gid, TU_GID_INDEX, (*qa)->qp_num, ALL_REMOTE);
}

static void mw_pair_open(struct mw_pair *p, uint64_t b_ops)
{
	host_open(&p->a, devs[0], MR_ALL);
	host_open(&p->b, devs[1], MW_MR);
	mw_qps(p, &p->qa, &p->qb, b_ops);
}

static void mw_qps_close(struct ibv_qp *qa, struct ibv_qp *qb)
{
	assert_int_equal(ibv_destroy_qp(qa), 0);
	assert_int_equal(ibv_destroy_qp(qb), 0);
}

static void mw_pair_close(struct mw_pair *p)
{
	mw_qps_close(p->qa, p->qb);
	host_close(&p->a);
	host_close(&p->b);
}

/* ibv_post_send IBV_WR_BIND_MW of window mw to [addr, addr+len) of mr. */
static int post_bind(struct ibv_qp *qp, struct ibv_mw *mw, uint32_t rkey, struct ibv_mr *mr,
		     uint64_t addr, uint64_t len, unsigned access)
{
	struct ibv_send_wr wr = {.wr_id = 9,
				 .opcode = IBV_WR_BIND_MW,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){
	    .mr = mr, .addr = addr, .length = len, .mw_access_flags = access};
	return ibv_post_send(qp, &wr, &bad);
}

/* A bind's completion on cq: wr_id 9, IBV_WC_BIND_MW when it succeeded. */
static enum ibv_wc_status bind_status(struct ibv_cq *cq)
{
	struct ibv_wc wc = tu_poll_any(cq);

	assert_int_equal(wc.wr_id, 9);
	if (wc.status == IBV_WC_SUCCESS)
		assert_int_equal(wc.opcode, IBV_WC_BIND_MW);
	return wc.status;
}

/* A window of type on b's PD. */
static struct ibv_mw *mw_alloc(struct mw_pair *p, enum ibv_mw_type type)
{
	struct ibv_mw *mw = ibv_alloc_mw(p->b.pd, type);

	assert_non_null(mw);
	assert_int_equal(mw->type, type);
	return mw;
}

/* Type 2 window mw bound through qb to [addr, addr+len) of b's region for
 * remote read and write, the bind completed; its new key. */
static uint32_t mw_bind_type2(struct mw_pair *p, struct ibv_mw *mw, uint64_t addr, uint64_t len)
{
	uint32_t rkey = ibv_inc_rkey(mw->rkey);

	assert_int_equal(post_bind(p->qb, mw, rkey, p->b.mr, addr, len, MW_RW), 0);
	assert_int_equal(bind_status(p->b.cq), IBV_WC_SUCCESS);
	return rkey;
}

/* One WRITE or READ of len bytes of a's buffer at off through rkey; its status. */
static enum ibv_wc_status mw_rdma(struct host *a, struct ibv_qp *qp, enum ibv_wr_opcode op,
				  uint32_t off, uint32_t len, uint64_t raddr, uint32_t rkey)
{
	return tu_rdma(qp, a->cq, a->buf + off, a->mr->lkey, op, len, raddr, rkey);
}

/* SEND with Invalidate of rkey from qa to qb: the sender's status, and
 * b's receive completion in *recv. */
static enum ibv_wc_status mw_send_inv(struct mw_pair *p, struct ibv_qp *qa, struct ibv_qp *qb,
				      uint32_t rkey, struct ibv_wc *recv)
{
	struct ibv_sge rs = {.addr = (uintptr_t)p->b.buf, .length = 64, .lkey = p->b.mr->lkey};
	struct ibv_recv_wr rwr = {.wr_id = 0x55, .sg_list = &rs, .num_sge = 1}, *rbad;
	struct ibv_sge ss = {.addr = (uintptr_t)p->a.buf, .length = 16, .lkey = p->a.mr->lkey};
	struct ibv_send_wr swr = {.wr_id = 0x66,
				  .sg_list = &ss,
				  .num_sge = 1,
				  .opcode = IBV_WR_SEND_WITH_INV,
				  .send_flags = IBV_SEND_SIGNALED,
				  .invalidate_rkey = rkey},
			   *sbad;
	struct ibv_wc wc;

	assert_int_equal(ibv_post_recv(qb, &rwr, &rbad), 0);
	assert_int_equal(ibv_post_send(qa, &swr, &sbad), 0);
	wc = tu_poll_any(p->a.cq);
	assert_int_equal(wc.wr_id, 0x66);
	*recv = tu_poll_any(p->b.cq);
	assert_int_equal(recv->wr_id, 0x55);
	return wc.status;
}

/* ibv_query_device(3): max_mw and the window capability bits. */
static void mw_device_caps(void **state)
{
	struct ibv_context *ctx = ibv_open_device(devs[0]);
	struct ibv_device_attr_ex ax;
	struct ibv_device_attr a;

	(void)state;
	assert_non_null(ctx);
	assert_int_equal(ibv_query_device(ctx, &a), 0);
	assert_true(a.max_mw > 0);
	assert_true(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
	assert_true(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
	assert_false(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A);
	assert_int_equal(ibv_query_device_ex(ctx, NULL, &ax), 0);
	assert_true(ax.device_cap_flags_ex & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
	assert_int_equal(ax.orig_attr.max_mw, a.max_mw);
	assert_int_equal(ibv_close_device(ctx), 0);
}

/*
 * Type 2 through ibv_post_send: the bind completes IBV_WC_BIND_MW; the
 * peer WRITEs and READs through the window; the peer's SEND with
 * Invalidate frees it (IBV_WC_WITH_INV, invalidated_rkey), and the peer's
 * next access is a remote access error.
 */
static void mw_type2_remote_invalidate(void **state)
{
	struct mw_pair p;
	struct ibv_mw *mw;
	struct ibv_wc wc;
	uint32_t rkey;
	uint64_t base;

	(void)state;
	mw_pair_open(&p, IBV_QP_EX_WITH_SEND);
	mw = mw_alloc(&p, IBV_MW_TYPE_2);
	base = (uintptr_t)p.b.buf + 4096;
	rkey = mw_bind_type2(&p, mw, base, 4096);
	/* the region cannot go while a window is bound to it */
	assert_int_equal(ibv_dereg_mr(p.b.mr), EBUSY);

	tu_fill(p.a.buf, 256, 3);
	assert_int_equal(mw_rdma(&p.a, p.qa, IBV_WR_RDMA_WRITE, 0, 256, base + 100, rkey),
			 IBV_WC_SUCCESS);
	assert_memory_equal(p.b.buf + 4096 + 100, p.a.buf, 256);
	assert_int_equal(mw_rdma(&p.a, p.qa, IBV_WR_RDMA_READ, 1024, 256, base + 100, rkey),
			 IBV_WC_SUCCESS);
	assert_memory_equal(p.a.buf + 1024, p.a.buf, 256);

	assert_int_equal(mw_send_inv(&p, p.qa, p.qb, rkey, &wc), IBV_WC_SUCCESS);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.opcode, IBV_WC_RECV);
	assert_true(wc.wc_flags & IBV_WC_WITH_INV);
	assert_int_equal(wc.invalidated_rkey, rkey);
	assert_int_equal(mw_rdma(&p.a, p.qa, IBV_WR_RDMA_WRITE, 0, 8, base, rkey),
			 IBV_WC_REM_ACCESS_ERR);
	assert_int_equal(ibv_dealloc_mw(mw), 0);
	mw_pair_close(&p);
}

/*
 * Type 2 through ibv_wr_bind_mw, zero-based: the peer addresses the window
 * from 0; the owner's IBV_WR_LOCAL_INV (ibv_wr_local_inv) frees it.
 */
static void mw_type2_wr_bind_local_inv(void **state)
{
	struct mw_pair p;
	struct ibv_qp_ex *x;
	struct ibv_mw *mw;
	struct ibv_wc wc;
	uint32_t rkey;

	(void)state;
	mw_pair_open(&p, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV);
	mw = mw_alloc(&p, IBV_MW_TYPE_2);
	rkey = ibv_inc_rkey(mw->rkey);
	x = ibv_qp_to_qp_ex(p.qb);
	struct ibv_mw_bind_info bi = {.mr = p.b.mr,
				      .addr = (uintptr_t)p.b.buf + 8192,
				      .length = 512,
				      .mw_access_flags = MW_RW | IBV_ACCESS_ZERO_BASED};
	ibv_wr_start(x);
	x->wr_id = 9;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(x, mw, rkey, &bi);
	assert_int_equal(ibv_wr_complete(x), 0);
	assert_int_equal(bind_status(p.b.cq), IBV_WC_SUCCESS);

	tu_fill(p.a.buf, 64, 5);
	assert_int_equal(mw_rdma(&p.a, p.qa, IBV_WR_RDMA_WRITE, 0, 64, 0, rkey), IBV_WC_SUCCESS);
	assert_memory_equal(p.b.buf + 8192, p.a.buf, 64);
	assert_int_equal(mw_rdma(&p.a, p.qa, IBV_WR_RDMA_WRITE, 0, 64, 448, rkey), IBV_WC_SUCCESS);
	assert_memory_equal(p.b.buf + 8192 + 448, p.a.buf, 64);

	ibv_wr_start(x);
	x->wr_id = 10;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_local_inv(x, rkey);
	assert_int_equal(ibv_wr_complete(x), 0);
	wc = tu_poll_any(p.b.cq);
	assert_int_equal(wc.wr_id, 10);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.opcode, IBV_WC_LOCAL_INV);
	assert_int_equal(mw_rdma(&p.a, p.qa, IBV_WR_RDMA_READ, 0, 8, 0, rkey),
			 IBV_WC_REM_ACCESS_ERR);
	assert_int_equal(ibv_dealloc_mw(mw), 0);
	mw_pair_close(&p);
}

/*
 * Type 1 through ibv_bind_mw(3): each bind moves the window's R_Key to the
 * next tag (the old one stops working), any QP of the PD may use it, and a
 * bind of length 0 unbinds it.
 */
static void mw_type1_bind_unbind(void **state)
{
	struct mw_pair p;
	struct ibv_qp *qa2, *qb2;
	struct ibv_mw *mw;
	uint32_t k0, k1, k2;

	(void)state;
	mw_pair_open(&p, IBV_QP_EX_WITH_SEND);
	mw_qps(&p, &qa2, &qb2, IBV_QP_EX_WITH_SEND);
	mw = mw_alloc(&p, IBV_MW_TYPE_1);
	k0 = mw->rkey;
	struct ibv_mw_bind bind = {.wr_id = 9,
				   .send_flags = IBV_SEND_SIGNALED,
				   .bind_info = {.mr = p.b.mr,
						 .addr = (uintptr_t)p.b.buf,
						 .length = 1024,
						 .mw_access_flags = MW_RW}};
	assert_int_equal(ibv_bind_mw(p.qb, mw, &bind), 0);
	k1 = mw->rkey;
	assert_int_equal(k1, ibv_inc_rkey(k0));
	assert_int_equal(bind_status(p.b.cq), IBV_WC_SUCCESS);
	tu_fill(p.a.buf, 32, 7);
	assert_int_equal(mw_rdma(&p.a, p.qa, IBV_WR_RDMA_WRITE, 0, 32, (uintptr_t)p.b.buf + 32, k1),
			 IBV_WC_SUCCESS);
	assert_memory_equal(p.b.buf + 32, p.a.buf, 32);
	/* another QP of the PD: the window is not tied to the QP it was bound through */
	assert_int_equal(mw_rdma(&p.a, qa2, IBV_WR_RDMA_READ, 64, 32, (uintptr_t)p.b.buf + 32, k1),
			 IBV_WC_SUCCESS);
	assert_memory_equal(p.a.buf + 64, p.a.buf, 32);
	/* a type 2 bind is refused for a type 1 window, and ibv_bind_mw for type 2 */
	assert_int_equal(
	    post_bind(p.qb, mw, ibv_inc_rkey(k1), p.b.mr, (uintptr_t)p.b.buf, 64, MW_RW), EINVAL);
	/* rebind: the old key stops, the new one works */
	bind.bind_info.addr = (uintptr_t)p.b.buf + 2048;
	assert_int_equal(ibv_bind_mw(p.qb, mw, &bind), 0);
	k2 = mw->rkey;
	assert_int_equal(k2, ibv_inc_rkey(k1));
	assert_int_equal(bind_status(p.b.cq), IBV_WC_SUCCESS);
	assert_int_equal(
	    mw_rdma(&p.a, p.qa, IBV_WR_RDMA_WRITE, 0, 32, (uintptr_t)p.b.buf + 2048, k2),
	    IBV_WC_SUCCESS);
	assert_int_equal(
	    mw_rdma(&p.a, qa2, IBV_WR_RDMA_WRITE, 0, 32, (uintptr_t)p.b.buf + 2048, k1),
	    IBV_WC_REM_ACCESS_ERR);
	/* unbind: length 0 */
	bind.bind_info = (struct ibv_mw_bind_info){.mr = p.b.mr};
	assert_int_equal(ibv_bind_mw(p.qb, mw, &bind), 0);
	assert_int_equal(bind_status(p.b.cq), IBV_WC_SUCCESS);
	assert_int_equal(
	    mw_rdma(&p.a, p.qa, IBV_WR_RDMA_WRITE, 0, 32, (uintptr_t)p.b.buf + 2048, k2),
	    IBV_WC_REM_ACCESS_ERR);
	assert_int_equal(ibv_dealloc_mw(mw), 0);
	mw_qps_close(qa2, qb2);
	mw_pair_close(&p);
}

/*
 * A peer's SEND with Invalidate may free only a type 2 window bound to the
 * QP it arrives on (IBA 10.6.7): another QP's window, a type 1 window and a
 * region are refused with an invalid request NAK (sender
 * IBV_WC_REM_INV_REQ_ERR), and the window keeps working; a type 2 window
 * answers no other QP than its own (remote access error).
 */
static void mw_remote_invalidate_refused(void **state)
{
	struct mw_pair p;
	struct ibv_qp *qa2, *qb2, *qa3, *qb3;
	struct ibv_mw *t2, *t1;
	struct ibv_wc wc;
	uint32_t k2;

	(void)state;
	mw_pair_open(&p, IBV_QP_EX_WITH_SEND);
	mw_qps(&p, &qa2, &qb2, IBV_QP_EX_WITH_SEND);
	mw_qps(&p, &qa3, &qb3, IBV_QP_EX_WITH_SEND);
	t2 = mw_alloc(&p, IBV_MW_TYPE_2);
	t1 = mw_alloc(&p, IBV_MW_TYPE_1);
	k2 = mw_bind_type2(&p, t2, (uintptr_t)p.b.buf, 4096);
	struct ibv_mw_bind bind = {
	    .wr_id = 9,
	    .send_flags = IBV_SEND_SIGNALED,
	    .bind_info = {
		.mr = p.b.mr, .addr = (uintptr_t)p.b.buf, .length = 64, .mw_access_flags = MW_RW}};
	assert_int_equal(ibv_bind_mw(p.qb, t1, &bind), 0);
	assert_int_equal(bind_status(p.b.cq), IBV_WC_SUCCESS);

	/* through another QP: not the type 2 window's QP */
	assert_int_equal(mw_rdma(&p.a, qa2, IBV_WR_RDMA_WRITE, 0, 8, (uintptr_t)p.b.buf, k2),
			 IBV_WC_REM_ACCESS_ERR);
	assert_int_equal(mw_send_inv(&p, qa3, qb3, k2, &wc), IBV_WC_REM_INV_REQ_ERR);
	assert_int_not_equal(wc.status, IBV_WC_SUCCESS);
	/* still bound: its own QP reaches it */
	assert_int_equal(mw_rdma(&p.a, p.qa, IBV_WR_RDMA_WRITE, 0, 8, (uintptr_t)p.b.buf, k2),
			 IBV_WC_SUCCESS);
	/* a type 1 window, on the QP it was bound through */
	assert_int_equal(mw_send_inv(&p, p.qa, p.qb, t1->rkey, &wc), IBV_WC_REM_INV_REQ_ERR);
	assert_int_not_equal(wc.status, IBV_WC_SUCCESS);

	assert_int_equal(ibv_dealloc_mw(t1), 0);
	assert_int_equal(ibv_dealloc_mw(t2), 0);
	mw_qps_close(qa2, qb2);
	mw_qps_close(qa3, qb3);
	mw_pair_close(&p);
}

/*
 * Binds that fail: at the post (no window, a key of another window, a type
 * 1 window through IBV_WR_BIND_MW, ibv_bind_mw on a type 2 window), or in
 * the queue with IBV_WC_MW_BIND_ERR (a QP of another PD; a region without
 * MW_BIND; remote write on a region without local write); and
 * ibv_dealloc_mw of a bound window, after which it names nothing.
 */
static void mw_bind_errors_and_dealloc(void **state)
{
	struct mw_pair p;
	struct ibv_qp *qa2, *qb2;
	struct ibv_mw *mw, *other;
	struct ibv_mr *no_bind, *no_write;
	struct ibv_pd *pd2;
	uint32_t k;

	(void)state;
	mw_pair_open(&p, IBV_QP_EX_WITH_SEND);
	mw = mw_alloc(&p, IBV_MW_TYPE_2);
	other = mw_alloc(&p, IBV_MW_TYPE_2);
	k = ibv_inc_rkey(mw->rkey);
	uint64_t addr = (uintptr_t)p.b.buf;
	assert_int_equal(post_bind(p.qb, NULL, k, p.b.mr, addr, 64, MW_RW), EINVAL);
	assert_int_equal(post_bind(p.qb, mw, other->rkey, p.b.mr, addr, 64, MW_RW), EINVAL);
	struct ibv_mw_bind bind = {.bind_info = {.mr = p.b.mr, .addr = addr, .length = 64}};
	assert_int_equal(ibv_bind_mw(p.qb, mw, &bind), EINVAL);

	/* a QP of another PD */
	pd2 = ibv_alloc_pd(p.b.ctx);
	assert_non_null(pd2);
	struct ibv_qp_init_attr qia = {
	    .send_cq = p.b.cq,
	    .recv_cq = p.b.cq,
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = IBV_QPT_RC};
	struct ibv_qp *q2 = ibv_create_qp(pd2, &qia);
	assert_non_null(q2);
	tu_rc_to_rts(q2, &p.a.gid, TU_GID_INDEX, p.qa->qp_num, ALL_REMOTE);
	assert_int_equal(post_bind(q2, mw, k, p.b.mr, addr, 64, MW_RW), 0);
	assert_int_equal(bind_status(p.b.cq), IBV_WC_MW_BIND_ERR);
	assert_int_equal(ibv_destroy_qp(q2), 0);
	assert_int_equal(ibv_dealloc_pd(pd2), 0);

	/* a region without MW_BIND, then one without local write for remote write */
	no_bind = ibv_reg_mr(p.b.pd, p.b.buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	no_write = ibv_reg_mr(p.b.pd, p.b.buf, 4096, IBV_ACCESS_MW_BIND);
	assert_non_null(no_bind);
	assert_non_null(no_write);
	mw_qps(&p, &qa2, &qb2, IBV_QP_EX_WITH_SEND);
	assert_int_equal(post_bind(qb2, mw, k, no_bind, addr, 64, IBV_ACCESS_REMOTE_READ), 0);
	assert_int_equal(bind_status(p.b.cq), IBV_WC_MW_BIND_ERR);
	assert_int_equal(post_bind(p.qb, mw, k, no_write, addr, 64, IBV_ACCESS_REMOTE_WRITE), 0);
	assert_int_equal(bind_status(p.b.cq), IBV_WC_MW_BIND_ERR);
	/* the failed binds left the window free */
	assert_int_equal(ibv_dereg_mr(no_bind), 0);
	assert_int_equal(ibv_dereg_mr(no_write), 0);
	mw_qps_close(qa2, qb2);

	/* dealloc while bound */
	mw_qps(&p, &qa2, &qb2, IBV_QP_EX_WITH_SEND);
	assert_int_equal(post_bind(qb2, mw, k, p.b.mr, addr, 64, MW_RW), 0);
	assert_int_equal(bind_status(p.b.cq), IBV_WC_SUCCESS);
	assert_int_equal(mw_rdma(&p.a, qa2, IBV_WR_RDMA_WRITE, 0, 8, addr, k), IBV_WC_SUCCESS);
	assert_int_equal(ibv_dealloc_mw(mw), 0);
	assert_int_equal(mw_rdma(&p.a, qa2, IBV_WR_RDMA_WRITE, 0, 8, addr, k),
			 IBV_WC_REM_ACCESS_ERR);
	assert_int_equal(ibv_dealloc_mw(other), 0);
	mw_qps_close(qa2, qb2);
	mw_pair_close(&p);
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
	    cmocka_unit_test(last_wqe_reached_on_xrc_target),
	    cmocka_unit_test(destroy_qp_waits_for_ack),
	    cmocka_unit_test(destroy_cq_waits_for_ack),
	    cmocka_unit_test(mw_device_caps),
	    cmocka_unit_test(mw_type2_remote_invalidate),
	    cmocka_unit_test(mw_type2_wr_bind_local_inv),
	    cmocka_unit_test(mw_type1_bind_unbind),
	    cmocka_unit_test(mw_remote_invalidate_refused),
	    cmocka_unit_test(mw_bind_errors_and_dealloc),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	ibv_free_device_list(devs);
	return rc;
}
