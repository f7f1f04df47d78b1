/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Conformance scenarios: a rocemu engine on one end of an in-process ring
 * pair, a scripted raw peer on the other. A scenario is a table of steps
 * (send this frame, expect that frame / completion / counter / memory),
 * each scenario naming the rule of the InfiniBand Architecture
 * Specification vol. 1 (IBA) or the RoCEv2 annex (A17) it checks.
 */
#ifndef CF_H
#define CF_H

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "../../emulator/wire/roce_wire.h"

/* The registered region the peer targets: REGION_LEN bytes at IO address
 * REGION_IOVA, with canary bytes on both sides and PROT_NONE guard pages
 * beyond those (see cf_mem_setup). */
#define REGION_LEN  8192u
#define REGION_IOVA 0x7e5700000000ull
#define CANARY_BYTE 0xC5
#define PEER_QPN    0x00ABCDu
#define LOCAL_LEN   65536u

enum step_kind {
	T_END = 0,
	T_TX,	     /* the peer sends a frame */
	T_RX,	     /* rocemu must send a frame (the next one captured) */
	T_NONE,	     /* rocemu sends nothing for a while */
	T_RECV,	     /* post `n` receive WQEs of `len` bytes on rocemu's QP */
	T_POST,	     /* rocemu's QP posts a send WR */
	T_WC,	     /* a completion must arrive */
	T_NOWC,	     /* no completion on either CQ */
	T_CTR,	     /* counter grew by exactly `delta` since the scenario started */
	T_MEM_SAME,  /* region and canaries unchanged since the scenario started */
	T_MEM_EQ,    /* region bytes [off, off+len) equal `fill` */
	T_MEM_SET,   /* the host changes region bytes [off, off+len) to `fill` */
	T_MEM_U64,   /* 8 region bytes at off hold `swap` (host order) */
	T_STATE,     /* rocemu's QP is in state `state` */
	T_WAIT,	     /* let `ms` milliseconds pass, driving progress */
	T_MARK,	     /* remember the time */
	T_SINCE_GE,  /* the last captured frame came >= `ms` after the mark */
	T_DEREG,     /* deregister the region (its rkey becomes stale) */
	T_MEM_ORIG,  /* region bytes [off, off+len) as at the scenario start */
	T_LOCAL_EQ,  /* rocemu's local (requester) buffer bytes [off, off+len) equal `fill` */
	T_KEY_VALID, /* the key of `key` (K_GOOD or K_LOCAL) still translates for its owner */
	T_DISCARD,   /* forget every frame rocemu sent so far (after `ms` of progress) */
	T_UNMAP,     /* the application unmaps the region (and its canaries), still registered */
	T_LOCAL_U64, /* 8 local buffer bytes at off hold `swap` (host order) */
	T_PROBES,    /* up to two stall probes (resends of op/psn with AckReq) may be there */
	T_BIND,	     /* rocemu's QP (dqp D_OTHER_QP: its other QP) binds window `key` to the
		      * region's [off, off+len) (len 0: to its end) with rights mw_access */
};

/* Which rkey a crafted request carries. */
enum key_mode {
	K_GOOD = 0,
	K_GUESS,
	K_STALE,
	K_OTHER_PD,
	K_RO,
	K_ABS,
	K_LOCAL, /* rocemu's local buffer (its receive buffers), LOCAL_WRITE only */
	K_MW1,	 /* a type 1 memory window on the region's PD (its key now) */
	K_MW2,	 /* a type 2 memory window on the region's PD (its key now) */
};
/* Which QPN it is sent to. */
enum dqp_mode { D_QP = 0, D_UNKNOWN, D_GSI, D_OTHER_QP };
/* Which XRC SRQ an XRC request's XRCETH names (cfg type IBV_QPT_XRC_RECV: rocemu's QP
 * is an XRC target of a domain with one XRC SRQ; a second domain has another). */
enum xsrq_mode { X_SRQ = 0, X_OTHER_DOMAIN, X_UNKNOWN };
/* How it is damaged after being built. */
enum mangle {
	M_NONE = 0,
	M_ICRC,		/* one ICRC bit flipped */
	M_TVER,		/* BTH transport version 1 (ICRC recomputed) */
	M_TRUNC,	/* frame cut in the middle of the extension headers */
	M_PKEY,		/* P_Key 0x1234 (ICRC recomputed) */
	M_PKEY_LIMITED, /* P_Key 0x7FFF: limited member of the default partition */
	M_SRC,		/* from another IP address of the subnet */
	M_PAYLOAD,	/* one payload bit flipped (ICRC now wrong) */
	M_UDP_LEN,	/* UDP length larger than the datagram */
	M_IP_CSUM,	/* IPv4 header checksum wrong */
	M_PAD,		/* PadCnt 3 on a frame without payload (ICRC recomputed) */
	M_OPCODE,	/* BTH opcode rewritten to 0x15, reserved (ICRC recomputed) */
	M_ECN_CE,	/* IP ECN field = CE (11) */
	M_SPORT,	/* UDP source port 0x1234, outside the RoCE range rocemu uses */
};

/* Check bits for T_RX and T_WC. */
enum chk {
	C_PSN = 1u << 0,
	C_LEN = 1u << 1,    /* payload length */
	C_SYN = 1u << 2,    /* AETH type (and value unless ACK) */
	C_ORIG = 1u << 3,   /* atomic ack original value == swap */
	C_DATA = 1u << 4,   /* payload == region bytes at off */
	C_ACKREQ = 1u << 5, /* AckReq bit == ackreq */
	C_STATUS = 1u << 6,
	C_WCOP = 1u << 7,
	C_BLEN = 1u << 8,
	C_FILL = 1u << 9, /* payload bytes all == fill */
	C_NOACKREQ = 1u << 10,
	C_NAKANY = 1u << 11, /* any NAK code (with C_SYN and syn_type NAK) */
	C_MSN = 1u << 12,    /* AETH MSN == imm */
	C_SKIP = 1u << 13,   /* T_RX: skip frames of other opcodes/syndromes first */
	C_FETH = 1u << 14,   /* FETH == feth */
	C_TCLASS = 1u << 15, /* T_RX: IP traffic class byte (DSCP:6 ECN:2) == tclass */
	C_INV = 1u << 16,    /* T_WC: IBV_WC_WITH_INV with invalidated_rkey == key's rkey */
};

struct step {
	enum step_kind k;
	unsigned chk;
	uint8_t op;  /* BTH opcode (T_TX, T_RX) */
	int32_t psn; /* offset from the base PSN */
	bool spsn;   /* base = rocemu's send PSN (else its expected PSN) */
	bool ackreq, se;
	bool fence;   /* T_POST: IBV_SEND_FENCE */
	uint32_t len; /* payload length / WR length / WQE length */
	uint8_t fill; /* payload byte */
	int64_t off;  /* RETH/AtomicETH va = REGION_IOVA + off */
	bool va_abs;  /* va = va_value instead */
	uint64_t va_value;
	bool dma_set; /* RETH DMA length = dma_len (else = len) */
	uint32_t dma_len;
	enum key_mode key;
	uint32_t key_value; /* K_ABS */
	uint64_t swap, cmp;
	uint32_t imm;
	uint32_t feth; /* FLUSH: FETH (T_TX, T_RX); T_POST: its placement type and selectivity */
	uint32_t qkey;
	uint8_t tclass; /* T_RX with C_TCLASS */
	enum dqp_mode dqp;
	enum xsrq_mode xsrq;
	enum mangle mangle;
	uint8_t syn_type; /* ROCE_AETH_* */
	uint8_t syn_val;
	unsigned n;   /* T_RECV count */
	bool recv_cq; /* T_WC: the receive CQ */
	enum ibv_wc_status status;
	enum ibv_wc_opcode wc_op;
	uint32_t byte_len;
	enum ibv_wr_opcode wr;
	enum ibv_qp_state state;
	unsigned mw_access; /* T_BIND: ibv_mw_bind_info.mw_access_flags */
	const char *ctr;
	int64_t delta;
	unsigned ms;
};

struct qp_cfg {
	enum ibv_qp_type type; /* 0 = RC; XRC_RECV: a target QP, its SRQ takes T_RECV */
	enum ibv_mtu mtu;      /* 0 = 1024 */
	uint32_t epsn, spsn;   /* rocemu's expected and first send PSN */
	bool psn_set;	       /* use epsn/spsn as given (else defaults) */
	unsigned qp_access;    /* 0 = remote read|write|atomic */
	bool qp_access_set;
	unsigned mr_access; /* 0 = local write|remote read|write|atomic */
	uint8_t timeout;    /* 0 = 14 */
	uint8_t retry_cnt;  /* with retry_set */
	uint8_t rnr_retry;
	bool retry_set;
	uint8_t min_rnr_timer;	   /* 0 = 1 */
	uint8_t rd_atomic;	   /* max_dest_rd_atomic, 0 = 16 */
	uint32_t qkey;		   /* UD */
	enum ibv_qp_state stop_at; /* 0 = RTS; IBV_QPS_INIT or IBV_QPS_RTR to stop there */
};

struct scenario {
	const char *name;
	const char *group;
	const char *rule;  /* IBA vol. 1 section / compliance statement, or A17 */
	const char *what;  /* one line: what rocemu must do */
	const char *xfail; /* NULL, or why rocemu breaks the rule (known bug) */
	struct qp_cfg cfg;
	const struct step *steps;
};

extern const struct scenario cf_scenarios[];
extern const unsigned cf_n_scenarios;

#endif
