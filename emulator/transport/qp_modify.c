/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The QP state machine (IBA 11.2.5, the attribute table ibv_modify_qp(3)
 * documents): which transitions exist, which attributes each requires and
 * allows, their values checked before anything changes; and query.
 * Creating and destroying QPs is qp.c, completions and flushing qp_flush.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rocemu_transport.h"

/* ------------------------------------------------------------------------ */
/* The transition table: required and optional attributes per QP type.        */

enum { T_RC, T_UC, T_UD, T_RAW, T_XSEND, T_XRECV, T_NTYPES };

struct qp_transition {
	bool valid;
	int req[T_NTYPES];
	int opt[T_NTYPES];
};

#define ALL(m)                                                                                     \
	{                                                                                          \
		(m), (m), (m), (m), (m), (m)                                                       \
	}
#define M_ACCESS IBV_QP_ACCESS_FLAGS
#define M_PKEY	 IBV_QP_PKEY_INDEX
#define M_PORT	 IBV_QP_PORT
#define M_QKEY	 IBV_QP_QKEY
#define M_CUR	 IBV_QP_CUR_STATE
#define M_MIG	 (IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE)
#define M_RATE	 IBV_QP_RATE_LIMIT
#define M_RTR_RC (IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN)
#define M_RTS_RC                                                                                   \
	(IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |                    \
	 IBV_QP_MAX_QP_RD_ATOMIC)
/* What RESET -> INIT requires and INIT -> INIT allows. */
#define INIT_ATTRS                                                                                 \
	{                                                                                          \
		M_PKEY | M_PORT | M_ACCESS, M_PKEY | M_PORT | M_ACCESS, M_PKEY | M_PORT | M_QKEY,  \
		    M_PORT, M_PKEY | M_PORT | M_ACCESS, M_PKEY | M_PORT | M_ACCESS                 \
	}
/* What RTR, RTS and SQD -> RTS allow. */
#define TO_RTS_OPT                                                                                 \
	{                                                                                          \
		M_CUR | M_MIG | M_ACCESS | IBV_QP_MIN_RNR_TIMER | M_RATE,                          \
		    M_CUR | M_MIG | M_ACCESS | M_RATE, M_CUR | M_QKEY | M_RATE, M_RATE,            \
		    M_CUR | M_MIG | M_ACCESS | M_RATE,                                             \
		    M_CUR | M_MIG | M_ACCESS | IBV_QP_MIN_RNR_TIMER                                \
	}

/*
 * Columns: RC, UC, UD, raw packet, XRC_SEND (the initiator half of XRC: a
 * requester only, RC's send attributes) and XRC_RECV (the target half: a
 * responder only, RC's receive attributes, and RTS with a timeout and a send
 * PSN), as the kernel's qp_state_table has them for IB_QPT_XRC_INI/TGT.
 */
/* Every state may go to RESET or ERR, with no attributes (to_reset_or_err
 * below); the table holds the other moves. */
/* clang-format off */
static const struct qp_transition qp_table[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1] = {
	[IBV_QPS_RESET] = {
		[IBV_QPS_INIT] = {.valid = true, .req = INIT_ATTRS},
	},
	[IBV_QPS_INIT] = {
		[IBV_QPS_INIT] = {.valid = true, .opt = INIT_ATTRS},
		[IBV_QPS_RTR] = {
			.valid = true,
			.req = {M_RTR_RC | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
				M_RTR_RC, 0, 0, M_RTR_RC,
				M_RTR_RC | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER},
			.opt = {IBV_QP_ALT_PATH | M_ACCESS | M_PKEY, IBV_QP_ALT_PATH | M_ACCESS | M_PKEY,
				M_PKEY | M_QKEY, 0, IBV_QP_ALT_PATH | M_ACCESS | M_PKEY,
				IBV_QP_ALT_PATH | M_ACCESS | M_PKEY},
		},
	},
	[IBV_QPS_RTR] = {
		[IBV_QPS_RTS] = {
			.valid = true,
			.req = {M_RTS_RC, IBV_QP_SQ_PSN, IBV_QP_SQ_PSN, 0, M_RTS_RC,
				IBV_QP_TIMEOUT | IBV_QP_SQ_PSN},
			.opt = TO_RTS_OPT,
		},
	},
	[IBV_QPS_RTS] = {
		[IBV_QPS_RTS] = {.valid = true, .opt = TO_RTS_OPT},
		[IBV_QPS_SQD] = {.valid = true, .opt = ALL(IBV_QP_EN_SQD_ASYNC_NOTIFY)},
	},
	[IBV_QPS_SQD] = {
		[IBV_QPS_RTS] = {
			.valid = true,
			.opt = TO_RTS_OPT,
		},
		[IBV_QPS_SQD] = {
			.valid = true,
			.opt = {M_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | M_MIG |
					M_ACCESS | M_PKEY | IBV_QP_MIN_RNR_TIMER,
				IBV_QP_AV | M_MIG | M_ACCESS | M_PKEY, M_PKEY | M_QKEY, 0,
				M_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					IBV_QP_MAX_QP_RD_ATOMIC | M_MIG | M_ACCESS | M_PKEY,
				M_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_MAX_DEST_RD_ATOMIC | M_MIG |
					M_ACCESS | M_PKEY | IBV_QP_MIN_RNR_TIMER},
		},
	},
	[IBV_QPS_SQE] = {
		[IBV_QPS_RTS] = {.valid = true, .opt = {0, M_CUR | M_ACCESS, M_CUR | M_QKEY}},
	},
};

static const struct qp_transition to_reset_or_err = {.valid = true};
/* clang-format on */

int rocemu_qp_type_index(enum ibv_qp_type t)
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
	case IBV_QPT_XRC_SEND:
		return T_XSEND;
	case IBV_QPT_XRC_RECV:
		return T_XRECV;
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
	/* The remote rights are what a QP uses; the bits that only mean something
	 * to a region (ON_DEMAND, HUGETLB, MW_BIND, ZERO_BASED, the optional
	 * range) are accepted and ignored, as Linux does: applications pass one
	 * access word to both (rdma-core's ODP tests do). */
	unsigned access_ok = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			     IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE |
			     ROCEMU_ACCESS_FLUSH_GLOBAL | ROCEMU_ACCESS_FLUSH_PERSISTENT |
			     IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB | IBV_ACCESS_MW_BIND |
			     IBV_ACCESS_ZERO_BASED | IBV_ACCESS_OPTIONAL_RANGE;

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
	if ((mask & IBV_QP_RATE_LIMIT) && a->rate_limit > ROCEMU_RATE_MAX_KBPS)
		return -EINVAL;
	if ((mask & IBV_QP_AV) && !rocemu_rate_valid_static(a->ah_attr.static_rate))
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
	p->sl = ah->sl;
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
	struct rocemu_engine *e = qp->engine;

	/* Its completions still queued go, as mlx5 cleans its CQs on RESET: a
	 * QP brought back up must not hand its next poll the flushes of its
	 * last life (rdma-core's test_mr_rereg_pd and _addr restate their QPs
	 * after an error and expect the next completion to be new). */
	if (qp->send_cq)
		e->ctr[CTR_cq_cleaned] += rocemu_cq_forget_qp(qp->send_cq, qp->qpn);
	if (qp->recv_cq && qp->recv_cq != qp->send_cq)
		e->ctr[CTR_cq_cleaned] += rocemu_cq_forget_qp(qp->recv_cq, qp->qpn);
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
	memset(&qp->rate, 0, sizeof(qp->rate));
	qp->attr.rate_limit = 0;
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
		if (qp->type == IBV_QPT_RC || qp->type == IBV_QPT_UC ||
		    qp->type == IBV_QPT_XRC_SEND)
			rocemu_rate_from_av(qp, a->ah_attr.static_rate,
					    rocemu_port_link_speed(qp->engine->port));
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
	if (mask & IBV_QP_RATE_LIMIT) {
		s->rate_limit = a->rate_limit;
		(void)rocemu_rate_set(qp, a->rate_limit, 0); /* checked in check_values */
	}
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
	int ti = rocemu_qp_type_index(qp->type);
	int allowed;
	int rc;

	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur)
		return -EINVAL;
	next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	if (next > IBV_QPS_ERR || cur > IBV_QPS_ERR)
		return -EINVAL;
	t = next == IBV_QPS_RESET || next == IBV_QPS_ERR ? &to_reset_or_err : &qp_table[cur][next];
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
	if (qp_is_reliable(qp) && (mask & IBV_QP_MAX_DEST_RD_ATOMIC)) {
		rc = responder_resources(qp, attr->max_dest_rd_atomic);
		if (rc < 0)
			return rc;
	}
	apply_attrs(qp, attr, mask);
	if (qp_is_reliable(qp) && (mask & IBV_QP_MAX_DEST_RD_ATOMIC))
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

int rocemu_qp_rate_limit(struct rocemu_qp *qp, uint32_t kbps, uint32_t burst)
{
	struct rocemu_engine *e = qp->engine;
	int rc = -EINVAL;

	rocemu_port_verb_enter(e->port, ROCEMU_VERB_CONTROL);
	if (qp->type == IBV_QPT_RC || qp->type == IBV_QPT_UC || qp->type == IBV_QPT_UD ||
	    qp->type == IBV_QPT_RAW_PACKET || qp->type == IBV_QPT_XRC_SEND) {
		rc = rocemu_rate_set(qp, kbps, burst);
		if (rc == 0)
			qp->attr.rate_limit = kbps;
	}
	rocemu_engine_timer_sync(qp);
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
