/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to the memif link driver (port_link_memif.c: the device, its
 * states, the reconnect watch and the close; port_memif_bell.c: the bell
 * page both ends map, and the wake-ups and application stamps through it).
 */
#ifndef ROCEMU_PORT_MEMIF_H
#define ROCEMU_PORT_MEMIF_H

#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "port_link.h"
#include "port_memif_direct.h"

/* The shared bell page: slot 0 = server end, 1 = client end. */
struct memif_bell_slot {
	/* Cache line 1: control, written rarely, read by the peer on every
	 * transmit (sleeping) and every pass (closing). */
	_Alignas(64) atomic_uint pid; /* the end's process, set once started */
	atomic_uint sleeping;	      /* 1: its thread sleeps and wants the bell */
	/* close handshake: an end about to close its device increments
	 * `closing` and waits until the peer's `acked` equals it; the peer
	 * acknowledges only once it no longer touches the rings */
	atomic_uint closing;
	atomic_uint acked;
	/* the bell: a futex word in this shared page. A ring increments it and
	 * wakes the end's progress thread sleeping in FUTEX_WAIT on it. Both
	 * the peer (frames sent) and the end's own threads (kicks) ring it. */
	atomic_uint bell;
	/* connections (see memif_peer_close): a client bumps conn_gen when it
	 * first sees its link up after each start of its device; before
	 * bumping `closing`, an end stores in closed_gen the conn_gen of the
	 * connection it is about to close */
	atomic_uint conn_gen;
	atomic_uint closed_gen;
	/* Cache line 2: the application's state, written by the end on every
	 * post and poll, read by the peer only while `sleeping` is set: kept
	 * apart so those writes do not pull line 1 away from the peer's CPU. */
	/* TSC at the end's last ibv_poll_cq or post while its application
	 * waits for something (it will poll again and run progress itself), 0
	 * once a poll found all it waited for (it may go elsewhere now) or
	 * when the end's clock is not the TSC. The raw TSC, not nanoseconds:
	 * the two processes share the counter, not their calibrations. */
	_Alignas(64) atomic_uint_fast64_t app_waiting_tsc;
	/* 1 while an application thread of the end is inside a post or poll
	 * call: it holds or is about to take the engine lock, and will look at
	 * the ring when it comes out (a long post builds many frames: more
	 * than app_waiting_tsc's freshness) */
	atomic_uint app_busy;
};
_Static_assert(sizeof(struct memif_bell_slot) == 128, "two cache lines per end");
/* An end's offer of its direct channel (port_memif_direct.c): written by
 * that end; gen 0 while there is none or while name is rewritten. */
struct memif_direct_offer {
	_Alignas(64) char name[48]; /* its shm object */
	atomic_uint gen;	    /* the object's current offer (0: none) */
	atomic_uint pid;	    /* the offering process */
	atomic_uint mapped_gen;	    /* the other end's offer this end maps and reads */
	/* the other end's offer (gen) under which this end saw it map this
	 * end's current offer: since then this end has sent nothing through
	 * the PMD, and sends nothing there until its own offer changes (0:
	 * not yet; cleared with each new offer) */
	atomic_uint pmd_done;
};
_Static_assert(sizeof(struct memif_direct_offer) == 64, "one cache line per offer");
struct memif_bell_page {
	struct memif_bell_slot slot[2];
	struct memif_direct_offer direct[2]; /* slot 0 = server, 1 = client */
};

/*
 * The link's state (the engine lock held to change it; see the legal
 * transitions in port_link_memif.c and `ROCEMU_TRACE=memif`). The first two
 * let the rings be used.
 */
enum memif_link_state {
	MEMIF_LINK_STARTED,	/* device started; a client has not seen this connection up yet */
	MEMIF_LINK_ANNOUNCED,	/* client: seen up after the start, its number in conn_gen */
	MEMIF_LINK_CREATED,	/* device made, not started (a client waits for its server) */
	MEMIF_LINK_PEER_CLOSED, /* the peer announced its close, we acknowledged: rings untouched */
	MEMIF_LINK_PEER_GONE,	/* the same (or gone with no close), the link seen down since */
	MEMIF_LINK_STOPPED,	/* client: device stopped for a reconnect */
	MEMIF_LINK_CLOSING,	/* our own close announced: the device goes */
	MEMIF_LINK_STATES,
};

struct memif_link {
	bool client;
	bool zero_copy;			   /* a client made with zero-copy=yes (port_memif_zc.c) */
	bool pmd_copies_tx, pmd_copies_rx; /* our PMD copies each frame (counted here) */
	struct memif_direct *direct;	   /* the direct channel (NULL: not asked for) */
	char copy_why[160];		   /* zero-copy asked for, not used: why */
	char path[ROCEMU_PORT_SPEC_MAX];   /* the memif socket (abstract name) */
	enum memif_link_state state;
	bool registered; /* among the process's memif devices (users[]) */

	/* the bell page (NULL without: a peer that is not rocemu) */
	struct memif_bell_page *page;
	char shm_name[48];
	bool shm_owner; /* the server made the page and unlinks it */
	dev_t page_dev; /* the page's file, to see a new server's page */
	ino_t page_ino;
	uint64_t fresh_tsc;	    /* a poll stamp younger than this is a polling loop */
	unsigned peer_closing_seen; /* the peer's `closing` we last acknowledged */
	unsigned peer_closed_gen;   /* the closed connection's conn_gen (server) */

	/* without the page: a datagram to the peer's abstract bell socket
	 * (our socket is port->doorbell_fd), at most every 100 us */
	struct sockaddr_un bell_peer;
	socklen_t bell_peer_len;
	uint64_t last_bell_ns;

	/* the client's link watch (an EAL alarm on the interrupt thread) */
	bool watch_armed;
	uint64_t watch_down_since_ns; /* link seen down since (0: up) */
	uint64_t watch_backoff_ns;    /* how long down before the next restart */

	uint64_t parked_look_ns; /* the PMD parked: next look at its link */
};

static inline struct memif_bell_slot *memif_own(struct memif_link *l)
{
	return &l->page->slot[l->client];
}

static inline struct memif_bell_slot *memif_peer(struct memif_link *l)
{
	return &l->page->slot[!l->client];
}

/* port_link_memif.c */
const char *memif_link_state_name(enum memif_link_state s);
bool memif_link_transition_legal(enum memif_link_state from, enum memif_link_state to, bool client);
void memif_link_set(struct rocemu_port *port, enum memif_link_state to, const char *why);

/* port_memif_zc.c: the PMD's zero-copy for a new memif client, taken for
 * good (one per process); else false, and why (one phrase). */
bool memif_zc_claim(char *why, size_t len);
/* The memory file a zero-copy connection sends is still EAL's. */
bool memif_zc_intact(void);
/* A memif port's mbuf pool: last freed, first handed out (port_link_ops). */
struct rte_mempool *memif_pool_create(const char *name, unsigned n, uint16_t data_room, int socket);

/* port_memif_socket.c */
/* A server listens on path: 1, 0, or -errno when /proc/net/unix cannot say. */
int memif_listening(const char *path);
/* The PMD's listening socket for path among our descriptors, or -1. */
int memif_find_listener(const char *path);
/* On the interrupt thread, before the path's last device goes: release the
 * listening socket DPDK 22.11 leaves bound (arg: the memif_link). */
void memif_forget_listener(void *arg);
/* The process's memif devices per path: join (-EADDRINUSE for a second
 * server here, -ENOSPC), leave (true when l was the path's last). */
int memif_users_join(struct memif_link *l);
bool memif_users_leave(struct memif_link *l);
/* Run fn(arg) on EAL's interrupt thread and wait for it. */
void memif_run_on_intr_thread(void (*fn)(void *), void *arg);

/* port_memif_bell.c */
void memif_bell_page_name(char *buf, size_t len, const char *path);
void memif_bell_page_open(struct rocemu_port *port);
bool memif_bell_page_remap(struct rocemu_port *port);
void memif_bell_page_close(struct rocemu_port *port);
/* After the device started: our pid in the page, the datagram bell. */
void memif_bell_attach(struct rocemu_port *port);
void memif_bell_ring(struct memif_bell_slot *slot);
void memif_close_handshake(struct rocemu_port *port);
void memif_wake_peer(struct rocemu_port *port, uint64_t now);
bool memif_app_note(struct rocemu_port *port, enum port_app_note what);
bool memif_sleep(struct rocemu_port *port, const struct timespec *ts);
void memif_wake(struct rocemu_port *port);

#endif
