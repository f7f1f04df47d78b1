/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A port's life in one process (issues 14.1, 20.2-20.4): open, close and
 * open again, many times, for every link kind (ring, dpdk: with net_null,
 * memif here; af_packet and af_xdp with IFACE); a memif server closed and
 * opened again while its client stays (the client reconnects by itself);
 * the MAC a config announces before it opens is the one the port has; a
 * memif client with no server fails with ECONNREFUSED at once or ETIMEDOUT
 * after memif-wait, saying once that it waits and with no line from DPDK;
 * a second server on one socket path is refused with EADDRINUSE. (A client
 * started before its server, and servers in two processes on one path:
 * memif_reconnect.sh and cmd_port_errors.sh.)
 *
 * Usage: test_port_lifecycle [IFACE]. With IFACE (a veth end, set up by
 * lifecycle_veth.sh) af_packet and af_xdp ports on it are reopened too.
 * stderr is kept in a file to count DPDK's lines; cmocka.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "port_test_util.h"

#define REOPENS 5

static char dir[64];
static char log_path[96];
static char srv_spec[128], cli_spec[128], lone_spec[128];
static const char *iface;

struct notices {
	unsigned n;
	char last[256];
};

static void count_notice(void *arg, const char *line)
{
	struct notices *no = arg;

	no->n++;
	snprintf(no->last, sizeof(no->last), "%s", line);
}

static void config(struct rocemu_port_config *cfg, const char *spec, const char *ip)
{
	char err[256];

	rocemu_port_config_init(cfg);
	if (rocemu_port_config_set(cfg, "port", spec, err, sizeof(err)) ||
	    rocemu_port_config_set(cfg, "ip", ip, err, sizeof(err)))
		fail_msg("config %s: %s", spec, err);
}

static struct rocemu_port *open_ok(const struct rocemu_port_config *cfg)
{
	struct rocemu_port *port = NULL;
	char err[512];

	if (rocemu_port_open(cfg, &port, err, sizeof(err)))
		fail_msg("open %s: %s", cfg->spec, err);
	return port;
}

/* Lines of the kept stderr that contain what. */
static unsigned log_lines(const char *what)
{
	FILE *f = fopen(log_path, "r");
	char line[1024];
	unsigned n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, what) != NULL;
	fclose(f);
	return n;
}

/* Open, check the MAC announced before, close; REOPENS times. */
static void reopen(const char *spec, const char *ip)
{
	struct rocemu_port_config cfg;
	uint8_t before[6], mac[6];
	int known;

	config(&cfg, spec, ip);
	known = rocemu_port_config_mac(&cfg, before);
	assert_true(known == 0 || known == -ENODATA);
	for (int i = 0; i < REOPENS; i++) {
		struct rocemu_port *port = open_ok(&cfg);

		rocemu_port_mac(port, mac);
		if (known == 0)
			assert_memory_equal(mac, before, 6);
		rocemu_port_close(port);
	}
}

static void test_ring_and_dpdk_reopen(void **state)
{
	struct rocemu_port_config ca, cb;
	(void)state;
	reopen("ring:life:a", "10.78.0.1/24");
	reopen("dpdk:net_null_life0", "10.78.0.3/24"); /* a vdev of any PMD */
	config(&ca, "ring:life2:a", "10.78.1.1/24");
	config(&cb, "ring:life2:b", "10.78.1.2/24");
	for (int i = 0; i < REOPENS; i++) {
		struct rocemu_port *a = open_ok(&ca), *b = open_ok(&cb);

		/* the pair carries after each reopen */
		assert_true(ptu_ping(a, "10.78.1.2", (uint16_t)i));
		rocemu_port_close(i % 2 ? a : b);
		rocemu_port_close(i % 2 ? b : a);
	}
}

/* issue 20.2: a memif server could not be opened a second time */
static void test_memif_server_reopen(void **state)
{
	(void)state;
	reopen(lone_spec, "10.78.2.1/24");
}

static void test_memif_server_reopened_under_client(void **state)
{
	struct rocemu_port_config cs, cc;
	struct rocemu_port *srv, *cli;

	(void)state;
	config(&cs, srv_spec, "10.78.3.1/24");
	config(&cc, cli_spec, "10.78.3.2/24");
	srv = open_ok(&cs);
	cli = open_ok(&cc);
	assert_true(ptu_ping(srv, "10.78.3.2", 1));
	for (int i = 0; i < 3; i++) {
		/* the client stays and reconnects to each new server */
		rocemu_port_close(srv);
		srv = open_ok(&cs);
		assert_true(ptu_ping(srv, "10.78.3.2", (uint16_t)(2 + i)));
	}
	for (int i = 0; i < 3; i++) {
		/* and a new client each time to the same server */
		rocemu_port_close(cli);
		cli = open_ok(&cc);
		assert_true(ptu_ping(cli, "10.78.3.1", (uint16_t)(10 + i)));
	}
	assert_int_equal(ptu_counter(srv, "memif_illegal_transitions"), 0);
	rocemu_port_close(cli);
	rocemu_port_close(srv);
}

/* issue 20.4 */
static void test_second_server_refused(void **state)
{
	struct rocemu_port_config cs, c2;
	struct rocemu_port *srv, *two = NULL;
	char err[512] = "";

	(void)state;
	config(&cs, lone_spec, "10.78.4.1/24");
	config(&c2, lone_spec, "10.78.4.2/24");
	srv = open_ok(&cs);
	assert_int_equal(rocemu_port_open(&c2, &two, err, sizeof(err)), -EADDRINUSE);
	assert_null(two);
	if (!strstr(err, "socket path in use by another server"))
		fail_msg("message: %s", err);
	rocemu_port_close(srv);
	/* and the path is free again afterwards */
	srv = open_ok(&c2);
	rocemu_port_close(srv);
}

/* issue 20.3: no server */
static void test_client_without_server(void **state)
{
	struct rocemu_port_config cfg;
	struct rocemu_port *port = NULL;
	struct notices no = {0};
	char err[512] = "", path[128];
	uint64_t t0, ms;
	unsigned before = log_lines("memif");

	(void)state;
	snprintf(path, sizeof(path), "memif:client:%s/nobody.sock", dir);
	config(&cfg, path, "10.78.5.2/24");
	cfg.notice = count_notice;
	cfg.notice_arg = &no;
	/* memif-wait 0: refused at once, nothing said */
	assert_int_equal(rocemu_port_config_set(&cfg, "memif-wait", "0", err, sizeof(err)), 0);
	t0 = rocemu_now_ns();
	assert_int_equal(rocemu_port_open(&cfg, &port, err, sizeof(err)), -ECONNREFUSED);
	assert_true(rocemu_now_ns() - t0 < 2000000000ull);
	assert_non_null(strstr(err, "no memif server listening on"));
	assert_int_equal(no.n, 0);
	/* memif-wait 400: one notice at once, ETIMEDOUT after the wait */
	assert_int_equal(rocemu_port_config_set(&cfg, "memif-wait", "400", err, sizeof(err)), 0);
	t0 = rocemu_now_ns();
	assert_int_equal(rocemu_port_open(&cfg, &port, err, sizeof(err)), -ETIMEDOUT);
	ms = (rocemu_now_ns() - t0) / 1000000;
	assert_true(ms >= 400);
	assert_null(port);
	assert_int_equal(no.n, 1);
	assert_non_null(strstr(no.last, "waiting for a memif server on"));
	assert_non_null(strstr(no.last, "nobody.sock"));
	fflush(stderr);
	/* no DPDK line about it (it used to write "Failed to connect socket" 501 times) */
	assert_int_equal(log_lines("memif"), before);
}

static void test_iface_reopen(void **state)
{
	char spec[64];

	(void)state;
	snprintf(spec, sizeof(spec), "af_packet:%s", iface);
	reopen(spec, "10.78.7.1/24");
	snprintf(spec, sizeof(spec), "af_xdp:%s", iface);
	reopen(spec, "10.78.7.1/24");
	/* and the two kinds one after the other on the same interface */
	snprintf(spec, sizeof(spec), "af_packet:%s", iface);
	reopen(spec, "10.78.7.1/24");
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ring_and_dpdk_reopen),
	    cmocka_unit_test(test_memif_server_reopen),
	    cmocka_unit_test(test_memif_server_reopened_under_client),
	    cmocka_unit_test(test_second_server_refused),
	    cmocka_unit_test(test_client_without_server),
	};
	const struct CMUnitTest iface_tests[] = {
	    cmocka_unit_test(test_iface_reopen),
	};
	int rc, fd, saved;

	iface = argc > 1 ? argv[1] : NULL;
	snprintf(dir, sizeof(dir), "/tmp/rocemu-lifecycle-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(srv_spec, sizeof(srv_spec), "memif:server:%s/m.sock", dir);
	snprintf(cli_spec, sizeof(cli_spec), "memif:client:%s/m.sock", dir);
	snprintf(lone_spec, sizeof(lone_spec), "memif:server:%s/lone.sock", dir);
	snprintf(log_path, sizeof(log_path), "%s/stderr", dir);
	fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	saved = dup(2);
	if (fd < 0 || saved < 0 || dup2(fd, 2) < 0) {
		perror("stderr file");
		return 1;
	}
	close(fd);
	if (iface)
		rc = cmocka_run_group_tests(iface_tests, NULL, NULL);
	else
		rc = cmocka_run_group_tests(tests, NULL, NULL);
	fflush(stderr);
	dup2(saved, 2);
	if (rc) { /* cmocka's messages and DPDK's went to the file */
		FILE *f = fopen(log_path, "r");
		char line[1024];

		while (f && fgets(line, sizeof(line), f))
			fputs(line, stderr);
		if (f)
			fclose(f);
	}
	unlink(log_path);
	rmdir(dir);
	return rc;
}
