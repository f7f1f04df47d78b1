/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The port's mbuf pool, made at open for whatever link: how many mbufs
 * (about PORT_POOL_BYTES of them unless the port says), how big (a whole
 * frame in one segment), the per-lcore caches (port_pool_cache_size, the
 * link's own pool too), and the link's own pool where it has one (memif's
 * stack pool, port_memif_zc.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "port_link.h"

#define PORT_DEFAULT_MBUFS 8192
/* by default about this many bytes of buffers, 2048 to 8192 of them */
#define PORT_POOL_BYTES (40u << 20)

/* A whole frame (MTU + Ethernet + VLAN) in one segment, at least a
 * 4096-byte-MTU RoCE frame, rounded to a cache line. */
uint32_t port_default_data_room(const struct rocemu_port *port)
{
	uint32_t room = (uint32_t)port->eth_mtu + 18;

	if (room < 4096 + ROCE_MAX_HDR_LEN + ROCE_ICRC_LEN + 64)
		room = 4096 + ROCE_MAX_HDR_LEN + ROCE_ICRC_LEN + 64;
	return (room + 63) & ~63u;
}

/* mbufs each lcore keeps for itself (the thread that started EAL, each
 * progress thread and each application thread that sends or receives,
 * rte_thread_register'ed: port_pool_thread_join): alloc and free without
 * touching the pool's shared ring or stack. At most an eighth of the pool,
 * so that a small pool (`mbufs 512`) is not held in the caches of threads
 * that do not need it. */
#define PORT_POOL_CACHE 256u

/* ROCEMU_POOL_CACHE=0: pools without caches, as memif's was before (A/B runs) */
unsigned port_pool_cache_size(unsigned n)
{
	const char *env = getenv("ROCEMU_POOL_CACHE");

	if (env && !strcmp(env, "0"))
		return 0;
	return RTE_MIN(PORT_POOL_CACHE, n / 8);
}

int port_pool_create(struct rocemu_port *port, char *err, size_t errlen)
{
	char name[RTE_MEMPOOL_NAMESIZE];
	unsigned n = port->cfg.n_mbufs ? port->cfg.n_mbufs : PORT_DEFAULT_MBUFS;
	uint32_t room =
	    port->link->data_room ? port->link->data_room(port) : port_default_data_room(port);

	port->max_frame = room;
	if (!port->cfg.n_mbufs && (uint64_t)n * room > PORT_POOL_BYTES)
		n = RTE_MAX(PORT_POOL_BYTES / room, 2048u);
	snprintf(name, sizeof(name), "rocemu_mb%u", port_next_seq());
	if (port->link->pool_create)
		port->pool = port->link->pool_create(
		    name, n, (uint16_t)(room + RTE_PKTMBUF_HEADROOM), (int)rte_socket_id());
	else
		port->pool = rte_pktmbuf_pool_create(name, n, port_pool_cache_size(n), 0,
						     (uint16_t)(room + RTE_PKTMBUF_HEADROOM),
						     (int)rte_socket_id());
	if (!port->pool)
		return port_fail(err, errlen, -ENOMEM,
				 "cannot create a pool of %u mbufs of %u bytes: %s", n, room,
				 rte_strerror(rte_errno));
	return 0;
}

/*
 * Application threads. DPDK gives a mempool cache only to threads with an
 * lcore id; without one, each mbuf a thread allocates (a frame a post
 * builds) and each one it frees (the PMD, once it copied the frame into the
 * memif ring; a frame placed) is a compare-and-swap on the pool's shared
 * stack or ring. So a thread without an id asks EAL for one the first time
 * it allocates or receives (rte_thread_register). Not every one: EAL has
 * RTE_MAX_LCORE ids, and the caches must leave the pool most of its mbufs;
 * a thread past the limit goes on without a cache, counted
 * pool_thread_no_lcore. It keeps it until it exits: then a pthread key's
 * destructor puts its cached mbufs back into every pool and releases the id,
 * so a thread that comes and goes leaves no mbufs behind in a cache nobody
 * uses. ROCEMU_POOL_THREAD_CACHE=0 leaves application threads without
 * (for A/B runs).
 */
static pthread_once_t thread_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t thread_key;
static bool thread_key_ok;
static bool thread_cache_off;
static __thread bool thread_tried;
static _Atomic unsigned app_threads; /* application threads holding an id */
static __thread bool thread_registered;

static void thread_exit(void *arg)
{
	(void)arg;
	port_pool_thread_leave();
}

static void thread_key_create(void)
{
	const char *env = getenv("ROCEMU_POOL_THREAD_CACHE");

	thread_cache_off = env && !strcmp(env, "0");
	thread_key_ok = pthread_key_create(&thread_key, thread_exit) == 0;
}

void port_pool_thread_join_slow(struct rocemu_port *port)
{
	if (thread_tried)
		return;
	thread_tried = true;
	pthread_once(&thread_key_once, thread_key_create);
	if (thread_cache_off || !thread_key_ok || !port->pool->cache_size)
		return;
	/* a cache holds up to 1.5 times its size: at most half the pool in
	 * application threads' caches, so that threads gone quiet cannot
	 * starve it (10 threads for 8192 mbufs, 2 for a pool of 8 caches) */
	if (atomic_fetch_add(&app_threads, 1) >= port->pool->size / (3 * port->pool->cache_size) ||
	    rte_thread_register() != 0 || rte_lcore_id() == LCORE_ID_ANY) {
		atomic_fetch_sub(&app_threads, 1);
		port_count(port, PC_POOL_THREAD_NO_LCORE);
		return;
	}
	thread_registered = true;
	/* any non-NULL value: the destructor runs at the thread's exit */
	pthread_setspecific(thread_key, port);
	port_count(port, PC_POOL_THREAD_CACHES);
}

static void flush_cache(struct rte_mempool *mp, void *arg)
{
	struct rte_mempool_cache *cache = rte_mempool_default_cache(mp, *(unsigned *)arg);

	if (cache)
		rte_mempool_cache_flush(cache, mp);
}

void port_pool_thread_leave(void)
{
	unsigned lcore = rte_lcore_id();

	if (lcore == LCORE_ID_ANY)
		return;
	rte_mempool_walk(flush_cache, &lcore);
	rte_thread_unregister();
	if (thread_registered) {
		thread_registered = false;
		atomic_fetch_sub(&app_threads, 1);
	}
}
