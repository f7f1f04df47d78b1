/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Private to the wire codec: the CRC-32 (IEEE, reflected, polynomial
 * 0xEDB88320) pieces shared by roce_icrc.c (GF(2) helpers, the table, the
 * choice of implementation) and roce_crc32_clmul.c (PCLMULQDQ folding).
 *
 * "reg" below is the raw CRC register: no initial or final inversion.
 * The public CRC value of roce_crc32_table(crc, ...) is ~reg(~crc, ...).
 */
#ifndef ROCEMU_WIRE_CRC32_H
#define ROCEMU_WIRE_CRC32_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CRC32_POLY_REFLECTED 0xEDB88320u

/** Bytes of the frame, from the IP header on, that the ICRC masks: all in the first 64. */
#define CRC32_MASK_LEN 64
/** Zero bytes an OR mask must have after its CRC32_MASK_LEN (read by 16-byte loads). */
#define CRC32_MASK_SLACK 16

/** x^(8 * nbytes) mod P, reflected (bit 31 = x^0). Needs roce_icrc.c's constructor. */
uint32_t roce_crc32_x_pow_bytes(size_t nbytes);

/** Byte-wise table update of the raw register. */
uint32_t roce_crc32_table_update(uint32_t reg, const uint8_t *p, size_t len);

/** The folding CRCs of roce_crc32_clmul.c, slowest first. */
enum crc32_clmul_kind {
	CRC32_CLMUL_NONE = 0, /**< not on this CPU: the table runs instead */
	CRC32_CLMUL_4X,	      /**< PCLMULQDQ + SSE4.1, four 128-bit lanes ("pclmul-4x") */
	CRC32_CLMUL_WIDE,     /**< VPCLMULQDQ + AVX2, four 256-bit registers ("vpclmul-avx2") */
};

/**
 * Compute the folding and Barrett constants from the polynomial (with
 * roce_crc32_x_pow_bytes) and look at the CPU: returns the fastest kind
 * that runs here. Called once, from roce_icrc.c's constructor.
 */
enum crc32_clmul_kind roce_crc32_clmul_init(void);
/** What roce_crc32_clmul_init() returned (for tests and benchmarks). */
enum crc32_clmul_kind roce_crc32_clmul_best(void);

/**
 * Raw register update by folding, any length and alignment. kind: at most
 * what roce_crc32_clmul_init() returned (CRC32_CLMUL_NONE runs the table).
 * or_mask: NULL, or CRC32_MASK_LEN bytes OR-ed into the first bytes of the
 * data before they enter the CRC (the data itself is not written): the
 * ICRC's "variant fields set to ones" without a copy of the headers. They
 * must be followed by CRC32_MASK_SLACK zero bytes.
 * dst: NULL, or where to copy the len bytes of data (unmasked) while they
 * are folded; must not overlap data.
 */
uint32_t roce_crc32_clmul_update(enum crc32_clmul_kind kind, uint32_t reg, void *dst,
				 const uint8_t *data, size_t len, const uint8_t *or_mask);

#endif
