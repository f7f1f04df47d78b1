/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UD multicast through the verbs (issue 15.3), two devices in one process
 * over a ring pair: ibv_attach_mcast / ibv_detach_mcast with their rules
 * (UD QPs and multicast GIDs only, attaching twice is no error, detaching
 * what is not attached is EINVAL, an attached QP cannot be destroyed), and
 * delivery: a datagram to the multicast QPN reaches every QP attached to the
 * group, each its own copy with the GRH, and no other QP; a detached QP
 * stops receiving; a QP whose Q_Key differs drops it (C10-15).
 * The port side (IGMP/MLD, MAC filter) is in tests/port, the program-pair
 * side (mckey between three processes on a snooping bridge) in
 * mckey_bridge.sh.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <infiniband/verbs.h>

#include "test_util.h"

#define QKEY	  0x11223344u
#define MCAST_QPN 0xFFFFFFu
#define SLOT	  256 /* bytes per receive: 40 (GRH) + payload */

static struct ibv_device **devs;
static int n_devs;

struct node {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t buf[16 * SLOT];
	union ibv_gid gid;
};

static void node_open(struct node *n, struct ibv_device *dev)
{
	n->ctx = ibv_open_device(dev);
	assert_non_null(n->ctx);
	n->pd = ibv_alloc_pd(n->ctx);
	assert_non_null(n->pd);
	n->cq = ibv_create_cq(n->ctx, 64, NULL, NULL, 0);
	assert_non_null(n->cq);
	memset(n->buf, 0, sizeof(n->buf));
	n->mr = ibv_reg_mr(n->pd, n->buf, sizeof(n->buf), IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(n->mr);
	assert_int_equal(ibv_query_gid(n->ctx, 1, TU_GID_INDEX, &n->gid), 0);
}

static void node_close(struct node *n)
{
	assert_int_equal(ibv_dereg_mr(n->mr), 0);
	assert_int_equal(ibv_destroy_cq(n->cq), 0);
	assert_int_equal(ibv_dealloc_pd(n->pd), 0);
	assert_int_equal(ibv_close_device(n->ctx), 0);
}

/* A UD QP in RTS with Q_Key qkey. */
static struct ibv_qp *ud_qp(struct node *n, uint32_t qkey)
{
	struct ibv_qp_init_attr qa = {
	    .send_cq = n->cq,
	    .recv_cq = n->cq,
	    .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = IBV_QPT_UD,
	};
	struct ibv_qp *qp = ibv_create_qp(n->pd, &qa);

	assert_non_null(qp);
	tu_ud_to_rts(qp, qkey, 1);
	return qp;
}

static void post_recv(struct node *n, struct ibv_qp *qp, unsigned slot)
{
	struct ibv_sge sge = {(uintptr_t)(n->buf + slot * SLOT), SLOT, n->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1}, *bad;

	assert_int_equal(ibv_post_recv(qp, &wr, &bad), 0);
}

static union ibv_gid group_gid(const char *v4)
{
	union ibv_gid g = {0};
	unsigned a, b, c, d;

	assert_int_equal(sscanf(v4, "%u.%u.%u.%u", &a, &b, &c, &d), 4);
	g.raw[10] = g.raw[11] = 0xff;
	g.raw[12] = (uint8_t)a;
	g.raw[13] = (uint8_t)b;
	g.raw[14] = (uint8_t)c;
	g.raw[15] = (uint8_t)d;
	return g;
}

/* Send one datagram (text) from qp on node n to the group g. */
static void send_to_group(struct node *n, struct ibv_qp *qp, const union ibv_gid *g,
			  const char *text)
{
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1};
	struct ibv_ah *ah;
	size_t len = strlen(text) + 1;
	uint8_t *src = n->buf + 15 * SLOT;

	aa.grh.dgid = *g;
	aa.grh.sgid_index = TU_GID_INDEX;
	aa.grh.hop_limit = 64;
	ah = ibv_create_ah(n->pd, &aa);
	assert_non_null(ah);
	memcpy(src, text, len);
	struct ibv_sge sge = {(uintptr_t)src, (uint32_t)len, n->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 99,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = MCAST_QPN;
	wr.wr.ud.remote_qkey = QKEY;
	assert_int_equal(ibv_post_send(qp, &wr, &bad), 0);
	struct ibv_wc wc = tu_poll_one(n->cq);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(ibv_destroy_ah(ah), 0);
}

/* Completions on cq for the next half second, by QP number into got[]. */
static unsigned collect(struct node *n, struct ibv_wc *got, unsigned max)
{
	unsigned k = 0;
	double end = tu_now() + 0.5;

	while (tu_now() < end && k < max) {
		int r = ibv_poll_cq(n->cq, 1, &got[k]);

		assert_true(r >= 0);
		k += (unsigned)r;
	}
	return k;
}

static void attach_rules(void **state)
{
	struct node a;
	struct ibv_device_attr da;
	union ibv_gid g = group_gid("239.9.9.9"), uni = group_gid("10.79.6.1");
	(void)state;

	node_open(&a, devs[0]);
	assert_int_equal(ibv_query_device(a.ctx, &da), 0);
	assert_true(da.max_mcast_grp > 0);
	assert_true(da.max_mcast_qp_attach > 0);
	assert_true(da.max_total_mcast_qp_attach >= da.max_mcast_qp_attach);

	struct ibv_qp_init_attr qa = {
	    .send_cq = a.cq,
	    .recv_cq = a.cq,
	    .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = IBV_QPT_RC};
	struct ibv_qp *rc = ibv_create_qp(a.pd, &qa);
	assert_non_null(rc);
	assert_int_equal(ibv_attach_mcast(rc, &g, 0), EINVAL); /* UD only */
	assert_int_equal(ibv_destroy_qp(rc), 0);

	struct ibv_qp *ud = ud_qp(&a, QKEY);
	assert_int_equal(ibv_attach_mcast(ud, &uni, 0), EINVAL); /* no group */
	assert_int_equal(ibv_detach_mcast(ud, &g, 0), EINVAL);	 /* not attached */
	assert_int_equal(ibv_attach_mcast(ud, &g, 0), 0);
	assert_int_equal(ibv_attach_mcast(ud, &g, 0), 0); /* again: no error */
	assert_int_equal(ibv_destroy_qp(ud), EBUSY);	  /* still attached */
	assert_int_equal(ibv_detach_mcast(ud, &g, 0), 0);
	assert_int_equal(ibv_detach_mcast(ud, &g, 0), EINVAL);
	assert_int_equal(ibv_destroy_qp(ud), 0);
	node_close(&a);
}

static void delivery_to_every_member(void **state)
{
	struct node a, b;
	struct ibv_wc wc[8];
	union ibv_gid g = group_gid("239.9.9.10");
	(void)state;

	node_open(&a, devs[0]);
	node_open(&b, devs[1]);
	struct ibv_qp *m1 = ud_qp(&a, QKEY), *m2 = ud_qp(&a, QKEY), *out = ud_qp(&a, QKEY),
		      *wrongkey = ud_qp(&a, QKEY + 1), *tx = ud_qp(&b, QKEY);
	for (unsigned i = 0; i < 2; i++) {
		post_recv(&a, m1, i);
		post_recv(&a, m2, 2 + i);
		post_recv(&a, out, 4 + i);
		post_recv(&a, wrongkey, 6 + i);
	}
	assert_int_equal(ibv_attach_mcast(m1, &g, 0), 0);
	assert_int_equal(ibv_attach_mcast(m2, &g, 0), 0);
	assert_int_equal(ibv_attach_mcast(wrongkey, &g, 0), 0);

	send_to_group(&b, tx, &g, "to the group");
	unsigned k = collect(&a, wc, 8);
	assert_int_equal(k, 2); /* m1 and m2; not out, not wrongkey */
	bool seen1 = false, seen2 = false;
	for (unsigned i = 0; i < k; i++) {
		assert_int_equal(wc[i].status, IBV_WC_SUCCESS);
		assert_int_equal(wc[i].opcode, IBV_WC_RECV);
		assert_int_equal(wc[i].src_qp, tx->qp_num);
		assert_true(wc[i].wc_flags & IBV_WC_GRH);
		assert_int_equal(wc[i].byte_len, 40 + sizeof("to the group"));
		assert_string_equal((char *)a.buf + wc[i].wr_id * SLOT + 40, "to the group");
		/* the GRH area holds the IPv4 header: its destination is the group */
		assert_memory_equal(a.buf + wc[i].wr_id * SLOT + 20 + 16, g.raw + 12, 4);
		seen1 |= wc[i].qp_num == m1->qp_num;
		seen2 |= wc[i].qp_num == m2->qp_num;
	}
	assert_true(seen1 && seen2);

	/* m2 leaves: the next datagram reaches m1 only */
	assert_int_equal(ibv_detach_mcast(m2, &g, 0), 0);
	send_to_group(&b, tx, &g, "again");
	k = collect(&a, wc, 8);
	assert_int_equal(k, 1);
	assert_int_equal(wc[0].qp_num, m1->qp_num);

	assert_int_equal(ibv_detach_mcast(m1, &g, 0), 0);
	assert_int_equal(ibv_detach_mcast(wrongkey, &g, 0), 0);
	/* nobody in the group: the port no longer takes it */
	send_to_group(&b, tx, &g, "nobody");
	assert_int_equal(collect(&a, wc, 8), 0);
	assert_int_equal(ibv_destroy_qp(m1), 0);
	assert_int_equal(ibv_destroy_qp(m2), 0);
	assert_int_equal(ibv_destroy_qp(out), 0);
	assert_int_equal(ibv_destroy_qp(wrongkey), 0);
	assert_int_equal(ibv_destroy_qp(tx), 0);
	node_close(&a);
	node_close(&b);
}

int main(void)
{
	char path[] = "/tmp/rocemu-mcast-XXXXXX";

	devs = tu_devices(path,
			  "[rocemu0]\nport = ring:mc:a\nip = 10.79.6.1/24\n"
			  "[rocemu1]\nport = ring:mc:b\nip = 10.79.6.2/24\n",
			  2, &n_devs);
	if (!devs)
		return 1;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(attach_rules),
	    cmocka_unit_test(delivery_to_every_member),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	ibv_free_device_list(devs);
	return rc;
}
