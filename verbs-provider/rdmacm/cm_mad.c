/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CM MAD encoding and decoding (IBA vol. 1 12.6). Offsets are from the start
 * of the 256-byte MAD: the CM message starts after the 24-byte common MAD
 * header (13.4.3). Each message is one table of fields, read by both the
 * encoder and the decoder.
 */
#include <errno.h>
#include <string.h>

#include "cm_mad.h"

#define CM_OFF 24 /* common MAD header */

/* A big-endian field of width bits starting at bit (counted from the most
 * significant bit of p[0], as the IBA tables count Byte[Bit]). */
static uint64_t get_bits(const uint8_t *p, unsigned bit, unsigned width)
{
	uint64_t v = 0;

	for (unsigned i = bit; i < bit + width; i++)
		v = v << 1 | ((p[i / 8] >> (7 - i % 8)) & 1);
	return v;
}

static void put_bits(uint8_t *p, unsigned bit, unsigned width, uint64_t v)
{
	for (unsigned i = bit + width; i-- > bit; v >>= 1) {
		uint8_t b = (uint8_t)(0x80 >> (i % 8));
		p[i / 8] = (uint8_t)(v & 1 ? p[i / 8] | b : p[i / 8] & ~b);
	}
}

/*
 * The layout of each message as in its IBA table: per field, the struct
 * (cm_<msg>) member that holds it, its byte and bit offset from the start of
 * the CM message (the MAD's byte 24) and its width in bits; neighbouring
 * fields of a few bits share a line. Fields not listed are zero (reserved, or
 * unused over RoCE: the REQ's EECNs, the alternate path).
 */
#define F(msg, member, byte, bit, width)                                                           \
	{                                                                                          \
		CM_FIELD_UINT, (byte)*8 + (bit), width, offsetof(struct cm_##msg, member),         \
		    sizeof(((struct cm_##msg *)0)->member), 0                                      \
	}
#define BYTES(msg, member, byte, len)                                                              \
	{                                                                                          \
		CM_FIELD_BYTES, (byte)*8, (len)*8, offsetof(struct cm_##msg, member), len, 0       \
	}
/* The two communication IDs that open REP, RTU, REJ, DREQ and DREP. */
#define COMM_IDS(msg) F(msg, local_comm_id, 0, 0, 32), F(msg, remote_comm_id, 4, 0, 32)
#define CONST(byte, bit, width, value)                                                             \
	{                                                                                          \
		CM_FIELD_CONST, (byte)*8 + (bit), width, 0, 0, value                               \
	}

/* clang-format off */

/* REQ (12.6.5, table 106) */
static const struct cm_field req_fields[] = {
	F(req, local_comm_id, 0, 0, 32),
	F(req, vendor_id, 5, 0, 24), /* ECE */
	F(req, service_id, 8, 0, 64),
	F(req, local_ca_guid, 16, 0, 64),
	F(req, local_qkey, 28, 0, 32),
	F(req, local_qpn, 32, 0, 24), F(req, responder_resources, 35, 0, 8),
	F(req, initiator_depth, 39, 0, 8), /* after the local EECN, 0 */
	F(req, remote_cm_timeout, 43, 0, 5), F(req, transport, 43, 5, 2),
	F(req, flow_control, 43, 7, 1),
	F(req, starting_psn, 44, 0, 24),
	F(req, local_cm_timeout, 47, 0, 5), F(req, retry_count, 47, 5, 3),
	F(req, pkey, 48, 0, 16),
	F(req, path_mtu, 50, 0, 4), F(req, rnr_retry_count, 50, 5, 3),
	F(req, max_cm_retries, 51, 0, 4), F(req, srq, 51, 4, 1),
	F(req, ext_transport, 51, 5, 3),
	/* RoCE has no LIDs: the permissive LID as local and remote port LID,
	 * as Linux's CM sends for routed (hop limit > 1) paths. */
	CONST(52, 0, 16, 0xffff), CONST(54, 0, 16, 0xffff),
	BYTES(req, local_gid, 56, 16),
	BYTES(req, remote_gid, 72, 16),
	F(req, flow_label, 88, 0, 20), F(req, packet_rate, 91, 2, 6),
	F(req, traffic_class, 92, 0, 8), F(req, hop_limit, 93, 0, 8),
	F(req, sl, 94, 0, 4), /* then "subnet local" 0 */
	F(req, local_ack_timeout, 95, 0, 5),
	/* bytes 96..139: the alternate path */
	BYTES(req, pdata, 140, CM_REQ_PDATA),
};

/* REP (12.6.8, table 109) */
static const struct cm_field rep_fields[] = {
	COMM_IDS(rep),
	F(rep, local_qkey, 8, 0, 32),
	F(rep, local_qpn, 12, 0, 24), F(rep, vendor_id_h, 15, 0, 8), /* ECE */
	F(rep, local_eecn, 16, 0, 24), F(rep, vendor_id_m, 19, 0, 8),
	F(rep, starting_psn, 20, 0, 24), F(rep, vendor_id_l, 23, 0, 8),
	F(rep, responder_resources, 24, 0, 8), F(rep, initiator_depth, 25, 0, 8),
	F(rep, target_ack_delay, 26, 0, 5), F(rep, failover, 26, 5, 2),
	F(rep, flow_control, 26, 7, 1),
	F(rep, rnr_retry_count, 27, 0, 3), F(rep, srq, 27, 3, 1),
	F(rep, local_ca_guid, 28, 0, 64),
	BYTES(rep, pdata, 36, CM_REP_PDATA),
};

/* RTU (table 110) and DREP (table 115) */
static const struct cm_field rtu_drep_fields[] = {
	COMM_IDS(ids), BYTES(ids, pdata, 8, CM_RTU_PDATA),
};

/* DREQ (table 114) */
static const struct cm_field dreq_fields[] = {
	COMM_IDS(ids), F(ids, remote_qpn, 8, 0, 24), BYTES(ids, pdata, 12, CM_DREQ_PDATA),
};

/* REJ (12.6.7, table 111) */
static const struct cm_field rej_fields[] = {
	COMM_IDS(rej),
	F(rej, msg_rejected, 8, 0, 2), F(rej, ari_len, 9, 0, 7), F(rej, reason, 10, 0, 16),
	/* bytes 12..83: additional rejection information */
	BYTES(rej, pdata, 84, CM_REJ_PDATA),
};

/* SIDR_REQ (12.11.1, table 117) */
static const struct cm_field sidr_req_fields[] = {
	F(sidr_req, request_id, 0, 0, 32), F(sidr_req, pkey, 4, 0, 16),
	F(sidr_req, service_id, 8, 0, 64),
	BYTES(sidr_req, pdata, 16, CM_SIDR_REQ_PDATA),
};

/* SIDR_REP (table 118) */
static const struct cm_field sidr_rep_fields[] = {
	F(sidr_rep, request_id, 0, 0, 32), F(sidr_rep, status, 4, 0, 8),
	F(sidr_rep, qpn, 8, 0, 24),
	F(sidr_rep, service_id, 12, 0, 64),
	F(sidr_rep, qkey, 20, 0, 32),
	/* bytes 24..95: additional information */
	BYTES(sidr_rep, pdata, 96, CM_SIDR_REP_PDATA),
};

/* clang-format on */

#define LAYOUT(name, msg, fields)                                                                  \
	static const struct cm_layout name = {fields, sizeof(fields) / sizeof((fields)[0]),        \
					      sizeof(struct cm_##msg)}
LAYOUT(req_layout, req, req_fields);
LAYOUT(rep_layout, rep, rep_fields);
LAYOUT(rtu_drep_layout, ids, rtu_drep_fields);
LAYOUT(dreq_layout, ids, dreq_fields);
LAYOUT(rej_layout, rej, rej_fields);
LAYOUT(sidr_req_layout, sidr_req, sidr_req_fields);
LAYOUT(sidr_rep_layout, sidr_rep, sidr_rep_fields);

/* RTU and DREP share a layout; cm_mad_put_ids/get_ids read any attribute
 * but DREQ's with it. */
static const struct cm_layout *ids_layout(uint16_t attr_id)
{
	return attr_id == CM_ATTR_DREQ ? &dreq_layout : &rtu_drep_layout;
}

const struct cm_layout *cm_mad_layout(uint16_t attr_id)
{
	switch (attr_id) {
	case CM_ATTR_REQ:
		return &req_layout;
	case CM_ATTR_REP:
		return &rep_layout;
	case CM_ATTR_RTU:
	case CM_ATTR_DREQ:
	case CM_ATTR_DREP:
		return ids_layout(attr_id);
	case CM_ATTR_REJ:
		return &rej_layout;
	case CM_ATTR_SIDR_REQ:
		return &sidr_req_layout;
	case CM_ATTR_SIDR_REP:
		return &sidr_rep_layout;
	default:
		return NULL;
	}
}

/* The members are unsigned integers (or bool) of 1, 2, 4 or 8 bytes. */
static uint64_t member_get(const void *msg, const struct cm_field *f)
{
	const uint8_t *p = (const uint8_t *)msg + f->member;
	uint8_t v8;
	uint16_t v16;
	uint32_t v32;
	uint64_t v64;

	if (f->size == 1) {
		memcpy(&v8, p, 1);
		return v8;
	}
	if (f->size == 2) {
		memcpy(&v16, p, 2);
		return v16;
	}
	if (f->size == 4) {
		memcpy(&v32, p, 4);
		return v32;
	}
	memcpy(&v64, p, 8);
	return v64;
}

static void member_set(void *msg, const struct cm_field *f, uint64_t v)
{
	uint8_t *p = (uint8_t *)msg + f->member;
	uint8_t v8 = (uint8_t)v;
	uint16_t v16 = (uint16_t)v;
	uint32_t v32 = (uint32_t)v;

	if (f->size == 1)
		memcpy(p, &v8, 1);
	else if (f->size == 2)
		memcpy(p, &v16, 2);
	else if (f->size == 4)
		memcpy(p, &v32, 4);
	else
		memcpy(p, &v, 8);
}

static void put_hdr(uint8_t *mad, uint16_t attr_id, uint64_t tid)
{
	memset(mad, 0, CM_MAD_SIZE);
	mad[0] = 1; /* base version */
	mad[1] = CM_MGMT_CLASS;
	mad[2] = CM_CLASS_VERSION;
	mad[3] = CM_METHOD_SEND;
	put_bits(mad, 8 * 8, 64, tid);
	put_bits(mad, 16 * 8, 16, attr_id);
}

uint32_t cm_mad_attr_mod(const uint8_t *mad)
{
	return (uint32_t)get_bits(mad, 20 * 8, 32);
}

void cm_mad_set_attr_mod(uint8_t *mad, uint32_t v)
{
	put_bits(mad, 20 * 8, 32, v);
}

int cm_mad_parse_hdr(const uint8_t *mad, size_t len, struct cm_mad_hdr *h)
{
	if (len < CM_MAD_SIZE || mad[0] != 1 || mad[1] != CM_MGMT_CLASS ||
	    mad[2] != CM_CLASS_VERSION)
		return -EINVAL;
	h->method = mad[3];
	h->tid = get_bits(mad, 8 * 8, 64);
	h->attr_id = (uint16_t)get_bits(mad, 16 * 8, 16);
	if (h->method != CM_METHOD_SEND)
		return -EINVAL; /* CM uses Send only (12.11) */
	return 0;
}

/* Encodes msg, the struct of the message laid out by l, into a whole MAD. */
static void put_msg(uint8_t *mad, uint64_t tid, uint16_t attr_id, const struct cm_layout *l,
		    const void *msg)
{
	uint8_t *m = mad + CM_OFF;

	put_hdr(mad, attr_id, tid);
	for (const struct cm_field *f = l->fields; f < l->fields + l->n; f++) {
		if (f->kind == CM_FIELD_BYTES)
			memcpy(m + f->bit / 8, (const uint8_t *)msg + f->member, f->size);
		else
			put_bits(m, f->bit, f->width,
				 f->kind == CM_FIELD_CONST ? f->value : member_get(msg, f));
	}
}

/* Decodes the message laid out by l into msg, its struct. */
static void get_msg(const uint8_t *mad, const struct cm_layout *l, void *msg)
{
	const uint8_t *m = mad + CM_OFF;

	memset(msg, 0, l->msg_size);
	for (const struct cm_field *f = l->fields; f < l->fields + l->n; f++) {
		if (f->kind == CM_FIELD_BYTES)
			memcpy((uint8_t *)msg + f->member, m + f->bit / 8, f->size);
		else if (f->kind == CM_FIELD_UINT)
			member_set(msg, f, get_bits(m, f->bit, f->width));
	}
}

int cm_mad_put(uint8_t *mad, uint64_t tid, uint16_t attr_id, const void *msg)
{
	const struct cm_layout *l = cm_mad_layout(attr_id);

	if (!l)
		return -EINVAL;
	put_msg(mad, tid, attr_id, l, msg);
	return 0;
}

int cm_mad_get(const uint8_t *mad, uint16_t attr_id, void *msg)
{
	const struct cm_layout *l = cm_mad_layout(attr_id);

	if (!l)
		return -EINVAL;
	get_msg(mad, l, msg);
	return 0;
}

void cm_mad_put_req(uint8_t *mad, uint64_t tid, const struct cm_req *m)
{
	put_msg(mad, tid, CM_ATTR_REQ, &req_layout, m);
}
void cm_mad_put_rep(uint8_t *mad, uint64_t tid, const struct cm_rep *m)
{
	put_msg(mad, tid, CM_ATTR_REP, &rep_layout, m);
}
void cm_mad_put_ids(uint8_t *mad, uint64_t tid, uint16_t attr_id, const struct cm_ids *m)
{
	put_msg(mad, tid, attr_id, ids_layout(attr_id), m);
}
void cm_mad_put_rej(uint8_t *mad, uint64_t tid, const struct cm_rej *m)
{
	put_msg(mad, tid, CM_ATTR_REJ, &rej_layout, m);
}
void cm_mad_put_sidr_req(uint8_t *mad, uint64_t tid, const struct cm_sidr_req *m)
{
	put_msg(mad, tid, CM_ATTR_SIDR_REQ, &sidr_req_layout, m);
}
void cm_mad_put_sidr_rep(uint8_t *mad, uint64_t tid, const struct cm_sidr_rep *m)
{
	put_msg(mad, tid, CM_ATTR_SIDR_REP, &sidr_rep_layout, m);
}

void cm_mad_get_req(const uint8_t *mad, struct cm_req *m)
{
	get_msg(mad, &req_layout, m);
}
void cm_mad_get_rep(const uint8_t *mad, struct cm_rep *m)
{
	get_msg(mad, &rep_layout, m);
}
void cm_mad_get_ids(const uint8_t *mad, uint16_t attr_id, struct cm_ids *m)
{
	get_msg(mad, ids_layout(attr_id), m);
}
void cm_mad_get_rej(const uint8_t *mad, struct cm_rej *m)
{
	get_msg(mad, &rej_layout, m);
}
void cm_mad_get_sidr_req(const uint8_t *mad, struct cm_sidr_req *m)
{
	get_msg(mad, &sidr_req_layout, m);
}
void cm_mad_get_sidr_rep(const uint8_t *mad, struct cm_sidr_rep *m)
{
	get_msg(mad, &sidr_rep_layout, m);
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
	put_bits(p, 2 * 8, 16, h->src_port);
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
	h->src_port = (uint16_t)get_bits(p, 2 * 8, 16);
	memcpy(h->src, p + 4, 16);
	memcpy(h->dst, p + 20, 16);
	return 0;
}
