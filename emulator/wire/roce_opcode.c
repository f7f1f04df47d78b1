/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The opcode table (IBA vol. 1 9.2, table 38; RoCEv2 CNP from A17.9.2;
 * FLUSH and ATOMIC WRITE from annex A19, memory placement extensions), as
 * data: for every RC, UC, UD and XRC opcode and the CNP, which extension
 * headers follow the BTH, at which offsets, and what kind of packet it is.
 * Builder, parser and the transport state machines all consult this one
 * table.
 *
 * Extension headers appear in the order the IBA fixes (9.2, figure 40):
 * XRCETH, DETH, FETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH.
 * Offsets are derived from that order at table definition time by the OP()
 * macro below. XRC requests carry the XRCETH (the XRC SRQ they are for)
 * right after the BTH; XRC responses are RC's (9.3.8).
 *
 * ROCE_OPF_COMPLETES marks the packet that ends a message and makes a work
 * completion somewhere: the last/only packet of a SEND or of a WRITE with
 * immediate (responder side), the last/only READ response and the ATOMIC
 * ACKNOWLEDGE (requester side). Plain WRITE LAST/ONLY and ACKs complete
 * nothing by themselves (an ACK's effect depends on the requester's state).
 * FLUSH and ATOMIC WRITE are answered with an RDMA READ response Only of no
 * payload (A19), which the requester matches to its WQE.
 */
#include <stddef.h>

#include "roce_wire.h"

/* Lengths of the extension headers: their structs (roce_wire.h). */
#define L_RETH	     sizeof(struct roce_reth)
#define L_AETH	     sizeof(struct roce_aeth)
#define L_ATOMIC     sizeof(struct roce_atomic_eth)
#define L_ATOMIC_ACK sizeof(struct roce_atomic_ack_eth)
#define L_IMMDT	     sizeof(struct roce_immdt)
#define L_IETH	     sizeof(struct roce_ieth)
#define L_DETH	     sizeof(struct roce_deth)
#define L_FETH	     sizeof(struct roce_feth)
#define L_XRCETH     sizeof(struct roce_xrceth)

#define H(bit, h) (((h) & (bit)) ? 1 : 0)
/* Offsets in spec order: XRCETH, DETH, FETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH. */
#define OFF_XRCETH(h)	  0
#define OFF_DETH(h)	  (OFF_XRCETH(h) + H(ROCE_HDR_XRCETH, h) * L_XRCETH)
#define OFF_FETH(h)	  (OFF_DETH(h) + H(ROCE_HDR_DETH, h) * L_DETH)
#define OFF_RETH(h)	  (OFF_FETH(h) + H(ROCE_HDR_FETH, h) * L_FETH)
#define OFF_ATOMIC(h)	  (OFF_RETH(h) + H(ROCE_HDR_RETH, h) * L_RETH)
#define OFF_AETH(h)	  (OFF_ATOMIC(h) + H(ROCE_HDR_ATOMIC_ETH, h) * L_ATOMIC)
#define OFF_ATOMIC_ACK(h) (OFF_AETH(h) + H(ROCE_HDR_AETH, h) * L_AETH)
#define OFF_IMMDT(h)	  (OFF_ATOMIC_ACK(h) + H(ROCE_HDR_ATOMIC_ACK_ETH, h) * L_ATOMIC_ACK)
#define OFF_IETH(h)	  (OFF_IMMDT(h) + H(ROCE_HDR_IMMDT, h) * L_IMMDT)
#define EXT_LEN(h)	  (OFF_IETH(h) + H(ROCE_HDR_IETH, h) * L_IETH)

#define OP(code, nm, fl, h)                                                                        \
	[code] = {                                                                                 \
	    .name = (nm),                                                                          \
	    .opcode = (code),                                                                      \
	    .transport = (code)&0xE0,                                                              \
	    .flags = (fl),                                                                         \
	    .hdrs = (h),                                                                           \
	    .ext_len = EXT_LEN(h),                                                                 \
	    .hdr_off =                                                                             \
		{                                                                                  \
		    [ROCE_HDRI_RETH] = OFF_RETH(h),                                                \
		    [ROCE_HDRI_AETH] = OFF_AETH(h),                                                \
		    [ROCE_HDRI_ATOMIC_ETH] = OFF_ATOMIC(h),                                        \
		    [ROCE_HDRI_ATOMIC_ACK_ETH] = OFF_ATOMIC_ACK(h),                                \
		    [ROCE_HDRI_IMMDT] = OFF_IMMDT(h),                                              \
		    [ROCE_HDRI_IETH] = OFF_IETH(h),                                                \
		    [ROCE_HDRI_DETH] = OFF_DETH(h),                                                \
		    [ROCE_HDRI_FETH] = OFF_FETH(h),                                                \
		    [ROCE_HDRI_XRCETH] = OFF_XRCETH(h),                                            \
		},                                                                                 \
	    .fixed_payload = 0,                                                                    \
	}

/* Shorthands for the flag sets that repeat. */
#define REQ_PAY	      (ROCE_OPF_REQUEST | ROCE_OPF_PAYLOAD)
#define SEND_F	      (REQ_PAY | ROCE_OPF_SEND | ROCE_OPF_RECV_WQE)
#define SEND_END      (SEND_F | ROCE_OPF_COMPLETES)
#define WRITE_F	      (REQ_PAY | ROCE_OPF_WRITE)
#define WRITE_IMM_END (WRITE_F | ROCE_OPF_IMM | ROCE_OPF_RECV_WQE | ROCE_OPF_COMPLETES)
#define READ_RESP     (ROCE_OPF_RESPONSE | ROCE_OPF_PAYLOAD | ROCE_OPF_READ)

/* The SEND and WRITE rows are the same for RC, UC and XRC (t = transport,
 * x = the headers every request of the transport carries: XRCETH for XRC). */
#define SEND_WRITE_ROWS(t, T, x)                                                                   \
	OP(t | ROCE_OP_SEND_FIRST, T " SEND FIRST", SEND_F | ROCE_OPF_FIRST, (x)),                 \
	    OP(t | ROCE_OP_SEND_MIDDLE, T " SEND MIDDLE", SEND_F | ROCE_OPF_MIDDLE, (x)),          \
	    OP(t | ROCE_OP_SEND_LAST, T " SEND LAST", SEND_END | ROCE_OPF_LAST, (x)),              \
	    OP(t | ROCE_OP_SEND_LAST_IMM, T " SEND LAST with Immediate",                           \
	       SEND_END | ROCE_OPF_LAST | ROCE_OPF_IMM, (x) | ROCE_HDR_IMMDT),                     \
	    OP(t | ROCE_OP_SEND_ONLY, T " SEND ONLY", SEND_END | ROCE_OPF_ONLY, (x)),              \
	    OP(t | ROCE_OP_SEND_ONLY_IMM, T " SEND ONLY with Immediate",                           \
	       SEND_END | ROCE_OPF_ONLY | ROCE_OPF_IMM, (x) | ROCE_HDR_IMMDT),                     \
	    OP(t | ROCE_OP_WRITE_FIRST, T " RDMA WRITE FIRST", WRITE_F | ROCE_OPF_FIRST,           \
	       (x) | ROCE_HDR_RETH),                                                               \
	    OP(t | ROCE_OP_WRITE_MIDDLE, T " RDMA WRITE MIDDLE", WRITE_F | ROCE_OPF_MIDDLE, (x)),  \
	    OP(t | ROCE_OP_WRITE_LAST, T " RDMA WRITE LAST", WRITE_F | ROCE_OPF_LAST, (x)),        \
	    OP(t | ROCE_OP_WRITE_LAST_IMM, T " RDMA WRITE LAST with Immediate",                    \
	       WRITE_IMM_END | ROCE_OPF_LAST, (x) | ROCE_HDR_IMMDT),                               \
	    OP(t | ROCE_OP_WRITE_ONLY, T " RDMA WRITE ONLY", WRITE_F | ROCE_OPF_ONLY,              \
	       (x) | ROCE_HDR_RETH),                                                               \
	    OP(t | ROCE_OP_WRITE_ONLY_IMM, T " RDMA WRITE ONLY with Immediate",                    \
	       WRITE_IMM_END | ROCE_OPF_ONLY, (x) | ROCE_HDR_RETH | ROCE_HDR_IMMDT)

/* READ, atomics, SEND with Invalidate, FLUSH, ATOMIC WRITE and the responses:
 * RC and XRC (x as above; responses never carry the XRCETH). */
#define RELIABLE_ROWS(t, T, x)                                                                     \
	OP(t | ROCE_OP_READ_REQUEST, T " RDMA READ Request",                                       \
	   ROCE_OPF_REQUEST | ROCE_OPF_READ | ROCE_OPF_ONLY, (x) | ROCE_HDR_RETH),                 \
	    OP(t | ROCE_OP_READ_RESP_FIRST, T " RDMA READ response First",                         \
	       READ_RESP | ROCE_OPF_FIRST, ROCE_HDR_AETH),                                         \
	    OP(t | ROCE_OP_READ_RESP_MIDDLE, T " RDMA READ response Middle",                       \
	       READ_RESP | ROCE_OPF_MIDDLE, 0),                                                    \
	    OP(t | ROCE_OP_READ_RESP_LAST, T " RDMA READ response Last",                           \
	       READ_RESP | ROCE_OPF_LAST | ROCE_OPF_COMPLETES, ROCE_HDR_AETH),                     \
	    OP(t | ROCE_OP_READ_RESP_ONLY, T " RDMA READ response Only",                           \
	       READ_RESP | ROCE_OPF_ONLY | ROCE_OPF_COMPLETES, ROCE_HDR_AETH),                     \
	    OP(t | ROCE_OP_ACK, T " Acknowledge",                                                  \
	       ROCE_OPF_RESPONSE | ROCE_OPF_ACK | ROCE_OPF_ONLY, ROCE_HDR_AETH),                   \
	    OP(t | ROCE_OP_ATOMIC_ACK, T " ATOMIC Acknowledge",                                    \
	       ROCE_OPF_RESPONSE | ROCE_OPF_ATOMIC | ROCE_OPF_ONLY | ROCE_OPF_COMPLETES,           \
	       ROCE_HDR_AETH | ROCE_HDR_ATOMIC_ACK_ETH),                                           \
	    OP(t | ROCE_OP_CMP_SWAP, T " CmpSwap",                                                 \
	       ROCE_OPF_REQUEST | ROCE_OPF_ATOMIC | ROCE_OPF_ONLY, (x) | ROCE_HDR_ATOMIC_ETH),     \
	    OP(t | ROCE_OP_FETCH_ADD, T " FetchAdd",                                               \
	       ROCE_OPF_REQUEST | ROCE_OPF_ATOMIC | ROCE_OPF_ONLY, (x) | ROCE_HDR_ATOMIC_ETH),     \
	    OP(t | ROCE_OP_SEND_LAST_INV, T " SEND LAST with Invalidate",                          \
	       SEND_END | ROCE_OPF_LAST | ROCE_OPF_INV, (x) | ROCE_HDR_IETH),                      \
	    OP(t | ROCE_OP_SEND_ONLY_INV, T " SEND ONLY with Invalidate",                          \
	       SEND_END | ROCE_OPF_ONLY | ROCE_OPF_INV, (x) | ROCE_HDR_IETH),                      \
	    OP(t | ROCE_OP_FLUSH, T " FLUSH", ROCE_OPF_REQUEST | ROCE_OPF_FLUSH | ROCE_OPF_ONLY,   \
	       (x) | ROCE_HDR_FETH | ROCE_HDR_RETH),                                               \
	    OP(t | ROCE_OP_ATOMIC_WRITE, T " ATOMIC WRITE",                                        \
	       REQ_PAY | ROCE_OPF_ATOMIC_WRITE | ROCE_OPF_ONLY, (x) | ROCE_HDR_RETH)

static const struct roce_opcode_info opcode_table[256] = {
    SEND_WRITE_ROWS(ROCE_TRANSPORT_RC, "RC", 0),
    RELIABLE_ROWS(ROCE_TRANSPORT_RC, "RC", 0),

    /* UC: SEND and WRITE only (no READ, atomics, ACKs). */
    SEND_WRITE_ROWS(ROCE_TRANSPORT_UC, "UC", 0),

    /* XRC (9.3.8): RC's operations; every request names its XRC SRQ. */
    SEND_WRITE_ROWS(ROCE_TRANSPORT_XRC, "XRC", ROCE_HDR_XRCETH),
    RELIABLE_ROWS(ROCE_TRANSPORT_XRC, "XRC", ROCE_HDR_XRCETH),

    /* UD: SEND ONLY, with DETH (9.8.3). */
    OP(ROCE_TRANSPORT_UD | ROCE_OP_SEND_ONLY, "UD SEND ONLY", SEND_END | ROCE_OPF_ONLY,
       ROCE_HDR_DETH),
    OP(ROCE_TRANSPORT_UD | ROCE_OP_SEND_ONLY_IMM, "UD SEND ONLY with Immediate",
       SEND_END | ROCE_OPF_ONLY | ROCE_OPF_IMM, ROCE_HDR_DETH | ROCE_HDR_IMMDT),

    /*
     * RoCEv2 CNP (A17.9.2): BTH, then 16 reserved bytes, then ICRC. The
     * reserved bytes are carried as a fixed 16-byte payload so that a
     * received CNP is rebuilt byte for byte.
     */
    [ROCE_OPCODE_CNP] =
	{
	    .name = "CNP",
	    .opcode = ROCE_OPCODE_CNP,
	    .transport = ROCE_TRANSPORT_CNP,
	    .flags = ROCE_OPF_CNP | ROCE_OPF_PAYLOAD,
	    .hdrs = 0,
	    .ext_len = 0,
	    .hdr_off = {0},
	    .fixed_payload = 16,
	},
};

const struct roce_opcode_info *roce_opcode_info(uint8_t opcode)
{
	const struct roce_opcode_info *info = &opcode_table[opcode];

	return info->name != NULL ? info : NULL;
}

const char *roce_opcode_name(uint8_t opcode)
{
	const struct roce_opcode_info *info = roce_opcode_info(opcode);

	return info != NULL ? info->name : NULL;
}
