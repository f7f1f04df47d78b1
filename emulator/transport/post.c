/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Posting work requests (ibv_post_send(3), ibv_post_recv(3)): validation,
 * the WQE copied into the queue (inline data copied now), and the first
 * frames built and handed to the port in the caller's thread.
 */
#include <errno.h>
#include <string.h>

#include "rocemu_transport.h"

static bool opcode_valid(enum ibv_qp_type t, enum ibv_wr_opcode op)
{
	if (t == IBV_QPT_RAW_PACKET)
		return op == IBV_WR_SEND; /* one whole Ethernet frame (raw.c) */
	if (t == IBV_QPT_XRC_RECV)
		return false; /* an XRC target has no send queue */
	if (t == IBV_QPT_XRC_SEND)
		t = IBV_QPT_RC; /* XRC carries RC's operations (9.3.8) */
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		return true;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_LOCAL_INV:
	case IBV_WR_BIND_MW:
		return t == IBV_QPT_RC || t == IBV_QPT_UC;
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_ATOMIC_WRITE:
		return t == IBV_QPT_RC;
	default:
		/* FLUSH (annex A19), which rdma-core 44's enum does not name */
		return op == ROCEMU_WR_FLUSH && t == IBV_QPT_RC;
	}
}

/* The WRs that take a responder resource and are answered by a response
 * (READ, atomics, and annex A19's ATOMIC WRITE and FLUSH): max_rd_atomic
 * bounds how many are outstanding, IBV_SEND_FENCE waits for them. */
static bool is_rd_atomic(enum ibv_wr_opcode op)
{
	return op == IBV_WR_RDMA_READ || op == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_WRITE ||
	       op == ROCEMU_WR_FLUSH;
}

/* A19: a FLUSH names a placement type (global visibility and/or
 * persistence, nothing else) and a selectivity (a range or the region). */
static bool flush_wr_valid(const struct rocemu_send_wr *wr)
{
	return wr->flush_type != 0 &&
	       !(wr->flush_type & ~(ROCEMU_FLUSH_GLOBAL | ROCEMU_FLUSH_PERSISTENT)) &&
	       (wr->flush_level == ROCEMU_FLUSH_RANGE || wr->flush_level == ROCEMU_FLUSH_MR);
}

static int post_send_locked(struct rocemu_qp *qp, const struct rocemu_send_wr *wr)
{
	struct rocemu_send_wqe *w;
	uint64_t len = 0;

	if (qp->state == IBV_QPS_RESET || qp->state == IBV_QPS_INIT || qp->state == IBV_QPS_RTR)
		return -EINVAL;
	if (!opcode_valid(qp->type, wr->opcode))
		return -EINVAL;
	if (wr->num_sge > qp->cap.max_send_sge || (wr->num_sge && !wr->sg_list))
		return -EINVAL;
	if (qp->type == IBV_QPT_UD && (!wr->ah || wr->ah->pd->engine != qp->engine))
		return -EINVAL;
	if (wr->opcode == ROCEMU_WR_FLUSH && !flush_wr_valid(wr))
		return -EINVAL;
	/* no checksum offload (the device reports no IBV_DEVICE_RAW_IP_CSUM) */
	if (wr->send_flags & IBV_SEND_IP_CSUM)
		return -EINVAL;
	for (uint32_t i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	if (len > qp->engine->caps.max_msg_sz)
		return -EINVAL;
	if ((wr->send_flags & IBV_SEND_INLINE) && len > qp->cap.max_inline_data)
		return -EINVAL;
	if (qp->sq_tail - qp->sq_head >= qp->cap.max_send_wr)
		return -ENOMEM;

	w = sq_at(qp, qp->sq_tail);
	memset(w, 0, offsetof(struct rocemu_send_wqe, wr)); /* the progress fields */
	w->wr = *wr;
	w->wr.sg_list = NULL; /* the gather list is copied into w->sge below */
	w->wr.remote_qpn &= ROCE_PSN_MASK;
	w->wr.xrc_srqn &= ROCE_PSN_MASK;
	w->length = (uint32_t)len;
	w->signaled = qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
	w->rd_atomic = is_rd_atomic(wr->opcode);
	if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
		w->length = 8;
	if (wr->opcode == IBV_WR_ATOMIC_WRITE) {
		/* the 8 bytes travel in the request (A19); no gather list */
		w->length = 8;
		w->wr.num_sge = 0;
	}
	if (wr->opcode == IBV_WR_BIND_MW) {
		/* runs when the send queue reaches it (rc_requester.c) */
		w->length = 0;
		w->wr.num_sge = 0;
	}
	if (wr->opcode == ROCEMU_WR_FLUSH) {
		w->length = wr->flush_level == ROCEMU_FLUSH_RANGE ? wr->flush_len : 0;
		w->wr.num_sge = 0;
	}
	w->state = WQE_POSTED;
	w->status = IBV_WC_SUCCESS;
	if ((wr->send_flags & IBV_SEND_INLINE) && !w->rd_atomic && wr->opcode != IBV_WR_LOCAL_INV &&
	    wr->opcode != IBV_WR_BIND_MW) {
		uint32_t off = 0;

		/* Inline: the data is copied now, the buffers may be reused at once. */
		w->is_inline = true;
		for (uint32_t i = 0; i < wr->num_sge; i++) {
			memcpy(w->inline_data + off, (const void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			off += wr->sg_list[i].length;
		}
		w->wr.num_sge = 0;
	} else if (w->wr.num_sge) {
		memcpy(w->sge, wr->sg_list, w->wr.num_sge * sizeof(*w->sge));
	}
	qp->sq_tail++;

	if (qp->state == IBV_QPS_ERR || (qp->state == IBV_QPS_SQE && !qp_is_reliable(qp))) {
		/* 10.8.3.1 / 11.4.1.1: in ERR (and SQE) new work completes with a flush. */
		rocemu_qp_flush_sq(qp);
	}
	return 0;
}

static void transmit_now(struct rocemu_qp *qp)
{
	struct rocemu_engine *e = qp->engine;

	if (qp->state != IBV_QPS_RTS)
		return;
	/* The device takes no more frames now: building one (payload copy and
	 * CRC) would only see it refused. The QP is on the work list (scheduled),
	 * so the next pass, which receives first, sends it. */
	if (unlikely(rocemu_port_tx_room(e->port) == 0)) {
		ENGINE_COUNT(e, tx_credit_waits);
		return;
	}
	if (qp->type == IBV_QPT_UD)
		rocemu_ud_send(qp, ROCEMU_TX_BUDGET);
	else if (qp->type == IBV_QPT_RAW_PACKET)
		rocemu_raw_send(qp, ROCEMU_TX_BUDGET);
	else
		rocemu_req_run(qp, ROCEMU_TX_BUDGET);
	rocemu_comp_retire(qp);
	rocemu_engine_timer_sync(qp);
	/* back-to-back posts share one burst to the device (port_tx.c) */
	rocemu_port_flush_posted(e->port);
}

int rocemu_qp_post_send(struct rocemu_qp *qp, const struct rocemu_send_wr *wr)
{
	unsigned bad;

	return rocemu_qp_post_send_batch(qp, wr, 1, &bad);
}

int rocemu_qp_post_send_batch(struct rocemu_qp *qp, const struct rocemu_send_wr *wrs, unsigned n,
			      unsigned *bad)
{
	struct rocemu_engine *e = qp->engine;
	int rc = 0;
	unsigned i;

	/* the engine lock, one clock reading for the post, a pass when none
	 * ran lately (rocemu_port.h, the progress contract) */
	rocemu_port_verb_enter(e->port, ROCEMU_VERB_POST);
	for (i = 0; i < n; i++) {
		rc = post_send_locked(qp, &wrs[i]);
		if (rc < 0)
			break;
	}
	if (bad)
		*bad = i;
	if (i > 0) {
		rocemu_engine_schedule(qp);
		transmit_now(qp);
	}
	rocemu_engine_timer_sync(qp);
	rocemu_port_verb_leave(e->port, ROCEMU_DID_POST);
	return rc;
}

int rocemu_qp_post_recv(struct rocemu_qp *qp, uint64_t wr_id, const struct ibv_sge *sg,
			uint32_t num_sge)
{
	struct rocemu_engine *e = qp->engine;
	struct rocemu_recv_wqe *w;
	int rc = 0;

	rocemu_engine_lock(e);
	if (qp->srq || !qp->rq || qp->state == IBV_QPS_RESET || num_sge > qp->cap.max_recv_sge ||
	    (num_sge && !sg)) {
		rc = -EINVAL;
		goto out;
	}
	if (qp->rq_tail - qp->rq_head >= qp->cap.max_recv_wr) {
		rc = -ENOMEM;
		goto out;
	}
	w = &qp->rq[qp->rq_tail & qp->rq_mask];
	w->wr_id = wr_id;
	w->num_sge = num_sge;
	w->total_len = 0;
	for (uint32_t i = 0; i < num_sge; i++) {
		w->sge[i] = sg[i];
		w->total_len += sg[i].length;
	}
	qp->rq_tail++;
	if (qp->state == IBV_QPS_ERR) {
		while (qp->rq_head != qp->rq_tail) {
			uint64_t id = qp->rq[qp->rq_head & qp->rq_mask].wr_id;

			qp->rq_head++;
			rocemu_qp_flush_recv_wqe(qp, id);
		}
	}
out:
	rocemu_engine_unlock(e);
	return rc;
}
