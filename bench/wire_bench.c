/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Micro-benchmark of the wire codec (not a test; prints numbers):
 *  - frames built (headers, payload copy, pad, ICRC) and parsed (ICRC
 *    verified) per second, for a few packet shapes;
 *  - ICRC throughput in GB/s on frames with a 4 KiB payload, for our
 *    folding CRC-32 ("vpclmul-avx2": VPCLMULQDQ on 256-bit registers, and
 *    "pclmul-4x": PCLMULQDQ, four 128-bit lanes), DPDK's CRC-32
 *    (rte_net_crc, PCLMULQDQ, one lane) and the byte-wise table CRC,
 *    measured in the same run, interleaved, and printed as ratios;
 *  - the bare CRC-32 of 4 KiB and 64 KiB with each, to show the cost of the
 *    ICRC's masked headers (and, for DPDK, its header copy and CRC combine);
 *  - copying 4 KiB while computing its CRC: memcpy then the CRC, against the
 *    fused copy (roce_crc32_copy), for each folding kind;
 *  - building a 4 KiB-payload frame: memcpy + roce_finish against
 *    roce_icrc_partial + roce_crc32_copy.
 * Rows that cannot run on this machine are left out.
 * The EAL is initialised (no hugepages, no PCI) because that is what lets
 * DPDK pick its SIMD CRC, as in the engine.
 * usage: wire_bench [seconds-per-measurement, default 0.3]
 * (the machine is shared and noisy: the rows of a table are interleaved over
 * ROUNDS rounds and each row reports its median)
 */
#define ALLOW_EXPERIMENTAL_API 1

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_net_crc.h>
#include <rte_vect.h>

#include "roce_crc32.h" /* private: to measure each folding kind, not only the best */
#include "roce_wire.h"

#define ROUNDS 7

static double run_seconds = 0.3;
static volatile uint32_t sink;

static double now(void)
{
	struct timespec ts;

	/* CPU time of this thread: the machine is shared, and time spent
	 * waiting for a CPU is not the codec's */
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

static void sample_pkt(struct roce_pkt *pkt, uint8_t opcode, int ipv, uint32_t payload_len)
{
	static const uint8_t v6a[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	static const uint8_t v6b[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};

	memset(pkt, 0, sizeof(*pkt));
	memcpy(pkt->path.dst_mac, "\x02\x00\x00\x00\x00\x02", 6);
	memcpy(pkt->path.src_mac, "\x02\x00\x00\x00\x00\x01", 6);
	pkt->path.ip_version = (uint8_t)ipv;
	if (ipv == 4) {
		roce_gid_from_ipv4(pkt->path.src_gid, htonl(0x0A000001));
		roce_gid_from_ipv4(pkt->path.dst_gid, htonl(0x0A000002));
	} else {
		memcpy(pkt->path.src_gid, v6a, 16);
		memcpy(pkt->path.dst_gid, v6b, 16);
	}
	pkt->path.ttl = 64;
	pkt->path.udp_sport = 0xC001;
	pkt->opcode = opcode;
	pkt->pkey = ROCE_DEFAULT_PKEY;
	pkt->dqpn = 0x11;
	pkt->psn = 0xFFFF00;
	pkt->reth.va = 0x1000;
	pkt->reth.rkey = 0x22;
	pkt->reth.dma_len = payload_len;
	pkt->aeth.syndrome = ROCE_AETH_SYNDROME(ROCE_AETH_ACK, ROCE_AETH_CREDITS_INVALID);
	pkt->payload_len = payload_len;
}

/* Build + parse (ICRC verified) as many frames as fit in run_seconds. */
static double frames_per_second(const struct roce_pkt *tmpl, const uint8_t *payload)
{
	static uint8_t frame[10000];
	struct roce_pkt pkt = *tmpl, out;
	uint64_t n = 0;
	double t0 = now(), t;

	do {
		for (int i = 0; i < 256; i++, n++) {
			uint32_t len = roce_frame_len(&pkt);
			int hdr = roce_build_headers(frame, sizeof(frame), &pkt);

			memcpy(frame + hdr, payload, pkt.payload_len);
			roce_finish(frame, len, &pkt);
			if (roce_parse(frame, len, ROCE_PARSE_VERIFY_ICRC, &out) != ROCE_PARSE_OK) {
				fprintf(stderr, "parse failed\n");
				exit(1);
			}
			pkt.psn = roce_psn_add(out.psn, 1);
		}
		t = now() - t0;
	} while (t < run_seconds);
	return (double)n / t;
}

/*
 * Frames built per second (no parse), payload GB/s: headers, then either
 * memcpy of the payload + roce_finish (pad, ICRC over the frame), or the
 * fused way: roce_icrc_partial over the headers, roce_crc32_copy of the
 * payload, the pad, roce_icrc_store. Payload copied to an odd offset as in
 * a real frame (Eth+IPv4+UDP+BTH = 54 bytes).
 */
static double build_gbps(const struct roce_pkt *pkt, const uint8_t *payload, bool fused)
{
	static uint8_t frame[10000];
	uint32_t len = roce_frame_len(pkt), plen = pkt->payload_len;
	uint64_t n = 0;
	double t0 = now(), t;

	do {
		for (int i = 0; i < 64; i++, n++) {
			uint32_t hdr = (uint32_t)roce_build_headers(frame, sizeof(frame), pkt);

			if (!fused) {
				memcpy(frame + hdr, payload, plen);
				roce_finish(frame, len, pkt);
				continue;
			}
			uint32_t crc = roce_icrc_partial(frame, 14, hdr);
			uint32_t pad = len - hdr - plen - ROCE_ICRC_LEN;

			crc = roce_crc32_copy(crc, frame + hdr, payload, plen);
			memset(frame + hdr + plen, 0, pad);
			crc = roce_crc32(crc, frame + hdr + plen, pad);
			roce_icrc_store(frame, len, crc);
		}
		t = now() - t0;
	} while (t < run_seconds);
	sink = frame[len - 1];
	return (double)n * plen / t / 1e9;
}

/* ICRC GB/s over one frame (bytes covered: IP header to the end of the payload). */
static double icrc_gbps(const uint8_t *frame, uint32_t len, uint32_t l3_off)
{
	uint64_t n = 0;
	uint32_t acc = 0;
	double t0 = now(), t;

	do {
		for (int i = 0; i < 64; i++, n++)
			acc ^= roce_icrc_compute(frame, l3_off, len);
		t = now() - t0;
	} while (t < run_seconds);
	sink = acc;
	return (double)n * (len - l3_off - ROCE_ICRC_LEN) / t / 1e9;
}

enum crc_kind { CRC_TABLE, CRC_DPDK, CRC_OURS, CRC_MEMCPY_THEN_OURS, CRC_FUSED_COPY };

/* ours: which folding kind (the private entry point, to measure each one) */
static uint32_t crc_once(enum crc_kind kind, enum crc32_clmul_kind ours, uint8_t *dst,
			 const uint8_t *buf, uint32_t len)
{
	switch (kind) {
	case CRC_TABLE:
		return roce_crc32_table(0, buf, len);
	case CRC_DPDK:
		return rte_net_crc_calc(buf, len, RTE_NET_CRC32_ETH);
	case CRC_OURS:
		return ~roce_crc32_clmul_update(ours, ~0u, NULL, buf, len, NULL);
	case CRC_MEMCPY_THEN_OURS:
		memcpy(dst, buf, len);
		return ~roce_crc32_clmul_update(ours, ~0u, NULL, dst, len, NULL);
	case CRC_FUSED_COPY:
		return ~roce_crc32_clmul_update(ours, ~0u, dst, buf, len, NULL);
	}
	return 0;
}

/* CRC-32 GB/s over one buffer (dst: where the copying kinds copy to). */
static double crc_gbps(enum crc_kind kind, enum crc32_clmul_kind ours, uint8_t *dst,
		       const uint8_t *buf, uint32_t len)
{
	uint64_t n = 0;
	uint32_t acc = 0;
	double t0 = now(), t;

	do {
		for (int i = 0; i < 64; i++, n++)
			acc ^= crc_once(kind, ours, dst, buf, len);
		t = now() - t0;
	} while (t < run_seconds);
	sink = acc;
	return (double)n * len / t / 1e9;
}

/* The EAL leaves its runtime directory behind even with --no-shconf. */
static void remove_runtime_dir(const char dir[4096])
{
	char path[4096 + 256 + 2];
	struct dirent *e;
	DIR *d = opendir(dir);

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

static void init_eal(void)
{
	char prefix[64];
	/* --no-huge with its own prefix (not --in-memory: that clashes with --no-huge's
	 * legacy memory mode) */
	char *argv[] = {"wire_bench", "--no-huge", "--no-shconf",    "-m",
			"64",	      "--no-pci",  "--no-telemetry", "--log-level=error",
			"-l",	      "0",	   "--file-prefix",  prefix};

	snprintf(prefix, sizeof(prefix), "wirebench%d", (int)getpid());
	if (rte_eal_init((int)(sizeof(argv) / sizeof(argv[0])), argv) < 0) {
		/* still measure: allow 128-bit SIMD the way the EAL would */
		fprintf(stderr, "rte_eal_init failed (%s); setting the SIMD limit by hand\n",
			strerror(rte_errno));
		rte_vect_set_max_simd_bitwidth(RTE_VECT_SIMD_256);
	}
}

/* A measured row: an ICRC implementation over a frame, or a CRC kind over a buffer. */
struct row {
	const char *name;
	int icrc_impl; /* enum roce_icrc_impl for an ICRC row, -1 for a buffer row */
	enum crc_kind kind;
	enum crc32_clmul_kind ours;
	uint32_t len;
	double median;
};

#define MAX_ROWS 8

/* Median GB/s of each row, all rows interleaved in every round. */
static void measure_rows(struct row *rows, int nrows, const uint8_t *frame, uint32_t frame_len,
			 const uint8_t *buf, uint8_t *dst)
{
	double v[MAX_ROWS][ROUNDS];

	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < nrows; i++) {
			if (rows[i].icrc_impl >= 0) {
				roce_icrc_set_impl((enum roce_icrc_impl)rows[i].icrc_impl);
				v[i][r] = icrc_gbps(frame, frame_len, 14);
			} else {
				v[i][r] =
				    crc_gbps(rows[i].kind, rows[i].ours, dst, buf, rows[i].len);
			}
		}
	}
	roce_icrc_set_impl(ROCE_ICRC_IMPL_AUTO);
	for (int i = 0; i < nrows; i++)
		rows[i].median = median(v[i], ROUNDS);
}

/* Keep the rows that can run here (ICRC impl accepted, folding kind on this CPU). */
static int usable_rows(struct row *rows, int nrows, bool have_dpdk, enum crc32_clmul_kind best)
{
	int n = 0;

	for (int i = 0; i < nrows; i++) {
		bool ok = rows[i].icrc_impl >= 0
			      ? roce_icrc_set_impl((enum roce_icrc_impl)rows[i].icrc_impl) == 0
			      : (rows[i].kind != CRC_DPDK || have_dpdk) && rows[i].ours <= best;

		if (ok)
			rows[n++] = rows[i];
	}
	roce_icrc_set_impl(ROCE_ICRC_IMPL_AUTO);
	return n;
}

/* GB/s, the ratio to the first row (the table) and to the row "DPDK..." of the same length. */
static void print_rows(const struct row *rows, int nrows)
{
	for (int i = 0; i < nrows; i++) {
		const struct row *dpdk = NULL;

		for (int j = 0; j < nrows; j++)
			if (strncmp(rows[j].name, "DPDK", 4) == 0 && rows[j].len == rows[i].len)
				dpdk = &rows[j];
		printf("  %-30s %6.2f GB/s  x%6.2f table", rows[i].name, rows[i].median,
		       rows[i].median / rows[0].median);
		if (dpdk != NULL && dpdk != &rows[i] && i != 0)
			printf("  x%.2f DPDK", rows[i].median / dpdk->median);
		printf("\n");
	}
}

static void print_copy_ratio(const struct row *rows, int nrows, const char *kind)
{
	const struct row *sep = NULL, *fused = NULL;

	for (int i = 0; i < nrows; i++) {
		if (strstr(rows[i].name, kind) == NULL)
			continue;
		if (rows[i].kind == CRC_MEMCPY_THEN_OURS)
			sep = &rows[i];
		if (rows[i].kind == CRC_FUSED_COPY)
			fused = &rows[i];
	}
	if (sep != NULL && fused != NULL)
		printf("  fused / (memcpy + CRC), %-13s x%.2f\n", kind,
		       fused->median / sep->median);
}

int main(int argc, char **argv)
{
	static uint8_t payload[65536], frame[8192], copy_dst[65536 + 64];
	static const struct {
		const char *what;
		uint8_t opcode;
		int ipv;
		uint32_t len;
	} shapes[] = {
	    {"RC ACK, IPv4", ROCE_OP_ACK, 4, 0},
	    {"RC SEND ONLY 64 B, IPv4", ROCE_OP_SEND_ONLY, 4, 64},
	    {"RC WRITE ONLY 1024 B, IPv4", ROCE_OP_WRITE_ONLY, 4, 1024},
	    {"RC SEND MIDDLE 4096 B, IPv6", ROCE_OP_SEND_MIDDLE, 6, 4096},
	};
	static const enum roce_icrc_impl frame_impls[] = {
	    ROCE_ICRC_IMPL_VPCLMUL, ROCE_ICRC_IMPL_PCLMUL, ROCE_ICRC_IMPL_DPDK,
	    ROCE_ICRC_IMPL_TABLE};
	const enum crc32_clmul_kind NONE = CRC32_CLMUL_NONE, X4 = CRC32_CLMUL_4X,
				    WIDE = CRC32_CLMUL_WIDE;
	struct row icrc_rows[] = {
	    {"table", ROCE_ICRC_IMPL_TABLE, 0, NONE, 0, 0},
	    {"DPDK rte_net_crc", ROCE_ICRC_IMPL_DPDK, 0, NONE, 0, 0},
	    {"pclmul-4x (ours)", ROCE_ICRC_IMPL_PCLMUL, 0, NONE, 0, 0},
	    {"vpclmul-avx2 (ours)", ROCE_ICRC_IMPL_VPCLMUL, 0, NONE, 0, 0},
	};
	struct row crc_rows[] = {
	    {"table, 4 KiB", -1, CRC_TABLE, NONE, 4096, 0},
	    {"DPDK rte_net_crc, 4 KiB", -1, CRC_DPDK, NONE, 4096, 0},
	    {"pclmul-4x (ours), 4 KiB", -1, CRC_OURS, X4, 4096, 0},
	    {"vpclmul-avx2 (ours), 4 KiB", -1, CRC_OURS, WIDE, 4096, 0},
	    {"DPDK rte_net_crc, 64 KiB", -1, CRC_DPDK, NONE, 65536, 0},
	    {"pclmul-4x (ours), 64 KiB", -1, CRC_OURS, X4, 65536, 0},
	    {"vpclmul-avx2 (ours), 64 KiB", -1, CRC_OURS, WIDE, 65536, 0},
	};
	struct row copy_rows[] = {
	    {"table CRC, no copy", -1, CRC_TABLE, NONE, 4096, 0},
	    {"memcpy + pclmul-4x", -1, CRC_MEMCPY_THEN_OURS, X4, 4096, 0},
	    {"fused copy, pclmul-4x", -1, CRC_FUSED_COPY, X4, 4096, 0},
	    {"memcpy + vpclmul-avx2", -1, CRC_MEMCPY_THEN_OURS, WIDE, 4096, 0},
	    {"fused copy, vpclmul-avx2", -1, CRC_FUSED_COPY, WIDE, 4096, 0},
	};
	int n_icrc, n_crc, n_copy;
	enum crc32_clmul_kind best;
	struct roce_pkt pkt;
	bool have_dpdk;
	uint32_t len;
	int hdr;

	if (argc > 1)
		run_seconds = atof(argv[1]);
	if (run_seconds <= 0)
		run_seconds = 0.3;
	init_eal();
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 7 + 3);

	have_dpdk = roce_icrc_set_impl(ROCE_ICRC_IMPL_DPDK) == 0;
	best = roce_crc32_clmul_best();
	roce_icrc_set_impl(ROCE_ICRC_IMPL_AUTO);
	printf("wire_bench: %.2f s per measurement, ICRC implementation in use: %s\n", run_seconds,
	       roce_icrc_impl_name());
	if (!have_dpdk)
		printf("(DPDK rte_net_crc not usable here: no PCLMULQDQ or SIMD limit)\n");

	printf("\nframes built + parsed (ICRC computed and verified), per second:\n");
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		sample_pkt(&pkt, shapes[s].opcode, shapes[s].ipv, shapes[s].len);
		printf("  %-28s", shapes[s].what);
		for (size_t i = 0; i < sizeof(frame_impls) / sizeof(frame_impls[0]); i++) {
			if (roce_icrc_set_impl(frame_impls[i]) != 0)
				continue;
			printf(" %5.2f M (%s)", frames_per_second(&pkt, payload) / 1e6,
			       roce_icrc_impl_name());
		}
		roce_icrc_set_impl(ROCE_ICRC_IMPL_AUTO);
		printf("\n");
	}

	/* ICRC on a 4 KiB payload frame (IPv4 RC SEND MIDDLE) */
	sample_pkt(&pkt, ROCE_OP_SEND_MIDDLE, 4, 4096);
	len = roce_frame_len(&pkt);
	hdr = roce_build_headers(frame, sizeof(frame), &pkt);
	memcpy(frame + hdr, payload, 4096);
	roce_finish(frame, len, &pkt);
	n_icrc = usable_rows(icrc_rows, 4, have_dpdk, best);
	n_crc = usable_rows(crc_rows, 7, have_dpdk, best);
	n_copy = usable_rows(copy_rows, 5, have_dpdk, best);
	measure_rows(icrc_rows, n_icrc, frame, len, payload, copy_dst);
	measure_rows(crc_rows, n_crc, frame, len, payload, copy_dst);
	/* the destination misaligned by one byte, as a payload behind headers is */
	measure_rows(copy_rows, n_copy, frame, len, payload, copy_dst + 1);
	printf("\nICRC over a frame with 4 KiB payload (%u bytes covered), median of %d:\n",
	       len - 14 - ROCE_ICRC_LEN, ROUNDS);
	print_rows(icrc_rows, n_icrc);
	printf("bare CRC-32 of a buffer:\n");
	print_rows(crc_rows, n_crc);
	printf("copy 4 KiB to a destination misaligned by 1 and CRC it:\n");
	print_rows(copy_rows, n_copy);
	print_copy_ratio(copy_rows, n_copy, "pclmul-4x");
	print_copy_ratio(copy_rows, n_copy, "vpclmul-avx2");
	{
		double sep[ROUNDS], fused[ROUNDS];

		for (int r = 0; r < ROUNDS; r++) {
			sep[r] = build_gbps(&pkt, payload, false);
			fused[r] = build_gbps(&pkt, payload, true);
		}
		printf(
		    "build a frame with 4 KiB payload (IPv4 RC SEND MIDDLE), payload GB/s, %s:\n",
		    roce_icrc_impl_name());
		printf("  %-36s %6.2f GB/s\n", "memcpy + roce_finish", median(sep, ROUNDS));
		printf("  %-36s %6.2f GB/s  x%.2f\n", "roce_icrc_partial + roce_crc32_copy",
		       median(fused, ROUNDS), median(fused, ROUNDS) / median(sep, ROUNDS));
	}
	{
		char dir[4096];

		snprintf(dir, sizeof(dir), "%s", rte_eal_get_runtime_dir());
		rte_eal_cleanup();
		if (strstr(dir, "wirebench") != NULL)
			remove_runtime_dir(dir);
	}
	return 0;
}
