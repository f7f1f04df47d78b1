/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory windows (IBA 10.6.7; ibv_alloc_mw(3), ibv_bind_mw(3),
 * ibv_post_send(3) IBV_WR_BIND_MW). A window is an entry of the key table
 * like a region, so one lookup serves both; it is an R_Key only (never an
 * L_Key), and its range, rights and address are those of its last bind.
 *
 * Type 1: bound and unbound (a bind of length 0) by ibv_bind_mw, which the
 * provider turns into a bind WR on a QP of the window's PD; any QP of that
 * PD may then use it. Type 2 (2B): bound by a bind WR on one QP, and only
 * that QP's requests may use it; it must be free (not bound) to be bound,
 * and it is freed by LOCAL_INV, by the peer's SEND with Invalidate on that
 * QP, or by ibv_dealloc_mw.
 *
 * The key's low byte (tag) is the consumer's: the bind names the new
 * R_Key, whose index part must be the window's (ibv_inc_rkey). Once the
 * window has the new key the old one names nothing.
 */
#include <errno.h>
#include <stdlib.h>

#include "mem_private.h"

/* The rights a bind may grant (ibv_mw_bind_info.mw_access_flags):
 * LOCAL_WRITE is accepted and means nothing for a window (rdma-core's own
 * tests pass it). */
#define MW_ACCESS_KNOWN                                                                            \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED)
#define MW_REMOTE_RIGHTS                                                                           \
	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

int rocemu_mw_alloc(struct rocemu_pd *pd, enum ibv_mw_type type, struct rocemu_mw **out)
{
	struct rocemu_engine *e;
	struct rocemu_mw *mw;
	int rc;

	if (!pd || !out || (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2))
		return -EINVAL;
	e = pd->engine;
	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return -ENOMEM;
	mw->w.window = true;
	mw->w.mw_type = (uint8_t)type;
	mw->w.invalidated = true; /* not bound: translates nothing */
	mw->w.pd = pd;
	rocemu_engine_lock(e);
	rc = rocemu_mem_key_alloc(rocemu_engine_mem(e), &mw->w);
	if (rc == 0)
		rocemu_pd_get(pd);
	rocemu_engine_unlock(e);
	if (rc) {
		free(mw);
		return rc;
	}
	*out = mw;
	return 0;
}

void rocemu_mem_mw_unbind(struct rocemu_mr *w)
{
	if (w->parent)
		w->parent->windows--;
	w->parent = NULL;
	w->invalidated = true;
}

/* Allowed while bound (rdma-core's tests do it): the R_Key stops at once. */
int rocemu_mw_dealloc(struct rocemu_mw *mw)
{
	struct rocemu_engine *e;

	if (!mw)
		return -EINVAL;
	e = mw->w.pd->engine;
	rocemu_engine_lock(e);
	rocemu_mem_mw_unbind(&mw->w);
	rocemu_mem_key_free(rocemu_engine_mem(e), &mw->w);
	rocemu_pd_put(mw->w.pd);
	rocemu_engine_unlock(e);
	free(mw);
	return 0;
}

uint32_t rocemu_mw_rkey(const struct rocemu_mw *mw)
{
	struct rocemu_engine *e = mw->w.pd->engine;
	uint32_t key;

	rocemu_engine_lock(e);
	key = mw->w.key;
	rocemu_engine_unlock(e);
	return key;
}

/* The region a bind names, checked against the window: same PD, the
 * MW_BIND right, and (C10-74 as Linux rxe numbers it) local write when the
 * window grants remote write or atomic. */
static int bind_region(struct rocemu_mem_table *t, const struct rocemu_mr *w,
		       const struct rocemu_mem_bind *b, struct rocemu_mr **out)
{
	struct rocemu_mr *mr = rocemu_mem_lookup(t, b->mr_lkey);
	uint64_t off;

	if (!mr || mr->window || mr->invalidated || mr->foreign)
		return -EINVAL; /* no windows on another process's region */
	if (mr->pd != w->pd)
		return -EPERM;
	if (!(mr->access & IBV_ACCESS_MW_BIND))
		return -EACCES;
	if ((b->access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(mr->access & IBV_ACCESS_LOCAL_WRITE))
		return -EACCES;
	/* the window lies inside the region (compared without adding) */
	if (b->addr < mr->iova)
		return -ERANGE;
	off = b->addr - mr->iova;
	if (!mr->implicit && (b->length > mr->length || off > mr->length - b->length))
		return -ERANGE;
	if (b->length && b->addr > UINT64_MAX - (b->length - 1))
		return -ERANGE;
	*out = mr;
	return 0;
}

int rocemu_mem_bind(struct rocemu_mem_table *t, const struct rocemu_pd *pd, uint32_t qpn,
		    const struct rocemu_mem_bind *b)
{
	/* the window is found by the index part of the new key */
	struct rocemu_mr *w = rocemu_mem_key_slot(t, b->key), *mr = NULL;
	int rc;

	if (!w || !w->window || w->mw_type != b->type)
		return -EINVAL;
	if (b->key == 0 || (b->access & ~(unsigned)MW_ACCESS_KNOWN))
		return -EINVAL;
	if (w->mw_type == IBV_MW_TYPE_2) {
		/* 2B: bound through a QP of its own PD, only when free, never to nothing */
		if (w->pd != pd)
			return -EPERM;
		if (!w->invalidated)
			return -EBUSY;
		if (b->mr_lkey == 0 || b->length == 0)
			return -EINVAL;
	} else {
		if (b->access & IBV_ACCESS_ZERO_BASED)
			return -EINVAL; /* type 1 windows are never zero-based */
		if (b->length == 0) {
			/* ibv_bind_mw(3): a bind of length 0 unbinds */
			if (!w->invalidated)
				rocemu_mem_mw_unbind(w);
			w->key = b->key;
			return 0;
		}
	}
	rc = bind_region(t, w, b, &mr);
	if (rc)
		return rc;
	if (!w->invalidated)
		rocemu_mem_mw_unbind(w); /* type 1: a new bind replaces the old */
	w->parent = mr;
	mr->windows++;
	w->key = b->key;
	w->bound_qpn = qpn;
	w->access = b->access & MW_REMOTE_RIGHTS;
	w->length = b->length;
	w->iova = (b->access & IBV_ACCESS_ZERO_BASED) ? 0 : b->addr;
	/* host address of the window's first byte: implicit ODP addresses by
	 * host address, the others by offset into the region */
	w->addr = (uint8_t *)(mr->implicit ? (uintptr_t)b->addr
					   : (uintptr_t)mr->addr + (uintptr_t)(b->addr - mr->iova));
	w->odp = mr->odp;
	w->implicit = false;
	w->invalidated = false;
	return 0;
}
