# SPDX-License-Identifier: BSD-3-Clause
"""Make the pictures in docs/img/ from crafted captures (reproducible).

usage: make_doc_images.py ROCEMU_BINARY OUTPUT_DIR
Writes inspect-ladder.svg (one RC conversation with a loss, a NAK, a
go-back-N retransmission, a duplicate and an RNR NAK) and inspect-plot.svg
(two RC QPs for 20 ms, with congestion and a loss in the middle), plus the
captures they come from.
"""
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import roce_craft as rc  # noqa: E402

T0 = 1700000000 * 1000000000
US = 1000


def ladder_capture(path):
    c = rc.Conversation("192.168.10.1", "192.168.10.2", qp_a=0x000011, qp_b=0x000012)
    steps = [
        (0, c.req(rc.WRITE_FIRST, 500, bytes(1024), False, rc.reth(length=3072))),
        (2, c.req(rc.WRITE_MIDDLE, 501, bytes(1024))),
        # 502 (WRITE LAST) is lost before the capture point
        (4, c.req(rc.SEND_ONLY, 503, bytes(200), True)),
        (9, c.nak_seq(502, 0)),
        (12, c.req(rc.WRITE_LAST, 502, bytes(1024), True)),
        (14, c.req(rc.SEND_ONLY, 503, bytes(200), True)),
        (20, c.ack(503, 2)),
        (25, c.req(rc.SEND_ONLY, 504, bytes(64), True)),
        (26, c.req(rc.SEND_ONLY, 504, bytes(64), True)),  # duplicated by the network
        (31, c.ack(504, 3)),
        (33, c.ack(504, 3)),
        (40, c.req(rc.SEND_ONLY, 505, bytes(64), True)),
        (45, c.rnr_nak(505, 14, 3)),
        (1330, c.req(rc.SEND_ONLY, 505, bytes(64), True)),
        (1336, c.ack(505, 4)),
        (1340, c.req(rc.READ_REQUEST, 506, b"", True, rc.reth(length=64))),
        (1347, c.resp(rc.READ_RESP_ONLY, 506, 0x1F, 5, bytes(64))),
    ]
    p = rc.Pcap(path)
    for t, dg in steps:
        p.add(rc.ether(dg), T0 + t * US)
    p.close()


def plot_capture(path):
    """Two QPs; the link gets congested between 8 and 14 ms (latency rises),
    and one packet is lost at 11 ms (NAK, retransmission)."""
    events = []
    flows = [
        # (conversation, message bytes, Gbit/s, start us, end us)
        (rc.Conversation("10.0.0.1", "10.0.0.2", 0x100, 0x200, 0xC001), 4096, 6.0, 0, 20000),
        (rc.Conversation("10.0.0.3", "10.0.0.2", 0x101, 0x201, 0xC002), 1024, 2.5, 5000, 17000),
    ]
    for fi, (c, size, gbps, start, end) in enumerate(flows):
        psn, msn = 1000 * (fi + 1), 0
        t = float(start)
        gap = size * 8 / (gbps * 1000)  # us per message
        lost = False
        while t < end:
            # congestion: a queue builds between 8 and 14 ms
            q = 40 * math.sin(math.pi * (t - 8000) / 6000) if 8000 < t < 14000 else 0
            npk = (size + 1023) // 1024
            first = psn
            for k in range(npk):
                op = rc.WRITE_ONLY if npk == 1 else (
                    rc.WRITE_FIRST if k == 0 else rc.WRITE_LAST if k == npk - 1
                    else rc.WRITE_MIDDLE)
                ext = rc.reth(length=size) if op in (rc.WRITE_FIRST, rc.WRITE_ONLY) else b""
                dg = c.req(op, psn, bytes(min(1024, size - 1024 * k)), k == npk - 1, ext)
                tk = t + k * 0.2
                if fi == 0 and not lost and t > 11000 and k == 1:
                    lost = True  # this one never arrives: the rest goes on,
                    # the responder NAKs it, the requester goes back to it
                    for r in range(k + 1, npk):
                        op_r = rc.WRITE_LAST if r == npk - 1 else rc.WRITE_MIDDLE
                        events.append((t + r * 0.2, c.req(op_r, first + r, bytes(1024),
                                                          r == npk - 1)))
                    nak_t = tk + 6 + q
                    events.append((nak_t, c.nak_seq(psn, msn)))
                    for r in range(k, npk):
                        op_r = rc.WRITE_LAST if r == npk - 1 else rc.WRITE_MIDDLE
                        events.append((nak_t + 2 + r * 0.2,
                                       c.req(op_r, first + r, bytes(1024), r == npk - 1)))
                    psn = first + npk
                    break
                events.append((tk, dg))
                psn += 1
            else:
                msn += 1
                events.append((t + npk * 0.2 + 5 + q, c.ack(psn - 1, msn)))
                t += gap
                continue
            msn += 1
            events.append((nak_t + 4 + npk * 0.2, c.ack(psn - 1, msn)))
            t = nak_t + 6
    events.sort(key=lambda e: e[0])
    p = rc.Pcap(path)
    for t, dg in events:
        p.add(rc.ether(dg), T0 + int(t * US))
    p.close()


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    exe, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    lad = os.path.join(out, "inspect-ladder.pcap")
    plo = os.path.join(out, "inspect-plot.pcap")
    ladder_capture(lad)
    plot_capture(plo)
    subprocess.run([exe, "inspect", "--ladder", "0x11", "--svg",
                    os.path.join(out, "inspect-ladder.svg"), lad], check=True)
    subprocess.run([exe, "inspect", "--plot", "--svg", os.path.join(out, "inspect-plot.svg"),
                    plo], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
