/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * GIDs as RoCEv2 uses them: an IPv6 address, or an IPv4 address mapped into
 * ::ffff:0:0/96 (A17.4.5; RFC 4291 2.5.5.2).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "roce_wire.h"

static const uint8_t v4mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};

bool roce_gid_is_v4mapped(const uint8_t gid[16])
{
	return memcmp(gid, v4mapped_prefix, sizeof(v4mapped_prefix)) == 0;
}

void roce_gid_from_ipv4(uint8_t gid[16], uint32_t ipv4_be)
{
	memcpy(gid, v4mapped_prefix, sizeof(v4mapped_prefix));
	memcpy(gid + 12, &ipv4_be, 4);
}

uint32_t roce_gid_to_ipv4(const uint8_t gid[16])
{
	uint32_t v;

	memcpy(&v, gid + 12, 4);
	return v;
}

const char *roce_gid_str(const uint8_t gid[16], char *buf, size_t len)
{
	int af = roce_gid_is_v4mapped(gid) ? AF_INET : AF_INET6;

	if (buf == NULL || len == 0)
		return NULL;
	if (inet_ntop(af, af == AF_INET ? gid + 12 : gid, buf, (socklen_t)len) == NULL)
		snprintf(buf, len, "?");
	return buf;
}
