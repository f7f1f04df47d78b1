/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One side of an RC transfer between two processes (issue 5 with real Linux
 * queueing: run by netem_test.sh in network namespaces, rocemu ports on
 * af_packet, tc netem on a bridge in between). The two sides meet through
 * files in a shared directory (QPN, rkey and address of the server's atomic
 * counter). The client SENDs `count` messages whose bytes depend on their
 * index, then runs `count` FETCH_ADDs on the server's counter; the server
 * checks every message arrives exactly once, in order, byte-identical, and
 * that the counter moved by exactly `count`. Exit 0 = all checks passed.
 *
 *   transport_netem_peer server|client PORTSPEC MYIP/PREFIX PEERIP DIR COUNT SIZE
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../emulator/wire/roce_wire.h"
#include "harness.h"

#define DEPTH 64

static void pattern(uint8_t *p, uint32_t len, uint64_t idx)
{
	h_fill(p, len, (uint32_t)(idx * 2654435761u + 17));
}

static int write_info(const char *dir, const char *who, uint32_t qpn, uint32_t rkey, uint64_t va)
{
	char path[512], tmp[520];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, who);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return -errno;
	fprintf(f, "%u %u %llu\n", qpn, rkey, (unsigned long long)va);
	fclose(f);
	return rename(tmp, path) ? -errno : 0;
}

static int read_info(const char *dir, const char *who, uint32_t *qpn, uint32_t *rkey, uint64_t *va)
{
	char path[512];
	unsigned long long v;

	snprintf(path, sizeof(path), "%s/%s", dir, who);
	for (int i = 0; i < 600; i++) {
		FILE *f = fopen(path, "r");

		if (f) {
			int n = fscanf(f, "%u %u %llu", qpn, rkey, &v);

			fclose(f);
			if (n == 3) {
				*va = v;
				return 0;
			}
		}
		usleep(100000);
	}
	return -ETIMEDOUT;
}

static int connect_qp(struct rocemu_engine *e, struct rocemu_qp *qp, uint32_t peer_qpn,
		      const uint8_t dgid[16])
{
	struct ibv_qp_attr a = {0};
	int rc;

	(void)e;
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags =
	    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	rc = rocemu_qp_modify(qp, &a,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc)
		return rc;
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer_qpn;
	a.rq_psn = 0xFFFF00; /* both directions wrap early on */
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.sgid_index = 1;
	memcpy(a.ah_attr.grh.dgid.raw, dgid, 16);
	rc = rocemu_qp_modify(qp, &a,
			      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc)
		return rc;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0xFFFF00;
	a.timeout = 12; /* ~17 ms */
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 16;
	return rocemu_qp_modify(qp, &a,
				IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				    IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int poll_one(struct rocemu_cq *cq, struct rocemu_wc *wc)
{
	int n = h_poll(cq, wc);

	if (n != 1)
		return -ETIMEDOUT;
	if (wc->status != IBV_WC_SUCCESS) {
		fprintf(stderr, "completion wr %llu status %d\n", (unsigned long long)wc->wr_id,
			wc->status);
		return -EIO;
	}
	return 0;
}

/* Registered buffers: freed after the engine (which deregisters them) is gone. */
static void *owned[3];

static void *own(unsigned i, void *p)
{
	owned[i] = p;
	return p;
}

static int run_server(struct rocemu_qp *qp, struct node *n, uint32_t count, uint32_t size,
		      uint64_t *counter)
{
	uint8_t *bufs = own(0, malloc((size_t)DEPTH * size)), *want = own(1, malloc(size));
	struct rocemu_mr *mr;
	struct rocemu_mr_info info;
	struct rocemu_wc wc;

	if (!bufs || !want ||
	    rocemu_mr_reg(n->pd, bufs, (size_t)DEPTH * size, (uintptr_t)bufs,
			  IBV_ACCESS_LOCAL_WRITE, &mr))
		return -ENOMEM;
	rocemu_mr_info(mr, &info);
	for (uint32_t i = 0; i < DEPTH; i++) {
		struct ibv_sge sge = {(uintptr_t)bufs + (size_t)i * size, size, info.lkey};

		if (rocemu_qp_post_recv(qp, i, &sge, 1))
			return -EIO;
	}
	/* count data messages, then the client's "done" (0 bytes) after its atomics */
	for (uint64_t i = 0; i <= count; i++) {
		uint32_t slot = (uint32_t)(i % DEPTH);
		struct ibv_sge sge = {(uintptr_t)bufs + (size_t)slot * size, size, info.lkey};

		if (poll_one(n->rcq, &wc))
			return -EIO;
		if (wc.wr_id != slot) {
			fprintf(stderr, "message %llu landed in WQE %llu: out of order\n",
				(unsigned long long)i, (unsigned long long)wc.wr_id);
			return -EIO;
		}
		if (i == count) {
			if (wc.byte_len != 0) {
				fprintf(stderr, "extra message after the last one\n");
				return -EIO;
			}
			break;
		}
		pattern(want, size, i);
		if (wc.byte_len != size || memcmp(want, bufs + (size_t)slot * size, size)) {
			fprintf(stderr, "message %llu corrupted (len %u)\n", (unsigned long long)i,
				wc.byte_len);
			return -EIO;
		}
		if (rocemu_qp_post_recv(qp, slot, &sge, 1))
			return -EIO;
	}
	if (*counter != count) {
		fprintf(stderr, "atomic counter %llu, expected %u\n", (unsigned long long)*counter,
			count);
		return -EIO;
	}
	printf("server: %u messages exactly once, in order, intact; counter %llu\n", count,
	       (unsigned long long)*counter);
	return 0;
}

static int run_client(struct rocemu_qp *qp, struct node *n, uint32_t count, uint32_t size,
		      uint32_t rkey, uint64_t va)
{
	uint8_t *bufs = own(0, malloc((size_t)DEPTH * size));
	uint64_t *orig = own(1, calloc(DEPTH, 8));
	struct rocemu_mr *mr, *mo;
	struct rocemu_mr_info info, io;
	struct rocemu_wc wc;
	uint64_t posted = 0, done = 0;

	if (!bufs || !orig ||
	    rocemu_mr_reg(n->pd, bufs, (size_t)DEPTH * size, (uintptr_t)bufs, 0, &mr) ||
	    rocemu_mr_reg(n->pd, orig, DEPTH * 8, (uintptr_t)orig, IBV_ACCESS_LOCAL_WRITE, &mo))
		return -ENOMEM;
	rocemu_mr_info(mr, &info);
	rocemu_mr_info(mo, &io);
	/* SENDs, DEPTH in flight (the server keeps DEPTH receives posted; RNR covers the rest) */
	while (done < count) {
		while (posted < count && posted - done < DEPTH / 2) {
			uint32_t slot = (uint32_t)(posted % DEPTH);
			struct ibv_sge sge = {(uintptr_t)bufs + (size_t)slot * size, size,
					      info.lkey};
			struct rocemu_send_wr wr = {.wr_id = posted,
						    .opcode = IBV_WR_SEND,
						    .send_flags = IBV_SEND_SIGNALED,
						    .sg_list = &sge,
						    .num_sge = 1};

			pattern(bufs + (size_t)slot * size, size, posted);
			if (rocemu_qp_post_send(qp, &wr))
				return -EIO;
			posted++;
		}
		if (poll_one(n->scq, &wc) || wc.wr_id != done)
			return -EIO;
		done++;
	}
	/* FETCH_ADDs: each returns the count before it, exactly once each */
	for (uint64_t i = 0; i < count; i++) {
		struct ibv_sge sge = {(uintptr_t)&orig[0], 8, io.lkey};
		struct rocemu_send_wr wr = {.wr_id = i,
					    .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
					    .send_flags = IBV_SEND_SIGNALED,
					    .sg_list = &sge,
					    .num_sge = 1,
					    .remote_addr = va,
					    .rkey = rkey,
					    .compare_add = 1};

		if (rocemu_qp_post_send(qp, &wr) || poll_one(n->scq, &wc))
			return -EIO;
		if (orig[0] != i) {
			fprintf(stderr, "atomic %llu returned %llu\n", (unsigned long long)i,
				(unsigned long long)orig[0]);
			return -EIO;
		}
	}
	{
		struct rocemu_send_wr wr = {
		    .wr_id = 1 << 30, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};

		if (rocemu_qp_post_send(qp, &wr) || poll_one(n->scq, &wc))
			return -EIO;
	}
	printf("client: %u messages and %u atomics completed; retransmitted %llu, timeouts %llu\n",
	       count, count, (unsigned long long)h_counter(n->e, "retransmit_packets"),
	       (unsigned long long)h_counter(n->e, "retransmit_timeouts"));
	return 0;
}

int main(int argc, char **argv)
{
	struct rocemu_port_config cfg;
	struct node n = {0};
	struct rocemu_qp_init init = {.qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = DEPTH * 2,
					      .max_recv_wr = DEPTH * 2,
					      .max_send_sge = 1,
					      .max_recv_sge = 1}};
	struct rocemu_qp *qp;
	struct rocemu_mr *mc;
	struct rocemu_mr_info ic;
	uint64_t *counter = own(2, calloc(1, 8));
	uint32_t peer_qpn, peer_rkey, count, size;
	uint64_t peer_va;
	uint8_t dgid[16];
	struct in_addr peer;
	char err[256];
	bool server;
	int rc;

	if (argc != 8) {
		fprintf(stderr,
			"usage: %s server|client PORTSPEC MYIP/PREFIX PEERIP DIR COUNT SIZE\n",
			argv[0]);
		return 2;
	}
	server = !strcmp(argv[1], "server");
	count = (uint32_t)atoi(argv[6]);
	size = (uint32_t)atoi(argv[7]);
	if (inet_pton(AF_INET, argv[4], &peer) != 1)
		return 2;
	roce_gid_from_ipv4(dgid, peer.s_addr);
	rocemu_port_config_init(&cfg);
	if (rocemu_port_config_set(&cfg, "port", argv[2], err, sizeof(err)) ||
	    rocemu_port_config_set(&cfg, "ip", argv[3], err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	if (rocemu_engine_create(&cfg, &n.e, err, sizeof(err)) < 0) {
		fprintf(stderr, "engine: %s\n", err);
		return 77;
	}
	if (rocemu_pd_alloc(n.e, &n.pd) ||
	    rocemu_cq_create(n.e, DEPTH * 4, NULL, NULL, NULL, &n.scq) ||
	    rocemu_cq_create(n.e, DEPTH * 4, NULL, NULL, NULL, &n.rcq))
		return 1;
	init.send_cq = n.scq;
	init.recv_cq = n.rcq;
	if (rocemu_qp_create(n.pd, &init, &qp) ||
	    rocemu_mr_reg(n.pd, counter, 8, (uintptr_t)counter,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC, &mc))
		return 1;
	rocemu_mr_info(mc, &ic);
	if (write_info(argv[5], server ? "server" : "client", rocemu_qp_num(qp), ic.rkey,
		       (uintptr_t)counter) ||
	    read_info(argv[5], server ? "client" : "server", &peer_qpn, &peer_rkey, &peer_va)) {
		fprintf(stderr, "rendezvous in %s failed\n", argv[5]);
		return 1;
	}
	if (connect_qp(n.e, qp, peer_qpn, dgid)) {
		fprintf(stderr, "connect failed\n");
		return 1;
	}
	/* second rendezvous: both QPs are in RTS before anything is sent (a
	 * request reaching a QP still in INIT would be dropped, as on hardware) */
	{
		char me[32], other[32];
		uint32_t x, y;
		uint64_t z;

		snprintf(me, sizeof(me), "%s.ready", server ? "server" : "client");
		snprintf(other, sizeof(other), "%s.ready", server ? "client" : "server");
		if (write_info(argv[5], me, 0, 0, 0) || read_info(argv[5], other, &x, &y, &z))
			return 1;
	}
	rc = server ? run_server(qp, &n, count, size, counter)
		    : run_client(qp, &n, count, size, peer_rkey, peer_va);
	/* third rendezvous instead of a pause: neither engine goes away before
	 * the other is done (the client is done once every completion is in,
	 * so the server's last ACKs have reached it) */
	{
		char me[32], other[32];
		uint32_t x, y;
		uint64_t z;

		snprintf(me, sizeof(me), "%s.done", server ? "server" : "client");
		snprintf(other, sizeof(other), "%s.done", server ? "client" : "server");
		if (write_info(argv[5], me, 0, 0, 0) || read_info(argv[5], other, &x, &y, &z))
			rc = 1;
	}
	{
		struct rocemu_counter c[128];
		unsigned k = rocemu_engine_counters(n.e, c, 128);

		fprintf(stderr, "%s engine:", argv[1]);
		for (unsigned i = 0; i < k && i < 128; i++)
			if (c[i].value)
				fprintf(stderr, " %s=%llu", c[i].name,
					(unsigned long long)c[i].value);
		fprintf(stderr, "\n%s port:", argv[1]);
		k = rocemu_port_counters(rocemu_engine_port(n.e), c, 128);
		for (unsigned i = 0; i < k && i < 128; i++)
			if (c[i].value)
				fprintf(stderr, " %s=%llu", c[i].name,
					(unsigned long long)c[i].value);
		fprintf(stderr, "\n");
	}
	rocemu_engine_destroy(n.e);
	for (unsigned i = 0; i < 3; i++)
		free(owned[i]);
	return rc ? 1 : 0;
}
