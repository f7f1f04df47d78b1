/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The codec on rte_mbufs: the builder writes straight into the mbuf's data
 * room (single segment), the parser reads a linear mbuf.
 */
#include <errno.h>
#include <string.h>

#include <rte_mbuf.h>

#include "roce_mbuf.h"

static uint8_t *prepare(struct rte_mbuf *m, const struct roce_pkt *pkt, uint32_t *crc)
{
	uint32_t frame_len = roce_frame_len(pkt);
	uint8_t *data;
	int hdr_len;

	if (m == NULL || frame_len == 0)
		return NULL;
	rte_pktmbuf_reset(m);
	if (frame_len > rte_pktmbuf_tailroom(m))
		return NULL;
	data = rte_pktmbuf_mtod(m, uint8_t *);
	hdr_len = crc ? roce_build_headers_icrc(data, frame_len, pkt, crc)
		      : roce_build_headers(data, frame_len, pkt);
	if (hdr_len < 0)
		return NULL;
	m->data_len = (uint16_t)frame_len;
	m->pkt_len = frame_len;
	m->l2_len = pkt->path.has_vlan ? 18 : 14;
	m->l3_len = pkt->path.ip_version == 6 ? 40 : 20;
	m->l4_len = 8;
	return data + hdr_len;
}

uint8_t *roce_mbuf_prepare(struct rte_mbuf *m, const struct roce_pkt *pkt)
{
	return prepare(m, pkt, NULL);
}

uint8_t *roce_mbuf_prepare_icrc(struct rte_mbuf *m, const struct roce_pkt *pkt, uint32_t *crc)
{
	return crc ? prepare(m, pkt, crc) : NULL;
}

int roce_mbuf_finish(struct rte_mbuf *m, const struct roce_pkt *pkt)
{
	if (m == NULL || m->nb_segs != 1 || m->data_len != roce_frame_len(pkt))
		return -EINVAL;
	return roce_finish(rte_pktmbuf_mtod(m, uint8_t *), m->data_len, pkt);
}

int roce_mbuf_finish_icrc(struct rte_mbuf *m, const struct roce_pkt *pkt, uint32_t crc)
{
	static const uint8_t zero_pad[3];
	uint8_t *frame = rte_pktmbuf_mtod(m, uint8_t *);
	uint32_t end = roce_header_len(pkt) + pkt->payload_len;
	uint32_t pad = (4 - (pkt->payload_len & 3)) & 3;

	if (m->nb_segs != 1 || m->data_len != roce_frame_len(pkt) ||
	    end + pad + ROCE_ICRC_LEN != m->data_len)
		return -EINVAL;
	memset(frame + end, 0, pad);
	/* the pad's CRC from zeroes of our own, not read back from the frame */
	crc = roce_crc32(crc, zero_pad, pad);
	roce_icrc_store(frame, m->data_len, crc);
	return 0;
}

int roce_mbuf_fill_udp_checksum(struct rte_mbuf *m, const struct roce_pkt *pkt)
{
	if (m == NULL || m->nb_segs != 1)
		return -EINVAL;
	return roce_fill_udp_checksum(rte_pktmbuf_mtod(m, uint8_t *), m->data_len, pkt);
}

int roce_mbuf_build(struct rte_mbuf *m, const struct roce_pkt *pkt, const void *payload)
{
	uint8_t *pay = roce_mbuf_prepare(m, pkt);

	if (pay == NULL) {
		if (m == NULL || roce_frame_len(pkt) == 0)
			return -EINVAL;
		/* prepare reset m: its tailroom is the whole data room now */
		return roce_frame_len(pkt) > rte_pktmbuf_tailroom(m) ? -ENOSPC : -EINVAL;
	}
	if (pkt->payload_len != 0) {
		if (payload != NULL)
			memcpy(pay, payload, pkt->payload_len);
		else
			memset(pay, 0, pkt->payload_len);
	}
	return roce_mbuf_finish(m, pkt);
}

enum roce_parse_status roce_mbuf_parse(struct rte_mbuf *m, unsigned flags, struct roce_pkt *pkt)
{
	if (m == NULL) {
		memset(pkt, 0, sizeof(*pkt));
		return ROCE_PARSE_TRUNCATED;
	}
	if (m->nb_segs > 1 && rte_pktmbuf_linearize(m) != 0) {
		memset(pkt, 0, sizeof(*pkt));
		return ROCE_PARSE_TRUNCATED;
	}
	return roce_parse(rte_pktmbuf_mtod(m, const uint8_t *), m->data_len, flags, pkt);
}
