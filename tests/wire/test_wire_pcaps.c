/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Ground truth from another implementation: every RoCEv2 packet in the
 * captures of Linux Soft-RoCE shipped in the repository (pcaps/rxe, pcaps/README.md)
 * parses, its ICRC verifies (with every CRC implementation available here:
 * table, DPDK, pclmul-4x, vpclmul-avx2),
 * and rebuilding it from the parsed descriptor gives the same bytes.
 * Captures are read with libpcap. Their absence is a failure: they are part
 * of the repository.
 */
#define ALLOW_EXPERIMENTAL_API 1

#include <errno.h>
#include <glob.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <pcap/pcap.h>
#include <rte_vect.h>

#include "roce_wire.h"
#include "wire_test_util.h"

static char pcap_dir[4096];
static bool opcode_seen[256];

static bool is_not_roce(enum roce_parse_status st)
{
	return st == ROCE_PARSE_NOT_IP || st == ROCE_PARSE_NOT_UDP ||
	       st == ROCE_PARSE_NOT_ROCE_PORT;
}

/* Returns the number of RoCEv2 packets checked in one capture. */
static unsigned check_capture(const char *path)
{
	static uint8_t rebuilt[16384];
	char err[PCAP_ERRBUF_SIZE];
	struct pcap_pkthdr *h;
	const u_char *data;
	unsigned n = 0, index = 0;
	pcap_t *p;

	p = pcap_open_offline(path, err);
	if (p == NULL)
		fail_msg("%s: %s", path, err);
	assert_int_equal(pcap_datalink(p), DLT_EN10MB);
	while (pcap_next_ex(p, &h, &data) == 1) {
		struct roce_pkt pkt;
		enum roce_parse_status st;
		int len;

		index++;
		assert_int_equal(h->caplen, h->len); /* not snapped */
		st = roce_parse(data, h->caplen, ROCE_PARSE_VERIFY_ICRC, &pkt);
		if (is_not_roce(st))
			continue;
		if (st != ROCE_PARSE_OK)
			fail_msg("%s frame %u: %s", path, index, roce_parse_status_name(st));
		assert_true(pkt.icrc_checked);
		opcode_seen[pkt.opcode] = true;
		len = wt_rebuild(&pkt, data, rebuilt, sizeof(rebuilt));
		if (len != (int)pkt.frame_len || memcmp(rebuilt, data, pkt.frame_len) != 0)
			fail_msg("%s frame %u (%s): rebuild differs", path, index,
				 roce_opcode_name(pkt.opcode));
		n++;
	}
	pcap_close(p);
	return n;
}

static unsigned check_all(void)
{
	char pattern[4200];
	glob_t g;
	unsigned total = 0;
	size_t i;

	snprintf(pattern, sizeof(pattern), "%s/*.pcap", pcap_dir);
	assert_int_equal(glob(pattern, 0, NULL, &g), 0);
	assert_true(g.gl_pathc >= 1);
	for (i = 0; i < g.gl_pathc; i++) {
		unsigned n = check_capture(g.gl_pathv[i]);

		/* each capture is RoCEv2 traffic: an empty result means we skipped it */
		if (n == 0)
			fail_msg("%s: no RoCEv2 packet recognised", g.gl_pathv[i]);
		print_message("%s: %u RoCEv2 packets ok (%s)\n", g.gl_pathv[i], n,
			      roce_icrc_impl_name());
		total += n;
	}
	globfree(&g);
	return total;
}

/* Every capture with one CRC implementation (skipped if it cannot run here). */
static void check_all_with(enum roce_icrc_impl impl)
{
	if (roce_icrc_set_impl(impl) == -ENOTSUP)
		skip();
	assert_true(check_all() > 0);
	roce_icrc_set_impl(ROCE_ICRC_IMPL_AUTO);
}

static void test_captures_table_crc(void **state)
{
	(void)state;
	check_all_with(ROCE_ICRC_IMPL_TABLE);
}

static void test_captures_dpdk_crc(void **state)
{
	(void)state;
	rte_vect_set_max_simd_bitwidth(RTE_VECT_SIMD_256);
	check_all_with(ROCE_ICRC_IMPL_DPDK);
}

static void test_captures_pclmul_crc(void **state)
{
	(void)state;
	check_all_with(ROCE_ICRC_IMPL_PCLMUL);
}

static void test_captures_vpclmul_crc(void **state)
{
	(void)state;
	check_all_with(ROCE_ICRC_IMPL_VPCLMUL);
}

/* The captures hold the traffic their README lists. */
static void test_captures_cover_opcodes(void **state)
{
	static const uint8_t expected[] = {
	    ROCE_OP_SEND_FIRST, ROCE_OP_SEND_MIDDLE,  ROCE_OP_SEND_LAST,
	    ROCE_OP_ACK,	ROCE_OP_WRITE_FIRST,  ROCE_OP_WRITE_MIDDLE,
	    ROCE_OP_WRITE_LAST, ROCE_OP_READ_REQUEST, ROCE_OP_READ_RESP_ONLY,
	    ROCE_OP_FETCH_ADD,	ROCE_OP_ATOMIC_ACK,   ROCE_TRANSPORT_UD | ROCE_OP_SEND_ONLY,
	};
	unsigned i;

	(void)state;
	memset(opcode_seen, 0, sizeof(opcode_seen));
	check_all();
	for (i = 0; i < sizeof(expected); i++)
		if (!opcode_seen[expected[i]])
			fail_msg("no %s in the captures", roce_opcode_name(expected[i]));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_captures_table_crc),
	    cmocka_unit_test(test_captures_dpdk_crc),
	    cmocka_unit_test(test_captures_pclmul_crc),
	    cmocka_unit_test(test_captures_vpclmul_crc),
	    cmocka_unit_test(test_captures_cover_opcodes),
	};
	struct stat st;

	wt_rxe_pcap_dir(pcap_dir, sizeof(pcap_dir));
	if (stat(pcap_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		printf("FAIL: no Soft-RoCE captures at %s (set ROCEMU_SOURCE_DIR to the "
		       "repository; they are in its pcaps/rxe)\n",
		       pcap_dir);
		return 1;
	}
	return cmocka_run_group_tests_name("wire_pcaps", tests, NULL, NULL);
}
