/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memif's bell. DPDK 22.11's memif PMD has no receive interrupt (it
 * implements no rx_queue_intr_* operation; the memif protocol's eventfds stay
 * inside it), so two rocemu ends ring each other through one shared page,
 * POSIX shm `/rocemu-bell-<hash of the socket path>`, one 128-byte slot per
 * end: the bell is a futex word there, and each end says whether its
 * progress thread sleeps waiting for it and whether its application is in a
 * polling loop. A sender rings only a sleeping peer whose application will
 * not look at the ring anyway, once per sleep: to a busy peer a frame costs
 * no system call. The page also carries the close handshake and the
 * connection numbers (port_link_memif.c).
 *
 * The server creates the page (a fresh one, any stale page of the same name
 * unlinked first) once its device exists, so once the socket is bound and
 * the path is its own, before the device starts; it unlinks the page at
 * close. A client maps it after its device started, and so does each later
 * client of the same server (the name stays). Each end writes its pid into
 * its slot once its device has started: a client waits for the server's,
 * and until the peer's pid is there (a non-rocemu peer) rings are
 * time-based datagrams. A client whose server was replaced maps the new
 * server's page when it reconnects (memif_bell_page_remap).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>

#include <rte_cycles.h>

#include "port_memif.h"

/* A polling loop comes back well within this; a longer gap may be an
 * application gone elsewhere, which must be woken (see peer_app_waiting). */
#define PEER_APP_FRESH_NS 10000
/* Without the page: ring the peer's datagram bell at most this often. */
#define BELL_INTERVAL_NS 100000ull
/* The close handshake waits this long at most for the peer's answer. */
#define CLOSE_HANDSHAKE_NS 200000000ull

/* The name shared by the two ends of the memif socket at path (FNV-1a). */
static uint64_t bell_hash(const char *path)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const char *c = path; *c; c++) {
		h ^= (uint8_t)*c;
		h *= 0x100000001b3ull;
	}
	return h;
}

void memif_bell_page_name(char *buf, size_t len, const char *path)
{
	snprintf(buf, len, "/rocemu-bell-%016llx", (unsigned long long)bell_hash(path));
}

/* Our slot of a page just mapped: not sleeping, no application waiting; the
 * peer's closes so far are not about us (acknowledged as seen). */
static void page_join(struct memif_link *l)
{
	struct memif_bell_slot *own = memif_own(l), *peer = memif_peer(l);

	atomic_store(&own->sleeping, 0);
	atomic_store(&own->app_waiting_tsc, 0);
	atomic_store(&own->app_busy, 0);
	l->peer_closing_seen = atomic_load(&peer->closing);
	atomic_store(&own->acked, l->peer_closing_seen);
}

/* The server makes the page, a client maps its server's. */
void memif_bell_page_open(struct rocemu_port *port)
{
	struct memif_link *l = port->link_priv;
	struct stat st;
	void *p;
	int fd;

	memif_bell_page_name(l->shm_name, sizeof(l->shm_name), l->path);
	if (!l->client) {
		shm_unlink(l->shm_name);
		fd = shm_open(l->shm_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0 && ftruncate(fd, sizeof(struct memif_bell_page))) {
			close(fd);
			shm_unlink(l->shm_name);
			fd = -1;
		}
	} else {
		fd = shm_open(l->shm_name, O_RDWR | O_CLOEXEC, 0);
	}
	if (fd < 0)
		return;
	/* a page the server has not sized yet would fault (SIGBUS) */
	if (fstat(fd, &st) || st.st_size < (off_t)sizeof(struct memif_bell_page)) {
		close(fd);
		return;
	}
	p = mmap(NULL, sizeof(struct memif_bell_page), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		if (!l->client)
			shm_unlink(l->shm_name);
		return;
	}
	l->page = p;
	l->page_dev = st.st_dev;
	l->page_ino = st.st_ino;
	l->shm_owner = !l->client;
	page_join(l);
	l->fresh_tsc = rte_get_tsc_hz() / (1000000000ull / PEER_APP_FRESH_NS);
}

/*
 * A memif client about to connect again (engine lock held): if the page
 * under the name is no longer the one we map, a new server made it; map it
 * at the same address. MAP_FIXED replaces the mapping in one step, so the
 * threads that read the page without the lock (the progress thread's sleep,
 * the application's stamps, a kick) see the old page or the new one, never
 * a hole; a sleep on the old page's futex just lasts until its timeout.
 * Returns true when the page changed. A client that had no page keeps none.
 */
bool memif_bell_page_remap(struct rocemu_port *port)
{
	struct memif_link *l = port->link_priv;
	struct stat st;
	bool changed = false;
	int fd;

	if (!l->page)
		return false;
	fd = shm_open(l->shm_name, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0)
		return false;
	if (fstat(fd, &st) == 0 && (st.st_ino != l->page_ino || st.st_dev != l->page_dev) &&
	    st.st_size >= (off_t)sizeof(struct memif_bell_page)) {
		atomic_store(&memif_own(l)->sleeping, 0);
		atomic_store(&memif_own(l)->pid, 0);
		if (mmap(l->page, sizeof(struct memif_bell_page), PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_FIXED, fd, 0) != MAP_FAILED) {
			l->page_dev = st.st_dev;
			l->page_ino = st.st_ino;
			/* the close we acknowledged was the old server's, in the old page */
			page_join(l);
			atomic_store(&memif_own(l)->pid, (unsigned)getpid());
			port_count(port, PC_MEMIF_BELL_PAGE_REMAPPED);
			changed = true;
		}
	}
	close(fd);
	return changed;
}

void memif_bell_page_close(struct rocemu_port *port)
{
	struct memif_link *l = port->link_priv;

	if (!l->page)
		return;
	atomic_store(&memif_own(l)->sleeping, 0);
	atomic_store(&memif_own(l)->pid, 0);
	munmap(l->page, sizeof(struct memif_bell_page));
	l->page = NULL;
	if (l->shm_owner)
		shm_unlink(l->shm_name);
	l->shm_owner = false;
}

/*
 * Once the device has started (the pid in the page says so): a client maps
 * its server's page, each end writes its pid. Both also bind an abstract
 * Unix datagram socket named after the socket path and their role: without
 * the page (a page that could not be made or found) a transmit rings the
 * peer's at most once per BELL_INTERVAL_NS (a peer woken by a bell spins for
 * a while after that work, so it is awake for the frames that follow). Best
 * effort: with no bell at all (a non-rocemu peer) the thread wakes every
 * millisecond.
 */
void memif_bell_attach(struct rocemu_port *port)
{
	struct memif_link *l = port->link_priv;
	struct sockaddr_un own = {.sun_family = AF_UNIX};
	socklen_t len;
	size_t off;
	int fd;

	if (l->client)
		memif_bell_page_open(port);
	if (l->page)
		atomic_store(&memif_own(l)->pid, (unsigned)getpid());
	port->frames_wake = l->page != NULL;
	/* abstract names: sun_path[0] == 0, no file to clean up */
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			  (socklen_t)snprintf(
			      own.sun_path + 1, sizeof(own.sun_path) - 1, "rocemu-bell-%016llx-%c",
			      (unsigned long long)bell_hash(l->path), l->client ? 'c' : 's'));
	off = len - offsetof(struct sockaddr_un, sun_path) - 1;
	l->bell_peer = own;
	l->bell_peer.sun_path[off] = l->client ? 's' : 'c';
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (bind(fd, (struct sockaddr *)&own, len)) {
		close(fd);
		return;
	}
	port->doorbell_fd = fd;
	port->frames_wake = true;
	l->bell_peer_len = len;
}

/* The bell page is a MAP_SHARED mapping of a shm file: the futex is keyed
 * by the file, not the process, so FUTEX_WAIT/WAKE without the PRIVATE flag
 * reach across the two processes. */
void memif_bell_ring(struct memif_bell_slot *slot)
{
	atomic_fetch_add_explicit(&slot->bell, 1, memory_order_seq_cst);
	syscall(SYS_futex, &slot->bell, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* The end of `slot` is in a polling loop: its app_waiting_tsc is set and
 * younger than fresh_tsc (a stamp from the future counts as stale). */
static bool app_waiting(const struct memif_link *l, struct memif_bell_slot *slot)
{
	uint64_t t = atomic_load_explicit(&slot->app_waiting_tsc, memory_order_seq_cst);

	return t != 0 && rte_rdtsc() - t < l->fresh_tsc;
}

/* The peer's application is in a polling loop right now: its next poll
 * takes our frames, so its thread need not be woken. */
static bool peer_app_waiting(struct memif_link *l)
{
	return atomic_load_explicit(&memif_peer(l)->app_busy, memory_order_acquire) ||
	       app_waiting(l, memif_peer(l));
}

/* The device just took frames (engine lock held). */
void memif_wake_peer(struct rocemu_port *port, uint64_t now)
{
	struct memif_link *l = port->link_priv;
	struct memif_bell_slot *peer;

	if (l->page && atomic_load_explicit(&memif_peer(l)->pid, memory_order_relaxed)) {
		peer = memif_peer(l);
		/* the frames are in the ring (the PMD's release store) before we
		 * look at the flag; the peer sets its flag before its last look
		 * at the ring: one of us sees the other */
		atomic_thread_fence(memory_order_seq_cst);
		if (atomic_load_explicit(&peer->sleeping, memory_order_relaxed) &&
		    !peer_app_waiting(l) && atomic_exchange(&peer->sleeping, 0)) {
			memif_bell_ring(peer);
			l->last_bell_ns = now;
			port_count(port, PC_BELL_RUNG);
		}
	} else if (l->bell_peer_len && now - l->last_bell_ns >= BELL_INTERVAL_NS) {
		ssize_t r = sendto(port->doorbell_fd, "", 1, MSG_DONTWAIT,
				   (struct sockaddr *)&l->bell_peer, l->bell_peer_len);
		(void)r;
		l->last_bell_ns = now;
		port_count(port, PC_BELL_RUNG);
	}
}

/* Our application's state in our slot, for the peer's decision to ring. */
bool memif_app_note(struct rocemu_port *port, enum port_app_note what)
{
	struct memif_link *l = port->link_priv;
	struct memif_bell_slot *own;

	if (!l->page)
		return false;
	own = memif_own(l);
	switch (what) {
	case PORT_APP_ENTER:
		if (!atomic_load_explicit(&own->app_busy, memory_order_relaxed))
			atomic_store_explicit(&own->app_busy, 1, memory_order_relaxed);
		return false;
	case PORT_APP_POSTED:
		atomic_store_explicit(&own->app_waiting_tsc, port->last_pass_tsc,
				      memory_order_relaxed);
		atomic_store_explicit(&own->app_busy, 0, memory_order_release);
		return false;
	case PORT_APP_WAITING:
		atomic_store_explicit(&own->app_busy, 0, memory_order_release);
		atomic_store_explicit(&own->app_waiting_tsc, port->last_pass_tsc,
				      memory_order_relaxed);
		return false;
	case PORT_APP_SATISFIED:
		/* The application may now wait elsewhere. A peer that saw it
		 * waiting just before this store did not ring for its frame,
		 * and our thread may sleep without a last pass (memif_sleep):
		 * take such a frame now. A frame sent after the store sees 0
		 * and rings. */
		atomic_store_explicit(&own->app_busy, 0, memory_order_release);
		return atomic_exchange_explicit(&own->app_waiting_tsc, 0, memory_order_seq_cst) !=
		       0;
	case PORT_APP_AWAY:
		atomic_store_explicit(&own->app_waiting_tsc, 0, memory_order_relaxed);
		return false;
	}
	return false;
}

/*
 * Sleep on our bell (a futex in the shared page) until the peer rings it for
 * a frame, our own threads ring it for a kick, or the timeout. One system
 * call to sleep, one for the ringer, nothing to drain. Returns true when
 * rung. Without the page: the eventfd and the datagram bell (port_fd_sleep).
 */
bool memif_sleep(struct rocemu_port *port, const struct timespec *ts)
{
	struct memif_link *l = port->link_priv;
	struct memif_bell_slot *own;
	unsigned seq;

	if (!l->page)
		return port_fd_sleep(port, ts);
	own = memif_own(l);
	seq = atomic_load_explicit(&own->bell, memory_order_seq_cst);
	/* Ask the peer for a ring. Even while an application thread here
	 * polls the CQ: it may also wait without calling us (ib_write_lat
	 * spins on its buffer), and on a CPU shared with it only a wake-up
	 * places the peer's WRITE quickly. The peer does not ring while our
	 * application is in a polling loop (app_waiting_tsc). Then look at the
	 * ring once more: a frame sent before the peer could see the flag rang
	 * no bell; one sent after it did, and then the word is no longer seq.
	 * Not while our application waits in a polling loop: its next poll
	 * takes that frame, or the poll that ends its wait does (PORT_APP_
	 * SATISFIED); a pass here would only take the CPU from it, and with
	 * frames streaming in, never let this thread sleep. */
	atomic_store_explicit(&own->sleeping, 1, memory_order_seq_cst);
	if (!app_waiting(l, own) && rocemu_port_progress(port)) {
		atomic_store_explicit(&own->sleeping, 0, memory_order_relaxed);
		return true;
	}
	if (!atomic_load(&port->thread_stop) &&
	    !atomic_load_explicit(&port->kicked, memory_order_seq_cst))
		syscall(SYS_futex, &own->bell, FUTEX_WAIT, seq, ts, NULL, 0);
	atomic_store_explicit(&own->sleeping, 0, memory_order_relaxed);
	return atomic_load_explicit(&own->bell, memory_order_relaxed) != seq;
}

/* Wake our own progress thread: our bell, or the eventfd without a page.
 * The thread runs a pass once woken, so it wants no bell from the peer any
 * more: clear its flag first, or a frame the peer sends before the thread
 * has run (the away spin hands it the CPU just before the peer's WRITE
 * comes) still costs the peer a FUTEX_WAKE. Cleared before the ring: a
 * sleep that begins in between waits on a word the ring then changes. */
void memif_wake(struct rocemu_port *port)
{
	struct memif_link *l = port->link_priv;

	if (l->page) {
		atomic_store_explicit(&memif_own(l)->sleeping, 0, memory_order_relaxed);
		memif_bell_ring(memif_own(l));
	} else
		port_wake_eventfd(port);
}

/*
 * The close handshake (port_link_memif.c says why): announce our close in
 * our slot, ring, and wait (CLOSE_HANDSHAKE_NS at most) until the peer
 * acknowledged it, meanwhile acknowledging the peer's own close. Before
 * bumping `closing`, store the number of the connection we close.
 */
void memif_close_handshake(struct rocemu_port *port)
{
	struct memif_link *l = port->link_priv;
	struct memif_bell_slot *own, *peer;
	uint64_t start, now, last_ring = 0;
	struct timespec ts = {0, 100000};
	unsigned v;

	if (!l->page)
		return;
	own = memif_own(l);
	peer = memif_peer(l);
	atomic_store(&own->closed_gen, atomic_load(&own->conn_gen));
	v = atomic_fetch_add(&own->closing, 1) + 1;
	start = now = rocemu_now_ns();
	for (;;) {
		unsigned pid = atomic_load(&peer->pid);

		/* we touch the rings no more either: acknowledge the peer's close */
		atomic_store(&own->acked, atomic_load(&peer->closing));
		if (!pid || atomic_load(&peer->acked) == v ||
		    (kill((pid_t)pid, 0) < 0 && errno == ESRCH) ||
		    now - start >= CLOSE_HANDSHAKE_NS)
			break;
		if (now - last_ring >= 10000000ull) {
			memif_bell_ring(peer);
			last_ring = now;
		}
		nanosleep(&ts, NULL);
		now = rocemu_now_ns();
	}
}
