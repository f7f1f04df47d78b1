/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory-region verbs of issue 15 through rocemu's libibverbs in one
 * process: two devices on an in-process ring pair are two hosts, a and b;
 * b's region is the one under test and a is the peer that uses it.
 *  - ibv_rereg_mr(3): every flag and their combination, the error codes
 *    (IBV_REREG_MR_ERR_INPUT for what libibverbs checks, _CMD for what the
 *    device refuses, the region unchanged either way), the keys kept for a
 *    new PD or new rights and replaced for a new translation, the peer's
 *    accesses after each, and a WRITE in flight while the translation moves;
 *  - on-demand paging: every operation odp_caps advertises, per transport
 *    (RC, UC, UD, SRQ receives), on pages nobody touched; implicit ODP;
 *    ibv_advise_mr's checks;
 *  - device memory: ibv_alloc_dm's budget and copies, ibv_reg_dm_mr's rules,
 *    a peer's WRITE, READ and atomic on it and a SEND from it.
 * Every byte is checked.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <infiniband/verbs.h>

#include "test_util.h"

static struct ibv_device **devs;
static int n_devs;

#define MR_RW (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

/* Hosts a and b (tu_side: one RC QP each, joined), the region under test
 * being b's (registered for everything). */
struct pair {
	struct tu_side a, b;
};

static void join_access(struct ibv_qp *qa, const struct tu_side *a, struct ibv_qp *qb,
			const struct tu_side *b, unsigned access)
{
	tu_rc_to_rts(qa, &b->gid, TU_GID_INDEX, qb->qp_num, access);
	tu_rc_to_rts(qb, &a->gid, TU_GID_INDEX, qa->qp_num, access);
}

static void join(struct ibv_qp *qa, const struct tu_side *a, struct ibv_qp *qb,
		 const struct tu_side *b)
{
	join_access(qa, a, qb, b,
		    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
}

/* The fixture of the tests on a pair: *state is the pair, joined. */
static int pair_setup(void **state)
{
	struct pair *p = calloc(1, sizeof(*p));

	assert_non_null(p);
	tu_side_open(&p->a, devs[0], IBV_QPT_RC);
	tu_side_open(&p->b, devs[1], IBV_QPT_RC);
	join(p->a.qp, &p->a, p->b.qp, &p->b);
	*state = p;
	return 0;
}

static int pair_teardown(void **state)
{
	struct pair *p = *state;

	tu_side_close(&p->a);
	tu_side_close(&p->b);
	free(p);
	return 0;
}

/* A test on a pair: its fixture. */
#define PAIR_TEST(f) cmocka_unit_test_setup_teardown(f, pair_setup, pair_teardown)

/* After an error moved both QPs to ERR: RESET and joined again. */
static void rejoin(struct pair *p)
{
	struct ibv_qp_attr r = {.qp_state = IBV_QPS_RESET};

	assert_int_equal(ibv_modify_qp(p->a.qp, &r, IBV_QP_STATE), 0);
	assert_int_equal(ibv_modify_qp(p->b.qp, &r, IBV_QP_STATE), 0);
	join(p->a.qp, &p->a, p->b.qp, &p->b);
}

/* Drain whatever (flushed) completions cq holds. */
static void drain(struct ibv_cq *cq)
{
	struct ibv_wc wc;

	while (ibv_poll_cq(cq, 1, &wc) > 0)
		;
}

/* One RDMA op of len bytes of a's buffer at off to raddr/rkey through qp
 * (a's): its completion status. */
static enum ibv_wc_status rdma(struct tu_side *a, struct ibv_qp *qp, enum ibv_wr_opcode op,
			       uint32_t off, uint32_t len, uint64_t raddr, uint32_t rkey)
{
	return tu_rdma(qp, ibv_cq_ex_to_cq(a->cq), a->buf + off, a->mr->lkey, op, len, raddr, rkey);
}

/* a WRITEs len bytes of pattern seed to raddr/rkey, READs them back into
 * another part of its buffer, and compares; the WRITE's status (the READ
 * is only tried after a successful WRITE). */
static enum ibv_wc_status write_read(struct pair *p, struct ibv_qp *qp, uint64_t raddr,
				     uint32_t rkey, uint32_t len, uint8_t seed)
{
	enum ibv_wc_status st;

	for (uint32_t i = 0; i < len; i++)
		p->a.buf[i] = (uint8_t)(seed + i * 13);
	memset(p->a.buf + TU_BUF / 2, 0, len);
	st = rdma(&p->a, qp, IBV_WR_RDMA_WRITE, 0, len, raddr, rkey);
	if (st != IBV_WC_SUCCESS)
		return st;
	assert_int_equal(rdma(&p->a, qp, IBV_WR_RDMA_READ, TU_BUF / 2, len, raddr, rkey),
			 IBV_WC_SUCCESS);
	assert_memory_equal(p->a.buf, p->a.buf + TU_BUF / 2, len);
	return st;
}

/* The region as ibv_mr shows it, to compare before and after. */
struct mr_view {
	void *addr;
	size_t length;
	uint32_t lkey, rkey;
	struct ibv_pd *pd;
};

static struct mr_view view(const struct ibv_mr *mr)
{
	return (struct mr_view){mr->addr, mr->length, mr->lkey, mr->rkey, mr->pd};
}

static void assert_view(const struct ibv_mr *mr, struct mr_view v)
{
	assert_ptr_equal(mr->addr, v.addr);
	assert_int_equal(mr->length, v.length);
	assert_int_equal(mr->lkey, v.lkey);
	assert_int_equal(mr->rkey, v.rkey);
	assert_ptr_equal(mr->pd, v.pd);
}

#define REREG_ALL                                                                                  \
	(IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS)

/*
 * What libibverbs checks itself is IBV_REREG_MR_ERR_INPUT with errno
 * EINVAL, and the region is as it was: unknown flags, a translation without
 * an address or a length, access bits without CHANGE_ACCESS, a missing PD or
 * one of another device.
 */
static void rereg_input_errors(void **state)
{
	struct pair *p = *state;

	struct ibv_mr *mr = p->b.mr;
	struct mr_view v = view(mr);
	struct ibv_pd *other = ibv_alloc_pd(p->a.ctx);
	assert_non_null(other);
	struct {
		struct ibv_mr *mr;
		int flags;
		struct ibv_pd *pd;
		void *addr;
		size_t len;
		int access;
	} bad[] = {
	    {NULL, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, MR_RW},
	    {mr, IBV_REREG_MR_FLAGS_SUPPORTED + 1, NULL, NULL, 0, 0},
	    {mr, IBV_REREG_MR_CHANGE_ACCESS | 0x100, NULL, NULL, 0, MR_RW},
	    {mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL, 4096, 0},
	    {mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, p->b.buf, 0, 0},
	    {mr, IBV_REREG_MR_CHANGE_PD, p->b.pd, NULL, 0, MR_RW},
	    {mr, IBV_REREG_MR_CHANGE_PD, NULL, NULL, 0, 0},
	    {mr, IBV_REREG_MR_CHANGE_PD, other, NULL, 0, 0},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		assert_int_equal(ibv_rereg_mr(bad[i].mr, bad[i].flags, bad[i].pd, bad[i].addr,
					      bad[i].len, bad[i].access),
				 IBV_REREG_MR_ERR_INPUT);
		assert_int_equal(errno, EINVAL);
		assert_view(mr, v);
	}
	assert_int_equal(write_read(p, p->a.qp, (uintptr_t)p->b.buf, mr->rkey, 256, 1),
			 IBV_WC_SUCCESS);
	assert_int_equal(ibv_dealloc_pd(other), 0);
}

/*
 * What the device refuses is IBV_REREG_MR_ERR_CMD with errno: no flag at
 * all (EINVAL), a result ibv_reg_mr would refuse (remote write without
 * local write: EINVAL; a range not mapped: EFAULT), a region with a memory
 * window bound to it (EBUSY, as for ibv_dereg_mr). The man page says not to
 * use such a region; rocemu leaves it exactly as it was, which is checked.
 */
static void rereg_device_errors(void **state)
{
	struct pair *p = *state;

	struct ibv_mr *mr = p->b.mr;
	struct mr_view v = view(mr);
	long page = sysconf(_SC_PAGESIZE);
	void *gone =
	    mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(gone != MAP_FAILED);
	assert_int_equal(munmap(gone, (size_t)page), 0);

	errno = 0;
	assert_int_equal(ibv_rereg_mr(mr, 0, NULL, NULL, 0, 0), IBV_REREG_MR_ERR_CMD);
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_int_equal(
	    ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_REMOTE_WRITE),
	    IBV_REREG_MR_ERR_CMD);
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_int_equal(
	    ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, gone, (size_t)page, 0),
	    IBV_REREG_MR_ERR_CMD);
	assert_int_equal(errno, EFAULT);
	assert_view(mr, v);

	/* A type 1 window bound to the region: busy until it goes. */
	assert_int_equal(
	    ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, MR_RW | IBV_ACCESS_MW_BIND),
	    0);
	struct ibv_mw *mw = ibv_alloc_mw(p->b.pd, IBV_MW_TYPE_1);
	assert_non_null(mw);
	struct ibv_mw_bind bind = {.wr_id = 5,
				   .send_flags = IBV_SEND_SIGNALED,
				   .bind_info = {.mr = mr,
						 .addr = (uintptr_t)p->b.buf,
						 .length = 64,
						 .mw_access_flags = IBV_ACCESS_REMOTE_READ}};
	assert_int_equal(ibv_bind_mw(p->b.qp, mw, &bind), 0);
	assert_int_equal(tu_side_poll(&p->b).opcode, IBV_WC_BIND_MW);
	errno = 0;
	assert_int_equal(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, MR_RW),
			 IBV_REREG_MR_ERR_CMD);
	assert_int_equal(errno, EBUSY);
	assert_int_equal(mr->rkey, v.rkey);
	assert_int_equal(ibv_dealloc_mw(mw), 0);
	assert_int_equal(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, MR_RW), 0);
	assert_view(mr, v);
	assert_int_equal(write_read(p, p->a.qp, (uintptr_t)p->b.buf, mr->rkey, 512, 2),
			 IBV_WC_SUCCESS);
}

/*
 * IBV_REREG_MR_CHANGE_ACCESS keeps the keys: the peer goes on with the R_Key
 * it was given, now checked against the new rights. Without remote write its
 * WRITE is a remote access error and the region is untouched; with it back,
 * the same R_Key works again. (rdma-core's test_mr_rereg_access and
 * test_mr_rereg_access_bad_flow rely on exactly this.)
 */
static void rereg_access_keeps_keys(void **state)
{
	struct pair *p = *state;

	struct ibv_mr *mr = p->b.mr;
	struct mr_view v = view(mr);
	uint64_t raddr = (uintptr_t)p->b.buf;

	assert_int_equal(write_read(p, p->a.qp, raddr, v.rkey, 300, 3), IBV_WC_SUCCESS);
	assert_int_equal(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
				      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ),
			 0);
	assert_view(mr, v);
	memset(p->b.buf, 0xC3, 300);
	assert_int_equal(rdma(&p->a, p->a.qp, IBV_WR_RDMA_WRITE, 0, 300, raddr, v.rkey),
			 IBV_WC_REM_ACCESS_ERR);
	for (int i = 0; i < 300; i++)
		assert_int_equal(p->b.buf[i], 0xC3);
	drain(ibv_cq_ex_to_cq(p->b.cq));
	rejoin(p);
	/* READ is still granted */
	assert_int_equal(rdma(&p->a, p->a.qp, IBV_WR_RDMA_READ, 0, 300, raddr, v.rkey),
			 IBV_WC_SUCCESS);
	assert_int_equal(p->a.buf[299], 0xC3);
	assert_int_equal(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, MR_RW), 0);
	assert_view(mr, v);
	assert_int_equal(write_read(p, p->a.qp, raddr, v.rkey, 300, 4), IBV_WC_SUCCESS);
}

/* A second RC QP pair, b's end in PD pd. */
static void extra_qps(struct pair *p, struct ibv_pd *pd, struct ibv_qp **qa, struct ibv_qp **qb)
{
	struct ibv_qp_init_attr ia = {
	    .send_cq = ibv_cq_ex_to_cq(p->a.cq),
	    .recv_cq = ibv_cq_ex_to_cq(p->a.cq),
	    .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = IBV_QPT_RC};

	*qa = ibv_create_qp(p->a.pd, &ia);
	ia.send_cq = ia.recv_cq = ibv_cq_ex_to_cq(p->b.cq);
	*qb = ibv_create_qp(pd, &ia);
	assert_non_null(*qa);
	assert_non_null(*qb);
	join(*qa, &p->a, *qb, &p->b);
}

/*
 * IBV_REREG_MR_CHANGE_PD keeps the keys and moves the region: the peer's
 * R_Key answers a QP of the new PD only (a QP of the old one gets a remote
 * access error), b can no longer use its L_Key on a QP of the old PD (local
 * protection error), the new PD cannot be deallocated while the region is
 * in it, and back in the old PD everything works as before.
 */
static void rereg_pd_keeps_keys(void **state)
{
	struct ibv_qp *qa2, *qb2;
	struct pair *p = *state;

	struct ibv_mr *mr = p->b.mr;
	struct mr_view v = view(mr);
	struct ibv_pd *pd2 = ibv_alloc_pd(p->b.ctx);
	uint64_t raddr = (uintptr_t)p->b.buf + 1024;
	assert_non_null(pd2);
	extra_qps(p, pd2, &qa2, &qb2);

	assert_int_equal(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0), 0);
	assert_ptr_equal(mr->pd, pd2);
	assert_int_equal(mr->lkey, v.lkey);
	assert_int_equal(mr->rkey, v.rkey);
	assert_int_equal(ibv_dealloc_pd(pd2), EBUSY);
	assert_int_equal(write_read(p, qa2, raddr, v.rkey, 700, 5), IBV_WC_SUCCESS);
	assert_int_equal(rdma(&p->a, p->a.qp, IBV_WR_RDMA_WRITE, 0, 8, raddr, v.rkey),
			 IBV_WC_REM_ACCESS_ERR);
	drain(ibv_cq_ex_to_cq(p->b.cq));
	rejoin(p);
	/* b's own WRITE from its region through its QP of the old PD */
	struct tu_side *b = &p->b;
	struct ibv_sge sge = {.addr = (uintptr_t)b->buf, .length = 8, .lkey = mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 0x88,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	wr.wr.rdma.remote_addr = (uintptr_t)p->a.buf;
	wr.wr.rdma.rkey = p->a.mr->rkey;
	assert_int_equal(ibv_post_send(b->qp, &wr, &bad), 0);
	assert_int_equal(tu_poll_any(ibv_cq_ex_to_cq(b->cq)).status, IBV_WC_LOC_PROT_ERR);
	drain(ibv_cq_ex_to_cq(p->a.cq));
	rejoin(p);

	assert_int_equal(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, p->b.pd, NULL, 0, 0), 0);
	assert_view(mr, v);
	assert_int_equal(write_read(p, p->a.qp, raddr, v.rkey, 700, 6), IBV_WC_SUCCESS);
	assert_int_equal(rdma(&p->a, qa2, IBV_WR_RDMA_WRITE, 0, 8, raddr, v.rkey),
			 IBV_WC_REM_ACCESS_ERR);
	assert_int_equal(ibv_destroy_qp(qa2), 0);
	assert_int_equal(ibv_destroy_qp(qb2), 0);
	drain(ibv_cq_ex_to_cq(p->a.cq));
	drain(ibv_cq_ex_to_cq(p->b.cq));
	assert_int_equal(ibv_dealloc_pd(pd2), 0);
}

/*
 * IBV_REREG_MR_CHANGE_TRANSLATION: the region now covers the new range
 * (mr->addr and mr->length say so) under new keys; the old R_Key is a
 * remote access error and nothing reaches either buffer through it; the new
 * one reaches the new buffer only. Then all three flags at once: back to
 * the first buffer, into a second PD, read-only for the peer.
 */
static void rereg_translation_new_keys(void **state)
{
	struct ibv_qp *qa2, *qb2;
	struct pair *p = *state;

	struct ibv_mr *mr = p->b.mr;
	struct mr_view v = view(mr);
	uint8_t *nbuf = aligned_alloc(4096, 8192);
	assert_non_null(nbuf);
	memset(nbuf, 0, 8192);
	memset(p->b.buf, 0x5A, 8192);

	assert_int_equal(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, nbuf, 8192, 0), 0);
	assert_ptr_equal(mr->addr, nbuf);
	assert_int_equal(mr->length, 8192);
	assert_ptr_equal(mr->pd, v.pd);
	assert_int_not_equal(mr->rkey, v.rkey);
	assert_int_equal(
	    rdma(&p->a, p->a.qp, IBV_WR_RDMA_WRITE, 0, 64, (uintptr_t)p->b.buf, v.rkey),
	    IBV_WC_REM_ACCESS_ERR);
	drain(ibv_cq_ex_to_cq(p->b.cq));
	rejoin(p);
	/* the old address with the new key is outside the region */
	assert_int_equal(
	    rdma(&p->a, p->a.qp, IBV_WR_RDMA_WRITE, 0, 64, (uintptr_t)p->b.buf + 8192, mr->rkey),
	    IBV_WC_REM_ACCESS_ERR);
	drain(ibv_cq_ex_to_cq(p->b.cq));
	rejoin(p);
	for (int i = 0; i < 8192; i++)
		assert_int_equal(p->b.buf[i], 0x5A);
	for (int i = 0; i < 8192; i++)
		assert_int_equal(nbuf[i], 0);
	assert_int_equal(write_read(p, p->a.qp, (uintptr_t)nbuf + 4000, mr->rkey, 4000, 7),
			 IBV_WC_SUCCESS);
	assert_memory_equal(nbuf + 4000, p->a.buf, 4000);
	for (int i = 0; i < 8192; i++)
		assert_int_equal(p->b.buf[i], 0x5A);

	/* All three: the first buffer again, PD pd2, remote read only. */
	struct ibv_pd *pd2 = ibv_alloc_pd(p->b.ctx);
	assert_non_null(pd2);
	extra_qps(p, pd2, &qa2, &qb2);
	uint32_t k1 = mr->rkey;
	assert_int_equal(ibv_rereg_mr(mr, REREG_ALL, pd2, p->b.buf, 4096,
				      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ),
			 0);
	assert_ptr_equal(mr->addr, p->b.buf);
	assert_int_equal(mr->length, 4096);
	assert_ptr_equal(mr->pd, pd2);
	assert_int_not_equal(mr->rkey, k1);
	assert_int_equal(rdma(&p->a, qa2, IBV_WR_RDMA_READ, 0, 4096, (uintptr_t)p->b.buf, mr->rkey),
			 IBV_WC_SUCCESS);
	assert_int_equal(p->a.buf[4095], 0x5A);
	assert_int_equal(rdma(&p->a, qa2, IBV_WR_RDMA_WRITE, 0, 8, (uintptr_t)p->b.buf, mr->rkey),
			 IBV_WC_REM_ACCESS_ERR);
	assert_int_equal(p->b.buf[0], 0x5A);
	assert_int_equal(ibv_destroy_qp(qa2), 0);
	assert_int_equal(ibv_destroy_qp(qb2), 0);
	drain(ibv_cq_ex_to_cq(p->a.cq));
	drain(ibv_cq_ex_to_cq(p->b.cq));
	/* back as tu_side_close expects it */
	assert_int_equal(ibv_rereg_mr(mr, REREG_ALL, p->b.pd, p->b.buf, TU_BUF, MR_RW), 0);
	assert_int_equal(ibv_dealloc_pd(pd2), 0);
	free(nbuf);
}

/*
 * A WRITE, then a READ, of 32 packets in flight while b moves the region's
 * translation (8 rounds each): it completes or fails with a remote access
 * error; once ibv_rereg_mr has returned nothing lands in the old buffer
 * (overwritten by b right then) nor in the new one (the peer never had the
 * new key), and a READ that completed returns the old bytes, whole.
 */
static void rereg_translation_in_flight(void **state)
{
	struct pair *p = *state;

	struct ibv_mr *mr = p->b.mr;
	uint32_t len = TU_BUF / 2;
	uint8_t *nbuf = aligned_alloc(4096, TU_BUF);
	assert_non_null(nbuf);
	for (int round = 0; round < 16; round++) {
		bool read = round >= 8;
		struct ibv_sge sge = {
		    .addr = (uintptr_t)p->a.buf, .length = len, .lkey = p->a.mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 0x99,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;
		uint8_t *from = round % 2 ? nbuf : p->b.buf, *to = round % 2 ? p->b.buf : nbuf;
		uint8_t fill = (uint8_t)(0x11 + round);

		memset(read ? from : p->a.buf, fill, len);
		if (read)
			memset(p->a.buf, 0, len);
		memset(to, 0x77, TU_BUF);
		wr.wr.rdma.remote_addr = (uintptr_t)from;
		wr.wr.rdma.rkey = mr->rkey;
		assert_int_equal(ibv_post_send(p->a.qp, &wr, &bad), 0);
		/* later rounds move sooner: some land before, some in the middle */
		usleep((useconds_t)(round % 8 * 300));
		assert_int_equal(
		    ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, to, TU_BUF, 0), 0);
		memset(from, 0xEE, TU_BUF);
		struct ibv_wc wc = tu_poll_any(ibv_cq_ex_to_cq(p->a.cq));
		assert_int_equal(wc.wr_id, 0x99);
		if (wc.status != IBV_WC_SUCCESS) {
			assert_int_equal(wc.status, IBV_WC_REM_ACCESS_ERR);
			drain(ibv_cq_ex_to_cq(p->b.cq));
			rejoin(p);
		}
		for (uint32_t i = 0; i < TU_BUF; i++) {
			assert_int_equal(from[i], 0xEE);
			assert_int_equal(to[i], 0x77);
		}
		/* a READ that completed read the old memory only, all of it before
		 * the move (what was left after it would have failed) */
		for (uint32_t i = 0; read && wc.status == IBV_WC_SUCCESS && i < len; i++)
			assert_int_equal(p->a.buf[i], fill);
	}
	assert_int_equal(
	    ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, p->b.buf, TU_BUF, 0), 0);
	assert_int_equal(write_read(p, p->a.qp, (uintptr_t)p->b.buf, mr->rkey, 2048, 8),
			 IBV_WC_SUCCESS);
	free(nbuf);
}

/* ------------------------------------------------------------------------ */
/* On-demand paging                                                           */

#define ODP_LEN	   65536
#define ODP_ACCESS (MR_RW | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ON_DEMAND)

static struct ibv_cq *cq_of(struct tu_side *s)
{
	return ibv_cq_ex_to_cq(s->cq);
}

/* Pages never touched: an ODP region's memory as it is at registration. */
static uint8_t *fresh(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	return p;
}

static struct ibv_mr *reg(struct ibv_pd *pd, void *addr, size_t len, unsigned access)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, addr, len, (int)access);

	assert_non_null(mr);
	return mr;
}

static struct ibv_qp *make_qp(struct tu_side *s, enum ibv_qp_type type, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia = {
	    .send_cq = cq_of(s),
	    .recv_cq = cq_of(s),
	    .srq = srq,
	    .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = type};
	struct ibv_qp *qp = ibv_create_qp(s->pd, &ia);

	assert_non_null(qp);
	return qp;
}

#define ODP_QKEY 0x11110000u

/* qa (a's) and qb (b's) of type, connected to each other. */
static void odp_connect(struct pair *p, enum ibv_qp_type type, struct ibv_qp *qa, struct ibv_qp *qb)
{
	if (type == IBV_QPT_RC) {
		/* the ODP access word as the QP's too, as rdma-core's tests pass it
		 * (the issue saw EINVAL from ibv_modify_qp to INIT) */
		join_access(qa, &p->a, qb, &p->b, ODP_ACCESS);
	} else if (type == IBV_QPT_UC) {
		tu_rc_to_rts(qa, &p->b.gid, TU_GID_INDEX, qb->qp_num, IBV_ACCESS_REMOTE_WRITE);
		tu_rc_to_rts(qb, &p->a.gid, TU_GID_INDEX, qa->qp_num, IBV_ACCESS_REMOTE_WRITE);
	} else {
		tu_ud_to_rts(qa, ODP_QKEY, 7);
		tu_ud_to_rts(qb, ODP_QKEY, 7);
	}
}

static uint8_t pat(uint32_t i, uint8_t seed)
{
	return (uint8_t)(seed + i * 7 + (i >> 8));
}

/* A SEND of len bytes from a's region at off into b's at off (plus the GRH
 * room on UD), through qa/qb, or into b's SRQ when srq is set. */
static void odp_send(struct pair *p, enum ibv_qp_type type, struct ibv_qp *qa, struct ibv_qp *qb,
		     struct ibv_srq *srq, struct ibv_mr *ma, struct ibv_mr *mb, uint32_t off,
		     uint32_t len, uint8_t seed)
{
	uint32_t grh = type == IBV_QPT_UD ? 40 : 0;
	uint8_t *src = (uint8_t *)ma->addr + off, *dst = (uint8_t *)mb->addr + off;
	struct ibv_sge rs = {.addr = (uintptr_t)dst, .length = len + grh, .lkey = mb->lkey};
	struct ibv_recv_wr rwr = {.wr_id = 0x21, .sg_list = &rs, .num_sge = 1}, *rbad;
	struct ibv_sge ss = {.addr = (uintptr_t)src, .length = len, .lkey = ma->lkey};
	struct ibv_send_wr swr = {.wr_id = 0x22,
				  .sg_list = &ss,
				  .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED},
			   *sbad;
	struct ibv_ah *ah = NULL;
	struct ibv_wc wc;

	if (srq)
		assert_int_equal(ibv_post_srq_recv(srq, &rwr, &rbad), 0);
	else
		assert_int_equal(ibv_post_recv(qb, &rwr, &rbad), 0);
	for (uint32_t i = 0; i < len; i++)
		src[i] = pat(i, seed);
	if (type == IBV_QPT_UD) {
		struct ibv_ah_attr aa = {
		    .is_global = 1,
		    .grh = {.dgid = p->b.gid, .sgid_index = TU_GID_INDEX, .hop_limit = 64},
		    .port_num = 1};
		ah = ibv_create_ah(p->a.pd, &aa);
		assert_non_null(ah);
		swr.wr.ud.ah = ah;
		swr.wr.ud.remote_qpn = qb->qp_num;
		swr.wr.ud.remote_qkey = ODP_QKEY;
	}
	assert_int_equal(ibv_post_send(qa, &swr, &sbad), 0);
	wc = tu_poll_one(cq_of(&p->a));
	assert_int_equal(wc.wr_id, 0x22);
	wc = tu_poll_one(cq_of(&p->b));
	assert_int_equal(wc.wr_id, 0x21);
	assert_int_equal(wc.byte_len, len + grh);
	assert_memory_equal(dst + grh, src, len);
	if (ah)
		assert_int_equal(ibv_destroy_ah(ah), 0);
}

/* One RDMA op between local address laddr (region ma) and raddr (region mb) through qa: its
 * status. */
static enum ibv_wc_status odp_rdma(struct pair *p, struct ibv_qp *qa, enum ibv_wr_opcode op,
				   struct ibv_mr *ma, void *laddr, struct ibv_mr *mb,
				   uint64_t raddr, uint32_t len)
{
	return tu_rdma(qa, cq_of(&p->a), laddr, ma->lkey, op, len, raddr, mb->rkey);
}

/* One round of odp_every_qp_type gone: its QPs, then its SRQ (if any), its
 * regions and their memory. */
static void odp_round_free(struct ibv_qp *qa, struct ibv_qp *qb, struct ibv_srq *srq,
			   struct ibv_mr *ma, struct ibv_mr *mb, uint8_t *ba, uint8_t *bb)
{
	assert_int_equal(ibv_destroy_qp(qa), 0);
	assert_int_equal(ibv_destroy_qp(qb), 0);
	if (srq)
		assert_int_equal(ibv_destroy_srq(srq), 0);
	assert_int_equal(ibv_dereg_mr(ma), 0);
	assert_int_equal(ibv_dereg_mr(mb), 0);
	munmap(ba, ODP_LEN);
	munmap(bb, ODP_LEN);
}

static uint32_t odp_caps_of(const struct ibv_device_attr_ex *x, enum ibv_qp_type type)
{
	const struct ibv_odp_caps *c = &x->odp_caps;

	return type == IBV_QPT_RC   ? c->per_transport_caps.rc_odp_caps
	       : type == IBV_QPT_UC ? c->per_transport_caps.uc_odp_caps
				    : c->per_transport_caps.ud_odp_caps;
}

/*
 * Every operation ibv_query_device_ex's odp_caps advertises, per transport
 * (RC, UC, UD; SRQ receives), done on ON_DEMAND regions over pages nobody
 * touched before: the caps are the truth only if each of them works. RC
 * advertises everything, UC SEND/RECV/WRITE, UD SEND/RECV.
 */
static void odp_every_qp_type(void **state)
{
	enum ibv_qp_type types[] = {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD};
	struct ibv_device_attr_ex x;
	struct pair *p = *state;

	assert_int_equal(ibv_query_device_ex(p->a.ctx, NULL, &x), 0);
	assert_true(x.odp_caps.general_caps & IBV_ODP_SUPPORT);
	uint32_t all = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
		       IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
	assert_int_equal(odp_caps_of(&x, IBV_QPT_RC), all);
	assert_int_equal(odp_caps_of(&x, IBV_QPT_UC),
			 IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE);
	assert_int_equal(odp_caps_of(&x, IBV_QPT_UD), IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV);
	assert_int_equal(x.xrc_odp_caps, all & ~(uint32_t)IBV_ODP_SUPPORT_RECV);

	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		uint8_t *ba = fresh(ODP_LEN), *bb = fresh(ODP_LEN);
		struct ibv_mr *ma = reg(p->a.pd, ba, ODP_LEN, ODP_ACCESS);
		struct ibv_mr *mb = reg(p->b.pd, bb, ODP_LEN, ODP_ACCESS);
		struct ibv_qp *qa = make_qp(&p->a, types[t], NULL),
			      *qb = make_qp(&p->b, types[t], NULL);
		uint32_t caps = odp_caps_of(&x, types[t]);

		odp_connect(p, types[t], qa, qb);
		assert_true(caps & IBV_ODP_SUPPORT_SEND && caps & IBV_ODP_SUPPORT_RECV);
		odp_send(p, types[t], qa, qb, NULL, ma, mb, 0, types[t] == IBV_QPT_UD ? 1000 : 3000,
			 (uint8_t)(0x30 + t));
		if (caps & IBV_ODP_SUPPORT_WRITE) {
			for (uint32_t i = 0; i < 5000; i++)
				ba[8192 + i] = pat(i, 0x41);
			assert_int_equal(odp_rdma(p, qa, IBV_WR_RDMA_WRITE, ma, ba + 8192, mb,
						  (uintptr_t)bb + 12288 + 100, 5000),
					 IBV_WC_SUCCESS);
			if (types[t] == IBV_QPT_UC) /* no ACK: the data is there once b polls it */
				for (double end = tu_now() + 10;
				     bb[12288 + 100 + 4999] != pat(4999, 0x41) && tu_now() < end;)
					;
			assert_memory_equal(bb + 12288 + 100, ba + 8192, 5000);
		}
		if (caps & IBV_ODP_SUPPORT_READ) {
			for (uint32_t i = 0; i < 3000; i++)
				bb[24576 + i] = pat(i, 0x52);
			assert_int_equal(odp_rdma(p, qa, IBV_WR_RDMA_READ, ma, ba + 32768, mb,
						  (uintptr_t)bb + 24576, 3000),
					 IBV_WC_SUCCESS);
			assert_memory_equal(ba + 32768, bb + 24576, 3000);
		}
		if (caps & IBV_ODP_SUPPORT_ATOMIC) {
			uint64_t v;
			assert_int_equal(odp_rdma(p, qa, IBV_WR_ATOMIC_FETCH_AND_ADD, ma,
						  ba + 40960, mb, (uintptr_t)bb + 49152, 8),
					 IBV_WC_SUCCESS);
			memcpy(&v, ba + 40960, 8);
			assert_int_equal(v, 0); /* the page was never touched */
			memcpy(&v, bb + 49152, 8);
			assert_int_equal(v, TU_FETCH_ADD);
		}
		odp_round_free(qa, qb, NULL, ma, mb, ba, bb);
	}

	/* RC receives through an SRQ into an ODP region */
	uint8_t *ba = fresh(ODP_LEN), *bb = fresh(ODP_LEN);
	struct ibv_mr *ma = reg(p->a.pd, ba, ODP_LEN, ODP_ACCESS);
	struct ibv_mr *mb = reg(p->b.pd, bb, ODP_LEN, ODP_ACCESS);
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 8, .max_sge = 1}};
	struct ibv_srq *srq = ibv_create_srq(p->b.pd, &sa);
	assert_non_null(srq);
	struct ibv_qp *qa = make_qp(&p->a, IBV_QPT_RC, NULL), *qb = make_qp(&p->b, IBV_QPT_RC, srq);
	join(qa, &p->a, qb, &p->b);
	odp_send(p, IBV_QPT_RC, qa, qb, srq, ma, mb, 20000, 4000, 0x63);
	odp_round_free(qa, qb, srq, ma, mb, ba, bb);
}

/*
 * Implicit ODP (addr NULL, length SIZE_MAX, advertised as
 * IBV_ODP_SUPPORT_IMPLICIT): one key for the whole address space, addressed
 * by host address, locally and remotely; an address nothing is mapped at is
 * a remote access error, not a crash.
 */
static void odp_implicit(void **state)
{
	struct ibv_device_attr_ex x;
	struct pair *p = *state;

	assert_int_equal(ibv_query_device_ex(p->a.ctx, NULL, &x), 0);
	assert_true(x.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT);
	struct ibv_mr *ma = reg(p->a.pd, NULL, SIZE_MAX, ODP_ACCESS);
	struct ibv_mr *mb = reg(p->b.pd, NULL, SIZE_MAX, ODP_ACCESS);
	assert_null(ma->addr);
	assert_int_equal(ma->length, SIZE_MAX);
	uint8_t *ba = fresh(ODP_LEN), *bb = fresh(ODP_LEN);
	long page = sysconf(_SC_PAGESIZE);

	for (uint32_t i = 0; i < 6000; i++)
		ba[i] = pat(i, 0x71);
	assert_int_equal(
	    odp_rdma(p, p->a.qp, IBV_WR_RDMA_WRITE, ma, ba, mb, (uintptr_t)bb + 777, 6000),
	    IBV_WC_SUCCESS);
	assert_memory_equal(bb + 777, ba, 6000);
	assert_int_equal(
	    odp_rdma(p, p->a.qp, IBV_WR_RDMA_READ, ma, ba + 16384, mb, (uintptr_t)bb + 777, 6000),
	    IBV_WC_SUCCESS);
	assert_memory_equal(ba + 16384, ba, 6000);
	/* a hole in b's address space */
	assert_int_equal(munmap(bb + 8 * page, (size_t)page), 0);
	assert_int_equal(
	    odp_rdma(p, p->a.qp, IBV_WR_RDMA_WRITE, ma, ba, mb, (uintptr_t)bb + 8 * page + 8, 8),
	    IBV_WC_REM_ACCESS_ERR);
	assert_int_equal(ibv_dereg_mr(ma), 0);
	assert_int_equal(ibv_dereg_mr(mb), 0);
	munmap(ba, ODP_LEN);
	munmap(bb, ODP_LEN);
}

/*
 * ibv_advise_mr(3) on an ODP region: every advice and the flush flag are
 * accepted for a range of it (there is nothing to prefetch: it validates);
 * another advice, unknown flags or no SGE are EINVAL; an lkey that does not
 * translate, a range past the region or a page with nothing mapped EFAULT.
 */
static void odp_advise_mr(void **state)
{
	long page = sysconf(_SC_PAGESIZE);
	struct tu_side s;
	(void)state;

	tu_side_open(&s, devs[0], IBV_QPT_RC);
	uint8_t *b = fresh(4 * (size_t)page);
	struct ibv_mr *mr = reg(s.pd, b, 4 * (size_t)page, ODP_ACCESS);
	struct ibv_sge sge = {
	    .addr = (uintptr_t)b + 100, .length = 2 * (uint32_t)page, .lkey = mr->lkey};
	enum ibv_advise_mr_advice ok[] = {IBV_ADVISE_MR_ADVICE_PREFETCH,
					  IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
					  IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(ibv_advise_mr(s.pd, ok[i], 0, &sge, 1), 0);
		assert_int_equal(ibv_advise_mr(s.pd, ok[i], IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1), 0);
	}
	assert_int_equal(ibv_advise_mr(s.pd, (enum ibv_advise_mr_advice)7, 0, &sge, 1), EINVAL);
	assert_int_equal(ibv_advise_mr(s.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 2, &sge, 1), EINVAL);
	assert_int_equal(ibv_advise_mr(s.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 0), EINVAL);
	struct ibv_sge bad = sge;
	bad.lkey ^= 0x80;
	assert_int_equal(ibv_advise_mr(s.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &bad, 1), EFAULT);
	bad = sge;
	bad.length = 4 * (uint32_t)page;
	assert_int_equal(ibv_advise_mr(s.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &bad, 1), EFAULT);
	assert_int_equal(munmap(b + page, (size_t)page), 0);
	assert_int_equal(ibv_advise_mr(s.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1), EFAULT);
	sge.addr = (uintptr_t)b + 2 * page;
	sge.length = (uint32_t)page;
	assert_int_equal(ibv_advise_mr(s.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1), 0);
	assert_int_equal(ibv_dereg_mr(mr), 0);
	munmap(b, (size_t)page);
	munmap(b + 2 * page, 2 * (size_t)page);
	tu_side_close(&s);
}

/* ------------------------------------------------------------------------ */
/* Device memory                                                              */

#define DM_MAX	  (256u * 1024u)
#define DM_ACCESS (IBV_ACCESS_ZERO_BASED | MR_RW | IBV_ACCESS_REMOTE_ATOMIC)

static struct ibv_dm *dm_alloc(struct ibv_context *ctx, size_t len)
{
	struct ibv_alloc_dm_attr a = {.length = len};
	struct ibv_dm *dm = ibv_alloc_dm(ctx, &a);

	assert_non_null(dm);
	return dm;
}

/*
 * ibv_alloc_dm(3): max_dm_size bytes per device, each allocation zeroed;
 * length 0, an alignment beyond a page or comp_mask bits are EINVAL, more
 * than is left ENOMEM (and freeing gives it back). Copies in and out move
 * whole 4-byte words at 4-byte offsets (EINVAL otherwise, as on mlx5), and
 * stay inside the allocation (EFAULT).
 */
static void dm_alloc_and_copy(void **state)
{
	struct ibv_device_attr_ex x;
	struct ibv_alloc_dm_attr a;
	struct tu_side s;
	uint8_t in[64], out[64];
	(void)state;

	tu_side_open(&s, devs[0], IBV_QPT_RC);
	assert_int_equal(ibv_query_device_ex(s.ctx, NULL, &x), 0);
	assert_int_equal(x.max_dm_size, DM_MAX);
	a = (struct ibv_alloc_dm_attr){.length = 0};
	errno = 0;
	assert_null(ibv_alloc_dm(s.ctx, &a));
	assert_int_equal(errno, EINVAL);
	a = (struct ibv_alloc_dm_attr){.length = 64, .log_align_req = 13};
	assert_null(ibv_alloc_dm(s.ctx, &a));
	assert_int_equal(errno, EINVAL);
	a = (struct ibv_alloc_dm_attr){.length = 64, .comp_mask = 1};
	assert_null(ibv_alloc_dm(s.ctx, &a));
	assert_int_equal(errno, EINVAL);
	a = (struct ibv_alloc_dm_attr){.length = DM_MAX + 1};
	assert_null(ibv_alloc_dm(s.ctx, &a));
	assert_int_equal(errno, ENOMEM);

	struct ibv_dm *h1 = dm_alloc(s.ctx, DM_MAX / 2), *h2 = dm_alloc(s.ctx, DM_MAX / 2);
	a = (struct ibv_alloc_dm_attr){.length = 4};
	assert_null(ibv_alloc_dm(s.ctx, &a));
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(ibv_free_dm(h2), 0);
	a = (struct ibv_alloc_dm_attr){.length = 100, .log_align_req = 12};
	struct ibv_dm *dm = ibv_alloc_dm(s.ctx, &a);
	assert_non_null(dm);

	assert_int_equal(ibv_memcpy_from_dm(out, dm, 0, 64), 0);
	for (int i = 0; i < 64; i++)
		assert_int_equal(out[i], 0);
	for (int i = 0; i < 64; i++)
		in[i] = (uint8_t)(i * 3 + 1);
	assert_int_equal(ibv_memcpy_to_dm(dm, 36, in, 64), 0);
	assert_int_equal(ibv_memcpy_from_dm(out, dm, 36, 64), 0);
	assert_memory_equal(in, out, 64);
	assert_int_equal(ibv_memcpy_to_dm(dm, 3, in, 4), EINVAL);
	assert_int_equal(ibv_memcpy_to_dm(dm, 4, in, 3), EINVAL);
	assert_int_equal(ibv_memcpy_from_dm(out, dm, 3, 4), EINVAL);
	assert_int_equal(ibv_memcpy_from_dm(out, dm, 4, 3), EINVAL);
	assert_int_equal(ibv_memcpy_to_dm(dm, 100, in, 4), EFAULT);
	assert_int_equal(ibv_memcpy_to_dm(dm, 0, in, 104), EFAULT);
	assert_int_equal(ibv_memcpy_from_dm(out, dm, 96, 8), EFAULT);
	assert_int_equal(ibv_memcpy_from_dm(out, dm, 96, 4), 0);
	assert_int_equal(ibv_free_dm(dm), 0);
	assert_int_equal(ibv_free_dm(h1), 0);
	tu_side_close(&s);
}

/*
 * ibv_reg_dm_mr(3): zero-based regions only (IBV_ACCESS_ZERO_BASED is
 * required; ON_DEMAND, MW_BIND are not for device memory), inside the
 * allocation; the memory cannot be freed under a region (EBUSY) and
 * ibv_rereg_mr refuses such a region (IBV_REREG_MR_ERR_CMD, EINVAL).
 */
static void dm_region_rules(void **state)
{
	struct tu_side s;
	(void)state;

	tu_side_open(&s, devs[0], IBV_QPT_RC);
	struct ibv_dm *dm = dm_alloc(s.ctx, 4096);
	unsigned bad_access[] = {MR_RW, DM_ACCESS | IBV_ACCESS_ON_DEMAND,
				 DM_ACCESS | IBV_ACCESS_MW_BIND,
				 IBV_ACCESS_ZERO_BASED | IBV_ACCESS_REMOTE_WRITE};
	for (size_t i = 0; i < sizeof(bad_access) / sizeof(bad_access[0]); i++) {
		errno = 0;
		assert_null(ibv_reg_dm_mr(s.pd, dm, 0, 64, bad_access[i]));
		assert_int_equal(errno, EINVAL);
	}
	assert_null(ibv_reg_dm_mr(s.pd, dm, 4000, 100, DM_ACCESS));
	assert_int_equal(errno, EINVAL);
	assert_null(ibv_reg_dm_mr(s.pd, dm, 0, 4100, DM_ACCESS));
	assert_int_equal(errno, EINVAL);
	struct ibv_mr *mr = ibv_reg_dm_mr(s.pd, dm, 1024, 3072, DM_ACCESS);
	assert_non_null(mr);
	assert_null(mr->addr);
	assert_int_equal(mr->length, 3072);
	assert_ptr_equal(mr->pd, s.pd);
	struct ibv_mr *empty = ibv_reg_dm_mr(s.pd, dm, 0, 0, DM_ACCESS);
	assert_non_null(empty);
	assert_int_equal(ibv_free_dm(dm), EBUSY);
	errno = 0;
	assert_int_equal(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, DM_ACCESS),
			 IBV_REREG_MR_ERR_CMD);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(ibv_dereg_mr(mr), 0);
	assert_int_equal(ibv_free_dm(dm), EBUSY);
	assert_int_equal(ibv_dereg_mr(empty), 0);
	assert_int_equal(ibv_free_dm(dm), 0);
	tu_side_close(&s);
}

/*
 * A region on b's device memory used by the peer and by b: a WRITEs into
 * it and READs back, both at zero-based addresses, and an atomic lands in
 * it (each checked with ibv_memcpy_from_dm); past its end is a remote access
 * error; b SENDs from it to a.
 */
static void dm_remote_access(void **state)
{
	uint8_t got[2048];
	uint64_t word;
	struct pair *p = *state;

	struct ibv_dm *dm = dm_alloc(p->b.ctx, 8192);
	struct ibv_mr *mr = ibv_reg_dm_mr(p->b.pd, dm, 1024, 4096, DM_ACCESS);
	assert_non_null(mr);

	for (uint32_t i = 0; i < 2000; i++)
		p->a.buf[i] = pat(i, 0x19);
	assert_int_equal(rdma(&p->a, p->a.qp, IBV_WR_RDMA_WRITE, 0, 2000, 100, mr->rkey),
			 IBV_WC_SUCCESS);
	assert_int_equal(ibv_memcpy_from_dm(got, dm, 1024 + 100, 2000), 0);
	assert_memory_equal(got, p->a.buf, 2000);
	assert_int_equal(rdma(&p->a, p->a.qp, IBV_WR_RDMA_READ, 4096, 1000, 600, mr->rkey),
			 IBV_WC_SUCCESS);
	assert_memory_equal(p->a.buf + 4096, p->a.buf + 500, 1000);
	assert_int_equal(odp_rdma(p, p->a.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, p->a.mr, p->a.buf + 8192,
				  mr, 4000, 8),
			 IBV_WC_SUCCESS);
	assert_int_equal(ibv_memcpy_from_dm(&word, dm, 1024 + 4000, 8), 0);
	assert_int_equal(word, TU_FETCH_ADD);

	/* b SENDs 1000 bytes from its device memory */
	struct ibv_sge rs = {
	    .addr = (uintptr_t)p->a.buf + 16384, .length = 2048, .lkey = p->a.mr->lkey};
	struct ibv_recv_wr rwr = {.wr_id = 0x31, .sg_list = &rs, .num_sge = 1}, *rbad;
	struct ibv_sge ss = {.addr = 100, .length = 1000, .lkey = mr->lkey};
	struct ibv_send_wr swr = {.wr_id = 0x32,
				  .sg_list = &ss,
				  .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED},
			   *sbad;
	assert_int_equal(ibv_post_recv(p->a.qp, &rwr, &rbad), 0);
	assert_int_equal(ibv_post_send(p->b.qp, &swr, &sbad), 0);
	assert_int_equal(tu_poll_one(cq_of(&p->b)).wr_id, 0x32);
	assert_int_equal(tu_poll_one(cq_of(&p->a)).byte_len, 1000);
	assert_memory_equal(p->a.buf + 16384, p->a.buf, 1000);

	assert_int_equal(rdma(&p->a, p->a.qp, IBV_WR_RDMA_WRITE, 0, 8, 4092, mr->rkey),
			 IBV_WC_REM_ACCESS_ERR);
	assert_int_equal(ibv_dereg_mr(mr), 0);
	assert_int_equal(ibv_free_dm(dm), 0);
	drain(cq_of(&p->b));
}

int main(void)
{
	char path[] = "/tmp/rocemu-mem-XXXXXX";

	devs = tu_devices(path,
			  "[rocemu0]\nport = ring:mem:a\nip = 10.79.6.1/24\n"
			  "[rocemu1]\nport = ring:mem:b\nip = 10.79.6.2/24\n",
			  2, &n_devs);
	if (!devs)
		return 1;
	const struct CMUnitTest tests[] = {
	    PAIR_TEST(rereg_input_errors),	   PAIR_TEST(rereg_device_errors),
	    PAIR_TEST(rereg_access_keeps_keys),	   PAIR_TEST(rereg_pd_keeps_keys),
	    PAIR_TEST(rereg_translation_new_keys), PAIR_TEST(rereg_translation_in_flight),
	    PAIR_TEST(odp_every_qp_type),	   PAIR_TEST(odp_implicit),
	    cmocka_unit_test(odp_advise_mr),	   cmocka_unit_test(dm_alloc_and_copy),
	    cmocka_unit_test(dm_region_rules),	   PAIR_TEST(dm_remote_access),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	ibv_free_device_list(devs);
	return rc;
}
