/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Link kind `host:NAME`: this process is attached to a `rocemu host`, the
 * emulated NIC of the whole host (docs/host.md). The host owns the uplink,
 * the MAC, the GID table, the neighbours and the QPN space; this process
 * keeps its transport and exchanges frames with the host through two rings
 * in a memfd the host made for it (rocemu_host.h). No ethdev: the link moves
 * frames itself (rx_burst/tx_burst, port_link_host_ring.c); this file
 * attaches, maps the host's memory and makes the requests. Frames to the host's own MAC go to the
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

#include "port_link_host.h"

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
struct rocemu_host_inbound *host_link_map_inbound(int fd, uint32_t slot_size, size_t *size)
{
	struct rocemu_host_inbound *in;
	struct stat st;
	uint64_t want = rocemu_host_inbound_offset(slot_size, ROCEMU_HOST_INBOUND_RINGS);

	if (fstat(fd, &st) || (uint64_t)st.st_size != want)
		return NULL;
	in = map_fd(fd, (size_t)want, PROT_READ | PROT_WRITE);
	if (!in)
		return NULL;
	if (!rocemu_host_shm_hdr_ok(&in->hdr, ROCEMU_HOST_INBOUND_MAGIC, ROCEMU_HOST_INBOUND_RINGS,
				    want) ||
	    in->hdr.slot_size != slot_size) {
		munmap(in, (size_t)want);
		return NULL;
	}
	*size = (size_t)want;
	return in;
}

struct rocemu_host_ring *host_link_inbound_ring(struct rocemu_host_inbound *in, unsigned k)
{
	return (struct rocemu_host_ring *)((uint8_t *)in +
					   rocemu_host_inbound_offset(in->hdr.slot_size, k));
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
	if (!rocemu_host_shm_hdr_ok(&r->hdr, ROCEMU_HOST_REGION_MAGIC, ROCEMU_HOST_RING_SLOTS,
				    l->region_size) ||
	    r->hdr.slot_size < 256 || rocemu_host_region_size(r->hdr.slot_size) != r->hdr.size ||
	    r->up_offset != ROCEMU_HOST_REGION_HDR ||
	    r->direct_qp_offset != rocemu_host_region_direct_offset(r->hdr.slot_size) ||
	    l->page->magic != ROCEMU_HOST_PAGE_MAGIC)
		return port_fail(err, errlen, -EPROTO, "host: region of an unknown layout");
	l->slot_size = r->hdr.slot_size;
	l->up = (struct rocemu_host_ring *)((uint8_t *)l->region + r->up_offset);
	l->direct_qp = rocemu_host_region_direct(l->region);
	l->inbound = host_link_map_inbound(fds[1], l->slot_size, &l->inbound_size);
	if (!l->inbound)
		return port_fail(err, errlen, -EPROTO, "host: inbound region of an unknown layout");
	for (unsigned k = 0; k < ROCEMU_HOST_INBOUND_RINGS; k++)
		l->in_ring[k] = host_link_inbound_ring(l->inbound, k);
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

static bool host_blocked(struct rocemu_port *port, enum port_counter *reason)
{
	struct host_link *l = port->link_priv;

	*reason = PC_DROP_TX_HOST_GONE;
	return l->gone;
}

/* One request, one REPLY (and an fd with a PAIR answer). The engine lock
 * is held: requests never overlap. */
int host_link_request_fd(struct rocemu_port *port, uint32_t type, uint32_t arg, uint32_t *value,
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
	return host_link_request_fd(port, type, arg, value, NULL);
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
		port_count(port, PC_DROP_QPN_FREE_UNSENT);
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

static int host_id(const struct rocemu_port *port, struct rocemu_port_host_id *id)
{
	const struct host_link *l = port->link_priv;

	*id = (struct rocemu_port_host_id){
	    .host_pid = l->welcome.host_pid,
	    .proc_id = l->welcome.proc_id,
	    .proc_gen = l->welcome.proc_gen,
	};
	_Static_assert(sizeof(id->name) >= sizeof(l->welcome.host_name), "host name fits");
	memcpy(id->name, l->welcome.host_name, sizeof(l->welcome.host_name));
	id->name[sizeof(id->name) - 1] = '\0';
	return 0;
}

static void host_mac(struct rocemu_port *port, const struct rte_ether_addr *dev_mac)
{
	(void)dev_mac;
	port_pick_mac(port, NULL, false); /* the host's, set as --mac by host_attach */
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
    .online = host_link_online,
    .blocked = host_blocked,
    .app_note = host_link_app_note,
    .sleep = host_link_sleep,
    .wake = host_link_wake,
    .tx_in_flight = host_link_tx_in_flight,
    .release = host_release,
    .rx_burst = host_link_rx_burst,
    .tx_burst = host_link_tx_burst,
    .link_up = host_link_up,
    .resolve = host_resolve,
    .qpn_alloc = host_qpn_alloc,
    .qpn_free = host_qpn_free,
    .host_id = host_id,
    .switched_loopback = true,
};
