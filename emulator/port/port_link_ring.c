/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Link kind `ring:PAIR:a|b`: two net_ring ports in one process joined back
 * to back (rte_eth_from_rings over two shared rte_rings): what a sends, b
 * receives. For in-process tests. Nothing wakes the progress thread on a
 * frame: it naps 1 ms at most.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ring.h>

#include "port_link.h"

#define PORT_RING_SIZE 1024
#define RING_PAIRS     16
#define RING_NAME_MAX  16

struct ring_pair {
	char name[RING_NAME_MAX + 4];
	struct rte_ring *ring[2]; /* [0]: a -> b, [1]: b -> a */
	unsigned refs;
	bool side_open[2];
};

struct ring_link {
	struct ring_pair *pair;
	int side; /* 0 = a, 1 = b */
};

static pthread_mutex_t ring_pairs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ring_pair ring_pairs[RING_PAIRS];

static void ring_drain(struct rte_ring *r)
{
	void *obj;

	while (rte_ring_dequeue(r, &obj) == 0)
		rte_pktmbuf_free(obj);
}

static int ring_pair_create(struct ring_pair *rp, const char *name, char *err, size_t errlen)
{
	memset(rp, 0, sizeof(*rp));
	snprintf(rp->name, sizeof(rp->name), "%.16s", name);
	for (int d = 0; d < 2; d++) {
		char rname[RTE_RING_NAMESIZE];

		snprintf(rname, sizeof(rname), "rre%u%c_%.16s", port_next_seq() % 1000u,
			 d ? 'l' : 'r', name);
		rp->ring[d] = rte_ring_create(rname, PORT_RING_SIZE, SOCKET_ID_ANY, 0);
		if (!rp->ring[d]) {
			if (d)
				rte_ring_free(rp->ring[0]);
			return port_fail(err, errlen, -rte_errno, "cannot create ring %s: %s",
					 rname, rte_strerror(rte_errno));
		}
	}
	return 0;
}

static int ring_pair_get(const char *name, int side, struct ring_pair **out, char *err,
			 size_t errlen)
{
	struct ring_pair *rp = NULL, *free_slot = NULL;
	int rc = 0;

	pthread_mutex_lock(&ring_pairs_lock);
	for (unsigned i = 0; i < RING_PAIRS; i++) {
		if (ring_pairs[i].refs && !strcmp(ring_pairs[i].name, name))
			rp = &ring_pairs[i];
		else if (!ring_pairs[i].refs && !free_slot)
			free_slot = &ring_pairs[i];
	}
	if (!rp) {
		if (!free_slot) {
			rc = port_fail(err, errlen, -ENOSPC, "too many ring pairs in this process");
			goto out;
		}
		rp = free_slot;
		rc = ring_pair_create(rp, name, err, errlen);
		if (rc)
			goto out;
	}
	if (rp->side_open[side]) {
		rc = port_fail(err, errlen, -EBUSY, "ring pair %s side %c is already open", name,
			       'a' + side);
		goto out;
	}
	rp->side_open[side] = true;
	rp->refs++;
	*out = rp;
out:
	pthread_mutex_unlock(&ring_pairs_lock);
	return rc;
}

static void ring_pair_put(struct ring_pair *rp, int side)
{
	pthread_mutex_lock(&ring_pairs_lock);
	/* Frames we sent that the peer has not taken yet are ours: free them
	 * before our pool goes away. Frames sent to us belong to the peer's pool. */
	ring_drain(rp->ring[side]);
	ring_drain(rp->ring[!side]);
	rp->side_open[side] = false;
	if (--rp->refs == 0) {
		rte_ring_free(rp->ring[0]);
		rte_ring_free(rp->ring[1]);
		memset(rp, 0, sizeof(*rp));
	}
	pthread_mutex_unlock(&ring_pairs_lock);
}

static int ring_check_arg(const char *arg, char *err, size_t errlen)
{
	size_t n = strlen(arg);

	if (n < 3 || arg[n - 2] != ':' || (arg[n - 1] != 'a' && arg[n - 1] != 'b'))
		return port_fail(err, errlen, -EINVAL,
				 "expected ring:PAIRNAME:a or ring:PAIRNAME:b");
	if (n - 2 > RING_NAME_MAX)
		return port_fail(err, errlen, -EINVAL, "ring pair name longer than 16 characters");
	for (size_t i = 0; i < n - 2; i++)
		if (!isalnum((unsigned char)arg[i]) && arg[i] != '_')
			return port_fail(err, errlen, -EINVAL,
					 "ring pair name: letters, digits and '_' only");
	return 0;
}

static int ring_preview_mac(const struct rocemu_port_config *cfg, const char *arg, uint8_t mac[6])
{
	(void)arg;
	port_generated_mac(cfg, mac);
	return 0;
}

static int ring_mtu(struct rocemu_port *port, const char *arg, char *err, size_t errlen)
{
	(void)arg;
	(void)err;
	(void)errlen;
	port->eth_mtu = port->cfg.mtu ? port->cfg.mtu : PORT_SOFT_LINK_MTU;
	return 0;
}

static int ring_create(struct rocemu_port *port, const char *arg, char *err, size_t errlen)
{
	struct ring_link *l = port->link_priv;
	char pair[24];
	size_t n = strlen(arg);
	struct rte_ring *rx, *tx;
	int rc;

	l->side = arg[n - 1] == 'b';
	snprintf(pair, sizeof(pair), "%.*s", (int)(n - 2), arg);
	rc = ring_pair_get(pair, l->side, &l->pair, err, errlen);
	if (rc)
		return rc;
	tx = l->pair->ring[l->side];
	rx = l->pair->ring[!l->side];
	/* short: net_ring derives object names from it */
	snprintf(port->dev_name, sizeof(port->dev_name), "net_ring_r%u", port_next_seq());
	rc = rte_eth_from_rings(port->dev_name, &rx, 1, &tx, 1, (unsigned)rte_socket_id());
	if (rc < 0)
		return port_fail(err, errlen, -EIO, "cannot create ring port %s: %s",
				 port->dev_name, rte_strerror(rte_errno));
	port->port_id = (uint16_t)rc;
	port->dev_is_vdev = true;
	return 0;
}

/* We can see the ring toward the peer: in flight until the peer took all. */
static bool ring_tx_in_flight(struct rocemu_port *port, uint64_t now)
{
	struct ring_link *l = port->link_priv;

	(void)now;
	return !rte_ring_empty(l->pair->ring[l->side]);
}

static void ring_release(struct rocemu_port *port)
{
	struct ring_link *l = port->link_priv;

	port_dev_remove(port);
	if (l->pair)
		ring_pair_put(l->pair, l->side);
	l->pair = NULL;
}

const struct port_link_ops port_link_ring = {
    .name = "ring",
    .prefix = "ring:",
    .usage = "ring:PAIR:a|b",
    .priv_size = sizeof(struct ring_link),
    .check_arg = ring_check_arg,
    .preview_mac = ring_preview_mac,
    .mtu = ring_mtu,
    .create = ring_create,
    .tx_in_flight = ring_tx_in_flight,
    .release = ring_release,
};
