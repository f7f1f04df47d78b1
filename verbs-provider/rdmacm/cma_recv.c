/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdma_cm: the CM MADs received (CM thread, cma_lock held): REQ, REP, RTU,
 * REJ, DREQ, DREP, SIDR_REQ and SIDR_REP, each checked against the id it
 * names before it moves that id's state machine (cma.c).
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

static struct cma_id *find_by_local_comm_id(uint32_t comm_id)
{
	for (struct cma_id *c = cma_ids; c; c = c->next)
		if (c->local_comm_id == comm_id && c->state != CMA_LISTEN)
			return c;
	return NULL;
}

static struct cma_id *find_listener(struct cma_device *d, uint16_t ps, uint16_t port,
				    const struct cma_hdr *h)
{
	for (struct cma_id *c = cma_ids; c; c = c->next) {
		if (c->state != CMA_LISTEN || (uint16_t)c->id.ps != ps || c->port != port)
			continue;
		if (c->dev && c->dev != d)
			continue;
		const struct sockaddr *sa = (const struct sockaddr *)&c->id.route.addr.src_addr;
		if (!cma_addr_any(sa)) {
			uint8_t a[16];
			if ((sa->sa_family == AF_INET) != (h->ip_version == 4))
				continue;
			memset(a, 0, 16);
			if (sa->sa_family == AF_INET)
				memcpy(a + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
			else
				cma_sockaddr_ip16(sa, a);
			if (memcmp(a, h->dst, 16))
				continue;
		}
		return c;
	}
	return NULL;
}

/*
 * Whether this process answers a request for a service nobody here listens
 * to. On a NIC one CM agent owns the port and rejects (12.6.7). On rocemu
 * several processes can drive the same port (af_packet ports of processes
 * sharing one interface and address: qperf's server forks a child per test,
 * and the last child may still be closing while the next listens), and every
 * one of them receives the REQ. Only a process that listens on some port
 * speaks for the port's services; one that does not stays silent (the
 * requester then gets REJ from the listening process, or times out).
 */
static bool local_peer(const struct cma_device *d, const union ibv_gid *src)
{
	for (int i = 0; i < d->gid_len; i++)
		if (!memcmp(&d->gids[i], src, 16))
			return true; /* a request from this very port: this process sent it */
	return false;
}

static bool answers_for_port(const struct cma_device *d)
{
	for (struct cma_id *c = cma_ids; c; c = c->next)
		if (c->state == CMA_LISTEN && (!c->dev || c->dev == d))
			return true;
	return false;
}

/* A request nobody listens for: true when this process rejects it (12.6.7),
 * false when it stays silent (see local_peer); counted either way. */
static bool reject_unlistened(const struct cma_device *d, const union ibv_gid *src)
{
	if (!answers_for_port(d) && !local_peer(d, src)) {
		CMA_COUNT(drop_no_listener);
		return false;
	}
	CMA_COUNT(rej_no_listener);
	return true;
}

/* The GID index of d to answer from: the request's destination gid (its
 * IP), else (not ours, or NULL: not known) the first IP GID. */
static int local_gid_index(struct cma_device *d, const uint8_t *gid)
{
	for (int i = 0; gid && i < d->gid_len; i++)
		if (!memcmp(d->gids[i].raw, gid, 16))
			return i;
	return 1 < d->gid_len ? 1 : 0;
}

/*
 * The listener of a REQ (ud false) or a SIDR REQ (ud true), or NULL: nobody
 * listens on its service ID and addresses, or the one who does takes the
 * other kind (a UD port space takes SIDR, the others REQ). h gets the
 * request's CMA header; *hdr_ok says whether it had one.
 */
static struct cma_id *request_listener(struct cma_device *d, uint64_t service_id,
				       const uint8_t *pdata, bool ud, struct cma_hdr *h,
				       bool *hdr_ok)
{
	struct cma_id *l = NULL;
	uint16_t ps, port;

	*hdr_ok = cma_hdr_get(pdata, h) == 0;
	if (cma_service_parse(service_id, &ps, &port) == 0) {
		if (*hdr_ok)
			l = find_listener(d, ps, port, h);
		else
			CMA_COUNT(bad_cma_hdr); /* no IP addresses: no rdma_cm listener matches */
	}
	if (l && (l->id.qp_type == IBV_QPT_UD) != ud) {
		CMA_COUNT(wrong_service); /* a REQ for a UD port space is SIDR's, and the reverse */
		l = NULL;
	}
	return l;
}

static struct cma_id *new_passive_id(struct cma_id *l, struct cma_device *d, int sgid_index,
				     const union ibv_gid *remote, const struct cma_hdr *h,
				     uint32_t remote_comm_id, uint64_t tid)
{
	struct cma_id *c = cma_id_alloc(l->id.channel, l->id.context, l->id.ps, l->id.qp_type);
	if (!c)
		return NULL;
	c->listener = l;
	c->dev = d;
	c->sgid_index = sgid_index;
	c->id.verbs = d->verbs;
	c->id.pd = d->pd;
	c->remote_gid = *remote;
	c->remote_comm_id = remote_comm_id;
	c->tid = tid;
	c->port = l->port;
	c->bound = true;
	struct sockaddr_storage ss;
	cma_ip_to_sockaddr(h->ip_version, h->dst, l->port, &ss);
	memcpy(&c->id.route.addr.src_addr, &ss, sizeof(ss));
	cma_ip_to_sockaddr(h->ip_version, h->src, h->src_port, &ss);
	memcpy(&c->id.route.addr.dst_addr, &ss, sizeof(ss));
	cma_fill_route(c);
	c->state = CMA_REQ_RCVD;
	return c;
}

/*
 * How many requests the listener l may hold unanswered: the backlog given
 * to rdma_listen (0 or less: the default, as in the kernel's rdma_cm), at
 * most CMA_MAX_PENDING_REQ. Requests beyond it are dropped, not rejected:
 * the peer's CM retries the REQ, as a TCP client retries its SYN.
 */
static unsigned listen_backlog(const struct cma_id *l)
{
	if (l->backlog <= 0 || l->backlog > CMA_MAX_PENDING_REQ)
		return CMA_MAX_PENDING_REQ;
	return (unsigned)l->backlog;
}

/* A REQ's transport service type and extended transport type are those of
 * a listener of QP type t: a UC REQ fits a UC listener, an XRC one (type 3,
 * extended type 1) an XRC_RECV listener, an RC one the others. */
static bool req_transport_fits(const struct cm_req *r, enum ibv_qp_type t)
{
	if (r->transport != cma_req_transport_of(t))
		return false;
	return r->transport != CM_TRANSPORT_EXT || r->ext_transport == CM_EXT_TRANSPORT_XRC;
}

/* The listener l holds as many unanswered requests as it may: a new one is
 * dropped, counted (the peer retries; a forged flood stays bounded). */
static bool backlog_full(const struct cma_id *l)
{
	unsigned n = 0;

	for (const struct cma_id *c = cma_ids; c; c = c->next)
		if (c->listener == l && c->state == CMA_REQ_RCVD)
			n++;
	if (n < listen_backlog(l))
		return false;
	CMA_COUNT(drop_backlog);
	return true;
}

/* A message naming one of our ids must come from that id's peer: a host that
 * guessed a communication ID cannot end or complete another's connection. */
static bool from_peer(const struct cma_id *c, const union ibv_gid *src)
{
	if (!memcmp(&c->remote_gid, src, 16))
		return true;
	CMA_COUNT(drop_wrong_peer);
	return false;
}

static struct cma_id *find_duplicate(uint32_t remote_comm_id, const union ibv_gid *remote)
{
	for (struct cma_id *c = cma_ids; c; c = c->next)
		if (c->listener && c->remote_comm_id == remote_comm_id &&
		    !memcmp(&c->remote_gid, remote, 16))
			return c;
	return NULL;
}

static void handle_req(struct cma_device *d, const union ibv_gid *src, uint64_t tid,
		       const uint8_t *mad)
{
	struct cm_req r;
	struct cma_hdr h;
	bool hdr_ok;

	cm_mad_get_req(mad, &r);
	/* The peer is the GRH's source, not the REQ's primary local GID (on RoCE
	 * the network header says who sent it; answering the GID written in the
	 * MAD would let a forger aim our REPs at a third host). */
	union ibv_gid remote = *src;
	struct cma_id *dup = find_duplicate(r.local_comm_id, &remote);
	if (dup) {
		/* 12.9.2: a REQ already seen. Before the RTU our REP was lost: resend
		 * it; in any later state the duplicate is stale and ignored (no
		 * effect on the connection). */
		CMA_COUNT(dup_req);
		if (dup->state == CMA_REP_SENT)
			cma_send_mad(dup, dup->mad);
		return;
	}
	int idx = local_gid_index(d, r.remote_gid);
	struct cma_id *l = request_listener(d, r.service_id, r.pdata, false, &h, &hdr_ok);
	if (l && !req_transport_fits(&r, l->id.qp_type)) {
		/* 12.6.5: a UC REQ for an RC listener (or the reverse, or XRC with
		 * either) would connect QPs of different types: REJ "invalid
		 * transport service type" */
		CMA_COUNT(rej_transport);
		cma_send_rej(d, idx, src, r.traffic_class, r.sl, tid, cma_random32(),
			     r.local_comm_id, CM_REJ_MSG_REQ, CM_REJ_INVALID_TRANSPORT, NULL, 0);
		return;
	}
	if (!l) {
		if (reject_unlistened(d, src))
			cma_send_rej(d, idx, src, r.traffic_class, r.sl, tid, cma_random32(),
				     r.local_comm_id, CM_REJ_MSG_REQ, CM_REJ_INVALID_SERVICE_ID,
				     NULL, 0);
		return;
	}
	if (backlog_full(l))
		return;
	struct cma_id *c = new_passive_id(l, d, idx, &remote, &h, r.local_comm_id, tid);
	if (!c)
		return;
	c->remote_qpn = r.local_qpn;
	c->remote_psn = r.starting_psn;
	c->remote_resp_res = r.responder_resources;
	c->remote_init_depth = r.initiator_depth;
	c->retry_count = r.retry_count;
	c->rnr_retry = r.rnr_retry_count;
	c->local_ack_timeout = r.local_ack_timeout ? r.local_ack_timeout : CMA_ACK_TIMEOUT;
	c->flow_label = r.flow_label;
	c->tclass = r.traffic_class;
	c->sl = r.sl;
	c->path.traffic_class = c->tclass; /* the route the REQ named */
	c->path.sl = c->sl;
	c->mtu =
	    r.path_mtu && r.path_mtu < d->active_mtu ? (enum ibv_mtu)r.path_mtu : d->active_mtu;
	c->srq = r.srq;
	c->remote_ece.vendor_id = r.vendor_id;
	c->remote_ece.options = cm_mad_attr_mod(mad);
	struct cma_event *e = cma_event_post(c, RDMA_CM_EVENT_CONNECT_REQUEST, 0,
					     r.pdata + CMA_HDR_LEN, CM_REQ_PDATA - CMA_HDR_LEN);
	if (!e)
		return;
	e->ev.listen_id = &l->id;
	struct rdma_conn_param *cp = &e->ev.param.conn;
	cp->responder_resources = r.initiator_depth; /* what the peer will ask of us */
	cp->initiator_depth = r.responder_resources;
	cp->flow_control = r.flow_control;
	cp->retry_count = r.retry_count;
	cp->rnr_retry_count = r.rnr_retry_count;
	cp->srq = r.srq;
	cp->qp_num = r.local_qpn;
}

/* Our id with local comm ID comm, if src is its peer; else NULL, counted. */
static struct cma_id *id_of_peer(const union ibv_gid *src, uint32_t comm)
{
	struct cma_id *c = find_by_local_comm_id(comm);

	if (!c) {
		CMA_COUNT(drop_unknown_id);
		return NULL;
	}
	return from_peer(c, src) ? c : NULL;
}

/*
 * The REP's ECE given to our QP (rdma-core's ucma_process_conn_resp_ece): a
 * peer without ECE (vendor 0) leaves the QP none of its options; a vendor
 * other than the one our REQ offered is a broken handshake (-EINVAL: the
 * connection fails); else the QP takes the options the peer kept.
 */
static int rep_ece(struct cma_id *c)
{
	struct ibv_ece ece = {.vendor_id = c->remote_ece.vendor_id,
			      .options = c->remote_ece.options};

	if (!ece.vendor_id) {
		if (!c->local_ece.vendor_id)
			return 0; /* neither side has ECE */
		ece.vendor_id = c->local_ece.vendor_id;
		ece.options = 0;
	} else if (ece.vendor_id != c->local_ece.vendor_id) {
		return -EINVAL;
	}
	int rc = ibv_set_ece(c->id.qp, &ece);
	if (rc && rc != EOPNOTSUPP)
		return -rc;
	if (ibv_query_ece(c->id.qp, &ece) == 0)
		c->local_ece.options = ece.options;
	return 0;
}

static void handle_rep(const union ibv_gid *src, const uint8_t *mad)
{
	struct cm_rep r;

	cm_mad_get_rep(mad, &r);
	struct cma_id *c = id_of_peer(src, r.remote_comm_id);
	if (!c)
		return;
	if (c->state == CMA_ESTABLISHED && c->have_answer && c->remote_comm_id == r.local_comm_id) {
		CMA_COUNT(dup_rep);
		cma_send_mad(c, c->answer); /* our RTU was lost */
		return;
	}
	if (c->state != CMA_REQ_SENT || c->id.qp_type == IBV_QPT_UD) {
		CMA_COUNT(drop_wrong_state);
		return;
	}
	c->timer = false;
	c->remote_comm_id = r.local_comm_id;
	/* an XRC target names itself as the local EE context (rdma_accept) */
	uint32_t peer_qpn = cma_conn_type(c) == IBV_QPT_XRC_SEND ? r.local_eecn : r.local_qpn;
	c->remote_qpn = peer_qpn;
	c->remote_psn = r.starting_psn;
	c->remote_resp_res = r.responder_resources;
	c->remote_init_depth = r.initiator_depth;
	c->rnr_retry = r.rnr_retry_count;
	c->init_depth = cma_cap8(c->init_depth, r.responder_resources);
	c->remote_ece.vendor_id = cm_rep_vendor_id(&r);
	c->remote_ece.options = cm_mad_attr_mod(mad);
	if (!c->id.qp) {
		c->state = CMA_REP_RCVD;
		struct cma_event *e =
		    cma_event_post(c, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, r.pdata, CM_REP_PDATA);
		if (e) {
			e->ev.param.conn.responder_resources = r.responder_resources;
			e->ev.param.conn.initiator_depth = r.initiator_depth;
			e->ev.param.conn.qp_num = peer_qpn;
			e->ev.param.conn.rnr_retry_count = r.rnr_retry_count;
		}
		return;
	}
	if (rep_ece(c) || cma_qp_connect(c)) {
		cma_send_rej(c->dev, c->sgid_index, &c->remote_gid, c->tclass, c->sl, c->tid,
			     c->local_comm_id, c->remote_comm_id, CM_REJ_MSG_REP,
			     CM_REJ_CONSUMER_DEFINED, NULL, 0);
		c->state = CMA_DISCONNECTED;
		cma_event_post(c, RDMA_CM_EVENT_CONNECT_ERROR, -EINVAL, NULL, 0);
		return;
	}
	cma_send_rtu(c);
	struct cma_event *e =
	    cma_event_post(c, RDMA_CM_EVENT_ESTABLISHED, 0, r.pdata, CM_REP_PDATA);
	if (e) {
		e->ev.param.conn.responder_resources = r.responder_resources;
		e->ev.param.conn.initiator_depth = r.initiator_depth;
		e->ev.param.conn.qp_num = peer_qpn;
	}
}

/* The id an RTU or DREP (m) answers: one of ours, from its peer, naming the
 * peer's comm ID and arriving in state want; else NULL, counted (a late
 * duplicate or a forged message). */
static struct cma_id *id_answered(const union ibv_gid *src, const struct cm_ids *m,
				  enum cma_state want)
{
	struct cma_id *c = id_of_peer(src, m->remote_comm_id);

	if (!c)
		return NULL;
	if (c->state != want || c->remote_comm_id != m->local_comm_id) {
		CMA_COUNT(drop_wrong_state);
		return NULL;
	}
	return c;
}

static void handle_rtu(const union ibv_gid *src, const uint8_t *mad)
{
	struct cm_ids m;

	cm_mad_get_ids(mad, CM_ATTR_RTU, &m);
	struct cma_id *c = id_answered(src, &m, CMA_REP_SENT);
	if (!c)
		return;
	cma_settle(c, CMA_ESTABLISHED);
	cma_event_post(c, RDMA_CM_EVENT_ESTABLISHED, 0, m.pdata,
		       CM_RTU_PDATA > 196 ? 196 : CM_RTU_PDATA);
}

static void handle_rej(const union ibv_gid *src, const uint8_t *mad)
{
	struct cm_rej r;

	cm_mad_get_rej(mad, &r);
	struct cma_id *c = id_of_peer(src, r.remote_comm_id);
	if (!c)
		return;
	/* A REJ ends a connection only while it is being set up (12.6.7); after
	 * the REP the rejecter must name itself with the ID it gave us. */
	if ((c->state != CMA_REQ_SENT && c->state != CMA_REP_SENT) || c->id.qp_type == IBV_QPT_UD ||
	    (c->state == CMA_REP_SENT && r.local_comm_id != c->remote_comm_id)) {
		CMA_COUNT(drop_wrong_state);
		return;
	}
	cma_settle(c, CMA_DISCONNECTED);
	cma_qp_to_err(c);
	cma_event_post(c, RDMA_CM_EVENT_REJECTED, r.reason, r.pdata, CM_REJ_PDATA);
}

static void handle_dreq(struct cma_device *d, const union ibv_gid *src, uint64_t tid,
			const uint8_t *mad)
{
	struct cm_ids m;
	uint8_t out[CM_MAD_SIZE];

	cm_mad_get_ids(mad, CM_ATTR_DREQ, &m);
	struct cma_id *c = find_by_local_comm_id(m.remote_comm_id);
	struct cm_ids rep = {.local_comm_id = m.remote_comm_id, .remote_comm_id = m.local_comm_id};
	cm_mad_put_ids(out, tid, CM_ATTR_DREP, &rep);
	if (!c || c->remote_comm_id != m.local_comm_id || memcmp(&c->remote_gid, src, 16) ||
	    c->id.qp_type == IBV_QPT_UD) {
		/* Unknown or already gone (or not the peer's): answer anyway so the
		 * sender stops (12.9.8), and leave our connection alone. */
		CMA_COUNT(drep_stale);
		cma_gsi_send(d, local_gid_index(d, NULL), src, 0, 0, out);
		return;
	}
	cma_send_mad(c, out);
	switch (c->state) {
	case CMA_ESTABLISHED:
	case CMA_REP_SENT:
	case CMA_REP_RCVD:
		cma_settle(c, CMA_DISCONNECTED);
		cma_post_peer_disconnect(c);
		break;
	case CMA_DREQ_SENT: /* both ended at once: ours is the program's own */
		cma_settle(c, CMA_DISCONNECTED);
		cma_event_post(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
		break;
	default:
		break; /* a duplicate: the DREP above was its answer */
	}
}

static void handle_drep(const union ibv_gid *src, const uint8_t *mad)
{
	struct cm_ids m;

	cm_mad_get_ids(mad, CM_ATTR_DREP, &m);
	struct cma_id *c = id_answered(src, &m, CMA_DREQ_SENT);
	if (!c)
		return;
	cma_settle(c, CMA_DISCONNECTED);
	cma_event_post(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
}

static void handle_sidr_req(struct cma_device *d, const union ibv_gid *src, uint64_t tid,
			    const uint8_t *mad)
{
	struct cm_sidr_req r;
	struct cma_hdr h;
	bool hdr_ok;

	cm_mad_get_sidr_req(mad, &r);
	struct cma_id *dup = find_duplicate(r.request_id, src);
	if (dup) {
		CMA_COUNT(dup_req);
		if (dup->have_answer)
			cma_send_mad(dup, dup->answer);
		return;
	}
	struct cma_id *l = request_listener(d, r.service_id, r.pdata, true, &h, &hdr_ok);
	int idx = local_gid_index(d, hdr_ok ? h.dst : NULL);
	if (!l) {
		if (!reject_unlistened(d, src))
			return;
		struct cm_sidr_rep rep = {.request_id = r.request_id,
					  .status = CM_SIDR_UNSUPPORTED,
					  .service_id = r.service_id};
		uint8_t out[CM_MAD_SIZE];
		cm_mad_put_sidr_rep(out, tid, &rep);
		cma_gsi_send(d, idx, src, 0, 0, out);
		return;
	}
	if (backlog_full(l))
		return;
	struct cma_id *c = new_passive_id(l, d, idx, src, &h, r.request_id, tid);
	if (!c)
		return;
	struct cma_event *e = cma_event_post(
	    c, RDMA_CM_EVENT_CONNECT_REQUEST, 0, r.pdata + CMA_HDR_LEN,
	    CM_SIDR_REQ_PDATA - CMA_HDR_LEN > 196 ? 196 : CM_SIDR_REQ_PDATA - CMA_HDR_LEN);
	if (!e)
		return;
	e->ev.listen_id = &l->id;
	struct rdma_ud_param *up = &e->ev.param.ud;
	cma_fill_ah(c, &up->ah_attr);
	up->qkey = CMA_UDP_QKEY;
}

static void handle_sidr_rep(const union ibv_gid *src, const uint8_t *mad)
{
	struct cm_sidr_rep r;

	cm_mad_get_sidr_rep(mad, &r);
	struct cma_id *c = find_by_local_comm_id(r.request_id);
	if (!c) {
		CMA_COUNT(drop_unknown_id);
		return;
	}
	if (!from_peer(c, src))
		return;
	if (c->state != CMA_REQ_SENT || c->id.qp_type != IBV_QPT_UD) {
		CMA_COUNT(drop_wrong_state);
		return;
	}
	c->timer = false;
	if (r.status != CM_SIDR_OK) {
		c->state = CMA_DISCONNECTED;
		cma_event_post(c, RDMA_CM_EVENT_UNREACHABLE, -EINVAL, r.pdata, CM_SIDR_REP_PDATA);
		return;
	}
	c->state = CMA_ESTABLISHED;
	c->remote_qpn = r.qpn;
	c->remote_qkey = r.qkey;
	struct cma_event *e =
	    cma_event_post(c, RDMA_CM_EVENT_ESTABLISHED, 0, r.pdata, CM_SIDR_REP_PDATA);
	if (!e)
		return;
	cma_fill_ah(c, &e->ev.param.ud.ah_attr);
	e->ev.param.ud.qp_num = r.qpn;
	e->ev.param.ud.qkey = r.qkey;
}

/* Whether the 20 bytes at p are an IPv4 header without options whose
 * checksum holds. */
static bool ipv4_header_ok(const uint8_t *p)
{
	uint32_t sum = 0;

	if (p[0] != 0x45)
		return false;
	for (unsigned i = 0; i < 20; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return sum == 0xffff;
}

/*
 * The sender's GID from the 40-byte GRH area: for RoCEv2 over IPv4 an IPv4
 * header in its last 20 bytes (source address at byte 12 of it), otherwise
 * the IPv6 header. An IPv6 source GID can hold 0x4_ at byte 20 of the area,
 * so "version 4 there" alone is not enough: as rdma-core does
 * (ibv_init_ah_from_wc), an area that starts with version 6 is IPv4 only if
 * bytes 20..39 are a valid IPv4 header. -EINVAL when it is neither.
 */
static int grh_source(const uint8_t *grh, union ibv_gid *src)
{
	bool v6 = (grh[0] >> 4) == 6;

	memset(src, 0, sizeof(*src));
	if ((!v6 && (grh[20] >> 4) == 4) || (v6 && ipv4_header_ok(grh + 20))) {
		src->raw[10] = src->raw[11] = 0xff;
		memcpy(src->raw + 12, grh + 20 + 12, 4);
		return 0;
	}
	if (!v6)
		return -EINVAL;
	memcpy(src->raw, grh + 8, 16);
	return 0;
}

void cma_handle_mad(struct cma_device *d, const uint8_t *grh, const uint8_t *mad)
{
	struct cm_mad_hdr h;
	union ibv_gid src;

	CMA_COUNT(mad_rx);
	if (cm_mad_parse_hdr(mad, CM_MAD_SIZE, &h) < 0) {
		CMA_COUNT(drop_bad_hdr);
		return;
	}
	if (grh_source(grh, &src) < 0) {
		CMA_COUNT(drop_bad_grh);
		return;
	}
	switch (h.attr_id) {
	case CM_ATTR_REQ:
		handle_req(d, &src, h.tid, mad);
		break;
	case CM_ATTR_REP:
		handle_rep(&src, mad);
		break;
	case CM_ATTR_RTU:
		handle_rtu(&src, mad);
		break;
	case CM_ATTR_REJ:
		handle_rej(&src, mad);
		break;
	case CM_ATTR_DREQ:
		handle_dreq(d, &src, h.tid, mad);
		break;
	case CM_ATTR_DREP:
		handle_drep(&src, mad);
		break;
	case CM_ATTR_SIDR_REQ:
		handle_sidr_req(d, &src, h.tid, mad);
		break;
	case CM_ATTR_SIDR_REP:
		handle_sidr_rep(&src, mad);
		break;
	default:
		CMA_COUNT(drop_bad_attr); /* MRA, LAP, APR: not used by rocemu's CM */
		break;
	}
}
