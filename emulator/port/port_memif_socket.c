/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memif's socket, seen from outside the PMD (as DPDK keeps its own control
 * channel in memif_socket.c): whether a server listens on a path (in
 * /proc/net/unix, without connecting), the process's memif devices per path,
 * the server's listening socket that DPDK 22.11 leaves bound at close, and
 * running a call on EAL's interrupt thread, where the PMD handles its
 * connections.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <rte_alarm.h>
#include <rte_common.h>
#include <rte_interrupts.h>

#include "port_memif.h"

/*
 * Is a memif server listening on path (an abstract SOCK_SEQPACKET socket,
 * shown as "@path" in /proc/net/unix)? 1 yes, 0 no, -errno when we cannot
 * tell. Looking costs nothing to the server, unlike a connection attempt
 * (which the PMD would take for a client, and log).
 */
int memif_listening(const char *path)
{
	FILE *f = fopen("/proc/net/unix", "re");
	char line[1024];
	int found = 0;

	if (!f)
		return -errno;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned flags, type, st;
		int off = 0;
		char *p;

		if (sscanf(line, "%*s %*x %*x %x %x %x %*u %n", &flags, &type, &st, &off) != 3 ||
		    !off)
			continue;
		p = line + off;
		p[strcspn(p, "\n")] = 0;
		/* __SO_ACCEPTCON: a listening socket */
		found = type == SOCK_SEQPACKET && (flags & 0x10000) && p[0] == '@' &&
			!strcmp(p + 1, path);
	}
	fclose(f);
	return found;
}

/* ------------------------------------------------------------------------ */
/* EAL's interrupt thread, and the server's listening socket.               */

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
void memif_run_on_intr_thread(void (*fn)(void *), void *arg)
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

/* fd is a listening AF_UNIX SOCK_SEQPACKET socket bound to "\0path". */
static bool is_listener(int fd, const char *path)
{
	struct sockaddr_un a;
	socklen_t len = sizeof(a), ol;
	int v;
	size_t n = strlen(path);

	ol = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &ol) || v != AF_UNIX)
		return false;
	ol = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &ol) || v != SOCK_SEQPACKET)
		return false;
	ol = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &ol) || !v)
		return false;
	if (getsockname(fd, (struct sockaddr *)&a, &len) ||
	    len != offsetof(struct sockaddr_un, sun_path) + 1 + n)
		return false;
	return a.sun_path[0] == 0 && !memcmp(a.sun_path + 1, path, n);
}

/* The PMD's listening socket for path, among our descriptors, or -1. */
int memif_find_listener(const char *path)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int fd = -1;

	if (!d)
		return -1;
	while (fd < 0 && (e = readdir(d))) {
		char *end;
		long v = strtol(e->d_name, &end, 10);

		if (*end || end == e->d_name || v == dirfd(d))
			continue;
		if (is_listener((int)v, path))
			fd = (int)v;
	}
	closedir(d);
	return fd;
}

static pthread_once_t placeholder_once = PTHREAD_ONCE_INIT;
static int placeholder_fd = -1;

static void placeholder_open(void)
{
	placeholder_fd = eventfd(0, EFD_CLOEXEC);
}

/*
 * DPDK 22.11's memif PMD, removing the last device of a socket path, frees
 * its bookkeeping but neither closes the server's listening socket nor
 * unregisters its interrupt callback: the abstract name stays bound for the
 * life of the process (a second open of the same server failed with
 * "Address already in use", then EPERM), and a client connecting to it
 * later made the callback run on freed memory. So before the last memif
 * device of a path in this process goes, on the interrupt thread, the
 * listening descriptor is made to point at an eventfd that is never
 * written: the socket is released (its name freed, no client can connect),
 * and the callback, still registered under that number, never fires. The
 * number stays taken: one descriptor per server path closed in the
 * process. (While another device of the path stays, the PMD keeps using
 * the socket, and a new server of the path joins it.)
 */
void memif_forget_listener(void *arg)
{
	struct memif_link *l = arg;
	int fd = memif_find_listener(l->path);

	pthread_once(&placeholder_once, placeholder_open);
	if (fd >= 0 && placeholder_fd >= 0)
		dup3(placeholder_fd, fd, O_CLOEXEC);
}

/*
 * The memif devices of this process by socket path (the PMD keeps one
 * socket per path for all of them): whether a path already has a server
 * here, and whether a device is the path's last.
 */
static pthread_mutex_t users_lock = PTHREAD_MUTEX_INITIALIZER;
static struct memif_link *users[64];

/* Count the users of path: servers in *servers, all in the return value. */
static unsigned users_of(const char *path, unsigned *servers)
{
	unsigned n = 0;

	*servers = 0;
	for (unsigned i = 0; i < RTE_DIM(users); i++)
		if (users[i] && !strcmp(users[i]->path, path)) {
			n++;
			*servers += !users[i]->client;
		}
	return n;
}

/* Join the path's users; -EADDRINUSE when l is a server and the path has
 * one here already, -ENOSPC when the table is full. */
int memif_users_join(struct memif_link *l)
{
	unsigned servers, slot = RTE_DIM(users);
	int rc = 0;

	pthread_mutex_lock(&users_lock);
	users_of(l->path, &servers);
	for (unsigned i = 0; i < RTE_DIM(users) && slot == RTE_DIM(users); i++)
		if (!users[i])
			slot = i;
	if (!l->client && servers)
		rc = -EADDRINUSE;
	else if (slot == RTE_DIM(users))
		rc = -ENOSPC;
	else
		users[slot] = l;
	l->registered = rc == 0;
	pthread_mutex_unlock(&users_lock);
	return rc;
}

/* Leave; true when l was the path's last user in this process. */
bool memif_users_leave(struct memif_link *l)
{
	unsigned servers, left;

	if (!l->registered)
		return false;
	pthread_mutex_lock(&users_lock);
	for (unsigned i = 0; i < RTE_DIM(users); i++)
		if (users[i] == l)
			users[i] = NULL;
	left = users_of(l->path, &servers);
	pthread_mutex_unlock(&users_lock);
	l->registered = false;
	return left == 0;
}
