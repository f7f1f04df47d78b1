/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Capture tap (ARCHITECTURE §5): every frame sent, received or looped back
 * goes to a pcap file written by libpcap, with nanosecond timestamps, an
 * optional BPF filter compiled by libpcap and applied with
 * pcap_offline_filter, and size-bounded rotation: FILE, then FILE.1, FILE.2,
 * ... each at most capture_rotate_bytes (one frame over, at most). With
 * capture off the data path tests one pointer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "port_internal.h"

#define SNAPLEN	      65535
#define PCAP_FILE_HDR 24
#define PCAP_REC_HDR  16

static int open_file(struct rocemu_port *port, char *err, size_t errlen)
{
	struct port_capture *c = port->capture;
	char path[ROCEMU_PATH_MAX + 16];

	if (c->file_index == 0)
		snprintf(path, sizeof(path), "%s", port->cfg.capture_path);
	else
		snprintf(path, sizeof(path), "%s.%u", port->cfg.capture_path, c->file_index);
	c->dumper = pcap_dump_open(c->dead, path);
	if (!c->dumper) {
		if (err)
			snprintf(err, errlen, "--capture %s: %s", path, pcap_geterr(c->dead));
		return -EIO;
	}
	c->file_bytes = PCAP_FILE_HDR;
	port_count(port, PC_CAPTURE_FILES);
	return 0;
}

int port_capture_open(struct rocemu_port *port, char *err, size_t errlen)
{
	struct port_capture *c;
	int rc;

	if (!port->cfg.capture_path[0])
		return 0;
	c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	c->dead =
	    pcap_open_dead_with_tstamp_precision(DLT_EN10MB, SNAPLEN, PCAP_TSTAMP_PRECISION_NANO);
	if (!c->dead) {
		free(c);
		snprintf(err, errlen, "libpcap: cannot open a capture handle");
		return -ENOMEM;
	}
	if (port->cfg.capture_filter[0]) {
		if (pcap_compile(c->dead, &c->prog, port->cfg.capture_filter, 1,
				 PCAP_NETMASK_UNKNOWN)) {
			snprintf(err, errlen, "--capture-filter '%s': %s", port->cfg.capture_filter,
				 pcap_geterr(c->dead));
			pcap_close(c->dead);
			free(c);
			return -EINVAL;
		}
		c->has_filter = true;
	}
	port->capture = c;
	rc = open_file(port, err, errlen);
	if (rc) {
		port->capture = NULL;
		if (c->has_filter)
			pcap_freecode(&c->prog);
		pcap_close(c->dead);
		free(c);
	}
	return rc;
}

static void rotate(struct rocemu_port *port)
{
	struct port_capture *c = port->capture;

	pcap_dump_close(c->dumper);
	c->dumper = NULL;
	c->file_index++;
	if (open_file(port, NULL, 0))
		port_count_drop(port, "capture_open_failed");
}

void port_capture_frame(struct rocemu_port *port, const struct rte_mbuf *m)
{
	struct port_capture *c = port->capture;
	struct pcap_pkthdr hdr;
	struct timespec ts;
	const uint8_t *data;
	uint32_t caplen;

	if (!c->dumper)
		return;
	caplen = m->pkt_len < SNAPLEN ? m->pkt_len : SNAPLEN;
	if (m->nb_segs == 1) {
		data = rte_pktmbuf_mtod(m, const uint8_t *);
	} else {
		if (caplen > sizeof(c->scratch))
			caplen = sizeof(c->scratch);
		data = rte_pktmbuf_read(m, 0, caplen, c->scratch);
		if (!data)
			return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	hdr.ts.tv_sec = ts.tv_sec;
	hdr.ts.tv_usec = ts.tv_nsec; /* nanoseconds: the dead handle has nano precision */
	hdr.caplen = caplen;
	hdr.len = m->pkt_len;
	if (c->has_filter && !pcap_offline_filter(&c->prog, &hdr, data)) {
		port_count(port, PC_CAPTURE_FILTERED);
		return;
	}
	if (port->cfg.capture_rotate_bytes && c->file_bytes > PCAP_FILE_HDR &&
	    c->file_bytes + PCAP_REC_HDR + caplen > port->cfg.capture_rotate_bytes) {
		rotate(port);
		if (!c->dumper)
			return;
	}
	pcap_dump((u_char *)c->dumper, &hdr, data);
	c->file_bytes += PCAP_REC_HDR + caplen;
	port_count(port, PC_CAPTURE_FRAMES);
}

void port_capture_flush(struct rocemu_port *port)
{
	if (port->capture && port->capture->dumper)
		pcap_dump_flush(port->capture->dumper);
}

void port_capture_close(struct rocemu_port *port)
{
	struct port_capture *c = port->capture;

	if (!c)
		return;
	port->capture = NULL;
	if (c->dumper) {
		pcap_dump_flush(c->dumper);
		pcap_dump_close(c->dumper);
	}
	if (c->has_filter)
		pcap_freecode(&c->prog);
	pcap_close(c->dead);
	free(c);
}
