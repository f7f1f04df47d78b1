/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Imported regions: another process's memory region, standing in this
 * engine under the other process's key (ibv_import_mr across processes on
 * one host NIC; rocemu_engine.h, struct rocemu_mem_foreign).
 *
 * Keys. An importing engine has a key tag of its own (mem_private.h); the
 * host gives every live process a different one, so the exporter's key
 * never equals a key of this engine's slots, and two imports of live
 * exporters never share one. An import from an exporter that has gone may
 * hold a key a new process of the same index hands out again: importing
 * that key while the old import stands is -EEXIST, not a second meaning.
 *
 * Memory. Every copy is a process_vm_readv/writev on the exporter's pid,
 * bracketed by the exporter's shared busy count: the copy happens only
 * while the exporter's entry for the region (its stamp) is the one the
 * import saw and its pidfd does not say it has exited. The exporter, at
 * deregistration, changes the stamp first and then waits for busy to reach
 * 0 before it returns (verbs-provider/import.c), so no copy reaches memory
 * the application got back from ibv_dereg_mr. An exporter that exits makes
 * every further copy fail (the pidfd turns readable; process_vm_* answers
 * ESRCH). Atomics and ATOMIC WRITE need one CPU instruction on the memory,
 * which another process cannot give: they fail on imported regions
 * (mem_access.c).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>

#include "mem_private.h"

int rocemu_mr_import(struct rocemu_pd *pd, const struct rocemu_mem_foreign *f,
		     struct rocemu_mr **out)
{
	struct rocemu_mem_table *t;
	struct rocemu_engine *e;
	struct rocemu_mr *mr;
	int rc = 0;

	if (!pd || !f || !out || !f->busy || !f->stamp || f->pid <= 0)
		return -EINVAL;
	if (!f->implicit && f->length && f->iova > UINT64_MAX - (f->length - 1))
		return -EINVAL;
	mr = calloc(1, sizeof(*mr));
	struct rocemu_mem_foreign *copy = malloc(sizeof(*copy));
	if (!mr || !copy) {
		free(mr);
		free(copy);
		return -ENOMEM;
	}
	*copy = *f;
	mr->pd = pd;
	mr->key = f->key;
	mr->addr = (uint8_t *)(uintptr_t)f->addr;
	mr->length = f->implicit ? UINT64_MAX : f->length;
	mr->iova = f->implicit ? 0 : f->iova;
	mr->access = f->access;
	mr->implicit = f->implicit;
	mr->foreign = copy;
	e = pd->engine;
	rocemu_engine_lock(e);
	t = rocemu_engine_mem(e);
	if (!rocemu_mem_key_tag(t) || f->key >> 24 == rocemu_mem_key_tag(t) || f->key >> 24 == 0)
		rc = -EINVAL;
	else if (rocemu_mem_import_find(t, f->key))
		rc = -EEXIST;
	else
		rc = rocemu_mem_import_add(t, mr);
	if (rc == 0)
		rocemu_pd_get(pd);
	rocemu_engine_unlock(e);
	if (rc) {
		free(copy);
		free(mr);
		return rc;
	}
	*out = mr;
	return 0;
}

int rocemu_mr_unimport(struct rocemu_mr *mr)
{
	struct rocemu_engine *e;

	if (!mr || !mr->foreign)
		return -EINVAL;
	e = mr->pd->engine;
	rocemu_engine_lock(e);
	rocemu_mem_import_remove(rocemu_engine_mem(e), mr);
	rocemu_pd_put(mr->pd);
	rocemu_engine_unlock(e);
	free(mr->foreign);
	free(mr);
	return 0;
}

/* True while the exporter has not exited (its pidfd is not readable). */
static bool exporter_runs(const struct rocemu_mem_foreign *f)
{
	struct pollfd p = {.fd = f->pidfd, .events = POLLIN};

	return poll(&p, 1, 0) == 0;
}

bool rocemu_mem_foreign_copy(const struct rocemu_mr *mr, void *local, uint64_t remote, size_t len,
			     bool write)
{
	return rocemu_foreign_copy(mr->foreign, local, remote, len, write);
}

bool rocemu_foreign_copy(const struct rocemu_mem_foreign *f, void *local, uint64_t remote,
			 size_t len, bool write)
{
	bool ok = false;

	if (len == 0)
		return true;
	/* seq_cst on both sides: either the exporter sees our count, or we see
	 * its new stamp (it stores the stamp, then reads busy) */
	__atomic_fetch_add(f->busy, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(f->stamp, __ATOMIC_SEQ_CST) == f->expect && exporter_runs(f))
		ok = rocemu_host_vm_copy(f->pid, local, remote, len, write);
	__atomic_fetch_sub(f->busy, 1, __ATOMIC_SEQ_CST);
	return ok;
}
