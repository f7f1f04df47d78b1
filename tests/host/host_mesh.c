/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * host_mesh: one rank of an all-to-all RC mesh, a plain verbs program (the
 * system's libibverbs headers; rocemu's library under `rocemu run`).
 *
 *   host_mesh --dir D --rank R --nprocs N [--qps K] [--msgs M] [--size S]
 *             [--gid-index G] [--wait-s T] [--hold] [--timeout E]
 *
 * Rank R makes K RC QPs toward every other rank, posts M receives on each,
 * and publishes its GID, QPNs and PSNs in D/R.info; once every rank's file
 * is there it connects its QPs (RTR, RTS) and says so in D/R.ready. Once
 * every rank is ready (as an MPI job's ranks connect, then meet in a
 * barrier: a QP not yet in RTR drops what arrives, and that costs its
 * sender a retry timeout), it sends M messages of S bytes on every QP and
 * checks every byte of every message it receives (a pattern of sender,
 * receiver, QP, message and byte index). Then D/R.done, and it exits only
 * when every rank is done, so no peer still waits for an acknowledgement
 * from it; with --hold, also only once D/release exists (its QPs stay for
 * the caller to read their counters).
 * It waits in ibv_get_cq_event, not by spinning: many ranks on a few cores
 * cannot starve each other. Bounded counts, no durations; a wait longer
 * than --wait-s seconds (default 300) is a failure, said on stderr.
 * Exit 0: every message sent, received and checked, no error completion.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

struct peer_qp {
	struct ibv_qp *qp;
	int peer, index;
	uint32_t remote_qpn, remote_psn;
	unsigned recvd, sent;
};

static int rank, nprocs, qps = 4, msgs = 16, size = 2048, gid_index = 1, wait_s = 300, hold;
/* The local ACK timeout, 4.096 us x 2^E: 17 is ~0.5 s, for a busy 2-core
 * machine that may not run the peer at once; with retry_cnt 7 a QP gives up
 * after 8 of them without an ACK. */
static int ack_timeout = 17;
static const char *dir;

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Byte i of message m from rank `from` to rank `to` on QP index q. */
static uint8_t pattern(int from, int to, int q, unsigned m, unsigned i)
{
	uint32_t x = (uint32_t)from * 0x9e3779b1u ^ (uint32_t)to * 0x85ebca6bu ^
		     (uint32_t)q * 0xc2b2ae35u ^ m * 0x27d4eb2fu ^ i * 0x165667b1u;

	x ^= x >> 15;
	x *= 0x2c1b3c6du;
	x ^= x >> 12;
	return (uint8_t)x;
}

static uint32_t psn_of(int from, int to, int q)
{
	return ((uint32_t)from * 131u + (uint32_t)to * 17u + (uint32_t)q * 7u) & 0xffffff;
}

static int wait_file(const char *path)
{
	double end = now_s() + wait_s;

	while (access(path, R_OK) != 0) {
		if (now_s() > end) {
			fprintf(stderr, "rank %d: %s did not appear within %d s\n", rank, path,
				wait_s);
			return -1;
		}
		usleep(10000);
	}
	return 0;
}

static int publish(const char *suffix, const char *text);

/* Every rank's D/R.SUFFIX (a barrier). */
static int wait_all(const char *suffix)
{
	char path[512];

	for (int p = 0; p < nprocs; p++) {
		snprintf(path, sizeof(path), "%s/%d.%s", dir, p, suffix);
		if (wait_file(path))
			return -1;
	}
	return 0;
}

static int publish(const char *suffix, const char *text)
{
	char path[512], tmp[600];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%d.%s", dir, rank, suffix);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f || fputs(text, f) < 0 || fclose(f))
		return -1;
	return rename(tmp, path);
}

/* RESET to INIT: receives may be posted from INIT on (IBA 10.8.2). */
static int modify_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.pkey_index = 0,
				.port_num = 1,
				.qp_access_flags =
				    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE};

	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static int modify_rts(struct peer_qp *p, const union ibv_gid *dgid, int mtu)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = (enum ibv_mtu)mtu;
	a.dest_qp_num = p->remote_qpn;
	a.rq_psn = p->remote_psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *dgid;
	a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(p->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = (uint8_t)ack_timeout;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = psn_of(rank, p->peer, p->index);
	a.max_rd_atomic = 1;
	return ibv_modify_qp(p->qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static void usage(void)
{
	fprintf(stderr, "usage: host_mesh --dir D --rank R --nprocs N [--qps K] [--msgs M] "
			"[--size S] [--gid-index G] [--wait-s T] [--hold] [--timeout E]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"dir", 1, 0, 'd'},	      {"rank", 1, 0, 'r'},   {"nprocs", 1, 0, 'n'},
	    {"qps", 1, 0, 'q'},	      {"msgs", 1, 0, 'm'},   {"size", 1, 0, 's'},
	    {"gid-index", 1, 0, 'g'}, {"wait-s", 1, 0, 'w'}, {"hold", 0, 0, 'H'},
	    {"timeout", 1, 0, 't'},   {0, 0, 0, 0}};
	struct ibv_device **devs;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_port_attr pa;
	union ibv_gid gid;
	struct peer_qp *pq;
	uint8_t *sbuf, *rbuf;
	char *info, path[512];
	size_t info_len = 0, n_qp, per_qp;
	unsigned done_send = 0, done_recv = 0, want, bad = 0;
	int c, ndev;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			dir = optarg;
			break;
		case 'r':
			rank = atoi(optarg);
			break;
		case 'n':
			nprocs = atoi(optarg);
			break;
		case 'q':
			qps = atoi(optarg);
			break;
		case 'm':
			msgs = atoi(optarg);
			break;
		case 's':
			size = atoi(optarg);
			break;
		case 'g':
			gid_index = atoi(optarg);
			break;
		case 'w':
			wait_s = atoi(optarg);
			break;
		case 'H':
			hold = 1;
			break;
		case 't':
			ack_timeout = atoi(optarg);
			break;
		default:
			usage();
		}
	}
	if (!dir || nprocs < 2 || rank < 0 || rank >= nprocs || qps < 1 || msgs < 1 || size < 1 ||
	    ack_timeout < 1 || ack_timeout > 31)
		usage();
	n_qp = (size_t)(nprocs - 1) * (size_t)qps;
	per_qp = (size_t)msgs * (size_t)size;
	devs = ibv_get_device_list(&ndev);
	if (!devs || ndev < 1 || !(ctx = ibv_open_device(devs[0]))) {
		fprintf(stderr, "rank %d: no RDMA device\n", rank);
		return 1;
	}
	if (ibv_query_port(ctx, 1, &pa) || ibv_query_gid(ctx, 1, gid_index, &gid)) {
		fprintf(stderr, "rank %d: cannot query port/GID %d\n", rank, gid_index);
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	ch = ibv_create_comp_channel(ctx);
	cq = pd && ch ? ibv_create_cq(ctx, (int)(2 * n_qp * (size_t)msgs + 16), NULL, ch, 0) : NULL;
	sbuf = calloc(n_qp, per_qp);
	rbuf = calloc(n_qp, per_qp);
	pq = calloc(n_qp, sizeof(*pq));
	info = malloc(64 + n_qp * 40);
	if (!cq || !sbuf || !rbuf || !pq || !info) {
		fprintf(stderr, "rank %d: cannot set up (%s)\n", rank, strerror(errno));
		return 1;
	}
	mr = ibv_reg_mr(pd, rbuf, n_qp * per_qp, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_mr *smr = ibv_reg_mr(pd, sbuf, n_qp * per_qp, 0);
	if (!mr || !smr) {
		fprintf(stderr, "rank %d: ibv_reg_mr: %s\n", rank, strerror(errno));
		return 1;
	}
	info_len +=
	    (size_t)sprintf(info, "%016" PRIx64 " %016" PRIx64 "\n",
			    be64toh(gid.global.subnet_prefix), be64toh(gid.global.interface_id));
	for (size_t k = 0; k < n_qp; k++) {
		struct ibv_qp_init_attr ia = {.send_cq = cq,
					      .recv_cq = cq,
					      .qp_type = IBV_QPT_RC,
					      .cap = {.max_send_wr = (uint32_t)msgs,
						      .max_recv_wr = (uint32_t)msgs,
						      .max_send_sge = 1,
						      .max_recv_sge = 1}};
		int p = (int)(k / (size_t)qps);

		pq[k].peer = p >= rank ? p + 1 : p;
		pq[k].index = (int)(k % (size_t)qps);
		pq[k].qp = ibv_create_qp(pd, &ia);
		if (!pq[k].qp) {
			fprintf(stderr, "rank %d: ibv_create_qp %zu: %s\n", rank, k,
				strerror(errno));
			return 1;
		}
		if (modify_init(pq[k].qp)) {
			fprintf(stderr, "rank %d: ibv_modify_qp INIT: %s\n", rank, strerror(errno));
			return 1;
		}
		for (unsigned m = 0; m < (unsigned)msgs; m++) {
			uint8_t *b = sbuf + k * per_qp + (size_t)m * (size_t)size;
			struct ibv_sge sge = {
			    .addr = (uintptr_t)(rbuf + k * per_qp + (size_t)m * (size_t)size),
			    .length = (uint32_t)size,
			    .lkey = mr->lkey};
			struct ibv_recv_wr wr = {.wr_id = k << 20 | m,
						 .sg_list = &sge,
						 .num_sge = 1},
					   *badw;

			for (unsigned i = 0; i < (unsigned)size; i++)
				b[i] = pattern(rank, pq[k].peer, pq[k].index, m, i);
			int rc = ibv_post_recv(pq[k].qp, &wr, &badw);

			if (rc) {
				fprintf(stderr, "rank %d: ibv_post_recv: %s\n", rank, strerror(rc));
				return 1;
			}
		}
		info_len +=
		    (size_t)sprintf(info + info_len, "%d %d %u %u\n", pq[k].peer, pq[k].index,
				    pq[k].qp->qp_num, psn_of(rank, pq[k].peer, pq[k].index));
	}
	if (publish("info", info)) {
		fprintf(stderr, "rank %d: cannot write %s: %s\n", rank, dir, strerror(errno));
		return 1;
	}
	/* every rank's QPNs, then connect */
	for (int p = 0; p < nprocs; p++) {
		FILE *f;
		uint64_t hi, lo;
		union ibv_gid dgid;
		int to, q;
		unsigned qpn, psn;

		if (p == rank)
			continue;
		snprintf(path, sizeof(path), "%s/%d.info", dir, p);
		if (wait_file(path) || !(f = fopen(path, "r")) ||
		    fscanf(f, "%" SCNx64 " %" SCNx64, &hi, &lo) != 2) {
			fprintf(stderr, "rank %d: cannot read %s\n", rank, path);
			return 1;
		}
		dgid.global.subnet_prefix = htobe64(hi);
		dgid.global.interface_id = htobe64(lo);
		while (fscanf(f, "%d %d %u %u", &to, &q, &qpn, &psn) == 4) {
			size_t k;

			if (to != rank || q < 0 || q >= qps)
				continue;
			k = (size_t)(p > rank ? p - 1 : p) * (size_t)qps + (size_t)q;
			pq[k].remote_qpn = qpn;
			pq[k].remote_psn = psn;
			if (modify_rts(&pq[k], &dgid, pa.active_mtu)) {
				fprintf(stderr, "rank %d: connect QP to rank %d: %s\n", rank, p,
					strerror(errno));
				return 1;
			}
		}
		fclose(f);
	}
	for (size_t k = 0; k < n_qp; k++)
		if (!pq[k].remote_qpn) {
			fprintf(stderr, "rank %d: no QPN from rank %d for QP %d\n", rank,
				pq[k].peer, pq[k].index);
			return 1;
		}
	if (publish("ready", "ready\n") || wait_all("ready"))
		return 1;
	for (size_t k = 0; k < n_qp; k++) {
		for (unsigned m = 0; m < (unsigned)msgs; m++) {
			struct ibv_sge sge = {
			    .addr = (uintptr_t)(sbuf + k * per_qp + (size_t)m * (size_t)size),
			    .length = (uint32_t)size,
			    .lkey = smr->lkey};
			struct ibv_send_wr wr = {.wr_id = k << 20 | m,
						 .sg_list = &sge,
						 .num_sge = 1,
						 .opcode = IBV_WR_SEND,
						 .send_flags = IBV_SEND_SIGNALED},
					   *badw;

			int rc = ibv_post_send(pq[k].qp, &wr, &badw);

			if (rc) {
				fprintf(stderr, "rank %d: ibv_post_send: %s\n", rank, strerror(rc));
				return 1;
			}
		}
	}
	/* completions, waiting in the kernel between bursts */
	want = (unsigned)(n_qp * (size_t)msgs);
	double end = now_s() + wait_s;
	if (ibv_req_notify_cq(cq, 0))
		return 1;
	while (done_send < want || done_recv < want) {
		struct ibv_wc wc[64];
		int n = ibv_poll_cq(cq, 64, wc);

		if (n < 0) {
			fprintf(stderr, "rank %d: ibv_poll_cq failed\n", rank);
			return 1;
		}
		for (int i = 0; i < n; i++) {
			size_t k = wc[i].wr_id >> 20;
			unsigned m = wc[i].wr_id & 0xfffff;

			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "rank %d: %s completion on QP to rank %d: %s\n",
					rank, wc[i].opcode & IBV_WC_RECV ? "receive" : "send",
					pq[k].peer, ibv_wc_status_str(wc[i].status));
				return 1;
			}
			if (!(wc[i].opcode & IBV_WC_RECV)) {
				done_send++;
				continue;
			}
			const uint8_t *b = rbuf + k * per_qp + (size_t)m * (size_t)size;

			if (wc[i].byte_len != (uint32_t)size)
				bad++;
			for (unsigned j = 0; j < (unsigned)size; j++)
				if (b[j] != pattern(pq[k].peer, rank, pq[k].index, m, j)) {
					bad++;
					break;
				}
			done_recv++;
		}
		if (n > 0)
			continue;
		if (now_s() > end) {
			fprintf(stderr, "rank %d: %u/%u sends, %u/%u receives after %d s\n", rank,
				done_send, want, done_recv, want, wait_s);
			return 1;
		}
		/* nothing now: sleep until the next completion (or 1 s, to check the time) */
		struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
		if (poll(&pfd, 1, 1000) > 0) {
			struct ibv_cq *ecq;
			void *ectx;

			if (ibv_get_cq_event(ch, &ecq, &ectx) == 0)
				ibv_ack_cq_events(ecq, 1);
		}
		if (ibv_req_notify_cq(cq, 0))
			return 1;
	}
	if (bad) {
		fprintf(stderr, "rank %d: %u messages with wrong bytes\n", rank, bad);
		return 1;
	}
	printf("rank %d: %u messages sent and %u received on %zu QPs, every byte checked\n", rank,
	       done_send, done_recv, n_qp);
	fflush(stdout);
	if (publish("done", "done\n") || wait_all("done"))
		return 1;
	if (hold) {
		snprintf(path, sizeof(path), "%s/release", dir);
		if (wait_file(path))
			return 1;
	}
	for (size_t k = 0; k < n_qp; k++)
		ibv_destroy_qp(pq[k].qp);
	ibv_dereg_mr(mr);
	ibv_dereg_mr(smr);
	ibv_destroy_cq(cq);
	ibv_destroy_comp_channel(ch);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(devs);
	return 0;
}
