/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The engine: one emulated RoCE port with its QPN space, limits, async
 * events and counters. It plugs into the port as the upper layer: received
 * packets are dispatched by opcode class (requests to the responder,
 * responses to the completer, UD to ud.c), and each progress pass runs the
 * requesters, the READ response streams and the timers of the QPs on the
 * work list.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rocemu_random.h"
#include "rocemu_transport.h"

static const char *const ctr_names[CTR_COUNT] = {
#define ROCEMU_CTR_NAME(n) #n,
    ROCEMU_COUNTERS(ROCEMU_CTR_NAME)
#undef ROCEMU_CTR_NAME
};

/* ------------------------------------------------------------------------ */
/* Engine services (rocemu_internal.h)                                        */

struct rocemu_port *rocemu_engine_port(struct rocemu_engine *e)
{
	return e->port;
}

struct rocemu_mem_table *rocemu_engine_mem(struct rocemu_engine *e)
{
	return e->mem;
}

void rocemu_engine_raise(struct rocemu_engine *e, enum ibv_event_type type, void *obj_ctx)
{
	struct rocemu_event ev = {.type = type, .obj_ctx = obj_ctx};

	if (e->event_fn)
		e->event_fn(e->event_arg, &ev);
}

/* A send fails because its destination's MAC cannot be resolved: tell the
 * provider, which tells the user (the engine prints nothing). */
static void raise_unresolved(struct rocemu_engine *e, const uint8_t gid[16])
{
	struct rocemu_event ev = {.unresolved = gid};

	if (e->event_fn)
		e->event_fn(e->event_arg, &ev);
}

void rocemu_engine_lock(struct rocemu_engine *e)
{
	rocemu_port_lock(e->port);
}

void rocemu_engine_unlock(struct rocemu_engine *e)
{
	rocemu_port_unlock(e->port);
}

void rocemu_engine_set_event_handler(struct rocemu_engine *e, rocemu_event_fn fn, void *arg)
{
	rocemu_engine_lock(e);
	e->event_fn = fn;
	e->event_arg = arg;
	rocemu_engine_unlock(e);
}

void rocemu_engine_caps(const struct rocemu_engine *e, struct rocemu_caps *caps)
{
	*caps = e->caps;
}

unsigned rocemu_engine_progress(struct rocemu_engine *e)
{
	return rocemu_port_progress(e->port);
}

void rocemu_engine_app_blocks(struct rocemu_engine *e)
{
	rocemu_port_app_blocks(e->port);
}

#define DRAIN_IDLE_PASSES 3
#define DRAIN_MAX_NS	  50000000ull /* 50 ms */

void rocemu_engine_drain(struct rocemu_engine *e)
{
	uint64_t end = rocemu_now_ns() + DRAIN_MAX_NS;
	unsigned idle = 0;

	while (idle < DRAIN_IDLE_PASSES && rocemu_now_ns() < end) {
		unsigned work;

		rocemu_engine_lock(e);
		work = rocemu_port_progress_locked(e->port);
		rocemu_port_flush(e->port);
		rocemu_engine_unlock(e);
		idle = work ? 0 : idle + 1;
	}
}

void rocemu_engine_quiesce(struct rocemu_engine *e)
{
	rocemu_engine_lock(e);
	rocemu_engine_unlock(e);
}

const char *rocemu_engine_counter_name(unsigned i)
{
	return i < CTR_COUNT ? ctr_names[i] : NULL;
}

unsigned rocemu_engine_counters(const struct rocemu_engine *e, struct rocemu_counter *out,
				unsigned max)
{
	for (unsigned i = 0; i < CTR_COUNT && i < max; i++) {
		out[i].name = ctr_names[i];
		out[i].value = e->ctr[i];
	}
	return CTR_COUNT;
}

/* ------------------------------------------------------------------------ */
/* QPN table and work list                                                    */

/* ------------------------------------------------------------------------ */
/* SRQ numbers (ibv_get_srq_num; XRC requests name their SRQ by it)           */

int rocemu_engine_srq_register(struct rocemu_engine *e, struct rocemu_srq *srq, uint32_t *num)
{
	/* rotate, as QPNs do: a number just given back is not reused at once */
	for (uint32_t n = 0; n < ROCEMU_MAX_SRQ; n++) {
		uint32_t slot = (e->srqn_next + n) % ROCEMU_MAX_SRQ;

		if (!e->srq_table[slot]) {
			e->srq_table[slot] = srq;
			e->srqn_next = (slot + 1) % ROCEMU_MAX_SRQ;
			*num = ROCEMU_SRQN_FIRST + slot;
			return 0;
		}
	}
	return -ENOMEM;
}

void rocemu_engine_srq_unregister(struct rocemu_engine *e, uint32_t num)
{
	if (num >= ROCEMU_SRQN_FIRST && num - ROCEMU_SRQN_FIRST < ROCEMU_MAX_SRQ)
		e->srq_table[num - ROCEMU_SRQN_FIRST] = NULL;
}

struct rocemu_srq *rocemu_engine_srq_lookup(struct rocemu_engine *e, uint32_t num)
{
	if (num < ROCEMU_SRQN_FIRST || num - ROCEMU_SRQN_FIRST >= ROCEMU_MAX_SRQ)
		return NULL;
	return e->srq_table[num - ROCEMU_SRQN_FIRST];
}

struct rocemu_qp *rocemu_engine_qp_lookup(struct rocemu_engine *e, uint32_t qpn)
{
	struct rocemu_qp *qp = e->qpn_table[rocemu_qpn_slot(qpn)];

	return qp && qp->qpn == qpn ? qp : NULL;
}

unsigned rocemu_engine_queued_completions(struct rocemu_engine *e, uint32_t qpn)
{
	struct rocemu_qp *qp;
	unsigned n = 0;

	rocemu_engine_lock(e);
	qp = rocemu_engine_qp_lookup(e, qpn);
	if (qp && qp->send_cq)
		n += rocemu_cq_count_qp(qp->send_cq, qpn);
	if (qp && qp->recv_cq && qp->recv_cq != qp->send_cq)
		n += rocemu_cq_count_qp(qp->recv_cq, qpn);
	rocemu_engine_unlock(e);
	return n;
}

void rocemu_engine_schedule(struct rocemu_qp *qp)
{
	struct rocemu_engine *e = qp->engine;

	if (qp->on_work)
		return;
	qp->on_work = true;
	qp->work_next = NULL;
	if (e->work_tail)
		e->work_tail->work_next = qp;
	else
		e->work_head = qp;
	e->work_tail = qp;
}

/* ------------------------------------------------------------------------ */
/* Timer heap                                                                 */

static void heap_place(struct rocemu_engine *e, uint32_t i, struct rocemu_qp *qp)
{
	e->timer_heap[i] = qp;
	qp->timer_idx = i;
}

static void heap_up(struct rocemu_engine *e, uint32_t i)
{
	struct rocemu_qp *qp = e->timer_heap[i];

	while (i > 0) {
		uint32_t parent = (i - 1) / 2;

		if (e->timer_heap[parent]->timer_at <= qp->timer_at)
			break;
		heap_place(e, i, e->timer_heap[parent]);
		i = parent;
	}
	heap_place(e, i, qp);
}

static void heap_down(struct rocemu_engine *e, uint32_t i)
{
	struct rocemu_qp *qp = e->timer_heap[i];

	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= e->n_timers)
			break;
		if (c + 1 < e->n_timers &&
		    e->timer_heap[c + 1]->timer_at < e->timer_heap[c]->timer_at)
			c++;
		if (e->timer_heap[c]->timer_at >= qp->timer_at)
			break;
		heap_place(e, i, e->timer_heap[c]);
		i = c;
	}
	heap_place(e, i, qp);
}

static void heap_remove(struct rocemu_engine *e, struct rocemu_qp *qp)
{
	uint32_t i = qp->timer_idx;
	struct rocemu_qp *last;

	if (i == UINT32_MAX)
		return;
	qp->timer_idx = UINT32_MAX;
	last = e->timer_heap[--e->n_timers];
	if (last == qp)
		return;
	heap_place(e, i, last);
	heap_up(e, i);
	heap_down(e, last->timer_idx);
}

void rocemu_engine_timer_sync(struct rocemu_qp *qp)
{
	struct rocemu_engine *e = qp->engine;
	uint64_t d = qp->state == IBV_QPS_RESET ? UINT64_MAX : rocemu_comp_next_deadline(qp);

	if (d == UINT64_MAX) {
		heap_remove(e, qp);
		return;
	}
	if (qp->timer_idx != UINT32_MAX && qp->timer_at == d)
		return;
	qp->timer_at = d;
	if (qp->timer_idx == UINT32_MAX) {
		if (e->n_timers >= ROCEMU_QPN_TABLE)
			return; /* cannot happen: one entry per QP */
		heap_place(e, e->n_timers++, qp);
	}
	heap_up(e, qp->timer_idx);
	heap_down(e, qp->timer_idx);
}

/** Run the timers that are due: each QP whose deadline passed gets its timer work. */
static unsigned run_timers(struct rocemu_engine *e, uint64_t now)
{
	unsigned work = 0;

	while (e->n_timers && e->timer_heap[0]->timer_at <= now) {
		struct rocemu_qp *qp = e->timer_heap[0];

		heap_remove(e, qp);
		work += rocemu_rate_timer(qp, now);
		work += rocemu_comp_timers(qp, now);
		rocemu_engine_timer_sync(qp);
		rocemu_engine_schedule(qp);
	}
	return work;
}

void rocemu_engine_forget(struct rocemu_qp *qp)
{
	struct rocemu_engine *e = qp->engine;
	struct rocemu_qp **pp = &e->work_head, *prev = NULL;

	while (*pp) {
		if (*pp == qp) {
			*pp = qp->work_next;
			if (e->work_tail == qp)
				e->work_tail = prev;
			break;
		}
		prev = *pp;
		pp = &(*pp)->work_next;
	}
	qp->on_work = false;
	qp->work_next = NULL;
	heap_remove(qp->engine, qp);
}

/* ------------------------------------------------------------------------ */
/* Packet construction helpers                                                */

int rocemu_engine_fill_path(struct rocemu_engine *e, const struct rocemu_path *p,
			    struct roce_pkt *pkt)
{
	struct roce_path *np = &pkt->path;
	int rc;

	rc = rocemu_port_resolve(e->port, p->sgid_index, p->dgid, np->dst_mac);
	if (rc == -EAGAIN) {
		ENGINE_COUNT(e, resolve_pending);
		return rc;
	}
	if (rc < 0) {
		ENGINE_COUNT(e, resolve_failed);
		if (rc == -EHOSTUNREACH)
			raise_unresolved(e, p->dgid);
		return rc;
	}
	memcpy(np->src_mac, e->mac, 6);
	np->ip_version = p->v6 ? 6 : 4;
	memcpy(np->src_gid, p->sgid, 16);
	memcpy(np->dst_gid, p->dgid, 16);
	/* DSCP from the address vector. Its ECN bits when it sets them; else the
	 * port's codepoint (ECT(0) unless --ecn says otherwise), as a RoCE NIC
	 * with ECN enabled marks every frame of the flow. */
	np->tclass = (p->tclass & 3) ? p->tclass : (uint8_t)(p->tclass | e->ecn_bits);
	np->ttl = p->hop_limit ? p->hop_limit : 64;
	np->flow_label = p->flow_label;
	/* On a VLAN, priority from the SL (0..7), as RoCE NICs map it to PCP. */
	np->has_vlan = e->vlan != 0;
	np->vlan_tci = (uint16_t)((p->sl & 7) << 13 | e->vlan);
	np->dont_fragment = true;
	np->udp_sport = p->udp_sport;
	np->udp_dport = ROCE_UDP_PORT;
	np->udp_csum = 0;
	return 0;
}

struct rte_mbuf *rocemu_engine_pkt_alloc(struct rocemu_engine *e, const struct roce_pkt *pkt,
					 uint8_t **payload, uint32_t *crc)
{
	struct rte_mbuf *m;

	/* The device takes no more frames now (its ring is full: the peer is
	 * slow to drain it): a frame built now would be dropped at the port and
	 * recovered only by the peer's NAK or, for the last packets of a
	 * window, the retransmit timer. Every sender treats this like a
	 * missing mbuf: blocked, tried again in a later pass. */
	if (unlikely(rocemu_port_tx_room(e->port) == 0)) {
		ENGINE_COUNT(e, tx_credit_waits);
		return NULL;
	}
	m = rocemu_port_alloc_mbuf(e->port);
	if (!m) {
		ENGINE_COUNT(e, tx_no_mbuf);
		return NULL;
	}
	*payload = roce_mbuf_prepare_icrc(m, pkt, crc);
	if (!*payload) {
		rte_pktmbuf_free(m);
		ENGINE_COUNT(e, tx_no_mbuf);
		return NULL;
	}
	return m;
}

int rocemu_engine_pkt_send_crc(struct rocemu_engine *e, struct rte_mbuf *m,
			       const struct roce_pkt *pkt, uint32_t crc)
{
	int rc = roce_mbuf_finish_icrc(m, pkt, crc);

	/* IPv6 forbids a zero UDP checksum (RFC 8200 8.1); the ICRC masks the field. */
	if (rc == 0 && pkt->path.ip_version == 6)
		rc = roce_mbuf_fill_udp_checksum(m, pkt);
	if (rc < 0) {
		rte_pktmbuf_free(m);
		return rc;
	}
	rc = rocemu_port_tx_to(e->port, m, pkt->path.dst_mac);
	if (rc < 0) {
		ENGINE_COUNT(e, tx_queue_full);
		return rc;
	}
	ENGINE_COUNT(e, tx_packets);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Receive dispatch                                                           */

static bool transport_matches(const struct rocemu_qp *qp, uint8_t transport)
{
	switch (qp->type) {
	case IBV_QPT_RC:
		return transport == ROCE_TRANSPORT_RC;
	case IBV_QPT_UC:
		return transport == ROCE_TRANSPORT_UC;
	case IBV_QPT_UD:
		return transport == ROCE_TRANSPORT_UD;
	case IBV_QPT_XRC_SEND: /* takes responses, */
	case IBV_QPT_XRC_RECV: /* serves requests (below) */
		return transport == ROCE_TRANSPORT_XRC;
	default:
		return false;
	}
}

static void dispatch_one(struct rocemu_engine *e, struct rte_mbuf *m, const struct roce_pkt *pkt)
{
	struct rocemu_qp *qp;

	ENGINE_COUNT(e, rx_packets);
	if ((pkt->path.tclass & 3) == 3)
		ENGINE_COUNT(e, rx_ecn_ce); /* a switch marked Congestion Experienced */
	if (pkt->op && (pkt->op->flags & ROCE_OPF_CNP))
		ENGINE_COUNT(e, rx_cnp);
	if (!pkt->op || (pkt->op->flags & ROCE_OPF_CNP))
		return; /* CNPs carry no transport work (no congestion control yet) */
	/* P_Key check (IBA 10.9.3): the port's only P_Key is the default 0xFFFF (full
	 * member), so a packet matches when its low 15 bits are all ones. A mismatch
	 * is dropped silently and counted. */
	if ((pkt->pkey & 0x7FFF) != (ROCE_DEFAULT_PKEY & 0x7FFF)) {
		rocemu_port_count(e->port, PC_DROP_BAD_PKEY);
		return;
	}
	if (pkt->dqpn == ROCEMU_QPN_MULTICAST) {
		rocemu_mcast_rx(e, m, pkt);
		return;
	}
	if (pkt->dqpn == 1 && !e->qpn_table[1]) { /* no GSI QP created (rdma_cm not in use) */
		ENGINE_COUNT(e, drop_gsi_qp);
		return;
	}
	qp = rocemu_engine_qp_lookup(e, pkt->dqpn);
	if (!qp) {
		ENGINE_COUNT(e, drop_unknown_qp);
		return;
	}
	if (!transport_matches(qp, pkt->op->transport)) {
		ENGINE_COUNT(e, drop_qp_type);
		return;
	}
	if (qp->type == IBV_QPT_UD) {
		rocemu_ud_rx(qp, m, pkt);
		return;
	}
	/* Connected QPs accept packets from their peer only (C9-54 style address check). */
	if (qp->path.valid && memcmp(pkt->path.src_gid, qp->path.dgid, 16) != 0) {
		ENGINE_COUNT(e, drop_addr_mismatch);
		return;
	}
	qp->comp.heard = true; /* the peer is running (the transport timer's back-off) */
	if (pkt->op->flags & ROCE_OPF_RESPONSE)
		rocemu_comp_rx(qp, m, pkt);
	else if (pkt->op->transport == ROCE_TRANSPORT_XRC)
		rocemu_xrc_resp_rx(qp, m, pkt);
	else
		rocemu_resp_rx(qp, m, pkt);
	rocemu_engine_timer_sync(qp);
	rocemu_engine_schedule(qp);
}

static unsigned run_work(struct rocemu_engine *e, uint64_t now);

static void engine_rx(void *ctx, struct rte_mbuf **pkts, struct roce_pkt *descs, uint16_t n)
{
	struct rocemu_engine *e = ctx;

	for (uint16_t i = 0; i < n; i++) {
		dispatch_one(e, pkts[i], &descs[i]);
		rte_pktmbuf_free(pkts[i]);
	}
	/* Coalesced ACKs go out once per burst; requesters whose window opened send now. */
	run_work(e, rocemu_port_pass_now(e->port));
}

static bool qp_has_work(const struct rocemu_qp *qp)
{
	if (qp->state == IBV_QPS_RESET)
		return false;
	return rocemu_req_pending(qp) || qp->resp.res_active || qp->resp.ack_pending;
}

static unsigned run_qp(struct rocemu_qp *qp)
{
	unsigned work = 0;

	if (qp->state == IBV_QPS_RESET)
		return 0;
	if (qp->type == IBV_QPT_UD || qp->type == IBV_QPT_RAW_PACKET) {
		work += qp->type == IBV_QPT_UD ? rocemu_ud_send(qp, ROCEMU_TX_BUDGET)
					       : rocemu_raw_send(qp, ROCEMU_TX_BUDGET);
		rocemu_engine_timer_sync(qp); /* a rate limit's wait */
		return work;
	}
	/* READ responses before the coalesced ACK: the ACK's PSN (expected - 1)
	 * may lie past a READ whose responses are still to go, and responses
	 * leave in PSN order (9.7.5.1.1), or the requester takes the READ's
	 * responses for lost and asks again. */
	work += rocemu_resp_run(qp, ROCEMU_TX_BUDGET);
	rocemu_resp_flush_ack(qp);
	work += rocemu_req_run(qp, ROCEMU_TX_BUDGET);
	rocemu_comp_retire(qp);
	rocemu_engine_timer_sync(qp);
	return work;
}

/*
 * Frames one pass builds for all its QPs at most (one QP: ROCEMU_TX_BUDGET).
 * A pass receives one burst (PORT_BURST, 32 frames) before it transmits:
 * with 1024 QPs a pass built until the transmit buffer was full (256 frames
 * and more, ~0.4 ms of copies) and so read 32 of the peer's frames per 256
 * sent. The peer's ACKs then waited in its channel until its buffers were
 * all out (its direct_tx_capped), our timers expired (67 ms) and the
 * go-back-N resends (millions of dup_requests) took the receiver's CPU and
 * brought more ACKs: the slow 1024-QP runs (bench/perf_analysis.md, "Many
 * QPs"). The QPs not run go first in the next pass.
 */
#define PASS_TX_BUDGET (2 * ROCEMU_TX_BUDGET)

/* Put the QPs [list .. list_tail] back at the head of the work list. */
static void requeue_head(struct rocemu_engine *e, struct rocemu_qp *list,
			 struct rocemu_qp *list_tail)
{
	list_tail->work_next = e->work_head;
	if (!e->work_head)
		e->work_tail = list_tail;
	e->work_head = list;
}

static unsigned run_work(struct rocemu_engine *e, uint64_t now)
{
	struct rocemu_qp *list, *list_tail, *qp;
	unsigned work = run_timers(e, now);
	uint64_t tx0 = e->ctr[CTR_tx_packets];

	list = e->work_head;
	list_tail = e->work_tail;
	e->work_head = e->work_tail = NULL;
	while ((qp = list) != NULL) {
		if (unlikely(e->ctr[CTR_tx_packets] - tx0 >= PASS_TX_BUDGET)) {
			requeue_head(e, list, list_tail);
			ENGINE_COUNT(e, pass_tx_budget_stops);
			break;
		}
		/* Transmit credit: when the device takes no more frames, building
		 * more only to drop them at the port (tx_queue_full, the requester
		 * retries) cost a full packet build per QP and pass, with many QPs
		 * long enough to starve the receive side: ACKs waited behind it and
		 * transport timers expired (RETRY_EXC with 256-1024 QPs). The QPs
		 * not run yet go first in the next pass, which receives before it
		 * transmits; the list's tail is known (with 1024 QPs a walk to it
		 * on every stopped pass touched a line per QP). */
		if (unlikely(rocemu_port_tx_room(e->port) == 0)) {
			requeue_head(e, list, list_tail);
			/* no work by itself: a pass that only waits for
			 * credit lets the thread nap (port_progress.c) */
			ENGINE_COUNT(e, tx_credit_waits);
			break;
		}
		list = qp->work_next;
		qp->on_work = false;
		qp->work_next = NULL;
		work += run_qp(qp);
		if (qp_has_work(qp))
			rocemu_engine_schedule(qp);
	}
	if (work)
		rocemu_port_flush(e->port);
	return work;
}

/* A link going down or up is a port event for the provider's async queue
 * (IBV_EVENT_PORT_ERR / IBV_EVENT_PORT_ACTIVE), checked every 100 ms. */
static void check_link(struct rocemu_engine *e, uint64_t now)
{
	bool up;

	if (now < e->link_check_ns)
		return;
	e->link_check_ns = now + 100000000ull;
	up = rocemu_port_link_up(e->port);
	if (up == e->link_up)
		return;
	e->link_up = up;
	rocemu_engine_raise(e, up ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR, NULL);
}

static unsigned engine_poll(void *ctx, uint64_t now_ns)
{
	check_link(ctx, now_ns);
	return run_work(ctx, now_ns);
}

/* When a pass must run next: now for queued work, else the earliest timer. */
static uint64_t engine_next_due(void *ctx)
{
	struct rocemu_engine *e = ctx;

	for (struct rocemu_qp *qp = e->work_head; qp; qp = qp->work_next)
		if (rocemu_req_pending(qp) || qp->resp.res_active || qp->resp.ack_pending)
			return 0;
	return e->n_timers ? e->timer_heap[0]->timer_at : UINT64_MAX;
}

/* The progress thread spins only while something is due soon: queued sends,
 * responses to stream, or a timer within a millisecond. Longer timers are
 * served by its periodic wake-ups. */
static bool engine_has_work(void *ctx)
{
	struct rocemu_engine *e = ctx;

	return engine_next_due(ctx) <= rocemu_port_pass_now(e->port) + 1000000;
}

/* ------------------------------------------------------------------------ */
/* Create / destroy                                                           */

static void engine_fill_caps(struct rocemu_engine *e)
{
	e->caps = (struct rocemu_caps){
	    .max_mr_size = UINT64_MAX,
	    .max_qp = ROCEMU_MAX_QP,
	    .max_qp_wr = ROCEMU_MAX_QP_WR,
	    .max_sge = ROCEMU_MAX_SGE,
	    .max_sge_rd = ROCEMU_MAX_SGE,
	    .max_inline_data = ROCEMU_MAX_INLINE,
	    .max_cq = ROCEMU_MAX_CQ,
	    .max_cqe = ROCEMU_MAX_CQE,
	    .max_mr = ROCEMU_MAX_MR,
	    .max_mw = ROCEMU_MAX_MW,
	    .max_pd = ROCEMU_MAX_PD,
	    .max_ah = ROCEMU_MAX_AH,
	    .max_qp_rd_atom = ROCEMU_MAX_RD_ATOM,
	    .max_qp_init_rd_atom = ROCEMU_MAX_RD_ATOM,
	    .max_res_rd_atom = ROCEMU_MAX_RD_ATOM * ROCEMU_MAX_QP,
	    .max_srq = ROCEMU_MAX_SRQ,
	    .max_srq_wr = ROCEMU_MAX_SRQ_WR,
	    .max_srq_sge = ROCEMU_MAX_SGE,
	    .max_msg_sz = ROCEMU_MAX_MSG_SZ,
	    .max_pkeys = 1,
	    .max_mcast_grp = ROCEMU_MCAST_GROUPS,
	    .max_mcast_qp_attach = ROCEMU_MCAST_QP_ATTACH,
	    .atomic_hca = true,
	    .odp = true,
	    .max_dm_size = ROCEMU_MAX_DM_SIZE,
	    .timestamp_hz = 1000000000ull,
	};
}

int rocemu_engine_create(const struct rocemu_port_config *cfg, struct rocemu_engine **out,
			 char *err, size_t errlen)
{
	struct rocemu_engine *e;
	struct rocemu_port_upper upper;
	int rc;

	e = calloc(1, sizeof(*e));
	if (!e) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	e->qpn_table = calloc(ROCEMU_QPN_TABLE, sizeof(*e->qpn_table));
	e->timer_heap = calloc(ROCEMU_QPN_TABLE, sizeof(*e->timer_heap));
	e->srq_table = calloc(ROCEMU_MAX_SRQ, sizeof(*e->srq_table));
	if (!e->qpn_table || !e->timer_heap || !e->srq_table) {
		free(e->qpn_table);
		free(e->timer_heap);
		free(e->srq_table);
		free(e);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = rocemu_random(&e->qpn_next, sizeof(e->qpn_next));
	if (rc < 0) {
		snprintf(err, errlen, "no random numbers for QPNs (getrandom): %s", strerror(-rc));
		free(e->qpn_table);
		free(e->timer_heap);
		free(e);
		return rc;
	}
	e->qpn_next &= ROCEMU_QPN_MASK;
	engine_fill_caps(e);
	rc = rocemu_port_open(cfg, &e->port, err, errlen);
	if (rc < 0)
		goto fail;
	/* On a host NIC, keys carry this process's tag (emulator/memory/
	 * mem_private.h): another process on the host can import them. */
	struct rocemu_port_host_id hid;
	bool tagged = rocemu_port_host_id(e->port, &hid) == 0;
	if (tagged)
		e->caps.max_mr = ROCEMU_MAX_MR_HOST;
	rc = rocemu_mem_table_create(e->caps.max_mr, e->caps.max_mw, &e->mem);
	if (rc == 0 && tagged)
		rc = rocemu_mem_table_set_key_tag(e->mem, (uint8_t)(hid.proc_id + 1));
	if (rc < 0) {
		snprintf(err, errlen, "cannot create the MR table: %s", strerror(-rc));
		rocemu_port_close(e->port);
		goto fail;
	}
	rocemu_port_mac(e->port, e->mac);
	e->ecn_bits = rocemu_ecn_bits(cfg->ecn);
	e->vlan = rocemu_port_vlan(e->port);
	e->link_up = rocemu_port_link_up(e->port);
	e->link_check_ns = rocemu_now_ns() + 100000000ull;
	upper = (struct rocemu_port_upper){
	    .ctx = e,
	    .rx = engine_rx,
	    .poll = engine_poll,
	    .has_work = engine_has_work,
	    .next_due = engine_next_due,
	    .raw_rx = rocemu_raw_rx,
	};
	rocemu_port_set_upper(e->port, &upper);
	*out = e;
	return 0;
fail:
	if (e->mem)
		rocemu_mem_table_destroy(e->mem);
	free(e->qpn_table);
	free(e->timer_heap);
	free(e->srq_table);
	free(e);
	return rc;
}

void rocemu_engine_destroy(struct rocemu_engine *e)
{
	struct rocemu_port_upper none = {0};

	if (!e)
		return;
	/* No progress thread any more, so no lock is needed to unhook. */
	rocemu_port_progress_thread_stop(e->port);
	rocemu_port_set_upper(e->port, &none);
	for (uint32_t i = 0; i < ROCEMU_QPN_TABLE; i++) {
		struct rocemu_qp *qp = e->qpn_table[i];

		if (!qp)
			continue;
		rocemu_qp_free_rings(qp);
		free(qp->resp.res);
		free(qp);
	}
	rocemu_raw_free_all(e);
	rocemu_mcast_free_all(e);
	rocemu_xrc_free_all(e);
	rocemu_port_close(e->port);
	rocemu_mem_table_destroy(e->mem);
	free(e->qpn_table);
	free(e->timer_heap);
	free(e->srq_table);
	free(e);
}
