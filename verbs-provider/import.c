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
 *
 * Another process's fd (both attached to one rocemu host): the memfd's own
 * pages publish the table (struct pub_hdr, struct pub_entry, below), and
 * the importer gets stand-ins in its own engine: a PD per exporter PD, the
 * exporter's regions under their own keys (emulator/memory/mr_import.c),
 * its device memory as an address to copy to and from. Bytes move with
 * process_vm_readv/writev on the exporter's pid; the exporter's dereg/free
 * waits for copies in progress (docs/verbs-provider.md, "Sharing objects").
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
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

/*
 * The published table: the memfd's own pages, which another process on the
 * same host maps from the fd it was given (SCM_RIGHTS). A header, then one
 * entry per slot. An entry is importable while its stamp is not 0; the
 * owner changes an entry by zeroing the stamp first, and before it lets the
 * object go it waits until busy (copies by importers in progress,
 * emulator/memory/mr_import.c) is 0. Readers copy an entry between two
 * reads of its stamp.
 */
#define PUB_MAGIC     0x52435846u /* "RCXF" */
#define PUB_VERSION   1u
#define PUB_HDR_SIZE  4096u
#define PUB_IMPORTERS 16u

struct pub_hdr {
	uint32_t magic, version;
	uint32_t pid;		    /**< the owner (the exporter) */
	uint32_t host_pid;	    /**< its host (0: standalone) */
	uint32_t proc_id, proc_gen; /**< its attach on the host */
	char host_name[64];
	char dev_name[64];
	uint64_t nonce;			   /**< also at nonce_addr in the owner's memory */
	uint64_t nonce_addr;		   /**< 0 once the owner closed the context */
	uint32_t n_slots;		   /**< entries that may be in use */
	uint32_t importers[PUB_IMPORTERS]; /**< processes that imported (pids, 0: free) */
};

struct pub_entry {
	uint32_t stamp; /**< 0: nothing importable here */
	uint32_t busy;	/**< importers' copies in progress */
	uint32_t handle, type, pd_handle, key, access, implicit;
	uint64_t addr, length, iova;
	uint64_t pad;
};
_Static_assert(sizeof(struct pub_entry) == 64, "64-byte entries");
#define PUB_MAP_SIZE ((size_t)PUB_HDR_SIZE + (size_t)SLOT_MAX * sizeof(struct pub_entry))

static inline struct pub_entry *pub_entry(struct pub_hdr *h, uint32_t i)
{
	return (struct pub_entry *)((char *)h + PUB_HDR_SIZE) + i;
}

/* What another process's file stands for here: an imported PD or MR (one
 * engine object however often it is imported). */
struct proxy {
	struct proxy *next;
	enum rocemu_vobj_type type;
	uint32_t handle; /**< the exporter's */
	void *obj;	 /**< our engine's PD, or imported region */
	unsigned refs;	 /**< wrappers */
};

struct rocemu_vfile {
	struct rocemu_vfile *next; /**< in g_files */
	dev_t dev;
	ino_t ino;
	pid_t pid;	      /**< the process that opened it here */
	unsigned refs;	      /**< contexts on it, imported regions (g_files_lock) */
	pthread_mutex_t lock; /**< guards the table */
	struct vslot *slots;
	uint32_t n_slots, cap, free_head; /**< free_head: index + 1, 0 for none */
	int fd;				  /**< the memfd (a dup of our own) */
	struct pub_hdr *pub; /**< its published table, mapped (ours rw; an exporter's too) */
	uint64_t nonce;	     /**< ours: what pub->nonce_addr points at */
	uint32_t stamps;     /**< ours: the last stamp given */
	/* Another process's file (ibv_import_device across processes) */
	bool remote;
	pid_t exporter;
	int pidfd;
	struct proxy *proxies;
};

static pthread_mutex_t g_files_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rocemu_vfile *g_files;

static int getrandom_nonce(uint64_t *n)
{
	return getrandom(n, sizeof(*n), 0) == sizeof(*n) ? 0 : -EIO;
}

static void pub_unmap(struct rocemu_vfile *f)
{
	if (f->pub)
		munmap(f->pub, PUB_MAP_SIZE);
	if (f->fd >= 0)
		close(f->fd);
}

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
	if (!f || fstat(fd, &st) < 0 || ftruncate(fd, PUB_HDR_SIZE) < 0) {
		e = f ? errno : ENOMEM;
		free(f);
		close(fd);
		return -e;
	}
	f->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	f->pub = f->fd < 0 ? MAP_FAILED
			   : mmap(NULL, PUB_MAP_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, 0);
	if (f->pub == MAP_FAILED) {
		e = errno;
		f->pub = NULL;
		pub_unmap(f);
		free(f);
		close(fd);
		return -e;
	}
	(void)getrandom_nonce(&f->nonce);
	*f->pub = (struct pub_hdr){
	    .magic = PUB_MAGIC,
	    .version = PUB_VERSION,
	    .pid = (uint32_t)getpid(),
	    .nonce = f->nonce,
	    .nonce_addr = (uint64_t)(uintptr_t)&f->nonce,
	};
	snprintf(f->pub->dev_name, sizeof(f->pub->dev_name), "%s", d->ibdev.name);
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	f->pid = getpid();
	f->refs = 1;
	f->pidfd = -1;
	pthread_mutex_init(&f->lock, NULL);
	pthread_mutex_lock(&g_files_lock);
	f->next = g_files;
	g_files = f;
	pthread_mutex_unlock(&g_files_lock);
	*out = f;
	*fd_out = fd;
	return 0;
}

/* Yama's ptrace_scope 1 lets a process read another's memory only when it
 * is an ancestor or named by prctl(PR_SET_PTRACER): an importer on the same
 * host is neither, so an exporter on a host NIC names any (its own user's
 * processes, as scope 0 allows everyone). Scopes 2 and 3 stay closed. */
static void allow_importers(void)
{
	static bool done;
	char c = 0;
	int fd = open("/proc/sys/kernel/yama/ptrace_scope", O_RDONLY | O_CLOEXEC);

	if (fd < 0 || done)
		goto out;
	if (read(fd, &c, 1) == 1 && c == '1')
		prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
	done = true;
out:
	if (fd >= 0)
		close(fd);
}

void rocemu_vfile_attached(struct rocemu_vfile *f, struct rocemu_port *port)
{
	struct rocemu_port_host_id id;

	if (f->remote || rocemu_port_host_id(port, &id) < 0)
		return;
	f->pub->host_pid = id.host_pid;
	f->pub->proc_id = id.proc_id;
	f->pub->proc_gen = id.proc_gen;
	memcpy(f->pub->host_name, id.name, sizeof(f->pub->host_name));
	allow_importers();
}

void rocemu_vfile_put(struct rocemu_vfile *f)
{
	bool last;

	if (!f)
		return;
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
	/* Stand-ins for PDs left by unimport (their users kept them) or never
	 * dropped: the engine may be gone already (ibv_close_device releases
	 * it first), so they stay until it goes and frees them. */
	while (f->proxies) {
		struct proxy *p = f->proxies;
		f->proxies = p->next;
		free(p);
	}
	if (!f->remote && f->pub) {
		/* Closed: an fd that outlives our contexts (passed on, kept by a
		 * child) imports nothing. The nonce's memory is freed below and
		 * may keep its value, so the header, not the nonce, says it. */
		__atomic_store_n(&f->pub->nonce_addr, 0, __ATOMIC_SEQ_CST);
		explicit_bzero(&f->nonce, sizeof(f->nonce));
	}
	pub_unmap(f);
	if (f->pidfd >= 0)
		close(f->pidfd);
	pthread_mutex_destroy(&f->lock);
	free(f->slots);
	free(f);
}

bool rocemu_vfile_remote(const struct rocemu_vfile *f)
{
	return f->remote;
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

static struct vslot *slot_of(struct rocemu_vfile *f, uint32_t handle);
static void pub_set(struct rocemu_vfile *f, uint32_t i, const struct pub_entry *e);
static uint32_t pub_withdraw(struct rocemu_vfile *f, uint32_t i);

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
			/* the published entries grow with the slots (the file, not the map) */
			if (!f->remote &&
			    ftruncate(f->fd,
				      PUB_HDR_SIZE + (off_t)cap * (off_t)sizeof(struct pub_entry)) <
				0) {
				pthread_mutex_unlock(&f->lock);
				return -errno;
			}
			f->cap = cap;
		}
		i = f->n_slots++;
		f->slots[i].uses = 0;
		if (!f->remote)
			__atomic_store_n(&f->pub->n_slots, f->n_slots, __ATOMIC_RELEASE);
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
	if (!f->remote && type == ROCEMU_VOBJ_PD) /* MR, DM: once their memory is known */
		pub_set(f, i, &(struct pub_entry){.handle = s->handle, .type = type});
	pthread_mutex_unlock(&f->lock);
	return 0;
}

void rocemu_handle_publish_dm(struct rocemu_vfile *f, uint32_t handle, uint64_t addr,
			      uint64_t length)
{
	pthread_mutex_lock(&f->lock);
	struct vslot *s = slot_of(f, handle);
	if (s && !f->remote)
		pub_set(
		    f, (uint32_t)(s - f->slots),
		    &(struct pub_entry){
			.handle = handle, .type = ROCEMU_VOBJ_DM, .addr = addr, .length = length});
	pthread_mutex_unlock(&f->lock);
}

void rocemu_handle_publish_mr(struct rocemu_vfile *f, uint32_t handle, uint32_t pd_handle,
			      const struct ibv_mr *mr, const void *addr, bool implicit,
			      uint64_t iova, unsigned access)
{
	pthread_mutex_lock(&f->lock);
	struct vslot *s = slot_of(f, handle);
	if (s && !f->remote) {
		struct pub_entry e = {
		    .handle = handle,
		    .type = ROCEMU_VOBJ_MR,
		    .pd_handle = pd_handle,
		    .key = mr->rkey,
		    .access = access,
		    .implicit = implicit,
		    .addr = (uint64_t)(uintptr_t)addr,
		    .length = mr->length,
		    .iova = iova,
		};
		pub_withdraw(f, (uint32_t)(s - f->slots)); /* a rereg: the old one first */
		pub_set(f, (uint32_t)(s - f->slots), &e);
	}
	pthread_mutex_unlock(&f->lock);
}

/* The slot of a handle in use, or NULL (lock held). */
static struct vslot *slot_of(struct rocemu_vfile *f, uint32_t handle)
{
	uint32_t i = handle & (SLOT_MAX - 1);

	if (!handle || i >= f->n_slots || f->slots[i].handle != handle)
		return NULL;
	return &f->slots[i];
}

/* Publish entry i as e (lock held; i's stamp is 0). */
static void pub_set(struct rocemu_vfile *f, uint32_t i, const struct pub_entry *e)
{
	struct pub_entry *p = pub_entry(f->pub, i);

	p->handle = e->handle;
	p->type = e->type;
	p->pd_handle = e->pd_handle;
	p->key = e->key;
	p->access = e->access;
	p->implicit = e->implicit;
	p->addr = e->addr;
	p->length = e->length;
	p->iova = e->iova;
	if (++f->stamps == 0)
		f->stamps = 1;
	__atomic_store_n(&p->stamp, f->stamps, __ATOMIC_SEQ_CST);
}

/* Any importer still running? (a copy counted in busy by one that died
 * would never be uncounted) */
static bool importers_run(const struct pub_hdr *h)
{
	for (unsigned i = 0; i < PUB_IMPORTERS; i++) {
		pid_t pid = (pid_t)__atomic_load_n(&h->importers[i], __ATOMIC_RELAXED);
		if (pid > 0 && (kill(pid, 0) == 0 || errno == EPERM))
			return true;
	}
	return false;
}

/* Entry i is no longer importable, and no importer's copy through it is in
 * progress when this returns (lock held). */
static uint32_t pub_withdraw(struct rocemu_vfile *f, uint32_t i)
{
	struct pub_entry *p = pub_entry(f->pub, i);
	uint32_t old = __atomic_exchange_n(&p->stamp, 0, __ATOMIC_SEQ_CST);

	if (!old)
		return 0;
	for (unsigned n = 1; __atomic_load_n(&p->busy, __ATOMIC_SEQ_CST); n++) {
		if (n % 4096 == 0 && !importers_run(f->pub)) {
			__atomic_store_n(&p->busy, 0, __ATOMIC_SEQ_CST);
			break;
		}
		nanosleep(&(struct timespec){.tv_nsec = 20000}, NULL);
	}
	return old;
}

static void slot_free(struct rocemu_vfile *f, struct vslot *s)
{
	if (!f->remote)
		pub_withdraw(f, (uint32_t)(s - f->slots));
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
	/* Device memory is the engine's: freed by destroy, so importers' copies
	 * stop before (and go on if it stays, EBUSY). A region's memory is the
	 * application's, which it gets back when this returns. */
	uint32_t stamp =
	    !f->remote && type == ROCEMU_VOBJ_DM ? pub_withdraw(f, (uint32_t)(s - f->slots)) : 0;
	rc = destroy(s->obj, s->aux);
	if (rc == 0)
		slot_free(f, s);
	else if (stamp)
		__atomic_store_n(&pub_entry(f->pub, (uint32_t)(s - f->slots))->stamp, stamp,
				 __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&f->lock);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Import                                                                     */

/* ------------------------------------------------------------------------ */
/* Another process's file                                                     */

/* A copy of entry `handle` of a published table: 0, or -ENOENT (nothing
 * importable), -EINVAL (another type). */
static int pub_read(struct pub_hdr *h, uint32_t handle, enum rocemu_vobj_type type,
		    struct pub_entry *out)
{
	uint32_t i = handle & (SLOT_MAX - 1);

	if (!handle || i >= __atomic_load_n(&h->n_slots, __ATOMIC_ACQUIRE))
		return -ENOENT;
	struct pub_entry *p = pub_entry(h, i);
	for (;;) {
		uint32_t s1 = __atomic_load_n(&p->stamp, __ATOMIC_ACQUIRE);
		if (!s1)
			return -ENOENT;
		memcpy(out, p, sizeof(*out));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&p->stamp, __ATOMIC_RELAXED) == s1) {
			out->stamp = s1;
			break;
		}
	}
	if (out->handle != handle)
		return -ENOENT;
	return out->type == (uint32_t)type ? 0 : -EINVAL;
}

static int say(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int say(int err, const char *fmt, ...)
{
	va_list ap;

	fputs("rocemu: ibv_import_device: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return -err;
}

/* Map another process's file from fd and check that it is one and that its
 * process is there and lets us read its memory. */
static int remote_open(int fd, const struct stat *st, struct rocemu_vfile **out)
{
	struct pub_hdr h;
	int rc;

	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) || h.magic != PUB_MAGIC ||
	    h.version != PUB_VERSION)
		return -EINVAL;
	h.dev_name[sizeof(h.dev_name) - 1] = h.host_name[sizeof(h.host_name) - 1] = '\0';
	if (h.pid == (uint32_t)getpid())
		return -EINVAL; /* our own file, whose contexts have all closed */
	if (!h.nonce_addr)
		return say(ESRCH,
			   "fd %d: process %u closed that device context; the fd outlived it "
			   "and has nothing to import",
			   fd, h.pid);
	if (!h.host_pid)
		return say(EOPNOTSUPP,
			   "fd %d is a context of another process (%u), which is not attached "
			   "to a rocemu host: each standalone process has its own engine; "
			   "objects cross processes only on one host NIC (start both with "
			   "`rocemu run --host NAME`, docs/host.md)",
			   fd, h.pid);
	struct rocemu_vfile *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->remote = true;
	f->exporter = (pid_t)h.pid;
	f->pid = getpid();
	f->refs = 1;
	f->dev = st->st_dev;
	f->ino = st->st_ino;
	f->pidfd = (int)syscall(SYS_pidfd_open, f->exporter, 0);
	f->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (f->pidfd < 0) {
		rc = errno == ESRCH ? say(ESRCH, "fd %d: its process %u has exited", fd, h.pid)
				    : -errno;
		goto fail;
	}
	f->pub = f->fd < 0 ? MAP_FAILED
			   : mmap(NULL, PUB_MAP_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, 0);
	if (f->pub == MAP_FAILED) {
		f->pub = NULL;
		rc = -errno;
		goto fail;
	}
	/* the pid is the exporter (its memory has the nonce), and we may read it */
	uint64_t nonce = 0;
	struct iovec l = {.iov_base = &nonce, .iov_len = sizeof(nonce)};
	struct iovec r = {.iov_base = (void *)(uintptr_t)h.nonce_addr, .iov_len = sizeof(nonce)};
	if (process_vm_readv(f->exporter, &l, 1, &r, 1, 0) != (ssize_t)sizeof(nonce)) {
		rc = errno == EPERM
			 ? say(EPERM,
			       "fd %d: not allowed to reach the memory of process %u (another "
			       "user, or Yama's kernel.yama.ptrace_scope above 1)",
			       fd, h.pid)
			 : say(ESRCH, "fd %d: its process %u has exited", fd, h.pid);
		goto fail;
	}
	if (nonce != h.nonce) {
		rc = say(ESRCH, "fd %d: its process %u has exited", fd, h.pid);
		goto fail;
	}
	/* count ourselves among its importers (it waits for our copies) */
	for (unsigned i = 0;; i++) {
		if (i == PUB_IMPORTERS) {
			rc = say(EUSERS, "fd %d: %u processes import from process %u already", fd,
				 PUB_IMPORTERS, h.pid);
			goto fail;
		}
		uint32_t *slot = &f->pub->importers[i];
		uint32_t cur = __atomic_load_n(slot, __ATOMIC_RELAXED);
		if (cur == (uint32_t)getpid())
			break;
		if ((cur == 0 || (kill((pid_t)cur, 0) < 0 && errno == ESRCH)) &&
		    __atomic_compare_exchange_n(slot, &cur, (uint32_t)getpid(), false,
						__ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
			break;
	}
	pthread_mutex_init(&f->lock, NULL);
	*out = f;
	return 0;
fail:
	pub_unmap(f);
	if (f->pidfd >= 0)
		close(f->pidfd);
	free(f);
	return rc;
}

static struct proxy *proxy_find(struct rocemu_vfile *f, enum rocemu_vobj_type type, uint32_t handle)
{
	for (struct proxy *p = f->proxies; p; p = p->next)
		if (p->type == type && p->handle == handle)
			return p;
	return NULL;
}

/* Free a proxy's engine object: 0, or -EBUSY for a PD still in use. */
static int proxy_free_obj(struct proxy *p)
{
	return p->type == ROCEMU_VOBJ_PD ? rocemu_pd_free(p->obj) : rocemu_mr_unimport(p->obj);
}

int rocemu_remote_drop(struct ibv_context *ctx, enum rocemu_vobj_type type, uint32_t handle,
		       bool destroy)
{
	struct rocemu_vfile *f = to_vctx(ctx)->file;
	bool put = false;
	int rc = 0;

	pthread_mutex_lock(&f->lock);
	struct proxy *p = proxy_find(f, type, handle);
	if (!p || !p->refs) {
		pthread_mutex_unlock(&f->lock);
		return -EINVAL;
	}
	if (p->refs == 1) {
		rc = proxy_free_obj(p);
		if (rc == 0) {
			for (struct proxy **pp = &f->proxies; *pp; pp = &(*pp)->next)
				if (*pp == p) {
					*pp = p->next;
					break;
				}
			put = type == ROCEMU_VOBJ_MR;
			free(p);
		} else if (!destroy) {
			p->refs = 0; /* unimport: the PD stays while our objects use it */
			rc = 0;
		}
	} else {
		p->refs--;
	}
	pthread_mutex_unlock(&f->lock);
	if (put)
		rocemu_vfile_put(f); /* the imported region's hold on the mapping */
	return rc;
}

int rocemu_remote_dm(struct ibv_context *ctx, uint32_t handle, struct rocemu_mem_foreign *fm,
		     struct rocemu_vfile **file)
{
	struct rocemu_vfile *f = to_vctx(ctx)->file;
	struct pub_entry e;
	int rc = pub_read(f->pub, handle, ROCEMU_VOBJ_DM, &e);

	if (rc < 0)
		return rc;
	struct pub_entry *pe = pub_entry(f->pub, handle & (SLOT_MAX - 1));
	*fm = (struct rocemu_mem_foreign){
	    .pid = f->exporter,
	    .pidfd = f->pidfd,
	    .busy = &pe->busy,
	    .stamp = &pe->stamp,
	    .expect = e.stamp,
	    .addr = e.addr,
	    .length = e.length,
	};
	pthread_mutex_lock(&g_files_lock);
	f->refs++; /* the copies use the mapping */
	pthread_mutex_unlock(&g_files_lock);
	*file = f;
	return 0;
}

static struct ibv_pd *remote_import_pd(struct ibv_context *ctx, uint32_t handle)
{
	struct rocemu_vfile *f = to_vctx(ctx)->file;
	struct pub_entry e;
	int rc = pub_read(f->pub, handle, ROCEMU_VOBJ_PD, &e);

	if (rc < 0)
		return rocemu_null_errno(rc);
	struct rocemu_vpd *v = calloc(1, sizeof(*v));
	if (!v)
		return rocemu_null_errno(-ENOMEM);
	pthread_mutex_lock(&f->lock);
	struct proxy *p = proxy_find(f, ROCEMU_VOBJ_PD, handle);
	if (!p) {
		p = calloc(1, sizeof(*p));
		rc = p ? rocemu_pd_alloc(to_vctx(ctx)->engine, (struct rocemu_pd **)&p->obj)
		       : -ENOMEM;
		if (rc < 0) {
			pthread_mutex_unlock(&f->lock);
			free(p);
			free(v);
			return rocemu_null_errno(rc);
		}
		p->type = ROCEMU_VOBJ_PD;
		p->handle = handle;
		p->next = f->proxies;
		f->proxies = p;
	}
	p->refs++;
	pthread_mutex_unlock(&f->lock);
	v->epd = p->obj;
	v->remote = true;
	v->pd.context = ctx;
	v->pd.handle = handle;
	return &v->pd;
}

static struct ibv_mr *remote_import_mr(struct ibv_pd *pd, uint32_t handle)
{
	struct rocemu_vfile *f = to_vctx(pd->context)->file;
	struct pub_entry e;
	int rc = pub_read(f->pub, handle, ROCEMU_VOBJ_MR, &e);

	if (rc == 0 && (!to_vpd(pd)->remote || e.pd_handle != pd->handle))
		rc = -EINVAL; /* the region is on another PD */
	if (rc < 0)
		return rocemu_null_errno(rc);
	struct rocemu_vmr *m = calloc(1, sizeof(*m));
	if (!m)
		return rocemu_null_errno(-ENOMEM);
	pthread_mutex_lock(&f->lock);
	struct proxy *p = proxy_find(f, ROCEMU_VOBJ_MR, handle);
	if (!p) {
		struct pub_entry *pe = pub_entry(f->pub, handle & (SLOT_MAX - 1));
		struct rocemu_mem_foreign fm = {
		    .pid = f->exporter,
		    .pidfd = f->pidfd,
		    .busy = &pe->busy,
		    .stamp = &pe->stamp,
		    .expect = e.stamp,
		    .key = e.key,
		    .addr = e.addr,
		    .length = e.length,
		    .iova = e.iova,
		    .access = e.access,
		    .implicit = e.implicit,
		};
		p = calloc(1, sizeof(*p));
		rc = p ? rocemu_mr_import(to_vpd(pd)->epd, &fm, (struct rocemu_mr **)&p->obj)
		       : -ENOMEM;
		if (rc < 0) {
			pthread_mutex_unlock(&f->lock);
			free(p);
			free(m);
			return rocemu_null_errno(rc);
		}
		p->type = ROCEMU_VOBJ_MR;
		p->handle = handle;
		p->next = f->proxies;
		f->proxies = p;
		pthread_mutex_lock(&g_files_lock);
		f->refs++; /* the region's copies use the mapping */
		pthread_mutex_unlock(&g_files_lock);
	}
	p->refs++;
	pthread_mutex_unlock(&f->lock);
	m->emr = p->obj;
	m->remote = true;
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->epd = to_vpd(pd)->epd;
	m->mr.handle = handle;
	rocemu_mr_sync(m);
	m->mr.addr = NULL; /* ibv_import_mr(3): not applicable */
	return &m->mr;
}

/* The context found for another process's file: on our device of the same
 * name, which must be attached to the exporter's host. */
static struct ibv_context *remote_context(struct rocemu_vfile *f, int cmd_fd)
{
	struct rocemu_vdevice *d = NULL;
	struct rocemu_port_host_id id;
	unsigned n;

	struct rocemu_vdevice **devs = rocemu_devices(&n);
	for (unsigned i = 0; i < n && !d; i++)
		if (!strcmp(devs[i]->ibdev.name, f->pub->dev_name))
			d = devs[i];
	if (!d) {
		errno = -say(ENODEV, "fd %d: process %u's device %.64s is not here", cmd_fd,
			     (unsigned)f->exporter, f->pub->dev_name);
		rocemu_vfile_put(f);
		return NULL;
	}
	struct ibv_context *ctx = rocemu_context_new(d, f, cmd_fd);
	if (!ctx)
		return NULL;
	int rc = rocemu_port_host_id(to_vctx(ctx)->port, &id);
	if (rc < 0 || id.host_pid != f->pub->host_pid ||
	    strncmp(id.name, f->pub->host_name, sizeof(id.name)) || id.proc_id == f->pub->proc_id) {
		if (rc < 0)
			say(EOPNOTSUPP,
			    "fd %d is a context of another process (%u) on rocemu host '%.64s', "
			    "and this process is not attached to a host: start it with `rocemu "
			    "run --host %.64s` (docs/host.md)",
			    cmd_fd, (unsigned)f->exporter, f->pub->host_name, f->pub->host_name);
		else
			say(EOPNOTSUPP,
			    "fd %d is a context of another process (%u) on rocemu host '%.64s' "
			    "(pid %u); this process is on '%.64s' (pid %u): objects cross "
			    "processes of one host only",
			    cmd_fd, (unsigned)f->exporter, f->pub->host_name, f->pub->host_pid,
			    id.name, id.host_pid);
		to_vctx(ctx)->file = NULL; /* the fd is the caller's still */
		ctx->cmd_fd = -1;
		ibv_close_device(ctx);
		rocemu_vfile_put(f);
		errno = EOPNOTSUPP;
		return NULL;
	}
	return ctx;
}

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
		int rc = remote_open(fd, &st, &f);
		if (rc < 0) {
			errno = -rc;
			return NULL;
		}
		pthread_mutex_lock(&g_files_lock);
		f->next = g_files;
		g_files = f;
		pthread_mutex_unlock(&g_files_lock);
		return f;
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
	if (f->remote)
		return remote_context(f, cmd_fd);
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
	if (to_vctx(ctx)->file->remote)
		return remote_import_pd(ctx, pd_handle);
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
	if (pd && to_vpd(pd)->remote)
		(void)rocemu_remote_drop(pd->context, ROCEMU_VOBJ_PD, pd->handle, false);
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
	if (to_vctx(pd->context)->file->remote)
		return remote_import_mr(pd, mr_handle);
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
	m->epd = to_vpd(pd)->epd;
	m->mr.handle = mr_handle;
	rocemu_mr_sync(m);
	m->mr.addr = NULL; /* ibv_import_mr(3): not applicable */
	return &m->mr;
}
ROCEMU_PUBLIC(ibv_import_mr)

void ibv_unimport_mr(struct ibv_mr *mr)
{
	if (mr && ((struct rocemu_vmr *)mr)->remote)
		(void)rocemu_remote_drop(mr->context, ROCEMU_VOBJ_MR, mr->handle, false);
	free(mr);
}
ROCEMU_PUBLIC(ibv_unimport_mr)
