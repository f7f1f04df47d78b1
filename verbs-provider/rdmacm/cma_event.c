/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdma_cm event channels and events: the channel's queue and its eventfd,
 * rdma_get_cm_event/rdma_ack_cm_event, events posted by the state machines
 * (cma.c, cma_recv.c), and the waits of synchronous ids (no channel).
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

/* An id destroyed while events still named it is freed with its last event. */
void cma_id_free_if_done(struct cma_id *c)
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
void cma_chan_push(struct cma_channel *ch, struct cma_event *e)
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
struct cma_event *cma_chan_take_events(struct cma_channel *ch, const struct rdma_cm_id *id,
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
	struct cma_channel *c = cma_channel_of(channel);
	pthread_mutex_lock(&cma_lock);
	while (c->head) {
		struct cma_event *e = c->head;
		struct cma_id *owner = cma_id_of(e->ev.id);
		c->head = e->next;
		owner->events_pending--;
		free(e);
		cma_id_free_if_done(owner);
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
struct cma_event *cma_event_post(struct cma_id *c, enum rdma_cm_event_type type, int status,
				 const uint8_t *pdata, uint8_t plen)
{
	struct cma_channel *ch = cma_channel_of(c->id.channel);
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
	cma_chan_push(ch, e);
	return e;
}

int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	if (!channel || !event)
		return cma_fail(EINVAL);
	struct cma_channel *ch = cma_channel_of(channel);
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
		return cma_fail(rc);
	*event = &e->ev;
	return 0;
}
ROCEMU_PUBLIC(rdma_get_cm_event)

int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (!event)
		return cma_fail(EINVAL);
	struct cma_event *e = (struct cma_event *)event;
	pthread_mutex_lock(&cma_lock);
	struct cma_id *c = cma_id_of(e->ev.id);
	c->events_pending--;
	cma_id_free_if_done(c);
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

/* Synchronous ids (created without a channel): wait for the outcome. The
 * event stays readable through id->event until the next synchronous call on
 * the id or rdma_destroy_id, as rdma-core's librdmacm keeps it: rdma_xclient
 * reads the REP's private data there after rdma_connect. */
int cma_sync_wait(struct cma_id *c, enum rdma_cm_event_type expected)
{
	struct rdma_cm_event *ev;

	cma_ack_attached_event(&c->id);
	if (rdma_get_cm_event(c->id.channel, &ev))
		return -1;
	int type = ev->event, status = ev->status;
	c->id.event = ev;
	if (type == (int)expected && status == 0)
		return 0;
	if (type == RDMA_CM_EVENT_REJECTED)
		return cma_fail(ECONNREFUSED);
	if (type == RDMA_CM_EVENT_UNREACHABLE)
		return cma_fail(status < 0 ? -status : ETIMEDOUT);
	return cma_fail(status < 0 ? -status : EINVAL);
}

bool cma_is_sync(const struct cma_id *c)
{
	return c->id.channel && cma_channel_of(c->id.channel)->sync;
}

/* A step the library completes at once (cma_lock held, released here): the
 * id enters st and its event is posted; a synchronous id waits for it. */
int cma_step_done(struct cma_id *c, enum cma_state st, enum rdma_cm_event_type ev)
{
	c->state = st;
	cma_event_post(c, ev, 0, NULL, 0);
	pthread_mutex_unlock(&cma_lock);
	return cma_is_sync(c) ? cma_sync_wait(c, ev) : 0;
}
