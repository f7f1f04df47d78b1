/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Private to the transport proper (engine.c, qp.c, rc_requester.c,
 * rc_responder*.c, rc_completer.c, ud.c): the engine and QP structures, the
 * transport counters, and the functions the roles call on one another.
 * Memory and queues never include this; they see rocemu_internal.h only.
 *
 * Everything here runs with the engine lock held.
 */
#ifndef ROCEMU_TRANSPORT_H
#define ROCEMU_TRANSPORT_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_mbuf.h>

#include "../wire/roce_mbuf.h"
#include "../wire/roce_wire.h"
#include "rocemu_internal.h"

/* ------------------------------------------------------------------------ */
/* Limits (what rocemu_engine_caps reports).                                  */

#define ROCEMU_MAX_QP	  16384
#define ROCEMU_MAX_QP_WR  16384
#define ROCEMU_MAX_INLINE 256
/* READ/atomic requests a QP may have outstanding, as initiator and as
 * responder: Linux Soft-RoCE's 128 (RXE_MAX_QP_RD_ATOM). perftest and rdma_cm
 * pass the peer's limit straight to ibv_modify_qp, so a smaller one refuses
 * connections rxe offers. An RC QP's responder holds max_dest_rd_atomic
 * resources, allocated when the value is set. */
#define ROCEMU_MAX_RD_ATOM 128
#define ROCEMU_MAX_MSG_SZ  (1u << 31)
#define ROCEMU_MAX_CQ	   16384
#define ROCEMU_MAX_CQE	   (1u << 20)
#define ROCEMU_MAX_MR	   65536
#define ROCEMU_MAX_MW	   16384
/* On a host NIC a key's index has 16 bits (its top byte names the process):
 * regions and windows share 65536 slots. */
#define ROCEMU_MAX_MR_HOST (65536 - ROCEMU_MAX_MW)
#define ROCEMU_MAX_PD	   65536
#define ROCEMU_MAX_AH	   65536
#define ROCEMU_MAX_SRQ	   16384
#define ROCEMU_MAX_SRQ_WR  16384
/* Device memory (emulator/memory/dm.c): bytes per engine */
#define ROCEMU_MAX_DM_SIZE (256u * 1024u)
/* UD multicast (mcast.c): groups per engine (the port's limit), QPs per group */
#define ROCEMU_MCAST_GROUPS    ROCEMU_PORT_MAX_MCAST
#define ROCEMU_MCAST_QP_ATTACH 32
/**
 * QPNs. QP0 (SMI) and QP1 (GSI) are fixed (IBA 3.9.2.1), 0xFFFFFF is the
 * multicast QPN. A data QP's number is 24 bits whose low 16 bits are its slot
 * in the engine's table; slots 0..0x10 are reserved (so 1 is only the GSI
 * QP). Numbers are handed out in sequence from a random start, as HCAs do: a
 * process that restarts does not offer its peers the QPN they still hold
 * for the connection of its previous life (a kernel CM rejects that REQ/REP
 * as stale, IBA 12.9.8.3.2), and a destroyed QP's number comes back only
 * after the whole 24-bit space went round. On a port of a rocemu host the
 * host hands out the numbers of every process on it instead, keeping their
 * slots distinct (docs/host.md).
 */
#define ROCEMU_QPN_FIRST     0x11
#define ROCEMU_QPN_TABLE     (1u << 16)
#define ROCEMU_QPN_MASK	     0xFFFFFFu
#define ROCEMU_QPN_MULTICAST 0xFFFFFFu

static inline uint32_t rocemu_qpn_slot(uint32_t qpn)
{
	return qpn & (ROCEMU_QPN_TABLE - 1);
}
/** SRQ numbers (ibv_get_srq_num): ROCEMU_SRQN_FIRST + a slot of ROCEMU_MAX_SRQ. */
#define ROCEMU_SRQN_FIRST 0x100

/**
 * Most packets a requester keeps unacknowledged (its send window's ceiling).
 * Go-back-N resends what is in flight after a loss; the requester can adapt
 * the window it actually uses (qp->req.cwnd, AIMD: cut on a loss episode,
 * ROCEMU_REQ_WINDOW_MIN after a timeout, grown on progress) between
 * ROCEMU_REQ_WINDOW_MIN and this.
 */
#define ROCEMU_REQ_WINDOW 128
/**
 * Floor of the adaptive send window (packets). Equal to ROCEMU_REQ_WINDOW,
 * the adaptation is off (the default): measured in-process with
 * bench/transport_goodput, lower floors resent 2-4x fewer packets at 1% and
 * 5% loss but kept less goodput and drew more transport timeouts (5% loss:
 * 4-9 per second against 0-1), because the round trip there is mostly thread
 * scheduling and a smaller window leaves the pipeline idle. Set it to 16 to
 * try the adaptation on a link where bandwidth, not CPU, is scarce.
 */
#define ROCEMU_REQ_WINDOW_MIN ROCEMU_REQ_WINDOW
/**
 * A loss episode multiplies the window by MD_NUM/MD_DEN and above ssthresh it
 * grows by ROCEMU_WINDOW_AI packets per window acknowledged: at a random
 * loss rate p the window settles near sqrt(MD_DEN * AI / p) (about 80 at 1%,
 * 36 at 5%, 18 at 20%), floored at ROCEMU_REQ_WINDOW_MIN.
 */
#define ROCEMU_WINDOW_MD_NUM 7
#define ROCEMU_WINDOW_MD_DEN 8
#define ROCEMU_WINDOW_AI     8
/** Shortest wait before a stalled requester probes (resends its oldest unacked packet), ns. */
#define ROCEMU_PROBE_MIN_NS 250000ull
/** Probes per stall (the second after twice the wait) before the transport timer decides. */
#define ROCEMU_PROBES 2
/**
 * Transport timer back-off: after an expiry in which nothing at all came from
 * the peer on the QP, the next period doubles, up to 2^this times the Local
 * ACK Timeout (T, 2T, 4T, 4T...). A peer that is alive but not scheduled
 * (a loaded machine) then has 27 T instead of 8 T at retry_cnt 7 before
 * RETRY_EXC; a dead peer still gets it, in 27 T (1.8 s at timeout 14).
 * A backed-off period never exceeds ROCEMU_TIMER_BACKOFF_CAP_NS (nor is it
 * shorter than T): a scheduling stall is tens or hundreds of ms, so a long
 * T (rdma_cm's 19: 2.1 s) needs no back-off, and a dead peer behind it is
 * found in 8 T as before (rsockets' keepalive relies on that).
 */
#define ROCEMU_TIMER_BACKOFF_MAX 2
/** The longest transport timer period the back-off makes, ns (see above). */
#define ROCEMU_TIMER_BACKOFF_CAP_NS 1000000000ull
/** AckReq is set at least every this many packets of a long message. */
#define ROCEMU_ACKREQ_INTERVAL 32
/** Packets one QP may transmit per progress pass (fairness, tx ring room). */
#define ROCEMU_TX_BUDGET 64

/* ------------------------------------------------------------------------ */
/* Counters.                                                                  */

#define ROCEMU_COUNTERS(X)                                                                         \
	X(rx_packets)                                                                              \
	X(rx_ecn_ce)                                                                               \
	X(rx_cnp)                                                                                  \
	X(drop_unknown_qp)                                                                         \
	X(drop_qp_type)                                                                            \
	X(drop_xrc_srq)                                                                            \
	X(drop_qp_state)                                                                           \
	X(drop_addr_mismatch)                                                                      \
	X(drop_gsi_qp)                                                                             \
	X(drop_psn_out_of_seq)                                                                     \
	X(drop_bad_length)                                                                         \
	X(drop_uc_incomplete_msg)                                                                  \
	X(drop_ud_qkey)                                                                            \
	X(drop_ud_no_recv)                                                                         \
	X(drop_ud_bad_opcode)                                                                      \
	X(drop_resp_unexpected)                                                                    \
	X(drop_resp_duplicate)                                                                     \
	X(drop_resp_bad_length)                                                                    \
	X(drop_resp_unsent_psn)                                                                    \
	X(drop_resp_bad_opcode)                                                                    \
	X(drop_resp_bad_syndrome)                                                                  \
	X(drop_resp_unreachable)                                                                   \
	X(drop_dup_unknown)                                                                        \
	X(drop_dup_read_mismatch)                                                                  \
	X(dup_requests)                                                                            \
	X(tx_packets)                                                                              \
	X(copy_tx_bytes)                                                                           \
	X(copy_rx_bytes)                                                                           \
	X(tx_acks)                                                                                 \
	X(tx_read_resp)                                                                            \
	X(tx_atomic_ack)                                                                           \
	X(tx_nak_psn_seq)                                                                          \
	X(tx_nak_invalid_req)                                                                      \
	X(tx_nak_remote_access)                                                                    \
	X(tx_nak_remote_op)                                                                        \
	X(tx_rnr_nak)                                                                              \
	X(tx_no_mbuf)                                                                              \
	X(tx_queue_full)                                                                           \
	X(tx_credit_waits)                                                                         \
	X(pass_tx_budget_stops)                                                                    \
	X(rx_acks)                                                                                 \
	X(rx_nak_psn_seq)                                                                          \
	X(rx_nak_invalid_req)                                                                      \
	X(rx_nak_remote_access)                                                                    \
	X(rx_nak_remote_op)                                                                        \
	X(rx_nak_other)                                                                            \
	X(rx_rnr_nak)                                                                              \
	X(retransmit_packets)                                                                      \
	X(retransmit_timeouts)                                                                     \
	X(retransmit_timeouts_silent)                                                              \
	X(retransmit_probes)                                                                       \
	X(window_shrinks)                                                                          \
	X(rate_limit_waits)                                                                        \
	X(retry_exceeded)                                                                          \
	X(retry_exceeded_silent)                                                                   \
	X(rnr_retry_exceeded)                                                                      \
	X(resolve_pending)                                                                         \
	X(resolve_failed)                                                                          \
	X(cq_overflow)                                                                             \
	X(cq_overrun_ignored)                                                                      \
	X(illegal_state_transitions)                                                               \
	X(rx_raw_frames)                                                                           \
	X(rx_raw_steered)                                                                          \
	X(drop_raw_no_recv)                                                                        \
	X(drop_raw_qp_state)                                                                       \
	X(drop_raw_too_long)                                                                       \
	X(drop_raw_rule)                                                                           \
	X(tx_raw_frames)                                                                           \
	X(cq_cleaned)                                                                              \
	X(drop_ud_unreachable)                                                                     \
	X(rx_mcast)                                                                                \
	X(drop_mcast_no_group)

enum rocemu_ctr {
#define ROCEMU_CTR_ENUM(n) CTR_##n,
	ROCEMU_COUNTERS(ROCEMU_CTR_ENUM)
#undef ROCEMU_CTR_ENUM
	    CTR_COUNT
};

/* ------------------------------------------------------------------------ */
/* Send work queue entries.                                                   */

enum rocemu_wqe_state {
	WQE_POSTED = 0, /**< not started: no PSN assigned */
	WQE_ACTIVE,	/**< PSNs assigned; packets [0, sent_pkts) transmitted */
	WQE_SENT,	/**< every packet transmitted, waiting for the response */
	WQE_DONE,	/**< finished with `status`; retired in order by the completer */
};

struct rocemu_send_wqe {
	/* the WQE's progress (zero when posted, but for what post.c sets) */
	enum rocemu_wqe_state state;
	enum ibv_wc_status status;
	uint32_t first_psn;
	uint32_t npkts;	    /**< PSNs the message uses (READ: response packets) */
	uint32_t sent_pkts; /**< request packets transmitted in the current pass */
	uint32_t rcvd_pkts; /**< READ: response packets received in order */
	uint32_t read_from; /**< READ: the response its latest request asked from */
	uint32_t length;    /**< message length in bytes */
	bool is_inline;
	bool signaled;
	bool rd_atomic; /**< READ, atomic, ATOMIC WRITE or FLUSH: counts against max_rd_atomic */

	/** The request as posted (rocemu_qp_post_send): wr.num_sge counts sge[], where the gather
	 *  list is copied (wr.sg_list is NULL); remote_qpn and xrc_srqn are masked to 24 bits. */
	struct rocemu_send_wr wr;
	struct ibv_sge sge[ROCEMU_MAX_SGE];
	uint8_t inline_data[ROCEMU_MAX_INLINE];
};

/* ------------------------------------------------------------------------ */
/* Named protocol states of the responder and the completer (qp_states.c).    */

/** The responder's place in the message stream (RC and UC). */
enum resp_msg_state {
	RESP_MSG_IDLE = 0, /**< between messages: a FIRST, ONLY, READ or atomic comes next */
	RESP_MSG_SEND,	   /**< inside a multi-packet SEND: MIDDLE or LAST of a SEND next */
	RESP_MSG_WRITE,	   /**< inside a multi-packet RDMA WRITE: MIDDLE or LAST next */
	RESP_MSG_UC_DROP,  /**< UC: discarding the rest of a message, until a FIRST or ONLY */
	RESP_MSG_STATES,
};

/** The RC responder's answer to a gap in the PSNs (9.7.5.2). */
enum resp_seq_state {
	RESP_SEQ_IN_ORDER = 0, /**< no NAK outstanding */
	RESP_SEQ_NAKED,	       /**< a PSN sequence NAK went for this gap: no second one */
	RESP_SEQ_RNR_NAKED,    /**< an RNR NAK went: drop quietly until its PSN comes again */
	RESP_SEQ_STATES,
};

/** The RC completer's recovery: probes answered, READ responses re-requested. */
enum comp_state {
	COMP_STEADY = 0,     /**< responses are taken as they come */
	COMP_PROBING,	     /**< a probe went: an ACK for exactly probe_psn answers it */
	COMP_REREAD,	     /**< went back to reread_psn: a gap there is not re-requested */
	COMP_REREAD_PROBING, /**< both: a probe went after the go-back, before progress */
	COMP_STATES,
};

/** The state machines above, for the name tables, the rules and the trace. */
enum rocemu_sm {
	ROCEMU_SM_RESP_MSG,
	ROCEMU_SM_RESP_SEQ,
	ROCEMU_SM_COMP,
	ROCEMU_SM_COUNT,
};

/* ------------------------------------------------------------------------ */
/* Responder resources (READ and atomic requests, for replay).               */

/** The PSNs and the target of a READ or atomic request, as one value. */
struct rocemu_rd_req {
	uint32_t psn;	/**< first PSN of the request */
	uint32_t npkts; /**< PSNs it uses */
	uint64_t va;
	uint32_t rkey;
	uint32_t length;
};

struct rocemu_rd_res {
	bool valid;
	bool active; /**< READ responses still to send */
	bool is_atomic;
	/** ATOMIC WRITE or FLUSH (A19): done when it arrived, answered by one
	 * RDMA READ response Only without payload, never executed again */
	bool no_data;
	bool replay; /**< re-executing a duplicate READ: may be cut short */
	/** what is answered now: the request, or the part of it that a
	 * duplicate READ asks for again */
	struct rocemu_rd_req cur;
	/** the original request, which a duplicate must lie inside */
	struct rocemu_rd_req orig;
	uint32_t sent;	      /**< READ: response packets sent */
	uint64_t atomic_orig; /**< atomic: result returned, replayed for duplicates */
	uint32_t msn;	      /**< MSN to report with the response */
	struct rocemu_pd *pd; /**< the PD the request was checked against (XRC: its SRQ's) */
};

/* ------------------------------------------------------------------------ */
/* Queue pair.                                                                */

struct rocemu_path {
	bool valid;
	uint8_t sgid_index;
	uint8_t sgid[16];
	uint8_t dgid[16];
	uint8_t tclass;
	uint8_t hop_limit;
	uint32_t flow_label;
	uint16_t udp_sport;
	uint8_t sl; /**< service level: the 802.1Q PCP on a VLAN port */
	bool v6;
};

struct rocemu_qp {
	struct rocemu_engine *engine;
	struct rocemu_pd *pd;
	struct rocemu_cq *send_cq, *recv_cq;
	struct rocemu_srq *srq;
	enum ibv_qp_type type;
	uint32_t qpn;
	enum ibv_qp_state state;
	bool sq_sig_all;
	void *user_ctx;
	struct ibv_qp_cap cap;
	struct ibv_qp_attr attr; /**< the attributes as last set (query) */
	struct rocemu_path path;
	uint32_t mtu;	 /**< path MTU in bytes */
	bool sqd_notify; /**< raise SQ_DRAINED when the SQ drains in SQD */
	bool sq_draining;

	/* send queue: indices grow without bound, masked with sq_mask */
	struct rocemu_send_wqe *sq;
	uint32_t sq_mask;
	uint32_t sq_head; /**< oldest not retired */
	uint32_t sq_cur;  /**< next WQE the requester works on */
	uint32_t sq_tail; /**< next free slot */

	struct {
		uint32_t psn;	       /**< next PSN to assign */
		uint32_t rd_atomic;    /**< outstanding READ/atomic WQEs */
		uint32_t since_ackreq; /**< packets since the last AckReq */
		/* adaptive send window (AIMD); all 0 after RESET = the full window */
		uint32_t cwnd;	      /**< packets allowed unacknowledged, 0 = ROCEMU_REQ_WINDOW */
		uint32_t ssthresh;    /**< below it the window grows by what is acked */
		uint32_t cwnd_acked;  /**< packets acknowledged towards the next +1 */
		bool recovering;      /**< shrunk for a loss: no second shrink before... */
		uint32_t recover_psn; /**< ...comp.psn passes this (the PSN sent then) */
		/* round-trip estimate (request with AckReq -> response covering it) */
		bool rtt_timing;
		uint32_t rtt_psn;
		uint64_t rtt_sent_ns;
		uint64_t srtt_ns, rttvar_ns; /**< 0 = no sample yet */
		bool sent_any;
		/** highest PSN a request sent so far covers (a READ request: its
		 * last response's): no response may name a later one */
		uint32_t max_sent_psn;
	} req;

	/* send rate limit (rate.c): a token bucket in front of the requester */
	struct {
		uint32_t kbps;	   /**< 0 = not limited */
		uint32_t burst;	   /**< bucket size in bytes, 0 = one path MTU's frame */
		bool from_av;	   /**< set by the address vector's static rate */
		int64_t credit;	   /**< in 1/8e6 bytes (see rate.c) */
		uint64_t last_ns;  /**< last refill, 0 = full bucket next */
		uint64_t until_ns; /**< sends wait until then, 0 = not waiting */
	} rate;

	struct {
		uint32_t psn;		 /**< oldest unacknowledged PSN */
		uint32_t retry_left;	 /**< timeouts (and READ gaps) left without progress */
		uint32_t nak_retry_left; /**< PSN-sequence NAK go-backs left without progress */
		uint32_t rnr_left;
		uint64_t deadline_ns; /**< retransmission timer, 0 = off */
		bool heard;	      /**< a packet came from the peer since the timer was armed */
		uint8_t backoff;      /**< the timer runs T << backoff (silent expiries in a row) */
		uint64_t rnr_until_ns; /**< RNR back-off end, 0 = none */
		uint32_t rnr_psn;
		enum comp_state state; /**< changed by rocemu_comp_set only */
		uint32_t reread_psn;
		uint64_t probe_ns; /**< stall probe deadline, 0 = off */
		uint8_t probes;	   /**< probes sent in this stall (at most ROCEMU_PROBES) */
		uint32_t probe_psn;
	} comp;

	/* receive queue */
	struct rocemu_recv_wqe *rq;
	uint32_t rq_mask;
	uint32_t rq_head, rq_tail;

	struct {
		uint32_t epsn; /**< expected PSN */
		uint32_t msn;
		enum resp_msg_state msg; /**< changed by rocemu_resp_msg_set only */
		enum resp_seq_state seq; /**< changed by rocemu_resp_seq_set only */
		/* The flags below are not protocol states: have_wqe says whether
		 * wqe holds a receive WQE, ack_pending/nak_pending/res_active that
		 * an answer waits to be sent, comm_est that COMM_EST was raised. */
		bool have_wqe;
		struct rocemu_recv_wqe wqe;
		uint64_t offset; /**< bytes of the current message placed */
		uint64_t write_va;
		uint32_t write_rkey;
		uint32_t write_len;
		/* a sequence or RNR NAK waiting for the READ responses before it
		 * (responses leave in PSN order) or for room in the tx queue */
		bool nak_pending;
		uint8_t nak_syndrome;
		uint32_t nak_psn;
		uint32_t last_oos_psn;	/**< PSN of the last out-of-sequence packet seen */
		uint32_t oos_since_nak; /**< out-of-sequence packets since that NAK */
		bool ack_pending;
		struct rocemu_rd_res *res; /**< res_cap entries, nres of them in use */
		uint32_t res_cap;
		uint32_t nres;
		uint32_t res_next; /**< slot the next request takes */
		bool res_active;   /**< some READ response is being streamed */
		bool comm_est;	   /**< IBV_EVENT_COMM_EST raised */
	} resp;

	/* queue memory (parent domain allocators) */
	struct rocemu_alloc alloc;
	bool sq_app, rq_app; /**< the SQ / RQ ring is the application's */
	uint32_t n_flows;    /**< steering rules to this QP (raw.c): destroy is EBUSY */
	uint32_t n_mcast;    /**< multicast groups it is attached to (mcast.c): the same */
	/* XRC */
	struct rocemu_xrcd *xrcd;   /**< XRC_RECV: its domain */
	struct rocemu_srq *xrc_srq; /**< XRC_RECV: the SRQ the packet in hand names */
	uint32_t open_refs;	    /**< XRC_RECV: handles from rocemu_qp_open */

	bool on_work;
	struct rocemu_qp *work_next;
	uint32_t timer_idx; /**< position in the engine's timer heap, UINT32_MAX = none */
	uint64_t timer_at;  /**< deadline the heap holds for this QP */
};

/* ------------------------------------------------------------------------ */
/* The engine.                                                                */

struct rocemu_engine {
	struct rocemu_port *port;
	struct rocemu_mem_table *mem;
	struct rocemu_caps caps;
	rocemu_event_fn event_fn;
	void *event_arg;
	uint8_t mac[6];
	uint8_t ecn_bits; /**< ECN codepoint for frames whose AV gives none (--ecn) */
	uint16_t vlan;	  /**< the port's VLAN ID, 0 = untagged (--vlan) */

	struct rocemu_qp **qpn_table; /**< QPN -> QP, ROCEMU_QPN_TABLE entries */
	uint32_t n_qps;
	uint32_t qpn_next;

	/** QPs with something to send now, in the order they run: a QP joins
	 * at the tail (round robin; a pass stopped by transmit credit puts the
	 * QPs it did not reach back at the head, both ends known: O(1)). */
	struct rocemu_qp *work_head, *work_tail;
	/** Min-heap of QPs by earliest timer deadline (retransmission, RNR back-off):
	 * a progress pass looks at the top only, never at every QP. */
	struct rocemu_qp **timer_heap;
	uint32_t n_timers;
	struct rocemu_flow *flows; /**< steering rules of raw packet QPs (raw.c) */
	uint32_t n_flows;
	struct rocemu_mcast_group *mcast; /**< UD multicast groups (mcast.c) */
	uint32_t n_mcast;
	struct rocemu_xrcd *xrcds;     /**< open XRC domains (xrc.c) */
	struct rocemu_srq **srq_table; /**< SRQ number - ROCEMU_SRQN_FIRST -> SRQ */
	uint32_t srqn_next;
	uint64_t ctr[CTR_COUNT];
	rocemu_trace_fn trace_fn; /**< protocol state changes go here when set */
	void *trace_arg;
	bool link_up;		/**< last link state seen (port events on change) */
	uint64_t link_check_ns; /**< next time to look at the link */
};

#define ENGINE_COUNT(e, name) ((e)->ctr[CTR_##name]++)
/* copy_tx_bytes: payload bytes copied from application memory into frames
 * (the NIC's DMA reads); copy_rx_bytes: from frames into application memory
 * (its DMA writes). With the port's frame bytes (a memif PMD in copy mode
 * copies each frame once more on each side) they give the bytes copied per
 * byte delivered that bench/perf_bench.py reports. */
#define ENGINE_ADD(e, name, n) ((e)->ctr[CTR_##name] += (n))

/* engine.c */
/** Put a QP on the engine's work list (requester, responses, timers). */
void rocemu_engine_schedule(struct rocemu_qp *qp);
/** Put the QP's earliest timer deadline into the timer heap (or take it out). */
void rocemu_engine_timer_sync(struct rocemu_qp *qp);
/** Take the QP out of the work list and the timer heap (destroy, reset). */
void rocemu_engine_forget(struct rocemu_qp *qp);
struct rocemu_qp *rocemu_engine_qp_lookup(struct rocemu_engine *e, uint32_t qpn);
/** Fill the network path of a packet from a QP or AH path; -EAGAIN/-EHOSTUNREACH from resolve. */
int rocemu_engine_fill_path(struct rocemu_engine *e, const struct rocemu_path *p,
			    struct roce_pkt *pkt);
/** Allocate, build (headers from pkt, payload filled by the caller through *payload) and return the
 * mbuf; *crc is the ICRC's CRC over the headers (roce_mbuf_prepare_icrc()), for the caller to
 * continue over the payload it writes (roce_crc32_copy) and hand to rocemu_engine_pkt_send_crc().
 * The frame is only written, never read back. */
struct rte_mbuf *rocemu_engine_pkt_alloc(struct rocemu_engine *e, const struct roce_pkt *pkt,
					 uint8_t **payload, uint32_t *crc);
/** Finish (pad, ICRC from crc: the header CRC of rocemu_engine_pkt_alloc() continued over the
 * payload) and transmit. 0 or -errno (mbuf consumed either way). */
int rocemu_engine_pkt_send_crc(struct rocemu_engine *e, struct rte_mbuf *m,
			       const struct roce_pkt *pkt, uint32_t crc);

/* qp_flush.c */
/** Complete every WQE of the send queue: those not finished with IBV_WC_WR_FLUSH_ERR. */
void rocemu_qp_flush_sq(struct rocemu_qp *qp);
/** Move to ERR and flush both queues (IBV_WC_WR_FLUSH_ERR); raises QP_FATAL when fatal. */
void rocemu_qp_to_error(struct rocemu_qp *qp, bool fatal);
/** UC/UD send error: to SQE, flushing the send queue only. */
void rocemu_qp_to_sqe(struct rocemu_qp *qp);
/** Complete receive WQE wr_id with IBV_WC_WR_FLUSH_ERR (engine lock held). */
void rocemu_qp_flush_recv_wqe(struct rocemu_qp *qp, uint64_t wr_id);
/** Append a completion; on CQ overflow the QP goes to ERR. */
void rocemu_qp_complete(struct rocemu_qp *qp, bool send, const struct rocemu_wc *wc,
			bool solicited);
/** Deliver the completion of a retired send WQE (when signaled or failed). */
void rocemu_qp_send_wc(struct rocemu_qp *qp, const struct rocemu_send_wqe *w);

/* qp.c */
/** Take the next receive WQE from the RQ or the SRQ. -EAGAIN when none. */
int rocemu_qp_take_recv(struct rocemu_qp *qp, struct rocemu_recv_wqe *out);
/** Give the SQ and RQ rings back to where they came from (parent domain or heap). */
void rocemu_qp_free_rings(struct rocemu_qp *qp);

/* qp_modify.c */
/** Path MTU enum -> bytes (0 if invalid). */
uint32_t rocemu_mtu_bytes(enum ibv_mtu mtu);
/** The row of a QP type in the attribute tables; -1 for a type not supported. */
int rocemu_qp_type_index(enum ibv_qp_type t);

/* qp_states.c */
/** The machine's name in traces ("resp-msg", "resp-seq", "comp"). */
const char *rocemu_sm_name(enum rocemu_sm m);
/** How many states the machine has. */
unsigned rocemu_sm_states(enum rocemu_sm m);
/** A state's name ("?" for none). */
const char *rocemu_sm_state_name(enum rocemu_sm m, unsigned s);
/** Is from -> to in the machine's table of legal transitions? */
bool rocemu_sm_legal(enum rocemu_sm m, unsigned from, unsigned to);
/** Check (an illegal one is counted: illegal_state_transitions) and trace a
 * change from -> to (from != to); the caller stores the new state. */
void rocemu_sm_change(struct rocemu_qp *qp, enum rocemu_sm m, unsigned from, unsigned to,
		      const char *why);

/* Every change of a responder or completer state goes through these. */
static inline void rocemu_resp_msg_set(struct rocemu_qp *qp, enum resp_msg_state to,
				       const char *why)
{
	if (qp->resp.msg != to) {
		rocemu_sm_change(qp, ROCEMU_SM_RESP_MSG, qp->resp.msg, to, why);
		qp->resp.msg = to;
	}
}

static inline void rocemu_resp_seq_set(struct rocemu_qp *qp, enum resp_seq_state to,
				       const char *why)
{
	if (qp->resp.seq != to) {
		rocemu_sm_change(qp, ROCEMU_SM_RESP_SEQ, qp->resp.seq, to, why);
		qp->resp.seq = to;
	}
}

static inline void rocemu_comp_set(struct rocemu_qp *qp, enum comp_state to, const char *why)
{
	if (qp->comp.state != to) {
		rocemu_sm_change(qp, ROCEMU_SM_COMP, qp->comp.state, to, why);
		qp->comp.state = to;
	}
}

/* rc_requester.c (RC and UC) */
/** Send what the window allows; returns packets sent. */
unsigned rocemu_req_run(struct rocemu_qp *qp, unsigned budget);
/** Go back to psn and resend from there (go-back-N). */
void rocemu_req_rewind(struct rocemu_qp *qp, uint32_t psn);
/** Has the requester anything to send now? */
bool rocemu_req_pending(const struct rocemu_qp *qp);
/** Stall probe: resend the packet at psn, with AckReq. 1 if a packet went out. */
unsigned rocemu_req_probe(struct rocemu_qp *qp, uint32_t psn);
/** The send window in use (packets). */
uint32_t rocemu_req_window(const struct rocemu_qp *qp);
/** Loss seen (sequence NAK, READ gap, probe: timeout = false/true): shrink the window. */
void rocemu_req_window_loss(struct rocemu_qp *qp, bool timeout);
/** comp.psn moved forward by acked packets: grow the window, take an RTT sample. */
void rocemu_req_window_progress(struct rocemu_qp *qp, uint32_t acked, uint64_t now);

/* rc_completer.c */
void rocemu_comp_rx(struct rocemu_qp *qp, struct rte_mbuf *m, const struct roce_pkt *pkt);
/** Retire finished WQEs at the head of the SQ, in order. */
void rocemu_comp_retire(struct rocemu_qp *qp);
/** Timer work: retransmission timeout and RNR back-off. Returns work done. */
unsigned rocemu_comp_timers(struct rocemu_qp *qp, uint64_t now);
/** (Re)arm or stop the retransmission timer after progress. */
void rocemu_comp_rearm(struct rocemu_qp *qp, uint64_t now);
/** Earliest deadline of the QP's timers, UINT64_MAX when none. */
uint64_t rocemu_comp_next_deadline(const struct rocemu_qp *qp);
/** Map a memory error on a local access to a WC status. */
enum ibv_wc_status rocemu_comp_local_status(enum rocemu_mem_err err);

/* rc_responder.c, rc_responder_res.c, rc_responder_ack.c (RC and UC) */
void rocemu_resp_rx(struct rocemu_qp *qp, struct rte_mbuf *m, const struct roce_pkt *pkt);
/** An XRC request: to the responder with the XRC SRQ its XRCETH names (rc_responder.c). */
void rocemu_xrc_resp_rx(struct rocemu_qp *qp, struct rte_mbuf *m, const struct roce_pkt *pkt);
/** Flush the coalesced ACK, if one is pending. */
void rocemu_resp_flush_ack(struct rocemu_qp *qp);
/** Stream READ responses; returns packets sent. */
unsigned rocemu_resp_run(struct rocemu_qp *qp, unsigned budget);

/* raw.c (IBV_QPT_RAW_PACKET) */
/** Send whole Ethernet frames from the SQ; returns frames sent. */
unsigned rocemu_raw_send(struct rocemu_qp *qp, unsigned budget);
/** The port's look at every received frame: true when a NORMAL rule took it. */
bool rocemu_raw_rx(void *ctx, struct rte_mbuf *m);
/** Free every rule (engine teardown). */
void rocemu_raw_free_all(struct rocemu_engine *e);

/* rate.c (send rate limits) */
/** Take credit for a packet of payload bytes now; false: it waits (rate.until_ns). */
bool rocemu_rate_take(struct rocemu_qp *qp, uint32_t payload, uint64_t now);
/** After rocemu_rate_take: would the next full packet wait for credit? */
bool rocemu_rate_will_wait(const struct rocemu_qp *qp);
/** The wait is over at now: 1 (work), else 0. */
unsigned rocemu_rate_timer(struct rocemu_qp *qp, uint64_t now);
/** A connected QP's address vector set its static rate (an enum ibv_rate). */
void rocemu_rate_from_av(struct rocemu_qp *qp, uint8_t static_rate, uint32_t port_mbps);
bool rocemu_rate_valid_static(uint8_t static_rate);
int rocemu_rate_set(struct rocemu_qp *qp, uint32_t kbps, uint32_t burst);

/* ud.c */
void rocemu_ud_rx(struct rocemu_qp *qp, struct rte_mbuf *m, const struct roce_pkt *pkt);

/* mcast.c */
/** A datagram to the multicast QPN: a copy to every QP attached to its group. */
void rocemu_mcast_rx(struct rocemu_engine *e, struct rte_mbuf *m, const struct roce_pkt *pkt);
/** At engine teardown. */
void rocemu_mcast_free_all(struct rocemu_engine *e);
unsigned rocemu_ud_send(struct rocemu_qp *qp, unsigned budget);

/** The connected services with acknowledgements: RC and both halves of XRC. */
static inline bool qp_is_reliable(const struct rocemu_qp *qp)
{
	return qp->type == IBV_QPT_RC || qp->type == IBV_QPT_XRC_SEND ||
	       qp->type == IBV_QPT_XRC_RECV;
}

/* xrc.c */
/** XRC_RECV: the SRQ named in a request's XRCETH, if it belongs to the QP's domain. */
struct rocemu_srq *rocemu_xrc_srq_for(struct rocemu_qp *qp, uint32_t srqn);
/** Free every domain (engine teardown). */
void rocemu_xrc_free_all(struct rocemu_engine *e);

static inline struct rocemu_send_wqe *sq_at(const struct rocemu_qp *qp, uint32_t idx)
{
	return &qp->sq[idx & qp->sq_mask];
}

#endif /* ROCEMU_TRANSPORT_H */
