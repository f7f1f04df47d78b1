/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rocemu inspect: the command. Reads pcap/pcapng files with libpcap (one
 * stream, file after file, as a rotated capture), applies an optional BPF
 * filter, feeds every frame to the analysis and prints the report, the
 * packet lines, the violations or a picture.
 */
/* rte_vect_set_max_simd_bitwidth() is experimental in DPDK 22.11 */
#define ALLOW_EXPERIMENTAL_API 1

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <pcap/pcap.h>
#include <rte_vect.h>

#include "inspect.h"
#include "rocemu.h"

#define PROGRESS_MIN_BYTES (64ull << 20)
#define LADDER_DEFAULT_MAX 400

struct options {
	bool packets, json, check, plot, quiet;
	bool ladder;
	uint32_t ladder_qpn;
	bool has_from, has_to;
	uint64_t from_ns, to_ns; /* relative to the first frame */
	const char *svg;
	const char *filter;
	unsigned max_events;
	unsigned ladder_max;
	char **files;
	unsigned nfiles;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rocemu inspect [OPTIONS] FILE...\n"
		"Explain the RoCEv2 traffic in pcap/pcapng captures (read one after another).\n"
		"\n"
		"  -p, --packets       one decoded line per RoCEv2 packet, then the summary\n"
		"  -j, --json          the summary as JSON\n"
		"  -c, --check         exit 1 if the capture shows a protocol violation\n"
		"                      (ICRC error, malformed frame, RC PSN gap never NAKed or\n"
		"                      retransmitted, response with no request), listing each\n"
		"  -q, --quiet         with --check: print only the violations\n"
		"  -f, --filter EXPR   only frames matching this BPF filter (tcpdump syntax)\n"
		"  -l, --ladder QPN    draw the conversation of QP QPN as an SVG sequence\n"
		"                      diagram; QPN in hex as reports print it, 0x optional\n"
		"      --from T        ladder: start at T seconds after the first frame\n"
		"      --to T          ladder: end at T (suffixes s, ms, us, ns accepted)\n"
		"      --max N         ladder: draw at most N packets (default %d)\n"
		"      --plot          draw throughput and latency over time as SVG\n"
		"  -o, --svg FILE      write the picture to FILE (default: standard output)\n"
		"      --events N      list at most N events in the text report (default 100)\n"
		"  -h, --help          this text\n"
		"\n"
		"Link types: Ethernet (with VLAN tags), Linux cooked v1/v2, raw IP.\n"
		"See docs/inspect.md for what every number means.\n",
		LADDER_DEFAULT_MAX);
}

/* "1.5", "1500ms", "20us", "7ns", "2s" -> ns; -1 on error */
static int parse_time(const char *s, uint64_t *ns)
{
	char *end;
	double v = strtod(s, &end), mul = 1e9;

	if (end == s || v < 0)
		return -1;
	if (!strcmp(end, "ms"))
		mul = 1e6;
	else if (!strcmp(end, "us"))
		mul = 1e3;
	else if (!strcmp(end, "ns"))
		mul = 1;
	else if (*end && strcmp(end, "s"))
		return -1;
	*ns = (uint64_t)(v * mul + 0.5);
	return 0;
}

/*
 * A QPN as every report prints it: hexadecimal, with or without 0x
 * ("0x000011", "000011", "11" are all QP 0x11). Never octal or decimal.
 */
static int parse_qpn(const char *s, uint32_t *qpn)
{
	const char *p = s;
	uint32_t v = 0;

	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
		p += 2;
	if (!*p || strlen(p) > 8)
		return -EINVAL;
	for (; *p; p++) {
		int d;

		if (*p >= '0' && *p <= '9')
			d = *p - '0';
		else if (*p >= 'a' && *p <= 'f')
			d = *p - 'a' + 10;
		else if (*p >= 'A' && *p <= 'F')
			d = *p - 'A' + 10;
		else
			return -EINVAL;
		v = v << 4 | (uint32_t)d;
	}
	if (v > ROCE_PSN_MASK) /* QPNs are 24 bits, like PSNs */
		return -EINVAL;
	*qpn = v;
	return 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
	enum { OPT_FROM = 256, OPT_TO, OPT_PLOT, OPT_EVENTS, OPT_MAX };
	static const struct option longopts[] = {
	    {"packets", no_argument, NULL, 'p'},
	    {"json", no_argument, NULL, 'j'},
	    {"check", no_argument, NULL, 'c'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"filter", required_argument, NULL, 'f'},
	    {"ladder", required_argument, NULL, 'l'},
	    {"from", required_argument, NULL, OPT_FROM},
	    {"to", required_argument, NULL, OPT_TO},
	    {"max", required_argument, NULL, OPT_MAX},
	    {"plot", no_argument, NULL, OPT_PLOT},
	    {"svg", required_argument, NULL, 'o'},
	    {"events", required_argument, NULL, OPT_EVENTS},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c;
	char *end;
	unsigned long v;

	memset(o, 0, sizeof(*o));
	o->max_events = 100;
	o->ladder_max = LADDER_DEFAULT_MAX;
	optind = 1;
	while ((c = getopt_long(argc, argv, "pjcqf:l:o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			o->packets = true;
			break;
		case 'j':
			o->json = true;
			break;
		case 'c':
			o->check = true;
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'f':
			o->filter = optarg;
			break;
		case 'l':
			if (parse_qpn(optarg, &o->ladder_qpn) < 0) {
				fprintf(stderr,
					"rocemu inspect: --ladder '%s': expected a QPN in hex as "
					"reports print it (0x000011 or 000011), at most 0xffffff\n",
					optarg);
				return -EINVAL;
			}
			o->ladder = true;
			break;
		case OPT_FROM:
		case OPT_TO:
			if (parse_time(optarg, c == OPT_FROM ? &o->from_ns : &o->to_ns) < 0) {
				fprintf(stderr, "rocemu inspect: bad time '%s'\n", optarg);
				return -EINVAL;
			}
			if (c == OPT_FROM)
				o->has_from = true;
			else
				o->has_to = true;
			break;
		case OPT_MAX:
			v = strtoul(optarg, &end, 0);
			if (*end || v == 0 || v > 1000000) {
				fprintf(stderr, "rocemu inspect: bad --max '%s'\n", optarg);
				return -EINVAL;
			}
			o->ladder_max = (unsigned)v;
			break;
		case OPT_PLOT:
			o->plot = true;
			break;
		case 'o':
			o->svg = optarg;
			break;
		case OPT_EVENTS:
			v = strtoul(optarg, &end, 0);
			if (*end) {
				fprintf(stderr, "rocemu inspect: bad --events '%s'\n", optarg);
				return -EINVAL;
			}
			o->max_events = v > INSP_EVENTS_MAX ? INSP_EVENTS_MAX : (unsigned)v;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "rocemu inspect: no capture file given\n");
		usage(stderr);
		return -EINVAL;
	}
	if (o->ladder && o->plot) {
		fprintf(stderr,
			"rocemu inspect: --ladder and --plot each make one picture: run twice\n");
		return -EINVAL;
	}
	if ((o->has_from || o->has_to) && !o->ladder) {
		fprintf(stderr, "rocemu inspect: --from/--to go with --ladder\n");
		return -EINVAL;
	}
	o->files = argv + optind;
	o->nfiles = (unsigned)(argc - optind);
	for (unsigned i = 0; o->ladder && i < o->nfiles; i++) {
		if (!strcmp(o->files[i], "-")) {
			fprintf(stderr, "rocemu inspect: --ladder reads the capture twice: "
					"give a file, not standard input\n");
			return -EINVAL;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------ */

struct progress {
	bool on;
	uint64_t total, done_before; /* bytes of all files, of the files already read */
	struct timespec last;
};

static void progress_update(struct progress *p, pcap_t *pc)
{
	struct timespec now;
	long pos;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if ((now.tv_sec - p->last.tv_sec) * 1000000000L + (now.tv_nsec - p->last.tv_nsec) <
	    250000000L)
		return;
	p->last = now;
	pos = pcap_file(pc) ? ftell(pcap_file(pc)) : -1;
	if (pos < 0)
		return;
	fprintf(stderr, "\rrocemu inspect: %5.1f%% (%" PRIu64 " of %" PRIu64 " MB)",
		100.0 * (double)(p->done_before + (uint64_t)pos) / (double)p->total,
		(p->done_before + (uint64_t)pos) >> 20, p->total >> 20);
}

/* What one pass does with each frame besides the analysis. */
struct pass {
	const struct options *o;
	struct insp_state *s;
	FILE *packets_out;	    /* --packets */
	struct insp_ladder *ladder; /* ladder collection (pass 2) */
};

static bool half_is(const struct insp_half *h, const struct insp_half *ref)
{
	return ref && h && h->dqpn == ref->dqpn && h->src_qp == ref->src_qp &&
	       !memcmp(h->src, ref->src, 16) && !memcmp(h->dst, ref->dst, 16);
}

static void ladder_collect(struct pass *ps, const struct insp_frame *f)
{
	struct insp_ladder *l = ps->ladder;
	const struct insp_half *h = ps->s->last_half;
	struct insp_ladder_pkt *lp;
	uint64_t rel = f->ts_ns - ps->s->first_ts;
	bool from_a;

	if (!h)
		return;
	if (half_is(h, l->a))
		from_a = true;
	else if (half_is(h, l->b))
		from_a = false;
	else
		return;
	if ((ps->o->has_from && rel < ps->o->from_ns) || (ps->o->has_to && rel > ps->o->to_ns))
		return;
	if (l->n == l->cap) {
		l->skipped++;
		return;
	}
	lp = &l->pkts[l->n++];
	memset(lp, 0, sizeof(*lp));
	lp->ts = f->ts_ns;
	lp->frame = f->index;
	lp->from_a = from_a;
	lp->opcode = f->opcode;
	lp->psn = f->psn;
	lp->notes = ps->s->last_notes;
	lp->icrc = f->icrc;
	lp->malformed = f->cls == INSP_ROCE_MALFORMED;
	lp->truncated = f->truncated;
	if (f->headers_ok) {
		lp->ackreq = f->pkt.ackreq;
		lp->payload = f->pkt.payload_len;
		if (f->pkt.op && (f->pkt.op->hdrs & ROCE_HDR_AETH))
			lp->syndrome = f->pkt.aeth.syndrome;
	}
}

static int read_file(struct pass *ps, const char *path, unsigned file_no, struct progress *pr)
{
	char errbuf[PCAP_ERRBUF_SIZE];
	struct insp_decoder dec = {0};
	struct bpf_program prog;
	bool have_prog = false;
	struct pcap_pkthdr *hdr;
	const u_char *data;
	struct insp_frame *f;
	uint64_t index = 0;
	pcap_t *pc;
	int rc, ret = 0;

	pc = pcap_open_offline_with_tstamp_precision(path, PCAP_TSTAMP_PRECISION_NANO, errbuf);
	if (!pc) {
		fprintf(stderr, "rocemu inspect: %s: %s\n", path, errbuf);
		return -EIO;
	}
	dec.dlt = pcap_datalink(pc);
	if (insp_link_supported(dec.dlt) < 0) {
		fprintf(stderr, "rocemu inspect: %s: link type %s (%d) not supported\n", path,
			pcap_datalink_val_to_name(dec.dlt) ? pcap_datalink_val_to_name(dec.dlt)
							   : "?",
			dec.dlt);
		pcap_close(pc);
		return -EPROTONOSUPPORT;
	}
	if (ps->o->filter) {
		/* compiled for this capture's link type; applied here so frame numbers stay true */
		if (pcap_compile(pc, &prog, ps->o->filter, 1, PCAP_NETMASK_UNKNOWN) < 0) {
			fprintf(stderr, "rocemu inspect: filter '%s': %s\n", ps->o->filter,
				pcap_geterr(pc));
			pcap_close(pc);
			return -EINVAL;
		}
		have_prog = true;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		ret = -ENOMEM;
		goto out;
	}
	while ((rc = pcap_next_ex(pc, &hdr, &data)) == 1) {
		index++;
		if (have_prog && !pcap_offline_filter(&prog, hdr, data))
			continue;
		f->index = index;
		f->file_no = file_no;
		f->ts_ns = (uint64_t)hdr->ts.tv_sec * 1000000000ull + (uint64_t)hdr->ts.tv_usec;
		insp_decode(&dec, data, hdr->caplen, hdr->len, f);
		insp_flow_packet(ps->s, f);
		if (ps->packets_out)
			insp_print_packet(ps->packets_out, ps->s, f, ps->o->nfiles);
		if (ps->ladder)
			ladder_collect(ps, f);
		if (pr->on && (index & 0xFFFF) == 0)
			progress_update(pr, pc);
	}
	if (rc == PCAP_ERROR) {
		/* a capture cut mid-record: report, keep what was read */
		fprintf(stderr, "rocemu inspect: %s: after frame %" PRIu64 ": %s\n", path, index,
			pcap_geterr(pc));
	}
	free(f);
out:
	if (have_prog)
		pcap_freecode(&prog);
	insp_decoder_free(&dec);
	pcap_close(pc);
	return ret;
}

static int run_pass(struct pass *ps)
{
	struct progress pr = {0};
	struct stat st;

	for (unsigned i = 0; i < ps->o->nfiles; i++)
		if (!stat(ps->o->files[i], &st) && S_ISREG(st.st_mode))
			pr.total += (uint64_t)st.st_size;
	pr.on = isatty(STDERR_FILENO) && pr.total >= PROGRESS_MIN_BYTES;
	for (unsigned i = 0; i < ps->o->nfiles; i++) {
		int rc = read_file(ps, ps->o->files[i], i, &pr);

		if (rc < 0)
			return rc;
		if (!stat(ps->o->files[i], &st))
			pr.done_before += (uint64_t)st.st_size;
	}
	if (pr.on)
		fprintf(stderr, "\r%60s\r", "");
	insp_flow_finish(ps->s);
	return 0;
}

static FILE *open_svg(const struct options *o)
{
	FILE *f;

	if (!o->svg || !strcmp(o->svg, "-"))
		return stdout;
	f = fopen(o->svg, "w");
	if (!f)
		fprintf(stderr, "rocemu inspect: %s: %s\n", o->svg, strerror(errno));
	return f;
}

static int close_svg(FILE *f)
{
	if (f == stdout)
		return fflush(f) ? -EIO : 0;
	return fclose(f) ? -EIO : 0;
}

/* Pass 1 found the conversation; pass 2 replays the analysis and collects its packets. */
static int draw_ladder(const struct options *o, struct insp_state *s1)
{
	const struct insp_half *sel = NULL;
	struct insp_half a, b;
	struct insp_state s2;
	struct insp_ladder l = {0};
	struct pass ps = {.o = o};
	unsigned matches = 0;
	FILE *out;
	int rc;

	for (unsigned i = 0; i < s1->nhalves; i++) {
		const struct insp_half *h = s1->halves[i];
		uint32_t sq = h->src_qp != INSP_QPN_UNKNOWN
				  ? h->src_qp
				  : (h->peer ? h->peer->dqpn : INSP_QPN_UNKNOWN);

		if (h->peer && !h->is_first)
			continue;
		if (h->dqpn == o->ladder_qpn || sq == o->ladder_qpn) {
			if (!sel)
				sel = h;
			matches++;
		}
	}
	if (!sel) {
		fprintf(stderr, "rocemu inspect: no conversation with QP 0x%06x\n", o->ladder_qpn);
		return -ENOENT;
	}
	if (matches > 1)
		fprintf(stderr,
			"rocemu inspect: %u conversations involve QP 0x%06x; drawing the first "
			"(narrow with --filter 'host ...')\n",
			matches, o->ladder_qpn);
	a = *sel;
	l.a = &a;
	if (sel->peer) {
		b = *sel->peer;
		l.b = &b;
	}
	l.cap = o->ladder_max;
	l.pkts = calloc(l.cap, sizeof(*l.pkts));
	if (!l.pkts)
		return -ENOMEM;
	rc = insp_state_init(&s2, false);
	if (rc < 0) {
		free(l.pkts);
		return rc;
	}
	ps.s = &s2;
	ps.ladder = &l;
	rc = run_pass(&ps);
	if (rc == 0) {
		out = open_svg(o);
		rc = out ? insp_svg_ladder(out, &l) : -EIO;
		if (out && close_svg(out) < 0)
			rc = -EIO;
		if (l.skipped)
			fprintf(stderr,
				"rocemu inspect: ladder shows the first %u packets; %" PRIu64
				" more left out (use --from/--to or --max)\n",
				l.n, l.skipped);
	}
	insp_state_free(&s2);
	free(l.pkts);
	return rc;
}

int rocemu_cmd_inspect(int argc, char **argv)
{
	struct options o;
	struct insp_state s;
	struct pass ps;
	struct insp_report_opts ro;
	FILE *out;
	int rc;

	if (parse_options(argc, argv, &o) < 0)
		return 2;
	/* Without the EAL, DPDK's SIMD limit reads 0 and the codec computes the
	 * ICRC with its byte-wise table, most of the inspector's time. Raising the
	 * limit needs no EAL and lets it use DPDK's PCLMULQDQ CRC when the CPU has
	 * it (the codec checks the result against its table once). */
	if (rte_vect_get_max_simd_bitwidth() < RTE_VECT_SIMD_128)
		(void)rte_vect_set_max_simd_bitwidth(RTE_VECT_SIMD_128);
	if (insp_state_init(&s, o.plot) < 0) {
		fprintf(stderr, "rocemu inspect: out of memory\n");
		return 2;
	}
	memset(&ps, 0, sizeof(ps));
	ps.o = &o;
	ps.s = &s;
	if (o.packets && !o.json && !o.ladder && !o.plot)
		ps.packets_out = stdout;
	rc = run_pass(&ps);
	if (rc < 0) {
		insp_state_free(&s);
		return 2;
	}
	ro = (struct insp_report_opts){.json = o.json,
				       .check = o.check,
				       .max_events = o.max_events,
				       .files = (const char *const *)o.files,
				       .nfiles = o.nfiles};

	if (o.ladder || o.plot) {
		if (o.ladder) {
			rc = draw_ladder(&o, &s);
		} else {
			out = open_svg(&o);
			rc = out ? insp_svg_plot(out, &s) : -EIO;
			if (out && close_svg(out) < 0)
				rc = -EIO;
		}
		if (rc < 0) {
			insp_state_free(&s);
			return 2;
		}
		if (o.check)
			insp_report_violations(stderr, &s, &ro);
	} else if (o.json) {
		insp_report_json(stdout, &s, &ro);
	} else if (o.check && o.quiet) {
		insp_report_violations(stdout, &s, &ro);
	} else {
		if (ps.packets_out)
			fputc('\n', stdout);
		insp_report_text(stdout, &s, &ro);
		if (o.check)
			insp_report_violations(stdout, &s, &ro);
	}
	rc = o.check && s.violations ? 1 : 0;
	if (o.check && !o.quiet && !o.json)
		fprintf(stdout, "check: %s (%" PRIu64 " violation%s)\n", rc ? "FAILED" : "passed",
			s.violations, s.violations == 1 ? "" : "s");
	insp_state_free(&s);
	return rc;
}
