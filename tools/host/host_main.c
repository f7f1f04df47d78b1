/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `rocemu host --name H --port SPEC --ip A/N ...`: one emulated RoCE NIC for
 * every process on a host (docs/host.md). It owns the uplink (any port
 * kind), answers ARP/ND/ICMP once, owns the QPN space and the capture, and
 * switches frames between its processes and the uplink by destination QPN.
 * Programs attach with `rocemu run --host H` or ROCEMU_HOST=H.
 *
 * Runs in the foreground until SIGINT/SIGTERM, or with --detach in the
 * background once it is ready (the command returns then, with the host's
 * status so far), its pid in --pid-file.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../cmd_opt.h"
#include "../rocemu.h"
#include "host.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: rocemu host --name NAME --port SPEC --ip ADDR[/N] [--ip ...] [options]\n"
	    "\n"
	    "One emulated RoCE NIC shared by every process on this host: it owns the uplink,\n"
	    "the MAC, the addresses and the QPN space, answers ARP/ND/ping once, captures,\n"
	    "and switches frames between its processes and the uplink by destination QPN.\n"
	    "Programs attach with 'rocemu run --host NAME -- PROGRAM' or ROCEMU_HOST=NAME.\n"
	    "\n"
	    "  --name NAME            the host's name (its directory: "
	    "$XDG_RUNTIME_DIR/rocemu/NAME,\n"
	    "                         /run/rocemu/NAME for root, else /tmp/rocemu-UID/NAME;\n"
	    "                         a NAME with a '/' is the directory itself)\n"
	    "  --port SPEC            the uplink: memif:server|client:SOCK, af_packet:IFACE,\n"
	    "                         af_xdp:IFACE, ring:PAIR:a|b, dpdk:DEVARGS\n"
	    "  --ip ADDR[/PREFIX]     an address of the host (repeatable: GID 1, 2, ...)\n"
	    "  --mac MAC  --mtu N     as for 'rocemu port'\n"
	    "  --capture FILE         every frame on the uplink or switched between processes,\n"
	    "                         once, into FILE (--capture-filter, --capture-rotate)\n"
	    "  --fault-*              fault injector on the uplink and the switch\n"
	    "  --no-direct            no direct rings: every same-host frame through the host's\n"
	    "                         thread (as with --capture or --fault-*; for benchmarks)\n"
	    "  --progress-cpu N       the forwarding thread pinned to CPU N, spinning there\n"
	    "                         (never sleeping), for a machine with a CPU to spare\n"
	    "  --arp-timeout MS, --arp-retries N, --arp-expire MS   neighbour resolution\n"
	    "  --qpn-quiet MS         a released QPN is not handed out again for MS (%u)\n"
	    "  --allow-user USER      this user may attach too (repeatable; default: only the\n"
	    "                         host's own user and root)\n"
	    "  --allow-group GROUP    members of GROUP may attach (repeatable)\n"
	    "  --detach               run in the background once ready\n"
	    "  --pid-file FILE        write the host's pid to FILE\n"
	    "  --verbose              a line on stderr per process attached or gone\n",
	    HOST_QPN_QUIET_MS_DEFAULT);
}

static int add_user(struct host *h, const char *val)
{
	struct passwd *pw = getpwnam(val);
	unsigned id;

	if (h->n_allowed_uids == HOST_MAX_ALLOWED)
		return -ENOSPC;
	if (pw)
		h->allowed_uids[h->n_allowed_uids++] = pw->pw_uid;
	else if (cmd_opt_parse_uint(val, UINT32_MAX - 1, &id) == 0)
		h->allowed_uids[h->n_allowed_uids++] = id;
	else
		return -EINVAL;
	return 0;
}

static int add_group(struct host *h, const char *val)
{
	struct group *gr = getgrnam(val);
	unsigned id;

	if (h->n_allowed_gids == HOST_MAX_ALLOWED)
		return -ENOSPC;
	if (gr)
		h->allowed_gids[h->n_allowed_gids++] = gr->gr_gid;
	else if (cmd_opt_parse_uint(val, UINT32_MAX - 1, &id) == 0)
		h->allowed_gids[h->n_allowed_gids++] = id;
	else
		return -EINVAL;
	return 0;
}

/* mkdir -p with mode for what we create; an existing directory of ours is
 * taken as it is, one of another user (or a symlink) refused. */
static int make_dir(const char *path, mode_t mode, char *err, size_t errlen)
{
	char buf[ROCEMU_PATH_MAX];
	struct stat st;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) && errno != EEXIST) {
			snprintf(err, errlen, "cannot create %s: %s", buf, strerror(errno));
			return -errno;
		}
		*p = '/';
	}
	if (mkdir(buf, mode) && errno != EEXIST) {
		snprintf(err, errlen, "cannot create %s: %s", buf, strerror(errno));
		return -errno;
	}
	if (lstat(buf, &st) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
		snprintf(err, errlen, "%s is not a directory of ours", buf);
		return -EPERM;
	}
	if (chmod(buf, mode)) {
		snprintf(err, errlen, "chmod %s: %s", buf, strerror(errno));
		return -errno;
	}
	return 0;
}

/* The parent of a /tmp/rocemu-UID/NAME directory must be ours alone. */
static int make_runtime_dir(struct host *h, char *err, size_t errlen)
{
	bool shared = h->n_allowed_uids || h->n_allowed_gids;
	char parent[ROCEMU_PATH_MAX];
	char *slash;
	int rc;

	snprintf(parent, sizeof(parent), "%s", h->dir);
	slash = strrchr(parent, '/');
	if (slash && slash != parent && !strchr(h->name, '/')) {
		*slash = '\0';
		/* others must pass through to reach a shared host's socket */
		rc = make_dir(parent, shared || geteuid() == 0 ? 0711 : 0700, err, errlen);
		if (rc)
			return rc;
	}
	return make_dir(h->dir, shared ? 0711 : 0700, err, errlen);
}

static int write_pid_file(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "we");

	if (!f) {
		snprintf(err, errlen, "--pid-file %s: %s", path, strerror(errno));
		return -errno;
	}
	fprintf(f, "%d\n", (int)getpid());
	if (fclose(f)) {
		snprintf(err, errlen, "--pid-file %s: %s", path, strerror(errno));
		return -EIO;
	}
	return 0;
}

static void print_host(struct host *h)
{
	const struct rocemu_port_config *cfg = rocemu_port_get_config(h->port);
	uint8_t mac[6], gid[16];
	char text[64];

	rocemu_port_mac(h->port, mac);
	printf("rocemu host %s: %s mac %02x:%02x:%02x:%02x:%02x:%02x mtu %u, directory %s\n",
	       h->name, cfg->spec, mac[0], mac[1], mac[2], mac[3], mac[4], mac[5],
	       rocemu_port_eth_mtu(h->port), h->dir);
	for (unsigned i = 0; i < rocemu_port_gid_count(h->port); i++) {
		rocemu_port_gid(h->port, i, gid);
		printf("  gid[%u] %s\n", i, roce_gid_str(gid, text, sizeof(text)));
	}
	if (rocemu_port_progress_cpu(h->port) >= 0)
		printf("  forwarding thread on CPU %d, spinning there (progress-cpu)\n",
		       rocemu_port_progress_cpu(h->port));
	printf("  attach: rocemu run --host %s -- PROGRAM   (or ROCEMU_HOST=%s)\n", h->name,
	       h->name);
	fflush(stdout);
}

/* The parent of --detach waits for the child's word: 0 ready, else an errno. */
static int detach(int *ready_fd)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		int code = EIO;
		ssize_t n;

		close(p[1]);
		n = read(p[0], &code, sizeof(code));
		if (n != sizeof(code)) {
			int st;

			waitpid(pid, &st, 0);
			_exit(1);
		}
		_exit(code ? 1 : 0);
	}
	close(p[0]);
	/*
	 * Away from the terminal's signals: a process group of our own, and
	 * hangups ignored. Not a session of our own (setsid): Linux's autogroup
	 * scheduler (CONFIG_SCHED_AUTOGROUP, on by default) gives each session
	 * a CPU group, and a host alone in one waited far longer for a CPU on
	 * a loaded machine: `host_two.sh veth` at load 15-21 on 2 cores, the
	 * forwarding thread's run-queue waits (/proc/thread-self/schedstat)
	 * over 100 ms 71 and 64 times, up to 0.92 s, in two runs with setsid;
	 * 4 and 4 times, up to 0.22 s, in the starter's session. Frames wait
	 * while it does: a peer's QP with ibv_rc_pingpong's retry budget
	 * (8 x 67 ms) failed.
	 */
	setpgid(0, 0);
	signal(SIGHUP, SIG_IGN);
	*ready_fd = p[1];
	return 0;
}

static void ready(int *ready_fd, int code)
{
	int devnull;

	if (*ready_fd < 0)
		return;
	(void)write(*ready_fd, &code, sizeof(code));
	close(*ready_fd);
	*ready_fd = -1;
	/* a terminal or a pipe is the caller's, which would wait for our end;
	 * output to a file stays there (a log) */
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0)
		return;
	dup2(devnull, 0);
	for (int fd = 1; fd <= 2; fd++) {
		struct stat st;

		if (fstat(fd, &st) || !S_ISREG(st.st_mode))
			dup2(devnull, fd);
	}
	close(devnull);
}

static const char *const host_flags[] = {"detach", "verbose", "no-direct", NULL};
static const struct cmd_opt_spec host_opts = {"host", host_flags, usage};

int rocemu_cmd_host(int argc, char **argv)
{
	static struct host host; /* large: QPN table pointer, process table */
	struct host *h = &host;
	char err[ROCEMU_CAPTURE_MSG_MAX];
	const char *pid_file = NULL;
	bool do_detach = false;
	struct sigaction sa;
	struct cmd_opt o;
	int ready_fd = -1, status = 0, rc, exit_status, i = 1;

	rocemu_port_config_init(&h->cfg);
	h->quiet_ms = HOST_QPN_QUIET_MS_DEFAULT;
	h->ctl_listen_fd = h->ctl_wake_fd = -1;
	while (cmd_opt_next(&host_opts, argc, argv, &i, &o, &exit_status)) {
		const char *opt = o.name, *val = o.val;

		if (!strcmp(opt, "detach")) {
			do_detach = true;
		} else if (!strcmp(opt, "verbose")) {
			h->verbose = true;
		} else if (!strcmp(opt, "no-direct")) {
			h->no_direct = true;
		} else if (!strcmp(opt, "name")) {
			snprintf(h->name, sizeof(h->name), "%s", val);
			if (strlen(val) >= sizeof(h->name) && !strchr(val, '/')) {
				fprintf(stderr, "rocemu host: --name: at most %d characters\n",
					ROCEMU_HOST_NAME_MAX - 1);
				return 2;
			}
		} else if (!strcmp(opt, "pid-file")) {
			pid_file = val;
		} else if (!strcmp(opt, "qpn-quiet")) {
			if (cmd_opt_uint(&host_opts, &o, 3600000, &h->quiet_ms))
				return 2;
		} else if (!strcmp(opt, "allow-user")) {
			if (add_user(h, val)) {
				fprintf(stderr, "rocemu host: --allow-user '%s': no such user\n",
					val);
				return 2;
			}
		} else if (!strcmp(opt, "allow-group")) {
			if (add_group(h, val)) {
				fprintf(stderr, "rocemu host: --allow-group '%s': no such group\n",
					val);
				return 2;
			}
		} else if (rocemu_port_config_set(&h->cfg, opt, val, err, sizeof(err))) {
			fprintf(stderr, "rocemu host: %s\n", err);
			return 2;
		}
	}
	if (exit_status >= 0)
		return exit_status;
	if (!h->name[0]) {
		fprintf(stderr, "rocemu host: --name NAME is required\n");
		return 2;
	}
	if (!strncmp(h->cfg.spec, "host:", 5)) {
		fprintf(stderr,
			"rocemu host: --port host:... is a process's port, not an uplink\n");
		return 2;
	}
	if (rocemu_port_config_validate(&h->cfg, err, sizeof(err)) ||
	    (h->cfg.capture_path[0] &&
	     rocemu_capture_check(h->cfg.capture_path, err, sizeof(err)))) {
		fprintf(stderr, "rocemu host: %s\n", err);
		return 2;
	}
	if (rocemu_host_dir(h->name, h->dir, sizeof(h->dir))) {
		fprintf(stderr, "rocemu host: --name '%s': not a usable name\n", h->name);
		return 2;
	}
	if (strlen(h->dir) + sizeof("/ctl.sock") > sizeof(h->ctl_path)) {
		fprintf(stderr, "rocemu host: --name '%s': path too long\n", h->name);
		return 2;
	}
	memcpy(h->ctl_path, h->dir, strlen(h->dir));
	memcpy(h->ctl_path + strlen(h->dir), "/ctl.sock", sizeof("/ctl.sock"));
	if (make_runtime_dir(h, err, sizeof(err))) {
		fprintf(stderr, "rocemu host: %s\n", err);
		return 1;
	}
	/* fork before DPDK starts: EAL's threads would not survive it */
	if (do_detach && detach(&ready_fd)) {
		fprintf(stderr, "rocemu host: cannot detach: %s\n", strerror(errno));
		return 1;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	rc = host_ctl_open(h, err, sizeof(err));
	if (rc == 0 && (rc = rocemu_port_open(&h->cfg, &h->port, err, sizeof(err))) == 0)
		rc = host_switch_init(h, err, sizeof(err));
	if (rc == 0 && pid_file)
		rc = write_pid_file(pid_file, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "rocemu host: %s\n", err);
		ready(&ready_fd, -rc);
		status = 1;
		goto out;
	}
	h->started_ns = rocemu_now_ns();
	print_host(h);
	rc = host_switch_start(h);
	if (rc == 0 && (rc = host_ctl_start(h)) != 0) {
		host_switch_stop(h);
	}
	if (rc) {
		fprintf(stderr, "rocemu host: cannot start its threads: %s\n", strerror(-rc));
		ready(&ready_fd, -rc);
		status = 1;
		goto out;
	}
	ready(&ready_fd, 0);
	while (!stop_requested) {
		struct timespec ts = {0, 20000000};

		nanosleep(&ts, NULL);
	}
	/* processes see their link go down (host_gone, then the socket's end) */
	host_ctl_stop(h);
	host_switch_stop(h);
	rocemu_port_capture_sync(h->port);
	{
		printf("counters:\n");
		rocemu_port_counters_print(h->port, stdout);
		fflush(stdout);
	}
out:
	host_switch_fini(h);
	if (h->port)
		rocemu_port_close(h->port);
	if (h->ctl_listen_fd >= 0) {
		close(h->ctl_listen_fd);
		unlink(h->ctl_path);
	}
	if (pid_file && status == 0)
		unlink(pid_file);
	rmdir(h->dir);
	while (rocemu_capture_take_failure(err, sizeof(err))) {
		fprintf(stderr, "rocemu host: %s\n", err);
		status = 1;
	}
	return status;
}
