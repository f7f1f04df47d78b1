/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Link kind `host:NAME`: this process is attached to a `rocemu host`, the
 * emulated NIC of the whole host (docs/host.md). The host owns the uplink,
 * the MAC, the GID table, the neighbours and the QPN space; this process
 * keeps its transport and exchanges frames with the host through two rings
 * in a memfd the host made for it (rocemu_host.h). No ethdev: the link moves
 * frames itself (rx_burst/tx_burst). Frames to the host's own MAC go to the
 * host too (switched_loopback): another process may own the QPN.
 *
 * The control connection (RUNDIR/ctl.sock, SOCK_SEQPACKET) stays open for
 * the process's life: its end is how the host learns that we are gone, and
 * how we learn that the host is (the link goes down: a port event, then
 * nothing more is sent).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include "port_link.h"
#include "rocemu_host.h"

/* A request waits this long for the host's answer. */
#define HOST_REPLY_TIMEOUT_S 10
/* A RESOLVE for the same address is sent again after this long. */
#define HOST_RESOLVE_RESEND_NS 100000000ull
/* Our application polled within this long: the host need not ring us. */
#define HOST_APP_FRESH_NS 10000ull

static uint64_t host_app_fresh_tsc; /* HOST_APP_FRESH_NS in TSC cycles */

/* What we know of another process on the host, by its index. */
enum host_peer_way { PEER_UNKNOWN, PEER_DIRECT, PEER_VIA_HOST };

struct host_peer {
	uint32_t gen; /* the owner generation this is about */
	uint8_t way;
	bool ring_it;			/* frames put in its ring in this burst */
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
	struct rocemu_host_ring *in_ring[ROCEMU_HOST_INBOUND_RINGS];
	uint32_t slot_size;
	unsigned rx_next; /* the inbound ring to read first (round robin) */
	bool gone;	  /* the host closed our connection or went away */
	struct host_peer peers[ROCEMU_HOST_MAX_PROCS];
	/* RESOLVE requests sent lately (address, when) */
	struct {
		uint8_t gid[16];
		uint64_t at;
	} asked[8];
	unsigned asked_next;
};

int rocemu_host_dir(const char *name, char *out, size_t len)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;

	if (!name || !*name)
		return -EINVAL;
	if (strchr(name, '/'))
		n = snprintf(out, len, "%s", name);
	else if (strlen(name) >= ROCEMU_HOST_NAME_MAX)
		return -EINVAL;
	else if (xdg && *xdg == '/')
		n = snprintf(out, len, "%s/rocemu/%s", xdg, name);
	else if (geteuid() == 0)
		n = snprintf(out, len, "/run/rocemu/%s", name);
	else
		n = snprintf(out, len, "/tmp/rocemu-%u/%s", (unsigned)geteuid(), name);
	if (n < 0 || (size_t)n >= len)
		return -EINVAL;
	return 0;
}

static int host_check_arg(const char *arg, char *err, size_t errlen)
{
	char dir[ROCEMU_PATH_MAX];

	if (!*arg)
		return port_fail(err, errlen, -EINVAL, "expected host:NAME (a rocemu host's name)");
	for (const char *c = arg; *c; c++)
		if ((unsigned char)*c < 0x20)
			return port_fail(err, errlen, -EINVAL, "host name: control character");
	if (rocemu_host_dir(arg, dir, sizeof(dir)) ||
	    strlen(dir) + sizeof("/ctl.sock") > sizeof(((struct sockaddr_un *)0)->sun_path))
		return port_fail(err, errlen, -EINVAL, "host name '%s' too long", arg);
	return 0;
}

int rocemu_host_connect(const char *name, char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = HOST_REPLY_TIMEOUT_S};
	char dir[ROCEMU_PATH_MAX];
	int fd, rc;

	rc = rocemu_host_dir(name, dir, sizeof(dir));
	if (rc)
		return port_fail(err, errlen, rc, "host:%s: bad host name", name);
	if (strlen(dir) + sizeof("/ctl.sock") > sizeof(sa.sun_path))
		return port_fail(err, errlen, -ENAMETOOLONG, "host:%s: path too long", name);
	memcpy(sa.sun_path, dir, strlen(dir));
	memcpy(sa.sun_path + strlen(dir), "/ctl.sock", sizeof("/ctl.sock"));
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return port_fail(err, errlen, -errno, "socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		rc = -errno;
		close(fd);
		if (rc == -ENOENT || rc == -ECONNREFUSED)
			return port_fail(err, errlen, rc, "no rocemu host '%s' running (%s)", name,
					 sa.sun_path);
		return port_fail(err, errlen, rc, "host:%s: cannot connect to %s: %s", name,
				 sa.sun_path, strerror(-rc));
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return fd;
}

/* Receive one message and up to max_fds descriptors. Bytes, or -errno. */
static ssize_t host_recv(int fd, void *buf, size_t len, int *fds, unsigned max_fds, unsigned *n_fds)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * 4)];
	} ctl;
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	if (n_fds) {
		*n_fds = 0;
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof(ctl.buf);
	}
	do
		n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (!n_fds)
		return n;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		unsigned k = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		int got[4];

		memcpy(got, CMSG_DATA(c), sizeof(int) * (k < 4 ? k : 4));
		for (unsigned i = 0; i < k && i < 4; i++) {
			if (*n_fds < max_fds)
				fds[(*n_fds)++] = got[i];
			else
				close(got[i]);
		}
	}
	return n;
}

int rocemu_host_query(const char *name, struct rocemu_host_welcome *info, char *err, size_t errlen)
{
	struct rocemu_host_request req = {.type = ROCEMU_HOST_INFO};
	union {
		struct rocemu_host_welcome w;
		struct rocemu_host_refused r;
	} ans;
	ssize_t n;
	int fd = rocemu_host_connect(name, err, errlen);

	if (fd < 0)
		return fd;
	if (send(fd, &req, sizeof(req), MSG_NOSIGNAL) < 0) {
		n = -errno;
		close(fd);
		return port_fail(err, errlen, (int)n, "host:%s: %s", name, strerror(errno));
	}
	n = host_recv(fd, &ans, sizeof(ans), NULL, 0, NULL);
	close(fd);
	if (n >= (ssize_t)sizeof(ans.r) && ans.r.type == ROCEMU_HOST_REFUSED)
		return port_fail(err, errlen, ans.r.err < 0 ? ans.r.err : -EPERM, "host:%s: %.*s",
				 name, (int)sizeof(ans.r.why), ans.r.why);
	if (n != (ssize_t)sizeof(ans.w) || ans.w.type != ROCEMU_HOST_WELCOME)
		return port_fail(err, errlen, n < 0 ? (int)n : -EPROTO,
				 "host:%s: no answer from the host", name);
	*info = ans.w;
	return 0;
}

static int host_preview_mac(const struct rocemu_port_config *cfg, const char *arg, uint8_t mac[6])
{
	struct rocemu_host_welcome w;

	(void)cfg;
	if (rocemu_host_query(arg, &w, NULL, 0))
		return -ENODATA;
	memcpy(mac, w.mac, 6);
	return 0;
}

static void *map_fd(int fd, size_t size, int prot)
{
	void *p = mmap(NULL, size, prot, MAP_SHARED, fd, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void host_unmap(struct host_link *l)
{
	if (l->region)
		munmap(l->region, l->region_size);
	if (l->inbound)
		munmap(l->inbound, l->inbound_size);
	if (l->page)
		munmap((void *)l->page, sizeof(*l->page));
	if (l->bell)
		munmap(l->bell, sizeof(*l->bell));
	for (unsigned i = 0; i < ROCEMU_HOST_MAX_PROCS; i++)
		if (l->peers[i].in)
			munmap(l->peers[i].in, l->peers[i].in_size);
	memset(l->peers, 0, sizeof(l->peers));
	l->region = NULL;
	l->inbound = NULL;
	l->page = NULL;
	l->bell = NULL;
}

/* An inbound region (ours, or a peer's) checked against its memfd's size
 * before any ring is touched. NULL when it is not one. */
static struct rocemu_host_inbound *map_inbound(int fd, uint32_t slot_size, size_t *size)
{
	struct rocemu_host_inbound *in;
	struct stat st;
	uint64_t want = rocemu_host_inbound_offset(slot_size, ROCEMU_HOST_INBOUND_RINGS);

	if (fstat(fd, &st) || (uint64_t)st.st_size != want)
		return NULL;
	in = map_fd(fd, (size_t)want, PROT_READ | PROT_WRITE);
	if (!in)
		return NULL;
	if (in->magic != ROCEMU_HOST_INBOUND_MAGIC || in->version != ROCEMU_HOST_VERSION ||
	    in->slot_size != slot_size || in->n_rings != ROCEMU_HOST_INBOUND_RINGS ||
	    in->size != want) {
		munmap(in, (size_t)want);
		return NULL;
	}
	*size = (size_t)want;
	return in;
}

static struct rocemu_host_ring *inbound_ring(struct rocemu_host_inbound *in, unsigned k)
{
	return (struct rocemu_host_ring *)((uint8_t *)in +
					   rocemu_host_inbound_offset(in->slot_size, k));
}

/* Check and map what the host sent: [0] our region, [1] our inbound
 * region, [2] the host page (read-only), [3] the host's bell. */
static int host_map(struct rocemu_port *port, struct host_link *l, const int *fds, char *err,
		    size_t errlen)
{
	struct stat st;
	const struct rocemu_host_region *r;

	if (fstat(fds[0], &st) || st.st_size < (off_t)ROCEMU_HOST_REGION_HDR)
		return port_fail(err, errlen, -EPROTO, "host:%s: bad region", port->cfg.spec + 5);
	l->region_size = (size_t)st.st_size;
	l->region = map_fd(fds[0], l->region_size, PROT_READ | PROT_WRITE);
	l->page = map_fd(fds[2], sizeof(*l->page), PROT_READ);
	l->bell = map_fd(fds[3], sizeof(*l->bell), PROT_READ | PROT_WRITE);
	if (!l->region || !l->page || !l->bell)
		return port_fail(err, errlen, -ENOMEM, "host: cannot map its memory: %s",
				 strerror(errno));
	r = l->region;
	if (r->magic != ROCEMU_HOST_REGION_MAGIC || r->version != ROCEMU_HOST_VERSION ||
	    r->n_slots != ROCEMU_HOST_RING_SLOTS || r->slot_size < 256 ||
	    r->size != l->region_size || rocemu_host_region_size(r->slot_size) != r->size ||
	    r->up_offset != ROCEMU_HOST_REGION_HDR || l->page->magic != ROCEMU_HOST_PAGE_MAGIC)
		return port_fail(err, errlen, -EPROTO, "host: region of an unknown layout");
	l->slot_size = r->slot_size;
	l->up = (struct rocemu_host_ring *)((uint8_t *)l->region + r->up_offset);
	l->inbound = map_inbound(fds[1], l->slot_size, &l->inbound_size);
	if (!l->inbound)
		return port_fail(err, errlen, -EPROTO, "host: inbound region of an unknown layout");
	for (unsigned k = 0; k < ROCEMU_HOST_INBOUND_RINGS; k++)
		l->in_ring[k] = inbound_ring(l->inbound, k);
	return 0;
}

/*
 * The first hook of open: attach. HELLO, then WELCOME with the host's
 * addressing and our memory. The port takes the host's MTU, MAC and
 * addresses (a --mac or --ip given with a host port is an error: the
 * addresses are the host's).
 */
static int host_attach(struct rocemu_port *port, const char *arg, char *err, size_t errlen)
{
	struct host_link *l = port->link_priv;
	struct rocemu_host_hello hello = {
	    .type = ROCEMU_HOST_HELLO, .version = ROCEMU_HOST_VERSION, .pid = (uint32_t)getpid()};
	union {
		struct rocemu_host_welcome w;
		struct rocemu_host_refused r;
	} ans;
	int fds[4] = {-1, -1, -1, -1};
	unsigned n_fds = 0;
	ssize_t n;
	int rc;

	l->sock = -1;
	if (port->cfg.n_ips || port->cfg.mac_set)
		return port_fail(
		    err, errlen, -EINVAL,
		    "host:%s: the host's addresses are the device's (no --ip or --mac)", arg);
	rc = rocemu_host_connect(arg, err, errlen);
	if (rc < 0)
		return rc;
	l->sock = rc;
	if (send(l->sock, &hello, sizeof(hello), MSG_NOSIGNAL) < 0)
		return port_fail(err, errlen, -errno, "host:%s: %s", arg, strerror(errno));
	n = host_recv(l->sock, &ans, sizeof(ans), fds, 4, &n_fds);
	if (n >= (ssize_t)sizeof(ans.r) && ans.r.type == ROCEMU_HOST_REFUSED) {
		rc = port_fail(err, errlen, ans.r.err < 0 ? ans.r.err : -EPERM,
			       "host:%s refused us: %.*s", arg, (int)sizeof(ans.r.why), ans.r.why);
		goto out;
	}
	if (n != (ssize_t)sizeof(ans.w) || ans.w.type != ROCEMU_HOST_WELCOME || n_fds != 4 ||
	    ans.w.version != ROCEMU_HOST_VERSION || ans.w.n_ips > ROCEMU_PORT_MAX_IPS ||
	    ans.w.proc_id >= ROCEMU_HOST_MAX_PROCS) {
		rc = port_fail(err, errlen, n < 0 ? (int)n : -EPROTO,
			       "host:%s: no valid answer to our attach%s", arg,
			       n == -EAGAIN ? " (timed out)" : "");
		goto out;
	}
	l->welcome = ans.w;
	rc = host_map(port, l, fds, err, errlen);
	if (rc)
		goto out;
	port->eth_mtu = ans.w.eth_mtu;
	memcpy(port->cfg.mac, ans.w.mac, 6);
	port->cfg.mac_set = true;
	port->cfg.n_ips = ans.w.n_ips;
	memcpy(port->cfg.ips, ans.w.ips, sizeof(port->cfg.ips));
	snprintf(port->dev_name, sizeof(port->dev_name), "host:%s", arg);
out:
	for (unsigned i = 0; i < n_fds; i++)
		close(fds[i]);
	return rc;
}

static int host_create(struct rocemu_port *port, const char *arg, char *err, size_t errlen)
{
	(void)port;
	(void)arg;
	(void)err;
	(void)errlen;
	return 0; /* host_attach did it all: no ethdev */
}

/* Frames in one of our inbound rings (the host's, or a peer's). */
static bool host_frames_waiting(const struct host_link *l)
{
	uint32_t assigned = atomic_load_explicit(&l->inbound->assigned, memory_order_acquire);

	for (unsigned k = 0; assigned; k++, assigned >>= 1)
		if ((assigned & 1) &&
		    atomic_load_explicit(&l->in_ring[k]->head, memory_order_seq_cst) !=
			atomic_load_explicit(&l->in_ring[k]->tail, memory_order_relaxed))
			return true;
	return false;
}

/* The progress thread sleeps on our inbound region's bell, which the host
 * and our direct peers ring after they put frames in our rings (our own
 * kicks ring it too). */
static bool host_sleep(struct rocemu_port *port, const struct timespec *ts)
{
	struct host_link *l = port->link_priv;
	struct rocemu_host_inbound *in = l->inbound;
	uint32_t seq = atomic_load(&in->proc_bell);
	bool frame;

	atomic_store_explicit(&in->proc_sleeping, 1, memory_order_seq_cst);
	frame = host_frames_waiting(l);
	if (!frame && !atomic_load(&port->thread_stop) &&
	    !atomic_load_explicit(&port->kicked, memory_order_seq_cst))
		syscall(SYS_futex, &in->proc_bell, FUTEX_WAIT, seq, ts, NULL, 0);
	atomic_store_explicit(&in->proc_sleeping, 0, memory_order_relaxed);
	return frame || host_frames_waiting(l);
}

static void host_wake(struct rocemu_port *port)
{
	struct host_link *l = port->link_priv;

	atomic_fetch_add(&l->inbound->proc_bell, 1);
	syscall(SYS_futex, &l->inbound->proc_bell, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* What the application does, for the writers' decision to ring us: a busy
 * or recently polling application will see its frames without our thread. */
static bool host_app_note(struct rocemu_port *port, enum port_app_note what)
{
	struct host_link *l = port->link_priv;
	struct rocemu_host_inbound *in = l->inbound;

	switch (what) {
	case PORT_APP_ENTER:
		if (!atomic_load_explicit(&in->app_busy, memory_order_relaxed))
			atomic_store_explicit(&in->app_busy, 1, memory_order_relaxed);
		return false;
	case PORT_APP_POSTED:
	case PORT_APP_WAITING:
		atomic_store_explicit(&in->app_waiting_tsc, port->last_pass_tsc,
				      memory_order_relaxed);
		atomic_store_explicit(&in->app_busy, 0, memory_order_release);
		return false;
	case PORT_APP_SATISFIED:
		/* a writer that saw us waiting did not ring: take its frames now */
		atomic_store_explicit(&in->app_busy, 0, memory_order_release);
		return atomic_exchange_explicit(&in->app_waiting_tsc, 0, memory_order_seq_cst) &&
		       host_frames_waiting(l);
	case PORT_APP_AWAY:
		atomic_store_explicit(&in->app_busy, 0, memory_order_relaxed);
		atomic_store_explicit(&in->app_waiting_tsc, 0, memory_order_seq_cst);
		return false;
	}
	return false;
}

static void host_check_gone(const struct rocemu_port *port)
{
	struct host_link *l = port->link_priv;
	struct pollfd p = {.fd = l->sock, .events = POLLRDHUP};

	if (l->gone)
		return;
	if (l->sock < 0 || atomic_load_explicit(&l->region->host_gone, memory_order_relaxed) ||
	    (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))))
		l->gone = true;
}

static bool host_link_up(const struct rocemu_port *port)
{
	struct host_link *l = port->link_priv;

	if (!l->region)
		return false;
	host_check_gone(port);
	return !l->gone;
}

static const char *host_blocked(struct rocemu_port *port)
{
	struct host_link *l = port->link_priv;

	return l->gone ? "tx_host_gone" : NULL;
}

/* Ring the host after we queued frames for it, if its thread sleeps. */
static void host_ring(struct host_link *l)
{
	if (!atomic_load_explicit(&l->bell->sleeping, memory_order_seq_cst))
		return;
	atomic_fetch_add(&l->bell->bell, 1);
	syscall(SYS_futex, &l->bell->bell, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Ring a peer after we put frames in its ring, unless nothing needs it: its
 * thread awake, or its application inside a verb or polling lately. */
static void peer_ring(struct rocemu_host_inbound *in)
{
	uint64_t waiting;

	if (!atomic_load_explicit(&in->proc_sleeping, memory_order_seq_cst) ||
	    atomic_load_explicit(&in->app_busy, memory_order_acquire))
		return;
	waiting = atomic_load_explicit(&in->app_waiting_tsc, memory_order_relaxed);
	if (waiting && rte_rdtsc() - waiting < host_app_fresh_tsc)
		return;
	atomic_fetch_add(&in->proc_bell, 1);
	syscall(SYS_futex, &in->proc_bell, FUTEX_WAKE, 1, NULL, NULL, 0);
}

static int host_request_fd(struct rocemu_port *port, uint32_t type, uint32_t arg, uint32_t *value,
			   int *fd);

/*
 * A direct ring into process idx (generation gen): ask the host once per
 * generation; a refusal (the host captures, the peer has no ring left)
 * means the host's path for that generation. Engine lock held.
 */
static struct host_peer *peer_get(struct rocemu_port *port, int idx, uint32_t gen)
{
	struct host_link *l = port->link_priv;
	struct host_peer *pr = &l->peers[idx];
	uint32_t ring = 0;
	int fd = -1, rc;

	if (pr->gen == gen && pr->way != PEER_UNKNOWN)
		return pr->way == PEER_DIRECT ? pr : NULL;
	if (pr->in)
		munmap(pr->in, pr->in_size);
	memset(pr, 0, sizeof(*pr));
	pr->gen = gen;
	pr->way = PEER_VIA_HOST;
	rc = host_request_fd(port, ROCEMU_HOST_PAIR, (uint32_t)idx, &ring, &fd);
	if (rc || fd < 0) {
		if (port_trace_on("host"))
			port_trace(port, "host", "process %d: through the host (%s)", idx,
				   strerror(rc ? -rc : EPROTO));
		return NULL;
	}
	pr->in = map_inbound(fd, l->slot_size, &pr->in_size);
	close(fd);
	if (!pr->in || ring == 0 || ring >= ROCEMU_HOST_INBOUND_RINGS)
		return NULL;
	if (port_trace_on("host"))
		port_trace(port, "host", "process %d: direct ring %u", idx, ring);
	pr->ring = inbound_ring(pr->in, ring);
	pr->way = PEER_DIRECT;
	port_count_event(port, "host_direct_rings");
	return pr;
}

/*
 * Where a frame goes: a RoCEv2 frame to the host's MAC for a QP another
 * process owns goes straight into that process's ring (when the host
 * allows direct rings); everything else (the uplink, QP1, our own QPs,
 * unknown QPNs) to the host.
 */
static struct host_peer *frame_peer(struct rocemu_port *port, const uint8_t *f, uint32_t len)
{
	struct host_link *l = port->link_priv;
	uint32_t l4, dqpn;
	uint64_t e;
	int idx;

	if (l->page->switch_all || len < 14 + 20 + 8 + 12 || memcmp(f, port->mac.addr_bytes, 6))
		return NULL;
	if (f[12] == 0x08 && f[13] == 0x00 && f[14] == 0x45 && f[23] == 17)
		l4 = 14 + 20;
	else if (f[12] == 0x86 && f[13] == 0xdd && f[20] == 17)
		l4 = 14 + 40;
	else
		return NULL;
	if (len < l4 + 8 + 12 || (f[l4 + 2] << 8 | f[l4 + 3]) != ROCE_UDP_PORT)
		return NULL;
	dqpn = (uint32_t)f[l4 + 8 + 5] << 16 | (uint32_t)f[l4 + 8 + 6] << 8 | f[l4 + 8 + 7];
	if (dqpn == 1)
		return NULL;
	e = atomic_load_explicit(&l->page->qpn_owner[dqpn & 0xFFFF], memory_order_acquire);
	idx = ROCEMU_HOST_OWNER_IDX(e);
	if (ROCEMU_HOST_OWNER_QPN(e) != dqpn || idx < 0 || (uint32_t)idx == l->welcome.proc_id)
		return NULL;
	return peer_get(port, idx, ROCEMU_HOST_OWNER_GEN(e));
}

/* Put one frame in ring r of n_slots: false when it is full. */
static bool ring_put(struct host_link *l, struct rocemu_host_ring *r, uint32_t n_slots,
		     struct rte_mbuf *m)
{
	uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint32_t used = head - atomic_load_explicit(&r->tail, memory_order_acquire);
	struct rocemu_host_slot *s;
	uint32_t len = m->pkt_len;
	const void *src;

	if (used >= n_slots)
		return false; /* full (or a tail no reader wrote: we wait as for full) */
	s = rocemu_host_ring_slot(r, l->slot_size, n_slots, head);
	if (len > l->slot_size - ROCEMU_HOST_SLOT_HDR) {
		len = 0; /* an empty slot: the reader skips it */
	} else if (!(src = rte_pktmbuf_read(m, 0, len, s->frame))) {
		len = 0;
	} else if (src != s->frame) {
		memcpy(s->frame, src, len); /* one segment: read gave its data */
	}
	s->len = len;
	atomic_store_explicit(&r->head, head + 1, memory_order_release);
	return true;
}

static uint16_t host_tx_burst(struct rocemu_port *port, struct rte_mbuf **pkts, uint16_t n)
{
	struct host_link *l = port->link_priv;
	struct host_peer *rung[32];
	unsigned n_rung = 0;
	bool to_host = false;
	uint16_t i;

	for (i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		uint8_t hdr[14 + 40 + 8 + 12];
		const uint8_t *h = rte_pktmbuf_read(m, 0, RTE_MIN(m->pkt_len, sizeof(hdr)), hdr);
		struct host_peer *pr = h ? frame_peer(port, h, m->pkt_len) : NULL;

		if (m->pkt_len > l->slot_size - ROCEMU_HOST_SLOT_HDR)
			port_count_drop(port, "tx_too_long");
		if (pr) {
			if (!ring_put(l, pr->ring, ROCEMU_HOST_PEER_SLOTS, m))
				break; /* the peer is behind: the rest waits (order kept) */
			if (!pr->ring_it && n_rung < RTE_DIM(rung)) {
				pr->ring_it = true;
				rung[n_rung++] = pr;
			}
			port_count_event(port, "tx_direct_frames");
		} else {
			if (!ring_put(l, l->up, ROCEMU_HOST_RING_SLOTS, m))
				break;
			to_host = true;
		}
		rte_pktmbuf_free(m);
	}
	atomic_thread_fence(memory_order_seq_cst); /* heads before the sleepers' flags */
	if (to_host)
		host_ring(l);
	for (unsigned k = 0; k < n_rung; k++) {
		rung[k]->ring_it = false;
		peer_ring(rung[k]->in);
	}
	return i;
}

static uint16_t ring_take(struct rocemu_port *port, struct rocemu_host_ring *r, uint32_t n_slots,
			  struct rte_mbuf **pkts, uint16_t n)
{
	struct host_link *l = port->link_priv;
	uint32_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	uint32_t avail = atomic_load_explicit(&r->head, memory_order_acquire) - tail;
	uint16_t got = 0;
	uint32_t i;

	if (avail > n_slots) {
		/* a head no writer could have published: skip what is there */
		port_count_drop(port, "rx_bad_ring");
		atomic_store_explicit(&r->tail, atomic_load(&r->head), memory_order_release);
		return 0;
	}
	for (i = 0; i < avail && got < n; i++) {
		const struct rocemu_host_slot *s =
		    rocemu_host_ring_slot(r, l->slot_size, n_slots, tail + i);
		uint32_t len = s->len;
		struct rte_mbuf *m;

		if (len == 0)
			continue;
		if (len < RTE_ETHER_HDR_LEN || len > l->slot_size - ROCEMU_HOST_SLOT_HDR ||
		    len > port->max_frame) {
			port_count_drop(port, "rx_bad_slot");
			continue;
		}
		m = rte_pktmbuf_alloc(port->pool);
		if (!m)
			break; /* the frame waits in the ring */
		memcpy(rte_pktmbuf_mtod(m, void *), s->frame, len);
		m->data_len = (uint16_t)len;
		m->pkt_len = len;
		pkts[got++] = m;
	}
	if (i)
		atomic_store_explicit(&r->tail, tail + i, memory_order_release);
	return got;
}

/* Every ring into us, the host's and the peers', in turn. */
static uint16_t host_rx_burst(struct rocemu_port *port, struct rte_mbuf **pkts, uint16_t n)
{
	struct host_link *l = port->link_priv;
	uint32_t assigned = atomic_load_explicit(&l->inbound->assigned, memory_order_acquire);
	uint16_t got = 0;

	if (assigned == 1)
		return ring_take(port, l->in_ring[0], ROCEMU_HOST_RING_SLOTS, pkts, n);
	for (unsigned j = 0; j < ROCEMU_HOST_INBOUND_RINGS && got < n; j++) {
		unsigned k = (l->rx_next + j) % ROCEMU_HOST_INBOUND_RINGS;

		if (assigned & (1u << k))
			got += ring_take(port, l->in_ring[k], rocemu_host_inbound_slots(k),
					 pkts + got, (uint16_t)(n - got));
	}
	l->rx_next++;
	return got;
}

/* Frames in our ring the host has not taken yet (close lingers for them). */
static bool host_tx_in_flight(struct rocemu_port *port, uint64_t now)
{
	struct host_link *l = port->link_priv;

	(void)now;
	if (l->gone || !l->up)
		return false;
	return atomic_load(&l->up->head) != atomic_load(&l->up->tail);
}

/* One request, one REPLY (and an fd with a PAIR answer). The engine lock
 * is held: requests never overlap. */
static int host_request_fd(struct rocemu_port *port, uint32_t type, uint32_t arg, uint32_t *value,
			   int *fd)
{
	struct host_link *l = port->link_priv;
	struct rocemu_host_request req = {.type = type, .arg = arg};
	struct rocemu_host_reply rep;
	unsigned n_fds = 0;
	ssize_t n;

	if (l->gone || l->sock < 0)
		return -ENETDOWN;
	if (send(l->sock, &req, sizeof(req), MSG_NOSIGNAL) < 0) {
		l->gone = true;
		return -ENETDOWN;
	}
	n = host_recv(l->sock, &rep, sizeof(rep), fd, fd ? 1 : 0, fd ? &n_fds : NULL);
	if (fd && !n_fds)
		*fd = -1;
	if (n != (ssize_t)sizeof(rep) || rep.type != ROCEMU_HOST_REPLY) {
		if (fd && *fd >= 0)
			close(*fd);
		if (n != -EAGAIN)
			l->gone = true;
		return n == -EAGAIN ? -ETIMEDOUT : -ENETDOWN;
	}
	if (rep.rc == 0 && value)
		*value = rep.value;
	return rep.rc;
}

static int host_request(struct rocemu_port *port, uint32_t type, uint32_t arg, uint32_t *value)
{
	return host_request_fd(port, type, arg, value, NULL);
}

static int host_qpn_alloc(struct rocemu_port *port, bool gsi, uint32_t *qpn)
{
	return host_request(port, ROCEMU_HOST_QPN_ALLOC, gsi, qpn);
}

static void host_qpn_free(struct rocemu_port *port, uint32_t qpn)
{
	struct host_link *l = port->link_priv;
	struct rocemu_host_request req = {.type = ROCEMU_HOST_QPN_FREE, .arg = qpn};

	if (l->gone || l->sock < 0)
		return;
	if (send(l->sock, &req, sizeof(req), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		port_count_drop(port, "qpn_free_unsent");
}

/* Ask the host to resolve dst, at most every HOST_RESOLVE_RESEND_NS. */
static void host_ask_resolve(struct rocemu_port *port, unsigned src_index, const uint8_t dst[16])
{
	struct host_link *l = port->link_priv;
	struct rocemu_host_request req = {.type = ROCEMU_HOST_RESOLVE, .arg = src_index};
	uint64_t now = rocemu_now_ns();
	unsigned i;

	for (i = 0; i < RTE_DIM(l->asked); i++)
		if (!memcmp(l->asked[i].gid, dst, 16) && l->asked[i].at &&
		    now - l->asked[i].at < HOST_RESOLVE_RESEND_NS)
			return;
	i = l->asked_next++ % RTE_DIM(l->asked);
	memcpy(l->asked[i].gid, dst, 16);
	l->asked[i].at = now;
	memcpy(req.gid, dst, 16);
	if (!l->gone && l->sock >= 0)
		(void)send(l->sock, &req, sizeof(req), MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Our own GIDs are the host's: its MAC, and the host switches the frame
 * (switched_loopback). Multicast maps as on any port; the rest is what the
 * host published for the address, asked for when it has nothing. */
static int host_resolve(struct rocemu_port *port, unsigned src_index, const uint8_t dst[16],
			uint8_t mac[6])
{
	struct host_link *l = port->link_priv;
	const struct rocemu_host_page *pg = l->page;

	if (port_ip_is_ours(port, dst)) {
		memcpy(mac, port->mac.addr_bytes, 6);
		return 0;
	}
	if (port_gid_is_v4(dst) ? (dst[12] & 0xf0) == 0xe0 : dst[0] == 0xff) {
		static const uint8_t v4[3] = {0x01, 0x00, 0x5e};

		if (port_gid_is_v4(dst)) {
			memcpy(mac, v4, 3);
			mac[3] = dst[13] & 0x7f;
			mac[4] = dst[14];
			mac[5] = dst[15];
		} else {
			mac[0] = mac[1] = 0x33;
			memcpy(mac + 2, dst + 12, 4);
		}
		return 0;
	}
	for (unsigned i = 0; i < ROCEMU_HOST_NEIGH_SLOTS; i++) {
		const struct rocemu_host_neigh *e = &pg->neigh[i];
		uint32_t seq = atomic_load_explicit(&e->seq, memory_order_acquire);
		uint32_t state;
		uint8_t gid[16], emac[6];

		if (seq & 1)
			continue;
		state = e->state;
		memcpy(gid, e->gid, 16);
		memcpy(emac, e->mac, 6);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&e->seq, memory_order_relaxed) != seq ||
		    state == ROCEMU_HOST_NEIGH_FREE || memcmp(gid, dst, 16))
			continue;
		if (state == ROCEMU_HOST_NEIGH_REACHABLE) {
			memcpy(mac, emac, 6);
			return 0;
		}
		if (state == ROCEMU_HOST_NEIGH_FAILED)
			return -EHOSTUNREACH;
		break;
	}
	host_ask_resolve(port, src_index, dst);
	return -EAGAIN;
}

static void host_mac(struct rocemu_port *port, const struct rte_ether_addr *dev_mac)
{
	(void)dev_mac;
	port_pick_mac(port, NULL, false); /* the host's, set as --mac by host_attach */
}

static void host_online(struct rocemu_port *port)
{
	host_app_fresh_tsc = rte_get_tsc_hz() / (1000000000ull / HOST_APP_FRESH_NS);
	port->frames_wake = true; /* the host and our peers ring our bell */
}

static void host_release(struct rocemu_port *port)
{
	struct host_link *l = port->link_priv;

	if (l->sock >= 0)
		close(l->sock); /* the host releases our QPNs and region */
	l->sock = -1;
	l->gone = true;
	host_unmap(l);
	l->up = NULL;
}

const struct port_link_ops port_link_host = {
    .name = "host",
    .prefix = "host:",
    .usage = "host:NAME",
    .priv_size = sizeof(struct host_link),
    .check_arg = host_check_arg,
    .preview_mac = host_preview_mac,
    .mtu = host_attach,
    .create = host_create,
    .mac = host_mac,
    .online = host_online,
    .blocked = host_blocked,
    .app_note = host_app_note,
    .sleep = host_sleep,
    .wake = host_wake,
    .tx_in_flight = host_tx_in_flight,
    .release = host_release,
    .rx_burst = host_rx_burst,
    .tx_burst = host_tx_burst,
    .link_up = host_link_up,
    .resolve = host_resolve,
    .qpn_alloc = host_qpn_alloc,
    .qpn_free = host_qpn_free,
    .switched_loopback = true,
};
