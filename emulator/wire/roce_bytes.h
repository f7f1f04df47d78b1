/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Private to the wire codec: big-endian field readers and writers on byte
 * pointers. Every header field goes through these, so alignment and byte
 * order are handled in one place.
 */
#ifndef ROCEMU_WIRE_BYTES_H
#define ROCEMU_WIRE_BYTES_H

#include <stdint.h>

static inline uint16_t rb_get16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static inline uint32_t rb_get24(const uint8_t *p)
{
	return ((uint32_t)p[0] << 16) | ((uint32_t)p[1] << 8) | p[2];
}

static inline uint32_t rb_get32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t rb_get64(const uint8_t *p)
{
	return ((uint64_t)rb_get32(p) << 32) | rb_get32(p + 4);
}

static inline void rb_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void rb_put24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16);
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)v;
}

static inline void rb_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void rb_put64(uint8_t *p, uint64_t v)
{
	rb_put32(p, (uint32_t)(v >> 32));
	rb_put32(p + 4, (uint32_t)v);
}

/* Fixed header sizes used by parser and builder. */
#define RB_ETH_LEN	      14
#define RB_VLAN_LEN	      4
#define RB_IPV4_LEN	      20
#define RB_IPV6_LEN	      40
#define RB_UDP_LEN	      8
#define RB_IP_PROTO_UDP	      17
#define RB_IPV4_DF	      0x4000
#define RB_IPV4_MF	      0x2000
#define RB_IPV4_RESERVED_FLAG 0x8000
#define RB_IPV4_FRAG_OFF_MASK 0x1FFF

/** Internet checksum (RFC 1071) of len bytes, folded and complemented. */
static inline uint16_t rb_inet_csum(const uint8_t *p, unsigned len)
{
	uint32_t sum = 0;
	unsigned i;

	for (i = 0; i + 1 < len; i += 2)
		sum += rb_get16(p + i);
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xFFFF) + (sum >> 16);
	return (uint16_t)~sum;
}

/* roce_ext.c: the extension headers an opcode carries, read from ext (the
 * byte after the BTH) into the descriptor, or written there from it. */
struct roce_pkt;
struct roce_opcode_info;
void roce_ext_read(const uint8_t *ext, struct roce_pkt *pkt);
void roce_ext_write(uint8_t *ext, const struct roce_pkt *pkt, const struct roce_opcode_info *op);

#endif
