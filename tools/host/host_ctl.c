/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The host's control socket, RUNDIR/ctl.sock (SOCK_SEQPACKET): one thread
 * in epoll over the listening socket and every connection. A connection
 * starts with HELLO (a process attaches and keeps the connection for its
 * life), INFO (the host's addressing, for `rocemu run --host`) or STAT
 * (`rocemu stat`). Who may connect: the host's own user and root, plus the
 * users and groups of --allow-user/--allow-group (the kernel's SO_PEERCRED,
 * not anything the peer says). A process's end of the connection, however
 * it ends (exit, SIGKILL, a crash), releases it at once.
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/futex.h>

#include "host.h"

#define CTL_MAX_CONNS 1024
#define STAT_CHUNK    32768
/* A stat reader that takes no chunk for this long is given up (the control
 * thread waits for it, and processes' requests wait behind). */
#define STAT_SEND_WAIT_MS 2000

enum conn_kind { CONN_NEW, CONN_PROC, CONN_OTHER };

struct conn {
	int fd;
	enum conn_kind kind;
	struct host_proc *proc;
	struct ucred cred;
};

static struct conn *conns[CTL_MAX_CONNS];

static void logf_host(struct host *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_host(struct host *h, const char *fmt, ...)
{
	va_list ap;

	if (!h->verbose)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "rocemu host %s: ", h->name);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* A member of gid, by the process's supplementary groups in /proc. */
static bool proc_in_group(pid_t pid, gid_t gid)
{
	char path[64], line[1024];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		char *p, *end;

		if (strncmp(line, "Groups:", 7))
			continue;
		for (p = line + 7;; p = end) {
			unsigned long g = strtoul(p, &end, 10);

			if (end == p)
				break;
			if ((gid_t)g == gid)
				found = true;
		}
		break;
	}
	fclose(f);
	return found;
}

static bool allowed(const struct host *h, const struct ucred *c)
{
	if (c->uid == geteuid() || c->uid == 0)
		return true;
	for (unsigned i = 0; i < h->n_allowed_uids; i++)
		if (c->uid == h->allowed_uids[i])
			return true;
	for (unsigned i = 0; i < h->n_allowed_gids; i++)
		if (c->gid == h->allowed_gids[i] || proc_in_group(c->pid, h->allowed_gids[i]))
			return true;
	return false;
}

static void refuse(int fd, int err, const char *why)
{
	struct rocemu_host_refused r = {.type = ROCEMU_HOST_REFUSED, .err = err};

	snprintf(r.why, sizeof(r.why), "%s", why);
	(void)send(fd, &r, sizeof(r), MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void fill_welcome(struct host *h, struct rocemu_host_welcome *w)
{
	const struct rocemu_port_config *cfg = rocemu_port_get_config(h->port);

	memset(w, 0, sizeof(*w));
	w->type = ROCEMU_HOST_WELCOME;
	w->version = ROCEMU_HOST_VERSION;
	w->host_pid = (uint32_t)getpid();
	rocemu_port_mac(h->port, w->mac);
	w->eth_mtu = rocemu_port_eth_mtu(h->port);
	w->n_ips = cfg->n_ips;
	memcpy(w->ips, cfg->ips, sizeof(w->ips));
	snprintf(w->host_name, sizeof(w->host_name), "%s", h->name);
}

static int send_fds(int fd, const void *buf, size_t len, const int *fds, unsigned n)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * 4)];
	} ctl;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *c;

	memset(&ctl, 0, sizeof(ctl));
	msg.msg_control = ctl.buf;
	msg.msg_controllen = CMSG_SPACE(sizeof(int) * n);
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * n);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
	return sendmsg(fd, &msg, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

static void read_comm(pid_t pid, char *out, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(out, len, "?");
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(out, (int)len, f))
		out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

static int on_hello(struct host *h, struct conn *c, const struct rocemu_host_hello *m)
{
	struct rocemu_host_welcome w;
	struct host_proc *p;
	int fds[4], rc;

	if (m->version != ROCEMU_HOST_VERSION) {
		refuse(c->fd, -EPROTO, "protocol version mismatch (rebuild rocemu)");
		return -EPROTO;
	}
	fill_welcome(h, &w);
	host_lock(h);
	rc = host_proc_create(h, c->fd, c->cred.pid, c->cred.uid, &p);
	if (rc == 0) {
		w.proc_id = p->index;
		w.proc_gen = p->gen;
		read_comm(c->cred.pid, p->comm, sizeof(p->comm));
	}
	host_unlock(h);
	if (rc) {
		refuse(c->fd, rc, rc == -EUSERS ? "too many processes attached" : strerror(-rc));
		return rc;
	}
	fds[0] = p->region_fd;
	fds[1] = p->inbound_fd;
	fds[2] = h->page_ro_fd;
	fds[3] = h->bell_fd;
	rc = send_fds(c->fd, &w, sizeof(w), fds, 4);
	if (rc) {
		host_lock(h);
		host_proc_destroy(h, p);
		host_unlock(h);
		return rc;
	}
	c->kind = CONN_PROC;
	c->proc = p;
	logf_host(h, "process %d (%s) attached", (int)p->pid, p->comm);
	return 0;
}

static void reply(int fd, int rc, uint32_t value)
{
	struct rocemu_host_reply r = {.type = ROCEMU_HOST_REPLY, .rc = rc, .value = value};

	(void)send(fd, &r, sizeof(r), MSG_NOSIGNAL);
}

static void ring_fwd(struct host *h)
{
	atomic_fetch_add(&h->bell->bell, 1);
	syscall(SYS_futex, &h->bell->bell, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* One message on a non-blocking socket, waiting for room in its buffer
 * (at most STAT_SEND_WAIT_MS). 0 or -errno. */
static int send_waiting(int fd, const void *buf, size_t len)
{
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};

		if (send(fd, buf, len, MSG_NOSIGNAL) >= 0)
			return 0;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (errno != EINTR && poll(&pfd, 1, STAT_SEND_WAIT_MS) <= 0)
			return -ETIMEDOUT;
	}
}

static int on_stat(struct host *h, struct conn *c, bool json)
{
	struct {
		uint32_t type;
		char text[STAT_CHUNK];
	} chunk;
	char *text;
	size_t len, off = 0;

	host_lock(h);
	text = host_stat_render(h, json);
	host_unlock(h);
	if (!text)
		return -ENOMEM;
	len = strlen(text);
	chunk.type = ROCEMU_HOST_STAT_CHUNK;
	do {
		size_t n = len - off < STAT_CHUNK ? len - off : STAT_CHUNK;

		memcpy(chunk.text, text + off, n);
		/* the socket is non-blocking: a long answer (thousands of QPs)
		 * fills its buffer before the reader runs, so wait for room */
		if (send_waiting(c->fd, &chunk, sizeof(chunk.type) + n) < 0)
			break;
		off += n;
		if (n == 0)
			break;
	} while (1);
	free(text);
	return 0;
}

/* One message on a connection. <0: close it. */
static int on_message(struct host *h, struct conn *c, const void *buf, ssize_t n)
{
	const struct rocemu_host_request *rq = buf;
	uint32_t type;
	uint32_t qpn = 0;
	int rc;

	if (n < (ssize_t)sizeof(uint32_t))
		return -EPROTO;
	memcpy(&type, buf, sizeof(type));
	if (c->kind == CONN_NEW) {
		if (type == ROCEMU_HOST_HELLO && n == sizeof(struct rocemu_host_hello))
			return on_hello(h, c, buf);
		if (type == ROCEMU_HOST_INFO) {
			struct rocemu_host_welcome w;

			fill_welcome(h, &w);
			c->kind = CONN_OTHER;
			return send(c->fd, &w, sizeof(w), MSG_NOSIGNAL) < 0 ? -errno : 0;
		}
		if (type == ROCEMU_HOST_STAT && n == sizeof(*rq)) {
			c->kind = CONN_OTHER;
			return on_stat(h, c, rq->arg != 0);
		}
		return -EPROTO;
	}
	if (c->kind != CONN_PROC || n != sizeof(*rq))
		return -EPROTO;
	switch (type) {
	case ROCEMU_HOST_QPN_ALLOC:
		host_lock(h);
		rc = host_qpn_alloc(h, c->proc, rq->arg != 0, &qpn);
		host_unlock(h);
		reply(c->fd, rc, qpn);
		return 0;
	case ROCEMU_HOST_QPN_FREE:
		host_lock(h);
		(void)host_qpn_free(h, c->proc, rq->arg);
		host_unlock(h);
		return 0;
	case ROCEMU_HOST_RESOLVE:
		host_lock(h);
		host_resolve_request(h, rq->arg, rq->gid);
		host_unlock(h);
		ring_fwd(h);
		return 0;
	case ROCEMU_HOST_PAIR: {
		struct rocemu_host_reply r = {.type = ROCEMU_HOST_REPLY};
		unsigned ring = 0;
		int fd = -1;

		host_lock(h);
		r.rc = host_pair(h, c->proc, rq->arg, &ring, &fd);
		/* the fd is sent while the owner cannot go (the lock) */
		r.value = ring;
		if (r.rc == 0)
			r.rc = send_fds(c->fd, &r, sizeof(r), &fd, 1) ? -EIO : 0;
		host_unlock(h);
		if (r.rc)
			reply(c->fd, r.rc, 0);
		return 0;
	}
	case ROCEMU_HOST_STAT:
		return on_stat(h, c, rq->arg != 0);
	default:
		return -EPROTO;
	}
}

static void conn_close(struct host *h, int ep, struct conn *c)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	if (c->kind == CONN_PROC && c->proc) {
		logf_host(h, "process %d (%s) gone: %u QPNs released", (int)c->proc->pid,
			  c->proc->comm, c->proc->n_qps);
		host_lock(h);
		host_proc_destroy(h, c->proc);
		host_unlock(h);
	}
	close(c->fd);
	for (unsigned i = 0; i < CTL_MAX_CONNS; i++)
		if (conns[i] == c)
			conns[i] = NULL;
	free(c);
}

static void on_accept(struct host *h, int ep)
{
	socklen_t len = sizeof(struct ucred);
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP};
	struct conn *c;
	unsigned i;
	int fd = accept4(h->ctl_listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	c = calloc(1, sizeof(*c));
	for (i = 0; i < CTL_MAX_CONNS && conns[i]; i++)
		;
	if (!c || i == CTL_MAX_CONNS) {
		refuse(fd, -EUSERS, "too many connections");
		close(fd);
		free(c);
		return;
	}
	c->fd = fd;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->cred, &len) || !allowed(h, &c->cred)) {
		h->procs_refused++;
		logf_host(h, "refused uid %u (pid %d): not allowed", (unsigned)c->cred.uid,
			  (int)c->cred.pid);
		refuse(fd, -EACCES, "this user may not attach (rocemu host --allow-user)");
		close(fd);
		free(c);
		return;
	}
	conns[i] = c;
	ev.data.ptr = c;
	epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

static void *ctl_main(void *arg)
{
	struct host *h = arg;
	struct epoll_event ev = {.events = EPOLLIN}, evs[32];
	union {
		struct rocemu_host_request rq;
		struct rocemu_host_hello hello;
		char raw[512];
	} buf;
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0)
		return NULL;
	ev.data.ptr = &h->ctl_listen_fd;
	epoll_ctl(ep, EPOLL_CTL_ADD, h->ctl_listen_fd, &ev);
	ev.data.ptr = &h->ctl_wake_fd;
	epoll_ctl(ep, EPOLL_CTL_ADD, h->ctl_wake_fd, &ev);
	while (!atomic_load(&h->stop)) {
		int n = epoll_wait(ep, evs, 32, 1000);

		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;
			ssize_t got;

			if (evs[i].data.ptr == &h->ctl_listen_fd) {
				on_accept(h, ep);
				continue;
			}
			if (evs[i].data.ptr == &h->ctl_wake_fd)
				continue;
			got = recv(c->fd, &buf, sizeof(buf), MSG_DONTWAIT);
			if (got < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (got <= 0 || on_message(h, c, &buf, got) < 0)
				conn_close(h, ep, c);
		}
	}
	for (unsigned i = 0; i < CTL_MAX_CONNS; i++)
		if (conns[i])
			conn_close(h, ep, conns[i]);
	close(ep);
	return NULL;
}

/* Bind RUNDIR/ctl.sock: a stale socket of a host that died goes; a live
 * host of the same name is an error. */
int host_ctl_open(struct host *h, char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	bool shared = h->n_allowed_uids || h->n_allowed_gids;
	int fd, probe;

	if (strlen(h->ctl_path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "%s: path too long for a socket", h->ctl_path);
		return -ENAMETOOLONG;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", h->ctl_path);
	probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(probe);
		snprintf(err, errlen, "a rocemu host '%s' is already running (%s)", h->name,
			 h->ctl_path);
		return -EADDRINUSE;
	}
	if (probe >= 0)
		close(probe);
	unlink(h->ctl_path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    chmod(h->ctl_path, shared ? 0666 : 0600) || listen(fd, 128)) {
		int rc = -errno;

		snprintf(err, errlen, "%s: %s", h->ctl_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return rc;
	}
	h->ctl_listen_fd = fd;
	h->ctl_wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return h->ctl_wake_fd < 0 ? -errno : 0;
}

int host_ctl_start(struct host *h)
{
	return -pthread_create(&h->ctl_thread, NULL, ctl_main, h);
}

void host_ctl_stop(struct host *h)
{
	uint64_t one = 1;

	atomic_store(&h->stop, true);
	(void)write(h->ctl_wake_fd, &one, sizeof(one));
	pthread_join(h->ctl_thread, NULL);
	close(h->ctl_listen_fd);
	close(h->ctl_wake_fd);
	h->ctl_listen_fd = h->ctl_wake_fd = -1;
	unlink(h->ctl_path);
}
