/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to emulator/port: link drivers. A link kind (memif, af_packet,
 * af_xdp, ring, any DPDK PMD) is one file, port_link_KIND.c, that fills one
 * `struct port_link_ops`; port_dev.c looks the kind up once, at open, from
 * the spec's prefix, and from then on calls the table. The generic port
 * (addressing, neighbours, capture, progress) never asks which kind it
 * drives. The link keeps its own state behind port->link_priv.
 *
 * Who calls what (see rocemu_port.h for the threads):
 *  - check_arg, preview_mac: anywhere, no port (config validation, GUIDs);
 *  - mtu ... online: rocemu_port_open, in that order, from the opening thread;
 *  - blocked, wake_peer, app_note: the engine lock held (any thread);
 *  - sleep: the progress thread only; wake: any thread, no lock;
 *  - tx_in_flight: close, the engine lock held;
 *  - offline, release: close or the exit handler, no pass running;
 *  - rx_burst, tx_burst, resolve, qpn_free: the engine lock held;
 *  - link_up: any thread; qpn_alloc: the engine lock held (it may block
 *    for a round trip to a host).
 * Every hook but create may be NULL: the generic behaviour is then used.
 * A link whose frames do not go through a DPDK device (the host link:
 * rings in shared memory) sets rx_burst and tx_burst: create then makes no
 * ethdev (port->port_id stays UINT16_MAX) and the port never configures one.
 */
#ifndef ROCEMU_PORT_LINK_H
#define ROCEMU_PORT_LINK_H

#include <time.h>

#include "port_internal.h"

/* What an application thread did, as the link driver hears it. */
enum port_app_note {
	PORT_APP_ENTER,	    /* entering a post or poll call */
	PORT_APP_POSTED,    /* posted: it will poll for the result */
	PORT_APP_WAITING,   /* polled, and still waits: it polls again */
	PORT_APP_SATISFIED, /* polled and got what it waited for: may go elsewhere */
	PORT_APP_AWAY,	    /* about to block in the kernel (ibv_get_cq_event) */
};

struct port_link_ops {
	const char *name;   /* "memif" */
	const char *prefix; /* of the spec: "memif:" */
	const char *usage;  /* the spec forms, for error messages */
	size_t priv_size;   /* of the link's own state (port->link_priv) */
	/* The argument after the prefix is well-formed (no device touched). */
	int (*check_arg)(const char *arg, char *err, size_t errlen);
	/* The MAC an open port will have when cfg gives none, known without
	 * opening it: 0, or -ENODATA (only the device knows). */
	int (*preview_mac)(const struct rocemu_port_config *cfg, const char *arg, uint8_t mac[6]);
	/* EAL must scan the PCI bus for this port. */
	bool (*needs_pci)(const char *arg);
	/* port->eth_mtu from the config and the link (default: cfg or 1500). */
	int (*mtu)(struct rocemu_port *port, const char *arg, char *err, size_t errlen);
	/* mbuf data room (default: a whole frame of the MTU, at least a
	 * 4096-byte-MTU RoCE frame). */
	uint32_t (*data_room)(const struct rocemu_port *port);
	/* Make the port's mbuf pool of n mbufs of data_room bytes (headroom
	 * included), NULL with rte_errno set on failure (default:
	 * rte_pktmbuf_pool_create without a cache). */
	struct rte_mempool *(*pool_create)(const char *name, unsigned n, uint16_t data_room,
					   int socket);
	/* Make the ethdev (port->port_id, port->dev_name): required. */
	int (*create)(struct rocemu_port *port, const char *arg, char *err, size_t errlen);
	/* Ask the device for port->eth_mtu before starting it. */
	bool set_dev_mtu;
	/* An open may fail for a while after a device of the link went (af_xdp:
	 * the kernel frees the old socket's buffer pool later): how long to try
	 * the whole open again (ms, 0: no retry) when it failed with -EINVAL,
	 * with the PMD's log type (pmd_log) held back meanwhile. */
	unsigned (*open_retry_ms)(void);
	const char *pmd_log;
	/* Start the configured device (default: rte_eth_dev_start). */
	int (*start)(struct rocemu_port *port, char *err, size_t errlen);
	/* Choose port->mac; dev_mac is the device's (NULL when it has none).
	 * Default: --mac, else a stable generated one. */
	void (*mac)(struct rocemu_port *port, const struct rte_ether_addr *dev_mac);
	/* After addressing: sockets, doorbells (best effort). */
	void (*attach)(struct rocemu_port *port, const char *arg);
	/* After attach: what the device must know of the port's addresses
	 * (af_xdp: its XDP program's address map); an error fails the open. */
	int (*addressed)(struct rocemu_port *port, const char *arg, char *err, size_t errlen);
	/* The port runs (progress thread started) / is about to stop. */
	void (*online)(struct rocemu_port *port);
	void (*offline)(struct rocemu_port *port);

	/* false when the device's rings may be used now, else true with the
	 * drop reason for frames that cannot be sent (engine lock held). */
	bool (*blocked)(struct rocemu_port *port, enum port_counter *reason);
	/* The device just took frames (engine lock held): wake the peer if
	 * it sleeps and nobody there will look at its ring anyway. */
	void (*wake_peer)(struct rocemu_port *port, uint64_t now);
	/* What an application thread did (see enum port_app_note). Returns
	 * true when a pass must run now (engine lock held for POSTED,
	 * WAITING, SATISFIED; not for ENTER, AWAY); for AWAY, when frames
	 * wait that no writer rang for: the progress thread is woken. */
	bool (*app_note)(struct rocemu_port *port, enum port_app_note what);
	/* The progress thread sleeps at most ts; true when a frame woke it.
	 * Default: the eventfd and port->doorbell_fd in ppoll. */
	bool (*sleep)(struct rocemu_port *port, const struct timespec *ts);
	/* Wake the sleeping progress thread (default: the eventfd). */
	void (*wake)(struct rocemu_port *port);
	/* At close: frames handed to the device may not have reached the peer
	 * yet (default: false, the device took them). */
	bool (*tx_in_flight)(struct rocemu_port *port, uint64_t now);
	/* Give back the device and the link's kernel resources (default:
	 * port_dev_remove). Memory stays until port_link_free. */
	void (*release)(struct rocemu_port *port);

	/* A link without an ethdev moves frames itself (default: the ethdev's
	 * rte_eth_rx_burst / rte_eth_tx_burst); memif sets them around its
	 * ethdev's, for its direct channel. tx_burst takes ownership of
	 * the frames it accepts (returns how many). */
	uint16_t (*rx_burst)(struct rocemu_port *port, struct rte_mbuf **pkts, uint16_t n);
	uint16_t (*tx_burst)(struct rocemu_port *port, struct rte_mbuf **pkts, uint16_t n);
	/* Link state (default: the ethdev's). */
	bool (*link_up)(const struct rocemu_port *port);
	/* Neighbours are resolved elsewhere (the host link: by the host, for
	 * every process on it): rocemu_port_resolve asks this instead of the
	 * port's own ARP/ND, and the port announces nothing at link up. */
	int (*resolve)(struct rocemu_port *port, unsigned src_index, const uint8_t dst[16],
		       uint8_t mac[6]);
	/* QPNs come from elsewhere (a host owns the QPN space): see
	 * rocemu_port_qpn_alloc. */
	int (*qpn_alloc)(struct rocemu_port *port, bool gsi, uint32_t *qpn);
	void (*qpn_free)(struct rocemu_port *port, uint32_t qpn);
	/* This process on its host (rocemu_port_host_id). */
	int (*host_id)(const struct rocemu_port *port, struct rocemu_port_host_id *id);
	/* Frames to our own MAC go to the link too (a host switches them
	 * between its processes) instead of the port's internal loopback. */
	bool switched_loopback;
};

extern const struct port_link_ops port_link_memif;
extern const struct port_link_ops port_link_afpacket;
extern const struct port_link_ops port_link_afxdp;
extern const struct port_link_ops port_link_ring;
extern const struct port_link_ops port_link_dpdk;
extern const struct port_link_ops port_link_host;

/* Default Ethernet MTU of point-to-point software links (memif, ring):
 * large enough that a 4096-byte IB MTU fits over IPv6 (4096 + 92 = 4188). */
#define PORT_SOFT_LINK_MTU 4200
#define PORT_DEFAULT_MTU   1500

/* port_link.c: the link of a spec, and arg (what follows the prefix). NULL
 * with err when the spec is bad. */
const struct port_link_ops *port_link_parse(const char *spec, char *arg, size_t arglen, char *err,
					    size_t errlen);

/* A number unique in the process, for device and pool names (port_link.c). */
unsigned port_next_seq(void);
/* Helpers for link drivers (port_dev.c). */
/* rte_dev_probe(devargs) and find the ethdev named port->dev_name. */
int port_dev_probe(struct rocemu_port *port, const char *devargs, char *err, size_t errlen);
/* Stop, close and (a vdev) remove the device. */
void port_dev_remove(struct rocemu_port *port);
/* One rx and one tx queue on the port's pool, and the MTU (set_dev_mtu):
 * what a device needs before its start (also for one made again). */
int port_dev_configure(struct rocemu_port *port, char *err, size_t errlen);
/* The default data room (port_pool.c; see data_room). */
uint32_t port_default_data_room(const struct rocemu_port *port);
/* The port's mbuf pool (port_pool.c): sets port->pool and port->max_frame. */
int port_pool_create(struct rocemu_port *port, char *err, size_t errlen);
/* The per-lcore cache of a pool of n mbufs (port_pool.c), for links' own pools too. */
unsigned port_pool_cache_size(unsigned n);
/* --mac, else dev_mac (when use_dev and the device has one), else generated. */
void port_pick_mac(struct rocemu_port *port, const struct rte_ether_addr *dev_mac, bool use_dev);
/* The generated MAC of a config (memif, ring). */
void port_generated_mac(const struct rocemu_port_config *cfg, uint8_t mac[6]);

/* port_addr.c: the MAC (the link's choice), then the GID table from it. */
void port_choose_mac(struct rocemu_port *port);
void port_build_gid_table(struct rocemu_port *port);

/* port_iface.c: links on a kernel interface (af_packet, af_xdp). */
int port_iface_mtu(struct rocemu_port *port, const char *iface, char *err, size_t errlen);
int port_iface_mac(const char *iface, uint8_t mac[6]);
void port_iface_hold_roce_udp(struct rocemu_port *port);
void port_iface_mac_choose(struct rocemu_port *port, const struct rte_ether_addr *dev_mac);
int port_iface_check_name(const char *what, const char *iface, char *err, size_t errlen);
/* port->kernel_owned: the GIDs the kernel holds on iface (same MAC, no VLAN). */
void port_iface_find_kernel_owned(struct rocemu_port *port, const char *iface);

/* port_progress.c: the generic sleep (eventfd + doorbell_fd) and wake-up. */
bool port_fd_sleep(struct rocemu_port *port, const struct timespec *ts);
void port_wake_eventfd(struct rocemu_port *port);

#endif
