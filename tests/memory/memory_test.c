/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests for PDs, MRs and the translation function, against a stand-in
 * engine. Test buffers sit between PROT_NONE guard pages, and every failing
 * access is followed by a check that no byte outside the region changed.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "stub_fixture.h"
#include "../../emulator/memory/mem_private.h"

#define FILL 0xa5

static size_t page;

/* len bytes of read-write memory with PROT_NONE pages on both sides. */
struct guarded {
	uint8_t *map;
	size_t map_len;
	uint8_t *buf;
	size_t len;
};

static struct guarded guarded_new(size_t len)
{
	struct guarded g;
	size_t body = (len + page - 1) / page * page;

	g.map_len = body + 2 * page;
	g.map = mmap(NULL, g.map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(g.map != MAP_FAILED);
	assert_int_equal(mprotect(g.map, page, PROT_NONE), 0);
	assert_int_equal(mprotect(g.map + page + body, page, PROT_NONE), 0);
	g.buf = g.map + page;
	g.len = body;
	memset(g.buf, FILL, g.len);
	return g;
}

static void guarded_free(struct guarded *g)
{
	munmap(g->map, g->map_len);
}

/* Every byte of the buffer outside [off, off+len) still holds FILL. */
static void assert_outside_untouched(const struct guarded *g, size_t off, size_t len)
{
	size_t i;

	for (i = 0; i < g->len; i++)
		if (i < off || i >= off + len)
			assert_int_equal(g->buf[i], FILL);
}

static int setup(void **state)
{
	page = (size_t)sysconf(_SC_PAGESIZE);
	return fixture_setup(state, 64, true);
}

#define ALL_ACCESS                                                                                 \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)

static uint32_t key_of(struct rocemu_mr *mr)
{
	struct rocemu_mr_info info;

	rocemu_mr_info(mr, &info);
	assert_int_equal(info.lkey, info.rkey); /* documented: one key */
	return info.lkey;
}

/* ------------------------------------------------------------------------ */

static void test_pd_refcount(void **state)
{
	struct fixture *f = *state;
	struct guarded g = guarded_new(page);
	struct rocemu_pd *pd;
	struct rocemu_mr *mr;

	assert_int_equal(rocemu_pd_alloc(f->e, &pd), 0);
	assert_int_not_equal(pd->handle, f->pd->handle);
	assert_int_equal(rocemu_mr_reg(pd, g.buf, 64, 0, 0, &mr), 0);
	assert_int_equal(pd->refcnt, 1);
	assert_int_equal(rocemu_pd_free(pd), -EBUSY);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	assert_int_equal(pd->refcnt, 0);
	assert_int_equal(rocemu_pd_free(pd), 0);
	assert_int_equal(rocemu_pd_free(NULL), -EINVAL);
	guarded_free(&g);
}

static void test_pd_limit(void **state)
{
	struct fixture *f = *state;
	struct rocemu_pd *pds[8];
	unsigned n = 0, i;

	/* Two exist already; max_pd is 8. */
	while (n < 8 && rocemu_pd_alloc(f->e, &pds[n]) == 0)
		n++;
	assert_int_equal(n, f->e->caps.max_pd - 2);
	assert_int_equal(rocemu_pd_alloc(f->e, &pds[7]), -ENOMEM);
	for (i = 0; i < n; i++)
		assert_int_equal(rocemu_pd_free(pds[i]), 0);
}

static void test_reg_access_flags(void **state)
{
	struct fixture *f = *state;
	struct guarded g = guarded_new(page);
	struct rocemu_mr *mr;

	/* ibv_reg_mr(3): remote write or atomic needs local write. */
	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, 64, 0, IBV_ACCESS_REMOTE_WRITE, &mr), -EINVAL);
	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, 64, 0, IBV_ACCESS_REMOTE_ATOMIC, &mr),
			 -EINVAL);
	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, 64, 0,
				       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, &mr),
			 -EINVAL);
	/* Unknown bits, and ZERO_BASED, which is a window's bind flag. */
	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, 64, 0, 1u << 12, &mr), -EINVAL);
	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, 64, 0, IBV_ACCESS_ZERO_BASED, &mr), -EINVAL);
	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, 64, 0, 1u << 31, &mr), -EINVAL);
	/* Read-only rights and optional hints are fine. */
	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, 64, 0, IBV_ACCESS_REMOTE_READ, &mr), 0);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	assert_int_equal(
	    rocemu_mr_reg(f->pd, g.buf, 64, 0, ALL_ACCESS | IBV_ACCESS_RELAXED_ORDERING, &mr), 0);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	assert_int_equal(rocemu_mr_reg(NULL, g.buf, 64, 0, 0, &mr), -EINVAL);
	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, 64, 0, 0, NULL), -EINVAL);
	assert_int_equal(f->pd->refcnt, 0);
	guarded_free(&g);
}

static void test_reg_mapping_checked(void **state)
{
	struct fixture *f = *state;
	struct guarded g = guarded_new(page);
	struct rocemu_mr *mr;
	uint8_t *ro;

	/* One byte into either guard page is refused at registration. */
	assert_int_equal(rocemu_mr_reg(f->pd, g.buf - 1, 2, 0, 0, &mr), -EFAULT);
	assert_int_equal(rocemu_mr_reg(f->pd, g.buf + g.len - 1, 2, 0, 0, &mr), -EFAULT);
	assert_int_equal(rocemu_mr_reg(f->pd, NULL, 16, 0, 0, &mr), -EFAULT);
	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, g.len, 0, 0, &mr), 0);
	assert_int_equal(rocemu_mr_dereg(mr), 0);

	/* Read-only memory: readable region yes, writable region no. */
	ro = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(ro != MAP_FAILED);
	assert_int_equal(rocemu_mr_reg(f->pd, ro, page, 0, IBV_ACCESS_REMOTE_READ, &mr), 0);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	assert_int_equal(rocemu_mr_reg(f->pd, ro, page, 0, IBV_ACCESS_LOCAL_WRITE, &mr), -EFAULT);
	munmap(ro, page);
	/* Memory that was unmapped. */
	assert_int_equal(rocemu_mr_reg(f->pd, ro, page, 0, 0, &mr), -EFAULT);
	assert_int_equal(f->pd->refcnt, 0);
	guarded_free(&g);
}

/* The page probe used when /proc/self/maps cannot be read. */
static void test_range_probe(void **state)
{
	struct guarded g = guarded_new(3 * page);
	uint64_t b = (uintptr_t)g.buf;
	uint8_t *ro;

	(void)state;
	assert_int_equal(rocemu_host_range_probe(b, b + g.len - 1), 0);
	assert_int_equal(rocemu_host_range_probe(b + 5, b + 5), 0);
	assert_int_equal(rocemu_host_range_probe(b + page - 1, b + page), 0);
	assert_int_equal(rocemu_host_range_probe(b - 1, b + 10), -EFAULT);
	assert_int_equal(rocemu_host_range_probe(b + 10, b + g.len), -EFAULT);
	assert_int_equal(rocemu_host_range_probe(b - page, b - 1), -EFAULT);
	/* More pages than one call can carry. */
	size_t big = 1500 * page;
	uint8_t *m = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(m != MAP_FAILED);
	assert_int_equal(rocemu_host_range_probe((uintptr_t)m, (uintptr_t)m + big - 1), 0);
	assert_int_equal(mprotect(m + 1400 * page, page, PROT_NONE), 0);
	assert_int_equal(rocemu_host_range_probe((uintptr_t)m, (uintptr_t)m + big - 1), -EFAULT);
	munmap(m, big);
	/* Read-only passes: the probe only reads. */
	ro = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(ro != MAP_FAILED);
	assert_int_equal(rocemu_host_range_probe((uintptr_t)ro, (uintptr_t)ro + page - 1), 0);
	munmap(ro, page);
	guarded_free(&g);
}

static void test_reg_overflow(void **state)
{
	struct fixture *f = *state;
	struct guarded g = guarded_new(2 * page);
	struct rocemu_mr *mr;
	uint8_t *p;

	/* iova + length past 2^64 cannot be registered ... */
	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, 2 * page, UINT64_MAX - page, 0, &mr), -EINVAL);
	/* ... but a region ending exactly at 2^64 can. */
	assert_int_equal(
	    rocemu_mr_reg(f->pd, g.buf, 2 * page, 0 - (uint64_t)(2 * page), ALL_ACCESS, &mr), 0);
	uint32_t k = key_of(mr);
	uint64_t last = UINT64_MAX;

	assert_int_equal(rocemu_mem_translate(f->e->mem, f->pd, 0, k, true, last, 1,
					      ROCEMU_RIGHT_REMOTE_READ, &p),
			 ROCEMU_MEM_OK);
	assert_ptr_equal(p, g.buf + 2 * page - 1);
	/* iova + len wraps to a small number: out of bounds, not "inside". */
	assert_int_equal(rocemu_mem_translate(f->e->mem, f->pd, 0, k, true, last, 2,
					      ROCEMU_RIGHT_REMOTE_READ, &p),
			 ROCEMU_MEM_BOUNDS);
	assert_int_equal(rocemu_mem_translate(f->e->mem, f->pd, 0, k, true, 0 - (uint64_t)page,
					      UINT64_MAX, ROCEMU_RIGHT_REMOTE_READ, &p),
			 ROCEMU_MEM_BOUNDS);
	assert_int_equal(
	    rocemu_mem_translate(f->e->mem, f->pd, 0, k, true, 0, 1, ROCEMU_RIGHT_REMOTE_READ, &p),
	    ROCEMU_MEM_BOUNDS);
	assert_int_equal(rocemu_mr_dereg(mr), 0);

	/* A region with length up to 2^32 and beyond is just a number. */
	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, 2 * page, 1ull << 40, ALL_ACCESS, &mr), 0);
	k = key_of(mr);
	assert_int_equal(rocemu_mem_translate(f->e->mem, f->pd, 0, k, true, 1ull << 40,
					      (1ull << 32) + 1, ROCEMU_RIGHT_REMOTE_READ, &p),
			 ROCEMU_MEM_BOUNDS);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	guarded_free(&g);
}

/* Regions past 4 GiB: lengths and offsets are 64-bit all the way. */
static void test_region_over_4g(void **state)
{
	struct fixture *f = *state;
	const uint64_t len = (1ull << 32) + 2 * page;
	const uint64_t iova = 0x123400000000ull;
	uint8_t *big, data[4] = {1, 2, 3, 4}, out[4], *p;
	struct rocemu_mr *mr;
	uint32_t k;

	big = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		   -1, 0);
	if (big == MAP_FAILED)
		skip(); /* no 4 GiB of address space here */
	assert_int_equal(rocemu_mr_reg(f->pd, big, len, iova, ALL_ACCESS, &mr), 0);
	k = key_of(mr);
	assert_int_equal(rocemu_mem_translate(f->e->mem, f->pd, 0, k, true, iova + (1ull << 32) + 4,
					      4, ROCEMU_RIGHT_REMOTE_WRITE, &p),
			 ROCEMU_MEM_OK);
	assert_ptr_equal(p, big + (1ull << 32) + 4);
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd, 0, k, iova + len - 4, data, 4),
			 ROCEMU_MEM_OK);
	assert_int_equal(rocemu_mem_remote_read(f->e->mem, f->pd, 0, k, iova + len - 4, out, 4),
			 ROCEMU_MEM_OK);
	assert_memory_equal(out, data, 4);
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd, 0, k, iova + len - 3, data, 4),
			 ROCEMU_MEM_BOUNDS);
	assert_int_equal(rocemu_mem_translate(f->e->mem, f->pd, 0, k, true, iova, len,
					      ROCEMU_RIGHT_REMOTE_WRITE, &p),
			 ROCEMU_MEM_OK);
	assert_int_equal(rocemu_mem_translate(f->e->mem, f->pd, 0, k, true, iova, len + 1,
					      ROCEMU_RIGHT_REMOTE_WRITE, &p),
			 ROCEMU_MEM_BOUNDS);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	/* The device's max_mr_size is enforced. */
	f->e->caps.max_mr_size = page;
	assert_int_equal(rocemu_mr_reg(f->pd, big, page + 1, 0, 0, &mr), -EINVAL);
	assert_int_equal(rocemu_mr_reg(f->pd, big, page, 0, 0, &mr), 0);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	munmap(big, len);
}

/* xorshift64*: a fixed sequence, so failures reproduce. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

/*
 * The bounds check against a reference computed in 128 bits, over regions
 * and requests chosen to sit near 0, near 2^64 and near each other's ends.
 */
static void test_bounds_model(void **state)
{
	struct fixture *f = *state;
	struct guarded g = guarded_new(4 * page);
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	unsigned r, q, n_in = 0, n_out = 0, n_refused = 0;

	for (r = 0; r < 64; r++) {
		uint64_t length = rnd(&seed) % (4 * page + 1);
		uint64_t iova = rnd(&seed);
		struct rocemu_mr *mr;
		uint32_t k;

		switch (r % 4) {
		case 0:
			iova %= 4096;
			break;
		case 1:
			/* ends near 2^64: some just below, some wrapping past it */
			iova = UINT64_MAX - length + 1 + rnd(&seed) % 64 - 32;
			break;
		default:
			break;
		}
		if (length && iova > UINT64_MAX - (length - 1)) {
			assert_int_equal(rocemu_mr_reg(f->pd, g.buf, length, iova, 0, &mr),
					 -EINVAL);
			n_refused++;
			continue;
		}
		assert_int_equal(rocemu_mr_reg(f->pd, g.buf, length, iova, 0, &mr), 0);
		k = key_of(mr);
		for (q = 0; q < 2000; q++) {
			uint64_t qi = iova + (rnd(&seed) % (length + 32)) - 16;
			uint64_t mode = rnd(&seed) % 8, ql;

			/* Mostly small lengths; some just under 2^64, whose sum
			 * with the offset wraps to a small number; some random. */
			if (mode < 5)
				ql = rnd(&seed) % (length + 32);
			else if (mode < 7)
				ql = 0 - (rnd(&seed) % (length + 64));
			else
				ql = rnd(&seed);
			unsigned __int128 end = (unsigned __int128)qi + ql;
			unsigned __int128 rend = (unsigned __int128)iova + length;
			bool inside = qi >= iova && end <= rend;
			uint8_t *p = NULL;
			enum rocemu_mem_err err =
			    rocemu_mem_translate(f->e->mem, f->pd, 0, k, false, qi, ql, 0, &p);

			assert_int_equal(err, inside ? ROCEMU_MEM_OK : ROCEMU_MEM_BOUNDS);
			n_in += inside;
			n_out += !inside;
			if (inside)
				assert_ptr_equal(p, g.buf + (qi - iova));
		}
		assert_int_equal(rocemu_mr_dereg(mr), 0);
	}
	/* The sample really covers both answers and wrapping regions. */
	assert_true(n_in > 10000 && n_out > 10000 && n_refused > 0);
	guarded_free(&g);
}

static void test_bounds_both_ends(void **state)
{
	struct fixture *f = *state;
	struct guarded g = guarded_new(2 * page);
	const size_t off = 16, len = 2 * page - 32;
	const uint64_t iova = 0x10000;
	uint8_t data[64], *p;
	struct rocemu_mr *mr;
	uint32_t k;

	memset(data, 0x11, sizeof(data));
	assert_int_equal(rocemu_mr_reg(f->pd, g.buf + off, len, iova, ALL_ACCESS, &mr), 0);
	k = key_of(mr);
	/* One byte before the start, one byte past the end. */
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd, 0, k, iova - 1, data, 2),
			 ROCEMU_MEM_BOUNDS);
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd, 0, k, iova + len - 1, data, 2),
			 ROCEMU_MEM_BOUNDS);
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd, 0, k, iova + len, data, 1),
			 ROCEMU_MEM_BOUNDS);
	assert_int_equal(rocemu_mem_remote_read(f->e->mem, f->pd, 0, k, iova - 1, data, 1),
			 ROCEMU_MEM_BOUNDS);
	assert_int_equal(rocemu_mem_remote_read(f->e->mem, f->pd, 0, k, iova + len - 63, data, 64),
			 ROCEMU_MEM_BOUNDS);
	assert_outside_untouched(&g, 0, 0);
	/* Exactly the first and the last bytes are fine. */
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd, 0, k, iova, data, 1),
			 ROCEMU_MEM_OK);
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd, 0, k, iova + len - 1, data, 1),
			 ROCEMU_MEM_OK);
	assert_int_equal(g.buf[off], 0x11);
	assert_int_equal(g.buf[off + len - 1], 0x11);
	/* Zero bytes at the very end are in bounds; one past is not. */
	assert_int_equal(rocemu_mem_translate(f->e->mem, f->pd, 0, k, false, iova + len, 0,
					      ROCEMU_RIGHT_LOCAL_READ, &p),
			 ROCEMU_MEM_OK);
	assert_int_equal(rocemu_mem_translate(f->e->mem, f->pd, 0, k, false, iova + len + 1, 0,
					      ROCEMU_RIGHT_LOCAL_READ, &p),
			 ROCEMU_MEM_BOUNDS);
	/* The whole region in one go. */
	uint8_t *big = malloc(len);

	memset(big, 0x22, len);
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd, 0, k, iova, big, (uint32_t)len),
			 ROCEMU_MEM_OK);
	assert_outside_untouched(&g, off, len);
	free(big);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	guarded_free(&g);
}

static void test_wrong_pd(void **state)
{
	struct fixture *f = *state;
	struct guarded g = guarded_new(page);
	struct rocemu_mr *mr;
	uint8_t data[8] = {0}, *p;
	uint64_t orig;
	uint32_t k;
	struct ibv_sge sge;

	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, page, 0, ALL_ACCESS, &mr), 0);
	k = key_of(mr);
	sge = (struct ibv_sge){.addr = 0, .length = 8, .lkey = k};
	assert_int_equal(rocemu_mem_translate(f->e->mem, f->pd2, 0, k, false, 0, 8, 0, &p),
			 ROCEMU_MEM_BAD_PD);
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd2, 0, k, 0, data, 8),
			 ROCEMU_MEM_BAD_PD);
	assert_int_equal(rocemu_mem_remote_read(f->e->mem, f->pd2, 0, k, 0, data, 8),
			 ROCEMU_MEM_BAD_PD);
	assert_int_equal(rocemu_mem_atomic(f->e->mem, f->pd2, 0, k, 0, false, 0, 1, &orig),
			 ROCEMU_MEM_BAD_PD);
	assert_int_equal(rocemu_mem_scatter(f->e->mem, f->pd2, &sge, 1, 0, data, 8),
			 ROCEMU_MEM_BAD_PD);
	assert_int_equal(rocemu_mem_gather(f->e->mem, f->pd2, &sge, 1, 0, data, 8),
			 ROCEMU_MEM_BAD_PD);
	assert_int_equal(rocemu_mem_invalidate(f->e->mem, f->pd2, k, false, 0x11),
			 ROCEMU_MEM_BAD_PD);
	assert_outside_untouched(&g, 0, 0);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	guarded_free(&g);
}

/* Each right, missing alone, makes exactly the operation that needs it fail. */
static void test_missing_rights(void **state)
{
	struct fixture *f = *state;
	struct guarded g = guarded_new(page);
	static const unsigned rights[] = {IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_READ,
					  IBV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_ATOMIC};
	unsigned i;

	for (i = 0; i < 4; i++) {
		unsigned access = ALL_ACCESS & ~rights[i];
		uint8_t data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
		struct rocemu_mr *mr;
		enum rocemu_mem_err want;
		struct ibv_sge sge;
		uint64_t orig;
		uint32_t k;

		if (rights[i] == IBV_ACCESS_LOCAL_WRITE)
			access = IBV_ACCESS_REMOTE_READ; /* remote write/atomic need local write */
		assert_int_equal(rocemu_mr_reg(f->pd, g.buf, page, 0, access, &mr), 0);
		k = key_of(mr);
		sge = (struct ibv_sge){.addr = 0, .length = 8, .lkey = k};

		want = rights[i] == IBV_ACCESS_LOCAL_WRITE ? ROCEMU_MEM_ACCESS : ROCEMU_MEM_OK;
		assert_int_equal(rocemu_mem_scatter(f->e->mem, f->pd, &sge, 1, 0, data, 8), want);
		want = rights[i] == IBV_ACCESS_REMOTE_READ ? ROCEMU_MEM_ACCESS : ROCEMU_MEM_OK;
		assert_int_equal(rocemu_mem_remote_read(f->e->mem, f->pd, 0, k, 0, data, 8), want);
		want = (access & IBV_ACCESS_REMOTE_WRITE) ? ROCEMU_MEM_OK : ROCEMU_MEM_ACCESS;
		assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd, 0, k, 0, data, 8), want);
		want = (access & IBV_ACCESS_REMOTE_ATOMIC) ? ROCEMU_MEM_OK : ROCEMU_MEM_ACCESS;
		assert_int_equal(rocemu_mem_atomic(f->e->mem, f->pd, 0, k, 0, false, 0, 1, &orig),
				 want);
		/* Local read is always allowed. */
		assert_int_equal(rocemu_mem_gather(f->e->mem, f->pd, &sge, 1, 0, data, 8),
				 ROCEMU_MEM_OK);
		assert_int_equal(rocemu_mr_dereg(mr), 0);
		memset(g.buf, FILL, g.len);
	}
	guarded_free(&g);
}

static void test_stale_key_after_dereg(void **state)
{
	struct fixture *f = *state;
	struct guarded g = guarded_new(page);
	struct rocemu_mr *mr;
	uint8_t data[4] = {0}, *p;
	uint32_t k;

	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, page, 0, ALL_ACCESS, &mr), 0);
	k = key_of(mr);
	assert_int_not_equal(k, 0);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd, 0, k, 0, data, 4),
			 ROCEMU_MEM_BAD_KEY);
	assert_int_equal(rocemu_mem_translate(f->e->mem, f->pd, 0, k, false, 0, 4, 0, &p),
			 ROCEMU_MEM_BAD_KEY);
	assert_int_equal(rocemu_mem_translate(f->e->mem, f->pd, 0, 0, false, 0, 0, 0, &p),
			 ROCEMU_MEM_BAD_KEY);
	assert_int_equal(rocemu_mem_translate(f->e->mem, f->pd, 0, 0xffffffffu, false, 0, 0, 0, &p),
			 ROCEMU_MEM_BAD_KEY);
	assert_outside_untouched(&g, 0, 0);
	guarded_free(&g);
}

/* The same slot handed out again carries a new variant: old keys stay dead. */
static void test_stale_key_after_reuse(void **state)
{
	struct rocemu_engine *e = stub_engine_new(2);
	struct guarded g = guarded_new(page);
	struct rocemu_mr *a, *b, *c;
	struct rocemu_pd *pd;
	uint32_t first, seen[256];
	uint8_t *p;
	unsigned i;

	(void)state;
	assert_int_equal(rocemu_pd_alloc(e, &pd), 0);
	assert_int_equal(rocemu_mr_reg(pd, g.buf, 64, 0, 0, &a), 0);
	assert_int_equal(rocemu_mr_reg(pd, g.buf, 64, 0, 0, &b), 0);
	assert_int_equal(rocemu_mr_reg(pd, g.buf, 64, 0, 0, &c), -ENOMEM); /* max_mr 2 */
	first = key_of(a);
	assert_int_not_equal(first, key_of(b));
	/* Reuse a's slot 254 times: every key differs from all before it. */
	seen[0] = first;
	for (i = 1; i < 255; i++) {
		assert_int_equal(rocemu_mr_dereg(a), 0);
		assert_int_equal(rocemu_mr_reg(pd, g.buf, 64, 0, 0, &a), 0);
		seen[i] = key_of(a);
		assert_int_equal(seen[i] >> 8, first >> 8); /* same slot */
		for (unsigned j = 0; j < i; j++) {
			assert_int_not_equal(seen[i], seen[j]);
			assert_int_equal(
			    rocemu_mem_translate(e->mem, pd, 0, seen[j], false, 0, 1, 0, &p),
			    ROCEMU_MEM_BAD_KEY);
		}
		assert_int_equal(rocemu_mem_translate(e->mem, pd, 0, seen[i], false, 0, 1, 0, &p),
				 ROCEMU_MEM_OK);
	}
	assert_int_equal(rocemu_mr_dereg(a), 0);
	assert_int_equal(rocemu_mr_dereg(b), 0);
	assert_int_equal(rocemu_pd_free(pd), 0);
	stub_engine_free(e);
	guarded_free(&g);
}

/* The first keys of 64 slots, as a fresh engine hands them out. */
static void first_keys(uint32_t keys[64])
{
	struct rocemu_engine *e = stub_engine_new(64);
	struct guarded g = guarded_new(page);
	struct rocemu_mr *mr[64];
	struct rocemu_pd *pd;

	assert_int_equal(rocemu_pd_alloc(e, &pd), 0);
	for (unsigned i = 0; i < 64; i++) {
		assert_int_equal(rocemu_mr_reg(pd, g.buf, 64, 0, 0, &mr[i]), 0);
		keys[i] = key_of(mr[i]);
		assert_int_not_equal(keys[i] & 0xff, 0);
	}
	for (unsigned i = 0; i < 64; i++)
		assert_int_equal(rocemu_mr_dereg(mr[i]), 0);
	assert_int_equal(rocemu_pd_free(pd), 0);
	stub_engine_free(e);
	guarded_free(&g);
}

/*
 * Issue 18.4: a key's variant byte is random, per slot and per process. It
 * was 1 for the first key of every slot, so a peer knowing (or counting) the
 * slots of a fresh process knew its keys.
 */
static void test_key_variants_random(void **state)
{
	uint32_t a[64], b[64];
	unsigned same_variant = 0, same_key = 0;

	(void)state;
	first_keys(a);
	first_keys(b);
	for (unsigned i = 1; i < 64; i++)
		same_variant += (a[i] & 0xff) == (a[0] & 0xff);
	for (unsigned i = 0; i < 64; i++)
		same_key += a[i] == b[i];
	/* chance of failing with random variants: about 64/255 equal, 64/255 alike */
	assert_true(same_variant < 16);
	assert_true(same_key < 16);
}

static void test_zero_length_region(void **state)
{
	struct fixture *f = *state;
	struct guarded g = guarded_new(page);
	struct rocemu_mr *mr, *mr0;
	uint8_t data[1] = {7}, *p;
	struct ibv_sge sge;
	uint32_t k;

	assert_int_equal(rocemu_mr_reg(f->pd, g.buf + 8, 0, 0x1000, ALL_ACCESS, &mr), 0);
	k = key_of(mr);
	assert_int_equal(rocemu_mem_translate(f->e->mem, f->pd, 0, k, true, 0x1000, 0,
					      ROCEMU_RIGHT_REMOTE_WRITE, &p),
			 ROCEMU_MEM_OK);
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd, 0, k, 0x1000, data, 0),
			 ROCEMU_MEM_OK);
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd, 0, k, 0x1000, data, 1),
			 ROCEMU_MEM_BOUNDS);
	assert_int_equal(rocemu_mem_remote_read(f->e->mem, f->pd, 0, k, 0xfff, data, 0),
			 ROCEMU_MEM_BOUNDS);
	sge = (struct ibv_sge){.addr = 0x1000, .length = 1, .lkey = k};
	assert_int_equal(rocemu_mem_scatter(f->e->mem, f->pd, &sge, 1, 0, data, 1),
			 ROCEMU_MEM_BOUNDS);
	/* A NULL, zero-length region is fine too (nothing to map). */
	assert_int_equal(rocemu_mr_reg(f->pd, NULL, 0, 0, IBV_ACCESS_LOCAL_WRITE, &mr0), 0);
	sge = (struct ibv_sge){.addr = 0, .length = 0, .lkey = key_of(mr0)};
	assert_int_equal(rocemu_mem_translate(f->e->mem, f->pd, 0, sge.lkey, false, 0, 0,
					      ROCEMU_RIGHT_LOCAL_WRITE, &p),
			 ROCEMU_MEM_OK);
	assert_null(p);
	assert_int_equal(rocemu_mem_scatter(f->e->mem, f->pd, &sge, 1, 0, data, 0), ROCEMU_MEM_OK);
	sge.length = 1;
	assert_int_equal(rocemu_mem_scatter(f->e->mem, f->pd, &sge, 1, 0, data, 1),
			 ROCEMU_MEM_BOUNDS);
	assert_int_equal(rocemu_mr_dereg(mr0), 0);
	assert_outside_untouched(&g, 0, 0);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	guarded_free(&g);
}

static void test_gather_scatter(void **state)
{
	struct fixture *f = *state;
	struct guarded g = guarded_new(page);
	uint8_t src[100], dst[100];
	struct rocemu_mr *mr, *ro;
	struct ibv_sge sg[4];
	uint32_t k, kro;
	unsigned i;

	for (i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)i;
	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, 512, 0x5000, IBV_ACCESS_LOCAL_WRITE, &mr), 0);
	assert_int_equal(rocemu_mr_reg(f->pd, g.buf + 512, 512, 0x9000, 0, &ro), 0);
	k = key_of(mr);
	kro = key_of(ro);
	/* Three pieces with gaps between them, and an empty SGE. */
	sg[0] = (struct ibv_sge){.addr = 0x5000, .length = 10, .lkey = k};
	sg[1] = (struct ibv_sge){.addr = 0x5100, .length = 0, .lkey = 0xdead};
	sg[2] = (struct ibv_sge){.addr = 0x5020, .length = 30, .lkey = k};
	sg[3] = (struct ibv_sge){.addr = 0x5080, .length = 60, .lkey = k};
	/* 40 bytes from offset 5: the tail of sg0, all of sg2, 5 bytes of sg3. */
	assert_int_equal(rocemu_mem_scatter(f->e->mem, f->pd, sg, 4, 5, src, 40), ROCEMU_MEM_OK);
	assert_memory_equal(g.buf + 5, src, 5);
	assert_memory_equal(g.buf + 0x20, src + 5, 30);
	assert_memory_equal(g.buf + 0x80, src + 35, 5);
	assert_int_equal(g.buf[0x85], FILL);
	assert_int_equal(g.buf[4], FILL);
	memset(dst, 0, sizeof(dst));
	assert_int_equal(rocemu_mem_gather(f->e->mem, f->pd, sg, 4, 5, dst, 40), ROCEMU_MEM_OK);
	assert_memory_equal(dst, src, 40);
	/* More than the list holds. */
	assert_int_equal(rocemu_mem_gather(f->e->mem, f->pd, sg, 4, 0, dst, 101),
			 ROCEMU_MEM_BOUNDS);
	assert_int_equal(rocemu_mem_gather(f->e->mem, f->pd, sg, 4, 100, dst, 1),
			 ROCEMU_MEM_BOUNDS);
	/* Scatter into a region without local write. */
	sg[2].lkey = kro;
	sg[2].addr = 0x9000;
	assert_int_equal(rocemu_mem_scatter(f->e->mem, f->pd, sg, 4, 0, src, 40),
			 ROCEMU_MEM_ACCESS);
	assert_int_equal(g.buf[512], FILL);
	/* An SGE whose own range wraps 64 bits. */
	sg[0] = (struct ibv_sge){.addr = UINT64_MAX - 3, .length = 16, .lkey = k};
	assert_int_equal(rocemu_mem_gather(f->e->mem, f->pd, sg, 1, 8, dst, 4), ROCEMU_MEM_BOUNDS);
	assert_int_equal(rocemu_mem_gather(f->e->mem, f->pd, NULL, 0, 0, dst, 0), ROCEMU_MEM_OK);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	assert_int_equal(rocemu_mr_dereg(ro), 0);
	guarded_free(&g);
}

static void test_implicit_odp(void **state)
{
	struct fixture *f = *state;
	struct guarded g = guarded_new(page);
	uint8_t data[16], out[16];
	struct rocemu_mr_info info;
	struct rocemu_mr *mr;
	uint64_t orig, counter = 41;
	uint8_t *gone;
	uint32_t k;

	memset(data, 0x3c, sizeof(data));
	/* Implicit ODP needs ON_DEMAND (else it is a regular region, and the
	 * address space is not all mapped) and iova 0. */
	assert_int_equal(rocemu_mr_reg(f->pd, NULL, SIZE_MAX, 0, ALL_ACCESS, &mr), -EFAULT);
	assert_int_equal(
	    rocemu_mr_reg(f->pd, NULL, SIZE_MAX, 4096, ALL_ACCESS | IBV_ACCESS_ON_DEMAND, &mr),
	    -EINVAL);
	assert_int_equal(
	    rocemu_mr_reg(f->pd, NULL, SIZE_MAX, 0, ALL_ACCESS | IBV_ACCESS_ON_DEMAND, &mr), 0);
	rocemu_mr_info(mr, &info);
	assert_int_equal(info.length, SIZE_MAX);
	assert_null(info.addr);
	k = info.rkey;

	/* Mapped memory works, addressed by its own virtual address. */
	assert_int_equal(
	    rocemu_mem_remote_write(f->e->mem, f->pd, 0, k, (uintptr_t)g.buf + 8, data, 16),
	    ROCEMU_MEM_OK);
	assert_memory_equal(g.buf + 8, data, 16);
	assert_int_equal(
	    rocemu_mem_remote_read(f->e->mem, f->pd, 0, k, (uintptr_t)g.buf + 8, out, 16),
	    ROCEMU_MEM_OK);
	assert_memory_equal(out, data, 16);
	assert_int_equal(
	    rocemu_mem_atomic(f->e->mem, f->pd, 0, k, (uintptr_t)&counter, false, 0, 1, &orig),
	    ROCEMU_MEM_OK);
	assert_int_equal(orig, 41);
	assert_int_equal(counter, 42);

	/* Guard pages and unmapped memory fault softly, in every direction. */
	assert_int_equal(
	    rocemu_mem_remote_read(f->e->mem, f->pd, 0, k, (uintptr_t)g.buf - 1, out, 2),
	    ROCEMU_MEM_FAULT);
	assert_int_equal(
	    rocemu_mem_remote_write(f->e->mem, f->pd, 0, k, (uintptr_t)g.buf + g.len, data, 1),
	    ROCEMU_MEM_FAULT);
	gone = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(gone != MAP_FAILED);
	munmap(gone, page);
	assert_int_equal(rocemu_mem_remote_read(f->e->mem, f->pd, 0, k, (uintptr_t)gone, out, 8),
			 ROCEMU_MEM_FAULT);
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd, 0, k, (uintptr_t)gone, data, 8),
			 ROCEMU_MEM_FAULT);
	assert_int_equal(
	    rocemu_mem_atomic(f->e->mem, f->pd, 0, k, (uintptr_t)gone, true, 0, 1, &orig),
	    ROCEMU_MEM_FAULT);
	assert_int_equal(rocemu_mem_remote_read(f->e->mem, f->pd, 0, k, 8, out, 8),
			 ROCEMU_MEM_FAULT);

	struct ibv_sge sge = {.addr = (uintptr_t)gone, .length = 8, .lkey = k};

	assert_int_equal(rocemu_mem_gather(f->e->mem, f->pd, &sge, 1, 0, out, 8), ROCEMU_MEM_FAULT);
	assert_int_equal(rocemu_mem_scatter(f->e->mem, f->pd, &sge, 1, 0, data, 8),
			 ROCEMU_MEM_FAULT);
	/* Writes to read-only memory fault too, and leave it alone. */
	uint8_t *ro = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(ro != MAP_FAILED);
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd, 0, k, (uintptr_t)ro, data, 8),
			 ROCEMU_MEM_FAULT);
	assert_int_equal(
	    rocemu_mem_atomic(f->e->mem, f->pd, 0, k, (uintptr_t)ro, false, 0, 1, &orig),
	    ROCEMU_MEM_FAULT);
	assert_int_equal(ro[0], 0);
	munmap(ro, page);
	assert_outside_untouched(&g, 8, 16);
	/* advise: mapped fine, unmapped EFAULT. */
	assert_int_equal(rocemu_mr_advise(f->pd, 0, &sge, 1), -EFAULT);
	sge.addr = (uintptr_t)g.buf;
	assert_int_equal(rocemu_mr_advise(f->pd, 0, &sge, 1), 0);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	guarded_free(&g);
}

/* An explicit ODP region is not checked at registration; its pages may go away. */
static void test_explicit_odp_unmapped(void **state)
{
	struct fixture *f = *state;
	uint8_t *buf =
	    mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t out[8];
	struct rocemu_mr *mr;
	uint32_t k;

	assert_true(buf != MAP_FAILED);
	buf[page] = 9;
	assert_int_equal(
	    rocemu_mr_reg(f->pd, buf, 2 * page, 0, ALL_ACCESS | IBV_ACCESS_ON_DEMAND, &mr), 0);
	k = key_of(mr);
	munmap(buf, page);
	assert_int_equal(rocemu_mem_remote_read(f->e->mem, f->pd, 0, k, 0, out, 8),
			 ROCEMU_MEM_FAULT);
	assert_int_equal(rocemu_mem_remote_read(f->e->mem, f->pd, 0, k, page, out, 1),
			 ROCEMU_MEM_OK);
	assert_int_equal(out[0], 9);
	/* Straddling the hole: fault (the mapped half may have been copied). */
	assert_int_equal(rocemu_mem_remote_read(f->e->mem, f->pd, 0, k, page - 4, out, 8),
			 ROCEMU_MEM_FAULT);
	munmap(buf + page, page);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
}

/*
 * Issue 18.7: a regular region freed (unmapped) while still registered.
 * rocemu pins nothing; every access to it fails with ROCEMU_MEM_FAULT
 * (a remote access error on the wire) instead of crashing the thread.
 */
static void test_freed_region_faults(void **state)
{
	struct fixture *f = *state;
	uint8_t *buf =
	    mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t data[64] = {1, 2, 3};
	struct rocemu_mr *mr;
	struct ibv_sge sge;
	uint32_t k, crc = 0;
	uint64_t orig;

	assert_true(buf != MAP_FAILED);
	assert_int_equal(rocemu_mr_reg(f->pd, buf, 2 * page, 0, ALL_ACCESS, &mr), 0);
	k = key_of(mr);
	sge = (struct ibv_sge){.addr = 0, .length = 64, .lkey = k};
	assert_int_equal(munmap(buf, 2 * page), 0);
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd, 0, k, 0, data, 64),
			 ROCEMU_MEM_FAULT);
	assert_int_equal(rocemu_mem_remote_read(f->e->mem, f->pd, 0, k, 8, data, 64),
			 ROCEMU_MEM_FAULT);
	assert_int_equal(rocemu_mem_remote_read_crc(f->e->mem, f->pd, 0, k, 8, data, 64, &crc),
			 ROCEMU_MEM_FAULT);
	assert_int_equal(rocemu_mem_atomic(f->e->mem, f->pd, 0, k, 0, false, 0, 1, &orig),
			 ROCEMU_MEM_FAULT);
	assert_int_equal(rocemu_mem_atomic(f->e->mem, f->pd, 0, k, 8, true, 0, 1, &orig),
			 ROCEMU_MEM_FAULT);
	assert_int_equal(rocemu_mem_scatter(f->e->mem, f->pd, &sge, 1, 0, data, 64),
			 ROCEMU_MEM_FAULT);
	assert_int_equal(rocemu_mem_gather(f->e->mem, f->pd, &sge, 1, 0, data, 64),
			 ROCEMU_MEM_FAULT);
	assert_int_equal(rocemu_mem_gather_crc(f->e->mem, f->pd, &sge, 1, 0, data, 64, &crc),
			 ROCEMU_MEM_FAULT);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
}

/* Issue 18.8: ODP atomics do not parse /proc/self/maps (~21 us each, under
 * the engine lock); an unmapped or read-only target still faults cleanly. */
static void test_odp_atomics_without_maps(void **state)
{
	struct fixture *f = *state;
	uint8_t *buf =
	    mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct rocemu_mr *mr;
	uint64_t orig, reads;
	uint32_t k;

	assert_true(buf != MAP_FAILED);
	assert_int_equal(
	    rocemu_mr_reg(f->pd, buf, 2 * page, 0, ALL_ACCESS | IBV_ACCESS_ON_DEMAND, &mr), 0);
	k = key_of(mr);
	reads = rocemu_host_maps_reads();
	for (int i = 0; i < 100; i++)
		assert_int_equal(rocemu_mem_atomic(f->e->mem, f->pd, 0, k, 16, false, 0, 1, &orig),
				 ROCEMU_MEM_OK);
	assert_int_equal(orig, 99);
	assert_int_equal(rocemu_host_maps_reads(), reads);
	assert_int_equal(mprotect(buf + page, page, PROT_READ), 0);
	assert_int_equal(rocemu_mem_atomic(f->e->mem, f->pd, 0, k, page, false, 0, 1, &orig),
			 ROCEMU_MEM_FAULT);
	assert_int_equal(munmap(buf, page), 0);
	assert_int_equal(rocemu_mem_atomic(f->e->mem, f->pd, 0, k, 16, true, 0, 1, &orig),
			 ROCEMU_MEM_FAULT);
	munmap(buf + page, page);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
}

static void test_atomics(void **state)
{
	struct fixture *f = *state;
	struct guarded g = guarded_new(page);
	struct rocemu_mr *mr;
	uint64_t *word = (uint64_t *)(void *)g.buf, orig;
	const uint64_t iova = 0x7000;
	uint32_t k;

	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, 64, iova, ALL_ACCESS, &mr), 0);
	k = key_of(mr);
	word[0] = 100;
	assert_int_equal(rocemu_mem_atomic(f->e->mem, f->pd, 0, k, iova, false, 0, 5, &orig),
			 ROCEMU_MEM_OK);
	assert_int_equal(orig, 100);
	assert_int_equal(word[0], 105);
	/* Compare-and-swap: mismatch leaves memory, returns the current value. */
	assert_int_equal(rocemu_mem_atomic(f->e->mem, f->pd, 0, k, iova, true, 7, 1, &orig),
			 ROCEMU_MEM_OK);
	assert_int_equal(orig, 105);
	assert_int_equal(word[0], 105);
	assert_int_equal(
	    rocemu_mem_atomic(f->e->mem, f->pd, 0, k, iova, true, 105, 0xabcdef, &orig),
	    ROCEMU_MEM_OK);
	assert_int_equal(orig, 105);
	assert_int_equal(word[0], 0xabcdef);
	/* Fetch-add wraps modulo 2^64. */
	word[1] = UINT64_MAX;
	assert_int_equal(rocemu_mem_atomic(f->e->mem, f->pd, 0, k, iova + 8, false, 0, 2, &orig),
			 ROCEMU_MEM_OK);
	assert_int_equal(word[1], 1);
	/* Alignment, and the last word must fit entirely. */
	for (unsigned off = 1; off < 8; off++)
		assert_int_equal(
		    rocemu_mem_atomic(f->e->mem, f->pd, 0, k, iova + off, false, 0, 1, &orig),
		    ROCEMU_MEM_ALIGN);
	assert_int_equal(rocemu_mem_atomic(f->e->mem, f->pd, 0, k, iova + 56, false, 0, 1, &orig),
			 ROCEMU_MEM_OK);
	assert_int_equal(rocemu_mem_atomic(f->e->mem, f->pd, 0, k, iova + 64, false, 0, 1, &orig),
			 ROCEMU_MEM_BOUNDS);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	/* An aligned iova mapped onto a misaligned host address. */
	assert_int_equal(rocemu_mr_reg(f->pd, g.buf + 4, 16, iova, ALL_ACCESS, &mr), 0);
	assert_int_equal(
	    rocemu_mem_atomic(f->e->mem, f->pd, 0, key_of(mr), iova, false, 0, 1, &orig),
	    ROCEMU_MEM_ALIGN);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	guarded_free(&g);
}

/* ATOMIC WRITE (annex A19): 8 bytes as they came, one store, REMOTE_WRITE
 * right, naturally aligned (iova and host address), inside the region. */
static void test_atomic_write(void **state)
{
	struct fixture *f = *state;
	struct guarded g = guarded_new(page);
	const uint8_t bytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	const uint64_t iova = 0x9000;
	struct rocemu_mr *mr;
	uint32_t k;

	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, 64, iova, ALL_ACCESS, &mr), 0);
	k = key_of(mr);
	assert_int_equal(rocemu_mem_atomic_write(f->e->mem, f->pd, 0, k, iova + 8, bytes),
			 ROCEMU_MEM_OK);
	assert_memory_equal(g.buf + 8, bytes, 8);
	assert_outside_untouched(&g, 8, 8);
	for (unsigned off = 1; off < 8; off++)
		assert_int_equal(rocemu_mem_atomic_write(f->e->mem, f->pd, 0, k, iova + off, bytes),
				 ROCEMU_MEM_ALIGN);
	assert_int_equal(rocemu_mem_atomic_write(f->e->mem, f->pd, 0, k, iova + 56, bytes),
			 ROCEMU_MEM_OK);
	assert_int_equal(rocemu_mem_atomic_write(f->e->mem, f->pd, 0, k, iova + 64, bytes),
			 ROCEMU_MEM_BOUNDS);
	assert_int_equal(rocemu_mem_atomic_write(f->e->mem, f->pd2, 0, k, iova, bytes),
			 ROCEMU_MEM_BAD_PD);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	memset(g.buf, FILL, g.len);

	/* REMOTE_ATOMIC alone is not enough: it is a write. */
	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, 64, iova,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC, &mr),
			 0);
	assert_int_equal(rocemu_mem_atomic_write(f->e->mem, f->pd, 0, key_of(mr), iova, bytes),
			 ROCEMU_MEM_ACCESS);
	assert_outside_untouched(&g, 0, 0);
	assert_int_equal(rocemu_mr_dereg(mr), 0);

	/* An aligned iova on a misaligned host address. */
	assert_int_equal(rocemu_mr_reg(f->pd, g.buf + 4, 16, iova, ALL_ACCESS, &mr), 0);
	assert_int_equal(rocemu_mem_atomic_write(f->e->mem, f->pd, 0, key_of(mr), iova, bytes),
			 ROCEMU_MEM_ALIGN);
	assert_outside_untouched(&g, 0, 0);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	guarded_free(&g);
}

/* FLUSH (annex A19): each placement type needs its own right; a range must lie
 * inside the region, the whole-region selectivity ignores the range; a
 * persistent FLUSH of memory that is gone is a fault, not a crash. */
static void test_flush(void **state)
{
	struct fixture *f = *state;
	const unsigned g_right = ROCEMU_ACCESS_FLUSH_GLOBAL,
		       p_right = ROCEMU_ACCESS_FLUSH_PERSISTENT;
	const unsigned both = ROCEMU_FLUSH_GLOBAL | ROCEMU_FLUSH_PERSISTENT;
	struct guarded g = guarded_new(2 * page);
	struct rocemu_mr *mr;
	uint8_t *map;
	uint32_t k;

	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, page, 0, ALL_ACCESS | g_right, &mr), 0);
	k = key_of(mr);
	assert_int_equal(
	    rocemu_mem_flush(f->e->mem, f->pd, 0, k, false, 16, 64, ROCEMU_FLUSH_GLOBAL),
	    ROCEMU_MEM_OK);
	assert_int_equal(
	    rocemu_mem_flush(f->e->mem, f->pd, 0, k, false, 16, 64, ROCEMU_FLUSH_PERSISTENT),
	    ROCEMU_MEM_ACCESS);
	assert_int_equal(rocemu_mem_flush(f->e->mem, f->pd, 0, k, false, 16, 64, both),
			 ROCEMU_MEM_ACCESS);
	assert_int_equal(
	    rocemu_mem_flush(f->e->mem, f->pd, 0, k, false, page - 8, 16, ROCEMU_FLUSH_GLOBAL),
	    ROCEMU_MEM_BOUNDS);
	assert_int_equal(
	    rocemu_mem_flush(f->e->mem, f->pd, 0, k, true, page - 8, 1u << 30, ROCEMU_FLUSH_GLOBAL),
	    ROCEMU_MEM_OK);
	assert_int_equal(
	    rocemu_mem_flush(f->e->mem, f->pd2, 0, k, false, 0, 8, ROCEMU_FLUSH_GLOBAL),
	    ROCEMU_MEM_BAD_PD);
	assert_int_equal(
	    rocemu_mem_flush(f->e->mem, f->pd, 0, k + 1, true, 0, 8, ROCEMU_FLUSH_GLOBAL),
	    ROCEMU_MEM_BAD_KEY);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, page, 0, ALL_ACCESS | p_right, &mr), 0);
	k = key_of(mr);
	assert_int_equal(rocemu_mem_flush(f->e->mem, f->pd, 0, k, false, 0, 8, ROCEMU_FLUSH_GLOBAL),
			 ROCEMU_MEM_ACCESS);
	assert_int_equal(
	    rocemu_mem_flush(f->e->mem, f->pd, 0, k, false, 8, 100, ROCEMU_FLUSH_PERSISTENT),
	    ROCEMU_MEM_OK);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	assert_outside_untouched(&g, 0, 0);
	guarded_free(&g);

	/* Persistence writes back with msync: memory unmapped behind the
	 * region's back is a fault; global visibility touches nothing. */
	map = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(map != MAP_FAILED);
	assert_int_equal(rocemu_mr_reg(f->pd, map, page, 0, ALL_ACCESS | g_right | p_right, &mr),
			 0);
	k = key_of(mr);
	assert_int_equal(munmap(map, page), 0);
	assert_int_equal(
	    rocemu_mem_flush(f->e->mem, f->pd, 0, k, true, 0, 0, ROCEMU_FLUSH_PERSISTENT),
	    ROCEMU_MEM_FAULT);
	assert_int_equal(rocemu_mem_flush(f->e->mem, f->pd, 0, k, true, 0, 0, ROCEMU_FLUSH_GLOBAL),
			 ROCEMU_MEM_OK);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
}

#define ATOMIC_THREADS 4
#define ATOMIC_ROUNDS  20000

struct atomic_job {
	struct rocemu_engine *e;
	struct rocemu_pd *pd;
	uint32_t key;
	uint64_t iova;
	bool cas;
	int failures;
};

/* Fetch-add 1, or the same done by compare-and-swap loops. */
static void *atomic_worker(void *arg)
{
	struct atomic_job *j = arg;
	uint64_t orig, seen = 0;

	for (unsigned i = 0; i < ATOMIC_ROUNDS; i++) {
		if (!j->cas) {
			j->failures += rocemu_mem_atomic(j->e->mem, j->pd, 0, j->key, j->iova,
							 false, 0, 1, &orig) != ROCEMU_MEM_OK;
			continue;
		}
		for (;;) {
			if (rocemu_mem_atomic(j->e->mem, j->pd, 0, j->key, j->iova, true, seen,
					      seen + 1, &orig) != ROCEMU_MEM_OK) {
				j->failures++;
				break;
			}
			if (orig == seen)
				break;
			seen = orig;
		}
	}
	return NULL;
}

static void test_atomics_concurrent(void **state)
{
	struct fixture *f = *state;
	struct guarded g = guarded_new(page);
	struct atomic_job jobs[ATOMIC_THREADS];
	pthread_t th[ATOMIC_THREADS];
	uint64_t *word = (uint64_t *)(void *)(g.buf + 64);
	struct rocemu_mr *mr;
	unsigned i;

	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, page, 0, ALL_ACCESS, &mr), 0);
	*word = 0;
	for (i = 0; i < ATOMIC_THREADS; i++) {
		jobs[i] = (struct atomic_job){
		    .e = f->e, .pd = f->pd, .key = key_of(mr), .iova = 64, .cas = i % 2};
		assert_int_equal(pthread_create(&th[i], NULL, atomic_worker, &jobs[i]), 0);
	}
	/* The CPU adds too, as an application thread would. */
	for (i = 0; i < ATOMIC_ROUNDS; i++)
		__atomic_fetch_add(word, 1, __ATOMIC_SEQ_CST);
	for (i = 0; i < ATOMIC_THREADS; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(jobs[i].failures, 0);
	}
	assert_int_equal(*word, (uint64_t)(ATOMIC_THREADS + 1) * ATOMIC_ROUNDS);
	assert_outside_untouched(&g, 64, 8);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	guarded_free(&g);
}

static void test_rereg(void **state)
{
	struct fixture *f = *state;
	struct guarded g = guarded_new(2 * page);
	struct rocemu_mr_info info;
	struct rocemu_mr *mr;
	uint8_t data[8] = {0}, *p;
	uint32_t k0, k1, k2;

	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, 64, 0x100, IBV_ACCESS_LOCAL_WRITE, &mr), 0);
	k0 = key_of(mr);
	/* Flags: none, or unknown bits. */
	assert_int_equal(rocemu_mr_rereg(mr, 0, NULL, NULL, 0, 0, 0), -EINVAL);
	assert_int_equal(rocemu_mr_rereg(mr, IBV_REREG_MR_FLAGS_SUPPORTED + 1, NULL, NULL, 0, 0, 0),
			 -EINVAL);
	/* A result ibv_reg_mr would refuse: nothing changes, the key still works. */
	assert_int_equal(rocemu_mr_rereg(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, 0,
					 IBV_ACCESS_REMOTE_WRITE),
			 -EINVAL);
	assert_int_equal(rocemu_mr_rereg(mr, IBV_REREG_MR_CHANGE_PD, NULL, NULL, 0, 0, 0), -EINVAL);
	assert_int_equal(
	    rocemu_mr_rereg(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, g.buf - 8, 64, 0x100, 0),
	    -EFAULT);
	assert_int_equal(key_of(mr), k0);
	assert_int_equal(rocemu_mem_translate(f->e->mem, f->pd, 0, k0, false, 0x100, 64,
					      ROCEMU_RIGHT_LOCAL_WRITE, &p),
			 ROCEMU_MEM_OK);
	assert_ptr_equal(p, g.buf);

	/* Access: the key stays and carries the new rights, both ways. */
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd, 0, k0, 0x100, data, 8),
			 ROCEMU_MEM_ACCESS);
	assert_int_equal(rocemu_mr_rereg(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, 0,
					 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
			 0);
	k1 = key_of(mr);
	assert_int_equal(k1, k0);
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd, 0, k1, 0x100, data, 8),
			 ROCEMU_MEM_OK);
	assert_int_equal(rocemu_mr_rereg(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, 0,
					 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ),
			 0);
	assert_int_equal(key_of(mr), k0);
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd, 0, k0, 0x100, data, 8),
			 ROCEMU_MEM_ACCESS);
	assert_int_equal(rocemu_mr_rereg(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, 0,
					 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
			 0);

	/* PD: the reference moves, the key stays and answers the new PD only. */
	assert_int_equal(rocemu_mr_rereg(mr, IBV_REREG_MR_CHANGE_PD, f->pd2, NULL, 0, 0, 0), 0);
	k2 = key_of(mr);
	assert_int_equal(k2, k0);
	assert_int_equal(f->pd->refcnt, 0);
	assert_int_equal(f->pd2->refcnt, 1);
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd, 0, k2, 0x100, data, 8),
			 ROCEMU_MEM_BAD_PD);
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd2, 0, k2, 0x100, data, 8),
			 ROCEMU_MEM_OK);

	/* Translation: new bounds, the rest kept; a new key, the old one dead
	 * (what was in flight through it cannot reach the new memory). */
	assert_int_equal(rocemu_mr_rereg(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, g.buf + page,
					 page, 0x8000, 0),
			 0);
	assert_int_not_equal(key_of(mr), k0);
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd2, 0, k0, 0x8000, data, 8),
			 ROCEMU_MEM_BAD_KEY);
	rocemu_mr_info(mr, &info);
	assert_ptr_equal(info.addr, g.buf + page);
	assert_int_equal(info.length, page);
	assert_int_equal(info.iova, 0x8000);
	assert_int_equal(info.access, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd2, 0, info.rkey, 0x100, data, 8),
			 ROCEMU_MEM_BOUNDS);
	assert_int_equal(rocemu_mem_translate(f->e->mem, f->pd2, 0, info.rkey, true, 0x8000, page,
					      ROCEMU_RIGHT_REMOTE_WRITE, &p),
			 ROCEMU_MEM_OK);
	assert_ptr_equal(p, g.buf + page);

	/* All three at once; then back to a read-only mapping with write: EFAULT. */
	assert_int_equal(rocemu_mr_rereg(mr,
					 IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD |
					     IBV_REREG_MR_CHANGE_ACCESS,
					 f->pd, g.buf, 16, 0, IBV_ACCESS_REMOTE_READ),
			 0);
	assert_int_equal(f->pd->refcnt, 1);
	assert_int_equal(f->pd2->refcnt, 0);
	assert_int_equal(mprotect(g.buf, page, PROT_READ), 0);
	assert_int_equal(rocemu_mr_rereg(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, 0,
					 IBV_ACCESS_LOCAL_WRITE),
			 -EFAULT);
	assert_int_equal(mprotect(g.buf, page, PROT_READ | PROT_WRITE), 0);
	/* An invalidated region comes back valid after rereg. */
	k0 = key_of(mr);
	assert_int_equal(rocemu_mem_invalidate(f->e->mem, f->pd, k0, false, 0x11), ROCEMU_MEM_OK);
	assert_int_equal(rocemu_mr_rereg(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, 0, 0), 0);
	assert_int_equal(rocemu_mem_translate(f->e->mem, f->pd, 0, key_of(mr), false, 0, 16, 0, &p),
			 ROCEMU_MEM_OK);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	guarded_free(&g);
}

static void test_invalidate(void **state)
{
	struct fixture *f = *state;
	struct guarded g = guarded_new(page);
	struct rocemu_mr *mr;
	uint8_t data[8] = {0};
	uint32_t k;

	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, 64, 0, ALL_ACCESS, &mr), 0);
	k = key_of(mr);
	assert_int_equal(rocemu_mem_invalidate(f->e->mem, f->pd, k + 1, false, 0x11),
			 ROCEMU_MEM_BAD_KEY);
	/* A peer's SEND with Invalidate may not invalidate a registered region
	 * (only type 2 windows bound to its QP): refused, the key keeps working. */
	assert_int_equal(rocemu_mem_invalidate(f->e->mem, f->pd, k, true, 0x11), ROCEMU_MEM_ACCESS);
	assert_int_equal(rocemu_mem_invalidate_check(f->e->mem, f->pd, k, true, 0x11),
			 ROCEMU_MEM_ACCESS);
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd, 0, k, 0, data, 8),
			 ROCEMU_MEM_OK);
	/* The owner may (LOCAL_INV); afterwards the key is dead for everyone. */
	assert_int_equal(rocemu_mem_invalidate_check(f->e->mem, f->pd, k, false, 0x11),
			 ROCEMU_MEM_OK);
	assert_int_equal(rocemu_mem_invalidate(f->e->mem, f->pd, k, false, 0x11), ROCEMU_MEM_OK);
	assert_int_equal(rocemu_mem_remote_write(f->e->mem, f->pd, 0, k, 0, data, 8),
			 ROCEMU_MEM_BAD_KEY);
	assert_int_equal(rocemu_mem_invalidate(f->e->mem, f->pd, k, false, 0x11),
			 ROCEMU_MEM_BAD_KEY);
	assert_outside_untouched(&g, 0, 8);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	guarded_free(&g);
}

static void test_advise(void **state)
{
	struct fixture *f = *state;
	struct guarded g = guarded_new(page);
	struct rocemu_mr *mr;
	struct ibv_sge sge;

	assert_int_equal(rocemu_mr_reg(f->pd, g.buf, 64, 0, IBV_ACCESS_ON_DEMAND, &mr), 0);
	sge = (struct ibv_sge){.addr = 0, .length = 64, .lkey = key_of(mr)};
	assert_int_equal(rocemu_mr_advise(f->pd, IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1), 0);
	assert_int_equal(rocemu_mr_advise(f->pd, 2, &sge, 1), -EINVAL);
	assert_int_equal(rocemu_mr_advise(f->pd, 0, &sge, 0), -EINVAL);
	assert_int_equal(rocemu_mr_advise(f->pd, 0, NULL, 1), -EINVAL);
	assert_int_equal(rocemu_mr_advise(f->pd2, 0, &sge, 1), -EFAULT);
	sge.length = 65;
	assert_int_equal(rocemu_mr_advise(f->pd, 0, &sge, 1), -EFAULT);
	sge.length = 64;
	sge.lkey ^= 1;
	assert_int_equal(rocemu_mr_advise(f->pd, 0, &sge, 1), -EFAULT);
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	guarded_free(&g);
}

static void test_err_names(void **state)
{
	const char *names[ROCEMU_MEM_ALIGN + 1];

	(void)state;
	for (int i = 0; i <= ROCEMU_MEM_ALIGN; i++) {
		names[i] = rocemu_mem_err_name((enum rocemu_mem_err)i);
		assert_non_null(names[i]);
		assert_string_not_equal(names[i], "unknown");
		for (int j = 0; j < i; j++)
			assert_string_not_equal(names[i], names[j]);
	}
	assert_string_equal(rocemu_mem_err_name((enum rocemu_mem_err)99), "unknown");
}

static void test_table_limits(void **state)
{
	struct rocemu_mem_table *t;

	(void)state;
	assert_int_equal(rocemu_mem_table_create(0, 0, &t), -EINVAL);
	assert_int_equal(rocemu_mem_table_create((1u << 24) + 1, 0, &t), -EINVAL);
	assert_int_equal(rocemu_mem_table_create(1u << 24, 1, &t), -EINVAL); /* windows too */
	assert_int_equal(rocemu_mem_table_create(1u << 24, 0, &t), 0);
	rocemu_mem_table_destroy(t);
	rocemu_mem_table_destroy(NULL);
}

/* Objects left alive are freed with the table (ASan would see a leak). */
static void test_teardown_frees_leftovers(void **state)
{
	struct rocemu_engine *e = stub_engine_new(8);
	struct guarded g = guarded_new(page);
	struct rocemu_mr *mr;
	struct rocemu_pd *pd;

	(void)state;
	assert_int_equal(rocemu_pd_alloc(e, &pd), 0);
	assert_int_equal(rocemu_mr_reg(pd, g.buf, 64, 0, 0, &mr), 0);
	stub_engine_free(e);
	guarded_free(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    FIXTURE_TEST(test_pd_refcount),
	    FIXTURE_TEST(test_pd_limit),
	    FIXTURE_TEST(test_reg_access_flags),
	    FIXTURE_TEST(test_reg_mapping_checked),
	    FIXTURE_TEST(test_reg_overflow),
	    cmocka_unit_test(test_range_probe),
	    FIXTURE_TEST(test_region_over_4g),
	    FIXTURE_TEST(test_bounds_model),
	    FIXTURE_TEST(test_bounds_both_ends),
	    FIXTURE_TEST(test_wrong_pd),
	    FIXTURE_TEST(test_missing_rights),
	    FIXTURE_TEST(test_stale_key_after_dereg),
	    FIXTURE_TEST(test_stale_key_after_reuse),
	    cmocka_unit_test(test_key_variants_random),
	    FIXTURE_TEST(test_zero_length_region),
	    FIXTURE_TEST(test_gather_scatter),
	    FIXTURE_TEST(test_implicit_odp),
	    FIXTURE_TEST(test_explicit_odp_unmapped),
	    FIXTURE_TEST(test_freed_region_faults),
	    FIXTURE_TEST(test_odp_atomics_without_maps),
	    FIXTURE_TEST(test_atomics),
	    FIXTURE_TEST(test_atomics_concurrent),
	    FIXTURE_TEST(test_atomic_write),
	    FIXTURE_TEST(test_flush),
	    FIXTURE_TEST(test_rereg),
	    FIXTURE_TEST(test_invalidate),
	    FIXTURE_TEST(test_advise),
	    cmocka_unit_test(test_err_names),
	    cmocka_unit_test(test_table_limits),
	    cmocka_unit_test(test_teardown_frees_leftovers),
	};

	page = (size_t)sysconf(_SC_PAGESIZE);
	return cmocka_run_group_tests_name("memory", tests, NULL, NULL);
}
