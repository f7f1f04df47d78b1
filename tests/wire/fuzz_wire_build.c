/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * libFuzzer target over the builder: the input fills a descriptor field by
 * field (any values, valid or not) and an output room size. The builder must
 * either refuse (negative errno) or write exactly roce_header_len() bytes
 * inside the room; a frame it accepts must finish, parse with its ICRC
 * verified, and give back the descriptor it was built from.
 * roce_build_headers_icrc() must answer the same, write the same bytes, and
 * give the ICRC's header CRC that roce_icrc_partial() reads from them.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roce_wire.h"
#include "wire_test_util.h"

struct reader {
	const uint8_t *p;
	size_t left;
};

static uint64_t take(struct reader *r, unsigned bytes)
{
	uint64_t v = 0;

	while (bytes--) {
		v = (v << 8) | (r->left ? *r->p : 0);
		if (r->left) {
			r->p++;
			r->left--;
		}
	}
	return v;
}

static void fill_descriptor(struct reader *r, struct roce_pkt *pkt)
{
	unsigned i, mode;

	memset(pkt, 0, sizeof(*pkt));
	for (i = 0; i < 6; i++) {
		pkt->path.dst_mac[i] = (uint8_t)take(r, 1);
		pkt->path.src_mac[i] = (uint8_t)take(r, 1);
	}
	mode = (unsigned)take(r, 1);
	pkt->path.has_vlan = mode & 1;
	pkt->path.vlan_tci = (uint16_t)take(r, 2);
	pkt->path.ip_version = (mode & 6) == 0 ? 4 : (mode & 6) == 2 ? 6 : (uint8_t)take(r, 1);
	for (i = 0; i < 16; i++) {
		pkt->path.src_gid[i] = (uint8_t)take(r, 1);
		pkt->path.dst_gid[i] = (uint8_t)take(r, 1);
	}
	if (mode & 8) { /* mostly valid IPv4-mapped GIDs */
		roce_gid_from_ipv4(pkt->path.src_gid, roce_gid_to_ipv4(pkt->path.src_gid));
		roce_gid_from_ipv4(pkt->path.dst_gid, roce_gid_to_ipv4(pkt->path.dst_gid));
	}
	pkt->path.tclass = (uint8_t)take(r, 1);
	pkt->path.ttl = (uint8_t)take(r, 1);
	pkt->path.flow_label = (uint32_t)take(r, (mode & 16) ? 4 : 2);
	pkt->path.ip_id = (uint16_t)take(r, 2);
	pkt->path.dont_fragment = mode & 32;
	pkt->path.udp_sport = (uint16_t)take(r, 2);
	pkt->path.udp_csum = (uint16_t)take(r, 2);

	pkt->opcode = (uint8_t)take(r, 1);
	i = (unsigned)take(r, 1);
	pkt->se = i & 1;
	pkt->mig = i & 2;
	pkt->fecn = i & 4;
	pkt->becn = i & 8;
	pkt->ackreq = i & 16;
	pkt->pad = (uint8_t)take(r, 1); /* ignored by the builder */
	pkt->tver = (mode & 64) ? (uint8_t)take(r, 1) : 0;
	pkt->pkey = (uint16_t)take(r, 2);
	pkt->resv8a_low = (uint8_t)take(r, 1);
	pkt->resv7 = (uint8_t)take(r, 1);
	pkt->dqpn = (uint32_t)take(r, (mode & 128) ? 4 : 3);
	pkt->psn = (uint32_t)take(r, (mode & 128) ? 4 : 3);
	pkt->reth.va = take(r, 8);
	pkt->reth.rkey = (uint32_t)take(r, 4);
	pkt->reth.dma_len = (uint32_t)take(r, 4);
	pkt->aeth.syndrome = (uint8_t)take(r, 1);
	pkt->aeth.msn = (uint32_t)take(r, (mode & 128) ? 4 : 3);
	pkt->atomic.va = take(r, 8);
	pkt->atomic.rkey = (uint32_t)take(r, 4);
	pkt->atomic.swap_add = take(r, 8);
	pkt->atomic.compare = take(r, 8);
	pkt->atomic_orig = take(r, 8);
	pkt->imm = (uint32_t)take(r, 4);
	pkt->ieth_rkey = (uint32_t)take(r, 4);
	pkt->deth.qkey = (uint32_t)take(r, 4);
	pkt->deth.src_qp = (uint32_t)take(r, (mode & 128) ? 4 : 3);
	/* payload length: usually small, sometimes anything */
	pkt->payload_len = (uint32_t)take(r, 4);
	if (!(mode & 128))
		pkt->payload_len %= 2100;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct reader r = {data, size};
	struct roce_pkt pkt, out;
	uint32_t room, hdr_len, frame_len, crc = 0;
	uint8_t *buf, *buf2;
	int rc, rc2;

	fill_descriptor(&r, &pkt);
	room = (uint32_t)take(&r, 2) % 2400;
	hdr_len = roce_header_len(&pkt);
	frame_len = roce_frame_len(&pkt);
	buf = malloc(room ? room : 1);
	buf2 = malloc(room ? room : 1);
	if (buf == NULL || buf2 == NULL) {
		free(buf);
		free(buf2);
		return 0;
	}
	rc = roce_build_headers(buf, room, &pkt);
	rc2 = roce_build_headers_icrc(buf2, room, &pkt, &crc);
	if (rc2 != rc)
		abort();
	if (rc >= 0) {
		if ((uint32_t)rc != hdr_len || hdr_len > room || frame_len < hdr_len)
			abort();
		if (memcmp(buf, buf2, hdr_len) != 0 ||
		    crc != roce_icrc_partial(buf, pkt.path.has_vlan ? 18 : 14, hdr_len))
			abort();
		if (frame_len <= room) {
			wt_fill_payload(buf + hdr_len, pkt.payload_len, (unsigned)size);
			if (roce_finish(buf, frame_len, &pkt) != 0)
				abort();
			if (roce_parse(buf, frame_len, ROCE_PARSE_VERIFY_ICRC, &out) !=
			    (pkt.tver ? ROCE_PARSE_BAD_TVER : ROCE_PARSE_OK))
				abort();
			if (pkt.tver == 0 && wt_pkt_diff(&pkt, &out) != NULL) {
				fprintf(stderr, "field %s\n", wt_pkt_diff(&pkt, &out));
				abort();
			}
			if (roce_fill_udp_checksum(buf, frame_len, &pkt) != 0)
				abort();
		}
	}
	/* any other length must be refused without touching memory */
	if (roce_finish(buf, room, &pkt) == 0 && room != frame_len)
		abort();
	free(buf);
	free(buf2);
	return 0;
}
