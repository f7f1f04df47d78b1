/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Neighbours through the kernel's table, for a port beside the kernel on
 * its interface (af_xdp when the kernel owns the port's address): the
 * kernel answers ARP/ND there and rocemu's XDP program passes the answers
 * to it, so rocemu never sees them. rocemu asks the kernel instead, over
 * rtnetlink:
 *  - RTM_GETNEIGH for (interface, address): a usable entry (REACHABLE,
 *    STALE, DELAY, PROBE, PERMANENT, NOARP) gives the MAC;
 *  - no entry, or none usable: RTM_NEWNEIGH with NTF_USE (and NLM_F_CREATE)
 *    makes the kernel resolve it exactly as if it were sending a packet
 *    there (its own ARP request or neighbour solicitation, from its own
 *    address, with its own retries). A STALE entry is used and the same
 *    request has the kernel re-confirm it, as its own traffic would;
 *  - FAILED (the kernel's requests went unanswered): -EHOSTUNREACH for the
 *    port's failure hold time, then the kernel is asked again.
 * Answers are kept in a small cache so that the transmit path makes no
 * system call: a MAC is asked again after KNEIGH_RECHECK_NS, a pending
 * address at most every KNEIGH_PENDING_NS.
 */
#include <errno.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include "port_link.h"

#define KNEIGH_SLOTS	    64
#define KNEIGH_RECHECK_NS   1000000000ull /* a known MAC: ask the kernel again after 1 s */
#define KNEIGH_PENDING_NS   1000000ull	  /* resolving: look again after 1 ms at the soonest */
#define KNEIGH_FAIL_HOLD_NS 3000000000ull

#define NUD_USABLE (NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT | NUD_NOARP)

struct kneigh_entry {
	uint8_t gid[16];
	uint8_t mac[6];
	bool used;
	bool asked;		  /* we asked the kernel to resolve it since its last answer */
	int result;		  /* 0 (mac valid), -EAGAIN, -EHOSTUNREACH */
	uint64_t checked_ns;	  /* last asked the kernel */
	uint64_t failed_until_ns; /* -EHOSTUNREACH until then */
};

struct port_kneigh {
	int fd; /* NETLINK_ROUTE */
	int ifindex;
	uint32_t seq;
	struct kneigh_entry e[KNEIGH_SLOTS];
};

struct kneigh_msg {
	struct nlmsghdr nh;
	struct ndmsg ndm;
	char attrs[64];
};

int port_kneigh_open(struct rocemu_port *port, const char *iface)
{
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
	struct timeval tmo = {.tv_sec = 1}; /* the kernel answers at once */
	struct port_kneigh *k;
	int ifindex = (int)if_nametoindex(iface);

	if (!ifindex)
		return -ENODEV;
	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->ifindex = ifindex;
	k->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (k->fd < 0 || setsockopt(k->fd, SOL_SOCKET, SO_RCVTIMEO, &tmo, sizeof(tmo)) ||
	    bind(k->fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int rc = -errno;

		if (k->fd >= 0)
			close(k->fd);
		free(k);
		return rc;
	}
	port->kneigh = k;
	return 0;
}

void port_kneigh_close(struct rocemu_port *port)
{
	if (!port->kneigh)
		return;
	close(port->kneigh->fd);
	free(port->kneigh);
	port->kneigh = NULL;
}

/* A request for gid on the port's interface, with its NDA_DST. */
static void msg_init(struct port_kneigh *k, struct kneigh_msg *m, uint16_t type, uint16_t flags,
		     const uint8_t gid[16])
{
	bool v4 = port_gid_is_v4(gid);
	unsigned len = v4 ? 4 : 16;
	struct rtattr *rta;

	memset(m, 0, sizeof(*m));
	m->nh.nlmsg_type = type;
	m->nh.nlmsg_flags = (uint16_t)(NLM_F_REQUEST | flags);
	m->nh.nlmsg_seq = ++k->seq;
	m->ndm.ndm_family = v4 ? AF_INET : AF_INET6;
	m->ndm.ndm_ifindex = k->ifindex;
	rta = (struct rtattr *)m->attrs;
	rta->rta_type = NDA_DST;
	rta->rta_len = (unsigned short)RTA_LENGTH(len);
	memcpy(RTA_DATA(rta), v4 ? gid + 12 : gid, len);
	m->nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct ndmsg)) + RTA_ALIGN(rta->rta_len);
}

/*
 * Send m and read the kernel's answer to it: 0 with *state and mac (when
 * it has a link-layer address, else mac untouched and *has_mac false) for
 * a neighbour message, 0 for an ACK, or the kernel's -errno.
 */
static int exchange(struct port_kneigh *k, struct kneigh_msg *m, uint16_t *state, uint8_t mac[6],
		    bool *has_mac)
{
	char buf[1024];
	ssize_t n;

	if (send(k->fd, m, m->nh.nlmsg_len, 0) < 0)
		return -errno;
	for (;;) {
		n = recv(k->fd, buf, sizeof(buf), 0);
		if (n < 0)
			return errno == EINTR ? -EINTR : -errno;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (unsigned)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != m->nh.nlmsg_seq)
				continue; /* an old answer (an interrupted exchange) */
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);

				return h->nlmsg_len >= NLMSG_LENGTH(sizeof(*e)) ? e->error : -EIO;
			}
			if (h->nlmsg_type == RTM_NEWNEIGH &&
			    h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct ndmsg))) {
				const struct ndmsg *ndm = NLMSG_DATA(h);
				int alen = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*ndm)));

				*state = ndm->ndm_state;
				*has_mac = false;
				for (const struct rtattr *a = (const struct rtattr *)(ndm + 1);
				     RTA_OK(a, alen); a = RTA_NEXT(a, alen))
					if (a->rta_type == NDA_LLADDR && RTA_PAYLOAD(a) == 6) {
						memcpy(mac, RTA_DATA(a), 6);
						*has_mac = true;
					}
				return 0;
			}
		}
	}
}

/* Have the kernel resolve gid (or re-confirm it) as for a packet of its own. */
static int kernel_ask(struct rocemu_port *port, struct kneigh_entry *e)
{
	struct port_kneigh *k = port->kneigh;
	struct kneigh_msg m;
	uint16_t state;
	uint8_t mac[6];
	bool has_mac;

	msg_init(k, &m, RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_ACK, e->gid);
	m.ndm.ndm_flags = NTF_USE;
	e->asked = true;
	port_count(port, PC_NEIGH_KERNEL_ASKED);
	return exchange(k, &m, &state, mac, &has_mac);
}

static struct kneigh_entry *entry_for(struct port_kneigh *k, const uint8_t gid[16])
{
	struct kneigh_entry *victim = &k->e[0];

	for (unsigned i = 0; i < KNEIGH_SLOTS; i++) {
		struct kneigh_entry *e = &k->e[i];

		if (e->used && !memcmp(e->gid, gid, 16))
			return e;
		if (!e->used || (victim->used && e->checked_ns < victim->checked_ns))
			victim = e;
	}
	memset(victim, 0, sizeof(*victim));
	memcpy(victim->gid, gid, 16);
	victim->used = true;
	victim->result = -EAGAIN;
	return victim;
}

/* Ask the kernel about e now and note the answer in it. */
static void refresh(struct rocemu_port *port, struct kneigh_entry *e, uint64_t now)
{
	struct port_kneigh *k = port->kneigh;
	struct kneigh_msg m;
	uint16_t state = NUD_NONE;
	uint8_t mac[6];
	bool has_mac = false;
	int was = e->result, rc;

	e->checked_ns = now;
	msg_init(k, &m, RTM_GETNEIGH, 0, e->gid);
	rc = exchange(k, &m, &state, mac, &has_mac);
	if (rc == 0 && (state & NUD_USABLE) && has_mac) {
		memcpy(e->mac, mac, 6);
		e->result = 0;
		e->asked = false;
		if (was != 0)
			port_count(port, PC_ARP_RESOLVED);
		if (state & NUD_STALE)
			(void)kernel_ask(port, e);
		return;
	}
	if (rc == 0 && (state & NUD_FAILED) && e->asked) {
		/* the kernel gave up on our request: hold the failure */
		e->asked = false;
		e->result = -EHOSTUNREACH;
		e->failed_until_ns = now + KNEIGH_FAIL_HOLD_NS;
		port_count(port, PC_ARP_FAILED);
		return;
	}
	/* no entry, resolving, a failure from before our request, or our hold
	 * is over: (re)start the kernel's resolution unless it runs already */
	e->failed_until_ns = 0;
	e->result = -EAGAIN;
	if (rc != 0 || !(state & (NUD_INCOMPLETE | NUD_DELAY | NUD_PROBE)))
		(void)kernel_ask(port, e);
}

int port_kneigh_resolve(struct rocemu_port *port, const uint8_t dst[16], uint8_t mac[6],
			uint64_t now)
{
	struct kneigh_entry *e = entry_for(port->kneigh, dst);
	uint64_t again = e->result == 0 ? KNEIGH_RECHECK_NS : KNEIGH_PENDING_NS;

	if (e->result == -EHOSTUNREACH && now < e->failed_until_ns)
		return -EHOSTUNREACH;
	if (!e->checked_ns || now - e->checked_ns >= again)
		refresh(port, e, now);
	if (e->result == 0)
		memcpy(mac, e->mac, 6);
	return e->result;
}
