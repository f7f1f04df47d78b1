/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The link kinds (port_link.h): one line each in port_links[], looked up once
 * per spec by its prefix. A new kind is a new port_link_KIND.c, a line
 * here, its extern in port_link.h and its name in meson.build.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rte_common.h>

#include "port_link.h"

static const struct port_link_ops *const port_links[] = {
    &port_link_memif, &port_link_afpacket, &port_link_afxdp,
    &port_link_ring,  &port_link_dpdk,	   &port_link_host,
};

static atomic_uint port_seq;

unsigned port_next_seq(void)
{
	return atomic_fetch_add(&port_seq, 1);
}

const struct port_link_ops *port_link_parse(const char *spec, char *arg, size_t arglen, char *err,
					    size_t errlen)
{
	char kinds[256] = "";
	size_t used = 0;

	if (!spec || !*spec) {
		port_fail(err, errlen, -EINVAL, "empty port specification");
		return NULL;
	}
	for (size_t i = 0; i < RTE_DIM(port_links); i++) {
		const struct port_link_ops *l = port_links[i];
		const char *rest = spec + strlen(l->prefix);

		used += (size_t)snprintf(kinds + used, sizeof(kinds) - used, "%s%s", i ? ", " : "",
					 l->usage);
		if (used >= sizeof(kinds))
			used = sizeof(kinds) - 1;
		if (strncmp(spec, l->prefix, strlen(l->prefix)))
			continue;
		if (l->check_arg && l->check_arg(rest, err, errlen))
			return NULL;
		if (strlen(rest) >= arglen) {
			port_fail(err, errlen, -EINVAL, "port specification too long");
			return NULL;
		}
		snprintf(arg, arglen, "%s", rest);
		return l;
	}
	port_fail(err, errlen, -EINVAL, "unknown port kind (%s)", kinds);
	return NULL;
}
