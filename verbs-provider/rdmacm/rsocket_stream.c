/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The protocol state of one rsocket stream (rsocket_stream.h): what may be
 * sent, what arrived, and the checks on everything the peer tells us. The
 * invariant that keeps the receive ring safe:
 *   rbuf_free + unfilled + (bytes of unread messages) == rbuf_size
 * A data message may not be longer than `unfilled` (what we granted and the
 * peer has not yet written), and no more messages may wait unread than the
 * credits we gave, so reading never leaves the ring.
 */
#include "rsocket_stream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stats_print.h"

RDMACM_STATS_DEFINE(RS_STATS, rs_stats, RS_STAT_COUNT, rs_stat_name)

/* At exit, beside the CM's (cma_stats_report). */
__attribute__((destructor)) void rs_stats_report(void)
{
	rdmacm_stats_print("rsocket", rs_stats_names, rs_stats, RS_STAT_COUNT);
}

static uint32_t half_of(const struct rs_stream *s)
{
	return s->cfg.rbuf_size / 2;
}

int rs_stream_init(struct rs_stream *s, const struct rs_stream_cfg *cfg)
{
	memset(s, 0, sizeof(*s));
	if (!cfg->rbuf || cfg->rbuf_size < 2 || (cfg->rbuf_size & 1) || !cfg->target ||
	    cfg->rq_size == 0 || cfg->sq_size <= RS_CTRL_MAX || cfg->sbuf_size < 2 * RS_SNDLOWAT)
		return -EINVAL;
	s->cfg = *cfg;
	s->rmsg = calloc(cfg->rq_size, sizeof(*s->rmsg));
	if (cfg->target_iomap_size) {
		s->iomap = calloc(cfg->target_iomap_size, sizeof(*s->iomap));
		s->iomap_valid = calloc(cfg->target_iomap_size, sizeof(*s->iomap_valid));
	}
	if (!s->rmsg || (cfg->target_iomap_size && (!s->iomap || !s->iomap_valid))) {
		rs_stream_fini(s);
		return -ENOMEM;
	}
	s->readable = s->writable = true;
	/* The first half goes to the peer in the connection data; the second
	 * is free, to be granted with the first credit update. */
	s->rbuf_free = half_of(s);
	s->grant_off = half_of(s);
	s->unfilled = half_of(s);
	s->rseq_comp = cfg->rq_size / 2;
	s->next_grant = 1 % RS_SGL_SIZE;
	s->sqe_avail = cfg->sq_size - RS_CTRL_MAX;
	s->sbuf_avail = cfg->sbuf_size;
	return 0;
}

void rs_stream_fini(struct rs_stream *s)
{
	free(s->rmsg);
	free(s->iomap);
	free(s->iomap_valid);
	s->rmsg = NULL;
	s->iomap = NULL;
	s->iomap_valid = NULL;
}

void rs_stream_local_conn(const struct rs_stream *s, struct rs_conn *c)
{
	memset(c, 0, sizeof(*c));
	c->version = RS_CONN_VERSION;
	c->flags = RS_CONN_FLAG_IOMAP | rs_host_net_flag();
	c->credits = s->cfg.rq_size;
	c->target_iomap_size = rs_value_to_scale(s->cfg.target_iomap_size);
	c->target_sgl.addr = (uintptr_t)s->cfg.target;
	c->target_sgl.key = s->cfg.target_rkey;
	c->target_sgl.length = RS_SGL_SIZE;
	c->data_buf.addr = (uintptr_t)s->cfg.rbuf;
	c->data_buf.key = s->cfg.rbuf_rkey;
	c->data_buf.length = half_of(s);
}

void rs_stream_peer_conn(struct rs_stream *s, const struct rs_conn *c)
{
	s->peer_net = (c->flags & RS_CONN_FLAG_NET) != 0;
	s->remote_sgl = c->target_sgl;
	s->remote_sge = 1 % c->target_sgl.length; /* entry 0 holds the data buffer */
	if (c->flags & RS_CONN_FLAG_IOMAP) {
		s->remote_iomap.addr =
		    c->target_sgl.addr + (uint64_t)c->target_sgl.length * RS_SGE_LEN;
		s->remote_iomap.key = c->target_sgl.key;
		s->remote_iomap.length = rs_scale_to_value(c->target_iomap_size);
	}
	s->target[0] = c->data_buf;
	s->target_sge = 0;
	s->sseq_comp = c->credits;
}

/* A credit update that carried an SGE (byte_len RS_SGE_LEN): the peer
 * writes its grants into our target SGL round robin, starting at entry 1
 * (entry 0 came with the connection data), and only into an entry we have
 * used up. The completion says the write is in place: read it now. */
static int take_grant(struct rs_stream *s)
{
	unsigned e = s->next_grant;
	struct rs_sge g;

	if (s->target[e].length != 0) {
		RS_COUNT(rx_bad_sge); /* a grant into a buffer we are still filling */
		return -EPROTO;
	}
	rs_sge_get(s->cfg.target + e * RS_SGE_LEN, &g);
	if (!rs_sge_sane(&g)) {
		RS_COUNT(rx_bad_sge);
		return -EPROTO;
	}
	s->target[e] = g;
	s->next_grant = (e + 1) % RS_SGL_SIZE;
	return 0;
}

static int take_iomap(struct rs_stream *s, uint32_t arg)
{
	unsigned index = arg & 0xffff; /* bits 28..16 reserved */
	struct rs_iomap m;

	if (index >= s->cfg.target_iomap_size) {
		RS_COUNT(rx_bad_iomap);
		return -EPROTO;
	}
	rs_iomap_get(s->cfg.target + RS_SGL_SIZE * RS_SGE_LEN + (size_t)index * RS_IOMAP_LEN, &m);
	if (!rs_sge_sane(&m.sge) || m.offset + m.sge.length < m.offset) {
		RS_COUNT(rx_bad_iomap);
		return -EPROTO;
	}
	s->iomap[index] = m;
	s->iomap_valid[index] = true;
	return 0;
}

int rs_stream_rx(struct rs_stream *s, uint32_t imm, uint32_t byte_len)
{
	uint32_t arg = rs_imm_arg(imm);

	switch (rs_imm_op(imm)) {
	case RS_OP_DATA:
		if (s->rmsg_count >= s->cfg.rq_size) {
			RS_COUNT(rx_msg_overflow);
			return -EPROTO;
		}
		if (arg > s->unfilled || byte_len != arg) {
			RS_COUNT(rx_data_overrun);
			return -EPROTO;
		}
		s->rmsg[(s->rmsg_head + s->rmsg_count) % s->cfg.rq_size] = arg;
		s->rmsg_count++;
		s->unfilled -= arg;
		return RS_RX_DATA;
	case RS_OP_SGL:
		s->sseq_comp = (uint16_t)arg;
		if (byte_len == RS_SGE_LEN && take_grant(s) < 0)
			return -EPROTO;
		return RS_RX_CREDITS;
	case RS_OP_IOMAP_SGL:
		if (byte_len == RS_IOMAP_LEN && take_iomap(s, arg) < 0)
			return -EPROTO;
		return 0;
	case RS_OP_CTRL:
		switch (arg) {
		case RS_CTRL_DISCONNECT:
			s->readable = s->writable = false;
			return RS_RX_DISCONNECT;
		case RS_CTRL_SHUTDOWN:
			s->readable = false;
			return RS_RX_SHUTDOWN;
		case RS_CTRL_KEEPALIVE:
			return 0;
		default:
			RS_COUNT(rx_bad_ctrl);
			return 0;
		}
	default:
		RS_COUNT(rx_bad_op);
		return -EPROTO;
	}
}

size_t rs_stream_unread(const struct rs_stream *s)
{
	size_t n = 0;

	for (unsigned i = 0; i < s->rmsg_count; i++)
		n += s->rmsg[(s->rmsg_head + i) % s->cfg.rq_size];
	return n;
}

size_t rs_stream_read(struct rs_stream *s, void *buf, size_t len, bool peek)
{
	uint8_t *out = buf;
	size_t done = 0;
	unsigned head = s->rmsg_head, count = s->rmsg_count;
	uint32_t pos = s->rbuf_read;
	uint32_t size = s->cfg.rbuf_size;

	while (done < len && count) {
		uint32_t *m = &s->rmsg[head];
		uint32_t take = *m;
		if (take > len - done)
			take = (uint32_t)(len - done);
		/* take <= rbuf_size - rbuf_free - unfilled: at most one wrap */
		uint32_t first = size - pos < take ? size - pos : take;
		memcpy(out + done, s->cfg.rbuf + pos, first);
		memcpy(out + done + first, s->cfg.rbuf, take - first);
		pos = (pos + take) % size;
		done += take;
		if (take == *m || *m == 0) {
			head = (head + 1) % s->cfg.rq_size;
			count--;
			if (!peek) {
				s->rseq_no++;
				*m = 0;
			}
		} else if (!peek) {
			*m -= take;
		}
		if (!peek)
			s->rbuf_free += take;
	}
	if (!peek) {
		s->rmsg_head = head;
		s->rmsg_count = count;
		s->rbuf_read = pos;
	}
	return done;
}

bool rs_stream_credit_due(const struct rs_stream *s)
{
	return rs_stream_ctrl_avail(s) &&
	       (s->rbuf_free >= half_of(s) || (int16_t)(s->rseq_no - s->rseq_comp) >= 0);
}

void rs_stream_credit_take(struct rs_stream *s, struct rs_credit *c)
{
	memset(c, 0, sizeof(*c));
	s->ctrl_out++;
	s->rseq_comp = (uint16_t)(s->rseq_no + s->cfg.rq_size / 2);
	c->imm = rs_imm_make(RS_OP_SGL, (uint16_t)(s->rseq_no + s->cfg.rq_size));
	if (s->rbuf_free < half_of(s))
		return;
	struct rs_sge g = {.addr = (uintptr_t)s->cfg.rbuf + s->grant_off,
			   .key = s->cfg.rbuf_rkey,
			   .length = half_of(s)};
	c->with_sge = true;
	rs_sge_put(c->sge, &g, s->peer_net);
	c->raddr = s->remote_sgl.addr + (uint64_t)s->remote_sge * RS_SGE_LEN;
	c->rkey = s->remote_sgl.key;
	s->rbuf_free -= half_of(s);
	s->unfilled += half_of(s);
	s->grant_off = (s->grant_off + half_of(s)) % s->cfg.rbuf_size;
	s->remote_sge = (s->remote_sge + 1) % s->remote_sgl.length;
}

uint32_t rs_stream_ctrl_take(struct rs_stream *s, enum rs_ctrl ctrl)
{
	s->ctrl_out++;
	return rs_imm_make(RS_OP_CTRL, ctrl);
}

static uint32_t lowat(const struct rs_stream *s)
{
	return s->cfg.sbuf_size < RS_SNDLOWAT ? s->cfg.sbuf_size : RS_SNDLOWAT;
}

bool rs_stream_can_send(const struct rs_stream *s)
{
	return s->writable && s->sqe_avail > 0 && s->sbuf_avail >= lowat(s) &&
	       s->sseq_no != s->sseq_comp && s->target[s->target_sge].length != 0;
}

uint32_t rs_stream_send_take(struct rs_stream *s, uint32_t want, uint64_t *raddr, uint32_t *rkey)
{
	struct rs_sge *t = &s->target[s->target_sge];
	uint32_t len = want;

	if (len > t->length)
		len = t->length;
	if (len > s->sbuf_avail)
		len = s->sbuf_avail;
	if (len > RS_IMM_DATA_MASK)
		len = RS_IMM_DATA_MASK;
	*raddr = t->addr;
	*rkey = t->key;
	t->addr += len;
	t->length -= len;
	if (t->length == 0)
		s->target_sge = (s->target_sge + 1) % RS_SGL_SIZE;
	s->sseq_no++;
	s->sqe_avail--;
	s->sbuf_avail -= len;
	return len;
}

bool rs_stream_sends_done(const struct rs_stream *s)
{
	return s->ctrl_out == 0 && s->sqe_avail == (unsigned)s->cfg.sq_size - RS_CTRL_MAX &&
	       s->sbuf_avail == s->cfg.sbuf_size;
}

void rs_stream_send_done_inline(struct rs_stream *s, uint32_t len)
{
	s->sbuf_avail += len;
}

void rs_stream_send_done(struct rs_stream *s, enum rs_send_kind kind, uint32_t len)
{
	switch (kind) {
	case RS_SEND_DATA:
	case RS_SEND_DIRECT:
		s->sqe_avail++;
		s->sbuf_avail += len;
		break;
	case RS_SEND_IOMAP:
		s->sqe_avail++;
		break;
	case RS_SEND_CTRL:
		if (s->ctrl_out)
			s->ctrl_out--;
		break;
	}
}

int rs_stream_iomap_take(struct rs_stream *s, unsigned index, uint64_t *raddr, uint32_t *rkey)
{
	if (index >= s->remote_iomap.length)
		return -EINVAL;
	if (!s->writable || s->sqe_avail == 0 || s->sseq_no == s->sseq_comp)
		return -EAGAIN;
	*raddr = s->remote_iomap.addr + (uint64_t)index * RS_IOMAP_LEN;
	*rkey = s->remote_iomap.key;
	s->sseq_no++;
	s->sqe_avail--;
	return 0;
}

int rs_stream_direct_take(struct rs_stream *s, uint64_t offset, uint32_t want, uint32_t *len,
			  uint64_t *raddr, uint32_t *rkey)
{
	const struct rs_iomap *m = NULL;

	for (unsigned i = 0; i < s->cfg.target_iomap_size; i++) {
		const struct rs_iomap *c = &s->iomap[i];
		if (s->iomap_valid[i] && offset >= c->offset &&
		    offset - c->offset < c->sge.length) {
			m = c;
			break;
		}
	}
	if (!m)
		return -EINVAL;
	uint64_t room = m->sge.length - (offset - m->offset);
	uint32_t n = want;
	if (n > room)
		n = (uint32_t)room;
	if (!s->writable || s->sqe_avail == 0 || s->sbuf_avail < (n < lowat(s) ? n : lowat(s)))
		return -EAGAIN;
	if (n > s->sbuf_avail)
		n = s->sbuf_avail;
	*len = n;
	*raddr = m->sge.addr + (offset - m->offset);
	*rkey = m->sge.key;
	s->sqe_avail--;
	s->sbuf_avail -= n;
	return 0;
}
