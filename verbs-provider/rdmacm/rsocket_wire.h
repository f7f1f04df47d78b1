/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * rsockets on the wire (docs/rdmacm.md, "rsockets"): what rdma-core's
 * rsocket implementation (librdmacm/rsocket.c, protocol version 1) puts into
 * the connection private data, the immediate data of its RDMA WRITEs and the
 * buffer descriptors it writes into the peer's memory. Pure functions: no
 * verbs, no state; every decoder checks what it reads.
 *
 * - Connection data (REQ and REP private data, 40 bytes, big endian):
 *     0 version (1)   1 flags (NET 0x01: sender is big endian; IOMAP 0x02)
 *     2 credits (be16: receive WQEs the sender posted)   4 reserved (3 bytes)
 *     7 target iomap size (scaled, see rs_scale_to_value)
 *     8 target SGL: addr be64, rkey be32, number of entries be32
 *    24 first data buffer: addr be64, rkey be32, length in bytes be32
 * - Immediate data of an RDMA WRITE WITH IMMEDIATE: bits 31..29 the
 *   operation, bits 28..0 its argument (rs_imm_make).
 * - An SGE written into the peer's target SGL (16 bytes) and an iomap entry
 *   written into its target iomap (24 bytes: offset, then an SGE) are in the
 *   byte order of the host that reads them (the writer swaps when the
 *   connection data's NET flags differ).
 */
#ifndef ROCEMU_RSOCKET_WIRE_H
#define ROCEMU_RSOCKET_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RS_CONN_VERSION	   1
#define RS_CONN_FLAG_NET   0x01 /* the sender is big endian */
#define RS_CONN_FLAG_IOMAP 0x02 /* target_iomap_size is meaningful */
#define RS_CONN_DATA_LEN   40
#define RS_SGE_LEN	   16
#define RS_IOMAP_LEN	   24
/* Entries of the target SGL each side advertises (rdma-core: RS_SGL_SIZE). */
#define RS_SGL_SIZE 2
/* The most SGL entries we accept a peer to advertise (it writes our credit
 * updates round robin into that many): any bound would do, rdma-core uses 2. */
#define RS_MAX_PEER_SGL 64

/** Operations in bits 31..29 of the immediate data. */
enum rs_op {
	RS_OP_DATA = 0, /* bytes written into the current target buffer */
	RS_OP_RSVD_DATA_MORE = 1,
	RS_OP_WRITE = 2, /* local only: a direct (iomap) write, never on the wire */
	RS_OP_RSVD_DRA_MORE = 3,
	RS_OP_SGL = 4, /* credit update: the new send limit; target SGL may be updated */
	RS_OP_RSVD = 5,
	RS_OP_IOMAP_SGL = 6, /* iomap entry <index> was written */
	RS_OP_CTRL = 7,	     /* control message (enum rs_ctrl) */
};

enum rs_ctrl {
	RS_CTRL_DISCONNECT = 0, /* the sender will neither send nor receive */
	RS_CTRL_KEEPALIVE = 1,	/* sent as a 0-byte RDMA WRITE without immediate */
	RS_CTRL_SHUTDOWN = 2,	/* the sender will send no more data */
};

#define RS_IMM_DATA_MASK 0x1fffffffu

static inline uint32_t rs_imm_make(enum rs_op op, uint32_t arg)
{
	return (uint32_t)op << 29 | (arg & RS_IMM_DATA_MASK);
}
static inline enum rs_op rs_imm_op(uint32_t imm)
{
	return (enum rs_op)(imm >> 29);
}
static inline uint32_t rs_imm_arg(uint32_t imm)
{
	return imm & RS_IMM_DATA_MASK;
}

/** A buffer descriptor: address, rkey and length (or entry count). */
struct rs_sge {
	uint64_t addr;
	uint32_t key;
	uint32_t length;
};

/** An iomap entry: the peer's buffer mapped at a stream offset. */
struct rs_iomap {
	uint64_t offset;
	struct rs_sge sge;
};

/** The connection data, decoded. */
struct rs_conn {
	uint8_t version;
	uint8_t flags;
	uint16_t credits;
	uint8_t target_iomap_size; /**< scaled: rs_scale_to_value() gives entries */
	struct rs_sge target_sgl;  /**< length: number of entries */
	struct rs_sge data_buf;	   /**< length: bytes */
};

/** This host's NET flag (set on big-endian hosts). */
uint8_t rs_host_net_flag(void);

/** Encode c into out (RS_CONN_DATA_LEN bytes). */
void rs_conn_put(uint8_t *out, const struct rs_conn *c);
/**
 * Decode and check the connection data at p (len bytes of private data).
 * 0, or -EPROTO (too short, an SGL of no or too many entries, a buffer that
 * wraps the address space), -EPROTONOSUPPORT (another version).
 */
int rs_conn_get(const uint8_t *p, size_t len, struct rs_conn *c);

/** The iomap size byte: sizes up to 128 as they are, larger ones in 256s. */
uint8_t rs_value_to_scale(unsigned value);
unsigned rs_scale_to_value(uint8_t scale);

/** Store an SGE (16 bytes) / iomap entry (24 bytes) in the byte order a
 * reader with NET flag `reader_net` expects. */
void rs_sge_put(uint8_t *out, const struct rs_sge *s, bool reader_net);
void rs_iomap_put(uint8_t *out, const struct rs_iomap *m, bool reader_net);
/** Read what a peer stored in our memory (our own byte order). */
void rs_sge_get(const volatile uint8_t *in, struct rs_sge *s);
void rs_iomap_get(const volatile uint8_t *in, struct rs_iomap *m);
/** True when [addr, addr + length) does not wrap around the address space. */
bool rs_sge_sane(const struct rs_sge *s);

#endif /* ROCEMU_RSOCKET_WIRE_H */
