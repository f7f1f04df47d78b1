/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rocemu inspect: internal interfaces between the capture reader
 * (inspect_capture.c), the conversation analyser (inspect_flow.c), the
 * reports (inspect_report.c), the pictures (inspect_svg.c) and the latency
 * histogram (inspect_hist.c). Nothing here is used outside tools/inspect/.
 */
#ifndef ROCEMU_INSPECT_H
#define ROCEMU_INSPECT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "roce_wire.h"

/* ------------------------------------------------------------------------ */
/* One captured frame, decoded.                                              */

/** What a frame is, as far as the inspector cares. */
enum insp_class {
	INSP_NON_IP,	     /**< ARP, LLDP, anything that is not IPv4/IPv6 */
	INSP_NON_UDP,	     /**< IP but not UDP (TCP, ICMP, ...) */
	INSP_UDP_OTHER,	     /**< UDP to a port other than 4791 */
	INSP_SHORT,	     /**< capture too short to classify (link or IP header cut) */
	INSP_ROCE,	     /**< UDP/4791 with a BTH the codec accepted */
	INSP_ROCE_MALFORMED, /**< UDP/4791 the codec rejected */
	INSP_RECORD,	     /**< rocemu's own record (capture point), EtherType 0x88B5 */
	INSP_LOST,	     /**< a frame rocemu's fault injector dropped, as rocemu records it */
	INSP_CLASS_COUNT,
};

/** ICRC verdict. */
enum insp_icrc {
	INSP_ICRC_OK,
	INSP_ICRC_BAD,
	INSP_ICRC_UNCHECKED, /**< frame truncated by the capture: the ICRC is not there */
};

/** rocemu's own records in its captures (emulator/port/README.md, "Capture"). */
enum insp_annot {
	INSP_ANNOT_NONE = 0,
	INSP_ANNOT_CAPTURE_POINT = 1, /**< which port took the capture: MAC, GIDs, name */
	INSP_ANNOT_LOST_TX = 2,	      /**< the fault injector dropped this frame on transmit */
	INSP_ANNOT_LOST_RX = 3,	      /**< ... on receive */
};

#define INSP_CP_MAX 16 /* addresses of a capture point kept */

/** Where a capture was taken, as far as it says. */
struct insp_capture_point {
	const char *how; /**< "rocemu record", "outgoing frames"; NULL = unknown */
	bool has_mac;
	uint8_t mac[6];
	unsigned n;
	uint8_t gids[INSP_CP_MAX][16];
	char name[65];
};

struct insp_frame {
	uint64_t index;	  /**< frame number in its file, from 1 (as Wireshark numbers) */
	unsigned file_no; /**< which input file, from 0 */
	uint64_t ts_ns;	  /**< capture time, ns since the epoch */
	uint32_t caplen;  /**< bytes captured */
	uint32_t wirelen; /**< bytes on the wire */
	enum insp_class cls;
	bool truncated;		       /**< caplen < wirelen (snaplen) */
	bool headers_ok;	       /**< every header up to the payload is captured and parsed */
	enum roce_parse_status status; /**< codec verdict (ICRC not verified) */
	enum insp_icrc icrc;
	/* Fields read from the frame even when the codec rejected it (has_bth). */
	bool has_bth;
	uint8_t ip_version;
	uint8_t src_gid[16], dst_gid[16];
	uint16_t sport;
	uint8_t tclass;
	uint8_t opcode;
	uint32_t dqpn;
	uint32_t psn;
	unsigned vlans;	   /**< number of VLAN tags */
	uint16_t vlan_tci; /**< the outer one */
	/** The full descriptor, valid when headers_ok. */
	struct roce_pkt pkt;
	uint8_t annot; /**< enum insp_annot: a rocemu record; a lost frame is decoded inside */
	int8_t
	    outgoing; /**< Linux cooked capture: 1 sent by the capturing host, 0 not, -1 unknown */
	struct insp_capture_point cp; /**< INSP_ANNOT_CAPTURE_POINT: what the record says */
};

/** Frame reader state for one capture handle (inspect_capture.c). */
struct insp_decoder {
	int dlt;
	uint8_t *scratch; /**< zero-filled copy for snaplen-truncated frames */
	uint32_t scratch_len;
};

/** 0 if the link type is one the inspector reads, else -EPROTONOSUPPORT. */
int insp_link_supported(int dlt);
/** Decode one frame. Never reads outside data[0..caplen). */
void insp_decode(struct insp_decoder *d, const uint8_t *data, uint32_t caplen, uint32_t wirelen,
		 struct insp_frame *f);
void insp_decoder_free(struct insp_decoder *d);

/* ------------------------------------------------------------------------ */
/* Latency histogram: log-linear buckets, bounded memory, ~6% resolution.    */

#define INSP_HIST_SUB 16
#define INSP_HIST_EXP 40
struct insp_hist {
	uint64_t n;
	uint64_t min, max;
	double sum;
	uint32_t bucket[INSP_HIST_EXP * INSP_HIST_SUB];
};

void insp_hist_add(struct insp_hist *h, uint64_t v);
/** Value at quantile q in [0,1] (bucket midpoint, clamped to [min,max]). 0 if empty. */
uint64_t insp_hist_quantile(const struct insp_hist *h, double q);
void insp_hist_merge(struct insp_hist *into, const struct insp_hist *from);

/* ------------------------------------------------------------------------ */
/* Conversations.                                                            */

enum insp_msg_kind {
	INSP_MSG_SEND,
	INSP_MSG_WRITE,
	INSP_MSG_READ,
	INSP_MSG_ATOMIC,
	INSP_MSG_KINDS
};

struct insp_msg {
	uint32_t start_psn, end_psn;
	uint8_t kind;
	bool ended;	    /**< its last request packet has been seen */
	bool partial_start; /**< its first packets were missing when it opened */
	bool partial_end;   /**< closed by the next FIRST before its LAST came */
	uint64_t bytes;
	uint64_t t_last; /**< first sighting of its last packet */
};

struct insp_gap {
	uint32_t first, last; /**< missing PSNs, inclusive */
	uint64_t frame;	      /**< frame that revealed the gap */
	unsigned file;
	uint64_t ts;
	bool naked; /**< the responder NAKed (sequence error) inside it */
};

#define INSP_GAPS_MAX	 16
#define INSP_NAK_CODES	 5
#define INSP_SERIES_BINS 512

/** Time series for --plot: per bin, payload bytes and latency stats. */
struct insp_series {
	uint64_t bytes[INSP_SERIES_BINS];
	uint64_t lat_sum[INSP_SERIES_BINS];
	uint64_t lat_max[INSP_SERIES_BINS];
	uint32_t lat_n[INSP_SERIES_BINS];
};

/*
 * Packets per opcode. A direction sees a handful of opcodes, so the first
 * INSP_OPS_INLINE live inline and a full table is allocated only past them:
 * a capture with a million small flows stays small.
 */
#define INSP_OPS_INLINE 8
struct insp_opcounts {
	uint8_t n;
	uint8_t op[INSP_OPS_INLINE];
	uint64_t count[INSP_OPS_INLINE];
	uint64_t *all; /**< 256 counters once more than INSP_OPS_INLINE opcodes were seen */
};

void insp_ops_add(struct insp_opcounts *c, uint8_t op);
uint64_t insp_ops_get(const struct insp_opcounts *c, uint8_t op);

/**
 * One direction of a conversation: every packet from one host to one QP
 * (src, dst, dqpn; for UD also the source QP from the DETH). All of it is
 * what the peer QP on `src` sends to QP `dqpn`: its requests and its
 * responses to dqpn's requests. Two halves, paired, make a conversation.
 */
struct insp_half {
	uint8_t src[16], dst[16];
	uint32_t dqpn;
	uint32_t src_qp;   /**< UD: DETH source QP; else INSP_QPN_UNKNOWN */
	uint8_t transport; /**< enum roce_transport of its first non-CNP packet, 0xFF none */
	unsigned id;	   /**< creation order */
	struct insp_half *peer;
	const char *paired_by; /**< "response PSN", "UD source QP", "UDP source port" */
	bool self_connected;   /**< RC QP connected to itself: requests and responses here */
	uint32_t pair_tries;   /**< responses that found no request half yet */
	bool is_first;	       /**< the half that represents the conversation in reports */
	uint16_t sport;
	bool sport_varies;
	uint64_t first_ts, last_ts;

	uint64_t pkts, wire_bytes, payload_bytes;
	struct insp_opcounts ops; /**< packets per opcode (insp_ops_add/insp_ops_get) */

	/* the request stream this host sends to dqpn */
	bool req_seen;
	uint32_t req_first, req_next; /**< first PSN seen, one past the highest */
	uint32_t read_span_end;	      /**< highest PSN a pending READ may occupy */
	bool read_span;
	uint32_t oldest_unacked;
	uint64_t last_req_ts;
	uint64_t head_ts;      /**< when the newest request (the head) was first seen */
	uint32_t last_req_psn; /**< PSN of the request packet before (last_req_valid) */
	bool last_req_valid;
	uint32_t retx_next, retx_end; /**< go-back-N episode in progress when different */
	struct insp_event *retx_ev;   /**< the event of that episode (its packet count grows) */
	bool nak_pending, nak_rnr;
	uint32_t nak_psn;
	/** AckReq of the last sighting of the last 256 PSNs (bit psn & 255): a copy
	 * that differs in it from the one before is the sender's, not the network's */
	uint64_t ackreq_bits[4];
	struct insp_gap gaps[INSP_GAPS_MAX];
	unsigned ngaps;
	uint64_t req_pkts, retransmitted, duplicates, out_of_seq, reordered, gaps_seen,
	    gaps_untracked, psn_missing;
	uint64_t capture_lost; /**< PSNs the responder acknowledged but the capture never had */

	/* responses this host sends to dqpn's requests */
	uint64_t acks, naks[INSP_NAK_CODES + 1], rnr_naks, read_resps, atomic_acks, repeated_acks,
	    unmatched_responses;
	uint64_t rnr_timer[32];
	uint64_t unmatched_frame; /**< first response matching no request (not judged yet) */
	unsigned unmatched_file;
	uint32_t unmatched_psn;
	uint64_t unmatched_ts;
	bool last_ack_valid;
	uint32_t last_ack_psn;
	uint8_t last_ack_syndrome;

	uint64_t cnps, ecn_ce, fecn, becn, icrc_errors, malformed, truncated;
	uint64_t fault_lost; /**< frames rocemu's fault injector dropped (rocemu's records) */

	/* messages this host requests */
	uint64_t msgs[INSP_MSG_KINDS], msg_bytes[INSP_MSG_KINDS];
	uint64_t msgs_completed, msgs_untracked, msgs_incomplete;
	struct insp_msg *ring;
	unsigned ring_cap, ring_head, ring_len;
	bool uc_open; /**< UC: a message is being assembled */
	uint64_t uc_open_bytes;
	struct insp_hist *lat;	/**< request -> completion, ns */
	uint64_t *series_bytes; /**< --plot only: payload bytes per bin */
};

#define INSP_QPN_UNKNOWN 0xFFFFFFFFu

/* Events: where something happened, for the report and --check. */
enum insp_event_kind {
	INSP_EV_GAP,
	INSP_EV_GAP_UNRECOVERED,
	INSP_EV_REORDERED,
	INSP_EV_RETRANSMIT,
	INSP_EV_DUPLICATE,
	INSP_EV_NAK,
	INSP_EV_RNR_NAK,
	INSP_EV_ICRC,
	INSP_EV_MALFORMED,
	INSP_EV_TRUNCATED,
	INSP_EV_NO_REQUEST,
	INSP_EV_UNANSWERED_BEFORE, /**< responses to requests the capture does not hold */
	INSP_EV_CAPTURE_LOSS,	   /**< a gap the responder acknowledged: lost by the capture */
	INSP_EV_CNP,
	INSP_EV_FAULT_LOST, /**< a frame rocemu's fault injector dropped (value: enum insp_annot) */
	INSP_EV_KINDS,
};

/** Why a request was sent again (INSP_EV_RETRANSMIT), strongest evidence first. */
enum insp_resend_cause {
	INSP_RESEND_NAK,     /**< after a sequence NAK at or before its PSN */
	INSP_RESEND_RNR,     /**< after an RNR NAK */
	INSP_RESEND_ACKREQ,  /**< its AckReq differs from its last sighting */
	INSP_RESEND_SILENCE, /**< long after the newest request: older than any network copy */
	INSP_RESEND_REPLAY,  /**< a step back from the request before: the network's copy
				  follows its original */
};

struct insp_event {
	uint64_t frame;
	unsigned file;
	uint8_t kind;
	bool violation;
	uint32_t psn, psn2;	/**< meaning depends on kind */
	uint32_t value;		/**< NAK code, RNR timer, parse status, packets resent, ... */
	uint8_t cause;		/**< INSP_EV_RETRANSMIT: enum insp_resend_cause */
	bool acked;		/**< INSP_EV_RETRANSMIT: its first PSN was already acknowledged */
	bool ackreq;		/**< INSP_EV_RETRANSMIT: its first packet asks for an ACK */
	bool since_copy;	/**< INSP_EV_RETRANSMIT: ns counts from its previous copy, else
				     from the newest request */
	uint64_t ns;		/**< INSP_EV_RETRANSMIT: the silence before it */
	struct insp_half *half; /**< may be NULL (malformed before the BTH) */
};

#define INSP_EVENTS_MAX 10000

enum insp_packet_note {
	INSP_NOTE_NONE = 0,
	INSP_NOTE_OOS = 1u << 0,
	INSP_NOTE_LATE = 1u << 1,
	INSP_NOTE_RETX = 1u << 2,
	INSP_NOTE_DUP = 1u << 3,
	INSP_NOTE_NO_REQUEST = 1u << 4,
	INSP_NOTE_LOST_TX = 1u << 5, /**< dropped by rocemu's fault injector on transmit */
	INSP_NOTE_LOST_RX = 1u << 6, /**< ... on receive */
};

/** Everything the analysis knows. */
struct insp_state {
	/* options that change the analysis */
	bool want_series;

	/* flow table (open addressing over halves) */
	struct insp_half **halves; /**< creation order */
	unsigned nhalves, halves_cap;
	struct insp_half **table;
	unsigned table_cap; /**< power of two */
	uint64_t flow_table_full;
	/** the flow table's hash key, drawn from getrandom per state: a capture
	 * crafted so that its flows collide (a probe chain as long as the table,
	 * O(n^2) to read) cannot know it */
	uint64_t hash_key[2];
	uint64_t table_probes; /**< slots looked at beyond the first (tests) */

	uint64_t frames, frames_by_class[INSP_CLASS_COUNT];
	uint64_t wire_bytes, truncated_frames, roce_truncated;
	uint64_t first_ts, last_ts;
	bool ts_valid;
	uint32_t pmtu_seen; /**< largest FIRST/MIDDLE payload: the path MTU */
	uint64_t parse_status[ROCE_PARSE_STATUS_COUNT];

	struct insp_event *events;
	unsigned nevents;
	uint64_t events_dropped;
	uint64_t violations;

	/* where the capture was taken (rocemu's record, or outgoing Linux cooked frames) */
	struct insp_capture_point cp;

	/* series time base, shared by every half (bins widen by doubling) */
	uint64_t series_t0;
	uint64_t series_bin_ns;
	struct insp_series *total_series;

	/* what the last insp_flow_packet() concluded, for --packets */
	unsigned last_notes;
	struct insp_half *last_half;
};

int insp_state_init(struct insp_state *s, bool want_series);
void insp_state_free(struct insp_state *s);
/** Account one decoded frame. */
void insp_flow_packet(struct insp_state *s, const struct insp_frame *f);
/** After the last frame: pair what is left, close gaps, count incomplete messages. */
void insp_flow_finish(struct insp_state *s);

/* helpers shared by the reports */
const char *insp_transport_name(uint8_t transport);
const char *insp_op_short(uint8_t opcode);
const char *insp_event_name(enum insp_event_kind k);
/** "nak", "rnr_nak", "ackreq", "silence" (enum insp_resend_cause). */
const char *insp_resend_cause_name(unsigned cause);
const char *insp_nak_name(unsigned code);
/** RNR NAK timer field to microseconds (IBA table 45). */
double insp_rnr_timer_us(unsigned code);
void insp_gid_text(const uint8_t gid[16], char *buf, size_t len);
/**
 * Where the latency of h's requests was measured: "requester" (the capture
 * was taken at the host that sent them: a round trip), "responder" (at the
 * host that answered: its turnaround), or "unknown".
 */
const char *insp_latency_point(const struct insp_state *s, const struct insp_half *h);
/** Write "12.3 us"-style text for a duration in ns. */
const char *insp_fmt_ns(uint64_t ns, char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* Reports.                                                                  */

struct insp_report_opts {
	bool json;
	bool check;
	unsigned max_events; /**< events listed in the text report */
	const char *const *files;
	unsigned nfiles;
};

/** One line per RoCEv2 frame (--packets); called right after insp_flow_packet(). */
void insp_print_packet(FILE *out, const struct insp_state *s, const struct insp_frame *f,
		       unsigned nfiles);
void insp_report_text(FILE *out, const struct insp_state *s, const struct insp_report_opts *o);
void insp_report_json(FILE *out, const struct insp_state *s, const struct insp_report_opts *o);
/** Print the violations (for --check) to out. */
void insp_report_violations(FILE *out, const struct insp_state *s,
			    const struct insp_report_opts *o);

/* ------------------------------------------------------------------------ */
/* Pictures.                                                                 */

/** One packet drawn on the ladder. */
struct insp_ladder_pkt {
	uint64_t ts;
	uint64_t frame;
	bool from_a; /**< sent by side A (left) */
	uint8_t opcode;
	uint32_t psn;
	uint8_t syndrome; /**< AETH, for ACK-like packets */
	bool ackreq;
	uint32_t payload;
	unsigned notes; /**< enum insp_packet_note */
	enum insp_icrc icrc;
	bool malformed, truncated;
};

struct insp_ladder {
	const struct insp_half *a, *b; /**< b may be NULL */
	struct insp_ladder_pkt *pkts;
	unsigned n, cap;
	uint64_t skipped; /**< beyond cap */
};

int insp_svg_ladder(FILE *out, const struct insp_ladder *l);
int insp_svg_plot(FILE *out, const struct insp_state *s);

#endif
