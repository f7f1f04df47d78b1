/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Inside of the memory layer: the MR object, the key table and the host
 * memory helpers. Nothing outside emulator/memory includes this.
 *
 * Keys. A key is (slot index << 8) | variant. The variant of a slot moves
 * on every time the slot is handed out (and on every rereg), through the
 * values 1..255 in an order the table draws at random when it is created,
 * from a random place per slot: it is never 0, so key 0 is never valid; a
 * key kept after dereg fails until the same slot has been reused 255 times;
 * and a peer that knows a slot cannot guess its key (issue 18.4). Free slots
 * are reused in FIFO order, which makes reuse as late as possible. lkey and
 * rkey are the same number: the rights recorded in the MR, not the key,
 * decide what a remote peer may do.
 *
 * On a host NIC (docs/host.md) every attached process has its own engine
 * and table, and keys cross processes (ibv_import_mr): the table then has a
 * key tag, the process's index on the host + 1 (1..255, unique among the
 * host's live processes), in the top byte, and at most 65536 slots, so a key
 * is tag << 24 | index << 8 | variant. Two live processes on one host never
 * hand out the same key, and a key whose top byte is not the engine's own
 * tag is looked up among the imported regions (mr_import.c), never in the
 * slots. Standalone engines have tag 0 and keys as above.
 */
#ifndef ROCEMU_MEM_PRIVATE_H
#define ROCEMU_MEM_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "mem_objects.h"

/** bound_qpn of a type 2 window whose QP was destroyed: no QPN (24 bits) is it. */
#define ROCEMU_MEM_NO_QP 0xfffffffeu

/** Largest slot count: the index has 24 bits. */
#define ROCEMU_MEM_MAX_SLOTS (1u << 24)
/** Largest slot count of a table with a key tag: the index has 16 bits. */
#define ROCEMU_MEM_MAX_TAGGED_SLOTS (1u << 16)

struct rocemu_mem_foreign;

struct rocemu_mr {
	struct rocemu_pd *pd;
	uint32_t index; /**< slot in the table */
	uint32_t key;	/**< lkey == rkey */
	uint8_t *addr;	/**< host address of iova (NULL for implicit ODP: identity) */
	uint64_t length;
	uint64_t iova;
	unsigned access;  /**< enum ibv_access_flags as registered */
	bool odp;	  /**< IBV_ACCESS_ON_DEMAND: copies must survive unmapped pages */
	bool implicit;	  /**< implicit ODP: the whole address space, iova == host address */
	bool invalidated; /**< LOCAL_INV / SEND_WITH_INV: the key no longer translates */
	/* Memory windows (mw.c) live in the same table as a struct rocemu_mw. */
	bool window;		  /**< a window: an R_Key only, never an L_Key */
	uint8_t mw_type;	  /**< window: IBV_MW_TYPE_1 or IBV_MW_TYPE_2 */
	uint32_t bound_qpn;	  /**< type 2 window: the only QP it answers */
	struct rocemu_mr *parent; /**< window: the region it is bound to, NULL when not bound */
	uint32_t windows;	  /**< region: windows bound to it (dereg/rereg refused) */
	/* An imported region (mr_import.c): another process's memory, reached
	 * through process_vm_readv/writev; not in a slot. NULL otherwise. */
	struct rocemu_mem_foreign *foreign;
};

/** A memory window: its table entry (window set); addr/length/iova/access
 * are those of the bind, invalidated while it is not bound. */
struct rocemu_mw {
	struct rocemu_mr w;
};

/** Give mr a free slot and a fresh key; -ENOMEM when the table is full. */
int rocemu_mem_key_alloc(struct rocemu_mem_table *t, struct rocemu_mr *mr);
/** New key for the same slot (rereg). */
void rocemu_mem_key_renew(struct rocemu_mem_table *t, struct rocemu_mr *mr);
/** Release mr's slot. A window's slot does not give its last key's tag to
 * the next key of the slot (the consumer chose it, not the variant order). */
void rocemu_mem_key_free(struct rocemu_mem_table *t, struct rocemu_mr *mr);
/** The MR with exactly this key (variant included), or NULL; a key of another
 * process's tag is looked up among the imported regions. */
struct rocemu_mr *rocemu_mem_lookup(const struct rocemu_mem_table *t, uint32_t key);

/* Imported regions (mr_import.c), engine lock held. */
/** The imported region with this key, or NULL. */
struct rocemu_mr *rocemu_mem_import_find(const struct rocemu_mem_table *t, uint32_t key);
/** Add mr to the imported regions; -ENOMEM. */
int rocemu_mem_import_add(struct rocemu_mem_table *t, struct rocemu_mr *mr);
/** Remove mr from them. */
void rocemu_mem_import_remove(struct rocemu_mem_table *t, struct rocemu_mr *mr);
/** The table's key tag (0: standalone). */
uint8_t rocemu_mem_key_tag(const struct rocemu_mem_table *t);
/**
 * Copy len bytes between local and the imported region's memory at the
 * exporter's address remote (write: into it), while the exporter still has
 * the region registered as imported and still runs; false otherwise (the
 * access fails, nothing is written).
 */
bool rocemu_mem_foreign_copy(const struct rocemu_mr *mr, void *local, uint64_t remote, size_t len,
			     bool write);
/** The same for any memory f describes (device memory: dm.c). */
bool rocemu_foreign_copy(const struct rocemu_mem_foreign *f, void *local, uint64_t remote,
			 size_t len, bool write);

/** Whatever holds the slot a key of this table names (whatever its variant), or NULL. */
struct rocemu_mr *rocemu_mem_key_slot(const struct rocemu_mem_table *t, uint32_t key);
/** Whatever holds slot index (a region or a window), or NULL. */
struct rocemu_mr *rocemu_mem_slot(const struct rocemu_mem_table *t, uint32_t index);
/** Unbind window w from its region (w must be bound); it stops translating. */
void rocemu_mem_mw_unbind(struct rocemu_mr *w);

/** Take len bytes of device memory (dm.c) out of max; -ENOMEM when they are not left. */
int rocemu_mem_dm_charge(struct rocemu_mem_table *t, uint64_t len, uint64_t max);
/** Give back what rocemu_mem_dm_charge took. */
void rocemu_mem_dm_uncharge(struct rocemu_mem_table *t, uint64_t len);

/** A fresh PD handle (1, 2, ...; unique within the engine). */
uint32_t rocemu_mem_pd_handle(struct rocemu_mem_table *t);

/* Host memory (host_memory.c) */

/**
 * 0 when every byte of [addr, addr+len) is mapped readable (and writable
 * when write is set) in this process, per /proc/self/maps; -EFAULT if not,
 * -errno if the map cannot be read.
 */
int rocemu_host_range_check(const void *addr, uint64_t len, bool write);
/**
 * The fallback of rocemu_host_range_check when /proc is missing: every page
 * of [first, last] readable (write access is not checked). 0 or -EFAULT.
 */
int rocemu_host_range_probe(uint64_t first, uint64_t last);
/**
 * The fault guard (host_memory.c): a SIGSEGV/SIGBUS handler that turns a
 * fault inside the guarded accesses below into a false return and passes
 * every other fault on. Installed at registration, again if displaced.
 */
void rocemu_host_guard_install(void);
/** memcpy that returns false instead of faulting (unmapped or protected pages). */
bool rocemu_host_copy(void *dst, const void *src, size_t len);
/** roce_crc32_copy (continuing *crc) that returns false instead of faulting. */
bool rocemu_host_copy_crc(void *dst, const void *src, size_t len, uint32_t *crc);
/** 8-byte CPU atomic (compare-and-swap or fetch-and-add) that returns false instead of faulting. */
bool rocemu_host_atomic(uint64_t *target, bool cmp_swap, uint64_t compare, uint64_t swap_add,
			uint64_t *orig);
/** One 8-byte store, single-copy atomic (no reader sees half of it), that
 * returns false instead of faulting. */
bool rocemu_host_store64(uint64_t *target, uint64_t value);
/** How many times /proc/self/maps was parsed (tests: which paths stay off it). */
uint64_t rocemu_host_maps_reads(void);
/** Copy len bytes between local and address remote of process pid (write: into
 * it) with process_vm_readv/writev; false when any byte cannot be copied. */
bool rocemu_host_vm_copy(pid_t pid, void *local, uint64_t remote, size_t len, bool write);
/** Copy that survives unmapped/protected source pages (process_vm_readv on ourselves). */
bool rocemu_host_read(void *dst, const void *src, size_t len);
/** Copy that survives unmapped/protected destination pages (process_vm_writev). */
bool rocemu_host_write(void *dst, const void *src, size_t len);

#endif /* ROCEMU_MEM_PRIVATE_H */
