/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rsockets protocol, without verbs (docs/rdmacm.md, "rsockets"):
 * - the wire format against rdma-core's layout, byte by byte (rsocket_wire.c);
 * - two stream state machines (rsocket_stream.c) joined by a fake wire on
 *   which an RDMA WRITE is a memcpy to the address the sender chose: data of
 *   many sizes both ways, through credit updates and buffer grants, checked;
 * - a hostile peer: every refusal is counted and ends the connection.
 */
#include <endian.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rsocket_stream.h"
#include "rsocket_wire.h"

/* rdma-core's struct rs_conn_data, as its rs_format_conn_data fills it. */
static const uint8_t golden_conn[RS_CONN_DATA_LEN] = {
    0x01, 0x02, 0x01, 0x80,			    /* version 1, IOMAP, credits 384 */
    0x00, 0x00, 0x00, 0x01,			    /* reserved, iomap size 1 */
    0x00, 0x00, 0x7f, 0x12, 0x34, 0x56, 0x70, 0x00, /* target SGL addr */
    0xaa, 0xbb, 0xcc, 0xdd, 0x00, 0x00, 0x00, 0x02, /* rkey, 2 entries */
    0x00, 0x00, 0x7f, 0x00, 0x00, 0x10, 0x00, 0x00, /* data buffer addr */
    0x11, 0x22, 0x33, 0x44, 0x00, 0x01, 0x00, 0x00, /* rkey, 64 KiB */
};

static void test_conn_layout(void **state)
{
	(void)state;
	struct rs_conn c = {.version = 1,
			    .flags = RS_CONN_FLAG_IOMAP,
			    .credits = 384,
			    .target_iomap_size = 1,
			    .target_sgl = {0x7f1234567000ull, 0xaabbccdd, 2},
			    .data_buf = {0x7f0000100000ull, 0x11223344, 0x10000}};
	uint8_t out[RS_CONN_DATA_LEN];
	rs_conn_put(out, &c);
	assert_memory_equal(out, golden_conn, sizeof(out));

	struct rs_conn d;
	assert_int_equal(rs_conn_get(golden_conn, sizeof(golden_conn), &d), 0);
	assert_int_equal(d.credits, 384);
	assert_int_equal(d.target_sgl.length, 2);
	assert_true(d.target_sgl.addr == 0x7f1234567000ull);
	assert_int_equal(d.data_buf.key, 0x11223344);
	assert_int_equal(rs_scale_to_value(d.target_iomap_size), 1);
}

static void test_conn_refused(void **state)
{
	(void)state;
	uint8_t b[RS_CONN_DATA_LEN];
	struct rs_conn d;

	assert_int_equal(rs_conn_get(golden_conn, RS_CONN_DATA_LEN - 1, &d), -EPROTO);
	assert_int_equal(rs_conn_get(NULL, 0, &d), -EPROTO);
	memcpy(b, golden_conn, sizeof(b));
	b[0] = 2;
	assert_int_equal(rs_conn_get(b, sizeof(b), &d), -EPROTONOSUPPORT);
	memcpy(b, golden_conn, sizeof(b));
	b[23] = 0; /* an SGL of no entries */
	assert_int_equal(rs_conn_get(b, sizeof(b), &d), -EPROTO);
	b[23] = RS_MAX_PEER_SGL + 1;
	assert_int_equal(rs_conn_get(b, sizeof(b), &d), -EPROTO);
	memcpy(b, golden_conn, sizeof(b));
	memset(b + 8, 0xff, 8); /* the target area wraps the address space */
	assert_int_equal(rs_conn_get(b, sizeof(b), &d), -EPROTO);
	memcpy(b, golden_conn, sizeof(b));
	memset(b + 24, 0xff, 8); /* so does the data buffer */
	assert_int_equal(rs_conn_get(b, sizeof(b), &d), -EPROTO);
	memcpy(b, golden_conn, sizeof(b));
	b[1] = 0; /* no IOMAP flag: the size byte means nothing */
	assert_int_equal(rs_conn_get(b, sizeof(b), &d), 0);
	assert_int_equal(d.target_iomap_size, 0);
}

static void test_scale_imm_sge(void **state)
{
	(void)state;
	static const unsigned v[] = {0, 1, 64, 128, 256, 512, 32512};
	for (unsigned i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		assert_int_equal(rs_scale_to_value(rs_value_to_scale(v[i])), v[i]);
	assert_int_equal(rs_value_to_scale(129), 128); /* rounds down to a size it can say */

	uint32_t imm = rs_imm_make(RS_OP_SGL, 0x12345);
	assert_int_equal(imm, 0x80012345u);
	assert_int_equal(rs_imm_op(imm), RS_OP_SGL);
	assert_int_equal(rs_imm_arg(imm), 0x12345);
	assert_int_equal(rs_imm_make(RS_OP_CTRL, RS_CTRL_SHUTDOWN), 0xe0000002u);

	struct rs_sge s = {0x0102030405060708ull, 0x0a0b0c0d, 0x11121314}, t;
	uint8_t le[RS_SGE_LEN], be[RS_SGE_LEN];
	rs_sge_put(le, &s, false);
	rs_sge_put(be, &s, true);
	assert_int_equal(le[0], 0x08);
	assert_int_equal(be[0], 0x01);
	assert_int_equal(le[12], 0x14);
	assert_int_equal(be[12], 0x11);
	rs_sge_get(__BYTE_ORDER == __BIG_ENDIAN ? be : le, &t);
	assert_memory_equal(&s, &t, sizeof(s));
}

/* ------------------------------------------------------------------------ */
/* Two streams on a fake wire                                                 */

struct end {
	struct rs_stream s;
	struct rs_stream_cfg cfg;
	uint8_t *rbuf, *target;
};

struct msg { /* one RDMA WRITE WITH IMMEDIATE in flight */
	uint32_t imm, len;
};

struct link {
	struct end e[2];
	struct msg q[2][4096]; /* q[i]: towards e[i] */
	unsigned qh[2], qn[2];
};

static void end_init(struct end *e, uint32_t rbuf, uint16_t rq, unsigned iomap)
{
	e->rbuf = calloc(1, rbuf);
	e->target = calloc(1, RS_SGL_SIZE * RS_SGE_LEN + iomap * RS_IOMAP_LEN);
	e->cfg = (struct rs_stream_cfg){.rbuf = e->rbuf,
					.rbuf_size = rbuf,
					.rbuf_rkey = 7,
					.target = e->target,
					.target_rkey = 8,
					.target_iomap_size = iomap,
					.rq_size = rq,
					.sq_size = 64,
					.sbuf_size = 8192};
	assert_int_equal(rs_stream_init(&e->s, &e->cfg), 0);
}

static void link_init(struct link *l, uint32_t rbuf, uint16_t rq)
{
	struct rs_conn c[2];
	uint8_t w[RS_CONN_DATA_LEN];

	memset(l, 0, sizeof(*l));
	for (int i = 0; i < 2; i++) {
		end_init(&l->e[i], rbuf, rq, 1);
		rs_stream_local_conn(&l->e[i].s, &c[i]);
	}
	for (int i = 0; i < 2; i++) { /* through the wire format, as in the REQ/REP */
		struct rs_conn got;
		rs_conn_put(w, &c[!i]);
		assert_int_equal(rs_conn_get(w, sizeof(w), &got), 0);
		rs_stream_peer_conn(&l->e[i].s, &got);
	}
}

static void link_fini(struct link *l)
{
	for (int i = 0; i < 2; i++) {
		rs_stream_fini(&l->e[i].s);
		free(l->e[i].rbuf);
		free(l->e[i].target);
	}
}

/* from end i: an RDMA WRITE WITH IMMEDIATE of len bytes at addr */
static void wire(struct link *l, int from, const void *src, uint32_t len, uint64_t addr,
		 uint32_t imm)
{
	int to = !from;
	if (len)
		memcpy((void *)(uintptr_t)addr, src, len);
	assert_true(l->qn[to] < 4096);
	l->q[to][(l->qh[to] + l->qn[to]++) % 4096] = (struct msg){imm, len};
}

/* Deliver what is in flight towards end i; the sender's sends complete. */
static void deliver(struct link *l, int to)
{
	while (l->qn[to]) {
		struct msg m = l->q[to][l->qh[to]];
		l->qh[to] = (l->qh[to] + 1) % 4096;
		l->qn[to]--;
		assert_true(rs_stream_rx(&l->e[to].s, m.imm, m.len) >= 0);
		enum rs_op op = rs_imm_op(m.imm);
		rs_stream_send_done(&l->e[!to].s,
				    op == RS_OP_DATA	    ? RS_SEND_DATA
				    : op == RS_OP_IOMAP_SGL ? RS_SEND_IOMAP
							    : RS_SEND_CTRL,
				    op == RS_OP_DATA ? m.len : 0);
	}
}

static void credits(struct link *l, int i)
{
	while (rs_stream_credit_due(&l->e[i].s)) {
		struct rs_credit c;
		rs_stream_credit_take(&l->e[i].s, &c);
		wire(l, i, c.sge, c.with_sge ? RS_SGE_LEN : 0, c.with_sge ? c.raddr : 0, c.imm);
	}
}

/* Move n bytes from end `from` to the other, in messages of at most `chunk`,
 * reading in pieces of `rd`; checks what arrives. */
static void transfer(struct link *l, int from, size_t n, uint32_t chunk, size_t rd)
{
	uint8_t *src = malloc(n), *dst = malloc(n);
	size_t sent = 0, got = 0;
	struct end *tx = &l->e[from], *rx = &l->e[!from];
	unsigned spins = 0;

	for (size_t i = 0; i < n; i++)
		src[i] = (uint8_t)(i * 7 + n);
	while (got < n) {
		assert_true(++spins < 1000000);
		while (sent < n && rs_stream_can_send(&tx->s)) {
			uint64_t ra;
			uint32_t rk;
			uint32_t want = n - sent < chunk ? (uint32_t)(n - sent) : chunk;
			uint32_t len = rs_stream_send_take(&tx->s, want, &ra, &rk);
			assert_int_equal(rk, rx->cfg.rbuf_rkey);
			assert_true(ra >= (uintptr_t)rx->rbuf &&
				    ra + len <= (uintptr_t)rx->rbuf + rx->cfg.rbuf_size);
			wire(l, from, src + sent, len, ra, rs_imm_make(RS_OP_DATA, len));
			sent += len;
		}
		deliver(l, !from);
		size_t want = n - got < rd ? n - got : rd;
		got += rs_stream_read(&rx->s, dst + got, want, false);
		credits(l, !from);
		deliver(l, from);
		credits(l, from);
		deliver(l, !from);
	}
	assert_memory_equal(src, dst, n);
	assert_false(rs_stream_have_data(&rx->s));
	free(src);
	free(dst);
}

static void test_stream_transfer(void **state)
{
	(void)state;
	static const size_t sizes[] = {1, 64, 100, 4095, 4096, 65536, 300000};
	struct link *l = malloc(sizeof(*l));

	link_init(l, 8192, 16);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		transfer(l, 0, sizes[i], 2048, 1000);
		transfer(l, 1, sizes[i], 65536, 1 << 20);
		transfer(l, 0, sizes[i], 7, 3); /* many small messages: credits bind */
	}
	/* The sender used both buffers the receiver granted, round robin. */
	assert_true(l->e[0].s.sseq_no > 16);
	link_fini(l);
	free(l);
}

static void test_stream_shutdown_iomap(void **state)
{
	(void)state;
	struct link *l = malloc(sizeof(*l));
	uint8_t buf[256] = {0}, src[100];
	uint64_t ra;
	uint32_t rk, len;

	link_init(l, 8192, 16);
	/* end 1 maps buf at stream offset 1000 and tells end 0 */
	assert_int_equal(rs_stream_iomap_take(&l->e[1].s, 0, &ra, &rk), 0);
	struct rs_iomap m = {.offset = 1000, .sge = {(uintptr_t)buf, 9, sizeof(buf)}};
	uint8_t e[RS_IOMAP_LEN];
	rs_iomap_put(e, &m, l->e[1].s.peer_net);
	wire(l, 1, e, RS_IOMAP_LEN, ra, rs_imm_make(RS_OP_IOMAP_SGL, 0));
	deliver(l, 0);
	assert_int_equal(rs_stream_iomap_take(&l->e[1].s, 1, &ra, &rk), -EINVAL);
	/* end 0 writes into it directly: inside, clipped at its end, outside */
	assert_int_equal(rs_stream_direct_take(&l->e[0].s, 1000 + 200, 100, &len, &ra, &rk), 0);
	assert_int_equal(len, 56);
	assert_true(ra == (uintptr_t)buf + 200 && rk == 9);
	assert_int_equal(rs_stream_direct_take(&l->e[0].s, 1256, 1, &len, &ra, &rk), -EINVAL);
	assert_int_equal(rs_stream_direct_take(&l->e[0].s, 999, 1, &len, &ra, &rk), -EINVAL);
	memset(src, 1, sizeof(src));
	/* shutdown: end 0 stops sending; end 1 sees the end */
	uint32_t imm = rs_stream_ctrl_take(&l->e[0].s, RS_CTRL_SHUTDOWN);
	wire(l, 0, NULL, 0, 0, imm);
	assert_true(l->e[1].s.readable);
	deliver(l, 1);
	assert_false(l->e[1].s.readable);
	assert_true(l->e[1].s.writable);
	imm = rs_stream_ctrl_take(&l->e[1].s, RS_CTRL_DISCONNECT);
	wire(l, 1, NULL, 0, 0, imm);
	deliver(l, 0);
	assert_false(l->e[0].s.readable || l->e[0].s.writable);
	assert_false(rs_stream_can_send(&l->e[0].s));
	link_fini(l);
	free(l);
}

/* ------------------------------------------------------------------------ */
/* A hostile peer                                                             */

static void test_hostile(void **state)
{
	(void)state;
	struct link *l = malloc(sizeof(*l));
	struct rs_stream *s;
	uint64_t before[RS_STAT_COUNT];

	memcpy(before, rs_stats, sizeof(before));

	link_init(l, 8192, 4);
	s = &l->e[0].s;
	/* more bytes than the half we granted */
	assert_int_equal(rs_stream_rx(s, rs_imm_make(RS_OP_DATA, 4097), 4097), -EPROTO);
	assert_int_equal(rs_stats[RS_STAT_rx_data_overrun], before[RS_STAT_rx_data_overrun] + 1);
	/* an immediate that says more than the write carried */
	assert_int_equal(rs_stream_rx(s, rs_imm_make(RS_OP_DATA, 10), 9), -EPROTO);
	/* more messages than credits (rq_size 4) */
	for (int i = 0; i < 4; i++)
		assert_int_equal(rs_stream_rx(s, rs_imm_make(RS_OP_DATA, 1), 1), RS_RX_DATA);
	assert_int_equal(rs_stream_rx(s, rs_imm_make(RS_OP_DATA, 1), 1), -EPROTO);
	assert_int_equal(rs_stats[RS_STAT_rx_msg_overflow], before[RS_STAT_rx_msg_overflow] + 1);
	/* reserved operations and our local-only one */
	for (unsigned op = 1; op <= 5; op += 2)
		assert_int_equal(rs_stream_rx(s, op << 29, 0), -EPROTO);
	assert_int_equal(rs_stream_rx(s, rs_imm_make(RS_OP_WRITE, 0), 0), -EPROTO);
	assert_int_equal(rs_stats[RS_STAT_rx_bad_op], before[RS_STAT_rx_bad_op] + 4);
	/* an iomap index beyond the one entry we have */
	assert_int_equal(rs_stream_rx(s, rs_imm_make(RS_OP_IOMAP_SGL, 1), RS_IOMAP_LEN), -EPROTO);
	/* an iomap entry that wraps */
	struct rs_iomap m = {.offset = UINT64_MAX - 5, .sge = {0x1000, 1, 100}};
	rs_iomap_put(l->e[0].target + RS_SGL_SIZE * RS_SGE_LEN, &m, false);
	assert_int_equal(rs_stream_rx(s, rs_imm_make(RS_OP_IOMAP_SGL, 0), RS_IOMAP_LEN), -EPROTO);
	assert_int_equal(rs_stats[RS_STAT_rx_bad_iomap], before[RS_STAT_rx_bad_iomap] + 2);
	/* unknown control message: counted, ignored */
	assert_int_equal(rs_stream_rx(s, rs_imm_make(RS_OP_CTRL, 9), 0), 0);
	assert_int_equal(rs_stats[RS_STAT_rx_bad_ctrl], before[RS_STAT_rx_bad_ctrl] + 1);
	/* a grant into entry 1, then another into entry 0 that we still fill */
	struct rs_sge g = {0x5000, 3, 100};
	rs_sge_put(l->e[0].target + RS_SGE_LEN, &g, false);
	assert_int_equal(rs_stream_rx(s, rs_imm_make(RS_OP_SGL, 8), RS_SGE_LEN), RS_RX_CREDITS);
	assert_int_equal(s->target[1].length, 100);
	rs_sge_put(l->e[0].target, &g, false);
	assert_int_equal(rs_stream_rx(s, rs_imm_make(RS_OP_SGL, 8), RS_SGE_LEN), -EPROTO);
	/* a grant that wraps the address space */
	link_fini(l);
	link_init(l, 8192, 4);
	s = &l->e[0].s;
	g = (struct rs_sge){UINT64_MAX - 10, 3, 100};
	rs_sge_put(l->e[0].target + RS_SGE_LEN, &g, false);
	assert_int_equal(rs_stream_rx(s, rs_imm_make(RS_OP_SGL, 8), RS_SGE_LEN), -EPROTO);
	assert_int_equal(rs_stats[RS_STAT_rx_bad_sge], before[RS_STAT_rx_bad_sge] + 2);
	link_fini(l);
	free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_conn_layout),		  cmocka_unit_test(test_conn_refused),
	    cmocka_unit_test(test_scale_imm_sge),	  cmocka_unit_test(test_stream_transfer),
	    cmocka_unit_test(test_stream_shutdown_iomap), cmocka_unit_test(test_hostile),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
