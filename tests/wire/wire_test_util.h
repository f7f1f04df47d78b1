/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Helpers shared by the wire codec tests: sample descriptors for every
 * opcode, building a whole frame into a buffer, comparing descriptors, and
 * the list of opcodes the codec knows.
 */
#ifndef ROCEMU_WIRE_TEST_UTIL_H
#define ROCEMU_WIRE_TEST_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "roce_wire.h"

/** Every opcode in the table (RC, UC, UD, CNP), ascending; returns the count. */
unsigned wt_known_opcodes(uint8_t out[256]);

/**
 * Fill pkt with a descriptor for opcode: distinct non-zero values in every
 * header field, derived from `seed`, so that a swapped or dropped field shows.
 * payload_len is forced to 0 for opcodes without payload and to 16 for CNP.
 */
void wt_sample_pkt(struct roce_pkt *pkt, uint8_t opcode, int ip_version, bool vlan,
		   uint32_t payload_len, unsigned seed);

/** Deterministic payload bytes for a seed. */
void wt_fill_payload(uint8_t *p, uint32_t len, unsigned seed);

/**
 * Build a whole frame (headers, payload, pad, ICRC) into buf.
 * Returns the frame length or a negative errno.
 */
int wt_build(const struct roce_pkt *pkt, const uint8_t *payload, uint8_t *buf, uint32_t room);

/** Rebuild a frame from a parsed descriptor and the original frame's payload. */
int wt_rebuild(const struct roce_pkt *parsed, const uint8_t *frame, uint8_t *buf, uint32_t room);

/**
 * Compare the descriptor fields the builder consumes. Returns NULL when
 * equal, else the name of the first field that differs.
 */
const char *wt_pkt_diff(const struct roce_pkt *a, const struct roce_pkt *b);

/** Directory of the Linux Soft-RoCE captures shipped in the repository
 * (ROCEMU_SOURCE_DIR/pcaps/rxe). */
const char *wt_rxe_pcap_dir(char *buf, unsigned len);

/** Remove a directory and the files in it (an EAL runtime dir after rte_eal_cleanup). */
void wt_remove_dir(const char *dir);

#endif
