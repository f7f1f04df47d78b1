/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rsockets inside one process, on two devices joined by an in-process ring
 * pair (docs/rdmacm.md, "rsockets"): the socket semantics rstream and
 * riostream do not reach, and peers that break the protocol.
 *  - blocking: 300 kB through 8 KiB buffers (the ring wraps, buffers are
 *    granted again and again) checked both ways, writev/readv/sendmsg/
 *    recvmsg, MSG_PEEK, names, options, half close (SHUT_WR: EOF there,
 *    the other way still open), EOF after rclose;
 *  - non-blocking: EAGAIN, EINPROGRESS, rpoll for a request / POLLOUT /
 *    POLLIN / POLLHUP, an rpoll timeout, SO_ERROR;
 *  - refused: no listener (ECONNREFUSED, blocking and through rpoll);
 *  - hostile peers made of plain rdma_cm and verbs: connection data that is
 *    not rsocket's (REJ; ECONNREFUSED), a data message longer than the
 *    buffer granted, a reserved operation (ECONNRESET, counted);
 *  - keepalive: a peer whose QP vanished is found dead (POLLERR) although
 *    nothing was being sent.
 * Every wait is bounded.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cmocka.h>
#include <rdma/rsocket.h>

#include "../rdmacm/cm_conn.h"
#include "rsocket_wire.h"

#define IP_A	"10.78.1.1"
#define IP_B	"10.78.1.2"
#define BIG	300000
#define RAW_BUF (1 << 18) /* a raw peer's buffer: larger than an rsocket's receive ring */

static int rs_listener(const char *ip, uint16_t port, bool nonblock)
{
	int l = rsocket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
	assert_true(l >= 0);
	int one = 1;
	assert_int_equal(rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
	struct sockaddr_in a = tu_addr(ip, port);
	assert_int_equal(rbind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(rlisten(l, 4), 0);
	return l;
}

/* Wait (5 s at most) for events on one rsocket; returns revents. */
static short rs_wait(int s, short events)
{
	struct pollfd p = {.fd = s, .events = events};
	int n = rpoll(&p, 1, 5000);
	assert_int_equal(n, 1);
	return p.revents;
}

static void small_buffers(int s)
{
	int v = 4096; /* buffers of 8 KiB */
	assert_int_equal(rsetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)), 0);
	assert_int_equal(rsetsockopt(s, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)), 0);
}

struct server_arg {
	int l;
	uint8_t *got;
};

/* The server: everything the client sends, then "bye" after its EOF. */
static void *blocking_server(void *p)
{
	struct server_arg *a = p;
	struct sockaddr_in peer;
	socklen_t len = sizeof(peer);
	int s = raccept(a->l, (struct sockaddr *)&peer, &len);
	if (s < 0 || len != sizeof(peer) || peer.sin_addr.s_addr != inet_addr(IP_A))
		return "raccept";
	ssize_t n = rrecv(s, a->got, BIG, MSG_WAITALL);
	if (n != BIG)
		return "rrecv";
	/* readv echo of the first 1000 bytes in three pieces */
	struct iovec iov[3] = {{a->got, 100}, {a->got + 100, 400}, {a->got + 500, 500}};
	if (rwritev(s, iov, 3) != 1000)
		return "rwritev";
	char c;
	if (rrecv(s, &c, 1, 0) != 0) /* the client shut writing: EOF */
		return "EOF";
	if (rsend(s, "bye", 3, 0) != 3) /* our direction is still open */
		return "rsend after EOF";
	rclose(s);
	return NULL;
}

static void blocking(void **state)
{
	(void)state;
	struct server_arg a = {.l = rs_listener(IP_B, 7600, false), .got = malloc(BIG)};
	small_buffers(a.l); /* inherited by the accepted socket */
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, blocking_server, &a), 0);

	int c = rsocket(AF_INET, SOCK_STREAM, 0);
	assert_true(c >= 0);
	small_buffers(c);
	/* from the other device: across the ring (else the engine loopback) */
	struct sockaddr_in from = tu_addr(IP_A, 0);
	assert_int_equal(rbind(c, (struct sockaddr *)&from, sizeof(from)), 0);
	int v = 0;
	socklen_t vl = sizeof(v);
	assert_int_equal(rgetsockopt(c, SOL_SOCKET, SO_RCVBUF, &v, &vl), 0);
	assert_int_equal(v, 8192);
	struct sockaddr_in dst = tu_addr(IP_B, 7600);
	assert_int_equal(rconnect(c, (struct sockaddr *)&dst, sizeof(dst)), 0);
	struct sockaddr_in me, him;
	socklen_t ml = sizeof(me), hl = sizeof(him);
	assert_int_equal(rgetsockname(c, (struct sockaddr *)&me, &ml), 0);
	assert_int_equal(rgetpeername(c, (struct sockaddr *)&him, &hl), 0);
	assert_int_equal(me.sin_addr.s_addr, inet_addr(IP_A));
	assert_int_equal(him.sin_addr.s_addr, inet_addr(IP_B));
	assert_int_equal(ntohs(him.sin_port), 7600);

	uint8_t *src = malloc(BIG);
	tu_fill(src, BIG, 5);
	/* sendmsg over two vectors, then the rest in odd pieces */
	struct iovec iov[2] = {{src, 1}, {src + 1, 99998}};
	struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
	size_t off = 0;
	while (off < 99999) {
		ssize_t n = rsendmsg(c, &m, 0);
		assert_true(n > 0);
		off += (size_t)n;
		/* advance the vectors past what went */
		size_t k = (size_t)n;
		for (unsigned i = 0; i < 2 && k; i++) {
			size_t d = k < iov[i].iov_len ? k : iov[i].iov_len;
			iov[i].iov_base = (uint8_t *)iov[i].iov_base + d;
			iov[i].iov_len -= d;
			k -= d;
		}
	}
	while (off < BIG) {
		size_t want = BIG - off < 7777 ? BIG - off : 7777;
		ssize_t n = rsend(c, src + off, want, 0);
		assert_true(n > 0);
		off += (size_t)n;
	}
	uint8_t echo[1000], peek[10];
	assert_int_equal(rrecv(c, peek, sizeof(peek), MSG_PEEK | MSG_WAITALL), 10);
	struct iovec riov[2] = {{echo, 300}, {echo + 300, 700}};
	struct msghdr rm = {.msg_iov = riov, .msg_iovlen = 2};
	size_t got = 0;
	while (got < 1000) {
		ssize_t n = rrecvmsg(c, &rm, 0);
		assert_true(n > 0);
		got += (size_t)n;
		size_t k = (size_t)n;
		for (unsigned i = 0; i < 2 && k; i++) {
			size_t d = k < riov[i].iov_len ? k : riov[i].iov_len;
			riov[i].iov_base = (uint8_t *)riov[i].iov_base + d;
			riov[i].iov_len -= d;
			k -= d;
		}
	}
	assert_memory_equal(peek, src, sizeof(peek));
	assert_memory_equal(echo, src, sizeof(echo));
	/* half close: our end of writing; we still read the server's "bye" */
	assert_int_equal(rshutdown(c, SHUT_WR), 0);
	errno = 0;
	assert_int_equal(rsend(c, "x", 1, 0), -1);
	char bye[8] = {0};
	assert_int_equal(rrecv(c, bye, sizeof(bye), MSG_WAITALL), 3);
	assert_string_equal(bye, "bye");
	assert_int_equal(rrecv(c, bye, sizeof(bye), 0), 0); /* then EOF */
	void *ret;
	pthread_join(t, &ret);
	assert_null(ret);
	assert_memory_equal(a.got, src, BIG);
	assert_int_equal(rclose(c), 0);
	assert_int_equal(rclose(a.l), 0);
	assert_int_equal(rclose(c), -1); /* gone */
	assert_int_equal(errno, EBADF);
	free(src);
	free(a.got);
}

static void nonblocking(void **state)
{
	(void)state;
	int l = rs_listener(IP_B, 7601, true);
	struct sockaddr_in peer;
	socklen_t pl = sizeof(peer);
	errno = 0;
	assert_int_equal(raccept(l, (struct sockaddr *)&peer, &pl), -1);
	assert_int_equal(errno, EAGAIN);

	int c = rsocket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(rfcntl(c, F_SETFL, O_NONBLOCK), 0);
	assert_int_equal(rfcntl(c, F_GETFL), O_NONBLOCK);
	struct sockaddr_in dst = tu_addr(IP_B, 7601);
	errno = 0;
	assert_int_equal(rconnect(c, (struct sockaddr *)&dst, sizeof(dst)), -1);
	assert_int_equal(errno, EINPROGRESS);
	assert_true(rs_wait(l, POLLIN) & POLLIN);
	int s = raccept(l, NULL, NULL);
	assert_true(s >= 0);
	assert_true(rs_wait(c, POLLOUT) & POLLOUT);
	int err = -1;
	socklen_t el = sizeof(err);
	assert_int_equal(rgetsockopt(c, SOL_SOCKET, SO_ERROR, &err, &el), 0);
	assert_int_equal(err, 0);

	char buf[16];
	errno = 0;
	assert_int_equal(rrecv(s, buf, sizeof(buf), 0), -1);
	assert_int_equal(errno, EAGAIN);
	struct pollfd p = {.fd = s, .events = POLLIN};
	double t0 = tu_now();
	assert_int_equal(rpoll(&p, 1, 100), 0); /* nothing to read: a timeout */
	assert_true(tu_now() - t0 >= 0.09);
	assert_int_equal(rsend(c, "0123456789", 10, 0), 10);
	assert_true(rs_wait(s, POLLIN) & POLLIN);
	size_t got = 0;
	while (got < 10) {
		ssize_t n = rrecv(s, buf + got, 10 - got, 0);
		if (n < 0) {
			assert_int_equal(errno, EAGAIN);
			rs_wait(s, POLLIN);
			continue;
		}
		got += (size_t)n;
	}
	assert_memory_equal(buf, "0123456789", 10);
	/* rselect sees the same */
	assert_int_equal(rsend(s, "z", 1, 0), 1);
	fd_set rd;
	FD_ZERO(&rd);
	FD_SET(c, &rd);
	struct timeval tv = {.tv_sec = 5};
	assert_int_equal(rselect(c + 1, &rd, NULL, NULL, &tv), 1);
	assert_true(FD_ISSET(c, &rd));
	assert_int_equal(rrecv(c, buf, 1, 0), 1);
	/* the client goes: its data first, then the end */
	assert_int_equal(rsend(c, "last", 4, 0), 4);
	assert_int_equal(rclose(c), 0);
	short r = rs_wait(s, POLLIN);
	assert_true(r & POLLIN);
	got = 0;
	for (int i = 0; i < 1000 && got < 4; i++) {
		ssize_t n = rrecv(s, buf + got, 4 - got, 0);
		if (n > 0)
			got += (size_t)n;
		else
			rs_wait(s, POLLIN);
	}
	assert_memory_equal(buf, "last", 4);
	assert_true(rs_wait(s, POLLIN) & POLLHUP);
	assert_int_equal(rrecv(s, buf, 1, 0), 0);
	assert_int_equal(rclose(s), 0);
	assert_int_equal(rclose(l), 0);
}

static void refused(void **state)
{
	(void)state;
	int l = rs_listener(IP_B, 7602, false); /* this process answers for the port */
	int c = rsocket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in dst = tu_addr(IP_B, 7699);
	errno = 0;
	assert_int_equal(rconnect(c, (struct sockaddr *)&dst, sizeof(dst)), -1);
	assert_int_equal(errno, ECONNREFUSED);
	rclose(c);
	/* non-blocking: the REJ may come back within the call (one process) */
	c = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	assert_int_equal(rconnect(c, (struct sockaddr *)&dst, sizeof(dst)), -1);
	if (errno == EINPROGRESS) {
		assert_true(rs_wait(c, POLLOUT) & POLLERR);
		int err = 0;
		socklen_t el = sizeof(err);
		assert_int_equal(rgetsockopt(c, SOL_SOCKET, SO_ERROR, &err, &el), 0);
		assert_int_equal(err, ECONNREFUSED);
	} else {
		assert_int_equal(errno, ECONNREFUSED);
	}
	rclose(c);
	/* what rsockets do not do */
	errno = 0;
	assert_int_equal(rsocket(AF_INET, SOCK_DGRAM, 0), -1);
	assert_int_equal(errno, EOPNOTSUPP);
	assert_int_equal(rsocket(AF_UNIX, SOCK_STREAM, 0), -1);
	assert_int_equal(errno, EAFNOSUPPORT);
	char b;
	assert_int_equal(rrecv(12345678, &b, 1, 0), -1);
	assert_int_equal(errno, EBADF);
	rclose(l);
}

/* ------------------------------------------------------------------------ */
/* Peers made of rdma_cm and verbs                                            */

struct raw_peer {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	uint8_t *buf; /* our fake target area and receive buffer */
	struct ibv_mr *mr;
	struct rs_conn theirs;
};

/* Connect to an rsocket listener with connection data (pdata, len). */
static void raw_connect(struct raw_peer *p, uint16_t port, const void *pdata, uint8_t len)
{
	p->ch = rdma_create_event_channel();
	p->id = cmt_resolve(p->ch, RDMA_PS_TCP, NULL, IP_A, IP_B, port);
	cmt_create_qp(p->id, IBV_QPT_RC);
	p->buf = calloc(1, RAW_BUF);
	p->mr = ibv_reg_mr(p->id->pd, p->buf, RAW_BUF,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	assert_non_null(p->mr);
	struct rdma_conn_param cp = {
	    .private_data = pdata, .private_data_len = len, .retry_count = 7, .rnr_retry_count = 7};
	assert_int_equal(rdma_connect(p->id, &cp), 0);
}

static void raw_conn_data(struct raw_peer *p, uint8_t *out)
{
	struct rs_conn c = {.version = RS_CONN_VERSION,
			    .credits = 8,
			    .target_sgl = {(uintptr_t)p->buf, p->mr->rkey, 2},
			    .data_buf = {(uintptr_t)p->buf + 4096, p->mr->rkey, 4096}};
	rs_conn_put(out, &c);
}

static void raw_close(struct raw_peer *p)
{
	rdma_disconnect(p->id);
	ibv_dereg_mr(p->mr);
	rdma_destroy_qp(p->id);
	rdma_destroy_id(p->id);
	rdma_destroy_event_channel(p->ch);
	free(p->buf);
}

static void hostile_conn_data(void **state)
{
	(void)state;
	/* A REQ whose private data is not rsocket connection data: REJ. */
	int l = rs_listener(IP_B, 7603, true);
	struct raw_peer p;
	raw_connect(&p, 7603, "not an rsocket", 15);
	for (int i = 0; i < 500; i++) { /* raccept takes the request and refuses it */
		errno = 0;
		assert_int_equal(raccept(l, NULL, NULL), -1);
		assert_int_equal(errno, EAGAIN);
		struct pollfd pf = {.fd = p.ch->fd, .events = POLLIN};
		if (poll(&pf, 1, 10) == 1)
			break;
	}
	cmt_ack(tu_expect(p.ch, RDMA_CM_EVENT_REJECTED));
	ibv_dereg_mr(p.mr);
	rdma_destroy_qp(p.id);
	rdma_destroy_id(p.id);
	rdma_destroy_event_channel(p.ch);
	free(p.buf);
	rclose(l);

	/* A REP whose private data says version 9: rconnect fails. */
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_cm_id *lid = cmt_listen(sch, RDMA_PS_TCP, IP_B, 7604);
	int c = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in dst = tu_addr(IP_B, 7604);
	assert_int_equal(rconnect(c, (struct sockaddr *)&dst, sizeof(dst)), -1);
	assert_int_equal(errno, EINPROGRESS);
	struct rdma_cm_event *ev = tu_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
	struct rdma_cm_id *sid = ev->id;
	struct rs_conn creq;
	assert_int_equal(
	    rs_conn_get(ev->param.conn.private_data, ev->param.conn.private_data_len, &creq), 0);
	assert_int_equal(creq.target_sgl.length, RS_SGL_SIZE);
	cmt_ack(ev);
	cmt_create_qp(sid, IBV_QPT_RC);
	uint8_t bad[RS_CONN_DATA_LEN] = {9};
	struct rdma_conn_param sp = {.private_data = bad, .private_data_len = sizeof(bad)};
	assert_int_equal(rdma_accept(sid, &sp), 0);
	assert_true(rs_wait(c, POLLOUT) & POLLERR);
	int err = 0;
	socklen_t el = sizeof(err);
	assert_int_equal(rgetsockopt(c, SOL_SOCKET, SO_ERROR, &err, &el), 0);
	assert_int_equal(err, ECONNREFUSED);
	rclose(c);
	rdma_destroy_qp(sid);
	rdma_destroy_id(sid);
	rdma_destroy_id(lid);
	rdma_destroy_event_channel(sch);
}

/* A raw peer connected to an accepted rsocket, which it returns. */
static int raw_accepted(struct raw_peer *p, int l, uint16_t port)
{
	uint8_t cd[RS_CONN_DATA_LEN];

	p->ch = rdma_create_event_channel();
	p->id = cmt_resolve(p->ch, RDMA_PS_TCP, NULL, IP_A, IP_B, port);
	cmt_create_qp(p->id, IBV_QPT_RC);
	p->buf = calloc(1, RAW_BUF);
	p->mr = ibv_reg_mr(p->id->pd, p->buf, RAW_BUF,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	raw_conn_data(p, cd);
	/* receives for the rsocket's credit updates and control messages */
	struct ibv_recv_wr rw = {.num_sge = 0}, *rbad;
	for (int i = 0; i < 8; i++)
		assert_int_equal(ibv_post_recv(p->id->qp, &rw, &rbad), 0);
	struct rdma_conn_param cp = {.private_data = cd,
				     .private_data_len = sizeof(cd),
				     .retry_count = 7,
				     .rnr_retry_count = 7};
	assert_int_equal(rdma_connect(p->id, &cp), 0);
	int s = raccept(l, NULL, NULL);
	assert_true(s >= 0);
	struct rdma_cm_event *ev = tu_expect(p->ch, RDMA_CM_EVENT_ESTABLISHED);
	assert_int_equal(
	    rs_conn_get(ev->param.conn.private_data, ev->param.conn.private_data_len, &p->theirs),
	    0);
	cmt_ack(ev);
	return s;
}

static void raw_write_imm(struct raw_peer *p, uint32_t len, uint32_t imm)
{
	struct ibv_sge sge = {.addr = (uintptr_t)p->buf, .length = len, .lkey = p->mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge,
				 .num_sge = len ? 1 : 0,
				 .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
				 .send_flags = IBV_SEND_SIGNALED,
				 .imm_data = htobe32(imm)},
			   *bad;
	wr.wr.rdma.remote_addr = p->theirs.data_buf.addr;
	wr.wr.rdma.rkey = p->theirs.data_buf.key;
	assert_int_equal(ibv_post_send(p->id->qp, &wr, &bad), 0);
	struct ibv_wc wc = tu_poll_one(p->id->send_cq);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
}

static void hostile_stream(void **state)
{
	(void)state;
	int l = rs_listener(IP_B, 7605, false);
	struct raw_peer p;
	char b[16];

	/* well-behaved first: 5 bytes arrive */
	int s = raw_accepted(&p, l, 7605);
	memcpy(p.buf, "hello", 5);
	raw_write_imm(&p, 5, rs_imm_make(RS_OP_DATA, 5));
	assert_int_equal(rrecv(s, b, sizeof(b), 0), 5);
	assert_memory_equal(b, "hello", 5);
	/* then one byte more than both halves we were granted together (the
	 * second came with the first credit update): it fits the registered
	 * buffer, so only the protocol check can refuse it */
	uint32_t over = 2 * p.theirs.data_buf.length - 5 + 1;
	raw_write_imm(&p, over, rs_imm_make(RS_OP_DATA, over));
	errno = 0;
	assert_int_equal(rrecv(s, b, sizeof(b), 0), -1);
	assert_int_equal(errno, ECONNRESET);
	assert_true(rs_wait(s, POLLIN) & POLLERR);
	rclose(s);
	raw_close(&p);

	/* a reserved operation */
	s = raw_accepted(&p, l, 7605);
	raw_write_imm(&p, 0, 5u << 29);
	errno = 0;
	assert_int_equal(rrecv(s, b, sizeof(b), 0), -1);
	assert_int_equal(errno, ECONNRESET);
	rclose(s);
	raw_close(&p);
	rclose(l);
}

static void keepalive(void **state)
{
	(void)state;
	int l = rs_listener(IP_B, 7606, false);
	struct raw_peer p;
	int s = raw_accepted(&p, l, 7606);
	int one = 1, idle = 1;
	assert_int_equal(rsetsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)), 0);
	assert_int_equal(rsetsockopt(s, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)), 0);
	int v = 0;
	socklen_t vl = sizeof(v);
	assert_int_equal(rgetsockopt(s, IPPROTO_TCP, TCP_KEEPIDLE, &v, &vl), 0);
	assert_int_equal(v, 1);
	/* The peer's QP vanishes without a word (as when its host dies): only
	 * a keepalive that finds no one can tell. */
	rdma_destroy_qp(p.id);
	struct pollfd pf = {.fd = s, .events = POLLIN};
	int n = rpoll(&pf, 1, 30000);
	assert_int_equal(n, 1);
	assert_true(pf.revents & POLLERR);
	rclose(s);
	ibv_dereg_mr(p.mr);
	rdma_destroy_id(p.id);
	rdma_destroy_event_channel(p.ch);
	free(p.buf);
	rclose(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(blocking),	      cmocka_unit_test(nonblocking),
	    cmocka_unit_test(refused),	      cmocka_unit_test(hostile_conn_data),
	    cmocka_unit_test(hostile_stream), cmocka_unit_test(keepalive),
	};
	return cmt_run_two_devices("rs", IP_A, IP_B, tests, sizeof(tests) / sizeof(tests[0]));
}
