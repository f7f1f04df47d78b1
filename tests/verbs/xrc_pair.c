/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xrc_pair: two processes, two XRC_SEND QPs into one XRC SRQ (issue 15.2).
 * A plain libibverbs program run under `rocemu run` by pair_check.sh.
 *
 * The server (target) opens an XRC domain on a file (ibv_open_xrcd, fd and
 * O_CREAT), makes one XRC SRQ with its own CQ (ibv_create_srq_ex,
 * IBV_SRQT_XRC), tells its number (ibv_get_srq_num), and two XRC_RECV QPs
 * (ibv_create_qp_ex with the domain); the second is also opened by number
 * (ibv_open_qp) and brought up through that handle. The client (initiator)
 * has two XRC_SEND QPs, one connected to each target QP: the first posts
 * with the legacy ibv_post_send (wr.qp_type.xrc.remote_srqn), the second with
 * ibv_wr_* and ibv_wr_set_xrc_srqn. Each sends -n messages of several
 * packets naming the SRQ, then one RDMA WRITE into the server's region,
 * which the first READs back. The server checks every message byte for
 * byte, that each came from the target QP of its sender (wc.qp_num), that
 * both QPs delivered all of theirs through the one SRQ and its CQ, and the
 * written bytes.
 *
 * usage: xrc_pair [-p PORT] [-g GID] [-n MESSAGES] [-l SESSIONS] [SERVER]
 * Exit 0: passed; 1: failed (the reason on stderr).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "pair_util.h"

#define NQP	 2
#define MSG_MAX	 3000 /* 3 packets at MTU 1024 */
#define WIN_LEN	 256
#define WAIT_SEC 120

struct info {
	uint32_t qpn[NQP];
	uint32_t srqn;
	uint32_t rkey;
	uint64_t win;
	uint8_t gid[16];
};

static int port = 18733, gid_index = 1, nmsg = 16;

static int die(const char *what)
{
	fprintf(stderr, "xrc_pair: FAIL: %s (%s)\n", what, strerror(errno));
	return 1;
}

static uint8_t pattern(int q, int m, int i)
{
	return (uint8_t)(q * 131 + m * 31 + i * 7 + 1);
}

static int msg_len(int m)
{
	return 1 + (m * 997) % MSG_MAX;
}

static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	time_t end = time(NULL) + WAIT_SEC;

	while (time(NULL) < end) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n;
	}
	errno = ETIMEDOUT;
	return -1;
}

static int modify(struct ibv_qp *qp, const struct info *peer, int i, bool target)
{
	struct ibv_qp_attr a = {0};

	if (pu_qp_init(qp))
		return -1;
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qpn[i];
	a.rq_psn = 0x100;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
	memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
	int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	if (target)
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	if (ibv_modify_qp(qp, &a, mask))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x100;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT;
	if (!target)
		mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	return ibv_modify_qp(qp, &a, mask) ? -1 : 0;
}

struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	struct info me;
};

static int dev_open(struct dev *d, size_t len)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	union ibv_gid gid;

	if (!list || !list[0])
		return -1;
	d->ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!d->ctx)
		return -1;
	d->pd = ibv_alloc_pd(d->ctx);
	d->cq = ibv_create_cq(d->ctx, 256, NULL, NULL, 0);
	d->buf = calloc(1, len);
	if (!d->pd || !d->cq || !d->buf)
		return -1;
	d->mr =
	    ibv_reg_mr(d->pd, d->buf, len,
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!d->mr || ibv_query_gid(d->ctx, 1, gid_index, &gid))
		return -1;
	memcpy(d->me.gid, gid.raw, 16);
	return 0;
}

static int server(int fd)
{
	char path[] = "/tmp/rocemu-xrc-pair-XXXXXX";
	size_t slots = (size_t)NQP * (size_t)nmsg;
	struct dev d = {0};
	struct info peer;
	struct ibv_qp *qp[NQP], *opened;
	struct ibv_srq *srq;
	struct ibv_xrcd *xrcd;
	struct ibv_cq *srq_cq;
	struct ibv_wc wc;
	int got[NQP] = {0}, ffd;

	if (dev_open(&d, WIN_LEN + slots * MSG_MAX))
		return die("device, PD, CQ or MR");
	ffd = mkstemp(path);
	if (ffd < 0)
		return die("mkstemp");
	unlink(path);
	struct ibv_xrcd_init_attr xa = {.comp_mask =
					    IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
					.fd = ffd,
					.oflags = O_CREAT};
	xrcd = ibv_open_xrcd(d.ctx, &xa);
	if (!xrcd)
		return die("ibv_open_xrcd");
	/* the file now names the domain: opened again without O_CREAT, the same one */
	xa.oflags = 0;
	struct ibv_xrcd *again = ibv_open_xrcd(d.ctx, &xa);
	if (!again)
		return die("ibv_open_xrcd of the same file");
	srq_cq = ibv_create_cq(d.ctx, (int)slots + 8, NULL, NULL, 0);
	struct ibv_srq_init_attr_ex sa = {.comp_mask =
					      IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
					      IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ,
					  .attr = {.max_wr = (uint32_t)slots, .max_sge = 1},
					  .srq_type = IBV_SRQT_XRC,
					  .pd = d.pd,
					  .xrcd = again,
					  .cq = srq_cq};
	srq = srq_cq ? ibv_create_srq_ex(d.ctx, &sa) : NULL;
	if (!srq || ibv_get_srq_num(srq, &d.me.srqn))
		return die("XRC SRQ");
	for (int i = 0; i < NQP; i++) {
		struct ibv_qp_init_attr_ex qa = {
		    .qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = xrcd};

		qp[i] = ibv_create_qp_ex(d.ctx, &qa);
		if (!qp[i])
			return die("XRC_RECV QP");
		d.me.qpn[i] = qp[i]->qp_num;
	}
	struct ibv_qp_open_attr oa = {.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
						   IBV_QP_OPEN_ATTR_TYPE,
				      .qp_num = qp[1]->qp_num,
				      .xrcd = xrcd,
				      .qp_type = IBV_QPT_XRC_RECV};
	opened = ibv_open_qp(d.ctx, &oa);
	if (!opened)
		return die("ibv_open_qp");
	for (size_t s = 0; s < slots; s++) {
		struct ibv_sge sge = {(uintptr_t)(d.buf + WIN_LEN + s * MSG_MAX), MSG_MAX,
				      d.mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = s, .sg_list = &sge, .num_sge = 1}, *bad;

		if (ibv_post_srq_recv(srq, &wr, &bad))
			return die("ibv_post_srq_recv");
	}
	d.me.rkey = d.mr->rkey;
	d.me.win = (uintptr_t)d.buf;
	if (pu_move(fd, &d.me, sizeof(d.me), true) || pu_move(fd, &peer, sizeof(peer), false))
		return die("exchange");
	if (modify(qp[0], &peer, 0, true) || modify(opened, &peer, 1, true))
		return die("target QPs to RTS");
	if (pu_move(fd, &d.me, 1, true)) /* ready */
		return die("exchange");
	for (size_t k = 0; k < slots; k++) {
		if (poll_one(srq_cq, &wc) < 0)
			return die("a receive completion on the SRQ's CQ");
		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV) {
			fprintf(stderr, "xrc_pair: FAIL: wc status %s opcode %d\n",
				ibv_wc_status_str(wc.status), wc.opcode);
			return 1;
		}
		int q = wc.qp_num == d.me.qpn[0] ? 0 : wc.qp_num == d.me.qpn[1] ? 1 : -1;
		if (q < 0) {
			fprintf(stderr, "xrc_pair: FAIL: completion for QP %u\n", wc.qp_num);
			return 1;
		}
		int m = got[q]++;
		const uint8_t *p = d.buf + WIN_LEN + wc.wr_id * MSG_MAX;
		if ((int)wc.byte_len != msg_len(m)) {
			fprintf(stderr, "xrc_pair: FAIL: QP %d message %d: %u bytes, expected %d\n",
				q, m, wc.byte_len, msg_len(m));
			return 1;
		}
		for (int i = 0; i < msg_len(m); i++)
			if (p[i] != pattern(q, m, i)) {
				fprintf(stderr, "xrc_pair: FAIL: QP %d message %d byte %d\n", q, m,
					i);
				return 1;
			}
	}
	if (ibv_poll_cq(d.cq, 1, &wc) != 0) /* the PD's own CQ: nothing */
		return die("a completion outside the SRQ's CQ");
	uint8_t done;
	if (pu_move(fd, &done, 1, false)) /* the client WROTE and READ back */
		return die("exchange");
	for (int i = 0; i < WIN_LEN; i++)
		if (d.buf[i] != (uint8_t)(i ^ 0x5A))
			return die("the WRITE through the XRC SRQ's PD");
	printf("server: %d + %d messages through SRQ %u, WRITE checked\n", got[0], got[1],
	       d.me.srqn);
	if (ibv_destroy_qp(opened) || ibv_destroy_qp(qp[0]) || ibv_destroy_qp(qp[1]) ||
	    ibv_destroy_srq(srq) || ibv_close_xrcd(again) || ibv_close_xrcd(xrcd))
		return die("teardown");
	close(ffd);
	printf("session 1: PASS\n");
	return 0;
}

static int client(int fd)
{
	struct dev d = {0};
	struct info peer;
	struct ibv_qp *qp[NQP];
	struct ibv_wc wc;
	uint8_t ready;

	if (dev_open(&d, (size_t)NQP * MSG_MAX + 2 * WIN_LEN))
		return die("device, PD, CQ or MR");
	for (int i = 0; i < NQP; i++) {
		struct ibv_qp_init_attr_ex qa = {
		    .qp_type = IBV_QPT_XRC_SEND,
		    .comp_mask = IBV_QP_INIT_ATTR_PD | (i ? IBV_QP_INIT_ATTR_SEND_OPS_FLAGS : 0),
		    .pd = d.pd,
		    .send_cq = d.cq,
		    .cap = {.max_send_wr = 64, .max_send_sge = 1},
		    .send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE};

		qp[i] = ibv_create_qp_ex(d.ctx, &qa);
		if (!qp[i])
			return die("XRC_SEND QP");
		d.me.qpn[i] = qp[i]->qp_num;
	}
	if (pu_move(fd, &peer, sizeof(peer), false) || pu_move(fd, &d.me, sizeof(d.me), true))
		return die("exchange");
	for (int i = 0; i < NQP; i++)
		if (modify(qp[i], &peer, i, false))
			return die("initiator QPs to RTS");
	if (pu_move(fd, &ready, 1, false))
		return die("exchange");
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(qp[1]);
	if (!qx)
		return die("ibv_qp_to_qp_ex");
	for (int m = 0; m < nmsg; m++) {
		for (int q = 0; q < NQP; q++) {
			uint8_t *p = d.buf + (size_t)q * MSG_MAX;
			struct ibv_sge sge = {(uintptr_t)p, (uint32_t)msg_len(m), d.mr->lkey};

			for (int i = 0; i < msg_len(m); i++)
				p[i] = pattern(q, m, i);
			if (q == 0) {
				struct ibv_send_wr wr = {.wr_id = (uint64_t)m,
							 .sg_list = &sge,
							 .num_sge = 1,
							 .opcode = IBV_WR_SEND,
							 .send_flags = IBV_SEND_SIGNALED},
						   *bad;
				wr.qp_type.xrc.remote_srqn = peer.srqn;
				if (ibv_post_send(qp[0], &wr, &bad))
					return die("ibv_post_send");
			} else {
				ibv_wr_start(qx);
				qx->wr_id = (uint64_t)m;
				qx->wr_flags = IBV_SEND_SIGNALED;
				ibv_wr_send(qx);
				ibv_wr_set_xrc_srqn(qx, peer.srqn);
				ibv_wr_set_sge(qx, sge.lkey, sge.addr, sge.length);
				if (ibv_wr_complete(qx))
					return die("ibv_wr_complete");
			}
			/* one at a time per QP: the buffer is rewritten next round */
			if (poll_one(d.cq, &wc) < 0 || wc.status != IBV_WC_SUCCESS) {
				fprintf(stderr, "xrc_pair: FAIL: QP %d message %d: %s\n", q, m,
					ibv_wc_status_str(wc.status));
				return 1;
			}
		}
	}
	/* a WRITE into the server's region (checked in the SRQ's PD), then READ back */
	uint8_t *w = d.buf + (size_t)NQP * MSG_MAX, *r = w + WIN_LEN;
	for (int i = 0; i < WIN_LEN; i++)
		w[i] = (uint8_t)(i ^ 0x5A);
	ibv_wr_start(qx);
	qx->wr_id = 100;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qx, peer.rkey, peer.win);
	ibv_wr_set_xrc_srqn(qx, peer.srqn);
	ibv_wr_set_sge(qx, d.mr->lkey, (uintptr_t)w, WIN_LEN);
	if (ibv_wr_complete(qx) || poll_one(d.cq, &wc) < 0 || wc.status != IBV_WC_SUCCESS)
		return die("RDMA WRITE");
	struct ibv_sge sge = {(uintptr_t)r, WIN_LEN, d.mr->lkey};
	struct ibv_send_wr rd = {.wr_id = 101,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_READ,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	rd.wr.rdma.remote_addr = peer.win;
	rd.wr.rdma.rkey = peer.rkey;
	rd.qp_type.xrc.remote_srqn = peer.srqn;
	if (ibv_post_send(qp[0], &rd, &bad) || poll_one(d.cq, &wc) < 0 ||
	    wc.status != IBV_WC_SUCCESS || memcmp(r, w, WIN_LEN))
		return die("RDMA READ back");
	if (pu_move(fd, &ready, 1, true))
		return die("exchange");
	for (int i = 0; i < NQP; i++)
		if (ibv_destroy_qp(qp[i]))
			return die("teardown");
	printf("client: %d messages on each of %d XRC_SEND QPs, WRITE and READ: PASS\n", nmsg, NQP);
	return 0;
}

int main(int argc, char **argv)
{
	int c, rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt(argc, argv, "p:g:n:l:")) != -1) {
		if (c == 'n') {
			nmsg = atoi(optarg);
		} else if (!pu_option(c, optarg, &port, &gid_index)) {
			fprintf(stderr, "usage: %s [-p PORT] [-g GID] [-n N] [SERVER]\n", argv[0]);
			return 2;
		}
	}
	if (nmsg < 1 || nmsg > 256)
		return 2;
	rc = pu_run(optind < argc ? argv[optind] : NULL, port, client, server);
	return rc < 0 ? die("TCP") : rc;
}
