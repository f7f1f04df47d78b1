/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Queue pairs: create (plain and _ex), modify/query/destroy, the post verbs
 * behind ibv_post_send/ibv_post_recv, and the ibv_qp_ex work-request
 * builder (ibv_wr_start ... ibv_wr_complete), which collects the WRs of one
 * batch and posts them to the engine with one lock acquisition.
 */
#include <stdlib.h>
#include <string.h>

#include "provider.h"

#define POST_CHUNK 32

/* rocemu's librdmacm: completions of a connection's QP not polled yet. */
static unsigned hook_qp_queued(struct ibv_context *ctx, uint32_t qpn)
{
	return ctx ? rocemu_engine_queued_completions(to_vctx(ctx)->engine, qpn) : 0;
}

const struct rocemu_cm_hooks rocemu_cm_hooks_impl = {
    .magic = ROCEMU_CM_HOOKS_MAGIC,
    .qp_queued = hook_qp_queued,
};

/* ------------------------------------------------------------------------ */
/* Posting                                                                    */

static int send_wr_from_ibv(const struct ibv_send_wr *in, struct rocemu_send_wr *out)
{
	memset(out, 0, sizeof(*out));
	out->wr_id = in->wr_id;
	out->opcode = in->opcode;
	out->send_flags = in->send_flags;
	out->sg_list = in->sg_list;
	out->num_sge = (uint32_t)(in->num_sge < 0 ? 0 : in->num_sge);
	if (in->num_sge < 0 || (in->num_sge > 0 && !in->sg_list))
		return -EINVAL;
	switch (in->opcode) {
	case IBV_WR_SEND_WITH_IMM:
		out->imm_data = in->imm_data;
		break;
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_LOCAL_INV:
		out->invalidate_rkey = in->invalidate_rkey;
		break;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		out->imm_data = in->imm_data;
		/* fallthrough */
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_READ:
		out->remote_addr = in->wr.rdma.remote_addr;
		out->rkey = in->wr.rdma.rkey;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		out->remote_addr = in->wr.atomic.remote_addr;
		out->rkey = in->wr.atomic.rkey;
		out->compare_add = in->wr.atomic.compare_add;
		out->swap = in->wr.atomic.swap;
		break;
	case IBV_WR_BIND_MW:
		/* type 2 only: type 1 windows are bound with ibv_bind_mw(3) */
		return rocemu_bind_wr(in->bind_mw.mw, in->bind_mw.rkey, &in->bind_mw.bind_info,
				      IBV_MW_TYPE_2, out)
			   ? -EINVAL
			   : 0;
	case IBV_WR_ATOMIC_WRITE:
		/* ibv_send_wr has no field for the 8 bytes: as Linux rxe takes them,
		 * from the one SGE (read now, like inline data), to wr.rdma's target */
		if (in->num_sge != 1 || in->sg_list[0].length != 8)
			return -EINVAL;
		memcpy(out->atomic_wr, (const void *)(uintptr_t)in->sg_list[0].addr, 8);
		out->num_sge = 0;
		out->sg_list = NULL;
		out->remote_addr = in->wr.rdma.remote_addr;
		out->rkey = in->wr.rdma.rkey;
		break;
	default:
		break;
	}
	return 0;
}

int rocemu_op_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct rocemu_send_wr wrs[POST_CHUNK];
	struct ibv_send_wr *src[POST_CHUNK];

	if (!ibqp || !bad) {
		if (bad)
			*bad = wr;
		return EINVAL;
	}
	struct rocemu_vqp *qp = to_vqp(ibqp);
	*bad = NULL;
	while (wr) {
		unsigned n = 0;
		for (; wr && n < POST_CHUNK; wr = wr->next, n++) {
			src[n] = wr;
			if (send_wr_from_ibv(wr, &wrs[n]) < 0) {
				/* post what came before, then report this one */
				unsigned b = 0;
				int rc = n ? rocemu_qp_post_send_batch(qp->eqp, wrs, n, &b) : 0;
				*bad = rc < 0 ? src[b] : wr;
				return rc < 0 ? -rc : EINVAL;
			}
			if (ibqp->qp_type == IBV_QPT_UD) {
				if (!wr->wr.ud.ah) {
					unsigned b = 0;
					int rc =
					    n ? rocemu_qp_post_send_batch(qp->eqp, wrs, n, &b) : 0;
					*bad = rc < 0 ? src[b] : wr;
					return rc < 0 ? -rc : EINVAL;
				}
				wrs[n].ah = ((struct rocemu_vah *)wr->wr.ud.ah)->eah;
				wrs[n].remote_qpn = wr->wr.ud.remote_qpn;
				wrs[n].remote_qkey = wr->wr.ud.remote_qkey;
			}
			if (ibqp->qp_type == IBV_QPT_XRC_SEND)
				wrs[n].xrc_srqn = wr->qp_type.xrc.remote_srqn;
		}
		unsigned b = 0;
		int rc = rocemu_qp_post_send_batch(qp->eqp, wrs, n, &b);
		if (rc < 0) {
			*bad = src[b < n ? b : 0];
			return -rc;
		}
	}
	return 0;
}

int rocemu_op_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	if (!ibqp || !bad) {
		if (bad)
			*bad = wr;
		return EINVAL;
	}
	struct rocemu_vqp *qp = to_vqp(ibqp);
	*bad = NULL;
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || (wr->num_sge > 0 && !wr->sg_list)) {
			*bad = wr;
			return EINVAL;
		}
		int rc =
		    rocemu_qp_post_recv(qp->eqp, wr->wr_id, wr->sg_list, (uint32_t)wr->num_sge);
		if (rc < 0) {
			*bad = wr;
			return -rc;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* ibv_qp_ex work-request builder                                             */

static struct rocemu_vqp *xq(struct ibv_qp_ex *q)
{
	return (struct rocemu_vqp *)q;
}

static void batch_reset(struct rocemu_wr_batch *b)
{
	b->n = 0;
	b->n_sge = 0;
	b->n_inl = 0;
	b->err = 0;
}

static bool grow(void **p, unsigned *cap, unsigned need, size_t elem)
{
	if (need <= *cap)
		return true;
	unsigned c = *cap ? *cap : 16;
	while (c < need)
		c *= 2;
	void *q = realloc(*p, (size_t)c * elem);
	if (!q)
		return false;
	*p = q;
	*cap = c;
	return true;
}

static struct rocemu_send_wr *batch_add(struct ibv_qp_ex *q, enum ibv_wr_opcode op)
{
	struct rocemu_wr_batch *b = &xq(q)->batch;
	unsigned cap_aux = b->cap;

	if (b->err)
		return NULL;
	if (!grow((void **)&b->wrs, &b->cap, b->n + 1, sizeof(*b->wrs)) ||
	    !grow((void **)&b->aux, &cap_aux, b->cap, sizeof(*b->aux))) {
		b->err = ENOMEM;
		return NULL;
	}
	struct rocemu_send_wr *w = &b->wrs[b->n];
	memset(w, 0, sizeof(*w));
	b->aux[b->n].first_sge = b->n_sge;
	b->aux[b->n].inline_copy = false;
	b->n++;
	w->wr_id = q->wr_id;
	w->send_flags = q->wr_flags;
	w->opcode = op;
	return w;
}

static struct rocemu_send_wr *batch_last(struct ibv_qp_ex *q)
{
	struct rocemu_wr_batch *b = &xq(q)->batch;
	if (b->err)
		return NULL;
	if (!b->n) {
		b->err = EINVAL; /* a setter before any WR builder */
		return NULL;
	}
	return &b->wrs[b->n - 1];
}

static void wr_unsupported(struct ibv_qp_ex *q)
{
	if (!xq(q)->batch.err)
		xq(q)->batch.err = EOPNOTSUPP;
}

static void wr_start(struct ibv_qp_ex *q)
{
	batch_reset(&xq(q)->batch);
}

static int wr_complete(struct ibv_qp_ex *q)
{
	struct rocemu_vqp *qp = xq(q);
	struct rocemu_wr_batch *b = &qp->batch;
	unsigned bad = 0;

	if (rocemu_dead(q->qp_base.context)) { /* the parent's QP, in a child (fork.c) */
		batch_reset(b);
		return rocemu_inherited_fail(q->qp_base.context);
	}
	if (b->err) {
		int e = b->err;
		batch_reset(b);
		return e;
	}
	/* SGE arrays and inline buffers may have moved while growing: point at them now. */
	for (unsigned i = 0; i < b->n; i++) {
		if (!b->wrs[i].num_sge) {
			b->wrs[i].sg_list = NULL; /* no SGE array at all when no WR had one */
			continue;
		}
		struct ibv_sge *s = b->sges + b->aux[i].first_sge;
		b->wrs[i].sg_list = s;
		if (b->aux[i].inline_copy)
			for (uint32_t j = 0; j < b->wrs[i].num_sge; j++)
				s[j].addr = (uint64_t)(uintptr_t)(b->inl + s[j].addr);
	}
	int rc = b->n ? rocemu_qp_post_send_batch(qp->eqp, b->wrs, b->n, &bad) : 0;
	batch_reset(b);
	return rc < 0 ? -rc : 0;
}

static void wr_abort(struct ibv_qp_ex *q)
{
	batch_reset(&xq(q)->batch);
}

static void wr_send(struct ibv_qp_ex *q)
{
	batch_add(q, IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *q, __be32 imm)
{
	struct rocemu_send_wr *w = batch_add(q, IBV_WR_SEND_WITH_IMM);
	if (w)
		w->imm_data = imm;
}

static void wr_send_inv(struct ibv_qp_ex *q, uint32_t rkey)
{
	struct rocemu_send_wr *w = batch_add(q, IBV_WR_SEND_WITH_INV);
	if (w)
		w->invalidate_rkey = rkey;
}

static void wr_rdma(struct ibv_qp_ex *q, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr,
		    __be32 imm)
{
	struct rocemu_send_wr *w = batch_add(q, op);
	if (w) {
		w->rkey = rkey;
		w->remote_addr = addr;
		w->imm_data = imm;
	}
}

static void wr_rdma_write(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr)
{
	wr_rdma(q, IBV_WR_RDMA_WRITE, rkey, addr, 0);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr, __be32 imm)
{
	wr_rdma(q, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr, imm);
}

static void wr_rdma_read(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr)
{
	wr_rdma(q, IBV_WR_RDMA_READ, rkey, addr, 0);
}

static void wr_atomic(struct ibv_qp_ex *q, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr,
		      uint64_t compare_add, uint64_t swap)
{
	struct rocemu_send_wr *w = batch_add(q, op);
	if (w) {
		w->rkey = rkey;
		w->remote_addr = addr;
		w->compare_add = compare_add;
		w->swap = swap;
	}
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr, uint64_t compare,
			      uint64_t swap)
{
	wr_atomic(q, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, addr, compare, swap);
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr, uint64_t add)
{
	wr_atomic(q, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, addr, add, 0);
}

static void wr_local_inv(struct ibv_qp_ex *q, uint32_t rkey)
{
	struct rocemu_send_wr *w = batch_add(q, IBV_WR_LOCAL_INV);
	if (w)
		w->invalidate_rkey = rkey;
}

static void wr_bind_mw(struct ibv_qp_ex *q, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *info)
{
	struct rocemu_send_wr *w = batch_add(q, IBV_WR_BIND_MW);

	if (w && rocemu_bind_wr(mw, rkey, info, IBV_MW_TYPE_2, w))
		xq(q)->batch.err = EINVAL; /* the batch fails as a whole */
}

static void wr_send_tso(struct ibv_qp_ex *q, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
	(void)hdr;
	(void)hdr_sz;
	(void)mss;
	wr_unsupported(q);
}

/* ibv_wr_set_xrc_srqn(3): the remote XRC SRQ the last WR is for (XRC_SEND) */
static void wr_set_xrc_srqn(struct ibv_qp_ex *q, uint32_t srqn)
{
	struct rocemu_send_wr *w = batch_last(q);

	if (w)
		w->xrc_srqn = srqn;
}

/* ibv_wr_atomic_write(3): the 8 bytes at data are copied now (annex A19). */
static void wr_atomic_write(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr, const void *data)
{
	struct rocemu_send_wr *w;

	if (!data) {
		if (!xq(q)->batch.err)
			xq(q)->batch.err = EINVAL;
		return;
	}
	w = batch_add(q, IBV_WR_ATOMIC_WRITE);
	if (w) {
		w->rkey = rkey;
		w->remote_addr = addr;
		memcpy(w->atomic_wr, data, sizeof(w->atomic_wr));
	}
}

static void wr_set_ud_addr(struct ibv_qp_ex *q, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct rocemu_send_wr *w = batch_last(q);
	if (!w)
		return;
	if (!ah) {
		xq(q)->batch.err = EINVAL;
		return;
	}
	w->ah = ((struct rocemu_vah *)ah)->eah;
	w->remote_qpn = qpn;
	w->remote_qkey = qkey;
}

/* Give the last WR n SGEs (copied from list, or zeroed for the caller to fill). */
static struct ibv_sge *set_sges(struct ibv_qp_ex *q, size_t n, const struct ibv_sge *list)
{
	struct rocemu_wr_batch *b = &xq(q)->batch;
	struct rocemu_send_wr *w = batch_last(q);

	if (!w)
		return NULL;
	if (n > UINT16_MAX) {
		b->err = EINVAL;
		return NULL;
	}
	/* Replace the WR's SGEs: they are the last ones in the array. */
	b->n_sge = b->aux[b->n - 1].first_sge;
	if (!grow((void **)&b->sges, &b->cap_sge, b->n_sge + (unsigned)n, sizeof(*b->sges))) {
		b->err = ENOMEM;
		return NULL;
	}
	struct ibv_sge *s = b->sges + b->n_sge;
	if (list && n)
		memcpy(s, list, n * sizeof(*s));
	b->n_sge += (unsigned)n;
	w->num_sge = (uint32_t)n;
	b->aux[b->n - 1].inline_copy = false;
	return s;
}

static void wr_set_sge(struct ibv_qp_ex *q, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct ibv_sge sge = {.addr = addr, .length = length, .lkey = lkey};
	set_sges(q, 1, &sge);
}

static void wr_set_sge_list(struct ibv_qp_ex *q, size_t n, const struct ibv_sge *list)
{
	if (n && !list) {
		xq(q)->batch.err = EINVAL;
		return;
	}
	set_sges(q, n, list);
}

/* Inline data is copied now (ibv_wr_set_inline_data(3): the buffer may be reused at once). */
static void wr_set_inline_data_list(struct ibv_qp_ex *q, size_t n, const struct ibv_data_buf *bufs)
{
	struct rocemu_vqp *qp = xq(q);
	struct rocemu_wr_batch *b = &qp->batch;
	size_t total = 0;

	if (n && !bufs) {
		b->err = EINVAL;
		return;
	}
	for (size_t i = 0; i < n; i++)
		total += bufs[i].length;
	if (total > qp->max_inline) {
		if (!b->err)
			b->err = EINVAL;
		return;
	}
	struct ibv_sge *s = set_sges(q, n, NULL);
	if (!s && n)
		return;
	if (b->n_inl + total > b->cap_inl) {
		size_t cap = b->cap_inl ? b->cap_inl : 256;
		while (cap < b->n_inl + total)
			cap *= 2;
		uint8_t *p = realloc(b->inl, cap);
		if (!p) {
			b->err = ENOMEM;
			return;
		}
		b->inl = p;
		b->cap_inl = cap;
	}
	for (size_t i = 0; i < n; i++) {
		if (bufs[i].length)
			memcpy(b->inl + b->n_inl, bufs[i].addr, bufs[i].length);
		s[i].addr = b->n_inl; /* an offset until wr_complete */
		s[i].length = (uint32_t)bufs[i].length;
		s[i].lkey = 0;
		b->n_inl += bufs[i].length;
	}
	b->aux[b->n - 1].inline_copy = true;
	b->wrs[b->n - 1].send_flags |= IBV_SEND_INLINE;
}

static void wr_set_inline_data(struct ibv_qp_ex *q, void *addr, size_t length)
{
	struct ibv_data_buf buf = {.addr = addr, .length = length};
	wr_set_inline_data_list(q, 1, &buf);
}

static void fill_qp_ex_ops(struct ibv_qp_ex *x)
{
	x->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	x->wr_atomic_fetch_add = wr_atomic_fetch_add;
	x->wr_bind_mw = wr_bind_mw;
	x->wr_local_inv = wr_local_inv;
	x->wr_rdma_read = wr_rdma_read;
	x->wr_rdma_write = wr_rdma_write;
	x->wr_rdma_write_imm = wr_rdma_write_imm;
	x->wr_send = wr_send;
	x->wr_send_imm = wr_send_imm;
	x->wr_send_inv = wr_send_inv;
	x->wr_send_tso = wr_send_tso;
	x->wr_set_ud_addr = wr_set_ud_addr;
	x->wr_set_xrc_srqn = wr_set_xrc_srqn;
	x->wr_set_inline_data = wr_set_inline_data;
	x->wr_set_inline_data_list = wr_set_inline_data_list;
	x->wr_set_sge = wr_set_sge;
	x->wr_set_sge_list = wr_set_sge_list;
	x->wr_start = wr_start;
	x->wr_complete = wr_complete;
	x->wr_abort = wr_abort;
	x->wr_atomic_write = wr_atomic_write;
}

/* ------------------------------------------------------------------------ */
/* Create / modify / query / destroy                                          */

#define ROCEMU_SEND_OPS                                                                            \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |    \
	 IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |                                 \
	 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |                 \
	 IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_ATOMIC_WRITE |   \
	 IBV_QP_EX_WITH_BIND_MW)

/*
 * The XRC types (ibv_create_qp_ex(3)): an XRC_RECV (target) QP has a domain
 * and nothing else (PD, CQs, SRQ and capabilities are not used: each request
 * uses the XRC SRQ it names); an XRC_SEND (initiator) QP a PD and a send CQ
 * (receive CQ and SRQ not used). 0 when a is consistent, else EINVAL.
 */
static int xrc_init_check(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a)
{
	if (a->qp_type == IBV_QPT_XRC_RECV) {
		if (!(a->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !a->xrcd || a->xrcd->context != ctx)
			return EINVAL;
		a->pd = NULL;
		a->send_cq = a->recv_cq = NULL;
		a->srq = NULL;
		memset(&a->cap, 0, sizeof(a->cap));
		return 0;
	}
	if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd || !a->send_cq ||
	    a->pd->context != ctx || a->send_cq->context != ctx)
		return EINVAL;
	a->recv_cq = NULL;
	a->srq = NULL;
	a->cap.max_recv_wr = a->cap.max_recv_sge = 0;
	return 0;
}

struct ibv_qp *rocemu_op_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a)
{
	bool xrc = a && (a->qp_type == IBV_QPT_XRC_SEND || a->qp_type == IBV_QPT_XRC_RECV);

	if (ctx && xrc && xrc_init_check(ctx, a)) {
		errno = EINVAL;
		return NULL;
	}
	/* ibv_create_qp(3): both CQs are mandatory (an SRQ does not replace recv_cq) */
	if (!ctx || !a ||
	    (!xrc &&
	     (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd || !a->send_cq || !a->recv_cq ||
	      a->pd->context != ctx || a->send_cq->context != ctx || a->recv_cq->context != ctx))) {
		errno = EINVAL;
		return NULL;
	}
	uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
			 IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_XRCD;
	uint32_t create_flags =
	    (a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) ? a->create_flags : 0;
	if ((a->comp_mask & ~known) || (create_flags & ~(uint32_t)IBV_QP_CREATE_SOURCE_QPN)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* IBV_QP_CREATE_SOURCE_QPN with source_qpn 1 on a UD QP is the GSI QP (QP1),
	 * through which rocemu's librdmacm exchanges CM MADs; the engine refuses other
	 * numbers (EINVAL) and a second GSI QP (EBUSY). */
	uint32_t source_qpn = 0;
	if (create_flags & IBV_QP_CREATE_SOURCE_QPN) {
		if (a->source_qpn == 0) {
			errno = EINVAL;
			return NULL;
		}
		source_qpn = a->source_qpn;
	}
	bool ex = a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	if (ex && (a->send_ops_flags & ~(uint64_t)ROCEMU_SEND_OPS)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC && a->qp_type != IBV_QPT_UD &&
	    a->qp_type != IBV_QPT_RAW_PACKET && !xrc) {
		errno = EOPNOTSUPP; /* driver QPs */
		return NULL;
	}
	/* whole frames on the port: as the kernel's uverbs, CAP_NET_RAW (flow.c) */
	if (a->qp_type == IBV_QPT_RAW_PACKET && !rocemu_has_cap_net_raw()) {
		errno = EPERM;
		return NULL;
	}
	struct rocemu_vqp *qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	struct rocemu_qp_init init = {
	    .qp_type = a->qp_type,
	    .send_cq = a->send_cq ? ((struct rocemu_vcq *)a->send_cq)->ecq : NULL,
	    .recv_cq = a->recv_cq ? ((struct rocemu_vcq *)a->recv_cq)->ecq : NULL,
	    .srq = a->srq ? ((struct rocemu_vsrq *)a->srq)->esrq : NULL,
	    .cap = a->cap,
	    .sq_sig_all = a->sq_sig_all != 0,
	    .user_ctx = qp,
	    .source_qpn = source_qpn,
	    .alloc = rocemu_pd_queue_alloc(a->pd), /* a parent domain's allocators */
	    .xrcd = a->qp_type == IBV_QPT_XRC_RECV ? to_vxrcd(a->xrcd)->exrcd : NULL,
	};
	int rc =
	    rocemu_qp_create(a->pd ? ((struct rocemu_vpd *)a->pd)->epd : NULL, &init, &qp->eqp);
	if (rc < 0) {
		free(qp);
		return rocemu_null_errno(rc);
	}
	qp->parent_domain = rocemu_pd_use(a->pd);
	a->cap = init.cap; /* ibv_create_qp(3): report what was granted */
	qp->ctx = to_vctx(ctx);
	qp->has_qp_ex = ex;
	qp->send_ops_flags = ex ? a->send_ops_flags : 0;
	qp->max_inline = init.cap.max_inline_data;
	struct ibv_qp *q = &qp->qpx.qp_base;
	q->context = ctx;
	q->qp_context = a->qp_context;
	q->pd = a->pd;
	q->send_cq = a->send_cq;
	q->recv_cq = a->recv_cq;
	q->srq = a->srq;
	q->qp_num = rocemu_qp_num(qp->eqp);
	q->state = IBV_QPS_RESET;
	q->qp_type = a->qp_type;
	pthread_mutex_init(&q->mutex, NULL);
	pthread_cond_init(&q->cond, NULL);
	qp->qpx.comp_mask = 0;
	fill_qp_ex_ops(&qp->qpx);
	return q;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	if (rocemu_dead(ROCEMU_CTX_OF(pd)))
		return rocemu_inherited_null(ROCEMU_CTX_OF(pd));
	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	struct ibv_qp_init_attr_ex a;
	memset(&a, 0, sizeof(a));
	a.qp_context = attr->qp_context;
	a.send_cq = attr->send_cq;
	a.recv_cq = attr->recv_cq;
	a.srq = attr->srq;
	a.cap = attr->cap;
	a.qp_type = attr->qp_type;
	a.sq_sig_all = attr->sq_sig_all;
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = pd;
	struct ibv_qp *qp = rocemu_op_create_qp_ex(pd->context, &a);
	if (qp)
		attr->cap = a.cap;
	return qp;
}
ROCEMU_PUBLIC(ibv_create_qp)

struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *ibqp)
{
	if (!ibqp || !to_vqp(ibqp)->has_qp_ex) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	return &to_vqp(ibqp)->qpx;
}
ROCEMU_PUBLIC(ibv_qp_to_qp_ex)

int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	if (rocemu_dead(ROCEMU_CTX_OF(ibqp)))
		return rocemu_inherited_fail(ROCEMU_CTX_OF(ibqp));
	if (!ibqp || !attr)
		return EINVAL;
	int rc = rocemu_qp_modify(to_vqp(ibqp)->eqp, attr, mask);
	if (rc < 0)
		return -rc;
	ibqp->state = rocemu_qp_state(to_vqp(ibqp)->eqp);
	return 0;
}
ROCEMU_PUBLIC(ibv_modify_qp)

/*
 * ibv_modify_qp_rate_limit(3): rate_limit in kbit/s (0: none), max_burst_sz the
 * bucket in bytes (0: one packet); typical_pkt_sz is a hint a token bucket
 * does not need. Any QP state: the limit applies to what the QP sends next.
 */
int rocemu_op_modify_qp_rate_limit(struct ibv_qp *ibqp, struct ibv_qp_rate_limit_attr *attr)
{
	if (!ibqp || !attr || attr->comp_mask)
		return EINVAL;
	int rc = rocemu_qp_rate_limit(to_vqp(ibqp)->eqp, attr->rate_limit, attr->max_burst_sz);
	return rc < 0 ? -rc : 0;
}

int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
		 struct ibv_qp_init_attr *init)
{
	if (rocemu_dead(ROCEMU_CTX_OF(ibqp)))
		return rocemu_inherited_fail(ROCEMU_CTX_OF(ibqp));
	if (!ibqp || !attr || !init)
		return EINVAL;
	int rc = rocemu_qp_query(to_vqp(ibqp)->eqp, attr, mask, init);
	if (rc < 0)
		return -rc;
	init->qp_context = ibqp->qp_context;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->qp_type = ibqp->qp_type;
	ibqp->state = rocemu_qp_state(to_vqp(ibqp)->eqp);
	return 0;
}
ROCEMU_PUBLIC(ibv_query_qp)

int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	if (rocemu_dead(ROCEMU_CTX_OF(ibqp)))
		return rocemu_inherited_fail(ROCEMU_CTX_OF(ibqp));
	if (!ibqp)
		return EINVAL;
	struct rocemu_vqp *qp = to_vqp(ibqp);
	/* an XRC target may outlive this handle (ibv_open_qp): its events must
	 * not name it any more */
	if (ibqp->qp_type == IBV_QPT_XRC_RECV)
		rocemu_qp_retarget_events(qp->eqp, qp, NULL);
	int rc = rocemu_qp_destroy(qp->eqp);
	if (rc < 0)
		return -rc;
	rocemu_async_wait_acked(&ibqp->mutex, &ibqp->cond, &ibqp->events_completed,
				rocemu_async_forget(qp->ctx, &qp->events_reported));
	rocemu_pd_unuse(qp->parent_domain);
	free(qp->batch.wrs);
	free(qp->batch.aux);
	free(qp->batch.sges);
	free(qp->batch.inl);
	pthread_mutex_destroy(&ibqp->mutex);
	pthread_cond_destroy(&ibqp->cond);
	free(qp);
	return 0;
}
ROCEMU_PUBLIC(ibv_destroy_qp)

/* rocemu writes payload in order, packet by packet, into host memory. */
int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	(void)op;
	if (!qp || flags > 1)
		return 0;
	return 1;
}
ROCEMU_PUBLIC(ibv_query_qp_data_in_order)
