/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer over the launcher's ELF reader (tools/run/elf_needed.c): `rocemu
 * run` reads the dynamic section of whatever program it is given, a file
 * it has no reason to trust. The input is the file, handed over as a memfd
 * (/proc/self/fd/N): no file is written. The libraries it names are looked
 * up in the system's directories, as for a real program.
 */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "run.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	char path[64];
	int r;

	if (fd < 0)
		fd = memfd_create("fuzz-elf", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		return 0;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	r = run_program_uses_ibverbs(path);
	if (r != 0 && r != 1 && r >= 0)
		__builtin_trap(); /* 1, 0 or -errno, nothing else */
	return 0;
}
