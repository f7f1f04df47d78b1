/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reaching the application's memory safely.
 *
 * A regular MR is checked once, at registration, against /proc/self/maps
 * (every page mapped, readable, and writable if the MR may be written), and
 * is then accessed with plain memcpy: like a pinned region on a real NIC it
 * must stay mapped until dereg (unmapping it first is the application's
 * bug, as it is with hardware).
 *
 * An on-demand-paging MR (IBV_ACCESS_ON_DEMAND, and in particular the
 * implicit one covering the whole address space) promises nothing about
 * the mapping, so every copy goes through process_vm_readv/writev on our
 * own pid: the kernel walks the page tables and returns EFAULT instead of
 * delivering SIGSEGV, which the engine turns into ROCEMU_MEM_FAULT.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "mem_private.h"

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

bool rocemu_host_read(void *dst, const void *src, size_t len)
{
	size_t done = 0;

	while (done < len) {
		struct iovec local = {.iov_base = (uint8_t *)dst + done, .iov_len = len - done};
		struct iovec remote = {.iov_base = (uint8_t *)(uintptr_t)src + done,
				       .iov_len = len - done};
		ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);

		if (n <= 0)
			return false;
		done += (size_t)n;
	}
	return true;
}

bool rocemu_host_write(void *dst, const void *src, size_t len)
{
	size_t done = 0;

	while (done < len) {
		struct iovec local = {.iov_base = (uint8_t *)(uintptr_t)src + done,
				      .iov_len = len - done};
		struct iovec remote = {.iov_base = (uint8_t *)dst + done, .iov_len = len - done};
		ssize_t n = process_vm_writev(getpid(), &local, 1, &remote, 1, 0);

		if (n <= 0)
			return false;
		done += (size_t)n;
	}
	return true;
}
