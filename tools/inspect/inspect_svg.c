/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rocemu inspect: pictures as standalone SVG (no scripts, no external
 * fonts). The ladder is a sequence diagram of one conversation: one lane
 * per QP, one arrow per packet in capture order, coloured by what the packet
 * is (request, ACK, NAK, RNR NAK, retransmission, duplicate, error); a frame
 * rocemu's fault injector dropped (rocemu records it) is an arrow cut short
 * by a cross: halfway when lost on transmit, at the receiver when dropped
 * on receive. The plot
 * shows throughput and message latency over time from the analysis' fixed
 * size time series.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "inspect.h"

#define COL_REQUEST   "#1f4e9c"
#define COL_ACK	      "#2e7d32"
#define COL_READ_RESP "#00838f"
#define COL_NAK	      "#c62828"
#define COL_RNR	      "#ef6c00"
#define COL_RETX      "#8e24aa"
#define COL_DUP	      "#757575"
#define COL_CNP	      "#ad1457"
#define COL_LATE      "#f9a825"
#define COL_LOST      "#b71c1c"
#define HALO	      "paint-order=\"stroke\" stroke=\"white\" stroke-width=\"4\" stroke-linejoin=\"round\""
#define FONT	      "font-family=\"DejaVu Sans Mono,Menlo,Consolas,monospace\""

static void svg_text(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '<')
			fputs("&lt;", out);
		else if (*s == '>')
			fputs("&gt;", out);
		else if (*s == '&')
			fputs("&amp;", out);
		else
			fputc(*s, out);
	}
}

/* ------------------------------------------------------------------------ */
/* ladder                                                                    */

struct ladder_style {
	const char *colour;
	bool dashed;
	bool cross; /* the receiver drops it */
	bool nak, rnr;
	const char *tag;
};

static struct ladder_style packet_style(const struct insp_ladder_pkt *p)
{
	const struct roce_opcode_info *op = roce_opcode_info(p->opcode);
	struct ladder_style st = {COL_REQUEST, false, false, false, false, ""};

	if (op && (op->flags & ROCE_OPF_RESPONSE)) {
		st.colour = (op->flags & ROCE_OPF_READ) ? COL_READ_RESP : COL_ACK;
		if (op->hdrs & ROCE_HDR_AETH) {
			unsigned t = ROCE_AETH_TYPE(p->syndrome);

			if (t == ROCE_AETH_NAK) {
				st.colour = COL_NAK;
				st.nak = true;
			} else if (t == ROCE_AETH_RNR_NAK) {
				st.colour = COL_RNR;
				st.rnr = true;
			}
		}
	}
	if (op && (op->flags & ROCE_OPF_CNP))
		st.colour = COL_CNP;
	if (p->notes & INSP_NOTE_RETX) {
		st.colour = COL_RETX;
		st.dashed = true;
		st.tag = " retransmit";
	} else if (p->notes & INSP_NOTE_DUP) {
		st.colour = COL_DUP;
		st.dashed = true;
		st.tag = " duplicate";
	} else if (p->notes & INSP_NOTE_LATE) {
		st.colour = COL_LATE;
		st.tag = " late";
	} else if (p->notes & INSP_NOTE_OOS) {
		st.colour = COL_LATE;
		st.tag = " out of sequence";
	}
	if (p->icrc == INSP_ICRC_BAD) {
		st.colour = COL_NAK;
		st.cross = true;
		st.tag = " BAD ICRC";
	} else if (p->malformed) {
		st.colour = COL_NAK;
		st.cross = true;
		st.tag = " MALFORMED";
	} else if (p->truncated) {
		st.tag = " (truncated)";
	}
	if (p->notes & INSP_NOTE_NO_REQUEST)
		st.tag = " no request!";
	if (p->notes & (INSP_NOTE_LOST_TX | INSP_NOTE_LOST_RX)) {
		st.colour = COL_LOST;
		st.dashed = true;
		st.cross = true;
		st.tag = (p->notes & INSP_NOTE_LOST_TX) ? " LOST (fault injector, tx)"
							: " DROPPED (fault injector, rx)";
	}
	return st;
}

static void lane_title(FILE *out, double x, const struct insp_half *h, bool a_side)
{
	char ip[48];
	uint32_t qpn;

	/* lane A is the sender of half a; its QPN is what half b targets */
	insp_gid_text(a_side ? h->src : h->dst, ip, sizeof(ip));
	qpn = a_side
		  ? (h->src_qp != INSP_QPN_UNKNOWN ? h->src_qp
						   : (h->peer ? h->peer->dqpn : INSP_QPN_UNKNOWN))
		  : h->dqpn;
	fprintf(out,
		"<text x=\"%.0f\" y=\"40\" text-anchor=\"middle\" font-size=\"14\" "
		"font-weight=\"bold\">",
		x);
	svg_text(out, ip);
	fprintf(out, "</text>\n<text x=\"%.0f\" y=\"58\" text-anchor=\"middle\" font-size=\"12\">",
		x);
	if (qpn == INSP_QPN_UNKNOWN)
		fprintf(out, "QP ?");
	else
		fprintf(out, "QP 0x%06x", qpn);
	fprintf(out, "</text>\n");
}

int insp_svg_ladder(FILE *out, const struct insp_ladder *l)
{
	const double xa = 330, xb = 830, top = 96, row = 26, width = 1000;
	double y, height;
	uint64_t t0 = l->n ? l->pkts[0].ts : 0, prev;
	char tbuf[32], dbuf[32];
	unsigned breaks = 0;

	/* rows: one per packet plus one per long pause */
	prev = t0;
	for (unsigned i = 0; i < l->n; i++) {
		if (i && l->pkts[i].ts - prev >= 1000000)
			breaks++;
		prev = l->pkts[i].ts;
	}
	height = top + (l->n + breaks) * row + 140;

	fprintf(out,
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
		"viewBox=\"0 0 %.0f %.0f\" " FONT ">\n"
		"<title>rocemu inspect: packet ladder</title>\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
		"<defs>\n",
		width, height, width, height);
	/* one arrowhead per colour */
	{
		static const char *const cols[] = {COL_REQUEST, COL_ACK,  COL_READ_RESP, COL_NAK,
						   COL_RNR,	COL_RETX, COL_DUP,	 COL_CNP,
						   COL_LATE,	COL_LOST};
		for (unsigned c = 0; c < sizeof(cols) / sizeof(cols[0]); c++)
			fprintf(out,
				"<marker id=\"h%s\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" "
				"markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\">"
				"<path d=\"M0,0 L10,5 L0,10 z\" fill=\"%s\"/></marker>\n",
				cols[c] + 1, cols[c]);
	}
	fprintf(out, "</defs>\n");
	fprintf(out, "<text x=\"10\" y=\"20\" font-size=\"13\">time (from first packet shown)"
		     "</text>\n");
	lane_title(out, xa, l->a, true);
	lane_title(out, xb, l->a, false);
	fprintf(out,
		"<line x1=\"%.0f\" y1=\"68\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#444\" "
		"stroke-width=\"2\"/>\n"
		"<line x1=\"%.0f\" y1=\"68\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#444\" "
		"stroke-width=\"2\"/>\n",
		xa, xa, height - 120, xb, xb, height - 120);

	y = top;
	prev = t0;
	for (unsigned i = 0; i < l->n; i++) {
		const struct insp_ladder_pkt *p = &l->pkts[i];
		struct ladder_style st = packet_style(p);
		double x1 = p->from_a ? xa : xb, x2 = p->from_a ? xb : xa;
		double xm = (xa + xb) / 2;

		if (p->notes & INSP_NOTE_LOST_TX) /* lost on the way: the arrow stops halfway */
			x2 = xm + (p->from_a ? 60 : -60);

		if (i && p->ts - prev >= 1000000) {
			fprintf(
			    out,
			    "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#bbb\" "
			    "stroke-dasharray=\"2,4\"/>\n"
			    "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" fill=\"#777\" "
			    "text-anchor=\"middle\" " HALO ">pause %s</text>\n",
			    xa - 200, y + row / 2 - 8, xb + 150, y + row / 2 - 8, xm,
			    y + row / 2 - 4, insp_fmt_ns(p->ts - prev, dbuf, sizeof(dbuf)));
			y += row;
		}
		fprintf(out, "<text x=\"10\" y=\"%.0f\" font-size=\"11\" fill=\"#555\">%s</text>\n",
			y + 12, insp_fmt_ns(p->ts - t0, tbuf, sizeof(tbuf)));
		fprintf(out,
			"<text x=\"100\" y=\"%.0f\" font-size=\"10\" fill=\"#999\">#%" PRIu64
			"</text>\n",
			y + 12, p->frame);
		fprintf(out,
			"<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
			"stroke-width=\"1.6\"%s marker-end=\"url(#h%s)\"/>\n",
			x1, y + 3, x2, y + row * 0.6, st.colour,
			st.dashed ? " stroke-dasharray=\"6,3\"" : "", st.colour + 1);
		if (st.cross)
			fprintf(out,
				"<path d=\"M%.0f,%.0f l10,10 m0,-10 l-10,10\" stroke=\"%s\" "
				"stroke-width=\"2.5\"/>\n",
				x2 + (p->from_a ? -25 : 15), y + row * 0.6 - 12, st.colour);
		fprintf(out,
			"<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" text-anchor=\"middle\" "
			"fill=\"%s\" " HALO ">",
			xm, y + 1, st.colour);
		if (st.nak)
			fprintf(out, "NAK %s psn %u", insp_nak_name(ROCE_AETH_VALUE(p->syndrome)),
				p->psn);
		else if (st.rnr)
			fprintf(out, "RNR NAK psn %u, retry after %.2f ms", p->psn,
				insp_rnr_timer_us(ROCE_AETH_VALUE(p->syndrome)) / 1000);
		else
			fprintf(out, "%s psn %u%s", insp_op_short(p->opcode), p->psn,
				p->ackreq ? " A" : "");
		if (p->payload)
			fprintf(out, " %uB", p->payload);
		svg_text(out, st.tag);
		fprintf(out, "</text>\n");
		y += row;
		prev = p->ts;
	}
	if (!l->n)
		fprintf(out,
			"<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">no packets in the "
			"selected range</text>\n",
			(xa + xb) / 2, top + 20);
	if (l->skipped)
		fprintf(
		    out,
		    "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\" fill=\"#777\">... %" PRIu64
		    " more packets not drawn</text>\n",
		    (xa + xb) / 2, y + 10, l->skipped);

	/* legend */
	{
		static const struct {
			const char *c, *what;
			bool dashed;
		} lg[] = {
		    {COL_REQUEST, "request", false},
		    {COL_ACK, "ACK", false},
		    {COL_READ_RESP, "read response", false},
		    {COL_NAK, "NAK / error", false},
		    {COL_RNR, "RNR NAK", false},
		    {COL_RETX, "retransmission", true},
		    {COL_DUP, "duplicate", true},
		    {COL_LATE, "out of sequence", false},
		    {COL_CNP, "CNP", false},
		    {COL_LOST, "lost (fault injector)", true},
		};
		double ly = height - 90;

		fprintf(out,
			"<text x=\"10\" y=\"%.0f\" font-size=\"12\" font-weight=\"bold\">"
			"legend</text>\n",
			ly);
		for (unsigned i = 0; i < sizeof(lg) / sizeof(lg[0]); i++) {
			double lx = 10 + (i % 5) * 195, yy = ly + 22 + (i / 5) * 22;

			fprintf(
			    out,
			    "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
			    "stroke-width=\"2\"%s/>\n<text x=\"%.0f\" y=\"%.0f\" "
			    "font-size=\"11\">%s"
			    "</text>\n",
			    lx, yy - 4, lx + 30, yy - 4, lg[i].c,
			    lg[i].dashed ? " stroke-dasharray=\"6,3\"" : "", lx + 36, yy,
			    lg[i].what);
		}
		fprintf(out,
			"<text x=\"10\" y=\"%.0f\" font-size=\"11\" fill=\"#555\">A = AckReq; "
			"a cross marks a frame the receiver drops (bad ICRC, malformed) or "
			"rocemu's fault injector drops</text>\n",
			ly + 70);
	}
	fprintf(out, "</svg>\n");
	return ferror(out) ? -EIO : 0;
}

/* ------------------------------------------------------------------------ */
/* plot                                                                      */

#define PLOT_POINTS 160
#define PLOT_LINES  6

static const char *const line_colours[PLOT_LINES] = {"#1f77b4", "#ff7f0e", "#2ca02c",
						     "#d62728", "#9467bd", "#8c564b"};

/* A "nice" tick step for a range: 1, 2 or 5 times a power of ten. */
static double nice_step(double range, int ticks)
{
	double raw = range / ticks, p = pow(10, floor(log10(raw))), m = raw / p;

	if (m <= 1)
		return p;
	if (m <= 2)
		return 2 * p;
	if (m <= 5)
		return 5 * p;
	return 10 * p;
}

struct panel {
	double x, y, w, h;
	double xmax, ymax;
	const char *ylabel, *xlabel, *title;
};

static void panel_axes(FILE *out, const struct panel *p)
{
	double xs = nice_step(p->xmax, 8), ys = nice_step(p->ymax, 5);

	fprintf(out,
		"<text x=\"%.0f\" y=\"%.0f\" font-size=\"14\" font-weight=\"bold\">%s</text>\n"
		"<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
		"stroke=\"#444\"/>\n",
		p->x, p->y - 10, p->title, p->x, p->y, p->w, p->h);
	/* integer steps, bounded: a degenerate range cannot loop forever */
	for (unsigned k = 0; k <= 50 && k * ys <= p->ymax * 1.0001; k++) {
		double v = k * ys, yy = p->y + p->h - v / p->ymax * p->h;

		fprintf(
		    out,
		    "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n"
		    "<text x=\"%.0f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%g</text>\n",
		    p->x, yy, p->x + p->w, yy, p->x - 6, yy + 4, v);
	}
	for (unsigned k = 0; k <= 50 && k * xs <= p->xmax * 1.0001; k++) {
		double v = k * xs, xx = p->x + v / p->xmax * p->w;

		fprintf(out,
			"<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#444\"/>\n"
			"<text x=\"%.1f\" y=\"%.0f\" font-size=\"11\" "
			"text-anchor=\"middle\">%g</text>\n",
			xx, p->y + p->h, xx, p->y + p->h + 5, xx, p->y + p->h + 18, v);
	}
	fprintf(out,
		"<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\" text-anchor=\"middle\">%s</text>\n"
		"<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\" text-anchor=\"middle\" "
		"transform=\"rotate(-90 %.0f %.0f)\">%s</text>\n",
		p->x + p->w / 2, p->y + p->h + 36, p->xlabel, p->x - 55, p->y + p->h / 2, p->x - 55,
		p->y + p->h / 2, p->ylabel);
}

/* Aggregated point k of a series: bins [k*g, (k+1)*g). */
static double agg_rate(const uint64_t *bytes, unsigned k, unsigned g, double bin_s, double unit)
{
	uint64_t b = 0;

	for (unsigned i = k * g; i < (k + 1) * g && i < INSP_SERIES_BINS; i++)
		b += bytes[i];
	return (double)b * 8 / (bin_s * g) / unit;
}

static bool agg_latency(const struct insp_series *x, unsigned k, unsigned g, double *mean,
			double *max)
{
	uint64_t s = 0, n = 0, m = 0;

	for (unsigned i = k * g; i < (k + 1) * g && i < INSP_SERIES_BINS; i++) {
		s += x->lat_sum[i];
		n += x->lat_n[i];
		if (x->lat_max[i] > m)
			m = x->lat_max[i];
	}
	if (!n)
		return false;
	*mean = (double)s / (double)n;
	*max = (double)m;
	return true;
}

int insp_svg_plot(FILE *out, const struct insp_state *s)
{
	const struct insp_series *tot = s->total_series;
	const struct insp_half *top[PLOT_LINES];
	unsigned ntop = 0, used, g, npts;
	double bin_s, span_s, rate_max = 0, lat_max = 0, unit, lat_unit;
	const char *unit_name, *lat_name;
	struct panel tp, lp;
	char name[160];

	if (!tot || !s->series_bin_ns) {
		fprintf(
		    out,
		    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/"
		    "2000/svg\" width=\"400\" height=\"60\"><text x=\"10\" y=\"30\">no "
		    "RoCEv2 data to plot</text></svg>\n");
		return ferror(out) ? -EIO : 0;
	}
	used = (unsigned)((s->last_ts - s->series_t0) / s->series_bin_ns) + 1;
	if (used > INSP_SERIES_BINS)
		used = INSP_SERIES_BINS;
	g = (used + PLOT_POINTS - 1) / PLOT_POINTS;
	npts = (used + g - 1) / g;
	bin_s = (double)s->series_bin_ns / 1e9;
	span_s = bin_s * g * npts;

	/* the halves that carried the most payload get their own line */
	for (unsigned i = 0; i < s->nhalves; i++) {
		const struct insp_half *h = s->halves[i];
		unsigned j;

		if (!h->series_bytes || !h->payload_bytes)
			continue;
		if (ntop < PLOT_LINES)
			top[ntop++] = h;
		else if (h->payload_bytes > top[PLOT_LINES - 1]->payload_bytes)
			top[PLOT_LINES - 1] = h;
		else
			continue;
		for (j = ntop - 1; j > 0 && top[j]->payload_bytes > top[j - 1]->payload_bytes;
		     j--) {
			const struct insp_half *t = top[j];

			top[j] = top[j - 1];
			top[j - 1] = t;
		}
	}

	for (unsigned k = 0; k < npts; k++) {
		double r = agg_rate(tot->bytes, k, g, bin_s, 1), m, x;

		if (r > rate_max)
			rate_max = r;
		if (agg_latency(tot, k, g, &m, &x) && x > lat_max)
			lat_max = x;
	}
	if (rate_max >= 1e9) {
		unit = 1e9;
		unit_name = "Gbit/s";
	} else if (rate_max >= 1e6) {
		unit = 1e6;
		unit_name = "Mbit/s";
	} else {
		unit = 1e3;
		unit_name = "kbit/s";
	}
	if (lat_max >= 1e6) {
		lat_unit = 1e6;
		lat_name = "latency (ms)";
	} else {
		lat_unit = 1e3;
		lat_name = "latency (us)";
	}
	tp = (struct panel){80,
			    70,
			    820,
			    260,
			    span_s * 1e3,
			    rate_max / unit * 1.1,
			    unit_name,
			    "time since first RoCEv2 packet (ms)",
			    "payload throughput"};
	lp = (struct panel){
	    80,
	    420,
	    820,
	    260,
	    span_s * 1e3,
	    lat_max / lat_unit * 1.1,
	    lat_name,
	    "time since first RoCEv2 packet (ms)",
	    "message latency: last request packet to response (mean, max per interval)"};
	if (tp.ymax <= 0)
		tp.ymax = 1;
	if (lp.ymax <= 0)
		lp.ymax = 1;

	fprintf(out,
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1000\" height=\"%d\" "
		"viewBox=\"0 0 1000 %d\" " FONT ">\n"
		"<title>rocemu inspect: throughput and latency</title>\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
		760 + 18 * (int)ntop, 760 + 18 * (int)ntop);
	fprintf(out,
		"<text x=\"80\" y=\"30\" font-size=\"12\" fill=\"#555\">interval %s, "
		"%u intervals</text>\n",
		insp_fmt_ns(s->series_bin_ns * g, name, sizeof(name)), npts);
	panel_axes(out, &tp);
	panel_axes(out, &lp);

	/* throughput: total, then the top halves */
	for (int line = -1; line < (int)ntop; line++) {
		const uint64_t *x = line < 0 ? tot->bytes : top[line]->series_bytes;
		const char *col = line < 0 ? "#000" : line_colours[line];

		if (line >= 0 && ntop == 1)
			break; /* identical to the total */
		fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\" points=\"",
			col, line < 0 ? "2" : "1.3");
		for (unsigned k = 0; k < npts; k++) {
			double r = agg_rate(x, k, g, bin_s, unit);
			double xx = tp.x + (k + 0.5) * tp.w / npts;
			double yy = tp.y + tp.h - r / tp.ymax * tp.h;

			fprintf(out, "%.1f,%.1f ", xx, yy);
		}
		fprintf(out, "\"/>\n");
	}
	/* latency: max as light bars, mean as a line with dots */
	for (unsigned k = 0; k < npts; k++) {
		double m, x;

		if (!agg_latency(tot, k, g, &m, &x))
			continue;
		double xx = lp.x + (k + 0.5) * lp.w / npts;

		fprintf(out,
			"<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#f4a582\" "
			"stroke-width=\"3\"/>\n<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" "
			"fill=\"#b2182b\"/>\n",
			xx, lp.y + lp.h - m / lat_unit / lp.ymax * lp.h, xx,
			lp.y + lp.h - x / lat_unit / lp.ymax * lp.h, xx,
			lp.y + lp.h - m / lat_unit / lp.ymax * lp.h);
	}

	/* legend */
	{
		double ly = 735;

		fprintf(out,
			"<line x1=\"80\" y1=\"%.0f\" x2=\"110\" y2=\"%.0f\" stroke=\"#000\" "
			"stroke-width=\"2\"/><text x=\"116\" y=\"%.0f\" font-size=\"11\">all "
			"RoCEv2 payload</text>\n"
			"<circle cx=\"420\" cy=\"%.0f\" r=\"3\" fill=\"#b2182b\"/><line x1=\"440\" "
			"y1=\"%.0f\" x2=\"470\" y2=\"%.0f\" stroke=\"#f4a582\" stroke-width=\"3\"/>"
			"<text x=\"476\" y=\"%.0f\" font-size=\"11\">latency mean (dot) up to max "
			"(bar)</text>\n",
			ly - 4, ly - 4, ly, ly - 4, ly - 4, ly - 4, ly);
		for (unsigned i = 0; i < ntop && ntop > 1; i++) {
			const struct insp_half *h = top[i];
			char a[48], b[48];

			insp_gid_text(h->src, a, sizeof(a));
			insp_gid_text(h->dst, b, sizeof(b));
			snprintf(name, sizeof(name), "%s -> %s qp 0x%06x (%s)", a, b, h->dqpn,
				 insp_transport_name(h->transport));
			fprintf(out,
				"<line x1=\"80\" y1=\"%.0f\" x2=\"110\" y2=\"%.0f\" stroke=\"%s\" "
				"stroke-width=\"2\"/><text x=\"116\" y=\"%.0f\" font-size=\"11\">",
				ly + 14 + 18 * i, ly + 14 + 18 * i, line_colours[i],
				ly + 18 + 18 * i);
			svg_text(out, name);
			fprintf(out, "</text>\n");
		}
	}
	fprintf(out, "</svg>\n");
	return ferror(out) ? -EIO : 0;
}
