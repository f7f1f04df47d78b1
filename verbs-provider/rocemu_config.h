/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Device configuration of the drop-in libibverbs, shared with `rocemu run`
 * (which checks a config file before starting the program).
 *
 * $ROCEMU_CONFIG names a file with one [name] section per device, each key an
 * option of rocemu_port_config_set(); otherwise $ROCEMU_DEVICE holds one
 * device as newline-separated key=value lines (what `rocemu run` sets).
 */
#ifndef ROCEMU_VERBS_CONFIG_H
#define ROCEMU_VERBS_CONFIG_H

#include <stddef.h>

#include "rocemu_port.h"

#define ROCEMU_ENV_CONFIG "ROCEMU_CONFIG"
#define ROCEMU_ENV_DEVICE "ROCEMU_DEVICE"
/** A rocemu host to attach rocemu0 to when nothing else is configured. */
#define ROCEMU_ENV_HOST "ROCEMU_HOST"
/** Set by `rocemu run` when the program has its private /sys view: the
 * directory of the devices' sysfs files, which the provider refreshes from the
 * engine when it opens a device (tools/run/view.c). */
#define ROCEMU_ENV_SYSFS_VIEW "ROCEMU_SYSFS_VIEW"

/**
 * The devices of this process from the environment. 0 (n may be 0: nothing
 * configured), or -EINVAL/-ENOMEM with err naming the file, line and problem.
 */
int rocemu_config_load(struct rocemu_port_config *cfgs, unsigned max, unsigned *n, char *err,
		       size_t errlen);
/** Parse one config file. 0 or -EINVAL with err "FILE:LINE: problem". */
int rocemu_config_parse_file(const char *path, struct rocemu_port_config *cfgs, unsigned max,
			     unsigned *n, char *err, size_t errlen);

#endif
