/* SPDX-License-Identifier: BSD-3-Clause */
/** @file Subcommands of the `rocemu` command; each lives in tools/<name>/. */
#ifndef ROCEMU_TOOLS_H
#define ROCEMU_TOOLS_H

/** Each returns the process exit status. argv[0] is the subcommand name. */
int rocemu_cmd_port(int argc, char **argv);
int rocemu_cmd_run(int argc, char **argv);
int rocemu_cmd_demo(int argc, char **argv);
int rocemu_cmd_inspect(int argc, char **argv);
int rocemu_cmd_host(int argc, char **argv);
int rocemu_cmd_stat(int argc, char **argv);

#endif
