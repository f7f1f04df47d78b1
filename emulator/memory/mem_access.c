/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The one way to registered memory: a key is looked up, its PD, rights and
 * bounds checked, and only then are bytes copied, through memcpy for
 * regular regions and through the fault-safe copies for ODP ones.
 */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mem_private.h"
#include "roce_wire.h"

/* Who asks: the QP whose request it is (remote), or the owner (local). */
#define LOCAL_ACCESS UINT32_MAX

/*
 * Look key up and check it for an access of [iova, iova+len) by QP qpn
 * (LOCAL_ACCESS: an lkey of the owner). A window is an R_Key only (IBA
 * 10.6.7: no L_Key), valid while bound to a region that is itself valid,
 * and a type 2 window answers the QP it is bound to and no other. The
 * bounds test never adds: iova+len may wrap 64 bits, so it compares the
 * offset into the region with what is left of it.
 */
static enum rocemu_mem_err mem_check(const struct rocemu_mem_table *t, const struct rocemu_pd *pd,
				     uint32_t qpn, uint32_t key, uint64_t iova, uint64_t len,
				     unsigned rights, struct rocemu_mr **mr_out, uint8_t **ptr)
{
	struct rocemu_mr *mr = rocemu_mem_lookup(t, key);
	uint64_t off;

	if (!mr || mr->invalidated)
		return ROCEMU_MEM_BAD_KEY;
	if (mr->window && (qpn == LOCAL_ACCESS || mr->parent->invalidated ||
			   (mr->mw_type == IBV_MW_TYPE_2 && mr->bound_qpn != qpn)))
		return ROCEMU_MEM_BAD_KEY;
	if (mr->pd != pd)
		return ROCEMU_MEM_BAD_PD;
	if ((mr->access & rights) != rights)
		return ROCEMU_MEM_ACCESS;
	if (iova < mr->iova)
		return ROCEMU_MEM_BOUNDS;
	off = iova - mr->iova;
	if (len > mr->length || off > mr->length - len)
		return ROCEMU_MEM_BOUNDS;
	*mr_out = mr;
	/* Implicit ODP: iova is the host address itself. Integer arithmetic,
	 * because a zero-length region may have a NULL address. */
	*ptr = (uint8_t *)(mr->implicit ? (uintptr_t)iova : (uintptr_t)mr->addr + (uintptr_t)off);
	return ROCEMU_MEM_OK;
}

enum rocemu_mem_err rocemu_mem_translate(struct rocemu_mem_table *t, const struct rocemu_pd *pd,
					 uint32_t qpn, uint32_t key, bool remote, uint64_t iova,
					 uint64_t len, unsigned rights, uint8_t **ptr)
{
	struct rocemu_mr *mr;

	/* A region's lkey == rkey: for regions the rights asked for (REMOTE_*)
	 * are what separate a peer from the owner; windows are rkeys only. */
	return mem_check(t, pd, remote ? qpn : LOCAL_ACCESS, key, iova, len, rights, &mr, ptr);
}

/* Regular regions through the fault guard (freed while registered: a
 * fault, not a crash), ODP ones through the kernel's page walk. */
static bool copy_from_region(const struct rocemu_mr *mr, void *dst, const uint8_t *src, size_t len)
{
	if (len == 0)
		return true;
	if (mr->foreign)
		return rocemu_mem_foreign_copy(mr, dst, (uint64_t)(uintptr_t)src, len, false);
	if (mr->odp)
		return rocemu_host_read(dst, src, len);
	return rocemu_host_copy(dst, src, len);
}

static bool copy_to_region(const struct rocemu_mr *mr, uint8_t *dst, const void *src, size_t len)
{
	if (len == 0)
		return true;
	if (mr->foreign)
		return rocemu_mem_foreign_copy(mr, (void *)(uintptr_t)src, (uint64_t)(uintptr_t)dst,
					       len, true);
	if (mr->odp)
		return rocemu_host_write(dst, src, len);
	return rocemu_host_copy(dst, src, len);
}

/*
 * Walk a scatter/gather list from byte offset for len bytes, checking each
 * piece with rights and handing it to copy. An SGE whose own range wraps
 * 64 bits is out of bounds wherever the walk touches it.
 */
static enum rocemu_mem_err sg_walk(struct rocemu_mem_table *t, const struct rocemu_pd *pd,
				   const struct ibv_sge *sg, uint32_t num_sge, uint64_t offset,
				   uint8_t *buf, uint32_t len, unsigned rights, bool to_region,
				   uint32_t *crc)
{
	uint64_t left = len;
	uint32_t i;

	if (len == 0)
		return ROCEMU_MEM_OK;
	if (!sg)
		return ROCEMU_MEM_BOUNDS;
	for (i = 0; i < num_sge && left > 0; i++) {
		uint64_t sl = sg[i].length, chunk;
		enum rocemu_mem_err err;
		struct rocemu_mr *mr;
		uint8_t *p;
		bool ok;

		if (offset >= sl) {
			offset -= sl;
			continue;
		}
		if (sg[i].addr > UINT64_MAX - (sl - 1))
			return ROCEMU_MEM_BOUNDS;
		chunk = sl - offset < left ? sl - offset : left;
		err = mem_check(t, pd, LOCAL_ACCESS, sg[i].lkey, sg[i].addr + offset, chunk, rights,
				&mr, &p);
		if (err != ROCEMU_MEM_OK)
			return err;
		if (crc && !mr->odp && !mr->foreign) {
			/* one pass: the CRC folds the blocks it copies */
			ok = rocemu_host_copy_crc(buf, p, chunk, crc);
		} else {
			ok = to_region ? copy_to_region(mr, p, buf, chunk)
				       : copy_from_region(mr, buf, p, chunk);
			if (ok && crc)
				*crc = roce_crc32(*crc, buf, chunk);
		}
		if (!ok)
			return ROCEMU_MEM_FAULT;
		buf += chunk;
		left -= chunk;
		offset = 0;
	}
	return left ? ROCEMU_MEM_BOUNDS : ROCEMU_MEM_OK;
}

enum rocemu_mem_err rocemu_mem_gather(struct rocemu_mem_table *t, const struct rocemu_pd *pd,
				      const struct ibv_sge *sg, uint32_t num_sge, uint64_t offset,
				      void *dst, uint32_t len)
{
	return sg_walk(t, pd, sg, num_sge, offset, dst, len, ROCEMU_RIGHT_LOCAL_READ, false, NULL);
}

enum rocemu_mem_err rocemu_mem_gather_crc(struct rocemu_mem_table *t, const struct rocemu_pd *pd,
					  const struct ibv_sge *sg, uint32_t num_sge,
					  uint64_t offset, void *dst, uint32_t len, uint32_t *crc)
{
	return sg_walk(t, pd, sg, num_sge, offset, dst, len, ROCEMU_RIGHT_LOCAL_READ, false, crc);
}

enum rocemu_mem_err rocemu_mem_scatter(struct rocemu_mem_table *t, const struct rocemu_pd *pd,
				       const struct ibv_sge *sg, uint32_t num_sge, uint64_t offset,
				       const void *src, uint32_t len)
{
	return sg_walk(t, pd, sg, num_sge, offset, (uint8_t *)(uintptr_t)src, len,
		       ROCEMU_RIGHT_LOCAL_WRITE, true, NULL);
}

enum rocemu_mem_err rocemu_mem_remote_write(struct rocemu_mem_table *t, const struct rocemu_pd *pd,
					    uint32_t qpn, uint32_t rkey, uint64_t iova,
					    const void *src, uint32_t len)
{
	enum rocemu_mem_err err;
	struct rocemu_mr *mr;
	uint8_t *p;

	err = mem_check(t, pd, qpn, rkey, iova, len, ROCEMU_RIGHT_REMOTE_WRITE, &mr, &p);
	if (err != ROCEMU_MEM_OK)
		return err;
	return copy_to_region(mr, p, src, len) ? ROCEMU_MEM_OK : ROCEMU_MEM_FAULT;
}

/* crc: NULL, or continued over the bytes (in the copy's pass unless ODP) */
static enum rocemu_mem_err remote_read(struct rocemu_mem_table *t, const struct rocemu_pd *pd,
				       uint32_t qpn, uint32_t rkey, uint64_t iova, void *dst,
				       uint32_t len, uint32_t *crc)
{
	enum rocemu_mem_err err;
	struct rocemu_mr *mr;
	uint8_t *p;

	err = mem_check(t, pd, qpn, rkey, iova, len, ROCEMU_RIGHT_REMOTE_READ, &mr, &p);
	if (err != ROCEMU_MEM_OK)
		return err;
	if (crc && len && !mr->odp && !mr->foreign)
		return rocemu_host_copy_crc(dst, p, len, crc) ? ROCEMU_MEM_OK : ROCEMU_MEM_FAULT;
	if (!copy_from_region(mr, dst, p, len))
		return ROCEMU_MEM_FAULT;
	if (crc)
		*crc = roce_crc32(*crc, dst, len);
	return ROCEMU_MEM_OK;
}

enum rocemu_mem_err rocemu_mem_remote_read(struct rocemu_mem_table *t, const struct rocemu_pd *pd,
					   uint32_t qpn, uint32_t rkey, uint64_t iova, void *dst,
					   uint32_t len)
{
	return remote_read(t, pd, qpn, rkey, iova, dst, len, NULL);
}

enum rocemu_mem_err rocemu_mem_remote_read_crc(struct rocemu_mem_table *t,
					       const struct rocemu_pd *pd, uint32_t qpn,
					       uint32_t rkey, uint64_t iova, void *dst,
					       uint32_t len, uint32_t *crc)
{
	return remote_read(t, pd, qpn, rkey, iova, dst, len, crc);
}

/*
 * Atomics (IBA ch. 9): the 8-byte target must be naturally aligned (checked on the
 * iova the peer sent and on the host address it maps to). The instruction
 * runs inside the fault guard, regular and ODP regions alike: an unmapped
 * or read-only page is ROCEMU_MEM_FAULT, without parsing /proc/self/maps
 * under the engine lock for every ODP atomic (~21 us each, issue 18.8).
 */
enum rocemu_mem_err rocemu_mem_atomic(struct rocemu_mem_table *t, const struct rocemu_pd *pd,
				      uint32_t qpn, uint32_t rkey, uint64_t iova, bool cmp_swap,
				      uint64_t compare, uint64_t swap_add, uint64_t *orig)
{
	enum rocemu_mem_err err;
	struct rocemu_mr *mr;
	uint8_t *p;

	err = mem_check(t, pd, qpn, rkey, iova, sizeof(uint64_t), ROCEMU_RIGHT_REMOTE_ATOMIC, &mr,
			&p);
	if (err != ROCEMU_MEM_OK)
		return err;
	if (mr->foreign)
		return ROCEMU_MEM_ACCESS; /* no atomic instruction on another process's memory */
	if ((iova & 7) || ((uintptr_t)p & 7))
		return ROCEMU_MEM_ALIGN;
	if (!rocemu_host_atomic((uint64_t *)(void *)p, cmp_swap, compare, swap_add, orig))
		return ROCEMU_MEM_FAULT;
	return ROCEMU_MEM_OK;
}

/*
 * ATOMIC WRITE (IBA annex A19): 8 bytes placed as one store, so that no
 * reader (CPU or another atomic) sees a mix of old and new bytes. The
 * target is naturally aligned, checked on the iova and on the host address,
 * and needs the REMOTE_WRITE right. The bytes go to memory as they came.
 */
enum rocemu_mem_err rocemu_mem_atomic_write(struct rocemu_mem_table *t, const struct rocemu_pd *pd,
					    uint32_t qpn, uint32_t rkey, uint64_t iova,
					    const uint8_t data[8])
{
	enum rocemu_mem_err err;
	struct rocemu_mr *mr;
	uint64_t value;
	uint8_t *p;

	err =
	    mem_check(t, pd, qpn, rkey, iova, sizeof(uint64_t), ROCEMU_RIGHT_REMOTE_WRITE, &mr, &p);
	if (err != ROCEMU_MEM_OK)
		return err;
	if (mr->foreign)
		return ROCEMU_MEM_ACCESS; /* one store in another process: not possible */
	if ((iova & 7) || ((uintptr_t)p & 7))
		return ROCEMU_MEM_ALIGN;
	memcpy(&value, data, sizeof(value));
	if (!rocemu_host_store64((uint64_t *)(void *)p, value))
		return ROCEMU_MEM_FAULT;
	return ROCEMU_MEM_OK;
}

/*
 * FLUSH (IBA annex A19). The rights are the region's FLUSH_GLOBAL and/or
 * FLUSH_PERSISTENT access bits, per placement type. Global visibility: the
 * engine places data with CPU stores, which every thread already sees once
 * they are done; a full fence orders them before the response. Persistence:
 * the only persistence domain a process has is the file behind a shared
 * file mapping, so the range is written back with msync(MS_SYNC) (for
 * anonymous memory that is a no-op that succeeds: there is nothing to
 * persist to). A range that is not mapped any more is ROCEMU_MEM_FAULT.
 */
enum rocemu_mem_err rocemu_mem_flush(struct rocemu_mem_table *t, const struct rocemu_pd *pd,
				     uint32_t qpn, uint32_t rkey, bool whole_region, uint64_t iova,
				     uint64_t len, unsigned placement)
{
	unsigned rights =
	    ((placement & ROCEMU_FLUSH_GLOBAL) ? ROCEMU_ACCESS_FLUSH_GLOBAL : 0) |
	    ((placement & ROCEMU_FLUSH_PERSISTENT) ? ROCEMU_ACCESS_FLUSH_PERSISTENT : 0);
	struct rocemu_mr *mr = rocemu_mem_lookup(t, rkey);
	enum rocemu_mem_err err;
	uint8_t *p;

	if (whole_region && mr) {
		iova = mr->iova;
		len = mr->implicit ? 0 : mr->length;
	}
	err = mem_check(t, pd, qpn, rkey, iova, len, rights, &mr, &p);
	if (err != ROCEMU_MEM_OK)
		return err;
	if (mr->foreign && (placement & ROCEMU_FLUSH_PERSISTENT))
		return ROCEMU_MEM_ACCESS; /* msync of another process's mapping: not possible */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if ((placement & ROCEMU_FLUSH_PERSISTENT) && len && !mr->implicit) {
		uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
		uintptr_t start = (uintptr_t)p & ~(page - 1);

		if (msync((void *)start, (uintptr_t)p - start + len, MS_SYNC) != 0)
			return ROCEMU_MEM_FAULT;
	}
	return ROCEMU_MEM_OK;
}

/*
 * Who may invalidate what. The owner may invalidate a region or a bound
 * type 2 window (LOCAL_INV on a QP of its PD). A peer's SEND with
 * Invalidate may invalidate only a type 2 memory window bound to the QP
 * the SEND arrived on, or, on hardware that offers it, a region
 * fast-registered for it (IBA 10.6.7, memory management extensions; Linux
 * rxe refuses it for every region registered with ibv_reg_mr). This device
 * has no fast registration: a region registered with ibv_reg_mr is never
 * invalidated remotely, whatever the peer guessed. A type 1 window is
 * never invalidated: ibv_bind_mw with length 0 unbinds it.
 */
static bool invalidate_allowed(const struct rocemu_mr *mr, bool remote, uint32_t qpn)
{
	if (mr->window)
		return mr->mw_type == IBV_MW_TYPE_2 && (!remote || mr->bound_qpn == qpn);
	return !remote;
}

enum rocemu_mem_err rocemu_mem_invalidate_check(struct rocemu_mem_table *t,
						const struct rocemu_pd *pd, uint32_t key,
						bool remote, uint32_t qpn)
{
	struct rocemu_mr *mr = rocemu_mem_lookup(t, key);

	if (!mr || mr->invalidated)
		return ROCEMU_MEM_BAD_KEY;
	if (mr->pd != pd)
		return ROCEMU_MEM_BAD_PD;
	if (!invalidate_allowed(mr, remote, qpn))
		return ROCEMU_MEM_ACCESS;
	return ROCEMU_MEM_OK;
}

enum rocemu_mem_err rocemu_mem_invalidate(struct rocemu_mem_table *t, const struct rocemu_pd *pd,
					  uint32_t key, bool remote, uint32_t qpn)
{
	enum rocemu_mem_err err = rocemu_mem_invalidate_check(t, pd, key, remote, qpn);
	struct rocemu_mr *mr;

	if (err != ROCEMU_MEM_OK)
		return err;
	mr = rocemu_mem_lookup(t, key);
	if (mr->window)
		rocemu_mem_mw_unbind(mr); /* free again: a new bind may follow */
	else
		mr->invalidated = true;
	return ROCEMU_MEM_OK;
}

const char *rocemu_mem_err_name(enum rocemu_mem_err err)
{
	switch (err) {
	case ROCEMU_MEM_OK:
		return "ok";
	case ROCEMU_MEM_BAD_KEY:
		return "bad_key";
	case ROCEMU_MEM_BAD_PD:
		return "bad_pd";
	case ROCEMU_MEM_BOUNDS:
		return "bounds";
	case ROCEMU_MEM_ACCESS:
		return "access";
	case ROCEMU_MEM_FAULT:
		return "fault";
	case ROCEMU_MEM_ALIGN:
		return "align";
	}
	return "unknown";
}
