# SPDX-License-Identifier: BSD-3-Clause
"""Write a large synthetic RoCEv2 capture for bench/inspect_memory.sh.

usage: inspect_gen.py OUT.pcap MEGABYTES [QPS]
RC WRITEs of 4096 bytes (FIRST/MIDDLE/MIDDLE/LAST at PMTU 1024) and their
ACKs, round robin over QPS queue pairs, 2 us apart, every ICRC right. The
frames are built once per QP and only the PSN, MSN and ICRC change.
"""
import os
import struct
import sys
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "inspect"))
import roce_craft as rc  # noqa: E402


def main():
    out, mb = sys.argv[1], int(sys.argv[2])
    nqp = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    target = mb << 20
    convs = [rc.Conversation("10.1.%d.1" % (q // 250), "10.2.%d.2" % (q % 250),
                             0x100 + q, 0x800 + q, 0xC000 + q) for q in range(nqp)]
    templates = []
    for c in convs:
        t = [c.req(rc.WRITE_FIRST, 0, bytes(1024), False, rc.reth(length=4096)),
             c.req(rc.WRITE_MIDDLE, 0, bytes(1024)), c.req(rc.WRITE_MIDDLE, 0, bytes(1024)),
             c.req(rc.WRITE_LAST, 0, bytes(1024), True), c.ack(0, 0)]
        templates.append([bytearray(rc.ether(d)) for d in t])
    psn = [q * 1000 for q in range(nqp)]
    msn = [0] * nqp
    ts = 1700000000 * 1000000000
    written = 0
    rec = struct.Struct("<IIII")
    with open(out, "wb", buffering=1 << 20) as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
        written = 24
        q = 0
        while written < target:
            tpl = templates[q]
            msn[q] += 1
            for k, frame in enumerate(tpl):
                p = psn[q] + (k if k < 4 else 3)
                frame[14 + 20 + 8 + 9:14 + 20 + 8 + 12] = (p & 0xFFFFFF).to_bytes(3, "big")
                if k == 4:
                    frame[14 + 20 + 8 + 13:14 + 20 + 8 + 16] = msn[q].to_bytes(3, "big")
                ip_len = struct.unpack_from("!H", frame, 16)[0]
                dg = frame[14:14 + ip_len]
                frame[14 + ip_len - 4:14 + ip_len] = rc.icrc(bytes(dg[:-4]))
                ts += 2000 if k < 4 else 6000
                f.write(rec.pack(ts // 1000000000, ts % 1000000000, len(frame), len(frame)))
                f.write(frame)
                written += 16 + len(frame)
            psn[q] = (psn[q] + 4) & 0xFFFFFF
            q = (q + 1) % nqp
    print("%s: %d MB, %d QPs" % (out, written >> 20, nqp))


if __name__ == "__main__":
    main()
