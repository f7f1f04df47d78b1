/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The application's side of progress (rocemu_port.h, the contract): one
 * bracket per verb, rocemu_port_verb_enter / rocemu_port_verb_leave, and
 * what the application did in it. From that the port, and its link driver,
 * decide whether the progress thread must be woken and whether a peer
 * must ring: an application that posts or polls runs the passes itself, so
 * nothing wakes the thread for it; one that got what it waited for may wait
 * elsewhere next, so frames must wake the thread again; one about to block
 * hands progress to the thread at once.
 */
#include <pthread.h>
#include <sched.h>

#include "port_link.h"

/* A post runs a progress pass when none ran for this long: an application
 * that posts for long without polling (many QPs, deep queues) must still
 * receive. Its progress thread naps while it is busy with us, and the peer
 * does not ring a busy application; without a pass the peer's ACKs pile up
 * unread, its ring fills, and our transport timers expire (RETRY_EXC with
 * 1024 QPs). */
#define POST_PASS_NS 20000ull
/* How long the progress thread spins for an application gone away, and how
 * recent the evidence must be that it waits for frames only the thread
 * places (port_progress.c, progress_main). */
#define AWAY_SPIN_NS	 100000ull
#define AWAY_EVIDENCE_NS 2000000ull
/* A post this soon after a poll that found something and after a pass
 * that had only ACKs to send (a request of the peer's came) answers it:
 * the application replies to what it receives, so a pass may keep its
 * ACKs for the next post (port_progress.c, port_hold_acks). Long enough
 * for the away spin's way: the thread spins up to AWAY_SPIN_NS for the
 * frame the application answers. */
#define ANSWER_NS 200000ull

/* Have the thread run a pass now; without the engine lock. Dekker-style
 * with the thread's sleep: either the thread sees `kicked` before it
 * sleeps, or we see it sleeping and wake it. */
static void wake_thread(struct rocemu_port *port)
{
	atomic_store_explicit(&port->kicked, true, memory_order_seq_cst);
	if (atomic_load_explicit(&port->thread_sleeping, memory_order_seq_cst))
		port_wake_thread(port);
}

/*
 * Wake the progress thread if a pass has work now. Usually the caller has
 * just transmitted everything itself, or what is left will be done in time
 * anyway: by the application's next poll when it is polling, or by the
 * thread when its sleep ends before the next timer. Then there is nothing to
 * wake the thread for, and no system call is made. The check needs the lock;
 * if someone else holds it (a pass may be running), fall through to the safe
 * path. Without the engine lock; never blocks.
 */
static void kick(struct rocemu_port *port)
{
	if (pthread_mutex_trylock(&port->lock) == 0) {
		uint64_t due = port_next_pass_due(port);
		uint64_t now;

		pthread_mutex_unlock(&port->lock);
		if (due == UINT64_MAX)
			return;
		now = rocemu_now_ns();
		if (port_app_is_polling(port, now) ||
		    (due > now &&
		     due >= atomic_load_explicit(&port->sleep_until_ns, memory_order_relaxed)))
			return;
	}
	wake_thread(port);
}

/* An application polled, after its pass (lock held). It will presumably poll
 * again, and run the next pass itself, when it found nothing or still waits
 * for something (the upper layer has timers armed: sends not acknowledged):
 * then the thread backs off and a memif peer need not ring. When it got what
 * it waited for it may wait elsewhere next (ib_write_lat spins on its
 * buffer): then frames must wake the thread again. The stamp costs no clock
 * read: the pass its poll just ran (or the thread's) is recent enough. */
/*
 * An application that went away after a poll and came back because frames
 * arrived that the thread placed (ib_write_lat: it spins on its buffer for
 * the peer's WRITE) will do so again. Its thread sleeps, and on a VM a wake
 * from another CPU (the peer's bell) takes 30-80 us before the thread runs
 * on the CPU the application spins on: most of ib_write_lat's time
 * (bench/perf_analysis.md). Instead, the poll that ends its wait hands the
 * CPU to the thread at once (a wake on the same CPU: no interrupt), and
 * the thread spins until the frames come, AWAY_SPIN_NS at most, then
 * sleeps and so gives the CPU back. Returns true when the thread is to be
 * woken (after the lock is released: it may run at once, on our CPU).
 */
static bool away_spin(struct rocemu_port *port, uint64_t t)
{
	uint64_t seen = atomic_load_explicit(&port->away_rx_ns, memory_order_relaxed);
	uint64_t answered = atomic_load_explicit(&port->app_answered_ns, memory_order_relaxed);

	/* An application that answers what it receives waits for the peer's
	 * next request too: while the ACKs a pass keeps for its post bring
	 * the peer's request with them (port_hold_acks), its own poll places
	 * it and this thread is not needed; when an ACK comes alone (the
	 * peer's hold ran out) the request comes later, and only the thread
	 * can take it for an application spinning on its memory. */
	if (answered > seen)
		seen = answered;
	atomic_store_explicit(&port->app_away, true, memory_order_relaxed);
	if (!port->away_spin || !port->thread_running || port->progress_cpu >= 0 || !seen ||
	    t - seen >= AWAY_EVIDENCE_NS)
		return false;
	/* More frames since its post than the one that answered it (the
	 * ACK): what it will wait for may be here already, and a spinning
	 * thread would keep it from looking. */
	if (port->ctr[PC_RX_FRAMES] - port->rx_at_post > 1)
		return false;
	atomic_store_explicit(&port->app_spin_until_ns, t + AWAY_SPIN_NS, memory_order_relaxed);
	port_count(port, PC_PROGRESS_AWAY_SPINS);
	return true;
}

/*
 * The away spin's hand-over: wake the thread, and if it has not run by the
 * time the wake returns, yield the CPU to it. A thread woken on the CPU
 * its application spins on runs at once only when the scheduler finds its
 * deadline earlier than the application's (EEVDF); otherwise it waits for
 * the application's time slice to end, while the application spins on
 * memory that only the thread can fill: `perf sched timehist` showed such
 * waits of 0.1-4 ms in ~1% of ib_write_lat's hand-overs, its p99. The
 * thread counts every sleep it comes out of (progress_naps): unchanged
 * means not run yet. A thread that did run, or one on another CPU (no
 * other task here: the yield returns at once), costs nothing or one
 * system call.
 */
static void hand_over(struct rocemu_port *port)
{
	uint64_t naps = __atomic_load_n(&port->ctr[PC_PROGRESS_NAPS], __ATOMIC_RELAXED);

	wake_thread(port);
	if (__atomic_load_n(&port->ctr[PC_PROGRESS_NAPS], __ATOMIC_RELAXED) != naps)
		return;
	__atomic_fetch_add(&port->ctr[PC_PROGRESS_AWAY_YIELDS], 1, __ATOMIC_RELAXED);
	sched_yield();
}

static bool app_polled(struct rocemu_port *port, bool found)
{
	uint64_t t = port->last_pass_ns;
	bool back = !found || (port->has_upper && port->upper.next_due &&
			       port->upper.next_due(port->upper.ctx) != UINT64_MAX);

	atomic_store_explicit(&port->last_app_poll_ns, t, memory_order_relaxed);
	if (found)
		port->app_found_ns = t;
	if (port->link->app_note &&
	    port->link->app_note(port, back ? PORT_APP_WAITING : PORT_APP_SATISFIED))
		rocemu_port_progress_locked(port);
	if (back) {
		atomic_store_explicit(&port->app_away, false, memory_order_relaxed);
		return false;
	}
	return away_spin(port, t);
}

/* stamp is set and at most ANSWER_NS before t (either may be the newer:
 * they come from different threads' clock readings) */
static bool within_answer(uint64_t t, uint64_t stamp)
{
	return stamp && (int64_t)(t - stamp) < (int64_t)ANSWER_NS;
}

/*
 * Does a post answer a request of the peer's that the application saw in
 * its memory (lock held)? It follows a poll that found something, but no
 * receive completion, and a pass that had only ACKs to send (a request
 * of the peer's came), both within ANSWER_NS: ib_write_lat, whose poll
 * finds its own WRITE completed and whose answer is to the peer's WRITE in
 * its buffer. Its peer does the same, so it polls until our ACK and then
 * spins on its memory: the ACK must come with our WRITE, or its thread
 * has to place the WRITE.
 * Not a sender that streams: ib_write_bw's client posts after polls that
 * find completions too, but the peer sends it no requests, so no pass of
 * its ends with ACKs alone. Taking its posts for answers napped its thread
 * 100 us instead of 1 ms (3x its naps) and cost its bandwidth. Nor an
 * application that answers a receive completion (ib_send_lat): its peer
 * polls its CQ for our message and needs no ACK for that; keeping the ACK
 * put it in the same burst as the message, so the peer took both before
 * its poll could return: 1.10x its latency (bench/perf_analysis.md,
 * "Latency").
 */
static bool post_answers(const struct rocemu_port *port, uint64_t t)
{
	uint64_t recv = atomic_load_explicit(&port->app_found_recv_ns, memory_order_relaxed);

	return port->ack_hold && within_answer(t, port->app_found_ns) &&
	       (int64_t)(port->app_found_ns - recv) > 0 && within_answer(t, port->acks_alone_ns);
}

/* An application posted (lock held): it is busy with us and will poll for
 * the result. The stamp is the time the post holds: no clock read. */
static void app_posted(struct rocemu_port *port)
{
	uint64_t t = rocemu_port_pass_now(port);

	atomic_store_explicit(&port->last_app_poll_ns, t, memory_order_relaxed);
	if (post_answers(port, t)) {
		atomic_store_explicit(&port->app_answered_ns, t, memory_order_relaxed);
		port_count(port, PC_APP_ANSWERS);
	}
	atomic_store_explicit(&port->app_away, false, memory_order_relaxed);
	port->rx_at_post = port->ctr[PC_RX_FRAMES];
	if (port->link->app_note)
		port->link->app_note(port, PORT_APP_POSTED);
}

/* A poll: a pass if the engine lock is free, and the lock held either way
 * (if another thread holds it, that one is running a pass: wait for it).
 * One lock round trip instead of a try-locked pass and then the lock again. */
static void enter_poll(struct rocemu_port *port)
{
	if (pthread_mutex_trylock(&port->lock) == 0)
		rocemu_port_progress_locked(port);
	else
		pthread_mutex_lock(&port->lock);
}

/* A post: the lock; one clock reading held for the whole post, so that the
 * transport's timestamps (RTT, timers, completions) cost no further read
 * (not inside a pass, which has its time already); a pass when none ran for
 * POST_PASS_NS. */
static void enter_post(struct rocemu_port *port)
{
	pthread_mutex_lock(&port->lock);
	port->verb_clock_held = port->pass_now == 0;
	if (port->verb_clock_held)
		port->pass_now = rocemu_now_ns_tsc(&port->last_pass_tsc);
	if (port->pass_now - __atomic_load_n(&port->last_pass_ns, __ATOMIC_RELAXED) > POST_PASS_NS)
		rocemu_port_progress_locked(port);
}

void rocemu_port_verb_enter(struct rocemu_port *port, enum rocemu_verb verb)
{
	if (verb != ROCEMU_VERB_CONTROL && port->link->app_note)
		port->link->app_note(port, PORT_APP_ENTER);
	switch (verb) {
	case ROCEMU_VERB_POLL:
		enter_poll(port);
		break;
	case ROCEMU_VERB_POST:
		enter_post(port);
		break;
	case ROCEMU_VERB_CONTROL:
		pthread_mutex_lock(&port->lock);
		break;
	}
}

void rocemu_port_verb_leave(struct rocemu_port *port, enum rocemu_verb_did did)
{
	switch (did) {
	case ROCEMU_DID_POST:
		/* it runs the passes (timers included) itself, so the thread
		 * needs no kick; a memif peer rings once it has gone quiet */
		app_posted(port);
		if (port->verb_clock_held)
			port->pass_now = 0;
		port->verb_clock_held = false;
		pthread_mutex_unlock(&port->lock);
		break;
	case ROCEMU_DID_POLL_FOUND:
	case ROCEMU_DID_POLL_EMPTY: {
		bool spin = app_polled(port, did == ROCEMU_DID_POLL_FOUND);

		pthread_mutex_unlock(&port->lock);
		if (spin) /* hand the CPU to the thread (away_spin) */
			hand_over(port);
		break;
	}
	case ROCEMU_DID_CHANGE:
		pthread_mutex_unlock(&port->lock);
		kick(port);
		break;
	case ROCEMU_DID_NOTHING:
		pthread_mutex_unlock(&port->lock);
		break;
	}
}

void rocemu_port_app_found_recv(struct rocemu_port *port)
{
	atomic_store_explicit(&port->app_found_recv_ns,
			      __atomic_load_n(&port->last_pass_ns, __ATOMIC_RELAXED),
			      memory_order_relaxed);
}

void rocemu_port_app_blocks(struct rocemu_port *port)
{
	bool unrung = false;

	atomic_store_explicit(&port->last_app_poll_ns, 0, memory_order_relaxed);
	/* blocked is not away: the thread's wake-up is what it waits for */
	atomic_store_explicit(&port->app_away, false, memory_order_relaxed);
	atomic_store_explicit(&port->app_spin_until_ns, 0, memory_order_relaxed);
	/* it answers nothing while blocked: the thread's next pass sends the
	 * ACKs a pass kept for its post (port_hold_acks) */
	atomic_store_explicit(&port->app_answered_ns, 0, memory_order_relaxed);
	if (port->link->app_note)
		unrung = port->link->app_note(port, PORT_APP_AWAY);
	/* a thread that sleeps long because we were polling takes over now;
	 * so does one with frames in its rings that no writer rang for (the
	 * link says so: a writer skips the bell while we are busy) */
	atomic_store_explicit(&port->kicked, true, memory_order_seq_cst);
	if (atomic_load_explicit(&port->thread_sleeping, memory_order_seq_cst) &&
	    (unrung || atomic_load_explicit(&port->sleep_until_ns, memory_order_relaxed) >
			   rocemu_now_ns() + PORT_IDLE_SLEEP_NS))
		port_wake_thread(port);
}
