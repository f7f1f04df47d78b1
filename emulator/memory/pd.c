/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Protection domains: a handle and a reference count. MRs, QPs, SRQs and
 * AHs hold a reference; a PD in use cannot be freed (ibv_dealloc_pd(3):
 * EBUSY).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include "mem_private.h"

struct pd_obj {
	struct rocemu_pd pd;
	struct rocemu_obj obj;
};

static void pd_release(struct rocemu_obj *obj)
{
	free(container_of(obj, struct pd_obj, obj));
}

int rocemu_pd_alloc(struct rocemu_engine *e, struct rocemu_pd **out)
{
	struct rocemu_mem_table *t;
	struct rocemu_caps caps;
	struct pd_obj *p;
	int rc;

	if (!e || !out)
		return -EINVAL;
	rocemu_engine_caps(e, &caps);
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	rocemu_engine_lock(e);
	t = rocemu_engine_mem(e);
	rc = rocemu_obj_track(t, &p->obj, ROCEMU_OBJ_PD, caps.max_pd, pd_release);
	if (rc == 0) {
		p->pd.engine = e;
		p->pd.handle = rocemu_mem_pd_handle(t);
	}
	rocemu_engine_unlock(e);
	if (rc) {
		free(p);
		return rc;
	}
	*out = &p->pd;
	return 0;
}

int rocemu_pd_free(struct rocemu_pd *pd)
{
	struct rocemu_engine *e;
	struct pd_obj *p;

	if (!pd)
		return -EINVAL;
	e = pd->engine;
	p = container_of(pd, struct pd_obj, pd);
	rocemu_engine_lock(e);
	if (pd->refcnt > 0) {
		rocemu_engine_unlock(e);
		return -EBUSY;
	}
	rocemu_obj_untrack(rocemu_engine_mem(e), &p->obj);
	rocemu_engine_unlock(e);
	free(p);
	return 0;
}

void rocemu_pd_get(struct rocemu_pd *pd)
{
	pd->refcnt++;
}

void rocemu_pd_put(struct rocemu_pd *pd)
{
	if (pd->refcnt > 0)
		pd->refcnt--;
}
