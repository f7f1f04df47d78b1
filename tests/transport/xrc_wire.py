# SPDX-License-Identifier: BSD-3-Clause
"""The XRC frames of a capture against IBA 9.3.8 (tshark names the opcodes;
Wireshark 4.0 does not dissect the XRCETH, so its bytes are read here):
- every request of the XRC opcode space (0xA0..) carries the XRCETH right
  after the BTH: reserved byte 0, then the 24-bit XRC SRQ number;
- responses (READ responses, ACK, ATOMIC ACK) carry none: their AETH
  follows the BTH (its syndrome a valid ACK/NAK code);
- tshark calls every such frame "Extended Reliable Connection (XRC)";
- two target QPs were sent to with the same SRQ number (two XRC_SEND QPs
  into one XRC SRQ), and an invalid-request NAK answered the request that
  named an SRQ of another domain.
check_capture.py --xrc runs these on the XRC transport test's capture."""
import struct
import subprocess

XRC_RESPONSES = range(0xAD, 0xB3)   # READ response First .. ATOMIC Acknowledge


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


def check(pcap, frames):
    """The XRC rules over frames (the capture's frames as bytes, in order):
    (a list of what fails, a summary)."""
    errors = []
    xrc = {}          # frame number -> opcode
    srq_qps = {}      # SRQ number -> destination QPs of requests naming it
    naks = 0
    for n, fr in enumerate(frames, 1):
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
    summary = ("%d XRC frames (%d requests with an XRCETH, SRQ numbers %s); %d NAKs"
               % (len(xrc), sum(1 for o in xrc.values() if o not in XRC_RESPONSES),
                  sorted(srq_qps), naks))
    return errors, summary
