/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * rsockets inside rocemu's librdmacm: the socket object shared by
 * rsocket.c (sockets, connection set-up, options, close), rsocket_io.c (data
 * path: send, receive, iomap, completion processing, waiting) and
 * rsocket_poll.c (rpoll, rselect) and rsocket_keepalive.c.
 *
 * Threads: every rsocket has one mutex for all of its state. A thread that
 * must wait releases it and blocks in poll() on the socket's descriptors
 * (completion channel, CM event channel) and the process-wide signal fd;
 * whoever changes a socket's state while another thread is blocked raises
 * the signal (rs_signal_blocked), so no waiter sleeps through a change some
 * other thread consumed. All descriptors are non-blocking.
 */
#ifndef ROCEMU_RSOCKET_INT_H
#define ROCEMU_RSOCKET_INT_H

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "rsocket_stream.h"

enum rs_state {
	RS_INIT,
	RS_BOUND,
	RS_LISTENING,
	RS_RESOLVING, /* active: address/route resolution or REQ out */
	RS_ACCEPTING, /* passive: REP out, waiting for the RTU */
	RS_CONNECTED, /* data may flow (see stream.readable/writable) */
	RS_DISCONNECTED,
	RS_ERROR, /* connection failed or broken: err says why */
};

/** A local buffer mapped with riomap. */
struct rs_iomap_mr {
	struct rs_iomap_mr *next;
	struct ibv_mr *mr;
	uint64_t offset;
	int index; /**< entry of the peer's target iomap; -1: local only */
	bool sent; /**< written to the peer */
};

/** The options of a socket that one accepted from it starts with. */
struct rs_opts {
	uint32_t sbuf_size, rbuf_size;
	uint16_t sq_size, rq_size;
	uint32_t sq_inline;
	unsigned iomap_size;
	uint64_t so_opts, tcp_opts; /* on/off options, 1 << optname */
	unsigned keepalive_s;	    /* TCP_KEEPIDLE */
};

struct rsocket {
	int index; /**< the socket number: the fd of its CM event channel */
	pthread_mutex_t lock;
	enum rs_state state;
	int err;      /**< SO_ERROR */
	int fd_flags; /**< F_GETFL/F_SETFL (O_NONBLOCK) */
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;

	/* Options (set before the connection). */
	struct rs_opts opt;
	uint64_t ipv6_opts; /* on/off options, 1 << optname: not inherited */
	bool keepalive;
	uint64_t keepalive_due_ns;

	/* Connection resources. */
	struct ibv_comp_channel *cq_ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint8_t *rbuf, *sbuf, *target;
	size_t target_len;
	struct ibv_mr *rmr, *smr, *tmr;
	uint32_t sbuf_head; /**< where the next send-buffer copy goes */
	bool cq_armed;
	unsigned cq_events; /**< taken, not yet acknowledged */
	struct rs_stream s;
	bool have_stream;
	int rcv_dead; /**< receives to repost */

	struct rs_iomap_mr *iomaps; /**< riomap'ed buffers */
	bool iomap_pending;	    /**< some are not sent yet */
};

/* rsocket.c */
struct rsocket *rs_lookup(int index);
/** Connection set-up steps driven by CM events (lock held). */
void rs_cm_events(struct rsocket *rs);
int rs_fail(int err); /* errno = err, return -1 */
/** An event is queued on ch (no system call). */
bool rs_channel_has_event(struct rdma_event_channel *ch);

/* rsocket_io.c */
int rs_create_ep(struct rsocket *rs);
void rs_free_ep(struct rsocket *rs);
/** Process completions and CM events, send due credit updates (lock held).
 * Returns true if anything happened. */
bool rs_progress(struct rsocket *rs);
/** Block until something may have changed on rs (lock held, released while
 * blocked). timeout_ms < 0: no limit. Returns 0, or -EAGAIN on timeout. */
int rs_block(struct rsocket *rs, int timeout_ms);
/** The descriptors a blocked thread watches for rs, and arming its CQ. */
int rs_wait_fds(struct rsocket *rs, struct pollfd *fds);
void rs_wait_done(struct rsocket *rs, const struct pollfd *fds, int n);
/** Send a control message, waiting at most timeout_ms for a control slot
 * (lock held); -ETIMEDOUT. */
int rs_send_ctrl(struct rsocket *rs, enum rs_ctrl ctrl, int timeout_ms);
/** Wait at most timeout_ms until every send has completed (lock held). */
int rs_drain_sends(struct rsocket *rs, int timeout_ms);
void rs_set_error(struct rsocket *rs, int err);
void rs_post_keepalive(struct rsocket *rs);

/* The process-wide wake-up of blocked threads (rsocket_io.c). */
int rs_signal_fd(void);
void rs_blocked_enter(void);
void rs_blocked_exit(void);
void rs_signal_blocked(void);

/* rsocket_keepalive.c */
int rs_keepalive_update(struct rsocket *rs);
void rs_keepalive_remove(struct rsocket *rs);

#endif /* ROCEMU_RSOCKET_INT_H */
