/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to the RC/UC responder: what rc_responder.c (requests: sequence
 * checks, placement of SEND and WRITE) asks of rc_responder_res.c (the
 * requests answered from a responder resource: READ, atomics, ATOMIC WRITE,
 * FLUSH, and their duplicates) and of rc_responder_ack.c (the AETH answers:
 * ACK, NAK, RNR NAK, ATOMIC ACKNOWLEDGE).
 */
#ifndef ROCEMU_RC_RESPONDER_H
#define ROCEMU_RC_RESPONDER_H

#include "rocemu_transport.h"

/* The syndrome of a positive ACK. End-to-end credits are not used (no
 * SRQ-less flow control): the "invalid" credit count. */
static inline uint8_t rc_resp_ack_syndrome(void)
{
	return ROCE_AETH_SYNDROME(ROCE_AETH_ACK, ROCE_AETH_CREDITS_INVALID);
}

/* The transport bits of the responder's answers: XRC's (0xA0) on an XRC
 * target, RC's (0) otherwise. */
static inline uint8_t rc_resp_transport(const struct rocemu_qp *qp)
{
	return qp->type == IBV_QPT_XRC_RECV ? ROCE_TRANSPORT_XRC : ROCE_TRANSPORT_RC;
}

/** Outcome of placing one request packet. */
enum resp_result {
	RESP_OK = 0,
	RESP_RNR,     /**< no receive WQE: RNR NAK, nothing consumed */
	RESP_INV_REQ, /**< opcode sequence, length, resources: NAK invalid request */
	RESP_LEN,     /**< message longer than the receive WQE: NAK invalid request */
	RESP_ACCESS,  /**< R_Key, bounds, rights: NAK remote access error */
	RESP_OP,      /**< local failure at the responder: NAK remote operational error */
};

/* A READ, atomic, ATOMIC WRITE or FLUSH at the expected PSN: checked,
 * executed (a READ when its responses leave) and kept in a responder
 * resource, whose response is the acknowledgement; the expected PSN moves
 * past it. RESP_OK, or what the requester is NAKed with. */
enum resp_result rc_resp_read(struct rocemu_qp *qp, const struct roce_pkt *pkt);
enum resp_result rc_resp_atomic(struct rocemu_qp *qp, const struct roce_pkt *pkt);
enum resp_result rc_resp_atomic_write(struct rocemu_qp *qp, const struct roce_pkt *pkt,
				      const uint8_t *payload);
enum resp_result rc_resp_flush(struct rocemu_qp *qp, const struct roce_pkt *pkt);
/* A duplicate of one of those: answered again from the resource that holds
 * it, or dropped and counted when none does. */
void rc_resp_duplicate(struct rocemu_qp *qp, const struct roce_pkt *pkt);

/* ACK, NAK, RNR NAK or ATOMIC ACKNOWLEDGE now. 0 or -errno (-EAGAIN: try
 * later; -EHOSTUNREACH: the requester's MAC cannot be resolved). */
int rc_resp_send_aeth(struct rocemu_qp *qp, uint8_t opcode, uint32_t psn, uint8_t syndrome,
		      uint64_t orig, uint32_t msn);
/* A NAK (code: ROCE_NAK_*) for psn now, counted by code; it acknowledges the
 * PSNs before it. 0 or -errno. */
int rc_resp_send_nak(struct rocemu_qp *qp, uint8_t code, uint32_t psn);
/* A PSN-sequence or RNR NAK (syndrome) for psn: sent after the READ
 * responses still streaming, or on a later pass when the tx queue is full. */
void rc_resp_queue_nak(struct rocemu_qp *qp, uint8_t syndrome, uint32_t psn);

#endif
