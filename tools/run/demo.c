/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rocemu demo: two emulated hosts over memif, each a `rocemu run` process
 * (A: memif server, 10.88.0.1; B: memif client, 10.88.0.2), both capturing.
 * Unmodified ibv_rc_pingpong runs between them, then ib_write_bw; their
 * out-of-band TCP handshake uses the kernel's loopback, the RoCEv2 traffic
 * crosses memif. Afterwards each capture is summarised: frames by BTH
 * opcode, ICRC verified independently of the engine, and tshark's verdict
 * when tshark is installed. Every step has a timeout: the demo cannot hang.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pcap/pcap.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../rocemu.h"
#include "roce_wire.h"
#include "run.h"

#define DEMO_TCP_PORT	18515
#define STAGE_TIMEOUT_S 90

struct demo {
	char dir[PATH_MAX];
	char self[PATH_MAX];
	int timeout_s;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Start `rocemu run` with argv in its own process group, output to log. */
static pid_t spawn(const struct demo *d, char *const argv[], const char *log)
{
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	setpgid(0, 0);
	int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	execv(d->self, argv);
	_exit(127);
}

/* Is something listening on TCP port (the server side of the handshake)? */
static bool tcp_listening(unsigned port)
{
	static const char *const files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	char line[512], want[16];

	snprintf(want, sizeof(want), ":%04X", port);
	for (size_t f = 0; f < 2; f++) {
		FILE *fp = fopen(files[f], "r");
		if (!fp)
			continue;
		while (fgets(line, sizeof(line), fp)) {
			char local[128], remote[128], st[8];
			if (sscanf(line, "%*d: %127s %127s %7s", local, remote, st) != 3)
				continue;
			const char *colon = strrchr(local, ':');
			if (colon && !strcmp(colon, want) && !strcmp(st, "0A")) {
				fclose(fp);
				return true;
			}
		}
		fclose(fp);
	}
	return false;
}

/* Wait for pid until deadline; kill its group after. Returns exit status, or -1 on timeout. */
static int wait_until(pid_t pid, double deadline)
{
	int st;
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (r < 0)
			return -1;
		if (now_s() > deadline) {
			kill(-pid, SIGTERM);
			usleep(300000);
			kill(-pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		usleep(20000);
	}
}

static void print_log(const char *title, const char *path, int max_lines)
{
	FILE *f = fopen(path, "r");
	char line[512];
	int n = 0;

	printf("  --- %s (%s)\n", title, path);
	if (!f)
		return;
	while (fgets(line, sizeof(line), f) && n++ < max_lines)
		printf("  | %s", line);
	fclose(f);
}

struct stage {
	const char *name;
	const char *program;
	const char *const *server_args; /* NULL-terminated, after the program */
	const char *const *client_args;
};

/* Run one server/client pair of `rocemu run` processes. 0 when both exit 0. */
static int run_stage(const struct demo *d, const struct stage *s)
{
	char sock[PATH_MAX + 32], cap_a[PATH_MAX + 32], cap_b[PATH_MAX + 32];
	char log_a[PATH_MAX + 32], log_b[PATH_MAX + 32];
	char port_a[PATH_MAX + 64], port_b[PATH_MAX + 64];
	const char *argv_a[32], *argv_b[32];
	int na = 0, nb = 0;

	snprintf(sock, sizeof(sock), "%s/%s.sock", d->dir, s->name);
	snprintf(cap_a, sizeof(cap_a), "%s/%s-hostA.pcap", d->dir, s->name);
	snprintf(cap_b, sizeof(cap_b), "%s/%s-hostB.pcap", d->dir, s->name);
	snprintf(log_a, sizeof(log_a), "%s/%s-hostA.log", d->dir, s->name);
	snprintf(log_b, sizeof(log_b), "%s/%s-hostB.log", d->dir, s->name);
	snprintf(port_a, sizeof(port_a), "memif:server:%s", sock);
	snprintf(port_b, sizeof(port_b), "memif:client:%s", sock);

	const char *common_a[] = {"rocemu",	  "run",       "--port", port_a, "--ip",
				  "10.88.0.1/24", "--capture", cap_a,	 "--",	 s->program};
	const char *common_b[] = {"rocemu",	  "run",       "--port", port_b, "--ip",
				  "10.88.0.2/24", "--capture", cap_b,	 "--",	 s->program};
	for (size_t i = 0; i < sizeof(common_a) / sizeof(common_a[0]); i++) {
		argv_a[na++] = common_a[i];
		argv_b[nb++] = common_b[i];
	}
	for (size_t i = 0; s->server_args[i] && na < 31; i++)
		argv_a[na++] = s->server_args[i];
	for (size_t i = 0; s->client_args[i] && nb < 31; i++)
		argv_b[nb++] = s->client_args[i];
	argv_a[na] = argv_b[nb] = NULL;

	printf("\n== %s: host A (memif server, 10.88.0.1) <-> host B (memif client, 10.88.0.2)\n",
	       s->name);
	printf("   A: rocemu run --port %s --ip 10.88.0.1/24 --capture %s -- %s", port_a, cap_a,
	       s->program);
	for (size_t i = 0; s->server_args[i]; i++)
		printf(" %s", s->server_args[i]);
	printf("\n   B: rocemu run --port %s --ip 10.88.0.2/24 --capture %s -- %s", port_b, cap_b,
	       s->program);
	for (size_t i = 0; s->client_args[i]; i++)
		printf(" %s", s->client_args[i]);
	printf("\n");
	fflush(stdout);

	double deadline = now_s() + d->timeout_s;
	pid_t a = spawn(d, (char *const *)argv_a, log_a);
	if (a < 0)
		return -1;
	/* The client may connect only once the server listens (it does not retry). */
	siginfo_t si;
	bool a_alive = true;
	while (!tcp_listening(DEMO_TCP_PORT) && now_s() < deadline) {
		memset(&si, 0, sizeof(si));
		if (waitid(P_PID, (id_t)a, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
		    si.si_pid == a) {
			a_alive = false; /* A failed before listening: do not start B */
			break;
		}
		usleep(50000);
	}
	pid_t b = a_alive ? spawn(d, (char *const *)argv_b, log_b) : -1;
	int rb = b > 0 ? wait_until(b, deadline) : -1;
	int ra = wait_until(a, rb < 0 ? now_s() + 2 : deadline);
	printf("   host A exit: %s, host B exit: %s\n",
	       ra < 0	 ? "timeout"
	       : ra == 0 ? "0"
			 : "error",
	       !a_alive	 ? "not started"
	       : rb < 0	 ? "timeout"
	       : rb == 0 ? "0"
			 : "error");
	if (ra > 0)
		printf("   (host A exit status %d)\n", ra);
	if (rb > 0)
		printf("   (host B exit status %d)\n", rb);
	print_log("host A output", log_a, 40);
	if (a_alive)
		print_log("host B output", log_b, 40);
	return ra == 0 && rb == 0 ? 0 : -1;
}

/* ------------------------------------------------------------------------ */
/* What crossed the wire                                                      */

struct summary {
	uint64_t frames, roce, other, bad_icrc, malformed, bytes, payload;
	uint64_t by_opcode[256];
	double t_first, t_last;
};

static bool summarize_capture(const char *path, struct summary *s)
{
	char errbuf[PCAP_ERRBUF_SIZE];
	struct pcap_pkthdr *h;
	const u_char *data;

	memset(s, 0, sizeof(*s));
	pcap_t *p =
	    pcap_open_offline_with_tstamp_precision(path, PCAP_TSTAMP_PRECISION_NANO, errbuf);
	if (!p) {
		printf("   %s: cannot open (%s)\n", path, errbuf);
		return false;
	}
	while (pcap_next_ex(p, &h, &data) == 1) {
		struct roce_pkt pkt;
		double t = (double)h->ts.tv_sec + (double)h->ts.tv_usec / 1e9;
		s->frames++;
		s->bytes += h->len;
		enum roce_parse_status st =
		    roce_parse(data, h->caplen, ROCE_PARSE_VERIFY_ICRC, &pkt);
		if (st == ROCE_PARSE_OK) {
			if (!s->roce)
				s->t_first = t;
			s->t_last = t;
			s->roce++;
			s->by_opcode[pkt.opcode]++;
			s->payload += pkt.payload_len;
		} else if (st == ROCE_PARSE_BAD_ICRC) {
			s->bad_icrc++;
		} else if (st == ROCE_PARSE_NOT_IP || st == ROCE_PARSE_NOT_UDP ||
			   st == ROCE_PARSE_NOT_ROCE_PORT || st == ROCE_PARSE_IP_OPTIONS) {
			s->other++; /* ARP, ICMP, ICMPv6 neighbour discovery, ... */
		} else {
			s->malformed++;
		}
	}
	pcap_close(p);
	return true;
}

/* tshark's verdict: frames it flags malformed or with error-level expert info. -1 if unavailable.
 */
static long tshark_problems(const char *path)
{
	char cmd[PATH_MAX * 2];
	if (system("command -v tshark >/dev/null 2>&1") != 0)
		return -1;
	snprintf(
	    cmd, sizeof(cmd),
	    /* payload is application bytes: keep Wireshark's payload heuristics off it */
	    "timeout 60 tshark -n --disable-protocol rpcordma --disable-protocol smb_direct "
	    "--disable-protocol smc --disable-protocol nvme-rdma --disable-protocol lnet "
	    "--disable-protocol iser --disable-protocol infiniband_sdp --disable-protocol fcoib "
	    "--disable-protocol infiniband.eoib --disable-heuristic eth_over_ib "
	    "-r '%s' -Y '_ws.malformed || _ws.expert.severity >= \"error\"' "
	    "-T fields -e frame.number 2>/dev/null | wc -l",
	    path);
	FILE *f = popen(cmd, "r");
	long n = -1;
	if (f) {
		if (fscanf(f, "%ld", &n) != 1)
			n = -1;
		pclose(f);
	}
	return n;
}

static void print_summary(const char *path)
{
	struct summary s;
	if (!summarize_capture(path, &s))
		return;
	printf("   %s: %llu frames (%llu RoCEv2, %llu other: ARP/ND/ICMP, rocemu records), %llu "
	       "bytes\n",
	       path, (unsigned long long)s.frames, (unsigned long long)s.roce,
	       (unsigned long long)s.other, (unsigned long long)s.bytes);
	for (unsigned op = 0; op < 256; op++)
		if (s.by_opcode[op])
			printf("      %-40s %8llu\n", roce_opcode_name((uint8_t)op),
			       (unsigned long long)s.by_opcode[op]);
	printf("      ICRC checked independently: %llu good, %llu bad; %llu malformed\n",
	       (unsigned long long)s.roce, (unsigned long long)s.bad_icrc,
	       (unsigned long long)s.malformed);
	double dt = s.t_last - s.t_first;
	if (s.roce && dt > 0)
		printf("      payload %.1f KiB over %.3f s (%.1f MB/s as captured)\n",
		       (double)s.payload / 1024, dt, (double)s.payload / dt / 1e6);
	long t = tshark_problems(path);
	if (t >= 0)
		printf("      tshark: %ld frames malformed or with errors%s\n", t,
		       t == 0 ? " (decodes cleanly as RRoCE)" : "");
}

/* The protocol-level explanation, from `rocemu inspect --check` when this rocemu has it. */
static void print_inspect(const struct demo *d, const char *path)
{
#ifdef ROCEMU_HAVE_CMD_INSPECT
	char cmd[3 * PATH_MAX], line[512];
	snprintf(cmd, sizeof(cmd), "timeout 60 '%s' inspect --check '%s' 2>&1 | head -n 40",
		 d->self, path);
	FILE *f = popen(cmd, "r");
	if (!f)
		return;
	printf("   rocemu inspect --check %s:\n", path);
	while (fgets(line, sizeof(line), f))
		printf("   > %s", line);
	pclose(f);
#else
	(void)d;
	(void)path;
#endif
}

int rocemu_cmd_demo(int argc, char **argv)
{
	struct demo d = {.timeout_s = STAGE_TIMEOUT_S};
	const char *dir = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--dir") && i + 1 < argc)
			dir = argv[++i];
		else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
			d.timeout_s = atoi(argv[++i]) > 0 ? atoi(argv[i]) : STAGE_TIMEOUT_S;
		else {
			printf(
			    "usage: rocemu demo [--dir DIR] [--timeout SECONDS]\n"
			    "Two rocemu hosts over memif: ibv_rc_pingpong, then ib_write_bw; "
			    "captures\n"
			    "and logs are kept in DIR (default: a new /tmp/rocemu-demo-XXXXXX).\n");
			return strcmp(argv[i], "--help") && strcmp(argv[i], "-h") ? 2 : 0;
		}
	}
	if (run_self_path(d.self, sizeof(d.self)) < 0) {
		fprintf(stderr, "rocemu demo: cannot find the rocemu executable\n");
		return 1;
	}
	if (dir) {
		mkdir(dir, 0755);
		snprintf(d.dir, sizeof(d.dir), "%s", dir);
	} else {
		snprintf(d.dir, sizeof(d.dir), "/tmp/rocemu-demo-XXXXXX");
		if (!mkdtemp(d.dir)) {
			fprintf(stderr, "rocemu demo: mkdtemp: %s\n", strerror(errno));
			return 1;
		}
	}
	if (system("command -v ibv_rc_pingpong >/dev/null && command -v ib_write_bw >/dev/null") !=
	    0) {
		fprintf(stderr, "rocemu demo: needs ibv_rc_pingpong and ib_write_bw: "
				"apt-get install ibverbs-utils perftest\n");
		return 1;
	}
	printf("rocemu demo: two emulated RoCEv2 hosts over memif; files in %s\n"
	       "(the programs' TCP handshake goes over the kernel loopback, the RDMA traffic over "
	       "memif)\n",
	       d.dir);

	static const char *const pp_server[] = {"-g", "1", NULL};
	static const char *const pp_client[] = {"-g", "1", "127.0.0.1", NULL};
	static const char *const bw_server[] = {"-x", "1", "-F", "-s", "65536", "-n", "1000", NULL};
	static const char *const bw_client[] = {"-x", "1",    "-F",	   "-s", "65536",
						"-n", "1000", "127.0.0.1", NULL};
	const struct stage stages[] = {
	    {"rc_pingpong", "ibv_rc_pingpong", pp_server, pp_client},
	    {"write_bw", "ib_write_bw", bw_server, bw_client},
	};
	int failed = 0;
	for (size_t i = 0; i < sizeof(stages) / sizeof(stages[0]); i++) {
		int rc = run_stage(&d, &stages[i]);
		char cap[PATH_MAX + 32];
		printf("\n   What crossed the wire (%s):\n", stages[i].name);
		snprintf(cap, sizeof(cap), "%s/%s-hostA.pcap", d.dir, stages[i].name);
		print_summary(cap);
		snprintf(cap, sizeof(cap), "%s/%s-hostB.pcap", d.dir, stages[i].name);
		print_summary(cap);
		print_inspect(&d, cap);
		printf("   => %s %s\n", stages[i].name, rc == 0 ? "PASSED" : "FAILED");
		failed += rc != 0;
	}
	printf("\nrocemu demo: %s. Open the captures in Wireshark: %s/*.pcap\n",
	       failed ? "some steps FAILED" : "all steps passed", d.dir);
	return failed ? 1 : 0;
}
