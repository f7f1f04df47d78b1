/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rocemu's librdmacm with the real engine under a hostile sender: two
 * devices on an in-process ring pair, an RC connection set up through
 * rdma_cm, then a raw UD QP on the client's device floods the server's QP1
 * with MADs that are short (100 bytes), not CM (base version 2), of an
 * attribute rocemu does not use (MRA), or name comm IDs that do not exist
 * (DREQ, REP, RTU, REJ, DREP), and REQs with a bad CMA header. Afterwards:
 * no event on either side, the connection still carries data and
 * disconnects normally, and the GSI still answers (more than its 64 send
 * slots' worth of requests, so that slots and cached AHs are reused only
 * after their completions). Every wait is bounded.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cm_conn.h"

#define IP_A	 "10.81.1.1"
#define IP_B	 "10.81.1.2"
#define FLOOD	 300
#define GSI_QKEY 0x80010000u /* the well-known Q_Key of QP1 */

static void no_event(struct rdma_event_channel *ch, int ms)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;

	if (poll(&p, 1, ms) != 0 && rdma_get_cm_event(ch, &ev) == 0)
		fail_msg("unexpected %s (status %d)", rdma_event_str(ev->event), ev->status);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8), p[1] = (uint8_t)v;
}
static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16)), put16(p + 2, (uint16_t)v);
}

/* MAD number i of the flood and its length. */
static unsigned hostile_mad(unsigned i, uint8_t *m)
{
	static const uint16_t attrs[] = {0x0015, 0x0013, 0x0014, 0x0012, 0x0016};
	memset(m, 0, 256);
	m[0] = 1, m[1] = 0x07, m[2] = 2, m[3] = 0x03;
	put32(m + 12, i);
	put16(m + 16, attrs[i % 5]);
	put32(m + 24, 0xabc00000u + i);	    /* the sender's comm ID */
	put32(m + 28, 0x5eed0000u + i * 7); /* ours: none exists */
	switch (i % 8) {
	case 0:
		return 100; /* short */
	case 1:
		m[0] = 2; /* base version */
		break;
	case 2:
		put16(m + 16, 0x0011); /* MRA */
		break;
	case 3: /* REQ for the listener's service ID (RDMA_PS_TCP, 7600), CMA version 1 */
		put16(m + 16, 0x0010);
		put32(m + 24 + 8, 0);
		put32(m + 24 + 12, 0x01060000u | 7600);
		m[24 + 140] = 1;
		break;
	default:
		break;
	}
	return 256;
}

static void flood_keeps_connection(void **state)
{
	(void)state;
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct rdma_cm_id *listen, *client, *server;
	assert_non_null(sch);
	assert_non_null(cch);

	/* the connection */
	listen = cmt_listen(sch, RDMA_PS_TCP, IP_B, 7600);
	client = cmt_resolve(cch, RDMA_PS_TCP, NULL, IP_A, IP_B, 7600);
	cmt_create_qp(client, IBV_QPT_RC);
	struct rdma_conn_param cp = {
	    .responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7};
	assert_int_equal(rdma_connect(client, &cp), 0);
	struct rdma_cm_event *ev = tu_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
	server = ev->id;
	cmt_ack(ev);
	cmt_create_qp(server, IBV_QPT_RC);
	assert_int_equal(rdma_accept(server, &cp), 0);
	cmt_ack(tu_expect(cch, RDMA_CM_EVENT_ESTABLISHED));
	cmt_ack(tu_expect(sch, RDMA_CM_EVENT_ESTABLISHED));

	/* the hostile sender: a UD QP on the client's device (a context of its
	 * own), sending to B's QP1 */
	struct tu_side h;
	tu_side_open(&h, client->verbs->device, IBV_QPT_UD);
	tu_ud_ready(h.qp, GSI_QKEY, 0);
	struct ibv_ah_attr aa = {
	    .is_global = 1, .port_num = 1, .grh = {.sgid_index = 1, .hop_limit = 64}};
	aa.grh.dgid.raw[10] = aa.grh.dgid.raw[11] = 0xff;
	inet_pton(AF_INET, IP_B, aa.grh.dgid.raw + 12);
	struct ibv_ah *ah = ibv_create_ah(h.pd, &aa);
	assert_non_null(ah);
	for (unsigned i = 0; i < FLOOD; i += 16) {
		unsigned n = FLOOD - i < 16 ? FLOOD - i : 16;
		for (unsigned j = 0; j < n; j++)
			tu_post_ud(&h, j, ah, 1, GSI_QKEY, j * 256,
				   hostile_mad(i + j, h.buf + j * 256));
		for (unsigned j = 0; j < n; j++)
			tu_side_poll(&h);
	}
	/* nothing happened to either end */
	no_event(sch, 500);
	no_event(cch, 100);

	/* the connection still carries data */
	uint8_t *rbuf = calloc(1, 64), *sbuf = malloc(64);
	for (int i = 0; i < 64; i++)
		sbuf[i] = (uint8_t)(i * 5 + 1);
	struct ibv_mr *rmr = rdma_reg_msgs(server, rbuf, 64),
		      *smr = rdma_reg_msgs(client, sbuf, 64);
	assert_int_equal(rdma_post_recv(server, NULL, rbuf, 64, rmr), 0);
	assert_int_equal(rdma_post_send(client, NULL, sbuf, 64, smr, IBV_SEND_SIGNALED), 0);
	tu_poll_one(client->send_cq);
	tu_poll_one(server->recv_cq);
	assert_memory_equal(rbuf, sbuf, 64);

	/* the GSI still answers, well past its send slots: connect and be
	 * rejected (no listener on 7601) again and again */
	for (unsigned i = 0; i < 80; i++) {
		struct rdma_cm_id *c = cmt_resolve(cch, RDMA_PS_TCP, NULL, IP_A, IP_B, 7601);
		struct rdma_conn_param p = {.qp_num = 0x100 + i};
		assert_int_equal(rdma_connect(c, &p), 0);
		ev = tu_expect(cch, RDMA_CM_EVENT_REJECTED);
		assert_int_equal(ev->status, 8);
		cmt_ack(ev);
		assert_int_equal(rdma_destroy_id(c), 0);
	}

	/* and the connection ends normally */
	assert_int_equal(rdma_disconnect(client), 0);
	cmt_ack(tu_expect(sch, RDMA_CM_EVENT_DISCONNECTED));
	cmt_ack(tu_expect(cch, RDMA_CM_EVENT_DISCONNECTED));

	ibv_destroy_ah(ah);
	tu_side_close(&h);
	rdma_dereg_mr(rmr);
	rdma_dereg_mr(smr);
	free(rbuf);
	free(sbuf);
	cmt_destroy(server, client, listen);
	rdma_destroy_event_channel(sch);
	rdma_destroy_event_channel(cch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(flood_keeps_connection),
	};
	return cmt_run_two_devices("cmfz", IP_A, IP_B, tests, sizeof(tests) / sizeof(tests[0]));
}
