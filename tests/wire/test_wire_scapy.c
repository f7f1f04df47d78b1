/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Cross-check against an independent encoder: scapy's RoCE layer
 * (scapy.contrib.roce). This test writes the field values of a list of
 * frames (every opcode, IPv4 and IPv6, with and without 802.1Q) to a spec
 * file, runs wire_scapy_frames.py to build them with scapy into a pcap, and
 * then checks that
 *  - rocemu's builder produces the same bytes, ICRC included, and
 *  - rocemu's parser accepts scapy's frames (ICRC verified) and returns the
 *    descriptor the fields came from.
 * Exits 77 when scapy is not installed.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <arpa/inet.h>

#include <cmocka.h>
#include <pcap/pcap.h>

#include "roce_wire.h"
#include "wire_test_util.h"

#define MAX_CASES   512
#define PAYLOAD_MAX 1100

struct frame_case {
	struct roce_pkt pkt;
	bool scapy_udp_csum; /* scapy computes the UDP checksum; compare with ours */
	uint8_t payload[PAYLOAD_MAX];
};

static struct frame_case cases[MAX_CASES];
static unsigned n_cases;
static char spec_path[4200], pcap_path[4200];

/* A real UDP checksum from roce_udp_checksum(); scapy computes its own. */
static void fill_udp_csum(struct frame_case *c)
{
	static uint8_t f[4096];
	int len = wt_build(&c->pkt, c->payload, f, sizeof(f));
	uint16_t l3 = c->pkt.path.has_vlan ? 18 : 14;

	assert_true(len > 0);
	c->pkt.path.udp_csum = roce_udp_checksum(f, l3, (uint32_t)len);
	assert_int_not_equal(c->pkt.path.udp_csum, 0);
	c->scapy_udp_csum = true;
}

static void add_cases(void)
{
	static const uint32_t lens[] = {0, 3, 61, 1024};
	uint8_t ops[256];
	unsigned n = wt_known_opcodes(ops), i, l, seed = 0;
	int ipv;

	for (i = 0; i < n; i++)
		for (ipv = 4; ipv <= 6; ipv += 2)
			for (l = 0; l < sizeof(lens) / sizeof(lens[0]); l++, seed++) {
				struct frame_case *c = &cases[n_cases++];
				const struct roce_opcode_info *op = roce_opcode_info(ops[i]);

				if (!(op->flags & ROCE_OPF_PAYLOAD) && l > 0) {
					n_cases--;
					continue;
				}
				wt_sample_pkt(&c->pkt, ops[i], ipv, seed % 3 == 1, lens[l], seed);
				/* reserved bits and a non-zero UDP checksum now and then */
				if (seed % 5 == 2) {
					c->pkt.resv8a_low = 0x15;
					c->pkt.resv7 = 0x2A;
					c->pkt.path.udp_csum = 0x1234;
				}
				wt_fill_payload(c->payload, c->pkt.payload_len, seed);
				if (seed % 5 == 3 || (ipv == 6 && seed % 2 == 0))
					fill_udp_csum(c);
			}
}

static void gid_text(const struct roce_pkt *pkt, const uint8_t gid[16], char *buf)
{
	if (pkt->path.ip_version == 4)
		inet_ntop(AF_INET, gid + 12, buf, 64);
	else
		inet_ntop(AF_INET6, gid, buf, 64);
}

static void write_spec_line(FILE *f, const struct frame_case *c)
{
	const struct roce_pkt *p = &c->pkt;
	char src[64], dst[64];
	uint32_t i;
	int k;

	gid_text(p, p->path.src_gid, src);
	gid_text(p, p->path.dst_gid, dst);
	fprintf(f, "dst_mac=");
	for (k = 0; k < 6; k++)
		fprintf(f, "%02x", p->path.dst_mac[k]);
	fprintf(f, " src_mac=");
	for (k = 0; k < 6; k++)
		fprintf(f, "%02x", p->path.src_mac[k]);
	fprintf(f,
		" vlan=%d vlan_tci=%u ipv=%u src_ip=%s dst_ip=%s tclass=%u ttl=%u ip_id=%u"
		" flow_label=%u sport=%u udp_csum=%d",
		p->path.has_vlan, p->path.vlan_tci, p->path.ip_version, src, dst, p->path.tclass,
		p->path.ttl, p->path.ip_id, p->path.flow_label, p->path.udp_sport,
		c->scapy_udp_csum ? -1 : (int)p->path.udp_csum);
	fprintf(f,
		" opcode=%u se=%d mig=%d pkey=%u fecn=%d becn=%d resv6=%u dqpn=%u ackreq=%d"
		" resv7=%u psn=%u",
		p->opcode, p->se, p->mig, p->pkey, p->fecn, p->becn, p->resv8a_low, p->dqpn,
		p->ackreq, p->resv7, p->psn);
	fprintf(f, " reth_va=0x%llx reth_rkey=%u reth_len=%u aeth_syn=%u aeth_msn=%u",
		(unsigned long long)p->reth.va, p->reth.rkey, p->reth.dma_len, p->aeth.syndrome,
		p->aeth.msn);
	fprintf(f,
		" atomic_va=0x%llx atomic_rkey=%u atomic_swap=0x%llx atomic_cmp=0x%llx"
		" atomic_orig=0x%llx",
		(unsigned long long)p->atomic.va, p->atomic.rkey,
		(unsigned long long)p->atomic.swap_add, (unsigned long long)p->atomic.compare,
		(unsigned long long)p->atomic_orig);
	fprintf(f, " imm=%u ieth_rkey=%u qkey=%u src_qp=%u feth=%u xrc_srqn=%u payload=", p->imm,
		p->ieth_rkey, p->deth.qkey, p->deth.src_qp, p->feth, p->xrc_srqn);
	if (p->payload_len == 0)
		fputc('-', f);
	for (i = 0; i < p->payload_len; i++)
		fprintf(f, "%02x", c->payload[i]);
	fputc('\n', f);
}

/* Returns 0, 77 (scapy missing) or -1. */
static int run_scapy(void)
{
	const char *build = getenv("ROCEMU_BUILD_DIR");
	const char *python = getenv("PYTHON");
	char cmd[9000];
	FILE *f;
	unsigned i;
	int rc;

	snprintf(spec_path, sizeof(spec_path), "%s/tests/wire/scapy-frames.txt",
		 build ? build : ".");
	snprintf(pcap_path, sizeof(pcap_path), "%s/tests/wire/scapy-frames.pcap",
		 build ? build : ".");
	f = fopen(spec_path, "w");
	if (f == NULL) {
		/* not run from meson: fall back to the current directory */
		snprintf(spec_path, sizeof(spec_path), "scapy-frames.txt");
		snprintf(pcap_path, sizeof(pcap_path), "scapy-frames.pcap");
		f = fopen(spec_path, "w");
	}
	if (f == NULL) {
		perror(spec_path);
		return -1;
	}
	for (i = 0; i < n_cases; i++)
		write_spec_line(f, &cases[i]);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "'%s' '%s' '%s' '%s'", python ? python : "/usr/bin/python3",
		 WIRE_SCAPY_SCRIPT, spec_path, pcap_path);
	rc = system(cmd);
	if (rc == -1 || !WIFEXITED(rc)) {
		fprintf(stderr, "could not run %s\n", cmd);
		return -1;
	}
	if (WEXITSTATUS(rc) == 77)
		return 77;
	if (WEXITSTATUS(rc) == 127) {
		printf("SKIP: %s not found\n", python ? python : "/usr/bin/python3");
		return 77;
	}
	return WEXITSTATUS(rc) == 0 ? 0 : -1;
}

static void describe(const struct roce_pkt *p, char *buf, size_t len)
{
	snprintf(buf, len, "%s ipv%u%s payload %u", roce_opcode_name(p->opcode), p->path.ip_version,
		 p->path.has_vlan ? " vlan" : "", p->payload_len);
}

static void for_each_scapy_frame(void (*check)(const struct frame_case *, const uint8_t *,
					       uint32_t))
{
	char err[PCAP_ERRBUF_SIZE];
	struct pcap_pkthdr *h;
	const u_char *data;
	unsigned i = 0;
	pcap_t *p = pcap_open_offline(pcap_path, err);

	if (p == NULL)
		fail_msg("%s: %s", pcap_path, err);
	while (pcap_next_ex(p, &h, &data) == 1) {
		assert_true(i < n_cases);
		check(&cases[i++], data, h->caplen);
	}
	pcap_close(p);
	assert_int_equal(i, n_cases);
}

static void compare_bytes(const struct frame_case *c, const uint8_t *scapy, uint32_t len)
{
	static uint8_t mine[4096];
	char what[128];
	int n = wt_build(&c->pkt, c->payload, mine, sizeof(mine));
	uint32_t k;

	describe(&c->pkt, what, sizeof(what));
	if (n != (int)len)
		fail_msg("%s: rocemu %d bytes, scapy %u", what, n, len);
	for (k = 0; k < len; k++)
		if (mine[k] != scapy[k])
			fail_msg("%s: byte %u differs: rocemu %02x scapy %02x%s", what, k, mine[k],
				 scapy[k], k >= len - 4 ? " (ICRC)" : "");
}

static void parse_scapy(const struct frame_case *c, const uint8_t *scapy, uint32_t len)
{
	struct roce_pkt out;
	enum roce_parse_status st = roce_parse(scapy, len, ROCE_PARSE_VERIFY_ICRC, &out);
	const char *diff;
	char what[128];

	describe(&c->pkt, what, sizeof(what));
	if (st != ROCE_PARSE_OK)
		fail_msg("%s: scapy frame rejected: %s", what, roce_parse_status_name(st));
	diff = wt_pkt_diff(&c->pkt, &out);
	if (diff != NULL)
		fail_msg("%s: field %s differs from what scapy was given", what, diff);
	assert_memory_equal(scapy + out.payload_off, c->payload, out.payload_len);
}

static void test_rocemu_bytes_equal_scapy(void **state)
{
	(void)state;
	for_each_scapy_frame(compare_bytes);
}

static void test_rocemu_parses_scapy(void **state)
{
	(void)state;
	for_each_scapy_frame(parse_scapy);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rocemu_bytes_equal_scapy),
	    cmocka_unit_test(test_rocemu_parses_scapy),
	};
	int rc;

	add_cases();
	rc = run_scapy();
	if (rc == 77) {
		printf("SKIP: scapy (python3-scapy, scapy.contrib.roce) is not available\n");
		return 77;
	}
	if (rc != 0) {
		fprintf(stderr, "building the frames with scapy failed\n");
		return 1;
	}
	printf("%u frames built by scapy into %s\n", n_cases, pcap_path);
	return cmocka_run_group_tests_name("wire_scapy", tests, NULL, NULL);
}
