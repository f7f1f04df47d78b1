/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Completion queues, the extended CQ (ibv_cq_ex: start/next/end poll and the
 * read functions) and completion channels. A channel is an eventfd in
 * semaphore mode: every notification of an armed CQ adds one count and
 * queues the CQ, ibv_get_cq_event takes one count and dequeues one CQ, so the
 * fd works with poll/epoll exactly like the kernel's.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "provider.h"

#define POLL_CHUNK 16

/* ------------------------------------------------------------------------ */
/* Completion channels                                                        */

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx)
{
	if (rocemu_dead(ctx))
		return rocemu_inherited_null(ctx);
	if (!ctx) {
		errno = EINVAL;
		return NULL;
	}
	struct rocemu_vchannel *ch = calloc(1, sizeof(*ch));
	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	ch->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (ch->ch.fd < 0) {
		int e = errno;
		free(ch);
		errno = e;
		return NULL;
	}
	ch->ch.context = ctx;
	pthread_mutex_init(&ch->lock, NULL);
	return &ch->ch;
}
ROCEMU_PUBLIC(ibv_create_comp_channel)

int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	if (rocemu_dead(ROCEMU_CTX_OF(channel)))
		return rocemu_inherited_fail(ROCEMU_CTX_OF(channel));
	if (!channel)
		return EINVAL;
	struct rocemu_vchannel *ch = (struct rocemu_vchannel *)channel;
	pthread_mutex_lock(&ch->lock);
	bool busy = channel->refcnt > 0;
	pthread_mutex_unlock(&ch->lock);
	if (busy)
		return EBUSY; /* ibv_create_comp_channel(3): CQs still use it */
	close(channel->fd);
	pthread_mutex_destroy(&ch->lock);
	free(ch);
	return 0;
}
ROCEMU_PUBLIC(ibv_destroy_comp_channel)

/* Engine callback (engine lock held): an armed CQ got a completion. */
static void cq_notify(void *arg)
{
	struct rocemu_vcq *cq = arg;
	struct rocemu_vchannel *ch = cq->channel;
	uint64_t one = 1;

	if (!ch)
		return;
	pthread_mutex_lock(&ch->lock);
	if (cq->ch_pending++ == 0) {
		cq->ch_next = NULL;
		if (ch->tail)
			ch->tail->ch_next = cq;
		else
			ch->head = cq;
		ch->tail = cq;
	}
	pthread_mutex_unlock(&ch->lock);
	if (write(ch->ch.fd, &one, sizeof(one)) != sizeof(one))
		return; /* cannot overflow: one count per event */
}

/* Wait until fd is readable, driving progress so a quiet progress thread never stalls us. */
static void wait_readable(struct rocemu_vcontext *c, int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	rocemu_engine_app_blocks(c->engine);
	while (poll(&p, 1, 10) == 0)
		rocemu_engine_progress(c->engine);
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq_out, void **cq_context)
{
	if (rocemu_dead(ROCEMU_CTX_OF(channel)))
		return rocemu_inherited_fail(ROCEMU_CTX_OF(channel)), -1;
	uint64_t v;

	if (!channel || !cq_out || !cq_context) {
		errno = EINVAL;
		return -1;
	}
	struct rocemu_vchannel *ch = (struct rocemu_vchannel *)channel;
	int fl = fcntl(channel->fd, F_GETFL);
	if (fl >= 0 && !(fl & O_NONBLOCK))
		wait_readable(to_vctx(channel->context), channel->fd);
	if (read(channel->fd, &v, sizeof(v)) != sizeof(v))
		return -1; /* EAGAIN on a non-blocking channel with no event */
	pthread_mutex_lock(&ch->lock);
	struct rocemu_vcq *cq = ch->head;
	if (cq)
		cq->comp_reported++; /* the program owes ibv_ack_cq_events for it */
	if (cq && --cq->ch_pending == 0) {
		ch->head = cq->ch_next;
		if (!ch->head)
			ch->tail = NULL;
	}
	pthread_mutex_unlock(&ch->lock);
	if (!cq) {
		errno = EAGAIN;
		return -1;
	}
	*cq_out = (struct ibv_cq *)&cq->cqx;
	*cq_context = cq->cqx.cq_context;
	return 0;
}
ROCEMU_PUBLIC(ibv_get_cq_event)

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	if (!cq)
		return;
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_broadcast(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}
ROCEMU_PUBLIC(ibv_ack_cq_events)

/* ------------------------------------------------------------------------ */
/* Polling                                                                    */

static void wc_from_engine(const struct rocemu_wc *in, struct ibv_wc *out)
{
	memset(out, 0, sizeof(*out));
	out->wr_id = in->wr_id;
	out->status = in->status;
	out->opcode = in->opcode;
	out->vendor_err = in->vendor_err;
	out->byte_len = in->byte_len;
	if (in->wc_flags & IBV_WC_WITH_INV)
		out->invalidated_rkey = in->invalidated_rkey;
	else
		out->imm_data = in->imm_data;
	out->qp_num = in->qp_num;
	out->src_qp = in->src_qp;
	out->wc_flags = in->wc_flags;
	out->pkey_index = in->pkey_index;
	out->sl = in->sl;
	out->slid = in->slid;
}

int rocemu_op_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct rocemu_wc buf[POLL_CHUNK];
	int done = 0;
	bool recv = false;

	if (!ibcq || n < 0 || (n > 0 && !wc))
		return -EINVAL;
	struct rocemu_vcq *cq = (struct rocemu_vcq *)ibcq;
	while (done < n) {
		int want = n - done < POLL_CHUNK ? n - done : POLL_CHUNK;
		int got = rocemu_cq_poll(cq->ecq, want, buf);
		if (got < 0)
			return done ? done : got;
		for (int i = 0; i < got; i++) {
			wc_from_engine(&buf[i], &wc[done + i]);
			recv |= (buf[i].opcode & IBV_WC_RECV) != 0;
		}
		done += got;
		if (got < want)
			break;
	}
	if (recv) /* it answers messages from its CQ (rocemu_port.h) */
		rocemu_port_app_found_recv(cq->ctx->port);
	return done;
}

int rocemu_op_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	if (!ibcq)
		return EINVAL;
	struct rocemu_vcq *cq = (struct rocemu_vcq *)ibcq;
	int rc = rocemu_cq_arm(cq->ecq, solicited_only != 0);
	return rc < 0 ? -rc : 0;
}

/* ------------------------------------------------------------------------ */
/* ibv_cq_ex                                                                  */

static struct rocemu_vcq *to_vcq_ex(struct ibv_cq_ex *c)
{
	return (struct rocemu_vcq *)c;
}

static int cqx_pop(struct ibv_cq_ex *c)
{
	struct rocemu_vcq *cq = to_vcq_ex(c);
	int got = rocemu_cq_poll(cq->ecq, 1, &cq->cur);
	if (got < 0)
		return -got;
	if (got == 0)
		return ENOENT;
	if (cq->cur.opcode & IBV_WC_RECV)
		rocemu_port_app_found_recv(cq->ctx->port);
	c->wr_id = cq->cur.wr_id;
	c->status = cq->cur.status;
	return 0;
}

static int cqx_start_poll(struct ibv_cq_ex *c, struct ibv_poll_cq_attr *attr)
{
	if (rocemu_dead(c->context)) /* the parent's CQ, in a child (fork.c) */
		return rocemu_inherited_fail(c->context);
	if (attr && attr->comp_mask)
		return EINVAL;
	return cqx_pop(c);
}

static int cqx_next_poll(struct ibv_cq_ex *c)
{
	return cqx_pop(c);
}

static void cqx_end_poll(struct ibv_cq_ex *c)
{
	(void)c;
}

static enum ibv_wc_opcode cqx_read_opcode(struct ibv_cq_ex *c)
{
	return to_vcq_ex(c)->cur.opcode;
}

static uint32_t cqx_read_vendor_err(struct ibv_cq_ex *c)
{
	return to_vcq_ex(c)->cur.vendor_err;
}

static uint32_t cqx_read_byte_len(struct ibv_cq_ex *c)
{
	return to_vcq_ex(c)->cur.byte_len;
}

static __be32 cqx_read_imm_data(struct ibv_cq_ex *c)
{
	const struct rocemu_wc *w = &to_vcq_ex(c)->cur;
	return (w->wc_flags & IBV_WC_WITH_INV) ? w->invalidated_rkey : w->imm_data;
}

static uint32_t cqx_read_qp_num(struct ibv_cq_ex *c)
{
	return to_vcq_ex(c)->cur.qp_num;
}

static uint32_t cqx_read_src_qp(struct ibv_cq_ex *c)
{
	return to_vcq_ex(c)->cur.src_qp;
}

static unsigned int cqx_read_wc_flags(struct ibv_cq_ex *c)
{
	return to_vcq_ex(c)->cur.wc_flags;
}

static uint32_t cqx_read_slid(struct ibv_cq_ex *c)
{
	return to_vcq_ex(c)->cur.slid; /* LID-only addressing (docs/verbs-provider.md), else 0 */
}

static uint8_t cqx_read_sl(struct ibv_cq_ex *c)
{
	return to_vcq_ex(c)->cur.sl;
}

static uint8_t cqx_read_dlid_path_bits(struct ibv_cq_ex *c)
{
	(void)c;
	return 0;
}

static uint64_t cqx_read_completion_ts(struct ibv_cq_ex *c)
{
	struct rocemu_vcq *cq = to_vcq_ex(c);
	struct rocemu_caps caps;

	rocemu_engine_caps(cq->ctx->engine, &caps);
	if (!caps.timestamp_hz || caps.timestamp_hz == 1000000000u)
		return cq->cur.timestamp_ns;
	return (uint64_t)((unsigned __int128)cq->cur.timestamp_ns * caps.timestamp_hz /
			  1000000000u);
}

/* rocemu_now_ns() runs on the monotonic clock: shift it onto wall-clock time. */
static uint64_t cqx_read_completion_wallclock_ns(struct ibv_cq_ex *c)
{
	struct timespec rt;

	clock_gettime(CLOCK_REALTIME, &rt);
	int64_t offset = (int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec - (int64_t)rocemu_now_ns();
	return to_vcq_ex(c)->cur.timestamp_ns + (uint64_t)offset;
}

static uint16_t cqx_read_cvlan(struct ibv_cq_ex *c)
{
	(void)c;
	return 0;
}

static uint32_t cqx_read_flow_tag(struct ibv_cq_ex *c)
{
	return to_vcq_ex(c)->cur.flow_tag; /* raw packet QPs: the steering rule's tag */
}

static void cqx_read_tm_info(struct ibv_cq_ex *c, struct ibv_wc_tm_info *tm)
{
	(void)c;
	if (tm)
		memset(tm, 0, sizeof(*tm));
}

static void fill_cq_ex_ops(struct ibv_cq_ex *c)
{
	c->start_poll = cqx_start_poll;
	c->next_poll = cqx_next_poll;
	c->end_poll = cqx_end_poll;
	c->read_opcode = cqx_read_opcode;
	c->read_vendor_err = cqx_read_vendor_err;
	c->read_byte_len = cqx_read_byte_len;
	c->read_imm_data = cqx_read_imm_data;
	c->read_qp_num = cqx_read_qp_num;
	c->read_src_qp = cqx_read_src_qp;
	c->read_wc_flags = cqx_read_wc_flags;
	c->read_slid = cqx_read_slid;
	c->read_sl = cqx_read_sl;
	c->read_dlid_path_bits = cqx_read_dlid_path_bits;
	c->read_completion_ts = cqx_read_completion_ts;
	c->read_cvlan = cqx_read_cvlan;
	c->read_flow_tag = cqx_read_flow_tag;
	c->read_tm_info = cqx_read_tm_info;
	c->read_completion_wallclock_ns = cqx_read_completion_wallclock_ns;
}

/* ------------------------------------------------------------------------ */
/* Create / resize / destroy                                                  */

static struct rocemu_vcq *cq_create(struct ibv_context *ctx, int cqe, void *cq_context,
				    struct ibv_comp_channel *channel, int comp_vector,
				    uint64_t wc_flags, unsigned flags, struct ibv_pd *parent_domain)
{
	struct rocemu_caps caps;

	if (!ctx || cqe < 1 || comp_vector < 0 || comp_vector >= ctx->num_comp_vectors ||
	    (channel && channel->context != ctx)) {
		errno = EINVAL;
		return NULL;
	}
	struct rocemu_vcontext *c = to_vctx(ctx);
	rocemu_engine_caps(c->engine, &caps);
	if ((uint32_t)cqe > caps.max_cqe) {
		errno = EINVAL;
		return NULL;
	}
	struct rocemu_vcq *cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	cq->ctx = c;
	cq->channel = (struct rocemu_vchannel *)channel;
	cq->wc_flags = wc_flags;
	int rc =
	    rocemu_cq_create_ex(c->engine, (uint32_t)cqe, flags,
				rocemu_pd_queue_alloc(parent_domain), cq_notify, cq, cq, &cq->ecq);
	if (rc < 0) {
		free(cq);
		return rocemu_null_errno(rc);
	}
	cq->parent_domain = rocemu_pd_use(parent_domain);
	struct ibv_cq_ex *x = &cq->cqx;
	x->context = ctx;
	x->channel = channel;
	x->cq_context = cq_context;
	x->cqe = (int)rocemu_cq_capacity(cq->ecq);
	pthread_mutex_init(&x->mutex, NULL);
	pthread_cond_init(&x->cond, NULL);
	fill_cq_ex_ops(x);
	if (channel) {
		pthread_mutex_lock(&cq->channel->lock);
		channel->refcnt++;
		pthread_mutex_unlock(&cq->channel->lock);
	}
	return cq;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
			     struct ibv_comp_channel *channel, int comp_vector)
{
	if (rocemu_dead(ctx))
		return rocemu_inherited_null(ctx);
	struct rocemu_vcq *cq = cq_create(ctx, cqe, cq_context, channel, comp_vector, 0, 0, NULL);
	return cq ? (struct ibv_cq *)&cq->cqx : NULL;
}
ROCEMU_PUBLIC(ibv_create_cq)

/* Every wc_flags bit but TM_INFO: no tag-matching SRQ exists here (max_num_tags 0).
 * CVLAN reads 0: the port strips no VLAN (no IBV_RAW_PACKET_CAP_CVLAN_STRIPPING);
 * FLOW_TAG is the tag of the rule that steered a raw packet QP's frame. */
#define ROCEMU_WC_EX_SUPPORTED                                                                     \
	(IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |                             \
	 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK | IBV_WC_EX_WITH_SLID |                     \
	 IBV_WC_EX_WITH_DLID_PATH_BITS | IBV_WC_EX_WITH_CVLAN | IBV_WC_EX_WITH_FLOW_TAG)

struct ibv_cq_ex *rocemu_op_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr)
{
	if (!ctx || !attr) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) {
		errno = EINVAL;
		return NULL;
	}
	uint32_t flags = (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) ? attr->flags : 0;
	struct ibv_pd *pdom =
	    (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) ? attr->parent_domain : NULL;
	if ((attr->wc_flags & ~(uint64_t)ROCEMU_WC_EX_SUPPORTED) ||
	    (flags &
	     ~(uint32_t)(IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* ibv_create_cq_ex(3): with IBV_CQ_INIT_ATTR_MASK_PD, a parent domain of this context */
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
	    (!pdom || pdom->context != ctx || !to_vpd(pdom)->parent_of)) {
		errno = EINVAL;
		return NULL;
	}
	/* SINGLE_THREADED: a hint (one engine lock serves every thread anyway) */
	struct rocemu_vcq *cq = cq_create(
	    ctx, (int)attr->cqe, attr->cq_context, attr->channel, (int)attr->comp_vector,
	    attr->wc_flags,
	    (flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN) ? ROCEMU_CQ_IGNORE_OVERRUN : 0, pdom);
	return cq ? &cq->cqx : NULL;
}

int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	if (rocemu_dead(ROCEMU_CTX_OF(ibcq)))
		return rocemu_inherited_fail(ROCEMU_CTX_OF(ibcq));
	if (!ibcq || cqe < 1)
		return EINVAL;
	struct rocemu_vcq *cq = (struct rocemu_vcq *)ibcq;
	int rc = rocemu_cq_resize(cq->ecq, (uint32_t)cqe);
	if (rc < 0)
		return -rc;
	ibcq->cqe = (int)rocemu_cq_capacity(cq->ecq);
	return 0;
}
ROCEMU_PUBLIC(ibv_resize_cq)

int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	if (rocemu_dead(ROCEMU_CTX_OF(ibcq)))
		return rocemu_inherited_fail(ROCEMU_CTX_OF(ibcq));
	if (!ibcq)
		return EINVAL;
	struct rocemu_vcq *cq = (struct rocemu_vcq *)ibcq;
	int rc = rocemu_cq_destroy(cq->ecq);
	if (rc < 0)
		return -rc;
	struct rocemu_vchannel *ch = cq->channel;
	if (ch) {
		/* Forget undelivered events of this CQ, and their counts in the fd. */
		pthread_mutex_lock(&ch->lock);
		for (struct rocemu_vcq **pp = &ch->head; *pp; pp = &(*pp)->ch_next)
			if (*pp == cq) {
				*pp = cq->ch_next;
				break;
			}
		ch->tail = NULL;
		for (struct rocemu_vcq *p = ch->head; p; p = p->ch_next)
			ch->tail = p;
		rocemu_fd_take_counts(ch->ch.fd, cq->ch_pending);
		cq->ch_pending = 0;
		uint32_t comp_reported = cq->comp_reported;
		ch->ch.refcnt--;
		pthread_mutex_unlock(&ch->lock);
		rocemu_async_wait_acked(&ibcq->mutex, &ibcq->cond, &ibcq->comp_events_completed,
					comp_reported);
	}
	rocemu_async_wait_acked(&ibcq->mutex, &ibcq->cond, &ibcq->async_events_completed,
				rocemu_async_forget(cq->ctx, &cq->async_reported));
	rocemu_pd_unuse(cq->parent_domain);
	pthread_mutex_destroy(&ibcq->mutex);
	pthread_cond_destroy(&ibcq->cond);
	free(cq);
	return 0;
}
ROCEMU_PUBLIC(ibv_destroy_cq)
