/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The host's data path: the uplink port's upper layer and the thread that
 * runs its progress passes.
 *
 * A pass (the port's, rocemu_port.h) receives from the uplink and from the
 * port's internal loopback; every RoCEv2 frame for one of the host's GIDs
 * comes to sw_rx, parsed and ICRC-checked, and goes to the process that owns
 * its destination QPN (QP1: every process with a GSI QP but the sender).
 * sw_poll then takes what the processes queued in their `up` rings and hands
 * it to the port like a transport would: to a neighbour's MAC it leaves on
 * the uplink; to the host's own MAC it loops back, captured once, and comes
 * to sw_rx on the next pass. So the port's capture, fault injector, ARP/ND
 * and ICMP serve every process once, and same-host traffic is switched by
 * destination QPN.
 *
 * The thread spins while frames move and sleeps on the host bell when idle
 * (rocemu_host.h); processes ring it only while it sleeps. With
 * --progress-cpu it is pinned to that CPU and never sleeps, and the port's
 * own progress thread is stopped.
 */
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/futex.h>

#include <rte_cycles.h>
#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_pause.h>

#include "host.h"

/* mbuf->port of a frame a process sent: ORIGIN + its index (a PMD's frames
 * carry their ethdev's port id, far below). */
#define ORIGIN_BASE 0x8000u
/* Frames taken from one process's ring per pass, and from all. */
#define UP_BUDGET_PROC 32u
#define UP_BUDGET_PASS 256u
/* The thread keeps spinning this long after the last work it saw: long
 * enough for the next frame of a burst, short enough that an idle host
 * leaves the CPU to its processes (a process rings the host's bell). */
#define SPIN_AFTER_WORK_NS 50000ull
/* ... and sleeps at most this long (uplink frames are found by then). */
#define IDLE_SLEEP_NS 1000000ull
/* A process whose application polled within this long is not rung. */
#define APP_FRESH_NS 10000ull
/* Neighbour entries: re-resolved this often, dropped unused this long. */
#define NEIGH_RECHECK_NS 1000000000ull
#define NEIGH_PENDING_NS 5000000ull
#define NEIGH_UNUSED_NS	 300000000000ull
#define NEIGH_POLL_NS	 1000000ull

static uint64_t app_fresh_tsc;

static void futex_wake(_Atomic uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* ------------------------------------------------------------------------ */
/* To a process                                                               */

/* Ring a process that got frames, if nothing else will look at its ring:
 * its progress thread sleeps and its application is not polling. */
static void ring_proc(struct host_proc *p)
{
	struct rocemu_host_inbound *in = p->inbound;
	uint64_t waiting;

	p->want_ring = false;
	if (!atomic_load_explicit(&in->proc_sleeping, memory_order_seq_cst))
		return;
	if (atomic_load_explicit(&in->app_busy, memory_order_acquire))
		return;
	waiting = atomic_load_explicit(&in->app_waiting_tsc, memory_order_relaxed);
	if (waiting && rte_rdtsc() - waiting < app_fresh_tsc)
		return;
	atomic_fetch_add(&in->proc_bell, 1);
	futex_wake(&in->proc_bell);
	p->rings++;
}

static bool deliver(struct host *h, struct host_proc *p, const struct rte_mbuf *m)
{
	struct rocemu_host_ring *d = p->down;
	uint32_t head = atomic_load_explicit(&d->head, memory_order_relaxed);
	uint32_t tail = atomic_load_explicit(&d->tail, memory_order_acquire);
	struct rocemu_host_slot *s;

	if (head - tail >= ROCEMU_HOST_RING_SLOTS ||
	    m->pkt_len + ROCEMU_HOST_SLOT_HDR > h->slot_size) {
		p->drop_ring_full++;
		return false;
	}
	s = rocemu_host_ring_slot(d, h->slot_size, ROCEMU_HOST_RING_SLOTS, head);
	memcpy(s->frame, rte_pktmbuf_mtod(m, const void *), m->data_len);
	s->len = m->data_len;
	atomic_store_explicit(&d->head, head + 1, memory_order_seq_cst);
	p->down_frames++;
	p->down_bytes += m->data_len;
	p->want_ring = true;
	h->switched_frames++;
	return true;
}

static struct host_proc *origin_of(struct host *h, const struct rte_mbuf *m)
{
	unsigned i = (unsigned)m->port - ORIGIN_BASE;

	return m->port >= ORIGIN_BASE && i < HOST_MAX_PROCS && h->procs[i].used ? &h->procs[i]
										: NULL;
}

/* The port's upper rx: frames for the host's GIDs, by destination QPN. */
static void sw_rx(void *ctx, struct rte_mbuf **pkts, struct roce_pkt *descs, uint16_t n)
{
	struct host *h = ctx;

	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		uint32_t qpn = descs[i].dqpn;

		if (qpn == 1) {
			struct host_proc *from = origin_of(h, m);

			for (unsigned k = 0; k < HOST_MAX_PROCS; k++)
				if (h->procs[k].used && h->procs[k].gsi && &h->procs[k] != from)
					deliver(h, &h->procs[k], m);
		} else {
			struct host_qpn *q = &h->qpns[qpn & (HOST_QPN_SLOTS - 1)];

			if (q->state == HOST_QPN_LIVE && q->qpn == qpn) {
				if (deliver(h, &h->procs[q->proc - 1], m)) {
					q->frames_in++;
					q->bytes_in += m->data_len;
				} else {
					q->drops_in++;
				}
			} else if (q->state == HOST_QPN_QUIET && q->qpn == qpn) {
				h->drop_qp_quiet++;
			} else {
				h->drop_no_qp++;
			}
		}
		rte_pktmbuf_free(m);
	}
	for (unsigned k = 0; k < HOST_MAX_PROCS; k++)
		if (h->procs[k].used && h->procs[k].want_ring)
			ring_proc(&h->procs[k]);
}

/* ------------------------------------------------------------------------ */
/* From a process                                                             */

/* A frame a process may send: Ethernet with IPv4 or IPv6 (the process's
 * transport builds RoCEv2; the port parses again where it delivers). */
static bool frame_acceptable(const uint8_t *f, uint32_t len)
{
	uint16_t type;

	if (len < RTE_ETHER_HDR_LEN + 20)
		return false;
	type = (uint16_t)(f[12] << 8 | f[13]);
	return type == RTE_ETHER_TYPE_IPV4 || type == RTE_ETHER_TYPE_IPV6;
}

static unsigned drain_proc(struct host *h, struct host_proc *p, unsigned budget)
{
	struct rocemu_host_ring *u = p->up;
	uint32_t tail = atomic_load_explicit(&u->tail, memory_order_relaxed);
	uint32_t avail = atomic_load_explicit(&u->head, memory_order_acquire) - tail;
	uint32_t i;

	if (avail > ROCEMU_HOST_RING_SLOTS) {
		/* a head no producer could have written: nothing is trusted */
		p->drop_bad++;
		h->drop_proc_bad++;
		return 0;
	}
	for (i = 0; i < avail && i < budget; i++) {
		const struct rocemu_host_slot *s =
		    rocemu_host_ring_slot(u, h->slot_size, ROCEMU_HOST_RING_SLOTS, tail + i);
		uint32_t len = s->len;
		struct rte_mbuf *m;

		if (len == 0)
			continue; /* the process dropped this one itself */
		if (len > h->slot_size - ROCEMU_HOST_SLOT_HDR || !frame_acceptable(s->frame, len)) {
			p->drop_bad++;
			h->drop_proc_bad++;
			continue;
		}
		if (rocemu_port_tx_room(h->port) == 0)
			break;
		m = rocemu_port_alloc_mbuf(h->port);
		if (!m)
			break;
		if (len > rte_pktmbuf_tailroom(m)) {
			rte_pktmbuf_free(m);
			p->drop_bad++;
			h->drop_proc_bad++;
			continue;
		}
		memcpy(rte_pktmbuf_mtod(m, void *), s->frame, len);
		m->data_len = (uint16_t)len;
		m->pkt_len = len;
		m->port = (uint16_t)(ORIGIN_BASE + p->index);
		p->up_frames++;
		p->up_bytes += len;
		h->uplink_frames++;
		rocemu_port_tx(h->port, m);
	}
	if (i)
		atomic_store_explicit(&u->tail, tail + i, memory_order_release);
	return i;
}

static unsigned drain_all(struct host *h)
{
	static unsigned start;
	unsigned work = 0;

	for (unsigned k = 0; k < HOST_MAX_PROCS && work < UP_BUDGET_PASS; k++) {
		struct host_proc *p = &h->procs[(start + k) % HOST_MAX_PROCS];

		if (p->used)
			work += drain_proc(h, p, UP_BUDGET_PROC);
	}
	start++;
	return work;
}

/* ------------------------------------------------------------------------ */
/* Neighbours, resolved once for the host and published in the host page     */

static void neigh_publish(struct rocemu_host_neigh *e, uint32_t state, const uint8_t gid[16],
			  const uint8_t mac[6])
{
	uint32_t seq = atomic_load_explicit(&e->seq, memory_order_relaxed);

	if (e->state == state && !memcmp(e->gid, gid, 16) && (!mac || !memcmp(e->mac, mac, 6)))
		return;
	atomic_store_explicit(&e->seq, seq + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	e->state = state;
	memcpy(e->gid, gid, 16);
	if (mac)
		memcpy(e->mac, mac, 6);
	atomic_store_explicit(&e->seq, seq + 2, memory_order_release);
}

void host_resolve_request(struct host *h, unsigned src_index, const uint8_t gid[16])
{
	uint64_t now = rocemu_now_ns();
	struct rocemu_host_neigh *free_e = NULL, *oldest = NULL;
	unsigned i;

	for (i = 0; i < ROCEMU_HOST_NEIGH_SLOTS; i++) {
		struct rocemu_host_neigh *e = &h->page->neigh[i];

		if (e->state == ROCEMU_HOST_NEIGH_FREE) {
			if (!free_e)
				free_e = e;
			continue;
		}
		if (!memcmp(e->gid, gid, 16)) {
			h->neigh_priv[i].last_used_ns = now;
			if (e->state == ROCEMU_HOST_NEIGH_FAILED)
				h->neigh_priv[i].next_try_ns = now; /* asked again: try again */
			return;
		}
		if (!oldest || h->neigh_priv[i].last_used_ns <
				   h->neigh_priv[oldest - h->page->neigh].last_used_ns)
			oldest = e;
	}
	if (!free_e)
		free_e = oldest;
	i = (unsigned)(free_e - h->page->neigh);
	h->neigh_priv[i] = (struct host_neigh_priv){
	    .src_index = src_index, .next_try_ns = now, .last_used_ns = now};
	neigh_publish(free_e, ROCEMU_HOST_NEIGH_RESOLVING, gid, NULL);
}

static unsigned neigh_poll(struct host *h, uint64_t now)
{
	unsigned work = 0;

	if (now < h->neigh_next_ns)
		return 0;
	h->neigh_next_ns = now + NEIGH_POLL_NS;
	for (unsigned i = 0; i < ROCEMU_HOST_NEIGH_SLOTS; i++) {
		struct rocemu_host_neigh *e = &h->page->neigh[i];
		struct host_neigh_priv *pv = &h->neigh_priv[i];
		uint8_t gid[16], mac[6];
		uint32_t state;
		int rc;

		if (e->state == ROCEMU_HOST_NEIGH_FREE || now < pv->next_try_ns)
			continue;
		memcpy(gid, e->gid, 16);
		if (now - pv->last_used_ns > NEIGH_UNUSED_NS) {
			neigh_publish(e, ROCEMU_HOST_NEIGH_FREE, gid, NULL);
			continue;
		}
		rc = rocemu_port_resolve(h->port, pv->src_index, gid, mac);
		state = rc == 0		? ROCEMU_HOST_NEIGH_REACHABLE
			: rc == -EAGAIN ? ROCEMU_HOST_NEIGH_RESOLVING
					: ROCEMU_HOST_NEIGH_FAILED;
		pv->next_try_ns = now + (state == ROCEMU_HOST_NEIGH_RESOLVING ? NEIGH_PENDING_NS
									      : NEIGH_RECHECK_NS);
		neigh_publish(e, state, gid, rc == 0 ? mac : NULL);
		work++;
	}
	return work;
}

static unsigned sw_poll(void *ctx, uint64_t now)
{
	struct host *h = ctx;
	unsigned work = drain_all(h);

	return work + neigh_poll(h, now);
}

/* ------------------------------------------------------------------------ */
/* Processes and QPNs (engine lock held)                                      */

static void *map_new(const char *name, uint64_t size, int *fd)
{
	void *p;

	*fd = memfd_create(name, MFD_CLOEXEC);
	if (*fd < 0)
		return NULL;
	if (ftruncate(*fd, (off_t)size)) {
		close(*fd);
		return NULL;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	if (p == MAP_FAILED) {
		close(*fd);
		return NULL;
	}
	return p;
}

int host_proc_create(struct host *h, int sock, pid_t pid, uid_t uid, struct host_proc **out)
{
	struct host_proc *p = NULL;
	struct rocemu_host_region *r;
	struct rocemu_host_inbound *in;
	uint64_t size = rocemu_host_region_size(h->slot_size);
	uint64_t in_size = rocemu_host_inbound_offset(h->slot_size, ROCEMU_HOST_INBOUND_RINGS);
	int fd, in_fd;

	for (unsigned i = 0; i < HOST_MAX_PROCS; i++)
		if (!h->procs[i].used) {
			p = &h->procs[i];
			break;
		}
	if (!p)
		return -EUSERS;
	r = map_new("rocemu-host-region", size, &fd);
	if (!r)
		return -ENOMEM;
	in = map_new("rocemu-host-inbound", in_size, &in_fd);
	if (!in) {
		munmap(r, size);
		close(fd);
		return -ENOMEM;
	}
	rocemu_host_shm_hdr_init(&r->hdr, ROCEMU_HOST_REGION_MAGIC, h->slot_size,
				 ROCEMU_HOST_RING_SLOTS, size);
	r->up_offset = ROCEMU_HOST_REGION_HDR;
	r->direct_qp_offset = rocemu_host_region_direct_offset(h->slot_size);
	rocemu_host_shm_hdr_init(&in->hdr, ROCEMU_HOST_INBOUND_MAGIC, h->slot_size,
				 ROCEMU_HOST_INBOUND_RINGS, in_size);
	atomic_store(&in->assigned, 1u); /* ring 0: ours */
	memset(p, 0, sizeof(*p));
	p->index = (unsigned)(p - h->procs);
	p->gen = ++h->next_gen;
	p->sock = sock;
	p->pid = pid;
	p->uid = uid;
	p->attached_ns = rocemu_now_ns();
	p->region_fd = fd;
	p->region = r;
	p->region_size = size;
	p->up = (struct rocemu_host_ring *)((uint8_t *)r + r->up_offset);
	p->inbound_fd = in_fd;
	p->inbound = in;
	p->inbound_size = in_size;
	p->down = (struct rocemu_host_ring *)((uint8_t *)in +
					      rocemu_host_inbound_offset(h->slot_size, 0));
	for (unsigned k = 0; k < ROCEMU_HOST_INBOUND_RINGS; k++)
		p->writer[k] = -1;
	p->used = true;
	h->n_procs++;
	h->procs_attached++;
	*out = p;
	return 0;
}

static void owner_publish(struct host *h, uint32_t qpn, const struct host_proc *p)
{
	atomic_store_explicit(&h->page->qpn_owner[qpn & (HOST_QPN_SLOTS - 1)],
			      p ? ROCEMU_HOST_OWNER(qpn, p->index, p->gen) : 0,
			      memory_order_release);
}

/*
 * A direct ring from p into process `owner`: the first of the owner's rings
 * without a writer. Its indices go on from where the last writer left them
 * (head set to the reader's tail: a dead writer's garbage is not read).
 */
int host_pair(struct host *h, struct host_proc *p, unsigned owner, unsigned *ring, int *fd)
{
	struct host_proc *o;

	if (owner >= HOST_MAX_PROCS || !h->procs[owner].used || owner == p->index)
		return -ENOENT;
	if (h->page->switch_all) /* set once, before any attach */
		return -ENOTSUP; /* the host captures: every frame through it */
	o = &h->procs[owner];
	for (unsigned k = 1; k < ROCEMU_HOST_INBOUND_RINGS; k++) {
		if (o->writer[k] == (int16_t)p->index) {
			*ring = k;
			*fd = o->inbound_fd;
			return 0;
		}
	}
	for (unsigned k = 1; k < ROCEMU_HOST_INBOUND_RINGS; k++) {
		struct rocemu_host_ring *r;

		if (o->writer[k] >= 0)
			continue;
		r = (struct rocemu_host_ring *)((uint8_t *)o->inbound +
						rocemu_host_inbound_offset(h->slot_size, k));
		atomic_store(&r->head, atomic_load(&r->tail));
		o->writer[k] = (int16_t)p->index;
		atomic_fetch_or(&o->inbound->assigned, 1u << k);
		p->n_pairs++;
		*ring = k;
		*fd = o->inbound_fd;
		return 0;
	}
	return -ENOSPC; /* more writers than rings: the rest go through the host */
}

/* A process is gone (or detached): its QPNs rest for the quiet time, its
 * ring goes. Frames for its QPs are dropped from now on (drop_qp_quiet):
 * its peers' QPs run out of retries, as with a dead HCA. */
void host_proc_destroy(struct host *h, struct host_proc *p)
{
	uint64_t until = rocemu_now_ns() + (uint64_t)h->quiet_ms * 1000000ull;

	if (!p->used)
		return;
	for (unsigned s = 0; s < HOST_QPN_SLOTS; s++) {
		struct host_qpn *q = &h->qpns[s];

		if (q->state == HOST_QPN_LIVE && q->proc == p->index + 1) {
			q->state = HOST_QPN_QUIET;
			q->quiet_until = until;
			h->n_qpns_live--;
			owner_publish(h, q->qpn, NULL);
		}
	}
	/* its direct rings into others get free for other writers */
	for (unsigned i = 0; i < HOST_MAX_PROCS; i++) {
		struct host_proc *o = &h->procs[i];

		if (!o->used || o == p)
			continue;
		for (unsigned k = 1; k < ROCEMU_HOST_INBOUND_RINGS; k++)
			if (o->writer[k] == (int16_t)p->index) {
				atomic_fetch_and(&o->inbound->assigned, ~(1u << k));
				o->writer[k] = -1;
			}
	}
	/* writers into it lose nothing they need: their frames would find no
	 * QP (the owner table says so, and they go through the host) */
	for (unsigned k = 1; k < ROCEMU_HOST_INBOUND_RINGS; k++)
		if (p->writer[k] >= 0 && h->procs[p->writer[k]].used)
			h->procs[p->writer[k]].n_pairs--;
	atomic_store(&p->region->host_gone, 1);
	munmap(p->region, p->region_size);
	munmap(p->inbound, p->inbound_size);
	close(p->region_fd);
	close(p->inbound_fd);
	p->used = false;
	p->region = NULL;
	p->inbound = NULL;
	h->n_procs--;
	h->procs_gone++;
}

int host_qpn_alloc(struct host *h, struct host_proc *p, bool gsi, uint32_t *qpn)
{
	uint64_t now = rocemu_now_ns();

	if (gsi) {
		p->gsi = true;
		*qpn = 1;
		return 0;
	}
	/* In sequence from a random start, as HCAs do; each slot tried once. */
	for (unsigned tried = 0; tried < HOST_QPN_SLOTS;) {
		uint32_t n = h->qpn_next;
		struct host_qpn *q = &h->qpns[n & (HOST_QPN_SLOTS - 1)];

		h->qpn_next = (n + 1) & HOST_QPN_MASK;
		if ((n & (HOST_QPN_SLOTS - 1)) < HOST_QPN_FIRST || n == HOST_QPN_MULTICAST)
			continue;
		tried++;
		if (q->state == HOST_QPN_LIVE ||
		    (q->state == HOST_QPN_QUIET && now < q->quiet_until))
			continue;
		*q = (struct host_qpn){.qpn = n,
				       .state = HOST_QPN_LIVE,
				       .proc = (uint16_t)(p->index + 1),
				       .created_ns = now};
		owner_publish(h, n, p);
		p->n_qps++;
		p->qpns_allocated++;
		h->n_qpns_live++;
		*qpn = n;
		return 0;
	}
	return -ENOSPC;
}

int host_qpn_free(struct host *h, struct host_proc *p, uint32_t qpn)
{
	struct host_qpn *q = &h->qpns[qpn & (HOST_QPN_SLOTS - 1)];

	if (qpn > HOST_QPN_MASK || q->state != HOST_QPN_LIVE || q->qpn != qpn ||
	    q->proc != p->index + 1)
		return -EINVAL;
	q->state = HOST_QPN_QUIET;
	q->quiet_until = rocemu_now_ns() + (uint64_t)h->quiet_ms * 1000000ull;
	owner_publish(h, qpn, NULL);
	p->n_qps--;
	h->n_qpns_live--;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The forwarding thread                                                      */

static bool any_frames_queued(struct host *h)
{
	for (unsigned k = 0; k < HOST_MAX_PROCS; k++) {
		struct host_proc *p = &h->procs[k];

		if (p->used && atomic_load_explicit(&p->up->head, memory_order_seq_cst) !=
				   atomic_load_explicit(&p->up->tail, memory_order_relaxed))
			return true;
	}
	return false;
}

static void idle_sleep(struct host *h)
{
	struct timespec ts = {0, IDLE_SLEEP_NS};
	uint32_t seq = atomic_load(&h->bell->bell);
	bool queued;

	atomic_store_explicit(&h->bell->sleeping, 1, memory_order_seq_cst);
	/* a last pass once the flag is up: a process that queued a frame
	 * before it saw the flag rang no bell, and the uplink's own thread may
	 * have missed a frame while our pass held the lock */
	rocemu_port_lock(h->port);
	queued = rocemu_port_progress_locked(h->port) || any_frames_queued(h);
	rocemu_port_unlock(h->port);
	if (!queued && !atomic_load(&h->stop))
		syscall(SYS_futex, &h->bell->bell, FUTEX_WAIT, seq, &ts, NULL, 0);
	atomic_store_explicit(&h->bell->sleeping, 0, memory_order_relaxed);
}

void host_lock(struct host *h)
{
	atomic_fetch_add(&h->lock_wanted, 1);
	rocemu_port_lock(h->port);
	atomic_fetch_sub(&h->lock_wanted, 1);
}

void host_unlock(struct host *h)
{
	rocemu_port_unlock(h->port);
	/* the uplink's thread may have found the lock taken and slept with a
	 * frame unread: a sleeping forwarding thread makes one more pass */
	if (atomic_load_explicit(&h->bell->sleeping, memory_order_seq_cst)) {
		atomic_fetch_add(&h->bell->bell, 1);
		futex_wake(&h->bell->bell);
	}
}

static void *fwd_main(void *arg)
{
	struct host *h = arg;
	uint64_t last_work = rocemu_now_ns();

	while (!atomic_load_explicit(&h->stop, memory_order_relaxed)) {
		unsigned work;
		uint64_t now;

		/* a request waits for the lock: let it have it first */
		if (atomic_load_explicit(&h->lock_wanted, memory_order_relaxed)) {
			sched_yield();
			continue;
		}
		work = rocemu_port_progress(h->port);
		now = rocemu_now_ns();

		if (work) {
			last_work = now;
			continue;
		}
		if (now - last_work < SPIN_AFTER_WORK_NS || h->spin) {
			rte_pause();
			continue;
		}
		idle_sleep(h);
	}
	return NULL;
}

static int make_shared(const char *name, size_t size, void **map, int *fd)
{
	*fd = memfd_create(name, MFD_CLOEXEC);
	if (*fd < 0)
		return -errno;
	if (ftruncate(*fd, (off_t)size))
		return -errno;
	*map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	if (*map == MAP_FAILED) {
		*map = NULL;
		return -errno;
	}
	return 0;
}

int host_switch_init(struct host *h, char *err, size_t errlen)
{
	struct rocemu_port_upper upper = {.ctx = h, .rx = sw_rx, .poll = sw_poll};
	char path[64];
	void *map;
	int rc;

	h->page_fd = h->page_ro_fd = h->bell_fd = -1;
	h->qpns = calloc(HOST_QPN_SLOTS, sizeof(*h->qpns));
	if (!h->qpns)
		return -ENOMEM;
	rc = make_shared("rocemu-host-page", sizeof(*h->page), &map, &h->page_fd);
	if (rc) {
		snprintf(err, errlen, "cannot make the host page: %s", strerror(-rc));
		return rc;
	}
	h->page = map;
	h->page->magic = ROCEMU_HOST_PAGE_MAGIC;
	h->page->version = ROCEMU_HOST_VERSION;
	h->page->host_pid = (uint32_t)getpid();
	h->page->n_neigh = ROCEMU_HOST_NEIGH_SLOTS;
	/* a capture or faults see every frame: no direct rings then */
	h->page->switch_all = h->cfg.capture_path[0] || h->cfg.fault_enabled || h->no_direct;
	/* processes get the page read-only: a descriptor of its own, opened
	 * O_RDONLY, which no mmap can make writable */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", h->page_fd);
	h->page_ro_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (h->page_ro_fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot reopen the host page read-only: %s", strerror(errno));
		return rc;
	}
	rc = make_shared("rocemu-host-bell", sizeof(*h->bell), &map, &h->bell_fd);
	if (rc) {
		snprintf(err, errlen, "cannot make the host bell: %s", strerror(-rc));
		return rc;
	}
	h->bell = map;
	app_fresh_tsc = rte_get_tsc_hz() / (1000000000ull / APP_FRESH_NS);
	h->slot_size = rocemu_host_slot_size((uint32_t)rocemu_port_eth_mtu(h->port) + 18u);
	if (getrandom(&h->qpn_next, sizeof(h->qpn_next), 0) != sizeof(h->qpn_next)) {
		rc = -errno;
		snprintf(err, errlen, "no random numbers for QPNs (getrandom): %s",
			 strerror(errno));
		return rc;
	}
	h->qpn_next &= HOST_QPN_MASK;
	rocemu_port_set_upper(h->port, &upper);
	return 0;
}

/*
 * Two threads run the uplink port's passes. Ours spins while frames move
 * and sleeps on the host's bell, which the processes ring. The port's own
 * thread stays, never spinning idle: it sleeps the uplink's way (memif's
 * bell, af_packet's doorbell), so a frame from the uplink wakes it at once
 * instead of waiting for our nap to end (the bell it would need to ring is
 * not ours).
 */
int host_switch_start(struct host *h)
{
	int cpu = rocemu_port_progress_cpu(h->port);
	pthread_attr_t attr;
	cpu_set_t cpus;
	int rc;

	if (cpu < 0) {
		rocemu_port_progress_thread_quiet(h->port, true);
		return -pthread_create(&h->fwd_thread, NULL, fwd_main, h);
	}
	/* --progress-cpu: ours spins on that CPU and runs every pass; the
	 * port's thread would only be rung awake beside it */
	rocemu_port_progress_thread_stop(h->port);
	h->spin = true;
	CPU_ZERO(&cpus);
	CPU_SET(cpu, &cpus);
	rc = pthread_attr_init(&attr);
	rc = rc ?: pthread_attr_setaffinity_np(&attr, sizeof(cpus), &cpus);
	rc = rc ?: pthread_create(&h->fwd_thread, &attr, fwd_main, h);
	pthread_attr_destroy(&attr);
	return -rc;
}

void host_switch_stop(struct host *h)
{
	atomic_store(&h->stop, true);
	atomic_fetch_add(&h->bell->bell, 1);
	futex_wake(&h->bell->bell);
	pthread_join(h->fwd_thread, NULL);
	rocemu_port_progress_thread_stop(h->port);
}

void host_switch_fini(struct host *h)
{
	struct rocemu_port_upper none = {0};

	if (h->port)
		rocemu_port_set_upper(h->port, &none);
	if (h->page)
		munmap(h->page, sizeof(*h->page));
	if (h->bell)
		munmap(h->bell, sizeof(*h->bell));
	if (h->page_fd >= 0)
		close(h->page_fd);
	if (h->page_ro_fd >= 0)
		close(h->page_ro_fd);
	if (h->bell_fd >= 0)
		close(h->bell_fd);
	free(h->qpns);
	h->qpns = NULL;
}
