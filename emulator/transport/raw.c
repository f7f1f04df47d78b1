/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Raw packet QPs (IBV_QPT_RAW_PACKET) and their steering rules
 * (ibv_create_flow(3)): rocemu owns its port, so a verbs program can send
 * whole Ethernet frames out of it and receive the frames its rules select,
 * the way DPDK's mlx5 PMD uses a NIC.
 *
 * Send: each SEND WR is one frame, its gather list the frame from the
 * destination MAC on (14 bytes at least, at most the port's MTU plus the
 * Ethernet and 802.1Q headers; else IBV_WC_LOC_LEN_ERR and the QP to SQE).
 * The frame goes to the port as it is (captured like any other frame).
 *
 * Receive: the port shows the upper layer every frame it receives, before
 * its own stack (ARP/ND, ICMP, RoCE) looks at it (rocemu_raw_rx):
 *  - NORMAL rules: of those that match, the one with the lowest priority
 *    value (the first created among equals) takes the frame: it goes to its
 *    QP (or is discarded, for a drop rule) and the port's stack never sees
 *    it, as a NIC's steering rule takes a flow away from the kernel;
 *  - SNIFFER rules get a copy of every frame received;
 *  - ALL_DEFAULT rules a copy of every frame no NORMAL rule took, and
 *    MC_DEFAULT ones of every multicast or broadcast frame no NORMAL rule
 *    took (the port's stack still gets those).
 * A frame lands in a receive WQE whole (from the destination MAC) and
 * completes IBV_WC_RECV with byte_len = its length and the rule's tag when
 * it has one. No receive WQE, or a QP not yet in RTR: dropped and counted.
 * Everything runs under the engine lock.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include <rte_ether.h>

#include "rocemu_transport.h"

struct rocemu_flow {
	struct rocemu_flow *next;
	struct rocemu_qp *qp;
	struct rocemu_flow_attr attr;
	uint64_t seq; /**< creation order: ties between priorities go to the older */
};

#define ETH_HDR	 14
#define VLAN_HDR 4

/* ------------------------------------------------------------------------ */
/* Matching                                                                   */

/** The fields of a received frame a rule can look at. */
struct frame_view {
	const uint8_t *dst_mac, *src_mac;
	uint16_t ether_type; /**< after an 802.1Q tag */
	uint16_t vlan_tag;   /**< TCI, 0 untagged */
	uint8_t ip_version;  /**< 0 when not IPv4/IPv6 (or truncated) */
	uint8_t src_ip[16], dst_ip[16];
	uint8_t ip_proto;
	bool has_ports;
	uint16_t src_port, dst_port;
};

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void view_frame(const uint8_t *f, uint32_t len, struct frame_view *v)
{
	uint32_t off = ETH_HDR, l4 = 0;

	memset(v, 0, sizeof(*v));
	v->dst_mac = f;
	v->src_mac = f + 6;
	v->ether_type = get16(f + 12);
	if (v->ether_type == RTE_ETHER_TYPE_VLAN && len >= ETH_HDR + VLAN_HDR) {
		v->vlan_tag = get16(f + 14);
		v->ether_type = get16(f + 16);
		off += VLAN_HDR;
	}
	if (v->ether_type == RTE_ETHER_TYPE_IPV4 && len >= off + 20 && (f[off] >> 4) == 4) {
		v->ip_version = 4;
		memcpy(v->src_ip, f + off + 12, 4);
		memcpy(v->dst_ip, f + off + 16, 4);
		v->ip_proto = f[off + 9];
		if (!(get16(f + off + 6) & 0x1FFF)) /* first fragment: it has the ports */
			l4 = off + (uint32_t)(f[off] & 0x0F) * 4;
	} else if (v->ether_type == RTE_ETHER_TYPE_IPV6 && len >= off + 40 && (f[off] >> 4) == 6) {
		v->ip_version = 6;
		memcpy(v->src_ip, f + off + 8, 16);
		memcpy(v->dst_ip, f + off + 24, 16);
		v->ip_proto = f[off + 6];
		l4 = off + 40;
	}
	if (l4 && (v->ip_proto == IPPROTO_TCP || v->ip_proto == IPPROTO_UDP) && len >= l4 + 4) {
		v->has_ports = true;
		v->src_port = get16(f + l4);
		v->dst_port = get16(f + l4 + 2);
	}
}

static bool bytes_match(const uint8_t *got, const uint8_t *want, const uint8_t *mask, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((got[i] & mask[i]) != (want[i] & mask[i]))
			return false;
	return true;
}

static bool field_match(uint16_t got, uint16_t want, uint16_t mask)
{
	return (got & mask) == (want & mask);
}

static bool rule_matches(const struct rocemu_flow_match *m, const struct frame_view *v)
{
	size_t alen;

	if (!bytes_match(v->dst_mac, m->dst_mac, m->dst_mac_mask, 6) ||
	    !bytes_match(v->src_mac, m->src_mac, m->src_mac_mask, 6) ||
	    !field_match(v->ether_type, m->ether_type, m->ether_type_mask) ||
	    !field_match(v->vlan_tag, m->vlan_tag, m->vlan_tag_mask))
		return false;
	if (m->ip_version) {
		if (v->ip_version != m->ip_version)
			return false;
		alen = m->ip_version == 4 ? 4 : 16;
		if (!bytes_match(v->src_ip, m->src_ip, m->src_ip_mask, alen) ||
		    !bytes_match(v->dst_ip, m->dst_ip, m->dst_ip_mask, alen) ||
		    (v->ip_proto & m->ip_proto_mask) != (m->ip_proto & m->ip_proto_mask))
			return false;
	}
	if (m->l4) {
		if (!v->has_ports || v->ip_proto != m->l4)
			return false;
		if (!field_match(v->src_port, m->src_port, m->src_port_mask) ||
		    !field_match(v->dst_port, m->dst_port, m->dst_port_mask))
			return false;
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* Delivery                                                                   */

static void deliver(struct rocemu_qp *qp, const struct rocemu_flow *f, const uint8_t *frame,
		    uint32_t len)
{
	struct rocemu_engine *e = qp->engine;
	struct rocemu_recv_wqe wqe;
	struct rocemu_wc wc = {0};
	enum rocemu_mem_err err;

	if (qp->state != IBV_QPS_RTR && qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD &&
	    qp->state != IBV_QPS_SQE) {
		ENGINE_COUNT(e, drop_raw_qp_state);
		return;
	}
	if (rocemu_qp_take_recv(qp, &wqe) < 0) {
		ENGINE_COUNT(e, drop_raw_no_recv);
		return;
	}
	wc.wr_id = wqe.wr_id;
	wc.opcode = IBV_WC_RECV;
	wc.qp_num = qp->qpn;
	wc.timestamp_ns = rocemu_port_pass_now(e->port);
	if (f->attr.has_tag)
		wc.flow_tag = f->attr.tag;
	if (len > wqe.total_len) {
		wc.status = IBV_WC_LOC_LEN_ERR;
		rocemu_qp_complete(qp, false, &wc, false);
		return;
	}
	err = rocemu_mem_scatter(e->mem, qp->pd, wqe.sge, wqe.num_sge, 0, frame, len);
	if (err != ROCEMU_MEM_OK) {
		wc.status = IBV_WC_LOC_PROT_ERR;
		rocemu_qp_complete(qp, false, &wc, false);
		return;
	}
	ENGINE_ADD(e, copy_rx_bytes, len);
	ENGINE_COUNT(e, rx_raw_frames);
	wc.status = IBV_WC_SUCCESS;
	wc.byte_len = len;
	rocemu_qp_complete(qp, false, &wc, false);
}

static void deliver_copy(const struct rocemu_flow *f, const uint8_t *frame, uint32_t len)
{
	if (f->attr.drop)
		return;
	deliver(f->qp, f, frame, len);
}

bool rocemu_raw_rx(void *ctx, struct rte_mbuf *m)
{
	struct rocemu_engine *e = ctx;
	const struct rocemu_flow *win = NULL, *f;
	const uint8_t *frame;
	struct frame_view v;
	uint32_t len;

	if (e->n_flows == 0)
		return false;
	frame = rte_pktmbuf_mtod(m, const uint8_t *);
	len = m->data_len;
	if (len < ETH_HDR)
		return false;
	view_frame(frame, len, &v);
	for (f = e->flows; f; f = f->next)
		if (f->attr.type == ROCEMU_FLOW_NORMAL && rule_matches(&f->attr.match, &v) &&
		    (!win || f->attr.priority < win->attr.priority ||
		     (f->attr.priority == win->attr.priority && f->seq < win->seq)))
			win = f;
	for (f = e->flows; f; f = f->next) {
		bool copy = f->attr.type == ROCEMU_FLOW_SNIFFER;

		if (!win && f->attr.type == ROCEMU_FLOW_ALL_DEFAULT)
			copy = true;
		if (!win && f->attr.type == ROCEMU_FLOW_MC_DEFAULT && (v.dst_mac[0] & 1))
			copy = true;
		if (copy && rule_matches(&f->attr.match, &v))
			deliver_copy(f, frame, len);
	}
	if (!win)
		return false;
	ENGINE_COUNT(e, rx_raw_steered);
	if (win->attr.drop)
		ENGINE_COUNT(e, drop_raw_rule);
	else
		deliver(win->qp, win, frame, len);
	return true;
}

/* ------------------------------------------------------------------------ */
/* Send                                                                       */

/** One frame out. 0, -EAGAIN (no mbuf or tx room: try later) or a WC error status (> 0). */
static int raw_send_one(struct rocemu_qp *qp, struct rocemu_send_wqe *w)
{
	struct rocemu_engine *e = qp->engine;
	uint32_t max = (uint32_t)rocemu_port_eth_mtu(e->port) + ETH_HDR + VLAN_HDR;
	enum rocemu_mem_err err;
	struct rte_mbuf *m;
	uint8_t *p;

	if (w->length < ETH_HDR || w->length > max)
		return IBV_WC_LOC_LEN_ERR;
	m = rocemu_port_alloc_mbuf(e->port);
	if (!m) {
		ENGINE_COUNT(e, tx_no_mbuf);
		return -EAGAIN;
	}
	p = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)w->length);
	if (!p) {
		rte_pktmbuf_free(m);
		return IBV_WC_LOC_LEN_ERR; /* longer than an mbuf holds */
	}
	if (w->is_inline) {
		memcpy(p, w->inline_data, w->length);
	} else {
		err = rocemu_mem_gather(e->mem, qp->pd, w->sge, w->wr.num_sge, 0, p, w->length);
		if (err != ROCEMU_MEM_OK) {
			rte_pktmbuf_free(m);
			return rocemu_comp_local_status(err);
		}
	}
	ENGINE_ADD(e, copy_tx_bytes, w->length);
	if (rocemu_port_tx(e->port, m) < 0) {
		ENGINE_COUNT(e, tx_queue_full);
		return -EAGAIN;
	}
	ENGINE_COUNT(e, tx_raw_frames);
	return 0;
}

unsigned rocemu_raw_send(struct rocemu_qp *qp, unsigned budget)
{
	unsigned sent = 0;

	while (sent < budget && qp->state == IBV_QPS_RTS && qp->sq_cur != qp->sq_tail) {
		struct rocemu_send_wqe *w = sq_at(qp, qp->sq_cur);
		int rc;

		if (rocemu_port_tx_room(qp->engine->port) == 0)
			break;
		if (qp->rate.kbps &&
		    !rocemu_rate_take(qp, w->length, rocemu_port_pass_now(qp->engine->port)))
			break;
		rc = raw_send_one(qp, w);
		if (rc == -EAGAIN)
			break;
		w->state = WQE_DONE;
		w->status = rc == 0 ? IBV_WC_SUCCESS : (enum ibv_wc_status)rc;
		qp->sq_cur++;
		if (rc != 0) {
			/* a local error stops the send queue (10.3.1), as for UD */
			rocemu_comp_retire(qp);
			rocemu_qp_to_sqe(qp);
			return sent;
		}
		sent++;
	}
	rocemu_comp_retire(qp);
	return sent;
}

/* ------------------------------------------------------------------------ */
/* Rules                                                                      */

int rocemu_flow_create(struct rocemu_qp *qp, const struct rocemu_flow_attr *attr,
		       struct rocemu_flow **out)
{
	struct rocemu_engine *e = qp->engine;
	static uint64_t seq;
	struct rocemu_flow *f;

	if (!attr || !out || qp->type != IBV_QPT_RAW_PACKET || attr->type > ROCEMU_FLOW_SNIFFER)
		return -EINVAL;
	if (attr->match.ip_version != 0 && attr->match.ip_version != 4 &&
	    attr->match.ip_version != 6)
		return -EINVAL;
	if (attr->match.l4 && attr->match.l4 != IPPROTO_TCP && attr->match.l4 != IPPROTO_UDP)
		return -EINVAL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->qp = qp;
	f->attr = *attr;
	rocemu_engine_lock(e);
	f->seq = ++seq;
	f->next = e->flows;
	e->flows = f;
	e->n_flows++;
	qp->n_flows++;
	rocemu_engine_unlock(e);
	*out = f;
	return 0;
}

static void flow_unlink(struct rocemu_engine *e, struct rocemu_flow *f)
{
	for (struct rocemu_flow **pp = &e->flows; *pp; pp = &(*pp)->next)
		if (*pp == f) {
			*pp = f->next;
			e->n_flows--;
			return;
		}
}

int rocemu_flow_destroy(struct rocemu_flow *f)
{
	struct rocemu_engine *e;

	if (!f)
		return -EINVAL;
	e = f->qp->engine;
	rocemu_engine_lock(e);
	flow_unlink(e, f);
	f->qp->n_flows--;
	rocemu_engine_unlock(e);
	free(f);
	return 0;
}

/* At engine teardown: the rules still there go with it. */
void rocemu_raw_free_all(struct rocemu_engine *e)
{
	while (e->flows) {
		struct rocemu_flow *f = e->flows;

		e->flows = f->next;
		free(f);
	}
	e->n_flows = 0;
}
