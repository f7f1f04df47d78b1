/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * DPDK EAL start-up from inside a library (ARCHITECTURE §2): lazily, once per
 * process, and so that the host program behaves as it did without us:
 *  - no pinning: lcore 0 is mapped to the whole CPU set the process may use
 *    (--lcores=0@(set)), and the calling thread's affinity is restored after
 *    rte_eal_init (which pins the main thread);
 *  - EAL's own threads are created with every signal blocked, so signals still
 *    reach the program's threads; signal dispositions are checked afterwards;
 *  - --in-memory (no files in /var/run/dpdk, no lock against other processes),
 *    --no-huge unless hugepages are free, --no-telemetry unless
 *    ROCEMU_TELEMETRY=1, --no-pci unless a PCI port is asked for,
 *    log level "error" unless ROCEMU_LOG; ROCEMU_EAL_ARGS appends arguments.
 * At exit, ports still open are closed (captures flushed, devices released)
 * (rte_eal_cleanup() is not called: see close_all_at_exit).
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <stdatomic.h>

#include <rte_cpuflags.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>

#include "port_internal.h"

#define EAL_MAX_ARGS 64

static pthread_mutex_t eal_lock = PTHREAD_MUTEX_INITIALIZER;
static int eal_state; /* 0 = not tried, 1 = up, <0 = failed (-errno) */
static char eal_err[512];
static char eal_args_used[1024];
static pid_t eal_pid; /* the process that started EAL */
static struct rocemu_port *open_ports[64];
static unsigned n_open_ports;

/*
 * The clock. clock_gettime(CLOCK_MONOTONIC) costs ~80 ns in this kind of VM
 * (vDSO with a paravirtual clock) and was a quarter of the progress thread's
 * profile. Once EAL has measured the TSC frequency, and the CPU's TSC is
 * invariant (constant rate, runs in every C-state: one clock for all
 * threads), the time is read from the TSC (~20 ns): the monotonic time at
 * the switch plus the scaled TSC cycles since. Before EAL (and on CPUs
 * without an invariant TSC) clock_gettime.
 */
struct tsc_clock {
	uint64_t tsc_base;
	uint64_t ns_base;
	uint64_t mult; /* ns per cycle, 32.32 fixed point */
};
static struct tsc_clock tsc_clock;
static atomic_bool tsc_clock_on;

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t rocemu_now_ns(void)
{
	uint64_t tsc;

	return rocemu_now_ns_tsc(&tsc);
}

uint64_t rocemu_now_ns_tsc(uint64_t *tsc)
{
	if (likely(atomic_load_explicit(&tsc_clock_on, memory_order_acquire))) {
		*tsc = rte_rdtsc();
		return tsc_clock.ns_base +
		       (uint64_t)(((unsigned __int128)(*tsc - tsc_clock.tsc_base) *
				   tsc_clock.mult) >>
				  32);
	}
	*tsc = 0;
	return monotonic_ns();
}

/* After rte_eal_init: EAL has the TSC frequency. ROCEMU_CLOCK=gettime keeps
 * clock_gettime (for comparisons). */
static void tsc_clock_start(void)
{
	const char *env = getenv("ROCEMU_CLOCK");
	uint64_t hz = rte_get_tsc_hz();

#ifdef RTE_ARCH_X86
	if (rte_cpu_get_flag_enabled(RTE_CPUFLAG_INVTSC) <= 0)
		return;
#else
	return;
#endif
	if ((env && !strcmp(env, "gettime")) || hz < 100000000ull)
		return;
	tsc_clock.mult = (1000000000ull << 32) / hz;
	tsc_clock.ns_base = monotonic_ns();
	tsc_clock.tsc_base = rte_rdtsc();
	atomic_store_explicit(&tsc_clock_on, true, memory_order_release);
}

const char *rocemu_eal_error(void)
{
	return eal_err;
}

/** The EAL arguments used (for reports), empty before init. */
const char *rocemu_eal_args(void)
{
	return eal_args_used;
}

static bool hugepages_free(void)
{
	DIR *d = opendir("/sys/kernel/mm/hugepages");
	struct dirent *e;
	bool any = false;

	if (!d)
		return false;
	while (!any && (e = readdir(d))) {
		char path[512];
		FILE *f;
		unsigned long n = 0;

		if (strncmp(e->d_name, "hugepages-", 10))
			continue;
		snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/%s/free_hugepages",
			 e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%lu", &n) == 1 && n >= 64)
			any = true;
		fclose(f);
	}
	closedir(d);
	return any;
}

/* "(0-1,4)" from a CPU set; lcore ids above RTE_MAX_LCORE cannot be named. */
static void cpuset_format(const cpu_set_t *set, char *buf, size_t len)
{
	size_t off = 0;
	int first = 1;

	off += (size_t)snprintf(buf + off, len - off, "(");
	for (int c = 0; c < CPU_SETSIZE && c < RTE_MAX_LCORE && off < len; c++) {
		int end = c;

		if (!CPU_ISSET(c, set))
			continue;
		while (end + 1 < CPU_SETSIZE && end + 1 < RTE_MAX_LCORE && CPU_ISSET(end + 1, set))
			end++;
		if (end == c)
			off += (size_t)snprintf(buf + off, len - off, "%s%d", first ? "" : ",", c);
		else
			off += (size_t)snprintf(buf + off, len - off, "%s%d-%d", first ? "" : ",",
						c, end);
		first = 0;
		c = end;
	}
	if (off < len)
		snprintf(buf + off, len - off, ")");
}

/*
 * Ports the program left open: release their devices (sockets, XDP programs,
 * memif connections) and flush their captures. EAL itself is left to the
 * kernel (see below); later opens are refused.
 */
bool port_in_forked_child(void)
{
	return eal_pid != 0 && getpid() != eal_pid;
}

static void close_all_at_exit(void)
{
	struct rocemu_port *ports[64];
	unsigned n;

	/* A child forked after EAL started has no progress threads, and its
	 * copy of the devices is the parent's (memif connection, sockets):
	 * releasing them would take the parent's link down. Leave it all. */
	if (port_in_forked_child())
		return;
	pthread_mutex_lock(&eal_lock);
	n = n_open_ports;
	memcpy(ports, open_ports, sizeof(ports));
	n_open_ports = 0;
	/* No rte_eal_cleanup(): DPDK 22.11 does not stop its interrupt thread
	 * there, and that thread may still be working on the ports just closed
	 * (rebuilding its fd list after the memif PMD unregistered its sockets,
	 * or a peer's disconnect): cleanup unmapped the memory under it, and the
	 * program died with SIGSEGV in rte_intr_fd_get() after finishing its
	 * work. There is nothing to clean that the kernel does not reclaim at
	 * exit (in-memory EAL, runtime directory already removed). */
	if (eal_state == 1 && n == 0) {
		eal_state = -ESHUTDOWN;
		snprintf(eal_err, sizeof(eal_err), "EAL already shut down (process exiting)");
	}
	pthread_mutex_unlock(&eal_lock);
	while (n > 0)
		port_close_at_exit(ports[--n]);
}

void port_eal_register(struct rocemu_port *port)
{
	pthread_mutex_lock(&eal_lock);
	if (n_open_ports < sizeof(open_ports) / sizeof(open_ports[0]))
		open_ports[n_open_ports++] = port;
	pthread_mutex_unlock(&eal_lock);
}

void port_eal_unregister(struct rocemu_port *port)
{
	pthread_mutex_lock(&eal_lock);
	for (unsigned i = 0; i < n_open_ports; i++)
		if (open_ports[i] == port) {
			open_ports[i] = open_ports[--n_open_ports];
			break;
		}
	pthread_mutex_unlock(&eal_lock);
}

static int add_arg(char **argv, int *argc, char *store, size_t *used, size_t cap, const char *a)
{
	size_t n = strlen(a) + 1;

	if (*argc >= EAL_MAX_ARGS - 1 || *used + n > cap)
		return -E2BIG;
	memcpy(store + *used, a, n);
	argv[(*argc)++] = store + *used;
	*used += n;
	return 0;
}

static int eal_start(bool need_pci)
{
	static char store[4096];
	char *argv[EAL_MAX_ARGS];
	int argc = 0;
	size_t used = 0;
	char buf[1200], set_text[600];
	cpu_set_t affinity;
	sigset_t all, old_mask;
	struct sigaction before[NSIG], after;
	const char *env;
	int rc;

	if (pthread_getaffinity_np(pthread_self(), sizeof(affinity), &affinity)) {
		snprintf(eal_err, sizeof(eal_err), "cannot read the thread's CPU affinity");
		return -EIO;
	}
	cpuset_format(&affinity, set_text, sizeof(set_text));

	rc = add_arg(argv, &argc, store, &used, sizeof(store), "rocemu");
	snprintf(buf, sizeof(buf), "--lcores=0@%s", set_text);
	rc = rc ?: add_arg(argv, &argc, store, &used, sizeof(store), buf);
	if (hugepages_free()) {
		rc = rc ?: add_arg(argv, &argc, store, &used, sizeof(store), "--in-memory");
	} else {
		/* --in-memory is refused with --no-huge (it implies legacy memory):
		 * the same effect from --no-shconf (no shared files, no IPC socket)
		 * and a per-process prefix */
		rc = rc ?: add_arg(argv, &argc, store, &used, sizeof(store), "--no-huge");
		rc = rc ?: add_arg(argv, &argc, store, &used, sizeof(store), "-m");
		rc = rc ?: add_arg(argv, &argc, store, &used, sizeof(store), "512");
		rc = rc ?: add_arg(argv, &argc, store, &used, sizeof(store), "--no-shconf");
		/* --no-huge memory is one memfd already; saying so lets the memif
		 * PMD export it (a client's zero-copy, port_memif_zc.c) */
		rc = rc
			 ?: add_arg(argv, &argc, store, &used, sizeof(store),
				    "--single-file-segments");
		snprintf(buf, sizeof(buf), "--file-prefix=rocemu%d", (int)getpid());
		rc = rc ?: add_arg(argv, &argc, store, &used, sizeof(store), buf);
	}
	env = getenv("ROCEMU_TELEMETRY");
	if (!env || strcmp(env, "1"))
		rc = rc ?: add_arg(argv, &argc, store, &used, sizeof(store), "--no-telemetry");
	if (!need_pci)
		rc = rc ?: add_arg(argv, &argc, store, &used, sizeof(store), "--no-pci");
	env = getenv("ROCEMU_LOG");
	snprintf(buf, sizeof(buf), "--log-level=%s", env && *env ? env : "error");
	rc = rc ?: add_arg(argv, &argc, store, &used, sizeof(store), buf);
	env = getenv("ROCEMU_EAL_ARGS");
	if (env) {
		char extra[1024], *save = NULL, *tok;

		snprintf(extra, sizeof(extra), "%s", env);
		for (tok = strtok_r(extra, " \t", &save); tok && !rc;
		     tok = strtok_r(NULL, " \t", &save))
			rc = add_arg(argv, &argc, store, &used, sizeof(store), tok);
	}
	if (rc) {
		snprintf(eal_err, sizeof(eal_err), "too many EAL arguments");
		return rc;
	}
	argv[argc] = NULL;

	used = 0;
	eal_args_used[0] = 0;
	for (int i = 1; i < argc; i++)
		used += (size_t)snprintf(eal_args_used + used,
					 used < sizeof(eal_args_used) ? sizeof(eal_args_used) - used
								      : 0,
					 "%s%s", i > 1 ? " " : "", argv[i]);

	/* Threads EAL creates inherit this mask: no signal is delivered to them. */
	for (int s = 1; s < NSIG; s++)
		sigaction(s, NULL, &before[s]);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old_mask);

	rc = rte_eal_init(argc, argv);
	int eal_errno = rte_errno;

	pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
	/* rte_eal_init pins the calling thread to lcore 0's CPU set: undo it. */
	pthread_setaffinity_np(pthread_self(), sizeof(affinity), &affinity);
	for (int s = 1; s < NSIG; s++) {
		if (s == SIGKILL || s == SIGSTOP)
			continue;
		sigaction(s, NULL, &after);
		if (after.sa_handler != before[s].sa_handler) {
			/* EAL must not keep a handler of its own in someone else's program */
			sigaction(s, &before[s], NULL);
		}
	}
	if (rc < 0) {
		snprintf(eal_err, sizeof(eal_err), "DPDK EAL initialisation failed (%s); args: %s",
			 rte_strerror(eal_errno), eal_args_used);
		return eal_errno > 0 ? -eal_errno : -EIO;
	}
	/* With --no-shconf nothing lives in the runtime directory: remove it now
	 * so that no empty /var/run/dpdk/rocemuPID is left, even after a kill. */
	if (strstr(eal_args_used, "--no-shconf"))
		rmdir(rte_eal_get_runtime_dir());
	eal_pid = getpid();
	tsc_clock_start();
	atexit(close_all_at_exit);
	return 0;
}

int port_eal_init(bool need_pci)
{
	int rc;

	if (port_in_forked_child()) {
		snprintf(eal_err, sizeof(eal_err),
			 "rocemu ports cannot be opened in a child forked after DPDK started");
		return -ENOTSUP;
	}
	pthread_mutex_lock(&eal_lock);
	if (eal_state == 0) {
		rc = eal_start(need_pci);
		eal_state = rc ? rc : 1;
	}
	rc = eal_state == 1 ? 0 : eal_state;
	pthread_mutex_unlock(&eal_lock);
	return rc;
}

int rocemu_eal_init(void)
{
	return port_eal_init(false);
}
