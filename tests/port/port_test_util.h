/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers for the tests that drive rocemu ports and engines directly (tests/port,
 * tests/transport, tests/conformance, tests/fuzz_engine): a port config and a
 * counter looked up by name. Needs rocemu_port.h.
 */
#ifndef ROCEMU_TESTS_PORT_TEST_UTIL_H
#define ROCEMU_TESTS_PORT_TEST_UTIL_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../../emulator/port/rocemu_port.h"

/* cfg initialised with port = spec, ip, mac and an MTU of 4200.
 * 0, or -EINVAL with the reason in err. */
static inline int ptu_config(struct rocemu_port_config *cfg, const char *spec, const char *ip,
			     const char *mac, char *err, size_t errlen)
{
	rocemu_port_config_init(cfg);
	if (rocemu_port_config_set(cfg, "port", spec, err, errlen) ||
	    rocemu_port_config_set(cfg, "ip", ip, err, errlen) ||
	    rocemu_port_config_set(cfg, "mac", mac, err, errlen) ||
	    rocemu_port_config_set(cfg, "mtu", "4200", err, errlen))
		return -EINVAL;
	return 0;
}

/* A port opened with ptu_config's settings; NULL with the reason in err. */
static inline struct rocemu_port *ptu_open(const char *spec, const char *ip, const char *mac,
					   char *err, size_t errlen)
{
	struct rocemu_port_config cfg;
	struct rocemu_port *port = NULL;

	if (ptu_config(&cfg, spec, ip, mac, err, errlen) ||
	    rocemu_port_open(&cfg, &port, err, errlen))
		return NULL;
	return port;
}

/* The value of the counter called name among c[0..n), 0 when it is not there. */
static inline uint64_t ptu_counter_in(const struct rocemu_counter *c, unsigned n, const char *name)
{
	for (unsigned i = 0; i < n; i++)
		if (!strcmp(c[i].name, name))
			return c[i].value;
	return 0;
}

/* A port's counter by name (0 when absent). */
static inline uint64_t ptu_counter(struct rocemu_port *port, const char *name)
{
	struct rocemu_counter c[256];
	unsigned n = rocemu_port_counters(port, c, 256);

	return ptu_counter_in(c, n < 256 ? n : 256, name);
}

static inline void ptu_sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* Wait (10 s at most) until the counter name of port exceeds than. */
static inline bool ptu_counter_above(struct rocemu_port *port, const char *name, uint64_t than)
{
	for (int i = 0; i < 1000; i++) {
		if (ptu_counter(port, name) > than)
			return true;
		ptu_sleep_ms(10);
	}
	return false;
}

/* ptu_open that says on stderr why it failed (the caller asserts). */
static inline struct rocemu_port *ptu_open_say(const char *spec, const char *ip, const char *mac)
{
	char err[256];
	struct rocemu_port *p = ptu_open(spec, ip, mac, err, sizeof(err));

	if (!p)
		fprintf(stderr, "open %s: %s\n", spec, err);
	return p;
}

/* Wait (10 s at most) until the port's link is up. */
static inline bool ptu_wait_link(struct rocemu_port *port)
{
	for (int i = 0; i < 1000; i++) {
		if (rocemu_port_link_up(port))
			return true;
		ptu_sleep_ms(10);
	}
	return false;
}

/* from pings to (an address), within 10 s (resolution included); true when
 * answered. A lost request (a link not carrying yet) is asked again. */
static inline bool ptu_ping(struct rocemu_port *from, const char *to, uint16_t seq)
{
	uint64_t before = rocemu_port_ping_replies(from);
	uint8_t dst[16];
	int rc = -EAGAIN;

	if (rocemu_gid_parse(to, dst))
		return false;
	for (int i = 0; i < 10000; i++) {
		if (rc != 0) {
			rc = rocemu_port_ping(from, dst, 7, seq);
			if (rc && rc != -EAGAIN && rc != -EHOSTUNREACH)
				return false;
		}
		if (rc == 0 && rocemu_port_ping_replies(from) > before)
			return true;
		if (rc == 0 && i % 1000 == 999)
			rc = -EAGAIN;
		ptu_sleep_ms(1);
	}
	return false;
}

#endif
