/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * RoCEv2 wire codec: header layouts, the opcode table, the packet descriptor,
 * the parser and the builder. Pure functions, no state, no DPDK EAL needed:
 * the codec works on plain byte buffers so that tools (the capture inspector,
 * fuzzers) use exactly the code the engine uses. `roce_mbuf.h` adds the thin
 * rte_mbuf layer on top.
 *
 * References: InfiniBand Architecture Specification vol. 1 rel. 1.4, ch. 9
 * (BTH and extension headers, opcodes), and Annex A17 "RoCEv2" (UDP port 4791,
 * ICRC over the IP/UDP/BTH with variant fields masked).
 */
#ifndef ROCEMU_WIRE_H
#define ROCEMU_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** UDP destination port of RoCEv2 (IANA). */
#define ROCE_UDP_PORT 4791
/** Range for per-QP UDP source ports (A17.4.5.1 recommends entropy here). */
#define ROCE_UDP_SPORT_MIN   0xC000
#define ROCE_UDP_SPORT_MAX   0xFFFF
#define ROCE_ICRC_LEN	     4
#define ROCE_BTH_LEN	     12
#define ROCE_ETH_TYPE_IPV4   0x0800
#define ROCE_ETH_TYPE_IPV6   0x86DD
#define ROCE_ETH_TYPE_VLAN   0x8100
#define ROCE_ETH_TYPE_ARP    0x0806
#define ROCE_DEFAULT_PKEY    0xFFFF
#define ROCE_FLOW_LABEL_MASK 0xFFFFFu /* the IPv6 flow label: 20 bits */
/** Largest header stack the builder writes: Eth+VLAN+IPv6+UDP+BTH+XRCETH+AtomicETH. */
#define ROCE_MAX_HDR_LEN (14 + 4 + 40 + 8 + 12 + 4 + 28)

/* ------------------------------------------------------------------------ */
/* On-wire layouts (network byte order). One packed struct per header: the   */
/* parser and builder read and write each field at its offsetof (roce_ext.c). */

struct roce_bth {
	uint8_t opcode;
	uint8_t flags; /**< SE:1 M:1 PadCnt:2 TVer:4 */
	uint16_t pkey;
	uint8_t resv8a; /**< FECN:1 BECN:1 resv:6; masked to ones in the ICRC */
	uint8_t dqpn[3];
	uint8_t ackreq; /**< AckReq:1 resv:7 */
	uint8_t psn[3];
} __attribute__((packed));

struct roce_reth {
	uint64_t va;
	uint32_t rkey;
	uint32_t dma_len;
} __attribute__((packed));

struct roce_aeth {
	uint8_t syndrome;
	uint8_t msn[3];
} __attribute__((packed));

struct roce_atomic_eth {
	uint64_t va;
	uint32_t rkey;
	uint64_t swap_add;
	uint64_t compare;
} __attribute__((packed));

struct roce_atomic_ack_eth {
	uint64_t orig;
} __attribute__((packed));

struct roce_immdt {
	uint32_t imm;
} __attribute__((packed));

struct roce_ieth {
	uint32_t rkey;
} __attribute__((packed));

struct roce_deth {
	uint32_t qkey;
	uint8_t resv;
	uint8_t src_qp[3];
} __attribute__((packed));

/** XRC extended transport header (IBA 9.3.8): the XRC SRQ a request is for. */
struct roce_xrceth {
	uint8_t resv;
	uint8_t xrc_srqn[3];
} __attribute__((packed));

/** FLUSH extended transport header (IBA annex A19, memory placement extensions). */
struct roce_feth {
	uint32_t bits; /**< resv:26 SEL:2 PLT:4 */
} __attribute__((packed));

#define ROCE_BTH_SE	   0x80
#define ROCE_BTH_MIG	   0x40
#define ROCE_BTH_PAD_SHIFT 4
#define ROCE_BTH_PAD_MASK  0x30
#define ROCE_BTH_TVER_MASK 0x0F
#define ROCE_BTH_FECN	   0x80
#define ROCE_BTH_BECN	   0x40
#define ROCE_BTH_ACKREQ	   0x80

/* ------------------------------------------------------------------------ */
/* Opcodes (IBA 9.2, table 38) and the RoCEv2 CNP (A17.9.2).                */

enum roce_transport {
	ROCE_TRANSPORT_RC = 0x00,
	ROCE_TRANSPORT_UC = 0x20,
	ROCE_TRANSPORT_RD = 0x40,
	ROCE_TRANSPORT_UD = 0x60,
	ROCE_TRANSPORT_CNP = 0x80,
	ROCE_TRANSPORT_XRC = 0xA0,
};

enum roce_opcode {
	ROCE_OP_SEND_FIRST = 0x00,
	ROCE_OP_SEND_MIDDLE = 0x01,
	ROCE_OP_SEND_LAST = 0x02,
	ROCE_OP_SEND_LAST_IMM = 0x03,
	ROCE_OP_SEND_ONLY = 0x04,
	ROCE_OP_SEND_ONLY_IMM = 0x05,
	ROCE_OP_WRITE_FIRST = 0x06,
	ROCE_OP_WRITE_MIDDLE = 0x07,
	ROCE_OP_WRITE_LAST = 0x08,
	ROCE_OP_WRITE_LAST_IMM = 0x09,
	ROCE_OP_WRITE_ONLY = 0x0A,
	ROCE_OP_WRITE_ONLY_IMM = 0x0B,
	ROCE_OP_READ_REQUEST = 0x0C,
	ROCE_OP_READ_RESP_FIRST = 0x0D,
	ROCE_OP_READ_RESP_MIDDLE = 0x0E,
	ROCE_OP_READ_RESP_LAST = 0x0F,
	ROCE_OP_READ_RESP_ONLY = 0x10,
	ROCE_OP_ACK = 0x11,
	ROCE_OP_ATOMIC_ACK = 0x12,
	ROCE_OP_CMP_SWAP = 0x13,
	ROCE_OP_FETCH_ADD = 0x14,
	ROCE_OP_SEND_LAST_INV = 0x16,
	ROCE_OP_SEND_ONLY_INV = 0x17,
	/* memory placement extensions (IBA annex A19) */
	ROCE_OP_FLUSH = 0x1C,
	ROCE_OP_ATOMIC_WRITE = 0x1D,
	/* the full 8-bit opcode is transport | operation */
	ROCE_OPCODE_CNP = 0x81,
};

/** The extension headers by index: the row of each in the header table
 * (roce_ext.c) and in roce_opcode_info.hdr_off. */
enum roce_hdr_index {
	ROCE_HDRI_RETH,
	ROCE_HDRI_AETH,
	ROCE_HDRI_ATOMIC_ETH,
	ROCE_HDRI_ATOMIC_ACK_ETH,
	ROCE_HDRI_IMMDT,
	ROCE_HDRI_IETH,
	ROCE_HDRI_DETH,
	ROCE_HDRI_FETH,
	ROCE_HDRI_XRCETH,
	ROCE_HDR_COUNT,
};

/** Which extension headers follow the BTH (bit set). */
enum roce_hdr {
	ROCE_HDR_RETH = 1u << ROCE_HDRI_RETH,
	ROCE_HDR_AETH = 1u << ROCE_HDRI_AETH,
	ROCE_HDR_ATOMIC_ETH = 1u << ROCE_HDRI_ATOMIC_ETH,
	ROCE_HDR_ATOMIC_ACK_ETH = 1u << ROCE_HDRI_ATOMIC_ACK_ETH,
	ROCE_HDR_IMMDT = 1u << ROCE_HDRI_IMMDT,
	ROCE_HDR_IETH = 1u << ROCE_HDRI_IETH,
	ROCE_HDR_DETH = 1u << ROCE_HDRI_DETH,
	ROCE_HDR_FETH = 1u << ROCE_HDRI_FETH,
	ROCE_HDR_XRCETH = 1u << ROCE_HDRI_XRCETH,
};

/** Properties of one opcode. */
enum roce_op_flag {
	ROCE_OPF_REQUEST = 1u << 0,  /**< sent by a requester */
	ROCE_OPF_RESPONSE = 1u << 1, /**< sent by a responder (ACK, read resp, atomic ack) */
	ROCE_OPF_PAYLOAD = 1u << 2,  /**< may carry payload */
	ROCE_OPF_FIRST = 1u << 3,
	ROCE_OPF_MIDDLE = 1u << 4,
	ROCE_OPF_LAST = 1u << 5,
	ROCE_OPF_ONLY = ROCE_OPF_FIRST | ROCE_OPF_LAST,
	ROCE_OPF_SEND = 1u << 6,
	ROCE_OPF_WRITE = 1u << 7,
	ROCE_OPF_READ = 1u << 8,
	ROCE_OPF_ATOMIC = 1u << 9,
	ROCE_OPF_ACK = 1u << 10,       /**< plain ACK/NAK */
	ROCE_OPF_IMM = 1u << 11,       /**< carries ImmDt */
	ROCE_OPF_INV = 1u << 12,       /**< carries IETH */
	ROCE_OPF_RECV_WQE = 1u << 13,  /**< consumes a receive WQE (SEND, WRITE w/ imm) */
	ROCE_OPF_COMPLETES = 1u << 14, /**< ends a message: generates a completion */
	ROCE_OPF_CNP = 1u << 15,
	ROCE_OPF_ATOMIC_WRITE = 1u << 16, /**< ATOMIC WRITE request (A19) */
	ROCE_OPF_FLUSH = 1u << 17,	  /**< FLUSH request (A19) */
};

struct roce_opcode_info {
	const char *name;  /**< spec name, e.g. "RC SEND FIRST" */
	uint8_t opcode;	   /**< full 8-bit opcode */
	uint8_t transport; /**< enum roce_transport */
	uint32_t flags;	   /**< enum roce_op_flag */
	uint16_t hdrs;	   /**< enum roce_hdr bits present after BTH */
	uint8_t ext_len;   /**< bytes of extension headers after BTH */
	/** offset from the end of BTH of each header, indexed by enum roce_hdr_index */
	uint8_t hdr_off[ROCE_HDR_COUNT];
	uint16_t fixed_payload; /**< CNP: exact payload length; 0 otherwise */
};

/** The opcode table entry, or NULL for an opcode rocemu does not know (or RD). */
const struct roce_opcode_info *roce_opcode_info(uint8_t opcode);
/** Spec name for any opcode ("UNKNOWN 0x%02x" style names are not returned: NULL). */
const char *roce_opcode_name(uint8_t opcode);
/** Length of one extension header kind (enum roce_hdr single bit). */
unsigned roce_hdr_len(unsigned hdr_bit);

/* ------------------------------------------------------------------------ */
/* FETH fields (IBA annex A19): placement type and selectivity level.         */

#define ROCE_FETH_PLT_MASK  0x0Fu
#define ROCE_FETH_SEL_SHIFT 4
#define ROCE_FETH_SEL_MASK  0x30u
/** Placement type bits: make the data globally visible, and/or persistent. */
#define ROCE_FETH_PLT_GLOBAL	 0x1u
#define ROCE_FETH_PLT_PERSISTENT 0x2u
/** Selectivity: the RETH range of the region, or the whole region of the R_Key. */
#define ROCE_FETH_SEL_RANGE  0u
#define ROCE_FETH_SEL_REGION 1u
#define ROCE_FETH(plt, sel)                                                                        \
	((((uint32_t)(sel) << ROCE_FETH_SEL_SHIFT) & ROCE_FETH_SEL_MASK) |                         \
	 ((uint32_t)(plt)&ROCE_FETH_PLT_MASK))
#define ROCE_FETH_PLT(bits) ((bits)&ROCE_FETH_PLT_MASK)
#define ROCE_FETH_SEL(bits) (((bits)&ROCE_FETH_SEL_MASK) >> ROCE_FETH_SEL_SHIFT)

/* ------------------------------------------------------------------------ */
/* AETH syndrome (IBA 9.7.5.1.2, table 42).                                  */

enum roce_aeth_type {
	ROCE_AETH_ACK = 0x0,
	ROCE_AETH_RNR_NAK = 0x1,
	ROCE_AETH_NAK = 0x3,
};
#define ROCE_AETH_TYPE(syn)		(((syn) >> 5) & 0x3)
#define ROCE_AETH_VALUE(syn)		((syn)&0x1F)
#define ROCE_AETH_SYNDROME(type, value) ((uint8_t)(((type) << 5) | ((value)&0x1F)))
/** Credit count value meaning "invalid / no credits advertised" (9.7.7.2.5). */
#define ROCE_AETH_CREDITS_INVALID 0x1F

enum roce_nak_code {
	ROCE_NAK_PSN_SEQ_ERR = 0,
	ROCE_NAK_INVALID_REQUEST = 1,
	ROCE_NAK_REMOTE_ACCESS_ERR = 2,
	ROCE_NAK_REMOTE_OP_ERR = 3,
	ROCE_NAK_INVALID_RD_REQUEST = 4,
};

/* ------------------------------------------------------------------------ */
/* 24-bit PSN arithmetic (IBA 9.7.1: sequence numbers are modulo 2^24).       */

#define ROCE_PSN_MASK 0xFFFFFFu
#define ROCE_PSN_HALF 0x800000u

static inline uint32_t roce_psn_add(uint32_t psn, uint32_t n)
{
	return (psn + n) & ROCE_PSN_MASK;
}

/** Signed distance b - a in the 24-bit space, in (-2^23, 2^23]. */
static inline int32_t roce_psn_diff(uint32_t b, uint32_t a)
{
	return (int32_t)(((b - a) & ROCE_PSN_MASK) << 8) >> 8;
}

/** Compare: <0 if a is before b, 0 equal, >0 after (half-window rule). */
static inline int roce_psn_cmp(uint32_t a, uint32_t b)
{
	int32_t d = roce_psn_diff(a, b);
	return (d > 0) - (d < 0);
}

/* ------------------------------------------------------------------------ */
/* The packet descriptor: every header's offset and field. The parser fills  */
/* it; the builder reads it. Multi-byte fields are in host byte order.        */

enum roce_parse_status {
	ROCE_PARSE_OK = 0,
	ROCE_PARSE_TRUNCATED,	   /**< frame ends inside a header or ICRC */
	ROCE_PARSE_NOT_IP,	   /**< ethertype is neither IPv4 nor IPv6 */
	ROCE_PARSE_BAD_IP_VERSION, /**< version nibble does not match ethertype */
	ROCE_PARSE_BAD_IP_LENGTH,  /**< IP total/payload length inconsistent with the frame */
	ROCE_PARSE_BAD_IP_CHECKSUM,
	ROCE_PARSE_IP_OPTIONS,	/**< IPv4 IHL != 5 or IPv6 next header != UDP */
	ROCE_PARSE_IP_FRAGMENT, /**< IPv4 MF set or fragment offset != 0 */
	ROCE_PARSE_NOT_UDP,
	ROCE_PARSE_NOT_ROCE_PORT, /**< UDP destination port != 4791 */
	ROCE_PARSE_BAD_UDP_LENGTH,
	ROCE_PARSE_BAD_TVER, /**< BTH transport version != 0 */
	ROCE_PARSE_UNKNOWN_OPCODE,
	ROCE_PARSE_BAD_LENGTH, /**< payload/pad inconsistent with the opcode */
	ROCE_PARSE_BAD_ICRC,
	ROCE_PARSE_STATUS_COUNT,
};

/** Short stable name of a parse status ("truncated", "bad_icrc", ...): counter names. */
const char *roce_parse_status_name(enum roce_parse_status s);

/** Network path of a packet: what the L2/L3/L4 headers say. */
struct roce_path {
	uint8_t dst_mac[6];
	uint8_t src_mac[6];
	bool has_vlan;
	uint16_t vlan_tci;  /**< PCP:3 DEI:1 VID:12 */
	uint8_t ip_version; /**< 4 or 6 */
	/** Addresses as GIDs: IPv4 as ::ffff:a.b.c.d (IPv4-mapped). */
	uint8_t src_gid[16];
	uint8_t dst_gid[16];
	uint8_t tclass;	     /**< IPv4 TOS or IPv6 traffic class (DSCP:6 ECN:2) */
	uint8_t ttl;	     /**< IPv4 TTL or IPv6 hop limit */
	uint32_t flow_label; /**< IPv6 only */
	uint16_t ip_id;	     /**< IPv4 only */
	bool dont_fragment;  /**< IPv4 DF */
	uint16_t udp_sport;
	uint16_t udp_dport; /**< 4791 when built; parsed value kept */
	uint16_t udp_csum;  /**< as on the wire; the builder writes it as given (0 = none) */
};

struct roce_pkt {
	struct roce_path path;

	/* offsets into the frame, bytes from its start */
	uint16_t l3_off, l4_off, bth_off, ext_off, payload_off;
	uint32_t frame_len;   /**< bytes up to and including the ICRC (any Ethernet pad excluded) */
	uint32_t payload_len; /**< payload bytes without pad */

	/* BTH */
	uint8_t opcode;
	const struct roce_opcode_info *op;
	bool se, mig, fecn, becn, ackreq;
	uint8_t pad; /**< PadCnt: 0..3 bytes appended to payload */
	uint8_t tver;
	uint16_t pkey;
	uint8_t resv8a_low; /**< the 6 reserved bits after FECN/BECN, kept for exact rebuild */
	uint8_t resv7;	    /**< reserved bits after AckReq, kept for exact rebuild */
	uint32_t dqpn;
	uint32_t psn;

	/* extension headers; valid when (op->hdrs & ROCE_HDR_x) */
	struct {
		uint64_t va;
		uint32_t rkey;
		uint32_t dma_len;
	} reth;
	struct {
		uint8_t syndrome;
		uint32_t msn;
	} aeth;
	struct {
		uint64_t va;
		uint32_t rkey;
		uint64_t swap_add;
		uint64_t compare;
	} atomic;
	uint64_t atomic_orig;
	uint32_t imm; /**< immediate data as on the wire (big-endian value in host order) */
	uint32_t ieth_rkey;
	struct {
		uint32_t qkey;
		uint32_t src_qp;
	} deth;
	uint32_t feth;	   /**< FETH as on the wire (ROCE_FETH_PLT/SEL read it) */
	uint32_t xrc_srqn; /**< XRCETH: the XRC SRQ number (24 bits) */

	uint32_t icrc;	   /**< as carried in the frame (parser) */
	bool icrc_checked; /**< the parser verified it */
};

/** Parser flags. */
enum roce_parse_flag {
	ROCE_PARSE_VERIFY_ICRC = 1u << 0,
};

/**
 * Parse one Ethernet frame. Never reads outside [frame, frame+len).
 * Trailing bytes after the IP datagram (Ethernet minimum-size padding) are
 * ignored. On any status other than ROCE_PARSE_OK the descriptor content is
 * partial (fields up to the failing header are valid).
 */
enum roce_parse_status roce_parse(const uint8_t *frame, uint32_t len, unsigned flags,
				  struct roce_pkt *pkt);

/**
 * Parse starting at an IP header (for captures with DLT_RAW / Linux cooked
 * headers handled by the caller). `ip_version` 4 or 6. path MACs are zero.
 */
enum roce_parse_status roce_parse_ip(const uint8_t *ip, uint32_t len, unsigned flags,
				     struct roce_pkt *pkt);

/**
 * Bytes of headers the builder writes before the payload for this
 * descriptor (Ethernet [+VLAN] + IP + UDP + BTH + extension headers).
 */
uint32_t roce_header_len(const struct roce_pkt *pkt);

/**
 * Total frame length for a payload of pkt->payload_len bytes:
 * headers + payload + pad + ICRC. The pad count is derived from
 * payload_len (to a multiple of 4), not from pkt->pad.
 */
uint32_t roce_frame_len(const struct roce_pkt *pkt);

/**
 * Write every header for `pkt` into buf (room bytes). The payload
 * (pkt->payload_len bytes) must then be placed at buf + roce_header_len();
 * pad bytes (zero) and the ICRC are written by roce_finish().
 * Derives and writes: PadCnt, IP lengths and IPv4 checksum, UDP length.
 * Always writes IPv4 DF set and UDP destination port 4791 (path.dont_fragment
 * and path.udp_dport are only reported by the parser). Writes as given:
 * udp_csum (0 = none), tver, resv8a_low, resv7, ip_id. A CNP must have
 * payload_len 16 (its reserved bytes). The DETH and XRCETH reserved bytes go out 0.
 * Returns the header length, or a negative errno (-ENOSPC, -EINVAL for an
 * unknown opcode or an inconsistent descriptor: 24-bit fields out of range,
 * payload on an opcode without one, IPv4 with non-IPv4-mapped GIDs, ...).
 */
int roce_build_headers(uint8_t *buf, uint32_t room, const struct roce_pkt *pkt);
/**
 * roce_build_headers(), and *crc = roce_icrc_partial() of the headers it
 * wrote, computed before they are stored into buf: buf is only written, never
 * read (see roce_build.c). Continue crc over the payload and pad as
 * roce_icrc_partial() says. Returns as roce_build_headers(); -EINVAL for a
 * NULL crc.
 */
int roce_build_headers_icrc(uint8_t *buf, uint32_t room, const struct roce_pkt *pkt, uint32_t *crc);

/**
 * Zero the pad bytes and compute and store the ICRC of a frame of
 * `frame_len` bytes (as returned by roce_frame_len) built by roce_build_headers.
 */
int roce_finish(uint8_t *frame, uint32_t frame_len, const struct roce_pkt *pkt);

/**
 * UDP checksum (RFC 768, with the IPv4 or IPv6 pseudo-header) of a finished
 * frame whose IP header starts at l3_off, as it must be written into the UDP
 * header (0 is sent as 0xFFFF). RoCEv2 senders normally send 0 (see
 * roce_build_headers), but IPv6 forbids a zero UDP checksum (RFC 8200 8.1)
 * and Wireshark flags one as an error. The ICRC masks this field, so it can be
 * filled in after roce_finish() without touching the ICRC (roce_fill_udp_checksum,
 * roce_mbuf_fill_udp_checksum). Returns 0 if the frame is too short.
 */
uint16_t roce_udp_checksum(const uint8_t *frame, uint32_t l3_off, uint32_t frame_len);
/**
 * Compute roce_udp_checksum() for a frame built from pkt (after roce_finish())
 * and store it in the UDP header; the ICRC stays valid. Use it for IPv6.
 * 0 or -EINVAL (frame_len != roce_frame_len(pkt)).
 */
int roce_fill_udp_checksum(uint8_t *frame, uint32_t frame_len, const struct roce_pkt *pkt);

/* ------------------------------------------------------------------------ */
/* ICRC (RoCEv2 annex A17.3.3).                                               */

/**
 * ICRC of a complete frame whose IP header starts at l3_off; frame_len
 * includes the 4 ICRC bytes. Returns the value as it must appear on the wire
 * when stored with roce_icrc_store(): the IEEE CRC-32 value, which the wire
 * carries least significant byte first (like the Ethernet FCS; rxe and scapy
 * agree). Returns 0 for a frame too short to hold IP/UDP/BTH headers.
 */
uint32_t roce_icrc_compute(const uint8_t *frame, uint32_t l3_off, uint32_t frame_len);
/**
 * The ICRC's CRC over the frame from the IP header at l3_off up to (not
 * including) byte `end`, with the variant fields masked; at least the IP,
 * UDP and BTH headers (else 0). Continue it with roce_crc32() or
 * roce_crc32_copy() over the bytes that follow, up to the ICRC: the result is
 * roce_icrc_compute(). roce_icrc_compute(f, l3, len) is
 * roce_icrc_partial(f, l3, len - ROCE_ICRC_LEN). Building a frame while
 * placing its payload, for example:
 *     crc = roce_icrc_partial(frame, l3_off, hdr_len);
 *     crc = roce_crc32_copy(crc, frame + hdr_len, payload, payload_len);
 *     memset(frame + hdr_len + payload_len, 0, pad);
 *     crc = roce_crc32(crc, frame + hdr_len + payload_len, pad);
 *     roce_icrc_store(frame, frame_len, crc);
 */
uint32_t roce_icrc_partial(const uint8_t *frame, uint32_t l3_off, uint32_t end);
/** Store/load the ICRC in the last 4 bytes of a frame in wire order. */
void roce_icrc_store(uint8_t *frame, uint32_t frame_len, uint32_t icrc);
uint32_t roce_icrc_load(const uint8_t *frame, uint32_t frame_len);
/**
 * Name of the CRC-32 implementation in use: "vpclmul-avx2", "pclmul-4x",
 * "dpdk-net-crc-sse42" or "table".
 */
const char *roce_icrc_impl_name(void);
/**
 * Plain bytewise table-driven CRC-32 (IEEE, reflected), the benchmark baseline.
 * crc is the CRC of the data before (0 to start); the result continues it, so
 * roce_crc32_table(roce_crc32_table(0, a, n), b, m) is the CRC of a|b.
 */
uint32_t roce_crc32_table(uint32_t crc, const void *data, size_t len);
/**
 * The same CRC-32, as fast as this CPU runs it (no EAL needed): VPCLMULQDQ
 * folding over eight 128-bit lanes when the CPU has VPCLMULQDQ and AVX2,
 * else PCLMULQDQ folding over four when it has PCLMULQDQ and SSE4.1, else
 * the table. Any length and alignment; seeded like roce_crc32_table. Not
 * affected by roce_icrc_set_impl().
 */
uint32_t roce_crc32(uint32_t crc, const void *data, size_t len);
/**
 * Copy len bytes from src to dst (like memcpy: no overlap) and return the
 * CRC-32 of them continuing crc, as roce_crc32(crc, src, len). Below 1024
 * bytes in one pass over src: each block is stored to dst from the register
 * it was loaded into to be folded. From 1024 bytes, a string move (whole
 * lines written without being read first: dst is often a buffer another
 * core has just read), then the CRC over src, from the cache the move
 * filled. For building frames: roce_crc32_copy(crc_so_far, frame + off,
 * payload, n) places the payload and extends the CRC over it.
 */
uint32_t roce_crc32_copy(uint32_t crc, void *dst, const void *src, size_t len);

/** CRC-32 implementations the ICRC can use (see roce_icrc.c). */
enum roce_icrc_impl {
	ROCE_ICRC_IMPL_AUTO =
	    0,		      /**< VPCLMUL, else PCLMUL (by CPU), else DPDK if usable, else table */
	ROCE_ICRC_IMPL_TABLE, /**< always the byte-wise table */
	ROCE_ICRC_IMPL_DPDK,  /**< rte_net_crc (SSE4.2/PCLMULQDQ); needs the EAL's SIMD limit >= 128
			       */
	ROCE_ICRC_IMPL_PCLMUL,	/**< our PCLMULQDQ folding, 4 x 128 bits ("pclmul-4x"); CPU only */
	ROCE_ICRC_IMPL_VPCLMUL, /**< our VPCLMULQDQ/AVX2 folding, 8 x 128 bits ("vpclmul-avx2") */
};
/**
 * Choose the CRC-32 behind roce_icrc_compute() and roce_icrc_partial()
 * (process-wide; for benchmarks and tests). 0; -ENOTSUP if that
 * implementation cannot run here (DPDK: no PCLMULQDQ or EAL SIMD limit;
 * PCLMUL, VPCLMUL: the CPU lacks the instructions); -EINVAL.
 */
int roce_icrc_set_impl(enum roce_icrc_impl impl);

/* ------------------------------------------------------------------------ */
/* GID helpers.                                                               */

/** true if gid is ::ffff:a.b.c.d */
bool roce_gid_is_v4mapped(const uint8_t gid[16]);
/** Fill an IPv4-mapped GID from an IPv4 address in network order. */
void roce_gid_from_ipv4(uint8_t gid[16], uint32_t ipv4_be);
/** IPv4 address (network order) of an IPv4-mapped GID. */
uint32_t roce_gid_to_ipv4(const uint8_t gid[16]);
/** Format a GID as text: dotted IPv4 for mapped GIDs, else IPv6. buf >= 46 bytes. */
const char *roce_gid_str(const uint8_t gid[16], char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* ROCEMU_WIRE_H */
