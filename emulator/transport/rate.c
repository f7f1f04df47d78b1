/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Send rate limits (issue 15.4): a token bucket per QP in front of the
 * requester, as a NIC's packet pacing does. Three ways set it, all with the
 * rate in kbit/s:
 *   - ibv_modify_qp with IBV_QP_RATE_LIMIT (attr.rate_limit; RTR/RTS/SQD -> RTS),
 *   - ibv_modify_qp_rate_limit (rate_limit, max_burst_sz, typical_pkt_sz),
 *   - the static rate of a connected QP's address vector (IBA 9.11, "static
 *     rate control": ah_attr.static_rate, an enum ibv_rate; 0 = port rate),
 *     when it is below the link's speed.
 * The bucket holds at most `burst` bytes of credit (one path MTU's frame when
 * not given); a packet leaves while there is credit for it (a packet larger
 * than the bucket leaves from a full bucket), and takes its frame's bytes off,
 * which may leave the credit below zero. A QP without credit sends nothing
 * until rate.until_ns, when the engine's timer heap wakes it; its ACKs and
 * responses are not limited (they are the peer's traffic's).
 *
 * Credit is kept in units of 1/8,000,000 byte: a rate of R kbit/s earns R units
 * a nanosecond, so refills are integers with no rounding drift.
 */
#include <errno.h>

#include "rocemu_transport.h"

#define UNITS_PER_BYTE 8000000ll
/* Bytes a RoCEv2 frame adds to its payload: Ethernet 14 + FCS 4, IPv4 20,
 * UDP 8, BTH 12, ICRC 4 (the wire's, so a capture shows the rate set); IPv6
 * adds 20; the callers add the extended headers. No VLAN tag counted. */
#define FRAME_OVERHEAD 62u

static uint32_t default_burst(const struct rocemu_qp *qp)
{
	return (qp->mtu ? qp->mtu : 4096) + FRAME_OVERHEAD;
}

static int set_locked(struct rocemu_qp *qp, uint32_t kbps, uint32_t burst)
{
	if (kbps > ROCEMU_RATE_MAX_KBPS || burst > ROCEMU_RATE_MAX_BURST)
		return -EINVAL;
	qp->rate.kbps = kbps;
	qp->rate.burst = burst;
	qp->rate.last_ns = 0; /* the next packet finds a full bucket */
	qp->rate.until_ns = 0;
	return 0;
}

int rocemu_rate_set(struct rocemu_qp *qp, uint32_t kbps, uint32_t burst)
{
	qp->rate.from_av = false;
	return set_locked(qp, kbps, burst);
}

/* enum ibv_rate in Mbit/s (IBA 9.11.1's table; ibv_rate_to_mbps(3)). */
static uint32_t ibv_rate_mbps(uint8_t r)
{
	static const uint32_t mbps[] = {
	    [IBV_RATE_2_5_GBPS] = 2500,	    [IBV_RATE_5_GBPS] = 5000,
	    [IBV_RATE_10_GBPS] = 10000,	    [IBV_RATE_20_GBPS] = 20000,
	    [IBV_RATE_30_GBPS] = 30000,	    [IBV_RATE_40_GBPS] = 40000,
	    [IBV_RATE_60_GBPS] = 60000,	    [IBV_RATE_80_GBPS] = 80000,
	    [IBV_RATE_120_GBPS] = 120000,   [IBV_RATE_14_GBPS] = 14062,
	    [IBV_RATE_56_GBPS] = 56250,	    [IBV_RATE_112_GBPS] = 112500,
	    [IBV_RATE_168_GBPS] = 168750,   [IBV_RATE_25_GBPS] = 25781,
	    [IBV_RATE_100_GBPS] = 103125,   [IBV_RATE_200_GBPS] = 206250,
	    [IBV_RATE_300_GBPS] = 309375,   [IBV_RATE_28_GBPS] = 28125,
	    [IBV_RATE_50_GBPS] = 53125,	    [IBV_RATE_400_GBPS] = 425000,
	    [IBV_RATE_600_GBPS] = 637500,   [IBV_RATE_800_GBPS] = 850000,
	    [IBV_RATE_1200_GBPS] = 1275000,
	};
	return r < sizeof(mbps) / sizeof(mbps[0]) ? mbps[r] : 0;
}

bool rocemu_rate_valid_static(uint8_t static_rate)
{
	return static_rate == IBV_RATE_MAX || ibv_rate_mbps(static_rate) != 0;
}

/*
 * The inter-packet delay of IBA 9.11 is 0 when the static rate is at least the
 * port's: only a static rate below the link's speed (or any, when the link
 * does not say its speed) limits the QP.
 */
void rocemu_rate_from_av(struct rocemu_qp *qp, uint8_t static_rate, uint32_t port_mbps)
{
	uint32_t mbps = ibv_rate_mbps(static_rate);

	if (qp->rate.kbps && !qp->rate.from_av)
		return; /* a rate limit set explicitly stays */
	if (port_mbps && mbps >= port_mbps)
		mbps = 0;
	(void)set_locked(qp, mbps * 1000u, 0);
	qp->rate.from_av = mbps != 0;
}

bool rocemu_rate_take(struct rocemu_qp *qp, uint32_t payload, uint64_t now)
{
	int64_t rate = qp->rate.kbps, cap, need;
	uint32_t frame = payload + FRAME_OVERHEAD + (qp->path.v6 ? 20 : 0);

	if (!rate)
		return true;
	cap = (int64_t)(qp->rate.burst ? qp->rate.burst : default_burst(qp)) * UNITS_PER_BYTE;
	need = (int64_t)frame * UNITS_PER_BYTE;
	if (qp->rate.last_ns == 0 || now - qp->rate.last_ns >= (uint64_t)(cap / rate) + 1) {
		qp->rate.credit = cap;
	} else {
		qp->rate.credit += (int64_t)(now - qp->rate.last_ns) * rate;
		if (qp->rate.credit > cap)
			qp->rate.credit = cap;
	}
	qp->rate.last_ns = now;
	if (qp->rate.credit >= (need < cap ? need : cap)) {
		qp->rate.credit -= need;
		return true;
	}
	int64_t missing = (need < cap ? need : cap) - qp->rate.credit;
	qp->rate.until_ns = now + (uint64_t)((missing + rate - 1) / rate);
	ENGINE_COUNT(qp->engine, rate_limit_waits);
	return false;
}

/*
 * After the credit for a packet was taken: would a full-MTU packet now wait?
 * The requester then asks for an ACK on the packet that leaves before the
 * wait, or the peer holds its coalesced ACK through the whole wait and the
 * completer's stall probe resends packets that were not lost.
 */
bool rocemu_rate_will_wait(const struct rocemu_qp *qp)
{
	uint32_t frame = (qp->mtu ? qp->mtu : 4096) + FRAME_OVERHEAD;

	return qp->rate.kbps && qp->rate.credit < (int64_t)frame * UNITS_PER_BYTE;
}

unsigned rocemu_rate_timer(struct rocemu_qp *qp, uint64_t now)
{
	if (!qp->rate.until_ns || now < qp->rate.until_ns)
		return 0;
	qp->rate.until_ns = 0;
	return 1;
}
