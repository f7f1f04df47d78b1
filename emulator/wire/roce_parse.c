/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The parser: one Ethernet frame (or one IP datagram) in, one descriptor or a
 * named rejection reason out. Every read is preceded by a length check against
 * the end of the frame, then against the end of the IP datagram once its
 * length is known; trailing Ethernet padding is ignored.
 */
#include <string.h>

#include "roce_bytes.h"
#include "roce_wire.h"

static const char *const status_names[ROCE_PARSE_STATUS_COUNT] = {
    [ROCE_PARSE_OK] = "ok",
    [ROCE_PARSE_TRUNCATED] = "truncated",
    [ROCE_PARSE_NOT_IP] = "not_ip",
    [ROCE_PARSE_BAD_IP_VERSION] = "bad_ip_version",
    [ROCE_PARSE_BAD_IP_LENGTH] = "bad_ip_length",
    [ROCE_PARSE_BAD_IP_CHECKSUM] = "bad_ip_checksum",
    [ROCE_PARSE_IP_OPTIONS] = "ip_options",
    [ROCE_PARSE_IP_FRAGMENT] = "ip_fragment",
    [ROCE_PARSE_NOT_UDP] = "not_udp",
    [ROCE_PARSE_NOT_ROCE_PORT] = "not_roce_port",
    [ROCE_PARSE_BAD_UDP_LENGTH] = "bad_udp_length",
    [ROCE_PARSE_BAD_TVER] = "bad_tver",
    [ROCE_PARSE_UNKNOWN_OPCODE] = "unknown_opcode",
    [ROCE_PARSE_BAD_LENGTH] = "bad_length",
    [ROCE_PARSE_BAD_ICRC] = "bad_icrc",
};

const char *roce_parse_status_name(enum roce_parse_status s)
{
	if ((unsigned)s >= ROCE_PARSE_STATUS_COUNT)
		return "invalid_status";
	return status_names[s];
}

/*
 * The IPv4 header at ip, whose whole RB_IPV4_LEN bytes are there; avail bytes
 * of the frame from ip on. On success *dgram_len is the datagram's length.
 */
static enum roce_parse_status parse_ipv4(const uint8_t *ip, uint32_t avail, struct roce_pkt *pkt,
					 uint32_t *dgram_len)
{
	uint16_t tot_len, frag;

	if ((ip[0] >> 4) != 4)
		return ROCE_PARSE_BAD_IP_VERSION;
	if ((ip[0] & 0x0F) < 5)
		return ROCE_PARSE_BAD_IP_LENGTH;
	if ((ip[0] & 0x0F) > 5)
		return ROCE_PARSE_IP_OPTIONS;
	tot_len = rb_get16(ip + 2);
	if (tot_len < RB_IPV4_LEN || tot_len > avail)
		return ROCE_PARSE_BAD_IP_LENGTH;
	if (rb_inet_csum(ip, RB_IPV4_LEN) != 0)
		return ROCE_PARSE_BAD_IP_CHECKSUM;

	pkt->path.ip_version = 4;
	pkt->path.tclass = ip[1];
	pkt->path.ip_id = rb_get16(ip + 4);
	frag = rb_get16(ip + 6);
	pkt->path.dont_fragment = (frag & RB_IPV4_DF) != 0;
	pkt->path.ttl = ip[8];
	memcpy(&pkt->path.src_gid[12], ip + 12, 4);
	memcpy(&pkt->path.dst_gid[12], ip + 16, 4);
	pkt->path.src_gid[10] = pkt->path.src_gid[11] = 0xFF;
	pkt->path.dst_gid[10] = pkt->path.dst_gid[11] = 0xFF;

	if (frag & (RB_IPV4_MF | RB_IPV4_FRAG_OFF_MASK))
		return ROCE_PARSE_IP_FRAGMENT;
	if (ip[9] != RB_IP_PROTO_UDP)
		return ROCE_PARSE_NOT_UDP;
	*dgram_len = tot_len;
	return ROCE_PARSE_OK;
}

/* The same for IPv6 (RB_IPV6_LEN bytes at ip). */
static enum roce_parse_status parse_ipv6(const uint8_t *ip, uint32_t avail, struct roce_pkt *pkt,
					 uint32_t *dgram_len)
{
	uint32_t vtf, pay_len;

	vtf = rb_get32(ip);
	if ((vtf >> 28) != 6)
		return ROCE_PARSE_BAD_IP_VERSION;
	pay_len = rb_get16(ip + 4);
	if (pay_len > avail - RB_IPV6_LEN)
		return ROCE_PARSE_BAD_IP_LENGTH;

	pkt->path.ip_version = 6;
	pkt->path.tclass = (uint8_t)(vtf >> 20);
	pkt->path.flow_label = vtf & 0xFFFFF;
	pkt->path.ttl = ip[7];
	memcpy(pkt->path.src_gid, ip + 8, 16);
	memcpy(pkt->path.dst_gid, ip + 24, 16);

	/* Extension headers are not supported: UDP must follow directly. */
	if (ip[6] != RB_IP_PROTO_UDP)
		return ROCE_PARSE_IP_OPTIONS;
	*dgram_len = RB_IPV6_LEN + pay_len;
	return ROCE_PARSE_OK;
}

/* UDP, BTH, extension headers, payload, ICRC; ip_end bounds everything. */
static enum roce_parse_status parse_l4(const uint8_t *frame, uint32_t l4_off, uint32_t ip_end,
				       unsigned flags, struct roce_pkt *pkt)
{
	const uint8_t *udp = frame + l4_off;
	const uint8_t *bth;
	uint32_t udp_len, body;

	pkt->l4_off = (uint16_t)l4_off;
	if (ip_end - l4_off < RB_UDP_LEN)
		return ROCE_PARSE_TRUNCATED;
	pkt->path.udp_sport = rb_get16(udp);
	pkt->path.udp_dport = rb_get16(udp + 2);
	pkt->path.udp_csum = rb_get16(udp + 6);
	if (pkt->path.udp_dport != ROCE_UDP_PORT)
		return ROCE_PARSE_NOT_ROCE_PORT;
	udp_len = rb_get16(udp + 4);
	if (udp_len != ip_end - l4_off)
		return ROCE_PARSE_BAD_UDP_LENGTH;

	pkt->bth_off = (uint16_t)(l4_off + RB_UDP_LEN);
	if (ip_end - pkt->bth_off < ROCE_BTH_LEN + ROCE_ICRC_LEN)
		return ROCE_PARSE_TRUNCATED;
	bth = frame + pkt->bth_off;
	pkt->opcode = bth[0];
	pkt->se = (bth[1] & ROCE_BTH_SE) != 0;
	pkt->mig = (bth[1] & ROCE_BTH_MIG) != 0;
	pkt->pad = (bth[1] & ROCE_BTH_PAD_MASK) >> ROCE_BTH_PAD_SHIFT;
	pkt->tver = bth[1] & ROCE_BTH_TVER_MASK;
	pkt->pkey = rb_get16(bth + 2);
	pkt->fecn = (bth[4] & ROCE_BTH_FECN) != 0;
	pkt->becn = (bth[4] & ROCE_BTH_BECN) != 0;
	pkt->resv8a_low = bth[4] & 0x3F;
	pkt->dqpn = rb_get24(bth + 5);
	pkt->ackreq = (bth[8] & ROCE_BTH_ACKREQ) != 0;
	pkt->resv7 = bth[8] & 0x7F;
	pkt->psn = rb_get24(bth + 9);
	if (pkt->tver != 0)
		return ROCE_PARSE_BAD_TVER;
	pkt->op = roce_opcode_info(pkt->opcode);
	if (pkt->op == NULL)
		return ROCE_PARSE_UNKNOWN_OPCODE;

	pkt->ext_off = (uint16_t)(pkt->bth_off + ROCE_BTH_LEN);
	if (ip_end - pkt->ext_off < (uint32_t)pkt->op->ext_len + ROCE_ICRC_LEN)
		return ROCE_PARSE_TRUNCATED;
	roce_ext_read(frame + pkt->ext_off, pkt);
	pkt->payload_off = (uint16_t)(pkt->ext_off + pkt->op->ext_len);
	pkt->frame_len = ip_end;

	/* Payload plus pad fills whole 4-byte words (IBA 9.2.1: PadCnt). */
	body = ip_end - ROCE_ICRC_LEN - pkt->payload_off;
	if (body % 4 != 0 || pkt->pad > body)
		return ROCE_PARSE_BAD_LENGTH;
	pkt->payload_len = body - pkt->pad;
	if (!(pkt->op->flags & ROCE_OPF_PAYLOAD) && body != 0)
		return ROCE_PARSE_BAD_LENGTH;
	if (pkt->op->fixed_payload && (body != pkt->op->fixed_payload || pkt->pad != 0))
		return ROCE_PARSE_BAD_LENGTH;

	pkt->icrc = roce_icrc_load(frame, ip_end);
	if (flags & ROCE_PARSE_VERIFY_ICRC) {
		if (roce_icrc_compute(frame, pkt->l3_off, ip_end) != pkt->icrc)
			return ROCE_PARSE_BAD_ICRC;
		pkt->icrc_checked = true;
	}
	return ROCE_PARSE_OK;
}

static enum roce_parse_status parse_from_l3(const uint8_t *frame, uint32_t len, uint32_t l3_off,
					    int ip_version, unsigned flags, struct roce_pkt *pkt)
{
	uint32_t hdr_len = ip_version == 4 ? RB_IPV4_LEN : RB_IPV6_LEN;
	uint32_t dgram_len = 0;
	enum roce_parse_status st;

	pkt->l3_off = (uint16_t)l3_off;
	if (len - l3_off < hdr_len)
		return ROCE_PARSE_TRUNCATED;
	if (ip_version == 4)
		st = parse_ipv4(frame + l3_off, len - l3_off, pkt, &dgram_len);
	else
		st = parse_ipv6(frame + l3_off, len - l3_off, pkt, &dgram_len);
	if (st != ROCE_PARSE_OK)
		return st;
	return parse_l4(frame, l3_off + hdr_len, l3_off + dgram_len, flags, pkt);
}

enum roce_parse_status roce_parse(const uint8_t *frame, uint32_t len, unsigned flags,
				  struct roce_pkt *pkt)
{
	uint32_t off = RB_ETH_LEN;
	uint16_t type;

	memset(pkt, 0, sizeof(*pkt));
	if (frame == NULL || len < RB_ETH_LEN)
		return ROCE_PARSE_TRUNCATED;
	memcpy(pkt->path.dst_mac, frame, 6);
	memcpy(pkt->path.src_mac, frame + 6, 6);
	type = rb_get16(frame + 12);
	if (type == ROCE_ETH_TYPE_VLAN) {
		if (len < RB_ETH_LEN + RB_VLAN_LEN)
			return ROCE_PARSE_TRUNCATED;
		pkt->path.has_vlan = true;
		pkt->path.vlan_tci = rb_get16(frame + 14);
		type = rb_get16(frame + 16);
		off += RB_VLAN_LEN;
	}
	if (type == ROCE_ETH_TYPE_IPV4)
		return parse_from_l3(frame, len, off, 4, flags, pkt);
	if (type == ROCE_ETH_TYPE_IPV6)
		return parse_from_l3(frame, len, off, 6, flags, pkt);
	return ROCE_PARSE_NOT_IP;
}

enum roce_parse_status roce_parse_ip(const uint8_t *ip, uint32_t len, unsigned flags,
				     struct roce_pkt *pkt)
{
	int version;

	memset(pkt, 0, sizeof(*pkt));
	if (ip == NULL || len < 1)
		return ROCE_PARSE_TRUNCATED;
	version = ip[0] >> 4;
	if (version != 4 && version != 6)
		return ROCE_PARSE_BAD_IP_VERSION;
	return parse_from_l3(ip, len, 0, version, flags, pkt);
}
