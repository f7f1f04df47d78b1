/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The host link: what `rocemu host` (tools/host/) and an attached process's
 * port (port_link_host.c, spec `host:NAME`) share. docs/host.md explains the
 * design; this file is the wire and memory format, in one place.
 *
 * The host owns the uplink, the MAC, the GID table and the QPN space. Each
 * attached process runs its own transport and exchanges frames through
 * single-producer single-consumer rings of fixed slots in memfds the host
 * makes: its *region* holds its ring to the host (`up`), its *inbound
 * region* every ring into it: ring 0 from the host, ring k from a process
 * the host paired it with (same-host frames without the host's thread,
 * unless the host captures). Control goes over a SOCK_SEQPACKET
 * Unix socket, RUNDIR/ctl.sock: one connection per process, held open for
 * the process's life, so its end (exit, SIGKILL) is the host's EOF.
 *
 * Attach:
 *   process -> host  HELLO {version, pid}
 *   host -> process  WELCOME {addressing} + SCM_RIGHTS: its region, its
 *                    inbound region, the host page (read-only), the bell
 * Requests after that (one at a time, each answered by REPLY {rc, value}):
 *   QPN_ALLOC {qp_type, gsi}  -> the number, or -errno
 *   QPN_FREE {qpn}            -> no reply (the number rests for the quiet time)
 *   PAIR {owner index}        -> the ring k assigned to us in the owner's
 *                                inbound region, whose fd comes with it
 *   RESOLVE {src_index, gid}  -> no reply: the answer appears in the host
 *                                page's neighbour table
 *   STAT {json}               -> text in chunks, then an empty chunk
 *
 * Nothing a process writes is trusted by the host: slot lengths are
 * bounded, indices are taken modulo the ring, frames are parsed again.
 */
#ifndef ROCEMU_HOST_H
#define ROCEMU_HOST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rocemu_port.h"

#define ROCEMU_HOST_VERSION  3
#define ROCEMU_HOST_NAME_MAX 64

/** Slots of the host's ring to a process and of the process's ring to the
 * host, and of each direct ring between two processes (powers of two). */
#define ROCEMU_HOST_RING_SLOTS 1024u
#define ROCEMU_HOST_PEER_SLOTS 256u
#define ROCEMU_HOST_SLOT_HDR   8u
/** Rings into a process: 0 from the host, 1.. from other processes. */
#define ROCEMU_HOST_INBOUND_RINGS 32u
/** Processes a host serves at once (an index fits the QPN owner table). */
#define ROCEMU_HOST_MAX_PROCS 255u

/* ------------------------------------------------------------------------ */
/* Shared memory                                                               */

/** One direction: the producer writes slots then publishes head; the
 * consumer reads slots then publishes tail. Both count forever (mod 2^32);
 * slot i is at i mod the ring's slot count. */
struct rocemu_host_ring {
	_Alignas(64) _Atomic uint32_t head;
	_Alignas(64) _Atomic uint32_t tail;
	_Alignas(64) uint8_t slots[];
};

/** A slot: the frame's length, then the frame. */
struct rocemu_host_slot {
	uint32_t len;
	uint32_t reserved;
	uint8_t frame[];
};

/** Frames and their bytes that passed one way, counted by the one thread
 * that writes them (rocemu_host_tally_add), read by `rocemu stat`. */
struct rocemu_host_tally {
	_Atomic uint64_t frames;
	_Atomic uint64_t bytes;
};

/** Frames one of a process's QPs took from direct rings (written by the
 * process, read by the host for `rocemu stat`): slot = the QPN's low 16
 * bits; counts belong to `qpn` only (a new QP in the slot starts at 0). */
struct rocemu_host_direct_qp {
	_Atomic uint32_t qpn;
	uint32_t reserved;
	struct rocemu_host_tally in;
};

#define ROCEMU_HOST_DIRECT_QP_SLOTS (1u << 16)

/** How each of a process's two regions begins: which one it is, and its
 * layout (written by the host, checked by the process before it touches a
 * ring). */
struct rocemu_host_shm_hdr {
	uint32_t magic; /* ROCEMU_HOST_REGION_MAGIC or ROCEMU_HOST_INBOUND_MAGIC */
	uint32_t version;
	uint32_t slot_size; /* bytes per slot, header included */
	uint32_t count;	    /* region: slots of the ring up; inbound: rings */
	uint64_t size;	    /* of the whole region */
};

static inline void rocemu_host_shm_hdr_init(struct rocemu_host_shm_hdr *h, uint32_t magic,
					    uint32_t slot_size, uint32_t count, uint64_t size)
{
	*h = (struct rocemu_host_shm_hdr){.magic = magic,
					  .version = ROCEMU_HOST_VERSION,
					  .slot_size = slot_size,
					  .count = count,
					  .size = size};
}

/** The header is one the host wrote with these values (the slot size is
 * checked by the caller). */
static inline bool rocemu_host_shm_hdr_ok(const struct rocemu_host_shm_hdr *h, uint32_t magic,
					  uint32_t count, uint64_t size)
{
	return h->magic == magic && h->version == ROCEMU_HOST_VERSION && h->count == count &&
	       h->size == size;
}

/** A process's private region (host and process only): its ring to the
 * host, then its counts of same-host frames on direct rings, which the
 * host does not see pass (sparse: only the pages of slots in use). */
struct rocemu_host_region {
	struct rocemu_host_shm_hdr hdr; /* count: ROCEMU_HOST_RING_SLOTS */
	uint64_t up_offset;		/* of the process -> host ring */
	uint64_t direct_qp_offset;	/* of rocemu_host_direct_qp[ROCEMU_HOST_DIRECT_QP_SLOTS] */
	/* set by the host when it stops serving this process (host shutdown) */
	_Alignas(64) _Atomic uint32_t host_gone;
	/* what the process wrote into other processes' direct rings, and took
	 * from its own (written by the process) */
	_Alignas(64) struct rocemu_host_tally direct_out;
	struct rocemu_host_tally direct_in;
};

#define ROCEMU_HOST_REGION_MAGIC 0x52434d48u /* "RCMH" */
#define ROCEMU_HOST_REGION_HDR	 4096u

/**
 * A process's inbound region: every ring that leads into the process, and
 * its bell. Ring 0 is the host's; ring k >= 1 belongs to the one process
 * the host assigned it to (bit k of `assigned`), which maps this region to
 * write frames straight into it (same-host traffic without the host's
 * thread). A writer can only put frames in front of this process, as it
 * could through the host: the process parses and checks each like any.
 */
struct rocemu_host_inbound {
	struct rocemu_host_shm_hdr hdr; /* count: ROCEMU_HOST_INBOUND_RINGS */
	/* bit k: ring k has a writer (written by the host only) */
	_Alignas(64) _Atomic uint32_t assigned;
	/* The process's progress thread sleeps on proc_bell (a futex word)
	 * while proc_sleeping is 1; a writer bumps the word and wakes it after
	 * it put frames in a ring, unless the application is inside a verb
	 * (app_busy) or polled lately (app_waiting_tsc, TSC; 0 = not waiting):
	 * it will see the frames without the thread. */
	_Alignas(64) _Atomic uint32_t proc_bell;
	_Atomic uint32_t proc_sleeping;
	_Atomic uint32_t app_busy;
	_Atomic uint64_t app_waiting_tsc;
};

#define ROCEMU_HOST_INBOUND_MAGIC 0x52434d49u /* "RCMI" */

/** Neighbour entries the host publishes (host page). */
enum rocemu_host_neigh_state {
	ROCEMU_HOST_NEIGH_FREE = 0,
	ROCEMU_HOST_NEIGH_RESOLVING,
	ROCEMU_HOST_NEIGH_REACHABLE,
	ROCEMU_HOST_NEIGH_FAILED,
};

struct rocemu_host_neigh {
	_Atomic uint32_t seq; /* odd while the host writes the entry */
	uint32_t state;
	uint8_t gid[16];
	uint8_t mac[6];
	uint8_t pad[2];
};

#define ROCEMU_HOST_NEIGH_SLOTS 256u

/** The host page: one for the host, mapped read-only by every process,
 * except the host's bell, which processes ring (a second, writable page). */
struct rocemu_host_page {
	uint32_t magic; /* ROCEMU_HOST_PAGE_MAGIC */
	uint32_t version;
	uint32_t host_pid;
	uint32_t n_neigh;
	/* 1: same-host frames go through the host (it captures or injects
	 * faults): no direct rings */
	uint32_t switch_all;
	uint32_t reserved;
	struct rocemu_host_neigh neigh[ROCEMU_HOST_NEIGH_SLOTS];
	/* QPN owners, by slot (a QPN's low 16 bits): ROCEMU_HOST_OWNER_*() */
	_Atomic uint64_t qpn_owner[1u << 16];
};

/** An owner entry: the QPN (24 bits), the owner's index + 1 (8 bits, 0 =
 * none), the owner's attach generation (32 bits: a new process in the same
 * index has another). */
#define ROCEMU_HOST_OWNER(qpn, idx, gen)                                                           \
	((uint64_t)(qpn) | (uint64_t)((idx) + 1) << 24 | (uint64_t)(gen) << 32)
#define ROCEMU_HOST_OWNER_QPN(e) ((uint32_t)((e)&0xFFFFFFu))
#define ROCEMU_HOST_OWNER_IDX(e) ((int)(((e) >> 24) & 0xFF) - 1)
#define ROCEMU_HOST_OWNER_GEN(e) ((uint32_t)((e) >> 32))

#define ROCEMU_HOST_PAGE_MAGIC 0x52434d50u /* "RCMP" */

/** The host's bell: one futex word the host's forwarding thread sleeps on
 * while `sleeping` is 1, in a page every process maps writable (a thread
 * waits on one word only, so every process rings the same one). */
struct rocemu_host_bell {
	_Alignas(64) _Atomic uint32_t bell;
	_Atomic uint32_t sleeping;
};

/* ------------------------------------------------------------------------ */
/* Control messages (SOCK_SEQPACKET)                                           */

enum rocemu_host_msg_type {
	ROCEMU_HOST_HELLO = 1,
	ROCEMU_HOST_WELCOME,
	ROCEMU_HOST_REFUSED,
	ROCEMU_HOST_QPN_ALLOC,
	ROCEMU_HOST_QPN_FREE,
	ROCEMU_HOST_RESOLVE,
	ROCEMU_HOST_REPLY,
	ROCEMU_HOST_STAT,
	ROCEMU_HOST_STAT_CHUNK,
	ROCEMU_HOST_INFO, /* a connection's first message instead of HELLO: WELCOME, no fds */
	ROCEMU_HOST_PAIR, /* a direct ring into process `arg`: REPLY value = ring, + its fd */
};

struct rocemu_host_hello {
	uint32_t type; /* HELLO */
	uint32_t version;
	uint32_t pid;
	uint32_t reserved;
};

struct rocemu_host_welcome {
	uint32_t type; /* WELCOME */
	uint32_t version;
	uint32_t host_pid;
	uint32_t proc_id;  /* the host's number for this process */
	uint32_t proc_gen; /* its attach generation */
	uint8_t mac[6];
	uint16_t eth_mtu;
	uint32_t n_ips;
	struct rocemu_ip_addr ips[ROCEMU_PORT_MAX_IPS];
	char host_name[ROCEMU_HOST_NAME_MAX];
	/* fds follow in SCM_RIGHTS: [0] region (rw), [1] inbound region (rw),
	 * [2] host page (ro), [3] host bell page (rw) */
};

struct rocemu_host_refused {
	uint32_t type; /* REFUSED */
	int32_t err;   /* -errno */
	char why[120];
};

struct rocemu_host_request {
	uint32_t type; /* QPN_ALLOC, QPN_FREE, RESOLVE, STAT */
	uint32_t arg;  /* ALLOC: qp type; FREE: qpn; RESOLVE: src index; STAT: json */
	uint8_t gid[16];
};

struct rocemu_host_reply {
	uint32_t type; /* REPLY */
	int32_t rc;    /* 0 or -errno */
	uint32_t value;
	uint32_t reserved;
};

/* ------------------------------------------------------------------------ */
/* Helpers both sides use                                                     */

/**
 * The host's runtime directory for name: name itself when it contains a
 * '/', else $XDG_RUNTIME_DIR/rocemu/NAME, /run/rocemu/NAME for root, or
 * /tmp/rocemu-UID/NAME. 0, or -EINVAL (bad or too long a name).
 */
int rocemu_host_dir(const char *name, char *out, size_t len);

/**
 * Connect to the control socket of the host NAME (SOCK_SEQPACKET, 10 s
 * timeouts). The descriptor, or -errno with one line in err.
 */
int rocemu_host_connect(const char *name, char *err, size_t errlen);

/**
 * Ask the host NAME for its addressing (MAC, MTU, addresses) without
 * attaching: what `rocemu run --host` shows in its sysfs view. 0, or -errno
 * with one line in err.
 */
int rocemu_host_query(const char *name, struct rocemu_host_welcome *info, char *err, size_t errlen);

/** The slot size for frames of up to max_frame bytes (a multiple of 64). */
static inline uint32_t rocemu_host_slot_size(uint32_t max_frame)
{
	return (max_frame + ROCEMU_HOST_SLOT_HDR + 63u) & ~63u;
}

/** Slot idx of a ring of n_slots (a power of two) slots of slot_size bytes. */
static inline struct rocemu_host_slot *rocemu_host_ring_slot(struct rocemu_host_ring *r,
							     uint32_t slot_size, uint32_t n_slots,
							     uint32_t idx)
{
	return (struct rocemu_host_slot *)(r->slots + (size_t)(idx & (n_slots - 1)) * slot_size);
}

/** Bytes of a ring of n_slots slots, page-aligned. */
static inline uint64_t rocemu_host_ring_bytes(uint32_t slot_size, uint32_t n_slots)
{
	uint64_t ring = sizeof(struct rocemu_host_ring) + (uint64_t)n_slots * slot_size;

	return (ring + 4095) & ~4095ull;
}

/** Offset of the direct-ring QP counts in a private region. */
static inline uint64_t rocemu_host_region_direct_offset(uint32_t slot_size)
{
	return ROCEMU_HOST_REGION_HDR + rocemu_host_ring_bytes(slot_size, ROCEMU_HOST_RING_SLOTS);
}

/** Bytes of a private region whose slots hold slot_size bytes. */
static inline uint64_t rocemu_host_region_size(uint32_t slot_size)
{
	return rocemu_host_region_direct_offset(slot_size) +
	       (uint64_t)ROCEMU_HOST_DIRECT_QP_SLOTS * sizeof(struct rocemu_host_direct_qp);
}

/** Add to a counter only one thread writes (no locked instruction); readers
 * in another process see whole values. */
static inline void rocemu_host_count(_Atomic uint64_t *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

/** Count one frame of len bytes (one writer, as rocemu_host_count). */
static inline void rocemu_host_tally_add(struct rocemu_host_tally *t, uint64_t len)
{
	rocemu_host_count(&t->frames, 1);
	rocemu_host_count(&t->bytes, len);
}

/** Read a tally (any process). */
static inline void rocemu_host_tally_read(const struct rocemu_host_tally *t,
					  unsigned long long *frames, unsigned long long *bytes)
{
	*frames = atomic_load_explicit(&t->frames, memory_order_relaxed);
	*bytes = atomic_load_explicit(&t->bytes, memory_order_relaxed);
}

/** The direct-ring counts of a private region. */
static inline struct rocemu_host_direct_qp *rocemu_host_region_direct(struct rocemu_host_region *r)
{
	return (struct rocemu_host_direct_qp *)((uint8_t *)r + r->direct_qp_offset);
}

/** Slots of inbound ring k. */
static inline uint32_t rocemu_host_inbound_slots(unsigned k)
{
	return k == 0 ? ROCEMU_HOST_RING_SLOTS : ROCEMU_HOST_PEER_SLOTS;
}

/** Offset of inbound ring k; k = ROCEMU_HOST_INBOUND_RINGS gives the size. */
static inline uint64_t rocemu_host_inbound_offset(uint32_t slot_size, unsigned k)
{
	uint64_t off = ROCEMU_HOST_REGION_HDR;

	if (k > 0)
		off +=
		    rocemu_host_ring_bytes(slot_size, ROCEMU_HOST_RING_SLOTS) +
		    (uint64_t)(k - 1) * rocemu_host_ring_bytes(slot_size, ROCEMU_HOST_PEER_SLOTS);
	return off;
}

#endif
