/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rocemu run's private view of the system for the program it starts:
 * /sys/class/infiniband/<dev>/..., /sys/class/infiniband_verbs/uverbs<N>/...
 * and /dev/infiniband/uverbs<N>, which UCX and topology code read directly
 * instead of asking libibverbs (docs/verbs-provider.md, "The device as the
 * system shows it").
 *
 * The program runs in a mount namespace of its own; when rocemu run is not
 * root (or root may not mount), also in a user namespace that maps only the
 * caller's uid and gid: it gives the right to mount there and no privilege
 * anywhere else. A directory to replace gets a tmpfs: an existing one
 * directly (/sys/class/infiniband on a host with RDMA devices), a missing
 * one through its parent, whose tmpfs then holds a bind mount of every
 * original entry (/dev, /sys/class). The uverbs node is /dev/null bound on
 * an empty file: a character device anyone may open for reading and
 * writing, which is what UCX checks. The files' content comes from the
 * configuration through the provider's renderer (sysfs_files.c); the
 * provider refreshes it from the engine when the program opens the device.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rocemu_config.h"
#include "run.h"
#include "sysfs_files.h"

#define SYS_CLASS   "/sys/class"
#define MAX_COVERED 4

/* Directories this view covered with a tmpfs (their originals rebound inside). */
static char covered[MAX_COVERED][64];
static unsigned n_covered;
/* Directories that got a tmpfs of their own, and the covered parents: undone on failure. */
static char mounted[8][PATH_MAX];
static unsigned n_mounted;

static int fail(char *err, size_t len, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return rc;
}

/* snprintf into a path buffer; -ENAMETOOLONG when it does not fit. */
static int path_fmt(char *out, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, len, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int write_text(const char *path, const char *text)
{
	ssize_t want = (ssize_t)strlen(text), n;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		return -errno;
	n = write(fd, text, (size_t)want);
	int e = n < 0 ? errno : EIO;
	close(fd);
	return n == want ? 0 : -e;
}

static int read_line(const char *path, char *out, size_t len)
{
	FILE *f = fopen(path, "re");
	bool ok = f && fgets(out, (int)len, f);

	if (f)
		fclose(f);
	if (!ok)
		return -ENOENT;
	out[strcspn(out, "\n")] = '\0';
	return 0;
}

/* mkdir -p of path's directories (not path itself). */
static int make_parents(const char *path)
{
	char p[PATH_MAX];

	if (path_fmt(p, sizeof(p), "%s", path) < 0)
		return -ENAMETOOLONG;
	for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	return 0;
}

static int make_private(char *err, size_t len)
{
	char map[64];
	uid_t uid = geteuid();
	gid_t gid = getegid();

	if (uid == 0 && unshare(CLONE_NEWNS) == 0)
		goto slave;
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		return fail(err, len, -errno, "cannot create a user and mount namespace: %s",
			    strerror(errno));
	/* Map only ourselves: same uid and gid inside, no privilege outside. */
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	int rc = write_text("/proc/self/uid_map", map);
	if (rc == 0)
		rc = write_text("/proc/self/setgroups", "deny\n");
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	if (rc == 0)
		rc = write_text("/proc/self/gid_map", map);
	if (rc < 0)
		return fail(err, len, rc, "cannot map the user namespace's ids: %s", strerror(-rc));
slave:
	/* Nothing mounted here may reach the host's namespace. */
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		return fail(err, len, -errno, "cannot make / a slave mount: %s", strerror(errno));
	return 0;
}

static int mount_tmpfs(const char *dir, char *err, size_t len)
{
	if (mount("rocemu-view", dir, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=1m") < 0)
		return fail(err, len, -errno, "cannot mount a tmpfs on %s: %s", dir,
			    strerror(errno));
	if (n_mounted < sizeof(mounted) / sizeof(mounted[0]))
		snprintf(mounted[n_mounted++], sizeof(mounted[0]), "%s", dir);
	return 0;
}

/* Recreate entry name of the original directory (open as dfd) in dir, now a tmpfs. */
static int rebind_entry(int dfd, const char *dir, const char *name, char *err, size_t len)
{
	char src[PATH_MAX], dst[PATH_MAX], target[PATH_MAX];
	struct stat st;
	int fd;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0; /* gone meanwhile */
	path_fmt(src, sizeof(src), "/proc/self/fd/%d/%s", dfd, name);
	path_fmt(dst, sizeof(dst), "%s/%s", dir, name);
	if (S_ISLNK(st.st_mode)) {
		ssize_t n = readlinkat(dfd, name, target, sizeof(target) - 1);
		if (n < 0)
			return fail(err, len, -errno, "cannot read link %s: %s", dst,
				    strerror(errno));
		target[n] = '\0';
		if (symlink(target, dst) < 0)
			return fail(err, len, -errno, "cannot recreate link %s: %s", dst,
				    strerror(errno));
		return 0;
	}
	if (S_ISDIR(st.st_mode)) {
		if (mkdir(dst, 0755) < 0)
			return fail(err, len, -errno, "cannot create %s: %s", dst, strerror(errno));
	} else {
		fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			return fail(err, len, -errno, "cannot create %s: %s", dst, strerror(errno));
		close(fd);
	}
	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
		return fail(err, len, -errno, "cannot bind %s again: %s", dst, strerror(errno));
	return 0;
}

/* A tmpfs on dir holding bind mounts of everything dir held. */
static int cover(const char *dir, char *err, size_t len)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;
	DIR *d;

	if (dfd < 0)
		return fail(err, len, -errno, "cannot open %s: %s", dir, strerror(errno));
	rc = mount_tmpfs(dir, err, len);
	d = rc == 0 ? fdopendir(dup(dfd)) : NULL;
	if (rc == 0 && !d)
		rc = fail(err, len, -errno, "cannot list %s: %s", dir, strerror(errno));
	for (struct dirent *e; rc == 0 && (e = readdir(d));) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		/* the originals of what this view replaces stay hidden */
		if (!strcmp(dir, "/dev") && !strcmp(e->d_name, "infiniband"))
			continue;
		if (!strcmp(dir, SYS_CLASS) && !strncmp(e->d_name, "infiniband", 10))
			continue;
		rc = rebind_entry(dfd, dir, e->d_name, err, len);
	}
	if (d)
		closedir(d);
	close(dfd);
	if (rc == 0 && n_covered < MAX_COVERED)
		snprintf(covered[n_covered++], sizeof(covered[0]), "%s", dir);
	return rc;
}

/* parent/name as a new, empty, writable directory of the view. */
static int fresh_dir(const char *parent, const char *name, char *err, size_t len)
{
	char path[PATH_MAX];
	struct stat st;
	int rc;

	path_fmt(path, sizeof(path), "%s/%s", parent, name);
	for (unsigned i = 0; i < n_covered; i++)
		if (!strcmp(covered[i], parent))
			goto make;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return mount_tmpfs(path, err, len);
	if ((rc = cover(parent, err, len)) < 0)
		return rc;
make:
	if (mkdir(path, 0755) < 0)
		return fail(err, len, -errno, "cannot create %s: %s", path, strerror(errno));
	return 0;
}

struct writer {
	char dir[PATH_MAX];
	int rc;
};

static int write_one(void *arg, const char *rel, const char *content)
{
	struct writer *w = arg;
	char path[PATH_MAX + 64], text[256];

	path_fmt(path, sizeof(path), "%s/%s", w->dir, rel);
	path_fmt(text, sizeof(text), "%s\n", content);
	w->rc = make_parents(path);
	if (w->rc == 0)
		w->rc = write_text(path, text);
	return w->rc;
}

/* What the configuration and the interface say of a device before it is open. */
static void describe(const struct rocemu_port_config *cfg, struct rocemu_sysfs_dev *d,
		     char *device_link, size_t link_len)
{
	char netdev[ROCEMU_PORT_NAME_MAX], path[PATH_MAX], line[64];
	bool on_iface = rocemu_spec_netdev(cfg->spec, netdev, sizeof(netdev));
	uint8_t mac[6];
	/* --mac, a memif/ring port's generated MAC, an interface's (not dpdk:) */
	bool have_mac = rocemu_port_config_mac(cfg, mac) == 0;
	long mbps;

	device_link[0] = '\0';
	rocemu_sysfs_dev_from_config(d, cfg, have_mac ? mac : NULL);
	if (!on_iface)
		return; /* memif, ring: active once started; speed known once open */
	path_fmt(path, sizeof(path), "/sys/class/net/%s/operstate", netdev);
	d->active = read_line(path, line, sizeof(line)) < 0 || strcmp(line, "down");
	path_fmt(path, sizeof(path), "/sys/class/net/%s/speed", netdev);
	if (read_line(path, line, sizeof(line)) == 0 && (mbps = strtol(line, NULL, 10)) > 0)
		d->link_mbps = (uint32_t)mbps;
	path_fmt(path, sizeof(path), "/sys/class/net/%s/device", netdev);
	char *real = realpath(path, NULL);
	if (real) {
		path_fmt(device_link, link_len, "%s", real);
		free(real);
	}
}

/* device/: the NIC under an interface, else a directory saying "no locality". */
static int write_locality(const char *dir, const char *device_link)
{
	char path[PATH_MAX + 16], mask[512] = "";
	cpu_set_t set;
	int rc, top = -1;

	path_fmt(path, sizeof(path), "%s/device", dir);
	if (device_link[0])
		return symlink(device_link, path) < 0 ? -errno : 0;
	if (mkdir(path, 0755) < 0)
		return -errno;
	path_fmt(path, sizeof(path), "%s/device/numa_node", dir);
	if ((rc = write_text(path, "-1\n")) < 0)
		return rc;
	/* A software NIC is as close to every CPU the program may use: the
	 * affinity mask, in the kernel's cpumask format (32-bit words, ','). */
	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		CPU_ZERO(&set);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			top = c;
	for (int w = top < 0 ? 0 : top / 32; w >= 0; w--) {
		uint32_t bits = 0;
		for (int b = 0; b < 32; b++)
			if (CPU_ISSET(w * 32 + b, &set))
				bits |= 1u << b;
		size_t l = strlen(mask);
		snprintf(mask + l, sizeof(mask) - l, "%08x%s", bits, w ? "," : "\n");
	}
	path_fmt(path, sizeof(path), "%s/device/local_cpus", dir);
	return write_text(path, mask);
}

static int write_device(const struct rocemu_port_config *cfg, unsigned index, char *err, size_t len)
{
	char device_link[PATH_MAX], path[PATH_MAX + 64], text[64];
	struct rocemu_sysfs_dev d;
	struct writer w;
	int fd, rc;

	describe(cfg, &d, device_link, sizeof(device_link));
	path_fmt(w.dir, sizeof(w.dir), "%s/infiniband/%s", SYS_CLASS, cfg->name);
	w.rc = 0;
	if (mkdir(w.dir, 0755) < 0 || rocemu_sysfs_each(&d, write_one, &w) ||
	    (rc = write_locality(w.dir, device_link)) < 0) {
		rc = w.rc ? w.rc : -errno;
		return fail(err, len, rc, "cannot write %s: %s", w.dir, strerror(-rc));
	}
	/* the uverbs side: what rdma-core's device discovery would read */
	path_fmt(path, sizeof(path), "%s/infiniband_verbs/uverbs%u", SYS_CLASS, index);
	rc = mkdir(path, 0755) < 0 ? -errno : 0;
	path_fmt(path, sizeof(path), "%s/infiniband_verbs/uverbs%u/ibdev", SYS_CLASS, index);
	path_fmt(text, sizeof(text), "%s\n", cfg->name);
	if (rc == 0)
		rc = write_text(path, text);
	path_fmt(path, sizeof(path), "%s/infiniband_verbs/uverbs%u/abi_version", SYS_CLASS, index);
	if (rc == 0)
		rc = write_text(path, "6\n");
	path_fmt(path, sizeof(path), "/dev/infiniband/uverbs%u", index);
	fd = rc == 0 ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
	if (fd >= 0)
		close(fd);
	if (rc == 0 && (fd < 0 || mount("/dev/null", path, NULL, MS_BIND, NULL) < 0))
		rc = -errno;
	if (rc < 0)
		return fail(err, len, rc, "cannot make uverbs%u: %s", index, strerror(-rc));
	return 0;
}

int run_view_enter(const struct rocemu_port_config *cfgs, unsigned n, char *err, size_t len)
{
	int rc = make_private(err, len);

	if (rc == 0)
		rc = fresh_dir(SYS_CLASS, "infiniband", err, len);
	if (rc == 0)
		rc = fresh_dir(SYS_CLASS, "infiniband_verbs", err, len);
	if (rc == 0)
		rc = write_text(SYS_CLASS "/infiniband_verbs/abi_version", "6\n");
	if (rc == 0)
		rc = fresh_dir("/dev", "infiniband", err, len);
	for (unsigned i = 0; rc == 0 && i < n; i++)
		rc = write_device(&cfgs[i], i, err, len);
	if (rc < 0) {
		/* back to the plain file system (still in a private namespace) */
		while (n_mounted > 0)
			umount2(mounted[--n_mounted], MNT_DETACH);
		n_covered = 0;
		if (!err[0])
			fail(err, len, rc, "%s", strerror(-rc));
		return rc;
	}
	setenv(ROCEMU_ENV_SYSFS_VIEW, SYS_CLASS "/infiniband", 1);
	return 0;
}
