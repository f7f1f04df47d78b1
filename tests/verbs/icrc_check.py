#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Verify the ICRC of every RoCEv2 frame in a pcap independently of rocemu:
scapy's RoCE layer recomputes it (IPv4; scapy 2.5 computes none for IPv6,
those frames are counted as unchecked). Exit 1 on any mismatch."""
import sys

from scapy.all import PcapReader, Ether, IP, UDP, raw
from scapy.contrib.roce import BTH


MAX_FRAMES = 5000  # scapy is slow (~100 frames/s for 4 KiB frames): a sample suffices


def main(path):
    good = bad = unchecked = 0
    for i, pkt in enumerate(PcapReader(path)):
        if i == MAX_FRAMES:
            break
        if not pkt.haslayer(UDP) or pkt[UDP].dport != 4791:
            continue
        if not pkt.haslayer(IP):
            unchecked += 1
            continue
        wire = raw(pkt)
        again = Ether(wire)
        del again[BTH].icrc
        if raw(again)[-4:] == wire[-4:]:
            good += 1
        else:
            bad += 1
            if bad <= 3:
                print('bad ICRC: %s' % pkt.summary())
    print('ICRC (scapy): %d good, %d bad, %d unchecked (IPv6) in %s' % (good, bad, unchecked, path))
    return 1 if bad or not good else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1]))
