/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memif's direct channel leaves the PMD alone once it carries everything
 * (port_memif_direct.c, "parked"): DPDK's memif PMD unmaps its rings on
 * EAL's interrupt thread when a peer is killed outright, so an end that
 * still called its bursts could die in them. A pair in one process, both
 * ends with the channel:
 *  - once both have parked (pmd_parks), pings both ways are answered over
 *    the channel while neither end calls its PMD's rx or tx burst
 *    (pmd_rx_bursts, pmd_tx_bursts stay still);
 *  - a client that closes unparks the server: with the next client it
 *    polls its PMD again, until both have parked again.
 * Counters only, no timing: a wait for something to happen gives up after
 * 10 s.
 */
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

#define PINGS 20

/* [0] the server, [1] the client: spec, address, MAC */
static char spec[2][128];
static const char *const addr[2][2] = {{"10.78.0.1/24", "02:00:00:78:00:01"},
				       {"10.78.0.2/24", "02:00:00:78:00:02"}};
static const char *const ip[2] = {"10.78.0.1", "10.78.0.2"};

static struct rocemu_port *open_end(int i)
{
	struct rocemu_port *p = ptu_open_say(spec[i], addr[i][0], addr[i][1]);

	assert_non_null(p);
	return p;
}

/* Both ends up, the channel mapped both ways, a ping each way (the
 * neighbours resolved), both parked once more than parks[] says. */
static void connect_and_park(struct rocemu_port *end[2], const uint64_t parks[2], uint16_t seq)
{
	assert_true(ptu_wait_link(end[1]));
	for (int i = 0; i < 2; i++)
		assert_true(ptu_counter_above(end[i], "direct_maps", 0));
	assert_true(ptu_ping(end[0], ip[1], seq));
	assert_true(ptu_ping(end[1], ip[0], seq));
	for (int i = 0; i < 2; i++)
		if (!ptu_counter_above(end[i], "pmd_parks", parks[i]))
			fail_msg("%s never left its PMD alone", i ? "the client" : "the server");
}

static void test_parked_pmd_is_not_called(void **state)
{
	struct rocemu_port *end[2];
	uint64_t rx[2], tx[2], copied[2], zero[2] = {0, 0};

	(void)state;
	end[0] = open_end(0);
	end[1] = open_end(1);
	connect_and_park(end, zero, 1);
	for (int i = 0; i < 2; i++) {
		rx[i] = ptu_counter(end[i], "pmd_rx_bursts");
		tx[i] = ptu_counter(end[i], "pmd_tx_bursts");
		copied[i] = ptu_counter(end[i], "direct_copy_rx_bytes");
	}
	for (uint16_t s = 0; s < PINGS; s++) {
		assert_true(ptu_ping(end[0], ip[1], (uint16_t)(100 + s)));
		assert_true(ptu_ping(end[1], ip[0], (uint16_t)(100 + s)));
	}
	for (int i = 0; i < 2; i++) {
		const char *who = i ? "client" : "server";

		print_message(
		    "%s: PMD rx bursts %lu -> %lu, tx bursts %lu -> %lu, channel copies "
		    "%lu -> %lu bytes\n",
		    who, (unsigned long)rx[i], (unsigned long)ptu_counter(end[i], "pmd_rx_bursts"),
		    (unsigned long)tx[i], (unsigned long)ptu_counter(end[i], "pmd_tx_bursts"),
		    (unsigned long)copied[i],
		    (unsigned long)ptu_counter(end[i], "direct_copy_rx_bytes"));
		/* ICMP crossed the channel (copied at receive: not RoCE) */
		assert_true(ptu_counter(end[i], "direct_copy_rx_bytes") > copied[i]);
		assert_int_equal(ptu_counter(end[i], "pmd_rx_bursts"), rx[i]);
		assert_int_equal(ptu_counter(end[i], "pmd_tx_bursts"), tx[i]);
	}
	rocemu_port_close(end[1]);
	rocemu_port_close(end[0]);
}

static void test_new_peer_unparks(void **state)
{
	struct rocemu_port *end[2];
	uint64_t parks[2], zero[2] = {0, 0}, rx;

	(void)state;
	end[0] = open_end(0);
	end[1] = open_end(1);
	connect_and_park(end, zero, 1);
	/* the client closes (the close handshake): the server's channel is
	 * reset, and with the next client its PMD is polled again (frames
	 * come there first) until the channel carries all again */
	parks[0] = ptu_counter(end[0], "pmd_parks");
	rx = ptu_counter(end[0], "pmd_rx_bursts");
	rocemu_port_close(end[1]);
	end[1] = open_end(1);
	parks[1] = 0;
	connect_and_park(end, parks, 2);
	assert_true(ptu_counter(end[0], "pmd_rx_bursts") > rx);
	assert_true(ptu_counter(end[0], "direct_resets") > 0);
	rocemu_port_close(end[1]);
	rocemu_port_close(end[0]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parked_pmd_is_not_called),
	    cmocka_unit_test(test_new_peer_unparks),
	};

	setenv("ROCEMU_MEMIF_DIRECT", "1", 1); /* whatever the environment says */
	for (int i = 0; i < 2; i++)	       /* an abstract socket: no file */
		snprintf(spec[i], sizeof(spec[i]), "memif:%s:/tmp/rocemu-md-parked-%d.sock",
			 i ? "client" : "server", (int)getpid());
	return cmocka_run_group_tests(tests, NULL, NULL);
}
