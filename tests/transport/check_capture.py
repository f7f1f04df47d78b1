#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Run a transport test with node A capturing, then check the capture:
- tshark dissects every frame without a malformed flag or an expert error,
  and every UDP/4791 frame as InfiniBand;
- every RoCEv2 frame's ICRC verifies, computed here independently with zlib
  from the RoCEv2 annex A17 rules (variant fields masked to ones), and for
  IPv4 frames also with scapy's RoCE layer;
- with --xrc, the XRC frames follow IBA 9.3.8 (xrc_wire.py).
Usage: check_capture.py [--xrc] TEST_BINARY PCAP_PATH
Exits 77 (skipped) when tshark or scapy is missing."""
import os
import shutil
import struct
import subprocess
import sys
import zlib

TSHARK = ["tshark", "-n", "--disable-protocol", "rpcordma",
          "--disable-protocol", "infiniband.eoib"]


def icrc_a17(frame, l3_off, v6):
    """A17.3.3: 8 bytes of ones for the LRH, then IP/UDP/BTH with the variant
    fields set to ones, then the rest of the packet up to the ICRC."""
    p = bytearray(frame[l3_off:])
    if v6:
        p[0] |= 0x0F
        p[1:4] = b"\xff\xff\xff"
        p[7] = 0xFF
        udp = 40
    else:
        p[1] = 0xFF          # TOS
        p[8] = 0xFF          # TTL
        p[10:12] = b"\xff\xff"  # header checksum
        udp = 20
    p[udp + 6:udp + 8] = b"\xff\xff"  # UDP checksum
    p[udp + 8 + 4] = 0xFF             # BTH resv8a
    ip_len = (struct.unpack("!H", p[4:6])[0] + 40) if v6 else struct.unpack("!H", p[2:4])[0]
    p = p[:ip_len]
    crc = zlib.crc32(b"\xff" * 8 + bytes(p[:-4])) & 0xFFFFFFFF
    return struct.pack("<I", crc), bytes(p[-4:])


def main():
    args = sys.argv[1:]
    xrc = args[:1] == ["--xrc"]
    if xrc:
        args = args[1:]
    if len(args) != 2:
        print(__doc__)
        return 2
    binary, pcap = args
    if shutil.which("tshark") is None:
        print("SKIP: tshark is not installed")
        return 77
    try:
        from scapy.all import rdpcap, IP, UDP
        from scapy.contrib.roce import BTH
    except ImportError:
        print("SKIP: scapy is not available")
        return 77
    if os.path.exists(pcap):
        os.unlink(pcap)
    r = subprocess.run([binary, "--capture", pcap], timeout=900)
    if r.returncode == 77:
        return 77
    if r.returncode != 0:
        print(f"FAIL: {binary} exited {r.returncode}")
        return 1

    # Every tshark run must succeed: a filter tshark rejects, or a file it
    # cannot read, prints nothing on stdout and would pass as "no problem".
    # Severity as a number (error = 0x800000), not a name a version may lack.
    def tshark(display_filter):
        r = subprocess.run(TSHARK + ["-r", pcap, "-Y", display_filter],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"tshark -Y '{display_filter}' exited {r.returncode}: "
                               + r.stderr.strip()[:500])
        return r.stdout

    try:
        bad = tshark("_ws.malformed || _ws.expert.severity >= 8388608").strip()
        total = tshark("udp.dstport == 4791").count("\n")
        ib = tshark("udp.dstport == 4791 && infiniband").count("\n")
    except RuntimeError as e:
        print(f"FAIL: {e}")
        return 1
    if bad:
        print("FAIL: tshark reports malformed frames or errors:\n" + bad[:4000])
        return 1
    if total == 0 or ib != total:
        print(f"FAIL: {total} RoCEv2 frames, {ib} dissected as InfiniBand")
        return 1

    frames = rdpcap(pcap)
    checked = v4 = v6 = 0
    for i, f in enumerate(frames, 1):
        raw = bytes(f)
        if len(raw) < 14:
            continue
        et = struct.unpack("!H", raw[12:14])[0]
        if et == 0x0800 and raw[14 + 9] == 17 and struct.unpack("!H", raw[36:38])[0] == 4791:
            want, got = icrc_a17(raw, 14, False)
            if want != got:
                print(f"FAIL: frame {i}: ICRC {got.hex()} != {want.hex()} (IPv4)")
                return 1
            if IP in f and BTH in f:
                p = f[IP]
                scapy_icrc = f[BTH].compute_icrc(bytes(f[BTH]))
                if scapy_icrc != got:
                    print(f"FAIL: frame {i}: scapy ICRC {scapy_icrc.hex()} != {got.hex()}")
                    return 1
            v4 += 1
        elif et == 0x86DD and raw[14 + 6] == 17 and struct.unpack("!H", raw[56:58])[0] == 4791:
            want, got = icrc_a17(raw, 14, True)
            if want != got:
                print(f"FAIL: frame {i}: ICRC {got.hex()} != {want.hex()} (IPv6)")
                return 1
            v6 += 1
        else:
            continue
        checked += 1
    if checked != total:
        print(f"FAIL: checked {checked} ICRCs, tshark saw {total} RoCEv2 frames")
        return 1
    print(f"OK: {total} RoCEv2 frames dissect cleanly; ICRC verified on {v4} IPv4 and {v6} IPv6 frames")
    if xrc:
        import xrc_wire
        errors, summary = xrc_wire.check(pcap, [bytes(f) for f in frames])
        for e in errors:
            print("FAIL:", e)
        if errors:
            return 1
        print("OK:", summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
