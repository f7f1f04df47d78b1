/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Asynchronous events: the engine raises them (engine lock held), the
 * provider queues them on the owning context and makes its async_fd (an
 * eventfd in semaphore mode: one count per queued event) readable, so a
 * program may block in ibv_get_async_event or poll/epoll the fd.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "provider.h"

pthread_mutex_t rocemu_ctx_list_lock = PTHREAD_MUTEX_INITIALIZER;

void rocemu_async_push(struct rocemu_vcontext *c, const struct ibv_async_event *ev,
		       uint32_t *reported)
{
	struct rocemu_async_event *e = calloc(1, sizeof(*e));
	uint64_t one = 1;

	if (!e)
		return; /* nothing sane to do: the event is lost */
	e->ev = *ev;
	e->reported = reported;
	pthread_mutex_lock(&c->ev_lock);
	if (c->ev_tail)
		c->ev_tail->next = e;
	else
		c->ev_head = e;
	c->ev_tail = e;
	pthread_mutex_unlock(&c->ev_lock);
	if (write(c->vctx.context.async_fd, &one, sizeof(one)) != sizeof(one))
		return; /* counter overflow cannot happen with one count per event */
}

static bool is_qp_event(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		return true;
	default:
		return false;
	}
}

/*
 * The engine gave up resolving an address (issue 20.10: two veth ends in one
 * namespace, a peer that is down, a wrong --ip): say so on stderr, which is
 * all a user of an unmodified program sees besides RETRY_EXC_ERR. Once per
 * address and device every UNRESOLVED_QUIET_NS, not once per failed WQE.
 */
#define UNRESOLVED_QUIET_NS 10000000000ull

static void report_unresolved(struct rocemu_vdevice *d, const uint8_t gid[16])
{
	static const uint8_t v4_prefix[12] = {[10] = 0xff, [11] = 0xff};
	uint64_t now = rocemu_now_ns();
	char text[INET6_ADDRSTRLEN];
	unsigned slot = 0;
	bool v4 = !memcmp(gid, v4_prefix, 12);

	for (unsigned i = 0; i < ROCEMU_UNRESOLVED_SLOTS; i++) {
		if (!memcmp(d->unresolved[i].gid, gid, 16)) {
			if (now - d->unresolved[i].said_ns < UNRESOLVED_QUIET_NS)
				return;
			slot = i;
			break;
		}
		if (d->unresolved[i].said_ns < d->unresolved[slot].said_ns)
			slot = i;
	}
	memcpy(d->unresolved[slot].gid, gid, 16);
	d->unresolved[slot].said_ns = now;
	if (!inet_ntop(v4 ? AF_INET : AF_INET6, v4 ? gid + 12 : gid, text, sizeof(text)))
		return;
	fprintf(stderr, "rocemu: %s: cannot resolve %s (%s): no answer from it on %s\n",
		d->ibdev.name, text, v4 ? "ARP" : "ND", d->cfg.spec);
}

void rocemu_async_from_engine(void *arg, const struct rocemu_event *ev)
{
	struct rocemu_vdevice *d = arg;
	struct ibv_async_event out;

	if (ev->unresolved) {
		report_unresolved(d, ev->unresolved);
		return;
	}

	memset(&out, 0, sizeof(out));
	out.event_type = ev->type;
	if (ev->obj_ctx && ev->type == IBV_EVENT_CQ_ERR) {
		struct rocemu_vcq *cq = ev->obj_ctx;
		out.element.cq = (struct ibv_cq *)&cq->cqx;
		rocemu_async_push(cq->ctx, &out, &cq->async_reported);
		return;
	}
	if (!ev->obj_ctx && is_qp_event(ev->type))
		return; /* an XRC target whose event handle is gone (rocemu_qp_retarget_events) */
	if (ev->obj_ctx && is_qp_event(ev->type)) {
		struct rocemu_vqp *qp = ev->obj_ctx;
		out.element.qp = &qp->qpx.qp_base;
		rocemu_async_push(qp->ctx, &out, &qp->events_reported);
		return;
	}
	if (ev->obj_ctx &&
	    (ev->type == IBV_EVENT_SRQ_ERR || ev->type == IBV_EVENT_SRQ_LIMIT_REACHED)) {
		struct rocemu_vsrq *srq = ev->obj_ctx;
		out.element.srq = &srq->srq;
		rocemu_async_push(srq->ctx, &out, &srq->events_reported);
		return;
	}
	/* Port and device events go to every context open on the device. */
	out.element.port_num = 1;
	pthread_mutex_lock(&rocemu_ctx_list_lock);
	for (struct rocemu_vcontext *c = d->contexts; c; c = c->next)
		rocemu_async_push(c, &out, NULL);
	pthread_mutex_unlock(&rocemu_ctx_list_lock);
}

int ibv_get_async_event(struct ibv_context *ctx, struct ibv_async_event *event)
{
	if (rocemu_dead(ctx))
		return rocemu_inherited_fail(ctx), -1;
	uint64_t v;

	if (!ctx || !event) {
		errno = EINVAL;
		return -1;
	}
	struct rocemu_vcontext *c = to_vctx(ctx);
	/* Blocks unless the program made async_fd non-blocking (then EAGAIN). */
	if (read(ctx->async_fd, &v, sizeof(v)) != sizeof(v))
		return -1;
	pthread_mutex_lock(&c->ev_lock);
	struct rocemu_async_event *e = c->ev_head;
	if (e) {
		c->ev_head = e->next;
		if (!c->ev_head)
			c->ev_tail = NULL;
		if (e->reported)
			(*e->reported)++; /* now the program owes an ack for it */
	}
	pthread_mutex_unlock(&c->ev_lock);
	if (!e) {
		errno = EAGAIN;
		return -1;
	}
	*event = e->ev;
	free(e);
	return 0;
}
ROCEMU_PUBLIC(ibv_get_async_event)

static void count_ack(pthread_mutex_t *m, pthread_cond_t *cond, uint32_t *counter)
{
	pthread_mutex_lock(m);
	(*counter)++;
	pthread_cond_broadcast(cond);
	pthread_mutex_unlock(m);
}

void ibv_ack_async_event(struct ibv_async_event *event)
{
	if (!event)
		return;
	if (event->event_type == IBV_EVENT_CQ_ERR && event->element.cq) {
		struct ibv_cq *cq = event->element.cq;
		count_ack(&cq->mutex, &cq->cond, &cq->async_events_completed);
	} else if (is_qp_event(event->event_type) && event->element.qp) {
		struct ibv_qp *qp = event->element.qp;
		count_ack(&qp->mutex, &qp->cond, &qp->events_completed);
	} else if ((event->event_type == IBV_EVENT_SRQ_ERR ||
		    event->event_type == IBV_EVENT_SRQ_LIMIT_REACHED) &&
		   event->element.srq) {
		struct ibv_srq *srq = event->element.srq;
		count_ack(&srq->mutex, &srq->cond, &srq->events_completed);
	}
}
ROCEMU_PUBLIC(ibv_ack_async_event)

/*
 * Destroying an object (rdma-core's rule, ibv_get_async_event(3)): its events
 * still queued are dropped, together with their counts in async_fd, and the
 * destroy waits until every event of it that the program was handed has been
 * acknowledged. The engine object is gone by then, so no new event comes.
 * Returns how many events of the object the program was handed.
 */
/* Take n counts out of a semaphore eventfd (events dropped before they were
 * read), without blocking whatever the program made of the fd's flags. */
void rocemu_fd_take_counts(int fd, unsigned n)
{
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	for (uint64_t v; n; n--)
		if (read(fd, &v, sizeof(v)) != sizeof(v))
			break;
	fcntl(fd, F_SETFL, fl);
}

uint32_t rocemu_async_forget(struct rocemu_vcontext *c, uint32_t *reported)
{
	unsigned dropped = 0;

	pthread_mutex_lock(&c->ev_lock);
	struct rocemu_async_event **pp = &c->ev_head;
	c->ev_tail = NULL;
	while (*pp) {
		struct rocemu_async_event *e = *pp;
		if (e->reported == reported) {
			*pp = e->next;
			free(e);
			dropped++;
			continue;
		}
		c->ev_tail = e;
		pp = &e->next;
	}
	rocemu_fd_take_counts(c->vctx.context.async_fd, dropped);
	uint32_t handed_out = *reported;
	pthread_mutex_unlock(&c->ev_lock);
	return handed_out;
}

void rocemu_async_wait_acked(pthread_mutex_t *m, pthread_cond_t *cond, const uint32_t *completed,
			     uint32_t reported)
{
	pthread_mutex_lock(m);
	while (*completed != reported)
		pthread_cond_wait(cond, m);
	pthread_mutex_unlock(m);
}

/* ------------------------------------------------------------------------ */
/* fork(): the engine reaches registered memory through the process's own   */
/* virtual addresses, never by physical page, so copy-on-write after fork   */
/* cannot detach a registration from the parent's memory: fork is safe.     */

static bool g_fork_init;

int ibv_fork_init(void)
{
	g_fork_init = true;
	return 0;
}
ROCEMU_PUBLIC(ibv_fork_init)

enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}
ROCEMU_PUBLIC(ibv_is_fork_initialized)

int ibv_dontfork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}
ROCEMU_PUBLIC(ibv_dontfork_range)

int ibv_dofork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}
ROCEMU_PUBLIC(ibv_dofork_range)
