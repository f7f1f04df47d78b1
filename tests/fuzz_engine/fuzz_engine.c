/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target over rocemu's whole receive path: port receive
 * dispatch (parse, ICRC) -> transport (responder, completer, UD) -> memory
 * (registered regions with canaries and guard pages around them).
 *
 * Set up once (LLVMFuzzerInitialize): EAL, an engine on "ring:fzring:a"
 * (10.80.0.1/24 and fd00:80::1/64), a bare peer port on "ring:fzring:b"
 * that answers ARP/ND and swallows what the engine sends, two PDs, an SRQ,
 * and seven QPs: RC, UC, UD, an RC over IPv6, an RC on the SRQ, an RC in
 * the second PD (all in PD 1 but the last); beside them an XRC target
 * (XRC_RECV) of a domain with one XRC SRQ (PD 1). Regions, each between canaries
 * and PROT_NONE guard pages: R (PD 1, every right, registered afresh for
 * every input), O (PD 1, on-demand paging), R2 (PD 2), and the local
 * buffer L the QPs receive into and send from (LOCAL_WRITE only). Both
 * progress threads are stopped.
 *
 * Per input: R is registered again (a fresh key: nothing an earlier input
 * did to it lasts), the QPs are reset and brought back to RTS (timeout 14,
 * or 1 = 8 us with config bit 0, so the transport and RNR timers expire
 * between records), receive WQEs are posted on the QPs and the SRQ, the RC
 * QPs post a SEND, a READ and a FETCH_ADD (and, config bit 1, a 136-packet
 * SEND: longer than the 128-packet send window), then each record goes
 * through the port's receive function exactly as a frame from the wire, or
 * is an action, and the engine's progress runs. Config: the input's last
 * byte. The canaries around every region and around L must survive.
 *
 * Records: [flags:1][len:2 LE][bytes:len], at most 24.
 * A frame (len without both top bits set):
 * flags bit 7: "shape" the frame: parse it (no ICRC check), point it at us
 *   (MACs, addresses; IPv6 for the IPv6 QP), bits 2-3 pick the QP (0 keep,
 *   1 RC, 2 UC, 3 UD; with bit 1 set: 0 RC over IPv6, 1 RC on the SRQ, 2 RC
 *   in PD 2, 3 the XRC target: the opcode moves to the XRC space, and with
 *   bit 5 the XRCETH names the domain's SRQ),
 *   bit 4 puts the PSN near the one the QP expects (low nibble of the PSN
 *   as a signed offset), bit 5 uses a region's rkey (the frame's rkey, low
 *   2 bits: 0-1 R, 2 O, 3 R2), bit 6 puts the RETH/AtomicETH va inside or
 *   near that region; rebuild it.
 * flags bit 0: recompute the ICRC (else the frame goes as it is).
 * An action (len & 0xC000 == 0xC000; len & 0x3fff argument bytes follow), flags % 8:
 *   0 deregister R (its key goes stale), 1 register R again, 2 move a QP
 *   (argument byte 0) to ERR, SQD, RESET then RTS again, or RTS (byte 1),
 *   3 wait (byte 0 % 4) x 100 us, 4 post more work on a QP (byte 0: QP,
 *   byte 1: SEND, WRITE, READ, atomic, long SEND), 5 register O again,
 *   6 poll the CQs, 7 run progress passes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rte_mbuf.h>

#include "../../emulator/port/port_internal.h"
#include "../../emulator/transport/rocemu_transport.h"
#include "../../emulator/wire/roce_wire.h"
#include "../conformance/engine_peer.h"

#define FZ_REGION_LEN  8192u
#define FZ_REGION_IOVA 0x5a5a00000000ull
#define FZ_ODP_IOVA    0x5a5b00000000ull
#define FZ_R2_IOVA     0x5a5c00000000ull
#define FZ_LOCAL_LEN   (256u * 1024u)
#define FZ_CANARY      0xC5
#define FZ_PEER_QPN    0x000BEEu
#define FZ_EPSN	       0x000100u
#define FZ_SPSN	       0x001000u
#define FZ_MAX_RECORDS 24
#define FZ_FRAME_MAX   9000
#define FZ_ACTION      0xC000u

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
void fuzz_replay_report(FILE *out);

/* Memory between canaries: PROT_NONE | 2 KiB canary | len | 6 KiB canary | PROT_NONE. */
struct guarded {
	uint8_t *rw, *buf;
	size_t rw_len, len;
};

enum { QP_RC, QP_UC, QP_UD, QP_RC6, QP_SRQ, QP_PD2, QP_COUNT };

static struct {
	bool ready;
	struct engine_peer ep;
	uint8_t egid6[16], pgid6[16];
	int egid6_index;
	struct rocemu_pd *pd, *pd2;
	struct rocemu_cq *scq, *rcq;
	struct rocemu_srq *srq;
	struct rocemu_qp *qp[QP_COUNT];
	struct rocemu_xrcd *xrcd;
	struct rocemu_srq *xsrq; /* the XRC target's SRQ (its CQ: rcq) */
	struct rocemu_qp *xqp;	 /* the XRC target */
	struct rocemu_mr *mr, *mr_odp, *mr_r2, *mr_local, *mr_local2;
	struct guarded region, odp, r2, local;
	uint8_t cfg;
	uint64_t peer_frames;
} F;

static void peer_rx(void *ctx, struct rte_mbuf **pkts, struct roce_pkt *descs, uint16_t n)
{
	(void)ctx;
	(void)descs;
	for (uint16_t i = 0; i < n; i++)
		rte_pktmbuf_free(pkts[i]);
	F.peer_frames += n;
}

static void die(const char *what)
{
	fprintf(stderr, "fuzz_engine: set-up failed: %s\n", what);
	exit(1);
}

static void guarded_alloc(struct guarded *g, size_t len)
{
	size_t pg = 4096, span = (2048 + len + 6144 + pg - 1) / pg * pg;
	uint8_t *map =
	    mmap(NULL, span + 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (map == MAP_FAILED)
		die("mmap");
	mprotect(map, pg, PROT_NONE);
	mprotect(map + pg + span, pg, PROT_NONE);
	g->rw = map + pg;
	g->rw_len = span;
	g->buf = g->rw + 2048;
	g->len = len;
	memset(g->rw, FZ_CANARY, g->rw_len);
	for (size_t i = 0; i < len; i++)
		g->buf[i] = (uint8_t)(i * 7 + 1);
}

static void guarded_check(const struct guarded *g, const char *what)
{
	static uint8_t canary[8192];
	size_t before = (size_t)(g->buf - g->rw), after = g->rw_len - before - g->len;

	if (canary[0] != FZ_CANARY)
		memset(canary, FZ_CANARY, sizeof(canary));
	if (memcmp(g->rw, canary, before) != 0 ||
	    memcmp(g->buf + g->len, canary, after < sizeof(canary) ? after : sizeof(canary)) != 0) {
		fprintf(stderr, "fuzz_engine: a byte outside %s changed\n", what);
		abort();
	}
}

static struct rocemu_qp *make_qp(enum ibv_qp_type type, struct rocemu_pd *pd,
				 struct rocemu_srq *srq)
{
	struct rocemu_qp_init init = {
	    .qp_type = type,
	    .send_cq = F.scq,
	    .recv_cq = F.rcq,
	    .srq = srq,
	    .cap = {.max_send_wr = 16,
		    .max_recv_wr = srq ? 0 : 16,
		    .max_send_sge = 2,
		    .max_recv_sge = 2},
	};
	struct rocemu_qp *qp = NULL;

	if (rocemu_qp_create(pd, &init, &qp) < 0)
		die("qp create");
	return qp;
}

static enum ibv_qp_type qp_type(unsigned i)
{
	return i == QP_UC ? IBV_QPT_UC : i == QP_UD ? IBV_QPT_UD : IBV_QPT_RC;
}

/* RESET -> INIT -> RTR -> RTS with fixed attributes (every input starts alike);
 * i == QP_COUNT: the XRC target. */
static void qp_restart(unsigned i)
{
	struct rocemu_qp *qp = i == QP_COUNT ? F.xqp : F.qp[i];
	enum ibv_qp_type type = i == QP_COUNT ? IBV_QPT_XRC_RECV : qp_type(i);
	bool short_timers = F.cfg & 1;
	struct ibv_qp_attr a = {0};
	int mask;

	a.qp_state = IBV_QPS_RESET;
	rocemu_qp_modify(qp, &a, IBV_QP_STATE);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (type == IBV_QPT_UD) {
		a.qkey = 0x11111111u;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags =
		    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	if (rocemu_qp_modify(qp, &a, mask))
		die("INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (type != IBV_QPT_UD) {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = FZ_PEER_QPN;
		a.rq_psn = FZ_EPSN;
		a.ah_attr.is_global = 1;
		a.ah_attr.port_num = 1;
		a.ah_attr.grh.hop_limit = 64;
		if (i == QP_RC6) {
			a.ah_attr.grh.sgid_index = (uint8_t)F.egid6_index;
			memcpy(a.ah_attr.grh.dgid.raw, F.pgid6, 16);
		} else {
			a.ah_attr.grh.sgid_index = (uint8_t)F.ep.egid_index;
			memcpy(a.ah_attr.grh.dgid.raw, F.ep.pgid, 16);
		}
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (type == IBV_QPT_RC || type == IBV_QPT_XRC_RECV) {
			a.max_dest_rd_atomic = 4;
			a.min_rnr_timer = short_timers ? 1 : 14;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
	}
	if (rocemu_qp_modify(qp, &a, mask))
		die("RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = FZ_SPSN;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (type == IBV_QPT_XRC_RECV) {
		a.timeout = short_timers ? 1 : 14;
		mask |= IBV_QP_TIMEOUT;
	} else if (type == IBV_QPT_RC) {
		a.timeout = short_timers ? 1 : 14;
		a.retry_cnt = short_timers ? 2 : 7;
		a.rnr_retry = short_timers ? 1 : 7;
		a.max_rd_atomic = 4;
		mask |=
		    IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	if (rocemu_qp_modify(qp, &a, mask))
		die("RTS");
}

static void drain(void)
{
	struct rocemu_wc wc[16];

	for (int i = 0; i < 4; i++) {
		rocemu_port_progress(F.ep.eport);
		rocemu_port_progress(F.ep.pport);
	}
	while (rocemu_cq_poll(F.scq, 16, wc) > 0 || rocemu_cq_poll(F.rcq, 16, wc) > 0)
		;
}

/* The engine at 10.80.0.1 and fd00:80::1, the peer at .2 and ::2. */
static void open_engine_and_peer(void)
{
	struct rocemu_port_upper up = {.rx = peer_rx};
	struct rocemu_port_config cfg;
	char err[256];

	if (engine_peer_config(&cfg, "fzring", 1, "10.80.0.1", 0x80, err, sizeof(err)) ||
	    rocemu_port_config_set(&cfg, "ip", "fd00:80::1/64", err, sizeof(err)) ||
	    rocemu_engine_create(&cfg, &F.ep.e, err, sizeof(err)))
		die(err);
	F.ep.eport = rocemu_engine_port(F.ep.e);
	if (engine_peer_config(&cfg, "fzring", 2, "10.80.0.2", 0x80, err, sizeof(err)) ||
	    rocemu_port_config_set(&cfg, "ip", "fd00:80::2/64", err, sizeof(err)) ||
	    rocemu_port_open(&cfg, &F.ep.pport, err, sizeof(err)))
		die(err);
	rocemu_port_set_upper(F.ep.pport, &up);
	rocemu_port_progress_thread_stop(F.ep.eport);
	rocemu_port_progress_thread_stop(F.ep.pport);
	rocemu_port_mac(F.ep.eport, F.ep.emac);
	rocemu_port_mac(F.ep.pport, F.ep.pmac);
	rocemu_gid_parse("10.80.0.1", F.ep.egid);
	rocemu_gid_parse("10.80.0.2", F.ep.pgid);
	rocemu_gid_parse("fd00:80::1", F.egid6);
	rocemu_gid_parse("fd00:80::2", F.pgid6);
	F.ep.egid_index = rocemu_port_gid_find(F.ep.eport, F.ep.egid);
	F.egid6_index = rocemu_port_gid_find(F.ep.eport, F.egid6);
	if (F.ep.egid_index < 0 || F.egid6_index < 0)
		die("GID table");
}

static void reg_region(void)
{
	if (F.mr)
		rocemu_mr_dereg(F.mr);
	F.mr = NULL;
	if (rocemu_mr_reg(F.pd, F.region.buf, FZ_REGION_LEN, FZ_REGION_IOVA,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
			      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC,
			  &F.mr))
		die("mr");
}

static void reg_odp(void)
{
	if (F.mr_odp)
		rocemu_mr_dereg(F.mr_odp);
	F.mr_odp = NULL;
	if (rocemu_mr_reg(F.pd, F.odp.buf, FZ_REGION_LEN, FZ_ODP_IOVA,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
			      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC |
			      IBV_ACCESS_ON_DEMAND,
			  &F.mr_odp))
		die("odp mr");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const unsigned all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
			     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;

	(void)argc;
	(void)argv;
	if (rocemu_eal_init() < 0) {
		fprintf(stderr, "fuzz_engine: EAL cannot start: %s\n", rocemu_eal_error());
		exit(1);
	}
	open_engine_and_peer();
	if (rocemu_pd_alloc(F.ep.e, &F.pd) || rocemu_pd_alloc(F.ep.e, &F.pd2) ||
	    rocemu_cq_create(F.ep.e, 4096, NULL, NULL, NULL, &F.scq) ||
	    rocemu_cq_create(F.ep.e, 4096, NULL, NULL, NULL, &F.rcq) ||
	    rocemu_srq_create(F.pd, 64, 2, 0, NULL, &F.srq))
		die("pd/cq/srq");
	guarded_alloc(&F.region, FZ_REGION_LEN);
	guarded_alloc(&F.odp, FZ_REGION_LEN);
	guarded_alloc(&F.r2, FZ_REGION_LEN);
	guarded_alloc(&F.local, FZ_LOCAL_LEN);
	reg_region();
	reg_odp();
	if (rocemu_mr_reg(F.pd2, F.r2.buf, FZ_REGION_LEN, FZ_R2_IOVA, all, &F.mr_r2) ||
	    rocemu_mr_reg(F.pd, F.local.buf, FZ_LOCAL_LEN, (uint64_t)(uintptr_t)F.local.buf,
			  IBV_ACCESS_LOCAL_WRITE, &F.mr_local) ||
	    rocemu_mr_reg(F.pd2, F.local.buf, FZ_LOCAL_LEN, (uint64_t)(uintptr_t)F.local.buf,
			  IBV_ACCESS_LOCAL_WRITE, &F.mr_local2))
		die("mr");
	for (unsigned i = 0; i < QP_COUNT; i++)
		F.qp[i] =
		    make_qp(qp_type(i), i == QP_PD2 ? F.pd2 : F.pd, i == QP_SRQ ? F.srq : NULL);
	struct rocemu_srq_init xs = {.pd = F.pd, .max_wr = 64, .max_sge = 2, .cq = F.rcq};
	struct rocemu_qp_init xq = {.qp_type = IBV_QPT_XRC_RECV};
	if (rocemu_xrcd_open(F.ep.e, false, 0, 0, false, false, &F.xrcd))
		die("xrcd");
	xs.xrcd = xq.xrcd = F.xrcd;
	if (rocemu_srq_create_ex(&xs, &F.xsrq) || rocemu_qp_create(NULL, &xq, &F.xqp))
		die("xrc srq/qp");
	F.ready = true;
	return 0;
}

static uint32_t lkey_for(unsigned qp)
{
	struct rocemu_mr_info li;

	rocemu_mr_info(qp == QP_PD2 ? F.mr_local2 : F.mr_local, &li);
	return li.lkey;
}

/* One send WR on QP i: kind 0 SEND, 1 WRITE, 2 READ, 3 FETCH_ADD, 4 a
 * 136 KiB SEND (136 packets at MTU 1024: longer than the send window). */
static void post_one(unsigned i, unsigned kind)
{
	struct rocemu_send_wr wr = {0};
	struct ibv_sge sg = {
	    .addr = (uintptr_t)(F.local.buf + 131072), .length = 2048, .lkey = lkey_for(i)};

	if (qp_type(i) == IBV_QPT_UD)
		return; /* UD needs an AH: the receive side is what is fuzzed */
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.remote_addr = 0x1000;
	wr.rkey = 0x77;
	switch (kind % 5) {
	case 0:
		wr.opcode = IBV_WR_SEND;
		break;
	case 1:
		wr.opcode = IBV_WR_RDMA_WRITE;
		break;
	case 2:
		if (qp_type(i) != IBV_QPT_RC)
			return;
		wr.opcode = IBV_WR_RDMA_READ;
		break;
	case 3:
		if (qp_type(i) != IBV_QPT_RC)
			return;
		sg.length = 8;
		wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.compare_add = 1;
		break;
	default:
		sg.addr = (uintptr_t)F.local.buf;
		sg.length = 136 * 1024;
		wr.opcode = IBV_WR_SEND;
		break;
	}
	rocemu_qp_post_send(F.qp[i], &wr);
}

static void post_work(void)
{
	for (unsigned i = 0; i < QP_COUNT; i++) {
		for (int k = 0; k < 4 && i != QP_SRQ; k++) {
			struct ibv_sge sg = {.addr = (uintptr_t)(F.local.buf + 4096 * (k + 4 * i)),
					     .length = 4096,
					     .lkey = lkey_for(i)};

			rocemu_qp_post_recv(F.qp[i], 10 * i + k, &sg, 1);
		}
	}
	for (int k = 0; k < 4; k++) {
		struct ibv_sge sg = {.addr = (uintptr_t)(F.local.buf + 98304 + 4096 * k),
				     .length = 4096,
				     .lkey = lkey_for(QP_RC)};

		rocemu_srq_post_recv(F.srq, 100 + k, &sg, 1);
		sg.addr += 4 * 4096;
		rocemu_srq_post_recv(F.xsrq, 200 + k, &sg, 1);
	}
	/* RC: PSNs SPSN (SEND), SPSN+1 (READ of 2048 bytes: 2 PSNs), SPSN+3 (FETCH_ADD) */
	for (unsigned i = 0; i < QP_COUNT; i++) {
		if (qp_type(i) != IBV_QPT_RC && i != QP_UC)
			continue;
		post_one(i, 0);
		post_one(i, 2);
		post_one(i, 3);
	}
	if (F.cfg & 2)
		post_one(QP_RC, 4);
}

/* flags bits 2-3, and bit 1 for the second four */
static unsigned pick_qp(uint8_t flags)
{
	switch (((flags >> 2) & 3) | ((flags & 2) << 1)) {
	case 1:
		return QP_RC;
	case 2:
		return QP_UC;
	case 3:
		return QP_UD;
	case 4:
		return QP_RC6;
	case 5:
		return QP_SRQ;
	case 6:
		return QP_PD2;
	case 7:
		return QP_COUNT + 1; /* the XRC target */
	default:
		return QP_COUNT;
	}
}

/* Parse (no ICRC check), steer at our QPs and regions, rebuild. Returns the
 * new length, or the old one if the frame does not parse far enough to be shaped. */
static uint32_t shape(uint8_t *buf, uint32_t len, uint8_t flags)
{
	static uint8_t out[FZ_FRAME_MAX];
	struct roce_pkt p;
	struct rocemu_qp *qp = NULL;
	struct rocemu_mr_info ri;
	struct rocemu_mr *mr;
	uint64_t base;
	unsigned sel;
	uint32_t flen;
	int hl;

	if (roce_parse(buf, len, 0, &p) != ROCE_PARSE_OK || p.path.has_vlan)
		return len;
	sel = pick_qp(flags);
	if (sel < QP_COUNT)
		qp = F.qp[sel];
	if (sel == QP_COUNT + 1) {
		/* the XRC target: a request in the XRC opcode space, naming its SRQ
		 * with flags bit 5 (else whatever the frame's XRCETH said) */
		const struct roce_opcode_info *x =
		    roce_opcode_info(ROCE_TRANSPORT_XRC | (p.opcode & 0x1F));

		qp = F.xqp;
		if (x && !(p.op->flags & ROCE_OPF_CNP)) {
			p.opcode = ROCE_TRANSPORT_XRC | (p.opcode & 0x1F);
			p.op = x;
		}
		if (flags & 0x20)
			p.xrc_srqn = rocemu_srq_num(F.xsrq);
	}
	memcpy(p.path.dst_mac, F.ep.emac, 6);
	memcpy(p.path.src_mac, F.ep.pmac, 6);
	if (sel == QP_RC6 || (sel == QP_COUNT && p.path.ip_version == 6)) {
		p.path.ip_version = 6;
		memcpy(p.path.src_gid, F.pgid6, 16);
		memcpy(p.path.dst_gid, F.egid6, 16);
	} else {
		p.path.ip_version = 4;
		memcpy(p.path.src_gid, F.ep.pgid, 16);
		memcpy(p.path.dst_gid, F.ep.egid, 16);
	}
	if (qp)
		p.dqpn = rocemu_qp_num(qp);
	if (flags & 0x10) {
		struct rocemu_qp *t = qp ? qp : rocemu_engine_qp_lookup(F.ep.e, p.dqpn);
		int32_t delta = (int32_t)(p.psn & 0xF) - ((p.psn & 0x8) ? 16 : 0);

		if (t) {
			uint32_t b = (p.op->flags & ROCE_OPF_RESPONSE) ? t->comp.psn : t->resp.epsn;

			p.psn = roce_psn_add(b, (uint32_t)delta & ROCE_PSN_MASK);
		}
	}
	/* which region: the rkey's low 2 bits */
	switch (((flags & 0x20) ? p.reth.rkey | p.atomic.rkey | p.ieth_rkey : 0) & 3) {
	case 2:
		mr = F.mr_odp;
		base = FZ_ODP_IOVA;
		break;
	case 3:
		mr = F.mr_r2;
		base = FZ_R2_IOVA;
		break;
	default:
		mr = F.mr;
		base = FZ_REGION_IOVA;
		break;
	}
	if ((flags & 0x20) && mr) {
		rocemu_mr_info(mr, &ri);
		p.reth.rkey = ri.rkey;
		p.atomic.rkey = ri.rkey;
		p.ieth_rkey = ri.rkey;
	}
	if (flags & 0x40) {
		p.reth.va = base + (p.reth.va & 0x3FFF) - 0x800;
		p.atomic.va = base + (p.atomic.va & 0x3FFF) - 0x800;
	}
	if (p.payload_len > sizeof(out) - ROCE_MAX_HDR_LEN - 8)
		return len;
	hl = roce_build_headers(out, sizeof(out), &p);
	if (hl < 0)
		return len;
	memcpy(out + hl, buf + p.payload_off, p.payload_len);
	flen = roce_frame_len(&p);
	if (flen > FZ_FRAME_MAX || roce_finish(out, flen, &p) < 0)
		return len;
	memcpy(buf, out, flen);
	return flen;
}

static void inject(const uint8_t *frame, uint32_t len, uint8_t flags)
{
	static uint8_t buf[FZ_FRAME_MAX];
	struct rte_mbuf *m;
	char *dst;

	if (len > FZ_FRAME_MAX)
		len = FZ_FRAME_MAX;
	memcpy(buf, frame, len);
	if (flags & 0x80)
		len = shape(buf, len, flags);
	if ((flags & 0x01) && len >= 14 + 20 + 8 + 12 + 4)
		roce_icrc_store(buf, len, roce_icrc_compute(buf, 14, len));
	rocemu_port_lock(F.ep.eport);
	m = rocemu_port_alloc_mbuf(F.ep.eport);
	if (m && len <= rte_pktmbuf_tailroom(m) && len > 0) {
		dst = rte_pktmbuf_append(m, (uint16_t)len);
		memcpy(dst, buf, len);
		port_rx_frame(F.ep.eport, m, rocemu_now_ns());
		port_rx_flush_upper(F.ep.eport);
	} else if (m) {
		rte_pktmbuf_free(m);
	}
	rocemu_port_unlock(F.ep.eport);
}

static void modify_qp(unsigned i, unsigned how)
{
	struct ibv_qp_attr a = {0};

	switch (how % 4) {
	case 0:
		a.qp_state = IBV_QPS_ERR;
		rocemu_qp_modify(F.qp[i], &a, IBV_QP_STATE);
		break;
	case 1:
		a.qp_state = IBV_QPS_SQD;
		a.en_sqd_async_notify = 1;
		rocemu_qp_modify(F.qp[i], &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY);
		break;
	case 2:
		qp_restart(i); /* through RESET */
		break;
	default:
		a.qp_state = IBV_QPS_RTS;
		rocemu_qp_modify(F.qp[i], &a, IBV_QP_STATE);
		break;
	}
}

static void act(uint8_t code, const uint8_t *arg, uint32_t n)
{
	uint8_t a0 = n > 0 ? arg[0] : 0, a1 = n > 1 ? arg[1] : 0;
	struct rocemu_wc wc[16];

	switch (code % 8) {
	case 0:
		if (F.mr)
			rocemu_mr_dereg(F.mr);
		F.mr = NULL;
		break;
	case 1:
		reg_region();
		break;
	case 2:
		modify_qp(a0 % QP_COUNT, a1);
		break;
	case 3:
		usleep(100u * (a0 % 4));
		break;
	case 4:
		post_one(a0 % QP_COUNT, a1);
		break;
	case 5:
		reg_odp();
		break;
	case 6:
		while (rocemu_cq_poll(F.scq, 16, wc) > 0 || rocemu_cq_poll(F.rcq, 16, wc) > 0)
			;
		break;
	default:
		for (unsigned k = 0; k < 1u + a0 % 8u; k++) {
			rocemu_port_progress(F.ep.eport);
			rocemu_port_progress(F.ep.pport);
		}
		break;
	}
}

static void check_canaries(void)
{
	guarded_check(&F.region, "region R");
	guarded_check(&F.odp, "ODP region O");
	guarded_check(&F.r2, "region R2 (PD 2)");
	guarded_check(&F.local, "the local buffer L");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	if (!F.ready)
		LLVMFuzzerInitialize(NULL, NULL);
	F.cfg = size ? data[size - 1] : 0;
	for (unsigned i = 0; i <= QP_COUNT; i++) /* and the XRC target */
		qp_restart(i);
	drain();
	reg_region();
	if (!F.mr_odp)
		reg_odp();
	post_work();
	rocemu_port_progress(F.ep.eport);
	for (int r = 0; r < FZ_MAX_RECORDS && off + 3 <= size; r++) {
		uint8_t flags = data[off];
		uint32_t len = (uint32_t)data[off + 1] | (uint32_t)data[off + 2] << 8;
		bool action = (len & FZ_ACTION) == FZ_ACTION;

		off += 3;
		if (action)
			len &= ~FZ_ACTION;
		if (len > size - off)
			len = (uint32_t)(size - off);
		if (action)
			act(flags, data + off, len);
		else
			inject(data + off, len, flags);
		off += len;
		rocemu_port_progress(F.ep.eport);
	}
	drain();
	check_canaries();
	return 0;
}

/* The engine's non-zero counters: shows how deep the inputs went. */
void fuzz_replay_report(FILE *out)
{
	struct rocemu_counter c[256];
	unsigned n = rocemu_engine_counters(F.ep.e, c, 256);

	for (unsigned i = 0; i < n && i < 256; i++)
		if (c[i].value)
			fprintf(out, "  %s %llu\n", c[i].name, (unsigned long long)c[i].value);
	n = rocemu_port_counters(F.ep.eport, c, 256);
	for (unsigned i = 0; i < n && i < 256; i++)
		if (c[i].value && strncmp(c[i].name, "drop_", 5) == 0)
			fprintf(out, "  port %s %llu\n", c[i].name, (unsigned long long)c[i].value);
}
