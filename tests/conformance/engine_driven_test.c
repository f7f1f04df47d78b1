/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Conformance checks a scenario table (cf_scenarios.c) cannot express: they
 * watch the engine's async events, drive its progress passes one by one,
 * reply to what the requester just did, or throw thousands of random frames.
 * Node A is a full engine; node B is a bare port whose frames the test
 * writes by hand with the wire codec and whose received frames the test
 * reads. Each check names the rule of the InfiniBand Architecture
 * Specification (vol. 1) it is about.
 *
 * What a scenario already checks is not repeated here: PSN gaps
 * (psn_gap_nak_once_then_silence, psn_resync_after_nak), duplicate SEND,
 * READ and FETCH_ADD (dup_*), SEND MIDDLE out of sequence
 * (seq_middle_without_first), RNR NAK (rnr_nak_without_recv_wqe), WRITE out
 * of bounds (acc_write_one_byte_past_end, acc_responder_error_flushes_rq),
 * READ segmentation (mtu_read_*), misaligned atomics (atomic_misaligned),
 * unknown QPs (qpn_unknown_dropped), a remote access NAK at the requester
 * (acc_requester_gets_rem_access_err).
 */
#include <endian.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../emulator/transport/rocemu_transport.h"
#include "../../emulator/wire/roce_mbuf.h"
#include "../transport/harness.h"

#define PEER_QPN 0x99
#define MAXQ	 256

struct seen {
	struct roce_pkt pkt;
	uint8_t payload[4096];
};

static struct {
	struct rocemu_engine *e;
	struct rocemu_pd *pd;
	struct rocemu_cq *scq, *rcq;
	uint8_t gid[16], mac[6];
	struct rocemu_port *b;
	uint8_t bgid[16], bmac[6];
	struct seen q[MAXQ];
	unsigned head, tail;
} T;

static void b_rx(void *ctx, struct rte_mbuf **pkts, struct roce_pkt *descs, uint16_t n)
{
	(void)ctx;
	for (uint16_t i = 0; i < n; i++) {
		if (T.tail - T.head < MAXQ) {
			struct seen *s = &T.q[T.tail++ % MAXQ];

			s->pkt = descs[i];
			memcpy(s->payload,
			       rte_pktmbuf_mtod(pkts[i], uint8_t *) + descs[i].payload_off,
			       descs[i].payload_len < 4096 ? descs[i].payload_len : 4096);
		}
		rte_pktmbuf_free(pkts[i]);
	}
}

static unsigned b_poll(void *ctx, uint64_t now)
{
	(void)ctx;
	(void)now;
	return 0;
}

static bool b_has_work(void *ctx)
{
	(void)ctx;
	return false;
}

/* An expected frame: waiting longer costs nothing when it comes, and no
 * loaded machine delays an engine pass by a minute (a hang guard, not a
 * deadline). Silence checks keep short windows: a slow engine can only make
 * them pass. */
#define FRAME_WAIT_MS 60000

/** Next frame B received (waits up to wait_ms or more); false when none came. */
static bool b_next(struct seen *out, unsigned wait_ms)
{
	for (unsigned i = 0; i < wait_ms * 10; i++) {
		bool got = false;

		rocemu_port_progress(T.b);
		rocemu_port_lock(T.b);
		if (T.head != T.tail) {
			*out = T.q[T.head++ % MAXQ];
			got = true;
		}
		rocemu_port_unlock(T.b);
		if (got)
			return true;
		usleep(100);
	}
	return false;
}

static void b_drain(void)
{
	struct seen s;

	while (b_next(&s, 20))
		;
}

/** Send one request or response from B to A's QP. */
static void b_send(uint8_t opcode, uint32_t dqpn, uint32_t psn, bool ackreq,
		   void (*fill)(struct roce_pkt *p, void *arg), void *arg, const void *payload,
		   uint32_t len)
{
	struct roce_pkt p = {0};
	struct rte_mbuf *m;

	memcpy(p.path.dst_mac, T.mac, 6);
	memcpy(p.path.src_mac, T.bmac, 6);
	p.path.ip_version = 4;
	memcpy(p.path.src_gid, T.bgid, 16);
	memcpy(p.path.dst_gid, T.gid, 16);
	p.path.ttl = 64;
	p.path.dont_fragment = true;
	p.path.udp_sport = 0xC123;
	p.path.udp_dport = ROCE_UDP_PORT;
	p.opcode = opcode;
	p.op = roce_opcode_info(opcode);
	p.pkey = ROCE_DEFAULT_PKEY;
	p.dqpn = dqpn;
	p.psn = psn;
	p.ackreq = ackreq;
	p.payload_len = len;
	if (fill)
		fill(&p, arg);
	rocemu_port_lock(T.b);
	m = rocemu_port_alloc_mbuf(T.b);
	assert_non_null(m);
	assert_int_equal(roce_mbuf_build(m, &p, payload), 0);
	assert_int_equal(rocemu_port_tx(T.b, m), 0);
	rocemu_port_flush(T.b);
	rocemu_port_unlock(T.b);
}

/** A's RC QP connected to B's imaginary QP PEER_QPN. */
static struct rocemu_qp *a_qp_to(uint32_t rq_psn, uint32_t sq_psn, uint8_t min_rnr, bool rts);
static void a_qp_rts(struct rocemu_qp *qp, uint32_t sq_psn, uint8_t timeout);

static struct rocemu_qp *a_qp(uint32_t rq_psn, uint32_t sq_psn, uint8_t min_rnr)
{
	return a_qp_to(rq_psn, sq_psn, min_rnr, true);
}

static struct rocemu_qp *a_qp_to(uint32_t rq_psn, uint32_t sq_psn, uint8_t min_rnr, bool rts)
{
	struct rocemu_qp_init init = {
	    .qp_type = IBV_QPT_RC,
	    .send_cq = T.scq,
	    .recv_cq = T.rcq,
	    .cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 4, .max_recv_sge = 4},
	};
	struct rocemu_qp *qp;
	struct ibv_qp_attr a = {0};
	struct rocemu_wc wc;

	/* completions left by the previous scenario */
	while (rocemu_cq_poll(T.scq, 1, &wc) > 0 || rocemu_cq_poll(T.rcq, 1, &wc) > 0)
		;
	assert_int_equal(rocemu_qp_create(T.pd, &init, &qp), 0);
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags =
	    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	assert_int_equal(
	    rocemu_qp_modify(qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
	    0);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = PEER_QPN;
	a.rq_psn = rq_psn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = min_rnr;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.sgid_index = 1;
	memcpy(a.ah_attr.grh.dgid.raw, T.bgid, 16);
	assert_int_equal(rocemu_qp_modify(qp, &a,
					  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
			 0);
	if (rts)
		a_qp_rts(qp, sq_psn, 18); /* ~1 s: the scripts answer long before */
	return qp;
}

/** RTR -> RTS with send PSN sq_psn and transport timer 4.096 us << timeout. */
static void a_qp_rts(struct rocemu_qp *qp, uint32_t sq_psn, uint8_t timeout)
{
	struct ibv_qp_attr a = {0};

	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = sq_psn;
	a.timeout = timeout;
	a.retry_cnt = 3;
	a.rnr_retry = 3;
	a.max_rd_atomic = 4;
	assert_int_equal(rocemu_qp_modify(qp, &a,
					  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
					      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					      IBV_QP_MAX_QP_RD_ATOMIC),
			 0);
}

static struct rocemu_mr *reg(void *p, size_t len)
{
	return h_reg(T.pd, p, len, H_ACC_ALL);
}

static void expect_aeth(struct seen *s, uint8_t type, uint8_t value, uint32_t psn)
{
	assert_true(b_next(s, FRAME_WAIT_MS));
	assert_int_equal(s->pkt.opcode, ROCE_OP_ACK);
	assert_int_equal(s->pkt.dqpn, PEER_QPN);
	assert_int_equal(ROCE_AETH_TYPE(s->pkt.aeth.syndrome), type);
	if (type != ROCE_AETH_ACK)
		assert_int_equal(ROCE_AETH_VALUE(s->pkt.aeth.syndrome), value);
	assert_int_equal(s->pkt.psn, psn);
}

static void post_recv(struct rocemu_qp *qp, uint64_t id, void *p, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = {(uintptr_t)p, len, lkey};

	assert_int_equal(rocemu_qp_post_recv(qp, id, &sge, 1), 0);
}

/* ------------------------------------------------------------------------ */
/* Responder                                                                  */

/* 9.7.5.1.1: a SEND with AckReq is acknowledged with its PSN and the MSN. */
static void test_resp_ack(void **state)
{
	struct rocemu_qp *qp = a_qp(0x1000, 0x2000, 1);
	uint8_t buf[64], data[20] = "hello, responder";
	struct rocemu_mr *m = reg(buf, sizeof(buf));
	struct seen s;
	struct rocemu_wc wc;

	(void)state;
	post_recv(qp, 1, buf, sizeof(buf), h_key(m, false));
	b_send(ROCE_OP_SEND_ONLY, rocemu_qp_num(qp), 0x1000, true, NULL, NULL, data, 20);
	expect_aeth(&s, ROCE_AETH_ACK, 0, 0x1000);
	assert_int_equal(s.pkt.aeth.msn, 1);
	assert_int_equal(h_poll(T.rcq, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.byte_len, 20);
	assert_memory_equal(buf, data, 20);
	rocemu_qp_destroy(qp);
	rocemu_mr_dereg(m);
}

struct reth_arg {
	uint64_t va;
	uint32_t rkey, len;
};

static void fill_reth(struct roce_pkt *p, void *arg)
{
	struct reth_arg *r = arg;

	p->reth.va = r->va;
	p->reth.rkey = r->rkey;
	p->reth.dma_len = r->len;
}

struct atomic_arg {
	uint64_t va;
	uint32_t rkey;
	uint64_t add;
};

static void fill_atomic(struct roce_pkt *p, void *arg)
{
	struct atomic_arg *a = arg;

	p->atomic.va = a->va;
	p->atomic.rkey = a->rkey;
	p->atomic.swap_add = a->add;
}

/*
 * 9.7.5.1.1: responses leave in PSN order. A 128-packet READ (two progress
 * passes of 64 responses) followed in the same burst by a FETCH_ADD and a
 * SEND with AckReq: every READ response, then the ATOMIC ACKNOWLEDGE, then
 * the ACK, none overtaking the READ still streaming. Then the same with the
 * READ and the FETCH_ADD replayed as duplicates (the atomic's saved result
 * after the re-executed READ's responses, the atomic applied once). A's
 * progress thread is stopped and the test drives the passes, so the burst
 * and the pass boundaries are exactly these.
 */
static void expect_in_order(struct rocemu_qp *qp, uint32_t psn, uint32_t npkts, bool ack,
			    uint64_t orig)
{
	struct seen s;

	for (uint32_t i = 0; i < npkts; i++) {
		bool got = false;

		for (int tries = 0; tries < 2000 && !got; tries++) {
			rocemu_engine_progress(T.e);
			got = b_next(&s, 1);
		}
		assert_true(got);
		assert_int_equal(s.pkt.opcode, i == 0		? ROCE_OP_READ_RESP_FIRST
					       : i + 1 == npkts ? ROCE_OP_READ_RESP_LAST
								: ROCE_OP_READ_RESP_MIDDLE);
		assert_int_equal(s.pkt.psn, roce_psn_add(psn, i));
	}
	for (int tries = 0; tries < 20; tries++)
		rocemu_engine_progress(T.e);
	assert_true(b_next(&s, FRAME_WAIT_MS));
	assert_int_equal(s.pkt.opcode, ROCE_OP_ATOMIC_ACK);
	assert_int_equal(s.pkt.psn, roce_psn_add(psn, npkts));
	assert_int_equal(s.pkt.atomic_orig, orig);
	if (ack)
		expect_aeth(&s, ROCE_AETH_ACK, 0, roce_psn_add(psn, npkts + 1));
	(void)qp;
}

static void test_resp_order_read_then_atomic(void **state)
{
	enum { NPKTS = 128 };
	struct rocemu_qp *qp = a_qp(0x3000, 0x4000, 1);
	uint8_t *buf = malloc(NPKTS * 1024), rbuf[16];
	uint64_t target[2] = {7, 0};
	struct rocemu_mr *m, *mt, *mr;
	struct reth_arg r;
	struct atomic_arg a;
	struct rocemu_port *ap = rocemu_engine_port(T.e);

	(void)state;
	assert_non_null(buf);
	m = reg(buf, NPKTS * 1024);
	mt = reg(target, sizeof(target));
	mr = reg(rbuf, sizeof(rbuf));
	r = (struct reth_arg){(uintptr_t)buf, h_key(m, true), NPKTS * 1024};
	a = (struct atomic_arg){(uintptr_t)&target[0], h_key(mt, true), 5};
	post_recv(qp, 1, rbuf, sizeof(rbuf), h_key(mr, false));
	b_drain();
	rocemu_port_progress_thread_stop(ap);
	b_send(ROCE_OP_READ_REQUEST, rocemu_qp_num(qp), 0x3000, true, fill_reth, &r, NULL, 0);
	b_send(ROCE_OP_FETCH_ADD, rocemu_qp_num(qp), 0x3000 + NPKTS, true, fill_atomic, &a, NULL,
	       0);
	b_send(ROCE_OP_SEND_ONLY, rocemu_qp_num(qp), 0x3000 + NPKTS + 1, true, NULL, NULL, NULL, 0);
	expect_in_order(qp, 0x3000, NPKTS, true, 7);
	/* duplicates of both, in one burst: replayed in PSN order, the atomic not re-executed */
	b_send(ROCE_OP_READ_REQUEST, rocemu_qp_num(qp), 0x3000, true, fill_reth, &r, NULL, 0);
	b_send(ROCE_OP_FETCH_ADD, rocemu_qp_num(qp), 0x3000 + NPKTS, true, fill_atomic, &a, NULL,
	       0);
	expect_in_order(qp, 0x3000, NPKTS, false, 7);
	assert_int_equal(target[0], 12);
	assert_int_equal(rocemu_port_progress_thread_start(ap), 0);
	rocemu_qp_destroy(qp);
	rocemu_mr_dereg(m);
	rocemu_mr_dereg(mt);
	rocemu_mr_dereg(mr);
	free(buf);
}

static enum ibv_event_type last_event = (enum ibv_event_type) - 1;
static void *last_event_ctx;

static void on_event(void *arg, const struct rocemu_event *ev)
{
	(void)arg;
	last_event = ev->type;
	last_event_ctx = ev->obj_ctx;
}

/* 11.6.2: the first packet reaching a QP in RTR raises IBV_EVENT_COMM_EST;
 * the responder works in RTR (it ACKs). */
static void test_comm_est_in_rtr(void **state)
{
	struct rocemu_qp *qp = a_qp_to(0x700, 0x800, 1, false);
	uint8_t buf[16];
	struct rocemu_mr *m = reg(buf, sizeof(buf));
	struct seen s;

	(void)state;
	rocemu_engine_set_event_handler(T.e, on_event, NULL);
	last_event = (enum ibv_event_type) - 1;
	post_recv(qp, 1, buf, sizeof(buf), h_key(m, false));
	b_send(ROCE_OP_SEND_ONLY, rocemu_qp_num(qp), 0x700, true, NULL, NULL, "x", 1);
	expect_aeth(&s, ROCE_AETH_ACK, 0, 0x700);
	assert_int_equal(__atomic_load_n(&last_event, __ATOMIC_ACQUIRE), IBV_EVENT_COMM_EST);
	assert_int_equal(rocemu_qp_state(qp), IBV_QPS_RTR);
	rocemu_engine_set_event_handler(T.e, NULL, NULL);
	rocemu_qp_destroy(qp);
	rocemu_mr_dereg(m);
}

/* ------------------------------------------------------------------------ */
/* Requester                                                                  */

static void a_post_send(struct rocemu_qp *qp, uint64_t id, void *p, uint32_t len, uint32_t lkey)
{
	assert_int_equal(h_post1(qp, IBV_WR_SEND, id, p, len, lkey, NULL, 0), 0);
}

static void fill_aeth(struct roce_pkt *p, void *arg)
{
	p->aeth.syndrome = *(uint8_t *)arg;
	p->aeth.msn = 1;
}

/* 9.7.5.2.2 / 10.8.3: a PSN sequence error NAK makes the requester resend
 * from that PSN; the ACK then completes the WQE. */
static void test_req_nak_seq_then_ack(void **state)
{
	struct rocemu_qp *qp = a_qp(0x100, 0x200, 1);
	uint8_t buf[3000];
	struct rocemu_mr *m = reg(buf, sizeof(buf));
	uint8_t nak = ROCE_AETH_SYNDROME(ROCE_AETH_NAK, ROCE_NAK_PSN_SEQ_ERR);
	uint8_t ack = ROCE_AETH_SYNDROME(ROCE_AETH_ACK, 0x1F);
	struct seen s;
	struct rocemu_wc wc;

	(void)state;
	b_drain();
	h_fill(buf, sizeof(buf), 8);
	a_post_send(qp, 5, buf, 3000, h_key(m, false));
	/* FIRST, MIDDLE, LAST with PSNs 0x200..0x202, AckReq on the last */
	for (uint32_t i = 0; i < 3; i++) {
		assert_true(b_next(&s, FRAME_WAIT_MS));
		assert_int_equal(s.pkt.psn, 0x200 + i);
		assert_int_equal(s.pkt.ackreq, i == 2);
	}
	assert_int_equal(s.pkt.opcode, ROCE_OP_SEND_LAST);
	/* "lost" the middle one: NAK from 0x201 */
	b_send(ROCE_OP_ACK, rocemu_qp_num(qp), 0x201, false, fill_aeth, &nak, NULL, 0);
	for (uint32_t i = 1; i < 3; i++) {
		assert_true(b_next(&s, FRAME_WAIT_MS));
		assert_int_equal(s.pkt.psn, 0x200 + i);
		assert_memory_equal(s.payload, buf + i * 1024, s.pkt.payload_len);
	}
	assert_int_equal(h_poll_quiet(T.scq, &wc, 20), 0);
	b_send(ROCE_OP_ACK, rocemu_qp_num(qp), 0x202, false, fill_aeth, &ack, NULL, 0);
	assert_int_equal(h_poll(T.scq, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.wr_id, 5);
	assert_true(h_counter(T.e, "retransmit_packets") >= 2);
	rocemu_qp_destroy(qp);
	rocemu_mr_dereg(m);
}

/* An ACK that arrives while the requester is going back (after a PSN
 * sequence NAK, before it has resent anything) still completes every WQE it
 * covers (9.7.5.1.1: the responder has those PSNs, whichever pass brought
 * them). The requester used to complete only WQEs it had finished resending
 * while moving its oldest-unacknowledged PSN past all of them, so after the
 * resend nothing was left to resend or to answer it: RETRY_EXC_ERR after
 * retry_cnt timeouts (transport_lossy's test_mixed, about 1 run in 15).
 * A NAK for PSNs already acknowledged is then stale: ignored, nothing resent.
 * retransmit_packets counts the packets that went out again, not those the
 * NAK's rewind would have resent. */
static void test_req_ack_during_go_back(void **state)
{
	struct rocemu_qp *qp = a_qp(0x680, 0x700, 1);
	struct rocemu_port *pa = rocemu_engine_port(T.e);
	uint8_t buf[16];
	struct rocemu_mr *m = reg(buf, sizeof(buf));
	uint8_t nak = ROCE_AETH_SYNDROME(ROCE_AETH_NAK, ROCE_NAK_PSN_SEQ_ERR);
	uint8_t ack = ROCE_AETH_SYNDROME(ROCE_AETH_ACK, 0x1F);
	uint64_t stale = h_counter(T.e, "drop_resp_duplicate");
	uint64_t tmo = h_counter(T.e, "retransmit_timeouts");
	uint64_t resent = h_counter(T.e, "retransmit_packets");
	struct seen s;
	struct rocemu_wc wc;

	(void)state;
	b_drain();
	for (uint64_t i = 0; i < 3; i++)
		a_post_send(qp, 10 + i, buf, 16, h_key(m, false));
	for (uint32_t i = 0; i < 3; i++) {
		assert_true(b_next(&s, FRAME_WAIT_MS));
		assert_int_equal(s.pkt.psn, 0x700 + i);
	}
	/* NAK from 0x700, then (overtaking the resend) an ACK of all three: A's
	 * lock held so both arrive in one receive burst, before any resend. */
	rocemu_port_lock(pa);
	b_send(ROCE_OP_ACK, rocemu_qp_num(qp), 0x700, false, fill_aeth, &nak, NULL, 0);
	b_send(ROCE_OP_ACK, rocemu_qp_num(qp), 0x702, false, fill_aeth, &ack, NULL, 0);
	rocemu_port_unlock(pa);
	for (uint64_t i = 0; i < 3; i++) {
		assert_int_equal(h_poll(T.scq, &wc), 1);
		assert_int_equal(wc.wr_id, 10 + i);
		assert_int_equal(wc.status, IBV_WC_SUCCESS);
	}
	assert_int_equal(h_counter(T.e, "retransmit_timeouts"), tmo);
	/* the go-back-N the NAK started never left (the ACK made it needless):
	 * nothing was resent, so nothing is counted resent (the counter is what
	 * a capture of the port shows) */
	assert_int_equal(h_counter(T.e, "retransmit_packets"), resent);
	/* the same NAK again, duplicated or reordered: stale */
	b_drain();
	b_send(ROCE_OP_ACK, rocemu_qp_num(qp), 0x700, false, fill_aeth, &nak, NULL, 0);
	while (h_counter(T.e, "drop_resp_duplicate") ==
	       stale) /* no deadline: a hang guard is the test timeout */
		usleep(100);
	assert_int_equal(h_counter(T.e, "drop_resp_duplicate"), stale + 1);
	assert_false(b_next(&s, 50));
	a_post_send(qp, 20, buf, 16, h_key(m, false));
	assert_true(b_next(&s, FRAME_WAIT_MS));
	assert_int_equal(s.pkt.psn, 0x703);
	b_send(ROCE_OP_ACK, rocemu_qp_num(qp), 0x703, false, fill_aeth, &ack, NULL, 0);
	assert_int_equal(h_poll(T.scq, &wc), 1);
	assert_int_equal(wc.wr_id, 20);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(rocemu_qp_state(qp), IBV_QPS_RTS);
	rocemu_qp_destroy(qp);
	rocemu_mr_dereg(m);
}

/* The transport timer guards packets sent and not acknowledged, not a WQE
 * whose next packets wait for their turn: here a rate limit holds each 1 KiB
 * packet of a 3 KiB SEND for ~50 ms while the timer is ~17 ms, and every
 * packet sent is acknowledged at once. Each packet before the wait asks for
 * its ACK, and no timer expires (before, the timer ran through the wait and
 * expired "silent", with nothing lost: with 1024 QPs, the round through the
 * other QPs was that wait). */
static void test_req_timer_idle_between_turns(void **state)
{
	struct rocemu_qp *qp = a_qp_to(0x780, 0x800, 1, false);
	uint8_t buf[3072];
	struct rocemu_mr *m = reg(buf, sizeof(buf));
	uint8_t ack = ROCE_AETH_SYNDROME(ROCE_AETH_ACK, 0x1F);
	uint64_t tmo = h_counter(T.e, "retransmit_timeouts");
	uint64_t resent = h_counter(T.e, "retransmit_packets");
	struct seen s = {0};
	struct rocemu_wc wc;

	(void)state;
	a_qp_rts(qp, 0x800, 12); /* 4.096 us << 12: 16.8 ms */
	/* 160 kb/s: a 1 KiB packet's credit every ~54 ms (one frame of burst) */
	assert_int_equal(rocemu_qp_rate_limit(qp, 160, 0), 0);
	b_drain();
	h_fill(buf, sizeof(buf), 9);
	a_post_send(qp, 30, buf, sizeof(buf), h_key(m, false));
	for (uint32_t i = 0; i < 3; i++) {
		assert_true(b_next(&s, 1000)); /* a hang guard, not a deadline */
		assert_int_equal(s.pkt.psn, 0x800 + i);
		assert_true(s.pkt.ackreq);
		b_send(ROCE_OP_ACK, rocemu_qp_num(qp), 0x800 + i, false, fill_aeth, &ack, NULL, 0);
	}
	assert_int_equal(h_poll(T.scq, &wc), 1);
	assert_int_equal(wc.wr_id, 30);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(h_counter(T.e, "retransmit_timeouts"), tmo);
	assert_int_equal(h_counter(T.e, "retransmit_packets"), resent);
	assert_false(b_next(&s, 50)); /* nothing sent twice */
	rocemu_qp_destroy(qp);
	rocemu_mr_dereg(m);
}

/* 9.7.6.1.1 lets the requester ask for an ACK on any packet; rocemu asks on
 * the last one it sends before its turn ends (here: the post's budget of
 * ROCEMU_TX_BUDGET packets, spent mid-message), besides a message's last
 * packet and every ackreq_interval packets. With many QPs the next turn can
 * come after the transport timer, and the responder acknowledges nothing it
 * was not asked to. Two SENDs in one post batch, 20 and 100 packets of 1 KiB:
 * the batch's first turn sends packets 0..63 (the second SEND's 0..43). */
static void test_req_ackreq_turn_end(void **state)
{
	enum { FIRST = 20, SECOND = 100, KIB = 1024 };
	struct rocemu_qp *qp = a_qp(0x880, 0x900, 1);
	uint8_t *buf = calloc(FIRST + SECOND, KIB);
	struct rocemu_mr *m;
	uint8_t ack = ROCE_AETH_SYNDROME(ROCE_AETH_ACK, 0x1F);
	struct ibv_sge sge[2];
	struct rocemu_send_wr wr[2] = {0};
	struct seen s = {0};
	struct rocemu_wc wc;
	unsigned bad = 0, asked = 0;

	(void)state;
	assert_non_null(buf);
	m = reg(buf, (size_t)(FIRST + SECOND) * KIB);
	b_drain();
	h_fill(buf, (size_t)(FIRST + SECOND) * KIB, 11);
	for (unsigned i = 0; i < 2; i++) {
		sge[i].addr = (uintptr_t)buf + (i ? FIRST * KIB : 0);
		sge[i].length = (i ? SECOND : FIRST) * KIB;
		sge[i].lkey = h_key(m, false);
		wr[i].wr_id = 40 + i;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
	}
	assert_int_equal(rocemu_qp_post_send_batch(qp, wr, 2, &bad), 0);
	assert_int_equal(bad, 2);
	for (uint32_t i = 0; i < FIRST + SECOND; i++) {
		bool want;

		assert_true(b_next(&s, FRAME_WAIT_MS));
		assert_int_equal(s.pkt.psn, 0x900 + i);
		asked += s.pkt.ackreq;
		if (i >= ROCEMU_TX_BUDGET)
			continue; /* later turns depend on the progress thread's passes */
		/* the first SEND's last; the second's 32nd (the interval, from its
		 * start: the first's last asked too); the turn's last */
		want = i == FIRST - 1 || i == FIRST + 31 || i == ROCEMU_TX_BUDGET - 1;
		if (s.pkt.ackreq != want)
			fail_msg("packet %u of the batch: AckReq %d, expected %d", i, s.pkt.ackreq,
				 want);
	}
	assert_true(s.pkt.ackreq); /* the second SEND's last */
	assert_true(asked >= 5);
	b_send(ROCE_OP_ACK, rocemu_qp_num(qp), 0x900 + FIRST + SECOND - 1, false, fill_aeth, &ack,
	       NULL, 0);
	for (uint64_t i = 0; i < 2; i++) {
		assert_int_equal(h_poll(T.scq, &wc), 1);
		assert_int_equal(wc.wr_id, 40 + i);
		assert_int_equal(wc.status, IBV_WC_SUCCESS);
	}
	rocemu_qp_destroy(qp);
	rocemu_mr_dereg(m);
	free(buf);
}

/* A response for a PSN the requester never sent is dropped and counted. */
static void test_req_ghost_ack(void **state)
{
	struct rocemu_qp *qp = a_qp(0x500, 0x600, 1);
	uint8_t ack = ROCE_AETH_SYNDROME(ROCE_AETH_ACK, 0x1F);
	uint64_t before = h_counter(T.e, "drop_resp_unsent_psn");

	(void)state;
	b_send(ROCE_OP_ACK, rocemu_qp_num(qp), 0x650, false, fill_aeth, &ack, NULL, 0);
	while (h_counter(T.e, "drop_resp_unsent_psn") == before)
		usleep(100);
	assert_int_equal(h_counter(T.e, "drop_resp_unsent_psn"), before + 1);
	assert_int_equal(rocemu_qp_state(qp), IBV_QPS_RTS);
	rocemu_qp_destroy(qp);
}

/* ------------------------------------------------------------------------ */
/* Robustness: bad input is expected input                                    */

struct rand_arg {
	uint32_t x;
	uint64_t base;
	uint32_t rkey;
};

static uint32_t rnd(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

static void fill_random(struct roce_pkt *p, void *arg)
{
	struct rand_arg *r = arg;
	uint32_t k = rnd(&r->x);

	/* addresses near (and sometimes across) the registered region, keys
	 * mostly right, lengths anything */
	p->reth.va = r->base + (int64_t)(rnd(&r->x) % 8192) - 2048;
	p->reth.rkey = (k & 7) ? r->rkey : rnd(&r->x);
	p->reth.dma_len = (k & 0x30) ? rnd(&r->x) % 6000 : rnd(&r->x);
	p->atomic.va = p->reth.va & ~(uint64_t)((k & 0x40) ? 0 : 7);
	p->atomic.rkey = p->reth.rkey;
	p->atomic.swap_add = rnd(&r->x);
	p->atomic.compare = rnd(&r->x);
	p->imm = rnd(&r->x);
	p->ieth_rkey = (k & 0x80) ? r->rkey : rnd(&r->x);
	p->aeth.syndrome = (uint8_t)rnd(&r->x);
	p->aeth.msn = rnd(&r->x) & 0xFFFFFF;
	p->atomic_orig = rnd(&r->x);
}

/* Thousands of random but well-formed frames (every RC opcode, PSNs around
 * the expected one, random keys, addresses and lengths) into live QPs:
 * nothing crashes (run it under ASan), and no byte outside the registered
 * region ever changes. QPs that go to ERR are replaced. */
static void test_random_requests(void **state)
{
	static const uint8_t ops[] = {
	    ROCE_OP_SEND_FIRST,	    ROCE_OP_SEND_MIDDLE,     ROCE_OP_SEND_LAST,
	    ROCE_OP_SEND_LAST_IMM,  ROCE_OP_SEND_ONLY,	     ROCE_OP_SEND_ONLY_IMM,
	    ROCE_OP_WRITE_FIRST,    ROCE_OP_WRITE_MIDDLE,    ROCE_OP_WRITE_LAST,
	    ROCE_OP_WRITE_LAST_IMM, ROCE_OP_WRITE_ONLY,	     ROCE_OP_WRITE_ONLY_IMM,
	    ROCE_OP_READ_REQUEST,   ROCE_OP_READ_RESP_FIRST, ROCE_OP_READ_RESP_MIDDLE,
	    ROCE_OP_READ_RESP_LAST, ROCE_OP_READ_RESP_ONLY,  ROCE_OP_ACK,
	    ROCE_OP_ATOMIC_ACK,	    ROCE_OP_CMP_SWAP,	     ROCE_OP_FETCH_ADD,
	    ROCE_OP_SEND_LAST_INV,  ROCE_OP_SEND_ONLY_INV,
	};
	struct gbuf g;
	uint8_t initial[8192], *region, payload[1024], rbuf[4][2048];
	struct rocemu_mr *m, *mr;
	struct rand_arg ra = {.x = 12345};
	struct rocemu_qp *qp = NULL;
	uint32_t epsn = 0;
	struct seen s;

	(void)state;
	assert_int_equal(h_gbuf(&g, 8192, false), 0);
	region = g.p + 2048;
	h_fill(g.p, 8192, 5);
	memcpy(initial, g.p, 8192);
	m = reg(region, 4096);
	mr = reg(rbuf, sizeof(rbuf));
	ra.base = (uintptr_t)region;
	ra.rkey = h_key(m, true);
	h_fill(payload, sizeof(payload), 6);
	for (int i = 0; i < 3000; i++) {
		uint8_t op = ops[rnd(&ra.x) % sizeof(ops)];
		const struct roce_opcode_info *info = roce_opcode_info(op);
		uint32_t len = 0;
		int32_t dpsn = (int32_t)(rnd(&ra.x) % 8) - 2;

		if (!qp || rocemu_qp_state(qp) == IBV_QPS_ERR) {
			if (qp)
				rocemu_qp_destroy(qp);
			epsn = rnd(&ra.x) & 0xFFFFFF;
			qp = a_qp(epsn, 0x100, 0);
			for (uint32_t k = 0; k < 4; k++)
				post_recv(qp, k, rbuf[k], 2048, h_key(mr, false));
		}
		if (info->flags & ROCE_OPF_PAYLOAD)
			len = (rnd(&ra.x) & 1) ? 1024 : rnd(&ra.x) % 1025;
		if ((info->flags & ROCE_OPF_ATOMIC) && !(info->flags & ROCE_OPF_PAYLOAD))
			len = 0;
		b_send(op, rocemu_qp_num(qp), roce_psn_add(epsn, (uint32_t)dpsn), rnd(&ra.x) & 1,
		       fill_random, &ra, payload, len);
		/* take what came back; keep the expected PSN roughly in step */
		while (b_next(&s, 2))
			if (s.pkt.opcode == ROCE_OP_ACK &&
			    ROCE_AETH_TYPE(s.pkt.aeth.syndrome) == ROCE_AETH_ACK)
				epsn = roce_psn_add(s.pkt.psn, 1);
		/* bytes outside [region, region + 4096) never change: compared with
		 * the first fill, so a late stray write cannot become a baseline */
		assert_memory_equal(initial, g.p, 2048);
		assert_memory_equal(initial + 2048 + 4096, g.p + 2048 + 4096, 2048);
		if ((i & 3) == 0) {
			struct rocemu_wc wc;

			while (rocemu_cq_poll(T.rcq, 1, &wc) > 0)
				if (rocemu_qp_state(qp) != IBV_QPS_ERR)
					post_recv(qp, wc.wr_id & 3, rbuf[wc.wr_id & 3], 2048,
						  h_key(mr, false));
		}
	}
	fprintf(stderr,
		"  engine counters after the storm: unknown_qp %llu, psn %llu, dup %llu, "
		"nak_inv %llu, nak_acc %llu, rnr %llu\n",
		(unsigned long long)h_counter(T.e, "drop_unknown_qp"),
		(unsigned long long)h_counter(T.e, "drop_psn_out_of_seq"),
		(unsigned long long)h_counter(T.e, "dup_requests"),
		(unsigned long long)h_counter(T.e, "tx_nak_invalid_req"),
		(unsigned long long)h_counter(T.e, "tx_nak_remote_access"),
		(unsigned long long)h_counter(T.e, "tx_rnr_nak"));
	rocemu_qp_destroy(qp);
	/* and once more after everything in flight was taken in */
	while (b_next(&s, 2))
		;
	rocemu_engine_progress(T.e);
	assert_memory_equal(initial, g.p, 2048);
	assert_memory_equal(initial + 2048 + 4096, g.p + 2048 + 4096, 2048);
	rocemu_mr_dereg(m);
	rocemu_mr_dereg(mr);
	h_gbuf_free(&g);
}

/* ------------------------------------------------------------------------ */

static int setup(void **state)
{
	struct rocemu_port_config cfg;
	struct rocemu_port_upper up = {.rx = b_rx, .poll = b_poll, .has_work = b_has_work};
	char err[256];

	(void)state;
	rocemu_port_config_init(&cfg);
	rocemu_port_config_set(&cfg, "port", "ring:conf:a", err, sizeof(err));
	rocemu_port_config_set(&cfg, "ip", "10.79.0.1/24", err, sizeof(err));
	rocemu_port_config_set(&cfg, "mtu", "4200", err, sizeof(err));
	if (rocemu_engine_create(&cfg, &T.e, err, sizeof(err)) < 0) {
		fprintf(stderr, "engine: %s\n", err);
		return -1;
	}
	rocemu_port_gid(rocemu_engine_port(T.e), 1, T.gid);
	rocemu_port_mac(rocemu_engine_port(T.e), T.mac);
	if (rocemu_pd_alloc(T.e, &T.pd) || rocemu_cq_create(T.e, 256, NULL, NULL, NULL, &T.scq) ||
	    rocemu_cq_create(T.e, 256, NULL, NULL, NULL, &T.rcq))
		return -1;
	rocemu_port_config_init(&cfg);
	rocemu_port_config_set(&cfg, "name", "peer", err, sizeof(err));
	rocemu_port_config_set(&cfg, "port", "ring:conf:b", err, sizeof(err));
	rocemu_port_config_set(&cfg, "ip", "10.79.0.2/24", err, sizeof(err));
	rocemu_port_config_set(&cfg, "mtu", "4200", err, sizeof(err));
	if (rocemu_port_open(&cfg, &T.b, err, sizeof(err)) < 0) {
		fprintf(stderr, "port: %s\n", err);
		return -1;
	}
	rocemu_port_set_upper(T.b, &up);
	rocemu_port_gid(T.b, 1, T.bgid);
	rocemu_port_mac(T.b, T.bmac);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (T.b)
		rocemu_port_close(T.b);
	if (T.e)
		rocemu_engine_destroy(T.e);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_resp_ack),
	    cmocka_unit_test(test_resp_order_read_then_atomic),
	    cmocka_unit_test(test_req_nak_seq_then_ack),
	    cmocka_unit_test(test_req_ghost_ack),
	    cmocka_unit_test(test_req_ack_during_go_back),
	    cmocka_unit_test(test_req_timer_idle_between_turns),
	    cmocka_unit_test(test_req_ackreq_turn_end),
	    cmocka_unit_test(test_comm_est_in_rtr),
	    cmocka_unit_test(test_random_requests),
	};

	if (rocemu_eal_init() < 0) {
		fprintf(stderr, "skip: %s\n", rocemu_eal_error());
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
