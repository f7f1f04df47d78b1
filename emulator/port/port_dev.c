/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The port's device side: turn a port specification into a started DPDK
 * ethdev with one rx and one tx queue and a mempool sized at start, derive
 * the addressing (MAC, MTU, GID table), and move frames: transmit buffering,
 * internal loopback, flush. Progress and the progress thread are in
 * port_progress.c; receive dispatch in port_rx.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ifaddrs.h>
#include <signal.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <rte_alarm.h>
#include <rte_dev.h>
#include <rte_interrupts.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ring.h>

#include "port_internal.h"

/* Default Ethernet MTU for point-to-point software links (memif, ring):
 * large enough that a 4096-byte IB MTU fits over IPv6 (4096 + 92 = 4188). */
#define PORT_SOFT_LINK_MTU 4200
#define PORT_DEFAULT_MTU   1500
#define PORT_DEFAULT_MBUFS 8192
#define PORT_RX_DESC	   1024
#define PORT_TX_DESC	   1024
/* how long a memif client waits for its server's socket */
#define MEMIF_CLIENT_WAIT_MS 10000
#define PORT_RING_SIZE	     1024
/*
 * Bytes a RoCEv2 packet adds around the IB payload at the IP layer, worst case:
 * IPv6 40 + UDP 8 + BTH 12 + 28 (the largest extension headers, AtomicETH) +
 * ICRC 4 = 92. The active MTU is chosen so that this fits the Ethernet MTU for
 * either IP version.
 */
#define ROCE_IP_OVERHEAD_MAX (40 + 8 + 12 + 28 + 4)
/* A polling loop comes back well within this; a longer gap may be an
 * application gone elsewhere, which must be woken (see peer_app_waiting). */
#define PEER_APP_FRESH_NS 10000
/* memif: ring the peer's bell at most this often (see open_memif_bell) */
#define PORT_BELL_INTERVAL_NS 100000ull

/* ------------------------------------------------------------------------ */
/* Ring pairs: two net_ring ports in one process joined back to back.        */

struct ring_pair {
	char name[20];
	struct rte_ring *ring[2]; /* [0]: a -> b, [1]: b -> a */
	unsigned refs;
	bool side_open[2];
};

static pthread_mutex_t ring_pairs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ring_pair ring_pairs[16];
static unsigned port_seq;

static void ring_drain(struct rte_ring *r)
{
	void *obj;

	while (rte_ring_dequeue(r, &obj) == 0)
		rte_pktmbuf_free(obj);
}

static int ring_pair_get(const char *name, int side, struct ring_pair **out, char *err,
			 size_t errlen)
{
	struct ring_pair *rp = NULL, *free_slot = NULL;
	int rc = 0;

	pthread_mutex_lock(&ring_pairs_lock);
	for (unsigned i = 0; i < 16; i++) {
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
		memset(rp, 0, sizeof(*rp));
		snprintf(rp->name, sizeof(rp->name), "%.16s", name);
		for (int d = 0; d < 2; d++) {
			char rname[RTE_RING_NAMESIZE];

			snprintf(rname, sizeof(rname), "rre%u%c_%.16s", port_seq++ % 1000u,
				 d ? 'l' : 'r', name);
			rp->ring[d] = rte_ring_create(rname, PORT_RING_SIZE, SOCKET_ID_ANY, 0);
			if (!rp->ring[d]) {
				rc = port_fail(err, errlen, -rte_errno, "cannot create ring %s: %s",
					       rname, rte_strerror(rte_errno));
				if (d)
					rte_ring_free(rp->ring[0]);
				goto out;
			}
		}
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

/* ------------------------------------------------------------------------ */
/* Bring-up.                                                                  */

static int read_sys_int(const char *iface, const char *file, long *out)
{
	char path[ROCEMU_PORT_SPEC_MAX + 64];
	FILE *f;
	int rc;

	snprintf(path, sizeof(path), "/sys/class/net/%.32s/%s", iface, file);
	f = fopen(path, "r");
	if (!f)
		return -errno;
	rc = fscanf(f, "%ld", out) == 1 ? 0 : -EIO;
	fclose(f);
	return rc;
}

/* A stable locally administered unicast MAC from the device name and spec. */
static void generated_mac(const struct rocemu_port_config *cfg, uint8_t mac[6])
{
	uint64_t h = 0xcbf29ce484222325ull;
	const char *parts[2] = {cfg->name, cfg->spec};

	for (int p = 0; p < 2; p++) {
		for (const char *c = parts[p]; *c; c++) {
			h ^= (uint8_t)*c;
			h *= 0x100000001b3ull;
		}
		h ^= 0xff;
		h *= 0x100000001b3ull;
	}
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)(h >> (8 * i));
	mac[0] = (uint8_t)((mac[0] & 0xfc) | 0x02);
}

static void build_gid_table(struct rocemu_port *port)
{
	const uint8_t *m = port->mac.addr_bytes;
	uint8_t *g = port->gids[0];

	/* 0: link-local fe80::/64 with the modified EUI-64 of the MAC (RFC 4291 2.5.1) */
	memset(g, 0, 16);
	g[0] = 0xfe;
	g[1] = 0x80;
	g[8] = m[0] ^ 0x02;
	g[9] = m[1];
	g[10] = m[2];
	g[11] = 0xff;
	g[12] = 0xfe;
	g[13] = m[3];
	g[14] = m[4];
	g[15] = m[5];
	port->gid_prefix[0] = 64;
	port->n_gids = 1;
	for (unsigned i = 0; i < port->cfg.n_ips; i++) {
		memcpy(port->gids[port->n_gids], port->cfg.ips[i].gid, 16);
		port->gid_prefix[port->n_gids] = port->cfg.ips[i].prefix;
		port->n_gids++;
	}
}

/*
 * af_packet ring frame size: a whole frame plus the TPACKET header; 2048 is
 * the PMD's default. The PMD addresses frame i at i * framesz, so blocks
 * must hold frames back to back: framesz = blocksz, a multiple of the page
 * size. It also wants the mbuf data room at least this large.
 */
static uint32_t af_packet_framesz(const struct rocemu_port *port)
{
	uint32_t need = (uint32_t)port->eth_mtu + 18 + 128;

	return need > 2048 ? (need + 4095) & ~4095u : 2048;
}

static int create_device(struct rocemu_port *port, const char *arg, char *err, size_t errlen)
{
	char devargs[2 * ROCEMU_PORT_SPEC_MAX + 256];
	unsigned seq;
	int rc;

	pthread_mutex_lock(&ring_pairs_lock);
	seq = port_seq++;
	pthread_mutex_unlock(&ring_pairs_lock);

	switch (port->kind) {
	case PORT_KIND_RING: {
		char pair[24];
		size_t n = strlen(arg);
		int side = arg[n - 1] == 'b';
		struct rte_ring *rx, *tx;

		snprintf(pair, sizeof(pair), "%.*s", (int)(n - 2), arg);
		rc = ring_pair_get(pair, side, &port->ring_pair, err, errlen);
		if (rc)
			return rc;
		port->ring_side = (char)('a' + side);
		tx = port->ring_pair->ring[side];
		rx = port->ring_pair->ring[!side];
		/* short: net_ring derives object names from it */
		snprintf(port->dev_name, sizeof(port->dev_name), "net_ring_r%u", seq);
		rc = rte_eth_from_rings(port->dev_name, &rx, 1, &tx, 1, (unsigned)rte_socket_id());
		if (rc < 0)
			return port_fail(err, errlen, -EIO, "cannot create ring port %s: %s",
					 port->dev_name, rte_strerror(rte_errno));
		port->port_id = (uint16_t)rc;
		port->dev_is_vdev = true;
		return 0;
	}
	case PORT_KIND_MEMIF:
		snprintf(port->dev_name, sizeof(port->dev_name), "net_memif_re%u", seq);
		port->memif_client = strncmp(arg, "server:", 7) != 0;
		/* Buffers as large as our mbufs' data room: a frame then takes one
		 * ring slot and the PMD copies it in one piece both ways. With
		 * smaller buffers (2048 by default) it splits frames over chained
		 * slots, and its chaining loses or merges frames under load (a
		 * stale "next" flag on reused descriptors), which cut frames
		 * short at 2048/4096 bytes in both directions. */
		snprintf(devargs, sizeof(devargs), "%s,role=%s,bsize=%u,socket=%s", port->dev_name,
			 port->memif_client ? "client" : "server", port->max_frame, arg + 7);
		break;
	case PORT_KIND_AF_PACKET: {
		uint32_t framesz = af_packet_framesz(port);

		snprintf(port->dev_name, sizeof(port->dev_name), "net_af_packet_re%u", seq);
		if (framesz > 2048)
			snprintf(devargs, sizeof(devargs),
				 "%s,iface=%s,qdisc_bypass=1,blocksz=%u,framesz=%u,framecnt=512",
				 port->dev_name, arg, framesz, framesz);
		else
			snprintf(devargs, sizeof(devargs), "%s,iface=%s,qdisc_bypass=1",
				 port->dev_name, arg);
		break;
	}
	case PORT_KIND_AF_XDP:
		snprintf(port->dev_name, sizeof(port->dev_name), "net_af_xdp_re%u", seq);
		snprintf(devargs, sizeof(devargs), "%s,iface=%s,start_queue=0,queue_count=1",
			 port->dev_name, arg);
		break;
	case PORT_KIND_DPDK: {
		const char *comma = strchr(arg, ',');
		size_t n = comma ? (size_t)(comma - arg) : strlen(arg);

		snprintf(port->dev_name, sizeof(port->dev_name), "%.*s", (int)n, arg);
		snprintf(devargs, sizeof(devargs), "%s", arg);
		break;
	}
	}
	rc = rte_dev_probe(devargs);
	if (rc < 0)
		return port_fail(err, errlen, rc, "cannot create DPDK device '%s': %s", devargs,
				 rte_strerror(-rc));
	port->dev_is_vdev = port->kind != PORT_KIND_DPDK || !strncmp(arg, "net_", 4);
	if (rte_eth_dev_get_port_by_name(port->dev_name, &port->port_id))
		return port_fail(err, errlen, -ENODEV, "device '%s' probed but has no ethdev port",
				 port->dev_name);
	return 0;
}

static int start_device(struct rocemu_port *port, char *err, size_t errlen)
{
	struct rte_eth_dev_info info;
	struct rte_eth_conf conf;
	uint16_t nb_rxd = PORT_RX_DESC, nb_txd = PORT_TX_DESC;
	int socket = rte_eth_dev_socket_id(port->port_id);
	int rc;

	if (socket < 0)
		socket = (int)rte_socket_id();
	rc = rte_eth_dev_info_get(port->port_id, &info);
	if (rc)
		return port_fail(err, errlen, rc, "%s: cannot read device info", port->dev_name);
	memset(&conf, 0, sizeof(conf));
	if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
	rc = rte_eth_dev_configure(port->port_id, 1, 1, &conf);
	if (rc)
		return port_fail(err, errlen, rc, "%s: configure failed: %s", port->dev_name,
				 rte_strerror(-rc));
	rte_eth_dev_adjust_nb_rx_tx_desc(port->port_id, &nb_rxd, &nb_txd);
	rc = rte_eth_rx_queue_setup(port->port_id, 0, nb_rxd, (unsigned)socket, NULL, port->pool);
	if (rc)
		return port_fail(err, errlen, rc, "%s: rx queue setup failed: %s", port->dev_name,
				 rte_strerror(-rc));
	rc = rte_eth_tx_queue_setup(port->port_id, 0, nb_txd, (unsigned)socket, NULL);
	if (rc)
		return port_fail(err, errlen, rc, "%s: tx queue setup failed: %s", port->dev_name,
				 rte_strerror(-rc));
	/* Kernel interfaces keep their own MTU; on the others, ask for ours. */
	if (port->kind == PORT_KIND_DPDK || port->kind == PORT_KIND_MEMIF) {
		rc = rte_eth_dev_set_mtu(port->port_id, port->eth_mtu);
		if (rc && rc != -ENOTSUP && port->cfg.mtu)
			return port_fail(err, errlen, rc, "%s: cannot set MTU %u: %s",
					 port->dev_name, port->eth_mtu, rte_strerror(-rc));
	}
	rc = rte_eth_dev_start(port->port_id);
	/* A memif client cannot start before its server's socket exists:
	 * give the server (started alongside, typically) time to appear. */
	for (int i = 0; rc && port->kind == PORT_KIND_MEMIF && port->memif_client &&
			i < MEMIF_CLIENT_WAIT_MS / 20;
	     i++) {
		struct timespec ts = {0, 20000000};

		nanosleep(&ts, NULL);
		rc = rte_eth_dev_start(port->port_id);
	}
	if (rc)
		return port_fail(
		    err, errlen, rc, "%s: start failed: %s%s", port->dev_name, rte_strerror(-rc),
		    port->memif_client ? " (no memif server listening on the socket?)" : "");
	return 0;
}

/*
 * On a kernel interface the kernel sees our RoCEv2 datagrams too; if it owns
 * one of the addresses it would answer each with ICMP port unreachable.
 * Holding UDP 4791 open (never read, smallest buffer: the kernel drops
 * quietly) stops that (ARCHITECTURE §2). Best effort: another holder (the
 * rxe module, another rocemu) is as good.
 */
static void hold_roce_udp_port(struct rocemu_port *port)
{
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(ROCE_UDP_PORT)};
	struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons(ROCE_UDP_PORT)};
	int one = 1, zero = 0, fd;

	fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&a6, sizeof(a6)) == 0) {
			port->udp_hold_fd = fd;
			return;
		}
		close(fd);
	}
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a4, sizeof(a4)) == 0)
		port->udp_hold_fd = fd;
	else
		close(fd);
}

/*
 * af_packet on an interface the kernel also uses with the same MAC (a real
 * eth0 whose IP rocemu shares): the kernel answers ARP, ND and ping for its
 * own addresses, so we must not answer a second time for those.
 */
static void find_kernel_owned(struct rocemu_port *port, const char *iface)
{
	struct rte_ether_addr dev_mac;
	struct ifaddrs *list, *ifa;

	if (port->kind != PORT_KIND_AF_PACKET || rte_eth_macaddr_get(port->port_id, &dev_mac) ||
	    !rte_is_same_ether_addr(&dev_mac, &port->mac) || getifaddrs(&list))
		return;
	for (ifa = list; ifa; ifa = ifa->ifa_next) {
		uint8_t gid[16];
		int idx;

		if (!ifa->ifa_addr || strcmp(ifa->ifa_name, iface))
			continue;
		if (ifa->ifa_addr->sa_family == AF_INET)
			port_gid_from_ipv4(gid,
					   ((struct sockaddr_in *)ifa->ifa_addr)->sin_addr.s_addr);
		else if (ifa->ifa_addr->sa_family == AF_INET6)
			memcpy(gid, &((struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr, 16);
		else
			continue;
		idx = rocemu_port_gid_find(port, gid);
		if (idx >= 0)
			port->kernel_owned |= 1u << idx;
	}
	freeifaddrs(list);
}

/*
 * af_packet has no receive interrupt. A second packet socket on the same
 * interface serves as one: its filter keeps one byte of each incoming frame
 * and its buffer is tiny, so it costs little while the thread spins (the
 * kernel drops into a full buffer early) and lets the idle thread sleep in
 * poll() until a frame arrives instead of waking every millisecond.
 */
static void open_doorbell(struct rocemu_port *port, const char *iface)
{
	struct sock_filter keep_one_byte = BPF_STMT(BPF_RET | BPF_K, 1);
	struct sock_fprog prog = {.len = 1, .filter = &keep_one_byte};
	struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL)};
	int one = 1, small = 1, fd;

	sll.sll_ifindex = (int)if_nametoindex(iface);
	if (!sll.sll_ifindex)
		return;
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	/* our own frames and the kernel's outgoing ones are not news */
	setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) ||
	    bind(fd, (struct sockaddr *)&sll, sizeof(sll))) {
		close(fd);
		return;
	}
	port->doorbell_fd = fd;
}

/* The name shared by the two ends of the memif socket at path (FNV-1a). */
static uint64_t memif_bell_hash(const char *path)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const char *c = path; *c; c++) {
		h ^= (uint8_t)*c;
		h *= 0x100000001b3ull;
	}
	return h;
}

static void bell_page_name(char *buf, size_t len, const char *path)
{
	snprintf(buf, len, "/rocemu-bell-%016llx", (unsigned long long)memif_bell_hash(path));
}

/*
 * The bell page: one shared page (POSIX shm named after the memif socket)
 * where each end's progress thread says that it is about to sleep on its
 * bell. A sender then rings only a sleeping peer, once per sleep; to a busy
 * peer a frame costs no system call. The server creates the page (a fresh
 * one, any stale page of the same name unlinked first) once its device
 * exists, so once the socket is bound and the path is its own, before the
 * device starts; it unlinks the page at close. A client maps it after its
 * device started, and so does each later client of the same server (the
 * name stays). Each end writes its pid into its slot once its device has
 * started: a client waits for the server's (wait_memif_server_ready), and
 * until the peer's pid is there (a non-rocemu peer) rings stay time-based
 * as before. A client whose server was replaced maps the new server's page
 * when it reconnects (remap_bell_page).
 */

/* Our slot of a page just mapped: not sleeping, no application waiting; the
 * peer's closes so far are not about us (acknowledged as seen). */
static void bell_page_join(struct rocemu_port *port)
{
	struct port_bell_slot *own = port_bell_own(port), *peer = port_bell_peer(port);

	atomic_store(&own->sleeping, 0);
	atomic_store(&own->app_waiting_tsc, 0);
	atomic_store(&own->app_busy, 0);
	port->peer_closing_seen = atomic_load(&peer->closing);
	atomic_store(&own->acked, port->peer_closing_seen);
}

static void open_bell_page(struct rocemu_port *port)
{
	struct stat st;
	void *p;
	int fd;

	bell_page_name(port->bell_shm_name, sizeof(port->bell_shm_name), port->memif_path);
	if (!port->memif_client) {
		shm_unlink(port->bell_shm_name);
		fd = shm_open(port->bell_shm_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0 && ftruncate(fd, sizeof(struct port_bell_page))) {
			close(fd);
			shm_unlink(port->bell_shm_name);
			fd = -1;
		}
	} else {
		fd = shm_open(port->bell_shm_name, O_RDWR | O_CLOEXEC, 0);
	}
	if (fd < 0)
		return;
	/* a page the server has not sized yet would fault (SIGBUS) */
	if (fstat(fd, &st) || st.st_size < (off_t)sizeof(struct port_bell_page)) {
		close(fd);
		return;
	}
	p = mmap(NULL, sizeof(struct port_bell_page), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		if (!port->memif_client)
			shm_unlink(port->bell_shm_name);
		return;
	}
	port->bell_page = p;
	port->bell_dev = st.st_dev;
	port->bell_ino = st.st_ino;
	port->bell_shm_owner = !port->memif_client;
	bell_page_join(port);
	port->bell_fresh_tsc = rte_get_tsc_hz() / (1000000000ull / PEER_APP_FRESH_NS);
}

/*
 * A memif client about to connect again (engine lock held): if the page
 * under the name is no longer the one we map, a new server made it; map it
 * at the same address. MAP_FIXED replaces the mapping in one step, so the
 * threads that read the page without the lock (the progress thread's sleep,
 * the application's stamps, a kick) see the old page or the new one, never
 * a hole; a sleep on the old page's futex just lasts until its timeout.
 * Returns true when the page changed. A client that had no page keeps none.
 */
static bool remap_bell_page(struct rocemu_port *port)
{
	struct stat st;
	bool changed = false;
	int fd;

	if (!port->bell_page)
		return false;
	fd = shm_open(port->bell_shm_name, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0)
		return false;
	if (fstat(fd, &st) == 0 && (st.st_ino != port->bell_ino || st.st_dev != port->bell_dev) &&
	    st.st_size >= (off_t)sizeof(struct port_bell_page)) {
		atomic_store(&port_bell_own(port)->sleeping, 0);
		atomic_store(&port_bell_own(port)->pid, 0);
		if (mmap(port->bell_page, sizeof(struct port_bell_page), PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_FIXED, fd, 0) != MAP_FAILED) {
			port->bell_dev = st.st_dev;
			port->bell_ino = st.st_ino;
			bell_page_join(port);
			/* the device is stopped; the close we acknowledged was
			 * the old server's, announced in the old page */
			port->peer_closed = false;
			port->peer_down_seen = false;
			atomic_store(&port_bell_own(port)->pid, (unsigned)getpid());
			port_count_event(port, "memif_bell_page_remapped");
			changed = true;
		}
	}
	close(fd);
	return changed;
}

static void close_bell_page(struct rocemu_port *port)
{
	if (!port->bell_page)
		return;
	atomic_store(&port_bell_own(port)->sleeping, 0);
	atomic_store(&port_bell_own(port)->pid, 0);
	munmap(port->bell_page, sizeof(struct port_bell_page));
	port->bell_page = NULL;
	if (port->bell_shm_owner)
		shm_unlink(port->bell_shm_name);
	port->bell_shm_owner = false;
}

/*
 * A memif client waits, before it connects, until a rocemu server has
 * finished starting: its bell page carries its pid (written after its
 * device started). DPDK's memif server listens from the moment the device
 * is created, before its queues are set up; a client that connects in that
 * window is dropped, and the PMD never connects it again: the link watch
 * (memif_watch) then reconnects, but only after 100 ms of link down, so the
 * wait still saves that time in the usual case (a server started alongside,
 * like qperf's server child). A server that is not rocemu makes no page:
 * 1 s after its socket file appears the client goes ahead (DPDK 22.11's
 * sockets are abstract by default: no file, the client waits the 10 s).
 * The start loop below still waits for a socket that never came.
 */
static void wait_memif_server_ready(const char *path)
{
	char name[64];
	unsigned seen_socket = 0;
	struct timespec ts = {0, 5000000};

	bell_page_name(name, sizeof(name), path);
	for (int i = 0; i < MEMIF_CLIENT_WAIT_MS / 5; i++) {
		int fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
		struct stat st;

		if (fd >= 0) {
			unsigned pid = 0;
			ssize_t r = pread(fd, &pid, sizeof(pid),
					  offsetof(struct port_bell_page, slot[0].pid));

			close(fd);
			if (r == (ssize_t)sizeof(pid) && pid &&
			    (kill((pid_t)pid, 0) == 0 || errno == EPERM))
				return;
		}
		if (stat(path, &st) == 0 && ++seen_socket * 5 >= 1000)
			return;
		nanosleep(&ts, NULL);
	}
}

/*
 * memif has no receive interrupt either (DPDK 22.11's PMD implements no
 * rx_queue_intr_* operation; the memif protocol's own interrupt eventfds are
 * private to it). The two rocemu ends of a memif link ring each other
 * instead, through the bell page when both have it. Without it (a page
 * that could not be made or found) each binds an abstract Unix datagram
 * socket named after the memif socket path and its role, and after a
 * transmit rings the peer's, at most once per PORT_BELL_INTERVAL_NS (a peer
 * woken by a bell spins for a while after that work, so it is awake for the
 * frames that follow). Best effort: with no bell (name taken, a non-rocemu
 * peer) the thread wakes every millisecond as before. Called once the
 * device has started: the pid in the page says so.
 */
static void open_memif_bell(struct rocemu_port *port)
{
	struct sockaddr_un own = {.sun_family = AF_UNIX};
	uint64_t h = memif_bell_hash(port->memif_path);
	socklen_t len;
	int fd;

	if (port->memif_client)
		open_bell_page(port);
	if (port->bell_page)
		atomic_store(&port_bell_own(port)->pid, (unsigned)getpid());
	/* abstract names: sun_path[0] == 0, no file to clean up */
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			  (socklen_t)snprintf(own.sun_path + 1, sizeof(own.sun_path) - 1,
					      "rocemu-bell-%016llx-%c", (unsigned long long)h,
					      port->memif_client ? 'c' : 's'));
	port->bell_peer = own;
	port->bell_peer.sun_path[len - offsetof(struct sockaddr_un, sun_path) - 1] =
	    port->memif_client ? 's' : 'c';
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (bind(fd, (struct sockaddr *)&own, len)) {
		close(fd);
		return;
	}
	port->doorbell_fd = fd;
	port->bell_peer_len = len;
}

static void choose_mac(struct rocemu_port *port)
{
	struct rte_ether_addr dev_mac;
	bool have_dev_mac =
	    rte_eth_macaddr_get(port->port_id, &dev_mac) == 0 && !rte_is_zero_ether_addr(&dev_mac);

	if (port->cfg.mac_set) {
		memcpy(port->mac.addr_bytes, port->cfg.mac, 6);
	} else if (have_dev_mac &&
		   (port->kind == PORT_KIND_AF_PACKET || port->kind == PORT_KIND_AF_XDP ||
		    port->kind == PORT_KIND_DPDK)) {
		port->mac = dev_mac;
	} else {
		generated_mac(&port->cfg, port->mac.addr_bytes);
	}
	if (port->kind == PORT_KIND_DPDK &&
	    (!have_dev_mac || !rte_is_same_ether_addr(&dev_mac, &port->mac)))
		if (rte_eth_dev_default_mac_addr_set(port->port_id, &port->mac))
			rte_eth_promiscuous_enable(port->port_id);
	if ((port->kind == PORT_KIND_AF_PACKET || port->kind == PORT_KIND_AF_XDP) && have_dev_mac &&
	    !rte_is_same_ether_addr(&dev_mac, &port->mac))
		rte_eth_promiscuous_enable(port->port_id);
	if (port->kind == PORT_KIND_DPDK)
		rte_eth_allmulticast_enable(port->port_id); /* IPv6 ND multicast */
}

static int choose_mtu(struct rocemu_port *port, const char *arg, char *err, size_t errlen)
{
	long v = 0;

	if (port->kind == PORT_KIND_AF_PACKET || port->kind == PORT_KIND_AF_XDP) {
		if (read_sys_int(arg, "mtu", &v))
			return port_fail(err, errlen, -ENODEV,
					 "interface '%s' not found in this network namespace", arg);
		if (port->cfg.mtu && port->cfg.mtu > v)
			return port_fail(err, errlen, -EINVAL,
					 "--mtu %u is larger than interface %s's MTU %ld",
					 port->cfg.mtu, arg, v);
		port->eth_mtu = port->cfg.mtu ? port->cfg.mtu : (uint16_t)v;
		if (port->kind == PORT_KIND_AF_XDP && port->eth_mtu > 3498)
			return port_fail(
			    err, errlen, -EINVAL,
			    "af_xdp: MTU %u too large (XDP frames hold at most 3498 bytes of MTU)",
			    port->eth_mtu);
	} else if (port->kind == PORT_KIND_DPDK) {
		port->eth_mtu = port->cfg.mtu ? port->cfg.mtu : PORT_DEFAULT_MTU;
	} else {
		port->eth_mtu = port->cfg.mtu ? port->cfg.mtu : PORT_SOFT_LINK_MTU;
	}
	return 0;
}

static int create_pool(struct rocemu_port *port, char *err, size_t errlen)
{
	char name[RTE_MEMPOOL_NAMESIZE];
	unsigned n = port->cfg.n_mbufs ? port->cfg.n_mbufs : PORT_DEFAULT_MBUFS;
	uint32_t room;
	unsigned seq;

	pthread_mutex_lock(&ring_pairs_lock);
	seq = port_seq++;
	pthread_mutex_unlock(&ring_pairs_lock);
	if (port->kind == PORT_KIND_AF_XDP) {
		/* AF_XDP UMEM chunks must fit a page: the standard 2 KB data room. */
		room = RTE_MBUF_DEFAULT_DATAROOM;
	} else {
		/* a whole frame (MTU + Ethernet + VLAN) in one segment, at least
		 * a 4096-byte-MTU RoCE frame, rounded to a cache line */
		room = (uint32_t)port->eth_mtu + 18;
		if (room < 4096 + ROCE_MAX_HDR_LEN + ROCE_ICRC_LEN + 64)
			room = 4096 + ROCE_MAX_HDR_LEN + ROCE_ICRC_LEN + 64;
		room = (room + 63) & ~63u;
		if (port->kind == PORT_KIND_AF_PACKET && room < af_packet_framesz(port))
			room = af_packet_framesz(port);
	}
	port->max_frame = room;
	/* by default about 40 MB of buffers, between 2048 and 8192 of them */
	if (!port->cfg.n_mbufs && (uint64_t)n * room > (40u << 20))
		n = RTE_MAX((40u << 20) / room, 2048u);
	snprintf(name, sizeof(name), "rocemu_mb%u", seq);
	port->pool = rte_pktmbuf_pool_create(name, n, 0, 0, (uint16_t)(room + RTE_PKTMBUF_HEADROOM),
					     (int)rte_socket_id());
	if (!port->pool)
		return port_fail(err, errlen, -ENOMEM,
				 "cannot create a pool of %u mbufs of %u bytes: %s", n, room,
				 rte_strerror(rte_errno));
	return 0;
}

static void remove_device(void *arg)
{
	struct rocemu_port *port = arg;
	struct rte_eth_dev_info info;
	struct rte_device *dev = NULL;

	if (rte_eth_dev_info_get(port->port_id, &info) == 0)
		dev = info.device;
	rte_eth_dev_stop(port->port_id);
	rte_eth_dev_close(port->port_id);
	if (dev && port->dev_is_vdev)
		rte_dev_remove(dev);
}

struct intr_call {
	void (*fn)(void *);
	void *arg;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
};

static void intr_call_cb(void *arg)
{
	struct intr_call *c = arg;

	c->fn(c->arg);
	pthread_mutex_lock(&c->lock);
	c->done = true;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

/*
 * Run fn(arg) on EAL's interrupt thread and wait for it. The memif PMD
 * handles its control channel there (the peer's "disconnect", or its socket
 * closing, runs memif_disconnect: rings unmapped, queue interrupt handles
 * closed, regions freed). Closing the device from another thread at the
 * same moment ran the same teardown twice, concurrently: double rte_free
 * ("EAL: Error: Invalid memory") and use after free, a SIGSEGV at exit once
 * in ~75 program pairs. Callbacks on the interrupt thread run one at a
 * time, so a close run there cannot overlap the PMD's handler. If the
 * alarm cannot be set (or we are on that thread), fn runs here.
 */
static void run_on_intr_thread(void (*fn)(void *), void *arg)
{
	struct intr_call c = {.fn = fn, .arg = arg, .done = false};
	struct timespec until;

	if (rte_thread_is_intr()) {
		fn(arg);
		return;
	}
	pthread_mutex_init(&c.lock, NULL);
	pthread_cond_init(&c.cond, NULL);
	if (rte_eal_alarm_set(1, intr_call_cb, &c)) {
		fn(arg);
	} else {
		pthread_mutex_lock(&c.lock);
		while (!c.done) {
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += 5;
			if (pthread_cond_timedwait(&c.cond, &c.lock, &until) == ETIMEDOUT &&
			    rte_eal_alarm_cancel(intr_call_cb, &c) > 0) {
				/* the interrupt thread is stuck: the alarm never ran */
				pthread_mutex_unlock(&c.lock);
				fn(arg);
				pthread_mutex_lock(&c.lock);
				break;
			}
		}
		pthread_mutex_unlock(&c.lock);
	}
	pthread_cond_destroy(&c.cond);
	pthread_mutex_destroy(&c.lock);
}

/*
 * The memif close handshake. When the peer closes its device, the PMD here
 * tears the connection down on EAL's interrupt thread (memif_disconnect:
 * rings unmapped) while our progress thread may be in the middle of an rx
 * or tx burst on them: SIGSEGV in the PMD's rx (core: progress thread in
 * eth_memif_rx, interrupt thread in munmap). Two rocemu ends therefore
 * agree first, through the bell page: the closing end (or a client about
 * to reconnect, memif_restart) bumps its `closing` count, rings, and waits
 * (200 ms at most) until the peer acknowledges; the peer acknowledges from
 * its next pass, under the engine lock, and from then on does not touch
 * the rings (frames to send are dropped, counted tx_peer_closed) until a
 * new connection exists. A non-rocemu peer has no page: the race stays
 * possible there.
 *
 * When is there a new connection? Sampling the link (down, then up again)
 * misses a reconnect that falls between two samples, and DPDK 22.11's memif
 * PMD raises no link-state interrupt. Instead:
 * - The client makes every connection itself (the PMD never reconnects a
 *   client; memif_restart does, with its device stopped first, which
 *   unmaps the old connection's rings) and clears peer_closed there.
 * - The server learns it from the client's conn_gen. Before bumping
 *   `closing`, the client stores the conn_gen of the connection it closes
 *   in closed_gen; the server reads it after the `closing` it acknowledges
 *   (acquire), so it is the closed connection's number even if the server
 *   acknowledges late. The client bumps conn_gen only once it has seen its
 *   link up after a start of its device. Its link comes up when the server's
 *   CONNECTED message arrives, which the server's PMD sends after setting
 *   up its side of that connection; and a memif server has one connection
 *   at a time: it refuses a client ("already connected") until
 *   memif_disconnect of the previous one has finished. So once the server
 *   sees conn_gen != closed_gen, the old connection's teardown is over on
 *   its side, and if it then reads its link up, that is the new connection
 *   (or a later one: each later close is announced again before its
 *   teardown, and the fast path in port_dev_usable looks at `closing` before
 *   every burst). conn_gen only grows, so no reconnect can be missed, however
 *   fast. The link-sampling rule stays as a second way out (a down then an
 *   up seen is also a new connection), for a client that is not rocemu.
 */
bool port_peer_closed_slow(struct rocemu_port *port)
{
	struct port_bell_slot *peer = port_bell_peer(port);
	unsigned c = atomic_load_explicit(&peer->closing, memory_order_acquire);

	if (c != port->peer_closing_seen) {
		port->peer_closing_seen = c;
		port->peer_closed = true;
		port->peer_down_seen = false;
		port->peer_closed_gen =
		    atomic_load_explicit(&peer->closed_gen, memory_order_acquire);
		atomic_store_explicit(&port_bell_own(port)->acked, c, memory_order_release);
		port_count_event(port, "peer_closed");
	}
	if (port->peer_closed) {
		bool newer = !port->memif_client &&
			     atomic_load_explicit(&peer->conn_gen, memory_order_acquire) !=
				 port->peer_closed_gen;

		/* dev_link is written by the PMD; reading it touches no ring */
		if (!rocemu_port_link_up(port))
			port->peer_down_seen = true;
		else if (port->peer_down_seen || newer)
			port->peer_closed = false;
	}
	return port->peer_closed;
}

#define PORT_CLOSE_HANDSHAKE_NS 200000000ull

static void bell_close_handshake(struct rocemu_port *port)
{
	struct port_bell_slot *own, *peer;
	uint64_t start, now, last_ring = 0;
	struct timespec ts = {0, 100000};
	unsigned v;

	if (!port->bell_page)
		return;
	own = port_bell_own(port);
	peer = port_bell_peer(port);
	atomic_store(&own->closed_gen, atomic_load(&own->conn_gen));
	v = atomic_fetch_add(&own->closing, 1) + 1;
	start = now = rocemu_now_ns();
	for (;;) {
		unsigned pid = atomic_load(&peer->pid);

		/* we touch the rings no more either: acknowledge the peer's close */
		atomic_store(&own->acked, atomic_load(&peer->closing));
		if (!pid || atomic_load(&peer->acked) == v ||
		    (kill((pid_t)pid, 0) < 0 && errno == ESRCH) ||
		    now - start >= PORT_CLOSE_HANDSHAKE_NS)
			break;
		if (now - last_ring >= 10000000ull) {
			port_bell_ring(peer);
			last_ring = now;
		}
		nanosleep(&ts, NULL);
		now = rocemu_now_ns();
	}
}

/*
 * A memif client whose link is down reconnects (memif_watch, on EAL's
 * interrupt thread, engine lock held): stop the device (memif_disconnect:
 * the old connection's rings go) and start it again (a new connection
 * attempt). The PMD itself never reconnects a client: after a server that
 * refused it (it connected before the server's device started), or a
 * server that closed or was replaced, the link would stay down for good.
 * A rocemu server is told first, as at close, so that it lets go of the
 * rings before they go. Not while a rocemu server is between its close
 * handshake and the removal of its device (its pid still in the page): it
 * would accept the new connection and tear it down with no handshake.
 * Returns false when postponed.
 */
static bool memif_restart(struct rocemu_port *port)
{
	if (port->bell_page && port_peer_closed_slow(port)) {
		unsigned pid = atomic_load(&port_bell_peer(port)->pid);

		if (pid && (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
			return false;
	}
	bell_close_handshake(port);
	if (!port->dev_stopped) {
		port->dev_stopped = true;
		rte_eth_dev_stop(port->port_id);
	}
	remap_bell_page(port);
	port_count_event(port, "memif_reconnects");
	/* fails (the PMD logs it) while no server listens */
	if (rte_eth_dev_start(port->port_id))
		return true;
	port->dev_stopped = false;
	port->watch_announced = false;
	/* Our stop unmapped the old connection's rings, and the server whose
	 * close we acknowledged is gone (checked above) or replaced (new page):
	 * the new connection is not the one it announced closing. A close
	 * announced since (`closing` moved past peer_closing_seen) is still
	 * taken up by the next port_dev_usable. */
	port->peer_closed = false;
	port->peer_down_seen = false;
	return true;
}

#define MEMIF_WATCH_US	       25000
#define MEMIF_WATCH_UP_US      250000
#define MEMIF_RECONNECT_MIN_NS 100000000ull
#define MEMIF_RECONNECT_MAX_NS 1600000000ull

/*
 * A memif client's link watch: an EAL alarm on the interrupt thread, where
 * the PMD also runs its connection handling, so the two never overlap; every
 * 25 ms while the link is down, every 250 ms while it is up (a few system
 * calls per tick, nothing per message). Link down for 100 ms: reconnect
 * (memif_restart), then wait twice as long before the next try (at most
 * 1.6 s), back to 100 ms once the link was up; each try is counted
 * (memif_reconnects). The engine lock is only
 * tried: a thread holding it may be waiting for this thread (close runs the
 * device's removal here), so a busy lock means try again at the next tick.
 * The first time it sees the link up after a start it bumps conn_gen (see
 * port_peer_closed_slow).
 */
static void memif_watch(void *arg)
{
	struct rocemu_port *port = arg;
	uint64_t now = rocemu_now_ns(), us;

	if (!port->dev_stopped && rocemu_port_link_up(port)) {
		if (!port->watch_announced && port->bell_page)
			atomic_fetch_add_explicit(&port_bell_own(port)->conn_gen, 1,
						  memory_order_release);
		port->watch_announced = true;
		port->watch_down_since_ns = 0;
		port->watch_backoff_ns = MEMIF_RECONNECT_MIN_NS;
	} else if (!port->watch_down_since_ns) {
		port->watch_down_since_ns = now;
	} else if (now - port->watch_down_since_ns >= port->watch_backoff_ns &&
		   pthread_mutex_trylock(&port->lock) == 0) {
		if (memif_restart(port)) {
			port->watch_down_since_ns = rocemu_now_ns();
			port->watch_backoff_ns =
			    RTE_MIN(2 * port->watch_backoff_ns, MEMIF_RECONNECT_MAX_NS);
		}
		pthread_mutex_unlock(&port->lock);
	}
	us = port->watch_down_since_ns || port->dev_stopped ? MEMIF_WATCH_US : MEMIF_WATCH_UP_US;
	if (rte_eal_alarm_set(us, memif_watch, port))
		port->watch_armed = false;
}

static void memif_watch_start(struct rocemu_port *port)
{
	if (port->kind != PORT_KIND_MEMIF || !port->memif_client)
		return;
	port->watch_backoff_ns = MEMIF_RECONNECT_MIN_NS;
	port->watch_armed = rte_eal_alarm_set(MEMIF_WATCH_US, memif_watch, port) == 0;
}

/* Waits for a running watch to finish (it only tries the engine lock, so
 * the caller may hold it). */
static void memif_watch_stop(struct rocemu_port *port)
{
	if (!port->watch_armed)
		return;
	rte_eal_alarm_cancel(memif_watch, port);
	port->watch_armed = false;
}

/* Give back the device and kernel resources (sockets, XDP program, memif
 * socket, capture file). The bell page goes after the device: a pid in the
 * page means our device may still accept a connection (memif_restart). */
static void release_device(struct rocemu_port *port)
{
	memif_watch_stop(port);
	bell_close_handshake(port);
	if (port->wake_fd >= 0)
		close(port->wake_fd);
	port->wake_fd = -1;
	if (port->udp_hold_fd >= 0)
		close(port->udp_hold_fd);
	port->udp_hold_fd = -1;
	if (port->doorbell_fd >= 0)
		close(port->doorbell_fd);
	port->doorbell_fd = -1;
	port->bell_peer_len = 0;
	if (port->port_id != UINT16_MAX) {
		if (port->kind == PORT_KIND_MEMIF)
			run_on_intr_thread(remove_device, port);
		else
			remove_device(port);
		port->port_id = UINT16_MAX;
	}
	close_bell_page(port);
	if (port->ring_pair)
		ring_pair_put(port->ring_pair, port->ring_side == 'b');
	port->ring_pair = NULL;
	port_capture_close(port);
}

static void release(struct rocemu_port *port)
{
	release_device(port);
	port_fault_free(port);
	for (unsigned i = port->loop_head; i != port->loop_tail; i++)
		rte_pktmbuf_free(port->loop[i & (PORT_LOOP_SLOTS - 1)]);
	for (unsigned i = 0; i < port->tx_n; i++)
		rte_pktmbuf_free(port->tx_buf[i]);
	if (port->pool)
		rte_mempool_free(port->pool);
	pthread_mutex_destroy(&port->lock);
	free(port);
}

/*
 * Before the device goes: let the frames already sent reach the peer. A
 * program's last frame is often an ACK queued just before it closes the
 * device; lost, the peer retries into the void until "retry counter
 * exceeded". First hand the device everything still buffered (it may be
 * full for a moment), then give the peer time to take the frames: on a ring
 * pair until it has (we can see the ring), on memif (no way to see the
 * peer's progress through the PMD) a short linger after the last transmit.
 * Both bounded; the engine lock is held.
 */
#define PORT_CLOSE_DRAIN_NS  100000000ull /* 100 ms at most */
#define PORT_CLOSE_LINGER_NS 20000000ull  /* memif: after the last transmit */

static void close_drain(struct rocemu_port *port)
{
	uint64_t start = rocemu_now_ns(), now = start;
	struct timespec ts = {0, 200000};

	if (port->port_id == UINT16_MAX)
		return;
	for (;;) {
		bool waiting;

		rocemu_port_flush(port);
		if (port->kind == PORT_KIND_RING)
			waiting = port->tx_n ||
				  !rte_ring_empty(port->ring_pair->ring[port->ring_side == 'b']);
		else if (port->kind == PORT_KIND_MEMIF)
			waiting = port->tx_n || (port->last_tx_ns &&
						 now - port->last_tx_ns < PORT_CLOSE_LINGER_NS);
		else
			waiting = port->tx_n != 0;
		if (!waiting || now - start >= PORT_CLOSE_DRAIN_NS)
			break;
		nanosleep(&ts, NULL);
		now = rocemu_now_ns();
	}
	if (port->tx_n)
		port_count_drop(port, "tx_unsent_at_close");
}

/*
 * At process exit, for a port the program never closed: stop the thread,
 * flush the capture and release the device, but keep the memory (pool and
 * port structure): an upper layer may still hold mbufs, or close the port
 * from a destructor later, which then only frees the structure.
 */
void port_close_at_exit(struct rocemu_port *port)
{
	memif_watch_stop(port);
	rocemu_port_progress_thread_stop(port);
	rocemu_port_lock(port);
	if (!port->closed_at_exit && port->port_id != UINT16_MAX)
		close_drain(port);
	release_device(port);
	port->closed_at_exit = true;
	rocemu_port_unlock(port);
}

int rocemu_port_open(const struct rocemu_port_config *cfg, struct rocemu_port **out, char *err,
		     size_t errlen)
{
	struct rocemu_port *port;
	char arg[ROCEMU_PORT_SPEC_MAX];
	enum port_kind kind;
	int rc;

	*out = NULL;
	rc = rocemu_port_config_validate(cfg, err, errlen);
	if (rc)
		return rc;
	port_parse_spec(cfg->spec, &kind, arg, sizeof(arg), NULL, 0);
	rc = port_eal_init(kind == PORT_KIND_DPDK && strncmp(arg, "net_", 4));
	if (rc)
		return port_fail(err, errlen, rc, "%s", rocemu_eal_error());

	port = calloc(1, sizeof(*port));
	if (!port)
		return port_fail(err, errlen, -ENOMEM, "out of memory");
	port->cfg = *cfg;
	port->kind = kind;
	port->port_id = UINT16_MAX;
	port->wake_fd = -1;
	port->udp_hold_fd = -1;
	port->doorbell_fd = -1;
	pthread_mutex_init(&port->lock, NULL);

	rc = choose_mtu(port, arg, err, errlen);
	rc = rc ?: create_pool(port, err, errlen);
	rc = rc ?: create_device(port, arg, err, errlen);
	if (!rc && port->kind == PORT_KIND_MEMIF) {
		snprintf(port->memif_path, sizeof(port->memif_path), "%s", arg + 7);
		if (port->memif_client)
			wait_memif_server_ready(port->memif_path);
		else
			open_bell_page(port); /* before clients can start to connect */
	}
	rc = rc ?: start_device(port, err, errlen);
	if (rc)
		goto fail;
	choose_mac(port);
	build_gid_table(port);
	if (port->kind == PORT_KIND_AF_PACKET || port->kind == PORT_KIND_AF_XDP)
		hold_roce_udp_port(port);
	find_kernel_owned(port, arg);
	if (port->kind == PORT_KIND_AF_PACKET)
		open_doorbell(port, arg);
	if (port->kind == PORT_KIND_MEMIF)
		open_memif_bell(port);
	rc = port_capture_open(port, err, errlen);
	if (rc)
		goto fail;
	if (cfg->fault_enabled) {
		rc = port_fault_init(port);
		if (rc) {
			port_fail(err, errlen, rc, "cannot set up the fault injector");
			goto fail;
		}
	}
	port->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (port->wake_fd < 0) {
		rc = port_fail(err, errlen, -errno, "eventfd: %s", strerror(errno));
		goto fail;
	}
	port_eal_register(port);
	rc = rocemu_port_progress_thread_start(port);
	if (rc) {
		port_eal_unregister(port);
		port_fail(err, errlen, rc, "cannot start the progress thread: %s", strerror(-rc));
		goto fail;
	}
	memif_watch_start(port);
	*out = port;
	return 0;
fail:
	release(port);
	return rc;
}

void rocemu_port_close(struct rocemu_port *port)
{
	if (!port || port_in_forked_child())
		return;
	if (port->closed_at_exit) {
		pthread_mutex_destroy(&port->lock);
		free(port); /* the pool may still be referenced; the process is ending */
		return;
	}
	memif_watch_stop(port);
	rocemu_port_progress_thread_stop(port);
	port_eal_unregister(port);
	rocemu_port_lock(port);
	close_drain(port);
	rocemu_port_unlock(port);
	release(port);
}

const struct rocemu_port_config *rocemu_port_get_config(const struct rocemu_port *port)
{
	return &port->cfg;
}

void rocemu_port_set_upper(struct rocemu_port *port, const struct rocemu_port_upper *upper)
{
	rocemu_port_lock(port);
	if (upper && upper->rx) {
		port->upper = *upper;
		__atomic_store_n(&port->has_upper, true, __ATOMIC_RELAXED);
	} else {
		memset(&port->upper, 0, sizeof(port->upper));
		__atomic_store_n(&port->has_upper, false, __ATOMIC_RELAXED);
	}
	atomic_store(&port->upper_has_work, false);
	rocemu_port_unlock(port);
}

/* ------------------------------------------------------------------------ */
/* Addressing.                                                                */

void rocemu_port_mac(const struct rocemu_port *port, uint8_t mac[6])
{
	memcpy(mac, port->mac.addr_bytes, 6);
}

unsigned rocemu_port_gid_count(const struct rocemu_port *port)
{
	return port->n_gids;
}

int rocemu_port_gid(const struct rocemu_port *port, unsigned index, uint8_t gid[16])
{
	if (index >= port->n_gids)
		return -EINVAL;
	memcpy(gid, port->gids[index], 16);
	return 0;
}

int rocemu_port_gid_find(const struct rocemu_port *port, const uint8_t gid[16])
{
	for (unsigned i = 0; i < port->n_gids; i++)
		if (!memcmp(port->gids[i], gid, 16))
			return (int)i;
	return -1;
}

uint16_t rocemu_port_eth_mtu(const struct rocemu_port *port)
{
	return port->eth_mtu;
}

uint32_t rocemu_port_active_mtu(const struct rocemu_port *port)
{
	uint32_t room = port->eth_mtu;

	if (room > port->max_frame - 18)
		room = port->max_frame - 18;
	for (uint32_t mtu = 4096; mtu >= 256; mtu >>= 1)
		if (mtu + ROCE_IP_OVERHEAD_MAX <= room)
			return mtu;
	return 256;
}

bool rocemu_port_link_up(const struct rocemu_port *port)
{
	struct rte_eth_link link;

	if (rte_eth_link_get_nowait(port->port_id, &link))
		return false;
	return link.link_status == RTE_ETH_LINK_UP;
}

uint32_t rocemu_port_link_speed(const struct rocemu_port *port)
{
	struct rte_eth_link link;

	if (rte_eth_link_get_nowait(port->port_id, &link) ||
	    link.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN)
		return 0;
	return link.link_speed;
}

/* ------------------------------------------------------------------------ */
/* Transmit.                                                                  */

struct rte_mbuf *rocemu_port_alloc_mbuf(struct rocemu_port *port)
{
	return rte_pktmbuf_alloc(port->pool);
}

static int loop_enqueue(struct rocemu_port *port, struct rte_mbuf *m)
{
	if (port->loop_tail - port->loop_head >= PORT_LOOP_SLOTS) {
		rte_pktmbuf_free(m);
		port_count_drop(port, "loopback_full");
		port_count(port, PC_TX_DROPS);
		return -ENOBUFS;
	}
	port->loop[port->loop_tail++ & (PORT_LOOP_SLOTS - 1)] = m;
	port_count(port, PC_LOOPBACK_FRAMES);
	return 0;
}

/* After the fault injector: capture, then loop back or queue for the device. */
int port_transmit(struct rocemu_port *port, struct rte_mbuf *m)
{
	const struct rte_ether_hdr *eth;

	if (unlikely(m->pkt_len < RTE_ETHER_HDR_LEN || m->data_len < RTE_ETHER_HDR_LEN)) {
		rte_pktmbuf_free(m);
		port_count_drop(port, "tx_runt");
		port_count(port, PC_TX_DROPS);
		return -EINVAL;
	}
	if (unlikely(port->capture != NULL))
		port_capture_frame(port, m);
	eth = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);
	if (rte_is_same_ether_addr(&eth->dst_addr, &port->mac))
		return loop_enqueue(port, m);
	if (port->tx_n == PORT_TX_BUF) {
		rocemu_port_flush(port);
		if (port->tx_n == PORT_TX_BUF) {
			rte_pktmbuf_free(m);
			port_count_drop(port, "tx_full");
			port_count(port, PC_TX_DROPS);
			return -ENOBUFS;
		}
	}
	port->tx_buf[port->tx_n++] = m;
	return 0;
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
		int r = port_transmit(port, out[i]);
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

/* The peer's application is in a polling loop right now (see app_waiting_tsc
 * in the bell page): its next poll takes our frames, so its thread need not
 * be woken. A stamp from the future counts as stale: we ring. */
static bool peer_app_waiting(struct rocemu_port *port)
{
	return atomic_load_explicit(&port_bell_peer(port)->app_busy, memory_order_acquire) ||
	       port_bell_app_waiting(port, port_bell_peer(port));
}

void rocemu_port_flush(struct rocemu_port *port)
{
	uint32_t len[PORT_TX_BUF];
	uint16_t sent;

	if (port->tx_n == 0 || unlikely(port->port_id == UINT16_MAX))
		return;
	if (unlikely(!port_dev_usable(port))) {
		for (unsigned i = 0; i < port->tx_n; i++) {
			rte_pktmbuf_free(port->tx_buf[i]);
			port_count_drop(port,
					port->dev_stopped ? "tx_reconnecting" : "tx_peer_closed");
		}
		port->fixed[PC_TX_DROPS] += port->tx_n;
		port->tx_n = 0;
		return;
	}
	/* lengths first: once sent, the device owns the mbufs */
	for (unsigned i = 0; i < port->tx_n; i++)
		len[i] = port->tx_buf[i]->pkt_len;
	sent = rte_eth_tx_burst(port->port_id, 0, port->tx_buf, (uint16_t)port->tx_n);
	for (uint16_t i = 0; i < sent; i++)
		port->fixed[PC_TX_BYTES] += len[i];
	port->fixed[PC_TX_FRAMES] += sent;
	if (sent) {
		/* no clock read (~35 ns on a VM) per post: outside a pass, the
		 * last pass's time is close enough for the close linger and the
		 * time-based bell (the thread passes at least every 2 ms) */
		uint64_t now = port->pass_now ? port->pass_now : port->last_pass_ns;

		port->last_tx_ns = now;
		if (port->bell_page &&
		    atomic_load_explicit(&port_bell_peer(port)->pid, memory_order_relaxed)) {
			/* the frames are in the ring (the PMD's release store) before
			 * we look at the flag; the peer sets its flag before its last
			 * look at the ring: one of us sees the other */
			atomic_thread_fence(memory_order_seq_cst);
			if (atomic_load_explicit(&port_bell_peer(port)->sleeping,
						 memory_order_relaxed) &&
			    !peer_app_waiting(port) &&
			    atomic_exchange(&port_bell_peer(port)->sleeping, 0)) {
				port_bell_ring(port_bell_peer(port));
				port->last_bell_ns = now;
				port_count_event(port, "bell_rung");
			}
		} else if (port->bell_peer_len &&
			   now - port->last_bell_ns >= PORT_BELL_INTERVAL_NS) {
			ssize_t r =
			    sendto(port->doorbell_fd, "", 1, MSG_DONTWAIT,
				   (struct sockaddr *)&port->bell_peer, port->bell_peer_len);
			(void)r;
			port->last_bell_ns = now;
			port_count_event(port, "bell_rung");
		}
	}
	if (sent < port->tx_n)
		memmove(port->tx_buf, port->tx_buf + sent,
			(port->tx_n - sent) * sizeof(port->tx_buf[0]));
	port->tx_n -= sent;
}
