/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The sysfs files of a rocemu device, rendered from a struct rocemu_sysfs_dev
 * in the kernel's formats (drivers/infiniband/core/sysfs.c): what
 * ibv_read_sysfs_file answers and what `rocemu run` writes into its private
 * /sys view. UCX reads ports/1/gid_attrs/{types,ndevs}/N directly from the
 * file system; perftest through ibv_read_sysfs_file.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sysfs_files.h"

#define ROCEMU_PORT_CAP_FLAGS 0x04010000u /* IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS */

bool rocemu_spec_netdev(const char *spec, char *out, size_t len)
{
	const char *p;

	if (strncmp(spec, "af_packet:", 10) && strncmp(spec, "af_xdp:", 7))
		return false;
	p = strchr(spec, ':') + 1;
	snprintf(out, len, "%.*s", (int)strcspn(p, ",:"), p);
	return true;
}

void rocemu_gid_netdev(const struct rocemu_port_config *cfg, char *out, size_t len)
{
	char base[ROCEMU_PORT_NAME_MAX];

	if (!rocemu_spec_netdev(cfg->spec, base, sizeof(base)))
		snprintf(base, sizeof(base), "%s", cfg->name);
	if (cfg->vlan)
		snprintf(out, len, "%s.%u", base, cfg->vlan);
	else
		snprintf(out, len, "%s", base);
}

void rocemu_sysfs_dev_from_config(struct rocemu_sysfs_dev *d, const struct rocemu_port_config *cfg,
				  const uint8_t *mac)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", cfg->name);
	rocemu_gid_netdev(cfg, d->netdev, sizeof(d->netdev));
	if (mac) {
		uint8_t *g = d->gids[0];
		/* GID 0: fe80::/64 with the modified EUI-64 of the MAC (RFC 4291 2.5.1) */
		d->mac_known = true;
		memcpy(d->mac, mac, 6);
		g[0] = 0xfe;
		g[1] = 0x80;
		g[8] = mac[0] ^ 0x02;
		g[9] = mac[1];
		g[10] = mac[2];
		g[11] = 0xff;
		g[12] = 0xfe;
		g[13] = mac[3];
		g[14] = mac[4];
		g[15] = mac[5];
	}
	d->n_gids = 1;
	for (unsigned i = 0; i < cfg->n_ips && d->n_gids < ROCEMU_PORT_MAX_GIDS; i++)
		memcpy(d->gids[d->n_gids++], cfg->ips[i].gid, 16);
	d->active = true;
}

void rocemu_link_width_speed(uint32_t mbps, uint8_t *width, uint8_t *speed)
{
	static const struct {
		uint32_t mbps;
		uint8_t width, speed;
	} table[] = {
	    {400000, 2, 64}, {200000, 2, 64}, {100000, 2, 32}, {50000, 16, 32},
	    {40000, 2, 4},   {25000, 1, 32},  {10000, 1, 8},   {1000, 1, 1},
	};
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (mbps >= table[i].mbps) {
			*width = table[i].width;
			*speed = table[i].speed;
			return;
		}
	*width = 1; /* unknown or slow: 1X SDR */
	*speed = 1;
}

/* ports/1/rate as the kernel writes it: "25 Gb/sec (1X EDR)". */
static void rate_str(uint32_t mbps, char *out, size_t len)
{
	static const struct {
		uint8_t speed;
		unsigned tenths; /* Gb/s per lane, in tenths */
		const char *name;
	} speeds[] = {{2, 50, " DDR"},	 {4, 100, " QDR"},  {8, 100, " FDR10"}, {16, 140, " FDR"},
		      {32, 250, " EDR"}, {64, 500, " HDR"}, {128, 1000, " NDR"}};
	static const struct {
		uint8_t width;
		unsigned lanes;
	} widths[] = {{1, 1}, {2, 4}, {4, 8}, {8, 12}, {16, 2}};
	uint8_t width, speed;
	unsigned tenths = 25, lanes = 1;
	const char *name = "";

	rocemu_link_width_speed(mbps, &width, &speed);
	for (size_t i = 0; i < sizeof(speeds) / sizeof(speeds[0]); i++)
		if (speeds[i].speed == speed) {
			tenths = speeds[i].tenths;
			name = speeds[i].name;
		}
	for (size_t i = 0; i < sizeof(widths) / sizeof(widths[0]); i++)
		if (widths[i].width == width)
			lanes = widths[i].lanes;
	tenths *= lanes;
	snprintf(out, len, "%u%s Gb/sec (%uX%s)", tenths / 10, tenths % 10 ? ".5" : "", lanes,
		 name);
}

static void guid_str(const uint8_t mac[6], char *out, size_t len)
{
	/* the modified EUI-64 of the MAC, as the provider's node GUID */
	snprintf(out, len, "%02x%02x:%02xff:fe%02x:%02x%02x", mac[0] ^ 0x02, mac[1], mac[2], mac[3],
		 mac[4], mac[5]);
}

static void gid_str(const uint8_t g[16], char *out, size_t len)
{
	snprintf(out, len,
		 "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", g[0],
		 g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12], g[13],
		 g[14], g[15]);
}

/* Files of ports/1/ (p is the rest of the path). */
static int port_file(const struct rocemu_sysfs_dev *d, const char *p, char *out, size_t len)
{
	unsigned idx;
	char end;

	if (!strcmp(p, "link_layer"))
		snprintf(out, len, "Ethernet");
	else if (!strcmp(p, "state"))
		snprintf(out, len, d->active ? "4: ACTIVE" : "1: DOWN");
	else if (!strcmp(p, "phys_state"))
		snprintf(out, len, d->active ? "5: LinkUp" : "3: Disabled");
	else if (!strcmp(p, "rate"))
		rate_str(d->link_mbps, out, len);
	else if (!strcmp(p, "cap_mask"))
		snprintf(out, len, "0x%08x", ROCEMU_PORT_CAP_FLAGS);
	else if (!strcmp(p, "lid") && d->lid_known)
		snprintf(out, len, "0x%x", d->lid);
	else if (!strcmp(p, "sm_lid"))
		snprintf(out, len, "0x0");
	else if (!strcmp(p, "lid_mask_count") || !strcmp(p, "sm_sl"))
		snprintf(out, len, "0");
	else if (!strcmp(p, "pkeys/0"))
		snprintf(out, len, "0xffff");
	else if (sscanf(p, "gids/%u%c", &idx, &end) == 1 && idx < ROCEMU_PORT_MAX_GIDS) {
		static const uint8_t zero[16];
		bool known = idx < d->n_gids && (idx > 0 || d->mac_known);
		gid_str(known ? d->gids[idx] : zero, out, len);
	} else if (sscanf(p, "gid_attrs/types/%u%c", &idx, &end) == 1 &&
		   idx < ROCEMU_PORT_MAX_GIDS) {
		if (idx >= d->n_gids)
			return -EINVAL; /* the kernel answers EINVAL for an empty slot */
		snprintf(out, len, "RoCE v2");
	} else if (sscanf(p, "gid_attrs/ndevs/%u%c", &idx, &end) == 1 &&
		   idx < ROCEMU_PORT_MAX_GIDS) {
		if (idx >= d->n_gids)
			return -EINVAL;
		snprintf(out, len, "%s", d->netdev);
	} else
		return -ENOENT;
	return 0;
}

int rocemu_sysfs_file(const struct rocemu_sysfs_dev *d, const char *rel, char *out, size_t len)
{
	if ((!strcmp(rel, "node_guid") || !strcmp(rel, "sys_image_guid")) && d->mac_known)
		guid_str(d->mac, out, len);
	else if (!strcmp(rel, "node_type"))
		snprintf(out, len, "1: CA");
	else if (!strcmp(rel, "fw_ver"))
		snprintf(out, len, "%s", ROCEMU_VERSION);
	else if (!strcmp(rel, "board_id") || !strcmp(rel, "hca_type"))
		snprintf(out, len, "rocemu");
	else if (!strcmp(rel, "node_desc"))
		snprintf(out, len, "rocemu %s", d->name);
	else if (!strncmp(rel, "ports/1/", 8))
		return port_file(d, rel + 8, out, len);
	else
		return -ENOENT;
	return 0;
}

int rocemu_sysfs_each(const struct rocemu_sysfs_dev *d,
		      int (*fn)(void *arg, const char *rel, const char *content), void *arg)
{
	static const char *const fixed[] = {
	    "node_guid",
	    "sys_image_guid",
	    "node_type",
	    "fw_ver",
	    "board_id",
	    "hca_type",
	    "node_desc",
	    "ports/1/state",
	    "ports/1/phys_state",
	    "ports/1/link_layer",
	    "ports/1/rate",
	    "ports/1/cap_mask",
	    "ports/1/lid",
	    "ports/1/sm_lid",
	    "ports/1/lid_mask_count",
	    "ports/1/sm_sl",
	    "ports/1/pkeys/0",
	};
	static const char *const per_gid[] = {"ports/1/gids/%u", "ports/1/gid_attrs/types/%u",
					      "ports/1/gid_attrs/ndevs/%u"};
	char rel[64], content[128];
	int rc;

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		if (rocemu_sysfs_file(d, fixed[i], content, sizeof(content)) < 0)
			continue;
		if ((rc = fn(arg, fixed[i], content)))
			return rc;
	}
	for (size_t f = 0; f < sizeof(per_gid) / sizeof(per_gid[0]); f++)
		for (unsigned idx = 0; idx < ROCEMU_PORT_MAX_GIDS; idx++) {
			snprintf(rel, sizeof(rel), per_gid[f], idx);
			if (rocemu_sysfs_file(d, rel, content, sizeof(content)) < 0)
				continue;
			if ((rc = fn(arg, rel, content)))
				return rc;
		}
	return 0;
}
