/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Seeded fault injector on the port's tx and rx paths, for deterministic
 * tests (ARCHITECTURE §6): drop (random or an explicit list of 1-based frame
 * indices), duplicate, reorder (hold a frame until after the next ones),
 * corrupt (flip one byte after the Ethernet header) and delay. Off unless a
 * fault-* option is given; then the data path tests one pointer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "port_internal.h"

static uint64_t rng_next(uint64_t *s)
{
	/* xorshift64*: small, fast, and reproducible from the seed */
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1Dull;
}

static bool chance(struct port_fault *f, uint32_t ppm)
{
	return ppm && rng_next(&f->rng) % 1000000u < ppm;
}

int port_fault_init(struct rocemu_port *port)
{
	struct port_fault *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->rng = port->cfg.fault.seed ? port->cfg.fault.seed : 0x9E3779B97F4A7C15ull;
	port->fault = f;
	return 0;
}

void port_fault_free(struct rocemu_port *port)
{
	struct port_fault *f = port->fault;

	if (!f)
		return;
	port->fault = NULL;
	for (int d = 0; d < 2; d++)
		for (unsigned i = 0; i < f->dir[d].n_held; i++)
			rte_pktmbuf_free(f->dir[d].held[i]);
	free(f);
}

static bool in_drop_list(const uint32_t *list, uint64_t idx)
{
	for (unsigned i = 0; i < 32 && list[i]; i++)
		if (list[i] == idx)
			return true;
	return false;
}

static bool hold(struct port_fault_dir *d, struct rte_mbuf *m, uint64_t until)
{
	if (d->n_held == PORT_FAULT_HOLD)
		return false;
	d->held[d->n_held] = m;
	d->held_until[d->n_held] = until;
	d->n_held++;
	return true;
}

unsigned port_fault_apply(struct rocemu_port *port, int dir, struct rte_mbuf *m,
			  struct rte_mbuf *out[2], uint64_t now)
{
	const struct rocemu_fault_config *cfg = &port->cfg.fault;
	struct port_fault *f = port->fault;
	struct port_fault_dir *d = &f->dir[dir];
	uint64_t idx = ++d->count;
	unsigned n = 0;

	if (in_drop_list(cfg->drop_list[dir], idx) || chance(f, cfg->drop_ppm[dir])) {
		if (port->capture) /* the capture shows what was lost, and where */
			port_capture_lost(port, m, dir == 1);
		rte_pktmbuf_free(m);
		port_count(port, dir ? PC_DROP_FAULT_RX : PC_DROP_FAULT_TX);
		return 0;
	}
	if (chance(f, cfg->corrupt_ppm[dir]) && m->data_len > RTE_ETHER_HDR_LEN) {
		uint8_t *p = rte_pktmbuf_mtod(m, uint8_t *);
		uint32_t off = RTE_ETHER_HDR_LEN +
			       (uint32_t)(rng_next(&f->rng) % (m->data_len - RTE_ETHER_HDR_LEN));

		p[off] ^= (uint8_t)(1u << (rng_next(&f->rng) % 8));
		port_count(port, dir ? PC_FAULT_RX_CORRUPTED : PC_FAULT_TX_CORRUPTED);
	}
	if (cfg->delay_us && chance(f, cfg->delay_ppm[dir]) &&
	    hold(d, m, now + (uint64_t)cfg->delay_us * 1000)) {
		port_count(port, dir ? PC_FAULT_RX_DELAYED : PC_FAULT_TX_DELAYED);
		return 0;
	}
	if (chance(f, cfg->reorder_ppm[dir]) && hold(d, m, now)) {
		port_count(port, dir ? PC_FAULT_RX_REORDERED : PC_FAULT_TX_REORDERED);
		return 0;
	}
	out[n++] = m;
	if (chance(f, cfg->dup_ppm[dir])) {
		struct rte_mbuf *c = rte_pktmbuf_copy(m, port->pool, 0, UINT32_MAX);

		if (c) {
			out[n++] = c;
			port_count(port, dir ? PC_FAULT_RX_DUPLICATED : PC_FAULT_TX_DUPLICATED);
		}
	}
	return n;
}

unsigned port_fault_release(struct rocemu_port *port, int dir, struct rte_mbuf **out, unsigned max,
			    uint64_t now)
{
	struct port_fault_dir *d = &port->fault->dir[dir];
	unsigned n = 0, keep = 0;

	for (unsigned i = 0; i < d->n_held; i++) {
		if (d->held_until[i] <= now && n < max) {
			out[n++] = d->held[i];
		} else {
			d->held[keep] = d->held[i];
			d->held_until[keep] = d->held_until[i];
			keep++;
		}
	}
	d->n_held = keep;
	return n;
}
