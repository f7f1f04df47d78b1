/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdma_cm multicast: rdma_join_multicast/_ex and rdma_leave_multicast on
 * UD ids (the MGID from the IP group, the AH and QKEY an application gets in
 * its JOIN event).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include "cma.h"
#include "stats_print.h"

/* Whether sa is an IP multicast address (224.0.0.0/4, ff00::/8). */
static bool addr_multicast(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return IN_MULTICAST(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr));
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_MULTICAST(&((const struct sockaddr_in6 *)sa)->sin6_addr);
	return false;
}

static struct cma_mc *mc_find(struct cma_id *c, const union ibv_gid *mgid, struct cma_mc ***prev)
{
	for (struct cma_mc **pp = &c->mcs; *pp; pp = &(*pp)->next)
		if (!memcmp(&(*pp)->mgid, mgid, sizeof(*mgid))) {
			if (prev)
				*prev = pp;
			return *pp;
		}
	return NULL;
}

/* The group's address vector, as Linux's CM gives it for RoCE: the id's own
 * (source GID, traffic class, hop limit 64) to the group's GID, no flow label. */
static void mc_ah(const struct cma_id *c, const struct cma_mc *mc, struct ibv_ah_attr *ah)
{
	cma_fill_ah(c, ah);
	ah->grh.dgid = mc->mgid;
	ah->grh.flow_label = 0;
}

/*
 * A join on RoCE needs no MAD (there is no SA): the group's GID is its IP
 * address, and the JOIN event comes at once. As librdmacm does, the id's QP
 * (if it has one) is attached to the group, which makes the port take the
 * group's frames and report the membership on the segment (IGMP/MLD); a
 * send-only member is not attached, as Linux sends no IGMP report for it.
 */
static int join_locked(struct cma_id *c, const struct sockaddr *addr, uint32_t flags, void *context)
{
	struct cma_event *e;
	struct cma_mc *mc;
	int err = 0;

	if (!addr_multicast(addr) || c->id.qp_type != IBV_QPT_UD || !c->dev)
		return -EINVAL;
	mc = calloc(1, sizeof(*mc));
	if (!mc)
		return -ENOMEM;
	cma_sockaddr_to_gid(addr, &mc->mgid);
	if (mc_find(c, &mc->mgid, NULL)) {
		free(mc);
		return -EADDRINUSE;
	}
	memcpy(&mc->addr, addr, cma_sockaddr_len(addr));
	mc->context = context;
	mc->flags = flags;
	if (c->id.qp && flags == RDMA_MC_JOIN_FLAG_FULLMEMBER) {
		err = ibv_attach_mcast(c->id.qp, &mc->mgid, 0);
		mc->attached = err == 0;
	}
	mc->next = c->mcs;
	c->mcs = mc;
	e = cma_event_post(c, err ? RDMA_CM_EVENT_MULTICAST_ERROR : RDMA_CM_EVENT_MULTICAST_JOIN,
			   -err, NULL, 0);
	if (!e)
		return -ENOMEM;
	e->ev.param.ud.private_data = context;
	e->ev.param.ud.private_data_len = 0;
	mc_ah(c, mc, &e->ev.param.ud.ah_attr);
	e->ev.param.ud.qp_num = ROCEMU_MCAST_QPN;
	e->ev.param.ud.qkey = CMA_UDP_QKEY;
	return 0;
}

static int join(struct rdma_cm_id *id, const struct sockaddr *addr, uint32_t flags, void *context)
{
	struct cma_id *c =
	    cma_lock_in_state(id, IN_STATE(CMA_ADDR_BOUND) | IN_STATE(CMA_ADDR_RESOLVED) |
				      IN_STATE(CMA_ROUTE_RESOLVED));
	int rc;

	if (!c)
		return -1;
	rc = join_locked(c, addr, flags, context);
	pthread_mutex_unlock(&cma_lock);
	if (rc < 0)
		return cma_fail(-rc);
	return cma_is_sync(c) ? cma_sync_wait(c, RDMA_CM_EVENT_MULTICAST_JOIN) : 0;
}

int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	if (!id || !addr || !cma_sockaddr_len(addr))
		return cma_fail(EINVAL);
	return join(id, addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}
ROCEMU_PUBLIC(rdma_join_multicast)

int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *attr,
			   void *context)
{
	if (!id || !attr)
		return cma_fail(EINVAL);
	if (attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED)
		return cma_fail(ENOTSUP);
	if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) ||
	    !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) || !attr->addr ||
	    !cma_sockaddr_len(attr->addr) ||
	    (attr->join_flags != RDMA_MC_JOIN_FLAG_FULLMEMBER &&
	     attr->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER))
		return cma_fail(EINVAL);
	return join(id, attr->addr, attr->join_flags, context);
}
ROCEMU_PUBLIC(rdma_join_multicast_ex)

void cma_mc_leave(struct cma_id *c, struct cma_mc *mc)
{
	if (mc->attached && c->id.qp)
		ibv_detach_mcast(c->id.qp, &mc->mgid, 0);
	free(mc);
}

int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct cma_mc *mc, **prev = NULL;
	union ibv_gid mgid;

	if (!id || !addr || !cma_sockaddr_len(addr))
		return cma_fail(EINVAL);
	cma_sockaddr_to_gid(addr, &mgid);
	pthread_mutex_lock(&cma_lock);
	struct cma_id *c = cma_id_of(id);
	mc = mc_find(c, &mgid, &prev);
	if (!mc) {
		pthread_mutex_unlock(&cma_lock);
		return cma_fail(EADDRNOTAVAIL);
	}
	*prev = mc->next;
	cma_mc_leave(c, mc);
	pthread_mutex_unlock(&cma_lock);
	return 0;
}
ROCEMU_PUBLIC(rdma_leave_multicast)
