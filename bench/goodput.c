/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Goodput of RC over a net_ring pair, loss-free and then with the port's
 * fault injector dropping a share of the frames on both nodes' transmit side
 * (issue 5: goodput under 1% loss against loss-free goodput). A measurement,
 * not a test: it prints both numbers and their ratio. On a shared machine the
 * loss-free rate alone swings by 2-4x between runs, so the two are measured
 * in alternation, `--rounds` times, and the ratio is given per round (the
 * same minute's numbers), as the median of those, and as the ratio of sums.
 *
 *   transport_goodput [--op write|read|send] [--mtu 256..4096] [--size BYTES]
 *                     [--loss-ppm N] [--seconds S] [--depth N] [--rounds N]
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

/** MB/s of completed messages, or a negative value on error. */
static double run(const struct opts *o, const char *pair, uint32_t loss_ppm)
{
	char ppm[32];
	const char *fault[] = {"fault-seed", "1", "fault-drop", ppm, NULL};
	struct node a = {0}, b = {0};
	struct rocemu_qp *qa, *qb;
	struct rocemu_mr *ma, *mb;
	struct rocemu_mr_info ia, ib;
	struct rocemu_wc wc;
	size_t bytes = (size_t)o->size * o->depth;
	uint8_t *src = malloc(bytes), *dst = malloc(bytes);
	unsigned inflight = 0;
	uint64_t posted = 0, done = 0;
	double t0, dt, result = -1;

	snprintf(ppm, sizeof(ppm), "tx:%u", loss_ppm);
	if (!src || !dst || h_setup_opts(&a, &b, pair, NULL, fault, fault) != 0)
		goto out;
	qa = h_qp(&a, IBV_QPT_RC, o->depth, NULL);
	qb = h_qp(&b, IBV_QPT_RC, o->depth, NULL);
	if (!qa || !qb || h_connect(&a, qa, &b, qb, o->mtu, 1, 2, 0xF, false))
		goto out;
	rocemu_mr_reg(a.pd, src, bytes, (uintptr_t)src, 0xF, &ma);
	rocemu_mr_reg(b.pd, dst, bytes, (uintptr_t)dst, 0xF, &mb);
	rocemu_mr_info(ma, &ia);
	rocemu_mr_info(mb, &ib);
	memset(src, 0x5A, bytes);
	t0 = now_s();
	while ((dt = now_s() - t0) < o->seconds) {
		while (inflight < o->depth &&
		       post_one(o, qa, qb, posted, src, dst, ia.lkey, ib.lkey, ib.rkey) == 0) {
			inflight++;
			posted++;
		}
		if (rocemu_cq_poll(a.scq, 1, &wc) != 1)
			continue;
		if (wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "completion error %d\n", wc.status);
			goto out;
		}
		inflight--;
		done++;
		if (o->op == IBV_WR_SEND)
			while (rocemu_cq_poll(b.rcq, 1, &wc) == 1)
				;
	}
	result = (double)done * o->size / dt / 1e6;
	{
		/* load-independent: packets resent per packet delivered (go-back-N's
		 * waste; the MB/s swing with the machine's load) */
		uint32_t mtu = 128u << o->mtu;
		double pkts = (double)done * ((o->size + mtu - 1) / mtu);
		uint64_t rt = h_counter(a.e, "retransmit_packets");

		printf(
		    "  loss %6u ppm: %9.1f MB/s  retransmitted %llu (%.2f per delivered packet), "
		    "timeouts %llu, probes %llu, window shrinks %llu, "
		    "seq NAKs %llu (%.0f resent per NAK)\n",
		    loss_ppm, result, (unsigned long long)rt, pkts > 0 ? (double)rt / pkts : 0,
		    (unsigned long long)h_counter(a.e, "retransmit_timeouts"),
		    (unsigned long long)h_counter(a.e, "retransmit_probes"),
		    (unsigned long long)h_counter(a.e, "window_shrinks"),
		    (unsigned long long)h_counter(b.e, "tx_nak_psn_seq"),
		    h_counter(b.e, "tx_nak_psn_seq")
			? (double)rt / (double)h_counter(b.e, "tx_nak_psn_seq")
			: 0.0);
	}
out:
	h_teardown_all(&a, &b); /* engine destroy frees the QPs and MRs */
	free(src);
	free(dst);
	return result;
}

int main(int argc, char **argv)
{
	struct opts o = {IBV_WR_RDMA_WRITE, IBV_MTU_4096, 65536, 10000, 1.0, 64, 5};
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
	}
	if (o.rounds < 1 || o.rounds > 64 || o.depth < 1 || o.size < 1) {
		fprintf(stderr, "--rounds 1..64, --depth and --size at least 1\n");
		return 2;
	}
	if (rocemu_eal_init() < 0) {
		fprintf(stderr, "skip: %s\n", rocemu_eal_error());
		return 77;
	}
	printf("RC %s, %u-byte messages, MTU %u, %u in flight, %.1f s each:\n",
	       o.op == IBV_WR_RDMA_READ ? "READ"
	       : o.op == IBV_WR_SEND	? "SEND"
					: "WRITE",
	       o.size, 128u << o.mtu, o.depth, o.seconds);
	for (unsigned r = 0; r < o.rounds; r++) {
		char pc[16], pl[16];
		double clean, lossy;

		snprintf(pc, sizeof(pc), "gpc%u", r);
		snprintf(pl, sizeof(pl), "gpl%u", r);
		clean = run(&o, pc, 0);
		lossy = run(&o, pl, o.loss_ppm);
		if (clean <= 0 || lossy < 0)
			return 1;
		ratio[n++] = lossy / clean;
		sum_clean += clean;
		sum_lossy += lossy;
		printf("round %u: goodput under loss / loss-free: %.0f%%\n", r + 1,
		       100.0 * lossy / clean);
	}
	qsort(ratio, n, sizeof(ratio[0]), cmp_double);
	printf("goodput under loss / loss-free: median %.0f%% (min %.0f%%, max %.0f%%), "
	       "sums %.1f / %.1f MB/s = %.0f%%\n",
	       100.0 * ratio[n / 2], 100.0 * ratio[0], 100.0 * ratio[n - 1], sum_lossy / n,
	       sum_clean / n, 100.0 * sum_lossy / sum_clean);
	return 0;
}
