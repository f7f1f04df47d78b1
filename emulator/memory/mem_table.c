/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The MR table: slots addressed by the index part of a key, the variant
 * byte of each slot, a FIFO of free slots, and the census of the engine's
 * other objects (mem_objects.h). See mem_private.h for the key layout.
 */
#include <errno.h>
#include <stdlib.h>

#include "mem_private.h"
#include "rocemu_random.h"

struct rocemu_mem_table {
	uint32_t max_mr, max_mw; /**< regions and windows share the slots */
	uint32_t nr_mr, nr_mw;
	uint32_t nr_slots;
	struct rocemu_mr **slot; /**< by index */
	uint8_t *turn;		 /**< per slot: position in variants[] of its last key */
	uint8_t variants[255];	 /**< 1..255 in a random order, drawn at creation */
	uint32_t *free_fifo;	 /**< ring of free indices, oldest first */
	uint32_t free_head;
	uint32_t free_count;
	struct rocemu_obj *objs[ROCEMU_OBJ_KINDS];
	uint32_t nr_obj[ROCEMU_OBJ_KINDS];
	uint32_t last_pd_handle;
	uint64_t dm_bytes;	    /**< device memory allocated (dm.c) */
	uint8_t key_tag;	    /**< top byte of every key (0: standalone) */
	struct rocemu_mr **imports; /**< imported regions (mr_import.c), in no order */
	uint32_t n_imports, cap_imports;
};

/*
 * The variant order of the table (a shuffle of 1..255) and a random place in
 * it for every slot, from the kernel's CSPRNG: a key's variant cannot be
 * guessed from its slot, and differs from one process to the next.
 */
static int draw_variants(struct rocemu_mem_table *t)
{
	uint32_t r[255];
	int rc;

	rc = rocemu_random(r, sizeof(r));
	if (rc == 0)
		rc = rocemu_random(t->turn, t->nr_slots);
	if (rc < 0)
		return rc;
	for (uint32_t i = 0; i < 255; i++)
		t->variants[i] = (uint8_t)(i + 1);
	for (uint32_t i = 254; i > 0; i--) { /* Fisher-Yates */
		uint32_t j = r[i] % (i + 1);
		uint8_t v = t->variants[i];

		t->variants[i] = t->variants[j];
		t->variants[j] = v;
	}
	for (uint32_t i = 0; i < t->nr_slots; i++)
		t->turn[i] %= 255;
	return 0;
}

int rocemu_mem_table_create(uint32_t max_mr, uint32_t max_mw, struct rocemu_mem_table **out)
{
	struct rocemu_mem_table *t;
	uint32_t i, n;
	int rc;

	if (!out || max_mr == 0 || max_mr > ROCEMU_MEM_MAX_SLOTS ||
	    max_mw > ROCEMU_MEM_MAX_SLOTS - max_mr)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	n = max_mr + max_mw;
	t->max_mr = max_mr;
	t->max_mw = max_mw;
	t->nr_slots = n;
	t->slot = calloc(n, sizeof(*t->slot));
	t->turn = calloc(n, sizeof(*t->turn));
	t->free_fifo = calloc(n, sizeof(*t->free_fifo));
	if (!t->slot || !t->turn || !t->free_fifo) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = draw_variants(t);
	if (rc < 0)
		goto fail;
	for (i = 0; i < n; i++)
		t->free_fifo[i] = i;
	t->free_count = n;
	*out = t;
	return 0;
fail:
	free(t->slot);
	free(t->turn);
	free(t->free_fifo);
	free(t);
	return rc;
}

int rocemu_mem_table_set_key_tag(struct rocemu_mem_table *t, uint8_t tag)
{
	if (tag == 0 || t->nr_slots > ROCEMU_MEM_MAX_TAGGED_SLOTS || t->nr_mr || t->nr_mw)
		return -EINVAL;
	t->key_tag = tag;
	return 0;
}

uint8_t rocemu_mem_key_tag(const struct rocemu_mem_table *t)
{
	return t->key_tag;
}

static void release_kind(struct rocemu_mem_table *t, enum rocemu_obj_kind kind)
{
	while (t->objs[kind]) {
		struct rocemu_obj *obj = t->objs[kind];

		rocemu_obj_untrack(t, obj);
		obj->release(obj);
	}
}

/*
 * Frees every object still alive: AHs, SRQs, CQs, then MRs and windows, then PDs (so
 * nothing is freed while something that points at it still exists). The
 * engine destroys its QPs before calling this.
 */
void rocemu_mem_table_destroy(struct rocemu_mem_table *t)
{
	uint32_t i;

	if (!t)
		return;
	release_kind(t, ROCEMU_OBJ_AH);
	release_kind(t, ROCEMU_OBJ_SRQ);
	release_kind(t, ROCEMU_OBJ_CQ);
	for (i = 0; i < t->nr_slots; i++)
		free(t->slot[i]); /* a window's entry is the start of its struct rocemu_mw */
	for (i = 0; i < t->n_imports; i++) {
		free(t->imports[i]->foreign);
		free(t->imports[i]);
	}
	free(t->imports);
	release_kind(t, ROCEMU_OBJ_DM);
	release_kind(t, ROCEMU_OBJ_PD);
	free(t->slot);
	free(t->turn);
	free(t->free_fifo);
	free(t);
}

/* Next variant of a slot: the next in the table's order, so a slot repeats a
 * variant only after 255 keys; never 0, so key 0 never translates. */
static uint32_t next_key(struct rocemu_mem_table *t, uint32_t index)
{
	t->turn[index] = (uint8_t)((t->turn[index] + 1) % 255);
	return (uint32_t)t->key_tag << 24 | index << 8 | t->variants[t->turn[index]];
}

int rocemu_mem_key_alloc(struct rocemu_mem_table *t, struct rocemu_mr *mr)
{
	uint32_t index;

	if (mr->window ? t->nr_mw >= t->max_mw : t->nr_mr >= t->max_mr)
		return -ENOMEM;
	if (t->free_count == 0)
		return -ENOMEM;
	index = t->free_fifo[t->free_head];
	t->free_head = (t->free_head + 1) % t->nr_slots;
	t->free_count--;
	t->slot[index] = mr;
	if (mr->window)
		t->nr_mw++;
	else
		t->nr_mr++;
	mr->index = index;
	mr->key = next_key(t, index);
	return 0;
}

void rocemu_mem_key_renew(struct rocemu_mem_table *t, struct rocemu_mr *mr)
{
	mr->key = next_key(t, mr->index);
}

void rocemu_mem_key_free(struct rocemu_mem_table *t, struct rocemu_mr *mr)
{
	uint32_t tail = (t->free_head + t->free_count) % t->nr_slots;
	uint32_t index = mr->index;

	/* A window's tag is the consumer's: step past it if it is the variant
	 * the slot hands out next, so that the window's last R_Key does not
	 * name whatever takes the slot. */
	if (mr->window && t->variants[(t->turn[index] + 1) % 255] == (mr->key & 0xff))
		t->turn[index] = (uint8_t)((t->turn[index] + 1) % 255);
	t->slot[index] = NULL;
	t->free_fifo[tail] = index;
	t->free_count++;
	if (mr->window)
		t->nr_mw--;
	else
		t->nr_mr--;
}

struct rocemu_mr *rocemu_mem_lookup(const struct rocemu_mem_table *t, uint32_t key)
{
	uint32_t index = key >> 8;
	struct rocemu_mr *mr;

	if (t->key_tag) {
		if (key >> 24 != t->key_tag)
			return t->n_imports ? rocemu_mem_import_find(t, key) : NULL;
		index &= 0xffff;
	}
	if (index >= t->nr_slots)
		return NULL;
	mr = t->slot[index];
	if (!mr || mr->key != key)
		return NULL;
	return mr;
}

struct rocemu_mr *rocemu_mem_import_find(const struct rocemu_mem_table *t, uint32_t key)
{
	for (uint32_t i = 0; i < t->n_imports; i++)
		if (t->imports[i]->key == key)
			return t->imports[i];
	return NULL;
}

int rocemu_mem_import_add(struct rocemu_mem_table *t, struct rocemu_mr *mr)
{
	if (t->n_imports == t->cap_imports) {
		uint32_t cap = t->cap_imports ? t->cap_imports * 2 : 8;
		struct rocemu_mr **a = realloc(t->imports, cap * sizeof(*a));

		if (!a)
			return -ENOMEM;
		t->imports = a;
		t->cap_imports = cap;
	}
	t->imports[t->n_imports++] = mr;
	return 0;
}

void rocemu_mem_import_remove(struct rocemu_mem_table *t, struct rocemu_mr *mr)
{
	for (uint32_t i = 0; i < t->n_imports; i++)
		if (t->imports[i] == mr) {
			t->imports[i] = t->imports[--t->n_imports];
			return;
		}
}

struct rocemu_mr *rocemu_mem_key_slot(const struct rocemu_mem_table *t, uint32_t key)
{
	if (t->key_tag && key >> 24 != t->key_tag)
		return NULL;
	return rocemu_mem_slot(t, t->key_tag ? (key >> 8) & 0xffff : key >> 8);
}

struct rocemu_mr *rocemu_mem_slot(const struct rocemu_mem_table *t, uint32_t index)
{
	return index < t->nr_slots ? t->slot[index] : NULL;
}

int rocemu_obj_track(struct rocemu_mem_table *t, struct rocemu_obj *obj, enum rocemu_obj_kind kind,
		     uint32_t max, rocemu_obj_release_fn release)
{
	if (t->nr_obj[kind] >= max)
		return -ENOMEM;
	obj->kind = kind;
	obj->release = release;
	obj->prev = NULL;
	obj->next = t->objs[kind];
	if (obj->next)
		obj->next->prev = obj;
	t->objs[kind] = obj;
	t->nr_obj[kind]++;
	return 0;
}

void rocemu_obj_untrack(struct rocemu_mem_table *t, struct rocemu_obj *obj)
{
	if (obj->prev)
		obj->prev->next = obj->next;
	else
		t->objs[obj->kind] = obj->next;
	if (obj->next)
		obj->next->prev = obj->prev;
	obj->prev = obj->next = NULL;
	t->nr_obj[obj->kind]--;
}

uint32_t rocemu_obj_count(const struct rocemu_mem_table *t, enum rocemu_obj_kind kind)
{
	return t->nr_obj[kind];
}

void rocemu_mem_windows_orphan(struct rocemu_mem_table *t, uint32_t qpn)
{
	for (uint32_t i = 0, seen = 0; i < t->nr_slots && seen < t->nr_mw; i++) {
		struct rocemu_mr *w = t->slot[i];

		if (!w || !w->window)
			continue;
		seen++;
		if (w->mw_type == IBV_MW_TYPE_2 && !w->invalidated && w->bound_qpn == qpn)
			w->bound_qpn = ROCEMU_MEM_NO_QP;
	}
}

uint32_t rocemu_mem_pd_handle(struct rocemu_mem_table *t)
{
	return ++t->last_pd_handle;
}

int rocemu_mem_dm_charge(struct rocemu_mem_table *t, uint64_t len, uint64_t max)
{
	if (len > max || t->dm_bytes > max - len)
		return -ENOMEM;
	t->dm_bytes += len;
	return 0;
}

void rocemu_mem_dm_uncharge(struct rocemu_mem_table *t, uint64_t len)
{
	t->dm_bytes -= len;
}
