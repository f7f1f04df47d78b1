/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An AF_XDP socket on one queue of an interface (see port_xsk.h), spoken
 * to directly: Debian 12's libxdp has no xsk API, and DPDK's PMD opens
 * only queues it counts as "combined channels", which a veth has none of.
 * The kernel's protocol (Documentation/networking/af_xdp.rst): register a
 * UMEM (XDP_UMEM_REG), size and map four rings (fill, completion, rx,
 * tx), bind to (ifindex, queue). Each ring is a producer and a consumer
 * index in shared memory and an array of descriptors; one side writes each
 * index, with release/acquire ordering.
 *
 * The UMEM here: XSK_FRAMES chunks of one page; the first half is lent to
 * the kernel for receiving (the fill ring, given back as received frames
 * are copied out), the second half is the free list for sending (taken
 * back from the completion ring).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/if_xdp.h>

#include <rte_mbuf.h>

#include "port_internal.h"
#include "port_xsk.h"

#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef SOL_XDP
#define SOL_XDP 283
#endif

#define XSK_FRAME  4096u
#define XSK_FRAMES 2048u
#define XSK_RING   (XSK_FRAMES / 2) /* each ring; a power of two */

struct xsk_ring {
	uint32_t *producer, *consumer, *flags;
	void *desc;
	void *map;
	size_t map_len;
	uint32_t head; /* our side's index (producer or consumer) */
};

struct port_xsk {
	int fd;
	bool zc;
	uint8_t *umem;
	struct xsk_ring fill, comp, rx, tx;
	uint64_t free_frame[XSK_RING]; /* UMEM addresses free for sending */
	unsigned n_free;
	uint32_t tx_queued; /* descriptors produced since the last kick */
};

static uint32_t load_acq(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void store_rel(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static int map_ring(int fd, struct xsk_ring *r, const struct xdp_ring_offset *off, size_t desc_size,
		    off_t pgoff, bool producer_is_ours)
{
	r->map_len = off->desc + XSK_RING * desc_size;
	r->map =
	    mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, pgoff);
	if (r->map == MAP_FAILED) {
		r->map = NULL;
		return -errno;
	}
	r->producer = (uint32_t *)((uint8_t *)r->map + off->producer);
	r->consumer = (uint32_t *)((uint8_t *)r->map + off->consumer);
	r->flags = (uint32_t *)((uint8_t *)r->map + off->flags);
	r->desc = (uint8_t *)r->map + off->desc;
	r->head = producer_is_ours ? *r->producer : *r->consumer;
	return 0;
}

static void unmap_ring(struct xsk_ring *r)
{
	if (r->map)
		munmap(r->map, r->map_len);
	r->map = NULL;
}

static int set_int(int fd, int opt, int v)
{
	return setsockopt(fd, SOL_XDP, opt, &v, sizeof(v)) ? -errno : 0;
}

int port_xsk_open(int ifindex, unsigned queue, struct port_xsk **out)
{
	struct xdp_umem_reg reg = {.len = (uint64_t)XSK_FRAMES * XSK_FRAME,
				   .chunk_size = XSK_FRAME};
	struct sockaddr_xdp sa = {.sxdp_family = AF_XDP,
				  .sxdp_ifindex = (uint32_t)ifindex,
				  .sxdp_queue_id = queue,
				  .sxdp_flags = XDP_USE_NEED_WAKEUP};
	struct xdp_mmap_offsets off;
	struct xdp_options opts = {0};
	socklen_t len = sizeof(off), olen = sizeof(opts);
	struct port_xsk *x = calloc(1, sizeof(*x));
	int rc;

	if (!x)
		return -ENOMEM;
	x->fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (x->fd < 0) {
		rc = -errno;
		free(x);
		return rc;
	}
	x->umem = mmap(NULL, reg.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (x->umem == MAP_FAILED) {
		x->umem = NULL;
		rc = -errno;
		goto fail;
	}
	reg.addr = (uint64_t)(uintptr_t)x->umem;
	rc = setsockopt(x->fd, SOL_XDP, XDP_UMEM_REG, &reg, sizeof(reg)) ? -errno : 0;
	rc = rc ?: set_int(x->fd, XDP_UMEM_FILL_RING, XSK_RING);
	rc = rc ?: set_int(x->fd, XDP_UMEM_COMPLETION_RING, XSK_RING);
	rc = rc ?: set_int(x->fd, XDP_RX_RING, XSK_RING);
	rc = rc ?: set_int(x->fd, XDP_TX_RING, XSK_RING);
	if (!rc && getsockopt(x->fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &len))
		rc = -errno;
	rc = rc
		 ?: map_ring(x->fd, &x->fill, &off.fr, sizeof(uint64_t), XDP_UMEM_PGOFF_FILL_RING,
			     true);
	rc = rc
		 ?: map_ring(x->fd, &x->comp, &off.cr, sizeof(uint64_t),
			     (off_t)XDP_UMEM_PGOFF_COMPLETION_RING, false);
	rc = rc
		 ?: map_ring(x->fd, &x->rx, &off.rx, sizeof(struct xdp_desc), XDP_PGOFF_RX_RING,
			     false);
	rc = rc
		 ?: map_ring(x->fd, &x->tx, &off.tx, sizeof(struct xdp_desc), XDP_PGOFF_TX_RING,
			     true);
	if (rc)
		goto fail;
	/* the first half of the UMEM to the kernel, the second to send from */
	for (unsigned i = 0; i < XSK_RING; i++)
		((uint64_t *)x->fill.desc)[(x->fill.head + i) & (XSK_RING - 1)] =
		    (uint64_t)i * XSK_FRAME;
	x->fill.head += XSK_RING;
	store_rel(x->fill.producer, x->fill.head);
	for (unsigned i = 0; i < XSK_RING; i++)
		x->free_frame[x->n_free++] = (uint64_t)(XSK_RING + i) * XSK_FRAME;
	if (bind(x->fd, (struct sockaddr *)&sa, sizeof(sa))) {
		rc = -errno;
		goto fail;
	}
	if (!getsockopt(x->fd, SOL_XDP, XDP_OPTIONS, &opts, &olen))
		x->zc = opts.flags & XDP_OPTIONS_ZEROCOPY;
	*out = x;
	return 0;
fail:
	port_xsk_close(x);
	return rc;
}

void port_xsk_close(struct port_xsk *x)
{
	if (!x)
		return;
	unmap_ring(&x->fill);
	unmap_ring(&x->comp);
	unmap_ring(&x->rx);
	unmap_ring(&x->tx);
	close(x->fd); /* before the UMEM goes: the kernel unpins it */
	if (x->umem)
		munmap(x->umem, (size_t)XSK_FRAMES * XSK_FRAME);
	free(x);
}

int port_xsk_fd(const struct port_xsk *x)
{
	return x->fd;
}

bool port_xsk_zero_copy(const struct port_xsk *x)
{
	return x->zc;
}

uint16_t port_xsk_rx(struct rocemu_port *port, struct port_xsk *x, struct rte_mbuf **pkts,
		     uint16_t n)
{
	const struct xdp_desc *ring = x->rx.desc;
	uint32_t avail = load_acq(x->rx.producer) - x->rx.head;
	uint16_t got = 0;

	if (avail > n)
		avail = n;
	for (uint32_t i = 0; i < avail; i++) {
		const struct xdp_desc *d = &ring[(x->rx.head + i) & (XSK_RING - 1)];
		struct rte_mbuf *m = rte_pktmbuf_alloc(port->pool);

		if (m && d->len <= rte_pktmbuf_tailroom(m)) {
			memcpy(rte_pktmbuf_mtod(m, void *), x->umem + d->addr, d->len);
			m->data_len = (uint16_t)d->len;
			m->pkt_len = d->len;
			pkts[got++] = m;
		} else {
			rte_pktmbuf_free(m);
			port_count(port, m ? PC_DROP_RX_TOO_LONG : PC_DROP_MBUF_EXHAUSTED);
			port_count(port, PC_RX_DROPS);
		}
		/* the chunk back to the kernel (the fill ring has room: it
		 * holds at most the XSK_RING chunks lent for receiving) */
		((uint64_t *)x->fill.desc)[x->fill.head++ & (XSK_RING - 1)] =
		    d->addr & ~(uint64_t)(XSK_FRAME - 1);
	}
	if (!avail)
		return 0;
	store_rel(x->rx.consumer, x->rx.head += avail);
	store_rel(x->fill.producer, x->fill.head);
	if (load_acq(x->fill.flags) & XDP_RING_NEED_WAKEUP)
		(void)recvfrom(x->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
	return got;
}

/* Sent frames' chunks back to the free list. */
static void reclaim(struct port_xsk *x)
{
	uint32_t done = load_acq(x->comp.producer) - x->comp.head;

	for (uint32_t i = 0; i < done; i++)
		x->free_frame[x->n_free++] =
		    ((const uint64_t *)x->comp.desc)[x->comp.head++ & (XSK_RING - 1)];
	if (done)
		store_rel(x->comp.consumer, x->comp.head);
}

int port_xsk_tx(struct port_xsk *x, struct rte_mbuf *m)
{
	struct xdp_desc *d;
	uint8_t *dst;
	const void *p;

	if (!x->n_free)
		reclaim(x);
	if (!x->n_free || x->tx.head - load_acq(x->tx.consumer) >= XSK_RING ||
	    m->pkt_len > XSK_FRAME)
		return -ENOBUFS;
	d = &((struct xdp_desc *)x->tx.desc)[x->tx.head & (XSK_RING - 1)];
	d->addr = x->free_frame[--x->n_free];
	d->len = m->pkt_len;
	d->options = 0;
	dst = x->umem + d->addr;
	p = rte_pktmbuf_read(m, 0, m->pkt_len, dst);
	if (p != dst)
		memcpy(dst, p, m->pkt_len);
	rte_pktmbuf_free(m);
	x->tx.head++;
	x->tx_queued++;
	return 0;
}

void port_xsk_kick(struct port_xsk *x)
{
	if (!x->tx_queued)
		return;
	store_rel(x->tx.producer, x->tx.head);
	x->tx_queued = 0;
	/* copy mode sends only in sendmsg; zero-copy when the driver asks */
	if (!x->zc || (load_acq(x->tx.flags) & XDP_RING_NEED_WAKEUP))
		(void)sendto(x->fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
	reclaim(x);
}
