/* SPDX-License-Identifier: BSD-3-Clause */
#include <arpa/inet.h>
#include <dirent.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire_test_util.h"

unsigned wt_known_opcodes(uint8_t out[256])
{
	unsigned n = 0, op;

	for (op = 0; op < 256; op++)
		if (roce_opcode_info((uint8_t)op) != NULL)
			out[n++] = (uint8_t)op;
	return n;
}

void wt_fill_payload(uint8_t *p, uint32_t len, unsigned seed)
{
	uint32_t i, x = 0x9E3779B9u * (seed + 1);

	for (i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (uint8_t)(x >> 16);
	}
}

void wt_sample_pkt(struct roce_pkt *pkt, uint8_t opcode, int ip_version, bool vlan,
		   uint32_t payload_len, unsigned seed)
{
	const struct roce_opcode_info *op = roce_opcode_info(opcode);
	static const uint8_t v6_src[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0x99, 0, 0, 0, 0, 0, 0, 0, 0x11};
	static const uint8_t v6_dst[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0x99, 0, 0, 0, 0, 0, 0, 0, 0x12};
	unsigned s = seed & 0xFF;

	memset(pkt, 0, sizeof(*pkt));
	memcpy(pkt->path.dst_mac, "\x02\x00\x00\x00\x00\x12", 6);
	memcpy(pkt->path.src_mac, "\x02\x00\x00\x00\x00\x11", 6);
	pkt->path.dst_mac[4] = (uint8_t)s;
	pkt->path.has_vlan = vlan;
	pkt->path.vlan_tci = vlan ? (uint16_t)((3u << 13) | (100 + s)) : 0;
	pkt->path.ip_version = (uint8_t)ip_version;
	if (ip_version == 4) {
		roce_gid_from_ipv4(pkt->path.src_gid, htonl(0x0A63000Bu));
		roce_gid_from_ipv4(pkt->path.dst_gid, htonl(0x0A630000u | (12 + s)));
		pkt->path.ip_id = (uint16_t)(0x1234 + seed);
	} else {
		memcpy(pkt->path.src_gid, v6_src, 16);
		memcpy(pkt->path.dst_gid, v6_dst, 16);
		pkt->path.dst_gid[14] = (uint8_t)s;
		pkt->path.flow_label = (0x12345u + seed) & 0xFFFFF;
	}
	pkt->path.dont_fragment = ip_version == 4;
	pkt->path.tclass = (uint8_t)(0x68 | (seed & 3)); /* DSCP 26, ECN per seed */
	pkt->path.ttl = (uint8_t)(64 - (seed & 7));
	pkt->path.udp_sport = (uint16_t)(ROCE_UDP_SPORT_MIN + 0x123 + seed);
	pkt->path.udp_dport = ROCE_UDP_PORT;
	pkt->path.udp_csum = 0;

	pkt->opcode = opcode;
	pkt->op = op;
	pkt->se = seed & 1;
	pkt->mig = (seed >> 1) & 1;
	pkt->pkey = ROCE_DEFAULT_PKEY;
	pkt->fecn = (seed >> 2) & 1;
	pkt->becn = opcode == ROCE_OPCODE_CNP ? true : (seed >> 3) & 1;
	pkt->dqpn = (0x000011u + seed * 0x10101u) & 0xFFFFFF;
	pkt->ackreq = (seed >> 4) & 1;
	pkt->psn = (0xFFFFF0u + seed * 7u) & ROCE_PSN_MASK;

	pkt->reth.va = 0x00007F0012345000ull + seed;
	pkt->reth.rkey = 0x1000 + seed;
	pkt->reth.dma_len = 4096 + seed;
	pkt->aeth.syndrome = ROCE_AETH_SYNDROME(ROCE_AETH_ACK, ROCE_AETH_CREDITS_INVALID);
	pkt->aeth.msn = (0x123456u + seed) & 0xFFFFFF;
	pkt->atomic.va = 0x00007F00ABCD0008ull + 8ull * seed;
	pkt->atomic.rkey = 0x2000 + seed;
	pkt->atomic.swap_add = 0x0102030405060708ull + seed;
	pkt->atomic.compare = 0x1112131415161718ull + seed;
	pkt->atomic_orig = 0x2122232425262728ull + seed;
	pkt->imm = 0xDEADBEEFu ^ seed;
	pkt->ieth_rkey = 0x3000 + seed;
	pkt->deth.qkey = 0x11111111u + seed;
	pkt->deth.src_qp = (0x000022u + seed) & 0xFFFFFF;
	/* FETH: placement type and selectivity vary with the seed, reserved bits 0 */
	pkt->feth = ROCE_FETH(1u + (seed % 3), (seed >> 2) & 1);
	pkt->xrc_srqn = (0x000033u + seed * 0x1011u) & 0xFFFFFF;

	if (op == NULL || !(op->flags & ROCE_OPF_PAYLOAD))
		payload_len = 0;
	if (op != NULL && op->fixed_payload)
		payload_len = op->fixed_payload;
	pkt->payload_len = payload_len;
}

int wt_build(const struct roce_pkt *pkt, const uint8_t *payload, uint8_t *buf, uint32_t room)
{
	uint32_t len = roce_frame_len(pkt);
	int hdr, rc;

	if (len == 0)
		return -22;
	if (len > room)
		return -28;
	hdr = roce_build_headers(buf, room, pkt);
	if (hdr < 0)
		return hdr;
	if (pkt->payload_len)
		memcpy(buf + hdr, payload, pkt->payload_len);
	rc = roce_finish(buf, len, pkt);
	return rc < 0 ? rc : (int)len;
}

int wt_rebuild(const struct roce_pkt *parsed, const uint8_t *frame, uint8_t *buf, uint32_t room)
{
	return wt_build(parsed, frame + parsed->payload_off, buf, room);
}

#define CMP(field)                                                                                 \
	do {                                                                                       \
		if (memcmp(&a->field, &b->field, sizeof(a->field)) != 0)                           \
			return #field;                                                             \
	} while (0)

const char *wt_pkt_diff(const struct roce_pkt *a, const struct roce_pkt *b)
{
	const struct roce_opcode_info *op = roce_opcode_info(a->opcode);

	CMP(path.dst_mac);
	CMP(path.src_mac);
	CMP(path.has_vlan);
	if (a->path.has_vlan)
		CMP(path.vlan_tci);
	CMP(path.ip_version);
	CMP(path.src_gid);
	CMP(path.dst_gid);
	CMP(path.tclass);
	CMP(path.ttl);
	if (a->path.ip_version == 6)
		CMP(path.flow_label);
	else
		CMP(path.ip_id);
	CMP(path.udp_sport);
	CMP(path.udp_csum);
	CMP(opcode);
	CMP(se);
	CMP(mig);
	CMP(fecn);
	CMP(becn);
	CMP(ackreq);
	CMP(tver);
	CMP(pkey);
	CMP(resv8a_low);
	CMP(resv7);
	CMP(dqpn);
	CMP(psn);
	CMP(payload_len);
	if (op == NULL)
		return NULL;
	if (op->hdrs & ROCE_HDR_RETH) {
		CMP(reth.va);
		CMP(reth.rkey);
		CMP(reth.dma_len);
	}
	if (op->hdrs & ROCE_HDR_AETH) {
		CMP(aeth.syndrome);
		CMP(aeth.msn);
	}
	if (op->hdrs & ROCE_HDR_ATOMIC_ETH) {
		CMP(atomic.va);
		CMP(atomic.rkey);
		CMP(atomic.swap_add);
		CMP(atomic.compare);
	}
	if (op->hdrs & ROCE_HDR_ATOMIC_ACK_ETH)
		CMP(atomic_orig);
	if (op->hdrs & ROCE_HDR_IMMDT)
		CMP(imm);
	if (op->hdrs & ROCE_HDR_IETH)
		CMP(ieth_rkey);
	if (op->hdrs & ROCE_HDR_DETH) {
		CMP(deth.qkey);
		CMP(deth.src_qp);
	}
	if (op->hdrs & ROCE_HDR_FETH)
		CMP(feth);
	if (op->hdrs & ROCE_HDR_XRCETH)
		CMP(xrc_srqn);
	return NULL;
}

const char *wt_rxe_pcap_dir(char *buf, unsigned len)
{
	const char *src = getenv("ROCEMU_SOURCE_DIR");

	snprintf(buf, len, "%s/pcaps/rxe", src != NULL ? src : ".");
	return buf;
}

void wt_remove_dir(const char *dir)
{
	char path[4096 + 256 + 2];
	struct dirent *e;
	DIR *d = opendir(dir);

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (snprintf(path, sizeof(path), "%.4096s/%.255s", dir, e->d_name) <
		    (int)sizeof(path))
			unlink(path);
	}
	closedir(d);
	rmdir(dir);
}
