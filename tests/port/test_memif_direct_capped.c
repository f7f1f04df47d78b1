/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A sender whose memif direct channel is at its cap (the peer has not
 * given buffers back) waits without work: a pass that only finds its
 * frames still waiting counts none, so the progress thread naps instead
 * of spinning on the channel (with 1024 QPs it took 1.4-2.1 s of CPU in
 * 4 s beside its own application, bench/perf_analysis.md, "Many QPs").
 * A pair in one process, both ends with the channel and a cap of CAP
 * frames, the progress threads stopped so that the test runs every pass:
 *  - the client queues FRAMES frames while the server reads nothing: its
 *    passes send CAP of them and then report no work, try after try
 *    (direct_tx_capped counts each try);
 *  - once the server reads (and so gives the buffers back), every frame
 *    arrives, each once.
 * Counters only, no timing.
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

#include <rte_ether.h>
#include <rte_mbuf.h>

#include "port_test_util.h"

#define CAP	  16
#define FRAMES	  64
#define TRIES	  1000
#define FRAME_LEN 1000

static char spec[2][128];
static const char *const addr[2][2] = {{"10.79.0.1/24", "02:00:00:79:00:01"},
				       {"10.79.0.2/24", "02:00:00:79:00:02"}};
static const char *const ip[2] = {"10.79.0.1", "10.79.0.2"};

static struct rocemu_port *open_end(int i)
{
	struct rocemu_port *p = ptu_open_say(spec[i], addr[i][0], addr[i][1]);

	assert_non_null(p);
	return p;
}

/* A frame of the client's to the server's MAC (an EtherType nobody
 * handles: the server counts it received and drops it), built in the
 * client's pool, so the channel hands it over without a copy. */
static struct rte_mbuf *frame_to(struct rocemu_port *from, struct rocemu_port *to)
{
	struct rte_mbuf *m = rocemu_port_alloc_mbuf(from);
	struct rte_ether_hdr *eth;
	uint8_t mac[2][6];

	assert_non_null(m);
	eth = (struct rte_ether_hdr *)rte_pktmbuf_append(m, FRAME_LEN);
	assert_non_null(eth);
	memset(eth, 0x5a, FRAME_LEN);
	rocemu_port_mac(to, mac[0]);
	rocemu_port_mac(from, mac[1]);
	memcpy(eth->dst_addr.addr_bytes, mac[0], 6);
	memcpy(eth->src_addr.addr_bytes, mac[1], 6);
	eth->ether_type = rte_cpu_to_be_16(0x88b5); /* IEEE local experimental */
	return m;
}

static void test_capped_sender_waits_without_work(void **state)
{
	struct rocemu_port *end[2];
	uint64_t sent0, capped0, rx0, work = 0;
	unsigned tries;

	(void)state;
	end[0] = open_end(0);
	end[1] = open_end(1);
	assert_true(ptu_wait_link(end[1]));
	for (int i = 0; i < 2; i++)
		assert_true(ptu_counter_above(end[i], "direct_maps", 0));
	assert_true(ptu_ping(end[0], ip[1], 1));
	assert_true(ptu_ping(end[1], ip[0], 1));
	for (int i = 0; i < 2; i++) {
		rocemu_port_progress_thread_stop(end[i]);
		while (rocemu_port_progress(end[i]))
			; /* what the pings left */
	}
	sent0 = ptu_counter(end[1], "direct_tx_bytes");
	capped0 = ptu_counter(end[1], "direct_tx_capped");
	rx0 = ptu_counter(end[0], "rx_frames");

	for (int i = 0; i < FRAMES; i++)
		assert_int_equal(rocemu_port_tx(end[1], frame_to(end[1], end[0])), 0);
	/* the server reads nothing: CAP frames go, the rest wait, and the
	 * passes that only find them waiting report no work */
	for (int i = 0; i < TRIES; i++)
		work += rocemu_port_progress(end[1]);
	print_message("client: %lu work in %d passes, %lu bytes on the channel, %lu capped tries\n",
		      (unsigned long)work, TRIES,
		      (unsigned long)(ptu_counter(end[1], "direct_tx_bytes") - sent0),
		      (unsigned long)(ptu_counter(end[1], "direct_tx_capped") - capped0));
	assert_int_equal(ptu_counter(end[1], "direct_tx_bytes") - sent0, CAP * FRAME_LEN);
	assert_true(ptu_counter(end[1], "direct_tx_capped") - capped0 >= TRIES);
	assert_true(work <= CAP);

	/* the server reads and gives the buffers back: all arrive */
	for (tries = 0; tries < TRIES; tries++) {
		rocemu_port_progress(end[0]);
		rocemu_port_progress(end[1]);
		if (ptu_counter(end[0], "rx_frames") - rx0 >= FRAMES)
			break;
	}
	rocemu_port_progress(end[0]);
	assert_int_equal(ptu_counter(end[0], "rx_frames") - rx0, FRAMES);
	assert_int_equal(ptu_counter(end[1], "direct_tx_bytes") - sent0, FRAMES * FRAME_LEN);
	assert_int_equal(ptu_counter(end[1], "tx_drops"), 0);
	rocemu_port_close(end[1]);
	rocemu_port_close(end[0]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_capped_sender_waits_without_work),
	};
	char cap[16];

	setenv("ROCEMU_MEMIF_DIRECT", "1", 1); /* whatever the environment says */
	snprintf(cap, sizeof(cap), "%d", CAP);
	setenv("ROCEMU_MEMIF_DIRECT_TX_CAP", cap, 1);
	for (int i = 0; i < 2; i++)
		snprintf(spec[i], sizeof(spec[i]), "memif:%s:/tmp/rocemu-md-capped-%d.sock",
			 i ? "client" : "server", (int)getpid());
	return cmocka_run_group_tests(tests, NULL, NULL);
}
