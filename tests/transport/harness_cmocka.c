/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The harness helpers that fail a cmocka test or run a cmocka group. Apart
 * from harness.c, which programs outside cmocka (bench/) link too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "harness.h"

struct rocemu_mr *h_reg(struct rocemu_pd *pd, void *p, size_t len, unsigned access)
{
	struct rocemu_mr *mr = NULL;

	assert_int_equal(rocemu_mr_reg(pd, p, len, (uintptr_t)p, access, &mr), 0);
	return mr;
}

static struct {
	struct node *a, *b;
	const char *pair, *capture;
} group;

static int group_setup(void **state)
{
	(void)state;
	return h_setup(group.a, group.b, group.pair, group.capture) == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	h_teardown_all(group.a, group.b);
	return 0;
}

int h_run_group(const char *name, const struct CMUnitTest *tests, size_t n, struct node *a,
		struct node *b, const char *pair, const char *capture)
{
	if (rocemu_eal_init() < 0) {
		fprintf(stderr, "skip: %s\n", rocemu_eal_error());
		return 77;
	}
	group.a = a;
	group.b = b;
	group.pair = pair;
	group.capture = capture;
	return _cmocka_run_group_tests(name, tests, n, group_setup, group_teardown);
}
