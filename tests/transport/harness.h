/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test harness for the transport: two engines in one process joined by a
 * net_ring pair ("ring:NAME:a" / "ring:NAME:b"), each with one IPv4 address
 * (10.77.N.1 and .2) and optionally one IPv6 address, a PD and two CQs.
 * Buffers come with PROT_NONE guard pages on both sides.
 */
#ifndef TRANSPORT_HARNESS_H
#define TRANSPORT_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rocemu_engine.h"

struct node {
	struct rocemu_engine *e;
	struct rocemu_pd *pd;
	struct rocemu_cq *scq, *rcq;
	uint8_t gid4[16];
	int gid4_index;
	uint8_t gid6[16];
	int gid6_index;
};

/** A buffer [p, p+len) with inaccessible pages right before and after the page span. */
struct gbuf {
	uint8_t *p;
	size_t len;
	uint8_t *map;
	size_t map_len;
};

/**
 * Bring up two nodes on ring pair `pair`. capture: pcap path for node a
 * (NULL: none). Returns 0, or 77 (skip) when DPDK cannot start here.
 */
int h_setup(struct node *a, struct node *b, const char *pair, const char *capture);
/** The same with extra port options (name, value pairs, NULL-terminated) per node. */
int h_setup_opts(struct node *a, struct node *b, const char *pair, const char *capture,
		 const char *const *opts_a, const char *const *opts_b);
/** Destroy the CQs and PDs of both nodes, then the engines. */
void h_teardown_all(struct node *a, struct node *b);
void h_teardown(struct node *a, struct node *b);

/** Local ACK timeout h_connect gives RC QPs (IBA encoding; default 14 = 67 ms). */
extern uint8_t h_timeout;
/** max_rd_atomic and max_dest_rd_atomic h_connect gives RC QPs (default 16). */
extern uint8_t h_rd_atomic;

struct rocemu_qp *h_qp(struct node *n, enum ibv_qp_type type, uint32_t depth,
		       struct rocemu_srq *srq);
/** RESET -> INIT -> RTR -> RTS for both ends of a connected QP pair. */
int h_connect(struct node *a, struct rocemu_qp *qa, struct node *b, struct rocemu_qp *qb,
	      enum ibv_mtu mtu, uint32_t psn_a, uint32_t psn_b, unsigned access, bool v6);
/** A UD QP to RTS with qkey. */
int h_ud_up(struct rocemu_qp *qp, uint32_t qkey);

/**
 * Post wr, signaled, with the one gather entry [p, p+len) under lkey (wr's
 * own sg_list and num_sge are replaced): rocemu_qp_post_send's result.
 */
int h_post_wr(struct rocemu_qp *qp, struct rocemu_send_wr wr, void *p, uint32_t len, uint32_t lkey);
/** The same for a WR that is op, id and a remote address (NULL and 0 if none). */
int h_post1(struct rocemu_qp *qp, enum ibv_wr_opcode op, uint64_t id, void *p, uint32_t len,
	    uint32_t lkey, void *raddr, uint32_t rkey);

/** Poll until one completion arrives (or ~20 s pass: returns -ETIMEDOUT). */
int h_poll(struct rocemu_cq *cq, struct rocemu_wc *wc);
/** Poll for a while and return how many completions arrived (expect none). */
int h_poll_quiet(struct rocemu_cq *cq, struct rocemu_wc *wc, unsigned ms);

int h_gbuf(struct gbuf *g, size_t len, bool at_end);
void h_gbuf_free(struct gbuf *g);
/** Deterministic pattern. */
void h_fill(uint8_t *p, size_t len, uint32_t seed);

uint64_t h_counter(struct rocemu_engine *e, const char *name);
/** "label:" and e's nonzero engine counters on one stderr line, then its port counters. */
void h_dump_counters(struct rocemu_engine *e, const char *label);

/** Every access right a test buffer may need. */
#define H_ACC_ALL                                                                                  \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)

/** mr's rkey (remote) or lkey. */
uint32_t h_key(struct rocemu_mr *mr, bool remote);

/* harness_cmocka.c, for cmocka tests only (bench/ links harness.c alone): */

/** Register [p, p+len) at its own address on pd (the test fails if that fails). */
struct rocemu_mr *h_reg(struct rocemu_pd *pd, void *p, size_t len, unsigned access);
struct CMUnitTest;
/**
 * main() of a cmocka test over two nodes: start EAL (77, said on stderr,
 * when it cannot start here), then run tests[0..n) as group `name` with
 * h_setup(a, b, pair, capture) before and h_teardown_all after.
 */
int h_run_group(const char *name, const struct CMUnitTest *tests, size_t n, struct node *a,
		struct node *b, const char *pair, const char *capture);

#endif
