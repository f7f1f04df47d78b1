/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Goodput of RC over a net_ring pair, loss-free and then with the port's
 * fault injector dropping a share of the frames on both nodes' transmit side
 * (issue 5: goodput under 1% loss against loss-free goodput). A measurement,
 * not a test: it prints both numbers and their ratio. On a shared machine the
 * loss-free rate alone swings by 2-4x between runs, so each round sets up
 * both links at once and lets them take turns in short slices (`--slice`,
 * 0.1 s: each drains what it has in flight before the other starts) until
 * each has had `--seconds`: both see the same load. The ratio is given per
 * round, as the median of the rounds, and as the ratio of sums.
 *
 *   transport_goodput [--op write|read|send] [--mtu 256..4096] [--size BYTES]
 *                     [--loss-ppm N] [--seconds S] [--depth N] [--rounds N]
 *                     [--slice S]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tests/transport/harness.h"

struct opts {
	enum ibv_wr_opcode op;
	enum ibv_mtu mtu;
	uint32_t size;
	uint32_t loss_ppm;
	double seconds;
	unsigned depth;
	unsigned rounds;
	double slice;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int post_one(const struct opts *o, struct rocemu_qp *qa, struct rocemu_qp *qb, uint64_t i,
		    uint8_t *src, uint8_t *dst, uint32_t lkey_a, uint32_t lkey_b, uint32_t rkey_b)
{
	size_t slot = (size_t)(i % o->depth) * o->size;
	struct ibv_sge sge = {(uintptr_t)src + slot, o->size, lkey_a};
	struct rocemu_send_wr wr = {
	    .wr_id = i,
	    .opcode = o->op,
	    .send_flags = IBV_SEND_SIGNALED,
	    .sg_list = &sge,
	    .num_sge = 1,
	    .remote_addr = (uintptr_t)dst + slot,
	    .rkey = rkey_b,
	};

	if (o->op == IBV_WR_SEND) {
		struct ibv_sge rs = {(uintptr_t)dst + slot, o->size, lkey_b};
		int rc = rocemu_qp_post_recv(qb, i, &rs, 1);

		if (rc)
			return rc;
	}
	return rocemu_qp_post_send(qa, &wr);
}

/** One RC connection over its own ring pair: loss-free or with the injector. */
struct link {
	struct node a, b;
	struct rocemu_qp *qa, *qb;
	struct rocemu_mr *ma, *mb;
	struct rocemu_mr_info ia, ib;
	uint8_t *src, *dst;
	uint32_t loss_ppm;
	unsigned inflight;
	uint64_t posted, done;
	double active_s; /**< wall time this link had the machine */
};

static int link_up(const struct opts *o, struct link *l, const char *pair, uint32_t loss_ppm)
{
	char ppm[32];
	const char *fault[] = {"fault-seed", "1", "fault-drop", ppm, NULL};
	size_t bytes = (size_t)o->size * o->depth;

	memset(l, 0, sizeof(*l));
	l->loss_ppm = loss_ppm;
	snprintf(ppm, sizeof(ppm), "tx:%u", loss_ppm);
	l->src = malloc(bytes);
	l->dst = malloc(bytes);
	if (!l->src || !l->dst || h_setup_opts(&l->a, &l->b, pair, NULL, fault, fault) != 0)
		return -1;
	l->qa = h_qp(&l->a, IBV_QPT_RC, o->depth, NULL);
	l->qb = h_qp(&l->b, IBV_QPT_RC, o->depth, NULL);
	if (!l->qa || !l->qb || h_connect(&l->a, l->qa, &l->b, l->qb, o->mtu, 1, 2, 0xF, false))
		return -1;
	if (rocemu_mr_reg(l->a.pd, l->src, bytes, (uintptr_t)l->src, 0xF, &l->ma) ||
	    rocemu_mr_reg(l->b.pd, l->dst, bytes, (uintptr_t)l->dst, 0xF, &l->mb))
		return -1;
	rocemu_mr_info(l->ma, &l->ia);
	rocemu_mr_info(l->mb, &l->ib);
	memset(l->src, 0x5A, bytes);
	return 0;
}

static void link_down(struct link *l)
{
	h_teardown_all(&l->a, &l->b); /* engine destroy frees the QPs and MRs */
	free(l->src);
	free(l->dst);
}

/** Drive one link for a slice of wall time, then drain what is in flight
 * (the drain counts as the link's time). 0 or -1 on a completion error. */
static int link_slice(const struct opts *o, struct link *l, double slice_s)
{
	double t0 = now_s(), end = t0 + slice_s;
	struct rocemu_wc wc;

	for (;;) {
		bool filling = now_s() < end;

		while (filling && l->inflight < o->depth &&
		       post_one(o, l->qa, l->qb, l->posted, l->src, l->dst, l->ia.lkey, l->ib.lkey,
				l->ib.rkey) == 0) {
			l->inflight++;
			l->posted++;
		}
		if (!filling && l->inflight == 0)
			break;
		if (rocemu_cq_poll(l->a.scq, 1, &wc) != 1)
			continue;
		if (wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "completion error %d\n", wc.status);
			return -1;
		}
		l->inflight--;
		l->done++;
		if (o->op == IBV_WR_SEND)
			while (rocemu_cq_poll(l->b.rcq, 1, &wc) == 1)
				;
	}
	l->active_s += now_s() - t0;
	return 0;
}

static double link_mbps(const struct opts *o, const struct link *l)
{
	return l->active_s > 0 ? (double)l->done * o->size / l->active_s / 1e6 : 0;
}

static void link_report(const struct opts *o, const struct link *l)
{
	/* load-independent: packets resent per packet delivered (go-back-N's
	 * waste; the MB/s swing with the machine's load) */
	uint32_t mtu = 128u << o->mtu;
	double pkts = (double)l->done * ((o->size + mtu - 1) / mtu);
	uint64_t rt = h_counter(l->a.e, "retransmit_packets");
	uint64_t naks = h_counter(l->b.e, "tx_nak_psn_seq");

	printf("  loss %6u ppm: %9.1f MB/s  retransmitted %llu (%.2f per delivered packet), "
	       "timeouts %llu, probes %llu, window shrinks %llu, "
	       "seq NAKs %llu (%.0f resent per NAK)\n",
	       l->loss_ppm, link_mbps(o, l), (unsigned long long)rt,
	       pkts > 0 ? (double)rt / pkts : 0,
	       (unsigned long long)h_counter(l->a.e, "retransmit_timeouts"),
	       (unsigned long long)h_counter(l->a.e, "retransmit_probes"),
	       (unsigned long long)h_counter(l->a.e, "window_shrinks"), (unsigned long long)naks,
	       naks ? (double)rt / (double)naks : 0.0);
}

/**
 * One round: a loss-free and a lossy link, both up at once, take turns in
 * slices of --slice seconds for --seconds each, so that both see the same
 * load on a shared machine (one link runs at a time; the idle link's
 * progress threads sleep). Returns lossy/loss-free goodput, or < 0.
 */
static double round_ratio(const struct opts *o, unsigned r, double *clean_out, double *lossy_out)
{
	char pc[16], pl[16];
	struct link clean, lossy;
	double ratio = -1;

	snprintf(pc, sizeof(pc), "gpc%u", r);
	snprintf(pl, sizeof(pl), "gpl%u", r);
	if (link_up(o, &clean, pc, 0) || link_up(o, &lossy, pl, o->loss_ppm)) {
		fprintf(stderr, "setup failed\n");
		goto out;
	}
	while (clean.active_s < o->seconds || lossy.active_s < o->seconds) {
		if (link_slice(o, &clean, o->slice) || link_slice(o, &lossy, o->slice))
			goto out;
	}
	link_report(o, &clean);
	link_report(o, &lossy);
	*clean_out = link_mbps(o, &clean);
	*lossy_out = link_mbps(o, &lossy);
	ratio = *clean_out > 0 ? *lossy_out / *clean_out : -1;
out:
	link_down(&clean);
	link_down(&lossy);
	return ratio;
}

int main(int argc, char **argv)
{
	struct opts o = {IBV_WR_RDMA_WRITE, IBV_MTU_4096, 65536, 10000, 1.0, 64, 5, 0.1};
	double ratio[64], sum_clean = 0, sum_lossy = 0;
	unsigned n = 0;

	for (int i = 1; i + 1 < argc; i += 2) {
		const char *k = argv[i], *v = argv[i + 1];

		if (!strcmp(k, "--op"))
			o.op = !strcmp(v, "read")   ? IBV_WR_RDMA_READ
			       : !strcmp(v, "send") ? IBV_WR_SEND
						    : IBV_WR_RDMA_WRITE;
		else if (!strcmp(k, "--mtu"))
			o.mtu = (enum ibv_mtu)(__builtin_ctz((unsigned)atoi(v)) - 7);
		else if (!strcmp(k, "--size"))
			o.size = (uint32_t)atoi(v);
		else if (!strcmp(k, "--loss-ppm"))
			o.loss_ppm = (uint32_t)atoi(v);
		else if (!strcmp(k, "--seconds"))
			o.seconds = atof(v);
		else if (!strcmp(k, "--depth"))
			o.depth = (unsigned)atoi(v);
		else if (!strcmp(k, "--rounds"))
			o.rounds = (unsigned)atoi(v);
		else if (!strcmp(k, "--slice"))
			o.slice = atof(v);
	}
	if (o.rounds < 1 || o.rounds > 64 || o.depth < 1 || o.size < 1 || o.slice <= 0) {
		fprintf(stderr, "--rounds 1..64, --depth and --size at least 1, --slice > 0\n");
		return 2;
	}
	if (rocemu_eal_init() < 0) {
		fprintf(stderr, "skip: %s\n", rocemu_eal_error());
		return 77;
	}
	printf("RC %s, %u-byte messages, MTU %u, %u in flight, %.1f s each in %.2f s slices:\n",
	       o.op == IBV_WR_RDMA_READ ? "READ"
	       : o.op == IBV_WR_SEND	? "SEND"
					: "WRITE",
	       o.size, 128u << o.mtu, o.depth, o.seconds, o.slice);
	for (unsigned r = 0; r < o.rounds; r++) {
		double clean = 0, lossy = 0, q = round_ratio(&o, r, &clean, &lossy);

		if (q < 0)
			return 1;
		ratio[n++] = q;
		sum_clean += clean;
		sum_lossy += lossy;
		printf("round %u: goodput under loss / loss-free: %.0f%%\n", r + 1, 100.0 * q);
	}
	qsort(ratio, n, sizeof(ratio[0]), cmp_double);
	printf("goodput under loss / loss-free: median %.0f%% (min %.0f%%, max %.0f%%), "
	       "sums %.1f / %.1f MB/s = %.0f%%\n",
	       100.0 * ratio[n / 2], 100.0 * ratio[0], 100.0 * ratio[n - 1], sum_lossy / n,
	       sum_clean / n, 100.0 * sum_lossy / sum_clean);
	return 0;
}
