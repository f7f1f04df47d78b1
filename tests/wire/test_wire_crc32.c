/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The folding CRC-32 (emulator/wire/roce_crc32_clmul.c) against two other
 * implementations of the same CRC: our byte-wise table and zlib's crc32().
 * Every folding kind this CPU runs is checked (the 128-bit "pclmul-4x" and,
 * where the CPU has it, the 256-bit "vpclmul-avx2"), plus the table path
 * behind the same entry point: every length 0..1024 at every alignment
 * 0..15, random lengths up to 10000, seeds chained at every split point,
 * the fused copy (bytes, bounds), the ICRC's OR mask, and the ICRC in two
 * parts (roce_icrc_partial, then roce_crc32 / roce_crc32_copy).
 * The data are pseudo-random from a fixed seed, printed on failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>

#include "roce_crc32.h"
#include "roce_wire.h"
#include "wire_test_util.h"

#define MAX_LEN	  10000
#define ALIGNS	  16
#define GUARD	  64
#define DATA_SEED 0x5EED1234u

static uint8_t data[MAX_LEN + 2 * ALIGNS];
static uint8_t copy_buf[MAX_LEN + 2 * ALIGNS + 2 * GUARD];
static enum crc32_clmul_kind best;
static uint32_t rng_state;

static const char *const kind_names[] = {"table", "pclmul-4x", "vpclmul-avx2"};

static uint32_t rng(void)
{
	/* xorshift32 */
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 17;
	rng_state ^= rng_state << 5;
	return rng_state;
}

static int setup(void **state)
{
	size_t i;

	(void)state;
	rng_state = DATA_SEED;
	for (i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)rng();
	best = roce_crc32_clmul_best();
	print_message("folding kinds on this CPU: up to %s\n", kind_names[best]);
	if (best == CRC32_CLMUL_NONE)
		print_message("no PCLMULQDQ here: only the table path is checked\n");
	return 0;
}

/* CRC value (as zlib's crc32) of one kind, continuing crc. */
static uint32_t kind_crc(enum crc32_clmul_kind kind, uint32_t crc, const uint8_t *p, size_t len)
{
	return ~roce_crc32_clmul_update(kind, ~crc, NULL, p, len, NULL);
}

static uint32_t zlib_crc(uint32_t crc, const uint8_t *p, size_t len)
{
	return (uint32_t)crc32(crc, p, (uInt)len);
}

/* One length at one alignment, with a seed: every kind, the table and zlib agree. */
static void check_one(size_t len, unsigned align, uint32_t seed)
{
	const uint8_t *p = data + align;
	uint32_t want = zlib_crc(seed, p, len);
	int kind;

	if (roce_crc32_table(seed, p, len) != want)
		fail_msg("table != zlib: len %zu align %u seed %08x (data seed %08x)", len, align,
			 seed, DATA_SEED);
	if (roce_crc32(seed, p, len) != want)
		fail_msg("roce_crc32 != zlib: len %zu align %u seed %08x", len, align, seed);
	for (kind = CRC32_CLMUL_NONE; kind <= (int)best; kind++) {
		uint32_t got = kind_crc((enum crc32_clmul_kind)kind, seed, p, len);

		if (got != want)
			fail_msg("%s: len %zu align %u seed %08x: %08x, zlib %08x (data seed %08x)",
				 kind_names[kind], len, align, seed, got, want, DATA_SEED);
	}
}

static void test_crc32_every_length_and_alignment(void **state)
{
	size_t len;
	unsigned align;

	(void)state;
	/* the check value of the IEEE CRC-32, from a zero seed */
	assert_int_equal(roce_crc32(0, "123456789", 9), 0xCBF43926u);
	for (len = 0; len <= 1024; len++)
		for (align = 0; align < ALIGNS; align++) {
			check_one(len, align, 0);
			check_one(len, align, (uint32_t)(len * 0x9E3779B9u) ^ align);
		}
}

static void test_crc32_random_lengths(void **state)
{
	unsigned i;

	(void)state;
	rng_state = DATA_SEED ^ 0xA5A5A5A5u;
	for (i = 0; i < 1600; i++)
		check_one(rng() % (MAX_LEN + 1), i % ALIGNS, rng());
	check_one(MAX_LEN, 0, 0);
	check_one(MAX_LEN, ALIGNS - 1, 0xFFFFFFFFu);
}

/* A CRC continued from the CRC of a prefix is the CRC of the whole, at every split. */
static void test_crc32_seed_chains(void **state)
{
	static const size_t lens[] = {0, 1, 3, 4, 15, 16, 17, 63, 64, 65, 127, 128, 129, 300, 1000};
	size_t i, cut;
	int kind;

	(void)state;
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint32_t whole = zlib_crc(0, data + 1, lens[i]);

		for (cut = 0; cut <= lens[i]; cut++)
			for (kind = CRC32_CLMUL_NONE; kind <= (int)best; kind++) {
				enum crc32_clmul_kind k = (enum crc32_clmul_kind)kind;
				uint32_t head = kind_crc(k, 0, data + 1, cut);

				if (kind_crc(k, head, data + 1 + cut, lens[i] - cut) != whole)
					fail_msg("%s: %zu bytes cut at %zu", kind_names[kind],
						 lens[i], cut);
			}
	}
}

/* The copy lands exactly in [dst, dst+len) and the CRC is the one of the source. */
static void check_copy(enum crc32_clmul_kind kind, bool public_api, size_t len, unsigned src_align,
		       unsigned dst_align)
{
	uint8_t *dst = copy_buf + GUARD + dst_align;
	const uint8_t *src = data + src_align;
	uint32_t seed = (uint32_t)len * 31u, got;
	size_t i;

	memset(copy_buf, 0xA5, sizeof(copy_buf));
	if (public_api)
		got = roce_crc32_copy(seed, dst, src, len);
	else
		got = ~roce_crc32_clmul_update(kind, ~seed, dst, src, len, NULL);
	if (got != zlib_crc(seed, src, len))
		fail_msg("%s copy: len %zu src align %u dst align %u: wrong CRC",
			 public_api ? "roce_crc32_copy" : kind_names[kind], len, src_align,
			 dst_align);
	if (len != 0 && memcmp(dst, src, len) != 0)
		fail_msg("%s copy: len %zu: bytes differ", kind_names[kind], len);
	for (i = 0; i < sizeof(copy_buf); i++)
		if ((copy_buf + i < dst || copy_buf + i >= dst + len) && copy_buf[i] != 0xA5)
			fail_msg("%s copy: len %zu dst align %u: byte %zd outside written",
				 kind_names[kind], len, dst_align, (ptrdiff_t)(copy_buf + i - dst));
}

static void test_crc32_copy(void **state)
{
	size_t len;
	unsigned a, i;
	int kind;

	(void)state;
	for (len = 0; len <= 300; len++)
		for (a = 0; a < ALIGNS; a++) {
			check_copy(best, true, len, a, (a * 7) % ALIGNS);
			for (kind = CRC32_CLMUL_NONE; kind <= (int)best; kind++)
				check_copy((enum crc32_clmul_kind)kind, false, len, a,
					   (a * 5 + 3) % ALIGNS);
		}
	rng_state = DATA_SEED ^ 0x3C3C3C3Cu;
	for (i = 0; i < 200; i++) {
		len = rng() % (MAX_LEN + 1);
		for (kind = CRC32_CLMUL_NONE; kind <= (int)best; kind++)
			check_copy((enum crc32_clmul_kind)kind, false, len, i % ALIGNS,
				   (i / ALIGNS) % ALIGNS);
	}
}

/* The OR mask over the first CRC32_MASK_LEN bytes: as if the data had been masked first. */
static void test_crc32_or_mask(void **state)
{
	static uint8_t masked[MAX_LEN];
	uint8_t mask[CRC32_MASK_LEN + CRC32_MASK_SLACK] = {0};
	size_t len, i;
	unsigned round;
	int kind;

	(void)state;
	rng_state = DATA_SEED ^ 0x0F0F0F0Fu;
	for (round = 0; round < 600; round++) {
		const uint8_t *p = data + round % ALIGNS;
		uint32_t reg = rng(), want;

		len = round < 300 ? round : rng() % 5000;
		/* sparse masks, like the ICRC's, and dense ones */
		for (i = 0; i < CRC32_MASK_LEN; i++)
			mask[i] = round & 1 ? (uint8_t)rng() : (rng() % 8 == 0 ? 0xFF : 0);
		memcpy(masked, p, len);
		for (i = 0; i < len && i < CRC32_MASK_LEN; i++)
			masked[i] |= mask[i];
		want = roce_crc32_table(~reg, masked, len);
		for (kind = CRC32_CLMUL_NONE; kind <= (int)best; kind++) {
			uint32_t got = ~roce_crc32_clmul_update((enum crc32_clmul_kind)kind, reg,
								NULL, p, len, mask);

			if (got != want)
				fail_msg("%s masked: len %zu align %u", kind_names[kind], len,
					 round % ALIGNS);
		}
	}
}

/*
 * roce_icrc_partial continued by roce_crc32 is roce_icrc_compute, for every
 * split and every implementation; and a frame built by placing its payload
 * with roce_crc32_copy is byte for byte the one roce_finish builds.
 */
static void test_icrc_partial_and_fused_build(void **state)
{
	static const enum roce_icrc_impl impls[] = {ROCE_ICRC_IMPL_TABLE, ROCE_ICRC_IMPL_PCLMUL,
						    ROCE_ICRC_IMPL_VPCLMUL};
	static const uint32_t plens[] = {0, 1, 5, 16, 63, 64, 100, 255, 1024, 1500, 4096};
	static uint8_t ref[8192], built[8192], payload[4096];
	unsigned i, v, im;

	(void)state;
	for (i = 0; i < sizeof(plens) / sizeof(plens[0]); i++)
		for (v = 0; v < 4; v++) {
			struct roce_pkt pkt;
			uint32_t l3 = v & 2 ? 18 : 14, hdr_len, frame_len, pad, crc, cut;
			int len;

			wt_sample_pkt(&pkt, ROCE_OP_SEND_MIDDLE, v & 1 ? 6 : 4, v & 2, plens[i], i);
			wt_fill_payload(payload, plens[i], i);
			len = wt_build(&pkt, payload, ref, sizeof(ref));
			assert_true(len > 0);
			frame_len = (uint32_t)len;
			for (im = 0; im < sizeof(impls) / sizeof(impls[0]); im++) {
				if (roce_icrc_set_impl(impls[im]) != 0)
					continue;
				/* SEND MIDDLE: no extension header, the headers end at IP/UDP/BTH
				 */
				for (cut = roce_header_len(&pkt); cut <= frame_len - ROCE_ICRC_LEN;
				     cut++) {
					crc = roce_icrc_partial(ref, l3, cut);
					crc = roce_crc32(crc, ref + cut,
							 frame_len - ROCE_ICRC_LEN - cut);
					if (crc != roce_icrc_load(ref, frame_len))
						fail_msg("%s: payload %u v%u cut %u",
							 roce_icrc_impl_name(), plens[i], v, cut);
				}
			}
			roce_icrc_set_impl(ROCE_ICRC_IMPL_AUTO);

			/* the fused build */
			memset(built, 0x5A, sizeof(built));
			hdr_len = (uint32_t)roce_build_headers(built, sizeof(built), &pkt);
			assert_int_equal(hdr_len, roce_header_len(&pkt));
			pad = frame_len - hdr_len - plens[i] - ROCE_ICRC_LEN;
			crc = roce_icrc_partial(built, l3, hdr_len);
			crc = roce_crc32_copy(crc, built + hdr_len, payload, plens[i]);
			memset(built + hdr_len + plens[i], 0, pad);
			crc = roce_crc32(crc, built + hdr_len + plens[i], pad);
			roce_icrc_store(built, frame_len, crc);
			if (memcmp(built, ref, frame_len) != 0)
				fail_msg("fused build differs: payload %u v%u", plens[i], v);
		}
	/* too short for the headers (the last frame is IPv6 with VLAN: 18 + 60) */
	assert_int_not_equal(roce_icrc_partial(ref, 18, 18 + 60), 0);
	assert_int_equal(roce_icrc_partial(ref, 18, 18 + 59), 0);
	assert_int_equal(roce_icrc_partial(ref, 14, 10), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_crc32_every_length_and_alignment),
	    cmocka_unit_test(test_crc32_random_lengths),
	    cmocka_unit_test(test_crc32_seed_chains),
	    cmocka_unit_test(test_crc32_copy),
	    cmocka_unit_test(test_crc32_or_mask),
	    cmocka_unit_test(test_icrc_partial_and_fused_build),
	};

	return cmocka_run_group_tests_name("wire_crc32", tests, setup, NULL);
}
