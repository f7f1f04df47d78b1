/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A program that exits without closing its port must still leave a complete
 * capture file (the exit handler flushes it) and exit normally. The test runs
 * itself as a child that opens a port with capture, pings its own address
 * (loopback), and calls exit() with the port open; the parent, which never
 * starts DPDK, then reads the capture with libpcap.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pcap/pcap.h>

#include "rocemu_port.h"

static int child(const char *capture)
{
	struct rocemu_port_config cfg;
	struct rocemu_port *port;
	char err[512];
	uint8_t self[16];
	int rc;

	rocemu_port_config_init(&cfg);
	if (rocemu_port_config_set(&cfg, "port", "ring:exit:a", err, sizeof(err)) ||
	    rocemu_port_config_set(&cfg, "ip", "10.74.0.1/24", err, sizeof(err)) ||
	    rocemu_port_config_set(&cfg, "capture", capture, err, sizeof(err))) {
		fprintf(stderr, "config: %s\n", err);
		return 1;
	}
	rc = rocemu_port_open(&cfg, &port, err, sizeof(err));
	if (rc) {
		/* only a machine without memory for the mbuf pools is a reason to
		 * skip; any other error (-EINVAL included) is a failure of rocemu */
		fprintf(stderr, "open: %s\n", err);
		return rc == -ENOMEM ? 77 : 1;
	}
	rocemu_gid_parse("10.74.0.1", self);
	for (uint16_t seq = 1; seq <= 3; seq++) {
		uint64_t before = rocemu_port_ping_replies(port);

		if (rocemu_port_ping(port, self, 7, seq))
			return 1;
		/* the progress thread answers; no explicit progress here, and no
		 * deadline of our own (the test's timeout catches a hang) */
		while (rocemu_port_ping_replies(port) == before) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
	}
	exit(0); /* port left open on purpose */
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/rocemu-port-exit-XXXXXX", path[128], errbuf[PCAP_ERRBUF_SIZE];
	struct pcap_pkthdr *h;
	const u_char *d;
	unsigned icmp = 0;
	pid_t pid;
	int status;
	pcap_t *pc;

	if (argc == 3 && !strcmp(argv[1], "child"))
		return child(argv[2]);
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/exit.pcap", dir);
	pid = fork();
	if (pid == 0) {
		execl("/proc/self/exe", argv[0], "child", path, (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return 1;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
		printf("SKIP: no memory for the port's mbuf pools here\n");
		return 77;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		printf("FAIL: child did not exit cleanly (status 0x%x)\n", status);
		return 1;
	}
	pc = pcap_open_offline(path, errbuf);
	if (!pc) {
		printf("FAIL: capture unreadable: %s\n", errbuf);
		return 1;
	}
	while (pcap_next_ex(pc, &h, &d) == 1)
		if (h->caplen >= 34 && d[12] == 0x08 && d[13] == 0x00 && d[23] == 1)
			icmp++;
	pcap_close(pc);
	unlink(path);
	rmdir(dir);
	/* three requests and three replies, all looped back */
	if (icmp != 6) {
		printf("FAIL: %u ICMP frames in the capture, expected 6\n", icmp);
		return 1;
	}
	printf("PASS: exit with the port open left a complete capture\n");
	return 0;
}
