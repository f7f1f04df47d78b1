/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Requester (RC and UC): turns send WQEs into request packets. PSNs are
 * assigned when a WQE starts (a READ takes one PSN per response packet,
 * 9.7.1), messages are segmented by the path MTU into FIRST/MIDDLE/LAST/ONLY
 * packets, and the send window, fences and max_rd_atomic decide when a WQE
 * may start. Each WQE remembers its PSN range so that go-back-N
 * (rocemu_req_rewind) can resend from any PSN without recomputing anything.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "rocemu_transport.h"

/** The requester's view of a WQE's position in the transmission. */
enum req_step {
	REQ_SENT_PACKET, /**< one packet went out */
	REQ_BLOCKED,	 /**< must wait (resolution, mbufs, window): try again later */
	REQ_FAILED,	 /**< the WQE completed in error; the QP went to ERR */
};

static uint8_t transport_bits(const struct rocemu_qp *qp)
{
	if (qp->type == IBV_QPT_XRC_SEND)
		return ROCE_TRANSPORT_XRC; /* 9.3.8: the opcodes 0xA0.. */
	return qp->type == IBV_QPT_UC ? ROCE_TRANSPORT_UC : ROCE_TRANSPORT_RC;
}

/** Opcode of packet idx (of n) of a SEND or WRITE message (IBA table 38). */
static uint8_t data_opcode(const struct rocemu_send_wqe *w, uint32_t idx, uint32_t n)
{
	bool first = idx == 0, last = idx + 1 == n;
	bool write =
	    w->wr.opcode == IBV_WR_RDMA_WRITE || w->wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;

	if (write) {
		bool imm = w->wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;

		if (first && last)
			return imm ? ROCE_OP_WRITE_ONLY_IMM : ROCE_OP_WRITE_ONLY;
		if (first)
			return ROCE_OP_WRITE_FIRST;
		if (!last)
			return ROCE_OP_WRITE_MIDDLE;
		return imm ? ROCE_OP_WRITE_LAST_IMM : ROCE_OP_WRITE_LAST;
	}
	if (first && last) {
		if (w->wr.opcode == IBV_WR_SEND_WITH_IMM)
			return ROCE_OP_SEND_ONLY_IMM;
		if (w->wr.opcode == IBV_WR_SEND_WITH_INV)
			return ROCE_OP_SEND_ONLY_INV;
		return ROCE_OP_SEND_ONLY;
	}
	if (first)
		return ROCE_OP_SEND_FIRST;
	if (!last)
		return ROCE_OP_SEND_MIDDLE;
	if (w->wr.opcode == IBV_WR_SEND_WITH_IMM)
		return ROCE_OP_SEND_LAST_IMM;
	if (w->wr.opcode == IBV_WR_SEND_WITH_INV)
		return ROCE_OP_SEND_LAST_INV;
	return ROCE_OP_SEND_LAST;
}

static uint32_t packets_for(uint32_t len, uint32_t mtu)
{
	return len == 0 ? 1 : (len + mtu - 1) / mtu;
}

/** A WQE fails at the requester: it completes with status; RC goes to ERR (10.8.3), UC to SQE. */
static void req_fail(struct rocemu_qp *qp, struct rocemu_send_wqe *w, enum ibv_wc_status status)
{
	w->state = WQE_DONE;
	w->status = status;
	if (qp->type == IBV_QPT_UC)
		rocemu_qp_to_sqe(qp);
	else
		rocemu_qp_to_error(qp, false);
}

static enum req_step path_error(struct rocemu_qp *qp, struct rocemu_send_wqe *w, int rc)
{
	if (rc == -EAGAIN)
		return REQ_BLOCKED; /* ARP/ND under way: the next pass tries again */
	/* Unreachable destination: as if every retry had timed out. */
	req_fail(qp, w, IBV_WC_RETRY_EXC_ERR);
	return REQ_FAILED;
}

/* ------------------------------------------------------------------------ */
/* Adaptive send window                                                       */
/*
 * The IBA lets a requester limit the requests it has outstanding as it sees
 * fit (end-to-end credits are one limit, the send queue depth another). RC
 * over a lossy Ethernet recovers by go-back-N, which resends everything sent
 * after the lost packet: the packets in flight are the price of every loss.
 * So the window adapts like TCP's (additive increase, multiplicative
 * decrease): cut to 7/8 once per loss episode (a sequence NAK, a READ gap, a
 * probe that finds a loss), back to ROCEMU_REQ_WINDOW_MIN after a timeout,
 * grown by the packets acked below ssthresh (slow start) and by
 * ROCEMU_WINDOW_AI per window's worth of acked packets above it, never past
 * ROCEMU_REQ_WINDOW. Loss-free, it stays at ROCEMU_REQ_WINDOW. Off by default
 * (ROCEMU_REQ_WINDOW_MIN = ROCEMU_REQ_WINDOW): see rocemu_transport.h.
 */

uint32_t rocemu_req_window(const struct rocemu_qp *qp)
{
	return qp->req.cwnd ? qp->req.cwnd : ROCEMU_REQ_WINDOW;
}

void rocemu_req_window_loss(struct rocemu_qp *qp, bool timeout)
{
	uint32_t w = rocemu_req_window(qp);

	qp->req.rtt_timing = false; /* Karn: no RTT sample across a resend */
	if (ROCEMU_REQ_WINDOW_MIN >= ROCEMU_REQ_WINDOW)
		return; /* adaptation off (see rocemu_transport.h) */
	if (qp->req.recovering && !timeout)
		return; /* one cut per loss episode: later NAKs are the same loss */
	w = w * ROCEMU_WINDOW_MD_NUM / ROCEMU_WINDOW_MD_DEN;
	qp->req.ssthresh = w > ROCEMU_REQ_WINDOW_MIN ? w : ROCEMU_REQ_WINDOW_MIN;
	qp->req.cwnd = timeout ? ROCEMU_REQ_WINDOW_MIN : qp->req.ssthresh;
	qp->req.cwnd_acked = 0;
	qp->req.recovering = true;
	qp->req.recover_psn = qp->req.psn;
	ENGINE_COUNT(qp->engine, window_shrinks);
}

static void rtt_sample(struct rocemu_qp *qp, uint64_t now)
{
	uint64_t r = now - qp->req.rtt_sent_ns;

	qp->req.rtt_timing = false;
	if (qp->req.srtt_ns == 0) {
		qp->req.srtt_ns = r;
		qp->req.rttvar_ns = r / 2;
		return;
	}
	/* RFC 6298's estimator: srtt += (r - srtt)/8, rttvar += (|r - srtt| - rttvar)/4 */
	uint64_t dev = r > qp->req.srtt_ns ? r - qp->req.srtt_ns : qp->req.srtt_ns - r;

	qp->req.rttvar_ns = (3 * qp->req.rttvar_ns + dev) / 4;
	qp->req.srtt_ns = (7 * qp->req.srtt_ns + r) / 8;
}

void rocemu_req_window_progress(struct rocemu_qp *qp, uint32_t acked, uint64_t now)
{
	uint32_t w = rocemu_req_window(qp);

	if (qp->req.rtt_timing && roce_psn_diff(qp->comp.psn, qp->req.rtt_psn) > 0)
		rtt_sample(qp, now);
	if (qp->req.recovering && roce_psn_diff(qp->comp.psn, qp->req.recover_psn) >= 0)
		qp->req.recovering = false;
	if (w >= ROCEMU_REQ_WINDOW || acked == 0)
		return;
	if (w < qp->req.ssthresh) {
		w += acked; /* slow start after a timeout */
	} else {
		qp->req.cwnd_acked += acked;
		while (qp->req.cwnd_acked >= w / ROCEMU_WINDOW_AI) {
			qp->req.cwnd_acked -= w / ROCEMU_WINDOW_AI;
			w++;
		}
	}
	qp->req.cwnd = w < ROCEMU_REQ_WINDOW ? w : ROCEMU_REQ_WINDOW;
}

/**
 * A request packet left: the highest PSN a response may now name (covers:
 * the packet's PSN, or a READ request's last response PSN), and RTT timing
 * (first AckReq packet not yet answered). A PSN at or below the highest one
 * sent before goes on the wire again: retransmit_packets counts it here, as
 * it leaves, so the counter is what a capture of the port shows (counted at
 * the rewind, a go-back-N that an ACK made needless before it left counted
 * packets that were never resent).
 */
static void req_sent(struct rocemu_qp *qp, uint32_t psn, uint32_t covers, bool ackreq)
{
	bool again;

	if (!qp_is_reliable(qp))
		return;
	again = qp->req.sent_any && roce_psn_diff(psn, qp->req.max_sent_psn) <= 0;
	if (again)
		ENGINE_COUNT(qp->engine, retransmit_packets);
	if (!qp->req.sent_any || roce_psn_diff(covers, qp->req.max_sent_psn) > 0)
		qp->req.max_sent_psn = covers;
	qp->req.sent_any = true;
	/* Karn: a resent PSN gives no RTT sample */
	if (!ackreq || qp->req.rtt_timing || again)
		return;
	qp->req.rtt_timing = true;
	qp->req.rtt_psn = psn;
	qp->req.rtt_sent_ns = rocemu_port_pass_now(qp->engine->port);
}

static bool window_full(const struct rocemu_qp *qp, uint32_t psn)
{
	return qp_is_reliable(qp) &&
	       roce_psn_diff(psn, qp->comp.psn) >= (int32_t)rocemu_req_window(qp);
}

/** AckReq interval of a long message: a quarter of the window, at most ROCEMU_ACKREQ_INTERVAL. */
static uint32_t ackreq_interval(const struct rocemu_qp *qp)
{
	uint32_t n = rocemu_req_window(qp) / 4;

	return n == 0 ? 1 : n < ROCEMU_ACKREQ_INTERVAL ? n : ROCEMU_ACKREQ_INTERVAL;
}

static void base_pkt(struct rocemu_qp *qp, const struct rocemu_send_wqe *w, struct roce_pkt *pkt,
		     uint8_t opcode, uint32_t psn)
{
	pkt->opcode = opcode;
	pkt->op = roce_opcode_info(opcode);
	pkt->pkey = ROCE_DEFAULT_PKEY;
	pkt->dqpn = qp->attr.dest_qp_num;
	pkt->psn = psn;
	/* XRC: every request names the remote XRC SRQ it is for (9.3.8) */
	pkt->xrc_srqn = w->wr.xrc_srqn;
}

/** Payload bytes of packet idx of a SEND or WRITE: the path MTU but in the last. */
static uint32_t packet_payload(const struct rocemu_qp *qp, const struct rocemu_send_wqe *w,
			       uint32_t idx)
{
	uint64_t offset = (uint64_t)idx * qp->mtu;

	return w->length - offset < qp->mtu ? (uint32_t)(w->length - offset) : qp->mtu;
}

/** Extended header bytes of packet idx for a rate limit: RETH first, ImmDt last. */
static uint32_t ext_bytes(const struct rocemu_send_wqe *w, uint32_t idx)
{
	bool write =
	    w->wr.opcode == IBV_WR_RDMA_WRITE || w->wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
	bool imm = w->wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
		   w->wr.opcode == IBV_WR_SEND_WITH_IMM || w->wr.opcode == IBV_WR_SEND_WITH_INV;

	return (write && idx == 0 ? 16 : 0) + (imm && idx + 1 == w->npkts ? 4 : 0);
}

/**
 * The rate limit's say on packet idx of w (rate.c): true when the QP is not
 * limited or the bucket had credit for the packet's bytes (payload and
 * extended headers; a READ request carries a RETH, an atomic an AtomicETH).
 */
static bool rate_allows(struct rocemu_qp *qp, const struct rocemu_send_wqe *w, uint32_t idx)
{
	uint32_t bytes;

	if (!qp->rate.kbps)
		return true;
	if (w->rd_atomic)
		bytes = w->wr.opcode == IBV_WR_RDMA_READ ? 16 : 28;
	else
		bytes = packet_payload(qp, w, idx) + ext_bytes(w, idx);
	return rocemu_rate_take(qp, bytes, rocemu_port_pass_now(qp->engine->port));
}

/** Build and send packet idx of w; turn_ends: the last packet the requester
 * sends before it waits for its next turn (its budget spent, or the last room
 * in the transmit queue). */
static enum req_step send_data_packet(struct rocemu_qp *qp, struct rocemu_send_wqe *w, uint32_t idx,
				      bool turn_ends)
{
	struct rocemu_engine *e = qp->engine;
	struct roce_pkt pkt = {0};
	uint64_t offset = (uint64_t)idx * qp->mtu;
	uint32_t plen = packet_payload(qp, w, idx);
	bool last = idx + 1 == w->npkts;
	uint8_t *payload;
	struct rte_mbuf *m;
	uint32_t crc;
	int rc;

	rc = rocemu_engine_fill_path(e, &qp->path, &pkt);
	if (rc < 0)
		return path_error(qp, w, rc);
	base_pkt(qp, w, &pkt, transport_bits(qp) | data_opcode(w, idx, w->npkts),
		 roce_psn_add(w->first_psn, idx));
	if (qp_is_reliable(qp)) {
		/* 9.7.6.1.1: AckReq on the last packet of a message, now and then on
		 * long ones so that the window keeps moving, and on the packet that
		 * fills the window: the requester then waits for nothing but that ACK;
		 * likewise on the last packet before a rate limit's wait (rate.c) and
		 * before the requester's turn ends: with many QPs the next turn may
		 * come after the transport timer, and the responder acknowledges
		 * nothing it was not asked to. */
		if (last || ++qp->req.since_ackreq >= ackreq_interval(qp) ||
		    window_full(qp, roce_psn_add(pkt.psn, 1)) || rocemu_rate_will_wait(qp) ||
		    turn_ends) {
			pkt.ackreq = true;
			qp->req.since_ackreq = 0;
		}
	}
	if (last && (w->wr.send_flags & IBV_SEND_SOLICITED) && w->wr.opcode != IBV_WR_RDMA_WRITE)
		pkt.se = true;
	if (pkt.op->hdrs & ROCE_HDR_RETH) {
		pkt.reth.va = w->wr.remote_addr;
		pkt.reth.rkey = w->wr.rkey;
		pkt.reth.dma_len = w->length;
	}
	if (pkt.op->hdrs & ROCE_HDR_IMMDT)
		pkt.imm = be32toh(w->wr.imm_data);
	if (pkt.op->hdrs & ROCE_HDR_IETH)
		pkt.ieth_rkey = w->wr.invalidate_rkey;
	pkt.payload_len = plen;

	/* The payload is copied and CRC'd in one pass (the ICRC's CRC over the
	 * headers from the build): the data is read once instead of twice. */
	m = rocemu_engine_pkt_alloc(e, &pkt, &payload, &crc);
	if (!m)
		return REQ_BLOCKED;
	if (w->is_inline) {
		crc = roce_crc32_copy(crc, payload, w->inline_data + offset, plen);
	} else if (plen) {
		enum rocemu_mem_err err = rocemu_mem_gather_crc(
		    e->mem, qp->pd, w->sge, w->wr.num_sge, offset, payload, plen, &crc);
		if (err != ROCEMU_MEM_OK) {
			rte_pktmbuf_free(m);
			req_fail(qp, w, rocemu_comp_local_status(err));
			return REQ_FAILED;
		}
	}
	ENGINE_ADD(e, copy_tx_bytes, plen);
	/* A full tx queue loses the frame: build it again on the next pass. */
	if (rocemu_engine_pkt_send_crc(e, m, &pkt, crc) < 0)
		return REQ_BLOCKED;
	req_sent(qp, pkt.psn, pkt.psn, pkt.ackreq);
	return REQ_SENT_PACKET;
}

/* ATOMIC WRITE: RETH (length 8) and the 8 bytes; FLUSH: FETH and RETH (A19). */
static void placement_request(struct rocemu_qp *qp, struct rocemu_send_wqe *w, struct roce_pkt *pkt)
{
	bool aw = w->wr.opcode == IBV_WR_ATOMIC_WRITE;

	base_pkt(qp, w, pkt, transport_bits(qp) | (aw ? ROCE_OP_ATOMIC_WRITE : ROCE_OP_FLUSH),
		 w->first_psn);
	pkt->reth.va = w->wr.remote_addr;
	pkt->reth.rkey = w->wr.rkey;
	pkt->reth.dma_len = w->length;
	if (!aw)
		pkt->feth = ROCE_FETH(w->wr.flush_type, w->wr.flush_level);
}

/** READ request (from the first response not yet received), atomic, ATOMIC WRITE or FLUSH. */
static enum req_step send_rd_atomic_packet(struct rocemu_qp *qp, struct rocemu_send_wqe *w)
{
	struct rocemu_engine *e = qp->engine;
	struct roce_pkt pkt = {0};
	uint8_t *payload;
	struct rte_mbuf *m;
	uint32_t crc;
	int rc;

	rc = rocemu_engine_fill_path(e, &qp->path, &pkt);
	if (rc < 0)
		return path_error(qp, w, rc);
	if (w->wr.opcode == IBV_WR_RDMA_READ) {
		uint64_t done = (uint64_t)w->rcvd_pkts * qp->mtu;

		w->read_from = w->rcvd_pkts; /* its responses start FIRST (or ONLY) there */
		base_pkt(qp, w, &pkt, transport_bits(qp) | ROCE_OP_READ_REQUEST,
			 roce_psn_add(w->first_psn, w->rcvd_pkts));
		pkt.reth.va = w->wr.remote_addr + done;
		pkt.reth.rkey = w->wr.rkey;
		pkt.reth.dma_len = (uint32_t)(w->length - done);
	} else if (w->wr.opcode == IBV_WR_ATOMIC_WRITE || w->wr.opcode == ROCEMU_WR_FLUSH) {
		placement_request(qp, w, &pkt);
	} else {
		bool cas = w->wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP;

		base_pkt(qp, w, &pkt,
			 transport_bits(qp) | (cas ? ROCE_OP_CMP_SWAP : ROCE_OP_FETCH_ADD),
			 w->first_psn);
		pkt.atomic.va = w->wr.remote_addr;
		pkt.atomic.rkey = w->wr.rkey;
		pkt.atomic.swap_add = cas ? w->wr.swap : w->wr.compare_add;
		pkt.atomic.compare = cas ? w->wr.compare_add : 0;
	}
	pkt.ackreq = true;
	qp->req.since_ackreq = 0;
	pkt.payload_len = w->wr.opcode == IBV_WR_ATOMIC_WRITE ? sizeof(w->wr.atomic_wr) : 0;
	m = rocemu_engine_pkt_alloc(e, &pkt, &payload, &crc);
	if (!m)
		return REQ_BLOCKED;
	crc = roce_crc32_copy(crc, payload, w->wr.atomic_wr, pkt.payload_len);
	if (rocemu_engine_pkt_send_crc(e, m, &pkt, crc) < 0)
		return REQ_BLOCKED;
	/* a READ request covers the PSNs of all its responses (9.7.1) */
	req_sent(qp, pkt.psn, roce_psn_add(w->first_psn, w->npkts - 1), true);
	return REQ_SENT_PACKET;
}

static void local_invalidate(struct rocemu_qp *qp, struct rocemu_send_wqe *w)
{
	enum rocemu_mem_err err;

	err = rocemu_mem_invalidate(qp->engine->mem, qp->pd, w->wr.invalidate_rkey, false, qp->qpn);
	w->state = WQE_DONE;
	w->status = err == ROCEMU_MEM_OK ? IBV_WC_SUCCESS : IBV_WC_LOC_PROT_ERR;
	if (err != ROCEMU_MEM_OK)
		req_fail(qp, w, IBV_WC_LOC_PROT_ERR);
}

/* A bind WR (IBV_WR_BIND_MW, or ibv_bind_mw's for type 1) runs in order
 * with the queue, like LOCAL_INV; a failed bind is IBV_WC_MW_BIND_ERR
 * (memory management operation error) and the QP goes to error. */
static void local_bind(struct rocemu_qp *qp, struct rocemu_send_wqe *w)
{
	struct rocemu_mem_bind b = {
	    .key = w->wr.rkey,
	    .type = w->wr.bind_type,
	    .mr_lkey = w->wr.bind_lkey,
	    .addr = w->wr.remote_addr,
	    .length = w->wr.bind_length,
	    .access = w->wr.bind_access,
	};

	w->state = WQE_DONE;
	w->status = IBV_WC_SUCCESS;
	if (rocemu_mem_bind(qp->engine->mem, qp->pd, qp->qpn, &b) < 0)
		req_fail(qp, w, IBV_WC_MW_BIND_ERR);
}

static uint32_t max_rd_atomic(const struct rocemu_qp *qp)
{
	/* 0 would forbid READ/atomics altogether; rdma-core users routinely
	 * leave it 0 on UC-like setups, so one outstanding is the floor. */
	return qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1;
}

/** Start a posted WQE: fences, READ/atomic credits, PSN range. false = must wait. */
static bool req_start(struct rocemu_qp *qp, struct rocemu_send_wqe *w)
{
	if ((w->wr.send_flags & IBV_SEND_FENCE) && qp->req.rd_atomic > 0)
		return false; /* 10.8.3.3: a fenced WQE waits for prior READ/atomics */
	if (w->rd_atomic && qp->req.rd_atomic >= max_rd_atomic(qp))
		return false;
	if (window_full(qp, qp->req.psn))
		return false;
	w->first_psn = qp->req.psn;
	/* READ: one PSN per response packet; the others one PSN (A19: ATOMIC
	 * WRITE and FLUSH are single-packet requests with one response) */
	w->npkts =
	    w->rd_atomic && w->wr.opcode != IBV_WR_RDMA_READ ? 1 : packets_for(w->length, qp->mtu);
	qp->req.psn = roce_psn_add(qp->req.psn, w->npkts);
	w->sent_pkts = 0;
	w->rcvd_pkts = 0;
	w->state = WQE_ACTIVE;
	if (w->rd_atomic)
		qp->req.rd_atomic++;
	return true;
}

bool rocemu_req_pending(const struct rocemu_qp *qp)
{
	if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD)
		return false;
	if (qp->comp.rnr_until_ns || qp->rate.until_ns || qp->sq_cur == qp->sq_tail)
		return false;
	/* SQD: only a WQE already started still sends (11.2.5.4) */
	return qp->state == IBV_QPS_RTS || sq_at(qp, qp->sq_cur)->state != WQE_POSTED;
}

unsigned rocemu_req_run(struct rocemu_qp *qp, unsigned budget)
{
	unsigned sent = 0;

	if (qp->type == IBV_QPT_UD)
		return rocemu_ud_send(qp, budget);
	if (qp->type == IBV_QPT_RAW_PACKET)
		return rocemu_raw_send(qp, budget);
	while (sent < budget && rocemu_req_pending(qp)) {
		struct rocemu_send_wqe *w = sq_at(qp, qp->sq_cur);
		enum req_step step;

		if (w->state == WQE_POSTED) {
			if (qp->state != IBV_QPS_RTS)
				break; /* SQD: finish what started, start nothing new */
			if (w->wr.opcode == IBV_WR_LOCAL_INV || w->wr.opcode == IBV_WR_BIND_MW) {
				if (w->wr.opcode == IBV_WR_LOCAL_INV)
					local_invalidate(qp, w);
				else
					local_bind(qp, w);
				qp->sq_cur++;
				continue;
			}
			if (!req_start(qp, w))
				break;
		}
		if (w->state != WQE_ACTIVE) {
			qp->sq_cur++;
			continue;
		}
		if (w->rd_atomic) {
			if (!rate_allows(qp, w, 0))
				break;
			step = send_rd_atomic_packet(qp, w);
			if (step != REQ_SENT_PACKET)
				break;
			sent++;
			w->state = WQE_SENT;
			qp->sq_cur++;
			rocemu_comp_rearm(qp, rocemu_port_pass_now(qp->engine->port));
			continue;
		}
		while (w->sent_pkts < w->npkts && sent < budget) {
			if (window_full(qp, roce_psn_add(w->first_psn, w->sent_pkts)))
				goto out;
			if (!rate_allows(qp, w, w->sent_pkts))
				goto out;
			step = send_data_packet(qp, w, w->sent_pkts,
						sent + 1 >= budget ||
						    rocemu_port_tx_room(qp->engine->port) <= 1);
			if (step != REQ_SENT_PACKET)
				goto out;
			w->sent_pkts++;
			sent++;
		}
		if (w->sent_pkts < w->npkts)
			break;
		if (qp->type == IBV_QPT_UC) {
			/* UC: no acknowledgement; the WQE is done once on the wire (9.8). */
			w->state = WQE_DONE;
			w->status = IBV_WC_SUCCESS;
		} else {
			w->state = WQE_SENT;
		}
		qp->sq_cur++;
	}
out:
	if (sent && qp_is_reliable(qp))
		rocemu_comp_rearm(qp, rocemu_port_pass_now(qp->engine->port));
	return sent;
}

void rocemu_req_rewind(struct rocemu_qp *qp, uint32_t psn)
{
	uint32_t i, found = qp->sq_cur, end = qp->sq_head;
	bool hit = false;

	/* Every started WQE, also those past sq_cur: after an earlier rewind the
	 * responder may already hold PSNs beyond the requester's cursor (a NAK's
	 * PSN there), and the WQEs before it are then implicitly acknowledged. */
	while (end != qp->sq_tail && sq_at(qp, end)->state != WQE_POSTED)
		end++;
	for (i = qp->sq_head; i != end; i++) {
		struct rocemu_send_wqe *w = sq_at(qp, i);

		if (w->state != WQE_ACTIVE && w->state != WQE_SENT)
			continue;
		if (roce_psn_diff(psn, w->first_psn) >= 0 &&
		    roce_psn_diff(psn, w->first_psn) < (int32_t)w->npkts) {
			found = i;
			hit = true;
			break;
		}
	}
	if (!hit)
		return;
	/* Past the cursor only over finished WQEs: never skip one still unanswered. */
	for (i = qp->sq_cur; found - qp->sq_head > qp->sq_cur - qp->sq_head && i != found; i++)
		if (sq_at(qp, i)->state != WQE_DONE)
			return;
	for (i = found; i != end; i++) {
		struct rocemu_send_wqe *w = sq_at(qp, i);
		uint32_t from = i == found ? (uint32_t)roce_psn_diff(psn, w->first_psn) : 0;

		if (w->state != WQE_ACTIVE && w->state != WQE_SENT)
			continue;
		/* what goes out again is counted as it leaves (req_sent) */
		w->state = WQE_ACTIVE;
		if (w->wr.opcode == IBV_WR_RDMA_READ) {
			/* READ data arrives in order: re-request from the first missing response.
			 */
			if (i != found)
				w->rcvd_pkts = 0;
			w->sent_pkts = 0;
		} else {
			w->sent_pkts = w->rd_atomic ? 0 : from;
		}
	}
	qp->req.rtt_timing = false; /* Karn: a resent PSN gives no RTT sample */
	qp->sq_cur = found;
	rocemu_engine_schedule(qp);
}

unsigned rocemu_req_probe(struct rocemu_qp *qp, uint32_t psn)
{
	if (!qp->req.sent_any)
		return 0;
	for (uint32_t i = qp->sq_head; i != qp->sq_tail; i++) {
		struct rocemu_send_wqe *w = sq_at(qp, i);
		int32_t d = roce_psn_diff(psn, w->first_psn);
		enum req_step step;

		if (w->state == WQE_POSTED)
			break;
		if ((w->state != WQE_ACTIVE && w->state != WQE_SENT) || d < 0 ||
		    d >= (int32_t)w->npkts)
			continue;
		/* a probe is sent within the rate limit too, or not at all (the
		 * retransmission timer still runs) */
		if (!rate_allows(qp, w, (uint32_t)d))
			return 0;
		if (w->rd_atomic) {
			step = send_rd_atomic_packet(qp, w);
		} else {
			qp->req.since_ackreq =
			    ROCEMU_ACKREQ_INTERVAL; /* this one asks for the ACK */
			step = send_data_packet(qp, w, (uint32_t)d, false);
		}
		if (step != REQ_SENT_PACKET)
			return 0;
		qp->req.rtt_timing = false; /* Karn: no sample from a resent PSN */
		return 1;
	}
	return 0;
}
