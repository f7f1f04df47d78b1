/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The emulated RoCE host port: one DPDK ethdev (memif, af_packet, af_xdp, any
 * PMD) plus what a host's NIC and stack do below the transport: addressing and
 * the GID table, ARP/ND, ICMP echo, internal loopback for frames to our own
 * GIDs, capture to pcap, drop counters, and progress (the engine lock, a
 * progress function any thread may call, and a progress thread that sleeps
 * when idle). The transport plugs in as the "upper layer".
 *
 * Threads, locking and progress: the contract between the engine and the port
 * -------------------------------------------------------------------------
 * Three kinds of threads touch a port:
 *  - application threads, inside a verb, through the engine (transport);
 *  - the port's progress thread (started by rocemu_port_open, every signal
 *    blocked), which runs passes and sleeps when there is nothing to do;
 *  - EAL's interrupt thread, where link drivers keep their control work
 *    (memif's connections and reconnect watch); it only tries the lock.
 *
 * 1. One lock per port, the engine lock (rocemu_port_lock/unlock). Everything
 *    above the port (transport, memory tables, CQs) lives under it. The data
 *    path calls below (rocemu_port_resolve, _tx, _flush, _alloc_mbuf,
 *    _tx_room, _pass_now, _count, _progress_locked) need it held.
 *
 * 2. A progress pass (rx burst and dispatch, neighbour and link timers, the
 *    upper layer's poll, tx flush) runs in whichever thread gets the lock:
 *    rocemu_port_progress() only tries it (0 when busy). The upper layer's
 *    rx, poll, has_work and next_due run inside a pass, lock held.
 *
 * 3. One bracket per verb, and one word about what the application did.
 *    Every verb that posts, polls or changes what a pass must do enters with
 *    rocemu_port_verb_enter(port, ROCEMU_VERB_POLL | _POST | _CONTROL), which
 *    takes the engine lock (a poll runs a pass first, or waits for the one
 *    running; a post runs one when none ran for 20 us, and holds one clock
 *    reading for the whole verb), and leaves with rocemu_port_verb_leave(port,
 *    did), which releases it. `did` says what the application did:
 *    ROCEMU_DID_POST (posted sends: it will poll for them), _POLL_FOUND /
 *    _POLL_EMPTY (it polled and got something, or nothing), _CHANGE (it
 *    changed what a pass must do: a QP moved), _NOTHING. An application
 *    thread about to block in the kernel (ibv_get_cq_event) says so with
 *    rocemu_port_app_blocks(), without the lock; one whose poll returned a
 *    receive completion, with rocemu_port_app_found_recv() after the poll.
 *
 * 4. The port alone decides about wake-ups. From what the verbs said, the
 *    progress thread backs off while an application polls or posts (it runs
 *    the passes itself), spins while there is work and nobody else does it,
 *    or, briefly, when a poll that ended the application's wait hands it the
 *    CPU because frames only it can place are due (the away spin, port
 *    README), and otherwise sleeps until the next timer; the link driver decides how
 *    it sleeps and who rings whom (memif: a futex bell in a page both ends
 *    map, rung only for a peer whose thread sleeps and whose application is
 *    not polling; af_packet: a doorbell socket; others: 1 ms naps). The
 *    engine never wakes threads, rings peers or reads the clock for that.
 *
 * 5. Never call rocemu_port_verb_enter, rocemu_port_set_upper,
 *    rocemu_port_ping or rocemu_port_close with the engine lock held: they
 *    take it (close stops the progress thread first).
 */
#ifndef ROCEMU_PORT_H
#define ROCEMU_PORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <rte_mbuf.h>

#include "../wire/roce_wire.h"
#include "port_counters.h"

#define ROCEMU_PORT_MAX_IPS 8
/** GID table: one link-local IPv6 GID from the MAC, then one per address. */
#define ROCEMU_PORT_MAX_GIDS (ROCEMU_PORT_MAX_IPS + 1)
/** Multicast groups a port takes frames for (UD multicast). */
#define ROCEMU_PORT_MAX_MCAST 64
#define ROCEMU_PORT_NAME_MAX  64
#define ROCEMU_PORT_SPEC_MAX  512
#define ROCEMU_PATH_MAX	      4096

/* ------------------------------------------------------------------------ */
/* Configuration: what a user types (rocemu port/run options, config file). */

/**
 * Prefix length of an `--ip ADDR` given without one. The prefix only picks
 * the source address toward a destination when a port has several (rocemu
 * does not route: every destination is resolved on the link).
 */
#define ROCEMU_IP_DEFAULT_PREFIX4 24
#define ROCEMU_IP_DEFAULT_PREFIX6 64

struct rocemu_ip_addr {
	uint8_t gid[16]; /**< IPv4 as IPv4-mapped, IPv6 as is */
	uint8_t prefix;	 /**< prefix length (IPv4: 0..32, IPv6: 0..128) */
	bool is_v6;
};

struct rocemu_fault_config {
	uint64_t seed;
	/** probabilities in parts per million, per direction: [0]=tx, [1]=rx */
	uint32_t drop_ppm[2], dup_ppm[2], reorder_ppm[2], corrupt_ppm[2], delay_ppm[2];
	uint32_t delay_us;
	/** explicit 1-based packet indices to drop on tx / rx (0-terminated) */
	uint32_t drop_list[2][32];
};

/** `--ecn`: zero is the default, ECT(0). */
enum rocemu_ecn {
	ROCEMU_ECN_ECT0 = 0,
	ROCEMU_ECN_ECT1,
	ROCEMU_ECN_OFF,
};

/** The two ECN bits (RFC 3168) a frame gets under setting ecn. */
static inline uint8_t rocemu_ecn_bits(enum rocemu_ecn ecn)
{
	return ecn == ROCEMU_ECN_ECT0 ? 2 : ecn == ROCEMU_ECN_ECT1 ? 1 : 0;
}

struct rocemu_port_config {
	char name[ROCEMU_PORT_NAME_MAX]; /**< device name, e.g. "rocemu0" */
	char spec[ROCEMU_PORT_SPEC_MAX]; /**< memif:server:SOCK, af_packet:IFACE, ... */
	bool mac_set;
	uint8_t mac[6];
	unsigned n_ips;
	struct rocemu_ip_addr ips[ROCEMU_PORT_MAX_IPS];
	uint16_t mtu; /**< Ethernet (IP) MTU; 0 = from the interface or 1500 */
	char capture_path[ROCEMU_PATH_MAX]; /**< empty = no capture */
	char capture_filter[512];	    /**< BPF expression, empty = all */
	uint64_t capture_rotate_bytes;	    /**< 0 = no rotation */
	bool fault_enabled;
	struct rocemu_fault_config fault;
	/* Neighbour resolution (ARP/ND); 0 = default. */
	uint32_t arp_timeout_ms; /**< wait for an answer before retrying (1000) */
	uint32_t arp_retries;	 /**< requests sent before giving up (3) */
	uint32_t arp_expire_ms;	 /**< an answer stays valid this long (60000) */
	uint32_t n_mbufs;	 /**< mbufs in the port's pool (8192) */
	/** memif client: how long open waits for its server (ms; default
	 * 10000 unless memif_wait_set; 0 = fail at once with ECONNREFUSED) */
	uint32_t memif_wait_ms;
	bool memif_wait_set;
	/**
	 * The ECN codepoint of RoCE frames whose address vector leaves the two ECN
	 * bits of the traffic class at 0 (Not-ECT): ECT(0) by default, as hardware
	 * RoCE NICs with ECN enabled send; "ect1"; or "off" to send Not-ECT.
	 */
	enum rocemu_ecn ecn;
	/**
	 * 802.1Q VLAN ID of the port (1..4094; 0 = untagged). With a VLAN every
	 * frame goes out tagged (RoCE frames with PCP = the address vector's SL,
	 * the others with PCP 0), tagged frames of other VLANs are dropped
	 * (vlan_other), untagged ones too (vlan_untagged) unless vlan_untagged.
	 */
	uint16_t vlan;
	bool vlan_untagged; /**< with vlan: accept untagged frames as well */
	/**
	 * `progress-cpu N`: the progress thread pinned to CPU N, spinning there
	 * (no naps) while the port is open, for machines with a CPU to spare.
	 * Without the option, ROCEMU_PROGRESS_CPU=N when set at open. N must be
	 * in the affinity mask of the thread that validates or opens the port.
	 */
	bool progress_cpu_set;
	uint16_t progress_cpu;
	/**
	 * Optional: called with one line for the user while open waits (e.g.
	 * "waiting for a memif server on SOCK"). The port prints nothing itself.
	 */
	void (*notice)(void *arg, const char *line);
	void *notice_arg;
};

/** Defaults: everything zero/empty, name "rocemu0". */
void rocemu_port_config_init(struct rocemu_port_config *cfg);

/**
 * Apply one option, as typed on a command line without the leading dashes
 * ("port", "mac", "ip", "mtu", "capture", "capture-filter",
 * "capture-rotate", "name", "ecn", "vlan", "vlan-untagged", "progress-cpu", "fault-*"). Used by
 * `rocemu port`, `rocemu run` and the config file so all three accept the same words. Returns 0,
 * -ENOENT for an unknown option, -EINVAL for a bad value; err gets a one-line message in both error
 * cases.
 */
int rocemu_port_config_set(struct rocemu_port_config *cfg, const char *opt, const char *val,
			   char *err, size_t errlen);

/** Check a finished config (spec present and well-formed...). 0 or -EINVAL with err. */
int rocemu_port_config_validate(const struct rocemu_port_config *cfg, char *err, size_t errlen);

/**
 * The MAC a port opened with cfg will have, known without opening it (--mac;
 * the generated one of memif and ring; the interface's of af_packet and
 * af_xdp). 0, -ENODATA when only the open device can say (dpdk:), -EINVAL
 * for a bad spec.
 */
int rocemu_port_config_mac(const struct rocemu_port_config *cfg, uint8_t mac[6]);

/* ------------------------------------------------------------------------ */
/* EAL: initialised lazily, once per process, suitable for a library.        */

/** Idempotent and thread-safe. 0 or -errno; rocemu_eal_error() says why. */
int rocemu_eal_init(void);
const char *rocemu_eal_error(void);
/** The EAL arguments in use (empty before initialisation), for reports. */
const char *rocemu_eal_args(void);

/** Monotonic clock in nanoseconds. */
uint64_t rocemu_now_ns(void);
/** The same, and the TSC reading it came from in *tsc (0 while the clock
 * is not the TSC): one counter that every process on the host shares. */
uint64_t rocemu_now_ns_tsc(uint64_t *tsc);

/* ------------------------------------------------------------------------ */
/* The port.                                                                  */

struct rocemu_port;

/**
 * What the transport plugs in. rx receives RoCEv2 frames that parsed with a
 * good ICRC and are addressed to one of our GIDs; it takes ownership of the
 * mbufs (must free or keep them). poll runs once per progress pass (timers,
 * pending transmissions) and returns how much work it did (0 = idle).
 * has_work says whether poll needs to run soon (pending timers or queued
 * sends): the progress thread keeps spinning while it is true.
 * Both are called with the engine lock held.
 */
struct rocemu_port_upper {
	void *ctx;
	void (*rx)(void *ctx, struct rte_mbuf **pkts, struct roce_pkt *descs, uint16_t n);
	unsigned (*poll)(void *ctx, uint64_t now_ns);
	bool (*has_work)(void *ctx);
	/* optional: when poll must run next (ns, rocemu_now_ns() clock): 0 =
	 * now (queued sends, responses), UINT64_MAX = nothing pending. Lets a
	 * kick leave a sleeping progress thread alone when its sleep ends in
	 * time anyway, and the thread sleep exactly until the next timer. */
	uint64_t (*next_due)(void *ctx);
	/* optional: every received frame, before the port's own stack (ARP/ND,
	 * ICMP, RoCE) sees it, for raw packet QPs' steering rules (engine lock
	 * held). true: the upper layer took the frame and the port frees it
	 * without looking further; false: the port goes on as usual (the upper
	 * layer may have copied it). */
	bool (*raw_rx)(void *ctx, struct rte_mbuf *m);
};

/* Capture files */
#define ROCEMU_CAPTURE_MSG_MAX (ROCEMU_PATH_MAX + 256)
/**
 * Can a capture go to path? Before anything runs (`rocemu run`, `rocemu
 * port`): its directory exists and is writable, it is not a directory, a
 * device, a FIFO or a file of a kernel pseudo file system (/proc, /sys),
 * and no other rocemu is writing it. 0, or -errno with one line in err
 * ("--capture PATH: why").
 */
int rocemu_capture_check(const char *path, char *err, size_t errlen);
/**
 * Write the frames the capture still buffers (takes the engine lock): the
 * `capture_frames` counter then counts every frame offered so far that is
 * in the file. 0, or the -errno that stopped the capture (full disk, I/O
 * error; the counter `capture_frames_not_written` counts what was lost).
 */
int rocemu_port_capture_sync(struct rocemu_port *port);
/**
 * A capture of this process that stopped on a write failure leaves one line
 * ("NAME: capture PATH FAILED: why; N frames written, M NOT written") when
 * its port closes. Takes the oldest into msg: 1, or 0 when there is none.
 * The engine prints nothing: the program's layer prints these at exit.
 */
int rocemu_capture_take_failure(char *msg, size_t len);

/** Bring the port up (EAL init if needed). 0 or -errno with err filled. */
int rocemu_port_open(const struct rocemu_port_config *cfg, struct rocemu_port **out, char *err,
		     size_t errlen);
void rocemu_port_close(struct rocemu_port *port);
const struct rocemu_port_config *rocemu_port_get_config(const struct rocemu_port *port);
void rocemu_port_set_upper(struct rocemu_port *port, const struct rocemu_port_upper *upper);

/**
 * A QPN from whoever owns the port's QPN space (engine lock held): a host
 * (`host:NAME` ports) hands out the numbers of every process on it. 0 and
 * *qpn set; -ENOTSUP when the port has no such owner (the engine numbers its
 * QPs itself); another -errno when the owner refused or is gone. gsi: the
 * GSI QP (QP1). May block for a round trip to the host.
 */
int rocemu_port_qpn_alloc(struct rocemu_port *port, bool gsi, uint32_t *qpn);
/** Give back a number from rocemu_port_qpn_alloc (engine lock held). */
void rocemu_port_qpn_free(struct rocemu_port *port, uint32_t qpn);

/** Who this process is on the host its port is attached to (`host:NAME`). */
struct rocemu_port_host_id {
	uint32_t host_pid; /**< the host's process */
	uint32_t proc_id;  /**< the host's index of this process (0..254), unique among live ones */
	uint32_t proc_gen; /**< its attach generation */
	char name[64];	   /**< the host's name, as it says in its WELCOME */
};
/** 0 and *id for a `host:NAME` port; -ENOTSUP for any other (standalone). */
int rocemu_port_host_id(const struct rocemu_port *port, struct rocemu_port_host_id *id);

/* Addressing */
void rocemu_port_mac(const struct rocemu_port *port, uint8_t mac[6]);
unsigned rocemu_port_gid_count(const struct rocemu_port *port);
/** GID at index; all GIDs are RoCE v2. 0 or -EINVAL. */
int rocemu_port_gid(const struct rocemu_port *port, unsigned index, uint8_t gid[16]);
/** Index of gid in our table, or -1. */
int rocemu_port_gid_find(const struct rocemu_port *port, const uint8_t gid[16]);
uint16_t rocemu_port_eth_mtu(const struct rocemu_port *port);
/** The port's VLAN ID (--vlan), 0 when it sends untagged frames. */
uint16_t rocemu_port_vlan(const struct rocemu_port *port);
/** Largest IB MTU (256..4096 bytes) whose RoCEv2 frames fit the Ethernet MTU. */
uint32_t rocemu_port_active_mtu(const struct rocemu_port *port);
/** Link state: true when the ethdev reports link up. */
bool rocemu_port_link_up(const struct rocemu_port *port);
/** Link speed in Mb/s as reported by the PMD (0 unknown). */
uint32_t rocemu_port_link_speed(const struct rocemu_port *port);

/**
 * Resolve the MAC of dst (a GID; IPv4-mapped or IPv6) for sending from the
 * GID at src_index. 0 and mac filled; -EAGAIN while resolution is under way
 * (a request was sent; call again later); -EHOSTUNREACH once it failed
 * (retries exhausted). Our own GIDs resolve to our MAC (loopback).
 * Engine lock held.
 */
int rocemu_port_resolve(struct rocemu_port *port, unsigned src_index, const uint8_t dst[16],
			uint8_t mac[6]);

/** Whether gid is an IP multicast address (IPv4-mapped 224.0.0.0/4 or ff00::/8). */
bool rocemu_gid_is_multicast(const uint8_t gid[16]);

/**
 * Take the frames of multicast group gid (a UD QP attached, an rdma_cm
 * join): counted per user; the first join tells the segment (IGMP or MLD
 * report), the last leave too. 0; -EINVAL (no multicast GID, or leaving a
 * group not joined), -ENOMEM (ROCEMU_PORT_MAX_MCAST groups), -EOPNOTSUPP
 * (a port attached to a rocemu host). Engine lock held.
 */
int rocemu_port_mcast_join(struct rocemu_port *port, const uint8_t gid[16]);
int rocemu_port_mcast_leave(struct rocemu_port *port, const uint8_t gid[16]);

/* Transmit (engine lock held) */
/** An mbuf from the port's pool, big enough for a 4096-byte-MTU RoCE frame; NULL if exhausted. */
struct rte_mbuf *rocemu_port_alloc_mbuf(struct rocemu_port *port);
/**
 * Queue a complete Ethernet frame. Frames to our own MAC/GIDs loop back
 * (delivered to rx on a later progress pass). Takes ownership of m in every
 * case; 0, or -ENOBUFS when the tx queue is full (m freed, drop counted).
 */
int rocemu_port_tx(struct rocemu_port *port, struct rte_mbuf *m);
/**
 * rocemu_port_tx() for a frame whose destination MAC the caller built it with
 * (dst_mac, which must equal the frame's): the port decides loopback and
 * multicast from it instead of reading the frame back (engine lock held).
 */
int rocemu_port_tx_to(struct rocemu_port *port, struct rte_mbuf *m, const uint8_t dst_mac[6]);
/** Push queued frames to the device now. */
void rocemu_port_flush(struct rocemu_port *port);
/**
 * After a post built its frames: push them to the device, or leave them
 * queued for the next post's while the application posts back to back (no
 * pass since its previous post; at most 32 frames, 20 us). A poll's pass,
 * or the progress thread's, sends them.
 */
void rocemu_port_flush_posted(struct rocemu_port *port);

/* Progress and locking (see the contract at the top) */
void rocemu_port_lock(struct rocemu_port *port);
void rocemu_port_unlock(struct rocemu_port *port);
/**
 * One progress pass if the engine lock is free: rx burst, dispatch (ARP/ND,
 * ICMP, loopback, upper rx), upper poll, tx flush. Returns the amount of work
 * done, 0 if idle or if another thread holds the lock.
 */
unsigned rocemu_port_progress(struct rocemu_port *port);
/** The same with the lock already held by the caller. */
unsigned rocemu_port_progress_locked(struct rocemu_port *port);
/** Start/stop the background progress thread (started by rocemu_port_open). */
int rocemu_port_progress_thread_start(struct rocemu_port *port);
void rocemu_port_progress_thread_stop(struct rocemu_port *port);
/**
 * A progress thread that never spins idle: it runs passes while they find
 * work and otherwise sleeps the link's way, so that a frame from the link
 * wakes it (memif's bell, af_packet's doorbell) at once. For a caller with
 * a spinning thread of its own (the host's forwarding thread, which sleeps
 * on a bell of its own and cannot wait for the link's).
 */
void rocemu_port_progress_thread_quiet(struct rocemu_port *port, bool quiet);
/** The CPU the progress thread has to itself and spins on (`progress-cpu`,
 * ROCEMU_PROGRESS_CPU), or -1. */
int rocemu_port_progress_cpu(const struct rocemu_port *port);
/**
 * Room in the transmit buffer for frames (engine lock held): when it is more
 * than half full, the buffered frames are first handed to the device. 0 =
 * the device takes no more now: an upper layer stops building frames until a
 * later pass (which receives first, so ACKs keep flowing).
 */
unsigned rocemu_port_tx_room(struct rocemu_port *port);
/**
 * The time at the start of the current progress pass, or the one reading a
 * post holds (engine lock held): one clock read per pass or post.
 */
uint64_t rocemu_port_pass_now(const struct rocemu_port *port);

/** How a verb enters (rocemu_port_verb_enter). */
enum rocemu_verb {
	ROCEMU_VERB_POLL,    /**< ibv_poll_cq: a pass first, or wait for the running one */
	ROCEMU_VERB_POST,    /**< ibv_post_send: a pass when none ran for 20 us; clock held */
	ROCEMU_VERB_CONTROL, /**< other verbs: the lock only */
};

/** What the application did in the verb (rocemu_port_verb_leave). */
enum rocemu_verb_did {
	ROCEMU_DID_POST,       /**< posted sends: it will poll for them */
	ROCEMU_DID_POLL_FOUND, /**< polled and got completions */
	ROCEMU_DID_POLL_EMPTY, /**< polled and got nothing: it will poll again */
	ROCEMU_DID_CHANGE,     /**< changed what a pass must do (a QP moved) */
	ROCEMU_DID_NOTHING,    /**< nothing progress needs to know */
};

/** Enter a verb: take the engine lock (see the contract, 3). */
void rocemu_port_verb_enter(struct rocemu_port *port, enum rocemu_verb verb);
/** Leave a verb: say what the application did, release the engine lock;
 * the port may then wake its progress thread (never blocks). */
void rocemu_port_verb_leave(struct rocemu_port *port, enum rocemu_verb_did did);
/** An application thread is about to block in the kernel waiting for an
 * event (ibv_get_cq_event): progress is the thread's alone until it polls
 * again, at once. Without the engine lock. */
void rocemu_port_app_blocks(struct rocemu_port *port);
/** The poll that just ended returned a receive completion: the application
 * learns of its peer's messages from its CQ, so its next post is no
 * answer that ACKs are kept for (port_app.c). Without the engine lock. */
void rocemu_port_app_found_recv(struct rocemu_port *port);

/* Diagnostics */
/**
 * ICMP echo request to dst (IPv4-mapped or IPv6 GID). Takes the engine lock
 * itself. 0 sent; -EAGAIN while the address is being resolved (call again);
 * -EHOSTUNREACH, -ENETUNREACH (no source address of that family).
 * Replies show in the counters and rocemu_port_ping_replies().
 */
int rocemu_port_ping(struct rocemu_port *port, const uint8_t dst[16], uint16_t id, uint16_t seq);
/** Echo replies received so far (for `rocemu port --ping`). */
uint64_t rocemu_port_ping_replies(const struct rocemu_port *port);
/** Round-trip time of the last echo reply in ns (0 = none yet). */
uint64_t rocemu_port_ping_last_rtt_ns(const struct rocemu_port *port);

/** Parse "a.b.c.d" or an IPv6 address into a GID (IPv4 mapped). 0 or -EINVAL. */
int rocemu_gid_parse(const char *text, uint8_t gid[16]);

/** A named counter (rx_frames, tx_frames, drop_<reason>, ...). */
struct rocemu_counter {
	const char *name;
	uint64_t value;
};
/**
 * Fill up to max counters: those of PORT_COUNTERS, then the events and drops
 * that are not zero (port_counters.h); returns how many there are. Names are
 * stable.
 */
unsigned rocemu_port_counters(const struct rocemu_port *port, struct rocemu_counter *out,
			      unsigned max);
/** As rocemu_port_counters, every counter including those still zero (PC_COUNT of them). */
unsigned rocemu_port_counters_all(const struct rocemu_port *port, struct rocemu_counter *out,
				  unsigned max);
/** The printed name of a counter (NULL when c is not one). */
const char *rocemu_port_counter_name(enum port_counter c);
/** Count a drop (or event) of the upper layer, e.g. PC_DROP_BAD_PKEY. */
void rocemu_port_count(struct rocemu_port *port, enum port_counter c);
void rocemu_port_counters_print(const struct rocemu_port *port, FILE *f);

/** Did the user ask for trace lines of topic (ROCEMU_TRACE=TOPIC,... or "all")? */
bool rocemu_port_trace_on(const char *topic);
/** Write one trace line of topic to stderr, as the port's own trace points do
 * (for the engine's trace lines, which its user hands over). */
void rocemu_port_trace_line(const struct rocemu_port *port, const char *topic, const char *line);

#endif /* ROCEMU_PORT_H */
