/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Address handles for UD: a copy of the GRH fields. RoCE has no LIDs, so
 * every AH must be global, and its source GID index must exist in the
 * port's GID table (ibv_create_ah(3): EINVAL otherwise).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../memory/mem_objects.h"
#include "../rocemu_internal.h"

struct ah_obj {
	struct rocemu_ah ah;
	struct rocemu_obj obj;
};

static void ah_release(struct rocemu_obj *obj)
{
	free(container_of(obj, struct ah_obj, obj));
}

int rocemu_ah_create(struct rocemu_pd *pd, const struct ibv_ah_attr *attr, struct rocemu_ah **out)
{
	struct rocemu_engine *e;
	struct rocemu_caps caps;
	struct ah_obj *a;
	int rc = 0;

	if (!pd || !attr || !out || !attr->is_global)
		return -EINVAL;
	/* flow_label is 20 bits on the wire. */
	if (attr->grh.flow_label >> 20)
		return -EINVAL;
	e = pd->engine;
	rocemu_engine_caps(e, &caps);
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->ah.pd = pd;
	memcpy(a->ah.dgid, attr->grh.dgid.raw, sizeof(a->ah.dgid));
	a->ah.sgid_index = attr->grh.sgid_index;
	a->ah.tclass = attr->grh.traffic_class;
	a->ah.hop_limit = attr->grh.hop_limit;
	a->ah.flow_label = attr->grh.flow_label;
	a->ah.sl = attr->sl;
	a->ah.dlid = attr->dlid;
	rocemu_engine_lock(e);
	if (attr->grh.sgid_index >= rocemu_port_gid_count(rocemu_engine_port(e)))
		rc = -EINVAL;
	if (rc == 0)
		rc = rocemu_obj_track(rocemu_engine_mem(e), &a->obj, ROCEMU_OBJ_AH, caps.max_ah,
				      ah_release);
	if (rc == 0)
		rocemu_pd_get(pd);
	rocemu_engine_unlock(e);
	if (rc) {
		free(a);
		return rc;
	}
	*out = &a->ah;
	return 0;
}

int rocemu_ah_destroy(struct rocemu_ah *ah)
{
	struct rocemu_engine *e;
	struct ah_obj *a;

	if (!ah)
		return -EINVAL;
	a = container_of(ah, struct ah_obj, ah);
	e = ah->pd->engine;
	rocemu_engine_lock(e);
	rocemu_obj_untrack(rocemu_engine_mem(e), &a->obj);
	rocemu_pd_put(ah->pd);
	rocemu_engine_unlock(e);
	free(a);
	return 0;
}
