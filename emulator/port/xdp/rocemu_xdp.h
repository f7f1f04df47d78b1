/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What rocemu's XDP program (rocemu_xdp.c, compiled for the BPF target) and
 * the af_xdp link (port_link_afxdp.c) agree on: the names of its maps and
 * the meaning of their values.
 */
#ifndef ROCEMU_XDP_H
#define ROCEMU_XDP_H

/* the program (its function's name), and the object file's name */
#define ROCEMU_XDP_PROG_NAME "rocemu_xdp"
#define ROCEMU_XDP_OBJECT    "rocemu_xdp.o"

/* The port's addresses: key 16 bytes (IPv4 as ::ffff:a.b.c.d, as a GID),
 * value one of the ROCEMU_XDP_* below. The name DPDK's PMD needs for the
 * socket map is xsks_map. */
#define ROCEMU_XDP_ADDR_MAP   "rocemu_addrs"
#define ROCEMU_XDP_XSK_MAP    "xsks_map"
#define ROCEMU_XDP_MAX_ADDRS  32
#define ROCEMU_XDP_MAX_QUEUES 64

/* The kernel owns the address too: only RoCEv2 to it goes to rocemu; ARP,
 * ND, ping and everything else stay the kernel's. */
#define ROCEMU_XDP_ROCE 1
/* rocemu owns the address alone: everything to it (RoCEv2, ICMP, any IP),
 * ARP asking for it or answering it, and ND about it goes to rocemu. */
#define ROCEMU_XDP_ALL 2

#ifndef __BPF__
#include <stdint.h>

/* port_xdp_map.c (libbpf, kept apart from libpcap's <pcap/bpf.h>): the
 * map `name` (ROCEMU_XDP_ADDR_MAP, ROCEMU_XDP_XSK_MAP) of rocemu's XDP
 * program attached to ifindex, as a descriptor (-ENOENT: no program or no
 * map, -EBUSY: another program), with how the program is attached
 * ("native", "generic"). */
int rocemu_xdp_map(int ifindex, const char *name, const char **mode);
/* addr: a GID; owner: ROCEMU_XDP_ROCE or ROCEMU_XDP_ALL. 0 or -errno. */
int rocemu_xdp_set_addr(int map_fd, const uint8_t addr[16], uint32_t owner);
/* The AF_XDP socket xsk_fd takes what the program redirects from queue. */
int rocemu_xdp_set_xsk(int map_fd, unsigned queue, int xsk_fd);
#endif

#endif
