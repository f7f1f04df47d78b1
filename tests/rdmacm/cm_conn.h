/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * rdma_cm connection set-up for the tests that run rocemu's librdmacm on
 * two in-process devices (tests/verbs/rdmacm_loopback_test.c,
 * tests/rdmacm/cm_engine_test.c): a listener, an active id resolved to it,
 * its QP, and the main() that writes the two devices' config. Every step is
 * asserted; every wait is bounded (tu_expect). Include after <cmocka.h>.
 */
#ifndef ROCEMU_TEST_CM_CONN_H
#define ROCEMU_TEST_CM_CONN_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "../verbs/test_util.h"

static inline void cmt_ack(struct rdma_cm_event *ev)
{
	assert_int_equal(rdma_ack_cm_event(ev), 0);
}

/** QP attributes of the tests: 8 WRs and one SGE each way. */
static inline struct ibv_qp_init_attr cmt_qp_attr(enum ibv_qp_type t)
{
	struct ibv_qp_init_attr a = {
	    .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = t,
	};
	return a;
}

/** A QP of type t for id, with the CQs librdmacm makes. */
static inline void cmt_create_qp(struct rdma_cm_id *id, enum ibv_qp_type t)
{
	struct ibv_qp_init_attr qa = cmt_qp_attr(t);

	assert_int_equal(rdma_create_qp(id, NULL, &qa), 0);
	assert_non_null(id->qp);
	assert_non_null(id->send_cq);
}

/** A listener in port space ps on ip:port, its events on ch. */
static inline struct rdma_cm_id *cmt_listen(struct rdma_event_channel *ch, enum rdma_port_space ps,
					    const char *ip, uint16_t port)
{
	struct rdma_cm_id *l;
	struct sockaddr_in a = tu_addr(ip, port);

	assert_int_equal(rdma_create_id(ch, &l, NULL, ps), 0);
	assert_int_equal(rdma_bind_addr(l, (struct sockaddr *)&a), 0);
	assert_int_equal(rdma_listen(l, 4), 0);
	return l;
}

/**
 * An id in port space ps with context, its events on ch, with address and
 * route resolved from src_ip (NULL: the device's own) to ip:port.
 */
static inline struct rdma_cm_id *cmt_resolve(struct rdma_event_channel *ch, enum rdma_port_space ps,
					     void *context, const char *src_ip, const char *ip,
					     uint16_t port)
{
	struct rdma_cm_id *c;
	struct sockaddr_in src = tu_addr(src_ip ? src_ip : "0.0.0.0", 0), dst = tu_addr(ip, port);

	assert_int_equal(rdma_create_id(ch, &c, context, ps), 0);
	assert_int_equal(rdma_resolve_addr(c, src_ip ? (struct sockaddr *)&src : NULL,
					   (struct sockaddr *)&dst, 2000),
			 0);
	cmt_ack(tu_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	assert_non_null(c->verbs);
	assert_int_equal(rdma_resolve_route(c, 2000), 0);
	cmt_ack(tu_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	return c;
}

/** The end of a test's connection: both QPs, then the server's, the
 * client's and the listener's id. */
static inline void cmt_destroy(struct rdma_cm_id *server, struct rdma_cm_id *client,
			       struct rdma_cm_id *listen)
{
	rdma_destroy_qp(server);
	rdma_destroy_qp(client);
	assert_int_equal(rdma_destroy_id(server), 0);
	assert_int_equal(rdma_destroy_id(client), 0);
	assert_int_equal(rdma_destroy_id(listen), 0);
}

/**
 * main() of such a test: two devices rocemu0 (ip_a) and rocemu1 (ip_b) on
 * the in-process ring pair named ring, then the tests.
 */
static inline int cmt_run_two_devices(const char *ring, const char *ip_a, const char *ip_b,
				      const struct CMUnitTest *tests, size_t n)
{
	char path[] = "/tmp/rocemu-rdmacm-XXXXXX";
	char cfg[256];

	snprintf(
	    cfg, sizeof(cfg),
	    "[rocemu0]\nport = ring:%s:a\nip = %s/24\n[rocemu1]\nport = ring:%s:b\nip = %s/24\n",
	    ring, ip_a, ring, ip_b);
	if (tu_config(path, cfg))
		return 1;
	int rc = _cmocka_run_group_tests("rdmacm", tests, n, NULL, NULL);
	unlink(path);
	return rc;
}

#endif /* ROCEMU_TEST_CM_CONN_H */
