/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests for CQs, SRQs and AHs against a stand-in engine: ring order
 * across wrap-around, overflow (event once, queued entries intact),
 * ibv_req_notify_cq arm semantics, resize, the SRQ limit event, AH checks.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "stub_fixture.h"

static int setup(void **state)
{
	return fixture_setup(state, 16, false);
}

/* The notify callback runs with the engine lock held. */
static void on_notify(void *arg)
{
	struct fixture *f = arg;

	assert_true(f->e->locked);
	f->notified++;
}

static struct rocemu_wc wc_of(uint64_t wr_id, enum ibv_wc_status status)
{
	return (struct rocemu_wc){.wr_id = wr_id,
				  .status = status,
				  .opcode = IBV_WC_RECV,
				  .byte_len = (uint32_t)wr_id * 3,
				  .qp_num = 17};
}

/* rocemu_cq_push is an internal call: the engine lock is held around it. */
static int push(struct fixture *f, struct rocemu_cq *cq, uint64_t wr_id, enum ibv_wc_status st,
		bool solicited)
{
	struct rocemu_wc wc = wc_of(wr_id, st);
	int rc;

	rocemu_engine_lock(f->e);
	rc = rocemu_cq_push(cq, &wc, solicited);
	rocemu_engine_unlock(f->e);
	return rc;
}

static void expect_polled(struct rocemu_cq *cq, uint64_t first, unsigned n)
{
	struct rocemu_wc wc[64];
	unsigned i;

	assert_true(n <= 64);
	assert_int_equal(rocemu_cq_poll(cq, 64, wc), (int)n);
	for (i = 0; i < n; i++) {
		assert_int_equal(wc[i].wr_id, first + i);
		assert_int_equal(wc[i].byte_len, (first + i) * 3);
		assert_int_equal(wc[i].qp_num, 17);
	}
}

/* ------------------------------------------------------------------------ */

static void test_cq_create_limits(void **state)
{
	struct fixture *f = *state;
	struct rocemu_cq *cq[20];
	unsigned n = 0;

	assert_int_equal(rocemu_cq_create(f->e, 0, NULL, NULL, NULL, &cq[0]), -EINVAL);
	assert_int_equal(rocemu_cq_create(f->e, f->e->caps.max_cqe + 1, NULL, NULL, NULL, &cq[0]),
			 -EINVAL);
	assert_int_equal(rocemu_cq_create(NULL, 4, NULL, NULL, NULL, &cq[0]), -EINVAL);
	while (n < 20 && rocemu_cq_create(f->e, 4, NULL, NULL, NULL, &cq[n]) == 0)
		n++;
	assert_int_equal(n, f->e->caps.max_cq);
	assert_true(rocemu_cq_capacity(cq[0]) >= 4);
	assert_ptr_equal(rocemu_cq_engine(cq[0]), f->e);
	/* Half are left for the table's teardown to free. */
	for (unsigned i = 0; i < n / 2; i++)
		assert_int_equal(rocemu_cq_destroy(cq[i]), 0);
}

static void test_cq_push_poll_order(void **state)
{
	struct fixture *f = *state;
	struct rocemu_wc wc[4];
	struct rocemu_cq *cq;
	uint64_t next = 0, expect = 0;
	unsigned round;

	assert_int_equal(rocemu_cq_create(f->e, 5, NULL, NULL, NULL, &cq), 0);
	assert_int_equal(rocemu_cq_poll(cq, 4, wc), 0);
	assert_int_equal(f->e->progress_calls, 1); /* poll drives progress first */
	assert_int_equal(f->e->app_polls, 1);
	/* Uneven pushes and pops so head and tail wrap many times. */
	for (round = 0; round < 50; round++) {
		unsigned pushes = 1 + round % 4, i;
		int got;

		for (i = 0; i < pushes && rocemu_cq_free_slots(cq) > 0; i++)
			assert_int_equal(push(f, cq, next++, IBV_WC_SUCCESS, false), 0);
		got = rocemu_cq_poll(cq, 1 + round % 3, wc);
		assert_true(got > 0);
		for (i = 0; i < (unsigned)got; i++)
			assert_int_equal(wc[i].wr_id, expect++);
	}
	expect_polled(cq, expect, (unsigned)(next - expect));
	assert_int_equal(rocemu_cq_free_slots(cq), 5);
	assert_int_equal(rocemu_cq_poll(cq, -1, wc), -EINVAL);
	assert_int_equal(rocemu_cq_poll(cq, 1, NULL), -EINVAL);
	assert_int_equal(rocemu_cq_poll(cq, 0, NULL), 0);
	assert_int_equal(rocemu_cq_destroy(cq), 0);
}

static void test_cq_overflow(void **state)
{
	struct fixture *f = *state;
	int ctx_marker;
	struct rocemu_cq *cq;
	unsigned i;

	assert_int_equal(rocemu_cq_create(f->e, 4, NULL, NULL, &ctx_marker, &cq), 0);
	for (i = 0; i < 4; i++)
		assert_int_equal(push(f, cq, i, IBV_WC_SUCCESS, false), 0);
	assert_int_equal(rocemu_cq_free_slots(cq), 0);
	/* Three more: all dropped, one event. */
	for (i = 4; i < 7; i++)
		assert_int_equal(push(f, cq, 100 + i, IBV_WC_SUCCESS, false), -ENOSPC);
	assert_int_equal(stub_events(f->e, IBV_EVENT_CQ_ERR), 1);
	assert_ptr_equal(f->e->events[0].obj_ctx, &ctx_marker);
	/* What was queued is intact and in order. */
	expect_polled(cq, 0, 4);
	/* The CQ works again; a new overflow is a new event. */
	for (i = 0; i < 4; i++)
		assert_int_equal(push(f, cq, 10 + i, IBV_WC_SUCCESS, false), 0);
	assert_int_equal(push(f, cq, 99, IBV_WC_SUCCESS, false), -ENOSPC);
	assert_int_equal(stub_events(f->e, IBV_EVENT_CQ_ERR), 2);
	expect_polled(cq, 10, 4);
	assert_int_equal(rocemu_cq_destroy(cq), 0);
}

/* ibv_destroy_qp takes the QP's queued completions out of its CQs (as mlx5
 * does); the others stay, in order, also when the ring has wrapped. */
static void test_cq_forget_qp(void **state)
{
	struct fixture *f = *state;
	struct rocemu_wc wc[8];
	struct rocemu_cq *cq;
	unsigned i;

	assert_int_equal(rocemu_cq_create(f->e, 6, NULL, NULL, NULL, &cq), 0);
	/* head moved by 4 so the 6 entries below wrap */
	for (i = 0; i < 4; i++)
		assert_int_equal(push(f, cq, 100 + i, IBV_WC_SUCCESS, false), 0);
	assert_int_equal(rocemu_cq_poll(cq, 4, wc), 4);
	for (i = 0; i < 6; i++) {
		struct rocemu_wc w = wc_of(i, IBV_WC_SUCCESS);

		w.qp_num = i % 2 ? 42 : 17;
		rocemu_engine_lock(f->e);
		assert_int_equal(rocemu_cq_push(cq, &w, false), 0);
		rocemu_engine_unlock(f->e);
	}
	assert_int_equal(push(f, cq, 99, IBV_WC_SUCCESS, false), -ENOSPC);
	rocemu_engine_lock(f->e);
	assert_int_equal(rocemu_cq_forget_qp(cq, 42), 3);
	assert_int_equal(rocemu_cq_forget_qp(cq, 7), 0);
	rocemu_engine_unlock(f->e);
	assert_int_equal(rocemu_cq_free_slots(cq), 3);
	/* the space is usable again, after the entries kept */
	assert_int_equal(push(f, cq, 6, IBV_WC_SUCCESS, false), 0);
	assert_int_equal(rocemu_cq_poll(cq, 8, wc), 4);
	for (i = 0; i < 3; i++) {
		assert_int_equal(wc[i].wr_id, 2 * i);
		assert_int_equal(wc[i].qp_num, 17);
	}
	assert_int_equal(wc[3].wr_id, 6);
	rocemu_engine_lock(f->e);
	assert_int_equal(rocemu_cq_forget_qp(cq, 17), 0); /* empty */
	rocemu_engine_unlock(f->e);
	assert_int_equal(rocemu_cq_destroy(cq), 0);
}

static void test_cq_arm_any(void **state)
{
	struct fixture *f = *state;
	struct rocemu_cq *cq;

	assert_int_equal(rocemu_cq_create(f->e, 8, on_notify, f, NULL, &cq), 0);
	/* Not armed: no notification. */
	assert_int_equal(push(f, cq, 0, IBV_WC_SUCCESS, false), 0);
	assert_int_equal(f->notified, 0);
	/* Armed: the next completion notifies, once. */
	assert_int_equal(rocemu_cq_arm(cq, false), 0);
	assert_int_equal(f->notified, 0); /* entries already queued do not count */
	assert_int_equal(push(f, cq, 1, IBV_WC_SUCCESS, false), 0);
	assert_int_equal(f->notified, 1);
	assert_int_equal(push(f, cq, 2, IBV_WC_SUCCESS, true), 0);
	assert_int_equal(f->notified, 1);
	/* Arming twice is still one notification. */
	assert_int_equal(rocemu_cq_arm(cq, false), 0);
	assert_int_equal(rocemu_cq_arm(cq, false), 0);
	assert_int_equal(push(f, cq, 3, IBV_WC_SUCCESS, false), 0);
	assert_int_equal(push(f, cq, 4, IBV_WC_SUCCESS, false), 0);
	assert_int_equal(f->notified, 2);
	expect_polled(cq, 0, 5);
	assert_int_equal(rocemu_cq_destroy(cq), 0);
}

static void test_cq_arm_solicited(void **state)
{
	struct fixture *f = *state;
	struct rocemu_cq *cq;

	assert_int_equal(rocemu_cq_create(f->e, 16, on_notify, f, NULL, &cq), 0);
	assert_int_equal(rocemu_cq_arm(cq, true), 0);
	assert_int_equal(push(f, cq, 0, IBV_WC_SUCCESS, false), 0);
	assert_int_equal(f->notified, 0);
	assert_int_equal(push(f, cq, 1, IBV_WC_SUCCESS, true), 0);
	assert_int_equal(f->notified, 1);
	assert_int_equal(push(f, cq, 2, IBV_WC_SUCCESS, true), 0);
	assert_int_equal(f->notified, 1); /* one-shot */
	/* An error completion wakes a solicited-only arm too. */
	assert_int_equal(rocemu_cq_arm(cq, true), 0);
	assert_int_equal(push(f, cq, 3, IBV_WC_REM_ACCESS_ERR, false), 0);
	assert_int_equal(f->notified, 2);
	/* Solicited then any: any wins. Any then solicited: still any. */
	assert_int_equal(rocemu_cq_arm(cq, true), 0);
	assert_int_equal(rocemu_cq_arm(cq, false), 0);
	assert_int_equal(push(f, cq, 4, IBV_WC_SUCCESS, false), 0);
	assert_int_equal(f->notified, 3);
	assert_int_equal(rocemu_cq_arm(cq, false), 0);
	assert_int_equal(rocemu_cq_arm(cq, true), 0);
	assert_int_equal(push(f, cq, 5, IBV_WC_SUCCESS, false), 0);
	assert_int_equal(f->notified, 4);
	/* A dropped (overflowing) completion notifies nobody. */
	assert_int_equal(rocemu_cq_arm(cq, false), 0);
	for (unsigned i = 6; i < 16; i++)
		assert_int_equal(push(f, cq, i, IBV_WC_SUCCESS, false), 0);
	assert_int_equal(f->notified, 5);
	assert_int_equal(rocemu_cq_arm(cq, false), 0);
	assert_int_equal(push(f, cq, 16, IBV_WC_SUCCESS, true), -ENOSPC);
	assert_int_equal(f->notified, 5);
	expect_polled(cq, 0, 16);
	assert_int_equal(rocemu_cq_destroy(cq), 0);
}

static void test_cq_resize(void **state)
{
	struct fixture *f = *state;
	struct rocemu_wc wc[2];
	struct rocemu_cq *cq;
	unsigned i;

	assert_int_equal(rocemu_cq_create(f->e, 4, NULL, NULL, NULL, &cq), 0);
	/* Wrap the ring first: entries 2..5 sit across the end of it. */
	for (i = 0; i < 4; i++)
		assert_int_equal(push(f, cq, i, IBV_WC_SUCCESS, false), 0);
	assert_int_equal(rocemu_cq_poll(cq, 2, wc), 2);
	assert_int_equal(push(f, cq, 4, IBV_WC_SUCCESS, false), 0);
	assert_int_equal(push(f, cq, 5, IBV_WC_SUCCESS, false), 0);
	assert_int_equal(rocemu_cq_resize(cq, 3), -EINVAL); /* fewer than queued */
	assert_int_equal(rocemu_cq_resize(cq, 0), -EINVAL);
	assert_int_equal(rocemu_cq_resize(cq, f->e->caps.max_cqe + 1), -EINVAL);
	assert_int_equal(rocemu_cq_capacity(cq), 4);
	assert_int_equal(rocemu_cq_resize(cq, 10), 0);
	assert_true(rocemu_cq_capacity(cq) >= 10);
	for (i = 6; i < 12; i++)
		assert_int_equal(push(f, cq, i, IBV_WC_SUCCESS, false), 0);
	assert_int_equal(push(f, cq, 12, IBV_WC_SUCCESS, false), -ENOSPC);
	expect_polled(cq, 2, 10);
	/* Shrink to exactly what is queued. */
	for (i = 20; i < 23; i++)
		assert_int_equal(push(f, cq, i, IBV_WC_SUCCESS, false), 0);
	assert_int_equal(rocemu_cq_resize(cq, 3), 0);
	assert_int_equal(rocemu_cq_free_slots(cq), 0);
	expect_polled(cq, 20, 3);
	assert_int_equal(rocemu_cq_destroy(cq), 0);
}

#define CQ_PRODUCERS	3
#define CQ_PER_PRODUCER 5000

struct cq_producer {
	struct fixture *f;
	struct rocemu_cq *cq;
	uint64_t id;
};

/* Push like the transport does: under the lock, only when a slot is free. */
static void *cq_produce(void *arg)
{
	struct cq_producer *p = arg;
	uint64_t seq = 0;

	while (seq < CQ_PER_PRODUCER) {
		rocemu_engine_lock(p->f->e);
		if (rocemu_cq_free_slots(p->cq) > 0) {
			struct rocemu_wc wc = wc_of(p->id << 32 | seq, IBV_WC_SUCCESS);

			if (rocemu_cq_push(p->cq, &wc, false) == 0)
				seq++;
		}
		rocemu_engine_unlock(p->f->e);
	}
	return NULL;
}

/* Producers and a poller at once: nothing lost, duplicated or reordered per producer. */
static void test_cq_concurrent(void **state)
{
	struct fixture *f = *state;
	struct cq_producer prod[CQ_PRODUCERS];
	pthread_t th[CQ_PRODUCERS];
	uint64_t next[CQ_PRODUCERS] = {0}, total = 0;
	struct rocemu_wc wc[16];
	struct rocemu_cq *cq;
	unsigned i;

	assert_int_equal(rocemu_cq_create(f->e, 32, NULL, NULL, NULL, &cq), 0);
	for (i = 0; i < CQ_PRODUCERS; i++) {
		prod[i] = (struct cq_producer){.f = f, .cq = cq, .id = i};
		assert_int_equal(pthread_create(&th[i], NULL, cq_produce, &prod[i]), 0);
	}
	while (total < (uint64_t)CQ_PRODUCERS * CQ_PER_PRODUCER) {
		int got = rocemu_cq_poll(cq, 16, wc);

		assert_true(got >= 0);
		for (int j = 0; j < got; j++) {
			uint64_t id = wc[j].wr_id >> 32, seq = wc[j].wr_id & 0xffffffffu;

			assert_true(id < CQ_PRODUCERS);
			assert_int_equal(seq, next[id]);
			next[id]++;
			total++;
		}
	}
	for (i = 0; i < CQ_PRODUCERS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(rocemu_cq_poll(cq, 16, wc), 0);
	assert_int_equal(stub_events(f->e, IBV_EVENT_CQ_ERR), 0);
	assert_int_equal(rocemu_cq_destroy(cq), 0);
}

static void test_cq_busy(void **state)
{
	struct fixture *f = *state;
	struct rocemu_cq *cq;

	assert_int_equal(rocemu_cq_create(f->e, 4, NULL, NULL, NULL, &cq), 0);
	rocemu_engine_lock(f->e);
	rocemu_cq_get(cq);
	rocemu_engine_unlock(f->e);
	assert_int_equal(rocemu_cq_destroy(cq), -EBUSY);
	rocemu_engine_lock(f->e);
	rocemu_cq_put(cq);
	rocemu_engine_unlock(f->e);
	assert_int_equal(rocemu_cq_destroy(cq), 0);
	assert_int_equal(rocemu_cq_destroy(NULL), -EINVAL);
}

/* ------------------------------------------------------------------------ */

static int pop(struct fixture *f, struct rocemu_srq *srq, struct rocemu_recv_wqe *w)
{
	int rc;

	rocemu_engine_lock(f->e);
	rc = rocemu_srq_pop(srq, w);
	rocemu_engine_unlock(f->e);
	return rc;
}

static void test_srq_create_checks(void **state)
{
	struct fixture *f = *state;
	const struct rocemu_caps *c = &f->e->caps;
	struct rocemu_srq *srq;
	struct ibv_srq_attr attr;

	assert_int_equal(rocemu_srq_create(f->pd, 0, 1, 0, NULL, &srq), -EINVAL);
	assert_int_equal(rocemu_srq_create(f->pd, c->max_srq_wr + 1, 1, 0, NULL, &srq), -EINVAL);
	assert_int_equal(rocemu_srq_create(f->pd, 4, c->max_srq_sge + 1, 0, NULL, &srq), -EINVAL);
	assert_int_equal(rocemu_srq_create(NULL, 4, 1, 0, NULL, &srq), -EINVAL);
	assert_int_equal(f->pd->refcnt, 0);
	/* The limit given at creation is ignored: not armed, not validated. */
	assert_int_equal(rocemu_srq_create(f->pd, 8, 2, 1000, NULL, &srq), 0);
	assert_int_equal(f->pd->refcnt, 1);
	assert_ptr_equal(rocemu_srq_pd(srq), f->pd);
	assert_int_equal(rocemu_pd_free(f->pd), -EBUSY);
	assert_int_equal(rocemu_srq_query(srq, &attr), 0);
	assert_int_equal(attr.max_wr, 8);
	assert_int_equal(attr.max_sge, 2);
	assert_int_equal(attr.srq_limit, 0);
	/* Busy while a QP uses it. */
	rocemu_engine_lock(f->e);
	rocemu_srq_get(srq);
	rocemu_engine_unlock(f->e);
	assert_int_equal(rocemu_srq_destroy(srq), -EBUSY);
	rocemu_engine_lock(f->e);
	rocemu_srq_put(srq);
	rocemu_engine_unlock(f->e);
	assert_int_equal(rocemu_srq_destroy(srq), 0);
	assert_int_equal(f->pd->refcnt, 0);
}

static void test_srq_post_and_wrap(void **state)
{
	struct fixture *f = *state;
	struct ibv_sge sg[ROCEMU_MAX_SGE + 1];
	struct rocemu_recv_wqe w;
	struct rocemu_srq *srq;
	uint64_t next = 0, expect = 0;
	unsigned i, round;

	for (i = 0; i <= ROCEMU_MAX_SGE; i++)
		sg[i] = (struct ibv_sge){.addr = 0x1000 * i, .length = 10 + i, .lkey = 5};
	assert_int_equal(rocemu_srq_create(f->pd, 3, 4, 0, NULL, &srq), 0);
	assert_int_equal(rocemu_srq_post_recv(srq, 1, sg, 5), -EINVAL);
	assert_int_equal(rocemu_srq_post_recv(srq, 1, NULL, 1), -EINVAL);
	assert_int_equal(pop(f, srq, &w), -EAGAIN);
	for (round = 0; round < 40; round++) {
		unsigned n = 1 + round % 3;

		for (i = 0; i < n; i++) {
			int rc = rocemu_srq_post_recv(srq, next, sg, (uint32_t)(next % 5));

			if (rc == -ENOMEM)
				break;
			assert_int_equal(rc, 0);
			next++;
		}
		for (i = 0; i < 1 + round % 2 && pop(f, srq, &w) == 0; i++) {
			uint64_t len = 0;

			assert_int_equal(w.wr_id, expect);
			assert_int_equal(w.num_sge, expect % 5);
			for (unsigned s = 0; s < w.num_sge; s++) {
				assert_int_equal(w.sge[s].addr, sg[s].addr);
				len += sg[s].length;
			}
			assert_int_equal(w.total_len, len);
			expect++;
		}
	}
	/* Full means ENOMEM, and nothing past the ring is written (ASan). */
	while (rocemu_srq_post_recv(srq, next, sg, 0) == 0)
		next++;
	assert_int_equal(rocemu_srq_post_recv(srq, next, sg, 0), -ENOMEM);
	while (pop(f, srq, &w) == 0)
		assert_int_equal(w.wr_id, expect++);
	assert_int_equal(expect, next);
	assert_int_equal(rocemu_srq_destroy(srq), 0);
}

static void test_srq_limit_event(void **state)
{
	struct fixture *f = *state;
	struct ibv_srq_attr attr = {0};
	struct rocemu_recv_wqe w;
	struct rocemu_srq *srq;
	int ctx_marker;
	unsigned i;

	assert_int_equal(rocemu_srq_create(f->pd, 8, 1, 0, &ctx_marker, &srq), 0);
	attr.srq_limit = 9;
	assert_int_equal(rocemu_srq_modify(srq, &attr, IBV_SRQ_LIMIT), -EINVAL); /* > max_wr */
	assert_int_equal(rocemu_srq_modify(srq, &attr, 1 << 5), -EINVAL);
	assert_int_equal(rocemu_srq_modify(srq, &attr, 0), -EINVAL);
	for (i = 0; i < 5; i++)
		assert_int_equal(rocemu_srq_post_recv(srq, i, NULL, 0), 0);
	attr.srq_limit = 3;
	assert_int_equal(rocemu_srq_modify(srq, &attr, IBV_SRQ_LIMIT), 0);
	assert_int_equal(rocemu_srq_query(srq, &attr), 0);
	assert_int_equal(attr.srq_limit, 3);
	assert_int_equal(pop(f, srq, &w), 0); /* 4 left */
	assert_int_equal(pop(f, srq, &w), 0); /* 3 left: not below yet */
	assert_int_equal(stub_events(f->e, IBV_EVENT_SRQ_LIMIT_REACHED), 0);
	assert_int_equal(pop(f, srq, &w), 0); /* 2 left: below 3 */
	assert_int_equal(stub_events(f->e, IBV_EVENT_SRQ_LIMIT_REACHED), 1);
	assert_ptr_equal(f->e->events[0].obj_ctx, &ctx_marker);
	assert_int_equal(pop(f, srq, &w), 0);
	assert_int_equal(pop(f, srq, &w), 0);
	assert_int_equal(stub_events(f->e, IBV_EVENT_SRQ_LIMIT_REACHED), 1); /* once */
	assert_int_equal(rocemu_srq_query(srq, &attr), 0);
	assert_int_equal(attr.srq_limit, 0); /* disarmed */
	/* Re-armed, it fires again; limit 0 disarms. */
	for (i = 0; i < 2; i++)
		assert_int_equal(rocemu_srq_post_recv(srq, i, NULL, 0), 0);
	attr.srq_limit = 2;
	assert_int_equal(rocemu_srq_modify(srq, &attr, IBV_SRQ_LIMIT), 0);
	assert_int_equal(pop(f, srq, &w), 0);
	assert_int_equal(stub_events(f->e, IBV_EVENT_SRQ_LIMIT_REACHED), 2);
	attr.srq_limit = 0;
	assert_int_equal(rocemu_srq_modify(srq, &attr, IBV_SRQ_LIMIT), 0);
	assert_int_equal(pop(f, srq, &w), 0);
	assert_int_equal(stub_events(f->e, IBV_EVENT_SRQ_LIMIT_REACHED), 2);
	assert_int_equal(rocemu_srq_destroy(srq), 0);
}

static void test_srq_resize(void **state)
{
	struct fixture *f = *state;
	struct ibv_srq_attr attr = {0};
	struct rocemu_recv_wqe w;
	struct rocemu_srq *srq;
	unsigned i;

	assert_int_equal(rocemu_srq_create(f->pd, 4, 1, 0, NULL, &srq), 0);
	for (i = 0; i < 4; i++)
		assert_int_equal(rocemu_srq_post_recv(srq, i, NULL, 0), 0);
	assert_int_equal(pop(f, srq, &w), 0);
	assert_int_equal(rocemu_srq_post_recv(srq, 4, NULL, 0), 0); /* wrapped */
	attr.max_wr = 3;
	assert_int_equal(rocemu_srq_modify(srq, &attr, IBV_SRQ_MAX_WR), -EINVAL);
	/* Resize and arm together: the limit is checked against the new size. */
	attr.max_wr = 6;
	attr.srq_limit = 7;
	assert_int_equal(rocemu_srq_modify(srq, &attr, IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT), -EINVAL);
	assert_int_equal(rocemu_srq_query(srq, &attr), 0);
	assert_int_equal(attr.max_wr, 4); /* nothing changed */
	attr.max_wr = 6;
	attr.srq_limit = 0;
	assert_int_equal(rocemu_srq_modify(srq, &attr, IBV_SRQ_MAX_WR), 0);
	assert_int_equal(rocemu_srq_post_recv(srq, 5, NULL, 0), 0);
	assert_int_equal(rocemu_srq_post_recv(srq, 6, NULL, 0), 0);
	assert_int_equal(rocemu_srq_post_recv(srq, 7, NULL, 0), -ENOMEM);
	for (i = 1; i <= 6; i++) {
		assert_int_equal(pop(f, srq, &w), 0);
		assert_int_equal(w.wr_id, i);
	}
	assert_int_equal(rocemu_srq_destroy(srq), 0);
}

static void test_srq_limit(void **state)
{
	struct fixture *f = *state;
	struct rocemu_srq *srq[8];
	unsigned n = 0;

	while (n < 8 && rocemu_srq_create(f->pd, 2, 1, 0, NULL, &srq[n]) == 0)
		n++;
	assert_int_equal(n, f->e->caps.max_srq);
	assert_int_equal(f->pd->refcnt, n);
	/* Left for teardown (ASan checks they are freed). */
}

/* ------------------------------------------------------------------------ */

static void test_ah(void **state)
{
	struct fixture *f = *state;
	struct ibv_ah_attr attr = {0};
	struct rocemu_ah *ah, *more[8];
	unsigned i, n = 0;

	for (i = 0; i < 16; i++)
		attr.grh.dgid.raw[i] = (uint8_t)(0xf0 + i);
	attr.grh.sgid_index = 1;
	attr.grh.traffic_class = 0x28;
	attr.grh.hop_limit = 64;
	attr.grh.flow_label = 0xabcde;
	attr.sl = 3;
	/* RoCE needs a GRH. */
	assert_int_equal(rocemu_ah_create(f->pd, &attr, &ah), -EINVAL);
	attr.is_global = 1;
	/* The source GID must exist (the stub port has 2). */
	attr.grh.sgid_index = 2;
	assert_int_equal(rocemu_ah_create(f->pd, &attr, &ah), -EINVAL);
	attr.grh.sgid_index = 1;
	/* A flow label wider than 20 bits keeps its low 20 (UCX passes ~0), as on NICs. */
	attr.grh.flow_label = ~0u;
	assert_int_equal(rocemu_ah_create(f->pd, &attr, &ah), 0);
	assert_int_equal(ah->flow_label, 0xfffff);
	assert_int_equal(rocemu_ah_destroy(ah), 0);
	attr.grh.flow_label = 0xabcde;
	assert_int_equal(rocemu_ah_create(NULL, &attr, &ah), -EINVAL);
	assert_int_equal(f->pd->refcnt, 0);
	assert_int_equal(rocemu_ah_create(f->pd, &attr, &ah), 0);
	assert_memory_equal(ah->dgid, attr.grh.dgid.raw, 16);
	assert_int_equal(ah->sgid_index, 1);
	assert_int_equal(ah->tclass, 0x28);
	assert_int_equal(ah->hop_limit, 64);
	assert_int_equal(ah->flow_label, 0xabcde);
	assert_int_equal(ah->sl, 3);
	assert_ptr_equal(ah->pd, f->pd);
	assert_int_equal(f->pd->refcnt, 1);
	assert_int_equal(rocemu_pd_free(f->pd), -EBUSY);
	/* max_ah */
	while (n < 8 && rocemu_ah_create(f->pd, &attr, &more[n]) == 0)
		n++;
	assert_int_equal(n + 1, f->e->caps.max_ah);
	for (i = 0; i < n; i++)
		assert_int_equal(rocemu_ah_destroy(more[i]), 0);
	assert_int_equal(rocemu_ah_destroy(ah), 0);
	assert_int_equal(f->pd->refcnt, 0);
	assert_int_equal(rocemu_ah_destroy(NULL), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    FIXTURE_TEST(test_cq_create_limits),
	    FIXTURE_TEST(test_cq_push_poll_order),
	    FIXTURE_TEST(test_cq_overflow),
	    FIXTURE_TEST(test_cq_forget_qp),
	    FIXTURE_TEST(test_cq_arm_any),
	    FIXTURE_TEST(test_cq_arm_solicited),
	    FIXTURE_TEST(test_cq_resize),
	    FIXTURE_TEST(test_cq_concurrent),
	    FIXTURE_TEST(test_cq_busy),
	    FIXTURE_TEST(test_srq_create_checks),
	    FIXTURE_TEST(test_srq_post_and_wrap),
	    FIXTURE_TEST(test_srq_limit_event),
	    FIXTURE_TEST(test_srq_resize),
	    FIXTURE_TEST(test_srq_limit),
	    FIXTURE_TEST(test_ah),
	};

	return cmocka_run_group_tests_name("queues", tests, NULL, NULL);
}
