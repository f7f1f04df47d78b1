/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The extension headers (IBA 9.3; FETH from annex A19, XRCETH from 9.3.8):
 * one row each, with the header's length and the functions that read it into
 * the descriptor and write it from there. Every field is read and written at
 * the offset of its member in the header's packed struct (roce_wire.h), so
 * the layout is written once. The parser and the builder walk the headers an
 * opcode carries (roce_opcode_info.hdrs) through this table; a new header is
 * its struct, its descriptor fields, a row here and its place in the spec
 * order of roce_opcode.c's offsets.
 */
#include <stddef.h>

#include "roce_bytes.h"
#include "roce_wire.h"

/* The bytes of field f of header struct s in the header at h. */
#define AT(h, s, f) ((h) + offsetof(struct s, f))

static void get_reth(const uint8_t *h, struct roce_pkt *p)
{
	p->reth.va = rb_get64(AT(h, roce_reth, va));
	p->reth.rkey = rb_get32(AT(h, roce_reth, rkey));
	p->reth.dma_len = rb_get32(AT(h, roce_reth, dma_len));
}

static void put_reth(uint8_t *h, const struct roce_pkt *p)
{
	rb_put64(AT(h, roce_reth, va), p->reth.va);
	rb_put32(AT(h, roce_reth, rkey), p->reth.rkey);
	rb_put32(AT(h, roce_reth, dma_len), p->reth.dma_len);
}

static void get_aeth(const uint8_t *h, struct roce_pkt *p)
{
	p->aeth.syndrome = *AT(h, roce_aeth, syndrome);
	p->aeth.msn = rb_get24(AT(h, roce_aeth, msn));
}

static void put_aeth(uint8_t *h, const struct roce_pkt *p)
{
	*AT(h, roce_aeth, syndrome) = p->aeth.syndrome;
	rb_put24(AT(h, roce_aeth, msn), p->aeth.msn);
}

static void get_atomic(const uint8_t *h, struct roce_pkt *p)
{
	p->atomic.va = rb_get64(AT(h, roce_atomic_eth, va));
	p->atomic.rkey = rb_get32(AT(h, roce_atomic_eth, rkey));
	p->atomic.swap_add = rb_get64(AT(h, roce_atomic_eth, swap_add));
	p->atomic.compare = rb_get64(AT(h, roce_atomic_eth, compare));
}

static void put_atomic(uint8_t *h, const struct roce_pkt *p)
{
	rb_put64(AT(h, roce_atomic_eth, va), p->atomic.va);
	rb_put32(AT(h, roce_atomic_eth, rkey), p->atomic.rkey);
	rb_put64(AT(h, roce_atomic_eth, swap_add), p->atomic.swap_add);
	rb_put64(AT(h, roce_atomic_eth, compare), p->atomic.compare);
}

static void get_atomic_ack(const uint8_t *h, struct roce_pkt *p)
{
	p->atomic_orig = rb_get64(AT(h, roce_atomic_ack_eth, orig));
}

static void put_atomic_ack(uint8_t *h, const struct roce_pkt *p)
{
	rb_put64(AT(h, roce_atomic_ack_eth, orig), p->atomic_orig);
}

static void get_immdt(const uint8_t *h, struct roce_pkt *p)
{
	p->imm = rb_get32(AT(h, roce_immdt, imm));
}

static void put_immdt(uint8_t *h, const struct roce_pkt *p)
{
	rb_put32(AT(h, roce_immdt, imm), p->imm);
}

static void get_ieth(const uint8_t *h, struct roce_pkt *p)
{
	p->ieth_rkey = rb_get32(AT(h, roce_ieth, rkey));
}

static void put_ieth(uint8_t *h, const struct roce_pkt *p)
{
	rb_put32(AT(h, roce_ieth, rkey), p->ieth_rkey);
}

static void get_deth(const uint8_t *h, struct roce_pkt *p)
{
	p->deth.qkey = rb_get32(AT(h, roce_deth, qkey));
	p->deth.src_qp = rb_get24(AT(h, roce_deth, src_qp));
}

static void put_deth(uint8_t *h, const struct roce_pkt *p)
{
	rb_put32(AT(h, roce_deth, qkey), p->deth.qkey);
	*AT(h, roce_deth, resv) = 0;
	rb_put24(AT(h, roce_deth, src_qp), p->deth.src_qp);
}

static void get_feth(const uint8_t *h, struct roce_pkt *p)
{
	p->feth = rb_get32(AT(h, roce_feth, bits));
}

static void put_feth(uint8_t *h, const struct roce_pkt *p)
{
	rb_put32(AT(h, roce_feth, bits), p->feth);
}

static void get_xrceth(const uint8_t *h, struct roce_pkt *p)
{
	p->xrc_srqn = rb_get24(AT(h, roce_xrceth, xrc_srqn));
}

static void put_xrceth(uint8_t *h, const struct roce_pkt *p)
{
	*AT(h, roce_xrceth, resv) = 0;
	rb_put24(AT(h, roce_xrceth, xrc_srqn), p->xrc_srqn);
}

static const struct ext_hdr {
	uint8_t len;
	void (*get)(const uint8_t *h, struct roce_pkt *p);
	void (*put)(uint8_t *h, const struct roce_pkt *p);
} ext_hdrs[ROCE_HDR_COUNT] = {
#define ROW(i, s, g, p) [ROCE_HDRI_##i] = {sizeof(struct s), g, p}
    ROW(RETH, roce_reth, get_reth, put_reth),
    ROW(AETH, roce_aeth, get_aeth, put_aeth),
    ROW(ATOMIC_ETH, roce_atomic_eth, get_atomic, put_atomic),
    ROW(ATOMIC_ACK_ETH, roce_atomic_ack_eth, get_atomic_ack, put_atomic_ack),
    ROW(IMMDT, roce_immdt, get_immdt, put_immdt),
    ROW(IETH, roce_ieth, get_ieth, put_ieth),
    ROW(DETH, roce_deth, get_deth, put_deth),
    ROW(FETH, roce_feth, get_feth, put_feth),
    ROW(XRCETH, roce_xrceth, get_xrceth, put_xrceth),
#undef ROW
};

void roce_ext_read(const uint8_t *ext, struct roce_pkt *pkt)
{
	const struct roce_opcode_info *op = pkt->op;

	for (unsigned hdrs = op->hdrs; hdrs; hdrs &= hdrs - 1) {
		unsigned i = (unsigned)__builtin_ctz(hdrs);

		ext_hdrs[i].get(ext + op->hdr_off[i], pkt);
	}
}

void roce_ext_write(uint8_t *ext, const struct roce_pkt *pkt, const struct roce_opcode_info *op)
{
	for (unsigned hdrs = op->hdrs; hdrs; hdrs &= hdrs - 1) {
		unsigned i = (unsigned)__builtin_ctz(hdrs);

		ext_hdrs[i].put(ext + op->hdr_off[i], pkt);
	}
}

unsigned roce_hdr_len(unsigned hdr_bit)
{
	for (unsigned i = 0; i < ROCE_HDR_COUNT; i++)
		if (hdr_bit == (1u << i))
			return ext_hdrs[i].len;
	return 0;
}
