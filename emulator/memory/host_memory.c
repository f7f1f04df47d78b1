/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reaching the application's memory safely.
 *
 * A regular MR is checked once, at registration, against /proc/self/maps
 * (every page mapped, readable, and writable if the MR may be written), and
 * is then accessed with plain memcpy, inside a fault guard: ibv_reg_mr(3)
 * wants it mapped until dereg, but rocemu pins nothing, and an application
 * that frees it anyway must not let a peer's WRITE crash the thread that
 * runs progress. A hardware NIC would write the old pinned pages; rocemu
 * fails the access instead (ROCEMU_MEM_FAULT, a remote access error on the
 * wire). The guard: a SIGSEGV/SIGBUS handler, installed at the first
 * registration (and again whenever another handler took its place by
 * then), that jumps back out of a guarded copy or atomic and passes every
 * other fault to the handler it replaced. Memory unmapped and then mapped
 * again by something else at the same address is not detected: it is
 * written like any mapped memory (docs/memory.md).
 *
 * An on-demand-paging MR (IBV_ACCESS_ON_DEMAND, and in particular the
 * implicit one covering the whole address space) promises nothing about
 * the mapping, so every copy goes through process_vm_readv/writev on our
 * own pid: the kernel walks the page tables and returns EFAULT instead of
 * delivering SIGSEGV, which the engine turns into ROCEMU_MEM_FAULT.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "mem_private.h"
#include "roce_wire.h"

/* ------------------------------------------------------------------------ */
/* The fault guard                                                            */

/* Where a fault inside a guarded access of this thread jumps to (NULL: not
 * inside one). Set and cleared around each access, read by the handler. */
static __thread sigjmp_buf *volatile guard_jmp;
static struct sigaction guard_prev[2]; /* SIGSEGV, SIGBUS as they were */
static pthread_mutex_t guard_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t maps_reads; /* /proc/self/maps parses, for tests */

static void guard_handler(int sig, siginfo_t *si, void *uc)
{
	sigjmp_buf *jb = guard_jmp;
	struct sigaction *prev = &guard_prev[sig == SIGBUS];

	if (jb) {
		guard_jmp = NULL;
		siglongjmp(*jb, 1);
	}
	/* not ours: as if this handler were not there */
	if (prev->sa_flags & SA_SIGINFO) {
		prev->sa_sigaction(sig, si, uc);
	} else if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
		prev->sa_handler(sig);
	} else {
		/* default action: restore it; the faulting instruction runs again */
		sigaction(sig, prev, NULL);
	}
}

static bool guard_is_installed(int sig)
{
	struct sigaction cur;

	return sigaction(sig, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
	       cur.sa_sigaction == guard_handler;
}

void rocemu_host_guard_install(void)
{
	static const int sigs[2] = {SIGSEGV, SIGBUS};
	struct sigaction sa;

	pthread_mutex_lock(&guard_lock);
	for (int i = 0; i < 2; i++) {
		if (guard_is_installed(sigs[i]))
			continue;
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = guard_handler;
		/* SA_NODEFER: the jump out leaves the signal unblocked */
		sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
		sigemptyset(&sa.sa_mask);
		sigaction(sigs[i], &sa, &guard_prev[i]);
	}
	pthread_mutex_unlock(&guard_lock);
}

/*
 * The guarded accesses. The sigjmp_buf does not save the signal mask (no
 * system call per access); the handler runs with SA_NODEFER, so jumping out
 * of it leaves the mask as it was.
 */
bool rocemu_host_copy(void *dst, const void *src, size_t len)
{
	sigjmp_buf jb;

	if (sigsetjmp(jb, 0))
		return false;
	guard_jmp = &jb;
	__asm__ volatile("" ::: "memory"); /* the copy stays between the two stores */
	memcpy(dst, src, len);
	__asm__ volatile("" ::: "memory");
	guard_jmp = NULL;
	return true;
}

bool rocemu_host_copy_crc(void *dst, const void *src, size_t len, uint32_t *crc)
{
	sigjmp_buf jb;
	uint32_t c = *crc;

	if (sigsetjmp(jb, 0))
		return false;
	guard_jmp = &jb;
	__asm__ volatile("" ::: "memory");
	c = roce_crc32_copy(c, dst, src, len);
	__asm__ volatile("" ::: "memory");
	guard_jmp = NULL;
	*crc = c;
	return true;
}

bool rocemu_host_atomic(uint64_t *target, bool cmp_swap, uint64_t compare, uint64_t swap_add,
			uint64_t *orig)
{
	sigjmp_buf jb;
	uint64_t old;

	if (sigsetjmp(jb, 0))
		return false;
	guard_jmp = &jb;
	if (cmp_swap) {
		old = compare;
		__atomic_compare_exchange_n(target, &old, swap_add, false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
	} else {
		old = __atomic_fetch_add(target, swap_add, __ATOMIC_SEQ_CST);
	}
	guard_jmp = NULL;
	*orig = old; /* the old value whether or not a compare matched */
	return true;
}

bool rocemu_host_store64(uint64_t *target, uint64_t value)
{
	sigjmp_buf jb;

	if (sigsetjmp(jb, 0))
		return false;
	guard_jmp = &jb;
	__atomic_store_n(target, value, __ATOMIC_SEQ_CST);
	guard_jmp = NULL;
	return true;
}

uint64_t rocemu_host_maps_reads(void)
{
	return __atomic_load_n(&maps_reads, __ATOMIC_RELAXED);
}

static bool parse_maps_line(const char *line, uint64_t *start, uint64_t *end, bool *r, bool *w)
{
	char perms[5];

	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s", start, end, perms) != 3)
		return false;
	*r = perms[0] == 'r';
	*w = perms[1] == 'w';
	return true;
}

/*
 * Without /proc (some sandboxes): read one byte of every page with
 * process_vm_readv, up to IOV_MAX pages per call. That proves the pages
 * are mapped and readable, not writable. If even that syscall is not
 * allowed there is nothing left to ask: accept, as a NIC that pins memory
 * would have to trust the application.
 */
int rocemu_host_range_probe(uint64_t first, uint64_t last)
{
	enum { PROBE_IOV = 1024 };
	const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	const uint64_t first_pg = first & ~(page - 1);
	const uint64_t npages = (last - first_pg) / page + 1;
	struct iovec remote[PROBE_IOV];
	uint8_t sink[PROBE_IOV] = {0}; /* filled by the kernel */
	uint64_t i = 0;

	while (i < npages) {
		struct iovec local = {.iov_base = sink};
		unsigned n;
		ssize_t got;

		for (n = 0; n < PROBE_IOV && i < npages; n++, i++) {
			uint64_t at = i == 0 ? first : first_pg + i * page;

			remote[n] = (struct iovec){.iov_base = (void *)(uintptr_t)at, .iov_len = 1};
		}
		local.iov_len = n;
		got = process_vm_readv(getpid(), &local, 1, remote, n, 0);
		if (got < 0 && (errno == ENOSYS || errno == EPERM))
			return 0;
		if (got != (ssize_t)n)
			return -EFAULT;
	}
	return 0;
}

int rocemu_host_range_check(const void *addr, uint64_t len, bool write)
{
	uint64_t cursor = (uintptr_t)addr, last;
	char *line = NULL;
	size_t cap = 0;
	int rc = -EFAULT;
	FILE *f;

	if (len == 0)
		return 0;
	if (cursor > UINT64_MAX - (len - 1))
		return -EFAULT;
	last = cursor + (len - 1);
	__atomic_fetch_add(&maps_reads, 1, __ATOMIC_RELAXED);
	f = fopen("/proc/self/maps", "re");
	if (!f)
		return rocemu_host_range_probe(cursor, last);
	/* Lines come sorted by address: walk them, requiring no gap from addr to last. */
	while (getline(&line, &cap, f) > 0) {
		uint64_t start, end;
		bool r, w;

		if (!parse_maps_line(line, &start, &end, &r, &w) || end <= cursor)
			continue;
		if (start > cursor || !r || (write && !w))
			break;
		if (end - 1 >= last) {
			rc = 0;
			break;
		}
		cursor = end;
	}
	free(line);
	fclose(f);
	return rc;
}

bool rocemu_host_vm_copy(pid_t pid, void *local, uint64_t remote, size_t len, bool write)
{
	size_t done = 0;

	while (done < len) {
		struct iovec l = {.iov_base = (uint8_t *)local + done, .iov_len = len - done};
		struct iovec r = {.iov_base = (void *)(uintptr_t)(remote + done),
				  .iov_len = len - done};
		ssize_t n = write ? process_vm_writev(pid, &l, 1, &r, 1, 0)
				  : process_vm_readv(pid, &l, 1, &r, 1, 0);

		if (n <= 0)
			return false;
		done += (size_t)n;
	}
	return true;
}

bool rocemu_host_read(void *dst, const void *src, size_t len)
{
	return rocemu_host_vm_copy(getpid(), dst, (uint64_t)(uintptr_t)src, len, false);
}

bool rocemu_host_write(void *dst, const void *src, size_t len)
{
	return rocemu_host_vm_copy(getpid(), (void *)(uintptr_t)src, (uint64_t)(uintptr_t)dst, len,
				   true);
}
