/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The conformance scenarios, one per rule. Each is a table of steps played
 * by cf_runner.c. PSNs are offsets: from rocemu's expected PSN for requests
 * the peer sends (and rocemu's answers to them), from rocemu's first send
 * PSN (`.spsn = true`) for rocemu's own requests and the peer's answers.
 *
 * Rules cite the InfiniBand Architecture Specification vol. 1 rel. 1.4
 * ("IBA") and its RoCEv2 annex ("A17"). The specification text was not
 * available here: subsection numbers are those rocemu's own sources and
 * docs already cite (wire codec, transport); elsewhere only the chapter or
 * section and the topic are named. C9-110 (responders answer duplicates in
 * PSN order) was confirmed from a public quote of the specification; C9-89,
 * C9-91 and C9-40 are as cited in emulator/transport/rc_responder.c.
 */
#include "cf.h"

/* --- step builders ------------------------------------------------------- */
#define END                                                                                        \
	{                                                                                          \
		.k = T_END                                                                         \
	}
#define TX(...)                                                                                    \
	{                                                                                          \
		.k = T_TX, __VA_ARGS__                                                             \
	}
#define RX(...)                                                                                    \
	{                                                                                          \
		.k = T_RX, __VA_ARGS__                                                             \
	}
#define ACK(p) RX(.op = ROCE_OP_ACK, .chk = C_PSN | C_SYN, .psn = (p), .syn_type = ROCE_AETH_ACK)
#define NAK(p, code)                                                                               \
	RX(.op = ROCE_OP_ACK, .chk = C_PSN | C_SYN, .psn = (p), .syn_type = ROCE_AETH_NAK,         \
	   .syn_val = (code))
#define NAK_ANY(p)                                                                                 \
	RX(.op = ROCE_OP_ACK, .chk = C_PSN | C_SYN | C_NAKANY, .psn = (p),                         \
	   .syn_type = ROCE_AETH_NAK)
#define RNR_NAK(p, t)                                                                              \
	RX(.op = ROCE_OP_ACK, .chk = C_PSN | C_SYN, .psn = (p), .syn_type = ROCE_AETH_RNR_NAK,     \
	   .syn_val = (t))
#define NONE()                                                                                     \
	{                                                                                          \
		.k = T_NONE                                                                        \
	}
#define RECV(cnt, l)                                                                               \
	{                                                                                          \
		.k = T_RECV, .n = (cnt), .len = (l)                                                \
	}
#define WC_RECV(st, bl)                                                                            \
	{                                                                                          \
		.k = T_WC, .recv_cq = true, .chk = C_STATUS | C_BLEN, .status = (st),              \
		.byte_len = (bl)                                                                   \
	}
#define WC_RECV_ST(st)                                                                             \
	{                                                                                          \
		.k = T_WC, .recv_cq = true, .chk = C_STATUS, .status = (st)                        \
	}
#define WC_SEND(st)                                                                                \
	{                                                                                          \
		.k = T_WC, .chk = C_STATUS, .status = (st)                                         \
	}
#define NOWC()                                                                                     \
	{                                                                                          \
		.k = T_NOWC                                                                        \
	}
#define CTR(name, d)                                                                               \
	{                                                                                          \
		.k = T_CTR, .ctr = (name), .delta = (d)                                            \
	}
#define CTR_GE(name, d)                                                                            \
	{                                                                                          \
		.k = T_CTR, .ctr = (name), .delta = (d), .n = 1                                    \
	}
#define MEM_SAME()                                                                                 \
	{                                                                                          \
		.k = T_MEM_SAME                                                                    \
	}
#define MEM_EQ(o, l, b)                                                                            \
	{                                                                                          \
		.k = T_MEM_EQ, .off = (o), .len = (l), .fill = (b)                                 \
	}
#define MEM_ORIG(o, l)                                                                             \
	{                                                                                          \
		.k = T_MEM_ORIG, .off = (o), .len = (l)                                            \
	}
#define MEM_SET(o, l, b)                                                                           \
	{                                                                                          \
		.k = T_MEM_SET, .off = (o), .len = (l), .fill = (b)                                \
	}
#define MEM_U64(o, v)                                                                              \
	{                                                                                          \
		.k = T_MEM_U64, .off = (o), .swap = (v)                                            \
	}
#define STATE(s)                                                                                   \
	{                                                                                          \
		.k = T_STATE, .state = (s)                                                         \
	}
#define WAIT(m)                                                                                    \
	{                                                                                          \
		.k = T_WAIT, .ms = (m)                                                             \
	}
#define MARK()                                                                                     \
	{                                                                                          \
		.k = T_MARK                                                                        \
	}
#define SINCE_GE(m)                                                                                \
	{                                                                                          \
		.k = T_SINCE_GE, .ms = (m)                                                         \
	}
#define POST(...)                                                                                  \
	{                                                                                          \
		.k = T_POST, __VA_ARGS__                                                           \
	}
/* the peer answers rocemu's request at send-PSN offset p */
#define PEER_ACK(p)                                                                                \
	TX(.op = ROCE_OP_ACK, .spsn = true, .psn = (p), .syn_type = ROCE_AETH_ACK, .syn_val = 31)
#define PEER_NAK(p, code)                                                                          \
	TX(.op = ROCE_OP_ACK, .spsn = true, .psn = (p), .syn_type = ROCE_AETH_NAK,                 \
	   .syn_val = (code))
#define PEER_RNR(p, t)                                                                             \
	TX(.op = ROCE_OP_ACK, .spsn = true, .psn = (p), .syn_type = ROCE_AETH_RNR_NAK,             \
	   .syn_val = (t))
/* rocemu's request at send-PSN offset p */
#define REQ(o, p)	 RX(.op = (o), .chk = C_PSN, .spsn = true, .psn = (p))
#define REQ_LEN(o, p, l) RX(.op = (o), .chk = C_PSN | C_LEN, .spsn = true, .psn = (p), .len = (l))

#define UD_SEND_ONLY (ROCE_TRANSPORT_UD | ROCE_OP_SEND_ONLY)
#define UC(op)	     (ROCE_TRANSPORT_UC | (op))
#define MTU	     1024

#define SC(n, g, r, w, ...)                                                                        \
	{                                                                                          \
		.name = (n), .group = (g), .rule = (r), .what = (w), __VA_ARGS__                   \
	}
#define STEPS(...)                                                                                 \
	.steps = (const struct step[])                                                             \
	{                                                                                          \
		__VA_ARGS__, END                                                                   \
	}

/* The table is data laid out for reading: clang-format keeps its hands off. */
/* clang-format off */
const struct scenario cf_scenarios[] = {
    /* ------------------------------------------------------------ psn */
    SC("psn_gap_nak_once_then_silence", "psn", "IBA 9.7 (PSN check: one PSN-sequence NAK per gap)",
       "a PSN ahead of the expected one draws one NAK (PSN sequence error, PSN = expected); "
       "later packets of the gap are dropped silently",
       STEPS(RECV(2, 256), TX(.op = ROCE_OP_SEND_ONLY, .psn = 2, .len = 16, .ackreq = true),
	     NAK(0, ROCE_NAK_PSN_SEQ_ERR),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 3, .len = 16, .ackreq = true), NONE(),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 4, .len = 16, .ackreq = true), NONE(), NOWC(),
	     CTR("drop_psn_out_of_seq", 3), CTR("tx_nak_psn_seq", 1))),
    SC("psn_resync_after_nak", "psn", "IBA 9.7 (PSN check: one PSN-sequence NAK per gap)",
       "after a sequence NAK the expected PSN is accepted and delivered once",
       STEPS(RECV(1, 256), TX(.op = ROCE_OP_SEND_ONLY, .psn = 1, .len = 16, .ackreq = true),
	     NAK(0, ROCE_NAK_PSN_SEQ_ERR),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 16, .ackreq = true, .fill = 0x31), ACK(0),
	     WC_RECV(IBV_WC_SUCCESS, 16), NOWC(), STATE(IBV_QPS_RTS))),
    SC("psn_wrap_responder", "psn", "IBA 9.7.1 (PSNs modulo 2^24)",
       "PSNs are modulo 2^24: a 3-packet SEND from PSN 0xFFFFFE is accepted across the wrap",
       .cfg = {.psn_set = true, .epsn = 0xFFFFFE, .spsn = 0x10},
       STEPS(RECV(1, 4096), TX(.op = ROCE_OP_SEND_FIRST, .psn = 0, .len = MTU),
	     TX(.op = ROCE_OP_SEND_MIDDLE, .psn = 1, .len = MTU),
	     TX(.op = ROCE_OP_SEND_LAST, .psn = 2, .len = 100, .ackreq = true), ACK(2),
	     WC_RECV(IBV_WC_SUCCESS, 2 * MTU + 100))),
    SC("psn_wrap_requester", "psn", "IBA 9.7.1 (PSNs modulo 2^24)",
       "rocemu's own PSNs wrap from 0xFFFFFF to 0 inside a message",
       .cfg = {.psn_set = true, .epsn = 0x10, .spsn = 0xFFFFFF},
       STEPS(POST(.wr = IBV_WR_SEND, .len = 2500, .fill = 0x42),
	     REQ_LEN(ROCE_OP_SEND_FIRST, 0, MTU), REQ_LEN(ROCE_OP_SEND_MIDDLE, 1, MTU),
	     RX(.op = ROCE_OP_SEND_LAST, .chk = C_PSN | C_LEN | C_ACKREQ | C_FILL, .spsn = true,
		.psn = 2, .len = 2500 - 2 * MTU, .fill = 0x42),
	     PEER_ACK(2), WC_SEND(IBV_WC_SUCCESS))),
    SC("psn_nak_seq_go_back_n", "psn", "IBA 9.7 (requester: go-back-N on a PSN-sequence NAK)",
       "a PSN sequence NAK makes the requester resend from the NAKed PSN (earlier ones are "
       "implicitly acknowledged)",
       STEPS(POST(.wr = IBV_WR_SEND, .len = 3000), REQ(ROCE_OP_SEND_FIRST, 0),
	     REQ(ROCE_OP_SEND_MIDDLE, 1), REQ(ROCE_OP_SEND_LAST, 2),
	     PEER_NAK(1, ROCE_NAK_PSN_SEQ_ERR), REQ(ROCE_OP_SEND_MIDDLE, 1),
	     REQ(ROCE_OP_SEND_LAST, 2), PEER_ACK(2), WC_SEND(IBV_WC_SUCCESS),
	     STATE(IBV_QPS_RTS))),

    /* ------------------------------------------------------------ dup */
    SC("dup_send_reacked_not_redelivered", "dup", "IBA 9.7.5.1.1 (duplicate SEND/WRITE), C9-110",
       "a duplicate SEND is acknowledged again and not delivered a second time",
       STEPS(RECV(2, 256), TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 16, .ackreq = true),
	     ACK(0), WC_RECV(IBV_WC_SUCCESS, 16),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 16, .ackreq = true), ACK(0), NOWC(),
	     CTR("dup_requests", 1))),
    SC("dup_write_not_reapplied", "dup", "IBA 9.7.5.1.1 (duplicate SEND/WRITE), C9-110",
       "a duplicate WRITE is acknowledged again and its (changed) payload is not written",
       STEPS(TX(.op = ROCE_OP_WRITE_ONLY, .psn = 0, .off = 0, .len = 64, .fill = 0xAA,
		.ackreq = true),
	     ACK(0), MEM_EQ(0, 64, 0xAA),
	     TX(.op = ROCE_OP_WRITE_ONLY, .psn = 0, .off = 0, .len = 64, .fill = 0xBB,
		.ackreq = true),
	     ACK(0), MEM_EQ(0, 64, 0xAA), MEM_ORIG(64, 64))),
    SC("dup_older_send_after_progress", "dup", "IBA 9.7.5.1.1 (duplicate SEND/WRITE), C9-110",
       "a duplicate of an older PSN (not the last one) is re-acknowledged with the newest PSN, "
       "nothing redelivered",
       STEPS(RECV(3, 256), TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 8),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 1, .len = 8),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 2, .len = 8, .ackreq = true), ACK(2),
	     WC_RECV(IBV_WC_SUCCESS, 8), WC_RECV(IBV_WC_SUCCESS, 8), WC_RECV(IBV_WC_SUCCESS, 8),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 8, .ackreq = true), ACK(2), NOWC())),
    SC("dup_read_reexecuted", "dup", "IBA 9.7 (duplicate RDMA READ), C9-110",
       "a duplicate READ is executed again: the response carries the memory as it is now",
       STEPS(TX(.op = ROCE_OP_READ_REQUEST, .psn = 0, .off = 256, .len = 64),
	     RX(.op = ROCE_OP_READ_RESP_ONLY, .chk = C_PSN | C_LEN | C_DATA, .psn = 0, .len = 64,
		.off = 256),
	     MEM_SET(256, 64, 0x5A), TX(.op = ROCE_OP_READ_REQUEST, .psn = 0, .off = 256, .len = 64),
	     RX(.op = ROCE_OP_READ_RESP_ONLY, .chk = C_PSN | C_LEN | C_FILL, .psn = 0, .len = 64,
		.fill = 0x5A),
	     CTR("dup_requests", 1))),
    SC("dup_read_partial_restart", "dup", "IBA 9.7 (duplicate RDMA READ), C9-110",
       "a duplicate READ for the tail of a 3-packet READ (PSN+1, va+MTU) is answered from that "
       "PSN on",
       STEPS(TX(.op = ROCE_OP_READ_REQUEST, .psn = 0, .off = 0, .len = 3 * MTU),
	     RX(.op = ROCE_OP_READ_RESP_FIRST, .chk = C_PSN | C_DATA, .psn = 0, .off = 0),
	     RX(.op = ROCE_OP_READ_RESP_MIDDLE, .chk = C_PSN | C_DATA, .psn = 1, .off = MTU),
	     RX(.op = ROCE_OP_READ_RESP_LAST, .chk = C_PSN | C_DATA, .psn = 2, .off = 2 * MTU),
	     TX(.op = ROCE_OP_READ_REQUEST, .psn = 1, .off = MTU, .len = 2 * MTU),
	     RX(.op = ROCE_OP_READ_RESP_FIRST, .chk = C_PSN | C_LEN | C_DATA, .psn = 1, .len = MTU,
		.off = MTU),
	     RX(.op = ROCE_OP_READ_RESP_LAST, .chk = C_PSN | C_LEN | C_DATA, .psn = 2, .len = MTU,
		.off = 2 * MTU),
	     NONE())),
    SC("dup_fetch_add_not_reexecuted", "dup", "IBA 9.7.5.1.3 (duplicate atomic)",
       "a duplicate FETCH_ADD returns the saved original value; memory is added to once",
       STEPS(MEM_SET(64, 8, 0), TX(.op = ROCE_OP_FETCH_ADD, .psn = 0, .off = 64, .swap = 5),
	     RX(.op = ROCE_OP_ATOMIC_ACK, .chk = C_PSN | C_ORIG, .psn = 0, .swap = 0),
	     MEM_U64(64, 5), TX(.op = ROCE_OP_FETCH_ADD, .psn = 0, .off = 64, .swap = 5),
	     RX(.op = ROCE_OP_ATOMIC_ACK, .chk = C_PSN | C_ORIG, .psn = 0, .swap = 0),
	     MEM_U64(64, 5), TX(.op = ROCE_OP_FETCH_ADD, .psn = 1, .off = 64, .swap = 5),
	     RX(.op = ROCE_OP_ATOMIC_ACK, .chk = C_PSN | C_ORIG, .psn = 1, .swap = 5),
	     MEM_U64(64, 10))),
    SC("dup_cmp_swap_saved_result", "dup", "IBA 9.7.5.1.3 (duplicate atomic)",
       "a duplicate CMP_SWAP returns the original value of the first execution (0), not the "
       "swapped one",
       STEPS(MEM_SET(128, 8, 0),
	     TX(.op = ROCE_OP_CMP_SWAP, .psn = 0, .off = 128, .cmp = 0, .swap = 9),
	     RX(.op = ROCE_OP_ATOMIC_ACK, .chk = C_PSN | C_ORIG, .psn = 0, .swap = 0),
	     MEM_U64(128, 9), TX(.op = ROCE_OP_CMP_SWAP, .psn = 0, .off = 128, .cmp = 0, .swap = 9),
	     RX(.op = ROCE_OP_ATOMIC_ACK, .chk = C_PSN | C_ORIG, .psn = 0, .swap = 0),
	     MEM_U64(128, 9))),

    /* ------------------------------------------------------------ rnr */
    SC("rnr_nak_without_recv_wqe", "rnr", "IBA 9.7.5.2.8 (RNR NAK)",
       "a SEND with no receive WQE draws an RNR NAK carrying the QP's min_rnr_timer; the retry "
       "after a post succeeds",
       .cfg = {.min_rnr_timer = 14},
       STEPS(TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 16, .ackreq = true),
	     RNR_NAK(0, 14), NOWC(), RECV(1, 64),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 16, .ackreq = true), ACK(0),
	     WC_RECV(IBV_WC_SUCCESS, 16), CTR("tx_rnr_nak", 1), STATE(IBV_QPS_RTS))),
    SC("rnr_write_imm_no_data_placed", "rnr", "IBA 9.7.5.2.8 (RNR NAK)",
       "WRITE with immediate and no receive WQE: RNR NAK and no byte written",
       STEPS(TX(.op = ROCE_OP_WRITE_ONLY_IMM, .psn = 0, .off = 0, .len = 32, .fill = 0xEE,
		.ackreq = true),
	     RNR_NAK(0, 1), MEM_SAME(), NOWC())),
    SC("rnr_requester_waits_timer", "rnr", "IBA 9.7.5.2.8, table 45 (RNR timer)",
       "after an RNR NAK with timer code 20 (10.24 ms) rocemu does not resend earlier",
       STEPS(POST(.wr = IBV_WR_SEND, .len = 16), REQ(ROCE_OP_SEND_ONLY, 0), MARK(),
	     PEER_RNR(0, 20), REQ(ROCE_OP_SEND_ONLY, 0), SINCE_GE(10), PEER_ACK(0),
	     WC_SEND(IBV_WC_SUCCESS), CTR("rx_rnr_nak", 1))),
    SC("rnr_retry_7_is_infinite", "rnr", "IBA 9.7 (RNR retry count: 7 = infinite)",
       "with rnr_retry = 7 twelve RNR NAKs in a row never fail the WQE",
       .cfg = {.retry_set = true, .retry_cnt = 7, .rnr_retry = 7},
       STEPS(POST(.wr = IBV_WR_SEND, .len = 16), REQ(ROCE_OP_SEND_ONLY, 0), PEER_RNR(0, 1),
	     REQ(ROCE_OP_SEND_ONLY, 0), PEER_RNR(0, 1), REQ(ROCE_OP_SEND_ONLY, 0), PEER_RNR(0, 1),
	     REQ(ROCE_OP_SEND_ONLY, 0), PEER_RNR(0, 1), REQ(ROCE_OP_SEND_ONLY, 0), PEER_RNR(0, 1),
	     REQ(ROCE_OP_SEND_ONLY, 0), PEER_RNR(0, 1), REQ(ROCE_OP_SEND_ONLY, 0), PEER_RNR(0, 1),
	     REQ(ROCE_OP_SEND_ONLY, 0), PEER_RNR(0, 1), REQ(ROCE_OP_SEND_ONLY, 0), PEER_RNR(0, 1),
	     REQ(ROCE_OP_SEND_ONLY, 0), PEER_RNR(0, 1), REQ(ROCE_OP_SEND_ONLY, 0), PEER_RNR(0, 1),
	     REQ(ROCE_OP_SEND_ONLY, 0), PEER_RNR(0, 1), REQ(ROCE_OP_SEND_ONLY, 0), PEER_ACK(0),
	     WC_SEND(IBV_WC_SUCCESS), CTR("rx_rnr_nak", 12))),
    SC("rnr_retry_finite_exhausted", "rnr", "IBA 9.7 (RNR retry count), 9.9 (requester errors)",
       "with rnr_retry = 2 the third RNR NAK completes the WQE with RNR_RETRY_EXC_ERR and the QP "
       "goes to ERR",
       .cfg = {.retry_set = true, .retry_cnt = 7, .rnr_retry = 2},
       STEPS(POST(.wr = IBV_WR_SEND, .len = 16), REQ(ROCE_OP_SEND_ONLY, 0), PEER_RNR(0, 1),
	     REQ(ROCE_OP_SEND_ONLY, 0), PEER_RNR(0, 1), REQ(ROCE_OP_SEND_ONLY, 0), PEER_RNR(0, 1),
	     WC_SEND(IBV_WC_RNR_RETRY_EXC_ERR), NONE(), STATE(IBV_QPS_ERR))),

    /* ------------------------------------------------------------ retry */
    SC("retry_timeout_exhausted", "retry", "IBA 9.7 (transport timer, retry count), 9.9",
       "no answer: retry_cnt = 2 retransmissions on timeout, then RETRY_EXC_ERR and ERR",
       .cfg = {.timeout = 8, .retry_set = true, .retry_cnt = 2, .rnr_retry = 7},
       STEPS(POST(.wr = IBV_WR_SEND, .len = 16), REQ(ROCE_OP_SEND_ONLY, 0),
	     REQ(ROCE_OP_SEND_ONLY, 0), REQ(ROCE_OP_SEND_ONLY, 0),
	     WC_SEND(IBV_WC_RETRY_EXC_ERR), NONE(), STATE(IBV_QPS_ERR))),
    SC("retry_timeout_then_ack", "retry", "IBA 9.7 (transport timer)",
       "a timed-out request is resent with the same PSN; a late ACK completes it and the QP "
       "stays in RTS",
       .cfg = {.timeout = 8, .retry_set = true, .retry_cnt = 7, .rnr_retry = 7},
       STEPS(POST(.wr = IBV_WR_RDMA_WRITE, .len = 16, .off = 0), REQ(ROCE_OP_WRITE_ONLY, 0),
	     REQ(ROCE_OP_WRITE_ONLY, 0), PEER_ACK(0), WC_SEND(IBV_WC_SUCCESS),
	     STATE(IBV_QPS_RTS), CTR_GE("retransmit_timeouts", 1))),
    SC("retry_read_response_restarts", "retry", "IBA 9.7 (transport timer)",
       "READ response lost: the timeout re-requests the READ with the same PSN",
       .cfg = {.timeout = 8, .retry_set = true, .retry_cnt = 7, .rnr_retry = 7},
       STEPS(POST(.wr = IBV_WR_RDMA_READ, .len = 64, .off = 0), REQ(ROCE_OP_READ_REQUEST, 0),
	     REQ(ROCE_OP_READ_REQUEST, 0),
	     TX(.op = ROCE_OP_READ_RESP_ONLY, .spsn = true, .psn = 0, .len = 64, .fill = 0x77,
		.syn_type = ROCE_AETH_ACK, .syn_val = 31),
	     {.k = T_WC, .chk = C_STATUS | C_BLEN, .status = IBV_WC_SUCCESS, .byte_len = 64})),

    /* ------------------------------------------------------------ ack */
    SC("ack_coalesced_on_ackreq", "ack", "IBA 9.7 (ACK coalescing), 9.2 (BTH AckReq)",
       "three SENDs, AckReq only on the last: one ACK with the last PSN acknowledges all three",
       STEPS(RECV(3, 64), TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 8),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 1, .len = 8),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 2, .len = 8, .ackreq = true), ACK(2), NONE(),
	     WC_RECV(IBV_WC_SUCCESS, 8), WC_RECV(IBV_WC_SUCCESS, 8), WC_RECV(IBV_WC_SUCCESS, 8))),
    SC("ack_coalesced_completes_all", "ack", "IBA 9.7 (requester: an ACK covers every earlier PSN)",
       "the requester completes every message up to the PSN of one coalesced ACK",
       STEPS(POST(.wr = IBV_WR_SEND, .len = 16), POST(.wr = IBV_WR_SEND, .len = 16),
	     REQ(ROCE_OP_SEND_ONLY, 0), REQ(ROCE_OP_SEND_ONLY, 1), PEER_ACK(1),
	     WC_SEND(IBV_WC_SUCCESS), WC_SEND(IBV_WC_SUCCESS), STATE(IBV_QPS_RTS))),
    SC("ackreq_on_last_packet", "ack", "IBA 9.2 (BTH AckReq)",
       "rocemu sets AckReq on the last packet of a message",
       STEPS(POST(.wr = IBV_WR_RDMA_WRITE, .len = 2 * MTU + 10, .off = 0),
	     REQ(ROCE_OP_WRITE_FIRST, 0), REQ(ROCE_OP_WRITE_MIDDLE, 1),
	     RX(.op = ROCE_OP_WRITE_LAST, .chk = C_PSN | C_ACKREQ, .spsn = true, .psn = 2),
	     PEER_ACK(2), WC_SEND(IBV_WC_SUCCESS))),
    SC("ack_ignores_unknown_future_psn", "ack", "IBA 9.7 (requester: an ACK covers every earlier PSN)",
       "an ACK for a PSN never sent completes nothing",
       STEPS(POST(.wr = IBV_WR_SEND, .len = 16), REQ(ROCE_OP_SEND_ONLY, 0), PEER_ACK(50), NOWC(),
	     PEER_ACK(0), WC_SEND(IBV_WC_SUCCESS))),

    /* ------------------------------------------------------------ access */
    SC("acc_write_guessed_rkey", "access", "IBA 9.7.4.1.5 (R_Key check), 9.9.3 (responder errors)",
       "WRITE with a guessed R_Key: NAK remote access error, memory unchanged, responder QP to "
       "ERR",
       STEPS(TX(.op = ROCE_OP_WRITE_ONLY, .psn = 0, .off = 0, .len = 64, .key = K_GUESS,
		.fill = 0xEE, .ackreq = true),
	     NAK(0, ROCE_NAK_REMOTE_ACCESS_ERR), MEM_SAME(), STATE(IBV_QPS_ERR),
	     CTR("tx_nak_remote_access", 1))),
    SC("acc_write_stale_rkey", "access", "IBA 9.7.4.1.5 (R_Key check)",
       "WRITE with the R_Key of a deregistered region: NAK remote access error, memory "
       "unchanged",
       STEPS({.k = T_DEREG},
	     TX(.op = ROCE_OP_WRITE_ONLY, .psn = 0, .off = 0, .len = 64, .key = K_STALE,
		.fill = 0xEE, .ackreq = true),
	     NAK(0, ROCE_NAK_REMOTE_ACCESS_ERR), MEM_SAME())),
    SC("acc_write_one_byte_past_end", "access", "IBA 9.7.4.1.5 (R_Key, bounds, access)",
       "WRITE whose last byte is one past the region: NAK remote access error, canary intact",
       STEPS(TX(.op = ROCE_OP_WRITE_ONLY, .psn = 0, .off = REGION_LEN - 63, .len = 64,
		.fill = 0xEE, .ackreq = true),
	     NAK(0, ROCE_NAK_REMOTE_ACCESS_ERR), MEM_SAME())),
    SC("acc_write_one_byte_before_start", "access", "IBA 9.7.4.1.5 (R_Key, bounds, access)",
       "WRITE starting one byte before the region: NAK remote access error, canary intact",
       STEPS(TX(.op = ROCE_OP_WRITE_ONLY, .psn = 0, .off = -1, .len = 64, .fill = 0xEE,
		.ackreq = true),
	     NAK(0, ROCE_NAK_REMOTE_ACCESS_ERR), MEM_SAME())),
    SC("acc_write_other_pd", "access", "IBA 9.7.4.1.5 (R_Key check: protection domain)",
       "WRITE with the R_Key of a region in another PD: NAK remote access error",
       STEPS(TX(.op = ROCE_OP_WRITE_ONLY, .psn = 0, .off = 0, .len = 64, .key = K_OTHER_PD,
		.fill = 0xEE, .ackreq = true),
	     NAK(0, ROCE_NAK_REMOTE_ACCESS_ERR), MEM_SAME())),
    SC("acc_write_region_read_only", "access", "IBA 9.7.4.1.5 (region access rights)",
       "WRITE to a region registered without REMOTE_WRITE: NAK remote access error",
       .cfg = {.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ},
       STEPS(TX(.op = ROCE_OP_WRITE_ONLY, .psn = 0, .off = 0, .len = 64, .fill = 0xEE,
		.ackreq = true),
	     NAK(0, ROCE_NAK_REMOTE_ACCESS_ERR), MEM_SAME())),
    SC("acc_write_qp_lacks_right", "access", "IBA 9.7.4.1.5, 11.2.5 (QP access flags)",
       "WRITE to a QP whose access flags lack REMOTE_WRITE: NAK remote access error",
       .cfg = {.qp_access_set = true, .qp_access = IBV_ACCESS_REMOTE_READ},
       STEPS(TX(.op = ROCE_OP_WRITE_ONLY, .psn = 0, .off = 0, .len = 64, .fill = 0xEE,
		.ackreq = true),
	     NAK(0, ROCE_NAK_REMOTE_ACCESS_ERR), MEM_SAME())),
    SC("acc_read_region_lacks_right", "access", "IBA 9.7.4.1.5 (R_Key, bounds, access)",
       "READ of a region without REMOTE_READ: NAK remote access error, no data returned",
       .cfg = {.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE},
       STEPS(TX(.op = ROCE_OP_READ_REQUEST, .psn = 0, .off = 0, .len = 64),
	     NAK(0, ROCE_NAK_REMOTE_ACCESS_ERR), NONE())),
    SC("acc_read_larger_than_region", "access", "IBA 9.7.4.1.5 (R_Key, bounds, access)",
       "READ of region length + 1 bytes: NAK remote access error, nothing leaks",
       STEPS(TX(.op = ROCE_OP_READ_REQUEST, .psn = 0, .off = 0, .len = REGION_LEN + 1),
	     NAK(0, ROCE_NAK_REMOTE_ACCESS_ERR), NONE())),
    SC("acc_read_one_byte_past_end", "access", "IBA 9.7.4.1.5 (R_Key, bounds, access)",
       "READ ending one byte past the region: NAK remote access error, nothing leaks",
       STEPS(TX(.op = ROCE_OP_READ_REQUEST, .psn = 0, .off = REGION_LEN - 10, .len = 11),
	     NAK(0, ROCE_NAK_REMOTE_ACCESS_ERR), NONE())),
    SC("acc_read_to_region_end_no_leak", "access", "IBA 9.7.4.1.5 (R_Key, bounds, access)",
       "READ of the region's last 100 bytes: the response carries exactly those bytes",
       STEPS(TX(.op = ROCE_OP_READ_REQUEST, .psn = 0, .off = REGION_LEN - 100, .len = 100),
	     RX(.op = ROCE_OP_READ_RESP_ONLY, .chk = C_PSN | C_LEN | C_DATA, .psn = 0, .len = 100,
		.off = REGION_LEN - 100),
	     NONE())),
    SC("acc_read_len_overflows_32bit", "access", "IBA 9.7.4.1.5 (length vs. region)",
       "READ with DMA length 0xFFFFFFFF: NAK, no response data",
       STEPS(TX(.op = ROCE_OP_READ_REQUEST, .psn = 0, .off = 0, .dma_set = true,
		.dma_len = 0xFFFFFFFFu),
	     NAK_ANY(0), NONE())),
    SC("acc_write_va_overflows_64bit", "access", "IBA 9.7.4.1.5 (R_Key, bounds, access)",
       "WRITE at va 2^64 - 64 with 128 bytes (va + len wraps): NAK remote access error",
       STEPS(TX(.op = ROCE_OP_WRITE_ONLY, .psn = 0, .va_abs = true,
		.va_value = 0xFFFFFFFFFFFFFFC0ull, .len = 128, .fill = 0xEE, .ackreq = true),
	     NAK(0, ROCE_NAK_REMOTE_ACCESS_ERR), MEM_SAME())),
    SC("acc_read_va_overflows_64bit", "access", "IBA 9.7.4.1.5 (R_Key, bounds, access)",
       "READ at va 2^64 - 16 of 64 bytes (va + len wraps to 48): NAK remote access error, no "
       "data",
       STEPS(TX(.op = ROCE_OP_READ_REQUEST, .psn = 0, .va_abs = true,
		.va_value = 0xFFFFFFFFFFFFFFF0ull, .len = 64),
	     NAK(0, ROCE_NAK_REMOTE_ACCESS_ERR), NONE())),
    SC("acc_read_stale_rkey", "access", "IBA 9.7.4.1.5 (R_Key check)",
       "READ with the R_Key of a deregistered region: NAK remote access error, no data",
       STEPS({.k = T_DEREG}, TX(.op = ROCE_OP_READ_REQUEST, .psn = 0, .off = 0, .len = 64, .key = K_STALE),
	     NAK(0, ROCE_NAK_REMOTE_ACCESS_ERR), NONE())),
    SC("acc_read_other_pd", "access", "IBA 9.7.4.1.5 (R_Key check: protection domain)",
       "READ with the R_Key of another PD's region: NAK remote access error, no data",
       STEPS(TX(.op = ROCE_OP_READ_REQUEST, .psn = 0, .off = 0, .len = 64, .key = K_OTHER_PD),
	     NAK(0, ROCE_NAK_REMOTE_ACCESS_ERR), NONE())),
    SC("acc_write_len_overflows_32bit", "access", "IBA 9.7.4.1.5 (R_Key, bounds, access)",
       "WRITE FIRST announcing 0xFFFFFFFF bytes: NAK remote access error before any byte lands",
       STEPS(TX(.op = ROCE_OP_WRITE_FIRST, .psn = 0, .off = 0, .len = MTU, .dma_set = true,
		.dma_len = 0xFFFFFFFFu, .fill = 0xEE),
	     NAK(0, ROCE_NAK_REMOTE_ACCESS_ERR), MEM_SAME())),
    SC("acc_atomic_read_only_region", "access", "IBA 9.7.4.1.5 (R_Key, bounds, access)",
       "FETCH_ADD on a region registered REMOTE_READ only: NAK remote access error",
       STEPS(TX(.op = ROCE_OP_FETCH_ADD, .psn = 0, .off = 0, .key = K_RO, .swap = 1),
	     NAK(0, ROCE_NAK_REMOTE_ACCESS_ERR), STATE(IBV_QPS_ERR))),
    SC("acc_atomic_qp_lacks_right", "access", "IBA 9.7.4.1.5, 11.2.5 (QP access flags)",
       "CMP_SWAP on a QP without REMOTE_ATOMIC: NAK remote access error, memory unchanged",
       .cfg = {.qp_access_set = true,
	       .qp_access = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE},
       STEPS(TX(.op = ROCE_OP_CMP_SWAP, .psn = 0, .off = 0, .cmp = 0, .swap = 1),
	     NAK(0, ROCE_NAK_REMOTE_ACCESS_ERR), MEM_SAME())),
    SC("acc_responder_error_flushes_rq", "access", "IBA 9.9.3 (responder errors: QP to ERR)",
       "after an access error the responder QP is in ERR: its receive WQE is flushed and later "
       "requests are dropped",
       STEPS(RECV(1, 64),
	     TX(.op = ROCE_OP_WRITE_ONLY, .psn = 0, .off = 0, .len = 64, .key = K_GUESS,
		.ackreq = true),
	     NAK(0, ROCE_NAK_REMOTE_ACCESS_ERR), WC_RECV_ST(IBV_WC_WR_FLUSH_ERR),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 1, .len = 8, .ackreq = true), NONE(),
	     CTR("drop_qp_state", 1), STATE(IBV_QPS_ERR))),
    SC("acc_requester_gets_rem_access_err", "access", "IBA 9.9 (requester errors: remote access NAK)",
       "a remote access NAK completes the WQE with REM_ACCESS_ERR, flushes the next, QP to ERR",
       STEPS(POST(.wr = IBV_WR_RDMA_WRITE, .len = 16, .off = 0), POST(.wr = IBV_WR_SEND, .len = 16),
	     REQ(ROCE_OP_WRITE_ONLY, 0), REQ(ROCE_OP_SEND_ONLY, 1),
	     PEER_NAK(0, ROCE_NAK_REMOTE_ACCESS_ERR), WC_SEND(IBV_WC_REM_ACCESS_ERR),
	     WC_SEND(IBV_WC_WR_FLUSH_ERR), STATE(IBV_QPS_ERR))),
    SC("acc_other_qps_qpn", "access", "IBA ch. 9 header validation (connected QP source)",
       "a WRITE sent to the QPN of a QP connected to another host is dropped and counted",
       STEPS(TX(.op = ROCE_OP_WRITE_ONLY, .psn = 0, .off = 0, .len = 64, .dqp = D_OTHER_QP,
		.fill = 0xEE, .ackreq = true),
	     NONE(), CTR("drop_addr_mismatch", 1), MEM_SAME())),

    /* ------------------------------------------------------------ opseq */
    SC("seq_middle_without_first", "opseq", "IBA 9.7 (opcode sequence check), C9-89",
       "SEND MIDDLE with no message in progress: NAK invalid request, QP to ERR",
       STEPS(RECV(1, 4096), TX(.op = ROCE_OP_SEND_MIDDLE, .psn = 0, .len = MTU),
	     NAK(0, ROCE_NAK_INVALID_REQUEST), STATE(IBV_QPS_ERR))),
    SC("seq_only_inside_message", "opseq", "IBA 9.7 (opcode sequence check), C9-89",
       "SEND ONLY after a SEND FIRST: NAK invalid request",
       STEPS(RECV(2, 4096), TX(.op = ROCE_OP_SEND_FIRST, .psn = 0, .len = MTU),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 1, .len = 16), NAK(1, ROCE_NAK_INVALID_REQUEST))),
    SC("seq_write_last_inside_send", "opseq", "IBA 9.7 (opcode sequence check), C9-89",
       "WRITE LAST after a SEND FIRST: NAK invalid request",
       STEPS(RECV(1, 4096), TX(.op = ROCE_OP_SEND_FIRST, .psn = 0, .len = MTU),
	     TX(.op = ROCE_OP_WRITE_LAST, .psn = 1, .len = 16), NAK(1, ROCE_NAK_INVALID_REQUEST),
	     MEM_SAME())),
    SC("seq_write_last_without_first", "opseq", "IBA 9.7 (opcode sequence check), C9-89",
       "WRITE LAST with no WRITE in progress: NAK invalid request, memory unchanged",
       STEPS(TX(.op = ROCE_OP_WRITE_LAST, .psn = 0, .len = 16, .fill = 0xEE),
	     NAK(0, ROCE_NAK_INVALID_REQUEST), MEM_SAME())),

    /* ------------------------------------------------------------ length */
    SC("len_payload_above_mtu", "length", "IBA 9.7.7 (payload length vs. path MTU), 9.9.3",
       "SEND ONLY with 1028 bytes on a 1024 path MTU: NAK invalid request, the receive WQE "
       "completes in error (REM_INV_REQ_ERR, as Linux rxe), QP to ERR",
       STEPS(RECV(1, 4096), TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = MTU + 4),
	     NAK(0, ROCE_NAK_INVALID_REQUEST), WC_RECV_ST(IBV_WC_REM_INV_REQ_ERR),
	     STATE(IBV_QPS_ERR))),
    SC("len_send_longer_than_recv_buffer", "length", "IBA 9.7 (message longer than the receive WQE), 9.9.3",
       "a 64-byte SEND into a 32-byte receive WQE: NAK invalid request, WQE LOC_LEN_ERR, QP to "
       "ERR",
       STEPS(RECV(1, 32), TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 64, .ackreq = true),
	     NAK(0, ROCE_NAK_INVALID_REQUEST), WC_RECV_ST(IBV_WC_LOC_LEN_ERR),
	     STATE(IBV_QPS_ERR))),
    SC("len_write_beyond_reth_length", "length", "IBA 9.7 (length check: NAK invalid request)",
       "WRITE carrying more bytes than its RETH DMA length: NAK invalid request, nothing past "
       "the announced range",
       STEPS(TX(.op = ROCE_OP_WRITE_FIRST, .psn = 0, .off = 0, .len = MTU, .dma_set = true,
		.dma_len = 1500, .fill = 0xEE),
	     TX(.op = ROCE_OP_WRITE_LAST, .psn = 1, .len = 1000, .fill = 0xEE, .ackreq = true),
	     NAK(1, ROCE_NAK_INVALID_REQUEST), MEM_ORIG(MTU, REGION_LEN - MTU))),
    SC("len_write_only_short_of_reth", "length", "IBA 9.7 (length check: NAK invalid request)",
       "WRITE ONLY whose payload (64) differs from its DMA length (32): NAK invalid request",
       STEPS(TX(.op = ROCE_OP_WRITE_ONLY, .psn = 0, .off = 0, .len = 64, .dma_set = true,
		.dma_len = 32, .fill = 0xEE, .ackreq = true),
	     NAK(0, ROCE_NAK_INVALID_REQUEST), MEM_ORIG(32, REGION_LEN - 32))),
    SC("len_first_shorter_than_mtu", "length", "IBA 9.7 (length check: NAK invalid request)",
       "SEND FIRST carrying half an MTU: NAK invalid request",
       STEPS(RECV(1, 4096), TX(.op = ROCE_OP_SEND_FIRST, .psn = 0, .len = MTU / 2),
	     NAK(0, ROCE_NAK_INVALID_REQUEST))),

    /* ------------------------------------------------------------ mtu */
    SC("mtu_send_segmentation", "mtu", "IBA 9.7 (segmentation by path MTU)",
       "a 600-byte SEND over a 256 path MTU goes out as 256 + 256 + 88",
       .cfg = {.mtu = IBV_MTU_256},
       STEPS(POST(.wr = IBV_WR_SEND, .len = 600), REQ_LEN(ROCE_OP_SEND_FIRST, 0, 256),
	     REQ_LEN(ROCE_OP_SEND_MIDDLE, 1, 256), REQ_LEN(ROCE_OP_SEND_LAST, 2, 88), PEER_ACK(2),
	     WC_SEND(IBV_WC_SUCCESS))),
    SC("mtu_read_response_segmentation", "mtu", "IBA 9.7 (READ response segmentation)",
       "a 1300-byte READ over a 512 path MTU is answered 512 + 512 + 276, PSN per packet",
       .cfg = {.mtu = IBV_MTU_512},
       STEPS(TX(.op = ROCE_OP_READ_REQUEST, .psn = 0, .off = 0, .len = 1300),
	     RX(.op = ROCE_OP_READ_RESP_FIRST, .chk = C_PSN | C_LEN | C_DATA, .psn = 0, .len = 512,
		.off = 0),
	     RX(.op = ROCE_OP_READ_RESP_MIDDLE, .chk = C_PSN | C_LEN | C_DATA, .psn = 1,
		.len = 512, .off = 512),
	     RX(.op = ROCE_OP_READ_RESP_LAST, .chk = C_PSN | C_LEN | C_DATA, .psn = 2, .len = 276,
		.off = 1024),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 3, .len = 0, .ackreq = true), RNR_NAK(3, 1))),
    SC("mtu_read_request_takes_psns", "mtu", "IBA 9.7.1 (a READ uses one PSN per response packet)",
       "after a 3-packet READ the next request is expected at PSN + 3",
       STEPS(RECV(1, 64), TX(.op = ROCE_OP_READ_REQUEST, .psn = 0, .off = 0, .len = 3 * MTU),
	     RX(.op = ROCE_OP_READ_RESP_FIRST, .chk = C_PSN, .psn = 0),
	     RX(.op = ROCE_OP_READ_RESP_MIDDLE, .chk = C_PSN, .psn = 1),
	     RX(.op = ROCE_OP_READ_RESP_LAST, .chk = C_PSN, .psn = 2),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 3, .len = 8, .ackreq = true), ACK(3),
	     WC_RECV(IBV_WC_SUCCESS, 8))),

    /* ------------------------------------------------------------ qpn */
    SC("qpn_unknown_dropped", "qpn", "IBA ch. 9 header validation (destination QP)",
       "a request for a QPN that does not exist is dropped silently and counted",
       STEPS(TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 8, .dqp = D_UNKNOWN, .ackreq = true),
	     NONE(), CTR("drop_unknown_qp", 1), NOWC())),
    SC("qpn_gsi_dropped", "qpn", "IBA ch. 9 header validation (QP1 / GSI)",
       "a packet for QP1 (no GSI here) is dropped silently and counted",
       STEPS(TX(.op = UD_SEND_ONLY, .psn = 0, .len = 8, .dqp = D_GSI, .qkey = 0x80010000u),
	     NONE(), CTR("drop_gsi_qp", 1))),
    SC("qpn_wrong_transport_dropped", "qpn", "IBA ch. 9 header validation (transport type)",
       "a UD SEND to an RC QP is dropped silently and counted",
       STEPS(RECV(1, 64), TX(.op = UD_SEND_ONLY, .psn = 0, .len = 8, .qkey = 1), NONE(),
	     CTR("drop_qp_type", 1), NOWC())),
    SC("qpn_stranger_source_dropped", "qpn", "IBA ch. 9 header validation (connected QP source)",
       "a WRITE from an address other than the QP's peer is dropped, memory unchanged",
       STEPS(TX(.op = ROCE_OP_WRITE_ONLY, .psn = 0, .off = 0, .len = 64, .mangle = M_SRC,
		.fill = 0xEE, .ackreq = true),
	     NONE(), CTR("drop_addr_mismatch", 1), MEM_SAME())),

    /* ------------------------------------------------------------ ud */
    SC("ud_qkey_mismatch_dropped", "ud", "IBA 10.2.4 (Q_Key)",
       "a UD SEND with the wrong Q_Key is dropped silently and counted; the WQE stays posted",
       .cfg = {.type = IBV_QPT_UD, .qkey = 0x11111111u},
       STEPS(RECV(1, 2048), TX(.op = UD_SEND_ONLY, .psn = 0, .len = 32, .qkey = 0x22222222u),
	     NOWC(), NONE(), CTR("drop_ud_qkey", 1),
	     TX(.op = UD_SEND_ONLY, .psn = 1, .len = 32, .qkey = 0x11111111u),
	     WC_RECV(IBV_WC_SUCCESS, 40 + 32))),
    SC("ud_controlled_qkey_from_wire_rejected", "ud", "IBA 10.2.4 (controlled Q_Key)",
       "a UD SEND with a controlled Q_Key (high bit set) the QP does not have is dropped",
       .cfg = {.type = IBV_QPT_UD, .qkey = 0x11111111u},
       STEPS(RECV(1, 2048), TX(.op = UD_SEND_ONLY, .psn = 0, .len = 32, .qkey = 0x91111111u),
	     NOWC(), CTR("drop_ud_qkey", 1))),

    /* ------------------------------------------------------------ uc */
    SC("uc_gap_drops_message", "uc", "IBA 9.8.3 (UC: a PSN gap drops the message)",
       "UC SEND FIRST then SEND LAST two PSNs later: nothing delivered, no ACK; the next "
       "message is delivered into the same WQE",
       .cfg = {.type = IBV_QPT_UC},
       STEPS(RECV(1, 4096), TX(.op = UC(ROCE_OP_SEND_FIRST), .psn = 0, .len = MTU),
	     TX(.op = UC(ROCE_OP_SEND_LAST), .psn = 2, .len = 16), NONE(), NOWC(),
	     TX(.op = UC(ROCE_OP_SEND_ONLY), .psn = 3, .len = 24), WC_RECV(IBV_WC_SUCCESS, 24),
	     NONE())),

    /* ------------------------------------------------------------ malformed */
    SC("mal_bad_icrc", "malformed", "A17.3.3 (ICRC): silent drop",
       "a frame with a wrong ICRC is dropped silently and counted, nothing delivered",
       STEPS(RECV(1, 64),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 16, .mangle = M_ICRC, .ackreq = true),
	     NONE(), NOWC(), CTR("drop_bad_icrc", 1), CTR("rx_packets", 0))),
    SC("mal_payload_corrupted", "malformed", "A17.3.3 (ICRC)",
       "a WRITE whose payload was corrupted in flight (ICRC mismatch) never reaches memory",
       STEPS(TX(.op = ROCE_OP_WRITE_ONLY, .psn = 0, .off = 0, .len = 64, .fill = 0xEE,
		.mangle = M_PAYLOAD, .ackreq = true),
	     NONE(), MEM_SAME(), CTR("drop_bad_icrc", 1))),
    SC("mal_bad_tver", "malformed", "IBA 9.2 (BTH TVer = 0)",
       "BTH transport version 1 (valid ICRC): dropped silently and counted",
       STEPS(RECV(1, 64),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 16, .mangle = M_TVER, .ackreq = true),
	     NONE(), NOWC(), CTR("drop_bad_tver", 1))),
    SC("mal_truncated_headers", "malformed", "IBA ch. 9 header validation (malformed: silent drop)",
       "a frame cut inside its headers is dropped silently and counted",
       STEPS(TX(.op = ROCE_OP_WRITE_ONLY, .psn = 0, .off = 0, .len = 64, .mangle = M_TRUNC,
		.ackreq = true),
	     NONE(), CTR_GE("rx_drops", 1), CTR("rx_packets", 0), MEM_SAME())),
    SC("mal_udp_length", "malformed", "A17 (UDP encapsulation): silent drop",
       "UDP length larger than the datagram: dropped silently and counted",
       STEPS(RECV(1, 64),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 16, .mangle = M_UDP_LEN, .ackreq = true),
	     NONE(), NOWC(), CTR_GE("rx_drops", 1), CTR("rx_packets", 0))),
    SC("mal_ip_checksum", "malformed", "A17 (IP encapsulation): silent drop",
       "IPv4 header checksum wrong (ICRC masks it): dropped silently and counted",
       STEPS(RECV(1, 64),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 16, .mangle = M_IP_CSUM, .ackreq = true),
	     NONE(), NOWC(), CTR("drop_bad_ip_checksum", 1))),
    SC("mal_pad_longer_than_payload", "malformed", "IBA 9.2 (BTH PadCnt)",
       "PadCnt 3 on a frame with no payload: dropped silently and counted",
       STEPS(RECV(1, 64),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 0, .mangle = M_PAD, .ackreq = true),
	     NONE(), NOWC(), CTR_GE("rx_drops", 1), CTR("rx_packets", 0))),
    SC("mal_reserved_opcode", "malformed", "IBA 9.2, table 38 (reserved opcodes)",
       "a reserved RC opcode (0x15) is dropped silently and counted",
       STEPS(RECV(1, 64),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 16, .mangle = M_OPCODE, .ackreq = true),
	     NONE(), NOWC(), CTR("drop_unknown_opcode", 1))),
    SC("mal_pkey_mismatch", "malformed", "IBA ch. 10 partitioning (P_Key check)",
       "a request with P_Key 0x1234 (the port has only 0xFFFF) is dropped silently and counted",
       STEPS(RECV(1, 64),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 16, .mangle = M_PKEY, .ackreq = true),
	     NONE(), NOWC(), CTR("drop_bad_pkey", 1))),
    SC("mal_pkey_limited_member_accepted", "malformed", "IBA ch. 10 partitioning (P_Key match)",
       "P_Key 0x7FFF (limited member of the default partition) matches our full-member 0xFFFF",
       STEPS(RECV(1, 64),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 16, .mangle = M_PKEY_LIMITED,
		.ackreq = true),
	     ACK(0), WC_RECV(IBV_WC_SUCCESS, 16))),

    /* ------------------------------------------------------------ atomic */
    SC("atomic_misaligned", "atomic", "IBA ch. 9 atomics (8-byte alignment), C9-40",
       "FETCH_ADD at an address that is not 8-byte aligned: NAK invalid request, memory "
       "unchanged",
       STEPS(TX(.op = ROCE_OP_FETCH_ADD, .psn = 0, .off = 4, .swap = 1),
	     NAK(0, ROCE_NAK_INVALID_REQUEST), MEM_SAME(), STATE(IBV_QPS_ERR))),
    SC("atomic_fetch_add_result", "atomic", "IBA ch. 9 atomic operations",
       "FETCH_ADD returns the original value and adds",
       STEPS(MEM_SET(256, 8, 0x01),
	     TX(.op = ROCE_OP_FETCH_ADD, .psn = 0, .off = 256, .swap = 3),
	     RX(.op = ROCE_OP_ATOMIC_ACK, .chk = C_PSN | C_ORIG, .psn = 0,
		.swap = 0x0101010101010101ull),
	     MEM_U64(256, 0x0101010101010104ull))),
    SC("atomic_cmp_swap_no_match", "atomic", "IBA ch. 9 atomic operations",
       "CMP_SWAP whose compare value differs leaves memory unchanged and returns the original",
       STEPS(MEM_SET(256, 8, 0), TX(.op = ROCE_OP_CMP_SWAP, .psn = 0, .off = 256, .cmp = 1, .swap = 9),
	     RX(.op = ROCE_OP_ATOMIC_ACK, .chk = C_PSN | C_ORIG, .psn = 0, .swap = 0),
	     MEM_U64(256, 0))),
    SC("atomic_requester_result", "atomic", "IBA ch. 9 atomic operations (requester)",
       "rocemu's FETCH_ADD completes with byte_len 8 when the ATOMIC ACKNOWLEDGE arrives",
       STEPS(POST(.wr = IBV_WR_ATOMIC_FETCH_AND_ADD, .len = 8, .off = 64, .cmp = 1),
	     REQ(ROCE_OP_FETCH_ADD, 0),
	     TX(.op = ROCE_OP_ATOMIC_ACK, .spsn = true, .psn = 0, .swap = 0x1122334455667788ull,
		.syn_type = ROCE_AETH_ACK, .syn_val = 31),
	     {.k = T_WC, .chk = C_STATUS | C_BLEN, .status = IBV_WC_SUCCESS, .byte_len = 8})),

    /* ------------------------------------------------------------ zero */
    SC("zero_len_send", "zero", "IBA 9.7 (zero-length messages)",
       "a zero-length SEND is acknowledged and completes with byte_len 0",
       STEPS(RECV(1, 64), TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 0, .ackreq = true), ACK(0),
	     WC_RECV(IBV_WC_SUCCESS, 0))),
    SC("zero_len_write_no_key_check", "zero", "IBA 9.7.4.1.5 (zero-length RDMA: no R_Key check)",
       "a zero-length WRITE with a guessed R_Key and wild va is acknowledged, nothing written",
       STEPS(TX(.op = ROCE_OP_WRITE_ONLY, .psn = 0, .len = 0, .key = K_GUESS, .va_abs = true,
		.va_value = 0xdeadbeefull, .ackreq = true),
	     ACK(0), MEM_SAME(), STATE(IBV_QPS_RTS))),
    SC("zero_len_read", "zero", "IBA 9.7.4.1.5 (R_Key, bounds, access)",
       "a zero-length READ is answered with one empty READ RESPONSE ONLY",
       STEPS(TX(.op = ROCE_OP_READ_REQUEST, .psn = 0, .len = 0, .key = K_GUESS),
	     RX(.op = ROCE_OP_READ_RESP_ONLY, .chk = C_PSN | C_LEN, .psn = 0, .len = 0), NONE())),
    SC("zero_len_requester_send", "zero", "IBA 9.7 (zero-length SEND)",
       "rocemu sends a zero-length SEND as one SEND ONLY with AckReq",
       STEPS(POST(.wr = IBV_WR_SEND, .len = 0),
	     RX(.op = ROCE_OP_SEND_ONLY, .chk = C_PSN | C_LEN | C_ACKREQ, .spsn = true, .psn = 0,
		.len = 0),
	     PEER_ACK(0), WC_SEND(IBV_WC_SUCCESS))),
    /* ------------------------------------------------------------ more */
    SC("ack_msn_counts_messages", "ack", "IBA 9.7 (AETH MSN)",
       "the ACK after two complete messages carries MSN 2",
       STEPS(RECV(2, 64), TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 8),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 1, .len = 8, .ackreq = true),
	     RX(.op = ROCE_OP_ACK, .chk = C_PSN | C_SYN | C_MSN, .psn = 1,
		.syn_type = ROCE_AETH_ACK, .imm = 2))),
    SC("ack_duplicate_ack_ignored", "ack", "IBA 9.7 (requester: an ACK covers every earlier PSN)",
       "an ACK for a PSN already acknowledged completes nothing more",
       STEPS(POST(.wr = IBV_WR_SEND, .len = 16), REQ(ROCE_OP_SEND_ONLY, 0), PEER_ACK(0),
	     WC_SEND(IBV_WC_SUCCESS), POST(.wr = IBV_WR_SEND, .len = 16), REQ(ROCE_OP_SEND_ONLY, 1),
	     PEER_ACK(0), NOWC(), PEER_ACK(1), WC_SEND(IBV_WC_SUCCESS))),
    SC("req_nak_invalid_request", "retry", "IBA 9.9 (requester errors: invalid request NAK)",
       "an invalid-request NAK completes the WQE with REM_INV_REQ_ERR and moves the QP to ERR",
       STEPS(POST(.wr = IBV_WR_SEND, .len = 16), REQ(ROCE_OP_SEND_ONLY, 0),
	     PEER_NAK(0, ROCE_NAK_INVALID_REQUEST), WC_SEND(IBV_WC_REM_INV_REQ_ERR),
	     STATE(IBV_QPS_ERR), CTR("rx_nak_invalid_req", 1))),
    SC("req_nak_remote_op", "retry", "IBA 9.9 (requester errors: remote operational NAK)",
       "a remote-operational-error NAK completes the WQE with REM_OP_ERR, QP to ERR",
       STEPS(POST(.wr = IBV_WR_SEND, .len = 16), REQ(ROCE_OP_SEND_ONLY, 0),
	     PEER_NAK(0, ROCE_NAK_REMOTE_OP_ERR), WC_SEND(IBV_WC_REM_OP_ERR),
	     STATE(IBV_QPS_ERR))),
    SC("req_unexpected_read_response", "retry", "IBA 9.7 (requester: response validation)",
       "a READ response for a PSN that carried a SEND is dropped and counted; the SEND still "
       "completes on its ACK",
       STEPS(POST(.wr = IBV_WR_SEND, .len = 16), REQ(ROCE_OP_SEND_ONLY, 0),
	     TX(.op = ROCE_OP_READ_RESP_ONLY, .spsn = true, .psn = 0, .len = 16,
		.syn_type = ROCE_AETH_ACK, .syn_val = 31),
	     NOWC(), PEER_ACK(0), WC_SEND(IBV_WC_SUCCESS),
	     CTR_GE("drop_resp_unexpected", 1))),
    SC("ud_no_recv_wqe_dropped", "ud", "IBA 10.2.4 (UD: no receive WQE, silent drop)",
       "a UD SEND with no receive WQE posted is dropped silently and counted",
       .cfg = {.type = IBV_QPT_UD, .qkey = 0x11111111u},
       STEPS(TX(.op = UD_SEND_ONLY, .psn = 0, .len = 32, .qkey = 0x11111111u), NONE(),
	     CTR("drop_ud_no_recv", 1), NOWC())),
    SC("state_rtr_accepts_requests", "qpn", "IBA 11.2.5 (QP states: RTR receives)",
       "a QP in RTR (not yet RTS) accepts and acknowledges a SEND",
       .cfg = {.stop_at = IBV_QPS_RTR},
       STEPS(RECV(1, 64), TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 8, .ackreq = true), ACK(0),
	     WC_RECV(IBV_WC_SUCCESS, 8))),
    SC("state_init_drops_requests", "qpn", "IBA 11.2.5 (QP states: INIT discards)",
       "a QP in INIT silently discards a request",
       .cfg = {.stop_at = IBV_QPS_INIT},
       STEPS(RECV(1, 64), TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 8, .ackreq = true), NONE(),
	     NOWC(), CTR("drop_qp_state", 1))),
    SC("rd_atomic_resources_exceeded", "access", "IBA 9.7 (responder resources: max_dest_rd_atomic)",
       "max_dest_rd_atomic = 1: a second READ arriving in the same burst, while the first is "
       "still to be answered, draws NAK invalid request",
       .cfg = {.rd_atomic = 1, .mtu = IBV_MTU_256},
       STEPS(TX(.op = ROCE_OP_READ_REQUEST, .psn = 0, .off = 0, .len = REGION_LEN, .n = 1),
	     TX(.op = ROCE_OP_READ_REQUEST, .psn = REGION_LEN / 256, .off = 0, .len = 64),
	     RX(.op = ROCE_OP_ACK, .chk = C_PSN | C_SYN | C_SKIP, .psn = REGION_LEN / 256,
		.syn_type = ROCE_AETH_NAK, .syn_val = ROCE_NAK_INVALID_REQUEST))),
    SC("req_nak_seq_outside_window_ignored", "retry", "IBA 9.7 (requester: response PSN validation)",
       "a PSN-sequence NAK for a PSN rocemu never sent is ignored: no resend, no completion",
       STEPS(POST(.wr = IBV_WR_SEND, .len = 16), REQ(ROCE_OP_SEND_ONLY, 0),
	     PEER_NAK(40, ROCE_NAK_PSN_SEQ_ERR), NONE(), NOWC(), PEER_ACK(0),
	     WC_SEND(IBV_WC_SUCCESS), STATE(IBV_QPS_RTS))),
    SC("req_rnr_outside_window_ignored", "rnr", "IBA 9.7 (requester: response PSN validation)",
       "an RNR NAK for a PSN rocemu never sent is ignored",
       STEPS(POST(.wr = IBV_WR_SEND, .len = 16), REQ(ROCE_OP_SEND_ONLY, 0), PEER_RNR(40, 1),
	     NONE(), NOWC(), PEER_ACK(0), WC_SEND(IBV_WC_SUCCESS), CTR("rx_rnr_nak", 0))),
    SC("req_read_response_too_long", "length", "IBA 9.7 (requester: READ response length)",
       "a READ RESPONSE ONLY carrying 1000 bytes for a 64-byte READ never writes past the 64 "
       "bytes of the local buffer; the READ completes only with a correct response",
       STEPS(POST(.wr = IBV_WR_RDMA_READ, .len = 64, .off = 0, .fill = 0x11),
	     REQ(ROCE_OP_READ_REQUEST, 0),
	     TX(.op = ROCE_OP_READ_RESP_ONLY, .spsn = true, .psn = 0, .len = 1000, .fill = 0x99,
		.syn_type = ROCE_AETH_ACK, .syn_val = 31),
	     {.k = T_LOCAL_EQ, .off = 64, .len = 4096, .fill = 0x3C}, NOWC(),
	     TX(.op = ROCE_OP_READ_RESP_ONLY, .spsn = true, .psn = 0, .len = 64, .fill = 0x98,
		.syn_type = ROCE_AETH_ACK, .syn_val = 31),
	     {.k = T_WC, .chk = C_STATUS | C_BLEN, .status = IBV_WC_SUCCESS, .byte_len = 64},
	     {.k = T_LOCAL_EQ, .off = 0, .len = 64, .fill = 0x98},
	     {.k = T_LOCAL_EQ, .off = 64, .len = 4096, .fill = 0x3C})),
    SC("dup_read_cannot_grow", "dup", "IBA 9.7 (duplicate RDMA READ within the original request), C9-110",
       "a duplicate of a 1-packet READ asking for 3 packets is not answered with PSNs the "
       "original request never covered (here PSN+1 belongs to a SEND, PSN+2 is not yet used)",
       .xfail = "emulator/transport/rc_responder.c rc_duplicate(): a duplicate READ takes the "
		"new RETH as is (re-translated, npkts recomputed) without checking that its "
		"range lies inside the original request's, so it answers PSN+1 (a SEND's PSN) "
		"and PSN+2 (= the expected PSN, which a new READ will use); Linux rxe drops such "
		"a duplicate that is not the original request or a subset of it. Fix: keep the "
		"original va/length/rkey in struct rocemu_rd_res and drop a duplicate outside them",
       STEPS(RECV(1, 64), TX(.op = ROCE_OP_READ_REQUEST, .psn = 0, .off = 0, .len = 64),
	     RX(.op = ROCE_OP_READ_RESP_ONLY, .chk = C_PSN, .psn = 0),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 1, .len = 8, .ackreq = true), ACK(1),
	     TX(.op = ROCE_OP_READ_REQUEST, .psn = 0, .off = 0, .len = 3 * MTU),
	     RX(.op = ROCE_OP_READ_RESP_ONLY, .chk = C_PSN, .psn = 0), NONE())),
    SC("dup_read_other_rkey", "dup", "IBA 9.7 (duplicate RDMA READ within the original request), C9-110",
       "a \"duplicate\" READ naming another region's R_Key is not answered from that region",
       .xfail = "emulator/transport/rc_responder.c rc_duplicate(): the duplicate's R_Key and "
		"range are re-translated and used as given, not compared with the original "
		"request's (Linux rxe drops a duplicate whose R_Key or range differs), so a peer "
		"can read a different region under an old PSN",
       STEPS(TX(.op = ROCE_OP_READ_REQUEST, .psn = 0, .off = 0, .len = 64),
	     RX(.op = ROCE_OP_READ_RESP_ONLY, .chk = C_PSN | C_DATA, .psn = 0, .off = 0),
	     TX(.op = ROCE_OP_READ_REQUEST, .psn = 0, .off = 0, .len = 64, .key = K_RO), NONE())),
    SC("ecn_ce_marked_processed", "malformed", "A17.9 (congestion: CE-marked packets are still processed)",
       "a SEND whose IP header is marked Congestion Experienced is delivered and acknowledged",
       STEPS(RECV(1, 64),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 16, .mangle = M_ECN_CE, .ackreq = true),
	     ACK(0), WC_RECV(IBV_WC_SUCCESS, 16))),
    SC("udp_source_port_any", "malformed", "A17 (UDP source port carries flow entropy only)",
       "a request from UDP source port 0x1234 is accepted like any other",
       STEPS(RECV(1, 64),
	     TX(.op = ROCE_OP_SEND_ONLY, .psn = 0, .len = 16, .mangle = M_SPORT, .ackreq = true),
	     ACK(0), WC_RECV(IBV_WC_SUCCESS, 16))),
};
/* clang-format on */

const unsigned cf_n_scenarios = sizeof(cf_scenarios) / sizeof(cf_scenarios[0]);
