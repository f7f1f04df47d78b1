/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rocemu's XDP program for af_xdp ports (compiled with clang -target bpf,
 * loaded and attached by DPDK's af_xdp PMD through its xdp_prog= argument).
 * It hands a frame to the port's AF_XDP socket (xsks_map, by receive queue)
 * only when rocemu must see it, and passes every other frame to the kernel:
 *  - RoCEv2 (UDP destination port 4791, IPv4 or IPv6, at most one 802.1Q
 *    tag) to one of the port's addresses (rocemu_addrs);
 *  - for an address rocemu owns alone (ROCEMU_XDP_ALL): any IP packet to
 *    it, ARP whose target is it, and ND solicitations/advertisements whose
 *    target is it.
 * The rest (the kernel's TCP, its ARP/ND for the addresses it owns, other
 * hosts' traffic) is XDP_PASS. No socket in the map for a queue: XDP_PASS.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "rocemu_xdp.h"

#define ROCE_UDP_PORT 4791
#define ETH_P_VLAN    0x8100
#define IPPROTO_ICMP6 58
#define ND_NS	      135
#define ND_NA	      136

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, ROCEMU_XDP_MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xsks_map SEC(".maps");

struct addr16 {
	__u8 b[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ROCEMU_XDP_MAX_ADDRS);
	__type(key, struct addr16);
	__type(value, __u32);
} rocemu_addrs SEC(".maps");

struct vlan_tag {
	__be16 tci;
	__be16 proto;
};

/* ARP for Ethernet and IPv4 after its fixed header */
struct arp_eth_ip4 {
	__be16 htype, ptype;
	__u8 hlen, plen;
	__be16 op;
	__u8 sha[6], spa[4], tha[6], tpa[4];
} __attribute__((packed));

/* What the port wants of an address: 0 (not one of its), or ROCEMU_XDP_*. */
static __always_inline __u32 owner(const struct addr16 *a)
{
	__u32 *v = bpf_map_lookup_elem(&rocemu_addrs, a);

	return v ? *v : 0;
}

static __always_inline void v4_key(struct addr16 *k, const void *ip4)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->b[10] = 0xff;
	k->b[11] = 0xff;
	__builtin_memcpy(&k->b[12], ip4, 4);
}

static __always_inline int to_rocemu(struct xdp_md *ctx)
{
	return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

static __always_inline int ipv4(struct xdp_md *ctx, void *l3, void *end)
{
	struct iphdr *ip = l3;
	struct addr16 k;
	struct udphdr *udp;
	__u32 who;

	if ((void *)(ip + 1) > end || ip->ihl < 5)
		return XDP_PASS;
	v4_key(&k, &ip->daddr);
	who = owner(&k);
	if (!who)
		return XDP_PASS;
	if (who == ROCEMU_XDP_ALL)
		return to_rocemu(ctx);
	/* a fragment other than the first has no UDP header: not ours */
	if (ip->protocol != IPPROTO_UDP || (ip->frag_off & bpf_htons(0x1fff)))
		return XDP_PASS;
	udp = (void *)ip + ip->ihl * 4;
	if ((void *)(udp + 1) > end || udp->dest != bpf_htons(ROCE_UDP_PORT))
		return XDP_PASS;
	return to_rocemu(ctx);
}

static __always_inline int ipv6(struct xdp_md *ctx, void *l3, void *end)
{
	struct ipv6hdr *ip = l3;
	struct udphdr *udp = (void *)(ip + 1);
	__u8 *icmp = (void *)(ip + 1);
	struct addr16 k;
	__u32 who;

	if ((void *)(ip + 1) > end)
		return XDP_PASS;
	/* ND about one of our addresses goes to its solicited-node group: the
	 * target (after type, code, checksum, flags) says whose it is */
	if (ip->nexthdr == IPPROTO_ICMP6 && (void *)(icmp + 24) <= end &&
	    (icmp[0] == ND_NS || icmp[0] == ND_NA)) {
		__builtin_memcpy(&k, icmp + 8, 16);
		if (owner(&k) == ROCEMU_XDP_ALL)
			return to_rocemu(ctx);
	}
	__builtin_memcpy(&k, &ip->daddr, 16);
	who = owner(&k);
	if (who == ROCEMU_XDP_ALL)
		return to_rocemu(ctx);
	if (who == ROCEMU_XDP_ROCE && ip->nexthdr == IPPROTO_UDP && (void *)(udp + 1) <= end &&
	    udp->dest == bpf_htons(ROCE_UDP_PORT))
		return to_rocemu(ctx);
	return XDP_PASS;
}

static __always_inline int arp(struct xdp_md *ctx, void *l3, void *end)
{
	struct arp_eth_ip4 *a = l3;
	struct addr16 k;

	if ((void *)(a + 1) > end || a->hlen != 6 || a->plen != 4)
		return XDP_PASS;
	v4_key(&k, a->tpa);
	return owner(&k) == ROCEMU_XDP_ALL ? to_rocemu(ctx) : XDP_PASS;
}

SEC("xdp")
int rocemu_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	void *l3 = eth + 1;
	__be16 proto;

	if (l3 > end)
		return XDP_PASS;
	proto = eth->h_proto;
	if (proto == bpf_htons(ETH_P_VLAN)) {
		struct vlan_tag *tag = l3;

		if ((void *)(tag + 1) > end)
			return XDP_PASS;
		proto = tag->proto;
		l3 = tag + 1;
	}
	if (proto == bpf_htons(ETH_P_IP))
		return ipv4(ctx, l3, end);
	if (proto == bpf_htons(ETH_P_IPV6))
		return ipv6(ctx, l3, end);
	if (proto == bpf_htons(ETH_P_ARP))
		return arp(ctx, l3, end);
	return XDP_PASS;
}

char _license[] SEC("license") = "Dual BSD/GPL";
