/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Progress (ARCHITECTURE §3): one pass = loopback delivery, rx burst and
 * dispatch, neighbour and link timers, the upper layer's poll, tx flush.
 * Any thread may run a pass under the engine try-lock. The progress thread
 * spins only while there is work and no application thread is polling;
 * otherwise it sleeps on an eventfd with a 1 ms timeout, so an idle port
 * costs little CPU yet answers within about a millisecond. It also spins,
 * briefly, when an application whose wait just ended hands it the CPU
 * (port_app.c, away_spin). Given a CPU of its own (progress-cpu), it is
 * pinned there and spins without napping. A pass keeps its ACKs for the
 * application's next post while the application answers what it receives
 * (port_hold_acks).
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_pause.h>

#include "port_link.h"
#include "roce_wire.h"

/* The thread keeps spinning this long after the last work it saw. */
#define SPIN_AFTER_WORK_NS 200000ull
/* An application poll within this window means the application drives progress. */
#define APP_POLL_WINDOW_NS 2000000ull
/* Sleep between idle passes (PORT_IDLE_SLEEP_NS) bounds the reaction time
 * when nobody kicks. */
/* The same with a receive doorbell and no upper layer: frames wake us. */
#define DOORBELL_SLEEP_NS 20000000ull
#define DOORBELL_GRACE_NS 20000000ull
#define LINK_CHECK_NS	  100000000ull
/* The sleep while an application polls, when frames ring a bell. Not
 * longer: a peer does not ring while our application was seen waiting in a
 * polling loop (memif's app_waiting_tsc, fresh for 10 us), and one that then
 * spins on its memory instead (ib_write_lat) sees such a frame only when
 * this sleep ends. 10 ms here made 1 in 10 ib_write_lat messages wait for
 * it. */
#define APP_POLL_BELL_SLEEP_NS 1000000ull
/* The shortest sleep: below it a timer is served by spinning instead. */
#define MIN_SLEEP_NS 20000ull
/* ACKs a pass keeps for the application's post (port_hold_acks): at most
 * this long, this many, while its last answer is this recent. */
#define ACK_HOLD_NS	   50000ull
#define ACK_HOLD_FRAMES	   4u
#define ANSWER_EVIDENCE_NS 2000000ull
/* The thread's nap while such an application polls (sleep_length). */
#define ANSWER_SLEEP_NS 100000ull

void port_wake_eventfd(struct rocemu_port *port)
{
	uint64_t one = 1;
	ssize_t r = write(port->wake_fd, &one, sizeof(one));

	(void)r;
}

void port_wake_thread(struct rocemu_port *port)
{
	if (port->link->wake)
		port->link->wake(port);
	else
		port_wake_eventfd(port);
}

void rocemu_port_lock(struct rocemu_port *port)
{
	pthread_mutex_lock(&port->lock);
}

void rocemu_port_unlock(struct rocemu_port *port)
{
	pthread_mutex_unlock(&port->lock);
}

static unsigned check_link(struct rocemu_port *port, uint64_t now)
{
	bool up = rocemu_port_link_up(port);

	port->link_next_check_ns = now + LINK_CHECK_NS;
	if (unlikely(port->capture != NULL))
		port_capture_flush(port); /* a killed process still leaves a readable file */
	if (up == port->link_up)
		return 0;
	port->link_up = up;
	port_count(port, PC_LINK_CHANGES);
	if (up && !port->link->resolve)
		port_announce(port); /* gratuitous ARP / unsolicited NA */
	return 1;
}

/* A frame from the wire with our own source MAC: the kernel's outgoing
 * traffic on a shared interface (af_packet sees it) or a reflecting link. */
static bool from_ourselves(const struct rocemu_port *port, const struct rte_mbuf *m)
{
	const struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);

	return m->data_len >= RTE_ETHER_HDR_LEN &&
	       rte_is_same_ether_addr(&eth->src_addr, &port->mac);
}

static unsigned rx_device(struct rocemu_port *port, uint64_t now)
{
	struct rte_mbuf *pkts[PORT_BURST];
	uint16_t n = port->link->rx_burst ? port->link->rx_burst(port, pkts, PORT_BURST)
					  : rte_eth_rx_burst(port->port_id, 0, pkts, PORT_BURST);

	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];

		port_count(port, PC_RX_FRAMES);
		port->ctr[PC_RX_BYTES] += m->pkt_len;
		if (unlikely(port->fault != NULL)) {
			struct rte_mbuf *out[2];
			unsigned k = port_fault_apply(port, 1, m, out, now);

			for (unsigned j = 0; j < k; j++) {
				if (unlikely(port->capture != NULL)) {
					if (j > 0) /* the copy of out[0] */
						port_capture_copy_next(port);
					port_capture_frame(port, out[j]);
				}
				port_rx_frame(port, out[j], now);
			}
			continue;
		}
		if (unlikely(port->capture != NULL))
			port_capture_frame(port, m);
		/* (on a host link, another process of the host shares our MAC) */
		if (unlikely(from_ourselves(port, m)) && !port->link->switched_loopback) {
			rte_pktmbuf_free(m);
			port_count(port, PC_DROP_OWN_SOURCE_MAC);
			port_count(port, PC_RX_DROPS);
			continue;
		}
		port_rx_frame(port, m, now);
	}
	return n;
}

/* One of our own frames is an RC ACKNOWLEDGE: BTH opcode 0x11 over UDP
 * 4791, IPv4 or IPv6, maybe VLAN-tagged. Built here, so no option walk
 * past the IPv4 header length; bounds checked all the same. */
static bool frame_is_ack(const struct rte_mbuf *m)
{
	const uint8_t *p = rte_pktmbuf_mtod(m, const uint8_t *);
	uint32_t len = m->data_len, off = RTE_ETHER_HDR_LEN;
	uint16_t type;

	/* Ethernet, VLAN tag, IPv6, UDP, BTH, AETH, ICRC: anything longer
	 * carries more (a request: the usual frame here), no byte read */
	if (len < off || len > RTE_ETHER_HDR_LEN + 4 + 40 + 8 + 12 + 4 + 4)
		return false;
	type = (uint16_t)(p[12] << 8 | p[13]);
	if (type == RTE_ETHER_TYPE_VLAN) {
		if (len < off + 4)
			return false;
		type = (uint16_t)(p[16] << 8 | p[17]);
		off += 4;
	}
	if (type == RTE_ETHER_TYPE_IPV4) {
		if (len < off + 20 || p[off + 9] != IPPROTO_UDP)
			return false;
		off += (p[off] & 0xfu) * 4u;
	} else if (type == RTE_ETHER_TYPE_IPV6) {
		if (len < off + 40 || p[off + 6] != IPPROTO_UDP)
			return false;
		off += 40;
	} else {
		return false;
	}
	return len > off + 8 && (p[off + 2] << 8 | p[off + 3]) == ROCE_UDP_PORT &&
	       p[off + 8] == ROCE_OP_ACK;
}

/*
 * Keep the pass's ACKs in the transmit buffer for the application's next
 * post (engine lock, inside a pass)? An application that answers what it
 * finds in its memory (ib_write_lat: the peer's WRITE, then its own)
 * posts within microseconds, and its post then carries our ACK in the
 * same burst as its request. The peer, whose completion waits for that
 * ACK, is still polling its CQ when both arrive, so its own poll's pass
 * places the request and completes in one go: its application finds the
 * peer's byte as it leaves the poll, and neither side needs its progress
 * thread, nor a switch to it and back (bench/perf_analysis.md, "Latency").
 * Only pure ACKs (no response, no NAK: those go at once), only while the
 * application answers (port_app.c, post_answers: a post shortly after a
 * poll that found something, but no receive completion, and after a pass
 * like this one, with pure ACKs to send, so a peer's request), at most
 * ACK_HOLD_NS: later passes send them, the application's polls or the
 * thread's. An application that stops calling verbs right then leaves them
 * for the thread's nap (100 us while it answers, sleep_length), short of
 * the peer's tail-loss probe (250 us). A sender that streams and polls its
 * CQ (ib_write_bw's client) receives no requests, and ib_send_lat finds the
 * peer's message in its CQ, so neither answers: their threads nap as long
 * as for any polling application (bench/perf_analysis.md).
 */
bool port_hold_acks(struct rocemu_port *port)
{
	uint64_t now = port->pass_now;
	uint64_t answered;

	/* an application that never found anything answers nothing
	 * (ib_write_bw's server never polls): nothing to look at */
	if (!port->ack_hold || port->tx_n == 0 || port->tx_n > ACK_HOLD_FRAMES ||
	    !port->app_found_ns)
		return false;
	for (unsigned i = 0; i < port->tx_n; i++)
		if (!frame_is_ack(port->tx_buf[i]))
			return false;
	port->acks_alone_ns = now;
	answered = atomic_load_explicit(&port->app_answered_ns, memory_order_relaxed);
	if (!answered || (int64_t)(now - answered) >= (int64_t)ANSWER_EVIDENCE_NS)
		return false;
	if (port->acks_held_since_ns && now - port->acks_held_since_ns >= ACK_HOLD_NS)
		return false;
	if (!port->acks_held_since_ns) {
		port->acks_held_since_ns = now;
		port_count(port, PC_TX_ACKS_HELD);
	}
	return true;
}

static unsigned release_delayed(struct rocemu_port *port, uint64_t now)
{
	struct rte_mbuf *held[PORT_FAULT_HOLD];
	unsigned n, work = 0;

	n = port_fault_release(port, 1, held, PORT_FAULT_HOLD, now);
	for (unsigned i = 0; i < n; i++) {
		if (port->capture)
			port_capture_frame(port, held[i]);
		port_rx_frame(port, held[i], now);
	}
	work += n;
	n = port_fault_release(port, 0, held, PORT_FAULT_HOLD, now);
	for (unsigned i = 0; i < n; i++)
		port_transmit(port, held[i]);
	return work + n;
}

unsigned rocemu_port_progress_locked(struct rocemu_port *port)
{
	uint64_t now = rocemu_now_ns_tsc(&port->last_pass_tsc);
	unsigned work = 0;
	unsigned n_loop = port->loop_tail - port->loop_head;
	enum port_counter reason; /* the link's, unused: the rings are not read */

	if (unlikely(port->closed_at_exit))
		return 0;
	port->pass_now = now;
	__atomic_store_n(&port->last_pass_ns, now, __ATOMIC_RELAXED);
	if (atomic_load_explicit(&port->kicked, memory_order_relaxed))
		atomic_store_explicit(&port->kicked, false, memory_order_relaxed);
	if (!port->tx_n) /* whatever was held has gone (a post sent it) */
		port->acks_held_since_ns = 0;
	port->in_pass = true;
	/* frames looped back before this pass; those looped during it wait */
	for (unsigned i = 0; i < n_loop; i++) {
		struct rte_mbuf *m = port->loop[port->loop_head++ & (PORT_LOOP_SLOTS - 1)];
		port_rx_frame(port, m, now);
	}
	work += n_loop;
	if (likely(!port->link->blocked || !port->link->blocked(port, &reason)))
		work += rx_device(port, now);
	if (unlikely(port->fault != NULL))
		work += release_delayed(port, now);
	port_rx_flush_upper(port);
	if (now >= port->neigh_next_check_ns)
		work += port_neigh_poll(port, now);
	if (now >= port->link_next_check_ns)
		work += check_link(port, now);
	if (port->has_upper) {
		if (port->upper.poll)
			work += port->upper.poll(port->upper.ctx, now);
		atomic_store_explicit(&port->upper_has_work,
				      port->upper.has_work && port->upper.has_work(port->upper.ctx),
				      memory_order_relaxed);
	}
	if (port->tx_n && !port_hold_acks(port)) {
		unsigned waiting = port->tx_n;

		port->in_pass = false;
		rocemu_port_flush(port);
		/* the frames the device took: frames still waiting for it (a
		 * full ring, memif's channel at its cap) are no work, or a
		 * thread waiting for the peer never naps (memif_sleep's last
		 * pass "found work" on every try: 0.4-0.7 M wake-ups and 1.4-
		 * 2.1 s of CPU in 4 s beside its own application, "Many QPs") */
		work += waiting - port->tx_n;
	}
	port->in_pass = false;
	port->pass_now = 0;
	/* a pass with work can be long (a burst of 4 KiB frames): the
	 * application's poll stamp (port_app.c) is then its end */
	if (work && port->last_pass_tsc)
		port->last_pass_tsc = rte_rdtsc();
	return work;
}

unsigned rocemu_port_progress(struct rocemu_port *port)
{
	unsigned work;

	if (pthread_mutex_trylock(&port->lock))
		return 0;
	work = rocemu_port_progress_locked(port);
	pthread_mutex_unlock(&port->lock);
	return work;
}

/* When a pass must run next (engine lock held): 0 = now (frames to hand
 * the device or loop back, work the upper layer left queued), else the
 * upper layer's next timer, UINT64_MAX = nothing pending. */
uint64_t port_next_pass_due(struct rocemu_port *port)
{
	if (port->tx_n && port->acks_held_since_ns)
		return port->acks_held_since_ns + ACK_HOLD_NS; /* kept for a post */
	if (port->tx_n || port->loop_tail != port->loop_head)
		return 0;
	if (!port->has_upper)
		return UINT64_MAX;
	if (port->upper.next_due)
		return port->upper.next_due(port->upper.ctx);
	if (port->upper.has_work && port->upper.has_work(port->upper.ctx))
		return 0;
	return UINT64_MAX;
}

bool port_app_is_polling(struct rocemu_port *port, uint64_t now)
{
	uint64_t app = atomic_load_explicit(&port->last_app_poll_ns, memory_order_relaxed);

	/* signed: the application's stamp may be newer than `now` (a pass of
	 * its own, or a post, read the clock after the caller's reading) */
	return app && (int64_t)(now - app) < (int64_t)APP_POLL_WINDOW_NS;
}

/* How long the idle thread may sleep. While an application polls, it runs
 * the passes (timers included) itself: long, so the thread costs nothing.
 * Otherwise until the next timer, at most PORT_IDLE_SLEEP_NS (or longer with a
 * doorbell and no upper layer: only the port's own timers then). */
static uint64_t sleep_length(struct rocemu_port *port, bool app_polling, bool doorbell,
			     uint64_t now)
{
	uint64_t sleep_ns, due;

	/* With a bell or doorbell, frames for an application that stopped
	 * polling wake the thread; only timers wait for the timeout then, and
	 * they are milliseconds (the transport timer, 4.096 us << timeout). */
	if (app_polling) {
		uint64_t answered =
		    atomic_load_explicit(&port->app_answered_ns, memory_order_relaxed);

		/* An application that answers may lose its CPU between the
		 * poll that kept ACKs and its post: look again well before the
		 * peer's tail-loss probe (250 us) would resend for such an ACK.
		 * A probe's duplicate then upsets the next rounds: ms tails. */
		if (answered && (int64_t)(now - answered) < (int64_t)ANSWER_EVIDENCE_NS)
			return ANSWER_SLEEP_NS;
		return doorbell ? APP_POLL_BELL_SLEEP_NS : APP_POLL_WINDOW_NS;
	}
	sleep_ns = doorbell && !__atomic_load_n(&port->has_upper, __ATOMIC_RELAXED)
		       ? DOORBELL_SLEEP_NS
		       : PORT_IDLE_SLEEP_NS;
	/* Shortly after a ring, sleep briefly only: the doorbell may have rung
	 * before the PMD's socket got the frame (both are taps on the device,
	 * ours first), and a descheduled CPU can stretch that gap. */
	if (now < port->doorbell_grace_until_ns)
		sleep_ns = PORT_IDLE_SLEEP_NS;
	if (pthread_mutex_trylock(&port->lock) == 0) {
		due = port_next_pass_due(port);
		pthread_mutex_unlock(&port->lock);
		if (due < now + MIN_SLEEP_NS)
			due = now + MIN_SLEEP_NS;
		if (due - now < sleep_ns)
			sleep_ns = due - now;
	}
	return sleep_ns;
}

/*
 * The generic sleep: ppoll until kicked (eventfd), a frame arrives (when the
 * link has a doorbell: af_packet's packet socket, memif's datagram bell), or
 * the timeout.
 * Returns true when woken by a frame: the caller then treats it as work and
 * spins a little, because the doorbell may ring before the PMD's own socket
 * has the frame.
 */
bool port_fd_sleep(struct rocemu_port *port, const struct timespec *ts)
{
	struct pollfd pfd[2] = {{.fd = port->wake_fd, .events = POLLIN},
				{.fd = port->doorbell_fd, .events = POLLIN}};
	nfds_t nfds = port->doorbell_fd >= 0 ? 2 : 1;
	uint64_t drain;
	bool frame = false;

	if (!atomic_load(&port->thread_stop) &&
	    !atomic_load_explicit(&port->kicked, memory_order_seq_cst))
		ppoll(pfd, nfds, ts, NULL);
	if (pfd[0].revents & POLLIN) {
		ssize_t r = read(port->wake_fd, &drain, sizeof(drain));
		(void)r;
	}
	if (nfds == 2 && (pfd[1].revents & POLLIN)) {
		char byte;

		/* drain before the next pass: a frame after this rings again */
		for (int i = 0; i < 256; i++)
			if (recv(port->doorbell_fd, &byte, 1, MSG_DONTWAIT | MSG_TRUNC) < 0)
				break;
		frame = true;
		port->doorbell_grace_until_ns = rocemu_now_ns() + DOORBELL_GRACE_NS;
	}
	return frame;
}

/* Sleep (the link's way, or port_fd_sleep). Returns true when woken by a frame. */
static bool idle_sleep(struct rocemu_port *port, bool app_polling)
{
	uint64_t now = rocemu_now_ns();
	uint64_t sleep_ns = sleep_length(port, app_polling, port->frames_wake, now);
	struct timespec ts = {.tv_sec = (time_t)(sleep_ns / 1000000000ull),
			      .tv_nsec = (long)(sleep_ns % 1000000000ull)};
	bool frame;

	atomic_store_explicit(&port->sleep_until_ns, now + sleep_ns, memory_order_relaxed);
	atomic_store_explicit(&port->thread_sleeping, true, memory_order_seq_cst);
	frame = port->link->sleep ? port->link->sleep(port, &ts) : port_fd_sleep(port, &ts);
	atomic_store_explicit(&port->thread_sleeping, false, memory_order_seq_cst);
	/* the thread's own counters: no other thread writes them */
	port_count(port, PC_PROGRESS_NAPS);
	if (frame)
		port_count(port, PC_PROGRESS_WOKEN);
	return frame;
}

/*
 * While the application is away after a poll that ended its wait and has
 * been seen waiting for frames only this thread places (port_app.c,
 * away_spin): spin until they come, then give the CPU back. Returns true
 * while the thread is to go on spinning.
 */
static bool spin_for_away_app(struct rocemu_port *port, unsigned work, uint64_t now)
{
	uint64_t until = atomic_load_explicit(&port->app_spin_until_ns, memory_order_relaxed);

	if (!until)
		return false;
	if (!work && now < until)
		return true;
	if (work)
		port_count(port, PC_PROGRESS_AWAY_PLACED);
	atomic_store_explicit(&port->app_spin_until_ns, 0, memory_order_relaxed);
	return false;
}

static void *progress_main(void *arg)
{
	struct rocemu_port *port = arg;
	uint64_t last_work = rocemu_now_ns();
	/* an lcore id of its own gives the thread its own mempool cache: the
	 * mbufs it receives, frees and allocates (ACKs) stop going through
	 * the pool's shared ring one by one. Without a free id, no cache. */
	bool lcore = rte_thread_register() == 0 && rte_lcore_id() != LCORE_ID_ANY;

	while (!atomic_load_explicit(&port->thread_stop, memory_order_relaxed)) {
		unsigned work = rocemu_port_progress(port);
		/* the pass just read the clock (or another thread's did, if it
		 * held the lock): on a VM a TSC read costs ~35 ns, a fifth of an
		 * idle pass */
		uint64_t now = __atomic_load_n(&port->last_pass_ns, __ATOMIC_RELAXED);
		bool app_polling = port_app_is_polling(port, now);

		if (work || atomic_load_explicit(&port->upper_has_work, memory_order_relaxed))
			last_work = now;
		/* frames the application, gone away, can only have from us */
		if (work && atomic_load_explicit(&port->app_away, memory_order_relaxed))
			atomic_store_explicit(&port->away_rx_ns, now, memory_order_relaxed);
		if (atomic_load_explicit(&port->thread_quiet, memory_order_relaxed)) {
			if (!work)
				idle_sleep(port, false);
			continue;
		}
		/* a CPU of its own (progress-cpu): never nap, so a frame is
		 * placed as soon as it arrives, with no wake-up on either side */
		if (port->progress_cpu >= 0) {
			rte_pause();
			continue;
		}
		if (spin_for_away_app(port, work, now)) {
			rte_pause();
			continue;
		}
		if (!app_polling && now - last_work < SPIN_AFTER_WORK_NS) {
			rte_pause();
			continue;
		}
		if (idle_sleep(port, app_polling))
			last_work = rocemu_now_ns();
	}
	if (lcore) /* its cached mbufs back to the pools (port_pool.c) */
		port_pool_thread_leave();
	return NULL;
}

int rocemu_port_progress_thread_start(struct rocemu_port *port)
{
	pthread_attr_t attr;
	cpu_set_t cpus;
	sigset_t all, old;
	const char *env;
	int rc;

	if (port->thread_running)
		return 0;
	atomic_store(&port->thread_stop, false);
	/* ROCEMU_AWAY_SPIN=0: no spin for an application gone away (port_app.c),
	 * to compare with and without it in one build */
	env = getenv("ROCEMU_AWAY_SPIN");
	port->away_spin = !env || strcmp(env, "0") != 0;
	/* ROCEMU_ACK_HOLD=0: no pass keeps its ACKs for an answering
	 * application's next post (port_hold_acks), to compare in one build.
	 * On by default since it keeps them only for an application that
	 * answers what it finds in its memory (port_app.c, post_answers), not
	 * for one that streams or answers messages from its CQ, which paid
	 * for the broader rule before (bench/perf_analysis.md, "Latency") */
	env = getenv("ROCEMU_ACK_HOLD");
	port->ack_hold = !env || strcmp(env, "0") != 0;
	/* the thread inherits a mask with every signal blocked: signals keep
	 * going to the program's own threads */
	rc = pthread_attr_init(&attr);
	if (rc)
		return -rc;
	if (port->progress_cpu >= 0) {
		CPU_ZERO(&cpus);
		CPU_SET(port->progress_cpu, &cpus);
		rc = pthread_attr_setaffinity_np(&attr, sizeof(cpus), &cpus);
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = rc ?: pthread_create(&port->thread, &attr, progress_main, port);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc)
		return -rc;
	pthread_setname_np(port->thread, "rocemu-progress");
	port->thread_running = true;
	if (port->progress_cpu >= 0)
		port_notice(port,
			    "progress thread on CPU %d, spinning there while the port is open "
			    "(progress-cpu)",
			    port->progress_cpu);
	return 0;
}

void rocemu_port_progress_thread_quiet(struct rocemu_port *port, bool quiet)
{
	atomic_store(&port->thread_quiet, quiet);
}

int rocemu_port_progress_cpu(const struct rocemu_port *port)
{
	return port->progress_cpu;
}

void rocemu_port_progress_thread_stop(struct rocemu_port *port)
{
	if (!port->thread_running)
		return;
	atomic_store(&port->thread_stop, true);
	port_wake_eventfd(port);
	port_wake_thread(port);
	pthread_join(port->thread, NULL);
	port->thread_running = false;
}
