/* SPDX-License-Identifier: BSD-3-Clause */
#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../../emulator/wire/roce_wire.h"
#include "../port/port_test_util.h"

uint8_t h_timeout = 14;
uint8_t h_rd_atomic = 16;

static int node_up(struct node *n, const char *spec, const char *ip4, const char *ip6,
		   const char *mac, const char *capture, const char *const *opts)
{
	struct rocemu_port_config cfg;
	char err[256];
	int rc;

	memset(n, 0, sizeof(*n));
	if (ptu_config(&cfg, spec, ip4, mac, err, sizeof(err)) ||
	    rocemu_port_config_set(&cfg, "ip", ip6, err, sizeof(err))) {
		fprintf(stderr, "config: %s\n", err);
		return -EINVAL;
	}
	if (capture && rocemu_port_config_set(&cfg, "capture", capture, err, sizeof(err))) {
		fprintf(stderr, "config: %s\n", err);
		return -EINVAL;
	}
	for (unsigned i = 0; opts && opts[i]; i += 2) {
		if (rocemu_port_config_set(&cfg, opts[i], opts[i + 1], err, sizeof(err))) {
			fprintf(stderr, "config: %s\n", err);
			return -EINVAL;
		}
	}
	rc = rocemu_engine_create(&cfg, &n->e, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "engine: %s\n", err);
		return rc;
	}
	n->gid4_index = n->gid6_index = -1;
	for (unsigned i = 0; i < rocemu_port_gid_count(rocemu_engine_port(n->e)); i++) {
		uint8_t g[16];

		rocemu_port_gid(rocemu_engine_port(n->e), i, g);
		if (roce_gid_is_v4mapped(g) && n->gid4_index < 0) {
			n->gid4_index = (int)i;
			memcpy(n->gid4, g, 16);
		} else if (!roce_gid_is_v4mapped(g) && g[0] != 0xfe && n->gid6_index < 0) {
			n->gid6_index = (int)i;
			memcpy(n->gid6, g, 16);
		}
	}
	if (rocemu_pd_alloc(n->e, &n->pd) ||
	    rocemu_cq_create(n->e, 65536, NULL, NULL, NULL, &n->scq) ||
	    rocemu_cq_create(n->e, 65536, NULL, NULL, NULL, &n->rcq))
		return -ENOMEM;
	return 0;
}

int h_setup(struct node *a, struct node *b, const char *pair, const char *capture)
{
	return h_setup_opts(a, b, pair, capture, NULL, NULL);
}

int h_setup_opts(struct node *a, struct node *b, const char *pair, const char *capture,
		 const char *const *opts_a, const char *const *opts_b)
{
	char spec[64];
	int rc;

	rc = rocemu_eal_init();
	if (rc < 0) {
		fprintf(stderr, "skip: EAL: %s\n", rocemu_eal_error());
		return 77;
	}
	snprintf(spec, sizeof(spec), "ring:%s:a", pair);
	rc =
	    node_up(a, spec, "10.77.0.1/24", "fd00:77::1/64", "02:00:00:77:00:01", capture, opts_a);
	if (rc < 0)
		return rc;
	snprintf(spec, sizeof(spec), "ring:%s:b", pair);
	return node_up(b, spec, "10.77.0.2/24", "fd00:77::2/64", "02:00:00:77:00:02", NULL, opts_b);
}

static void node_down(struct node *n)
{
	if (!n->e)
		return;
	rocemu_engine_destroy(n->e);
	n->e = NULL;
}

void h_teardown(struct node *a, struct node *b)
{
	node_down(a);
	node_down(b);
}

struct rocemu_qp *h_qp(struct node *n, enum ibv_qp_type type, uint32_t depth,
		       struct rocemu_srq *srq)
{
	struct rocemu_qp_init init = {
	    .qp_type = type,
	    .send_cq = n->scq,
	    .recv_cq = n->rcq,
	    .srq = srq,
	    .cap = {.max_send_wr = depth,
		    .max_recv_wr = depth,
		    .max_send_sge = 32,
		    .max_recv_sge = 32,
		    .max_inline_data = 256},
	};
	struct rocemu_qp *qp = NULL;

	if (rocemu_qp_create(n->pd, &init, &qp) < 0)
		return NULL;
	return qp;
}

static int to_init(struct rocemu_qp *qp, unsigned access, enum ibv_qp_type type, uint32_t qkey)
{
	struct ibv_qp_attr a = {0};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	if (type == IBV_QPT_UD) {
		a.qkey = qkey;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = access;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	return rocemu_qp_modify(qp, &a, mask);
}

static int half_connect(struct node *self, struct rocemu_qp *qp, struct node *peer,
			uint32_t peer_qpn, enum ibv_mtu mtu, uint32_t sq_psn, uint32_t rq_psn,
			unsigned access, bool v6)
{
	struct ibv_qp_attr rtr = {
	    .qp_state = IBV_QPS_RTR,
	    .path_mtu = mtu,
	    .dest_qp_num = peer_qpn,
	    .rq_psn = rq_psn,
	    .max_dest_rd_atomic = h_rd_atomic,
	    .min_rnr_timer = 1,
	    .ah_attr = {
		.is_global = 1,
		.port_num = 1,
		.grh = {.hop_limit = 64,
			.sgid_index = (uint8_t)(v6 ? self->gid6_index : self->gid4_index)}}};
	struct ibv_qp_attr rts = {.qp_state = IBV_QPS_RTS,
				  .sq_psn = sq_psn,
				  .timeout = h_timeout,
				  .retry_cnt = 7,
				  .rnr_retry = 7,
				  .max_rd_atomic = h_rd_atomic};
	int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	int rts_mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	struct ibv_qp_attr q = {0};
	struct ibv_qp_init_attr init;
	int rc;

	rocemu_qp_query(qp, &q, 0, &init);
	if (init.qp_type == IBV_QPT_RC) {
		rtr_mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		rts_mask |=
		    IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	memcpy(rtr.ah_attr.grh.dgid.raw, v6 ? peer->gid6 : peer->gid4, 16);
	rc = to_init(qp, access, init.qp_type, 0);
	if (!rc)
		rc = rocemu_qp_modify(qp, &rtr, rtr_mask);
	if (!rc)
		rc = rocemu_qp_modify(qp, &rts, rts_mask);
	return rc;
}

int h_connect(struct node *a, struct rocemu_qp *qa, struct node *b, struct rocemu_qp *qb,
	      enum ibv_mtu mtu, uint32_t psn_a, uint32_t psn_b, unsigned access, bool v6)
{
	int rc = half_connect(a, qa, b, rocemu_qp_num(qb), mtu, psn_a, psn_b, access, v6);

	if (rc)
		return rc;
	return half_connect(b, qb, a, rocemu_qp_num(qa), mtu, psn_b, psn_a, access, v6);
}

int h_post_wr(struct rocemu_qp *qp, struct rocemu_send_wr wr, void *p, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = {(uintptr_t)p, len, lkey};

	wr.send_flags |= IBV_SEND_SIGNALED;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return rocemu_qp_post_send(qp, &wr);
}

int h_post1(struct rocemu_qp *qp, enum ibv_wr_opcode op, uint64_t id, void *p, uint32_t len,
	    uint32_t lkey, void *raddr, uint32_t rkey)
{
	struct rocemu_send_wr wr = {
	    .wr_id = id, .opcode = op, .remote_addr = (uintptr_t)raddr, .rkey = rkey};

	return h_post_wr(qp, wr, p, len, lkey);
}

int h_ud_up(struct rocemu_qp *qp, uint32_t qkey)
{
	struct ibv_qp_attr a = {0};
	int rc = to_init(qp, 0, IBV_QPT_UD, qkey);

	if (rc)
		return rc;
	a.qp_state = IBV_QPS_RTR;
	rc = rocemu_qp_modify(qp, &a, IBV_QP_STATE);
	if (rc)
		return rc;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x123;
	return rocemu_qp_modify(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int h_poll(struct rocemu_cq *cq, struct rocemu_wc *wc)
{
	uint64_t end = now_ms() + 20000;

	/* Not a timing assertion: a bail-out so a broken engine fails instead of hanging. */
	while (now_ms() < end) {
		int n = rocemu_cq_poll(cq, 1, wc);

		if (n != 0)
			return n;
		usleep(10);
	}
	return -ETIMEDOUT;
}

int h_poll_quiet(struct rocemu_cq *cq, struct rocemu_wc *wc, unsigned ms)
{
	uint64_t end = now_ms() + ms;
	int got = 0;

	while (now_ms() < end) {
		int n = rocemu_cq_poll(cq, 1, wc);

		if (n > 0)
			got += n;
		usleep(100);
	}
	return got;
}

int h_gbuf(struct gbuf *g, size_t len, bool at_end)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t span = (len + (size_t)pg - 1) / (size_t)pg * (size_t)pg;

	if (span == 0)
		span = (size_t)pg;
	g->map_len = span + 2 * (size_t)pg;
	g->map = mmap(NULL, g->map_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (g->map == MAP_FAILED)
		return -errno;
	if (mprotect(g->map + pg, span, PROT_READ | PROT_WRITE) < 0)
		return -errno;
	/* at_end: the buffer ends exactly at the guard page after it. */
	g->p = g->map + pg + (at_end ? span - len : 0);
	g->len = len;
	memset(g->map + pg, 0xEE, span);
	return 0;
}

void h_gbuf_free(struct gbuf *g)
{
	if (g->map && g->map != MAP_FAILED)
		munmap(g->map, g->map_len);
	g->map = NULL;
}

void h_fill(uint8_t *p, size_t len, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

uint64_t h_counter(struct rocemu_engine *e, const char *name)
{
	struct rocemu_counter c[128];
	unsigned n = rocemu_engine_counters(e, c, 128);

	return ptu_counter_in(c, n < 128 ? n : 128, name);
}

void h_teardown_all(struct node *a, struct node *b)
{
	struct node *n[2] = {a, b};

	for (int i = 0; i < 2; i++) {
		if (!n[i]->e)
			continue;
		rocemu_cq_destroy(n[i]->scq);
		rocemu_cq_destroy(n[i]->rcq);
		rocemu_pd_free(n[i]->pd);
	}
	h_teardown(a, b);
}

void h_dump_counters(struct rocemu_engine *e, const char *label)
{
	struct rocemu_counter c[128];
	unsigned n = rocemu_engine_counters(e, c, 128);

	fprintf(stderr, "%s:", label);
	for (unsigned i = 0; i < n && i < 128; i++)
		if (c[i].value)
			fprintf(stderr, " %s=%llu", c[i].name, (unsigned long long)c[i].value);
	fprintf(stderr, "\n");
	rocemu_port_counters_print(rocemu_engine_port(e), stderr);
}

uint32_t h_key(struct rocemu_mr *mr, bool remote)
{
	struct rocemu_mr_info i;

	rocemu_mr_info(mr, &i);
	return remote ? i.rkey : i.lkey;
}
