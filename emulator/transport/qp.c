/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Queue pairs: creation, the state machine (IBA 11.2.5, the attribute table
 * ibv_modify_qp(3) documents), query, destruction, flushing on the way to
 * ERR, and completion delivery. Posting work requests is post.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rocemu_transport.h"

/* ------------------------------------------------------------------------ */
/* The transition table: required and optional attributes per QP type.        */

enum { T_RC, T_UC, T_UD, T_RAW, T_NTYPES };

struct qp_transition {
	bool valid;
	int req[T_NTYPES];
	int opt[T_NTYPES];
};

#define ALL3(m)                                                                                    \
	{                                                                                          \
		(m), (m), (m), (m)                                                                 \
	}
#define M_ACCESS IBV_QP_ACCESS_FLAGS
#define M_PKEY	 IBV_QP_PKEY_INDEX
#define M_PORT	 IBV_QP_PORT
#define M_QKEY	 IBV_QP_QKEY
#define M_CUR	 IBV_QP_CUR_STATE
#define M_MIG	 (IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE)

/* clang-format off */
static const struct qp_transition qp_table[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1] = {
	[IBV_QPS_RESET] = {
		[IBV_QPS_RESET] = {.valid = true},
		[IBV_QPS_ERR] = {.valid = true},
		[IBV_QPS_INIT] = {
			.valid = true,
			.req = {M_PKEY | M_PORT | M_ACCESS, M_PKEY | M_PORT | M_ACCESS,
				M_PKEY | M_PORT | M_QKEY, M_PORT},
		},
	},
	[IBV_QPS_INIT] = {
		[IBV_QPS_RESET] = {.valid = true},
		[IBV_QPS_ERR] = {.valid = true},
		[IBV_QPS_INIT] = {
			.valid = true,
			.opt = {M_PKEY | M_PORT | M_ACCESS, M_PKEY | M_PORT | M_ACCESS,
				M_PKEY | M_PORT | M_QKEY, M_PORT},
		},
		[IBV_QPS_RTR] = {
			.valid = true,
			.req = {IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
				IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN, 0},
			.opt = {IBV_QP_ALT_PATH | M_ACCESS | M_PKEY, IBV_QP_ALT_PATH | M_ACCESS | M_PKEY,
				M_PKEY | M_QKEY},
		},
	},
	[IBV_QPS_RTR] = {
		[IBV_QPS_RESET] = {.valid = true},
		[IBV_QPS_ERR] = {.valid = true},
		[IBV_QPS_RTS] = {
			.valid = true,
			.req = {IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					IBV_QP_MAX_QP_RD_ATOMIC,
				IBV_QP_SQ_PSN, IBV_QP_SQ_PSN},
			.opt = {M_CUR | M_MIG | M_ACCESS | IBV_QP_MIN_RNR_TIMER, M_CUR | M_MIG | M_ACCESS,
				M_CUR | M_QKEY},
		},
	},
	[IBV_QPS_RTS] = {
		[IBV_QPS_RESET] = {.valid = true},
		[IBV_QPS_ERR] = {.valid = true},
		[IBV_QPS_RTS] = {
			.valid = true,
			.opt = {M_CUR | M_ACCESS | M_MIG | IBV_QP_MIN_RNR_TIMER, M_CUR | M_ACCESS | M_MIG,
				M_CUR | M_QKEY},
		},
		[IBV_QPS_SQD] = {.valid = true, .opt = ALL3(IBV_QP_EN_SQD_ASYNC_NOTIFY)},
	},
	[IBV_QPS_SQD] = {
		[IBV_QPS_RESET] = {.valid = true},
		[IBV_QPS_ERR] = {.valid = true},
		[IBV_QPS_RTS] = {
			.valid = true,
			.opt = {M_CUR | M_MIG | M_ACCESS | IBV_QP_MIN_RNR_TIMER, M_CUR | M_MIG | M_ACCESS,
				M_CUR | M_QKEY},
		},
		[IBV_QPS_SQD] = {
			.valid = true,
			.opt = {M_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | M_MIG |
					M_ACCESS | M_PKEY | IBV_QP_MIN_RNR_TIMER,
				IBV_QP_AV | M_MIG | M_ACCESS | M_PKEY, M_PKEY | M_QKEY},
		},
	},
	[IBV_QPS_SQE] = {
		[IBV_QPS_RESET] = {.valid = true},
		[IBV_QPS_ERR] = {.valid = true},
		[IBV_QPS_RTS] = {.valid = true, .opt = {0, M_CUR | M_ACCESS, M_CUR | M_QKEY}},
	},
	[IBV_QPS_ERR] = {
		[IBV_QPS_RESET] = {.valid = true},
		[IBV_QPS_ERR] = {.valid = true},
	},
};
/* clang-format on */

static int qp_type_index(enum ibv_qp_type t)
{
	switch (t) {
	case IBV_QPT_RC:
		return T_RC;
	case IBV_QPT_UC:
		return T_UC;
	case IBV_QPT_UD:
		return T_UD;
	case IBV_QPT_RAW_PACKET:
		return T_RAW; /* whole Ethernet frames, no transport (raw.c) */
	default:
		return -1;
	}
}

uint32_t rocemu_mtu_bytes(enum ibv_mtu mtu)
{
	if (mtu < IBV_MTU_256 || mtu > IBV_MTU_4096)
		return 0;
	return 128u << mtu;
}

static enum ibv_mtu mtu_enum(uint32_t bytes)
{
	enum ibv_mtu m = IBV_MTU_256;

	while (m < IBV_MTU_4096 && (128u << (m + 1)) <= bytes)
		m++;
	return m;
}

/* ------------------------------------------------------------------------ */
/* Completions and flushing.                                                  */

void rocemu_qp_complete(struct rocemu_qp *qp, bool send, const struct rocemu_wc *wc, bool solicited)
{
	struct rocemu_cq *cq = send ? qp->send_cq : qp->recv_cq;
	int rc = rocemu_cq_push(cq, wc, solicited);

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
	wc.wr_id = w->wr_id;
	wc.status = w->status;
	wc.opcode = send_wc_opcode(w->opcode);
	wc.qp_num = qp->qpn;
	wc.timestamp_ns = rocemu_port_pass_now(qp->engine->port);
	if (w->status == IBV_WC_SUCCESS) {
		switch (w->opcode) {
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

static void qp_flush(struct rocemu_qp *qp)
{
	/* Send queue: WQEs that already finished keep their status, the rest flush. */
	while (qp->sq_head != qp->sq_tail) {
		struct rocemu_send_wqe *w = sq_at(qp, qp->sq_head);

		if (w->state != WQE_DONE)
			w->status = IBV_WC_WR_FLUSH_ERR;
		qp->sq_head++;
		rocemu_qp_send_wc(qp, w);
	}
	qp->sq_cur = qp->sq_tail;
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
}

void rocemu_qp_to_sqe(struct rocemu_qp *qp)
{
	/* 10.3.1 / 11.4.2: a UC or UD send error stops the send queue only; the
	 * receive side keeps working and SQE -> RTS resumes sending. */
	qp->state = IBV_QPS_SQE;
	qp->attr.qp_state = IBV_QPS_SQE;
	while (qp->sq_head != qp->sq_tail) {
		struct rocemu_send_wqe *w = sq_at(qp, qp->sq_head);

		if (w->state != WQE_DONE)
			w->status = IBV_WC_WR_FLUSH_ERR;
		qp->sq_head++;
		rocemu_qp_send_wc(qp, w);
	}
	qp->sq_cur = qp->sq_tail;
}

int rocemu_qp_take_recv(struct rocemu_qp *qp, struct rocemu_recv_wqe *out)
{
	if (qp->srq)
		return rocemu_srq_pop(qp->srq, out);
	if (qp->rq_head == qp->rq_tail)
		return -EAGAIN;
	*out = qp->rq[qp->rq_head & qp->rq_mask];
	qp->rq_head++;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Create / destroy                                                           */

void rocemu_qp_free_rings(struct rocemu_qp *qp)
{
	rocemu_qmem_free(&qp->alloc, qp->sq, ROCEMU_RES_QP_SQ, qp->sq_app);
	rocemu_qmem_free(&qp->alloc, qp->rq, ROCEMU_RES_QP_RQ, qp->rq_app);
	qp->sq = NULL;
	qp->rq = NULL;
}

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

/*
 * A number from the port's QPN owner (a host hands out the numbers of every
 * process on it, docs/host.md): -ENOTSUP when the port has none. The host
 * never gives out two live numbers of the same slot, so a slot in use here
 * means a number another engine of this process took; ask again.
 */
static int qpn_from_port(struct rocemu_engine *e, struct rocemu_qp *qp, bool gsi)
{
	for (int tries = 0; tries < 8; tries++) {
		uint32_t qpn;
		int rc = rocemu_port_qpn_alloc(e->port, gsi, &qpn);

		if (rc < 0)
			return rc;
		if (gsi && qpn == 1)
			return 0;
		if (!e->qpn_table[rocemu_qpn_slot(qpn)] &&
		    rocemu_qpn_slot(qpn) >= ROCEMU_QPN_FIRST && qpn != ROCEMU_QPN_MULTICAST) {
			e->qpn_table[rocemu_qpn_slot(qpn)] = qp;
			qp->qpn = qpn;
			e->n_qps++;
			return 0;
		}
		rocemu_port_qpn_free(e->port, qpn);
	}
	return -ENOMEM;
}

static int qpn_alloc(struct rocemu_engine *e, struct rocemu_qp *qp, uint32_t source_qpn)
{
	int rc;

	if (e->n_qps >= e->caps.max_qp)
		return -ENOMEM;
	if (source_qpn != 1) {
		rc = qpn_from_port(e, qp, false);
		if (rc != -ENOTSUP)
			return rc;
	} else {
		rc = qpn_from_port(e, qp, true);
		if (rc < 0 && rc != -ENOTSUP)
			return rc;
	}
	/* The GSI QP has the fixed number 1 (IBA 3.9.2.1); qp_check_init checked it is free. */
	if (source_qpn == 1) {
		e->qpn_table[1] = qp;
		qp->qpn = 1;
		e->n_qps++;
		return 0;
	}
	/* The next free number in sequence (stale packets for a destroyed QP then
	 * find no QP instead of a stranger); every slot is tried once. */
	for (uint32_t tried = 0; tried < ROCEMU_QPN_TABLE - ROCEMU_QPN_FIRST;) {
		uint32_t qpn = e->qpn_next;

		e->qpn_next = (qpn + 1) & ROCEMU_QPN_MASK;
		if (rocemu_qpn_slot(qpn) < ROCEMU_QPN_FIRST || qpn == ROCEMU_QPN_MULTICAST)
			continue; /* reserved */
		tried++;
		if (!e->qpn_table[rocemu_qpn_slot(qpn)]) {
			e->qpn_table[rocemu_qpn_slot(qpn)] = qp;
			qp->qpn = qpn;
			e->n_qps++;
			return 0;
		}
	}
	return -ENOMEM;
}

static int qp_check_init(struct rocemu_engine *e, const struct rocemu_qp_init *init)
{
	const struct ibv_qp_cap *c = &init->cap;

	if (qp_type_index(init->qp_type) < 0)
		return -EOPNOTSUPP;
	if (!init->send_cq || !init->recv_cq)
		return -EINVAL;
	if (rocemu_cq_engine(init->send_cq) != e || rocemu_cq_engine(init->recv_cq) != e)
		return -EINVAL;
	if (c->max_send_wr > e->caps.max_qp_wr || c->max_send_sge > e->caps.max_sge ||
	    c->max_inline_data > e->caps.max_inline_data)
		return -EINVAL;
	if (!init->srq && (c->max_recv_wr > e->caps.max_qp_wr || c->max_recv_sge > e->caps.max_sge))
		return -EINVAL;
	/* Only the GSI QP (QP1, a UD QP) may be asked for by number; QP0 (SMI) has no
	 * meaning on RoCE (IBA A16/A17: no subnet management). */
	if (init->source_qpn != 0) {
		if (init->source_qpn != 1 || init->qp_type != IBV_QPT_UD)
			return -EINVAL;
		if (e->qpn_table[1])
			return -EBUSY;
	}
	return 0;
}

int rocemu_qp_create(struct rocemu_pd *pd, struct rocemu_qp_init *init, struct rocemu_qp **out)
{
	struct rocemu_engine *e = pd->engine;
	struct rocemu_qp *qp;
	int rc;

	rocemu_engine_lock(e);
	rc = qp_check_init(e, init);
	if (rc < 0)
		goto out;
	rc = -ENOMEM;
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		goto out;
	qp->engine = e;
	qp->pd = pd;
	qp->type = init->qp_type;
	qp->send_cq = init->send_cq;
	qp->recv_cq = init->recv_cq;
	qp->srq = init->srq;
	qp->sq_sig_all = init->sq_sig_all;
	qp->user_ctx = init->user_ctx;
	qp->state = IBV_QPS_RESET;

	qp->cap = init->cap;
	if (qp->cap.max_send_wr == 0)
		qp->cap.max_send_wr = 1;
	if (qp->cap.max_send_sge == 0)
		qp->cap.max_send_sge = 1;
	qp->cap.max_inline_data = ROCEMU_MAX_INLINE;
	if (qp->srq) {
		qp->cap.max_recv_wr = 0;
		qp->cap.max_recv_sge = 0;
	} else {
		if (qp->cap.max_recv_wr == 0)
			qp->cap.max_recv_wr = 1;
		if (qp->cap.max_recv_sge == 0)
			qp->cap.max_recv_sge = 1;
	}
	if (init->alloc)
		qp->alloc = *init->alloc;
	qp->sq_mask = pow2_at_least(qp->cap.max_send_wr) - 1;
	qp->sq = rocemu_qmem_alloc(&qp->alloc, (size_t)(qp->sq_mask + 1) * sizeof(*qp->sq),
				   ROCEMU_RES_QP_SQ, &qp->sq_app);
	if (!qp->srq) {
		qp->rq_mask = pow2_at_least(qp->cap.max_recv_wr) - 1;
		qp->rq = rocemu_qmem_alloc(&qp->alloc, (size_t)(qp->rq_mask + 1) * sizeof(*qp->rq),
					   ROCEMU_RES_QP_RQ, &qp->rq_app);
	}
	if (!qp->sq || (!qp->srq && !qp->rq))
		goto fail;
	qp->timer_idx = UINT32_MAX;
	rc = qpn_alloc(e, qp, init->source_qpn);
	if (rc < 0)
		goto fail;
	qp->attr.qp_state = IBV_QPS_RESET;
	if (qp->qpn == 1)
		qp->attr.qkey = ROCEMU_GSI_QKEY;
	qp->attr.cap = qp->cap;
	qp->attr.port_num = 1;
	qp->attr.path_mtu = IBV_MTU_1024;
	qp->mtu = 1024;

	rocemu_pd_get(pd);
	rocemu_cq_get(qp->send_cq);
	rocemu_cq_get(qp->recv_cq);
	if (qp->srq)
		rocemu_srq_get(qp->srq);
	init->cap = qp->cap;
	*out = qp;
	rc = 0;
	goto out;
fail:
	rocemu_qp_free_rings(qp);
	free(qp->resp.res);
	free(qp);
out:
	rocemu_engine_unlock(e);
	return rc;
}

int rocemu_qp_destroy(struct rocemu_qp *qp)
{
	struct rocemu_engine *e = qp->engine;

	rocemu_engine_lock(e);
	if (qp->n_flows) {
		/* ibv_destroy_flow first, as the kernel's uverbs requires */
		rocemu_engine_unlock(e);
		return -EBUSY;
	}
	rocemu_engine_forget(qp);
	e->qpn_table[rocemu_qpn_slot(qp->qpn)] = NULL;
	if (qp->qpn != 1)
		rocemu_port_qpn_free(e->port, qp->qpn);
	e->n_qps--;
	rocemu_cq_put(qp->send_cq);
	rocemu_cq_put(qp->recv_cq);
	if (qp->srq)
		rocemu_srq_put(qp->srq);
	rocemu_pd_put(qp->pd);
	rocemu_engine_unlock(e);
	rocemu_qp_free_rings(qp);
	free(qp->resp.res);
	free(qp);
	return 0;
}

uint32_t rocemu_qp_num(const struct rocemu_qp *qp)
{
	return qp->qpn;
}

enum ibv_qp_state rocemu_qp_state(const struct rocemu_qp *qp)
{
	return qp->state;
}

/* ------------------------------------------------------------------------ */
/* Modify                                                                     */

static int check_av(struct rocemu_engine *e, const struct ibv_ah_attr *in)
{
	struct ibv_ah_attr av;
	const struct ibv_ah_attr *ah = &av;
	uint8_t sgid[16];

	/* Every packet carries a GRH (IP header); is_global = 0 is resolved
	 * from the dlid (LID-only extension), dlid 0 is EINVAL. */
	if (rocemu_av_resolve(e->port, in, &av) < 0)
		return -EINVAL;
	if (ah->port_num > 1)
		return -EINVAL;
	if (rocemu_port_gid(e->port, ah->grh.sgid_index, sgid) < 0)
		return -EINVAL;
	if (roce_gid_is_v4mapped(sgid) != roce_gid_is_v4mapped(ah->grh.dgid.raw))
		return -EINVAL;
	return 0;
}

static int check_values(struct rocemu_qp *qp, const struct ibv_qp_attr *a, int mask)
{
	struct rocemu_engine *e = qp->engine;
	unsigned access_ok = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			     IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE |
			     ROCEMU_ACCESS_FLUSH_GLOBAL | ROCEMU_ACCESS_FLUSH_PERSISTENT;

	if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index >= e->caps.max_pkeys)
		return -EINVAL;
	if ((mask & IBV_QP_PORT) && a->port_num != 1)
		return -EINVAL;
	if ((mask & IBV_QP_ACCESS_FLAGS) && (a->qp_access_flags & ~access_ok))
		return -EINVAL;
	if ((mask & IBV_QP_AV) && check_av(e, &a->ah_attr) < 0)
		return -EINVAL;
	if ((mask & IBV_QP_ALT_PATH) && check_av(e, &a->alt_ah_attr) < 0)
		return -EINVAL;
	if ((mask & IBV_QP_PATH_MTU) && rocemu_mtu_bytes(a->path_mtu) == 0)
		return -EINVAL;
	if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num > ROCE_PSN_MASK)
		return -EINVAL;
	if ((mask & IBV_QP_RQ_PSN) && a->rq_psn > ROCE_PSN_MASK)
		return -EINVAL;
	if ((mask & IBV_QP_SQ_PSN) && a->sq_psn > ROCE_PSN_MASK)
		return -EINVAL;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > e->caps.max_qp_rd_atom)
		return -EINVAL;
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > e->caps.max_qp_init_rd_atom)
		return -EINVAL;
	if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31)
		return -EINVAL;
	if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7)
		return -EINVAL;
	if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7)
		return -EINVAL;
	if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
		return -EINVAL;
	if ((mask & IBV_QP_PATH_MIG_STATE) && a->path_mig_state > IBV_MIG_ARMED)
		return -EINVAL;
	return 0;
}

static void set_path(struct rocemu_qp *qp, const struct ibv_ah_attr *ah)
{
	struct rocemu_path *p = &qp->path;

	memset(p, 0, sizeof(*p));
	p->valid = true;
	p->sgid_index = ah->grh.sgid_index;
	rocemu_port_gid(qp->engine->port, p->sgid_index, p->sgid);
	memcpy(p->dgid, ah->grh.dgid.raw, 16);
	p->v6 = !roce_gid_is_v4mapped(p->dgid);
	p->tclass = ah->grh.traffic_class;
	p->hop_limit = ah->grh.hop_limit;
	p->flow_label = ah->grh.flow_label & ROCE_FLOW_LABEL_MASK; /* 20 bits, as in ah.c */
}

static void set_udp_sport(struct rocemu_qp *qp)
{
	uint32_t h;

	/* A17.4.5.1: the source port carries flow entropy. Same scheme as the
	 * flow label mapping of rdma-core when a label is given, otherwise a
	 * hash of both QP numbers; always within 0xC000..0xFFFF. */
	if (qp->path.flow_label)
		h = qp->path.flow_label ^ (qp->path.flow_label >> 14);
	else
		h = (qp->qpn * 0x9E3779B1u) ^ (qp->attr.dest_qp_num * 0x85EBCA6Bu);
	qp->path.udp_sport = (uint16_t)(ROCE_UDP_SPORT_MIN | (h & 0x3FFF));
}

/* Room for n responder resources (9.5.2: max_dest_rd_atomic READ/atomic
 * requests in flight), kept across resets; the ones in use stay in place. */
static int responder_resources(struct rocemu_qp *qp, uint32_t n)
{
	struct rocemu_rd_res *res;

	if (n <= qp->resp.res_cap)
		return 0;
	res = calloc(n, sizeof(*res));
	if (!res)
		return -ENOMEM;
	if (qp->resp.res)
		memcpy(res, qp->resp.res, qp->resp.res_cap * sizeof(*res));
	free(qp->resp.res);
	qp->resp.res = res;
	qp->resp.res_cap = n;
	return 0;
}

static void qp_reset(struct rocemu_qp *qp)
{
	qp->sq_head = qp->sq_cur = qp->sq_tail = 0;
	qp->rq_head = qp->rq_tail = 0;
	memset(&qp->req, 0, sizeof(qp->req));
	memset(&qp->comp, 0, sizeof(qp->comp));
	struct rocemu_rd_res *res = qp->resp.res;
	uint32_t res_cap = qp->resp.res_cap;
	memset(&qp->resp, 0, sizeof(qp->resp));
	if (res)
		memset(res, 0, res_cap * sizeof(*res));
	qp->resp.res = res;
	qp->resp.res_cap = res_cap;
	qp->path.valid = false;
	qp->sq_draining = false;
}

static void apply_attrs(struct rocemu_qp *qp, const struct ibv_qp_attr *a, int mask)
{
	struct ibv_qp_attr *s = &qp->attr;

	if (mask & IBV_QP_ACCESS_FLAGS)
		s->qp_access_flags = a->qp_access_flags;
	if (mask & IBV_QP_PKEY_INDEX)
		s->pkey_index = a->pkey_index;
	if (mask & IBV_QP_PORT)
		s->port_num = a->port_num;
	if (mask & IBV_QP_QKEY)
		s->qkey = a->qkey;
	if (mask & IBV_QP_DEST_QPN)
		s->dest_qp_num = a->dest_qp_num;
	if (mask & IBV_QP_AV) {
		struct ibv_ah_attr av;
		uint8_t mac[6];

		s->ah_attr = a->ah_attr;
		/* Cannot fail: check_av resolved the same attributes. */
		(void)rocemu_av_resolve(qp->engine->port, &a->ah_attr, &av);
		set_path(qp, &av);
		/* Start ARP/ND now so the first packet does not wait for it. */
		(void)rocemu_port_resolve(qp->engine->port, qp->path.sgid_index, qp->path.dgid,
					  mac);
	}
	if (mask & IBV_QP_ALT_PATH) {
		s->alt_ah_attr = a->alt_ah_attr;
		s->alt_pkey_index = a->alt_pkey_index;
		s->alt_port_num = a->alt_port_num;
		s->alt_timeout = a->alt_timeout;
	}
	if (mask & IBV_QP_PATH_MIG_STATE)
		s->path_mig_state = a->path_mig_state;
	if (mask & IBV_QP_PATH_MTU) {
		uint32_t port_mtu = rocemu_port_active_mtu(qp->engine->port);
		uint32_t want = rocemu_mtu_bytes(a->path_mtu);

		/* The path cannot carry more than the port does: clamp, as rxe does. */
		qp->mtu = want < port_mtu ? want : port_mtu;
		s->path_mtu = mtu_enum(qp->mtu);
	}
	if (mask & IBV_QP_RQ_PSN) {
		s->rq_psn = a->rq_psn;
		qp->resp.epsn = a->rq_psn;
	}
	if (mask & IBV_QP_SQ_PSN) {
		s->sq_psn = a->sq_psn;
		qp->req.psn = a->sq_psn;
		qp->comp.psn = a->sq_psn;
	}
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		s->max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		s->max_rd_atomic = a->max_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		s->min_rnr_timer = a->min_rnr_timer;
	if (mask & IBV_QP_TIMEOUT)
		s->timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT) {
		s->retry_cnt = a->retry_cnt;
		qp->comp.retry_left = a->retry_cnt;
		qp->comp.nak_retry_left = 8 * (a->retry_cnt + 1u);
	}
	if (mask & IBV_QP_RNR_RETRY) {
		s->rnr_retry = a->rnr_retry;
		qp->comp.rnr_left = a->rnr_retry;
	}
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		s->en_sqd_async_notify = a->en_sqd_async_notify;
	if (mask & (IBV_QP_AV | IBV_QP_DEST_QPN))
		set_udp_sport(qp);
	if (qp->type == IBV_QPT_UD)
		qp->mtu = rocemu_port_active_mtu(qp->engine->port);
}

/** Validate everything first; change nothing unless all of it is valid. */
static int qp_modify_locked(struct rocemu_qp *qp, const struct ibv_qp_attr *attr, int mask)
{
	enum ibv_qp_state cur = qp->state, next;
	const struct qp_transition *t;
	int ti = qp_type_index(qp->type);
	int allowed;
	int rc;

	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur)
		return -EINVAL;
	next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	if (next > IBV_QPS_ERR || cur > IBV_QPS_ERR)
		return -EINVAL;
	t = &qp_table[cur][next];
	if (!t->valid)
		return -EINVAL;
	if ((mask & t->req[ti]) != t->req[ti])
		return -EINVAL;
	allowed = IBV_QP_STATE | t->req[ti] | t->opt[ti];
	if (mask & ~allowed)
		return -EINVAL;
	rc = check_values(qp, attr, mask);
	if (rc < 0)
		return rc;
	/* SQD -> SQD may change the path and limits only once the SQ is drained (11.2.5.4). */
	if (cur == IBV_QPS_SQD && next == IBV_QPS_SQD && qp->sq_head != qp->sq_cur &&
	    (mask & ~IBV_QP_STATE))
		return -EINVAL;

	if (next == IBV_QPS_RESET) {
		qp_reset(qp);
		qp->state = IBV_QPS_RESET;
		qp->attr.qp_state = IBV_QPS_RESET;
		return 0;
	}
	if (next == IBV_QPS_ERR) {
		rocemu_qp_to_error(qp, false);
		return 0;
	}
	if (qp->type == IBV_QPT_RC && (mask & IBV_QP_MAX_DEST_RD_ATOMIC)) {
		rc = responder_resources(qp, attr->max_dest_rd_atomic);
		if (rc < 0)
			return rc;
	}
	apply_attrs(qp, attr, mask);
	if (qp->type == IBV_QPT_RC && (mask & IBV_QP_MAX_DEST_RD_ATOMIC))
		qp->resp.nres = qp->attr.max_dest_rd_atomic;
	if (next == IBV_QPS_SQD && cur != IBV_QPS_SQD) {
		qp->sqd_notify = (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) && attr->en_sqd_async_notify;
		qp->sq_draining = true;
	}
	if (next == IBV_QPS_RTS)
		qp->sq_draining = false;
	qp->state = next;
	qp->attr.qp_state = next;
	qp->attr.cur_qp_state = next;
	rocemu_engine_schedule(qp);
	return 0;
}

int rocemu_qp_modify(struct rocemu_qp *qp, const struct ibv_qp_attr *attr, int mask)
{
	struct rocemu_engine *e = qp->engine;
	int rc;

	if (!attr)
		return -EINVAL;
	rocemu_port_verb_enter(e->port, ROCEMU_VERB_CONTROL);
	rc = qp_modify_locked(qp, attr, mask);
	rocemu_engine_timer_sync(qp);
	/* a QP that moved may have work for a pass (RTS: queued sends) */
	rocemu_port_verb_leave(e->port, rc == 0 ? ROCEMU_DID_CHANGE : ROCEMU_DID_NOTHING);
	return rc;
}

int rocemu_qp_query(struct rocemu_qp *qp, struct ibv_qp_attr *attr, int mask,
		    struct ibv_qp_init_attr *init)
{
	struct rocemu_engine *e = qp->engine;

	(void)mask; /* everything is cheap to report */
	rocemu_engine_lock(e);
	if (attr) {
		*attr = qp->attr;
		attr->qp_state = qp->state;
		attr->cur_qp_state = qp->state;
		attr->cap = qp->cap;
		attr->sq_draining = qp->state == IBV_QPS_SQD && qp->sq_head != qp->sq_cur;
	}
	if (init) {
		memset(init, 0, sizeof(*init));
		init->qp_type = qp->type;
		init->cap = qp->cap;
		init->sq_sig_all = qp->sq_sig_all;
	}
	rocemu_engine_unlock(e);
	return 0;
}
