#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Run the XRC transport test with node A capturing, then check the XRC
frames against IBA 9.3.8 (tshark names the opcodes; Wireshark 4.0 does not
dissect the XRCETH, so its bytes are read here):
- every request of the XRC opcode space (0xA0..) carries the XRCETH right
  after the BTH: reserved byte 0, then the 24-bit XRC SRQ number;
- responses (READ responses, ACK, ATOMIC ACK) carry none: their AETH
  follows the BTH (its syndrome a valid ACK/NAK code);
- tshark calls every such frame "Extended Reliable Connection (XRC)";
- two target QPs were sent to with the same SRQ number (two XRC_SEND QPs
  into one XRC SRQ), and an invalid-request NAK answered the request that
  named an SRQ of another domain.
Usage: xrc_capture.py TEST_BINARY PCAP_PATH
Exits 77 (skipped) when tshark is missing."""
import os
import shutil
import struct
import subprocess
import sys

XRC_RESPONSES = range(0xAD, 0xB3)   # READ response First .. ATOMIC Acknowledge


def frames(path):
    """(number, frame bytes) of a classic pcap file."""
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack("<I", data[:4])[0]
    end = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    off, n = 24, 0
    while off + 16 <= len(data):
        incl = struct.unpack(end + "I", data[off + 8:off + 12])[0]
        n += 1
        yield n, data[off + 16:off + 16 + incl]
        off += 16 + incl


def bth_offset(fr):
    """Offset of the BTH of a RoCEv2 frame (Ethernet, one optional VLAN tag), or None."""
    eth = struct.unpack("!H", fr[12:14])[0]
    l3 = 14
    if eth == 0x8100:
        eth = struct.unpack("!H", fr[16:18])[0]
        l3 = 18
    if eth == 0x0800 and fr[l3 + 9] == 17:
        udp = l3 + (fr[l3] & 0xF) * 4
    elif eth == 0x86DD and fr[l3 + 6] == 17:
        udp = l3 + 40
    else:
        return None
    if struct.unpack("!H", fr[udp + 2:udp + 4])[0] != 4791:
        return None
    return udp + 8


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    binary, pcap = sys.argv[1], sys.argv[2]
    if shutil.which("tshark") is None:
        print("SKIP: tshark is not installed")
        return 77
    if os.path.exists(pcap):
        os.unlink(pcap)
    r = subprocess.run([binary, "--capture", pcap], timeout=600)
    if r.returncode != 0:
        print("FAIL: %s exited %d" % (binary, r.returncode))
        return 1
    errors = []
    xrc = {}          # frame number -> opcode
    srq_qps = {}      # SRQ number -> destination QPs of requests naming it
    naks = 0
    for n, fr in frames(pcap):
        b = bth_offset(fr)
        if b is None or fr[b] < 0xA0 or fr[b] > 0xBF:
            continue
        op, dqp = fr[b], struct.unpack("!I", fr[b + 4:b + 8])[0] & 0xFFFFFF
        xrc[n] = op
        if op in XRC_RESPONSES:
            syndrome = fr[b + 12]
            if syndrome >> 5 not in (0, 1, 3):
                errors.append("frame %d: response opcode %#x without an AETH (syndrome %#x)"
                              % (n, op, syndrome))
            if syndrome == 0x61:   # NAK, invalid request
                naks += 1
            continue
        if fr[b + 12] != 0:
            errors.append("frame %d: XRCETH reserved byte %#x" % (n, fr[b + 12]))
        srqn = struct.unpack("!I", fr[b + 12:b + 16])[0] & 0xFFFFFF
        srq_qps.setdefault(srqn, set()).add(dqp)
    if not xrc:
        errors.append("no XRC frame in the capture")
    # tshark's names for the same frames
    out = subprocess.run(["tshark", "-n", "-r", pcap, "-T", "fields", "-e", "frame.number",
                          "-e", "infiniband.bth.opcode", "-Y", "infiniband.bth.opcode >= 160"],
                         capture_output=True, text=True, timeout=300).stdout
    named = {int(l.split()[0]) for l in out.splitlines() if l.strip()}
    if named != set(xrc):
        errors.append("tshark and the raw bytes disagree on which frames are XRC: %s"
                      % sorted(named ^ set(xrc))[:5])
    verbose = subprocess.run(["tshark", "-n", "-r", pcap, "-V", "-Y",
                              "infiniband.bth.opcode >= 160"],
                             capture_output=True, text=True, timeout=300).stdout
    names = verbose.count("Opcode: Extended Reliable Connection (XRC)")
    if names != len(xrc):
        errors.append("tshark names %d of %d XRC frames as XRC" % (names, len(xrc)))
    if "Malformed" in verbose:
        errors.append("tshark reports a malformed XRC frame")
    if not any(len(q) >= 2 for q in srq_qps.values()):
        errors.append("no SRQ number was named towards two target QPs: %s" % srq_qps)
    if naks < 2:
        errors.append("%d invalid-request NAKs, expected one per bad SRQ number (2)" % naks)
    for e in errors:
        print("FAIL:", e)
    if errors:
        return 1
    print("OK: %d XRC frames (%d requests with an XRCETH, SRQ numbers %s); %d NAKs"
          % (len(xrc), sum(1 for o in xrc.values() if o not in XRC_RESPONSES),
             sorted(srq_qps), naks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
