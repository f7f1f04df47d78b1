/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests for the key rule of a host NIC and for imported regions
 * (emulator/memory/mem_private.h, mr_import.c), against a stand-in engine:
 *  - a table's key tag: only before keys are out, only up to 65536 slots,
 *    never 0; every key carries it in its top byte;
 *  - two tables of two tags (two processes on one host) never share a key:
 *    every key of one, filled to its limit, fails to translate in the other;
 *  - an import: refused on an untagged engine, for the engine's own tag or
 *    tag 0, twice for one key; checked for PD, bounds and rights like any
 *    region; not deregistered (EINVAL), unimported; its PD busy meanwhile;
 *  - copies through an import (our own pid stands for the exporter): they
 *    land, stop once the exporter's stamp changes or the exporter exits,
 *    leave busy at 0; atomics on it fail with an access error;
 *  - another process's device memory: alignment and bounds as for our own,
 *    and no copy once the exporter's stamp changed.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine_stub.h"
#include "../../emulator/memory/mem_private.h"

#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static struct rocemu_engine *tagged_engine(uint32_t max_mr, uint8_t tag)
{
	struct rocemu_engine *e = stub_engine_new(max_mr);

	assert_int_equal(rocemu_mem_table_set_key_tag(e->mem, tag), 0);
	return e;
}

static uint32_t key_of(struct rocemu_mr *mr)
{
	struct rocemu_mr_info info;

	rocemu_mr_info(mr, &info);
	return info.lkey;
}

static void test_tag_rules(void **state)
{
	struct rocemu_mem_table *t;
	struct rocemu_engine *e = stub_engine_new(4);
	static uint8_t buf[64];
	struct rocemu_mr *mr;
	struct rocemu_pd *pd;

	(void)state;
	assert_int_equal(rocemu_mem_table_set_key_tag(e->mem, 0), -EINVAL);
	assert_int_equal(rocemu_pd_alloc(e, &pd), 0);
	assert_int_equal(rocemu_mr_reg(pd, buf, sizeof(buf), (uintptr_t)buf, ACC, &mr), 0);
	assert_int_equal(key_of(mr) >> 24, 0);				    /* standalone: no tag */
	assert_int_equal(rocemu_mem_table_set_key_tag(e->mem, 9), -EINVAL); /* keys are out */
	assert_int_equal(rocemu_mr_dereg(mr), 0);
	assert_int_equal(rocemu_pd_free(pd), 0);
	stub_engine_free(e);

	assert_int_equal(rocemu_mem_table_create(65536 - 16, 17, &t), 0);
	assert_int_equal(rocemu_mem_table_set_key_tag(t, 1), -EINVAL); /* 65537 slots */
	rocemu_mem_table_destroy(t);
	assert_int_equal(rocemu_mem_table_create(65536 - 16, 16, &t), 0);
	assert_int_equal(rocemu_mem_table_set_key_tag(t, 255), 0);
	rocemu_mem_table_destroy(t);
}

/* Two processes on one host: every key of each, with the slots filled
 * and churned, is its own tag's and translates in no other table. */
static void test_tags_disjoint(void **state)
{
	enum { N = 300 };
	struct rocemu_engine *e[2] = {tagged_engine(N, 3), tagged_engine(N, 4)};
	static uint8_t buf[64];
	struct rocemu_mr *mr[2][N];
	struct rocemu_pd *pd[2];

	(void)state;
	for (int k = 0; k < 2; k++) {
		assert_int_equal(rocemu_pd_alloc(e[k], &pd[k]), 0);
		for (int round = 0; round < 3; round++) /* reuse moves the variants on */
			for (int i = 0; i < N; i++) {
				if (round)
					assert_int_equal(rocemu_mr_dereg(mr[k][i]), 0);
				assert_int_equal(rocemu_mr_reg(pd[k], buf, sizeof(buf),
							       (uintptr_t)buf, ACC, &mr[k][i]),
						 0);
			}
	}
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < N; i++) {
			uint32_t key = key_of(mr[k][i]);

			assert_int_equal(key >> 24, 3 + k);
			assert_ptr_equal(rocemu_mem_lookup(e[k]->mem, key), mr[k][i]);
			assert_null(rocemu_mem_lookup(e[!k]->mem, key));
		}
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < N; i++)
			assert_int_equal(rocemu_mr_dereg(mr[k][i]), 0);
		assert_int_equal(rocemu_pd_free(pd[k]), 0);
		stub_engine_free(e[k]);
	}
}

static uint32_t busy, stamp;

/* An import of buf as the exporter's region (key of tag 7), our own pid
 * standing for the exporter. */
static struct rocemu_mem_foreign foreign_of(uint8_t *buf, size_t len, int pidfd)
{
	busy = 0;
	stamp = 41;
	return (struct rocemu_mem_foreign){.pid = getpid(),
					   .pidfd = pidfd,
					   .busy = &busy,
					   .stamp = &stamp,
					   .expect = 41,
					   .key = 7u << 24 | 0x1234u,
					   .addr = (uintptr_t)buf,
					   .length = len,
					   .iova = 0x10000,
					   .access = ACC};
}

static int self_pidfd(void)
{
	int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);

	if (fd < 0)
		skip();
	return fd;
}

static void test_import_rules(void **state)
{
	struct rocemu_engine *plain = stub_engine_new(4), *e = tagged_engine(4, 5);
	static uint8_t buf[256];
	int pidfd = self_pidfd();
	struct rocemu_mem_foreign f = foreign_of(buf, sizeof(buf), pidfd);
	struct rocemu_pd *pd, *pd2, *ppd;
	struct rocemu_mr *mr, *mr2;
	uint8_t *p;

	(void)state;
	assert_int_equal(rocemu_pd_alloc(plain, &ppd), 0);
	assert_int_equal(rocemu_mr_import(ppd, &f, &mr), -EINVAL); /* standalone */
	assert_int_equal(rocemu_pd_alloc(e, &pd), 0);
	assert_int_equal(rocemu_pd_alloc(e, &pd2), 0);
	f.key = 5u << 24 | 0x1234u;
	assert_int_equal(rocemu_mr_import(pd, &f, &mr), -EINVAL); /* our own tag */
	f.key = 0x1234u;
	assert_int_equal(rocemu_mr_import(pd, &f, &mr), -EINVAL); /* a standalone key */
	f.key = 7u << 24 | 0x1234u;
	assert_int_equal(rocemu_mr_import(pd, &f, &mr), 0);
	assert_int_equal(rocemu_mr_import(pd, &f, &mr2), -EEXIST);
	assert_int_equal(key_of(mr), f.key);
	struct rocemu_mem_table *t = e->mem;
	assert_int_equal(rocemu_mem_translate(t, pd, 9, f.key, true, 0x10000, 256,
					      ROCEMU_RIGHT_REMOTE_WRITE, &p),
			 ROCEMU_MEM_OK);
	assert_int_equal(rocemu_mem_translate(t, pd2, 9, f.key, true, 0x10000, 256,
					      ROCEMU_RIGHT_REMOTE_WRITE, &p),
			 ROCEMU_MEM_BAD_PD);
	assert_int_equal(rocemu_mem_translate(t, pd, 9, f.key, true, 0x10001, 256,
					      ROCEMU_RIGHT_REMOTE_WRITE, &p),
			 ROCEMU_MEM_BOUNDS);
	assert_int_equal(
	    rocemu_mem_translate(t, pd, 9, f.key, true, 0x10000, 8, ROCEMU_RIGHT_REMOTE_ATOMIC, &p),
	    ROCEMU_MEM_ACCESS);
	assert_int_equal(rocemu_mr_dereg(mr), -EINVAL);
	assert_int_equal(rocemu_pd_free(pd), -EBUSY);
	assert_int_equal(rocemu_mr_unimport(mr), 0);
	assert_null(rocemu_mem_lookup(t, f.key));
	assert_int_equal(rocemu_pd_free(pd), 0);
	assert_int_equal(rocemu_pd_free(pd2), 0);
	assert_int_equal(rocemu_pd_free(ppd), 0);
	stub_engine_free(plain);
	stub_engine_free(e);
	close(pidfd);
}

static void test_import_copies(void **state)
{
	struct rocemu_engine *e = tagged_engine(4, 5);
	static uint8_t buf[256], data[256], back[256];
	int pidfd = self_pidfd();
	struct rocemu_mem_foreign f = foreign_of(buf, sizeof(buf), pidfd);
	struct rocemu_mem_table *t = e->mem;
	struct rocemu_pd *pd;
	struct rocemu_mr *mr;
	uint64_t orig;

	(void)state;
	assert_int_equal(rocemu_pd_alloc(e, &pd), 0);
	assert_int_equal(rocemu_mr_import(pd, &f, &mr), 0);
	memset(data, 0x5a, sizeof(data));
	assert_int_equal(rocemu_mem_remote_write(t, pd, 9, f.key, 0x10000, data, 256),
			 ROCEMU_MEM_OK);
	assert_memory_equal(buf, data, 256);
	assert_int_equal(rocemu_mem_remote_read(t, pd, 9, f.key, 0x10080, back, 128),
			 ROCEMU_MEM_OK);
	assert_memory_equal(back, data, 128);
	struct ibv_sge sge = {.addr = 0x10010, .length = 16, .lkey = f.key};
	assert_int_equal(rocemu_mem_gather(t, pd, &sge, 1, 0, back, 16), ROCEMU_MEM_OK);
	assert_int_equal(busy, 0);
	assert_int_equal(rocemu_mem_atomic(t, pd, 9, f.key, 0x10000, false, 0, 1, &orig),
			 ROCEMU_MEM_ACCESS);
	/* the exporter deregistered: its stamp changed; nothing is written */
	stamp = 0;
	memset(data, 0x66, sizeof(data));
	assert_int_equal(rocemu_mem_remote_write(t, pd, 9, f.key, 0x10000, data, 256),
			 ROCEMU_MEM_FAULT);
	assert_int_equal(buf[0], 0x5a);
	assert_int_equal(busy, 0);
	assert_int_equal(rocemu_mr_unimport(mr), 0);

	/* an exporter that exited */
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0)
		_exit(0);
	int cfd = (int)syscall(SYS_pidfd_open, child, 0);
	assert_true(cfd >= 0);
	struct pollfd pf = {.fd = cfd, .events = POLLIN};
	assert_int_equal(poll(&pf, 1, 10000), 1);
	f = foreign_of(buf, sizeof(buf), cfd);
	f.pid = child; /* a zombie until reaped: its memory is gone */
	assert_int_equal(rocemu_mr_import(pd, &f, &mr), 0);
	assert_int_equal(rocemu_mem_remote_write(t, pd, 9, f.key, 0x10000, data, 256),
			 ROCEMU_MEM_FAULT);
	assert_int_equal(buf[0], 0x5a);
	assert_int_equal(rocemu_mr_unimport(mr), 0);
	waitpid(child, NULL, 0);
	close(cfd);
	assert_int_equal(rocemu_pd_free(pd), 0);
	stub_engine_free(e);
	close(pidfd);
}

/* Another process's device memory: rocemu_dm_copy's rules, then the stamp. */
static void test_dm_copy_foreign(void **state)
{
	static uint8_t dm[64], host[64];
	int pidfd = self_pidfd();
	struct rocemu_mem_foreign f = foreign_of(dm, sizeof(dm), pidfd);

	(void)state;
	memset(host, 0x3c, sizeof(host));
	assert_int_equal(rocemu_dm_copy_foreign(&f, 0, host, 64, true), 0);
	assert_memory_equal(dm, host, 64);
	assert_int_equal(rocemu_dm_copy_foreign(&f, 2, host, 4, true), -EINVAL); /* unaligned */
	assert_int_equal(rocemu_dm_copy_foreign(&f, 0, host, 6, false), -EINVAL);
	assert_int_equal(rocemu_dm_copy_foreign(&f, 60, host, 8, false), -EFAULT); /* past end */
	assert_int_equal(rocemu_dm_copy_foreign(&f, 68, host, 0, false), -EFAULT);
	assert_int_equal(rocemu_dm_copy_foreign(&f, 16, host, 16, false), 0);
	stamp = 0; /* the exporter freed it */
	memset(host, 0x77, sizeof(host));
	assert_int_equal(rocemu_dm_copy_foreign(&f, 0, host, 64, true), -EFAULT);
	assert_int_equal(dm[0], 0x3c);
	assert_int_equal(busy, 0);
	close(pidfd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tag_rules),	    cmocka_unit_test(test_tags_disjoint),
	    cmocka_unit_test(test_import_rules),    cmocka_unit_test(test_import_copies),
	    cmocka_unit_test(test_dm_copy_foreign),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
