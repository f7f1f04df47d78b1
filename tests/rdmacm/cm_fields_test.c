/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fields of rocemu's CM messages that a kernel CM (Linux's cm.c and
 * rdma_cm, as Soft-RoCE and every RoCE NIC driver use them) relies on
 * (issue 13 item 3), and the identifiers a peer must neither guess nor see
 * repeat (issue 18.4). The state machine runs on the fake device of
 * cm_stub.c; what it sends is decoded and compared with what
 * rdma_init_qp_attr gives the QP. tests/interop runs the programs against
 * the real kernel.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "cm_peer.h"
#include "cm_stub.h"

#define PEER	 2 /* 10.0.0.2 */
#define PORT	 7471
#define PEER_QPN 0x123u

static struct rdma_event_channel *ch;

static struct cma_id *cid(struct rdma_cm_id *id)
{
	return (struct cma_id *)id;
}

static struct rdma_cm_id *expect_event(enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	assert_int_equal(rdma_get_cm_event(ch, &ev), 0);
	assert_int_equal(ev->event, want);
	id = ev->id;
	rdma_ack_cm_event(ev);
	return id;
}

static void rx_from_peer(const uint8_t *mad)
{
	uint8_t grh[40];

	stub_grh_v4(grh, PEER);
	stub_rx(grh, mad);
}

static uint16_t sent_attr(unsigned i)
{
	return (uint16_t)(stub_sent[i].mad[16] << 8 | stub_sent[i].mad[17]);
}

static void sin_of(struct sockaddr_in *s, uint8_t last, uint16_t port)
{
	memset(s, 0, sizeof(*s));
	s->sin_family = AF_INET;
	s->sin_port = htons(port);
	s->sin_addr.s_addr = htonl(0x0a000000u | last);
}

/* The QP attributes rdma_init_qp_attr gives for state s. */
static struct ibv_qp_attr qp_attr(struct rdma_cm_id *id, enum ibv_qp_state s, int *mask)
{
	struct ibv_qp_attr a = {.qp_state = s};

	assert_int_equal(rdma_init_qp_attr(id, &a, mask), 0);
	return a;
}

/* An active id with its route resolved to the peer, nothing sent yet. */
static struct rdma_cm_id *active_id(void)
{
	struct rdma_cm_id *id;
	struct sockaddr_in a;

	assert_int_equal(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	sin_of(&a, PEER, 9000);
	assert_int_equal(rdma_resolve_addr(id, NULL, (struct sockaddr *)&a, 100), 0);
	expect_event(RDMA_CM_EVENT_ADDR_RESOLVED);
	assert_int_equal(rdma_resolve_route(id, 100), 0);
	expect_event(RDMA_CM_EVENT_ROUTE_RESOLVED);
	return id;
}

/* rdma_connect(id, p): the REQ it sent (and its transaction ID). */
static struct cm_req connect_req(struct rdma_cm_id *id, struct rdma_conn_param *p, uint64_t *tid)
{
	struct cm_req r;
	struct cm_mad_hdr h;

	stub_reset_sent();
	assert_int_equal(rdma_connect(id, p), 0);
	assert_int_equal(stub_n_sent, 1);
	assert_int_equal(sent_attr(0), CM_ATTR_REQ);
	cm_mad_get_req(stub_sent[0].mad, &r);
	assert_int_equal(cm_mad_parse_hdr(stub_sent[0].mad, CM_MAD_SIZE, &h), 0);
	if (tid)
		*tid = h.tid;
	return r;
}

static int setup(void **state)
{
	(void)state;
	memset(&cma_stats, 0, sizeof(cma_stats));
	ch = rdma_create_event_channel();
	assert_non_null(ch);
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	stub_reset_sent();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rdma_destroy_event_channel(ch);
	return 0;
}

/* A listener on PORT gets req (transaction tid) from the peer and accepts it
 * for QP qp_num: the new id, its REP the only MAD sent since. */
static struct rdma_cm_id *accept_req(struct rdma_cm_id **listen, const struct cm_req *req,
				     uint64_t tid, uint32_t qp_num)
{
	struct sockaddr_in a;
	uint8_t mad[CM_MAD_SIZE];

	assert_int_equal(rdma_create_id(ch, listen, NULL, RDMA_PS_TCP), 0);
	sin_of(&a, 1, PORT);
	assert_int_equal(rdma_bind_addr(*listen, (struct sockaddr *)&a), 0);
	assert_int_equal(rdma_listen(*listen, 4), 0);
	cm_mad_put_req(mad, tid, req);
	rx_from_peer(mad);
	struct rdma_cm_id *id = expect_event(RDMA_CM_EVENT_CONNECT_REQUEST);
	struct rdma_conn_param p = {
	    .qp_num = qp_num, .responder_resources = 1, .initiator_depth = 1};
	stub_reset_sent();
	assert_int_equal(rdma_accept(id, &p), 0);
	assert_int_equal(sent_attr(0), CM_ATTR_REP);
	return id;
}

/*
 * Passive side: the REQ's starting PSN is where our send queue starts, the
 * one in our REP is what our receive queue expects. Swapped (as rocemu had
 * it, consistent only with itself), rxe's responder took every SEND from
 * rocemu for a duplicate and ACKed PSN 0xFFFFFF... forever: rping, ib_write_bw
 * -R, ucmatose ended in RETRY_EXC (status 12).
 */
static void psn_passive(void **state)
{
	struct rdma_cm_id *listen, *id;
	struct cm_req req;
	struct cm_rep rep;
	int mask;

	(void)state;
	cm_peer_req(&req, RDMA_PS_TCP, PORT, 0x5000, PEER, PEER_QPN);
	req.starting_psn = 0xabcdef;
	id = accept_req(&listen, &req, 0x77, 0x456);
	cm_mad_get_rep(stub_sent[0].mad, &rep);

	struct ibv_qp_attr rtr = qp_attr(id, IBV_QPS_RTR, &mask);
	assert_true(mask & IBV_QP_RQ_PSN);
	assert_int_equal(rtr.rq_psn, rep.starting_psn);
	assert_int_equal(rtr.dest_qp_num, PEER_QPN);
	struct ibv_qp_attr rts = qp_attr(id, IBV_QPS_RTS, &mask);
	assert_true(mask & IBV_QP_SQ_PSN);
	assert_int_equal(rts.sq_psn, 0xabcdef);
	rdma_destroy_id(id);
	rdma_destroy_id(listen);
}

/*
 * rdma_set_option(TOS) is the path's traffic class (DSCP:6 ECN:2), as in
 * Linux's CM: the REQ carries it, the REQ is sent with it, and the QP's AV at
 * RTR has it. Ignored, every frame of `ib_write_bw -R --tos 104` left with DSCP 0.
 */
static void tos_active(void **state)
{
	struct rdma_cm_id *id;
	struct sockaddr_in a;
	uint8_t tos = 104; /* DSCP 26 (AF31) */
	int mask;

	(void)state;
	assert_int_equal(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1), 0);
	sin_of(&a, PEER, 9000);
	assert_int_equal(rdma_resolve_addr(id, NULL, (struct sockaddr *)&a, 100), 0);
	expect_event(RDMA_CM_EVENT_ADDR_RESOLVED);
	assert_int_equal(rdma_resolve_route(id, 100), 0);
	expect_event(RDMA_CM_EVENT_ROUTE_RESOLVED);
	assert_int_equal(id->route.path_rec->traffic_class, 104);
	struct rdma_conn_param p = {.responder_resources = 1, .initiator_depth = 1};
	uint64_t tid;
	struct cm_req req = connect_req(id, &p, &tid);
	assert_int_equal(req.traffic_class, 104);
	assert_int_equal(stub_sent[0].tclass, 104);
	struct cm_rep rep = {.local_comm_id = 0x6100,
			     .remote_comm_id = req.local_comm_id,
			     .local_qpn = 0x78a,
			     .starting_psn = 0x1234,
			     .responder_resources = 1,
			     .initiator_depth = 1};
	uint8_t mad[CM_MAD_SIZE];
	cm_mad_put_rep(mad, tid, &rep);
	stub_reset_sent();
	rx_from_peer(mad);
	expect_event(RDMA_CM_EVENT_CONNECT_RESPONSE);
	assert_int_equal(qp_attr(id, IBV_QPS_RTR, &mask).ah_attr.grh.traffic_class, 104);
	rdma_destroy_id(id);
}

/* The passive side takes the REQ's traffic class for its AV and its MADs. */
static void tos_passive(void **state)
{
	struct rdma_cm_id *listen, *id;
	struct cm_req req;
	int mask;

	(void)state;
	cm_peer_req(&req, RDMA_PS_TCP, PORT, 0x5100, PEER, PEER_QPN);
	req.traffic_class = 0x6a; /* DSCP 26, ECT(0) */
	id = accept_req(&listen, &req, 0x78, 0x457);
	assert_int_equal(stub_sent[0].tclass, 0x6a);
	assert_int_equal(qp_attr(id, IBV_QPS_RTR, &mask).ah_attr.grh.traffic_class, 0x6a);
	rdma_destroy_id(id);
	rdma_destroy_id(listen);
}

/*
 * The passive side takes the REQ's SL for its AV (as Linux's CM builds the
 * passive AV from the REQ's path), so a peer on a VLAN with a priority gets
 * its PCP back; the active side sends SL 0 (no SA, no egress map).
 */
static void sl_passive(void **state)
{
	struct rdma_cm_id *listen, *id;
	struct cm_req req;
	int mask;

	(void)state;
	cm_peer_req(&req, RDMA_PS_TCP, PORT, 0x5200, PEER, PEER_QPN);
	req.sl = 3;
	id = accept_req(&listen, &req, 0x79, 0x458);
	assert_int_equal(stub_sent[0].sl, 3); /* the REP on the REQ's path */
	assert_int_equal(qp_attr(id, IBV_QPS_RTR, &mask).ah_attr.sl, 3);
	assert_int_equal(id->route.path_rec->sl, 3);
	rdma_destroy_id(id);
	rdma_destroy_id(listen);

	struct rdma_cm_id *a = active_id();
	struct rdma_conn_param p = {.responder_resources = 1, .initiator_depth = 1};
	uint64_t tid;
	assert_int_equal(connect_req(a, &p, &tid).sl, 0);
	rdma_destroy_id(a);
}

/* Active side: our REQ names what we expect, the REP where we send from. */
static void psn_active(void **state)
{
	struct rdma_cm_id *id = active_id();
	struct rdma_conn_param p = {.responder_resources = 1, .initiator_depth = 1};
	uint8_t mad[CM_MAD_SIZE];
	uint64_t tid;
	int mask;

	(void)state;
	struct cm_req req = connect_req(id, &p, &tid);
	struct cm_rep rep = {.local_comm_id = 0x6000,
			     .remote_comm_id = req.local_comm_id,
			     .local_qpn = 0x789,
			     .starting_psn = 0x123456,
			     .responder_resources = 1,
			     .initiator_depth = 1};
	cm_mad_put_rep(mad, tid, &rep);
	rx_from_peer(mad);
	expect_event(RDMA_CM_EVENT_CONNECT_RESPONSE);
	assert_int_equal(qp_attr(id, IBV_QPS_RTR, &mask).rq_psn, req.starting_psn);
	assert_int_equal(qp_attr(id, IBV_QPS_RTS, &mask).sq_psn, 0x123456);
	rdma_destroy_id(id);
}

/*
 * rdma_conn_param reaches the REQ: responder resources and initiator depth
 * (capped by the device), retry and RNR retry counts; the QP gets what was
 * negotiated with the REP.
 */
static void conn_param_in_req(void **state)
{
	struct rdma_cm_id *id = active_id();
	struct rdma_conn_param p = {
	    .responder_resources = 3, .initiator_depth = 2, .retry_count = 5, .rnr_retry_count = 6};
	uint8_t mad[CM_MAD_SIZE];
	uint64_t tid;
	int mask;

	(void)state;
	struct cm_req req = connect_req(id, &p, &tid);
	assert_int_equal(req.responder_resources, 3);
	assert_int_equal(req.initiator_depth, 2);
	assert_int_equal(req.retry_count, 5);
	assert_int_equal(req.rnr_retry_count, 6);
	struct cm_rep rep = {.local_comm_id = 0x6001,
			     .remote_comm_id = req.local_comm_id,
			     .local_qpn = 0x789,
			     .responder_resources = 1, /* the peer serves one READ of ours */
			     .initiator_depth = 3,
			     .rnr_retry_count = 4};
	cm_mad_put_rep(mad, tid, &rep);
	rx_from_peer(mad);
	expect_event(RDMA_CM_EVENT_CONNECT_RESPONSE);
	struct ibv_qp_attr rtr = qp_attr(id, IBV_QPS_RTR, &mask);
	assert_int_equal(rtr.max_dest_rd_atomic, 3);
	struct ibv_qp_attr rts = qp_attr(id, IBV_QPS_RTS, &mask);
	assert_int_equal(rts.max_rd_atomic, 1);
	assert_int_equal(rts.retry_cnt, 5);
	assert_int_equal(rts.rnr_retry, 4); /* the REP says how we retry on its RNR NAKs */
	rdma_destroy_id(id);

	/* more than the device has: capped to its max_qp_rd_atom */
	id = active_id();
	p.responder_resources = p.initiator_depth = 200;
	req = connect_req(id, &p, NULL);
	assert_int_equal(req.responder_resources, cid(id)->dev->max_rd_atom);
	assert_int_equal(req.initiator_depth, cid(id)->dev->max_rd_atom);
	rdma_destroy_id(id);
}

/*
 * The REQ's path fields as Linux's rdma_cm fills them for RoCE: the link's
 * packet rate, a flow label from the two ports (sport * 31 + dport; rxe's
 * REQ for port 7004 from 0xcf5d carried 0x9379f), local ACK timeout 19
 * (packet life time 18 + 1, 2.1 s: with 14, 67 ms, seven retries gave a busy
 * peer half a second). rocemu sent rate 0, no flow label and 14. The QP's
 * AH carries the flow label, on both sides.
 */
static void req_path_fields(void **state)
{
	struct rdma_cm_id *id = active_id();
	uint8_t mad[CM_MAD_SIZE];
	uint64_t tid;
	int mask;

	(void)state;
	struct cm_req req = connect_req(id, NULL, &tid);
	uint16_t sport = ntohs(((struct sockaddr_in *)&id->route.addr.src_addr)->sin_port);
	assert_int_equal(req.flow_label, (sport * 31u + 9000) & 0xFFFFF);
	assert_int_equal(req.packet_rate, IBV_RATE_10_GBPS); /* the stub device's link */
	assert_int_equal(req.local_ack_timeout, 19);
	assert_int_equal(req.hop_limit, 64);
	struct cm_rep rep = {.local_comm_id = 0x6002,
			     .remote_comm_id = req.local_comm_id,
			     .local_qpn = 0x789,
			     .starting_psn = 1};
	cm_mad_put_rep(mad, tid, &rep);
	rx_from_peer(mad);
	expect_event(RDMA_CM_EVENT_CONNECT_RESPONSE);
	assert_int_equal(qp_attr(id, IBV_QPS_RTR, &mask).ah_attr.grh.flow_label, req.flow_label);
	assert_int_equal(qp_attr(id, IBV_QPS_RTS, &mask).timeout, 19);
	rdma_destroy_id(id);

	/* passive: the REQ's flow label and ACK timeout are the connection's */
	struct rdma_cm_id *listen, *pid;
	struct sockaddr_in a;
	sin_of(&a, 1, PORT);
	assert_int_equal(rdma_create_id(ch, &listen, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_bind_addr(listen, (struct sockaddr *)&a), 0);
	assert_int_equal(rdma_listen(listen, 4), 0);
	cm_peer_req(&req, RDMA_PS_TCP, PORT, 0x5001, PEER, PEER_QPN);
	req.flow_label = 0x9379f;
	req.local_ack_timeout = 18;
	cm_mad_put_req(mad, 0x78, &req);
	rx_from_peer(mad);
	pid = expect_event(RDMA_CM_EVENT_CONNECT_REQUEST);
	struct rdma_conn_param p = {.qp_num = 0x457};
	assert_int_equal(rdma_accept(pid, &p), 0);
	assert_int_equal(qp_attr(pid, IBV_QPS_RTR, &mask).ah_attr.grh.flow_label, 0x9379f);
	assert_int_equal(qp_attr(pid, IBV_QPS_RTS, &mask).timeout, 18);
	rdma_destroy_id(pid);
	rdma_destroy_id(listen);
}

/*
 * Issue 18.4: communication IDs, transaction IDs and starting PSNs come from
 * the kernel's CSPRNG. Comm IDs were consecutive from one random start, and
 * the rest came from an xorshift seeded with time ^ pid.
 */
static void ids_unpredictable(void **state)
{
	struct rdma_cm_id *id[32];
	unsigned consecutive = 0;

	(void)state;
	for (int i = 0; i < 32; i++) {
		assert_int_equal(rdma_create_id(ch, &id[i], NULL, RDMA_PS_TCP), 0);
		assert_int_not_equal(cid(id[i])->local_comm_id, 0);
		for (int j = 0; j < i; j++)
			assert_int_not_equal(cid(id[i])->local_comm_id, cid(id[j])->local_comm_id);
		if (i > 0)
			consecutive +=
			    cid(id[i])->local_comm_id == cid(id[i - 1])->local_comm_id + 1;
	}
	assert_true(consecutive < 2);
	for (int i = 0; i < 32; i++)
		rdma_destroy_id(id[i]);

	struct rdma_cm_id *a = active_id(), *b = active_id();
	uint64_t tid_a, tid_b;
	struct cm_req ra = connect_req(a, NULL, &tid_a), rb = connect_req(b, NULL, &tid_b);
	assert_int_not_equal(tid_a >> 32, tid_b >> 32);
	assert_int_not_equal(ra.starting_psn, rb.starting_psn); /* equal by chance: 1 in 2^24 */
	rdma_destroy_id(a);
	rdma_destroy_id(b);
}

/*
 * XRC over rdma_cm (IBA 12.6.5, 12.6.8, as Linux's CM writes them): the
 * initiator's REQ says transport service type 3, extended transport type 1,
 * and asks no responder resources, retries or SRQ of the target; the
 * target's REP names the target QP as the local EE context with SRQ set, no
 * local QPN, no initiator depth. Each half gets only its QP attributes:
 * no receive attributes for the initiator at RTR, only a timeout and a send
 * PSN for the target at RTS.
 */
#define TGT_QPN 0x345u
static void xrc_initiator(void **state)
{
	struct rdma_cm_id *id = active_id();
	struct rdma_conn_param p = {.qp_num = 0x456,
				    .responder_resources = 4,
				    .initiator_depth = 4,
				    .retry_count = 5,
				    .rnr_retry_count = 6,
				    .srq = 1};
	uint8_t mad[CM_MAD_SIZE];
	int mask;

	(void)state;
	id->qp_type = IBV_QPT_XRC_SEND; /* as rdma_create_ep gives it from the rdma_addrinfo */
	struct cm_req r = connect_req(id, &p, NULL);
	assert_int_equal(r.transport, CM_TRANSPORT_EXT);
	assert_int_equal(r.ext_transport, CM_EXT_TRANSPORT_XRC);
	assert_int_equal(r.local_qpn, 0x456);
	assert_int_equal(r.responder_resources, 0);
	assert_int_equal(r.retry_count, 0);
	assert_int_equal(r.rnr_retry_count, 0);
	assert_false(r.srq);
	assert_int_equal(r.initiator_depth, 4);

	struct cm_rep rep = {.local_comm_id = 0x9000,
			     .remote_comm_id = r.local_comm_id,
			     .local_eecn = TGT_QPN,
			     .starting_psn = 0x111,
			     .responder_resources = 4,
			     .rnr_retry_count = 7,
			     .srq = true};
	cm_mad_put_rep(mad, 0x55, &rep);
	rx_from_peer(mad);
	struct rdma_cm_event *ev;
	assert_int_equal(rdma_get_cm_event(ch, &ev), 0);
	assert_int_equal(ev->event, RDMA_CM_EVENT_CONNECT_RESPONSE);
	assert_int_equal(ev->param.conn.qp_num, TGT_QPN);
	rdma_ack_cm_event(ev);
	struct ibv_qp_attr rtr = qp_attr(id, IBV_QPS_RTR, &mask);
	assert_int_equal(rtr.dest_qp_num, TGT_QPN);
	assert_false(mask & (IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER));
	struct ibv_qp_attr rts = qp_attr(id, IBV_QPS_RTS, &mask);
	assert_int_equal(rts.sq_psn, 0x111);
	assert_int_equal(mask & (IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC),
			 IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
	assert_int_equal(rts.retry_cnt, 5);
	rdma_destroy_id(id);
}

static void xrc_target(void **state)
{
	struct rdma_cm_id *listen, *id;
	struct sockaddr_in a;
	uint8_t mad[CM_MAD_SIZE];
	struct cm_req req;
	struct cm_rep rep;
	int mask;

	(void)state;
	cm_peer_req(&req, RDMA_PS_IB, PORT, 0x5000, PEER, PEER_QPN);
	req.transport = CM_TRANSPORT_EXT;
	req.ext_transport = CM_EXT_TRANSPORT_XRC;
	req.responder_resources = req.retry_count = 0;
	assert_int_equal(rdma_create_id(ch, &listen, NULL, RDMA_PS_IB), 0);
	listen->qp_type = IBV_QPT_XRC_RECV;
	sin_of(&a, 1, PORT);
	assert_int_equal(rdma_bind_addr(listen, (struct sockaddr *)&a), 0);
	assert_int_equal(rdma_listen(listen, 4), 0);
	cm_mad_put_req(mad, 0x66, &req);
	rx_from_peer(mad);
	id = expect_event(RDMA_CM_EVENT_CONNECT_REQUEST);
	assert_int_equal(id->qp_type, IBV_QPT_XRC_RECV);
	struct rdma_conn_param p = {
	    .qp_num = TGT_QPN, .responder_resources = 1, .initiator_depth = 1};
	stub_reset_sent();
	assert_int_equal(rdma_accept(id, &p), 0);
	assert_int_equal(sent_attr(0), CM_ATTR_REP);
	cm_mad_get_rep(stub_sent[0].mad, &rep);
	assert_int_equal(rep.local_eecn, TGT_QPN);
	assert_int_equal(rep.local_qpn, 0);
	assert_true(rep.srq);
	assert_int_equal(rep.initiator_depth, 0);
	assert_int_equal(rep.flow_control, 0);

	struct ibv_qp_attr rtr = qp_attr(id, IBV_QPS_RTR, &mask);
	assert_int_equal(rtr.dest_qp_num, PEER_QPN);
	assert_true(mask & IBV_QP_MAX_DEST_RD_ATOMIC);
	qp_attr(id, IBV_QPS_RTS, &mask);
	assert_int_equal(mask, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT);
	rdma_destroy_id(id);
	rdma_destroy_id(listen);
}

/* A REQ whose transport is not the listener's (RC for XRC, XRC for RC, XRC
 * with another extended type): REJ 9, invalid transport service type. */
static void xrc_transport_mismatch(void **state)
{
	static const struct {
		enum ibv_qp_type listener;
		uint8_t transport, ext;
	} cases[] = {
	    {IBV_QPT_XRC_RECV, CM_TRANSPORT_RC, 0},
	    {IBV_QPT_RC, CM_TRANSPORT_EXT, CM_EXT_TRANSPORT_XRC},
	    {IBV_QPT_XRC_RECV, CM_TRANSPORT_EXT, 2},
	};

	(void)state;
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rdma_cm_id *listen;
		struct sockaddr_in a;
		uint8_t mad[CM_MAD_SIZE];
		struct cm_req req;
		struct cm_rej rej;
		struct rdma_cm_event *ev;

		assert_int_equal(rdma_create_id(ch, &listen, NULL, RDMA_PS_IB), 0);
		listen->qp_type = cases[i].listener;
		sin_of(&a, 1, PORT);
		assert_int_equal(rdma_bind_addr(listen, (struct sockaddr *)&a), 0);
		assert_int_equal(rdma_listen(listen, 4), 0);
		cm_peer_req(&req, RDMA_PS_IB, PORT, 0x6000 + i, PEER, PEER_QPN);
		req.transport = cases[i].transport;
		req.ext_transport = cases[i].ext;
		cm_mad_put_req(mad, 0x70 + i, &req);
		stub_reset_sent();
		rx_from_peer(mad);
		assert_int_equal(stub_n_sent, 1);
		assert_int_equal(sent_attr(0), CM_ATTR_REJ);
		cm_mad_get_rej(stub_sent[0].mad, &rej);
		assert_int_equal(rej.reason, CM_REJ_INVALID_TRANSPORT);
		assert_int_equal(rdma_get_cm_event(ch, &ev), -1); /* no request given */
		rdma_destroy_id(listen);
	}
}

/*
 * ECE with QPs the programs manage (rdma_set_local_ece(3),
 * rdma_get_remote_ece(3)), on the wire as Linux's CM carries it: the REQ's
 * vendor ID in bytes 5..7 and the options in the MAD's attribute modifier;
 * the REP answers with the vendor ID it got and its own options; the
 * active side reads them. A peer without ECE (vendor 0) gets vendor 0 back.
 */
#define ECE_VENDOR 0xabcdefu
static void ece_active(void **state)
{
	struct rdma_cm_id *id = active_id();
	struct ibv_ece ece = {.vendor_id = ECE_VENDOR, .options = 0x5};
	struct rdma_conn_param p = {.qp_num = 0x456};
	uint8_t mad[CM_MAD_SIZE];
	struct rdma_cm_event *ev;

	(void)state;
	struct ibv_ece bad = ece;
	bad.vendor_id = 0;
	assert_int_equal(rdma_set_local_ece(id, &bad), -1);
	assert_int_equal(errno, EINVAL);
	bad = ece;
	bad.comp_mask = 1;
	assert_int_equal(rdma_set_local_ece(id, &bad), -1);
	assert_int_equal(rdma_set_local_ece(id, &ece), 0);
	struct cm_req r = connect_req(id, &p, NULL);
	assert_int_equal(r.vendor_id, ECE_VENDOR);
	assert_int_equal(cm_mad_attr_mod(stub_sent[0].mad), 0x5);
	struct cm_rep rep = {.local_comm_id = 0x9000,
			     .remote_comm_id = r.local_comm_id,
			     .local_qpn = PEER_QPN,
			     .starting_psn = 0x111};
	cm_rep_set_vendor_id(&rep, ECE_VENDOR);
	cm_mad_put_rep(mad, 0x55, &rep);
	cm_mad_set_attr_mod(mad, 0x1);
	rx_from_peer(mad);
	assert_int_equal(rdma_get_cm_event(ch, &ev), 0);
	assert_int_equal(ev->event, RDMA_CM_EVENT_CONNECT_RESPONSE);
	rdma_ack_cm_event(ev);
	struct ibv_ece got = {.comp_mask = 7};
	assert_int_equal(rdma_get_remote_ece(id, &got), 0);
	assert_int_equal(got.vendor_id, ECE_VENDOR);
	assert_int_equal(got.options, 0x1);
	assert_int_equal(got.comp_mask, 0);
	assert_int_equal(rdma_get_remote_ece(id, NULL), -1);
	rdma_destroy_id(id);
}

static void ece_passive_case(uint32_t vendor, uint32_t options, bool set_local)
{
	struct rdma_cm_id *listen, *id;
	struct sockaddr_in a;
	uint8_t mad[CM_MAD_SIZE];
	struct cm_req req;
	struct cm_rep rep;

	cm_peer_req(&req, RDMA_PS_TCP, PORT, 0x5100, PEER, PEER_QPN);
	req.vendor_id = vendor;
	assert_int_equal(rdma_create_id(ch, &listen, NULL, RDMA_PS_TCP), 0);
	sin_of(&a, 1, PORT);
	assert_int_equal(rdma_bind_addr(listen, (struct sockaddr *)&a), 0);
	assert_int_equal(rdma_listen(listen, 4), 0);
	cm_mad_put_req(mad, 0x67, &req);
	cm_mad_set_attr_mod(mad, options);
	rx_from_peer(mad);
	id = expect_event(RDMA_CM_EVENT_CONNECT_REQUEST);
	struct ibv_ece got;
	assert_int_equal(rdma_get_remote_ece(id, &got), 0);
	assert_int_equal(got.vendor_id, vendor);
	assert_int_equal(got.options, options);
	if (set_local) {
		struct ibv_ece mine = {.vendor_id = ECE_VENDOR, .options = options & 0x3};
		assert_int_equal(rdma_set_local_ece(id, &mine), 0);
	}
	struct rdma_conn_param p = {.qp_num = 0x456};
	stub_reset_sent();
	assert_int_equal(rdma_accept(id, &p), 0);
	assert_int_equal(sent_attr(0), CM_ATTR_REP);
	cm_mad_get_rep(stub_sent[0].mad, &rep);
	assert_int_equal(cm_rep_vendor_id(&rep), vendor); /* the REQ's comes back */
	assert_int_equal(cm_mad_attr_mod(stub_sent[0].mad), set_local ? (options & 0x3) : 0);
	rdma_destroy_id(id);
	rdma_destroy_id(listen);
}

static void ece_passive(void **state)
{
	(void)state;
	ece_passive_case(ECE_VENDOR, 0x7, true);
	ece_passive_case(0, 0, false); /* a peer without ECE (Linux rxe) */
}

/* rdma_reject_ece(3): REJ with reason 35, vendor option not supported;
 * the active side gets REJECTED with that status. */
static void ece_reject(void **state)
{
	struct rdma_cm_id *listen, *id;
	struct cm_req req;
	struct cm_rej rej;

	(void)state;
	cm_peer_req(&req, RDMA_PS_TCP, PORT, 0x5200, PEER, PEER_QPN);
	req.vendor_id = ECE_VENDOR;
	struct sockaddr_in a;
	uint8_t mad[CM_MAD_SIZE];
	assert_int_equal(rdma_create_id(ch, &listen, NULL, RDMA_PS_TCP), 0);
	sin_of(&a, 1, PORT);
	assert_int_equal(rdma_bind_addr(listen, (struct sockaddr *)&a), 0);
	assert_int_equal(rdma_listen(listen, 4), 0);
	cm_mad_put_req(mad, 0x68, &req);
	rx_from_peer(mad);
	id = expect_event(RDMA_CM_EVENT_CONNECT_REQUEST);
	stub_reset_sent();
	assert_int_equal(rdma_reject_ece(id, NULL, 0), 0);
	assert_int_equal(sent_attr(0), CM_ATTR_REJ);
	cm_mad_get_rej(stub_sent[0].mad, &rej);
	assert_int_equal(rej.reason, CM_REJ_VENDOR_OPTION_NOT_SUPPORTED);
	rdma_destroy_id(id);
	rdma_destroy_id(listen);

	/* the active side */
	struct rdma_cm_id *act = active_id();
	struct rdma_conn_param p = {.qp_num = 0x456};
	struct cm_req r = connect_req(act, &p, NULL);
	struct cm_rej back = {.local_comm_id = 0x9100,
			      .remote_comm_id = r.local_comm_id,
			      .msg_rejected = CM_REJ_MSG_REQ,
			      .reason = CM_REJ_VENDOR_OPTION_NOT_SUPPORTED};
	cm_mad_put_rej(mad, 0x69, &back);
	rx_from_peer(mad);
	struct rdma_cm_event *ev;
	assert_int_equal(rdma_get_cm_event(ch, &ev), 0);
	assert_int_equal(ev->event, RDMA_CM_EVENT_REJECTED);
	assert_int_equal(ev->status, CM_REJ_VENDOR_OPTION_NOT_SUPPORTED);
	rdma_ack_cm_event(ev);
	rdma_destroy_id(act);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(psn_passive, setup, teardown),
	    cmocka_unit_test_setup_teardown(tos_active, setup, teardown),
	    cmocka_unit_test_setup_teardown(tos_passive, setup, teardown),
	    cmocka_unit_test_setup_teardown(sl_passive, setup, teardown),
	    cmocka_unit_test_setup_teardown(psn_active, setup, teardown),
	    cmocka_unit_test_setup_teardown(conn_param_in_req, setup, teardown),
	    cmocka_unit_test_setup_teardown(req_path_fields, setup, teardown),
	    cmocka_unit_test_setup_teardown(ids_unpredictable, setup, teardown),
	    cmocka_unit_test_setup_teardown(xrc_initiator, setup, teardown),
	    cmocka_unit_test_setup_teardown(xrc_target, setup, teardown),
	    cmocka_unit_test_setup_teardown(xrc_transport_mismatch, setup, teardown),
	    cmocka_unit_test_setup_teardown(ece_active, setup, teardown),
	    cmocka_unit_test_setup_teardown(ece_passive, setup, teardown),
	    cmocka_unit_test_setup_teardown(ece_reject, setup, teardown),
	};

	return cmocka_run_group_tests_name("rdmacm-fields", tests, NULL, NULL);
}
