/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device memory (ibv_alloc_dm(3)): memory of the engine, which is rocemu's
 * NIC; the rules are the engine's (emulator/memory/dm.c). A region on it
 * (ibv_reg_dm_mr) is zero-based: ibv_mr.addr is NULL and work requests
 * address it from 0, locally and remotely.
 */
#include <stdlib.h>

#include "provider.h"

struct rocemu_vdm {
	struct ibv_dm dm;
	struct rocemu_dm *edm;
	/* imported from another process (import.c): its file, where its bytes are */
	struct rocemu_vfile *remote;
	struct rocemu_mem_foreign f;
};

static int remote_copy_to(struct ibv_dm *dm, uint64_t offset, const void *host, size_t length)
{
	int rc = rocemu_dm_copy_foreign(&((struct rocemu_vdm *)dm)->f, offset,
					(void *)(uintptr_t)host, length, true);

	return rc < 0 ? -rc : 0;
}

static int remote_copy_from(void *host, struct ibv_dm *dm, uint64_t offset, size_t length)
{
	int rc = rocemu_dm_copy_foreign(&((struct rocemu_vdm *)dm)->f, offset, host, length, false);

	return rc < 0 ? -rc : 0;
}

static int dm_copy_to(struct ibv_dm *dm, uint64_t offset, const void *host, size_t length)
{
	int rc = rocemu_dm_copy(((struct rocemu_vdm *)dm)->edm, offset, (void *)(uintptr_t)host,
				length, true);

	return rc < 0 ? -rc : 0;
}

static int dm_copy_from(void *host, struct ibv_dm *dm, uint64_t offset, size_t length)
{
	int rc = rocemu_dm_copy(((struct rocemu_vdm *)dm)->edm, offset, host, length, false);

	return rc < 0 ? -rc : 0;
}

struct ibv_dm *rocemu_op_alloc_dm(struct ibv_context *ctx, struct ibv_alloc_dm_attr *attr)
{
	struct rocemu_vdm *d;
	int rc;

	if (!ctx || !attr || attr->comp_mask) {
		errno = EINVAL;
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		errno = ENOMEM;
		return NULL;
	}
	rc = rocemu_dm_alloc(to_vctx(ctx)->engine, attr->length, attr->log_align_req, &d->edm);
	if (rc == 0) {
		rc = rocemu_handle_add(to_vctx(ctx)->file, ROCEMU_VOBJ_DM, d->edm, NULL,
				       &d->dm.handle);
		if (rc < 0)
			rocemu_dm_free(d->edm);
	}
	if (rc == 0) { /* for another process on the host to import */
		uint64_t addr, len;
		rocemu_dm_where(d->edm, &addr, &len);
		rocemu_handle_publish_dm(to_vctx(ctx)->file, d->dm.handle, addr, len);
	}
	if (rc < 0) {
		free(d);
		return rocemu_null_errno(rc);
	}
	d->dm.context = ctx;
	d->dm.memcpy_to_dm = dm_copy_to;
	d->dm.memcpy_from_dm = dm_copy_from;
	return &d->dm;
}

static int dm_destroy(void *edm, void *aux)
{
	(void)aux;
	return rocemu_dm_free(edm);
}

int rocemu_op_free_dm(struct ibv_dm *dm)
{
	struct rocemu_vdm *d = (struct rocemu_vdm *)dm;
	int rc;

	if (!dm)
		return EINVAL;
	if (d->remote) { /* another process's: our view of it only */
		rocemu_vfile_put(d->remote);
		free(d);
		return 0;
	}
	/* through any of its wrappers, once (import.c) */
	rc = rocemu_handle_destroy(to_vctx(dm->context)->file, ROCEMU_VOBJ_DM, dm->handle, d->edm,
				   dm_destroy);
	if (rc < 0)
		return -rc;
	free(d);
	return 0;
}

/* ibv_import_dm(3): another wrapper of the device memory handle names. */
struct ibv_dm *ibv_import_dm(struct ibv_context *ctx, uint32_t dm_handle)
{
	if (rocemu_dead(ctx))
		return rocemu_inherited_null(ctx);
	struct rocemu_vdm *d;
	void *edm;
	int rc;

	if (!ctx) {
		errno = EINVAL;
		return NULL;
	}
	if (rocemu_vfile_remote(to_vctx(ctx)->file)) {
		/* another process's: its bytes through process_vm_readv/writev */
		d = calloc(1, sizeof(*d));
		if (!d)
			return rocemu_null_errno(-ENOMEM);
		rc = rocemu_remote_dm(ctx, dm_handle, &d->f, &d->remote);
		if (rc < 0) {
			free(d);
			return rocemu_null_errno(rc);
		}
		d->dm.context = ctx;
		d->dm.memcpy_to_dm = remote_copy_to;
		d->dm.memcpy_from_dm = remote_copy_from;
		d->dm.handle = dm_handle;
		return &d->dm;
	}
	rc = rocemu_handle_get(to_vctx(ctx)->file, ROCEMU_VOBJ_DM, dm_handle, &edm, NULL);
	if (rc < 0)
		return rocemu_null_errno(rc);
	d = calloc(1, sizeof(*d));
	if (!d) {
		errno = ENOMEM;
		return NULL;
	}
	d->edm = edm;
	d->dm.context = ctx;
	d->dm.memcpy_to_dm = dm_copy_to;
	d->dm.memcpy_from_dm = dm_copy_from;
	d->dm.handle = dm_handle;
	return &d->dm;
}
ROCEMU_PUBLIC(ibv_import_dm)

/* The wrapper only: the device memory stays. */
void ibv_unimport_dm(struct ibv_dm *dm)
{
	if (dm && ((struct rocemu_vdm *)dm)->remote)
		rocemu_vfile_put(((struct rocemu_vdm *)dm)->remote);
	free(dm);
}
ROCEMU_PUBLIC(ibv_unimport_dm)

/* The wrapper is pd_mr.c's, for both kinds of region (rocemu_reg_mr). */
struct ibv_mr *rocemu_op_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t offset,
				   size_t length, unsigned int access)
{
	if (!dm) {
		errno = EINVAL;
		return NULL;
	}
	if (((struct rocemu_vdm *)dm)->remote) {
		/* a region on it would need a key of the exporter's engine */
		errno = EOPNOTSUPP;
		return NULL;
	}
	return rocemu_reg_mr(pd, dm, offset, length, 0, access);
}

int rocemu_dm_mr_reg(struct rocemu_vmr *m, struct ibv_dm *dm, struct rocemu_pd *epd,
		     uint64_t offset, size_t length, unsigned access)
{
	m->edm = ((struct rocemu_vdm *)dm)->edm;
	return rocemu_dm_reg_mr(epd, m->edm, offset, length, access, &m->emr);
}
