/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pair_check: one end of a two-process RDMA test that verifies every byte.
 * A plain libibverbs program (it links the system libibverbs and runs under
 * `rocemu run`, like ibv_rc_pingpong): the server waits for a client on a
 * TCP port or a Unix socket, both exchange QP numbers, PSNs, GIDs and keys
 * there, and then run one test:
 *
 *   data        per round and QP: SEND (+imm), WRITE_WITH_IMM, READ back,
 *               READ of the server's pattern, FETCH_ADD and CMP_SWAP (hit and
 *               miss); sizes 0 B .. -s over several MTUs at odd offsets; the
 *               server checks every received byte and, at the end of each
 *               round (TCP lockstep), its WRITE areas and atomic counters.
 *   uc-loss     UC SENDs of several packets each under the port's fault
 *               injector (the script's --fault-* options): every delivered
 *               message intact, in order and once; at least one delivered.
 *   threads     -T threads post SENDs and READs to one RC QP and poll one
 *               send CQ at once (any thread reaps any completion); the
 *               server's -T threads poll one receive CQ and repost: every
 *               wr_id completes exactly once, every message arrives once.
 *   srq-limit   the server's SRQ armed with a limit: IBV_EVENT_SRQ_LIMIT_REACHED
 *               read through ibv_get_async_event exactly when the level
 *               drops below it, not before; the limit reads back as disarmed.
 *   cq-overflow the server's receive CQ overflows: IBV_EVENT_CQ_ERR for that
 *               CQ and IBV_EVENT_QP_FATAL for its QP arrive through
 *               ibv_get_async_event, the entries queued before stay intact,
 *               the QP is in ERR; the client sees every WR complete.
 *   fork        the client forks with its device open and memory registered
 *               (the child dirties the registered pages and exits through
 *               exit(), running atexit handlers); then the data test.
 *   mw          the server binds a type 2 memory window through its QP (its
 *               region has no remote right of its own); the client WRITEs
 *               and READs through it, revokes it with a SEND with
 *               Invalidate (the server's receive completion carries
 *               IBV_WC_WITH_INV and the R_Key), and its next WRITE fails
 *               with IBV_WC_REM_ACCESS_ERR without changing a byte.
 *
 * -l N: the server serves N clients one after the other on one device (and
 * a client may be killed mid-run: a session whose peer vanished is reported
 * and the next one served); the exit status is that of the last session.
 *
 * usage: pair_check [-p PORT | -u SOCKET] [-g GID] [-t TEST] [-q QPS]
 *                   [-n ROUNDS] [-s MAXSIZE] [-T THREADS] [-l SESSIONS]
 *                   [-d DEVICE] [-6] [-c] [SERVER]
 * The client names the server's address (TCP) or, with -u, says -c. -6: the
 * GID must be a global IPv6 address.
 * Exit 0: the test passed; 1: it failed (the reason on stderr).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stddef.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define MAX_QPS	     1024
#define RECV_SLOTS   4 /* receive buffers per QP in the data test */
#define UC_RECVS     64
#define WAIT_SECONDS 120 /* a completion or event never takes this long: a hang */
#define UC_MAGIC     0x55434d53u

static struct {
	const char *server, *sock_path, *dev_name, *test;
	int port, gid_index, qps, rounds, threads, sessions;
	size_t max_size;
	bool want_v6, client;
} opt = {.port = 18600,
	 .gid_index = 1,
	 .test = "data",
	 .qps = 1,
	 .rounds = 8,
	 .threads = 4,
	 .sessions = 1,
	 .max_size = 65536 + 77};

/* receive slots of max_size bytes per QP (the test sets it) */
static unsigned g_slots = RECV_SLOTS;

/* ------------------------------------------------------------------------ */
/* Failing                                                                    */

static char g_why[512];

static int failf(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(g_why, sizeof(g_why), fmt, ap);
	va_end(ap);
	fprintf(stderr, "pair_check: %s\n", g_why);
	return -1;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ------------------------------------------------------------------------ */
/* Patterns: byte i of (tag, a, b) — anything that differs between messages,
 * rounds, QPs and offsets.                                                   */

static uint8_t pat(uint32_t tag, uint32_t a, uint32_t b, size_t i)
{
	uint32_t x =
	    tag * 0x9E3779B1u ^ a * 0x85EBCA77u ^ b * 0xC2B2AE3Du ^ (uint32_t)i * 0x27D4EB2Fu;

	x ^= x >> 15;
	x *= 0x2C1B3C6Du;
	x ^= x >> 12;
	return (uint8_t)(x ^ (x >> 8) ^ (i >> 8));
}

static void pat_fill(uint8_t *p, size_t len, uint32_t tag, uint32_t a, uint32_t b)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pat(tag, a, b, i);
}

static int pat_check(const uint8_t *p, size_t len, uint32_t tag, uint32_t a, uint32_t b,
		     const char *what)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != pat(tag, a, b, i))
			return failf("%s (round/msg %u, QP/thread %u, %zu bytes): byte %zu is %#x, "
				     "expected %#x",
				     what, a, b, len, i, p[i], pat(tag, a, b, i));
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The out-of-band channel: TCP or a Unix socket (network namespaces share
 * the file system: af_xdp hosts whose kernel has no address use that).      */

static int xfer(int fd, void *buf, size_t len, bool out)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = out ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return failf("peer gone (out-of-band channel %s)",
				     n == 0 ? "closed" : strerror(errno));
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int oob_send(int fd, const void *buf, size_t len)
{
	return xfer(fd, (void *)buf, len, true);
}

static int oob_recv(int fd, void *buf, size_t len)
{
	return xfer(fd, buf, len, false);
}

static int oob_listen(void)
{
	int fd, one = 1;

	if (opt.sock_path) {
		struct sockaddr_un a = {.sun_family = AF_UNIX};

		snprintf(a.sun_path, sizeof(a.sun_path), "%s", opt.sock_path);
		unlink(opt.sock_path);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 4))
			return failf("listen on %s: %s", opt.sock_path, strerror(errno));
		return fd;
	}
	struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)opt.port)};

	fd = socket(AF_INET6, SOCK_STREAM, 0);
	if (fd < 0)
		return failf("socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 4))
		return failf("listen on port %d: %s", opt.port, strerror(errno));
	return fd;
}

/* Connect, retrying while the server is not listening yet (no deadline of
 * our own: the test's timeout bounds the run). */
static int oob_connect(void)
{
	for (unsigned tries = 0;; tries++) {
		int fd;

		if (opt.sock_path) {
			struct sockaddr_un a = {.sun_family = AF_UNIX};

			snprintf(a.sun_path, sizeof(a.sun_path), "%s", opt.sock_path);
			fd = socket(AF_UNIX, SOCK_STREAM, 0);
			if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
				return fd;
		} else {
			struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
			char port[16];

			snprintf(port, sizeof(port), "%d", opt.port);
			if (getaddrinfo(opt.server, port, &hints, &res))
				return failf("cannot resolve %s", opt.server);
			fd = socket(res->ai_family, SOCK_STREAM, 0);
			if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
				freeaddrinfo(res);
				return fd;
			}
			freeaddrinfo(res);
		}
		if (fd >= 0)
			close(fd);
		if (tries % 100 == 99)
			fprintf(stderr, "pair_check: still waiting for the server (%s)\n",
				strerror(errno));
		usleep(100000);
	}
}

/* ------------------------------------------------------------------------ */
/* Resources                                                                  */

struct end_info {
	uint32_t nqp, mtu, rkey, pad;
	uint64_t addr;
	uint8_t gid[16];
	uint32_t qpn[MAX_QPS], psn[MAX_QPS];
};

struct ctx {
	struct ibv_context *dev;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *scq, *rcq;
	struct ibv_srq *srq;
	struct ibv_qp *qp[MAX_QPS];
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t buf_len, qp_span;
	union ibv_gid gid;
	enum ibv_mtu mtu;
	uint32_t mtu_bytes;
	struct end_info me, peer;
	int oob;
	bool server;
	enum ibv_qp_type qp_type;
	int scq_len, rcq_len, send_depth, recv_depth;
};

/* Per-QP layout of the buffer: receive slots, WRITE area, READ source, READ
 * destination, atomic counters (two u64) and the atomic results. */
static size_t slot_len(void)
{
	return (opt.max_size + 63) & ~(size_t)63;
}
static size_t off_recv(unsigned k)
{
	return k * slot_len();
}
static size_t off_write(void)
{
	return g_slots * slot_len();
}
static size_t off_rsrc(void)
{
	return (g_slots + 1) * slot_len();
}
static size_t off_rdst(void)
{
	return (g_slots + 2) * slot_len();
}
static size_t off_atom(void)
{
	return (g_slots + 3) * slot_len();
}
static size_t qp_span(void)
{
	return off_atom() + 64;
}

static uint8_t *qbuf(struct ctx *c, unsigned q, size_t off)
{
	return c->buf + q * c->qp_span + off;
}

static int open_device(struct ctx *c)
{
	struct ibv_device **list;
	struct ibv_port_attr pa;
	int n;

	list = ibv_get_device_list(&n);
	if (!list || n == 0)
		return failf("no RDMA device");
	for (int i = 0; i < n; i++)
		if (!opt.dev_name || !strcmp(ibv_get_device_name(list[i]), opt.dev_name)) {
			c->dev = ibv_open_device(list[i]);
			break;
		}
	ibv_free_device_list(list);
	if (!c->dev)
		return failf("cannot open the device");
	if (ibv_query_port(c->dev, 1, &pa))
		return failf("ibv_query_port failed");
	c->mtu = pa.active_mtu;
	c->mtu_bytes = 128u << c->mtu;
	if (ibv_query_gid(c->dev, 1, opt.gid_index, &c->gid))
		return failf("no GID %d", opt.gid_index);
	if (opt.want_v6) {
		static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

		if (!memcmp(c->gid.raw, v4_prefix, 12) || c->gid.raw[0] == 0xfe)
			return failf("GID %d is not a global IPv6 address", opt.gid_index);
	}
	c->pd = ibv_alloc_pd(c->dev);
	if (!c->pd)
		return failf("ibv_alloc_pd failed");
	return 0;
}

static int make_cqs_and_mr(struct ctx *c)
{
	c->qp_span = qp_span();
	c->buf_len = c->qp_span * (size_t)opt.qps;
	if (posix_memalign((void **)&c->buf, 4096, c->buf_len))
		return failf("out of memory");
	memset(c->buf, 0, c->buf_len);
	/* mw: the server's region grants nothing remote; its window does */
	c->mr = ibv_reg_mr(c->pd, c->buf, c->buf_len,
			   !strcmp(opt.test, "mw") && c->server
			       ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND
			       : IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!c->mr)
		return failf("ibv_reg_mr failed: %s", strerror(errno));
	c->ch = ibv_create_comp_channel(c->dev);
	c->scq = ibv_create_cq(c->dev, c->scq_len, NULL, NULL, 0);
	c->rcq = ibv_create_cq(c->dev, c->rcq_len, NULL, c->ch, 0);
	if (!c->ch || !c->scq || !c->rcq)
		return failf("cannot create the CQs");
	return 0;
}

static int make_qps(struct ctx *c)
{
	for (int i = 0; i < opt.qps; i++) {
		struct ibv_qp_init_attr ia = {
		    .send_cq = c->scq,
		    .recv_cq = c->rcq,
		    .srq = c->srq,
		    .qp_type = c->qp_type,
		    .cap = {.max_send_wr = (uint32_t)c->send_depth,
			    .max_recv_wr = c->srq ? 0 : (uint32_t)c->recv_depth,
			    .max_send_sge = 2,
			    .max_recv_sge = 1},
		};
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};

		c->qp[i] = ibv_create_qp(c->pd, &ia);
		if (!c->qp[i])
			return failf("ibv_create_qp %d failed: %s", i, strerror(errno));
		a.qp_access_flags =
		    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
		if (ibv_modify_qp(c->qp[i], &a,
				  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				      IBV_QP_ACCESS_FLAGS))
			return failf("QP %d to INIT failed", i);
		c->me.qpn[i] = c->qp[i]->qp_num;
		c->me.psn[i] = ((uint32_t)rand() ^ (uint32_t)i * 7919u) & 0xFFFFFF;
	}
	c->me.nqp = (uint32_t)opt.qps;
	c->me.mtu = c->mtu;
	c->me.addr = (uintptr_t)c->buf;
	c->me.rkey = c->mr->rkey;
	memcpy(c->me.gid, c->gid.raw, 16);
	return 0;
}

static int connect_qps(struct ctx *c, uint8_t timeout, uint8_t retry)
{
	enum ibv_mtu mtu = c->mtu < (enum ibv_mtu)c->peer.mtu ? c->mtu : (enum ibv_mtu)c->peer.mtu;

	if (c->peer.nqp != (uint32_t)opt.qps)
		return failf("the peer has %u QPs, we have %d", c->peer.nqp, opt.qps);
	c->mtu_bytes = 128u << mtu;
	for (int i = 0; i < opt.qps; i++) {
		struct ibv_qp_attr a = {
		    .qp_state = IBV_QPS_RTR,
		    .path_mtu = mtu,
		    .dest_qp_num = c->peer.qpn[i],
		    .rq_psn = c->peer.psn[i],
		    .max_dest_rd_atomic = 16,
		    .min_rnr_timer = 12,
		    .ah_attr = {.is_global = 1,
				.port_num = 1,
				.grh = {.hop_limit = 64, .sgid_index = (uint8_t)opt.gid_index}},
		};
		int mask =
		    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;

		memcpy(a.ah_attr.grh.dgid.raw, c->peer.gid, 16);
		if (c->qp_type == IBV_QPT_RC)
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		if (ibv_modify_qp(c->qp[i], &a, mask))
			return failf("QP %d to RTR failed", i);
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = c->me.psn[i];
		mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		if (c->qp_type == IBV_QPT_RC) {
			a.timeout = timeout;
			a.retry_cnt = retry;
			a.rnr_retry = 7;
			a.max_rd_atomic = 16;
			mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				IBV_QP_MAX_QP_RD_ATOMIC;
		}
		if (ibv_modify_qp(c->qp[i], &a, mask))
			return failf("QP %d to RTS failed", i);
	}
	return 0;
}

static void destroy_qps(struct ctx *c)
{
	for (int i = 0; i < opt.qps; i++)
		if (c->qp[i]) {
			ibv_destroy_qp(c->qp[i]);
			c->qp[i] = NULL;
		}
}

static void destroy_session(struct ctx *c)
{
	destroy_qps(c);
	if (c->srq)
		ibv_destroy_srq(c->srq);
	if (c->scq)
		ibv_destroy_cq(c->scq);
	if (c->rcq)
		ibv_destroy_cq(c->rcq);
	if (c->ch)
		ibv_destroy_comp_channel(c->ch);
	if (c->mr)
		ibv_dereg_mr(c->mr);
	free(c->buf);
	c->srq = NULL;
	c->scq = c->rcq = NULL;
	c->ch = NULL;
	c->mr = NULL;
	c->buf = NULL;
}

/* ------------------------------------------------------------------------ */
/* Posting and completions                                                    */

static int post_recv(struct ctx *c, int q, uint64_t wr_id, void *addr, uint32_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = c->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;
	int rc = c->srq ? ibv_post_srq_recv(c->srq, &wr, &bad) : ibv_post_recv(c->qp[q], &wr, &bad);

	return rc ? failf("post_recv: %s", strerror(rc)) : 0;
}

struct send_args {
	enum ibv_wr_opcode op;
	uint64_t wr_id;
	void *addr;
	uint32_t len;
	uint64_t raddr;
	uint32_t imm;
	uint64_t cmp, swap;
};

static int post_send(struct ctx *c, int q, const struct send_args *s)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->addr, .length = s->len, .lkey = c->mr->lkey};
	struct ibv_send_wr wr =
			       {
				   .wr_id = s->wr_id,
				   .sg_list = &sge,
				   .num_sge = s->len || s->op >= IBV_WR_ATOMIC_CMP_AND_SWP ? 1 : 0,
				   .opcode = s->op,
				   .send_flags = IBV_SEND_SIGNALED,
				   .imm_data = htonl(s->imm),
			       },
			   *bad;
	int rc;

	if (s->op == IBV_WR_ATOMIC_CMP_AND_SWP || s->op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = s->raddr;
		wr.wr.atomic.rkey = c->peer.rkey;
		wr.wr.atomic.compare_add = s->op == IBV_WR_ATOMIC_CMP_AND_SWP ? s->cmp : s->swap;
		wr.wr.atomic.swap = s->swap;
	} else {
		wr.wr.rdma.remote_addr = s->raddr;
		wr.wr.rdma.rkey = c->peer.rkey;
	}
	rc = ibv_post_send(c->qp[q], &wr, &bad);
	return rc ? failf("post_send (opcode %d): %s", s->op, strerror(rc)) : 0;
}

static int g_oob = -1; /* the session's out-of-band channel */

/* The peer closed the out-of-band channel (it exited or was killed). */
static bool peer_gone(void)
{
	char b;

	return g_oob >= 0 && recv(g_oob, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* One completion from cq (busy poll; WAIT_SECONDS without one is a hang). */
static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc, const char *what)
{
	double end = now_s() + WAIT_SECONDS;
	unsigned spins = 0;
	int n;

	while ((n = ibv_poll_cq(cq, 1, wc)) == 0) {
		if (++spins % 4096 == 0 && peer_gone())
			return failf("peer gone while waiting for a %s completion", what);
		if (now_s() > end)
			return failf("no %s completion for %d s", what, WAIT_SECONDS);
	}
	if (n < 0)
		return failf("ibv_poll_cq failed");
	return 0;
}

static const char *st(enum ibv_wc_status s)
{
	return ibv_wc_status_str(s);
}

static int expect_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_opcode op, uint32_t len,
		     struct ibv_wc *out, const char *what)
{
	struct ibv_wc wc;

	if (wait_wc(cq, &wc, what))
		return -1;
	if (wc.status != IBV_WC_SUCCESS)
		return failf("%s: status %s (wr_id %#" PRIx64 ")", what, st(wc.status), wc.wr_id);
	if (wc.wr_id != wr_id)
		return failf("%s: wr_id %#" PRIx64 ", expected %#" PRIx64, what, wc.wr_id, wr_id);
	if (wc.opcode != op)
		return failf("%s: opcode %d, expected %d", what, wc.opcode, op);
	if ((op & IBV_WC_RECV) && wc.byte_len != len)
		return failf("%s: byte_len %u, expected %u", what, wc.byte_len, len);
	if (out)
		*out = wc;
	return 0;
}

/* Port events (the link coming up after the device opened) are not what
 * these tests look for. */
static bool port_event(enum ibv_event_type t)
{
	return t == IBV_EVENT_PORT_ACTIVE || t == IBV_EVENT_PORT_ERR || t == IBV_EVENT_LID_CHANGE ||
	       t == IBV_EVENT_GID_CHANGE || t == IBV_EVENT_PKEY_CHANGE;
}

/* An async event of type want (for element elem), within WAIT_SECONDS. */
static int expect_async(struct ctx *c, enum ibv_event_type want, void *elem)
{
	struct pollfd p = {.fd = c->dev->async_fd, .events = POLLIN};
	struct ibv_async_event ev;

	do {
		if (poll(&p, 1, WAIT_SECONDS * 1000) != 1)
			return failf("no async event (waiting for %s)", ibv_event_type_str(want));
		if (ibv_get_async_event(c->dev, &ev))
			return failf("ibv_get_async_event failed");
		ibv_ack_async_event(&ev);
	} while (port_event(ev.event_type));
	if (ev.event_type != want)
		return failf("async event %s, expected %s", ibv_event_type_str(ev.event_type),
			     ibv_event_type_str(want));
	if (elem && ev.element.cq != elem)
		return failf("async event %s names another object", ibv_event_type_str(want));
	return 0;
}

/* No async event is queued now. */
static int expect_no_async(struct ctx *c, const char *when)
{
	struct pollfd p = {.fd = c->dev->async_fd, .events = POLLIN};
	struct ibv_async_event ev;

	while (poll(&p, 1, 0) == 1) {
		if (ibv_get_async_event(c->dev, &ev))
			return failf("ibv_get_async_event failed");
		ibv_ack_async_event(&ev);
		if (!port_event(ev.event_type))
			return failf("unexpected async event %s %s",
				     ibv_event_type_str(ev.event_type), when);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Lockstep over the out-of-band channel                                      */

static int sync_both(struct ctx *c, uint32_t token)
{
	uint32_t t = token, got;

	if (oob_send(c->oob, &t, 4) || oob_recv(c->oob, &got, 4))
		return -1;
	if (got != token)
		return failf("out of step with the peer (token %#x, expected %#x)", got, token);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* data                                                                       */

static uint32_t msg_len(int round, int q)
{
	static const uint32_t base[] = {0, 1, 63, 1000, 4096 + 5, 3 * 4096 + 17, 65536, 65536 + 77};
	uint32_t l = base[(unsigned)(round * 5 + q) % (sizeof(base) / sizeof(base[0]))];

	return l > opt.max_size ? (uint32_t)opt.max_size - (uint32_t)(round % 7) : l;
}

static uint32_t msg_off(int round, int q)
{
	uint32_t l = msg_len(round, q);
	uint32_t room = (uint32_t)slot_len() - l;

	return room ? ((uint32_t)(round * 37 + q * 11) % room) : 0;
}

/* The client's side of one round on QP q. Atomic state: the client knows
 * what it added: ctr0 (FETCH_ADD target) and ctr1 (CMP_SWAP target). */
static int data_round_client(struct ctx *c, int r, int q, uint64_t *ctr0, uint64_t *ctr1)
{
	uint32_t len = msg_len(r, q), off = msg_off(r, q);
	uint64_t rbase = c->peer.addr + (uint64_t)q * c->qp_span,
		 id = ((uint64_t)r << 32) | (uint32_t)q << 8;
	uint8_t *src = qbuf(c, (unsigned)q, off_recv(0)), *dst = qbuf(c, (unsigned)q, off_rdst());
	uint64_t *res = (uint64_t *)qbuf(c, (unsigned)q, off_atom() + 32);
	struct send_args s;

	/* SEND with immediate data into the next receive slot */
	pat_fill(src, len, 'S', (uint32_t)r, (uint32_t)q);
	s = (struct send_args){.op = IBV_WR_SEND_WITH_IMM,
			       .wr_id = id | 1,
			       .addr = src,
			       .len = len,
			       .imm = (uint32_t)r};
	if (post_send(c, q, &s) || expect_wc(c->scq, id | 1, IBV_WC_SEND, 0, NULL, "SEND"))
		return -1;
	/* WRITE_WITH_IMM at an odd offset of the peer's WRITE area */
	pat_fill(src, len, 'W', (uint32_t)r, (uint32_t)q);
	s = (struct send_args){.op = IBV_WR_RDMA_WRITE_WITH_IMM,
			       .wr_id = id | 2,
			       .addr = src,
			       .len = len,
			       .raddr = rbase + off_write() + off,
			       .imm = 0x10000u + (uint32_t)r};
	if (post_send(c, q, &s) || expect_wc(c->scq, id | 2, IBV_WC_RDMA_WRITE, 0, NULL, "WRITE"))
		return -1;
	/* READ it back */
	memset(dst, 0xEE, slot_len());
	s = (struct send_args){.op = IBV_WR_RDMA_READ,
			       .wr_id = id | 3,
			       .addr = dst,
			       .len = len,
			       .raddr = rbase + off_write() + off};
	if (post_send(c, q, &s) || expect_wc(c->scq, id | 3, IBV_WC_RDMA_READ, 0, NULL, "READ") ||
	    pat_check(dst, len, 'W', (uint32_t)r, (uint32_t)q, "READ of the WRITE"))
		return -1;
	if (len < slot_len() && dst[len] != 0xEE)
		return failf("READ wrote past its %u bytes", len);
	/* READ of the server's own pattern (at an offset into it) */
	s = (struct send_args){.op = IBV_WR_RDMA_READ,
			       .wr_id = id | 4,
			       .addr = dst,
			       .len = len,
			       .raddr = rbase + off_rsrc() + off};
	if (post_send(c, q, &s) || expect_wc(c->scq, id | 4, IBV_WC_RDMA_READ, 0, NULL, "READ"))
		return -1;
	for (uint32_t i = 0; i < len; i++)
		if (dst[i] != pat('R', 0, (uint32_t)q, off + i))
			return failf("READ of the server's pattern: byte %u differs", i);
	/* FETCH_ADD: the original value is the sum so far */
	s = (struct send_args){.op = IBV_WR_ATOMIC_FETCH_AND_ADD,
			       .wr_id = id | 5,
			       .addr = &res[0],
			       .len = 8,
			       .raddr = rbase + off_atom(),
			       .swap = (uint64_t)r * 3 + 1};
	if (post_send(c, q, &s) ||
	    expect_wc(c->scq, id | 5, IBV_WC_FETCH_ADD, 0, NULL, "FETCH_ADD"))
		return -1;
	if (res[0] != *ctr0)
		return failf("FETCH_ADD returned %#" PRIx64 ", expected %#" PRIx64, res[0], *ctr0);
	*ctr0 += (uint64_t)r * 3 + 1;
	/* CMP_SWAP that matches, then one that does not */
	s = (struct send_args){.op = IBV_WR_ATOMIC_CMP_AND_SWP,
			       .wr_id = id | 6,
			       .addr = &res[1],
			       .len = 8,
			       .raddr = rbase + off_atom() + 8,
			       .cmp = *ctr1,
			       .swap = *ctr1 * 5 + 7};
	if (post_send(c, q, &s) || expect_wc(c->scq, id | 6, IBV_WC_COMP_SWAP, 0, NULL, "CMP_SWAP"))
		return -1;
	if (res[1] != *ctr1)
		return failf("CMP_SWAP returned %#" PRIx64 ", expected %#" PRIx64, res[1], *ctr1);
	*ctr1 = *ctr1 * 5 + 7;
	s.wr_id = id | 7;
	s.cmp = *ctr1 + 1; /* no match: memory unchanged, the original comes back */
	s.swap = 0xBAD;
	if (post_send(c, q, &s) ||
	    expect_wc(c->scq, id | 7, IBV_WC_COMP_SWAP, 0, NULL, "CMP_SWAP (no match)"))
		return -1;
	if (res[1] != *ctr1)
		return failf("failed CMP_SWAP returned %#" PRIx64 ", expected %#" PRIx64, res[1],
			     *ctr1);
	return 0;
}

/* Rounds [r0, r1) of the data test; round 0 starts with a handshake. */
static int data_client(struct ctx *c, int r0, int r1)
{
	static uint64_t ctr0[MAX_QPS], ctr1[MAX_QPS];

	if (r0 == 0) {
		memset(ctr0, 0, sizeof(ctr0));
		memset(ctr1, 0, sizeof(ctr1));
		if (sync_both(c, 0xA0000000u))
			return -1;
	}
	for (int r = r0; r < r1; r++) {
		for (int q = 0; q < opt.qps; q++)
			if (data_round_client(c, r, q, &ctr0[q], &ctr1[q]))
				return -1;
		/* the server checks its memory now: nothing is in flight */
		if (oob_send(c->oob, ctr0, sizeof(uint64_t) * (size_t)opt.qps) ||
		    oob_send(c->oob, ctr1, sizeof(uint64_t) * (size_t)opt.qps) ||
		    sync_both(c, 0xD0000000u + (uint32_t)r))
			return -1;
		printf("round %d ok\n", r);
	}
	return 0;
}

static int data_server(struct ctx *c, int r0, int r1)
{
	static uint64_t ctr0[MAX_QPS], ctr1[MAX_QPS];
	static unsigned slot[MAX_QPS];

	if (r0 == 0) {
		memset(slot, 0, sizeof(slot));
		for (int q = 0; q < opt.qps; q++) {
			pat_fill(qbuf(c, (unsigned)q, off_rsrc()), slot_len(), 'R', 0, (uint32_t)q);
			for (unsigned k = 0; k < RECV_SLOTS; k++)
				if (post_recv(c, q, ((uint64_t)q << 8) | k,
					      qbuf(c, (unsigned)q, off_recv(k)),
					      (uint32_t)slot_len()))
					return -1;
		}
		if (sync_both(c, 0xA0000000u))
			return -1;
	}
	for (int r = r0; r < r1; r++) {
		/* per QP: the SEND, then the WRITE's immediate (QPs in the client's order) */
		for (int q = 0; q < opt.qps; q++) {
			uint32_t len = msg_len(r, q), off = msg_off(r, q);
			struct ibv_wc wc;
			char what[64];

			for (int m = 0; m < 2; m++) {
				unsigned k = slot[q]++ % RECV_SLOTS;
				uint8_t *p = qbuf(c, (unsigned)q, off_recv(k));

				snprintf(what, sizeof(what), "%s on QP %d round %d",
					 m ? "WRITE_WITH_IMM" : "RECV", q, r);
				if (expect_wc(c->rcq, ((uint64_t)q << 8) | k,
					      m ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV, len, &wc,
					      what))
					return -1;
				if (!(wc.wc_flags & IBV_WC_WITH_IMM) ||
				    ntohl(wc.imm_data) != (m ? 0x10000u : 0) + (uint32_t)r)
					return failf("%s: immediate data missing or wrong", what);
				if (wc.qp_num != c->qp[q]->qp_num)
					return failf("%s: qp_num %#x", what, wc.qp_num);
				if (!m && pat_check(p, len, 'S', (uint32_t)r, (uint32_t)q, what))
					return -1;
				if (m && pat_check(qbuf(c, (unsigned)q, off_write() + off), len,
						   'W', (uint32_t)r, (uint32_t)q, what))
					return -1;
				if (post_recv(c, q, ((uint64_t)q << 8) | k, p,
					      (uint32_t)slot_len()))
					return -1;
			}
		}
		if (oob_recv(c->oob, ctr0, sizeof(uint64_t) * (size_t)opt.qps) ||
		    oob_recv(c->oob, ctr1, sizeof(uint64_t) * (size_t)opt.qps))
			return -1;
		for (int q = 0; q < opt.qps; q++) {
			uint64_t *a = (uint64_t *)qbuf(c, (unsigned)q, off_atom());

			if (a[0] != ctr0[q] || a[1] != ctr1[q])
				return failf("round %d QP %d: atomic counters %#" PRIx64
					     "/%#" PRIx64 ", expected %#" PRIx64 "/%#" PRIx64,
					     r, q, a[0], a[1], ctr0[q], ctr1[q]);
			/* the READ source was never written */
			if (pat_check(qbuf(c, (unsigned)q, off_rsrc()), slot_len(), 'R', 0,
				      (uint32_t)q, "the READ source"))
				return -1;
		}
		if (sync_both(c, 0xD0000000u + (uint32_t)r))
			return -1;
		printf("round %d ok\n", r);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* uc-loss                                                                    */

#define UC_MSGS 2000

struct uc_hdr {
	uint32_t magic, seq, len, pad;
};

static uint32_t uc_len(uint32_t seq, uint32_t mtu)
{
	/* 1 to 4 packets */
	return (uint32_t)sizeof(struct uc_hdr) + (seq * 131u) % (4 * mtu - sizeof(struct uc_hdr));
}

static int uc_client(struct ctx *c)
{
	uint8_t *p = qbuf(c, 0, off_recv(0));
	struct ibv_wc wc;
	uint32_t stop = 0;

	if (sync_both(c, 0xA0000000u))
		return -1;
	for (uint32_t seq = 1;; seq++) {
		uint32_t len = seq <= UC_MSGS ? uc_len(seq, c->mtu_bytes) : sizeof(struct uc_hdr);
		struct uc_hdr h = {UC_MAGIC, seq, len, 0};
		struct send_args s = {.op = IBV_WR_SEND, .wr_id = seq, .addr = p, .len = len};

		pat_fill(p, len, 'U', seq, 0);
		memcpy(p, &h, sizeof(h));
		if (post_send(c, 0, &s) || expect_wc(c->scq, seq, IBV_WC_SEND, 0, &wc, "UC SEND"))
			return -1;
		if (seq < UC_MSGS)
			continue;
		/* after the last message: markers until the server saw one (the
		 * link keeps order, so it has seen everything before it) */
		struct pollfd pf = {.fd = c->oob, .events = POLLIN};

		if (seq == UC_MSGS)
			continue;
		if (poll(&pf, 1, 1) == 1) {
			if (oob_recv(c->oob, &stop, 4))
				return -1;
			break;
		}
		if (seq > UC_MSGS + 1000000)
			return failf("the server never saw an end marker");
	}
	printf("sent %d UC messages, then markers\n", UC_MSGS);
	return stop == 0x5709 ? 0 : failf("bad stop token");
}

static int uc_server(struct ctx *c)
{
	uint32_t last = 0, got = 0, stop = 0x5709;
	bool done = false;

	for (unsigned k = 0; k < UC_RECVS; k++)
		if (post_recv(c, 0, k, qbuf(c, 0, off_recv(k)), (uint32_t)slot_len()))
			return -1;
	if (sync_both(c, 0xA0000000u))
		return -1;
	while (!done) {
		struct ibv_wc wc;
		struct uc_hdr h;
		uint8_t *p;

		if (wait_wc(c->rcq, &wc, "UC receive"))
			return -1;
		if (wc.status != IBV_WC_SUCCESS || wc.wr_id >= UC_RECVS)
			return failf("UC receive: status %s wr_id %" PRIu64, st(wc.status),
				     wc.wr_id);
		p = qbuf(c, 0, off_recv((unsigned)wc.wr_id));
		memcpy(&h, p, sizeof(h));
		if (wc.byte_len < sizeof(h) || h.magic != UC_MAGIC || h.len != wc.byte_len)
			return failf("UC message of %u bytes with a damaged header", wc.byte_len);
		if (h.seq <= last)
			return failf("UC message %u after %u: duplicated or reordered", h.seq,
				     last);
		if (h.seq <= UC_MSGS) {
			if (h.len != uc_len(h.seq, c->mtu_bytes))
				return failf("UC message %u: %u bytes", h.seq, h.len);
			for (uint32_t i = sizeof(h); i < h.len; i++)
				if (p[i] != pat('U', h.seq, 0, i))
					return failf("UC message %u damaged at byte %u", h.seq, i);
			got++;
		} else {
			done = true;
		}
		last = h.seq;
		if (post_recv(c, 0, wc.wr_id, p, (uint32_t)slot_len()))
			return -1;
	}
	if (oob_send(c->oob, &stop, 4))
		return -1;
	printf("UC: %u of %d messages delivered intact and in order, %u lost\n", got, UC_MSGS,
	       UC_MSGS - got);
	if (got == 0)
		return failf("no UC message delivered");
	return 0;
}

/* ------------------------------------------------------------------------ */
/* threads                                                                    */

#define THR_MSGS  2000
#define THR_DEPTH 64
#define THR_MAX	  16

struct thr_shared {
	struct ctx *c;
	atomic_int inflight;
	atomic_uint done;
	atomic_uchar *seen; /* per wr_id */
	atomic_int failed;
	unsigned total;
};

struct thr_arg {
	struct thr_shared *sh;
	unsigned id;
};

/* Every message and every READ has its own 256-byte slot of the buffer:
 * SEND sources from 0, READ destinations after them. */
static uint8_t *thr_slot(struct ctx *c, unsigned total, uint64_t id, bool read)
{
	return qbuf(c, 0, 0) + ((read ? total : 0) + id) * 256;
}

/* Reap what is there from the shared send CQ. */
static int thr_reap(struct thr_shared *sh)
{
	struct ibv_wc wc[8];
	int n = ibv_poll_cq(sh->c->scq, 8, wc);

	for (int i = 0; i < n; i++) {
		uint64_t id = wc[i].wr_id;

		if (wc[i].status != IBV_WC_SUCCESS)
			return failf("threads: completion status %s", st(wc[i].status));
		if (id >= sh->total || atomic_exchange(&sh->seen[id], 1))
			return failf("threads: wr_id %" PRIu64 " completed twice or never posted",
				     id);
		if (wc[i].opcode == IBV_WC_RDMA_READ) {
			unsigned k = (unsigned)(id % THR_MSGS);
			uint8_t *d = thr_slot(sh->c, sh->total, id, true);

			for (unsigned b = 0; b < 256; b++)
				if (d[b] != pat('R', 0, 0, (k % 64) * 256 + b))
					return failf("threads: READ %" PRIu64 " data differs", id);
		}
		atomic_fetch_sub(&sh->inflight, 1);
		atomic_fetch_add(&sh->done, 1);
	}
	return n < 0 ? failf("ibv_poll_cq failed") : 0;
}

static void *thr_client(void *arg)
{
	struct thr_arg *a = arg;
	struct thr_shared *sh = a->sh;
	struct ctx *c = sh->c;
	double end = now_s() + WAIT_SECONDS;

	for (unsigned k = 0; k < THR_MSGS && !atomic_load(&sh->failed);) {
		uint64_t id = (uint64_t)a->id * THR_MSGS + k;
		struct send_args s;

		/* the send queue holds THR_DEPTH: reap (anyone's) completions first */
		if (atomic_fetch_add(&sh->inflight, 1) >= THR_DEPTH) {
			atomic_fetch_sub(&sh->inflight, 1);
			if (thr_reap(sh) || now_s() > end) {
				if (now_s() > end)
					failf("threads: no room in the send queue for %d s",
					      WAIT_SECONDS);
				atomic_store(&sh->failed, 1);
			}
			continue;
		}
		if (k % 4 == 3) {
			/* one in four: a READ of 256 bytes of the server's pattern */
			s = (struct send_args){.op = IBV_WR_RDMA_READ,
					       .wr_id = id,
					       .addr = thr_slot(c, sh->total, id, true),
					       .len = 256,
					       .raddr = c->peer.addr + off_rsrc() + (k % 64) * 256};
		} else {
			uint8_t *src = thr_slot(c, sh->total, id, false);
			uint32_t hdr[2] = {a->id, k};

			pat_fill(src, 200, 'T', a->id, k);
			memcpy(src, hdr, sizeof(hdr));
			s = (struct send_args){
			    .op = IBV_WR_SEND, .wr_id = id, .addr = src, .len = 200};
		}
		if (post_send(c, 0, &s)) {
			atomic_store(&sh->failed, 1);
			break;
		}
		k++;
	}
	while (atomic_load(&sh->done) < sh->total && !atomic_load(&sh->failed)) {
		if (thr_reap(sh))
			atomic_store(&sh->failed, 1);
		if (now_s() > end) {
			failf("threads: %u of %u completions after %d s", atomic_load(&sh->done),
			      sh->total, WAIT_SECONDS);
			atomic_store(&sh->failed, 1);
		}
	}
	return NULL;
}

static int threads_client(struct ctx *c)
{
	struct thr_shared sh = {.c = c, .total = (unsigned)opt.threads * THR_MSGS};
	pthread_t t[THR_MAX];
	struct thr_arg a[THR_MAX];

	sh.seen = calloc(sh.total, 1);
	if (!sh.seen)
		return failf("out of memory");
	if (sync_both(c, 0xA0000000u))
		return -1;
	for (int i = 0; i < opt.threads; i++) {
		a[i] = (struct thr_arg){&sh, (unsigned)i};
		pthread_create(&t[i], NULL, thr_client, &a[i]);
	}
	for (int i = 0; i < opt.threads; i++)
		pthread_join(t[i], NULL);
	free(sh.seen);
	if (atomic_load(&sh.failed))
		return -1;
	printf("threads: %u WRs posted by %d threads to one QP, each completed once\n", sh.total,
	       opt.threads);
	return sync_both(c, 0xE0000000u);
}

struct thr_srv {
	struct ctx *c;
	atomic_uint got;
	atomic_uchar *seen;
	atomic_int failed;
	unsigned expect;
};

static void *thr_server(void *arg)
{
	struct thr_srv *sv = arg;
	struct ctx *c = sv->c;
	double end = now_s() + WAIT_SECONDS;

	while (atomic_load(&sv->got) < sv->expect && !atomic_load(&sv->failed)) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(c->rcq, 1, &wc);
		uint8_t *p;
		uint32_t hdr[2];

		if (n == 0) {
			if (now_s() > end) {
				failf("threads server: %u of %u messages", atomic_load(&sv->got),
				      sv->expect);
				atomic_store(&sv->failed, 1);
			}
			continue;
		}
		if (n < 0 || wc.status != IBV_WC_SUCCESS || wc.byte_len != 200) {
			failf("threads server: receive status %s, %u bytes", st(wc.status),
			      wc.byte_len);
			atomic_store(&sv->failed, 1);
			break;
		}
		p = qbuf(c, 0, 0) + wc.wr_id * 256;
		memcpy(hdr, p, sizeof(hdr));
		if (hdr[0] >= (unsigned)opt.threads || hdr[1] >= THR_MSGS ||
		    atomic_exchange(&sv->seen[hdr[0] * THR_MSGS + hdr[1]], 1)) {
			failf("threads server: message %u/%u twice or unknown", hdr[0], hdr[1]);
			atomic_store(&sv->failed, 1);
			break;
		}
		for (unsigned i = sizeof(hdr); i < 200; i++)
			if (p[i] != pat('T', hdr[0], hdr[1], i)) {
				failf("threads server: message %u/%u damaged", hdr[0], hdr[1]);
				atomic_store(&sv->failed, 1);
				break;
			}
		atomic_fetch_add(&sv->got, 1);
		/* several threads post to the one QP's receive queue at once */
		if (post_recv(c, 0, wc.wr_id, p, 256))
			atomic_store(&sv->failed, 1);
	}
	return NULL;
}

static int threads_server(struct ctx *c)
{
	struct thr_srv sv = {.c = c, .expect = (unsigned)opt.threads * (THR_MSGS - THR_MSGS / 4)};
	pthread_t t[THR_MAX];
	unsigned nrecv = 256;
	sv.seen = calloc((size_t)opt.threads * THR_MSGS, 1);
	if (!sv.seen)
		return failf("out of memory");
	pat_fill(qbuf(c, 0, off_rsrc()), 64 * 256, 'R', 0, 0);
	for (unsigned k = 0; k < nrecv; k++)
		if (post_recv(c, 0, k, qbuf(c, 0, 0) + k * 256, 256))
			return -1;
	if (sync_both(c, 0xA0000000u))
		return -1;
	for (int i = 0; i < opt.threads; i++)
		pthread_create(&t[i], NULL, thr_server, &sv);
	for (int i = 0; i < opt.threads; i++)
		pthread_join(t[i], NULL);
	free(sv.seen);
	if (atomic_load(&sv.failed))
		return -1;
	printf("threads: %u messages received once each by %d polling threads\n", sv.expect,
	       opt.threads);
	return sync_both(c, 0xE0000000u);
}

/* ------------------------------------------------------------------------ */
/* srq-limit                                                                  */

#define SRQ_WRS	  64
#define SRQ_LIMIT 16

static int srq_client(struct ctx *c, unsigned n, uint32_t token)
{
	uint8_t *p = qbuf(c, 0, off_recv(0));

	for (unsigned i = 0; i < n; i++) {
		struct send_args s = {.op = IBV_WR_SEND, .wr_id = i, .addr = p, .len = 32};

		pat_fill(p, 32, 'Q', i, token);
		if (post_send(c, 0, &s) || expect_wc(c->scq, i, IBV_WC_SEND, 0, NULL, "SEND"))
			return -1;
	}
	return sync_both(c, token);
}

static int srq_limit_client(struct ctx *c)
{
	/* 48 messages leave the SRQ at its limit (64 - 48 = 16); one more goes below */
	return sync_both(c, 0xA0000000u) || srq_client(c, SRQ_WRS - SRQ_LIMIT, 1) ||
		       srq_client(c, 1, 2) || srq_client(c, 20, 3)
		   ? -1
		   : 0;
}

static int srq_take(struct ctx *c, unsigned n, uint32_t token)
{
	for (unsigned i = 0; i < n; i++) {
		struct ibv_wc wc;

		if (wait_wc(c->rcq, &wc, "SRQ receive"))
			return -1;
		if (wc.status != IBV_WC_SUCCESS || wc.byte_len != 32)
			return failf("SRQ receive: %s, %u bytes", st(wc.status), wc.byte_len);
		if (pat_check(qbuf(c, 0, 0) + wc.wr_id * 64, 32, 'Q', i, token, "SRQ message"))
			return -1;
	}
	return 0;
}

static int srq_limit_server(struct ctx *c)
{
	struct ibv_srq_attr sa = {.srq_limit = SRQ_LIMIT};

	for (unsigned k = 0; k < SRQ_WRS; k++)
		if (post_recv(c, 0, k, qbuf(c, 0, 0) + k * 64, 64))
			return -1;
	if (ibv_modify_srq(c->srq, &sa, IBV_SRQ_LIMIT))
		return failf("ibv_modify_srq(IBV_SRQ_LIMIT) failed");
	memset(&sa, 0, sizeof(sa));
	if (ibv_query_srq(c->srq, &sa) || sa.srq_limit != SRQ_LIMIT)
		return failf("ibv_query_srq: limit %u, expected %d", sa.srq_limit, SRQ_LIMIT);
	if (sync_both(c, 0xA0000000u))
		return -1;
	/* down to the limit: no event yet (every completion is in, so an event
	 * raised by the last of them would be queued already) */
	if (srq_take(c, SRQ_WRS - SRQ_LIMIT, 1) || expect_no_async(c, "at the SRQ limit") ||
	    sync_both(c, 1))
		return -1;
	/* one below: the event, exactly once; the limit disarms */
	if (srq_take(c, 1, 2) || expect_async(c, IBV_EVENT_SRQ_LIMIT_REACHED, c->srq) ||
	    sync_both(c, 2))
		return -1;
	if (ibv_query_srq(c->srq, &sa) || sa.srq_limit != 0)
		return failf("the SRQ limit reads %u after the event, expected 0 (disarmed)",
			     sa.srq_limit);
	/* refill, and consume more without arming again: no second event */
	for (unsigned k = 0; k < 20; k++)
		if (post_recv(c, 0, 100 + k, qbuf(c, 0, 0) + k * 64, 64))
			return -1;
	for (unsigned i = 0; i < 20; i++) {
		struct ibv_wc wc;

		if (wait_wc(c->rcq, &wc, "SRQ receive") || wc.status != IBV_WC_SUCCESS)
			return failf("SRQ receive after the refill failed");
	}
	if (expect_no_async(c, "after the limit disarmed") || sync_both(c, 3))
		return -1;
	printf("srq-limit: SRQ_LIMIT_REACHED once, below the limit of %d, then disarmed\n",
	       SRQ_LIMIT);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* cq-overflow                                                                */

#define OVF_EXTRA 6

static int ovf_client(struct ctx *c)
{
	uint8_t *p = qbuf(c, 0, off_recv(0));
	int n, ok = 0, bad = 0;

	if (oob_recv(c->oob, &n, sizeof(n)) || sync_both(c, 0xA0000000u))
		return -1;
	for (int i = 0; i < n; i++) {
		struct send_args s = {
		    .op = IBV_WR_SEND, .wr_id = (uint64_t)i, .addr = p, .len = 16};

		if (post_send(c, 0, &s))
			return -1;
	}
	/* every WR completes: successes while the server's QP lived, then an
	 * error (RETRY_EXC: its QP went to ERR and stays silent) and flushes */
	for (int i = 0; i < n; i++) {
		struct ibv_wc wc;

		if (wait_wc(c->scq, &wc, "SEND"))
			return -1;
		if (wc.wr_id != (uint64_t)i)
			return failf("send completion %d has wr_id %" PRIu64, i, wc.wr_id);
		if (wc.status == IBV_WC_SUCCESS && bad == 0)
			ok++;
		else if (wc.status == IBV_WC_SUCCESS)
			return failf("a success after an error");
		else
			bad++;
	}
	printf("cq-overflow client: %d sends completed, %d with success\n", n, ok);
	return sync_both(c, 0xE0000000u);
}

static int ovf_server(struct ctx *c)
{
	int cap = c->rcq->cqe, n = cap + OVF_EXTRA;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;

	for (int k = 0; k < n; k++)
		if (post_recv(c, 0, (uint64_t)k, qbuf(c, 0, 0) + k * 64, 64))
			return -1;
	if (oob_send(c->oob, &n, sizeof(n)) || sync_both(c, 0xA0000000u))
		return -1;
	/* nobody polls the receive CQ: it overflows */
	if (expect_async(c, IBV_EVENT_CQ_ERR, c->rcq) ||
	    expect_async(c, IBV_EVENT_QP_FATAL, c->qp[0]))
		return -1;
	if (ibv_query_qp(c->qp[0], &qa, IBV_QP_STATE, &qi) || qa.qp_state != IBV_QPS_ERR)
		return failf("the QP of the overflowed CQ is in state %d, expected ERR",
			     qa.qp_state);
	/* the entries queued before the overrun are intact, in order */
	for (int k = 0; k < cap; k++) {
		struct ibv_wc wc;

		if (ibv_poll_cq(c->rcq, 1, &wc) != 1)
			return failf("only %d of the %d queued completions are there", k, cap);
		if (wc.wr_id != (uint64_t)k || wc.status != IBV_WC_SUCCESS || wc.byte_len != 16)
			return failf("queued completion %d: wr_id %" PRIu64 " status %s", k,
				     wc.wr_id, st(wc.status));
	}
	printf("cq-overflow: CQ_ERR and QP_FATAL read from the async queue, %d entries intact\n",
	       cap);
	return sync_both(c, 0xE0000000u);
}

/* ------------------------------------------------------------------------ */
/* fork                                                                       */

static int fork_child(struct ctx *c)
{
	pid_t pid;
	int status;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return failf("fork: %s", strerror(errno));
	if (pid == 0) {
		/* the child dirties the registered pages (copy-on-write) and
		 * leaves the way a program does: atexit handlers and all */
		memset(c->buf, 0x5A, c->buf_len);
		exit(0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return failf("the forked child failed (status %#x)", status);
	for (size_t i = 0; i < c->buf_len; i += 4096)
		if (c->buf[i] == 0x5A && c->buf[i + 1] == 0x5A && c->buf[i + 2] == 0x5A &&
		    c->buf[i + 3] == 0x5A)
			return failf("the child's writes reached the parent's memory");
	printf("fork: child with the device open and memory registered exited cleanly\n");
	return 0;
}

/* ------------------------------------------------------------------------ */
/* mw                                                                         */

#define MW_WRITE_LEN (4096 + 5) /* several packets at any MTU */
#define MW_READ_LEN  3000
#define MW_TAG	     0x4D57u

/* What the server tells the client of its window. */
struct mw_grant {
	uint32_t rkey, pad;
	uint64_t addr, len;
};

/* A SEND with Invalidate of rkey (send_args with the IETH R_Key). */
static int post_send_inv(struct ctx *c, const struct send_args *s, uint32_t rkey)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->addr, .length = s->len, .lkey = c->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = s->wr_id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = s->op,
				 .send_flags = IBV_SEND_SIGNALED,
				 .invalidate_rkey = rkey},
			   *bad;
	int rc = ibv_post_send(c->qp[0], &wr, &bad);

	return rc ? failf("post_send (SEND with Invalidate): %s", strerror(rc)) : 0;
}

/* The client's WRITE or READ through the window; its completion status. */
static int mw_access(struct ctx *c, enum ibv_wr_opcode op, uint8_t *local, uint32_t len,
		     uint64_t raddr, uint32_t rkey, enum ibv_wc_status *status)
{
	struct ibv_sge sge = {.addr = (uintptr_t)local, .length = len, .lkey = c->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = op,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;
	int rc;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	rc = ibv_post_send(c->qp[0], &wr, &bad);
	if (rc)
		return failf("post_send through the window: %s", strerror(rc));
	if (wait_wc(c->scq, &wc, "window access"))
		return -1;
	if (wc.wr_id != (uint64_t)op)
		return failf("window access: wr_id %#" PRIx64, wc.wr_id);
	*status = wc.status;
	return 0;
}

/*
 * Client: WRITE and READ through the server's type 2 window; a SEND with
 * Invalidate of its R_Key; then a WRITE through it must fail with
 * IBV_WC_REM_ACCESS_ERR.
 */
static int mw_client(struct ctx *c)
{
	uint8_t *src = qbuf(c, 0, off_recv(0)), *dst = qbuf(c, 0, off_rdst());
	struct mw_grant g;
	enum ibv_wc_status s;
	struct send_args inv = {
	    .op = IBV_WR_SEND_WITH_INV, .wr_id = 0x1417, .addr = src, .len = 16};

	if (oob_recv(c->oob, &g, sizeof(g)))
		return -1;
	pat_fill(src, MW_WRITE_LEN, MW_TAG, 1, 0);
	if (mw_access(c, IBV_WR_RDMA_WRITE, src, MW_WRITE_LEN, g.addr, g.rkey, &s))
		return -1;
	if (s != IBV_WC_SUCCESS)
		return failf("WRITE through the window: %s", st(s));
	memset(dst, 0, MW_READ_LEN);
	if (mw_access(c, IBV_WR_RDMA_READ, dst, MW_READ_LEN, g.addr + g.len - MW_READ_LEN, g.rkey,
		      &s))
		return -1;
	if (s != IBV_WC_SUCCESS)
		return failf("READ through the window: %s", st(s));
	if (pat_check(dst, MW_READ_LEN, MW_TAG, 2, 0, "READ through the window"))
		return -1;
	printf("mw: WRITE of %d and READ of %d bytes through the window 0x%x\n", MW_WRITE_LEN,
	       MW_READ_LEN, g.rkey);
	if (sync_both(c, 0x4D570001u))
		return -1;
	/* the server's peer revokes the window */
	if (post_send_inv(c, &inv, g.rkey) ||
	    expect_wc(c->scq, inv.wr_id, IBV_WC_SEND, 0, NULL, "SEND with Invalidate"))
		return -1;
	if (sync_both(c, 0x4D570002u))
		return -1;
	if (mw_access(c, IBV_WR_RDMA_WRITE, src, 64, g.addr, g.rkey, &s))
		return -1;
	if (s != IBV_WC_REM_ACCESS_ERR)
		return failf("WRITE through the invalidated window: %s, expected %s", st(s),
			     st(IBV_WC_REM_ACCESS_ERR));
	printf("mw: WRITE after the invalidation: %s\n", st(s));
	return sync_both(c, 0x4D570003u);
}

/*
 * Server: a type 2 window bound through its QP over part of its buffer (the
 * region has no remote right: only the window grants them); the client's
 * WRITE lands in it, its READ gets the pattern; the client's SEND with
 * Invalidate completes with IBV_WC_WITH_INV and the window's R_Key; the
 * client's WRITE after that changes no byte.
 */
static int mw_server(struct ctx *c)
{
	uint8_t *win = qbuf(c, 0, off_write()), *snap;
	uint64_t len = 3 * slot_len();
	struct ibv_send_wr bind = {.wr_id = 0xB1D,
				   .opcode = IBV_WR_BIND_MW,
				   .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct mw_grant g;
	struct ibv_wc wc;
	struct ibv_mw *mw;
	int rc;

	mw = ibv_alloc_mw(c->pd, IBV_MW_TYPE_2);
	if (!mw)
		return failf("ibv_alloc_mw: %s", strerror(errno));
	g = (struct mw_grant){.rkey = ibv_inc_rkey(mw->rkey), .addr = (uintptr_t)win, .len = len};
	bind.bind_mw.mw = mw;
	bind.bind_mw.rkey = g.rkey;
	bind.bind_mw.bind_info = (struct ibv_mw_bind_info){
	    .mr = c->mr,
	    .addr = g.addr,
	    .length = len,
	    .mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
	memset(win, 0, len);
	pat_fill(win + len - MW_READ_LEN, MW_READ_LEN, MW_TAG, 2, 0);
	rc = ibv_post_send(c->qp[0], &bind, &bad);
	if (rc)
		return failf("IBV_WR_BIND_MW: %s", strerror(rc));
	if (expect_wc(c->scq, bind.wr_id, IBV_WC_BIND_MW, 0, NULL, "bind"))
		return -1;
	if (post_recv(c, 0, 0x2EC, qbuf(c, 0, off_recv(0)), (uint32_t)slot_len()))
		return -1;
	if (oob_send(c->oob, &g, sizeof(g)) || sync_both(c, 0x4D570001u))
		return -1;
	if (pat_check(win, MW_WRITE_LEN, MW_TAG, 1, 0, "WRITE through the window"))
		return -1;
	if (expect_wc(c->rcq, 0x2EC, IBV_WC_RECV, 16, &wc, "SEND with Invalidate"))
		return -1;
	if (!(wc.wc_flags & IBV_WC_WITH_INV) || wc.invalidated_rkey != g.rkey)
		return failf("receive completion: flags %#x, invalidated_rkey %#x, expected "
			     "IBV_WC_WITH_INV of %#x",
			     wc.wc_flags, wc.invalidated_rkey, g.rkey);
	printf("mw: the peer's SEND with Invalidate freed the window 0x%x\n", g.rkey);
	snap = malloc(len);
	if (!snap)
		return failf("out of memory");
	memcpy(snap, win, len);
	rc = sync_both(c, 0x4D570002u) || sync_both(c, 0x4D570003u);
	if (rc == 0 && memcmp(snap, win, len) != 0)
		rc = failf("the WRITE through the invalidated window changed bytes");
	free(snap);
	if (rc == 0 && ibv_dealloc_mw(mw))
		rc = failf("ibv_dealloc_mw failed");
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Sessions                                                                   */

/* Both ends' QP numbers, PSNs, GID, address and key; only the QPs in use
 * cross (a few bytes for one QP: no segmentation offload on a veth). */
static int exchange(struct ctx *c)
{
	size_t fixed = offsetof(struct end_info, qpn), n = (size_t)opt.qps * 4;

	if (oob_send(c->oob, &c->me, fixed) || oob_send(c->oob, c->me.qpn, n) ||
	    oob_send(c->oob, c->me.psn, n) || oob_recv(c->oob, &c->peer, fixed))
		return -1;
	if (c->peer.nqp != (uint32_t)opt.qps)
		return failf("the peer has %u QPs, we have %d", c->peer.nqp, opt.qps);
	return oob_recv(c->oob, c->peer.qpn, n) || oob_recv(c->oob, c->peer.psn, n) ? -1 : 0;
}

enum test { T_DATA, T_UC, T_THREADS, T_SRQ, T_OVF, T_FORK, T_MW };

static enum test test_kind(void)
{
	static const char *const names[] = {"data",	   "uc-loss", "threads", "srq-limit",
					    "cq-overflow", "fork",    "mw"};

	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(opt.test, names[i]))
			return (enum test)i;
	fprintf(stderr, "pair_check: unknown test %s\n", opt.test);
	exit(2);
}

static int session(struct ctx *c, int oob)
{
	enum test t = test_kind();
	uint8_t timeout = 14, retry = 7;
	int rc = -1;

	c->oob = oob;
	g_oob = oob;
	g_slots = RECV_SLOTS;
	if (t == T_UC) {
		g_slots = UC_RECVS;
		opt.max_size = 4 * 4096;
	} else if (t == T_THREADS) {
		/* a 256-byte slot per message and per READ, in the receive slots */
		g_slots = 2;
		opt.max_size = (size_t)opt.threads * THR_MSGS * 256;
	} else if (t == T_SRQ || t == T_OVF) {
		opt.max_size = 64 * 64;
	}
	c->qp_type = t == T_UC ? IBV_QPT_UC : IBV_QPT_RC;
	c->scq_len = 256;
	c->rcq_len = t == T_OVF && c->server ? 4 : 1024;
	c->send_depth = t == T_THREADS ? THR_DEPTH + 8 : 16;
	c->recv_depth = t == T_THREADS ? 256 : t == T_UC ? UC_RECVS : RECV_SLOTS + 4;
	if (t == T_OVF) {
		c->recv_depth = 64;
		timeout = 10; /* the server's QP dies: do not wait long for it */
		retry = 1;
	}
	if (make_cqs_and_mr(c))
		return -1;
	if (t == T_SRQ && c->server) {
		struct ibv_srq_init_attr si = {.attr = {.max_wr = SRQ_WRS, .max_sge = 1}};

		c->srq = ibv_create_srq(c->pd, &si);
		if (!c->srq)
			return failf("ibv_create_srq failed");
	}
	if (make_qps(c))
		return -1;
	if (exchange(c) || connect_qps(c, timeout, retry) || sync_both(c, 0x52545300u))
		return -1;
	switch (t) {
	case T_DATA:
		rc = c->server ? data_server(c, 0, opt.rounds) : data_client(c, 0, opt.rounds);
		break;
	case T_UC:
		rc = c->server ? uc_server(c) : uc_client(c);
		break;
	case T_THREADS:
		rc = c->server ? threads_server(c) : threads_client(c);
		break;
	case T_SRQ:
		rc = c->server ? srq_limit_server(c) : srq_limit_client(c);
		break;
	case T_OVF:
		rc = c->server ? ovf_server(c) : ovf_client(c);
		break;
	case T_MW:
		rc = c->server ? mw_server(c) : mw_client(c);
		break;
	case T_FORK: {
		/* one round, the client forks, then the other rounds */
		char f = 'F';

		if (c->server)
			rc = data_server(c, 0, 1) || oob_recv(c->oob, &f, 1) ||
			     data_server(c, 1, opt.rounds);
		else
			rc = data_client(c, 0, 1) || fork_child(c) || oob_send(c->oob, &f, 1) ||
			     data_client(c, 1, opt.rounds);
		break;
	}
	}
	return rc;
}

static int run_server(struct ctx *c)
{
	int lfd = oob_listen(), rc = -1;

	if (lfd < 0)
		return -1;
	printf("pair_check: server listening (%s test, %d QPs)\n", opt.test, opt.qps);
	fflush(stdout);
	for (int s = 1; s <= opt.sessions; s++) {
		int fd = accept(lfd, NULL, NULL);

		if (fd < 0)
			return failf("accept: %s", strerror(errno));
		g_why[0] = 0;
		rc = session(c, fd);
		printf("session %d: %s%s%s\n", s, rc ? "FAIL" : "PASS", rc ? ": " : "", g_why);
		fflush(stdout);
		close(fd);
		destroy_session(c);
	}
	close(lfd);
	return rc;
}

int main(int argc, char **argv)
{
	struct ctx c = {0};
	int ch, rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((ch = getopt(argc, argv, "p:u:g:t:q:n:s:T:l:d:6c")) != -1) {
		switch (ch) {
		case 'p':
			opt.port = atoi(optarg);
			break;
		case 'u':
			opt.sock_path = optarg;
			break;
		case 'g':
			opt.gid_index = atoi(optarg);
			break;
		case 't':
			opt.test = optarg;
			break;
		case 'q':
			opt.qps = atoi(optarg);
			break;
		case 'n':
			opt.rounds = atoi(optarg);
			break;
		case 's':
			opt.max_size = strtoul(optarg, NULL, 0);
			break;
		case 'T':
			opt.threads = atoi(optarg);
			break;
		case 'l':
			opt.sessions = atoi(optarg);
			break;
		case 'd':
			opt.dev_name = optarg;
			break;
		case '6':
			opt.want_v6 = true;
			break;
		case 'c':
			opt.client = true;
			break;
		default:
			fprintf(stderr,
				"usage: %s [-p PORT | -u SOCKET] [-g GID] [-t TEST] [-q QPS] "
				"[-n ROUNDS] [-s MAXSIZE] [-T THREADS] [-l SESSIONS] "
				"[-d DEVICE] [-6] [-c] [SERVER]\n",
				argv[0]);
			return 2;
		}
	}
	if (optind < argc)
		opt.server = argv[optind];
	if (opt.qps < 1 || opt.qps > MAX_QPS || opt.threads < 1 || opt.threads > THR_MAX ||
	    opt.max_size < 256) {
		fprintf(stderr, "pair_check: bad -q, -T or -s\n");
		return 2;
	}
	test_kind();
	if (strcmp(opt.test, "data") && strcmp(opt.test, "fork") && opt.qps != 1) {
		fprintf(stderr, "pair_check: -q applies to the data and fork tests only\n");
		return 2;
	}
	srand((unsigned)getpid());
	c.server = opt.server == NULL && !opt.client;
	if (!c.server && !opt.server && !opt.sock_path) {
		fprintf(stderr, "pair_check: a client needs the server's address or -u\n");
		return 2;
	}
	if (open_device(&c))
		return 1;
	printf("pair_check: %s on %s, GID %d %s\n", c.server ? "server" : "client",
	       ibv_get_device_name(c.dev->device), opt.gid_index,
	       inet_ntop(AF_INET6, c.gid.raw, (char[64]){0}, 64));
	if (!strcmp(opt.test, "fork") && ibv_fork_init())
		return failf("ibv_fork_init failed"), 1;
	if (c.server) {
		rc = run_server(&c);
	} else {
		int fd = oob_connect();

		if (fd < 0)
			return 1;
		rc = session(&c, fd);
		if (rc == 0)
			printf("PASS: %s\n", opt.test);
		close(fd);
		destroy_session(&c);
	}
	ibv_dealloc_pd(c.pd);
	ibv_close_device(c.dev);
	return rc ? 1 : 0;
}
