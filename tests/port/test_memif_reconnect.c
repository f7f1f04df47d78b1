/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memif reconnects in one process, faster than the other end's progress
 * passes can sample the link: a client closes and a new one connects to the
 * same server at once. The server acknowledged the first client's close
 * (peer_closed) and must take the new connection: it learns it from the
 * client's connection number in the bell page, not from seeing the link go
 * down and up (it may never see that: when this was written, in 1 to 4 of
 * the 5 rounds its passes saw the link up throughout). Checked by pinging
 * from the server to each new client; cmocka.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "port_test_util.h"

#define ROUNDS 5

static char sock_spec[2][128];

static struct rocemu_port *open_port(int client, const char *ip, const char *mac)
{
	struct rocemu_port_config cfg;
	struct rocemu_port *port = NULL;
	char err[256];

	assert_int_equal(ptu_config(&cfg, sock_spec[client], ip, mac, err, sizeof(err)), 0);
	if (rocemu_port_open(&cfg, &port, err, sizeof(err)))
		fail_msg("open %s: %s", sock_spec[client], err);
	return port;
}

static void test_client_reopened_at_once(void **state)
{
	struct rocemu_port *srv, *cli;
	(void)state;

	srv = open_port(0, "10.76.0.1/24", "02:00:00:76:00:01");
	cli = open_port(1, "10.76.0.2/24", "02:00:00:76:00:02");
	assert_true(ptu_wait_link(srv));
	assert_true(ptu_wait_link(cli));
	assert_true(ptu_ping(srv, "10.76.0.2", 1));
	for (unsigned r = 0; r < ROUNDS; r++) {
		/* the new client connects right after the old one's close: the
		 * server's thread sleeps meanwhile (up to 20 ms, no upper layer) */
		rocemu_port_close(cli);
		cli = open_port(1, "10.76.0.2/24", "02:00:00:76:00:02");
		assert_true(ptu_wait_link(cli));
		if (!ptu_ping(srv, "10.76.0.2", (uint16_t)(2 + r)))
			fail_msg("round %u: the server cannot reach the new client "
				 "(peer_closed %llu, drop_tx_peer_closed %llu)",
				 r, (unsigned long long)ptu_counter(srv, "peer_closed"),
				 (unsigned long long)ptu_counter(srv, "drop_tx_peer_closed"));
	}
	/* every close was announced and acknowledged, every state change legal */
	assert_int_equal(ptu_counter(srv, "peer_closed"), ROUNDS);
	assert_int_equal(ptu_counter(srv, "memif_illegal_transitions"), 0);
	assert_int_equal(ptu_counter(cli, "memif_illegal_transitions"), 0);
	rocemu_port_close(cli);
	rocemu_port_close(srv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_client_reopened_at_once),
	};
	char dir[] = "/tmp/rocemu-memif-reconn-XXXXXX";
	char path[96];
	int rc;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/m.sock", dir);
	snprintf(sock_spec[0], sizeof(sock_spec[0]), "memif:server:%s", path);
	snprintf(sock_spec[1], sizeof(sock_spec[1]), "memif:client:%s", path);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	unlink(path);
	rmdir(dir);
	return rc;
}
