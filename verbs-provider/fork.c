/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A child after fork(): the contexts it inherited are its parent's. Their
 * engine's threads were not forked, its locks may be held by threads that
 * are gone, and its port's rings and sockets are shared with the parent, so
 * a verb there could hang or disturb the parent's traffic. Every verb on
 * an inherited context fails instead with EIO (what a disassociated uverbs
 * file answers), saying why once on stderr; ibv_close_device frees the
 * child's copy of the context without touching the engine.
 *
 * The check: a context remembers rocemu_fork_gen when it is opened, and a
 * child handler of pthread_atfork bumps it. The inline verbs reach the
 * context's function tables without the library seeing the call, so the
 * child handler also points the inherited contexts' tables at stubs that
 * fail; it walks the contexts under rocemu_ctx_list_lock, which the prepare
 * handler takes so that no other thread holds it across the fork. The
 * devices forget the parent's engine: a context the child opens itself
 * gets an engine of its own, where the port allows it (not after DPDK
 * started in the parent: rocemu_port_open refuses that, and says so).
 */
#include <stdio.h>
#include <stdlib.h>

#include "provider.h"

unsigned rocemu_fork_gen;

int rocemu_inherited_fail(struct ibv_context *ctx)
{
	static bool said;

	if (!said) {
		said = true;
		fprintf(stderr,
			"rocemu: %s: a context of the parent process used in a child after "
			"fork(): its engine runs in the parent (pid %ld), not here, so every "
			"verb on it fails with EIO; open the device in a new program (exec) "
			"instead\n",
			ctx->device->name, (long)rocemu_vfile_pid(to_vctx(ctx)->file));
	}
	errno = EIO;
	return EIO;
}

void *rocemu_inherited_null(struct ibv_context *ctx)
{
	rocemu_inherited_fail(ctx);
	return NULL;
}

/* The context ops of an inherited context. */
static int dead_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	(void)n;
	(void)wc;
	return -rocemu_inherited_fail(cq->context);
}

static int dead_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	(void)solicited_only;
	return rocemu_inherited_fail(cq->context);
}

static int dead_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	*bad = wr;
	return rocemu_inherited_fail(qp->context);
}

static int dead_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	*bad = wr;
	return rocemu_inherited_fail(qp->context);
}

static int dead_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	*bad = wr;
	return rocemu_inherited_fail(srq->context);
}

static struct ibv_mw *dead_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	(void)type;
	return rocemu_inherited_null(pd->context);
}

static int dead_dealloc_mw(struct ibv_mw *mw)
{
	return rocemu_inherited_fail(mw->context);
}

static int dead_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind)
{
	(void)mw;
	(void)bind;
	return rocemu_inherited_fail(qp->context);
}

/* The verbs_context ops the inline verbs call. */
static int dead_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr,
			   size_t len)
{
	(void)port;
	(void)attr;
	(void)len;
	return rocemu_inherited_fail(ctx);
}

static int dead_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
			  struct ibv_sge *sg, uint32_t n)
{
	(void)advice;
	(void)flags;
	(void)sg;
	(void)n;
	return rocemu_inherited_fail(pd->context);
}

static struct ibv_dm *dead_alloc_dm(struct ibv_context *ctx, struct ibv_alloc_dm_attr *attr)
{
	(void)attr;
	return rocemu_inherited_null(ctx);
}

static int dead_free_dm(struct ibv_dm *dm)
{
	return rocemu_inherited_fail(dm->context);
}

static struct ibv_mr *dead_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t offset,
				     size_t length, unsigned int access)
{
	(void)dm;
	(void)offset;
	(void)length;
	(void)access;
	return rocemu_inherited_null(pd->context);
}

static struct ibv_cq_ex *dead_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *a)
{
	(void)a;
	return rocemu_inherited_null(ctx);
}

static struct ibv_qp *dead_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a)
{
	(void)a;
	return rocemu_inherited_null(ctx);
}

static struct ibv_srq *dead_create_srq_ex(struct ibv_context *ctx, struct ibv_srq_init_attr_ex *a)
{
	(void)a;
	return rocemu_inherited_null(ctx);
}

static struct ibv_xrcd *dead_open_xrcd(struct ibv_context *ctx, struct ibv_xrcd_init_attr *a)
{
	(void)a;
	return rocemu_inherited_null(ctx);
}

static int dead_close_xrcd(struct ibv_xrcd *xrcd)
{
	return rocemu_inherited_fail(xrcd->context);
}

static int dead_get_srq_num(struct ibv_srq *srq, uint32_t *num)
{
	(void)num;
	return rocemu_inherited_fail(srq->context);
}

static struct ibv_qp *dead_open_qp(struct ibv_context *ctx, struct ibv_qp_open_attr *a)
{
	(void)a;
	return rocemu_inherited_null(ctx);
}

static int dead_query_device_ex(struct ibv_context *ctx, const struct ibv_query_device_ex_input *in,
				struct ibv_device_attr_ex *attr, size_t size)
{
	(void)in;
	(void)attr;
	(void)size;
	return rocemu_inherited_fail(ctx);
}

static int dead_query_rt_values(struct ibv_context *ctx, struct ibv_values_ex *v)
{
	(void)v;
	return rocemu_inherited_fail(ctx);
}

static struct ibv_td *dead_alloc_td(struct ibv_context *ctx, struct ibv_td_init_attr *a)
{
	(void)a;
	return rocemu_inherited_null(ctx);
}

static int dead_dealloc_td(struct ibv_td *td)
{
	return rocemu_inherited_fail(td->context);
}

static struct ibv_pd *dead_alloc_parent_domain(struct ibv_context *ctx,
					       struct ibv_parent_domain_init_attr *a)
{
	(void)a;
	return rocemu_inherited_null(ctx);
}

static struct ibv_flow *dead_create_flow(struct ibv_qp *qp, struct ibv_flow_attr *a)
{
	(void)a;
	return rocemu_inherited_null(qp->context);
}

static int dead_destroy_flow(struct ibv_flow *flow)
{
	return rocemu_inherited_fail(flow->context);
}

static int dead_modify_qp_rate_limit(struct ibv_qp *qp, struct ibv_qp_rate_limit_attr *a)
{
	(void)a;
	return rocemu_inherited_fail(qp->context);
}

static void kill_ops(struct rocemu_vcontext *c)
{
	struct ibv_context_ops *o = &c->vctx.context.ops;
	struct verbs_context *v = &c->vctx;

	o->poll_cq = dead_poll_cq;
	o->req_notify_cq = dead_req_notify_cq;
	o->post_send = dead_post_send;
	o->post_recv = dead_post_recv;
	o->post_srq_recv = dead_post_srq_recv;
	o->alloc_mw = dead_alloc_mw;
	o->dealloc_mw = dead_dealloc_mw;
	o->bind_mw = dead_bind_mw;
	v->query_port = dead_query_port;
	v->advise_mr = dead_advise_mr;
	v->alloc_dm = dead_alloc_dm;
	v->free_dm = dead_free_dm;
	v->reg_dm_mr = dead_reg_dm_mr;
	v->create_cq_ex = dead_create_cq_ex;
	v->create_qp_ex = dead_create_qp_ex;
	v->create_srq_ex = dead_create_srq_ex;
	v->open_xrcd = dead_open_xrcd;
	v->close_xrcd = dead_close_xrcd;
	v->get_srq_num = dead_get_srq_num;
	v->open_qp = dead_open_qp;
	v->query_device_ex = dead_query_device_ex;
	v->query_rt_values = dead_query_rt_values;
	v->alloc_td = dead_alloc_td;
	v->dealloc_td = dead_dealloc_td;
	v->alloc_parent_domain = dead_alloc_parent_domain;
	v->ibv_create_flow = dead_create_flow;
	v->ibv_destroy_flow = dead_destroy_flow;
	v->modify_qp_rate_limit = dead_modify_qp_rate_limit;
}

static void before_fork(void)
{
	pthread_mutex_lock(&rocemu_ctx_list_lock);
}

static void after_fork_parent(void)
{
	pthread_mutex_unlock(&rocemu_ctx_list_lock);
}

static void after_fork_child(void)
{
	unsigned n;
	struct rocemu_vdevice **devs = rocemu_devices(&n);

	rocemu_fork_gen++;
	for (unsigned i = 0; i < n; i++) {
		struct rocemu_vdevice *d = devs[i];

		for (struct rocemu_vcontext *c = d->contexts; c; c = c->next)
			kill_ops(c);
		/* the engine is the parent's: a context the child opens needs
		 * its own (and a lock no parent thread holds) */
		pthread_mutex_init(&d->lock, NULL);
		d->engine = NULL;
		d->refs = 0;
	}
	pthread_mutex_unlock(&rocemu_ctx_list_lock);
}

static void watch_fork(void)
{
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

void rocemu_fork_watch(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, watch_fork);
}
