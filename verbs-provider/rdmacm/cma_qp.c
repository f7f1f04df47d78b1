/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdma_cm and queue pairs: the QP transitions a connection makes
 * (INIT, RTR, RTS, ERR; rdma_init_qp_attr), and the QPs, SRQs and endpoints
 * rdma_create_qp/_ex, rdma_create_srq/_ex and rdma_create_ep make for an id.
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

/* ------------------------------------------------------------------------ */
/* Queue pair transitions                                                     */

/*
 * The two halves of a reliable connection: an RC QP is both; of XRC, the
 * initiator (XRC_SEND) only sends requests and the target (XRC_RECV) only
 * answers them (its receives come from the XRC SRQ each request names). A
 * QP gets the attributes of the halves it has, as the kernel's
 * qp_state_table asks them for IB_QPT_XRC_INI and IB_QPT_XRC_TGT.
 */
static bool qp_requester(enum ibv_qp_type t)
{
	return t == IBV_QPT_RC || t == IBV_QPT_XRC_SEND;
}

static bool qp_responder(enum ibv_qp_type t)
{
	return t == IBV_QPT_RC || t == IBV_QPT_XRC_RECV;
}

/* The type of the connection's QP: its QP's, else the id's (rdma_create_ep
 * takes it from the rdma_addrinfo). */
enum ibv_qp_type cma_conn_type(const struct cma_id *c)
{
	return c->id.qp ? c->id.qp->qp_type : c->id.qp_type;
}

/* The REQ transport service type of a connection of QP type t (12.6.5). */
uint8_t cma_req_transport_of(enum ibv_qp_type t)
{
	if (t == IBV_QPT_XRC_SEND || t == IBV_QPT_XRC_RECV)
		return CM_TRANSPORT_EXT;
	return t == IBV_QPT_UC ? CM_TRANSPORT_UC : CM_TRANSPORT_RC;
}

static int qp_to_init(struct cma_id *c, struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .pkey_index = 0};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	if (qp->qp_type == IBV_QPT_UD) {
		a.qkey = CMA_UDP_QKEY;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
		if (qp_responder(qp->qp_type))
			a.qp_access_flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	(void)c;
	return ibv_modify_qp(qp, &a, mask);
}

static int ud_qp_ready(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR};
	int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE);
	if (rc)
		return rc;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

void cma_fill_ah(const struct cma_id *c, struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->is_global = 1;
	ah->port_num = 1;
	ah->grh.dgid = c->remote_gid;
	ah->grh.sgid_index = (uint8_t)c->sgid_index;
	ah->grh.hop_limit = 64;
	ah->grh.flow_label = c->flow_label;
	ah->grh.traffic_class = c->tclass;
	ah->sl = c->sl;
}

/* rdma_init_qp_attr: what the QP needs for the state asked in attr->qp_state. */
static int init_qp_attr(struct cma_id *c, struct ibv_qp_attr *a, int *mask)
{
	enum ibv_qp_state want = a->qp_state;
	enum ibv_qp_type t = cma_conn_type(c);

	memset(a, 0, sizeof(*a));
	a->qp_state = want;
	switch (want) {
	case IBV_QPS_INIT:
		a->port_num = 1;
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (c->id.qp_type == IBV_QPT_UD) {
			a->qkey = CMA_UDP_QKEY;
			*mask |= IBV_QP_QKEY;
		} else {
			a->qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
			if (qp_responder(t))
				a->qp_access_flags |=
				    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
			*mask |= IBV_QP_ACCESS_FLAGS;
		}
		return 0;
	case IBV_QPS_RTR:
		*mask = IBV_QP_STATE;
		if (c->id.qp_type == IBV_QPT_UD)
			return 0;
		if (c->state < CMA_REQ_SENT || c->state == CMA_LISTEN || !c->remote_qpn)
			return -EINVAL;
		a->path_mtu = c->mtu;
		a->dest_qp_num = c->remote_qpn;
		/* The starting PSN a REQ or REP carries is the one its sender
		 * expects to receive: we wrote ours (local_psn) in our message, the
		 * peer sends from there, and we send from the PSN the peer wrote
		 * in its message. Linux's CM reads it so (cm.c: the passive side's
		 * sq_psn from the REQ, the active side's from the REP; rdma_cm's
		 * rq_psn is the id's own number); swapped, every SEND to a kernel
		 * peer was a "duplicate" it ACKed with PSN-1 and never delivered. */
		a->rq_psn = c->local_psn;
		cma_fill_ah(c, &a->ah_attr);
		*mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (qp_responder(t)) {
			a->max_dest_rd_atomic = c->resp_res;
			a->min_rnr_timer = 12;
			*mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
		return 0;
	case IBV_QPS_RTS:
		a->sq_psn = c->remote_psn;
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		if (t == IBV_QPT_XRC_RECV) { /* sends only responses: their timeout */
			a->timeout = c->local_ack_timeout ? c->local_ack_timeout : CMA_ACK_TIMEOUT;
			*mask |= IBV_QP_TIMEOUT;
		} else if (qp_requester(t)) {
			a->timeout = c->local_ack_timeout ? c->local_ack_timeout : CMA_ACK_TIMEOUT;
			a->retry_cnt = c->retry_count;
			a->rnr_retry = c->rnr_retry;
			a->max_rd_atomic = c->init_depth;
			*mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_MAX_QP_RD_ATOMIC;
		}
		return 0;
	default:
		return -EINVAL;
	}
}

static int qp_to(struct cma_id *c, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = {.qp_state = s};
	int mask, rc = init_qp_attr(c, &a, &mask);
	if (rc < 0)
		return -rc;
	return ibv_modify_qp(c->id.qp, &a, mask);
}

int cma_qp_connect(struct cma_id *c)
{
	if (!c->id.qp)
		return 0;
	int rc = qp_to(c, IBV_QPS_RTR);
	if (!rc)
		rc = qp_to(c, IBV_QPS_RTS);
	return rc;
}

void cma_qp_to_err(struct cma_id *c)
{
	if (c->id.qp && c->id.qp_type != IBV_QPT_UD) {
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
		ibv_modify_qp(c->id.qp, &a, IBV_QP_STATE);
	}
}

int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
	if (!id || !qp_attr || !qp_attr_mask)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&cma_lock);
	int rc = init_qp_attr(cma_id_of(id), qp_attr, qp_attr_mask);
	pthread_mutex_unlock(&cma_lock);
	return rc < 0 ? cma_fail(-rc) : 0;
}
ROCEMU_PUBLIC(rdma_init_qp_attr)

/* ------------------------------------------------------------------------ */
/* QPs, SRQs, endpoints                                                       */

/* The CQs and completion channels rdma_create_qp_ex made for the id, if it
 * made them (those it got made, when it failed half way). */
static void destroy_own_cqs(struct cma_id *c)
{
	struct rdma_cm_id *id = &c->id;

	if (!c->own_cqs)
		return;
	/* an XRC SRQ of the id completes into its receive CQ: they go with it */
	if (id->srq && c->xrc_srq)
		return;
	if (id->send_cq)
		ibv_destroy_cq(id->send_cq);
	if (id->recv_cq)
		ibv_destroy_cq(id->recv_cq);
	if (id->send_cq_channel)
		ibv_destroy_comp_channel(id->send_cq_channel);
	if (id->recv_cq_channel)
		ibv_destroy_comp_channel(id->recv_cq_channel);
	id->send_cq = id->recv_cq = NULL;
	id->send_cq_channel = id->recv_cq_channel = NULL;
	c->own_cqs = false;
}

/* The CQs (each with a completion channel) the library makes for an id the
 * program gave none, as rdma_get_send_comp/rdma_get_recv_comp expect; 0 or
 * -1 with errno set. */
static int make_own_cqs(struct cma_id *c, uint32_t send_wr, uint32_t recv_wr)
{
	struct rdma_cm_id *id = &c->id;

	c->own_cqs = true;
	id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
	id->send_cq_channel = ibv_create_comp_channel(id->verbs);
	if (id->recv_cq_channel)
		id->recv_cq = ibv_create_cq(id->verbs, recv_wr ? (int)recv_wr : 1, id,
					    id->recv_cq_channel, 0);
	if (id->send_cq_channel)
		id->send_cq = ibv_create_cq(id->verbs, send_wr ? (int)send_wr : 1, id,
					    id->send_cq_channel, 0);
	return id->recv_cq && id->send_cq ? 0 : -1;
}

/* The device's XRC domain for ids that give none, opened on first use;
 * NULL with errno set if it cannot be. */
static struct ibv_xrcd *device_xrcd(struct cma_device *d)
{
	pthread_mutex_lock(&cma_lock);
	if (!d->xrcd) {
		struct ibv_xrcd_init_attr a = {.comp_mask = IBV_XRCD_INIT_ATTR_FD |
							    IBV_XRCD_INIT_ATTR_OFLAGS,
					       .fd = -1,
					       .oflags = O_CREAT};
		d->xrcd = ibv_open_xrcd(d->verbs, &a);
	}
	struct ibv_xrcd *x = d->xrcd;
	pthread_mutex_unlock(&cma_lock);
	return x;
}

/*
 * ECE of an id's new QP, as rdma-core's librdmacm negotiates it: the QP's
 * own (ibv_query_ece; a device without ECE: none) is what we offer. On a
 * request's id, the QP takes the peer's options when it is of the peer's
 * vendor, else none (ibv_set_ece with our vendor and no options), and what
 * it then reports is what the REP offers. 0 or an errno.
 */
static int qp_ece_init(struct cma_id *c, struct ibv_qp *qp)
{
	struct ibv_ece ece = {0};
	int rc = ibv_query_ece(qp, &ece);

	if (rc && rc != EOPNOTSUPP)
		return rc;
	c->local_ece.vendor_id = rc ? 0 : ece.vendor_id;
	c->local_ece.options = rc ? 0 : ece.options;
	if (!c->remote_ece.vendor_id)
		return 0; /* not a request's, or the peer has no ECE */
	ece.vendor_id = c->local_ece.vendor_id;
	ece.options = 0;
	if (c->remote_ece.vendor_id == c->local_ece.vendor_id)
		ece.options = c->remote_ece.options;
	ece.comp_mask = 0;
	rc = ibv_set_ece(qp, &ece);
	if (rc && rc != EOPNOTSUPP)
		return rc;
	if (ibv_query_ece(qp, &ece) == 0)
		c->local_ece.options = ece.options;
	return 0;
}

int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	if (!id || !attr || !id->verbs || id->qp)
		return cma_fail(EINVAL);
	struct cma_id *c = cma_id_of(id);
	struct cma_device *d = cma_device_of(id->verbs);
	if (!d)
		return cma_fail(ENODEV);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd ? id->pd : d->pd;
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
	}
	if (attr->pd->context != id->verbs)
		return cma_fail(EINVAL);
	struct ibv_pd *pd = attr->pd; /* the provider clears an XRC target's */
	attr->qp_type = attr->qp_type ? attr->qp_type : id->qp_type;
	if (attr->qp_type == IBV_QPT_XRC_RECV &&
	    (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd)) {
		attr->xrcd = device_xrcd(d);
		if (!attr->xrcd)
			return -1;
		attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
	}
	/* Without CQs, the library makes them. An XRC target uses none, but
	 * the XRC SRQ rdma_create_srq makes for it completes into the id's
	 * receive CQ, as in rdma-core's librdmacm. */
	bool made_cqs = false;
	if (!attr->send_cq || !attr->recv_cq) {
		if (!id->send_cq || !id->recv_cq) {
			made_cqs = true;
			if (make_own_cqs(c, attr->cap.max_send_wr, attr->cap.max_recv_wr))
				goto err_cq;
		}
		if (!attr->send_cq)
			attr->send_cq = id->send_cq;
		if (!attr->recv_cq)
			attr->recv_cq = id->recv_cq;
	}
	if (id->srq && !attr->srq && attr->qp_type != IBV_QPT_XRC_RECV)
		attr->srq = id->srq;
	struct ibv_qp *qp = ibv_create_qp_ex(id->verbs, attr);
	if (!qp)
		goto err_cq;
	int rc = qp->qp_type == IBV_QPT_UD ? 0 : qp_ece_init(c, qp);
	if (!rc)
		rc = qp_to_init(c, qp);
	if (!rc && qp->qp_type == IBV_QPT_UD)
		rc = ud_qp_ready(qp);
	if (rc) {
		ibv_destroy_qp(qp);
		errno = rc;
		goto err_cq;
	}
	id->qp = qp;
	id->pd = pd;
	return 0;
err_cq : {
	int err = errno ? errno : ENOMEM;
	if (made_cqs)
		destroy_own_cqs(c); /* undo what this call made */
	return cma_fail(err);
}
}
ROCEMU_PUBLIC(rdma_create_qp_ex)

int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	if (!id || !qp_init_attr)
		return cma_fail(EINVAL);
	struct ibv_qp_init_attr_ex a = {0};
	memcpy(&a, qp_init_attr, sizeof(*qp_init_attr));
	a.comp_mask = pd ? IBV_QP_INIT_ATTR_PD : 0;
	a.pd = pd;
	int rc = rdma_create_qp_ex(id, &a);
	if (rc == 0) {
		qp_init_attr->cap = a.cap;
		qp_init_attr->send_cq = a.send_cq;
		qp_init_attr->recv_cq = a.recv_cq;
	}
	return rc;
}
ROCEMU_PUBLIC(rdma_create_qp)

void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (!id || !id->qp)
		return;
	ibv_destroy_qp(id->qp);
	id->qp = NULL;
	destroy_own_cqs(cma_id_of(id));
}
ROCEMU_PUBLIC(rdma_destroy_qp)

/*
 * The id's SRQ (rdma_create_srq_ex(3)): on the PD given, else the id's, else
 * the device's. An XRC SRQ (the type of an XRC_RECV id's SRQ with
 * rdma_create_srq) also needs a domain and a CQ: without them it gets the
 * device's domain and the id's receive CQ, made if the id has none, as
 * rdma-core's librdmacm gives them. attr is updated with what was granted.
 */
int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	if (!id || !attr || !id->verbs || id->srq)
		return cma_fail(EINVAL);
	struct cma_id *c = cma_id_of(id);
	struct cma_device *d = cma_device_of(id->verbs);
	if (!d)
		return cma_fail(ENODEV);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)) { /* a basic SRQ */
		attr->srq_type = IBV_SRQT_BASIC;
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_TYPE;
	}
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd ? id->pd : d->pd;
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	bool xrc = attr->srq_type == IBV_SRQT_XRC, made_cqs = false;
	if (xrc) {
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd) {
			attr->xrcd = device_xrcd(d);
			if (!attr->xrcd)
				return -1;
		}
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
			if (!id->recv_cq) {
				made_cqs = true;
				if (make_own_cqs(c, 0, attr->attr.max_wr)) {
					int err = errno ? errno : ENOMEM;
					destroy_own_cqs(c);
					return cma_fail(err);
				}
			}
			attr->cq = id->recv_cq;
		}
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	}
	struct ibv_srq *srq = ibv_create_srq_ex(id->verbs, attr);
	if (!srq) {
		int err = errno ? errno : ENOMEM;
		if (made_cqs)
			destroy_own_cqs(c);
		return cma_fail(err);
	}
	id->srq = srq;
	id->pd = attr->pd;
	c->xrc_srq = xrc;
	return 0;
}
ROCEMU_PUBLIC(rdma_create_srq_ex)

int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	if (!id || !attr)
		return cma_fail(EINVAL);
	struct ibv_srq_init_attr_ex a = {
	    .srq_context = attr->srq_context,
	    .attr = attr->attr,
	    .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | (pd ? IBV_SRQ_INIT_ATTR_PD : 0),
	    .srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC,
	    .pd = pd};
	int rc = rdma_create_srq_ex(id, &a);
	if (rc == 0)
		attr->attr = a.attr;
	return rc;
}
ROCEMU_PUBLIC(rdma_create_srq)

void rdma_destroy_srq(struct rdma_cm_id *id)
{
	if (!id || !id->srq)
		return;
	struct cma_id *c = cma_id_of(id);
	ibv_destroy_srq(id->srq);
	id->srq = NULL;
	if (c->xrc_srq) { /* its CQ outlived the QP (destroy_own_cqs) */
		c->xrc_srq = false;
		if (!id->qp)
			destroy_own_cqs(c);
	}
}
ROCEMU_PUBLIC(rdma_destroy_srq)

int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
		   struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cid;

	if (!id || !res)
		return cma_fail(EINVAL);
	if (cma_create_id(NULL, &cid, NULL, (enum rdma_port_space)res->ai_port_space,
			  (enum ibv_qp_type)res->ai_qp_type))
		return -1;
	int rc;
	if (res->ai_flags & RAI_PASSIVE) {
		rc = res->ai_src_addr ? rdma_bind_addr(cid, res->ai_src_addr) : 0;
	} else {
		rc = rdma_resolve_addr(cid, res->ai_src_addr, res->ai_dst_addr, 2000);
		if (!rc)
			rc = rdma_resolve_route(cid, 2000);
	}
	if (!rc && pd)
		cid->pd = pd;
	if (!rc && qp_init_attr) {
		qp_init_attr->qp_type = cid->qp_type;
		if (!(res->ai_flags & RAI_PASSIVE)) {
			rc = rdma_create_qp(cid, pd, qp_init_attr);
		} else {
			/* each request rdma_get_request hands out gets its QP */
			struct cma_id *c = cma_id_of(cid);
			c->ep_qp_attr = malloc(sizeof(*qp_init_attr));
			if (c->ep_qp_attr)
				*c->ep_qp_attr = *qp_init_attr;
			else
				rc = cma_fail(ENOMEM);
		}
	}
	if (rc) {
		int err = errno;
		rdma_destroy_id(cid);
		return cma_fail(err);
	}
	*id = cid;
	return 0;
}
ROCEMU_PUBLIC(rdma_create_ep)

void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (!id)
		return;
	rdma_destroy_qp(id);
	rdma_destroy_srq(id);
	rdma_destroy_id(id);
}
ROCEMU_PUBLIC(rdma_destroy_ep)
