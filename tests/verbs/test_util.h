/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers shared by the in-process verbs and rdma_cm tests (cmocka): a
 * rocemu config file for the test's devices, a bounded wait for one
 * completion, socket addresses and the next rdma_cm event. Include after
 * <cmocka.h> and <infiniband/verbs.h>; the rdma_cm helpers need
 * <rdma/rdma_cma.h> included first.
 */
#ifndef ROCEMU_TESTS_VERBS_TEST_UTIL_H
#define ROCEMU_TESTS_VERBS_TEST_UTIL_H

#include <arpa/inet.h>
#include <poll.h>
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

/* One successful completion from cq within 10 s, else the test fails. */
static inline struct ibv_wc tu_poll_one(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	double end = tu_now() + 10;
	int n;

	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0 && tu_now() < end)
		;
	if (n != 1)
		fail_msg("no completion within 10 s (poll returned %d)", n);
	if (wc.status != IBV_WC_SUCCESS)
		fail_msg("completion wr_id %llu status %s", (unsigned long long)wc.wr_id,
			 ibv_wc_status_str(wc.status));
	return wc;
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
