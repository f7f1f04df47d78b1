/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The cmocka fixture of the memory and queue unit tests: a stand-in engine
 * (engine_stub.h) and one or two PDs on it. Include after <cmocka.h>.
 */
#ifndef ROCEMU_TEST_STUB_FIXTURE_H
#define ROCEMU_TEST_STUB_FIXTURE_H

#include <stdlib.h>

#include "engine_stub.h"

struct fixture {
	struct rocemu_engine *e;
	struct rocemu_pd *pd, *pd2; /* pd2 only with two_pds */
	unsigned notified;	    /* free for a test's callbacks */
};

/* *state = a new fixture on an engine with max_mr MR slots. */
static inline int fixture_setup(void **state, uint32_t max_mr, bool two_pds)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->e = stub_engine_new(max_mr);
	assert_non_null(f->e);
	assert_int_equal(rocemu_pd_alloc(f->e, &f->pd), 0);
	if (two_pds)
		assert_int_equal(rocemu_pd_alloc(f->e, &f->pd2), 0);
	*state = f;
	return 0;
}

static inline int fixture_teardown(void **state)
{
	struct fixture *f = *state;

	/* Whatever a test left registered is freed by the table (ASan checks). */
	stub_engine_free(f->e);
	free(f);
	return 0;
}

/* A test between the including file's setup (fixture_setup with its sizes)
 * and fixture_teardown. */
#define FIXTURE_TEST(f) cmocka_unit_test_setup_teardown(f, setup, fixture_teardown)

#endif
