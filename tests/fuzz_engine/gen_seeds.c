/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Writes the seed corpus of fuzz_engine: valid frames of every opcode the
 * engine handles, wrapped as fuzz_engine records (see fuzz_engine.c) that
 * steer them at the RC/UC/UD QP, their expected PSNs and the region.
 * usage: fuzz_engine_seeds DIR
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../../emulator/wire/roce_wire.h"

#define SHAPE	0x80
#define ICRC	0x01
#define QP_RC	(1u << 2)
#define QP_UC	(2u << 2)
#define QP_UD	(3u << 2)
#define QP_RC6	(2u | (0u << 2))
#define QP_SRQ	(2u | (1u << 2))
#define QP_PD2	(2u | (2u << 2))
#define QP_XRC	(2u | (3u << 2)) /* the XRC target (RKEY: its SRQ in the XRCETH) */
#define XRC(op) (ROCE_TRANSPORT_XRC | (op))
#define PSN	0x10
#define RKEY	0x20
#define VA	0x40

struct rec {
	uint8_t op;
	uint8_t flags;
	uint32_t len;	  /* payload */
	uint32_t psn_off; /* low nibble: signed offset from the expected PSN */
	uint32_t dma_len;
	uint64_t va;
	uint8_t syndrome;
};

static uint8_t out[65536];
static size_t out_len;

static void add(const struct rec *r)
{
	struct roce_pkt p;
	uint8_t buf[9000];
	uint32_t flen;
	int hl;

	memset(&p, 0, sizeof(p));
	p.path.ip_version = 4;
	roce_gid_from_ipv4(p.path.src_gid, 0x0200500a); /* 10.80.0.2 */
	roce_gid_from_ipv4(p.path.dst_gid, 0x0100500a); /* 10.80.0.1 */
	p.path.ttl = 64;
	p.path.udp_sport = 0xC001;
	p.opcode = r->op;
	p.op = roce_opcode_info(r->op);
	p.pkey = ROCE_DEFAULT_PKEY;
	p.dqpn = 0x11;
	p.psn = r->psn_off & 0xF;
	p.ackreq = true;
	p.reth.va = r->va;
	p.reth.dma_len = r->dma_len;
	p.atomic.va = r->va;
	p.atomic.swap_add = 1;
	p.deth.qkey = 0x11111111u;
	p.deth.src_qp = 0xBEE;
	p.aeth.syndrome = r->syndrome;
	p.payload_len = (p.op->flags & ROCE_OPF_PAYLOAD) ? r->len : 0;
	if (p.op->flags & ROCE_OPF_CNP)
		p.payload_len = 16;
	hl = roce_build_headers(buf, sizeof(buf), &p);
	if (hl < 0) {
		fprintf(stderr, "cannot build opcode %#x\n", r->op);
		return;
	}
	for (uint32_t i = 0; i < p.payload_len; i++)
		buf[hl + i] = (uint8_t)(i * 13 + r->op);
	flen = roce_frame_len(&p);
	roce_finish(buf, flen, &p);
	out[out_len++] = r->flags;
	out[out_len++] = (uint8_t)flen;
	out[out_len++] = (uint8_t)(flen >> 8);
	memcpy(out + out_len, buf, flen);
	out_len += flen;
}

/* An action record (fuzz_engine.c): code, then argument bytes. */
static void action(uint8_t code, uint8_t a0, uint8_t a1)
{
	out[out_len++] = code;
	out[out_len++] = 2;
	out[out_len++] = 0xC0;
	out[out_len++] = a0;
	out[out_len++] = a1;
}

/* The input's last byte is its configuration (bit 0 short timers, bit 1 a
 * SEND longer than the send window); action records may come first. */
static void emit_cfg(const char *dir, const char *name, const struct rec *recs, unsigned n,
		     const uint8_t *acts, unsigned nacts, uint8_t cfg)
{
	char path[4096];
	FILE *f;

	out_len = 0;
	for (unsigned i = 0; i < n; i++) {
		add(&recs[i]);
		if (i < nacts && acts[i * 3] != 0xFF)
			action(acts[i * 3], acts[i * 3 + 1], acts[i * 3 + 2]);
	}
	out[out_len++] = cfg;
	snprintf(path, sizeof(path), "%s/seed-%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(out, 1, out_len, f) != out_len) {
		perror(path);
		return;
	}
	fclose(f);
}

static void emit(const char *dir, const char *name, const struct rec *recs, unsigned n)
{
	char path[4096];
	FILE *f;

	out_len = 0;
	for (unsigned i = 0; i < n; i++)
		add(&recs[i]);
	snprintf(path, sizeof(path), "%s/seed-%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(out, 1, out_len, f) != out_len) {
		perror(path);
		return;
	}
	fclose(f);
}

#define ALL (SHAPE | ICRC | PSN | RKEY | VA)
#define ONE(name, ...)                                                                             \
	do {                                                                                       \
		const struct rec r_[] = {__VA_ARGS__};                                             \
		emit(dir, name, r_, sizeof(r_) / sizeof(r_[0]));                                   \
	} while (0)

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : ".";

	ONE("rc_send_only", {ROCE_OP_SEND_ONLY, ALL | QP_RC, 64, 0, 0, 0, 0});
	ONE("rc_send_fml", {ROCE_OP_SEND_FIRST, ALL | QP_RC, 1024, 0, 0, 0, 0},
	    {ROCE_OP_SEND_MIDDLE, ALL | QP_RC, 1024, 0, 0, 0, 0},
	    {ROCE_OP_SEND_LAST_IMM, ALL | QP_RC, 100, 0, 0, 0, 0});
	ONE("rc_send_inv", {ROCE_OP_SEND_ONLY_INV, ALL | QP_RC, 16, 0, 0, 0, 0});
	ONE("rc_write_only", {ROCE_OP_WRITE_ONLY, ALL | QP_RC, 256, 0, 256, 0x900, 0});
	ONE("rc_write_fl", {ROCE_OP_WRITE_FIRST, ALL | QP_RC, 1024, 0, 1500, 0x800, 0},
	    {ROCE_OP_WRITE_LAST_IMM, ALL | QP_RC, 476, 0, 0, 0, 0});
	ONE("rc_read", {ROCE_OP_READ_REQUEST, ALL | QP_RC, 0, 0, 3000, 0x800, 0},
	    {ROCE_OP_READ_REQUEST, ALL | QP_RC, 0, 0, 1000, 0x800, 0});
	ONE("rc_atomics", {ROCE_OP_FETCH_ADD, ALL | QP_RC, 0, 0, 0, 0x808, 0},
	    {ROCE_OP_CMP_SWAP, ALL | QP_RC, 0, 0, 0, 0x810, 0},
	    {ROCE_OP_FETCH_ADD, ALL | QP_RC, 0, 0, 0, 0x808, 0});
	ONE("rc_dup_and_gap", {ROCE_OP_SEND_ONLY, ALL | QP_RC, 8, 0, 0, 0, 0},
	    {ROCE_OP_SEND_ONLY, ALL | QP_RC, 8, 0xF, 0, 0, 0},
	    {ROCE_OP_SEND_ONLY, ALL | QP_RC, 8, 3, 0, 0, 0});
	ONE("rc_ack", {ROCE_OP_ACK, ALL | QP_RC, 0, 1, 0, 0, 0x1F});
	ONE("rc_nak_seq", {ROCE_OP_ACK, ALL | QP_RC, 0, 0, 0, 0, ROCE_AETH_SYNDROME(3, 0)});
	ONE("rc_nak_access", {ROCE_OP_ACK, ALL | QP_RC, 0, 2, 0, 0, ROCE_AETH_SYNDROME(3, 2)});
	ONE("rc_rnr", {ROCE_OP_ACK, ALL | QP_RC, 0, 0, 0, 0, ROCE_AETH_SYNDROME(1, 1)});
	ONE("rc_read_resp", {ROCE_OP_ACK, ALL | QP_RC, 0, 1, 0, 0, 0x1F},
	    {ROCE_OP_READ_RESP_FIRST, ALL | QP_RC, 1024, 0, 0, 0, 0x1F},
	    {ROCE_OP_READ_RESP_LAST, ALL | QP_RC, 1024, 1, 0, 0, 0x1F},
	    {ROCE_OP_ATOMIC_ACK, ALL | QP_RC, 0, 4, 0, 0, 0x1F});
	ONE("uc_send", {ROCE_TRANSPORT_UC | ROCE_OP_SEND_FIRST, ALL | QP_UC, 1024, 0, 0, 0, 0},
	    {ROCE_TRANSPORT_UC | ROCE_OP_SEND_LAST, ALL | QP_UC, 10, 0, 0, 0, 0});
	ONE("uc_write",
	    {ROCE_TRANSPORT_UC | ROCE_OP_WRITE_ONLY_IMM, ALL | QP_UC, 64, 0, 64, 0x800, 0});
	ONE("ud_send", {ROCE_TRANSPORT_UD | ROCE_OP_SEND_ONLY, ALL | QP_UD, 200, 0, 0, 0, 0},
	    {ROCE_TRANSPORT_UD | ROCE_OP_SEND_ONLY_IMM, ALL | QP_UD, 0, 0, 0, 0, 0});
	ONE("cnp", {ROCE_OPCODE_CNP, ALL | QP_RC, 0, 0, 0, 0, 0});
	ONE("raw_send", {ROCE_OP_SEND_ONLY, ICRC, 64, 0, 0, 0, 0});
	/* issue 18: the other QPs, regions, actions and configurations */
	ONE("rc6_write", {ROCE_OP_WRITE_ONLY, ALL | QP_RC6, 256, 0, 256, 0x900, 0});
	ONE("srq_send", {ROCE_OP_SEND_ONLY, ALL | QP_SRQ, 64, 0, 0, 0, 0},
	    {ROCE_OP_SEND_FIRST, ALL | QP_SRQ, 1024, 1, 0, 0, 0},
	    {ROCE_OP_SEND_LAST, ALL | QP_SRQ, 10, 2, 0, 0, 0});
	ONE("pd2_write_other_region", {ROCE_OP_WRITE_ONLY, ALL | QP_PD2, 64, 0, 64, 0x803, 0});
	/* issue 15.2: the XRC target, its SRQ named, and an XRCETH naming none */
	ONE("xrc_send", {XRC(ROCE_OP_SEND_ONLY), ALL | QP_XRC, 64, 0, 0, 0, 0},
	    {XRC(ROCE_OP_SEND_FIRST), ALL | QP_XRC, 1024, 0, 0, 0, 0},
	    {XRC(ROCE_OP_SEND_LAST_IMM), ALL | QP_XRC, 10, 0, 0, 0, 0});
	ONE("xrc_rdma", {XRC(ROCE_OP_WRITE_ONLY), ALL | QP_XRC, 256, 0, 256, 0x900, 0},
	    {XRC(ROCE_OP_READ_REQUEST), ALL | QP_XRC, 0, 0, 1000, 0x800, 0},
	    {XRC(ROCE_OP_FETCH_ADD), ALL | QP_XRC, 0, 0, 0, 0x808, 0});
	ONE("xrc_no_srq", {XRC(ROCE_OP_SEND_ONLY), (ALL & ~RKEY) | QP_XRC, 16, 0, 0, 0, 0});
	{
		/* rkey low bits 2: the ODP region (the frame's rkey is 0 here: the
		 * shaping reads the low bits of whatever the fuzzer puts there) */
		const struct rec r[] = {{ROCE_OP_FETCH_ADD, ALL | QP_RC, 0, 0, 0, 0x808, 0},
					{ROCE_OP_WRITE_ONLY, ALL | QP_RC, 64, 1, 64, 0x900, 0}};
		const uint8_t acts[] = {0, 0, 0, 1, 0, 0}; /* dereg R after the first, reg after */

		emit_cfg(dir, "dereg_between", r, 2, acts, 2, 0);
	}
	{
		const struct rec r[] = {{ROCE_OP_ACK, ALL | QP_RC, 0, 0, 0, 0, 0x1F},
					{ROCE_OP_ACK, ALL | QP_RC, 0, 1, 0, 0, 0x1F}};
		const uint8_t acts[] = {3, 3, 0, 7, 7, 0}; /* wait 1.5 ms: timers expire */

		emit_cfg(dir, "short_timers", r, 2, acts, 2, 1);
	}
	{
		const struct rec r[] = {
		    {ROCE_OP_ACK, ALL | QP_RC, 0, 5, 0, 0, 0x1F},
		    {ROCE_OP_ACK, ALL | QP_RC, 0, 0, 0, 0, ROCE_AETH_SYNDROME(3, 0)}};
		const uint8_t acts[] = {0xFF, 0, 0, 2, 0, 1}; /* then RC to SQD */

		emit_cfg(dir, "long_send_and_sqd", r, 2, acts, 2, 2);
	}
	return 0;
}
