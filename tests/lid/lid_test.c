/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * LID-only address vectors (a rocemu extension, docs/verbs-provider.md):
 * two devices on an in-process DPDK ring pair, 10.77.1.5/16 and 10.77.2.6/16,
 * so LIDs 0x0105 and 0x0206. RC and UD traffic with is_global = 0 address
 * vectors, every byte checked; query_port's LID; dlid 0 -> EINVAL; a LID-only
 * AV on a port without IPv4 or with a non-unicast LID -> EINVAL; the
 * ibv_init_ah_from_wc round trip.
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <infiniband/verbs.h>

#include "../verbs/test_util.h"

#define QKEY  0x22222222
#define LID_A 0x0105
#define LID_B 0x0206

static struct ibv_device **devs;
static int n_devs;

static void to_init(struct ibv_qp *qp, bool ud)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qkey = QKEY,
				.qp_access_flags =
				    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};

	assert_int_equal(ibv_modify_qp(qp, &a,
				       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					   (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS)),
			 0);
}

/* RTR with a LID-only address vector, as ibv_rc_pingpong without -g does. */
static int to_rtr_lid(struct tu_side *s, uint16_t dlid, uint32_t dqpn)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR,
				.path_mtu = IBV_MTU_1024,
				.dest_qp_num = dqpn,
				.rq_psn = 7,
				.max_dest_rd_atomic = 1,
				.min_rnr_timer = 12,
				.ah_attr = {.is_global = 0, .dlid = dlid, .sl = 0, .port_num = 1}};

	return ibv_modify_qp(s->qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

static void to_rts(struct tu_side *s)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS,
				.timeout = 14,
				.retry_cnt = 7,
				.rnr_retry = 7,
				.sq_psn = 7,
				.max_rd_atomic = 1};

	assert_int_equal(ibv_modify_qp(s->qp, &a,
				       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					   IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					   IBV_QP_MAX_QP_RD_ATOMIC),
			 0);
}

static void query_port_lid(void **state)
{
	(void)state;
	struct tu_side a, b;

	tu_side_open(&a, devs[0], IBV_QPT_RC);
	tu_side_open(&b, devs[1], IBV_QPT_RC);
	assert_int_equal(a.lid, LID_A);
	assert_int_equal(b.lid, LID_B);
	tu_side_close(&a);
	tu_side_close(&b);
	/* No IPv4 address: LID 0. 10.78.192.1: 0xC001 is not unicast: LID 0. */
	for (int i = 2; i < 4; i++) {
		struct tu_side c;
		tu_side_open(&c, devs[i], IBV_QPT_RC);
		assert_int_equal(c.lid, 0);
		tu_side_close(&c);
	}
}

static void rc_lid_only(void **state)
{
	(void)state;
	struct tu_side a, b;

	tu_side_open(&a, devs[0], IBV_QPT_RC);
	tu_side_open(&b, devs[1], IBV_QPT_RC);
	to_init(a.qp, false);
	to_init(b.qp, false);
	/* dlid 0 (no LID) and a multicast LID are refused; the QP stays in INIT. */
	assert_int_equal(to_rtr_lid(&a, 0, b.qp->qp_num), EINVAL);
	assert_int_equal(to_rtr_lid(&a, 0xC001, b.qp->qp_num), EINVAL);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	assert_int_equal(ibv_query_qp(a.qp, &qa, IBV_QP_STATE, &qi), 0);
	assert_int_equal(qa.qp_state, IBV_QPS_INIT);
	assert_int_equal(to_rtr_lid(&a, b.lid, b.qp->qp_num), 0);
	assert_int_equal(to_rtr_lid(&b, a.lid, a.qp->qp_num), 0);
	to_rts(&a);
	to_rts(&b);

	/* SEND a -> b, RDMA WRITE b -> a, RDMA READ a <- b. */
	tu_post_recv(&b, 1, 0, 4096);
	tu_fill(a.buf + 4096, 3000, 1);
	struct ibv_send_wr wr = {.wr_id = 2, .opcode = IBV_WR_SEND};
	tu_post_send(&a, &wr, 4096, 3000);
	assert_int_equal(tu_side_poll(&a).wr_id, 2);
	struct ibv_wc wc = tu_side_poll(&b);
	assert_int_equal(wc.wr_id, 1);
	assert_int_equal(wc.byte_len, 3000);
	assert_memory_equal(b.buf, a.buf + 4096, 3000);

	tu_fill(b.buf + 8192, 2000, 2);
	struct ibv_send_wr ww = {.wr_id = 3, .opcode = IBV_WR_RDMA_WRITE};
	ww.wr.rdma.remote_addr = (uintptr_t)a.buf + 12288;
	ww.wr.rdma.rkey = a.mr->rkey;
	tu_post_send(&b, &ww, 8192, 2000);
	assert_int_equal(tu_side_poll(&b).wr_id, 3);
	assert_memory_equal(a.buf + 12288, b.buf + 8192, 2000);

	struct ibv_send_wr rw = {.wr_id = 4, .opcode = IBV_WR_RDMA_READ};
	rw.wr.rdma.remote_addr = (uintptr_t)b.buf + 8192;
	rw.wr.rdma.rkey = b.mr->rkey;
	tu_post_send(&a, &rw, 0, 2000);
	assert_int_equal(tu_side_poll(&a).wr_id, 4);
	assert_memory_equal(a.buf, b.buf + 8192, 2000);
	tu_side_close(&a);
	tu_side_close(&b);
}

static void ud_lid_only(void **state)
{
	(void)state;
	struct tu_side a, b;

	tu_side_open(&a, devs[0], IBV_QPT_UD);
	tu_side_open(&b, devs[1], IBV_QPT_UD);
	tu_ud_ready(a.qp, QKEY, 1);
	tu_ud_ready(b.qp, QKEY, 1);
	/* dlid 0: EINVAL, as ibv_create_ah(3) says for a bad attribute. */
	struct ibv_ah_attr bad = {.is_global = 0, .dlid = 0, .port_num = 1};
	errno = 0;
	assert_null(ibv_create_ah(a.pd, &bad));
	assert_int_equal(errno, EINVAL);

	struct ibv_ah_attr aa = {.is_global = 0, .dlid = b.lid, .port_num = 1};
	struct ibv_ah *ah = ibv_create_ah(a.pd, &aa);
	if (!ah)
		fail_msg("ibv_create_ah (LID-only): %s", strerror(errno));
	tu_post_recv(&b, 1, 0, 40 + 700);
	tu_fill(a.buf + 4096, 700, 3);
	tu_post_ud(&a, 5, ah, b.qp->qp_num, QKEY, 4096, 700);
	assert_int_equal(tu_side_poll(&a).wr_id, 5);
	struct ibv_wc wc = tu_side_poll(&b);
	assert_int_equal(wc.byte_len, 40 + 700);
	assert_int_equal(wc.src_qp, a.qp->qp_num);
	assert_memory_equal(b.buf + 40, a.buf + 4096, 700);

	/* The reply AH from the received GRH names the sender's LID. */
	struct ibv_ah_attr back_attr;
	assert_int_equal(ibv_init_ah_from_wc(b.ctx, 1, &wc, (struct ibv_grh *)b.buf, &back_attr),
			 0);
	assert_int_equal(back_attr.dlid, a.lid);
	/* ... and a LID-only AH built from that dlid alone reaches a. */
	struct ibv_ah_attr la = {.is_global = 0, .dlid = back_attr.dlid, .port_num = 1};
	struct ibv_ah *back = ibv_create_ah(b.pd, &la);
	assert_non_null(back);
	tu_post_recv(&a, 6, 8192, 40 + 100);
	tu_fill(b.buf + 2048, 100, 4);
	tu_post_ud(&b, 7, back, wc.src_qp, QKEY, 2048, 100);
	assert_int_equal(tu_side_poll(&b).wr_id, 7);
	wc = tu_side_poll(&a);
	assert_int_equal(wc.wr_id, 6);
	assert_int_equal(wc.byte_len, 40 + 100);
	assert_memory_equal(a.buf + 8192 + 40, b.buf + 2048, 100);
	/* ibv_create_ah_from_wc works too (global, with the dlid). */
	struct ibv_ah *fw = ibv_create_ah_from_wc(a.pd, &wc, (struct ibv_grh *)(a.buf + 8192), 1);
	assert_non_null(fw);
	assert_int_equal(ibv_destroy_ah(fw), 0);
	assert_int_equal(ibv_destroy_ah(ah), 0);
	assert_int_equal(ibv_destroy_ah(back), 0);
	tu_side_close(&a);
	tu_side_close(&b);
}

/* A port without IPv4 address (or with a LID outside the unicast range)
 * cannot resolve a LID-only AV: EINVAL, for a QP path and for an AH. */
static void lid_only_unresolvable(void **state)
{
	(void)state;
	for (int i = 2; i < 4; i++) {
		struct tu_side c;
		tu_side_open(&c, devs[i], IBV_QPT_RC);
		to_init(c.qp, false);
		if (i == 2) /* IPv6 only: no /16 to complete the dlid into */
			assert_int_equal(to_rtr_lid(&c, 0x0105, 1), EINVAL);
		else /* our LID is not unicast, but a peer's dlid still names a host */
			assert_int_equal(to_rtr_lid(&c, 0x0105, 1), 0);
		struct ibv_ah_attr aa = {.is_global = 0, .dlid = 0x0105, .port_num = 1};
		struct ibv_ah *ah = ibv_create_ah(c.pd, &aa);
		if (i == 2) {
			assert_null(ah);
			assert_int_equal(errno, EINVAL);
		} else {
			assert_non_null(ah);
			assert_int_equal(ibv_destroy_ah(ah), 0);
		}
		tu_side_close(&c);
	}
}

int main(void)
{
	char path[] = "/tmp/rocemu-lid-XXXXXX";

	devs = tu_devices(path,
			  "[rocemu0]\nport = ring:lid:a\nip = 10.77.1.5/16\n"
			  "[rocemu1]\nport = ring:lid:b\nip = 10.77.2.6/16\n"
			  "[rocemu2]\nport = ring:lidx:a\nip = fd77::1/64\n"
			  "[rocemu3]\nport = ring:lidx:b\nip = 10.78.192.1/16\n",
			  4, &n_devs);
	if (!devs)
		return 1;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(query_port_lid),
	    cmocka_unit_test(rc_lid_only),
	    cmocka_unit_test(ud_lid_only),
	    cmocka_unit_test(lid_only_unresolvable),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	ibv_free_device_list(devs);
	return rc;
}
