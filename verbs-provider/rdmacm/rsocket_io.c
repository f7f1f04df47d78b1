/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rsockets data path: the queue pair and buffers of a connection, posting
 * what rsocket_stream.c decides (data and control messages as RDMA WRITE
 * WITH IMMEDIATE, direct writes as RDMA WRITE), completion processing,
 * waiting, and the calls rsend/rrecv and friends, riomap/riounmap/riowrite.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rsocket.h>

#include "cma.h"
#include "rsocket_int.h"

#define RS_MAX_TRANSFER	   65536 /* the largest data message */
#define RS_OLAP_START_SIZE 2048	 /* the first message of a send: small, to start early */
#define RS_WR_RECV	   (1ull << 63)

static uint64_t send_wr_id(enum rs_send_kind kind, uint32_t arg)
{
	return (uint64_t)kind << 32 | arg;
}

/* ------------------------------------------------------------------------ */
/* Waking blocked threads                                                     */

static pthread_mutex_t sig_lock = PTHREAD_MUTEX_INITIALIZER;
static int sig_fd = -1;
static unsigned sig_blocked;
static bool sig_raised;

int rs_signal_fd(void)
{
	pthread_mutex_lock(&sig_lock);
	if (sig_fd < 0)
		sig_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	int fd = sig_fd;
	pthread_mutex_unlock(&sig_lock);
	return fd;
}

/* A raised signal stays readable until every thread blocked when it was
 * raised has left; a thread arriving meanwhile lets them leave first. */
void rs_blocked_enter(void)
{
	pthread_mutex_lock(&sig_lock);
	while (sig_raised) {
		pthread_mutex_unlock(&sig_lock);
		sched_yield();
		pthread_mutex_lock(&sig_lock);
	}
	sig_blocked++;
	pthread_mutex_unlock(&sig_lock);
}

void rs_blocked_exit(void)
{
	uint64_t v;

	pthread_mutex_lock(&sig_lock);
	if (--sig_blocked == 0 && sig_raised) {
		if (read(sig_fd, &v, sizeof(v)) < 0)
			v = 0;
		sig_raised = false;
	}
	pthread_mutex_unlock(&sig_lock);
}

void rs_signal_blocked(void)
{
	uint64_t one = 1;

	if (!__atomic_load_n(&sig_blocked, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&sig_lock);
	if (sig_blocked && !sig_raised && write(sig_fd, &one, sizeof(one)) == sizeof(one))
		sig_raised = true;
	pthread_mutex_unlock(&sig_lock);
}

/* ------------------------------------------------------------------------ */
/* The endpoint: CQ, QP, buffers                                              */

static void *page_alloc(size_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	void *p = NULL;

	len = (len + (size_t)page - 1) / (size_t)page * (size_t)page;
	if (posix_memalign(&p, (size_t)page, len))
		return NULL;
	memset(p, 0, len);
	return p;
}

static int post_recvs(struct rsocket *rs, int n)
{
	struct ibv_recv_wr wr = {.wr_id = RS_WR_RECV, .num_sge = 0}, *bad;

	for (int i = 0; i < n; i++)
		if (ibv_post_recv(rs->qp, &wr, &bad))
			return -ENOMEM;
	return 0;
}

static uint16_t clamp_q(unsigned v, unsigned max)
{
	if (v < 16)
		v = 16;
	if (v > max)
		v = max;
	return (uint16_t)v;
}

int rs_create_ep(struct rsocket *rs)
{
	struct ibv_device_attr da;
	struct ibv_context *ctx = rs->id->verbs;

	if (!ctx || ibv_query_device(ctx, &da))
		return -ENODEV;
	unsigned max_q = da.max_qp_wr < 0xfffe ? (unsigned)da.max_qp_wr : 0xfffe;
	rs->opt.sq_size = clamp_q(rs->opt.sq_size, max_q);
	rs->opt.rq_size = clamp_q(rs->opt.rq_size, max_q);
	if (rs->opt.rbuf_size < 2 * RS_SNDLOWAT)
		rs->opt.rbuf_size = 2 * RS_SNDLOWAT;
	rs->opt.rbuf_size &= ~1u;
	if (rs->opt.sbuf_size < 2 * RS_SNDLOWAT)
		rs->opt.sbuf_size = 2 * RS_SNDLOWAT;

	rs->cq_ch = ibv_create_comp_channel(ctx);
	if (!rs->cq_ch)
		return -errno;
	int fl = fcntl(rs->cq_ch->fd, F_GETFL);
	if (fl < 0 || fcntl(rs->cq_ch->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	rs->cq = ibv_create_cq(ctx, rs->opt.sq_size + rs->opt.rq_size, rs, rs->cq_ch, 0);
	if (!rs->cq)
		return -errno;
	/* Control payloads (16-byte SGE, 24-byte iomap entry) always go inline;
	 * RDMA_INLINE only decides for data. */
	struct ibv_qp_init_attr qa = {.qp_context = rs,
				      .send_cq = rs->cq,
				      .recv_cq = rs->cq,
				      .qp_type = IBV_QPT_RC,
				      .sq_sig_all = 1,
				      .cap = {.max_send_wr = rs->opt.sq_size,
					      .max_recv_wr = rs->opt.rq_size,
					      .max_send_sge = 2,
					      .max_recv_sge = 1,
					      .max_inline_data = rs->opt.sq_inline > RS_IOMAP_LEN
								     ? rs->opt.sq_inline
								     : RS_IOMAP_LEN}};
	if (rdma_create_qp(rs->id, NULL, &qa))
		return -errno;
	rs->qp = rs->id->qp;
	if (rs->opt.sq_inline > qa.cap.max_inline_data)
		rs->opt.sq_inline = qa.cap.max_inline_data;

	rs->target_len = RS_SGL_SIZE * RS_SGE_LEN + (size_t)rs->opt.iomap_size * RS_IOMAP_LEN;
	rs->rbuf = page_alloc(rs->opt.rbuf_size);
	rs->sbuf = page_alloc(rs->opt.sbuf_size);
	rs->target = page_alloc(rs->target_len);
	if (!rs->rbuf || !rs->sbuf || !rs->target)
		return -ENOMEM;
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	rs->rmr = ibv_reg_mr(rs->id->pd, rs->rbuf, rs->opt.rbuf_size, rw);
	rs->tmr = ibv_reg_mr(rs->id->pd, rs->target, rs->target_len, rw);
	rs->smr = ibv_reg_mr(rs->id->pd, rs->sbuf, rs->opt.sbuf_size, 0);
	if (!rs->rmr || !rs->tmr || !rs->smr)
		return -ENOMEM;
	struct rs_stream_cfg cfg = {.rbuf = rs->rbuf,
				    .rbuf_size = rs->opt.rbuf_size,
				    .rbuf_rkey = rs->rmr->rkey,
				    .target = rs->target,
				    .target_rkey = rs->tmr->rkey,
				    .target_iomap_size = rs->opt.iomap_size,
				    .rq_size = rs->opt.rq_size,
				    .sq_size = rs->opt.sq_size,
				    .sbuf_size = rs->opt.sbuf_size};
	int rc = rs_stream_init(&rs->s, &cfg);
	if (rc)
		return rc;
	rs->have_stream = true;
	return post_recvs(rs, rs->opt.rq_size);
}

void rs_free_ep(struct rsocket *rs)
{
	while (rs->iomaps) {
		struct rs_iomap_mr *m = rs->iomaps;
		rs->iomaps = m->next;
		ibv_dereg_mr(m->mr);
		free(m);
	}
	if (rs->qp)
		rdma_destroy_qp(rs->id);
	rs->qp = NULL;
	if (rs->cq) {
		ibv_ack_cq_events(rs->cq, rs->cq_events);
		ibv_destroy_cq(rs->cq);
	}
	if (rs->cq_ch)
		ibv_destroy_comp_channel(rs->cq_ch);
	rs->cq = NULL;
	rs->cq_ch = NULL;
	struct ibv_mr *mrs[] = {rs->rmr, rs->tmr, rs->smr};
	for (unsigned i = 0; i < 3; i++)
		if (mrs[i])
			ibv_dereg_mr(mrs[i]);
	rs->rmr = rs->tmr = rs->smr = NULL;
	free(rs->rbuf);
	free(rs->sbuf);
	free(rs->target);
	rs->rbuf = rs->sbuf = rs->target = NULL;
	if (rs->have_stream)
		rs_stream_fini(&rs->s);
	rs->have_stream = false;
}

/* ------------------------------------------------------------------------ */
/* Posting                                                                    */

static int post_write(struct rsocket *rs, struct ibv_sge *sge, int nsge, bool with_imm,
		      uint32_t imm, uint64_t raddr, uint32_t rkey, uint64_t wr_id, bool inl)
{
	struct ibv_send_wr wr = {.wr_id = wr_id,
				 .sg_list = sge,
				 .num_sge = nsge,
				 .opcode =
				     with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
				 .send_flags = inl ? IBV_SEND_INLINE : 0,
				 .imm_data = htobe32(imm)},
			   *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	int rc = ibv_post_send(rs->qp, &wr, &bad);
	return rc ? -rc : 0;
}

void rs_set_error(struct rsocket *rs, int err)
{
	bool was_up = rs->state == RS_CONNECTED || rs->state == RS_ACCEPTING;

	rs->state = RS_ERROR;
	rs->err = err ? err : EIO;
	if (rs->have_stream)
		rs->s.readable = rs->s.writable = false;
	if (was_up && rs->id)
		rdma_disconnect(rs->id);
	rs_signal_blocked();
}

static void send_credits(struct rsocket *rs)
{
	while (rs->state == RS_CONNECTED && rs_stream_credit_due(&rs->s)) {
		struct rs_credit c;
		struct ibv_sge sge;
		rs_stream_credit_take(&rs->s, &c);
		sge.addr = (uintptr_t)c.sge;
		sge.length = RS_SGE_LEN;
		sge.lkey = 0;
		int rc = post_write(rs, &sge, c.with_sge ? 1 : 0, true, c.imm, c.raddr, c.rkey,
				    send_wr_id(RS_SEND_CTRL, c.imm), c.with_sge);
		if (rc) {
			rs_set_error(rs, -rc);
			return;
		}
	}
}

static uint64_t mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* Block until deadline (CLOCK_MONOTONIC ms); -ETIMEDOUT after it. */
static int block_until(struct rsocket *rs, uint64_t deadline)
{
	uint64_t now = mono_ms();

	if (now >= deadline)
		return -ETIMEDOUT;
	rs_block(rs, (int)(deadline - now));
	return 0;
}

int rs_send_ctrl(struct rsocket *rs, enum rs_ctrl ctrl, int timeout_ms)
{
	uint64_t deadline = mono_ms() + (uint64_t)timeout_ms;

	while (!rs_stream_ctrl_avail(&rs->s)) {
		if (rs->state != RS_CONNECTED)
			return 0;
		if (!rs_progress(rs) && block_until(rs, deadline))
			return -ETIMEDOUT;
	}
	if (rs->state != RS_CONNECTED)
		return 0;
	uint32_t imm = rs_stream_ctrl_take(&rs->s, ctrl);
	int rc = post_write(rs, NULL, 0, true, imm, 0, 0, send_wr_id(RS_SEND_CTRL, imm), false);
	if (rc)
		rs_set_error(rs, -rc);
	return rc;
}

void rs_post_keepalive(struct rsocket *rs)
{
	/* A 0-byte RDMA WRITE (no immediate: the peer sees nothing); if the
	 * peer is gone, its retries fail and the connection reports it. */
	if (rs->state != RS_CONNECTED || !rs_stream_ctrl_avail(&rs->s))
		return;
	uint32_t imm = rs_stream_ctrl_take(&rs->s, RS_CTRL_KEEPALIVE);
	if (post_write(rs, NULL, 0, false, 0, 0, 0, send_wr_id(RS_SEND_CTRL, imm), false))
		rs_stream_send_done(&rs->s, RS_SEND_CTRL, 0);
}

int rs_drain_sends(struct rsocket *rs, int timeout_ms)
{
	uint64_t deadline = mono_ms() + (uint64_t)timeout_ms;

	while (rs->state == RS_CONNECTED && !rs_stream_sends_done(&rs->s))
		if (!rs_progress(rs) && block_until(rs, deadline))
			return -ETIMEDOUT;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Completions                                                                */

static void on_recv(struct rsocket *rs, const struct ibv_wc *wc)
{
	if (wc->status != IBV_WC_SUCCESS)
		return; /* flushed: the QP is going down */
	rs->rcv_dead++;
	if (!(wc->wc_flags & IBV_WC_WITH_IMM)) {
		RS_COUNT(rx_no_imm);
		return;
	}
	/* Before our ESTABLISHED is taken (RESOLVING, ACCEPTING) the peer may
	 * already send: its messages count as well. */
	if (rs->state == RS_ERROR)
		return;
	int r = rs_stream_rx(&rs->s, be32toh(wc->imm_data), wc->byte_len);
	if (r < 0) {
		rs_set_error(rs, ECONNRESET);
		return;
	}
	if ((r & RS_RX_DISCONNECT) || ((r & RS_RX_SHUTDOWN) && !rs->s.writable))
		rs->state = RS_DISCONNECTED;
}

static void on_send(struct rsocket *rs, const struct ibv_wc *wc)
{
	enum rs_send_kind kind = (enum rs_send_kind)(wc->wr_id >> 32);
	uint32_t arg = (uint32_t)wc->wr_id;

	rs_stream_send_done(&rs->s, kind, kind == RS_SEND_CTRL ? 0 : arg);
	if (wc->status != IBV_WC_SUCCESS) {
		if (rs->state == RS_CONNECTED)
			rs_set_error(rs, EIO);
		return;
	}
	/* Our DISCONNECT is out: nothing more will be sent or received. */
	if (kind == RS_SEND_CTRL && rs_imm_op(arg) == RS_OP_CTRL &&
	    rs_imm_arg(arg) == RS_CTRL_DISCONNECT && rs->state == RS_CONNECTED)
		rs->state = RS_DISCONNECTED;
}

bool rs_progress(struct rsocket *rs)
{
	enum rs_state before = rs->state;
	struct ibv_wc wc[32];
	bool any = false;
	int n;

	rs_cm_events(rs);
	if (rs->qp && rs->have_stream) {
		while ((n = ibv_poll_cq(rs->cq, 32, wc)) > 0) {
			any = true;
			for (int i = 0; i < n; i++) {
				if (wc[i].wr_id & RS_WR_RECV)
					on_recv(rs, &wc[i]);
				else
					on_send(rs, &wc[i]);
			}
		}
		if (rs->rcv_dead && (rs->state == RS_CONNECTED || rs->state == RS_ACCEPTING)) {
			if (post_recvs(rs, rs->rcv_dead))
				rs_set_error(rs, ENOMEM);
			rs->rcv_dead = 0;
		}
		send_credits(rs);
	}
	if (rs->state != before)
		any = true;
	if (any)
		rs_signal_blocked();
	return any;
}

/* ------------------------------------------------------------------------ */
/* Waiting                                                                    */

int rs_wait_fds(struct rsocket *rs, struct pollfd *fds)
{
	int n = 0;

	if (rs->cq) {
		if (!rs->cq_armed) {
			ibv_req_notify_cq(rs->cq, 0);
			rs->cq_armed = true;
		}
		fds[n++] = (struct pollfd){.fd = rs->cq_ch->fd, .events = POLLIN};
	}
	fds[n++] = (struct pollfd){.fd = rs->ch->fd, .events = POLLIN};
	return n;
}

void rs_wait_done(struct rsocket *rs, const struct pollfd *fds, int n)
{
	struct ibv_cq *cq;
	void *ctx;

	if (!rs->cq || n < 1 || fds[0].fd != rs->cq_ch->fd || !fds[0].revents)
		return;
	while (ibv_get_cq_event(rs->cq_ch, &cq, &ctx) == 0) {
		rs->cq_armed = false;
		if (++rs->cq_events >= 64) {
			ibv_ack_cq_events(rs->cq, rs->cq_events);
			rs->cq_events = 0;
		}
	}
}

int rs_block(struct rsocket *rs, int timeout_ms)
{
	struct pollfd fds[3];
	int n = rs_wait_fds(rs, fds);

	/* What arrived before the CQ was armed raises no event: look once more. */
	if (rs_progress(rs))
		return 0;
	fds[n++] = (struct pollfd){.fd = rs_signal_fd(), .events = POLLIN};
	pthread_mutex_unlock(&rs->lock);
	rs_blocked_enter();
	int r = poll(fds, (nfds_t)n, timeout_ms);
	rs_blocked_exit();
	pthread_mutex_lock(&rs->lock);
	rs_wait_done(rs, fds, n - 1);
	return r == 0 ? -EAGAIN : 0;
}

/* ------------------------------------------------------------------------ */
/* Sending                                                                    */

static bool nonblocking(const struct rsocket *rs, int flags)
{
	return (rs->fd_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT);
}

/* Connection set-up left to finish (rconnect non-blocking, raccept): the
 * first data call completes it. 0 when connected. */
static int ensure_connected(struct rsocket *rs, bool nonblock)
{
	for (;;) {
		switch (rs->state) {
		case RS_CONNECTED:
		case RS_DISCONNECTED:
			return 0;
		case RS_ERROR:
			return rs->have_stream ? 0 : -rs->err;
		case RS_RESOLVING:
		case RS_ACCEPTING:
			rs_progress(rs);
			if (rs->state == RS_RESOLVING || rs->state == RS_ACCEPTING) {
				if (nonblock)
					return -EAGAIN;
				rs_block(rs, -1);
			}
			break;
		default:
			return -ENOTCONN;
		}
	}
}

/* Copy len bytes into the send ring: one or two SGEs. */
static int stage(struct rsocket *rs, const struct iovec **iov, size_t *iov_off, uint32_t len,
		 struct ibv_sge *sge)
{
	uint32_t head = rs->sbuf_head, size = rs->opt.sbuf_size;
	uint32_t first = size - head < len ? size - head : len;
	uint8_t *dst[2] = {rs->sbuf + head, rs->sbuf};
	uint32_t part[2] = {first, len - first};

	for (int k = 0; k < 2; k++) {
		uint32_t left = part[k];
		uint8_t *d = dst[k];
		while (left) {
			size_t avail = (*iov)->iov_len - *iov_off;
			size_t n = avail < left ? avail : left;
			memcpy(d, (const uint8_t *)(*iov)->iov_base + *iov_off, n);
			d += n;
			left -= (uint32_t)n;
			*iov_off += n;
			if (*iov_off == (*iov)->iov_len) {
				(*iov)++;
				*iov_off = 0;
			}
		}
	}
	sge[0] =
	    (struct ibv_sge){.addr = (uintptr_t)dst[0], .length = first, .lkey = rs->smr->lkey};
	sge[1] = (struct ibv_sge){
	    .addr = (uintptr_t)rs->sbuf, .length = len - first, .lkey = rs->smr->lkey};
	rs->sbuf_head = (head + len) % size;
	return part[1] ? 2 : 1;
}

/* Inline: the bytes go from the caller's buffers straight into the WQE. */
static int inline_sges(const struct iovec **iov, size_t *iov_off, uint32_t len, struct ibv_sge *sge,
		       int max)
{
	int n = 0;

	while (len && n < max) {
		size_t avail = (*iov)->iov_len - *iov_off;
		uint32_t take = avail < len ? (uint32_t)avail : len;
		sge[n++] = (struct ibv_sge){
		    .addr = (uintptr_t)(*iov)->iov_base + *iov_off, .length = take, .lkey = 0};
		len -= take;
		*iov_off += take;
		if (*iov_off == (*iov)->iov_len) {
			(*iov)++;
			*iov_off = 0;
		}
	}
	return len ? -1 : n;
}

/*
 * One chunk of rsend (RS_SEND_DATA: into the peer's receive ring, with the
 * immediate data saying so) or riowrite (RS_SEND_DIRECT: into an iomap
 * target, no immediate), taken from the caller's vectors at *cur, *iov_off:
 * inline when it is small enough and fits two SGEs (its buffer space is free
 * at once), else staged through the send buffer.
 */
static int write_chunk(struct rsocket *rs, const struct iovec **cur, size_t *iov_off, uint32_t len,
		       enum rs_send_kind kind, uint64_t raddr, uint32_t rkey)
{
	const struct iovec *save_iov = *cur;
	size_t save_off = *iov_off;
	bool data = kind == RS_SEND_DATA, inl = len <= rs->opt.sq_inline;
	struct ibv_sge sge[2];
	int nsge = inl ? inline_sges(cur, iov_off, len, sge, 2) : -1;
	int rc;

	if (nsge < 0) {
		*cur = save_iov;
		*iov_off = save_off;
		inl = false;
		nsge = stage(rs, cur, iov_off, len, sge);
	}
	rc = post_write(rs, sge, nsge, data, data ? rs_imm_make(RS_OP_DATA, len) : 0, raddr, rkey,
			send_wr_id(kind, inl ? 0 : len), inl);
	if (inl)
		rs_stream_send_done_inline(&rs->s, len);
	if (rc)
		rs_set_error(rs, -rc);
	return rc;
}

/* Write our pending iomap entries to the peer (lock held). */
static int send_iomaps(struct rsocket *rs, bool nonblock)
{
	for (struct rs_iomap_mr *m = rs->iomaps; m; m = m->next) {
		if (m->sent || m->index < 0)
			continue;
		uint64_t raddr;
		uint32_t rkey;
		int rc;
		while ((rc = rs_stream_iomap_take(&rs->s, (unsigned)m->index, &raddr, &rkey)) ==
		       -EAGAIN) {
			if (!rs->s.writable)
				return -ECONNRESET;
			if (nonblock)
				return -EAGAIN;
			if (!rs_progress(rs))
				rs_block(rs, -1);
		}
		if (rc)
			return rc;
		struct rs_iomap e = {.offset = m->offset,
				     .sge = {.addr = (uintptr_t)m->mr->addr,
					     .key = m->mr->rkey,
					     .length = (uint32_t)m->mr->length}};
		uint8_t buf[RS_IOMAP_LEN];
		rs_iomap_put(buf, &e, rs->s.peer_net);
		struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = RS_IOMAP_LEN};
		uint32_t imm = rs_imm_make(RS_OP_IOMAP_SGL, (uint32_t)m->index);
		rc = post_write(rs, &sge, 1, true, imm, raddr, rkey,
				send_wr_id(RS_SEND_IOMAP, (uint32_t)m->index), true);
		if (rc) {
			rs_set_error(rs, -rc);
			return rc;
		}
		m->sent = true;
	}
	rs->iomap_pending = false;
	return 0;
}

/* Nothing can move now: -EAGAIN when the call must not block, else block
 * (lock released) until something may have changed on rs, then 0. */
static int rs_wait(struct rsocket *rs, bool nonblock)
{
	if (nonblock)
		return -EAGAIN;
	rs_block(rs, -1);
	return 0;
}

/* The rsocket of a vectored call and the bytes its vectors hold; NULL with
 * errno set (EBADF, EINVAL) when there is none or the vectors are bad. */
static struct rsocket *rs_lookup_iov(int socket, const struct iovec *iov, int iovcnt, size_t *total)
{
	struct rsocket *rs = rs_lookup(socket);

	*total = 0;
	if (!rs) {
		rs_fail(EBADF);
		return NULL;
	}
	if (iovcnt < 0 || (iovcnt && !iov)) {
		rs_fail(EINVAL);
		return NULL;
	}
	for (int i = 0; i < iovcnt; i++)
		*total += iov[i].iov_len;
	return rs;
}

static ssize_t rs_sendv(int socket, const struct iovec *iov, int iovcnt, int flags)
{
	size_t total, sent = 0, iov_off = 0;
	struct rsocket *rs = rs_lookup_iov(socket, iov, iovcnt, &total);
	uint32_t olen = RS_OLAP_START_SIZE;
	int rc = 0;

	if (!rs)
		return -1;
	bool nb = nonblocking(rs, flags);
	pthread_mutex_lock(&rs->lock);
	rc = ensure_connected(rs, nb);
	if (!rc && rs->iomap_pending)
		rc = send_iomaps(rs, nb);
	const struct iovec *cur = iov;
	while (!rc && sent < total) {
		if (!rs_stream_can_send(&rs->s)) {
			rs_progress(rs);
			if (!rs->s.writable || rs->state != RS_CONNECTED) {
				rc = rs->state == RS_ERROR ? -rs->err : -ECONNRESET;
				break;
			}
			if (rs_stream_can_send(&rs->s))
				continue;
			rc = rs_wait(rs, nb);
			if (rc)
				break;
			continue;
		}
		size_t left = total - sent;
		uint32_t want = left < olen ? (uint32_t)left : olen;
		if (olen < RS_MAX_TRANSFER)
			olen <<= 1;
		uint64_t raddr;
		uint32_t rkey;
		uint32_t len = rs_stream_send_take(&rs->s, want, &raddr, &rkey);
		rc = write_chunk(rs, &cur, &iov_off, len, RS_SEND_DATA, raddr, rkey);
		if (rc)
			break;
		sent += len;
	}
	pthread_mutex_unlock(&rs->lock);
	if (sent)
		return (ssize_t)sent;
	return rc ? rs_fail(-rc) : 0;
}

ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	return rs_sendv(socket, &iov, 1, flags);
}
ROCEMU_PUBLIC(rsend)

ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
		const struct sockaddr *dest_addr, socklen_t addrlen)
{
	if (dest_addr || addrlen)
		return rs_fail(EISCONN); /* a stream rsocket; datagram ones are not implemented */
	return rsend(socket, buf, len, flags);
}
ROCEMU_PUBLIC(rsendto)

ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	if (!msg)
		return rs_fail(EINVAL);
	if (msg->msg_control && msg->msg_controllen)
		return rs_fail(EOPNOTSUPP);
	return rs_sendv(socket, msg->msg_iov, (int)msg->msg_iovlen, flags);
}
ROCEMU_PUBLIC(rsendmsg)

ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return rsend(socket, buf, count, 0);
}
ROCEMU_PUBLIC(rwrite)

ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	return rs_sendv(socket, iov, iovcnt, 0);
}
ROCEMU_PUBLIC(rwritev)

/* ------------------------------------------------------------------------ */
/* Receiving                                                                  */

static ssize_t rs_recvv(int socket, const struct iovec *iov, int iovcnt, int flags)
{
	size_t total, got = 0;
	struct rsocket *rs = rs_lookup_iov(socket, iov, iovcnt, &total);
	int rc = 0;

	if (!rs)
		return -1;
	bool nb = nonblocking(rs, flags);
	bool peek = (flags & MSG_PEEK) && iovcnt > 0;
	pthread_mutex_lock(&rs->lock);
	rc = ensure_connected(rs, nb);
	while (!rc && got < total) {
		if (!rs_stream_have_data(&rs->s)) {
			rs_progress(rs);
			if (rs_stream_have_data(&rs->s))
				continue;
			/* Data received before the end is still returned; then 0. */
			if (!rs->s.readable) {
				if (rs->state == RS_ERROR && !got)
					rc = -rs->err;
				break;
			}
			if (got && !(flags & MSG_WAITALL))
				break;
			if (nb) {
				if (!got)
					rc = -EAGAIN;
				break;
			}
			rs_block(rs, -1);
			continue;
		}
		if (peek) { /* into the first vector only, as rdma-core */
			if ((flags & MSG_WAITALL) && rs->s.readable && !nb &&
			    rs_stream_unread(&rs->s) < iov[0].iov_len) {
				rs_progress(rs);
				if (rs_stream_unread(&rs->s) < iov[0].iov_len && rs->s.readable)
					rs_block(rs, -1);
				continue;
			}
			got = rs_stream_read(&rs->s, iov[0].iov_base, iov[0].iov_len, true);
			break;
		}
		/* Fill the vectors in turn. */
		size_t pos = got;
		int i = 0;
		while (i < iovcnt && pos >= iov[i].iov_len)
			pos -= iov[i++].iov_len;
		if (i == iovcnt)
			break;
		got += rs_stream_read(&rs->s, (uint8_t *)iov[i].iov_base + pos,
				      iov[i].iov_len - pos, false);
		send_credits(rs);
	}
	pthread_mutex_unlock(&rs->lock);
	if (got)
		return (ssize_t)got;
	return rc ? rs_fail(-rc) : 0;
}

ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	return rs_recvv(socket, &iov, 1, flags);
}
ROCEMU_PUBLIC(rrecv)

ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags, struct sockaddr *src_addr,
		  socklen_t *addrlen)
{
	ssize_t n = rrecv(socket, buf, len, flags);
	if (n > 0 && src_addr && addrlen)
		rgetpeername(socket, src_addr, addrlen);
	return n;
}
ROCEMU_PUBLIC(rrecvfrom)

ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	if (!msg)
		return rs_fail(EINVAL);
	if (msg->msg_control && msg->msg_controllen)
		return rs_fail(EOPNOTSUPP);
	return rs_recvv(socket, msg->msg_iov, (int)msg->msg_iovlen, flags);
}
ROCEMU_PUBLIC(rrecvmsg)

ssize_t rread(int socket, void *buf, size_t count)
{
	return rrecv(socket, buf, count, 0);
}
ROCEMU_PUBLIC(rread)

ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	return rs_recvv(socket, iov, iovcnt, 0);
}
ROCEMU_PUBLIC(rreadv)

/* ------------------------------------------------------------------------ */
/* Direct placement: riomap, riounmap, riowrite                               */

/* The lowest entry of the peer's target iomap none of our mappings uses. */
static int free_iomap_index(const struct rsocket *rs)
{
	unsigned n = rs_stream_peer_iomap_size(&rs->s);

	for (unsigned i = 0; i < n; i++) {
		bool used = false;
		for (const struct rs_iomap_mr *m = rs->iomaps; m && !used; m = m->next)
			used = m->index == (int)i;
		if (!used)
			return (int)i;
	}
	return -1;
}

off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
	struct rsocket *rs = rs_lookup(socket);

	(void)flags;
	if (!rs)
		return rs_fail(EBADF);
	if ((prot & ~PROT_WRITE) || !buf || !len || len > UINT32_MAX)
		return rs_fail(EINVAL);
	pthread_mutex_lock(&rs->lock);
	off_t rc = -1;
	struct rs_iomap_mr *m = NULL;
	if (!rs->qp || !rs->have_stream) {
		errno = EINVAL;
		goto out;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		goto out;
	}
	m->index = -1;
	if (prot & PROT_WRITE) {
		m->index = free_iomap_index(rs);
		if (m->index < 0) {
			errno = ENOMEM;
			goto out;
		}
	}
	m->mr = ibv_reg_mr(rs->id->pd, buf, len,
			   IBV_ACCESS_LOCAL_WRITE |
			       ((prot & PROT_WRITE) ? IBV_ACCESS_REMOTE_WRITE : 0));
	if (!m->mr)
		goto out;
	m->offset = offset == -1 ? (uint64_t)(uintptr_t)buf : (uint64_t)offset;
	m->next = rs->iomaps;
	rs->iomaps = m;
	if (m->index >= 0)
		rs->iomap_pending = true;
	rc = (off_t)m->offset;
	m = NULL;
out:
	free(m);
	pthread_mutex_unlock(&rs->lock);
	return rc;
}
ROCEMU_PUBLIC(riomap)

int riounmap(int socket, void *buf, size_t len)
{
	struct rsocket *rs = rs_lookup(socket);
	int rc = rs_fail(EINVAL);

	if (!rs)
		return rs_fail(EBADF);
	pthread_mutex_lock(&rs->lock);
	for (struct rs_iomap_mr **pp = &rs->iomaps; *pp; pp = &(*pp)->next) {
		struct rs_iomap_mr *m = *pp;
		if (m->mr->addr == buf && m->mr->length == len) {
			*pp = m->next;
			ibv_dereg_mr(m->mr);
			free(m);
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&rs->lock);
	return rc;
}
ROCEMU_PUBLIC(riounmap)

size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	struct rsocket *rs = rs_lookup(socket);
	size_t sent = 0, iov_off = 0;
	uint32_t olen = RS_OLAP_START_SIZE;
	int rc = 0;

	if (!rs)
		return (size_t)rs_fail(EBADF);
	if (offset < 0)
		return (size_t)rs_fail(EINVAL);
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = count};
	const struct iovec *cur = &iov;
	bool nb = nonblocking(rs, flags);
	pthread_mutex_lock(&rs->lock);
	rc = ensure_connected(rs, nb);
	if (!rc && rs->iomap_pending)
		rc = send_iomaps(rs, nb);
	while (!rc && sent < count) {
		if (rs->state != RS_CONNECTED || !rs->s.writable) {
			rc = rs->state == RS_ERROR ? -rs->err : -ECONNRESET;
			break;
		}
		size_t left = count - sent;
		uint32_t want = left < olen ? (uint32_t)left : olen;
		uint64_t raddr;
		uint32_t rkey, len;
		rc = rs_stream_direct_take(&rs->s, (uint64_t)offset + sent, want, &len, &raddr,
					   &rkey);
		if (rc == -EAGAIN) {
			rc = 0;
			if (rs_progress(rs))
				continue;
			rc = rs_wait(rs, nb);
			if (rc)
				break;
			continue;
		}
		if (rc) {
			RS_COUNT(bad_iomap_write);
			break;
		}
		if (olen < RS_MAX_TRANSFER)
			olen <<= 1;
		rc = write_chunk(rs, &cur, &iov_off, len, RS_SEND_DIRECT, raddr, rkey);
		if (rc)
			break;
		sent += len;
	}
	pthread_mutex_unlock(&rs->lock);
	if (sent)
		return sent;
	return rc ? (size_t)rs_fail(-rc) : 0;
}
ROCEMU_PUBLIC(riowrite)
