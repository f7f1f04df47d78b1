/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The port's mbuf pool, made at open for whatever link: how many mbufs
 * (about PORT_POOL_BYTES of them unless the port says), how big (a whole
 * frame in one segment), the per-lcore caches (port_pool_cache_size, the
 * link's own pool too), and the link's own pool where it has one (memif's
 * stack pool, port_memif_zc.c).
 */
#include <errno.h>
#include <stdio.h>

#include <rte_errno.h>
#include <rte_mbuf.h>

#include "port_link.h"

#define PORT_DEFAULT_MBUFS 8192
/* by default about this many bytes of buffers, 2048 to 8192 of them */
#define PORT_POOL_BYTES (40u << 20)

/* A whole frame (MTU + Ethernet + VLAN) in one segment, at least a
 * 4096-byte-MTU RoCE frame, rounded to a cache line. */
uint32_t port_default_data_room(const struct rocemu_port *port)
{
	uint32_t room = (uint32_t)port->eth_mtu + 18;

	if (room < 4096 + ROCE_MAX_HDR_LEN + ROCE_ICRC_LEN + 64)
		room = 4096 + ROCE_MAX_HDR_LEN + ROCE_ICRC_LEN + 64;
	return (room + 63) & ~63u;
}

/* mbufs each lcore keeps for itself (the thread that started EAL, and each
 * progress thread, rte_thread_register'ed): alloc and free without touching
 * the pool's shared ring. Other application threads have none. At most an
 * eighth of the pool, so that a small pool (`mbufs 512`) is not held in the
 * caches of threads that do not need it. */
#define PORT_POOL_CACHE 256u

unsigned port_pool_cache_size(unsigned n)
{
	return RTE_MIN(PORT_POOL_CACHE, n / 8);
}

int port_pool_create(struct rocemu_port *port, char *err, size_t errlen)
{
	char name[RTE_MEMPOOL_NAMESIZE];
	unsigned n = port->cfg.n_mbufs ? port->cfg.n_mbufs : PORT_DEFAULT_MBUFS;
	uint32_t room =
	    port->link->data_room ? port->link->data_room(port) : port_default_data_room(port);

	port->max_frame = room;
	if (!port->cfg.n_mbufs && (uint64_t)n * room > PORT_POOL_BYTES)
		n = RTE_MAX(PORT_POOL_BYTES / room, 2048u);
	snprintf(name, sizeof(name), "rocemu_mb%u", port_next_seq());
	if (port->link->pool_create)
		port->pool = port->link->pool_create(
		    name, n, (uint16_t)(room + RTE_PKTMBUF_HEADROOM), (int)rte_socket_id());
	else
		port->pool = rte_pktmbuf_pool_create(name, n, port_pool_cache_size(n), 0,
						     (uint16_t)(room + RTE_PKTMBUF_HEADROOM),
						     (int)rte_socket_id());
	if (!port->pool)
		return port_fail(err, errlen, -ENOMEM,
				 "cannot create a pool of %u mbufs of %u bytes: %s", n, room,
				 rte_strerror(rte_errno));
	return 0;
}
