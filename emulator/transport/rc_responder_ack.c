/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How the responder answers (RC): the AETH packets it sends — the coalesced
 * ACK (flushed once per pass, after the READ responses still streaming), the
 * NAKs of 9.7.5.2 with their counters, and the PSN-sequence and RNR NAKs
 * that wait behind READ responses or for room in the tx queue. A requester
 * whose MAC cannot be resolved is not answered (counted), so a failed
 * neighbour entry does not keep the QP spinning on the work list. What the
 * responder does with a request is rc_responder.c.
 */
#include <errno.h>

#include "rc_responder.h"

int rc_resp_send_aeth(struct rocemu_qp *qp, uint8_t opcode, uint32_t psn, uint8_t syndrome,
		      uint64_t orig, uint32_t msn)
{
	struct rocemu_engine *e = qp->engine;
	struct roce_pkt pkt = {0};
	struct rte_mbuf *m;
	uint8_t *payload;
	uint32_t crc;
	int rc;

	rc = rocemu_engine_fill_path(e, &qp->path, &pkt);
	if (rc < 0)
		return rc;
	pkt.opcode = opcode | rc_resp_transport(qp);
	pkt.op = roce_opcode_info(pkt.opcode);
	pkt.pkey = ROCE_DEFAULT_PKEY;
	pkt.dqpn = qp->attr.dest_qp_num;
	pkt.psn = psn;
	pkt.aeth.syndrome = syndrome;
	pkt.aeth.msn = msn & ROCE_PSN_MASK;
	pkt.atomic_orig = orig;
	m = rocemu_engine_pkt_alloc(e, &pkt, &payload, &crc);
	if (!m)
		return -ENOBUFS;
	return rocemu_engine_pkt_send_crc(e, m, &pkt, crc);
}

static void send_pending_nak(struct rocemu_qp *qp);

/*
 * The requester's MAC cannot be resolved (its neighbour entry FAILED: no
 * ARP/ND answer): what we had to answer is dropped and counted instead of
 * kept on the work list, where every pass would try again (a spinning
 * progress thread for as long as the entry stays failed). The requester
 * resends on its timer and is answered once it is reachable again.
 */
static void response_unreachable(struct rocemu_qp *qp)
{
	qp->resp.ack_pending = false;
	qp->resp.nak_pending = false;
	ENGINE_COUNT(qp->engine, drop_resp_unreachable);
}

void rocemu_resp_flush_ack(struct rocemu_qp *qp)
{
	int rc;

	if (!qp->resp.ack_pending)
		return;
	if (qp->state == IBV_QPS_ERR || qp->state == IBV_QPS_RESET) {
		qp->resp.ack_pending = false;
		return;
	}
	if (qp->resp.res_active)
		return; /* READ responses still streaming: the ACK goes after them */
	if (qp->resp.nak_pending) {
		send_pending_nak(qp);
		return;
	}
	rc = rc_resp_send_aeth(qp, ROCE_OP_ACK, roce_psn_add(qp->resp.epsn, ROCE_PSN_MASK),
			       rc_resp_ack_syndrome(), 0, qp->resp.msn);
	if (rc == 0) {
		qp->resp.ack_pending = false;
		ENGINE_COUNT(qp->engine, tx_acks);
	} else if (rc == -EHOSTUNREACH) {
		response_unreachable(qp);
	}
}

int rc_resp_send_nak(struct rocemu_qp *qp, uint8_t code, uint32_t psn)
{
	struct rocemu_engine *e = qp->engine;
	int rc;

	/* Any response implicitly acknowledges the PSNs before it. */
	qp->resp.ack_pending = false;
	rc = rc_resp_send_aeth(qp, ROCE_OP_ACK, psn, ROCE_AETH_SYNDROME(ROCE_AETH_NAK, code), 0,
			       qp->resp.msn);
	if (rc < 0)
		return rc;
	switch (code) {
	case ROCE_NAK_PSN_SEQ_ERR:
		ENGINE_COUNT(e, tx_nak_psn_seq);
		break;
	case ROCE_NAK_INVALID_REQUEST:
		ENGINE_COUNT(e, tx_nak_invalid_req);
		break;
	case ROCE_NAK_REMOTE_ACCESS_ERR:
		ENGINE_COUNT(e, tx_nak_remote_access);
		break;
	default:
		ENGINE_COUNT(e, tx_nak_remote_op);
		break;
	}
	return 0;
}

/*
 * A PSN-sequence or RNR NAK names a PSN after every request accepted so far,
 * so it leaves after the READ responses still streaming (responses in PSN
 * order, 9.7.5.1.1: the requester would take a READ whose responses come
 * after a later NAK for lost and ask again), and one the port could not
 * queue (tx ring full) goes on the next pass: the requester learns of the
 * gap from this NAK only, the responder stays silent for the rest of it.
 */
void rc_resp_queue_nak(struct rocemu_qp *qp, uint8_t syndrome, uint32_t psn)
{
	qp->resp.nak_pending = true;
	qp->resp.nak_syndrome = syndrome;
	qp->resp.nak_psn = psn;
	send_pending_nak(qp);
}

static void send_pending_nak(struct rocemu_qp *qp)
{
	struct rocemu_engine *e = qp->engine;
	uint8_t syn = qp->resp.nak_syndrome;
	int rc;

	qp->resp.ack_pending = true; /* keeps the QP on the work list until sent */
	if (qp->resp.res_active)
		return;
	rc = rc_resp_send_aeth(qp, ROCE_OP_ACK, qp->resp.nak_psn, syn, 0, qp->resp.msn);
	if (rc == -EHOSTUNREACH)
		response_unreachable(qp);
	if (rc < 0)
		return;
	qp->resp.nak_pending = false;
	qp->resp.ack_pending = false; /* a NAK acknowledges the PSNs before it */
	if (ROCE_AETH_TYPE(syn) == ROCE_AETH_RNR_NAK)
		ENGINE_COUNT(e, tx_rnr_nak);
	else
		ENGINE_COUNT(e, tx_nak_psn_seq);
}
