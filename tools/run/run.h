/* SPDX-License-Identifier: BSD-3-Clause */
/** @file Internals of `rocemu run` and `rocemu demo`. */
#ifndef ROCEMU_TOOLS_RUN_H
#define ROCEMU_TOOLS_RUN_H

#include <stdbool.h>
#include <stddef.h>

/**
 * 1 if the ELF file at path loads libibverbs.so.1 (DT_NEEDED, followed
 * through its libraries; libuct and libmpi, which load it as a plugin,
 * count), 0 if not, -ENOEXEC if it is no 64-bit ELF file,
 * other -errno if it cannot be read.
 */
int run_program_uses_ibverbs(const char *path);

/** Directory holding our libibverbs.so.1 (build tree or <libdir>/rocemu). 0 or -ENOENT. */
int run_find_provider_dir(char *out, size_t len);

/**
 * Give this process (and the program it is about to exec) its own view of
 * /sys/class/infiniband, /sys/class/infiniband_verbs and /dev/infiniband
 * showing the n configured devices (view.c). 0, or -errno with err saying
 * what failed; the file system is then as it was.
 */
struct rocemu_port_config;
int run_view_enter(const struct rocemu_port_config *cfgs, unsigned n, char *err, size_t errlen);

/** This process's MPI rank and the job's size (0: unknown) from the launcher's
 * environment (rank.c). 0 or -ENOENT. */
int run_job_rank(unsigned *rank, unsigned *size);

/**
 * One option as this rank sees it (rank.c): --rank-port and --rank-ip become
 * key "port"/"ip" with this rank's value, "%r" in --capture the rank; other
 * options pass unchanged. 0 with key and out set, or -EINVAL with err.
 */
int run_rank_option(char *key, size_t keylen, const char *val, char *out, size_t outlen, char *err,
		    size_t errlen);

/** Path of the running rocemu executable. 0 or -errno. */
int run_self_path(char *out, size_t len);

#endif
