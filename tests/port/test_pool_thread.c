/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Application threads' mempool caches (port_pool.c): a thread without an
 * lcore id gets one the first time it allocates from a port, and at its exit
 * its cached mbufs go back to the pool and the id is released.
 * - test_cache_given_back: a thread allocates and frees mbufs (they stay in
 *   its cache); after it exited, that lcore's cache is empty, no mbuf is
 *   missing from the pool, and the id is free again;
 * - test_ids_reused: three times RTE_MAX_LCORE threads one after another
 *   each get an id (each exit released its own);
 * - test_limit: RTE_MAX_LCORE threads alive at once: no more than a third
 *   of the pool's mbufs divided by its cache size have an id (their caches
 *   could otherwise hold the whole pool); the others are counted
 *   pool_thread_no_lcore and still allocate (from the pool itself); when all
 *   have exited, the pool has every mbuf again.
 * On one end of a ring pair, its progress thread stopped; cmocka.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "port_internal.h"
#include "port_test_util.h"

#define N_MBUFS 64

static struct rocemu_port *port;

struct worker {
	pthread_barrier_t *hold; /* NULL: no wait before exit */
	unsigned lcore;		 /* the id the thread had after its first alloc */
	unsigned cached;	 /* its cache's length before it exited */
	unsigned got;		 /* mbufs it allocated */
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct rte_mbuf *m[N_MBUFS];
	struct rte_mempool_cache *cache;

	rocemu_port_lock(port);
	for (w->got = 0; w->got < N_MBUFS; w->got++)
		if (!(m[w->got] = rocemu_port_alloc_mbuf(port)))
			break;
	rocemu_port_unlock(port);
	w->lcore = rte_lcore_id();
	for (unsigned i = 0; i < w->got; i++)
		rte_pktmbuf_free(m[i]);
	cache = w->lcore == LCORE_ID_ANY ? NULL : rte_mempool_default_cache(port->pool, w->lcore);
	w->cached = cache ? cache->len : 0;
	if (w->hold)
		pthread_barrier_wait(w->hold);
	return NULL;
}

static void run_worker(struct worker *w)
{
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, worker_main, w), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
}

static void test_cache_given_back(void **state)
{
	struct worker w = {0};
	unsigned in_use = rte_mempool_in_use_count(port->pool);
	uint64_t caches = ptu_counter(port, "pool_thread_caches");

	(void)state;
	run_worker(&w);
	assert_int_equal(w.got, N_MBUFS);
	assert_int_not_equal(w.lcore, LCORE_ID_ANY);
	assert_int_not_equal(w.lcore, rte_lcore_id());
	assert_true(w.cached > 0); /* the control: its frees stayed in its cache */
	assert_int_equal(ptu_counter(port, "pool_thread_caches"), caches + 1);
	/* exited: its cache given back, its id released */
	assert_int_equal(rte_mempool_default_cache(port->pool, w.lcore)->len, 0);
	assert_false(rte_lcore_has_role(w.lcore, ROLE_NON_EAL));
	assert_int_equal(rte_mempool_in_use_count(port->pool), in_use);
}

static void test_ids_reused(void **state)
{
	uint64_t caches = ptu_counter(port, "pool_thread_caches");
	unsigned in_use = rte_mempool_in_use_count(port->pool);

	(void)state;
	for (unsigned i = 0; i < 3 * RTE_MAX_LCORE; i++) {
		struct worker w = {0};

		run_worker(&w);
		assert_int_not_equal(w.lcore, LCORE_ID_ANY);
	}
	assert_int_equal(ptu_counter(port, "pool_thread_caches"), caches + 3 * RTE_MAX_LCORE);
	assert_int_equal(ptu_counter(port, "pool_thread_no_lcore"), 0);
	assert_int_equal(rte_mempool_in_use_count(port->pool), in_use);
}

static void test_limit(void **state)
{
	enum { N = RTE_MAX_LCORE };
	static struct worker w[N];
	static pthread_t t[N];
	pthread_barrier_t hold;
	unsigned in_use = rte_mempool_in_use_count(port->pool), without = 0;
	uint64_t no_lcore = ptu_counter(port, "pool_thread_no_lcore");

	(void)state;
	assert_int_equal(pthread_barrier_init(&hold, NULL, N + 1), 0);
	for (unsigned i = 0; i < N; i++) {
		w[i] = (struct worker){.hold = &hold};
		assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
	}
	pthread_barrier_wait(&hold); /* all alive, each past its allocations */
	for (unsigned i = 0; i < N; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(w[i].got, N_MBUFS);
		without += w[i].lcore == LCORE_ID_ANY;
	}
	pthread_barrier_destroy(&hold);
	assert_true(N - without >= 1);
	assert_true(N - without <= port->pool->size / (3 * port->pool->cache_size));
	assert_int_equal(ptu_counter(port, "pool_thread_no_lcore"), no_lcore + without);
	assert_int_equal(rte_mempool_in_use_count(port->pool), in_use);
}

static int setup(void **state)
{
	char err[256];

	(void)state;
	port = ptu_open("ring:pt:a", "10.79.0.1/24", "02:00:00:79:00:01", err, sizeof(err));
	if (!port) {
		fprintf(stderr, "open: %s\n", err);
		return -1;
	}
	/* no pass but the workers' allocations: the port's own frames (its
	 * announcements, held in a ring nobody reads) would take mbufs too */
	rocemu_port_progress_thread_stop(port);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rocemu_port_close(port);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cache_given_back),
	    cmocka_unit_test(test_ids_reused),
	    cmocka_unit_test(test_limit),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
