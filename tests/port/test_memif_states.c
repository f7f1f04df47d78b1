/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The memif link's named states (enum memif_link_state): the table of legal
 * transitions is walked (every state named, reachable from CREATED for the
 * roles it belongs to, CLOSING reachable from each and final, the lives a
 * link leads are legal, a list of wrong moves refused), then a live pair in
 * one process runs with ROCEMU_TRACE=memif: a client replaced at once, the
 * server closed and opened again while the client stays. Every traced
 * transition must be legal, and the ones that tell a new connection (the
 * server's way back to STARTED, by conn_gen or by the link seen down and up;
 * the client's STOPPED -> STARTED) must show.
 * cmocka.
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

#include "port_memif.h"
#include "port_test_util.h"

#define S(x) MEMIF_LINK_##x

static char trace_path[64];
static char sock_spec[2][128];

static int state_by_name(const char *name)
{
	for (int s = 0; s < MEMIF_LINK_STATES; s++)
		if (!strcmp(memif_link_state_name((enum memif_link_state)s), name))
			return s;
	return -1;
}

static void test_every_state_named(void **state)
{
	(void)state;
	for (int s = 0; s < MEMIF_LINK_STATES; s++) {
		const char *n = memif_link_state_name((enum memif_link_state)s);

		assert_string_not_equal(n, "?");
		assert_int_equal(state_by_name(n), s); /* names are distinct */
	}
	assert_string_equal(memif_link_state_name(MEMIF_LINK_STATES), "?");
}

/* The states reachable from CREATED for a role (bit per state). */
static unsigned reachable(bool client)
{
	unsigned seen = 1u << S(CREATED), frontier = seen;

	while (frontier) {
		unsigned next = 0;

		for (int from = 0; from < MEMIF_LINK_STATES; from++)
			for (int to = 0; (frontier >> from & 1) && to < MEMIF_LINK_STATES; to++)
				if (memif_link_transition_legal(from, to, client) &&
				    !(seen >> to & 1))
					next |= 1u << to;
		seen |= next;
		frontier = next;
	}
	return seen;
}

static void test_table_walk(void **state)
{
	unsigned all = (1u << MEMIF_LINK_STATES) - 1;
	unsigned client_only = 1u << S(ANNOUNCED) | 1u << S(STOPPED);

	(void)state;
	assert_int_equal(reachable(true), all);
	assert_int_equal(reachable(false), all & ~client_only);
	for (int s = 0; s < MEMIF_LINK_STATES; s++) {
		/* every state can close, and closing is final */
		if (s != S(CLOSING))
			assert_true(memif_link_transition_legal(s, S(CLOSING), true));
		assert_false(memif_link_transition_legal(S(CLOSING), s, true));
		assert_false(memif_link_transition_legal(S(CLOSING), s, false));
	}
}

static void walk(bool client, const enum memif_link_state *life, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (!memif_link_transition_legal(life[i - 1], life[i], client))
			fail_msg("%s: %s -> %s refused", client ? "client" : "server",
				 memif_link_state_name(life[i - 1]),
				 memif_link_state_name(life[i]));
}

static void test_lives_are_legal(void **state)
{
	/* a client: up, its server closes and goes, a reconnect, a later close */
	static const enum memif_link_state client[] = {
	    S(CREATED),	    S(STARTED),	    S(ANNOUNCED), S(PEER_CLOSED), S(PEER_GONE),
	    S(STOPPED),	    S(STARTED),	    S(ANNOUNCED), S(STOPPED),	  S(STARTED),
	    S(PEER_CLOSED), S(PEER_CLOSED), S(STOPPED),	  S(STARTED),	  S(CLOSING)};
	/* a server: clients come and go (announced, or seen down and up) */
	static const enum memif_link_state server[] = {
	    S(CREATED),	  S(STARTED),	  S(PEER_CLOSED), S(STARTED), S(PEER_CLOSED),
	    S(PEER_GONE), S(PEER_CLOSED), S(PEER_GONE),	  S(STARTED), S(CLOSING)};
	static const enum memif_link_state failed_open[] = {S(CREATED), S(CLOSING)};
	/* peers killed outright while the PMD was parked: gone with no close */
	static const enum memif_link_state client_killed[] = {
	    S(CREATED), S(STARTED),   S(ANNOUNCED), S(PEER_GONE), S(STOPPED),
	    S(STARTED), S(PEER_GONE), S(STOPPED),   S(STARTED),	  S(CLOSING)};
	static const enum memif_link_state server_killed[] = {
	    S(CREATED), S(STARTED), S(PEER_GONE), S(STARTED), S(PEER_GONE), S(STARTED), S(CLOSING)};

	(void)state;
	walk(true, client, sizeof(client) / sizeof(client[0]));
	walk(false, server, sizeof(server) / sizeof(server[0]));
	walk(true, client_killed, sizeof(client_killed) / sizeof(client_killed[0]));
	walk(false, server_killed, sizeof(server_killed) / sizeof(server_killed[0]));
	walk(true, failed_open, 2);
	walk(false, failed_open, 2);
}

static void test_wrong_moves_refused(void **state)
{
	static const struct {
		enum memif_link_state from, to;
		bool client;
	} wrong[] = {
	    {S(CLOSING), S(STARTED), true},	 /* no life after close */
	    {S(CREATED), S(PEER_CLOSED), true},	 /* no peer before a start */
	    {S(ANNOUNCED), S(STARTED), true},	 /* a new connection needs a restart */
	    {S(STOPPED), S(ANNOUNCED), true},	 /* announced only once up after a start */
	    {S(STOPPED), S(PEER_CLOSED), true},	 /* a stopped device has no peer */
	    {S(STARTED), S(STOPPED), false},	 /* a server never stops for a reconnect */
	    {S(STARTED), S(ANNOUNCED), false},	 /* nor announces */
	    {S(PEER_GONE), S(PEER_GONE), false}, /* gone is seen once */
	    {S(STARTED), MEMIF_LINK_STATES, true},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++)
		if (memif_link_transition_legal(wrong[i].from, wrong[i].to, wrong[i].client))
			fail_msg("%s: %s -> %s accepted", wrong[i].client ? "client" : "server",
				 memif_link_state_name(wrong[i].from),
				 memif_link_state_name(wrong[i].to));
}

static struct rocemu_port *open_end(int client)
{
	struct rocemu_port_config cfg;
	struct rocemu_port *port = NULL;
	char err[256];

	assert_int_equal(
	    ptu_config(&cfg, sock_spec[client], client ? "10.77.0.2/24" : "10.77.0.1/24",
		       client ? "02:00:00:77:00:02" : "02:00:00:77:00:01", err, sizeof(err)),
	    0);
	if (rocemu_port_open(&cfg, &port, err, sizeof(err)))
		fail_msg("open %s: %s", sock_spec[client], err);
	return port;
}

/* Check every "memif: ROLE FROM -> TO" line of the trace; count the two
 * transitions that tell a new connection. */
static void check_trace(unsigned *server_new, unsigned *client_restarted, unsigned *lines)
{
	FILE *f = fopen(trace_path, "r");
	char line[512];

	assert_non_null(f);
	*server_new = *client_restarted = *lines = 0;
	while (fgets(line, sizeof(line), f)) {
		char role[16], from[32], to[32];
		const char *p = strstr(line, " memif: ");
		int a, b;

		if (!strstr(line, "rocemu-trace:") || !p)
			continue;
		if (sscanf(p, " memif: %15s %31s -> %31s", role, from, to) != 3)
			fail_msg("unreadable trace line: %s", line);
		a = state_by_name(from);
		b = state_by_name(to);
		if (a < 0 || b < 0 || !memif_link_transition_legal(a, b, !strcmp(role, "client")))
			fail_msg("illegal transition traced: %s", line);
		(*lines)++;
		*server_new += !strcmp(role, "server") &&
			       (a == S(PEER_CLOSED) || a == S(PEER_GONE)) && b == S(STARTED);
		*client_restarted += !strcmp(role, "client") && a == S(STOPPED) && b == S(STARTED);
	}
	fclose(f);
}

static void test_live_pair_traced(void **state)
{
	struct rocemu_port *srv, *cli;
	unsigned server_new, client_restarted, lines;

	(void)state;
	srv = open_end(0);
	cli = open_end(1);
	assert_true(ptu_wait_link(cli));
	assert_true(ptu_ping(srv, "10.77.0.2", 1));
	/* a new client at once: the server learns it from conn_gen */
	rocemu_port_close(cli);
	cli = open_end(1);
	assert_true(ptu_wait_link(cli));
	assert_true(ptu_ping(srv, "10.77.0.2", 2));
	/* the server goes and comes back in this process; the client stays
	 * and reconnects by itself */
	rocemu_port_close(srv);
	srv = open_end(0);
	assert_true(ptu_ping(srv, "10.77.0.2", 3));
	assert_true(ptu_ping(cli, "10.77.0.1", 4));
	assert_int_equal(ptu_counter(srv, "memif_illegal_transitions"), 0);
	assert_int_equal(ptu_counter(cli, "memif_illegal_transitions"), 0);
	rocemu_port_close(cli);
	rocemu_port_close(srv);
	fflush(stderr);
	check_trace(&server_new, &client_restarted, &lines);
	assert_true(lines >= 8);
	assert_true(server_new >= 1);
	assert_true(client_restarted >= 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_state_named), cmocka_unit_test(test_table_walk),
	    cmocka_unit_test(test_lives_are_legal),   cmocka_unit_test(test_wrong_moves_refused),
	    cmocka_unit_test(test_live_pair_traced),
	};
	char dir[] = "/tmp/rocemu-memif-states-XXXXXX";
	int rc, fd, saved;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(sock_spec[0], sizeof(sock_spec[0]), "memif:server:%s/m.sock", dir);
	snprintf(sock_spec[1], sizeof(sock_spec[1]), "memif:client:%s/m.sock", dir);
	/* the trace goes to stderr: keep it in a file to read back */
	snprintf(trace_path, sizeof(trace_path), "%s/trace", dir);
	setenv("ROCEMU_TRACE", "memif", 1);
	fd = open(trace_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	saved = dup(2);
	if (fd < 0 || saved < 0 || dup2(fd, 2) < 0) {
		perror("trace file");
		return 1;
	}
	close(fd);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	fflush(stderr);
	dup2(saved, 2);
	if (rc) { /* cmocka's messages went to the file too */
		FILE *f = fopen(trace_path, "r");
		char line[512];

		while (f && fgets(line, sizeof(line), f))
			fputs(line, stderr);
		if (f)
			fclose(f);
	}
	if (getenv("KEEP"))
		fprintf(stderr, "trace kept in %s\n", trace_path);
	else {
		unlink(trace_path);
		rmdir(dir);
	}
	return rc;
}
