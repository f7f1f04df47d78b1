/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sharing objects between contexts (issue 15.5) through rocemu's
 * libibverbs in one process: two devices on an in-process ring pair are
 * two hosts, a and b.
 *  - cmd_fd: an open file per context, dup()able, fstat()able, close-on-exec,
 *    closed by ibv_close_device;
 *  - ibv_import_device(3) on a dup of it, ibv_import_pd/mr/dm(3) by handle:
 *    the same objects (keys, contents), in both directions; the errors for a
 *    bad fd, a foreign fd, no such handle, a handle of another type;
 *  - an RDMA WRITE from a QP of the importing context out of the imported
 *    region, and the peer's WRITE into it, also after the exporting context
 *    closed;
 *  - every order of destroying, unimporting and closing: one destroy per
 *    object, through whichever wrapper, the other wrapper's destroy then
 *    EINVAL (no use after free: the ASan build runs this test);
 *  - a context's fd passed by SCM_RIGHTS to another rocemu process (this
 *    program again, exec'ed): EOPNOTSUPP there, and one line saying why.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <infiniband/verbs.h>

#include "test_util.h"

static struct ibv_device **devs;
static int n_devs;

#define MR_RW (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static ino_t ino_of(int fd)
{
	struct stat st;

	assert_int_equal(fstat(fd, &st), 0);
	return st.st_ino;
}

static struct ibv_context *import_dup(struct ibv_context *ctx)
{
	int fd = dup(ctx->cmd_fd);

	assert_true(fd >= 0);
	struct ibv_context *c = ibv_import_device(fd);
	assert_non_null(c);
	assert_int_equal(c->cmd_fd, fd);
	return c;
}

static void cmd_fd_is_a_file(void **state)
{
	(void)state;
	struct ibv_context *c1 = ibv_open_device(devs[0]);
	struct ibv_context *c2 = ibv_open_device(devs[0]);

	assert_non_null(c1);
	assert_non_null(c2);
	assert_true(c1->cmd_fd >= 0 && c2->cmd_fd >= 0);
	assert_int_not_equal(ino_of(c1->cmd_fd), ino_of(c2->cmd_fd));
	assert_true(fcntl(c1->cmd_fd, F_GETFD) & FD_CLOEXEC);
	int d = dup(c1->cmd_fd);
	assert_true(d >= 0);
	assert_int_equal(ino_of(d), ino_of(c1->cmd_fd));
	assert_int_equal(close(d), 0);
	int fd = c1->cmd_fd;
	assert_int_equal(ibv_close_device(c1), 0);
	assert_int_equal(fcntl(fd, F_GETFD), -1); /* closed with its context */
	assert_int_equal(errno, EBADF);
	assert_int_equal(ibv_close_device(c2), 0);
}

static void import_errors(void **state)
{
	(void)state;
	struct ibv_context *c = ibv_open_device(devs[0]);
	assert_non_null(c);

	errno = 0;
	assert_null(ibv_import_device(-1));
	assert_int_equal(errno, EBADF);
	int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	assert_true(null_fd >= 0);
	errno = 0;
	assert_null(ibv_import_device(null_fd)); /* not a context's */
	assert_int_equal(errno, EINVAL);
	close(null_fd);

	struct ibv_pd *pd = ibv_alloc_pd(c);
	assert_non_null(pd);
	uint8_t *buf = calloc(1, 4096);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 4096, MR_RW);
	assert_non_null(mr);
	struct ibv_alloc_dm_attr da = {.length = 256};
	struct ibv_dm *dm = ibv_alloc_dm(c, &da);
	assert_non_null(dm);
	assert_int_not_equal(pd->handle, mr->handle);
	assert_int_not_equal(mr->handle, dm->handle);

	errno = 0;
	assert_null(ibv_import_pd(c, 0));
	assert_int_equal(errno, ENOENT);
	errno = 0;
	assert_null(ibv_import_pd(c, pd->handle ^ 0x100000)); /* a stale use of its slot */
	assert_int_equal(errno, ENOENT);
	errno = 0;
	assert_null(ibv_import_pd(c, mr->handle));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(ibv_import_mr(pd, dm->handle));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(ibv_import_dm(c, pd->handle));
	assert_int_equal(errno, EINVAL);

	/* a handle of another context's file is not this one's */
	struct ibv_context *other = ibv_open_device(devs[0]);
	assert_non_null(other);
	struct ibv_pd *opd = ibv_alloc_pd(other);
	assert_non_null(opd);
	errno = 0;
	struct ibv_pd *wrong = ibv_import_pd(c, opd->handle);
	if (opd->handle == pd->handle)
		assert_non_null(wrong), ibv_unimport_pd(wrong); /* the same number, c's own PD */
	else
		assert_null(wrong), assert_int_equal(errno, ENOENT);
	assert_int_equal(ibv_dealloc_pd(opd), 0);
	assert_int_equal(ibv_close_device(other), 0);

	/* a destroyed object cannot be imported */
	uint32_t h = mr->handle;
	assert_int_equal(ibv_dereg_mr(mr), 0);
	errno = 0;
	assert_null(ibv_import_mr(pd, h));
	assert_int_equal(errno, ENOENT);
	assert_int_equal(ibv_free_dm(dm), 0);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
	assert_int_equal(ibv_close_device(c), 0);
	free(buf);
}

static void import_same_objects(void **state)
{
	(void)state;
	struct ibv_context *e = ibv_open_device(devs[1]);
	assert_non_null(e);
	struct ibv_context *i = import_dup(e);
	assert_ptr_equal(i->device, e->device);
	assert_int_not_equal(i->cmd_fd, e->cmd_fd);
	assert_int_equal(ino_of(i->cmd_fd), ino_of(e->cmd_fd));
	struct ibv_device_attr a;
	assert_int_equal(ibv_query_device(i, &a), 0);

	struct ibv_pd *pd = ibv_alloc_pd(e);
	assert_non_null(pd);
	struct ibv_pd *ipd = ibv_import_pd(i, pd->handle);
	assert_non_null(ipd);
	assert_ptr_equal(ipd->context, i);
	assert_int_equal(ipd->handle, pd->handle);

	uint8_t *buf = calloc(1, 8192);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 8192, MR_RW);
	assert_non_null(mr);
	struct ibv_mr *imr = ibv_import_mr(ipd, mr->handle);
	assert_non_null(imr);
	assert_null(imr->addr); /* ibv_import_mr(3) */
	assert_int_equal(imr->length, mr->length);
	assert_int_equal(imr->lkey, mr->lkey);
	assert_int_equal(imr->rkey, mr->rkey);
	assert_ptr_equal(imr->pd, ipd);
	assert_ptr_equal(imr->context, i);

	struct ibv_alloc_dm_attr da = {.length = 256};
	struct ibv_dm *dm = ibv_alloc_dm(e, &da);
	assert_non_null(dm);
	struct ibv_dm *idm = ibv_import_dm(i, dm->handle);
	assert_non_null(idm);
	uint32_t w[4] = {1, 2, 3, 4}, r[4] = {0};
	assert_int_equal(ibv_memcpy_to_dm(dm, 16, w, sizeof(w)), 0);
	assert_int_equal(ibv_memcpy_from_dm(r, idm, 16, sizeof(r)), 0);
	assert_memory_equal(w, r, sizeof(w));

	/* the other way: what the importer creates, the exporter can import */
	struct ibv_pd *pd2 = ibv_alloc_pd(i);
	assert_non_null(pd2);
	struct ibv_pd *epd2 = ibv_import_pd(e, pd2->handle);
	assert_non_null(epd2);
	assert_int_equal(ibv_dealloc_pd(epd2), 0); /* destroys it */
	assert_int_equal(ibv_dealloc_pd(pd2), EINVAL);
	ibv_unimport_pd(pd2);

	/* a PD in use stays, through either wrapper */
	assert_int_equal(ibv_dealloc_pd(ipd), EBUSY);
	assert_int_equal(ibv_dealloc_pd(pd), EBUSY);
	ibv_unimport_mr(imr); /* the region stays: it can be imported again */
	imr = ibv_import_mr(ipd, mr->handle);
	assert_non_null(imr);
	assert_int_equal(imr->rkey, mr->rkey);
	ibv_unimport_mr(imr);
	assert_int_equal(ibv_free_dm(idm), 0);
	assert_int_equal(ibv_free_dm(dm), EINVAL);
	ibv_unimport_dm(dm);
	assert_int_equal(ibv_dereg_mr(mr), 0);
	assert_int_equal(ibv_dealloc_pd(ipd), 0);
	assert_int_equal(ibv_dealloc_pd(pd), EINVAL);
	ibv_unimport_pd(pd);
	assert_int_equal(ibv_close_device(e), 0);
	assert_int_equal(ibv_close_device(i), 0);
	free(buf);
}

/* An RC QP on PD pd and CQ cq. */
static struct ibv_qp *qp_on(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr qa = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &qa);
	assert_non_null(qp);
	return qp;
}

static void write_to(struct ibv_qp *qp, struct ibv_cq *cq, void *src, uint32_t lkey, uint32_t len,
		     uint64_t raddr, uint32_t rkey)
{
	assert_int_equal(tu_rdma(qp, cq, src, lkey, IBV_WR_RDMA_WRITE, len, raddr, rkey),
			 IBV_WC_SUCCESS);
}

/* a and b on the two devices; b's context imported (*bi), b's PD imported
 * into it (*ipd), and a CQ there (*cq). */
static void open_imported(struct tu_side *a, struct tu_side *b, struct ibv_context **bi,
			  struct ibv_pd **ipd, struct ibv_cq **cq)
{
	tu_side_open(a, devs[0], IBV_QPT_RC);
	tu_side_open(b, devs[1], IBV_QPT_RC);
	*bi = import_dup(b->ctx);
	*ipd = ibv_import_pd(*bi, b->pd->handle);
	assert_non_null(*ipd);
	*cq = ibv_create_cq(*bi, 16, NULL, NULL, 0);
	assert_non_null(*cq);
}

/* a's QP and qp (of b's imported context) connected to each other, both
 * open to the other's WRITEs and READs, qp to `more` too. */
static void connect_imported(struct tu_side *a, struct tu_side *b, struct ibv_qp *qp, unsigned more)
{
	tu_rc_to_rts(a->qp, &b->gid, TU_GID_INDEX, qp->qp_num,
		     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	tu_rc_to_rts(qp, &a->gid, TU_GID_INDEX, a->qp->qp_num,
		     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | more);
}

/* ibv_unimport_pd(3) frees the PD's wrapper, and what was created on it
 * lives on: rdma-core's test_shared_pd destroys the QPs of an imported PD
 * after unimporting it. A QP, a window and a region made on the imported PD
 * still work and go after it is unimported (they used to look at the freed
 * wrapper: a hang on a garbage mutex in ibv_destroy_qp when meson's
 * MALLOC_PERTURB_ filled it; the ASan build runs this test). */
static void objects_outlive_unimported_pd(void **state)
{
	(void)state;
	struct tu_side a, b;
	struct ibv_context *bi;
	struct ibv_pd *ipd;
	struct ibv_cq *cq;

	open_imported(&a, &b, &bi, &ipd, &cq);
	struct ibv_qp *qp = qp_on(ipd, cq);
	uint8_t *buf = calloc(1, 8192);
	assert_non_null(buf);
	struct ibv_mr *mr = ibv_reg_mr(ipd, buf, 8192, MR_RW | IBV_ACCESS_MW_BIND);
	assert_non_null(mr);
	struct ibv_mw *mw = ibv_alloc_mw(ipd, IBV_MW_TYPE_1);
	assert_non_null(mw);
	connect_imported(&a, &b, qp, IBV_ACCESS_MW_BIND);

	ibv_unimport_pd(ipd); /* the wrapper is gone, the PD is b's still */

	/* the window binds to the region (same PD), and a's WRITE lands through it */
	struct ibv_mw_bind bind = {
	    .wr_id = 77,
	    .send_flags = IBV_SEND_SIGNALED,
	    .bind_info = {.mr = mr,
			  .addr = (uintptr_t)buf,
			  .length = 4096,
			  .mw_access_flags = IBV_ACCESS_REMOTE_WRITE},
	};
	assert_int_equal(ibv_bind_mw(qp, mw, &bind), 0);
	struct ibv_wc wc = tu_poll_one(cq);
	assert_int_equal(wc.wr_id, 77);
	tu_fill(a.buf, 4096, 5);
	write_to(a.qp, ibv_cq_ex_to_cq(a.cq), a.buf, a.mr->lkey, 4096, (uintptr_t)buf, mw->rkey);
	assert_memory_equal(buf, a.buf, 4096);
	/* a region of another PD is refused: EPERM by verbs.h's inline
	 * ibv_bind_mw, which compares the PD pointers, or EINVAL by rocemu when
	 * malloc gave `other` the unimported wrapper's address */
	struct ibv_pd *other = ibv_alloc_pd(bi);
	assert_non_null(other);
	struct ibv_mr *omr = ibv_reg_mr(other, buf, 8192, MR_RW | IBV_ACCESS_MW_BIND);
	assert_non_null(omr);
	bind.bind_info.mr = omr;
	int rc = ibv_bind_mw(qp, mw, &bind);
	assert_true(rc == EPERM || rc == EINVAL);

	assert_int_equal(ibv_destroy_qp(qp), 0);
	assert_int_equal(ibv_dealloc_mw(mw), 0);
	assert_int_equal(ibv_dereg_mr(mr), 0);
	assert_int_equal(ibv_dereg_mr(omr), 0);
	assert_int_equal(ibv_dealloc_pd(other), 0);
	assert_int_equal(ibv_destroy_cq(cq), 0);
	assert_int_equal(ibv_close_device(bi), 0);
	free(buf);
	tu_side_close(&b);
	tu_side_close(&a);
}

/* a's peer b: b's region imported into a second context of b's, whose QP
 * writes out of it and is written into through it; the exporter closes and
 * it goes on. */
static void rdma_through_imported(void **state)
{
	(void)state;
	struct tu_side a, b;
	struct ibv_context *bi;
	struct ibv_pd *ipd;
	struct ibv_cq *cq;

	open_imported(&a, &b, &bi, &ipd, &cq);
	struct ibv_mr *imr = ibv_import_mr(ipd, b.mr->handle);
	assert_non_null(imr);
	struct ibv_qp *qp = qp_on(ipd, cq);
	connect_imported(&a, &b, qp, 0);

	for (int round = 0; round < 2; round++) {
		/* a writes into the imported region (b's buffer, b's rkey) */
		tu_fill(a.buf, 4096, 7 + round);
		write_to(a.qp, ibv_cq_ex_to_cq(a.cq), a.buf, a.mr->lkey, 4096,
			 (uintptr_t)b.buf + 8192, imr->rkey);
		assert_memory_equal(b.buf + 8192, a.buf, 4096);
		/* bi's QP writes out of it into a */
		tu_fill(b.buf, 4096, 11 + round);
		write_to(qp, cq, b.buf, imr->lkey, 4096, (uintptr_t)a.buf + 16384, a.mr->rkey);
		assert_memory_equal(a.buf + 16384, b.buf, 4096);
		if (round)
			break;
		/* the exporter goes: its QP, CQ, channel, context; the PD and
		 * region it made stay, named by the importer's wrappers */
		struct ibv_pd *opd = b.pd;
		struct ibv_mr *omr = b.mr;
		assert_int_equal(ibv_destroy_qp(b.qp), 0);
		assert_int_equal(ibv_destroy_cq(ibv_cq_ex_to_cq(b.cq)), 0);
		assert_int_equal(ibv_destroy_comp_channel(b.ch), 0);
		ibv_unimport_mr(omr);
		ibv_unimport_pd(opd);
		assert_int_equal(ibv_close_device(b.ctx), 0);
	}
	assert_int_equal(ibv_destroy_qp(qp), 0);
	assert_int_equal(ibv_destroy_cq(cq), 0);
	assert_int_equal(ibv_dereg_mr(imr), 0);
	assert_int_equal(ibv_dealloc_pd(ipd), 0);
	assert_int_equal(ibv_close_device(bi), 0);
	free(b.buf);
	tu_side_close(&a);
}

/*
 * Every order of releasing the six wrappers (a PD, a region on it, device
 * memory; each the exporter's and the importer's) and closing the two
 * contexts, each wrapper before its own context closes (2520 orders). A
 * release tries the destroy verb first: 0 for the first wrapper of a live
 * object (the PD: once its region is gone, EBUSY before), EINVAL for the
 * second, which is then unimported.
 */
enum { MR_O, MR_I, DM_O, DM_I, PD_O, PD_I, CLOSE_E, CLOSE_I, N_EV };

struct walk {
	struct ibv_context *ctx[2];
	struct ibv_mr *mr[2];
	struct ibv_dm *dm[2];
	struct ibv_pd *pd[2];
	bool mr_dead, dm_dead, pd_dead;
};

static void release(struct walk *w, int ev)
{
	int side = ev & 1, rc;

	switch (ev) {
	case MR_O:
	case MR_I:
		rc = ibv_dereg_mr(w->mr[side]);
		assert_int_equal(rc, w->mr_dead ? EINVAL : 0);
		if (rc)
			ibv_unimport_mr(w->mr[side]);
		w->mr_dead = true;
		break;
	case DM_O:
	case DM_I:
		rc = ibv_free_dm(w->dm[side]);
		assert_int_equal(rc, w->dm_dead ? EINVAL : 0);
		if (rc)
			ibv_unimport_dm(w->dm[side]);
		w->dm_dead = true;
		break;
	case PD_O:
	case PD_I:
		rc = ibv_dealloc_pd(w->pd[side]);
		assert_int_equal(rc, w->pd_dead ? EINVAL : !w->mr_dead ? EBUSY : 0);
		if (rc)
			ibv_unimport_pd(w->pd[side]);
		w->pd_dead |= rc == 0;
		break;
	default:
		assert_int_equal(ibv_close_device(w->ctx[ev - CLOSE_E]), 0);
	}
}

static bool next_perm(int *a, int n)
{
	int i = n - 2, j = n - 1;

	while (i >= 0 && a[i] >= a[i + 1])
		i--;
	if (i < 0)
		return false;
	while (a[j] <= a[i])
		j--;
	int t = a[i];
	a[i] = a[j];
	a[j] = t;
	for (int l = i + 1, r = n - 1; l < r; l++, r--)
		t = a[l], a[l] = a[r], a[r] = t;
	return true;
}

static void every_release_order(void **state)
{
	(void)state;
	/* holds the engine, so that each order does not make a new one */
	struct ibv_context *anchor = ibv_open_device(devs[1]);
	assert_non_null(anchor);
	uint8_t *buf = calloc(1, 4096);
	int ev[N_EV];
	unsigned orders = 0;

	for (int k = 0; k < N_EV; k++)
		ev[k] = k;
	do {
		int at[N_EV];
		for (int k = 0; k < N_EV; k++)
			at[ev[k]] = k;
		bool ok = true;
		for (int k = 0; k < CLOSE_E; k++)
			ok &= at[k] < at[CLOSE_E + (k & 1)];
		if (!ok)
			continue;
		struct walk w = {0};
		w.ctx[0] = ibv_open_device(devs[1]);
		assert_non_null(w.ctx[0]);
		w.ctx[1] = import_dup(w.ctx[0]);
		w.pd[0] = ibv_alloc_pd(w.ctx[0]);
		assert_non_null(w.pd[0]);
		w.mr[0] = ibv_reg_mr(w.pd[0], buf, 4096, MR_RW);
		assert_non_null(w.mr[0]);
		struct ibv_alloc_dm_attr da = {.length = 64};
		w.dm[0] = ibv_alloc_dm(w.ctx[0], &da);
		assert_non_null(w.dm[0]);
		w.pd[1] = ibv_import_pd(w.ctx[1], w.pd[0]->handle);
		assert_non_null(w.pd[1]);
		w.mr[1] = ibv_import_mr(w.pd[1], w.mr[0]->handle);
		assert_non_null(w.mr[1]);
		w.dm[1] = ibv_import_dm(w.ctx[1], w.dm[0]->handle);
		assert_non_null(w.dm[1]);
		for (int k = 0; k < N_EV; k++)
			release(&w, ev[k]);
		orders++;
	} while (next_perm(ev, N_EV));
	assert_int_equal(orders, 2520);
	assert_int_equal(ibv_close_device(anchor), 0);
	free(buf);
}

/* The other process: import the fd that comes on fd 3; 0 when it is
 * refused with EOPNOTSUPP. */
static int import_passed_fd(void)
{
	char byte;
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf)};
	int fd;

	if (recvmsg(3, &msg, 0) != 1 || !CMSG_FIRSTHDR(&msg))
		return 2;
	memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&msg)), sizeof(fd));
	errno = 0;
	struct ibv_context *c = ibv_import_device(fd);
	return !c && errno == EOPNOTSUPP ? 0 : 1;
}

static void import_in_another_process(void **state)
{
	(void)state;
	struct ibv_context *c = ibv_open_device(devs[0]);
	int sv[2], err[2];

	assert_non_null(c);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(pipe2(err, O_CLOEXEC), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(sv[1], 3); /* dup2 clears close-on-exec */
		dup2(err[1], 2);
		char *args[] = {"import_test", "--import-passed-fd", NULL};
		execv("/proc/self/exe", args);
		_exit(12);
	}
	close(sv[1]);
	close(err[1]);
	char byte = 'x';
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *h = CMSG_FIRSTHDR(&msg);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &c->cmd_fd, sizeof(int));
	assert_int_equal(sendmsg(sv[0], &msg, 0), 1);
	char text[2048] = "";
	ssize_t got = 0, r;
	while ((r = read(err[0], text + got, sizeof(text) - 1 - (size_t)got)) > 0)
		got += r;
	text[got] = '\0';
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	close(sv[0]);
	close(err[0]);
	fprintf(stderr, "the other process said: %s", text);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_non_null(strstr(text, "is a context of another process"));
	assert_ptr_equal(strchr(text, '\n'), text + got - 1); /* one line */
	assert_int_equal(ibv_close_device(c), 0);
}

int main(int argc, char **argv)
{
	char path[] = "/tmp/rocemu-import-XXXXXX";

	if (argc == 2 && !strcmp(argv[1], "--import-passed-fd"))
		return import_passed_fd();

	devs = tu_devices(path,
			  "[rocemu0]\nport = ring:imp:a\nip = 10.79.7.1/24\n"
			  "[rocemu1]\nport = ring:imp:b\nip = 10.79.7.2/24\n",
			  2, &n_devs);
	if (!devs)
		return 1;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(cmd_fd_is_a_file),
	    cmocka_unit_test(import_errors),
	    cmocka_unit_test(import_same_objects),
	    cmocka_unit_test(rdma_through_imported),
	    cmocka_unit_test(every_release_order),
	    cmocka_unit_test(import_in_another_process),
	    cmocka_unit_test(objects_outlive_unimported_pd),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	ibv_free_device_list(devs);
	return rc;
}
