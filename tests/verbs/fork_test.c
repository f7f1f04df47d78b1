/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A child after fork() and its parent's context (issue 15.5): every verb on
 * the inherited context fails at once with EIO (the inline ones through the
 * context's tables too), the child says why in one line on stderr, importing
 * the inherited cmd_fd fails the same way, and ibv_close_device frees the
 * child's copy; the parent's context goes on working. A verb that reached
 * the parent's engine in the child would hang: the parent gives the child
 * 120 s before it calls that a failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <infiniband/verbs.h>

#include "test_util.h"

static struct ibv_device **devs;
static int n_devs;

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stdout, "child: line %d: %s (errno %d)\n", __LINE__, #cond,        \
				errno);                                                            \
			_exit(1);                                                                  \
		}                                                                                  \
	} while (0)

/* In the child: everything on the parent's context s fails with EIO. */
static void child(struct tu_side *s)
{
	struct ibv_wc wc;
	struct ibv_send_wr swr = {.opcode = IBV_WR_SEND}, *sbad = NULL;
	struct ibv_recv_wr rwr = {0}, *rbad = NULL;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct ibv_alloc_dm_attr dma = {.length = 64};
	union ibv_gid gid;

	errno = 0;
	CHECK(!ibv_alloc_pd(s->ctx) && errno == EIO);
	errno = 0;
	CHECK(!ibv_alloc_dm(s->ctx, &dma) &&
	      errno == EIO); /* test_multi_process_alloc_dm hung here */
	errno = 0;
	CHECK(!ibv_reg_mr(s->pd, s->buf, 4096, IBV_ACCESS_LOCAL_WRITE) && errno == EIO);
	CHECK(ibv_poll_cq(ibv_cq_ex_to_cq(s->cq), 1, &wc) < 0);
	CHECK(ibv_post_send(s->qp, &swr, &sbad) == EIO && sbad == &swr);
	CHECK(ibv_post_recv(s->qp, &rwr, &rbad) == EIO && rbad == &rwr);
	CHECK(ibv_req_notify_cq(ibv_cq_ex_to_cq(s->cq), 0) == EIO);
	struct ibv_poll_cq_attr pca = {0};
	CHECK(ibv_start_poll(s->cq, &pca) == EIO);
	ibv_wr_start(s->qpx);
	s->qpx->wr_id = 9;
	ibv_wr_send(s->qpx);
	ibv_wr_set_sge(s->qpx, s->mr->lkey, (uintptr_t)s->buf, 8);
	CHECK(ibv_wr_complete(s->qpx) == EIO);
	CHECK(ibv_query_device(s->ctx, &da) == EIO);
	CHECK(ibv_query_port(s->ctx, 1, &pa) == EIO);
	CHECK(ibv_query_gid(s->ctx, 1, 0, &gid) == -1 && errno == EIO);
	struct ibv_qp_attr qa = {.qp_state = IBV_QPS_ERR};
	CHECK(ibv_modify_qp(s->qp, &qa, IBV_QP_STATE) == EIO);
	CHECK(!ibv_create_cq(s->ctx, 4, NULL, NULL, 0) && errno == EIO);
	CHECK(ibv_dereg_mr(s->mr) == EIO);
	CHECK(ibv_destroy_qp(s->qp) == EIO);
	int fd = dup(s->ctx->cmd_fd);
	CHECK(fd >= 0);
	errno = 0;
	CHECK(!ibv_import_device(fd) && errno == EIO);
	close(fd);
	CHECK(ibv_close_device(s->ctx) == 0);
	/* the child's own context: not on a port the parent's DPDK holds, but
	 * refused at once (rocemu_port_open says why), never hung */
	struct ibv_context *own = ibv_open_device(devs[0]);
	if (own)
		CHECK(ibv_close_device(own) == 0);
	_exit(0);
}

static void inherited_context_fails(void **state)
{
	(void)state;
	struct tu_side s;
	int err[2];

	tu_side_open(&s, devs[0], IBV_QPT_RC);
	assert_int_equal(pipe(err), 0);
	fflush(stdout);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(err[1], 2);
		close(err[0]);
		child(&s);
	}
	close(err[1]);
	int status = -1;
	for (int i = 0; i < 1200; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		nanosleep(&(struct timespec){0, 100000000}, NULL);
	}
	if (waitpid(pid, &status, WNOHANG) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		fail_msg("the child hung on its parent's context");
	}
	char text[4096] = "";
	ssize_t n = read(err[0], text, sizeof(text) - 1);
	text[n > 0 ? n : 0] = '\0';
	close(err[0]);
	fprintf(stderr, "child's stderr:\n%s", text);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	const char *line = strstr(text, "a context of the parent process used in a child");
	assert_non_null(line);
	assert_null(strstr(line + 1, "a context of the parent process used in a child")); /* once */
	assert_non_null(strstr(text, "fd ")); /* and the import's own line */

	/* the parent's context is untouched: a SEND to itself over loopback */
	struct ibv_pd *pd = ibv_alloc_pd(s.ctx);
	assert_non_null(pd);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
	struct ibv_alloc_dm_attr dma = {.length = 64};
	struct ibv_dm *dm = ibv_alloc_dm(s.ctx, &dma);
	assert_non_null(dm);
	assert_int_equal(ibv_free_dm(dm), 0);
	tu_rc_to_rts(s.qp, &s.gid, TU_GID_INDEX, s.qp->qp_num, IBV_ACCESS_REMOTE_WRITE);
	tu_post_recv(&s, 1, 0, 64);
	tu_fill(s.buf + 1024, 64, 3);
	struct ibv_send_wr wr = {.wr_id = 2, .opcode = IBV_WR_SEND};
	tu_post_send(&s, &wr, 1024, 64);
	for (int k = 0; k < 2; k++)
		assert_int_equal(tu_side_poll(&s).status, IBV_WC_SUCCESS);
	assert_memory_equal(s.buf, s.buf + 1024, 64);
	tu_side_close(&s);
}

int main(void)
{
	char path[] = "/tmp/rocemu-fork-XXXXXX";

	devs = tu_devices(path, "[rocemu0]\nport = ring:fork:a\nip = 10.79.8.1/24\n", 1, &n_devs);
	if (!devs)
		return 1;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(inherited_context_fails),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	ibv_free_device_list(devs);
	return rc;
}
