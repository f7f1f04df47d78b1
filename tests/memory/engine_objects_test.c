/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory and queue objects on a real engine (one net_ring port): limits
 * from the engine's caps, AH source GIDs checked against the port's real
 * GID table, rocemu_cq_poll from several threads while the progress thread
 * runs (poll must call progress without the lock: a deadlock here hangs the
 * test and meson's timeout fails it), and engine destruction with objects
 * still alive (the MR table frees them; ASan reports a leak otherwise).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "rocemu_internal.h"

static struct rocemu_engine *engine_up(const char *spec)
{
	struct rocemu_port_config cfg;
	struct rocemu_engine *e = NULL;
	char err[256];

	rocemu_port_config_init(&cfg);
	assert_int_equal(rocemu_port_config_set(&cfg, "port", spec, err, sizeof(err)), 0);
	assert_int_equal(rocemu_port_config_set(&cfg, "ip", "10.78.0.1/24", err, sizeof(err)), 0);
	assert_int_equal(rocemu_port_config_set(&cfg, "ip", "fd00:78::1/64", err, sizeof(err)), 0);
	if (rocemu_engine_create(&cfg, &e, err, sizeof(err)) < 0) {
		print_error("engine: %s\n", err);
		fail();
	}
	return e;
}

static void test_caps_and_ah(void **state)
{
	struct rocemu_engine *e = engine_up("ring:memq_caps:a");
	struct ibv_ah_attr attr = {.is_global = 1};
	struct rocemu_caps caps;
	struct rocemu_cq *cq;
	struct rocemu_srq *srq;
	struct rocemu_ah *ah;
	struct rocemu_pd *pd;
	unsigned ngid;

	(void)state;
	rocemu_engine_caps(e, &caps);
	assert_true(caps.odp);
	assert_true(caps.atomic_hca);
	assert_int_equal(rocemu_pd_alloc(e, &pd), 0);
	assert_int_equal(rocemu_cq_create(e, caps.max_cqe + 1, NULL, NULL, NULL, &cq), -EINVAL);
	assert_int_equal(rocemu_cq_create(e, caps.max_cqe, NULL, NULL, NULL, &cq), 0);
	assert_int_equal(rocemu_cq_destroy(cq), 0);
	assert_int_equal(rocemu_srq_create(pd, caps.max_srq_wr + 1, 1, 0, NULL, &srq), -EINVAL);
	assert_int_equal(rocemu_srq_create(pd, 4, caps.max_srq_sge + 1, 0, NULL, &srq), -EINVAL);
	ngid = rocemu_port_gid_count(rocemu_engine_port(e));
	assert_true(ngid >= 2); /* one IPv4, one IPv6 */
	attr.grh.hop_limit = 64;
	attr.grh.sgid_index = (uint8_t)ngid;
	assert_int_equal(rocemu_ah_create(pd, &attr, &ah), -EINVAL);
	attr.grh.sgid_index = (uint8_t)(ngid - 1);
	assert_int_equal(rocemu_ah_create(pd, &attr, &ah), 0);
	assert_int_equal(rocemu_pd_free(pd), -EBUSY);
	assert_int_equal(rocemu_ah_destroy(ah), 0);
	assert_int_equal(rocemu_pd_free(pd), 0);
	rocemu_engine_destroy(e);
}

struct poller {
	struct rocemu_cq *cq;
	int errors;
};

static void *poll_loop(void *arg)
{
	struct poller *p = arg;
	struct rocemu_wc wc[8];

	for (int i = 0; i < 20000; i++)
		p->errors += rocemu_cq_poll(p->cq, 8, wc) != 0;
	return NULL;
}

static void test_poll_from_threads(void **state)
{
	struct rocemu_engine *e = engine_up("ring:memq_poll:a");
	struct poller p[3];
	pthread_t th[3];
	struct rocemu_cq *cq;

	(void)state;
	assert_int_equal(rocemu_cq_create(e, 16, NULL, NULL, NULL, &cq), 0);
	for (int i = 0; i < 3; i++) {
		p[i] = (struct poller){.cq = cq};
		assert_int_equal(pthread_create(&th[i], NULL, poll_loop, &p[i]), 0);
	}
	for (int i = 0; i < 3; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(p[i].errors, 0);
	}
	assert_int_equal(rocemu_cq_destroy(cq), 0);
	rocemu_engine_destroy(e);
}

static void test_destroy_with_objects_alive(void **state)
{
	struct rocemu_engine *e = engine_up("ring:memq_left:a");
	struct ibv_ah_attr attr = {.is_global = 1, .grh = {.hop_limit = 64}};
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct rocemu_mr *mr, *odp;
	struct rocemu_srq *srq;
	struct rocemu_cq *cq;
	struct rocemu_ah *ah;
	struct rocemu_pd *pd;
	uint8_t *buf;

	(void)state;
	buf = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(buf != MAP_FAILED);
	assert_int_equal(rocemu_pd_alloc(e, &pd), 0);
	assert_int_equal(rocemu_mr_reg(pd, buf, page, 0, IBV_ACCESS_LOCAL_WRITE, &mr), 0);
	assert_int_equal(rocemu_mr_reg(pd, NULL, SIZE_MAX, 0,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND, &odp),
			 0);
	assert_int_equal(rocemu_cq_create(e, 8, NULL, NULL, NULL, &cq), 0);
	assert_int_equal(rocemu_srq_create(pd, 8, 1, 0, NULL, &srq), 0);
	assert_int_equal(rocemu_ah_create(pd, &attr, &ah), 0);
	rocemu_engine_destroy(e);
	munmap(buf, page);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_caps_and_ah),
	    cmocka_unit_test(test_poll_from_threads),
	    cmocka_unit_test(test_destroy_with_objects_alive),
	};

	if (rocemu_eal_init() < 0) {
		printf("skip: EAL cannot start here: %s\n", rocemu_eal_error());
		return 77;
	}
	return cmocka_run_group_tests_name("engine_objects", tests, NULL, NULL);
}
