/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The counter registry: every counter of the port (port_counters.h) and of
 * the transport (ROCEMU_COUNTERS) has a name, no name is empty or used twice
 * in its layer (across layers one is: drop_bad_length is the codec's length
 * check at the port and the transport's, each printed with its layer),
 * every drop reason of the port is called drop_<reason> and every parse
 * status of the codec has its drop counter; a dropped frame increments the
 * counter named for its reason, which is listed once it is non-zero. The
 * CM's (CMA_STATS) and rsockets' (RS_STATS) counters are named once too, and
 * ROCEMU_STATS=all prints every one of them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../emulator/port/port_internal.h"
#include "../port/port_test_util.h"
#include "rocemu_transport.h"
#ifdef COUNTERS_RDMACM
#include <stdlib.h>
#include <unistd.h>

#include "cma.h"
#include "rsocket_stream.h"
#endif

static void assert_names_unique(const char *const *names, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		assert_non_null(names[i]);
		assert_true(names[i][0] != '\0');
		for (unsigned j = 0; j < i; j++)
			if (!strcmp(names[i], names[j]))
				fail_msg("counter %u and %u are both called %s", j, i, names[i]);
	}
}

static void test_port_names(void **state)
{
	const char *names[PC_COUNT];
	(void)state;

	for (unsigned c = 0; c < PC_COUNT; c++)
		names[c] = rocemu_port_counter_name((enum port_counter)c);
	assert_names_unique(names, PC_COUNT);
	assert_null(rocemu_port_counter_name(PC_COUNT));
	/* the drops, and only they, are called drop_<reason> */
	for (unsigned c = 0; c < PC_COUNT; c++)
		assert_int_equal(!strncmp(names[c], "drop_", 5), c >= PC_DROP_FIRST);
	assert_true(PC_LISTED_COUNT < PC_DROP_FIRST && PC_DROP_FIRST < PC_COUNT);
}

static void test_parse_status_drops(void **state)
{
	(void)state;
	for (unsigned s = ROCE_PARSE_OK + 1; s < ROCE_PARSE_STATUS_COUNT; s++) {
		char want[64];

		snprintf(want, sizeof(want), "drop_%s",
			 roce_parse_status_name((enum roce_parse_status)s));
		assert_string_equal(
		    rocemu_port_counter_name(port_parse_drop((enum roce_parse_status)s)), want);
	}
}

static void test_transport_names(void **state)
{
	const char *names[CTR_COUNT];
	(void)state;

	for (unsigned c = 0; c < CTR_COUNT; c++)
		names[c] = rocemu_engine_counter_name(c);
	assert_names_unique(names, CTR_COUNT);
	assert_null(rocemu_engine_counter_name(CTR_COUNT));
	/* a printed name is one line: what ROCEMU_STATS and rocemu stat print */
	for (unsigned c = 0; c < CTR_COUNT; c++)
		assert_null(strpbrk(names[c], " \t\n"));
}

/* b's counter called name among every counter, zero or not (absent: fail). */
static uint64_t all_counter(struct rocemu_port *port, const char *name)
{
	struct rocemu_counter c[PC_COUNT];
	unsigned n = rocemu_port_counters_all(port, c, PC_COUNT);

	assert_int_equal(n, PC_COUNT);
	for (unsigned i = 0; i < n; i++)
		if (!strcmp(c[i].name, name))
			return c[i].value;
	fail_msg("no counter %s", name);
	return 0;
}

static bool listed(struct rocemu_port *port, const char *name)
{
	struct rocemu_counter c[PC_COUNT];
	unsigned n = rocemu_port_counters(port, c, PC_COUNT);

	for (unsigned i = 0; i < n; i++)
		if (!strcmp(c[i].name, name))
			return true;
	return false;
}

static void open_port(struct rocemu_port_config *cfg, struct rocemu_port **port, const char *spec,
		      const char *ip, const char *mac)
{
	char err[512];

	if (ptu_config(cfg, spec, ip, mac, err, sizeof(err)))
		fail_msg("config: %s", err);
	if (rocemu_port_open(cfg, port, err, sizeof(err)))
		fail_msg("open %s: %s", spec, err);
	rocemu_port_progress_thread_stop(*port);
}

/* A frame of an ethertype rocemu does not speak, to b's MAC: dropped and
 * counted as drop_unsupported_ethertype (and in rx_drops), which is listed
 * from then on. */
static void test_drop_counted_by_name(void **state)
{
	struct rocemu_port_config ca, cb;
	struct rocemu_port *a, *b;
	struct rte_mbuf *m;
	uint8_t *f, mac[6];
	uint64_t drops;
	(void)state;

	open_port(&ca, &a, "ring:ctr:a", "10.8.0.1/24", "02:00:00:00:08:01");
	open_port(&cb, &b, "ring:ctr:b", "10.8.0.2/24", "02:00:00:00:08:02");
	assert_int_equal(all_counter(b, "drop_unsupported_ethertype"), 0);
	assert_false(listed(b, "drop_unsupported_ethertype"));
	assert_true(listed(b, "rx_drops")); /* PORT_COUNTERS are always listed */
	drops = all_counter(b, "rx_drops");

	rocemu_port_lock(a);
	m = rocemu_port_alloc_mbuf(a);
	assert_non_null(m);
	f = (uint8_t *)rte_pktmbuf_append(m, 60);
	assert_non_null(f);
	memset(f, 0, 60);
	rocemu_port_mac(b, mac);
	memcpy(f, mac, 6);
	rocemu_port_mac(a, mac);
	memcpy(f + 6, mac, 6);
	f[12] = 0x88; /* 0x88b5: IEEE 802 local experimental */
	f[13] = 0xb5;
	assert_int_equal(rocemu_port_tx(a, m), 0);
	rocemu_port_flush(a);
	rocemu_port_unlock(a);
	for (int i = 0; i < 100 && all_counter(b, "drop_unsupported_ethertype") == 0; i++) {
		rocemu_port_progress(b);
		ptu_sleep_ms(1);
	}
	assert_int_equal(all_counter(b, "drop_unsupported_ethertype"), 1);
	assert_int_equal(ptu_counter(b, "drop_unsupported_ethertype"), 1);
	assert_true(listed(b, "drop_unsupported_ethertype"));
	assert_int_equal(all_counter(b, "rx_drops"), drops + 1);

	/* the transport counts a drop of its own on the port (a P_Key mismatch) */
	rocemu_port_lock(b);
	rocemu_port_count(b, PC_DROP_BAD_PKEY);
	rocemu_port_unlock(b);
	assert_int_equal(ptu_counter(b, "drop_bad_pkey"), 1);
	rocemu_port_close(a);
	rocemu_port_close(b);
}

#ifdef COUNTERS_RDMACM
/*
 * A layer of rocemu's librdmacm: names as above, and what its report prints
 * on stderr with ROCEMU_STATS=all ("rocemu: LAYER NAME VALUE", every
 * counter once, in order, zero or not) and with ROCEMU_STATS=1 (only the
 * non-zero one, counter `bumped` set to 3 meanwhile).
 */
static void check_rdmacm_layer(const char *layer, const char *(*name)(unsigned), uint64_t *values,
			       unsigned n, void (*report)(void), unsigned bumped)
{
	const char *names[64];
	char want[128], got[128];
	uint64_t saved = values[bumped];
	FILE *out;
	int fd;

	assert_true(n <= 64 && bumped < n);
	for (unsigned c = 0; c < n; c++) {
		names[c] = name(c);
		assert_non_null(names[c]);
		assert_null(strpbrk(names[c], " \t\n"));
	}
	assert_names_unique(names, n);
	assert_null(name(n));

	out = tmpfile();
	assert_non_null(out);
	fflush(stderr);
	fd = dup(2);
	assert_true(fd >= 0);
	assert_true(dup2(fileno(out), 2) == 2);
	values[bumped] = 3;
	setenv("ROCEMU_STATS", "all", 1);
	report();
	setenv("ROCEMU_STATS", "1", 1);
	report();
	unsetenv("ROCEMU_STATS");
	values[bumped] = saved;
	fflush(stderr);
	assert_true(dup2(fd, 2) == 2);
	close(fd);

	rewind(out);
	for (unsigned c = 0; c <= n; c++) {
		unsigned i = c < n ? c : bumped; /* all, then the non-zero one */

		snprintf(want, sizeof(want), "rocemu: %s %s %u\n", layer, names[i],
			 i == bumped ? 3u : (unsigned)values[i]);
		assert_non_null(fgets(got, sizeof(got), out));
		assert_string_equal(got, want);
	}
	assert_null(fgets(got, sizeof(got), out));
	fclose(out);
}

static void test_cm_counters(void **state)
{
	(void)state;
	memset(cma_stats, 0, sizeof(cma_stats));
	check_rdmacm_layer("rdmacm cm", cma_stat_name, cma_stats, CMA_STAT_COUNT, cma_stats_report,
			   CMA_STAT_drop_backlog);
}

static void test_rsocket_counters(void **state)
{
	(void)state;
	memset(rs_stats, 0, sizeof(rs_stats));
	check_rdmacm_layer("rsocket", rs_stat_name, rs_stats, RS_STAT_COUNT, rs_stats_report,
			   RS_STAT_rx_bad_op);
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_port_names),	    cmocka_unit_test(test_parse_status_drops),
	    cmocka_unit_test(test_transport_names), cmocka_unit_test(test_drop_counted_by_name),
#ifdef COUNTERS_RDMACM
	    cmocka_unit_test(test_cm_counters),	    cmocka_unit_test(test_rsocket_counters),
#endif
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
