/* SPDX-License-Identifier: BSD-3-Clause */
/* Protection domains and memory regions (ibv_alloc_pd(3), ibv_reg_mr(3), ibv_rereg_mr(3)). */
#include <stdlib.h>
#include <string.h>

#include "provider.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	if (rocemu_dead(ctx))
		return rocemu_inherited_null(ctx);
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
	rc = rocemu_handle_add(to_vctx(ctx)->file, ROCEMU_VOBJ_PD, p->epd, NULL, &p->pd.handle);
	if (rc < 0) {
		rocemu_pd_free(p->epd);
		free(p);
		return rocemu_null_errno(rc);
	}
	p->pd.context = ctx;
	return &p->pd;
}
ROCEMU_PUBLIC(ibv_alloc_pd)

static int pd_destroy(void *epd, void *aux)
{
	(void)aux;
	return rocemu_pd_free(epd);
}

/* ibv_alloc_parent_domain(3): a parent domain is freed with ibv_dealloc_pd,
 * once nothing uses it; a PD cannot go while parent domains stand for it. */
int ibv_dealloc_pd(struct ibv_pd *pd)
{
	if (rocemu_dead(ROCEMU_CTX_OF(pd)))
		return rocemu_inherited_fail(ROCEMU_CTX_OF(pd));
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
	if (p->remote) { /* another process's PD: our stand-in for it (import.c) */
		int rc = rocemu_remote_drop(pd->context, ROCEMU_VOBJ_PD, pd->handle, true);
		if (rc < 0)
			return -rc;
		free(p);
		return 0;
	}
	/* through any of its wrappers, once (import.c) */
	int rc = rocemu_handle_destroy(to_vctx(pd->context)->file, ROCEMU_VOBJ_PD, pd->handle,
				       p->epd, pd_destroy);
	if (rc < 0)
		return -rc;
	free(p);
	return 0;
}
ROCEMU_PUBLIC(ibv_dealloc_pd)

void rocemu_mr_sync(struct rocemu_vmr *m)
{
	struct rocemu_mr_info info;

	rocemu_mr_info(m->emr, &info);
	m->mr.addr = m->edm ? NULL : info.addr;
	m->mr.length = info.length;
	m->mr.lkey = info.lkey;
	m->mr.rkey = info.rkey;
}

/* What another process on the host imports (import.c). */
static void mr_publish(struct rocemu_vmr *m)
{
	struct rocemu_mr_info info;

	rocemu_mr_info(m->emr, &info);
	rocemu_handle_publish_mr(to_vctx(m->mr.context)->file, m->mr.handle, m->mr.pd->handle,
				 &m->mr, info.addr, info.length == SIZE_MAX && !info.addr,
				 info.iova, info.access);
}

static int mr_destroy(void *emr, void *edm)
{
	return edm ? rocemu_dm_dereg_mr(edm, emr) : rocemu_mr_dereg(emr);
}

struct ibv_mr *rocemu_reg_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t addr, size_t length,
			     uint64_t iova, unsigned access)
{
	if (rocemu_dead(ROCEMU_CTX_OF(pd)))
		return rocemu_inherited_null(ROCEMU_CTX_OF(pd));
	if (!pd || (dm && dm->context != pd->context)) {
		errno = EINVAL;
		return NULL;
	}
	struct rocemu_vmr *m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	int rc;
	if (dm)
		rc = rocemu_dm_mr_reg(m, dm, to_vpd(pd)->epd, addr, length, access);
	else /* IBV_ACCESS_OPTIONAL_RANGE bits are hints a device may ignore (ibv_reg_mr(3)). */
		rc = rocemu_mr_reg(to_vpd(pd)->epd, (void *)(uintptr_t)addr, length, iova,
				   access & ~(unsigned)IBV_ACCESS_OPTIONAL_RANGE, &m->emr);
	if (rc == 0) {
		rc = rocemu_handle_add(to_vctx(pd->context)->file, ROCEMU_VOBJ_MR, m->emr, m->edm,
				       &m->mr.handle);
		if (rc < 0)
			mr_destroy(m->emr, m->edm);
	}
	if (rc < 0) {
		free(m);
		return rocemu_null_errno(rc);
	}
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->epd = to_vpd(pd)->epd;
	rocemu_mr_sync(m);
	mr_publish(m);
	return &m->mr;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
				unsigned int access)
{
	return rocemu_reg_mr(pd, NULL, (uint64_t)(uintptr_t)addr, length, iova, access);
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

/*
 * ibv_rereg_mr(3). What libibverbs itself checks before it asks the device
 * is IBV_REREG_MR_ERR_INPUT: unknown flags, a translation without an address
 * or a length, access bits without IBV_REREG_MR_CHANGE_ACCESS, a new PD that
 * is missing or of another device. What the device refuses (no flags, a
 * result ibv_reg_mr would refuse, memory windows bound, a device memory
 * region) is IBV_REREG_MR_ERR_CMD with errno set; the man page says such a
 * region should not be used, but here it is left exactly as it was. Fork
 * needs no care (async.c), so the two fork errors never happen. The keys
 * stay unless the translation changes (emulator/memory/mr.c).
 */
int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length,
		 int access)
{
	if (rocemu_dead(ROCEMU_CTX_OF(mr)))
		return rocemu_inherited_fail(ROCEMU_CTX_OF(mr)), IBV_REREG_MR_ERR_CMD;
	struct rocemu_vmr *m = (struct rocemu_vmr *)mr;
	struct rocemu_pd *epd = NULL;
	int rc;

	if (!mr || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) ||
	    ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!addr || !length)) ||
	    (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS)) ||
	    ((flags & IBV_REREG_MR_CHANGE_PD) && (!pd || pd->context != mr->context))) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if (m->edm) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_CMD;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD)
		epd = to_vpd(pd)->epd;
	/* IBV_ACCESS_OPTIONAL_RANGE bits are hints, as at registration. */
	rc = rocemu_mr_rereg(m->emr, flags, epd, addr, length, (uint64_t)(uintptr_t)addr,
			     (unsigned)access & ~(unsigned)IBV_ACCESS_OPTIONAL_RANGE);
	if (rc < 0) {
		errno = -rc;
		return IBV_REREG_MR_ERR_CMD;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		m->mr.pd = pd;
		m->epd = epd;
	}
	rocemu_mr_sync(m);
	mr_publish(m);
	return 0;
}
ROCEMU_PUBLIC(ibv_rereg_mr)

int ibv_dereg_mr(struct ibv_mr *mr)
{
	if (rocemu_dead(ROCEMU_CTX_OF(mr)))
		return rocemu_inherited_fail(ROCEMU_CTX_OF(mr));
	if (!mr)
		return EINVAL;
	struct rocemu_vmr *m = (struct rocemu_vmr *)mr;
	if (m->remote) { /* another process's region: our stand-in for it (import.c) */
		int rc = rocemu_remote_drop(mr->context, ROCEMU_VOBJ_MR, mr->handle, true);
		if (rc < 0)
			return -rc;
		free(m);
		return 0;
	}
	/* through any of its wrappers, once (import.c) */
	int rc = rocemu_handle_destroy(to_vctx(mr->context)->file, ROCEMU_VOBJ_MR, mr->handle,
				       m->emr, mr_destroy);
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

/* ------------------------------------------------------------------------ */
/* Memory windows (ibv_alloc_mw(3), ibv_bind_mw(3)); the rules are the      */
/* engine's (emulator/memory/mw.c).                                          */

struct ibv_mw *rocemu_op_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct rocemu_vmw *m;
	int rc;

	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	rc = rocemu_mw_alloc(to_vpd(pd)->epd, type, &m->emw);
	if (rc < 0) {
		free(m);
		return rocemu_null_errno(rc);
	}
	m->parent_domain = rocemu_pd_use(pd);
	m->epd = to_vpd(pd)->epd;
	m->mw.context = pd->context;
	m->mw.pd = pd;
	m->mw.type = type;
	m->mw.rkey = rocemu_mw_rkey(m->emw);
	m->mw.handle = m->mw.rkey;
	return &m->mw;
}

int rocemu_op_dealloc_mw(struct ibv_mw *mw)
{
	struct rocemu_vmw *m = (struct rocemu_vmw *)mw;
	int rc;

	if (!mw)
		return EINVAL;
	rc = rocemu_mw_dealloc(m->emw);
	if (rc < 0)
		return -rc;
	rocemu_pd_unuse(m->parent_domain);
	free(m);
	return 0;
}

int rocemu_bind_wr(struct ibv_mw *mw, uint32_t rkey, const struct ibv_mw_bind_info *info,
		   enum ibv_mw_type type, struct rocemu_send_wr *out)
{
	if (!mw || !info || mw->type != type || (rkey >> 8) != (mw->rkey >> 8))
		return EINVAL;
	if (info->mr && (info->mr->context != mw->context ||
			 ((struct rocemu_vmr *)info->mr)->epd != ((struct rocemu_vmw *)mw)->epd))
		return EINVAL;
	out->opcode = IBV_WR_BIND_MW;
	out->rkey = rkey;
	out->remote_addr = info->addr;
	out->bind_length = info->length;
	out->bind_lkey = info->mr ? info->mr->lkey : 0;
	out->bind_access = info->mw_access_flags;
	out->bind_type = (uint8_t)type;
	out->num_sge = 0;
	out->sg_list = NULL;
	return 0;
}

/*
 * ibv_bind_mw(3) (type 1; libibverbs checked the type and the region's PD):
 * a bind WR to the window's next R_Key (ibv_inc_rkey), which the window
 * shows at once, as mlx5 does; the completion says whether the bind held.
 */
int rocemu_op_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind)
{
	struct rocemu_send_wr wr;
	uint32_t rkey;
	int rc;

	if (!qp || !mw || !bind || qp->context != mw->context)
		return EINVAL;
	memset(&wr, 0, sizeof(wr));
	rkey = ibv_inc_rkey(mw->rkey);
	rc = rocemu_bind_wr(mw, rkey, &bind->bind_info, IBV_MW_TYPE_1, &wr);
	if (rc)
		return rc;
	wr.wr_id = bind->wr_id;
	wr.send_flags = bind->send_flags;
	rc = rocemu_qp_post_send(((struct rocemu_vqp *)qp)->eqp, &wr);
	if (rc < 0)
		return -rc;
	mw->rkey = rkey;
	return 0;
}
