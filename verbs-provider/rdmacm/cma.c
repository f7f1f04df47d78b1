/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdma_cm ids, event channels and the connection state machines over the IB
 * CM protocol (IBA vol. 1 ch. 12) on QP1:
 *   active:  REQ ->  <- REP  RTU ->            (ESTABLISHED)
 *   passive: <- REQ  (CONNECT_REQUEST) REP ->  <- RTU (ESTABLISHED)
 *   either:  DREQ -> <- DREP                    (DISCONNECTED on both sides)
 *   refused: <- REJ (REJECTED: unknown service ID, rdma_reject)
 *   UD port spaces: SIDR_REQ -> <- SIDR_REP    (12.11)
 * REQ, REP, DREQ and SIDR_REQ are resent every CMA_RESP_TIMEOUT until
 * answered, at most CMA_MAX_CM_RETRIES times (then UNREACHABLE, or for DREQ
 * DISCONNECTED anyway); a duplicate REQ/REP/DREQ is answered with what was
 * sent the first time.
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

static struct cma_id *ids;
static uint16_t next_port;

RDMACM_STATS_DEFINE(CMA_STATS, cma_stats, CMA_STAT_COUNT, cma_stat_name)

/* The listener of passive ids whose listener was destroyed (never in ids). */
static struct cma_id orphaned_listener;

void cma_stats_report(void)
{
	pthread_mutex_lock(&cma_lock);
	rdmacm_stats_print("rdmacm cm", cma_stats_names, cma_stats, CMA_STAT_COUNT);
	pthread_mutex_unlock(&cma_lock);
}

static struct cma_id *to_cid(struct rdma_cm_id *id)
{
	return (struct cma_id *)id;
}
static struct cma_channel *to_chan(struct rdma_event_channel *c)
{
	return (struct cma_channel *)c;
}

static int fail(int err)
{
	errno = err;
	return -1;
}

static void mc_leave(struct cma_id *c, struct cma_mc *mc);

/* The states an entry point accepts, as a mask for lock_in_state(). */
#define IN_STATE(s)   (1u << (s))
#define IN_ANY_STATE  (~0u)
#define IN_CONNECTION (IN_STATE(CMA_ESTABLISHED) | IN_STATE(CMA_REP_SENT) | IN_STATE(CMA_REP_RCVD))

/*
 * The prologue of the rdma_* calls on an id: the id with cma_lock held when it
 * is in one of the states of want; else NULL, errno EINVAL and the lock not
 * held (rdma_cm(7): calls out of order fail with EINVAL).
 */
static struct cma_id *lock_in_state(struct rdma_cm_id *id, unsigned want)
{
	if (!id) {
		errno = EINVAL;
		return NULL;
	}
	struct cma_id *c = to_cid(id);
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
static uint32_t random32(void)
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
		uint32_t id = random32();
		bool used = id == 0;

		for (struct cma_id *c = ids; c && !used; c = c->next)
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
/* Event channels and events                                                  */

/* An id destroyed while events still named it is freed with its last event. */
static void id_free_if_done(struct cma_id *c)
{
	if (c->state == CMA_DESTROYING && c->events_pending <= 0) {
		free(c->ep_qp_attr);
		free(c);
	}
}

struct rdma_event_channel *rdma_create_event_channel(void)
{
	int rc = cma_init();
	if (rc < 0) {
		errno = -rc;
		return NULL;
	}
	struct cma_channel *c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->ch.fd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
	if (c->ch.fd < 0) {
		free(c);
		return NULL;
	}
	return &c->ch;
}
ROCEMU_PUBLIC(rdma_create_event_channel)

/* The channel's eventfd (semaphore mode) counts exactly the events queued
 * on it: event_post adds one with each event, and whoever takes an event off
 * the queue (lock held) takes one back, so that read never blocks and a
 * waiting rdma_get_cm_event wakes only for an event that is really there. */
static void chan_take_token(struct cma_channel *ch)
{
	uint64_t v;

	if (read(ch->ch.fd, &v, sizeof(v)) != sizeof(v))
		fprintf(stderr, "rocemu rdmacm: event channel read failed\n");
}

/* Appends e to ch's queue and counts it on the fd (lock held). */
static void chan_push(struct cma_channel *ch, struct cma_event *e)
{
	uint64_t one = 1;

	e->next = NULL;
	*(ch->tail ? &ch->tail->next : &ch->head) = e;
	ch->tail = e;
	if (write(ch->ch.fd, &one, sizeof(one)) != sizeof(one))
		fprintf(stderr, "rocemu rdmacm: event channel write failed\n");
}

/* Takes the events of id out of ch's queue, with as_listener also the
 * requests that arrived on it, and returns them in order (lock held). */
static struct cma_event *chan_take_events(struct cma_channel *ch, const struct rdma_cm_id *id,
					  bool as_listener)
{
	struct cma_event *taken = NULL, **taken_tail = &taken;
	struct cma_event **pp = &ch->head, *prev = NULL;

	while (*pp) {
		struct cma_event *e = *pp;
		if (e->ev.id == id || (as_listener && e->ev.listen_id == id)) {
			*pp = e->next;
			chan_take_token(ch);
			e->next = NULL;
			*taken_tail = e;
			taken_tail = &e->next;
			continue;
		}
		prev = e;
		pp = &e->next;
	}
	ch->tail = prev;
	return taken;
}

void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	if (!channel)
		return;
	struct cma_channel *c = to_chan(channel);
	pthread_mutex_lock(&cma_lock);
	while (c->head) {
		struct cma_event *e = c->head;
		struct cma_id *owner = to_cid(e->ev.id);
		c->head = e->next;
		owner->events_pending--;
		free(e);
		id_free_if_done(owner);
	}
	/* A thread waiting in rdma_get_cm_event keeps the struct (see there). */
	bool in_use = c->waiters > 0;
	c->destroyed = true;
	pthread_mutex_unlock(&cma_lock);
	close(c->ch.fd);
	if (!in_use)
		free(c);
}
ROCEMU_PUBLIC(rdma_destroy_event_channel)

/* Queue an event for id (lock held). pdata is copied into the event. */
static struct cma_event *event_post(struct cma_id *c, enum rdma_cm_event_type type, int status,
				    const uint8_t *pdata, uint8_t plen)
{
	struct cma_channel *ch = to_chan(c->id.channel);
	struct cma_event *e = calloc(1, sizeof(*e));

	if (!e || !ch)
		return free(e), NULL;
	e->ev.id = &c->id;
	e->ev.event = type;
	e->ev.status = status;
	if (pdata && plen) {
		memcpy(e->pdata, pdata, plen);
		e->ev.param.conn.private_data = e->pdata;
		e->ev.param.conn.private_data_len = plen;
	}
	c->events_pending++;
	chan_push(ch, e);
	return e;
}

int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	if (!channel || !event)
		return fail(EINVAL);
	struct cma_channel *ch = to_chan(channel);
	struct cma_event *e = NULL;
	int rc = 0;

	pthread_mutex_lock(&cma_lock);
	int fd = ch->ch.fd;
	int fd_flags = -1; /* read once, the first time the queue is empty */
	ch->waiters++;
	for (;;) {
		if (ch->destroyed) {
			/* Another thread destroyed the channel while this one waited
			 * (rping's CM thread at exit). With rdma-core such a thread
			 * stays blocked in the kernel; so it does here, instead of
			 * reading freed memory or failing (rping exits on an error). */
			pthread_mutex_unlock(&cma_lock);
			for (;;)
				pause();
		}
		e = ch->head;
		if (e) {
			ch->head = e->next;
			if (!ch->head)
				ch->tail = NULL;
			chan_take_token(ch);
			break;
		}
		pthread_mutex_unlock(&cma_lock);
		if (fd_flags == -1)
			fd_flags = fcntl(fd, F_GETFL);
		if (fd_flags < 0 || (fd_flags & O_NONBLOCK)) {
			rc = fd_flags < 0 ? errno : EAGAIN;
			pthread_mutex_lock(&cma_lock);
			break;
		}
		/* Wait without holding the lock; the fd counts queued events. */
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int n = poll(&pfd, 1, -1);
		int err = errno;
		pthread_mutex_lock(&cma_lock);
		if (n < 0 && err != EINTR) {
			rc = err;
			break;
		}
	}
	ch->waiters--;
	pthread_mutex_unlock(&cma_lock);
	if (rc)
		return fail(rc);
	*event = &e->ev;
	return 0;
}
ROCEMU_PUBLIC(rdma_get_cm_event)

int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (!event)
		return fail(EINVAL);
	struct cma_event *e = (struct cma_event *)event;
	pthread_mutex_lock(&cma_lock);
	struct cma_id *c = to_cid(e->ev.id);
	c->events_pending--;
	id_free_if_done(c);
	pthread_mutex_unlock(&cma_lock);
	free(e);
	return 0;
}
ROCEMU_PUBLIC(rdma_ack_cm_event)

const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const names[] = {
	    [RDMA_CM_EVENT_ADDR_RESOLVED] = "RDMA_CM_EVENT_ADDR_RESOLVED",
	    [RDMA_CM_EVENT_ADDR_ERROR] = "RDMA_CM_EVENT_ADDR_ERROR",
	    [RDMA_CM_EVENT_ROUTE_RESOLVED] = "RDMA_CM_EVENT_ROUTE_RESOLVED",
	    [RDMA_CM_EVENT_ROUTE_ERROR] = "RDMA_CM_EVENT_ROUTE_ERROR",
	    [RDMA_CM_EVENT_CONNECT_REQUEST] = "RDMA_CM_EVENT_CONNECT_REQUEST",
	    [RDMA_CM_EVENT_CONNECT_RESPONSE] = "RDMA_CM_EVENT_CONNECT_RESPONSE",
	    [RDMA_CM_EVENT_CONNECT_ERROR] = "RDMA_CM_EVENT_CONNECT_ERROR",
	    [RDMA_CM_EVENT_UNREACHABLE] = "RDMA_CM_EVENT_UNREACHABLE",
	    [RDMA_CM_EVENT_REJECTED] = "RDMA_CM_EVENT_REJECTED",
	    [RDMA_CM_EVENT_ESTABLISHED] = "RDMA_CM_EVENT_ESTABLISHED",
	    [RDMA_CM_EVENT_DISCONNECTED] = "RDMA_CM_EVENT_DISCONNECTED",
	    [RDMA_CM_EVENT_DEVICE_REMOVAL] = "RDMA_CM_EVENT_DEVICE_REMOVAL",
	    [RDMA_CM_EVENT_MULTICAST_JOIN] = "RDMA_CM_EVENT_MULTICAST_JOIN",
	    [RDMA_CM_EVENT_MULTICAST_ERROR] = "RDMA_CM_EVENT_MULTICAST_ERROR",
	    [RDMA_CM_EVENT_ADDR_CHANGE] = "RDMA_CM_EVENT_ADDR_CHANGE",
	    [RDMA_CM_EVENT_TIMEWAIT_EXIT] = "RDMA_CM_EVENT_TIMEWAIT_EXIT",
	};
	if ((unsigned)event < sizeof(names) / sizeof(names[0]) && names[event])
		return names[event];
	return "UNKNOWN EVENT";
}
ROCEMU_PUBLIC(rdma_event_str)

static void ack_attached_event(struct rdma_cm_id *id);

/* Synchronous ids (created without a channel): wait for the outcome. The
 * event stays readable through id->event until the next synchronous call on
 * the id or rdma_destroy_id, as rdma-core's librdmacm keeps it: rdma_xclient
 * reads the REP's private data there after rdma_connect. */
static int sync_wait(struct cma_id *c, enum rdma_cm_event_type expected)
{
	struct rdma_cm_event *ev;

	ack_attached_event(&c->id);
	if (rdma_get_cm_event(c->id.channel, &ev))
		return -1;
	int type = ev->event, status = ev->status;
	c->id.event = ev;
	if (type == (int)expected && status == 0)
		return 0;
	if (type == RDMA_CM_EVENT_REJECTED)
		return fail(ECONNREFUSED);
	if (type == RDMA_CM_EVENT_UNREACHABLE)
		return fail(status < 0 ? -status : ETIMEDOUT);
	return fail(status < 0 ? -status : EINVAL);
}

static bool is_sync(const struct cma_id *c)
{
	return c->id.channel && to_chan(c->id.channel)->sync;
}

/* A step the library completes at once (cma_lock held, released here): the
 * id enters st and its event is posted; a synchronous id waits for it. */
static int step_done(struct cma_id *c, enum cma_state st, enum rdma_cm_event_type ev)
{
	c->state = st;
	event_post(c, ev, 0, NULL, 0);
	pthread_mutex_unlock(&cma_lock);
	return is_sync(c) ? sync_wait(c, ev) : 0;
}

/* ------------------------------------------------------------------------ */
/* Ids                                                                        */

static int port_in_use(enum rdma_port_space ps, uint16_t port, const struct cma_id *self)
{
	for (struct cma_id *c = ids; c; c = c->next)
		if (c != self && c->bound && c->id.ps == ps && c->port == port && !c->listener)
			return 1;
	return 0;
}

static uint16_t ephemeral_port(enum rdma_port_space ps)
{
	if (!next_port)
		next_port = (uint16_t)(32768 + random32() % 28000);
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
static void ip_to_sockaddr(int ip_version, const uint8_t *addr, uint16_t port,
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

static void sockaddr_ip16(const struct sockaddr *sa, uint8_t *out)
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
	to_chan(ch)->sync = true;
	return to_chan(ch);
}

/* channel, or when it is NULL (a synchronous id) a private channel made for
 * the id, returned in *own too; NULL with errno set if that fails. */
static struct rdma_event_channel *channel_or_own(struct rdma_event_channel *channel,
						 struct cma_channel **own)
{
	*own = channel ? NULL : sync_channel();
	return channel ? channel : *own ? &(*own)->ch : NULL;
}

static struct cma_id *id_alloc(struct rdma_event_channel *channel, void *context,
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
	c->next = ids;
	ids = c;
	return c;
}

static void id_unlink(struct cma_id *c)
{
	for (struct cma_id **p = &ids; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			return;
		}
}

/* rdma_create_id, and rdma_create_ep with the QP type of its rdma_addrinfo
 * (qp_type 0: the port space's). */
static int create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
		     enum rdma_port_space ps, enum ibv_qp_type qp_type)
{
	enum ibv_qp_type t;

	if (!id)
		return fail(EINVAL);
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
		return fail(EINVAL);
	}
	if (qp_type)
		t = qp_type;
	int rc = cma_init();
	if (rc < 0)
		return fail(-rc);
	struct cma_channel *own;
	channel = channel_or_own(channel, &own);
	if (!channel)
		return -1;
	pthread_mutex_lock(&cma_lock);
	struct cma_id *c = id_alloc(channel, context, ps, t);
	pthread_mutex_unlock(&cma_lock);
	if (!c) {
		if (own)
			rdma_destroy_event_channel(&own->ch);
		return fail(ENOMEM);
	}
	*id = &c->id;
	return 0;
}

int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
		   enum rdma_port_space ps)
{
	return create_id(channel, id, context, ps, 0);
}
ROCEMU_PUBLIC(rdma_create_id)

/* ------------------------------------------------------------------------ */
/* Sending CM messages                                                        */

static void send_mad(struct cma_id *c, const uint8_t *mad)
{
	if (c->dev)
		cma_gsi_send(c->dev, c->sgid_index, &c->remote_gid, c->tclass, c->sl, mad);
}

/* The active side's RTU (kept as the answer to a duplicate REP): established. */
static void send_rtu(struct cma_id *c)
{
	struct cm_ids m = {.local_comm_id = c->local_comm_id, .remote_comm_id = c->remote_comm_id};

	cm_mad_put_ids(c->answer, c->tid, CM_ATTR_RTU, &m);
	c->have_answer = true;
	send_mad(c, c->answer);
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
static void post_peer_disconnect(struct cma_id *c)
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
	event_post(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
}

/* A held DISCONNECTED (lock held): posted now, if still held. */
static void release_disconnect(struct cma_id *c)
{
	if (!c->disc_held)
		return;
	c->disc_held = false;
	event_post(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
}

static void arm_timer(struct cma_id *c)
{
	c->timer = true;
	c->retries = 0;
	c->deadline_ns = cma_now_ns() + resp_timeout_ns();
}

/* The exchange the timer resends for is over (answered, or overtaken by
 * another): no more resending, and the id is in state st. */
static void settle(struct cma_id *c, enum cma_state st)
{
	c->timer = false;
	c->state = st;
}

static void send_rej(struct cma_device *d, int sgid_index, const union ibv_gid *dgid,
		     uint8_t tclass, uint8_t sl, uint64_t tid, uint32_t local_comm_id,
		     uint32_t remote_comm_id, enum cm_rej_msg msg, uint16_t reason,
		     const void *pdata, uint8_t plen)
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
	send_mad(c, c->mad);
}

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
static enum ibv_qp_type conn_type(const struct cma_id *c)
{
	return c->id.qp ? c->id.qp->qp_type : c->id.qp_type;
}

/* The REQ transport service type of a connection of QP type t (12.6.5). */
static uint8_t req_transport_of(enum ibv_qp_type t)
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

static void fill_ah(const struct cma_id *c, struct ibv_ah_attr *ah)
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
	enum ibv_qp_type t = conn_type(c);

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
		fill_ah(c, &a->ah_attr);
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

static int qp_connect(struct cma_id *c)
{
	if (!c->id.qp)
		return 0;
	int rc = qp_to(c, IBV_QPS_RTR);
	if (!rc)
		rc = qp_to(c, IBV_QPS_RTS);
	return rc;
}

static void qp_to_err(struct cma_id *c)
{
	if (c->id.qp && c->id.qp_type != IBV_QPT_UD) {
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
		ibv_modify_qp(c->id.qp, &a, IBV_QP_STATE);
	}
}

int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
	if (!id || !qp_attr || !qp_attr_mask)
		return fail(EINVAL);
	pthread_mutex_lock(&cma_lock);
	int rc = init_qp_attr(to_cid(id), qp_attr, qp_attr_mask);
	pthread_mutex_unlock(&cma_lock);
	return rc < 0 ? fail(-rc) : 0;
}
ROCEMU_PUBLIC(rdma_init_qp_attr)

/* ------------------------------------------------------------------------ */
/* Address and route                                                          */

static void fill_route(struct cma_id *c)
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
		return fail(EINVAL);
	pthread_mutex_lock(&cma_lock);
	int rc = bind_locked(to_cid(id), addr);
	pthread_mutex_unlock(&cma_lock);
	return rc < 0 ? fail(-rc) : 0;
}
ROCEMU_PUBLIC(rdma_bind_addr)

int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr, struct sockaddr *dst_addr,
		      int timeout_ms)
{
	(void)timeout_ms; /* resolution is immediate: the engine resolves MACs itself */
	if (!id || !dst_addr)
		return fail(EINVAL);
	if (dst_addr->sa_family == AF_IB)
		return fail(EAFNOSUPPORT);
	if (!cma_sockaddr_len(dst_addr))
		return fail(EINVAL);
	struct cma_id *c = lock_in_state(id, IN_ANY_STATE);
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
		return fail(-rc);
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
		ip_to_sockaddr(v4 ? 4 : 6, g->raw, c->port, &ss);
		memcpy(&id->route.addr.src_addr, &ss, sizeof(ss));
	}
	memcpy(&id->route.addr.dst_addr, dst_addr, cma_sockaddr_len(dst_addr));
	cma_sockaddr_to_gid(dst_addr, &c->remote_gid);
	fill_route(c);
	id->route.num_paths = 0; /* until rdma_resolve_route */
	return step_done(c, CMA_ADDR_RESOLVED, RDMA_CM_EVENT_ADDR_RESOLVED);
}
ROCEMU_PUBLIC(rdma_resolve_addr)

int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	(void)timeout_ms;
	struct cma_id *c = lock_in_state(id, IN_STATE(CMA_ADDR_RESOLVED));
	if (!c)
		return -1;
	/* The path is the pair of GIDs; the engine finds the MAC by ARP/ND. */
	fill_route(c);
	return step_done(c, CMA_ROUTE_RESOLVED, RDMA_CM_EVENT_ROUTE_RESOLVED);
}
ROCEMU_PUBLIC(rdma_resolve_route)

int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct cma_id *c = lock_in_state(id, IN_ANY_STATE);
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
	return rc < 0 ? fail(-rc) : 0;
}
ROCEMU_PUBLIC(rdma_listen)

int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct rdma_cm_event *ev;

	if (!listen || !id)
		return fail(EINVAL);
	if (!is_sync(to_cid(listen)))
		return fail(EINVAL);
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
	struct ibv_qp_init_attr *qa = to_cid(listen)->ep_qp_attr;
	if (qa) {
		struct ibv_qp_init_attr a = *qa;
		if (rdma_create_qp(ev->id, listen->pd, &a)) {
			int err = errno;
			rdma_destroy_id(ev->id); /* rejects the request */
			return fail(err);
		}
	}
	*id = ev->id;
	return 0;
}
ROCEMU_PUBLIC(rdma_get_request)

static void ack_attached_event(struct rdma_cm_id *id)
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

static uint8_t cap8(unsigned v, unsigned max)
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
		sockaddr_ip16(src, h.src);
		sockaddr_ip16(dst, h.dst);
	}
	cma_hdr_put(out, &h);
}

/* The active side's REQ or SIDR_REQ (msg, the struct of attr_id) under a
 * new transaction ID, kept in c->mad for the retransmissions. */
static void send_request(struct cma_id *c, uint16_t attr_id, const void *msg)
{
	c->tid = (uint64_t)random32() << 32 | c->local_comm_id;
	cm_mad_put(c->mad, c->tid, attr_id, msg);
	if (attr_id == CM_ATTR_REQ) /* ECE options (cm_mad.h) */
		cm_mad_set_attr_mod(c->mad, c->local_ece.options);
	send_mad(c, c->mad);
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
	struct cma_id *c = lock_in_state(id, IN_STATE(CMA_ROUTE_RESOLVED));
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
	c->local_psn = random32() & 0xffffff;
	c->resp_res = cap8(p ? p->responder_resources : 255, c->dev->max_rd_atom);
	c->init_depth = cap8(p ? p->initiator_depth : 255, c->dev->max_rd_atom);
	c->retry_count = cap8(p ? p->retry_count : 7, 7);
	c->local_ack_timeout = CMA_ACK_TIMEOUT;
	enum ibv_qp_type t = conn_type(c);
	r.initiator_depth = c->init_depth;
	r.remote_cm_timeout = CMA_RESP_TIMEOUT;
	r.local_cm_timeout = CMA_RESP_TIMEOUT;
	r.transport = req_transport_of(t);
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
		r.rnr_retry_count = cap8(p ? p->rnr_retry_count : 7, 7);
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
		return fail(-rc);
	return is_sync(c) ? sync_wait(c, RDMA_CM_EVENT_ESTABLISHED) : 0;
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
	send_mad(c, c->answer);
	c->state = CMA_ESTABLISHED;
	return 0;
}

int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
	struct cma_id *c = lock_in_state(id, IN_STATE(CMA_REQ_RCVD));
	if (!c)
		return -1;
	bool sync = is_sync(c);
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
	c->resp_res = cap8(p ? p->responder_resources : c->remote_init_depth, c->dev->max_rd_atom);
	c->init_depth = cap8(p ? p->initiator_depth : c->remote_resp_res, c->remote_resp_res);
	c->local_psn = random32() & 0xffffff;
	c->local_qpn = id->qp ? id->qp->qp_num : (p ? p->qp_num & 0xffffff : 0);
	if (id->qp) {
		rc = qp_connect(c);
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
			   .rnr_retry_count = cap8(p ? p->rnr_retry_count : 7, 7),
			   .srq = id->srq || (id->qp && id->qp->srq) || (p && p->srq),
			   .local_ca_guid = be64toh(c->dev->guid)};
	if (conn_type(c) == IBV_QPT_XRC_RECV) {
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
	send_mad(c, c->mad);
	arm_timer(c);
	c->state = CMA_REP_SENT;
out:
	pthread_mutex_unlock(&cma_lock);
	if (rc < 0)
		return fail(-rc);
	ack_attached_event(id);
	return sync ? sync_wait(c, RDMA_CM_EVENT_ESTABLISHED) : 0;
}
ROCEMU_PUBLIC(rdma_accept)

static int reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len,
		  uint16_t reason)
{
	struct cma_id *c = lock_in_state(id, IN_STATE(CMA_REQ_RCVD));
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
		send_mad(c, c->answer);
	} else {
		send_rej(c->dev, c->sgid_index, &c->remote_gid, c->tclass, c->sl, c->tid,
			 c->local_comm_id, c->remote_comm_id, CM_REJ_MSG_REQ, reason, private_data,
			 private_data_len);
	}
	c->state = CMA_DISCONNECTED;
	pthread_mutex_unlock(&cma_lock);
	ack_attached_event(id);
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
		return fail(EINVAL);
	pthread_mutex_lock(&cma_lock);
	to_cid(id)->local_ece.vendor_id = ece->vendor_id;
	to_cid(id)->local_ece.options = ece->options;
	pthread_mutex_unlock(&cma_lock);
	return 0;
}
ROCEMU_PUBLIC(rdma_set_local_ece)

int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || id->qp || !ece)
		return fail(EINVAL);
	pthread_mutex_lock(&cma_lock);
	ece->vendor_id = to_cid(id)->remote_ece.vendor_id;
	ece->options = to_cid(id)->remote_ece.options;
	ece->comp_mask = 0;
	pthread_mutex_unlock(&cma_lock);
	return 0;
}
ROCEMU_PUBLIC(rdma_get_remote_ece)

int rdma_establish(struct rdma_cm_id *id)
{
	struct cma_id *c = lock_in_state(id, IN_STATE(CMA_REP_RCVD));
	if (!c)
		return -1;
	send_rtu(c);
	pthread_mutex_unlock(&cma_lock);
	return 0;
}
ROCEMU_PUBLIC(rdma_establish)

int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	struct cma_id *c = lock_in_state(id, IN_ANY_STATE);
	if (!c)
		return -1;
	/* Traffic before the RTU: the connection is established (12.9.6). */
	if (event == IBV_EVENT_COMM_EST && c->state == CMA_REP_SENT) {
		settle(c, CMA_ESTABLISHED);
		event_post(c, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0);
	}
	pthread_mutex_unlock(&cma_lock);
	return 0;
}
ROCEMU_PUBLIC(rdma_notify)

int rdma_disconnect(struct rdma_cm_id *id)
{
	struct cma_id *c =
	    lock_in_state(id, IN_CONNECTION | IN_STATE(CMA_DREQ_SENT) | IN_STATE(CMA_DISCONNECTED));
	if (!c)
		return -1;
	int rc = 0;
	if (!(IN_CONNECTION & IN_STATE(c->state))) {
		qp_to_err(c);	       /* already ending or ended */
		release_disconnect(c); /* the program ends it too: no reason to wait */
	} else if (id->qp_type == IBV_QPT_UD) {
		rc = -EINVAL; /* no connection to end on a datagram service */
	} else {
		qp_to_err(c);
		send_dreq(c);
		arm_timer(c);
		c->state = CMA_DREQ_SENT;
	}
	pthread_mutex_unlock(&cma_lock);
	return rc < 0 ? fail(-rc) : 0;
}
ROCEMU_PUBLIC(rdma_disconnect)

int rdma_destroy_id(struct rdma_cm_id *id)
{
	if (!id)
		return fail(EINVAL);
	struct cma_id *c = to_cid(id);
	ack_attached_event(id);
	pthread_mutex_lock(&cma_lock);
	/* The peer must not wait for an answer that will not come. */
	if (id->qp_type != IBV_QPT_UD && (IN_CONNECTION & IN_STATE(c->state)))
		send_dreq(c);
	else if (c->state == CMA_REQ_RCVD && id->qp_type != IBV_QPT_UD)
		send_rej(c->dev, c->sgid_index, &c->remote_gid, c->tclass, c->sl, c->tid,
			 c->local_comm_id, c->remote_comm_id, CM_REJ_MSG_REQ,
			 CM_REJ_CONSUMER_DEFINED, NULL, 0);
	id_unlink(c);
	c->timer = false;
	/* groups still joined are left (and the QP detached if it is still there) */
	while (c->mcs) {
		struct cma_mc *mc = c->mcs;

		c->mcs = mc->next;
		mc_leave(c, mc);
	}
	/* Requests of this listener that the program holds outlive it: they stay
	 * passive ids (duplicate detection) but no longer count against whatever
	 * listener is allocated at this address next. */
	for (struct cma_id *o = ids; o; o = o->next)
		if (o->listener == c)
			o->listener = &orphaned_listener;
	struct cma_channel *ch = to_chan(id->channel);
	bool own = ch && ch->sync;
	/* Events not yet taken from the channel go with the id. */
	struct cma_event *e = ch ? chan_take_events(ch, id, true) : NULL, *next;
	for (; e; e = next) {
		struct cma_id *owner = to_cid(e->ev.id);
		next = e->next;
		owner->events_pending--;
		if (owner != c) { /* a request on a listener going away */
			id_unlink(owner);
			owner->state = CMA_DESTROYING;
			id_free_if_done(owner);
		}
		free(e);
	}
	c->state = CMA_DESTROYING;
	pthread_mutex_unlock(&cma_lock);
	if (own) /* the private channel of a synchronous id */
		rdma_destroy_event_channel(id->channel);
	pthread_mutex_lock(&cma_lock);
	id_free_if_done(c);
	pthread_mutex_unlock(&cma_lock);
	return 0;
}
ROCEMU_PUBLIC(rdma_destroy_id)

int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	if (!id)
		return fail(EINVAL);
	struct cma_id *c = to_cid(id);
	struct cma_channel *own;
	channel = channel_or_own(channel, &own);
	if (!channel)
		return -1;
	pthread_mutex_lock(&cma_lock);
	struct cma_channel *old = to_chan(id->channel);
	if (c->events_pending > 0 && old) {
		/* Queued events follow the id to its new channel. */
		struct cma_event *e = chan_take_events(old, id, false), *next;
		for (; e; e = next) {
			next = e->next;
			chan_push(to_chan(channel), e);
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
		return fail(EINVAL);
	/* TOS: the traffic class of the path (IP DSCP and ECN), one byte as in
	 * Linux's CM; it reaches the AV, the route and the REQ. */
	if (level == RDMA_OPTION_ID && optname == RDMA_OPTION_ID_TOS) {
		if (optlen != sizeof(uint8_t))
			return fail(EINVAL);
		pthread_mutex_lock(&cma_lock);
		to_cid(id)->tclass = *(const uint8_t *)optval;
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
	return fail(ENOSYS);
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

/* ------------------------------------------------------------------------ */
/* Multicast                                                                  */

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
	fill_ah(c, ah);
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
	e = event_post(c, err ? RDMA_CM_EVENT_MULTICAST_ERROR : RDMA_CM_EVENT_MULTICAST_JOIN, -err,
		       NULL, 0);
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
	    lock_in_state(id, IN_STATE(CMA_ADDR_BOUND) | IN_STATE(CMA_ADDR_RESOLVED) |
				  IN_STATE(CMA_ROUTE_RESOLVED));
	int rc;

	if (!c)
		return -1;
	rc = join_locked(c, addr, flags, context);
	pthread_mutex_unlock(&cma_lock);
	if (rc < 0)
		return fail(-rc);
	return is_sync(c) ? sync_wait(c, RDMA_CM_EVENT_MULTICAST_JOIN) : 0;
}

int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	if (!id || !addr || !cma_sockaddr_len(addr))
		return fail(EINVAL);
	return join(id, addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}
ROCEMU_PUBLIC(rdma_join_multicast)

int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *attr,
			   void *context)
{
	if (!id || !attr)
		return fail(EINVAL);
	if (attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED)
		return fail(ENOTSUP);
	if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) ||
	    !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) || !attr->addr ||
	    !cma_sockaddr_len(attr->addr) ||
	    (attr->join_flags != RDMA_MC_JOIN_FLAG_FULLMEMBER &&
	     attr->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER))
		return fail(EINVAL);
	return join(id, attr->addr, attr->join_flags, context);
}
ROCEMU_PUBLIC(rdma_join_multicast_ex)

static void mc_leave(struct cma_id *c, struct cma_mc *mc)
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
		return fail(EINVAL);
	cma_sockaddr_to_gid(addr, &mgid);
	pthread_mutex_lock(&cma_lock);
	struct cma_id *c = to_cid(id);
	mc = mc_find(c, &mgid, &prev);
	if (!mc) {
		pthread_mutex_unlock(&cma_lock);
		return fail(EADDRNOTAVAIL);
	}
	*prev = mc->next;
	mc_leave(c, mc);
	pthread_mutex_unlock(&cma_lock);
	return 0;
}
ROCEMU_PUBLIC(rdma_leave_multicast)

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
		return fail(EINVAL);
	struct cma_id *c = to_cid(id);
	struct cma_device *d = cma_device_of(id->verbs);
	if (!d)
		return fail(ENODEV);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd ? id->pd : d->pd;
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
	}
	if (attr->pd->context != id->verbs)
		return fail(EINVAL);
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
	return fail(err);
}
}
ROCEMU_PUBLIC(rdma_create_qp_ex)

int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	if (!id || !qp_init_attr)
		return fail(EINVAL);
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
	destroy_own_cqs(to_cid(id));
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
		return fail(EINVAL);
	struct cma_id *c = to_cid(id);
	struct cma_device *d = cma_device_of(id->verbs);
	if (!d)
		return fail(ENODEV);
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
					return fail(err);
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
		return fail(err);
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
		return fail(EINVAL);
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
	struct cma_id *c = to_cid(id);
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
		return fail(EINVAL);
	if (create_id(NULL, &cid, NULL, (enum rdma_port_space)res->ai_port_space,
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
			struct cma_id *c = to_cid(cid);
			c->ep_qp_attr = malloc(sizeof(*qp_init_attr));
			if (c->ep_qp_attr)
				*c->ep_qp_attr = *qp_init_attr;
			else
				rc = fail(ENOMEM);
		}
	}
	if (rc) {
		int err = errno;
		rdma_destroy_id(cid);
		return fail(err);
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

struct ibv_context **rdma_get_devices(int *num_devices)
{
	int rc = cma_init(), n = 0;
	struct cma_device *d = rc < 0 ? NULL : cma_devices(&n);
	struct ibv_context **list = calloc((size_t)n + 1, sizeof(*list));

	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < n; i++)
		list[i] = d[i].verbs;
	if (num_devices)
		*num_devices = n;
	return list;
}
ROCEMU_PUBLIC(rdma_get_devices)

void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}
ROCEMU_PUBLIC(rdma_free_devices)

/* ------------------------------------------------------------------------ */
/* Received MADs (CM thread, lock held)                                       */

static struct cma_id *find_by_local_comm_id(uint32_t comm_id)
{
	for (struct cma_id *c = ids; c; c = c->next)
		if (c->local_comm_id == comm_id && c->state != CMA_LISTEN)
			return c;
	return NULL;
}

static struct cma_id *find_listener(struct cma_device *d, uint16_t ps, uint16_t port,
				    const struct cma_hdr *h)
{
	for (struct cma_id *c = ids; c; c = c->next) {
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
				sockaddr_ip16(sa, a);
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
	for (struct cma_id *c = ids; c; c = c->next)
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
	struct cma_id *c = id_alloc(l->id.channel, l->id.context, l->id.ps, l->id.qp_type);
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
	ip_to_sockaddr(h->ip_version, h->dst, l->port, &ss);
	memcpy(&c->id.route.addr.src_addr, &ss, sizeof(ss));
	ip_to_sockaddr(h->ip_version, h->src, h->src_port, &ss);
	memcpy(&c->id.route.addr.dst_addr, &ss, sizeof(ss));
	fill_route(c);
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
	if (r->transport != req_transport_of(t))
		return false;
	return r->transport != CM_TRANSPORT_EXT || r->ext_transport == CM_EXT_TRANSPORT_XRC;
}

/* The listener l holds as many unanswered requests as it may: a new one is
 * dropped, counted (the peer retries; a forged flood stays bounded). */
static bool backlog_full(const struct cma_id *l)
{
	unsigned n = 0;

	for (const struct cma_id *c = ids; c; c = c->next)
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
	for (struct cma_id *c = ids; c; c = c->next)
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
			send_mad(dup, dup->mad);
		return;
	}
	int idx = local_gid_index(d, r.remote_gid);
	struct cma_id *l = request_listener(d, r.service_id, r.pdata, false, &h, &hdr_ok);
	if (l && !req_transport_fits(&r, l->id.qp_type)) {
		/* 12.6.5: a UC REQ for an RC listener (or the reverse, or XRC with
		 * either) would connect QPs of different types: REJ "invalid
		 * transport service type" */
		CMA_COUNT(rej_transport);
		send_rej(d, idx, src, r.traffic_class, r.sl, tid, random32(), r.local_comm_id,
			 CM_REJ_MSG_REQ, CM_REJ_INVALID_TRANSPORT, NULL, 0);
		return;
	}
	if (!l) {
		if (reject_unlistened(d, src))
			send_rej(d, idx, src, r.traffic_class, r.sl, tid, random32(),
				 r.local_comm_id, CM_REJ_MSG_REQ, CM_REJ_INVALID_SERVICE_ID, NULL,
				 0);
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
	struct cma_event *e = event_post(c, RDMA_CM_EVENT_CONNECT_REQUEST, 0, r.pdata + CMA_HDR_LEN,
					 CM_REQ_PDATA - CMA_HDR_LEN);
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
		send_mad(c, c->answer); /* our RTU was lost */
		return;
	}
	if (c->state != CMA_REQ_SENT || c->id.qp_type == IBV_QPT_UD) {
		CMA_COUNT(drop_wrong_state);
		return;
	}
	c->timer = false;
	c->remote_comm_id = r.local_comm_id;
	/* an XRC target names itself as the local EE context (rdma_accept) */
	uint32_t peer_qpn = conn_type(c) == IBV_QPT_XRC_SEND ? r.local_eecn : r.local_qpn;
	c->remote_qpn = peer_qpn;
	c->remote_psn = r.starting_psn;
	c->remote_resp_res = r.responder_resources;
	c->remote_init_depth = r.initiator_depth;
	c->rnr_retry = r.rnr_retry_count;
	c->init_depth = cap8(c->init_depth, r.responder_resources);
	c->remote_ece.vendor_id = cm_rep_vendor_id(&r);
	c->remote_ece.options = cm_mad_attr_mod(mad);
	if (!c->id.qp) {
		c->state = CMA_REP_RCVD;
		struct cma_event *e =
		    event_post(c, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, r.pdata, CM_REP_PDATA);
		if (e) {
			e->ev.param.conn.responder_resources = r.responder_resources;
			e->ev.param.conn.initiator_depth = r.initiator_depth;
			e->ev.param.conn.qp_num = peer_qpn;
			e->ev.param.conn.rnr_retry_count = r.rnr_retry_count;
		}
		return;
	}
	if (rep_ece(c) || qp_connect(c)) {
		send_rej(c->dev, c->sgid_index, &c->remote_gid, c->tclass, c->sl, c->tid,
			 c->local_comm_id, c->remote_comm_id, CM_REJ_MSG_REP,
			 CM_REJ_CONSUMER_DEFINED, NULL, 0);
		c->state = CMA_DISCONNECTED;
		event_post(c, RDMA_CM_EVENT_CONNECT_ERROR, -EINVAL, NULL, 0);
		return;
	}
	send_rtu(c);
	struct cma_event *e = event_post(c, RDMA_CM_EVENT_ESTABLISHED, 0, r.pdata, CM_REP_PDATA);
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
	settle(c, CMA_ESTABLISHED);
	event_post(c, RDMA_CM_EVENT_ESTABLISHED, 0, m.pdata,
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
	settle(c, CMA_DISCONNECTED);
	qp_to_err(c);
	event_post(c, RDMA_CM_EVENT_REJECTED, r.reason, r.pdata, CM_REJ_PDATA);
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
	send_mad(c, out);
	switch (c->state) {
	case CMA_ESTABLISHED:
	case CMA_REP_SENT:
	case CMA_REP_RCVD:
		settle(c, CMA_DISCONNECTED);
		post_peer_disconnect(c);
		break;
	case CMA_DREQ_SENT: /* both ended at once: ours is the program's own */
		settle(c, CMA_DISCONNECTED);
		event_post(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
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
	settle(c, CMA_DISCONNECTED);
	event_post(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
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
			send_mad(dup, dup->answer);
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
	struct cma_event *e = event_post(
	    c, RDMA_CM_EVENT_CONNECT_REQUEST, 0, r.pdata + CMA_HDR_LEN,
	    CM_SIDR_REQ_PDATA - CMA_HDR_LEN > 196 ? 196 : CM_SIDR_REQ_PDATA - CMA_HDR_LEN);
	if (!e)
		return;
	e->ev.listen_id = &l->id;
	struct rdma_ud_param *up = &e->ev.param.ud;
	fill_ah(c, &up->ah_attr);
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
		event_post(c, RDMA_CM_EVENT_UNREACHABLE, -EINVAL, r.pdata, CM_SIDR_REP_PDATA);
		return;
	}
	c->state = CMA_ESTABLISHED;
	c->remote_qpn = r.qpn;
	c->remote_qkey = r.qkey;
	struct cma_event *e =
	    event_post(c, RDMA_CM_EVENT_ESTABLISHED, 0, r.pdata, CM_SIDR_REP_PDATA);
	if (!e)
		return;
	fill_ah(c, &e->ev.param.ud.ah_attr);
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

uint64_t cma_next_deadline(void)
{
	uint64_t next = 0;

	for (struct cma_id *c = ids; c; c = c->next) {
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
	for (struct cma_id *c = ids; c; c = c->next) {
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
			send_mad(c, c->mad);
			continue;
		}
		c->timer = false;
		switch (c->state) {
		case CMA_REQ_SENT:
		case CMA_REP_SENT:
			c->state = CMA_DISCONNECTED;
			qp_to_err(c);
			event_post(c, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL, 0);
			break;
		case CMA_DREQ_SENT: /* the peer is gone: disconnected anyway */
			c->state = CMA_DISCONNECTED;
			event_post(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
			break;
		default:
			break;
		}
	}
}
