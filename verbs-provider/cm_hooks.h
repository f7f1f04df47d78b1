/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * What rocemu's librdmacm asks rocemu's libibverbs beyond the verbs API. The
 * two libraries are built together and rdma_cm only runs on rocemu devices,
 * so the table is reached through the context instead of an exported
 * symbol: a rocemu context keeps a pointer to it right after its struct
 * verbs_context (provider.h, struct rocemu_vcontext).
 */
#ifndef ROCEMU_CM_HOOKS_H
#define ROCEMU_CM_HOOKS_H

#include <stdint.h>

#include <infiniband/verbs.h>

#define ROCEMU_CM_HOOKS_MAGIC 0x726f636du /* "rocm" */

struct rocemu_cm_hooks {
	uint32_t magic;
	/** Completions of QP qpn of ctx still queued in its CQs, not yet
	 * polled; 0 once the QP is destroyed (a number, not a pointer: the
	 * program may destroy the QP while rdma_cm looks). */
	unsigned (*qp_queued)(struct ibv_context *ctx, uint32_t qpn);
};

/** The hooks of ctx's provider, or NULL when ctx is not a rocemu context. */
static inline const struct rocemu_cm_hooks *rocemu_cm_hooks(struct ibv_context *ctx)
{
	struct verbs_context *v = ctx ? verbs_get_ctx(ctx) : NULL;
	const struct rocemu_cm_hooks *h;

	if (!v || v->sz < sizeof(struct verbs_context))
		return NULL;
	h = *(const struct rocemu_cm_hooks *const *)(void *)(v + 1);
	return h && h->magic == ROCEMU_CM_HOOKS_MAGIC ? h : NULL;
}

#endif
