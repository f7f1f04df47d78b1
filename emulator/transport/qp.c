/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Queue pairs: creation (QP numbers, rings), destruction and the receive
 * queue. The state machine is qp_modify.c, completions and flushing
 * qp_flush.c, posting work requests post.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rocemu_transport.h"

int rocemu_qp_take_recv(struct rocemu_qp *qp, struct rocemu_recv_wqe *out)
{
	if (qp->srq)
		return rocemu_srq_pop(qp->srq, out);
	if (qp->type == IBV_QPT_XRC_RECV)
		return qp->xrc_srq ? rocemu_srq_pop(qp->xrc_srq, out) : -EAGAIN;
	if (qp->rq_head == qp->rq_tail)
		return -EAGAIN;
	*out = qp->rq[qp->rq_head & qp->rq_mask];
	qp->rq_head++;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Create / destroy                                                           */

void rocemu_qp_free_rings(struct rocemu_qp *qp)
{
	rocemu_qmem_free(&qp->alloc, qp->sq, ROCEMU_RES_QP_SQ, qp->sq_app);
	rocemu_qmem_free(&qp->alloc, qp->rq, ROCEMU_RES_QP_RQ, qp->rq_app);
	qp->sq = NULL;
	qp->rq = NULL;
}

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

/*
 * A number from the port's QPN owner (a host hands out the numbers of every
 * process on it, docs/host.md): -ENOTSUP when the port has none. The host
 * never gives out two live numbers of the same slot, so a slot in use here
 * means a number another engine of this process took; ask again.
 */
static int qpn_from_port(struct rocemu_engine *e, struct rocemu_qp *qp, bool gsi)
{
	for (int tries = 0; tries < 8; tries++) {
		uint32_t qpn;
		int rc = rocemu_port_qpn_alloc(e->port, gsi, &qpn);

		if (rc < 0)
			return rc;
		if (gsi && qpn == 1)
			return 0;
		if (!e->qpn_table[rocemu_qpn_slot(qpn)] &&
		    rocemu_qpn_slot(qpn) >= ROCEMU_QPN_FIRST && qpn != ROCEMU_QPN_MULTICAST) {
			e->qpn_table[rocemu_qpn_slot(qpn)] = qp;
			qp->qpn = qpn;
			e->n_qps++;
			return 0;
		}
		rocemu_port_qpn_free(e->port, qpn);
	}
	return -ENOMEM;
}

static int qpn_alloc(struct rocemu_engine *e, struct rocemu_qp *qp, uint32_t source_qpn)
{
	int rc;

	if (e->n_qps >= e->caps.max_qp)
		return -ENOMEM;
	if (source_qpn != 1) {
		rc = qpn_from_port(e, qp, false);
		if (rc != -ENOTSUP)
			return rc;
	} else {
		rc = qpn_from_port(e, qp, true);
		if (rc < 0 && rc != -ENOTSUP)
			return rc;
	}
	/* The GSI QP has the fixed number 1 (IBA 3.9.2.1); qp_check_init checked it is free. */
	if (source_qpn == 1) {
		e->qpn_table[1] = qp;
		qp->qpn = 1;
		e->n_qps++;
		return 0;
	}
	/* The next free number in sequence (stale packets for a destroyed QP then
	 * find no QP instead of a stranger); every slot is tried once. */
	for (uint32_t tried = 0; tried < ROCEMU_QPN_TABLE - ROCEMU_QPN_FIRST;) {
		uint32_t qpn = e->qpn_next;

		e->qpn_next = (qpn + 1) & ROCEMU_QPN_MASK;
		if (rocemu_qpn_slot(qpn) < ROCEMU_QPN_FIRST || qpn == ROCEMU_QPN_MULTICAST)
			continue; /* reserved */
		tried++;
		if (!e->qpn_table[rocemu_qpn_slot(qpn)]) {
			e->qpn_table[rocemu_qpn_slot(qpn)] = qp;
			qp->qpn = qpn;
			e->n_qps++;
			return 0;
		}
	}
	return -ENOMEM;
}

/* The queues a QP type has: XRC_SEND a send queue only, XRC_RECV neither
 * (an XRC target serves the XRC SRQs its requests name). */
static bool type_has_sq(enum ibv_qp_type t)
{
	return t != IBV_QPT_XRC_RECV;
}

static bool type_has_rq(enum ibv_qp_type t)
{
	return t != IBV_QPT_XRC_SEND && t != IBV_QPT_XRC_RECV;
}

static int qp_check_init(struct rocemu_engine *e, const struct rocemu_qp_init *init)
{
	const struct ibv_qp_cap *c = &init->cap;

	if (rocemu_qp_type_index(init->qp_type) < 0)
		return -EOPNOTSUPP;
	if (init->qp_type == IBV_QPT_XRC_RECV) {
		/* no PD, no CQs, no SRQ of its own: a domain (ibv_create_qp_ex(3)) */
		if (!init->xrcd || init->send_cq || init->recv_cq || init->srq)
			return -EINVAL;
		return 0;
	}
	if (init->xrcd)
		return -EINVAL;
	if (!init->send_cq || (type_has_rq(init->qp_type) && !init->recv_cq))
		return -EINVAL;
	if (rocemu_cq_engine(init->send_cq) != e ||
	    (init->recv_cq && rocemu_cq_engine(init->recv_cq) != e))
		return -EINVAL;
	if (!type_has_rq(init->qp_type) && init->srq)
		return -EINVAL;
	if (c->max_send_wr > e->caps.max_qp_wr || c->max_send_sge > e->caps.max_sge ||
	    c->max_inline_data > e->caps.max_inline_data)
		return -EINVAL;
	if (!init->srq && (c->max_recv_wr > e->caps.max_qp_wr || c->max_recv_sge > e->caps.max_sge))
		return -EINVAL;
	/* Only the GSI QP (QP1, a UD QP) may be asked for by number; QP0 (SMI) has no
	 * meaning on RoCE (IBA A16/A17: no subnet management). */
	if (init->source_qpn != 0) {
		if (init->source_qpn != 1 || init->qp_type != IBV_QPT_UD)
			return -EINVAL;
		if (e->qpn_table[1])
			return -EBUSY;
	}
	return 0;
}

int rocemu_qp_create(struct rocemu_pd *pd, struct rocemu_qp_init *init, struct rocemu_qp **out)
{
	struct rocemu_engine *e;
	struct rocemu_qp *qp;
	int rc;

	if (!init || !out)
		return -EINVAL;
	if (init->qp_type == IBV_QPT_XRC_RECV ? (pd || !init->xrcd) : !pd)
		return -EINVAL;
	e = pd ? pd->engine : rocemu_xrcd_engine(init->xrcd);
	rocemu_engine_lock(e);
	rc = qp_check_init(e, init);
	if (rc < 0)
		goto out;
	rc = -ENOMEM;
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		goto out;
	*qp = (struct rocemu_qp){
	    .engine = e,
	    .pd = pd,
	    .type = init->qp_type,
	    .send_cq = init->send_cq,
	    .recv_cq = init->recv_cq,
	    .srq = init->srq,
	    .sq_sig_all = init->sq_sig_all,
	    .user_ctx = init->user_ctx,
	    .state = IBV_QPS_RESET,
	    .xrcd = init->xrcd,
	};

	qp->cap = init->cap;
	if (qp->cap.max_send_wr == 0)
		qp->cap.max_send_wr = 1;
	if (qp->cap.max_send_sge == 0)
		qp->cap.max_send_sge = 1;
	qp->cap.max_inline_data = ROCEMU_MAX_INLINE;
	if (!type_has_sq(qp->type)) {
		qp->cap.max_send_wr = 0; /* a minimal ring stays: nothing is ever posted */
		qp->cap.max_send_sge = 0;
		qp->cap.max_inline_data = 0;
	}
	if (!type_has_rq(qp->type)) {
		qp->cap.max_recv_wr = 0;
		qp->cap.max_recv_sge = 0;
	} else if (qp->srq) {
		qp->cap.max_recv_wr = 0;
		qp->cap.max_recv_sge = 0;
	} else {
		if (qp->cap.max_recv_wr == 0)
			qp->cap.max_recv_wr = 1;
		if (qp->cap.max_recv_sge == 0)
			qp->cap.max_recv_sge = 1;
	}
	if (init->alloc)
		qp->alloc = *init->alloc;
	qp->sq_mask = pow2_at_least(qp->cap.max_send_wr ? qp->cap.max_send_wr : 1) - 1;
	qp->sq = rocemu_qmem_alloc(&qp->alloc, (size_t)(qp->sq_mask + 1) * sizeof(*qp->sq),
				   ROCEMU_RES_QP_SQ, &qp->sq_app);
	if (!qp->srq && type_has_rq(qp->type)) {
		qp->rq_mask = pow2_at_least(qp->cap.max_recv_wr) - 1;
		qp->rq = rocemu_qmem_alloc(&qp->alloc, (size_t)(qp->rq_mask + 1) * sizeof(*qp->rq),
					   ROCEMU_RES_QP_RQ, &qp->rq_app);
	}
	if (!qp->sq || (!qp->srq && type_has_rq(qp->type) && !qp->rq))
		goto fail;
	qp->timer_idx = UINT32_MAX;
	rc = qpn_alloc(e, qp, init->source_qpn);
	if (rc < 0)
		goto fail;
	qp->attr.qp_state = IBV_QPS_RESET;
	if (qp->qpn == 1)
		qp->attr.qkey = ROCEMU_GSI_QKEY;
	qp->attr.cap = qp->cap;
	qp->attr.port_num = 1;
	qp->attr.path_mtu = IBV_MTU_1024;
	qp->mtu = 1024;

	if (pd)
		rocemu_pd_get(pd);
	if (qp->send_cq)
		rocemu_cq_get(qp->send_cq);
	if (qp->recv_cq)
		rocemu_cq_get(qp->recv_cq);
	if (qp->srq)
		rocemu_srq_get(qp->srq);
	if (qp->xrcd)
		rocemu_xrcd_use(qp->xrcd, 1);
	init->cap = qp->cap;
	*out = qp;
	rc = 0;
	goto out;
fail:
	rocemu_qp_free_rings(qp);
	free(qp->resp.res);
	free(qp);
out:
	rocemu_engine_unlock(e);
	return rc;
}

int rocemu_qp_destroy(struct rocemu_qp *qp)
{
	struct rocemu_engine *e = qp->engine;

	rocemu_engine_lock(e);
	if (qp->n_flows || qp->n_mcast) {
		/* ibv_destroy_flow / ibv_detach_mcast first, as the kernel's uverbs requires */
		rocemu_engine_unlock(e);
		return -EBUSY;
	}
	if (qp->open_refs) {
		/* an XRC target opened elsewhere (ibv_open_qp): one handle less */
		qp->open_refs--;
		rocemu_engine_unlock(e);
		return 0;
	}
	rocemu_engine_forget(qp);
	/* its type 2 windows stay bound but answer no QP: a later QP given
	 * the same number must not inherit them */
	rocemu_mem_windows_orphan(e->mem, qp->qpn);
	e->qpn_table[rocemu_qpn_slot(qp->qpn)] = NULL;
	if (qp->qpn != 1)
		rocemu_port_qpn_free(e->port, qp->qpn);
	e->n_qps--;
	/* its completions still queued go with it (rocemu_cq_forget_qp) */
	if (qp->send_cq)
		e->ctr[CTR_cq_cleaned] += rocemu_cq_forget_qp(qp->send_cq, qp->qpn);
	if (qp->recv_cq && qp->recv_cq != qp->send_cq)
		e->ctr[CTR_cq_cleaned] += rocemu_cq_forget_qp(qp->recv_cq, qp->qpn);
	if (qp->send_cq)
		rocemu_cq_put(qp->send_cq);
	if (qp->recv_cq)
		rocemu_cq_put(qp->recv_cq);
	if (qp->srq)
		rocemu_srq_put(qp->srq);
	if (qp->xrcd) {
		rocemu_xrcd_use(qp->xrcd, -1);
	} else {
		rocemu_pd_put(qp->pd);
	}
	rocemu_engine_unlock(e);
	rocemu_qp_free_rings(qp);
	free(qp->resp.res);
	free(qp);
	return 0;
}

int rocemu_qp_open(struct rocemu_xrcd *xrcd, uint32_t qpn, struct rocemu_qp **out)
{
	struct rocemu_engine *e;
	struct rocemu_qp *qp;

	if (!xrcd || !out)
		return -EINVAL;
	e = rocemu_xrcd_engine(xrcd);
	rocemu_engine_lock(e);
	qp = rocemu_engine_qp_lookup(e, qpn);
	if (!qp || qp->type != IBV_QPT_XRC_RECV || qp->xrcd != xrcd) {
		rocemu_engine_unlock(e);
		return -EINVAL;
	}
	qp->open_refs++;
	rocemu_engine_unlock(e);
	*out = qp;
	return 0;
}

void rocemu_qp_retarget_events(struct rocemu_qp *qp, void *from, void *to)
{
	rocemu_engine_lock(qp->engine);
	if (!from || qp->user_ctx == from)
		qp->user_ctx = to;
	rocemu_engine_unlock(qp->engine);
}

uint32_t rocemu_qp_num(const struct rocemu_qp *qp)
{
	return qp->qpn;
}

enum ibv_qp_state rocemu_qp_state(const struct rocemu_qp *qp)
{
	return qp->state;
}
