/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Queue memory: a ring comes from the engine's heap, or from the
 * application's allocator of a parent domain (ibv_alloc_parent_domain(3)),
 * which may say "use the default" (IBV_ALLOCATOR_USE_DEFAULT) for any ring.
 * Either way the ring starts zeroed, and goes back to where it came from.
 */
#include <stdlib.h>
#include <string.h>

#include "../rocemu_internal.h"

#define QMEM_ALIGN 64

void *rocemu_qmem_alloc(const struct rocemu_alloc *a, size_t size, uint64_t type, bool *from_app)
{
	void *p = ROCEMU_ALLOC_DEFAULT;

	*from_app = false;
	if (size == 0)
		size = 1;
	if (a && a->alloc)
		p = a->alloc(a->arg, size, QMEM_ALIGN, type);
	if (p == NULL)
		return NULL; /* the application refused: the object is not created */
	if (p != ROCEMU_ALLOC_DEFAULT) {
		*from_app = true;
		memset(p, 0, size);
		return p;
	}
	p = aligned_alloc(QMEM_ALIGN, (size + QMEM_ALIGN - 1) & ~(size_t)(QMEM_ALIGN - 1));
	if (p)
		memset(p, 0, size);
	return p;
}

void rocemu_qmem_free(const struct rocemu_alloc *a, void *p, uint64_t type, bool from_app)
{
	if (!p)
		return;
	if (from_app) {
		if (a && a->free)
			a->free(a->arg, p, type);
		return;
	}
	free(p);
}
