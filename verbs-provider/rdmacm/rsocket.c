/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rsockets (rsocket.h, rsocket(7)): stream sockets over RC queue pairs,
 * connected through rocemu's rdma_cm and speaking rdma-core's rsocket
 * protocol version 1 (docs/rdmacm.md, "rsockets"). This file: the socket
 * table, socket calls (rsocket, rbind, rlisten, raccept, rconnect,
 * rshutdown, rclose, names), connection set-up driven by CM events, and the
 * options. The data path is in rsocket_io.c, rpoll/rselect in
 * rsocket_poll.c. Datagram rsockets are not implemented (EOPNOTSUPP).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <rdma/rsocket.h>

#include "cma.h"
#include "rsocket_int.h"

#define RS_DEF_QSIZE  384
#define RS_DEF_MEM    (1u << 17)
#define RS_DEF_INLINE 64
#define RS_MAX_MEM    (1u << 30)
#define RS_QP_MIN     16
#define RS_QP_MAX     0xfffe
/* rshutdown waits this long for the send queue to drain. */
#define RS_SHUTDOWN_WAIT_MS 10000

/* ------------------------------------------------------------------------ */
/* The socket table: index (an fd number) -> rsocket. Two levels, pages made
 * on demand and never freed, so a lookup needs no lock. */

#define RS_PAGE_BITS 10
#define RS_PAGES     1024
static struct rsocket **_Atomic rs_pages[RS_PAGES];
static pthread_mutex_t rs_table_lock = PTHREAD_MUTEX_INITIALIZER;

int rs_fail(int err)
{
	errno = err;
	return -1;
}

struct rsocket *rs_lookup(int index)
{
	if (index < 0 || (unsigned)index >= RS_PAGES << RS_PAGE_BITS)
		return NULL;
	struct rsocket **page = atomic_load(&rs_pages[index >> RS_PAGE_BITS]);
	if (!page)
		return NULL;
	return __atomic_load_n(&page[index & ((1 << RS_PAGE_BITS) - 1)], __ATOMIC_ACQUIRE);
}

static int rs_table_set(int index, struct rsocket *rs)
{
	if (index < 0 || (unsigned)index >= RS_PAGES << RS_PAGE_BITS)
		return -EMFILE;
	pthread_mutex_lock(&rs_table_lock);
	struct rsocket **page = atomic_load(&rs_pages[index >> RS_PAGE_BITS]);
	if (!page) {
		page = calloc(1u << RS_PAGE_BITS, sizeof(*page));
		if (!page) {
			pthread_mutex_unlock(&rs_table_lock);
			return -ENOMEM;
		}
		atomic_store(&rs_pages[index >> RS_PAGE_BITS], page);
	}
	__atomic_store_n(&page[index & ((1 << RS_PAGE_BITS) - 1)], rs, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&rs_table_lock);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Sockets                                                                    */

static struct rsocket *rs_alloc(const struct rsocket *parent)
{
	struct rsocket *rs = calloc(1, sizeof(*rs));

	if (!rs)
		return NULL;
	pthread_mutex_init(&rs->lock, NULL);
	rs->index = -1;
	if (parent) {
		rs->opt = parent->opt;
	} else {
		rs->opt.sbuf_size = rs->opt.rbuf_size = RS_DEF_MEM;
		rs->opt.sq_size = rs->opt.rq_size = RS_DEF_QSIZE;
		rs->opt.sq_inline = RS_DEF_INLINE;
	}
	return rs;
}

/* A fresh CM event channel whose fd becomes the socket number. */
static int rs_open_channel(struct rsocket *rs)
{
	rs->ch = rdma_create_event_channel();
	if (!rs->ch)
		return -errno;
	int fl = fcntl(rs->ch->fd, F_GETFL);
	if (fl < 0 || fcntl(rs->ch->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	rs->index = rs->ch->fd;
	return 0;
}

static void rs_free(struct rsocket *rs)
{
	if (rs->index >= 0 && rs_lookup(rs->index) == rs)
		rs_table_set(rs->index, NULL);
	rs_free_ep(rs);
	if (rs->id)
		rdma_destroy_id(rs->id);
	if (rs->ch)
		rdma_destroy_event_channel(rs->ch);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
}

int rsocket(int domain, int type, int protocol)
{
	int nonblock = type & SOCK_NONBLOCK;

	type &= ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	/* Checked before anything is opened: librspreload calls this for every
	 * socket() of the program, the engine's own sockets included. */
	if (domain != AF_INET && domain != AF_INET6)
		return rs_fail(EAFNOSUPPORT);
	if (type != SOCK_STREAM || (protocol && protocol != IPPROTO_TCP))
		return rs_fail(EOPNOTSUPP); /* datagram rsockets: not implemented */
	struct rsocket *rs = rs_alloc(NULL);
	if (!rs)
		return rs_fail(ENOMEM);
	int rc = rs_open_channel(rs);
	if (!rc && rdma_create_id(rs->ch, &rs->id, rs, RDMA_PS_TCP))
		rc = -errno;
	if (!rc) {
		rs->id->route.addr.src_addr.sa_family = (sa_family_t)domain;
		rs->fd_flags = nonblock ? O_NONBLOCK : 0;
		rc = rs_table_set(rs->index, rs);
	}
	if (rc) {
		rs_free(rs);
		return rs_fail(-rc);
	}
	return rs->index;
}
ROCEMU_PUBLIC(rsocket)

static bool addr_ok(const struct sockaddr *addr, socklen_t len)
{
	if (!addr)
		return false;
	if (addr->sa_family == AF_INET)
		return len >= sizeof(struct sockaddr_in);
	if (addr->sa_family == AF_INET6)
		return len >= sizeof(struct sockaddr_in6);
	return false;
}

int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rsocket *rs = rs_lookup(socket);

	if (!rs)
		return rs_fail(EBADF);
	if (!addr_ok(addr, addrlen))
		return rs_fail(addr && addr->sa_family != AF_INET && addr->sa_family != AF_INET6
				   ? EAFNOSUPPORT
				   : EINVAL);
	pthread_mutex_lock(&rs->lock);
	int rc = rs->state == RS_INIT ? rdma_bind_addr(rs->id, (struct sockaddr *)addr)
				      : rs_fail(EINVAL);
	if (!rc)
		rs->state = RS_BOUND;
	pthread_mutex_unlock(&rs->lock);
	return rc;
}
ROCEMU_PUBLIC(rbind)

int rlisten(int socket, int backlog)
{
	struct rsocket *rs = rs_lookup(socket);

	if (!rs)
		return rs_fail(EBADF);
	pthread_mutex_lock(&rs->lock);
	int rc = 0;
	if (rs->state != RS_LISTENING) {
		if (rs->state != RS_INIT && rs->state != RS_BOUND)
			rc = rs_fail(EINVAL);
		else
			rc = rdma_listen(rs->id, backlog);
		if (!rc)
			rs->state = RS_LISTENING;
	}
	pthread_mutex_unlock(&rs->lock);
	return rc;
}
ROCEMU_PUBLIC(rlisten)

static void rs_copy_addr(struct sockaddr *dst, socklen_t *len, const struct sockaddr *src)
{
	socklen_t size =
	    src->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	if (dst && len) {
		memcpy(dst, src, *len < size ? *len : size);
		*len = size;
	}
}

/* The passive side of one CONNECT_REQUEST (listener lock held): a new
 * rsocket on its own channel, its QP and buffers, the peer's connection
 * data checked and ours sent in the REP. Returns the new socket or NULL
 * (the request is rejected). */
static struct rsocket *rs_accept_request(struct rsocket *l, struct rdma_cm_event *ev)
{
	struct rdma_cm_id *id = ev->id;
	struct rdma_conn_param param = ev->param.conn;
	struct rs_conn peer;
	uint8_t pdata[RS_CONN_DATA_LEN];
	int rc = rs_conn_get(param.private_data, param.private_data_len, &peer);

	rdma_ack_cm_event(ev);
	if (rc) {
		RS_COUNT(conn_bad_data);
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return NULL;
	}
	struct rsocket *rs = rs_alloc(l);
	if (!rs || rs_open_channel(rs) || rdma_migrate_id(id, rs->ch)) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		if (rs)
			rs_free(rs);
		return NULL;
	}
	rs->id = id; /* from here on rs_free destroys it: a REJ or DREQ goes out */
	id->context = rs;
	rs->fd_flags = l->fd_flags & O_NONBLOCK;
	if (rs_create_ep(rs)) {
		rdma_reject(id, NULL, 0);
		rs_free(rs);
		return NULL;
	}
	rs_stream_peer_conn(&rs->s, &peer);
	struct rs_conn ours;
	rs_stream_local_conn(&rs->s, &ours);
	rs_conn_put(pdata, &ours);
	param.private_data = pdata;
	param.private_data_len = sizeof(pdata);
	param.rnr_retry_count = 7;
	rs->state = RS_ACCEPTING;
	if (rdma_accept(id, &param) || rs_table_set(rs->index, rs)) {
		rs_free(rs);
		return NULL;
	}
	return rs;
}

int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsocket *l = rs_lookup(socket);
	struct rsocket *rs = NULL;
	int rc = 0;

	if (!l)
		return rs_fail(EBADF);
	pthread_mutex_lock(&l->lock);
	while (!rs) {
		struct rdma_cm_event *ev;
		if (l->state != RS_LISTENING) {
			rc = EINVAL;
			break;
		}
		if (rdma_get_cm_event(l->ch, &ev) == 0) {
			if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
				rs = rs_accept_request(l, ev);
			else
				rdma_ack_cm_event(ev);
			continue;
		}
		if (errno != EAGAIN) {
			rc = errno;
			break;
		}
		if (l->fd_flags & O_NONBLOCK) {
			rc = EAGAIN;
			break;
		}
		rs_block(l, -1);
	}
	pthread_mutex_unlock(&l->lock);
	if (!rs)
		return rs_fail(rc);
	rs_copy_addr(addr, addrlen, rdma_get_peer_addr(rs->id));
	return rs->index;
}
ROCEMU_PUBLIC(raccept)

static int cm_status_errno(const struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_REJECTED:
		return ECONNREFUSED;
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return ev->status < 0 ? -ev->status : ETIMEDOUT;
	default:
		return ECONNRESET;
	}
}

/* The active side's steps, one per CM event (lock held). */
static void rs_active_event(struct rsocket *rs, struct rdma_cm_event *ev)
{
	struct rs_conn conn;
	uint8_t pdata[RS_CONN_DATA_LEN];

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(rs->id, 2000))
			rs_set_error(rs, errno);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED: {
		int rc = rs_create_ep(rs);
		if (rc) {
			rs_set_error(rs, -rc);
			break;
		}
		rs_stream_local_conn(&rs->s, &conn);
		rs_conn_put(pdata, &conn);
		struct rdma_conn_param p = {.private_data = pdata,
					    .private_data_len = sizeof(pdata),
					    .flow_control = 1,
					    .retry_count = 7,
					    .rnr_retry_count = 7};
		if (rdma_connect(rs->id, &p))
			rs_set_error(rs, errno);
		break;
	}
	case RDMA_CM_EVENT_ESTABLISHED:
		if (rs_conn_get(ev->param.conn.private_data, ev->param.conn.private_data_len,
				&conn)) {
			RS_COUNT(conn_bad_data);
			rs_set_error(rs, ECONNREFUSED);
			break;
		}
		rs_stream_peer_conn(&rs->s, &conn);
		rs->state = RS_CONNECTED;
		break;
	default:
		rs_set_error(rs, cm_status_errno(ev));
		break;
	}
}

/* Whether an event waits on ch: a look at the queue (cma.h) instead of an
 * rdma_get_cm_event that finds none, which costs an fcntl each time (a
 * non-blocking rrecv loop asks on every call). */
bool rs_channel_has_event(struct rdma_event_channel *ch)
{
	struct cma_channel *c = (struct cma_channel *)ch;

	pthread_mutex_lock(&cma_lock);
	bool any = c->head != NULL;
	pthread_mutex_unlock(&cma_lock);
	return any;
}

void rs_cm_events(struct rsocket *rs)
{
	struct rdma_cm_event *ev;

	if (rs->state == RS_LISTENING)
		return; /* its events are requests, taken by raccept */
	if (!rs_channel_has_event(rs->ch))
		return;
	while (rdma_get_cm_event(rs->ch, &ev) == 0) {
		switch (rs->state) {
		case RS_RESOLVING:
			rs_active_event(rs, ev);
			break;
		case RS_ACCEPTING:
			if (ev->event == RDMA_CM_EVENT_ESTABLISHED)
				rs->state = RS_CONNECTED;
			else
				rs_set_error(rs, cm_status_errno(ev));
			break;
		case RS_CONNECTED:
			if (ev->event == RDMA_CM_EVENT_DISCONNECTED) {
				/* The peer went away without a DISCONNECT message. */
				rs->state = RS_DISCONNECTED;
				rs->s.readable = rs->s.writable = false;
			}
			break;
		default:
			break;
		}
		rdma_ack_cm_event(ev);
	}
}

/* Until the connection is up (or failed): lock held. */
static int rs_wait_connected(struct rsocket *rs, bool nonblock)
{
	for (;;) {
		rs_progress(rs);
		if (rs->state == RS_CONNECTED || rs->state == RS_DISCONNECTED)
			return 0;
		if (rs->state == RS_ERROR)
			return -rs->err;
		if (rs->state != RS_RESOLVING && rs->state != RS_ACCEPTING)
			return -ENOTCONN;
		if (nonblock)
			return -EINPROGRESS;
		rs_block(rs, -1);
	}
}

int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rsocket *rs = rs_lookup(socket);

	if (!rs)
		return rs_fail(EBADF);
	pthread_mutex_lock(&rs->lock);
	int rc = 0;
	switch (rs->state) {
	case RS_INIT:
	case RS_BOUND:
		if (!addr_ok(addr, addrlen)) {
			rc = -EINVAL;
			break;
		}
		rs->state = RS_RESOLVING;
		if (rdma_resolve_addr(rs->id, NULL, (struct sockaddr *)addr, 2000)) {
			rs_set_error(rs, errno);
			rc = -rs->err;
			break;
		}
		rc = rs_wait_connected(rs, rs->fd_flags & O_NONBLOCK);
		break;
	case RS_RESOLVING:
	case RS_ACCEPTING:
		rc = rs_wait_connected(rs, rs->fd_flags & O_NONBLOCK);
		if (rc == -EINPROGRESS)
			rc = -EALREADY;
		break;
	case RS_CONNECTED:
		break;
	case RS_ERROR:
		rc = -rs->err;
		break;
	default:
		rc = -EINVAL;
	}
	pthread_mutex_unlock(&rs->lock);
	return rc ? rs_fail(-rc) : 0;
}
ROCEMU_PUBLIC(rconnect)

int rshutdown(int socket, int how)
{
	struct rsocket *rs = rs_lookup(socket);

	if (!rs)
		return rs_fail(EBADF);
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return rs_fail(EINVAL);
	pthread_mutex_lock(&rs->lock);
	int rc = 0;
	if (rs->state == RS_CONNECTED) {
		struct rs_stream *s = &rs->s;
		int ctrl = -1;
		rs_progress(rs);
		if (how == SHUT_RDWR) {
			ctrl = RS_CTRL_DISCONNECT;
			s->readable = s->writable = false;
		} else if (how == SHUT_WR) {
			s->writable = false;
			ctrl = s->readable ? RS_CTRL_SHUTDOWN : RS_CTRL_DISCONNECT;
		} else {
			s->readable = false;
			if (!s->writable)
				ctrl = RS_CTRL_DISCONNECT;
		}
		/* Graceful: the message goes after everything sent, and we wait
		 * for the send queue to drain (as rdma-core does, blocking) --
		 * but not forever: a peer that never posts a receive leaves our
		 * sends in RNR retries. */
		if (ctrl >= 0 && rs->state == RS_CONNECTED)
			rc = rs_send_ctrl(rs, (enum rs_ctrl)ctrl, RS_SHUTDOWN_WAIT_MS);
		if (rs->state == RS_CONNECTED &&
		    rs_drain_sends(rs, RS_SHUTDOWN_WAIT_MS) == -ETIMEDOUT && how == SHUT_RDWR) {
			rs->state = RS_DISCONNECTED;
			rc = 0;
		}
		if (rc == -ETIMEDOUT && how == SHUT_RDWR) {
			rs->state = RS_DISCONNECTED;
			rc = 0;
		}
	}
	if (rs->state == RS_DISCONNECTED && rs->id)
		rdma_disconnect(rs->id); /* QP to error, DREQ */
	pthread_mutex_unlock(&rs->lock);
	return rc ? rs_fail(-rc) : 0;
}
ROCEMU_PUBLIC(rshutdown)

int rclose(int socket)
{
	struct rsocket *rs = rs_lookup(socket);

	if (!rs)
		return rs_fail(EBADF);
	if (rs->state == RS_CONNECTED)
		rshutdown(socket, SHUT_RDWR);
	rs_keepalive_remove(rs);
	rs_free(rs);
	return 0;
}
ROCEMU_PUBLIC(rclose)

int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsocket *rs = rs_lookup(socket);

	if (!rs)
		return rs_fail(EBADF);
	if (!addr || !addrlen)
		return rs_fail(EFAULT);
	if (rs->state < RS_RESOLVING || rs->state == RS_LISTENING)
		return rs_fail(ENOTCONN);
	rs_copy_addr(addr, addrlen, rdma_get_peer_addr(rs->id));
	return 0;
}
ROCEMU_PUBLIC(rgetpeername)

int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsocket *rs = rs_lookup(socket);

	if (!rs)
		return rs_fail(EBADF);
	if (!addr || !addrlen)
		return rs_fail(EFAULT);
	rs_copy_addr(addr, addrlen, rdma_get_local_addr(rs->id));
	return 0;
}
ROCEMU_PUBLIC(rgetsockname)

/* ------------------------------------------------------------------------ */
/* Options                                                                    */

static int opt_int(const void *optval, socklen_t optlen, int *v)
{
	if (!optval || optlen < sizeof(int))
		return -EINVAL;
	memcpy(v, optval, sizeof(int));
	return 0;
}

static void opt_flag(uint64_t *opts, int optname, int on)
{
	if (optname < 0 || optname >= 64)
		return;
	if (on)
		*opts |= 1ull << optname;
	else
		*opts &= ~(1ull << optname);
}

static int set_sol_socket(struct rsocket *rs, int optname, const void *optval, socklen_t optlen)
{
	int v = 0;

	if (optname == SO_LINGER) {
		struct linger lg;
		if (!optval || optlen < sizeof(lg))
			return -EINVAL;
		memcpy(&lg, optval, sizeof(lg));
		opt_flag(&rs->opt.so_opts, SO_LINGER, !lg.l_onoff); /* inverted: on by default */
		return 0;
	}
	if (opt_int(optval, optlen, &v))
		return -EINVAL;
	switch (optname) {
	case SO_REUSEADDR:
		rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &v, sizeof(v));
		opt_flag(&rs->opt.so_opts, optname, v);
		return 0;
	case SO_RCVBUF:
		/* Like TCP, the buffer is twice the value asked for. */
		if (!rs->rbuf && v > 0)
			rs->opt.rbuf_size =
			    (uint32_t)v > RS_MAX_MEM / 2 ? RS_MAX_MEM : (uint32_t)v << 1;
		return 0;
	case SO_SNDBUF:
		if (!rs->sbuf && v > 0)
			rs->opt.sbuf_size =
			    (uint32_t)v > RS_MAX_MEM / 2 ? RS_MAX_MEM : (uint32_t)v << 1;
		return 0;
	case SO_KEEPALIVE:
		rs->keepalive = v != 0;
		opt_flag(&rs->opt.so_opts, optname, v);
		return rs_keepalive_update(rs);
	case SO_OOBINLINE:
		opt_flag(&rs->opt.so_opts, optname, v);
		return 0;
	default:
		return -EOPNOTSUPP;
	}
}

static int set_sol_rdma(struct rsocket *rs, int optname, const void *optval, socklen_t optlen)
{
	int v = 0;

	if (rs->state >= RS_RESOLVING && rs->state != RS_LISTENING)
		return -EINVAL; /* the queue pair exists */
	if (optname == RDMA_ROUTE)
		return 0; /* the path is the GID pair: nothing to choose */
	if (opt_int(optval, optlen, &v) || v < 0)
		return -EINVAL;
	switch (optname) {
	case RDMA_SQSIZE:
		rs->opt.sq_size = (uint16_t)(v > RS_QP_MAX ? RS_QP_MAX : v);
		return 0;
	case RDMA_RQSIZE:
		rs->opt.rq_size = (uint16_t)(v > RS_QP_MAX ? RS_QP_MAX : v);
		return 0;
	case RDMA_INLINE:
		rs->opt.sq_inline = (uint32_t)(v > RS_QP_MAX ? RS_QP_MAX : v);
		return 0;
	case RDMA_IOMAPSIZE:
		/* only sizes the connection data can say */
		rs->opt.iomap_size = rs_scale_to_value(rs_value_to_scale((unsigned)v));
		return 0;
	default:
		return -EOPNOTSUPP;
	}
}

int rsetsockopt(int socket, int level, int optname, const void *optval, socklen_t optlen)
{
	struct rsocket *rs = rs_lookup(socket);
	int rc = -EOPNOTSUPP, v = 0;

	if (!rs)
		return rs_fail(EBADF);
	pthread_mutex_lock(&rs->lock);
	switch (level) {
	case SOL_SOCKET:
		rc = set_sol_socket(rs, optname, optval, optlen);
		break;
	case IPPROTO_TCP:
		if (opt_int(optval, optlen, &v)) {
			rc = -EINVAL;
			break;
		}
		switch (optname) {
		case TCP_NODELAY:
			opt_flag(&rs->opt.tcp_opts, optname, v);
			rc = 0;
			break;
		case TCP_KEEPIDLE:
			if (v <= 0) {
				rc = -EINVAL;
				break;
			}
			rs->opt.keepalive_s = (unsigned)v;
			rc = rs_keepalive_update(rs);
			break;
		case TCP_KEEPCNT:
		case TCP_KEEPINTVL:
		case TCP_MAXSEG:
			rc = 0; /* a reliable connection: nothing to tune */
			break;
		}
		break;
	case IPPROTO_IPV6:
		if (optname == IPV6_V6ONLY && !opt_int(optval, optlen, &v)) {
			rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &v,
					sizeof(v));
			opt_flag(&rs->ipv6_opts, optname, v);
			rc = 0;
		}
		break;
	case SOL_RDMA:
		rc = set_sol_rdma(rs, optname, optval, optlen);
		break;
	}
	pthread_mutex_unlock(&rs->lock);
	return rc ? rs_fail(-rc) : 0;
}
ROCEMU_PUBLIC(rsetsockopt)

static int put_int(void *optval, socklen_t *optlen, int v)
{
	if (!optval || !optlen || *optlen < sizeof(int))
		return -EINVAL;
	memcpy(optval, &v, sizeof(v));
	*optlen = sizeof(v);
	return 0;
}

int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{
	struct rsocket *rs = rs_lookup(socket);
	int rc = -EOPNOTSUPP;

	if (!rs)
		return rs_fail(EBADF);
	pthread_mutex_lock(&rs->lock);
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_REUSEADDR:
		case SO_KEEPALIVE:
		case SO_OOBINLINE:
			rc = put_int(optval, optlen, !!(rs->opt.so_opts & (1ull << optname)));
			break;
		case SO_RCVBUF:
			rc = put_int(optval, optlen, (int)rs->opt.rbuf_size);
			break;
		case SO_SNDBUF:
			rc = put_int(optval, optlen, (int)rs->opt.sbuf_size);
			break;
		case SO_ERROR:
			rc = put_int(optval, optlen, rs->err);
			if (!rc)
				rs->err = 0;
			break;
		case SO_TYPE:
			rc = put_int(optval, optlen, SOCK_STREAM);
			break;
		case SO_LINGER:
			if (optval && optlen && *optlen >= sizeof(struct linger)) {
				struct linger lg = {.l_onoff =
							!(rs->opt.so_opts & (1ull << SO_LINGER))};
				memcpy(optval, &lg, sizeof(lg));
				*optlen = sizeof(lg);
				rc = 0;
			} else {
				rc = -EINVAL;
			}
			break;
		}
		break;
	case IPPROTO_TCP:
		switch (optname) {
		case TCP_NODELAY:
			rc = put_int(optval, optlen, !!(rs->opt.tcp_opts & (1ull << optname)));
			break;
		case TCP_KEEPIDLE:
			rc = put_int(optval, optlen, (int)rs->opt.keepalive_s);
			break;
		case TCP_KEEPCNT:
		case TCP_KEEPINTVL:
			rc = put_int(optval, optlen, 1);
			break;
		case TCP_MAXSEG:
			rc =
			    put_int(optval, optlen,
				    rs->id->route.num_paths ? 1 << (7 + rs->id->route.path_rec->mtu)
							    : 2048);
			break;
		}
		break;
	case IPPROTO_IPV6:
		if (optname == IPV6_V6ONLY)
			rc = put_int(optval, optlen, !!(rs->ipv6_opts & (1ull << optname)));
		break;
	case SOL_RDMA:
		switch (optname) {
		case RDMA_SQSIZE:
			rc = put_int(optval, optlen, rs->opt.sq_size);
			break;
		case RDMA_RQSIZE:
			rc = put_int(optval, optlen, rs->opt.rq_size);
			break;
		case RDMA_INLINE:
			rc = put_int(optval, optlen, (int)rs->opt.sq_inline);
			break;
		case RDMA_IOMAPSIZE:
			rc = put_int(optval, optlen, (int)rs->opt.iomap_size);
			break;
		}
		break;
	}
	pthread_mutex_unlock(&rs->lock);
	return rc ? rs_fail(-rc) : 0;
}
ROCEMU_PUBLIC(rgetsockopt)

int rfcntl(int socket, int cmd, ... /* arg */)
{
	struct rsocket *rs = rs_lookup(socket);
	va_list ap;
	int rc = 0;

	if (!rs)
		return rs_fail(EBADF);
	va_start(ap, cmd);
	switch (cmd) {
	case F_GETFL:
		rc = rs->fd_flags;
		break;
	case F_SETFL:
		rs->fd_flags = va_arg(ap, int);
		break;
	default:
		rc = rs_fail(EOPNOTSUPP);
	}
	va_end(ap);
	return rc;
}
ROCEMU_PUBLIC(rfcntl)
