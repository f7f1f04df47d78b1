/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Transmit: the fault injector, the capture tap, internal loopback for
 * frames to our own MAC, the transmit buffer and its flush to the device
 * (a post's frames may wait there for the next post's, rocemu_port_flush_posted).
 * After a burst the link driver may wake its peer (memif's bell).
 */
#include <errno.h>
#include <string.h>

#include <rte_ethdev.h>

#include "port_link.h"

struct rte_mbuf *rocemu_port_alloc_mbuf(struct rocemu_port *port)
{
	port_pool_thread_join(port);
	return rte_pktmbuf_alloc(port->pool);
}

static int loop_enqueue(struct rocemu_port *port, struct rte_mbuf *m)
{
	if (port->loop_tail - port->loop_head >= PORT_LOOP_SLOTS) {
		rte_pktmbuf_free(m);
		port_count(port, PC_DROP_LOOPBACK_FULL);
		port_count(port, PC_TX_DROPS);
		return -ENOBUFS;
	}
	port->loop[port->loop_tail++ & (PORT_LOOP_SLOTS - 1)] = m;
	port_count(port, PC_LOOPBACK_FRAMES);
	return 0;
}

/* A port on a VLAN: the frames built without a tag (ARP, ND, ICMP; the
 * engine tags RoCE frames itself, with the SL as PCP) get the port's VLAN ID
 * with PCP 0. */
static int port_vlan_tag(struct rocemu_port *port, struct rte_mbuf **m)
{
	const struct rte_ether_hdr *eth = rte_pktmbuf_mtod(*m, const struct rte_ether_hdr *);

	if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN))
		return 0;
	(*m)->vlan_tci = port->cfg.vlan;
	if (rte_vlan_insert(m) < 0) {
		rte_pktmbuf_free(*m);
		port_count(port, PC_DROP_TX_VLAN_NO_ROOM);
		port_count(port, PC_TX_DROPS);
		return -ENOBUFS;
	}
	return 0;
}

/* After the fault injector: capture, then loop back or queue for the device.
 * dst: the frame's destination MAC when the caller knows it, else NULL (read
 * from the frame). */
static int transmit(struct rocemu_port *port, struct rte_mbuf *m, const struct rte_ether_addr *dst)
{

	if (unlikely(m->pkt_len < RTE_ETHER_HDR_LEN || m->data_len < RTE_ETHER_HDR_LEN)) {
		rte_pktmbuf_free(m);
		port_count(port, PC_DROP_TX_RUNT);
		port_count(port, PC_TX_DROPS);
		return -EINVAL;
	}
	if (port->cfg.vlan && port_vlan_tag(port, &m) < 0)
		return -ENOBUFS;
	if (unlikely(port->capture != NULL))
		port_capture_frame(port, m);
	/* A frame just built may sit in lines the peer's CPU read last; reading
	 * its MAC back would wait for them (bench/perf_analysis.md, "64 B"). */
	if (dst == NULL)
		dst = &rte_pktmbuf_mtod(m, const struct rte_ether_hdr *)->dst_addr;
	if (rte_is_same_ether_addr(dst, &port->mac) && !port->link->switched_loopback)
		return loop_enqueue(port, m);
	/* A group this port is in: its own QPs in the group get a copy, as a
	 * NIC loops multicast back to the local QPs attached to it. */
	if (unlikely(rte_is_multicast_ether_addr(dst)) && port->n_mcast &&
	    port_mcast_mac_joined(port, dst->addr_bytes) && !port->link->switched_loopback) {
		struct rte_mbuf *c = rte_pktmbuf_copy(m, port->pool, 0, UINT32_MAX);

		if (c)
			loop_enqueue(port, c);
		else
			port_count(port, PC_DROP_MBUF_EXHAUSTED);
	}
	if (port->tx_n == PORT_TX_BUF) {
		rocemu_port_flush(port);
		if (port->tx_n == PORT_TX_BUF) {
			rte_pktmbuf_free(m);
			port_count(port, PC_DROP_TX_FULL);
			port_count(port, PC_TX_DROPS);
			return -ENOBUFS;
		}
	}
	port->tx_buf[port->tx_n++] = m;
	port->tx_buf_bytes += m->pkt_len;
	return 0;
}

int port_transmit(struct rocemu_port *port, struct rte_mbuf *m)
{
	return transmit(port, m, NULL);
}

int rocemu_port_tx_to(struct rocemu_port *port, struct rte_mbuf *m, const uint8_t dst_mac[6])
{
	if (likely(port->fault == NULL))
		return transmit(port, m, (const struct rte_ether_addr *)dst_mac);
	return rocemu_port_tx(port, m);
}

int rocemu_port_tx(struct rocemu_port *port, struct rte_mbuf *m)
{
	struct rte_mbuf *out[2];
	unsigned n;
	int rc = 0;

	if (likely(port->fault == NULL))
		return port_transmit(port, m);
	n = port_fault_apply(port, 0, m, out, rocemu_now_ns());
	for (unsigned i = 0; i < n; i++) {
		int r;

		if (i > 0) /* two frames out of one: the original and its copy */
			port_capture_copy_next(port);
		r = port_transmit(port, out[i]);
		if (r && !rc)
			rc = r;
	}
	return rc;
}

unsigned rocemu_port_tx_room(struct rocemu_port *port)
{
	if (port->tx_n > PORT_TX_BUF / 2)
		rocemu_port_flush(port);
	return PORT_TX_BUF - port->tx_n;
}

uint64_t rocemu_port_pass_now(const struct rocemu_port *port)
{
	return port->pass_now ? port->pass_now : rocemu_now_ns();
}

/* The link cannot carry frames now (a memif peer closing, a client
 * reconnecting): drop what is buffered, under the link's reason. */
static void drop_buffered(struct rocemu_port *port, enum port_counter reason)
{
	for (unsigned i = 0; i < port->tx_n; i++)
		rte_pktmbuf_free(port->tx_buf[i]);
	port->ctr[reason] += port->tx_n;
	port->ctr[PC_TX_DROPS] += port->tx_n;
	port->tx_n = 0;
	port->tx_buf_bytes = 0;
}

/*
 * A post's frames wait in the transmit buffer while the application posts
 * back to back: one burst to the device (one memif ring update, one look at
 * the peer's bell) for up to TX_HOLD_FRAMES posts instead of one per post.
 * Back to back means that no pass ran since the previous post: a poll runs
 * one (or waits for the thread's), and a pass flushes at its end, so a
 * post that follows a poll, as every post of a latency test does, is
 * flushed at once, and a poll sends what waits before it looks at its CQ.
 * A post flushes when TX_HOLD_FRAMES wait or the first waiting one is
 * TX_HOLD_NS old; a post that runs a pass of its own (none ran for 20 us,
 * port_app.c) is no longer back to back. The thread is not woken for the
 * bound (a FUTEX_WAKE per burst cost more than the batch saved, bench/
 * perf_analysis.md): posts followed by no verb at all wait for its next
 * pass, at the end of its nap (1-2 ms while the application polls).
 */
#define TX_HOLD_FRAMES 32u
#define TX_HOLD_NS     20000ull

void rocemu_port_flush_posted(struct rocemu_port *port)
{
	uint64_t pass = __atomic_load_n(&port->last_pass_ns, __ATOMIC_RELAXED);
	bool back_to_back = pass == port->tx_post_pass_ns;
	uint64_t since = port->tx_held_since_ns;

	port->tx_post_pass_ns = pass;
	if (back_to_back && port->tx_hold && port->tx_n && port->tx_n < TX_HOLD_FRAMES) {
		uint64_t now = rocemu_port_pass_now(port);

		if (!since || now - since < TX_HOLD_NS) {
			port->tx_held_since_ns = since ? since : now;
			port_count(port, PC_TX_HELD);
			return;
		}
	}
	rocemu_port_flush(port);
}

void rocemu_port_flush(struct rocemu_port *port)
{
	enum port_counter blocked;
	uint32_t left = 0;
	uint64_t now;
	uint16_t sent;

	/* a pass's ACKs wait for the application's post (port_progress.c) */
	if (unlikely(port->in_pass) && port_hold_acks(port))
		return;
	port->tx_held_since_ns = 0; /* what is left is not held by choice */
	if (port->tx_n == 0 || unlikely(!port_has_device(port)))
		return;
	if (unlikely(port->link->blocked && port->link->blocked(port, &blocked))) {
		drop_buffered(port, blocked);
		return;
	}
	sent = port->link->tx_burst
		   ? port->link->tx_burst(port, port->tx_buf, (uint16_t)port->tx_n)
		   : rte_eth_tx_burst(port->port_id, 0, port->tx_buf, (uint16_t)port->tx_n);
	/* Nothing taken (a full ring, memif's channel at its cap): the frames
	 * wait as they are. A sender waiting for its peer tries every pass,
	 * so this costs nothing per frame: with 1024 QPs the byte count over
	 * all 256 buffered mbufs, twice per try, was 20-29% of both sides'
	 * samples (bench/perf_analysis.md, "Many QPs"). */
	if (!sent)
		return;
	/* Once sent, the device owns the mbufs. What is not sent comes back
	 * as the tail, though not always the same frames (a host link sends
	 * past a full ring): the bytes sent are all the bytes but the tail's. */
	for (unsigned i = sent; i < port->tx_n; i++)
		left += port->tx_buf[i]->pkt_len;
	port->ctr[PC_TX_BYTES] += port->tx_buf_bytes - left;
	port->tx_buf_bytes = left;
	port->ctr[PC_TX_FRAMES] += sent;
	/* no clock read (~35 ns on a VM) per post: outside a pass, the last
	 * pass's time is close enough for the close linger and a time-based
	 * bell (the thread passes at least every 2 ms) */
	now = port->pass_now ? port->pass_now : port->last_pass_ns;
	port->last_tx_ns = now;
	if (port->link->wake_peer)
		port->link->wake_peer(port, now);
	if (sent < port->tx_n)
		memmove(port->tx_buf, port->tx_buf + sent,
			(port->tx_n - sent) * sizeof(port->tx_buf[0]));
	port->tx_n -= sent;
}
