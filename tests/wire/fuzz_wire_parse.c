/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * libFuzzer target over the parser. Each input is parsed as an Ethernet
 * frame (with and without ICRC verification) and as a bare IP datagram; the
 * parser must not crash, hang or read outside the input (ASan sees the
 * input as a block of exactly `size` bytes). When a frame parses, it is
 * rebuilt from its descriptor and must
 *  - equal the input byte for byte up to the ICRC, except the fields the
 *    descriptor does not carry (IPv4 flags other than MF, which the builder
 *    always writes as DF only, and so the IPv4 checksum; the DETH reserved
 *    byte; the pad bytes, which go out as zero; any Ethernet padding after
 *    the datagram);
 *  - equal it entirely, ICRC included, when the ICRC had verified and none
 *    of those fields differed;
 *  - parse again, ICRC verified, to the same descriptor.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roce_wire.h"
#include "wire_test_util.h"

static void crash(const char *what, const struct roce_pkt *pkt)
{
	fprintf(stderr, "fuzz_wire_parse: %s (opcode 0x%02x, %u bytes)\n", what, pkt->opcode,
		pkt->frame_len);
	abort();
}

/*
 * Clear the bytes a rebuild cannot reproduce; returns true if none of them
 * differed from what the builder writes (then the whole frame must match).
 */
static bool mask_unreproduced(uint8_t *f, const struct roce_pkt *pkt)
{
	bool same = true;
	uint32_t i, pad_off = pkt->payload_off + pkt->payload_len;

	if (pkt->path.ip_version == 4) {
		/* flags: the builder always writes DF, so the checksum follows */
		same &= f[pkt->l3_off + 6] == 0x40 && f[pkt->l3_off + 7] == 0;
		f[pkt->l3_off + 6] &= 0x1F;
		f[pkt->l3_off + 10] = f[pkt->l3_off + 11] = 0;
	}
	if (pkt->op->hdrs & ROCE_HDR_DETH) {
		uint8_t *resv = &f[pkt->ext_off + pkt->op->hdr_off[ROCE_HDRI_DETH] + 4];

		same &= *resv == 0;
		*resv = 0;
	}
	if (pkt->op->hdrs & ROCE_HDR_XRCETH) { /* its first byte is reserved, out as zero */
		uint8_t *resv = &f[pkt->ext_off + pkt->op->hdr_off[ROCE_HDRI_XRCETH]];

		same &= *resv == 0;
		*resv = 0;
	}
	for (i = 0; i < pkt->pad; i++) { /* pad bytes go out as zero */
		same &= f[pad_off + i] == 0;
		f[pad_off + i] = 0;
	}
	return same;
}

static void check_rebuild(const uint8_t *data, const struct roce_pkt *pkt)
{
	static uint8_t rebuilt[70000], orig[70000];
	struct roce_pkt again;
	const char *diff;
	bool reproducible;
	int len;

	len = wt_rebuild(pkt, data, rebuilt, sizeof(rebuilt));
	if (len != (int)pkt->frame_len)
		crash("rebuild has a different length", pkt);
	memcpy(orig, data, (size_t)len);
	reproducible = mask_unreproduced(orig, pkt);
	if (reproducible && pkt->icrc_checked && memcmp(rebuilt, data, (size_t)len) != 0)
		crash("verified frame does not rebuild to the same bytes", pkt);
	mask_unreproduced(rebuilt, pkt);
	if (memcmp(rebuilt, orig, (size_t)len - ROCE_ICRC_LEN) != 0)
		crash("rebuild differs before the ICRC", pkt);

	len = wt_rebuild(pkt, data, rebuilt, sizeof(rebuilt));
	if (roce_parse(rebuilt, (uint32_t)len, ROCE_PARSE_VERIFY_ICRC, &again) != ROCE_PARSE_OK)
		crash("rebuilt frame does not parse", pkt);
	diff = wt_pkt_diff(pkt, &again);
	if (diff != NULL) {
		fprintf(stderr, "field %s\n", diff);
		crash("rebuilt frame parses to another descriptor", pkt);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct roce_pkt pkt, verified;
	enum roce_parse_status st, st_v;

	if (size > 65600)
		return 0;
	st = roce_parse(data, (uint32_t)size, 0, &pkt);
	if ((unsigned)st >= ROCE_PARSE_STATUS_COUNT)
		crash("status out of range", &pkt);
	st_v = roce_parse(data, (uint32_t)size, ROCE_PARSE_VERIFY_ICRC, &verified);
	/* verification only adds the ICRC check at the very end */
	if (st != ROCE_PARSE_OK ? st_v != st
				: (st_v != ROCE_PARSE_OK && st_v != ROCE_PARSE_BAD_ICRC))
		crash("ICRC flag changed an earlier verdict", &pkt);
	if (st == ROCE_PARSE_OK) {
		if (pkt.frame_len > size ||
		    pkt.payload_off + pkt.payload_len + pkt.pad + ROCE_ICRC_LEN != pkt.frame_len)
			crash("descriptor points outside the frame", &pkt);
		check_rebuild(data, st_v == ROCE_PARSE_OK ? &verified : &pkt);
	}
	(void)roce_parse_ip(data, (uint32_t)size, ROCE_PARSE_VERIFY_ICRC, &pkt);
	return 0;
}
