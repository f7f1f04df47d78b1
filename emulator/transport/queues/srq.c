/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared receive queues: a ring of receive WQEs and the limit event of
 * ibv_modify_srq(3) (armed by setting IBV_SRQ_LIMIT; fires once when the
 * number of queued WQEs drops below the limit, then disarms).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../memory/mem_objects.h"
#include "../rocemu_internal.h"

struct rocemu_srq {
	struct rocemu_engine *engine;
	struct rocemu_pd *pd;
	struct rocemu_obj obj;
	struct rocemu_recv_wqe *ring;
	uint32_t cap;
	uint32_t head; /**< oldest WQE */
	uint32_t count;
	uint32_t max_sge;
	uint32_t limit;	 /**< 0: not armed */
	uint32_t refcnt; /**< QPs attached */
	void *user_ctx;
	uint32_t num;		   /**< ibv_get_srq_num(3) */
	struct rocemu_xrcd *xrcd;  /**< XRC SRQ: its domain */
	struct rocemu_cq *cq;	   /**< XRC SRQ: where its receive completions go */
	struct rocemu_alloc alloc; /**< where the ring comes from (parent domain) */
	bool ring_app;		   /**< the ring is the application's */
};

static void srq_release(struct rocemu_obj *obj)
{
	struct rocemu_srq *srq = container_of(obj, struct rocemu_srq, obj);

	rocemu_qmem_free(&srq->alloc, srq->ring, ROCEMU_RES_SRQ, srq->ring_app);
	free(srq);
}

/*
 * ibv_create_srq(3): srq_limit is irrelevant at creation (the SRQ starts
 * disarmed), so limit is ignored; ibv_modify_srq arms it.
 */
int rocemu_srq_create(struct rocemu_pd *pd, uint32_t max_wr, uint32_t max_sge, uint32_t limit,
		      void *user_ctx, struct rocemu_srq **out)
{
	struct rocemu_srq_init init = {
	    .pd = pd, .max_wr = max_wr, .max_sge = max_sge, .user_ctx = user_ctx};

	(void)limit;
	return rocemu_srq_create_ex(&init, out);
}

/*
 * An XRC SRQ (ibv_create_srq_ex(3), IBV_SRQT_XRC) also has a domain and a
 * CQ: XRC target QPs of that domain take receive WQEs from it for the
 * requests that name its number, and its completions go to its CQ.
 */
int rocemu_srq_create_ex(const struct rocemu_srq_init *init, struct rocemu_srq **out)
{
	struct rocemu_pd *pd = init ? init->pd : NULL;
	uint32_t max_wr = init ? init->max_wr : 0, max_sge = init ? init->max_sge : 0;
	struct rocemu_caps caps;
	struct rocemu_srq *srq;
	int rc;

	if (!pd || !out || (init->xrcd && !init->cq) || (init->cq && !init->xrcd))
		return -EINVAL;
	if (init->xrcd && (rocemu_xrcd_engine(init->xrcd) != pd->engine ||
			   rocemu_cq_engine(init->cq) != pd->engine))
		return -EINVAL;
	rocemu_engine_caps(pd->engine, &caps);
	if (max_wr == 0 || max_wr > caps.max_srq_wr || max_sge > caps.max_srq_sge ||
	    max_sge > ROCEMU_MAX_SGE)
		return -EINVAL;
	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return -ENOMEM;
	if (init->alloc)
		srq->alloc = *init->alloc;
	srq->ring = rocemu_qmem_alloc(&srq->alloc, (size_t)max_wr * sizeof(*srq->ring),
				      ROCEMU_RES_SRQ, &srq->ring_app);
	if (!srq->ring) {
		free(srq);
		return -ENOMEM;
	}
	srq->engine = pd->engine;
	srq->pd = pd;
	srq->cap = max_wr;
	srq->max_sge = max_sge;
	srq->user_ctx = init->user_ctx;
	srq->xrcd = init->xrcd;
	srq->cq = init->cq;
	rocemu_engine_lock(srq->engine);
	rc = rocemu_engine_srq_register(srq->engine, srq, &srq->num);
	if (rc == 0) {
		rc = rocemu_obj_track(rocemu_engine_mem(srq->engine), &srq->obj, ROCEMU_OBJ_SRQ,
				      caps.max_srq, srq_release);
		if (rc)
			rocemu_engine_srq_unregister(srq->engine, srq->num);
	}
	if (rc == 0) {
		rocemu_pd_get(pd);
		if (srq->xrcd) {
			rocemu_xrcd_use(srq->xrcd, 1);
			rocemu_cq_get(srq->cq);
		}
	}
	rocemu_engine_unlock(srq->engine);
	if (rc) {
		srq_release(&srq->obj);
		return rc;
	}
	*out = srq;
	return 0;
}

/* Grow or shrink the ring, keeping the WQEs in order. Lock held. */
static int srq_resize(struct rocemu_srq *srq, uint32_t max_wr)
{
	struct rocemu_recv_wqe *ring;
	uint32_t i;

	bool app;

	ring = rocemu_qmem_alloc(&srq->alloc, (size_t)max_wr * sizeof(*ring), ROCEMU_RES_SRQ, &app);
	if (!ring)
		return -ENOMEM;
	for (i = 0; i < srq->count; i++)
		ring[i] = srq->ring[(srq->head + i) % srq->cap];
	rocemu_qmem_free(&srq->alloc, srq->ring, ROCEMU_RES_SRQ, srq->ring_app);
	srq->ring = ring;
	srq->ring_app = app;
	srq->cap = max_wr;
	srq->head = 0;
	return 0;
}

/*
 * ibv_modify_srq(3): IBV_SRQ_MAX_WR resizes (not below the WQEs queued),
 * IBV_SRQ_LIMIT arms the limit event (0 disarms). Both are validated
 * before either is applied.
 */
int rocemu_srq_modify(struct rocemu_srq *srq, const struct ibv_srq_attr *attr, int mask)
{
	uint32_t max_wr;
	struct rocemu_caps caps;
	int rc = 0;

	if (!srq || !attr || mask == 0 || (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)))
		return -EINVAL;
	rocemu_engine_caps(srq->engine, &caps);
	rocemu_engine_lock(srq->engine);
	max_wr = (mask & IBV_SRQ_MAX_WR) ? attr->max_wr : srq->cap;
	if (max_wr == 0 || max_wr > caps.max_srq_wr || max_wr < srq->count ||
	    ((mask & IBV_SRQ_LIMIT) && attr->srq_limit > max_wr))
		rc = -EINVAL;
	if (rc == 0 && max_wr != srq->cap)
		rc = srq_resize(srq, max_wr);
	if (rc == 0 && (mask & IBV_SRQ_LIMIT))
		srq->limit = attr->srq_limit;
	rocemu_engine_unlock(srq->engine);
	return rc;
}

/* ibv_query_srq(3): srq_limit reads 0 while the limit is not armed. */
int rocemu_srq_query(struct rocemu_srq *srq, struct ibv_srq_attr *attr)
{
	if (!srq || !attr)
		return -EINVAL;
	rocemu_engine_lock(srq->engine);
	attr->max_wr = srq->cap;
	attr->max_sge = srq->max_sge;
	attr->srq_limit = srq->limit;
	rocemu_engine_unlock(srq->engine);
	return 0;
}

/*
 * ibv_post_srq_recv(3): too many SGEs is EINVAL, a full queue ENOMEM. The
 * SGEs are only copied here; their keys are checked when a message lands.
 */
int rocemu_srq_post_recv(struct rocemu_srq *srq, uint64_t wr_id, const struct ibv_sge *sg,
			 uint32_t num_sge)
{
	struct rocemu_recv_wqe *wqe;
	uint32_t i;

	if (!srq || num_sge > srq->max_sge || (num_sge > 0 && !sg))
		return -EINVAL;
	rocemu_engine_lock(srq->engine);
	if (srq->count == srq->cap) {
		rocemu_engine_unlock(srq->engine);
		return -ENOMEM;
	}
	wqe = &srq->ring[(srq->head + srq->count) % srq->cap];
	wqe->wr_id = wr_id;
	wqe->num_sge = num_sge;
	wqe->total_len = 0;
	for (i = 0; i < num_sge; i++) {
		wqe->sge[i] = sg[i];
		wqe->total_len += sg[i].length;
	}
	srq->count++;
	rocemu_engine_unlock(srq->engine);
	return 0;
}

int rocemu_srq_destroy(struct rocemu_srq *srq)
{
	struct rocemu_engine *e;

	if (!srq)
		return -EINVAL;
	e = srq->engine;
	rocemu_engine_lock(e);
	if (srq->refcnt > 0) {
		rocemu_engine_unlock(e);
		return -EBUSY;
	}
	rocemu_obj_untrack(rocemu_engine_mem(e), &srq->obj);
	rocemu_engine_srq_unregister(e, srq->num);
	rocemu_pd_put(srq->pd);
	if (srq->xrcd) {
		rocemu_xrcd_use(srq->xrcd, -1);
		rocemu_cq_put(srq->cq);
	}
	rocemu_engine_unlock(e);
	srq_release(&srq->obj);
	return 0;
}

int rocemu_srq_pop(struct rocemu_srq *srq, struct rocemu_recv_wqe *out)
{
	const struct rocemu_recv_wqe *wqe;

	if (srq->count == 0)
		return -EAGAIN;
	wqe = &srq->ring[srq->head];
	out->wr_id = wqe->wr_id;
	out->num_sge = wqe->num_sge;
	out->total_len = wqe->total_len;
	memcpy(out->sge, wqe->sge, wqe->num_sge * sizeof(wqe->sge[0]));
	srq->head = (srq->head + 1) % srq->cap;
	srq->count--;
	if (srq->limit && srq->count < srq->limit) {
		srq->limit = 0; /* one-shot: the application re-arms */
		rocemu_engine_raise(srq->engine, IBV_EVENT_SRQ_LIMIT_REACHED, srq->user_ctx);
	}
	return 0;
}

struct rocemu_pd *rocemu_srq_pd(const struct rocemu_srq *srq)
{
	return srq->pd;
}

uint32_t rocemu_srq_num(const struct rocemu_srq *srq)
{
	return srq->num;
}

struct rocemu_xrcd *rocemu_srq_xrcd(const struct rocemu_srq *srq)
{
	return srq->xrcd;
}

struct rocemu_cq *rocemu_srq_cq(const struct rocemu_srq *srq)
{
	return srq->cq;
}

void rocemu_srq_get(struct rocemu_srq *srq)
{
	srq->refcnt++;
}

void rocemu_srq_put(struct rocemu_srq *srq)
{
	if (srq->refcnt > 0)
		srq->refcnt--;
}
