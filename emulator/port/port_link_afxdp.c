/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Link kind `af_xdp:IFACE[,queues=N]`: AF_XDP sockets on queues 0..N-1 of
 * a kernel interface (default: all its receive queues, at most XSK_MAX),
 * beside the kernel: net_af_xdp on queue 0, rocemu's own sockets
 * (port_xsk.c) on the others (open_queues says why). The progress thread
 * polls every queue; transmit puts a RoCEv2 frame on the queue of its
 * destination QPN, anything else on queue 0 (flow_queue).
 *
 * The PMD loads rocemu's own XDP program (xdp/, found as find_xdp_prog
 * says) instead of its default one, which would take every frame of the
 * queue from the kernel: ours takes only RoCEv2 to the port's
 * addresses (rocemu_addrs, filled here once the GID table exists), and for
 * addresses rocemu owns alone (the kernel has none of them on IFACE) also
 * ARP, ND and any IP to them. Everything else goes on to the kernel, so a
 * program's own TCP (perftest, the pingpongs, UCX) and the kernel's ping
 * keep working on the interface. When the kernel owns an address it also
 * answers ARP/ND for it, and rocemu never sees the answers to its own
 * requests: the port then resolves neighbours through the kernel's table
 * (port_neigh_kernel.c). The queues, the mode, the XDP attach mode and
 * whether the sockets are zero-copy are said in one notice line at open. libxdp loads no
 * program then (the PMD loads ours with libbpf), so it no longer looks for
 * bpffs nor says that it found none.
 *
 * The PMD makes the port's mbuf pool its UMEM: from the pool's first
 * memory chunk, populated size times object size bytes. A pool from
 * rte_pktmbuf_pool_create does not fit that: without hugepages its objects
 * (2368 bytes with a 2 KB data room) may not cross a 4 KiB page, so each
 * took a page of its own, and the UMEM covered only the first 4736 of 8192.
 * The pool hands mbufs out in FIFO order (no cache): after about 2700 (4736
 * less the 2048 put on the fill ring at start) the PMD gave the kernel fill
 * and TX descriptors outside the UMEM, which it drops (TX as invalid
 * descriptors; a dropped fill entry silently), and the port stopped moving
 * frames. So the pool here is made as the PMD assumes: every object exactly
 * one 4 KiB page (header, mbuf and data room, no channel-spreading pad), all
 * in one page-aligned memzone; chunks never cross a page (zero-copy drivers
 * need that), and open checks that every object lies in the UMEM. The data
 * room leaves the MTU at most 3498. The xsk descriptor is not exposed
 * through ethdev in DPDK 22.11: nothing wakes the progress thread on a frame
 * (1 ms naps).
 *
 * Open, close, open again: DPDK 22.11's eth_dev_close never deletes the
 * UMEM of a queue (its reference count test is off by one), and the UMEM's
 * AF_XDP socket, bound to the interface's queue 0, stays open: a second
 * open in the process failed ("Failed to create xsk socket", EINVAL). So
 * the sockets the device opened are noted (the AF_XDP descriptors that
 * appear between create and attach, under a lock so that two opens do not
 * mix them up) and closed after the device is removed. The kernel lets go
 * of the queue a little later (the socket's pool is freed by deferred
 * work): an open soon after is tried again while it fails, 5 s at most.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/if_xdp.h>

#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_memzone.h>

#include "port_link.h"
#include "port_xsk.h"
#include "xdp/rocemu_xdp.h"

#ifndef ROCEMU_XDP_BUILT
#define ROCEMU_XDP_BUILT ""
#endif
#ifndef ROCEMU_XDP_INSTALLED
#define ROCEMU_XDP_INSTALLED "/usr/local/lib/rocemu/" ROCEMU_XDP_OBJECT
#endif
#ifndef SOL_XDP
#define SOL_XDP 283
#endif

/* the largest MTU whose frames fit an XDP frame of a 4 KB page */
#define AF_XDP_MAX_MTU 3498
#ifndef AF_XDP
#define AF_XDP 44
#endif
#define XSK_MAX 16
/* a pool object (mempool header, mbuf, data room): one UMEM chunk, a page */
#define AF_XDP_OBJ_SIZE 4096u

struct afxdp_link {
	char iface[IF_NAMESIZE];
	unsigned n_queues;	      /* the queues rocemu takes: 0 (the PMD's) .. n-1 */
	struct port_xsk *xq[XSK_MAX]; /* queues 1 .. n_queues-1: rocemu's own sockets */
	unsigned rx_next;	      /* the queue rx_burst looks at first */
	ino_t before[XSK_MAX];	      /* AF_XDP sockets open before the device was made */
	unsigned n_before;
	int xsk_fd[XSK_MAX]; /* the ones the device opened */
	ino_t xsk_ino[XSK_MAX];
	unsigned n_xsk;
	bool locked;	     /* xsk_lock held from create to attach */
	char prog[PATH_MAX]; /* the XDP program's object file */
};

static pthread_mutex_t xsk_lock = PTHREAD_MUTEX_INITIALIZER;
/* when the process last closed an af_xdp device (rocemu_now_ns) */
static atomic_uint_fast64_t last_release_ns;

/* fd's inode when it is an AF_XDP socket, else 0. */
static ino_t xsk_inode(int fd)
{
	struct stat st;
	socklen_t len = sizeof(int);
	int domain;

	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) || domain != AF_XDP ||
	    fstat(fd, &st))
		return 0;
	return st.st_ino;
}

/* Call fn for each AF_XDP socket of the process. */
static void each_xsk(struct afxdp_link *l, void (*fn)(struct afxdp_link *, int, ino_t))
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	while (d && (e = readdir(d))) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);
		ino_t ino;

		if (*end || end == e->d_name || fd == dirfd(d))
			continue;
		ino = xsk_inode((int)fd);
		if (ino)
			fn(l, (int)fd, ino);
	}
	if (d)
		closedir(d);
}

static void note_before(struct afxdp_link *l, int fd, ino_t ino)
{
	(void)fd;
	if (l->n_before < XSK_MAX)
		l->before[l->n_before++] = ino;
}

static void note_new(struct afxdp_link *l, int fd, ino_t ino)
{
	for (unsigned i = 0; i < l->n_before; i++)
		if (l->before[i] == ino)
			return;
	if (l->n_xsk < XSK_MAX) {
		l->xsk_fd[l->n_xsk] = fd;
		l->xsk_ino[l->n_xsk++] = ino;
	}
}

static void unlock_xsk(struct afxdp_link *l)
{
	if (l->locked)
		pthread_mutex_unlock(&xsk_lock);
	l->locked = false;
}

/* The interface's receive queues (real_num_rx_queues, as sysfs lists
 * them), at least 1. */
static unsigned iface_rx_queues(const char *iface)
{
	char path[64 + IF_NAMESIZE];
	unsigned n = 0;
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "/sys/class/net/%s/queues", iface);
	d = opendir(path);
	while (d && (e = readdir(d)))
		n += !strncmp(e->d_name, "rx-", 3);
	if (d)
		closedir(d);
	return n ? n : 1;
}

/* IFACE[,queues=N]: the interface, and how many of its queues (0: all of
 * them, at most XSK_MAX). */
static int parse_arg(const char *arg, char iface[IF_NAMESIZE], unsigned *queues, char *err,
		     size_t errlen)
{
	const char *comma = strchr(arg, ',');
	size_t len = comma ? (size_t)(comma - arg) : strlen(arg);
	char name[IF_NAMESIZE];
	int rc;

	*queues = 0;
	if (len >= IF_NAMESIZE)
		return port_fail(err, errlen, -EINVAL,
				 "af_xdp needs an interface name of 1..15 characters");
	if (comma) {
		char *end;
		unsigned long n = strtoul(comma + 1 + strlen("queues="), &end, 10);

		if (strncmp(comma + 1, "queues=", strlen("queues=")) || *end ||
		    end == comma + 1 + strlen("queues=") || n < 1 || n > XSK_MAX)
			return port_fail(err, errlen, -EINVAL,
					 "af_xdp: bad option '%s' (queues=N, N from 1 to %u)",
					 comma + 1, XSK_MAX);
		*queues = (unsigned)n;
	}
	memcpy(name, arg, len);
	name[len] = '\0';
	rc = port_iface_check_name("af_xdp", name, err, errlen);
	if (!rc && iface)
		memcpy(iface, name, IF_NAMESIZE);
	return rc;
}

static int afxdp_check_arg(const char *arg, char *err, size_t errlen)
{
	unsigned q;

	return parse_arg(arg, NULL, &q, err, errlen);
}

static int afxdp_preview_mac(const struct rocemu_port_config *cfg, const char *arg, uint8_t mac[6])
{
	char iface[IF_NAMESIZE];
	unsigned q;

	(void)cfg;
	if (parse_arg(arg, iface, &q, NULL, 0))
		return -ENODATA;
	return port_iface_mac(iface, mac) ? -ENODATA : 0;
}

static int afxdp_mtu(struct rocemu_port *port, const char *arg, char *err, size_t errlen)
{
	struct afxdp_link *l = port->link_priv;
	int rc = parse_arg(arg, l->iface, &l->n_queues, err, errlen);

	if (rc)
		return rc;
	if (!l->n_queues) {
		l->n_queues = iface_rx_queues(l->iface);
		if (l->n_queues > XSK_MAX)
			l->n_queues = XSK_MAX;
	}
	rc = port_iface_mtu(port, l->iface, err, errlen);

	if (rc)
		return rc;
	if (port->eth_mtu > AF_XDP_MAX_MTU)
		return port_fail(
		    err, errlen, -EINVAL,
		    "af_xdp: MTU %u too large (XDP frames hold at most %u bytes of MTU)",
		    port->eth_mtu, AF_XDP_MAX_MTU);
	return 0;
}

/* What is left of a page for data after the mempool's object header and
 * the mbuf (headroom not counted: port_pool_create adds it). */
static uint32_t afxdp_data_room(const struct rocemu_port *port)
{
	struct rte_mempool_objsz sz;

	(void)port;
	rte_mempool_calc_obj_size(sizeof(struct rte_mbuf), RTE_MEMPOOL_F_NO_SPREAD, &sz);
	return AF_XDP_OBJ_SIZE - sz.header_size - sz.trailer_size - sz.elt_size -
	       RTE_PKTMBUF_HEADROOM;
}

static void afxdp_pool_mem_free(struct rte_mempool_memhdr *memhdr, void *mz)
{
	(void)memhdr;
	rte_memzone_free(mz);
}

/* The pool the PMD's UMEM assumes (see the top): n page-sized objects back
 * to back in one page-aligned memzone. The IOVA is the memzone's; the
 * kernel, not DPDK, maps the UMEM for a device. */
static struct rte_mempool *afxdp_pool_create(const char *name, unsigned n, uint16_t data_room,
					     int socket)
{
	struct rte_pktmbuf_pool_private priv = {.mbuf_data_room_size = data_room};
	unsigned elt = (unsigned)sizeof(struct rte_mbuf) + data_room;
	size_t len = (size_t)n * AF_XDP_OBJ_SIZE;
	const struct rte_memzone *mz;
	char mz_name[RTE_MEMZONE_NAMESIZE];
	struct rte_mempool *mp;
	int rc;

	if (rte_mempool_calc_obj_size(elt, RTE_MEMPOOL_F_NO_SPREAD, NULL) != AF_XDP_OBJ_SIZE) {
		rte_errno = EINVAL;
		return NULL;
	}
	mp = rte_mempool_create_empty(name, n, elt, 0, sizeof(priv), socket,
				      RTE_MEMPOOL_F_NO_SPREAD);
	if (!mp)
		return NULL;
	rc = rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), NULL);
	if (rc)
		goto fail;
	rte_pktmbuf_pool_init(mp, &priv);
	snprintf(mz_name, sizeof(mz_name), "XP_%s", name);
	mz = rte_memzone_reserve_aligned(mz_name, len, socket, 0, AF_XDP_OBJ_SIZE);
	if (!mz) {
		rc = -rte_errno;
		goto fail;
	}
	rc = rte_mempool_populate_iova(mp, mz->addr, mz->iova, len, afxdp_pool_mem_free,
				       (void *)(uintptr_t)mz);
	if (rc < 0) {
		rte_memzone_free(mz);
		goto fail;
	}
	if (mp->populated_size != n) {
		rc = -ENOMEM;
		goto fail;
	}
	rte_mempool_obj_iter(mp, rte_pktmbuf_init, NULL);
	return mp;
fail:
	rte_mempool_free(mp);
	rte_errno = -rc;
	return NULL;
}

struct umem_span {
	uintptr_t base, end;
	unsigned outside;
};

static void count_outside(struct rte_mempool *mp, void *arg, void *obj, unsigned idx)
{
	struct umem_span *u = arg;
	uintptr_t start = (uintptr_t)obj - mp->header_size;

	(void)idx;
	if (start < u->base || start + AF_XDP_OBJ_SIZE > u->end)
		u->outside++;
}

/* Every object in the UMEM the PMD will register (DPDK 22.11,
 * xdp_umem_configure): from the first chunk's page, the populated size
 * times the object size. */
static int afxdp_check_pool(const struct rocemu_port *port, char *err, size_t errlen)
{
	struct rte_mempool *mp = port->pool;
	struct rte_mempool_memhdr *first = STAILQ_FIRST(&mp->mem_list);
	struct umem_span u = {0};
	uintptr_t page = (uintptr_t)getpagesize();

	u.base = (uintptr_t)first->addr & ~(page - 1);
	u.end =
	    (uintptr_t)first->addr + (uintptr_t)mp->populated_size *
					 rte_mempool_calc_obj_size(mp->elt_size, mp->flags, NULL);
	rte_mempool_obj_iter(mp, count_outside, &u);
	if (u.outside)
		return port_fail(err, errlen, -EINVAL,
				 "af_xdp: %u of %u mbufs lie outside the UMEM the PMD would "
				 "register",
				 u.outside, mp->populated_size);
	return 0;
}

/*
 * rocemu's XDP program: $ROCEMU_XDP_PROG, else rocemu_xdp.o beside the code
 * that runs (rocemu's libibverbs.so.1 in its private library directory, or
 * the rocemu executable), else in the build tree it was built in (tests run
 * from there; an older installed copy must not win), else where `meson
 * install` puts it. The PMD takes the path in its devargs,
 * so it may hold no comma.
 */
static int find_xdp_prog(char *out, size_t len, char *err, size_t errlen)
{
	char here[PATH_MAX] = "";
	const char *cand[4];
	unsigned n = 0;
	Dl_info info;

	if (getenv("ROCEMU_XDP_PROG"))
		cand[n++] = getenv("ROCEMU_XDP_PROG");
	if (dladdr((void *)find_xdp_prog, &info) && info.dli_fname) {
		char copy[PATH_MAX];

		snprintf(copy, sizeof(copy), "%s", info.dli_fname);
		snprintf(here, sizeof(here), "%s/%s", dirname(copy), ROCEMU_XDP_OBJECT);
		cand[n++] = here;
	}
	cand[n++] = ROCEMU_XDP_BUILT;
	cand[n++] = ROCEMU_XDP_INSTALLED;
	for (unsigned i = 0; i < n; i++) {
		if (!cand[i][0] || access(cand[i], R_OK))
			continue;
		if (strchr(cand[i], ',') || strlen(cand[i]) >= len)
			return port_fail(
			    err, errlen, -EINVAL,
			    "af_xdp: the XDP program's path %s holds a comma or is too "
			    "long",
			    cand[i]);
		snprintf(out, len, "%s", cand[i]);
		return 0;
	}
	return port_fail(err, errlen, -ENOENT,
			 "af_xdp: rocemu's XDP program %s not found (looked beside rocemu's "
			 "library, in the build tree and in %s); set ROCEMU_XDP_PROG",
			 ROCEMU_XDP_OBJECT, ROCEMU_XDP_INSTALLED);
}

static int afxdp_create(struct rocemu_port *port, const char *arg, char *err, size_t errlen)
{
	struct afxdp_link *l = port->link_priv;
	char devargs[ROCEMU_PORT_SPEC_MAX + PATH_MAX + 128];
	int rc = find_xdp_prog(l->prog, sizeof(l->prog), err, errlen);

	(void)arg; /* parsed into l->iface by afxdp_mtu */
	rc = rc ?: afxdp_check_pool(port, err, errlen);
	if (rc)
		return rc;
	pthread_mutex_lock(&xsk_lock);
	l->locked = true;
	each_xsk(l, note_before);

	snprintf(port->dev_name, sizeof(port->dev_name), "net_af_xdp_re%u", port_next_seq());
	snprintf(devargs, sizeof(devargs), "%s,iface=%s,start_queue=0,queue_count=1,xdp_prog=%s",
		 port->dev_name, l->iface, l->prog);
	return port_dev_probe(port, devargs, err, errlen);
}

static void afxdp_attach(struct rocemu_port *port, const char *arg)
{
	struct afxdp_link *l = port->link_priv;

	(void)arg;
	each_xsk(l, note_new);
	unlock_xsk(l);
	port_iface_hold_roce_udp(port);
}

/* Shortly after a close in this process, the kernel may still hold queue
 * 0's buffer pool: try the open again (5 s at most, a loaded machine delays
 * the kernel's deferred work). Not the queue setup alone: each failed one
 * keeps the fill queue's mbufs, and the pool runs dry. A first open fails
 * at once. */
static unsigned afxdp_open_retry_ms(void)
{
	uint64_t last = atomic_load(&last_release_ns);

	return last && rocemu_now_ns() - last < 5000000000ull ? 5000 : 0;
}

/*
 * Queues 1 .. n_queues-1: DPDK 22.11's PMD opens only as many queues as
 * the interface has "combined channels" (ETHTOOL_GCHANNELS), and takes 1
 * when it reports none, as veth does even with several queues. So the PMD
 * keeps queue 0 (its UMEM is the port's mbuf pool) and the others are
 * rocemu's own sockets (port_xsk.c), each put in the program's socket map
 * at its queue, as the PMD puts its own.
 */
static int open_queues(struct rocemu_port *port, char *err, size_t errlen)
{
	struct afxdp_link *l = port->link_priv;
	int ifindex = (int)if_nametoindex(l->iface);
	const char *mode;
	int map, rc = 0;

	if (l->n_queues < 2)
		return 0;
	map = rocemu_xdp_map(ifindex, ROCEMU_XDP_XSK_MAP, &mode);
	if (map < 0)
		return port_fail(err, errlen, map, "af_xdp: %s in rocemu's XDP program on %s: %s",
				 ROCEMU_XDP_XSK_MAP, l->iface, strerror(-map));
	for (unsigned q = 1; q < l->n_queues && !rc; q++) {
		rc = port_xsk_open(ifindex, q, &l->xq[q]);
		/* the kernel lets go of a queue a little after its socket
		 * closed (see the top): -EINVAL has the open tried again */
		if (rc == -EBUSY && afxdp_open_retry_ms())
			rc = -EINVAL;
		if (rc) {
			rc = port_fail(err, errlen, rc, "af_xdp: cannot open queue %u of %s: %s", q,
				       l->iface, strerror(-rc));
			break;
		}
		rc = rocemu_xdp_set_xsk(map, q, port_xsk_fd(l->xq[q]));
		if (rc)
			rc = port_fail(err, errlen, rc,
				       "af_xdp: cannot put queue %u's socket in %s: %s", q,
				       ROCEMU_XDP_XSK_MAP, strerror(-rc));
	}
	close(map);
	return rc;
}

/* Every queue, starting with a different one each burst. */
static uint16_t afxdp_rx_burst(struct rocemu_port *port, struct rte_mbuf **pkts, uint16_t n)
{
	struct afxdp_link *l = port->link_priv;
	uint16_t got = 0;

	for (unsigned i = 0; i < l->n_queues && got < n; i++) {
		unsigned q = (l->rx_next + i) % l->n_queues;
		uint16_t k;

		if (q == 0) {
			k = rte_eth_rx_burst(port->port_id, 0, pkts + got, (uint16_t)(n - got));
		} else {
			k = l->xq[q] ? port_xsk_rx(port, l->xq[q], pkts + got, (uint16_t)(n - got))
				     : 0;
		}
		got = (uint16_t)(got + k);
	}
	l->rx_next = (l->rx_next + 1) % l->n_queues;
	return got;
}

/* The queue of a frame: a RoCEv2 frame's by its destination QPN (one flow
 * per QP and direction, as a RoCE NIC keeps a QP on one queue), anything
 * else queue 0. */
static unsigned flow_queue(const struct rte_mbuf *m, unsigned n_queues)
{
	const uint8_t *p = rte_pktmbuf_mtod(m, const uint8_t *);
	uint32_t len = m->data_len, off = RTE_ETHER_HDR_LEN;
	uint16_t type;

	if (len < RTE_ETHER_HDR_LEN)
		return 0;
	type = (uint16_t)(p[12] << 8 | p[13]);
	if (type == RTE_ETHER_TYPE_VLAN && len >= off + 4) {
		type = (uint16_t)(p[16] << 8 | p[17]);
		off += 4;
	}
	if (type == RTE_ETHER_TYPE_IPV4 && len >= off + 20 && p[off + 9] == IPPROTO_UDP)
		off += (p[off] & 15u) * 4;
	else if (type == RTE_ETHER_TYPE_IPV6 && len >= off + 40 && p[off + 6] == IPPROTO_UDP)
		off += 40;
	else
		return 0;
	/* UDP (8 bytes), then the BTH: the destination QP in bytes 5..7 */
	if (len < off + 8 + 8 || (p[off + 2] << 8 | p[off + 3]) != ROCE_UDP_PORT)
		return 0;
	off += 8;
	return ((uint32_t)p[off + 5] << 16 | (uint32_t)p[off + 6] << 8 | p[off + 7]) % n_queues;
}

/* Each frame on its flow's queue; what no queue took stays at the tail, in
 * order (port_tx.c's flush keeps it for the next). */
static uint16_t afxdp_tx_burst(struct rocemu_port *port, struct rte_mbuf **pkts, uint16_t n)
{
	struct afxdp_link *l = port->link_priv;
	struct rte_mbuf *q0[PORT_TX_BUF], *left[PORT_TX_BUF];
	uint16_t at0[PORT_TX_BUF], n0 = 0, sent0, nleft = 0;
	bool sent[PORT_TX_BUF];

	for (uint16_t i = 0; i < n; i++) {
		unsigned q = l->n_queues > 1 ? flow_queue(pkts[i], l->n_queues) : 0;

		sent[i] = false;
		if (q == 0 || !l->xq[q]) {
			at0[n0] = i;
			q0[n0++] = pkts[i];
		} else {
			sent[i] = port_xsk_tx(l->xq[q], pkts[i]) == 0;
		}
	}
	for (unsigned q = 1; q < l->n_queues; q++)
		if (l->xq[q])
			port_xsk_kick(l->xq[q]);
	sent0 = n0 ? rte_eth_tx_burst(port->port_id, 0, q0, n0) : 0;
	for (uint16_t j = 0; j < sent0; j++)
		sent[at0[j]] = true;
	for (uint16_t i = 0; i < n; i++)
		if (!sent[i])
			left[nleft++] = pkts[i];
	memcpy(pkts + (n - nleft), left, nleft * sizeof(left[0]));
	return (uint16_t)(n - nleft);
}

/*
 * The GID table exists: who owns each address decides what the XDP program
 * hands to rocemu, and how neighbours are resolved. Then the notice line.
 */
static int afxdp_addressed(struct rocemu_port *port, const char *arg, char *err, size_t errlen)
{
	struct afxdp_link *l = port->link_priv;
	struct xdp_options opts = {0};
	socklen_t olen = sizeof(opts);
	const char *mode = "?";
	unsigned zc_others = 0;
	const char *copy;
	int map, rc = 0;

	(void)arg;
	port_iface_find_kernel_owned(port, l->iface);
	map = rocemu_xdp_map((int)if_nametoindex(l->iface), ROCEMU_XDP_ADDR_MAP, &mode);
	if (map == -EBUSY)
		return port_fail(err, errlen, map, "af_xdp: %s runs another XDP program", l->iface);
	if (map < 0)
		return port_fail(err, errlen, map, "af_xdp: %s in rocemu's XDP program on %s: %s",
				 ROCEMU_XDP_ADDR_MAP, l->iface, strerror(-map));
	for (unsigned i = 0; i < port->n_gids && !rc; i++)
		rc = rocemu_xdp_set_addr(map, port->gids[i],
					 port->kernel_owned & (1u << i) ? ROCEMU_XDP_ROCE
									: ROCEMU_XDP_ALL);
	close(map);
	if (rc)
		return port_fail(err, errlen, rc, "af_xdp: cannot fill %s: %s", ROCEMU_XDP_ADDR_MAP,
				 strerror(-rc));
	rc = open_queues(port, err, errlen);
	if (rc)
		return rc;
	/* a port with an address the kernel owns: ARP/ND are the kernel's */
	if (port->kernel_owned & ~1u) {
		rc = port_kneigh_open(port, l->iface);
		if (rc)
			return port_fail(err, errlen, rc, "af_xdp: rtnetlink: %s", strerror(-rc));
	}
	if (l->n_xsk)
		(void)getsockopt(l->xsk_fd[0], SOL_XDP, XDP_OPTIONS, &opts, &olen);
	for (unsigned q = 1; q < l->n_queues; q++)
		zc_others += port_xsk_zero_copy(l->xq[q]);
	if (!(opts.flags & XDP_OPTIONS_ZEROCOPY) && !zc_others)
		copy = "copy mode";
	else if ((opts.flags & XDP_OPTIONS_ZEROCOPY) && zc_others == l->n_queues - 1)
		copy = "zero-copy";
	else
		copy = "zero-copy on some queues";
	port_notice(
	    port, "af_xdp on %s (%u queue%s): XDP program %s (%s), %s; %s", l->iface, l->n_queues,
	    l->n_queues > 1 ? "s, flows spread by destination QPN" : ", queue 0", l->prog, mode,
	    copy,
	    port->kneigh ? "beside the kernel: it owns the address (ARP/ND, ping, TCP are "
			   "its), rocemu takes RoCEv2 and resolves through its neighbour table"
			 : "rocemu owns the addresses: it takes RoCEv2, ARP/ND and IP to them; "
			   "the kernel keeps the rest");
	return 0;
}

/* After the device went: close the sockets it left open (see the top). */
static void afxdp_release(struct rocemu_port *port)
{
	struct afxdp_link *l = port->link_priv;

	port_dev_remove(port);
	for (unsigned q = 1; q < XSK_MAX; q++) {
		port_xsk_close(l->xq[q]);
		l->xq[q] = NULL;
	}
	port_kneigh_close(port);
	for (unsigned i = 0; i < l->n_xsk; i++)
		if (xsk_inode(l->xsk_fd[i]) == l->xsk_ino[i])
			close(l->xsk_fd[i]);
	l->n_xsk = 0;
	unlock_xsk(l);
	atomic_store(&last_release_ns, rocemu_now_ns());
}

const struct port_link_ops port_link_afxdp = {
    .name = "af_xdp",
    .prefix = "af_xdp:",
    .usage = "af_xdp:IFACE[,queues=N]",
    .priv_size = sizeof(struct afxdp_link),
    .check_arg = afxdp_check_arg,
    .preview_mac = afxdp_preview_mac,
    .mtu = afxdp_mtu,
    .data_room = afxdp_data_room,
    .pool_create = afxdp_pool_create,
    .create = afxdp_create,
    .open_retry_ms = afxdp_open_retry_ms,
    .pmd_log = "pmd.net.af_xdp",
    .mac = port_iface_mac_choose,
    .attach = afxdp_attach,
    .addressed = afxdp_addressed,
    .release = afxdp_release,
    .rx_burst = afxdp_rx_burst,
    .tx_burst = afxdp_tx_burst,
};
