/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `rocemu port`: bring one emulated RoCE port up alone, with no program on
 * top: it answers ARP/ND and ping, captures, and can ping a peer. Runs until
 * SIGINT/SIGTERM (or --duration, or until the --ping run is over) and
 * prints its counters on exit; a capture that could not write every frame
 * makes it fail (status 1) with one line saying so.
 */
#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../cmd_opt.h"
#include "../rocemu.h"
#include "rocemu_port.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: rocemu port --port SPEC [options]\n"
	       "\n"
	       "Bring an emulated RoCE port up alone: it answers ARP/ND and ping, and\n"
	       "captures. Runs until SIGINT/SIGTERM; prints its counters on exit.\n"
	       "\n"
	       "  --port SPEC            memif:server:SOCKET | memif:client:SOCKET | "
	       "af_packet:IFACE |\n"
	       "                         af_xdp:IFACE | ring:PAIR:a|b | dpdk:DEVARGS\n"
	       "  --name NAME            device name (rocemu0)\n"
	       "  --mac MAC              station address (default: the interface's, or a stable\n"
	       "                         generated locally administered one)\n"
	       "  --ip ADDR[/PREFIX]     IPv4 or IPv6 address, repeatable; each adds a GID;\n"
	       "                         PREFIX defaults to 24 for IPv4, 64 for IPv6\n"
	       "  --mtu N                Ethernet MTU (default: the interface's; 4200 for memif)\n"
	       "  --ecn ect0|ect1|off    ECN bits of frames whose AV sets none (ect0)\n"
	       "  --vlan ID              802.1Q VLAN of the port (PCP = the AV's SL)\n"
	       "  --vlan-untagged accept|drop   with --vlan, take untagged frames too (drop)\n"
	       "  --capture FILE         write every frame to FILE (pcap, ns timestamps)\n"
	       "  --capture-filter EXPR  BPF filter for the capture (libpcap syntax)\n"
	       "  --capture-rotate BYTES start FILE.1, FILE.2, ... when a file reaches BYTES\n"
	       "  --arp-timeout MS, --arp-retries N, --arp-expire MS   neighbour resolution\n"
	       "  --memif-wait MS        memif client: wait this long for its server (10000;\n"
	       "                         0: fail at once with ECONNREFUSED)\n"
	       "  --progress-cpu N       the progress thread pinned to CPU N, spinning there\n"
	       "  --fault-drop|dup|reorder|corrupt|delay [tx:|rx:]PPM, --fault-delay-us N,\n"
	       "  --fault-drop-list tx:1,2,..|rx:..., --fault-seed N   fault injector\n"
	       "  --ping ADDR            send echo requests to ADDR, then exit (0 = all answered)\n"
	       "  --count N              echo requests to send with --ping (3)\n"
	       "  --interval MS          time between echo requests (200)\n"
	       "  --stay                 with --ping: keep running afterwards until a signal\n"
	       "  --duration SECONDS     exit after this long (default: run until a signal)\n");
}

/* A line from the port while it opens (a memif client waiting for its server). */
static void port_notice(void *arg, const char *line)
{
	(void)arg;
	fprintf(stderr, "rocemu port: %s\n", line);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static void print_port(struct rocemu_port *port)
{
	const struct rocemu_port_config *cfg = rocemu_port_get_config(port);
	uint8_t mac[6], gid[16];
	char text[64];

	rocemu_port_mac(port, mac);
	printf("%s: %s mac %02x:%02x:%02x:%02x:%02x:%02x mtu %u active_mtu %u link %s\n", cfg->name,
	       cfg->spec, mac[0], mac[1], mac[2], mac[3], mac[4], mac[5], rocemu_port_eth_mtu(port),
	       rocemu_port_active_mtu(port), rocemu_port_link_up(port) ? "up" : "down");
	for (unsigned i = 0; i < rocemu_port_gid_count(port); i++) {
		rocemu_port_gid(port, i, gid);
		printf("  gid[%u] %s", i, roce_gid_str(gid, text, sizeof(text)));
		if (i > 0 && i <= cfg->n_ips) /* GID i is --ip i */
			printf("/%u", cfg->ips[i - 1].prefix);
		printf(" (RoCE v2)\n");
	}
	printf("  EAL: %s\n", rocemu_eal_args());
	fflush(stdout);
}

static int wait_link(struct rocemu_port *port, unsigned ms)
{
	for (unsigned t = 0; t < ms && !stop_requested; t += 10) {
		if (rocemu_port_link_up(port))
			return 0;
		sleep_ms(10);
	}
	return rocemu_port_link_up(port) ? 0 : -ENOLINK;
}

/* One echo request: resolve (retrying while ARP/ND is under way), send, wait. */
static int ping_once(struct rocemu_port *port, const uint8_t dst[16], const char *text,
		     uint16_t seq)
{
	uint64_t before = rocemu_port_ping_replies(port);
	uint64_t deadline = rocemu_now_ns() + 10000000000ull;
	int rc;

	for (;;) {
		rc = rocemu_port_ping(port, dst, (uint16_t)getpid(), seq);
		if (rc != -EAGAIN || stop_requested || rocemu_now_ns() > deadline)
			break;
		sleep_ms(5);
	}
	if (rc == -EHOSTUNREACH) {
		printf("ping %s seq=%u: cannot resolve %s (%s)\n", text, seq, text,
		       strchr(text, ':') ? "ND" : "ARP");
		return rc;
	}
	if (rc) {
		printf("ping %s seq=%u: %s\n", text, seq, strerror(-rc));
		return rc;
	}
	deadline = rocemu_now_ns() + 1000000000ull;
	while (rocemu_port_ping_replies(port) == before && !stop_requested &&
	       rocemu_now_ns() < deadline)
		sleep_ms(1);
	if (rocemu_port_ping_replies(port) == before) {
		printf("ping %s seq=%u: no reply within 1 s\n", text, seq);
		return -ETIMEDOUT;
	}
	printf("reply from %s: seq=%u time=%.3f ms\n", text, seq,
	       (double)rocemu_port_ping_last_rtt_ns(port) / 1e6);
	fflush(stdout);
	return 0;
}

static int run_pings(struct rocemu_port *port, const char *target, unsigned count,
		     unsigned interval_ms)
{
	uint8_t dst[16];
	unsigned answered = 0;

	if (rocemu_gid_parse(target, dst)) {
		fprintf(stderr, "rocemu port: --ping '%s': not an IPv4 or IPv6 address\n", target);
		return 2;
	}
	if (wait_link(port, 10000)) {
		fprintf(stderr, "rocemu port: link did not come up within 10 s\n");
		return 1;
	}
	for (unsigned seq = 1; seq <= count && !stop_requested; seq++) {
		if (ping_once(port, dst, target, (uint16_t)seq) == 0)
			answered++;
		if (seq < count)
			sleep_ms(interval_ms);
	}
	printf("%u/%u echo requests to %s answered\n", answered, count, target);
	return answered == count ? 0 : 1;
}

static const char *const port_flags[] = {"stay", NULL};
static const struct cmd_opt_spec port_opts = {"port", port_flags, usage};

int rocemu_cmd_port(int argc, char **argv)
{
	struct rocemu_port_config cfg;
	struct rocemu_port *port;
	const char *ping = NULL;
	unsigned count = 3, interval = 200, duration = 0;
	char err[ROCEMU_CAPTURE_MSG_MAX];
	struct sigaction sa;
	struct cmd_opt o;
	int status = 0, exit_status, i = 1;
	bool stay = false;

	rocemu_port_config_init(&cfg);
	cfg.notice = port_notice;
	while (cmd_opt_next(&port_opts, argc, argv, &i, &o, &exit_status)) {
		if (!strcmp(o.name, "stay")) {
			stay = true;
		} else if (!strcmp(o.name, "ping")) {
			ping = o.val;
		} else if (!strcmp(o.name, "count")) {
			if (cmd_opt_uint(&port_opts, &o, 100000, &count))
				return 2;
		} else if (!strcmp(o.name, "interval")) {
			if (cmd_opt_uint(&port_opts, &o, 60000, &interval))
				return 2;
		} else if (!strcmp(o.name, "duration")) {
			if (cmd_opt_uint(&port_opts, &o, 86400 * 365, &duration))
				return 2;
		} else if (rocemu_port_config_set(&cfg, o.name, o.val, err, sizeof(err))) {
			fprintf(stderr, "rocemu port: %s\n", err);
			return 2;
		}
	}
	if (exit_status >= 0)
		return exit_status;
	if (rocemu_port_config_validate(&cfg, err, sizeof(err)) ||
	    (cfg.capture_path[0] && rocemu_capture_check(cfg.capture_path, err, sizeof(err)))) {
		fprintf(stderr, "rocemu port: %s\n", err);
		return 2;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	if (rocemu_port_open(&cfg, &port, err, sizeof(err))) {
		fprintf(stderr, "rocemu port: %s\n", err);
		return 1;
	}
	print_port(port);
	if (ping) {
		status = run_pings(port, ping, count, interval);
		fflush(stdout);
	}
	if (!ping || stay) {
		uint64_t end = duration ? rocemu_now_ns() + (uint64_t)duration * 1000000000ull : 0;

		while (!stop_requested && (!end || rocemu_now_ns() < end))
			sleep_ms(20);
	}
	rocemu_port_capture_sync(port); /* capture_frames counts what is in the file */
	printf("counters:\n");
	rocemu_port_counters_print(port, stdout);
	fflush(stdout);
	rocemu_port_close(port);
	/* a capture that lost frames is an error of this run, said last and loudly */
	while (rocemu_capture_take_failure(err, sizeof(err))) {
		fprintf(stderr, "rocemu port: %s\n", err);
		status = 1;
	}
	return status;
}
