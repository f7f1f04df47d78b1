/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer over `rocemu inspect` as a user runs it on an untrusted file:
 * the input IS the capture file (pcap or pcapng, read by libpcap exactly as
 * the command reads it), handed to rocemu_cmd_inspect with one of its
 * report modes. fuzz_inspect.c fuzzes the decoder and the analysis on
 * frames; this one adds the file formats, the command's own reading loop
 * (timestamps, caplen against len, a file cut mid-record), --packets, the
 * ladder and the plot. Output goes to /dev/null.
 *
 * Input: byte 0 picks the mode (low 3 bits), the rest is the file.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rocemu.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int null_fd = -1;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64];
	char *argv[8];
	int err_fd;
	int argc = 0, fd, out_fd;

	if (size < 1)
		return 0;
	fd = memfd_create("fuzz-capture", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (write(fd, data + 1, size - 1) != (ssize_t)(size - 1)) {
		close(fd);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	argv[argc++] = "inspect";
	switch (data[0] & 7) {
	case 1:
		argv[argc++] = "--json";
		break;
	case 2:
		argv[argc++] = "--packets";
		break;
	case 3:
		argv[argc++] = "--check";
		break;
	case 4:
		argv[argc++] = "--ladder=0x11";
		argv[argc++] = "--svg=/dev/null";
		break;
	case 5:
		argv[argc++] = "--plot";
		argv[argc++] = "--svg=/dev/null";
		break;
	case 6:
		argv[argc++] = "--check";
		argv[argc++] = "--json";
		break;
	default:
		break;
	}
	argv[argc++] = path;
	argv[argc] = NULL;
	if (null_fd < 0)
		null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	fflush(stdout);
	fflush(stderr);
	out_fd = dup(1);
	err_fd = dup(2);
	dup2(null_fd, 1);
	dup2(null_fd, 2);
	(void)rocemu_cmd_inspect(argc, argv);
	fflush(stdout);
	fflush(stderr);
	dup2(out_fd, 1);
	dup2(err_fd, 2);
	close(out_fd);
	close(err_fd);
	close(fd);
	return 0;
}
