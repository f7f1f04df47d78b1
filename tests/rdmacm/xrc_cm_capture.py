#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The rdma_cm exchange of an XRC connection (rdma_xclient -c x against
rdma_xserver -c x) as the active host's capture shows it, decoded by tshark's
CM dissector, against the IBA CM chapter (12.6.5 REQ, 12.6.8 REP) as Linux's
CM writes it for XRC:
- the REQ: transport service type 3 with extended transport type 1 (XRC);
  no responder resources, retry counts or SRQ asked of the target (an XRC
  initiator receives nothing); its local QPN is the initiator's;
- the REP: the XRC target's QPN as the local EE context number, local QPN 0,
  SRQ 1, initiator depth 0; its private data starts with the XRC SRQ number
  rdma_xserver sends (big-endian);
- an RTU follows;
- the XRC SEND (opcode 0xA4) goes to the target QP the REP named, its XRCETH
  (read from the frame's bytes: Wireshark 4.0 does not dissect it) names the
  SRQ the REP's private data gave, and the XRC ACK (0xB1) comes back to the
  QPN of the REQ;
- ECE (read from the MADs' bytes: Wireshark 4.0 shows them as reserved): the
  REQ offers rocemu's vendor ID 0xffffff (bytes 5..7 of the REQ) with no
  options (the MAD's attribute modifier), the REP answers with the same
  vendor ID (its bytes 15, 19, 23) and no options.
Usage: xrc_cm_capture.py A.PCAP B.PCAP (B: the client's capture)."""
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "transport"), os.path.join(HERE, "..", "verbs")]
from icrc_check import frames  # noqa: E402
from xrc_wire import bth_offset  # noqa: E402

REQ_FIELDS = ["transpsvctype", "ext_transport", "localqpn", "responderres", "retrcount",
              "rnrretrcount", "srq"]
REP_FIELDS = ["localqpn", "localeecn", "srq", "initdepth", "private"]


def cm_rows(pcap, msg, fields):
    """One dict per CM message msg (req, rep, rtu) in pcap, fields as tshark shows them."""
    cmd = ["tshark", "-n", "-r", pcap, "-Y", "infiniband.cm.%s" % msg, "-T", "fields"]
    for f in fields:
        cmd += ["-e", "infiniband.cm.%s.%s" % (msg, f)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    return [dict(zip(fields, line.split("\t"))) for line in out.splitlines() if line.strip()]


def rtu_count(pcap):
    cmd = ["tshark", "-n", "-r", pcap, "-Y", "infiniband.mad.attributeid == 0x0014", "-T",
           "fields", "-e", "frame.number"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    return len(out.split())


def num(v):
    return int(v, 0) if v.startswith("0x") else int(v)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    pcap = sys.argv[2]
    errors = []
    reqs = cm_rows(pcap, "req", REQ_FIELDS)
    reps = cm_rows(pcap, "rep", REP_FIELDS)
    rtus = rtu_count(pcap)
    print("REQ: %s\nREP: %s\nRTU: %d" % (reqs, [dict(r, private=r["private"][:16]) for r in reps],
                                        rtus))
    if not reqs or not reps or not rtus:
        print("FAIL: expected a REQ, a REP and an RTU in %s" % pcap)
        return 1
    req, rep = reqs[0], reps[0]
    want_req = {"transpsvctype": 3, "ext_transport": 1, "responderres": 0, "retrcount": 0,
                "rnrretrcount": 0, "srq": 0}
    for f, v in want_req.items():
        if num(req[f]) != v:
            errors.append("REQ %s is %s, not %d" % (f, req[f], v))
    ini_qpn = num(req["localqpn"])
    if ini_qpn == 0:
        errors.append("REQ local QPN 0")
    for f, v in {"localqpn": 0, "srq": 1, "initdepth": 0}.items():
        if num(rep[f]) != v:
            errors.append("REP %s is %s, not %d" % (f, rep[f], v))
    tgt_qpn = num(rep["localeecn"])
    if tgt_qpn == 0:
        errors.append("REP local EECN (the XRC target QPN) is 0")
    pdata = bytes.fromhex(rep["private"].replace(":", ""))
    srqn = struct.unpack("!I", pdata[:4])[0] if len(pdata) >= 4 else -1
    sends = acks = 0
    ece = {}
    for n, fr in frames(pcap):
        b = bth_offset(fr)
        if b is None:
            continue
        op, dqp = fr[b], struct.unpack("!I", fr[b + 4:b + 8])[0] & 0xFFFFFF
        if dqp == 1 and op == 0x64:  # UD SEND Only to QP1: a MAD after BTH and DETH
            mad = fr[b + 20:b + 20 + 256]
            attr, mod = struct.unpack("!H", mad[16:18])[0], struct.unpack("!I", mad[20:24])[0]
            cm = mad[24:]
            if attr == 0x10:
                ece["REQ"] = (int.from_bytes(cm[5:8], "big"), mod)
            elif attr == 0x13:
                ece["REP"] = (cm[15] << 16 | cm[19] << 8 | cm[23], mod)
        if op == 0xA4:  # XRC SEND Only
            sends += 1
            xsrq = struct.unpack("!I", fr[b + 12:b + 16])[0] & 0xFFFFFF
            if dqp != tgt_qpn or xsrq != srqn:
                errors.append("frame %d: XRC SEND to QP %#x SRQ %#x, the REP named QP %#x "
                              "and SRQ %#x" % (n, dqp, xsrq, tgt_qpn, srqn))
        elif op == 0xB1:  # XRC Acknowledge
            acks += 1
            if dqp != ini_qpn:
                errors.append("frame %d: XRC ACK to QP %#x, the REQ's QPN is %#x"
                              % (n, dqp, ini_qpn))
    for m in ("REQ", "REP"):
        if ece.get(m) != (0xFFFFFF, 0):
            errors.append("%s ECE (vendor ID, options) is %s, not (0xffffff, 0)" % (m, ece.get(m)))
    if sends == 0 or acks == 0:
        errors.append("%d XRC SEND and %d XRC ACK frames; expected both" % (sends, acks))
    print("ECE (vendor ID, options): %s" % ece)
    print("target QPN %#x, SRQ %#x, initiator QPN %#x: %d XRC SEND, %d XRC ACK"
          % (tgt_qpn, srqn, ini_qpn, sends, acks))
    for e in errors:
        print("FAIL: " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
