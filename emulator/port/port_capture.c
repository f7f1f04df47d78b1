/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Capture tap (ARCHITECTURE §5): every frame sent, received or looped back
 * goes to a pcap file (nanosecond timestamps), through an optional BPF
 * filter compiled by libpcap and applied with pcap_offline_filter, with
 * size-bounded rotation: FILE, then FILE.1, FILE.2, ... each at most
 * capture_rotate_bytes (one frame over, at most). With capture off the data
 * path tests one pointer.
 *
 * A capture never fails silently. The file is checked before a program runs
 * (rocemu_capture_check, by `rocemu run` and `rocemu port`) and again when
 * it is opened: a regular file on a real file system, locked (flock) so
 * that a second rocemu cannot interleave its records with ours. Records are
 * written by this file, not by libpcap's stdio dumper, so that a failed
 * write (full disk, I/O error) is seen with the exact number of whole
 * records that reached the file: the file is cut back to the last whole
 * record (it stays readable), the capture stops, `capture_frames` counts
 * only frames in the file and `capture_frames_not_written` the others, and
 * the failure is kept for the layer above to print at exit
 * (rocemu_capture_take_failure): the engine itself prints nothing.
 *
 * rocemu also writes records of its own, as Ethernet frames of the IEEE 802
 * local experimental EtherType 0x88B5 (Wireshark shows them as such;
 * `rocemu inspect` reads them): "RCMU", version 1, a type, the body length.
 * Every file starts with a capture point (the port's MAC, GIDs and name:
 * which host the capture was taken at), and a frame the fault injector
 * drops is recorded whole, as lost on transmit or on receive, where it would
 * have been captured.
 *
 * A program that closes its device and opens it again (pyverbs suites,
 * rdma-core's tests, middleware probing devices) brings the port down and
 * up in one process. Its capture then goes on where it stopped, in the same
 * file, after a new capture point, instead of starting the file over and
 * losing what the program did before: a closed capture leaves where it
 * stopped (struct capture_resume) for the next open of the same FILE in this
 * process, which appends if the file is still the one it wrote, untouched.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <rte_mbuf.h>

#include "port_internal.h"

#define SNAPLEN	      65535
#define PCAP_FILE_HDR 24
#define PCAP_REC_HDR  16
/* pcap savefile magic for nanosecond timestamps (pcap-savefile(5)) */
#define PCAP_MAGIC_NSEC 0xa1b23c4du

/* rocemu's own records: Ethernet header, then "RCMU", version, type, body length */
#define ANNOT_ETHERTYPE	    0x88B5
#define ANNOT_HDR	    (14 + 8)
#define ANNOT_CAPTURE_POINT 1
#define ANNOT_LOST_TX	    2
#define ANNOT_LOST_RX	    3

static void write_capture_point(struct rocemu_port *port);

/* Failures kept for the report at exit: a process rarely has more ports. */
#define FAILURES_MAX 16
/* Where a closed capture stopped, for a port of this process opened again. */
struct capture_resume {
	char capture_path[ROCEMU_PATH_MAX]; /* FILE, as configured */
	struct capture_place at;	    /* the file it was writing */
	uint64_t bytes;			    /* its size, all of it written */
};
#define RESUMES_MAX 8
static pthread_mutex_t resumes_lock = PTHREAD_MUTEX_INITIALIZER;
static struct capture_resume resumes[RESUMES_MAX];
static unsigned n_resumes;

static pthread_mutex_t failures_lock = PTHREAD_MUTEX_INITIALIZER;
static char failures[FAILURES_MAX][ROCEMU_CAPTURE_MSG_MAX];
static unsigned n_failures;

/* ------------------------------------------------------------------------ */
/* Is this a file a capture may go to?                                       */

/* Kernel pseudo file systems: their "files" are interfaces, never data. */
static const char *pseudo_fs_name(long type)
{
	switch (type) {
	case PROC_SUPER_MAGIC:
		return "proc";
	case SYSFS_MAGIC:
		return "sysfs";
	case DEBUGFS_MAGIC:
		return "debugfs";
	case TRACEFS_MAGIC:
		return "tracefs";
	case CGROUP_SUPER_MAGIC:
	case CGROUP2_SUPER_MAGIC:
		return "cgroup";
	case SECURITYFS_MAGIC:
		return "securityfs";
	case BPF_FS_MAGIC:
		return "bpf";
	case DEVPTS_SUPER_MAGIC:
		return "devpts";
	case PSTOREFS_MAGIC:
		return "pstore";
	case EFIVARFS_MAGIC:
		return "efivarfs";
	default:
		return NULL;
	}
}

/* The verdict on a file that exists (st, fs of the file itself). */
static int refuse_existing(const char *path, const struct stat *st, const struct statfs *fs,
			   char *err, size_t errlen)
{
	const char *pseudo = pseudo_fs_name((long)fs->f_type);

	if (S_ISDIR(st->st_mode))
		return port_fail(err, errlen, -EISDIR, "--capture %s: is a directory", path);
	if (pseudo)
		return port_fail(err, errlen, -EINVAL,
				 "--capture %s: a file of the kernel's %s file system, not a "
				 "place for a capture",
				 path, pseudo);
	if (!S_ISREG(st->st_mode))
		return port_fail(err, errlen, -EINVAL,
				 "--capture %s: not a regular file (a capture is a pcap file, "
				 "rotated and locked)",
				 path);
	return 0;
}

static int refuse_busy(const char *path, char *err, size_t errlen)
{
	return port_fail(err, errlen, -EBUSY,
			 "--capture %s: another rocemu is writing it (give each port a file "
			 "of its own)",
			 path);
}

int rocemu_capture_check(const char *path, char *err, size_t errlen)
{
	struct stat st;
	struct statfs fs;
	char copy[ROCEMU_PATH_MAX + 16], dir[ROCEMU_PATH_MAX + 16];
	int rc, fd;

	if (!path || !*path)
		return port_fail(err, errlen, -EINVAL, "--capture: empty path");
	if (stat(path, &st) == 0) {
		if (statfs(path, &fs) < 0)
			return port_fail(err, errlen, -errno, "--capture %s: %s", path,
					 strerror(errno));
		rc = refuse_existing(path, &st, &fs, err, errlen);
		if (rc)
			return rc;
		if (access(path, W_OK) < 0)
			return port_fail(err, errlen, -errno, "--capture %s: %s", path,
					 strerror(errno));
		/* a writer holds an exclusive lock: a shared one is refused */
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
		if (fd >= 0) {
			rc = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
			close(fd);
			if (rc)
				return refuse_busy(path, err, errlen);
		}
		return 0;
	}
	if (errno != ENOENT)
		return port_fail(err, errlen, -errno, "--capture %s: %s", path, strerror(errno));
	snprintf(copy, sizeof(copy), "%s", path);
	snprintf(dir, sizeof(dir), "%s", dirname(copy)); /* dirname may write into copy */
	if (stat(dir, &st) < 0)
		return port_fail(err, errlen, -errno, "--capture %s: directory %s: %s", path, dir,
				 strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return port_fail(err, errlen, -ENOTDIR, "--capture %s: %s is not a directory", path,
				 dir);
	if (statfs(dir, &fs) == 0 && pseudo_fs_name((long)fs.f_type))
		return port_fail(err, errlen, -EINVAL,
				 "--capture %s: %s belongs to the kernel's %s file system, not a "
				 "place for a capture",
				 path, dir, pseudo_fs_name((long)fs.f_type));
	if (access(dir, W_OK | X_OK) < 0)
		return port_fail(err, errlen, -errno, "--capture %s: cannot create it in %s: %s",
				 path, dir, strerror(errno));
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                   */

/* Write all of buf; the bytes written in *done. 0 or -errno. */
static int write_all(int fd, const uint8_t *buf, size_t len, size_t *done)
{
	*done = 0;
	while (*done < len) {
		ssize_t n = write(fd, buf + *done, len - *done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ENOSPC;
		*done += (size_t)n;
	}
	return 0;
}

/* The capture stops: remember why, count what could not be written. */
static void capture_fail(struct rocemu_port *port, int rc, uint64_t lost)
{
	struct port_capture *c = port->capture;

	if (!c->error)
		c->error = rc;
	c->lost += lost;
	port->ctr[PC_CAPTURE_NOT_WRITTEN] += lost;
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
}

/*
 * Write the buffered records. On a failure, the whole records that made it
 * count as captured, the file is cut back to the last of them (a reader
 * sees a clean end instead of half a record), and the capture stops.
 */
static void flush_buffer(struct rocemu_port *port)
{
	struct port_capture *c = port->capture;
	size_t done, off = 0;
	uint64_t whole = 0;
	int rc;

	if (c->fd < 0 || c->buf_len == 0)
		return;
	rc = write_all(c->fd, c->buf, c->buf_len, &done);
	if (rc == 0) {
		port->ctr[PC_CAPTURE_FRAMES] += c->buf_frames;
		c->written_frames += c->buf_frames;
		c->file_written += c->buf_len;
		c->buf_len = 0;
		c->buf_frames = 0;
		c->buf_records = 0;
		return;
	}
	/* walk the records: each header holds its captured length at offset 8 */
	while (off + PCAP_REC_HDR <= c->buf_len) {
		uint32_t caplen;

		memcpy(&caplen, c->buf + off + 8, 4);
		if (off + PCAP_REC_HDR + caplen > done)
			break;
		off += PCAP_REC_HDR + caplen;
		whole++;
	}
	c->file_written += off;
	/* a capture-point record opens a file: it is no frame */
	whole -= whole < c->buf_records ? whole : c->buf_records;
	port->ctr[PC_CAPTURE_FRAMES] += whole;
	c->written_frames += whole;
	if (off < done && ftruncate(c->fd, (off_t)c->file_written) < 0)
		c->cut_failed = true;
	capture_fail(port, rc, c->buf_frames - whole);
	c->buf_len = 0;
	c->buf_frames = 0;
	c->buf_records = 0;
}

static int write_file_header(int fd)
{
	struct {
		uint32_t magic;
		uint16_t major, minor;
		int32_t thiszone;
		uint32_t sigfigs, snaplen, linktype;
	} h = {PCAP_MAGIC_NSEC, 2, 4, 0, 0, SNAPLEN, DLT_EN10MB};
	size_t done;

	_Static_assert(sizeof(h) == PCAP_FILE_HDR, "pcap file header is 24 bytes");
	return write_all(fd, (const uint8_t *)&h, sizeof(h), &done);
}

/* Open FILE or FILE.n: a regular file, locked, emptied, with its pcap header;
 * or, with r, the file a closed capture stopped in, kept as it is (-ESTALE
 * when it is not that file as it was left). */
static int open_file(struct rocemu_port *port, const struct capture_resume *r, char *err,
		     size_t errlen)
{
	struct port_capture *c = port->capture;
	char *path = c->path;
	struct stat st;
	struct statfs fs;
	int fd, rc;

	if (c->at.file_index == 0)
		snprintf(path, sizeof(c->path), "%s", port->cfg.capture_path);
	else
		snprintf(path, sizeof(c->path), "%s.%u", port->cfg.capture_path, c->at.file_index);
	/* no O_TRUNC before the lock: the file may be another rocemu's */
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0644);
	if (fd < 0)
		return port_fail(err, errlen, -errno, "--capture %s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || fstatfs(fd, &fs) < 0) {
		rc = port_fail(err, errlen, -errno, "--capture %s: %s", path, strerror(errno));
		goto fail;
	}
	rc = refuse_existing(path, &st, &fs, err, errlen);
	if (rc)
		goto fail;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		rc = errno == EWOULDBLOCK ? refuse_busy(path, err, errlen)
					  : port_fail(err, errlen, -errno, "--capture %s: lock: %s",
						      path, strerror(errno));
		goto fail;
	}
	if (r && (st.st_dev != r->at.dev || st.st_ino != r->at.ino ||
		  (uint64_t)st.st_size != r->bytes || lseek(fd, 0, SEEK_END) < 0)) {
		rc = -ESTALE;
		goto fail;
	}
	if (!r && (ftruncate(fd, 0) < 0 || (rc = write_file_header(fd)) < 0)) {
		rc = port_fail(err, errlen, rc < 0 ? rc : -errno, "--capture %s: %s", path,
			       strerror(rc < 0 ? -rc : errno));
		goto fail;
	}
	/* the first file's lock lasts as long as the capture: FILE names it */
	if (c->at.file_index == 0 && c->lock_fd < 0) {
		c->lock_fd = dup(fd);
		if (c->lock_fd < 0) {
			rc = port_fail(err, errlen, -errno, "--capture %s: %s", path,
				       strerror(errno));
			goto fail;
		}
	}
	c->fd = fd;
	port_count(port, PC_CAPTURE_FILES);
	if (r) {
		c->at = r->at;
		c->file_bytes = r->bytes;
		c->file_written = r->bytes;
		write_capture_point(port); /* the port as it came up again */
		return 0;
	}
	c->at.dev = st.st_dev;
	c->at.ino = st.st_ino;
	c->file_bytes = PCAP_FILE_HDR;
	c->file_written = PCAP_FILE_HDR;
	write_capture_point(port);
	c->at.first_bytes = c->file_bytes;
	return 0;
fail:
	close(fd);
	return rc;
}

/* Takes what a closed capture of FILE left in this process; false if none. */
static bool take_resume(const char *capture_path, struct capture_resume *out)
{
	bool found = false;

	pthread_mutex_lock(&resumes_lock);
	for (unsigned i = 0; i < n_resumes; i++) {
		if (strcmp(resumes[i].capture_path, capture_path))
			continue;
		*out = resumes[i];
		resumes[i] = resumes[--n_resumes];
		found = true;
		break;
	}
	pthread_mutex_unlock(&resumes_lock);
	return found;
}

/* A closing capture leaves where it stopped (the oldest such note goes
 * when there are too many: that port's next open starts its file over). */
static void leave_resume(const struct rocemu_port *port, const struct port_capture *c)
{
	struct capture_resume *r;

	pthread_mutex_lock(&resumes_lock);
	if (n_resumes == RESUMES_MAX)
		memmove(&resumes[0], &resumes[1], (RESUMES_MAX - 1) * sizeof(resumes[0]));
	else
		n_resumes++;
	r = &resumes[n_resumes - 1];
	snprintf(r->capture_path, sizeof(r->capture_path), "%s", port->cfg.capture_path);
	r->at = c->at;
	r->bytes = c->file_written;
	pthread_mutex_unlock(&resumes_lock);
}

/*
 * Resume where a closed capture of this process stopped: FILE locked again,
 * then the file it was writing (FILE or FILE.n) reopened at its end. Any
 * other result than 0 leaves nothing open; the caller starts over.
 */
static int resume_files(struct rocemu_port *port, const struct capture_resume *r)
{
	struct port_capture *c = port->capture;
	char err[ROCEMU_CAPTURE_MSG_MAX];
	int rc;

	if (r->at.file_index) {
		c->lock_fd = open(port->cfg.capture_path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
		if (c->lock_fd < 0)
			return -errno;
		if (flock(c->lock_fd, LOCK_EX | LOCK_NB) < 0) {
			rc = -errno;
			close(c->lock_fd);
			c->lock_fd = -1;
			return rc;
		}
	}
	c->at.file_index = r->at.file_index;
	rc = open_file(port, r, err, sizeof(err));
	if (rc) {
		if (c->lock_fd >= 0)
			close(c->lock_fd);
		c->lock_fd = -1;
		c->at.file_index = 0;
	}
	return rc;
}

int port_capture_open(struct rocemu_port *port, char *err, size_t errlen)
{
	struct capture_resume resume;
	struct port_capture *c;
	int rc;

	if (!port->cfg.capture_path[0])
		return 0;
	c = calloc(1, sizeof(*c));
	if (!c)
		return port_fail(err, errlen, -ENOMEM, "out of memory");
	c->fd = -1;
	c->lock_fd = -1;
	if (port->cfg.capture_filter[0]) {
		pcap_t *dead = pcap_open_dead(DLT_EN10MB, SNAPLEN);

		if (!dead) {
			free(c);
			return port_fail(err, errlen, -ENOMEM,
					 "libpcap: cannot open a capture handle");
		}
		if (pcap_compile(dead, &c->prog, port->cfg.capture_filter, 1,
				 PCAP_NETMASK_UNKNOWN)) {
			rc = port_fail(err, errlen, -EINVAL, "--capture-filter '%s': %s",
				       port->cfg.capture_filter, pcap_geterr(dead));
			pcap_close(dead);
			free(c);
			return rc;
		}
		pcap_close(dead);
		c->has_filter = true;
	}
	port->capture = c;
	rc = -ENOENT;
	if (take_resume(port->cfg.capture_path, &resume))
		rc = resume_files(port, &resume);
	if (rc)
		rc = open_file(port, NULL, err, errlen);
	if (rc) {
		port->capture = NULL;
		if (c->has_filter)
			pcap_freecode(&c->prog);
		free(c);
	}
	return rc;
}

static void rotate(struct rocemu_port *port)
{
	struct port_capture *c = port->capture;
	char err[ROCEMU_CAPTURE_MSG_MAX];
	int rc;

	flush_buffer(port);
	if (c->fd < 0)
		return;
	close(c->fd);
	c->fd = -1;
	c->at.file_index++;
	rc = open_file(port, NULL, err, sizeof(err));
	if (rc)
		capture_fail(port, rc, 0);
}

/* One record of rocemu's own: its 22-byte header into hdr. */
static void annot_header(uint8_t hdr[ANNOT_HDR], const uint8_t dst[6], const uint8_t src[6],
			 uint8_t type, uint32_t body_len)
{
	memcpy(hdr, dst, 6);
	memcpy(hdr + 6, src, 6);
	hdr[12] = ANNOT_ETHERTYPE >> 8;
	hdr[13] = ANNOT_ETHERTYPE & 0xff;
	memcpy(hdr + 14, "RCMU", 4);
	hdr[18] = 1; /* version */
	hdr[19] = type;
	hdr[20] = (uint8_t)(body_len >> 8);
	hdr[21] = (uint8_t)body_len;
}

/* A frame the capture could not take: counted when the capture has failed. */
static void not_written(struct rocemu_port *port)
{
	struct port_capture *c = port->capture;

	if (c->error) {
		c->lost++;
		port->ctr[PC_CAPTURE_NOT_WRITTEN]++;
	}
}

/*
 * One record into the buffer: the 16-byte pcap header, then pre_len bytes
 * of pre and the frame m (gathered from every segment; m may be NULL), cut
 * at the snaplen. The filter, when there is one and filtered is true, looks
 * at the frame (after pre) in the copy. Returns true when it was taken.
 */
static bool append_record(struct rocemu_port *port, const uint8_t *pre, uint32_t pre_len,
			  const struct rte_mbuf *m, bool filtered)
{
	struct port_capture *c = port->capture;
	struct pcap_pkthdr ph;
	struct timespec ts;
	uint32_t wire = pre_len + (m ? m->pkt_len : 0);
	uint32_t caplen = wire < SNAPLEN ? wire : SNAPLEN;
	uint32_t rec[4];
	uint8_t *data;

	if (c->fd < 0)
		return false;
	if (c->buf_len + PCAP_REC_HDR + caplen > sizeof(c->buf)) {
		flush_buffer(port);
		if (c->fd < 0)
			return false;
	}
	data = c->buf + c->buf_len + PCAP_REC_HDR;
	if (pre_len)
		memcpy(data, pre, pre_len);
	if (m && caplen > pre_len) {
		const void *got = rte_pktmbuf_read(m, 0, caplen - pre_len, data + pre_len);

		if (!got)
			return false;
		if (got != data + pre_len)
			memcpy(data + pre_len, got, caplen - pre_len);
	}
	if (c->same_stamp)
		ts = c->at.last_ts;
	else
		clock_gettime(CLOCK_REALTIME, &ts);
	c->same_stamp = false;
	c->at.last_ts = ts;
	if (filtered && c->has_filter) {
		ph.ts.tv_sec = ts.tv_sec;
		ph.ts.tv_usec = ts.tv_nsec / 1000;
		ph.caplen = caplen - pre_len;
		ph.len = wire - pre_len;
		if (!pcap_offline_filter(&c->prog, &ph, data + pre_len)) {
			port_count(port, PC_CAPTURE_FILTERED);
			return true;
		}
	}
	rec[0] = (uint32_t)ts.tv_sec;
	rec[1] = (uint32_t)ts.tv_nsec;
	rec[2] = caplen;
	rec[3] = wire;
	memcpy(c->buf + c->buf_len, rec, sizeof(rec));
	c->buf_len += PCAP_REC_HDR + caplen;
	c->buf_frames++;
	c->file_bytes += PCAP_REC_HDR + caplen;
	return true;
}

/*
 * A file's first record says where it was taken: the port's MAC, its GIDs
 * (16 bytes each, IPv4 mapped) and its name. It is not a frame of the port:
 * capture_frames does not count it.
 */
static void write_capture_point(struct rocemu_port *port)
{
	struct port_capture *c = port->capture;
	uint8_t rec[ANNOT_HDR + 8 + ROCEMU_PORT_MAX_GIDS * 16 + ROCEMU_PORT_NAME_MAX];
	uint8_t *body = rec + ANNOT_HDR;
	size_t name_len = strnlen(port->cfg.name, ROCEMU_PORT_NAME_MAX - 1);
	uint32_t len;

	memcpy(body, port->mac.addr_bytes, 6);
	body[6] = (uint8_t)port->n_gids;
	body[7] = 0;
	for (unsigned i = 0; i < port->n_gids; i++)
		memcpy(body + 8 + 16 * i, port->gids[i], 16);
	len = 8 + 16 * port->n_gids;
	memcpy(body + len, port->cfg.name, name_len);
	len += (uint32_t)name_len;
	annot_header(rec, port->mac.addr_bytes, port->mac.addr_bytes, ANNOT_CAPTURE_POINT, len);
	if (append_record(port, rec, ANNOT_HDR + len, NULL, false)) {
		c->buf_frames--; /* a record, not a frame */
		c->buf_records++;
	}
}

/* A frame into the current file (rotating first when it would outgrow it). */
static void capture_record(struct rocemu_port *port, const struct rte_mbuf *m, const uint8_t *pre,
			   uint32_t pre_len)
{
	struct port_capture *c = port->capture;
	uint32_t wire = pre_len + m->pkt_len;
	uint32_t caplen = wire < SNAPLEN ? wire : SNAPLEN;

	if (c->fd >= 0 && port->cfg.capture_rotate_bytes && c->file_bytes > c->at.first_bytes &&
	    c->file_bytes + PCAP_REC_HDR + caplen > port->cfg.capture_rotate_bytes)
		rotate(port);
	if (!append_record(port, pre, pre_len, m, true))
		not_written(port);
}

void port_capture_frame(struct rocemu_port *port, const struct rte_mbuf *m)
{
	capture_record(port, m, NULL, 0);
}

void port_capture_copy_next(struct rocemu_port *port)
{
	if (port->capture)
		port->capture->same_stamp = true;
}

void port_capture_lost(struct rocemu_port *port, const struct rte_mbuf *m, bool on_receive)
{
	const struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);
	uint8_t hdr[ANNOT_HDR];

	if (m->data_len < sizeof(*eth) || m->pkt_len > UINT16_MAX) {
		capture_record(port, m, NULL, 0); /* cannot be wrapped: as it is */
		return;
	}
	annot_header(hdr, eth->dst_addr.addr_bytes, eth->src_addr.addr_bytes,
		     on_receive ? ANNOT_LOST_RX : ANNOT_LOST_TX, m->pkt_len);
	capture_record(port, m, hdr, sizeof(hdr));
}

void port_capture_flush(struct rocemu_port *port)
{
	if (port->capture)
		flush_buffer(port);
}

int rocemu_port_capture_sync(struct rocemu_port *port)
{
	int rc = 0;

	rocemu_port_lock(port);
	if (port->capture) {
		flush_buffer(port);
		rc = port->capture->error;
	}
	rocemu_port_unlock(port);
	return rc;
}

/* A failed capture leaves one line for the report at exit. */
static void keep_failure(const struct rocemu_port *port, const struct port_capture *c)
{
	pthread_mutex_lock(&failures_lock);
	if (n_failures < FAILURES_MAX) {
		snprintf(failures[n_failures], ROCEMU_CAPTURE_MSG_MAX,
			 "%s: capture %s FAILED: %s; %" PRIu64 " frames written, %" PRIu64
			 " NOT written%s",
			 port->cfg.name, c->path, strerror(-c->error), c->written_frames, c->lost,
			 c->cut_failed ? " (and the file ends in part of a frame)" : "");
		n_failures++;
	}
	pthread_mutex_unlock(&failures_lock);
}

void port_capture_close(struct rocemu_port *port)
{
	struct port_capture *c = port->capture;

	if (!c)
		return;
	flush_buffer(port);
	port->capture = NULL;
	if (c->error)
		keep_failure(port, c);
	if (!c->cut_failed) /* a failed capture's file too: what it holds stays */
		leave_resume(port, c);
	if (c->fd >= 0)
		close(c->fd);
	if (c->lock_fd >= 0)
		close(c->lock_fd);
	if (c->has_filter)
		pcap_freecode(&c->prog);
	free(c);
}

int rocemu_capture_take_failure(char *msg, size_t len)
{
	int taken = 0;

	pthread_mutex_lock(&failures_lock);
	if (n_failures) {
		snprintf(msg, len, "%s", failures[0]);
		memmove(failures[0], failures[1], (size_t)(n_failures - 1) * sizeof(failures[0]));
		n_failures--;
		taken = 1;
	}
	pthread_mutex_unlock(&failures_lock);
	return taken;
}
