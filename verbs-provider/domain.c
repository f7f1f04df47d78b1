/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Thread domains and parent domains (ibv_alloc_td(3),
 * ibv_alloc_parent_domain(3)).
 *
 * A thread domain promises that the objects created with it are used by one
 * thread at a time, so a provider may leave out locks or give them a
 * doorbell of their own. rocemu has one lock per engine, which the progress
 * thread shares with every application thread; a TD cannot take it away. So
 * a TD is bookkept (its parent domains hold it: ibv_dealloc_td is EBUSY
 * while they exist) and has no other effect.
 *
 * A parent domain is a PD for every verb that takes one (it stands for the
 * PD it was made from: memory registered with either is the same PD's) and
 * carries the application's allocators: the rings of QPs, CQs and SRQs
 * created with it come from alloc(pd, pd_context, size, alignment,
 * resource_type) with rocemu's ROCEMU_RES_* types (docs/verbs-provider.md),
 * and go back through free; alloc may answer IBV_ALLOCATOR_USE_DEFAULT for
 * any of them, or NULL to refuse (the object is then not created, ENOMEM).
 */
#include <stdlib.h>
#include <string.h>

#include "provider.h"

struct ibv_td *rocemu_op_alloc_td(struct ibv_context *ctx, struct ibv_td_init_attr *attr)
{
	struct rocemu_vtd *t;

	if (!ctx || !attr) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->comp_mask) {
		errno = EINVAL; /* ibv_alloc_td(3): no comp_mask bit is defined */
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		errno = ENOMEM;
		return NULL;
	}
	t->td.context = ctx;
	return &t->td;
}

int rocemu_op_dealloc_td(struct ibv_td *td)
{
	struct rocemu_vtd *t = (struct rocemu_vtd *)td;
	bool busy;

	if (!td)
		return EINVAL;
	pthread_mutex_lock(&td->context->mutex);
	busy = t->users > 0;
	pthread_mutex_unlock(&td->context->mutex);
	if (busy)
		return EBUSY;
	free(t);
	return 0;
}

/* The engine calls these with the parent domain as arg. */
static void *pd_alloc(void *arg, size_t size, size_t alignment, uint64_t type)
{
	struct rocemu_vpd *p = arg;

	return p->alloc(&p->pd, p->pd_context, size, alignment, type);
}

static void pd_free(void *arg, void *ptr, uint64_t type)
{
	struct rocemu_vpd *p = arg;

	p->free(&p->pd, p->pd_context, ptr, type);
}

struct ibv_pd *rocemu_op_alloc_parent_domain(struct ibv_context *ctx,
					     struct ibv_parent_domain_init_attr *attr)
{
	const uint32_t known =
	    IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
	struct rocemu_vpd *base, *p;

	if (!ctx || !attr || !attr->pd || attr->pd->context != ctx ||
	    (attr->td && attr->td->context != ctx)) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->comp_mask & ~known) {
		errno = EINVAL;
		return NULL;
	}
	base = to_vpd(attr->pd);
	if (base->parent_of) {
		errno = EINVAL; /* made from a PD, not from another parent domain */
		return NULL;
	}
	if ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) &&
	    (!attr->alloc || !attr->free)) {
		errno = EINVAL;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	p->pd.context = ctx;
	p->epd = base->epd;
	p->parent_of = base;
	p->td = (struct rocemu_vtd *)attr->td;
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) {
		p->alloc = attr->alloc;
		p->free = attr->free;
		p->ealloc = (struct rocemu_alloc){.alloc = pd_alloc, .free = pd_free, .arg = p};
	}
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
		p->pd_context = attr->pd_context;
	pthread_mutex_lock(&ctx->mutex);
	base->users++;
	if (p->td)
		p->td->users++;
	pthread_mutex_unlock(&ctx->mutex);
	return &p->pd;
}

const struct rocemu_alloc *rocemu_pd_queue_alloc(struct ibv_pd *pd)
{
	struct rocemu_vpd *p = pd ? to_vpd(pd) : NULL;

	return p && p->parent_of && p->alloc ? &p->ealloc : NULL;
}

struct ibv_pd *rocemu_pd_use(struct ibv_pd *pd)
{
	if (!pd || !to_vpd(pd)->parent_of)
		return NULL;
	pthread_mutex_lock(&pd->context->mutex);
	to_vpd(pd)->users++;
	pthread_mutex_unlock(&pd->context->mutex);
	return pd;
}

void rocemu_pd_unuse(struct ibv_pd *counted)
{
	if (!counted)
		return;
	pthread_mutex_lock(&counted->context->mutex);
	to_vpd(counted)->users--;
	pthread_mutex_unlock(&counted->context->mutex);
}
