#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""rocemu performance bench (issue 9): perftest over rocemu on memif and the
TCP-based baselines on loopback, in one run, interleaved, each side pinned to
its own core. Writes one JSON file; bench/perf_report.py turns it into
docs/PERFORMANCE.md and the plots.

usage: perf_bench.py BUILD_DIR [--reps N] [--out FILE] [--quick] [--only NAMES]

Before and after every measure it runs bench/machine_probe (the cross-CPU
cache-line round trip) and records the machine's mode, near or far, beside it.

Every command runs under a deadline; a failure is recorded in the JSON
(ok=false, error=...) and the run goes on. Nothing is left running: every
child is started in its own session and its process group is killed at the
end of the step that started it.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SRV_CPU = "1"  # server side
CLI_CPU = "0"  # client side
HZ = os.sysconf("SC_CLK_TCK")

# --------------------------------------------------------------------------
# process helpers


class Proc:
    """A child in its own session; wait4() keeps its rusage (all threads and
    reaped descendants)."""

    def __init__(self, argv, env=None, log=None):
        self.argv = argv
        self.log = log or tempfile.TemporaryFile(mode="w+")
        self.p = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        self.pid = self.p.pid
        self.rc = None
        self.rusage = None

    def poll(self):
        if self.rc is not None:
            return self.rc
        pid, status, ru = os.wait4(self.pid, os.WNOHANG)
        if pid == self.pid:
            self._done(status, ru)
        return self.rc

    def _done(self, status, ru):
        self.rc = os.waitstatus_to_exitcode(status)
        self.rusage = ru
        self.p.returncode = self.rc

    def wait(self, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.poll() is not None:
                return self.rc
            time.sleep(0.02)
        return None

    def kill(self, sig=signal.SIGTERM, grace=2.0):
        """Stop the whole process group (only ours: its own session)."""
        if self.poll() is None:
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                pass
            if self.wait(grace) is None:
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.wait(5)
        # a group member that outlived its leader
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()


def listening(port):
    """True when something listens on TCP `port` (any address)."""
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(f) as fh:
                next(fh)
                for line in fh:
                    parts = line.split()
                    if parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:
                        return True
        except OSError:
            pass
    return False


def free_port(base, span, k):
    """A TCP port in [base, base + span) that nothing listens on now,
    starting at base + k % span: the bench shares the machine, and a server
    of someone else's on our port would pass wait_listen() and leave our
    server unable to listen."""
    for i in range(span):
        port = base + (k + i) % span
        if not listening(port):
            return port
    return base + k % span


def wait_listen(port, proc, timeout=30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if listening(port):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    return False


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


# The machine's mode (bench/machine_probe.c): on the 2-CPU VMs this runs on,
# the two CPUs sometimes share a cache (a line crosses between them in
# ~55 ns) and mostly do not (~300-400 ns), and rocemu moves up to 2x more
# in the first mode. A round trip under this many ns is "near", else "far";
# past BUSY_RTT_NS the probe's threads did not get their CPUs (a loaded
# machine): no reading.
NEAR_RTT_NS = 150
BUSY_RTT_NS = 2000


def machine_probe(build):
    """The probe between the client's and the server's CPU (~40 ms), as a
    dict with "mode"; {"error": ...} if it did not run."""
    exe = os.path.join(build, "bench", "machine_probe")
    if not os.access(exe, os.X_OK):
        return {"error": "no bench/machine_probe in the build"}
    try:
        r = subprocess.run([exe, "-a", CLI_CPU, "-b", SRV_CPU, "--json"],
                           capture_output=True, text=True, timeout=10)
        m = json.loads(r.stdout)
    except (subprocess.SubprocessError, ValueError, OSError) as e:
        return {"error": "%s: %s" % (type(e).__name__, e)}
    rtt = m.get("line_rtt_ns", -1)
    m["mode"] = (None if rtt < 0 or rtt >= BUSY_RTT_NS else
                 "near" if rtt < NEAR_RTT_NS else "far")
    return m


def run_mode(before, after):
    """A run's mode from the probes before and after it: near or far when
    both say so, mixed when they differ (the mode changed during the run),
    None when a probe failed."""
    a, b = before.get("mode"), after.get("mode")
    if a is None or b is None:
        return None
    return a if a == b else "mixed"


def pair(server, client, port, timeout, env=None, server_exits=True, settle=0.0, during=None):
    """Run a server (pinned to SRV_CPU) and a client (CLI_CPU). Returns
    (client_output, server_output, client Proc, server Proc, error).
    during(), if given, is called every 0.5 s while the client runs."""
    s = Proc(["taskset", "-c", SRV_CPU] + server, env=env)
    c = None
    err = None
    try:
        if port and not wait_listen(port, s):
            err = "server did not listen on %d (rc=%s)" % (port, s.poll())
            return "", s.output(), None, s, err
        if settle:
            time.sleep(settle)
        c = Proc(["taskset", "-c", CLI_CPU] + client, env=env)
        end = time.monotonic() + timeout
        while during and c.poll() is None and time.monotonic() < end:
            during()
            c.wait(0.5)
        if c.wait(max(0.0, end - time.monotonic())) is None:
            err = "client timed out after %ds" % timeout
        elif c.rc != 0:
            err = "client exit %d" % c.rc
        if server_exits:
            if s.wait(10) is None:
                err = err or "server did not exit"
            elif s.rc != 0 and not err:
                err = "server exit %d" % s.rc
    finally:
        if c:
            c.kill()
        s.kill()
    return (c.output() if c else ""), s.output(), c, s, err


# --------------------------------------------------------------------------
# the tests

class Bench:
    def __init__(self, build, quick):
        self.build = os.path.abspath(build)
        self.rocemu = os.path.join(self.build, "tools", "rocemu")
        self.quick = quick
        self.n = 0
        self.tmp = tempfile.mkdtemp(prefix="rocemu-bench-")

    def uniq(self):
        self.n += 1
        return self.n

    # ---- rocemu + perftest
    def rocemu_cmd(self, role, sock, ip, prog):
        # stdbuf: line-buffered output, so a run that hangs still leaves its log
        return [self.rocemu, "run", "--no-check", "--port", "memif:%s:%s" % (role, sock), "--ip", ip,
                "--", "stdbuf", "-oL", "-eL"] + prog

    # ---- a rocemu host (issue 16, docs/host.md)
    def host_start(self, d, extra):
        """`rocemu host` on directory d, detached; its pid. Its uplink is a
        memif server on d/up.sock (nobody else needs to connect)."""
        pidf = os.path.join(d, "h.pid")
        r = subprocess.run([self.rocemu, "host", "--name", os.path.join(d, "h"), "--detach",
                            "--pid-file", pidf, "--port", "memif:server:" + os.path.join(d, "up.sock"),
                            "--ip", "10.91.0.1/24"] + extra,
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError("rocemu host did not start: " + (r.stderr or r.stdout)[-300:])
        with open(pidf) as f:
            return int(f.read())

    @staticmethod
    def host_stop(pid):
        for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return
            end = time.monotonic() + grace
            while time.monotonic() < end:
                if not os.path.exists("/proc/%d" % pid):
                    return
                time.sleep(0.05)

    def host_stat(self, d):
        r = subprocess.run([self.rocemu, "stat", "--host", os.path.join(d, "h"), "--json"],
                           capture_output=True, text=True, timeout=20)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def host_cmd(self, d, prog):
        return [self.rocemu, "run", "--no-check", "--host", os.path.join(d, "h"), "--",
                "stdbuf", "-oL", "-eL"] + prog

    def perftest(self, prog, args, timeout=60, mode="memif"):
        """perftest between two processes. mode: memif (two standalone
        processes joined by memif, today's way), or through a rocemu host:
        host (both attached, no capture: a direct ring between them),
        hostcap (both attached to a capturing host: every frame through
        its forwarding thread), hostfwd (the same without the capture:
        --no-direct), uplink (the server attached to the host, the client a
        standalone process on the host's memif uplink). In the host modes
        the host's frame counters are sampled while the client runs."""
        k = self.uniq()
        port = free_port(18600, 300, k)
        sock = os.path.join(self.tmp, "m%d.sock" % k)
        common = [prog, "-d", "rocemu0", "-x", "1", "-F", "-p", str(port)] + args
        hpid = None
        samples = []
        d = None
        env = None
        if mode == "memifpmd":
            # memif through the PMD's copies, the direct channel off (what a
            # testpmd or VPP peer, or ROCEMU_MEMIF_DIRECT=0, gets; the default
            # between two rocemu ends is the channel, docs/ports.md);
            # ROCEMU_STATS for its copies per byte
            env = dict(os.environ, ROCEMU_MEMIF_DIRECT="0", ROCEMU_STATS="1")
        if mode in ("memif", "memifpmd"):
            srv = self.rocemu_cmd("server", sock, "10.91.0.1/24", common)
            cli = self.rocemu_cmd("client", sock, "10.91.0.2/24", common + ["127.0.0.1"])
        else:
            d = tempfile.mkdtemp(prefix="h%d-" % k, dir=self.tmp)
            extra = {"host": [], "uplink": [], "hostfwd": ["--no-direct"],
                     "hostcap": ["--capture", os.path.join(d, "h.pcap")]}[mode]
            hpid = self.host_start(d, extra)
            srv = self.host_cmd(d, common)
            if mode == "uplink":
                cli = self.rocemu_cmd("client", os.path.join(d, "up.sock"), "10.91.0.2/24",
                                      common + ["127.0.0.1"])
            else:
                cli = self.host_cmd(d, common + ["127.0.0.1"])
        def sample():
            st = self.host_stat(d)
            if st:
                samples.append((time.monotonic(), st["switched_frames"], st["frames_from_procs"]))
        t0 = time.monotonic()
        try:
            out, sout, c, s, err = pair(srv, cli, port, timeout, env=env,
                                        during=sample if hpid else None)
            if hpid:
                st = self.host_stat(d)
        finally:
            if hpid:
                self.host_stop(hpid)
            if d:
                shutil.rmtree(d, ignore_errors=True)
        res = {"wall_s": round(time.monotonic() - t0, 2), "mode": mode}
        if hpid and st:
            res["host"] = {k2: st.get(k2) for k2 in ("switched_frames", "frames_from_procs",
                                                     "drop_no_qp", "drop_qp_quiet", "drop_proc_bad")}
            res["host"]["ring_full"] = sum(p.get("drop_ring_full", 0) for p in st.get("processes", []))
        if samples:
            res["host_pps"] = host_rate(samples, mode)
        res.update(parse_perftest(out))
        if mode == "memifpmd":
            res["copies"] = copies_per_byte(out, sout)
        if not err and "bytes" not in res:
            err = "no result line"
        fail = [l.strip() for l in out.splitlines() if "Failed status" in l or "Couldn't" in l]
        if not err and (fail or res.get("bw_Bps") == 0):
            err = "; ".join(fail[:2]) or "zero throughput"
        if err:
            res["error"] = err
            res["log_tail"] = (out[-600:] + "\n--- server ---\n" + sout[-600:])
        return res

    # ---- baselines
    def qperf(self, tests_args, timeout=90):
        port = free_port(19800, 100, self.uniq())
        out, _, c, s, err = pair(["qperf", "-lp", str(port)],
                                 ["qperf", "127.0.0.1", "-lp", str(port)] + tests_args,
                                 port, timeout, server_exits=False)
        return out, err

    def sockperf(self, mode, size, secs):
        port = free_port(11900, 90, self.uniq())
        out, _, c, s, err = pair(["sockperf", "sr", "--tcp", "-i", "127.0.0.1", "-p", str(port)],
                                 ["sockperf", mode, "--tcp", "-i", "127.0.0.1", "-p", str(port),
                                  "-t", str(secs), "-m", str(size)],
                                 port, secs + 30, server_exits=False)
        return out, err

    def ucx(self, test, size, iters):
        port = free_port(13300, 90, self.uniq())
        env = dict(os.environ, UCX_TLS="tcp", UCX_NET_DEVICES="lo")
        out, _, c, s, err = pair(["ucx_perftest", "-p", str(port)],
                                 ["ucx_perftest", "127.0.0.1", "-p", str(port), "-t", test,
                                  "-s", str(size), "-n", str(iters)],
                                 port, 90, env=env)
        return out, err

    def fabric(self, size, iters):
        port = free_port(47500, 90, self.uniq())
        args = ["fi_pingpong", "-p", "tcp", "-e", "msg", "-I", str(iters), "-S", str(size)]
        out, _, c, s, err = pair(args + ["-B", str(port)], args + ["-P", str(port), "127.0.0.1"],
                                 port, 90)
        return out, err

    def testpmd(self):
        """Raw memif link: server txonly -> client rxonly, 64 B frames."""
        k = self.uniq()
        sock = os.path.join(self.tmp, "pmd%d.sock" % k)
        script_tx = "sleep 3; echo start; sleep 12; echo stop; sleep 1; echo quit"
        script_rx = ("sleep 3; echo start; sleep 2; echo 'show port stats all'; sleep 6; "
                     "echo 'show port stats all'; echo stop; sleep 1; echo quit")
        def argv(role, lc, prefix, mode, script):
            pmd = ("dpdk-testpmd --lcores=%s --no-huge -m 512 --file-prefix %s --no-pci "
                   "--no-telemetry --vdev=net_memif0,role=%s,socket=%s -- -i "
                   "--total-num-mbufs=16384 --forward-mode=%s" % (lc, prefix, role, sock, mode))
            return ["sh", "-c", "(%s) | %s" % (script, pmd)]
        tx = Proc(argv("server", "0@%s,1@%s" % (SRV_CPU, SRV_CPU), "rbpS%d_%d" % (os.getpid(), k),
                       "txonly", script_tx))
        time.sleep(1.0)
        rx = Proc(argv("client", "0@%s,1@%s" % (CLI_CPU, CLI_CPU), "rbpC%d_%d" % (os.getpid(), k),
                       "rxonly", script_rx))
        err = None
        if rx.wait(40) is None:
            err = "testpmd rx timed out"
        tx.wait(10)
        rx.kill()
        tx.kill()
        out = rx.output()
        pps = re.findall(r"Rx-pps:\s+(\d+)", out)
        if len(pps) < 2:
            return {"error": err or "no Rx-pps", "log_tail": out[-800:]}
        return {"rx_pps": int(pps[-1]), "size": 64}


def host_rate(samples, mode):
    """Frames per second the host forwarded, from its counters sampled every
    0.5 s while the client ran: the median rate of the intervals with
    traffic, the first and last of them left out (they are partly idle).
    A frame through the host's thread between two processes counts once
    (switched_frames: delivered to a process); on the uplink mode both
    directions count (delivered to the process, and from it to the
    uplink)."""
    rates = []
    for (t0, s0, u0), (t1, s1, u1) in zip(samples, samples[1:]):
        n = (s1 - s0) + ((u1 - u0) if mode == "uplink" else 0)
        if n > 0 and t1 > t0:
            rates.append(n / (t1 - t0))
    if len(rates) > 2:
        rates = rates[1:-1]
    return round(sorted(rates)[len(rates) // 2]) if rates else None


# --------------------------------------------------------------------------
# parsers

def parse_perftest(out):
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("#bytes") and i + 1 < len(lines):
            head = line
            vals = lines[i + 1].split()
            try:
                nums = [float(v) for v in vals]
            except ValueError:
                continue
            if "t_typical" in head:
                keys = ["bytes", "iters", "t_min", "t_max", "t_typical", "t_avg", "t_stdev",
                        "p99", "p999"]
            elif "MsgRate" in head:
                keys = ["bytes", "iters", "bw_peak_MBps", "bw_avg_MBps", "msgrate_mpps"]
            else:
                continue
            r = dict(zip(keys, nums))
            if "msgrate_mpps" in r:
                # bytes/s from the message rate: free of the tool's MB convention
                r["bw_Bps"] = r["msgrate_mpps"] * 1e6 * r["bytes"]
            return r
    return {}


UNIT = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}
TUNIT = {"ns": 1e-3, "us": 1, "ms": 1e3, "sec": 1e6, "s": 1e6}


def parse_qperf(out):
    """Results in order: 'latency = X us' and 'bw = X MB/sec' lines."""
    lats = [float(v) * TUNIT[u] for v, u in re.findall(r"latency\s*=\s*([\d.]+)\s*(ns|us|ms|sec)", out)]
    bws = [float(v) * UNIT[u] for v, u in re.findall(r"bw\s*=\s*([\d.]+)\s*([KMG]?)B/sec", out)]
    return lats, bws


def parse_sockperf(out):
    r = {}
    m = re.search(r"Summary: Latency is ([\d.]+) usec", out)
    if m:
        r["lat_avg_us"] = float(m.group(1))
    m = re.search(r"percentile 50\.000 =\s*([\d.]+)", out)
    if m:
        r["lat_p50_us"] = float(m.group(1))
    m = re.search(r"Message Rate is (\d+) \[msg/sec\]", out)
    if m:
        r["msg_per_s"] = float(m.group(1))
    return r


def parse_ucx(out):
    """Final: iters, lat p50, lat avg (last interval, may be 'inf'), lat overall,
    bw avg, bw overall, msgrate avg, msgrate overall."""
    for line in out.splitlines():
        f = line.split()
        if len(f) == 9 and f[0] == "Final:":
            try:
                return {"iters": int(f[1]), "lat_p50_us": float(f[2]), "lat_avg_us": float(f[4]),
                        "msg_per_s": float(f[8])}
            except ValueError:
                return {}
    return {}


def parse_fabric(out):
    """'bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec' (bytes may be 64k, 1m)."""
    mult = {"k": 1024, "m": 1 << 20, "g": 1 << 30}
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 8 and re.match(r"^\d+[kmg]?$", f[0]):
            try:
                n = int(f[0][:-1]) * mult[f[0][-1]] if f[0][-1] in mult else int(f[0])
                return {"bytes": n, "lat_us": float(f[-2]), "mxfers": float(f[-1]),
                        "MBps": float(f[-3])}
            except ValueError:
                pass
    return {}


# --------------------------------------------------------------------------
# resource accounting (one 5-second window of a bandwidth run)

def tids(pid):
    try:
        return os.listdir("/proc/%d/task" % pid)
    except OSError:
        return []


def proc_sample(pid):
    """utime, stime (s, all threads), voluntary/involuntary switches (sum of
    threads), bytes read/written through system calls."""
    r = {"vol": 0, "invol": 0}
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read().rsplit(")", 1)[1].split()
        r["utime"] = int(st[11]) / HZ
        r["stime"] = int(st[12]) / HZ
        for t in tids(pid):
            try:
                with open("/proc/%d/task/%s/status" % (pid, t)) as f:
                    for line in f:
                        if line.startswith("voluntary_ctxt_switches"):
                            r["vol"] += int(line.split()[1])
                        elif line.startswith("nonvoluntary_ctxt_switches"):
                            r["invol"] += int(line.split()[1])
            except OSError:
                pass
        with open("/proc/%d/io" % pid) as f:
            for line in f:
                k, v = line.split(":")
                if k in ("rchar", "wchar"):
                    r[k] = int(v)
        r["threads"] = len(tids(pid))
    except (OSError, IndexError, ValueError):
        return None
    return r


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return sorted(out)


def exe_pid(proc, name, timeout=20):
    """The pid once the child has exec'd `name` (taskset and rocemu run exec)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with open("/proc/%d/comm" % proc.pid) as f:
                if f.read().strip().startswith(name[:15]):
                    return proc.pid
        except OSError:
            return None
        time.sleep(0.05)
    return None


_CYCLES = None


def cycles_counted():
    """True when this machine's perf counts CPU cycles (a VM may expose no
    hardware counter: perf stat then reports <not supported>)."""
    global _CYCLES
    if _CYCLES is None:
        try:
            r = subprocess.run(["perf", "stat", "-x,", "-e", "cycles", "--", "true"],
                               capture_output=True, text=True, timeout=30)
            st = parse_stat(r.stderr)
            _CYCLES = r.returncode == 0 and st.get("cycles") is not None
        except (OSError, subprocess.SubprocessError):
            _CYCLES = False
    return _CYCLES


def stat_events():
    return ["raw_syscalls:sys_enter", "task-clock"] + (["cycles"] if cycles_counted() else [])


def syscall_window(pid, secs, out_prefix):
    """Start counting the system calls, CPU time (task-clock) and, where the
    machine counts them, cycles of every thread of pid for secs seconds:
    perf stat (counts) and perf trace -s (system call names)."""
    stat = Proc(["perf", "stat", "-x,", "-e", ",".join(stat_events()), "-p", str(pid),
                 "--", "sleep", str(secs)])
    trace = Proc(["timeout", "-s", "INT", str(secs), "perf", "trace", "-s", "-p", str(pid)],
                 log=open(out_prefix + ".trace", "w+"))
    return stat, trace


def parse_stat(out):
    """perf stat -x, lines 'value,unit,event,...' -> {event: value}; an
    event perf could not count (<not supported>, <not counted>) is None.
    task-clock is in ms."""
    ev = {}
    for line in out.splitlines():
        f = line.split(",")
        if len(f) > 2 and f[2]:
            try:
                ev[f[2]] = float(f[0])
            except ValueError:
                ev[f[2]] = None
    return ev


def parse_stat_count(out):
    v = parse_stat(out).get("raw_syscalls:sys_enter")
    return int(v) if v is not None else None


def parse_trace_summary(out):
    """perf trace -s: per thread tables of 'syscall calls ...'; summed by name."""
    calls = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 3 and re.match(r"^[a-z_0-9]+$", f[0]) and f[1].isdigit() and f[0] not in ("syscall",):
            calls[f[0]] = calls.get(f[0], 0) + int(f[1])
    return calls


def parse_rocemu_stats(out):
    """ROCEMU_STATS=1 lines 'rocemu: DEV LAYER NAME VALUE' -> {(layer, name): value}."""
    ctr = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 5 and f[0] == "rocemu:" and f[4].isdigit():
            ctr[(f[2], f[3])] = ctr.get((f[2], f[3]), 0) + int(f[4])
    return ctr


def copies_per_byte(cli_out, srv_out):
    """Bytes copied per payload byte delivered, from both processes' counters
    over the whole run: the transport's copies in and out of application
    memory (copy_tx_bytes, copy_rx_bytes) plus the frame bytes the memif
    PMD copied into the shared ring on tx and out of it on rx (the port's
    pmd_copy_tx_bytes / pmd_copy_rx_bytes: every frame in copy mode, none on
    a zero-copy client's side). A build older than those counters counts
    every frame the port moved (tx_bytes, rx_bytes): it had copy mode only.
    memif's direct channel (the default between two rocemu ends) hands frames over without
    a PMD copy: they count 0 here, and its own copies (direct_copy_tx_bytes,
    direct_copy_rx_bytes: a frame not built in its area, a frame that is not
    RoCE) count with the PMD's; "direct" is the share of frame bytes that
    crossed on it (direct_rx_bytes), the counters' proof.
    Delivered: payload placed in the server's memory (its copy_rx_bytes)."""
    c, s = parse_rocemu_stats(cli_out), parse_rocemu_stats(srv_out)
    if not c or not s or not s.get(("transport", "copy_rx_bytes")):
        return None
    pmd = any(k[1].startswith(("pmd_copy_", "direct_")) for k in list(c) + list(s))
    tx, rx = ("pmd_copy_tx_bytes", "pmd_copy_rx_bytes") if pmd else ("tx_bytes", "rx_bytes")
    parts = {
        "app_to_frame": c.get(("transport", "copy_tx_bytes"), 0) + s.get(("transport", "copy_tx_bytes"), 0),
        "pmd_tx": sum(e.get(("port", k), 0) for e in (c, s) for k in (tx, "direct_copy_tx_bytes")),
        "pmd_rx": sum(e.get(("port", k), 0) for e in (c, s) for k in (rx, "direct_copy_rx_bytes")),
        "frame_to_app": c.get(("transport", "copy_rx_bytes"), 0) + s.get(("transport", "copy_rx_bytes"), 0),
    }
    delivered = s[("transport", "copy_rx_bytes")]
    return {"delivered": delivered, "parts": {k: v / delivered for k, v in parts.items()},
            "total": sum(parts.values()) / delivered,
            "retransmit_packets": c.get(("transport", "retransmit_packets"), 0),
            "direct": (c.get(("port", "direct_rx_bytes"), 0) + s.get(("port", "direct_rx_bytes"), 0))
            / max(1, c.get(("port", "rx_bytes"), 0) + s.get(("port", "rx_bytes"), 0))}


def account(bench, kind, secs=4):
    """One bandwidth run of 64 KiB messages with a `secs`-second measurement
    window in its middle: system calls, context switches, CPU time of both
    processes; task-clock (and cycles where counted) per delivered byte;
    rocemu's copies per delivered byte from its counters."""
    res = {"kind": kind, "window_s": secs, "load": loadavg()}
    env = None
    if kind == "rocemu":
        k = bench.uniq()
        port = free_port(18600, 300, k)
        sock = os.path.join(bench.tmp, "acct%d.sock" % k)
        common = ["ib_write_bw", "-d", "rocemu0", "-x", "1", "-F", "-p", str(port), "-s", "65536",
                  "-D", str(secs + 5)]
        srv = bench.rocemu_cmd("server", sock, "10.91.0.1/24", common)
        cli = bench.rocemu_cmd("client", sock, "10.91.0.2/24", common + ["127.0.0.1"])
        name = "ib_write_bw"
        msg = 65536
        env = dict(os.environ, ROCEMU_STATS="1")  # counters at exit: bytes copied
    else:
        port = free_port(19900, 50, bench.uniq())
        srv = ["qperf", "-lp", str(port)]
        cli = ["qperf", "127.0.0.1", "-lp", str(port), "-t", str(secs + 5), "-m", "64K", "tcp_bw"]
        name = "qperf"
        msg = 65536
    s = Proc(["taskset", "-c", SRV_CPU] + srv, env=env)
    c = None
    try:
        if not wait_listen(port, s):
            res["error"] = "server did not listen"
            return res
        c = Proc(["taskset", "-c", CLI_CPU] + cli, env=env)
        spid, cpid = exe_pid(s, name), exe_pid(c, name)
        if not spid or not cpid:
            res["error"] = "no pid"
            return res
        time.sleep(3.0)  # connection set up, steady state
        if kind == "tcp":
            # the qperf server forks a child per test: that child does the work
            kids = children(spid)
            if kids:
                spid = kids[-1]
        prefix = os.path.join(bench.tmp, "acct-%s" % kind)
        before = {"server": proc_sample(spid), "client": proc_sample(cpid)}
        w = {"server": syscall_window(spid, secs, prefix + "-s"),
             "client": syscall_window(cpid, secs, prefix + "-c")}
        t0 = time.monotonic()
        for side in w:
            w[side][0].wait(secs + 10)
        after = {"server": proc_sample(spid), "client": proc_sample(cpid)}
        dt = time.monotonic() - t0
        for side in w:
            w[side][1].wait(10)
        c.wait(secs + 30)
        out = c.output()
        if kind == "rocemu":
            pr = parse_perftest(out)
            bps = pr.get("bw_Bps")
            s.wait(15)  # the server prints its counters as it exits
            res["copies"] = copies_per_byte(out, s.output())
        else:
            lats, bws = parse_qperf(out)
            bps = bws[0] if bws else None
        res["tool_Bps"] = bps
        for side in ("server", "client"):
            b, a = before[side], after[side]
            if not b or not a:
                res[side] = {"error": "process gone"}
                continue
            d = {k: a[k] - b[k] for k in ("utime", "stime", "vol", "invol")}
            if kind == "tcp":
                moved = (a["wchar"] - b["wchar"]) if side == "client" else (a["rchar"] - b["rchar"])
                d["bytes_src"] = "/proc/PID/io " + ("wchar" if side == "client" else "rchar")
            else:
                moved = (bps or 0) * dt
                d["bytes_src"] = "perftest rate x window"
            d["bytes"] = moved
            d["messages"] = moved / msg if moved else 0
            d["threads"] = a.get("threads")
            st = parse_stat(w[side][0].output())
            sc = st.get("raw_syscalls:sys_enter")
            sc = int(sc) if sc is not None else None
            d["syscalls"] = sc
            d["task_clock_ms"] = st.get("task-clock")
            d["cycles"] = st.get("cycles")
            d["syscall_names"] = parse_trace_summary(w[side][1].output())
            m = d["messages"] or float("nan")
            gb = moved / 1e9 if moved else float("nan")
            d["syscalls_per_msg"] = (sc / m) if sc is not None else None
            d["vol_per_msg"] = d["vol"] / m
            d["invol_per_msg"] = d["invol"] / m
            d["user_s_per_GB"] = d["utime"] / gb
            d["sys_s_per_GB"] = d["stime"] / gb
            d["window_s"] = round(dt, 2)
            res[side] = d
        # CPU per delivered byte, both processes over perf's window (secs):
        # delivered at the rate the receiver saw over the /proc window
        rx = res.get("server") or {}
        if all("task_clock_ms" in (res.get(x) or {}) for x in ("server", "client")) and rx.get("bytes"):
            in_window = rx["bytes"] / rx["window_s"] * secs
            tc = [res[x]["task_clock_ms"] for x in ("server", "client")]
            cy = [res[x].get("cycles") for x in ("server", "client")]
            res["cpu"] = {"delivered_bytes": in_window,
                          "task_ns_per_byte": sum(tc) * 1e6 / in_window if None not in tc else None,
                          "cycles_per_byte": sum(cy) / in_window if None not in cy else None,
                          "cycles_counted": None not in cy}
    finally:
        if c:
            c.kill()
        s.kill()
    return res


# --------------------------------------------------------------------------
# profile

def profile(bench, size, secs=4):
    """perf record (cpu-clock, call graphs) of both ib_write_bw processes."""
    k = bench.uniq()
    port = free_port(18600, 300, k)
    sock = os.path.join(bench.tmp, "prof%d.sock" % k)
    common = ["ib_write_bw", "-d", "rocemu0", "-x", "1", "-F", "-p", str(port), "-s", str(size),
              "-D", str(secs + 5)]
    s = Proc(["taskset", "-c", SRV_CPU] + bench.rocemu_cmd("server", sock, "10.91.0.1/24", common))
    c = None
    res = {"size": size, "load": loadavg()}
    try:
        if not wait_listen(port, s):
            res["error"] = "server did not listen"
            return res
        c = Proc(["taskset", "-c", CLI_CPU] + bench.rocemu_cmd("client", sock, "10.91.0.2/24",
                                                                common + ["127.0.0.1"]))
        spid, cpid = exe_pid(s, "ib_write_bw"), exe_pid(c, "ib_write_bw")
        time.sleep(3.0)
        recs = {}
        for side, pid in (("server", spid), ("client", cpid)):
            f = os.path.join(bench.tmp, "perf-%d-%s.data" % (size, side))
            recs[side] = (f, Proc(["perf", "record", "-q", "-e", "cpu-clock", "-F", "4000",
                                   "-o", f, "-p", str(pid), "--", "sleep", str(secs)]))
        for side in recs:
            recs[side][1].wait(secs + 30)
        c.wait(secs + 30)
        res["perftest"] = parse_perftest(c.output())
        for side, (f, _) in recs.items():
            rep = subprocess.run(["perf", "report", "-i", f, "--stdio", "--no-children", "-g", "none",
                                  "--sort", "comm,dso,sym", "--percent-limit", "0.3"],
                                 capture_output=True, text=True, timeout=120)
            res[side] = parse_perf_report(rep.stdout)

            thr = subprocess.run(["perf", "report", "-i", f, "--stdio", "--no-children", "-g", "none",
                                  "--sort", "comm"], capture_output=True, text=True, timeout=120)
            res[side + "_threads"] = parse_perf_report(thr.stdout, comm=True)
    finally:
        if c:
            c.kill()
        s.kill()
    return res


def parse_perf_report(out, comm=False):
    rows = []
    for line in out.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = re.match(r"\s*([\d.]+)%\s+(.*)$", line)
        if not m:
            continue
        rest = m.group(2).split()
        if comm:
            rows.append({"pct": float(m.group(1)), "comm": " ".join(rest)})
        elif len(rest) >= 4:
            rows.append({"pct": float(m.group(1)), "comm": rest[0], "dso": rest[1],
                         "sym": " ".join(rest[3:]) if rest[2].startswith("[") else " ".join(rest[2:])})
    return rows


def parse_perf_children(out):
    """perf report --children: 'children% self% [.] sym' rows."""
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+([\d.]+)%\s+\[.\]\s+(.*)$", line)
        if m:
            rows.append({"children": float(m.group(1)), "self": float(m.group(2)),
                         "sym": m.group(3).strip()})
    return rows


# --------------------------------------------------------------------------

def machine():
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass

    def ver(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
        except Exception:
            return None

    def pkg(p):
        try:
            return subprocess.run(["dpkg-query", "-W", "-f", "${Version}", p], capture_output=True,
                                  text=True, timeout=10).stdout.strip() or None
        except Exception:
            return None
    return {"cpu": cpu, "cpus": os.cpu_count(), "kernel": platform.release(),
            "hugepages_free": open("/proc/meminfo").read().split("HugePages_Free:")[1].split()[0],
            "packages": {p: pkg(p) for p in ("perftest", "qperf", "sockperf", "ucx-utils",
                                              "libfabric-bin", "dpdk", "librte-net-memif23",
                                              "linux-perf")},
            "git": ver(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "describe",
                        "--always", "--dirty"])}


def qps_sweep(qps):
    """The QP counts of a repetition's sweep, in order: qps with a 1-QP run
    inserted just before the largest, its denominator."""
    qs = sorted(q for q in qps if q != 1)
    return qs[:-1] + [1] + qs[-1:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--reps", type=int,
                    help="interleaved repetitions of every measure, 5 by default (2 with --quick)")
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true",
                    help="fewer sizes and steps: a check of the pipeline, marked as not a real run")
    ap.add_argument("--only", default="",
                    help="comma list: lat,bw,qps,base,pmd,acct,prof,host (default: all but host)")
    ap.add_argument("--host-reps", type=int,
                    help="repetitions of the host part (issue 16), 5 by default (1 with --quick)")
    a = ap.parse_args()
    if a.reps is None:
        a.reps = 2 if a.quick else 5
    if a.host_reps is None:
        a.host_reps = 1 if a.quick else 5
    # the host part (issue 16) is not in the default run: five repetitions of
    # everything else take most of the 20 minutes a run may take. It runs
    # alone (--only host, BENCH_ONLY=host make bench) and its section of
    # docs/PERFORMANCE.md is carried over from its own last run.
    only = set(a.only.split(",")) if a.only else {"lat", "bw", "qps", "base", "pmd", "acct", "prof"}
    b = Bench(a.build, a.quick)
    if not os.access(b.rocemu, os.X_OK):
        sys.exit("no %s: build first" % b.rocemu)
    here = os.path.dirname(os.path.abspath(__file__))
    out = a.out or os.path.join(here, "results", "bench-%s.json" %
                                datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ"))
    os.makedirs(os.path.dirname(out), exist_ok=True)

    wsizes = [64, 1024, 4096, 65536, 1048576] if not a.quick else [64, 65536]
    ssizes = [4096, 65536, 1048576] if not a.quick else [65536]
    qps = [16, 64, 256, 1024] if not a.quick else [1024]
    bsizes = [64, 256, 1024, 4096, 16384, 65536, 262144, 1048576]
    D = "2"
    data = {"meta": {"started": datetime.datetime.utcnow().isoformat() + "Z", "reps": a.reps,
                     "server_cpu": SRV_CPU, "client_cpu": CLI_CPU, "machine": machine(),
                     "build": b.build},
            "runs": [], "accounting": [], "profile": []}
    data["meta"]["only"] = sorted(only)
    data["meta"]["quick"] = a.quick
    data["meta"]["cycles_counted"] = bool(shutil.which("perf")) and cycles_counted()
    data["meta"]["near_rtt_ns"] = NEAR_RTT_NS
    if "host" in only:
        data["meta"]["host_reps"] = a.host_reps

    def record(test, rep, size, fn):
        probe0 = machine_probe(b.build)
        t0 = time.time()
        load = loadavg()
        try:
            r = fn()
        except Exception as e:  # recorded, not fatal
            r = {"error": "%s: %s" % (type(e).__name__, e)}
        t1 = time.time()
        probe1 = machine_probe(b.build)
        r.update({"test": test, "rep": rep, "size": size, "load": load,
                  "t": round(t0 - tstart, 1), "dur_s": round(t1 - t0, 1),
                  "probe": [probe0, probe1], "mode": run_mode(probe0, probe1),
                  "ok": "error" not in r})
        data["runs"].append(r)
        short = {k: r[k] for k in r if k in ("t_typical", "bw_Bps", "msgrate_mpps", "lat_us",
                                             "lat_p50_us", "msg_per_s", "rx_pps", "bw", "lat",
                                             "host_pps", "cpu", "mode", "error")}
        print("[%6.0fs] rep %d %-22s %8s %s" % (time.time() - tstart, rep, test, size, short),
              flush=True)
        save()

    def save():
        data["meta"]["finished"] = datetime.datetime.utcnow().isoformat() + "Z"
        with open(out, "w") as f:
            json.dump(data, f, indent=1)

    tstart = time.time()

    lsizes = [2, 16, 128, 1024, 8192, 65536]

    def qperf_lat():
        o, e = b.qperf(["-t", "1", "-oo", "msg_size:2:64K:*8", "tcp_lat"])
        lats, _ = parse_qperf(o)
        if len(lats) != len(lsizes):
            return {"error": e or "got %d results" % len(lats), "log_tail": o[-400:]}
        return {"lat_us": lats[0], "lat_by_size": dict(zip(map(str, lsizes), lats))}

    def qperf_bw():
        o, e = b.qperf(["-t", "1", "-oo", "msg_size:64:1M:*4", "tcp_bw"])
        _, bws = parse_qperf(o)
        if len(bws) != len(bsizes):
            return {"error": e or "got %d results" % len(bws), "log_tail": o[-400:]}
        return {"bw_by_size": dict(zip(map(str, bsizes), bws))}

    def sp(mode, size, secs):
        o, e = b.sockperf(mode, size, secs)
        r = parse_sockperf(o)
        if mode == "tp" and "msg_per_s" in r:
            r["bw_Bps"] = r["msg_per_s"] * size
        if not r:
            r = {"error": e or "no summary", "log_tail": o[-400:]}
        return r

    def ucx(test, size, iters):
        o, e = b.ucx(test, size, iters)
        r = parse_ucx(o)
        if "msg_per_s" in r:
            r["bw_Bps"] = r["msg_per_s"] * size
        return r or {"error": e or "no Final line", "log_tail": o[-400:]}

    def fab(size, iters):
        o, e = b.fabric(size, iters)
        r = parse_fabric(o)
        if r:
            # ping-pong: one message each way per round trip; lat_us is one way
            r["bw_Bps"] = size / (r["lat_us"] * 1e-6)
        return r or {"error": e or "no result", "log_tail": o[-400:]}

    for rep in range(a.reps):
        steps = []
        if "lat" in only:
            steps += [("write_lat", 2, lambda: b.perftest("ib_write_lat", ["-s", "2", "-n", "3000"], timeout=120)),
                      ("read_lat", 2, lambda: b.perftest("ib_read_lat", ["-s", "2", "-n", "20000"]))]
            for s in ([2, 65536] if not a.quick else [2]):
                steps.append(("send_lat", s, lambda s=s: b.perftest(
                    "ib_send_lat", ["-s", str(s), "-n", "20000" if s < 65536 else "5000"])))
        if "base" in only:
            # each at 2 bytes, as ib_*_lat -s 2, where the tool can: sockperf's
            # smallest message is 14 bytes (its header)
            steps += [("qperf_tcp_lat", 2, qperf_lat),
                      ("sockperf_pp", 14, lambda: sp("pp", 14, 3)),
                      ("ucx_tag_lat", 2, lambda: ucx("tag_lat", 2, 50000)),
                      ("fi_pingpong", 2, lambda: fab(2, 20000))]
        if "bw" in only:
            for s in wsizes:
                steps.append(("write_bw", s, lambda s=s: b.perftest("ib_write_bw", ["-s", str(s), "-D", D])))
            # the same at 64 KiB through memif's PMD (the direct channel
            # off): its bandwidth and copies per byte beside the default's
            steps.append(("write_bw_pmd", 65536, lambda: b.perftest(
                "ib_write_bw", ["-s", "65536", "-D", D], mode="memifpmd")))
        if "base" in only:
            steps.append(("qperf_tcp_bw", "64-1M", qperf_bw))
            for s in ([64, 4096, 65000] if not a.quick else [65000]):
                steps.append(("sockperf_tp", s, lambda s=s: sp("tp", s, 2)))
            for s in ([64, 4096, 65536, 1048576] if not a.quick else [65536]):
                n = max(2000, min(200000, int(4e9 / s / 8)))
                steps.append(("ucx_tag_bw", s, lambda s=s, n=n: ucx("tag_bw", s, n)))
            for s in ([65536, 1048576] if not a.quick else [1048576]):
                steps.append(("fi_pingpong_bw", s, lambda s=s: fab(s, 2000)))
        if "bw" in only:
            for s in ssizes:
                steps.append(("send_bw", s, lambda s=s: b.perftest("ib_send_bw", ["-s", str(s), "-D", D])))
        if "qps" in only:
            # perftest signals one WR in 100 (cq_mod) per QP: with 1024 QPs the
            # first completion needs 1024 x 100 x 64 KiB = 6.7 GB on the wire,
            # more than a 2 s window moves, so many QPs get a longer window.
            # The 1-QP run the 1024-QP one is divided by goes right beside it
            # (before it, after it in the reversed repetitions), so that the
            # two see the same machine mode as often as they can; the report
            # pairs them and counts a mixed pair apart (qps_sweep)
            for q in qps_sweep(qps):
                dq = D if q < 256 else str(max(int(D), 6))
                steps.append(("write_bw_qps", q, lambda q=q, dq=dq: b.perftest(
                    "ib_write_bw", ["-s", "65536", "-q", str(q), "-D", dq], timeout=120)))
        if "pmd" in only:
            steps.append(("memif_testpmd", 64, b.testpmd))
        if "acct" in only:
            # CPU per delivered byte, copies per byte, system calls: TCP and
            # rocemu in every repetition, among the others
            for kind in ("tcp", "rocemu"):
                steps.append(("acct_" + kind, 65536, lambda kind=kind: account(b, kind)))
        # interleave: odd repetitions run the list backwards
        if rep % 2:
            steps.reverse()
        for test, size, fn in steps:
            record(test, rep, size, fn)

    # ---- the host (issue 16, docs/host.md): its own repetitions, interleaved
    # among themselves. Same-host process to process through a rocemu host
    # against the direct memif pair, and the host's forwarding rate of
    # 64-byte WRITEs (4 QPs) against the direct pair and the raw memif link
    # (testpmd, as memif_testpmd, again here so that every ratio is within
    # one repetition of this part).
    if "host" in only:
        for rep in range(a.host_reps):
            steps = []
            for mode in ("direct", "host", "hostcap"):
                m = "memif" if mode == "direct" else mode
                steps += [("hp_%s_write_bw" % mode, 65536, lambda m=m: b.perftest(
                              "ib_write_bw", ["-s", "65536", "-n", "5000"], timeout=120, mode=m)),
                          ("hp_%s_send_lat" % mode, 2, lambda m=m: b.perftest(
                              "ib_send_lat", ["-s", "2", "-n", "10000"], timeout=120, mode=m))]
            for mode in ("direct", "uplink", "hostfwd"):
                m = "memif" if mode == "direct" else mode
                steps.append(("fwd_%s" % mode, 64, lambda m=m: b.perftest(
                    "ib_write_bw", ["-s", "64", "-q", "4", "-D", "3"], timeout=120, mode=m)))
            steps.append(("host_raw_link", 64, b.testpmd))
            if rep % 2:
                steps.reverse()
            for test, size, fn in steps:
                record(test, rep, size, fn)

    if "prof" in only and shutil.which("perf"):
        for size in (65536, 64):
            try:
                r = profile(b, size)
            except Exception as e:
                r = {"size": size, "error": "%s: %s" % (type(e).__name__, e)}
            data["profile"].append(r)
            print("profile", size, "done", r.get("error", ""), flush=True)
            save()
    save()
    shutil.rmtree(b.tmp, ignore_errors=True)
    print(out)


if __name__ == "__main__":
    main()
