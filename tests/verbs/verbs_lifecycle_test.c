/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A device's life through our libibverbs (issues 14.1, 20.2-20.4), in one
 * process as pyverbs, libfabric's fi_info and device-probing programs use it:
 *  - ibv_get_device_guid answers from the config, at once, without opening
 *    the port (a memif client with no server used to wait 10 s there), and
 *    the GUID is the one ibv_query_device reports;
 *  - open -> close -> open, many times, interleaved with
 *    ibv_get_device_list / ibv_get_device_guid, for memif (server and
 *    client) and ring devices; a memif server closed and opened again while
 *    its client stays, RC traffic checked after each;
 *  - concurrent opens (threads, and two contexts) share one engine: a second
 *    engine of a memif server would be a second server on the socket;
 *  - a second server on one socket path fails with EADDRINUSE, a memif
 *    client with no server (memif-wait 0) with ECONNREFUSED;
 *  - a captured device closed and opened again keeps one capture: each open
 *    appends a capture point and its frames to the same pcap file.
 * cmocka.
 */
#include <errno.h>
#include <pthread.h>
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

enum { SRV, CLI, DUP, LONELY, RA, RB, CA, CB, N_DEVS };
static const char *const names[N_DEVS] = {"srv", "cli", "dup", "lonely", "ra", "rb", "ca", "cb"};
static struct ibv_device *dev[N_DEVS];
static char dir[64];

static struct ibv_device *find(struct ibv_device **list, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			return list[i];
	fail_msg("no device %s", name);
	return NULL;
}

static void connect_rc(struct tu_side *s, const struct tu_side *peer)
{
	tu_rc_to_rts(s->qp, &peer->gid, TU_GID_INDEX, peer->qp->qp_num, IBV_ACCESS_REMOTE_WRITE);
}

/* New RC QPs between a and b, one SEND each way, every byte checked. */
static void traffic(struct ibv_device *da, struct ibv_device *db, unsigned seed)
{
	struct tu_side a, b;
	struct ibv_send_wr wr = {.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};

	tu_side_open(&a, da, IBV_QPT_RC);
	tu_side_open(&b, db, IBV_QPT_RC);
	connect_rc(&a, &b);
	connect_rc(&b, &a);
	tu_post_recv(&b, 1, 8192, 4096);
	tu_post_recv(&a, 2, 8192, 4096);
	tu_fill(a.buf, 4096, seed);
	tu_fill(b.buf, 4096, seed + 1);
	wr.wr_id = 3;
	tu_post_send(&a, &wr, 0, 4096);
	wr.wr_id = 4;
	tu_post_send(&b, &wr, 0, 4096);
	for (int i = 0; i < 2; i++) {
		tu_side_poll(&a);
		tu_side_poll(&b);
	}
	assert_memory_equal(b.buf + 8192, a.buf, 4096);
	assert_memory_equal(a.buf + 8192, b.buf, 4096);
	tu_side_close(&a);
	tu_side_close(&b);
}

static void test_guid_without_open(void **state)
{
	struct ibv_device_attr attr;
	struct ibv_context *ctx;
	__be64 guid[N_DEVS];

	(void)state;
	for (int i = 0; i < N_DEVS; i++) {
		double t0 = tu_now();

		guid[i] = ibv_get_device_guid(dev[i]);
		assert_true(guid[i] != 0);
		if (tu_now() - t0 > 1.0)
			fail_msg("ibv_get_device_guid(%s) took %.1f s", names[i], tu_now() - t0);
	}
	ctx = ibv_open_device(dev[SRV]);
	assert_non_null(ctx);
	assert_int_equal(ibv_query_device(ctx, &attr), 0);
	assert_true(attr.node_guid == guid[SRV]);
	assert_true(ibv_get_device_guid(dev[SRV]) == guid[SRV]);
	assert_int_equal(ibv_close_device(ctx), 0);
}

/* Open, query, close, REOPENS times, with the list and the GUID in between. */
static void reopen(int which)
{
	for (int i = 0; i < 5; i++) {
		int n;
		struct ibv_device **list = ibv_get_device_list(&n);
		struct ibv_context *ctx;
		struct ibv_port_attr pa;
		union ibv_gid gid;
		struct ibv_pd *pd;

		assert_non_null(list);
		assert_int_equal(n, N_DEVS);
		assert_true(ibv_get_device_guid(dev[which]) != 0);
		ctx = ibv_open_device(find(list, n, names[which]));
		if (!ctx)
			fail_msg("open %s, round %d: %s", names[which], i, strerror(errno));
		assert_int_equal(ibv_query_port(ctx, 1, &pa), 0);
		assert_int_equal(ibv_query_gid(ctx, 1, 1, &gid), 0);
		pd = ibv_alloc_pd(ctx);
		assert_non_null(pd);
		assert_int_equal(ibv_dealloc_pd(pd), 0);
		assert_int_equal(ibv_close_device(ctx), 0);
		ibv_free_device_list(list);
	}
}

static void test_reopen_every_kind(void **state)
{
	struct ibv_context *srv;

	(void)state;
	reopen(SRV);
	reopen(RA);
	reopen(RB);
	/* a client needs its server: the server stays open meanwhile */
	srv = ibv_open_device(dev[SRV]);
	assert_non_null(srv);
	reopen(CLI);
	assert_int_equal(ibv_close_device(srv), 0);
	traffic(dev[RA], dev[RB], 1); /* and a ring pair still carries */
}

/* The server goes and comes back while the client stays open: the client
 * reconnects by itself, RC traffic flows again each time. */
static void test_server_reopened_under_client(void **state)
{
	struct ibv_context *srv, *cli;

	(void)state;
	srv = ibv_open_device(dev[SRV]);
	assert_non_null(srv);
	cli = ibv_open_device(dev[CLI]);
	assert_non_null(cli);
	traffic(dev[SRV], dev[CLI], 10);
	for (unsigned r = 0; r < 3; r++) {
		assert_int_equal(ibv_close_device(srv), 0);
		srv = ibv_open_device(dev[SRV]);
		if (!srv)
			fail_msg("server reopen %u: %s", r, strerror(errno));
		traffic(dev[SRV], dev[CLI], 20 + r);
	}
	assert_int_equal(ibv_close_device(cli), 0);
	assert_int_equal(ibv_close_device(srv), 0);
}

#define THREADS 4
static pthread_barrier_t barrier;

static void *open_at_once(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&barrier);
	return ibv_open_device(dev[SRV]);
}

static void test_concurrent_opens_share_engine(void **state)
{
	pthread_t t[THREADS];
	struct ibv_context *ctx[THREADS], *one, *two;
	union ibv_gid g0, g;

	(void)state;
	pthread_barrier_init(&barrier, NULL, THREADS);
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, open_at_once, NULL), 0);
	for (int i = 0; i < THREADS; i++) {
		void *ret;

		pthread_join(t[i], &ret);
		ctx[i] = ret;
		/* two engines would be two memif servers on one socket: refused */
		assert_non_null(ctx[i]);
	}
	pthread_barrier_destroy(&barrier);
	assert_int_equal(ibv_query_gid(ctx[0], 1, 0, &g0), 0);
	for (int i = 1; i < THREADS; i++) {
		assert_int_equal(ibv_query_gid(ctx[i], 1, 0, &g), 0);
		assert_memory_equal(&g, &g0, sizeof(g));
	}
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(ibv_close_device(ctx[i]), 0);
	/* two contexts, one after the other, then closed in open order */
	one = ibv_open_device(dev[SRV]);
	two = ibv_open_device(dev[SRV]);
	assert_non_null(one);
	assert_non_null(two);
	assert_int_equal(ibv_close_device(one), 0);
	traffic(dev[SRV], dev[SRV], 30); /* the engine lives on with two */
	assert_int_equal(ibv_close_device(two), 0);
}

static void test_open_errors(void **state)
{
	struct ibv_context *srv, *ctx;
	double t0;

	(void)state;
	srv = ibv_open_device(dev[SRV]);
	assert_non_null(srv);
	errno = 0;
	assert_null(ibv_open_device(dev[DUP]));
	assert_int_equal(errno, EADDRINUSE);
	assert_int_equal(ibv_close_device(srv), 0);
	ctx = ibv_open_device(dev[DUP]); /* the path is free again */
	assert_non_null(ctx);
	assert_int_equal(ibv_close_device(ctx), 0);
	t0 = tu_now();
	errno = 0;
	assert_null(ibv_open_device(dev[LONELY]));
	assert_int_equal(errno, ECONNREFUSED);
	assert_true(tu_now() - t0 < 2.0);
}

/*
 * ca's capture, record by record: how many RoCEv2 frames follow each of its
 * capture points (rocemu's EtherType 0x88B5 record of type 1), in
 * per_point[]; returns the number of capture points, -1 if the file is not
 * one clean pcap (one header, whole records to its end).
 */
static int frames_per_capture_point(const char *path, unsigned *per_point, int max)
{
	FILE *f = fopen(path, "rb");
	uint8_t hdr[24], rec[16], frame[9000];
	int points = 0;

	if (!f)
		return -1;
	if (fread(hdr, 1, sizeof(hdr), f) != sizeof(hdr) ||
	    !(hdr[0] == 0x4d && hdr[1] == 0x3c && hdr[2] == 0xb2 && hdr[3] == 0xa1))
		goto bad;
	while (fread(rec, 1, sizeof(rec), f) == sizeof(rec)) {
		uint32_t caplen;
		unsigned ihl;

		memcpy(&caplen, rec + 8, 4);
		if (caplen > sizeof(frame) || fread(frame, 1, caplen, f) != caplen || caplen < 14)
			goto bad;
		if (frame[12] == 0x88 && frame[13] == 0xb5 && caplen >= 22 &&
		    !memcmp(frame + 14, "RCMU", 4) && frame[19] == 1) {
			if (points == max)
				goto bad;
			per_point[points++] = 0;
			continue;
		}
		if (frame[12] != 0x08 || frame[13] != 0x00 || caplen < 14 + 20 + 8 + 12)
			continue;
		ihl = (frame[14] & 0xfu) * 4;
		if (frame[23] == 17 && caplen >= 14 + ihl + 4 &&
		    (frame[14 + ihl + 2] << 8 | frame[14 + ihl + 3]) == 4791 && points > 0)
			per_point[points - 1]++;
	}
	if (!feof(f))
		goto bad;
	fclose(f);
	return points;
bad:
	fclose(f);
	return -1;
}

/* A device with a capture, closed and opened three times with traffic each
 * time: the file holds all three, not only the last (the port used to start
 * its file over when it came up again). */
static void test_capture_across_reopens(void **state)
{
	char path[128];
	unsigned per_point[8];
	int points;

	(void)state;
	for (unsigned r = 0; r < 3; r++)
		traffic(dev[CA], dev[CB], 40 + r); /* opens and closes ca */
	snprintf(path, sizeof(path), "%s/ca.pcap", dir);
	points = frames_per_capture_point(path, per_point, 8);
	if (points != 3)
		fail_msg("%s: %d capture points, want one for each of the 3 opens", path, points);
	for (int i = 0; i < points; i++)
		if (per_point[i] < 2) /* at least the SEND out and the SEND in */
			fail_msg("%s: %u RoCEv2 frames after capture point %d", path, per_point[i],
				 i + 1);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_guid_without_open),
	    cmocka_unit_test(test_reopen_every_kind),
	    cmocka_unit_test(test_server_reopened_under_client),
	    cmocka_unit_test(test_concurrent_opens_share_engine),
	    cmocka_unit_test(test_open_errors),
	    cmocka_unit_test(test_capture_across_reopens),
	};
	char cfg[1536], path[] = "/tmp/rocemu-lifecycle-cfg-XXXXXX";
	struct ibv_device **list;
	int n, rc;

	snprintf(dir, sizeof(dir), "/tmp/rocemu-vlife-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(cfg, sizeof(cfg),
		 "[srv]\nport = memif:server:%s/l.sock\nip = 10.81.0.1/24\n"
		 "[cli]\nport = memif:client:%s/l.sock\nip = 10.81.0.2/24\n"
		 "[dup]\nport = memif:server:%s/l.sock\nip = 10.81.0.3/24\n"
		 "[lonely]\nport = memif:client:%s/none.sock\nip = 10.81.0.4/24\nmemif-wait = 0\n"
		 "[ra]\nport = ring:life:a\nip = 10.81.1.1/24\n"
		 "[rb]\nport = ring:life:b\nip = 10.81.1.2/24\n"
		 "[ca]\nport = ring:lifecap:a\nip = 10.81.2.1/24\ncapture = %s/ca.pcap\n"
		 "[cb]\nport = ring:lifecap:b\nip = 10.81.2.2/24\n",
		 dir, dir, dir, dir, dir);
	list = tu_devices(path, cfg, N_DEVS, &n);
	if (!list)
		return 1;
	for (int i = 0; i < N_DEVS; i++)
		dev[i] = list[i];
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	ibv_free_device_list(list);
	rmdir(dir);
	return rc;
}
