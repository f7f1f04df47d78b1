/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * XRC domains (IBA 9.3.8, 11.2.x; ibv_open_xrcd(3)). An XRC domain groups
 * the XRC SRQs and the XRC target (XRC_RECV) QPs that may serve each other:
 * a request arriving at a target QP names an SRQ in its XRCETH, and is
 * served only when that SRQ belongs to the target QP's domain.
 *
 * Sharing: a domain opened with a file (the program's fd) is the domain of
 * that file's inode on this device, so every context of the device that
 * opens the same file gets the same domain, as with the kernel (whose
 * table is per device too). The answers are the kernel's: no domain for
 * the inode and no O_CREAT: EAGAIN; one and O_CREAT|O_EXCL: EINVAL. In
 * rocemu a device is an engine inside one process, so processes share a
 * domain only when they share a device, which standalone processes do not
 * (each is its own host): another process opening the same file gets its
 * own domain (docs/verbs-provider.md).
 */
#include <errno.h>
#include <stdlib.h>

#include "rocemu_transport.h"

struct rocemu_xrcd {
	struct rocemu_engine *engine;
	struct rocemu_xrcd *next;
	bool by_inode;
	uint64_t dev, ino;
	uint32_t refs;	/**< opens (rocemu_xrcd_open) not closed yet */
	uint32_t users; /**< XRC SRQs and XRC_RECV QPs on it */
};

int rocemu_xrcd_open(struct rocemu_engine *e, bool by_inode, uint64_t dev, uint64_t ino,
		     bool create, bool excl, struct rocemu_xrcd **out)
{
	struct rocemu_xrcd *x = NULL;
	int rc = 0;

	if (!e || !out)
		return -EINVAL;
	rocemu_engine_lock(e);
	if (by_inode)
		for (x = e->xrcds; x; x = x->next)
			if (x->by_inode && x->dev == dev && x->ino == ino)
				break;
	if (x) {
		if (create && excl) {
			rc = -EINVAL;
			goto out;
		}
		x->refs++;
		*out = x;
		goto out;
	}
	if (by_inode && !create) {
		rc = -EAGAIN;
		goto out;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		rc = -ENOMEM;
		goto out;
	}
	x->engine = e;
	x->by_inode = by_inode;
	x->dev = dev;
	x->ino = ino;
	x->refs = 1;
	x->next = e->xrcds;
	e->xrcds = x;
	*out = x;
out:
	rocemu_engine_unlock(e);
	return rc;
}

int rocemu_xrcd_close(struct rocemu_xrcd *x)
{
	struct rocemu_engine *e;

	if (!x)
		return -EINVAL;
	e = x->engine;
	rocemu_engine_lock(e);
	if (x->refs == 1 && x->users > 0) {
		rocemu_engine_unlock(e);
		return -EBUSY; /* ibv_close_xrcd(3): SRQs or QPs still on it */
	}
	if (--x->refs == 0) {
		for (struct rocemu_xrcd **pp = &e->xrcds; *pp; pp = &(*pp)->next)
			if (*pp == x) {
				*pp = x->next;
				break;
			}
		free(x);
	}
	rocemu_engine_unlock(e);
	return 0;
}

void rocemu_xrcd_use(struct rocemu_xrcd *x, int delta)
{
	if (x)
		x->users = (uint32_t)((int)x->users + delta);
}

struct rocemu_engine *rocemu_xrcd_engine(const struct rocemu_xrcd *x)
{
	return x->engine;
}

struct rocemu_srq *rocemu_xrc_srq_for(struct rocemu_qp *qp, uint32_t srqn)
{
	struct rocemu_srq *srq = rocemu_engine_srq_lookup(qp->engine, srqn);

	if (!srq || !qp->xrcd || rocemu_srq_xrcd(srq) != qp->xrcd)
		return NULL;
	return srq;
}

void rocemu_xrc_free_all(struct rocemu_engine *e)
{
	while (e->xrcds) {
		struct rocemu_xrcd *x = e->xrcds;

		e->xrcds = x->next;
		free(x);
	}
}
