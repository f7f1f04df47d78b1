/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Where rocemu devices come from: never /sys or /dev, only configuration.
 *
 *  - $ROCEMU_CONFIG names a file with one section per device:
 *        [rocemu0]
 *        port = memif:server:/tmp/x.sock
 *        ip = 10.0.0.1/24
 *        capture = /tmp/a.pcap
 *    Every key is an option of rocemu_port_config_set(), so the file,
 *    `rocemu port` and `rocemu run` accept the same words.
 *  - Otherwise $ROCEMU_DEVICE holds one device as newline-separated
 *    key=value lines (what `rocemu run` sets); "name" defaults to rocemu0.
 *  - Otherwise $ROCEMU_HOST=NAME makes rocemu0 a context on the rocemu host
 *    NAME (port = host:NAME), for programs another launcher starts.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errno.h>
#include <stdbool.h>

#include "rocemu_config.h"

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}

/* Finish one device: validate it and check its name is unique. */
static int finish_device(const char *where, unsigned line, struct rocemu_port_config *cfgs,
			 unsigned idx, char *err, size_t errlen)
{
	char why[256] = "";

	if (rocemu_port_config_validate(&cfgs[idx], why, sizeof(why)) < 0) {
		snprintf(err, errlen, "%s:%u: device [%s]: %s", where, line, cfgs[idx].name,
			 why[0] ? why : "invalid configuration");
		return -EINVAL;
	}
	return 0;
}

/* Apply one "key = value" line to cfg. */
static int apply_line(const char *where, unsigned line, struct rocemu_port_config *cfg, char *s,
		      char *err, size_t errlen)
{
	char *eq = strchr(s, '=');
	char why[256] = "";

	if (!eq) {
		snprintf(err, errlen, "%s:%u: expected 'key = value', got '%s'", where, line, s);
		return -EINVAL;
	}
	*eq = '\0';
	char *key = trim(s), *val = trim(eq + 1);
	if (!*key) {
		snprintf(err, errlen, "%s:%u: missing key before '='", where, line);
		return -EINVAL;
	}
	int rc = rocemu_port_config_set(cfg, key, val, why, sizeof(why));
	if (rc < 0) {
		snprintf(err, errlen, "%s:%u: %s", where, line,
			 why[0] ? why : (rc == -ENOENT ? "unknown option" : "bad value"));
		return -EINVAL;
	}
	return 0;
}

static bool name_taken(const struct rocemu_port_config *cfgs, unsigned n, const char *name)
{
	for (unsigned i = 0; i < n; i++)
		if (!strcmp(cfgs[i].name, name))
			return true;
	return false;
}

/* Parse a section header "[name]" into a fresh device. */
static int start_device(const char *where, unsigned line, char *s, struct rocemu_port_config *cfgs,
			unsigned max, unsigned n, char *err, size_t errlen)
{
	char *close = strchr(s, ']');
	char why[256] = "";

	if (!close || close[1] != '\0') {
		snprintf(err, errlen, "%s:%u: malformed section header '%s' (expected [name])",
			 where, line, s);
		return -EINVAL;
	}
	*close = '\0';
	char *name = trim(s + 1);
	if (!*name) {
		snprintf(err, errlen, "%s:%u: empty device name in section header", where, line);
		return -EINVAL;
	}
	if (n >= max) {
		snprintf(err, errlen, "%s:%u: too many devices (at most %u)", where, line, max);
		return -EINVAL;
	}
	if (name_taken(cfgs, n, name)) {
		snprintf(err, errlen, "%s:%u: device [%s] defined twice", where, line, name);
		return -EINVAL;
	}
	rocemu_port_config_init(&cfgs[n]);
	if (rocemu_port_config_set(&cfgs[n], "name", name, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "%s:%u: bad device name '%s': %s", where, line, name, why);
		return -EINVAL;
	}
	return 0;
}

/* The parser shared by the file and $ROCEMU_DEVICE. sections: whether [name] lines are expected. */
static int parse_text(const char *where, char *text, bool sections, struct rocemu_port_config *cfgs,
		      unsigned max, unsigned *n, char *err, size_t errlen)
{
	unsigned line = 0, dev_line = 0;
	bool in_dev = false;
	char *save = NULL;
	int rc;

	*n = 0;
	if (!sections) {
		rocemu_port_config_init(&cfgs[0]);
		in_dev = true;
		dev_line = 1;
	}
	/* strsep keeps empty lines, so line numbers stay right. */
	for (char *p = text; (save = strsep(&p, "\n")) != NULL;) {
		line++;
		char *s = trim(save);
		if (!*s || *s == '#' || *s == ';')
			continue;
		if (*s == '[') {
			if (!sections) {
				snprintf(err, errlen, "%s:%u: sections are not allowed here", where,
					 line);
				return -EINVAL;
			}
			if (in_dev &&
			    (rc = finish_device(where, dev_line, cfgs, *n - 1, err, errlen)))
				return rc;
			if ((rc = start_device(where, line, s, cfgs, max, *n, err, errlen)))
				return rc;
			(*n)++;
			in_dev = true;
			dev_line = line;
			continue;
		}
		if (!in_dev) {
			snprintf(
			    err, errlen,
			    "%s:%u: option outside a device section (start one with [rocemu0])",
			    where, line);
			return -EINVAL;
		}
		if ((rc = apply_line(where, line, &cfgs[sections ? *n - 1 : 0], s, err, errlen)))
			return rc;
	}
	if (!sections)
		*n = 1;
	if (*n == 0) {
		snprintf(err, errlen, "%s: no device defined (add a section such as [rocemu0])",
			 where);
		return -EINVAL;
	}
	return finish_device(where, dev_line, cfgs, *n - 1, err, errlen);
}

static char *read_file(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return NULL;
	}
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	while (buf) {
		size_t got = fread(buf + len, 1, cap - len - 1, f);
		len += got;
		if (len < cap - 1)
			break;
		if (cap >= (1u << 20)) {
			snprintf(err, errlen, "%s: file too large (over 1 MiB)", path);
			free(buf);
			buf = NULL;
			break;
		}
		char *bigger = realloc(buf, cap * 2);
		if (!bigger) {
			free(buf);
			buf = NULL;
			break;
		}
		buf = bigger;
		cap *= 2;
	}
	if (buf && ferror(f)) {
		snprintf(err, errlen, "%s: read error: %s", path, strerror(errno));
		free(buf);
		buf = NULL;
	} else if (!buf && !err[0]) {
		snprintf(err, errlen, "%s: out of memory", path);
	}
	fclose(f);
	if (buf) {
		buf[len] = '\0';
		if (memchr(buf, '\0', len)) {
			snprintf(err, errlen, "%s: binary file (NUL byte), not a rocemu config",
				 path);
			free(buf);
			return NULL;
		}
	}
	return buf;
}

int rocemu_config_parse_file(const char *path, struct rocemu_port_config *cfgs, unsigned max,
			     unsigned *n, char *err, size_t errlen)
{
	err[0] = '\0';
	*n = 0;
	char *text = read_file(path, err, errlen);
	if (!text)
		return -EINVAL;
	int rc = parse_text(path, text, true, cfgs, max, n, err, errlen);
	free(text);
	if (rc)
		*n = 0;
	return rc;
}

int rocemu_config_load(struct rocemu_port_config *cfgs, unsigned max, unsigned *n, char *err,
		       size_t errlen)
{
	const char *path = getenv(ROCEMU_ENV_CONFIG);
	const char *dev = getenv(ROCEMU_ENV_DEVICE);

	err[0] = '\0';
	*n = 0;
	const char *host = getenv(ROCEMU_ENV_HOST);
	char host_dev[ROCEMU_PORT_SPEC_MAX + 16];

	if (path && *path)
		return rocemu_config_parse_file(path, cfgs, max, n, err, errlen);
	if ((!dev || !*dev) && host && *host) {
		/* a program started by another launcher (mpirun) on a rocemu host */
		snprintf(host_dev, sizeof(host_dev), "port=host:%s", host);
		dev = host_dev;
	}
	if (!dev || !*dev || max == 0)
		return 0;
	char *text = strdup(dev);
	if (!text) {
		snprintf(err, errlen, "ROCEMU_DEVICE: out of memory");
		return -ENOMEM;
	}
	int rc = parse_text("ROCEMU_DEVICE", text, false, cfgs, max, n, err, errlen);
	free(text);
	if (rc)
		*n = 0;
	return rc;
}
