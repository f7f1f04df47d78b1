/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CM MAD codec of rocemu's librdmacm: every message survives encode and
 * decode, and the fields sit where IBA vol. 1 12.6 puts them (byte offsets in
 * the 256-byte MAD, checked on the encoded bytes, so a layout slip that the
 * round trip alone would hide is caught), and every field of the codec's
 * table carries random values of its width. Bad headers are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../rdmacm/cm_peer.h"
#include "cm_mad.h"

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 13);
}

static void req_layout(void **state)
{
	(void)state;
	uint8_t mad[CM_MAD_SIZE];
	struct cm_req r, d;
	struct cm_mad_hdr h;

	/* a peer's REQ, with values that tell the fields apart on the wire */
	cm_peer_req(&r, 0x0106, 7471, 0x11223344, 2, 0xabcdef);
	r.local_ca_guid = 0x0102030405060708ull;
	r.responder_resources = 3, r.initiator_depth = 4;
	r.remote_cm_timeout = 18, r.transport = CM_TRANSPORT_UC, r.flow_control = 1; /* byte 43 */
	r.starting_psn = 0x123456, r.local_cm_timeout = 17, r.retry_count = 6;	     /* 44..47 */
	r.path_mtu = 5, r.rnr_retry_count = 7, r.srq = true;			     /* 50, 51 */
	r.local_ack_timeout = 14;
	r.flow_label = 0x9379f, r.packet_rate = 3; /* 88..91 */
	fill(r.local_gid, 16, 1);
	fill(r.remote_gid, 16, 2);
	fill(r.pdata, CM_REQ_PDATA, 3);
	cm_mad_put_req(mad, 0x8877665544332211ull, &r);
	assert_int_equal(cm_mad_parse_hdr(mad, sizeof(mad), &h), 0);
	assert_int_equal(h.attr_id, CM_ATTR_REQ);
	assert_true(h.tid == 0x8877665544332211ull);
	/* offsets from the MAD start: CM data at 24 */
	assert_int_equal(mad[1], 0x07);
	assert_int_equal(mad[24 + 0], 0x11);
	assert_int_equal(mad[24 + 8 + 4], 0x01); /* service ID 00000000 0106 1d2f */
	assert_int_equal(mad[24 + 8 + 5], 0x06);
	assert_int_equal(mad[24 + 8 + 6], 0x1d);
	assert_int_equal(mad[24 + 32], 0xab); /* local QPN */
	assert_int_equal(mad[24 + 35], 3);    /* responder resources */
	assert_int_equal(mad[24 + 39], 4);    /* initiator depth */
	assert_int_equal(mad[24 + 43], 18 << 3 | 1 << 1 | 1);
	assert_int_equal(mad[24 + 44], 0x12); /* starting PSN */
	assert_int_equal(mad[24 + 47], 17 << 3 | 6);
	assert_int_equal(mad[24 + 50], 5 << 4 | 7);
	assert_int_equal(mad[24 + 51], 8 << 4 | 1 << 3);
	assert_memory_equal(mad + 24 + 56, r.local_gid, 16);
	assert_memory_equal(mad + 24 + 72, r.remote_gid, 16);
	/* flow label in the top 20 bits of 88..91, packet rate in the low 6
	 * bits of 91: bytes 93 79 f0 as Linux Soft-RoCE's REQ carries 0x9379f */
	assert_int_equal(mad[24 + 88], 0x93);
	assert_int_equal(mad[24 + 89], 0x79);
	assert_int_equal(mad[24 + 90], 0xf0);
	assert_int_equal(mad[24 + 91], 3);
	assert_int_equal(mad[24 + 93], 64);
	assert_int_equal(mad[24 + 95], 14 << 3);
	assert_memory_equal(mad + 24 + 140, r.pdata, CM_REQ_PDATA); /* after both 44-byte paths */
	cm_mad_get_req(mad, &d);
	assert_memory_equal(&d, &r, sizeof(d));
}

static void rep_rej_ids_layout(void **state)
{
	(void)state;
	uint8_t mad[CM_MAD_SIZE];
	struct cm_rep rep = {.local_comm_id = 1,
			     .remote_comm_id = 2,
			     .local_qpn = 0x12,
			     .starting_psn = 0xfedcba,
			     .responder_resources = 1,
			     .initiator_depth = 2,
			     .target_ack_delay = 15,
			     .flow_control = 1,
			     .rnr_retry_count = 7,
			     .srq = true,
			     .local_ca_guid = 9},
		      drep;
	fill(rep.pdata, CM_REP_PDATA, 4);
	cm_mad_put_rep(mad, 5, &rep);
	assert_int_equal(mad[24 + 15], 0); /* QPN in the upper 24 bits of 12..15 */
	assert_int_equal(mad[24 + 14], 0x12);
	assert_int_equal(mad[24 + 27], 7 << 5 | 1 << 4);
	assert_memory_equal(mad + 24 + 36, rep.pdata, CM_REP_PDATA);
	cm_mad_get_rep(mad, &drep);
	assert_memory_equal(&drep, &rep, sizeof(rep));

	struct cm_rej rej = {.local_comm_id = 3,
			     .remote_comm_id = 4,
			     .msg_rejected = CM_REJ_MSG_REQ,
			     .reason = CM_REJ_INVALID_SERVICE_ID},
		      drej;
	fill(rej.pdata, CM_REJ_PDATA, 5);
	cm_mad_put_rej(mad, 6, &rej);
	assert_int_equal(mad[24 + 11], 8);
	assert_memory_equal(mad + 24 + 84, rej.pdata, CM_REJ_PDATA);
	cm_mad_get_rej(mad, &drej);
	assert_memory_equal(&drej, &rej, sizeof(rej));

	struct cm_ids dreq = {.local_comm_id = 7, .remote_comm_id = 8, .remote_qpn = 0x99}, d;
	cm_mad_put_ids(mad, 9, CM_ATTR_DREQ, &dreq);
	assert_int_equal(mad[24 + 10], 0x99);
	cm_mad_get_ids(mad, CM_ATTR_DREQ, &d);
	assert_int_equal(d.remote_qpn, 0x99);
	assert_int_equal(d.local_comm_id, 7);
	assert_int_equal(d.remote_comm_id, 8);
}

static void sidr_and_cma(void **state)
{
	(void)state;
	uint8_t mad[CM_MAD_SIZE];
	struct cm_sidr_req q = {.request_id = 0x55,
				.pkey = 0xffff,
				.service_id = cma_service_id(0x0111, 7174)},
			   dq;
	struct cma_hdr h = {.ip_version = 4, .src_port = 0x8001}, dh;
	h.src[12] = 10;
	h.dst[12] = 11;
	cma_hdr_put(q.pdata, &h);
	cm_mad_put_sidr_req(mad, 1, &q);
	assert_int_equal(mad[24 + 16 + 1], 0x40); /* IP version nibble */
	cm_mad_get_sidr_req(mad, &dq);
	assert_int_equal(cma_hdr_get(dq.pdata, &dh), 0);
	assert_int_equal(dh.src_port, 0x8001);
	assert_memory_equal(dh.src, h.src, 16);
	uint16_t ps, port;
	assert_int_equal(cma_service_parse(dq.service_id, &ps, &port), 0);
	assert_int_equal(ps, 0x0111);
	assert_int_equal(port, 7174);
	assert_int_equal(cma_service_parse(0x1234, &ps, &port), -22);

	struct cm_sidr_rep r = {.request_id = 0x55,
				.status = CM_SIDR_OK,
				.qpn = 0x42,
				.service_id = q.service_id,
				.qkey = 0x01234567},
			   dr;
	cm_mad_put_sidr_rep(mad, 1, &r);
	assert_int_equal(mad[24 + 10], 0x42);
	assert_int_equal(mad[24 + 23], 0x67);
	cm_mad_get_sidr_rep(mad, &dr);
	assert_memory_equal(&dr, &r, sizeof(r));

	uint8_t bad[4] = {1, 0x60, 0, 0};
	assert_int_equal(cma_hdr_get(bad, &dh), -22); /* CMA version 1 */
}

/* ---- every field of every message, from the codec's own table ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rand64(void)
{
	rng_state ^= rng_state << 13; /* xorshift64 */
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Bit i of the CM message (MSB first, as the IBA tables count). */
static unsigned msg_bit(const uint8_t *mad, unsigned i)
{
	return (mad[24 + i / 8] >> (7 - i % 8)) & 1;
}

static uint64_t msg_bits(const uint8_t *mad, unsigned bit, unsigned width)
{
	uint64_t v = 0;
	for (unsigned i = bit; i < bit + width; i++)
		v = v << 1 | msg_bit(mad, i);
	return v;
}

/* Stores v, which fits, into the unsigned member of f (1, 2, 4 or 8 bytes). */
static void store_member(void *msg, const struct cm_field *f, uint64_t v)
{
	union {
		uint8_t b;
		uint16_t h;
		uint32_t w;
		uint64_t d;
	} u = {.d = v};

	if (f->size == 1)
		u.b = (uint8_t)v;
	else if (f->size == 2)
		u.h = (uint16_t)v;
	else if (f->size == 4)
		u.w = (uint32_t)v;
	memcpy((uint8_t *)msg + f->member, &u, f->size);
}

union any_msg {
	struct cm_req req;
	struct cm_rep rep;
	struct cm_ids ids;
	struct cm_rej rej;
	struct cm_sidr_req sidr_req;
	struct cm_sidr_rep sidr_rep;
};

/*
 * For each message: its fields lie inside the 232-byte CM message without
 * overlapping; random values of each field's width are sent on the bits the
 * table names (read here bit by bit), every other bit of the message is zero,
 * and decoding gives back the struct that was encoded.
 */
static void every_field_round_trips(void **state)
{
	(void)state;
	static const uint16_t attrs[] = {CM_ATTR_REQ,	   CM_ATTR_REP,	    CM_ATTR_RTU,
					 CM_ATTR_REJ,	   CM_ATTR_DREQ,    CM_ATTR_DREP,
					 CM_ATTR_SIDR_REQ, CM_ATTR_SIDR_REP};

	for (size_t a = 0; a < sizeof(attrs) / sizeof(attrs[0]); a++) {
		const struct cm_layout *l = cm_mad_layout(attrs[a]);
		assert_non_null(l);
		const struct cm_field *fields = l->fields;
		size_t n = l->n;
		uint8_t owner[(CM_MAD_SIZE - 24) * 8];

		memset(owner, 0, sizeof(owner));
		for (size_t i = 0; i < n; i++) {
			const struct cm_field *f = &fields[i];
			assert_true(f->bit + f->width <= sizeof(owner));
			if (f->kind == CM_FIELD_UINT)
				assert_true(f->width <= 8u * f->size && f->width <= 64);
			if (f->kind == CM_FIELD_BYTES)
				assert_true(f->bit % 8 == 0 && f->width == 8u * f->size);
			if (f->kind != CM_FIELD_CONST)
				assert_true(f->member + f->size <= l->msg_size);
			for (unsigned b = f->bit; b < f->bit + f->width; b++) {
				assert_int_equal(owner[b], 0); /* no two fields share a bit */
				owner[b] = 1;
			}
		}
		for (int round = 0; round < 200; round++) {
			union any_msg m, d;
			uint64_t v[64];
			uint8_t mad[CM_MAD_SIZE];
			uint64_t tid = rand64();
			struct cm_mad_hdr h;

			assert_true(n <= 64);
			memset(&m, 0, sizeof(m));
			for (size_t i = 0; i < n; i++) {
				const struct cm_field *f = &fields[i];
				v[i] = rand64();
				if (f->width < 64)
					v[i] &= (1ull << f->width) - 1;
				if (f->kind == CM_FIELD_UINT)
					store_member(&m, f, v[i]);
				for (unsigned k = 0; f->kind == CM_FIELD_BYTES && k < f->size; k++)
					((uint8_t *)&m)[f->member + k] = (uint8_t)rand64();
			}
			assert_int_equal(cm_mad_put(mad, tid, attrs[a], &m), 0);
			assert_int_equal(cm_mad_parse_hdr(mad, sizeof(mad), &h), 0);
			assert_int_equal(h.attr_id, attrs[a]);
			assert_true(h.tid == tid);
			for (size_t i = 0; i < n; i++) {
				const struct cm_field *f = &fields[i];
				if (f->kind == CM_FIELD_UINT)
					assert_true(msg_bits(mad, f->bit, f->width) == v[i]);
				else if (f->kind == CM_FIELD_CONST)
					assert_true(msg_bits(mad, f->bit, f->width) == f->value);
				else
					assert_memory_equal(mad + 24 + f->bit / 8,
							    (uint8_t *)&m + f->member, f->size);
			}
			for (unsigned b = 0; b < sizeof(owner); b++)
				if (!owner[b])
					assert_int_equal(msg_bit(mad, b), 0);
			assert_int_equal(cm_mad_get(mad, attrs[a], &d), 0);
			assert_memory_equal(&d, &m, l->msg_size);
		}
	}
	uint8_t mad[CM_MAD_SIZE];
	union any_msg m = {0};
	assert_null(cm_mad_layout(CM_ATTR_MRA));
	assert_int_equal(cm_mad_put(mad, 1, CM_ATTR_MRA, &m), -22);
	assert_int_equal(cm_mad_get(mad, CM_ATTR_MRA, &m), -22);
}

static void bad_headers(void **state)
{
	(void)state;
	uint8_t mad[CM_MAD_SIZE] = {0};
	struct cm_mad_hdr h;
	struct cm_ids m = {0};

	cm_mad_put_ids(mad, 1, CM_ATTR_RTU, &m);
	assert_int_equal(cm_mad_parse_hdr(mad, sizeof(mad), &h), 0);
	assert_int_equal(cm_mad_parse_hdr(mad, 100, &h), -22); /* short */
	mad[1] = 0x04;					       /* not the CM class */
	assert_int_equal(cm_mad_parse_hdr(mad, sizeof(mad), &h), -22);
	mad[1] = 0x07;
	mad[3] = 0x81; /* a response method: CM uses Send only */
	assert_int_equal(cm_mad_parse_hdr(mad, sizeof(mad), &h), -22);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(req_layout),   cmocka_unit_test(rep_rej_ids_layout),
	    cmocka_unit_test(sidr_and_cma), cmocka_unit_test(every_field_round_trips),
	    cmocka_unit_test(bad_headers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
