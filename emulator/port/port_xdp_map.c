/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The address map of rocemu's XDP program (xdp/rocemu_xdp.c) once DPDK's
 * af_xdp PMD has loaded and attached it: found from the interface (the
 * program attached there, checked by name, and its map by name), since the
 * PMD keeps the libbpf object to itself. A file of its own: <bpf/bpf.h>
 * brings the kernel's struct bpf_insn, which libpcap's <pcap/bpf.h> (in
 * port_internal.h) defines again.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <linux/if_link.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "xdp/rocemu_xdp.h"

#define MAX_MAPS 8

int rocemu_xdp_map(int ifindex, const char *name, const char **mode)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);
	struct bpf_prog_info pinfo;
	uint32_t ids[MAX_MAPS], plen = sizeof(pinfo);
	int pfd, rc;

	if (ifindex <= 0)
		return -ENODEV;
	rc = bpf_xdp_query(ifindex, 0, &q);
	if (rc)
		return rc < 0 ? rc : -EIO;
	if (!q.prog_id)
		return -ENOENT;
	*mode = q.attach_mode == XDP_ATTACHED_DRV   ? "native"
		: q.attach_mode == XDP_ATTACHED_SKB ? "generic"
						    : "offloaded";
	pfd = bpf_prog_get_fd_by_id(q.prog_id);
	if (pfd < 0)
		return -errno;
	memset(&pinfo, 0, sizeof(pinfo));
	pinfo.nr_map_ids = MAX_MAPS;
	pinfo.map_ids = (uint64_t)(uintptr_t)ids;
	rc = bpf_obj_get_info_by_fd(pfd, &pinfo, &plen) ? -errno : 0;
	close(pfd);
	if (rc)
		return rc;
	if (strcmp(pinfo.name, ROCEMU_XDP_PROG_NAME))
		return -EBUSY;
	for (uint32_t i = 0; i < pinfo.nr_map_ids && i < MAX_MAPS; i++) {
		struct bpf_map_info minfo;
		uint32_t mlen = sizeof(minfo);
		int fd = bpf_map_get_fd_by_id(ids[i]);

		if (fd < 0)
			continue;
		memset(&minfo, 0, sizeof(minfo));
		if (!bpf_obj_get_info_by_fd(fd, &minfo, &mlen) && !strcmp(minfo.name, name))
			return fd;
		close(fd);
	}
	return -ENOENT;
}

int rocemu_xdp_set_addr(int map_fd, const uint8_t addr[16], uint32_t owner)
{
	return bpf_map_update_elem(map_fd, addr, &owner, BPF_ANY) ? -errno : 0;
}

int rocemu_xdp_set_xsk(int map_fd, unsigned queue, int xsk_fd)
{
	uint32_t key = queue, val = (uint32_t)xsk_fd;

	return bpf_map_update_elem(map_fd, &key, &val, BPF_ANY) ? -errno : 0;
}
