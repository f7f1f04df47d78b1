/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Completions and flushing: delivering a QP's completions to its CQs, and
 * the flushes on the way to ERR (both queues) and SQE (the send queue).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rocemu_transport.h"

void rocemu_qp_complete(struct rocemu_qp *qp, bool send, const struct rocemu_wc *wc, bool solicited)
{
	struct rocemu_cq *cq = send ? qp->send_cq : qp->recv_cq;
	int rc;

	/* XRC target: receive completions go to the CQ of the XRC SRQ in use */
	if (!send && qp->type == IBV_QPT_XRC_RECV)
		cq = qp->xrc_srq ? rocemu_srq_cq(qp->xrc_srq) : NULL;
	if (!cq)
		return; /* an XRC half has no CQ for the other direction */
	rc = rocemu_cq_push(cq, wc, solicited);

	if (rc == 1) {
		ENGINE_COUNT(qp->engine, cq_overrun_ignored);
		return;
	}
	if (rc == -ENOSPC) {
		/* 11.4.2.1: a CQ overrun is an error for every QP feeding it. */
		ENGINE_COUNT(qp->engine, cq_overflow);
		if (qp->state != IBV_QPS_ERR)
			rocemu_qp_to_error(qp, true);
	}
}

static enum ibv_wc_opcode send_wc_opcode(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	case IBV_WR_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
	case IBV_WR_BIND_MW:
		return IBV_WC_BIND_MW;
	case IBV_WR_ATOMIC_WRITE:
		return IBV_WC_ATOMIC_WRITE;
	default:
		if (op == ROCEMU_WR_FLUSH)
			return ROCEMU_WC_FLUSH;
		return IBV_WC_SEND;
	}
}

void rocemu_qp_send_wc(struct rocemu_qp *qp, const struct rocemu_send_wqe *w)
{
	struct rocemu_wc wc = {0};

	if (w->status == IBV_WC_SUCCESS && !w->signaled)
		return;
	wc.wr_id = w->wr.wr_id;
	wc.status = w->status;
	wc.opcode = send_wc_opcode(w->wr.opcode);
	wc.qp_num = qp->qpn;
	wc.timestamp_ns = rocemu_port_pass_now(qp->engine->port);
	if (w->status == IBV_WC_SUCCESS) {
		switch (w->wr.opcode) {
		case IBV_WR_RDMA_READ:
			wc.byte_len = w->length;
			break;
		case IBV_WR_ATOMIC_CMP_AND_SWP:
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
			wc.byte_len = 8;
			break;
		default:
			wc.byte_len = w->length;
			break;
		}
	}
	rocemu_qp_complete(qp, true, &wc, false);
}

void rocemu_qp_flush_recv_wqe(struct rocemu_qp *qp, uint64_t wr_id)
{
	struct rocemu_wc wc = {
	    .wr_id = wr_id,
	    .status = IBV_WC_WR_FLUSH_ERR,
	    .opcode = IBV_WC_RECV,
	    .qp_num = qp->qpn,
	    .timestamp_ns = rocemu_port_pass_now(qp->engine->port),
	};

	rocemu_qp_complete(qp, false, &wc, false);
}

void rocemu_qp_flush_sq(struct rocemu_qp *qp)
{
	/* WQEs that already finished keep their status, the rest flush. */
	while (qp->sq_head != qp->sq_tail) {
		struct rocemu_send_wqe *w = sq_at(qp, qp->sq_head);

		if (w->state != WQE_DONE)
			w->status = IBV_WC_WR_FLUSH_ERR;
		qp->sq_head++;
		rocemu_qp_send_wc(qp, w);
	}
	qp->sq_cur = qp->sq_tail;
}

static void qp_flush(struct rocemu_qp *qp)
{
	rocemu_qp_flush_sq(qp);
	qp->req.rd_atomic = 0;
	qp->comp.deadline_ns = 0;
	qp->comp.rnr_until_ns = 0;
	/* Also the stall probe: rocemu_comp_timers does nothing outside RTS/SQD, so a
	 * probe time left in the past kept the QP at the top of the timer heap and
	 * run_timers looped on it forever (engine lock held; seen when rdma_disconnect
	 * moved a busy QP to ERR: qperf rc_bi_bw -cm1). */
	qp->comp.probe_ns = 0;

	/* Receive side: the WQE being filled, then the receive queue (an SRQ keeps its WQEs). */
	if (qp->resp.have_wqe) {
		qp->resp.have_wqe = false;
		rocemu_qp_flush_recv_wqe(qp, qp->resp.wqe.wr_id);
	}
	while (qp->rq_head != qp->rq_tail) {
		uint64_t wr_id = qp->rq[qp->rq_head & qp->rq_mask].wr_id;

		qp->rq_head++;
		rocemu_qp_flush_recv_wqe(qp, wr_id);
	}
	qp->resp.res_active = false;
	qp->resp.ack_pending = false;
}

void rocemu_qp_to_error(struct rocemu_qp *qp, bool fatal)
{
	bool was_err = qp->state == IBV_QPS_ERR;

	qp->state = IBV_QPS_ERR;
	qp->attr.qp_state = IBV_QPS_ERR;
	if (fatal && !was_err)
		rocemu_engine_raise(qp->engine, IBV_EVENT_QP_FATAL, qp->user_ctx);
	qp_flush(qp);
	/* IBA ch. 11, affiliated asynchronous events, Last WQE Reached: a QP on an SRQ that
	 * enters the Error state takes no further WQE from the SRQ once its last
	 * one has completed (flushed just above): Last WQE Reached, once, so the
	 * application knows when the QP can be destroyed without losing SRQ
	 * WQEs to it (what storage targets wait for). An XRC target takes its
	 * WQEs from the XRC SRQ each request names: it is on SRQs too, and
	 * reports it the same way, as mlx5's XRC TGT QPs do. */
	if ((qp->srq || qp->type == IBV_QPT_XRC_RECV) && !was_err)
		rocemu_engine_raise(qp->engine, IBV_EVENT_QP_LAST_WQE_REACHED, qp->user_ctx);
}

void rocemu_qp_to_sqe(struct rocemu_qp *qp)
{
	/* 10.3.1 / 11.4.2: a UC or UD send error stops the send queue only; the
	 * receive side keeps working and SQE -> RTS resumes sending. */
	qp->state = IBV_QPS_SQE;
	qp->attr.qp_state = IBV_QPS_SQE;
	rocemu_qp_flush_sq(qp);
}