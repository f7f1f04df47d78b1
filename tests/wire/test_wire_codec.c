/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Unit tests of the wire codec on plain buffers: the opcode table against
 * IBA table 38, build -> parse -> rebuild for every opcode and header stack,
 * one crafted frame per rejection reason, truncation at every length (run
 * under ASan: a frame is a malloc'd block of exactly its length), ICRC
 * properties, PSN arithmetic across the 24-bit wrap, GID helpers.
 */
#define ALLOW_EXPERIMENTAL_API 1

#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <rte_vect.h>

#include "roce_wire.h"
#include "wire_test_util.h"

#define BUF_LEN 9200

static const uint32_t payload_lens[] = {0, 1, 2, 3, 4, 5, 7, 255, 1024, 4096};

/* ------------------------------------------------------------------------ */
/* Opcode table                                                             */

static bool expected_known(unsigned op)
{
	unsigned o = op & 0x1F;

	if ((op & 0xE0) == 0x00 ||
	    (op & 0xE0) == 0xA0) /* RC and XRC: with annex A19's 0x1C, 0x1D */
		return o <= 0x14 || o == 0x16 || o == 0x17 || o == 0x1C || o == 0x1D;
	if (op >= 0x20 && op <= 0x2B)
		return true; /* UC: SEND and WRITE */
	return op == 0x64 || op == 0x65 || op == ROCE_OPCODE_CNP;
}

static void test_opcode_table_coverage(void **state)
{
	unsigned op, i, sum;

	(void)state;
	for (op = 0; op < 256; op++) {
		const struct roce_opcode_info *info = roce_opcode_info((uint8_t)op);

		if (!expected_known(op)) {
			assert_null(info);
			assert_null(roce_opcode_name((uint8_t)op));
			continue;
		}
		assert_non_null(info);
		assert_int_equal(info->opcode, op);
		assert_int_equal(info->transport, op & 0xE0);
		assert_string_equal(roce_opcode_name((uint8_t)op), info->name);
		/* ext_len is the sum of the present headers; offsets lie inside it */
		sum = 0;
		for (i = 0; i < ROCE_HDR_COUNT; i++) {
			if (!(info->hdrs & (1u << i)))
				continue;
			sum += roce_hdr_len(1u << i);
			assert_true(info->hdr_off[i] + roce_hdr_len(1u << i) <= info->ext_len);
		}
		assert_int_equal(sum, info->ext_len);
		/* a packet is a request, a response, or the CNP: exactly one */
		assert_int_equal(!!(info->flags & ROCE_OPF_REQUEST) +
				     !!(info->flags & ROCE_OPF_RESPONSE) +
				     !!(info->flags & ROCE_OPF_CNP),
				 1);
		if (info->flags & ROCE_OPF_IMM)
			assert_true(info->hdrs & ROCE_HDR_IMMDT);
		if (info->flags & ROCE_OPF_INV)
			assert_true(info->hdrs & ROCE_HDR_IETH);
		if ((op & 0xE0) == ROCE_TRANSPORT_UD)
			assert_true(info->hdrs & ROCE_HDR_DETH);
	}
	assert_int_equal(roce_hdr_len(ROCE_HDR_RETH), 16);
	assert_int_equal(roce_hdr_len(ROCE_HDR_AETH), 4);
	assert_int_equal(roce_hdr_len(ROCE_HDR_ATOMIC_ETH), 28);
	assert_int_equal(roce_hdr_len(ROCE_HDR_ATOMIC_ACK_ETH), 8);
	assert_int_equal(roce_hdr_len(ROCE_HDR_IMMDT), 4);
	assert_int_equal(roce_hdr_len(ROCE_HDR_IETH), 4);
	assert_int_equal(roce_hdr_len(ROCE_HDR_DETH), 8);
	assert_int_equal(roce_hdr_len(ROCE_HDR_FETH), 4);
	assert_int_equal(roce_hdr_len(ROCE_HDR_XRCETH), 4);
	assert_int_equal(roce_hdr_len(0), 0);
	assert_int_equal(roce_hdr_len(ROCE_HDR_RETH | ROCE_HDR_AETH), 0);
}

struct op_expect {
	uint8_t opcode;
	uint16_t hdrs;
	uint8_t ext_len;
	uint32_t flags_set;
	uint32_t flags_clear;
};

/* IBA table 38 / 9.2 header stacks, spot checked field by field. */
static const struct op_expect op_expect[] = {
    {0x00, 0, 0, ROCE_OPF_FIRST | ROCE_OPF_PAYLOAD | ROCE_OPF_SEND, ROCE_OPF_LAST},
    {0x01, 0, 0, ROCE_OPF_MIDDLE | ROCE_OPF_PAYLOAD, ROCE_OPF_FIRST | ROCE_OPF_LAST},
    {0x03, ROCE_HDR_IMMDT, 4, ROCE_OPF_LAST | ROCE_OPF_IMM | ROCE_OPF_COMPLETES, 0},
    {0x05, ROCE_HDR_IMMDT, 4, ROCE_OPF_ONLY | ROCE_OPF_RECV_WQE, 0},
    {0x06, ROCE_HDR_RETH, 16, ROCE_OPF_FIRST | ROCE_OPF_WRITE, ROCE_OPF_RECV_WQE},
    {0x08, 0, 0, ROCE_OPF_LAST | ROCE_OPF_WRITE, ROCE_OPF_COMPLETES | ROCE_OPF_RECV_WQE},
    {0x0B, ROCE_HDR_RETH | ROCE_HDR_IMMDT, 20, ROCE_OPF_ONLY | ROCE_OPF_RECV_WQE, 0},
    {0x0C, ROCE_HDR_RETH, 16, ROCE_OPF_REQUEST | ROCE_OPF_READ, ROCE_OPF_PAYLOAD},
    {0x0D, ROCE_HDR_AETH, 4, ROCE_OPF_RESPONSE | ROCE_OPF_FIRST | ROCE_OPF_PAYLOAD, 0},
    {0x0E, 0, 0, ROCE_OPF_RESPONSE | ROCE_OPF_MIDDLE, 0},
    {0x10, ROCE_HDR_AETH, 4, ROCE_OPF_RESPONSE | ROCE_OPF_ONLY | ROCE_OPF_COMPLETES, 0},
    {0x11, ROCE_HDR_AETH, 4, ROCE_OPF_RESPONSE | ROCE_OPF_ACK, ROCE_OPF_PAYLOAD},
    {0x12, ROCE_HDR_AETH | ROCE_HDR_ATOMIC_ACK_ETH, 12, ROCE_OPF_RESPONSE | ROCE_OPF_ATOMIC,
     ROCE_OPF_PAYLOAD},
    {0x13, ROCE_HDR_ATOMIC_ETH, 28, ROCE_OPF_REQUEST | ROCE_OPF_ATOMIC, ROCE_OPF_PAYLOAD},
    {0x14, ROCE_HDR_ATOMIC_ETH, 28, ROCE_OPF_REQUEST | ROCE_OPF_ATOMIC, ROCE_OPF_PAYLOAD},
    {0x16, ROCE_HDR_IETH, 4, ROCE_OPF_LAST | ROCE_OPF_INV | ROCE_OPF_SEND, 0},
    {0x17, ROCE_HDR_IETH, 4, ROCE_OPF_ONLY | ROCE_OPF_INV, 0},
    {0x2B, ROCE_HDR_RETH | ROCE_HDR_IMMDT, 20, ROCE_OPF_ONLY | ROCE_OPF_WRITE, 0},
    {0x64, ROCE_HDR_DETH, 8, ROCE_OPF_ONLY | ROCE_OPF_SEND, 0},
    {0x65, ROCE_HDR_DETH | ROCE_HDR_IMMDT, 12, ROCE_OPF_ONLY | ROCE_OPF_IMM, 0},
    {0x81, 0, 0, ROCE_OPF_CNP, ROCE_OPF_REQUEST | ROCE_OPF_RESPONSE},
    /* annex A19: FLUSH (FETH, RETH, no payload), ATOMIC WRITE (RETH, 8-byte payload) */
    {0x1C, ROCE_HDR_FETH | ROCE_HDR_RETH, 20, ROCE_OPF_REQUEST | ROCE_OPF_FLUSH | ROCE_OPF_ONLY,
     ROCE_OPF_PAYLOAD | ROCE_OPF_RECV_WQE},
    {0x1D, ROCE_HDR_RETH, 16,
     ROCE_OPF_REQUEST | ROCE_OPF_ATOMIC_WRITE | ROCE_OPF_ONLY | ROCE_OPF_PAYLOAD,
     ROCE_OPF_RECV_WQE | ROCE_OPF_ATOMIC},
    /* XRC (9.3.8): requests start with the XRCETH, responses are RC's */
    {0xA4, ROCE_HDR_XRCETH, 4, ROCE_OPF_ONLY | ROCE_OPF_SEND | ROCE_OPF_RECV_WQE, 0},
    {0xA1, ROCE_HDR_XRCETH, 4, ROCE_OPF_MIDDLE | ROCE_OPF_SEND, ROCE_OPF_FIRST},
    {0xAB, ROCE_HDR_XRCETH | ROCE_HDR_RETH | ROCE_HDR_IMMDT, 24,
     ROCE_OPF_ONLY | ROCE_OPF_WRITE | ROCE_OPF_IMM, 0},
    {0xAC, ROCE_HDR_XRCETH | ROCE_HDR_RETH, 20, ROCE_OPF_REQUEST | ROCE_OPF_READ, ROCE_OPF_PAYLOAD},
    {0xAD, ROCE_HDR_AETH, 4, ROCE_OPF_RESPONSE | ROCE_OPF_READ | ROCE_OPF_FIRST, 0},
    {0xB1, ROCE_HDR_AETH, 4, ROCE_OPF_RESPONSE | ROCE_OPF_ACK, ROCE_OPF_PAYLOAD},
    {0xB3, ROCE_HDR_XRCETH | ROCE_HDR_ATOMIC_ETH, 32, ROCE_OPF_REQUEST | ROCE_OPF_ATOMIC, 0},
    {0xB7, ROCE_HDR_XRCETH | ROCE_HDR_IETH, 8, ROCE_OPF_ONLY | ROCE_OPF_INV, 0},
    {0xBC, ROCE_HDR_XRCETH | ROCE_HDR_FETH | ROCE_HDR_RETH, 24, ROCE_OPF_FLUSH, 0},
};

static void test_opcode_table_entries(void **state)
{
	const struct roce_opcode_info *info;
	unsigned i;

	(void)state;
	for (i = 0; i < sizeof(op_expect) / sizeof(op_expect[0]); i++) {
		info = roce_opcode_info(op_expect[i].opcode);
		assert_non_null(info);
		assert_int_equal(info->hdrs, op_expect[i].hdrs);
		assert_int_equal(info->ext_len, op_expect[i].ext_len);
		assert_int_equal(info->flags & op_expect[i].flags_set, op_expect[i].flags_set);
		assert_int_equal(info->flags & op_expect[i].flags_clear, 0);
	}
	/* Header order inside the stack (IBA 9.2): DETH before ImmDt, RETH before ImmDt, AETH
	 * before AtomicAckETH. */
	info = roce_opcode_info(0x65);
	assert_int_equal(info->hdr_off[ROCE_HDRI_DETH], 0);
	assert_int_equal(info->hdr_off[ROCE_HDRI_IMMDT], 8);
	info = roce_opcode_info(0x0B);
	assert_int_equal(info->hdr_off[ROCE_HDRI_RETH], 0);
	assert_int_equal(info->hdr_off[ROCE_HDRI_IMMDT], 16);
	info = roce_opcode_info(0x12);
	assert_int_equal(info->hdr_off[ROCE_HDRI_AETH], 0);
	assert_int_equal(info->hdr_off[ROCE_HDRI_ATOMIC_ACK_ETH], 4);
	assert_int_equal(roce_opcode_info(ROCE_OPCODE_CNP)->fixed_payload, 16);
	/* XRCETH first, then FETH before RETH (A19: BTH | XRCETH | FETH | RETH) */
	info = roce_opcode_info(0xBC);
	assert_int_equal(info->hdr_off[ROCE_HDRI_XRCETH], 0);
	assert_int_equal(info->hdr_off[ROCE_HDRI_FETH], 4);
	assert_int_equal(info->hdr_off[ROCE_HDRI_RETH], 8);
	info = roce_opcode_info(0xAB);
	assert_int_equal(info->hdr_off[ROCE_HDRI_XRCETH], 0);
	assert_int_equal(info->hdr_off[ROCE_HDRI_RETH], 4);
	assert_int_equal(info->hdr_off[ROCE_HDRI_IMMDT], 20);
	assert_string_equal(roce_opcode_name(0x04), "RC SEND ONLY");
	assert_string_equal(roce_opcode_name(0x1D), "RC ATOMIC WRITE");
	assert_string_equal(roce_opcode_name(0x1C), "RC FLUSH");
	assert_string_equal(roce_opcode_name(0xA4), "XRC SEND ONLY");
	assert_null(roce_opcode_info(0x3D)); /* no ATOMIC WRITE on UC */
	assert_null(roce_opcode_info(0xB5)); /* reserved in XRC as in RC */
	assert_null(roce_opcode_info(0x44)); /* RD is not supported */
}

/* ------------------------------------------------------------------------ */
/* Build -> parse -> rebuild                                                 */

static void roundtrip_one(uint8_t opcode, int ipv, bool vlan, uint32_t plen, unsigned seed)
{
	static uint8_t payload[BUF_LEN], frame[BUF_LEN], again[BUF_LEN];
	struct roce_pkt in, out;
	const char *diff;
	int len, len2;

	wt_sample_pkt(&in, opcode, ipv, vlan, plen, seed);
	wt_fill_payload(payload, in.payload_len, seed);
	len = wt_build(&in, payload, frame, sizeof(frame));
	assert_true(len > 0);
	assert_int_equal(len, roce_frame_len(&in));
	assert_int_equal(roce_frame_len(&in) - roce_header_len(&in),
			 in.payload_len + ((4 - (in.payload_len & 3)) & 3) + ROCE_ICRC_LEN);

	assert_int_equal(roce_parse(frame, (uint32_t)len, ROCE_PARSE_VERIFY_ICRC, &out),
			 ROCE_PARSE_OK);
	assert_true(out.icrc_checked);
	assert_ptr_equal(out.op, roce_opcode_info(opcode));
	diff = wt_pkt_diff(&in, &out);
	if (diff != NULL)
		fail_msg("opcode 0x%02x ipv%d vlan %d len %u: field %s differs", opcode, ipv, vlan,
			 plen, diff);
	assert_int_equal(out.frame_len, len);
	assert_int_equal(out.payload_off, roce_header_len(&in));
	assert_int_equal(out.pad, (4 - (in.payload_len & 3)) & 3);
	assert_int_equal(out.l3_off, vlan ? 18 : 14);
	assert_int_equal(out.l4_off, out.l3_off + (ipv == 4 ? 20 : 40));
	assert_int_equal(out.bth_off, out.l4_off + 8);
	assert_int_equal(out.ext_off, out.bth_off + 12);
	assert_int_equal(out.path.udp_dport, ROCE_UDP_PORT);
	assert_memory_equal(frame + out.payload_off, payload, in.payload_len);
	if (ipv == 4)
		assert_true(out.path.dont_fragment);

	len2 = wt_rebuild(&out, frame, again, sizeof(again));
	assert_int_equal(len2, len);
	assert_memory_equal(again, frame, (size_t)len);

	/* roce_parse_ip sees the same packet from the IP header on */
	assert_int_equal(roce_parse_ip(frame + out.l3_off, (uint32_t)len - out.l3_off,
				       ROCE_PARSE_VERIFY_ICRC, &out),
			 ROCE_PARSE_OK);
	assert_int_equal(out.l3_off, 0);
	assert_int_equal(out.payload_len, in.payload_len);
}

static void test_roundtrip_every_opcode(void **state)
{
	uint8_t ops[256];
	unsigned n = wt_known_opcodes(ops), i, l, seed = 0;
	int ipv, vlan;

	(void)state;
	assert_int_equal(n, 25 + 12 + 2 + 1 + 25); /* RC (with A19), UC, UD, CNP, XRC */
	for (i = 0; i < n; i++)
		for (ipv = 4; ipv <= 6; ipv += 2)
			for (vlan = 0; vlan <= 1; vlan++)
				for (l = 0; l < sizeof(payload_lens) / sizeof(payload_lens[0]); l++)
					roundtrip_one(ops[i], ipv, vlan, payload_lens[l], seed++);
}

/* Ethernet minimum-size padding after the datagram is not part of the packet. */
static void test_trailing_ethernet_padding(void **state)
{
	uint8_t frame[128];
	struct roce_pkt in, out;
	int len;

	(void)state;
	/* an empty SEND MIDDLE over IPv4 is 58 bytes: below the 60-byte minimum */
	wt_sample_pkt(&in, ROCE_OP_SEND_MIDDLE, 4, false, 0, 1);
	len = wt_build(&in, NULL, frame, sizeof(frame));
	assert_int_equal(len, 58);
	memset(frame + len, 0xA5, sizeof(frame) - (size_t)len);
	assert_int_equal(roce_parse(frame, 60, ROCE_PARSE_VERIFY_ICRC, &out), ROCE_PARSE_OK);
	assert_int_equal(out.frame_len, len);
	assert_int_equal(out.payload_len, 0);
	assert_int_equal(roce_parse(frame, sizeof(frame), ROCE_PARSE_VERIFY_ICRC, &out),
			 ROCE_PARSE_OK);
	assert_int_equal(out.frame_len, len);
}

static void test_header_lengths(void **state)
{
	struct roce_pkt pkt;

	(void)state;
	wt_sample_pkt(&pkt, ROCE_TRANSPORT_XRC | ROCE_OP_CMP_SWAP, 6, true, 0, 0);
	assert_int_equal(roce_header_len(&pkt), ROCE_MAX_HDR_LEN);
	wt_sample_pkt(&pkt, ROCE_OP_SEND_ONLY, 4, false, 1, 0);
	assert_int_equal(roce_header_len(&pkt), 14 + 20 + 8 + 12);
	assert_int_equal(roce_frame_len(&pkt), 14 + 20 + 8 + 12 + 1 + 3 + 4);
	pkt.opcode = 0x15;
	assert_int_equal(roce_header_len(&pkt), 0);
	assert_int_equal(roce_frame_len(&pkt), 0);
	/* a payload length no frame can have does not wrap the sum */
	wt_sample_pkt(&pkt, ROCE_OP_SEND_ONLY, 4, false, 0, 0);
	pkt.payload_len = 0xFFFFFFFCu;
	assert_int_equal(roce_frame_len(&pkt), 0);
	{
		uint8_t small[64];

		assert_int_equal(roce_finish(small, 62, &pkt), -EINVAL);
		assert_int_equal(roce_finish(small, 0, &pkt), -EINVAL);
	}
}

/* ------------------------------------------------------------------------ */
/* Builder errors                                                            */

static void test_builder_rejects(void **state)
{
	uint8_t buf[BUF_LEN];
	struct roce_pkt pkt;

	(void)state;
	wt_sample_pkt(&pkt, ROCE_OP_SEND_ONLY, 4, false, 100, 0);
	assert_int_equal(roce_build_headers(buf, roce_header_len(&pkt) - 1, &pkt), -ENOSPC);
	assert_int_equal(roce_build_headers(buf, roce_header_len(&pkt), &pkt),
			 (int)roce_header_len(&pkt));

	pkt.opcode = 0x15;
	assert_int_equal(roce_build_headers(buf, sizeof(buf), &pkt), -EINVAL);

	wt_sample_pkt(&pkt, ROCE_OP_ACK, 4, false, 0, 0);
	pkt.payload_len = 4; /* ACKs carry no payload */
	assert_int_equal(roce_build_headers(buf, sizeof(buf), &pkt), -EINVAL);

	wt_sample_pkt(&pkt, ROCE_OPCODE_CNP, 6, false, 16, 0);
	pkt.payload_len = 12; /* CNP carries exactly 16 reserved bytes */
	assert_int_equal(roce_build_headers(buf, sizeof(buf), &pkt), -EINVAL);

	wt_sample_pkt(&pkt, ROCE_OP_SEND_ONLY, 5, false, 0, 0);
	assert_int_equal(roce_build_headers(buf, sizeof(buf), &pkt), -EINVAL);

	wt_sample_pkt(&pkt, ROCE_OP_SEND_ONLY, 4, false, 0, 0);
	pkt.path.src_gid[0] = 0xfe; /* not IPv4-mapped */
	assert_int_equal(roce_build_headers(buf, sizeof(buf), &pkt), -EINVAL);

	wt_sample_pkt(&pkt, ROCE_OP_SEND_ONLY, 4, false, 0, 0);
	pkt.psn = ROCE_PSN_MASK + 1;
	assert_int_equal(roce_build_headers(buf, sizeof(buf), &pkt), -EINVAL);
	pkt.psn = 0;
	pkt.dqpn = 0x1000000;
	assert_int_equal(roce_build_headers(buf, sizeof(buf), &pkt), -EINVAL);

	wt_sample_pkt(&pkt, ROCE_OP_SEND_ONLY, 4, false, 0xFFF0, 0);
	assert_int_equal(roce_build_headers(buf, sizeof(buf), &pkt), -EINVAL);

	wt_sample_pkt(&pkt, ROCE_OP_SEND_ONLY, 4, false, 8, 0);
	assert_true(roce_build_headers(buf, sizeof(buf), &pkt) > 0);
	assert_int_equal(roce_finish(buf, roce_frame_len(&pkt) + 1, &pkt), -EINVAL);
	assert_int_equal(roce_finish(buf, roce_frame_len(&pkt), &pkt), 0);
}

/* IPv4 DF is always set; the UDP checksum goes out as given. */
static void test_builder_ip_udp_fields(void **state)
{
	uint8_t buf[256];
	struct roce_pkt pkt;
	int len;

	(void)state;
	wt_sample_pkt(&pkt, ROCE_OP_SEND_ONLY, 4, false, 0, 0);
	pkt.path.dont_fragment = false;
	pkt.path.udp_csum = 0xABCD;
	pkt.path.ip_id = 0x4242;
	len = wt_build(&pkt, NULL, buf, sizeof(buf));
	assert_true(len > 0);
	assert_int_equal(buf[14 + 6] & 0x40, 0x40);
	assert_int_equal((buf[14 + 4] << 8) | buf[14 + 5], 0x4242);
	assert_int_equal((buf[34 + 6] << 8) | buf[34 + 7], 0xABCD);
	assert_int_equal((buf[34 + 2] << 8) | buf[34 + 3], ROCE_UDP_PORT);
	assert_int_equal((buf[14 + 2] << 8) | buf[14 + 3], len - 14);
	assert_int_equal((buf[34 + 4] << 8) | buf[34 + 5], len - 34);
}

/* The IPv4 header checksum by RFC 791's definition, over the header as built. */
static uint16_t ipv4_csum_of_header(const uint8_t *ip)
{
	uint32_t sum = 0;

	for (unsigned i = 0; i < 20; i += 2)
		if (i != 10)
			sum += (uint32_t)(ip[i] << 8 | ip[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xFFFF) + (sum >> 16);
	return (uint16_t)~sum;
}

/*
 * The builder computes the IPv4 checksum from the descriptor's values and
 * writes the IP, UDP and BTH headers as 32-bit words: every field at its
 * place, for values that carry in the checksum sum and fill every bit of
 * the BTH's fields.
 */
static void test_builder_fields_from_values(void **state)
{
	static const uint8_t payload[256];
	uint8_t buf[512];
	struct roce_pkt pkt, out;
	unsigned seed = 12345;

	(void)state;
	for (unsigned i = 0; i < 2000; i++) {
		uint8_t *ip = buf + 14, *udp = buf + 34, *bth = buf + 42;
		int len;

		seed = seed * 1103515245u + 12345u;
		wt_sample_pkt(&pkt, i & 1 ? ROCE_OP_ACK : ROCE_OP_SEND_ONLY, 4, false,
			      i & 1 ? 0 : (seed >> 8) % 200, i);
		pkt.path.tclass = (uint8_t)(i & 3 ? seed >> 3 : 0xFF);
		pkt.path.ttl = (uint8_t)(i & 4 ? seed >> 11 : 0xFF);
		pkt.path.ip_id = (uint16_t)(i & 8 ? seed >> 13 : 0xFFFF);
		memset(&pkt.path.src_gid[12], i & 16 ? 0xFF : (int)(seed >> 5), 4);
		memset(&pkt.path.dst_gid[12], i & 32 ? 0xFF : (int)(seed >> 7), 4);
		pkt.path.udp_sport = (uint16_t)(seed >> 9);
		pkt.path.udp_csum = (uint16_t)(i & 64 ? 0 : seed >> 1);
		pkt.se = i & 128;
		pkt.mig = i & 256;
		pkt.fecn = i & 512;
		pkt.becn = i & 1024;
		pkt.ackreq = seed & 1;
		pkt.tver = (uint8_t)(i % 3 ? 0 : seed >> 20 & 0xF);
		pkt.resv8a_low = (uint8_t)(seed >> 4 & 0x3F);
		pkt.resv7 = (uint8_t)(seed >> 14 & 0x7F);
		pkt.pkey = (uint16_t)(seed >> 16);
		pkt.dqpn = seed >> 8 & 0xFFFFFF;
		pkt.psn = (seed ^ i) & ROCE_PSN_MASK;
		len = wt_build(&pkt, payload, buf, sizeof(buf));
		assert_true(len > 0);
		assert_int_equal(ip[10] << 8 | ip[11], ipv4_csum_of_header(ip));
		assert_int_equal(ip[0], 0x45);
		assert_int_equal(ip[1], pkt.path.tclass);
		assert_int_equal(ip[8], pkt.path.ttl);
		assert_int_equal(ip[9], 17);
		assert_int_equal(ip[4] << 8 | ip[5], pkt.path.ip_id);
		assert_memory_equal(ip + 12, &pkt.path.src_gid[12], 4);
		assert_memory_equal(ip + 16, &pkt.path.dst_gid[12], 4);
		assert_int_equal(udp[0] << 8 | udp[1], pkt.path.udp_sport);
		assert_int_equal(udp[6] << 8 | udp[7], pkt.path.udp_csum);
		assert_int_equal(bth[0], pkt.opcode);
		assert_int_equal(bth[1], (pkt.se ? 0x80 : 0) | (pkt.mig ? 0x40 : 0) |
					     ((4 - (pkt.payload_len & 3)) & 3) << 4 | pkt.tver);
		assert_int_equal(bth[2] << 8 | bth[3], pkt.pkey);
		assert_int_equal(bth[4],
				 (pkt.fecn ? 0x80 : 0) | (pkt.becn ? 0x40 : 0) | pkt.resv8a_low);
		assert_int_equal(bth[5] << 16 | bth[6] << 8 | bth[7], pkt.dqpn);
		assert_int_equal(bth[8], (pkt.ackreq ? 0x80 : 0) | pkt.resv7);
		assert_int_equal(bth[9] << 16 | bth[10] << 8 | bth[11], pkt.psn);
		/* and the parser, which checks the checksum and the ICRC, agrees
		 * (it refuses a transport version other than 0) */
		assert_int_equal(roce_parse(buf, (uint32_t)len, ROCE_PARSE_VERIFY_ICRC, &out),
				 pkt.tver ? ROCE_PARSE_BAD_TVER : ROCE_PARSE_OK);
		assert_int_equal(out.psn, pkt.psn);
	}
}

/* ------------------------------------------------------------------------ */
/* Rejection reasons, one crafted frame each                                 */

static unsigned statuses_seen;

/* Copy frame into a block of exactly len bytes and parse it. */
static enum roce_parse_status parse_exact(const uint8_t *frame, uint32_t len, unsigned flags,
					  struct roce_pkt *out)
{
	uint8_t *copy = malloc(len ? len : 1);
	enum roce_parse_status st;

	assert_non_null(copy);
	memcpy(copy, frame, len);
	st = roce_parse(copy, len, flags, out);
	free(copy);
	return st;
}

static void expect_status(const uint8_t *frame, uint32_t len, enum roce_parse_status want)
{
	struct roce_pkt out;
	enum roce_parse_status st = parse_exact(frame, len, ROCE_PARSE_VERIFY_ICRC, &out);

	if (st != want)
		fail_msg("want %s, got %s", roce_parse_status_name(want),
			 roce_parse_status_name(st));
	statuses_seen |= 1u << want;
}

static int build_sample(uint8_t *buf, uint8_t opcode, int ipv, uint32_t plen)
{
	struct roce_pkt pkt;
	static uint8_t payload[BUF_LEN];
	int len;

	wt_sample_pkt(&pkt, opcode, ipv, false, plen, 3);
	wt_fill_payload(payload, pkt.payload_len, 3);
	len = wt_build(&pkt, payload, buf, BUF_LEN);
	assert_true(len > 0);
	return len;
}

static void put16(uint8_t *p, unsigned v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* Recompute the IPv4 header checksum after editing the header at frame+14. */
static void fix_ipv4_csum(uint8_t *frame)
{
	uint8_t *ip = frame + 14;
	uint32_t sum = 0;
	unsigned i;

	ip[10] = ip[11] = 0;
	for (i = 0; i < 20; i += 2)
		sum += (uint32_t)(ip[i] << 8 | ip[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xFFFF) + (sum >> 16);
	put16(ip + 10, ~sum & 0xFFFF);
}

/* Shorten the datagram to new_len bytes of frame and fix IP/UDP lengths. */
static uint32_t shorten_v4(uint8_t *frame, uint32_t new_len)
{
	put16(frame + 14 + 2, new_len - 14);
	put16(frame + 34 + 4, new_len - 34);
	fix_ipv4_csum(frame);
	return new_len;
}

static void test_reject_each_reason(void **state)
{
	uint8_t f[BUF_LEN];
	struct roce_pkt out;
	uint32_t len;
	unsigned s;

	(void)state;
	statuses_seen = 0;

	/* truncated: Ethernet, VLAN tag, IPv4 header, IPv6 header, BTH, ext headers, ICRC */
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 4, 8);
	expect_status(f, 13, ROCE_PARSE_TRUNCATED);
	expect_status(f, 14 + 19, ROCE_PARSE_TRUNCATED);
	expect_status(f, 0, ROCE_PARSE_TRUNCATED);
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 6, 8);
	expect_status(f, 14 + 39, ROCE_PARSE_TRUNCATED);
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 4, 0);
	expect_status(f, shorten_v4(f, 34 + 8 + 12), ROCE_PARSE_TRUNCATED); /* no room for ICRC */
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 4, 0);
	expect_status(f, shorten_v4(f, 34 + 7), ROCE_PARSE_TRUNCATED); /* inside UDP */
	len = (uint32_t)build_sample(f, ROCE_OP_CMP_SWAP, 4, 0);
	expect_status(f, shorten_v4(f, len - 8), ROCE_PARSE_TRUNCATED); /* inside AtomicETH */
	{
		uint8_t v[BUF_LEN];
		struct roce_pkt pkt;

		wt_sample_pkt(&pkt, ROCE_OP_SEND_ONLY, 4, true, 0, 1);
		len = (uint32_t)wt_build(&pkt, NULL, v, sizeof(v));
		expect_status(v, 16, ROCE_PARSE_TRUNCATED);
		expect_status(v, len, ROCE_PARSE_OK);
	}

	/* not IP: ARP ethertype; and a second VLAN tag (QinQ is not supported) */
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 4, 8);
	put16(f + 12, ROCE_ETH_TYPE_ARP);
	expect_status(f, len, ROCE_PARSE_NOT_IP);

	/* IP version nibble does not match the ethertype */
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 4, 8);
	f[14] = 0x65;
	expect_status(f, len, ROCE_PARSE_BAD_IP_VERSION);
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 6, 8);
	f[14] = 0x40 | (f[14] & 0x0F);
	expect_status(f, len, ROCE_PARSE_BAD_IP_VERSION);
	f[14] = 0x50;
	assert_int_equal(roce_parse_ip(f + 14, len - 14, 0, &out), ROCE_PARSE_BAD_IP_VERSION);

	/* IP length: longer than the frame; IHL below 5; IPv6 payload length */
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 4, 8);
	put16(f + 16, len - 14 + 1);
	fix_ipv4_csum(f);
	expect_status(f, len, ROCE_PARSE_BAD_IP_LENGTH);
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 4, 8);
	f[14] = 0x44;
	expect_status(f, len, ROCE_PARSE_BAD_IP_LENGTH);
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 6, 8);
	put16(f + 18, len - 54 + 1);
	expect_status(f, len, ROCE_PARSE_BAD_IP_LENGTH);
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 4, 8);
	expect_status(f, len - 1, ROCE_PARSE_BAD_IP_LENGTH); /* frame cut short */

	/* IPv4 header checksum */
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 4, 8);
	f[14 + 11] ^= 0x01;
	expect_status(f, len, ROCE_PARSE_BAD_IP_CHECKSUM);

	/* IPv4 options; IPv6 extension header (hop-by-hop) */
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 4, 8);
	f[14] = 0x46;
	expect_status(f, len, ROCE_PARSE_IP_OPTIONS);
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 6, 8);
	f[14 + 6] = 0;
	expect_status(f, len, ROCE_PARSE_IP_OPTIONS);

	/* IPv4 fragments: MF, and a non-zero offset */
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 4, 8);
	put16(f + 14 + 6, 0x2000);
	fix_ipv4_csum(f);
	expect_status(f, len, ROCE_PARSE_IP_FRAGMENT);
	put16(f + 14 + 6, 0x0001);
	fix_ipv4_csum(f);
	expect_status(f, len, ROCE_PARSE_IP_FRAGMENT);

	/* not UDP */
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 4, 8);
	f[14 + 9] = 6;
	fix_ipv4_csum(f);
	expect_status(f, len, ROCE_PARSE_NOT_UDP);

	/* UDP port other than 4791 */
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 4, 8);
	put16(f + 34 + 2, 4792);
	expect_status(f, len, ROCE_PARSE_NOT_ROCE_PORT);

	/* UDP length disagrees with IP length */
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 4, 8);
	put16(f + 34 + 4, len - 34 - 4);
	expect_status(f, len, ROCE_PARSE_BAD_UDP_LENGTH);
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 6, 8);
	put16(f + 54 + 4, len - 54 + 4);
	expect_status(f, len, ROCE_PARSE_BAD_UDP_LENGTH);

	/* BTH transport version (the builder writes tver as given) */
	{
		struct roce_pkt pkt;

		wt_sample_pkt(&pkt, ROCE_OP_SEND_ONLY, 4, false, 0, 0);
		pkt.tver = 1;
		len = (uint32_t)wt_build(&pkt, NULL, f, sizeof(f));
		expect_status(f, len, ROCE_PARSE_BAD_TVER);
	}

	/* unknown opcodes: reserved RC 0x15, RD, reserved UD, out of range */
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 4, 8);
	f[42] = 0x15;
	expect_status(f, len, ROCE_PARSE_UNKNOWN_OPCODE);
	f[42] = 0x44;
	expect_status(f, len, ROCE_PARSE_UNKNOWN_OPCODE);
	f[42] = 0x60;
	expect_status(f, len, ROCE_PARSE_UNKNOWN_OPCODE);
	f[42] = 0xFF;
	expect_status(f, len, ROCE_PARSE_UNKNOWN_OPCODE);

	/* pad/length: payload on a READ request; pad larger than the payload;
	 * payload+pad not a multiple of 4; CNP of the wrong size or with pad */
	len = (uint32_t)build_sample(f, ROCE_OP_WRITE_ONLY, 4, 4);
	f[42] = ROCE_OP_READ_REQUEST;
	expect_status(f, len, ROCE_PARSE_BAD_LENGTH);
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 4, 0);
	f[43] |= 3 << ROCE_BTH_PAD_SHIFT;
	expect_status(f, len, ROCE_PARSE_BAD_LENGTH);
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 4, 8);
	expect_status(f, shorten_v4(f, len - 1), ROCE_PARSE_BAD_LENGTH);
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 4, 12);
	f[42] = ROCE_OPCODE_CNP;
	expect_status(f, len, ROCE_PARSE_BAD_LENGTH);
	len = (uint32_t)build_sample(f, ROCE_OPCODE_CNP, 4, 16);
	expect_status(f, len, ROCE_PARSE_OK);
	f[43] |= 1 << ROCE_BTH_PAD_SHIFT;
	expect_status(f, len, ROCE_PARSE_BAD_LENGTH);
	len = (uint32_t)build_sample(f, ROCE_OP_ACK, 6, 0);
	f[54 + 8 + 12 + 4 - 1] ^= 1; /* a valid ACK ... */
	expect_status(f, len, ROCE_PARSE_BAD_ICRC);

	/* ICRC: one flipped payload bit; the ICRC itself; a masked field does not matter */
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 4, 64);
	f[len - 10] ^= 0x10;
	expect_status(f, len, ROCE_PARSE_BAD_ICRC);
	assert_int_equal(parse_exact(f, len, 0, &out), ROCE_PARSE_OK);
	assert_false(out.icrc_checked);
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, 4, 64);
	f[len - 1] ^= 0x80;
	expect_status(f, len, ROCE_PARSE_BAD_ICRC);

	statuses_seen |= 1u << ROCE_PARSE_OK;
	for (s = 0; s < ROCE_PARSE_STATUS_COUNT; s++)
		if (!(statuses_seen & (1u << s)))
			fail_msg("no test for status %s", roce_parse_status_name(s));
}

static void test_status_names(void **state)
{
	unsigned s, t;

	(void)state;
	for (s = 0; s < ROCE_PARSE_STATUS_COUNT; s++) {
		const char *n = roce_parse_status_name(s);

		assert_non_null(n);
		assert_true(strlen(n) > 1);
		for (t = 0; t < s; t++)
			assert_string_not_equal(n, roce_parse_status_name(t));
	}
	assert_string_equal(roce_parse_status_name(ROCE_PARSE_TRUNCATED), "truncated");
	assert_string_equal(roce_parse_status_name(ROCE_PARSE_BAD_ICRC), "bad_icrc");
	assert_non_null(roce_parse_status_name(ROCE_PARSE_STATUS_COUNT));
}

/* Every prefix of a valid frame is rejected, and never read past (ASan). */
static void test_truncated_at_every_length(void **state)
{
	static uint8_t f[BUF_LEN];
	uint8_t ops[256];
	unsigned n = wt_known_opcodes(ops), i, cut;
	int ipv, vlan;
	struct roce_pkt pkt, out;

	(void)state;
	for (i = 0; i < n; i++)
		for (ipv = 4; ipv <= 6; ipv += 2)
			for (vlan = 0; vlan <= 1; vlan++) {
				uint32_t len;

				wt_sample_pkt(&pkt, ops[i], ipv, vlan, 13, i);
				wt_fill_payload(f + 200, pkt.payload_len, i);
				len = (uint32_t)wt_build(&pkt, f + 200, f, 200);
				for (cut = 0; cut < len; cut++) {
					enum roce_parse_status st =
					    parse_exact(f, cut, ROCE_PARSE_VERIFY_ICRC, &out);

					if (st == ROCE_PARSE_OK)
						fail_msg("op 0x%02x cut at %u of %u parsed", ops[i],
							 cut, len);
					st = roce_parse_ip(f + pkt.path.has_vlan * 4 + 14, 0, 0,
							   &out);
					assert_int_equal(st, ROCE_PARSE_TRUNCATED);
				}
				assert_int_equal(parse_exact(f, len, ROCE_PARSE_VERIFY_ICRC, &out),
						 ROCE_PARSE_OK);
			}
	assert_int_equal(roce_parse(NULL, 0, 0, &out), ROCE_PARSE_TRUNCATED);
}

/* ------------------------------------------------------------------------ */
/* ICRC                                                                      */

static void test_crc32_known_answer(void **state)
{
	const char *s = "123456789";

	(void)state;
	/* the CRC-32 check value (IEEE 802.3 / zlib) */
	assert_int_equal(roce_crc32_table(0, s, 9), 0xCBF43926u);
	/* chaining continues the same CRC */
	assert_int_equal(roce_crc32_table(roce_crc32_table(0, s, 4), s + 4, 5), 0xCBF43926u);
	assert_int_equal(roce_crc32_table(0, s, 0), 0);
}

/* The annex masks exactly these fields: changing them keeps the ICRC. */
static void test_icrc_masked_fields(void **state)
{
	static const struct {
		int ipv;
		unsigned off; /* from the IP header */
		uint8_t xor ;
		bool masked;
	} cases[] = {
	    {4, 1, 0xFF, true},	       /* TOS */
	    {4, 8, 0x0F, true},	       /* TTL */
	    {4, 10, 0x55, true},       /* header checksum */
	    {4, 20 + 6, 0x12, true},   /* UDP checksum */
	    {4, 28 + 4, 0xC0, true},   /* FECN, BECN */
	    {4, 28 + 4, 0x3F, true},   /* BTH reserved bits */
	    {4, 4, 0x01, false},       /* IP ID */
	    {4, 6, 0x40, false},       /* DF */
	    {4, 12, 0x01, false},      /* source address */
	    {4, 20 + 0, 0x01, false},  /* UDP source port */
	    {4, 28 + 1, 0x80, false},  /* SE */
	    {4, 28 + 8, 0x80, false},  /* AckReq */
	    {4, 28 + 11, 0x01, false}, /* PSN */
	    {6, 0, 0x0F, true},	       /* traffic class high nibble */
	    {6, 1, 0xFF, true},	       /* traffic class low nibble and flow label */
	    {6, 3, 0xFF, true},	       /* flow label */
	    {6, 7, 0xFF, true},	       /* hop limit */
	    {6, 40 + 6, 0xFF, true},   /* UDP checksum */
	    {6, 48 + 4, 0xFF, true},   /* resv8a */
	    {6, 0, 0x10, false},       /* version */
	    {6, 6, 0x01, false},       /* next header */
	    {6, 8, 0x01, false},       /* source address */
	    {6, 39, 0x01, false},      /* destination address */
	    {6, 48 + 2, 0x01, false},  /* P_Key */
	};
	uint8_t f[256];
	unsigned i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY, cases[i].ipv, 20);
		uint32_t before = roce_icrc_compute(f, 14, len);

		assert_int_equal(before, roce_icrc_load(f, len));
		f[14 + cases[i].off] ^= cases[i].xor ;
		if (cases[i].masked)
			assert_int_equal(roce_icrc_compute(f, 14, len), before);
		else
			assert_int_not_equal(roce_icrc_compute(f, 14, len), before);
	}
}

/* The ICRC is CRC-32 over 8 x 0xFF | masked headers | rest, written LSB first. */
static void test_icrc_definition(void **state)
{
	uint8_t f[256], pseudo[300];
	uint32_t len, n, want;

	(void)state;
	len = (uint32_t)build_sample(f, ROCE_OP_SEND_ONLY_IMM, 4, 9);
	memset(pseudo, 0xFF, 8);
	memcpy(pseudo + 8, f + 14, len - 14 - 4);
	pseudo[8 + 1] = 0xFF;
	pseudo[8 + 8] = 0xFF;
	pseudo[8 + 10] = pseudo[8 + 11] = 0xFF;
	pseudo[8 + 26] = pseudo[8 + 27] = 0xFF;
	pseudo[8 + 32] = 0xFF;
	n = 8 + len - 14 - 4;
	want = roce_crc32_table(0, pseudo, n);
	assert_int_equal(roce_icrc_compute(f, 14, len), want);
	assert_int_equal(f[len - 4], want & 0xFF);
	assert_int_equal(f[len - 1], want >> 24);
	roce_icrc_store(f, len, 0x11223344u);
	assert_int_equal(f[len - 4], 0x44);
	assert_int_equal(roce_icrc_load(f, len), 0x11223344u);
	/* too short to hold the headers: defined result, no read past the end */
	assert_int_equal(roce_icrc_compute(f, 14, 30), 0);
	assert_int_equal(roce_icrc_compute(f, 14, 3), 0);
}

/*
 * Every other CRC implementation (when it can run here) gives the table's
 * ICRC at every payload length, IPv4 and IPv6, with and without VLAN.
 */
static void check_icrc_impl_matches_table(enum roce_icrc_impl impl, const char *name)
{
	static uint8_t f[BUF_LEN], payload[BUF_LEN];
	struct roce_pkt pkt;
	uint32_t plen, table, other;
	int len, rc;

	rc = roce_icrc_set_impl(impl);
	if (rc == -ENOTSUP) {
		print_message("%s: not on this machine, not checked\n", name);
		roce_icrc_set_impl(ROCE_ICRC_IMPL_AUTO);
		return;
	}
	assert_int_equal(rc, 0);
	assert_string_equal(roce_icrc_impl_name(), name);
	for (plen = 0; plen < 4200; plen += (plen < 600 ? 1 : 61)) {
		uint32_t l3 = plen & 2 ? 18 : 14;

		wt_sample_pkt(&pkt, ROCE_OP_SEND_MIDDLE, plen & 1 ? 6 : 4, plen & 2, plen, plen);
		wt_fill_payload(payload, plen, plen);
		len = wt_build(&pkt, payload, f, sizeof(f));
		assert_true(len > 0);
		assert_int_equal(roce_icrc_set_impl(impl), 0);
		other = roce_icrc_compute(f, l3, (uint32_t)len);
		assert_int_equal(roce_icrc_set_impl(ROCE_ICRC_IMPL_TABLE), 0);
		assert_string_equal(roce_icrc_impl_name(), "table");
		table = roce_icrc_compute(f, l3, (uint32_t)len);
		if (other != table)
			fail_msg("%s, payload %u: %08x, table %08x", name, plen, other, table);
		/* a flipped payload bit changes it the same way */
		if (plen != 0) {
			f[len - ROCE_ICRC_LEN - 1 - plen / 2] ^= 0x10;
			assert_int_equal(roce_icrc_set_impl(impl), 0);
			other = roce_icrc_compute(f, l3, (uint32_t)len);
			assert_int_equal(roce_icrc_set_impl(ROCE_ICRC_IMPL_TABLE), 0);
			assert_int_equal(roce_icrc_compute(f, l3, (uint32_t)len), other);
			assert_int_not_equal(other, table);
		}
	}
	/* too short for the headers: 0, as the table says */
	assert_int_equal(roce_icrc_set_impl(impl), 0);
	assert_int_equal(roce_icrc_compute(f, 14, 30), 0);
	assert_int_equal(roce_icrc_set_impl(ROCE_ICRC_IMPL_AUTO), 0);
}

static void test_icrc_impls_match_table(void **state)
{
	(void)state;
	/* Without rte_eal_init() the EAL's SIMD limit reads 0; raise it the
	 * way the EAL does by default so that DPDK may use PCLMULQDQ. */
	rte_vect_set_max_simd_bitwidth(RTE_VECT_SIMD_256);
	check_icrc_impl_matches_table(ROCE_ICRC_IMPL_DPDK, "dpdk-net-crc-sse42");
	check_icrc_impl_matches_table(ROCE_ICRC_IMPL_PCLMUL, "pclmul-4x");
	check_icrc_impl_matches_table(ROCE_ICRC_IMPL_VPCLMUL, "vpclmul-avx2");
	/* AUTO takes the fastest of ours when the CPU has one */
	assert_int_equal(roce_icrc_set_impl(ROCE_ICRC_IMPL_AUTO), 0);
	if (roce_icrc_set_impl(ROCE_ICRC_IMPL_VPCLMUL) == 0) {
		assert_int_equal(roce_icrc_set_impl(ROCE_ICRC_IMPL_AUTO), 0);
		assert_string_equal(roce_icrc_impl_name(), "vpclmul-avx2");
	} else if (roce_icrc_set_impl(ROCE_ICRC_IMPL_PCLMUL) == 0) {
		assert_int_equal(roce_icrc_set_impl(ROCE_ICRC_IMPL_AUTO), 0);
		assert_string_equal(roce_icrc_impl_name(), "pclmul-4x");
	}
	assert_int_equal(roce_icrc_set_impl(ROCE_ICRC_IMPL_AUTO), 0);
	assert_int_equal(roce_icrc_set_impl((enum roce_icrc_impl)42), -EINVAL);
}

/* ------------------------------------------------------------------------ */
/* PSN arithmetic, GIDs                                                      */

static void test_psn_wrap(void **state)
{
	(void)state;
	assert_int_equal(roce_psn_add(0xFFFFFF, 1), 0);
	assert_int_equal(roce_psn_add(0xFFFFFE, 5), 3);
	assert_int_equal(roce_psn_add(5, ROCE_PSN_MASK), 4); /* adding -1 */
	assert_int_equal(roce_psn_diff(0, 0xFFFFFF), 1);
	assert_int_equal(roce_psn_diff(0xFFFFFF, 0), -1);
	assert_int_equal(roce_psn_diff(3, 0xFFFFFD), 6);
	assert_int_equal(roce_psn_diff(0xFFFFFD, 3), -6);
	assert_int_equal(roce_psn_diff(100, 100), 0);
	/* the half-window boundary: +2^23 is "after", -2^23 maps to +2^23 */
	assert_int_equal(roce_psn_diff(ROCE_PSN_HALF, 0), -(int32_t)ROCE_PSN_HALF);
	assert_int_equal(roce_psn_diff(ROCE_PSN_HALF - 1, 0), (int32_t)ROCE_PSN_HALF - 1);
	assert_int_equal(roce_psn_diff(0, ROCE_PSN_HALF + 1), (int32_t)ROCE_PSN_HALF - 1);
	assert_true(roce_psn_cmp(0, 0xFFFFFF) > 0);
	assert_true(roce_psn_cmp(0xFFFFFF, 0) < 0);
	assert_true(roce_psn_cmp(0x7FFFFF, 0) > 0);
	assert_int_equal(roce_psn_cmp(0x123456, 0x123456), 0);
	/* upper bits of the inputs are ignored */
	assert_int_equal(roce_psn_diff(0x1000001, 0x0000000), 1);
	/* walking across the wrap, each step is +1 and compares after */
	for (uint32_t p = 0xFFFFF0, i = 0; i < 32; i++, p = roce_psn_add(p, 1)) {
		uint32_t next = roce_psn_add(p, 1);

		assert_true(next <= ROCE_PSN_MASK);
		assert_int_equal(roce_psn_diff(next, p), 1);
		assert_true(roce_psn_cmp(next, p) > 0);
		assert_true(roce_psn_cmp(p, next) < 0);
		assert_int_equal(roce_psn_diff(roce_psn_add(p, 1000), p), 1000);
	}
}

static void test_gid_helpers(void **state)
{
	uint8_t gid[16];
	char buf[64];
	static const uint8_t v6[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

	(void)state;
	roce_gid_from_ipv4(gid, htonl(0x0A63000B));
	assert_true(roce_gid_is_v4mapped(gid));
	assert_int_equal(gid[10], 0xFF);
	assert_int_equal(gid[12], 10);
	assert_int_equal(roce_gid_to_ipv4(gid), htonl(0x0A63000B));
	assert_string_equal(roce_gid_str(gid, buf, sizeof(buf)), "10.99.0.11");
	assert_false(roce_gid_is_v4mapped(v6));
	assert_string_equal(roce_gid_str(v6, buf, sizeof(buf)), "fe80::1");
	assert_string_equal(roce_gid_str(v6, buf, 4), "?");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_opcode_table_coverage),
	    cmocka_unit_test(test_opcode_table_entries),
	    cmocka_unit_test(test_roundtrip_every_opcode),
	    cmocka_unit_test(test_trailing_ethernet_padding),
	    cmocka_unit_test(test_header_lengths),
	    cmocka_unit_test(test_builder_rejects),
	    cmocka_unit_test(test_builder_ip_udp_fields),
	    cmocka_unit_test(test_builder_fields_from_values),
	    cmocka_unit_test(test_reject_each_reason),
	    cmocka_unit_test(test_status_names),
	    cmocka_unit_test(test_truncated_at_every_length),
	    cmocka_unit_test(test_crc32_known_answer),
	    cmocka_unit_test(test_icrc_masked_fields),
	    cmocka_unit_test(test_icrc_definition),
	    cmocka_unit_test(test_icrc_impls_match_table),
	    cmocka_unit_test(test_psn_wrap),
	    cmocka_unit_test(test_gid_helpers),
	};

	return cmocka_run_group_tests_name("wire_codec", tests, NULL, NULL);
}
