/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer over the inspector's untrusted input: captured frames, of any
 * link type, rocemu's own records (EtherType 0x88B5) included, through the
 * decoder, the conversation analysis, every report and both pictures. The
 * input: one byte chooses the link type, then frames as a 2-byte length
 * (little endian) and its bytes; a frame's wire length may exceed what is
 * there (a snaplen cut).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <pcap/pcap.h>

#include "inspect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int dlts[] = {DLT_EN10MB, DLT_LINUX_SLL, 276 /* SLL2 */, DLT_RAW};
	struct insp_decoder dec = {0};
	struct insp_state s;
	struct insp_frame f;
	size_t off = 1;
	uint64_t n = 0;
	FILE *null;

	if (size < 1 || insp_state_init(&s, true) < 0)
		return 0;
	dec.dlt = dlts[data[0] % 4];
	while (off + 2 <= size) {
		uint32_t len = (uint32_t)data[off] | (uint32_t)data[off + 1] << 8;
		uint32_t cap = len;

		off += 2;
		if (cap > size - off)
			cap = (uint32_t)(size - off);
		memset(&f, 0, sizeof(f));
		insp_decode(&dec, data + off, cap, len, &f);
		f.index = ++n;
		f.ts_ns = n * 1000;
		insp_flow_packet(&s, &f);
		off += cap;
	}
	insp_flow_finish(&s);
	null = fopen("/dev/null", "w");
	if (null) {
		const char *files[] = {"fuzz"};
		struct insp_report_opts ro = {.max_events = 100, .files = files, .nfiles = 1};

		insp_report_text(null, &s, &ro);
		insp_report_json(null, &s, &ro);
		insp_report_violations(null, &s, &ro);
		insp_svg_plot(null, &s);
		fclose(null);
	}
	insp_decoder_free(&dec);
	insp_state_free(&s);
	return 0;
}
