/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for what an rsocket peer controls (docs/rdmacm.md,
 * "rsockets", bad input): the connection data (rs_conn_get) and the
 * stream state machine (rsocket_stream.c) fed with the peer's messages and
 * writes into our target area, interleaved with what our application does.
 *
 * Input: a config byte (queue size, ring size, iomap size), 40 bytes of
 * connection data, then records, each an action byte and its arguments:
 *   0 peer RDMA WRITE of 8 bytes into the target area (offset byte)
 *   1 receive completion: immediate data (4), byte_len (2)
 *   2 application read (length 2 bytes, top bit: MSG_PEEK)
 *   3 credit update (if due)        4 data send (want: 2 bytes)
 *   5 the oldest send completes     6 iomap entry write (index byte)
 *   7 direct write (offset 2 bytes, want 2 bytes)
 *   8 control message (shutdown)
 * The buffers are allocated to their exact size, so ASan sees any access
 * outside them; after every record the accounting invariants are checked.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rsocket_stream.h"
#include "rsocket_wire.h"

#define MAX_OUT 64

struct out {
	enum rs_send_kind kind;
	uint32_t len;
};

static void check(const struct rs_stream *s, const struct rs_stream_cfg *cfg)
{
	uint64_t unread = 0;

	if (s->rmsg_count > cfg->rq_size)
		abort();
	for (unsigned i = 0; i < s->rmsg_count; i++)
		unread += s->rmsg[(s->rmsg_head + i) % cfg->rq_size];
	if ((uint64_t)s->rbuf_free + s->unfilled + unread != cfg->rbuf_size)
		abort();
	if (s->rbuf_read >= cfg->rbuf_size || s->grant_off >= cfg->rbuf_size)
		abort();
	if (s->sbuf_avail > cfg->sbuf_size || s->sqe_avail > (unsigned)cfg->sq_size - RS_CTRL_MAX)
		abort();
	if (s->ctrl_out > RS_CTRL_MAX || s->target_sge >= RS_SGL_SIZE)
		abort();
	if (s->remote_sgl.length && s->remote_sge >= s->remote_sgl.length)
		abort();
}

static uint32_t get16(const uint8_t **p, size_t *n)
{
	uint32_t v = 0;
	for (int i = 0; i < 2 && *n; i++, (*p)++, (*n)--)
		v = v << 8 | **p;
	return v;
}

static uint32_t get32(const uint8_t **p, size_t *n)
{
	return get16(p, n) << 16 | get16(p, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 + RS_CONN_DATA_LEN)
		return 0;
	uint8_t conf = data[0];
	struct rs_stream_cfg cfg = {
	    .rbuf_size = 2 * (32u << (conf & 3)), /* 64 .. 512 bytes */
	    .rq_size = (uint16_t)(2 + ((conf >> 2) & 7)),
	    .sq_size = RS_CTRL_MAX + 2 + ((conf >> 5) & 3),
	    .sbuf_size = 2 * RS_SNDLOWAT,
	    .target_iomap_size = (conf >> 7) ? 2 : 0,
	    .rbuf_rkey = 0x11,
	    .target_rkey = 0x22,
	};
	size_t tlen = RS_SGL_SIZE * RS_SGE_LEN + cfg.target_iomap_size * RS_IOMAP_LEN;
	uint8_t *rbuf = calloc(1, cfg.rbuf_size), *target = calloc(1, tlen);
	uint8_t *rd = malloc(1 << 16);
	struct rs_stream s;
	struct rs_conn conn, ours;
	struct out out[MAX_OUT];
	unsigned nout = 0;

	cfg.rbuf = rbuf;
	cfg.target = target;
	if (!rbuf || !target || !rd || rs_stream_init(&s, &cfg))
		abort();
	if (rs_conn_get(data + 1, RS_CONN_DATA_LEN, &conn) != 0) {
		/* refused: go on with a well-formed peer to reach the stream */
		memset(&conn, 0, sizeof(conn));
		conn.version = RS_CONN_VERSION;
		conn.flags = RS_CONN_FLAG_IOMAP;
		conn.credits = 4;
		conn.target_iomap_size = 2;
		conn.target_sgl = (struct rs_sge){.addr = 0x1000, .key = 1, .length = 2};
		conn.data_buf = (struct rs_sge){.addr = 0x2000, .key = 2, .length = 300};
	}
	rs_stream_peer_conn(&s, &conn);
	rs_stream_local_conn(&s, &ours);
	uint8_t enc[RS_CONN_DATA_LEN];
	struct rs_conn back;
	rs_conn_put(enc, &ours);
	if (rs_conn_get(enc, sizeof(enc), &back) != 0 || back.credits != ours.credits)
		abort(); /* what we send must decode */

	const uint8_t *p = data + 1 + RS_CONN_DATA_LEN;
	size_t n = size - 1 - RS_CONN_DATA_LEN;
	bool dead = false;
	while (n && !dead) {
		uint8_t op = *p++;
		n--;
		switch (op % 9) {
		case 0: { /* the peer writes into our target area */
			unsigned off = n ? *p : 0;
			if (n) {
				p++;
				n--;
			}
			off %= (unsigned)tlen;
			for (unsigned i = 0; i < 8 && off + i < tlen && n; i++, p++, n--)
				target[off + i] = *p;
			break;
		}
		case 1: {
			uint32_t imm = get32(&p, &n);
			uint32_t blen = get16(&p, &n);
			if (rs_stream_rx(&s, imm, blen) < 0)
				dead = true;
			break;
		}
		case 2: {
			uint32_t v = get16(&p, &n);
			rs_stream_read(&s, rd, v & 0x7fff, v & 0x8000);
			break;
		}
		case 3:
			if (rs_stream_credit_due(&s) && nout < MAX_OUT) {
				struct rs_credit c;
				rs_stream_credit_take(&s, &c);
				out[nout++] = (struct out){RS_SEND_CTRL, 0};
			}
			break;
		case 4: {
			uint32_t want = get16(&p, &n) + 1;
			if (rs_stream_can_send(&s) && nout < MAX_OUT) {
				uint64_t ra;
				uint32_t rk, len = rs_stream_send_take(&s, want, &ra, &rk);
				if (len == 0 || len > want)
					abort();
				out[nout++] = (struct out){RS_SEND_DATA, len};
			}
			break;
		}
		case 5:
			if (nout) {
				rs_stream_send_done(&s, out[0].kind, out[0].len);
				memmove(out, out + 1, --nout * sizeof(out[0]));
			}
			break;
		case 6: {
			unsigned idx = n ? *p : 0;
			uint64_t ra;
			uint32_t rk;
			if (n) {
				p++;
				n--;
			}
			if (nout < MAX_OUT && rs_stream_iomap_take(&s, idx, &ra, &rk) == 0)
				out[nout++] = (struct out){RS_SEND_IOMAP, 0};
			break;
		}
		case 7: {
			uint32_t off = get16(&p, &n), want = get16(&p, &n) + 1, len;
			uint64_t ra;
			uint32_t rk;
			if (nout < MAX_OUT &&
			    rs_stream_direct_take(&s, off, want, &len, &ra, &rk) == 0) {
				if (len > want)
					abort();
				out[nout++] = (struct out){RS_SEND_DIRECT, len};
			}
			break;
		}
		case 8:
			if (rs_stream_ctrl_avail(&s) && nout < MAX_OUT) {
				rs_stream_ctrl_take(&s, RS_CTRL_SHUTDOWN);
				out[nout++] = (struct out){RS_SEND_CTRL, 0};
			}
			break;
		}
		check(&s, &cfg);
	}
	rs_stream_fini(&s);
	free(rbuf);
	free(target);
	free(rd);
	return 0;
}
