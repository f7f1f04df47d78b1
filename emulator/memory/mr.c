/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory regions: registration, re-registration, deregistration, advice.
 * The rules are those of ibv_reg_mr(3) and ibv_rereg_mr(3); see
 * mem_private.h for keys and host_memory.c for how memory is reached.
 */
#include <errno.h>
#include <stdlib.h>

#include "mem_private.h"

/* Bits ibv_reg_mr(3) lets us see. MW_BIND lets memory windows be bound to
 * the region (mw.c); ZERO_BASED is a window's bind flag, not a region's.
 * The optional range (RELAXED_ORDERING, ...) is a set of hints a provider
 * may ignore. The FLUSH rights (annex A19) are rdma-core 45's
 * IBV_ACCESS_FLUSH_* bits. */
#define MR_ACCESS_KNOWN                                                                            \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ON_DEMAND |                    \
	 IBV_ACCESS_HUGETLB | IBV_ACCESS_OPTIONAL_RANGE | ROCEMU_ACCESS_FLUSH_GLOBAL |             \
	 ROCEMU_ACCESS_FLUSH_PERSISTENT)

/** What a region will be, validated before anything changes. */
struct mr_layout {
	uint8_t *addr;
	uint64_t length;
	uint64_t iova;
	unsigned access;
	bool odp;
	bool implicit;
};

/*
 * Checks of ibv_reg_mr(3) that need no lock: flags, the remote-write rule,
 * address arithmetic, and (regular regions) the mapping itself.
 */
static int mr_layout_check(struct rocemu_engine *e, struct mr_layout *l)
{
	struct rocemu_caps caps;

	if (l->access & ~(unsigned)MR_ACCESS_KNOWN)
		return -EINVAL;
	/* ibv_reg_mr(3): remote write or atomic needs local write too. */
	if ((l->access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(l->access & IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	l->odp = l->access & IBV_ACCESS_ON_DEMAND;
	l->implicit = l->odp && l->addr == NULL && l->length == SIZE_MAX;
	if (l->implicit) {
		/* The whole address space, addressed by host virtual address. */
		return l->iova == 0 ? 0 : -EINVAL;
	}
	rocemu_engine_caps(e, &caps);
	if (l->length > caps.max_mr_size)
		return -EINVAL;
	if (l->length == 0)
		return 0;
	if ((uintptr_t)l->addr > UINTPTR_MAX - (l->length - 1) ||
	    l->iova > UINT64_MAX - (l->length - 1))
		return -EINVAL;
	if (l->odp)
		return 0; /* mapped later, on demand: every access checks */
	return rocemu_host_range_check(l->addr, l->length, l->access & IBV_ACCESS_LOCAL_WRITE);
}

static void mr_apply(struct rocemu_mr *mr, const struct mr_layout *l)
{
	mr->addr = l->addr;
	mr->length = l->length;
	mr->iova = l->iova;
	mr->access = l->access;
	mr->odp = l->odp;
	mr->implicit = l->implicit;
	mr->invalidated = false;
}

int rocemu_mr_reg(struct rocemu_pd *pd, void *addr, size_t length, uint64_t iova, unsigned access,
		  struct rocemu_mr **out)
{
	struct mr_layout l = {.addr = addr, .length = length, .iova = iova, .access = access};
	struct rocemu_engine *e;
	struct rocemu_mr *mr;
	int rc;

	if (!pd || !out)
		return -EINVAL;
	e = pd->engine;
	rc = mr_layout_check(e, &l);
	if (rc)
		return rc;
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	/* copies to and from registered memory survive it being freed */
	rocemu_host_guard_install();
	mr_apply(mr, &l);
	mr->pd = pd;
	rocemu_engine_lock(e);
	rc = rocemu_mem_key_alloc(rocemu_engine_mem(e), mr);
	if (rc == 0)
		rocemu_pd_get(pd);
	rocemu_engine_unlock(e);
	if (rc) {
		free(mr);
		return rc;
	}
	*out = mr;
	return 0;
}

/*
 * ibv_rereg_mr(3): flags say what changes; what is not named keeps its old
 * value, and the result must be a region ibv_reg_mr would accept. On error
 * nothing has changed; -EBUSY while memory windows are bound to it.
 *
 * Keys. A new PD or new rights keep the keys, as a NIC that reuses the
 * resource does ("where possible, resources are reused"): a peer holding
 * the R_Key goes on using it, now checked against the new PD and rights.
 * A new translation gets a new key: every access is translated packet by
 * packet under the engine lock, so the rest of a message in flight through
 * the old key fails with a remote access error instead of landing in the
 * new memory, and nothing touches the old memory once this returns.
 */
int rocemu_mr_rereg(struct rocemu_mr *mr, int flags, struct rocemu_pd *pd, void *addr,
		    size_t length, uint64_t iova, unsigned access)
{
	struct rocemu_pd *new_pd;
	struct rocemu_engine *e;
	struct mr_layout l;
	int rc;

	if (!mr || mr->foreign || flags == 0 || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED))
		return -EINVAL;
	e = mr->pd->engine;
	new_pd = mr->pd;
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		if (!pd || pd->engine != e)
			return -EINVAL;
		new_pd = pd;
	}
	/* The layout is read under the lock; the maps check runs with it held
	 * too, which is slow but rereg is rare and this keeps it atomic. */
	rocemu_engine_lock(e);
	if (mr->windows) {
		rocemu_engine_unlock(e);
		return -EBUSY;
	}
	l = (struct mr_layout){
	    .addr = mr->addr, .length = mr->length, .iova = mr->iova, .access = mr->access};
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		l.addr = addr;
		l.length = length;
		l.iova = iova;
	}
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		l.access = access;
	rc = mr_layout_check(e, &l);
	if (rc == 0) {
		if (new_pd != mr->pd) {
			rocemu_pd_get(new_pd);
			rocemu_pd_put(mr->pd);
			mr->pd = new_pd;
		}
		mr_apply(mr, &l);
		if (flags & IBV_REREG_MR_CHANGE_TRANSLATION)
			rocemu_mem_key_renew(rocemu_engine_mem(e), mr);
	}
	rocemu_engine_unlock(e);
	return rc;
}

/* -EBUSY while memory windows are bound to it (IBA 10.6.7: a region goes
 * only after its windows are unbound or deallocated). */
int rocemu_mr_dereg(struct rocemu_mr *mr)
{
	struct rocemu_engine *e;

	if (!mr || mr->foreign)
		return -EINVAL; /* an imported region: rocemu_mr_unimport */
	e = mr->pd->engine;
	rocemu_engine_lock(e);
	if (mr->windows) {
		rocemu_engine_unlock(e);
		return -EBUSY;
	}
	rocemu_mem_key_free(rocemu_engine_mem(e), mr);
	rocemu_pd_put(mr->pd);
	rocemu_engine_unlock(e);
	free(mr);
	return 0;
}

void rocemu_mr_info(const struct rocemu_mr *mr, struct rocemu_mr_info *info)
{
	struct rocemu_engine *e = mr->pd->engine;

	rocemu_engine_lock(e);
	info->lkey = mr->key;
	info->rkey = mr->key;
	info->addr = mr->addr;
	info->length = mr->implicit ? SIZE_MAX : (size_t)mr->length;
	info->iova = mr->iova;
	info->access = mr->access;
	rocemu_engine_unlock(e);
}

/*
 * ibv_advise_mr(3): a user-space NIC has nothing to prefetch, so this only
 * validates: bad flags or arguments are EINVAL, an lkey that does not
 * translate (or a range not in the process) EFAULT.
 */
int rocemu_mr_advise(struct rocemu_pd *pd, uint32_t flags, const struct ibv_sge *sg, uint32_t n)
{
	struct rocemu_mem_table *t;
	struct rocemu_engine *e;
	uint32_t i;
	int rc = 0;

	if (!pd || !sg || n == 0 || (flags & ~(uint32_t)IBV_ADVISE_MR_FLAG_FLUSH))
		return -EINVAL;
	e = pd->engine;
	rocemu_engine_lock(e);
	t = rocemu_engine_mem(e);
	for (i = 0; i < n && rc == 0; i++) {
		struct rocemu_mr *mr = rocemu_mem_lookup(t, sg[i].lkey);
		uint8_t *p;

		if (rocemu_mem_translate(t, pd, 0, sg[i].lkey, false, sg[i].addr, sg[i].length,
					 ROCEMU_RIGHT_LOCAL_READ, &p) != ROCEMU_MEM_OK)
			rc = -EFAULT;
		else if (mr->odp && rocemu_host_range_check(p, sg[i].length, false))
			rc = -EFAULT;
	}
	rocemu_engine_unlock(e);
	return rc;
}
