/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Link kind `memif:server:SOCK` / `memif:client:SOCK`: DPDK's net_memif over
 * an abstract Unix socket (DPDK 22.11's default), shared memory between two
 * processes. The bell that wakes a sleeping peer is port_memif_bell.c, the
 * socket as seen from outside the PMD port_memif_socket.c; this file is the
 * device and its life:
 *  - open: a server refuses a socket path another server listens on
 *    (EADDRINUSE, before DPDK tries); a client waits for its server
 *    (`memif-wait`, one notice line), then fails with ECONNREFUSED/ETIMEDOUT;
 *  - the link's states (enum memif_link_state), changed only through
 *    memif_link_set, which checks them against legal_next[] and traces them
 *    (ROCEMU_TRACE=memif);
 *  - the close handshake with a rocemu peer, and how each end knows a new
 *    connection (memif_blocked);
 *  - a client's reconnect watch (the PMD never reconnects a client);
 *  - close: the device goes on EAL's interrupt thread, and a server's
 *    listening socket, which DPDK 22.11 leaves bound, is released so that the
 *    same process can open the server again.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rte_alarm.h>
#include <rte_ethdev.h>

#include "port_memif.h"

/* how long a client waits for its server by default (`memif-wait`) */
#define MEMIF_WAIT_DEFAULT_MS 10000u
/* a listener that is not (yet) a started rocemu server: go after this */
#define MEMIF_FOREIGN_GRACE_NS 1000000000ull
/* abstract names: DPDK copies at most this much of the path */
#define MEMIF_PATH_MAX 106
/* the watch: ticks while the link is down, while up, when the lock is busy */
#define MEMIF_WATCH_US	       25000
#define MEMIF_WATCH_UP_US      250000
#define MEMIF_WATCH_BUSY_US    1000
#define MEMIF_RECONNECT_MIN_NS 100000000ull
#define MEMIF_RECONNECT_MAX_NS 1600000000ull
/* close: the PMD shows no view of the peer's progress: linger after the
 * last transmit */
#define MEMIF_CLOSE_LINGER_NS 20000000ull
/* the PMD parked (the direct channel carries all): look at its link this
 * often, for a peer gone with no close handshake */
#define MEMIF_PARKED_LOOK_NS 1000000ull

/* ------------------------------------------------------------------------ */
/* States.                                                                    */

static const char *const state_names[MEMIF_LINK_STATES] = {
    [MEMIF_LINK_STARTED] = "STARTED",	  [MEMIF_LINK_ANNOUNCED] = "ANNOUNCED",
    [MEMIF_LINK_CREATED] = "CREATED",	  [MEMIF_LINK_PEER_CLOSED] = "PEER_CLOSED",
    [MEMIF_LINK_PEER_GONE] = "PEER_GONE", [MEMIF_LINK_STOPPED] = "STOPPED",
    [MEMIF_LINK_CLOSING] = "CLOSING",
};

#define TO(s) (1u << MEMIF_LINK_##s)
/* From each state, the states it may go to. ANNOUNCED and STOPPED are a
 * client's only. A second close of the peer keeps PEER_CLOSED. Straight to
 * PEER_GONE: a peer gone with no close while the PMD was parked. */
static const unsigned legal_next[MEMIF_LINK_STATES] = {
    [MEMIF_LINK_CREATED] = TO(STARTED) | TO(CLOSING),
    [MEMIF_LINK_STARTED] =
	TO(ANNOUNCED) | TO(PEER_CLOSED) | TO(PEER_GONE) | TO(STOPPED) | TO(CLOSING),
    [MEMIF_LINK_ANNOUNCED] = TO(PEER_CLOSED) | TO(PEER_GONE) | TO(STOPPED) | TO(CLOSING),
    [MEMIF_LINK_PEER_CLOSED] =
	TO(PEER_CLOSED) | TO(PEER_GONE) | TO(STARTED) | TO(STOPPED) | TO(CLOSING),
    [MEMIF_LINK_PEER_GONE] = TO(PEER_CLOSED) | TO(STARTED) | TO(STOPPED) | TO(CLOSING),
    [MEMIF_LINK_STOPPED] = TO(STARTED) | TO(CLOSING),
    [MEMIF_LINK_CLOSING] = 0,
};

const char *memif_link_state_name(enum memif_link_state s)
{
	return (unsigned)s < MEMIF_LINK_STATES && state_names[s] ? state_names[s] : "?";
}

bool memif_link_transition_legal(enum memif_link_state from, enum memif_link_state to, bool client)
{
	if ((unsigned)from >= MEMIF_LINK_STATES || (unsigned)to >= MEMIF_LINK_STATES)
		return false;
	if (!client && (to == MEMIF_LINK_ANNOUNCED || to == MEMIF_LINK_STOPPED))
		return false;
	return (legal_next[from] & (1u << to)) != 0;
}

/* Engine lock held (or no other thread yet: open, close). */
void memif_link_set(struct rocemu_port *port, enum memif_link_state to, const char *why)
{
	struct memif_link *l = port->link_priv;
	enum memif_link_state from = l->state;

	if (!memif_link_transition_legal(from, to, l->client))
		port_count(port, PC_MEMIF_ILLEGAL_TRANSITIONS);
	if (port_trace_on("memif"))
		port_trace(port, "memif", "%s %s -> %s (%s)", l->client ? "client" : "server",
			   memif_link_state_name(from), memif_link_state_name(to), why);
	__atomic_store_n(&l->state, to, __ATOMIC_RELAXED);
}

/* Around calls that may fail as expected (a client's start while its
 * server goes, a server's probe when another one raced it) the PMD's log is
 * held back (port_log_quiet): rocemu says what happened, in one line, and a
 * reconnecting client no longer writes "Failed to connect socket" per try. */
static void memif_quiet(bool on)
{
	port_log_quiet("pmd.net.memif", on);
}

static int start_quietly(struct rocemu_port *port)
{
	int rc;

	memif_quiet(true);
	rc = rte_eth_dev_start(port->port_id);
	memif_quiet(false);
	return rc;
}

static void remove_device(void *arg)
{
	port_dev_remove(arg);
}

/* ------------------------------------------------------------------------ */
/* Open.                                                                      */

static int memif_check_arg(const char *arg, char *err, size_t errlen)
{
	const char *path = arg + 7;

	if (strncmp(arg, "server:", 7) && strncmp(arg, "client:", 7))
		return port_fail(err, errlen, -EINVAL,
				 "expected memif:server:SOCKET or memif:client:SOCKET");
	if (!*path || strchr(path, ','))
		return port_fail(err, errlen, -EINVAL, "memif needs a socket path without ','");
	if (strlen(path) > MEMIF_PATH_MAX)
		return port_fail(err, errlen, -EINVAL, "memif socket path longer than %d bytes",
				 MEMIF_PATH_MAX);
	return 0;
}

static int memif_preview_mac(const struct rocemu_port_config *cfg, const char *arg, uint8_t mac[6])
{
	(void)arg;
	port_generated_mac(cfg, mac);
	return 0;
}

static int memif_mtu(struct rocemu_port *port, const char *arg, char *err, size_t errlen)
{
	(void)arg;
	(void)err;
	(void)errlen;
	port->eth_mtu = port->cfg.mtu ? port->cfg.mtu : PORT_SOFT_LINK_MTU;
	return 0;
}

static int in_use(const char *path, char *err, size_t errlen)
{
	return port_fail(err, errlen, -EADDRINUSE,
			 "memif:server:%s: socket path in use by another server", path);
}

/*
 * A client's mode: copy mode, or the PMD's zero-copy when asked for
 * (ROCEMU_MEMIF_ZERO_COPY=1) and this process can use it (port_memif_zc.c);
 * asked for and not possible, a notice line once the client started says
 * why (copy_why). In zero-copy neither of our PMD's directions copies
 * (its server's does).
 */
static void memif_choose_copy(struct memif_link *l)
{
	l->zero_copy = memif_zc_claim(l->copy_why, sizeof(l->copy_why));
	l->pmd_copies_tx = l->pmd_copies_rx = !l->zero_copy;
}

/* Buffers as large as our mbufs' data room: a frame then takes one ring
 * slot and the PMD copies it in one piece both ways. With smaller buffers
 * (2048 by default) it splits frames over chained slots, and its chaining
 * loses or merges frames under load (a stale "next" flag on reused
 * descriptors), which cut frames short at 2048/4096 bytes. */
static int memif_probe(struct rocemu_port *port, struct memif_link *l, char *err, size_t errlen)
{
	char devargs[2 * ROCEMU_PORT_SPEC_MAX + 256];
	int rc;

	snprintf(devargs, sizeof(devargs), "%s,role=%s,bsize=%u,socket=%s%s", port->dev_name,
		 l->client ? "client" : "server", port->max_frame, l->path,
		 l->zero_copy ? ",zero-copy=yes" : "");
	memif_quiet(true);
	rc = port_dev_probe(port, devargs, err, errlen);
	memif_quiet(false);
	return rc;
}

static int memif_create(struct rocemu_port *port, const char *arg, char *err, size_t errlen)
{
	struct memif_link *l = port->link_priv;
	int rc;

	l->client = strncmp(arg, "server:", 7) != 0;
	snprintf(l->path, sizeof(l->path), "%s", arg + 7);
	l->state = MEMIF_LINK_CREATED;
	rc = memif_users_join(l);
	if (rc == -EADDRINUSE)
		return in_use(l->path, err, errlen);
	if (rc)
		return port_fail(err, errlen, rc, "too many memif devices in this process");
	/* a listener of another process (ours, kept by a device of the path
	 * still open here, the PMD reuses) */
	if (!l->client && memif_listening(l->path) == 1 && memif_find_listener(l->path) < 0)
		return in_use(l->path, err, errlen);
	snprintf(port->dev_name, sizeof(port->dev_name), "net_memif_re%u", port_next_seq());
	/* the link's bursts count the PMD's copies (memif_rx_burst) */
	if (memif_direct_wanted()) {
		char why[160];

		/* the PMD's zero-copy wants EAL's memory for the frames, the
		 * direct channel its own: the channel, and copy mode */
		l->pmd_copies_tx = l->pmd_copies_rx = true;
		if (memif_direct_create(port, l, why, sizeof(why)))
			port_notice(port, "memif on %s: no direct channel (%s)", l->path, why);
	} else if (l->client) {
		memif_choose_copy(l);
	} else {
		l->pmd_copies_tx = l->pmd_copies_rx = true; /* a server's PMD always copies */
	}
	rc = memif_probe(port, l, err, errlen);
	if (rc && !l->client && memif_listening(l->path) == 1 && memif_find_listener(l->path) < 0)
		return in_use(l->path, err, errlen); /* another server was quicker */
	if (rc || l->client)
		return rc;
	memif_bell_page_open(port); /* before clients can start to connect */
	return 0;
}

/* A rocemu server has started: its pid is in its bell page. */
static bool rocemu_server_started(const char *path)
{
	char name[64];
	unsigned pid = 0;
	ssize_t r;
	int fd;

	memif_bell_page_name(name, sizeof(name), path);
	fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return false;
	r = pread(fd, &pid, sizeof(pid), offsetof(struct memif_bell_page, slot[0].pid));
	close(fd);
	return r == (ssize_t)sizeof(pid) && pid && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

/*
 * A client starts once its server is ready, `memif-wait` ms at most
 * (default 10 s; 0: not at all), saying once, at once, that it waits.
 * Ready: a rocemu server whose bell page carries its pid (written after its
 * device started; DPDK's server listens from device creation, before its
 * queues exist, and drops a client that connects in that window, which the
 * PMD then never connects again); a listener that is not such a server, 1 s
 * after it appeared. Only then does the PMD try (its "Failed to connect"
 * stays quiet). Where /proc/net/unix cannot be read, the start is simply
 * retried. ECONNREFUSED without a wait, ETIMEDOUT after one.
 */
static int memif_client_start(struct rocemu_port *port, char *err, size_t errlen)
{
	struct memif_link *l = port->link_priv;
	uint32_t wait_ms =
	    port->cfg.memif_wait_set ? port->cfg.memif_wait_ms : MEMIF_WAIT_DEFAULT_MS;
	uint64_t now = rocemu_now_ns(), end = now + (uint64_t)wait_ms * 1000000ull, since = 0;
	struct timespec ts = {0, 5000000};
	bool told = false;

	for (;;) {
		int listening = memif_listening(l->path);

		if (listening != 1)
			since = 0;
		else if (!since)
			since = now;
		if ((listening < 0 ||
		     (listening == 1 &&
		      (rocemu_server_started(l->path) || now - since >= MEMIF_FOREIGN_GRACE_NS))) &&
		    start_quietly(port) == 0) {
			memif_link_set(port, MEMIF_LINK_STARTED, "connected to the server");
			if (!l->zero_copy && l->copy_why[0]) /* asked for, not possible */
				port_notice(port, "memif client on %s: copy mode (%s)", l->path,
					    l->copy_why);
			return 0;
		}
		if (now >= end)
			break;
		if (!told && listening == 0) {
			port_notice(port, "waiting for a memif server on %s (%u ms at most)",
				    l->path, wait_ms);
			told = true;
		}
		nanosleep(&ts, NULL);
		now = rocemu_now_ns();
	}
	if (wait_ms == 0)
		return port_fail(err, errlen, -ECONNREFUSED,
				 "no memif server listening on %s (memif-wait 0)", l->path);
	return port_fail(err, errlen, -ETIMEDOUT,
			 "no memif server on %s within %u ms (memif-wait MS to wait longer)",
			 l->path, wait_ms);
}

static int memif_start(struct rocemu_port *port, char *err, size_t errlen)
{
	int rc;

	if (((struct memif_link *)port->link_priv)->client)
		return memif_client_start(port, err, errlen);
	rc = rte_eth_dev_start(port->port_id);
	if (rc)
		return port_fail(err, errlen, rc, "%s: start failed: %s", port->dev_name,
				 rte_strerror(-rc));
	memif_link_set(port, MEMIF_LINK_STARTED, "listening");
	return 0;
}

static void memif_attach(struct rocemu_port *port, const char *arg)
{
	(void)arg;
	memif_bell_attach(port);
	memif_direct_publish(port);
}

/* ------------------------------------------------------------------------ */
/* Connections.                                                               */

/* A new close announced by the peer (engine lock held): acknowledge it; from
 * now on the rings are not touched until there is a new connection. */
static void take_peer_close(struct rocemu_port *port, struct memif_link *l)
{
	struct memif_bell_slot *peer = memif_peer(l);
	unsigned c = atomic_load_explicit(&peer->closing, memory_order_acquire);

	if (c == l->peer_closing_seen)
		return;
	l->peer_closing_seen = c;
	l->peer_closed_gen = atomic_load_explicit(&peer->closed_gen, memory_order_acquire);
	/* the peer waits for our ack before its rings (and its direct
	 * channel) go: take our frames back from it first */
	memif_direct_reset(port, "the peer announced its close");
	atomic_store_explicit(&memif_own(l)->acked, c, memory_order_release);
	port_count(port, PC_PEER_CLOSED);
	if (l->state <= MEMIF_LINK_ANNOUNCED || l->state == MEMIF_LINK_PEER_CLOSED ||
	    l->state == MEMIF_LINK_PEER_GONE)
		memif_link_set(port, MEMIF_LINK_PEER_CLOSED, "the peer announced its close");
}

/*
 * Why two rocemu ends agree before one closes: when the peer closes its
 * device, the PMD here tears the connection down on EAL's interrupt thread
 * (memif_disconnect: rings unmapped) while our progress thread may be in an
 * rx or tx burst on them: SIGSEGV in the PMD's rx. So the closing end (or a
 * client about to reconnect) bumps its `closing` count, rings, and waits
 * (200 ms at most) until the peer acknowledges (memif_close_handshake); the
 * peer acknowledges from its next pass, under the engine lock, and from then
 * on does not touch the rings (PEER_CLOSED: frames to send are dropped,
 * counted tx_peer_closed) until a new connection exists. A non-rocemu peer
 * has no page: the race stays possible there.
 *
 * When is there a new connection? Sampling the link (down, then up again)
 * misses a reconnect that falls between two samples, and DPDK 22.11's memif
 * PMD raises no link-state interrupt. Instead:
 * - The client makes every connection itself (the PMD never reconnects a
 *   client; memif_restart does, with its device stopped first, which unmaps
 *   the old connection's rings: STOPPED, then STARTED).
 * - The server learns it from the client's conn_gen. Before bumping
 *   `closing`, the client stores the conn_gen of the connection it closes in
 *   closed_gen; the server reads it after the `closing` it acknowledges
 *   (acquire), so it is the closed connection's number even if the server
 *   acknowledges late. The client bumps conn_gen only once it has seen its
 *   link up after a start of its device (ANNOUNCED). Its link comes up when
 *   the server's CONNECTED message arrives, which the server's PMD sends
 *   after setting up its side of that connection; and a memif server has one
 *   connection at a time: it refuses a client ("already connected") until
 *   memif_disconnect of the previous one has finished. So once the server
 *   sees conn_gen != closed_gen, the old connection's teardown is over on its
 *   side, and if it then reads its link up, that is the new connection (or a
 *   later one: each later close is announced again before its teardown, and
 *   the fast path looks at `closing` before every burst). conn_gen only
 *   grows, so no reconnect can be missed, however fast. The link-sampling
 *   rule stays as a second way out (PEER_GONE, then up: a new connection).
 */
static bool blocked_slow(struct rocemu_port *port, struct memif_link *l, enum port_counter *reason)
{
	bool newer;

	if (l->page)
		take_peer_close(port, l);
	switch (l->state) {
	case MEMIF_LINK_STARTED:
	case MEMIF_LINK_ANNOUNCED:
		return false;
	case MEMIF_LINK_PEER_CLOSED:
	case MEMIF_LINK_PEER_GONE:
		break;
	case MEMIF_LINK_CREATED:
	case MEMIF_LINK_STOPPED:
		*reason = PC_DROP_TX_RECONNECTING;
		return true;
	default:
		*reason = PC_DROP_TX_CLOSING;
		return true;
	}
	newer = !l->client && atomic_load_explicit(&memif_peer(l)->conn_gen,
						   memory_order_acquire) != l->peer_closed_gen;
	*reason = PC_DROP_TX_PEER_CLOSED;
	/* dev_link is written by the PMD; reading it touches no ring */
	if (!rocemu_port_link_up(port)) {
		if (l->state == MEMIF_LINK_PEER_CLOSED)
			memif_link_set(port, MEMIF_LINK_PEER_GONE, "link seen down");
		return true;
	}
	if (l->state == MEMIF_LINK_PEER_GONE || newer) {
		memif_link_set(port, MEMIF_LINK_STARTED,
			       newer ? "the client announced a new connection" : "link up again");
		return false;
	}
	return true;
}

/* Every pass and every flush: one load and a compare while all is well. */
static bool memif_blocked(struct rocemu_port *port, enum port_counter *reason)
{
	struct memif_link *l = port->link_priv;

	if (likely(l->state <= MEMIF_LINK_ANNOUNCED) &&
	    (likely(l->page == NULL) ||
	     atomic_load_explicit(&memif_peer(l)->closing, memory_order_relaxed) ==
		 l->peer_closing_seen))
		return false;
	return blocked_slow(port, l, reason);
}

/*
 * A zero-copy client about to connect again (memif_restart, on the interrupt
 * thread, engine lock held, device stopped). Its first connection closed
 * EAL's memory file, whose number the PMD would send (and close) again
 * (port_memif_zc.c): the device is made again, in copy mode, unless the file
 * is still intact (it never connected). The old device's mbufs in its rings
 * are lost to the pool (the PMD frees only its arrays), once. False: no
 * device now (the link stays STOPPED; the next restart makes it again).
 */
static bool memif_zc_remake(struct rocemu_port *port, struct memif_link *l)
{
	char err[256];

	if (port->port_id != UINT16_MAX) {
		if (memif_zc_intact())
			return true;
		port_dev_remove(port);
	}
	l->zero_copy = false;
	l->pmd_copies_tx = l->pmd_copies_rx = true;
	if (memif_probe(port, l, err, sizeof(err)) || port_dev_configure(port, err, sizeof(err))) {
		port_dev_remove(port);
		return false;
	}
	return true;
}

/*
 * A client whose link is down reconnects (memif_watch, engine lock held):
 * stop the device (memif_disconnect: the old connection's rings go) and
 * start it again (a new connection attempt). A rocemu server is told first,
 * as at close, so that it lets go of the rings before they go. Not while a
 * rocemu server is between its close handshake and the removal of its device
 * (its `closing` bumped, its pid still in the page): it would accept the new
 * connection and tear it down with no handshake. Nor while nothing listens
 * (the PMD would only log its failure). Returns false when postponed.
 */
static bool memif_restart(struct rocemu_port *port)
{
	struct memif_link *l = port->link_priv;

	if (l->page) {
		struct memif_bell_slot *peer = memif_peer(l);
		unsigned pid = atomic_load(&peer->pid);

		take_peer_close(port, l);
		if (atomic_load(&peer->closing) && pid &&
		    (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
			return false;
	}
	memif_close_handshake(port);
	if (l->state != MEMIF_LINK_STOPPED) {
		memif_link_set(port, MEMIF_LINK_STOPPED, "link down: reconnect");
		rte_eth_dev_stop(port->port_id);
		memif_direct_reset(port, "reconnect");
	}
	if (memif_bell_page_remap(port))
		memif_direct_publish(port); /* a new server: our offer in its page */
	if (memif_listening(l->path) == 0)
		return true;
	if ((l->zero_copy || port->port_id == UINT16_MAX) && !memif_zc_remake(port, l))
		return true;
	port_count(port, PC_MEMIF_RECONNECTS);
	if (start_quietly(port))
		return true;
	/* Our stop unmapped the old connection's rings, and the server whose
	 * close we acknowledged is gone (checked above) or replaced (new page):
	 * the new connection is not the one it announced closing. A close
	 * announced since is taken up by the next memif_blocked. */
	memif_link_set(port, MEMIF_LINK_STARTED, "reconnected");
	return true;
}

/*
 * A client's link watch: an EAL alarm on the interrupt thread, where the PMD
 * also runs its connection handling, so the two never overlap; every 25 ms
 * while the link is down, every 250 ms while it is up. The first time it
 * sees the link up after a start it announces the connection (conn_gen,
 * ANNOUNCED). Link down for 100 ms: reconnect (memif_restart), then wait
 * twice as long before the next try (at most 1.6 s), back to 100 ms once
 * the link was up; each try is counted (memif_reconnects). The engine lock
 * is only tried: a thread holding it may be waiting for this thread (close
 * runs the device's removal here); busy, the tick comes again in 1 ms.
 */
static void memif_watch(void *arg)
{
	struct rocemu_port *port = arg;
	struct memif_link *l = port->link_priv;
	uint64_t now = rocemu_now_ns(), us = MEMIF_WATCH_BUSY_US;

	if (pthread_mutex_trylock(&port->lock) == 0) {
		if (l->state != MEMIF_LINK_STOPPED && rocemu_port_link_up(port)) {
			if (l->state == MEMIF_LINK_STARTED) {
				if (l->page)
					atomic_fetch_add_explicit(&memif_own(l)->conn_gen, 1,
								  memory_order_release);
				memif_link_set(port, MEMIF_LINK_ANNOUNCED, "link up");
			}
			l->watch_down_since_ns = 0;
			l->watch_backoff_ns = MEMIF_RECONNECT_MIN_NS;
		} else if (!l->watch_down_since_ns) {
			l->watch_down_since_ns = now;
		} else if (now - l->watch_down_since_ns >= l->watch_backoff_ns &&
			   memif_restart(port)) {
			l->watch_down_since_ns = rocemu_now_ns();
			l->watch_backoff_ns =
			    RTE_MIN(2 * l->watch_backoff_ns, MEMIF_RECONNECT_MAX_NS);
		}
		us = l->watch_down_since_ns || l->state == MEMIF_LINK_STOPPED ? MEMIF_WATCH_US
									      : MEMIF_WATCH_UP_US;
		pthread_mutex_unlock(&port->lock);
	}
	if (rte_eal_alarm_set(us, memif_watch, port))
		l->watch_armed = false;
}

static void memif_online(struct rocemu_port *port)
{
	struct memif_link *l = port->link_priv;

	if (!l->client)
		return;
	l->watch_backoff_ns = MEMIF_RECONNECT_MIN_NS;
	l->watch_armed = rte_eal_alarm_set(MEMIF_WATCH_US, memif_watch, port) == 0;
}

/* Waits for a running watch to finish (it only tries the engine lock, so
 * the caller may hold it). */
static void memif_offline(struct rocemu_port *port)
{
	struct memif_link *l = port->link_priv;

	if (!l->watch_armed)
		return;
	rte_eal_alarm_cancel(memif_watch, port);
	l->watch_armed = false;
}

/* ------------------------------------------------------------------------ */
/* Frames: the PMD's rings, and the direct channel beside them.               */

/*
 * The PMD parked, its link seen down (every MEMIF_PARKED_LOOK_NS; reading
 * dev_link touches no ring): the peer went with no close handshake (killed
 * outright, or the handshake timed out). Its channel is over too: frames
 * still out are taken back (a dead peer returns none), and the rings wait
 * for a new connection (PEER_GONE: the link up again, which the PMD sets
 * only after its teardown of this one, on the same thread). True: gone.
 */
static bool parked_link_lost(struct rocemu_port *port, struct memif_link *l)
{
	l->parked_look_ns = port->pass_now + MEMIF_PARKED_LOOK_NS;
	if (rocemu_port_link_up(port))
		return false;
	memif_link_set(port, MEMIF_LINK_PEER_GONE, "link down, the PMD parked: the peer is gone");
	memif_direct_reset(port, "the peer's connection went down");
	port_count(port, PC_PEER_VANISHED);
	return true;
}

/* The PMD's frames first (sent before the peer switched to the channel),
 * then the channel's; once the channel carries all, the PMD is left alone
 * (port_memif_direct.c). The PMD's copies are counted here, per path. */
static uint16_t memif_rx_burst(struct rocemu_port *port, struct rte_mbuf **pkts, uint16_t n)
{
	struct memif_link *l = port->link_priv;
	enum md_pmd pmd;
	uint16_t got = 0;

	/* first: a new peer's offer, seen next, unparks */
	if (unlikely(port->pass_now >= l->parked_look_ns) && memif_direct_parked(l) &&
	    parked_link_lost(port, l))
		return 0;
	pmd = l->direct ? memif_direct_step(port) : MD_PMD_POLL;
	if (pmd != MD_PMD_PARKED && likely(port->port_id != UINT16_MAX)) {
		got = rte_eth_rx_burst(port->port_id, 0, pkts, n);
		port_count(port, PC_PMD_RX_BURSTS);
		if (pmd == MD_PMD_DRAIN && got == 0) {
			memif_direct_park(port);
			l->parked_look_ns = port->pass_now + MEMIF_PARKED_LOOK_NS;
		}
	}
	if (l->pmd_copies_rx)
		for (uint16_t i = 0; i < got; i++)
			port->ctr[PC_PMD_COPY_RX_BYTES] += pkts[i]->pkt_len;
	if (l->direct && got < n)
		got += memif_direct_rx_burst(port, pkts + got, n - got);
	return got;
}

static uint16_t memif_tx_burst(struct rocemu_port *port, struct rte_mbuf **pkts, uint16_t n)
{
	struct memif_link *l = port->link_priv;
	uint16_t sent;

	if (l->direct && (sent = memif_direct_tx_burst(port, pkts, n)) != UINT16_MAX)
		return sent;
	if (unlikely(port->port_id == UINT16_MAX))
		return 0;
	port_count(port, PC_PMD_TX_BURSTS);
	sent = rte_eth_tx_burst(port->port_id, 0, pkts, n);
	if (l->pmd_copies_tx)
		for (uint16_t i = 0; i < sent; i++)
			port->ctr[PC_PMD_COPY_TX_BYTES] += pkts[i]->pkt_len;
	return sent;
}

/* ------------------------------------------------------------------------ */
/* Close.                                                                     */

static bool memif_tx_in_flight(struct rocemu_port *port, uint64_t now)
{
	return port->last_tx_ns && now - port->last_tx_ns < MEMIF_CLOSE_LINGER_NS;
}

/* The peer is told (handshake), the server's socket released, the device
 * removed on the interrupt thread; the bell page goes last: a pid in the
 * page means our device may still accept a connection (memif_restart). */
static void memif_release(struct rocemu_port *port)
{
	struct memif_link *l = port->link_priv;

	memif_offline(port);
	if (l->state != MEMIF_LINK_CLOSING)
		memif_link_set(port, MEMIF_LINK_CLOSING, "close");
	memif_close_handshake(port);
	memif_direct_release(port);
	if (memif_users_leave(l))
		memif_run_on_intr_thread(memif_forget_listener, l);
	if (port->port_id != UINT16_MAX)
		memif_run_on_intr_thread(remove_device, port);
	memif_bell_page_close(port);
	l->bell_peer_len = 0;
}

const struct port_link_ops port_link_memif = {
    .name = "memif",
    .prefix = "memif:",
    .usage = "memif:server:SOCK, memif:client:SOCK",
    .priv_size = sizeof(struct memif_link),
    .check_arg = memif_check_arg,
    .preview_mac = memif_preview_mac,
    .mtu = memif_mtu,
    .pool_create = memif_pool_create,
    .create = memif_create,
    .set_dev_mtu = true,
    .start = memif_start,
    .attach = memif_attach,
    .online = memif_online,
    .offline = memif_offline,
    .blocked = memif_blocked,
    .wake_peer = memif_wake_peer,
    .app_note = memif_app_note,
    .sleep = memif_sleep,
    .wake = memif_wake,
    .tx_in_flight = memif_tx_in_flight,
    .release = memif_release,
    .rx_burst = memif_rx_burst,
    .tx_burst = memif_tx_burst,
};
