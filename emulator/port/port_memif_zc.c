/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memif zero-copy (DPDK 22.11's `zero-copy=yes`, client role only): may this
 * process's next memif client use it? In zero-copy the client's PMD exports
 * the process's DPDK memory as memif regions and puts its mbufs' buffers in
 * the rings itself: a frame the client sends is read by the server straight
 * out of the client's mbuf, and a frame it receives is written by the
 * server straight into one. The client's own PMD copies nothing; the
 * server's still copies each frame once, in or out (the PMD's server role
 * has no zero-copy).
 *
 * What DPDK 22.11 requires, read from drivers/net/memif:
 *  - memory with a file descriptor per memseg list (--single-file-segments,
 *    which the PMD checks): EAL's --no-huge memory is one memfd, so
 *    port_eal.c passes the flag there;
 *  - the mbufs in the first memseg list (the PMD writes region 1 into every
 *    descriptor, a FIXME in its code) and every allocated segment of a list
 *    contiguous from its start (a region is the list's base and the sum of
 *    its segments): true of --no-huge memory (one list, wholly allocated),
 *    not assured with hugepages, which therefore keep copy mode;
 *  - at its connection the PMD closes the memory's descriptor, which is
 *    EAL's own (rte_memseg_get_fd returns it, not a copy). A later
 *    connection would send, and then close, whatever file has that number
 *    by then. So zero-copy is used only while the descriptor is still
 *    EAL's memfd ("nohuge"), and by one device per process: the process's
 *    first memif client, for its first connection. A client that
 *    reconnects, and any later one, uses copy mode (port_link_memif.c makes
 *    a reconnecting device again without it).
 * Zero-copy is asked for with ROCEMU_MEMIF_ZERO_COPY=1; copy mode is the
 * default: on a quiet 2-CPU VM zero-copy gave 0.56x copy mode's
 * ib_write_bw -s 65536 and 0.63x its 64 B rate (bench/ab.sh, 5 rounds,
 * 2026-12-02), though it saves one copy per byte.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_eal_memconfig.h>
#include <rte_mbuf.h>
#include <rte_memory.h>

#include "port_memif.h"

struct lists {
	unsigned used, external;
	const struct rte_memseg_list *first;
};

static int count_list(const struct rte_memseg_list *msl, void *arg)
{
	struct lists *n = arg;

	if (msl->external)
		n->external++;
	else if (msl->memseg_arr.count) {
		if (!n->used++)
			n->first = msl;
	}
	return 0;
}

/* one zero-copy device per process, ever (a second one's connection would
 * find the file closed by the first's, or not yet: a race) */
static atomic_bool zc_claimed;

/* The descriptor the PMD will send for the first list: still EAL's memfd? */
static bool eal_memfd_intact(const struct rte_memseg_list *msl)
{
	const struct rte_memseg *ms;
	char link[64], target[64];
	ssize_t n;
	int fd;

	if (!msl)
		return false;
	ms = rte_mem_virt2memseg(msl->base_va, msl);
	if (!ms || (fd = rte_memseg_get_fd(ms)) < 0)
		return false;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n <= 0)
		return false;
	target[n] = '\0';
	return strncmp(target, "/memfd:nohuge", 13) == 0;
}

bool memif_zc_intact(void)
{
	struct lists n = {0, 0, NULL};

	rte_memseg_list_walk(count_list, &n);
	return n.used == 1 && eal_memfd_intact(n.first);
}

bool memif_zc_claim(char *why, size_t len)
{
	const char *env = getenv("ROCEMU_MEMIF_ZERO_COPY");
	struct lists n = {0, 0, NULL};

	if (!env || strcmp(env, "1")) {
		if (len)
			why[0] = '\0'; /* the default: nothing to tell */
		return false;
	}
	if (rte_eal_has_hugepages()) {
		snprintf(why, len, "hugepage memory: zero-copy needs --no-huge memory");
		return false;
	}
	if (!rte_mcfg_get_single_file_segments()) {
		snprintf(why, len, "EAL without --single-file-segments");
		return false;
	}
	rte_memseg_list_walk(count_list, &n);
	if (n.used != 1 || n.external) {
		snprintf(why, len, "DPDK memory in %u lists (%u external): zero-copy needs one",
			 n.used + n.external, n.external);
		return false;
	}
	if (atomic_exchange(&zc_claimed, true)) {
		snprintf(why, len, "zero-copy is this process's first memif client's (DPDK 22.11)");
		return false;
	}
	if (!eal_memfd_intact(n.first)) {
		snprintf(why, len, "EAL's memory file is closed (DPDK 22.11)");
		return false;
	}
	snprintf(why, len, "zero-copy");
	return true;
}

/*
 * The pool of a memif port hands out the mbuf freed last first (DPDK's
 * lock-free stack mempool, "lf_stack": no lock a preempted thread could
 * hold), not the one freed longest ago (a ring). With zero-copy the server's
 * PMD writes and reads our mbufs through its own mapping of our memory, and
 * its first touch of each page is a page fault in the server, on the frame's
 * path: 30-80 us each on a loaded VM (bench/perf_analysis.md). A ring pool
 * of 8192 mbufs cycles through all of them before reusing one, so about the
 * first 2200 round trips of a latency test each paid a fault or two
 * (ib_send_lat -s 2 -n 5000: typical 4.0 -> 16.8 us). Last-freed-first
 * keeps the buffers in use to the receive ring's 1024 and a few being sent,
 * mapped and in cache after their first round.
 * On top of the stack, the same per-lcore cache as any port's pool
 * (port_pool.c): a thread with an lcore id (the one that started EAL, each
 * progress thread) allocates and frees there without a compare-and-swap on
 * the shared stack (17% of a 64 B responder's samples without it). The cache
 * is a stack too (the last object put is the first one got; a full cache
 * is pushed whole onto the pool's stack, its newest on top, and a refill
 * takes the stack's newest batch), so the buffers in use stay the recently
 * freed ones; other application threads use the stack itself. Without the stack driver (a DPDK
 * built without it), the default pool.
 */
struct rte_mempool *memif_pool_create(const char *name, unsigned n, uint16_t data_room, int socket)
{
	unsigned cache = port_pool_cache_size(n);
	struct rte_mempool *mp =
	    rte_pktmbuf_pool_create_by_ops(name, n, cache, 0, data_room, socket, "lf_stack");

	return mp ? mp : rte_pktmbuf_pool_create(name, n, cache, 0, data_room, socket);
}
