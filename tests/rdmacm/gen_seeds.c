/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Writes the seed corpus of fuzz_cm (tests/rdmacm/corpus): well-formed
 * exchanges in the record format of fuzz_cm.c, so that the fuzzer starts
 * from every state of the CM. usage: cm_fuzz_seeds DIR
 */
#include <stdio.h>
#include <string.h>

#include "cm_mad.h"
#include "cm_peer.h"

#define PEER 8 /* flags bit 3: from 10.0.0.2 */

static uint8_t buf[16 * 257];
static size_t len;

static void rec(uint8_t flags, const uint8_t *mad)
{
	buf[len++] = flags;
	memcpy(buf + len, mad, CM_MAD_SIZE);
	len += CM_MAD_SIZE;
}

static int save(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/seed-%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len) {
		perror(path);
		return 1;
	}
	fclose(f);
	len = 0;
	return 0;
}

/* A request from the peer 10.0.0.2: SIDR_REQ for the UDP port space, else REQ. */
static void req(uint8_t *mad, uint16_t ps, uint16_t port, uint32_t comm)
{
	if (ps == 0x0111) {
		struct cm_sidr_req s;
		cm_peer_sidr_req(&s, ps, port, comm, 2);
		cm_mad_put_sidr_req(mad, 1, &s);
	} else {
		struct cm_req r;
		cm_peer_req(&r, ps, port, comm, 2, 0x111);
		cm_mad_put_req(mad, 1, &r);
	}
}

int main(int argc, char **argv)
{
	uint8_t m[CM_MAD_SIZE];
	struct cm_ids ids = {0};
	int rc = 0;

	if (argc != 2)
		return 2;
	const char *dir = argv[1];

	/* passive RC: REQ (accept) -> RTU -> DREQ from the peer */
	req(m, 0x0106, 7471, 0x5000);
	rec(PEER, m);
	cm_mad_put_ids(m, 2, 0x0014, &ids);
	rec(PEER | 5, m); /* ids[4] is the new passive id */
	cm_mad_put_ids(m, 3, 0x0015, &ids);
	rec(PEER | 5, m);
	rc |= save(dir, "passive_rc");

	/* passive RC: REQ rejected, then its duplicate */
	req(m, 0x0106, 7471, 0x5001);
	rec(PEER | 0x40, m);
	rec(PEER | 0x40, m);
	rc |= save(dir, "passive_reject");

	/* REQ for nobody's port, then a REQ with a bad CMA header */
	req(m, 0x0106, 1234, 0x5002);
	rec(PEER, m);
	req(m, 0x0106, 7471, 0x5003);
	m[24 + 141] = 0x50;
	rec(PEER, m);
	rc |= save(dir, "req_no_listener");

	/* active RC: REP (establish) -> duplicate REP -> DREQ by us -> DREP */
	struct cm_rep rep = {.local_comm_id = 0x6000,
			     .local_qpn = 0x222,
			     .responder_resources = 1,
			     .initiator_depth = 1};
	cm_mad_put_rep(m, 4, &rep);
	rec(PEER | 3, m);
	rec(PEER | 3 | 0x80, m);
	cm_mad_put_ids(m, 5, 0x0016, &ids);
	rec(PEER | 3, m);
	rc |= save(dir, "active_rc");

	/* active RC: REJ; the retransmission timers */
	struct cm_rej rej = {.reason = 28, .msg_rejected = 0};
	cm_mad_put_rej(m, 6, &rej);
	rec(PEER | 3 | 0x20, m);
	rec(PEER | 0x20, m);
	rc |= save(dir, "active_rej_timers");

	/* UD: SIDR_REQ to the UD listener (accept), SIDR_REP to our SIDR_REQ */
	req(m, 0x0111, 7472, 0x7000);
	rec(PEER, m);
	rec(PEER, m);
	struct cm_sidr_rep srep = {.status = 0, .qpn = 0x333, .qkey = 0x01234567};
	cm_mad_put_sidr_rep(m, 7, &srep);
	rec(PEER | 4, m);
	rc |= save(dir, "ud_sidr");

	/* unknown attributes and a short MAD */
	cm_mad_put_ids(m, 8, 0x0011, &ids);
	rec(PEER, m);
	cm_mad_put_ids(m, 9, 0x0015, &ids);
	buf[len++] = PEER;
	memcpy(buf + len, m, 100);
	len += 100;
	rc |= save(dir, "mra_short");
	return rc;
}
