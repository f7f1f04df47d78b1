/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers shared by the in-process verbs and rdma_cm tests (cmocka): a
 * rocemu config file for the test's devices, a bounded wait for one
 * completion, one end of a connection (struct tu_side) with its posting and
 * UD helpers, socket addresses and the next rdma_cm event. Include after
 * <cmocka.h> and <infiniband/verbs.h>; the rdma_cm helpers need
 * <rdma/rdma_cma.h> included first.
 */
#ifndef ROCEMU_TESTS_VERBS_TEST_UTIL_H
#define ROCEMU_TESTS_VERBS_TEST_UTIL_H

#include <arpa/inet.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline double tu_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Write cfg to a new file made from path (a mkstemp template, rewritten in
 * place) and point ROCEMU_CONFIG at it. The caller unlinks path. 0 or -1. */
static inline int tu_config(char *path, const char *cfg)
{
	int fd = mkstemp(path);
	size_t len = strlen(cfg);

	if (fd < 0)
		return -1;
	if (write(fd, cfg, len) != (ssize_t)len) {
		close(fd);
		unlink(path);
		return -1;
	}
	close(fd);
	return setenv("ROCEMU_CONFIG", path, 1);
}

/* tu_config, then the device list, which must hold want devices (else NULL,
 * said on stderr). The config file is gone when this returns. */
static inline struct ibv_device **tu_devices(char *path, const char *cfg, int want, int *n)
{
	struct ibv_device **list;

	if (tu_config(path, cfg))
		return NULL;
	list = ibv_get_device_list(n);
	unlink(path);
	if (!list || *n != want) {
		fprintf(stderr, "expected %d rocemu devices, got %d\n", want, list ? *n : -1);
		if (list)
			ibv_free_device_list(list);
		return NULL;
	}
	return list;
}

/* A UD QP through INIT (port 1, Q_Key qkey), RTR and RTS (send PSN psn), each asserted. */
static inline void tu_ud_to_rts(struct ibv_qp *qp, uint32_t qkey, uint32_t psn)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = qkey};

	assert_int_equal(
	    ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
	a.qp_state = IBV_QPS_RTR;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = psn;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
}

/* An RC or UC QP through INIT (port 1, remote access), RTR to QP dqpn at
 * dgid from GID index sgid (1024-byte MTU, receive PSN 7) and RTS (send PSN
 * 7), each asserted; an RC QP also with 4 incoming reads and atomics, RNR
 * timer 12, timeout 14, 7 retries and RNR retries, 4 outgoing reads and
 * atomics (the attributes UC has not). */
static inline void tu_rc_to_rts(struct ibv_qp *qp, const union ibv_gid *dgid, uint8_t sgid,
				uint32_t dqpn, unsigned access)
{
	bool rc = qp->qp_type == IBV_QPT_RC;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = access};

	assert_int_equal(
	    ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
	    0);
	a = (struct ibv_qp_attr){
	    .qp_state = IBV_QPS_RTR,
	    .path_mtu = IBV_MTU_1024,
	    .dest_qp_num = dqpn,
	    .rq_psn = 7,
	    .max_dest_rd_atomic = 4,
	    .min_rnr_timer = 12,
	    .ah_attr = {.is_global = 1,
			.grh = {.dgid = *dgid, .sgid_index = sgid, .hop_limit = 64},
			.port_num = 1}};
	assert_int_equal(
	    ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN |
			      (rc ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0)),
	    0);
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS,
				 .timeout = 14,
				 .retry_cnt = 7,
				 .rnr_retry = 7,
				 .sq_psn = 7,
				 .max_rd_atomic = 4};
	assert_int_equal(ibv_modify_qp(qp, &a,
				       IBV_QP_STATE | IBV_QP_SQ_PSN |
					   (rc ? IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
						     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC
					       : 0)),
			 0);
}

/* The next completion on cq within 10 s, whatever its status, else the test fails. */
static inline struct ibv_wc tu_poll_any(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	double end = tu_now() + 10;
	int n;

	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0 && tu_now() < end)
		;
	if (n != 1)
		fail_msg("no completion within 10 s (poll returned %d)", n);
	return wc;
}

/* One successful completion from cq within 10 s, else the test fails. */
static inline struct ibv_wc tu_poll_one(struct ibv_cq *cq)
{
	struct ibv_wc wc = tu_poll_any(cq);

	if (wc.status != IBV_WC_SUCCESS)
		fail_msg("completion wr_id %llu status %s", (unsigned long long)wc.wr_id,
			 ibv_wc_status_str(wc.status));
	return wc;
}

/* One signalled RDMA op of len bytes at local (lkey) to raddr/rkey through
 * qp, its completion taken from cq: its status. A WRITE or READ; or an
 * atomic FETCH_AND_ADD (len 8) that adds TU_FETCH_ADD, the old value landing
 * at local. */
#define TU_FETCH_ADD 5
static inline enum ibv_wc_status tu_rdma(struct ibv_qp *qp, struct ibv_cq *cq, void *local,
					 uint32_t lkey, enum ibv_wr_opcode op, uint32_t len,
					 uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = {.addr = (uintptr_t)local, .length = len, .lkey = lkey};
	struct ibv_send_wr wr = {.wr_id = 0x77,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;

	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = TU_FETCH_ADD;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	assert_int_equal(ibv_post_send(qp, &wr, &bad), 0);
	wc = tu_poll_any(cq);
	assert_int_equal(wc.wr_id, 0x77);
	return wc.status;
}

/* One end of a verbs test: a device context with a PD, a completion channel,
 * an extended CQ (completion timestamps), one QP of the given type (extended:
 * ibv_wr_* SEND, SEND with immediate, RDMA WRITE), a TU_BUF-byte buffer
 * registered for every access, the port's GID at TU_GID_INDEX and its LID. */
#define TU_BUF	     65536
#define TU_GID_INDEX 1

struct tu_side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq_ex *cq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	uint16_t lid;
};

static inline void tu_side_open(struct tu_side *s, struct ibv_device *dev, enum ibv_qp_type type)
{
	struct ibv_port_attr pa;

	memset(s, 0, sizeof(*s));
	s->ctx = ibv_open_device(dev);
	assert_non_null(s->ctx);
	s->pd = ibv_alloc_pd(s->ctx);
	assert_non_null(s->pd);
	s->ch = ibv_create_comp_channel(s->ctx);
	assert_non_null(s->ch);
	struct ibv_cq_init_attr_ex ca = {
	    .cqe = 64,
	    .channel = s->ch,
	    .wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
	};
	s->cq = ibv_create_cq_ex(s->ctx, &ca);
	assert_non_null(s->cq);
	s->buf = aligned_alloc(4096, TU_BUF);
	assert_non_null(s->buf);
	memset(s->buf, 0, TU_BUF);
	s->mr = ibv_reg_mr(s->pd, s->buf, TU_BUF,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	assert_non_null(s->mr);
	struct ibv_qp_init_attr_ex qa = {
	    .send_cq = ibv_cq_ex_to_cq(s->cq),
	    .recv_cq = ibv_cq_ex_to_cq(s->cq),
	    .cap = {.max_send_wr = 16,
		    .max_recv_wr = 16,
		    .max_send_sge = 2,
		    .max_recv_sge = 2,
		    .max_inline_data = 64},
	    .qp_type = type,
	    .pd = s->pd,
	    .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
	    .send_ops_flags =
		IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE,
	};
	s->qp = ibv_create_qp_ex(s->ctx, &qa);
	assert_non_null(s->qp);
	s->qpx = ibv_qp_to_qp_ex(s->qp);
	assert_non_null(s->qpx);
	assert_int_equal(ibv_query_gid(s->ctx, 1, TU_GID_INDEX, &s->gid), 0);
	assert_int_equal(ibv_query_port(s->ctx, 1, &pa), 0);
	assert_int_equal(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
	s->lid = pa.lid;
}

static inline void tu_side_close(struct tu_side *s)
{
	assert_int_equal(ibv_destroy_qp(s->qp), 0);
	assert_int_equal(ibv_dereg_mr(s->mr), 0);
	assert_int_equal(ibv_destroy_cq(ibv_cq_ex_to_cq(s->cq)), 0);
	assert_int_equal(ibv_destroy_comp_channel(s->ch), 0);
	assert_int_equal(ibv_dealloc_pd(s->pd), 0);
	assert_int_equal(ibv_close_device(s->ctx), 0);
	free(s->buf);
}

/* tu_poll_one on the side's CQ. */
static inline struct ibv_wc tu_side_poll(struct tu_side *s)
{
	return tu_poll_one(ibv_cq_ex_to_cq(s->cq));
}

/* A receive of len bytes into s->buf at off. */
static inline void tu_post_recv(struct tu_side *s, uint64_t wr_id, uint32_t off, uint32_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf + off, .length = len, .lkey = s->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;

	assert_int_equal(ibv_post_recv(s->qp, &wr, &bad), 0);
}

/* wr, signaled, with one SGE: len bytes of s->buf at off. The caller sets
 * wr_id, opcode and the remote part; wr is left pointing at no SGE. */
static inline void tu_post_send(struct tu_side *s, struct ibv_send_wr *wr, uint32_t off,
				uint32_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf + off, .length = len, .lkey = s->mr->lkey};
	struct ibv_send_wr *bad = NULL;
	int rc;

	wr->sg_list = &sge;
	wr->num_sge = 1;
	wr->send_flags |= IBV_SEND_SIGNALED;
	rc = ibv_post_send(s->qp, wr, &bad);
	wr->sg_list = NULL;
	wr->num_sge = 0;
	if (rc)
		fail_msg("ibv_post_send: %s", strerror(rc));
}

/* A UD SEND of len bytes of s->buf at off through ah to qpn/qkey. */
static inline void tu_post_ud(struct tu_side *s, uint64_t wr_id, struct ibv_ah *ah, uint32_t qpn,
			      uint32_t qkey, uint32_t off, uint32_t len)
{
	struct ibv_send_wr wr = {.wr_id = wr_id, .opcode = IBV_WR_SEND};

	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = qkey;
	tu_post_send(s, &wr, off, len);
}

/* A UD QP (port 1, P_Key index 0) through INIT with qkey, RTR and RTS. */
static inline void tu_ud_ready(struct ibv_qp *qp, uint32_t qkey, uint32_t sq_psn)
{
	struct ibv_qp_attr at = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = qkey};
	int rc =
	    ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);

	if (!rc) {
		at.qp_state = IBV_QPS_RTR;
		rc = ibv_modify_qp(qp, &at, IBV_QP_STATE);
	}
	if (!rc) {
		at.qp_state = IBV_QPS_RTS;
		at.sq_psn = sq_psn;
		rc = ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_SQ_PSN);
	}
	if (rc)
		fail_msg("UD QP %u to state %d: %s", qp->qp_num, at.qp_state, strerror(rc));
}

/* len bytes at p, a pattern that depends on seed. */
static inline void tu_fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

#ifdef RDMA_CMA_H
static inline struct sockaddr_in tu_addr(const char *ip, uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};

	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

/* The next event on ch within 10 s; it must be `type`. */
static inline struct rdma_cm_event *tu_expect(struct rdma_event_channel *ch,
					      enum rdma_cm_event_type type)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;

	if (poll(&p, 1, 10000) != 1)
		fail_msg("no event within 10 s (waiting for %s)", rdma_event_str(type));
	assert_int_equal(rdma_get_cm_event(ch, &ev), 0);
	if (ev->event != type)
		fail_msg("got %s (status %d), expected %s", rdma_event_str(ev->event), ev->status,
			 rdma_event_str(type));
	return ev;
}
#endif

#endif
