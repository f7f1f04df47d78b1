/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target over the port's receive path for everything that is not
 * RoCE: ARP, IPv6 ND, ICMP and ICMPv6 echo, and the dispatch before them
 * (port_rx.c, port_neigh.c, port_icmp.c are compiled into the target, so
 * libFuzzer sees their coverage). Issue 18, fuzzing section.
 *
 * One port, "ring:fzport:a", 10.81.0.1/24 and fd00:81::1/64, member of the
 * multicast groups 239.1.2.3 and ff12::1:2 (IGMP and MLD queries, RoCE to a
 * group: port_mcast.c is compiled in too), with short
 * neighbour timers (1 ms, 2 tries, 5 ms expiry) so that entries cycle
 * through every state within a run; its peer "ring:fzport:b" only swallows
 * what it sends. Progress threads stopped. Each input starts from an empty
 * neighbour cache, no ping outstanding and a full ICMP reply budget.
 *
 * Input: records [flags:1][len:2 LE][frame:len], at most 32.
 * flags bits 0-2, done before the frame:
 *   1 resolve the address in frame bytes 28..31 (IPv4) or 22..37 (IPv6),
 *     as the transport would for a peer (creates entries, sends requests);
 *   2 ping that address (identifier 0x4242, sequence = record number);
 *   3 run the neighbour timers now; 4 wait 2 ms first (timers expire);
 *   5 resolve every address already in the cache (STALE entries probe).
 * flags bit 6: point the frame at us: destination MAC ours (bit 5: broadcast
 *   instead), IPv4 destination / ARP target ours, IPv6 destination ours.
 * flags bit 7: fix the checksums (IPv4 header, ICMP, ICMPv6) and set the
 *   IPv6 hop limit to 255, so the fuzzer gets past them.
 *
 * After every input: no neighbour entry that is usable (REACHABLE, STALE,
 * PROBE) holds a group MAC, our own MAC, or one of our own addresses, and
 * no address has two entries.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include "../../emulator/port/port_internal.h"
#include "port_test_util.h"

#define FP_MAX_RECORDS 32
#define FP_FRAME_MAX   2048

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct {
	bool ready;
	struct rocemu_port *port, *peer;
	uint8_t mac[6];
	uint8_t ip4[4];
	uint8_t ip6[16];
} P;

static void die(const char *what)
{
	fprintf(stderr, "fuzz_port: set-up failed: %s\n", what);
	exit(1);
}

static void set(struct rocemu_port_config *cfg, const char *opt, const char *val)
{
	char err[256];

	if (rocemu_port_config_set(cfg, opt, val, err, sizeof(err)))
		die(err);
}

static void upper_rx(void *ctx, struct rte_mbuf **pkts, struct roce_pkt *descs, uint16_t n)
{
	(void)ctx;
	(void)descs;
	for (uint16_t i = 0; i < n; i++)
		rte_pktmbuf_free(pkts[i]);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct rocemu_port_upper up = {.rx = upper_rx};
	struct rocemu_port_config a, b;
	char err[256];

	(void)argc;
	(void)argv;
	if (rocemu_eal_init() < 0) {
		fprintf(stderr, "fuzz_port: EAL cannot start: %s\n", rocemu_eal_error());
		exit(1);
	}
	rocemu_port_config_init(&a);
	rocemu_port_config_init(&b);
	set(&a, "port", "ring:fzport:a");
	set(&a, "ip", "10.81.0.1/24");
	set(&a, "ip", "fd00:81::1/64");
	set(&a, "arp-timeout", "1");
	set(&a, "arp-retries", "2");
	set(&a, "arp-expire", "5");
	set(&a, "mbufs", "2048");
	set(&b, "port", "ring:fzport:b");
	set(&b, "ip", "10.81.0.2/24");
	set(&b, "mbufs", "2048");
	if (rocemu_port_open(&a, &P.port, err, sizeof(err)) ||
	    rocemu_port_open(&b, &P.peer, err, sizeof(err)))
		die(err);
	rocemu_port_progress_thread_stop(P.port);
	rocemu_port_progress_thread_stop(P.peer);
	rocemu_port_set_upper(P.port, &up);
	rocemu_port_mac(P.port, P.mac);
	memcpy(P.ip4, (const uint8_t[4]){10, 81, 0, 1}, 4);
	if (rocemu_gid_parse("fd00:81::1", P.ip6))
		die("gid");
	{
		uint8_t g4[16], g6[16];

		if (rocemu_gid_parse("::ffff:239.1.2.3", g4) || rocemu_gid_parse("ff12::1:2", g6) ||
		    rocemu_port_mcast_join(P.port, g4) || rocemu_port_mcast_join(P.port, g6))
			die("multicast groups");
	}
	P.ready = true;
	return 0;
}

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint16_t fold(uint32_t sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static uint32_t sum16(uint32_t sum, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		sum += be16(p + i);
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	return sum;
}

/* flags bits 5-7 (see the file comment), within the frame's own length. */
static void shape(uint8_t *f, uint32_t len, uint8_t flags)
{
	uint16_t type;

	if (len < 14)
		return;
	if (flags & 0x40)
		memcpy(f,
		       (flags & 0x20) ? (const uint8_t[6]){0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
				      : P.mac,
		       6);
	type = be16(f + 12);
	if (type == RTE_ETHER_TYPE_ARP && len >= 42 && (flags & 0x40))
		memcpy(f + 38, P.ip4, 4);
	if (type == RTE_ETHER_TYPE_IPV4 && len >= 34) {
		uint8_t *ip = f + 14;
		uint32_t ihl = (uint32_t)(ip[0] & 0xf) * 4, total = be16(ip + 2);

		if (flags & 0x40)
			memcpy(ip + 16, P.ip4, 4);
		if ((flags & 0x80) && ihl >= 20 && 14 + ihl <= len) {
			put16(ip + 10, 0);
			put16(ip + 10, fold(sum16(0, ip, ihl)));
			if (ip[9] == IPPROTO_ICMP && total >= ihl + 8 && 14 + total <= len) {
				put16(ip + ihl + 2, 0);
				put16(ip + ihl + 2, fold(sum16(0, ip + ihl, total - ihl)));
			}
		}
	}
	if (type == RTE_ETHER_TYPE_IPV6 && len >= 54) {
		uint8_t *ip = f + 14;
		uint32_t plen = be16(ip + 4);

		if (flags & 0x40)
			memcpy(ip + 24, P.ip6, 16);
		if ((flags & 0x80) && ip[6] == IPPROTO_ICMPV6 && plen >= 4 && 54 + plen <= len) {
			uint8_t ph[8] = {0, 0, (uint8_t)(plen >> 8), (uint8_t)plen, 0,
					 0, 0, IPPROTO_ICMPV6};

			ip[7] = 255;
			put16(ip + 42, 0);
			put16(ip + 42,
			      fold(sum16(sum16(sum16(0, ip + 8, 32), ph, 8), ip + 40, plen)));
		}
	}
}

/* The address a record's action is about: frame bytes 28..31 or 22..37. */
static void action_gid(const uint8_t *f, uint32_t len, uint8_t gid[16])
{
	memset(gid, 0, 16);
	if (len >= 38 && (f[0] & 1)) {
		memcpy(gid, f + 22, 16);
	} else {
		gid[10] = gid[11] = 0xff;
		if (len >= 32)
			memcpy(gid + 12, f + 28, 4);
		else
			memcpy(gid + 12, (const uint8_t[4]){10, 81, 0, 2}, 4);
	}
}

static void act(uint8_t what, const uint8_t *f, uint32_t len, unsigned rec)
{
	uint8_t gid[16], mac[6];

	action_gid(f, len, gid);
	switch (what) {
	case 1:
		rocemu_port_lock(P.port);
		rocemu_port_resolve(P.port, 1, gid, mac);
		rocemu_port_unlock(P.port);
		break;
	case 2:
		rocemu_port_ping(P.port, gid, 0x4242, (uint16_t)rec);
		break;
	case 4:
		usleep(2000);
		/* fall through */
	case 3:
		rocemu_port_lock(P.port);
		port_neigh_poll(P.port, rocemu_now_ns());
		rocemu_port_unlock(P.port);
		break;
	case 5:
		rocemu_port_lock(P.port);
		for (unsigned i = 0; i < PORT_NEIGH_SLOTS; i++) {
			uint8_t g[16];

			if (P.port->neigh[i].state == NEIGH_FREE)
				continue;
			memcpy(g, P.port->neigh[i].gid, 16);
			rocemu_port_resolve(P.port, 1, g, mac);
		}
		rocemu_port_unlock(P.port);
		break;
	default:
		break;
	}
}

static void inject(const uint8_t *frame, uint32_t len, uint8_t flags)
{
	static uint8_t buf[FP_FRAME_MAX];
	struct rte_mbuf *m;

	if (len > FP_FRAME_MAX)
		len = FP_FRAME_MAX;
	memcpy(buf, frame, len);
	shape(buf, len, flags);
	rocemu_port_lock(P.port);
	m = rocemu_port_alloc_mbuf(P.port);
	if (m && len > 0 && len <= rte_pktmbuf_tailroom(m)) {
		memcpy(rte_pktmbuf_append(m, (uint16_t)len), buf, len);
		port_rx_frame(P.port, m, rocemu_now_ns());
		port_rx_flush_upper(P.port);
	} else if (m) {
		rte_pktmbuf_free(m);
	}
	rocemu_port_flush(P.port);
	rocemu_port_unlock(P.port);
}

/* The cache may hold only what a neighbour could be (see the file comment). */
static void check_cache(void)
{
	for (unsigned i = 0; i < PORT_NEIGH_SLOTS; i++) {
		const struct port_neigh *e = &P.port->neigh[i];
		const struct rte_ether_addr *mac = (const struct rte_ether_addr *)e->mac;

		if (e->state == NEIGH_FREE)
			continue;
		if (rocemu_port_gid_find(P.port, e->gid) >= 0) {
			fprintf(stderr, "fuzz_port: a neighbour entry for our own address\n");
			abort();
		}
		for (unsigned j = i + 1; j < PORT_NEIGH_SLOTS; j++)
			if (P.port->neigh[j].state != NEIGH_FREE &&
			    !memcmp(P.port->neigh[j].gid, e->gid, 16)) {
				fprintf(stderr, "fuzz_port: two entries for one address\n");
				abort();
			}
		if (e->state != NEIGH_REACHABLE && e->state != NEIGH_STALE &&
		    e->state != NEIGH_PROBE)
			continue;
		if (!rte_is_unicast_ether_addr(mac) || !memcmp(e->mac, P.mac, 6)) {
			fprintf(stderr, "fuzz_port: a usable entry with a group or our own MAC\n");
			abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	if (!P.ready)
		LLVMFuzzerInitialize(NULL, NULL);
	rocemu_port_lock(P.port);
	memset(P.port->neigh, 0, sizeof(P.port->neigh));
	memset(P.port->ping_pending, 0, sizeof(P.port->ping_pending));
	P.port->icmp_tokens_ns = 0;
	rocemu_port_unlock(P.port);
	for (unsigned r = 0; r < FP_MAX_RECORDS && off + 3 <= size; r++) {
		uint8_t flags = data[off];
		uint32_t len = (uint32_t)data[off + 1] | (uint32_t)data[off + 2] << 8;

		off += 3;
		if (len > size - off)
			len = (uint32_t)(size - off);
		act(flags & 7, data + off, len, r);
		inject(data + off, len, flags);
		off += len;
		rocemu_port_progress(P.peer); /* swallow what the port sent */
	}
	rocemu_port_progress(P.port);
	rocemu_port_progress(P.peer);
	check_cache();
	return 0;
}
