/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The wire codec on rte_mbufs: build a RoCEv2 frame directly into an mbuf's
 * data room, and parse a received mbuf. Thin wrappers over roce_wire.h.
 */
#ifndef ROCEMU_WIRE_MBUF_H
#define ROCEMU_WIRE_MBUF_H

#include <rte_mbuf.h>

#include "roce_wire.h"

/**
 * Reset m and write the headers for pkt (payload_len from pkt). Returns a
 * pointer to the payload area (pkt->payload_len bytes the caller fills), or
 * NULL if the mbuf's data room is too small (a single segment is required).
 */
uint8_t *roce_mbuf_prepare(struct rte_mbuf *m, const struct roce_pkt *pkt);

/** Write pad and ICRC after the caller filled the payload. 0 or -errno. */
int roce_mbuf_finish(struct rte_mbuf *m, const struct roce_pkt *pkt);

/**
 * The same in two halves, for a payload copied and CRC'd in one pass:
 * roce_mbuf_prepare_icrc() is roce_mbuf_prepare() that also sets *crc to the
 * ICRC's CRC over the masked headers, computed from a copy on the stack (the
 * frame is only written: roce_build_headers_icrc()); the caller continues it
 * over the payload as it fills it (roce_crc32_copy) and hands the result to
 * roce_mbuf_finish_icrc(), which writes the pad and the ICRC. Same frame as
 * roce_mbuf_finish(). NULL as roce_mbuf_prepare(), and for a NULL crc.
 */
uint8_t *roce_mbuf_prepare_icrc(struct rte_mbuf *m, const struct roce_pkt *pkt, uint32_t *crc);
int roce_mbuf_finish_icrc(struct rte_mbuf *m, const struct roce_pkt *pkt, uint32_t crc);

/**
 * After roce_mbuf_finish(): store the real UDP checksum (roce_fill_udp_checksum).
 * IPv6 forbids a zero UDP checksum (RFC 8200) and Wireshark reports one as an
 * error; the ICRC masks the field, so it stays valid. 0 or -EINVAL.
 */
int roce_mbuf_fill_udp_checksum(struct rte_mbuf *m, const struct roce_pkt *pkt);

/** prepare + copy `payload` (may be NULL when payload_len is 0) + finish. */
int roce_mbuf_build(struct rte_mbuf *m, const struct roce_pkt *pkt, const void *payload);

/**
 * Parse a received frame. A multi-segment mbuf is linearised first (fails
 * with ROCE_PARSE_TRUNCATED if it cannot be).
 */
enum roce_parse_status roce_mbuf_parse(struct rte_mbuf *m, unsigned flags, struct roce_pkt *pkt);

#endif
