/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device configuration of the drop-in libibverbs: a good file defines its
 * devices; every broken file gives one message naming the file, the line and
 * the problem; $ROCEMU_DEVICE (what `rocemu run` sets) works the same way.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "rocemu_config.h"

static struct rocemu_port_config cfgs[4];
static char path[64];

static const char *write_file(const char *text)
{
	snprintf(path, sizeof(path), "/tmp/rocemu-cfgtest-XXXXXX");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

/* Parse text as a file; return the error message ("" on success). */
static int parse(const char *text, unsigned *n, char *err, size_t errlen)
{
	const char *p = write_file(text);
	int rc = rocemu_config_parse_file(p, cfgs, 4, n, err, errlen);
	unlink(p);
	return rc;
}

/* The message starts with "FILE:LINE:" and mentions what. */
static void expect_error(const char *text, unsigned line, const char *what)
{
	char err[512], prefix[96];
	unsigned n = 99;

	int rc = parse(text, &n, err, sizeof(err));
	assert_int_equal(rc, -EINVAL);
	assert_int_equal(n, 0);
	snprintf(prefix, sizeof(prefix), "%s:%u:", path, line);
	if (strncmp(err, prefix, strlen(prefix)) || !strstr(err, what))
		fail_msg("error '%s' should start with '%s' and mention '%s'", err, prefix, what);
	assert_null(strchr(err, '\n')); /* one line */
}

static void two_devices(void **state)
{
	(void)state;
	char err[512];
	unsigned n = 0;
	int rc = parse("# two hosts\n"
		       "[rocemu0]\n"
		       "port = memif:server:/tmp/x.sock\n"
		       "ip = 10.0.0.1/24\n"
		       "capture = /tmp/a.pcap\n"
		       "\n"
		       "; second device\n"
		       "[ rocemu1 ]\n"
		       "  port=memif:client:/tmp/y.sock  \n"
		       "ip=10.0.1.1/24\n"
		       "ip=fd00::1/64\n",
		       &n, err, sizeof(err));
	if (rc)
		fail_msg("unexpected error: %s", err);
	assert_int_equal(n, 2);
	assert_string_equal(cfgs[0].name, "rocemu0");
	assert_string_equal(cfgs[0].spec, "memif:server:/tmp/x.sock");
	assert_string_equal(cfgs[0].capture_path, "/tmp/a.pcap");
	assert_int_equal(cfgs[0].n_ips, 1);
	assert_string_equal(cfgs[1].name, "rocemu1");
	assert_string_equal(cfgs[1].spec, "memif:client:/tmp/y.sock");
	assert_int_equal(cfgs[1].n_ips, 2);
	assert_true(cfgs[1].ips[1].is_v6);
}

static void unknown_option(void **state)
{
	(void)state;
	expect_error("[rocemu0]\nport = memif:server:/tmp/x.sock\nspeed = fast\n", 3, "speed");
}

static void bad_value(void **state)
{
	(void)state;
	expect_error("[rocemu0]\nport = memif:server:/tmp/x.sock\nip = 10.0.0.300/24\n", 3,
		     "10.0.0.300");
}

static void bad_port_spec(void **state)
{
	(void)state;
	expect_error("[rocemu0]\n\n\nport = carrier-pigeon:/tmp\n", 4, "carrier-pigeon");
}

static void option_before_section(void **state)
{
	(void)state;
	expect_error("port = memif:server:/tmp/x.sock\n[rocemu0]\n", 1, "section");
}

static void malformed_header(void **state)
{
	(void)state;
	expect_error("[rocemu0]\nport = memif:server:/tmp/x.sock\n[rocemu1\n", 3, "section header");
	expect_error("[]\n", 1, "empty device name");
}

static void missing_equals(void **state)
{
	(void)state;
	expect_error("[rocemu0]\nport memif:server:/tmp/x.sock\n", 2, "key = value");
}

static void duplicate_device(void **state)
{
	(void)state;
	expect_error("[rocemu0]\nport = memif:server:/tmp/x.sock\n[rocemu0]\nport = "
		     "memif:client:/tmp/x.sock\n",
		     3, "twice");
}

/* A section without a port fails validation: the message points at its header. */
static void device_without_port(void **state)
{
	(void)state;
	char err[512];
	unsigned n;
	int rc = parse("[rocemu0]\nport = memif:server:/tmp/x.sock\n[rocemu1]\nip = 10.0.0.2/24\n",
		       &n, err, sizeof(err));
	assert_int_equal(rc, -EINVAL);
	char prefix[96];
	snprintf(prefix, sizeof(prefix), "%s:3:", path);
	if (strncmp(err, prefix, strlen(prefix)) || !strstr(err, "rocemu1"))
		fail_msg("error '%s' should start with '%s' and name rocemu1", err, prefix);
}

static void too_many_devices(void **state)
{
	(void)state;
	expect_error("[a]\nport=ring:p:a\n[b]\nport=ring:p:b\n[c]\nport=ring:q:a\n[d]\nport=ring:q:"
		     "b\n[e]\nport=ring:r:a\n",
		     9, "too many");
}

static void empty_file(void **state)
{
	(void)state;
	char err[512];
	unsigned n;
	assert_int_equal(parse("# nothing here\n\n", &n, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "no device"));
	assert_non_null(strstr(err, path));
}

static void missing_file(void **state)
{
	(void)state;
	char err[512];
	unsigned n;
	int rc =
	    rocemu_config_parse_file("/nonexistent/rocemu.conf", cfgs, 4, &n, err, sizeof(err));
	assert_int_equal(rc, -EINVAL);
	assert_non_null(strstr(err, "/nonexistent/rocemu.conf"));
	assert_non_null(strstr(err, "cannot open"));
}

static void binary_file(void **state)
{
	(void)state;
	char err[512];
	unsigned n;
	const char bin[] = "[rocemu0]\nport=ring:p:a\n\0\x01\x02";
	snprintf(path, sizeof(path), "/tmp/rocemu-cfgtest-XXXXXX");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, bin, sizeof(bin)), (ssize_t)sizeof(bin));
	close(fd);
	assert_int_equal(rocemu_config_parse_file(path, cfgs, 4, &n, err, sizeof(err)), -EINVAL);
	unlink(path);
	assert_non_null(strstr(err, "binary"));
}

static void env_device(void **state)
{
	(void)state;
	char err[512];
	unsigned n = 0;

	unsetenv(ROCEMU_ENV_CONFIG);
	setenv(ROCEMU_ENV_DEVICE, "name=rocemu7\nport=memif:client:/tmp/z.sock\nip=10.9.0.2/24\n",
	       1);
	assert_int_equal(rocemu_config_load(cfgs, 4, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 1);
	assert_string_equal(cfgs[0].name, "rocemu7");
	assert_string_equal(cfgs[0].spec, "memif:client:/tmp/z.sock");

	setenv(ROCEMU_ENV_DEVICE, "port=memif:client:/tmp/z.sock\nipp=10.9.0.2/24\n", 1);
	assert_int_equal(rocemu_config_load(cfgs, 4, &n, err, sizeof(err)), -EINVAL);
	assert_int_equal(n, 0);
	if (strncmp(err, "ROCEMU_DEVICE:2:", 16) || !strstr(err, "ipp"))
		fail_msg("unexpected message '%s'", err);

	/* nothing configured: no devices, no error */
	unsetenv(ROCEMU_ENV_DEVICE);
	assert_int_equal(rocemu_config_load(cfgs, 4, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 0);
}

/* ROCEMU_CONFIG wins over ROCEMU_DEVICE. */
static void env_config_file(void **state)
{
	(void)state;
	char err[512];
	unsigned n = 0;
	const char *p = write_file("[fromfile]\nport=ring:cfg:a\n");

	setenv(ROCEMU_ENV_CONFIG, p, 1);
	setenv(ROCEMU_ENV_DEVICE, "name=fromenv\nport=ring:cfg:b\n", 1);
	int rc = rocemu_config_load(cfgs, 4, &n, err, sizeof(err));
	unlink(p);
	unsetenv(ROCEMU_ENV_CONFIG);
	unsetenv(ROCEMU_ENV_DEVICE);
	if (rc)
		fail_msg("unexpected error: %s", err);
	assert_int_equal(n, 1);
	assert_string_equal(cfgs[0].name, "fromfile");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(two_devices),
	    cmocka_unit_test(unknown_option),
	    cmocka_unit_test(bad_value),
	    cmocka_unit_test(bad_port_spec),
	    cmocka_unit_test(option_before_section),
	    cmocka_unit_test(malformed_header),
	    cmocka_unit_test(missing_equals),
	    cmocka_unit_test(duplicate_device),
	    cmocka_unit_test(device_without_port),
	    cmocka_unit_test(too_many_devices),
	    cmocka_unit_test(empty_file),
	    cmocka_unit_test(missing_file),
	    cmocka_unit_test(binary_file),
	    cmocka_unit_test(env_device),
	    cmocka_unit_test(env_config_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
