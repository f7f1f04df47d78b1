/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to emulator/port: the port structure shared by the files of the
 * layer (device bring-up, receive dispatch, neighbours, capture, faults).
 */
#ifndef ROCEMU_PORT_INTERNAL_H
#define ROCEMU_PORT_INTERNAL_H

#include <pthread.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <stdatomic.h>

#include <pcap/pcap.h>
#include <rte_ether.h>
#include <rte_mempool.h>

#include "rocemu_port.h"

#define PORT_BURST	 32
#define PORT_TX_BUF	 256
#define PORT_LOOP_SLOTS	 512 /* power of two */
#define PORT_NEIGH_SLOTS 64
#define PORT_FAULT_HOLD	 64
#define PORT_PING_SLOTS	 64
/* A neighbour's MAC, once set, is not replaced by another for this long
 * (Linux: locktime): a forged answer racing the real one loses. */
#define PORT_NEIGH_LOCK_NS 1000000000ull
/* Echo replies: at most PORT_ICMP_BURST at once, PORT_ICMP_RATE per second. */
#define PORT_ICMP_RATE	1000u
#define PORT_ICMP_BURST 50u

/* RFC 4861 7.3.2 without DELAY; ARP entries use the same states. */
enum neigh_state {
	NEIGH_FREE = 0,
	NEIGH_INCOMPLETE, /* request sent, no answer yet */
	NEIGH_REACHABLE,  /* answered our request within the expiry time */
	NEIGH_STALE,	  /* unconfirmed (learnt from the peer, or changed): used, probed on use */
	NEIGH_PROBE,	  /* expired or stale and used: still used, being re-confirmed */
	NEIGH_FAILED,	  /* retries exhausted: -EHOSTUNREACH until failed_until */
};

struct port_neigh {
	uint8_t gid[16];
	uint8_t mac[6];
	uint8_t state;
	uint8_t tries;	       /* requests sent in the current attempt */
	bool asked;	       /* a request of ours awaits its answer */
	unsigned src_index;    /* GID index the requests are sent from */
	uint64_t confirmed_ns; /* last answer to our request */
	uint64_t updated_ns;   /* MAC last set: another MAC is refused for PORT_NEIGH_LOCK_NS */
	uint64_t sent_ns;      /* last request */
	uint64_t failed_until_ns;
};

/* Where a capture stands: its current file, and what a port of this process
 * opened again resumes from (port_capture.c). */
struct capture_place {
	unsigned file_index; /* 0 = FILE, n = FILE.n */
	dev_t dev;	     /* the current file's identity */
	ino_t ino;
	uint64_t first_bytes;	 /* its size before its first frame (header, capture point) */
	struct timespec last_ts; /* the stamp of the last record */
};

struct port_capture {
	struct bpf_program prog;
	bool has_filter;
	int fd;			 /* current file, -1 once the capture stopped */
	int lock_fd;		 /* FILE's lock, held until the capture closes */
	int error;		 /* -errno of the failure that stopped it, 0 = none */
	bool cut_failed;	 /* could not cut a failed file back to a whole record */
	struct capture_place at; /* the current file */
	uint64_t file_bytes;	 /* bytes of the current file, buffered ones included */
	uint64_t file_written;	 /* bytes of the current file known to be in it */
	uint64_t written_frames; /* records known to be in the files */
	uint64_t lost;		 /* frames offered after or in a failed write */
	uint32_t buf_len, buf_frames;
	uint32_t buf_records; /* records in the buffer that are no frame (a capture point) */
	bool same_stamp;      /* the next record is the fault injector's copy of the last */
	char path[ROCEMU_PATH_MAX + 16]; /* the current file */
	uint8_t buf[128 * 1024];	 /* records not written yet (one is at most 65551) */
};

struct port_fault_dir {
	uint64_t count; /* frames seen, 1-based index of the last one */
	struct rte_mbuf *held[PORT_FAULT_HOLD];
	uint64_t held_until[PORT_FAULT_HOLD];
	unsigned n_held;
};

struct port_fault {
	uint64_t rng;
	struct port_fault_dir dir[2]; /* 0 = tx, 1 = rx */
};

struct port_link_ops;

struct rocemu_port {
	struct rocemu_port_config cfg;
	/* the link driver (port_link.h) and its own state */
	const struct port_link_ops *link;
	void *link_priv;
	uint16_t port_id;
	char dev_name[ROCEMU_PORT_SPEC_MAX + 64];
	bool dev_is_vdev;
	bool closed_at_exit; /* device released by the exit handler */
	struct rte_mempool *pool;

	/* addressing */
	struct rte_ether_addr mac;
	uint16_t eth_mtu;
	uint32_t max_frame; /* largest frame the mbufs hold */
	unsigned n_gids;
	uint8_t gids[ROCEMU_PORT_MAX_GIDS][16];
	uint8_t gid_prefix[ROCEMU_PORT_MAX_GIDS];
	/* GIDs the kernel also owns on a shared af_packet interface: it answers
	 * ARP/ND/ping for them, we only do RoCE (bit per GID index) */
	uint32_t kernel_owned;
	/* neighbours from the kernel's table (af_xdp beside the kernel, which
	 * answers ARP/ND there), or NULL: the port's own ARP/ND */
	struct port_kneigh *kneigh;

	/* engine lock and progress thread */
	pthread_mutex_t lock;
	pthread_t thread;
	bool thread_running;
	atomic_bool thread_stop;
	atomic_bool thread_sleeping;
	atomic_bool thread_quiet; /* no idle spinning (rocemu_port_progress_thread_quiet) */
	int progress_cpu;	  /* the thread's own CPU, where it spins; -1 = none */
	atomic_bool kicked;	  /* set by a kick (port_app.c), cleared by each pass */
	atomic_uint_fast64_t last_app_poll_ns;
	/* the application's last poll found all it waited for and it has not
	 * called us since: it may wait without us (ib_write_lat spins on its
	 * buffer) or work elsewhere (port_app.c) */
	atomic_bool app_away;
	/* when a pass of the thread last took frames while the application was
	 * away: it waits for frames only the thread places */
	atomic_uint_fast64_t away_rx_ns;
	/* the thread spins until then, unless a pass finds work (0: no) */
	atomic_uint_fast64_t app_spin_until_ns;
	uint64_t rx_at_post; /* rx_frames at the application's last post (engine lock) */
	bool away_spin;	     /* ROCEMU_AWAY_SPIN is not 0 (port_progress.c) */
	/* ACKs a pass keeps for the application's next post (port_progress.c,
	 * port_hold_acks; engine lock but app_answered_ns) */
	bool ack_hold;		     /* ROCEMU_ACK_HOLD is not 0 */
	bool in_pass;		     /* a pass runs: its flushes may keep ACKs */
	uint64_t acks_held_since_ns; /* when the ACKs in tx_buf were kept (0: none) */
	uint64_t app_found_ns;	     /* the application's last poll that found */
	/* ... the last that found a receive completion (last_pass_ns then) */
	atomic_uint_fast64_t app_found_recv_ns;
	/* the last pass that ended with pure ACKs to send: the peer sends
	 * us requests (port_hold_acks) */
	uint64_t acks_alone_ns;
	/* its last post that followed such a poll and such a pass within
	 * ANSWER_NS (port_app.c) */
	atomic_uint_fast64_t app_answered_ns;
	/* while thread_sleeping: when its sleep ends at the latest */
	atomic_uint_fast64_t sleep_until_ns;
	uint64_t last_pass_ns;	/* when the last pass started */
	uint64_t last_pass_tsc; /* the same in TSC cycles (0: no TSC clock) */
	int wake_fd;
	int udp_hold_fd; /* UDP 4791 held open on kernel interfaces, or -1 */
	/* a descriptor that turns readable when a frame arrives (af_packet's
	 * second packet socket, memif's datagram bell), or -1 */
	int doorbell_fd;
	/* frames wake the sleeping thread (a doorbell, memif's bell page) */
	bool frames_wake;
	uint64_t doorbell_grace_until_ns; /* progress thread only */
	atomic_bool upper_has_work;	  /* has_work() at the end of the last pass */

	struct rocemu_port_upper upper;
	bool has_upper;

	/* transmit buffer and loopback FIFO (engine lock) */
	struct rte_mbuf *tx_buf[PORT_TX_BUF];
	unsigned tx_n;
	/* pkt_len summed over tx_buf (256 x 64 KiB at most): a flush that sends
	 * nothing reads no mbuf; in the padding after tx_n */
	uint32_t tx_buf_bytes;
	uint64_t pass_now;    /* rocemu_now_ns() at the start of the running pass */
	bool verb_clock_held; /* pass_now is the reading a post holds (port_app.c) */
	uint64_t last_tx_ns;  /* when the device last took frames (close lingers after it) */
	struct rte_mbuf *loop[PORT_LOOP_SLOTS];
	unsigned loop_head, loop_tail;

	/* back-to-back posts' frames held in tx_buf (port_tx.c; engine lock) */
	uint64_t tx_held_since_ns; /* when a post began holding (0: nothing held) */
	uint64_t tx_post_pass_ns;  /* last_pass_ns at the last post: unchanged, no pass since */
	bool tx_hold;		   /* ROCEMU_TX_HOLD is not 0 (port_dev.c) */

	/* receive scratch for the upper layer */
	struct rte_mbuf *up_pkts[PORT_BURST];
	struct roce_pkt up_descs[PORT_BURST];
	uint16_t up_n;

	/* neighbours (ARP / ND) */
	struct port_neigh neigh[PORT_NEIGH_SLOTS];
	uint64_t neigh_next_check_ns;

	/* multicast groups of UD QPs (port_mcast.c): their frames are taken */
	struct {
		uint8_t gid[16];
		uint32_t users; /**< attached QPs and rdma_cm joins */
	} mcast[ROCEMU_PORT_MAX_MCAST];
	unsigned n_mcast;

	/* link */
	bool link_up;
	uint64_t link_next_check_ns;

	/* ping: our echo requests not answered yet, by sequence number modulo
	 * PORT_PING_SLOTS (a reply counts only with our identifier and an
	 * outstanding sequence number) */
	uint64_t ping_replies;
	uint64_t ping_last_rtt_ns;
	uint16_t ping_id;
	uint16_t ping_seq[PORT_PING_SLOTS];
	bool ping_pending[PORT_PING_SLOTS];
	/* echo replies we send: a token bucket (PORT_ICMP_RATE per second) */
	uint32_t icmp_tokens;
	uint64_t icmp_tokens_ns;

	/* capture (NULL = off) and faults (NULL = off) */
	struct port_capture *capture;
	struct port_fault *fault;

	/* counters */
	uint64_t ctr[PC_COUNT]; /* port_counters.h */
};

/* Counters (port_counters.h): written under the engine lock; readers may
 * read without it (values may be a pass behind). */
static inline void port_count(struct rocemu_port *port, enum port_counter c)
{
	port->ctr[c]++;
}
/* The drop counter of a parse status other than ROCE_PARSE_OK (port_rx.c). */
enum port_counter port_parse_drop(enum roce_parse_status st);

/* port_eal.c */
int port_eal_init(bool need_pci);
void port_eal_register(struct rocemu_port *port);
void port_eal_unregister(struct rocemu_port *port);
/* true in a child forked after EAL started: devices belong to the parent */
bool port_in_forked_child(void);

/* port_dev.c */
void port_close_at_exit(struct rocemu_port *port);
/* The port has a device to send on: an ethdev, or a link that moves frames
 * itself (port_link.h: rx_burst/tx_burst). */
bool port_has_device(const struct rocemu_port *port);

/* port_pool.c: a thread that allocates or receives gets an lcore id, so a
 * mempool cache of its own, given back at its exit */
void port_pool_thread_join_slow(struct rocemu_port *port);
static inline void port_pool_thread_join(struct rocemu_port *port)
{
	if (unlikely(rte_lcore_id() == LCORE_ID_ANY))
		port_pool_thread_join_slow(port);
}
/* This thread's caches back to their pools, its lcore id released. */
void port_pool_thread_leave(void);

/* port_tx.c */
int port_transmit(struct rocemu_port *port, struct rte_mbuf *m);

/* port_progress.c: wake our own sleeping progress thread (the link's way,
 * or the eventfd); when a pass must run next (engine lock held: 0 = now,
 * UINT64_MAX = nothing pending); an application polled or posted within
 * the last 2 ms (it runs the passes itself). */
#define PORT_IDLE_SLEEP_NS 1000000ull /* the longest nap with timers to serve */
void port_wake_thread(struct rocemu_port *port);
uint64_t port_next_pass_due(struct rocemu_port *port);
bool port_hold_acks(struct rocemu_port *port);
bool port_app_is_polling(struct rocemu_port *port, uint64_t now);

/* port_trace.c: ROCEMU_TRACE=memif,... (or "all") writes one line per
 * traced event to stderr, asked for by the user. */
bool port_trace_on(const char *topic);
void port_trace(const struct rocemu_port *port, const char *topic, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A PMD's log held to critical messages while on (nested, any thread). */
void port_log_quiet(const char *logtype, bool on);
/* A line for the user while open waits (cfg.notice; nothing without it). */
void port_notice(const struct rocemu_port *port, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* port_rx.c */
void port_rx_frame(struct rocemu_port *port, struct rte_mbuf *m, uint64_t now);
void port_rx_flush_upper(struct rocemu_port *port);
bool port_mac_accepted(const struct rocemu_port *port, const struct rte_ether_addr *dst);
bool port_ip_is_ours(const struct rocemu_port *port, const uint8_t gid[16]);

/* port_neigh.c */
void port_arp_input(struct rocemu_port *port, struct rte_mbuf *m, uint64_t now);
/* A frame of len zeroed bytes for the port's own protocols; NULL (counted)
 * when the pool is empty. */
struct rte_mbuf *port_frame_alloc(struct rocemu_port *port, uint16_t len);
/* multicast groups (port_mcast.c) */
void port_mcast_mac(const uint8_t gid[16], uint8_t mac[6]);
bool port_mcast_mac_joined(const struct rocemu_port *port, const uint8_t mac[6]);
bool port_mcast_ip_joined(const struct rocemu_port *port, const uint8_t gid[16]);
/* IGMP / MLD from the segment; the frame is consumed */
void port_igmp_input(struct rocemu_port *port, struct rte_mbuf *m, uint32_t l3_off);
void port_mld_input(struct rocemu_port *port, struct rte_mbuf *m, uint32_t l3_off);
void port_nd_input(struct rocemu_port *port, struct rte_mbuf *m, uint32_t l3_off, uint64_t now);
unsigned port_neigh_poll(struct rocemu_port *port, uint64_t now);
void port_announce(struct rocemu_port *port);
int port_pick_src(const struct rocemu_port *port, const uint8_t dst[16]);

/* port_icmp.c */
void port_icmp4_input(struct rocemu_port *port, struct rte_mbuf *m, uint32_t l3_off, uint64_t now);
void port_icmp6_echo_input(struct rocemu_port *port, struct rte_mbuf *m, uint32_t l3_off,
			   uint32_t l4_off, uint64_t now);
uint16_t port_icmp6_checksum(const uint8_t *ip6, const uint8_t *l4, uint32_t l4_len);

/* port_capture.c */
int port_capture_open(struct rocemu_port *port, char *err, size_t errlen);
void port_capture_frame(struct rocemu_port *port, const struct rte_mbuf *m);
/** A frame the fault injector drops: recorded whole, as lost on transmit or on receive. */
void port_capture_lost(struct rocemu_port *port, const struct rte_mbuf *m, bool on_receive);
void port_capture_close(struct rocemu_port *port);
void port_capture_flush(struct rocemu_port *port);
/**
 * The next frame captured is the fault injector's copy of the last one: it
 * gets the same stamp, as a copy the network makes follows its original at
 * once (a thread descheduled between the two writes would otherwise stamp
 * the copy late, and `rocemu inspect` would take it for a resend).
 */
void port_capture_copy_next(struct rocemu_port *port);

/* port_fault.c */
int port_fault_init(struct rocemu_port *port);
void port_fault_free(struct rocemu_port *port);
/* Returns how many frames to pass on in out[] (0..2) after the injector ran. */
unsigned port_fault_apply(struct rocemu_port *port, int dir, struct rte_mbuf *m,
			  struct rte_mbuf *out[2], uint64_t now);
/* Frames whose delay expired. */
unsigned port_fault_release(struct rocemu_port *port, int dir, struct rte_mbuf **out, unsigned max,
			    uint64_t now);

/* true if the kernel answers for GID index idx (shared interface) */
static inline bool port_left_to_kernel(struct rocemu_port *port, int idx)
{
	if (idx < 0 || !(port->kernel_owned & (1u << idx)))
		return false;
	port_count(port, PC_LEFT_TO_KERNEL);
	return true;
}

/* port_neigh_kernel.c: neighbours through the kernel's table on iface. */
int port_kneigh_open(struct rocemu_port *port, const char *iface);
void port_kneigh_close(struct rocemu_port *port);
/* 0 with mac, -EAGAIN (the kernel resolves it), -EHOSTUNREACH (it failed) */
int port_kneigh_resolve(struct rocemu_port *port, const uint8_t dst[16], uint8_t mac[6],
			uint64_t now);

/* helpers */
void port_gid_from_ipv4(uint8_t gid[16], uint32_t ipv4_be);
bool port_gid_is_v4(const uint8_t gid[16]);
uint32_t port_gid_ipv4(const uint8_t gid[16]);
const char *port_gid_str(const uint8_t gid[16], char *buf, size_t len);

/** Fill err (when non-NULL) with a one-line message and return rc (a negative errno). */
int port_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The progress thread's CPU (`progress-cpu`, else ROCEMU_PROGRESS_CPU) in
 * *cpu, -1 for none: 0, or -EINVAL (err says why) for a bad value or a CPU
 * outside the calling thread's affinity mask. */
int port_progress_cpu(const struct rocemu_port_config *cfg, int *cpu, char *err, size_t errlen);

#endif
