/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Link kind `host:NAME`, its data path (port_link_host.h): frames go to the
 * host through our `up` ring, or straight into another process's inbound
 * region when the host paired us (a direct ring); frames come from ring 0
 * (the host's) and the direct rings of our peers. The progress thread
 * sleeps on our bell; writers ring it only when nothing else will look.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/futex.h>

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include "port_link_host.h"

static uint64_t host_app_fresh_tsc; /* HOST_APP_FRESH_NS in TSC cycles */

/* Frames in one of our inbound rings (the host's, or a peer's). */
static bool host_frames_waiting(const struct host_link *l)
{
	uint32_t assigned = atomic_load_explicit(&l->inbound->assigned, memory_order_acquire);

	for (unsigned k = 0; assigned; k++, assigned >>= 1)
		if ((assigned & 1) &&
		    atomic_load_explicit(&l->in_ring[k]->head, memory_order_seq_cst) !=
			atomic_load_explicit(&l->in_ring[k]->tail, memory_order_relaxed))
			return true;
	return false;
}

/* The progress thread sleeps on our inbound region's bell, which the host
 * and our direct peers ring after they put frames in our rings (our own
 * kicks ring it too). */
bool host_link_sleep(struct rocemu_port *port, const struct timespec *ts)
{
	struct host_link *l = port->link_priv;
	struct rocemu_host_inbound *in = l->inbound;
	uint32_t seq = atomic_load(&in->proc_bell);
	bool frame;

	atomic_store_explicit(&in->proc_sleeping, 1, memory_order_seq_cst);
	frame = host_frames_waiting(l);
	if (!frame && !atomic_load(&port->thread_stop) &&
	    !atomic_load_explicit(&port->kicked, memory_order_seq_cst))
		syscall(SYS_futex, &in->proc_bell, FUTEX_WAIT, seq, ts, NULL, 0);
	atomic_store_explicit(&in->proc_sleeping, 0, memory_order_relaxed);
	return frame || host_frames_waiting(l);
}

void host_link_wake(struct rocemu_port *port)
{
	struct host_link *l = port->link_priv;

	atomic_fetch_add(&l->inbound->proc_bell, 1);
	syscall(SYS_futex, &l->inbound->proc_bell, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* What the application does, for the writers' decision to ring us: a busy
 * or recently polling application will see its frames without our thread. */
bool host_link_app_note(struct rocemu_port *port, enum port_app_note what)
{
	struct host_link *l = port->link_priv;
	struct rocemu_host_inbound *in = l->inbound;

	switch (what) {
	case PORT_APP_ENTER:
		if (!atomic_load_explicit(&in->app_busy, memory_order_relaxed))
			atomic_store_explicit(&in->app_busy, 1, memory_order_relaxed);
		return false;
	case PORT_APP_POSTED:
	case PORT_APP_WAITING:
		atomic_store_explicit(&in->app_waiting_tsc, port->last_pass_tsc,
				      memory_order_relaxed);
		atomic_store_explicit(&in->app_busy, 0, memory_order_release);
		return false;
	case PORT_APP_SATISFIED:
		/* A writer that saw us busy or waiting did not ring: take its
		 * frames now. Not only when the stamp was set: a writer that
		 * came while the application was inside this poll (app_busy)
		 * skipped the bell too, and our thread may sleep on. */
		atomic_store_explicit(&in->app_busy, 0, memory_order_release);
		atomic_store_explicit(&in->app_waiting_tsc, 0, memory_order_seq_cst);
		return host_frames_waiting(l);
	case PORT_APP_AWAY:
		/* The same before the application blocks: frames a writer did
		 * not ring for wake our thread (port_app.c) instead of waiting
		 * for the end of its nap. */
		atomic_store_explicit(&in->app_busy, 0, memory_order_relaxed);
		atomic_store_explicit(&in->app_waiting_tsc, 0, memory_order_seq_cst);
		return host_frames_waiting(l);
	}
	return false;
}

/* Ring the host after we queued frames for it, if its thread sleeps. */
static void host_ring(struct host_link *l)
{
	if (!atomic_load_explicit(&l->bell->sleeping, memory_order_seq_cst))
		return;
	atomic_fetch_add(&l->bell->bell, 1);
	syscall(SYS_futex, &l->bell->bell, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Ring a peer after we put frames in its ring, unless nothing needs it: its
 * thread awake, or its application inside a verb or polling lately. */
static void peer_ring(struct rocemu_host_inbound *in)
{
	uint64_t waiting;

	if (!atomic_load_explicit(&in->proc_sleeping, memory_order_seq_cst) ||
	    atomic_load_explicit(&in->app_busy, memory_order_acquire))
		return;
	waiting = atomic_load_explicit(&in->app_waiting_tsc, memory_order_relaxed);
	if (waiting && rte_rdtsc() - waiting < host_app_fresh_tsc)
		return;
	atomic_fetch_add(&in->proc_bell, 1);
	syscall(SYS_futex, &in->proc_bell, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/*
 * A direct ring into process idx (generation gen): ask the host once per
 * generation; a refusal (the host captures, the peer has no ring left)
 * means the host's path for that generation. Engine lock held.
 */
static struct host_peer *peer_get(struct rocemu_port *port, int idx, uint32_t gen)
{
	struct host_link *l = port->link_priv;
	struct host_peer *pr = &l->peers[idx];
	uint32_t ring = 0;
	int fd = -1, rc;

	if (pr->gen == gen && pr->way != PEER_UNKNOWN)
		return pr->way == PEER_DIRECT ? pr : NULL;
	if (pr->in)
		munmap(pr->in, pr->in_size);
	memset(pr, 0, sizeof(*pr));
	pr->gen = gen;
	pr->way = PEER_VIA_HOST;
	rc = host_link_request_fd(port, ROCEMU_HOST_PAIR, (uint32_t)idx, &ring, &fd);
	if (rc || fd < 0) {
		if (port_trace_on("host"))
			port_trace(port, "host", "process %d: through the host (%s)", idx,
				   strerror(rc ? -rc : EPROTO));
		return NULL;
	}
	pr->in = host_link_map_inbound(fd, l->slot_size, &pr->in_size);
	close(fd);
	if (!pr->in || ring == 0 || ring >= ROCEMU_HOST_INBOUND_RINGS)
		return NULL;
	if (port_trace_on("host"))
		port_trace(port, "host", "process %d: direct ring %u", idx, ring);
	pr->ring = host_link_inbound_ring(pr->in, ring);
	pr->way = PEER_DIRECT;
	port_count(port, PC_HOST_DIRECT_RINGS);
	return pr;
}

/*
 * Where a frame goes: a RoCEv2 frame to the host's MAC for a QP another
 * process owns goes straight into that process's ring (when the host
 * allows direct rings); everything else (the uplink, QP1, our own QPs,
 * unknown QPNs) to the host.
 */
/* The destination QPN of a RoCEv2 frame (IPv4 or IPv6, UDP 4791): false
 * when the frame is not one. */
static bool frame_dqpn(const uint8_t *f, uint32_t len, uint32_t *dqpn)
{
	uint32_t l4;

	if (len < 14 + 20 + 8 + 12)
		return false;
	if (f[12] == 0x08 && f[13] == 0x00 && f[14] == 0x45 && f[23] == 17)
		l4 = 14 + 20;
	else if (f[12] == 0x86 && f[13] == 0xdd && f[20] == 17)
		l4 = 14 + 40;
	else
		return false;
	if (len < l4 + 8 + 12 || (f[l4 + 2] << 8 | f[l4 + 3]) != ROCE_UDP_PORT)
		return false;
	*dqpn = (uint32_t)f[l4 + 8 + 5] << 16 | (uint32_t)f[l4 + 8 + 6] << 8 | f[l4 + 8 + 7];
	return true;
}

/*
 * Where a frame goes: a RoCEv2 frame to the host's MAC for a QP another
 * process owns goes straight into that process's ring (when the host
 * allows direct rings); everything else (the uplink, QP1, our own QPs,
 * unknown QPNs) to the host.
 */
static struct host_peer *frame_peer(struct rocemu_port *port, const uint8_t *f, uint32_t len)
{
	struct host_link *l = port->link_priv;
	uint32_t dqpn;
	uint64_t e;
	int idx;

	if (l->page->switch_all || memcmp(f, port->mac.addr_bytes, 6) ||
	    !frame_dqpn(f, len, &dqpn) || dqpn == 1)
		return NULL;
	e = atomic_load_explicit(&l->page->qpn_owner[dqpn & 0xFFFF], memory_order_acquire);
	idx = ROCEMU_HOST_OWNER_IDX(e);
	if (ROCEMU_HOST_OWNER_QPN(e) != dqpn || idx < 0 || (uint32_t)idx == l->welcome.proc_id)
		return NULL;
	return peer_get(port, idx, ROCEMU_HOST_OWNER_GEN(e));
}

/* A frame taken from a direct ring, counted for `rocemu stat` (the host
 * does not see it pass): per QP of ours it is addressed to. */
static void count_direct_in(struct host_link *l, const uint8_t *f, uint32_t len)
{
	struct rocemu_host_region *r = l->region;
	struct rocemu_host_direct_qp *c;
	uint32_t dqpn;
	uint64_t e;

	rocemu_host_tally_add(&r->direct_in, len);
	if (!frame_dqpn(f, len, &dqpn))
		return;
	e = atomic_load_explicit(&l->page->qpn_owner[dqpn & 0xFFFF], memory_order_acquire);
	if (ROCEMU_HOST_OWNER_QPN(e) != dqpn || ROCEMU_HOST_OWNER_IDX(e) != (int)l->welcome.proc_id)
		return; /* not a QP of ours (any more): the port drops it, counted */
	c = &l->direct_qp[dqpn & (ROCEMU_HOST_DIRECT_QP_SLOTS - 1)];
	if (atomic_load_explicit(&c->qpn, memory_order_relaxed) != dqpn) {
		atomic_store_explicit(&c->in.frames, 0, memory_order_relaxed);
		atomic_store_explicit(&c->in.bytes, 0, memory_order_relaxed);
		atomic_store_explicit(&c->qpn, dqpn, memory_order_release);
	}
	rocemu_host_tally_add(&c->in, len);
}

/* Put one frame in ring r of n_slots: false when it is full. */
static bool ring_put(struct host_link *l, struct rocemu_host_ring *r, uint32_t n_slots,
		     struct rte_mbuf *m)
{
	uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint32_t used = head - atomic_load_explicit(&r->tail, memory_order_acquire);
	struct rocemu_host_slot *s;
	uint32_t len = m->pkt_len;
	const void *src;

	if (used >= n_slots)
		return false; /* full (or a tail no reader wrote: we wait as for full) */
	s = rocemu_host_ring_slot(r, l->slot_size, n_slots, head);
	if (len > l->slot_size - ROCEMU_HOST_SLOT_HDR) {
		len = 0; /* an empty slot: the reader skips it */
	} else if (!(src = rte_pktmbuf_read(m, 0, len, s->frame))) {
		len = 0;
	} else if (src != s->frame) {
		memcpy(s->frame, src, len); /* one segment: read gave its data */
	}
	s->len = len;
	atomic_store_explicit(&r->head, head + 1, memory_order_release);
	return true;
}

/*
 * Frames go to the host's ring or straight into a peer's; a full ring holds
 * back only the frames for its reader. They are left at the end of pkts, in
 * their order, after the frames sent (the port keeps the unsent tail and
 * offers it again on its next pass), so frames for a receiver that is not
 * scheduled do not hold up those for every other one (head-of-line
 * blocking); per destination the order is kept, as a switch's output
 * queues keep it.
 */
uint16_t host_link_tx_burst(struct rocemu_port *port, struct rte_mbuf **pkts, uint16_t n)
{
	struct host_link *l = port->link_priv;
	struct rte_mbuf *held[PORT_TX_BUF];
	struct host_peer *rung[32];
	unsigned n_rung = 0, n_held = 0;
	bool to_host = false, host_full = false;
	uint16_t sent = 0;
	uint32_t burst = ++l->burst;

	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		uint8_t hdr[14 + 40 + 8 + 12];
		const uint8_t *h = rte_pktmbuf_read(m, 0, RTE_MIN(m->pkt_len, sizeof(hdr)), hdr);
		struct host_peer *pr = h ? frame_peer(port, h, m->pkt_len) : NULL;

		if (pr) {
			if (pr->full_burst == burst ||
			    !ring_put(l, pr->ring, ROCEMU_HOST_PEER_SLOTS, m)) {
				pr->full_burst = burst; /* its later frames wait too */
				held[n_held++] = m;
				continue;
			}
			if (!pr->ring_it && n_rung < RTE_DIM(rung)) {
				pr->ring_it = true;
				rung[n_rung++] = pr;
			}
			port_count(port, PC_TX_DIRECT_FRAMES);
			rocemu_host_tally_add(&l->region->direct_out, m->pkt_len);
		} else {
			if (host_full || !ring_put(l, l->up, ROCEMU_HOST_RING_SLOTS, m)) {
				host_full = true;
				held[n_held++] = m;
				continue;
			}
			to_host = true;
		}
		if (m->pkt_len > l->slot_size - ROCEMU_HOST_SLOT_HDR)
			port_count(port, PC_DROP_TX_TOO_LONG); /* sent as an empty slot */
		rte_pktmbuf_free(m);
		pkts[sent++] = NULL; /* the port counts a sent prefix */
	}
	memcpy(pkts + sent, held, n_held * sizeof(held[0]));
	atomic_thread_fence(memory_order_seq_cst); /* heads before the sleepers' flags */
	if (to_host)
		host_ring(l);
	for (unsigned k = 0; k < n_rung; k++) {
		rung[k]->ring_it = false;
		peer_ring(rung[k]->in);
	}
	return sent;
}

static uint16_t ring_take(struct rocemu_port *port, struct rocemu_host_ring *r, uint32_t n_slots,
			  bool direct, struct rte_mbuf **pkts, uint16_t n)
{
	struct host_link *l = port->link_priv;
	uint32_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	uint32_t avail = atomic_load_explicit(&r->head, memory_order_acquire) - tail;
	uint16_t got = 0;
	uint32_t i;

	if (avail > n_slots) {
		/* a head no writer could have published: skip what is there */
		port_count(port, PC_DROP_RX_BAD_RING);
		atomic_store_explicit(&r->tail, atomic_load(&r->head), memory_order_release);
		return 0;
	}
	for (i = 0; i < avail && got < n; i++) {
		const struct rocemu_host_slot *s =
		    rocemu_host_ring_slot(r, l->slot_size, n_slots, tail + i);
		uint32_t len = s->len;
		struct rte_mbuf *m;

		if (len == 0)
			continue;
		if (len < RTE_ETHER_HDR_LEN || len > l->slot_size - ROCEMU_HOST_SLOT_HDR ||
		    len > port->max_frame) {
			port_count(port, PC_DROP_RX_BAD_SLOT);
			continue;
		}
		m = rte_pktmbuf_alloc(port->pool);
		if (!m)
			break; /* the frame waits in the ring */
		memcpy(rte_pktmbuf_mtod(m, void *), s->frame, len);
		if (direct)
			count_direct_in(l, rte_pktmbuf_mtod(m, const uint8_t *), len);
		m->data_len = (uint16_t)len;
		m->pkt_len = len;
		pkts[got++] = m;
	}
	if (i)
		atomic_store_explicit(&r->tail, tail + i, memory_order_release);
	return got;
}

/* Every ring into us, the host's and the peers', in turn. */
uint16_t host_link_rx_burst(struct rocemu_port *port, struct rte_mbuf **pkts, uint16_t n)
{
	struct host_link *l = port->link_priv;
	uint32_t assigned = atomic_load_explicit(&l->inbound->assigned, memory_order_acquire);
	uint16_t got = 0;

	if (assigned == 1)
		return ring_take(port, l->in_ring[0], ROCEMU_HOST_RING_SLOTS, false, pkts, n);
	for (unsigned j = 0; j < ROCEMU_HOST_INBOUND_RINGS && got < n; j++) {
		unsigned k = (l->rx_next + j) % ROCEMU_HOST_INBOUND_RINGS;

		if (assigned & (1u << k))
			got += ring_take(port, l->in_ring[k], rocemu_host_inbound_slots(k), k > 0,
					 pkts + got, (uint16_t)(n - got));
	}
	l->rx_next++;
	return got;
}

/* Frames in our ring the host has not taken yet (close lingers for them). */
bool host_link_tx_in_flight(struct rocemu_port *port, uint64_t now)
{
	struct host_link *l = port->link_priv;

	(void)now;
	if (l->gone || !l->up)
		return false;
	return atomic_load(&l->up->head) != atomic_load(&l->up->tail);
}

void host_link_online(struct rocemu_port *port)
{
	host_app_fresh_tsc = rte_get_tsc_hz() / (1000000000ull / HOST_APP_FRESH_NS);
	port->frames_wake = true; /* the host and our peers ring our bell */
}
