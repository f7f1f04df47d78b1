/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Issue 20.10: when the engine cannot resolve a destination's MAC (ARP for
 * IPv4, ND for IPv6: nobody answers), an RC send fails with RETRY_EXC_ERR, a
 * UD datagram is dropped and completes (as from a NIC), and the user is told
 * why on stderr, once per address: "rocemu:
 * DEV: cannot resolve ADDR (ARP|ND): ...". One device on a ring port whose
 * other end nobody opens; short ARP timers.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <infiniband/verbs.h>

#include "test_util.h"

struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t buf[64];
};

static struct dev D;

/* An RC QP on D connected to dgid (from GID index sgid), in RTS. */
static struct ibv_qp *qp_to(const char *dst, int sgid)
{
	struct ibv_qp_init_attr init = {
	    .send_cq = D.cq,
	    .recv_cq = D.cq,
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qp = ibv_create_qp(D.pd, &init);
	union ibv_gid gid = {0};

	assert_non_null(qp);
	if (strchr(dst, ':')) {
		assert_int_equal(inet_pton(AF_INET6, dst, gid.raw), 1);
	} else {
		gid.raw[10] = gid.raw[11] = 0xff;
		assert_int_equal(inet_pton(AF_INET, dst, gid.raw + 12), 1);
	}
	tu_rc_to_rts(qp, &gid, (uint8_t)sgid, 0x99, IBV_ACCESS_REMOTE_WRITE);
	return qp;
}

/* A WRITE to dst fails with RETRY_EXC_ERR (the address never resolves). */
static void write_fails(const char *dst, int sgid)
{
	struct ibv_qp *qp = qp_to(dst, sgid);
	struct ibv_sge sge = {(uintptr_t)D.buf, 8, D.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 1,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED,
				 .wr = {.rdma = {.remote_addr = 0x1000, .rkey = 0x77}}};
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	double end = tu_now() + 20;
	int n;

	assert_int_equal(ibv_post_send(qp, &wr, &bad), 0);
	while ((n = ibv_poll_cq(D.cq, 1, &wc)) == 0 && tu_now() < end)
		usleep(1000);
	assert_int_equal(n, 1);
	assert_int_equal(wc.status, IBV_WC_RETRY_EXC_ERR);
	ibv_destroy_qp(qp);
}

/* A UD SEND to dst completes successfully: the datagram is dropped, as a NIC
 * would send it to nobody (the address is said on stderr all the same). */
static void ud_send_dropped(const char *dst)
{
	struct ibv_qp_init_attr init = {
	    .send_cq = D.cq,
	    .recv_cq = D.cq,
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = IBV_QPT_UD,
	};
	struct ibv_qp *qp = ibv_create_qp(D.pd, &init);
	struct ibv_ah_attr ah_attr = {.is_global = 1, .port_num = 1};
	struct ibv_sge sge = {(uintptr_t)D.buf, 8, D.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 2,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED};
	struct ibv_send_wr *bad;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	double end = tu_now() + 20;
	int n;

	assert_non_null(qp);
	tu_ud_to_rts(qp, 0x11, 0);
	ah_attr.grh.hop_limit = 64;
	ah_attr.grh.sgid_index = 1;
	ah_attr.grh.dgid.raw[10] = ah_attr.grh.dgid.raw[11] = 0xff;
	assert_int_equal(inet_pton(AF_INET, dst, ah_attr.grh.dgid.raw + 12), 1);
	ah = ibv_create_ah(D.pd, &ah_attr);
	assert_non_null(ah);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = 0x99;
	wr.wr.ud.remote_qkey = 0x11;
	assert_int_equal(ibv_post_send(qp, &wr, &bad), 0);
	while ((n = ibv_poll_cq(D.cq, 1, &wc)) == 0 && tu_now() < end)
		usleep(1000);
	assert_int_equal(n, 1);
	assert_int_equal(wc.wr_id, 2);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	ibv_destroy_ah(ah);
	ibv_destroy_qp(qp);
}

/* How many times needle occurs in the file at path. */
static unsigned count_in_file(const char *path, const char *needle)
{
	static char text[65536];
	FILE *f = fopen(path, "r");
	size_t len;
	unsigned n = 0;

	assert_non_null(f);
	len = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[len] = 0;
	for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

static void unresolved_address_is_said_once(void **state)
{
	char cfg_path[] = "/tmp/rocemu-nu-XXXXXX", err_path[] = "/tmp/rocemu-nu-err-XXXXXX";
	struct ibv_device **list;
	int n, saved, fd;
	(void)state;

	list = tu_devices(cfg_path,
			  "[rocemu0]\nport = ring:nunreach:a\nip = 10.96.0.1/24\n"
			  "ip = fd00:96::1/64\narp-timeout = 20\narp-retries = 2\n",
			  1, &n);
	assert_non_null(list);
	D.ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	assert_non_null(D.ctx);
	D.pd = ibv_alloc_pd(D.ctx);
	D.cq = ibv_create_cq(D.ctx, 16, NULL, NULL, 0);
	D.mr = ibv_reg_mr(D.pd, D.buf, sizeof(D.buf), IBV_ACCESS_LOCAL_WRITE);
	assert_true(D.pd && D.cq && D.mr);

	fd = mkstemp(err_path);
	assert_true(fd >= 0);
	fflush(stderr);
	saved = dup(2);
	dup2(fd, 2);
	close(fd);
	write_fails("10.96.0.9", 1);
	write_fails("10.96.0.9", 1); /* the same address again: said once */
	write_fails("fd00:96::9", 2);
	ud_send_dropped("10.96.0.8");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);

	assert_int_equal(count_in_file(err_path, "rocemu: rocemu0: cannot resolve 10.96.0.9 (ARP)"),
			 1);
	assert_int_equal(count_in_file(err_path, "rocemu: rocemu0: cannot resolve fd00:96::9 (ND)"),
			 1);
	assert_int_equal(count_in_file(err_path, "rocemu: rocemu0: cannot resolve 10.96.0.8 (ARP)"),
			 1);
	unlink(err_path);
	ibv_dereg_mr(D.mr);
	ibv_destroy_cq(D.cq);
	ibv_dealloc_pd(D.pd);
	ibv_close_device(D.ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(unresolved_address_is_said_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
