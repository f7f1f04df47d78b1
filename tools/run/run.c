/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rocemu run: start an unmodified RDMA program on a rocemu device.
 *
 * The program is exec'd with LD_LIBRARY_PATH pointing at our libibverbs.so.1
 * (the build tree's verbs-provider/ or the installed <libdir>/rocemu/) and
 * the device described in the environment: $ROCEMU_DEVICE (newline-separated
 * key=value lines, from the port options given here) or $ROCEMU_CONFIG (a
 * config file). The port options are those of `rocemu port`, parsed by
 * rocemu_port_config_set(), so a bad one is reported before anything runs,
 * as is a capture file that cannot be written. Any program runs; one in
 * which libibverbs cannot be seen gets a one-line note.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../rocemu.h"
#include "rocemu_config.h"
#include "run.h"

#ifndef ROCEMU_PRIVATE_LIBDIR
#define ROCEMU_PRIVATE_LIBDIR "/usr/local/lib/rocemu"
#endif

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: rocemu run [PORT OPTIONS] [--config FILE] [--no-check] [--no-view]\n"
	    "                  [--] PROGRAM [ARGS...]\n"
	    "\n"
	    "Runs PROGRAM with rocemu's libibverbs: its RDMA device is an emulated RoCEv2 port.\n"
	    "\n"
	    "Port options (the same as 'rocemu port'; --opt VALUE or --opt=VALUE):\n"
	    "  --port SPEC        memif:server:SOCK, memif:client:SOCK, af_packet:IFACE, "
	    "af_xdp:IFACE, ...\n"
	    "  --ip ADDR[/PREFIX] an address of the port (repeatable; GID 1, 2, ... in order);\n"
	    "                     PREFIX defaults to 24 for IPv4, 64 for IPv6\n"
	    "  --mac MAC  --mtu N  --capture FILE.pcap  --capture-filter BPF  --capture-rotate "
	    "BYTES\n"
	    "  --name NAME        device name (default rocemu0)\n"
	    "  --ecn ect0|ect1|off ECN bits of frames whose address vector sets none (ect0)\n"
	    "  --vlan ID  --vlan-untagged accept|drop   an 802.1Q VLAN (PCP = the AV's SL)\n"
	    "  --memif-wait MS    a memif client waits this long for its server (10000)\n"
	    "  --progress-cpu N   rocemu's progress thread pinned to CPU N, spinning there\n"
	    "                     (never napping); also ROCEMU_PROGRESS_CPU=N\n"
	    "  --host NAME        the device is a context on the rocemu host NAME ('rocemu\n"
	    "                     host'): its addresses, QPNs and capture are the host's\n"
	    "  --fault-*          fault injection, see 'rocemu port --help'\n"
	    "Under mpirun/srun (one command line for every rank):\n"
	    "  --rank-port memif:SOCK  rank 0 the memif server, rank 1 the client (2 ranks)\n"
	    "  --rank-port SPEC        any other port spec, the same for every rank\n"
	    "  --rank-ip ADDR/PREFIX   rank r gets ADDR + r\n"
	    "  --capture F-%%r.pcap    %%r becomes the rank\n"
	    "Other options:\n"
	    "  --config FILE      take the device(s) from a config file ([name] sections, key = "
	    "value)\n"
	    "  --no-check         do not look for libibverbs in PROGRAM (no note when it has\n"
	    "                     none, as python3 or a script)\n"
	    "  --no-view          no private /sys/class/infiniband and /dev/infiniband view\n"
	    "                     (the view lets UCX and topology code find the device)\n"
	    "\n"
	    "Example: rocemu run --port memif:server:/tmp/r.sock --ip 10.88.0.1/24 -- "
	    "ibv_rc_pingpong -g 1\n");
}

int run_self_path(char *out, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", out, len - 1);
	if (n < 0)
		return -errno;
	out[n] = '\0';
	return 0;
}

int run_find_provider_dir(char *out, size_t len)
{
	char self[PATH_MAX], cand[PATH_MAX + 64];
	const char *env = getenv("ROCEMU_LIBDIR");

	if (env && *env) {
		snprintf(cand, sizeof(cand), "%s/libibverbs.so.1", env);
		if (access(cand, R_OK) == 0) {
			snprintf(out, len, "%s", env);
			return 0;
		}
	}
	if (run_self_path(self, sizeof(self)) == 0) {
		char *slash = strrchr(self, '/');
		if (slash)
			*slash = '\0';
		/* build tree: <build>/tools/rocemu and <build>/verbs-provider/ */
		static const char *const rel[] = {"../verbs-provider", "../lib/rocemu",
						  "../lib/x86_64-linux-gnu/rocemu",
						  "../lib64/rocemu"};
		for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
			snprintf(cand, sizeof(cand), "%s/%s/libibverbs.so.1", self, rel[i]);
			if (access(cand, R_OK) == 0) {
				char *dir = realpath(cand, NULL);
				if (!dir)
					continue;
				*strrchr(dir, '/') = '\0';
				snprintf(out, len, "%s", dir);
				free(dir);
				return 0;
			}
		}
	}
	snprintf(cand, sizeof(cand), "%s/libibverbs.so.1", ROCEMU_PRIVATE_LIBDIR);
	if (access(cand, R_OK) == 0) {
		snprintf(out, len, "%s", ROCEMU_PRIVATE_LIBDIR);
		return 0;
	}
	return -ENOENT;
}

/* 0 if path is a file execv can start, else why not (-ENOENT, -EISDIR, -EACCES). */
static int executable_file(const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (!S_ISREG(st.st_mode) || access(path, X_OK) < 0)
		return -EACCES;
	return 0;
}

/*
 * PROGRAM as execv wants it: a path, searched in $PATH when it has no slash,
 * as a shell does. 0, or -ENOENT (nothing of that name) or the reason the
 * file found is not executable (-EACCES, -EISDIR); out then names that file.
 */
static int resolve_program(const char *prog, char *out, size_t len)
{
	char cand[PATH_MAX];
	int first_err = -ENOENT;

	if (strchr(prog, '/')) {
		snprintf(out, len, "%s", prog);
		return executable_file(out);
	}
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");
		int rc;

		snprintf(cand, sizeof(cand), "%.*s/%s", (int)n, n ? path : ".", prog);
		rc = executable_file(cand);
		if (rc == 0 || (rc != -ENOENT && first_err == -ENOENT)) {
			snprintf(out, len, "%s", cand);
			if (rc == 0)
				return 0;
			first_err = rc;
		}
		path += n + (path[n] == ':');
	}
	return first_err;
}

/* A "#!" script: its interpreter line (up to the end of the line) in out. 0 or -ENOEXEC. */
static int run_script_interpreter(const char *path, char *out, size_t len)
{
	char line[256];
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return -errno;
	n = fread(line, 1, sizeof(line) - 1, f);
	fclose(f);
	line[n] = '\0';
	if (n < 3 || line[0] != '#' || line[1] != '!')
		return -ENOEXEC;
	line[strcspn(line, "\n")] = '\0';
	snprintf(out, len, "%s", line + 2 + strspn(line + 2, " \t"));
	return 0;
}

/* One line on stderr when PROGRAM shows no sign of libibverbs; it runs all the same. */
static void warn_without_ibverbs(const char *prog)
{
	char interp[PATH_MAX];
	int r = run_program_uses_ibverbs(prog);

	if (r == 1)
		return;
	if (run_script_interpreter(prog, interp, sizeof(interp)) == 0)
		fprintf(stderr,
			"rocemu run: note: %s is a script (%s): cannot see whether what it runs "
			"uses libibverbs; every program it starts gets rocemu's\n",
			prog, interp);
	else if (r == 0)
		fprintf(stderr,
			"rocemu run: note: %s does not link libibverbs; starting it anyway (a "
			"library it loads later, e.g. pyverbs, gets rocemu's)\n",
			prog);
	else
		fprintf(stderr,
			"rocemu run: note: %s: %s, cannot see whether it uses libibverbs; "
			"starting it anyway\n",
			prog, r == -ENOEXEC ? "not a 64-bit ELF program" : strerror(-r));
}

/*
 * Every device's capture file can be written, and no two devices write the
 * same one: found now, before the program runs, instead of as an error of
 * its first ibv_open_device.
 */
static int check_captures(const struct rocemu_port_config *cfg, unsigned n, char *err,
			  size_t errlen)
{
	for (unsigned k = 0; k < n; k++) {
		if (!cfg[k].capture_path[0])
			continue;
		if (rocemu_capture_check(cfg[k].capture_path, err, errlen) < 0)
			return -EINVAL;
		for (unsigned j = 0; j < k; j++)
			if (!strcmp(cfg[j].capture_path, cfg[k].capture_path)) {
				snprintf(err, errlen, "devices %s and %s both capture to %s",
					 cfg[j].name, cfg[k].name, cfg[k].capture_path);
				return -EINVAL;
			}
	}
	return 0;
}

static int append(char *buf, size_t cap, size_t *len, const char *key, const char *val)
{
	int n = snprintf(buf + *len, cap - *len, "%s=%s\n", key, val);
	if (n < 0 || (size_t)n >= cap - *len)
		return -ENOSPC;
	*len += (size_t)n;
	return 0;
}

int rocemu_cmd_run(int argc, char **argv)
{
	static struct rocemu_port_config cfgs[16];
	struct rocemu_port_config cfg;
	char err[512] = "", device_env[8192] = "", prog[PATH_MAX], libdir[PATH_MAX];
	size_t env_len = 0;
	const char *config = NULL;
	bool no_check = false, no_view = false, port_opts = false;
	unsigned n_cfgs = 1;
	int i;

	rocemu_port_config_init(&cfg);
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		}
		if (strncmp(a, "--", 2))
			break; /* PROGRAM */
		if (!strcmp(a, "--no-check")) {
			no_check = true;
			continue;
		}
		if (!strcmp(a, "--no-view")) {
			no_view = true;
			continue;
		}
		char key[64];
		const char *eq = strchr(a, '='), *val;
		size_t klen = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
		if (klen >= sizeof(key)) {
			fprintf(stderr, "rocemu run: unknown option '%s'\n", a);
			return 2;
		}
		memcpy(key, a + 2, klen);
		key[klen] = '\0';
		if (eq)
			val = eq + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		else {
			fprintf(stderr, "rocemu run: option --%s needs a value\n", key);
			return 2;
		}
		if (!strcmp(key, "config")) {
			config = val;
			continue;
		}
		char host_spec[ROCEMU_PORT_SPEC_MAX];
		if (!strcmp(key, "host")) { /* --host H: a context on the rocemu host H */
			snprintf(key, sizeof(key), "port");
			snprintf(host_spec, sizeof(host_spec), "host:%s", val);
			val = host_spec;
		}
		char ranked[ROCEMU_PATH_MAX];
		if (run_rank_option(key, sizeof(key), val, ranked, sizeof(ranked), err,
				    sizeof(err)) < 0) {
			fprintf(stderr, "rocemu run: %s\n", err);
			return 2;
		}
		val = ranked;
		if (strchr(val, '\n')) {
			fprintf(stderr, "rocemu run: --%s: the value may not contain a newline\n",
				key);
			return 2;
		}
		int rc = rocemu_port_config_set(&cfg, key, val, err, sizeof(err));
		if (rc < 0) {
			fprintf(stderr, "rocemu run: %s\n",
				err[0] ? err : (rc == -ENOENT ? "unknown option" : "bad value"));
			return 2;
		}
		if (append(device_env, sizeof(device_env), &env_len, key, val) < 0) {
			fprintf(stderr, "rocemu run: too many port options\n");
			return 2;
		}
		port_opts = true;
	}
	if (i >= argc) {
		fprintf(stderr, "rocemu run: no PROGRAM given (see rocemu run --help)\n");
		return 2;
	}
	if (port_opts && config) {
		fprintf(stderr, "rocemu run: give either port options or --config, not both\n");
		return 2;
	}
	if (port_opts) {
		if (rocemu_port_config_validate(&cfg, err, sizeof(err)) < 0 ||
		    check_captures(&cfg, 1, err, sizeof(err)) < 0) {
			fprintf(stderr, "rocemu run: %s\n", err);
			return 2;
		}
		setenv(ROCEMU_ENV_DEVICE, device_env, 1);
		unsetenv(ROCEMU_ENV_CONFIG);
	} else {
		if (!config)
			config = getenv(ROCEMU_ENV_CONFIG);
		if (!config || !*config) {
			fprintf(stderr, "rocemu run: no device: give --port SPEC (with --ip "
					"ADDR[/PREFIX]) or --config FILE\n");
			return 2;
		}
		if (rocemu_config_parse_file(config, cfgs, 16, &n_cfgs, err, sizeof(err)) < 0 ||
		    check_captures(cfgs, n_cfgs, err, sizeof(err)) < 0) {
			fprintf(stderr, "rocemu run: %s\n", err);
			return 2;
		}
		char *abs = realpath(config, NULL);
		setenv(ROCEMU_ENV_CONFIG, abs ? abs : config, 1);
		free(abs);
		unsetenv(ROCEMU_ENV_DEVICE);
	}

	int found = resolve_program(argv[i], prog, sizeof(prog));
	if (found == -ENOENT) {
		fprintf(stderr, "rocemu run: %s: %s\n", argv[i],
			strchr(argv[i], '/') ? "no such file" : "command not found");
		return 127;
	}
	if (found < 0) {
		/* the exit statuses of a shell: 127 not found, 126 found but not runnable */
		fprintf(stderr, "rocemu run: %s: %s\n", prog,
			found == -EISDIR ? "is a directory"
					 : "not executable (chmod +x it, or name its interpreter: "
					   "rocemu run ... -- sh FILE)");
		return 126;
	}
	if (!no_check)
		warn_without_ibverbs(prog);
	if (run_find_provider_dir(libdir, sizeof(libdir)) < 0) {
		fprintf(stderr,
			"rocemu run: cannot find rocemu's libibverbs.so.1 (looked next to the "
			"rocemu executable and in %s); set ROCEMU_LIBDIR\n",
			ROCEMU_PRIVATE_LIBDIR);
		return 2;
	}
	if (!no_view && run_view_enter(port_opts ? &cfg : cfgs, n_cfgs, err, sizeof(err)) < 0)
		fprintf(stderr,
			"rocemu run: no private /sys and /dev view (%s): programs that look for "
			"/dev/infiniband or /sys/class/infiniband (UCX, MPI over UCX) will not "
			"find the device; verbs programs are unaffected (docs/verbs-provider.md; "
			"--no-view silences this)\n",
			err);
	const char *old = getenv("LD_LIBRARY_PATH");
	char ld[2 * PATH_MAX + 2];
	snprintf(ld, sizeof(ld), "%s%s%s", libdir, old && *old ? ":" : "", old && *old ? old : "");
	setenv("LD_LIBRARY_PATH", ld, 1);
	execv(prog, argv + i);
	fprintf(stderr, "rocemu run: cannot execute %s: %s\n", prog, strerror(errno));
	return 126;
}
