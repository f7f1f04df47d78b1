/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unreliable datagram: one SEND ONLY packet per message (<= path MTU) with a
 * DETH; Q_Key checks including the controlled Q_Key rule (10.2.4: a WR
 * Q_Key with the high bit set means "use the QP's own Q_Key"); and on
 * receive the 40-byte GRH area that a RoCEv2 NIC writes at the start of
 * every receive buffer: for IPv4 the 20-byte IPv4 header in its last 20
 * bytes (first 20 zero), for IPv6 the whole IPv6 header.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "rocemu_transport.h"

#define UD_GRH_LEN 40

/*
 * The RoCE packet type of a UD receive, reported where mlx5 reports it: in
 * wc.sl (RoCE has no service level on the wire). Bit 3: the frame had a UDP
 * header (RoCEv2); bits 2:0: the L3 header, 1 IPv6, 2 IPv4. A17.4.5.1 asks
 * the completion to say whether a UD frame was IPv4 or IPv6, and programs
 * need it to read the GRH area (UCX's ud_verbs finds the destination GID
 * there with it and drops the datagram if it reads the wrong bytes).
 */
#define UD_WC_SL_ROCE_V2 0x8
#define UD_WC_SL_IPV6	 0x1
#define UD_WC_SL_IPV4	 0x2

/* The GSI QP's Q_Key is the well-known 0x80010000 whatever a modify set
 * (C13-7: GMPs carry it; the GSI accepts only it). */
static uint32_t ud_own_qkey(const struct rocemu_qp *qp)
{
	return qp->qpn == 1 ? ROCEMU_GSI_QKEY : qp->attr.qkey;
}

static void ud_path(const struct rocemu_qp *qp, const struct rocemu_ah *ah, struct rocemu_path *p)
{
	uint32_t h;

	memset(p, 0, sizeof(*p));
	p->valid = true;
	p->sgid_index = ah->sgid_index;
	rocemu_port_gid(qp->engine->port, ah->sgid_index, p->sgid);
	memcpy(p->dgid, ah->dgid, 16);
	p->v6 = !roce_gid_is_v4mapped(ah->dgid);
	p->tclass = ah->tclass;
	p->sl = ah->sl;
	p->hop_limit = ah->hop_limit;
	p->flow_label = ah->flow_label;
	h = ah->flow_label ? ah->flow_label ^ (ah->flow_label >> 14) : qp->qpn * 0x9E3779B1u;
	p->udp_sport = (uint16_t)(ROCE_UDP_SPORT_MIN | (h & 0x3FFF));
}

/** Build and send one datagram. 0, -EAGAIN (try later) or a WC error status (> 0). */
static int ud_send_one(struct rocemu_qp *qp, struct rocemu_send_wqe *w)
{
	struct rocemu_engine *e = qp->engine;
	struct rocemu_path path;
	struct roce_pkt pkt = {0};
	struct rte_mbuf *m;
	uint8_t *payload, op;
	uint32_t crc;
	int rc;

	if (w->length > qp->mtu)
		return IBV_WC_LOC_LEN_ERR;
	ud_path(qp, w->wr.ah, &path);
	rc = rocemu_engine_fill_path(e, &path, &pkt);
	if (rc == -EAGAIN)
		return rc;
	if (rc == -EHOSTUNREACH) {
		/* As from a NIC, whose AH holds a MAC already: the datagram is
		 * sent, nobody receives it. UCX's UD transport took the error
		 * completion this gave before for fatal ("transport retry
		 * counter exceeded") when a busy peer answered its ARP late;
		 * losses are its own reliability layer's to recover. */
		ENGINE_COUNT(e, drop_ud_unreachable);
		qp->req.psn = roce_psn_add(qp->req.psn, 1);
		return 0;
	}
	if (rc < 0)
		return IBV_WC_RETRY_EXC_ERR;
	op = ROCE_TRANSPORT_UD |
	     (w->wr.opcode == IBV_WR_SEND_WITH_IMM ? ROCE_OP_SEND_ONLY_IMM : ROCE_OP_SEND_ONLY);
	pkt.opcode = op;
	pkt.op = roce_opcode_info(op);
	pkt.pkey = ROCE_DEFAULT_PKEY;
	pkt.dqpn = w->wr.remote_qpn;
	pkt.psn = qp->req.psn;
	pkt.se = (w->wr.send_flags & IBV_SEND_SOLICITED) != 0;
	pkt.deth.qkey = (w->wr.remote_qkey & 0x80000000u) ? ud_own_qkey(qp) : w->wr.remote_qkey;
	pkt.deth.src_qp = qp->qpn;
	if (pkt.op->hdrs & ROCE_HDR_IMMDT)
		pkt.imm = be32toh(w->wr.imm_data);
	pkt.payload_len = w->length;
	/* payload copied and CRC'd in one pass (see send_data_packet) */
	m = rocemu_engine_pkt_alloc(e, &pkt, &payload, &crc);
	if (!m)
		return -EAGAIN;
	if (w->is_inline) {
		crc = roce_crc32_copy(crc, payload, w->inline_data, w->length);
	} else if (w->length) {
		enum rocemu_mem_err err = rocemu_mem_gather_crc(
		    e->mem, qp->pd, w->sge, w->wr.num_sge, 0, payload, w->length, &crc);
		if (err != ROCEMU_MEM_OK) {
			rte_pktmbuf_free(m);
			return rocemu_comp_local_status(err);
		}
	}
	ENGINE_ADD(e, copy_tx_bytes, w->length);
	if (rocemu_engine_pkt_send_crc(e, m, &pkt, crc) < 0)
		return -EAGAIN; /* tx queue full: the datagram goes again next pass */
	qp->req.psn = roce_psn_add(qp->req.psn, 1);
	return 0;
}

unsigned rocemu_ud_send(struct rocemu_qp *qp, unsigned budget)
{
	unsigned sent = 0;

	while (sent < budget && qp->state == IBV_QPS_RTS && qp->sq_cur != qp->sq_tail) {
		struct rocemu_send_wqe *w = sq_at(qp, qp->sq_cur);
		int rc;

		if (qp->rate.kbps &&
		    !rocemu_rate_take(qp,
				      w->length + 8 /* DETH */ +
					  (w->wr.opcode == IBV_WR_SEND_WITH_IMM ? 4 : 0),
				      rocemu_port_pass_now(qp->engine->port)))
			break;
		rc = ud_send_one(qp, w);

		if (rc == -EAGAIN)
			break;
		w->state = WQE_DONE;
		w->status = rc == 0 ? IBV_WC_SUCCESS : (enum ibv_wc_status)rc;
		qp->sq_cur++;
		if (rc == 0) {
			sent++;
			continue;
		}
		/* A local error on the send queue: the WQE fails and the QP goes to SQE
		 * (10.3.1), except an unreachable destination, which concerns this
		 * datagram only. */
		if (rc != IBV_WC_RETRY_EXC_ERR) {
			rocemu_comp_retire(qp);
			rocemu_qp_to_sqe(qp);
			return sent;
		}
	}
	rocemu_comp_retire(qp);
	return sent;
}

void rocemu_ud_rx(struct rocemu_qp *qp, struct rte_mbuf *m, const struct roce_pkt *pkt)
{
	struct rocemu_engine *e = qp->engine;
	const uint8_t *frame = rte_pktmbuf_mtod(m, const uint8_t *);
	struct rocemu_recv_wqe wqe;
	struct rocemu_wc wc = {0};
	uint8_t grh[UD_GRH_LEN] = {0};
	enum rocemu_mem_err err;

	if (qp->state != IBV_QPS_RTR && qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD &&
	    qp->state != IBV_QPS_SQE) {
		ENGINE_COUNT(e, drop_qp_state);
		return;
	}
	if (!(pkt->op->hdrs & ROCE_HDR_DETH) || !(pkt->op->flags & ROCE_OPF_SEND)) {
		ENGINE_COUNT(e, drop_ud_bad_opcode);
		return;
	}
	/* C10-15: the datagram's Q_Key must equal the QP's. */
	if (pkt->deth.qkey != ud_own_qkey(qp)) {
		ENGINE_COUNT(e, drop_ud_qkey);
		return;
	}
	if (pkt->payload_len > qp->mtu) {
		ENGINE_COUNT(e, drop_bad_length);
		return;
	}
	if (rocemu_qp_take_recv(qp, &wqe) < 0) {
		ENGINE_COUNT(e, drop_ud_no_recv);
		return;
	}
	if (pkt->path.ip_version == 4)
		memcpy(grh + 20, frame + pkt->l3_off, 20);
	else
		memcpy(grh, frame + pkt->l3_off, 40);

	wc.wr_id = wqe.wr_id;
	wc.opcode = IBV_WC_RECV;
	wc.qp_num = qp->qpn;
	wc.src_qp = pkt->deth.src_qp;
	wc.sl = UD_WC_SL_ROCE_V2 | (pkt->path.ip_version == 4 ? UD_WC_SL_IPV4 : UD_WC_SL_IPV6);
	/* LID-only extension: a sender in our /16 has a LID (ibv_init_ah_from_wc). */
	wc.slid = rocemu_lid_of_gid(e->port, pkt->path.src_gid);
	wc.timestamp_ns = rocemu_port_pass_now(e->port);
	if ((uint64_t)UD_GRH_LEN + pkt->payload_len > wqe.total_len) {
		wc.status = IBV_WC_LOC_LEN_ERR;
		rocemu_qp_complete(qp, false, &wc, false);
		return;
	}
	err = rocemu_mem_scatter(e->mem, qp->pd, wqe.sge, wqe.num_sge, 0, grh, UD_GRH_LEN);
	if (err == ROCEMU_MEM_OK && pkt->payload_len)
		err = rocemu_mem_scatter(e->mem, qp->pd, wqe.sge, wqe.num_sge, UD_GRH_LEN,
					 frame + pkt->payload_off, pkt->payload_len);
	if (err == ROCEMU_MEM_OK)
		ENGINE_ADD(e, copy_rx_bytes, UD_GRH_LEN + pkt->payload_len);
	if (err != ROCEMU_MEM_OK) {
		wc.status = IBV_WC_LOC_PROT_ERR;
		rocemu_qp_complete(qp, false, &wc, false);
		return;
	}
	wc.status = IBV_WC_SUCCESS;
	wc.byte_len = UD_GRH_LEN + pkt->payload_len;
	wc.wc_flags = IBV_WC_GRH;
	if (pkt->op->hdrs & ROCE_HDR_IMMDT) {
		wc.imm_data = htobe32(pkt->imm);
		wc.wc_flags |= IBV_WC_WITH_IMM;
	}
	rocemu_qp_complete(qp, false, &wc, pkt->se);
}
