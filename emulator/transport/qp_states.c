/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The named protocol states of the responder and the completer: their names,
 * their tables of legal transitions, the one function every change goes
 * through, and its trace point (rocemu_engine_set_trace).
 *
 * The responder has two machines, because a PSN gap and a message in
 * progress are independent (a sequence NAK can go in the middle of a SEND,
 * and an RNR NAK for the LAST of a WRITE with immediate leaves the WRITE
 * open): resp-msg, where in the message stream it is (RC and UC), and
 * resp-seq, which NAK it has sent for a gap (RC). The completer has one,
 * comp: whether a probe waits for its answer and whether it went back for
 * lost READ responses (or after a timeout), which can both hold at once.
 * RESET puts each machine in its state 0 (qp_reset clears them).
 *
 * An illegal change is counted (illegal_state_transitions) and made anyway,
 * as the memif link does: the code is the authority, the table the check.
 */
#include <stdio.h>

#include "rocemu_transport.h"

#define TO(s) (1u << (s))

static const char *const resp_msg_names[RESP_MSG_STATES] = {
    [RESP_MSG_IDLE] = "IDLE",
    [RESP_MSG_SEND] = "SEND",
    [RESP_MSG_WRITE] = "WRITE",
    [RESP_MSG_UC_DROP] = "UC_DROP",
};

/* A message ends (LAST placed, aborted, failed) before another begins: SEND
 * and WRITE never follow each other directly, and a UC message dropped is
 * over (IDLE) before the FIRST or ONLY that ends the drop is placed. */
static const unsigned resp_msg_next[RESP_MSG_STATES] = {
    [RESP_MSG_IDLE] = TO(RESP_MSG_SEND) | TO(RESP_MSG_WRITE) | TO(RESP_MSG_UC_DROP),
    [RESP_MSG_SEND] = TO(RESP_MSG_IDLE) | TO(RESP_MSG_UC_DROP),
    [RESP_MSG_WRITE] = TO(RESP_MSG_IDLE) | TO(RESP_MSG_UC_DROP),
    [RESP_MSG_UC_DROP] = TO(RESP_MSG_IDLE),
};

static const char *const resp_seq_names[RESP_SEQ_STATES] = {
    [RESP_SEQ_IN_ORDER] = "IN_ORDER",
    [RESP_SEQ_NAKED] = "NAKED",
    [RESP_SEQ_RNR_NAKED] = "RNR_NAKED",
};

/* Either NAK is answered by the expected PSN arriving; an RNR NAK is sent
 * for an in-order packet only, so never while a sequence NAK is out. */
static const unsigned resp_seq_next[RESP_SEQ_STATES] = {
    [RESP_SEQ_IN_ORDER] = TO(RESP_SEQ_NAKED) | TO(RESP_SEQ_RNR_NAKED),
    [RESP_SEQ_NAKED] = TO(RESP_SEQ_IN_ORDER),
    [RESP_SEQ_RNR_NAKED] = TO(RESP_SEQ_IN_ORDER),
};

static const char *const comp_names[COMP_STATES] = {
    [COMP_STEADY] = "STEADY",
    [COMP_PROBING] = "PROBING",
    [COMP_REREAD] = "REREAD",
    [COMP_REREAD_PROBING] = "REREAD_PROBING",
};

/* One thing changes at a time: a probe goes or is answered (or dropped by a
 * go-back), a go-back starts a re-read, progress ends it. */
static const unsigned comp_next[COMP_STATES] = {
    [COMP_STEADY] = TO(COMP_PROBING) | TO(COMP_REREAD),
    [COMP_PROBING] = TO(COMP_STEADY) | TO(COMP_REREAD_PROBING),
    [COMP_REREAD] = TO(COMP_STEADY) | TO(COMP_REREAD_PROBING),
    [COMP_REREAD_PROBING] = TO(COMP_PROBING) | TO(COMP_REREAD),
};

static const struct sm_table {
	const char *name;
	const char *topic; /* of its trace lines */
	unsigned n;
	const char *const *names;
	const unsigned *next;
} machines[ROCEMU_SM_COUNT] = {
    [ROCEMU_SM_RESP_MSG] = {"resp-msg", "resp", RESP_MSG_STATES, resp_msg_names, resp_msg_next},
    [ROCEMU_SM_RESP_SEQ] = {"resp-seq", "resp", RESP_SEQ_STATES, resp_seq_names, resp_seq_next},
    [ROCEMU_SM_COMP] = {"comp", "comp", COMP_STATES, comp_names, comp_next},
};

const char *rocemu_sm_name(enum rocemu_sm m)
{
	return (unsigned)m < ROCEMU_SM_COUNT ? machines[m].name : "?";
}

unsigned rocemu_sm_states(enum rocemu_sm m)
{
	return (unsigned)m < ROCEMU_SM_COUNT ? machines[m].n : 0;
}

const char *rocemu_sm_state_name(enum rocemu_sm m, unsigned s)
{
	if ((unsigned)m >= ROCEMU_SM_COUNT || s >= machines[m].n || !machines[m].names[s])
		return "?";
	return machines[m].names[s];
}

bool rocemu_sm_legal(enum rocemu_sm m, unsigned from, unsigned to)
{
	if ((unsigned)m >= ROCEMU_SM_COUNT || from >= machines[m].n || to >= machines[m].n)
		return false;
	return (machines[m].next[from] & TO(to)) != 0;
}

void rocemu_sm_change(struct rocemu_qp *qp, enum rocemu_sm m, unsigned from, unsigned to,
		      const char *why)
{
	struct rocemu_engine *e = qp->engine;
	char line[160];

	if (!rocemu_sm_legal(m, from, to))
		ENGINE_COUNT(e, illegal_state_transitions);
	if (!e->trace_fn)
		return;
	snprintf(line, sizeof(line), "qp 0x%06x %s %s -> %s (%s)", qp->qpn, rocemu_sm_name(m),
		 rocemu_sm_state_name(m, from), rocemu_sm_state_name(m, to), why);
	e->trace_fn(e->trace_arg, machines[m].topic, line);
}

void rocemu_engine_set_trace(struct rocemu_engine *e, rocemu_trace_fn fn, void *arg)
{
	rocemu_engine_lock(e);
	e->trace_fn = fn;
	e->trace_arg = arg;
	rocemu_engine_unlock(e);
}
