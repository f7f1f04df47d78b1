/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Our frames as Wireshark sees them. Builds every opcode over IPv4 and IPv6,
 * with and without 802.1Q, writes them with libpcap to
 * <build>/tests/wire/wire-all-opcodes.pcap, and runs tshark on the file:
 *  - no frame may be malformed or carry an expert error
 *    (`-Y '_ws.malformed || _ws.expert.severity >= error'` prints nothing,
 *    with UDP checksum validation on);
 *  - every frame decodes as InfiniBand (tshark 4.0 decodes UDP port 4791 as
 *    RRoCE by default, pref infiniband.rroce.port; `-d udp.port==4791,rroce`
 *    is not even accepted), with our opcode, destination QP and PSN.
 * tshark runs with the RPC-over-RDMA and Mellanox EoIB dissectors disabled:
 * their heuristics read SEND payloads as their protocols and call an empty
 * payload (a legal 0-byte SEND) "malformed", which says nothing about the
 * RoCE headers. Everything else, UDP checksum validation included, is on.
 * IPv6 frames carry a computed UDP checksum: Wireshark flags a zero UDP
 * checksum over IPv6 as an error (RFC 8200), see roce_udp_checksum().
 * The committed copy in pcaps/wire-all-opcodes.pcap must match what this
 * test writes (refresh it with `cp` from the build dir after a codec change).
 * Exits 77 when tshark is missing.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>
#include <pcap/pcap.h>

#include "roce_wire.h"
#include "wire_test_util.h"

#define MAX_FRAMES 1024
#define TSHARK	   "tshark -n --disable-protocol rpcordma --disable-protocol infiniband.eoib"

struct built {
	struct roce_pkt pkt;
	uint8_t frame[1200];
	uint32_t len;
};

static struct built frames[MAX_FRAMES];
static unsigned n_frames;
static char out_path[4200];

static void build_all(void)
{
	static const uint32_t lens[] = {0, 37, 1024};
	static uint8_t payload[2048];
	uint8_t ops[256];
	unsigned n = wt_known_opcodes(ops), i, l, seed = 0;
	int ipv, vlan;

	for (i = 0; i < n; i++)
		for (ipv = 4; ipv <= 6; ipv += 2)
			for (vlan = 0; vlan <= 1; vlan++)
				for (l = 0; l < 3; l++, seed++) {
					const struct roce_opcode_info *op =
					    roce_opcode_info(ops[i]);
					struct built *b = &frames[n_frames];
					int len;

					if (!(op->flags & ROCE_OPF_PAYLOAD) && l > 0)
						continue;
					if (op->fixed_payload && l > 0)
						continue;
					wt_sample_pkt(&b->pkt, ops[i], ipv, vlan, lens[l], seed);
					wt_fill_payload(payload, b->pkt.payload_len, seed);
					len =
					    wt_build(&b->pkt, payload, b->frame, sizeof(b->frame));
					assert_true(len > 0);
					if (ipv == 6) {
						uint32_t at = (vlan ? 18 : 14) + 40 + 6;

						assert_int_equal(
						    roce_fill_udp_checksum(b->frame, (uint32_t)len,
									   &b->pkt),
						    0);
						b->pkt.path.udp_csum =
						    (uint16_t)(b->frame[at] << 8 |
							       b->frame[at + 1]);
						assert_int_equal(b->pkt.path.udp_csum,
								 roce_udp_checksum(b->frame,
										   vlan ? 18 : 14,
										   (uint32_t)len));
					}
					b->len = (uint32_t)len;
					n_frames++;
				}
}

static int write_pcap(const char *path)
{
	pcap_t *dead = pcap_open_dead(DLT_EN10MB, 65535);
	pcap_dumper_t *d;
	unsigned i;

	if (dead == NULL)
		return -1;
	d = pcap_dump_open(dead, path);
	if (d == NULL) {
		fprintf(stderr, "%s: %s\n", path, pcap_geterr(dead));
		pcap_close(dead);
		return -1;
	}
	for (i = 0; i < n_frames; i++) {
		/* fixed timestamps: the file is reproducible byte for byte */
		struct pcap_pkthdr h = {.ts = {.tv_sec = 1700000000, .tv_usec = (int)i},
					.caplen = frames[i].len,
					.len = frames[i].len};

		pcap_dump((u_char *)d, &h, frames[i].frame);
	}
	pcap_dump_close(d);
	pcap_close(dead);
	return 0;
}

static void test_no_malformed_or_error(void **state)
{
	char cmd[8400], line[512];
	unsigned bad = 0;
	FILE *p;
	int rc;

	(void)state;
	snprintf(cmd, sizeof(cmd),
		 TSHARK " -o udp.check_checksum:TRUE -r '%s' "
			"-Y '_ws.malformed || _ws.expert.severity >= error' 2>/dev/null",
		 out_path);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p) != NULL) {
		print_error("tshark: %s", line);
		bad++;
	}
	rc = pclose(p);
	assert_true(WIFEXITED(rc));
	assert_int_equal(WEXITSTATUS(rc), 0);
	assert_int_equal(bad, 0);
}

static void test_every_frame_is_infiniband(void **state)
{
	char cmd[8400], line[1024];
	unsigned seen = 0;
	FILE *p;
	int rc;

	(void)state;
	snprintf(cmd, sizeof(cmd),
		 TSHARK " -r '%s' -T fields -E separator=/s "
			"-e frame.number -e frame.protocols -e infiniband.bth.opcode "
			"-e infiniband.bth.destqp -e infiniband.bth.psn -e infiniband.bth.padcnt "
			"2>/dev/null",
		 out_path);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p) != NULL) {
		unsigned num, opcode, pad, psn, qp;
		char protos[512];
		const struct roce_pkt *want;

		if (sscanf(line, "%u %511s %u %x %u %u", &num, protos, &opcode, &qp, &psn, &pad) !=
		    6)
			fail_msg("unexpected tshark line: %s", line);
		assert_true(num >= 1 && num <= n_frames);
		want = &frames[num - 1].pkt;
		if (strstr(protos, ":udp:infiniband") == NULL)
			fail_msg("frame %u decodes as %s", num, protos);
		assert_int_equal(opcode, want->opcode);
		assert_int_equal(qp, want->dqpn);
		assert_int_equal(psn, want->psn);
		assert_int_equal(pad, (4 - (want->payload_len & 3)) & 3);
		seen++;
	}
	rc = pclose(p);
	assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
	assert_int_equal(seen, n_frames);
}

/*
 * Headers tshark 4.0 has no dissector for: the XRCETH of XRC requests and
 * the FETH of FLUSH (IBA annex A19). It names the XRC opcodes and shows the
 * bytes after the BTH as "Unknown/Vendor Specific Data" (infiniband.vendor,
 * no malformed flag, no expert error); those bytes must start with the
 * XRCETH (reserved 0, the 24-bit XRC SRQ number), then, for FLUSH, the FETH,
 * then the RETH. ATOMIC WRITE (0x1D) and FLUSH (0x1C) are "Unknown (29/28)"
 * to it; newer Wireshark releases name them.
 */
static void test_xrceth_and_feth_bytes(void **state)
{
	static char line[16384];
	char cmd[8400];
	unsigned checked = 0;
	FILE *p;
	int rc;

	(void)state;
	snprintf(cmd, sizeof(cmd),
		 TSHARK " -r '%s' -T fields -E separator=/s -E aggregator=/s "
			"-e frame.number -e infiniband.vendor 2>/dev/null",
		 out_path);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p) != NULL) {
		const struct roce_pkt *want;
		static char vendor[8192];
		char expect[64], *tok, *save = NULL;
		unsigned num;
		size_t at = 0;

		vendor[0] = 0;
		if (sscanf(line, "%u", &num) != 1)
			fail_msg("unexpected tshark line: %s", line);
		/* the field can occur more than once: take the longest (all the bytes) */
		strtok_r(line, " \n", &save);
		while ((tok = strtok_r(NULL, " \n", &save)) != NULL)
			if (strlen(tok) > strlen(vendor) && strlen(tok) < sizeof(vendor))
				strcpy(vendor, tok);
		assert_true(num >= 1 && num <= n_frames);
		want = &frames[num - 1].pkt;
		if (!(want->op->hdrs & (ROCE_HDR_XRCETH | ROCE_HDR_FETH)))
			continue;
		if (want->op->hdrs & ROCE_HDR_XRCETH) {
			snprintf(expect, sizeof(expect), "00%06x", want->xrc_srqn);
			if (strncmp(vendor + at, expect, 8) != 0)
				fail_msg("frame %u (%s): XRCETH %s expected at %s", num,
					 roce_opcode_name(want->opcode), expect, vendor);
			at += 8;
		}
		if (want->op->hdrs & ROCE_HDR_FETH) {
			snprintf(expect, sizeof(expect), "%08x%016llx", want->feth,
				 (unsigned long long)want->reth.va);
			if (strncmp(vendor + at, expect, 24) != 0)
				fail_msg("frame %u (%s): FETH+RETH %s expected at %s", num,
					 roce_opcode_name(want->opcode), expect, vendor + at);
		}
		checked++;
	}
	rc = pclose(p);
	assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
	assert_true(checked > 50); /* every XRC request and FLUSH, over IPv4/6, VLAN or not */
}

/* tshark names the XRC opcodes as Wireshark does ("Extended Reliable Connection (XRC) - ..."). */
static void test_xrc_opcode_names(void **state)
{
	char cmd[8400], line[512];
	unsigned xrc = 0;
	FILE *p;
	int rc;

	(void)state;
	snprintf(cmd, sizeof(cmd), TSHARK " -r '%s' -V 2>/dev/null | grep 'Opcode: '", out_path);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p) != NULL)
		if (strstr(line, "Opcode: Extended Reliable Connection (XRC) - ") != NULL)
			xrc++;
	rc = pclose(p);
	assert_true(WIFEXITED(rc));
	{
		unsigned want = 0;

		for (unsigned i = 0; i < n_frames; i++)
			if (frames[i].pkt.op->transport == ROCE_TRANSPORT_XRC &&
			    (frames[i].pkt.opcode & 0x1F) < ROCE_OP_FLUSH)
				want++;
		assert_int_equal(xrc, want);
	}
}

/* The copy committed under pcaps/ is what the codec writes today. */
static void test_committed_copy_is_current(void **state)
{
	const char *src = getenv("ROCEMU_SOURCE_DIR");
	char path[4200], err[PCAP_ERRBUF_SIZE];
	struct pcap_pkthdr *h;
	const u_char *data;
	unsigned i = 0;
	pcap_t *p;

	(void)state;
	snprintf(path, sizeof(path), "%s/pcaps/wire-all-opcodes.pcap", src ? src : ".");
	p = pcap_open_offline(path, err);
	if (p == NULL) {
		print_message("no committed copy at %s: %s\n", path, err);
		skip();
	}
	while (pcap_next_ex(p, &h, &data) == 1) {
		if (i >= n_frames || h->caplen != frames[i].len ||
		    memcmp(data, frames[i].frame, frames[i].len) != 0)
			fail_msg("%s frame %u differs from what the codec builds now; "
				 "refresh it with: cp '%s' '%s'",
				 path, i + 1, out_path, path);
		i++;
	}
	pcap_close(p);
	assert_int_equal(i, n_frames);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_committed_copy_is_current),
	    cmocka_unit_test(test_no_malformed_or_error),
	    cmocka_unit_test(test_every_frame_is_infiniband),
	    cmocka_unit_test(test_xrceth_and_feth_bytes),
	    cmocka_unit_test(test_xrc_opcode_names),
	};
	const char *build = getenv("ROCEMU_BUILD_DIR");

	build_all();
	snprintf(out_path, sizeof(out_path), "%s/tests/wire/wire-all-opcodes.pcap",
		 build ? build : ".");
	if (write_pcap(out_path) != 0) {
		snprintf(out_path, sizeof(out_path), "wire-all-opcodes.pcap");
		if (write_pcap(out_path) != 0)
			return 1;
	}
	printf("%u frames written to %s\n", n_frames, out_path);
	if (system("command -v tshark >/dev/null 2>&1") != 0) {
		printf("SKIP: tshark is not installed (apt-get install tshark)\n");
		return 77;
	}
	return cmocka_run_group_tests_name("wire_tshark", tests, NULL, NULL);
}
