/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * rocemu's librdmacm: internal objects. One lock (cma_lock) guards every
 * list and every id's state; the CM thread (device.c) takes it to handle a
 * received MAD or a timer, the API functions take it for their work and
 * never hold it while blocking on an event channel.
 */
#ifndef ROCEMU_RDMACM_CMA_H
#define ROCEMU_RDMACM_CMA_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "cm_mad.h"

#ifdef CMA_NO_SYMVER
/* The CM state machine compiled into a test or fuzz target (tests/rdmacm). */
#define ROCEMU_PUBLIC(name)
#else
#include "rdmacm_symver.h"
/* After the body of each exported function: binds it to its version (gen_abi.py). */
#define ROCEMU_PUBLIC(name) ROCEMU_SYMVER_##name
#endif

#define CMA_GSI_RECVS		  64
#define CMA_GSI_SENDS		  64
#define CMA_GSI_BUF		  (40 + CM_MAD_SIZE)
#define CMA_MAX_AH		  32
#define ROCEMU_RDMACM_MAX_DEVICES 16
#define CMA_RESP_TIMEOUT	  18 /* 4.096 us * 2^18 = 1.07 s between retransmissions */
#define CMA_MAX_CM_RETRIES	  8
#define CMA_UDP_QKEY		  0x01234567u /* RDMA_UDP_QKEY */
#define ROCEMU_MCAST_QPN	  0xFFFFFFu   /* the multicast QPN */
/* A QP's local ACK timeout, 4.096 us * 2^19 = 2.1 s, as Linux's CM puts it in
 * a REQ over RoCE (the path's packet life time 18, CMA_IBOE_PACKET_LIFETIME,
 * plus one): a slow peer (a busy host, an emulated CPU) must not exhaust the
 * retries in half a second. Loss is recovered sooner than the timeout by the
 * requester's probes (docs/transport.md). */
#define CMA_ACK_TIMEOUT 19
/* Requests not yet accepted or rejected that one listener holds; more are
 * dropped (counted) so that a flood of forged REQs cannot grow memory. */
#define CMA_MAX_PENDING_REQ 256
/* A peer's DREQ: its DISCONNECTED waits at most this long for the program to
 * poll the completions its QP already had (cma.c, post_peer_disconnect), and
 * the CM thread looks again this often meanwhile. */
#define CMA_DISC_HOLD_NS 250000000ull
#define CMA_DISC_POLL_NS 1000000ull

/*
 * What the CM thread did with received MADs: every MAD that is dropped or
 * answered without touching a connection is counted under its reason.
 * Guarded by cma_lock; printed at exit with ROCEMU_STATS=1 (device.c).
 */
#define CMA_STATS(X)                                                                               \
	X(mad_rx)	    /* MADs handed to the CM (any content) */                              \
	X(drop_short)	    /* completion shorter than GRH + 256-byte MAD */                       \
	X(drop_bad_hdr)	    /* base version, class, class version or method not CM Send */         \
	X(drop_bad_attr)    /* attribute not handled (MRA, LAP, APR, unknown) */                   \
	X(drop_bad_grh)	    /* GRH area neither an IPv6 nor an IPv4 header */                      \
	X(drop_unknown_id)  /* REP/RTU/REJ/DREP/SIDR_REP naming no id of ours */                   \
	X(drop_wrong_peer)  /* names an id of ours but comes from another GID */                   \
	X(drop_wrong_state) /* the id is in a state where the message means nothing */             \
	X(drop_backlog) /* REQ/SIDR_REQ over the listener's backlog (at most CMA_MAX_PENDING_REQ)  \
			 */                                                                        \
	X(drop_no_listener) /* REQ/SIDR_REQ for no listener, and this process does not answer */   \
	X(dup_req)	    /* duplicate REQ/SIDR_REQ (answered again or ignored) */               \
	X(dup_rep)	    /* duplicate REP (RTU resent) */                                       \
	X(rej_no_listener)  /* REJ 8 / SIDR_REP status 1 sent for an unknown service */            \
	X(bad_cma_hdr)	    /* REQ/SIDR_REQ whose CMA private-data header is invalid */            \
	X(wrong_service)    /* REQ for a UD listener, SIDR_REQ for an RC one */                    \
	X(rej_transport)    /* REQ whose transport (RC/UC) is not the listener's QP type: REJ 9 */ \
	X(drep_stale)	    /* DREQ for no connection: stateless DREP */                           \
	X(tx_busy)	    /* MAD not sent: every send slot or cached AH still in use */          \
	X(disc_held)	    /* peer's DREQ: DISCONNECTED held for completions not yet polled */    \
	X(disc_hold_expired) /* ... and posted at CMA_DISC_HOLD_NS with some still unpolled */

enum cma_counter {
#define CMA_STAT_ENUM(n) CMA_STAT_##n,
	CMA_STATS(CMA_STAT_ENUM)
#undef CMA_STAT_ENUM
	    CMA_STAT_COUNT
};
/** The counters by enum cma_counter (cma_lock held to count). */
extern uint64_t cma_stats[CMA_STAT_COUNT];
#define CMA_COUNT(name) (cma_stats[CMA_STAT_##name]++)
/** The printed name of counter i ("drop_short"); NULL past the last. */
const char *cma_stat_name(unsigned i);
/** ROCEMU_STATS (stats_print.h): "rocemu: rdmacm cm NAME VALUE" on stderr. */
void cma_stats_report(void);

/** An opened rocemu device with its GSI agent (QP1). */
struct cma_device {
	struct ibv_context *verbs;
	struct ibv_pd *pd; /**< GSI buffers; also the default PD of rdma_create_qp */
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *gsi;
	struct ibv_mr *mr;
	uint8_t *buf; /**< CMA_GSI_RECVS receive slots, then CMA_GSI_SENDS send slots */
	unsigned send_next;
	struct {
		union ibv_gid dgid;
		int sgid_index;
		uint8_t tclass, sl;
		struct ibv_ah *ah;
		unsigned pending; /**< sends posted with it and not completed */
	} ah[CMA_MAX_AH];
	unsigned n_ah;
	/** The AH of the send in each send slot until its completion; NULL: free.
	 * An AH (and a slot) is reused only once the engine is done with it. */
	struct ibv_ah *slot_ah[CMA_GSI_SENDS];
	uint64_t guid;
	enum ibv_mtu active_mtu;
	int gid_len;
	union ibv_gid gids[16];
	uint8_t max_rd_atom;
	uint8_t rate; /**< enum ibv_rate of the port's link, for the REQ's packet rate */
	/** The XRC domain of the XRC_RECV QPs and XRC SRQs the library makes for
	 * ids that give none (opened on first use, as rdma-core's librdmacm). */
	struct ibv_xrcd *xrcd;
};

enum cma_state {
	CMA_IDLE,
	CMA_ADDR_BOUND,
	CMA_ADDR_RESOLVED,
	CMA_ROUTE_RESOLVED,
	CMA_LISTEN,
	CMA_REQ_SENT, /* active: REQ or SIDR_REQ out, waiting for REP/REJ */
	CMA_REP_RCVD, /* active without a QP: CONNECT_RESPONSE given, waiting for rdma_establish */
	CMA_REQ_RCVD, /* passive: CONNECT_REQUEST given, waiting for accept/reject */
	CMA_REP_SENT, /* passive: REP out, waiting for RTU */
	CMA_ESTABLISHED,
	CMA_DREQ_SENT,
	CMA_DISCONNECTED,
	CMA_DESTROYING,
};

struct cma_event;

/** A multicast group joined on an id (rdma_join_multicast). */
struct cma_mc {
	struct cma_mc *next;
	struct sockaddr_storage addr;
	union ibv_gid mgid;
	void *context;
	uint32_t flags; /**< RDMA_MC_JOIN_FLAG_* */
	bool attached;	/**< the id's QP was attached to it */
};

struct cma_channel {
	struct rdma_event_channel ch; /**< fd: an eventfd, one count per queued event */
	struct cma_event *head, *tail;
	bool sync;	  /**< created for an id without a channel (synchronous use) */
	unsigned waiters; /**< threads inside rdma_get_cm_event on it (cma_lock) */
	bool destroyed;	  /**< destroyed while waited on: its last waiter never returns */
};

struct cma_event {
	struct rdma_cm_event ev;
	struct cma_event *next;
	uint8_t pdata[CM_REP_PDATA];
};

struct cma_id {
	struct rdma_cm_id id; /**< public part; first */
	struct cma_id *next;  /**< in the list of all ids */
	enum cma_state state;
	struct cma_device *dev;
	int sgid_index;
	struct ibv_sa_path_rec path;
	bool bound;
	uint16_t port; /**< host order, bound/assigned source port */

	uint32_t local_comm_id, remote_comm_id;
	uint64_t tid;
	struct cma_id *listener;
	union ibv_gid remote_gid;
	int backlog;

	/* Connection parameters learned from the peer's REQ or REP. */
	uint32_t remote_qpn, remote_psn, local_psn, local_qpn;
	uint8_t remote_resp_res, remote_init_depth, retry_count, rnr_retry, local_ack_timeout;
	uint32_t flow_label; /**< of the path: ours in the REQ (active), the REQ's (passive) */
	/** Traffic class of the path (DSCP:6 ECN:2): rdma_set_option(TOS) on the
	 * active side, sent in the REQ; the REQ's on the passive side, as Linux's
	 * CM builds the passive AV from the REQ's path. */
	uint8_t tclass;
	/** Service level of the path: 0 on the active side (no SA, no
	 * VLAN netdev egress map to derive one from); the REQ's on the passive
	 * side, so a peer's priority (a VLAN's PCP) comes back on its QP. */
	uint8_t sl;
	uint8_t resp_res, init_depth; /* what we offered */
	enum ibv_mtu mtu;
	uint32_t remote_qkey;
	bool srq;

	/* The last message sent that awaits an answer (REQ, REP, DREQ, SIDR_REQ). */
	uint8_t mad[CM_MAD_SIZE];
	bool timer;
	uint64_t deadline_ns;
	unsigned retries;
	/* The last answer we sent (RTU, DREP), resent on a duplicate request. */
	uint8_t answer[CM_MAD_SIZE];
	bool have_answer;

	/* A peer's DISCONNECTED not posted yet (post_peer_disconnect). */
	bool disc_held;
	uint64_t disc_until_ns;
	struct ibv_context *disc_verbs; /**< the QP it waits for: context, number */
	uint32_t disc_qpn;

	struct cma_mc *mcs; /**< groups joined */

	bool own_cqs; /* rdma_create_qp made the CQs and channels */
	bool xrc_srq; /* id->srq is an XRC SRQ, completing into id->recv_cq */
	/** A passive endpoint's QP attributes (rdma_create_ep): each request
	 * rdma_get_request hands out gets its QP made with them. */
	struct ibv_qp_init_attr *ep_qp_attr;
	/** ECE (docs/rdmacm.md "ECE"): what this side offers (its QP's, or
	 * rdma_set_local_ece's) and what the peer's REQ or REP carried. */
	struct {
		uint32_t vendor_id, options;
	} local_ece, remote_ece;
	int events_pending;
};

extern pthread_mutex_t cma_lock;

/* device.c */
int cma_init(void);
struct cma_device *cma_devices(int *n);
struct cma_device *cma_device_of(struct ibv_context *verbs);
/** Send one MAD to the GSI of dgid (lock held), with traffic class tclass and
 * service level sl: a connection's MADs carry its path's, as Linux's CM sends
 * them (on a VLAN the SL is the frame's PCP). */
int cma_gsi_send(struct cma_device *d, int sgid_index, const union ibv_gid *dgid, uint8_t tclass,
		 uint8_t sl, const uint8_t *mad);
uint64_t cma_now_ns(void);
/** Completions of QP qpn of verbs still queued in its CQs (0 when it
 * cannot tell, or the QP is gone). */
unsigned cma_qp_queued(struct ibv_context *verbs, uint32_t qpn);

/* cma.c, cma_recv.c: called by the CM thread with the lock held */
void cma_handle_mad(struct cma_device *d, const uint8_t *grh, const uint8_t *mad);
void cma_run_timers(uint64_t now);
uint64_t cma_next_deadline(void);

/* Shared by cma.c, cma_event.c, cma_qp.c, cma_mcast.c and cma_recv.c (lock held
 * unless a comment there says otherwise) */
extern struct cma_id *cma_ids; /**< every live id */

static inline struct cma_id *cma_id_of(struct rdma_cm_id *id)
{
	return (struct cma_id *)id;
}

static inline struct cma_channel *cma_channel_of(struct rdma_event_channel *c)
{
	return (struct cma_channel *)c;
}

static inline int cma_fail(int err)
{
	errno = err;
	return -1;
}

/* The states an entry point accepts, as a mask for cma_lock_in_state(). */
#define IN_STATE(s)   (1u << (s))
#define IN_ANY_STATE  (~0u)
#define IN_CONNECTION (IN_STATE(CMA_ESTABLISHED) | IN_STATE(CMA_REP_SENT) | IN_STATE(CMA_REP_RCVD))

/* cma.c */
struct cma_id *cma_lock_in_state(struct rdma_cm_id *id, unsigned want);
uint32_t cma_random32(void);
void cma_ip_to_sockaddr(int ip_version, const uint8_t *addr, uint16_t port,
			struct sockaddr_storage *ss);
void cma_sockaddr_ip16(const struct sockaddr *sa, uint8_t *out);
struct cma_id *cma_id_alloc(struct rdma_event_channel *channel, void *context,
			    enum rdma_port_space ps, enum ibv_qp_type qp_type);
int cma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
		  enum rdma_port_space ps, enum ibv_qp_type qp_type);
void cma_send_mad(struct cma_id *c, const uint8_t *mad);
void cma_send_rtu(struct cma_id *c);
void cma_post_peer_disconnect(struct cma_id *c);
void cma_settle(struct cma_id *c, enum cma_state st);
void cma_send_rej(struct cma_device *d, int sgid_index, const union ibv_gid *dgid, uint8_t tclass,
		  uint8_t sl, uint64_t tid, uint32_t local_comm_id, uint32_t remote_comm_id,
		  enum cm_rej_msg msg, uint16_t reason, const void *pdata, uint8_t plen);
void cma_fill_route(struct cma_id *c);
void cma_ack_attached_event(struct rdma_cm_id *id);
uint8_t cma_cap8(unsigned v, unsigned max);

/* cma_event.c */
void cma_id_free_if_done(struct cma_id *c);
void cma_chan_push(struct cma_channel *ch, struct cma_event *e);
struct cma_event *cma_chan_take_events(struct cma_channel *ch, const struct rdma_cm_id *id,
				       bool as_listener);
struct cma_event *cma_event_post(struct cma_id *c, enum rdma_cm_event_type type, int status,
				 const uint8_t *pdata, uint8_t plen);
int cma_sync_wait(struct cma_id *c, enum rdma_cm_event_type expected);
bool cma_is_sync(const struct cma_id *c);
int cma_step_done(struct cma_id *c, enum cma_state st, enum rdma_cm_event_type ev);

/* cma_qp.c */
enum ibv_qp_type cma_conn_type(const struct cma_id *c);
uint8_t cma_req_transport_of(enum ibv_qp_type t);
void cma_fill_ah(const struct cma_id *c, struct ibv_ah_attr *ah);
int cma_qp_connect(struct cma_id *c);
void cma_qp_to_err(struct cma_id *c);

/* cma_mcast.c */
void cma_mc_leave(struct cma_id *c, struct cma_mc *mc);

/* addressing (addr.c) */
void cma_sockaddr_to_gid(const struct sockaddr *sa, union ibv_gid *gid);
bool cma_addr_any(const struct sockaddr *sa);
/** 127.0.0.0/8 or ::1. */
bool cma_addr_loopback(const struct sockaddr *sa);
/** The device and GID index for a source/destination pair; -EADDRNOTAVAIL/-ENODEV. */
int cma_pick_device(const struct sockaddr *src, const struct sockaddr *dst, struct cma_device **dev,
		    int *sgid_index);
socklen_t cma_sockaddr_len(const struct sockaddr *sa);

#endif /* ROCEMU_RDMACM_CMA_H */
