/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Hostile peers against rocemu's CM (docs/rdmacm.md, "Bad input"): the state
 * machine of verbs-provider/rdmacm runs on a fake device (cm_stub.c), a
 * connection is set up with well-formed MADs from the peer 10.0.0.2, then
 * forged, stale, duplicate and malformed MADs arrive. Each must be counted
 * and dropped, or answered as IBA ch. 12 says, and leave the established
 * connection as it was.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "cm_peer.h"
#include "cm_stub.h"

#define PEER	  2 /* 10.0.0.2: the legitimate peer */
#define INTRUDER  3 /* 10.0.0.3: another host on the network */
#define PORT	  7471
#define PEER_COMM 0x5000u
#define PEER_QPN  0x123u

struct ctx {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listen, *passive, *active;
	uint32_t active_peer_comm; /* the comm ID the peer gave the active side */
};

static struct cma_id *cid(struct rdma_cm_id *id)
{
	return (struct cma_id *)id;
}

static int next_event(struct ctx *t, enum rdma_cm_event_type *type, struct rdma_cm_id **id)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(t->ch, &ev))
		return -errno;
	*type = ev->event;
	*id = ev->id;
	rdma_ack_cm_event(ev);
	return 0;
}

static void assert_no_event(struct ctx *t)
{
	struct rdma_cm_event *ev;

	assert_int_equal(rdma_get_cm_event(t->ch, &ev), -1);
	assert_int_equal(errno, EAGAIN);
}

static void sin_of(struct sockaddr_in *s, uint8_t last, uint16_t port)
{
	memset(s, 0, sizeof(*s));
	s->sin_family = AF_INET;
	s->sin_port = htons(port);
	s->sin_addr.s_addr = htonl(0x0a000000u | last);
}

static void build_req(uint8_t *mad, uint32_t comm, uint8_t src_last, uint16_t port)
{
	struct cm_req r;

	cm_peer_req(&r, RDMA_PS_TCP, port, comm, src_last, PEER_QPN);
	r.starting_psn = 0x42;
	r.rnr_retry_count = 7;
	cm_mad_put_req(mad, 0x77, &r);
}

static void build_ids(uint8_t *mad, uint16_t attr, uint32_t local, uint32_t remote)
{
	struct cm_ids m = {.local_comm_id = local, .remote_comm_id = remote, .remote_qpn = 1};
	cm_mad_put_ids(mad, 0x78, attr, &m);
}

static void rx_from(uint8_t last, const uint8_t *mad)
{
	uint8_t grh[40];

	stub_grh_v4(grh, last);
	stub_rx(grh, mad);
}

/* An RTU, REJ, DREQ or DREP from 10.0.0.<last> (build_ids, rx_from). */
static void rx_ids(uint8_t last, uint16_t attr, uint32_t local, uint32_t remote)
{
	uint8_t mad[CM_MAD_SIZE];

	build_ids(mad, attr, local, remote);
	rx_from(last, mad);
}

static uint16_t sent_attr(unsigned i)
{
	return (uint16_t)(stub_sent[i].mad[16] << 8 | stub_sent[i].mad[17]);
}

/* A listener, a passive connection from the peer, an active one to it:
 * both ESTABLISHED through well-formed MADs. */
static int setup(void **state)
{
	static struct ctx t;
	struct sockaddr_in a;
	uint8_t mad[CM_MAD_SIZE];
	enum rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_ERROR;
	struct rdma_cm_id *id = NULL;

	memset(&t, 0, sizeof(t));
	memset(&cma_stats, 0, sizeof(cma_stats));
	t.ch = rdma_create_event_channel();
	assert_non_null(t.ch);
	fcntl(t.ch->fd, F_SETFL, fcntl(t.ch->fd, F_GETFL) | O_NONBLOCK);
	assert_int_equal(rdma_create_id(t.ch, &t.listen, NULL, RDMA_PS_TCP), 0);
	sin_of(&a, 1, PORT);
	assert_int_equal(rdma_bind_addr(t.listen, (struct sockaddr *)&a), 0);
	assert_int_equal(rdma_listen(t.listen, 4), 0);

	/* passive: REQ -> CONNECT_REQUEST, accept -> REP, RTU -> ESTABLISHED */
	build_req(mad, PEER_COMM, PEER, PORT);
	rx_from(PEER, mad);
	assert_int_equal(next_event(&t, &type, &t.passive), 0);
	assert_int_equal(type, RDMA_CM_EVENT_CONNECT_REQUEST);
	struct rdma_conn_param p = {
	    .qp_num = 0x456, .responder_resources = 1, .initiator_depth = 1};
	stub_reset_sent();
	assert_int_equal(rdma_accept(t.passive, &p), 0);
	assert_int_equal(stub_n_sent, 1);
	assert_int_equal(sent_attr(0), CM_ATTR_REP);
	rx_ids(PEER, CM_ATTR_RTU, PEER_COMM, cid(t.passive)->local_comm_id);
	assert_int_equal(next_event(&t, &type, &id), 0);
	assert_int_equal(type, RDMA_CM_EVENT_ESTABLISHED);
	assert_ptr_equal(id, t.passive);

	/* active: REQ out, REP in -> CONNECT_RESPONSE, rdma_establish -> RTU */
	assert_int_equal(rdma_create_id(t.ch, &t.active, NULL, RDMA_PS_TCP), 0);
	sin_of(&a, PEER, 9000);
	assert_int_equal(rdma_resolve_addr(t.active, NULL, (struct sockaddr *)&a, 100), 0);
	assert_int_equal(next_event(&t, &type, &id), 0);
	assert_int_equal(rdma_resolve_route(t.active, 100), 0);
	assert_int_equal(next_event(&t, &type, &id), 0);
	stub_reset_sent();
	assert_int_equal(rdma_connect(t.active, &p), 0);
	assert_int_equal(stub_n_sent, 1);
	assert_int_equal(sent_attr(0), CM_ATTR_REQ);
	t.active_peer_comm = 0x6000;
	struct cm_rep rep = {.local_comm_id = t.active_peer_comm,
			     .remote_comm_id = cid(t.active)->local_comm_id,
			     .local_qpn = 0x789,
			     .responder_resources = 1,
			     .initiator_depth = 1};
	cm_mad_put_rep(mad, cid(t.active)->tid, &rep);
	rx_from(PEER, mad);
	assert_int_equal(next_event(&t, &type, &id), 0);
	assert_int_equal(type, RDMA_CM_EVENT_CONNECT_RESPONSE);
	assert_int_equal(rdma_establish(t.active), 0);
	assert_int_equal(cid(t.active)->state, CMA_ESTABLISHED);
	assert_int_equal(cid(t.passive)->state, CMA_ESTABLISHED);
	assert_no_event(&t);
	memset(&cma_stats, 0, sizeof(cma_stats));
	stub_reset_sent();
	*state = &t;
	return 0;
}

static int teardown(void **state)
{
	struct ctx *t = *state;

	rdma_destroy_id(t->active);
	rdma_destroy_id(t->passive);
	rdma_destroy_id(t->listen);
	rdma_destroy_event_channel(t->ch);
	return 0;
}

/* Both connections exactly as setup() left them, nothing queued. */
static void assert_connections_intact(struct ctx *t)
{
	assert_int_equal(cid(t->active)->state, CMA_ESTABLISHED);
	assert_int_equal(cid(t->active)->remote_comm_id, t->active_peer_comm);
	assert_int_equal(cid(t->active)->remote_qpn, 0x789);
	assert_int_equal(cid(t->passive)->state, CMA_ESTABLISHED);
	assert_int_equal(cid(t->passive)->remote_comm_id, PEER_COMM);
	assert_int_equal(cid(t->passive)->remote_qpn, PEER_QPN);
	assert_no_event(t);
}

/* REP, RTU, REJ, DREP naming no id of ours: counted, dropped, nothing sent.
 * A DREQ for no connection gets a stateless DREP (12.9.8). */
static void unknown_comm_id(void **state)
{
	struct ctx *t = *state;
	uint8_t mad[CM_MAD_SIZE];
	const uint16_t attrs[] = {CM_ATTR_REP, CM_ATTR_RTU, CM_ATTR_REJ, CM_ATTR_DREP,
				  CM_ATTR_SIDR_REP};
	uint32_t bogus = cid(t->active)->local_comm_id + 1000;

	for (unsigned i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
		build_ids(mad, attrs[i], 0x1111, bogus);
		if (attrs[i] == CM_ATTR_SIDR_REP) /* its request ID is at byte 24 */
			memcpy(mad + 24, mad + 28, 4);
		rx_from(PEER, mad);
	}
	assert_int_equal(cma_stats[CMA_STAT_drop_unknown_id], 5);
	assert_int_equal(stub_n_sent, 0);
	rx_ids(INTRUDER, CM_ATTR_DREQ, 0x1111, bogus);
	assert_int_equal(cma_stats[CMA_STAT_drep_stale], 1);
	assert_int_equal(stub_n_sent, 1);
	assert_int_equal(sent_attr(0), CM_ATTR_DREP);
	union ibv_gid intruder;
	stub_gid_v4(&intruder, INTRUDER);
	assert_memory_equal(&stub_sent[0].dgid, &intruder, 16);
	/* the DREP names the sender's IDs swapped */
	assert_int_equal(ntohl(*(uint32_t *)(stub_sent[0].mad + 24)), bogus);
	assert_int_equal(ntohl(*(uint32_t *)(stub_sent[0].mad + 28)), 0x1111);
	assert_int_equal(cma_stats[CMA_STAT_mad_rx], 6);
	assert_connections_intact(t);
}

/* The right comm IDs from another host: a guessed ID ends nothing. */
static void forged_from_other_host(void **state)
{
	struct ctx *t = *state;

	rx_ids(INTRUDER, CM_ATTR_REJ, t->active_peer_comm, cid(t->active)->local_comm_id);
	rx_ids(INTRUDER, CM_ATTR_DREP, t->active_peer_comm, cid(t->active)->local_comm_id);
	rx_ids(INTRUDER, CM_ATTR_RTU, PEER_COMM, cid(t->passive)->local_comm_id);
	assert_int_equal(cma_stats[CMA_STAT_drop_wrong_peer], 3);
	assert_int_equal(stub_n_sent, 0);
	/* a DREQ with the passive connection's IDs from the intruder: a stateless
	 * DREP to the intruder, the connection stays */
	rx_ids(INTRUDER, CM_ATTR_DREQ, PEER_COMM, cid(t->passive)->local_comm_id);
	assert_int_equal(cma_stats[CMA_STAT_drep_stale], 1);
	assert_int_equal(stub_n_sent, 1);
	assert_int_equal(sent_attr(0), CM_ATTR_DREP);
	assert_connections_intact(t);
}

/* Stale messages from the right peer after ESTABLISHED: duplicate RTU, a REJ
 * (too late to reject), a REP with another comm ID. Dropped and counted. */
static void stale_from_peer(void **state)
{
	struct ctx *t = *state;
	uint8_t mad[CM_MAD_SIZE];

	rx_ids(PEER, CM_ATTR_RTU, PEER_COMM, cid(t->passive)->local_comm_id);
	rx_ids(PEER, CM_ATTR_REJ, PEER_COMM, cid(t->passive)->local_comm_id);
	rx_ids(PEER, CM_ATTR_REJ, t->active_peer_comm, cid(t->active)->local_comm_id);
	/* a REP with another responder ID: not a duplicate of ours, no RTU */
	struct cm_rep rep = {.local_comm_id = t->active_peer_comm + 1,
			     .remote_comm_id = cid(t->active)->local_comm_id,
			     .local_qpn = 0x999};
	cm_mad_put_rep(mad, 1, &rep);
	rx_from(PEER, mad);
	/* a DREP while no DREQ is out */
	rx_ids(PEER, CM_ATTR_DREP, t->active_peer_comm, cid(t->active)->local_comm_id);
	assert_int_equal(cma_stats[CMA_STAT_drop_wrong_state], 5);
	assert_int_equal(stub_n_sent, 0);
	/* the true duplicate REP (our RTU was lost) gets the RTU again */
	rep.local_comm_id = t->active_peer_comm;
	cm_mad_put_rep(mad, 1, &rep);
	rx_from(PEER, mad);
	assert_int_equal(cma_stats[CMA_STAT_dup_rep], 1);
	assert_int_equal(stub_n_sent, 1);
	assert_int_equal(sent_attr(0), CM_ATTR_RTU);
	assert_connections_intact(t);
}

/* A REQ repeated after ESTABLISHED is a stale duplicate: ignored (12.9.2),
 * no second CONNECT_REQUEST, no answer. */
static void duplicate_req_after_established(void **state)
{
	struct ctx *t = *state;
	uint8_t mad[CM_MAD_SIZE];

	build_req(mad, PEER_COMM, PEER, PORT);
	rx_from(PEER, mad);
	rx_from(PEER, mad);
	assert_int_equal(cma_stats[CMA_STAT_dup_req], 2);
	assert_int_equal(stub_n_sent, 0);
	assert_connections_intact(t);
}

/* A duplicate REQ while our REP is unanswered: the same REP again. */
static void duplicate_req_resends_rep(void **state)
{
	struct ctx *t = *state;
	uint8_t mad[CM_MAD_SIZE];
	enum rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_ERROR;
	struct rdma_cm_id *id = NULL;

	build_req(mad, PEER_COMM + 1, PEER, PORT);
	rx_from(PEER, mad);
	assert_int_equal(next_event(t, &type, &id), 0);
	assert_int_equal(type, RDMA_CM_EVENT_CONNECT_REQUEST);
	struct rdma_conn_param p = {.qp_num = 0x457};
	assert_int_equal(rdma_accept(id, &p), 0);
	assert_int_equal(stub_n_sent, 1);
	uint8_t first_rep[CM_MAD_SIZE];
	memcpy(first_rep, stub_sent[0].mad, CM_MAD_SIZE);
	rx_from(PEER, mad);
	assert_int_equal(cma_stats[CMA_STAT_dup_req], 1);
	assert_int_equal(stub_n_sent, 2);
	assert_memory_equal(stub_sent[1].mad, first_rep, CM_MAD_SIZE);
	assert_no_event(t);
	rdma_destroy_id(id);
	assert_connections_intact(t);
}

/* A REQ whose CMA header is not rdma_cm's (IP version 5, CMA version 1, a
 * zero header): no listener can match; answered with REJ 8 (12.6.7) since
 * this process listens, counted, no CONNECT_REQUEST. */
static void req_bad_cma_header(void **state)
{
	struct ctx *t = *state;
	uint8_t mad[CM_MAD_SIZE];

	build_req(mad, 0x7000, PEER, PORT);
	mad[24 + 140 + 1] = 5 << 4; /* IP version 5 */
	rx_from(PEER, mad);
	build_req(mad, 0x7001, PEER, PORT);
	mad[24 + 140] = 1; /* CMA version 1 */
	rx_from(PEER, mad);
	build_req(mad, 0x7002, PEER, PORT);
	memset(mad + 24 + 140, 0, CMA_HDR_LEN);
	rx_from(PEER, mad);
	assert_int_equal(cma_stats[CMA_STAT_bad_cma_hdr], 3);
	assert_int_equal(cma_stats[CMA_STAT_rej_no_listener], 3);
	assert_int_equal(stub_n_sent, 3);
	for (unsigned i = 0; i < 3; i++) {
		struct cm_rej rej;
		assert_int_equal(sent_attr(i), CM_ATTR_REJ);
		cm_mad_get_rej(stub_sent[i].mad, &rej);
		assert_int_equal(rej.reason, CM_REJ_INVALID_SERVICE_ID);
		assert_int_equal(rej.remote_comm_id, 0x7000 + i);
		assert_int_equal(rej.msg_rejected, CM_REJ_MSG_REQ);
		union ibv_gid peer;
		stub_gid_v4(&peer, PEER);
		assert_memory_equal(&stub_sent[i].dgid, &peer, 16);
	}
	assert_connections_intact(t);
}

/* A SIDR_REQ for the RC listener's port space and port: not a connection
 * request; answered SIDR_REP "service ID not supported" (status 1). */
static void sidr_req_for_rc_listener(void **state)
{
	struct ctx *t = *state;
	uint8_t mad[CM_MAD_SIZE];
	struct cm_sidr_req r;

	cm_peer_sidr_req(&r, RDMA_PS_TCP, PORT, 0x9000, PEER);
	cm_mad_put_sidr_req(mad, 9, &r);
	rx_from(PEER, mad);
	assert_int_equal(cma_stats[CMA_STAT_wrong_service], 1);
	assert_int_equal(stub_n_sent, 1);
	assert_int_equal(sent_attr(0), CM_ATTR_SIDR_REP);
	struct cm_sidr_rep rep;
	cm_mad_get_sidr_rep(stub_sent[0].mad, &rep);
	assert_int_equal(rep.status, CM_SIDR_UNSUPPORTED);
	assert_int_equal(rep.request_id, 0x9000);
	assert_connections_intact(t);
}

/* A request the program holds outlives its listener: its duplicate is still
 * recognized, it can still be rejected, and it does not count against a new
 * listener on the same port. */
static void held_request_outlives_listener(void **state)
{
	struct ctx *t = *state;
	uint8_t mad[CM_MAD_SIZE];
	struct rdma_cm_id *l, *held = NULL;
	struct sockaddr_in a;
	enum rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_ERROR;

	sin_of(&a, 1, PORT + 1);
	assert_int_equal(rdma_create_id(t->ch, &l, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_bind_addr(l, (struct sockaddr *)&a), 0);
	assert_int_equal(rdma_listen(l, 1), 0);
	build_req(mad, 0xa000, PEER, PORT + 1);
	rx_from(PEER, mad);
	assert_int_equal(next_event(t, &type, &held), 0);
	assert_int_equal(type, RDMA_CM_EVENT_CONNECT_REQUEST);
	assert_int_equal(rdma_destroy_id(l), 0);
	rx_from(PEER, mad);
	assert_int_equal(cma_stats[CMA_STAT_dup_req], 1);
	assert_no_event(t);
	/* a new listener on the port takes new requests */
	assert_int_equal(rdma_create_id(t->ch, &l, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_bind_addr(l, (struct sockaddr *)&a), 0);
	assert_int_equal(rdma_listen(l, 1), 0);
	struct rdma_cm_id *fresh = NULL;
	build_req(mad, 0xa001, PEER, PORT + 1);
	rx_from(PEER, mad);
	assert_int_equal(next_event(t, &type, &fresh), 0);
	assert_int_equal(type, RDMA_CM_EVENT_CONNECT_REQUEST);
	stub_reset_sent();
	assert_int_equal(rdma_reject(held, NULL, 0), 0);
	assert_int_equal(stub_n_sent, 1);
	assert_int_equal(sent_attr(0), CM_ATTR_REJ);
	rdma_destroy_id(held);
	rdma_destroy_id(fresh);
	rdma_destroy_id(l);
	stub_reset_sent();
	assert_connections_intact(t);
}

/* Not a CM Send MAD: base version, class, class version, method; an
 * attribute rocemu does not handle (MRA, LAP, unknown). Dropped, counted. */
static void bad_mad_header(void **state)
{
	struct ctx *t = *state;
	uint8_t mad[CM_MAD_SIZE];
	const struct {
		unsigned off;
		uint8_t val;
	} bad[] = {{0, 2}, {0, 0}, {1, 0x81}, {1, 0x01}, {2, 1}, {2, 3}, {3, 0x01}, {3, 0x81}};

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		build_ids(mad, CM_ATTR_DREQ, PEER_COMM, cid(t->passive)->local_comm_id);
		mad[bad[i].off] = bad[i].val;
		rx_from(PEER, mad);
	}
	assert_int_equal(cma_stats[CMA_STAT_drop_bad_hdr], 8);
	const uint16_t attrs[] = {CM_ATTR_MRA, 0x0019, 0x001a, 0x0000, 0xffff};
	for (unsigned i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
		build_ids(mad, CM_ATTR_DREQ, PEER_COMM, cid(t->passive)->local_comm_id);
		mad[16] = (uint8_t)(attrs[i] >> 8);
		mad[17] = (uint8_t)attrs[i];
		rx_from(PEER, mad);
	}
	assert_int_equal(cma_stats[CMA_STAT_drop_bad_attr], 5);
	assert_int_equal(stub_n_sent, 0);
	assert_connections_intact(t);
}

/* A MAD is 256 bytes: anything shorter is not parsed (the CM thread counts
 * a short completion as drop_short before it gets here). */
static void short_mad(void **state)
{
	struct ctx *t = *state;
	uint8_t mad[CM_MAD_SIZE];
	struct cm_mad_hdr h;

	build_ids(mad, CM_ATTR_DREQ, PEER_COMM, cid(t->passive)->local_comm_id);
	assert_int_equal(cm_mad_parse_hdr(mad, CM_MAD_SIZE, &h), 0);
	for (size_t len = 0; len < CM_MAD_SIZE; len += 17)
		assert_int_equal(cm_mad_parse_hdr(mad, len, &h), -EINVAL);
	assert_int_equal(cm_mad_parse_hdr(mad, CM_MAD_SIZE - 1, &h), -EINVAL);
	assert_connections_intact(t);
}

/* A flood of REQs with fresh comm IDs: the listener holds at most
 * CMA_MAX_PENDING_REQ unanswered requests; the rest are dropped, counted. */
/* Unanswered requests a listener may hold (issue 18.9): its rdma_listen
 * backlog (setup's listener: 4), or CMA_MAX_PENDING_REQ for a backlog of 0. */
static unsigned flood(struct ctx *t, uint16_t port, unsigned n, uint32_t comm0)
{
	uint8_t mad[CM_MAD_SIZE];
	enum rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_ERROR;
	struct rdma_cm_id *id = NULL;
	unsigned got = 0;

	for (unsigned i = 0; i < n; i++) {
		build_req(mad, comm0 + i, INTRUDER, port);
		rx_from(INTRUDER, mad);
	}
	while (next_event(t, &type, &id) == 0) {
		assert_int_equal(type, RDMA_CM_EVENT_CONNECT_REQUEST);
		got++;
		assert_int_equal(rdma_reject(id, NULL, 0), 0);
		rdma_destroy_id(id);
	}
	return got;
}

static void req_flood_bounded(void **state)
{
	struct ctx *t = *state;
	uint8_t mad[CM_MAD_SIZE];
	const unsigned n = CMA_MAX_PENDING_REQ + 40;
	enum rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_ERROR;
	struct rdma_cm_id *id = NULL, *l0;
	struct sockaddr_in a;

	assert_int_equal(flood(t, PORT, n, 0x10000), 4);
	assert_int_equal(cma_stats[CMA_STAT_drop_backlog], n - 4);
	/* backlog 0: the default, CMA_MAX_PENDING_REQ */
	assert_int_equal(rdma_create_id(t->ch, &l0, NULL, RDMA_PS_TCP), 0);
	sin_of(&a, 1, PORT + 1);
	assert_int_equal(rdma_bind_addr(l0, (struct sockaddr *)&a), 0);
	assert_int_equal(rdma_listen(l0, 0), 0);
	memset(&cma_stats, 0, sizeof(cma_stats));
	assert_int_equal(flood(t, PORT + 1, n, 0x30000), CMA_MAX_PENDING_REQ);
	assert_int_equal(cma_stats[CMA_STAT_drop_backlog], n - CMA_MAX_PENDING_REQ);
	rdma_destroy_id(l0);
	/* answered requests free the slots: the next one gets through */
	build_req(mad, 0x20000, INTRUDER, PORT);
	rx_from(INTRUDER, mad);
	assert_int_equal(next_event(t, &type, &id), 0);
	assert_int_equal(type, RDMA_CM_EVENT_CONNECT_REQUEST);
	rdma_destroy_id(id);
	stub_reset_sent();
	assert_connections_intact(t);
}

/* A UC request for an RC listener (issue 18.9): REJ "invalid transport
 * service type" (IBA table 112, reason 9), no CONNECT_REQUEST. */
static void req_transport_mismatch(void **state)
{
	struct ctx *t = *state;
	uint8_t mad[CM_MAD_SIZE];
	struct cm_req r;
	struct cm_rej rej;

	cm_peer_req(&r, RDMA_PS_TCP, PORT, 0x7100, INTRUDER, PEER_QPN);
	r.transport = CM_TRANSPORT_UC;
	cm_mad_put_req(mad, 0x79, &r);
	rx_from(INTRUDER, mad);
	assert_int_equal(cma_stats[CMA_STAT_rej_transport], 1);
	assert_int_equal(stub_n_sent, 1);
	assert_int_equal(sent_attr(0), CM_ATTR_REJ);
	cm_mad_get_rej(stub_sent[0].mad, &rej);
	assert_int_equal(rej.reason, CM_REJ_INVALID_TRANSPORT);
	assert_int_equal(rej.remote_comm_id, 0x7100);
	stub_reset_sent();
	assert_connections_intact(t);
}

/* The sender is the GRH's source. An IPv6 source GID with 0x45 at byte 12
 * (byte 20 of the GRH area, where an IPv4 header would start) is still IPv6;
 * a GRH area that is neither IPv6 nor IPv4 is dropped. */
static void grh_source_parsing(void **state)
{
	struct ctx *t = *state;
	uint8_t mad[CM_MAD_SIZE], grh[40] = {0};
	union ibv_gid v6 = {.raw = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0x45, 0, 0, 7}};

	grh[0] = 0x60;
	memcpy(grh + 8, v6.raw, 16);
	build_ids(mad, CM_ATTR_DREQ, 0x1111, 0x2222);
	stub_rx(grh, mad);
	assert_int_equal(stub_n_sent, 1);
	assert_int_equal(sent_attr(0), CM_ATTR_DREP);
	assert_memory_equal(&stub_sent[0].dgid, &v6, 16);
	memset(grh, 0, sizeof(grh));
	stub_rx(grh, mad);
	assert_int_equal(cma_stats[CMA_STAT_drop_bad_grh], 1);
	assert_int_equal(stub_n_sent, 1);
	assert_connections_intact(t);
}

/* A REQ that names another host as its sender (primary local GID) is
 * answered to the host that sent it: no REPs aimed at a third host. */
static void req_answered_to_sender(void **state)
{
	struct ctx *t = *state;
	uint8_t mad[CM_MAD_SIZE];
	enum rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_ERROR;
	struct rdma_cm_id *id = NULL;
	union ibv_gid intruder;

	build_req(mad, 0x8000, PEER, PORT); /* body says 10.0.0.2 */
	rx_from(INTRUDER, mad);
	assert_int_equal(next_event(t, &type, &id), 0);
	assert_int_equal(type, RDMA_CM_EVENT_CONNECT_REQUEST);
	struct rdma_conn_param p = {.qp_num = 0x458};
	assert_int_equal(rdma_accept(id, &p), 0);
	assert_int_equal(stub_n_sent, 1);
	stub_gid_v4(&intruder, INTRUDER);
	assert_memory_equal(&stub_sent[0].dgid, &intruder, 16);
	rdma_destroy_id(id);
	stub_reset_sent();
	assert_connections_intact(t);
}

/* The positive control: the peer's own DREQ ends the connection, DREP sent. */
static void peer_dreq_disconnects(void **state)
{
	struct ctx *t = *state;
	uint8_t mad[CM_MAD_SIZE];
	enum rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_ERROR;
	struct rdma_cm_id *id = NULL;

	build_ids(mad, CM_ATTR_DREQ, PEER_COMM, cid(t->passive)->local_comm_id);
	rx_from(PEER, mad);
	assert_int_equal(stub_n_sent, 1);
	assert_int_equal(sent_attr(0), CM_ATTR_DREP);
	assert_int_equal(next_event(t, &type, &id), 0);
	assert_int_equal(type, RDMA_CM_EVENT_DISCONNECTED);
	assert_ptr_equal(id, t->passive);
	assert_int_equal(cma_stats[CMA_STAT_drep_stale], 0);
	assert_int_equal(cid(t->active)->state, CMA_ESTABLISHED);
	/* its duplicate gets the DREP again, and nothing else */
	rx_from(PEER, mad);
	assert_int_equal(stub_n_sent, 2);
	assert_no_event(t);
}

/* The peer's DREQ while the QP still has completions the program has not
 * polled: DISCONNECTED waits until they are polled (the CM thread looks every
 * CMA_DISC_POLL_NS), or at most CMA_DISC_HOLD_NS; the DREP goes at once. */
static void peer_dreq_waits_for_completions(void **state)
{
	struct ctx *t = *state;
	struct ibv_qp qp = {.qp_num = 0x456};
	enum rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_ERROR;
	struct rdma_cm_id *id = NULL;

	/* polled after 3 ms */
	t->passive->qp = &qp;
	stub_queued = 2;
	rx_ids(PEER, CM_ATTR_DREQ, PEER_COMM, cid(t->passive)->local_comm_id);
	assert_int_equal(stub_n_sent, 1);
	assert_int_equal(sent_attr(0), CM_ATTR_DREP);
	assert_int_equal(cid(t->passive)->state, CMA_DISCONNECTED);
	assert_int_equal(cma_stats[CMA_STAT_disc_held], 1);
	assert_no_event(t);
	stub_advance(CMA_DISC_POLL_NS);
	stub_advance(CMA_DISC_POLL_NS);
	assert_no_event(t);
	stub_queued = 0;
	stub_advance(CMA_DISC_POLL_NS);
	assert_int_equal(next_event(t, &type, &id), 0);
	assert_int_equal(type, RDMA_CM_EVENT_DISCONNECTED);
	assert_ptr_equal(id, t->passive);
	assert_int_equal(cma_stats[CMA_STAT_disc_hold_expired], 0);

	/* never polled: posted once the hold is over, counted */
	t->active->qp = &qp;
	stub_queued = 1;
	rx_ids(PEER, CM_ATTR_DREQ, t->active_peer_comm, cid(t->active)->local_comm_id);
	assert_int_equal(cma_stats[CMA_STAT_disc_held], 2);
	stub_advance(CMA_DISC_HOLD_NS - CMA_DISC_POLL_NS);
	assert_no_event(t);
	stub_advance(CMA_DISC_POLL_NS);
	assert_int_equal(next_event(t, &type, &id), 0);
	assert_int_equal(type, RDMA_CM_EVENT_DISCONNECTED);
	assert_ptr_equal(id, t->active);
	assert_int_equal(cma_stats[CMA_STAT_disc_hold_expired], 1);
	assert_no_event(t);
	stub_queued = 0;
	t->passive->qp = NULL;
	t->active->qp = NULL;
}

/* The program disconnecting while the peer's DISCONNECTED is held gets it at
 * once: it is ending the connection itself, nothing is worth waiting for. */
static void own_disconnect_releases_held_event(void **state)
{
	struct ctx *t = *state;
	struct ibv_qp qp = {.qp_num = 0x456};
	enum rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_ERROR;
	struct rdma_cm_id *id = NULL;

	t->passive->qp = &qp;
	stub_queued = 3;
	rx_ids(PEER, CM_ATTR_DREQ, PEER_COMM, cid(t->passive)->local_comm_id);
	assert_no_event(t);
	t->passive->qp = NULL; /* no verbs on the stand-in QP (rdma_disconnect moves it to ERR) */
	assert_int_equal(rdma_disconnect(t->passive), 0);
	assert_int_equal(next_event(t, &type, &id), 0);
	assert_int_equal(type, RDMA_CM_EVENT_DISCONNECTED);
	assert_ptr_equal(id, t->passive);
	assert_no_event(t);
	stub_advance(CMA_DISC_HOLD_NS);
	assert_no_event(t); /* posted once only */
	stub_queued = 0;
}

/* An id destroyed with an event still queued takes the event's count off the
 * channel's fd too: a thread waiting in rdma_get_cm_event (rping's CM thread
 * while its main thread tears down) must not wake for an event that is gone. */
static void destroyed_id_leaves_no_wakeup(void **state)
{
	struct ctx *t = *state;
	struct pollfd pfd = {.fd = t->ch->fd, .events = POLLIN};

	rx_ids(PEER, CM_ATTR_DREQ, PEER_COMM, cid(t->passive)->local_comm_id);
	assert_int_equal(poll(&pfd, 1, 0), 1); /* DISCONNECTED is queued */
	assert_int_equal(rdma_destroy_id(t->passive), 0);
	t->passive = NULL;
	assert_int_equal(poll(&pfd, 1, 0), 0);
	assert_no_event(t);
}

/* rdma_migrate_id moves the id's queued events, and their counts on the fds,
 * to the new channel; the other ids' events stay. */
static void migrate_moves_queued_events(void **state)
{
	struct ctx *t = *state;
	enum rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_ERROR;
	struct rdma_cm_id *id = NULL;
	struct rdma_event_channel *ch2 = rdma_create_event_channel();

	assert_non_null(ch2);
	rx_ids(PEER, CM_ATTR_DREQ, PEER_COMM, cid(t->passive)->local_comm_id);
	rx_ids(PEER, CM_ATTR_DREQ, t->active_peer_comm, cid(t->active)->local_comm_id);
	assert_int_equal(rdma_migrate_id(t->passive, ch2), 0);
	assert_ptr_equal(t->passive->channel, ch2);
	struct pollfd pfd[2] = {{.fd = t->ch->fd, .events = POLLIN},
				{.fd = ch2->fd, .events = POLLIN}};
	assert_int_equal(poll(pfd, 2, 0), 2);
	struct rdma_cm_event *ev;
	assert_int_equal(rdma_get_cm_event(ch2, &ev), 0);
	assert_ptr_equal(ev->id, t->passive);
	assert_int_equal(ev->event, RDMA_CM_EVENT_DISCONNECTED);
	rdma_ack_cm_event(ev);
	assert_int_equal(next_event(t, &type, &id), 0);
	assert_ptr_equal(id, t->active);
	assert_int_equal(type, RDMA_CM_EVENT_DISCONNECTED);
	assert_int_equal(poll(pfd, 2, 0), 0); /* both queues and both counts empty */
	assert_no_event(t);
	assert_int_equal(rdma_destroy_id(t->passive), 0);
	t->passive = NULL;
	rdma_destroy_event_channel(ch2);
}

/* A listener destroyed with a request still queued takes the request with
 * it (its id is gone: the peer's retransmission finds no listener), and
 * leaves the other ids' events and the fd count right. */
static void destroyed_listener_takes_its_requests(void **state)
{
	struct ctx *t = *state;
	uint8_t mad[CM_MAD_SIZE];
	struct rdma_cm_id *l;
	struct sockaddr_in a;
	enum rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_ERROR;
	struct rdma_cm_id *id = NULL;
	struct pollfd pfd = {.fd = t->ch->fd, .events = POLLIN};

	sin_of(&a, 1, PORT + 2);
	assert_int_equal(rdma_create_id(t->ch, &l, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_bind_addr(l, (struct sockaddr *)&a), 0);
	assert_int_equal(rdma_listen(l, 1), 0);
	rx_ids(PEER, CM_ATTR_DREQ, t->active_peer_comm, cid(t->active)->local_comm_id);
	build_req(mad, 0xb000, PEER, PORT + 2);
	rx_from(PEER, mad);
	assert_int_equal(rdma_destroy_id(l), 0);
	assert_int_equal(next_event(t, &type, &id), 0);
	assert_ptr_equal(id, t->active);
	assert_int_equal(type, RDMA_CM_EVENT_DISCONNECTED);
	assert_int_equal(poll(&pfd, 1, 0), 0);
	assert_no_event(t);
	stub_reset_sent();
	rx_from(PEER, mad);
	assert_int_equal(cma_stats[CMA_STAT_rej_no_listener], 1);
	assert_int_equal(cma_stats[CMA_STAT_dup_req], 0);
}

/* Random bytes in a valid header to every attribute: no crash, no event
 * for the established connections (fixed seed: the same run every time). */
static void random_bodies(void **state)
{
	struct ctx *t = *state;
	uint8_t mad[CM_MAD_SIZE];
	uint64_t s = 0x9e3779b97f4a7c15ull;

	for (unsigned i = 0; i < 4000; i++) {
		for (unsigned j = 0; j < CM_MAD_SIZE; j++) {
			s ^= s << 13, s ^= s >> 7, s ^= s << 17;
			mad[j] = (uint8_t)s;
		}
		mad[0] = 1, mad[1] = CM_MGMT_CLASS, mad[2] = CM_CLASS_VERSION, mad[3] = 3;
		mad[16] = 0, mad[17] = (uint8_t)(0x10 + i % 9);
		rx_from((uint8_t)(i % 5 == 0 ? PEER : INTRUDER), mad);
		enum rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_ERROR;
		struct rdma_cm_id *id = NULL;
		while (next_event(t, &type, &id) == 0) {
			assert_ptr_not_equal(id, t->active);
			assert_ptr_not_equal(id, t->passive);
			if (type == RDMA_CM_EVENT_CONNECT_REQUEST)
				rdma_reject(id, NULL, 0);
			rdma_destroy_id(id);
		}
	}
	assert_int_equal(cma_stats[CMA_STAT_mad_rx], 4000);
	stub_reset_sent();
	assert_connections_intact(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(unknown_comm_id, setup, teardown),
	    cmocka_unit_test_setup_teardown(migrate_moves_queued_events, setup, teardown),
	    cmocka_unit_test_setup_teardown(destroyed_listener_takes_its_requests, setup, teardown),
	    cmocka_unit_test_setup_teardown(forged_from_other_host, setup, teardown),
	    cmocka_unit_test_setup_teardown(stale_from_peer, setup, teardown),
	    cmocka_unit_test_setup_teardown(duplicate_req_after_established, setup, teardown),
	    cmocka_unit_test_setup_teardown(duplicate_req_resends_rep, setup, teardown),
	    cmocka_unit_test_setup_teardown(req_bad_cma_header, setup, teardown),
	    cmocka_unit_test_setup_teardown(sidr_req_for_rc_listener, setup, teardown),
	    cmocka_unit_test_setup_teardown(held_request_outlives_listener, setup, teardown),
	    cmocka_unit_test_setup_teardown(bad_mad_header, setup, teardown),
	    cmocka_unit_test_setup_teardown(short_mad, setup, teardown),
	    cmocka_unit_test_setup_teardown(req_flood_bounded, setup, teardown),
	    cmocka_unit_test_setup_teardown(req_transport_mismatch, setup, teardown),
	    cmocka_unit_test_setup_teardown(peer_dreq_disconnects, setup, teardown),
	    cmocka_unit_test_setup_teardown(peer_dreq_waits_for_completions, setup, teardown),
	    cmocka_unit_test_setup_teardown(own_disconnect_releases_held_event, setup, teardown),
	    cmocka_unit_test_setup_teardown(grh_source_parsing, setup, teardown),
	    cmocka_unit_test_setup_teardown(req_answered_to_sender, setup, teardown),
	    cmocka_unit_test_setup_teardown(destroyed_id_leaves_no_wakeup, setup, teardown),
	    cmocka_unit_test_setup_teardown(random_bodies, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
