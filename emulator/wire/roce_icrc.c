/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * ICRC (RoCEv2 annex A17.3.3): the IEEE CRC-32 (the Ethernet FCS polynomial,
 * reflected, init and final XOR all ones) over
 *
 *   8 bytes of 0xFF (the masked LRH of native InfiniBand)
 *   | IP header with the variant fields set to ones
 *       IPv4: TOS, TTL, header checksum
 *       IPv6: traffic class, flow label, hop limit
 *   | UDP header with the checksum set to ones
 *   | BTH with the resv8a byte (FECN, BECN, reserved) set to ones
 *   | extension headers, payload and pad, up to the ICRC itself.
 *
 * The CRC value goes on the wire least significant byte first, as the
 * Ethernet FCS does (Linux rxe stores the host-order value with a plain
 * 32-bit store on little-endian machines; the reference captures agree).
 *
 * Which CRC-32 runs:
 * - "vpclmul-avx2" (the default when the CPU has VPCLMULQDQ and AVX2) and
 *   "pclmul-4x" (the default with PCLMULQDQ and SSE4.1 only), with or
 *   without the EAL: our own folding CRC (roce_crc32_clmul.c), seeded, so
 *   the ICRC is one pass over the frame in place: the 8 bytes of 0xFF are
 *   the seed (the register after them), and the variant header fields are
 *   OR-ed in from a 64-byte mask as the first blocks are loaded.
 * - "dpdk-net-crc-sse42": DPDK's rte_net_crc_calc(RTE_NET_CRC32_ETH), which
 *   folds with PCLMULQDQ. It has no seed argument, so it runs twice: over
 *   the 0xFF prefix and masked headers (copied to the stack anyway, at most
 *   76 bytes) and over the rest of the packet in place; the two CRCs are
 *   joined with GF(2) arithmetic (crc(A|B) = crc(A)*x^(8|B|) + crc(B)).
 *   Short rests (ACKs, atomics) continue with the table instead.
 *   DPDK picks its SIMD path only when the CPU has PCLMULQDQ and the EAL's
 *   SIMD bit-width limit allows 128 bits; without rte_eal_init() that limit
 *   reads 0 and DPDK would fall back to its own byte-wise table, which is
 *   exactly "table" below, so we use ours and look again on later calls.
 * - "table": byte-wise table-driven CRC-32 (roce_crc32_table), the baseline
 *   and the fallback.
 * rte_hash_crc is NOT usable: it computes CRC-32C (Castagnoli polynomial,
 * the SSE4.2 crc32 instruction), a different CRC from the one ICRC needs.
 */
/* rte_vect_get_max_simd_bitwidth() is still experimental in DPDK 22.11. */
#define ALLOW_EXPERIMENTAL_API 1

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include <rte_cpuflags.h>
#include <rte_net_crc.h>
#include <rte_vect.h>

#include "roce_bytes.h"
#include "roce_crc32.h"
#include "roce_wire.h"

static uint32_t crc_table[256];
/* x^(2^k) mod P in reflected form, for the combine step. */
static uint32_t x_pow2k[32];
/* CRC register after the 8 bytes of 0xFF that open every ICRC. */
static uint32_t reg_after_lrh;
/* The ICRC's variant fields as ones over zeros, from the IP header on (OR masks). */
static uint8_t icrc_mask_v4[CRC32_MASK_LEN + CRC32_MASK_SLACK],
    icrc_mask_v6[CRC32_MASK_LEN + CRC32_MASK_SLACK];
_Static_assert(RB_IPV6_LEN + RB_UDP_LEN + ROCE_BTH_LEN <= CRC32_MASK_LEN,
	       "every ICRC variant field lies in the first CRC32_MASK_LEN bytes");
/* the fastest folding CRC this CPU runs (CRC32_CLMUL_NONE: none) */
static enum crc32_clmul_kind clmul_best;

static void icrc_set_variant_fields(uint8_t *hdr, unsigned ip_len);

uint32_t roce_crc32_table_update(uint32_t reg, const uint8_t *p, size_t len)
{
	while (len--)
		reg = crc_table[(reg ^ *p++) & 0xFF] ^ (reg >> 8);
	return reg;
}

/* a * b modulo the CRC polynomial, both in reflected bit order (bit 31 = x^0). */
static uint32_t gf2_mulmod(uint32_t a, uint32_t b)
{
	uint32_t product = 0;
	int i;

	/* branch-free: a's bits from x^0 (bit 31) up, b multiplied by x each step */
	for (i = 31; i >= 0; i--) {
		product ^= b & (0u - ((a >> i) & 1));
		b = (b >> 1) ^ (CRC32_POLY_REFLECTED & (0u - (b & 1)));
	}
	return product;
}

/* x^(8 * nbytes) mod P: the operator that shifts a CRC over nbytes zeros. */
uint32_t roce_crc32_x_pow_bytes(size_t nbytes)
{
	uint32_t r = 1u << 31; /* x^0 */
	unsigned k = 3;	       /* 8 * n = n << 3 */

	for (; nbytes != 0; nbytes >>= 1, k++)
		if (nbytes & 1)
			r = gf2_mulmod(x_pow2k[k & 31], r);
	return r;
}

/* CRC-32 of A|B from crc(A), crc(B) and |B| (standard, conditioned CRCs). */
static uint32_t crc32_combine(uint32_t crc_a, uint32_t crc_b, size_t len_b)
{
	return gf2_mulmod(roce_crc32_x_pow_bytes(len_b), crc_a) ^ crc_b;
}

static void __attribute__((constructor)) roce_crc_tables_init(void)
{
	static const uint8_t ones[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
	uint32_t i, j, c;

	for (i = 0; i < 256; i++) {
		c = i;
		for (j = 0; j < 8; j++)
			c = (c & 1) ? (c >> 1) ^ CRC32_POLY_REFLECTED : c >> 1;
		crc_table[i] = c;
	}
	x_pow2k[0] = 1u << 30; /* x^1 */
	for (i = 1; i < 32; i++)
		x_pow2k[i] = gf2_mulmod(x_pow2k[i - 1], x_pow2k[i - 1]);
	reg_after_lrh = roce_crc32_table_update(0xFFFFFFFFu, ones, sizeof(ones));
	icrc_set_variant_fields(icrc_mask_v4, RB_IPV4_LEN);
	icrc_set_variant_fields(icrc_mask_v6, RB_IPV6_LEN);
	clmul_best = roce_crc32_clmul_init();
}

uint32_t roce_crc32_table(uint32_t crc, const void *data, size_t len)
{
	return ~roce_crc32_table_update(~crc, data, len);
}

uint32_t roce_crc32(uint32_t crc, const void *data, size_t len)
{
	return ~roce_crc32_clmul_update(clmul_best, ~crc, NULL, data, len, NULL);
}

/*
 * Large copies are not fused: the bytes are moved with `rep movsb`, then
 * the CRC reads the source again, from the cache the move just filled.
 * The destination is often a line another core has just read (memif's
 * direct channel: the peer read the frame that was in this buffer a few
 * frames ago). Ordinary stores, as the fused fold makes them, each wait
 * for the other core's copy to be invalidated; the string move writes
 * whole lines without fetching them. On the 2-CPU test VM (AMD EPYC, a
 * reader on the other CPU): 4 KiB into lines the reader had just read,
 * a store loop 4500-5600 cycles, rep movsb 1600-1800; ib_write_bw -s
 * 65536 on the direct channel 1.7-2x (bench/perf_analysis.md).
 */
#define ROCE_COPY_UNFUSED_MIN 1024

static inline void copy_whole_lines(void *dst, const void *src, size_t len)
{
#if defined(__x86_64__)
	__asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(len) : : "memory");
#else
	memcpy(dst, src, len);
#endif
}

uint32_t roce_crc32_copy(uint32_t crc, void *dst, const void *src, size_t len)
{
	if (len >= ROCE_COPY_UNFUSED_MIN) {
		copy_whole_lines(dst, src, len);
		return ~roce_crc32_clmul_update(clmul_best, ~crc, NULL, src, len, NULL);
	}
	return ~roce_crc32_clmul_update(clmul_best, ~crc, dst, src, len, NULL);
}

/* ------------------------------------------------------------------------ */
/* Implementation choice.                                                    */

enum icrc_impl_state {
	IMPL_UNDECIDED = 0, /* nothing chosen yet, or table while EAL is not up */
	IMPL_TABLE,	    /* table, final */
	IMPL_DPDK,	    /* rte_net_crc with PCLMULQDQ, final */
	IMPL_CLMUL_4X,	    /* roce_crc32_clmul_update, CRC32_CLMUL_4X, final */
	IMPL_CLMUL_WIDE,    /* roce_crc32_clmul_update, CRC32_CLMUL_WIDE, final */
};

static int impl_state; /* enum icrc_impl_state, accessed atomically */

/*
 * Below this many bytes after the BTH, continuing with the table costs less
 * than a second DPDK call plus the combine (measured with wire_bench's
 * machine: the combine is two GF(2) multiplications, ~70 ns).
 */
#ifndef DPDK_MIN_TAIL
#define DPDK_MIN_TAIL 32
#endif

/*
 * Decided once, under a lock, as soon as the EAL's SIMD limit is known:
 * rte_net_crc_set_alg() briefly clears DPDK's handler table, so it must
 * never run while another thread may be inside rte_net_crc_calc().
 */
static pthread_mutex_t dpdk_lock = PTHREAD_MUTEX_INITIALIZER;
static int dpdk_ok = -1; /* -1 not decided yet, 0 no, 1 yes */

static bool dpdk_simd_crc_usable(void)
{
#if defined(RTE_ARCH_X86)
	static const char check[] = "123456789";
	int ok = __atomic_load_n(&dpdk_ok, __ATOMIC_ACQUIRE);

	if (ok >= 0)
		return ok;
	/* 0 until rte_eal_init() (or rte_vect_set_max_simd_bitwidth()) ran */
	if (rte_vect_get_max_simd_bitwidth() == 0)
		return false;
	pthread_mutex_lock(&dpdk_lock);
	if (dpdk_ok < 0) {
		ok = rte_vect_get_max_simd_bitwidth() >= RTE_VECT_SIMD_128 &&
		     rte_cpu_get_flag_enabled(RTE_CPUFLAG_PCLMULQDQ) > 0;
		if (ok) {
			rte_net_crc_set_alg(RTE_NET_CRC_SSE42);
			/* same value as ours, or we do not use it */
			ok = rte_net_crc_calc(check, 9, RTE_NET_CRC32_ETH) ==
			     roce_crc32_table(0, check, 9);
		}
		__atomic_store_n(&dpdk_ok, ok, __ATOMIC_RELEASE);
	}
	ok = dpdk_ok;
	pthread_mutex_unlock(&dpdk_lock);
	return ok;
#else
	return false;
#endif
}

static int impl_current(void)
{
	int s = __atomic_load_n(&impl_state, __ATOMIC_ACQUIRE);

	if (s != IMPL_UNDECIDED)
		return s;
	if (clmul_best == CRC32_CLMUL_WIDE)
		s = IMPL_CLMUL_WIDE;
	else if (clmul_best == CRC32_CLMUL_4X)
		s = IMPL_CLMUL_4X;
	else if (dpdk_simd_crc_usable())
		s = IMPL_DPDK;
	else if (rte_vect_get_max_simd_bitwidth() != 0)
		s = IMPL_TABLE; /* EAL is up and still no SIMD CRC: final */
	else
		return IMPL_TABLE; /* EAL not initialised: look again next time */
	__atomic_store_n(&impl_state, s, __ATOMIC_RELEASE);
	return s;
}

int roce_icrc_set_impl(enum roce_icrc_impl impl)
{
	switch (impl) {
	case ROCE_ICRC_IMPL_AUTO:
		__atomic_store_n(&impl_state, IMPL_UNDECIDED, __ATOMIC_RELEASE);
		break;
	case ROCE_ICRC_IMPL_TABLE:
		__atomic_store_n(&impl_state, IMPL_TABLE, __ATOMIC_RELEASE);
		break;
	case ROCE_ICRC_IMPL_DPDK:
		if (!dpdk_simd_crc_usable())
			return -ENOTSUP;
		__atomic_store_n(&impl_state, IMPL_DPDK, __ATOMIC_RELEASE);
		break;
	case ROCE_ICRC_IMPL_PCLMUL:
		if (clmul_best < CRC32_CLMUL_4X)
			return -ENOTSUP;
		__atomic_store_n(&impl_state, IMPL_CLMUL_4X, __ATOMIC_RELEASE);
		break;
	case ROCE_ICRC_IMPL_VPCLMUL:
		if (clmul_best < CRC32_CLMUL_WIDE)
			return -ENOTSUP;
		__atomic_store_n(&impl_state, IMPL_CLMUL_WIDE, __ATOMIC_RELEASE);
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

const char *roce_icrc_impl_name(void)
{
	switch (impl_current()) {
	case IMPL_CLMUL_WIDE:
		return "vpclmul-avx2";
	case IMPL_CLMUL_4X:
		return "pclmul-4x";
	case IMPL_DPDK:
		return "dpdk-net-crc-sse42";
	default:
		return "table";
	}
}

/* ------------------------------------------------------------------------ */
/* ICRC.                                                                     */

/* IP, UDP and BTH headers in hdr: set the variant fields to ones. */
static void icrc_set_variant_fields(uint8_t *hdr, unsigned ip_len)
{
	if (ip_len == RB_IPV4_LEN) {
		hdr[1] = 0xFF;		  /* TOS */
		hdr[8] = 0xFF;		  /* TTL */
		hdr[10] = hdr[11] = 0xFF; /* header checksum */
	} else {
		hdr[0] |= 0x0F;			 /* traffic class high nibble */
		hdr[1] = hdr[2] = hdr[3] = 0xFF; /* traffic class low nibble, flow label */
		hdr[7] = 0xFF;			 /* hop limit */
	}
	hdr[ip_len + 6] = hdr[ip_len + 7] = 0xFF; /* UDP checksum */
	hdr[ip_len + RB_UDP_LEN + 4] = 0xFF;	  /* BTH resv8a: FECN, BECN, resv6 */
}

/* Length of the IP, UDP and BTH headers at ip, or 0 if avail bytes cannot hold them. */
static unsigned icrc_header_len(const uint8_t *ip, uint32_t avail, unsigned *ip_len)
{
	unsigned n;

	if (avail < 1)
		return 0;
	*ip_len = (ip[0] >> 4) == 6 ? RB_IPV6_LEN : RB_IPV4_LEN;
	n = *ip_len + RB_UDP_LEN + ROCE_BTH_LEN;
	return avail < n ? 0 : n;
}

uint32_t roce_icrc_compute(const uint8_t *frame, uint32_t l3_off, uint32_t frame_len)
{
	if (frame_len < l3_off + ROCE_ICRC_LEN)
		return 0;
	return roce_icrc_partial(frame, l3_off, frame_len - ROCE_ICRC_LEN);
}

uint32_t roce_icrc_partial(const uint8_t *frame, uint32_t l3_off, uint32_t end)
{
	/* 8 x 0xFF, then the masked IP/UDP/BTH headers */
	uint8_t hdr[8 + RB_IPV6_LEN + RB_UDP_LEN + ROCE_BTH_LEN];
	const uint8_t *ip = frame + l3_off, *tail;
	uint32_t covered, tail_len, crc_head;
	unsigned n, ip_len = 0;
	int impl;

	if (end < l3_off)
		return 0;
	covered = end - l3_off;
	n = icrc_header_len(ip, covered, &ip_len);
	if (n == 0)
		return 0;
	impl = impl_current();
	/* one pass, in place: CRC32_MASK_LEN covers every masked field */
	if (impl == IMPL_CLMUL_WIDE || impl == IMPL_CLMUL_4X)
		return ~roce_crc32_clmul_update(
		    impl == IMPL_CLMUL_WIDE ? CRC32_CLMUL_WIDE : CRC32_CLMUL_4X, reg_after_lrh,
		    NULL, ip, covered, ip_len == RB_IPV4_LEN ? icrc_mask_v4 : icrc_mask_v6);

	memcpy(hdr + 8, ip, n);
	icrc_set_variant_fields(hdr + 8, ip_len);
	tail = ip + n;
	tail_len = covered - n;
	if (impl == IMPL_DPDK) {
		memset(hdr, 0xFF, 8);
		crc_head = rte_net_crc_calc(hdr, 8 + n, RTE_NET_CRC32_ETH);
		if (tail_len >= DPDK_MIN_TAIL)
			return crc32_combine(crc_head,
					     rte_net_crc_calc(tail, tail_len, RTE_NET_CRC32_ETH),
					     tail_len);
		return ~roce_crc32_table_update(~crc_head, tail, tail_len);
	}
	return ~roce_crc32_table_update(roce_crc32_table_update(reg_after_lrh, hdr + 8, n), tail,
					tail_len);
}

void roce_icrc_store(uint8_t *frame, uint32_t frame_len, uint32_t icrc)
{
	uint8_t *p = frame + frame_len - ROCE_ICRC_LEN;

	p[0] = (uint8_t)icrc;
	p[1] = (uint8_t)(icrc >> 8);
	p[2] = (uint8_t)(icrc >> 16);
	p[3] = (uint8_t)(icrc >> 24);
}

uint32_t roce_icrc_load(const uint8_t *frame, uint32_t frame_len)
{
	const uint8_t *p = frame + frame_len - ROCE_ICRC_LEN;

	return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
	       ((uint32_t)p[3] << 24);
}
