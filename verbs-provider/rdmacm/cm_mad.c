/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CM MAD encoding and decoding (IBA vol. 1 12.6). Offsets are from the start
 * of the 256-byte MAD: the CM message starts after the 24-byte common MAD
 * header (13.4.3). Bit fields sharing a byte are listed most significant
 * first, as in the IBA tables.
 */
#include <errno.h>
#include <string.h>

#include "cm_mad.h"

#define CM_OFF 24 /* common MAD header */

static void put8(uint8_t *m, unsigned off, uint8_t v)
{
	m[off] = v;
}
static void put16(uint8_t *m, unsigned off, uint16_t v)
{
	m[off] = (uint8_t)(v >> 8);
	m[off + 1] = (uint8_t)v;
}
static void put32(uint8_t *m, unsigned off, uint32_t v)
{
	put16(m, off, (uint16_t)(v >> 16));
	put16(m, off + 2, (uint16_t)v);
}
static void put64(uint8_t *m, unsigned off, uint64_t v)
{
	put32(m, off, (uint32_t)(v >> 32));
	put32(m, off + 4, (uint32_t)v);
}
static uint16_t get16(const uint8_t *m, unsigned off)
{
	return (uint16_t)(m[off] << 8 | m[off + 1]);
}
static uint32_t get32(const uint8_t *m, unsigned off)
{
	return (uint32_t)get16(m, off) << 16 | get16(m, off + 2);
}
static uint64_t get64(const uint8_t *m, unsigned off)
{
	return (uint64_t)get32(m, off) << 32 | get32(m, off + 4);
}

static void put_hdr(uint8_t *mad, uint16_t attr_id, uint64_t tid)
{
	memset(mad, 0, CM_MAD_SIZE);
	put8(mad, 0, 1); /* base version */
	put8(mad, 1, CM_MGMT_CLASS);
	put8(mad, 2, CM_CLASS_VERSION);
	put8(mad, 3, CM_METHOD_SEND);
	put64(mad, 8, tid);
	put16(mad, 16, attr_id);
}

int cm_mad_parse_hdr(const uint8_t *mad, size_t len, struct cm_mad_hdr *h)
{
	if (len < CM_MAD_SIZE || mad[0] != 1 || mad[1] != CM_MGMT_CLASS ||
	    mad[2] != CM_CLASS_VERSION)
		return -EINVAL;
	h->method = mad[3];
	h->tid = get64(mad, 8);
	h->attr_id = get16(mad, 16);
	if (h->method != CM_METHOD_SEND)
		return -EINVAL; /* CM uses Send only (12.11) */
	return 0;
}

/* ---- REQ (12.6.5, table 106) ---- */

void cm_mad_put_req(uint8_t *mad, uint64_t tid, const struct cm_req *r)
{
	uint8_t *m = mad + CM_OFF;

	put_hdr(mad, CM_ATTR_REQ, tid);
	put32(m, 0, r->local_comm_id);
	put64(m, 8, r->service_id);
	put64(m, 16, r->local_ca_guid);
	put32(m, 28, r->local_qkey);
	put32(m, 32, r->local_qpn << 8 | r->responder_resources);
	put32(m, 36, r->initiator_depth); /* local EECN 0 */
	put8(m, 43,
	     (uint8_t)((r->remote_cm_timeout & 0x1f) << 3 | (r->transport & 3) << 1 |
		       (r->flow_control & 1)));
	put32(m, 44,
	      (r->starting_psn & 0xffffff) << 8 |
		  (uint32_t)((r->local_cm_timeout & 0x1f) << 3 | (r->retry_count & 7)));
	put16(m, 48, r->pkey);
	put8(m, 50, (uint8_t)((r->path_mtu & 0xf) << 4 | (r->rnr_retry_count & 7)));
	put8(m, 51, (uint8_t)((r->max_cm_retries & 0xf) << 4 | (r->srq ? 1 << 3 : 0)));
	/* RoCE has no LIDs: the permissive LID, as Linux's CM sends for
	 * routed (hop limit > 1) paths. */
	put16(m, 52, 0xffff);
	put16(m, 54, 0xffff);
	memcpy(m + 56, r->local_gid, 16);
	memcpy(m + 72, r->remote_gid, 16);
	put32(m, 88, (r->flow_label & 0xfffff) << 12);
	put8(m, 92, r->traffic_class);
	put8(m, 93, r->hop_limit);
	put8(m, 94, 0); /* SL 0, not subnet local */
	put8(m, 95, (uint8_t)((r->local_ack_timeout & 0x1f) << 3));
	memcpy(m + 140, r->pdata, CM_REQ_PDATA); /* after the 44-byte alternate path (96..139) */
}

void cm_mad_get_req(const uint8_t *mad, struct cm_req *r)
{
	const uint8_t *m = mad + CM_OFF;

	memset(r, 0, sizeof(*r));
	r->local_comm_id = get32(m, 0);
	r->service_id = get64(m, 8);
	r->local_ca_guid = get64(m, 16);
	r->local_qkey = get32(m, 28);
	r->local_qpn = get32(m, 32) >> 8;
	r->responder_resources = m[35];
	r->initiator_depth = m[39];
	r->remote_cm_timeout = m[43] >> 3;
	r->transport = (m[43] >> 1) & 3;
	r->flow_control = m[43] & 1;
	r->starting_psn = get32(m, 44) >> 8;
	r->local_cm_timeout = m[47] >> 3;
	r->retry_count = m[47] & 7;
	r->pkey = get16(m, 48);
	r->path_mtu = m[50] >> 4;
	r->rnr_retry_count = m[50] & 7;
	r->max_cm_retries = m[51] >> 4;
	r->srq = (m[51] >> 3) & 1;
	memcpy(r->local_gid, m + 56, 16);
	memcpy(r->remote_gid, m + 72, 16);
	r->flow_label = get32(m, 88) >> 12;
	r->traffic_class = m[92];
	r->hop_limit = m[93];
	r->local_ack_timeout = m[95] >> 3;
	memcpy(r->pdata, m + 140, CM_REQ_PDATA);
}

/* ---- REP (12.6.8, table 109) ---- */

void cm_mad_put_rep(uint8_t *mad, uint64_t tid, const struct cm_rep *r)
{
	uint8_t *m = mad + CM_OFF;

	put_hdr(mad, CM_ATTR_REP, tid);
	put32(m, 0, r->local_comm_id);
	put32(m, 4, r->remote_comm_id);
	put32(m, 8, r->local_qkey);
	put32(m, 12, r->local_qpn << 8);
	put32(m, 20, (r->starting_psn & 0xffffff) << 8);
	put8(m, 24, r->responder_resources);
	put8(m, 25, r->initiator_depth);
	put8(m, 26,
	     (uint8_t)((r->target_ack_delay & 0x1f) << 3 | (r->failover & 3) << 1 |
		       (r->flow_control & 1)));
	put8(m, 27, (uint8_t)((r->rnr_retry_count & 7) << 5 | (r->srq ? 1 << 4 : 0)));
	put64(m, 28, r->local_ca_guid);
	memcpy(m + 36, r->pdata, CM_REP_PDATA);
}

void cm_mad_get_rep(const uint8_t *mad, struct cm_rep *r)
{
	const uint8_t *m = mad + CM_OFF;

	memset(r, 0, sizeof(*r));
	r->local_comm_id = get32(m, 0);
	r->remote_comm_id = get32(m, 4);
	r->local_qkey = get32(m, 8);
	r->local_qpn = get32(m, 12) >> 8;
	r->starting_psn = get32(m, 20) >> 8;
	r->responder_resources = m[24];
	r->initiator_depth = m[25];
	r->target_ack_delay = m[26] >> 3;
	r->failover = (m[26] >> 1) & 3;
	r->flow_control = m[26] & 1;
	r->rnr_retry_count = m[27] >> 5;
	r->srq = (m[27] >> 4) & 1;
	r->local_ca_guid = get64(m, 28);
	memcpy(r->pdata, m + 36, CM_REP_PDATA);
}

/* ---- RTU (table 110), DREQ (table 114), DREP (table 115) ---- */

void cm_mad_put_ids(uint8_t *mad, uint64_t tid, uint16_t attr_id, const struct cm_ids *r)
{
	uint8_t *m = mad + CM_OFF;

	put_hdr(mad, attr_id, tid);
	put32(m, 0, r->local_comm_id);
	put32(m, 4, r->remote_comm_id);
	if (attr_id == CM_ATTR_DREQ) {
		put32(m, 8, r->remote_qpn << 8);
		memcpy(m + 12, r->pdata, CM_DREQ_PDATA);
	} else {
		memcpy(m + 8, r->pdata, CM_RTU_PDATA);
	}
}

void cm_mad_get_ids(const uint8_t *mad, uint16_t attr_id, struct cm_ids *r)
{
	const uint8_t *m = mad + CM_OFF;

	memset(r, 0, sizeof(*r));
	r->local_comm_id = get32(m, 0);
	r->remote_comm_id = get32(m, 4);
	if (attr_id == CM_ATTR_DREQ) {
		r->remote_qpn = get32(m, 8) >> 8;
		memcpy(r->pdata, m + 12, CM_DREQ_PDATA);
	} else {
		memcpy(r->pdata, m + 8, CM_RTU_PDATA);
	}
}

/* ---- REJ (12.6.7, table 111) ---- */

void cm_mad_put_rej(uint8_t *mad, uint64_t tid, const struct cm_rej *r)
{
	uint8_t *m = mad + CM_OFF;

	put_hdr(mad, CM_ATTR_REJ, tid);
	put32(m, 0, r->local_comm_id);
	put32(m, 4, r->remote_comm_id);
	put8(m, 8, (uint8_t)((r->msg_rejected & 3) << 6));
	put8(m, 9, (uint8_t)((r->ari_len & 0x7f) << 1));
	put16(m, 10, r->reason);
	memcpy(m + 84, r->pdata, CM_REJ_PDATA);
}

void cm_mad_get_rej(const uint8_t *mad, struct cm_rej *r)
{
	const uint8_t *m = mad + CM_OFF;

	memset(r, 0, sizeof(*r));
	r->local_comm_id = get32(m, 0);
	r->remote_comm_id = get32(m, 4);
	r->msg_rejected = m[8] >> 6;
	r->ari_len = m[9] >> 1;
	r->reason = get16(m, 10);
	memcpy(r->pdata, m + 84, CM_REJ_PDATA);
}

/* ---- SIDR_REQ (12.11.1, table 117) and SIDR_REP (table 118) ---- */

void cm_mad_put_sidr_req(uint8_t *mad, uint64_t tid, const struct cm_sidr_req *r)
{
	uint8_t *m = mad + CM_OFF;

	put_hdr(mad, CM_ATTR_SIDR_REQ, tid);
	put32(m, 0, r->request_id);
	put16(m, 4, r->pkey);
	put64(m, 8, r->service_id);
	memcpy(m + 16, r->pdata, CM_SIDR_REQ_PDATA);
}

void cm_mad_get_sidr_req(const uint8_t *mad, struct cm_sidr_req *r)
{
	const uint8_t *m = mad + CM_OFF;

	memset(r, 0, sizeof(*r));
	r->request_id = get32(m, 0);
	r->pkey = get16(m, 4);
	r->service_id = get64(m, 8);
	memcpy(r->pdata, m + 16, CM_SIDR_REQ_PDATA);
}

void cm_mad_put_sidr_rep(uint8_t *mad, uint64_t tid, const struct cm_sidr_rep *r)
{
	uint8_t *m = mad + CM_OFF;

	put_hdr(mad, CM_ATTR_SIDR_REP, tid);
	put32(m, 0, r->request_id);
	put8(m, 4, r->status);
	put32(m, 8, r->qpn << 8);
	put64(m, 12, r->service_id);
	put32(m, 20, r->qkey);
	memcpy(m + 96, r->pdata, CM_SIDR_REP_PDATA);
}

void cm_mad_get_sidr_rep(const uint8_t *mad, struct cm_sidr_rep *r)
{
	const uint8_t *m = mad + CM_OFF;

	memset(r, 0, sizeof(*r));
	r->request_id = get32(m, 0);
	r->status = m[4];
	r->qpn = get32(m, 8) >> 8;
	r->service_id = get64(m, 12);
	r->qkey = get32(m, 20);
	memcpy(r->pdata, m + 96, CM_SIDR_REP_PDATA);
}

/* ---- rdma_cm IP conventions ---- */

uint64_t cma_service_id(uint16_t port_space, uint16_t port)
{
	return CMA_SERVICE_BASE | (uint64_t)port_space << 16 | port;
}

int cma_service_parse(uint64_t sid, uint16_t *port_space, uint16_t *port)
{
	if ((sid & CMA_SERVICE_MASK) != CMA_SERVICE_BASE)
		return -EINVAL;
	*port_space = (uint16_t)(sid >> 16);
	*port = (uint16_t)sid;
	return 0;
}

void cma_hdr_put(uint8_t *p, const struct cma_hdr *h)
{
	memset(p, 0, CMA_HDR_LEN);
	p[0] = 0; /* CMA version */
	p[1] = (uint8_t)(h->ip_version << 4);
	put16(p, 2, h->src_port);
	memcpy(p + 4, h->src, 16);
	memcpy(p + 20, h->dst, 16);
}

int cma_hdr_get(const uint8_t *p, struct cma_hdr *h)
{
	if (p[0] != 0)
		return -EINVAL;
	h->ip_version = p[1] >> 4;
	if (h->ip_version != 4 && h->ip_version != 6)
		return -EINVAL;
	h->src_port = get16(p, 2);
	memcpy(h->src, p + 4, 16);
	memcpy(h->dst, p + 20, 16);
	return 0;
}
