/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The state of one rsocket stream connection, as the protocol sees it: the
 * receive ring and the credits we give, the target buffers and credits the
 * peer gave us, control-message slots, iomap entries. No verbs here: the
 * caller (rsocket_io.c) posts what these functions decide and feeds back the
 * immediate data it receives and the completions of its sends. That keeps
 * every decision about untrusted input in one place, which the fuzz target
 * (tests/rsocket/fuzz_rsocket.c) drives directly.
 *
 * Flow control is rdma-core's (docs/rdmacm.md, "rsockets"):
 * - The receive buffer (rbuf) is a ring used in two halves. The peer gets
 *   the first half in the connection data and each further half through a
 *   credit update that writes an SGE into its target SGL, once the
 *   application has read a half's worth. The peer fills a buffer completely
 *   before it uses the next, so data lands in the ring in order.
 * - Credits count messages: the peer may send while its count of data
 *   messages differs from the limit we last sent (RS_OP_SGL carries it:
 *   messages we have read + our receive queue size).
 * - At most ctrl_max control messages (credit updates, shutdown) are
 *   outstanding; they rely on RNR retry for a receive WQE at the peer.
 *
 * Not thread-safe: the caller serialises (one lock per rsocket).
 */
#ifndef ROCEMU_RSOCKET_STREAM_H
#define ROCEMU_RSOCKET_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rsocket_wire.h"

/* The smallest free send-buffer space worth a transfer (rdma-core: RS_SNDLOWAT). */
#define RS_SNDLOWAT 2048
/* Control messages in flight at most (rdma-core: RS_QP_CTRL_SIZE). */
#define RS_CTRL_MAX 4

/*
 * What rsocket input from the peer was refused: each counted, each ends the
 * connection (ECONNRESET) except where noted. Printed at exit with
 * ROCEMU_STATS=1 (rsocket.c), beside the CM's counters.
 */
#define RS_STATS(X)                                                                                \
	X(conn_bad_data)   /* connection data too short, another version, bad SGL: rejected */     \
	X(rx_data_overrun) /* RS_OP_DATA longer than the buffer space we granted */                \
	X(rx_msg_overflow) /* more unread data messages than credits given */                      \
	X(rx_bad_op)	   /* reserved operation or RS_OP_WRITE in the immediate data */           \
	X(rx_bad_sge)	   /* a target SGE that wraps the address space */                         \
	X(rx_bad_iomap)	   /* RS_OP_IOMAP_SGL index beyond our iomap, or entry wraps */            \
	X(rx_bad_ctrl)	   /* unknown control message (ignored, not fatal) */                      \
	X(rx_no_imm)	   /* a receive completion without immediate data (ignored) */             \
	X(bad_iomap_write) /* riowrite to an offset no peer iomap entry covers */

enum rs_counter {
#define RS_STAT_ENUM(n) RS_STAT_##n,
	RS_STATS(RS_STAT_ENUM)
#undef RS_STAT_ENUM
	    RS_STAT_COUNT
};
/** The counters by enum rs_counter; any thread counts (relaxed atomics). */
extern uint64_t rs_stats[RS_STAT_COUNT];
#define RS_COUNT(name) __atomic_fetch_add(&rs_stats[RS_STAT_##name], 1, __ATOMIC_RELAXED)
/** The printed name of counter i ("rx_bad_op"); NULL past the last. */
const char *rs_stat_name(unsigned i);
/** ROCEMU_STATS at exit (stats_print.h): "rocemu: rsocket NAME VALUE". */
void rs_stats_report(void);

/** What the caller gives a stream: its local buffers and queue sizes. */
struct rs_stream_cfg {
	uint8_t *rbuf;	    /**< receive ring, registered for remote write */
	uint32_t rbuf_size; /**< even, at least 2 */
	uint32_t rbuf_rkey;
	volatile uint8_t *target; /**< RS_SGL_SIZE SGEs, then iomap_size entries */
	uint32_t target_rkey;
	unsigned target_iomap_size; /**< entries of our target iomap */
	uint16_t rq_size, sq_size;  /**< sq_size > RS_CTRL_MAX */
	uint32_t sbuf_size;
};

struct rs_stream {
	struct rs_stream_cfg cfg;
	bool peer_net; /**< the peer reads big-endian descriptors */
	bool readable; /**< the peer may still send us data */
	bool writable; /**< we may still send */

	/* Receive side. */
	uint32_t *rmsg; /**< lengths of data messages not yet read (ring of rq_size) */
	unsigned rmsg_head, rmsg_count;
	uint32_t rbuf_read;	  /**< ring offset of the next byte to read */
	uint32_t rbuf_free;	  /**< bytes read and not yet granted again */
	uint32_t grant_off;	  /**< ring offset of the next half to grant */
	uint64_t unfilled;	  /**< bytes granted to the peer and not yet written */
	uint16_t rseq_no;	  /**< data messages read */
	uint16_t rseq_comp;	  /**< send a credit update when rseq_no reaches it */
	struct rs_sge remote_sgl; /**< the peer's target SGL (length: entries) */
	unsigned remote_sge;	  /**< the entry our next grant goes to */

	/* Send side. */
	struct rs_sge target[RS_SGL_SIZE]; /**< buffers the peer granted us, consumed */
	unsigned target_sge;		   /**< the one we fill now */
	unsigned next_grant;		   /**< the entry the peer's next grant goes to */
	uint16_t sseq_no, sseq_comp;	   /**< data messages sent; limit from the peer */
	unsigned ctrl_out;		   /**< control messages in flight */
	unsigned sqe_avail;		   /**< send WQEs free for data */
	uint32_t sbuf_avail;		   /**< send-buffer bytes not in flight */

	/* Direct placement (riomap/riowrite). */
	struct rs_sge remote_iomap; /**< the peer's target iomap (length: entries) */
	struct rs_iomap *iomap;	    /**< our view of the peer's mappings */
	bool *iomap_valid;
};

/** Completions of our sends, by what they carried (kept in the wr_id). */
enum rs_send_kind {
	RS_SEND_DATA = 1,   /* data message (len bytes of the send buffer) */
	RS_SEND_CTRL = 2,   /* credit update or control message */
	RS_SEND_IOMAP = 3,  /* iomap entry */
	RS_SEND_DIRECT = 4, /* direct write (len bytes of the send buffer) */
};

/** What rs_stream_rx() found (bits). */
enum {
	RS_RX_DATA = 1,	      /* data to read */
	RS_RX_CREDITS = 2,    /* we may be able to send more */
	RS_RX_SHUTDOWN = 4,   /* the peer sends no more */
	RS_RX_DISCONNECT = 8, /* the peer is gone */
};

int rs_stream_init(struct rs_stream *s, const struct rs_stream_cfg *cfg);
void rs_stream_fini(struct rs_stream *s);
/** Our connection data (addresses of cfg's buffers). */
void rs_stream_local_conn(const struct rs_stream *s, struct rs_conn *c);
/** Take the peer's connection data (checked by rs_conn_get). */
void rs_stream_peer_conn(struct rs_stream *s, const struct rs_conn *c);

/** One receive completion: its immediate data (host order) and byte_len
 * (the length of the RDMA WRITE it completed). RS_RX_* bits, or -EPROTO: the
 * peer broke the protocol (counted), the connection must end. */
int rs_stream_rx(struct rs_stream *s, uint32_t imm, uint32_t byte_len);
static inline bool rs_stream_have_data(const struct rs_stream *s)
{
	return s->rmsg_count != 0;
}
/** Bytes received and not yet read. */
size_t rs_stream_unread(const struct rs_stream *s);
/** Copy up to len received bytes to buf; without peek they are consumed. */
size_t rs_stream_read(struct rs_stream *s, void *buf, size_t len, bool peek);

/** A credit update is due and a control slot is free. */
bool rs_stream_credit_due(const struct rs_stream *s);
struct rs_credit {
	uint32_t imm;
	bool with_sge; /* an RS_SGE_LEN-byte descriptor goes with it */
	uint8_t sge[RS_SGE_LEN];
	uint64_t raddr; /* where it goes in the peer's target SGL */
	uint32_t rkey;
};
/** Take a control slot and make the credit update. */
void rs_stream_credit_take(struct rs_stream *s, struct rs_credit *c);

/** A control slot is free. */
static inline bool rs_stream_ctrl_avail(const struct rs_stream *s)
{
	return s->ctrl_out < RS_CTRL_MAX;
}
/** Take a control slot for a control message; returns its immediate data. */
uint32_t rs_stream_ctrl_take(struct rs_stream *s, enum rs_ctrl ctrl);

/** A data message can go now (send WQE, send buffer, credit, target buffer). */
bool rs_stream_can_send(const struct rs_stream *s);
/** Reserve the next data message of at most want bytes (>0, can_send true):
 * returns its length, the peer address and rkey to write to. */
uint32_t rs_stream_send_take(struct rs_stream *s, uint32_t want, uint64_t *raddr, uint32_t *rkey);
/** All data and control sends have completed. */
bool rs_stream_sends_done(const struct rs_stream *s);
/** A data message or direct write of len bytes went inline: it holds no
 * send-buffer space (rs_stream_send_take counted it). */
void rs_stream_send_done_inline(struct rs_stream *s, uint32_t len);
/** A send of this kind and length completed. */
void rs_stream_send_done(struct rs_stream *s, enum rs_send_kind kind, uint32_t len);

/** Peer iomap entries: reserve the write of our entry `index` (a credit and a
 * WQE, as a data message). -EINVAL: index beyond the peer's iomap; -EAGAIN. */
int rs_stream_iomap_take(struct rs_stream *s, unsigned index, uint64_t *raddr, uint32_t *rkey);
/** The number of entries of the peer's target iomap. */
static inline unsigned rs_stream_peer_iomap_size(const struct rs_stream *s)
{
	return s->remote_iomap.length;
}
/** Reserve a direct write of at most want bytes at stream offset `offset`
 * into the peer's mapped buffer: its length, address and rkey. -EINVAL: no
 * peer mapping covers offset; -EAGAIN: no WQE or send buffer now. */
int rs_stream_direct_take(struct rs_stream *s, uint64_t offset, uint32_t want, uint32_t *len,
			  uint64_t *raddr, uint32_t *rkey);

#endif /* ROCEMU_RSOCKET_STREAM_H */
