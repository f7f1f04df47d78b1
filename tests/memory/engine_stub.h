/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A stand-in engine for unit-testing memory and queues alone: the engine
 * services of rocemu_internal.h and the few port calls they make, with
 * checks that the lock discipline is kept (no recursive locking, progress
 * never called with the lock held). Test-only.
 */
#ifndef ROCEMU_TEST_ENGINE_STUB_H
#define ROCEMU_TEST_ENGINE_STUB_H

#include <pthread.h>
#include <stdbool.h>

#include "rocemu_internal.h"

#define STUB_MAX_EVENTS 64

struct rocemu_engine {
	struct rocemu_mem_table *mem;
	struct rocemu_caps caps;
	pthread_mutex_t mu;
	pthread_t owner;
	bool locked;
	unsigned gid_count;
	unsigned progress_calls;
	unsigned app_polls;
	unsigned nevents;
	struct rocemu_event events[STUB_MAX_EVENTS];
};

/** An engine with generous caps and a table of max_mr slots. */
struct rocemu_engine *stub_engine_new(uint32_t max_mr);
/** The same with room for max_mw memory windows (stub_engine_new: none). */
struct rocemu_engine *stub_engine_new_mw(uint32_t max_mr, uint32_t max_mw);
void stub_engine_free(struct rocemu_engine *e);
/** Events of a type seen so far. */
unsigned stub_events(const struct rocemu_engine *e, enum ibv_event_type type);

#endif
