/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The engine's object census, kept in its MR table (private to memory and
 * queues). Every PD, CQ, SRQ and AH is linked here so that the per-engine
 * limits of rocemu_caps (max_pd, max_cq, max_srq, max_ah) can be enforced
 * and so that rocemu_mem_table_destroy() can free whatever the application
 * left behind when the engine goes away. QPs are the transport's business:
 * the engine must destroy them before it destroys the table.
 *
 * All functions are called with the engine lock held.
 */
#ifndef ROCEMU_MEM_OBJECTS_H
#define ROCEMU_MEM_OBJECTS_H

#include <stdint.h>

#include "../transport/rocemu_internal.h"

/** Kinds in teardown order: users of a PD go before the PDs themselves. */
enum rocemu_obj_kind {
	ROCEMU_OBJ_AH,
	ROCEMU_OBJ_SRQ,
	ROCEMU_OBJ_CQ,
	ROCEMU_OBJ_DM, /**< device memory: after the regions on it, which the slots free */
	ROCEMU_OBJ_PD,
	ROCEMU_OBJ_KINDS,
};

struct rocemu_obj;
/** Frees the object containing obj at table teardown (no lock, no events). */
typedef void (*rocemu_obj_release_fn)(struct rocemu_obj *obj);

/** Embedded in every tracked object. */
struct rocemu_obj {
	struct rocemu_obj *prev, *next;
	enum rocemu_obj_kind kind;
	rocemu_obj_release_fn release;
};

/** Link obj into t; -ENOMEM when max objects of that kind already exist. */
int rocemu_obj_track(struct rocemu_mem_table *t, struct rocemu_obj *obj, enum rocemu_obj_kind kind,
		     uint32_t max, rocemu_obj_release_fn release);
/** Unlink obj (it must be tracked in t). */
void rocemu_obj_untrack(struct rocemu_mem_table *t, struct rocemu_obj *obj);
/** How many objects of a kind exist. */
uint32_t rocemu_obj_count(const struct rocemu_mem_table *t, enum rocemu_obj_kind kind);

#ifndef container_of
#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))
#endif

#endif /* ROCEMU_MEM_OBJECTS_H */
