/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The away spin on memif (port_app.c hands the application's CPU to the
 * progress thread by waking it): a thread being woken wants no bell from
 * the peer. Its `sleeping` flag in the bell page is cleared by the wake
 * itself, so a frame the peer sends before the woken thread has run rings
 * no futex (ib_write_lat: the peer's WRITE comes a few microseconds after
 * the hand-over). A memif pair in one process; the client's progress
 * thread is stopped, so its slot holds exactly what the test put there:
 * a sleeping flag that the peer's frame rings (the control), then one a
 * wake cleared, which the next frame leaves alone (bell_rung unchanged).
 * cmocka.
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

#include "port_memif.h"
#include "port_test_util.h"

static char sock_spec[2][128];

static struct rocemu_port *open_end(int client)
{
	struct rocemu_port_config cfg;
	struct rocemu_port *port = NULL;
	char err[256];

	assert_int_equal(
	    ptu_config(&cfg, sock_spec[client], client ? "10.78.0.2/24" : "10.78.0.1/24",
		       client ? "02:00:00:78:00:02" : "02:00:00:78:00:01", err, sizeof(err)),
	    0);
	if (rocemu_port_open(&cfg, &port, err, sizeof(err)))
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_wake_clears_sleeping),
	};
	char dir[] = "/tmp/rocemu-away-spin-memif-XXXXXX";
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
