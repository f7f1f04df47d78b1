/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The responder's resources (IBA 9.5.2: max_dest_rd_atomic of them): the
 * requests answered with data rather than an ACK. A READ, an atomic, an
 * ATOMIC WRITE or a FLUSH is checked and executed into a resource; its
 * responses (READ responses, ATOMIC ACKNOWLEDGE, A19's READ response Only
 * without payload) are streamed from the resources in PSN order; and a
 * duplicate of one is answered from its resource (9.7.5.1.3): a READ
 * re-executed inside the original's range, an atomic, ATOMIC WRITE or FLUSH
 * replayed, never executed twice. The requests themselves arrive through
 * rc_responder.c.
 */
#include <errno.h>
#include <string.h>

#include "rc_responder.h"

static uint32_t packets_for(uint32_t len, uint32_t mtu)
{
	return len == 0 ? 1 : (len + mtu - 1) / mtu;
}

/* ------------------------------------------------------------------------ */
/* Taking a resource                                                          */

/* The resource slot the next request takes is free (checked before anything
 * is executed: a request over max_dest_rd_atomic changes no memory). More
 * requests outstanding than max_dest_rd_atomic (9.5.2)? A replay of a
 * duplicate does not count: the requester has moved past it. */
static bool res_available(const struct rocemu_qp *qp)
{
	const struct rocemu_rd_res *r;

	if (qp->resp.nres == 0)
		return false;
	r = &qp->resp.res[qp->resp.res_next % qp->resp.nres];
	return !(r->valid && r->active && !r->replay);
}

/* The next resource answers the request req, which was checked (and, but for
 * a READ, executed): the expected PSN moves past it, and its response is the
 * acknowledgement. NULL when no resource is free. */
static struct rocemu_rd_res *res_take(struct rocemu_qp *qp, const struct rocemu_rd_req *req)
{
	struct rocemu_rd_res *r;

	if (!res_available(qp))
		return NULL;
	r = &qp->resp.res[qp->resp.res_next++ % qp->resp.nres];
	memset(r, 0, sizeof(*r));
	r->valid = true;
	r->active = true;
	r->cur = *req;
	r->orig = *req;
	qp->resp.msn++;
	r->msn = qp->resp.msn;
	qp->resp.epsn = roce_psn_add(qp->resp.epsn, req->npkts);
	qp->resp.res_active = true;
	qp->resp.ack_pending = false;
	return r;
}

/* ------------------------------------------------------------------------ */
/* RC: READ and atomics                                                       */

enum resp_result rc_resp_read(struct rocemu_qp *qp, const struct roce_pkt *pkt)
{
	struct rocemu_engine *e = qp->engine;
	struct rocemu_rd_req req = {
	    .psn = pkt->psn,
	    .npkts = packets_for(pkt->reth.dma_len, qp->mtu),
	    .va = pkt->reth.va,
	    .rkey = pkt->reth.rkey,
	    .length = pkt->reth.dma_len,
	};
	struct rocemu_rd_res *r;
	uint8_t *ptr;

	if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_READ))
		return RESP_ACCESS;
	if (pkt->reth.dma_len > e->caps.max_msg_sz)
		return RESP_INV_REQ;
	if (pkt->reth.dma_len &&
	    rocemu_mem_translate(e->mem, qp->pd, qp->qpn, pkt->reth.rkey, true, pkt->reth.va,
				 pkt->reth.dma_len, ROCEMU_RIGHT_REMOTE_READ,
				 &ptr) != ROCEMU_MEM_OK)
		return RESP_ACCESS;
	r = res_take(qp, &req);
	if (!r)
		return RESP_INV_REQ;
	r->pd = qp->pd;
	return RESP_OK;
}

static int send_atomic_ack(struct rocemu_qp *qp, const struct rocemu_rd_res *r)
{
	int rc = rc_resp_send_aeth(qp, ROCE_OP_ATOMIC_ACK, r->cur.psn, rc_resp_ack_syndrome(),
				   r->atomic_orig, r->msn);

	if (rc == 0)
		ENGINE_COUNT(qp->engine, tx_atomic_ack);
	return rc;
}

enum resp_result rc_resp_atomic(struct rocemu_qp *qp, const struct roce_pkt *pkt)
{
	struct rocemu_engine *e = qp->engine;
	struct rocemu_rd_req req = {.psn = pkt->psn,
				    .npkts = 1,
				    .va = pkt->atomic.va,
				    .rkey = pkt->atomic.rkey,
				    .length = 8};
	struct rocemu_rd_res *r;
	enum rocemu_mem_err err;
	uint64_t orig = 0;
	bool cas = (pkt->opcode & 0x1F) == ROCE_OP_CMP_SWAP;

	if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC))
		return RESP_ACCESS;
	if (pkt->atomic.va & 7)
		return RESP_INV_REQ; /* C9-40: atomics must be 8-byte aligned */
	if (!res_available(qp))
		return RESP_INV_REQ;
	err = rocemu_mem_atomic(e->mem, qp->pd, qp->qpn, pkt->atomic.rkey, pkt->atomic.va, cas,
				pkt->atomic.compare, pkt->atomic.swap_add, &orig);
	if (err == ROCEMU_MEM_ALIGN)
		return RESP_INV_REQ;
	if (err != ROCEMU_MEM_OK)
		return RESP_ACCESS;
	/* The ATOMIC ACKNOWLEDGE leaves from rocemu_resp_run, after the responses
	 * of earlier READs still streaming (PSN order). */
	r = res_take(qp, &req);
	r->is_atomic = true;
	r->atomic_orig = orig;
	return RESP_OK;
}

/* ------------------------------------------------------------------------ */
/* RC: ATOMIC WRITE and FLUSH (IBA annex A19, memory placement extensions)   */

/* Executed: keep it as a resource answered by an RDMA READ response Only
 * without payload (A19), in PSN order with the other responses, replayed
 * (never executed again) for a duplicate. */
static enum resp_result placement_done(struct rocemu_qp *qp, const struct roce_pkt *pkt)
{
	struct rocemu_rd_req req = {
	    .psn = pkt->psn, .npkts = 1, .va = pkt->reth.va, .rkey = pkt->reth.rkey};

	res_take(qp, &req)->no_data = true;
	return RESP_OK;
}

/*
 * ATOMIC WRITE: 8 bytes written as one store. A19 asks for the REMOTE_WRITE
 * right (QP and region), a DMA length of exactly 8 with 8 bytes of payload,
 * and a naturally aligned target (else invalid request, as for atomics,
 * C9-40); it takes a responder resource like an atomic.
 */
enum resp_result rc_resp_atomic_write(struct rocemu_qp *qp, const struct roce_pkt *pkt,
				      const uint8_t *payload)
{
	struct rocemu_engine *e = qp->engine;
	enum rocemu_mem_err err;

	if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE))
		return RESP_ACCESS;
	if (pkt->reth.dma_len != 8 || pkt->payload_len != 8 || (pkt->reth.va & 7))
		return RESP_INV_REQ;
	if (!res_available(qp))
		return RESP_INV_REQ;
	err =
	    rocemu_mem_atomic_write(e->mem, qp->pd, qp->qpn, pkt->reth.rkey, pkt->reth.va, payload);
	if (err == ROCEMU_MEM_ALIGN)
		return RESP_INV_REQ;
	if (err != ROCEMU_MEM_OK)
		return RESP_ACCESS;
	ENGINE_ADD(e, copy_rx_bytes, 8);
	return placement_done(qp, pkt);
}

/*
 * FLUSH: the placement type is global visibility and/or persistence (other
 * bits or none: invalid request), the selectivity the RETH range or the
 * whole region of its R_Key. The QP needs the FLUSH_GLOBAL/FLUSH_PERSISTENT
 * access bits the placement asks for, the region too (remote access error
 * otherwise). Requests before it were placed already (the responder works
 * in PSN order), so the flush covers them.
 */
enum resp_result rc_resp_flush(struct rocemu_qp *qp, const struct roce_pkt *pkt)
{
	struct rocemu_engine *e = qp->engine;
	unsigned plt = ROCE_FETH_PLT(pkt->feth), sel = ROCE_FETH_SEL(pkt->feth), need;

	if (plt == 0 || (plt & ~(ROCE_FETH_PLT_GLOBAL | ROCE_FETH_PLT_PERSISTENT)) ||
	    sel > ROCE_FETH_SEL_REGION)
		return RESP_INV_REQ;
	need = ((plt & ROCE_FETH_PLT_GLOBAL) ? ROCEMU_ACCESS_FLUSH_GLOBAL : 0) |
	       ((plt & ROCE_FETH_PLT_PERSISTENT) ? ROCEMU_ACCESS_FLUSH_PERSISTENT : 0);
	if ((qp->attr.qp_access_flags & need) != need)
		return RESP_ACCESS;
	if (!res_available(qp))
		return RESP_INV_REQ;
	if (rocemu_mem_flush(e->mem, qp->pd, qp->qpn, pkt->reth.rkey, sel == ROCE_FETH_SEL_REGION,
			     pkt->reth.va, pkt->reth.dma_len, plt) != ROCEMU_MEM_OK)
		return RESP_ACCESS;
	return placement_done(qp, pkt);
}

/** Send the READ responses and ATOMIC ACKs of the active resources, oldest first (PSN order). */
unsigned rocemu_resp_run(struct rocemu_qp *qp, unsigned budget)
{
	struct rocemu_engine *e = qp->engine;
	unsigned sent = 0;
	bool unreachable;

	if (!qp->resp.res_active || qp->state == IBV_QPS_ERR || qp->state == IBV_QPS_RESET) {
		qp->resp.res_active = false;
		return 0;
	}
	qp->resp.res_active = false;
	for (uint32_t k = 0; k < qp->resp.nres; k++) {
		uint32_t slot = (qp->resp.res_next + k) % qp->resp.nres;
		struct rocemu_rd_res *r = &qp->resp.res[slot];

		if (!r->valid || !r->active)
			continue;
		if (r->is_atomic) {
			int rc = sent >= budget ? -EAGAIN : send_atomic_ack(qp, r);

			if (rc == -EHOSTUNREACH) {
				/* replayed when the requester asks again */
				r->active = false;
				ENGINE_COUNT(e, drop_resp_unreachable);
				continue;
			}
			if (rc < 0)
				goto blocked;
			sent++;
			r->active = false;
			continue;
		}
		unreachable = false;
		while (r->sent < r->cur.npkts && sent < budget) {
			struct roce_pkt pkt = {0};
			uint32_t i = r->sent, n = r->cur.npkts;
			uint64_t off = (uint64_t)i * qp->mtu;
			uint32_t plen = r->cur.length - off < qp->mtu
					    ? (uint32_t)(r->cur.length - off)
					    : qp->mtu;
			uint8_t op, *payload;
			struct rte_mbuf *m;
			uint32_t crc;
			int rc = rocemu_engine_fill_path(e, &qp->path, &pkt);

			if (rc == -EHOSTUNREACH) {
				/* re-executed when the requester asks again (a duplicate READ) */
				ENGINE_COUNT(e, drop_resp_unreachable);
				unreachable = true;
				break;
			}
			if (rc < 0)
				goto blocked;
			op = n == 1	  ? ROCE_OP_READ_RESP_ONLY
			     : i == 0	  ? ROCE_OP_READ_RESP_FIRST
			     : i + 1 == n ? ROCE_OP_READ_RESP_LAST
					  : ROCE_OP_READ_RESP_MIDDLE;
			pkt.opcode = op | rc_resp_transport(qp);
			pkt.op = roce_opcode_info(pkt.opcode);
			pkt.pkey = ROCE_DEFAULT_PKEY;
			pkt.dqpn = qp->attr.dest_qp_num;
			pkt.psn = roce_psn_add(r->cur.psn, i);
			pkt.aeth.syndrome = rc_resp_ack_syndrome();
			pkt.aeth.msn = r->msn & ROCE_PSN_MASK;
			pkt.payload_len = plen;
			/* payload copied and CRC'd in one pass (see send_data_packet) */
			m = rocemu_engine_pkt_alloc(e, &pkt, &payload, &crc);
			if (!m)
				goto blocked;
			if (plen && rocemu_mem_remote_read_crc(e->mem, r->pd, qp->qpn, r->cur.rkey,
							       r->cur.va + off, payload, plen,
							       &crc) != ROCEMU_MEM_OK) {
				/* The region went away after the request was accepted. */
				rte_pktmbuf_free(m);
				r->active = false;
				rc_resp_send_nak(qp, ROCE_NAK_REMOTE_ACCESS_ERR, pkt.psn);
				rocemu_qp_to_error(qp, false);
				rocemu_engine_raise(e, IBV_EVENT_QP_ACCESS_ERR, qp->user_ctx);
				return sent;
			}
			ENGINE_ADD(e, copy_tx_bytes, plen);
			if (rocemu_engine_pkt_send_crc(e, m, &pkt, crc) < 0)
				goto blocked; /* tx queue full: this response again next pass */
			ENGINE_COUNT(e, tx_read_resp);
			r->sent++;
			sent++;
		}
		if (r->sent < r->cur.npkts && !unreachable)
			goto blocked;
		r->active = false;
	}
	return sent;
blocked:
	qp->resp.res_active = true;
	return sent;
}

/**
 * A duplicate READ is re-executed only as the original request or a part of
 * it: its PSN at offset d inside the original's PSNs, its R_Key the
 * original's, its address the original's + d MTUs (a retried READ restarts
 * at its first missing response), its range ending inside the original's.
 * Anything else is not the request this resource answered: a "duplicate"
 * growing past the original would answer PSNs of later requests (or the
 * expected PSN, which a new READ will use), and one naming another R_Key or
 * address would read memory under an old PSN that was never requested.
 */
static bool dup_read_inside(const struct rocemu_qp *qp, const struct rocemu_rd_res *r,
			    const struct roce_pkt *pkt, uint32_t d)
{
	uint64_t off = (uint64_t)d * qp->mtu;

	if (pkt->reth.rkey != r->orig.rkey || off > r->orig.length)
		return false;
	if (pkt->reth.va != r->orig.va + off)
		return false;
	return pkt->reth.dma_len <= r->orig.length - off;
}

void rc_resp_duplicate(struct rocemu_qp *qp, const struct roce_pkt *pkt)
{
	struct rocemu_engine *e = qp->engine;
	uint32_t f = pkt->op->flags;

	for (uint32_t k = 0; k < qp->resp.nres; k++) {
		struct rocemu_rd_res *r = &qp->resp.res[k];
		int32_t d = roce_psn_diff(pkt->psn, r->orig.psn);

		if (!r->valid || d < 0 || d >= (int32_t)r->orig.npkts)
			continue;
		if ((f & (ROCE_OPF_ATOMIC_WRITE | ROCE_OPF_FLUSH)) && r->no_data && d == 0) {
			/* A19: a duplicate ATOMIC WRITE or FLUSH is not executed again;
			 * its response is sent again, in turn. */
			r->active = true;
			r->replay = true;
			r->sent = 0;
			qp->resp.res_active = true;
			return;
		}
		if ((f & ROCE_OPF_ATOMIC) && r->is_atomic && d == 0) {
			/* 9.7.5.1.3: never execute an atomic twice; replay its
			 * result (in turn with the other responses being streamed). */
			r->active = true;
			r->replay = true;
			qp->resp.res_active = true;
			return;
		}
		if ((f & ROCE_OPF_READ) && !r->is_atomic && !r->no_data) {
			uint8_t *ptr;

			if (!dup_read_inside(qp, r, pkt, (uint32_t)d)) {
				ENGINE_COUNT(e, drop_dup_read_mismatch);
				return;
			}
			/* Re-execute from the requested PSN: the memory as it is now. */
			if (pkt->reth.dma_len &&
			    rocemu_mem_translate(e->mem, qp->pd, qp->qpn, pkt->reth.rkey, true,
						 pkt->reth.va, pkt->reth.dma_len,
						 ROCEMU_RIGHT_REMOTE_READ, &ptr) != ROCEMU_MEM_OK) {
				ENGINE_COUNT(e, drop_dup_unknown);
				return;
			}
			r->cur = (struct rocemu_rd_req){
			    .psn = pkt->psn,
			    .npkts = packets_for(pkt->reth.dma_len, qp->mtu),
			    .va = pkt->reth.va,
			    .rkey = pkt->reth.rkey,
			    .length = pkt->reth.dma_len,
			};
			r->pd = qp->pd;
			r->sent = 0;
			r->active = true;
			r->replay = true;
			qp->resp.res_active = true;
			return;
		}
	}
	ENGINE_COUNT(e, drop_dup_unknown);
}
