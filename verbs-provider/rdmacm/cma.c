/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdma_cm ids and the connection state machines over the IB CM protocol
 * (IBA vol. 1 ch. 12) on QP1:
 *   active:  REQ ->  <- REP  RTU ->            (ESTABLISHED)
 *   passive: <- REQ  (CONNECT_REQUEST) REP ->  <- RTU (ESTABLISHED)
 *   either:  DREQ -> <- DREP                    (DISCONNECTED on both sides)
 *   refused: <- REJ (REJECTED: unknown service ID, rdma_reject)
 *   UD port spaces: SIDR_REQ -> <- SIDR_REP    (12.11)
 * REQ, REP, DREQ and SIDR_REQ are resent every CMA_RESP_TIMEOUT until
 * answered, at most CMA_MAX_CM_RETRIES times (then UNREACHABLE, or for DREQ
 * DISCONNECTED anyway); a duplicate REQ/REP/DREQ is answered with what was
 * sent the first time.
 * Beside this file: cma_event.c (event channels and events), cma_qp.c (the
 * QP transitions, QPs/SRQs/endpoints made for an id), cma_mcast.c
 * (multicast) and cma_recv.c (the MADs received); cma.h has what they share.
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

struct cma_id *cma_ids;
static uint16_t next_port;

RDMACM_STATS_DEFINE(CMA_STATS, cma_stats, CMA_STAT_COUNT, cma_stat_name)

/* The listener of passive ids whose listener was destroyed (never in cma_ids). */
static struct cma_id orphaned_listener;

void cma_stats_report(void)
{
	pthread_mutex_lock(&cma_lock);
	rdmacm_stats_print("rdmacm cm", cma_stats_names, cma_stats, CMA_STAT_COUNT);
	pthread_mutex_unlock(&cma_lock);
}

/*
 * The prologue of the rdma_* calls on an id: the id with cma_lock held when it
 * is in one of the states of want; else NULL, errno EINVAL and the lock not
 * held (rdma_cm(7): calls out of order fail with EINVAL).
 */
struct cma_id *cma_lock_in_state(struct rdma_cm_id *id, unsigned want)
{
	if (!id) {
		errno = EINVAL;
		return NULL;
	}
	struct cma_id *c = cma_id_of(id);
	pthread_mutex_lock(&cma_lock);
	if (!(want & IN_STATE(c->state))) {
		pthread_mutex_unlock(&cma_lock);
		errno = EINVAL;
		return NULL;
	}
	return c;
}

/*
 * Every number a peer sees and must neither guess nor see again after a
 * restart (communication IDs, transaction IDs, starting PSNs, the REJ's ID)
 * comes from the kernel's CSPRNG: a peer's CM keeps a closed connection's
 * IDs in time-wait for seconds and rejects a REQ that repeats them as stale
 * (12.9.8.3), and a host on the segment that could predict them could
 * complete or end another's connection.
 */
uint32_t cma_random32(void)
{
	uint32_t v;
	ssize_t n;

	while ((n = getrandom(&v, sizeof(v), 0)) != (ssize_t)sizeof(v))
		if (n >= 0 || errno != EINTR)
			abort(); /* ENOSYS: a kernel older than 3.17, no safe source */
	return v;
}

/* A communication ID no id of this process holds (0 is never one). */
static uint32_t new_comm_id(void)
{
	for (;;) {
		uint32_t id = cma_random32();
		bool used = id == 0;

		for (struct cma_id *c = cma_ids; c && !used; c = c->next)
			used = c->local_comm_id == id;
		if (!used)
			return id;
	}
}

static uint64_t resp_timeout_ns(void)
{
	return 4096ull << CMA_RESP_TIMEOUT; /* 4.096 us * 2^t */
}

/* ------------------------------------------------------------------------ */
/* Ids                                                                        */

static int port_in_use(enum rdma_port_space ps, uint16_t port, const struct cma_id *self)
{
	for (struct cma_id *c = cma_ids; c; c = c->next)
		if (c != self && c->bound && c->id.ps == ps && c->port == port && !c->listener)
			return 1;
	return 0;
}

static uint16_t ephemeral_port(enum rdma_port_space ps)
{
	if (!next_port)
		next_port = (uint16_t)(32768 + cma_random32() % 28000);
	for (int i = 0; i < 28232; i++) {
		uint16_t p = next_port++;
		if (next_port >= 61000)
			next_port = 32768;
		if (!port_in_use(ps, p, NULL))
			return p;
	}
	return 0;
}

static void set_port(struct sockaddr *sa, uint16_t port)
{
	if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)sa)->sin6_port = htons(port);
	else
		((struct sockaddr_in *)sa)->sin_port = htons(port);
}

static uint16_t get_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	return 0;
}

/* An IP sockaddr for a 16-byte address (IPv4 in its last four bytes). */
void cma_ip_to_sockaddr(int ip_version, const uint8_t *addr, uint16_t port,
			struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (ip_version == 4) {
		struct sockaddr_in *s = (struct sockaddr_in *)ss;
		s->sin_family = AF_INET;
		memcpy(&s->sin_addr, addr + 12, 4);
		s->sin_port = htons(port);
	} else {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
		s->sin6_family = AF_INET6;
		memcpy(&s->sin6_addr, addr, 16);
		s->sin6_port = htons(port);
	}
}

void cma_sockaddr_ip16(const struct sockaddr *sa, uint8_t *out)
{
	union ibv_gid g;
	cma_sockaddr_to_gid(sa, &g);
	memcpy(out, g.raw, 16);
}

static struct cma_channel *sync_channel(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	if (!ch)
		return NULL;
	cma_channel_of(ch)->sync = true;
	return cma_channel_of(ch);
}

/* channel, or when it is NULL (a synchronous id) a private channel made for
 * the id, returned in *own too; NULL with errno set if that fails. */
static struct rdma_event_channel *channel_or_own(struct rdma_event_channel *channel,
						 struct cma_channel **own)
{
	*own = channel ? NULL : sync_channel();
	return channel ? channel : *own ? &(*own)->ch : NULL;
}

struct cma_id *cma_id_alloc(struct rdma_event_channel *channel, void *context,
			    enum rdma_port_space ps, enum ibv_qp_type qp_type)
{
	struct cma_id *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->id.channel = channel;
	c->id.context = context;
	c->id.ps = ps;
	c->id.qp_type = qp_type;
	c->id.port_num = 1;
	c->state = CMA_IDLE;
	c->local_comm_id = new_comm_id();
	c->next = cma_ids;
	cma_ids = c;
	return c;
}

static void id_unlink(struct cma_id *c)
{
	for (struct cma_id **p = &cma_ids; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			return;
		}
}

/* rdma_create_id, and rdma_create_ep with the QP type of its rdma_addrinfo
 * (qp_type 0: the port space's). */
int cma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
		  enum rdma_port_space ps, enum ibv_qp_type qp_type)
{
	enum ibv_qp_type t;

	if (!id)
		return cma_fail(EINVAL);
	switch (ps) {
	case RDMA_PS_TCP:
		t = IBV_QPT_RC;
		break;
	case RDMA_PS_UDP:
	case RDMA_PS_IPOIB:
		t = IBV_QPT_UD;
		break;
	case RDMA_PS_IB:
		t = IBV_QPT_RC;
		break;
	default:
		return cma_fail(EINVAL);
	}
	if (qp_type)
		t = qp_type;
	int rc = cma_init();
	if (rc < 0)
		return cma_fail(-rc);
	struct cma_channel *own;
	channel = channel_or_own(channel, &own);
	if (!channel)
		return -1;
	pthread_mutex_lock(&cma_lock);
	struct cma_id *c = cma_id_alloc(channel, context, ps, t);
	pthread_mutex_unlock(&cma_lock);
	if (!c) {
		if (own)
			rdma_destroy_event_channel(&own->ch);
		return cma_fail(ENOMEM);
	}
	*id = &c->id;
	return 0;
}

int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
		   enum rdma_port_space ps)
{
	return cma_create_id(channel, id, context, ps, 0);
}
ROCEMU_PUBLIC(rdma_create_id)

/* ------------------------------------------------------------------------ */
/* Sending CM messages                                                        */

void cma_send_mad(struct cma_id *c, const uint8_t *mad)
{
	if (c->dev)
		cma_gsi_send(c->dev, c->sgid_index, &c->remote_gid, c->tclass, c->sl, mad);
}

/* The active side's RTU (kept as the answer to a duplicate REP): established. */
void cma_send_rtu(struct cma_id *c)
{
	struct cm_ids m = {.local_comm_id = c->local_comm_id, .remote_comm_id = c->remote_comm_id};

	cm_mad_put_ids(c->answer, c->tid, CM_ATTR_RTU, &m);
	c->have_answer = true;
	cma_send_mad(c, c->answer);
	c->state = CMA_ESTABLISHED;
}

/*
 * The peer ended the connection (its DREQ): DISCONNECTED, once the program
 * has polled the completions its QP already had. The peer moved its QP to
 * the error state before it sent the DREQ, so these are the last ones this
 * connection makes, and they came first: a NIC wrote them before the peer
 * could even see its last operation done. A program that tears the
 * connection down on DISCONNECTED from another thread than the one polling
 * (ofi_rxm 1.17's auto-progress thread closes the endpoint at once, and
 * ibv_destroy_qp takes the QP's queued completions out of its CQs, as
 * mlx5's does) lost them when that thread ran first: on a busy machine the
 * polling thread may not run for milliseconds, while on a NIC the peer's
 * DREQ rarely comes before the completion is taken (docs/rdmacm.md,
 * "Disconnection"). So the event waits until the QP has no completion
 * queued, at most CMA_DISC_HOLD_NS (then it is posted anyway, counted): a
 * program that polls only after DISCONNECTED is delayed, never stuck.
 */
void cma_post_peer_disconnect(struct cma_id *c)
{
	struct ibv_qp *qp = c->id.qp;

	if (qp && cma_qp_queued(qp->context, qp->qp_num)) {
		c->disc_held = true;
		c->disc_verbs = qp->context;
		c->disc_qpn = qp->qp_num;
		c->disc_until_ns = cma_now_ns() + CMA_DISC_HOLD_NS;
		CMA_COUNT(disc_held);
		return;
	}
	cma_event_post(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
}

/* A held DISCONNECTED (lock held): posted now, if still held. */
static void release_disconnect(struct cma_id *c)
{
	if (!c->disc_held)
		return;
	c->disc_held = false;
	cma_event_post(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
}

static void arm_timer(struct cma_id *c)
{
	c->timer = true;
	c->retries = 0;
	c->deadline_ns = cma_now_ns() + resp_timeout_ns();
}

/* The exchange the timer resends for is over (answered, or overtaken by
 * another): no more resending, and the id is in state st. */
void cma_settle(struct cma_id *c, enum cma_state st)
{
	c->timer = false;
	c->state = st;
}

void cma_send_rej(struct cma_device *d, int sgid_index, const union ibv_gid *dgid, uint8_t tclass,
		  uint8_t sl, uint64_t tid, uint32_t local_comm_id, uint32_t remote_comm_id,
		  enum cm_rej_msg msg, uint16_t reason, const void *pdata, uint8_t plen)
{
	struct cm_rej r = {.local_comm_id = local_comm_id,
			   .remote_comm_id = remote_comm_id,
			   .msg_rejected = msg,
			   .reason = reason};
	uint8_t mad[CM_MAD_SIZE];

	if (pdata && plen)
		memcpy(r.pdata, pdata, plen > CM_REJ_PDATA ? CM_REJ_PDATA : plen);
	cm_mad_put_rej(mad, tid, &r);
	cma_gsi_send(d, sgid_index, dgid, tclass, sl, mad);
}

static void send_dreq(struct cma_id *c)
{
	struct cm_ids m = {.local_comm_id = c->local_comm_id,
			   .remote_comm_id = c->remote_comm_id,
			   .remote_qpn = c->remote_qpn};
	cm_mad_put_ids(c->mad, c->tid, CM_ATTR_DREQ, &m);
	cma_send_mad(c, c->mad);
}

/* ------------------------------------------------------------------------ */
/* Address and route                                                          */

void cma_fill_route(struct cma_id *c)
{
	struct ibv_sa_path_rec *p = &c->path;

	memset(p, 0, sizeof(*p));
	p->sgid = c->dev->gids[c->sgid_index];
	p->dgid = c->remote_gid;
	p->pkey = htobe16(0xffff);
	p->hop_limit = 64;
	p->traffic_class = c->tclass;
	p->sl = c->sl;
	p->mtu = (uint8_t)c->dev->active_mtu;
	p->mtu_selector = 2;
	p->packet_life_time = 14;
	p->reversible = 1;
	p->numb_path = 1;
	c->id.route.addr.addr.ibaddr.sgid = p->sgid;
	c->id.route.addr.addr.ibaddr.dgid = p->dgid;
	c->id.route.addr.addr.ibaddr.pkey = 0xffff;
	c->id.route.path_rec = p;
	c->id.route.num_paths = 1;
	c->mtu = c->dev->active_mtu;
}

static int bind_locked(struct cma_id *c, const struct sockaddr *addr)
{
	socklen_t len = cma_sockaddr_len(addr);
	struct cma_device *dev = NULL;
	int idx = 0;

	if (!len)
		return addr && addr->sa_family == AF_IB ? -EAFNOSUPPORT : -EINVAL;
	if (c->bound)
		return -EINVAL;
	if (!cma_addr_any(addr)) {
		int rc = cma_pick_device(addr, NULL, &dev, &idx);
		/* A loopback address binds without a device (id->verbs stays NULL), as
		 * with librdmacm: libfabric's verbs provider binds 127.0.0.1 and then
		 * lists every device's addresses. */
		if (rc < 0 && !cma_addr_loopback(addr))
			return rc;
	}
	uint16_t port = get_port(addr);
	if (port && port_in_use(c->id.ps, port, c))
		return -EADDRINUSE;
	if (!port)
		port = ephemeral_port(c->id.ps);
	if (!port)
		return -EADDRINUSE;
	memcpy(&c->id.route.addr.src_addr, addr, len);
	set_port(&c->id.route.addr.src_addr, port);
	c->port = port;
	c->bound = true;
	if (dev) {
		c->dev = dev;
		c->sgid_index = idx;
		c->id.verbs = dev->verbs;
		c->id.pd = dev->pd; /* as librdmacm: the device's PD until a QP names one */
	}
	c->state = CMA_ADDR_BOUND;
	return 0;
}

int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	if (!id || !addr)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&cma_lock);
	int rc = bind_locked(cma_id_of(id), addr);
	pthread_mutex_unlock(&cma_lock);
	return rc < 0 ? cma_fail(-rc) : 0;
}
ROCEMU_PUBLIC(rdma_bind_addr)

int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr, struct sockaddr *dst_addr,
		      int timeout_ms)
{
	(void)timeout_ms; /* resolution is immediate: the engine resolves MACs itself */
	if (!id || !dst_addr)
		return cma_fail(EINVAL);
	if (dst_addr->sa_family == AF_IB)
		return cma_fail(EAFNOSUPPORT);
	if (!cma_sockaddr_len(dst_addr))
		return cma_fail(EINVAL);
	struct cma_id *c = cma_lock_in_state(id, IN_ANY_STATE);
	int rc = 0;
	if (!c->bound) {
		struct sockaddr_storage any = {0};
		if (src_addr && cma_sockaddr_len(src_addr))
			memcpy(&any, src_addr, cma_sockaddr_len(src_addr));
		else
			any.ss_family = dst_addr->sa_family;
		rc = bind_locked(c, (struct sockaddr *)&any);
	}
	struct cma_device *dev = c->dev;
	int idx = c->sgid_index;
	if (rc == 0 && !dev)
		rc = cma_pick_device(NULL, dst_addr, &dev, &idx);
	if (rc < 0) {
		pthread_mutex_unlock(&cma_lock);
		return cma_fail(-rc);
	}
	c->dev = dev;
	c->sgid_index = idx;
	if (id->verbs != dev->verbs)
		id->pd = dev->pd;
	id->verbs = dev->verbs;
	/* A wildcard source becomes the device's address. */
	if (cma_addr_any((struct sockaddr *)&id->route.addr.src_addr)) {
		const union ibv_gid *g = &dev->gids[idx];
		struct sockaddr_storage ss;
		bool v4 = g->raw[10] == 0xff && g->raw[11] == 0xff;
		cma_ip_to_sockaddr(v4 ? 4 : 6, g->raw, c->port, &ss);
		memcpy(&id->route.addr.src_addr, &ss, sizeof(ss));
	}
	memcpy(&id->route.addr.dst_addr, dst_addr, cma_sockaddr_len(dst_addr));
	cma_sockaddr_to_gid(dst_addr, &c->remote_gid);
	cma_fill_route(c);
	id->route.num_paths = 0; /* until rdma_resolve_route */
	return cma_step_done(c, CMA_ADDR_RESOLVED, RDMA_CM_EVENT_ADDR_RESOLVED);
}
ROCEMU_PUBLIC(rdma_resolve_addr)

int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	(void)timeout_ms;
	struct cma_id *c = cma_lock_in_state(id, IN_STATE(CMA_ADDR_RESOLVED));
	if (!c)
		return -1;
	/* The path is the pair of GIDs; the engine finds the MAC by ARP/ND. */
	cma_fill_route(c);
	return cma_step_done(c, CMA_ROUTE_RESOLVED, RDMA_CM_EVENT_ROUTE_RESOLVED);
}
ROCEMU_PUBLIC(rdma_resolve_route)

int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct cma_id *c = cma_lock_in_state(id, IN_ANY_STATE);
	if (!c)
		return -1;
	int rc = 0;
	if (!c->bound) {
		struct sockaddr_in any = {.sin_family = AF_INET};
		rc = bind_locked(c, (struct sockaddr *)&any);
	}
	if (rc == 0 && c->state != CMA_ADDR_BOUND)
		rc = -EINVAL;
	if (rc == 0) {
		c->state = CMA_LISTEN;
		c->backlog = backlog;
	}
	pthread_mutex_unlock(&cma_lock);
	return rc < 0 ? cma_fail(-rc) : 0;
}
ROCEMU_PUBLIC(rdma_listen)

int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct rdma_cm_event *ev;

	if (!listen || !id)
		return cma_fail(EINVAL);
	if (!cma_is_sync(cma_id_of(listen)))
		return cma_fail(EINVAL);
	for (;;) {
		if (rdma_get_cm_event(listen->channel, &ev))
			return -1;
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			break;
		rdma_ack_cm_event(ev);
	}
	/* The request's id gets its own channel; the event stays readable
	 * through (*id)->event until rdma_accept/rdma_reject/rdma_destroy_id. */
	struct cma_channel *own = sync_channel();
	if (!own) {
		rdma_ack_cm_event(ev);
		return -1;
	}
	pthread_mutex_lock(&cma_lock);
	ev->id->channel = &own->ch;
	pthread_mutex_unlock(&cma_lock);
	ev->id->event = ev;
	/* a passive endpoint's requests come with their QP (rdma_create_ep) */
	struct ibv_qp_init_attr *qa = cma_id_of(listen)->ep_qp_attr;
	if (qa) {
		struct ibv_qp_init_attr a = *qa;
		if (rdma_create_qp(ev->id, listen->pd, &a)) {
			int err = errno;
			rdma_destroy_id(ev->id); /* rejects the request */
			return cma_fail(err);
		}
	}
	*id = ev->id;
	return 0;
}
ROCEMU_PUBLIC(rdma_get_request)

void cma_ack_attached_event(struct rdma_cm_id *id)
{
	if (id->event) {
		struct rdma_cm_event *ev = id->event;
		id->event = NULL;
		rdma_ack_cm_event(ev);
	}
}

/* ------------------------------------------------------------------------ */
/* Connect / accept / reject / disconnect                                     */

/*
 * The flow label of a new connection's path, as Linux's rdma_cm chooses it
 * for RoCEv2: the IPv6 source's flow label when the program set one, else a
 * hash of the two ports (sport * 31 + dport). Both sides put it in the GRH
 * (IPv6 flow label) of the connection's packets; fabrics hash on it.
 */
static uint32_t path_flow_label(const struct cma_id *c)
{
	const struct sockaddr *src = (const struct sockaddr *)&c->id.route.addr.src_addr;
	const struct sockaddr *dst = (const struct sockaddr *)&c->id.route.addr.dst_addr;

	if (src->sa_family == AF_INET6) {
		uint32_t fl = ntohl(((const struct sockaddr_in6 *)src)->sin6_flowinfo) & 0xFFFFF;
		if (fl)
			return fl;
	}
	return ((uint32_t)c->port * 31 + get_port(dst)) & 0xFFFFF;
}

uint8_t cma_cap8(unsigned v, unsigned max)
{
	return (uint8_t)(v > max ? max : v);
}

static void cma_hdr_for(const struct cma_id *c, uint8_t *out)
{
	struct cma_hdr h;
	const struct sockaddr *src = (const struct sockaddr *)&c->id.route.addr.src_addr;
	const struct sockaddr *dst = (const struct sockaddr *)&c->id.route.addr.dst_addr;

	h.ip_version = src->sa_family == AF_INET6 ? 6 : 4;
	h.src_port = c->port;
	memset(h.src, 0, 16);
	memset(h.dst, 0, 16);
	if (h.ip_version == 4) {
		memcpy(h.src + 12, &((const struct sockaddr_in *)src)->sin_addr, 4);
		memcpy(h.dst + 12, &((const struct sockaddr_in *)dst)->sin_addr, 4);
	} else {
		cma_sockaddr_ip16(src, h.src);
		cma_sockaddr_ip16(dst, h.dst);
	}
	cma_hdr_put(out, &h);
}

/* The active side's REQ or SIDR_REQ (msg, the struct of attr_id) under a
 * new transaction ID, kept in c->mad for the retransmissions. */
static void send_request(struct cma_id *c, uint16_t attr_id, const void *msg)
{
	c->tid = (uint64_t)cma_random32() << 32 | c->local_comm_id;
	cm_mad_put(c->mad, c->tid, attr_id, msg);
	if (attr_id == CM_ATTR_REQ) /* ECE options (cm_mad.h) */
		cm_mad_set_attr_mod(c->mad, c->local_ece.options);
	cma_send_mad(c, c->mad);
	arm_timer(c);
	c->state = CMA_REQ_SENT;
}

static int connect_ud(struct cma_id *c, struct rdma_conn_param *p)
{
	struct cm_sidr_req r = {
	    .request_id = c->local_comm_id,
	    .pkey = 0xffff,
	    .service_id = cma_service_id((uint16_t)c->id.ps,
					 get_port((struct sockaddr *)&c->id.route.addr.dst_addr))};
	if (p && p->private_data_len > CM_SIDR_REQ_PDATA - CMA_HDR_LEN)
		return -EINVAL;
	cma_hdr_for(c, r.pdata);
	if (p && p->private_data && p->private_data_len)
		memcpy(r.pdata + CMA_HDR_LEN, p->private_data, p->private_data_len);
	send_request(c, CM_ATTR_SIDR_REQ, &r);
	return 0;
}

int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
	struct cma_id *c = cma_lock_in_state(id, IN_STATE(CMA_ROUTE_RESOLVED));
	if (!c)
		return -1;
	int rc = 0;
	if (id->qp_type == IBV_QPT_UD) {
		rc = connect_ud(c, p);
		goto out;
	}
	if (p && p->private_data_len > CM_REQ_PDATA - CMA_HDR_LEN) {
		rc = -EINVAL;
		goto out;
	}
	struct cm_req r = {0};
	r.local_comm_id = c->local_comm_id;
	r.vendor_id = c->local_ece.vendor_id & 0xffffff;
	r.service_id =
	    cma_service_id((uint16_t)id->ps, get_port((struct sockaddr *)&id->route.addr.dst_addr));
	r.local_ca_guid = be64toh(c->dev->guid);
	r.local_qpn = id->qp ? id->qp->qp_num : (p ? p->qp_num & 0xffffff : 0);
	c->local_qpn = r.local_qpn;
	c->local_psn = cma_random32() & 0xffffff;
	c->resp_res = cma_cap8(p ? p->responder_resources : 255, c->dev->max_rd_atom);
	c->init_depth = cma_cap8(p ? p->initiator_depth : 255, c->dev->max_rd_atom);
	c->retry_count = cma_cap8(p ? p->retry_count : 7, 7);
	c->local_ack_timeout = CMA_ACK_TIMEOUT;
	enum ibv_qp_type t = cma_conn_type(c);
	r.initiator_depth = c->init_depth;
	r.remote_cm_timeout = CMA_RESP_TIMEOUT;
	r.local_cm_timeout = CMA_RESP_TIMEOUT;
	r.transport = cma_req_transport_of(t);
	r.flow_control = p ? p->flow_control : 1;
	r.starting_psn = c->local_psn;
	r.pkey = 0xffff;
	r.path_mtu = (uint8_t)c->mtu;
	r.max_cm_retries = CMA_MAX_CM_RETRIES;
	if (t == IBV_QPT_XRC_SEND) {
		/* An XRC initiator receives nothing: the REQ asks no responder
		 * resources, retries or SRQ of the target (IBA 12.6.5 and Linux's
		 * cm_format_req leave them 0 for XRC_INI). */
		r.ext_transport = CM_EXT_TRANSPORT_XRC;
	} else {
		r.responder_resources = c->resp_res;
		r.retry_count = c->retry_count;
		r.rnr_retry_count = cma_cap8(p ? p->rnr_retry_count : 7, 7);
		r.srq = id->srq || (id->qp && id->qp->srq) || (p && p->srq);
	}
	memcpy(r.local_gid, c->dev->gids[c->sgid_index].raw, 16);
	memcpy(r.remote_gid, c->remote_gid.raw, 16);
	c->flow_label = path_flow_label(c);
	r.flow_label = c->flow_label;
	r.packet_rate = c->dev->rate;
	r.hop_limit = 64;
	r.traffic_class = c->tclass;
	r.sl = c->sl;
	r.local_ack_timeout = CMA_ACK_TIMEOUT;
	cma_hdr_for(c, r.pdata);
	if (p && p->private_data && p->private_data_len)
		memcpy(r.pdata + CMA_HDR_LEN, p->private_data, p->private_data_len);
	send_request(c, CM_ATTR_REQ, &r);
out:
	pthread_mutex_unlock(&cma_lock);
	if (rc < 0)
		return cma_fail(-rc);
	return cma_is_sync(c) ? cma_sync_wait(c, RDMA_CM_EVENT_ESTABLISHED) : 0;
}
ROCEMU_PUBLIC(rdma_connect)

static int accept_ud(struct cma_id *c, struct rdma_conn_param *p)
{
	struct cm_sidr_rep r = {.request_id = c->remote_comm_id,
				.status = CM_SIDR_OK,
				.qpn = c->id.qp ? c->id.qp->qp_num : (p ? p->qp_num : 0),
				.qkey = CMA_UDP_QKEY,
				.service_id = cma_service_id((uint16_t)c->id.ps, c->port)};
	if (p && p->private_data_len > CM_SIDR_REP_PDATA)
		return -EINVAL;
	if (p && p->private_data && p->private_data_len)
		memcpy(r.pdata, p->private_data, p->private_data_len);
	cm_mad_put_sidr_rep(c->answer, c->tid, &r);
	c->have_answer = true;
	cma_send_mad(c, c->answer);
	c->state = CMA_ESTABLISHED;
	return 0;
}

int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
	struct cma_id *c = cma_lock_in_state(id, IN_STATE(CMA_REQ_RCVD));
	if (!c)
		return -1;
	bool sync = cma_is_sync(c);
	int rc = 0;
	if (id->qp_type == IBV_QPT_UD) {
		rc = accept_ud(c, p);
		sync = false;
		goto out;
	}
	if (p && p->private_data_len > CM_REP_PDATA) {
		rc = -EINVAL;
		goto out;
	}
	c->resp_res =
	    cma_cap8(p ? p->responder_resources : c->remote_init_depth, c->dev->max_rd_atom);
	c->init_depth = cma_cap8(p ? p->initiator_depth : c->remote_resp_res, c->remote_resp_res);
	c->local_psn = cma_random32() & 0xffffff;
	c->local_qpn = id->qp ? id->qp->qp_num : (p ? p->qp_num & 0xffffff : 0);
	if (id->qp) {
		rc = cma_qp_connect(c);
		if (rc) {
			rc = -rc;
			goto out;
		}
	}
	struct cm_rep r = {.local_comm_id = c->local_comm_id,
			   .remote_comm_id = c->remote_comm_id,
			   .local_qpn = c->local_qpn,
			   .starting_psn = c->local_psn,
			   .responder_resources = c->resp_res,
			   .initiator_depth = c->init_depth,
			   .target_ack_delay = 15,
			   .flow_control = p ? p->flow_control : 1,
			   .rnr_retry_count = cma_cap8(p ? p->rnr_retry_count : 7, 7),
			   .srq = id->srq || (id->qp && id->qp->srq) || (p && p->srq),
			   .local_ca_guid = be64toh(c->dev->guid)};
	if (cma_conn_type(c) == IBV_QPT_XRC_RECV) {
		/* An XRC target is named as the local EE context, with SRQ set and
		 * no local QPN, initiator depth or flow control (it sends no
		 * requests), as Linux's cm_format_rep writes it for XRC_TGT. */
		r.local_eecn = r.local_qpn;
		r.local_qpn = 0;
		r.initiator_depth = 0;
		r.flow_control = 0;
		r.srq = true;
	}
	/* ECE: the vendor ID the REQ carried comes back (0 from a peer without
	 * ECE), with our options, as rdma-core's librdmacm answers */
	cm_rep_set_vendor_id(&r, c->remote_ece.vendor_id);
	if (p && p->private_data && p->private_data_len)
		memcpy(r.pdata, p->private_data, p->private_data_len);
	cm_mad_put_rep(c->mad, c->tid, &r);
	cm_mad_set_attr_mod(c->mad, c->local_ece.options);
	cma_send_mad(c, c->mad);
	arm_timer(c);
	c->state = CMA_REP_SENT;
out:
	pthread_mutex_unlock(&cma_lock);
	if (rc < 0)
		return cma_fail(-rc);
	cma_ack_attached_event(id);
	return sync ? cma_sync_wait(c, RDMA_CM_EVENT_ESTABLISHED) : 0;
}
ROCEMU_PUBLIC(rdma_accept)

static int reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len,
		  uint16_t reason)
{
	struct cma_id *c = cma_lock_in_state(id, IN_STATE(CMA_REQ_RCVD));
	if (!c)
		return -1;
	if (id->qp_type == IBV_QPT_UD) {
		struct cm_sidr_rep r = {.request_id = c->remote_comm_id,
					.status = CM_SIDR_REJECT,
					.service_id = cma_service_id((uint16_t)id->ps, c->port)};
		if (private_data && private_data_len)
			memcpy(r.pdata, private_data,
			       private_data_len > CM_SIDR_REP_PDATA ? CM_SIDR_REP_PDATA
								    : private_data_len);
		cm_mad_put_sidr_rep(c->answer, c->tid, &r);
		cma_send_mad(c, c->answer);
	} else {
		cma_send_rej(c->dev, c->sgid_index, &c->remote_gid, c->tclass, c->sl, c->tid,
			     c->local_comm_id, c->remote_comm_id, CM_REJ_MSG_REQ, reason,
			     private_data, private_data_len);
	}
	c->state = CMA_DISCONNECTED;
	pthread_mutex_unlock(&cma_lock);
	cma_ack_attached_event(id);
	return 0;
}

int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	return reject(id, private_data, private_data_len, CM_REJ_CONSUMER_DEFINED);
}
ROCEMU_PUBLIC(rdma_reject)

/* rdma_reject_ece(3): the peer's ECE options are refused, REJ reason 35. */
int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	return reject(id, private_data, private_data_len, CM_REJ_VENDOR_OPTION_NOT_SUPPORTED);
}
ROCEMU_PUBLIC(rdma_reject_ece)

/*
 * ECE with a QP the program manages (rdma_set_local_ece(3),
 * rdma_get_remote_ece(3)): it gives what its QP offers (ibv_query_ece)
 * before rdma_connect or rdma_accept, and reads what the peer's REQ or REP
 * carried. An id with a QP negotiates by itself (rdma_create_qp_ex,
 * handle_rep): EINVAL, as in rdma-core.
 */
int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || id->qp || !ece || !ece->vendor_id || ece->comp_mask)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&cma_lock);
	cma_id_of(id)->local_ece.vendor_id = ece->vendor_id;
	cma_id_of(id)->local_ece.options = ece->options;
	pthread_mutex_unlock(&cma_lock);
	return 0;
}
ROCEMU_PUBLIC(rdma_set_local_ece)

int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || id->qp || !ece)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&cma_lock);
	ece->vendor_id = cma_id_of(id)->remote_ece.vendor_id;
	ece->options = cma_id_of(id)->remote_ece.options;
	ece->comp_mask = 0;
	pthread_mutex_unlock(&cma_lock);
	return 0;
}
ROCEMU_PUBLIC(rdma_get_remote_ece)

int rdma_establish(struct rdma_cm_id *id)
{
	struct cma_id *c = cma_lock_in_state(id, IN_STATE(CMA_REP_RCVD));
	if (!c)
		return -1;
	cma_send_rtu(c);
	pthread_mutex_unlock(&cma_lock);
	return 0;
}
ROCEMU_PUBLIC(rdma_establish)

int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	struct cma_id *c = cma_lock_in_state(id, IN_ANY_STATE);
	if (!c)
		return -1;
	/* Traffic before the RTU: the connection is established (12.9.6). */
	if (event == IBV_EVENT_COMM_EST && c->state == CMA_REP_SENT) {
		cma_settle(c, CMA_ESTABLISHED);
		cma_event_post(c, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0);
	}
	pthread_mutex_unlock(&cma_lock);
	return 0;
}
ROCEMU_PUBLIC(rdma_notify)

int rdma_disconnect(struct rdma_cm_id *id)
{
	struct cma_id *c = cma_lock_in_state(id, IN_CONNECTION | IN_STATE(CMA_DREQ_SENT) |
						     IN_STATE(CMA_DISCONNECTED));
	if (!c)
		return -1;
	int rc = 0;
	if (!(IN_CONNECTION & IN_STATE(c->state))) {
		cma_qp_to_err(c);      /* already ending or ended */
		release_disconnect(c); /* the program ends it too: no reason to wait */
	} else if (id->qp_type == IBV_QPT_UD) {
		rc = -EINVAL; /* no connection to end on a datagram service */
	} else {
		cma_qp_to_err(c);
		send_dreq(c);
		arm_timer(c);
		c->state = CMA_DREQ_SENT;
	}
	pthread_mutex_unlock(&cma_lock);
	return rc < 0 ? cma_fail(-rc) : 0;
}
ROCEMU_PUBLIC(rdma_disconnect)

int rdma_destroy_id(struct rdma_cm_id *id)
{
	if (!id)
		return cma_fail(EINVAL);
	struct cma_id *c = cma_id_of(id);
	cma_ack_attached_event(id);
	pthread_mutex_lock(&cma_lock);
	/* The peer must not wait for an answer that will not come. */
	if (id->qp_type != IBV_QPT_UD && (IN_CONNECTION & IN_STATE(c->state)))
		send_dreq(c);
	else if (c->state == CMA_REQ_RCVD && id->qp_type != IBV_QPT_UD)
		cma_send_rej(c->dev, c->sgid_index, &c->remote_gid, c->tclass, c->sl, c->tid,
			     c->local_comm_id, c->remote_comm_id, CM_REJ_MSG_REQ,
			     CM_REJ_CONSUMER_DEFINED, NULL, 0);
	id_unlink(c);
	c->timer = false;
	/* groups still joined are left (and the QP detached if it is still there) */
	while (c->mcs) {
		struct cma_mc *mc = c->mcs;

		c->mcs = mc->next;
		cma_mc_leave(c, mc);
	}
	/* Requests of this listener that the program holds outlive it: they stay
	 * passive ids (duplicate detection) but no longer count against whatever
	 * listener is allocated at this address next. */
	for (struct cma_id *o = cma_ids; o; o = o->next)
		if (o->listener == c)
			o->listener = &orphaned_listener;
	struct cma_channel *ch = cma_channel_of(id->channel);
	bool own = ch && ch->sync;
	/* Events not yet taken from the channel go with the id. */
	struct cma_event *e = ch ? cma_chan_take_events(ch, id, true) : NULL, *next;
	for (; e; e = next) {
		struct cma_id *owner = cma_id_of(e->ev.id);
		next = e->next;
		owner->events_pending--;
		if (owner != c) { /* a request on a listener going away */
			id_unlink(owner);
			owner->state = CMA_DESTROYING;
			cma_id_free_if_done(owner);
		}
		free(e);
	}
	c->state = CMA_DESTROYING;
	pthread_mutex_unlock(&cma_lock);
	if (own) /* the private channel of a synchronous id */
		rdma_destroy_event_channel(id->channel);
	pthread_mutex_lock(&cma_lock);
	cma_id_free_if_done(c);
	pthread_mutex_unlock(&cma_lock);
	return 0;
}
ROCEMU_PUBLIC(rdma_destroy_id)

int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	if (!id)
		return cma_fail(EINVAL);
	struct cma_id *c = cma_id_of(id);
	struct cma_channel *own;
	channel = channel_or_own(channel, &own);
	if (!channel)
		return -1;
	pthread_mutex_lock(&cma_lock);
	struct cma_channel *old = cma_channel_of(id->channel);
	if (c->events_pending > 0 && old) {
		/* Queued events follow the id to its new channel. */
		struct cma_event *e = cma_chan_take_events(old, id, false), *next;
		for (; e; e = next) {
			next = e->next;
			cma_chan_push(cma_channel_of(channel), e);
		}
	}
	id->channel = channel;
	pthread_mutex_unlock(&cma_lock);
	if (old && old->sync)
		rdma_destroy_event_channel(&old->ch);
	return 0;
}
ROCEMU_PUBLIC(rdma_migrate_id)

int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval, size_t optlen)
{
	if (!id || (optlen && !optval))
		return cma_fail(EINVAL);
	/* TOS: the traffic class of the path (IP DSCP and ECN), one byte as in
	 * Linux's CM; it reaches the AV, the route and the REQ. */
	if (level == RDMA_OPTION_ID && optname == RDMA_OPTION_ID_TOS) {
		if (optlen != sizeof(uint8_t))
			return cma_fail(EINVAL);
		pthread_mutex_lock(&cma_lock);
		cma_id_of(id)->tclass = *(const uint8_t *)optval;
		pthread_mutex_unlock(&cma_lock);
		return 0;
	}
	/* Accepted and without effect on rocemu: REUSEADDR, AFONLY, ACK_TIMEOUT
	 * (the CM picks the QP's ACK timeout), RDMA_OPTION_IB_PATH (the path is
	 * the GID pair). */
	if (level == RDMA_OPTION_ID &&
	    (optname == RDMA_OPTION_ID_REUSEADDR || optname == RDMA_OPTION_ID_AFONLY ||
	     optname == RDMA_OPTION_ID_ACK_TIMEOUT))
		return 0;
	if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH)
		return 0;
	return cma_fail(ENOSYS);
}
ROCEMU_PUBLIC(rdma_set_option)

__be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return id ? htons(get_port((struct sockaddr *)&id->route.addr.src_addr)) : 0;
}
ROCEMU_PUBLIC(rdma_get_src_port)

__be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return id ? htons(get_port((struct sockaddr *)&id->route.addr.dst_addr)) : 0;
}
ROCEMU_PUBLIC(rdma_get_dst_port)

uint64_t cma_next_deadline(void)
{
	uint64_t next = 0;

	for (struct cma_id *c = cma_ids; c; c = c->next) {
		if (c->timer && (!next || c->deadline_ns < next))
			next = c->deadline_ns;
		if (c->disc_held) {
			uint64_t look = cma_now_ns() + CMA_DISC_POLL_NS;

			if (!next || look < next)
				next = look;
		}
	}
	return next;
}

void cma_run_timers(uint64_t now)
{
	for (struct cma_id *c = cma_ids; c; c = c->next) {
		if (c->disc_held && !cma_qp_queued(c->disc_verbs, c->disc_qpn)) {
			release_disconnect(c);
		} else if (c->disc_held && now >= c->disc_until_ns) {
			CMA_COUNT(disc_hold_expired);
			release_disconnect(c);
		}
		if (!c->timer || c->deadline_ns > now)
			continue;
		if (c->retries < CMA_MAX_CM_RETRIES) {
			c->retries++;
			c->deadline_ns = now + resp_timeout_ns();
			cma_send_mad(c, c->mad);
			continue;
		}
		c->timer = false;
		switch (c->state) {
		case CMA_REQ_SENT:
		case CMA_REP_SENT:
			c->state = CMA_DISCONNECTED;
			cma_qp_to_err(c);
			cma_event_post(c, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL, 0);
			break;
		case CMA_DREQ_SENT: /* the peer is gone: disconnected anyway */
			c->state = CMA_DISCONNECTED;
			cma_event_post(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
			break;
		default:
			break;
		}
	}
}
