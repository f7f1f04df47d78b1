/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Conformance runner: plays each scenario of cf_scenarios.c against one
 * rocemu engine. rocemu sits on "ring:cfring:a"; the scripted peer is a bare
 * port on "ring:cfring:b" (it answers ARP, everything else is the script).
 * Both progress threads are stopped: the runner drives progress itself, so
 * "rocemu sent nothing" is a statement about passes, not luck.
 *
 * usage: cf_runner [--group G] [--results FILE] [--list]
 * Exit: 0 every scenario passed or failed as expected (xfail), 1 some
 * scenario failed unexpectedly, 77 DPDK cannot start here.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <rte_mbuf.h>

#include "../../emulator/transport/rocemu_engine.h"
#include "cf.h"
#include "engine_peer.h"

#define ENGINE_IP     "10.79.0.1"
#define PEER_IP	      "10.79.0.2"
#define STRANGER_IP   "10.79.0.3"
#define FRAME_MAX     9216
#define CAP_SLOTS     512
#define WAIT_FRAME_MS 3000
#define QUIET_MS      30

struct captured {
	uint8_t data[FRAME_MAX];
	uint32_t len;
	struct roce_pkt pkt;
	uint64_t at_ns;
};

static struct {
	struct engine_peer ep;
	struct rocemu_pd *pd, *pd2;
	struct rocemu_cq *scq, *rcq;
	uint8_t sgid[16];

	/* region: PROT_NONE | canary | region | canary | PROT_NONE */
	uint8_t *map;
	size_t map_len;
	uint8_t *rw; /* the readable/writable span (canaries + region) */
	size_t rw_len;
	uint8_t *region;
	uint8_t *snapshot; /* rw span at scenario start */
	bool unmapped;	   /* T_UNMAP ran: the rw span is gone until the scenario ends */
	struct rocemu_mr *mr, *mr_ro, *mr_other, *mr_local;
	struct rocemu_mw *mw1, *mw2; /* memory windows on the region's PD, per scenario */
	uint8_t *ro_buf, *other_buf, *local;
	uint32_t stale_rkey;

	struct rocemu_qp *qp, *other_qp;
	/* XRC scenarios: rocemu's QP is the target of xrcd, whose SRQ is xsrq;
	 * xsrq2 belongs to another domain */
	struct rocemu_xrcd *xrcd, *xrcd2;
	struct rocemu_srq *xsrq, *xsrq2;
	uint32_t epsn, spsn;

	struct captured *cap;
	unsigned cap_head, cap_tail;
	struct captured last;
	uint64_t mark_ns;

	struct rocemu_counter ctr0[256];
	unsigned n_ctr0;
	char why[512];

	/* rocemu's posted send WRs in order: PSN ranges for the RETH/AtomicETH
	 * check, wr_ids for the completion check */
	struct posted {
		uint64_t wr_id;
		enum ibv_wr_opcode op;
		uint32_t first_psn, npkts, len;
		uint64_t va, cmp, swap;
	} posted[64];
	unsigned n_posted, send_wc_next;
	uint64_t recv_wr_next, recv_wc_next; /* receive wr_ids are 1000, 1001, ... */
	uint32_t next_spsn, mtu;
} H;

#define CF_RKEY 0x4242u /* the rkey rocemu's requests carry */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(H.why, sizeof(H.why), fmt, ap);
	va_end(ap);
	return -1;
}

/* ------------------------------------------------------------------------ */
/* The peer's receive side: every RoCE frame rocemu sends is kept.            */

static void peer_rx(void *ctx, struct rte_mbuf **pkts, struct roce_pkt *descs, uint16_t n)
{
	(void)ctx;
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		uint32_t len = rte_pktmbuf_data_len(m);

		if (H.cap_tail - H.cap_head < CAP_SLOTS && len <= FRAME_MAX) {
			struct captured *c = &H.cap[H.cap_tail++ % CAP_SLOTS];

			memcpy(c->data, rte_pktmbuf_mtod(m, const uint8_t *), len);
			c->len = len;
			c->pkt = descs[i];
			c->at_ns = now_ns();
		}
		rte_pktmbuf_free(m);
	}
}

static unsigned peer_poll(void *ctx, uint64_t now)
{
	(void)ctx;
	(void)now;
	return 0;
}

static bool peer_has_work(void *ctx)
{
	(void)ctx;
	return false;
}

static void pump(void)
{
	rocemu_engine_progress(H.ep.e);
	rocemu_port_progress(H.ep.pport);
	rocemu_engine_progress(H.ep.e);
}

static void pump_for(unsigned ms)
{
	uint64_t end = now_ns() + (uint64_t)ms * 1000000ull;

	while (now_ns() < end) {
		pump();
		usleep(50);
	}
}

/* ------------------------------------------------------------------------ */
/* Setup                                                                      */

static uint8_t *alloc_guarded(size_t len)
{
	size_t pg = 4096, span = (len + pg - 1) / pg * pg;
	uint8_t *m =
	    mmap(NULL, span + 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		return NULL;
	mprotect(m, pg, PROT_NONE);
	mprotect(m + pg + span, pg, PROT_NONE);
	return m + pg;
}

static int setup(void)
{
	struct rocemu_port_upper up = {.rx = peer_rx, .poll = peer_poll, .has_work = peer_has_work};
	char err[256];
	int rc;

	if (rocemu_eal_init() < 0) {
		fprintf(stderr, "SKIP: EAL cannot start here: %s\n", rocemu_eal_error());
		return 77;
	}
	H.cap = calloc(CAP_SLOTS, sizeof(*H.cap));
	if (!H.cap)
		return -ENOMEM;
	rc = engine_peer_open(&H.ep, "cfring", ENGINE_IP, PEER_IP, 0x79, &up, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "engine and peer: %s\n", err);
		return rc;
	}
	rocemu_gid_parse(STRANGER_IP, H.sgid);

	if (rocemu_pd_alloc(H.ep.e, &H.pd) || rocemu_pd_alloc(H.ep.e, &H.pd2) ||
	    rocemu_cq_create(H.ep.e, 4096, NULL, NULL, NULL, &H.scq) ||
	    rocemu_cq_create(H.ep.e, 4096, NULL, NULL, NULL, &H.rcq))
		return -ENOMEM;

	/* PROT_NONE | 2 KiB canary | region 8 KiB | 6 KiB canary | PROT_NONE */
	H.map_len = 6 * 4096;
	H.map = mmap(NULL, H.map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (H.map == MAP_FAILED)
		return -ENOMEM;
	mprotect(H.map, 4096, PROT_NONE);
	mprotect(H.map + 5 * 4096, 4096, PROT_NONE);
	H.rw = H.map + 4096;
	H.rw_len = 4 * 4096;
	H.region = H.rw + 2048;
	H.snapshot = malloc(H.rw_len);
	H.ro_buf = alloc_guarded(4096);
	H.other_buf = alloc_guarded(4096);
	H.local = alloc_guarded(LOCAL_LEN);
	if (!H.snapshot || !H.ro_buf || !H.other_buf || !H.local)
		return -ENOMEM;
	if (rocemu_mr_reg(H.pd, H.ro_buf, 4096, REGION_IOVA + 0x100000, IBV_ACCESS_REMOTE_READ,
			  &H.mr_ro) ||
	    rocemu_mr_reg(H.pd2, H.other_buf, 4096, REGION_IOVA,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
			  &H.mr_other) ||
	    rocemu_mr_reg(H.pd, H.local, LOCAL_LEN, (uint64_t)(uintptr_t)H.local,
			  IBV_ACCESS_LOCAL_WRITE, &H.mr_local))
		return -ENOMEM;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Counters                                                                   */

static unsigned ctr_collect(struct rocemu_counter *out, unsigned max)
{
	unsigned n = rocemu_engine_counters(H.ep.e, out, max), m;

	if (n > max)
		n = max;
	m = rocemu_port_counters(H.ep.eport, out + n, max - n);
	return n + (m > max - n ? max - n : m);
}

/* ------------------------------------------------------------------------ */
/* Per-scenario QP                                                            */

static struct rocemu_srq *make_xrc_srq(struct rocemu_xrcd *x)
{
	struct rocemu_srq_init init = {
	    .pd = H.pd, .max_wr = 64, .max_sge = 4, .xrcd = x, .cq = H.rcq};
	struct rocemu_srq *srq = NULL;

	return rocemu_srq_create_ex(&init, &srq) < 0 ? NULL : srq;
}

/* An XRC target with its domain and SRQ, and a second domain with its own SRQ. */
static struct rocemu_qp *make_xrc_target(void)
{
	struct rocemu_qp_init init = {.qp_type = IBV_QPT_XRC_RECV};
	struct rocemu_qp *qp = NULL;

	if (rocemu_xrcd_open(H.ep.e, false, 0, 0, false, false, &H.xrcd) ||
	    rocemu_xrcd_open(H.ep.e, false, 0, 0, false, false, &H.xrcd2))
		return NULL;
	H.xsrq = make_xrc_srq(H.xrcd);
	H.xsrq2 = make_xrc_srq(H.xrcd2);
	init.xrcd = H.xrcd;
	if (!H.xsrq || !H.xsrq2 || rocemu_qp_create(NULL, &init, &qp) < 0)
		return NULL;
	return qp;
}

static struct rocemu_qp *make_qp(enum ibv_qp_type type)
{
	struct rocemu_qp_init init = {
	    .qp_type = type,
	    .send_cq = H.scq,
	    .recv_cq = H.rcq,
	    .cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 4, .max_recv_sge = 4},
	};
	struct rocemu_qp *qp = NULL;

	return rocemu_qp_create(H.pd, &init, &qp) < 0 ? NULL : qp;
}

static int connect_qp(struct rocemu_qp *qp, const struct qp_cfg *c, const uint8_t *dgid)
{
	struct ibv_qp_attr a = {0};
	enum ibv_qp_type type = c->type ? c->type : IBV_QPT_RC;
	int mask;

	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (type == IBV_QPT_UD) {
		a.qkey = c->qkey;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = c->qp_access_set
					? c->qp_access
					: IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
					      IBV_ACCESS_REMOTE_ATOMIC;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	if (rocemu_qp_modify(qp, &a, mask))
		return fail("modify to INIT failed");
	if (c->stop_at == IBV_QPS_INIT)
		return 0;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (type != IBV_QPT_UD) {
		a.path_mtu = c->mtu ? c->mtu : IBV_MTU_1024;
		a.dest_qp_num = PEER_QPN;
		a.rq_psn = H.epsn;
		a.ah_attr.is_global = 1;
		a.ah_attr.port_num = 1;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.grh.sgid_index = (uint8_t)H.ep.egid_index;
		memcpy(a.ah_attr.grh.dgid.raw, dgid, 16);
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (type == IBV_QPT_RC || type == IBV_QPT_XRC_RECV) {
			a.max_dest_rd_atomic = c->rd_atomic ? c->rd_atomic : 16;
			a.min_rnr_timer = c->min_rnr_timer ? c->min_rnr_timer : 1;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
	}
	if (rocemu_qp_modify(qp, &a, mask))
		return fail("modify to RTR failed");
	if (c->stop_at == IBV_QPS_RTR)
		return 0;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = H.spsn;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (type == IBV_QPT_XRC_RECV) {
		a.timeout = 20;
		mask |= IBV_QP_TIMEOUT;
	} else if (type == IBV_QPT_RC) {
		/* 20: 4.3 s. No timer a scenario does not ask for may fire while a
		 * slow runner (a loaded machine) walks through its steps: the
		 * resend would be legitimate, yet unexpected. */
		a.timeout = c->timeout ? c->timeout : 20;
		a.retry_cnt = c->retry_set ? c->retry_cnt : 7;
		a.rnr_retry = c->retry_set ? c->rnr_retry : 7;
		a.max_rd_atomic = 16;
		mask |=
		    IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	if (rocemu_qp_modify(qp, &a, mask))
		return fail("modify to RTS failed");
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Steps                                                                      */

static uint32_t psn_of(const struct step *s)
{
	return roce_psn_add(s->spsn ? H.spsn : H.epsn, (uint32_t)s->psn & ROCE_PSN_MASK);
}

static uint32_t rkey_of(const struct step *s)
{
	struct rocemu_mr_info info;

	switch (s->key) {
	case K_GOOD:
		if (!H.mr)
			return H.stale_rkey;
		rocemu_mr_info(H.mr, &info);
		return info.rkey;
	case K_GUESS:
		return 0x00012345u;
	case K_STALE:
		return H.stale_rkey;
	case K_OTHER_PD:
		rocemu_mr_info(H.mr_other, &info);
		return info.rkey;
	case K_RO:
		rocemu_mr_info(H.mr_ro, &info);
		return info.rkey;
	case K_ABS:
		return s->key_value;
	case K_LOCAL:
		rocemu_mr_info(H.mr_local, &info);
		return info.rkey;
	case K_MW1:
		return rocemu_mw_rkey(H.mw1);
	case K_MW2:
		return rocemu_mw_rkey(H.mw2);
	}
	return 0;
}

static uint64_t va_of(const struct step *s)
{
	if (s->va_abs)
		return s->va_value;
	if (s->key == K_RO)
		return REGION_IOVA + 0x100000 + (uint64_t)s->off;
	return REGION_IOVA + (uint64_t)s->off;
}

static int peer_tx(const struct step *s)
{
	static uint8_t buf[FRAME_MAX];
	struct roce_pkt p;
	struct rte_mbuf *m;
	uint32_t flen;
	int hl;

	memset(&p, 0, sizeof(p));
	memcpy(p.path.dst_mac, H.ep.emac, 6);
	memcpy(p.path.src_mac, H.ep.pmac, 6);
	p.path.ip_version = 4;
	memcpy(p.path.src_gid, s->mangle == M_SRC ? H.sgid : H.ep.pgid, 16);
	memcpy(p.path.dst_gid, H.ep.egid, 16);
	p.path.ttl = 64;
	p.path.udp_sport = s->mangle == M_SPORT ? 0x1234 : 0xC0DE;
	p.path.tclass = s->mangle == M_ECN_CE ? 0x03 : 0;
	p.opcode = s->op;
	p.op = roce_opcode_info(s->op);
	if (!p.op)
		return fail("scenario bug: opcode 0x%02x unknown to the codec", s->op);
	p.pkey = s->mangle == M_PKEY	       ? 0x1234
		 : s->mangle == M_PKEY_LIMITED ? 0x7FFF
					       : ROCE_DEFAULT_PKEY;
	p.tver = s->mangle == M_TVER ? 1 : 0;
	switch (s->dqp) {
	case D_QP:
		p.dqpn = rocemu_qp_num(H.qp);
		break;
	case D_UNKNOWN:
		p.dqpn = 0xFFFF00;
		break;
	case D_GSI:
		p.dqpn = 1;
		break;
	case D_OTHER_QP:
		p.dqpn = rocemu_qp_num(H.other_qp);
		break;
	}
	p.psn = psn_of(s);
	p.ackreq = s->ackreq;
	p.se = s->se;
	p.reth.va = va_of(s);
	p.reth.rkey = rkey_of(s);
	p.reth.dma_len = s->dma_set ? s->dma_len : s->len;
	p.atomic.va = va_of(s);
	p.atomic.rkey = rkey_of(s);
	p.atomic.swap_add = s->swap;
	p.atomic.compare = s->cmp;
	p.imm = s->imm;
	p.feth = s->feth;
	p.ieth_rkey = rkey_of(s);
	p.deth.qkey = s->qkey;
	p.deth.src_qp = PEER_QPN;
	p.xrc_srqn = s->xsrq == X_UNKNOWN	 ? 0xFFFFF0
		     : s->xsrq == X_OTHER_DOMAIN ? (H.xsrq2 ? rocemu_srq_num(H.xsrq2) : 0)
		     : H.xsrq			 ? rocemu_srq_num(H.xsrq)
						 : 0;
	p.aeth.syndrome = ROCE_AETH_SYNDROME(s->syn_type, s->syn_val);
	p.aeth.msn = 0;
	p.atomic_orig = s->swap;
	p.payload_len = (p.op->flags & ROCE_OPF_PAYLOAD) ? s->len : 0;
	hl = roce_build_headers(buf, sizeof(buf), &p);
	if (hl < 0)
		return fail("scenario bug: cannot build opcode 0x%02x (%d)", s->op, hl);
	memset(buf + hl, s->fill, p.payload_len);
	flen = roce_frame_len(&p);
	roce_finish(buf, flen, &p);
	switch (s->mangle) {
	case M_ICRC:
		buf[flen - 1] ^= 0x01;
		break;
	case M_PAYLOAD:
		buf[hl] ^= 0x10;
		break;
	case M_TRUNC:
		flen = (uint32_t)hl - 4; /* inside the extension headers / BTH */
		break;
	case M_UDP_LEN:
		buf[14 + 20 + 5] += 4; /* UDP length (low byte) */
		roce_icrc_store(buf, flen, roce_icrc_compute(buf, 14, flen));
		break;
	case M_IP_CSUM:
		buf[14 + 10] ^= 0xFF;
		break;
	case M_PAD:
		buf[14 + 20 + 8 + 1] |= 3u << ROCE_BTH_PAD_SHIFT;
		roce_icrc_store(buf, flen, roce_icrc_compute(buf, 14, flen));
		break;
	case M_OPCODE:
		buf[14 + 20 + 8] = 0x15;
		roce_icrc_store(buf, flen, roce_icrc_compute(buf, 14, flen));
		break;
	default:
		break;
	}
	rocemu_port_lock(H.ep.pport);
	m = rocemu_port_alloc_mbuf(H.ep.pport);
	if (!m) {
		rocemu_port_unlock(H.ep.pport);
		return fail("peer: no mbuf");
	}
	memcpy(rte_pktmbuf_append(m, (uint16_t)flen), buf, flen);
	rocemu_port_tx(H.ep.pport, m);
	rocemu_port_flush(H.ep.pport);
	rocemu_port_unlock(H.ep.pport);
	if (!s->n) /* n = 1: leave it on the wire, to arrive in one burst with the next */
		pump();
	return 0;
}

static bool next_frame(unsigned ms, struct captured *out)
{
	uint64_t end = now_ns() + (uint64_t)ms * 1000000ull;

	for (;;) {
		if (H.cap_head != H.cap_tail) {
			*out = H.cap[H.cap_head++ % CAP_SLOTS];
			return true;
		}
		if (now_ns() >= end)
			return false;
		pump();
		usleep(20);
	}
}

static const char *op_name(uint8_t op)
{
	const char *n = roce_opcode_name(op);

	return n ? n : "?";
}

/* The posted WR whose PSN range holds psn, or NULL. */
static const struct posted *posted_of(uint32_t psn)
{
	for (unsigned i = 0; i < H.n_posted; i++) {
		const struct posted *w = &H.posted[i];
		int32_t d = roce_psn_diff(psn, w->first_psn);

		if (d >= 0 && (uint32_t)d < w->npkts)
			return w;
	}
	return NULL;
}

/*
 * Every request rocemu sends carries the RETH or AtomicETH of its WR: a
 * WRITE's first packet the WR's address, rkey and whole length; a READ
 * request (first or re-requested from PSN first + d) the address d MTUs on
 * and the length left; an atomic its address, rkey, add or swap and
 * compare values.
 */
static int check_req_fields(const struct roce_pkt *p)
{
	const struct posted *w;
	uint32_t d;

	if (!(p->op->hdrs & (ROCE_HDR_RETH | ROCE_HDR_ATOMIC_ETH)) ||
	    (p->op->flags & ROCE_OPF_RESPONSE))
		return 0;
	w = posted_of(p->psn);
	if (!w)
		return fail("%s PSN %#x belongs to no posted WR", op_name(p->opcode), p->psn);
	d = (uint32_t)roce_psn_diff(p->psn, w->first_psn);
	if (p->op->hdrs & ROCE_HDR_ATOMIC_ETH) {
		uint64_t add_swap = w->op == IBV_WR_ATOMIC_FETCH_AND_ADD ? w->cmp : w->swap;

		if (p->atomic.va != w->va || p->atomic.rkey != CF_RKEY ||
		    p->atomic.swap_add != add_swap ||
		    (w->op == IBV_WR_ATOMIC_CMP_AND_SWP && p->atomic.compare != w->cmp))
			return fail("%s AtomicETH va %#" PRIx64 " rkey %#x swap/add %#" PRIx64
				    " compare %#" PRIx64 " differ from the WR's",
				    op_name(p->opcode), p->atomic.va, p->atomic.rkey,
				    p->atomic.swap_add, p->atomic.compare);
		return 0;
	}
	if (w->op == IBV_WR_RDMA_READ ? d * H.mtu >= (w->len ? w->len : 1) : d != 0)
		return fail("%s with a RETH at PSN offset %u of its WR", op_name(p->opcode), d);
	if (p->reth.va != w->va + (uint64_t)d * H.mtu || p->reth.rkey != CF_RKEY ||
	    p->reth.dma_len != w->len - d * H.mtu)
		return fail("%s RETH va %#" PRIx64 " rkey %#x length %u, expected %#" PRIx64
			    " %#x %u",
			    op_name(p->opcode), p->reth.va, p->reth.rkey, p->reth.dma_len,
			    w->va + (uint64_t)d * H.mtu, CF_RKEY, w->len - d * H.mtu);
	return 0;
}

static int expect_rx(const struct step *s)
{
	struct captured *c = &H.last;
	const struct roce_pkt *p = &c->pkt;

	if (!next_frame(WAIT_FRAME_MS, c))
		return fail("expected %s, rocemu sent nothing", op_name(s->op));
	while ((s->chk & C_SKIP) &&
	       (p->opcode != s->op ||
		((s->chk & C_SYN) && ROCE_AETH_TYPE(p->aeth.syndrome) != s->syn_type)))
		if (!next_frame(WAIT_FRAME_MS, c))
			return fail("expected %s among the frames, none came", op_name(s->op));
	if (p->opcode != s->op)
		return fail("expected %s, got %s (PSN %#x)", op_name(s->op), op_name(p->opcode),
			    p->psn);
	if ((s->chk & C_PSN) && p->psn != psn_of(s))
		return fail("%s: PSN %#x, expected %#x", op_name(p->opcode), p->psn, psn_of(s));
	if ((s->chk & C_LEN) && p->payload_len != s->len)
		return fail("%s: payload %u bytes, expected %u", op_name(p->opcode), p->payload_len,
			    s->len);
	if (s->chk & C_SYN) {
		uint8_t syn = p->aeth.syndrome;

		if (!(p->op->hdrs & ROCE_HDR_AETH))
			return fail("%s has no AETH", op_name(p->opcode));
		if (ROCE_AETH_TYPE(syn) != s->syn_type ||
		    (s->syn_type != ROCE_AETH_ACK && !(s->chk & C_NAKANY) &&
		     ROCE_AETH_VALUE(syn) != s->syn_val))
			return fail(
			    "AETH syndrome %#04x (type %u value %u), expected type %u value "
			    "%u",
			    syn, ROCE_AETH_TYPE(syn), ROCE_AETH_VALUE(syn), s->syn_type,
			    s->syn_val);
	}
	if ((s->chk & C_FETH) && p->feth != s->feth)
		return fail("FETH %#x, expected %#x", p->feth, s->feth);
	if ((s->chk & C_TCLASS) && p->path.tclass != s->tclass)
		return fail("%s: traffic class %#04x (DSCP %u, ECN %u), expected %#04x",
			    op_name(p->opcode), p->path.tclass, p->path.tclass >> 2,
			    p->path.tclass & 3, s->tclass);
	if ((s->chk & C_MSN) && p->aeth.msn != s->imm)
		return fail("AETH MSN %u, expected %u", p->aeth.msn, s->imm);
	if ((s->chk & C_ORIG) && p->atomic_orig != s->swap)
		return fail("atomic original %#" PRIx64 ", expected %#" PRIx64, p->atomic_orig,
			    s->swap);
	if ((s->chk & C_ACKREQ) && !p->ackreq)
		return fail("%s PSN %#x without AckReq", op_name(p->opcode), p->psn);
	if ((s->chk & C_NOACKREQ) && p->ackreq)
		return fail("%s PSN %#x with AckReq", op_name(p->opcode), p->psn);
	if (s->chk & C_DATA) {
		if ((uint64_t)s->off + p->payload_len > REGION_LEN ||
		    memcmp(c->data + p->payload_off, H.region + s->off, p->payload_len) != 0)
			return fail("%s payload differs from region bytes at offset %" PRId64,
				    op_name(p->opcode), s->off);
	}
	if (check_req_fields(p))
		return -1;
	if (s->chk & C_FILL) {
		for (uint32_t i = 0; i < p->payload_len; i++)
			if (c->data[p->payload_off + i] != s->fill)
				return fail("%s payload byte %u is %#x, expected %#x",
					    op_name(p->opcode), i, c->data[p->payload_off + i],
					    s->fill);
	}
	return 0;
}

/*
 * A stall probe (docs/transport.md): a requester that has an RTT estimate
 * and waits for an answer resends its oldest unacknowledged packet with
 * AckReq, at most ROCEMU_PROBES (2) times per stall, after its estimate
 * (at least 250 us). Whether a scenario's waits last that long depends on
 * the machine's load, so where a request is left unanswered on purpose the
 * scenario takes, once its answer came, up to two resends of exactly that
 * PSN with AckReq; any other frame stays for the next step.
 */
static int take_probes(const struct step *s)
{
	unsigned taken = 0;

	pump(); /* what was sent before the answer reaches the capture */
	while (H.cap_head != H.cap_tail && taken < 2) {
		const struct captured *c = &H.cap[H.cap_head % CAP_SLOTS];

		if (c->pkt.opcode != s->op || c->pkt.psn != psn_of(s) || !c->pkt.ackreq)
			break;
		H.cap_head++;
		taken++;
	}
	return 0;
}

static int expect_none(const struct step *s)
{
	struct captured c;

	if (next_frame(s->ms ? s->ms : QUIET_MS, &c))
		return fail("expected silence, rocemu sent %s PSN %#x (syndrome %#04x)",
			    op_name(c.pkt.opcode), c.pkt.psn, c.pkt.aeth.syndrome);
	return 0;
}

static int post_recv(const struct step *s)
{
	for (unsigned i = 0; i < (s->n ? s->n : 1); i++) {
		struct ibv_sge sg = {
		    .addr = (uintptr_t)(H.local + i * 4096), .length = s->len, .lkey = 0};
		struct rocemu_mr_info info;

		rocemu_mr_info(H.mr_local, &info);
		sg.lkey = info.lkey;
		if (H.xsrq ? rocemu_srq_post_recv(H.xsrq, H.recv_wr_next++, &sg, 1)
			   : rocemu_qp_post_recv(H.qp, H.recv_wr_next++, &sg, 1))
			return fail("post_recv failed");
	}
	return 0;
}

static int post_send(const struct step *s)
{
	struct rocemu_mr_info info;
	struct ibv_sge sg;
	struct rocemu_send_wr wr = {0};
	int rc;

	rocemu_mr_info(H.mr_local, &info);
	memset(H.local, 0x3C, LOCAL_LEN);
	memset(H.local, s->fill, s->len < LOCAL_LEN ? s->len : LOCAL_LEN);
	sg.addr = (uintptr_t)H.local;
	sg.length = s->len;
	sg.lkey = info.lkey;
	if (H.n_posted == sizeof(H.posted) / sizeof(H.posted[0]))
		return fail("scenario bug: too many posts");
	wr.wr_id = 0x5E000 + H.n_posted;
	wr.opcode = s->wr;
	wr.send_flags = IBV_SEND_SIGNALED | (s->fence ? IBV_SEND_FENCE : 0);
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.remote_addr = va_of(s);
	wr.rkey = CF_RKEY;
	wr.compare_add = s->cmp;
	wr.swap = s->swap;
	memset(wr.atomic_wr, s->fill, sizeof(wr.atomic_wr)); /* ATOMIC WRITE: 8 x fill */
	wr.flush_type = (uint8_t)ROCE_FETH_PLT(s->feth);
	wr.flush_level = (uint8_t)ROCE_FETH_SEL(s->feth);
	wr.flush_len = s->len;
	rc = rocemu_qp_post_send(H.qp, &wr);
	if (rc)
		return fail("post_send: %s", strerror(-rc));
	{
		bool atomic =
		    s->wr == IBV_WR_ATOMIC_CMP_AND_SWP || s->wr == IBV_WR_ATOMIC_FETCH_AND_ADD;
		/* ATOMIC WRITE: one packet whose RETH names 8 bytes, whatever s->len */
		bool atomic_write = s->wr == IBV_WR_ATOMIC_WRITE;
		uint32_t n = atomic || atomic_write ? 1 : (s->len + H.mtu - 1) / H.mtu;

		H.posted[H.n_posted++] = (struct posted){
		    .wr_id = wr.wr_id,
		    .op = s->wr,
		    .first_psn = H.next_spsn,
		    .npkts = n ? n : 1,
		    .len = atomic_write ? 8 : s->len,
		    .va = wr.remote_addr,
		    .cmp = s->cmp,
		    .swap = s->swap,
		};
		H.next_spsn = roce_psn_add(H.next_spsn, n ? n : 1);
	}
	pump();
	return 0;
}

/* A bind WR (IBV_WR_BIND_MW) of window s->key to the region, on rocemu's QP
 * or (D_OTHER_QP) its other QP: a local operation, no PSN. */
static int post_bind(const struct step *s)
{
	struct rocemu_mw *mw = s->key == K_MW1 ? H.mw1 : H.mw2;
	uint32_t key = rocemu_mw_rkey(mw);
	struct rocemu_mr_info info;
	struct rocemu_send_wr wr = {0};
	int rc;

	if (s->key != K_MW1 && s->key != K_MW2)
		return fail("scenario bug: T_BIND of a key that is no window");
	if (H.n_posted == sizeof(H.posted) / sizeof(H.posted[0]))
		return fail("scenario bug: too many posts");
	rocemu_mr_info(H.mr, &info);
	wr.wr_id = 0x5E000 + H.n_posted;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.rkey = (key & ~0xffu) | ((key + 1) & 0xffu); /* ibv_inc_rkey */
	wr.remote_addr = REGION_IOVA + (uint64_t)s->off;
	wr.bind_length = s->len ? s->len : REGION_LEN - (uint64_t)s->off;
	wr.bind_lkey = info.lkey;
	wr.bind_access = s->mw_access;
	wr.bind_type = s->key == K_MW1 ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2;
	rc = rocemu_qp_post_send(s->dqp == D_OTHER_QP ? H.other_qp : H.qp, &wr);
	if (rc)
		return fail("bind post: %s", strerror(-rc));
	H.posted[H.n_posted++] = (struct posted){
	    .wr_id = wr.wr_id, .op = IBV_WR_BIND_MW, .first_psn = H.next_spsn, .npkts = 0};
	pump();
	return 0;
}

/* The engine calls no libibverbs function; neither do its tests. */
static const char *wc_status_name(enum ibv_wc_status st)
{
	static const char *const names[] = {
	    [IBV_WC_SUCCESS] = "SUCCESS",
	    [IBV_WC_LOC_LEN_ERR] = "LOC_LEN_ERR",
	    [IBV_WC_LOC_QP_OP_ERR] = "LOC_QP_OP_ERR",
	    [IBV_WC_LOC_PROT_ERR] = "LOC_PROT_ERR",
	    [IBV_WC_WR_FLUSH_ERR] = "WR_FLUSH_ERR",
	    [IBV_WC_REM_INV_REQ_ERR] = "REM_INV_REQ_ERR",
	    [IBV_WC_REM_ACCESS_ERR] = "REM_ACCESS_ERR",
	    [IBV_WC_REM_OP_ERR] = "REM_OP_ERR",
	    [IBV_WC_RETRY_EXC_ERR] = "RETRY_EXC_ERR",
	    [IBV_WC_RNR_RETRY_EXC_ERR] = "RNR_RETRY_EXC_ERR",
	};

	if ((unsigned)st < sizeof(names) / sizeof(names[0]) && names[st])
		return names[st];
	return "other";
}

static int expect_wc(const struct step *s)
{
	struct rocemu_cq *cq = s->recv_cq ? H.rcq : H.scq;
	uint64_t end = now_ns() + (uint64_t)WAIT_FRAME_MS * 1000000ull;
	struct rocemu_wc wc;
	int n;

	do {
		n = rocemu_cq_poll(cq, 1, &wc);
		if (n == 0) {
			pump();
			usleep(20);
		}
	} while (n == 0 && now_ns() < end);
	if (n <= 0)
		return fail("expected a %s completion, none came", s->recv_cq ? "receive" : "send");
	/* completions come in posting order, each with its WR's wr_id */
	if (s->recv_cq ? wc.wr_id != H.recv_wc_next
		       : H.send_wc_next >= H.n_posted || wc.wr_id != H.posted[H.send_wc_next].wr_id)
		return fail("%s completion with wr_id %#" PRIx64 ", expected %#" PRIx64,
			    s->recv_cq ? "receive" : "send", wc.wr_id,
			    s->recv_cq			  ? H.recv_wc_next
			    : H.send_wc_next < H.n_posted ? H.posted[H.send_wc_next].wr_id
							  : 0);
	if (s->recv_cq)
		H.recv_wc_next++;
	else
		H.send_wc_next++;
	if ((s->chk & C_STATUS) && wc.status != s->status)
		return fail("completion status %s, expected %s", wc_status_name(wc.status),
			    wc_status_name(s->status));
	if ((s->chk & C_WCOP) && wc.status == IBV_WC_SUCCESS && wc.opcode != s->wc_op)
		return fail("completion opcode %d, expected %d", wc.opcode, s->wc_op);
	if ((s->chk & C_BLEN) && wc.byte_len != s->byte_len)
		return fail("completion byte_len %u, expected %u", wc.byte_len, s->byte_len);
	if ((s->chk & C_INV) &&
	    (!(wc.wc_flags & IBV_WC_WITH_INV) || wc.invalidated_rkey != rkey_of(s)))
		return fail("completion without IBV_WC_WITH_INV of %#x (flags %#x, rkey %#x)",
			    rkey_of(s), wc.wc_flags, wc.invalidated_rkey);
	return 0;
}

static int expect_no_wc(const struct step *s)
{
	struct rocemu_wc wc;

	pump_for(s->ms ? s->ms : QUIET_MS);
	if (rocemu_cq_poll(H.rcq, 1, &wc) > 0)
		return fail("unexpected receive completion (status %s, byte_len %u)",
			    wc_status_name(wc.status), wc.byte_len);
	if (rocemu_cq_poll(H.scq, 1, &wc) > 0)
		return fail("unexpected send completion (status %s)", wc_status_name(wc.status));
	return 0;
}

/* A counter's value: the engine and the port may both have one of a name
 * (drop_bad_length: a length the opcode does not allow / a frame the parser
 * finds too short), so all of that name are added up. */
static uint64_t ctr_sum(const struct rocemu_counter *c, unsigned n, const char *name)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		if (!strcmp(c[i].name, name))
			v += c[i].value;
	return v;
}

static int check_ctr(const struct step *s)
{
	struct rocemu_counter c[256];
	unsigned n = ctr_collect(c, 256);
	int64_t d = (int64_t)(ctr_sum(c, n, s->ctr) - ctr_sum(H.ctr0, H.n_ctr0, s->ctr));

	if (s->n ? d < s->delta : d != s->delta) {
		char grew[256] = "";
		size_t at = 0;

		/* name the counters that did move: the reason is usually there */
		for (unsigned i = 0; i < n && at + 1 < sizeof(grew); i++) {
			uint64_t was = i < H.n_ctr0 && !strcmp(H.ctr0[i].name, c[i].name)
					   ? H.ctr0[i].value
					   : 0;

			if (c[i].value != was)
				at += (size_t)snprintf(grew + at, sizeof(grew) - at, " %s+%" PRIu64,
						       c[i].name, c[i].value - was);
		}
		return fail("counter %s grew by %" PRId64 ", expected %s%" PRId64 " (moved:%s)",
			    s->ctr, d, s->n ? ">= " : "", s->delta, grew);
	}
	return 0;
}

static int check_canaries(void)
{
	for (size_t i = 0; i < H.rw_len; i++) {
		bool in_region = H.rw + i >= H.region && H.rw + i < H.region + REGION_LEN;

		if (!in_region && H.rw[i] != CANARY_BYTE)
			return fail("canary byte at region%+td changed to %#x",
				    (H.rw + i) - H.region, H.rw[i]);
	}
	return 0;
}

static int run_step(const struct step *s)
{
	switch (s->k) {
	case T_END:
		return 0;
	case T_TX:
		return peer_tx(s);
	case T_RX:
		return expect_rx(s);
	case T_NONE:
		return expect_none(s);
	case T_RECV:
		return post_recv(s);
	case T_POST:
		return post_send(s);
	case T_BIND:
		return post_bind(s);
	case T_WC:
		return expect_wc(s);
	case T_NOWC:
		return expect_no_wc(s);
	case T_CTR:
		return check_ctr(s);
	case T_MEM_SAME:
		pump();
		if (memcmp(H.rw, H.snapshot, H.rw_len) != 0) {
			for (size_t i = 0; i < H.rw_len; i++)
				if (H.rw[i] != H.snapshot[i])
					return fail("memory at region%+td changed (%#x -> %#x)",
						    (H.rw + i) - H.region, H.snapshot[i], H.rw[i]);
		}
		return 0;
	case T_MEM_EQ:
		for (uint32_t i = 0; i < s->len; i++)
			if (H.region[s->off + i] != s->fill)
				return fail("region byte %" PRId64 " is %#x, expected %#x",
					    s->off + i, H.region[s->off + i], s->fill);
		return 0;
	case T_MEM_ORIG:
		for (uint32_t i = 0; i < s->len; i++)
			if (H.region[s->off + i] != H.snapshot[(H.region - H.rw) + s->off + i])
				return fail("region byte %" PRId64 " changed to %#x", s->off + i,
					    H.region[s->off + i]);
		return 0;
	case T_LOCAL_EQ:
		for (uint32_t i = 0; i < s->len; i++)
			if (H.local[s->off + i] != s->fill)
				return fail("local byte %" PRId64 " is %#x, expected %#x",
					    s->off + i, H.local[s->off + i], s->fill);
		return 0;
	case T_MEM_SET:
		memset(H.region + s->off, s->fill, s->len);
		return 0;
	case T_PROBES:
		return take_probes(s);
	case T_LOCAL_U64: {
		uint64_t v;

		memcpy(&v, H.local + s->off, 8);
		if (v != s->swap)
			return fail("local u64 at %" PRId64 " is %#" PRIx64 ", expected %#" PRIx64,
				    s->off, v, s->swap);
		return 0;
	}
	case T_MEM_U64: {
		uint64_t v;

		memcpy(&v, H.region + s->off, 8);
		if (v != s->swap)
			return fail("region u64 at %" PRId64 " is %#" PRIx64 ", expected %#" PRIx64,
				    s->off, v, s->swap);
		return 0;
	}
	case T_STATE:
		if (rocemu_qp_state(H.qp) != s->state)
			return fail("QP state %d, expected %d", rocemu_qp_state(H.qp), s->state);
		return 0;
	case T_WAIT:
		pump_for(s->ms);
		return 0;
	case T_UNMAP:
		if (munmap(H.rw, H.rw_len) != 0)
			return fail("munmap: %s", strerror(errno));
		H.unmapped = true;
		return 0;
	case T_DISCARD:
		pump_for(s->ms ? s->ms : QUIET_MS);
		H.cap_head = H.cap_tail;
		return 0;
	case T_MARK:
		H.mark_ns = now_ns();
		return 0;
	case T_SINCE_GE:
		if (H.last.at_ns < H.mark_ns + (uint64_t)s->ms * 1000000ull)
			return fail("frame came %.3f ms after the mark, expected >= %u ms",
				    ((double)H.last.at_ns - (double)H.mark_ns) / 1e6, s->ms);
		return 0;
	case T_KEY_VALID: {
		/* ibv_advise_mr(3) translates the key for its owner: EFAULT once invalidated */
		struct rocemu_mr_info info;
		struct ibv_sge sg;

		rocemu_mr_info(s->key == K_LOCAL ? H.mr_local : H.mr, &info);
		sg = (struct ibv_sge){.addr = info.iova, .length = 64, .lkey = info.lkey};
		if (rocemu_mr_advise(H.pd, 0, &sg, 1) != 0)
			return fail("key %#x no longer translates", info.lkey);
		return 0;
	}
	case T_DEREG: {
		struct rocemu_mr_info info;

		rocemu_mr_info(H.mr, &info);
		H.stale_rkey = info.rkey;
		rocemu_mr_dereg(H.mr);
		H.mr = NULL;
		return 0;
	}
	}
	return fail("scenario bug: unknown step kind %d", s->k);
}

/* ------------------------------------------------------------------------ */
/* One scenario                                                               */

static void drain_cqs(void)
{
	struct rocemu_wc wc;

	while (rocemu_cq_poll(H.scq, 1, &wc) > 0 || rocemu_cq_poll(H.rcq, 1, &wc) > 0)
		;
}

static int run_scenario(const struct scenario *sc)
{
	const struct qp_cfg *c = &sc->cfg;
	static const struct qp_cfg rc_cfg = {.type = IBV_QPT_RC};
	enum ibv_qp_type type = c->type ? c->type : IBV_QPT_RC;
	unsigned mr_access = c->mr_access ? c->mr_access
					  : IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
						IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC |
						IBV_ACCESS_MW_BIND;
	int rc = 0;
	unsigned i;

	H.why[0] = 0;
	H.epsn = c->psn_set ? c->epsn : 0x000100;
	H.spsn = c->psn_set ? c->spsn : 0x000800;
	memset(H.rw, CANARY_BYTE, H.rw_len);
	for (i = 0; i < REGION_LEN; i++)
		H.region[i] = (uint8_t)(i * 7 + 1);
	memcpy(H.snapshot, H.rw, H.rw_len);
	if (rocemu_mr_reg(H.pd, H.region, REGION_LEN, REGION_IOVA, mr_access, &H.mr))
		return fail("cannot register the region");
	if (rocemu_mw_alloc(H.pd, IBV_MW_TYPE_1, &H.mw1) ||
	    rocemu_mw_alloc(H.pd, IBV_MW_TYPE_2, &H.mw2)) {
		rc = fail("cannot allocate the memory windows");
		goto out;
	}
	H.qp = type == IBV_QPT_XRC_RECV ? make_xrc_target() : make_qp(type);
	H.other_qp = make_qp(IBV_QPT_RC);
	if (!H.qp || !H.other_qp) {
		rc = fail("cannot create QPs");
		goto out;
	}
	if (connect_qp(H.qp, c, H.ep.pgid) || connect_qp(H.other_qp, &rc_cfg, H.sgid)) {
		rc = -1;
		goto out;
	}
	drain_cqs();
	pump_for(2);
	H.cap_head = H.cap_tail = 0;
	H.n_posted = H.send_wc_next = 0;
	H.recv_wr_next = H.recv_wc_next = 1000;
	H.next_spsn = H.spsn;
	H.mtu = 128u << (c->mtu ? c->mtu : IBV_MTU_1024);
	H.n_ctr0 = ctr_collect(H.ctr0, 256);
	for (i = 0; sc->steps[i].k != T_END; i++) {
		rc = run_step(&sc->steps[i]);
		if (rc) {
			char tmp[512];

			snprintf(tmp, sizeof(tmp), "step %u: %s", i + 1, H.why);
			snprintf(H.why, sizeof(H.why), "%s", tmp);
			break;
		}
	}
	/* Nothing may follow the last frame a scenario checked: a spurious ACK,
	 * NAK or resend after it fails the scenario like any other wrong frame.
	 * (A scenario that ends with rocemu still sending lists those frames.) */
	if (rc == 0 && H.cap_head != H.cap_tail) {
		const struct captured *c2 = &H.cap[H.cap_head % CAP_SLOTS];

		rc = fail("after the last step rocemu sent %s PSN %#x (syndrome %#04x), unchecked",
			  op_name(c2->pkt.opcode), c2->pkt.psn, c2->pkt.aeth.syndrome);
	}
	if (rc == 0)
		rc = expect_none(&(struct step){.k = T_NONE});
	if (rc != 0 && strncmp(H.why, "step ", 5) != 0) {
		char tmp[512];

		snprintf(tmp, sizeof(tmp), "end: %s", H.why);
		snprintf(H.why, sizeof(H.why), "%s", tmp);
	}
	if (rc == 0 && !H.unmapped)
		rc = check_canaries();
out:
	if (H.qp)
		rocemu_qp_destroy(H.qp);
	if (H.other_qp)
		rocemu_qp_destroy(H.other_qp);
	H.qp = H.other_qp = NULL;
	if (H.xsrq)
		rocemu_srq_destroy(H.xsrq);
	if (H.xsrq2)
		rocemu_srq_destroy(H.xsrq2);
	if (H.xrcd)
		rocemu_xrcd_close(H.xrcd);
	if (H.xrcd2)
		rocemu_xrcd_close(H.xrcd2);
	H.xsrq = H.xsrq2 = NULL;
	H.xrcd = H.xrcd2 = NULL;
	if (H.mw1)
		rocemu_mw_dealloc(H.mw1);
	if (H.mw2)
		rocemu_mw_dealloc(H.mw2);
	H.mw1 = H.mw2 = NULL;
	if (H.mr)
		rocemu_mr_dereg(H.mr);
	H.mr = NULL;
	drain_cqs();
	pump_for(1);
	H.cap_head = H.cap_tail = 0;
	if (H.unmapped) {
		if (mmap(H.rw, H.rw_len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED &&
		    rc == 0)
			rc = fail("cannot map the region again: %s", strerror(errno));
		H.unmapped = false;
	}
	return rc;
}

/* Results file: one line per scenario, tab-separated:
 * name, group, rule, result (pass|fail|xfail|xpass), what, note. */
static void tsv_field(FILE *f, const char *s, bool last)
{
	for (; s && *s; s++)
		fputc(*s == '\t' || *s == '\n' ? ' ' : *s, f);
	fputc(last ? '\n' : '\t', f);
}

int main(int argc, char **argv)
{
	const char *group = NULL, *results = NULL;
	unsigned n_pass = 0, n_fail = 0, n_xfail = 0, n_xpass = 0, ran = 0;
	FILE *out = NULL;
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--group") && i + 1 < argc) {
			group = argv[++i];
		} else if (!strcmp(argv[i], "--results") && i + 1 < argc) {
			results = argv[++i];
		} else if (!strcmp(argv[i], "--list")) {
			for (unsigned k = 0; k < cf_n_scenarios; k++)
				printf("%s\t%s\t%s\n", cf_scenarios[k].group, cf_scenarios[k].name,
				       cf_scenarios[k].rule);
			return 0;
		} else {
			fprintf(stderr, "usage: %s [--group G] [--results FILE] [--list]\n",
				argv[0]);
			return 2;
		}
	}
	rc = setup();
	if (rc == 77)
		return 77;
	if (rc) {
		fprintf(stderr, "setup failed: %s\n", strerror(-rc));
		return 1;
	}
	if (results) {
		out = fopen(results, "w");
		if (!out) {
			perror(results);
			return 1;
		}
	}
	for (unsigned k = 0; k < cf_n_scenarios; k++) {
		const struct scenario *sc = &cf_scenarios[k];
		const char *res;
		bool ok;

		if (group && strcmp(group, sc->group) != 0)
			continue;
		ran++;
		ok = run_scenario(sc) == 0;
		if (ok && !sc->xfail)
			res = "pass", n_pass++;
		else if (ok)
			res = "xpass", n_xpass++;
		else if (sc->xfail)
			res = "xfail", n_xfail++;
		else
			res = "fail", n_fail++;
		printf("%-5s %-34s [%s] %s%s%s\n", res, sc->name, sc->rule, ok ? "" : H.why,
		       sc->xfail ? " -- known: " : "", sc->xfail ? sc->xfail : "");
		if (out) {
			tsv_field(out, sc->name, false);
			tsv_field(out, sc->group, false);
			tsv_field(out, sc->rule, false);
			tsv_field(out, res, false);
			tsv_field(out, sc->what, false);
			if (!ok && sc->xfail) {
				char note[1024];

				snprintf(note, sizeof(note), "%s (observed: %s)", sc->xfail, H.why);
				tsv_field(out, note, true);
			} else {
				tsv_field(out, ok ? (sc->xfail ? sc->xfail : "") : H.why, true);
			}
			fflush(out); /* a crash in the next scenario keeps this row */
		}
	}
	if (out)
		fclose(out);
	printf("%u scenarios: %u pass, %u fail, %u xfail, %u xpass\n", ran, n_pass, n_fail, n_xfail,
	       n_xpass);
	rocemu_port_close(H.ep.pport);
	rocemu_engine_destroy(H.ep.e);
	if (ran == 0) {
		fprintf(stderr, "no scenario in group %s\n", group ? group : "(all)");
		return 1;
	}
	return n_fail ? 1 : 0;
}
