/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to emulator/port: an AF_XDP socket of rocemu's own on one queue
 * of an interface, for the af_xdp link's queues past the first
 * (port_link_afxdp.c says why DPDK's PMD cannot open them). Its UMEM is
 * its own memory, not mbufs: a received frame is copied into an mbuf of
 * the port's pool, a sent one out of its mbuf into a UMEM frame.
 */
#ifndef ROCEMU_PORT_XSK_H
#define ROCEMU_PORT_XSK_H

#include <stdbool.h>
#include <stdint.h>

struct rocemu_port;
struct rte_mbuf;
struct port_xsk;

/* A socket bound to queue `queue` of ifindex, its fill ring full: 0 with
 * *out, or a negative errno. The XDP program's socket map must then name
 * it (port_xsk_fd) before a frame arrives. */
int port_xsk_open(int ifindex, unsigned queue, struct port_xsk **out);
void port_xsk_close(struct port_xsk *x);
int port_xsk_fd(const struct port_xsk *x);
/* The kernel bound it zero-copy (the driver offers it). */
bool port_xsk_zero_copy(const struct port_xsk *x);
/* Up to n received frames as mbufs of the port's pool; a frame with no
 * mbuf for it is dropped and counted (drop_mbuf_exhausted). */
uint16_t port_xsk_rx(struct rocemu_port *port, struct port_xsk *x, struct rte_mbuf **pkts,
		     uint16_t n);
/* Send m (copied, then freed): 0, or -ENOBUFS when the ring or the UMEM
 * has no room now (m untouched). port_xsk_kick pushes what was queued. */
int port_xsk_tx(struct port_xsk *x, struct rte_mbuf *m);
void port_xsk_kick(struct port_xsk *x);

#endif
