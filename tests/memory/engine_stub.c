/* SPDX-License-Identifier: BSD-3-Clause */
/* Test-only stand-ins for engine.c and the port (see engine_stub.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>

#include "engine_stub.h"

static void stub_fail(const char *what)
{
	fprintf(stderr, "engine stub: %s\n", what);
	abort();
}

struct rocemu_engine *stub_engine_new(uint32_t max_mr)
{
	return stub_engine_new_mw(max_mr, 0);
}

struct rocemu_engine *stub_engine_new_mw(uint32_t max_mr, uint32_t max_mw)
{
	struct rocemu_engine *e = calloc(1, sizeof(*e));

	if (!e)
		stub_fail("out of memory");
	pthread_mutex_init(&e->mu, NULL);
	e->caps = (struct rocemu_caps){
	    .max_mr_size = UINT64_MAX,
	    .max_sge = ROCEMU_MAX_SGE,
	    .max_cq = 16,
	    .max_cqe = 1024,
	    .max_mr = max_mr,
	    .max_mw = max_mw,
	    .max_pd = 8,
	    .max_ah = 4,
	    .max_srq = 4,
	    .max_srq_wr = 256,
	    .max_srq_sge = ROCEMU_MAX_SGE,
	    .odp = true,
	    .atomic_hca = true,
	    .max_dm_size = 4096,
	};
	e->gid_count = 2;
	if (rocemu_mem_table_create(max_mr, max_mw, &e->mem))
		stub_fail("mem table");
	return e;
}

void stub_engine_free(struct rocemu_engine *e)
{
	if (e->locked)
		stub_fail("engine freed with the lock held");
	rocemu_mem_table_destroy(e->mem);
	pthread_mutex_destroy(&e->mu);
	free(e);
}

unsigned stub_events(const struct rocemu_engine *e, enum ibv_event_type type)
{
	unsigned i, n = 0;

	for (i = 0; i < e->nevents; i++)
		n += e->events[i].type == type;
	return n;
}

/* locked/owner are read by threads that do not hold the lock: atomics. */
static bool held_by_me(struct rocemu_engine *e)
{
	return __atomic_load_n(&e->locked, __ATOMIC_ACQUIRE) &&
	       pthread_equal(__atomic_load_n(&e->owner, __ATOMIC_RELAXED), pthread_self());
}

void rocemu_engine_lock(struct rocemu_engine *e)
{
	if (held_by_me(e))
		stub_fail("engine lock taken twice by one thread");
	pthread_mutex_lock(&e->mu);
	__atomic_store_n(&e->owner, pthread_self(), __ATOMIC_RELAXED);
	__atomic_store_n(&e->locked, true, __ATOMIC_RELEASE);
}

void rocemu_engine_unlock(struct rocemu_engine *e)
{
	if (!held_by_me(e))
		stub_fail("engine unlock without the lock");
	__atomic_store_n(&e->locked, false, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&e->mu);
}

struct rocemu_mem_table *rocemu_engine_mem(struct rocemu_engine *e)
{
	if (!held_by_me(e))
		stub_fail("MR table used without the engine lock");
	return e->mem;
}

void rocemu_engine_raise(struct rocemu_engine *e, enum ibv_event_type type, void *obj_ctx)
{
	if (!held_by_me(e))
		stub_fail("event raised without the engine lock");
	if (e->nevents < STUB_MAX_EVENTS)
		e->events[e->nevents++] = (struct rocemu_event){.type = type, .obj_ctx = obj_ctx};
}

void rocemu_engine_caps(const struct rocemu_engine *e, struct rocemu_caps *caps)
{
	*caps = e->caps;
}

/* The port is the engine itself here: the stand-ins only need to count. */
struct rocemu_port *rocemu_engine_port(struct rocemu_engine *e)
{
	return (struct rocemu_port *)(void *)e;
}

unsigned rocemu_port_progress(struct rocemu_port *port)
{
	struct rocemu_engine *e = (struct rocemu_engine *)(void *)port;

	if (held_by_me(e))
		stub_fail("progress called with the engine lock held");
	e->progress_calls++;
	return 0;
}

/* A poll: a pass (outside the lock, as the port's own try-locked one), then
 * the lock; a post or a control verb: the lock. */
void rocemu_port_verb_enter(struct rocemu_port *port, enum rocemu_verb verb)
{
	if (verb == ROCEMU_VERB_POLL)
		rocemu_port_progress(port);
	rocemu_engine_lock((struct rocemu_engine *)(void *)port);
}

void rocemu_port_verb_leave(struct rocemu_port *port, enum rocemu_verb_did did)
{
	struct rocemu_engine *e = (struct rocemu_engine *)(void *)port;

	if (!held_by_me(e))
		stub_fail("verb left without the engine lock");
	if (did == ROCEMU_DID_POLL_FOUND || did == ROCEMU_DID_POLL_EMPTY)
		e->app_polls++;
	rocemu_engine_unlock(e);
}

unsigned rocemu_port_gid_count(const struct rocemu_port *port)
{
	return ((const struct rocemu_engine *)(const void *)port)->gid_count;
}

/* GID 0: a link-local address; GID 1..: IPv4-mapped 10.1.2.N (for LID-only AVs). */
int rocemu_port_gid(const struct rocemu_port *port, unsigned index, uint8_t gid[16])
{
	if (index >= rocemu_port_gid_count(port))
		return -EINVAL;
	memset(gid, 0, 16);
	if (index == 0) {
		gid[0] = 0xfe;
		gid[1] = 0x80;
		gid[15] = 1;
	} else {
		gid[10] = gid[11] = 0xff;
		gid[12] = 10;
		gid[13] = 1;
		gid[14] = 2;
		gid[15] = (uint8_t)index;
	}
	return 0;
}

/* SRQ numbers and XRC domains (xrc.c, engine.c): the queues tests make basic
 * SRQs only; a number for each, no domain. */
int rocemu_engine_srq_register(struct rocemu_engine *e, struct rocemu_srq *srq, uint32_t *num)
{
	static uint32_t next = 0x100;

	(void)e;
	(void)srq;
	*num = next++;
	return 0;
}

void rocemu_engine_srq_unregister(struct rocemu_engine *e, uint32_t num)
{
	(void)e;
	(void)num;
}

void rocemu_xrcd_use(struct rocemu_xrcd *x, int delta)
{
	(void)delta;
	if (x)
		stub_fail("XRC domain in the queues stub");
}

struct rocemu_engine *rocemu_xrcd_engine(const struct rocemu_xrcd *x)
{
	(void)x;
	stub_fail("XRC domain in the queues stub");
	return NULL;
}
