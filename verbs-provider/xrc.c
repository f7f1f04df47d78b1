/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * XRC (ibv_open_xrcd(3), ibv_get_srq_num(3), ibv_open_qp(3)): domains, the
 * SRQ numbers an XRC sender names, and more handles on an XRC target QP.
 * XRC SRQs are made by ibv_create_srq_ex (srq_ah.c), the XRC QP types by
 * ibv_create_qp_ex (qp.c); the rules are the engine's (emulator/transport/xrc.c).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "provider.h"

struct ibv_xrcd *rocemu_op_open_xrcd(struct ibv_context *ctx, struct ibv_xrcd_init_attr *a)
{
	uint32_t known = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	bool by_inode = false;
	struct stat st = {0};

	/* the man page: fd and oflags are both required */
	if (!ctx || !a || (a->comp_mask & known) != known) {
		errno = EINVAL;
		return NULL;
	}
	if (a->comp_mask & ~known) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (a->fd != -1) {
		/* the domain of the file's inode, as the kernel keys it */
		if (fstat(a->fd, &st) < 0)
			return NULL; /* errno EBADF from fstat */
		by_inode = true;
	}
	struct rocemu_vxrcd *x = calloc(1, sizeof(*x));
	if (!x) {
		errno = ENOMEM;
		return NULL;
	}
	int rc = rocemu_xrcd_open(to_vctx(ctx)->engine, by_inode, (uint64_t)st.st_dev,
				  (uint64_t)st.st_ino, (a->oflags & O_CREAT) != 0,
				  (a->oflags & O_EXCL) != 0, &x->exrcd);
	if (rc < 0) {
		free(x);
		return rocemu_null_errno(rc);
	}
	x->xrcd.context = ctx;
	return &x->xrcd;
}

int rocemu_op_close_xrcd(struct ibv_xrcd *xrcd)
{
	if (!xrcd)
		return EINVAL;
	int rc = rocemu_xrcd_close(to_vxrcd(xrcd)->exrcd);
	if (rc < 0)
		return -rc;
	free(to_vxrcd(xrcd));
	return 0;
}

int rocemu_op_get_srq_num(struct ibv_srq *srq, uint32_t *num)
{
	if (!srq || !num)
		return EINVAL;
	*num = rocemu_srq_num(((struct rocemu_vsrq *)srq)->esrq);
	return 0;
}

/*
 * ibv_open_qp(3): another handle on an XRC target QP of the domain (a
 * process that did not create it opens it by number). Each handle is
 * destroyed with ibv_destroy_qp; the QP goes with the last.
 */
struct ibv_qp *rocemu_op_open_qp(struct ibv_context *ctx, struct ibv_qp_open_attr *a)
{
	uint32_t need = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;

	if (!ctx || !a || (a->comp_mask & need) != need || !a->xrcd || a->xrcd->context != ctx ||
	    a->qp_type != IBV_QPT_XRC_RECV) {
		errno = EINVAL;
		return NULL;
	}
	if (a->comp_mask & ~(need | IBV_QP_OPEN_ATTR_CONTEXT)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	struct rocemu_vqp *qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	int rc = rocemu_qp_open(to_vxrcd(a->xrcd)->exrcd, a->qp_num, &qp->eqp);
	if (rc < 0) {
		free(qp);
		return rocemu_null_errno(rc);
	}
	qp->ctx = to_vctx(ctx);
	rocemu_qp_retarget_events(qp->eqp, NULL, qp); /* the newest handle hears them */
	struct ibv_qp *q = &qp->qpx.qp_base;
	q->context = ctx;
	q->qp_context = (a->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT) ? a->qp_context : NULL;
	q->qp_num = a->qp_num;
	q->state = rocemu_qp_state(qp->eqp);
	q->qp_type = IBV_QPT_XRC_RECV;
	pthread_mutex_init(&q->mutex, NULL);
	pthread_cond_init(&q->cond, NULL);
	return q;
}
