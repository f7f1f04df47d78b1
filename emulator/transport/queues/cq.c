/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Completion queues: a ring of rocemu_wc, the one-shot arm of
 * ibv_req_notify_cq(3), overflow reported as IBV_EVENT_CQ_ERR.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../memory/mem_objects.h"
#include "../rocemu_internal.h"

enum cq_arm {
	CQ_DISARMED,
	CQ_ARMED_SOLICITED, /**< next solicited or error completion */
	CQ_ARMED_ANY,	    /**< next completion */
};

struct rocemu_cq {
	struct rocemu_engine *engine;
	struct rocemu_obj obj;
	struct rocemu_wc *ring;
	uint32_t cap;
	uint32_t head; /**< oldest entry */
	uint32_t count;
	uint32_t refcnt; /**< QPs attached */
	enum cq_arm arm;
	bool overflow_reported;	   /**< CQ_ERR raised since the ring was last full */
	bool ignore_overrun;	   /**< ROCEMU_CQ_IGNORE_OVERRUN */
	struct rocemu_alloc alloc; /**< where the ring comes from (parent domain) */
	bool ring_app;		   /**< the ring is the application's */
	rocemu_cq_notify_fn notify;
	void *notify_arg;
	void *user_ctx;
};

static void cq_release(struct rocemu_obj *obj)
{
	struct rocemu_cq *cq = container_of(obj, struct rocemu_cq, obj);

	rocemu_qmem_free(&cq->alloc, cq->ring, ROCEMU_RES_CQ, cq->ring_app);
	free(cq);
}

static bool cq_size_ok(const struct rocemu_engine *e, uint32_t cqe)
{
	struct rocemu_caps caps;

	rocemu_engine_caps(e, &caps);
	return cqe > 0 && cqe <= caps.max_cqe;
}

int rocemu_cq_create(struct rocemu_engine *e, uint32_t cqe, rocemu_cq_notify_fn notify,
		     void *notify_arg, void *user_ctx, struct rocemu_cq **out)
{
	return rocemu_cq_create_ex(e, cqe, 0, NULL, notify, notify_arg, user_ctx, out);
}

int rocemu_cq_create_ex(struct rocemu_engine *e, uint32_t cqe, unsigned flags,
			const struct rocemu_alloc *alloc, rocemu_cq_notify_fn notify,
			void *notify_arg, void *user_ctx, struct rocemu_cq **out)
{
	struct rocemu_caps caps;
	struct rocemu_cq *cq;
	int rc;

	if (!e || !out || !cq_size_ok(e, cqe) || (flags & ~ROCEMU_CQ_IGNORE_OVERRUN))
		return -EINVAL;
	rocemu_engine_caps(e, &caps);
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	if (alloc)
		cq->alloc = *alloc;
	cq->ignore_overrun = flags & ROCEMU_CQ_IGNORE_OVERRUN;
	cq->ring = rocemu_qmem_alloc(&cq->alloc, (size_t)cqe * sizeof(*cq->ring), ROCEMU_RES_CQ,
				     &cq->ring_app);
	if (!cq->ring) {
		free(cq);
		return -ENOMEM;
	}
	cq->engine = e;
	cq->cap = cqe;
	cq->notify = notify;
	cq->notify_arg = notify_arg;
	cq->user_ctx = user_ctx;
	rocemu_engine_lock(e);
	rc = rocemu_obj_track(rocemu_engine_mem(e), &cq->obj, ROCEMU_OBJ_CQ, caps.max_cq,
			      cq_release);
	rocemu_engine_unlock(e);
	if (rc) {
		cq_release(&cq->obj);
		return rc;
	}
	*out = cq;
	return 0;
}

uint32_t rocemu_cq_capacity(const struct rocemu_cq *cq)
{
	return cq->cap;
}

/* ibv_resize_cq(3): entries are kept; fewer slots than entries is EINVAL. */
int rocemu_cq_resize(struct rocemu_cq *cq, uint32_t cqe)
{
	struct rocemu_wc *ring;
	bool app;
	uint32_t i;

	if (!cq || !cq_size_ok(cq->engine, cqe))
		return -EINVAL;
	ring = rocemu_qmem_alloc(&cq->alloc, (size_t)cqe * sizeof(*ring), ROCEMU_RES_CQ, &app);
	if (!ring)
		return -ENOMEM;
	rocemu_engine_lock(cq->engine);
	if (cqe < cq->count) {
		rocemu_engine_unlock(cq->engine);
		rocemu_qmem_free(&cq->alloc, ring, ROCEMU_RES_CQ, app);
		return -EINVAL;
	}
	for (i = 0; i < cq->count; i++)
		ring[i] = cq->ring[(cq->head + i) % cq->cap];
	rocemu_qmem_free(&cq->alloc, cq->ring, ROCEMU_RES_CQ, cq->ring_app);
	cq->ring = ring;
	cq->ring_app = app;
	cq->cap = cqe;
	cq->head = 0;
	if (cq->count < cq->cap)
		cq->overflow_reported = false;
	rocemu_engine_unlock(cq->engine);
	return 0;
}

int rocemu_cq_destroy(struct rocemu_cq *cq)
{
	struct rocemu_engine *e;

	if (!cq)
		return -EINVAL;
	e = cq->engine;
	rocemu_engine_lock(e);
	if (cq->refcnt > 0) {
		rocemu_engine_unlock(e);
		return -EBUSY;
	}
	rocemu_obj_untrack(rocemu_engine_mem(e), &cq->obj);
	rocemu_engine_unlock(e);
	cq_release(&cq->obj);
	return 0;
}

int rocemu_cq_poll(struct rocemu_cq *cq, int n, struct rocemu_wc *wc)
{
	struct rocemu_port *port;
	int got = 0;

	if (!cq || n < 0 || (n > 0 && !wc))
		return -EINVAL;
	/* Progress runs in the polling thread too: a pass if the lock is free,
	 * and the CQ is read under the same lock; the port learns whether this
	 * thread found something (rocemu_port.h, the progress contract). */
	port = rocemu_engine_port(cq->engine);
	rocemu_port_verb_enter(port, ROCEMU_VERB_POLL);
	while (got < n && cq->count > 0) {
		wc[got++] = cq->ring[cq->head];
		cq->head = (cq->head + 1) % cq->cap;
		cq->count--;
	}
	if (got > 0)
		cq->overflow_reported = false;
	rocemu_port_verb_leave(port, got > 0 ? ROCEMU_DID_POLL_FOUND : ROCEMU_DID_POLL_EMPTY);
	return got;
}

/* ibv_req_notify_cq(3): one-shot; asking for "any" while armed for
 * solicited-only widens the arm, never the reverse. */
int rocemu_cq_arm(struct rocemu_cq *cq, bool solicited_only)
{
	enum cq_arm want = solicited_only ? CQ_ARMED_SOLICITED : CQ_ARMED_ANY;

	if (!cq)
		return -EINVAL;
	rocemu_engine_lock(cq->engine);
	if (want > cq->arm)
		cq->arm = want;
	rocemu_engine_unlock(cq->engine);
	return 0;
}

int rocemu_cq_push(struct rocemu_cq *cq, const struct rocemu_wc *wc, bool solicited)
{
	bool wake;

	if (cq->count == cq->cap && cq->ignore_overrun)
		return 1; /* ibv_create_cq_ex(3) IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN: no error */
	if (cq->count == cq->cap) {
		/* A CQ overrun is an affiliated asynchronous error (IBA ch. 11). The
		 * entries already queued stay intact; this one is lost. */
		if (!cq->overflow_reported) {
			cq->overflow_reported = true;
			rocemu_engine_raise(cq->engine, IBV_EVENT_CQ_ERR, cq->user_ctx);
		}
		return -ENOSPC;
	}
	cq->ring[(cq->head + cq->count) % cq->cap] = *wc;
	cq->count++;
	wake = cq->arm == CQ_ARMED_ANY ||
	       (cq->arm == CQ_ARMED_SOLICITED && (solicited || wc->status != IBV_WC_SUCCESS));
	if (wake) {
		cq->arm = CQ_DISARMED;
		if (cq->notify)
			cq->notify(cq->notify_arg);
	}
	return 0;
}

/*
 * ibv_destroy_qp: the destroyed QP's completions still queued leave the CQ
 * (engine lock held), as mlx5 cleans its CQs at destroy. Their wr_ids name
 * the program's per-QP state, which it frees with the QP: libfabric's
 * ofi_rxm closed a connection on DISCONNECTED and then polled a receive
 * completion of it and reposted the buffer on the freed endpoint (SIGSEGV).
 * Returns how many entries were removed.
 */
unsigned rocemu_cq_forget_qp(struct rocemu_cq *cq, uint32_t qpn)
{
	uint32_t kept = 0;

	for (uint32_t i = 0; i < cq->count; i++) {
		const struct rocemu_wc *wc = &cq->ring[(cq->head + i) % cq->cap];

		if (wc->qp_num != qpn)
			cq->ring[(cq->head + kept++) % cq->cap] = *wc;
	}
	unsigned removed = cq->count - kept;

	cq->count = kept;
	if (removed && cq->count < cq->cap)
		cq->overflow_reported = false;
	return removed;
}

/* How many of the queued completions are QP qpn's (engine lock held). */
unsigned rocemu_cq_count_qp(const struct rocemu_cq *cq, uint32_t qpn)
{
	unsigned n = 0;

	for (uint32_t i = 0; i < cq->count; i++)
		n += cq->ring[(cq->head + i) % cq->cap].qp_num == qpn;
	return n;
}

uint32_t rocemu_cq_free_slots(const struct rocemu_cq *cq)
{
	return cq->cap - cq->count;
}

struct rocemu_engine *rocemu_cq_engine(const struct rocemu_cq *cq)
{
	return cq->engine;
}

void rocemu_cq_get(struct rocemu_cq *cq)
{
	cq->refcnt++;
}

void rocemu_cq_put(struct rocemu_cq *cq)
{
	if (cq->refcnt > 0)
		cq->refcnt--;
}
