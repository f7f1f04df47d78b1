/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * host_import: ibv_import_device/_pd/_mr between processes attached to one
 * rocemu host (docs/verbs-provider.md, "Sharing objects"), run under
 * `rocemu run --host H` (host_import.sh). Three processes:
 *
 *  - P (this one, the peer): starts E and I (this program again, exec'ed),
 *    has a QP of its own toward I's QP;
 *  - E, the exporter: registers two regions and passes its cmd_fd to I over
 *    a unix socket (SCM_RIGHTS) with the PD and MR handles;
 *  - I, the importer: imports the device, the PD and both regions, makes an
 *    RC QP on the imported PD;
 *  - S, a process attached to another host (--other-host): E's cmd_fd is
 *    refused there (EOPNOTSUPP).
 *
 * Checked: the import errors (the fd of a context E closed while E runs:
 * ESRCH; a handle of another type: EINVAL; no such
 * handle: ENOENT; a region imported on a PD of its own: EINVAL); a second
 * wrapper of the PD and of a region, unimported, leaves the first working; the
 * imported region keeps the exporter's keys, addr NULL, and a key of I's
 * own differs in its top byte (the host's key rule); I's RDMA WRITE out of
 * the imported region lands E's bytes in P; P's RDMA WRITE through I's QP
 * with E's R_Key lands in E's memory (E checks every byte), P's RDMA READ
 * reads them back; after E deregisters the region, P's WRITE with that key
 * completes with an error and E's bytes stay; after E exits, P's WRITE to
 * E's other region through a new QP of I completes with an error. Device
 * memory: I reads E's bytes and writes its own (E checks), a copy past its
 * end is EFAULT, and once E exited a copy fails. Exit 0
 * when all of it holds. Bounded waits (60 s each), no durations.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "../verbs/pair_util.h" /* pu_qp_connect */

#define LEN	  4096
#define DM_LEN	  64
#define GID_INDEX 1

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "%s: %s:%d: FAIL: %s (errno %d %s)\n", role, __FILE__,     \
				__LINE__, #c, errno, strerror(errno));                             \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static const char *role = "P";

enum op {
	OP_INFO = 1,
	OP_CHECK,
	OP_CHECK_DM,
	OP_DEREG,
	OP_EXIT,
	OP_WRITE_FROM,
	OP_NEW_QP,
	OP_REPLY
};

struct msg {
	uint32_t op, arg;
	int32_t status;
	uint32_t qpn;
	uint8_t gid[16];
	uint32_t handle[4]; /* PD, MR 1, MR 2, device memory */
	uint32_t key[2];
	uint64_t addr[2];
};

static void send_msg(int fd, const struct msg *m, int pass_fd)
{
	struct iovec iov = {.iov_base = (void *)m, .iov_len = sizeof(*m)};
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1};

	if (pass_fd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		h.msg_control = ctl.b;
		h.msg_controllen = sizeof(ctl.b);
		struct cmsghdr *c = CMSG_FIRSTHDR(&h);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
	}
	CHECK(sendmsg(fd, &h, 0) == (ssize_t)sizeof(*m));
}

static struct msg recv_msg(int fd, int *got_fd)
{
	struct msg m;
	struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct msghdr h = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = ctl.b,
			   .msg_controllen = sizeof(ctl.b)};

	CHECK(recvmsg(fd, &h, MSG_WAITALL) == (ssize_t)sizeof(m));
	if (got_fd) {
		struct cmsghdr *c = CMSG_FIRSTHDR(&h);
		CHECK(c && c->cmsg_type == SCM_RIGHTS);
		memcpy(got_fd, CMSG_DATA(c), sizeof(int));
	}
	return m;
}

static struct msg ask(int fd, uint32_t op, uint32_t arg)
{
	struct msg m = {.op = op, .arg = arg};

	send_msg(fd, &m, -1);
	m = recv_msg(fd, NULL);
	CHECK(m.op == OP_REPLY);
	return m;
}

static void reply(int fd, int32_t status)
{
	struct msg m = {.op = OP_REPLY, .status = status};

	send_msg(fd, &m, -1);
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static struct ibv_context *open_dev(void)
{
	int n;
	struct ibv_device **l = ibv_get_device_list(&n);

	CHECK(l && n > 0);
	struct ibv_context *c = ibv_open_device(l[0]);
	CHECK(c);
	ibv_free_device_list(l);
	return c;
}

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr a = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);

	CHECK(qp);
	return qp;
}

static void to_rts(struct ibv_qp *qp, const uint8_t gid[16], uint32_t dqpn)
{
	/* ACK timeout ~0.5 s: a loaded 2-core machine may not run the peer at once */
	CHECK(!pu_qp_connect(qp, gid, GID_INDEX, dqpn, 7, 4, 17));
}

/* One signalled RDMA WRITE or READ; its completion's status. */
static enum ibv_wc_status rdma(struct ibv_qp *qp, struct ibv_cq *cq, uint64_t laddr, uint32_t lkey,
			       enum ibv_wr_opcode op, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = {.addr = laddr, .length = LEN, .lkey = lkey};
	struct ibv_send_wr wr = {.wr_id = 0x77,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED,
				 .wr.rdma = {.remote_addr = raddr, .rkey = rkey}},
			   *bad;
	struct ibv_wc wc;
	double end = now_s() + 60;
	int n;

	CHECK(!ibv_post_send(qp, &wr, &bad));
	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0 && now_s() < end)
		usleep(100);
	CHECK(n == 1 && wc.wr_id == 0x77);
	return wc.status;
}

static bool all(const uint8_t *p, uint8_t v)
{
	for (size_t i = 0; i < LEN; i++)
		if (p[i] != v)
			return false;
	return true;
}

/* ------------------------------------------------------------------------ */

static int exporter(void)
{
	struct ibv_context *ctx = open_dev();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	static uint8_t buf[2][LEN] __attribute__((aligned(4096)));
	unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct ibv_mr *mr[2];

	CHECK(pd);
	for (int i = 0; i < 2; i++) {
		memset(buf[i], 0xe1 + i, LEN);
		mr[i] = ibv_reg_mr(pd, buf[i], LEN, (int)acc);
		CHECK(mr[i]);
	}
	struct ibv_dm *dm = ibv_alloc_dm(ctx, &(struct ibv_alloc_dm_attr){.length = DM_LEN});
	uint8_t dmb[DM_LEN];
	CHECK(dm);
	memset(dmb, 0xd1, DM_LEN);
	CHECK(!ibv_memcpy_to_dm(dm, 0, dmb, DM_LEN));
	struct msg m = {.op = OP_INFO,
			.handle = {pd->handle, mr[0]->handle, mr[1]->handle, dm->handle},
			.key = {mr[0]->rkey, mr[1]->rkey},
			.addr = {(uintptr_t)buf[0], (uintptr_t)buf[1]}};
	send_msg(4, &m, ctx->cmd_fd);
	send_msg(5, &m, ctx->cmd_fd); /* to a process of another host */
	/* a context we close at once: its fd outlives it, and imports nothing */
	struct ibv_context *gone = open_dev();
	int left = dup(gone->cmd_fd);
	CHECK(left >= 0 && !ibv_close_device(gone));
	send_msg(4, &m, left);
	close(left);
	for (;;) {
		m = recv_msg(3, NULL);
		switch (m.op) {
		case OP_CHECK:
			reply(3, all(buf[0], (uint8_t)m.arg) ? 0 : 1);
			break;
		case OP_CHECK_DM:
			CHECK(!ibv_memcpy_from_dm(dmb, dm, 0, DM_LEN));
			/* every byte the same, and that one what was asked */
			reply(3, dmb[0] != (uint8_t)m.arg || memcmp(dmb, dmb + 1, DM_LEN - 1));
			break;
		case OP_DEREG:
			reply(3, ibv_dereg_mr(mr[0]));
			break;
		case OP_EXIT:
			_exit(0); /* gone without deregistering: the importer must cope */
		default:
			return 1;
		}
	}
}

static int importer(void)
{
	int fd;
	struct msg e = recv_msg(4, &fd);

	CHECK(e.op == OP_INFO);
	struct ibv_context *ctx = ibv_import_device(fd);
	CHECK(ctx);
	int left; /* E's closed context's fd: E runs, the context is gone */
	CHECK(recv_msg(4, &left).op == OP_INFO);
	errno = 0;
	CHECK(!ibv_import_device(left) && errno == ESRCH);
	close(left);
	errno = 0;
	CHECK(!ibv_import_dm(ctx, e.handle[0]) && errno == EINVAL); /* a PD's handle */
	/* device memory: read what E put there, write over it (E checks) */
	struct ibv_dm *dm = ibv_import_dm(ctx, e.handle[3]);
	uint8_t dmb[DM_LEN];
	CHECK(dm && dm->handle == e.handle[3]);
	CHECK(!ibv_memcpy_from_dm(dmb, dm, 0, DM_LEN) && dmb[0] == 0xd1 && dmb[DM_LEN - 1] == 0xd1);
	CHECK(ibv_memcpy_from_dm(dmb, dm, DM_LEN - 4, 8) == EFAULT); /* past its end */
	memset(dmb, 0xd2, DM_LEN);
	CHECK(!ibv_memcpy_to_dm(dm, 0, dmb, DM_LEN));
	errno = 0;
	CHECK(!ibv_import_pd(ctx, e.handle[1]) && errno == EINVAL); /* an MR's handle */
	errno = 0;
	CHECK(!ibv_import_pd(ctx, 0xfffffu) && errno == ENOENT);
	struct ibv_pd *pd = ibv_import_pd(ctx, e.handle[0]);
	CHECK(pd && pd->handle == e.handle[0]);
	struct ibv_pd *own_pd = ibv_alloc_pd(ctx);
	CHECK(own_pd);
	errno = 0;
	CHECK(!ibv_import_mr(own_pd, e.handle[1]) && errno == EINVAL); /* not the region's PD */
	errno = 0;
	CHECK(!ibv_import_mr(pd, 0xfffffu) && errno == ENOENT);
	struct ibv_mr *mr[2];
	for (int i = 0; i < 2; i++) {
		mr[i] = ibv_import_mr(pd, e.handle[1 + i]);
		CHECK(mr[i] && mr[i]->lkey == e.key[i] && mr[i]->rkey == e.key[i] && !mr[i]->addr &&
		      mr[i]->length == LEN);
	}
	/* a second wrapper of each, unimported: the first ones go on (used below) */
	struct ibv_pd *pd2 = ibv_import_pd(ctx, e.handle[0]);
	struct ibv_mr *again = pd2 ? ibv_import_mr(pd2, e.handle[1]) : NULL;
	CHECK(again && again->lkey == e.key[0]);
	ibv_unimport_mr(again);
	ibv_unimport_pd(pd2);
	/* the host's key rule: our own keys differ in their top byte */
	static uint8_t own[LEN];
	struct ibv_mr *own_mr = ibv_reg_mr(pd, own, LEN, IBV_ACCESS_LOCAL_WRITE);
	CHECK(own_mr && own_mr->lkey >> 24 != e.key[0] >> 24 && own_mr->lkey >> 24);
	CHECK(!ibv_dereg_mr(own_mr));
	CHECK(!ibv_dealloc_pd(own_pd));

	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(cq);
	struct ibv_qp *qp = NULL;
	union ibv_gid gid;
	CHECK(!ibv_query_gid(ctx, 1, GID_INDEX, &gid));
	for (;;) {
		struct msg m = recv_msg(3, NULL);
		switch (m.op) {
		case OP_NEW_QP: { /* our QP's number to P, and P's to us */
			qp = make_qp(pd, cq);
			struct msg r = e;
			r.op = OP_REPLY;
			r.qpn = qp->qp_num;
			memcpy(r.gid, gid.raw, 16);
			send_msg(3, &r, -1);
			r = recv_msg(3, NULL);
			to_rts(qp, r.gid, r.qpn);
			reply(3, 0);
			break;
		}
		case OP_WRITE_FROM:
			reply(3, rdma(qp, cq, e.addr[0], e.key[0], IBV_WR_RDMA_WRITE, m.addr[0],
				      m.key[0]));
			break;
		case OP_EXIT: /* E has exited: its device memory is gone */
			CHECK(ibv_memcpy_from_dm(dmb, dm, 0, DM_LEN) != 0);
			CHECK(!ibv_free_dm(dm)); /* our view of it only */
			ibv_unimport_mr(mr[0]);
			CHECK(!ibv_dereg_mr(mr[1])); /* our stand-in only */
			return 0;
		default:
			return 1;
		}
	}
}

/* A process on another host: E's fd is refused there. */
static int stranger(void)
{
	int fd;

	CHECK(recv_msg(3, &fd).op == OP_INFO);
	errno = 0;
	CHECK(!ibv_import_device(fd) && errno == EOPNOTSUPP);
	return 0;
}

static pid_t spawn(const char *self, const char *what, int fd3, int fd4, int fd5, const char *host)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		dup2(fd3, 3);
		if (fd4 >= 0)
			dup2(fd4, 4);
		if (fd5 >= 0)
			dup2(fd5, 5);
		if (host) { /* rocemu run's device description names our host */
			unsetenv("ROCEMU_DEVICE");
			unsetenv("ROCEMU_CONFIG");
			setenv("ROCEMU_HOST", host, 1);
		}
		execl(self, self, what, (char *)NULL);
		_exit(127);
	}
	return pid;
}

static int peer(const char *self, const char *other_host)
{
	int se[2], si[2], sei[2], ses[2], status;

	CHECK(
	    !socketpair(AF_UNIX, SOCK_STREAM, 0, se) && !socketpair(AF_UNIX, SOCK_STREAM, 0, si) &&
	    !socketpair(AF_UNIX, SOCK_STREAM, 0, sei) && !socketpair(AF_UNIX, SOCK_STREAM, 0, ses));
	pid_t pe = spawn(self, "exporter", se[1], sei[0], ses[0], NULL);
	pid_t pi = spawn(self, "importer", si[1], sei[1], -1, NULL);
	pid_t ps = spawn(self, "stranger", ses[1], -1, -1, other_host);
	close(se[1]);
	close(si[1]);
	close(sei[0]);
	close(sei[1]);
	close(ses[0]);
	close(ses[1]);
	CHECK(waitpid(ps, &status, 0) == ps && WIFEXITED(status) && WEXITSTATUS(status) == 0);

	struct ibv_context *ctx = open_dev();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	static uint8_t buf[2 * LEN];
	struct ibv_mr *mr =
	    ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	union ibv_gid gid;
	CHECK(pd && cq && mr && !ibv_query_gid(ctx, 1, GID_INDEX, &gid));

	for (int round = 0; round < 2; round++) {
		struct ibv_qp *qp = make_qp(pd, cq);
		struct msg i = ask(si[0], OP_NEW_QP, 0);
		struct msg me = {.op = OP_INFO, .qpn = qp->qp_num};
		memcpy(me.gid, gid.raw, 16);
		send_msg(si[0], &me, -1);
		to_rts(qp, i.gid, i.qpn);
		CHECK(recv_msg(si[0], NULL).op == OP_REPLY);
		if (round == 0) {
			/* I writes out of E's region into ours */
			struct msg w = {
			    .op = OP_WRITE_FROM, .addr = {(uintptr_t)buf}, .key = {mr->rkey}};
			send_msg(si[0], &w, -1);
			w = recv_msg(si[0], NULL);
			CHECK(w.op == OP_REPLY && w.status == IBV_WC_SUCCESS);
			CHECK(all(buf, 0xe1));
			/* we write into E's region through I's QP, and read it back */
			memset(buf, 0x51, LEN);
			CHECK(rdma(qp, cq, (uintptr_t)buf, mr->lkey, IBV_WR_RDMA_WRITE, i.addr[0],
				   i.key[0]) == IBV_WC_SUCCESS);
			CHECK(ask(se[0], OP_CHECK, 0x51).status == 0);
			CHECK(rdma(qp, cq, (uintptr_t)buf + LEN, mr->lkey, IBV_WR_RDMA_READ,
				   i.addr[0], i.key[0]) == IBV_WC_SUCCESS);
			CHECK(all(buf + LEN, 0x51));
			/* E deregisters: our WRITE with its key fails, its bytes stay */
			CHECK(ask(se[0], OP_DEREG, 0).status == 0);
			memset(buf, 0x52, LEN);
			enum ibv_wc_status st = rdma(qp, cq, (uintptr_t)buf, mr->lkey,
						     IBV_WR_RDMA_WRITE, i.addr[0], i.key[0]);
			fprintf(stderr, "P: WRITE after the exporter's dereg: %s\n",
				ibv_wc_status_str(st));
			CHECK(st != IBV_WC_SUCCESS);
			CHECK(ask(se[0], OP_CHECK, 0x51).status == 0);
			CHECK(ask(se[0], OP_CHECK_DM, 0xd2).status == 0); /* I wrote it */
		} else {
			/* E exits: our WRITE into its other region through I fails */
			struct msg x = {.op = OP_EXIT};
			send_msg(se[0], &x, -1);
			CHECK(waitpid(pe, &status, 0) == pe && WIFEXITED(status) &&
			      WEXITSTATUS(status) == 0);
			enum ibv_wc_status st = rdma(qp, cq, (uintptr_t)buf, mr->lkey,
						     IBV_WR_RDMA_WRITE, i.addr[1], i.key[1]);
			fprintf(stderr, "P: WRITE after the exporter's exit: %s\n",
				ibv_wc_status_str(st));
			CHECK(st != IBV_WC_SUCCESS);
		}
	}
	struct msg x = {.op = OP_EXIT};
	send_msg(si[0], &x, -1);
	CHECK(waitpid(pi, &status, 0) == pi && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	printf("host_import: imported PD and regions used across processes; errors as expected\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "exporter")) {
		role = "E";
		return exporter();
	}
	if (argc > 1 && !strcmp(argv[1], "importer")) {
		role = "I";
		return importer();
	}
	if (argc > 1 && !strcmp(argv[1], "stranger")) {
		role = "S";
		return stranger();
	}
	if (argc != 3 || strcmp(argv[1], "--other-host")) {
		fprintf(stderr,
			"usage: host_import --other-host NAME (under rocemu run --host H)\n");
		return 2;
	}
	return peer("/proc/self/exe", argv[2]);
}
