/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Steering rules for raw packet QPs (ibv_create_flow(3)), and the privilege
 * both ask for.
 *
 * CAP_NET_RAW. A raw packet QP sends any frame from the port (any source
 * MAC or address) and a rule receives frames of any kind, a sniffer every
 * frame: on an af_packet or af_xdp port that is the program's view of a
 * real, shared Ethernet, the power of a packet socket. The kernel's uverbs
 * asks for CAP_NET_RAW for both (creating an IBV_QPT_RAW_PACKET QP, and
 * ibv_create_flow), and a program must get the same answer from rocemu as
 * from a NIC, so rocemu asks for it too, whatever the port: without
 * CAP_NET_RAW in the effective set both fail with EPERM.
 */
#include <linux/capability.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "provider.h"

bool rocemu_has_cap_net_raw(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct d[2];

	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d) != 0)
		return false;
	return d[CAP_NET_RAW / 32].effective & (1u << (CAP_NET_RAW % 32));
}

static void copy_masked(uint8_t *val, uint8_t *mask, const void *v, const void *m, size_t n)
{
	memcpy(val, v, n);
	memcpy(mask, m, n);
}

/* One spec into the match; 0, or EOPNOTSUPP/EINVAL. */
static int add_spec(const struct ibv_flow_spec *spec, struct rocemu_flow_attr *a)
{
	struct rocemu_flow_match *m = &a->match;

	switch (spec->hdr.type) {
	case IBV_FLOW_SPEC_ETH: {
		const struct ibv_flow_spec_eth *e = &spec->eth;

		if (e->size < sizeof(*e))
			return EINVAL;
		copy_masked(m->dst_mac, m->dst_mac_mask, e->val.dst_mac, e->mask.dst_mac, 6);
		copy_masked(m->src_mac, m->src_mac_mask, e->val.src_mac, e->mask.src_mac, 6);
		m->ether_type = be16toh(e->val.ether_type);
		m->ether_type_mask = be16toh(e->mask.ether_type);
		m->vlan_tag = be16toh(e->val.vlan_tag);
		m->vlan_tag_mask = be16toh(e->mask.vlan_tag);
		return 0;
	}
	case IBV_FLOW_SPEC_IPV4:
	case IBV_FLOW_SPEC_IPV4_EXT: {
		const struct ibv_flow_spec_ipv4_ext *i = &spec->ipv4_ext;
		size_t min = spec->hdr.type == IBV_FLOW_SPEC_IPV4
				 ? sizeof(struct ibv_flow_spec_ipv4)
				 : sizeof(*i);

		if (spec->hdr.size < min)
			return EINVAL;
		m->ip_version = 4;
		if (spec->hdr.type == IBV_FLOW_SPEC_IPV4) {
			const struct ibv_flow_spec_ipv4 *b = &spec->ipv4;

			copy_masked(m->src_ip, m->src_ip_mask, &b->val.src_ip, &b->mask.src_ip, 4);
			copy_masked(m->dst_ip, m->dst_ip_mask, &b->val.dst_ip, &b->mask.dst_ip, 4);
			return 0;
		}
		copy_masked(m->src_ip, m->src_ip_mask, &i->val.src_ip, &i->mask.src_ip, 4);
		copy_masked(m->dst_ip, m->dst_ip_mask, &i->val.dst_ip, &i->mask.dst_ip, 4);
		{
			if (i->mask.tos || i->mask.ttl || i->mask.flags)
				return EOPNOTSUPP; /* only the protocol of the extension */
			m->ip_proto = i->val.proto;
			m->ip_proto_mask = i->mask.proto;
		}
		return 0;
	}
	case IBV_FLOW_SPEC_IPV6: {
		const struct ibv_flow_spec_ipv6 *i = &spec->ipv6;

		if (i->size < sizeof(*i))
			return EINVAL;
		if (i->mask.flow_label || i->mask.traffic_class || i->mask.hop_limit)
			return EOPNOTSUPP;
		m->ip_version = 6;
		copy_masked(m->src_ip, m->src_ip_mask, i->val.src_ip, i->mask.src_ip, 16);
		copy_masked(m->dst_ip, m->dst_ip_mask, i->val.dst_ip, i->mask.dst_ip, 16);
		m->ip_proto = i->val.next_hdr;
		m->ip_proto_mask = i->mask.next_hdr;
		return 0;
	}
	case IBV_FLOW_SPEC_TCP:
	case IBV_FLOW_SPEC_UDP: {
		const struct ibv_flow_spec_tcp_udp *t = &spec->tcp_udp;

		if (t->size < sizeof(*t))
			return EINVAL;
		m->l4 = spec->hdr.type == IBV_FLOW_SPEC_TCP ? IPPROTO_TCP : IPPROTO_UDP;
		m->src_port = be16toh(t->val.src_port);
		m->src_port_mask = be16toh(t->mask.src_port);
		m->dst_port = be16toh(t->val.dst_port);
		m->dst_port_mask = be16toh(t->mask.dst_port);
		return 0;
	}
	case IBV_FLOW_SPEC_ACTION_TAG:
		if (spec->flow_tag.size < sizeof(spec->flow_tag))
			return EINVAL;
		a->has_tag = true;
		a->tag = spec->flow_tag.tag_id;
		return 0;
	case IBV_FLOW_SPEC_ACTION_DROP:
		if (spec->drop.size < sizeof(spec->drop))
			return EINVAL;
		a->drop = true;
		return 0;
	default:
		return EOPNOTSUPP; /* inner headers, tunnels, ESP, MPLS, counters, handles */
	}
}

struct ibv_flow *rocemu_op_create_flow(struct ibv_qp *qp, struct ibv_flow_attr *attr)
{
	struct rocemu_flow_attr a;
	struct rocemu_vflow *f;
	const uint8_t *p;
	int rc;

	if (!qp || !attr || attr->comp_mask || attr->port != 1 ||
	    attr->type > IBV_FLOW_ATTR_SNIFFER) {
		errno = EINVAL;
		return NULL;
	}
	if (qp->qp_type != IBV_QPT_RAW_PACKET) {
		errno = EOPNOTSUPP; /* rules steer to raw packet QPs only */
		return NULL;
	}
	if (attr->flags & ~(uint32_t)IBV_FLOW_ATTR_FLAGS_DONT_TRAP) {
		errno = EOPNOTSUPP; /* egress rules */
		return NULL;
	}
	if (!rocemu_has_cap_net_raw()) {
		errno = EPERM;
		return NULL;
	}
	memset(&a, 0, sizeof(a));
	a.type = (enum rocemu_flow_type)attr->type;
	a.priority = attr->priority;
	/* DONT_TRAP: the QP gets a copy, the port's stack still the frame */
	if (a.type == ROCEMU_FLOW_NORMAL && (attr->flags & IBV_FLOW_ATTR_FLAGS_DONT_TRAP))
		a.type = ROCEMU_FLOW_SNIFFER;
	/* The specs follow the attr packed (4-byte steps, as programs lay them out
	 * in a packed struct): each is copied out before it is read. Their number
	 * is num_of_specs, each its hdr.size long (attr->size is not relied on:
	 * pyverbs, for one, leaves it short, and providers go by the specs). */
	p = (const uint8_t *)(attr + 1);
	for (unsigned i = 0; i < attr->num_of_specs; i++) {
		struct ibv_flow_spec spec;

		memset(&spec, 0, sizeof(spec));
		memcpy(&spec.hdr, p, sizeof(spec.hdr));
		if (spec.hdr.size < sizeof(spec.hdr)) {
			errno = EINVAL;
			return NULL;
		}
		memcpy(&spec, p, spec.hdr.size < sizeof(spec) ? spec.hdr.size : sizeof(spec));
		rc = add_spec(&spec, &a);
		if (rc) {
			errno = rc;
			return NULL;
		}
		p += spec.hdr.size;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		errno = ENOMEM;
		return NULL;
	}
	rc = rocemu_flow_create(((struct rocemu_vqp *)qp)->eqp, &a, &f->eflow);
	if (rc < 0) {
		free(f);
		return rocemu_null_errno(rc);
	}
	f->flow.context = qp->context;
	return &f->flow;
}

int rocemu_op_destroy_flow(struct ibv_flow *flow)
{
	struct rocemu_vflow *f = (struct rocemu_vflow *)flow;
	int rc;

	if (!flow)
		return EINVAL;
	rc = rocemu_flow_destroy(f->eflow);
	if (rc < 0)
		return -rc;
	free(f);
	return 0;
}
