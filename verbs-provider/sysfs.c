/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The sysfs files programs read about a device (ibv_devinfo reads board_id;
 * perftest and rdma-core users read ports/N/gid_attrs/types/M). A rocemu
 * device has no sysfs directory of its own, so ibv_read_sysfs_file answers
 * for the files of a device's ibdev_path from the device's own state
 * (rendered by sysfs_files.c, as `rocemu run`'s /sys view is); any other
 * path, device/... of that view included, is read from the file system, as
 * rdma-core does.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "provider.h"
#include "sysfs_files.h"

const char *ibv_get_sysfs_path(void)
{
	const char *env = getenv("SYSFS_PATH");
	return env && *env ? env : "/sys";
}
ROCEMU_PUBLIC(ibv_get_sysfs_path)

/* The device as its sysfs files describe it: live from the engine once
 * open, else from the configuration (port DOWN, as before the first open). */
static void describe(struct rocemu_vdevice *d, const char *rel, struct rocemu_sysfs_dev *out)
{
	uint8_t mac[6];
	bool mac_known = rocemu_port_config_mac(&d->cfg, mac) == 0;

	/* The node GUID of a port whose configuration does not tell its MAC
	 * (dpdk:): ibv_get_device_guid opens the port briefly to learn it. */
	if (!mac_known && (!strcmp(rel, "node_guid") || !strcmp(rel, "sys_image_guid")))
		ibv_get_device_guid(&d->ibdev);
	pthread_mutex_lock(&d->lock);
	if (d->engine) {
		rocemu_port_mac(rocemu_engine_port(d->engine), mac);
		mac_known = true;
	} else if (!mac_known && d->guid_known) {
		const uint8_t *g = (const uint8_t *)&d->guid; /* EUI-64: MAC with ff:fe inside */
		uint8_t m[6] = {g[0] ^ 0x02, g[1], g[2], g[5], g[6], g[7]};
		memcpy(mac, m, 6);
		mac_known = true;
	}
	rocemu_sysfs_dev_from_config(out, &d->cfg, mac_known ? mac : NULL);
	out->active = false;
	if (d->engine) {
		struct rocemu_port *port = rocemu_engine_port(d->engine);
		out->n_gids = rocemu_port_gid_count(port);
		for (unsigned i = 0; i < out->n_gids && i < ROCEMU_PORT_MAX_GIDS; i++)
			rocemu_port_gid(port, i, out->gids[i]);
		out->active = rocemu_vdevice_port_active(d, port);
		out->link_mbps = rocemu_port_link_speed(port);
		out->lid_known = true;
		out->lid = rocemu_lid_of_port(port);
	}
	pthread_mutex_unlock(&d->lock);
}

/* One file of rocemu run's view: rewritten when its content changed. */
static int refresh_one(void *arg, const char *rel, const char *content)
{
	char path[4096], old[256], text[256];
	const char *dir = arg;
	ssize_t n = -1;
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s", dir, rel) >= (int)sizeof(path))
		return 0;
	snprintf(text, sizeof(text), "%s\n", content);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, old, sizeof(old) - 1);
		close(fd);
	}
	if (n >= 0 && (size_t)n == strlen(text) && !memcmp(old, text, (size_t)n))
		return 0;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		if (write(fd, text, strlen(text)) < 0) {
			/* best effort: the view is a convenience, the verbs answer live */
		}
		close(fd);
	}
	return 0;
}

void rocemu_sysfs_view_refresh(struct rocemu_vdevice *d)
{
	const char *root = getenv(ROCEMU_ENV_SYSFS_VIEW);
	struct rocemu_sysfs_dev desc;
	char dir[4096];

	if (!root || !*root ||
	    snprintf(dir, sizeof(dir), "%s/%s", root, d->ibdev.name) >= (int)sizeof(dir))
		return;
	describe(d, "", &desc);
	rocemu_sysfs_each(&desc, refresh_one, dir);
}

/* If path is inside a rocemu device's directory: its device and the rest of the path. */
static struct rocemu_vdevice *rocemu_path(const char *path, const char **rel)
{
	unsigned n;
	struct rocemu_vdevice **devs = rocemu_devices(&n);

	for (unsigned i = 0; i < n; i++) {
		const char *dir = devs[i]->ibdev.ibdev_path;
		size_t len = strlen(dir);
		if (!strncmp(path, dir, len) && (path[len] == '/' || path[len] == '\0')) {
			*rel = path + len + (path[len] == '/');
			return devs[i];
		}
	}
	return NULL;
}

/* Copy content like a sysfs read: without the trailing newline, NUL-terminated. */
static int put(char *buf, size_t size, const char *content)
{
	size_t n = strlen(content);
	if (n + 1 > size) {
		errno = EOVERFLOW;
		return -1;
	}
	memcpy(buf, content, n + 1);
	return (int)n;
}

int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	char path[4096], content[256];
	const char *rel;

	if (!dir || !file || !buf || !size) {
		errno = EINVAL;
		return -1;
	}
	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	struct rocemu_vdevice *d = rocemu_path(path, &rel);
	if (d) {
		struct rocemu_sysfs_dev desc;
		describe(d, rel, &desc);
		int rc = rocemu_sysfs_file(&desc, rel, content, sizeof(content));
		if (rc == 0)
			return put(buf, size, content);
		if (rc != -ENOENT) {
			errno = -rc;
			return -1;
		}
		/* not one of ours: the file system (rocemu run's view has device/...) */
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t len = read(fd, buf, size);
	int e = errno;
	close(fd);
	if (len < 0) {
		errno = e;
		return -1;
	}
	if (len > 0 && buf[len - 1] == '\n')
		buf[--len] = '\0';
	else if ((size_t)len < size)
		buf[len] = '\0';
	else {
		errno = EOVERFLOW; /* no room for the terminating NUL */
		return -1;
	}
	return (int)len;
}
ROCEMU_PUBLIC(ibv_read_sysfs_file)
