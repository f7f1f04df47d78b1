/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers of the two-process checkers that pair_check.sh runs as two hosts
 * (rereg_pair.c, xrc_pair.c): their TCP control channel and the first step
 * of their QPs. Plain C and libibverbs, no cmocka (see test_util.h for the
 * in-process tests).
 */
#ifndef ROCEMU_TESTS_VERBS_PAIR_UTIL_H
#define ROCEMU_TESTS_VERBS_PAIR_UTIL_H

#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>

/* All n bytes written to (out) or read from fd: 0, else -1. */
static inline int pu_move(int fd, void *p, size_t n, bool out)
{
	for (ssize_t r; n; p = (char *)p + r, n -= (size_t)r) {
		r = out ? write(fd, p, n) : read(fd, p, n);
		if (r <= 0)
			return -1;
	}
	return 0;
}

/* The control connection: to server (an IPv4 address) on port, tried for
 * 60 s while it does not listen yet; or, server NULL, the one peer accepted
 * on port. The socket, else -1. */
static inline int pu_control(const char *server, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd, one = 1;

	if (server) {
		if (inet_pton(AF_INET, server, &a.sin_addr) != 1)
			return -1;
		for (int i = 0; i < 600; i++) {
			fd = socket(AF_INET, SOCK_STREAM, 0);
			if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
				return fd;
			close(fd);
			usleep(100000);
		}
		return -1;
	}
	int s = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 1))
		return -1;
	fd = accept(s, NULL, NULL);
	close(s);
	return fd;
}

/* One of the options pair_check.sh gives every checker: -p PORT (of the
 * control connection), -g GID (the GID index), -l N (sessions: each checker
 * here runs one). false when c is none of them. */
static inline bool pu_option(int c, const char *arg, int *port, int *gid_index)
{
	switch (c) {
	case 'p':
		*port = atoi(arg);
		return true;
	case 'g':
		*gid_index = atoi(arg);
		return true;
	case 'l':
		return true;
	default:
		return false;
	}
}

/* The control connection (pu_control) and our side run on it: client when
 * peer names the server, else server. Its result, or -1 when no control
 * connection was made. */
static inline int pu_run(const char *peer, int port, int (*client)(int fd), int (*server)(int fd))
{
	int fd = pu_control(peer, port), rc;

	if (fd < 0)
		return -1;
	rc = peer ? client(fd) : server(fd);
	close(fd);
	return rc;
}

/* qp to INIT on port 1, open to the peer's RDMA READ and WRITE: 0, else -1. */
static inline int pu_qp_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags =
				    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};

	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
		   ? -1
		   : 0;
}

/* An RC qp from RESET through INIT and RTR to RTS toward the peer's QP dqpn
 * at gid (sgid gid_index on port 1, path MTU 1024), both PSNs psn, rd_atomic
 * reads and atomics in flight each way, ACK timeout 4.096 us * 2^timeout,
 * seven retries: 0, else -1. */
static inline int pu_qp_connect(struct ibv_qp *qp, const uint8_t gid[16], int gid_index,
				uint32_t dqpn, uint32_t psn, uint8_t rd_atomic, uint8_t timeout)
{
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_RTR,
	    .path_mtu = IBV_MTU_1024,
	    .dest_qp_num = dqpn,
	    .rq_psn = psn,
	    .max_dest_rd_atomic = rd_atomic,
	    .min_rnr_timer = 12,
	    .ah_attr = {.is_global = 1,
			.grh = {.sgid_index = (uint8_t)gid_index, .hop_limit = 64},
			.port_num = 1}};

	if (pu_qp_init(qp))
		return -1;
	memcpy(a.ah_attr.grh.dgid.raw, gid, 16);
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS,
				 .sq_psn = psn,
				 .timeout = timeout,
				 .retry_cnt = 7,
				 .rnr_retry = 7,
				 .max_rd_atomic = rd_atomic};
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				 IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC)
		   ? -1
		   : 0;
}

#endif
