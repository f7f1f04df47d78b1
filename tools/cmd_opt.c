/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The command line of `rocemu port` and `rocemu host` (cmd_opt.h): one
 * reader of `--NAME VALUE`, `--NAME=VALUE` and flags, so that both commands
 * accept the same forms and say the same things about bad ones.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_opt.h"

static bool is_flag(const struct cmd_opt_spec *spec, const char *name)
{
	for (const char *const *f = spec->flags; f && *f; f++)
		if (!strcmp(*f, name))
			return true;
	return false;
}

static bool stop(int *exit_status, int status)
{
	*exit_status = status;
	return false;
}

bool cmd_opt_next(const struct cmd_opt_spec *spec, int argc, char **argv, int *i,
		  struct cmd_opt *out, int *exit_status)
{
	const char *arg, *eq;

	if (*i >= argc)
		return stop(exit_status, -1);
	arg = argv[(*i)++];
	if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
		spec->usage(stdout);
		return stop(exit_status, 0);
	}
	if (strncmp(arg, "--", 2) || !arg[2]) {
		fprintf(stderr, "rocemu %s: unexpected argument '%s' (see --help)\n", spec->cmd,
			arg);
		return stop(exit_status, 2);
	}
	eq = strchr(arg, '=');
	if (eq) {
		snprintf(out->name, sizeof(out->name), "%.*s", (int)(eq - arg - 2), arg + 2);
		out->val = eq + 1;
		if (!is_flag(spec, out->name))
			return true;
		fprintf(stderr, "rocemu %s: --%s takes no value\n", spec->cmd, out->name);
		return stop(exit_status, 2);
	}
	snprintf(out->name, sizeof(out->name), "%s", arg + 2);
	out->val = NULL;
	if (is_flag(spec, out->name))
		return true;
	if (*i >= argc) {
		fprintf(stderr, "rocemu %s: --%s needs a value\n", spec->cmd, out->name);
		return stop(exit_status, 2);
	}
	out->val = argv[(*i)++];
	return true;
}

int cmd_opt_parse_uint(const char *val, unsigned max, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(val, &end, 10);
	if (errno || end == val || *end || v > max || *val == '-')
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

int cmd_opt_uint(const struct cmd_opt_spec *spec, const struct cmd_opt *o, unsigned max,
		 unsigned *out)
{
	if (cmd_opt_parse_uint(o->val, max, out) == 0)
		return 0;
	fprintf(stderr, "rocemu %s: --%s '%s': expected an integer 0..%u\n", spec->cmd, o->name,
		o->val, max);
	return -EINVAL;
}
