/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The away spin's wake-up (port_app.c hands the application's CPU to the
 * progress thread by waking it), on a memif pair in one process:
 * - a thread being woken wants no bell from the peer. Its `sleeping` flag
 *   in the bell page is cleared by the wake itself, so a frame the peer
 *   sends before the woken thread has run rings no futex (ib_write_lat: the
 *   peer's WRITE comes a few microseconds after the hand-over). The
 *   client's progress thread is stopped, so its slot holds exactly what the
 *   test put there: a sleeping flag the peer's frame rings (the control),
 *   then one a wake cleared, which the next frame leaves alone;
 * - a hand-over whose thread has not run when the wake returns yields the
 *   CPU (progress_away_yields). The client's thread is started on another
 *   CPU than the test's, so a wake from here takes an interrupt there and
 *   the thread is still asleep when the wake returns: rounds repeat until
 *   a hand-over happens. Skipped with one CPU.
 * cmocka.
 */
#include <sched.h>
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

static char sock_spec[2][128];

static struct rocemu_port *open_end(int client)
{
	char err[256];
	struct rocemu_port *port =
	    ptu_open(sock_spec[client], client ? "10.78.0.2/24" : "10.78.0.1/24",
		     client ? "02:00:00:78:00:02" : "02:00:00:78:00:01", err, sizeof(err));

	if (!port)
		fail_msg("open %s: %s", sock_spec[client], err);
	return port;
}

/* One echo request from srv to the client's address, handed to the device
 * (and so past the bell decision) before this returns. */
static void ping_once(struct rocemu_port *srv, uint16_t seq)
{
	uint64_t sent = ptu_counter(srv, "ping_requests_tx");
	uint64_t tx = ptu_counter(srv, "tx_frames");
	uint8_t dst[16];

	assert_int_equal(rocemu_gid_parse("10.78.0.2", dst), 0);
	assert_int_equal(rocemu_port_ping(srv, dst, 9, seq), 0);
	assert_int_equal(ptu_counter(srv, "ping_requests_tx"), sent + 1);
	assert_true(ptu_counter(srv, "tx_frames") > tx);
}

static void test_wake_clears_sleeping(void **state)
{
	struct rocemu_port *srv, *cli;
	struct memif_bell_slot *slot;
	struct memif_link *l;
	unsigned bell;
	uint64_t rung;

	(void)state;
	srv = open_end(0);
	cli = open_end(1);
	assert_true(ptu_wait_link(cli));
	assert_true(ptu_ping(srv, "10.78.0.2", 1)); /* both pages attached, MAC known */
	l = cli->link_priv;
	if (!l->page) { /* no bell page (shm refused): datagram bells, no flag */
		rocemu_port_close(cli);
		rocemu_port_close(srv);
		skip();
	}
	slot = memif_own(l);
	/* the server sees our pid: it rings our futex, no datagram */
	assert_int_not_equal(atomic_load(&slot->pid), 0);
	rocemu_port_progress_thread_stop(cli);
	assert_int_equal(atomic_load(&slot->app_waiting_tsc), 0);
	assert_int_equal(atomic_load(&slot->app_busy), 0);

	/* control: a sleeping thread is rung by the peer's frame, once */
	atomic_store(&slot->sleeping, 1);
	rung = ptu_counter(srv, "bell_rung");
	ping_once(srv, 2);
	assert_int_equal(ptu_counter(srv, "bell_rung"), rung + 1);
	assert_int_equal(atomic_load(&slot->sleeping), 0);

	/* a thread woken by its own side (the away spin's hand-over, a kick)
	 * is not rung again for a frame that comes before it runs */
	atomic_store(&slot->sleeping, 1);
	bell = atomic_load(&slot->bell);
	port_wake_thread(cli);
	assert_int_not_equal(atomic_load(&slot->bell), bell);
	assert_int_equal(atomic_load(&slot->sleeping), 0);
	rung = ptu_counter(srv, "bell_rung");
	ping_once(srv, 3);
	assert_int_equal(ptu_counter(srv, "bell_rung"), rung);

	assert_int_equal(rocemu_port_progress_thread_start(cli), 0);
	rocemu_port_close(cli);
	rocemu_port_close(srv);
}

static void app_verb(struct rocemu_port *port, enum rocemu_verb verb, enum rocemu_verb_did did)
{
	rocemu_port_verb_enter(port, verb);
	rocemu_port_verb_leave(port, did);
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	assert_int_equal(sched_setaffinity(0, sizeof(set), &set), 0);
}

static void test_hand_over_yields(void **state)
{
	struct rocemu_port *srv, *cli;
	cpu_set_t all;
	uint64_t spins = 0, yields = 0;
	int cpus[2], n = 0;

	(void)state;
	assert_int_equal(sched_getaffinity(0, sizeof(all), &all), 0);
	for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
		if (CPU_ISSET(c, &all))
			cpus[n++] = c;
	if (n < 2)
		skip(); /* one CPU: the thread cannot be elsewhere */
	srv = open_end(0);
	pin(cpus[1]); /* the client's progress thread inherits this CPU */
	cli = open_end(1);
	pin(cpus[0]);
	assert_true(ptu_wait_link(cli));
	assert_true(ptu_ping(srv, "10.78.0.2", 1));
	for (int round = 0; round < 200 && !yields; round++) {
		uint64_t replies = rocemu_port_ping_replies(srv);
		uint8_t dst[16];

		/* the application posts, polls, finds it, goes away; the peer's
		 * ping is then taken by the client's thread alone */
		app_verb(cli, ROCEMU_VERB_POST, ROCEMU_DID_POST);
		app_verb(cli, ROCEMU_VERB_POLL, ROCEMU_DID_POLL_FOUND);
		assert_int_equal(rocemu_gid_parse("10.78.0.2", dst), 0);
		assert_int_equal(rocemu_port_ping(srv, dst, 9, (uint16_t)(round + 10)), 0);
		for (int i = 0; i < 5000 && rocemu_port_ping_replies(srv) == replies; i++)
			ptu_sleep_ms(1);
		assert_true(rocemu_port_ping_replies(srv) > replies);
		app_verb(cli, ROCEMU_VERB_POLL, ROCEMU_DID_POLL_EMPTY);
		app_verb(cli, ROCEMU_VERB_POST, ROCEMU_DID_POST);
		app_verb(cli, ROCEMU_VERB_POLL, ROCEMU_DID_POLL_FOUND); /* the hand-over */
		spins = ptu_counter(cli, "progress_away_spins");
		yields = ptu_counter(cli, "progress_away_yields");
	}
	assert_true(spins >= 1);
	assert_true(yields >= 1);
	assert_true(yields <= spins);
	rocemu_port_close(cli);
	rocemu_port_close(srv);
	pin(cpus[0]);
	assert_int_equal(sched_setaffinity(0, sizeof(all), &all), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_wake_clears_sleeping),
	    cmocka_unit_test(test_hand_over_yields),
	};
	char dir[] = "/tmp/rocemu-away-spin-wake-XXXXXX";
	int rc;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(sock_spec[0], sizeof(sock_spec[0]), "memif:server:%s/m.sock", dir);
	snprintf(sock_spec[1], sizeof(sock_spec[1]), "memif:client:%s/m.sock", dir);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	rmdir(dir);
	return rc;
}
