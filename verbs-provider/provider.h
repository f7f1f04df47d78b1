/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Internals of rocemu's drop-in libibverbs: the objects behind the public
 * ibv_* structures, and the helpers every verb file shares.
 *
 * Each public object (ibv_context, ibv_pd, ibv_mr, ibv_cq, ...) is the first
 * member of a provider object that also holds the engine object it stands
 * for. Programs only ever see the public part.
 *
 * Exports: a function defined here is exported by marking it
 * ROCEMU_PUBLIC(name) on the line after its body; gen_abi.py finds the mark,
 * binds the name to the default version the installed libibverbs gives it,
 * and leaves it out of the generated error stubs.
 */
#ifndef ROCEMU_VERBS_PROVIDER_H
#define ROCEMU_VERBS_PROVIDER_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <infiniband/verbs.h>

#include "rocemu_engine.h"
#include "rocemu_port.h"
#include "rocemu_config.h"
#include "abi_symver.h"
#include "cm_hooks.h"

#define ROCEMU_PUBLIC(name) ROCEMU_SYMVER_##name

/** The sysfs directory rocemu devices pretend to live in. */
#define ROCEMU_SYSFS_CLASS "/sys/class/infiniband"
#define ROCEMU_MAX_DEVICES 16

/** enum ibv_gid_type_sysfs of rdma-core's driver.h (not installed). */
#define ROCEMU_GID_TYPE_SYSFS_ROCE_V2 1

/* ------------------------------------------------------------------------ */
/* Devices and contexts (device.c)                                            */

struct rocemu_vcontext;

#define ROCEMU_UNRESOLVED_SLOTS 8

struct rocemu_vdevice {
	struct ibv_device ibdev; /**< what programs see; must be first */
	struct rocemu_port_config cfg;
	unsigned index;
	pthread_mutex_t lock;	      /**< guards engine, refs, guid */
	struct rocemu_engine *engine; /**< created at first open, shared */
	unsigned refs;
	struct rocemu_vcontext *contexts; /**< open contexts (async event fan-out) */
	uint64_t guid;			  /**< node GUID (EUI-64 of the MAC), network order */
	bool guid_known;
	/** addresses the engine could not resolve, and when that was last said
	 * (async.c; under the engine lock) */
	struct {
		uint8_t gid[16];
		uint64_t said_ns;
	} unresolved[ROCEMU_UNRESOLVED_SLOTS];
};

struct rocemu_async_event {
	struct rocemu_async_event *next;
	struct ibv_async_event ev;
	uint32_t *reported; /**< the object's count of events handed out, or NULL */
};

struct rocemu_vcontext {
	struct verbs_context vctx; /**< vctx.context is what programs see */
	/** right after vctx: what rocemu's librdmacm reaches (cm_hooks.h) */
	const struct rocemu_cm_hooks *cm_hooks;
	struct rocemu_vdevice *dev;
	struct rocemu_engine *engine;
	struct rocemu_port *port;
	struct rocemu_vcontext *next; /**< in dev->contexts */
	pthread_mutex_t ev_lock;      /**< guards the async event queue */
	struct rocemu_async_event *ev_head, *ev_tail;
	struct rocemu_vfile *file; /**< what cmd_fd stands for: its objects' handles (import.c) */
	unsigned fork_gen;	   /**< rocemu_fork_gen when it was opened */
};

_Static_assert(offsetof(struct rocemu_vcontext, cm_hooks) == sizeof(struct verbs_context),
	       "cm_hooks.h finds the hooks right after the verbs_context");
extern const struct rocemu_cm_hooks rocemu_cm_hooks_impl;

static inline struct rocemu_vcontext *to_vctx(struct ibv_context *ctx)
{
	return (struct rocemu_vcontext *)((char *)ctx -
					  offsetof(struct rocemu_vcontext, vctx.context));
}

/** Guards every device's contexts list (taken inside the engine lock by event fan-out). */
extern pthread_mutex_t rocemu_ctx_list_lock;
/** Queue an async event on one context (any thread, no engine lock needed). */
void rocemu_async_push(struct rocemu_vcontext *c, const struct ibv_async_event *ev,
		       uint32_t *reported);
void rocemu_fd_take_counts(int fd, unsigned n);
uint32_t rocemu_async_forget(struct rocemu_vcontext *c, uint32_t *reported);
void rocemu_async_wait_acked(pthread_mutex_t *m, pthread_cond_t *cond, const uint32_t *completed,
			     uint32_t reported);
/** The engine's event sink for a device (engine lock held). */
void rocemu_async_from_engine(void *arg, const struct rocemu_event *ev);
/** All devices; n gets the count. Loads the configuration once. */
struct rocemu_vdevice **rocemu_devices(unsigned *n);
uint64_t rocemu_guid_from_mac(const uint8_t mac[6]);
/** Port state reported to programs (memif: active once started, see device.c). */
bool rocemu_vdevice_port_active(const struct rocemu_vdevice *d, struct rocemu_port *port);
/** rocemu run's sysfs view ($ROCEMU_SYSFS_VIEW): rewrite the device's files from its
 * engine (sysfs.c; called when the engine is created). */
void rocemu_sysfs_view_refresh(struct rocemu_vdevice *d);
/** Device attributes the way ibv_query_device reports them. */
void rocemu_fill_device_attr(struct rocemu_vcontext *c, struct ibv_device_attr *a);
struct rocemu_vfile;
/** A new context on d, on command file f through cmd_fd, or on a new file of
 * its own when f is NULL (device.c); NULL and errno on failure. */
struct ibv_context *rocemu_context_new(struct rocemu_vdevice *d, struct rocemu_vfile *f,
				       int cmd_fd);

/* ------------------------------------------------------------------------ */
/* Command files and handles (import.c)                                       */

/** What a handle names: the objects ibv_import_* can import. */
enum rocemu_vobj_type {
	ROCEMU_VOBJ_PD = 1,
	ROCEMU_VOBJ_MR,
	ROCEMU_VOBJ_DM,
};

/** A new command file for a context on d: *fd a memfd named after the device. */
int rocemu_vfile_open(struct rocemu_vdevice *d, struct rocemu_vfile **out, int *fd);
/** A context leaves its file; the last one frees it. */
void rocemu_vfile_put(struct rocemu_vfile *f);
/** True in a child forked after the file was opened (the parent's file). */
bool rocemu_vfile_foreign(const struct rocemu_vfile *f);
/** Name the engine object obj (and aux, for an MR its device memory) by a new handle. */
int rocemu_handle_add(struct rocemu_vfile *f, enum rocemu_vobj_type type, void *obj, void *aux,
		      uint32_t *handle);
/** Forget a handle (its object failed to be made whole). */
void rocemu_handle_drop(struct rocemu_vfile *f, uint32_t handle);
/** The object a handle names: -ENOENT for none, -EINVAL for another type. */
int rocemu_handle_get(struct rocemu_vfile *f, enum rocemu_vobj_type type, uint32_t handle,
		      void **obj, void **aux);
/**
 * Destroy the object handle names with destroy(obj, aux) (0 or a negative
 * errno) and forget the handle, under the file's lock: -EINVAL, nothing
 * touched, when the handle no longer names obj (destroyed through another
 * wrapper already).
 */
int rocemu_handle_destroy(struct rocemu_vfile *f, enum rocemu_vobj_type type, uint32_t handle,
			  void *obj, int (*destroy)(void *obj, void *aux));

/** f is another process's file (imported across processes). */
bool rocemu_vfile_remote(const struct rocemu_vfile *f);
/** The pid of the process that opened f. */
pid_t rocemu_vfile_pid(const struct rocemu_vfile *f);
/** The context's engine is up on port: publish which host it is attached to. */
void rocemu_vfile_attached(struct rocemu_vfile *f, struct rocemu_port *port);
/** Publish an MR (again, after a rereg) for other processes to import. */
void rocemu_handle_publish_mr(struct rocemu_vfile *f, uint32_t handle, uint32_t pd_handle,
			      const struct ibv_mr *mr, const void *addr, bool implicit,
			      uint64_t iova, unsigned access);
/** Publish device memory: where its bytes are, for other processes to import. */
void rocemu_handle_publish_dm(struct rocemu_vfile *f, uint32_t handle, uint64_t addr,
			      uint64_t length);
/** Another process's device memory of ctx's file: *f describes it, *file holds the
 * mapping f points into (rocemu_vfile_put when done); -ENOENT, -EINVAL as import. */
int rocemu_remote_dm(struct ibv_context *ctx, uint32_t handle, struct rocemu_mem_foreign *f,
		     struct rocemu_vfile **file);
/**
 * Drop a wrapper of another process's PD or MR (import.c): its stand-in in
 * our engine goes with the last one. destroy (ibv_dealloc_pd): -EBUSY while
 * our objects use the PD; unimport leaves such a PD until they are gone.
 */
int rocemu_remote_drop(struct ibv_context *ctx, enum rocemu_vobj_type type, uint32_t handle,
		       bool destroy);

/* ------------------------------------------------------------------------ */
/* A child after fork() (fork.c)                                              */

/** Bumped in a child after fork(). */
extern unsigned rocemu_fork_gen;
/** Register the fork handlers (once, at the first context). */
void rocemu_fork_watch(void);
/** Say once why a verb on an inherited context fails; errno EIO; returns EIO. */
int rocemu_inherited_fail(struct ibv_context *ctx);
/** rocemu_inherited_fail, returning NULL. */
void *rocemu_inherited_null(struct ibv_context *ctx);

#define ROCEMU_CTX_OF(obj) ((obj) ? (obj)->context : NULL)

/** True for a context of the parent process, in a child after fork(): its
 * engine is the parent's, and every verb on it fails (EIO). */
static inline bool rocemu_dead(struct ibv_context *ctx)
{
	return ctx && to_vctx(ctx)->fork_gen != rocemu_fork_gen;
}

/* ------------------------------------------------------------------------ */
/* Objects                                                                    */

struct rocemu_vtd {
	struct ibv_td td;
	unsigned users; /**< parent domains on it (ibv_dealloc_td: EBUSY) */
};

/**
 * A protection domain, or a parent domain (ibv_alloc_parent_domain(3)): a
 * PD for every verb that takes one, standing for its PD, with a thread
 * domain and the application's allocators for queue memory.
 */
struct rocemu_vpd {
	struct ibv_pd pd;
	struct rocemu_pd *epd;	      /**< a parent domain's is its PD's */
	struct rocemu_vpd *parent_of; /**< parent domain: the PD it stands for, else NULL */
	struct rocemu_vtd *td;	      /**< parent domain: its thread domain, or NULL */
	void *(*alloc)(struct ibv_pd *pd, void *pd_context, size_t size, size_t alignment,
		       uint64_t resource_type);
	void (*free)(struct ibv_pd *pd, void *pd_context, void *ptr, uint64_t resource_type);
	void *pd_context;
	struct rocemu_alloc ealloc; /**< the engine's view of alloc/free */
	unsigned users;		    /**< parent domains on a PD; objects on a parent domain */
	bool remote; /**< imported from another process: epd stands for its PD (import.c) */
};

static inline struct rocemu_vpd *to_vpd(struct ibv_pd *pd)
{
	return (struct rocemu_vpd *)pd;
}

/** The engine allocator of pd if it is a parent domain with allocators, else NULL. */
const struct rocemu_alloc *rocemu_pd_queue_alloc(struct ibv_pd *pd);
/**
 * An object created on pd starts using it: a parent domain counts its users.
 * Returns pd when it counted (a parent domain), NULL for a plain PD; the object
 * keeps that and hands it to rocemu_pd_unuse when it goes. It must not keep a
 * plain PD to look at later: that may be an imported one, and
 * ibv_unimport_pd(3) frees it while what was created on it lives on (rdma-core's
 * test_shared_pd destroys its QPs after unimporting their PD).
 */
struct ibv_pd *rocemu_pd_use(struct ibv_pd *pd);
void rocemu_pd_unuse(struct ibv_pd *counted);

struct rocemu_vmr {
	struct ibv_mr mr;
	struct rocemu_mr *emr;
	struct rocemu_pd *epd; /**< mr.pd's (which may be unimported and gone) */
	struct rocemu_dm *edm; /**< ibv_reg_dm_mr: the device memory it covers, else NULL */
	bool remote;	       /**< imported from another process (import.c) */
};

/** A memory window: ibv_mw's rkey is the provider's view (ibv_bind_mw moves it). */
struct rocemu_vmw {
	struct ibv_mw mw;
	struct rocemu_mw *emw;
	struct rocemu_pd *epd;	      /**< mw.pd's (which may be unimported and gone) */
	struct ibv_pd *parent_domain; /**< counted in its users (rocemu_pd_use), else NULL */
};

struct ibv_mw *rocemu_op_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int rocemu_op_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind);
int rocemu_op_dealloc_mw(struct ibv_mw *mw);
/**
 * The engine's fields of a bind WR of window mw to the new R_Key rkey
 * (type 2 through ibv_post_send/ibv_wr_bind_mw, type 1 through
 * ibv_bind_mw). EINVAL when the WR cannot name that window: no window,
 * another device's, an rkey whose index part is not the window's, a region
 * of another PD.
 */
int rocemu_bind_wr(struct ibv_mw *mw, uint32_t rkey, const struct ibv_mw_bind_info *info,
		   enum ibv_mw_type type, struct rocemu_send_wr *out);

struct rocemu_vchannel;

struct rocemu_vcq {
	struct ibv_cq_ex cqx; /**< starts with struct ibv_cq's layout */
	struct rocemu_cq *ecq;
	struct rocemu_vcontext *ctx;
	struct rocemu_vchannel *channel;
	uint64_t wc_flags;	      /**< IBV_WC_EX_WITH_* requested */
	struct rocemu_wc cur;	      /**< the completion start/next_poll popped */
	struct ibv_pd *parent_domain; /**< IBV_CQ_INIT_ATTR_MASK_PD: whose allocators it used */
	/* Completion channel bookkeeping (guarded by the channel's lock). */
	struct rocemu_vcq *ch_next;
	unsigned ch_pending;
	uint32_t comp_reported;	 /**< handed out by ibv_get_cq_event (channel lock) */
	uint32_t async_reported; /**< handed out by ibv_get_async_event (ev_lock) */
};

struct rocemu_vchannel {
	struct ibv_comp_channel ch;
	pthread_mutex_t lock;
	struct rocemu_vcq *head, *tail; /**< CQs with an undelivered event */
};

struct rocemu_vsrq {
	struct ibv_srq srq;
	struct rocemu_srq *esrq;
	struct rocemu_vcontext *ctx;
	uint32_t events_reported; /**< handed out by ibv_get_async_event (ev_lock) */
};

struct rocemu_vxrcd {
	struct ibv_xrcd xrcd; /**< what programs see */
	struct rocemu_xrcd *exrcd;
};

static inline struct rocemu_vxrcd *to_vxrcd(struct ibv_xrcd *x)
{
	return (struct rocemu_vxrcd *)x;
}

struct rocemu_vah {
	struct ibv_ah ah;
	struct rocemu_ah *eah;
};

struct rocemu_wr_aux {
	uint32_t first_sge;
	bool inline_copy; /**< SGE addrs are offsets into batch.inl until complete */
};

/** State of one ibv_wr_start()..ibv_wr_complete() batch. */
struct rocemu_wr_batch {
	struct rocemu_send_wr *wrs;
	unsigned n, cap;
	struct ibv_sge *sges;	   /**< sg_list of each WR, by index (fixed up at complete) */
	struct rocemu_wr_aux *aux; /**< per WR: where its SGEs are */
	unsigned n_sge, cap_sge;
	uint8_t *inl; /**< inline data copied at set time */
	size_t n_inl, cap_inl;
	int err; /**< first error seen since wr_start */
};

struct rocemu_vqp {
	struct ibv_qp_ex qpx; /**< qpx.qp_base is what programs see */
	struct rocemu_qp *eqp;
	struct rocemu_vcontext *ctx;
	bool has_qp_ex; /**< created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS */
	uint64_t send_ops_flags;
	uint32_t max_inline;
	struct rocemu_wr_batch batch;
	struct ibv_pd *parent_domain; /**< counted in its users (rocemu_pd_use), else NULL */
	uint32_t events_reported;     /**< handed out by ibv_get_async_event (ev_lock) */
};

static inline struct rocemu_vqp *to_vqp(struct ibv_qp *qp)
{
	return (struct rocemu_vqp *)qp;
}

struct rocemu_vflow {
	struct ibv_flow flow;
	struct rocemu_flow *eflow;
};

/* Per-file entry points used by the context ops table. */
int rocemu_op_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int rocemu_op_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int rocemu_op_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int rocemu_op_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int rocemu_op_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
struct ibv_cq_ex *rocemu_op_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr);
struct ibv_qp *rocemu_op_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr);
struct ibv_srq *rocemu_op_create_srq_ex(struct ibv_context *ctx, struct ibv_srq_init_attr_ex *attr);
struct ibv_xrcd *rocemu_op_open_xrcd(struct ibv_context *ctx, struct ibv_xrcd_init_attr *attr);
int rocemu_op_close_xrcd(struct ibv_xrcd *xrcd);
int rocemu_op_get_srq_num(struct ibv_srq *srq, uint32_t *num);
struct ibv_qp *rocemu_op_open_qp(struct ibv_context *ctx, struct ibv_qp_open_attr *attr);
/* Device memory (dm.c) */
struct ibv_dm *rocemu_op_alloc_dm(struct ibv_context *ctx, struct ibv_alloc_dm_attr *attr);
int rocemu_op_free_dm(struct ibv_dm *dm);
struct ibv_mr *rocemu_op_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t offset,
				   size_t length, unsigned int access);
/** m registered on device memory dm, from offset, on the engine's PD epd:
 * 0 or a negative errno. */
int rocemu_dm_mr_reg(struct rocemu_vmr *m, struct ibv_dm *dm, struct rocemu_pd *epd,
		     uint64_t offset, size_t length, unsigned access);
/**
 * ibv_reg_mr and ibv_reg_dm_mr: an MR on pd over application memory (dm
 * NULL: addr, which peers address as iova) or over device memory dm (from
 * offset addr, zero-based). NULL with errno on failure. ibv_dereg_mr undoes
 * both.
 */
struct ibv_mr *rocemu_reg_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t addr, size_t length,
			     uint64_t iova, unsigned access);
/** ibv_mr's addr, length and keys from the engine (addr NULL for a device memory region). */
void rocemu_mr_sync(struct rocemu_vmr *m);
int rocemu_op_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
			struct ibv_sge *sg, uint32_t n);
int rocemu_op_modify_qp_rate_limit(struct ibv_qp *qp, struct ibv_qp_rate_limit_attr *attr);
int rocemu_op_query_device_ex(struct ibv_context *ctx, const struct ibv_query_device_ex_input *in,
			      struct ibv_device_attr_ex *attr, size_t attr_size);
int rocemu_op_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr,
			 size_t attr_len);
int rocemu_op_query_rt_values(struct ibv_context *ctx, struct ibv_values_ex *values);
struct ibv_td *rocemu_op_alloc_td(struct ibv_context *ctx, struct ibv_td_init_attr *attr);
int rocemu_op_dealloc_td(struct ibv_td *td);
struct ibv_pd *rocemu_op_alloc_parent_domain(struct ibv_context *ctx,
					     struct ibv_parent_domain_init_attr *attr);
struct ibv_flow *rocemu_op_create_flow(struct ibv_qp *qp, struct ibv_flow_attr *attr);
int rocemu_op_destroy_flow(struct ibv_flow *flow);
/** CAP_NET_RAW in the effective set (raw packet QPs and flows ask for it, flow.c). */
bool rocemu_has_cap_net_raw(void);

/** Set errno from a negative engine return and return NULL. */
static inline void *rocemu_null_errno(int rc)
{
	errno = rc < 0 ? -rc : EINVAL;
	return NULL;
}

#endif /* ROCEMU_VERBS_PROVIDER_H */
