/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rereg_pair: two processes, the peer using a region after each kind of
 * ibv_rereg_mr(3) (issue 15.4). A plain libibverbs program run under
 * `rocemu run` by pair_check.sh.
 *
 * The server owns the region and two PDs; the client is the peer. They have
 * one RC QP pair per step (the server's end in the PD the step needs), so a
 * step that must fail leaves the others' QPs alone. Each step the server
 * re-registers (or not), tells the client which QP, R_Key and address to use
 * and whether the access must work; the client WRITEs a pattern, READs it
 * back and compares, and answers its completion status. The server then
 * checks its memory: the pattern where the WRITE had to work, its own bytes
 * untouched where it had to fail. The steps:
 *   0 as registered; 1 access without remote write (the same R_Key: remote
 *   access error); 2 access back (the same R_Key works); 3 PD moved (a QP of
 *   the old PD fails); 4 a QP of the new PD works with the same R_Key; 5
 *   translation moved (new keys: the old R_Key fails, neither buffer
 *   changes); 6 the new R_Key reaches the new buffer only; 7 all three at
 *   once; 8 PD and access at once to a read-only region (the WRITE fails).
 *
 * usage: rereg_pair [-p PORT] [-g GID] [-l SESSIONS] [SERVER]
 * Exit 0: passed; 1: failed (the reason on stderr).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "pair_util.h"

#define NSTEP	 9
#define BUF_LEN	 16384
#define XFER_LEN 5000 /* 5 packets at MTU 1024 */
#define WAIT_SEC 120
#define MR_RW	 (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define MR_RO	 (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ)

/* What the client is told before a step (qp < 0: done). */
struct step {
	int32_t qp;
	int32_t must_work;
	uint32_t rkey;
	uint32_t len;
	uint64_t addr;
};

struct hello {
	uint32_t qpn[NSTEP];
	uint8_t gid[16];
};

static int port = 18743, gid_index = 1;

static int die(const char *what)
{
	fprintf(stderr, "rereg_pair: FAIL: %s (%s)\n", what, strerror(errno));
	return 1;
}

/* INIT (remote read and write), RTR to dqpn at gid, RTS. */
static int connect_qp(struct ibv_qp *qp, const uint8_t *gid, uint32_t dqpn)
{
	return pu_qp_connect(qp, gid, gid_index, dqpn, 0x200, 2, 14);
}

struct host {
	struct ibv_context *ctx;
	struct ibv_pd *pd[2];
	struct ibv_cq *cq;
	struct ibv_qp *qp[NSTEP];
	struct hello me;
};

/* Device, two PDs, a CQ and NSTEP RC QPs, QP i in PD pd_of[i]. */
static int host_open(struct host *h, const int *pd_of)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	union ibv_gid gid;

	if (!list || !list[0])
		return -1;
	h->ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!h->ctx || ibv_query_gid(h->ctx, 1, gid_index, &gid))
		return -1;
	memcpy(h->me.gid, gid.raw, 16);
	h->pd[0] = ibv_alloc_pd(h->ctx);
	h->pd[1] = ibv_alloc_pd(h->ctx);
	h->cq = ibv_create_cq(h->ctx, 4 * NSTEP, NULL, NULL, 0);
	if (!h->pd[0] || !h->pd[1] || !h->cq)
		return -1;
	for (int i = 0; i < NSTEP; i++) {
		struct ibv_qp_init_attr ia = {.send_cq = h->cq,
					      .recv_cq = h->cq,
					      .cap = {.max_send_wr = 4,
						      .max_recv_wr = 1,
						      .max_send_sge = 1,
						      .max_recv_sge = 1},
					      .qp_type = IBV_QPT_RC};

		h->qp[i] = ibv_create_qp(h->pd[pd_of ? pd_of[i] : 0], &ia);
		if (!h->qp[i])
			return -1;
		h->me.qpn[i] = h->qp[i]->qp_num;
	}
	return 0;
}

static int meet(struct host *h, int fd, bool server)
{
	struct hello peer;

	if (server ? pu_move(fd, &h->me, sizeof(h->me), true) ||
			 pu_move(fd, &peer, sizeof(peer), false)
		   : pu_move(fd, &peer, sizeof(peer), false) ||
			 pu_move(fd, &h->me, sizeof(h->me), true))
		return -1;
	for (int i = 0; i < NSTEP; i++)
		if (connect_qp(h->qp[i], peer.gid, peer.qpn[i]))
			return -1;
	uint8_t ready = 1;
	return pu_move(fd, &ready, 1, true) || pu_move(fd, &ready, 1, false) ? -1 : 0;
}

static uint8_t pattern(int step, uint32_t i)
{
	return (uint8_t)(step * 37 + i * 11 + (i >> 9) + 1);
}

static void host_close(struct host *h)
{
	for (int i = 0; i < NSTEP; i++)
		ibv_destroy_qp(h->qp[i]);
	ibv_destroy_cq(h->cq);
	ibv_dealloc_pd(h->pd[0]);
	ibv_dealloc_pd(h->pd[1]);
	ibv_close_device(h->ctx);
}

/* The PD of each step's QP on the server. */
static const int server_pd[NSTEP] = {0, 0, 0, 0, 1, 1, 1, 0, 1};

/* Step s's re-registration; *key and *addr are what the client will use
 * (on entry: what it has). 0, or the failed call's code. */
static int step_rereg(int s, struct host *h, struct ibv_mr *mr, uint8_t **buf, uint32_t *key,
		      uint64_t *addr, bool *must_work)
{
	int rc = 0;

	*must_work = true;
	switch (s) {
	case 1: /* no remote write: the same R_Key fails */
		rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, MR_RO);
		*must_work = false;
		break;
	case 2: /* remote write again: the same R_Key works */
		rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, MR_RW);
		break;
	case 3: /* into PD 1: this step's QP is PD 0's */
		rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, h->pd[1], NULL, 0, 0);
		*must_work = false;
		break;
	case 5: /* buffer 1: new keys; the old R_Key and address fail */
		rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf[1], BUF_LEN, 0);
		*must_work = false;
		break;
	case 6: /* the new R_Key reaches buffer 1 only */
		*key = mr->rkey;
		*addr = (uintptr_t)buf[1] + 1000;
		break;
	case 7: /* all three: buffer 0, PD 0, read and write; the new keys given */
		rc = ibv_rereg_mr(mr,
				  IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD |
				      IBV_REREG_MR_CHANGE_ACCESS,
				  h->pd[0], buf[0], BUF_LEN, MR_RW);
		*key = mr->rkey;
		*addr = (uintptr_t)buf[0] + 1000;
		break;
	case 8: /* PD 1, read only at once: the WRITE fails */
		rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS, h->pd[1],
				  NULL, 0, MR_RO);
		*must_work = false;
		break;
	default: /* 0 as registered, 4 a QP of PD 1 with the same R_Key */
		break;
	}
	return rc;
}

/* After step s: the pattern where the WRITE worked, the fill everywhere else. */
static int check_bytes(int s, uint8_t **buf, uint64_t addr, bool worked)
{
	for (int b = 0; b < 2; b++)
		for (uint32_t i = 0; i < BUF_LEN; i++) {
			uintptr_t p = (uintptr_t)buf[b] + i;
			bool target = worked && p >= addr && p < addr + XFER_LEN;
			uint8_t want = target ? pattern(s, (uint32_t)(p - addr)) : b ? 0x5A : 0xA5;

			if (buf[b][i] != want) {
				fprintf(stderr,
					"rereg_pair: FAIL: step %d: buffer %d byte %u is %#x, not "
					"%#x\n",
					s, b, i, buf[b][i], want);
				return -1;
			}
		}
	return 0;
}

static int server(int fd)
{
	uint8_t *buf[2] = {aligned_alloc(4096, BUF_LEN), aligned_alloc(4096, BUF_LEN)};
	struct host h = {0};
	struct ibv_mr *mr;

	if (!buf[0] || !buf[1] || host_open(&h, server_pd))
		return die("device, PDs, CQ or QPs");
	mr = ibv_reg_mr(h.pd[0], buf[0], BUF_LEN, MR_RW);
	if (!mr || meet(&h, fd, true))
		return die("region or connection");
	uint32_t key = mr->rkey;
	uint64_t addr = (uintptr_t)buf[0] + 1000;
	for (int s = 0; s < NSTEP; s++) {
		uint32_t before = mr->rkey;
		bool must_work;
		int32_t status;

		memset(buf[0], 0xA5, BUF_LEN);
		memset(buf[1], 0x5A, BUF_LEN);
		if (step_rereg(s, &h, mr, buf, &key, &addr, &must_work))
			return die("ibv_rereg_mr");
		/* a new translation, and only that, replaces the keys */
		if ((s == 5 || s == 7) == (mr->rkey == before)) {
			fprintf(stderr, "rereg_pair: FAIL: step %d: R_Key %#x after %#x\n", s,
				mr->rkey, before);
			return 1;
		}
		struct step st = {
		    .qp = s, .must_work = must_work, .rkey = key, .len = XFER_LEN, .addr = addr};
		if (pu_move(fd, &st, sizeof(st), true) ||
		    pu_move(fd, &status, sizeof(status), false))
			return die("control");
		if ((status == IBV_WC_SUCCESS) != must_work ||
		    (!must_work && status != IBV_WC_REM_ACCESS_ERR)) {
			fprintf(stderr, "rereg_pair: FAIL: step %d: the client's WRITE: %s\n", s,
				ibv_wc_status_str((enum ibv_wc_status)status));
			return 1;
		}
		if (check_bytes(s, buf, addr, must_work))
			return 1;
		printf("step %d: %s as it must, R_Key %#x\n", s,
		       must_work ? "WRITE and READ back worked" : "remote access error", key);
	}
	struct step done = {.qp = -1};
	if (pu_move(fd, &done, sizeof(done), true))
		return die("control");
	if (ibv_dereg_mr(mr))
		return die("ibv_dereg_mr");
	host_close(&h);
	free(buf[0]);
	free(buf[1]);
	printf("session 1: PASS\n");
	return 0;
}

static int client(int fd)
{
	uint8_t *buf = aligned_alloc(4096, 2 * XFER_LEN);
	struct host h = {0};
	struct ibv_mr *mr;
	struct step st;

	if (!buf || host_open(&h, NULL))
		return die("device, PD, CQ or QPs");
	mr = ibv_reg_mr(h.pd[0], buf, 2 * XFER_LEN, MR_RW);
	if (!mr || meet(&h, fd, false))
		return die("region or connection");
	while (pu_move(fd, &st, sizeof(st), false) == 0 && st.qp >= 0 && st.qp < NSTEP) {
		struct ibv_sge sge = {(uintptr_t)buf, st.len, mr->lkey};
		struct ibv_send_wr wr = {.sg_list = &sge,
					 .num_sge = 1,
					 .opcode = IBV_WR_RDMA_WRITE,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;
		struct ibv_wc wc = {.status = IBV_WC_GENERAL_ERR};
		time_t end = time(NULL) + WAIT_SEC;

		for (uint32_t i = 0; i < st.len; i++)
			buf[i] = pattern(st.qp, i);
		wr.wr.rdma.remote_addr = st.addr;
		wr.wr.rdma.rkey = st.rkey;
		for (int op = 0; op < 2; op++) {
			int n;

			if (op == 1) { /* READ back after a WRITE that worked */
				sge.addr = (uintptr_t)buf + XFER_LEN;
				wr.opcode = IBV_WR_RDMA_READ;
				memset(buf + XFER_LEN, 0, st.len);
			}
			if (ibv_post_send(h.qp[st.qp], &wr, &bad))
				return die("ibv_post_send");
			while ((n = ibv_poll_cq(h.cq, 1, &wc)) == 0 && time(NULL) < end)
				;
			if (n != 1)
				return die("a completion");
			if (wc.status != IBV_WC_SUCCESS)
				break;
			if (op == 1 && memcmp(buf, buf + XFER_LEN, st.len))
				return die("the READ back");
		}
		int32_t status = (int32_t)wc.status;
		printf("step %d: %s\n", st.qp, ibv_wc_status_str(wc.status));
		if (pu_move(fd, &status, sizeof(status), true))
			return die("control");
		/* a failed QP flushes nothing more: it had one WR */
	}
	if (st.qp != -1)
		return die("control");
	if (ibv_dereg_mr(mr))
		return die("ibv_dereg_mr");
	host_close(&h);
	free(buf);
	printf("client: %d steps: PASS\n", NSTEP);
	return 0;
}

int main(int argc, char **argv)
{
	int c, rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt(argc, argv, "p:g:l:")) != -1)
		if (!pu_option(c, optarg, &port, &gid_index)) {
			fprintf(stderr, "usage: %s [-p PORT] [-g GID] [SERVER]\n", argv[0]);
			return 2;
		}
	rc = pu_run(optind < argc ? argv[optind] : NULL, port, client, server);
	return rc < 0 ? die("TCP") : rc;
}
