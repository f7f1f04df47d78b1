/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Communication Management MADs (IBA vol. 1 ch. 12, RoCE annex A16/A17):
 * the 24-byte common MAD header, the CM messages rocemu's librdmacm sends
 * (REQ, REP, RTU, REJ, DREQ, DREP, SIDR_REQ, SIDR_REP) and the rdma_cm
 * private-data header that carries the IP addresses (the "CMA header").
 *
 * Messages are decoded into host-order structs and encoded back into the
 * 256-byte MAD; field offsets are those of the tables in IBA 12.6 (byte
 * offsets below are from the start of the MAD).
 */
#ifndef ROCEMU_CM_MAD_H
#define ROCEMU_CM_MAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CM_MAD_SIZE	 256
#define CM_MGMT_CLASS	 0x07 /* Communication Management */
#define CM_CLASS_VERSION 2
#define CM_METHOD_SEND	 0x03

enum cm_attr_id {
	CM_ATTR_REQ = 0x0010,
	CM_ATTR_MRA = 0x0011,
	CM_ATTR_REJ = 0x0012,
	CM_ATTR_REP = 0x0013,
	CM_ATTR_RTU = 0x0014,
	CM_ATTR_DREQ = 0x0015,
	CM_ATTR_DREP = 0x0016,
	CM_ATTR_SIDR_REQ = 0x0017,
	CM_ATTR_SIDR_REP = 0x0018,
};

/* Private data sizes (IBA table 99 and friends). */
#define CM_REQ_PDATA	  92
#define CM_REP_PDATA	  196
#define CM_RTU_PDATA	  224
#define CM_REJ_PDATA	  148
#define CM_DREQ_PDATA	  220
#define CM_DREP_PDATA	  224
#define CM_SIDR_REQ_PDATA 216
#define CM_SIDR_REP_PDATA 136

/* REJ reasons used here (IBA table 112). */
enum cm_rej_reason {
	CM_REJ_TIMEOUT = 4,
	CM_REJ_INVALID_COMM_ID = 6,
	CM_REJ_INVALID_SERVICE_ID = 8,
	CM_REJ_INVALID_TRANSPORT = 9, /* Invalid Transport Service Type */
	CM_REJ_CONSUMER_DEFINED = 28,
	CM_REJ_VENDOR_OPTION_NOT_SUPPORTED = 35, /* ECE options refused (rdma_reject_ece) */
};
enum cm_rej_msg { CM_REJ_MSG_REQ = 0, CM_REJ_MSG_REP = 1, CM_REJ_MSG_OTHER = 2 };

/* SIDR_REP status (IBA table 118). */
enum cm_sidr_status {
	CM_SIDR_OK = 0,
	CM_SIDR_UNSUPPORTED = 1, /* service ID not supported */
	CM_SIDR_REJECT = 2,
};

/* Transport service type in REQ (IBA 12.6.5): 3 says that the extended
 * transport type field names it, where 1 is XRC (as Linux's CM sends it for
 * an XRC initiator). */
enum cm_transport { CM_TRANSPORT_RC = 0, CM_TRANSPORT_UC = 1, CM_TRANSPORT_EXT = 3 };
enum cm_ext_transport { CM_EXT_TRANSPORT_XRC = 1 };

struct cm_mad_hdr {
	uint8_t method;
	uint16_t attr_id;
	uint64_t tid;
};

/*
 * Enhanced Connection Establishment (ECE) rides on the REQ and the REP as
 * Linux's CM carries it: the 24-bit vendor ID in bytes the IBA tables had
 * reserved (REQ byte 5..7; REP bytes 15, 19 and 23, high to low) and the
 * vendor's options in the MAD header's attribute modifier
 * (cm_mad_attr_mod / cm_mad_set_attr_mod). Vendor ID 0: no ECE.
 */
struct cm_req {
	uint32_t local_comm_id;
	uint32_t vendor_id; /* ECE */
	uint64_t service_id;
	uint64_t local_ca_guid;
	uint32_t local_qkey;
	uint32_t local_qpn;
	uint8_t responder_resources, initiator_depth;
	uint8_t remote_cm_timeout, transport, flow_control;
	uint32_t starting_psn;
	uint8_t local_cm_timeout, retry_count;
	uint16_t pkey;
	uint8_t path_mtu; /* enum ibv_mtu */
	uint8_t rnr_retry_count, max_cm_retries;
	bool srq;
	uint8_t ext_transport; /* enum cm_ext_transport when transport is CM_TRANSPORT_EXT */
	uint8_t local_gid[16], remote_gid[16];
	uint32_t flow_label;
	uint8_t packet_rate; /* enum ibv_rate */
	uint8_t traffic_class, hop_limit, sl, local_ack_timeout;
	uint8_t pdata[CM_REQ_PDATA];
};

struct cm_rep {
	uint32_t local_comm_id, remote_comm_id;
	uint32_t local_qkey, local_qpn, starting_psn;
	/* An XRC target's QPN goes here, local_qpn 0 (Linux's CM: the REP of an
	 * XRC TGT QP names it as the local EE context, with SRQ set). */
	uint32_t local_eecn;
	uint8_t responder_resources, initiator_depth;
	uint8_t target_ack_delay, failover, flow_control, rnr_retry_count;
	bool srq;
	uint8_t vendor_id_h, vendor_id_m, vendor_id_l; /* ECE: cm_rep_vendor_id() */
	uint64_t local_ca_guid;
	uint8_t pdata[CM_REP_PDATA];
};

/* RTU, DREP: the two communication IDs and private data. DREQ adds the QPN. */
struct cm_ids {
	uint32_t local_comm_id, remote_comm_id;
	uint32_t remote_qpn; /* DREQ only */
	uint8_t pdata[CM_RTU_PDATA];
};

struct cm_rej {
	uint32_t local_comm_id, remote_comm_id;
	uint8_t msg_rejected; /* enum cm_rej_msg */
	uint8_t ari_len;
	uint16_t reason;
	uint8_t pdata[CM_REJ_PDATA];
};

struct cm_sidr_req {
	uint32_t request_id;
	uint16_t pkey;
	uint64_t service_id;
	uint8_t pdata[CM_SIDR_REQ_PDATA];
};

struct cm_sidr_rep {
	uint32_t request_id;
	uint8_t status;
	uint32_t qpn;
	uint64_t service_id;
	uint32_t qkey;
	uint8_t pdata[CM_SIDR_REP_PDATA];
};

/** Where a field of a CM message sits (IBA 12.6 tables) and what holds it. */
struct cm_field {
	enum { CM_FIELD_UINT, CM_FIELD_BYTES, CM_FIELD_CONST } kind;
	uint16_t bit;	 /**< first bit from the start of the CM message (MAD byte 24), MSB first */
	uint16_t width;	 /**< bits (a byte string: its length times 8) */
	uint16_t member; /**< offsetof the member in the message's struct */
	uint16_t size;	 /**< sizeof that member (a byte string: bytes on the wire) */
	uint64_t value;	 /**< CM_FIELD_CONST: what is always sent */
};

/** A message's fields, in order, and the size of its struct (cm_req, ...). */
struct cm_layout {
	const struct cm_field *fields;
	size_t n;
	size_t msg_size;
};

/**
 * The layout of message attr_id (REQ, REP, RTU, REJ, DREQ, DREP, SIDR_REQ,
 * SIDR_REP), which both the encoder and the decoder read; NULL for another.
 */
const struct cm_layout *cm_mad_layout(uint16_t attr_id);

/** Encodes msg, the struct of message attr_id, into a MAD; -EINVAL for an
 * attribute without a layout. The typed cm_mad_put_* below do the same. */
int cm_mad_put(uint8_t *mad, uint64_t tid, uint16_t attr_id, const void *msg);
/** Decodes message attr_id into msg, its struct; -EINVAL as cm_mad_put. */
int cm_mad_get(const uint8_t *mad, uint16_t attr_id, void *msg);

/** The REP's ECE vendor ID, and setting it. */
static inline uint32_t cm_rep_vendor_id(const struct cm_rep *r)
{
	return (uint32_t)r->vendor_id_h << 16 | (uint32_t)r->vendor_id_m << 8 | r->vendor_id_l;
}
static inline void cm_rep_set_vendor_id(struct cm_rep *r, uint32_t v)
{
	r->vendor_id_h = (uint8_t)(v >> 16);
	r->vendor_id_m = (uint8_t)(v >> 8);
	r->vendor_id_l = (uint8_t)v;
}

/** The attribute modifier of an encoded MAD (a REQ's or REP's ECE options). */
uint32_t cm_mad_attr_mod(const uint8_t *mad);
void cm_mad_set_attr_mod(uint8_t *mad, uint32_t v);

/** Header of a received MAD; -EINVAL if it is not a CM Send MAD we can read. */
int cm_mad_parse_hdr(const uint8_t *mad, size_t len, struct cm_mad_hdr *h);

void cm_mad_put_req(uint8_t *mad, uint64_t tid, const struct cm_req *m);
void cm_mad_put_rep(uint8_t *mad, uint64_t tid, const struct cm_rep *m);
/** RTU, DREQ (remote_qpn used) and DREP. */
void cm_mad_put_ids(uint8_t *mad, uint64_t tid, uint16_t attr_id, const struct cm_ids *m);
void cm_mad_put_rej(uint8_t *mad, uint64_t tid, const struct cm_rej *m);
void cm_mad_put_sidr_req(uint8_t *mad, uint64_t tid, const struct cm_sidr_req *m);
void cm_mad_put_sidr_rep(uint8_t *mad, uint64_t tid, const struct cm_sidr_rep *m);

void cm_mad_get_req(const uint8_t *mad, struct cm_req *m);
void cm_mad_get_rep(const uint8_t *mad, struct cm_rep *m);
void cm_mad_get_ids(const uint8_t *mad, uint16_t attr_id, struct cm_ids *m);
void cm_mad_get_rej(const uint8_t *mad, struct cm_rej *m);
void cm_mad_get_sidr_req(const uint8_t *mad, struct cm_sidr_req *m);
void cm_mad_get_sidr_rep(const uint8_t *mad, struct cm_sidr_rep *m);

/*
 * The rdma_cm IP addressing over the IB CM (as Linux's rdma_cm and
 * Wireshark's "RDMA CM" heuristic read it): the service ID is
 * 0x0000000001000000 | port_space << 16 | port, and the private data of a
 * REQ or SIDR_REQ starts with a 36-byte header: CMA version 0, the IP version
 * in the high nibble of byte 1, the source port, then source and destination
 * addresses as 16 bytes each (IPv4 in the last four).
 */
#define CMA_HDR_LEN	 36
#define CMA_SERVICE_BASE 0x0000000001000000ull
#define CMA_SERVICE_MASK 0xffffffffff000000ull

struct cma_hdr {
	uint8_t ip_version;	  /* 4 or 6 */
	uint16_t src_port;	  /* host order */
	uint8_t src[16], dst[16]; /* IPv4: last four bytes */
};

uint64_t cma_service_id(uint16_t port_space, uint16_t port);
/** 0 and port space/port when sid is an rdma_cm IP service ID, else -EINVAL. */
int cma_service_parse(uint64_t sid, uint16_t *port_space, uint16_t *port);
void cma_hdr_put(uint8_t *p, const struct cma_hdr *h);
/** -EINVAL for a version this code does not speak. */
int cma_hdr_get(const uint8_t *p, struct cma_hdr *h);

#endif /* ROCEMU_CM_MAD_H */
