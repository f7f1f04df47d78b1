# SPDX-License-Identifier: BSD-3-Clause
"""rocemu inspect output: JSON parses and says what the text says; --packets
numbers frames as tshark does; --filter keeps frame numbers; the pictures are
well-formed SVG showing what happened; bad input fails cleanly.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inspect_testlib import check, inspect, rocemu, verdict  # noqa: E402
import roce_craft as rc  # noqa: E402

SVG = "{http://www.w3.org/2000/svg}"


def numbers(line):
    """'a 1, b-c 2 (d 3)' -> {'a': 1, 'b-c': 2, 'd': 3}"""
    return {k.strip(): int(v) for k, v in re.findall(r"([a-zA-Z][a-zA-Z \-]*?) (\d+)\b", line)}


def drop_capture(path):
    """The drop scenario of test_inspect_crafted: gap, NAK, go-back-N."""
    c = rc.Conversation()
    p = rc.Pcap(path)
    t = 1700000000 * 1000000000
    seq = [c.write_only(100), c.ack(100, 1), c.write_only(101), c.write_only(103),
           c.nak_seq(102, 2), c.write_only(102), c.write_only(103), c.ack(103, 4)]
    for k, dg in enumerate(seq):
        p.add(rc.ether(dg), t + k * 10000)
    p.close()
    return path


def text_matches_json(path):
    name = os.path.basename(path)
    code, text, _ = inspect(path)
    check(code == 0, "%s: exit %d" % (name, code))
    code, out, _ = inspect("--json", path)
    try:
        j = json.loads(out)
    except ValueError as e:
        check(False, "%s: JSON does not parse: %s" % (name, e))
        return
    lines = text.splitlines()
    t = j["totals"]
    tot = [i for i, l in enumerate(lines) if l.startswith("totals:")]
    check(len(tot) == 1, "%s: no totals line" % name)
    if not tot:
        return
    a = numbers(lines[tot[0]])
    b = numbers(lines[tot[0] + 1])
    want = {"conversations": t["conversations"], "packets": t["packets"],
            "payload bytes": t["payload_bytes"], "messages": t["messages"]["total"],
            "SEND": t["messages"]["SEND"]["count"], "WRITE": t["messages"]["WRITE"]["count"],
            "READ": t["messages"]["READ"]["count"], "ATOMIC": t["messages"]["ATOMIC"]["count"],
            "completed": t["completed"], "incomplete": t["incomplete"]}
    for k, v in want.items():
        check(a.get(k) == v, "%s: text totals %s=%s, JSON %s" % (name, k, a.get(k), v))
    want = {"retransmitted": t["retransmitted"], "duplicates": t["duplicates"],
            "out-of-sequence": t["out_of_sequence"], "gaps": t["gaps"], "acks": t["acks"],
            "naks": t["naks"], "rnr-naks": t["rnr_naks"], "cnp": t["cnp"], "ecn-ce": t["ecn_ce"],
            "icrc errors": t["icrc_errors"], "malformed": t["malformed"],
            "truncated": t["truncated"], "responses without request":
            t["responses_without_request"]}
    for k, v in want.items():
        check(b.get(k) == v, "%s: text totals %s=%s, JSON %s" % (name, k, b.get(k), v))
    # per direction, in the same order
    dirs = [d for c in j["conversations"] for d in c["directions"]]
    pk = [numbers(l) for l in lines if l.startswith("    packets ")]
    check(len(pk) == len(dirs), "%s: %d directions in text, %d in JSON" % (name, len(pk),
                                                                         len(dirs)))
    for x, d in zip(pk, dirs):
        check((x["packets"], x["wire bytes"], x["payload bytes"]) ==
              (d["packets"], d["wire_bytes"], d["payload_bytes"]),
              "%s: direction %s text %s" % (name, d["src"], x))
    lat = [numbers(l)["n"] for l in lines if "latency (last request" in l]
    want_lat = [d["latency_ns"]["n"] for d in dirs if d["latency_ns"]["n"]] + \
        ([t["latency_ns"]["n"]] if t["latency_ns"]["n"] else [])
    check(lat == want_lat, "%s: latency samples text %s JSON %s" % (name, lat, want_lat))
    ev_text = [int(m) for m in re.findall(r"^  (?:VIOLATION )?frame (\d+):", text, re.M)]
    ev_json = [e["frame"] for e in j["events"]]
    check(ev_text == ev_json, "%s: events text %s JSON %s" % (name, ev_text, ev_json))
    v = re.search(r"^violations (\d+)$", text, re.M)
    check(v and int(v.group(1)) == j["violations"], "%s: violations" % name)


def packets_and_filter(path):
    """--packets numbers frames like tshark; --filter keeps those numbers."""
    name = os.path.basename(path)
    code, out, _ = inspect("--packets", path)
    ours = [int(l.split()[0]) for l in out.splitlines() if l[:1].isdigit()]
    if shutil.which("tshark"):
        ts = subprocess.run(["tshark", "-r", path, "-Y", "infiniband", "-T", "fields",
                             "-e", "frame.number"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, timeout=120).stdout.split()
        check(ours == [int(x) for x in ts], "%s: --packets frames differ from tshark" % name)
    code, out, _ = inspect("--packets", "--filter", "src host 10.99.0.12", path)
    filt = [int(l.split()[0]) for l in out.splitlines() if l[:1].isdigit()]
    code, jout, _ = inspect("--json", "--filter", "src host 10.99.0.12", path)
    j = json.loads(jout)
    check(all(d["src"] == "10.99.0.12" for c in j["conversations"] for d in c["directions"]),
          "%s: filter let other sources through" % name)
    check(0 < len(filt) < len(ours) and set(filt) <= set(ours),
          "%s: filtered frames %s not a proper subset" % (name, filt[:5]))
    check(j["totals"]["packets"] == len(filt), "%s: filtered totals" % name)
    code, _, err = inspect("--filter", "this is not bpf", path)
    check(code == 2 and "filter" in err, "%s: bad filter exit %d" % (name, code))


def svg_root(text, what):
    try:
        return ET.fromstring(text)
    except ET.ParseError as e:
        check(False, "%s: SVG does not parse: %s" % (what, e))
        return None


def pictures(tmp, rxe):
    drop = drop_capture(os.path.join(tmp, "drop.pcap"))
    code, out, err = inspect("--ladder", "0x202", drop)
    check(code == 0, "ladder: exit %d %s" % (code, err))
    root = svg_root(out, "ladder")
    if root is not None:
        arrows = [e for e in root.iter(SVG + "line") if e.get("marker-end")]
        check(len(arrows) == 8, "ladder: %d arrows, expected 8" % len(arrows))
        texts = " ".join("".join(e.itertext()) for e in root.iter(SVG + "text"))
        for word in ("NAK", "retransmit", "out of sequence", "10.0.0.1", "QP 0x000101",
                     "QP 0x000202"):
            check(word in texts, "ladder: no '%s'" % word)
        # the NAK arrow is drawn in the NAK colour, retransmissions dashed
        cols = [e.get("stroke") for e in arrows]
        check("#c62828" in cols, "ladder: no red NAK arrow")
        check(sum(1 for e in arrows if e.get("stroke-dasharray")) == 2,
              "ladder: expected 2 dashed retransmissions")
    # the time range keeps frames 3..5 (20 us to 40 us after the first)
    code, out, _ = inspect("--ladder", "0x101", "--from", "20us", "--to", "40us", drop)
    root = svg_root(out, "ladder range")
    if root is not None:
        arrows = [e for e in root.iter(SVG + "line") if e.get("marker-end")]
        check(len(arrows) == 3, "ladder range: %d arrows, expected 3" % len(arrows))
    code, _, err = inspect("--ladder", "0x999", drop)
    check(code == 2 and "no conversation" in err, "ladder: unknown QP exit %d" % code)
    # the QPN is hex as the reports print it, with or without 0x: never octal
    # ("000202") or decimal ("202")
    ref = inspect("--ladder", "0x202", drop)[1]
    for spelling in ("000202", "202", "0X000202", "0x000202"):
        code, out, err = inspect("--ladder", spelling, drop)
        check(code == 0 and out == ref, "ladder %s: exit %d %s" % (spelling, code, err.strip()))
    for bad in ("0x1000000", "20g", "", "0x", "-1"):
        code, _, err = inspect("--ladder", bad, drop)
        check(code == 2 and "expected a QPN in hex" in err,
              "ladder %r: exit %d %s" % (bad, code, err.strip()))
    svg = os.path.join(tmp, "plot.svg")
    src = os.path.join(rxe, "rxe-rc-pingpong.pcap")
    code, _, err = inspect("--plot", "--svg", svg, src)
    check(code == 0, "plot: exit %d %s" % (code, err))
    root = svg_root(open(svg).read(), "plot") if os.path.exists(svg) else None
    if root is not None:
        texts = " ".join("".join(e.itertext()) for e in root.iter(SVG + "text"))
        check("payload throughput" in texts and "latency" in texts, "plot: titles missing")
        check(len(list(root.iter(SVG + "polyline"))) >= 1, "plot: no throughput line")
        check(len(list(root.iter(SVG + "circle"))) >= 2, "plot: no latency points")


def rotated_files(tmp):
    """Two files read as one stream: the analysis carries across, events
    name the file and the frame within it."""
    c = rc.Conversation()
    t = 1700000000 * 1000000000
    seq = [c.write_only(100), c.ack(100, 1), c.write_only(101), c.write_only(103),
           c.nak_seq(102, 2), c.write_only(102), c.write_only(103), c.ack(103, 4)]
    paths = [os.path.join(tmp, "rot0.pcap"), os.path.join(tmp, "rot1.pcap")]
    for i, part in enumerate((seq[:3], seq[3:])):
        p = rc.Pcap(paths[i])
        for k, dg in enumerate(part):
            p.add(rc.ether(dg), t + (k + 3 * i) * 10000)
        p.close()
    code, out, _ = inspect("--json", *paths)
    j = json.loads(out)
    got = [(e["kind"], e["file"], e["frame"]) for e in j["events"]]
    check(got == [("psn_gap", 1, 1), ("nak", 1, 2), ("retransmission", 1, 3)],
          "rotated files: events %s" % got)
    check(j["totals"]["messages"]["WRITE"]["count"] == 4 and j["totals"]["completed"] == 4,
          "rotated files: messages %s" % j["totals"]["messages"])
    code, out, _ = inspect(*paths)
    check("file 2 frame 1: " in out, "rotated files: text does not say 'file 2 frame 1'")


def bad_input(tmp):
    code, _, err = inspect(os.path.join(tmp, "does-not-exist.pcap"))
    check(code == 2, "missing file: exit %d" % code)
    junk = os.path.join(tmp, "junk.pcap")
    open(junk, "wb").write(b"this is not a capture file at all" * 10)
    code, _, _ = inspect(junk)
    check(code == 2, "junk file: exit %d" % code)
    empty = os.path.join(tmp, "empty.pcap")
    rc.Pcap(empty).close()
    code, out, _ = inspect("--json", "--check", empty)
    check(code == 0 and json.loads(out)["frames"]["total"] == 0, "empty capture: exit %d" % code)
    # a file cut in the middle of a record: what was read is reported
    drop = drop_capture(os.path.join(tmp, "cut.pcap"))
    data = open(drop, "rb").read()
    open(drop, "wb").write(data[:-30])
    code, out, err = inspect("--json", drop)
    check(code == 0 and json.loads(out)["frames"]["total"] == 7,
          "cut file: exit %d, %s" % (code, err.strip()))
    code, _, _ = inspect("--no-such-option", drop)
    check(code == 2, "bad option: exit %d" % code)


def main():
    rocemu()
    src = os.environ.get("ROCEMU_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
    # the Linux Soft-RoCE captures shipped in the repository (pcaps/README.md)
    rxe = os.path.join(src, "pcaps", "rxe")
    caps = sorted(glob.glob(os.path.join(rxe, "*.pcap")))
    check(len(caps) >= 5, "only %d captures in %s" % (len(caps), rxe))
    with tempfile.TemporaryDirectory(prefix="inspect-report-") as tmp:
        for path in caps + [drop_capture(os.path.join(tmp, "drop.pcap"))]:
            text_matches_json(path)
        packets_and_filter(os.path.join(rxe, "rxe-rc-pingpong.pcap"))
        pictures(tmp, rxe)
        rotated_files(tmp)
        bad_input(tmp)
    return verdict("report, JSON, packets, filter, pictures and bad input: ok")


if __name__ == "__main__":
    sys.exit(main())
