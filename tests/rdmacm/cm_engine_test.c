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
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "../verbs/test_util.h"

#define IP_A  "10.81.1.1"
#define IP_B  "10.81.1.2"
#define FLOOD 300

static void no_event(struct rdma_event_channel *ch, int ms)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;

	if (poll(&p, 1, ms) != 0 && rdma_get_cm_event(ch, &ev) == 0)
		fail_msg("unexpected %s (status %d)", rdma_event_str(ev->event), ev->status);
}

static void wait_comp(struct ibv_cq *cq, unsigned n)
{
	time_t end = time(NULL) + 10;
	struct ibv_wc wc;

	while (n && time(NULL) < end) {
		int r = ibv_poll_cq(cq, 1, &wc);
		assert_true(r >= 0);
		if (r == 1) {
			if (wc.status != IBV_WC_SUCCESS)
				fail_msg("completion status %s", ibv_wc_status_str(wc.status));
			n--;
		}
	}
	if (n)
		fail_msg("%u completions missing after 10 s", n);
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
	assert_int_equal(rdma_create_id(sch, &listen, NULL, RDMA_PS_TCP), 0);
	struct sockaddr_in la = tu_addr(IP_B, 7600), ca = tu_addr(IP_A, 0);
	assert_int_equal(rdma_bind_addr(listen, (struct sockaddr *)&la), 0);
	assert_int_equal(rdma_listen(listen, 4), 0);
	assert_int_equal(rdma_create_id(cch, &client, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(
	    rdma_resolve_addr(client, (struct sockaddr *)&ca, (struct sockaddr *)&la, 2000), 0);
	rdma_ack_cm_event(tu_expect(cch, RDMA_CM_EVENT_ADDR_RESOLVED));
	assert_int_equal(rdma_resolve_route(client, 2000), 0);
	rdma_ack_cm_event(tu_expect(cch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	struct ibv_qp_init_attr qa = {
	    .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = IBV_QPT_RC};
	assert_int_equal(rdma_create_qp(client, NULL, &qa), 0);
	struct rdma_conn_param cp = {
	    .responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7};
	assert_int_equal(rdma_connect(client, &cp), 0);
	struct rdma_cm_event *ev = tu_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
	server = ev->id;
	rdma_ack_cm_event(ev);
	qa.send_cq = qa.recv_cq = NULL; /* rdma_create_qp filled in the client's */
	assert_int_equal(rdma_create_qp(server, NULL, &qa), 0);
	assert_int_equal(rdma_accept(server, &cp), 0);
	rdma_ack_cm_event(tu_expect(cch, RDMA_CM_EVENT_ESTABLISHED));
	rdma_ack_cm_event(tu_expect(sch, RDMA_CM_EVENT_ESTABLISHED));

	/* the hostile sender: a UD QP on the client's device, to B's QP1 */
	struct ibv_pd *pd = ibv_alloc_pd(client->verbs);
	struct ibv_cq *cq = ibv_create_cq(client->verbs, 64, NULL, NULL, 0);
	assert_non_null(pd);
	assert_non_null(cq);
	struct ibv_qp_init_attr ua = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .cap = {.max_send_wr = 32, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = IBV_QPT_UD};
	struct ibv_qp *raw = ibv_create_qp(pd, &ua);
	assert_non_null(raw);
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x80010000};
	assert_int_equal(
	    ibv_modify_qp(raw, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
	    0);
	a.qp_state = IBV_QPS_RTR;
	assert_int_equal(ibv_modify_qp(raw, &a, IBV_QP_STATE), 0);
	a.qp_state = IBV_QPS_RTS;
	assert_int_equal(ibv_modify_qp(raw, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
	struct ibv_ah_attr aa = {
	    .is_global = 1, .port_num = 1, .grh = {.sgid_index = 1, .hop_limit = 64}};
	aa.grh.dgid.raw[10] = aa.grh.dgid.raw[11] = 0xff;
	inet_pton(AF_INET, IP_B, aa.grh.dgid.raw + 12);
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	assert_non_null(ah);
	uint8_t *buf = calloc(16, 256);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 16 * 256, IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(mr);
	for (unsigned i = 0; i < FLOOD; i += 16) {
		unsigned n = FLOOD - i < 16 ? FLOOD - i : 16;
		for (unsigned j = 0; j < n; j++) {
			struct ibv_sge sge = {.addr = (uintptr_t)(buf + j * 256), .lkey = mr->lkey};
			sge.length = hostile_mad(i + j, buf + j * 256);
			struct ibv_send_wr wr = {.wr_id = j,
						 .sg_list = &sge,
						 .num_sge = 1,
						 .opcode = IBV_WR_SEND,
						 .send_flags = IBV_SEND_SIGNALED},
					   *bad;
			wr.wr.ud.ah = ah;
			wr.wr.ud.remote_qpn = 1;
			wr.wr.ud.remote_qkey = 0x80010000;
			assert_int_equal(ibv_post_send(raw, &wr, &bad), 0);
		}
		wait_comp(cq, n);
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
	wait_comp(client->send_cq, 1);
	wait_comp(server->recv_cq, 1);
	assert_memory_equal(rbuf, sbuf, 64);

	/* the GSI still answers, well past its send slots: connect and be
	 * rejected (no listener on 7601) again and again */
	for (unsigned i = 0; i < 80; i++) {
		struct rdma_cm_id *c;
		struct sockaddr_in na = tu_addr(IP_B, 7601);
		assert_int_equal(rdma_create_id(cch, &c, NULL, RDMA_PS_TCP), 0);
		assert_int_equal(
		    rdma_resolve_addr(c, (struct sockaddr *)&ca, (struct sockaddr *)&na, 2000), 0);
		rdma_ack_cm_event(tu_expect(cch, RDMA_CM_EVENT_ADDR_RESOLVED));
		assert_int_equal(rdma_resolve_route(c, 2000), 0);
		rdma_ack_cm_event(tu_expect(cch, RDMA_CM_EVENT_ROUTE_RESOLVED));
		struct rdma_conn_param p = {.qp_num = 0x100 + i};
		assert_int_equal(rdma_connect(c, &p), 0);
		ev = tu_expect(cch, RDMA_CM_EVENT_REJECTED);
		assert_int_equal(ev->status, 8);
		rdma_ack_cm_event(ev);
		assert_int_equal(rdma_destroy_id(c), 0);
	}

	/* and the connection ends normally */
	assert_int_equal(rdma_disconnect(client), 0);
	rdma_ack_cm_event(tu_expect(sch, RDMA_CM_EVENT_DISCONNECTED));
	rdma_ack_cm_event(tu_expect(cch, RDMA_CM_EVENT_DISCONNECTED));

	ibv_dereg_mr(mr);
	ibv_destroy_ah(ah);
	ibv_destroy_qp(raw);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	free(buf);
	rdma_dereg_mr(rmr);
	rdma_dereg_mr(smr);
	free(rbuf);
	free(sbuf);
	rdma_destroy_qp(server);
	rdma_destroy_qp(client);
	rdma_destroy_id(server);
	rdma_destroy_id(client);
	rdma_destroy_id(listen);
	rdma_destroy_event_channel(sch);
	rdma_destroy_event_channel(cch);
}

int main(void)
{
	char path[] = "/tmp/rocemu-cmfuzz-XXXXXX";

	if (tu_config(path, "[rocemu0]\nport = ring:cmfz:a\nip = " IP_A "/24\n"
			    "[rocemu1]\nport = ring:cmfz:b\nip = " IP_B "/24\n"))
		return 1;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(flood_keeps_connection),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	unlink(path);
	return rc;
}
