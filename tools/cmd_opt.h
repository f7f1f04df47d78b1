/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file The command line of `rocemu port` and `rocemu host`: options of the
 * form `--NAME VALUE` or `--NAME=VALUE`, flags `--NAME` (no value), `-h` and
 * `--help`. Errors are printed as "rocemu CMD: ..." on stderr.
 */
#ifndef ROCEMU_TOOLS_CMD_OPT_H
#define ROCEMU_TOOLS_CMD_OPT_H

#include <stdbool.h>
#include <stdio.h>

/** A command's options: its name, its flags, its help text. */
struct cmd_opt_spec {
	const char *cmd;	  /**< "port": messages say "rocemu port: ..." */
	const char *const *flags; /**< names that take no value, NULL-terminated */
	void (*usage)(FILE *f);	  /**< prints the help text */
};

/** One option taken from the command line. */
struct cmd_opt {
	char name[64];	 /**< without the leading "--" */
	const char *val; /**< its value; NULL for a flag */
};

/**
 * The next option (argv[*i] on, *i moved past it and its value) into *out:
 * true. False when the loop ends: *exit_status is then -1 after the last
 * argument, 0 after --help (the usage printed on stdout), 2 after an
 * argument that is not an option or an option without its value (said).
 */
bool cmd_opt_next(const struct cmd_opt_spec *spec, int argc, char **argv, int *i,
		  struct cmd_opt *out, int *exit_status);

/** VAL as an integer 0..MAX; 0, or -EINVAL with no message. */
int cmd_opt_parse_uint(const char *val, unsigned max, unsigned *out);

/** The same for an option's value, saying "rocemu CMD: --OPT 'VAL': expected
 * an integer 0..MAX" on error. */
int cmd_opt_uint(const struct cmd_opt_spec *spec, const struct cmd_opt *o, unsigned max,
		 unsigned *out);

#endif
