/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The codec on rte_mbufs (roce_mbuf.h): frames built into an mbuf equal the
 * plain-buffer builder's bytes (also when the ICRC's header CRC comes from the
 * build, roce_mbuf_prepare_icrc), parse back, report the room they need, and a
 * multi-segment frame is linearised before parsing. Needs the EAL (no
 * hugepages, no PCI); exits 77 if it cannot start.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_mbuf.h>

#include "roce_mbuf.h"
#include "wire_test_util.h"

static struct rte_mempool *pool;

/* m holds the plain builder's frame for pkt and payload, parses back with its
 * ICRC verified to pkt; m is freed. */
static void check_frame(struct rte_mbuf *m, const struct roce_pkt *pkt, const uint8_t *payload)
{
	static uint8_t flat[1300];
	struct roce_pkt out;
	int len = wt_build(pkt, payload, flat, sizeof(flat));

	assert_int_equal(rte_pktmbuf_pkt_len(m), len);
	assert_int_equal(rte_pktmbuf_data_len(m), len);
	assert_memory_equal(rte_pktmbuf_mtod(m, uint8_t *), flat, (size_t)len);
	assert_int_equal(roce_mbuf_parse(m, ROCE_PARSE_VERIFY_ICRC, &out), ROCE_PARSE_OK);
	assert_null(wt_pkt_diff(pkt, &out));
	rte_pktmbuf_free(m);
}

static void test_build_every_opcode(void **state)
{
	static uint8_t payload[1100];
	uint8_t ops[256];
	unsigned n = wt_known_opcodes(ops), i;
	int ipv;

	(void)state;
	for (i = 0; i < n; i++)
		for (ipv = 4; ipv <= 6; ipv += 2) {
			struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
			struct roce_pkt pkt;

			assert_non_null(m);
			wt_sample_pkt(&pkt, ops[i], ipv, i & 1, 1021, i);
			wt_fill_payload(payload, pkt.payload_len, i);
			assert_int_equal(roce_mbuf_build(m, &pkt, payload), 0);
			assert_int_equal(m->l2_len, (i & 1) ? 18 : 14);
			assert_int_equal(m->l3_len, ipv == 4 ? 20 : 40);
			assert_int_equal(m->l4_len, 8);
			check_frame(m, &pkt, payload);
		}
}

/* prepare hands out the payload area; finish adds pad and ICRC. */
static void test_prepare_fill_finish(void **state)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
	struct roce_pkt pkt, out;
	uint8_t *pay;

	(void)state;
	assert_non_null(m);
	rte_pktmbuf_append(m, 77); /* prepare resets whatever was there */
	wt_sample_pkt(&pkt, ROCE_OP_SEND_ONLY_IMM, 4, false, 10, 5);
	pay = roce_mbuf_prepare(m, &pkt);
	assert_non_null(pay);
	assert_ptr_equal(pay, rte_pktmbuf_mtod(m, uint8_t *) + roce_header_len(&pkt));
	memset(pay, 0x5A, 10);
	pay[10] = pay[11] = 0xEE; /* pad must come out zero */
	assert_int_equal(roce_mbuf_finish(m, &pkt), 0);
	assert_int_equal(pay[10], 0);
	assert_int_equal(roce_mbuf_parse(m, ROCE_PARSE_VERIFY_ICRC, &out), ROCE_PARSE_OK);
	assert_int_equal(out.payload_len, 10);
	assert_int_equal(out.pad, 2);

	/* the UDP checksum can be added afterwards; the ICRC stays valid */
	assert_int_equal(roce_mbuf_fill_udp_checksum(m, &pkt), 0);
	assert_int_equal(roce_mbuf_parse(m, ROCE_PARSE_VERIFY_ICRC, &out), ROCE_PARSE_OK);
	assert_int_equal(out.path.udp_csum,
			 roce_udp_checksum(rte_pktmbuf_mtod(m, uint8_t *), 14, m->data_len));
	assert_int_not_equal(out.path.udp_csum, 0);

	/* finish refuses an mbuf whose length no longer matches */
	rte_pktmbuf_append(m, 4);
	assert_int_equal(roce_mbuf_finish(m, &pkt), -EINVAL);
	assert_int_equal(roce_mbuf_fill_udp_checksum(m, &pkt), -EINVAL);
	rte_pktmbuf_free(m);
}

static void test_zero_payload_when_null(void **state)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
	struct roce_pkt pkt, out;
	uint32_t k;

	(void)state;
	wt_sample_pkt(&pkt, ROCE_OPCODE_CNP, 6, false, 16, 0);
	memset(rte_pktmbuf_mtod(m, uint8_t *), 0xCC, 200);
	assert_int_equal(roce_mbuf_build(m, &pkt, NULL), 0);
	assert_int_equal(roce_mbuf_parse(m, ROCE_PARSE_VERIFY_ICRC, &out), ROCE_PARSE_OK);
	for (k = 0; k < 16; k++)
		assert_int_equal(rte_pktmbuf_mtod(m, uint8_t *)[out.payload_off + k], 0);
	rte_pktmbuf_free(m);
}

static void test_too_small_data_room(void **state)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
	struct roce_pkt pkt;
	static uint8_t payload[4096];

	(void)state;
	wt_sample_pkt(&pkt, ROCE_OP_SEND_ONLY, 4, false, rte_pktmbuf_tailroom(m), 0);
	assert_null(roce_mbuf_prepare(m, &pkt));
	assert_int_equal(roce_mbuf_build(m, &pkt, payload), -ENOSPC);
	pkt.opcode = 0x15;
	assert_int_equal(roce_mbuf_build(m, &pkt, payload), -EINVAL);
	wt_sample_pkt(&pkt, ROCE_OP_ACK, 4, false, 0, 0);
	pkt.payload_len = 8; /* fits, but an ACK has no payload */
	assert_int_equal(roce_mbuf_build(m, &pkt, payload), -EINVAL);
	assert_null(roce_mbuf_prepare(NULL, &pkt));
	rte_pktmbuf_free(m);
}

/*
 * prepare_icrc's CRC comes from the headers it built on the stack, not from
 * the frame: continued over the payload and finished, it must give the bytes
 * of the plain builder, whose ICRC roce_finish() computes by reading the whole
 * frame. Every opcode, IPv4/IPv6, with and without VLAN, every pad length, in
 * an mbuf full of stale bytes (pad included).
 */
static void test_prepare_icrc_every_opcode(void **state)
{
	static uint8_t payload[1100];
	uint8_t ops[256];
	unsigned n = wt_known_opcodes(ops), i;
	int ipv, vlan;

	(void)state;
	for (i = 0; i < n; i++)
		for (ipv = 4; ipv <= 6; ipv += 2)
			for (vlan = 0; vlan <= 1; vlan++) {
				struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
				struct roce_pkt pkt;
				uint32_t crc = 0, want_crc;
				uint8_t *pay;

				assert_non_null(m);
				memset(rte_pktmbuf_mtod(m, uint8_t *), 0xEE,
				       rte_pktmbuf_tailroom(m));
				wt_sample_pkt(&pkt, ops[i], ipv, vlan, 1021 + (i & 3), i);
				wt_fill_payload(payload, pkt.payload_len, i);
				pay = roce_mbuf_prepare_icrc(m, &pkt, &crc);
				assert_non_null(pay);
				assert_ptr_equal(pay, rte_pktmbuf_mtod(m, uint8_t *) +
							  roce_header_len(&pkt));
				want_crc = roce_icrc_partial(rte_pktmbuf_mtod(m, uint8_t *),
							     vlan ? 18 : 14, roce_header_len(&pkt));
				assert_int_equal(crc, want_crc);
				crc = roce_crc32_copy(crc, pay, payload, pkt.payload_len);
				assert_int_equal(roce_mbuf_finish_icrc(m, &pkt, crc), 0);
				check_frame(m, &pkt, payload);
			}
}

/* prepare_icrc needs somewhere to put the CRC; it fails as prepare does. */
static void test_prepare_icrc_refusals(void **state)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
	struct roce_pkt pkt;
	uint32_t crc = 0x1234;

	(void)state;
	assert_non_null(m);
	wt_sample_pkt(&pkt, ROCE_OP_WRITE_ONLY, 4, false, 64, 3);
	assert_null(roce_mbuf_prepare_icrc(m, &pkt, NULL));
	assert_null(roce_mbuf_prepare_icrc(NULL, &pkt, &crc));
	wt_sample_pkt(&pkt, ROCE_OP_SEND_ONLY, 4, false, rte_pktmbuf_tailroom(m), 0);
	assert_null(roce_mbuf_prepare_icrc(m, &pkt, &crc));
	pkt.opcode = 0x15;
	pkt.payload_len = 8;
	assert_null(roce_mbuf_prepare_icrc(m, &pkt, &crc));
	assert_int_equal(crc, 0x1234); /* untouched on failure */
	rte_pktmbuf_free(m);
}

/* A frame arriving in two segments is linearised, then parsed. */
static void test_multi_segment_parse(void **state)
{
	static uint8_t payload[1024], flat[1200];
	struct rte_mbuf *a = rte_pktmbuf_alloc(pool), *b = rte_pktmbuf_alloc(pool);
	struct roce_pkt pkt, out;
	int len;

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	wt_sample_pkt(&pkt, ROCE_OP_WRITE_FIRST, 6, true, 1024, 9);
	wt_fill_payload(payload, 1024, 9);
	len = wt_build(&pkt, payload, flat, sizeof(flat));
	memcpy(rte_pktmbuf_append(a, 100), flat, 100);
	memcpy(rte_pktmbuf_append(b, (uint16_t)(len - 100)), flat + 100, (size_t)len - 100);
	assert_int_equal(rte_pktmbuf_chain(a, b), 0);
	assert_int_equal(a->nb_segs, 2);
	assert_int_equal(roce_mbuf_finish(a, &pkt), -EINVAL); /* single segment only */
	assert_int_equal(roce_mbuf_parse(a, ROCE_PARSE_VERIFY_ICRC, &out), ROCE_PARSE_OK);
	assert_int_equal(a->nb_segs, 1);
	assert_null(wt_pkt_diff(&pkt, &out));
	assert_memory_equal(rte_pktmbuf_mtod(a, uint8_t *), flat, (size_t)len);
	rte_pktmbuf_free(a);

	assert_int_equal(roce_mbuf_parse(NULL, 0, &out), ROCE_PARSE_TRUNCATED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_build_every_opcode),
	    cmocka_unit_test(test_prepare_fill_finish),
	    cmocka_unit_test(test_zero_payload_when_null),
	    cmocka_unit_test(test_too_small_data_room),
	    cmocka_unit_test(test_multi_segment_parse),
	    cmocka_unit_test(test_prepare_icrc_every_opcode),
	    cmocka_unit_test(test_prepare_icrc_refusals),
	};
	char prefix[64], dir[4096];
	char *eal_argv[] = {"test_wire_mbuf",
			    "--no-huge",
			    "--no-shconf",
			    "-m",
			    "64",
			    "--no-pci",
			    "--no-telemetry",
			    "--log-level=error",
			    "-l",
			    "0",
			    "--file-prefix",
			    prefix};
	int rc;

	snprintf(prefix, sizeof(prefix), "wiretest%d", (int)getpid());
	if (rte_eal_init((int)(sizeof(eal_argv) / sizeof(eal_argv[0])), eal_argv) < 0) {
		printf("SKIP: rte_eal_init failed: %s\n", rte_strerror(rte_errno));
		return 77;
	}
	snprintf(dir, sizeof(dir), "%s", rte_eal_get_runtime_dir());
	pool = rte_pktmbuf_pool_create("wire_test", 63, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
				       SOCKET_ID_ANY);
	if (pool == NULL) {
		printf("SKIP: no mbuf pool: %s\n", rte_strerror(rte_errno));
		rte_eal_cleanup();
		wt_remove_dir(dir);
		return 77;
	}
	rc = cmocka_run_group_tests_name("wire_mbuf", tests, NULL, NULL);
	rte_mempool_free(pool);
	rte_eal_cleanup();
	if (strstr(dir, "wiretest") != NULL)
		wt_remove_dir(dir);
	return rc;
}
