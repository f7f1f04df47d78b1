/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the port over ring pairs in one process: configuration
 * errors, the GID table and MTUs, ARP and ND resolution (answer, retry,
 * failure, expiry), ping, loopback, RoCE delivery and drop reasons, capture
 * (filter, rotation, nanosecond timestamps), the fault injector, and that
 * bringing EAL up leaves the program's thread affinity and signals alone.
 *
 * Progress threads are stopped in most tests so that each pass is driven
 * explicitly and the results do not depend on timing; where time must pass
 * (ARP timeouts, expiry) the test waits for the state, never asserts a time.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <pcap/pcap.h>

#if defined(__SANITIZE_ADDRESS__)
#define ASAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN_BUILD 1
#endif
#endif
#ifndef ASAN_BUILD
#define ASAN_BUILD 0
#endif

#include "roce_mbuf.h"
#include "roce_wire.h"
#include "rocemu_port.h"
#include "port_test_util.h"

static unsigned pair_seq;
/* The program's state before EAL came up, compared in test_eal_leaves_program_alone. */
static cpu_set_t affinity_before_eal;
static struct sigaction sigusr1_before_eal;

static void on_sigusr1(int sig)
{
	(void)sig;
}

static void set(struct rocemu_port_config *cfg, const char *opt, const char *val)
{
	char err[256];
	int rc = rocemu_port_config_set(cfg, opt, val, err, sizeof(err));

	if (rc)
		fail_msg("config %s=%s: %s", opt, val, err);
}

/* Two ports joined by a fresh ring pair; progress threads stopped. */
struct pair {
	struct rocemu_port *a, *b;
	struct rocemu_port_config ca, cb;
};

static void pair_config(struct pair *p, const char *extra_opt, const char *extra_val)
{
	char spec[64];
	unsigned seq = pair_seq++;

	rocemu_port_config_init(&p->ca);
	rocemu_port_config_init(&p->cb);
	snprintf(spec, sizeof(spec), "ring:t%u:a", seq);
	set(&p->ca, "port", spec);
	set(&p->ca, "name", "porta");
	set(&p->ca, "ip", "10.9.0.1/24");
	set(&p->ca, "ip", "fd00:9::1/64");
	snprintf(spec, sizeof(spec), "ring:t%u:b", seq);
	set(&p->cb, "port", spec);
	set(&p->cb, "name", "portb");
	set(&p->cb, "ip", "10.9.0.2/24");
	set(&p->cb, "ip", "fd00:9::2/64");
	if (extra_opt) {
		set(&p->ca, extra_opt, extra_val);
		set(&p->cb, extra_opt, extra_val);
	}
}

static void pair_open(struct pair *p)
{
	char err[512];

	if (rocemu_port_open(&p->ca, &p->a, err, sizeof(err)))
		fail_msg("open a: %s", err);
	if (rocemu_port_open(&p->cb, &p->b, err, sizeof(err)))
		fail_msg("open b: %s", err);
	rocemu_port_progress_thread_stop(p->a);
	rocemu_port_progress_thread_stop(p->b);
}

static void pair_close(struct pair *p)
{
	rocemu_port_close(p->a);
	rocemu_port_close(p->b);
}

static void pump(struct pair *p, int passes)
{
	for (int i = 0; i < passes; i++) {
		rocemu_port_progress(p->a);
		rocemu_port_progress(p->b);
	}
}

static int resolve(struct rocemu_port *port, const char *addr, uint8_t mac[6])
{
	uint8_t gid[16];
	int rc;

	assert_int_equal(rocemu_gid_parse(addr, gid), 0);
	rocemu_port_lock(port);
	rc = rocemu_port_resolve(port, 1, gid, mac);
	rocemu_port_unlock(port);
	return rc;
}

/* ------------------------------------------------------------------------ */

static void test_config_errors(void **state)
{
	struct rocemu_port_config cfg;
	char err[256];
	static const char *const bad[][2] = {
	    {"port", "bogus:x"},
	    {"port", "memif:x"},
	    {"port", "memif:server:"},
	    {"port", "af_packet:"},
	    {"port", "ring:x"},
	    {"port", "ring:x:c"},
	    {"port", "dpdk:"},
	    {"mac", "01:00:00:00:00:01"},
	    {"mac", "zz"},
	    {"ip", "10.0.0.1/33"},
	    {"ip", "300.1.1.1/24"},
	    {"ip", "fe80::1/129"},
	    {"ip", "224.0.0.1/4"},
	    {"ip", "ff02::1/64"},
	    {"ip", "::ffff:1.2.3.4/96"},
	    {"mtu", "100"},
	    {"mtu", "abc"},
	    {"mtu", "99999"},
	    {"capture-rotate", "5"},
	    {"arp-timeout", "0"},
	    {"fault-drop", "tx:2000000"},
	    {"fault-drop-list", "1,2"},
	    {"name", "a b"},
	    {"vlan", "0"},
	    {"vlan", "4095"},
	    {"vlan-untagged", "maybe"},
	    {"ecn", "ce"},
	    {"progress-cpu", "x"},
	    {"progress-cpu", "99999"},
	};
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		rocemu_port_config_init(&cfg);
		err[0] = 0;
		assert_int_equal(
		    rocemu_port_config_set(&cfg, bad[i][0], bad[i][1], err, sizeof(err)), -EINVAL);
		assert_true(err[0] != 0);
		assert_null(strchr(err, '\n'));
		assert_non_null(strstr(err, bad[i][0])); /* names the option */
	}
	rocemu_port_config_init(&cfg);
	assert_int_equal(rocemu_port_config_set(&cfg, "no-such-option", "1", err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "no-such-option"));
	/* the same address twice */
	assert_int_equal(rocemu_port_config_set(&cfg, "ip", "10.1.1.1/24", err, sizeof(err)), 0);
	assert_int_equal(rocemu_port_config_set(&cfg, "ip", "10.1.1.1/16", err, sizeof(err)),
			 -EINVAL);
	/* validation: a port is required; filters need a capture */
	assert_int_equal(rocemu_port_config_validate(&cfg, err, sizeof(err)), -EINVAL);
	assert_int_equal(
	    rocemu_port_config_set(&cfg, "port", "memif:client:/tmp/x.sock", err, sizeof(err)), 0);
	assert_int_equal(rocemu_port_config_validate(&cfg, err, sizeof(err)), 0);
	assert_int_equal(rocemu_port_config_set(&cfg, "capture-filter", "arp", err, sizeof(err)),
			 0);
	assert_int_equal(rocemu_port_config_validate(&cfg, err, sizeof(err)), -EINVAL);
	/* good values land in the struct */
	assert_int_equal(rocemu_port_config_set(&cfg, "capture-rotate", "1M", err, sizeof(err)), 0);
	assert_int_equal(cfg.capture_rotate_bytes, 1u << 20);
	assert_int_equal(rocemu_port_config_set(&cfg, "mac", "02:11:22:33:44:55", err, sizeof(err)),
			 0);
	assert_true(cfg.mac_set);
	assert_int_equal(cfg.mac[5], 0x55);
	assert_int_equal(rocemu_port_config_set(&cfg, "fault-drop", "rx:500", err, sizeof(err)), 0);
	assert_true(cfg.fault_enabled);
	assert_int_equal(cfg.ecn, ROCEMU_ECN_ECT0); /* the default */
	assert_int_equal(rocemu_port_config_set(&cfg, "ecn", "off", err, sizeof(err)), 0);
	assert_int_equal(rocemu_ecn_bits(cfg.ecn), 0);
	assert_int_equal(rocemu_port_config_set(&cfg, "ecn", "ect1", err, sizeof(err)), 0);
	assert_int_equal(rocemu_ecn_bits(cfg.ecn), 1);
	/* --vlan-untagged needs --vlan */
	cfg.capture_filter[0] = 0;
	cfg.capture_rotate_bytes = 0;
	assert_int_equal(rocemu_port_config_validate(&cfg, err, sizeof(err)), 0);
	assert_int_equal(rocemu_port_config_set(&cfg, "vlan-untagged", "accept", err, sizeof(err)),
			 0);
	assert_int_equal(rocemu_port_config_validate(&cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--vlan"));
	assert_int_equal(rocemu_port_config_set(&cfg, "vlan", "4094", err, sizeof(err)), 0);
	assert_int_equal(cfg.vlan, 4094);
	assert_int_equal(cfg.fault.drop_ppm[1], 500);
	assert_int_equal(cfg.fault.drop_ppm[0], 0);
}

static void test_eal_leaves_program_alone(void **state)
{
	cpu_set_t now;
	struct sigaction sa;
	sigset_t mask;
	struct pair p;
	(void)state;

	pair_config(&p, NULL, NULL);
	pair_open(&p);
	/* EAL pins its main thread; we must have undone that */
	assert_int_equal(pthread_getaffinity_np(pthread_self(), sizeof(now), &now), 0);
	assert_true(CPU_EQUAL(&affinity_before_eal, &now));
	/* the program's handler is still there, and no signal is left blocked */
	sigaction(SIGUSR1, NULL, &sa);
	assert_ptr_equal(sa.sa_handler, sigusr1_before_eal.sa_handler);
	pthread_sigmask(SIG_SETMASK, NULL, &mask);
	assert_false(sigismember(&mask, SIGUSR1));
	assert_false(sigismember(&mask, SIGINT));
	/* and it still reaches us: raise() runs the handler in this thread */
	assert_int_equal(raise(SIGUSR1), 0);
	assert_non_null(strstr(rocemu_eal_args(), "--lcores=0@("));
	assert_true(strstr(rocemu_eal_args(), "--in-memory") ||
		    strstr(rocemu_eal_args(), "--no-shconf"));
	pair_close(&p);
}

static void test_gid_table_and_mtu(void **state)
{
	struct pair p;
	static const uint8_t ll_prefix[8] = {0xfe, 0x80};
	uint8_t mac[6], mac2[6], gid[16], want[16];
	(void)state;

	pair_config(&p, NULL, NULL);
	pair_open(&p);
	rocemu_port_mac(p.a, mac);
	assert_int_equal(mac[0] & 0x03, 0x02); /* locally administered unicast */
	assert_int_equal(rocemu_port_gid_count(p.a), 3);
	/* 0: fe80::/64 + modified EUI-64 of the MAC */
	assert_int_equal(rocemu_port_gid(p.a, 0, gid), 0);
	assert_memory_equal(gid, ll_prefix, 8);
	const uint8_t eui64[8] = {mac[0] ^ 2, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]};
	assert_memory_equal(gid + 8, eui64, 8);
	/* 1: IPv4-mapped, like rxe */
	assert_int_equal(rocemu_port_gid(p.a, 1, gid), 0);
	assert_int_equal(rocemu_gid_parse("::ffff:10.9.0.1", want), 0);
	assert_memory_equal(gid, want, 16);
	assert_int_equal(rocemu_port_gid_find(p.a, want), 1);
	assert_int_equal(rocemu_port_gid(p.a, 2, gid), 0);
	assert_int_equal(rocemu_gid_parse("fd00:9::1", want), 0);
	assert_memory_equal(gid, want, 16);
	assert_int_equal(rocemu_port_gid(p.a, 3, gid), -EINVAL);
	assert_int_equal(rocemu_gid_parse("10.9.0.2", want), 0);
	assert_int_equal(rocemu_port_gid_find(p.a, want), -1);
	/* software links default to 4200: a 4096 IB MTU fits */
	assert_int_equal(rocemu_port_eth_mtu(p.a), 4200);
	assert_int_equal(rocemu_port_active_mtu(p.a), 4096);
	assert_true(rocemu_port_link_up(p.a));
	/* the two sides differ; a reopened side gets the same MAC */
	rocemu_port_mac(p.b, mac2);
	assert_memory_not_equal(mac, mac2, 6);
	rocemu_port_close(p.a);
	{
		char err[256];
		assert_int_equal(rocemu_port_open(&p.ca, &p.a, err, sizeof(err)), 0);
	}
	rocemu_port_mac(p.a, mac2);
	assert_memory_equal(mac, mac2, 6);
	pair_close(&p);

	/* Ethernet MTU 1500 -> IB MTU 1024 (1500 - 92 < 2048), as rxe reports */
	pair_config(&p, "mtu", "1500");
	pair_open(&p);
	assert_int_equal(rocemu_port_active_mtu(p.a), 1024);
	pair_close(&p);
	pair_config(&p, "mtu", "2140");
	pair_open(&p);
	assert_int_equal(rocemu_port_active_mtu(p.a), 2048);
	pair_close(&p);
}

static void test_arp_resolution(void **state)
{
	struct pair p;
	uint8_t mac[6], bmac[6], amac[6];
	(void)state;

	pair_config(&p, NULL, NULL);
	pair_open(&p);
	pump(&p, 2); /* link up: gratuitous ARPs go out */
	assert_true(ptu_counter(p.a, "gratuitous_arp_tx") >= 1);
	rocemu_port_mac(p.b, bmac);
	rocemu_port_mac(p.a, amac);
	assert_int_equal(resolve(p.a, "10.9.0.2", mac), -EAGAIN);
	assert_int_equal(ptu_counter(p.a, "arp_requests_tx"), 1);
	assert_int_equal(resolve(p.a, "10.9.0.2", mac), -EAGAIN); /* no second request yet */
	assert_int_equal(ptu_counter(p.a, "arp_requests_tx"), 1);
	pump(&p, 3);
	assert_int_equal(ptu_counter(p.b, "arp_replies_tx"), 1);
	assert_int_equal(resolve(p.a, "10.9.0.2", mac), 0);
	assert_memory_equal(mac, bmac, 6);
	/* b learnt a from the request, unconfirmed (RFC 4861 7.2.3 STALE):
	 * resolves at once and confirms with a request of its own */
	assert_int_equal(resolve(p.b, "10.9.0.1", mac), 0);
	assert_memory_equal(mac, amac, 6);
	assert_int_equal(ptu_counter(p.b, "arp_requests_tx"), 1);
	/* our own address resolves to our MAC (loopback) */
	assert_int_equal(resolve(p.a, "10.9.0.1", mac), 0);
	assert_memory_equal(mac, amac, 6);
	/* IPv6: neighbour solicitation / advertisement */
	assert_int_equal(resolve(p.a, "fd00:9::2", mac), -EAGAIN);
	assert_int_equal(ptu_counter(p.a, "nd_solicits_tx"), 1);
	pump(&p, 3);
	assert_int_equal(resolve(p.a, "fd00:9::2", mac), 0);
	assert_memory_equal(mac, bmac, 6);
	pair_close(&p);
}

static void test_arp_retry_and_failure(void **state)
{
	struct pair p;
	uint8_t mac[6];
	int rc;
	(void)state;

	pair_config(&p, "arp-timeout", "10");
	set(&p.ca, "arp-retries", "3");
	pair_open(&p);
	assert_int_equal(resolve(p.a, "10.9.0.77", mac), -EAGAIN);
	/* nobody answers: the port retries, then reports the failure */
	for (int i = 0; i < 2000; i++) {
		pump(&p, 1);
		rc = resolve(p.a, "10.9.0.77", mac);
		if (rc != -EAGAIN)
			break;
		ptu_sleep_ms(1);
	}
	assert_int_equal(rc, -EHOSTUNREACH);
	if (ptu_counter(p.a, "arp_requests_tx") != 3)
		rocemu_port_counters_print(p.a, stderr);
	assert_int_equal(ptu_counter(p.a, "arp_requests_tx"), 3);
	assert_int_equal(ptu_counter(p.a, "neigh_failed"), 1);
	/* b saw every request and counted them as not for it */
	pump(&p, 2);
	assert_int_equal(ptu_counter(p.b, "drop_arp_not_for_us"), 3);
	/* the failure sticks for a while rather than flooding ARP */
	assert_int_equal(resolve(p.a, "10.9.0.77", mac), -EHOSTUNREACH);
	pair_close(&p);
}

static void test_arp_expiry(void **state)
{
	struct pair p;
	uint8_t mac[6];
	uint64_t req, t0;
	int rc = 0;
	(void)state;

	pair_config(&p, "arp-timeout", "10");
	set(&p.ca, "arp-expire", "30");
	pair_open(&p);
	assert_int_equal(resolve(p.a, "10.9.0.2", mac), -EAGAIN);
	t0 = rocemu_now_ns(); /* the port's clock: the entry is confirmed after this */
	pump(&p, 3);
	assert_int_equal(resolve(p.a, "10.9.0.2", mac), 0);
	req = ptu_counter(p.a, "arp_requests_tx");
	/* within the expiry time: no new request. Checked only when this
	 * thread provably ran inside the 30 ms (a loaded machine may have
	 * descheduled it past the expiry: then the entry was rightly
	 * re-confirmed, and the expiry itself is checked below anyway) */
	assert_int_equal(resolve(p.a, "10.9.0.2", mac), 0);
	if (rocemu_now_ns() < t0 + 30000000ull)
		assert_int_equal(ptu_counter(p.a, "arp_requests_tx"), req);
	else
		req = ptu_counter(p.a, "arp_requests_tx");
	ptu_sleep_ms(40);
	/* expired: still usable, and re-confirmed by a new request */
	assert_int_equal(resolve(p.a, "10.9.0.2", mac), 0);
	assert_int_equal(ptu_counter(p.a, "arp_requests_tx"), req + 1);
	pump(&p, 3);
	assert_int_equal(ptu_counter(p.b, "arp_replies_tx"), 2);
	/* now the peer goes away: after expiry the entry fails */
	rocemu_port_close(p.b);
	p.b = NULL;
	ptu_sleep_ms(40);
	for (int i = 0; i < 2000; i++) {
		rocemu_port_progress(p.a);
		rc = resolve(p.a, "10.9.0.2", mac);
		if (rc == -EHOSTUNREACH)
			break;
		ptu_sleep_ms(1);
	}
	assert_int_equal(rc, -EHOSTUNREACH);
	rocemu_port_close(p.a);
}

/* ------------------------------------------------------------------------ */

struct recorder {
	unsigned n;
	uint32_t psns[64];
	struct roce_pkt last;
	uint8_t payload[64];
	uint32_t payload_len;
};

static void rec_rx(void *ctx, struct rte_mbuf **pkts, struct roce_pkt *descs, uint16_t n)
{
	struct recorder *r = ctx;

	for (uint16_t i = 0; i < n; i++) {
		if (r->n < 64)
			r->psns[r->n] = descs[i].psn;
		r->n++;
		r->last = descs[i];
		r->payload_len = descs[i].payload_len < 64 ? descs[i].payload_len : 64;
		memcpy(r->payload, rte_pktmbuf_mtod(pkts[i], uint8_t *) + descs[i].payload_off,
		       r->payload_len);
		rte_pktmbuf_free(pkts[i]);
	}
}

static unsigned rec_poll(void *ctx, uint64_t now)
{
	(void)ctx;
	(void)now;
	return 0;
}

static bool rec_has_work(void *ctx)
{
	(void)ctx;
	return false;
}

/* An RC SEND ONLY from port `from` (GID index 1) to dst with dst_mac. */
static struct rte_mbuf *roce_frame_psn(struct rocemu_port *from, const char *dst,
				       const uint8_t dst_mac[6], uint32_t dqpn, uint32_t psn);

static struct rte_mbuf *roce_frame(struct rocemu_port *from, const char *dst,
				   const uint8_t dst_mac[6], uint32_t dqpn)
{
	return roce_frame_psn(from, dst, dst_mac, dqpn, 7);
}

static struct rte_mbuf *roce_frame_psn(struct rocemu_port *from, const char *dst,
				       const uint8_t dst_mac[6], uint32_t dqpn, uint32_t psn)
{
	struct roce_pkt pkt;
	struct rte_mbuf *m = rocemu_port_alloc_mbuf(from);
	static const char payload[] = "hello, loopback";

	assert_non_null(m);
	memset(&pkt, 0, sizeof(pkt));
	memcpy(pkt.path.dst_mac, dst_mac, 6);
	rocemu_port_mac(from, pkt.path.src_mac);
	rocemu_port_gid(from, 1, pkt.path.src_gid);
	assert_int_equal(rocemu_gid_parse(dst, pkt.path.dst_gid), 0);
	pkt.path.ip_version = 4;
	pkt.path.ttl = 64;
	pkt.path.udp_sport = 0xC001;
	pkt.path.udp_dport = ROCE_UDP_PORT;
	pkt.opcode = ROCE_OP_SEND_ONLY;
	pkt.pkey = ROCE_DEFAULT_PKEY;
	pkt.dqpn = dqpn;
	pkt.psn = psn;
	pkt.payload_len = sizeof(payload);
	assert_int_equal(roce_mbuf_build(m, &pkt, payload), 0);
	return m;
}

static void test_loopback(void **state)
{
	struct pair p;
	struct recorder ra = {0}, rb = {0};
	struct rocemu_port_upper ua = {&ra, rec_rx, rec_poll, rec_has_work, NULL, NULL};
	struct rocemu_port_upper ub = {&rb, rec_rx, rec_poll, rec_has_work, NULL, NULL};
	uint8_t mac[6];
	(void)state;

	pair_config(&p, NULL, NULL);
	pair_open(&p);
	rocemu_port_set_upper(p.a, &ua);
	rocemu_port_set_upper(p.b, &ub);
	pump(&p, 2); /* link up, announcements out of the way */
	rocemu_port_lock(p.a);
	assert_int_equal(rocemu_port_resolve(p.a, 1,
					     (const uint8_t[16]){0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff,
								 0xff, 10, 9, 0, 1},
					     mac),
			 0);
	assert_int_equal(rocemu_port_tx(p.a, roce_frame(p.a, "10.9.0.1", mac, 0x12)), 0);
	/* not delivered inside tx: on a later progress pass */
	assert_int_equal(ra.n, 0);
	assert_int_equal(rocemu_port_progress_locked(p.a), 1);
	rocemu_port_unlock(p.a);
	assert_int_equal(ra.n, 1);
	assert_int_equal(ra.last.dqpn, 0x12);
	assert_int_equal(ra.last.opcode, ROCE_OP_SEND_ONLY);
	assert_memory_equal(ra.payload, "hello, loopback", 16);
	assert_int_equal(ptu_counter(p.a, "loopback_frames"), 1);
	pump(&p, 2);
	assert_int_equal(rb.n, 0); /* nothing left the port */
	assert_int_equal(ptu_counter(p.a, "tx_frames") - ptu_counter(p.a, "gratuitous_arp_tx") -
			     ptu_counter(p.a, "nd_adverts_tx"),
			 0);
	pair_close(&p);
}

/*
 * rocemu_port_tx_to (the engine's transmit) decides loopback from the MAC it
 * is given, not by reading the frame back: a frame to the peer goes out, and
 * one built for the peer but handed over with our own MAC loops back.
 */
static void test_tx_to_uses_given_mac(void **state)
{
	struct pair p;
	struct recorder ra = {0}, rb = {0};
	struct rocemu_port_upper ua = {&ra, rec_rx, rec_poll, rec_has_work, NULL, NULL};
	struct rocemu_port_upper ub = {&rb, rec_rx, rec_poll, rec_has_work, NULL, NULL};
	uint8_t amac[6], bmac[6];
	(void)state;

	pair_config(&p, NULL, NULL);
	pair_open(&p);
	rocemu_port_set_upper(p.a, &ua);
	rocemu_port_set_upper(p.b, &ub);
	rocemu_port_mac(p.a, amac);
	rocemu_port_mac(p.b, bmac);
	pump(&p, 2);
	rocemu_port_lock(p.a);
	assert_int_equal(rocemu_port_tx_to(p.a, roce_frame(p.a, "10.9.0.2", bmac, 2), bmac), 0);
	assert_int_equal(rocemu_port_tx_to(p.a, roce_frame(p.a, "10.9.0.1", bmac, 3), amac), 0);
	rocemu_port_unlock(p.a);
	pump(&p, 2);
	/* the second never left the port (its Ethernet header still names the
	 * peer, so our own receive may drop it after the loop) */
	assert_int_equal(rb.n, 1);
	assert_int_equal(rb.last.dqpn, 2);
	assert_int_equal(ptu_counter(p.a, "loopback_frames"), 1);
	pair_close(&p);
}

static void test_roce_delivery_and_drops(void **state)
{
	struct pair p;
	struct recorder rb = {0};
	struct rocemu_port_upper ub = {&rb, rec_rx, rec_poll, rec_has_work, NULL, NULL};
	uint8_t bmac[6];
	struct rte_mbuf *m;
	(void)state;

	pair_config(&p, NULL, NULL);
	pair_open(&p);
	rocemu_port_mac(p.b, bmac);
	/* no upper yet */
	rocemu_port_lock(p.a);
	rocemu_port_tx(p.a, roce_frame(p.a, "10.9.0.2", bmac, 1));
	rocemu_port_unlock(p.a);
	pump(&p, 2);
	assert_int_equal(ptu_counter(p.b, "drop_no_upper"), 1);
	rocemu_port_set_upper(p.b, &ub);
	/* good frame */
	rocemu_port_lock(p.a);
	rocemu_port_tx(p.a, roce_frame(p.a, "10.9.0.2", bmac, 2));
	/* not our address */
	rocemu_port_tx(p.a, roce_frame(p.a, "10.9.0.3", bmac, 3));
	/* corrupted payload: bad ICRC */
	m = roce_frame(p.a, "10.9.0.2", bmac, 4);
	rte_pktmbuf_mtod(m, uint8_t *)[m->data_len - 8] ^= 0x40;
	rocemu_port_tx(p.a, m);
	/* truncated */
	m = roce_frame(p.a, "10.9.0.2", bmac, 5);
	rte_pktmbuf_trim(m, 20);
	rocemu_port_tx(p.a, m);
	rocemu_port_unlock(p.a);
	pump(&p, 2);
	assert_int_equal(rb.n, 1);
	assert_int_equal(rb.last.dqpn, 2);
	assert_int_equal(ptu_counter(p.b, "rx_roce_frames"), 1);
	assert_int_equal(ptu_counter(p.b, "drop_not_our_address"), 1);
	{
		char name[64];
		snprintf(name, sizeof(name), "drop_%s",
			 roce_parse_status_name(ROCE_PARSE_BAD_ICRC));
		assert_int_equal(ptu_counter(p.b, name), 1);
	}
	assert_true(ptu_counter(p.b, "rx_drops") >= 4);
	/* upper layer drops land in the same table */
	rocemu_port_lock(p.b);
	rocemu_port_count(p.b, PC_DROP_BAD_PKEY);
	rocemu_port_count(p.b, PC_DROP_BAD_PKEY);
	rocemu_port_unlock(p.b);
	assert_int_equal(ptu_counter(p.b, "drop_bad_pkey"), 2);
	pair_close(&p);
}

static void test_ping(void **state)
{
	struct pair p;
	uint8_t dst[16];
	int rc;
	(void)state;

	pair_config(&p, NULL, NULL);
	pair_open(&p);
	assert_int_equal(rocemu_gid_parse("10.9.0.2", dst), 0);
	assert_int_equal(rocemu_port_ping(p.a, dst, 1, 1), -EAGAIN);
	pump(&p, 3);
	assert_int_equal(rocemu_port_ping(p.a, dst, 1, 2), 0);
	pump(&p, 3);
	assert_int_equal(rocemu_port_ping_replies(p.a), 1);
	assert_int_equal(ptu_counter(p.b, "icmp_echo_replies_tx"), 1);
	assert_true(rocemu_port_ping_last_rtt_ns(p.a) > 0);
	/* IPv6 global and link-local */
	assert_int_equal(rocemu_gid_parse("fd00:9::2", dst), 0);
	for (int i = 0; i < 5 && (rc = rocemu_port_ping(p.a, dst, 1, 3)) == -EAGAIN; i++)
		pump(&p, 3);
	assert_int_equal(rc, 0);
	pump(&p, 3);
	assert_int_equal(rocemu_port_ping_replies(p.a), 2);
	rocemu_port_gid(p.b, 0, dst);
	for (int i = 0; i < 5 && (rc = rocemu_port_ping(p.a, dst, 1, 4)) == -EAGAIN; i++)
		pump(&p, 3);
	assert_int_equal(rc, 0);
	pump(&p, 3);
	assert_int_equal(rocemu_port_ping_replies(p.a), 3);
	/* ping ourselves: loopback */
	assert_int_equal(rocemu_gid_parse("10.9.0.1", dst), 0);
	assert_int_equal(rocemu_port_ping(p.a, dst, 1, 5), 0);
	pump(&p, 3);
	assert_int_equal(rocemu_port_ping_replies(p.a), 4);
	pair_close(&p);
}

/* Both ports of p are open with their progress threads running: a pings b
 * (10.9.0.2) once, with no explicit pumping, and gets its reply. */
static void ping_b_threaded(struct pair *p)
{
	uint8_t dst[16];
	int rc = -EAGAIN;

	assert_int_equal(rocemu_gid_parse("10.9.0.2", dst), 0);
	for (int i = 0; i < 5000 && rc == -EAGAIN; i++) {
		rc = rocemu_port_ping(p->a, dst, 9, 1);
		if (rc == -EAGAIN)
			ptu_sleep_ms(1);
	}
	assert_int_equal(rc, 0);
	for (int i = 0; i < 5000 && rocemu_port_ping_replies(p->a) == 0; i++)
		ptu_sleep_ms(1);
	assert_int_equal(rocemu_port_ping_replies(p->a), 1);
}

/* Both ports of p configured and open, their progress threads left running. */
static void pair_open_threaded(struct pair *p)
{
	char err[256];

	pair_config(p, NULL, NULL);
	assert_int_equal(rocemu_port_open(&p->ca, &p->a, err, sizeof(err)), 0);
	assert_int_equal(rocemu_port_open(&p->cb, &p->b, err, sizeof(err)), 0);
}

static void test_progress_thread_answers(void **state)
{
	struct pair p;
	(void)state;

	/* both progress threads running: no explicit pumping at all */
	pair_open_threaded(&p);
	ping_b_threaded(&p);
	pair_close(&p);
}

static void note_line(void *arg, const char *line)
{
	snprintf(arg, 256, "%s", line);
}

/* A thread of ours named rocemu-progress whose only CPU is cpu and which
 * makes no voluntary context switch (no nap, no blocking) while we sleep
 * 100 ms: the spinning one. */
static bool spinner_on(int cpu)
{
	char path[64], comm[32];
	unsigned long before[64], after[64];
	pid_t tids[64];
	unsigned n = 0;
	bool found = false;

	for (int pass = 0; pass < 2; pass++) {
		DIR *d = opendir("/proc/self/task");
		struct dirent *e;

		assert_non_null(d);
		while ((e = readdir(d))) {
			pid_t tid = atoi(e->d_name);
			cpu_set_t set;
			unsigned long vol = ~0ul;
			FILE *f;

			snprintf(path, sizeof(path), "/proc/self/task/%d/comm", tid);
			if (tid <= 0 || !(f = fopen(path, "r")))
				continue;
			comm[0] = 0;
			(void)!fgets(comm, sizeof(comm), f);
			fclose(f);
			if (strncmp(comm, "rocemu-progress", 15) ||
			    sched_getaffinity(tid, sizeof(set), &set) || CPU_COUNT(&set) != 1 ||
			    !CPU_ISSET(cpu, &set))
				continue;
			snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
			if ((f = fopen(path, "r"))) {
				char line[128];

				while (fgets(line, sizeof(line), f))
					sscanf(line, "voluntary_ctxt_switches: %lu", &vol);
				fclose(f);
			}
			for (unsigned i = 0; pass == 1 && i < n; i++)
				if (tids[i] == tid)
					after[i] = vol;
			if (pass == 0 && n < 64) {
				tids[n] = tid;
				before[n] = vol;
				after[n++] = ~0ul;
			}
		}
		closedir(d);
		if (pass == 0)
			ptu_sleep_ms(100);
	}
	for (unsigned i = 0; i < n; i++)
		found |= after[i] != ~0ul && after[i] - before[i] <= 2;
	return found;
}

static uint64_t counter(struct rocemu_port *port, const char *name)
{
	struct rocemu_counter c[PC_COUNT];
	unsigned n = rocemu_port_counters_all(port, c, PC_COUNT);

	for (unsigned i = 0; i < n; i++)
		if (!strcmp(c[i].name, name))
			return c[i].value;
	fail_msg("no counter %s", name);
	return 0;
}

static void app_verb(struct rocemu_port *port, enum rocemu_verb verb, enum rocemu_verb_did did)
{
	rocemu_port_verb_enter(port, verb);
	rocemu_port_verb_leave(port, did);
}

/* The away spin (port_app.c): an application whose poll found all it waited
 * for, and which then got a frame only its progress thread could take (the
 * peer's ping while it made no verb call), hands the CPU to the thread at
 * its next such poll (progress_away_spins); a poll that found nothing, or
 * one after it blocked, does not. Rounds repeat until one fits the 2 ms the
 * evidence stays fresh, so a descheduled test only takes longer. */
static void test_away_spin(void **state)
{
	struct pair p;
	uint8_t dst[16];
	uint64_t spins = 0;
	(void)state;

	pair_open_threaded(&p);
	assert_int_equal(rocemu_gid_parse("10.9.0.1", dst), 0);
	for (int round = 0; round < 200 && !spins; round++) {
		uint64_t replies = rocemu_port_ping_replies(p.b);
		int rc = -EAGAIN;

		/* the application posts, polls, finds it, goes away */
		app_verb(p.a, ROCEMU_VERB_POST, ROCEMU_DID_POST);
		app_verb(p.a, ROCEMU_VERB_POLL, ROCEMU_DID_POLL_FOUND);
		for (int i = 0; i < 5000 && rc == -EAGAIN; i++) {
			rc = rocemu_port_ping(p.b, dst, 7, (uint16_t)round);
			if (rc == -EAGAIN)
				ptu_sleep_ms(1);
		}
		assert_int_equal(rc, 0);
		/* a's thread answers: a frame taken while its application was away */
		for (int i = 0; i < 5000 && rocemu_port_ping_replies(p.b) == replies; i++)
			ptu_sleep_ms(1);
		assert_true(rocemu_port_ping_replies(p.b) > replies);
		app_verb(p.a, ROCEMU_VERB_POLL, ROCEMU_DID_POLL_EMPTY);
		app_verb(p.a, ROCEMU_VERB_POST, ROCEMU_DID_POST);
		app_verb(p.a, ROCEMU_VERB_POLL, ROCEMU_DID_POLL_FOUND);
		spins = counter(p.a, "progress_away_spins");
	}
	assert_true(spins >= 1);
	/* a poll that found nothing, and one of an application about to
	 * block, hand nothing over */
	app_verb(p.a, ROCEMU_VERB_POST, ROCEMU_DID_POST);
	app_verb(p.a, ROCEMU_VERB_POLL, ROCEMU_DID_POLL_EMPTY);
	rocemu_port_app_blocks(p.a);
	assert_int_equal(counter(p.a, "progress_away_spins"), spins);
	/* the thread spins 100 us at most, then naps again: a close that
	 * waits for it returns */
	assert_true(counter(p.a, "progress_away_placed") <= spins);
	pair_close(&p);
}

/* progress-cpu: a CPU outside the mask is refused by name, from the option
 * and from ROCEMU_PROGRESS_CPU; one inside gets a pinned thread that
 * spins (never naps), says so once, works, and stops at close. */
static void test_progress_cpu(void **state)
{
	struct rocemu_port_config cfg;
	char err[256], cpu_text[16], notice[256] = "";
	cpu_set_t mask;
	int in = -1, out = -1;
	struct pair p;
	(void)state;

	assert_int_equal(sched_getaffinity(0, sizeof(mask), &mask), 0);
	for (int c = 0; c < CPU_SETSIZE && (in < 0 || out < 0); c++) {
		if (CPU_ISSET(c, &mask) && in < 0)
			in = c;
		if (!CPU_ISSET(c, &mask) && out < 0)
			out = c;
	}
	rocemu_port_config_init(&cfg);
	set(&cfg, "port", "ring:pc:a");
	snprintf(cpu_text, sizeof(cpu_text), "%d", out);
	set(&cfg, "progress-cpu", cpu_text);
	assert_int_equal(rocemu_port_config_validate(&cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--progress-cpu"));
	assert_non_null(strstr(err, "not one this process may run on"));
	assert_int_equal(rocemu_port_open(&cfg, &p.a, err, sizeof(err)), -EINVAL);
	rocemu_port_config_init(&cfg);
	set(&cfg, "port", "ring:pc:a");
	setenv("ROCEMU_PROGRESS_CPU", "zz", 1);
	assert_int_equal(rocemu_port_config_validate(&cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "ROCEMU_PROGRESS_CPU"));
	setenv("ROCEMU_PROGRESS_CPU", cpu_text, 1);
	assert_int_equal(rocemu_port_config_validate(&cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "ROCEMU_PROGRESS_CPU"));
	unsetenv("ROCEMU_PROGRESS_CPU");

	pair_config(&p, NULL, NULL);
	snprintf(cpu_text, sizeof(cpu_text), "%d", in);
	set(&p.ca, "progress-cpu", cpu_text);
	p.ca.notice = note_line;
	p.ca.notice_arg = notice;
	assert_int_equal(rocemu_port_open(&p.ca, &p.a, err, sizeof(err)), 0);
	assert_int_equal(rocemu_port_open(&p.cb, &p.b, err, sizeof(err)), 0);
	assert_int_equal(rocemu_port_progress_cpu(p.a), in);
	assert_int_equal(rocemu_port_progress_cpu(p.b), -1);
	snprintf(cpu_text, sizeof(cpu_text), "CPU %d,", in);
	assert_non_null(strstr(notice, cpu_text));
	assert_true(spinner_on(in));
	ping_b_threaded(&p);
	pair_close(&p); /* returns: the spinning thread stopped */
}

/* ------------------------------------------------------------------------ */

static char tmpdir[256];

/* rocemu's capture-point record: EtherType 0x88B5, "RCMU", version 1, type 1 */
static bool is_capture_point(const struct pcap_pkthdr *h, const u_char *d)
{
	return h->caplen >= 22 && d[12] == 0x88 && d[13] == 0xB5 && !memcmp(d + 14, "RCMU", 4) &&
	       d[18] == 1 && d[19] == 1;
}

/* Frames in a capture (rocemu's capture-point records apart: each file must open with one). */
static unsigned pcap_count(const char *path, unsigned *arp, unsigned *icmp, bool *nano)
{
	char errbuf[PCAP_ERRBUF_SIZE];
	pcap_t *pc =
	    pcap_open_offline_with_tstamp_precision(path, PCAP_TSTAMP_PRECISION_NANO, errbuf);
	struct pcap_pkthdr *h;
	const u_char *d;
	unsigned n = 0, points = 0;

	if (!pc)
		return 0;
	if (nano)
		*nano = pcap_get_tstamp_precision(pc) == PCAP_TSTAMP_PRECISION_NANO;
	while (pcap_next_ex(pc, &h, &d) == 1) {
		bool first = !n && !points;

		if (is_capture_point(h, d)) {
			points++;
			if (!first)
				fail_msg("%s: a capture point that does not open the file", path);
			continue;
		}
		if (first)
			fail_msg("%s: does not open with rocemu's capture point", path);
		n++;
		if (h->caplen >= 14 && d[12] == 0x08 && d[13] == 0x06 && arp)
			(*arp)++;
		if (h->caplen >= 24 && d[12] == 0x08 && d[13] == 0x00 && d[23] == 1 && icmp)
			(*icmp)++;
	}
	pcap_close(pc);
	return n;
}

static void ping_until_answered(struct pair *p, const char *addr, uint16_t seq)
{
	uint8_t dst[16];
	uint64_t before = rocemu_port_ping_replies(p->a);
	int rc;

	assert_int_equal(rocemu_gid_parse(addr, dst), 0);
	for (int i = 0; i < 10 && (rc = rocemu_port_ping(p->a, dst, 1, seq)) == -EAGAIN; i++)
		pump(p, 2);
	assert_int_equal(rc, 0);
	pump(p, 3);
	assert_int_equal(rocemu_port_ping_replies(p->a), before + 1);
}

static void test_capture(void **state)
{
	struct pair p;
	char path_all[300], path_arp[300];
	unsigned arp = 0, icmp = 0, n;
	bool nano = false;
	(void)state;

	snprintf(path_all, sizeof(path_all), "%s/all.pcap", tmpdir);
	snprintf(path_arp, sizeof(path_arp), "%s/arp.pcap", tmpdir);
	pair_config(&p, NULL, NULL);
	set(&p.ca, "capture", path_all);
	set(&p.cb, "capture", path_arp);
	set(&p.cb, "capture-filter", "arp");
	pair_open(&p);
	ping_until_answered(&p, "10.9.0.2", 1);
	ping_until_answered(&p, "10.9.0.2", 2);
	pair_close(&p);

	n = pcap_count(path_all, &arp, &icmp, &nano);
	assert_true(nano);
	assert_true(arp >= 2);	   /* request + reply (+ gratuitous) */
	assert_int_equal(icmp, 4); /* two requests, two replies */
	assert_true(n >= arp + icmp);
	arp = icmp = 0;
	n = pcap_count(path_arp, &arp, &icmp, NULL);
	assert_true(n >= 2);
	assert_int_equal(arp, n); /* the filter let only ARP through */
	assert_int_equal(icmp, 0);

	/* a bad filter fails the open with a one-line message */
	{
		struct rocemu_port_config cfg;
		struct rocemu_port *port;
		char err[512];

		rocemu_port_config_init(&cfg);
		set(&cfg, "port", "ring:badf:a");
		set(&cfg, "capture", path_all);
		set(&cfg, "capture-filter", "this is not bpf");
		int rc = rocemu_port_open(&cfg, &port, err, sizeof(err));
		if (rc != -EINVAL)
			fail_msg("open with a bad filter: %d %s", rc, err);
		assert_non_null(strstr(err, "capture-filter"));
	}
}

/*
 * The fault injector's copy of a frame is stamped with its original's time,
 * as a copy the network makes follows it at once: with every transmitted
 * frame duplicated, A's capture holds its frames in identical pairs with
 * identical stamps (a late stamp made `rocemu inspect` call a copy a resend).
 */
static void test_capture_copy_stamp(void **state)
{
	struct pair p;
	char path[300], errbuf[PCAP_ERRBUF_SIZE];
	struct pcap_pkthdr *h;
	const u_char *d;
	unsigned pairs = 0, sent = 0;
	(void)state;

	snprintf(path, sizeof(path), "%s/dup.pcap", tmpdir);
	pair_config(&p, NULL, NULL);
	set(&p.ca, "capture", path);
	set(&p.ca, "fault-dup", "tx:1000000");
	pair_open(&p);
	uint8_t mac_a[6];
	rocemu_port_mac(p.a, mac_a);
	ping_until_answered(&p, "10.9.0.2", 1);
	pair_close(&p);

	pcap_t *pc =
	    pcap_open_offline_with_tstamp_precision(path, PCAP_TSTAMP_PRECISION_NANO, errbuf);
	assert_non_null(pc);
	uint8_t prev[128];
	struct timeval prev_ts = {0};
	unsigned prev_len = 0;
	bool have_prev = false;
	while (pcap_next_ex(pc, &h, &d) == 1) {
		if (is_capture_point(h, d) || h->caplen < 14 ||
		    memcmp(d + 6, mac_a, 6)) /* what A sent */
			continue;
		unsigned len = h->caplen < sizeof(prev) ? h->caplen : (unsigned)sizeof(prev);
		if (have_prev) {
			assert_int_equal(len, prev_len);
			assert_memory_equal(d, prev, len);
			assert_int_equal(h->ts.tv_sec, prev_ts.tv_sec);
			assert_int_equal(h->ts.tv_usec,
					 prev_ts.tv_usec); /* ns with NANO precision */
			pairs++;
			have_prev = false;
			continue;
		}
		memcpy(prev, d, len);
		prev_len = len;
		prev_ts = h->ts;
		have_prev = true;
		sent++;
	}
	pcap_close(pc);
	assert_false(have_prev); /* every frame A sent came with its copy */
	assert_true(pairs >= 2); /* at least the ARP request and the echo request */
	assert_int_equal(pairs, sent);
}

/* The 16-bit one's complement sum of n bytes (folded, not inverted). */
static uint16_t csum_fold(const uint8_t *d, size_t n, uint32_t sum)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)(d[i] << 8 | d[i + 1]);
	if (n & 1)
		sum += (uint32_t)(d[n - 1] << 8);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/* UD multicast groups on the port (port_mcast.c): joins counted per user,
 * announced twice (IGMPv2 report, MLDv1 report) with the fields RFC 2236 and
 * RFC 2710 ask for, answered on a query, left with a Leave / Done; RoCE to a
 * joined group's MAC and address taken, to another group dropped; a frame
 * this port sends to its own group looped back too. */
static void test_multicast_groups(void **state)
{
	struct pair p;
	struct recorder ra = {0}, rb = {0};
	struct rocemu_port_upper ua = {&ra, rec_rx, rec_poll, rec_has_work, NULL, NULL};
	struct rocemu_port_upper ub = {&rb, rec_rx, rec_poll, rec_has_work, NULL, NULL};
	static const uint8_t gmac4[6] = {0x01, 0x00, 0x5e, 0x01, 0x02, 0x03};
	static const uint8_t other4[6] = {0x01, 0x00, 0x5e, 0x01, 0x02, 0x04};
	static const uint8_t gmac6[6] = {0x33, 0x33, 0x00, 0x01, 0x00, 0x02};
	uint8_t g4[16], g6[16], uni[16], amac[6];
	char path[300], errbuf[PCAP_ERRBUF_SIZE];
	unsigned reports4 = 0, leaves4 = 0, reports6 = 0, dones6 = 0;
	struct pcap_pkthdr *h;
	const u_char *d;
	(void)state;

	assert_int_equal(rocemu_gid_parse("::ffff:239.1.2.3", g4), 0);
	assert_int_equal(rocemu_gid_parse("ff12::1:2", g6), 0);
	assert_int_equal(rocemu_gid_parse("10.9.0.7", uni), 0);
	snprintf(path, sizeof(path), "%s/mcast.pcap", tmpdir);
	pair_config(&p, NULL, NULL);
	set(&p.ca, "capture", path);
	pair_open(&p);
	rocemu_port_set_upper(p.a, &ua);
	rocemu_port_set_upper(p.b, &ub);
	rocemu_port_mac(p.a, amac);

	rocemu_port_lock(p.a);
	assert_int_equal(rocemu_port_mcast_join(p.a, uni), -EINVAL);
	assert_int_equal(rocemu_port_mcast_join(p.a, g4), 0);
	assert_int_equal(rocemu_port_mcast_join(p.a, g4), 0); /* a second user: no report */
	assert_int_equal(rocemu_port_mcast_join(p.a, g6), 0);
	rocemu_port_unlock(p.a);
	pump(&p, 2);
	assert_int_equal(ptu_counter(p.a, "igmp_tx"), 2);
	assert_int_equal(ptu_counter(p.a, "mld_tx"), 2);

	/* B sends RoCE to the group, to another group, and A to its own group */
	rocemu_port_lock(p.b);
	rocemu_port_tx(p.b, roce_frame(p.b, "239.1.2.3", gmac4, 0xFFFFFF));
	rocemu_port_tx(p.b, roce_frame(p.b, "239.1.2.4", other4, 0xFFFFFF));
	rocemu_port_unlock(p.b);
	rocemu_port_lock(p.a);
	rocemu_port_tx(p.a, roce_frame(p.a, "239.1.2.3", gmac4, 0xFFFFFF));
	rocemu_port_unlock(p.a);
	pump(&p, 3);
	assert_int_equal(ra.n, 2); /* B's and its own (looped back) */
	assert_int_equal(ra.last.dqpn, 0xFFFFFF);
	assert_int_equal(ptu_counter(p.a, "rx_mcast_frames"), 2);
	assert_int_equal(ptu_counter(p.a, "drop_not_our_mac"), 1);
	assert_int_equal(rb.n, 0); /* B is in no group */

	/* an IGMPv2 general query (to 224.0.0.1) and an MLD one: reported again */
	{
		static const uint8_t q4[] = {0x01, 0x00, 0x5e, 0x00, 0x00, 0x01, 0x02, 0, 0,   0, 0,
					     0x99, 0x08, 0x00, 0x45, 0xc0, 0x00, 0x1c, 0, 0,   0, 0,
					     0x01, 0x02, 0,    0,    10,   9,	 0,    9, 224, 0, 0,
					     1,	   0x11, 0x64, 0,    0,	   0,	 0,    0, 0};
		struct rte_mbuf *m = rocemu_port_alloc_mbuf(p.b);
		uint8_t *f = (uint8_t *)rte_pktmbuf_append(m, sizeof(q4));
		uint16_t ck;

		memcpy(f, q4, sizeof(q4));
		ck = (uint16_t)~csum_fold(f + 14, 20, 0);
		f[24] = (uint8_t)(ck >> 8);
		f[25] = (uint8_t)ck;
		ck = (uint16_t)~csum_fold(f + 34, 8, 0);
		f[36] = (uint8_t)(ck >> 8);
		f[37] = (uint8_t)ck;
		rocemu_port_lock(p.b);
		rocemu_port_tx(p.b, m);
		rocemu_port_unlock(p.b);
	}
	pump(&p, 2);
	assert_int_equal(ptu_counter(p.a, "mcast_queries_rx"), 1);
	assert_int_equal(ptu_counter(p.a, "igmp_tx"), 3);

	rocemu_port_lock(p.a);
	assert_int_equal(rocemu_port_mcast_leave(p.a, g4), 0); /* one user left: silent */
	assert_int_equal(rocemu_port_mcast_leave(p.a, g4), 0);
	assert_int_equal(rocemu_port_mcast_leave(p.a, g4), -EINVAL);
	assert_int_equal(rocemu_port_mcast_leave(p.a, g6), 0);
	rocemu_port_unlock(p.a);
	pump(&p, 2);
	assert_int_equal(ptu_counter(p.a, "igmp_tx"), 4);
	assert_int_equal(ptu_counter(p.a, "mld_tx"), 3);
	/* left: the group's RoCE is no longer taken */
	rocemu_port_lock(p.b);
	rocemu_port_tx(p.b, roce_frame(p.b, "239.1.2.3", gmac4, 0xFFFFFF));
	rocemu_port_unlock(p.b);
	pump(&p, 2);
	assert_int_equal(ra.n, 2);
	pair_close(&p);

	/* what A sent, field by field */
	pcap_t *pc = pcap_open_offline(path, errbuf);
	assert_non_null(pc);
	while (pcap_next_ex(pc, &h, &d) == 1) {
		if (is_capture_point(h, d) || h->caplen < 14 || memcmp(d + 6, amac, 6))
			continue;
		if (d[12] == 0x08 && d[13] == 0x00 && h->caplen >= 46 && d[23] == 2) {
			/* IPv4 IGMP: IHL 6 with the Router Alert, TTL 1, checksums */
			assert_int_equal(d[14], 0x46);
			assert_int_equal(d[22], 1);
			assert_memory_equal(d + 34, ((const uint8_t[]){0x94, 0x04, 0, 0}), 4);
			assert_int_equal(csum_fold(d + 14, 24, 0), 0xffff);
			assert_int_equal(csum_fold(d + 38, 8, 0), 0xffff);
			assert_memory_equal(d + 42, g4 + 12, 4);
			if (d[38] == 0x16) {
				assert_memory_equal(d, gmac4, 6);
				assert_memory_equal(d + 30, g4 + 12, 4);
				reports4++;
			} else if (d[38] == 0x17) {
				assert_memory_equal(d + 30, ((const uint8_t[]){224, 0, 0, 2}), 4);
				leaves4++;
			}
		} else if (d[12] == 0x86 && d[13] == 0xdd && h->caplen >= 86 && d[20] == 0) {
			/* IPv6, hop-by-hop (Router Alert 0) then MLD, hop limit 1 */
			uint32_t sum = 0;

			assert_int_equal(d[21], 1);
			assert_int_equal(d[54], 58);
			assert_memory_equal(d + 56, ((const uint8_t[]){5, 2, 0, 0}), 4);
			sum = csum_fold(d + 22, 32, 0) + 24 + 58; /* pseudo-header */
			assert_int_equal(csum_fold(d + 62, 24, sum), 0xffff);
			assert_memory_equal(d + 70, g6, 16);
			if (d[62] == 131) {
				assert_memory_equal(d, gmac6, 6);
				reports6++;
			} else if (d[62] == 132) {
				dones6++;
			}
		}
	}
	pcap_close(pc);
	assert_int_equal(reports4, 3);
	assert_int_equal(leaves4, 1);
	assert_int_equal(reports6, 2);
	assert_int_equal(dones6, 1);
}

static void test_capture_rotation(void **state)
{
	struct pair p;
	char base[300], path[320];
	unsigned files = 0, frames = 0;
	struct stat st;
	(void)state;

	snprintf(base, sizeof(base), "%s/rot.pcap", tmpdir);
	pair_config(&p, NULL, NULL);
	set(&p.ca, "capture", base);
	set(&p.ca, "capture-rotate", "4096");
	pair_open(&p);
	for (int i = 0; i < 40; i++)
		ping_until_answered(&p, "10.9.0.1",
				    (uint16_t)i); /* loopback: captured once each way */
	/* capture_frames counts frames in the files: write what is buffered first */
	assert_int_equal(rocemu_port_capture_sync(p.a), 0);
	uint64_t captured = ptu_counter(p.a, "capture_frames");
	uint64_t nfiles = ptu_counter(p.a, "capture_files");
	pair_close(&p);
	for (unsigned i = 0; i < 100; i++) {
		if (i == 0)
			snprintf(path, sizeof(path), "%s", base);
		else
			snprintf(path, sizeof(path), "%s.%u", base, i);
		if (stat(path, &st))
			break;
		files++;
		/* at most the bound; a single frame larger than it is not split */
		assert_true(st.st_size <= 4096);
		frames += pcap_count(path, NULL, NULL, NULL);
	}
	assert_true(files >= 2);
	assert_int_equal(files, nfiles);
	assert_int_equal(frames, captured);
}

static void test_fault_drop_list(void **state)
{
	struct pair p;
	uint8_t dst[16];
	(void)state;

	pair_config(&p, NULL, NULL);
	set(&p.ca, "fault-drop-list", "tx:1");
	pair_open(&p);
	/* frame 1 from a is its first gratuitous ARP or the first request: gone */
	assert_int_equal(rocemu_gid_parse("10.9.0.2", dst), 0);
	for (int i = 0; i < 20 && rocemu_port_ping(p.a, dst, 1, 1) == -EAGAIN; i++) {
		pump(&p, 2);
		ptu_sleep_ms(2);
	}
	pump(&p, 3);
	assert_int_equal(ptu_counter(p.a, "drop_fault_tx_drop"), 1);
	pair_close(&p);
}

/* A frame split over two chained mbufs arrives linearised and is handled. */
static void test_multisegment_rx(void **state)
{
	struct pair p;
	struct recorder rb = {0};
	struct rocemu_port_upper ub = {&rb, rec_rx, rec_poll, rec_has_work, NULL, NULL};
	uint8_t bmac[6];
	struct rte_mbuf *whole, *head, *tail;
	(void)state;

	pair_config(&p, NULL, NULL);
	pair_open(&p);
	rocemu_port_set_upper(p.b, &ub);
	rocemu_port_mac(p.b, bmac);
	whole = roce_frame(p.a, "10.9.0.2", bmac, 0x21);
	head = rocemu_port_alloc_mbuf(p.a);
	tail = rocemu_port_alloc_mbuf(p.a);
	assert_non_null(head);
	assert_non_null(tail);
	memcpy(rte_pktmbuf_append(head, 30), rte_pktmbuf_mtod(whole, uint8_t *), 30);
	memcpy(rte_pktmbuf_append(tail, (uint16_t)(whole->data_len - 30)),
	       rte_pktmbuf_mtod(whole, uint8_t *) + 30, whole->data_len - 30);
	rte_pktmbuf_free(whole);
	assert_int_equal(rte_pktmbuf_chain(head, tail), 0);
	assert_int_equal(head->nb_segs, 2);
	rocemu_port_lock(p.a);
	assert_int_equal(rocemu_port_tx(p.a, head), 0);
	rocemu_port_unlock(p.a);
	pump(&p, 2);
	assert_int_equal(rb.n, 1);
	assert_int_equal(rb.last.dqpn, 0x21);
	assert_memory_equal(rb.payload, "hello, loopback", 16);
	pair_close(&p);
}

/* Ring pair names of any length the parser accepts (up to 16) open. */
static void test_ring_pair_long_names(void **state)
{
	static const char *names[] = {"vargs", "abcdefgh", "abcdefghijklmnop"};
	(void)state;

	for (unsigned i = 0; i < 3; i++) {
		struct pair p;
		char spec[64], err[512];
		uint8_t mac[6];

		rocemu_port_config_init(&p.ca);
		rocemu_port_config_init(&p.cb);
		snprintf(spec, sizeof(spec), "ring:%s:a", names[i]);
		set(&p.ca, "port", spec);
		set(&p.ca, "ip", "10.9.0.1/24");
		snprintf(spec, sizeof(spec), "ring:%s:b", names[i]);
		set(&p.cb, "port", spec);
		set(&p.cb, "ip", "10.9.0.2/24");
		if (rocemu_port_open(&p.ca, &p.a, err, sizeof(err)))
			fail_msg("open ring:%s:a: %s", names[i], err);
		if (rocemu_port_open(&p.cb, &p.b, err, sizeof(err)))
			fail_msg("open ring:%s:b: %s", names[i], err);
		rocemu_port_progress_thread_stop(p.a);
		rocemu_port_progress_thread_stop(p.b);
		pump(&p, 2);
		/* the two sides are joined: b resolves a */
		for (int k = 0; k < 100 && resolve(p.b, "10.9.0.1", mac) == -EAGAIN; k++)
			pump(&p, 1);
		assert_int_equal(resolve(p.b, "10.9.0.1", mac), 0);
		pair_close(&p);
	}
}

/*
 * A frame sent just before close reaches the peer: close waits (bounded)
 * until the peer has taken it, instead of tearing the link down under it.
 * The peer's progress thread runs as in a real program.
 */
static void test_last_frame_survives_close(void **state)
{
	struct pair p;
	struct recorder rb = {0};
	struct rocemu_port_upper ub = {&rb, rec_rx, rec_poll, rec_has_work, NULL, NULL};
	uint8_t bmac[6];
	unsigned got = 0;
	(void)state;

	pair_config(&p, NULL, NULL);
	pair_open(&p);
	rocemu_port_set_upper(p.b, &ub);
	rocemu_port_mac(p.b, bmac);
	pump(&p, 2);
	assert_int_equal(rocemu_port_progress_thread_start(p.b), 0);
	/* give b's thread the chance to go idle (it sleeps when there is no
	 * work), the harder case for close: not a synchronisation, the frame
	 * must arrive whether it slept or not */
	ptu_sleep_ms(20);
	rocemu_port_lock(p.a);
	assert_int_equal(rocemu_port_tx(p.a, roce_frame(p.a, "10.9.0.2", bmac, 0x44)), 0);
	rocemu_port_flush(p.a);
	rocemu_port_unlock(p.a);
	rocemu_port_close(p.a);
	/* b's thread takes it whenever it is scheduled: no deadline here (the
	 * test's timeout catches a frame that never comes) */
	while (!got) {
		rocemu_port_lock(p.b);
		got = rb.n;
		rocemu_port_unlock(p.b);
		if (!got)
			ptu_sleep_ms(1);
	}
	assert_int_equal(got, 1);
	assert_int_equal(rb.last.dqpn, 0x44);
	rocemu_port_close(p.b);
}

/* Frames to a MAC that is not ours (nor broadcast/our multicast) are dropped. */
static void test_foreign_mac_dropped(void **state)
{
	struct pair p;
	struct recorder rb = {0};
	struct rocemu_port_upper ub = {&rb, rec_rx, rec_poll, rec_has_work, NULL, NULL};
	static const uint8_t other[6] = {0x02, 0x99, 0x99, 0x99, 0x99, 0x99};
	(void)state;

	pair_config(&p, NULL, NULL);
	pair_open(&p);
	rocemu_port_set_upper(p.b, &ub);
	rocemu_port_lock(p.a);
	rocemu_port_tx(p.a, roce_frame(p.a, "10.9.0.2", other, 1));
	rocemu_port_unlock(p.a);
	pump(&p, 2);
	assert_int_equal(rb.n, 0);
	assert_int_equal(ptu_counter(p.b, "drop_not_our_mac"), 1);
	pair_close(&p);
}

/* The transmit credit the engine uses: room shrinks as frames are buffered,
 * a half-full buffer is handed to the device first, and with the device's
 * ring full (nobody receives on b) the room stays small, never wraps. */
static void test_tx_room(void **state)
{
	struct pair p;
	uint8_t bmac[6];
	unsigned room0, room, sent = 0;
	(void)state;

	pair_config(&p, NULL, NULL);
	pair_open(&p);
	rocemu_port_mac(p.b, bmac);
	rocemu_port_lock(p.a);
	room0 = rocemu_port_tx_room(p.a);
	assert_true(room0 > 32);
	for (unsigned i = 0; i < 10; i++)
		assert_int_equal(rocemu_port_tx(p.a, roce_frame(p.a, "10.9.0.2", bmac, 7)), 0);
	assert_int_equal(rocemu_port_tx_room(p.a), room0 - 10);
	rocemu_port_flush(p.a);
	assert_int_equal(rocemu_port_tx_room(p.a), room0);
	/* fill the ring toward b (b never polls) and then the buffer */
	for (unsigned i = 0; i < 4000; i++) {
		struct rte_mbuf *m = roce_frame(p.a, "10.9.0.2", bmac, 7);

		if (!m || rocemu_port_tx_room(p.a) == 0) {
			if (m)
				rte_pktmbuf_free(m);
			break;
		}
		assert_int_equal(rocemu_port_tx(p.a, m), 0);
		sent++;
	}
	room = rocemu_port_tx_room(p.a);
	assert_true(sent > room0);	   /* the device took some */
	assert_true(room < room0 / 2 + 1); /* then it filled up */
	/* outside a pass the pass time falls back to the clock */
	assert_true(rocemu_port_pass_now(p.a) > 0);
	rocemu_port_unlock(p.a);
	assert_int_equal(ptu_counter(p.a, "drop_tx_full"), 0);
	pair_close(&p);
}

static void send_psns(struct pair *p, unsigned n)
{
	uint8_t bmac[6];

	rocemu_port_mac(p->b, bmac);
	rocemu_port_lock(p->a);
	for (unsigned i = 0; i < n; i++)
		rocemu_port_tx(p->a, roce_frame_psn(p->a, "10.9.0.2", bmac, 1, i));
	rocemu_port_unlock(p->a);
}

static void test_fault_dup_reorder_delay(void **state)
{
	struct pair p;
	struct recorder rb = {0};
	struct rocemu_port_upper ub = {&rb, rec_rx, rec_poll, rec_has_work, NULL, NULL};
	bool out_of_order = false;
	(void)state;

	/* every frame duplicated on the way out */
	pair_config(&p, NULL, NULL);
	set(&p.ca, "fault-dup", "tx:1000000");
	pair_open(&p);
	rocemu_port_set_upper(p.b, &ub);
	pump(&p, 2);
	send_psns(&p, 4);
	pump(&p, 3);
	assert_int_equal(rb.n, 8);
	for (unsigned i = 0; i < 8; i += 2)
		assert_int_equal(rb.psns[i], rb.psns[i + 1]);
	pair_close(&p);

	/* half the frames held back on receive: some arrive out of order, none lost */
	memset(&rb, 0, sizeof(rb));
	pair_config(&p, NULL, NULL);
	set(&p.cb, "fault-reorder", "rx:500000");
	set(&p.cb, "fault-seed", "42");
	pair_open(&p);
	rocemu_port_set_upper(p.b, &ub);
	send_psns(&p, 32);
	pump(&p, 4);
	assert_int_equal(rb.n, 32);
	for (unsigned i = 1; i < 32; i++)
		if (rb.psns[i] < rb.psns[i - 1])
			out_of_order = true;
	assert_true(out_of_order);
	assert_true(ptu_counter(p.b, "fault_rx_reordered") > 0);
	pair_close(&p);

	/* every frame delayed: nothing on the first pass, all after the delay */
	memset(&rb, 0, sizeof(rb));
	pair_config(&p, NULL, NULL);
	set(&p.cb, "fault-delay", "rx:1000000");
	set(&p.cb, "fault-delay-us", "20000");
	pair_open(&p);
	rocemu_port_set_upper(p.b, &ub);
	pump(&p, 2); /* a's announcements: delayed too */
	uint64_t delayed_before = ptu_counter(p.b, "fault_rx_delayed");
	send_psns(&p, 3);
	rocemu_port_progress(p.a);
	rocemu_port_progress(p.b);
	assert_int_equal(rb.n, 0);
	assert_int_equal(ptu_counter(p.b, "fault_rx_delayed") - delayed_before, 3);
	for (int i = 0; i < 2000 && rb.n < 3; i++) {
		ptu_sleep_ms(1);
		rocemu_port_progress(p.b);
	}
	assert_int_equal(rb.n, 3);
	pair_close(&p);

	/* every frame corrupted: none reaches the upper layer, each drop counted */
	memset(&rb, 0, sizeof(rb));
	pair_config(&p, NULL, NULL);
	set(&p.ca, "fault-corrupt", "tx:1000000");
	pair_open(&p);
	rocemu_port_set_upper(p.b, &ub);
	pump(&p, 2);
	uint64_t drops_before = ptu_counter(p.b, "rx_drops");
	send_psns(&p, 16);
	pump(&p, 3);
	assert_int_equal(rb.n, 0);
	assert_int_equal(ptu_counter(p.b, "rx_drops") - drops_before, 16);
	pair_close(&p);
}

/* Random frames (valid Ethernet header to b, random everything after, random
 * lengths, sometimes chained) never crash the port: each is counted as
 * received, and b still answers afterwards. Run under ASan in the asan build. */
static void test_random_frames(void **state)
{
	struct pair p;
	struct recorder rb = {0};
	struct rocemu_port_upper ub = {&rb, rec_rx, rec_poll, rec_has_work, NULL, NULL};
	static const uint16_t types[] = {0x0806, 0x0800, 0x86dd, 0x8100, 0x1234};
	uint8_t bmac[6], amac[6], dst[16];
	uint64_t rng = 0x1234567887654321ull, rx_before;
	const unsigned n = 3000;
	(void)state;

	pair_config(&p, NULL, NULL);
	pair_open(&p);
	rocemu_port_set_upper(p.b, &ub);
	rocemu_port_mac(p.b, bmac);
	rocemu_port_mac(p.a, amac);
	pump(&p, 2);
	rx_before = ptu_counter(p.b, "rx_frames");
	for (unsigned i = 0; i < n; i++) {
		struct rte_mbuf *m = rocemu_port_alloc_mbuf(p.a);
		uint16_t len, type;
		uint8_t *d;

		assert_non_null(m);
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		len = (uint16_t)(14 + rng % 180);
		d = (uint8_t *)rte_pktmbuf_append(m, len);
		for (uint16_t k = 0; k < len; k++) {
			rng ^= rng << 13;
			rng ^= rng >> 7;
			rng ^= rng << 17;
			d[k] = (uint8_t)rng;
		}
		memcpy(d, i % 3 ? bmac : (const uint8_t[6]){0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 6);
		d[6] = 0x02; /* not our own source MAC */
		type = types[(rng >> 20) % 5];
		d[12] = (uint8_t)(type >> 8);
		d[13] = (uint8_t)type;
		if (type == 0x0800 && len > 14) /* often a plausible IPv4 header */
			d[14] = (uint8_t)((rng & 1) ? 0x45 : d[14]);
		if (type == 0x86dd && len > 14)
			d[14] = (uint8_t)((rng & 1) ? 0x60 : d[14]);
		if (type == 0x0806 && len >= 42 && (rng & 2)) { /* well-formed ARP header */
			memcpy(d + 14,
			       (const uint8_t[]){0, 1, 8, 0, 6, 4, 0, (uint8_t)(1 + (rng & 1))}, 8);
		}
		rocemu_port_lock(p.a);
		rocemu_port_tx(p.a, m);
		rocemu_port_unlock(p.a);
		if (i % 64 == 63)
			pump(&p, 2);
	}
	pump(&p, 4);
	assert_int_equal(ptu_counter(p.b, "rx_frames") - rx_before, n);
	/* still alive and answering */
	assert_int_equal(rocemu_gid_parse("10.9.0.2", dst), 0);
	for (int i = 0; i < 5 && rocemu_port_ping(p.a, dst, 1, 1) == -EAGAIN; i++)
		pump(&p, 2);
	pump(&p, 3);
	assert_int_equal(rocemu_port_ping_replies(p.a), 1);
	pair_close(&p);
}

/* dpdk:DEVARGS opens any PMD; a stand-alone net_ring vdev reflects what it
 * sends, so our own announcements come back and are dropped as ours. */
static void test_dpdk_spec(void **state)
{
	struct rocemu_port_config cfg;
	struct rocemu_port *port;
	char err[512];
	(void)state;

	rocemu_port_config_init(&cfg);
	set(&cfg, "port", "dpdk:net_ring_d0");
	set(&cfg, "ip", "10.9.9.1/24");
	if (rocemu_port_open(&cfg, &port, err, sizeof(err)))
		fail_msg("open: %s", err);
	rocemu_port_progress_thread_stop(port);
	assert_true(rocemu_port_link_up(port));
	assert_int_equal(rocemu_port_eth_mtu(port), 1500);
	for (int i = 0; i < 4; i++)
		rocemu_port_progress(port);
	assert_true(ptu_counter(port, "gratuitous_arp_tx") >= 1);
	assert_true(ptu_counter(port, "drop_own_source_mac") >= 1);
	rocemu_port_close(port);
	/* a device that does not exist fails with a one-line reason */
	rocemu_port_config_init(&cfg);
	set(&cfg, "port", "dpdk:net_nosuchpmd0");
	assert_true(rocemu_port_open(&cfg, &port, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "net_nosuchpmd0"));
	assert_null(strchr(err, '\n'));
}

/* A child forked while ports run exits without hanging and without taking
 * the parent's ports down; the parent's ports keep working. */
static void test_fork_child_exit(void **state)
{
	struct pair p;
	char err[256];
	int status = -1;
	pid_t pid;
	(void)state;

	pair_open_threaded(&p);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rocemu_port *q;
		int status = rocemu_port_open(&p.ca, &q, err, sizeof(err)) == -ENOTSUP ? 0 : 3;

		/* no new ports here, and exit() runs the exit handlers. Not under
		 * AddressSanitizer: there the child hung at exit now and then (2 of
		 * about 20 ASan runs, "forked child did not exit"; never in the
		 * plain build), most likely in the leak check that ASan runs at exit
		 * in this child of a multithreaded parent, on a lock another parent
		 * thread held at fork time. The plain build checks exit(). */
		if (ASAN_BUILD)
			_exit(status);
		exit(status);
	}
	for (int i = 0; i < 10000; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		ptu_sleep_ms(1);
	}
	if (!WIFEXITED(status)) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		fail_msg("forked child did not exit");
	}
	assert_int_equal(WEXITSTATUS(status), 0);
	ping_b_threaded(&p);
	pair_close(&p);
}

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/rocemu-port-test-XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	char cmd[300];
	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_config_errors),
	    cmocka_unit_test(test_eal_leaves_program_alone),
	    cmocka_unit_test(test_gid_table_and_mtu),
	    cmocka_unit_test(test_arp_resolution),
	    cmocka_unit_test(test_arp_retry_and_failure),
	    cmocka_unit_test(test_arp_expiry),
	    cmocka_unit_test(test_loopback),
	    cmocka_unit_test(test_roce_delivery_and_drops),
	    cmocka_unit_test(test_tx_to_uses_given_mac),
	    cmocka_unit_test(test_ping),
	    cmocka_unit_test(test_progress_thread_answers),
	    cmocka_unit_test(test_progress_cpu),
	    cmocka_unit_test(test_away_spin),
	    cmocka_unit_test(test_capture),
	    cmocka_unit_test(test_capture_copy_stamp),
	    cmocka_unit_test(test_capture_rotation),
	    cmocka_unit_test(test_multicast_groups),
	    cmocka_unit_test(test_fault_drop_list),
	    cmocka_unit_test(test_multisegment_rx),
	    cmocka_unit_test(test_ring_pair_long_names),
	    cmocka_unit_test(test_last_frame_survives_close),
	    cmocka_unit_test(test_foreign_mac_dropped),
	    cmocka_unit_test(test_tx_room),
	    cmocka_unit_test(test_fault_dup_reorder_delay),
	    cmocka_unit_test(test_fork_child_exit),
	    cmocka_unit_test(test_random_frames),
	    cmocka_unit_test(test_dpdk_spec),
	};
	char err[256];
	struct sigaction sa;

	pthread_getaffinity_np(pthread_self(), sizeof(affinity_before_eal), &affinity_before_eal);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigusr1;
	sigaction(SIGUSR1, &sa, NULL);
	sigusr1_before_eal = sa;

	/* EAL needs the net_ring PMD and memory; when the machine cannot give
	 * them, say so and skip rather than fail every test */
	if (rocemu_eal_init()) {
		snprintf(err, sizeof(err), "%s", rocemu_eal_error());
		printf("SKIP: DPDK EAL cannot start here: %s\n", err);
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
