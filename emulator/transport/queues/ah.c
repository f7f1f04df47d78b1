/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Address handles for UD: a copy of the GRH fields. Every packet carries a
 * GRH (the IP header), and its source GID index must exist in the port's GID
 * table (ibv_create_ah(3): EINVAL otherwise).
 *
 * Also the LID-only address vectors, a rocemu extension (docs/verbs-provider.md,
 * "LID-only address vectors") used by both UD AHs and RC/UC QP paths: a port's
 * LID is the low 16 bits of its first IPv4 address, and an AV with
 * is_global = 0 names the host (our IPv4 & 0xFFFF0000) | dlid.
 */
#include <arpa/inet.h>
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

/* Unicast LIDs are 0x0001..0xBFFF; 0 is "no LID", 0xC000.. multicast/permissive. */
static bool lid_is_unicast(uint32_t lid)
{
	return lid != 0 && lid < 0xC000;
}

/* The GID index of the port's first IPv4 address, or -1. */
static int first_ipv4(const struct rocemu_port *port, uint8_t gid[16])
{
	unsigned n = rocemu_port_gid_count(port);

	for (unsigned i = 0; i < n; i++)
		if (rocemu_port_gid(port, i, gid) == 0 && roce_gid_is_v4mapped(gid))
			return (int)i;
	return -1;
}

uint16_t rocemu_lid_of_port(const struct rocemu_port *port)
{
	uint8_t gid[16];
	uint32_t lid;

	if (!port || first_ipv4(port, gid) < 0)
		return 0;
	lid = ntohl(roce_gid_to_ipv4(gid)) & 0xFFFF;
	return lid_is_unicast(lid) ? (uint16_t)lid : 0;
}

uint16_t rocemu_lid_of_gid(const struct rocemu_port *port, const uint8_t gid[16])
{
	uint8_t own[16];
	uint32_t peer, mine;

	if (!port || !gid || !roce_gid_is_v4mapped(gid) || first_ipv4(port, own) < 0)
		return 0;
	peer = ntohl(roce_gid_to_ipv4(gid));
	mine = ntohl(roce_gid_to_ipv4(own));
	if ((peer & 0xFFFF0000u) != (mine & 0xFFFF0000u) || !lid_is_unicast(peer & 0xFFFF))
		return 0;
	return (uint16_t)(peer & 0xFFFF);
}

int rocemu_av_resolve(const struct rocemu_port *port, const struct ibv_ah_attr *in,
		      struct ibv_ah_attr *out)
{
	uint8_t own[16];
	uint32_t mine;
	int idx;

	if (!port || !in || !out)
		return -EINVAL;
	*out = *in;
	if (in->is_global)
		return 0;
	if (!lid_is_unicast(in->dlid))
		return -EINVAL;
	idx = first_ipv4(port, own);
	if (idx < 0)
		return -EINVAL;
	mine = ntohl(roce_gid_to_ipv4(own));
	out->is_global = 1;
	memset(&out->grh, 0, sizeof(out->grh));
	roce_gid_from_ipv4(out->grh.dgid.raw, htonl((mine & 0xFFFF0000u) | in->dlid));
	out->grh.sgid_index = (uint8_t)idx;
	out->grh.hop_limit = 64;
	out->grh.traffic_class = 0;
	out->grh.flow_label = 0;
	return 0;
}

int rocemu_ah_create(struct rocemu_pd *pd, const struct ibv_ah_attr *attr, struct rocemu_ah **out)
{
	struct rocemu_engine *e;
	struct rocemu_caps caps;
	struct ibv_ah_attr av;
	struct ah_obj *a;
	int rc = 0;

	if (!pd || !attr || !out)
		return -EINVAL;
	e = pd->engine;
	/* is_global = 0: the LID-only extension gives the GRH (EINVAL for dlid 0). */
	rc = rocemu_av_resolve(rocemu_engine_port(e), attr, &av);
	if (rc < 0)
		return rc;
	attr = &av;
	rocemu_engine_caps(e, &caps);
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->ah.pd = pd;
	memcpy(a->ah.dgid, attr->grh.dgid.raw, sizeof(a->ah.dgid));
	a->ah.sgid_index = attr->grh.sgid_index;
	a->ah.tclass = attr->grh.traffic_class;
	a->ah.hop_limit = attr->grh.hop_limit;
	/* 20 bits on the wire; like NICs, keep the low 20 (UCX passes ~0 for "any"). */
	a->ah.flow_label = attr->grh.flow_label & ROCE_FLOW_LABEL_MASK;
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
