/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The command file of a context, and sharing objects through it
 * (ibv_import_device(3), ibv_import_pd(3), ibv_import_mr(3), ibv_import_dm(3)).
 *
 * With a kernel provider, ibv_context.cmd_fd is an open uverbs file: the
 * objects a context creates belong to that file, each named by a handle,
 * and every context on the file (the one that opened it, and each one
 * ibv_import_device made from a dup of its fd) can name them. rocemu has no
 * kernel, so the file is a memfd named after the device and the process
 * ("rocemu-ctx:DEV:PID"), one per ibv_open_device; it is found again from
 * any fd on it by its identity (fstat's st_dev and st_ino), also after
 * dup() or SCM_RIGHTS within the process. Its handle table stands for the
 * kernel's: which engine object each handle names. The table lives while a
 * context uses the file, whichever closes first.
 *
 * An object is destroyed once, through whichever of its wrappers: the
 * table entry goes with it, so a later destroy through another wrapper
 * finds no entry and fails without touching the freed object; unimport
 * frees only the wrapper. Objects live in the device's engine, which every
 * context on the device holds, so an exporter's close leaves them usable.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "provider.h"

/* A handle: the slot's index in the low bits, above it how often the slot
 * was used, so that a stale handle does not name the slot's next object. */
#define SLOT_BITS 20
#define SLOT_MAX  (1u << SLOT_BITS)

struct vslot {
	uint32_t handle; /**< 0 while free */
	uint32_t uses;	 /**< how often the slot was used */
	enum rocemu_vobj_type type;
	void *obj;	    /**< the engine object */
	void *aux;	    /**< an MR: the device memory it is on, else NULL */
	uint32_t next_free; /**< while free: the next free slot's index + 1, 0 for none */
};

struct rocemu_vfile {
	struct rocemu_vfile *next; /**< in g_files */
	dev_t dev;
	ino_t ino;
	pid_t pid;	      /**< the process that opened it */
	unsigned refs;	      /**< contexts on it (g_files_lock) */
	pthread_mutex_t lock; /**< guards the table */
	struct vslot *slots;
	uint32_t n_slots, cap, free_head; /**< free_head: index + 1, 0 for none */
};

static pthread_mutex_t g_files_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rocemu_vfile *g_files;

int rocemu_vfile_open(struct rocemu_vdevice *d, struct rocemu_vfile **out, int *fd_out)
{
	char name[96];
	struct stat st;
	int e;

	rocemu_fork_watch();
	snprintf(name, sizeof(name), "rocemu-ctx:%s:%ld", d->ibdev.name, (long)getpid());
	int fd = memfd_create(name, MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct rocemu_vfile *f = calloc(1, sizeof(*f));
	if (!f || fstat(fd, &st) < 0) {
		e = f ? errno : ENOMEM;
		free(f);
		close(fd);
		return -e;
	}
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	f->pid = getpid();
	f->refs = 1;
	pthread_mutex_init(&f->lock, NULL);
	pthread_mutex_lock(&g_files_lock);
	f->next = g_files;
	g_files = f;
	pthread_mutex_unlock(&g_files_lock);
	*out = f;
	*fd_out = fd;
	return 0;
}

void rocemu_vfile_put(struct rocemu_vfile *f)
{
	bool last;

	pthread_mutex_lock(&g_files_lock);
	last = --f->refs == 0;
	if (last)
		for (struct rocemu_vfile **pp = &g_files; *pp; pp = &(*pp)->next)
			if (*pp == f) {
				*pp = f->next;
				break;
			}
	pthread_mutex_unlock(&g_files_lock);
	if (!last)
		return;
	pthread_mutex_destroy(&f->lock);
	free(f->slots);
	free(f);
}

pid_t rocemu_vfile_pid(const struct rocemu_vfile *f)
{
	return f->pid;
}

bool rocemu_vfile_foreign(const struct rocemu_vfile *f)
{
	return f->pid != getpid();
}

/* ------------------------------------------------------------------------ */
/* Handles                                                                    */

int rocemu_handle_add(struct rocemu_vfile *f, enum rocemu_vobj_type type, void *obj, void *aux,
		      uint32_t *handle)
{
	uint32_t i;

	pthread_mutex_lock(&f->lock);
	if (f->free_head) {
		i = f->free_head - 1;
		f->free_head = f->slots[i].next_free;
	} else {
		if (f->n_slots == SLOT_MAX) {
			pthread_mutex_unlock(&f->lock);
			return -ENOSPC;
		}
		if (f->n_slots == f->cap) {
			uint32_t cap = f->cap ? f->cap * 2 : 64;
			struct vslot *s = realloc(f->slots, cap * sizeof(*s));
			if (!s) {
				pthread_mutex_unlock(&f->lock);
				return -ENOMEM;
			}
			f->slots = s;
			f->cap = cap;
		}
		i = f->n_slots++;
		f->slots[i].uses = 0;
	}
	struct vslot *s = &f->slots[i];
	/* 1..4095: a handle is never 0, and 4095 reuses of a slot pass before
	 * a stale handle could name it again */
	s->uses = s->uses % ((1u << (32 - SLOT_BITS)) - 1) + 1;
	s->handle = s->uses << SLOT_BITS | i;
	s->type = type;
	s->obj = obj;
	s->aux = aux;
	*handle = s->handle;
	pthread_mutex_unlock(&f->lock);
	return 0;
}

/* The slot of a handle in use, or NULL (lock held). */
static struct vslot *slot_of(struct rocemu_vfile *f, uint32_t handle)
{
	uint32_t i = handle & (SLOT_MAX - 1);

	if (!handle || i >= f->n_slots || f->slots[i].handle != handle)
		return NULL;
	return &f->slots[i];
}

static void slot_free(struct rocemu_vfile *f, struct vslot *s)
{
	s->handle = 0;
	s->obj = s->aux = NULL;
	s->next_free = f->free_head;
	f->free_head = (uint32_t)(s - f->slots) + 1;
}

void rocemu_handle_drop(struct rocemu_vfile *f, uint32_t handle)
{
	pthread_mutex_lock(&f->lock);
	struct vslot *s = slot_of(f, handle);
	if (s)
		slot_free(f, s);
	pthread_mutex_unlock(&f->lock);
}

/* What import finds: ENOENT for no such object, EINVAL for another type (as
 * the kernel's uverbs lookup answers). */
int rocemu_handle_get(struct rocemu_vfile *f, enum rocemu_vobj_type type, uint32_t handle,
		      void **obj, void **aux)
{
	int rc = 0;

	pthread_mutex_lock(&f->lock);
	struct vslot *s = slot_of(f, handle);
	if (!s)
		rc = -ENOENT;
	else if (s->type != type)
		rc = -EINVAL;
	else {
		*obj = s->obj;
		if (aux)
			*aux = s->aux;
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

int rocemu_handle_destroy(struct rocemu_vfile *f, enum rocemu_vobj_type type, uint32_t handle,
			  void *obj, int (*destroy)(void *obj, void *aux))
{
	int rc;

	pthread_mutex_lock(&f->lock);
	struct vslot *s = slot_of(f, handle);
	if (!s || s->type != type || s->obj != obj) {
		/* destroyed already, through another wrapper: only unimport is left */
		pthread_mutex_unlock(&f->lock);
		return -EINVAL;
	}
	rc = destroy(s->obj, s->aux);
	if (rc == 0)
		slot_free(f, s);
	pthread_mutex_unlock(&f->lock);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Import                                                                     */

/* The file fd is on, with a reference taken; NULL and errno set when it is
 * none of ours (saying why on stderr when it is another process's). */
static struct rocemu_vfile *file_of_fd(int fd)
{
	struct rocemu_vfile *f;
	struct stat st;

	if (fstat(fd, &st) < 0)
		return NULL; /* EBADF */
	pthread_mutex_lock(&g_files_lock);
	for (f = g_files; f; f = f->next)
		if (f->dev == st.st_dev && f->ino == st.st_ino)
			break;
	if (f && !rocemu_vfile_foreign(f))
		f->refs++;
	pthread_mutex_unlock(&g_files_lock);
	if (f && rocemu_vfile_foreign(f)) {
		fprintf(stderr,
			"rocemu: ibv_import_device: fd %d is a context of the parent process "
			"(inherited across fork()): its engine is not in this process; open the "
			"device in a new program (exec) instead\n",
			fd);
		errno = EIO;
		return NULL;
	}
	if (f)
		return f;
	char path[64], target[256];
	ssize_t n;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	target[n > 0 ? n : 0] = '\0';
	if (!strncmp(target, "/memfd:rocemu-ctx:", 18)) {
		char *deleted = strstr(target, " (deleted)");
		if (deleted)
			*deleted = '\0';
		fprintf(stderr,
			"rocemu: ibv_import_device: fd %d is a context of another process (%s): "
			"each rocemu process has its own engine, so objects are shared only "
			"between contexts of one process; import there, or open the device in "
			"this process (with a host NIC, docs/host.md, processes share one NIC)\n",
			fd, target + 7);
		errno = EOPNOTSUPP;
		return NULL;
	}
	errno = EINVAL; /* not a rocemu command fd (rdma-core: not a uverbs device) */
	return NULL;
}

struct ibv_context *ibv_import_device(int cmd_fd)
{
	struct rocemu_vfile *f = file_of_fd(cmd_fd);
	struct rocemu_vdevice *d = NULL;
	unsigned n;

	if (!f)
		return NULL;
	struct rocemu_vdevice **devs = rocemu_devices(&n);
	pthread_mutex_lock(&rocemu_ctx_list_lock);
	for (unsigned i = 0; i < n && !d; i++)
		for (struct rocemu_vcontext *c = devs[i]->contexts; c; c = c->next)
			if (c->file == f) {
				d = devs[i];
				break;
			}
	pthread_mutex_unlock(&rocemu_ctx_list_lock);
	if (!d) { /* its contexts are closing */
		rocemu_vfile_put(f);
		errno = EINVAL;
		return NULL;
	}
	return rocemu_context_new(d, f, cmd_fd);
}
ROCEMU_PUBLIC(ibv_import_device)

struct ibv_pd *ibv_import_pd(struct ibv_context *ctx, uint32_t pd_handle)
{
	if (rocemu_dead(ctx))
		return rocemu_inherited_null(ctx);
	void *epd;

	if (!ctx) {
		errno = EINVAL;
		return NULL;
	}
	int rc = rocemu_handle_get(to_vctx(ctx)->file, ROCEMU_VOBJ_PD, pd_handle, &epd, NULL);
	if (rc < 0)
		return rocemu_null_errno(rc);
	struct rocemu_vpd *p = calloc(1, sizeof(*p));
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	p->epd = epd;
	p->pd.context = ctx;
	p->pd.handle = pd_handle;
	return &p->pd;
}
ROCEMU_PUBLIC(ibv_import_pd)

/* The wrapper only: the PD stays (destroyed through it or not). A parent
 * domain was never imported: it is left to ibv_dealloc_pd. */
void ibv_unimport_pd(struct ibv_pd *pd)
{
	if (pd && !to_vpd(pd)->parent_of)
		free(pd);
}
ROCEMU_PUBLIC(ibv_unimport_pd)

struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	if (rocemu_dead(ROCEMU_CTX_OF(pd)))
		return rocemu_inherited_null(ROCEMU_CTX_OF(pd));
	void *emr, *edm;

	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	int rc =
	    rocemu_handle_get(to_vctx(pd->context)->file, ROCEMU_VOBJ_MR, mr_handle, &emr, &edm);
	if (rc < 0)
		return rocemu_null_errno(rc);
	struct rocemu_vmr *m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	m->emr = emr;
	m->edm = edm;
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.handle = mr_handle;
	rocemu_mr_sync(m);
	m->mr.addr = NULL; /* ibv_import_mr(3): not applicable */
	return &m->mr;
}
ROCEMU_PUBLIC(ibv_import_mr)

void ibv_unimport_mr(struct ibv_mr *mr)
{
	free(mr);
}
ROCEMU_PUBLIC(ibv_unimport_mr)
