/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Live state of a host: what `rocemu stat --host H [--json]` prints. The
 * host renders it (engine lock held, a consistent snapshot) and sends it
 * over the control socket; `rocemu stat` only prints what it receives.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../rocemu.h"
#include "host.h"

struct out {
	char *buf;
	size_t len, cap;
	bool failed;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->failed)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			o->failed = true;
			return;
		}
		if ((size_t)n < o->cap - o->len) {
			o->len += (size_t)n;
			return;
		}
		char *nb = realloc(o->buf, o->cap * 2 + (size_t)n);
		if (!nb) {
			o->failed = true;
			return;
		}
		o->buf = nb;
		o->cap = o->cap * 2 + (size_t)n;
	}
}

/* JSON string contents: the names we print are ours or a process's comm. */
static const char *json_safe(const char *s, char *buf, size_t len)
{
	size_t j = 0;

	for (; *s && j + 7 < len; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			j += (size_t)snprintf(buf + j, len - j, "\\%c", ch);
		else if (ch < 0x20)
			j += (size_t)snprintf(buf + j, len - j, "\\u%04x", ch);
		else
			buf[j++] = (char)ch;
	}
	buf[j] = '\0';
	return buf;
}

static void put_port_counters(struct out *o, struct host *h, bool json)
{
	struct rocemu_counter cs[128];
	unsigned n = rocemu_port_counters(h->port, cs, 128);
	bool first = true;

	if (n > 128)
		n = 128;
	put(o, json ? "\"port\": {" : "  uplink port counters:");
	for (unsigned i = 0; i < n; i++) {
		if (!cs[i].value)
			continue;
		if (json)
			put(o, "%s\"%s\": %llu", first ? "" : ", ", cs[i].name,
			    (unsigned long long)cs[i].value);
		else
			put(o, " %s %llu", cs[i].name, (unsigned long long)cs[i].value);
		first = false;
	}
	put(o, json ? "}" : "\n");
}

/* What a process's QP took from direct rings (counted by the process in its
 * region; 0 when the slot counts another QP). */
static void direct_qp(const struct host_proc *p, uint32_t qpn, unsigned long long *frames,
		      unsigned long long *bytes)
{
	const struct rocemu_host_direct_qp *c =
	    &rocemu_host_region_direct(p->region)[qpn & (ROCEMU_HOST_DIRECT_QP_SLOTS - 1)];

	*frames = *bytes = 0;
	if (atomic_load_explicit(&c->qpn, memory_order_acquire) != qpn)
		return;
	rocemu_host_tally_read(&c->in, frames, bytes);
}

static void put_qps(struct out *o, struct host *h, const struct host_proc *p, bool json)
{
	bool first = true;

	if (json)
		put(o, ", \"qps\": [");
	for (unsigned s = 0; s < HOST_QPN_SLOTS; s++) {
		const struct host_qpn *q = &h->qpns[s];

		unsigned long long dframes, dbytes;

		if (q->state != HOST_QPN_LIVE || q->proc != p->index + 1)
			continue;
		direct_qp(p, q->qpn, &dframes, &dbytes);
		if (json)
			put(o,
			    "%s{\"qpn\": %u, \"frames_in\": %llu, \"bytes_in\": %llu, "
			    "\"drops_in\": %llu, \"direct_frames_in\": %llu, \"direct_bytes_in\": "
			    "%llu}",
			    first ? "" : ", ", q->qpn, (unsigned long long)q->frames_in,
			    (unsigned long long)q->bytes_in, (unsigned long long)q->drops_in,
			    dframes, dbytes);
		else
			put(o,
			    "    qp 0x%06x  in %llu frames %llu bytes  dropped %llu  direct in "
			    "%llu frames %llu bytes\n",
			    q->qpn, (unsigned long long)q->frames_in,
			    (unsigned long long)q->bytes_in, (unsigned long long)q->drops_in,
			    dframes, dbytes);
		first = false;
	}
	if (json)
		put(o, "]");
}

static void put_proc(struct out *o, struct host *h, const struct host_proc *p, uint64_t now,
		     bool json)
{
	const struct rocemu_host_region *r = p->region;
	unsigned long long d[4];
	char comm[80];
	double age = (double)(now - p->attached_ns) / 1e9;

	rocemu_host_tally_read(&r->direct_out, &d[0], &d[1]);
	rocemu_host_tally_read(&r->direct_in, &d[2], &d[3]);

	if (json) {
		put(o,
		    "{\"pid\": %d, \"uid\": %u, \"comm\": \"%s\", \"attached_s\": %.3f, "
		    "\"gsi\": %s, \"qps_live\": %u, \"qpns_allocated\": %llu, "
		    "\"frames_from\": %llu, \"bytes_from\": %llu, \"frames_to\": %llu, "
		    "\"bytes_to\": %llu, \"drop_ring_full\": %llu, \"drop_bad\": %llu, "
		    "\"rings\": %llu, \"direct_rings_out\": %u, \"direct_frames_out\": %llu, "
		    "\"direct_bytes_out\": %llu, \"direct_frames_in\": %llu, "
		    "\"direct_bytes_in\": %llu",
		    (int)p->pid, (unsigned)p->uid, json_safe(p->comm, comm, sizeof(comm)), age,
		    p->gsi ? "true" : "false", p->n_qps, (unsigned long long)p->qpns_allocated,
		    (unsigned long long)p->up_frames, (unsigned long long)p->up_bytes,
		    (unsigned long long)p->down_frames, (unsigned long long)p->down_bytes,
		    (unsigned long long)p->drop_ring_full, (unsigned long long)p->drop_bad,
		    (unsigned long long)p->rings, p->n_pairs, d[0], d[1], d[2], d[3]);
		put_qps(o, h, p, true);
		put(o, "}");
		return;
	}
	put(o,
	    "  process %d (%s) uid %u, attached %.1f s, %u QPs%s\n"
	    "    from it %llu frames %llu bytes, to it %llu frames %llu bytes, "
	    "dropped: ring full %llu, malformed %llu; woken %llu times\n"
	    "    direct rings: %u out, %llu frames %llu bytes, in %llu frames %llu bytes\n",
	    (int)p->pid, p->comm, (unsigned)p->uid, age, p->n_qps, p->gsi ? " + GSI" : "",
	    (unsigned long long)p->up_frames, (unsigned long long)p->up_bytes,
	    (unsigned long long)p->down_frames, (unsigned long long)p->down_bytes,
	    (unsigned long long)p->drop_ring_full, (unsigned long long)p->drop_bad,
	    (unsigned long long)p->rings, p->n_pairs, d[0], d[1], d[2], d[3]);
	put_qps(o, h, p, false);
}

char *host_stat_render(struct host *h, bool json)
{
	struct out o = {.cap = 4096};
	uint64_t now = rocemu_now_ns();
	uint8_t mac[6];
	unsigned quiet = 0;
	bool first = true;
	char name[160];

	o.buf = malloc(o.cap);
	if (!o.buf)
		return NULL;
	for (unsigned s = 0; s < HOST_QPN_SLOTS; s++)
		if (h->qpns[s].state == HOST_QPN_QUIET && now < h->qpns[s].quiet_until)
			quiet++;
	rocemu_port_mac(h->port, mac);
	if (json) {
		put(&o,
		    "{\"host\": \"%s\", \"pid\": %d, \"port\": \"%s\", \"link_up\": %s, "
		    "\"mac\": \"%02x:%02x:%02x:%02x:%02x:%02x\", \"uptime_s\": %.3f, "
		    "\"procs_attached\": %u, \"procs_since_start\": %llu, \"procs_refused\": %llu, "
		    "\"procs_gone\": %llu, \"qpns_live\": %u, \"qpns_quiet\": %u, \"quiet_ms\": "
		    "%u, "
		    "\"switched_frames\": %llu, \"frames_from_procs\": %llu, \"drop_no_qp\": %llu, "
		    "\"drop_qp_quiet\": %llu, \"drop_proc_bad\": %llu, ",
		    json_safe(h->name, name, sizeof(name)), (int)getpid(),
		    json_safe(h->cfg.spec, name + 80, 80),
		    rocemu_port_link_up(h->port) ? "true" : "false", mac[0], mac[1], mac[2], mac[3],
		    mac[4], mac[5], (double)(now - h->started_ns) / 1e9, h->n_procs,
		    (unsigned long long)h->procs_attached, (unsigned long long)h->procs_refused,
		    (unsigned long long)h->procs_gone, h->n_qpns_live, quiet, h->quiet_ms,
		    (unsigned long long)h->switched_frames, (unsigned long long)h->uplink_frames,
		    (unsigned long long)h->drop_no_qp, (unsigned long long)h->drop_qp_quiet,
		    (unsigned long long)h->drop_proc_bad);
		put_port_counters(&o, h, true);
		put(&o, ", \"processes\": [");
		for (unsigned k = 0; k < HOST_MAX_PROCS; k++) {
			if (!h->procs[k].used)
				continue;
			put(&o, "%s", first ? "" : ", ");
			put_proc(&o, h, &h->procs[k], now, true);
			first = false;
		}
		put(&o, "]}\n");
	} else {
		put(&o,
		    "host %s: pid %d, uplink %s (link %s), mac %02x:%02x:%02x:%02x:%02x:%02x, up "
		    "%.1f s\n"
		    "  %u processes attached (%llu since start, %llu refused, %llu gone); QPNs: %u "
		    "live, %u quiet (%u ms)\n"
		    "  switched %llu frames to processes, %llu from them; dropped: no such QP "
		    "%llu, "
		    "QP of a process gone %llu, malformed %llu\n",
		    h->name, (int)getpid(), h->cfg.spec,
		    rocemu_port_link_up(h->port) ? "up" : "down", mac[0], mac[1], mac[2], mac[3],
		    mac[4], mac[5], (double)(now - h->started_ns) / 1e9, h->n_procs,
		    (unsigned long long)h->procs_attached, (unsigned long long)h->procs_refused,
		    (unsigned long long)h->procs_gone, h->n_qpns_live, quiet, h->quiet_ms,
		    (unsigned long long)h->switched_frames, (unsigned long long)h->uplink_frames,
		    (unsigned long long)h->drop_no_qp, (unsigned long long)h->drop_qp_quiet,
		    (unsigned long long)h->drop_proc_bad);
		put_port_counters(&o, h, false);
		for (unsigned k = 0; k < HOST_MAX_PROCS; k++)
			if (h->procs[k].used)
				put_proc(&o, h, &h->procs[k], now, false);
	}
	if (o.failed) {
		free(o.buf);
		return NULL;
	}
	return o.buf;
}

/* ------------------------------------------------------------------------ */
/* rocemu stat                                                                */

static void stat_usage(FILE *f)
{
	fprintf(f, "usage: rocemu stat --host NAME [--json]\n"
		   "\n"
		   "Live counters of a running rocemu host: per attached process (frames to and\n"
		   "from it, drops, QPs, frames on direct rings) and per QP (frames delivered to\n"
		   "it by the host and taken from direct rings).\n");
}

int rocemu_cmd_stat(int argc, char **argv)
{
	const char *name = NULL;
	struct rocemu_host_request rq = {.type = ROCEMU_HOST_STAT};
	char err[512];
	struct {
		uint32_t type;
		char text[65536];
	} chunk;
	int fd;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			rq.arg = 1;
		} else if (!strcmp(argv[i], "--host") && i + 1 < argc) {
			name = argv[++i];
		} else if (!strncmp(argv[i], "--host=", 7)) {
			name = argv[i] + 7;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			stat_usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "rocemu stat: unexpected argument '%s' (see --help)\n",
				argv[i]);
			return 2;
		}
	}
	if (!name) {
		stat_usage(stderr);
		return 2;
	}
	fd = rocemu_host_connect(name, err, sizeof(err));
	if (fd < 0) {
		fprintf(stderr, "rocemu stat: %s\n", err);
		return 1;
	}
	if (send(fd, &rq, sizeof(rq), MSG_NOSIGNAL) < 0) {
		fprintf(stderr, "rocemu stat: %s\n", strerror(errno));
		return 1;
	}
	for (;;) {
		ssize_t n = recv(fd, &chunk, sizeof(chunk), 0);

		if (n < (ssize_t)sizeof(chunk.type) || chunk.type != ROCEMU_HOST_STAT_CHUNK) {
			fprintf(stderr, "rocemu stat: the host %s\n",
				n == 0 ? "closed the connection" : "sent no valid answer");
			close(fd);
			return 1;
		}
		if (n == sizeof(chunk.type))
			break;
		fwrite(chunk.text, 1, (size_t)n - sizeof(chunk.type), stdout);
	}
	close(fd);
	return 0;
}
