/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * SO_KEEPALIVE for rsockets: one thread per process, started with the first
 * socket that asks, sends each such connected socket a 0-byte RDMA WRITE
 * every TCP_KEEPIDLE seconds (as rdma-core's keepalive service does). The
 * write needs no receive buffer at the peer and is invisible to it; if the
 * peer is gone, the transport's retries fail and the socket sees the error
 * completion.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "rsocket_int.h"

#define RS_KEEPALIVE_DEFAULT_S 7200 /* tcp_keepalive_time's default */

struct ka_entry {
	struct ka_entry *next;
	struct rsocket *rs;
	uint64_t due_ns;
};

static pthread_mutex_t ka_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ka_cond;
static struct ka_entry *ka_list;
static bool ka_running;
static pthread_t ka_thread;

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static unsigned default_idle_s(void)
{
	unsigned v = RS_KEEPALIVE_DEFAULT_S;
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_keepalive_time", "r");

	if (f) {
		if (fscanf(f, "%u", &v) != 1 || v == 0)
			v = RS_KEEPALIVE_DEFAULT_S;
		fclose(f);
	}
	return v;
}

static void *ka_run(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&ka_lock);
	while (ka_list) {
		uint64_t now = now_ns(), next = UINT64_MAX;
		for (struct ka_entry *e = ka_list; e; e = e->next) {
			if (e->due_ns <= now) {
				/* lock order: ka_lock, then the socket's */
				pthread_mutex_lock(&e->rs->lock);
				rs_post_keepalive(e->rs);
				pthread_mutex_unlock(&e->rs->lock);
				e->due_ns = now + (uint64_t)e->rs->opt.keepalive_s * 1000000000ull;
			}
			if (e->due_ns < next)
				next = e->due_ns;
		}
		struct timespec ts = {.tv_sec = (time_t)(next / 1000000000ull),
				      .tv_nsec = (long)(next % 1000000000ull)};
		pthread_cond_timedwait(&ka_cond, &ka_lock, &ts);
	}
	ka_running = false;
	pthread_mutex_unlock(&ka_lock);
	return NULL;
}

static pthread_once_t ka_once = PTHREAD_ONCE_INIT;

static void ka_init(void)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ka_cond, &ca);
	pthread_condattr_destroy(&ca);
}

/* rs->lock held (rsetsockopt). */
int rs_keepalive_update(struct rsocket *rs)
{
	if (!rs->opt.keepalive_s)
		rs->opt.keepalive_s = default_idle_s();
	/* rsetsockopt holds rs->lock; the keepalive thread takes ka_lock and
	 * then a socket's lock: release ours while touching the list. */
	pthread_once(&ka_once, ka_init);
	pthread_mutex_unlock(&rs->lock);
	pthread_mutex_lock(&ka_lock);
	struct ka_entry **pp = &ka_list;
	while (*pp && (*pp)->rs != rs)
		pp = &(*pp)->next;
	int rc = 0;
	if (rs->keepalive && !*pp) {
		struct ka_entry *e = calloc(1, sizeof(*e));
		if (!e) {
			rc = -ENOMEM;
		} else {
			e->rs = rs;
			e->next = ka_list;
			ka_list = e;
		}
	} else if (!rs->keepalive && *pp) {
		struct ka_entry *e = *pp;
		*pp = e->next;
		free(e);
	}
	for (struct ka_entry *e = ka_list; e; e = e->next)
		if (e->rs == rs)
			e->due_ns = now_ns() + (uint64_t)rs->opt.keepalive_s * 1000000000ull;
	if (!rc && ka_list && !ka_running) {
		if (pthread_create(&ka_thread, NULL, ka_run, NULL) == 0) {
			pthread_detach(ka_thread);
			ka_running = true;
		} else {
			rc = -EAGAIN;
		}
	}
	pthread_cond_signal(&ka_cond);
	pthread_mutex_unlock(&ka_lock);
	pthread_mutex_lock(&rs->lock);
	return rc;
}

void rs_keepalive_remove(struct rsocket *rs)
{
	pthread_once(&ka_once, ka_init);
	pthread_mutex_lock(&ka_lock);
	for (struct ka_entry **pp = &ka_list; *pp; pp = &(*pp)->next) {
		if ((*pp)->rs == rs) {
			struct ka_entry *e = *pp;
			*pp = e->next;
			free(e);
			break;
		}
	}
	pthread_cond_signal(&ka_cond);
	pthread_mutex_unlock(&ka_lock);
}
