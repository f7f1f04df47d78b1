/* SPDX-License-Identifier: BSD-3-Clause */
/* Protection domains and memory regions (ibv_alloc_pd(3), ibv_reg_mr(3), ibv_rereg_mr(3)). */
#include <stdlib.h>
#include <string.h>

#include "provider.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	if (!ctx) {
		errno = EINVAL;
		return NULL;
	}
	struct rocemu_vpd *p = calloc(1, sizeof(*p));
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	int rc = rocemu_pd_alloc(to_vctx(ctx)->engine, &p->epd);
	if (rc < 0) {
		free(p);
		return rocemu_null_errno(rc);
	}
	p->pd.context = ctx;
	return &p->pd;
}
ROCEMU_PUBLIC(ibv_alloc_pd)

/* ibv_alloc_parent_domain(3): a parent domain is freed with ibv_dealloc_pd,
 * once nothing uses it; a PD cannot go while parent domains stand for it. */
int ibv_dealloc_pd(struct ibv_pd *pd)
{
	if (!pd)
		return EINVAL;
	struct rocemu_vpd *p = (struct rocemu_vpd *)pd;
	bool busy;

	pthread_mutex_lock(&pd->context->mutex);
	busy = p->users > 0;
	if (!busy && p->parent_of) {
		p->parent_of->users--;
		if (p->td)
			((struct rocemu_vtd *)p->td)->users--;
	}
	pthread_mutex_unlock(&pd->context->mutex);
	if (busy)
		return EBUSY;
	if (p->parent_of) {
		free(p);
		return 0;
	}
	int rc = rocemu_pd_free(p->epd);
	if (rc < 0)
		return -rc;
	free(p);
	return 0;
}
ROCEMU_PUBLIC(ibv_dealloc_pd)

static void mr_sync(struct rocemu_vmr *m)
{
	struct rocemu_mr_info info;

	rocemu_mr_info(m->emr, &info);
	m->mr.addr = info.addr;
	m->mr.length = info.length;
	m->mr.lkey = info.lkey;
	m->mr.rkey = info.rkey;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
				unsigned int access)
{
	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	struct rocemu_vmr *m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	/* IBV_ACCESS_OPTIONAL_RANGE bits are hints a device may ignore (ibv_reg_mr(3)). */
	int rc = rocemu_mr_reg(((struct rocemu_vpd *)pd)->epd, addr, length, iova,
			       access & ~(unsigned)IBV_ACCESS_OPTIONAL_RANGE, &m->emr);
	if (rc < 0) {
		free(m);
		return rocemu_null_errno(rc);
	}
	m->mr.context = pd->context;
	m->mr.pd = pd;
	mr_sync(m);
	return &m->mr;
}
ROCEMU_PUBLIC(ibv_reg_mr_iova2)

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uint64_t)(uintptr_t)addr, (unsigned)access);
}
ROCEMU_PUBLIC(ibv_reg_mr)

struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
			       int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned)access);
}
ROCEMU_PUBLIC(ibv_reg_mr_iova)

int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length,
		 int access)
{
	if (!mr)
		return IBV_REREG_MR_ERR_INPUT;
	if (flags & ~(IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD |
		      IBV_REREG_MR_CHANGE_ACCESS) ||
	    !flags) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if ((flags & IBV_REREG_MR_CHANGE_PD) && !pd) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	struct rocemu_vmr *m = (struct rocemu_vmr *)mr;
	struct rocemu_pd *epd =
	    (flags & IBV_REREG_MR_CHANGE_PD) ? ((struct rocemu_vpd *)pd)->epd : NULL;
	int rc = rocemu_mr_rereg(m->emr, flags, epd, addr, length, (uint64_t)(uintptr_t)addr,
				 (unsigned)access);
	if (rc < 0) {
		errno = -rc;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD)
		m->mr.pd = pd;
	mr_sync(m);
	return 0;
}
ROCEMU_PUBLIC(ibv_rereg_mr)

int ibv_dereg_mr(struct ibv_mr *mr)
{
	if (!mr)
		return EINVAL;
	struct rocemu_vmr *m = (struct rocemu_vmr *)mr;
	int rc = rocemu_mr_dereg(m->emr);
	if (rc < 0)
		return -rc;
	free(m);
	return 0;
}
ROCEMU_PUBLIC(ibv_dereg_mr)

int rocemu_op_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
			struct ibv_sge *sg, uint32_t n)
{
	if (!pd || !sg || !n)
		return EINVAL;
	if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return EINVAL;
	int rc = rocemu_mr_advise(((struct rocemu_vpd *)pd)->epd, flags, sg, n);
	return rc < 0 ? -rc : 0;
}
