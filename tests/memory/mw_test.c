/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests for memory windows (emulator/memory/mw.c and the window rules
 * of mem_access.c), one test per rule, against a stand-in engine. QP
 * numbers are plain numbers here: the memory layer only compares them.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine_stub.h"
#include "../../emulator/memory/mem_private.h"

#define QA	  0x11 /* the QP a type 2 window is bound through */
#define QB	  0x22 /* another QP of the same PD */
#define BUF_LEN	  4096
#define MR_RIGHTS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND)
#define RW	  (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE)

struct mwf {
	struct rocemu_engine *e;
	struct rocemu_pd *pd, *pd2;
	uint8_t *buf;
	struct rocemu_mr *mr; /* buf, iova = its address, MR_RIGHTS */
};

static int setup(void **state)
{
	struct mwf *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->e = stub_engine_new_mw(8, 4);
	assert_int_equal(rocemu_pd_alloc(f->e, &f->pd), 0);
	assert_int_equal(rocemu_pd_alloc(f->e, &f->pd2), 0);
	f->buf = calloc(1, BUF_LEN);
	assert_non_null(f->buf);
	assert_int_equal(
	    rocemu_mr_reg(f->pd, f->buf, BUF_LEN, (uintptr_t)f->buf, MR_RIGHTS, &f->mr), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct mwf *f = *state;

	/* windows and regions a test left are freed by the table (ASan checks) */
	stub_engine_free(f->e);
	free(f->buf);
	free(f);
	return 0;
}

static uint32_t next_tag(uint32_t key)
{
	return (key & ~0xffu) | ((key + 1) & 0xffu); /* ibv_inc_rkey */
}

static uint64_t at(const struct mwf *f, size_t off)
{
	return (uintptr_t)f->buf + off;
}

/* Bind window mw through QP qpn of pd; the new key is written to *key. */
static int bind(struct mwf *f, const struct rocemu_pd *pd, uint32_t qpn, struct rocemu_mw *mw,
		uint32_t lkey, uint64_t addr, uint64_t len, unsigned access, uint32_t *key)
{
	struct rocemu_mem_bind b = {
	    .key = next_tag(rocemu_mw_rkey(mw)),
	    .type = mw->w.mw_type,
	    .mr_lkey = lkey,
	    .addr = addr,
	    .length = len,
	    .access = access,
	};
	int rc = rocemu_mem_bind(f->e->mem, pd, qpn, &b);

	if (key)
		*key = b.key;
	return rc;
}

/* A new window of type on f->pd, bound through QP qpn to the first 64
 * bytes of buf for remote read and write; its key in *key. */
static struct rocemu_mw *bound_window(struct mwf *f, enum ibv_mw_type type, uint32_t qpn,
				      uint32_t *key)
{
	struct rocemu_mw *mw;

	assert_int_equal(rocemu_mw_alloc(f->pd, type, &mw), 0);
	assert_int_equal(bind(f, f->pd, qpn, mw, f->mr->key, at(f, 0), 64, RW, key), 0);
	return mw;
}

static enum rocemu_mem_err wr(struct mwf *f, uint32_t qpn, uint32_t key, uint64_t iova,
			      uint32_t len)
{
	static const uint8_t data[64] = {[0 ... 63] = 0x5a};

	return rocemu_mem_remote_write(f->e->mem, f->pd, qpn, key, iova, data, len);
}

static enum rocemu_mem_err rd(struct mwf *f, uint32_t qpn, uint32_t key, uint64_t iova)
{
	uint8_t out[8];

	return rocemu_mem_remote_read(f->e->mem, f->pd, qpn, key, iova, out, sizeof(out));
}

/* ibv_alloc_mw(3): types 1 and 2, max_mw, the PD held, nothing translated
 * before a bind. */
static void test_alloc(void **state)
{
	struct mwf *f = *state;
	struct rocemu_mw *mw[5];

	assert_int_equal(rocemu_mw_alloc(f->pd, (enum ibv_mw_type)3, &mw[0]), -EINVAL);
	assert_int_equal(rocemu_mw_alloc(NULL, IBV_MW_TYPE_2, &mw[0]), -EINVAL);
	assert_int_equal(rocemu_mw_alloc(f->pd2, IBV_MW_TYPE_1, &mw[0]), 0);
	assert_int_equal(rocemu_mw_alloc(f->pd2, IBV_MW_TYPE_2, &mw[1]), 0);
	assert_int_equal(rocemu_mw_alloc(f->pd2, IBV_MW_TYPE_2, &mw[2]), 0);
	assert_int_equal(rocemu_mw_alloc(f->pd2, IBV_MW_TYPE_2, &mw[3]), 0);
	assert_int_equal(rocemu_mw_alloc(f->pd2, IBV_MW_TYPE_2, &mw[4]), -ENOMEM); /* max_mw 4 */
	for (int i = 0; i < 4; i++) {
		uint32_t k = rocemu_mw_rkey(mw[i]);

		assert_int_not_equal(k, f->mr->key);
		assert_int_not_equal(k & 0xff, 0);
		/* not bound: its R_Key names nothing */
		assert_int_equal(rocemu_mem_remote_read(f->e->mem, f->pd2, QA, k, 0, NULL, 0),
				 ROCEMU_MEM_BAD_KEY);
	}
	assert_int_equal(rocemu_pd_free(f->pd2), -EBUSY);
	for (int i = 0; i < 4; i++)
		assert_int_equal(rocemu_mw_dealloc(mw[i]), 0);
	assert_int_equal(rocemu_pd_free(f->pd2), 0);
	/* windows do not take regions' room: max_mr regions still fit */
	for (int i = 0; i < 7; i++) {
		struct rocemu_mr *m;

		assert_int_equal(rocemu_mr_reg(f->pd, f->buf, 64, 0, 0, &m), 0);
	}
}

/* A type 2 window: its range and rights through the QP it is bound to;
 * nothing through another QP, as an lkey, or with the key it had before. */
static void test_type2_access(void **state)
{
	struct mwf *f = *state;
	struct rocemu_mw *mw;
	uint32_t old, k;
	struct ibv_sge sge;
	uint8_t *p;

	assert_int_equal(rocemu_mw_alloc(f->pd, IBV_MW_TYPE_2, &mw), 0);
	old = rocemu_mw_rkey(mw);
	assert_int_equal(bind(f, f->pd, QA, mw, f->mr->key, at(f, 64), 128, RW, &k), 0);
	assert_int_equal(rocemu_mw_rkey(mw), k);
	assert_int_equal(wr(f, QA, k, at(f, 64), 64), ROCEMU_MEM_OK);
	assert_int_equal(f->buf[64], 0x5a);
	assert_int_equal(f->buf[63], 0);
	assert_int_equal(rd(f, QA, k, at(f, 184)), ROCEMU_MEM_OK);
	/* the window's bounds, not the region's */
	assert_int_equal(rd(f, QA, k, at(f, 185)), ROCEMU_MEM_BOUNDS);
	assert_int_equal(rd(f, QA, k, at(f, 60)), ROCEMU_MEM_BOUNDS);
	/* its rights: no atomic granted */
	uint64_t orig;
	assert_int_equal(rocemu_mem_atomic(f->e->mem, f->pd, QA, k, at(f, 64), false, 0, 1, &orig),
			 ROCEMU_MEM_ACCESS);
	/* another QP of the same PD, the old key, the window as an lkey */
	assert_int_equal(rd(f, QB, k, at(f, 64)), ROCEMU_MEM_BAD_KEY);
	assert_int_equal(rd(f, QA, old, at(f, 64)), ROCEMU_MEM_BAD_KEY);
	sge = (struct ibv_sge){.addr = at(f, 64), .length = 8, .lkey = k};
	assert_int_equal(rocemu_mem_scatter(f->e->mem, f->pd, &sge, 1, 0, "12345678", 8),
			 ROCEMU_MEM_BAD_KEY);
	assert_int_equal(rocemu_mem_translate(f->e->mem, f->pd, QA, k, false, at(f, 64), 8, 0, &p),
			 ROCEMU_MEM_BAD_KEY);
	assert_int_equal(rocemu_mem_translate(f->e->mem, f->pd, QA, k, true, at(f, 64), 8,
					      ROCEMU_RIGHT_REMOTE_WRITE, &p),
			 ROCEMU_MEM_OK);
	assert_ptr_equal(p, f->buf + 64);
	/* and the region's own key is unchanged by it */
	assert_int_equal(rd(f, QA, f->mr->key, at(f, 0)), ROCEMU_MEM_ACCESS);
}

/* C10-73 (Linux rxe's numbering): the region must allow MW_BIND. */
static void test_bind_needs_mw_bind(void **state)
{
	struct mwf *f = *state;
	struct rocemu_mr *plain;
	struct rocemu_mw *mw;

	assert_int_equal(rocemu_mr_reg(f->pd, f->buf, BUF_LEN, 0,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, &plain),
			 0);
	assert_int_equal(rocemu_mw_alloc(f->pd, IBV_MW_TYPE_2, &mw), 0);
	assert_int_equal(bind(f, f->pd, QA, mw, plain->key, 0, 64, IBV_ACCESS_REMOTE_READ, NULL),
			 -EACCES);
	assert_true(mw->w.invalidated); /* a failed bind leaves it free */
	assert_int_equal(
	    bind(f, f->pd, QA, mw, f->mr->key, at(f, 0), 64, IBV_ACCESS_REMOTE_READ, NULL), 0);
}

/* C10-74: remote write or atomic through a window needs local write on the
 * region. The window's remote rights need no remote right of the region
 * (rdma-core's tests bind REMOTE_WRITE windows on LOCAL_WRITE|MW_BIND
 * regions, as IBA allows). */
static void test_bind_rights(void **state)
{
	struct mwf *f = *state;
	struct rocemu_mr *ro;
	struct rocemu_mw *mw;
	uint32_t k;

	assert_int_equal(rocemu_mr_reg(f->pd, f->buf, BUF_LEN, 0, IBV_ACCESS_MW_BIND, &ro), 0);
	assert_int_equal(rocemu_mw_alloc(f->pd, IBV_MW_TYPE_2, &mw), 0);
	assert_int_equal(bind(f, f->pd, QA, mw, ro->key, 0, 64, IBV_ACCESS_REMOTE_WRITE, NULL),
			 -EACCES);
	assert_int_equal(bind(f, f->pd, QA, mw, ro->key, 0, 64, IBV_ACCESS_REMOTE_ATOMIC, NULL),
			 -EACCES);
	assert_int_equal(bind(f, f->pd, QA, mw, ro->key, 0, 64, 1u << 12, NULL), -EINVAL);
	assert_int_equal(bind(f, f->pd, QA, mw, ro->key, 0, 64, IBV_ACCESS_REMOTE_READ, &k), 0);
	assert_int_equal(rocemu_mem_remote_read(f->e->mem, f->pd, QA, k, 8, (uint8_t[8]){0}, 8),
			 ROCEMU_MEM_OK);
	assert_int_equal(wr(f, QA, k, 8, 8), ROCEMU_MEM_ACCESS);
	/* the region itself grants no remote access: its key is refused */
	assert_int_equal(
	    rocemu_mem_remote_read(f->e->mem, f->pd, QA, ro->key, 8, (uint8_t[8]){0}, 8),
	    ROCEMU_MEM_ACCESS);
	/* atomic granted on a LOCAL_WRITE region works */
	struct rocemu_mw *mw2;
	uint64_t orig;
	assert_int_equal(rocemu_mw_alloc(f->pd, IBV_MW_TYPE_2, &mw2), 0);
	assert_int_equal(
	    bind(f, f->pd, QA, mw2, f->mr->key, at(f, 0), 64, IBV_ACCESS_REMOTE_ATOMIC, &k), 0);
	assert_int_equal(rocemu_mem_atomic(f->e->mem, f->pd, QA, k, at(f, 8), false, 0, 5, &orig),
			 ROCEMU_MEM_OK);
	assert_int_equal(f->buf[8], 5);
}

/* C10-75: the window lies inside the region. */
static void test_bind_range(void **state)
{
	struct mwf *f = *state;
	struct rocemu_mw *mw;

	assert_int_equal(rocemu_mw_alloc(f->pd, IBV_MW_TYPE_2, &mw), 0);
	assert_int_equal(bind(f, f->pd, QA, mw, f->mr->key, at(f, 0) - 1, 16, RW, NULL), -ERANGE);
	assert_int_equal(bind(f, f->pd, QA, mw, f->mr->key, at(f, BUF_LEN - 15), 16, RW, NULL),
			 -ERANGE);
	assert_int_equal(bind(f, f->pd, QA, mw, f->mr->key, at(f, 1), BUF_LEN, RW, NULL), -ERANGE);
	assert_int_equal(bind(f, f->pd, QA, mw, f->mr->key, at(f, 16), UINT64_MAX, RW, NULL),
			 -ERANGE);
	assert_int_equal(bind(f, f->pd, QA, mw, f->mr->key, at(f, 0), BUF_LEN, RW, NULL), 0);
}

/* Zero-based windows (IBV_ACCESS_ZERO_BASED): the window's first byte is
 * iova 0; type 1 windows cannot be zero-based (o10-36.2.2). */
static void test_zero_based(void **state)
{
	struct mwf *f = *state;
	struct rocemu_mw *mw, *t1;
	uint32_t k;

	assert_int_equal(rocemu_mw_alloc(f->pd, IBV_MW_TYPE_2, &mw), 0);
	assert_int_equal(
	    bind(f, f->pd, QA, mw, f->mr->key, at(f, 256), 64, RW | IBV_ACCESS_ZERO_BASED, &k), 0);
	assert_int_equal(wr(f, QA, k, 0, 1), ROCEMU_MEM_OK);
	assert_int_equal(f->buf[256], 0x5a);
	assert_int_equal(f->buf[255], 0);
	assert_int_equal(wr(f, QA, k, 63, 1), ROCEMU_MEM_OK);
	assert_int_equal(f->buf[319], 0x5a);
	assert_int_equal(wr(f, QA, k, 64, 1), ROCEMU_MEM_BOUNDS);
	assert_int_equal(wr(f, QA, k, at(f, 256), 1), ROCEMU_MEM_BOUNDS);
	assert_int_equal(rocemu_mw_alloc(f->pd, IBV_MW_TYPE_1, &t1), 0);
	assert_int_equal(
	    bind(f, f->pd, QA, t1, f->mr->key, at(f, 256), 64, RW | IBV_ACCESS_ZERO_BASED, NULL),
	    -EINVAL);
}

/* Type 2B: bound through a QP of its own PD (C10-72), only when free
 * (o10-37.2.30), never to nothing (o10-37.2.40); the bind names the window
 * by its key's index and must be of the window's type. */
static void test_type2_bind_rules(void **state)
{
	struct mwf *f = *state;
	struct rocemu_mr *other_pd_mr;
	struct rocemu_mw *mw, *mw2;
	struct rocemu_mem_bind b;

	assert_int_equal(rocemu_mw_alloc(f->pd, IBV_MW_TYPE_2, &mw), 0);
	assert_int_equal(rocemu_mw_alloc(f->pd, IBV_MW_TYPE_2, &mw2), 0);
	assert_int_equal(rocemu_mr_reg(f->pd2, f->buf, BUF_LEN, 0, MR_RIGHTS, &other_pd_mr), 0);
	/* a QP of another PD */
	assert_int_equal(bind(f, f->pd2, QA, mw, f->mr->key, at(f, 0), 64, RW, NULL), -EPERM);
	/* a region of another PD */
	assert_int_equal(bind(f, f->pd, QA, mw, other_pd_mr->key, 0, 64, RW, NULL), -EPERM);
	/* nothing, or nothing long */
	assert_int_equal(bind(f, f->pd, QA, mw, 0, 0, 0, 0, NULL), -EINVAL);
	assert_int_equal(bind(f, f->pd, QA, mw, f->mr->key, at(f, 0), 0, RW, NULL), -EINVAL);
	/* a key whose index is another object's, a window key as the region */
	b = (struct rocemu_mem_bind){.key = f->mr->key,
				     .type = IBV_MW_TYPE_2,
				     .mr_lkey = f->mr->key,
				     .addr = at(f, 0),
				     .length = 64,
				     .access = RW};
	assert_int_equal(rocemu_mem_bind(f->e->mem, f->pd, QA, &b), -EINVAL);
	assert_int_equal(bind(f, f->pd, QA, mw, rocemu_mw_rkey(mw2), 0, 64, RW, NULL), -EINVAL);
	b = (struct rocemu_mem_bind){.key = next_tag(rocemu_mw_rkey(mw)),
				     .type = IBV_MW_TYPE_1,
				     .mr_lkey = f->mr->key,
				     .addr = at(f, 0),
				     .length = 64,
				     .access = RW};
	assert_int_equal(rocemu_mem_bind(f->e->mem, f->pd, QA, &b), -EINVAL);
	/* bound once; a second bind while bound fails and changes nothing */
	uint32_t k;
	assert_int_equal(bind(f, f->pd, QA, mw, f->mr->key, at(f, 0), 64, RW, &k), 0);
	assert_int_equal(bind(f, f->pd, QB, mw, f->mr->key, at(f, 64), 64, RW, NULL), -EBUSY);
	assert_int_equal(rocemu_mw_rkey(mw), k);
	assert_int_equal(rd(f, QA, k, at(f, 0)), ROCEMU_MEM_OK);
	assert_int_equal(rd(f, QB, k, at(f, 0)), ROCEMU_MEM_BAD_KEY);
}

/* The tag changes on rebind and the old R_Key stops working: type 2 after
 * an invalidation, type 1 at any time (a bind replaces the last one), and
 * a type 1 bind of length 0 unbinds. */
static void test_rebind_new_tag(void **state)
{
	struct mwf *f = *state;
	struct rocemu_mw *t2, *t1;
	uint32_t k1, k2;

	t2 = bound_window(f, IBV_MW_TYPE_2, QA, &k1);
	assert_int_equal(rocemu_mem_invalidate(f->e->mem, f->pd, k1, false, QA), ROCEMU_MEM_OK);
	assert_int_equal(bind(f, f->pd, QB, t2, f->mr->key, at(f, 0), 64, RW, &k2), 0);
	assert_int_not_equal(k1, k2);
	assert_int_equal(k1 >> 8, k2 >> 8);
	assert_int_equal(rd(f, QB, k1, at(f, 0)), ROCEMU_MEM_BAD_KEY);
	assert_int_equal(rd(f, QB, k2, at(f, 0)), ROCEMU_MEM_OK);

	t1 = bound_window(f, IBV_MW_TYPE_1, QA, &k1);
	/* type 1: any QP of the PD */
	assert_int_equal(rd(f, QB, k1, at(f, 0)), ROCEMU_MEM_OK);
	assert_int_equal(
	    rocemu_mem_remote_read(f->e->mem, f->pd2, QB, k1, at(f, 0), (uint8_t[8]){0}, 8),
	    ROCEMU_MEM_BAD_PD);
	assert_int_equal(bind(f, f->pd, QA, t1, f->mr->key, at(f, 64), 64, RW, &k2), 0);
	assert_int_equal(f->mr->windows, 2u);
	assert_int_equal(rd(f, QA, k1, at(f, 64)), ROCEMU_MEM_BAD_KEY);
	assert_int_equal(rd(f, QA, k2, at(f, 64)), ROCEMU_MEM_OK);
	assert_int_equal(rd(f, QA, k2, at(f, 0)), ROCEMU_MEM_BOUNDS);
	assert_int_equal(bind(f, f->pd, QA, t1, 0, 0, 0, 0, &k1), 0);
	assert_int_equal(rd(f, QA, k2, at(f, 64)), ROCEMU_MEM_BAD_KEY);
	assert_int_equal(rd(f, QA, k1, at(f, 64)), ROCEMU_MEM_BAD_KEY);
	assert_int_equal(f->mr->windows, 1u);
}

/* Invalidation: LOCAL_INV frees a type 2 window; a peer's SEND with
 * Invalidate only a type 2 window bound to the QP it arrived on (IBA
 * 10.6.7); a type 1 window by neither (o10-37.2.26). */
static void test_invalidate_rules(void **state)
{
	struct mwf *f = *state;
	struct rocemu_mw *t2;
	uint32_t k, k1;

	t2 = bound_window(f, IBV_MW_TYPE_2, QA, &k);
	bound_window(f, IBV_MW_TYPE_1, QA, &k1);
	/* remote: another QP's peer, another PD, then the right peer */
	assert_int_equal(rocemu_mem_invalidate(f->e->mem, f->pd, k, true, QB), ROCEMU_MEM_ACCESS);
	assert_int_equal(rocemu_mem_invalidate(f->e->mem, f->pd2, k, true, QA), ROCEMU_MEM_BAD_PD);
	assert_int_equal(rd(f, QA, k, at(f, 0)), ROCEMU_MEM_OK);
	assert_int_equal(rocemu_mem_invalidate_check(f->e->mem, f->pd, k, true, QA), ROCEMU_MEM_OK);
	assert_int_equal(rocemu_mem_invalidate(f->e->mem, f->pd, k, true, QA), ROCEMU_MEM_OK);
	assert_int_equal(rd(f, QA, k, at(f, 0)), ROCEMU_MEM_BAD_KEY);
	assert_int_equal(rocemu_mem_invalidate(f->e->mem, f->pd, k, true, QA), ROCEMU_MEM_BAD_KEY);
	assert_int_equal(rocemu_mem_invalidate(f->e->mem, f->pd, k, false, QA), ROCEMU_MEM_BAD_KEY);
	/* type 1: neither the peer nor the owner */
	assert_int_equal(rocemu_mem_invalidate(f->e->mem, f->pd, k1, true, QA), ROCEMU_MEM_ACCESS);
	assert_int_equal(rocemu_mem_invalidate(f->e->mem, f->pd, k1, false, QA), ROCEMU_MEM_ACCESS);
	assert_int_equal(rd(f, QA, k1, at(f, 0)), ROCEMU_MEM_OK);
	/* a region: the owner only */
	assert_int_equal(rocemu_mem_invalidate(f->e->mem, f->pd, f->mr->key, true, QA),
			 ROCEMU_MEM_ACCESS);
	/* the owner's LOCAL_INV of a bound type 2 window, on any QP of the PD */
	assert_int_equal(bind(f, f->pd, QA, t2, f->mr->key, at(f, 0), 64, RW, &k), 0);
	assert_int_equal(rocemu_mem_invalidate(f->e->mem, f->pd, k, false, QB), ROCEMU_MEM_OK);
	assert_int_equal(rd(f, QA, k, at(f, 0)), ROCEMU_MEM_BAD_KEY);
}

/* A region with windows bound cannot be deregistered or re-registered; a
 * window goes with ibv_dealloc_mw even while bound, and its key with it. */
static void test_region_busy_and_dealloc(void **state)
{
	struct mwf *f = *state;
	struct rocemu_mw *t2, *t1;
	uint32_t k, k1;

	t2 = bound_window(f, IBV_MW_TYPE_2, QA, &k);
	t1 = bound_window(f, IBV_MW_TYPE_1, QA, &k1);
	assert_int_equal(rocemu_mr_dereg(f->mr), -EBUSY);
	assert_int_equal(
	    rocemu_mr_rereg(f->mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, 0, MR_RIGHTS),
	    -EBUSY);
	assert_int_equal(rocemu_mw_dealloc(t2), 0);
	assert_int_equal(rd(f, QA, k, at(f, 0)), ROCEMU_MEM_BAD_KEY);
	assert_int_equal(rocemu_mr_dereg(f->mr), -EBUSY);
	assert_int_equal(rocemu_mw_dealloc(t1), 0);
	assert_int_equal(rd(f, QA, k1, at(f, 0)), ROCEMU_MEM_BAD_KEY);
	assert_int_equal(rocemu_mr_dereg(f->mr), 0);
}

/* A region invalidated by its owner takes its windows' access with it. */
static void test_region_invalidated(void **state)
{
	struct mwf *f = *state;
	uint32_t k;

	bound_window(f, IBV_MW_TYPE_2, QA, &k);
	assert_int_equal(rocemu_mem_invalidate(f->e->mem, f->pd, f->mr->key, false, QA),
			 ROCEMU_MEM_OK);
	assert_int_equal(rd(f, QA, k, at(f, 0)), ROCEMU_MEM_BAD_KEY);
}

/* The QP of a type 2 window is destroyed: the window answers no QP any more
 * (not one given the same number later), and its owner can still free it. */
static void test_qp_destroyed(void **state)
{
	struct mwf *f = *state;
	struct rocemu_mw *other;
	uint32_t k, k2;

	bound_window(f, IBV_MW_TYPE_2, QA, &k);
	other = bound_window(f, IBV_MW_TYPE_2, QB, &k2);
	rocemu_mem_windows_orphan(f->e->mem, QA);
	assert_int_equal(rd(f, QA, k, at(f, 0)), ROCEMU_MEM_BAD_KEY);
	assert_int_equal(rocemu_mem_invalidate(f->e->mem, f->pd, k, true, QA), ROCEMU_MEM_ACCESS);
	assert_int_equal(rd(f, QB, k2, at(f, 0)), ROCEMU_MEM_OK); /* another QP's: untouched */
	assert_int_equal(rocemu_mr_dereg(f->mr), -EBUSY);	  /* still bound */
	assert_int_equal(rocemu_mem_invalidate(f->e->mem, f->pd, k, false, QB), ROCEMU_MEM_OK);
	assert_int_equal(rocemu_mw_dealloc(other), 0);
	assert_int_equal(rocemu_mr_dereg(f->mr), 0);
}

/* A window on an implicit ODP region: the window's iova is a host address. */
static void test_implicit_odp_parent(void **state)
{
	struct mwf *f = *state;
	struct rocemu_mr *odp;
	struct rocemu_mw *mw;
	uint32_t k;

	assert_int_equal(
	    rocemu_mr_reg(f->pd, NULL, SIZE_MAX, 0, IBV_ACCESS_ON_DEMAND | MR_RIGHTS, &odp), 0);
	assert_int_equal(rocemu_mw_alloc(f->pd, IBV_MW_TYPE_2, &mw), 0);
	assert_int_equal(
	    bind(f, f->pd, QA, mw, odp->key, at(f, 512), 16, RW | IBV_ACCESS_ZERO_BASED, &k), 0);
	assert_int_equal(wr(f, QA, k, 4, 1), ROCEMU_MEM_OK);
	assert_int_equal(f->buf[516], 0x5a);
	assert_int_equal(wr(f, QA, k, 16, 1), ROCEMU_MEM_BOUNDS);
}

/*
 * The slot of a deallocated window: the consumer chose its last tag, so the
 * table must not hand that same key to the next owner of the slot. The
 * slot's variant order is learnt first (a full cycle of alloc/dealloc),
 * then the window is bound with the very tag the slot would hand out next.
 */
static void test_slot_reuse_skips_last_tag(void **state)
{
	struct rocemu_engine *e = stub_engine_new_mw(1, 1);
	struct rocemu_pd *pd;
	struct rocemu_mr *mr;
	struct rocemu_mw *mw;
	uint8_t order[255], buf[64];
	uint32_t slot;

	(void)state;
	assert_int_equal(rocemu_pd_alloc(e, &pd), 0);
	assert_int_equal(rocemu_mr_reg(pd, buf, sizeof(buf), 0, MR_RIGHTS, &mr), 0);
	for (int i = 0; i < 255; i++) {
		assert_int_equal(rocemu_mw_alloc(pd, IBV_MW_TYPE_2, &mw), 0);
		order[i] = rocemu_mw_rkey(mw) & 0xff;
		slot = rocemu_mw_rkey(mw) >> 8;
		assert_int_equal(rocemu_mw_dealloc(mw), 0);
	}
	/* after a full cycle the slot starts the order again */
	for (unsigned round = 0, pos = 0; round < 40; round++, pos = (pos + 3) % 255) {
		struct rocemu_mem_bind b = {.key = slot << 8 | order[(pos + 1) % 255],
					    .type = IBV_MW_TYPE_2,
					    .mr_lkey = mr->key,
					    .addr = 0,
					    .length = 8,
					    .access = IBV_ACCESS_REMOTE_READ};
		uint32_t next;

		assert_int_equal(rocemu_mw_alloc(pd, IBV_MW_TYPE_2, &mw), 0);
		assert_int_equal(rocemu_mw_rkey(mw) & 0xff, order[pos]);
		/* bound with the tag the slot hands out next */
		assert_int_equal(rocemu_mem_bind(e->mem, pd, QA, &b), 0);
		assert_int_equal(rocemu_mw_dealloc(mw), 0);
		assert_int_equal(rocemu_mw_alloc(pd, IBV_MW_TYPE_2, &mw), 0);
		next = rocemu_mw_rkey(mw);
		assert_int_not_equal(next, b.key);
		assert_int_equal(next & 0xff, order[(pos + 2) % 255]);
		assert_int_equal(rocemu_mw_dealloc(mw), 0);
	}
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	assert_int_equal(rocemu_pd_free(pd), 0);
	stub_engine_free(e);
}

static void test_table_sizes(void **state)
{
	struct rocemu_mem_table *t;

	(void)state;
	assert_int_equal(rocemu_mem_table_create(1u << 23, (1u << 23) + 1, &t), -EINVAL);
	assert_int_equal(rocemu_mem_table_create(1u << 23, 1u << 23, &t), 0);
	rocemu_mem_table_destroy(t);
}

#define MW_TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    MW_TEST(test_alloc),
	    MW_TEST(test_type2_access),
	    MW_TEST(test_bind_needs_mw_bind),
	    MW_TEST(test_bind_rights),
	    MW_TEST(test_bind_range),
	    MW_TEST(test_zero_based),
	    MW_TEST(test_type2_bind_rules),
	    MW_TEST(test_rebind_new_tag),
	    MW_TEST(test_invalidate_rules),
	    MW_TEST(test_region_busy_and_dealloc),
	    MW_TEST(test_region_invalidated),
	    MW_TEST(test_qp_destroyed),
	    MW_TEST(test_implicit_odp_parent),
	    cmocka_unit_test(test_slot_reuse_skips_last_tag),
	    cmocka_unit_test(test_table_sizes),
	};

	return cmocka_run_group_tests_name("memory_windows", tests, NULL, NULL);
}
