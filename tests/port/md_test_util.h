/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * For the direct channel's tests (test_memif_direct.c, fuzz_memif_direct.c):
 * a peer's object laid out in plain memory, as port_memif_direct.c makes
 * it (header, rings, page-aligned data area), and frames to put in it.
 */
#ifndef ROCEMU_MD_TEST_UTIL_H
#define ROCEMU_MD_TEST_UTIL_H

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../emulator/port/port_memif_direct.h"

#define MDT_N	 16u
#define MDT_ELT	 512u
#define MDT_RING 16u

struct mdt_obj {
	uint8_t *mem;
	size_t len, data_off;
	struct md_shared *sh;
	uint8_t *area;
};

static inline void mdt_obj_make(struct mdt_obj *o)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	o->data_off = page; /* header and two rings of 16 fit in one page */
	o->len = o->data_off + (size_t)MDT_N * MDT_ELT;
	o->mem = aligned_alloc(page, (o->len + page - 1) & ~(page - 1));
	memset(o->mem, 0, o->len);
	o->sh = (struct md_shared *)o->mem;
	o->area = o->mem + o->data_off;
	o->sh->magic = MD_MAGIC;
	o->sh->version = MD_VERSION;
	o->sh->n_elts = MDT_N;
	o->sh->elt_size = MDT_ELT;
	o->sh->ring_size = MDT_RING;
	o->sh->data_off = o->data_off;
	o->sh->data_len = (uint64_t)MDT_N * MDT_ELT;
}

/* Descriptor k of the ring, published. */
static inline void mdt_post(struct mdt_obj *o, uint32_t index, uint16_t off, uint16_t len)
{
	unsigned p = atomic_load(&o->sh->desc_prod);

	o->sh->desc[p % MDT_RING] = (struct md_desc){.index = index, .off = off, .len = len};
	atomic_store(&o->sh->desc_prod, p + 1);
}

/* A RoCEv2 frame head (IPv4, UDP 4791) of len bytes at buffer i, offset off. */
static inline void mdt_roce_frame(struct mdt_obj *o, uint32_t i, uint16_t off, uint16_t len)
{
	uint8_t *f = o->area + (size_t)i * MDT_ELT + off;

	memset(f, 0, len);
	f[12] = 0x08; /* IPv4 */
	f[14] = 0x45;
	f[14 + 9] = 17; /* UDP */
	f[14 + 20 + 2] = 4791 >> 8;
	f[14 + 20 + 3] = 4791 & 0xff;
	for (unsigned k = 14 + 28; k < len; k++)
		f[k] = (uint8_t)(k * 7 + i);
}

#endif
