/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared receive queues and address handles. */
#include <stdlib.h>
#include <string.h>

#include "provider.h"

/* ------------------------------------------------------------------------ */
/* SRQ                                                                        */

static struct ibv_srq *srq_create(struct ibv_pd *pd, void *srq_context, struct ibv_srq_attr *attr,
				  struct ibv_xrcd *xrcd, struct ibv_cq *cq)
{
	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	struct rocemu_vsrq *s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->ctx = to_vctx(pd->context);
	struct rocemu_srq_init init = {
	    .pd = ((struct rocemu_vpd *)pd)->epd,
	    .max_wr = attr->max_wr,
	    .max_sge = attr->max_sge,
	    .user_ctx = s,
	    .xrcd = xrcd ? to_vxrcd(xrcd)->exrcd : NULL,
	    .cq = cq ? ((struct rocemu_vcq *)cq)->ecq : NULL,
	};
	int rc = rocemu_srq_create_ex(&init, &s->esrq);
	if (rc < 0) {
		free(s);
		return rocemu_null_errno(rc);
	}
	/* ibv_create_srq(3): the attributes are updated with the values granted. */
	struct ibv_srq_attr got;
	if (rocemu_srq_query(s->esrq, &got) == 0) {
		attr->max_wr = got.max_wr;
		attr->max_sge = got.max_sge;
	}
	s->srq.context = pd->context;
	s->srq.srq_context = srq_context;
	s->srq.pd = pd;
	pthread_mutex_init(&s->srq.mutex, NULL);
	pthread_cond_init(&s->srq.cond, NULL);
	return &s->srq;
}

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *init)
{
	if (rocemu_dead(ROCEMU_CTX_OF(pd)))
		return rocemu_inherited_null(ROCEMU_CTX_OF(pd));
	if (!init) {
		errno = EINVAL;
		return NULL;
	}
	return srq_create(pd, init->srq_context, &init->attr, NULL, NULL);
}
ROCEMU_PUBLIC(ibv_create_srq)

struct ibv_srq *rocemu_op_create_srq_ex(struct ibv_context *ctx, struct ibv_srq_init_attr_ex *a)
{
	if (!ctx || !a || !(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd) {
		errno = EINVAL;
		return NULL;
	}
	uint32_t known = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD |
			 IBV_SRQ_INIT_ATTR_CQ;
	enum ibv_srq_type t =
	    (a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? a->srq_type : IBV_SRQT_BASIC;
	if ((a->comp_mask & ~known) || (t != IBV_SRQT_BASIC && t != IBV_SRQT_XRC)) {
		errno = EOPNOTSUPP; /* tag-matching SRQs */
		return NULL;
	}
	if (t == IBV_SRQT_BASIC)
		return srq_create(a->pd, a->srq_context, &a->attr, NULL, NULL);
	/* ibv_create_srq_ex(3): an XRC SRQ needs its domain and a CQ */
	if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !(a->comp_mask & IBV_SRQ_INIT_ATTR_CQ) ||
	    !a->xrcd || !a->cq || a->xrcd->context != ctx || a->cq->context != ctx ||
	    a->pd->context != ctx) {
		errno = EINVAL;
		return NULL;
	}
	return srq_create(a->pd, a->srq_context, &a->attr, a->xrcd, a->cq);
}

int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask)
{
	if (rocemu_dead(ROCEMU_CTX_OF(srq)))
		return rocemu_inherited_fail(ROCEMU_CTX_OF(srq));
	if (!srq || !attr)
		return EINVAL;
	int rc = rocemu_srq_modify(((struct rocemu_vsrq *)srq)->esrq, attr, mask);
	return rc < 0 ? -rc : 0;
}
ROCEMU_PUBLIC(ibv_modify_srq)

int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	if (rocemu_dead(ROCEMU_CTX_OF(srq)))
		return rocemu_inherited_fail(ROCEMU_CTX_OF(srq));
	if (!srq || !attr)
		return EINVAL;
	int rc = rocemu_srq_query(((struct rocemu_vsrq *)srq)->esrq, attr);
	return rc < 0 ? -rc : 0;
}
ROCEMU_PUBLIC(ibv_query_srq)

int ibv_destroy_srq(struct ibv_srq *srq)
{
	if (rocemu_dead(ROCEMU_CTX_OF(srq)))
		return rocemu_inherited_fail(ROCEMU_CTX_OF(srq));
	if (!srq)
		return EINVAL;
	struct rocemu_vsrq *s = (struct rocemu_vsrq *)srq;
	int rc = rocemu_srq_destroy(s->esrq);
	if (rc < 0)
		return -rc;
	rocemu_async_wait_acked(&srq->mutex, &srq->cond, &srq->events_completed,
				rocemu_async_forget(s->ctx, &s->events_reported));
	pthread_mutex_destroy(&srq->mutex);
	pthread_cond_destroy(&srq->cond);
	free(s);
	return 0;
}
ROCEMU_PUBLIC(ibv_destroy_srq)

int rocemu_op_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	if (!srq || !bad) {
		if (bad)
			*bad = wr;
		return EINVAL;
	}
	*bad = NULL;
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || (wr->num_sge > 0 && !wr->sg_list)) {
			*bad = wr;
			return EINVAL;
		}
		int rc = rocemu_srq_post_recv(((struct rocemu_vsrq *)srq)->esrq, wr->wr_id,
					      wr->sg_list, (uint32_t)wr->num_sge);
		if (rc < 0) {
			*bad = wr;
			return -rc;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Address handles                                                            */

struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	if (rocemu_dead(ROCEMU_CTX_OF(pd)))
		return rocemu_inherited_null(ROCEMU_CTX_OF(pd));
	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	struct rocemu_vah *a = calloc(1, sizeof(*a));
	if (!a) {
		errno = ENOMEM;
		return NULL;
	}
	int rc = rocemu_ah_create(((struct rocemu_vpd *)pd)->epd, attr, &a->eah);
	if (rc < 0) {
		free(a);
		return rocemu_null_errno(rc);
	}
	a->ah.context = pd->context;
	a->ah.pd = pd;
	return &a->ah;
}
ROCEMU_PUBLIC(ibv_create_ah)

int ibv_destroy_ah(struct ibv_ah *ah)
{
	if (rocemu_dead(ROCEMU_CTX_OF(ah)))
		return rocemu_inherited_fail(ROCEMU_CTX_OF(ah));
	if (!ah)
		return EINVAL;
	struct rocemu_vah *a = (struct rocemu_vah *)ah;
	int rc = rocemu_ah_destroy(a->eah);
	if (rc < 0)
		return -rc;
	free(a);
	return 0;
}
ROCEMU_PUBLIC(ibv_destroy_ah)

/*
 * The 40 bytes in front of a UD receive hold the packet's network header:
 * a GRH/IPv6 header, or for RoCEv2 over IPv4 the 20-byte IPv4 header in the
 * last 20 bytes (the first 20 are zero), as rdma-core documents.
 */
int ibv_init_ah_from_wc(struct ibv_context *ctx, uint8_t port, struct ibv_wc *wc,
			struct ibv_grh *grh, struct ibv_ah_attr *ah)
{
	if (rocemu_dead(ctx))
		return rocemu_inherited_fail(ctx);
	uint8_t sgid[16], dgid[16];

	if (!ctx || !wc || !grh || !ah || port != 1)
		return EINVAL;
	memset(ah, 0, sizeof(*ah));
	ah->dlid = wc->slid;
	ah->sl = wc->sl;
	ah->src_path_bits = wc->dlid_path_bits;
	ah->port_num = port;
	if (!(wc->wc_flags & IBV_WC_GRH))
		return EINVAL; /* RoCE always needs a GRH */
	const uint8_t *raw = (const uint8_t *)grh;
	static const uint8_t zero[20];
	uint8_t tclass;
	uint32_t flow = 0;
	if (!memcmp(raw, zero, 20) && (raw[20] >> 4) == 4) {
		const uint8_t *ip = raw + 20;
		static const uint8_t v4map[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
		memcpy(sgid, v4map, 12);
		memcpy(sgid + 12, ip + 12, 4); /* the sender's address */
		memcpy(dgid, v4map, 12);
		memcpy(dgid + 12, ip + 16, 4);
		tclass = ip[1];
	} else if ((raw[0] >> 4) == 6) {
		uint32_t vtf = be32toh(grh->version_tclass_flow);
		memcpy(sgid, grh->sgid.raw, 16);
		memcpy(dgid, grh->dgid.raw, 16);
		tclass = (uint8_t)(vtf >> 20);
		flow = vtf & 0xfffff;
	} else {
		return EINVAL;
	}
	int idx = rocemu_port_gid_find(to_vctx(ctx)->port, dgid);
	if (idx < 0)
		return ENOENT; /* the packet was not addressed to one of our GIDs */
	ah->is_global = 1;
	/* LID-only extension: a sender in our /16 has a LID; the GRH stays the
	 * authority, the dlid lets a LID-only program compare/print it. */
	if (!ah->dlid)
		ah->dlid = rocemu_lid_of_gid(to_vctx(ctx)->port, sgid);
	memcpy(ah->grh.dgid.raw, sgid, 16); /* reply to the sender */
	ah->grh.sgid_index = (uint8_t)idx;
	ah->grh.flow_label = flow;
	ah->grh.hop_limit = 0xff;
	ah->grh.traffic_class = tclass;
	return 0;
}
ROCEMU_PUBLIC(ibv_init_ah_from_wc)

struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh,
				     uint8_t port)
{
	if (rocemu_dead(ROCEMU_CTX_OF(pd)))
		return rocemu_inherited_null(ROCEMU_CTX_OF(pd));
	struct ibv_ah_attr attr;

	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	int rc = ibv_init_ah_from_wc(pd->context, port, wc, grh, &attr);
	if (rc) {
		errno = rc;
		return NULL;
	}
	return ibv_create_ah(pd, &attr);
}
ROCEMU_PUBLIC(ibv_create_ah_from_wc)

/* ------------------------------------------------------------------------ */
/* Multicast                                                                  */

/* ibv_attach_mcast(3): on RoCE the group is its GID (an IP multicast
 * address); the LID means nothing and is ignored, as Linux's RoCE drivers do. */
int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	if (rocemu_dead(ROCEMU_CTX_OF(qp)))
		return rocemu_inherited_fail(ROCEMU_CTX_OF(qp));
	(void)lid;
	if (!qp || !gid)
		return EINVAL;
	return -rocemu_qp_attach_mcast(to_vqp(qp)->eqp, gid->raw);
}
ROCEMU_PUBLIC(ibv_attach_mcast)

int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	if (rocemu_dead(ROCEMU_CTX_OF(qp)))
		return rocemu_inherited_fail(ROCEMU_CTX_OF(qp));
	(void)lid;
	if (!qp || !gid)
		return EINVAL;
	return -rocemu_qp_detach_mcast(to_vqp(qp)->eqp, gid->raw);
}
ROCEMU_PUBLIC(ibv_detach_mcast)
