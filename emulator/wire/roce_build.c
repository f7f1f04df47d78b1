/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The builder: writes Ethernet [802.1Q] / IPv4 or IPv6 / UDP / BTH /
 * extension headers for a descriptor; roce_finish() then zeroes the pad and
 * stores the ICRC once the payload is in place. The builder derives what
 * follows from the payload length (PadCnt, IP and UDP lengths, the IPv4
 * header checksum) and takes everything else from the descriptor, so that a
 * parsed frame rebuilds to the same bytes.
 *
 * IPv4 always goes out with DF set (RoCEv2 packets are not fragmented;
 * path.dont_fragment is only reported by the parser). The UDP checksum is
 * written as given: 0 means "none", which is what RoCEv2 NICs send (the ICRC
 * protects the packet, and the annex masks the UDP checksum out of it).
 */
#include <errno.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_ip.h>
#include <rte_memcpy.h>

#include "roce_bytes.h"
#include "roce_wire.h"

static uint32_t l2_len(const struct roce_pkt *pkt)
{
	return RB_ETH_LEN + (pkt->path.has_vlan ? RB_VLAN_LEN : 0);
}

static uint32_t l3_len(const struct roce_pkt *pkt)
{
	return pkt->path.ip_version == 6 ? RB_IPV6_LEN : RB_IPV4_LEN;
}

/* PadCnt: bytes that bring the payload to a multiple of 4 (IBA 9.2.1). */
static uint32_t pad_of(uint32_t payload_len)
{
	return (4 - (payload_len & 3)) & 3;
}

uint32_t roce_header_len(const struct roce_pkt *pkt)
{
	const struct roce_opcode_info *op = roce_opcode_info(pkt->opcode);

	if (op == NULL || (pkt->path.ip_version != 4 && pkt->path.ip_version != 6))
		return 0;
	return l2_len(pkt) + l3_len(pkt) + RB_UDP_LEN + ROCE_BTH_LEN + op->ext_len;
}

uint32_t roce_frame_len(const struct roce_pkt *pkt)
{
	uint32_t hdr = roce_header_len(pkt);

	/* no frame carries more than 64 KiB: this also keeps the sum from wrapping */
	if (hdr == 0 || pkt->payload_len > 0xFFFF)
		return 0;
	return hdr + pkt->payload_len + pad_of(pkt->payload_len) + ROCE_ICRC_LEN;
}

static int check_descriptor(const struct roce_pkt *pkt, const struct roce_opcode_info *op)
{
	uint32_t ip_payload;

	if (op == NULL)
		return -EINVAL;
	if (pkt->path.ip_version == 4 &&
	    (!roce_gid_is_v4mapped(pkt->path.src_gid) || !roce_gid_is_v4mapped(pkt->path.dst_gid)))
		return -EINVAL;
	if (pkt->payload_len != 0 && !(op->flags & ROCE_OPF_PAYLOAD))
		return -EINVAL;
	if (op->fixed_payload != 0 && pkt->payload_len != op->fixed_payload)
		return -EINVAL;
	if (pkt->dqpn > 0xFFFFFF || pkt->psn > ROCE_PSN_MASK || pkt->tver > 0xF ||
	    pkt->resv8a_low > 0x3F || pkt->resv7 > 0x7F)
		return -EINVAL;
	if (pkt->path.ip_version == 6 && pkt->path.flow_label > 0xFFFFF)
		return -EINVAL;
	if ((op->hdrs & ROCE_HDR_AETH) && pkt->aeth.msn > 0xFFFFFF)
		return -EINVAL;
	if ((op->hdrs & ROCE_HDR_DETH) && pkt->deth.src_qp > 0xFFFFFF)
		return -EINVAL;
	if ((op->hdrs & ROCE_HDR_XRCETH) && pkt->xrc_srqn > 0xFFFFFF)
		return -EINVAL;
	/* IP length fields are 16 bits. */
	ip_payload = RB_UDP_LEN + ROCE_BTH_LEN + op->ext_len + pkt->payload_len +
		     pad_of(pkt->payload_len) + ROCE_ICRC_LEN;
	if (pkt->payload_len > 0xFFFF || ip_payload + RB_IPV4_LEN > 0xFFFF)
		return -EINVAL;
	return 0;
}

static uint8_t *put_l2(uint8_t *p, const struct roce_pkt *pkt)
{
	uint16_t type = pkt->path.ip_version == 6 ? ROCE_ETH_TYPE_IPV6 : ROCE_ETH_TYPE_IPV4;

	memcpy(p, pkt->path.dst_mac, 6);
	memcpy(p + 6, pkt->path.src_mac, 6);
	p += 12;
	if (pkt->path.has_vlan) {
		rb_put16(p, ROCE_ETH_TYPE_VLAN);
		rb_put16(p + 2, pkt->path.vlan_tci);
		p += RB_VLAN_LEN;
	}
	rb_put16(p, type);
	return p + 2;
}

/*
 * The IPv4 header checksum (RFC 791) from the values put_l3() writes, not
 * from the header: a load of bytes just stored by narrower stores cannot be
 * forwarded from the store buffer and waits until they are written to the
 * cache (bench/perf_analysis.md, "64 B"). The header has no options.
 */
static uint16_t ipv4_header_csum(const struct roce_pkt *pkt, uint16_t total_len)
{
	const uint8_t *src = &pkt->path.src_gid[12], *dst = &pkt->path.dst_gid[12];
	uint32_t sum = (0x45u << 8 | pkt->path.tclass) + total_len + pkt->path.ip_id + RB_IPV4_DF +
		       ((uint32_t)pkt->path.ttl << 8 | RB_IP_PROTO_UDP) + rb_get16(src) +
		       rb_get16(src + 2) + rb_get16(dst) + rb_get16(dst + 2);

	/* nine 16-bit words: two folds bring the sum into 16 bits */
	sum = (sum & 0xFFFF) + (sum >> 16);
	sum = (sum & 0xFFFF) + (sum >> 16);
	return (uint16_t)~sum;
}

static uint8_t *put_l3(uint8_t *p, const struct roce_pkt *pkt, uint32_t ip_payload)
{
	if (pkt->path.ip_version == 4) {
		uint16_t total = (uint16_t)(RB_IPV4_LEN + ip_payload);

		/* in 32-bit words, as put_bth() */
		rb_put32(p, 0x45u << 24 | (uint32_t)pkt->path.tclass << 16 | total);
		rb_put32(p + 4, (uint32_t)pkt->path.ip_id << 16 | RB_IPV4_DF);
		rb_put32(p + 8, (uint32_t)pkt->path.ttl << 24 | RB_IP_PROTO_UDP << 16 |
				    ipv4_header_csum(pkt, total));
		memcpy(p + 12, &pkt->path.src_gid[12], 4);
		memcpy(p + 16, &pkt->path.dst_gid[12], 4);
		return p + RB_IPV4_LEN;
	}
	rb_put32(p, (6u << 28) | ((uint32_t)pkt->path.tclass << 20) | pkt->path.flow_label);
	rb_put16(p + 4, (uint16_t)ip_payload);
	p[6] = RB_IP_PROTO_UDP;
	p[7] = pkt->path.ttl;
	memcpy(p + 8, pkt->path.src_gid, 16);
	memcpy(p + 24, pkt->path.dst_gid, 16);
	return p + RB_IPV6_LEN;
}

/*
 * The BTH as three 32-bit words: byte by byte, the compiler assembled it in
 * vector registers through a 16-bit store and a 32-bit load of the same
 * stack slot, which the store buffer cannot forward (a stall per frame).
 */
static void put_bth(uint8_t *p, const struct roce_pkt *pkt)
{
	uint32_t flags = (pkt->se ? ROCE_BTH_SE : 0) | (pkt->mig ? ROCE_BTH_MIG : 0) |
			 (pad_of(pkt->payload_len) << ROCE_BTH_PAD_SHIFT) | pkt->tver;
	uint32_t resv8a =
	    (pkt->fecn ? ROCE_BTH_FECN : 0) | (pkt->becn ? ROCE_BTH_BECN : 0) | pkt->resv8a_low;
	uint32_t ackreq = (pkt->ackreq ? ROCE_BTH_ACKREQ : 0) | pkt->resv7;

	rb_put32(p, (uint32_t)pkt->opcode << 24 | (flags & 0xFF) << 16 | pkt->pkey);
	rb_put32(p + 4, (resv8a & 0xFF) << 24 | (pkt->dqpn & 0xFFFFFF));
	rb_put32(p + 8, (ackreq & 0xFF) << 24 | (pkt->psn & 0xFFFFFF));
}

/* The header into the frame: a memcpy of a variable length became `rep
 * movsq` (also as a loop of 16-byte copies), whose microcoded start costs
 * more than the copy of ~60 bytes; rte_memcpy moves it in vector registers. */
static void copy_headers(uint8_t *dst, const uint8_t *src, uint32_t len)
{
	rte_memcpy(dst, src, len);
}

/*
 * The headers are built on the stack and copied into buf: the ICRC's CRC
 * reads them back, and a frame buffer is often in lines the peer's CPU has
 * just read (memif's direct channel hands the buffer given back last to the
 * next frame). A load after stores into such a line waits until the line is
 * back, ~350 ns when the two CPUs share no cache; stores alone drain in the
 * background (bench/perf_analysis.md, "64 B on the direct channel"). The
 * IPv4 checksum comes from the values, and the fields go in as 32-bit words:
 * in a frame whose lines are ours (a latency test's) this costs no more than
 * building in place did (bench/perf_analysis.md, "64 B: the stack copy's
 * cost"). crc, when not NULL, gets roce_icrc_partial() of the headers.
 */
static int build_headers(uint8_t *buf, uint32_t room, const struct roce_pkt *pkt, uint32_t *crc)
{
	const struct roce_opcode_info *op = roce_opcode_info(pkt->opcode);
	uint32_t hdr_len = roce_header_len(pkt);
	uint8_t hdr[ROCE_MAX_HDR_LEN];
	uint32_t ip_payload;
	uint8_t *p;
	int rc;

	if (hdr_len == 0 || hdr_len > sizeof(hdr))
		return -EINVAL;
	rc = check_descriptor(pkt, op);
	if (rc != 0)
		return rc;
	if (buf == NULL || room < hdr_len)
		return -ENOSPC;

	ip_payload = roce_frame_len(pkt) - l2_len(pkt) - l3_len(pkt);
	p = put_l2(hdr, pkt);
	p = put_l3(p, pkt, ip_payload);
	rb_put32(p, (uint32_t)pkt->path.udp_sport << 16 | ROCE_UDP_PORT);
	rb_put32(p + 4, (ip_payload & 0xFFFF) << 16 | pkt->path.udp_csum);
	p += RB_UDP_LEN;
	put_bth(p, pkt);
	roce_ext_write(p + ROCE_BTH_LEN, pkt, op);
	if (crc != NULL)
		*crc = roce_icrc_partial(hdr, l2_len(pkt), hdr_len);
	copy_headers(buf, hdr, hdr_len);
	return (int)hdr_len;
}

int roce_build_headers(uint8_t *buf, uint32_t room, const struct roce_pkt *pkt)
{
	return build_headers(buf, room, pkt, NULL);
}

int roce_build_headers_icrc(uint8_t *buf, uint32_t room, const struct roce_pkt *pkt, uint32_t *crc)
{
	if (crc == NULL)
		return -EINVAL;
	return build_headers(buf, room, pkt, crc);
}

int roce_finish(uint8_t *frame, uint32_t frame_len, const struct roce_pkt *pkt)
{
	uint32_t hdr_len = roce_header_len(pkt);
	uint32_t want = roce_frame_len(pkt);

	if (frame == NULL || hdr_len == 0 || want == 0 || frame_len != want)
		return -EINVAL;
	memset(frame + hdr_len + pkt->payload_len, 0, pad_of(pkt->payload_len));
	roce_icrc_store(frame, frame_len, roce_icrc_compute(frame, l2_len(pkt), frame_len));
	return 0;
}

static uint32_t csum_add(uint32_t sum, const uint8_t *p, uint32_t len)
{
	uint32_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += rb_get16(p + i);
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	return sum;
}

uint16_t roce_udp_checksum(const uint8_t *frame, uint32_t l3_off, uint32_t frame_len)
{
	const uint8_t *ip, *udp;
	uint32_t sum = 0, ip_hdr, udp_len;
	int version;

	if (frame == NULL || frame_len < l3_off + RB_IPV4_LEN)
		return 0;
	ip = frame + l3_off;
	version = ip[0] >> 4;
	ip_hdr = version == 6 ? RB_IPV6_LEN : RB_IPV4_LEN;
	if (frame_len < l3_off + ip_hdr + RB_UDP_LEN)
		return 0;
	udp = ip + ip_hdr;
	udp_len = rb_get16(udp + 4);
	if (udp_len < RB_UDP_LEN || frame_len - l3_off - ip_hdr < udp_len)
		return 0;
	/* pseudo-header: addresses, protocol, UDP length */
	if (version == 6)
		sum = csum_add(sum, ip + 8, 32);
	else
		sum = csum_add(sum, ip + 12, 8);
	sum += RB_IP_PROTO_UDP + udp_len;
	/* the UDP header without its checksum field */
	sum = csum_add(sum, udp, 6);
	/* the data: DPDK's word-wise sum, in memory order, turned to a big-endian value */
	sum += rte_be_to_cpu_16(rte_raw_cksum(udp + RB_UDP_LEN, udp_len - RB_UDP_LEN));
	while (sum >> 16)
		sum = (sum & 0xFFFF) + (sum >> 16);
	sum = ~sum & 0xFFFF;
	return sum == 0 ? 0xFFFF : (uint16_t)sum; /* 0 means "no checksum" in UDP */
}

int roce_fill_udp_checksum(uint8_t *frame, uint32_t frame_len, const struct roce_pkt *pkt)
{
	uint32_t l3_off = l2_len(pkt);
	uint16_t csum;

	if (frame == NULL || roce_frame_len(pkt) == 0 || frame_len != roce_frame_len(pkt))
		return -EINVAL;
	csum = roce_udp_checksum(frame, l3_off, frame_len);
	if (csum == 0)
		return -EINVAL;
	rb_put16(frame + l3_off + l3_len(pkt) + 6, csum);
	return 0;
}
