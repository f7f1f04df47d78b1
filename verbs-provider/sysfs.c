/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The sysfs files programs read about a device (ibv_devinfo reads board_id;
 * perftest and rdma-core users read ports/N/gid_attrs/types/M). A rocemu
 * device has no sysfs directory, so ibv_read_sysfs_file answers for paths
 * under ibdev_path from the device's own state; any other path is read from
 * the real file system, as rdma-core does.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "provider.h"

const char *ibv_get_sysfs_path(void)
{
	const char *env = getenv("SYSFS_PATH");
	return env && *env ? env : "/sys";
}
ROCEMU_PUBLIC(ibv_get_sysfs_path)

static void guid_str(uint64_t guid_be, char *out, size_t len)
{
	const uint8_t *b = (const uint8_t *)&guid_be;
	snprintf(out, len, "%02x%02x:%02x%02x:%02x%02x:%02x%02x", b[0], b[1], b[2], b[3], b[4],
		 b[5], b[6], b[7]);
}

static void gid_str(const uint8_t g[16], char *out, size_t len)
{
	snprintf(out, len,
		 "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", g[0],
		 g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12], g[13],
		 g[14], g[15]);
}

/* The kernel interface a port spec names ("af_packet:eth0", "af_xdp:eth0,..."), else the device
 * name. */
static void netdev_name(const struct rocemu_vdevice *d, char *out, size_t len)
{
	const char *spec = d->cfg.spec;
	if (!strncmp(spec, "af_packet:", 10) || !strncmp(spec, "af_xdp:", 7)) {
		const char *p = strchr(spec, ':') + 1;
		size_t n = strcspn(p, ",:");
		snprintf(out, len, "%.*s", (int)n, p);
		return;
	}
	snprintf(out, len, "%s", d->ibdev.name);
}

/* Content of a virtual file, relative to the device's ibdev_path; -ENOENT if none. */
static int device_file(struct rocemu_vdevice *d, const char *rel, char *out, size_t len)
{
	unsigned port, idx;
	char tail[32];
	int rc = 0;

	if (!strcmp(rel, "node_guid") || !strcmp(rel, "sys_image_guid")) {
		guid_str(ibv_get_device_guid(&d->ibdev), out, len);
		return 0;
	}
	if (!strcmp(rel, "node_type")) {
		snprintf(out, len, "1: CA");
		return 0;
	}
	if (!strcmp(rel, "fw_ver")) {
		snprintf(out, len, "%s", ROCEMU_VERSION);
		return 0;
	}
	if (!strcmp(rel, "board_id") || !strcmp(rel, "hca_type")) {
		snprintf(out, len, "rocemu");
		return 0;
	}
	if (!strcmp(rel, "node_desc")) {
		snprintf(out, len, "rocemu %s", d->ibdev.name);
		return 0;
	}
	if (sscanf(rel, "ports/%u/%31s", &port, tail) != 2 || port != 1)
		return -ENOENT;
	const char *p = rel + strlen("ports/1/");
	if (!strcmp(p, "link_layer")) {
		snprintf(out, len, "Ethernet");
		return 0;
	}
	if (sscanf(p, "gid_attrs/types/%u", &idx) == 1 ||
	    sscanf(p, "gid_attrs/ndevs/%u", &idx) == 1 || sscanf(p, "gids/%u", &idx) == 1) {
		uint8_t gid[16];
		pthread_mutex_lock(&d->lock);
		unsigned count = d->engine
				     ? rocemu_port_gid_count(rocemu_engine_port(d->engine))
				     : 1 + d->cfg.n_ips; /* link-local, then one per address */
		if (idx >= ROCEMU_PORT_MAX_GIDS)
			rc = -ENOENT;
		else if (!strncmp(p, "gids/", 5)) {
			memset(gid, 0, sizeof(gid));
			if (d->engine && idx < count)
				rocemu_port_gid(rocemu_engine_port(d->engine), idx, gid);
			gid_str(gid, out, len);
		} else if (idx >= count)
			rc = -EINVAL; /* the kernel answers EINVAL for an empty slot */
		else if (!strncmp(p, "gid_attrs/types/", 16))
			snprintf(out, len, "RoCE v2");
		else
			netdev_name(d, out, len);
		pthread_mutex_unlock(&d->lock);
		return rc;
	}
	if (!strcmp(p, "state") || !strcmp(p, "phys_state")) {
		pthread_mutex_lock(&d->lock);
		bool up = d->engine && rocemu_port_active(d, rocemu_engine_port(d->engine));
		pthread_mutex_unlock(&d->lock);
		if (p[0] == 's')
			snprintf(out, len, up ? "4: ACTIVE" : "1: DOWN");
		else
			snprintf(out, len, up ? "5: LinkUp" : "3: Disabled");
		return 0;
	}
	return -ENOENT;
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
		int rc = device_file(d, rel, content, sizeof(content));
		if (rc < 0) {
			errno = -rc;
			return -1;
		}
		return put(buf, size, content);
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
