/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rpoll and rselect: poll(2)/select(2) over any mix of rsockets and other
 * descriptors. An rsocket's readiness is its protocol state (data to read,
 * room to send, a connection request, the end of the connection), found by
 * processing its completions and CM events; to wait, the caller's thread
 * arms the completion queues and sleeps in poll() on their completion
 * channels, the CM event channels, the other descriptors and the
 * process-wide signal (rsocket_int.h).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>

#include <rdma/rsocket.h>

#include "cma.h"
#include "rsocket_int.h"

/* Before sleeping, look again for this long: a reply often comes sooner
 * than a sleep and wake-up would take (rdma-core polls 10 us). */
#define RS_POLL_SPIN_NS 20000ull

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Readiness of an rsocket (lock held, after rs_progress). */
static short rs_revents(struct rsocket *rs, short events)
{
	short r = 0;

	switch (rs->state) {
	case RS_LISTENING:
		/* a connection request is queued */
		return rs_channel_has_event(rs->ch) ? events & POLLIN : 0;
	case RS_CONNECTED:
	case RS_DISCONNECTED:
		if ((events & POLLIN) && (rs_stream_have_data(&rs->s) || !rs->s.readable))
			r |= POLLIN;
		if ((events & POLLOUT) && rs_stream_can_send(&rs->s))
			r |= POLLOUT;
		/* The end shows once what arrived before it has been read. */
		if (rs->state == RS_DISCONNECTED && !rs_stream_have_data(&rs->s))
			r |= POLLHUP;
		return r;
	case RS_ERROR:
		return POLLERR | (events & (POLLIN | POLLOUT));
	default:
		return 0;
	}
}

static short rs_check(struct rsocket *rs, short events)
{
	pthread_mutex_lock(&rs->lock);
	rs_progress(rs);
	short r = rs_revents(rs, events);
	pthread_mutex_unlock(&rs->lock);
	return r;
}

/* One look at every descriptor, without waiting. */
static int poll_check(struct pollfd *fds, nfds_t nfds)
{
	int cnt = 0;

	for (nfds_t i = 0; i < nfds; i++) {
		struct rsocket *rs = rs_lookup(fds[i].fd);
		if (rs) {
			fds[i].revents = rs_check(rs, fds[i].events);
		} else {
			fds[i].revents = 0;
			if (poll(&fds[i], 1, 0) < 0)
				return -1;
		}
		if (fds[i].revents)
			cnt++;
	}
	return cnt;
}

int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	uint64_t start = now_ns();
	struct pollfd *w = NULL;
	unsigned *first = NULL;
	int rc;

	for (;;) {
		rc = poll_check(fds, nfds);
		if (rc || timeout == 0)
			break;
		uint64_t spent = now_ns() - start;
		if (spent < RS_POLL_SPIN_NS)
			continue;
		if (timeout > 0 && spent >= (uint64_t)timeout * 1000000ull)
			break;
		/* Arm and gather what to sleep on: per rsocket its completion
		 * channel and CM channel, else the descriptor itself. */
		if (!w) {
			w = calloc(2 * nfds + 1, sizeof(*w));
			first = calloc(nfds + 1, sizeof(*first));
			if (!w || !first) {
				rc = rs_fail(ENOMEM);
				break;
			}
		}
		unsigned n = 0;
		for (nfds_t i = 0; i < nfds; i++) {
			struct rsocket *rs = rs_lookup(fds[i].fd);
			first[i] = n;
			if (rs) {
				pthread_mutex_lock(&rs->lock);
				n += (unsigned)rs_wait_fds(rs, &w[n]);
				pthread_mutex_unlock(&rs->lock);
			} else {
				w[n++] = (struct pollfd){.fd = fds[i].fd, .events = fds[i].events};
			}
		}
		first[nfds] = n;
		/* what completed before arming raised no event */
		rc = poll_check(fds, nfds);
		if (rc)
			break;
		w[n] = (struct pollfd){.fd = rs_signal_fd(), .events = POLLIN};
		int left = -1;
		if (timeout > 0) {
			uint64_t ms = (now_ns() - start) / 1000000ull;
			left = ms >= (uint64_t)timeout ? 0 : timeout - (int)ms;
		}
		rs_blocked_enter();
		int r = poll(w, n + 1, left);
		rs_blocked_exit();
		if (r < 0) {
			rc = -1;
			break;
		}
		for (nfds_t i = 0; i < nfds; i++) {
			struct rsocket *rs = rs_lookup(fds[i].fd);
			if (!rs)
				continue;
			pthread_mutex_lock(&rs->lock);
			rs_wait_done(rs, &w[first[i]], (int)(first[i + 1] - first[i]));
			pthread_mutex_unlock(&rs->lock);
		}
		if (r == 0 && left == 0)
			break;
	}
	free(w);
	free(first);
	return rc;
}
ROCEMU_PUBLIC(rpoll)

int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, struct timeval *timeout)
{
	if (nfds < 0 || nfds > FD_SETSIZE)
		return rs_fail(EINVAL);
	struct pollfd *fds = calloc((size_t)nfds + 1, sizeof(*fds));
	nfds_t n = 0;

	if (!fds)
		return rs_fail(ENOMEM);
	for (int fd = 0; fd < nfds; fd++) {
		short ev = 0;
		bool any = false;
		if (readfds && FD_ISSET(fd, readfds)) {
			ev |= POLLIN;
			any = true;
		}
		if (writefds && FD_ISSET(fd, writefds)) {
			ev |= POLLOUT;
			any = true;
		}
		if (exceptfds && FD_ISSET(fd, exceptfds))
			any = true;
		if (any)
			fds[n++] = (struct pollfd){.fd = fd, .events = ev};
	}
	int ms = timeout ? (int)(timeout->tv_sec * 1000 + timeout->tv_usec / 1000) : -1;
	int rc = rpoll(fds, n, ms);
	if (readfds)
		FD_ZERO(readfds);
	if (writefds)
		FD_ZERO(writefds);
	if (exceptfds)
		FD_ZERO(exceptfds);
	if (rc > 0) {
		rc = 0;
		for (nfds_t i = 0; i < n; i++) {
			if (readfds && (fds[i].revents & (POLLIN | POLLHUP))) {
				FD_SET(fds[i].fd, readfds);
				rc++;
			}
			if (writefds && (fds[i].revents & POLLOUT)) {
				FD_SET(fds[i].fd, writefds);
				rc++;
			}
			if (exceptfds && (fds[i].revents & ~(POLLIN | POLLOUT))) {
				FD_SET(fds[i].fd, exceptfds);
				rc++;
			}
		}
	}
	free(fds);
	return rc;
}
ROCEMU_PUBLIC(rselect)
