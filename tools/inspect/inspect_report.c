/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rocemu inspect: what the analysis found, as text for people, JSON for
 * machines, one line per packet (--packets) and the list of protocol
 * violations (--check). The text and the JSON print the same numbers from
 * the same fields.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect.h"

/* ------------------------------------------------------------------------ */
/* names                                                                     */

const char *insp_transport_name(uint8_t transport)
{
	switch (transport) {
	case ROCE_TRANSPORT_RC:
		return "RC";
	case ROCE_TRANSPORT_UC:
		return "UC";
	case ROCE_TRANSPORT_RD:
		return "RD";
	case ROCE_TRANSPORT_UD:
		return "UD";
	case ROCE_TRANSPORT_CNP:
		return "CNP";
	case ROCE_TRANSPORT_XRC:
		return "XRC";
	default:
		return "?";
	}
}

/* Short operation names (IBA table 38), transport left out: "SEND_FIRST". */
const char *insp_op_short(uint8_t opcode)
{
	static const char *const ops[0x18] = {
	    "SEND_FIRST",	"SEND_MIDDLE",
	    "SEND_LAST",	"SEND_LAST_IMM",
	    "SEND_ONLY",	"SEND_ONLY_IMM",
	    "WRITE_FIRST",	"WRITE_MIDDLE",
	    "WRITE_LAST",	"WRITE_LAST_IMM",
	    "WRITE_ONLY",	"WRITE_ONLY_IMM",
	    "READ_REQUEST",	"READ_RESP_FIRST",
	    "READ_RESP_MIDDLE", "READ_RESP_LAST",
	    "READ_RESP_ONLY",	"ACK",
	    "ATOMIC_ACK",	"CMP_SWAP",
	    "FETCH_ADD",	NULL,
	    "SEND_LAST_INV",	"SEND_ONLY_INV",
	};
	static char bufs[4][16];
	static unsigned next;
	char *b;

	if (opcode == ROCE_OPCODE_CNP)
		return "CNP";
	if (roce_opcode_info(opcode) && (opcode & 0x1F) < 0x18 && ops[opcode & 0x1F])
		return ops[opcode & 0x1F];
	b = bufs[next++ % 4];
	snprintf(b, sizeof(bufs[0]), "OPCODE_0x%02x", opcode);
	return b;
}

const char *insp_event_name(enum insp_event_kind k)
{
	static const char *const names[INSP_EV_KINDS] = {
	    [INSP_EV_GAP] = "psn_gap",
	    [INSP_EV_GAP_UNRECOVERED] = "psn_gap_at_end",
	    [INSP_EV_REORDERED] = "reordered",
	    [INSP_EV_RETRANSMIT] = "retransmission",
	    [INSP_EV_DUPLICATE] = "duplicate",
	    [INSP_EV_NAK] = "nak",
	    [INSP_EV_RNR_NAK] = "rnr_nak",
	    [INSP_EV_ICRC] = "icrc_error",
	    [INSP_EV_MALFORMED] = "malformed",
	    [INSP_EV_TRUNCATED] = "truncated",
	    [INSP_EV_NO_REQUEST] = "response_without_request",
	    [INSP_EV_UNANSWERED_BEFORE] = "responses_to_uncaptured_requests",
	    [INSP_EV_CAPTURE_LOSS] = "capture_loss",
	    [INSP_EV_CNP] = "cnp",
	    [INSP_EV_FAULT_LOST] = "fault_lost",
	};
	return (unsigned)k < INSP_EV_KINDS && names[k] ? names[k] : "event";
}

const char *insp_nak_name(unsigned code)
{
	static const char *const names[INSP_NAK_CODES] = {
	    "psn_sequence_error",	"invalid_request",    "remote_access_error",
	    "remote_operational_error", "invalid_rd_request",
	};
	return code < INSP_NAK_CODES ? names[code] : "reserved";
}

/* IBA vol. 1 table 45: RNR NAK timer field encoding, in microseconds. */
double insp_rnr_timer_us(unsigned code)
{
	static const double us[32] = {
	    655360, 10,	   20,	  30,	 40,	60,	80,	120,	160,	240,	320,
	    480,    640,   960,	  1280,	 1920,	2560,	3840,	5120,	7680,	10240,	15360,
	    20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
	};
	return us[code & 31];
}

void insp_gid_text(const uint8_t gid[16], char *buf, size_t len)
{
	roce_gid_str(gid, buf, len);
}

const char *insp_fmt_ns(uint64_t ns, char *buf, size_t len)
{
	if (ns < 1000)
		snprintf(buf, len, "%" PRIu64 " ns", ns);
	else if (ns < 1000000)
		snprintf(buf, len, "%.1f us", (double)ns / 1e3);
	else if (ns < 10000000000ull)
		snprintf(buf, len, "%.2f ms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.2f s", (double)ns / 1e9);
	return buf;
}

static const char *kind_name(unsigned k)
{
	static const char *const n[INSP_MSG_KINDS] = {"SEND", "WRITE", "READ", "ATOMIC"};
	return n[k];
}

/* ------------------------------------------------------------------------ */
/* halves and conversations                                                  */

/* QPN of the QP on the half's source host, or INSP_QPN_UNKNOWN. */
static uint32_t src_qpn(const struct insp_half *h)
{
	if (h->src_qp != INSP_QPN_UNKNOWN)
		return h->src_qp;
	if (h->self_connected)
		return h->dqpn;
	return h->peer ? h->peer->dqpn : INSP_QPN_UNKNOWN;
}

static uint8_t conv_transport(const struct insp_half *h)
{
	if (h->transport != 0xFF)
		return h->transport;
	return h->peer ? h->peer->transport : 0xFF;
}

static const char *qpn_text(uint32_t qpn, char *buf, size_t len)
{
	if (qpn == INSP_QPN_UNKNOWN)
		snprintf(buf, len, "?");
	else
		snprintf(buf, len, "0x%06x", qpn);
	return buf;
}

static void half_title(const struct insp_half *h, char *buf, size_t len)
{
	char a[48], b[48], qa[16], qb[16];

	insp_gid_text(h->src, a, sizeof(a));
	insp_gid_text(h->dst, b, sizeof(b));
	snprintf(buf, len, "%s %s qp %s -> %s qp %s", insp_transport_name(conv_transport(h)), a,
		 qpn_text(src_qpn(h), qa, sizeof(qa)), b, qpn_text(h->dqpn, qb, sizeof(qb)));
}

static uint64_t half_msgs(const struct insp_half *h)
{
	uint64_t n = 0;

	for (unsigned k = 0; k < INSP_MSG_KINDS; k++)
		n += h->msgs[k];
	return n;
}

static uint64_t half_naks(const struct insp_half *h)
{
	uint64_t n = 0;

	for (unsigned k = 0; k <= INSP_NAK_CODES; k++)
		n += h->naks[k];
	return n;
}

/* Payload rate over the time the direction was active (first to last packet). */
static double payload_mbps(const struct insp_half *h)
{
	if (h->last_ts <= h->first_ts)
		return 0;
	return (double)h->payload_bytes * 8 * 1000 / (double)(h->last_ts - h->first_ts);
}

/* Conversations in report order: the first half of each, by creation. */
/* A conversation is named by its first direction, or by its only one. */
static bool opens_conversation(const struct insp_half *h)
{
	return h->is_first || !h->peer;
}

static unsigned conversation_number(const struct insp_state *s, const struct insp_half *h)
{
	unsigned n = 0;

	if (h && !opens_conversation(h))
		h = h->peer;
	for (unsigned i = 0; i < s->nhalves; i++) {
		if (opens_conversation(s->halves[i]))
			n++;
		if (s->halves[i] == h)
			return n;
	}
	return 0;
}

/* The next parse status after r that some malformed frame had, or
 * ROCE_PARSE_STATUS_COUNT. Start with r = 0 (ROCE_PARSE_OK). */
static unsigned next_malformed_reason(const struct insp_state *s, unsigned r)
{
	while (++r < ROCE_PARSE_STATUS_COUNT && !s->parse_status[r])
		;
	return r;
}

/* ------------------------------------------------------------------------ */
/* events                                                                    */

const char *insp_resend_cause_name(unsigned cause)
{
	static const char *const names[] = {"nak", "rnr_nak", "ackreq", "silence", "replay"};

	return cause < sizeof(names) / sizeof(names[0]) ? names[cause] : "?";
}

/*
 * A sender's resend: one packet alone (a stall probe, a timeout of the last
 * packet) or a go-back-N of several, and why the inspector calls it the
 * sender's rather than the network's.
 */
static void resend_text(const struct insp_event *e, const char *t, char *buf, size_t len)
{
	char why[96], d[32];
	const char *ref = e->since_copy ? "its previous copy" : "the newest request";

	insp_fmt_ns(e->ns, d, sizeof(d));
	switch (e->cause) {
	case INSP_RESEND_NAK:
		snprintf(why, sizeof(why), "after a NAK");
		break;
	case INSP_RESEND_RNR:
		snprintf(why, sizeof(why), "after an RNR NAK");
		break;
	case INSP_RESEND_ACKREQ:
		snprintf(why, sizeof(why), "AckReq %s, %s after %s",
			 e->ackreq ? "added" : "dropped", d, ref);
		break;
	case INSP_RESEND_REPLAY:
		snprintf(why, sizeof(why), "a step back from the request before it");
		break;
	default:
		snprintf(why, sizeof(why), "%s after %s", d, ref);
		break;
	}
	if (e->value <= 1)
		snprintf(buf, len, "%s: psn %u resent alone (%s%s)", t, e->psn, why,
			 e->acked ? "; already acknowledged" : "");
	else
		snprintf(buf, len,
			 "%s: go-back-N from psn %u: %u packets resent, up to psn %u (%s%s)", t,
			 e->psn, e->value, e->psn2, why, e->acked ? "; already acknowledged" : "");
}

static void event_text(const struct insp_event *e, char *buf, size_t len)
{
	char t[160] = "", ps[64];

	if (e->half)
		half_title(e->half, t, sizeof(t));
	switch ((enum insp_event_kind)e->kind) {
	case INSP_EV_GAP:
		snprintf(buf, len, "%s: PSN gap, %u missing (psn %u..%u)", t,
			 (unsigned)roce_psn_diff(e->psn2, e->psn) + 1, e->psn, e->psn2);
		break;
	case INSP_EV_GAP_UNRECOVERED:
		snprintf(buf, len, "%s: PSN %u..%u missing and never retransmitted%s", t, e->psn,
			 e->psn2, e->value ? " (NAKed)" : " nor NAKed");
		break;
	case INSP_EV_REORDERED:
		snprintf(buf, len, "%s: psn %u arrived late (reordered)", t, e->psn);
		break;
	case INSP_EV_RETRANSMIT:
		resend_text(e, t, buf, len);
		break;
	case INSP_EV_FAULT_LOST:
		snprintf(buf, len, "%s: psn %u dropped by rocemu's fault injector on %s", t, e->psn,
			 e->value == INSP_ANNOT_LOST_RX ? "receive" : "transmit");
		break;
	case INSP_EV_DUPLICATE:
		snprintf(buf, len, "%s: duplicate psn %u", t, e->psn);
		break;
	case INSP_EV_NAK:
		snprintf(buf, len, "%s: NAK %s psn %u", t, insp_nak_name(e->value), e->psn);
		break;
	case INSP_EV_RNR_NAK:
		snprintf(
		    buf, len, "%s: RNR NAK psn %u, timer %u (%s)", t, e->psn, e->value,
		    insp_fmt_ns((uint64_t)(insp_rnr_timer_us(e->value) * 1000), ps, sizeof(ps)));
		break;
	case INSP_EV_ICRC:
		snprintf(buf, len, "%s: bad ICRC psn %u", t, e->psn);
		break;
	case INSP_EV_MALFORMED:
		snprintf(buf, len, "%s%smalformed RoCEv2 frame (%s)", t, *t ? ": " : "",
			 roce_parse_status_name((enum roce_parse_status)e->value));
		break;
	case INSP_EV_TRUNCATED:
		snprintf(buf, len, "%s%struncated by the capture (%u of %u bytes)", t,
			 *t ? ": " : "", e->value, e->psn2);
		break;
	case INSP_EV_UNANSWERED_BEFORE:
		snprintf(buf, len,
			 "%s: %" PRIu64
			 " response(s) from psn %u answer requests the capture does not "
			 "hold (sent before it began, or not through it)",
			 t, e->half ? e->half->unmatched_responses : 0, e->psn);
		break;
	case INSP_EV_CAPTURE_LOSS:
		snprintf(buf, len,
			 "%s: psn %u..%u acknowledged by the responder but not in the capture "
			 "(lost by the capture, not the network)",
			 t, e->psn, e->psn2);
		break;
	case INSP_EV_NO_REQUEST:
		snprintf(buf, len, "%s: response psn %u answers no request in the capture", t,
			 e->psn);
		break;
	default:
		snprintf(buf, len, "%s: %s", t, insp_event_name((enum insp_event_kind)e->kind));
		break;
	}
}

static void where_text(const struct insp_event *e, unsigned nfiles, char *buf, size_t len)
{
	if (nfiles > 1)
		snprintf(buf, len, "file %u frame %" PRIu64, e->file + 1, e->frame);
	else
		snprintf(buf, len, "frame %" PRIu64, e->frame);
}

void insp_report_violations(FILE *out, const struct insp_state *s, const struct insp_report_opts *o)
{
	char w[48], t[384];

	for (unsigned i = 0; i < s->nevents; i++) {
		const struct insp_event *e = &s->events[i];

		if (!e->violation)
			continue;
		where_text(e, o->nfiles, w, sizeof(w));
		event_text(e, t, sizeof(t));
		fprintf(out, "VIOLATION %s: %s\n", w, t);
	}
	if (s->events_dropped)
		fprintf(out, "(%" PRIu64 " more events not listed)\n", s->events_dropped);
}

/* ------------------------------------------------------------------------ */
/* --packets                                                                 */

void insp_print_packet(FILE *out, const struct insp_state *s, const struct insp_frame *f,
		       unsigned nfiles)
{
	const struct roce_pkt *p = &f->pkt;
	char a[48], b[48];
	uint64_t rel = f->ts_ns - s->first_ts;
	unsigned n = s->last_notes;

	if (f->cls != INSP_ROCE && f->cls != INSP_ROCE_MALFORMED)
		return;
	insp_gid_text(f->src_gid, a, sizeof(a));
	insp_gid_text(f->dst_gid, b, sizeof(b));
	if (nfiles > 1)
		fprintf(out, "%u:", f->file_no + 1);
	fprintf(out, "%" PRIu64 " %" PRIu64 ".%09" PRIu64 " %s:%u > %s", f->index,
		rel / 1000000000u, rel % 1000000000u, a, f->sport, b);
	if (!f->has_bth) {
		fprintf(out, " MALFORMED (%s) len %u\n", roce_parse_status_name(f->status),
			f->wirelen);
		return;
	}
	fprintf(out, " %s %s qp 0x%06x psn %u", insp_transport_name(f->opcode & 0xE0),
		insp_op_short(f->opcode), f->dqpn, f->psn);
	if (f->headers_ok) {
		if (p->ackreq)
			fprintf(out, " A");
		if (p->se)
			fprintf(out, " SE");
		if (p->fecn)
			fprintf(out, " FECN");
		if (p->becn)
			fprintf(out, " BECN");
		if (p->op && (p->op->hdrs & ROCE_HDR_RETH))
			fprintf(out, " reth va 0x%" PRIx64 " rkey 0x%x dlen %u", p->reth.va,
				p->reth.rkey, p->reth.dma_len);
		if (p->op && (p->op->hdrs & ROCE_HDR_AETH)) {
			unsigned type = ROCE_AETH_TYPE(p->aeth.syndrome);
			unsigned v = ROCE_AETH_VALUE(p->aeth.syndrome);

			if (type == ROCE_AETH_ACK)
				fprintf(out, " aeth ACK credits %u msn %u", v, p->aeth.msn);
			else if (type == ROCE_AETH_RNR_NAK)
				fprintf(out, " aeth RNR-NAK timer %u (%.2f ms) msn %u", v,
					insp_rnr_timer_us(v) / 1000, p->aeth.msn);
			else if (type == ROCE_AETH_NAK)
				fprintf(out, " aeth NAK %s msn %u", insp_nak_name(v), p->aeth.msn);
			else
				fprintf(out, " aeth syndrome 0x%02x msn %u", p->aeth.syndrome,
					p->aeth.msn);
		}
		if (p->op && (p->op->hdrs & ROCE_HDR_ATOMIC_ETH))
			fprintf(
			    out,
			    " atomic va 0x%" PRIx64 " rkey 0x%x swap_add %" PRIu64 " cmp %" PRIu64,
			    p->atomic.va, p->atomic.rkey, p->atomic.swap_add, p->atomic.compare);
		if (p->op && (p->op->hdrs & ROCE_HDR_ATOMIC_ACK_ETH))
			fprintf(out, " orig %" PRIu64, p->atomic_orig);
		if (p->op && (p->op->hdrs & ROCE_HDR_DETH))
			fprintf(out, " deth qkey 0x%x srcqp 0x%06x", p->deth.qkey, p->deth.src_qp);
		if (p->op && (p->op->hdrs & ROCE_HDR_IMMDT))
			fprintf(out, " imm 0x%08x", p->imm);
		if (p->op && (p->op->hdrs & ROCE_HDR_IETH))
			fprintf(out, " ieth rkey 0x%x", p->ieth_rkey);
		fprintf(out, " len %u payload %u", f->wirelen, p->payload_len);
	} else {
		fprintf(out, " len %u", f->wirelen);
	}
	if ((f->tclass & 3) == 3)
		fprintf(out, " ECN-CE");
	if (f->cls == INSP_ROCE_MALFORMED)
		fprintf(out, " MALFORMED (%s)", roce_parse_status_name(f->status));
	if (f->truncated)
		fprintf(out, " TRUNCATED (%u of %u)", f->caplen, f->wirelen);
	if (f->icrc == INSP_ICRC_BAD)
		fprintf(out, " BAD-ICRC");
	if (n & INSP_NOTE_RETX)
		fprintf(out, " RETRANSMIT");
	if (n & INSP_NOTE_DUP)
		fprintf(out, " DUPLICATE");
	if (n & INSP_NOTE_LATE)
		fprintf(out, " LATE");
	else if (n & INSP_NOTE_OOS)
		fprintf(out, " OUT-OF-SEQUENCE");
	if (n & INSP_NOTE_NO_REQUEST)
		fprintf(out, " NO-REQUEST");
	if (n & INSP_NOTE_LOST_TX)
		fprintf(out, " LOST (fault injector, transmit)");
	if (n & INSP_NOTE_LOST_RX)
		fprintf(out, " LOST (fault injector, receive)");
	fputc('\n', out);
}

/* ------------------------------------------------------------------------ */
/* text                                                                      */

/* What a latency is, given where it was measured (NULL: the totals, mixed). */
static const char *point_text(const char *point)
{
	if (!point)
		return "";
	if (!strcmp(point, "requester"))
		return ", at the requester: the round trip";
	if (!strcmp(point, "responder"))
		return ", at the responder: its turnaround, the round trip is longer";
	return ", capture point unknown";
}

static void text_latency(FILE *out, const char *indent, const struct insp_hist *h,
			 const char *point)
{
	char b[6][32];

	if (!h || !h->n) {
		fprintf(out, "%slatency: no completed messages\n", indent);
		return;
	}
	fprintf(out,
		"%slatency (last request packet -> response%s): n %" PRIu64
		", min %s, p50 %s, p90 %s, p99 %s, max %s, mean %s\n",
		indent, point_text(point), h->n, insp_fmt_ns(h->min, b[0], 32),
		insp_fmt_ns(insp_hist_quantile(h, 0.5), b[1], 32),
		insp_fmt_ns(insp_hist_quantile(h, 0.9), b[2], 32),
		insp_fmt_ns(insp_hist_quantile(h, 0.99), b[3], 32), insp_fmt_ns(h->max, b[4], 32),
		insp_fmt_ns((uint64_t)(h->sum / (double)h->n), b[5], 32));
}

static void text_half(FILE *out, const struct insp_state *s, const struct insp_half *h)
{
	char a[48], b[48];
	bool any;

	insp_gid_text(h->src, a, sizeof(a));
	insp_gid_text(h->dst, b, sizeof(b));
	fprintf(out, "  %s -> %s (qp 0x%06x, udp sport %u%s)\n", a, b, h->dqpn, h->sport,
		h->sport_varies ? ", varies" : "");
	fprintf(out, "    packets %" PRIu64 ", wire bytes %" PRIu64 ", payload bytes %" PRIu64,
		h->pkts, h->wire_bytes, h->payload_bytes);
	if (h->last_ts > h->first_ts) {
		char d[32];

		fprintf(out, "; %.3f Mbit/s of payload over %s", payload_mbps(h),
			insp_fmt_ns(h->last_ts - h->first_ts, d, sizeof(d)));
	}
	fputc('\n', out);
	fprintf(out, "    opcodes");
	any = false;
	for (unsigned op = 0; op < 256; op++) {
		if (!insp_ops_get(&h->ops, (uint8_t)op))
			continue;
		fprintf(out, "%s %s %" PRIu64, any ? "," : "", insp_op_short((uint8_t)op),
			insp_ops_get(&h->ops, (uint8_t)op));
		any = true;
	}
	fprintf(out, "%s\n", any ? "" : " none");
	fprintf(out, "    requests %" PRIu64, h->req_pkts);
	if (h->req_seen)
		fprintf(out, ", psn %u..%u", h->req_first,
			roce_psn_add(h->req_next, ROCE_PSN_MASK));
	fprintf(out, ", messages %" PRIu64, half_msgs(h));
	any = false;
	for (unsigned k = 0; k < INSP_MSG_KINDS; k++) {
		if (!h->msgs[k])
			continue;
		fprintf(out, "%s%s %" PRIu64 " = %" PRIu64 " B", any ? ", " : " (", kind_name(k),
			h->msgs[k], h->msg_bytes[k]);
		any = true;
	}
	fprintf(out, "%s, completed %" PRIu64 ", incomplete %" PRIu64 "\n", any ? ")" : "",
		h->msgs_completed, h->msgs_incomplete);
	fprintf(out,
		"    retransmitted %" PRIu64 ", duplicates %" PRIu64 ", out-of-sequence %" PRIu64
		" (reordered %" PRIu64 "), gaps %" PRIu64 " (psn missing at end %" PRIu64
		", lost by the capture %" PRIu64 ")\n",
		h->retransmitted, h->duplicates, h->out_of_seq, h->reordered, h->gaps_seen,
		h->psn_missing, h->capture_lost);
	if (h->gaps_untracked || h->msgs_untracked)
		fprintf(out,
			"    beyond the tracking limits: %" PRIu64 " gaps and %" PRIu64
			" messages no longer followed\n",
			h->gaps_untracked, h->msgs_untracked);
	fprintf(out, "    responses: acks %" PRIu64 ", naks %" PRIu64, h->acks, half_naks(h));
	any = false;
	for (unsigned c = 0; c <= INSP_NAK_CODES; c++) {
		if (!h->naks[c])
			continue;
		fprintf(out, "%s%s %" PRIu64, any ? ", " : " (", insp_nak_name(c), h->naks[c]);
		any = true;
	}
	fprintf(out, "%s, rnr-naks %" PRIu64, any ? ")" : "", h->rnr_naks);
	any = false;
	for (unsigned c = 0; c < 32; c++) {
		if (!h->rnr_timer[c])
			continue;
		fprintf(out, "%stimer %u = %.2f ms: %" PRIu64, any ? ", " : " (", c,
			insp_rnr_timer_us(c) / 1000, h->rnr_timer[c]);
		any = true;
	}
	fprintf(out,
		"%s, read responses %" PRIu64 ", atomic acks %" PRIu64 ", without request %" PRIu64
		"\n",
		any ? ")" : "", h->read_resps, h->atomic_acks, h->unmatched_responses);
	fprintf(out,
		"    cnp %" PRIu64 ", ecn-ce %" PRIu64 ", fecn %" PRIu64 ", becn %" PRIu64
		", icrc errors %" PRIu64 ", malformed %" PRIu64 ", truncated %" PRIu64 "\n",
		h->cnps, h->ecn_ce, h->fecn, h->becn, h->icrc_errors, h->malformed, h->truncated);
	if (h->fault_lost)
		fprintf(out, "    dropped by rocemu's fault injector %" PRIu64 "\n", h->fault_lost);
	text_latency(out, "    ", h->lat, insp_latency_point(s, h));
}

struct totals {
	uint64_t conversations, pkts, payload, msgs[INSP_MSG_KINDS], msg_bytes[INSP_MSG_KINDS],
	    completed, incomplete, retx, dups, oos, gaps, acks, naks, rnr, cnps, ecn, icrc,
	    malformed, truncated, no_request, fault_lost;
	struct insp_hist lat;
};

static void totals_of(const struct insp_state *s, struct totals *t)
{
	memset(t, 0, sizeof(*t));
	for (unsigned i = 0; i < s->nhalves; i++) {
		const struct insp_half *h = s->halves[i];

		if (opens_conversation(h))
			t->conversations++;
		t->pkts += h->pkts;
		t->payload += h->payload_bytes;
		for (unsigned k = 0; k < INSP_MSG_KINDS; k++) {
			t->msgs[k] += h->msgs[k];
			t->msg_bytes[k] += h->msg_bytes[k];
		}
		t->completed += h->msgs_completed;
		t->incomplete += h->msgs_incomplete;
		t->retx += h->retransmitted;
		t->dups += h->duplicates;
		t->oos += h->out_of_seq;
		t->gaps += h->gaps_seen;
		t->acks += h->acks;
		t->naks += half_naks(h);
		t->rnr += h->rnr_naks;
		t->cnps += h->cnps;
		t->ecn += h->ecn_ce;
		t->icrc += h->icrc_errors;
		t->malformed += h->malformed;
		t->truncated += h->truncated;
		t->no_request += h->unmatched_responses;
		t->fault_lost += h->fault_lost;
		if (h->lat)
			insp_hist_merge(&t->lat, h->lat);
	}
}

static uint64_t totals_msgs(const struct totals *t)
{
	uint64_t n = 0;

	for (unsigned k = 0; k < INSP_MSG_KINDS; k++)
		n += t->msgs[k];
	return n;
}

/* One conversation as the reports show it. */
struct conv {
	const struct insp_state *s;
	unsigned n;		       /* its number, from 1 */
	const struct insp_half *h, *p; /* the direction that names it, the other (or NULL) */
	char a[48], b[48];	       /* h's source and destination address */
};

/* A report format: what it prints for each part, in the order of the walk. */
struct report_fmt {
	void (*head)(FILE *out, const struct insp_state *s, const struct insp_report_opts *o);
	void (*conversation)(FILE *out, const struct conv *c);
	void (*totals)(FILE *out, const struct insp_state *s, const struct totals *t);
	void (*tail)(FILE *out, const struct insp_state *s, const struct insp_report_opts *o);
};

/* The one walk over the analysis that both the text and the JSON report take. */
static void report(FILE *out, const struct insp_state *s, const struct insp_report_opts *o,
		   const struct report_fmt *f)
{
	struct totals *t = calloc(1, sizeof(*t));
	struct conv c = {.s = s};

	if (!t)
		return;
	f->head(out, s, o);
	for (unsigned i = 0; i < s->nhalves; i++) {
		if (!opens_conversation(s->halves[i]))
			continue;
		c.n++;
		c.h = s->halves[i];
		c.p = c.h->peer;
		insp_gid_text(c.h->src, c.a, sizeof(c.a));
		insp_gid_text(c.h->dst, c.b, sizeof(c.b));
		f->conversation(out, &c);
	}
	totals_of(s, t);
	f->totals(out, s, t);
	f->tail(out, s, o);
	free(t);
}

static void text_capture_point(FILE *out, const struct insp_capture_point *cp)
{
	char a[48];

	if (!cp->how) {
		fprintf(out, "capture point unknown (latencies are as the capture saw them)\n");
		return;
	}
	fprintf(out, "capture point (%s):", cp->how);
	if (cp->name[0])
		fprintf(out, " %s", cp->name);
	if (cp->has_mac)
		fprintf(out, " mac %02x:%02x:%02x:%02x:%02x:%02x", cp->mac[0], cp->mac[1],
			cp->mac[2], cp->mac[3], cp->mac[4], cp->mac[5]);
	for (unsigned i = 0; i < cp->n; i++) {
		insp_gid_text(cp->gids[i], a, sizeof(a));
		fprintf(out, " %s", a);
	}
	fputc('\n', out);
}

static void text_head(FILE *out, const struct insp_state *s, const struct insp_report_opts *o)
{
	char d[32];
	uint64_t other = s->frames_by_class[INSP_NON_IP] + s->frames_by_class[INSP_NON_UDP] +
			 s->frames_by_class[INSP_UDP_OTHER] + s->frames_by_class[INSP_SHORT];

	for (unsigned i = 0; i < o->nfiles; i++)
		fprintf(out, "capture %s\n", o->files[i]);
	fprintf(out,
		"frames %" PRIu64 ": RoCEv2 %" PRIu64 ", malformed RoCEv2 %" PRIu64
		", other %" PRIu64 " (non-IP %" PRIu64 ", IP not UDP %" PRIu64
		", other UDP %" PRIu64 ", too short %" PRIu64 "), truncated by snaplen %" PRIu64
		"\n",
		s->frames, s->frames_by_class[INSP_ROCE], s->frames_by_class[INSP_ROCE_MALFORMED],
		other, s->frames_by_class[INSP_NON_IP], s->frames_by_class[INSP_NON_UDP],
		s->frames_by_class[INSP_UDP_OTHER], s->frames_by_class[INSP_SHORT],
		s->truncated_frames);
	if (s->frames_by_class[INSP_ROCE_MALFORMED]) {
		fprintf(out, "malformed RoCEv2 by reason:");
		for (unsigned r = next_malformed_reason(s, 0), any = 0; r < ROCE_PARSE_STATUS_COUNT;
		     r = next_malformed_reason(s, r))
			fprintf(out, "%s %s %" PRIu64, any++ ? "," : "",
				roce_parse_status_name((enum roce_parse_status)r),
				s->parse_status[r]);
		fputc('\n', out);
	}
	if (s->frames_by_class[INSP_RECORD] || s->frames_by_class[INSP_LOST])
		fprintf(out,
			"rocemu records %" PRIu64
			", frames dropped by rocemu's fault injector %" PRIu64 "\n",
			s->frames_by_class[INSP_RECORD], s->frames_by_class[INSP_LOST]);
	text_capture_point(out, &s->cp);
	fprintf(out, "duration %s, wire bytes %" PRIu64 "\n",
		insp_fmt_ns(s->ts_valid ? s->last_ts - s->first_ts : 0, d, sizeof(d)),
		s->wire_bytes);
}

static void text_conversation(FILE *out, const struct conv *c)
{
	char qa[16], qb[16];

	fprintf(out, "\nconversation %u: %s %s qp %s <-> %s qp %s", c->n,
		insp_transport_name(conv_transport(c->h)), c->a,
		qpn_text(src_qpn(c->h), qa, sizeof(qa)), c->b,
		qpn_text(c->h->dqpn, qb, sizeof(qb)));
	if (c->p)
		fprintf(out, " (paired by %s)\n", c->h->paired_by);
	else
		fprintf(out, c->h->self_connected ? " (a QP connected to itself)\n"
						  : " (one direction only)\n");
	text_half(out, c->s, c->h);
	if (c->p)
		text_half(out, c->s, c->p);
}

static void text_totals(FILE *out, const struct insp_state *s, const struct totals *t)
{
	fprintf(out,
		"\ntotals: conversations %" PRIu64 ", packets %" PRIu64 ", payload bytes %" PRIu64
		", messages %" PRIu64 " (SEND %" PRIu64 ", WRITE %" PRIu64 ", READ %" PRIu64
		", ATOMIC %" PRIu64 "), completed %" PRIu64 ", incomplete %" PRIu64 "\n",
		t->conversations, t->pkts, t->payload, totals_msgs(t), t->msgs[0], t->msgs[1],
		t->msgs[2], t->msgs[3], t->completed, t->incomplete);
	fprintf(out,
		"  retransmitted %" PRIu64 ", duplicates %" PRIu64 ", out-of-sequence %" PRIu64
		", gaps %" PRIu64 ", acks %" PRIu64 ", naks %" PRIu64 ", rnr-naks %" PRIu64
		", cnp %" PRIu64 ", ecn-ce %" PRIu64 ", icrc errors %" PRIu64 ", malformed %" PRIu64
		", truncated %" PRIu64 ", responses without request %" PRIu64 "\n",
		t->retx, t->dups, t->oos, t->gaps, t->acks, t->naks, t->rnr, t->cnps, t->ecn,
		t->icrc, s->frames_by_class[INSP_ROCE_MALFORMED], t->truncated, t->no_request);
	text_latency(out, "  ", &t->lat, NULL);
	if (s->flow_table_full)
		fprintf(out, "  flow table full: %" PRIu64 " packets not attributed\n",
			s->flow_table_full);
}

static void text_tail(FILE *out, const struct insp_state *s, const struct insp_report_opts *o)
{
	if (s->nevents) {
		char w[48], e[384];
		unsigned shown = 0;

		fprintf(out, "\nevents (%u%s):\n", s->nevents, s->events_dropped ? "+" : "");
		for (unsigned i = 0; i < s->nevents && shown < o->max_events; i++, shown++) {
			where_text(&s->events[i], o->nfiles, w, sizeof(w));
			event_text(&s->events[i], e, sizeof(e));
			fprintf(out, "  %s%s: %s\n", s->events[i].violation ? "VIOLATION " : "", w,
				e);
		}
		if (shown < s->nevents || s->events_dropped)
			fprintf(out, "  ... %" PRIu64 " more (use --events N)\n",
				(uint64_t)(s->nevents - shown) + s->events_dropped);
	}
	fprintf(out, "\nviolations %" PRIu64 "\n", s->violations);
}

void insp_report_text(FILE *out, const struct insp_state *s, const struct insp_report_opts *o)
{
	static const struct report_fmt fmt = {text_head, text_conversation, text_totals, text_tail};

	report(out, s, o, &fmt);
}

/* ------------------------------------------------------------------------ */
/* JSON                                                                      */

static void json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

static void json_latency(FILE *out, const struct insp_hist *h, const char *point)
{
	if (!h || !h->n) {
		fprintf(out, "{\"n\": 0");
	} else {
		fprintf(out,
			"{\"n\": %" PRIu64 ", \"min\": %" PRIu64 ", \"p50\": %" PRIu64
			", \"p90\": %" PRIu64 ", \"p99\": %" PRIu64 ", \"max\": %" PRIu64
			", \"mean\": %.0f",
			h->n, h->min, insp_hist_quantile(h, 0.5), insp_hist_quantile(h, 0.9),
			insp_hist_quantile(h, 0.99), h->max, h->sum / (double)h->n);
	}
	if (point)
		fprintf(out, ", \"measured_at\": \"%s\"", point);
	fputc('}', out);
}

static void json_half(FILE *out, const struct insp_state *s, const struct insp_half *h)
{
	char a[48], b[48];
	bool any = false;

	insp_gid_text(h->src, a, sizeof(a));
	insp_gid_text(h->dst, b, sizeof(b));
	fprintf(out, "{\"src\": ");
	json_str(out, a);
	fprintf(out, ", \"dst\": ");
	json_str(out, b);
	fprintf(out, ", \"dqpn\": %u, \"src_qpn\": ", h->dqpn);
	if (src_qpn(h) == INSP_QPN_UNKNOWN)
		fprintf(out, "null");
	else
		fprintf(out, "%u", src_qpn(h));
	fprintf(out, ", \"udp_sport\": %u, \"udp_sport_varies\": %s", h->sport,
		h->sport_varies ? "true" : "false");
	fprintf(out,
		", \"packets\": %" PRIu64 ", \"wire_bytes\": %" PRIu64
		", \"payload_bytes\": %" PRIu64 ", \"first_ns\": %" PRIu64 ", \"last_ns\": %" PRIu64
		", \"payload_mbps\": %.3f",
		h->pkts, h->wire_bytes, h->payload_bytes, h->first_ts, h->last_ts, payload_mbps(h));
	fprintf(out, ", \"opcodes\": [");
	for (unsigned op = 0; op < 256; op++) {
		if (!insp_ops_get(&h->ops, (uint8_t)op))
			continue;
		fprintf(out, "%s{\"opcode\": %u, \"name\": \"%s\", \"count\": %" PRIu64 "}",
			any ? ", " : "", op, insp_op_short((uint8_t)op),
			insp_ops_get(&h->ops, (uint8_t)op));
		any = true;
	}
	fprintf(out, "], \"requests\": %" PRIu64, h->req_pkts);
	if (h->req_seen)
		fprintf(out, ", \"psn_first\": %u, \"psn_last\": %u", h->req_first,
			roce_psn_add(h->req_next, ROCE_PSN_MASK));
	fprintf(out, ", \"messages\": {\"total\": %" PRIu64, half_msgs(h));
	for (unsigned k = 0; k < INSP_MSG_KINDS; k++)
		fprintf(out, ", \"%s\": {\"count\": %" PRIu64 ", \"bytes\": %" PRIu64 "}",
			kind_name(k), h->msgs[k], h->msg_bytes[k]);
	fprintf(out,
		", \"completed\": %" PRIu64 ", \"incomplete\": %" PRIu64 ", \"untracked\": %" PRIu64
		"}",
		h->msgs_completed, h->msgs_incomplete, h->msgs_untracked);
	fprintf(out,
		", \"retransmitted\": %" PRIu64 ", \"duplicates\": %" PRIu64
		", \"out_of_sequence\": %" PRIu64 ", \"reordered\": %" PRIu64 ", \"gaps\": %" PRIu64
		", \"psn_missing\": %" PRIu64 ", \"capture_lost\": %" PRIu64
		", \"gaps_untracked\": %" PRIu64,
		h->retransmitted, h->duplicates, h->out_of_seq, h->reordered, h->gaps_seen,
		h->psn_missing, h->capture_lost, h->gaps_untracked);
	fprintf(out, ", \"acks\": %" PRIu64 ", \"naks\": {\"total\": %" PRIu64, h->acks,
		half_naks(h));
	for (unsigned c = 0; c <= INSP_NAK_CODES; c++)
		fprintf(out, ", \"%s\": %" PRIu64, insp_nak_name(c), h->naks[c]);
	fprintf(out, "}, \"rnr_naks\": {\"total\": %" PRIu64 ", \"timers\": [", h->rnr_naks);
	any = false;
	for (unsigned c = 0; c < 32; c++) {
		if (!h->rnr_timer[c])
			continue;
		fprintf(out, "%s{\"timer\": %u, \"us\": %.0f, \"count\": %" PRIu64 "}",
			any ? ", " : "", c, insp_rnr_timer_us(c), h->rnr_timer[c]);
		any = true;
	}
	fprintf(out,
		"]}, \"read_responses\": %" PRIu64 ", \"atomic_acks\": %" PRIu64
		", \"responses_without_request\": %" PRIu64,
		h->read_resps, h->atomic_acks, h->unmatched_responses);
	fprintf(out,
		", \"cnp\": %" PRIu64 ", \"ecn_ce\": %" PRIu64 ", \"fecn\": %" PRIu64
		", \"becn\": %" PRIu64 ", \"icrc_errors\": %" PRIu64 ", \"malformed\": %" PRIu64
		", \"truncated\": %" PRIu64,
		h->cnps, h->ecn_ce, h->fecn, h->becn, h->icrc_errors, h->malformed, h->truncated);
	fprintf(out, ", \"fault_lost\": %" PRIu64 ", \"latency_ns\": ", h->fault_lost);
	json_latency(out, h->lat, insp_latency_point(s, h));
	fprintf(out, "}");
}

static void json_capture_point(FILE *out, const struct insp_capture_point *cp)
{
	char a[48];

	fprintf(out, " \"capture_point\": ");
	if (!cp->how) {
		fprintf(out, "null,\n");
		return;
	}
	fprintf(out, "{\"how\": ");
	json_str(out, cp->how);
	fprintf(out, ", \"name\": ");
	if (cp->name[0])
		json_str(out, cp->name);
	else
		fprintf(out, "null");
	if (cp->has_mac)
		fprintf(out, ", \"mac\": \"%02x:%02x:%02x:%02x:%02x:%02x\"", cp->mac[0], cp->mac[1],
			cp->mac[2], cp->mac[3], cp->mac[4], cp->mac[5]);
	else
		fprintf(out, ", \"mac\": null");
	fprintf(out, ", \"addresses\": [");
	for (unsigned i = 0; i < cp->n; i++) {
		insp_gid_text(cp->gids[i], a, sizeof(a));
		fprintf(out, "%s", i ? ", " : "");
		json_str(out, a);
	}
	fprintf(out, "]},\n");
}

static void json_head(FILE *out, const struct insp_state *s, const struct insp_report_opts *o)
{
	fprintf(out, "{\"files\": [");
	for (unsigned i = 0; i < o->nfiles; i++) {
		fprintf(out, "%s", i ? ", " : "");
		json_str(out, o->files[i]);
	}
	fprintf(out,
		"],\n \"frames\": {\"total\": %" PRIu64 ", \"roce\": %" PRIu64
		", \"roce_malformed\": %" PRIu64 ", \"non_ip\": %" PRIu64
		", \"ip_not_udp\": %" PRIu64 ", \"udp_other\": %" PRIu64 ", \"too_short\": %" PRIu64
		", \"truncated\": %" PRIu64 ", \"wire_bytes\": %" PRIu64
		", \"duration_ns\": %" PRIu64 ", \"rocemu_records\": %" PRIu64
		", \"lost_by_fault_injector\": %" PRIu64 "},\n",
		s->frames, s->frames_by_class[INSP_ROCE], s->frames_by_class[INSP_ROCE_MALFORMED],
		s->frames_by_class[INSP_NON_IP], s->frames_by_class[INSP_NON_UDP],
		s->frames_by_class[INSP_UDP_OTHER], s->frames_by_class[INSP_SHORT],
		s->truncated_frames, s->wire_bytes, s->ts_valid ? s->last_ts - s->first_ts : 0,
		s->frames_by_class[INSP_RECORD], s->frames_by_class[INSP_LOST]);
	json_capture_point(out, &s->cp);
	fprintf(out, " \"malformed_by_reason\": {");
	for (unsigned r = next_malformed_reason(s, 0), any = 0; r < ROCE_PARSE_STATUS_COUNT;
	     r = next_malformed_reason(s, r))
		fprintf(out, "%s\"%s\": %" PRIu64, any++ ? ", " : "",
			roce_parse_status_name((enum roce_parse_status)r), s->parse_status[r]);
	fprintf(out, "},\n \"conversations\": [");
}

static void json_conversation(FILE *out, const struct conv *c)
{
	fprintf(out,
		"%s\n  {\"id\": %u, \"transport\": \"%s\", \"paired_by\": ", c->n == 1 ? "" : ",",
		c->n, insp_transport_name(conv_transport(c->h)));
	if (c->p)
		json_str(out, c->h->paired_by);
	else if (c->h->self_connected)
		json_str(out, "self");
	else
		fprintf(out, "null");
	fprintf(out, ", \"endpoints\": [{\"ip\": \"%s\", \"qpn\": ", c->a);
	if (src_qpn(c->h) == INSP_QPN_UNKNOWN)
		fprintf(out, "null");
	else
		fprintf(out, "%u", src_qpn(c->h));
	fprintf(out, "}, {\"ip\": \"%s\", \"qpn\": %u}]", c->b, c->h->dqpn);
	fprintf(out, ",\n   \"directions\": [");
	json_half(out, c->s, c->h);
	if (c->p) {
		fprintf(out, ",\n    ");
		json_half(out, c->s, c->p);
	}
	fprintf(out, "]}");
}

static void json_totals(FILE *out, const struct insp_state *s, const struct totals *t)
{
	fprintf(out,
		"],\n \"totals\": {\"conversations\": %" PRIu64 ", \"packets\": %" PRIu64
		", \"payload_bytes\": %" PRIu64 ", \"messages\": {\"total\": %" PRIu64,
		t->conversations, t->pkts, t->payload, totals_msgs(t));
	for (unsigned k = 0; k < INSP_MSG_KINDS; k++)
		fprintf(out, ", \"%s\": {\"count\": %" PRIu64 ", \"bytes\": %" PRIu64 "}",
			kind_name(k), t->msgs[k], t->msg_bytes[k]);
	fprintf(out,
		"}, \"completed\": %" PRIu64 ", \"incomplete\": %" PRIu64
		", \"retransmitted\": %" PRIu64 ", \"duplicates\": %" PRIu64
		", \"out_of_sequence\": %" PRIu64 ", \"gaps\": %" PRIu64 ", \"acks\": %" PRIu64
		", \"naks\": %" PRIu64 ", \"rnr_naks\": %" PRIu64 ", \"cnp\": %" PRIu64
		", \"ecn_ce\": %" PRIu64 ", \"icrc_errors\": %" PRIu64 ", \"malformed\": %" PRIu64
		", \"truncated\": %" PRIu64 ", \"responses_without_request\": %" PRIu64
		", \"fault_lost\": %" PRIu64 ", \"latency_ns\": ",
		t->completed, t->incomplete, t->retx, t->dups, t->oos, t->gaps, t->acks, t->naks,
		t->rnr, t->cnps, t->ecn, t->icrc, s->frames_by_class[INSP_ROCE_MALFORMED],
		t->truncated, t->no_request, t->fault_lost);
	json_latency(out, &t->lat, NULL);
	fprintf(out, "},\n \"events\": [");
}

static void json_tail(FILE *out, const struct insp_state *s, const struct insp_report_opts *o)
{
	char e[384];

	(void)o;
	for (unsigned i = 0; i < s->nevents; i++) {
		const struct insp_event *ev = &s->events[i];

		event_text(ev, e, sizeof(e));
		fprintf(out,
			"%s\n  {\"file\": %u, \"frame\": %" PRIu64
			", \"kind\": \"%s\", \"violation\": %s, "
			"\"conversation\": %u, \"psn\": %u, \"text\": ",
			i ? "," : "", ev->file, ev->frame,
			insp_event_name((enum insp_event_kind)ev->kind),
			ev->violation ? "true" : "false",
			ev->half ? conversation_number(s, ev->half) : 0, ev->psn);
		json_str(out, e);
		if (ev->kind == INSP_EV_RETRANSMIT)
			fprintf(out,
				", \"resent\": %u, \"last_psn\": %u, \"cause\": \"%s\", "
				"\"acknowledged\": %s, \"silence_ns\": %" PRIu64,
				ev->value, ev->psn2, insp_resend_cause_name(ev->cause),
				ev->acked ? "true" : "false", ev->ns);
		fprintf(out, "}");
	}
	fprintf(out, "],\n \"events_not_listed\": %" PRIu64 ",\n \"violations\": %" PRIu64 "}\n",
		s->events_dropped, s->violations);
}

void insp_report_json(FILE *out, const struct insp_state *s, const struct insp_report_opts *o)
{
	static const struct report_fmt fmt = {json_head, json_conversation, json_totals, json_tail};

	report(out, s, o, &fmt);
}
