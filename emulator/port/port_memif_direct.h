/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to the memif link: the direct channel between two rocemu ends
 * (port_memif_direct.c), beside the PMD's connection. Each end builds its
 * frames in mbufs whose data lives in a shared-memory object of its own;
 * transmit hands (index, offset, length) descriptors to the peer over a ring
 * in that object and keeps the mbuf until the peer returns its index. The
 * receiver maps the peer's object (data: from a read-only descriptor),
 * checks every descriptor, wraps the buffer as an mbuf and gives it to the
 * receive path. No PMD copy either way: two copies per delivered byte
 * (application -> frame, frame -> application).
 *
 * The object (POSIX shm `/rocemu-md-<pid>-<seq>`): a header and the two
 * rings (page aligned), then the data area, n buffers of `elt` bytes.
 */
#ifndef ROCEMU_PORT_MEMIF_DIRECT_H
#define ROCEMU_PORT_MEMIF_DIRECT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <rte_mbuf.h>

#define MD_MAGIC   0x31444d52u /* "RMD1" */
#define MD_VERSION 1u
/* bounds a peer's header must keep */
#define MD_MAX_ELTS 65536u
#define MD_MAX_ELT  65536u

/* One frame handed over: the buffer's index in the area, where the frame
 * starts in it and how long it is. */
struct md_desc {
	uint32_t index;
	uint16_t off;
	uint16_t len;
};

/* The object's first page(s), shared by both ends: the owner writes the
 * fixed fields once before it offers the object, the descriptors and
 * desc_prod; the peer writes the returned indices and ret_prod. Neither
 * trusts what the other wrote. */
struct md_shared {
	uint32_t magic, version;
	uint32_t n_elts, elt_size, ring_size; /* ring_size: a power of two >= n_elts */
	uint32_t pad_;
	uint64_t data_off, data_len; /* the data area in the object */
	_Alignas(64) atomic_uint desc_prod;
	_Alignas(64) atomic_uint ret_prod;
	/* then struct md_desc desc[ring_size], uint32_t ret[ring_size] */
	_Alignas(64) struct md_desc desc[];
};

/* What a descriptor check says (memif_direct_check_desc). */
enum md_verdict {
	MD_OK,
	MD_BAD_INDEX, /* past the area's buffers */
	MD_BAD_RANGE, /* offset or length outside the buffer, or a runt */
	MD_HELD,      /* we hold that buffer already: an index given twice */
};

/* A descriptor against the peer's area (n buffers of elt bytes, held[i] set
 * while we hold buffer i): a pure function, fuzzed (tests/port). */
enum md_verdict memif_direct_check_desc(const struct md_desc *d, uint32_t n, uint32_t elt,
					const uint8_t *held);

/* A frame we may hand to the receive path without a copy: RoCEv2 (UDP
 * 4791 over IPv4 or IPv6, untagged). Others (ARP, ND, ICMP: their handlers
 * answer in place) are copied. */
bool memif_direct_is_roce(const uint8_t *frame, uint32_t len);

/* The peer's object as we see it (one mapping; a new one at each new
 * offer). Lives until our last mbuf of it is freed. */
struct md_peer;
/* Our own object and the view of the peer's. */
struct memif_direct;

struct rocemu_port;
struct memif_link;

/* Make our object and its pool (replacing port->pool, which nothing used
 * yet) of the same size: 0 or -errno with err. */
int memif_direct_create(struct rocemu_port *port, struct memif_link *l, char *err, size_t errlen);
/* Offer it in the bell page (after attach, a remap, a reset). */
void memif_direct_publish(struct rocemu_port *port);
/* Everything sent back to the pool, our gen bumped (the peer maps again):
 * a connection closed (engine lock held, the peer no longer touches it). */
void memif_direct_reset(struct rocemu_port *port, const char *why);
/* At close: no more offers, the name unlinked, frames still out taken
 * back. The object stays mapped until the port has freed its pool (at
 * close, right after; never at exit, where mbufs may outlive the port):
 * the next create or release unmaps it. */
void memif_direct_release(struct rocemu_port *port);
/* What the link does with its PMD's bursts this pass (memif_direct_step). */
enum md_pmd {
	MD_PMD_POLL,   /* call them: the channel does not carry everything */
	MD_PMD_DRAIN,  /* it does now: one more rx burst; nothing came, park */
	MD_PMD_PARKED, /* leave the PMD alone: a peer killed outright cannot hurt */
};
/* First in each pass (engine lock held, link not blocked): follow the
 * peer's offer, take back what it returned, and say what the PMD gets. */
enum md_pmd memif_direct_step(struct rocemu_port *port);
/* The drain's rx burst gave nothing: leave the PMD alone from now on
 * (until a new offer of either end, a new peer process or a reset). */
void memif_direct_park(struct rocemu_port *port);
/* The PMD is left alone now. */
bool memif_direct_parked(const struct memif_link *l);
/* The link's bursts (engine lock held, link not blocked; rx after
 * memif_direct_step in the same pass). */
uint16_t memif_direct_rx_burst(struct rocemu_port *port, struct rte_mbuf **pkts, uint16_t n);
uint16_t memif_direct_tx_burst(struct rocemu_port *port, struct rte_mbuf **pkts, uint16_t n);
/* Unless ROCEMU_MEMIF_DIRECT=0 (or ROCEMU_MEMIF_ZERO_COPY=1 without it). */
bool memif_direct_wanted(void);
/* Frames out to the peer at most, for a pool of n: three quarters of it,
 * or ROCEMU_MEMIF_DIRECT_TX_CAP (1..n). */
uint32_t memif_direct_tx_cap(uint32_t n);

/* For tests: a peer view over plain memory laid out as an object (shared
 * header first, the area at data_off); NULL when its header is refused. */
struct md_peer *memif_direct_peer_from_memory(void *obj, uint64_t obj_len);
/* Take up to n frames from such a view, counting in ctr (port counters):
 * frames of at most copy_max bytes, and frames that are not RoCEv2, copied
 * into mbufs of copy_pool and their buffers given back at once; larger
 * RoCEv2 frames wrapped in place, with wrappers from hdr_pool. */
uint16_t memif_direct_peer_rx(struct md_peer *p, uint64_t *ctr, struct rte_mempool *hdr_pool,
			      struct rte_mempool *copy_pool, uint32_t copy_max,
			      struct rte_mbuf **pkts, uint16_t n);
/* Indices our freed mbufs gave back so far, into the peer's return ring. */
void memif_direct_peer_return(struct md_peer *p);
/* Let go of a view (its memory is the caller's when from memory). */
void memif_direct_peer_drop(struct md_peer *p);

#endif
