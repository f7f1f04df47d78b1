/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device memory (ibv_alloc_dm(3)): memory "on the NIC". A hardware NIC has
 * a few hundred KiB of it (mlx5's MEMIC); rocemu's NIC is the engine, so its
 * device memory is memory the engine allocates, max_dm_size bytes at most
 * per engine. The application reaches it only by copies (ibv_memcpy_to_dm,
 * ibv_memcpy_from_dm) and through zero-based regions on it (ibv_reg_dm_mr),
 * which local and remote work requests use like any region.
 *
 * The rules are those a program meets on mlx5, so that what works here works
 * there: copies of whole 4-byte words at 4-byte offsets inside the
 * allocation; regions zero-based (IBV_ACCESS_ZERO_BASED is required), with
 * local write and the remote rights only; the memory cannot be freed while a
 * region is on it (EBUSY, as the kernel's uverbs answers).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mem_private.h"

/* What ibv_reg_dm_mr may ask for (the optional range: hints, ignored). */
#define DM_MR_ACCESS                                                                               \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_OPTIONAL_RANGE)

/* Copies move whole words (mlx5 writes device memory by dwords). */
#define DM_WORD 4u

/* Allocations per engine (each takes at least 64 bytes of max_dm_size anyway). */
#define DM_MAX_ALLOCS 4096u

/* The largest alignment an allocation may ask for (log2): a page. */
#define DM_MAX_LOG_ALIGN 12u

struct rocemu_dm {
	struct rocemu_engine *engine;
	struct rocemu_obj obj;
	uint8_t *base;
	uint64_t length;
	uint64_t charged; /**< length rounded up to the alignment: what max_dm_size lost */
	uint32_t regions; /**< regions registered on it */
};

static void dm_release(struct rocemu_obj *obj)
{
	struct rocemu_dm *dm = container_of(obj, struct rocemu_dm, obj);

	free(dm->base);
	free(dm);
}

int rocemu_dm_alloc(struct rocemu_engine *e, uint64_t length, uint32_t log_align,
		    struct rocemu_dm **out)
{
	struct rocemu_caps caps;
	struct rocemu_dm *dm;
	uint64_t align, size;
	int rc;

	if (!e || !out || length == 0 || log_align > DM_MAX_LOG_ALIGN)
		return -EINVAL;
	rocemu_engine_caps(e, &caps);
	if (length > caps.max_dm_size)
		return -ENOMEM;
	align = 1ull << log_align;
	if (align < 64)
		align = 64;
	size = (length + align - 1) & ~(align - 1);
	dm = calloc(1, sizeof(*dm));
	if (!dm)
		return -ENOMEM;
	dm->base = aligned_alloc(align, size);
	if (!dm->base) {
		free(dm);
		return -ENOMEM;
	}
	memset(dm->base, 0, size);
	dm->engine = e;
	dm->length = length;
	dm->charged = size;
	/* registered memory: copies into it survive a fault elsewhere */
	rocemu_host_guard_install();
	rocemu_engine_lock(e);
	rc = rocemu_mem_dm_charge(rocemu_engine_mem(e), size, caps.max_dm_size);
	if (rc == 0) {
		rc = rocemu_obj_track(rocemu_engine_mem(e), &dm->obj, ROCEMU_OBJ_DM, DM_MAX_ALLOCS,
				      dm_release);
		if (rc)
			rocemu_mem_dm_uncharge(rocemu_engine_mem(e), size);
	}
	rocemu_engine_unlock(e);
	if (rc) {
		free(dm->base);
		free(dm);
		return rc;
	}
	*out = dm;
	return 0;
}

int rocemu_dm_free(struct rocemu_dm *dm)
{
	struct rocemu_engine *e;

	if (!dm)
		return -EINVAL;
	e = dm->engine;
	rocemu_engine_lock(e);
	if (dm->regions) {
		rocemu_engine_unlock(e);
		return -EBUSY;
	}
	rocemu_obj_untrack(rocemu_engine_mem(e), &dm->obj);
	rocemu_mem_dm_uncharge(rocemu_engine_mem(e), dm->charged);
	rocemu_engine_unlock(e);
	dm_release(&dm->obj);
	return 0;
}

/* Under the engine lock, so that a copy and a peer's access through a
 * region on the memory never interleave. */
int rocemu_dm_copy(struct rocemu_dm *dm, uint64_t offset, void *host, size_t length, bool to_dm)
{
	if (!dm || (!host && length))
		return -EINVAL;
	if ((offset | length) % DM_WORD)
		return -EINVAL;
	if (offset > dm->length || length > dm->length - offset)
		return -EFAULT;
	if (length == 0)
		return 0;
	rocemu_engine_lock(dm->engine);
	if (to_dm)
		memcpy(dm->base + offset, host, length);
	else
		memcpy(host, dm->base + offset, length);
	rocemu_engine_unlock(dm->engine);
	return 0;
}

void rocemu_dm_where(const struct rocemu_dm *dm, uint64_t *addr, uint64_t *length)
{
	*addr = (uint64_t)(uintptr_t)dm->base;
	*length = dm->length;
}

/* Another process's device memory (ibv_import_dm across processes): the
 * same rules, the bytes through mr_import.c's guarded copy. */
int rocemu_dm_copy_foreign(const struct rocemu_mem_foreign *f, uint64_t offset, void *host,
			   size_t length, bool to_dm)
{
	if (!f || (!host && length))
		return -EINVAL;
	if ((offset | length) % DM_WORD)
		return -EINVAL;
	if (offset > f->length || length > f->length - offset)
		return -EFAULT;
	return rocemu_foreign_copy(f, host, f->addr + offset, length, to_dm) ? 0 : -EFAULT;
}

int rocemu_dm_reg_mr(struct rocemu_pd *pd, struct rocemu_dm *dm, uint64_t offset, size_t length,
		     unsigned access, struct rocemu_mr **out)
{
	struct rocemu_engine *e;
	int rc;

	if (!pd || !dm || !out || pd->engine != dm->engine)
		return -EINVAL;
	if ((access & ~(unsigned)DM_MR_ACCESS) || !(access & IBV_ACCESS_ZERO_BASED))
		return -EINVAL;
	if (offset > dm->length || length > dm->length - offset)
		return -EINVAL;
	e = dm->engine;
	/* counted first, so that ibv_free_dm cannot free it under the registration */
	rocemu_engine_lock(e);
	dm->regions++;
	rocemu_engine_unlock(e);
	rc = rocemu_mr_reg(pd, dm->base + offset, length, 0,
			   access & ~(unsigned)(IBV_ACCESS_ZERO_BASED | IBV_ACCESS_OPTIONAL_RANGE),
			   out);
	if (rc) {
		rocemu_engine_lock(e);
		dm->regions--;
		rocemu_engine_unlock(e);
	}
	return rc;
}

int rocemu_dm_dereg_mr(struct rocemu_dm *dm, struct rocemu_mr *mr)
{
	int rc;

	if (!dm || !mr)
		return -EINVAL;
	rc = rocemu_mr_dereg(mr);
	if (rc == 0) {
		rocemu_engine_lock(dm->engine);
		dm->regions--;
		rocemu_engine_unlock(dm->engine);
	}
	return rc;
}
