/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Send rate limits (issue 15.4): ibv_modify_qp_rate_limit, IBV_QP_RATE_LIMIT
 * and the static rate of an address vector, on two devices of one process
 * over a ring pair. Each paced transfer must take at least the time its bytes
 * need at the rate set (a slow machine can only make it take longer), and is
 * named on stdout as "paced DQPN KBPS BURST" so that rate_limit.sh checks the
 * same rate in rocemu0's capture (argv[1]) with tshark.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <infiniband/verbs.h>

#include "test_util.h"

#define FRAME_BYTES(payload) ((payload) + 62.0) /* Ethernet+FCS, IPv4, UDP, BTH, ICRC */
#define RC_MTU		     1024

static struct ibv_device **devs;
static int n_devs;

/* Bytes on the wire (with FCS) of n WRITEs of len bytes at path MTU 1024. */
static double write_wire_bytes(unsigned n, uint32_t len)
{
	unsigned pkts = (len + RC_MTU - 1) / RC_MTU;

	return n * (len + pkts * (62.0 + 16.0 / pkts)); /* RETH on the first packet */
}

/* n signaled WRITEs of len bytes from a to b, keeping the send queue full;
 * the seconds from the first post to the last completion. */
static double write_n(struct tu_side *a, struct tu_side *b, unsigned n, uint32_t len)
{
	unsigned posted = 0, done = 0;
	double t0 = tu_now();

	while (done < n) {
		while (posted < n && posted - done < 8) {
			struct ibv_send_wr wr = {.wr_id = posted, .opcode = IBV_WR_RDMA_WRITE};

			wr.wr.rdma.remote_addr = (uintptr_t)b->buf;
			wr.wr.rdma.rkey = b->mr->rkey;
			tu_post_send(a, &wr, 0, len);
			posted++;
		}
		tu_side_poll(a);
		done++;
	}
	return tu_now() - t0;
}

#define ACCESS (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static void pair_open(struct tu_side *a, struct tu_side *b)
{
	tu_side_open(a, devs[0], IBV_QPT_RC);
	tu_side_open(b, devs[1], IBV_QPT_RC);
	tu_rc_to_rts(a->qp, &b->gid, TU_GID_INDEX, b->qp->qp_num, ACCESS);
	tu_rc_to_rts(b->qp, &a->gid, TU_GID_INDEX, a->qp->qp_num, ACCESS);
}

/* The paced time must be at least the bytes' time at the rate, less the
 * bucket's burst bytes and 2% for clock granularity. */
static void assert_paced(double secs, double wire_bytes, uint32_t kbps, uint32_t burst)
{
	double need = (wire_bytes - burst) * 8 / (kbps * 1000.0);

	if (secs < need * 0.98)
		fail_msg("%.0f bytes at %u kbit/s took %.3f s, need %.3f s", wire_bytes, kbps, secs,
			 need);
}

static void caps_and_arguments(void **state)
{
	struct tu_side a, b;
	struct ibv_device_attr_ex dx;

	(void)state;
	pair_open(&a, &b);
	assert_int_equal(ibv_query_device_ex(a.ctx, NULL, &dx), 0);
	assert_int_equal(dx.packet_pacing_caps.qp_rate_limit_min, 1);
	assert_true(dx.packet_pacing_caps.qp_rate_limit_max >= 100000000u); /* 100 Gbit/s */
	assert_true(dx.packet_pacing_caps.supported_qpts & (1u << IBV_QPT_RC));
	assert_true(dx.packet_pacing_caps.supported_qpts & (1u << IBV_QPT_UD));

	struct ibv_qp_rate_limit_attr rl = {.rate_limit = 1000, .comp_mask = 1};
	assert_int_equal(ibv_modify_qp_rate_limit(a.qp, &rl), EINVAL);
	rl.comp_mask = 0;
	rl.rate_limit = dx.packet_pacing_caps.qp_rate_limit_max + 1;
	assert_int_equal(ibv_modify_qp_rate_limit(a.qp, &rl), EINVAL);
	rl.rate_limit = 1000;
	rl.max_burst_sz = 1u << 30;
	assert_int_equal(ibv_modify_qp_rate_limit(a.qp, &rl), EINVAL);

	/* IBV_QP_RATE_LIMIT goes with a move to RTS only (as the kernel's table) */
	struct ibv_qp_attr at = {.qp_state = IBV_QPS_RTS, .rate_limit = 5000};
	assert_int_equal(ibv_modify_qp(a.qp, &at, IBV_QP_STATE | IBV_QP_RATE_LIMIT), 0);
	struct ibv_qp_attr q;
	struct ibv_qp_init_attr qi;
	assert_int_equal(ibv_query_qp(a.qp, &q, IBV_QP_RATE_LIMIT, &qi), 0);
	assert_int_equal(q.rate_limit, 5000);
	at.qp_state = IBV_QPS_SQD;
	assert_int_equal(ibv_modify_qp(a.qp, &at, IBV_QP_STATE | IBV_QP_RATE_LIMIT), EINVAL);
	at.rate_limit = dx.packet_pacing_caps.qp_rate_limit_max + 1;
	at.qp_state = IBV_QPS_RTS;
	assert_int_equal(ibv_modify_qp(a.qp, &at, IBV_QP_STATE | IBV_QP_RATE_LIMIT), EINVAL);
	tu_side_close(&a);
	tu_side_close(&b);

	/* a static rate that is no enum ibv_rate */
	tu_side_open(&a, devs[0], IBV_QPT_RC);
	struct ibv_qp_attr r = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	assert_int_equal(
	    ibv_modify_qp(a.qp, &r,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
	    0);
	memset(&r, 0, sizeof(r));
	r.qp_state = IBV_QPS_RTR;
	r.path_mtu = IBV_MTU_1024;
	r.dest_qp_num = 0x11;
	r.ah_attr.is_global = 1;
	r.ah_attr.grh.dgid = a.gid;
	r.ah_attr.grh.sgid_index = TU_GID_INDEX;
	r.ah_attr.port_num = 1;
	r.ah_attr.static_rate = 99;
	assert_int_equal(ibv_modify_qp(a.qp, &r,
				       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
			 EINVAL);
	tu_side_close(&a);
}

/* ibv_modify_qp_rate_limit on a's QP: 24 WRITEs of 64 KiB at 20 Mbit/s. */
static void rc_write_rate_limit(void **state)
{
	struct tu_side a, b;
	const uint32_t kbps = 20000;

	(void)state;
	pair_open(&a, &b);
	struct ibv_qp_rate_limit_attr rl = {.rate_limit = kbps, .max_burst_sz = 4000};
	assert_int_equal(ibv_modify_qp_rate_limit(a.qp, &rl), 0);
	double secs = write_n(&a, &b, 24, TU_BUF);
	assert_paced(secs, write_wire_bytes(24, TU_BUF), kbps, 4000);
	printf("paced %u %u %u\n", b.qp->qp_num, kbps, 4000);
	/* 0 lifts the limit (nothing sent after: the capture check sees the paced part only) */
	rl.rate_limit = 0;
	assert_int_equal(ibv_modify_qp_rate_limit(a.qp, &rl), 0);
	tu_side_close(&a);
	tu_side_close(&b);
}

/* IBV_QP_RATE_LIMIT with RTS -> RTS on b's QP, 16 WRITEs of 64 KiB at 40 Mbit/s. */
static void rc_modify_qp_rate_limit(void **state)
{
	struct tu_side a, b;
	const uint32_t kbps = 40000;

	(void)state;
	pair_open(&a, &b);
	struct ibv_qp_attr at = {.qp_state = IBV_QPS_RTS, .rate_limit = kbps};
	assert_int_equal(ibv_modify_qp(b.qp, &at, IBV_QP_STATE | IBV_QP_RATE_LIMIT), 0);
	double secs = write_n(&b, &a, 16, TU_BUF);
	/* no burst given: one path MTU's frame */
	assert_paced(secs, write_wire_bytes(16, TU_BUF), kbps, (uint32_t)FRAME_BYTES(RC_MTU));
	tu_side_close(&a);
	tu_side_close(&b);
}

/* The AV's static rate below the link's speed paces the QP (IBA 9.11). */
static void rc_static_rate(void **state)
{
	struct tu_side a, b;

	(void)state;
	pair_open(&a, &b);
	/* the address vector changes in SQD (11.2.5.4): RTS -> SQD -> SQD (AV) -> RTS */
	struct ibv_qp_attr q;
	struct ibv_qp_init_attr qi;
	assert_int_equal(ibv_query_qp(a.qp, &q, IBV_QP_AV, &qi), 0);
	struct ibv_qp_attr m = {.qp_state = IBV_QPS_SQD};
	assert_int_equal(ibv_modify_qp(a.qp, &m, IBV_QP_STATE), 0);
	m.ah_attr = q.ah_attr;
	m.ah_attr.static_rate = IBV_RATE_2_5_GBPS;
	assert_int_equal(ibv_modify_qp(a.qp, &m, IBV_QP_STATE | IBV_QP_AV), 0);
	m.qp_state = IBV_QPS_RTS;
	assert_int_equal(ibv_modify_qp(a.qp, &m, IBV_QP_STATE), 0);
	assert_int_equal(ibv_query_qp(a.qp, &q, IBV_QP_AV, &qi), 0);
	assert_int_equal(q.ah_attr.static_rate, IBV_RATE_2_5_GBPS);
	double secs = write_n(&a, &b, 96, TU_BUF);
	assert_paced(secs, write_wire_bytes(96, TU_BUF), 2500000, (uint32_t)FRAME_BYTES(RC_MTU));
	printf("paced %u %u %u\n", b.qp->qp_num, 2500000, (unsigned)FRAME_BYTES(RC_MTU));
	tu_side_close(&a);
	tu_side_close(&b);
}

/* A UD QP at 8 Mbit/s: 48 datagrams of 1000 bytes. */
static void ud_rate_limit(void **state)
{
	struct tu_side a, b;
	const uint32_t kbps = 8000, qkey = 0x1234;

	(void)state;
	tu_side_open(&a, devs[0], IBV_QPT_UD);
	tu_side_open(&b, devs[1], IBV_QPT_UD);
	tu_ud_ready(a.qp, qkey, 1);
	tu_ud_ready(b.qp, qkey, 1);
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1};
	aa.grh.dgid = b.gid;
	aa.grh.sgid_index = TU_GID_INDEX;
	aa.grh.hop_limit = 64;
	struct ibv_ah *ah = ibv_create_ah(a.pd, &aa);
	assert_non_null(ah);
	struct ibv_qp_rate_limit_attr rl = {.rate_limit = kbps, .max_burst_sz = 1070};
	assert_int_equal(ibv_modify_qp_rate_limit(a.qp, &rl), 0);
	double t0 = tu_now();
	for (unsigned i = 0; i < 48; i++) {
		tu_post_recv(&b, i, 0, 1040);
		tu_post_ud(&a, i, ah, b.qp->qp_num, qkey, 0, 1000);
		tu_side_poll(&a);
		tu_side_poll(&b);
	}
	double secs = tu_now() - t0;
	double need = 47 * (FRAME_BYTES(1000) + 8) * 8 / (kbps * 1000.0); /* DETH 8 */
	if (secs < need * 0.98)
		fail_msg("48 datagrams at %u kbit/s took %.3f s, need %.3f s", kbps, secs, need);
	printf("paced %u %u %u\n", b.qp->qp_num, kbps, 1070);
	assert_int_equal(ibv_destroy_ah(ah), 0);
	tu_side_close(&a);
	tu_side_close(&b);
}

int main(int argc, char **argv)
{
	char path[] = "/tmp/rocemu-rate-XXXXXX";
	char cfg[512];

	setvbuf(stdout, NULL, _IOLBF, 0);
	snprintf(cfg, sizeof(cfg),
		 "[rocemu0]\nport = ring:rate:a\nip = 10.79.6.1/24\n%s%s%s"
		 "[rocemu1]\nport = ring:rate:b\nip = 10.79.6.2/24\n",
		 argc > 1 ? "capture = " : "", argc > 1 ? argv[1] : "", argc > 1 ? "\n" : "");
	devs = tu_devices(path, cfg, 2, &n_devs);
	if (!devs)
		return 1;
	/* held open throughout: a port brought up again starts a new capture */
	struct ibv_context *keep = ibv_open_device(devs[0]);
	if (!keep)
		return 1;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(caps_and_arguments),      cmocka_unit_test(rc_write_rate_limit),
	    cmocka_unit_test(rc_modify_qp_rate_limit), cmocka_unit_test(rc_static_rate),
	    cmocka_unit_test(ud_rate_limit),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	ibv_close_device(keep);
	ibv_free_device_list(devs);
	return rc;
}
