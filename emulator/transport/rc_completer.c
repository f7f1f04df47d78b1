/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Completer (RC): consumes ACKs, NAKs, RNR NAKs, READ responses and atomic
 * acknowledgements; completes send WQEs strictly in order; writes READ data
 * and atomic results into the local scatter list; turns NAK codes into WC
 * statuses (9.7.5.2, 10.8.3); and runs the two per-QP timers: the
 * retransmission timer (4.096 us * 2^timeout, retry_cnt) and the RNR
 * back-off (min_rnr_timer code of the responder, rnr_retry, 7 = infinite).
 */
#include <errno.h>
#include <string.h>

#include "rocemu_transport.h"

/** IBA table 45: RNR NAK timer field -> delay, in units of 10 us. */
static const uint32_t rnr_delay_10us[32] = {
    65536, 1,	 2,    3,    4,	   6,	  8,	 12,	16,    24,    32,
    48,	   64,	 96,   128,  192,  256,	  384,	 512,	768,   1024,  1536,
    2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
};

enum ibv_wc_status rocemu_comp_local_status(enum rocemu_mem_err err)
{
	/* A local key, PD, bounds or rights failure is a local protection error
	 * (the verbs have no finer status for it). */
	return err == ROCEMU_MEM_OK ? IBV_WC_SUCCESS : IBV_WC_LOC_PROT_ERR;
}

static uint64_t timeout_ns(const struct rocemu_qp *qp)
{
	/* 9.7.6.1.3: 4.096 us * 2^timeout; 0 means no timer. */
	if (qp->attr.timeout == 0)
		return 0;
	return 4096ull << qp->attr.timeout;
}

/** First WQE not yet finished, or NULL. */
static struct rocemu_send_wqe *first_pending(struct rocemu_qp *qp)
{
	for (uint32_t i = qp->sq_head; i != qp->sq_tail; i++) {
		struct rocemu_send_wqe *w = sq_at(qp, i);

		if (w->state == WQE_POSTED)
			return NULL;
		if (w->state != WQE_DONE)
			return w;
	}
	return NULL;
}

/**
 * The oldest PSN the responder has not acknowledged, inside the first
 * unfinished WQE: where a timeout resends from (9.7.6.1.3). comp.psn, unless
 * it lies outside that WQE's unanswered range.
 */
static uint32_t oldest_unacked(struct rocemu_qp *qp)
{
	struct rocemu_send_wqe *w = first_pending(qp);
	uint32_t from;
	int32_t d;

	if (!w)
		return qp->comp.psn;
	from = roce_psn_add(w->first_psn, w->rd_atomic ? w->rcvd_pkts : 0);
	d = roce_psn_diff(qp->comp.psn, from);
	if (d > 0 && d < (int32_t)(w->npkts - (w->rd_atomic ? w->rcvd_pkts : 0)))
		return qp->comp.psn;
	return from;
}

/*
 * Something the responder must answer: an unfinished WQE, and a request
 * packet sent that it has not acknowledged (comp.psn, the oldest PSN not
 * acknowledged, at or before the highest PSN sent). A QP whose packets sent
 * are all acknowledged but whose next ones wait for their turn (with many
 * QPs, a pass's round through the others, or a full transmit queue) awaits
 * nothing from the peer: a timer running then expired with nothing lost,
 * "silent" (1024 QPs: thousands of expiries, each a window cut and a
 * go-back-N of what the responder already held).
 */
static bool outstanding(struct rocemu_qp *qp)
{
	return first_pending(qp) != NULL && qp->req.sent_any &&
	       roce_psn_diff(qp->req.max_sent_psn, qp->comp.psn) >= 0;
}

/**
 * How long a stalled requester waits before its probe: the RTT estimate plus
 * four deviations (RFC 6298's RTO), at least ROCEMU_PROBE_MIN_NS, at most
 * half the transport timer (on a loaded machine a thread preempted for tens
 * of milliseconds inflates the estimate; a needless probe costs one packet,
 * a timeout a go-back-N and a retry); 0 = no probe (no RTT sample yet).
 */
static uint64_t probe_wait_ns(const struct rocemu_qp *qp, uint64_t t)
{
	uint64_t p;

	if (qp->req.srtt_ns == 0)
		return 0;
	p = qp->req.srtt_ns + 4 * qp->req.rttvar_ns;
	if (p < ROCEMU_PROBE_MIN_NS)
		p = ROCEMU_PROBE_MIN_NS;
	return p < t / 2 ? p : t / 2;
}

/* The transport timer's period after `backoff` silent expiries: T doubled,
 * but never past ROCEMU_TIMER_BACKOFF_CAP_NS unless T itself is longer. */
static uint64_t backed_off_ns(uint64_t t, unsigned backoff)
{
	uint64_t d = t << backoff;

	if (backoff == 0 || d <= ROCEMU_TIMER_BACKOFF_CAP_NS)
		return d;
	return t > ROCEMU_TIMER_BACKOFF_CAP_NS ? t : ROCEMU_TIMER_BACKOFF_CAP_NS;
}

void rocemu_comp_rearm(struct rocemu_qp *qp, uint64_t now)
{
	uint64_t t = timeout_ns(qp), p;

	if (!qp_is_reliable(qp) || t == 0 || !outstanding(qp)) {
		qp->comp.deadline_ns = 0;
		qp->comp.probe_ns = 0;
		return;
	}
	qp->comp.deadline_ns = now + backed_off_ns(t, qp->comp.backoff);
	qp->comp.heard = false;
	p = qp->comp.probes >= ROCEMU_PROBES || qp->comp.rnr_until_ns ? 0 : probe_wait_ns(qp, t);
	qp->comp.probe_ns = p ? now + (p << qp->comp.probes) : 0;
}

uint64_t rocemu_comp_next_deadline(const struct rocemu_qp *qp)
{
	uint64_t d = UINT64_MAX;

	if (qp->comp.deadline_ns)
		d = qp->comp.deadline_ns;
	if (qp->comp.rnr_until_ns && qp->comp.rnr_until_ns < d)
		d = qp->comp.rnr_until_ns;
	if (qp->rate.until_ns && qp->rate.until_ns < d)
		d = qp->rate.until_ns;
	if (qp->comp.probe_ns && qp->comp.probe_ns < d)
		d = qp->comp.probe_ns;
	return d;
}

void rocemu_comp_retire(struct rocemu_qp *qp)
{
	while (qp->sq_head != qp->sq_cur) {
		struct rocemu_send_wqe *w = sq_at(qp, qp->sq_head);

		if (w->state != WQE_DONE)
			break;
		qp->sq_head++;
		rocemu_qp_send_wc(qp, w);
		if (qp->state == IBV_QPS_ERR)
			return; /* the completion overflowed the CQ: everything was flushed */
	}
	if (qp->state == IBV_QPS_SQD && qp->sq_draining && qp->sq_head == qp->sq_cur) {
		qp->sq_draining = false;
		if (qp->sqd_notify)
			rocemu_engine_raise(qp->engine, IBV_EVENT_SQ_DRAINED, qp->user_ctx);
	}
}

static void wqe_finish(struct rocemu_qp *qp, struct rocemu_send_wqe *w, enum ibv_wc_status st)
{
	if (w->rd_atomic && qp->req.rd_atomic)
		qp->req.rd_atomic--;
	w->state = WQE_DONE;
	w->status = st;
}

/** A WQE fails after a response: its status, then the QP to ERR (flushing the rest). */
static void comp_fail(struct rocemu_qp *qp, struct rocemu_send_wqe *w, enum ibv_wc_status st)
{
	if (w)
		wqe_finish(qp, w, st);
	rocemu_qp_to_error(qp, false);
}

/* A probe waits for its answer (comp_probe_answered). */
static bool comp_probing(enum comp_state s)
{
	return s == COMP_PROBING || s == COMP_REREAD_PROBING;
}

/* Went back for lost READ responses or after a timeout (read_gap). */
static bool comp_rereading(enum comp_state s)
{
	return s == COMP_REREAD || s == COMP_REREAD_PROBING;
}

/* The completer's state with the probe on or off, the re-read as it is. */
static enum comp_state with_probe(enum comp_state s, bool on)
{
	if (on)
		return comp_rereading(s) ? COMP_REREAD_PROBING : COMP_PROBING;
	return comp_rereading(s) ? COMP_REREAD : COMP_STEADY;
}

/* The same with the re-read on or off, the probe as it is. */
static enum comp_state with_reread(enum comp_state s, bool on)
{
	if (on)
		return comp_probing(s) ? COMP_REREAD_PROBING : COMP_REREAD;
	return comp_probing(s) ? COMP_PROBING : COMP_STEADY;
}

/** Forward progress: retry budgets refill (9.7.6.1.3 / 9.7.5.2.8). */
static void progress_made(struct rocemu_qp *qp)
{
	rocemu_comp_set(qp, with_reread(qp->comp.state, false), "progress");
	qp->comp.probes = 0;
	qp->comp.backoff = 0;
	qp->comp.retry_left = qp->attr.retry_cnt;
	qp->comp.nak_retry_left = 8 * (qp->attr.retry_cnt + 1);
	qp->comp.rnr_left = qp->attr.rnr_retry;
	rocemu_comp_rearm(qp, rocemu_port_pass_now(qp->engine->port));
}

/** The oldest unacknowledged PSN moves forward to psn: the send window grows. */
static void comp_advance(struct rocemu_qp *qp, uint32_t psn)
{
	uint32_t acked = (uint32_t)roce_psn_diff(psn, qp->comp.psn);

	qp->comp.psn = psn;
	rocemu_req_window_progress(qp, acked, rocemu_port_pass_now(qp->engine->port));
}

/**
 * Everything up to and including psn has been received by the responder:
 * complete SEND/WRITE WQEs it covers. Stops at a READ/atomic that has not
 * got its response; if psn covers one of that READ's responses, those
 * responses were lost: returns false and sets *lost_psn.
 *
 * Every started WQE is looked at, whether it is SENT or ACTIVE again after a
 * go-back-N rewind (its packets being resent, or waiting behind sq_cur to be):
 * the responder has every PSN up to psn whichever pass delivered it. Leaving a
 * covered WQE unfinished while comp.psn moves past it would leave nothing to
 * resend at a timeout (the rewind target is past every PSN in flight) and no
 * ACK to complete it: RETRY_EXC_ERR after retry_cnt idle timeouts.
 */
static bool ack_upto(struct rocemu_qp *qp, uint32_t psn, uint32_t *lost_psn)
{
	bool progress = false;

	for (uint32_t i = qp->sq_head; i != qp->sq_tail; i++) {
		struct rocemu_send_wqe *w = sq_at(qp, i);
		uint32_t last;

		if (w->state == WQE_DONE)
			continue;
		if (w->state == WQE_POSTED)
			break;
		if (w->rd_atomic) {
			uint32_t expect = roce_psn_add(w->first_psn, w->rcvd_pkts);

			if (roce_psn_diff(psn, expect) >= 0) {
				*lost_psn = expect;
				return false;
			}
			break;
		}
		last = roce_psn_add(w->first_psn, w->npkts - 1);
		if (roce_psn_diff(psn, last) >= 0) {
			wqe_finish(qp, w, IBV_WC_SUCCESS);
			progress = true;
			continue;
		}
		break;
	}
	if (roce_psn_diff(roce_psn_add(psn, 1), qp->comp.psn) > 0) {
		comp_advance(qp, roce_psn_add(psn, 1));
		progress = true;
	}
	if (progress)
		progress_made(qp);
	return true;
}

/**
 * Go-back-N on evidence of a loss (a PSN-sequence NAK, or a later response
 * arriving before an earlier READ response or ATOMIC ACK). Several of these
 * for one loss are normal at high loss rates (a retransmission pass loses its
 * head again, a NAK crosses the previous pass), so they draw on a budget of
 * their own, 8 x (retry_cnt + 1) without progress, rather than on retry_cnt,
 * which counts local ACK timeouts.
 */
static void go_back_nak(struct rocemu_qp *qp, uint32_t psn)
{
	if (qp->comp.nak_retry_left == 0) {
		ENGINE_COUNT(qp->engine, retry_exceeded);
		comp_fail(qp, first_pending(qp), IBV_WC_RETRY_EXC_ERR);
		return;
	}
	qp->comp.nak_retry_left--;
	rocemu_comp_set(qp, with_probe(qp->comp.state, false), "went back on a loss");
	rocemu_req_window_loss(qp, false);
	rocemu_req_rewind(qp, psn);
	rocemu_comp_rearm(qp, rocemu_port_pass_now(qp->engine->port));
}

/* A transport timer expiry: go back to psn, or give up when retry_cnt is
 * spent. silent: nothing came from the peer during the period that just
 * ended. Giving up then (retry_exceeded_silent) means the peer's engine did
 * not run for the whole budget (27 T with the back-off): a dead peer, a dead
 * link, or a peer starved of CPU that long; a lossy link with a live peer
 * ends with answers (duplicate ACKs, NAKs) in its last period. */
static void go_back(struct rocemu_qp *qp, uint32_t psn, bool silent)
{
	if (qp->comp.retry_left == 0) {
		ENGINE_COUNT(qp->engine, retry_exceeded);
		if (silent)
			ENGINE_COUNT(qp->engine, retry_exceeded_silent);
		comp_fail(qp, first_pending(qp), IBV_WC_RETRY_EXC_ERR);
		return;
	}
	qp->comp.retry_left--;
	rocemu_comp_set(qp, with_probe(qp->comp.state, false), "went back on a timeout");
	rocemu_req_window_loss(qp, true);
	rocemu_req_rewind(qp, psn);
	rocemu_comp_rearm(qp, rocemu_port_pass_now(qp->engine->port));
}

/**
 * Responses of a READ (or the ATOMIC ACK) at expect never came although later
 * responses did: re-request from expect, once per gap. Later responses of the
 * same stream are then dropped quietly until progress or a timeout.
 */
static void read_gap(struct rocemu_qp *qp, uint32_t expect)
{
	if (comp_rereading(qp->comp.state) && qp->comp.reread_psn == expect)
		return;
	rocemu_comp_set(qp, with_reread(qp->comp.state, true), "READ responses missing");
	qp->comp.reread_psn = expect;
	/* evidence of a loss, like a sequence NAK: not a timeout */
	go_back_nak(qp, expect);
}

static enum ibv_wc_status nak_status(uint8_t code)
{
	switch (code) {
	case ROCE_NAK_INVALID_REQUEST:
		return IBV_WC_REM_INV_REQ_ERR;
	case ROCE_NAK_REMOTE_ACCESS_ERR:
		return IBV_WC_REM_ACCESS_ERR;
	case ROCE_NAK_REMOTE_OP_ERR:
		return IBV_WC_REM_OP_ERR;
	case ROCE_NAK_INVALID_RD_REQUEST:
		return IBV_WC_REM_INV_RD_REQ_ERR;
	default:
		return IBV_WC_REM_OP_ERR;
	}
}

static void count_nak(struct rocemu_engine *e, uint8_t code)
{
	switch (code) {
	case ROCE_NAK_PSN_SEQ_ERR:
		ENGINE_COUNT(e, rx_nak_psn_seq);
		break;
	case ROCE_NAK_INVALID_REQUEST:
		ENGINE_COUNT(e, rx_nak_invalid_req);
		break;
	case ROCE_NAK_REMOTE_ACCESS_ERR:
		ENGINE_COUNT(e, rx_nak_remote_access);
		break;
	case ROCE_NAK_REMOTE_OP_ERR:
		ENGINE_COUNT(e, rx_nak_remote_op);
		break;
	default:
		ENGINE_COUNT(e, rx_nak_other);
		break;
	}
}

/** The WQE whose PSN range holds psn. */
static struct rocemu_send_wqe *wqe_of_psn(struct rocemu_qp *qp, uint32_t psn)
{
	uint32_t end = qp->sq_cur + (qp->sq_cur != qp->sq_tail);

	for (uint32_t i = qp->sq_head; i != end; i++) {
		struct rocemu_send_wqe *w = sq_at(qp, i);

		if (w->state != WQE_ACTIVE && w->state != WQE_SENT)
			continue;
		if (roce_psn_diff(psn, w->first_psn) >= 0 &&
		    roce_psn_diff(psn, w->first_psn) < (int32_t)w->npkts)
			return w;
	}
	return NULL;
}

/**
 * An ACK for exactly the probed PSN answers the probe (an ACK still on its
 * way from before the stall covers more): the responder took the probe as
 * its expected PSN and has nothing after it, so what was sent after it
 * before the probe was lost (the path keeps order; reordering only costs a
 * needless resend). Go back to psn + 1 now instead of probing packet by
 * packet.
 */
static void comp_probe_answered(struct rocemu_qp *qp, uint32_t psn)
{
	rocemu_comp_set(qp, with_probe(qp->comp.state, false), "probe answered");
	if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD)
		return;
	if (psn == qp->comp.probe_psn && roce_psn_diff(qp->req.max_sent_psn, psn) > 0 &&
	    first_pending(qp))
		go_back_nak(qp, roce_psn_add(psn, 1));
}

static void handle_ack(struct rocemu_qp *qp, const struct roce_pkt *pkt)
{
	struct rocemu_engine *e = qp->engine;
	uint8_t syn = pkt->aeth.syndrome;
	uint32_t psn = pkt->psn, lost;

	/* A NAK or RNR NAK for a PSN already acknowledged is stale (duplicated, or
	 * overtaken by a later response): going back for it would resend what
	 * the responder has and spend the NAK budget. */
	if (ROCE_AETH_TYPE(syn) != ROCE_AETH_ACK && roce_psn_diff(psn, qp->comp.psn) < 0) {
		ENGINE_COUNT(e, drop_resp_duplicate);
		return;
	}
	switch (ROCE_AETH_TYPE(syn)) {
	case ROCE_AETH_ACK:
		ENGINE_COUNT(e, rx_acks);
		if (!ack_upto(qp, psn, &lost)) {
			read_gap(qp, lost);
			break;
		}
		if (comp_probing(qp->comp.state))
			comp_probe_answered(qp, psn);
		break;
	case ROCE_AETH_RNR_NAK:
		ENGINE_COUNT(e, rx_rnr_nak);
		if (!ack_upto(qp, roce_psn_add(psn, ROCE_PSN_MASK), &lost)) {
			read_gap(qp, lost); /* loss evidence: the NAK budget, not retry_cnt */
			break;
		}
		if (qp->comp.rnr_left == 0) {
			ENGINE_COUNT(e, rnr_retry_exceeded);
			comp_fail(qp, wqe_of_psn(qp, psn), IBV_WC_RNR_RETRY_EXC_ERR);
			break;
		}
		if (qp->comp.rnr_left != 7) /* 7: retry forever (9.7.5.2.8) */
			qp->comp.rnr_left--;
		/* Wait, then resend from the NAKed PSN; the transport timer pauses meanwhile. */
		qp->comp.rnr_until_ns = rocemu_port_pass_now(e->port) +
					(uint64_t)rnr_delay_10us[ROCE_AETH_VALUE(syn)] * 10000;
		qp->comp.rnr_psn = psn;
		qp->comp.deadline_ns = 0;
		qp->comp.probe_ns = 0;
		break;
	case ROCE_AETH_NAK: {
		uint8_t code = ROCE_AETH_VALUE(syn);

		count_nak(e, code);
		if (!ack_upto(qp, roce_psn_add(psn, ROCE_PSN_MASK), &lost)) {
			read_gap(qp, lost); /* loss evidence: the NAK budget, not retry_cnt */
			break;
		}
		if (code == ROCE_NAK_PSN_SEQ_ERR) {
			go_back_nak(qp, psn);
			break;
		}
		comp_fail(qp, wqe_of_psn(qp, psn), nak_status(code));
		break;
	}
	default:
		ENGINE_COUNT(e, drop_resp_unexpected);
		break;
	}
}

/*
 * Whether opcode may carry response idx of the n-packet READ w (9.7.5.1:
 * the responses of one request are FIRST, MIDDLE.., LAST, or ONLY). A READ
 * re-requested from response s (after a loss) is answered FIRST (or ONLY)
 * from s, while responses of the earlier request may still be arriving:
 * FIRST or ONLY fits response 0 and the start of the latest request, MIDDLE
 * or LAST any other (a stream that started before it).
 */
static bool read_resp_opcode_ok(const struct rocemu_send_wqe *w, uint32_t idx, uint8_t opcode)
{
	bool starts = idx == 0 || idx == w->read_from, last = idx + 1 == w->npkts;

	switch (opcode & 0x1F) { /* RC's or XRC's */
	case ROCE_OP_READ_RESP_FIRST:
		return starts && !last;
	case ROCE_OP_READ_RESP_ONLY:
		return starts && last;
	case ROCE_OP_READ_RESP_MIDDLE:
		return idx > 0 && !last;
	case ROCE_OP_READ_RESP_LAST:
		return idx > 0 && last;
	default:
		return false;
	}
}

/* ATOMIC WRITE and FLUSH are answered by one RDMA READ response Only
 * without payload (annex A19); it completes the WQE. */
static void handle_placement_resp(struct rocemu_qp *qp, struct rocemu_send_wqe *w,
				  const struct roce_pkt *pkt)
{
	struct rocemu_engine *e = qp->engine;

	if (pkt->psn != w->first_psn) {
		if (roce_psn_diff(pkt->psn, w->first_psn) < 0) {
			ENGINE_COUNT(e, drop_resp_duplicate);
		} else {
			ENGINE_COUNT(e, drop_psn_out_of_seq);
			read_gap(qp, w->first_psn);
		}
		return;
	}
	if ((pkt->opcode & 0x1F) != ROCE_OP_READ_RESP_ONLY) {
		ENGINE_COUNT(e, drop_resp_bad_opcode);
		return;
	}
	if (pkt->payload_len != 0) {
		ENGINE_COUNT(e, drop_resp_bad_length);
		return;
	}
	w->rcvd_pkts = 1;
	comp_advance(qp, roce_psn_add(pkt->psn, 1));
	wqe_finish(qp, w, IBV_WC_SUCCESS);
	progress_made(qp);
}

static void handle_read_resp(struct rocemu_qp *qp, const struct roce_pkt *pkt,
			     const uint8_t *payload)
{
	struct rocemu_engine *e = qp->engine;
	struct rocemu_send_wqe *w;
	uint32_t psn = pkt->psn, lost, expect, idx, want;
	bool last_pkt;
	enum rocemu_mem_err err;

	/* a READ's probe is answered by its responses */
	rocemu_comp_set(qp, with_probe(qp->comp.state, false), "READ response");
	/* older than anything unacknowledged: a duplicate or a replay's overlap */
	if (roce_psn_diff(psn, qp->comp.psn) < 0) {
		ENGINE_COUNT(e, drop_resp_duplicate);
		return;
	}
	/* A READ response acknowledges everything before it (9.7.5.1.1). */
	if (!ack_upto(qp, roce_psn_add(psn, ROCE_PSN_MASK), &lost)) {
		ENGINE_COUNT(e, drop_psn_out_of_seq);
		read_gap(qp, lost);
		return;
	}
	w = first_pending(qp);
	if (w && (w->wr.opcode == IBV_WR_ATOMIC_WRITE || w->wr.opcode == ROCEMU_WR_FLUSH)) {
		handle_placement_resp(qp, w, pkt);
		return;
	}
	if (!w || w->wr.opcode != IBV_WR_RDMA_READ) {
		ENGINE_COUNT(e, drop_resp_unexpected);
		return;
	}
	expect = roce_psn_add(w->first_psn, w->rcvd_pkts);
	if (psn != expect) {
		if (roce_psn_diff(psn, expect) < 0) {
			ENGINE_COUNT(e, drop_resp_duplicate);
		} else {
			ENGINE_COUNT(e, drop_psn_out_of_seq);
			read_gap(qp, expect);
		}
		return;
	}
	idx = w->rcvd_pkts;
	last_pkt = idx + 1 == w->npkts;
	want = last_pkt ? w->length - idx * qp->mtu : qp->mtu;
	if (!read_resp_opcode_ok(w, idx, pkt->opcode)) {
		ENGINE_COUNT(e, drop_resp_bad_opcode);
		return;
	}
	if (pkt->payload_len != want) {
		ENGINE_COUNT(e, drop_resp_bad_length);
		return;
	}
	if (want) {
		err = rocemu_mem_scatter(e->mem, qp->pd, w->sge, w->wr.num_sge,
					 (uint64_t)idx * qp->mtu, payload, want);
		if (err != ROCEMU_MEM_OK) {
			comp_fail(qp, w, rocemu_comp_local_status(err));
			return;
		}
		ENGINE_ADD(e, copy_rx_bytes, want);
	}
	w->rcvd_pkts++;
	comp_advance(qp, roce_psn_add(psn, 1));
	if (last_pkt)
		wqe_finish(qp, w, IBV_WC_SUCCESS);
	progress_made(qp);
}

static void handle_atomic_ack(struct rocemu_qp *qp, const struct roce_pkt *pkt)
{
	struct rocemu_engine *e = qp->engine;
	struct rocemu_send_wqe *w;
	uint32_t lost;
	enum rocemu_mem_err err;
	uint64_t orig = pkt->atomic_orig;

	rocemu_comp_set(qp, with_probe(qp->comp.state, false), "ATOMIC ACKNOWLEDGE");

	if (roce_psn_diff(pkt->psn, qp->comp.psn) < 0) {
		ENGINE_COUNT(e, drop_resp_duplicate); /* replayed or duplicated */
		return;
	}
	if (!ack_upto(qp, roce_psn_add(pkt->psn, ROCE_PSN_MASK), &lost)) {
		ENGINE_COUNT(e, drop_psn_out_of_seq);
		read_gap(qp, lost);
		return;
	}
	w = first_pending(qp);
	if (!w ||
	    (w->wr.opcode != IBV_WR_ATOMIC_CMP_AND_SWP &&
	     w->wr.opcode != IBV_WR_ATOMIC_FETCH_AND_ADD) ||
	    w->first_psn != pkt->psn) {
		ENGINE_COUNT(e, drop_resp_unexpected);
		return;
	}
	if (w->wr.num_sge) {
		err = rocemu_mem_scatter(e->mem, qp->pd, w->sge, w->wr.num_sge, 0, &orig, 8);
		if (err != ROCEMU_MEM_OK) {
			comp_fail(qp, w, rocemu_comp_local_status(err));
			return;
		}
	}
	w->rcvd_pkts = 1;
	comp_advance(qp, roce_psn_add(pkt->psn, 1));
	wqe_finish(qp, w, IBV_WC_SUCCESS);
	progress_made(qp);
}

void rocemu_comp_rx(struct rocemu_qp *qp, struct rte_mbuf *m, const struct roce_pkt *pkt)
{
	struct rocemu_engine *e = qp->engine;
	const uint8_t *payload = rte_pktmbuf_mtod(m, const uint8_t *) + pkt->payload_off;

	if (!qp_is_reliable(qp) || qp->type == IBV_QPT_XRC_RECV) {
		ENGINE_COUNT(e, drop_qp_type);
		return;
	}
	if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD) {
		ENGINE_COUNT(e, drop_qp_state);
		return;
	}
	/* A response names a PSN some request sent so far covers (9.7: the
	 * requester validates responses against what is outstanding). req.psn
	 * is not that bound: a message gets all its PSNs when it starts, and a
	 * forged ACK or NAK for a PSN the send window has not let out yet would
	 * complete it, or move the send point past packets never sent. */
	if (!qp->req.sent_any || roce_psn_diff(pkt->psn, qp->req.max_sent_psn) > 0) {
		ENGINE_COUNT(e, drop_resp_unsent_psn);
		return;
	}
	if (roce_psn_diff(pkt->psn, qp->comp.psn) < -(int32_t)ROCEMU_REQ_WINDOW * 2) {
		ENGINE_COUNT(e, drop_resp_unexpected); /* older than anything outstanding */
		return;
	}
	/* READ RESPONSE FIRST/LAST/ONLY and ATOMIC ACKNOWLEDGE carry an AETH
	 * whose syndrome is an ACK: NAKs and RNR NAKs come as ACKNOWLEDGE
	 * packets (9.7.5.1). Another syndrome is not data to take. */
	if ((pkt->op->flags & (ROCE_OPF_READ | ROCE_OPF_ATOMIC)) &&
	    (pkt->op->hdrs & ROCE_HDR_AETH) &&
	    ROCE_AETH_TYPE(pkt->aeth.syndrome) != ROCE_AETH_ACK) {
		ENGINE_COUNT(e, drop_resp_bad_syndrome);
		return;
	}
	if (pkt->op->flags & ROCE_OPF_READ)
		handle_read_resp(qp, pkt, payload);
	else if (pkt->op->flags & ROCE_OPF_ATOMIC)
		handle_atomic_ack(qp, pkt);
	else
		handle_ack(qp, pkt);
	if (qp->state != IBV_QPS_ERR)
		rocemu_comp_retire(qp);
}

/**
 * A requester that has sent what its window (or its send queue) allows and
 * heard nothing for an RTT estimate plus four deviations has most likely
 * lost the tail of what it sent, or the ACK or the sequence NAK that would
 * move it on (a responder NAKs a gap once and then stays silent until the
 * expected PSN comes, 9.7.5.2). Rather than idle until the transport timer
 * (67 ms at the common timeout 14), it resends its oldest unacknowledged
 * packet once, with AckReq (a probe, like TCP's tail loss probe): a lost
 * head is filled, a duplicate is re-acknowledged. The ACK that answers it
 * tells how far the responder got; what was sent after that PSN, before the
 * probe, was lost, and the requester goes back to it at once
 * (comp_probe_answered). A needless probe costs one packet. One probe per
 * stall; it does not draw on retry_cnt, which counts the transport timer's
 * expiries (9.7.6.1.3). Without an RTT sample (nothing ever answered) there
 * is no probe.
 */
static unsigned comp_probe(struct rocemu_qp *qp)
{
	qp->comp.probes++;
	qp->comp.probe_ns = 0;
	qp->comp.probe_psn = oldest_unacked(qp);
	if (!rocemu_req_probe(qp, qp->comp.probe_psn))
		return 0;
	rocemu_comp_set(qp, with_probe(qp->comp.state, true), "probe sent");
	ENGINE_COUNT(qp->engine, retransmit_probes);
	return 1;
}

unsigned rocemu_comp_timers(struct rocemu_qp *qp, uint64_t now)
{
	unsigned work = 0;

	if (!qp_is_reliable(qp) || (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD))
		return 0;
	if (qp->comp.rnr_until_ns && now >= qp->comp.rnr_until_ns) {
		qp->comp.rnr_until_ns = 0;
		rocemu_req_rewind(qp, qp->comp.rnr_psn);
		rocemu_comp_rearm(qp, now);
		work++;
	}
	if (qp->comp.probe_ns && now >= qp->comp.probe_ns && !qp->comp.rnr_until_ns &&
	    !(qp->comp.deadline_ns && now >= qp->comp.deadline_ns)) {
		qp->comp.probe_ns = 0;
		if (outstanding(qp))
			work += comp_probe(qp);
	}
	if (qp->comp.deadline_ns && now >= qp->comp.deadline_ns) {
		if (!outstanding(qp)) {
			qp->comp.deadline_ns = 0;
		} else {
			ENGINE_COUNT(qp->engine, retransmit_timeouts);
			uint32_t from = oldest_unacked(qp);

			/* Nothing came from the peer for a whole period: it may be
			 * dead, or alive but not scheduled (one-way delays of tens of
			 * ms on a loaded machine). A lost packet is not told from
			 * either, so this expiry counts against retry_cnt as usual
			 * (9.7.6.1.3), but the next period is longer: a busy peer
			 * gets time to run before RETRY_EXC, a dead one still ends
			 * in RETRY_EXC in bounded time. A peer heard from is
			 * running: its periods stay T. */
			if (qp->comp.heard) {
				qp->comp.backoff = 0;
			} else {
				ENGINE_COUNT(qp->engine, retransmit_timeouts_silent);
				if (qp->comp.backoff < ROCEMU_TIMER_BACKOFF_MAX)
					qp->comp.backoff++;
			}

			/* responses still in flight from before the timeout are stale */
			rocemu_comp_set(qp, with_reread(qp->comp.state, true), "timeout");
			qp->comp.reread_psn = from;
			go_back(qp, from, !qp->comp.heard);
			work++;
		}
	}
	return work;
}
