/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `rocemu host`: one emulated NIC for every process on a host (docs/host.md).
 * host_main.c: options, runtime directory, detach, lifetime;
 * host_ctl.c: the control socket (attach, QPNs, resolve, stat requests);
 * host_switch.c: the forwarding thread, the process rings, the QPN table;
 * host_stat.c: the counters as text or JSON, and `rocemu stat`.
 *
 * Locking: everything below (processes, QPN table, neighbour table) is
 * guarded by the uplink port's engine lock (rocemu_port_lock). The
 * forwarding thread holds it through each progress pass (the port's upper
 * layer, host_switch.c, runs inside the pass); the control thread takes it
 * for each request with host_lock, which the forwarding thread lets pass
 * before its next pass (a request never waits behind the data path).
 */
#ifndef ROCEMU_TOOLS_HOST_H
#define ROCEMU_TOOLS_HOST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "rocemu_host.h"
#include "rocemu_port.h"

#define HOST_MAX_PROCS	   ROCEMU_HOST_MAX_PROCS
#define HOST_MAX_ALLOWED   16
#define HOST_QPN_SLOTS	   (1u << 16)
#define HOST_QPN_FIRST	   0x11u
#define HOST_QPN_MASK	   0xFFFFFFu
#define HOST_QPN_MULTICAST 0xFFFFFFu
/* default quiet time of a released QPN (a peer's CM time-wait) */
#define HOST_QPN_QUIET_MS_DEFAULT 10000u

enum host_qpn_state {
	HOST_QPN_FREE = 0,
	HOST_QPN_LIVE,
	HOST_QPN_QUIET, /* released; free again at quiet_until */
};

/* One slot of the QPN table: the low 16 bits of a QPN (the host never
 * hands out two live numbers with the same slot). */
struct host_qpn {
	uint32_t qpn;
	uint8_t state;
	uint16_t proc;	      /* owner's index + 1 while LIVE */
	uint64_t quiet_until; /* ns, while QUIET */
	uint64_t created_ns;
	uint64_t frames_in, bytes_in; /* delivered to this QP */
	uint64_t drops_in;	      /* for it, not delivered (ring full) */
};

struct host_proc {
	bool used;
	unsigned index;
	int sock;
	pid_t pid;
	uid_t uid;
	char comm[32];
	uint64_t attached_ns;
	uint32_t gen; /* attach generation (host-wide counter) */
	int region_fd;
	struct rocemu_host_region *region;
	size_t region_size;
	struct rocemu_host_ring *up, *down;
	/* rings into it: ring 0 (down) is ours, ring k >= 1 process writer[k] */
	int inbound_fd;
	struct rocemu_host_inbound *inbound;
	size_t inbound_size;
	int16_t writer[ROCEMU_HOST_INBOUND_RINGS];
	unsigned n_pairs; /* direct rings it writes into others */
	bool gsi;	  /* has a GSI QP: gets QP1 frames */
	unsigned n_qps;	  /* live QPNs */
	bool want_ring;	  /* frames put in `down` since the last ring check */
	/* counters (frames through the host) */
	uint64_t up_frames, up_bytes;	  /* from the process */
	uint64_t down_frames, down_bytes; /* to the process */
	uint64_t drop_ring_full;	  /* to it, its ring full */
	uint64_t drop_bad;		  /* from it: bad slot, not RoCE */
	uint64_t rings;			  /* futex wakes of its thread */
	uint64_t qpns_allocated;
};

/* host-private side of a published neighbour entry */
struct host_neigh_priv {
	unsigned src_index;
	uint64_t next_try_ns;
	uint64_t last_used_ns;
};

struct host {
	char name[ROCEMU_HOST_NAME_MAX];
	char dir[ROCEMU_PATH_MAX];
	char ctl_path[ROCEMU_PATH_MAX + 16];
	struct rocemu_port_config cfg;
	struct rocemu_port *port;
	uint32_t slot_size;
	uint32_t quiet_ms;
	uid_t allowed_uids[HOST_MAX_ALLOWED];
	unsigned n_allowed_uids;
	gid_t allowed_gids[HOST_MAX_ALLOWED];
	unsigned n_allowed_gids;
	bool verbose;
	bool no_direct; /* --no-direct: every frame through the forwarding thread */

	/* shared pages */
	int page_fd, page_ro_fd, bell_fd;
	struct rocemu_host_page *page;
	struct rocemu_host_bell *bell;
	struct host_neigh_priv neigh_priv[ROCEMU_HOST_NEIGH_SLOTS];
	uint64_t neigh_next_ns;

	/* processes and QPNs (engine lock) */
	struct host_proc procs[HOST_MAX_PROCS];
	unsigned n_procs;
	uint32_t next_gen;
	struct host_qpn *qpns; /* HOST_QPN_SLOTS */
	uint32_t qpn_next;
	unsigned n_qpns_live;
	uint64_t started_ns;

	/* host-wide counters (engine lock) */
	uint64_t switched_frames; /* delivered to a process */
	uint64_t uplink_frames;	  /* from processes to the uplink or loopback */
	uint64_t drop_no_qp;	  /* to a QPN nobody owns */
	uint64_t drop_qp_quiet;	  /* to a QPN released lately (its owner gone) */
	uint64_t drop_proc_bad;	  /* malformed from a process */
	uint64_t procs_attached;  /* since start */
	uint64_t procs_refused;
	uint64_t procs_gone;

	/* threads */
	pthread_t fwd_thread, ctl_thread;
	atomic_bool stop;
	bool spin;		 /* --progress-cpu: the forwarding thread never sleeps */
	atomic_uint lock_wanted; /* threads waiting in host_lock */
	int ctl_listen_fd;
	int ctl_wake_fd; /* eventfd: stop the control thread */
};

/* host_switch.c */
/* The engine lock for anyone but the forwarding thread: it is handed over
 * at the forwarding thread's next pass, however busy the data path is (a
 * glibc mutex is not fair: a thread that unlocks and locks again at once
 * keeps it). */
void host_lock(struct host *h);
void host_unlock(struct host *h);
int host_switch_init(struct host *h, char *err, size_t errlen);
int host_switch_start(struct host *h);
void host_switch_stop(struct host *h);
/* attach / detach a process (engine lock held) */
int host_proc_create(struct host *h, int sock, pid_t pid, uid_t uid, struct host_proc **out);
void host_proc_destroy(struct host *h, struct host_proc *p);
int host_qpn_alloc(struct host *h, struct host_proc *p, bool gsi, uint32_t *qpn);
int host_qpn_free(struct host *h, struct host_proc *p, uint32_t qpn);
/* a direct ring from p into the process of index owner: 0, *ring and *fd
 * (the owner's inbound region, not to be closed), or -errno */
int host_pair(struct host *h, struct host_proc *p, unsigned owner, unsigned *ring, int *fd);
void host_resolve_request(struct host *h, unsigned src_index, const uint8_t gid[16]);
void host_switch_fini(struct host *h);

/* host_ctl.c */
int host_ctl_open(struct host *h, char *err, size_t errlen);
int host_ctl_start(struct host *h);
void host_ctl_stop(struct host *h);

/* host_stat.c: the counters as text or JSON into a malloc'd string
 * (engine lock held). */
char *host_stat_render(struct host *h, bool json);

#endif
