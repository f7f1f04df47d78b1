/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memif's direct channel between two rocemu ends (port_memif_direct.h says
 * what it is): two copies per delivered byte instead of four.
 *
 * Agreement, through the bell page (struct memif_direct_offer, one per end):
 * an end offers its object (name, pid, gen); the peer maps it and writes
 * that gen into its own offer's mapped_gen; an end sends on the channel only
 * while the peer's mapped_gen is its current gen, else through the PMD. A
 * new offer (gen) of the peer: we map again. A new peer process (pid): we
 * take back every frame still out and bump our gen (memif_direct_reset),
 * as at a connection's close (the close handshake says the peer no longer
 * reads). Frames in the PMD ring and in the channel are both read every
 * pass, the PMD's first, until the channel carries everything.
 *
 * Then the PMD is left alone (parked: neither of its bursts is called), so
 * that a peer killed outright cannot take this end with it: DPDK's memif PMD
 * unmaps its rings on EAL's interrupt thread when the connection drops, with
 * no hook to wait for a burst of ours under way on them. Parked when (1) we
 * map the peer's current offer and the peer maps ours (we send on the
 * channel only), (2) the peer says in its offer's pmd_done that it saw our
 * current offer (gen) mapping its own, so it sends nothing through the PMD
 * any more (an end writes pmd_done once it sees the peer map its offer, and
 * clears it with each new offer of its own; it sends through the PMD only
 * while the peer does not map its offer, which changes only with a new
 * offer of either end), and (3) one more rx burst of the PMD, after reading
 * (2), gave nothing: the frames it sent there before are taken. Any new
 * offer of either end, a new peer process or a reset unparks it.
 *
 * The receive side trusts nothing the peer wrote: its header is read once,
 * checked against the object's size and kept; each descriptor is read once
 * (one 8-byte load) and checked (memif_direct_check_desc: index, range, a
 * buffer given twice), each bad one counted as a drop; ring indices out of
 * range stop the view (drop_direct_bad_ring). The area is mapped from a
 * read-only descriptor, copy-on-write: nothing we do reaches the peer, and a
 * handler that writes into a frame (an ICMP echo answered in place, should
 * a peer change a frame's type under us) gets a private page, not SIGSEGV.
 * Frames that are not RoCEv2 are copied anyway (their handlers write).
 *
 * Wrapped frames go to the receive path as mbufs with an external buffer;
 * their free callback (any thread) queues the index on an MP ring, which
 * the next pass moves to the peer's return ring.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rte_errno.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_memcpy.h>
#include <rte_mempool.h>
#include <rte_ether.h>
#include <rte_prefetch.h>
#include <rte_ring.h>

#include "port_memif.h"
#include "port_memif_direct.h"

#define MD_UDP_PORT   4791
#define MD_WRAPPERS   8192u /* mbuf headers for wrapped frames */
#define MD_POOL_CACHE 256u
#define MD_RX_BURST   64u /* descriptors read per burst at most */
/* Small-frame mode, on by default for frames of at most 256 bytes
 * (ROCEMU_MEMIF_DIRECT_COPY_MAX=BYTES sets the size, 0 turns it off): RoCE
 * frames of at most BYTES are copied out of the peer's buffer at receive
 * and the buffer goes back in the same burst (no wrapper, attach or return
 * one pass later; direct_small_rx_bytes counts them), and the sender
 * fetches the lines of the buffers given back for writing (md_reclaim). It
 * cut the receiver's channel cost per 64 B frame from 277 to 156 ns in a
 * profile; A/Bs at load 6-10 could not tell its 64 B rate from the
 * default's, a calmer one (load 3-4) gave 1.21x (bench/perf_analysis.md,
 * "64 B on the direct channel"), and a quiet one (load 1.3-1.7, 4 rounds)
 * 1.26x [1.23-1.27], with 64 KiB 1.10x, ib_send_lat 0.90x, ib_write_lat
 * 0.77x: better in every round, so it is the default. */
#define MD_COPY_MAX_DEFAULT 256u
/* Frames out to the peer at most: a quarter of the pool stays ours, for
 * what we receive (the peer's ACKs, copied out in small-frame mode; the
 * PMD's receive), the transmit buffer and the lcore caches. Without it a
 * sender with many QPs (1024 x a 128-packet window) handed its whole pool
 * to a slower receiver, then dropped the ACKs that would have freed it
 * (drop_mbuf_exhausted), and the transport timers ran out (RETRY_EXC). A
 * frame over the cap waits in the transmit buffer; a full buffer stops
 * the engine's pass (tx_credit_waits). ROCEMU_MEMIF_DIRECT_TX_CAP=N sets
 * it (A/B runs), at most the pool. */
#define MD_TX_CAP_RESERVE(n) ((n) / 4u)
/* Buffers given back whose first lines are fetched for writing
 * (md_reclaim, small-frame mode): the frames built next go into them. */
#define MD_PREFETCH_BUFS  16u
#define MD_PREFETCH_LINES 3u

struct md_peer {
	atomic_uint refs;     /* 1 while it is the current view, + one per frame out */
	atomic_bool live;     /* indices go back to the peer (not after a new offer) */
	bool from_memory;     /* a test's memory: not ours to unmap */
	struct md_shared *sh; /* header and rings: shared, read-write */
	size_t sh_len;
	uint8_t *area; /* copy-on-write, from a read-only descriptor */
	size_t area_len;
	uint32_t n, elt, mask;
	struct md_desc *desc;
	uint32_t *ret;
	uint32_t desc_cons, ret_prod;
	bool broken;
	uint8_t *held;				 /* [n]: 1 while we hold buffer i */
	struct rte_mbuf_ext_shared_info *shinfo; /* [n] */
	struct rte_ring *returns;		 /* indices freed, for ret[] */
};

struct memif_direct {
	char name[48];
	struct md_shared *sh; /* our object, mapped read-write */
	size_t obj_len;
	uint8_t *area;
	uint64_t area_len;
	uint32_t n, elt, mask;
	struct rte_mempool *pool;   /* = port->pool, over the area */
	struct rte_mbuf **inflight; /* [n]: frames the peer has, by index */
	uint32_t n_inflight, desc_prod, ret_cons;
	uint32_t tx_cap; /* n_inflight at most (MD_TX_CAP_RESERVE) */
	unsigned gen;
	unsigned peer_pid; /* the peer process whose offers we follow */
	unsigned peer_gen; /* the offer our view maps (0: none) */
	struct md_peer *peer;
	struct rte_mempool *hdr_pool;
	uint32_t copy_max;		      /* frames up to this long are copied at receive */
	bool pmd_parked;		      /* the PMD's bursts left alone (memif_direct_step) */
	bool park_off;			      /* ROCEMU_MEMIF_PARK=0: never (for A/Bs) */
	unsigned pmd_done_for;		      /* the peer's offer our pmd_done names (0: none) */
	char pool_name[RTE_MEMPOOL_NAMESIZE]; /* to know when the port freed it */
	struct memif_direct *next_closed;     /* md_closed */
};

/* Channels of released ports whose object is still mapped: each goes once
 * its pool is gone (md_reap). */
static pthread_mutex_t md_closed_lock = PTHREAD_MUTEX_INITIALIZER;
static struct memif_direct *md_closed;

static inline uint32_t *md_ret_ring(struct md_shared *sh, uint32_t ring_size)
{
	return (uint32_t *)(sh->desc + ring_size);
}

static size_t md_shared_len(uint32_t ring_size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t len = sizeof(struct md_shared) + (size_t)ring_size * (sizeof(struct md_desc) + 4);

	return (len + page - 1) & ~(page - 1);
}

/* name=N in the environment, N a decimal number: true and *x = N */
static bool md_env_number(const char *name, unsigned long *x)
{
	const char *v = getenv(name);
	char *end;

	if (!v || !*v)
		return false;
	*x = strtoul(v, &end, 10);
	return !*end;
}

/* Small-frame mode's limit: ROCEMU_MEMIF_DIRECT_COPY_MAX, else the default
 * (and for a value that is not a number); at most a buffer's size. */
static uint32_t md_copy_max(void)
{
	unsigned long x;

	if (!md_env_number("ROCEMU_MEMIF_DIRECT_COPY_MAX", &x))
		return MD_COPY_MAX_DEFAULT;
	return (uint32_t)RTE_MIN(x, (unsigned long)MD_MAX_ELT);
}

uint32_t memif_direct_tx_cap(uint32_t n)
{
	unsigned long x;

	if (md_env_number("ROCEMU_MEMIF_DIRECT_TX_CAP", &x) && x > 0)
		return (uint32_t)RTE_MIN(x, (unsigned long)n);
	return n - MD_TX_CAP_RESERVE(n);
}

/* name=0 in the environment: a default switched off */
static bool md_env_is_zero(const char *name)
{
	const char *v = getenv(name);

	return v && strcmp(v, "0") == 0;
}

/* On by default: ROCEMU_MEMIF_DIRECT=0 turns it off, and so does asking
 * for the PMD's zero-copy (ROCEMU_MEMIF_ZERO_COPY=1) without it: that needs
 * EAL's memory for the frames, the channel its own. */
bool memif_direct_wanted(void)
{
	const char *v = getenv("ROCEMU_MEMIF_DIRECT"), *zc = getenv("ROCEMU_MEMIF_ZERO_COPY");

	if (v)
		return strcmp(v, "0") != 0;
	return !zc || strcmp(zc, "1") != 0;
}

enum md_verdict memif_direct_check_desc(const struct md_desc *d, uint32_t n, uint32_t elt,
					const uint8_t *held)
{
	if (d->index >= n)
		return MD_BAD_INDEX;
	if (d->len < RTE_ETHER_HDR_LEN || (uint32_t)d->off + d->len > elt)
		return MD_BAD_RANGE;
	if (held[d->index])
		return MD_HELD;
	return MD_OK;
}

bool memif_direct_is_roce(const uint8_t *f, uint32_t len)
{
	uint16_t type, dport;
	uint32_t l4;

	if (len < RTE_ETHER_HDR_LEN + 40 + 8)
		return false;
	type = (uint16_t)(f[12] << 8 | f[13]);
	if (type == RTE_ETHER_TYPE_IPV4) {
		if ((f[14] >> 4) != 4 || (f[14] & 0xf) != 5 || f[14 + 9] != 17)
			return false;
		l4 = RTE_ETHER_HDR_LEN + 20;
	} else if (type == RTE_ETHER_TYPE_IPV6) {
		if ((f[14] >> 4) != 6 || f[14 + 6] != 17)
			return false;
		l4 = RTE_ETHER_HDR_LEN + 40;
	} else {
		return false;
	}
	dport = (uint16_t)(f[l4 + 2] << 8 | f[l4 + 3]);
	return dport == MD_UDP_PORT;
}

/* ------------------------------------------------------------------------ */
/* The peer's object.                                                         */

static void md_peer_destroy(struct md_peer *p)
{
	if (!p->from_memory) {
		munmap(p->sh, p->sh_len);
		munmap(p->area, p->area_len);
	}
	rte_ring_free(p->returns);
	free(p->held);
	free(p->shinfo);
	free(p);
}

static void md_peer_put(struct md_peer *p)
{
	if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1)
		md_peer_destroy(p);
}

/* A wrapped frame freed (any thread). */
static void md_free_cb(void *addr, void *opaque)
{
	struct md_peer *p = opaque;
	uintptr_t idx = (uintptr_t)((uint8_t *)addr - p->area) / p->elt;

	if (atomic_load_explicit(&p->live, memory_order_acquire))
		rte_ring_mp_enqueue(p->returns, (void *)idx); /* room: each index once */
	md_peer_put(p);
}

/* The header a peer wrote, read once: its bounds, against the object's
 * length. The caller keeps the copy's values, never the header's. */
static bool md_header_ok(const struct md_shared *h, uint64_t obj_len)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);

	if (h->magic != MD_MAGIC || h->version != MD_VERSION)
		return false;
	if (h->n_elts == 0 || h->n_elts > MD_MAX_ELTS || h->elt_size < 64 ||
	    h->elt_size > MD_MAX_ELT)
		return false;
	if (h->ring_size < h->n_elts || h->ring_size > MD_MAX_ELTS ||
	    (h->ring_size & (h->ring_size - 1)))
		return false;
	if (h->data_off % page || h->data_off < md_shared_len(h->ring_size))
		return false;
	return h->data_len == (uint64_t)h->n_elts * h->elt_size && h->data_off <= obj_len &&
	       h->data_len <= obj_len - h->data_off;
}

static struct md_peer *md_peer_new(const struct md_shared *h, struct md_shared *sh, uint8_t *area)
{
	char name[RTE_RING_NAMESIZE];
	struct md_peer *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->sh = sh;
	p->area = area;
	p->n = h->n_elts;
	p->elt = h->elt_size;
	p->mask = h->ring_size - 1;
	p->desc = sh->desc;
	p->ret = md_ret_ring(sh, h->ring_size);
	p->desc_cons = atomic_load_explicit(&sh->desc_prod, memory_order_acquire);
	p->ret_prod = atomic_load_explicit(&sh->ret_prod, memory_order_relaxed);
	p->held = calloc(p->n, 1);
	p->shinfo = calloc(p->n, sizeof(*p->shinfo));
	snprintf(name, sizeof(name), "rocemu_mdr%u", port_next_seq());
	p->returns = rte_ring_create(name, p->n, SOCKET_ID_ANY, RING_F_SC_DEQ | RING_F_EXACT_SZ);
	if (!p->held || !p->shinfo || !p->returns) {
		p->from_memory = true; /* nothing mapped yet */
		md_peer_destroy(p);
		return NULL;
	}
	atomic_init(&p->refs, 1);
	atomic_init(&p->live, true);
	return p;
}

struct md_peer *memif_direct_peer_from_memory(void *obj, uint64_t obj_len)
{
	struct md_shared h;
	struct md_peer *p;

	if (obj_len < sizeof(h))
		return NULL;
	memcpy(&h, obj, sizeof(h));
	if (!md_header_ok(&h, obj_len))
		return NULL;
	p = md_peer_new(&h, obj, (uint8_t *)obj + h.data_off);
	if (p)
		p->from_memory = true;
	return p;
}

/* Map the object a peer offers: its rings read-write, its area from a
 * read-only descriptor, copy-on-write, prefaulted (the first touch of each
 * page on the frame's path costs 30-80 us on a loaded VM). */
static struct md_peer *md_peer_map(const char *name)
{
	struct md_shared h;
	struct md_peer *p = NULL;
	struct stat st;
	void *sh = MAP_FAILED, *area = MAP_FAILED;
	int rw = shm_open(name, O_RDWR | O_CLOEXEC, 0),
	    ro = shm_open(name, O_RDONLY | O_CLOEXEC, 0);

	if (rw < 0 || ro < 0 || fstat(ro, &st) || st.st_size < (off_t)sizeof(h) ||
	    pread(ro, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    !md_header_ok(&h, (uint64_t)st.st_size))
		goto out;
	sh = mmap(NULL, h.data_off, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0);
	area = mmap(NULL, h.data_len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, ro, (off_t)h.data_off);
	if (sh == MAP_FAILED || area == MAP_FAILED ||
	    mprotect(area, h.data_len, PROT_READ | PROT_WRITE))
		goto out;
	p = md_peer_new(&h, sh, area);
	if (p) {
		p->sh_len = h.data_off;
		p->area_len = h.data_len;
	}
out:
	if (!p && sh != MAP_FAILED)
		munmap(sh, h.data_off);
	if (!p && area != MAP_FAILED)
		munmap(area, h.data_len);
	if (rw >= 0)
		close(rw);
	if (ro >= 0)
		close(ro);
	return p;
}

/* No longer the current view: nothing goes back to the peer from it; it
 * goes once our last frame of it is freed. */
void memif_direct_peer_drop(struct md_peer *p)
{
	if (!p)
		return;
	atomic_store_explicit(&p->live, false, memory_order_release);
	md_peer_put(p);
}

void memif_direct_peer_return(struct md_peer *p)
{
	void *idx[64];
	unsigned k;

	while ((k = rte_ring_sc_dequeue_burst(p->returns, idx, RTE_DIM(idx), NULL)) > 0) {
		for (unsigned i = 0; i < k; i++) {
			uint32_t x = (uint32_t)(uintptr_t)idx[i];

			p->held[x] = 0;
			__atomic_store_n(&p->ret[p->ret_prod & p->mask], x, __ATOMIC_RELAXED);
			p->ret_prod++;
		}
		atomic_store_explicit(&p->sh->ret_prod, p->ret_prod, memory_order_release);
	}
}

static void md_drop(uint64_t *ctr, enum port_counter c)
{
	ctr[c]++;
	ctr[PC_RX_DROPS]++;
}

/* Buffer idx goes back to the peer: into its return ring now, published
 * with the burst's others (md_publish_returns). */
static void md_give_back(struct md_peer *p, uint32_t idx)
{
	p->held[idx] = 0;
	__atomic_store_n(&p->ret[p->ret_prod & p->mask], idx, __ATOMIC_RELAXED);
	p->ret_prod++;
}

static void md_publish_returns(struct md_peer *p)
{
	atomic_store_explicit(&p->sh->ret_prod, p->ret_prod, memory_order_release);
}

/* A frame in place: an mbuf of ours around the peer's buffer (already
 * marked held), given back when the mbuf is freed (md_free_cb). */
static struct rte_mbuf *md_wrap(struct md_peer *p, struct rte_mempool *hdr_pool,
				const struct md_desc *d)
{
	struct rte_mbuf_ext_shared_info *si = &p->shinfo[d->index];
	struct rte_mbuf *m = rte_pktmbuf_alloc(hdr_pool);

	if (!m)
		return NULL;
	si->free_cb = md_free_cb;
	si->fcb_opaque = p;
	rte_mbuf_ext_refcnt_set(si, 1);
	atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
	rte_pktmbuf_attach_extbuf(m, p->area + (size_t)d->index * p->elt, RTE_BAD_IOVA,
				  (uint16_t)p->elt, si);
	m->data_off = d->off;
	m->data_len = d->len;
	m->pkt_len = d->len;
	return m;
}

static struct rte_mbuf *md_copy(struct rte_mempool *pool, const uint8_t *f, uint16_t len)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(pool);

	if (m && rte_pktmbuf_tailroom(m) >= len) {
		rte_memcpy(rte_pktmbuf_append(m, len), f, len);
		return m;
	}
	rte_pktmbuf_free(m);
	return NULL;
}

/* The frame's first lines (all of a frame we will copy) on their way from
 * the peer's core while the burst's other descriptors are read. */
static void md_prefetch(const uint8_t *f, uint32_t len, uint32_t copy_max)
{
	uint32_t upto = len <= copy_max ? len : RTE_MIN(len, 128u);

	for (uint32_t o = 0; o < upto; o += RTE_CACHE_LINE_SIZE)
		rte_prefetch0(f + o);
	rte_prefetch0(f + upto - 1);
}

/*
 * Two steps per burst. First every descriptor is read once and checked;
 * a good one marks its buffer held (a second descriptor for it, in this
 * burst or later, is refused) and its frame's lines are prefetched. Then
 * each frame is copied into an mbuf of ours, its buffer given back at once,
 * if it has at most copy_max bytes or is not RoCEv2 (their handlers write
 * into it); a larger RoCEv2 frame is wrapped in place. The returns of the
 * burst are published once.
 */
uint16_t memif_direct_peer_rx(struct md_peer *p, uint64_t *ctr, struct rte_mempool *hdr_pool,
			      struct rte_mempool *copy_pool, uint32_t copy_max,
			      struct rte_mbuf **pkts, uint16_t n)
{
	struct md_desc ok[MD_RX_BURST];
	uint32_t prod, avail, n_ok = 0, ret0 = p->ret_prod;
	uint16_t got = 0;

	if (p->broken)
		return 0;
	prod = atomic_load_explicit(&p->sh->desc_prod, memory_order_acquire);
	avail = prod - p->desc_cons;
	if (avail > p->mask + 1) { /* a producer index no ring allows */
		p->broken = true;
		md_drop(ctr, PC_DROP_DIRECT_BAD_RING);
		return 0;
	}
	avail = RTE_MIN(avail, RTE_MIN((uint32_t)n, MD_RX_BURST));
	for (uint32_t k = 0; k < avail; k++) {
		uint64_t raw =
		    __atomic_load_n((uint64_t *)&p->desc[p->desc_cons & p->mask], __ATOMIC_RELAXED);
		struct md_desc d;

		memcpy(&d, &raw, sizeof(d));
		p->desc_cons++;
		switch (memif_direct_check_desc(&d, p->n, p->elt, p->held)) {
		case MD_OK:
			break;
		case MD_HELD:
			md_drop(ctr, PC_DROP_DIRECT_BUFFER_HELD);
			continue;
		default:
			md_drop(ctr, PC_DROP_DIRECT_BAD_DESC);
			continue;
		}
		p->held[d.index] = 1;
		md_prefetch(p->area + (size_t)d.index * p->elt + d.off, d.len, copy_max);
		ok[n_ok++] = d;
	}
	for (uint32_t k = 0; k < n_ok; k++) {
		const struct md_desc *d = &ok[k];
		const uint8_t *f = p->area + (size_t)d->index * p->elt + d->off;
		bool roce = memif_direct_is_roce(f, d->len);
		struct rte_mbuf *m;

		if (roce && d->len > copy_max) {
			m = md_wrap(p, hdr_pool, d);
			if (!m)
				md_give_back(p, d->index);
			else
				ctr[PC_DIRECT_RX_BYTES] += d->len;
		} else {
			m = md_copy(copy_pool, f, d->len);
			md_give_back(p, d->index);
			if (m) {
				ctr[PC_DIRECT_COPY_RX_BYTES] += d->len;
				if (roce)
					ctr[PC_DIRECT_SMALL_RX_BYTES] += d->len;
			}
		}
		if (!m) {
			md_drop(ctr, PC_DROP_MBUF_EXHAUSTED);
			continue;
		}
		pkts[got++] = m;
	}
	if (p->ret_prod != ret0)
		md_publish_returns(p);
	return got;
}

/* ------------------------------------------------------------------------ */
/* Our own object.                                                            */

/* Objects of processes that died before their close (the name has the pid). */
static void md_unlink_stale(void)
{
	DIR *dir = opendir("/dev/shm");
	struct dirent *e;

	if (!dir)
		return;
	while ((e = readdir(dir)) != NULL) {
		char name[300];
		int pid;

		if (sscanf(e->d_name, "rocemu-md-%d-", &pid) != 1 || pid <= 0)
			continue;
		if (kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(name, sizeof(name), "/%s", e->d_name);
		shm_unlink(name);
	}
	closedir(dir);
}

/*
 * Let go of the objects of closed ports whose pool is gone: the port frees
 * its pool when it closes (after the link's release), so no mbuf points
 * into the area any more: unmap it. The wrappers' pool goes once every
 * wrapper is back (a frame of the peer's an upper layer still holds keeps
 * it). Called at every create and release: a process that opens and
 * closes ports keeps at most the last closed one's object mapped. A port
 * closed at exit keeps its pool, and so its object.
 */
static void md_reap(void)
{
	pthread_mutex_lock(&md_closed_lock);
	for (struct memif_direct **pp = &md_closed; *pp;) {
		struct memif_direct *d = *pp;

		if (d->hdr_pool && rte_mempool_full(d->hdr_pool)) {
			rte_mempool_free(d->hdr_pool);
			d->hdr_pool = NULL;
		}
		if (d->sh && !rte_mempool_lookup(d->pool_name)) {
			munmap(d->sh, d->obj_len);
			d->sh = NULL;
		}
		if (d->hdr_pool || d->sh) {
			pp = &d->next_closed;
			continue;
		}
		*pp = d->next_closed;
		free(d->inflight);
		free(d);
	}
	pthread_mutex_unlock(&md_closed_lock);
}

/* A pinned buffer's last reference gone (only if something attached to
 * it): the mbuf goes back whole, as the pool made it. */
static void md_pinned_free(void *addr, void *opaque)
{
	struct rte_mbuf *m = opaque;

	RTE_SET_USED(addr);
	rte_mbuf_ext_refcnt_set(m->shinfo, 1);
	m->ol_flags = RTE_MBUF_F_EXTERNAL;
	m->next = NULL;
	m->nb_segs = 1;
	rte_mbuf_raw_free(m);
}

/* Each mbuf of the pool owns buffer obj_idx of the area, for good (a
 * pinned external buffer); its shared info follows the mbuf. */
static void md_mbuf_init(struct rte_mempool *mp, void *opaque, void *obj, unsigned obj_idx)
{
	const struct memif_direct *d = opaque;
	struct rte_mbuf *m = obj;
	struct rte_mbuf_ext_shared_info *si = (void *)(m + 1);

	memset(m, 0, sizeof(*m) + sizeof(*si));
	m->buf_addr = d->area + (size_t)obj_idx * d->elt;
	rte_mbuf_iova_set(m, RTE_BAD_IOVA);
	m->buf_len = (uint16_t)d->elt;
	m->data_off = (uint16_t)RTE_MIN((uint32_t)RTE_PKTMBUF_HEADROOM, d->elt);
	m->pool = mp;
	m->nb_segs = 1;
	m->port = RTE_MBUF_PORT_INVALID;
	m->ol_flags = RTE_MBUF_F_EXTERNAL;
	rte_mbuf_refcnt_set(m, 1);
	m->shinfo = si;
	si->free_cb = md_pinned_free;
	si->fcb_opaque = m;
	rte_mbuf_ext_refcnt_set(si, 1);
}

/*
 * The pool over our area hands out the buffer freed last first (DPDK's
 * lock-free stack, "lf_stack", under per-lcore caches, which are stacks
 * too), as memif's own pool does (port_memif_zc.c), so a stream keeps
 * reusing the few buffers the window has out (128 frames), not all 8192
 * (34 MB) in turn, as the default ring of rte_pktmbuf_pool_create_extbuf
 * did. Measured alone, it did not move ib_write_bw -s 65536: the sender's
 * copy-and-ICRC into the frame, ordinary stores into lines the peer's core
 * has just read, waits on every line (3x the PMD path's same copy into a
 * private mbuf). With a copy that writes whole lines without reading them
 * first (rep movsb), the hot set is what makes it fast
 * (bench/perf_analysis.md, "memif's direct channel: the profile").
 * Without the stack driver, the default ops.
 */
static struct rte_mempool *md_pool_create(const char *name, struct memif_direct *d, uint16_t room)
{
	struct rte_pktmbuf_pool_private priv = {.mbuf_data_room_size = room,
						.mbuf_priv_size = 0,
						.flags = RTE_PKTMBUF_POOL_F_PINNED_EXT_BUF};
	struct rte_mempool *mp = rte_mempool_create_empty(
	    name, d->n, sizeof(struct rte_mbuf) + sizeof(struct rte_mbuf_ext_shared_info),
	    RTE_MIN(MD_POOL_CACHE, d->n / 8), sizeof(priv), (int)rte_socket_id(), 0);

	if (!mp)
		return NULL;
	if (rte_mempool_set_ops_byname(mp, "lf_stack", NULL) &&
	    rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), NULL))
		goto fail;
	rte_pktmbuf_pool_init(mp, &priv);
	if (rte_mempool_populate_default(mp) != (int)d->n)
		goto fail;
	rte_mempool_obj_iter(mp, md_mbuf_init, d);
	return mp;
fail:
	rte_mempool_free(mp);
	return NULL;
}

int memif_direct_create(struct rocemu_port *port, struct memif_link *l, char *err, size_t errlen)
{
	struct memif_direct *d = calloc(1, sizeof(*d));
	uint16_t room = rte_pktmbuf_data_room_size(port->pool);
	char pname[RTE_MEMPOOL_NAMESIZE];
	size_t page = (size_t)sysconf(_SC_PAGESIZE), sh_len;
	void *obj;
	int fd;

	if (!d)
		return port_fail(err, errlen, -ENOMEM, "memif direct: out of memory");
	md_reap();
	md_unlink_stale();
	d->n = port->pool->size;
	d->elt = (room + 63u) & ~63u;
	d->mask = rte_align32pow2(d->n) - 1;
	sh_len = md_shared_len(d->mask + 1);
	d->area_len = ((uint64_t)d->n * d->elt + page - 1) & ~(uint64_t)(page - 1);
	d->obj_len = sh_len + d->area_len;
	d->inflight = calloc(d->n, sizeof(*d->inflight));
	snprintf(d->name, sizeof(d->name), "/rocemu-md-%d-%u", (int)getpid(), port_next_seq());
	fd = d->inflight ? shm_open(d->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
	/* the pages reserved now: a full /dev/shm is a clean failure here,
	 * not a SIGBUS on some later frame */
	if (fd < 0 || ftruncate(fd, (off_t)d->obj_len) || fallocate(fd, 0, 0, (off_t)d->obj_len)) {
		if (fd >= 0) {
			close(fd);
			shm_unlink(d->name);
		}
		free(d->inflight);
		free(d);
		return port_fail(err, errlen, -ENOMEM, "memif direct: cannot make its shm object");
	}
	obj = mmap(NULL, d->obj_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	close(fd);
	if (obj == MAP_FAILED)
		goto fail_unlink;
	d->sh = obj;
	d->area = (uint8_t *)obj + sh_len;
	*d->sh = (struct md_shared){.magic = MD_MAGIC,
				    .version = MD_VERSION,
				    .n_elts = d->n,
				    .elt_size = d->elt,
				    .ring_size = d->mask + 1,
				    .data_off = sh_len,
				    .data_len = (uint64_t)d->n * d->elt};
	snprintf(d->pool_name, sizeof(d->pool_name), "rocemu_md%u", port_next_seq());
	d->pool = md_pool_create(d->pool_name, d, room);
	snprintf(pname, sizeof(pname), "rocemu_mdh%u", port_next_seq());
	d->hdr_pool =
	    rte_pktmbuf_pool_create(pname, MD_WRAPPERS, MD_POOL_CACHE, 0, 0, (int)rte_socket_id());
	if (!d->pool || !d->hdr_pool) {
		rte_mempool_free(d->pool);
		rte_mempool_free(d->hdr_pool);
		munmap(obj, d->obj_len);
		goto fail_unlink;
	}
	rte_mempool_free(port->pool); /* made just before, nothing taken from it */
	port->pool = d->pool;
	d->gen = 1;
	d->copy_max = md_copy_max();
	d->tx_cap = memif_direct_tx_cap(d->n);
	d->park_off = md_env_is_zero("ROCEMU_MEMIF_PARK");
	l->direct = d;
	return 0;
fail_unlink:
	shm_unlink(d->name);
	free(d->inflight);
	free(d);
	return port_fail(err, errlen, -ENOMEM, "memif direct: cannot map its shm object: %s",
			 rte_strerror(rte_errno ? rte_errno : errno));
}

void memif_direct_publish(struct rocemu_port *port)
{
	struct memif_link *l = port->link_priv;
	struct memif_direct_offer *o;

	if (!l->direct || !l->page)
		return;
	o = &l->page->direct[l->client];
	atomic_store_explicit(&o->gen, 0, memory_order_release);
	memcpy(o->name, l->direct->name, sizeof(o->name));
	atomic_store_explicit(&o->pid, (unsigned)getpid(), memory_order_relaxed);
	atomic_store_explicit(&o->mapped_gen, 0, memory_order_relaxed);
	atomic_store_explicit(&o->pmd_done, 0, memory_order_relaxed);
	l->direct->pmd_done_for = 0;
	atomic_store_explicit(&o->gen, l->direct->gen, memory_order_release);
}

static void md_drop_view(struct rocemu_port *port, struct memif_direct *d)
{
	struct memif_link *l = port->link_priv;

	if (l->page)
		atomic_store_explicit(&l->page->direct[l->client].mapped_gen, 0,
				      memory_order_release);
	memif_direct_peer_drop(d->peer);
	d->peer = NULL;
	d->peer_gen = 0;
	if (d->pmd_parked && port_trace_on("direct"))
		port_trace(port, "direct", "direct channel: the PMD polled again");
	d->pmd_parked = false;
}

void memif_direct_reset(struct rocemu_port *port, const char *why)
{
	struct memif_link *l = port->link_priv;
	struct memif_direct *d = l->direct;

	if (!d)
		return;
	md_drop_view(port, d);
	for (uint32_t i = 0; i < d->n && d->n_inflight; i++) {
		if (d->inflight[i]) {
			rte_pktmbuf_free(d->inflight[i]);
			d->inflight[i] = NULL;
			d->n_inflight--;
		}
	}
	d->ret_cons = atomic_load_explicit(&d->sh->ret_prod, memory_order_acquire);
	d->gen++;
	if (!d->gen)
		d->gen = 1;
	memif_direct_publish(port);
	port_count(port, PC_DIRECT_RESETS);
	if (port_trace_on("direct"))
		port_trace(port, "direct", "direct channel reset, offer %u (%s)", d->gen, why);
}

void memif_direct_release(struct rocemu_port *port)
{
	struct memif_link *l = port->link_priv;
	struct memif_direct *d = l->direct;

	if (!d)
		return;
	md_drop_view(port, d);
	if (l->page) {
		atomic_store(&l->page->direct[l->client].gen, 0);
		atomic_store(&l->page->direct[l->client].pid, 0);
	}
	for (uint32_t i = 0; i < d->n; i++) {
		rte_pktmbuf_free(d->inflight[i]);
		d->inflight[i] = NULL;
	}
	d->n_inflight = 0;
	shm_unlink(d->name);
	l->direct = NULL;
	/* the object stays mapped while port->pool, over it, exists: a close
	 * frees the pool right after this, a close at exit keeps it (mbufs
	 * may outlive the port) */
	pthread_mutex_lock(&md_closed_lock);
	d->next_closed = md_closed;
	md_closed = d;
	pthread_mutex_unlock(&md_closed_lock);
	md_reap();
}

/* The peer's offer: a new process, a new object, or none (engine lock). */
static void md_follow_slow(struct rocemu_port *port, struct memif_link *l, struct memif_direct *d,
			   unsigned gen)
{
	struct memif_direct_offer *o = &l->page->direct[!l->client];
	unsigned pid = atomic_load_explicit(&o->pid, memory_order_relaxed);
	char name[sizeof(o->name)];

	if (pid != d->peer_pid) {
		if (d->peer_pid)
			memif_direct_reset(port, "a new peer process");
		d->peer_pid = pid;
	}
	md_drop_view(port, d);
	d->peer_gen = gen;
	if (!gen)
		return;
	memcpy(name, o->name, sizeof(name));
	name[sizeof(name) - 1] = 0;
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&o->gen, memory_order_relaxed) != gen) {
		d->peer_gen = 0; /* rewritten meanwhile: next pass */
		return;
	}
	d->peer = md_peer_map(name);
	if (!d->peer) {
		port_count(port, PC_DIRECT_MAP_FAILED);
		return;
	}
	port_count(port, PC_DIRECT_MAPS);
	atomic_store_explicit(&l->page->direct[l->client].mapped_gen, gen, memory_order_release);
	if (port_trace_on("direct"))
		port_trace(port, "direct", "direct channel: mapped the peer's offer %u", gen);
}

/* A line we are about to write, fetched for writing (PREFETCHW: the peer's
 * core gives it up now, not at our first store; a NOP where unknown). */
static inline void md_prefetch_write(const void *p)
{
#if defined(__x86_64__)
	__asm__ volatile("prefetchw %0" : : "m"(*(const volatile char *)p));
#else
	__builtin_prefetch(p, 1, 3);
#endif
}

/*
 * Frames the peer gave back. A bad index is counted and skipped. In
 * small-frame mode (copy_max set), since the pool hands out the buffer
 * freed last first and the next frames are built in these, the first lines
 * of the last ones freed (headers and a small payload), which the peer's
 * core has just read, are fetched for writing now, while other work runs
 * (the requester's IPv4 checksum read back the header it had just written
 * and waited for the line there: 90% of roce_build_headers' samples,
 * bench/perf_analysis.md).
 */
static void md_reclaim(struct rocemu_port *port, struct memif_direct *d)
{
	uint32_t prod = atomic_load_explicit(&d->sh->ret_prod, memory_order_acquire);
	uint32_t *ret = md_ret_ring(d->sh, d->mask + 1);
	const uint8_t *next[MD_PREFETCH_BUFS];
	unsigned n_next = 0;

	if (prod - d->ret_cons > d->mask + 1) {
		port_count(port, PC_DIRECT_BAD_RETURNS);
		d->ret_cons = prod;
		return;
	}
	while (d->ret_cons != prod) {
		uint32_t idx = __atomic_load_n(&ret[d->ret_cons++ & d->mask], __ATOMIC_RELAXED);

		if (idx >= d->n || !d->inflight[idx]) {
			port_count(port, PC_DIRECT_BAD_RETURNS);
			continue;
		}
		next[n_next++ % MD_PREFETCH_BUFS] =
		    (const uint8_t *)d->inflight[idx]->buf_addr + RTE_PKTMBUF_HEADROOM;
		rte_pktmbuf_free(d->inflight[idx]);
		d->inflight[idx] = NULL;
		d->n_inflight--;
	}
	if (!d->copy_max || d->elt < RTE_PKTMBUF_HEADROOM + MD_PREFETCH_LINES * RTE_CACHE_LINE_SIZE)
		return;
	for (unsigned i = 0; i < RTE_MIN(n_next, MD_PREFETCH_BUFS); i++)
		for (unsigned l = 0; l < MD_PREFETCH_LINES; l++)
			md_prefetch_write(next[i] + l * RTE_CACHE_LINE_SIZE);
}

/* The peer reads our channel now (it mapped our current offer). */
static bool md_peer_reads(struct rocemu_port *port, struct memif_direct *d)
{
	struct memif_link *l = port->link_priv;

	return atomic_load_explicit(&l->page->direct[!l->client].mapped_gen,
				    memory_order_acquire) == d->gen;
}

/*
 * The peer maps our current offer under its offer gen: from now on we send
 * on the channel only (until our offer changes), which our pmd_done says,
 * once per offer of the peer. Its mapped_gen is read after its gen
 * (acquire, md_step): a peer's new offer clears its mapped_gen before the
 * new gen is stored, so a mapping of its earlier offer is never taken for
 * one under the new gen.
 */
static void md_say_pmd_done(struct memif_link *l, struct memif_direct *d, unsigned gen)
{
	if (atomic_load_explicit(&l->page->direct[!l->client].mapped_gen, memory_order_acquire) !=
	    d->gen)
		return;
	atomic_store_explicit(&l->page->direct[l->client].pmd_done, gen, memory_order_release);
	d->pmd_done_for = gen;
}

/* Every burst: follow the peer's offer, take back what it returned, say
 * when we no longer send through the PMD. */
static struct memif_direct *md_step(struct rocemu_port *port)
{
	struct memif_link *l = port->link_priv;
	struct memif_direct *d = l->direct;
	struct memif_direct_offer *o;
	unsigned gen;

	if (!d || !l->page)
		return NULL;
	o = &l->page->direct[!l->client];
	gen = atomic_load_explicit(&o->gen, memory_order_acquire);
	/* the pid too: a new client's first offer has the gen of the last */
	if (unlikely(gen != d->peer_gen ||
		     atomic_load_explicit(&o->pid, memory_order_relaxed) != d->peer_pid))
		md_follow_slow(port, l, d, gen);
	if (d->n_inflight)
		md_reclaim(port, d);
	if (unlikely(d->pmd_done_for != gen) && gen)
		md_say_pmd_done(l, d, gen);
	return d;
}

enum md_pmd memif_direct_step(struct rocemu_port *port)
{
	struct memif_direct *d = md_step(port);
	struct memif_link *l = port->link_priv;

	if (!d)
		return MD_PMD_POLL;
	if (likely(d->pmd_parked))
		return MD_PMD_PARKED;
	if (d->park_off || !d->peer || !md_peer_reads(port, d) ||
	    atomic_load_explicit(&l->page->direct[!l->client].pmd_done, memory_order_acquire) !=
		d->gen)
		return MD_PMD_POLL;
	return MD_PMD_DRAIN;
}

bool memif_direct_parked(const struct memif_link *l)
{
	return l->direct && l->direct->pmd_parked;
}

void memif_direct_park(struct rocemu_port *port)
{
	struct memif_link *l = port->link_priv;

	l->direct->pmd_parked = true;
	port_count(port, PC_PMD_PARKS);
	if (port_trace_on("direct"))
		port_trace(port, "direct", "direct channel carries all: the PMD is left alone");
}

uint16_t memif_direct_rx_burst(struct rocemu_port *port, struct rte_mbuf **pkts, uint16_t n)
{
	struct memif_direct *d = ((struct memif_link *)port->link_priv)->direct;

	if (!d || !d->peer)
		return 0;
	memif_direct_peer_return(d->peer);
	return memif_direct_peer_rx(d->peer, port->ctr, d->hdr_pool, d->pool, d->copy_max, pkts, n);
}

/* m's buffer is one of our area's, whole frame in it: its index. */
static bool md_own_buffer(const struct memif_direct *d, const struct rte_mbuf *m, uint32_t *idx)
{
	uintptr_t off = (uintptr_t)m->buf_addr - (uintptr_t)d->area;

	if (m->pool != d->pool || m->nb_segs != 1 || (uintptr_t)m->buf_addr < (uintptr_t)d->area ||
	    off >= (uintptr_t)d->n * d->elt || off % d->elt ||
	    (uint32_t)m->data_off + m->data_len > d->elt)
		return false;
	*idx = (uint32_t)(off / d->elt);
	return true;
}

/* Returns UINT16_MAX when the channel is not in use now (the PMD sends).
 * Parked, and the peer no longer maps our offer: it is making a new one
 * (it unmaps ours first), which unparks us at the next step; the frames
 * wait for that, the PMD is not touched before. */
uint16_t memif_direct_tx_burst(struct rocemu_port *port, struct rte_mbuf **pkts, uint16_t n)
{
	struct memif_direct *d = md_step(port);
	uint16_t i;

	if (!d || !md_peer_reads(port, d))
		return d && d->pmd_parked ? 0 : UINT16_MAX;
	/* At the cap (nothing given back since the last try): nothing sent,
	 * and no store into the ring's lines, which the peer's core reads on
	 * every poll (a spinning sender used to rewrite desc_prod each try). */
	if (d->n_inflight >= d->tx_cap) {
		port->ctr[PC_DIRECT_TX_CAPPED]++;
		return 0;
	}
	for (i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		struct md_desc desc;
		uint64_t raw;
		uint32_t idx;

		if (d->n_inflight >= d->tx_cap) {
			port->ctr[PC_DIRECT_TX_CAPPED]++;
			break;
		}
		if (!md_own_buffer(d, m, &idx) || d->inflight[idx]) {
			/* built elsewhere (a copy for loopback, a reply in a
			 * received frame): one copy, counted */
			struct rte_mbuf *c = rte_pktmbuf_copy(m, d->pool, 0, UINT32_MAX);

			if (!c || !md_own_buffer(d, c, &idx) || d->inflight[idx]) {
				rte_pktmbuf_free(c);
				break;
			}
			port->ctr[PC_DIRECT_COPY_TX_BYTES] += c->pkt_len;
			rte_pktmbuf_free(m);
			pkts[i] = m = c;
		}
		desc = (struct md_desc){.index = idx, .off = m->data_off, .len = m->data_len};
		memcpy(&raw, &desc, sizeof(raw));
		__atomic_store_n((uint64_t *)&d->sh->desc[d->desc_prod & d->mask], raw,
				 __ATOMIC_RELAXED);
		d->desc_prod++;
		d->inflight[idx] = m;
		d->n_inflight++;
		port->ctr[PC_DIRECT_TX_BYTES] += m->data_len;
	}
	if (i)
		atomic_store_explicit(&d->sh->desc_prod, d->desc_prod, memory_order_release);
	return i;
}
