#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Verify the ICRC of every RoCEv2 frame in a pcap independently of rocemu's C code.

Every frame (IPv4 and IPv6) is checked with tests/inspect/roce_craft.py's ICRC
(zlib's CRC-32 over the masked pseudo-header of IBA annex A17). That function
is itself cross-checked here against scapy's RoCE layer, a third-party
implementation, on a sample of IPv4 frames spread over the capture (scapy
needs ~1 ms a frame and computes no ICRC for IPv6). Exit 1 on any bad ICRC,
any disagreement with scapy, or a capture without RoCEv2 frames.
Usage: icrc_check.py FILE.pcap... [--scapy-sample N] (per file; default 400; 0 = none)
Several files are checked in one process, so scapy is imported once."""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "inspect"))
import roce_craft  # noqa: E402

ROCE_PORT = 4791


def frames(path):
    """Yield (index, Ethernet frame bytes) from a classic pcap (us or ns)."""
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) < 24:
            raise ValueError("%s: not a pcap file" % path)
        magic = head[:4]
        if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
            endian = "<"
        elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
            endian = ">"
        else:
            raise ValueError("%s: not a classic pcap file (magic %s)" % (path, magic.hex()))
        linktype = struct.unpack(endian + "I", head[20:24])[0]
        if linktype != 1:
            raise ValueError("%s: link type %d, want Ethernet" % (path, linktype))
        i = 0
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            incl = struct.unpack(endian + "IIII", rec)[2]
            yield i, f.read(incl)
            i += 1


def roce_datagram(frame):
    """The IP datagram (Ethernet padding cut off) of a RoCEv2 frame, else None."""
    off = 14
    etype = struct.unpack("!H", frame[12:14])[0] if len(frame) >= 14 else 0
    while etype in (0x8100, 0x88A8) and len(frame) >= off + 4:
        etype = struct.unpack("!H", frame[off + 2:off + 4])[0]
        off += 4
    ip = frame[off:]
    if etype == 0x0800 and len(ip) >= 20 and ip[9] == 17:
        end = struct.unpack("!H", ip[2:4])[0]
        udp = (ip[0] & 0xF) * 4
    elif etype == 0x86DD and len(ip) >= 40 and ip[6] == 17:
        end = 40 + struct.unpack("!H", ip[4:6])[0]
        udp = 40
    else:
        return None
    if len(ip) < end or end < udp + 8 + 12 + 4:
        return None
    if struct.unpack("!H", ip[udp + 2:udp + 4])[0] != ROCE_PORT:
        return None
    return ip[:end]


def scapy_agrees(sample):
    """[(index, frame)] -> list of indexes where scapy computes another ICRC."""
    from scapy.all import Ether
    from scapy.contrib.roce import BTH
    differ = []
    for i, frame in sample:
        pkt = Ether(frame)
        if BTH not in pkt or pkt[BTH].compute_icrc(None) != roce_datagram(frame)[-4:]:
            differ.append(i)
    return differ


def check_file(path, want_sample):
    """Check one capture; returns True when it passes."""
    good, bad, v4 = 0, [], []
    for i, frame in frames(path):
        dg = roce_datagram(frame)
        if dg is None:
            continue
        if roce_craft.icrc_ok(dg):
            good += 1
        else:
            bad.append(i + 1)
        if dg[0] >> 4 == 4:
            v4.append((i + 1, frame))
    sample = v4
    if want_sample and len(v4) > want_sample:
        head = want_sample // 4  # the first frames (connection set-up) and a stride after
        stride = (len(v4) - head) / (want_sample - head)
        sample = v4[:head] + [v4[head + int(k * stride)] for k in range(want_sample - head)]
    elif not want_sample:
        sample = []
    differ = []
    if sample:
        try:
            differ = scapy_agrees(sample)
        except ImportError:
            print("note: scapy missing, no third-party cross-check")
            sample = []
    print("ICRC: %d good, %d bad of %d RoCEv2 frames (zlib, every frame); "
          "scapy agrees on %d of %d sampled IPv4 frames, in %s"
          % (good, len(bad), good + len(bad), len(sample) - len(differ), len(sample), path))
    if bad:
        print("bad ICRC in frames %s" % bad[:10])
    if differ:
        print("scapy computes another ICRC for frames %s" % differ[:10])
    return not (bad or differ or not good)


def main(argv):
    args = argv[1:]
    want_sample = 400
    if "--scapy-sample" in args:
        k = args.index("--scapy-sample")
        want_sample = int(args[k + 1])
        del args[k:k + 2]
    if not args:
        print(__doc__)
        return 2
    ok = True
    for path in args:
        ok = check_file(path, want_sample) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
