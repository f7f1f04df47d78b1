/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * CRC-32 (IEEE, reflected 0xEDB88320) by carry-less multiplication,
 * folding independent 128-bit lanes, then one lane, then a Barrett
 * reduction. The method is the one of Gopal et al., "Fast CRC Computation
 * for Generic Polynomials Using PCLMULQDQ Instruction" (Intel, 2009); the
 * constants are derived here from the polynomial at start-up.
 *
 * Two kinds (enum crc32_clmul_kind):
 * - "pclmul-4x": PCLMULQDQ on four 128-bit lanes, 64 bytes per round.
 * - "vpclmul-avx2": VPCLMULQDQ on four 256-bit registers (eight lanes),
 *   128 bytes per round. Folding is bound by the carry-less multiplier's
 *   throughput, not its latency (two multiplications per 16 bytes; on the
 *   EPYC this was measured on, one (V)PCLMULQDQ per ~2 cycles, 128 or 256
 *   bits alike, latency ~4), so more 128-bit lanes would not help and the
 *   256-bit form doubles the rate. Without AVX-512 that is the ceiling.
 *
 * Bit order. Data and register are reflected: in a 16-byte block loaded
 * little-endian, bit m of the 128-bit value is the coefficient of x^(127-m)
 * (byte 0 bit 0 comes first on the wire, so it has the highest degree).
 * A constant c = x^e mod P is stored as its 32-bit reflected value shifted
 * left by one (bit j <-> x^(32-j)). With those conventions the carry-less
 * product of a block's low quadword H (x^127..x^64) and c, read back as a
 * 128-bit block, is x^32 * H * x^e; so folding a block A over D bits
 * (A * x^D, to be added to the block D bits later) is
 *     clmul(A.lo, x^(D+32)) ^ clmul(A.hi, x^(D-32)).
 *
 * Any length and alignment: the seed is XOR-ed into the first four data
 * bytes (CRC(reg, M) = CRC(0, M with reg added to its first 32 bits)), and
 * leading zero bytes do not change a CRC that starts from 0. So the stream
 * folded is len % 16 ? 16 - len % 16 : 0 zero bytes, then the data: whole
 * blocks, of which only the first needs a byte shift (PSHUFB); the others
 * are unaligned loads (loadu) from the data in place. Nothing reads outside
 * [data, data+len), nothing goes through the stack.
 *
 * x86 only; the code is compiled for PCLMULQDQ and SSE4.1 (and VPCLMULQDQ
 * and AVX2 for the wide kind) with target attributes, so the build needs no
 * -march, and roce_crc32_clmul_init() says which kind the CPU runs.
 */
#include <string.h>

#include "roce_crc32.h"

#if defined(__x86_64__) || defined(__i386__)
#define HAVE_CLMUL_CODE 1
#include <immintrin.h>
#endif

#define BLOCK 16
/* Fold constants for distances of 1..FOLD_MAX blocks (the 256-bit loop folds over 8). */
#define FOLD_MAX 8

/* The constants, computed once by roce_crc32_clmul_init(). */
static struct {
	/* fold[n]: fold one block over n blocks, {x^(128n+32), x^(128n-32)} */
	uint64_t fold[FOLD_MAX + 1][2];
	/* the final 128 -> 96 -> 64 bit steps: {x^96, x^64} */
	uint64_t reduce[2];
	/* Barrett: {floor(x^64 / P), P}, both 33 bits */
	uint64_t barrett[2];
} k;

/* x^(8 * nbytes) mod P in the constant convention (bit j <-> x^(32-j)). */
static uint64_t constant_bytes(size_t nbytes)
{
	return (uint64_t)roce_crc32_x_pow_bytes(nbytes) << 1;
}

/* Reverse the low `bits` bits of v. */
static uint64_t reverse_bits(uint64_t v, unsigned bits)
{
	uint64_t r = 0;
	unsigned i;

	for (i = 0; i < bits; i++, v >>= 1)
		r = (r << 1) | (v & 1);
	return r;
}

/*
 * floor(x^64 / P) by long division in normal bit order (bit d = x^d), then
 * reflected into the constant convention.
 */
static uint64_t barrett_mu(uint64_t poly_normal)
{
	/* the first step, x^64 - P * x^32, leaves a remainder that fits in 64 bits */
	uint64_t rem = (poly_normal & 0xFFFFFFFFu) << 32, quot = 1ull << 32;
	int d;

	for (d = 63; d >= 32; d--) {
		if (rem >> d & 1) {
			rem ^= poly_normal << (d - 32);
			quot |= 1ull << (d - 32);
		}
	}
	return reverse_bits(quot, 33);
}

/* The same update with the table: the masked bytes through a copy, the rest in place. */
static uint32_t table_update_masked(uint32_t reg, void *dst, const uint8_t *data, size_t len,
				    const uint8_t *or_mask)
{
	uint8_t tmp[CRC32_MASK_LEN];
	size_t n = 0, i;

	if (dst != NULL && len != 0)
		memcpy(dst, data, len);
	if (or_mask != NULL) {
		n = len < CRC32_MASK_LEN ? len : CRC32_MASK_LEN;
		for (i = 0; i < n; i++)
			tmp[i] = data[i] | or_mask[i];
		reg = roce_crc32_table_update(reg, tmp, n);
	}
	return roce_crc32_table_update(reg, data + n, len - n);
}

#ifdef HAVE_CLMUL_CODE

#define CLMUL_TARGET __attribute__((target("pclmul,sse4.1")))
#define CLMUL_INLINE __attribute__((target("pclmul,sse4.1"), always_inline)) static inline

static enum crc32_clmul_kind cpu_clmul_kind(void)
{
	__builtin_cpu_init(); /* we may run from a constructor */
	if (!__builtin_cpu_supports("pclmul") || !__builtin_cpu_supports("sse4.1"))
		return CRC32_CLMUL_NONE;
	/* avx2 is only reported when the OS saves the 256-bit registers */
	if (__builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx2"))
		return CRC32_CLMUL_WIDE;
	return CRC32_CLMUL_4X;
}

CLMUL_INLINE __m128i load_const(const uint64_t c[2])
{
	return _mm_set_epi64x((long long)c[1], (long long)c[0]);
}

/* a * x^D, as a block to be added D bits further on (k = fold constants for D). */
CLMUL_INLINE __m128i fold(__m128i a, __m128i kd)
{
	return _mm_xor_si128(_mm_clmulepi64_si128(a, kd, 0x00), _mm_clmulepi64_si128(a, kd, 0x11));
}

CLMUL_INLINE __m128i load_block(const uint8_t *p)
{
	return _mm_loadu_si128((const __m128i *)(const void *)p);
}

CLMUL_INLINE void store_block(uint8_t *dst, __m128i v)
{
	_mm_storeu_si128((__m128i *)(void *)dst, v);
}

/* The register for a 128-bit block A: A * x^32 mod P. */
CLMUL_INLINE uint32_t reduce(__m128i a)
{
	const __m128i low32 = _mm_set_epi32(0, 0, 0, -1);
	const __m128i kr = load_const(k.reduce), kb = load_const(k.barrett);
	__m128i v, u, t;

	/* 128 -> 96 bits: A.lo * x^96 + A.hi * x^32 */
	v = _mm_xor_si128(_mm_clmulepi64_si128(a, kr, 0x00), _mm_srli_si128(a, 8));
	/* 96 -> 64 bits: the top 32 coefficients times x^64, plus the rest */
	u = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(v, low32), kr, 0x10),
			  _mm_srli_si128(v, 4));
	/* Barrett: q = floor(floor(U / x^32) * mu / x^32), remainder U + q * P */
	t = _mm_clmulepi64_si128(_mm_and_si128(u, low32), kb, 0x00);
	t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), kb, 0x10);
	return (uint32_t)_mm_extract_epi32(_mm_xor_si128(u, t), 1);
}

/*
 * The stream folded is pad zero bytes, then the data: pad (0..15) makes it
 * whole blocks. Its first block is the first 16 data bytes moved up by pad
 * bytes; every further block i is an unaligned load of the data at
 * 16 * i - pad, which is inside the data. So the data is only ever read in
 * place, and nothing waits on a copy in memory.
 */
struct cursor {
	const uint8_t *p; /* the next block */
	size_t left;	  /* bytes left, whole blocks */
	uint8_t *dst;	  /* where the next block is copied to; NULL: no copy */
};

CLMUL_INLINE __m128i next_block(struct cursor *c)
{
	__m128i v = load_block(c->p);

	if (c->dst != NULL) {
		store_block(c->dst, v);
		c->dst += BLOCK;
	}
	c->p += BLOCK;
	c->left -= BLOCK;
	return v;
}

/*
 * PSHUFB controls: 16 bytes from byte_shift + 16 - n move a block up by n
 * bytes (zeros first); 16 bytes from byte_shift + 32 - n move it down by
 * 16 - n bytes (what moving up by n pushed out, zeros after).
 */
static const uint8_t byte_shift[3 * BLOCK] = {
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0,	  1,	2,    3,    4,	  5,	6,    7,    8,	  9,	10,   11,   12,	  13,	14,   15,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80};

/* The cursor over stream blocks 1.. (len >= 16: the data holds them all). */
CLMUL_INLINE struct cursor stream_after_first(const uint8_t *data, size_t len, size_t pad,
					      uint8_t *dst)
{
	struct cursor c = {data + BLOCK - pad, pad + len - BLOCK, NULL};

	if (dst != NULL)
		c.dst = dst + BLOCK - pad;
	return c;
}

/* Stream block 0: the first 16 data bytes (copied as they are), masked, seeded, moved up. */
CLMUL_INLINE __m128i first_block(uint32_t reg, const uint8_t *data, size_t pad,
				 const uint8_t *or_mask, uint8_t *dst)
{
	__m128i v = load_block(data);

	if (dst != NULL)
		store_block(dst, v);
	if (or_mask != NULL)
		v = _mm_or_si128(v, load_block(or_mask));
	/* the seed onto the first four data bytes (CRC(reg, M) = CRC(0, M + reg x^(|M|-32))) */
	v = _mm_xor_si128(v, _mm_cvtsi32_si128((int)reg));
	return _mm_shuffle_epi8(v, load_block(byte_shift + BLOCK - pad));
}

/* Stream block i >= 1, with the mask if it holds masked bytes (mask bytes past 64 are 0). */
CLMUL_INLINE __m128i masked_block(struct cursor *c, const uint8_t *or_mask, size_t pad, size_t i)
{
	__m128i v = next_block(c);

	if (or_mask != NULL && i * BLOCK < CRC32_MASK_LEN + pad)
		v = _mm_or_si128(v, load_block(or_mask + i * BLOCK - pad));
	return v;
}

/*
 * Stream block 1, masked; with pad > 12 the last seed bytes land in it, as
 * the data bytes they go with were pushed out of block 0.
 */
CLMUL_INLINE __m128i second_block(struct cursor *c, uint32_t reg, const uint8_t *or_mask,
				  size_t pad)
{
	__m128i seed =
	    _mm_shuffle_epi8(_mm_cvtsi32_si128((int)reg), load_block(byte_shift + 2 * BLOCK - pad));

	return _mm_xor_si128(masked_block(c, or_mask, pad, 1), seed);
}

/* Fewer than 8 blocks: one after the other (no round of lanes to fill). */
static CLMUL_TARGET uint32_t crc32_fold_short(uint32_t reg, const uint8_t *data, size_t len,
					      size_t pad, const uint8_t *or_mask, uint8_t *dst)
{
	const __m128i k1 = load_const(k.fold[1]);
	struct cursor c = stream_after_first(data, len, pad, dst);
	__m128i a = first_block(reg, data, pad, or_mask, dst);
	size_t i;

	if (c.left != 0)
		a = _mm_xor_si128(fold(a, k1), second_block(&c, reg, or_mask, pad));
	for (i = 2; c.left != 0; i++)
		a = _mm_xor_si128(fold(a, k1), masked_block(&c, or_mask, pad, i));
	return reduce(a);
}

/* Four 16-byte lanes, 64 bytes apart. */
struct lanes4 {
	__m128i x0, x1, x2, x3;
};

/* Fold the lanes over the data while 64 bytes are left, then into one block. */
CLMUL_INLINE __m128i lanes4_finish(struct lanes4 l, struct cursor *c)
{
	const __m128i k1 = load_const(k.fold[1]), k4 = load_const(k.fold[4]);

	while (c->left >= 4 * BLOCK) {
		l.x0 = _mm_xor_si128(fold(l.x0, k4), next_block(c));
		l.x1 = _mm_xor_si128(fold(l.x1, k4), next_block(c));
		l.x2 = _mm_xor_si128(fold(l.x2, k4), next_block(c));
		l.x3 = _mm_xor_si128(fold(l.x3, k4), next_block(c));
	}
	/* each lane over the lanes after it */
	return _mm_xor_si128(
	    _mm_xor_si128(fold(l.x0, load_const(k.fold[3])), fold(l.x1, load_const(k.fold[2]))),
	    _mm_xor_si128(fold(l.x2, k1), l.x3));
}

/* Four lanes while 64 bytes are left; a: everything before. */
CLMUL_INLINE __m128i fold_4x(__m128i a, struct cursor *c)
{
	struct lanes4 l;

	if (c->left < 4 * BLOCK)
		return a;
	l.x0 = _mm_xor_si128(next_block(c), fold(a, load_const(k.fold[1])));
	l.x1 = next_block(c);
	l.x2 = next_block(c);
	l.x3 = next_block(c);
	return lanes4_finish(l, c);
}

/* One block at a time to the end. */
CLMUL_INLINE __m128i fold_1x(__m128i a, struct cursor *c)
{
	const __m128i k1 = load_const(k.fold[1]);

	while (c->left >= BLOCK)
		a = _mm_xor_si128(fold(a, k1), next_block(c));
	return a;
}

/*
 * Stream blocks 0 to 4, all that the mask and the seed can reach (the mask's
 * 64 bytes after up to 15 of padding), into head[]; the cursor after them.
 */
CLMUL_INLINE struct cursor masked_head(uint32_t reg, const uint8_t *data, size_t len, size_t pad,
				       const uint8_t *or_mask, uint8_t *dst, __m128i head[5])
{
	struct cursor c = stream_after_first(data, len, pad, dst);

	head[0] = first_block(reg, data, pad, or_mask, dst);
	head[1] = second_block(&c, reg, or_mask, pad);
	head[2] = masked_block(&c, or_mask, pad, 2);
	head[3] = masked_block(&c, or_mask, pad, 3);
	head[4] = masked_block(&c, or_mask, pad, 4);
	return c;
}

/* At least 8 blocks: the first eight as two rounds of four lanes, then the rest. */
CLMUL_INLINE uint32_t fold_all_4x(uint32_t reg, const uint8_t *data, size_t len, size_t pad,
				  const uint8_t *or_mask, uint8_t *dst)
{
	const __m128i k4 = load_const(k.fold[4]);
	__m128i head[5];
	struct cursor c = masked_head(reg, data, len, pad, or_mask, dst, head);
	struct lanes4 l;

	l.x0 = _mm_xor_si128(fold(head[0], k4), head[4]);
	l.x1 = _mm_xor_si128(fold(head[1], k4), next_block(&c));
	l.x2 = _mm_xor_si128(fold(head[2], k4), next_block(&c));
	l.x3 = _mm_xor_si128(fold(head[3], k4), next_block(&c));
	return reduce(fold_1x(lanes4_finish(l, &c), &c));
}

/*
 * The entry point of a fold_all_*, compiled for its instruction set. The
 * loops are inlined twice: with dst known to be NULL the compiler drops the
 * stores (no test per block).
 */
#define FOLD_ENTRY(name, target, fold_all)                                                         \
	static target uint32_t name(uint32_t reg, const uint8_t *data, size_t len, size_t pad,     \
				    const uint8_t *or_mask, uint8_t *dst)                          \
	{                                                                                          \
		if (dst == NULL)                                                                   \
			return fold_all(reg, data, len, pad, or_mask, NULL);                       \
		return fold_all(reg, data, len, pad, or_mask, dst);                                \
	}

FOLD_ENTRY(crc32_fold_4x, CLMUL_TARGET, fold_all_4x)

/*
 * The same with VPCLMULQDQ on 256-bit registers (AVX2): four registers of
 * two lanes each, 128 bytes per round.
 */
#if defined(__clang__)
#define WIDE_ISA "vpclmulqdq,avx2,pclmul,sse4.1"
#else
/* tuned for DPDK's -march=corei7, GCC would split each unaligned 256-bit load and store in two */
#define WIDE_ISA "vpclmulqdq,avx2,pclmul,sse4.1,tune=generic"
#endif
#define WIDE_TARGET __attribute__((target(WIDE_ISA)))
#define WIDE_INLINE __attribute__((target(WIDE_ISA), always_inline)) static inline

WIDE_INLINE __m256i fold_wide(__m256i a, __m256i kd)
{
	return _mm256_xor_si256(_mm256_clmulepi64_epi128(a, kd, 0x00),
				_mm256_clmulepi64_epi128(a, kd, 0x11));
}

WIDE_INLINE __m256i next_wide(struct cursor *c)
{
	__m256i v = _mm256_loadu_si256((const __m256i *)(const void *)c->p);

	if (c->dst != NULL) {
		_mm256_storeu_si256((__m256i *)(void *)c->dst, v);
		c->dst += 2 * BLOCK;
	}
	c->p += 2 * BLOCK;
	c->left -= 2 * BLOCK;
	return v;
}

WIDE_INLINE __m256i wide_const(const uint64_t c[2])
{
	return _mm256_broadcastsi128_si256(load_const(c));
}

/* Two blocks, lo first, as one 256-bit register. */
WIDE_INLINE __m256i pair(__m128i lo, __m128i hi)
{
	return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

/* As fold_all_4x: the first eight blocks are the first round of four registers. */
WIDE_INLINE uint32_t fold_all_wide(uint32_t reg, const uint8_t *data, size_t len, size_t pad,
				   const uint8_t *or_mask, uint8_t *dst)
{
	const __m256i k8 = wide_const(k.fold[8]);
	__m128i head[5], a;
	struct cursor c = masked_head(reg, data, len, pad, or_mask, dst, head);
	__m256i y0 = pair(head[0], head[1]), y1 = pair(head[2], head[3]);
	__m256i y2 = pair(head[4], next_block(&c)), y3 = next_wide(&c);

	while (c.left >= 8 * BLOCK) {
		y0 = _mm256_xor_si256(fold_wide(y0, k8), next_wide(&c));
		y1 = _mm256_xor_si256(fold_wide(y1, k8), next_wide(&c));
		y2 = _mm256_xor_si256(fold_wide(y2, k8), next_wide(&c));
		y3 = _mm256_xor_si256(fold_wide(y3, k8), next_wide(&c));
	}
	/* into one register of two lanes, then the low lane over the high one */
	y0 = _mm256_xor_si256(_mm256_xor_si256(fold_wide(y0, wide_const(k.fold[6])),
					       fold_wide(y1, wide_const(k.fold[4]))),
			      _mm256_xor_si256(fold_wide(y2, wide_const(k.fold[2])), y3));
	a = _mm_xor_si128(fold(_mm256_castsi256_si128(y0), load_const(k.fold[1])),
			  _mm256_extracti128_si256(y0, 1));
	return reduce(fold_1x(fold_4x(a, &c), &c));
}

FOLD_ENTRY(crc32_fold_wide, WIDE_TARGET, fold_all_wide)

uint32_t roce_crc32_clmul_update(enum crc32_clmul_kind kind, uint32_t reg, void *dst,
				 const uint8_t *data, size_t len, const uint8_t *or_mask)
{
	size_t pad;

	/* too short to fold (the seed may not even fit in the data), or no folding here */
	if (kind == CRC32_CLMUL_NONE || len < BLOCK)
		return table_update_masked(reg, dst, data, len, or_mask);
	pad = (BLOCK - len % BLOCK) % BLOCK;
	if (pad + len < 8 * BLOCK)
		return crc32_fold_short(reg, data, len, pad, or_mask, dst);
	if (kind == CRC32_CLMUL_WIDE)
		return crc32_fold_wide(reg, data, len, pad, or_mask, dst);
	return crc32_fold_4x(reg, data, len, pad, or_mask, dst);
}

#else /* not x86: nothing to fold with; roce_crc32_clmul_init() says so */

static enum crc32_clmul_kind cpu_clmul_kind(void)
{
	return CRC32_CLMUL_NONE;
}

uint32_t roce_crc32_clmul_update(enum crc32_clmul_kind kind, uint32_t reg, void *dst,
				 const uint8_t *data, size_t len, const uint8_t *or_mask)
{
	(void)kind;
	return table_update_masked(reg, dst, data, len, or_mask);
}

#endif

static enum crc32_clmul_kind best_kind;

enum crc32_clmul_kind roce_crc32_clmul_best(void)
{
	return best_kind;
}

enum crc32_clmul_kind roce_crc32_clmul_init(void)
{
	unsigned n;

	for (n = 1; n <= FOLD_MAX; n++) {
		k.fold[n][0] = constant_bytes(16 * n + 4);
		k.fold[n][1] = constant_bytes(16 * n - 4);
	}
	k.reduce[0] = constant_bytes(12);
	k.reduce[1] = constant_bytes(8);
	/* P in normal order: x^32 + the reflected polynomial's bits reversed */
	k.barrett[0] = barrett_mu((1ull << 32) | reverse_bits(CRC32_POLY_REFLECTED, 32));
	k.barrett[1] = ((uint64_t)CRC32_POLY_REFLECTED << 1) | 1;
	best_kind = cpu_clmul_kind();
	return best_kind;
}
