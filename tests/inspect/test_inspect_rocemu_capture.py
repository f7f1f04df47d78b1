# SPDX-License-Identifier: BSD-3-Clause
"""rocemu inspect on captures rocemu itself makes of real programs.

Two `rocemu run` hosts over memif run a program pair, each capturing its
port; the inspector must find in both captures exactly what the programs
did, the same opcode counts as tshark, and no violation:
 - ibv_rc_pingpong -n N -s S: N SENDs of S bytes each way, all ACKed;
 - the same with host A's port dropping 3% of its frames (fault injector):
   the same messages, gaps in B's capture, all repaired (NAK, go-back-N,
   timeouts), so still no violation;
 - ib_read_lat -n N -s S: the client READs S bytes at least as many times as
   the iterations it reports ("#bytes #iterations" line), all READs of S;
 - ibv_rc_pingpong with host A dropping 2% of its frames and host B
   sending 5% of its frames twice: each sender's own capture calls exactly
   its transport's resends resent and none a duplicate; B's network
   duplicates show in both captures; capture points and lost frames named.
A pair that does not complete under `rocemu run` fails the test: the
emulator broke the program, and the inspector's checks on its captures
(the loss-recovery ones above all) would be lost. One exception is
printed, not failed: the resends pair's known failure (RESENDS_KNOWN
below), and only when its counters show that signature (an ARP request
had to be repeated); any other failure of that pair fails. Missing programs
(ibverbs-utils, perftest) are a skip (77) that says so.
"""
import collections
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inspect_testlib import check, rocemu, skip, verdict  # noqa: E402



def wait_listening(port, proc):
    """Until something listens on TCP port, or the server process ended (no
    deadline and no pause: a loaded machine only makes this slower)."""
    want = ":%04X " % int(port)
    while proc.poll() is None:
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                for line in open(table).read().splitlines()[1:]:
                    f = line.split()
                    if f[1].endswith(want.strip()) and f[3] == "0A":  # LISTEN
                        return
            except OSError:
                pass
        time.sleep(0.1)


def run_pair(tmp, name, program, server_args, client_args, server_port_opts=(),
             client_port_opts=(), known_failure=None):
    """Server and client under `rocemu run`; returns (capture A, capture B, logs).
    ROCEMU_STATS=1: each log ends with its device's counters. A pair that
    does not complete fails the test, unless known_failure, a (reason,
    predicate over the two logs) pair, says why it may and its predicate
    finds that signature in the logs (then it is printed as such)."""
    tcp_port = server_args[server_args.index("-p") + 1]
    sock = os.path.join(tmp, name + ".sock")
    caps = [os.path.join(tmp, "%s-%s.pcap" % (name, h)) for h in "AB"]
    logs = [os.path.join(tmp, "%s-%s.log" % (name, h)) for h in "AB"]
    cmd = [[rocemu(), "run", "--port", "memif:server:" + sock, "--ip", "10.88.0.1/24",
            "--capture", caps[0]] + list(server_port_opts) + ["--", program] + server_args,
           [rocemu(), "run", "--port", "memif:client:" + sock, "--ip", "10.88.0.2/24",
            "--capture", caps[1]] + list(client_port_opts) + ["--", program] + client_args]
    env = dict(os.environ, ROCEMU_STATS="1")
    procs = [subprocess.Popen(cmd[0], stdout=open(logs[0], "w"), stderr=subprocess.STDOUT,
                              env=env)]
    # the client connects once: start it when the server listens
    wait_listening(tcp_port, procs[0])
    procs.append(subprocess.Popen(cmd[1], stdout=open(logs[1], "w"), stderr=subprocess.STDOUT,
                                  env=env))
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=900))  # a hang guard, not a deadline
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            codes.append(None)
    out = [open(x).read() for x in logs]
    if codes != [0, 0]:
        what = ("%s (%s) under rocemu run did not complete (exit %s); logs:\n%s\n%s"
                % (program, name, codes, out[0][-600:], out[1][-600:]))
        if known_failure and known_failure[1](out):
            print("KNOWN FAILURE (%s): %s" % (known_failure[0], what))
        else:
            check(False, what)
        return None, out
    return caps, out


def tshark_opcodes(path):
    out = subprocess.run(["tshark", "-r", path, "-Y", "infiniband", "-T", "fields",
                          "-e", "infiniband.bth.opcode"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, timeout=120).stdout
    return collections.Counter(int(x, 0) for x in out.split())


def inspect_json(path):
    p = subprocess.run([rocemu(), "inspect", "--json", path], stdout=subprocess.PIPE,
                       text=True, timeout=120)
    return json.loads(p.stdout)


def messages_by_sender(j, kind):
    out = collections.Counter()
    for c in j["conversations"]:
        for d in c["directions"]:
            m = d["messages"][kind]
            if m["count"]:
                out[d["src"]] += m["count"]
                out[d["src"] + " bytes"] += m["bytes"]
    return out


def counter(log, layer, name):
    """A device counter from a ROCEMU_STATS=1 log (0 when not printed: zero)."""
    m = re.search(r"^rocemu: rocemu0 %s %s (\d+)$" % (layer, name), log, re.M)
    return int(m.group(1)) if m else 0


def direction(j, src):
    for c in j["conversations"]:
        for d in c["directions"]:
            if d["src"] == src:
                return d
    return None


# Host A's injector drops 2% of every frame both ways, ARP included. On a
# loaded machine this pair once ended in RETRY_EXC at A (10 timeouts, 9 of
# them silent: nothing from B for 27 timer periods, 1.8 s) while B counted
# 621 resolve_pending: B could not resolve A's MAC and had no way to answer
# (most likely an ARP frame lost to the injector, B's next request only
# after arp_timeout, 1 s, and B's thread late on a busy machine).
# That is the neighbour cache's retry time against the transport's retry
# budget (issue 21 report), not the inspector's business: this pair's
# failure is printed, not failed, until it is fixed -- but only with that
# signature: one side had to repeat its ARP request (a normal run sends one
# request or probe a side). A resends pair broken any other way fails.
RESENDS_KNOWN = "ARP lost to host A's injector outlasts the retry budget under load"


def arp_repeated(out):
    return max(counter(log, "port", "arp_requests_tx") for log in out) >= 2


def resends_and_duplicates(tmp, port):
    """Issue 20.6 on real captures. Host A's port drops 2% of what it sends
    and receives (so both requesters resend: stall probes, timeouts, NAKed
    go-back-N) and host B's port sends 5% of its frames twice (network
    duplicates). In each host's own capture, the resends of its requests
    are exactly the packets its transport resent (retransmit_packets): no
    resend is taken for a network duplicate; A never duplicates, so no
    capture shows a duplicate of A's requests; B's duplicates show in both.
    Each capture names its capture point: a latency is the round trip for
    its own requests, the turnaround for the peer's. A's capture records
    every frame its fault injector dropped."""
    n, size = 150, 4096
    caps, logs = run_pair(tmp, "resends", "ibv_rc_pingpong",
                          ["-g", "1", "-n", str(n), "-s", str(size), "-p", port],
                          ["-g", "1", "-n", str(n), "-s", str(size), "-p", port, "127.0.0.1"],
                          ["--fault-drop", "20000", "--fault-seed", "11"],
                          ["--fault-dup", "tx:50000", "--fault-seed", "12"],
                          known_failure=(RESENDS_KNOWN, arp_repeated))
    if not caps:
        return 0
    ip = {"A": "10.88.0.1", "B": "10.88.0.2"}
    resent = {h: counter(logs[k], "transport", "retransmit_packets") for k, h in enumerate("AB")}
    dup_b = counter(logs[1], "port", "fault_tx_duplicated")
    lost_a = (counter(logs[0], "port", "drop_fault_rx_drop") +
              counter(logs[0], "port", "drop_fault_tx_drop"))
    check(resent["A"] + resent["B"] > 0 and dup_b > 0 and lost_a > 0,
          "resends: the faults did nothing (resent %s, B duplicated %d, A dropped %d)" %
          (resent, dup_b, lost_a))
    dups = {}
    for k, (j, me, peer) in enumerate(zip(common_checks("resends", caps), "AB", "BA")):
        mine, theirs = direction(j, ip[me]), direction(j, ip[peer])
        if not mine or not theirs:
            check(False, "resends %s: directions missing" % me)
            continue
        check(mine["retransmitted"] == resent[me],
              "resends, %s's capture: %d of its requests called resent, its transport resent %d"
              % (me, mine["retransmitted"], resent[me]))
        # A duplicates nothing. Its own capture stamps each frame as it
        # leaves: no duplicate. At B, a probe that B reads in one burst with
        # the packet it repeats is indistinguishable from a network copy
        # (docs/inspect.md, known limits): at most one per packet A resent.
        a_dups = direction(j, ip["A"])["duplicates"]
        check(a_dups == 0 if me == "A" else a_dups <= resent["A"],
              "resends, %s's capture: %d duplicates of A's requests (A resent %d, duplicated "
              "nothing)" % (me, a_dups, resent["A"]))
        dups[me] = direction(j, ip["B"])["duplicates"]
        check(0 < dups[me] <= dup_b, "resends, %s's capture: %d duplicates of B's requests, B "
              "duplicated %d frames" % (me, dups[me], dup_b))
        cp = j["capture_point"]
        check(cp is not None and ip[me] in cp["addresses"] and cp["how"] == "rocemu record",
              "resends, %s's capture: capture point %s" % (me, cp))
        check((mine["latency_ns"].get("measured_at"), theirs["latency_ns"].get("measured_at"))
              == ("requester", "responder"),
              "resends, %s's capture: latency measured at %s / %s" %
              (me, mine["latency_ns"].get("measured_at"), theirs["latency_ns"].get("measured_at")))
        if me == "A":
            check(j["frames"]["lost_by_fault_injector"] == lost_a and
                  j["totals"]["fault_lost"] <= lost_a,
                  "resends, A's capture: %d frames recorded lost, its port dropped %d" %
                  (j["frames"]["lost_by_fault_injector"], lost_a))
        # a single-packet resend is never called a go-back-N
        for e in j["events"]:
            if e["kind"] == "retransmission":
                check(("go-back-N" in e["text"]) == (e["resent"] > 1),
                      "resends, %s's capture: frame %d: %s" % (me, e["frame"], e["text"]))
    print("ok resends: A resent %d, B resent %d, B duplicated %d (seen %s), A dropped %d" %
          (resent["A"], resent["B"], dup_b, dups, lost_a))
    return 1


def common_checks(name, caps):
    for cap in caps:
        j = inspect_json(cap)
        ours = collections.Counter()
        for c in j["conversations"]:
            for d in c["directions"]:
                for o in d["opcodes"]:
                    ours[o["opcode"]] += o["count"]
        if shutil.which("tshark"):
            theirs = tshark_opcodes(cap)
            check(ours == theirs, "%s %s: opcodes %s, tshark %s" % (name, cap, dict(ours),
                                                                   dict(theirs)))
        check(j["violations"] == 0, "%s %s: %d violations: %s" %
              (name, cap, j["violations"], [e["text"] for e in j["events"]][:5]))
        check(j["totals"]["incomplete"] == 0, "%s %s: incomplete messages" % (name, cap))
        yield j


def main():
    rocemu()
    if subprocess.run([rocemu(), "run", "--help"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode != 0:
        skip("this rocemu has no 'run' command")
    for prog, pkg in (("ibv_rc_pingpong", "ibverbs-utils"), ("ib_read_lat", "perftest")):
        if not shutil.which(prog):
            skip("%s not installed (%s)" % (prog, pkg))
    port = str(random.randint(20000, 40000))
    ran = 0
    with tempfile.TemporaryDirectory(prefix="inspect-rocemu-") as tmp:
        if shutil.which("ibv_rc_pingpong"):
            n, size = 40, 4096
            caps, _ = run_pair(tmp, "rc_pingpong", "ibv_rc_pingpong",
                               ["-g", "1", "-n", str(n), "-s", str(size), "-p", port],
                               ["-g", "1", "-n", str(n), "-s", str(size), "-p", port,
                                "127.0.0.1"])
            for j in common_checks("rc_pingpong", caps or []):
                got = messages_by_sender(j, "SEND")
                want = collections.Counter({"10.88.0.1": n, "10.88.0.1 bytes": n * size,
                                            "10.88.0.2": n, "10.88.0.2 bytes": n * size})
                check(got == want, "rc_pingpong: SENDs %s, program did %s" % (dict(got),
                                                                             dict(want)))
            if caps:
                ran += 1
                print("ok rc_pingpong: %d SENDs of %d bytes each way in both captures" %
                      (n, size))
        else:
            print("note: ibv_rc_pingpong missing")
        if shutil.which("ibv_rc_pingpong"):
            # host A's port drops 3% of what it sends (rocemu's fault
            # injector): B's capture must show the gaps, A's NAKs and
            # retransmissions repairing all of them, and the same messages
            n, size = 150, 4096
            port3 = str(int(port) + 2)
            caps, _ = run_pair(tmp, "rc_pingpong_loss", "ibv_rc_pingpong",
                               ["-g", "1", "-n", str(n), "-s", str(size), "-p", port3],
                               ["-g", "1", "-n", str(n), "-s", str(size), "-p", port3,
                                "127.0.0.1"],
                               ["--fault-drop", "tx:30000", "--fault-seed", "7"])
            for k, j in enumerate(common_checks("rc_pingpong_loss", caps or [])):
                got = messages_by_sender(j, "SEND")
                want = collections.Counter({"10.88.0.1": n, "10.88.0.1 bytes": n * size,
                                            "10.88.0.2": n, "10.88.0.2 bytes": n * size})
                check(got == want, "rc_pingpong_loss: SENDs %s, program did %s" %
                      (dict(got), dict(want)))
                t = j["totals"]
                check(t["retransmitted"] > 0, "rc_pingpong_loss: no retransmission seen")
                if k == 1:  # host B's capture: A's lost frames never reach it
                    check(t["gaps"] > 0 and t["naks"] > 0,
                          "rc_pingpong_loss: B's capture shows %d gaps, %d NAKs" %
                          (t["gaps"], t["naks"]))
            if caps:
                ran += 1
                print("ok rc_pingpong with 3%% loss: %d SENDs each way, every gap repaired" % n)
        if shutil.which("ibv_rc_pingpong"):
            ran += resends_and_duplicates(tmp, str(int(port) + 3))
        if shutil.which("ib_read_lat"):
            n, size = 25, 64
            port2 = str(int(port) + 1)
            caps, logs = run_pair(tmp, "read_lat", "ib_read_lat",
                                  ["-x", "1", "-F", "-s", str(size), "-n", str(n), "-p", port2],
                                  ["-x", "1", "-F", "-s", str(size), "-n", str(n), "-p", port2,
                                   "127.0.0.1"])
            # perftest prints "#bytes #iterations ..." then "64 25 ..."
            m = re.search(r"^\s*%d\s+(\d+)\s" % size, logs[1], re.M)
            iters = int(m.group(1)) if m else n
            for j in common_checks("read_lat", caps or []):
                got = messages_by_sender(j, "READ")
                check(got["10.88.0.2"] >= iters and got["10.88.0.2 bytes"] ==
                      got["10.88.0.2"] * size and got["10.88.0.1"] == 0,
                      "read_lat: READs %s, program reported %d iterations" % (dict(got), iters))
            if caps:
                ran += 1
                print("ok read_lat: %d READs of %d bytes" % (iters, size))
    return verdict("%d program pair(s) under rocemu: captures explained" % ran)


if __name__ == "__main__":
    sys.exit(main())
