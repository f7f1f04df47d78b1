/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * CM messages as a peer host sends them, built the same way by the CM tests
 * (tests/rdmacm, tests/verbs/cm_mad_test.c) and the fuzz seeds: rdma_cm IPv4
 * connection requests from 10.0.0.<src>:40000 to 10.0.0.1. Header only, so
 * that gen_seeds, which links nothing but cm_mad.c, can use it.
 */
#ifndef ROCEMU_TEST_CM_PEER_H
#define ROCEMU_TEST_CM_PEER_H

#include <stdint.h>
#include <string.h>

#include "cm_mad.h"

#define CM_PEER_SRC_PORT 40000

/** The GID of 10.0.0.<last> (IPv4-mapped IPv6, ::ffff:10.0.0.<last>). */
static inline void cm_peer_gid(uint8_t *gid, uint8_t last)
{
	memset(gid, 0, 16);
	gid[10] = gid[11] = 0xff;
	gid[12] = 10;
	gid[15] = last;
}

/** The rdma_cm private-data header of a request from 10.0.0.<src>:40000 to 10.0.0.1. */
static inline void cm_peer_cma_hdr(uint8_t *pdata, uint8_t src)
{
	struct cma_hdr h = {.ip_version = 4, .src_port = CM_PEER_SRC_PORT};

	h.src[12] = h.dst[12] = 10;
	h.src[15] = src;
	h.dst[15] = 1;
	cma_hdr_put(pdata, &h);
}

/**
 * A REQ from 10.0.0.<src> for port space ps and port, with QP qpn: RC, path
 * MTU 1024, one RDMA read each way, 7 retries, 8 CM retries, hop limit 64,
 * starting PSN 0, the CMA header in the private data.
 */
static inline void cm_peer_req(struct cm_req *r, uint16_t ps, uint16_t port, uint32_t comm,
			       uint8_t src, uint32_t qpn)
{
	memset(r, 0, sizeof(*r));
	r->local_comm_id = comm;
	r->service_id = cma_service_id(ps, port);
	r->local_qpn = qpn;
	r->responder_resources = r->initiator_depth = 1;
	r->retry_count = 7;
	r->pkey = 0xffff;
	r->path_mtu = 3; /* IBV_MTU_1024 */
	r->max_cm_retries = 8;
	r->hop_limit = 64;
	cm_peer_gid(r->local_gid, src);
	cm_peer_gid(r->remote_gid, 1);
	cm_peer_cma_hdr(r->pdata, src);
}

/** A SIDR_REQ from 10.0.0.<src> for port space ps and port. */
static inline void cm_peer_sidr_req(struct cm_sidr_req *r, uint16_t ps, uint16_t port,
				    uint32_t request_id, uint8_t src)
{
	memset(r, 0, sizeof(*r));
	r->request_id = request_id;
	r->pkey = 0xffff;
	r->service_id = cma_service_id(ps, port);
	cm_peer_cma_hdr(r->pdata, src);
}

#endif /* ROCEMU_TEST_CM_PEER_H */
