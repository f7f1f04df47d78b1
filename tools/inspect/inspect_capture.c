/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rocemu inspect: from a captured frame to a decoded one. Finds the IP
 * header behind any supported link layer (Ethernet with stacked VLAN tags,
 * Linux cooked v1/v2, raw IP), classifies what is not RoCEv2, and hands the
 * rest to the wire codec. The codec parses without verifying the ICRC so a
 * corrupted frame is still attributed to its QP; the ICRC is checked
 * separately. Frames cut by the capture's snaplen are parsed from a
 * zero-filled copy of their full length so their headers still count, and
 * their ICRC is reported as unchecked rather than bad.
 *
 * rocemu's own records (EtherType 0x88B5, "RCMU", emulator/port/README.md)
 * are read too: a capture point says which port took the capture, and a
 * frame the fault injector dropped is decoded from inside its record.
 * Linux cooked captures say which frames the capturing host sent.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <pcap/pcap.h>

#include "inspect.h"

#ifndef DLT_LINUX_SLL2
#define DLT_LINUX_SLL2 276
#endif
#ifndef DLT_IPV4
#define DLT_IPV4 228
#endif
#ifndef DLT_IPV6
#define DLT_IPV6 229
#endif

#define ETH_TYPE_RCMU	  0x88B5 /* rocemu's records: IEEE 802 local experimental 1 */
#define RCMU_HDR	  (14 + 8)
#define SLL_OUTGOING	  4 /* Linux cooked capture packet type: sent by this host */
#define ETH_TYPE_QINQ	  0x88A8
#define ETH_TYPE_QINQ_OLD 0x9100
#define IPPROTO_UDP_NUM	  17
/** Largest frame the inspector reconstructs (libpcap's own maximum snaplen). */
#define INSP_MAX_FRAME 262144u

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t rd24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

int insp_link_supported(int dlt)
{
	switch (dlt) {
	case DLT_EN10MB:
	case DLT_LINUX_SLL:
	case DLT_LINUX_SLL2:
	case DLT_RAW:
	case DLT_IPV4:
	case DLT_IPV6:
		return 0;
	default:
		return -EPROTONOSUPPORT;
	}
}

static bool is_vlan_type(uint16_t t)
{
	return t == ROCE_ETH_TYPE_VLAN || t == ETH_TYPE_QINQ || t == ETH_TYPE_QINQ_OLD;
}

/*
 * Offset of the IP header and its ethertype; 0 type for raw IP links.
 * Returns -1 when the link header itself is cut.
 */
static int find_l3(struct insp_decoder *d, const uint8_t *data, uint32_t caplen,
		   struct insp_frame *f, uint32_t *l3, uint16_t *type)
{
	uint32_t off;

	switch (d->dlt) {
	case DLT_EN10MB:
		if (caplen < 14)
			return -1;
		*type = rd16(data + 12);
		off = 14;
		break;
	case DLT_LINUX_SLL:
		if (caplen < 16)
			return -1;
		*type = rd16(data + 14);
		f->outgoing = rd16(data) == SLL_OUTGOING;
		off = 16;
		break;
	case DLT_LINUX_SLL2:
		if (caplen < 20)
			return -1;
		*type = rd16(data);
		f->outgoing = data[10] == SLL_OUTGOING;
		off = 20;
		break;
	default: /* raw IP: the version nibble says which */
		if (caplen < 1)
			return -1;
		*type = (data[0] >> 4) == 6 ? ROCE_ETH_TYPE_IPV6 : ROCE_ETH_TYPE_IPV4;
		*l3 = 0;
		return 0;
	}
	while (is_vlan_type(*type)) {
		if (caplen < off + 4)
			return -1;
		if (f->vlans == 0)
			f->vlan_tci = rd16(data + off);
		f->vlans++;
		*type = rd16(data + off + 2);
		off += 4;
	}
	*l3 = off;
	return 0;
}

static void gid_from_v4(uint8_t gid[16], const uint8_t *a)
{
	memset(gid, 0, 10);
	gid[10] = 0xFF;
	gid[11] = 0xFF;
	memcpy(gid + 12, a, 4);
}

/*
 * Read the IP and UDP headers far enough to classify the frame and to find
 * the BTH. Returns the UDP header offset, or 0 when the frame is not RoCEv2
 * (f->cls says why).
 */
static uint32_t peek_l3_l4(const uint8_t *data, uint32_t caplen, uint32_t l3, uint16_t type,
			   struct insp_frame *f)
{
	uint32_t l4;
	uint8_t proto;

	if (type == ROCE_ETH_TYPE_IPV4) {
		if (caplen < l3 + 20) {
			f->cls = INSP_SHORT;
			return 0;
		}
		f->ip_version = 4;
		proto = data[l3 + 9];
		l4 = l3 + (uint32_t)(data[l3] & 0x0F) * 4;
		f->tclass = data[l3 + 1];
		gid_from_v4(f->src_gid, data + l3 + 12);
		gid_from_v4(f->dst_gid, data + l3 + 16);
		/* a later fragment has no UDP header */
		if ((rd16(data + l3 + 6) & 0x1FFF) != 0)
			proto = 0;
	} else if (type == ROCE_ETH_TYPE_IPV6) {
		if (caplen < l3 + 40) {
			f->cls = INSP_SHORT;
			return 0;
		}
		f->ip_version = 6;
		proto = data[l3 + 6];
		l4 = l3 + 40;
		f->tclass = (uint8_t)((rd16(data + l3) >> 4) & 0xFF);
		memcpy(f->src_gid, data + l3 + 8, 16);
		memcpy(f->dst_gid, data + l3 + 24, 16);
	} else {
		f->cls = INSP_NON_IP;
		return 0;
	}
	if (proto != IPPROTO_UDP_NUM) {
		f->cls = INSP_NON_UDP;
		return 0;
	}
	if (caplen < l4 + 8) {
		f->cls = INSP_SHORT;
		return 0;
	}
	f->sport = rd16(data + l4);
	if (rd16(data + l4 + 2) != ROCE_UDP_PORT) {
		f->cls = INSP_UDP_OTHER;
		return 0;
	}
	return l4;
}

static bool ensure_scratch(struct insp_decoder *d, uint32_t len)
{
	uint8_t *p;

	if (d->scratch_len >= len)
		return true;
	p = realloc(d->scratch, len);
	if (!p)
		return false;
	d->scratch = p;
	d->scratch_len = len;
	return true;
}

/* ICRC verification on its own, after a parse that did not verify it. */
static enum insp_icrc check_icrc(const uint8_t *base, const struct roce_pkt *pkt)
{
	uint32_t want = roce_icrc_compute(base, pkt->l3_off, pkt->frame_len);

	return want == roce_icrc_load(base, pkt->frame_len) ? INSP_ICRC_OK : INSP_ICRC_BAD;
}

static void decode_frame(struct insp_decoder *d, const uint8_t *data, uint32_t caplen,
			 uint32_t wirelen, struct insp_frame *f)
{
	uint32_t l3 = 0, l4, full;
	uint16_t type = 0;
	const uint8_t *base;
	bool whole_eth;

	f->caplen = caplen;
	f->wirelen = wirelen < caplen ? caplen : wirelen;
	f->truncated = caplen < f->wirelen;
	f->headers_ok = false;
	f->has_bth = false;
	f->icrc = INSP_ICRC_UNCHECKED;
	f->vlans = 0;
	f->vlan_tci = 0;
	f->status = ROCE_PARSE_OK;
	memset(&f->pkt, 0, sizeof(f->pkt));

	if (find_l3(d, data, caplen, f, &l3, &type) < 0) {
		f->cls = INSP_SHORT;
		return;
	}
	l4 = peek_l3_l4(data, caplen, l3, type, f);
	if (!l4)
		return;

	/* From here on it is RoCEv2: BTH fields straight from the bytes, so a
	 * frame the codec rejects is still attributed to its QP. */
	if (caplen >= l4 + 8 + ROCE_BTH_LEN) {
		const uint8_t *bth = data + l4 + 8;

		f->has_bth = true;
		f->opcode = bth[0];
		f->dqpn = rd24(bth + 5);
		f->psn = rd24(bth + 9);
	}

	base = data;
	full = caplen;
	if (f->truncated) {
		full = f->wirelen > INSP_MAX_FRAME ? INSP_MAX_FRAME : f->wirelen;
		if (!ensure_scratch(d, full)) {
			f->cls = INSP_ROCE_MALFORMED;
			f->status = ROCE_PARSE_TRUNCATED;
			return;
		}
		memcpy(d->scratch, data, caplen);
		memset(d->scratch + caplen, 0, full - caplen);
		base = d->scratch;
	}

	/* The codec knows Ethernet with at most one tag; everything else is
	 * parsed from the IP header on. */
	whole_eth = d->dlt == DLT_EN10MB && f->vlans <= 1 && type != ETH_TYPE_QINQ &&
		    type != ETH_TYPE_QINQ_OLD;
	if (whole_eth)
		f->status = roce_parse(base, full, 0, &f->pkt);
	else
		f->status = roce_parse_ip(base + l3, full - l3, 0, &f->pkt);

	if (f->status != ROCE_PARSE_OK) {
		f->cls = INSP_ROCE_MALFORMED;
		return;
	}
	f->cls = INSP_ROCE;
	/* roce_parse_ip offsets count from the IP header */
	if (!whole_eth)
		base += l3;
	if (f->truncated) {
		/* headers_ok only if every header before the payload was captured */
		f->headers_ok = (uint32_t)f->pkt.payload_off + (whole_eth ? 0 : l3) <= caplen;
		f->icrc = INSP_ICRC_UNCHECKED;
		return;
	}
	f->headers_ok = true;
	f->icrc = check_icrc(base, &f->pkt);
}

/* A capture point's body: MAC, count, reserved, GIDs, name. Bounds-checked. */
static void read_capture_point(const uint8_t *b, uint32_t len, struct insp_capture_point *cp)
{
	unsigned n;
	uint32_t name_off, name_len;

	memset(cp, 0, sizeof(*cp));
	cp->how = "rocemu record";
	if (len < 8)
		return;
	memcpy(cp->mac, b, 6);
	cp->has_mac = true;
	n = b[6];
	if (8 + 16 * n > len)
		n = (len - 8) / 16;
	cp->n = n < INSP_CP_MAX ? n : INSP_CP_MAX;
	for (unsigned i = 0; i < cp->n; i++)
		memcpy(cp->gids[i], b + 8 + 16 * i, 16);
	name_off = 8 + 16 * n;
	name_len = len - name_off < sizeof(cp->name) - 1 ? len - name_off : sizeof(cp->name) - 1;
	for (uint32_t i = 0; i < name_len; i++) /* printable only: it goes into reports */
		cp->name[i] =
		    b[name_off + i] >= 0x20 && b[name_off + i] < 0x7f ? (char)b[name_off + i] : '?';
}

/*
 * rocemu's records, on Ethernet captures: "RCMU", version 1, type, body
 * length. Returns true when the frame was one (f filled).
 */
static bool decode_record(struct insp_decoder *d, const uint8_t *data, uint32_t caplen,
			  uint32_t wirelen, struct insp_frame *f)
{
	uint32_t blen;
	uint8_t type;

	if (d->dlt != DLT_EN10MB || caplen < RCMU_HDR || rd16(data + 12) != ETH_TYPE_RCMU ||
	    memcmp(data + 14, "RCMU", 4) || data[18] != 1)
		return false;
	type = data[19];
	blen = rd16(data + 20);
	if (blen > caplen - RCMU_HDR)
		blen = caplen - RCMU_HDR;
	if ((type == INSP_ANNOT_LOST_TX || type == INSP_ANNOT_LOST_RX) && blen >= 14) {
		/* the lost frame, whole: decoded as if it had been captured */
		decode_frame(d, data + RCMU_HDR, caplen - RCMU_HDR,
			     wirelen > RCMU_HDR ? wirelen - RCMU_HDR : 0, f);
		f->annot = type;
		return true;
	}
	f->cls = INSP_RECORD;
	f->caplen = caplen;
	f->wirelen = wirelen < caplen ? caplen : wirelen;
	f->truncated = caplen < f->wirelen;
	f->has_bth = false;
	f->headers_ok = false;
	f->icrc = INSP_ICRC_UNCHECKED;
	f->status = ROCE_PARSE_OK;
	if (type == INSP_ANNOT_CAPTURE_POINT) {
		f->annot = INSP_ANNOT_CAPTURE_POINT;
		read_capture_point(data + RCMU_HDR, blen, &f->cp);
	}
	return true;
}

void insp_decode(struct insp_decoder *d, const uint8_t *data, uint32_t caplen, uint32_t wirelen,
		 struct insp_frame *f)
{
	f->annot = INSP_ANNOT_NONE;
	f->outgoing = -1;
	if (decode_record(d, data, caplen, wirelen, f))
		return;
	decode_frame(d, data, caplen, wirelen, f);
}

void insp_decoder_free(struct insp_decoder *d)
{
	free(d->scratch);
	d->scratch = NULL;
	d->scratch_len = 0;
}
