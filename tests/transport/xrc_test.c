/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * XRC between two engines over a net_ring pair (IBA 9.3.8 and 11.2; the
 * rules of ibv_open_xrcd(3), ibv_create_srq_ex(3), ibv_create_qp_ex(3),
 * ibv_open_qp(3)): node A has XRC_SEND QPs, node B XRC SRQs and XRC_RECV
 * QPs. One test per rule:
 *  - domains: private, by inode with and without O_CREAT / O_EXCL, shared,
 *    closed while in use (EBUSY);
 *  - what each half may and may not have at creation, and post;
 *  - two XRC_SEND QPs into one XRC SRQ: SEND (multi-packet), WRITE with
 *    immediate, READ and an atomic through the SRQ's PD, completions on the
 *    SRQ's CQ with the target QP's number;
 *  - an XRCETH naming an SRQ of another domain, or no SRQ: NAK invalid
 *    request, the sender's WR fails REM_INV_REQ_ERR, counted drop_xrc_srq;
 *  - an empty XRC SRQ: RNR NAK, then served once a WQE is posted;
 *  - ibv_open_qp: another handle on the target QP; the QP lives until the last;
 *  - a target QP entering the error state: Last WQE Reached, once.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

static struct node A, B;

static struct rocemu_qp *xsend_qp(void)
{
	struct rocemu_qp_init init = {
	    .qp_type = IBV_QPT_XRC_SEND,
	    .send_cq = A.scq,
	    .cap = {.max_send_wr = 64, .max_send_sge = 4, .max_inline_data = 64},
	};
	struct rocemu_qp *qp = NULL;

	assert_int_equal(rocemu_qp_create(A.pd, &init, &qp), 0);
	return qp;
}

static struct rocemu_qp *xrecv_qp(struct rocemu_xrcd *x)
{
	struct rocemu_qp_init init = {.qp_type = IBV_QPT_XRC_RECV, .xrcd = x};
	struct rocemu_qp *qp = NULL;

	assert_int_equal(rocemu_qp_create(NULL, &init, &qp), 0);
	return qp;
}

static struct rocemu_srq *xrc_srq(struct rocemu_xrcd *x, struct rocemu_cq *cq, uint32_t depth)
{
	struct rocemu_srq_init init = {
	    .pd = B.pd, .max_wr = depth, .max_sge = 4, .xrcd = x, .cq = cq};
	struct rocemu_srq *srq = NULL;

	assert_int_equal(rocemu_srq_create_ex(&init, &srq), 0);
	return srq;
}

/* RESET -> INIT -> RTR -> RTS with the attributes each half requires. */
static void half_up(struct node *self, struct rocemu_qp *qp, struct node *peer, uint32_t peer_qpn,
		    bool target)
{
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = H_ACC_ALL};
	struct ibv_qp_attr rtr = {
	    .qp_state = IBV_QPS_RTR,
	    .path_mtu = IBV_MTU_256,
	    .dest_qp_num = peer_qpn,
	    .rq_psn = target ? 0x500 : 0x600,
	    .max_dest_rd_atomic = 4,
	    .min_rnr_timer = 1,
	    .ah_attr = {.is_global = 1,
			.port_num = 1,
			.grh = {.hop_limit = 64, .sgid_index = (uint8_t)self->gid4_index}}};
	struct ibv_qp_attr rts = {.qp_state = IBV_QPS_RTS,
				  .sq_psn = target ? 0x600 : 0x500,
				  .timeout = 14,
				  .retry_cnt = 7,
				  .rnr_retry = 7,
				  .max_rd_atomic = 4};
	int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	int rts_mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT;

	if (target)
		rtr_mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	else
		rts_mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	memcpy(rtr.ah_attr.grh.dgid.raw, peer->gid4, 16);
	assert_int_equal(
	    rocemu_qp_modify(qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
	    0);
	assert_int_equal(rocemu_qp_modify(qp, &rtr, rtr_mask), 0);
	assert_int_equal(rocemu_qp_modify(qp, &rts, rts_mask), 0);
}

static void connect_xrc(struct rocemu_qp *ini, struct rocemu_qp *tgt)
{
	half_up(&A, ini, &B, rocemu_qp_num(tgt), false);
	half_up(&B, tgt, &A, rocemu_qp_num(ini), true);
}

static int post_xrc(struct rocemu_qp *qp, enum ibv_wr_opcode op, uint64_t id, uint32_t srqn,
		    void *p, uint32_t len, uint32_t lkey, void *raddr, uint32_t rkey)
{
	struct rocemu_send_wr wr = {.wr_id = id,
				    .opcode = op,
				    .remote_addr = (uintptr_t)raddr,
				    .rkey = rkey,
				    .xrc_srqn = srqn,
				    .imm_data = htobe32(0x1234)};

	return h_post_wr(qp, wr, p, len, lkey);
}

static void srq_recv(struct rocemu_srq *srq, uint64_t id, void *p, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = {(uintptr_t)p, len, lkey};

	assert_int_equal(rocemu_srq_post_recv(srq, id, &sge, 1), 0);
}

static void expect(struct rocemu_cq *cq, uint64_t id, enum ibv_wc_status st, struct rocemu_wc *out)
{
	struct rocemu_wc wc;

	assert_int_equal(h_poll(cq, &wc), 1);
	if (wc.status != st || wc.wr_id != id) {
		fprintf(stderr, "wc wr_id %llu status %d, expected %llu status %d\n",
			(unsigned long long)wc.wr_id, wc.status, (unsigned long long)id, st);
		h_dump_counters(A.e, "node A");
		h_dump_counters(B.e, "node B");
	}
	assert_int_equal(wc.status, st);
	assert_int_equal(wc.wr_id, id);
	if (out)
		*out = wc;
}

static void drain(void)
{
	struct rocemu_wc wc;

	while (rocemu_cq_poll(A.scq, 1, &wc) > 0 || rocemu_cq_poll(B.rcq, 1, &wc) > 0)
		;
}

/* ------------------------------------------------------------------------ */

/* ibv_open_xrcd(3) with the kernel's answers. */
static void test_xrcd_open_rules(void **state)
{
	char path[] = "/tmp/rocemu-xrcd-XXXXXX";
	struct rocemu_xrcd *p1, *p2, *f1, *f2, *f3 = NULL;
	struct rocemu_srq *srq;
	struct stat st;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(fstat(fd, &st), 0);
	/* fd -1: a new private domain each time */
	assert_int_equal(rocemu_xrcd_open(B.e, false, 0, 0, false, false, &p1), 0);
	assert_int_equal(rocemu_xrcd_open(B.e, false, 0, 0, false, false, &p2), 0);
	assert_ptr_not_equal(p1, p2);
	/* a file no domain has yet: EAGAIN without O_CREAT */
	assert_int_equal(rocemu_xrcd_open(B.e, true, st.st_dev, st.st_ino, false, false, &f3),
			 -EAGAIN);
	assert_null(f3);
	assert_int_equal(rocemu_xrcd_open(B.e, true, st.st_dev, st.st_ino, true, true, &f1), 0);
	/* the same file: the same domain; with O_CREAT|O_EXCL: EINVAL */
	assert_int_equal(rocemu_xrcd_open(B.e, true, st.st_dev, st.st_ino, false, false, &f2), 0);
	assert_ptr_equal(f1, f2);
	assert_int_equal(rocemu_xrcd_open(B.e, true, st.st_dev, st.st_ino, true, true, &f3),
			 -EINVAL);
	/* in use by an SRQ: the last close is EBUSY, an earlier one is not */
	srq = xrc_srq(f1, B.rcq, 4);
	assert_int_equal(rocemu_xrcd_close(f2), 0);
	assert_int_equal(rocemu_xrcd_close(f1), -EBUSY);
	assert_int_equal(rocemu_srq_destroy(srq), 0);
	assert_int_equal(rocemu_xrcd_close(f1), 0);
	/* closed: the file has no domain any more */
	assert_int_equal(rocemu_xrcd_open(B.e, true, st.st_dev, st.st_ino, false, false, &f3),
			 -EAGAIN);
	assert_int_equal(rocemu_xrcd_close(p1), 0);
	assert_int_equal(rocemu_xrcd_close(p2), 0);
	close(fd);
}

/* What each XRC half has (ibv_create_qp_ex(3), ibv_create_srq_ex(3)) and may post. */
static void test_create_rules(void **state)
{
	struct rocemu_xrcd *x;
	struct rocemu_srq *srq, *basic;
	struct rocemu_qp *qp = NULL, *ini, *tgt;
	struct rocemu_srq_init si = {.pd = B.pd, .max_wr = 4, .max_sge = 1};
	struct rocemu_qp_init qi = {0};
	struct ibv_sge sge = {0};
	uint8_t buf[8];

	(void)state;
	assert_int_equal(rocemu_xrcd_open(B.e, false, 0, 0, false, false, &x), 0);
	/* an XRC SRQ needs its CQ, a CQ alone is no XRC SRQ */
	si.xrcd = x;
	assert_int_equal(rocemu_srq_create_ex(&si, &srq), -EINVAL);
	si.xrcd = NULL;
	si.cq = B.rcq;
	assert_int_equal(rocemu_srq_create_ex(&si, &srq), -EINVAL);
	srq = xrc_srq(x, B.rcq, 4);
	assert_int_equal(rocemu_srq_create(B.pd, 4, 1, 0, NULL, &basic), 0);
	/* every SRQ has its own number */
	assert_int_not_equal(rocemu_srq_num(srq), rocemu_srq_num(basic));

	/* XRC_RECV: a domain, no PD, no CQs, no SRQ */
	qi = (struct rocemu_qp_init){.qp_type = IBV_QPT_XRC_RECV};
	assert_int_equal(rocemu_qp_create(NULL, &qi, &qp), -EINVAL);
	qi.xrcd = x;
	assert_int_equal(rocemu_qp_create(B.pd, &qi, &qp), -EINVAL);
	qi.recv_cq = B.rcq;
	assert_int_equal(rocemu_qp_create(NULL, &qi, &qp), -EINVAL);
	qi.recv_cq = NULL;
	qi.srq = srq;
	assert_int_equal(rocemu_qp_create(NULL, &qi, &qp), -EINVAL);
	assert_null(qp);
	/* XRC_SEND: a PD and a send CQ; no SRQ, no domain */
	qi = (struct rocemu_qp_init){.qp_type = IBV_QPT_XRC_SEND,
				     .cap = {.max_send_wr = 4, .max_send_sge = 1}};
	assert_int_equal(rocemu_qp_create(A.pd, &qi, &qp), -EINVAL);
	qi.send_cq = A.scq;
	qi.srq = basic;
	assert_int_equal(rocemu_qp_create(B.pd, &qi, &qp), -EINVAL);
	qi.srq = NULL;
	qi.xrcd = x;
	assert_int_equal(rocemu_qp_create(B.pd, &qi, &qp), -EINVAL);

	tgt = xrecv_qp(x);
	ini = xsend_qp();
	/* no receive queue on either half, no send queue on the target */
	assert_int_equal(rocemu_qp_post_recv(ini, 1, &sge, 1), -EINVAL);
	assert_int_equal(rocemu_qp_post_recv(tgt, 1, &sge, 1), -EINVAL);
	connect_xrc(ini, tgt);
	assert_int_equal(post_xrc(tgt, IBV_WR_SEND, 1, 0, buf, 0, 0, NULL, 0), -EINVAL);
	/* a domain in use by a QP: EBUSY */
	assert_int_equal(rocemu_srq_destroy(srq), 0);
	assert_int_equal(rocemu_xrcd_close(x), -EBUSY);
	assert_int_equal(rocemu_qp_destroy(tgt), 0);
	assert_int_equal(rocemu_qp_destroy(ini), 0);
	assert_int_equal(rocemu_srq_destroy(basic), 0);
	assert_int_equal(rocemu_xrcd_close(x), 0);
	drain();
}

/* The pair test of issue 15: two XRC_SEND QPs into one XRC SRQ. */
static void test_two_senders_one_srq(void **state)
{
	static uint8_t src[2][1000], dst[4][1024], win[64];
	struct rocemu_mr *ms, *md, *mw;
	struct rocemu_xrcd *x;
	struct rocemu_cq *srq_cq;
	struct rocemu_srq *srq;
	struct rocemu_qp *ini[2], *tgt[2];
	struct rocemu_wc wc;
	uint8_t rd[64];
	uint64_t orig = 0;
	uint32_t n;
	int seen[2] = {0, 0};

	(void)state;
	assert_int_equal(rocemu_xrcd_open(B.e, false, 0, 0, false, false, &x), 0);
	/* the SRQ's own CQ: a target QP has none */
	assert_int_equal(rocemu_cq_create(B.e, 64, NULL, NULL, NULL, &srq_cq), 0);
	srq = xrc_srq(x, srq_cq, 16);
	n = rocemu_srq_num(srq);
	for (int i = 0; i < 2; i++) {
		ini[i] = xsend_qp();
		tgt[i] = xrecv_qp(x);
		connect_xrc(ini[i], tgt[i]);
	}
	ms = h_reg(A.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	md = h_reg(B.pd, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE);
	mw = h_reg(B.pd, win, sizeof(win), H_ACC_ALL);
	for (int i = 0; i < 4; i++)
		srq_recv(srq, 100 + i, dst[i], sizeof(dst[i]), h_key(md, false));
	h_fill(src[0], sizeof(src[0]), 1);
	h_fill(src[1], sizeof(src[1]), 2);
	/* 1000 bytes over a 256 MTU: FIRST, MIDDLE, MIDDLE, LAST */
	for (int i = 0; i < 2; i++)
		assert_int_equal(post_xrc(ini[i], IBV_WR_SEND, 1 + i, n, src[i], sizeof(src[i]),
					  h_key(ms, false), NULL, 0),
				 0);
	for (int i = 0; i < 2; i++) {
		/* either sender first */
		assert_int_equal(h_poll(A.scq, &wc), 1);
		assert_int_equal(wc.status, IBV_WC_SUCCESS);
		assert_true(wc.wr_id == 1 || wc.wr_id == 2);
	}
	for (int i = 0; i < 2; i++) {
		int s;

		assert_int_equal(h_poll(srq_cq, &wc), 1);
		assert_int_equal(wc.status, IBV_WC_SUCCESS);
		assert_int_equal(wc.opcode, IBV_WC_RECV);
		assert_int_equal(wc.byte_len, sizeof(src[0]));
		/* the completion names the target QP the message came through */
		s = wc.qp_num == rocemu_qp_num(tgt[0]) ? 0 : 1;
		assert_int_equal(wc.qp_num, rocemu_qp_num(tgt[s]));
		seen[s]++;
		assert_memory_equal(dst[wc.wr_id - 100], src[s], sizeof(src[s]));
	}
	assert_int_equal(seen[0], 1);
	assert_int_equal(seen[1], 1);
	/* nothing on B's other CQs */
	assert_int_equal(h_poll_quiet(B.rcq, &wc, 50), 0);

	/* WRITE with immediate: the region of the SRQ's PD, a receive WQE consumed */
	assert_int_equal(post_xrc(ini[1], IBV_WR_RDMA_WRITE_WITH_IMM, 3, n, src[1], 64,
				  h_key(ms, false), win, h_key(mw, true)),
			 0);
	expect(A.scq, 3, IBV_WC_SUCCESS, NULL);
	assert_int_equal(h_poll(srq_cq, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	assert_int_equal(wc.qp_num, rocemu_qp_num(tgt[1]));
	assert_memory_equal(win, src[1], 64);
	/* READ back and FETCH_ADD through the other target */
	memset(rd, 0, sizeof(rd));
	struct rocemu_mr *mrd = h_reg(A.pd, rd, sizeof(rd), IBV_ACCESS_LOCAL_WRITE);
	assert_int_equal(post_xrc(ini[0], IBV_WR_RDMA_READ, 4, n, rd, 64, h_key(mrd, false), win,
				  h_key(mw, true)),
			 0);
	expect(A.scq, 4, IBV_WC_SUCCESS, NULL);
	assert_memory_equal(rd, src[1], 64);
	memcpy(&orig, win, 8);
	struct rocemu_send_wr fa = {.wr_id = 5,
				    .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				    .remote_addr = (uintptr_t)win,
				    .rkey = h_key(mw, true),
				    .compare_add = 7,
				    .xrc_srqn = n};
	assert_int_equal(h_post_wr(ini[0], fa, rd, 8, h_key(mrd, false)), 0);
	expect(A.scq, 5, IBV_WC_SUCCESS, NULL);
	assert_memory_equal(rd, &orig, 8);
	orig += 7;
	assert_memory_equal(win, &orig, 8);
	assert_int_equal(h_poll_quiet(srq_cq, &wc, 20), 0);

	for (int i = 0; i < 2; i++) {
		assert_int_equal(rocemu_qp_destroy(ini[i]), 0);
		assert_int_equal(rocemu_qp_destroy(tgt[i]), 0);
	}
	drain();
	while (rocemu_cq_poll(srq_cq, 1, &wc) > 0)
		;
	assert_int_equal(rocemu_srq_destroy(srq), 0);
	assert_int_equal(rocemu_cq_destroy(srq_cq), 0);
	assert_int_equal(rocemu_xrcd_close(x), 0);
	rocemu_mr_dereg(ms);
	rocemu_mr_dereg(md);
	rocemu_mr_dereg(mw);
	rocemu_mr_dereg(mrd);
}

/*
 * An XRCETH that names no SRQ of the target's domain (wrong is "of another
 * domain" when other, "no SRQ by that number" otherwise): NAK invalid
 * request; the sender's WR completes REM_INV_REQ_ERR; the other domain's SRQ
 * gives nothing; counted.
 */
static void bad_srqn(bool other)
{
	struct rocemu_xrcd *x1, *x2;
	struct rocemu_srq *s1, *s2;
	struct rocemu_qp *ini, *tgt;
	struct rocemu_mr *ms, *md;
	uint8_t src[32] = {1}, dst[64];
	uint64_t before = h_counter(B.e, "drop_xrc_srq");
	struct rocemu_wc wc;
	uint32_t n;

	assert_int_equal(rocemu_xrcd_open(B.e, false, 0, 0, false, false, &x1), 0);
	assert_int_equal(rocemu_xrcd_open(B.e, false, 0, 0, false, false, &x2), 0);
	s1 = xrc_srq(x1, B.rcq, 4);
	s2 = xrc_srq(x2, B.rcq, 4);
	ms = h_reg(A.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	md = h_reg(B.pd, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE);
	srq_recv(s1, 11, dst, sizeof(dst), h_key(md, false));
	srq_recv(s2, 22, dst, sizeof(dst), h_key(md, false));
	ini = xsend_qp();
	tgt = xrecv_qp(x1);
	connect_xrc(ini, tgt);
	n = other ? rocemu_srq_num(s2) : 0xFFFFF0;
	assert_int_equal(
	    post_xrc(ini, IBV_WR_SEND, 7, n, src, sizeof(src), h_key(ms, false), NULL, 0), 0);
	expect(A.scq, 7, IBV_WC_REM_INV_REQ_ERR, NULL);
	assert_int_equal(h_counter(B.e, "drop_xrc_srq"), before + 1);
	assert_int_equal(rocemu_qp_state(tgt), IBV_QPS_ERR);
	/* neither SRQ gave a WQE: nothing completes on B */
	assert_int_equal(h_poll_quiet(B.rcq, &wc, 50), 0);
	assert_int_equal(rocemu_qp_destroy(ini), 0);
	assert_int_equal(rocemu_qp_destroy(tgt), 0);
	drain();
	assert_int_equal(rocemu_srq_destroy(s1), 0);
	assert_int_equal(rocemu_srq_destroy(s2), 0);
	assert_int_equal(rocemu_xrcd_close(x1), 0);
	assert_int_equal(rocemu_xrcd_close(x2), 0);
	rocemu_mr_dereg(ms);
	rocemu_mr_dereg(md);
}

static void test_srq_of_other_domain(void **state)
{
	(void)state;
	bad_srqn(true);
}

static void test_unknown_srqn(void **state)
{
	(void)state;
	bad_srqn(false);
}

/* An XRC SRQ with no receive WQE: RNR NAK (9.7.5.2.8), served when one comes. */
static void test_empty_srq_rnr(void **state)
{
	struct rocemu_xrcd *x;
	struct rocemu_srq *srq;
	struct rocemu_qp *ini, *tgt;
	struct rocemu_mr *ms, *md;
	uint8_t src[16], dst[16];
	struct rocemu_wc wc;
	uint64_t rnr;

	(void)state;
	assert_int_equal(rocemu_xrcd_open(B.e, false, 0, 0, false, false, &x), 0);
	srq = xrc_srq(x, B.rcq, 4);
	ini = xsend_qp();
	tgt = xrecv_qp(x);
	connect_xrc(ini, tgt);
	ms = h_reg(A.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	md = h_reg(B.pd, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE);
	h_fill(src, sizeof(src), 9);
	rnr = h_counter(A.e, "rx_rnr_nak");
	assert_int_equal(post_xrc(ini, IBV_WR_SEND, 8, rocemu_srq_num(srq), src, sizeof(src),
				  h_key(ms, false), NULL, 0),
			 0);
	/* wait for the first RNR NAK, then give the SRQ its WQE */
	for (int i = 0; i < 20000 && h_counter(A.e, "rx_rnr_nak") == rnr; i++)
		usleep(1000);
	assert_true(h_counter(A.e, "rx_rnr_nak") > rnr);
	srq_recv(srq, 9, dst, sizeof(dst), h_key(md, false));
	expect(A.scq, 8, IBV_WC_SUCCESS, NULL);
	expect(B.rcq, 9, IBV_WC_SUCCESS, &wc);
	assert_int_equal(wc.qp_num, rocemu_qp_num(tgt));
	assert_memory_equal(dst, src, sizeof(src));
	assert_int_equal(rocemu_qp_destroy(ini), 0);
	assert_int_equal(rocemu_qp_destroy(tgt), 0);
	assert_int_equal(rocemu_srq_destroy(srq), 0);
	assert_int_equal(rocemu_xrcd_close(x), 0);
	rocemu_mr_dereg(ms);
	rocemu_mr_dereg(md);
	drain();
}

/* ibv_open_qp(3): handles on a target QP of the same domain only; the QP
 * lives until its last handle is destroyed. */
static void test_open_qp(void **state)
{
	struct rocemu_xrcd *x, *y;
	struct rocemu_qp *tgt, *h = NULL, *rc;
	struct rocemu_srq *srq;
	struct rocemu_qp *ini;
	struct rocemu_mr *ms, *md;
	uint8_t src[8] = {5, 4, 3}, dst[8];
	struct rocemu_wc wc;

	(void)state;
	assert_int_equal(rocemu_xrcd_open(B.e, false, 0, 0, false, false, &x), 0);
	assert_int_equal(rocemu_xrcd_open(B.e, false, 0, 0, false, false, &y), 0);
	tgt = xrecv_qp(x);
	rc = h_qp(&B, IBV_QPT_RC, 4, NULL);
	assert_non_null(rc);
	assert_int_equal(rocemu_qp_open(y, rocemu_qp_num(tgt), &h), -EINVAL);
	assert_int_equal(rocemu_qp_open(x, rocemu_qp_num(rc), &h), -EINVAL);
	assert_int_equal(rocemu_qp_open(x, 0xFFFFF0, &h), -EINVAL);
	assert_null(h);
	assert_int_equal(rocemu_qp_open(x, rocemu_qp_num(tgt), &h), 0);
	assert_ptr_equal(h, tgt);
	/* the creator's handle goes; the opened one keeps the QP serving */
	assert_int_equal(rocemu_qp_destroy(tgt), 0);
	srq = xrc_srq(x, B.rcq, 4);
	ini = xsend_qp();
	connect_xrc(ini, h);
	ms = h_reg(A.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	md = h_reg(B.pd, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE);
	srq_recv(srq, 3, dst, sizeof(dst), h_key(md, false));
	assert_int_equal(
	    post_xrc(ini, IBV_WR_SEND, 2, rocemu_srq_num(srq), src, 8, h_key(ms, false), NULL, 0),
	    0);
	expect(A.scq, 2, IBV_WC_SUCCESS, NULL);
	expect(B.rcq, 3, IBV_WC_SUCCESS, &wc);
	assert_memory_equal(dst, src, 8);
	assert_int_equal(rocemu_qp_destroy(h), 0);
	assert_int_equal(rocemu_qp_destroy(ini), 0);
	assert_int_equal(rocemu_qp_destroy(rc), 0);
	assert_int_equal(rocemu_srq_destroy(srq), 0);
	assert_int_equal(rocemu_xrcd_close(x), 0);
	assert_int_equal(rocemu_xrcd_close(y), 0);
	rocemu_mr_dereg(ms);
	rocemu_mr_dereg(md);
	drain();
}

/* The async events node B's engine raised (ev_log). */
static struct {
	enum ibv_event_type type;
	void *ctx;
} ev_log[8];
static unsigned ev_n;

static void log_event(void *arg, const struct rocemu_event *ev)
{
	(void)arg;
	if (!ev->unresolved && ev_n < sizeof(ev_log) / sizeof(ev_log[0])) {
		ev_log[ev_n].type = ev->type;
		ev_log[ev_n].ctx = ev->obj_ctx;
		ev_n++;
	}
}

/* Last WQE Reached (IBA ch. 11, affiliated events) for a QP on an SRQ entering ERR:
 * an XRC target is one (its WQEs come from the XRC SRQs requests name); it
 * reports the event once, with its context, after its in-progress WQE was
 * flushed; an XRC initiator (no receive side) does not. */
static void test_last_wqe_reached(void **state)
{
	struct rocemu_xrcd *x;
	struct rocemu_srq *srq;
	struct rocemu_qp *ini, *tgt = NULL;
	struct rocemu_mr *ms, *md;
	uint8_t src[16] = {1, 2, 3}, dst[16];
	int tgt_ctx, ini_ctx;
	struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};

	(void)state;
	assert_int_equal(rocemu_xrcd_open(B.e, false, 0, 0, false, false, &x), 0);
	srq = xrc_srq(x, B.rcq, 4);
	struct rocemu_qp_init ti = {.qp_type = IBV_QPT_XRC_RECV, .xrcd = x, .user_ctx = &tgt_ctx};
	assert_int_equal(rocemu_qp_create(NULL, &ti, &tgt), 0);
	ini = xsend_qp();
	rocemu_qp_retarget_events(ini, NULL, &ini_ctx);
	connect_xrc(ini, tgt);
	ms = h_reg(A.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	md = h_reg(B.pd, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE);
	srq_recv(srq, 5, dst, sizeof(dst), h_key(md, false));
	assert_int_equal(post_xrc(ini, IBV_WR_SEND, 4, rocemu_srq_num(srq), src, sizeof(src),
				  h_key(ms, false), NULL, 0),
			 0);
	expect(A.scq, 4, IBV_WC_SUCCESS, NULL);
	expect(B.rcq, 5, IBV_WC_SUCCESS, NULL);

	rocemu_engine_set_event_handler(B.e, log_event, NULL);
	rocemu_engine_set_event_handler(A.e, log_event, NULL);
	ev_n = 0;
	assert_int_equal(rocemu_qp_modify(tgt, &err, IBV_QP_STATE), 0);
	assert_int_equal(ev_n, 1);
	assert_int_equal(ev_log[0].type, IBV_EVENT_QP_LAST_WQE_REACHED);
	assert_ptr_equal(ev_log[0].ctx, &tgt_ctx);
	/* once: a QP already in the error state does not report it again */
	assert_int_equal(rocemu_qp_modify(tgt, &err, IBV_QP_STATE), 0);
	assert_int_equal(ev_n, 1);
	/* the initiator has no receive side: nothing */
	assert_int_equal(rocemu_qp_modify(ini, &err, IBV_QP_STATE), 0);
	assert_int_equal(ev_n, 1);
	/* the SRQ kept its other WQEs: no completion on B */
	struct rocemu_wc wc;
	assert_int_equal(h_poll_quiet(B.rcq, &wc, 20), 0);

	rocemu_engine_set_event_handler(A.e, NULL, NULL);
	rocemu_engine_set_event_handler(B.e, NULL, NULL);
	assert_int_equal(rocemu_qp_destroy(ini), 0);
	assert_int_equal(rocemu_qp_destroy(tgt), 0);
	drain();
	assert_int_equal(rocemu_srq_destroy(srq), 0);
	assert_int_equal(rocemu_xrcd_close(x), 0);
	rocemu_mr_dereg(ms);
	rocemu_mr_dereg(md);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_last_wqe_reached),	cmocka_unit_test(test_two_senders_one_srq),
	    cmocka_unit_test(test_srq_of_other_domain), cmocka_unit_test(test_unknown_srqn),
	    cmocka_unit_test(test_empty_srq_rnr),	cmocka_unit_test(test_open_qp),
	    cmocka_unit_test(test_xrcd_open_rules),	cmocka_unit_test(test_create_rules),
	};
	const char *capture_path = NULL;

	/* --capture PATH: node A captures (check_capture.py --xrc) */
	if (argc > 2 && !strcmp(argv[1], "--capture"))
		capture_path = argv[2];
	return h_run_group("transport_xrc", tests, sizeof(tests) / sizeof(tests[0]), &A, &B, "xrct",
			   capture_path);
}
