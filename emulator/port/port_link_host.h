/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Link kind `host:NAME` (docs/host.md), shared by its two files:
 * port_link_host.c attaches to the host and talks to it over the control
 * connection (QPNs, pairings, neighbours, the host's end); port_link_host_ring.c
 * moves frames through the rings in shared memory and sleeps and rings bells.
 */
#ifndef ROCEMU_PORT_LINK_HOST_H
#define ROCEMU_PORT_LINK_HOST_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "port_link.h"
#include "rocemu_host.h"

/* A request waits this long for the host's answer. */
#define HOST_REPLY_TIMEOUT_S 10
/* A RESOLVE for the same address is sent again after this long. */
#define HOST_RESOLVE_RESEND_NS 100000000ull
/* Our application polled within this long: the host need not ring us. */
#define HOST_APP_FRESH_NS 10000ull

/* What we know of another process on the host, by its index. */
enum host_peer_way { PEER_UNKNOWN, PEER_DIRECT, PEER_VIA_HOST };

struct host_peer {
	uint32_t gen; /* the owner generation this is about */
	uint8_t way;
	bool ring_it;			/* frames put in its ring in this burst */
	uint32_t full_burst;		/* its ring was full in burst number ... */
	struct rocemu_host_inbound *in; /* its inbound region, mapped */
	size_t in_size;
	struct rocemu_host_ring *ring; /* ours in it */
};

struct host_link {
	int sock; /* control connection, -1 once closed */
	struct rocemu_host_welcome welcome;
	struct rocemu_host_region *region;
	struct rocemu_host_inbound *inbound;
	const struct rocemu_host_page *page;
	struct rocemu_host_bell *bell;
	size_t region_size, inbound_size;
	struct rocemu_host_ring *up;
	struct rocemu_host_direct_qp *direct_qp; /* in our region: what our QPs took directly */
	struct rocemu_host_ring *in_ring[ROCEMU_HOST_INBOUND_RINGS];
	uint32_t slot_size;
	unsigned rx_next; /* the inbound ring to read first (round robin) */
	uint32_t burst;	  /* tx bursts so far (host_peer.full_burst) */
	bool gone;	  /* the host closed our connection or went away */
	struct host_peer peers[ROCEMU_HOST_MAX_PROCS];
	/* RESOLVE requests sent lately (address, when) */
	struct {
		uint8_t gid[16];
		uint64_t at;
	} asked[8];
	unsigned asked_next;
};

/* port_link_host.c */
/* An inbound region (ours, or a peer's) checked against its memfd's size
 * before any ring is touched. NULL when it is not one. */
struct rocemu_host_inbound *host_link_map_inbound(int fd, uint32_t slot_size, size_t *size);
struct rocemu_host_ring *host_link_inbound_ring(struct rocemu_host_inbound *in, unsigned k);
/* One request, one REPLY (and an fd with a PAIR answer); engine lock held. */
int host_link_request_fd(struct rocemu_port *port, uint32_t type, uint32_t arg, uint32_t *value,
			 int *fd);

/* port_link_host_ring.c: the link's data path hooks (port_link.h) */
bool host_link_sleep(struct rocemu_port *port, const struct timespec *ts);
void host_link_wake(struct rocemu_port *port);
bool host_link_app_note(struct rocemu_port *port, enum port_app_note what);
uint16_t host_link_tx_burst(struct rocemu_port *port, struct rte_mbuf **pkts, uint16_t n);
uint16_t host_link_rx_burst(struct rocemu_port *port, struct rte_mbuf **pkts, uint16_t n);
bool host_link_tx_in_flight(struct rocemu_port *port, uint64_t now);
void host_link_online(struct rocemu_port *port);

#endif
