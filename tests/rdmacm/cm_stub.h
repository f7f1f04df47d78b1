/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * rocemu's CM state machine (verbs-provider/rdmacm/cma.c, cm_mad.c, addr.c)
 * without an engine: a stand-in for device.c with one fake device
 * (GIDs ::ffff:10.0.0.1 at index 1, port MTU 1024) whose GSI sends are
 * recorded instead of transmitted, and a clock the test moves. Used by the
 * hostile-peer test and the CM fuzz target.
 */
#ifndef ROCEMU_TEST_CM_STUB_H
#define ROCEMU_TEST_CM_STUB_H

#include <stdint.h>

#include "cma.h"

#define STUB_SENT_MAX 64

struct stub_sent {
	uint8_t mad[CM_MAD_SIZE];
	union ibv_gid dgid;
	uint8_t tclass; /* the traffic class it was sent with */
	uint8_t sl;	/* and the service level */
};

/* What cma_gsi_send was asked to send since the last stub_reset_sent(). */
extern struct stub_sent stub_sent[STUB_SENT_MAX];
extern unsigned stub_n_sent; /* may exceed STUB_SENT_MAX: only the first ones are kept */
extern uint64_t stub_now_ns;
/* What cma_qp_queued answers for any QP (completions not polled yet). */
extern unsigned stub_queued;

void stub_reset_sent(void);
/** The local address 10.0.0.1 / peer 10.0.0.2 as GIDs (IPv4-mapped). */
void stub_gid_v4(union ibv_gid *g, uint8_t last);
/** A 40-byte GRH area as the GSI QP delivers it for an IPv4 sender 10.0.0.<last>. */
void stub_grh_v4(uint8_t *grh, uint8_t last);
/** Hand one MAD to the CM as the CM thread does (takes the lock). */
void stub_rx(const uint8_t *grh, const uint8_t *mad);
/** Move the clock and run the retransmission timers. */
void stub_advance(uint64_t ns);

#endif /* ROCEMU_TEST_CM_STUB_H */
