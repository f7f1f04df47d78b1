/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UD multicast (IBA 10.5 and A17.4.5.1): a UD QP attached to a multicast
 * group receives every datagram sent to the group's GID with the multicast
 * QPN 0xFFFFFF, each attached QP its own copy; a datagram to a group is sent
 * like any other (an AH with the group's GID, remote QPN 0xFFFFFF). On RoCE a
 * group's GID is an IP multicast address: the port takes its frames and
 * joins it on the segment (port_mcast.c). Attaching needs a UD QP and a
 * multicast GID (EINVAL otherwise, as the kernel's ib_attach_mcast says); a
 * QP still attached cannot be destroyed (EBUSY, as uverbs answers).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rocemu_transport.h"

struct rocemu_mcast_group {
	uint8_t gid[16];
	uint32_t n;
	struct rocemu_qp *qps[ROCEMU_MCAST_QP_ATTACH];
};

static struct rocemu_mcast_group *group_find(struct rocemu_engine *e, const uint8_t gid[16])
{
	for (uint32_t i = 0; i < e->n_mcast; i++)
		if (!memcmp(e->mcast[i].gid, gid, 16))
			return &e->mcast[i];
	return NULL;
}

static int qp_index(const struct rocemu_mcast_group *g, const struct rocemu_qp *qp)
{
	for (uint32_t i = 0; i < g->n; i++)
		if (g->qps[i] == qp)
			return (int)i;
	return -1;
}

static int attach_locked(struct rocemu_qp *qp, const uint8_t gid[16])
{
	struct rocemu_engine *e = qp->engine;
	struct rocemu_mcast_group *g = group_find(e, gid);
	int rc;

	if (g && qp_index(g, qp) >= 0)
		return 0; /* attached already: nothing changes */
	if (g && g->n == ROCEMU_MCAST_QP_ATTACH)
		return -ENOMEM;
	if (!g) {
		if (e->n_mcast == ROCEMU_MCAST_GROUPS)
			return -ENOMEM;
		if (!e->mcast) {
			e->mcast = calloc(ROCEMU_MCAST_GROUPS, sizeof(*e->mcast));
			if (!e->mcast)
				return -ENOMEM;
		}
		rc = rocemu_port_mcast_join(e->port, gid);
		if (rc < 0)
			return rc;
		g = &e->mcast[e->n_mcast++];
		memcpy(g->gid, gid, 16);
		g->n = 0;
	}
	g->qps[g->n++] = qp;
	qp->n_mcast++;
	return 0;
}

int rocemu_qp_attach_mcast(struct rocemu_qp *qp, const uint8_t gid[16])
{
	int rc;

	if (!qp || !gid || qp->type != IBV_QPT_UD || !rocemu_gid_is_multicast(gid))
		return -EINVAL;
	rocemu_engine_lock(qp->engine);
	rc = attach_locked(qp, gid);
	rocemu_engine_unlock(qp->engine);
	return rc;
}

int rocemu_qp_detach_mcast(struct rocemu_qp *qp, const uint8_t gid[16])
{
	struct rocemu_engine *e;
	struct rocemu_mcast_group *g;
	int i, rc = -EINVAL;

	if (!qp || !gid)
		return -EINVAL;
	e = qp->engine;
	rocemu_engine_lock(e);
	g = group_find(e, gid);
	i = g ? qp_index(g, qp) : -1;
	if (i >= 0) {
		g->qps[i] = g->qps[--g->n];
		qp->n_mcast--;
		if (g->n == 0) {
			rocemu_port_mcast_leave(e->port, gid);
			*g = e->mcast[--e->n_mcast];
		}
		rc = 0;
	}
	rocemu_engine_unlock(e);
	return rc;
}

void rocemu_mcast_rx(struct rocemu_engine *e, struct rte_mbuf *m, const struct roce_pkt *pkt)
{
	struct rocemu_mcast_group *g = group_find(e, pkt->path.dst_gid);

	if (!g) {
		ENGINE_COUNT(e, drop_mcast_no_group);
		return;
	}
	if (pkt->op->transport != ROCE_TRANSPORT_UD) {
		ENGINE_COUNT(e, drop_qp_type); /* groups are for datagrams only */
		return;
	}
	ENGINE_COUNT(e, rx_mcast);
	for (uint32_t i = 0; i < g->n; i++)
		rocemu_ud_rx(g->qps[i], m, pkt);
}

void rocemu_mcast_free_all(struct rocemu_engine *e)
{
	free(e->mcast);
	e->mcast = NULL;
	e->n_mcast = 0;
}
