/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The engine's interface to its host (the verbs provider today, a per-host
 * daemon later): work requests in, completions out, memory accessed only
 * through the MR table. One engine = one emulated RoCE port.
 *
 * The vocabulary (QP types and states, access flags, WR opcodes, WC status
 * and opcodes, struct ibv_qp_attr and its mask, struct ibv_sge) is the
 * InfiniBand verbs one, taken from <infiniband/verbs.h> as plain data; no
 * libibverbs function is called from here.
 *
 * Every function takes the engine lock itself unless it says otherwise.
 * Functions return 0 or a negative errno.
 */
#ifndef ROCEMU_ENGINE_H
#define ROCEMU_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "../port/rocemu_port.h"

struct rocemu_engine;
struct rocemu_pd;
struct rocemu_mr;
struct rocemu_cq;
struct rocemu_srq;
struct rocemu_qp;
struct rocemu_ah;
struct rocemu_xrcd;

/* ------------------------------------------------------------------------ */
/* Engine                                                                     */

/** Limits the engine enforces; what ibv_query_device reports. */
struct rocemu_caps {
	uint64_t max_mr_size;
	uint32_t max_qp, max_qp_wr, max_sge, max_sge_rd, max_inline_data;
	uint32_t max_cq, max_cqe, max_mr, max_mw, max_pd, max_ah;
	uint32_t max_qp_rd_atom, max_qp_init_rd_atom, max_res_rd_atom;
	uint32_t max_srq, max_srq_wr, max_srq_sge;
	uint32_t max_msg_sz;
	uint32_t max_pkeys;
	uint32_t max_mcast_grp, max_mcast_qp_attach; /**< UD multicast groups, QPs per group */
	bool atomic_hca;       /**< atomics are atomic w.r.t. the CPU (IBV_ATOMIC_HCA) */
	bool odp;	       /**< on-demand paging: always true */
	uint64_t max_dm_size;  /**< device memory (ibv_alloc_dm) of the engine, in bytes */
	uint64_t timestamp_hz; /**< completion timestamp clock (1e9: nanoseconds) */
};

/**
 * Async events raised by the engine (CQ overflow, SRQ limit, QP fatal, ...).
 * With `unresolved` set it is no ibv_event_type but a report for the user:
 * the engine gave up resolving that GID's MAC (ARP for IPv4, ND for IPv6:
 * every request unanswered) and failed a send WQE with IBV_WC_RETRY_EXC_ERR
 * for it. The engine prints nothing: the provider says it (once per address
 * for a while), a program sees only the failed completion.
 */
struct rocemu_event {
	enum ibv_event_type type;
	void *
	    obj_ctx; /**< the user_ctx given when the QP/CQ/SRQ was created; NULL for port events */
	const uint8_t *unresolved; /**< NULL, or the GID whose MAC could not be resolved */
};
typedef void (*rocemu_event_fn)(void *arg, const struct rocemu_event *ev);

/** Open the port described by cfg and start the engine on it. */
int rocemu_engine_create(const struct rocemu_port_config *cfg, struct rocemu_engine **out,
			 char *err, size_t errlen);
/** Stops progress, destroys every object still alive, closes the port. */
void rocemu_engine_destroy(struct rocemu_engine *e);
struct rocemu_port *rocemu_engine_port(struct rocemu_engine *e);
void rocemu_engine_caps(const struct rocemu_engine *e, struct rocemu_caps *caps);
/** Where async events go (one sink per engine; called with the engine lock held). */
void rocemu_engine_set_event_handler(struct rocemu_engine *e, rocemu_event_fn fn, void *arg);
/**
 * A trace line: topic "resp" or "comp" (a responder or completer state
 * changed, e.g. "qp 0x000012 resp-seq IN_ORDER -> NAKED (PSN gap)"). Called
 * with the engine lock held; the engine never prints, its user does
 * (the verbs provider with ROCEMU_TRACE=resp,comp).
 */
typedef void (*rocemu_trace_fn)(void *arg, const char *topic, const char *line);
/** Where trace lines go (NULL: nowhere, the default: a state change then costs a test). */
void rocemu_engine_set_trace(struct rocemu_engine *e, rocemu_trace_fn fn, void *arg);
/** One progress pass (try-lock). */
unsigned rocemu_engine_progress(struct rocemu_engine *e);
/**
 * An application thread is about to block in the kernel waiting for a
 * completion event (ibv_get_cq_event): the engine's progress thread takes
 * over at once (see the progress contract in rocemu_port.h).
 */
void rocemu_engine_app_blocks(struct rocemu_engine *e);
/**
 * Before the last close: run progress until it is idle for a few passes (50
 * ms at most), so that the last frames leave (a responder's final ACK is
 * often still queued when a program, its receive completed, closes the
 * device; the peer would retry into the void until "retry counter
 * exceeded"). The port's close then waits, bounded, until the peer has them.
 */
void rocemu_engine_drain(struct rocemu_engine *e);
/** Wait until no engine call that started before is still running (the
 * event handler included): takes and releases the engine lock. */
void rocemu_engine_quiesce(struct rocemu_engine *e);

/** Transport counters (retransmissions, NAKs by code, RNR, duplicates, ...):
 * every one of ROCEMU_COUNTERS (rocemu_transport.h), zero or not. */
unsigned rocemu_engine_counters(const struct rocemu_engine *e, struct rocemu_counter *out,
				unsigned max);
/** The printed name of transport counter i (NULL past the last). */
const char *rocemu_engine_counter_name(unsigned i);

/* ------------------------------------------------------------------------ */
/* Queue memory from the application (ibv_alloc_parent_domain(3))            */

/**
 * Where a queue's ring comes from. alloc returns size bytes aligned to
 * alignment, NULL (the object is not created: -ENOMEM), or
 * ROCEMU_ALLOC_DEFAULT (IBV_ALLOCATOR_USE_DEFAULT: the engine allocates it
 * itself); free gives back what alloc returned. type says which ring
 * (ROCEMU_RES_*), passed through as ibv_alloc_parent_domain(3)'s
 * resource_type. A NULL struct or alloc: the engine's own memory.
 */
struct rocemu_alloc {
	void *(*alloc)(void *arg, size_t size, size_t alignment, uint64_t type);
	void (*free)(void *arg, void *ptr, uint64_t type);
	void *arg;
};
#define ROCEMU_ALLOC_DEFAULT ((void *)-1)
/** resource_type values rocemu passes to a parent domain's allocator. */
#define ROCEMU_RES_QP_SQ 0x524f0001ull /**< a QP's send queue */
#define ROCEMU_RES_QP_RQ 0x524f0002ull /**< a QP's receive queue */
#define ROCEMU_RES_CQ	 0x524f0003ull /**< a CQ's ring */
#define ROCEMU_RES_SRQ	 0x524f0004ull /**< an SRQ's ring */

/* ------------------------------------------------------------------------ */
/* Protection domains and memory regions                                      */

int rocemu_pd_alloc(struct rocemu_engine *e, struct rocemu_pd **out);
/** -EBUSY while MRs, QPs, SRQs or AHs still use it. */
int rocemu_pd_free(struct rocemu_pd *pd);

/** Public view of a memory region. */
struct rocemu_mr_info {
	uint32_t lkey, rkey;
	void *addr;
	size_t length;
	uint64_t iova;
	unsigned access; /**< enum ibv_access_flags */
};

/**
 * Register [addr, addr+length) with IO virtual address iova. access follows
 * ibv_reg_mr(3): REMOTE_WRITE or REMOTE_ATOMIC without LOCAL_WRITE is
 * -EINVAL. Zero length is allowed. IBV_ACCESS_ON_DEMAND is accepted; with
 * addr NULL and length SIZE_MAX it is an implicit ODP region (the whole
 * address space; accesses are checked against the process's mappings).
 */
int rocemu_mr_reg(struct rocemu_pd *pd, void *addr, size_t length, uint64_t iova, unsigned access,
		  struct rocemu_mr **out);
/** ibv_rereg_mr semantics: flags IBV_REREG_MR_CHANGE_{TRANSLATION,PD,ACCESS}. The keys change
 * with the translation only. -EBUSY while memory windows are bound to the region (so is dereg). */
int rocemu_mr_rereg(struct rocemu_mr *mr, int flags, struct rocemu_pd *pd, void *addr,
		    size_t length, uint64_t iova, unsigned access);
int rocemu_mr_dereg(struct rocemu_mr *mr);
void rocemu_mr_info(const struct rocemu_mr *mr, struct rocemu_mr_info *info);
/*
 * Another process's region (emulator/memory/mr_import.c): ibv_import_mr
 * across two processes attached to one host NIC (docs/verbs-provider.md,
 * "Sharing objects"). The importing engine answers for the exporter's key
 * (keys of live processes on a host never collide, mem_private.h) and
 * copies through process_vm_readv/writev on the exporter's pid. Each copy
 * counts itself in *busy (shared with the exporter, which waits for 0 after
 * it changed *stamp at deregistration) and happens only while *stamp is
 * still expect and pidfd says the exporter runs.
 */
struct rocemu_mem_foreign {
	pid_t pid;	 /**< the exporter */
	int pidfd;	 /**< its pidfd (the caller's: open while the import lives) */
	uint32_t *busy;	 /**< shared: copies in progress (atomic) */
	uint32_t *stamp; /**< shared: the exporter's entry for the region (atomic) */
	uint32_t expect; /**< *stamp while the region is registered as imported */
	uint32_t key;	 /**< lkey == rkey, of the exporter's tag */
	uint64_t addr;	 /**< the exporter's address of iova (0 for implicit ODP: identity) */
	uint64_t length, iova;
	unsigned access;
	bool implicit; /**< implicit ODP: the whole address space */
};
/**
 * A region of pd's engine standing for another process's (f copied).
 * -EINVAL for a key of this engine's own tag (or a standalone engine),
 * -EEXIST when another import has the key already.
 */
int rocemu_mr_import(struct rocemu_pd *pd, const struct rocemu_mem_foreign *f,
		     struct rocemu_mr **out);
/** Forget an imported region: its key stops translating here. */
int rocemu_mr_unimport(struct rocemu_mr *mr);

/* Device memory (emulator/memory/dm.c): ibv_alloc_dm(3), memory of the engine. */
struct rocemu_dm;
/** length bytes (aligned to 1 << log_align, at most a page) out of max_dm_size, zeroed;
 * -EINVAL for length 0 or a bigger alignment, -ENOMEM when not that much is left. */
int rocemu_dm_alloc(struct rocemu_engine *e, uint64_t length, uint32_t log_align,
		    struct rocemu_dm **out);
/** -EBUSY while regions are registered on it (ibv_reg_dm_mr). */
int rocemu_dm_free(struct rocemu_dm *dm);
/** ibv_memcpy_to_dm / _from_dm: offset and length 4-byte aligned (-EINVAL), inside (-EFAULT). */
int rocemu_dm_copy(struct rocemu_dm *dm, uint64_t offset, void *host, size_t length, bool to_dm);
/** Where dm's bytes are in this process (what another process imports). */
void rocemu_dm_where(const struct rocemu_dm *dm, uint64_t *addr, uint64_t *length);
/** rocemu_dm_copy on another process's device memory (f: its address, length and
 * stamp; key unused): the same errors, -EFAULT too once the exporter freed it or exited. */
int rocemu_dm_copy_foreign(const struct rocemu_mem_foreign *f, uint64_t offset, void *host,
			   size_t length, bool to_dm);
/** ibv_reg_dm_mr(3): a zero-based region on [offset, offset+length) of dm; access must have
 * IBV_ACCESS_ZERO_BASED and nothing but local write and the remote rights besides. */
int rocemu_dm_reg_mr(struct rocemu_pd *pd, struct rocemu_dm *dm, uint64_t offset, size_t length,
		     unsigned access, struct rocemu_mr **out);
/** ibv_dereg_mr of a region made by rocemu_dm_reg_mr. */
int rocemu_dm_dereg_mr(struct rocemu_dm *dm, struct rocemu_mr *mr);

/* Memory windows (emulator/memory/mw.c). */
struct rocemu_mw;
/** ibv_alloc_mw(3): type IBV_MW_TYPE_1 or _2, else -EINVAL; -ENOMEM past
 * max_mw. It is not bound: its R_Key names nothing until a bind. */
int rocemu_mw_alloc(struct rocemu_pd *pd, enum ibv_mw_type type, struct rocemu_mw **out);
/** ibv_dealloc_mw(3), bound or not: the R_Key stops translating at once. */
int rocemu_mw_dealloc(struct rocemu_mw *mw);
/** The window's R_Key as the engine has it (it changes when a bind runs). */
uint32_t rocemu_mw_rkey(const struct rocemu_mw *mw);
/** ibv_advise_mr: nothing to prefetch in a user-space NIC; validates and returns 0. */
int rocemu_mr_advise(struct rocemu_pd *pd, uint32_t flags, const struct ibv_sge *sg, uint32_t n);

/* ------------------------------------------------------------------------ */
/* Completion queues                                                          */

/** A completion: everything ibv_wc and the ibv_cq_ex read functions expose. */
struct rocemu_wc {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	uint32_t vendor_err;
	uint32_t byte_len;
	uint32_t imm_data; /**< network order, as in ibv_wc */
	uint32_t invalidated_rkey;
	uint32_t qp_num;
	uint32_t src_qp;
	unsigned wc_flags; /**< enum ibv_wc_flags */
	uint16_t pkey_index;
	uint8_t sl;	       /**< UD receive: the RoCE packet type, as mlx5 reports it (ud.c) */
	uint64_t timestamp_ns; /**< rocemu_now_ns() when the completion was generated */
	uint16_t slid;	       /**< UD: the sender's LID (rocemu_lid_of_gid), else 0 */
	uint32_t flow_tag;     /**< raw packet: the tag of the flow rule that steered it */
};

/** Called (engine lock held) when an armed CQ receives a completion; the provider signals its
 * channel. */
typedef void (*rocemu_cq_notify_fn)(void *arg);

int rocemu_cq_create(struct rocemu_engine *e, uint32_t cqe, rocemu_cq_notify_fn notify,
		     void *notify_arg, void *user_ctx, struct rocemu_cq **out);
/** ibv_create_cq_ex(3) flags the engine knows. */
#define ROCEMU_CQ_IGNORE_OVERRUN 1u /**< a full CQ drops the completion, nothing else */
/** rocemu_cq_create with flags (ROCEMU_CQ_*) and the ring from alloc (may be NULL). */
int rocemu_cq_create_ex(struct rocemu_engine *e, uint32_t cqe, unsigned flags,
			const struct rocemu_alloc *alloc, rocemu_cq_notify_fn notify,
			void *notify_arg, void *user_ctx, struct rocemu_cq **out);
/** Actual capacity (>= requested). */
uint32_t rocemu_cq_capacity(const struct rocemu_cq *cq);
int rocemu_cq_resize(struct rocemu_cq *cq, uint32_t cqe);
/** -EBUSY while QPs or SRQs still use it. */
int rocemu_cq_destroy(struct rocemu_cq *cq);
/**
 * Run a progress pass (try-lock) and pop up to n completions. Returns the
 * number popped (>= 0) or -errno.
 */
int rocemu_cq_poll(struct rocemu_cq *cq, int n, struct rocemu_wc *wc);
/** Arm for one notification: the next completion (solicited only: the next solicited/error one). */
int rocemu_cq_arm(struct rocemu_cq *cq, bool solicited_only);

/* ------------------------------------------------------------------------ */
/* XRC domains (ibv_open_xrcd(3))                                             */

/**
 * Open an XRC domain. Without an inode (by_inode false) a new private one.
 * With one (the file behind the fd the program gave: its st_dev, st_ino),
 * the domain of that file on this engine: found, it is shared (one more
 * reference; O_EXCL with create: -EINVAL); not found, it is made when create
 * (O_CREAT), else -EAGAIN (the kernel's answers).
 */
int rocemu_xrcd_open(struct rocemu_engine *e, bool by_inode, uint64_t dev, uint64_t ino,
		     bool create, bool excl, struct rocemu_xrcd **out);
/** Drop one reference; the last one while SRQs or QPs use the domain: -EBUSY. */
int rocemu_xrcd_close(struct rocemu_xrcd *x);

/* ------------------------------------------------------------------------ */
/* Shared receive queues                                                      */

int rocemu_srq_create(struct rocemu_pd *pd, uint32_t max_wr, uint32_t max_sge, uint32_t limit,
		      void *user_ctx, struct rocemu_srq **out);
/** An SRQ with everything ibv_create_srq_ex(3) can ask for. */
struct rocemu_srq_init {
	struct rocemu_pd *pd;
	uint32_t max_wr, max_sge;
	void *user_ctx;
	const struct rocemu_alloc *alloc; /**< the ring (parent domain), NULL: ours */
	struct rocemu_xrcd *xrcd;	  /**< an XRC SRQ's domain (with cq), else NULL */
	struct rocemu_cq *cq;		  /**< XRC SRQ: where its receive completions go */
};
int rocemu_srq_create_ex(const struct rocemu_srq_init *init, struct rocemu_srq **out);
/** The SRQ's number (ibv_get_srq_num(3)): XRC senders name it in the XRCETH. */
uint32_t rocemu_srq_num(const struct rocemu_srq *srq);
/** ibv_modify_srq: mask IBV_SRQ_MAX_WR / IBV_SRQ_LIMIT. */
int rocemu_srq_modify(struct rocemu_srq *srq, const struct ibv_srq_attr *attr, int mask);
int rocemu_srq_query(struct rocemu_srq *srq, struct ibv_srq_attr *attr);
int rocemu_srq_post_recv(struct rocemu_srq *srq, uint64_t wr_id, const struct ibv_sge *sg,
			 uint32_t num_sge);
int rocemu_srq_destroy(struct rocemu_srq *srq);

/* ------------------------------------------------------------------------ */
/* Address handles (UD)                                                       */

/**
 * LID-only address vectors, a rocemu extension (docs/verbs-provider.md): a
 * port's LID is the low 16 bits of its first IPv4 address, 0 when it has no
 * IPv4 address or those bits are 0 or >= 0xC000 (not a unicast LID).
 */
uint16_t rocemu_lid_of_port(const struct rocemu_port *port);
/** The LID of a peer GID: its low 16 bits when it is IPv4 in our /16, else 0. */
uint16_t rocemu_lid_of_gid(const struct rocemu_port *port, const uint8_t gid[16]);
/**
 * out = in when in->is_global; else the GRH of the host (our IPv4 &
 * 0xFFFF0000) | in->dlid, from our first IPv4 GID, hop limit 64. -EINVAL for
 * dlid 0 (or not unicast) or a port without IPv4 address.
 */
int rocemu_av_resolve(const struct rocemu_port *port, const struct ibv_ah_attr *in,
		      struct ibv_ah_attr *out);

/** A global attr, or a LID-only one (rocemu_av_resolve); sgid_index must exist. */
int rocemu_ah_create(struct rocemu_pd *pd, const struct ibv_ah_attr *attr, struct rocemu_ah **out);
int rocemu_ah_destroy(struct rocemu_ah *ah);

/* ------------------------------------------------------------------------ */
/* Queue pairs                                                                */

struct rocemu_qp_init {
	enum ibv_qp_type qp_type; /**< RC, UC, UD, RAW_PACKET, XRC_SEND or XRC_RECV */
	struct rocemu_cq *send_cq, *recv_cq;
	struct rocemu_srq *srq; /**< optional */
	struct ibv_qp_cap cap;	/**< in: requested; out: granted */
	bool sq_sig_all;
	void *user_ctx; /**< given back in async events */
	/** 0: the engine picks the QPN. 1: the GSI QP (QP1, UD only, one per engine;
	 *  -EBUSY if it exists). Anything else: -EINVAL. */
	uint32_t source_qpn;
	const struct rocemu_alloc *alloc; /**< where the SQ and RQ rings come from (NULL: ours) */
	/** XRC_RECV: its domain (rocemu_qp_create's pd is then NULL: a target QP has
	 * none, each request uses the PD of the XRC SRQ it names). XRC_SEND has a PD
	 * and a send CQ only. */
	struct rocemu_xrcd *xrcd;
};

/** The GSI QP's well-known Q_Key (IBA 13.4.6.1, C13-7). */
#define ROCEMU_GSI_QKEY 0x80010000u

int rocemu_qp_create(struct rocemu_pd *pd, struct rocemu_qp_init *init, struct rocemu_qp **out);
/**
 * ibv_open_qp(3): one more handle on the XRC_RECV QP qpn of xrcd (-EINVAL when
 * there is none). rocemu_qp_destroy of any handle drops one; the last destroys.
 */
int rocemu_qp_open(struct rocemu_xrcd *xrcd, uint32_t qpn, struct rocemu_qp **out);
/**
 * The handles of an XRC target share one QP and one user_ctx, the one its
 * async events carry: to when from is NULL or is the current one. A handle
 * going away while others stay moves it away from itself (to NULL: the
 * events are dropped rather than naming a freed handle).
 */
void rocemu_qp_retarget_events(struct rocemu_qp *qp, void *from, void *to);
uint32_t rocemu_qp_num(const struct rocemu_qp *qp);
enum ibv_qp_state rocemu_qp_state(const struct rocemu_qp *qp);
/**
 * ibv_modify_qp: validates state transition and the required/optional mask
 * for the QP type (IBA 11.2.5 / table 98); on -EINVAL nothing changed.
 */
int rocemu_qp_modify(struct rocemu_qp *qp, const struct ibv_qp_attr *attr, int mask);
/** Largest send rate limit (kbit/s) and bucket (bytes) a QP takes. */
#define ROCEMU_RATE_MAX_KBPS  2000000000u
#define ROCEMU_RATE_MAX_BURST (16u << 20)
/**
 * Limit the QP's sends to kbps kbit/s (0: no limit) with a bucket of burst
 * bytes (0: one path MTU's frame), as ibv_modify_qp_rate_limit(3). RC, UC,
 * UD and raw packet QPs. -EINVAL beyond the maxima.
 */
int rocemu_qp_rate_limit(struct rocemu_qp *qp, uint32_t kbps, uint32_t burst);
int rocemu_qp_query(struct rocemu_qp *qp, struct ibv_qp_attr *attr, int mask,
		    struct ibv_qp_init_attr *init);
int rocemu_qp_destroy(struct rocemu_qp *qp);
/**
 * Completions of QP qpn still queued in its CQs, not yet polled; 0 when no
 * such QP exists (takes the engine lock). rocemu's librdmacm holds a peer's
 * DISCONNECTED while there are some (docs/rdmacm.md, "Disconnection").
 */
unsigned rocemu_engine_queued_completions(struct rocemu_engine *e, uint32_t qpn);

/*
 * FLUSH (IBA annex A19) as rdma-core 45 and later spell it: rdma-core 44's
 * <infiniband/verbs.h> has ATOMIC WRITE but not FLUSH, so the engine names
 * the values itself (the same numbers, so a newer header's constants work).
 */
#define ROCEMU_WR_FLUSH		       ((enum ibv_wr_opcode)14) /**< IBV_WR_FLUSH */
#define ROCEMU_WC_FLUSH		       ((enum ibv_wc_opcode)8)	/**< IBV_WC_FLUSH */
#define ROCEMU_ACCESS_FLUSH_GLOBAL     (1u << 8)		/**< IBV_ACCESS_FLUSH_GLOBAL */
#define ROCEMU_ACCESS_FLUSH_PERSISTENT (1u << 9)		/**< IBV_ACCESS_FLUSH_PERSISTENT */
#define ROCEMU_FLUSH_GLOBAL	       1u /**< IBV_FLUSH_GLOBAL: placement type bit */
#define ROCEMU_FLUSH_PERSISTENT	       2u /**< IBV_FLUSH_PERSISTENT */
#define ROCEMU_FLUSH_RANGE	       0u /**< IBV_FLUSH_RANGE: selectivity */
#define ROCEMU_FLUSH_MR		       1u /**< IBV_FLUSH_MR: the whole region */

/** A send work request: the fields of ibv_send_wr, flattened. */
struct rocemu_send_wr {
	uint64_t wr_id;
	enum ibv_wr_opcode opcode;
	unsigned send_flags;	  /**< IBV_SEND_{FENCE,SIGNALED,SOLICITED,INLINE} */
	uint32_t imm_data;	  /**< network order */
	uint32_t invalidate_rkey; /**< SEND_WITH_INV, LOCAL_INV */
	const struct ibv_sge *sg_list;
	/** IBV_WR_BIND_MW: the window's new R_Key in rkey, the window's start in
	 * remote_addr (rocemu_mem_bind has the rules) */
	uint64_t bind_length;
	uint32_t bind_lkey;   /**< the region's lkey; 0: none (type 1 unbind) */
	unsigned bind_access; /**< ibv_mw_bind_info.mw_access_flags */
	uint8_t bind_type;    /**< IBV_MW_TYPE_1 (ibv_bind_mw) or _2 */
	uint32_t num_sge;
	/** With IBV_SEND_INLINE the data is copied at post time from sg_list (addr/length; lkey
	 * ignored). */
	uint64_t remote_addr;
	uint32_t rkey;
	uint64_t compare_add; /**< atomics */
	uint64_t swap;
	struct rocemu_ah *ah; /**< UD */
	uint32_t remote_qpn;  /**< UD */
	uint32_t remote_qkey; /**< UD */
	uint8_t atomic_wr[8]; /**< IBV_WR_ATOMIC_WRITE: the 8 bytes, as given */
	uint32_t flush_len;   /**< ROCEMU_WR_FLUSH: range length (selectivity RANGE) */
	uint8_t flush_type;   /**< ROCEMU_FLUSH_GLOBAL | ROCEMU_FLUSH_PERSISTENT */
	uint8_t flush_level;  /**< ROCEMU_FLUSH_RANGE or ROCEMU_FLUSH_MR */
	uint32_t xrc_srqn;    /**< XRC_SEND: the remote XRC SRQ the message is for */
};

/**
 * Post one send WR. -EINVAL bad WR (opcode not valid for the QP type, too
 * many SGEs, inline too large...), -ENOMEM send queue full, -EINVAL if the
 * QP is in RESET/INIT/RTR (IBA: posting to SQ is allowed from RTS, and from
 * ERR where it completes with FLUSH_ERR).
 */
int rocemu_qp_post_send(struct rocemu_qp *qp, const struct rocemu_send_wr *wr);
/** Post several; *bad = index of the first failing one. Takes the lock once. */
int rocemu_qp_post_send_batch(struct rocemu_qp *qp, const struct rocemu_send_wr *wrs, unsigned n,
			      unsigned *bad);
/* ------------------------------------------------------------------------ */
/* Raw packet QPs and steering (IBV_QPT_RAW_PACKET, ibv_create_flow(3))      */

/**
 * What a flow rule matches; a field matches when (frame & mask) == (value &
 * mask), an all-zero mask matching anything. Multi-byte values in host
 * order; addresses as on the wire (IPv4 in the first 4 bytes of the 16).
 */
struct rocemu_flow_match {
	uint8_t dst_mac[6], dst_mac_mask[6];
	uint8_t src_mac[6], src_mac_mask[6];
	uint16_t ether_type, ether_type_mask;
	uint16_t vlan_tag, vlan_tag_mask; /**< a frame without a tag has tag 0 */
	uint8_t ip_version;		  /**< 0: no IP layer asked for; 4 or 6 */
	uint8_t src_ip[16], src_ip_mask[16];
	uint8_t dst_ip[16], dst_ip_mask[16];
	uint8_t ip_proto, ip_proto_mask; /**< IPv4 protocol / IPv6 next header */
	uint8_t l4;			 /**< 0, IPPROTO_TCP or IPPROTO_UDP */
	uint16_t src_port, src_port_mask;
	uint16_t dst_port, dst_port_mask;
};

/** Rule types of ibv_create_flow(3). */
enum rocemu_flow_type {
	ROCEMU_FLOW_NORMAL = 0,	 /**< matching frames go to the QP instead of the port */
	ROCEMU_FLOW_ALL_DEFAULT, /**< a copy of every frame no NORMAL rule took */
	ROCEMU_FLOW_MC_DEFAULT,	 /**< a copy of every multicast frame no NORMAL rule took */
	ROCEMU_FLOW_SNIFFER,	 /**< a copy of every frame the port receives */
};

struct rocemu_flow_attr {
	enum rocemu_flow_type type;
	uint16_t priority; /**< NORMAL: the lowest value wins when several match */
	struct rocemu_flow_match match;
	bool has_tag; /**< IBV_FLOW_SPEC_ACTION_TAG: completions carry tag */
	uint32_t tag;
	bool drop; /**< IBV_FLOW_SPEC_ACTION_DROP: matching frames are discarded */
};

struct rocemu_flow;
/** A rule steering to qp (a raw packet QP). -EINVAL for another QP type. */
int rocemu_flow_create(struct rocemu_qp *qp, const struct rocemu_flow_attr *attr,
		       struct rocemu_flow **out);
int rocemu_flow_destroy(struct rocemu_flow *flow);

/**
 * Attach a UD QP to the multicast group gid (an IP multicast GID) / detach
 * it. 0 (attaching twice is no error); -EINVAL (not UD, not a multicast GID;
 * detach: not attached), -ENOMEM (ROCEMU_MCAST_GROUPS groups or
 * ROCEMU_MCAST_QP_ATTACH QPs in the group), -EOPNOTSUPP (a port of a rocemu
 * host). A QP attached to a group cannot be destroyed (-EBUSY).
 */
int rocemu_qp_attach_mcast(struct rocemu_qp *qp, const uint8_t gid[16]);
int rocemu_qp_detach_mcast(struct rocemu_qp *qp, const uint8_t gid[16]);

/** Post a receive WR (-EINVAL if the QP uses an SRQ or is in RESET). */
int rocemu_qp_post_recv(struct rocemu_qp *qp, uint64_t wr_id, const struct ibv_sge *sg,
			uint32_t num_sge);

#endif /* ROCEMU_ENGINE_H */
