/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Addressing: IP addresses <-> RoCE GIDs (IPv4 as IPv4-mapped IPv6, the
 * RoCEv2 convention), the device for a source/destination pair, and
 * rdma_getaddrinfo.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "cma.h"

socklen_t cma_sockaddr_len(const struct sockaddr *sa)
{
	if (!sa)
		return 0;
	return sa->sa_family == AF_INET6
		   ? sizeof(struct sockaddr_in6)
		   : (sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) : 0);
}

void cma_sockaddr_to_gid(const struct sockaddr *sa, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	if (sa->sa_family == AF_INET) {
		gid->raw[10] = 0xff;
		gid->raw[11] = 0xff;
		memcpy(gid->raw + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		memcpy(gid->raw, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	}
}

bool cma_addr_any(const struct sockaddr *sa)
{
	if (!sa)
		return true;
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
	if (sa->sa_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, &in6addr_any, 16);
	return true;
}

bool cma_addr_loopback(const struct sockaddr *sa)
{
	if (!sa)
		return false;
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
	return false;
}

static bool gid_is_v4(const union ibv_gid *g)
{
	static const uint8_t pfx[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return !memcmp(g->raw, pfx, 12);
}

static bool gid_is_zero(const union ibv_gid *g)
{
	for (int i = 0; i < 16; i++)
		if (g->raw[i])
			return false;
	return true;
}

static int common_prefix(const union ibv_gid *a, const union ibv_gid *b)
{
	int n = 0;

	for (int i = 0; i < 16; i++) {
		uint8_t x = a->raw[i] ^ b->raw[i];
		if (!x) {
			n += 8;
			continue;
		}
		while (!(x & 0x80)) {
			x <<= 1;
			n++;
		}
		break;
	}
	return n;
}

int cma_pick_device(const struct sockaddr *src, const struct sockaddr *dst, struct cma_device **dev,
		    int *sgid_index)
{
	int n;
	struct cma_device *devs = cma_devices(&n);
	union ibv_gid g;

	if (n == 0)
		return -ENODEV;
	/* A specific source address: the device that owns it. */
	if (src && !cma_addr_any(src)) {
		cma_sockaddr_to_gid(src, &g);
		for (int i = 0; i < n; i++)
			for (int j = 0; j < devs[i].gid_len; j++)
				if (!memcmp(&devs[i].gids[j], &g, 16)) {
					*dev = &devs[i];
					*sgid_index = j;
					return 0;
				}
		return -EADDRNOTAVAIL;
	}
	if (!dst)
		return -EINVAL;
	/* Else the device whose address shares the longest prefix with the
	 * destination (with one device: that device). */
	cma_sockaddr_to_gid(dst, &g);
	int best = -1, best_dev = -1, best_idx = -1;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < devs[i].gid_len; j++) {
			const union ibv_gid *c = &devs[i].gids[j];
			if (gid_is_zero(c) || gid_is_v4(c) != gid_is_v4(&g))
				continue;
			int p = common_prefix(c, &g);
			if (p > best) {
				best = p;
				best_dev = i;
				best_idx = j;
			}
		}
	if (best_dev < 0)
		return -EADDRNOTAVAIL;
	*dev = &devs[best_dev];
	*sgid_index = best_idx;
	return 0;
}

/* ---- rdma_getaddrinfo ---- */

static struct sockaddr *dup_sa(const struct sockaddr *sa, socklen_t len)
{
	struct sockaddr *p = malloc(len);
	if (p)
		memcpy(p, sa, len);
	return p;
}

void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *next = res->ai_next;
		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = next;
	}
}
ROCEMU_PUBLIC(rdma_freeaddrinfo)

/* The addresses of a name and/or service, through getaddrinfo: the source
 * for RAI_PASSIVE, else the destination. */
static int addrinfo_by_name(const char *node, const char *service,
			    const struct rdma_addrinfo *hints, struct rdma_addrinfo *r)
{
	struct addrinfo ai_hints = {0}, *ai = NULL;
	struct sockaddr *sa;
	int rc;

	ai_hints.ai_family = hints ? hints->ai_family : 0;
	ai_hints.ai_flags = (r->ai_flags & RAI_PASSIVE) ? AI_PASSIVE : 0;
	if (r->ai_flags & RAI_NUMERICHOST)
		ai_hints.ai_flags |= AI_NUMERICHOST;
	ai_hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(node, service, &ai_hints, &ai);
	if (rc) {
		errno = rc == EAI_SYSTEM ? errno : ENOENT;
		return rc;
	}
	r->ai_family = ai->ai_family;
	sa = dup_sa(ai->ai_addr, ai->ai_addrlen);
	if (sa && (r->ai_flags & RAI_PASSIVE)) {
		r->ai_src_addr = sa;
		r->ai_src_len = ai->ai_addrlen;
	} else if (sa) {
		r->ai_dst_addr = sa;
		r->ai_dst_len = ai->ai_addrlen;
		if (node && !(r->ai_dst_canonname = strdup(node)))
			sa = NULL;
	}
	freeaddrinfo(ai);
	if (!sa) {
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

int rdma_getaddrinfo(const char *node, const char *service, const struct rdma_addrinfo *hints,
		     struct rdma_addrinfo **res)
{
	struct rdma_addrinfo *r;
	int rc = 0;

	if (!res || (!node && !service && !hints)) {
		errno = EINVAL;
		return -1;
	}
	if (hints && hints->ai_family == AF_IB) {
		errno = EOPNOTSUPP; /* no InfiniBand addressing on RoCE */
		return -1;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		errno = ENOMEM;
		return -1;
	}
	r->ai_flags = hints ? hints->ai_flags : 0;
	r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type : IBV_QPT_RC;
	r->ai_port_space = hints && hints->ai_port_space
			       ? hints->ai_port_space
			       : (r->ai_qp_type == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP);
	if (hints && !hints->ai_qp_type && hints->ai_port_space == RDMA_PS_UDP)
		r->ai_qp_type = IBV_QPT_UD;
	if (node || service) {
		rc = addrinfo_by_name(node, service, hints, r);
	} else {
		/* No name, no service: the addresses are the hints' (as librdmacm;
		 * libfabric's verbs provider asks this way for a given source). */
		r->ai_family = hints->ai_family;
		if (hints->ai_dst_addr && hints->ai_dst_len) {
			r->ai_dst_addr = dup_sa(hints->ai_dst_addr, hints->ai_dst_len);
			r->ai_dst_len = hints->ai_dst_len;
			if (!r->ai_dst_addr)
				rc = -1;
		}
	}
	/* A source the hints give and the lookup did not. */
	if (rc == 0 && !r->ai_src_addr && hints && hints->ai_src_addr && hints->ai_src_len) {
		r->ai_src_addr = dup_sa(hints->ai_src_addr, hints->ai_src_len);
		r->ai_src_len = hints->ai_src_len;
		if (!r->ai_src_addr)
			rc = -1;
	}
	if (rc) { /* errno: from getaddrinfo, or ENOMEM from malloc */
		rdma_freeaddrinfo(r);
		return rc;
	}
	if (!r->ai_family)
		r->ai_family = r->ai_dst_addr	? r->ai_dst_addr->sa_family
			       : r->ai_src_addr ? r->ai_src_addr->sa_family
						: 0;
	*res = r;
	return 0;
}
ROCEMU_PUBLIC(rdma_getaddrinfo)
