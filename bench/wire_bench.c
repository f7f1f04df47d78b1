/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Micro-benchmark of the wire codec (not a test; prints numbers):
 *  - frames built (headers, payload copy, pad, ICRC) and parsed (ICRC
 *    verified) per second, for a few packet shapes;
 *  - ICRC throughput in GB/s on frames with a 4 KiB payload, for DPDK's
 *    CRC-32 (rte_net_crc, PCLMULQDQ) and the byte-wise table CRC, measured
 *    in the same run, interleaved, and printed as a ratio;
 *  - the bare CRC-32 of 4 KiB with both, to show the cost of the ICRC's
 *    masked-header copy and CRC combine.
 * The EAL is initialised (no hugepages, no PCI) because that is what lets
 * DPDK pick its SIMD CRC, as in the engine.
 * usage: wire_bench [seconds-per-measurement, default 0.5]
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

#include "roce_wire.h"

#define ROUNDS 5

static double run_seconds = 0.5;
static volatile uint32_t sink;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
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

static double crc_gbps(int dpdk, const uint8_t *buf, uint32_t len)
{
	uint64_t n = 0;
	uint32_t acc = 0;
	double t0 = now(), t;

	do {
		for (int i = 0; i < 64; i++, n++)
			acc ^= dpdk ? rte_net_crc_calc(buf, len, RTE_NET_CRC32_ETH)
				    : roce_crc32_table(0, buf, len);
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

int main(int argc, char **argv)
{
	static uint8_t payload[8192], frame[8192];
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
	double dpdk[ROUNDS], table[ROUNDS], raw_dpdk[ROUNDS], raw_table[ROUNDS];
	struct roce_pkt pkt;
	bool have_dpdk;
	uint32_t len;
	int hdr;

	if (argc > 1)
		run_seconds = atof(argv[1]);
	if (run_seconds <= 0)
		run_seconds = 0.5;
	init_eal();
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 7 + 3);

	have_dpdk = roce_icrc_set_impl(ROCE_ICRC_IMPL_DPDK) == 0;
	roce_icrc_set_impl(ROCE_ICRC_IMPL_AUTO);
	printf("wire_bench: %.2f s per measurement, ICRC implementation in use: %s\n", run_seconds,
	       roce_icrc_impl_name());

	printf("\nframes built + parsed (ICRC computed and verified), per second:\n");
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		sample_pkt(&pkt, shapes[s].opcode, shapes[s].ipv, shapes[s].len);
		roce_icrc_set_impl(ROCE_ICRC_IMPL_AUTO);
		printf("  %-30s %6.2f Mframes/s (%s)", shapes[s].what,
		       frames_per_second(&pkt, payload) / 1e6, roce_icrc_impl_name());
		if (have_dpdk) {
			roce_icrc_set_impl(ROCE_ICRC_IMPL_TABLE);
			printf("  %6.2f Mframes/s (table)", frames_per_second(&pkt, payload) / 1e6);
			roce_icrc_set_impl(ROCE_ICRC_IMPL_AUTO);
		}
		printf("\n");
	}

	/* ICRC on a 4 KiB payload frame (IPv4 RC SEND MIDDLE) */
	sample_pkt(&pkt, ROCE_OP_SEND_MIDDLE, 4, 4096);
	len = roce_frame_len(&pkt);
	hdr = roce_build_headers(frame, sizeof(frame), &pkt);
	memcpy(frame + hdr, payload, 4096);
	roce_finish(frame, len, &pkt);
	for (int r = 0; r < ROUNDS; r++) {
		dpdk[r] = raw_dpdk[r] = 0;
		if (have_dpdk) {
			roce_icrc_set_impl(ROCE_ICRC_IMPL_DPDK);
			dpdk[r] = icrc_gbps(frame, len, 14);
			raw_dpdk[r] = crc_gbps(1, payload, 4096);
		}
		roce_icrc_set_impl(ROCE_ICRC_IMPL_TABLE);
		table[r] = icrc_gbps(frame, len, 14);
		raw_table[r] = crc_gbps(0, payload, 4096);
	}
	roce_icrc_set_impl(ROCE_ICRC_IMPL_AUTO);
	printf("\nICRC over a frame with 4 KiB payload (%u bytes covered), median of %d:\n",
	       len - 14 - ROCE_ICRC_LEN, ROUNDS);
	printf("  table CRC-32                   %6.2f GB/s\n", median(table, ROUNDS));
	if (have_dpdk) {
		printf("  DPDK rte_net_crc (PCLMULQDQ)   %6.2f GB/s   ratio dpdk/table %.1fx\n",
		       median(dpdk, ROUNDS), median(dpdk, ROUNDS) / median(table, ROUNDS));
	} else {
		printf("  DPDK rte_net_crc               not usable here (no PCLMULQDQ or SIMD "
		       "limit)\n");
	}
	printf("bare CRC-32 of 4096 bytes:\n");
	printf("  table                          %6.2f GB/s\n", median(raw_table, ROUNDS));
	if (have_dpdk)
		printf("  DPDK rte_net_crc               %6.2f GB/s   ratio %.1fx\n",
		       median(raw_dpdk, ROUNDS),
		       median(raw_dpdk, ROUNDS) / median(raw_table, ROUNDS));
	{
		char dir[4096];

		snprintf(dir, sizeof(dir), "%s", rte_eal_get_runtime_dir());
		rte_eal_cleanup();
		if (strstr(dir, "wirebench") != NULL)
			remove_runtime_dir(dir);
	}
	return 0;
}
