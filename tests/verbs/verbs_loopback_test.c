/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RDMA traffic inside one process, through rocemu's libibverbs:
 *  - one device opened twice: two contexts share one engine, and RC traffic
 *    between them loops back inside the engine (as on a real NIC);
 *  - two devices on an in-process DPDK ring pair: two engines, two hosts.
 * Each runs SEND (with immediate, solicited events on a completion channel
 * watched with epoll), RDMA WRITE, RDMA READ, both atomics, the ibv_wr_*
 * API with inline data, and ibv_cq_ex with completion timestamps; then UD
 * with an address handle built from the received GRH (ibv_create_ah_from_wc).
 * Every byte that arrives is checked.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <infiniband/verbs.h>

#include "test_util.h"

#define QKEY 0x11111111

static struct ibv_device **devs;
static int n_devs;

static void modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	int rc = ibv_modify_qp(qp, a, mask);
	if (rc)
		fail_msg("ibv_modify_qp to state %d: %s", a->qp_state, strerror(rc));
}

static void connect_rc(struct tu_side *s, const struct tu_side *peer)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
						   IBV_ACCESS_REMOTE_READ |
						   IBV_ACCESS_REMOTE_ATOMIC};
	modify(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qp->qp_num;
	a.rq_psn = 100;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.sgid_index = TU_GID_INDEX;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.flow_label = ~0u; /* as UCX gives it: the low 20 bits are used */
	a.ah_attr.port_num = 1;
	modify(s->qp, &a,
	       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 100;
	a.max_rd_atomic = 4;
	modify(s->qp, &a,
	       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
		   IBV_QP_MAX_QP_RD_ATOMIC);
	assert_int_equal(s->qp->state, IBV_QPS_RTS);
}

static void rc_traffic(struct tu_side *a, struct tu_side *b)
{
	connect_rc(a, b);
	connect_rc(b, a);

	/* SEND with immediate, solicited: b sleeps on its channel through epoll. */
	tu_post_recv(b, 1, 0, 8192);
	assert_int_equal(ibv_req_notify_cq(ibv_cq_ex_to_cq(b->cq), 1), 0);
	tu_fill(a->buf, 5000, 3);
	struct ibv_send_wr wr = {.wr_id = 10,
				 .opcode = IBV_WR_SEND_WITH_IMM,
				 .send_flags = IBV_SEND_SOLICITED,
				 .imm_data = htobe32(0xabcd)};
	tu_post_send(a, &wr, 0, 5000);
	int ep = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLIN}, got;
	assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, b->ch->fd, &ev), 0);
	assert_int_equal(epoll_wait(ep, &got, 1, 10000), 1);
	close(ep);
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	assert_int_equal(ibv_get_cq_event(b->ch, &ev_cq, &ev_ctx), 0);
	assert_ptr_equal(ev_cq, ibv_cq_ex_to_cq(b->cq));
	ibv_ack_cq_events(ev_cq, 1);
	struct ibv_wc wc = tu_side_poll(b);
	assert_int_equal(wc.opcode, IBV_WC_RECV);
	assert_int_equal(wc.byte_len, 5000);
	assert_true(wc.wc_flags & IBV_WC_WITH_IMM);
	assert_int_equal(be32toh(wc.imm_data), 0xabcd);
	assert_int_equal(wc.qp_num, b->qp->qp_num);
	assert_memory_equal(b->buf, a->buf, 5000);
	wc = tu_side_poll(a);
	assert_int_equal(wc.wr_id, 10);
	assert_int_equal(wc.opcode, IBV_WC_SEND);

	/* RDMA WRITE of 20000 bytes into b at offset 8192. */
	tu_fill(a->buf + 16384, 20000, 9);
	struct ibv_send_wr w = {.wr_id = 11, .opcode = IBV_WR_RDMA_WRITE};
	w.wr.rdma.remote_addr = (uintptr_t)b->buf + 8192;
	w.wr.rdma.rkey = b->mr->rkey;
	tu_post_send(a, &w, 16384, 20000);
	assert_int_equal(tu_side_poll(a).opcode, IBV_WC_RDMA_WRITE);
	assert_memory_equal(b->buf + 8192, a->buf + 16384, 20000);

	/* RDMA READ of b's first 3000 bytes into a at 40000. */
	struct ibv_send_wr r = {.wr_id = 12, .opcode = IBV_WR_RDMA_READ};
	r.wr.rdma.remote_addr = (uintptr_t)b->buf;
	r.wr.rdma.rkey = b->mr->rkey;
	tu_post_send(a, &r, 40000, 3000);
	wc = tu_side_poll(a);
	assert_int_equal(wc.opcode, IBV_WC_RDMA_READ);
	assert_memory_equal(a->buf + 40000, b->buf, 3000);

	/* Atomics on b's 8 bytes at 60000. */
	uint64_t *target = (uint64_t *)(b->buf + 60000);
	*target = 40;
	struct ibv_send_wr at = {.wr_id = 13, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD};
	at.wr.atomic.remote_addr = (uintptr_t)target;
	at.wr.atomic.rkey = b->mr->rkey;
	at.wr.atomic.compare_add = 2;
	tu_post_send(a, &at, 50000, 8);
	assert_int_equal(tu_side_poll(a).opcode, IBV_WC_FETCH_ADD);
	assert_int_equal(*(uint64_t *)(a->buf + 50000), 40);
	assert_int_equal(*target, 42);
	at.wr_id = 14;
	at.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	at.wr.atomic.compare_add = 42;
	at.wr.atomic.swap = 7;
	tu_post_send(a, &at, 50000, 8);
	assert_int_equal(tu_side_poll(a).opcode, IBV_WC_COMP_SWAP);
	assert_int_equal(*(uint64_t *)(a->buf + 50000), 42);
	assert_int_equal(*target, 7);

	/* ibv_wr_* API: inline SEND (buffer reused at once) then an RDMA WRITE, one batch. */
	tu_post_recv(b, 2, 0, 64);
	char msg[32] = "inline through ibv_wr_*";
	ibv_wr_start(a->qpx);
	a->qpx->wr_id = 15;
	a->qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(a->qpx);
	ibv_wr_set_inline_data(a->qpx, msg, sizeof(msg));
	memset(msg, 'X', sizeof(msg)); /* the data was copied at set time */
	a->qpx->wr_id = 16;
	ibv_wr_rdma_write(a->qpx, b->mr->rkey, (uintptr_t)b->buf + 1000);
	ibv_wr_set_sge(a->qpx, a->mr->lkey, (uintptr_t)a->buf + 16384, 100);
	assert_int_equal(ibv_wr_complete(a->qpx), 0);
	assert_int_equal(tu_side_poll(a).wr_id, 15);
	assert_int_equal(tu_side_poll(a).wr_id, 16);
	assert_string_equal((char *)b->buf, "inline through ibv_wr_*");
	assert_memory_equal(b->buf + 1000, a->buf + 16384, 100);

	/* ibv_cq_ex: start/next/end poll with a completion timestamp. */
	struct ibv_poll_cq_attr pa = {0};
	double end = tu_now() + 10;
	int rc;
	while ((rc = ibv_start_poll(b->cq, &pa)) == ENOENT && tu_now() < end)
		;
	assert_int_equal(rc, 0);
	assert_int_equal(b->cq->status, IBV_WC_SUCCESS);
	assert_int_equal(b->cq->wr_id, 2);
	assert_int_equal(ibv_wc_read_opcode(b->cq), IBV_WC_RECV);
	assert_int_equal(ibv_wc_read_byte_len(b->cq), sizeof(msg));
	assert_true(ibv_wc_read_completion_ts(b->cq) != 0);
	assert_int_equal(ibv_next_poll(b->cq), ENOENT);
	ibv_end_poll(b->cq);
}

static void ud_traffic(struct tu_side *a, struct tu_side *b)
{
	tu_ud_ready(a->qp, QKEY, 1);
	tu_ud_ready(b->qp, QKEY, 1);
	/* a -> b with an AH; b answers with an AH made from the received GRH. */
	tu_post_recv(b, 1, 0, 40 + 512);
	struct ibv_ah_attr aa = {
	    .is_global = 1,
	    .port_num = 1,
	    .grh = {.dgid = b->gid,
		    .sgid_index = TU_GID_INDEX,
		    .hop_limit = 64,
		    .flow_label = ~0u}}; /* UCX's "any": NICs keep the low 20 bits */
	struct ibv_ah *ah = ibv_create_ah(a->pd, &aa);
	assert_non_null(ah);
	tu_fill(a->buf + 4096, 512, 5);
	tu_post_ud(a, 20, ah, b->qp->qp_num, QKEY, 4096, 512);
	assert_int_equal(tu_side_poll(a).wr_id, 20);
	struct ibv_wc wc = tu_side_poll(b);
	assert_int_equal(wc.byte_len, 40 + 512);
	assert_true(wc.wc_flags & IBV_WC_GRH);
	/* The RoCE packet type where mlx5 puts it (UCX reads it): UDP, IPv4 or IPv6. */
	assert_int_equal(wc.sl, b->gid.raw[10] == 0xff ? 0xa : 0x9);
	assert_int_equal(wc.src_qp, a->qp->qp_num);
	assert_memory_equal(b->buf + 40, a->buf + 4096, 512);

	struct ibv_ah *back = ibv_create_ah_from_wc(b->pd, &wc, (struct ibv_grh *)b->buf, 1);
	if (!back)
		fail_msg("ibv_create_ah_from_wc: %s", strerror(errno));
	tu_post_recv(a, 2, 8192, 40 + 64);
	tu_fill(b->buf + 2048, 64, 77);
	tu_post_ud(b, 21, back, wc.src_qp, QKEY, 2048, 64);
	assert_int_equal(tu_side_poll(b).wr_id, 21);
	wc = tu_side_poll(a);
	assert_int_equal(wc.byte_len, 40 + 64);
	assert_memory_equal(a->buf + 8192 + 40, b->buf + 2048, 64);
	assert_int_equal(ibv_destroy_ah(ah), 0);
	assert_int_equal(ibv_destroy_ah(back), 0);
}

static void same_device_twice_rc(void **state)
{
	(void)state;
	struct tu_side a, b;
	tu_side_open(&a, devs[0], IBV_QPT_RC);
	tu_side_open(&b, devs[0], IBV_QPT_RC);
	assert_memory_equal(a.gid.raw, b.gid.raw, 16); /* one port, one GID table */
	rc_traffic(&a, &b);
	tu_side_close(&a);
	tu_side_close(&b);
}

static void two_devices_rc(void **state)
{
	(void)state;
	struct tu_side a, b;
	tu_side_open(&a, devs[0], IBV_QPT_RC);
	tu_side_open(&b, devs[1], IBV_QPT_RC);
	rc_traffic(&a, &b);
	tu_side_close(&a);
	tu_side_close(&b);
}

static void two_devices_ud(void **state)
{
	(void)state;
	struct tu_side a, b;
	tu_side_open(&a, devs[0], IBV_QPT_UD);
	tu_side_open(&b, devs[1], IBV_QPT_UD);
	ud_traffic(&a, &b);
	tu_side_close(&a);
	tu_side_close(&b);
}

/* The GSI QP (QP1) through the standard verbs: IBV_QP_CREATE_SOURCE_QPN with
 * source_qpn 1 on a UD QP. One per device (EBUSY), only QPN 1 and only UD
 * (EINVAL); its Q_Key is 0x80010000 and datagrams with another Q_Key are
 * dropped. rocemu's librdmacm sends its CM MADs through it. */
static struct ibv_qp *gsi_create(struct tu_side *s, enum ibv_qp_type type, uint32_t qpn)
{
	struct ibv_qp_init_attr_ex qa = {
	    .send_cq = ibv_cq_ex_to_cq(s->cq),
	    .recv_cq = ibv_cq_ex_to_cq(s->cq),
	    .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = type,
	    .pd = s->pd,
	    .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS,
	    .create_flags = IBV_QP_CREATE_SOURCE_QPN,
	    .source_qpn = qpn,
	};
	return ibv_create_qp_ex(s->ctx, &qa);
}

static void two_devices_gsi(void **state)
{
	(void)state;
	struct tu_side a, b;
	tu_side_open(&a, devs[0], IBV_QPT_UD);
	tu_side_open(&b, devs[1], IBV_QPT_UD);
	struct ibv_qp *ga = gsi_create(&a, IBV_QPT_UD, 1);
	if (!ga)
		fail_msg("GSI QP: %s", strerror(errno));
	assert_int_equal(ga->qp_num, 1);
	errno = 0;
	assert_null(gsi_create(&a, IBV_QPT_UD, 1));
	assert_int_equal(errno, EBUSY);
	assert_null(gsi_create(&a, IBV_QPT_UD, 2));
	assert_int_equal(errno, EINVAL);
	assert_null(gsi_create(&b, IBV_QPT_RC, 1));
	assert_int_equal(errno, EINVAL);
	struct ibv_qp *gb = gsi_create(&b, IBV_QPT_UD, 1);
	assert_non_null(gb);
	assert_int_equal(gb->qp_num, 1);

	tu_ud_ready(ga, 0x80010000, 0);
	tu_ud_ready(gb, 0x80010000, 0);
	struct ibv_ah_attr aa = {
	    .is_global = 1,
	    .port_num = 1,
	    .grh = {.dgid = b.gid, .sgid_index = TU_GID_INDEX, .hop_limit = 64}};
	struct ibv_ah *ah = ibv_create_ah(a.pd, &aa);
	assert_non_null(ah);
	struct ibv_recv_wr *bad_r;
	struct ibv_sge rs = {.addr = (uintptr_t)b.buf, .length = 40 + 256, .lkey = b.mr->lkey};
	struct ibv_recv_wr rw = {.wr_id = 30, .sg_list = &rs, .num_sge = 1};
	assert_int_equal(ibv_post_recv(gb, &rw, &bad_r), 0);

	/* First a datagram with a wrong Q_Key: dropped by b's GSI QP. */
	tu_fill(a.buf + 4096, 256, 9);
	struct ibv_sge sge = {.addr = (uintptr_t)a.buf + 4096, .length = 256, .lkey = a.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 31,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED};
	struct ibv_send_wr *bad;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = 1;
	wr.wr.ud.remote_qkey = 0x12345678;
	assert_int_equal(ibv_post_send(ga, &wr, &bad), 0);
	assert_int_equal(tu_side_poll(&a).wr_id, 31);
	/* Then the GSI Q_Key: received, source QP 1, bytes intact. */
	a.buf[4096] = 0x01; /* distinguishes the second datagram */
	wr.wr_id = 32;
	wr.wr.ud.remote_qkey = 0x80010000;
	assert_int_equal(ibv_post_send(ga, &wr, &bad), 0);
	assert_int_equal(tu_side_poll(&a).wr_id, 32);
	struct ibv_wc wc = tu_side_poll(&b);
	assert_int_equal(wc.wr_id, 30);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.qp_num, 1);
	assert_int_equal(wc.src_qp, 1);
	assert_int_equal(wc.byte_len, 40 + 256);
	assert_memory_equal(b.buf + 40, a.buf + 4096, 256);

	assert_int_equal(ibv_destroy_ah(ah), 0);
	assert_int_equal(ibv_destroy_qp(ga), 0);
	assert_int_equal(ibv_destroy_qp(gb), 0);
	/* QP1 is free again once destroyed. */
	ga = gsi_create(&a, IBV_QPT_UD, 1);
	assert_non_null(ga);
	assert_int_equal(ibv_destroy_qp(ga), 0);
	tu_side_close(&a);
	tu_side_close(&b);
}

int main(void)
{
	char path[] = "/tmp/rocemu-loopback-XXXXXX";

	devs = tu_devices(path,
			  "[rocemu0]\nport = ring:lb:a\nip = 10.79.0.1/24\n"
			  "[rocemu1]\nport = ring:lb:b\nip = 10.79.0.2/24\n",
			  2, &n_devs);
	if (!devs)
		return 1;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(same_device_twice_rc),
	    cmocka_unit_test(two_devices_rc),
	    cmocka_unit_test(two_devices_ud),
	    cmocka_unit_test(two_devices_gsi),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	ibv_free_device_list(devs);
	return rc;
}
