# SPDX-License-Identifier: BSD-3-Clause
"""rocemu inspect on the Linux Soft-RoCE captures shipped in pcaps/rxe.

For every capture:
 - per-opcode packet counts equal tshark's (infiniband.bth.opcode);
 - the ICRC verdict of every frame equals an independent check (scapy's
   RoCE layer recomputes the ICRC);
 - the messages equal what the program that made the capture did
   (pcaps/README.md), and equal what tshark's opcodes imply;
 - --check passes (the README says every ICRC is right and nothing is lost).
Fails when the captures are missing (they are part of the repository);
skips (77) when tshark or scapy are missing.
"""
import collections
import glob
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inspect_testlib import check, rocemu, skip, verdict  # noqa: E402

CLIENT, SERVER = "10.99.0.12", "10.99.0.11"

# What each program did (pcaps/README.md), per sending host:
# {kind: (messages, bytes in all)}. The reasoning, from the perftest and
# ibverbs-utils sources' behaviour:
#  - ibv_rc_pingpong -n 10: both sides post 10 SENDs of the default 4096
#    bytes (ping and pong): 10 SEND messages each way, 40960 bytes.
#  - ibv_ud_pingpong -s 512 -n 10: 10 UD SENDs of 512 bytes each way.
#  - ib_write_bw -s 2500 -n 5: the client writes 5 times 2500 bytes; the
#    server only ACKs.
#  - ib_read_lat -s 64 -n 10: the client reads 64 bytes 10 times.
#  - ib_atomic_bw -n 5 (FETCH_ADD by default): 5 atomics of 8 bytes.
EXPECTED = {
    "rxe-rc-pingpong.pcap": {CLIENT: {"SEND": (10, 40960)}, SERVER: {"SEND": (10, 40960)}},
    "rxe-ud-pingpong.pcap": {CLIENT: {"SEND": (10, 5120)}, SERVER: {"SEND": (10, 5120)}},
    "rxe-write-bw.pcap": {CLIENT: {"WRITE": (5, 12500)}, SERVER: {}},
    "rxe-read-lat.pcap": {CLIENT: {"READ": (10, 640)}, SERVER: {}},
    "rxe-atomic-fadd.pcap": {CLIENT: {"ATOMIC": (5, 40)}, SERVER: {}},
}

# Opcode (low 5 bits) that ends a request message: SEND/WRITE LAST and ONLY
# (with immediate/invalidate), READ REQUEST, CMP_SWAP, FETCH_ADD.
MESSAGE_END = {0x02: "SEND", 0x03: "SEND", 0x04: "SEND", 0x05: "SEND", 0x16: "SEND",
               0x17: "SEND", 0x08: "WRITE", 0x09: "WRITE", 0x0A: "WRITE", 0x0B: "WRITE",
               0x0C: "READ", 0x13: "ATOMIC", 0x14: "ATOMIC"}


def pcaps_dir():
    src = os.environ.get("ROCEMU_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
    d = os.path.join(src, "pcaps", "rxe")
    found = glob.glob(os.path.join(d, "*.pcap"))
    if len(found) < len(EXPECTED):
        print("FAIL: %d of the %d Soft-RoCE captures in %s" % (len(found), len(EXPECTED),
                                                             os.path.abspath(d)))
        sys.exit(1)
    return d


def tshark_roce(path):
    """[(frame, src ip, opcode)] of every frame tshark decodes as InfiniBand."""
    out = subprocess.run(["tshark", "-r", path, "-Y", "infiniband", "-T", "fields",
                          "-e", "frame.number", "-e", "ip.src", "-e", "ipv6.src",
                          "-e", "infiniband.bth.opcode"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         timeout=120, check=True).stdout
    rows = []
    for line in out.splitlines():
        f = line.split("\t")
        rows.append((int(f[0]), f[1] or f[2], int(f[3], 0)))
    return rows


def scapy_bad_icrc(path):
    """Frame numbers whose ICRC is wrong by an independent check: scapy's
    RoCE layer recomputes it for IPv4; it has no IPv6 support, so IPv6 frames
    are checked by roce_craft.icrc (this test's own implementation of A17.3.3,
    itself checked against scapy for IPv4)."""
    from scapy.utils import RawPcapReader
    from scapy.layers.l2 import Ether
    from scapy.layers.inet import IP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.contrib.roce import BTH
    from scapy.compat import raw
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import roce_craft
    bad, checked = set(), 0
    for n, (data, _meta) in enumerate(RawPcapReader(path), 1):
        p = Ether(data)
        if UDP not in p or p[UDP].dport != 4791:
            continue
        if IP in p and BTH in p:
            ip = IP(raw(p[IP])[:p[IP].len])
            wire = raw(ip)[-4:]
            ip[BTH].icrc = None
            ok = raw(ip)[-4:] == wire
        elif IPv6 in p:
            dg = raw(p[IPv6])[:40 + p[IPv6].plen]
            ok = roce_craft.icrc_ok(dg)
        else:
            continue
        if not ok:
            bad.add(n)
        checked += 1
    return bad, checked


def inspect(*args):
    p = subprocess.run([rocemu(), "inspect"] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    return p.returncode, p.stdout


def one(path):
    name = os.path.basename(path)
    code, out = inspect("--json", path)
    check(code == 0, "%s: inspect exit %d" % (name, code))
    j = json.loads(out)
    dirs = [d for c in j["conversations"] for d in c["directions"]]

    # opcodes: ours vs tshark's
    rows = tshark_roce(path)
    theirs = collections.Counter(op for _, _, op in rows)
    ours = collections.Counter()
    for d in dirs:
        for o in d["opcodes"]:
            ours[o["opcode"]] += o["count"]
    check(ours == theirs, "%s: opcodes %s, tshark %s" % (name, dict(ours), dict(theirs)))
    check(j["frames"]["roce"] == len(rows), "%s: %d RoCE frames, tshark %d" %
          (name, j["frames"]["roce"], len(rows)))

    # ICRC: per frame, ours (--packets marks BAD-ICRC) vs scapy
    bad, checked = scapy_bad_icrc(path)
    check(checked == len(rows), "%s: scapy checked %d of %d frames" % (name, checked, len(rows)))
    code, out = inspect("--packets", path)
    ours_bad = {int(line.split()[0]) for line in out.splitlines()
                if line[:1].isdigit() and "BAD-ICRC" in line}
    check(ours_bad == bad, "%s: bad ICRC frames %s, scapy %s" % (name, ours_bad, bad))
    check(j["totals"]["icrc_errors"] == len(bad), "%s: icrc_errors" % name)

    # messages: what the program did ...
    want = EXPECTED.get(name)
    if want is None:
        print("note: %s has no expected message counts; opcodes and ICRC only" % name)
    else:
        for src, kinds in want.items():
            got = {k: (0, 0) for k in ("SEND", "WRITE", "READ", "ATOMIC")}
            for d in dirs:
                if d["src"] == src:
                    for k in got:
                        m = d["messages"][k]
                        got[k] = (got[k][0] + m["count"], got[k][1] + m["bytes"])
            exp = {k: kinds.get(k, (0, 0)) for k in got}
            check(got == exp, "%s: messages from %s %s, expected %s" % (name, src, got, exp))
        # ... every RC message completed (ACK / response seen), none left open
        check(j["totals"]["incomplete"] == 0, "%s: %d incomplete" % (name,
                                                                     j["totals"]["incomplete"]))
    # ... and what tshark's opcodes imply (one message per message-ending opcode)
    implied = collections.Counter((src, MESSAGE_END[op & 0x1F]) for _, src, op in rows
                                  if op & 0x1F in MESSAGE_END and op >> 5 != 4)
    counted = collections.Counter()
    for d in dirs:
        for k in ("SEND", "WRITE", "READ", "ATOMIC"):
            if d["messages"][k]["count"]:
                counted[(d["src"], k)] += d["messages"][k]["count"]
    check(counted == implied, "%s: messages %s, tshark implies %s" % (name, dict(counted),
                                                                       dict(implied)))

    # clean captures pass --check
    code, out = inspect("--check", path)
    check(code == 0, "%s: --check failed:\n%s" % (name, out))
    print("ok %s: %d RoCE frames, %d ICRC checked, %d messages" %
          (name, len(rows), checked, j["totals"]["messages"]["total"]))


def corrupted_copy(path, tmpdir, frames):
    """Copy a classic pcap, flipping one byte near the end of each named frame
    (payload or ICRC): the only change is the ICRC verdict of those frames."""
    import struct
    data = bytearray(open(path, "rb").read())
    endian = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    off, n = 24, 0
    while off + 16 <= len(data):
        caplen = struct.unpack(endian + "I", data[off + 8:off + 12])[0]
        n += 1
        if n in frames:
            data[off + 16 + caplen - 6] ^= 0x01
        off += 16 + caplen
    out = os.path.join(tmpdir, "corrupted-" + os.path.basename(path))
    open(out, "wb").write(data)
    return out


def rocemu_made():
    """Captures rocemu itself wrote (pcaps/ in the source tree): opcodes and
    ICRC as above. wire-all-opcodes.pcap is the codec's catalogue: one lone
    packet of every opcode, each to a QP of its own, so nothing in it is a
    conversation and every response (ACK, READ response, ATOMIC ACK)
    answers a request the capture does not hold."""
    src = os.environ.get("ROCEMU_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
    for path in sorted(glob.glob(os.path.join(src, "pcaps", "*.pcap"))):
        name = os.path.basename(path)
        rows = tshark_roce(path)
        code, out = inspect("--json", path)
        j = json.loads(out)
        ours = collections.Counter()
        for c in j["conversations"]:
            for d in c["directions"]:
                for o in d["opcodes"]:
                    ours[o["opcode"]] += o["count"]
        theirs = collections.Counter(op for _, _, op in rows)
        check(ours == theirs, "%s: opcodes %s, tshark %s" % (name, dict(ours), dict(theirs)))
        code, out = inspect("--packets", path)
        ours_bad = {int(line.split()[0]) for line in out.splitlines()
                    if line[:1].isdigit() and "BAD-ICRC" in line}
        bad, checked = scapy_bad_icrc(path)
        check(ours_bad == bad, "%s: bad ICRC frames %s, scapy %s" % (name, ours_bad, bad))
        if name == "wire-all-opcodes.pcap":
            # every response goes to a QP that sent nothing, from a host that
            # receives nothing: the capture cannot hold the requests, so each
            # is reported (at its frame) but none is a violation
            # (RC's responses and XRC's, transport 0b101: the same opcodes)
            responses = {n for n, _, op in rows if op >> 5 in (0, 5) and 0x0D <= op & 0x1F <= 0x12}
            flagged = {e["frame"] for e in j["events"]
                       if e["kind"] == "responses_to_uncaptured_requests"}
            check(flagged == responses and j["violations"] == 0,
                  "%s: uncaptured-request responses at %s, violations %d; responses at %s" %
                  (name, sorted(flagged), j["violations"], sorted(responses)))
            check(j["totals"]["responses_without_request"] == len(responses),
                  "%s: responses_without_request %d" % (name,
                                                        j["totals"]["responses_without_request"]))
        print("ok %s (rocemu-made): %d RoCE frames, %d ICRC checked independently" %
              (name, len(rows), checked))


def main():
    d = pcaps_dir()
    if not shutil.which("tshark"):
        skip("tshark not installed")
    try:
        import scapy.contrib.roce  # noqa: F401
    except ImportError:
        skip("scapy not importable by %s" % sys.executable)
    rocemu()
    for path in sorted(glob.glob(os.path.join(d, "*.pcap")) + glob.glob(os.path.join(d, "*.pcapng"))):
        one(path)
    rocemu_made()
    # The verdicts must also agree when some ICRCs are wrong: flip a byte in
    # three RoCE frames of a reference capture (a SEND payload, an ACK's
    # ICRC, a SEND LAST).
    import tempfile
    ref = os.path.join(d, "rxe-rc-pingpong.pcap")
    if os.path.exists(ref):
        with tempfile.TemporaryDirectory() as tmp:
            bad_frames = {15, 18, 27}
            cp = corrupted_copy(ref, tmp, bad_frames)
            bad, _ = scapy_bad_icrc(cp)
            check(bad == bad_frames, "corrupted copy: scapy flags %s" % bad)
            code, out = inspect("--packets", "--check", cp)
            ours_bad = {int(line.split()[0]) for line in out.splitlines()
                        if line[:1].isdigit() and "BAD-ICRC" in line}
            check(ours_bad == bad, "corrupted copy: we flag %s, scapy %s" % (ours_bad, bad))
            check(code == 1, "corrupted copy: --check exit %d" % code)
            print("ok corrupted copy: bad ICRC in frames %s" % sorted(ours_bad))
    return verdict("reference and rocemu captures: ok")


if __name__ == "__main__":
    sys.exit(main())
