/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rocemu: the command-line front door. Dispatches to one subcommand; each
 * subcommand parses its own options and prints its own --help.
 */
#include <stdio.h>
#include <string.h>

#include "rocemu.h"

struct subcommand {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static const struct subcommand subcommands[] = {
    {"version", NULL, "print the version"},
#ifdef ROCEMU_HAVE_CMD_PORT
    {"port", rocemu_cmd_port, "bring an emulated RoCE port up alone (ARP, ping, capture)"},
#endif
#ifdef ROCEMU_HAVE_CMD_RUN
    {"run", rocemu_cmd_run, "run an unmodified RDMA program on a rocemu device"},
    {"demo", rocemu_cmd_demo, "two hosts over memif: ibv_rc_pingpong and ib_write_bw, captured"},
#endif
#ifdef ROCEMU_HAVE_CMD_HOST
    {"host", rocemu_cmd_host, "one emulated NIC shared by every process on this host"},
    {"stat", rocemu_cmd_stat, "live counters of a rocemu host, per process and QP"},
#endif
#ifdef ROCEMU_HAVE_CMD_INSPECT
    {"inspect", rocemu_cmd_inspect, "explain a RoCEv2 capture (pcap/pcapng)"},
#endif
};

static void usage(FILE *f)
{
	fprintf(f, "usage: rocemu COMMAND [OPTIONS]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		fprintf(f, "  %-8s %s\n", subcommands[i].name, subcommands[i].summary);
	fprintf(f, "\n'rocemu COMMAND --help' describes one command.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("rocemu %s\n", ROCEMU_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		if (subcommands[i].run && !strcmp(argv[1], subcommands[i].name))
			return subcommands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "rocemu: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
