/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target over rocemu's whole receive path: port receive
 * dispatch (parse, ICRC) -> transport (responder, completer, UD) -> memory
 * (a registered region with canaries and guard pages around it).
 *
 * Set up once (LLVMFuzzerInitialize): EAL, an engine on "ring:fzring:a", a
 * bare peer port on "ring:fzring:b" that answers ARP and swallows what the
 * engine sends, one RC, one UC and one UD QP in RTS. Both progress threads
 * are stopped. Per input: the QPs are reset and brought back to RTS (so an
 * input behaves the same whenever it runs), the RC QP posts a SEND, a READ
 * and a FETCH_ADD (so response frames meet a requester with work in
 * flight), receive WQEs are posted, then each record of the input goes
 * through the port's receive function exactly as a frame from the wire,
 * and the engine's progress runs. Canary bytes around the region must
 * survive every input.
 *
 * Input: records [flags:1][len:2 LE][frame:len], at most 16.
 * flags bit 7: "shape" the frame: parse it (no ICRC check), then point it at
 *   us (MACs, IPv4 addresses), bits 2-3 pick the QP (0 keep, 1 RC, 2 UC,
 *   3 UD), bit 4 puts the PSN near the one the QP expects (low nibble of
 *   the PSN as a signed offset), bit 5 uses the region's rkey, bit 6 puts
 *   the RETH/AtomicETH va inside or near the region; rebuild it.
 * flags bit 0: recompute the ICRC (else the frame goes as it is).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <rte_mbuf.h>

#include "../../emulator/port/port_internal.h"
#include "../../emulator/transport/rocemu_transport.h"
#include "../../emulator/wire/roce_wire.h"
#include "../conformance/engine_peer.h"

#define FZ_REGION_LEN  8192u
#define FZ_REGION_IOVA 0x5a5a00000000ull
#define FZ_CANARY      0xC5
#define FZ_PEER_QPN    0x000BEEu
#define FZ_EPSN	       0x000100u
#define FZ_SPSN	       0x001000u
#define FZ_MAX_RECORDS 16
#define FZ_FRAME_MAX   9000

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
void fuzz_engine_report(FILE *out);

static struct {
	bool ready;
	struct engine_peer ep;
	struct rocemu_pd *pd;
	struct rocemu_cq *scq, *rcq;
	struct rocemu_qp *rc, *uc, *ud;
	struct rocemu_mr *mr, *mr_local;
	uint8_t *rw, *region, *local;
	size_t rw_len;
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

static struct rocemu_qp *make_qp(enum ibv_qp_type type)
{
	struct rocemu_qp_init init = {
	    .qp_type = type,
	    .send_cq = F.scq,
	    .recv_cq = F.rcq,
	    .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2, .max_recv_sge = 2},
	};
	struct rocemu_qp *qp = NULL;

	if (rocemu_qp_create(F.pd, &init, &qp) < 0)
		die("qp create");
	return qp;
}

/* RESET -> INIT -> RTR -> RTS with fixed attributes (every input starts alike). */
static void qp_restart(struct rocemu_qp *qp, enum ibv_qp_type type)
{
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
		a.ah_attr.grh.sgid_index = (uint8_t)F.ep.egid_index;
		memcpy(a.ah_attr.grh.dgid.raw, F.ep.pgid, 16);
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (type == IBV_QPT_RC) {
			a.max_dest_rd_atomic = 4;
			a.min_rnr_timer = 1;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
	}
	if (rocemu_qp_modify(qp, &a, mask))
		die("RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = FZ_SPSN;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (type == IBV_QPT_RC) {
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
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

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct rocemu_port_upper up = {.rx = peer_rx};
	uint8_t *map;
	char err[256];

	(void)argc;
	(void)argv;
	if (rocemu_eal_init() < 0) {
		fprintf(stderr, "fuzz_engine: EAL cannot start: %s\n", rocemu_eal_error());
		exit(1);
	}
	if (engine_peer_open(&F.ep, "fzring", "10.80.0.1", "10.80.0.2", 0x80, &up, err,
			     sizeof(err)) < 0)
		die(err);
	if (rocemu_pd_alloc(F.ep.e, &F.pd) ||
	    rocemu_cq_create(F.ep.e, 1024, NULL, NULL, NULL, &F.scq) ||
	    rocemu_cq_create(F.ep.e, 1024, NULL, NULL, NULL, &F.rcq))
		die("pd/cq");

	/* PROT_NONE | 2 KiB canary | region | 6 KiB canary | PROT_NONE */
	map = mmap(NULL, 6 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED)
		die("mmap");
	mprotect(map, 4096, PROT_NONE);
	mprotect(map + 5 * 4096, 4096, PROT_NONE);
	F.rw = map + 4096;
	F.rw_len = 4 * 4096;
	F.region = F.rw + 2048;
	memset(F.rw, FZ_CANARY, F.rw_len);
	for (uint32_t i = 0; i < FZ_REGION_LEN; i++)
		F.region[i] = (uint8_t)(i * 7 + 1);
	F.local = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (F.local == MAP_FAILED)
		die("mmap");
	if (rocemu_mr_reg(F.pd, F.region, FZ_REGION_LEN, FZ_REGION_IOVA,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
			      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC,
			  &F.mr) ||
	    rocemu_mr_reg(F.pd, F.local, 65536, (uint64_t)(uintptr_t)F.local,
			  IBV_ACCESS_LOCAL_WRITE, &F.mr_local))
		die("mr");
	F.rc = make_qp(IBV_QPT_RC);
	F.uc = make_qp(IBV_QPT_UC);
	F.ud = make_qp(IBV_QPT_UD);
	F.ready = true;
	return 0;
}

static void check_canaries(void)
{
	static uint8_t canary[4 * 4096];
	size_t before = (size_t)(F.region - F.rw), after = F.rw_len - before - FZ_REGION_LEN;

	if (canary[0] != FZ_CANARY)
		memset(canary, FZ_CANARY, sizeof(canary));
	if (memcmp(F.rw, canary, before) != 0 ||
	    memcmp(F.region + FZ_REGION_LEN, canary, after) != 0) {
		fprintf(stderr, "fuzz_engine: a byte outside the registered region changed\n");
		abort();
	}
}

static void post_work(void)
{
	struct rocemu_mr_info li, ri;
	struct ibv_sge sg;
	struct rocemu_send_wr wr = {0};

	rocemu_mr_info(F.mr_local, &li);
	rocemu_mr_info(F.mr, &ri);
	for (int i = 0; i < 4; i++) {
		sg = (struct ibv_sge){
		    .addr = (uintptr_t)(F.local + 4096 * i), .length = 4096, .lkey = li.lkey};
		rocemu_qp_post_recv(F.rc, 10 + i, &sg, 1);
		rocemu_qp_post_recv(F.uc, 20 + i, &sg, 1);
		rocemu_qp_post_recv(F.ud, 30 + i, &sg, 1);
	}
	sg =
	    (struct ibv_sge){.addr = (uintptr_t)(F.local + 32768), .length = 2048, .lkey = li.lkey};
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.opcode = IBV_WR_SEND; /* PSNs SPSN, SPSN+1 */
	rocemu_qp_post_send(F.rc, &wr);
	wr.opcode = IBV_WR_RDMA_READ; /* SPSN+2 .. SPSN+3 */
	wr.remote_addr = 0x1000;
	wr.rkey = 0x77;
	rocemu_qp_post_send(F.rc, &wr);
	sg.length = 8;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD; /* SPSN+4 */
	wr.compare_add = 1;
	rocemu_qp_post_send(F.rc, &wr);
}

static struct rocemu_qp *pick_qp(unsigned sel)
{
	switch (sel & 3) {
	case 1:
		return F.rc;
	case 2:
		return F.uc;
	case 3:
		return F.ud;
	default:
		return NULL;
	}
}

/* Parse (no ICRC check), steer at our QPs and region, rebuild. Returns the new length, or the
 * old one if the frame does not parse far enough to be shaped. */
static uint32_t shape(uint8_t *buf, uint32_t len, uint8_t flags)
{
	static uint8_t out[FZ_FRAME_MAX];
	struct roce_pkt p;
	struct rocemu_qp *qp;
	struct rocemu_mr_info ri;
	uint32_t flen;
	int hl;

	if (roce_parse(buf, len, 0, &p) != ROCE_PARSE_OK || p.path.ip_version != 4 ||
	    p.path.has_vlan)
		return len;
	memcpy(p.path.dst_mac, F.ep.emac, 6);
	memcpy(p.path.src_mac, F.ep.pmac, 6);
	memcpy(p.path.src_gid, F.ep.pgid, 16);
	memcpy(p.path.dst_gid, F.ep.egid, 16);
	qp = pick_qp(flags >> 2);
	if (qp)
		p.dqpn = rocemu_qp_num(qp);
	if (flags & 0x10) {
		struct rocemu_qp *t = qp ? qp : rocemu_engine_qp_lookup(F.ep.e, p.dqpn);
		int32_t delta = (int32_t)(p.psn & 0xF) - ((p.psn & 0x8) ? 16 : 0);

		if (t) {
			uint32_t base =
			    (p.op->flags & ROCE_OPF_RESPONSE) ? t->comp.psn : t->resp.epsn;

			p.psn = roce_psn_add(base, (uint32_t)delta & ROCE_PSN_MASK);
		}
	}
	rocemu_mr_info(F.mr, &ri);
	if (flags & 0x20) {
		p.reth.rkey = ri.rkey;
		p.atomic.rkey = ri.rkey;
		p.ieth_rkey = ri.rkey;
	}
	if (flags & 0x40) {
		p.reth.va = FZ_REGION_IOVA + (p.reth.va & 0x3FFF) - 0x800;
		p.atomic.va = FZ_REGION_IOVA + (p.atomic.va & 0x3FFF) - 0x800;
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	if (!F.ready)
		LLVMFuzzerInitialize(NULL, NULL);
	qp_restart(F.rc, IBV_QPT_RC);
	qp_restart(F.uc, IBV_QPT_UC);
	qp_restart(F.ud, IBV_QPT_UD);
	drain();
	post_work();
	rocemu_port_progress(F.ep.eport);
	for (int r = 0; r < FZ_MAX_RECORDS && off + 3 <= size; r++) {
		uint8_t flags = data[off];
		uint32_t len = (uint32_t)data[off + 1] | (uint32_t)data[off + 2] << 8;

		off += 3;
		if (len > size - off)
			len = (uint32_t)(size - off);
		inject(data + off, len, flags);
		off += len;
		rocemu_port_progress(F.ep.eport);
	}
	drain();
	check_canaries();
	return 0;
}

/* The engine's non-zero counters: shows how deep the inputs went. */
void fuzz_engine_report(FILE *out)
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
