/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The sysfs files of a rocemu device: what /sys/class/infiniband/<dev>/...
 * and /sys/class/infiniband_verbs/uverbs<N>/... say, from one description
 * of the device. Two users, one renderer:
 *  - the provider's ibv_read_sysfs_file (sysfs.c), live from the engine;
 *  - `rocemu run`'s private sysfs view (tools/run/view.c), written before
 *    the program starts, from the configuration.
 * No engine, no DPDK: the launcher links this file too.
 */
#ifndef ROCEMU_VERBS_SYSFS_FILES_H
#define ROCEMU_VERBS_SYSFS_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rocemu_port.h"

/** What the files of one device say. */
struct rocemu_sysfs_dev {
	char name[ROCEMU_PORT_NAME_MAX];   /**< rocemu0 */
	char netdev[ROCEMU_PORT_NAME_MAX]; /**< the GIDs' netdev (rocemu_gid_netdev) */
	bool mac_known;			   /**< node GUID and GID 0 need it */
	uint8_t mac[6];
	unsigned n_gids; /**< filled slots: link-local, then one per address */
	uint8_t gids[ROCEMU_PORT_MAX_GIDS][16];
	bool active;	    /**< port ACTIVE/LinkUp, else DOWN/Disabled */
	uint32_t link_mbps; /**< Ethernet speed (0: unknown) */
	bool lid_known;	    /**< the engine's answer; a configuration does not say */
	uint16_t lid;	    /**< LID-only extension (0: none) */
};

/**
 * The description a configuration gives: name, interface, GIDs (link-local
 * from mac when given, then the --ip addresses in order), port ACTIVE, no
 * LID. mac NULL: node GUID and GID 0 unknown.
 */
void rocemu_sysfs_dev_from_config(struct rocemu_sysfs_dev *d, const struct rocemu_port_config *cfg,
				  const uint8_t *mac);

/**
 * The netdev the port's GIDs name (gid_attrs/ndevs/N, ibv_query_gid_ex's
 * ndev_ifindex): the af_packet/af_xdp interface, else the device's name;
 * with --vlan ID, the VLAN netdev on it as Linux names one ("eth0.100"): on
 * a RoCE NIC every GID of a VLAN netdev's addresses names that netdev, and
 * every GID of a rocemu port on a VLAN is on the VLAN.
 */
void rocemu_gid_netdev(const struct rocemu_port_config *cfg, char *out, size_t len);

/** The interface an af_packet/af_xdp spec names (into out), else false. */
bool rocemu_spec_netdev(const char *spec, char *out, size_t len);

/** An Ethernet speed as IB width x speed (enum ibv_port_width/speed values). */
void rocemu_link_width_speed(uint32_t mbps, uint8_t *width, uint8_t *speed);

/**
 * Content of the file rel (relative to the device's directory, e.g.
 * "ports/1/gid_attrs/types/1"), without trailing newline. 0; -ENOENT: no
 * such file; -EINVAL: a file the kernel has but refuses to read (an empty
 * GID slot's type or netdev).
 */
int rocemu_sysfs_file(const struct rocemu_sysfs_dev *d, const char *rel, char *out, size_t len);

/**
 * Call fn for every file of the device's directory that reads (relative
 * path, content), in a fixed order. Stops at fn's first nonzero return and
 * returns it; else 0.
 */
int rocemu_sysfs_each(const struct rocemu_sysfs_dev *d,
		      int (*fn)(void *arg, const char *rel, const char *content), void *arg);

#endif
