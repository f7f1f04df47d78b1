/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Contract between the engine's inner parts: memory (emulator/memory),
 * queues (emulator/transport/queues: CQ, SRQ, AH) and the transport proper
 * (engine, QP state machine, requester, responder, completer).
 *
 * Everything here is called with the engine lock held unless it says
 * otherwise. The public API (rocemu_engine.h) takes the lock itself.
 */
#ifndef ROCEMU_INTERNAL_H
#define ROCEMU_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "rocemu_engine.h"

/** Most SGEs per work request, send or receive (reported as max_sge). */
#define ROCEMU_MAX_SGE 32

/* ------------------------------------------------------------------------ */
/* Engine services used by the inner parts (implemented in engine.c).        */

/** The port (addresses, tx, lock). */
struct rocemu_port *rocemu_engine_port(struct rocemu_engine *e);
/** The engine's MR table. */
struct rocemu_mem_table *rocemu_engine_mem(struct rocemu_engine *e);
/** Deliver an async event to the provider's handler (no-op when none is set). */
void rocemu_engine_raise(struct rocemu_engine *e, enum ibv_event_type type, void *obj_ctx);
/** Take/release the engine lock (the port's lock). */
void rocemu_engine_lock(struct rocemu_engine *e);
void rocemu_engine_unlock(struct rocemu_engine *e);

/* ------------------------------------------------------------------------ */
/* Memory: PDs, MRs, the one translation function (emulator/memory).         */

struct rocemu_pd {
	struct rocemu_engine *engine;
	uint32_t handle;
	uint32_t refcnt; /**< MRs, QPs, SRQs, AHs using it */
};

/** Take/drop a reference on a PD (engine lock held). */
void rocemu_pd_get(struct rocemu_pd *pd);
void rocemu_pd_put(struct rocemu_pd *pd);

/** Why a translation failed; the transport maps each to a NAK/WC status. */
enum rocemu_mem_err {
	ROCEMU_MEM_OK = 0,
	ROCEMU_MEM_BAD_KEY, /**< no such key, or stale variant, or invalidated */
	ROCEMU_MEM_BAD_PD,  /**< key belongs to another PD */
	ROCEMU_MEM_BOUNDS,  /**< [iova, iova+len) not inside the region (or overflows) */
	ROCEMU_MEM_ACCESS,  /**< region lacks the access right */
	ROCEMU_MEM_FAULT,   /**< implicit ODP: address not mapped in the process */
	ROCEMU_MEM_ALIGN,   /**< atomic on an iova that is not 8-byte aligned */
};

/** Rights a translation asks for (subset of IBV_ACCESS_*; local read is implicit). */
enum rocemu_mem_right {
	ROCEMU_RIGHT_LOCAL_READ = 0,
	ROCEMU_RIGHT_LOCAL_WRITE = IBV_ACCESS_LOCAL_WRITE,
	ROCEMU_RIGHT_REMOTE_READ = IBV_ACCESS_REMOTE_READ,
	ROCEMU_RIGHT_REMOTE_WRITE = IBV_ACCESS_REMOTE_WRITE,
	ROCEMU_RIGHT_REMOTE_ATOMIC = IBV_ACCESS_REMOTE_ATOMIC,
};

struct rocemu_mem_table;
/** A table for max_mr regions and max_mw memory windows (one key space). */
int rocemu_mem_table_create(uint32_t max_mr, uint32_t max_mw, struct rocemu_mem_table **out);
/**
 * Give the table's keys a tag in their top byte (1..255: a host-attached
 * process's index on the host + 1; mem_private.h), before any key is handed
 * out. -EINVAL for tag 0, more than 65536 slots, or keys already out.
 */
int rocemu_mem_table_set_key_tag(struct rocemu_mem_table *t, uint8_t tag);
/** Frees the table and every MR left in it. */
void rocemu_mem_table_destroy(struct rocemu_mem_table *t);

/**
 * The one place registered memory is reached. Looks key up (as an lkey when
 * remote is false, as an rkey when true: a memory window is an rkey only,
 * and a type 2 window answers only the QP qpn it is bound to), checks PD, bounds of
 * [iova, iova+len) (len may be 0) and rights, and on success sets *ptr to
 * the host address of iova. For implicit ODP regions *ptr is set but the
 * caller must use rocemu_mem_copy_* (which survive unmapped pages).
 */
enum rocemu_mem_err rocemu_mem_translate(struct rocemu_mem_table *t, const struct rocemu_pd *pd,
					 uint32_t qpn, uint32_t key, bool remote, uint64_t iova,
					 uint64_t len, unsigned rights, uint8_t **ptr);

/**
 * Copy len bytes starting at byte `offset` of the gather list (local keys,
 * local read) into dst. Returns ROCEMU_MEM_OK or the first error.
 */
enum rocemu_mem_err rocemu_mem_gather(struct rocemu_mem_table *t, const struct rocemu_pd *pd,
				      const struct ibv_sge *sg, uint32_t num_sge, uint64_t offset,
				      void *dst, uint32_t len);
/**
 * rocemu_mem_gather that also continues the CRC-32 *crc over the bytes it
 * copies (roce_crc32 semantics), in the same pass where the memory allows
 * (not ODP): for building a frame's payload and its ICRC at once.
 */
enum rocemu_mem_err rocemu_mem_gather_crc(struct rocemu_mem_table *t, const struct rocemu_pd *pd,
					  const struct ibv_sge *sg, uint32_t num_sge,
					  uint64_t offset, void *dst, uint32_t len, uint32_t *crc);
/** Copy len bytes from src into the scatter list at byte offset (local write right). */
enum rocemu_mem_err rocemu_mem_scatter(struct rocemu_mem_table *t, const struct rocemu_pd *pd,
				       const struct ibv_sge *sg, uint32_t num_sge, uint64_t offset,
				       const void *src, uint32_t len);
/** Remote access by QP qpn: copy into/out of the region or window named by
 * rkey at iova (rights checked). */
enum rocemu_mem_err rocemu_mem_remote_write(struct rocemu_mem_table *t, const struct rocemu_pd *pd,
					    uint32_t qpn, uint32_t rkey, uint64_t iova,
					    const void *src, uint32_t len);
enum rocemu_mem_err rocemu_mem_remote_read(struct rocemu_mem_table *t, const struct rocemu_pd *pd,
					   uint32_t qpn, uint32_t rkey, uint64_t iova, void *dst,
					   uint32_t len);
/** rocemu_mem_remote_read continuing the CRC-32 *crc over the bytes (see
 * rocemu_mem_gather_crc). */
enum rocemu_mem_err rocemu_mem_remote_read_crc(struct rocemu_mem_table *t,
					       const struct rocemu_pd *pd, uint32_t qpn,
					       uint32_t rkey, uint64_t iova, void *dst,
					       uint32_t len, uint32_t *crc);
/**
 * 8-byte atomic on remote memory (REMOTE_ATOMIC right; a misaligned iova is
 * ROCEMU_MEM_ALIGN). cmp_swap: if *p == compare then *p = swap_add;
 * otherwise fetch_add: *p += swap_add. *orig gets the value before. Atomic
 * with respect to the CPU (__atomic builtins), so the device can report
 * IBV_ATOMIC_HCA.
 */
enum rocemu_mem_err rocemu_mem_atomic(struct rocemu_mem_table *t, const struct rocemu_pd *pd,
				      uint32_t qpn, uint32_t rkey, uint64_t iova, bool cmp_swap,
				      uint64_t compare, uint64_t swap_add, uint64_t *orig);
/**
 * ATOMIC WRITE (annex A19): store the 8 bytes at iova as one single-copy
 * atomic store (REMOTE_WRITE right; a misaligned iova is ROCEMU_MEM_ALIGN).
 */
enum rocemu_mem_err rocemu_mem_atomic_write(struct rocemu_mem_table *t, const struct rocemu_pd *pd,
					    uint32_t qpn, uint32_t rkey, uint64_t iova,
					    const uint8_t data[8]);
/**
 * FLUSH (annex A19) of [iova, iova+len), or of the whole region of rkey
 * when whole_region: checks the region's FLUSH_GLOBAL / FLUSH_PERSISTENT
 * rights (ROCEMU_ACCESS_*) for the placement bits (ROCEMU_FLUSH_*), then
 * makes the range globally visible (a fence) and, for persistence, writes
 * it back (msync; see mem_access.c for what persistence means here).
 */
enum rocemu_mem_err rocemu_mem_flush(struct rocemu_mem_table *t, const struct rocemu_pd *pd,
				     uint32_t qpn, uint32_t rkey, bool whole_region, uint64_t iova,
				     uint64_t len, unsigned placement);
/**
 * Whether key may be invalidated: by the owner (remote = false, LOCAL_INV
 * posted on QP qpn: a region, or a bound type 2 window) or by the peer of
 * QP qpn (remote = true, SEND with Invalidate: only a type 2 window bound
 * to qpn, IBA 10.6.7). ROCEMU_MEM_OK, or BAD_KEY (no such key, or already
 * invalidated), BAD_PD (another PD's), ACCESS (not allowed: a type 1
 * window; for a peer also a region or another QP's window).
 */
enum rocemu_mem_err rocemu_mem_invalidate_check(struct rocemu_mem_table *t,
						const struct rocemu_pd *pd, uint32_t key,
						bool remote, uint32_t qpn);
/**
 * rocemu_mem_invalidate_check, then, when it allows it, invalidate: later
 * translations with that key fail with BAD_KEY until rereg.
 */
enum rocemu_mem_err rocemu_mem_invalidate(struct rocemu_mem_table *t, const struct rocemu_pd *pd,
					  uint32_t key, bool remote, uint32_t qpn);
/** A bind WR (IBV_WR_BIND_MW, or ibv_bind_mw's for type 1), as posted. */
struct rocemu_mem_bind {
	uint32_t key;	  /**< the window's new R_Key: its index part names the window */
	uint8_t type;	  /**< IBV_MW_TYPE_1 or _2: the window must be of it */
	uint32_t mr_lkey; /**< the region's key; 0: none (type 1: unbind) */
	uint64_t addr;	  /**< the window's first byte, as an iova of the region */
	uint64_t length;  /**< 0: unbind (type 1 only) */
	unsigned access;  /**< IBV_ACCESS_REMOTE_*, IBV_ACCESS_ZERO_BASED (type 2) */
};
/**
 * Bind a window through QP qpn of PD pd (mw.c has the rules). 0, or -EINVAL
 * (no such window, wrong type, bad flags, length 0 on type 2, zero-based
 * type 1, no such region), -EPERM (another PD's window or region), -EBUSY
 * (type 2 still bound), -EACCES (region without MW_BIND, or without local
 * write for remote write/atomic), -ERANGE (not inside the region). The
 * requester completes a failed bind with IBV_WC_MW_BIND_ERR.
 */
int rocemu_mem_bind(struct rocemu_mem_table *t, const struct rocemu_pd *pd, uint32_t qpn,
		    const struct rocemu_mem_bind *b);
/**
 * QP qpn is being destroyed: the type 2 windows bound to it stay bound (the
 * owner may still LOCAL_INV or deallocate them) but answer no QP from now
 * on, as on a NIC where the window holds its QP until it is freed.
 */
void rocemu_mem_windows_orphan(struct rocemu_mem_table *t, uint32_t qpn);
/** Short name of an error, for counters and logs. */
const char *rocemu_mem_err_name(enum rocemu_mem_err err);

/* ------------------------------------------------------------------------ */
/* Queues: CQ, SRQ, AH (emulator/transport/queues).                           */

/**
 * A zeroed ring of size bytes: from a's allocator (parent domain) unless it
 * is NULL or answers ROCEMU_ALLOC_DEFAULT, else the engine's heap. *from_app
 * says which, for rocemu_qmem_free. NULL when the memory cannot be had.
 */
void *rocemu_qmem_alloc(const struct rocemu_alloc *a, size_t size, uint64_t type, bool *from_app);
void rocemu_qmem_free(const struct rocemu_alloc *a, void *p, uint64_t type, bool from_app);

/**
 * Append a completion. solicited: the WC came from a packet with SE set
 * (wakes a CQ armed solicited-only); error completions also wake it.
 * On overflow the completion is dropped, IBV_EVENT_CQ_ERR is raised once,
 * and -ENOSPC returned; the caller moves the QP to ERR as the spec says.
 * A CQ created with ROCEMU_CQ_IGNORE_OVERRUN drops it and returns 1.
 */
int rocemu_cq_push(struct rocemu_cq *cq, const struct rocemu_wc *wc, bool solicited);
/** Free slots left (for deciding whether a completion can be generated). */
uint32_t rocemu_cq_free_slots(const struct rocemu_cq *cq);
/** The engine a CQ belongs to. */
struct rocemu_engine *rocemu_cq_engine(const struct rocemu_cq *cq);
/** QPs attach to a CQ (destroy of a CQ with attached QPs is -EBUSY). */
void rocemu_cq_get(struct rocemu_cq *cq);
void rocemu_cq_put(struct rocemu_cq *cq);
unsigned rocemu_cq_forget_qp(struct rocemu_cq *cq, uint32_t qpn);
unsigned rocemu_cq_count_qp(const struct rocemu_cq *cq, uint32_t qpn);

/** A receive work request as queued (QP receive queue or SRQ). */
struct rocemu_recv_wqe {
	uint64_t wr_id;
	uint32_t num_sge;
	uint64_t total_len;
	struct ibv_sge sge[ROCEMU_MAX_SGE];
};

/** Take the oldest receive WQE; -EAGAIN when empty. Raises IBV_EVENT_SRQ_LIMIT_REACHED when armed
 * and the count falls below the limit. */
int rocemu_srq_pop(struct rocemu_srq *srq, struct rocemu_recv_wqe *out);
/** An XRC SRQ's domain and CQ (NULL for a basic SRQ). */
struct rocemu_xrcd *rocemu_srq_xrcd(const struct rocemu_srq *srq);
struct rocemu_cq *rocemu_srq_cq(const struct rocemu_srq *srq);
/** The SRQ numbered num on engine e (ibv_get_srq_num), or NULL. */
struct rocemu_srq *rocemu_engine_srq_lookup(struct rocemu_engine *e, uint32_t num);
/** Give srq a number (-ENOMEM when all are taken) / take it back. Engine lock held. */
int rocemu_engine_srq_register(struct rocemu_engine *e, struct rocemu_srq *srq, uint32_t *num);
void rocemu_engine_srq_unregister(struct rocemu_engine *e, uint32_t num);
/** An XRC SRQ or XRC_RECV QP starts (1) or stops (-1) using its domain (engine lock held). */
void rocemu_xrcd_use(struct rocemu_xrcd *x, int delta);
struct rocemu_engine *rocemu_xrcd_engine(const struct rocemu_xrcd *x);
struct rocemu_pd *rocemu_srq_pd(const struct rocemu_srq *srq);
void rocemu_srq_get(struct rocemu_srq *srq);
void rocemu_srq_put(struct rocemu_srq *srq);

struct rocemu_ah {
	struct rocemu_pd *pd;
	uint8_t dgid[16];
	uint8_t sgid_index;
	uint8_t tclass;
	uint8_t hop_limit;
	uint32_t flow_label;
	uint8_t sl;
	uint16_t dlid;
};

#endif /* ROCEMU_INTERNAL_H */
