/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Does a program load libibverbs? Reads the DT_NEEDED entries of an ELF file
 * (PT_DYNAMIC, strings found through the PT_LOAD that maps DT_STRTAB) and
 * follows them through the usual library directories, like ldd would,
 * without running anything; a library known to load libibverbs as a plugin
 * (UCX's libuct, Open MPI's libmpi) counts. Every offset is bounds-checked: the file is
 * untrusted input. Offsets need not be aligned either, so every header is
 * copied out with memcpy rather than read through a cast pointer.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"

#define MAX_NEEDED 64
#define MAX_DEPTH  4

struct elf_view {
	const uint8_t *p;
	size_t len;
};

static bool in_bounds(const struct elf_view *v, uint64_t off, uint64_t n)
{
	return off <= v->len && n <= v->len - off;
}

/* Program header i; the caller has bounds-checked the table. */
static Elf64_Phdr phdr_at(const struct elf_view *v, const Elf64_Ehdr *eh, unsigned i)
{
	Elf64_Phdr ph;
	memcpy(&ph, v->p + eh->e_phoff + (uint64_t)i * sizeof(ph), sizeof(ph));
	return ph;
}

/* File offset of virtual address va, through the PT_LOAD segments. */
static bool va_to_off(const struct elf_view *v, const Elf64_Ehdr *eh, uint64_t va, uint64_t *off)
{
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		Elf64_Phdr ph = phdr_at(v, eh, i);
		if (ph.p_type == PT_LOAD && va >= ph.p_vaddr && va - ph.p_vaddr < ph.p_filesz) {
			*off = ph.p_offset + (va - ph.p_vaddr);
			return true;
		}
	}
	return false;
}

/* Fill names with the DT_NEEDED strings. Returns the count, or -errno (-ENOEXEC: not an ELF64). */
static int read_needed(const struct elf_view *v, char names[][256], int max)
{
	if (!in_bounds(v, 0, sizeof(Elf64_Ehdr)) || memcmp(v->p, ELFMAG, SELFMAG))
		return -ENOEXEC;
	Elf64_Ehdr ehdr;
	memcpy(&ehdr, v->p, sizeof(ehdr));
	const Elf64_Ehdr *eh = &ehdr;
	if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_phentsize != sizeof(Elf64_Phdr) ||
	    !in_bounds(v, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr)))
		return -ENOEXEC;
	Elf64_Phdr dyn = {0};
	bool have_dyn = false;
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		Elf64_Phdr ph = phdr_at(v, eh, i);
		if (ph.p_type == PT_DYNAMIC) {
			dyn = ph;
			have_dyn = true;
		}
	}
	if (!have_dyn)
		return 0; /* statically linked */
	if (!in_bounds(v, dyn.p_offset, dyn.p_filesz))
		return -ENOEXEC;
	const uint8_t *dyns = v->p + dyn.p_offset;
	size_t nd = dyn.p_filesz / sizeof(Elf64_Dyn);
	uint64_t strtab = 0, strsz = 0, stroff;
	for (size_t i = 0; i < nd; i++) {
		Elf64_Dyn d;
		memcpy(&d, dyns + i * sizeof(d), sizeof(d));
		if (d.d_tag == DT_NULL)
			break;
		if (d.d_tag == DT_STRTAB)
			strtab = d.d_un.d_ptr;
		if (d.d_tag == DT_STRSZ)
			strsz = d.d_un.d_val;
	}
	if (!strtab || !va_to_off(v, eh, strtab, &stroff) || !in_bounds(v, stroff, strsz))
		return -ENOEXEC;
	int n = 0;
	for (size_t i = 0; i < nd && n < max; i++) {
		Elf64_Dyn d;
		memcpy(&d, dyns + i * sizeof(d), sizeof(d));
		if (d.d_tag == DT_NULL)
			break;
		if (d.d_tag != DT_NEEDED || d.d_un.d_val >= strsz)
			continue;
		const char *s = (const char *)v->p + stroff + d.d_un.d_val;
		size_t room = strsz - d.d_un.d_val;
		size_t l = strnlen(s, room);
		if (l == room || l >= 256)
			continue;
		memcpy(names[n++], s, l + 1);
	}
	return n;
}

static int needed_of_file(const char *path, char names[][256], int max)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
		close(fd);
		return -ENOEXEC;
	}
	void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -errno;
	struct elf_view v = {p, (size_t)st.st_size};
	int n = read_needed(&v, names, max);
	munmap(p, (size_t)st.st_size);
	return n;
}

static bool find_lib(const char *name, char *out, size_t len)
{
	static const char *const dirs[] = {
	    "/lib/x86_64-linux-gnu",
	    "/usr/lib/x86_64-linux-gnu",
	    "/lib/aarch64-linux-gnu",
	    "/usr/lib/aarch64-linux-gnu",
	    "/lib64",
	    "/usr/lib64",
	    "/lib",
	    "/usr/lib",
	    "/usr/local/lib",
	};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		if (snprintf(out, len, "%s/%.255s", dirs[i], name) >= (int)len)
			continue;
		if (access(out, R_OK) == 0)
			return true;
	}
	return false;
}

/* libibverbs itself, or a library that loads it as a plugin at run time:
 * UCX's libuct opens libuct_ib.so (linked to libibverbs) with dlopen, Open
 * MPI's libmpi its UCX and verbs components. */
static bool loads_ibverbs(const char *name)
{
	static const char *const prefixes[] = {"libibverbs.so.1", "libuct.so.", "libmpi.so."};

	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (!strncmp(name, prefixes[i], strlen(prefixes[i])))
			return true;
	return false;
}

static int search(const char *path, int depth)
{
	char names[MAX_NEEDED][256];
	int n = needed_of_file(path, names, MAX_NEEDED);
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++)
		if (loads_ibverbs(names[i]))
			return 1;
	if (depth >= MAX_DEPTH)
		return 0;
	for (int i = 0; i < n; i++) {
		char lib[512];
		/* libc and friends never pull in libibverbs: skip the common ones quickly */
		if (!strncmp(names[i], "libc.so", 7) || !strncmp(names[i], "libm.so", 7) ||
		    !strncmp(names[i], "ld-linux", 8))
			continue;
		if (find_lib(names[i], lib, sizeof(lib)) && search(lib, depth + 1) == 1)
			return 1;
	}
	return 0;
}

int run_program_uses_ibverbs(const char *path)
{
	return search(path, 0);
}
