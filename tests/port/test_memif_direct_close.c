/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memif's direct channel at close (port_memif_direct.c): each open maps a
 * shared-memory object of about 40 MB for the port's frames, and the peer's
 * object too. A process that opens and closes a memif pair with the channel
 * N times must not keep N objects mapped: a closed port's object goes once
 * its pool is gone (the port frees it at close), the peer's view once no
 * frame of it is held. Counted in /proc/self/maps (the objects'
 * names) and in the process's resident memory, no timing.
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

#define ROUNDS 6

/* [0] the server, [1] the client: spec, address, MAC */
static char spec[2][128];
static const char *const addr[2][2] = {{"10.79.0.1/24", "02:00:00:79:00:01"},
				       {"10.79.0.2/24", "02:00:00:79:00:02"}};

static void open_pair(struct rocemu_port *end[2])
{
	char err[256];

	for (int i = 0; i < 2; i++) {
		end[i] = ptu_open(spec[i], addr[i][0], addr[i][1], err, sizeof(err));
		if (!end[i])
			fail_msg("open %s: %s", spec[i], err);
	}
}

/* Mappings of direct-channel objects (ours and views of the peer's). */
static unsigned md_mappings(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	unsigned n = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "/rocemu-md-"))
			n++;
	fclose(f);
	return n;
}

/* Resident memory, kB (shared memory mapped and touched included). */
static unsigned long rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long kb = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %lu kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* Both ends' channel up: each mapped the other's offer. */
static bool channel_up(struct rocemu_port *a, struct rocemu_port *b)
{
	for (int i = 0; i < 1000; i++) {
		if (ptu_counter(a, "direct_maps") && ptu_counter(b, "direct_maps"))
			return true;
		ptu_sleep_ms(10);
	}
	return false;
}

static void test_close_unmaps(void **state)
{
	unsigned long rss_first = 0;

	(void)state;
	for (int r = 0; r < ROUNDS; r++) {
		struct rocemu_port *end[2];
		unsigned open_maps, closed_maps;

		open_pair(end);
		assert_true(ptu_wait_link(end[1]));
		assert_true(channel_up(end[0], end[1]));
		assert_true(ptu_ping(end[0], "10.79.0.2", (uint16_t)(r + 1)));
		open_maps = md_mappings();
		rocemu_port_close(end[1]);
		rocemu_port_close(end[0]);
		closed_maps = md_mappings();
		print_message("round %d: %u object mappings open, %u after close, RSS %lu kB\n", r,
			      open_maps, closed_maps, rss_kb());
		/* open: our two objects and a view of each (header, area) */
		assert_true(open_maps >= 2);
		/* closed: the last port's object may wait for the next open or
		 * close; no more than one round's own objects, never a view */
		assert_true(closed_maps <= 2);
		if (r == 0)
			rss_first = rss_kb();
	}
	/* ~40 MB per object: N rounds keeping theirs would add 2 x 40 MB each */
	assert_true(rss_kb() < rss_first + 40 * 1024);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_close_unmaps),
	};

	/* the channel is asked for by both ends of this process; DPDK's memif
	 * socket is abstract: no file is made */
	setenv("ROCEMU_MEMIF_DIRECT", "1", 1);
	snprintf(spec[0], sizeof(spec[0]), "memif:server:/tmp/rocemu-md-close-%d.sock",
		 (int)getpid());
	snprintf(spec[1], sizeof(spec[1]), "memif:client:/tmp/rocemu-md-close-%d.sock",
		 (int)getpid());
	return cmocka_run_group_tests(tests, NULL, NULL);
}
