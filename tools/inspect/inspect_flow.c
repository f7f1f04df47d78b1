/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rocemu inspect: conversations. Every RoCEv2 packet belongs to a "half":
 * all packets from one host to one destination QP, (src, dst, DQPN), plus
 * the DETH source QP for UD. An RC or UC QP is connected to exactly one
 * remote QP, so a half is what one QP sends to its peer: its requests and
 * its responses to the peer's requests. Two halves in opposite directions
 * make a conversation.
 *
 * Pairing rule (documented in docs/inspect.md):
 *  - RC: the BTH of a response (ACK, NAK, READ response, ATOMIC ACK) carries
 *    the requester's QPN as DQPN and the PSN of a request. A response in half
 *    B->A/dqpn=a whose PSN lies in the outstanding window of exactly one
 *    unpaired request half A->B/dqpn=x pairs the two: a <-> x. If several
 *    windows contain the PSN, the one with the same UDP source port (rxe and
 *    mlx5 derive it from both QPNs, so it is the same both ways) wins, then
 *    the most recently active one.
 *  - UD: exact, A->B (dqpn b, source QP a) pairs with B->A (dqpn a, source b).
 *  - UC (no responses) or a one-sided capture: at the end, two unpaired
 *    halves in opposite directions between the same hosts with the same UDP
 *    source port pair when that match is unique.
 *
 * Sequence analysis of requests (per half, RC and UC): a PSN equal to the
 * next expected one is in order; ahead of it opens a gap (out of sequence);
 * behind it is the sender's resend when it restarts at or after the PSN the
 * responder NAKed, when its AckReq differs from its last sighting (the
 * network copies a packet as it is), or when it comes at least INSP_RESEND_SILENCE_NS after the
 * newest request of its direction (a stall probe, a timeout: its original is at least that old,
 * while a copy the network makes follows its original within microseconds); the packets that follow
 * it up to the old head are resent too (go-back-N), and an episode of one packet is a single
 * resend. Otherwise it is a late packet when it fills a gap, and a duplicate (the network's copy)
 * when it does not.
 *
 * Memory is bounded by the number of halves: per half a fixed number of gaps,
 * a message ring of at most INSP_RING_MAX entries and a fixed histogram.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>

#include "inspect.h"

#define INSP_RING_MIN 16
#define INSP_RING_MAX 4096
/* Directions tracked at most (about 1.5 KB each, more with latencies): a
 * hard bound on memory whatever the capture; beyond, packets are counted
 * as "flow table full". */
#define INSP_HALVES_MAX (1u << 18)
/**
 * Silence after which a request behind the head is the sender's resend, not
 * a network's copy: no requester resends sooner (rocemu's stall probe waits
 * at least 250 us, transport timers are milliseconds: IBA 9.7.6.1.3), while a
 * copy made by a switch or a kernel follows its original within microseconds.
 */
#define INSP_RESEND_SILENCE_NS 100000ull
/** PMTU assumed for READ spans until one is seen: the smallest IB MTU. */
#define INSP_PMTU_MIN 256u

struct flow_key {
	uint8_t src[16], dst[16];
	uint32_t dqpn, src_qp;
};

/*
 * The flow table's hash: SipHash-2-4 (Aumasson and Bernstein's keyed PRF)
 * under a key drawn per state. An unkeyed hash (FNV-1a before) lets a
 * capture name thousands of flows that share one table slot, and every
 * packet of them then walks the whole chain: O(n^2) for a file of n flows.
 */
#define SIP_ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIP_ROUND(v0, v1, v2, v3)                                                                  \
	do {                                                                                       \
		v0 += v1;                                                                          \
		v1 = SIP_ROTL(v1, 13);                                                             \
		v1 ^= v0;                                                                          \
		v0 = SIP_ROTL(v0, 32);                                                             \
		v2 += v3;                                                                          \
		v3 = SIP_ROTL(v3, 16);                                                             \
		v3 ^= v2;                                                                          \
		v0 += v3;                                                                          \
		v3 = SIP_ROTL(v3, 21);                                                             \
		v3 ^= v0;                                                                          \
		v2 += v1;                                                                          \
		v1 = SIP_ROTL(v1, 17);                                                             \
		v1 ^= v2;                                                                          \
		v2 = SIP_ROTL(v2, 32);                                                             \
	} while (0)

static uint64_t siphash24(const uint64_t key[2], const uint8_t *m, size_t len)
{
	uint64_t v0 = 0x736f6d6570736575ull ^ key[0], v1 = 0x646f72616e646f6dull ^ key[1];
	uint64_t v2 = 0x6c7967656e657261ull ^ key[0], v3 = 0x7465646279746573ull ^ key[1];
	uint64_t last = (uint64_t)len << 56, w;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		memcpy(&w, m + i, 8);
		w = le64toh(w);
		v3 ^= w;
		SIP_ROUND(v0, v1, v2, v3);
		SIP_ROUND(v0, v1, v2, v3);
		v0 ^= w;
	}
	for (size_t j = 0; i + j < len; j++)
		last |= (uint64_t)m[i + j] << (8 * j);
	v3 ^= last;
	SIP_ROUND(v0, v1, v2, v3);
	SIP_ROUND(v0, v1, v2, v3);
	v0 ^= last;
	v2 ^= 0xff;
	for (int r = 0; r < 4; r++)
		SIP_ROUND(v0, v1, v2, v3);
	return v0 ^ v1 ^ v2 ^ v3;
}

static uint64_t key_hash(const struct insp_state *s, const struct flow_key *k)
{
	return siphash24(s->hash_key, (const uint8_t *)k, sizeof(*k));
}

/* A key nobody can predict: the kernel's CSPRNG (clock and pid only if it
 * is unavailable, which leaves the table correct, just guessable). */
static void hash_key_draw(uint64_t key[2])
{
	struct timespec ts;

	if (getrandom(key, 2 * sizeof(*key), GRND_NONBLOCK) == (ssize_t)(2 * sizeof(*key)))
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	key[0] = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
	key[1] = (uint64_t)ts.tv_sec * 0xc2b2ae3d27d4eb4full ^ (uint64_t)(uintptr_t)key;
}

static bool half_has_key(const struct insp_half *h, const struct flow_key *k)
{
	return h->dqpn == k->dqpn && h->src_qp == k->src_qp && !memcmp(h->src, k->src, 16) &&
	       !memcmp(h->dst, k->dst, 16);
}

int insp_state_init(struct insp_state *s, bool want_series)
{
	memset(s, 0, sizeof(*s));
	s->want_series = want_series;
	hash_key_draw(s->hash_key);
	s->table_cap = 1024;
	s->table = calloc(s->table_cap, sizeof(*s->table));
	s->events = calloc(INSP_EVENTS_MAX, sizeof(*s->events));
	if (want_series)
		s->total_series = calloc(1, sizeof(*s->total_series));
	if (!s->table || !s->events || (want_series && !s->total_series)) {
		insp_state_free(s);
		return -ENOMEM;
	}
	return 0;
}

void insp_state_free(struct insp_state *s)
{
	for (unsigned i = 0; i < s->nhalves; i++) {
		free(s->halves[i]->ops.all);
		free(s->halves[i]->ring);
		free(s->halves[i]->lat);
		free(s->halves[i]->series_bytes);
		free(s->halves[i]);
	}
	free(s->halves);
	free(s->table);
	free(s->events);
	free(s->total_series);
	memset(s, 0, sizeof(*s));
}

void insp_ops_add(struct insp_opcounts *c, uint8_t op)
{
	if (c->all) {
		c->all[op]++;
		return;
	}
	for (unsigned i = 0; i < c->n; i++) {
		if (c->op[i] == op) {
			c->count[i]++;
			return;
		}
	}
	if (c->n < INSP_OPS_INLINE) {
		c->op[c->n] = op;
		c->count[c->n++] = 1;
		return;
	}
	c->all = calloc(256, sizeof(*c->all));
	if (!c->all)
		return; /* out of memory: this packet's opcode goes uncounted */
	for (unsigned i = 0; i < c->n; i++)
		c->all[c->op[i]] = c->count[i];
	c->all[op]++;
}

uint64_t insp_ops_get(const struct insp_opcounts *c, uint8_t op)
{
	if (c->all)
		return c->all[op];
	for (unsigned i = 0; i < c->n; i++)
		if (c->op[i] == op)
			return c->count[i];
	return 0;
}

static struct insp_half **table_slot(struct insp_state *s, const struct flow_key *k)
{
	unsigned mask = s->table_cap - 1, i = (unsigned)key_hash(s, k) & mask;

	while (s->table[i] && !half_has_key(s->table[i], k)) {
		i = (i + 1) & mask;
		s->table_probes++;
	}
	return &s->table[i];
}

static int table_grow(struct insp_state *s)
{
	struct insp_half **old = s->table;
	unsigned old_cap = s->table_cap;
	struct flow_key k;

	s->table = calloc((size_t)old_cap * 2, sizeof(*s->table));
	if (!s->table) {
		s->table = old;
		return -ENOMEM;
	}
	s->table_cap = old_cap * 2;
	for (unsigned i = 0; i < old_cap; i++) {
		if (!old[i])
			continue;
		memcpy(k.src, old[i]->src, 16);
		memcpy(k.dst, old[i]->dst, 16);
		k.dqpn = old[i]->dqpn;
		k.src_qp = old[i]->src_qp;
		*table_slot(s, &k) = old[i];
	}
	free(old);
	return 0;
}

static void frame_key(const struct insp_frame *f, struct flow_key *k)
{
	memset(k, 0, sizeof(*k));
	memcpy(k->src, f->src_gid, 16);
	memcpy(k->dst, f->dst_gid, 16);
	k->dqpn = f->dqpn;
	k->src_qp = INSP_QPN_UNKNOWN;
	if (f->headers_ok && f->pkt.op && (f->pkt.op->hdrs & ROCE_HDR_DETH))
		k->src_qp = f->pkt.deth.src_qp;
}

static void pair(struct insp_half *a, struct insp_half *b, const char *how)
{
	a->peer = b;
	b->peer = a;
	a->paired_by = how;
	b->paired_by = how;
	if (a->id < b->id) {
		a->is_first = true;
		b->is_first = false;
	} else {
		b->is_first = true;
		a->is_first = false;
	}
}

static struct insp_half *half_get(struct insp_state *s, const struct insp_frame *f)
{
	struct flow_key k, rk;
	struct insp_half **slot, *h;

	frame_key(f, &k);
	slot = table_slot(s, &k);
	h = *slot;
	if (h)
		return h;
	if (s->nhalves >= INSP_HALVES_MAX)
		return NULL;
	if ((s->nhalves + 1) * 2 > s->table_cap) {
		if (table_grow(s) < 0)
			return NULL;
		slot = table_slot(s, &k);
	}
	if (s->nhalves == s->halves_cap) {
		unsigned cap = s->halves_cap ? s->halves_cap * 2 : 64;
		struct insp_half **v = realloc(s->halves, cap * sizeof(*v));

		if (!v)
			return NULL;
		s->halves = v;
		s->halves_cap = cap;
	}
	h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	memcpy(h->src, k.src, 16);
	memcpy(h->dst, k.dst, 16);
	h->dqpn = k.dqpn;
	h->src_qp = k.src_qp;
	h->transport = 0xFF;
	h->id = s->nhalves;
	h->is_first = true;
	h->sport = f->sport;
	h->first_ts = f->ts_ns;
	if (s->want_series) /* NULL: drawn without it */
		h->series_bytes = calloc(INSP_SERIES_BINS, sizeof(*h->series_bytes));
	s->halves[s->nhalves++] = h;
	*slot = h;

	/* UD: the reverse direction is known exactly from the DETH */
	if (k.src_qp != INSP_QPN_UNKNOWN) {
		memcpy(rk.src, k.dst, 16);
		memcpy(rk.dst, k.src, 16);
		rk.dqpn = k.src_qp;
		rk.src_qp = k.dqpn;
		struct insp_half *r = *table_slot(s, &rk);
		if (r && !r->peer)
			pair(r, h, "UD source QP");
	}
	return h;
}

/* ------------------------------------------------------------------------ */
/* events                                                                    */

static struct insp_event *event_add(struct insp_state *s, const struct insp_frame *f,
				    enum insp_event_kind kind, struct insp_half *h, bool violation)
{
	struct insp_event *e;

	if (violation)
		s->violations++;
	if (s->nevents >= INSP_EVENTS_MAX) {
		s->events_dropped++;
		return NULL;
	}
	e = &s->events[s->nevents++];
	memset(e, 0, sizeof(*e));
	e->frame = f ? f->index : 0;
	e->file = f ? f->file_no : 0;
	e->kind = (uint8_t)kind;
	e->violation = violation;
	e->half = h;
	e->psn = f ? f->psn : 0;
	return e;
}

/* ------------------------------------------------------------------------ */
/* time series (--plot)                                                      */

static void bytes_halve(uint64_t *bytes)
{
	if (!bytes)
		return;
	for (unsigned i = 0; i < INSP_SERIES_BINS / 2; i++)
		bytes[i] = bytes[2 * i] + bytes[2 * i + 1];
	memset(bytes + INSP_SERIES_BINS / 2, 0, INSP_SERIES_BINS / 2 * sizeof(*bytes));
}

static void series_halve(struct insp_series *x)
{
	if (!x)
		return;
	bytes_halve(x->bytes);
	for (unsigned i = 0; i < INSP_SERIES_BINS / 2; i++) {
		unsigned a = 2 * i, b = 2 * i + 1;

		x->lat_sum[i] = x->lat_sum[a] + x->lat_sum[b];
		x->lat_n[i] = x->lat_n[a] + x->lat_n[b];
		x->lat_max[i] = x->lat_max[a] > x->lat_max[b] ? x->lat_max[a] : x->lat_max[b];
	}
	memset(x->lat_sum + INSP_SERIES_BINS / 2, 0, sizeof(x->lat_sum) / 2);
	memset(x->lat_n + INSP_SERIES_BINS / 2, 0, sizeof(x->lat_n) / 2);
	memset(x->lat_max + INSP_SERIES_BINS / 2, 0, sizeof(x->lat_max) / 2);
}

/* Bin of time t; widens every series (doubling the bin) until t fits. */
static int series_bin(struct insp_state *s, uint64_t t)
{
	if (!s->want_series)
		return -1;
	if (!s->series_bin_ns) {
		s->series_t0 = t;
		s->series_bin_ns = 1000; /* 1 us to start with */
	}
	if (t < s->series_t0)
		return 0;
	while ((t - s->series_t0) / s->series_bin_ns >= INSP_SERIES_BINS) {
		series_halve(s->total_series);
		for (unsigned i = 0; i < s->nhalves; i++)
			bytes_halve(s->halves[i]->series_bytes);
		s->series_bin_ns *= 2;
	}
	return (int)((t - s->series_t0) / s->series_bin_ns);
}

static void series_bytes(struct insp_state *s, struct insp_half *h, uint64_t t, uint64_t bytes)
{
	int b = series_bin(s, t);

	if (b < 0)
		return;
	s->total_series->bytes[b] += bytes;
	if (h->series_bytes)
		h->series_bytes[b] += bytes;
}

/* Latency is drawn for all traffic together: only the total series has it. */
static void series_latency(struct insp_state *s, uint64_t t, uint64_t lat)
{
	int b = series_bin(s, t);
	struct insp_series *x = s->total_series;

	if (b < 0)
		return;
	x->lat_sum[b] += lat;
	x->lat_n[b]++;
	if (lat > x->lat_max[b])
		x->lat_max[b] = lat;
}

/* ------------------------------------------------------------------------ */
/* messages                                                                  */

static struct insp_msg *ring_at(struct insp_half *h, unsigned i)
{
	return &h->ring[(h->ring_head + i) % h->ring_cap];
}

static struct insp_msg *ring_tail(struct insp_half *h)
{
	return h->ring_len ? ring_at(h, h->ring_len - 1) : NULL;
}

static void ring_pop(struct insp_half *h)
{
	h->ring_head = (h->ring_head + 1) % h->ring_cap;
	h->ring_len--;
}

static struct insp_msg *ring_push(struct insp_half *h)
{
	if (h->ring_len == h->ring_cap) {
		if (h->ring_cap < INSP_RING_MAX) {
			unsigned cap = h->ring_cap ? h->ring_cap * 2 : INSP_RING_MIN;
			struct insp_msg *r = malloc(cap * sizeof(*r));

			if (r) {
				for (unsigned i = 0; i < h->ring_len; i++)
					r[i] = *ring_at(h, i);
				free(h->ring);
				h->ring = r;
				h->ring_cap = cap;
				h->ring_head = 0;
			}
		}
		if (h->ring_len == h->ring_cap) {
			if (!h->ring_cap)
				return NULL;
			/* full: forget the oldest, it can no longer be timed */
			ring_pop(h);
			h->msgs_untracked++;
		}
	}
	h->ring_len++;
	memset(ring_tail(h), 0, sizeof(struct insp_msg));
	return ring_tail(h);
}

static enum insp_msg_kind msg_kind(uint16_t flags)
{
	if (flags & ROCE_OPF_WRITE)
		return INSP_MSG_WRITE;
	if (flags & ROCE_OPF_READ)
		return INSP_MSG_READ;
	if (flags & ROCE_OPF_ATOMIC)
		return INSP_MSG_ATOMIC;
	return INSP_MSG_SEND;
}

static void msg_done(struct insp_state *s, struct insp_half *h, const struct insp_msg *m,
		     uint64_t t)
{
	uint64_t lat = t >= m->t_last ? t - m->t_last : 0;

	h->msgs_completed++;
	if (!h->lat)
		h->lat = calloc(1, sizeof(*h->lat));
	if (h->lat)
		insp_hist_add(h->lat, lat);
	series_latency(s, t, lat);
}

/* Count a message once its last packet is seen (UC, UD: nothing completes it on the wire). */
static void msg_count(struct insp_half *h, enum insp_msg_kind kind, uint64_t bytes)
{
	h->msgs[kind]++;
	h->msg_bytes[kind] += bytes;
}

/*
 * A new request packet (first sighting of its PSN at the head of the
 * stream) builds messages: FIRST/ONLY opens one, LAST/ONLY ends it. A READ
 * or an atomic is one request packet. RC messages wait in the ring for the
 * response that completes them; UC ones are only counted.
 */
static void msg_request(struct insp_half *h, const struct insp_frame *f, bool reliable)
{
	const struct roce_opcode_info *op = f->pkt.op;
	enum insp_msg_kind kind = msg_kind(op->flags);
	bool single = kind == INSP_MSG_READ || kind == INSP_MSG_ATOMIC;
	bool first = single || (op->flags & ROCE_OPF_FIRST);
	bool last = single || (op->flags & ROCE_OPF_LAST);
	uint64_t bytes = f->pkt.payload_len;
	struct insp_msg *m;

	if (kind == INSP_MSG_READ)
		bytes = f->pkt.reth.dma_len;
	else if (kind == INSP_MSG_ATOMIC)
		bytes = 8;

	if (!reliable) {
		/* UC: FIRST..LAST in order, counted at the end, never completed on the wire */
		h->uc_open_bytes = first ? bytes : h->uc_open_bytes + bytes;
		h->uc_open = !last;
		if (last)
			msg_count(h, kind, h->uc_open_bytes);
		return;
	}
	m = ring_tail(h);
	if (!m || m->ended || first) {
		if (m && !m->ended) {
			/* a FIRST while the previous never ended: count it as it is; its
			 * missing end may still come in a gap (msg_fill) */
			m->ended = true;
			m->partial_end = true;
			m->t_last = f->ts_ns;
			msg_count(h, m->kind, m->bytes);
		}
		m = ring_push(h);
		if (!m)
			return;
		m->partial_start = !first;
		m->kind = (uint8_t)kind;
		m->start_psn = f->psn;
	}
	m->end_psn = f->psn;
	m->bytes += bytes;
	if (last) {
		m->ended = true;
		m->t_last = f->ts_ns;
		msg_count(h, kind, m->bytes);
	}
}

/* Keep the ring in PSN order after a push at the tail (a late message). */
static void ring_sort_tail(struct insp_half *h)
{
	for (unsigned i = h->ring_len - 1; i > 0; i--) {
		struct insp_msg *a = ring_at(h, i - 1), *b = ring_at(h, i), t;

		if (roce_psn_cmp(a->start_psn, b->start_psn) <= 0)
			return;
		t = *a;
		*a = *b;
		*b = t;
	}
}

/*
 * A late or retransmitted packet fills a PSN that was missing: add its
 * bytes to the message holding it, or, if it is a whole message of its own
 * (ONLY, READ, atomic) that nobody saw before, count and track it.
 */
static void msg_fill(struct insp_half *h, const struct insp_frame *f)
{
	const struct roce_opcode_info *op = f->pkt.op;
	enum insp_msg_kind kind = msg_kind(op->flags);
	struct insp_msg *m;

	for (unsigned i = 0; i < h->ring_len; i++) {
		m = ring_at(h, i);
		if (roce_psn_cmp(f->psn, m->start_psn) >= 0 &&
		    roce_psn_cmp(f->psn, m->end_psn) <= 0) {
			if (m->kind != INSP_MSG_READ && m->kind != INSP_MSG_ATOMIC) {
				m->bytes += f->pkt.payload_len;
				h->msg_bytes[m->kind] += m->ended ? f->pkt.payload_len : 0;
			}
			return;
		}
		/* the missing FIRST/MIDDLE of a message seen from its middle on */
		if (m->partial_start && !(op->flags & ROCE_OPF_LAST) &&
		    f->psn == roce_psn_add(m->start_psn, ROCE_PSN_MASK)) {
			m->start_psn = f->psn;
			m->partial_start = !(op->flags & ROCE_OPF_FIRST);
			m->bytes += f->pkt.payload_len;
			h->msg_bytes[m->kind] += m->ended ? f->pkt.payload_len : 0;
			return;
		}
		/* the missing MIDDLE/LAST of a message the next FIRST cut short */
		if (m->partial_end && !(op->flags & ROCE_OPF_FIRST) &&
		    f->psn == roce_psn_add(m->end_psn, 1)) {
			m->end_psn = f->psn;
			m->partial_end = !(op->flags & ROCE_OPF_LAST);
			if (op->flags & ROCE_OPF_LAST)
				m->t_last = f->ts_ns;
			m->bytes += f->pkt.payload_len;
			h->msg_bytes[m->kind] += f->pkt.payload_len;
			return;
		}
	}
	if (op->transport != ROCE_TRANSPORT_RC) {
		if (op->flags & ROCE_OPF_LAST)
			msg_count(h, kind, f->pkt.payload_len);
		return;
	}
	if (!(op->flags & ROCE_OPF_LAST) && kind != INSP_MSG_READ && kind != INSP_MSG_ATOMIC)
		return; /* the rest of a message whose start is not tracked */
	m = ring_push(h);
	if (!m)
		return;
	m->kind = (uint8_t)kind;
	m->start_psn = m->end_psn = f->psn;
	m->ended = true;
	m->bytes = kind == INSP_MSG_READ ? f->pkt.reth.dma_len
					 : (kind == INSP_MSG_ATOMIC ? 8 : f->pkt.payload_len);
	m->t_last = f->ts_ns;
	msg_count(h, kind, m->bytes);
	ring_sort_tail(h);
}

/*
 * Response with PSN p from the responder: complete the requests it
 * acknowledges. ACK/ATOMIC ACK/READ RESPONSE LAST|ONLY cover up to p; a NAK
 * or a READ RESPONSE FIRST|MIDDLE covers what is before p (IBA 9.7.5.1.1:
 * responses acknowledge every earlier request implicitly).
 */
static void msg_complete(struct insp_state *s, struct insp_half *q, uint32_t p, bool inclusive,
			 bool read_last, uint64_t t)
{
	while (q->ring_len) {
		struct insp_msg *m = ring_at(q, 0);

		if (m->kind == INSP_MSG_READ) {
			int c = roce_psn_cmp(p, m->start_psn);

			/* its LAST/ONLY response or a later ACK ends it; FIRST/MIDDLE and NAKs do
			 * not */
			if (c < 0 || !(read_last || (inclusive && c > 0)))
				return;
			m->end_psn = p;
		} else {
			/* a message cut short by the next FIRST ends at least one PSN later */
			uint32_t end = m->partial_end ? roce_psn_add(m->end_psn, 1) : m->end_psn;

			if (!m->ended)
				return;
			if (inclusive ? roce_psn_cmp(end, p) > 0 : roce_psn_cmp(end, p) >= 0)
				return;
		}
		msg_done(s, q, m, t);
		ring_pop(q);
	}
}

/* ------------------------------------------------------------------------ */
/* gaps                                                                      */

static void gap_open(struct insp_state *s, struct insp_half *h, const struct insp_frame *f,
		     uint32_t first, uint32_t last)
{
	struct insp_event *e;
	uint32_t n = (uint32_t)roce_psn_diff(last, first) + 1;

	h->gaps_seen++;
	h->psn_missing += n;
	e = event_add(s, f, INSP_EV_GAP, h, false);
	if (e) {
		e->psn = first;
		e->psn2 = last;
	}
	if (h->ngaps == INSP_GAPS_MAX) {
		/* forget the oldest: it can no longer be checked */
		h->gaps_untracked++;
		memmove(h->gaps, h->gaps + 1, (INSP_GAPS_MAX - 1) * sizeof(h->gaps[0]));
		h->ngaps--;
	}
	h->gaps[h->ngaps++] = (struct insp_gap){
	    .first = first, .last = last, .frame = f->index, .file = f->file_no, .ts = f->ts_ns};
}

/* Index of the gap holding psn, or -1. */
static int gap_find(const struct insp_half *h, uint32_t psn)
{
	for (unsigned i = 0; i < h->ngaps; i++)
		if (roce_psn_cmp(psn, h->gaps[i].first) >= 0 &&
		    roce_psn_cmp(psn, h->gaps[i].last) <= 0)
			return (int)i;
	return -1;
}

static void gap_fill(struct insp_half *h, unsigned i, uint32_t psn)
{
	struct insp_gap *g = &h->gaps[i];

	h->psn_missing--;
	if (g->first == psn && g->last == psn) {
		memmove(g, g + 1, (h->ngaps - i - 1) * sizeof(*g));
		h->ngaps--;
	} else if (g->first == psn) {
		g->first = roce_psn_add(psn, 1);
	} else if (g->last == psn) {
		g->last = roce_psn_add(psn, ROCE_PSN_MASK); /* psn - 1 */
	} else if (h->ngaps < INSP_GAPS_MAX) {
		/* split */
		memmove(g + 2, g + 1, (h->ngaps - i - 1) * sizeof(*g));
		g[1] = *g;
		g[1].first = roce_psn_add(psn, 1);
		g->last = roce_psn_add(psn, ROCE_PSN_MASK);
		h->ngaps++;
	} else {
		g->last = roce_psn_add(psn, ROCE_PSN_MASK); /* the rest is forgotten */
		h->gaps_untracked++;
	}
}

/* ------------------------------------------------------------------------ */
/* requests                                                                  */

static void retx_start(struct insp_half *h, uint32_t p)
{
	h->retx_next = roce_psn_add(p, 1);
	h->retx_end = h->req_next;
	h->nak_pending = false;
}

/* AckReq of the last sighting of the recent PSNs (the last 256 before the head). */
static void ackreq_note(struct insp_half *h, uint32_t p, bool ackreq)
{
	uint64_t bit = 1ull << (p & 63);

	if (ackreq)
		h->ackreq_bits[(p >> 6) & 3] |= bit;
	else
		h->ackreq_bits[(p >> 6) & 3] &= ~bit;
}

/*
 * p (behind the head) differs in AckReq from its last sighting: the network
 * copies a packet as it is, so this one was built again by the sender (a
 * stall probe asks for the ACK; a go-back-N after it does not).
 */
static bool ackreq_changed(const struct insp_half *h, const struct insp_frame *f)
{
	uint32_t p = f->psn;
	bool before;

	if (!f->headers_ok || roce_psn_diff(h->req_next, p) > 256 || gap_find(h, p) >= 0)
		return false;
	before = (h->ackreq_bits[(p >> 6) & 3] >> (p & 63)) & 1;
	return before != f->pkt.ackreq;
}

static unsigned request_packet(struct insp_state *s, struct insp_half *h,
			       const struct insp_frame *f)
{
	const struct roce_opcode_info *op = f->pkt.op;
	uint32_t p = f->psn;
	bool reliable = op->transport == ROCE_TRANSPORT_RC;
	unsigned notes = 0;
	uint64_t silence, ref;
	bool since_copy;
	int cause = -1;
	int32_t d;
	int gi;

	h->req_pkts++;
	if (op->transport == ROCE_TRANSPORT_UD) {
		/* PSNs of a UD QP are shared by all its destinations: no sequence here */
		msg_count(h, INSP_MSG_SEND, f->pkt.payload_len);
		series_bytes(s, h, f->ts_ns, f->pkt.payload_len);
		return 0;
	}
	if (!h->req_seen) {
		h->req_seen = true;
		h->req_first = p;
		h->req_next = p;
		h->oldest_unacked = p;
		h->retx_next = h->retx_end = 0;
	}

	/* a go-back-N episode continues while the PSNs follow on */
	if (h->retx_next != h->retx_end) {
		if (p == h->retx_next) {
			h->retransmitted++;
			h->retx_next = roce_psn_add(p, 1);
			/* A NAK that came during the episode is answered by the episode's
			 * first packet at or after its PSN: a later copy of these PSNs is
			 * not a resend it asked for (a network copy of the resend) */
			if (h->nak_pending && roce_psn_cmp(p, h->nak_psn) >= 0)
				h->nak_pending = false;
			if (h->retx_ev) {
				h->retx_ev->value++;
				h->retx_ev->psn2 = p;
			}
			ackreq_note(h, p, f->headers_ok && f->pkt.ackreq);
			gi = gap_find(h, p);
			if (gi >= 0) {
				gap_fill(h, (unsigned)gi, p);
				msg_fill(h, f);
			}
			h->last_req_ts = f->ts_ns;
			h->last_req_psn = p;
			h->last_req_valid = true;
			return INSP_NOTE_RETX;
		}
		h->retx_next = h->retx_end = 0;
		h->retx_ev = NULL;
	}

	d = roce_psn_diff(p, h->req_next);
	/* a READ occupies one PSN per response packet: its span is not a gap */
	if (d > 0 && h->read_span && roce_psn_cmp(p, roce_psn_add(h->read_span_end, 1)) <= 0)
		d = 0;
	if (d >= 0) {
		if (d > 0) {
			notes |= INSP_NOTE_OOS;
			h->out_of_seq++;
			gap_open(s, h, f, h->req_next, roce_psn_add(p, ROCE_PSN_MASK));
		}
		ackreq_note(h, p, f->headers_ok && f->pkt.ackreq);
		h->head_ts = f->ts_ns;
		h->read_span = false;
		h->req_next = roce_psn_add(p, 1);
		if (op->flags & ROCE_OPF_READ) {
			uint32_t pmtu = s->pmtu_seen ? s->pmtu_seen : INSP_PMTU_MIN;
			uint32_t n = (f->pkt.reth.dma_len + pmtu - 1) / pmtu;

			if (n > 1) {
				h->read_span = true;
				h->read_span_end = roce_psn_add(p, n - 1);
			}
		}
		msg_request(h, f, reliable);
		series_bytes(s, h, f->ts_ns, f->pkt.payload_len);
		h->last_req_ts = f->ts_ns;
		h->last_req_psn = p;
		h->last_req_valid = true;
		return notes;
	}

	/* Behind the head: the sender's resend, a late packet, or the network's copy. */
	gi = gap_find(h, p);
	/* A copy the network makes follows its original within microseconds.
	 * The request before this one is p's original when it has the same
	 * PSN; otherwise p's latest copy came no later than the newest request. */
	since_copy = h->last_req_valid && p == h->last_req_psn;
	ref = since_copy ? h->last_req_ts : h->head_ts;
	silence = f->ts_ns > ref ? f->ts_ns - ref : 0;
	if (h->nak_pending && roce_psn_cmp(p, h->nak_psn) >= 0)
		/* go-back-N restarts at the NAKed PSN; "at or after" covers a resend
		 * whose first packets are lost again before the capture point */
		cause = h->nak_rnr ? INSP_RESEND_RNR : INSP_RESEND_NAK;
	else if (ackreq_changed(h, f))
		cause = INSP_RESEND_ACKREQ;
	else if (silence >= INSP_RESEND_SILENCE_NS)
		cause = INSP_RESEND_SILENCE;
	else if (gi < 0 && !since_copy)
		/* the network's copy follows its original: a step back from the
		 * request before it is the sender going back (a receiver that reads
		 * a burst stamps the sender's replays microseconds apart) */
		cause = INSP_RESEND_REPLAY;
	if (cause >= 0) {
		struct insp_event *e;

		h->retransmitted++;
		retx_start(h, p);
		notes = INSP_NOTE_RETX;
		e = event_add(s, f, INSP_EV_RETRANSMIT, h, false);
		h->retx_ev = e;
		if (e) {
			e->psn2 = p;
			e->value = 1; /* packets resent in this episode, counted as they come */
			e->cause = (uint8_t)cause;
			e->acked = roce_psn_cmp(p, h->oldest_unacked) < 0;
			e->ackreq = f->headers_ok && f->pkt.ackreq;
			e->ns = silence;
			e->since_copy = since_copy;
		}
	} else if (gi >= 0) {
		h->out_of_seq++;
		h->reordered++;
		notes = INSP_NOTE_OOS | INSP_NOTE_LATE;
		event_add(s, f, INSP_EV_REORDERED, h, false);
	} else {
		h->duplicates++;
		notes = INSP_NOTE_DUP;
		event_add(s, f, INSP_EV_DUPLICATE, h, false);
	}
	if (gi >= 0) {
		gap_fill(h, (unsigned)gi, p);
		msg_fill(h, f);
	}
	if (roce_psn_diff(h->req_next, p) <= 256)
		ackreq_note(h, p, f->headers_ok && f->pkt.ackreq);
	h->last_req_ts = f->ts_ns;
	h->last_req_psn = p;
	h->last_req_valid = true;
	return notes;
}

/* ------------------------------------------------------------------------ */
/* responses                                                                 */

/* Is psn in the window of requests a half has sent and not seen acknowledged? */
static bool in_window(const struct insp_half *q, uint32_t psn)
{
	uint32_t hi;

	if (!q->req_seen)
		return false;
	hi = q->read_span ? q->read_span_end : roce_psn_add(q->req_next, ROCE_PSN_MASK);
	return roce_psn_cmp(psn, q->req_first) >= 0 && roce_psn_cmp(psn, hi) <= 0;
}

/* Find the request half a response in r answers (see the pairing rule on top). */
static struct insp_half *pair_by_response(struct insp_state *s, struct insp_half *r,
					  const struct insp_frame *f)
{
	struct insp_half *best = NULL;
	int best_score = -1;

	for (unsigned i = 0; i < s->nhalves; i++) {
		struct insp_half *q = s->halves[i];
		int score;

		if (q->peer || q == r || q->src_qp != INSP_QPN_UNKNOWN)
			continue;
		if (memcmp(q->src, r->dst, 16) || memcmp(q->dst, r->src, 16))
			continue;
		if (!in_window(q, f->psn))
			continue;
		score =
		    (q->sport == f->sport ? 2 : 0) + (roce_psn_cmp(f->psn, q->oldest_unacked) >= 0);
		if (score > best_score ||
		    (score == best_score && best && q->last_req_ts > best->last_req_ts)) {
			best = q;
			best_score = score;
		}
	}
	if (best)
		pair(r, best, "response PSN");
	return best;
}

/*
 * A positive response up to PSN `upto` means the responder received every
 * request up to it (9.7.5.1: it acknowledges in order only). A gap it covers
 * without a retransmission was lost by the capture, not by the network: no
 * violation, counted apart.
 */
static void gaps_received(struct insp_state *s, struct insp_half *q, uint32_t upto,
			  const struct insp_frame *f)
{
	unsigned i = 0;

	while (i < q->ngaps) {
		struct insp_gap *g = &q->gaps[i];
		uint32_t last, n;
		struct insp_event *e;

		if (roce_psn_cmp(g->first, upto) > 0) {
			i++;
			continue;
		}
		last = roce_psn_cmp(g->last, upto) <= 0 ? g->last : upto;
		n = (uint32_t)roce_psn_diff(last, g->first) + 1;
		q->capture_lost += n;
		q->psn_missing -= n;
		e = event_add(s, f, INSP_EV_CAPTURE_LOSS, q, false);
		if (e) {
			e->psn = g->first;
			e->psn2 = last;
		}
		if (last == g->last) {
			memmove(g, g + 1, (q->ngaps - i - 1) * sizeof(*g));
			q->ngaps--;
		} else {
			g->first = roce_psn_add(last, 1);
			i++;
		}
	}
}

/*
 * A response that answers no request the capture holds. It is a violation
 * when the requester's requests are in the capture and the PSN is ahead of
 * all of them: the responder answers something never sent. Before the first
 * request, or with no request direction found yet, the request may predate
 * the capture or travel outside it (a one-way mirror): counted and shown,
 * judged at the end (insp_flow_finish).
 */
static unsigned unmatched_response(struct insp_state *s, struct insp_half *r, struct insp_half *q,
				   const struct insp_frame *f)
{
	bool ahead = q && q->req_seen && roce_psn_cmp(f->psn, q->req_first) >= 0;

	r->unmatched_responses++;
	if (ahead) {
		event_add(s, f, INSP_EV_NO_REQUEST, r, true);
	} else if (!r->unmatched_frame) {
		r->unmatched_frame = f->index;
		r->unmatched_file = f->file_no;
		r->unmatched_psn = f->psn;
		r->unmatched_ts = f->ts_ns;
	}
	return INSP_NOTE_NO_REQUEST;
}

static unsigned response_packet(struct insp_state *s, struct insp_half *r,
				const struct insp_frame *f)
{
	const struct roce_opcode_info *op = f->pkt.op;
	struct insp_half *q = r->peer;
	uint32_t p = f->psn;
	uint8_t syn = f->pkt.aeth.syndrome;
	bool has_aeth = (op->hdrs & ROCE_HDR_AETH) && f->headers_ok;
	unsigned type = has_aeth ? ROCE_AETH_TYPE(syn) : ROCE_AETH_ACK;

	if (op->flags & ROCE_OPF_READ) {
		r->read_resps++;
		series_bytes(s, r, f->ts_ns, f->pkt.payload_len);
	} else if (op->flags & ROCE_OPF_ATOMIC) {
		r->atomic_acks++;
	}
	if (has_aeth && (op->flags & ROCE_OPF_ACK)) {
		if (r->last_ack_valid && r->last_ack_psn == p && r->last_ack_syndrome == syn &&
		    type == ROCE_AETH_ACK)
			r->repeated_acks++;
		r->last_ack_valid = true;
		r->last_ack_psn = p;
		r->last_ack_syndrome = syn;
		if (type == ROCE_AETH_ACK) {
			r->acks++;
		} else if (type == ROCE_AETH_RNR_NAK) {
			r->rnr_naks++;
			r->rnr_timer[ROCE_AETH_VALUE(syn)]++;
			struct insp_event *e = event_add(s, f, INSP_EV_RNR_NAK, r, false);

			if (e)
				e->value = ROCE_AETH_VALUE(syn);
		} else if (type == ROCE_AETH_NAK) {
			unsigned code = ROCE_AETH_VALUE(syn);

			r->naks[code < INSP_NAK_CODES ? code : INSP_NAK_CODES]++;
			struct insp_event *e = event_add(s, f, INSP_EV_NAK, r, false);

			if (e)
				e->value = code;
		}
	}

	/* Searching every half is linear: a capture of responses only (the
	 * requests filtered out) would make it quadratic, so keep trying on
	 * the first responses and then on one in 1024. */
	/* A QP connected to itself (loopback: same GID both ends, DQPN its own
	 * QPN) sends its requests and its responses in one half. */
	if (!q && (r->self_connected ||
		   (!memcmp(r->src, r->dst, 16) && r->req_seen && in_window(r, p)))) {
		r->self_connected = true;
		q = r;
	}
	if (!q && (r->pair_tries < 16 || r->pair_tries % 1024 == 0))
		q = pair_by_response(s, r, f);
	if (!r->peer && !r->self_connected)
		r->pair_tries++;
	if (!q || !q->req_seen || !in_window(q, p)) {
		/* A NAK names the PSN the responder expects: it may be the next one */
		if (q && q->req_seen && type != ROCE_AETH_ACK &&
		    roce_psn_cmp(p, q->req_next) == 0) {
			/* fine: handled below */
		} else {
			return unmatched_response(s, r, q, f);
		}
	}

	if (type == ROCE_AETH_NAK || type == ROCE_AETH_RNR_NAK) {
		/* C9-96, 9.7.5.2: a NAK acknowledges what precedes its PSN; the requester resends
		 * from it */
		if (roce_psn_cmp(p, q->oldest_unacked) > 0)
			q->oldest_unacked = p;
		q->nak_pending = true;
		q->nak_rnr = type == ROCE_AETH_RNR_NAK;
		q->nak_psn = p;
		if (type == ROCE_AETH_NAK && ROCE_AETH_VALUE(syn) == ROCE_NAK_PSN_SEQ_ERR) {
			int gi = gap_find(q, p);

			if (gi >= 0)
				q->gaps[gi].naked = true;
		}
		msg_complete(s, q, p, false, false, f->ts_ns);
		return 0;
	}
	if (roce_psn_cmp(roce_psn_add(p, 1), q->oldest_unacked) > 0)
		q->oldest_unacked = roce_psn_add(p, 1);
	if ((op->flags & ROCE_OPF_READ) && !(op->flags & ROCE_OPF_LAST)) {
		/* READ RESPONSE FIRST/MIDDLE: earlier requests are done, this read is not */
		q->oldest_unacked = p;
		gaps_received(s, q, roce_psn_add(p, ROCE_PSN_MASK), f);
		msg_complete(s, q, p, false, false, f->ts_ns);
		return 0;
	}
	gaps_received(s, q, (op->flags & ROCE_OPF_READ) ? roce_psn_add(p, ROCE_PSN_MASK) : p, f);
	msg_complete(s, q, p, true, (op->flags & ROCE_OPF_READ) != 0, f->ts_ns);
	return 0;
}

/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* capture point                                                             */

static bool cp_has(const struct insp_capture_point *cp, const uint8_t gid[16])
{
	for (unsigned i = 0; i < cp->n; i++)
		if (!memcmp(cp->gids[i], gid, 16))
			return true;
	return false;
}

const char *insp_latency_point(const struct insp_state *s, const struct insp_half *h)
{
	/* h's requests go from h->src to h->dst; the responses come back */
	if (!s->cp.how || h->self_connected)
		return "unknown";
	if (cp_has(&s->cp, h->src))
		return "requester";
	if (cp_has(&s->cp, h->dst))
		return "responder";
	return "unknown";
}

/* A Linux cooked capture marks what the capturing host sent: its addresses. */
static void cp_learn_outgoing(struct insp_state *s, const struct insp_frame *f)
{
	struct insp_capture_point *cp = &s->cp;

	if (cp->how && strcmp(cp->how, "outgoing frames"))
		return; /* rocemu's record says it better */
	cp->how = "outgoing frames";
	if (!cp_has(cp, f->src_gid) && cp->n < INSP_CP_MAX)
		memcpy(cp->gids[cp->n++], f->src_gid, 16);
}

/*
 * A frame rocemu's fault injector dropped, as rocemu recorded it: counted in
 * its direction and shown (--packets, --ladder), but no part of the
 * sequence: the peer never saw it.
 */
static void fault_lost(struct insp_state *s, const struct insp_frame *f)
{
	struct insp_half *h;
	struct insp_event *e;

	if (!f->has_bth || (f->cls != INSP_ROCE && f->cls != INSP_ROCE_MALFORMED))
		return;
	h = half_get(s, f);
	if (!h) {
		s->flow_table_full++;
		return;
	}
	h->fault_lost++;
	s->last_half = h;
	s->last_notes = f->annot == INSP_ANNOT_LOST_RX ? INSP_NOTE_LOST_RX : INSP_NOTE_LOST_TX;
	e = event_add(s, f, INSP_EV_FAULT_LOST, h, false);
	if (e)
		e->value = f->annot;
	/* A request lost on transmit was sent: its PSN is in the sender's
	 * sequence, and sending it again is a resend. */
	if (f->annot == INSP_ANNOT_LOST_TX && f->pkt.op && f->icrc != INSP_ICRC_BAD &&
	    (f->pkt.op->flags & ROCE_OPF_REQUEST) && !(f->pkt.op->flags & ROCE_OPF_CNP)) {
		if (h->transport == 0xFF)
			h->transport = f->pkt.op->transport;
		s->last_notes |= request_packet(s, h, f);
	}
}

void insp_flow_packet(struct insp_state *s, const struct insp_frame *f)
{
	struct insp_half *h = NULL;
	const struct roce_opcode_info *op;
	struct insp_event *e;

	s->last_notes = 0;
	s->last_half = NULL;
	s->frames++;
	s->wire_bytes += f->wirelen;
	if (!s->ts_valid || f->ts_ns < s->first_ts)
		s->first_ts = f->ts_ns;
	if (!s->ts_valid || f->ts_ns > s->last_ts)
		s->last_ts = f->ts_ns;
	s->ts_valid = true;
	if (f->annot == INSP_ANNOT_CAPTURE_POINT) {
		s->frames_by_class[INSP_RECORD]++;
		s->cp = f->cp;
		return;
	}
	if (f->annot == INSP_ANNOT_LOST_TX || f->annot == INSP_ANNOT_LOST_RX) {
		s->frames_by_class[INSP_LOST]++;
		fault_lost(s, f);
		return;
	}
	s->frames_by_class[f->cls]++;
	if (f->truncated)
		s->truncated_frames++;
	if (f->cls != INSP_ROCE && f->cls != INSP_ROCE_MALFORMED)
		return;
	if (f->truncated)
		s->roce_truncated++;
	s->parse_status[f->status < ROCE_PARSE_STATUS_COUNT ? f->status : 0]++;

	if (f->has_bth) {
		h = half_get(s, f);
		if (!h)
			s->flow_table_full++;
	}
	if (f->outgoing == 1 && f->cls == INSP_ROCE)
		cp_learn_outgoing(s, f);
	s->last_half = h;
	if (h) {
		h->pkts++;
		h->wire_bytes += f->wirelen;
		insp_ops_add(&h->ops, f->opcode);
		h->last_ts = f->ts_ns;
		if (f->sport != h->sport)
			h->sport_varies = true;
		if ((f->tclass & 0x3) == 0x3)
			h->ecn_ce++;
	}

	if (f->cls == INSP_ROCE_MALFORMED) {
		/* the frame is on the wire as it is: the capture did not cut it */
		if (h)
			h->malformed++;
		e = event_add(s, f, INSP_EV_MALFORMED, h, true);
		if (e)
			e->value = f->status;
		return;
	}
	if (f->truncated) {
		if (h)
			h->truncated++;
		e = event_add(s, f, INSP_EV_TRUNCATED, h, false);
		if (e) {
			e->value = f->caplen;
			e->psn2 = f->wirelen;
		}
	}
	/* a frame cut by the snaplen still has its BTH: sequence analysis works,
	 * extension header fields past the cut read as zero */
	if (!h || !f->pkt.op)
		return;

	op = f->pkt.op;
	if (f->pkt.fecn)
		h->fecn++;
	if (f->pkt.becn)
		h->becn++;
	h->payload_bytes += f->pkt.payload_len;
	if (f->icrc == INSP_ICRC_BAD) {
		/* the receiver drops it: for the sequence it is as if lost */
		h->icrc_errors++;
		event_add(s, f, INSP_EV_ICRC, h, true);
		return;
	}
	if (op->flags & ROCE_OPF_CNP) {
		h->cnps++;
		return;
	}
	if (h->transport == 0xFF)
		h->transport = op->transport;
	if ((op->flags & (ROCE_OPF_FIRST | ROCE_OPF_MIDDLE)) == ROCE_OPF_MIDDLE ||
	    ((op->flags & ROCE_OPF_ONLY) == ROCE_OPF_FIRST)) {
		/* FIRST and MIDDLE packets are exactly one path MTU long */
		if (f->pkt.payload_len > s->pmtu_seen)
			s->pmtu_seen = f->pkt.payload_len;
	}
	if (op->flags & ROCE_OPF_REQUEST)
		s->last_notes = request_packet(s, h, f);
	else if (op->flags & ROCE_OPF_RESPONSE)
		s->last_notes = response_packet(s, h, f);
}

/* Order unpaired halves by host pair (either direction) and source port. */
static int leftover_cmp(const void *x, const void *y)
{
	const struct insp_half *a = *(const struct insp_half *const *)x;
	const struct insp_half *b = *(const struct insp_half *const *)y;
	const uint8_t *alo = memcmp(a->src, a->dst, 16) < 0 ? a->src : a->dst;
	const uint8_t *ahi = alo == a->src ? a->dst : a->src;
	const uint8_t *blo = memcmp(b->src, b->dst, 16) < 0 ? b->src : b->dst;
	const uint8_t *bhi = blo == b->src ? b->dst : b->src;
	int c = memcmp(alo, blo, 16);

	if (c)
		return c;
	c = memcmp(ahi, bhi, 16);
	if (c)
		return c;
	return (a->sport > b->sport) - (a->sport < b->sport);
}

/*
 * UC, or a capture with requests only: two unpaired halves in opposite
 * directions between the same hosts with the same constant UDP source port
 * pair when they are the only two such halves. Sorting keeps it O(n log n).
 */
static void pair_leftovers(struct insp_state *s)
{
	struct insp_half **v = malloc((s->nhalves + 1) * sizeof(*v));
	unsigned n = 0, i, j;

	if (!v)
		return;
	for (i = 0; i < s->nhalves; i++) {
		struct insp_half *h = s->halves[i];

		if (!h->peer && !h->self_connected && h->src_qp == INSP_QPN_UNKNOWN &&
		    !h->sport_varies && memcmp(h->src, h->dst, 16))
			v[n++] = h;
	}
	qsort(v, n, sizeof(*v), leftover_cmp);
	for (i = 0; i < n; i = j) {
		for (j = i + 1; j < n && !leftover_cmp(&v[i], &v[j]); j++)
			;
		if (j - i != 2 || !memcmp(v[i]->src, v[i + 1]->src, 16))
			continue;
		if (v[i]->transport != 0xFF && v[i + 1]->transport != 0xFF &&
		    v[i]->transport != v[i + 1]->transport)
			continue;
		pair(v[i], v[i + 1], "UDP source port");
	}
	free(v);
}

/*
 * Responses to a QP that sent no request in the capture are a violation when
 * the capture does see requests travel that way (between the same two
 * hosts, the other direction) from before the first such response; otherwise
 * the capture may simply not hold them, and they are only counted.
 */
static void judge_unmatched(struct insp_state *s)
{
	for (unsigned i = 0; i < s->nhalves; i++) {
		struct insp_half *r = s->halves[i];
		bool seen_way = false;
		struct insp_event *e;

		if (!r->unmatched_frame || r->self_connected)
			continue;
		for (unsigned j = 0; j < s->nhalves && !seen_way; j++) {
			const struct insp_half *q = s->halves[j];

			seen_way = q->req_seen && q->first_ts <= r->unmatched_ts &&
				   !memcmp(q->src, r->dst, 16) && !memcmp(q->dst, r->src, 16);
		}
		e = event_add(
		    s,
		    &(struct insp_frame){.index = r->unmatched_frame, .file_no = r->unmatched_file},
		    seen_way && !r->peer ? INSP_EV_NO_REQUEST : INSP_EV_UNANSWERED_BEFORE, r,
		    seen_way && !r->peer);
		if (e)
			e->psn = r->unmatched_psn;
	}
}

static int event_cmp(const void *x, const void *y)
{
	const struct insp_event *a = x, *b = y;

	if (a->file != b->file)
		return a->file < b->file ? -1 : 1;
	return (a->frame > b->frame) - (a->frame < b->frame);
}

/*
 * Events are stored as frames come, so in frame order; the ones made at the
 * end (unrepaired gaps, unanswered responses) are merged in where their
 * frame is, keeping the order of equal frames (stored first, then judged).
 */
static void events_merge_tail(struct insp_state *s, unsigned base)
{
	struct insp_event *m;
	unsigned i = 0, j = base, k = 0;

	if (base >= s->nevents)
		return;
	qsort(s->events + base, s->nevents - base, sizeof(*s->events), event_cmp);
	m = malloc(s->nevents * sizeof(*m));
	if (!m)
		return; /* left unmerged: still all there */
	while (i < base || j < s->nevents) {
		if (j >= s->nevents || (i < base && event_cmp(&s->events[i], &s->events[j]) <= 0))
			m[k++] = s->events[i++];
		else
			m[k++] = s->events[j++];
	}
	memcpy(s->events, m, s->nevents * sizeof(*m));
	free(m);
}

void insp_flow_finish(struct insp_state *s)
{
	unsigned base = s->nevents;

	pair_leftovers(s);
	judge_unmatched(s);
	for (unsigned i = 0; i < s->nhalves; i++) {
		struct insp_half *h = s->halves[i];

		for (unsigned g = 0; g < h->ngaps; g++) {
			struct insp_gap *gap = &h->gaps[g];
			struct insp_frame where = {.index = gap->frame, .file_no = gap->file};
			/* UC loses silently by design; RC must NAK or retransmit (9.7.5.1.2) */
			bool violation = h->transport == ROCE_TRANSPORT_RC && !gap->naked;
			struct insp_event *e;

			if (!violation && h->transport != ROCE_TRANSPORT_RC)
				continue;
			e = event_add(s, &where, INSP_EV_GAP_UNRECOVERED, h, violation);
			if (e) {
				e->psn = gap->first;
				e->psn2 = gap->last;
				e->value = gap->naked;
			}
		}
		h->msgs_incomplete += h->ring_len + (h->uc_open ? 1 : 0);
	}
	events_merge_tail(s, base);
}
