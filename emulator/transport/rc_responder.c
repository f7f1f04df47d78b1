/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Responder for the connected services (RC, and UC which shares placement):
 * expected-PSN tracking, opcode sequence checks, SEND reassembly into the
 * receive WQE (QP RQ or SRQ), RDMA WRITE placement checked against the RETH
 * of the first packet, ACKs requested by AckReq, and which NAK of 9.7.5.2 a
 * request earns (PSN sequence error once per gap, RNR, invalid request,
 * remote access error, remote operational error). The requests answered
 * from a responder resource (READ, atomics, ATOMIC WRITE, FLUSH, and their
 * duplicates) are rc_responder_res.c; sending the answers (coalesced ACK,
 * NAKs queued behind READ responses) is rc_responder_ack.c.
 */
#include <endian.h>

#include "rc_responder.h"

/* ------------------------------------------------------------------------ */
/* Receive WQE completion                                                     */

static void recv_complete(struct rocemu_qp *qp, enum ibv_wc_status st, enum ibv_wc_opcode op,
			  uint32_t byte_len, const struct roce_pkt *pkt, bool solicited)
{
	struct rocemu_wc wc = {
	    .wr_id = qp->resp.wqe.wr_id,
	    .status = st,
	    .opcode = op,
	    .byte_len = byte_len,
	    .qp_num = qp->qpn,
	    .src_qp = qp->attr.dest_qp_num,
	    .timestamp_ns = rocemu_port_pass_now(qp->engine->port),
	};

	if (st == IBV_WC_SUCCESS && pkt) {
		if (pkt->op->hdrs & ROCE_HDR_IMMDT) {
			wc.imm_data = htobe32(pkt->imm);
			wc.wc_flags |= IBV_WC_WITH_IMM;
		}
		if (pkt->op->hdrs & ROCE_HDR_IETH) {
			wc.invalidated_rkey = pkt->ieth_rkey;
			wc.wc_flags |= IBV_WC_WITH_INV;
		}
	}
	qp->resp.have_wqe = false;
	rocemu_qp_complete(qp, false, &wc, solicited);
}

/* ------------------------------------------------------------------------ */
/* Placement (RC and UC)                                                      */

static bool payload_len_ok(const struct rocemu_qp *qp, const struct roce_pkt *pkt)
{
	uint32_t f = pkt->op->flags;

	/* 9.7.7 / C9-91: FIRST and MIDDLE carry exactly one MTU; LAST 1..MTU; ONLY 0..MTU. */
	if ((f & ROCE_OPF_ONLY) == ROCE_OPF_ONLY)
		return pkt->payload_len <= qp->mtu;
	if (f & ROCE_OPF_LAST)
		return pkt->payload_len >= 1 && pkt->payload_len <= qp->mtu;
	return pkt->payload_len == qp->mtu;
}

static enum resp_result place_send(struct rocemu_qp *qp, const struct roce_pkt *pkt,
				   const uint8_t *payload)
{
	struct rocemu_engine *e = qp->engine;
	uint32_t f = pkt->op->flags;
	enum rocemu_mem_err err;

	if (f & ROCE_OPF_FIRST) {
		if (!qp->resp.have_wqe) {
			if (rocemu_qp_take_recv(qp, &qp->resp.wqe) < 0)
				return RESP_RNR;
			qp->resp.have_wqe = true;
		}
		qp->resp.offset = 0;
	}
	if (!payload_len_ok(qp, pkt))
		return RESP_INV_REQ;
	if (qp->resp.offset + pkt->payload_len > qp->resp.wqe.total_len)
		return RESP_LEN;
	/* SEND with Invalidate: an R_Key the peer may not invalidate fails the
	 * message before its last bytes land, and the region stays valid (IBA
	 * 10.6.7; responder class J, invalid request, as Linux rxe). */
	if ((pkt->op->hdrs & ROCE_HDR_IETH) &&
	    rocemu_mem_invalidate_check(e->mem, qp->pd, pkt->ieth_rkey, true, qp->qpn) !=
		ROCEMU_MEM_OK)
		return RESP_INV_REQ;
	if (pkt->payload_len) {
		err = rocemu_mem_scatter(e->mem, qp->pd, qp->resp.wqe.sge, qp->resp.wqe.num_sge,
					 qp->resp.offset, payload, pkt->payload_len);
		if (err != ROCEMU_MEM_OK)
			return RESP_OP;
		ENGINE_ADD(e, copy_rx_bytes, pkt->payload_len);
	}
	qp->resp.offset += pkt->payload_len;
	rocemu_resp_msg_set(qp, (f & ROCE_OPF_LAST) ? RESP_MSG_IDLE : RESP_MSG_SEND,
			    (f & ROCE_OPF_LAST) ? "SEND placed" : "SEND begun");
	if (f & ROCE_OPF_LAST) {
		if ((pkt->op->hdrs & ROCE_HDR_IETH) &&
		    rocemu_mem_invalidate(e->mem, qp->pd, pkt->ieth_rkey, true, qp->qpn) !=
			ROCEMU_MEM_OK)
			return RESP_INV_REQ;
		recv_complete(qp, IBV_WC_SUCCESS, IBV_WC_RECV, (uint32_t)qp->resp.offset, pkt,
			      pkt->se);
		qp->resp.msn++;
	}
	return RESP_OK;
}

static enum resp_result place_write(struct rocemu_qp *qp, const struct roce_pkt *pkt,
				    const uint8_t *payload)
{
	struct rocemu_engine *e = qp->engine;
	uint32_t f = pkt->op->flags;
	enum rocemu_mem_err err;
	uint8_t *ptr;

	if (f & ROCE_OPF_FIRST) {
		if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE))
			return RESP_ACCESS;
		/* The whole target range is checked once, against the first packet's RETH
		 * (9.7.4.1.5). */
		if (pkt->reth.dma_len &&
		    rocemu_mem_translate(e->mem, qp->pd, qp->qpn, pkt->reth.rkey, true,
					 pkt->reth.va, pkt->reth.dma_len, ROCEMU_RIGHT_REMOTE_WRITE,
					 &ptr) != ROCEMU_MEM_OK)
			return RESP_ACCESS;
		qp->resp.write_va = pkt->reth.va;
		qp->resp.write_rkey = pkt->reth.rkey;
		qp->resp.write_len = pkt->reth.dma_len;
		qp->resp.offset = 0;
		if ((f & ROCE_OPF_ONLY) == ROCE_OPF_ONLY && pkt->payload_len != pkt->reth.dma_len)
			return RESP_INV_REQ;
	}
	if (!payload_len_ok(qp, pkt) || qp->resp.offset + pkt->payload_len > qp->resp.write_len)
		return RESP_INV_REQ;
	if ((f & ROCE_OPF_LAST) && qp->resp.offset + pkt->payload_len != qp->resp.write_len)
		return RESP_INV_REQ;
	if ((f & ROCE_OPF_LAST) && (pkt->op->hdrs & ROCE_HDR_IMMDT) && !qp->resp.have_wqe) {
		/* WRITE with immediate consumes a receive WQE: check before placing data. */
		if (rocemu_qp_take_recv(qp, &qp->resp.wqe) < 0)
			return RESP_RNR;
		qp->resp.have_wqe = true;
	}
	if (pkt->payload_len) {
		err = rocemu_mem_remote_write(e->mem, qp->pd, qp->qpn, qp->resp.write_rkey,
					      qp->resp.write_va + qp->resp.offset, payload,
					      pkt->payload_len);
		if (err != ROCEMU_MEM_OK)
			return RESP_ACCESS;
		ENGINE_ADD(e, copy_rx_bytes, pkt->payload_len);
	}
	qp->resp.offset += pkt->payload_len;
	rocemu_resp_msg_set(qp, (f & ROCE_OPF_LAST) ? RESP_MSG_IDLE : RESP_MSG_WRITE,
			    (f & ROCE_OPF_LAST) ? "WRITE placed" : "WRITE begun");
	if (f & ROCE_OPF_LAST) {
		if (pkt->op->hdrs & ROCE_HDR_IMMDT)
			recv_complete(qp, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
				      qp->resp.write_len, pkt, pkt->se);
		qp->resp.msn++;
	}
	return RESP_OK;
}

/* ------------------------------------------------------------------------ */
/* RC request processing                                                      */

static void rc_error(struct rocemu_qp *qp, enum resp_result res, uint32_t psn)
{
	struct rocemu_engine *e = qp->engine;
	enum ibv_wc_status st = IBV_WC_REM_INV_REQ_ERR;
	enum ibv_event_type ev = IBV_EVENT_QP_REQ_ERR;
	uint8_t code = ROCE_NAK_INVALID_REQUEST;

	switch (res) {
	case RESP_RNR:
		/* 9.7.5.2.8: RNR NAK carrying our min_rnr_timer; the message is retried
		 * from this PSN, so later packets are dropped without a sequence NAK. */
		rc_resp_queue_nak(qp, ROCE_AETH_SYNDROME(ROCE_AETH_RNR_NAK, qp->attr.min_rnr_timer),
				  psn);
		rocemu_resp_seq_set(qp, RESP_SEQ_RNR_NAKED, "no receive WQE");
		qp->resp.last_oos_psn = psn;
		return;
	case RESP_LEN:
		st = IBV_WC_LOC_LEN_ERR;
		break;
	case RESP_ACCESS:
		st = IBV_WC_REM_ACCESS_ERR;
		ev = IBV_EVENT_QP_ACCESS_ERR;
		code = ROCE_NAK_REMOTE_ACCESS_ERR;
		break;
	case RESP_OP:
		st = IBV_WC_LOC_PROT_ERR;
		ev = IBV_EVENT_QP_FATAL;
		code = ROCE_NAK_REMOTE_OP_ERR;
		break;
	default:
		break;
	}
	/* 9.9.3: these errors are fatal for the responder QP: NAK, then ERR. */
	rc_resp_send_nak(qp, code, psn);
	if (qp->resp.have_wqe)
		recv_complete(qp, st,
			      qp->resp.msg == RESP_MSG_WRITE ? IBV_WC_RECV_RDMA_WITH_IMM
							     : IBV_WC_RECV,
			      0, NULL, false);
	rocemu_qp_to_error(qp, false);
	rocemu_engine_raise(e, ev, qp->user_ctx);
}

static void rc_duplicate(struct rocemu_qp *qp, const struct roce_pkt *pkt)
{
	ENGINE_COUNT(qp->engine, dup_requests);
	if (pkt->op->flags &
	    (ROCE_OPF_READ | ROCE_OPF_ATOMIC | ROCE_OPF_ATOMIC_WRITE | ROCE_OPF_FLUSH)) {
		rc_resp_duplicate(qp, pkt); /* answered from its resource */
		return;
	}
	/* 9.7.5.1.1: re-acknowledge; coalesced with the rest of the burst. */
	qp->resp.ack_pending = true;
}

static bool rc_sequence_ok(const struct rocemu_qp *qp, uint16_t f)
{
	/* 9.7.5.1.2 / C9-89: a FIRST or MIDDLE must be followed by MIDDLE or LAST of the same kind.
	 */
	if (qp->resp.msg == RESP_MSG_SEND)
		return (f & ROCE_OPF_SEND) && !(f & ROCE_OPF_FIRST);
	if (qp->resp.msg == RESP_MSG_WRITE)
		return (f & ROCE_OPF_WRITE) && !(f & ROCE_OPF_FIRST);
	if (f & (ROCE_OPF_READ | ROCE_OPF_ATOMIC | ROCE_OPF_ATOMIC_WRITE | ROCE_OPF_FLUSH))
		return true;
	return (f & ROCE_OPF_FIRST) != 0;
}

static void rc_rx(struct rocemu_qp *qp, const struct roce_pkt *pkt, const uint8_t *payload)
{
	struct rocemu_engine *e = qp->engine;
	uint32_t f = pkt->op->flags;
	int32_t d = roce_psn_diff(pkt->psn, qp->resp.epsn);
	enum resp_result res;
	bool renak;

	if (d > 0) {
		/* The responder's PSN check (IBA 9.7.5.2, the PSN sequence error
		 * NAK): NAK only the first out-of-sequence packet of a gap, then
		 * ignore new requests until the expected PSN arrives. Deviation: a
		 * PSN below the last out-of-sequence one means the requester started
		 * a new pass (it went back) and lost its head again: that pass gets
		 * its one NAK too, instead of waiting for the requester's probe or
		 * timer; so does a gap still open 64 packets after its NAK (the NAK
		 * was lost). The rule as described says no NAK until the expected
		 * PSN comes; a requester that follows it is not hurt by the extra NAK. */
		ENGINE_COUNT(e, drop_psn_out_of_seq);
		/* NAKed again: a new pass, or our NAK was lost */
		renak = qp->resp.seq == RESP_SEQ_NAKED &&
			(roce_psn_diff(pkt->psn, qp->resp.last_oos_psn) < 0 ||
			 ++qp->resp.oos_since_nak >= ROCEMU_REQ_WINDOW / 2);
		qp->resp.last_oos_psn = pkt->psn;
		if (qp->resp.seq == RESP_SEQ_IN_ORDER || renak) {
			rc_resp_queue_nak(qp,
					  ROCE_AETH_SYNDROME(ROCE_AETH_NAK, ROCE_NAK_PSN_SEQ_ERR),
					  qp->resp.epsn);
			rocemu_resp_seq_set(qp, RESP_SEQ_NAKED, "PSN gap");
			qp->resp.oos_since_nak = 0;
		}
		return;
	}
	if (d < 0) {
		rc_duplicate(qp, pkt);
		return;
	}
	rocemu_resp_seq_set(qp, RESP_SEQ_IN_ORDER, "expected PSN");
	qp->resp.nak_pending = false;
	if (!rc_sequence_ok(qp, f)) {
		rc_error(qp, RESP_INV_REQ, pkt->psn);
		return;
	}
	if (f & ROCE_OPF_SEND)
		res = place_send(qp, pkt, payload);
	else if (f & ROCE_OPF_WRITE)
		res = place_write(qp, pkt, payload);
	else if (f & ROCE_OPF_READ)
		res = rc_resp_read(qp, pkt);
	else if (f & ROCE_OPF_ATOMIC)
		res = rc_resp_atomic(qp, pkt);
	else if (f & ROCE_OPF_ATOMIC_WRITE)
		res = rc_resp_atomic_write(qp, pkt, payload);
	else if (f & ROCE_OPF_FLUSH)
		res = rc_resp_flush(qp, pkt);
	else
		res = RESP_INV_REQ;
	if (res != RESP_OK) {
		rc_error(qp, res, pkt->psn);
		return;
	}
	if (f & (ROCE_OPF_READ | ROCE_OPF_ATOMIC | ROCE_OPF_ATOMIC_WRITE | ROCE_OPF_FLUSH))
		return; /* epsn advanced; the response is the acknowledgement */
	qp->resp.epsn = roce_psn_add(qp->resp.epsn, 1);
	if (pkt->ackreq)
		qp->resp.ack_pending = true;
}

/* ------------------------------------------------------------------------ */
/* UC request processing (9.8.3: no ACKs; a gap drops the message)            */

/* The message in progress is lost; the caller says what comes next. */
static void uc_abort_message(struct rocemu_qp *qp, enum resp_msg_state next, const char *why)
{
	if (qp->resp.msg == RESP_MSG_SEND || qp->resp.msg == RESP_MSG_WRITE)
		ENGINE_COUNT(qp->engine, drop_uc_incomplete_msg);
	/* A UC message that lost a packet is dropped, and the receive WQE it
	 * was filling is kept for the next message (nothing completes). */
	rocemu_resp_msg_set(qp, next, why);
	qp->resp.offset = 0;
}

static void uc_rx(struct rocemu_qp *qp, const struct roce_pkt *pkt, const uint8_t *payload)
{
	struct rocemu_engine *e = qp->engine;
	uint32_t f = pkt->op->flags;
	enum resp_result res;

	if (pkt->psn != qp->resp.epsn) {
		/* Packets were lost: resynchronise on this one. */
		uc_abort_message(qp, (f & ROCE_OPF_FIRST) ? RESP_MSG_IDLE : RESP_MSG_UC_DROP,
				 "PSN gap");
	} else if (f & ROCE_OPF_FIRST) {
		if (qp->resp.msg == RESP_MSG_SEND || qp->resp.msg == RESP_MSG_WRITE)
			uc_abort_message(qp, RESP_MSG_IDLE, "FIRST inside a message");
		rocemu_resp_msg_set(qp, RESP_MSG_IDLE, "FIRST");
	} else if (qp->resp.msg == RESP_MSG_IDLE || qp->resp.msg == RESP_MSG_UC_DROP) {
		rocemu_resp_msg_set(qp, RESP_MSG_UC_DROP, "no FIRST before it");
	} else if ((qp->resp.msg == RESP_MSG_SEND && !(f & ROCE_OPF_SEND)) ||
		   (qp->resp.msg == RESP_MSG_WRITE && !(f & ROCE_OPF_WRITE))) {
		uc_abort_message(qp, RESP_MSG_UC_DROP, "opcode out of sequence");
	}
	qp->resp.epsn = roce_psn_add(pkt->psn, 1);
	if (qp->resp.msg == RESP_MSG_UC_DROP) {
		ENGINE_COUNT(e, drop_uc_incomplete_msg);
		if (f & ROCE_OPF_LAST)
			rocemu_resp_msg_set(qp, RESP_MSG_IDLE, "dropped message over");
		return;
	}
	if (f & ROCE_OPF_SEND)
		res = place_send(qp, pkt, payload);
	else
		res = place_write(qp, pkt, payload);
	if (res == RESP_OK)
		return;
	switch (res) {
	case RESP_LEN:
	case RESP_OP:
		/* Local errors at the responder: the WQE completes in error, the QP goes to ERR. */
		if (qp->resp.have_wqe)
			recv_complete(qp,
				      res == RESP_LEN ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR,
				      IBV_WC_RECV, 0, NULL, false);
		rocemu_qp_to_error(qp, false);
		rocemu_engine_raise(e, IBV_EVENT_QP_FATAL, qp->user_ctx);
		return;
	default:
		/* No receive WQE, bad R_Key, bad lengths: the message is silently dropped. */
		ENGINE_COUNT(e, drop_uc_incomplete_msg);
		rocemu_resp_msg_set(qp, (f & ROCE_OPF_LAST) ? RESP_MSG_IDLE : RESP_MSG_UC_DROP,
				    "message dropped");
		return;
	}
}

void rocemu_resp_rx(struct rocemu_qp *qp, struct rte_mbuf *m, const struct roce_pkt *pkt)
{
	const uint8_t *payload = rte_pktmbuf_mtod(m, const uint8_t *) + pkt->payload_off;

	if (qp->state != IBV_QPS_RTR && qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD &&
	    qp->state != IBV_QPS_SQE) {
		ENGINE_COUNT(qp->engine, drop_qp_state);
		return;
	}
	/* 11.6.2: a packet arriving while the QP is still in RTR establishes
	 * communication (the application may not have moved it to RTS yet). */
	if (qp->state == IBV_QPS_RTR && !qp->resp.comm_est) {
		qp->resp.comm_est = true;
		rocemu_engine_raise(qp->engine, IBV_EVENT_COMM_EST, qp->user_ctx);
	}
	if (qp->type == IBV_QPT_UC)
		uc_rx(qp, pkt, payload);
	else
		rc_rx(qp, pkt, payload);
}

/*
 * XRC target (IBA 9.3.8, 11.2.x): a request names in its XRCETH the XRC SRQ
 * it is for; the SRQ must exist and belong to the target QP's domain. Its
 * receive WQEs take the SENDs, its PD checks the R_Keys and L_Keys, its CQ
 * takes the completions. A request naming no SRQ of the domain (none by
 * that number, or one of another domain) is an invalid request: NAK and the
 * QP goes to ERR, as any other invalid request (9.7.5.2.2).
 */
void rocemu_xrc_resp_rx(struct rocemu_qp *qp, struct rte_mbuf *m, const struct roce_pkt *pkt)
{
	struct rocemu_srq *srq;

	if (qp->type != IBV_QPT_XRC_RECV) {
		/* an initiator (XRC_SEND) serves no requests */
		ENGINE_COUNT(qp->engine, drop_qp_type);
		return;
	}
	/* A target that does not receive (before RTR, or in ERR after a bad
	 * request) drops any request for its state first: the sender's
	 * retransmission of the request that moved it to ERR is not one more
	 * bad SRQ (on a loaded host the sender resent it before the target had
	 * answered the first). */
	if (qp->state != IBV_QPS_RTR && qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD) {
		ENGINE_COUNT(qp->engine, drop_qp_state);
		return;
	}
	srq = rocemu_xrc_srq_for(qp, pkt->xrc_srqn);
	if (!srq) {
		ENGINE_COUNT(qp->engine, drop_xrc_srq);
		if (roce_psn_diff(pkt->psn, qp->resp.epsn) == 0) {
			rc_resp_send_nak(qp, ROCE_NAK_INVALID_REQUEST, pkt->psn);
			rocemu_qp_to_error(qp, false);
			rocemu_engine_raise(qp->engine, IBV_EVENT_QP_REQ_ERR, qp->user_ctx);
		}
		return;
	}
	qp->xrc_srq = srq;
	qp->pd = rocemu_srq_pd(srq);
	rocemu_resp_rx(qp, m, pkt);
}
