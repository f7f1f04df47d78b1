#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Turn a perf_bench.py JSON file into docs/PERFORMANCE.md and SVG plots.

usage: perf_report.py RESULT.json [--doc docs/PERFORMANCE.md] [--img docs/img]

Medians with [min-max] over the repetitions; every ratio is taken between
numbers of the same run. The hand-written analysis (profile reading,
recommendations) lives in bench/perf_analysis.md and is included verbatim.
"""
import argparse
import glob
import json
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_stats as bs  # noqa: E402

# key metric of each test: (field, unit label, scale, higher is better)
LAT_TESTS = {
    "write_lat": ("t_typical", "ib_write_lat over rocemu (t_typical)"),
    "send_lat": ("t_typical", "ib_send_lat over rocemu (t_typical)"),
    "read_lat": ("t_typical", "ib_read_lat over rocemu (t_typical)"),
    "qperf_tcp_lat": ("lat_us", "qperf tcp_lat"),
    "sockperf_pp": ("lat_p50_us", "sockperf ping-pong TCP (p50)"),
    "ucx_tag_lat": ("lat_p50_us", "UCX tag_lat, UCX_TLS=tcp (p50)"),
    "fi_pingpong": ("lat_us", "libfabric fi_pingpong -p tcp (msg)"),
}
TCP_LAT = ["qperf_tcp_lat", "sockperf_pp", "ucx_tag_lat", "fi_pingpong"]
BW_TESTS = {
    "write_bw": "ib_write_bw over rocemu",
    "send_bw": "ib_send_bw over rocemu",
    "qperf_tcp_bw": "qperf tcp_bw",
    "sockperf_tp": "sockperf throughput TCP",
    "ucx_tag_bw": "UCX tag_bw, UCX_TLS=tcp",
    "fi_pingpong_bw": "fi_pingpong -p tcp (ping-pong)",
}
TCP_BW = ["qperf_tcp_bw", "sockperf_tp", "ucx_tag_bw", "fi_pingpong_bw"]
# the field every baseline is judged by
BASE_FIELD = dict({t: LAT_TESTS[t][0] for t in TCP_LAT}, **{t: "bw_Bps" for t in TCP_BW},
                  memif_testpmd="rx_pps", write_bw="bw_Bps")
BASE_FIELD["qperf_tcp_bw"] = None  # series() reads its bw_by_size


def med(xs):
    return statistics.median(xs) if xs else None


def spread(xs, fmt):
    if not xs:
        return "failed"
    if len(xs) == 1:
        return fmt(xs[0])
    return "%s [%s-%s]" % (fmt(med(xs)), fmt(min(xs)), fmt(max(xs)))


def fus(x):
    return "%.1f" % x if x < 100 else "%.0f" % x


def fbw(x):  # bytes/s -> MB/s (10^6)
    return "%.0f" % (x / 1e6) if x >= 1e7 else "%.2f" % (x / 1e6)


def fsize(s):
    s = int(s)
    if s >= 1 << 20 and s % (1 << 20) == 0:
        return "%d MiB" % (s >> 20)
    if s >= 1024 and s % 1024 == 0:
        return "%d KiB" % (s >> 10)
    return "%d B" % s


class Data:
    def __init__(self, d):
        self.d = d
        self.runs = d["runs"]
        self.reps = d["meta"]["reps"]

    def series(self, test, field, size=None):
        """{rep: value} for one test/size."""
        out = {}
        for r in self.runs:
            if r["test"] != test or not r.get("ok"):
                continue
            if test in ("qperf_tcp_bw",):
                v = r.get("bw_by_size", {}).get(str(size))
            elif test == "qperf_tcp_lat" and size is not None and str(size) != "2":
                v = r.get("lat_by_size", {}).get(str(size)) if field == "lat_us" else None
            else:
                if size is not None and str(r["size"]) != str(size):
                    continue
                v = r.get(field)
            if v is not None and not (isinstance(v, float) and math.isnan(v)):
                out[r["rep"]] = v
        return out

    def by_size(self, test, field):
        """{size: [value per repetition]} of one test."""
        out = {}
        for s in self.sizes(test):
            v = list(self.series(test, field, s).values())
            if v:
                out[s] = v
        return out

    def nearest_size(self, test, want):
        """The size of test's closest (by ratio) to want: a tool that cannot
        send 2 bytes is compared at its smallest message."""
        sizes = list(self.by_size(test, BASE_FIELD[test]))
        if not sizes:
            return None
        return min(sizes, key=lambda s: abs(math.log(s / want)))

    def acct(self, kind):
        """The accounting runs of kind (tcp, rocemu) merged: every number is
        the median over the repetitions; None when none succeeded. Runs of
        old JSON files (one "accounting" entry per kind) count as one."""
        rs = [r for r in self.runs if r["test"] == "acct_" + kind and r.get("ok")]
        rs += [a for a in self.d.get("accounting", []) if a.get("kind") == kind and not a.get("error")]
        if not rs:
            return None
        m = merge_median(rs)
        m["reps"] = len(rs)
        m["all"] = rs
        return m

    def failures(self):
        return [r for r in self.runs if not r.get("ok")]

    def sizes(self, test):
        if test == "qperf_tcp_bw":
            for r in self.runs:
                if r["test"] == test and r.get("ok"):
                    return sorted(int(k) for k in r["bw_by_size"])
            return []
        if test == "qperf_tcp_lat":
            for r in self.runs:
                if r["test"] == test and r.get("ok") and "lat_by_size" in r:
                    return sorted(int(k) for k in r["lat_by_size"])
        return sorted({int(r["size"]) for r in self.runs if r["test"] == test})


def merge_median(ds):
    """Dicts of the same shape -> one dict whose numbers are the medians of
    theirs (recursively); other values are taken from the first."""
    out = {}
    keys = []
    for d in ds:
        keys += [k for k in d if k not in keys]
    for k in keys:
        vs = [d[k] for d in ds if k in d and d[k] is not None]
        if not vs:
            out[k] = None
        elif all(isinstance(v, dict) for v in vs):
            out[k] = merge_median(vs)
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vs):
            nums = [v for v in vs if not (isinstance(v, float) and math.isnan(v))]
            out[k] = statistics.median(nums) if nums else float("nan")
        else:
            out[k] = vs[0]
    return out


def failures_table(title, fails):
    """The failed runs fails as a table under title, as lines; none when nothing failed."""
    if not fails:
        return []
    return ([title, "| test | size | rep | error |\n|---|---|---|---|"]
            + ["| %s | %s | %s | %s |" % (r["test"], r["size"], r["rep"], r.get("error", "")[:120])
               for r in fails]
            + [""])


def mratio(num, den, per_rep, fmt):
    """The ratio of two {rep: value} series' medians, then the range of the
    per-repetition ratios (per_rep) as a check of how steady it is."""
    r = bs.ratio(list(num.values()), list(den.values()))
    if r is None:
        return "no pair"
    return "%s (per repetition %s-%s)" % (fmt(r), fmt(min(per_rep)), fmt(max(per_rep))) if per_rep else fmt(r)


def ratio_stats(num, dens, best=min):
    """Per repetition: num[rep] / best(den[rep] over dens); median and range."""
    rs = []
    for rep, v in num.items():
        ds = [d[rep] for d in dens if rep in d]
        if ds:
            rs.append(v / best(ds))
    return rs


# --------------------------------------------------------------------------
# plots

def size_curve(data, test, field, div=1.0):
    """Test's field against message size: the sizes, the medians, and how far
    the minimum and maximum of the repetitions lie below and above them."""
    xs, ys, lo, hi = [], [], [], []
    for s in data.sizes(test):
        v = [x / div for x in data.series(test, field, s).values()]
        if v:
            xs.append(s)
            ys.append(med(v))
            lo.append(med(v) - min(v))
            hi.append(max(v) - med(v))
    return xs, ys, lo, hi


def plots(data, img):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("perf_report: no matplotlib; plots skipped", file=sys.stderr)
        return []
    made = []
    plt.rcParams.update({"font.size": 9, "svg.fonttype": "none", "svg.hashsalt": "rocemu"})

    def plot_sizes(name, ylabel, title, curves, extra=None):
        """One log-log plot against message size: a curve (median, range)
        per (test, field, divisor, label, rocemu's own?), saved as img/name."""
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for test, field, div, label, rocemu in curves:
            xs, ys, lo, hi = size_curve(data, test, field, div)
            if xs:
                ax.errorbar(xs, ys, yerr=[lo, hi], marker="o" if rocemu else "s",
                            linestyle="-" if rocemu else "--", capsize=3, label=label)
        if extra:
            extra(ax)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        p = os.path.join(img, name)
        fig.savefig(p, metadata={"Date": None})
        plt.close(fig)
        made.append(p)

    plot_sizes("perf-latency.svg", "one-way latency (µs), median and range",
               "Latency: rocemu on memif vs TCP loopback baselines (same run)",
               [(t, LAT_TESTS[t][0], 1.0, LAT_TESTS[t][1],
                 t.endswith("_lat") and not t.startswith(("qperf", "ucx")))
                for t in ("send_lat", "write_lat", "read_lat", "qperf_tcp_lat", "sockperf_pp",
                          "ucx_tag_lat", "fi_pingpong")])

    def raw_link(ax):
        pmd = list(data.series("memif_testpmd", "rx_pps", 64).values())
        if pmd:
            ax.errorbar([64], [med(pmd) * 64 / 1e6], marker="*", markersize=10, linestyle="none",
                        label="raw memif link, testpmd 64 B frames (payload+headers)")

    plot_sizes("perf-bandwidth.svg", "bandwidth (MB/s = 10^6 B/s), median and range",
               "Bandwidth: rocemu on memif vs TCP loopback baselines (same run)",
               [(t, "bw_Bps", 1e6, BW_TESTS[t], t in ("write_bw", "send_bw"))
                for t in ("write_bw", "send_bw", "qperf_tcp_bw", "sockperf_tp", "ucx_tag_bw",
                          "fi_pingpong_bw")],
               extra=raw_link)
    return made


# --------------------------------------------------------------------------
# profile

def layer(row):
    comm, dso, sym = row.get("comm", ""), row.get("dso", ""), row.get("sym", "")
    if dso == "[vdso]" or sym.startswith("clock_gettime") or sym.startswith("rocemu_now_ns"):
        return "clock reads (rocemu_now_ns -> clock_gettime)"
    if ("librte_net.so" in dso or sym.startswith("roce_icrc") or sym.startswith("crc")
            or sym.startswith("roce_crc32")):
        return "ICRC (CRC-32: our VPCLMULQDQ/PCLMULQDQ folding)"
    if "librte_net_memif" in dso:
        return "memif PMD: rx/tx bursts, copies into/out of the shared ring"
    if "librte_" in dso:
        return "DPDK mempool/mbuf/ring/ethdev"
    if dso.startswith("[kernel"):
        return "kernel (scheduler, system calls, interrupts)"
    if "libc" in dso:
        if "mem" in sym:
            return "memcpy (gather into mbuf, scatter/remote write into MR)"
        if "pthread" in sym or "mutex" in sym or "lll_" in sym:
            return "engine lock (pthread mutex)"
        return "libc other"
    if dso.startswith("ib_") or comm == dso:
        return "perftest itself"
    if "libibverbs" in dso:
        if sym.startswith("rocemu_op_") or sym.startswith("wc_from") or sym.startswith("send_wr_from"):
            return "verbs provider"
        if sym.startswith("rocemu_mem_") or sym.startswith("mem_"):
            return "memory (translation, copies' bookkeeping)"
        if sym.startswith("roce_"):
            return "wire codec (headers, parse)"
        if (sym.startswith("rocemu_port") or sym in ("progress_main", "rx_device", "idle_sleep")
                or sym.startswith("port_") or sym.startswith("neigh")):
            return "port (progress loop, rx dispatch, tx buffer)"
        return "transport (requester, responder, completer, CQ)"
    return "other"


def profile_tables(prof):
    out = []
    for p in prof:
        size = p.get("size")
        if p.get("error"):
            out.append("Profile of `ib_write_bw -s %d`: failed (%s).\n" % (size, p["error"]))
            continue
        pt = p.get("perftest", {})
        out.append("### `ib_write_bw -s %s` (%s during the profile, load %s)\n" % (
            size, ("%.1f MB/s, %.3f Mpps" % (pt["bw_Bps"] / 1e6, pt["msgrate_mpps"]))
            if pt.get("bw_Bps") else "no result", " ".join("%.1f" % x for x in p.get("load", []))))
        for side, who in (("client", "client = requester (sends the WRITEs)"),
                          ("server", "server = responder (places them)")):
            rows = p.get(side) or []
            thr = p.get(side + "_threads") or []
            out.append("**%s** — samples by thread: %s\n" % (who, ", ".join(
                "%s %.0f%%" % (t["comm"], t["pct"]) for t in thr) or "none"))
            layers = {}
            for r in rows:
                layers[layer(r)] = layers.get(layer(r), 0) + r["pct"]
            out.append("| layer | share of samples |\n|---|---|")
            for k, v in sorted(layers.items(), key=lambda kv: -kv[1]):
                out.append("| %s | %.1f%% |" % (k, v))
            out.append("\nTop functions (self time):\n")
            out.append("| % | thread | object | function |\n|---|---|---|---|")
            for r in rows[:14]:
                out.append("| %.1f | %s | %s | %s |" % (r["pct"], r.get("comm", ""),
                                                     os.path.basename(r["dso"]), r["sym"][:60]))
            # no inclusive (children) table: DPDK and -O2 code have no frame
            # pointers, so perf's call chains are too broken to attribute callees
            out.append("")
    return "\n".join(out)



# --------------------------------------------------------------------------
# the host (issue 16): a section of its own, which a host-only run
# (`BENCH_ONLY=host make bench`) replaces in an existing document

HOST_BEGIN = "<!-- host section: begin (bench/perf_report.py; BENCH_ONLY=host make bench redoes it) -->"
HOST_END = "<!-- host section: end -->"
HOST_MODES = (("direct", "direct memif pair (two standalone `rocemu run`, today's way)"),
              ("host", "through a host, no capture (a direct ring the host set up)"),
              ("hostcap", "through a host with `--capture` (every frame via the host's thread)"))
FWD_MODES = (("direct", "direct memif pair (no host; the applications' own rate)"),
             ("uplink", "uplink <-> attached process (client standalone on the host's memif uplink)"),
             ("hostfwd", "process <-> process through the host's thread (`--no-direct`, no capture)"))


def host_runs(data):
    return [r for r in data.runs if r["test"].startswith(("hp_", "fwd_")) or r["test"] == "host_raw_link"]


def host_section(data, with_failures):
    runs = host_runs(data)
    if not runs:
        return ""
    m = data.d["meta"]
    L = [HOST_BEGIN, "## One NIC per host: `rocemu host` (issue 16)\n"]
    A = L.append
    t0 = min(r["t"] for r in runs)
    t1 = max(r["t"] + r.get("dur_s", r.get("wall_s", 0)) for r in runs)
    reps = len({r["rep"] for r in runs})
    A("From `%s` (run started %s; this part %.0f s, %d repetition(s) interleaved, the order reversed on "
      "every other one; load average (1 min) %s). Medians [min-max]; every ratio is the ratio of the "
      "medians, followed by the range of the ratios taken within each repetition. Server "
      "pinned to CPU %s, client to CPU %s; `rocemu host` is not pinned (its forwarding thread "
      "takes whichever CPU is free, so on 2 CPUs it competes with both sides). Design, tests and "
      "what is not met: `docs/host.md`.\n" % (
          os.path.basename(getattr(data, "path", "?")), m.get("started", "?")[:19].replace("T", " "),
          t1 - t0, reps, spread([r["load"][0] for r in runs if r.get("load")], lambda x: "%.1f" % x),
          m.get("server_cpu"), m.get("client_cpu")))

    # same-host process to process
    A("### Same-host process to process\n")
    A("`ib_write_bw -s 65536 -n 5000` (MB/s = 10^6 B/s, from the message rate) and "
      "`ib_send_lat -s 2 -n 10000` (t_typical, µs), the server and client processes on one host. "
      "Issue 16's targets: through the host `ib_write_bw` >= 0.8x and `ib_send_lat` <= 1.5x the "
      "direct memif pair.\n")
    A("| mode | ib_write_bw MB/s | ratio to direct | ib_send_lat µs | ratio to direct |\n|---|---|---|---|---|")
    bw = {mo: data.series("hp_%s_write_bw" % mo, "bw_Bps", 65536) for mo, _ in HOST_MODES}
    lat = {mo: data.series("hp_%s_send_lat" % mo, "t_typical", 2) for mo, _ in HOST_MODES}
    ratios = {}
    for mo, label in HOST_MODES:
        rb = ratio_stats(bw[mo], [bw["direct"]]) if mo != "direct" else None
        rl = ratio_stats(lat[mo], [lat["direct"]]) if mo != "direct" else None
        ratios[mo] = (bs.ratio(list(bw[mo].values()), list(bw["direct"].values())),
                      bs.ratio(list(lat[mo].values()), list(lat["direct"].values())))
        A("| %s | %s | %s | %s | %s |" % (
            label, spread(list(bw[mo].values()), fbw),
            mratio(bw[mo], bw["direct"], rb, lambda x: "%.2fx" % x) if mo != "direct" else "1",
            spread(list(lat[mo].values()), fus),
            mratio(lat[mo], lat["direct"], rl, lambda x: "%.2fx" % x) if mo != "direct" else "1"))
    rb, rl = ratios["host"]
    A("")
    A("Targets on the default path (a host without capture): `ib_write_bw` >= 0.8x: %s; "
      "`ib_send_lat` <= 1.5x: %s.\n" % (
          ("**%s** (%.2fx)" % ("met" if rb >= 0.8 else "not met", rb)) if rb else "not measured",
          ("**%s** (%.2fx)" % ("met" if rl <= 1.5 else "not met", rl)) if rl else "not measured"))

    # forwarding rate
    A("### The host's forwarding rate (64-byte frames)\n")
    A("`ib_write_bw -s 64 -q 4 -D 3`: every WRITE is one 64-byte-payload frame (124 bytes on the "
      "wire with headers and ICRC). *Messages/s* is perftest's message rate; *host frames/s* is "
      "what the host's own counters (`rocemu stat --host --json`, sampled every 0.5 s while the "
      "client runs; median of the intervals with traffic) say it forwarded: frames it delivered to "
      "a process, plus, on the uplink, frames from the process to the uplink (the ACKs). The raw "
      "link is `dpdk-testpmd` txonly -> rxonly over memif (64-byte frames, Rx-pps), as in the "
      "bandwidth table, run again within each repetition of this part.\n")
    A("| path | messages/s (M) | host frames/s (M) | host frames/s vs raw link | messages/s vs direct pair |\n|---|---|---|---|---|")
    raw = data.series("host_raw_link", "rx_pps", 64)
    msg = {mo: {k: v * 1e6 for k, v in data.series("fwd_%s" % mo, "msgrate_mpps", 64).items()}
           for mo, _ in FWD_MODES}
    hpps = {mo: data.series("fwd_%s" % mo, "host_pps", 64) for mo, _ in FWD_MODES}
    mfmt = lambda x: "%.3f" % (x / 1e6)
    for mo, label in FWD_MODES:
        rr = ratio_stats(hpps[mo], [raw]) if hpps[mo] else None
        rd = ratio_stats(msg[mo], [msg["direct"]]) if mo != "direct" else None
        A("| %s | %s | %s | %s | %s |" % (
            label, spread(list(msg[mo].values()), mfmt),
            spread(list(hpps[mo].values()), mfmt) if hpps[mo] else "-",
            mratio(hpps[mo], raw, rr, lambda x: "%.3f" % x) if rr else "-",
            mratio(msg[mo], msg["direct"], rd, lambda x: "%.2fx" % x) if mo != "direct" else "1"))
    A("| raw memif link (testpmd txonly -> rxonly) | | %s (Rx-pps) | 1 | |" % (
        spread(list(raw.values()), mfmt) if raw else "failed"))
    A("")
    A("Reading it: where a path's message rate is close to the direct pair's, the applications "
      "(their transports) set the rate, and the host forwards at least that much; where it is "
      "lower, the host's thread is the bottleneck and its frames/s is its forwarding rate on this "
      "machine. The raw link is an upper bound no RoCE path reaches: testpmd sends without a "
      "transport.\n")
    if with_failures:
        for line in failures_table("Failures in this part:\n",
                                   [r for r in runs if not r.get("ok")]):
            A(line)
    A("Rerun just this part (about %d min on this machine): `BENCH_ONLY=host make bench` "
      "(or `bench/perf_bench.py build --only host --host-reps 5`, then `bench/perf_report.py JSON "
      "--doc docs/PERFORMANCE.md`, which replaces this section only).\n" % max(1, round((t1 - t0) / 60)))
    A(HOST_END)
    return "\n".join(L) + "\n"


def old_host_section(doc):
    """The host section of an existing document, "" when it has none."""
    text = open(doc).read() if os.path.exists(doc) else ""
    b, e = text.find(HOST_BEGIN), text.find(HOST_END)
    return text[b:e + len(HOST_END)] + "\n" if b >= 0 and e > b else ""


def replace_host_section(doc, section):
    """The document with its host section replaced (appended if it has none)."""
    text = open(doc).read() if os.path.exists(doc) else "# rocemu performance\n"
    b, e = text.find(HOST_BEGIN), text.find(HOST_END)
    if b >= 0 and e > b:
        return text[:b] + section.rstrip("\n") + text[e + len(HOST_END):]
    return text.rstrip("\n") + "\n\n" + section


# --------------------------------------------------------------------------
# baselines: checked, then the best trustworthy one at a size (issue 17)

def baseline(data, test, want):
    """One baseline's candidate at the size nearest to want: its name (with
    the size when it is not want), its values there, and why it is suspect."""
    field = BASE_FIELD[test]
    bsz = data.by_size(test, field)
    s = data.nearest_size(test, want)
    label = (LAT_TESTS.get(test) or (None, BW_TESTS.get(test, test)))[1]
    if s is not None and s != want:
        label += " at %s" % fsize(s)
    return {"name": label, "test": test, "size": s, "values": bsz.get(s, []) if s else [],
            "suspect": bs.suspect_reasons(bsz, s, fsize, fmt_val=BASE_FMT[test]) if s else []}


def tcp_best(data, kind, want):
    """(chosen, best, note, candidates) among the four TCP tools at want
    bytes: kind 'lat' (lowest wins) or 'bw' (highest wins)."""
    tests = TCP_LAT if kind == "lat" else TCP_BW
    cands = [baseline(data, t, want) for t in tests]
    chosen, best, note = bs.choose_baseline(cands, higher_is_better=(kind == "bw"))
    return chosen, best, note, cands


# how a baseline's values read in a sentence
BASE_FMT = dict({t: (lambda x: fus(x) + " µs") for t in TCP_LAT},
                **{t: (lambda x: fbw(x) + " MB/s") for t in TCP_BW},
                memif_testpmd=lambda x: "%.2f Mpps" % (x / 1e6))


def ftimes(x):
    return "%.2f" % x if x is not None else "?"


def cpu_metric(data):
    """('cycles_per_byte', 'CPU cycles') where the VM counts cycles, else
    ('task_ns_per_byte', 'task-clock ns')."""
    if data.d["meta"].get("cycles_counted"):
        return "cycles_per_byte", "CPU cycles"
    return "task_ns_per_byte", "task-clock ns"


def acct_series(data, kind, *path):
    """One number of the accounting runs of kind, per repetition."""
    out = []
    for r in data.acct(kind)["all"] if data.acct(kind) else []:
        x = r
        for k in path:
            x = (x or {}).get(k)
        if isinstance(x, (int, float)) and not (isinstance(x, float) and math.isnan(x)):
            out.append(x)
    return out


def targets17(data):
    """Issue 17's target table: each row the rocemu figure, the baseline
    used with its spread, the ratio of the medians, the target, and met or
    the distance; below it, the baselines passed over and why."""
    L = []
    A = L.append
    notes = []
    res = {}
    A("| measure | rocemu, median [min-max] | baseline used, median [min-max] ±half-spread | ratio of medians | target | result |")
    A("|---|---|---|---|---|---|")

    def row(key, measure, num, fmt, base, bfmt, target, higher, r=None, tlabel=None):
        r = bs.ratio(num, base["values"]) if r is None and base else r
        res[key] = r
        bcell = "%s: %s" % (base["name"], bs.fmt_summary(base["values"], bfmt)) if base else "-"
        if base and base.get("suspect"):
            bcell += " (suspect)"
        A("| %s | %s | %s | %s | %s %s | %s |" % (
            measure, bs.fmt_summary(num, fmt, spread=False), bcell,
            "**%s**" % ftimes(r) if r is not None else "no pair",
            ">=" if higher else "<=", tlabel or target, bs.verdict(r, target, higher)))

    # copies per delivered byte: an absolute figure (TCP: 2 by construction)
    cp = acct_series(data, "rocemu", "copies", "total")
    res["copies"] = bs.median(cp)
    shown = acct_series(data, "rocemu", "copies", "direct")
    via = ("memif's direct channel, %.0f%% of the frame bytes" % (100 * bs.median(shown))
           if shown and bs.median(shown) else "the PMD's copy mode")
    A("| copies per delivered byte on memif, default (%s; ROCEMU_STATS counters) | %s | (TCP over loopback: 2, by construction) | - | <= 2.0 | %s |" % (
        via, bs.fmt_summary(cp, "%.2f".__mod__, spread=False),
        # judged at the precision shown: what is past 2.00 is the few frames
        # the channel copies (ARP, ND)
        bs.verdict(round(bs.median(cp), 2) if cp else None, 2.0, False)))
    # memif through the PMD's copies (ROCEMU_MEMIF_DIRECT=0, what testpmd or
    # VPP peers get): its copies, and its 64 KiB bandwidth against the
    # default's in the same repetitions
    pser = data.series("write_bw_pmd", "copies", 65536)
    pcp = [v["total"] for v in pser.values() if isinstance(v, dict) and v.get("total")]
    res["copies_pmd"] = bs.median(pcp)
    if pcp:
        A("| copies per delivered byte on memif, PMD path (`ROCEMU_MEMIF_DIRECT=0`; a testpmd or VPP peer) | %s | (TCP over loopback: 2, by construction) | - | <= 2.0 | %s |" % (
            bs.fmt_summary(pcp, "%.2f".__mod__, spread=False),
            bs.verdict(round(bs.median(pcp), 2), 2.0, False)))
    pmdbw = data.series("write_bw_pmd", "bw_Bps", 65536)
    defbw = data.series("write_bw", "bw_Bps", 65536)
    per = [pmdbw[k] / defbw[k] for k in pmdbw if defbw.get(k)]
    if per:
        pmd_note = ("memif through the PMD (`ROCEMU_MEMIF_DIRECT=0`): `ib_write_bw -s 65536` %s MB/s, "
                       "%s the default's per repetition (median [min-max] of %d); copies per byte %s." % (
                           bs.fmt_summary(list(pmdbw.values()), fbw, spread=False),
                           "%s [%s-%s]" % (ftimes(bs.median(per)), ftimes(min(per)), ftimes(max(per))),
                           len(per), "%.2f" % bs.median(pcp) if pcp else "not counted"))
    else:
        pmd_note = None

    wb = list(data.series("write_bw", "bw_Bps", 65536).values())
    ch, best, note, cands = tcp_best(data, "bw", 65536)
    res["bw_base"] = ch
    row("bw", "`ib_write_bw -s 65536` / best TCP at 64 KiB", wb, fbw, ch, fbw, 1.5, True)
    if note:
        notes.append("64 KiB bandwidth: " + note + ".")

    w64 = [v * 1e6 for v in data.series("write_bw", "msgrate_mpps", 64).values()]
    pmd = {"name": "raw memif link, testpmd 64 B (pps)", "test": "memif_testpmd", "size": 64,
           "values": list(data.series("memif_testpmd", "rx_pps", 64).values())}
    pmd["suspect"] = (bs.suspect_reasons({64: pmd["values"]}, 64, fsize, fmt_val=BASE_FMT["memif_testpmd"])
                      if pmd["values"] else [])
    if pmd["suspect"]:
        notes.append("raw memif link: suspect (%s), used anyway: it is the only baseline of its kind." %
                     "; ".join(pmd["suspect"]))
    mfmt = lambda x: "%.3f M" % (x / 1e6)
    row("rate", "`ib_write_bw -s 64` message rate / raw memif 64 B pps", w64, mfmt, pmd, mfmt, 0.5, True)

    lch, lbest, lnote, lcands = tcp_best(data, "lat", 2)
    res["lat_base"] = lch
    for key, test in (("send_lat", "send_lat"), ("write_lat", "write_lat")):
        v = list(data.series(test, "t_typical", 2).values())
        row(key, "`ib_%s -s 2` / best TCP latency" % test, v, fus, lch, fus,
            0.2 if key == "send_lat" else 1.0, False)
    if lnote:
        notes.append("2-byte latency: " + lnote + ".")

    field, unit = cpu_metric(data)
    rc = acct_series(data, "rocemu", "cpu", field)
    tc = acct_series(data, "tcp", "cpu", field)
    tb = {"name": "TCP, qperf tcp_bw -m 64K", "values": tc,
          "suspect": bs.suspect_reasons({65536: tc}, 65536, fsize) if tc else []}
    if tb["suspect"]:
        notes.append("TCP's CPU per byte: suspect (%s), used anyway: qperf is the one TCP tool "
                     "measured under perf stat." % "; ".join(tb["suspect"]))
    row("cpu", "%s per delivered byte at 64 KiB (both processes, `perf stat`) / TCP's" % unit,
        rc, "%.3f".__mod__, tb, "%.3f".__mod__, 0.5, False)

    qp = qps_pairs(data.runs, 1024)
    # files from before the machine probe: no pair is known to be mixed
    probed = any("probe" in r for r in data.runs)
    same = [p for p in qp if p["mode"] != "mixed" or not probed]
    per_rep = [p["ratio"] for p in same]
    worst = min(per_rep) if per_rep else None
    res["qps_worst"] = worst
    res["qps_pairs"] = qp
    A("| 1024 QPs / 1 QP bandwidth (64 KiB), worst repetition | %s | 1 QP: %s | **%s** worst (median %s) | >= 0.70 | %s |" % (
        bs.fmt_summary(list(data.series("write_bw_qps", "bw_Bps", 1024).values()), fbw, spread=False),
        bs.fmt_summary(list(one_qp_series(data).values()), fbw),
        ftimes(worst), ftimes(bs.median(per_rep)), bs.verdict(worst, 0.7, True)))
    A("")
    A("Ratios are of medians (rocemu's median over the baseline's median, every figure from the "
      "same interleaved repetitions). ±half-spread is (max - min) / 2 over the median: how far the "
      "baseline's repetitions wander. *N x short* is the factor the ratio must still improve by. "
      "The CPU row uses %s because %s. Its TCP side is qperf's, the one TCP tool run under "
      "`perf stat`. %s\n" % (unit, "this machine counts CPU cycles" if field == "cycles_per_byte" else
                             "this VM exposes no cycles counter (`perf stat -e cycles` says "
                             "`<not supported>`); it is CPU time in ns, not cycles",
                             qps_pairs_note(qp)))
    if pmd_note:
        A("The PMD path's row: " + pmd_note + "\n")
    A("What stands behind each row, met or not (the profile and the distance): \"Issue 17's targets\" "
      "in the analysis below (bench/perf_analysis.md).\n")
    if notes:
        A("Baselines passed over:\n")
        for n in notes:
            A("- " + n)
        A("")
    return L, res


HISTORY_COLS = (("copies", "copies/byte", "<= 2.0", "%.2f"), ("bw", "64 KiB / TCP", ">= 1.5", "%.2f"),
                ("rate", "64 B rate / memif", ">= 0.5", "%.2f"), ("send_lat", "send_lat / TCP", "<= 0.2", "%.2f"),
                ("write_lat", "write_lat / TCP", "<= 1.0", "%.2f"), ("cpu", "CPU/byte / TCP", "<= 0.5", "%.2f"),
                ("qps_worst", "1024 QPs / 1, worst", ">= 0.70", "%.2f"))


def history_rows(paths, current):
    """Issue 17's ratios of every full run in `paths` (bench-*.json files),
    recomputed by this script: one dict per run, oldest first. Quick runs
    and runs of some parts only (`--only`) are left out; a file that does
    not parse is named."""
    rows = []
    for path in paths:
        try:
            with open(path) as f:
                d = json.load(f)
            m = d["meta"]
            if m.get("quick") or not {"base", "bw", "lat"} <= set(m.get("only") or ("base", "bw", "lat")):
                continue
            _, res = targets17(Data(d))
        except (OSError, ValueError, KeyError, TypeError) as e:
            rows.append({"path": path, "error": "%s" % type(e).__name__})
            continue
        mc = m.get("machine", {})
        rows.append({"path": path, "started": m.get("started", "?")[:16].replace("T", " "),
                     "kernel": mc.get("kernel", "?"), "git": mc.get("git") or "?", "reps": m.get("reps"),
                     "res": res, "current": os.path.abspath(path) == os.path.abspath(current)})
    rows.sort(key=lambda r: ("error" in r, r.get("started", r["path"])))  # unreadable ones last
    return rows


def history_section(data):
    """The targets across every full run kept beside this one: other days,
    other machines (a kernel build names the machine), other commits."""
    here = os.path.dirname(data.path)
    rows = history_rows(sorted(glob.glob(os.path.join(here, "bench-*.json"))), data.path)
    if len(rows) < 2:
        return []
    L = ["### The targets across runs\n",
         "Every full `make bench` run kept in `bench/results/`, its ratios recomputed by this script from its "
         "own JSON (this run in bold). Runs differ in commit, machine (the kernel build names it) and day; "
         "older runs measured fewer TCP tools, so their \"best TCP\" is the best of what they measured, and "
         "their modes were not probed. A dash: not measured in that run.\n",
         "| started (UTC) | kernel | commit | reps | " + " | ".join("%s (%s)" % (c[1], c[2]) for c in HISTORY_COLS) + " |",
         "|---|---|---|---|" + "---|" * len(HISTORY_COLS)]
    for r in rows:
        if "error" in r:
            L.append("| %s: unreadable (%s) |" % (os.path.basename(r["path"]), r["error"]) + " |" * (3 + len(HISTORY_COLS)))
            continue
        cells = [r["started"], r["kernel"], "`%s`" % r["git"], str(r["reps"])]
        for key, _, _, fmt in HISTORY_COLS:
            v = r["res"].get(key)
            cells.append(fmt % v if isinstance(v, (int, float)) else "-")
        if r["current"]:
            cells = ["**%s**" % c for c in cells]
        L.append("| " + " | ".join(cells) + " |")
    L.append("")
    return L


def one_qp_series(data):
    """The 1-QP bandwidth per repetition the QP rows divide by: the sweep's
    own 1-QP run (beside the 1024-QP one), else, in older files, write_bw's
    at 64 KiB."""
    return data.series("write_bw_qps", "bw_Bps", 1) or data.series("write_bw", "bw_Bps", 65536)


def qps_pairs(runs, q):
    """Each repetition's q-QP run of `ib_write_bw -s 65536` paired with its
    1-QP run: [{rep, num, den, ratio, mode}], by repetition. The 1-QP run is
    the sweep's own (write_bw_qps size 1, run next to the q-QP one), or in
    files without it the repetition's write_bw at 64 KiB. mode is the pair's
    machine mode: near or far when both runs' probes say so, else mixed
    (the two runs did not see the same machine; counted apart)."""
    def by_rep(test, size):
        out = {}
        for r in runs:
            v = r.get("bw_Bps")
            if (r["test"] == test and str(r["size"]) == str(size) and r.get("ok")
                    and isinstance(v, (int, float)) and v > 0 and not math.isnan(v)):
                out[r["rep"]] = (v, r.get("mode"))
        return out
    num = by_rep("write_bw_qps", q)
    den = by_rep("write_bw_qps", 1) or by_rep("write_bw", 65536)
    out = []
    for rep in sorted(num):
        if rep not in den:
            continue
        (n, nm), (d, dm) = num[rep], den[rep]
        mode = nm if nm == dm and nm in ("near", "far") else "mixed"
        out.append({"rep": rep, "num": n, "den": d, "ratio": n / d, "mode": mode})
    return out


def qps_pairs_note(pairs):
    """The sentence under the target table on the QP row's pairs."""
    if not pairs:
        return "The 1024-QP row has no pair of runs."
    cell = ", ".join("rep %d %.2f (%s)" % (p["rep"], p["ratio"], p["mode"]) for p in pairs)
    mixed = sum(1 for p in pairs if p["mode"] == "mixed")
    return ("The 1024-QP row pairs each repetition's 1024-QP run with the 1-QP run beside it and "
            "takes the worst and median over the pairs whose runs saw one machine mode (%d of %d; "
            "a mixed pair is listed, not counted): %s." % (len(pairs) - mixed, len(pairs), cell))


def runs_with_mode(data, test, size, field):
    """[(rep, value, mode)] of a test's successful runs at size (qperf's
    tcp_bw: its figure at that size); mode is the run's machine mode."""
    out = []
    for r in data.runs:
        if r["test"] != test or not r.get("ok"):
            continue
        if test == "qperf_tcp_bw":
            v = (r.get("bw_by_size") or {}).get(str(size))
        elif str(r["size"]) == str(size):
            v = r.get(field)
        else:
            continue
        if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v)):
            out.append((r["rep"], v, r.get("mode")))
    return out


def mode_pairs(num, den):
    """{mode: (num's values, den's values)} for far and near, from two
    [(rep, value, mode)] lists: a mixed or unprobed run is in neither."""
    return {m: ([v for _, v, mm in num if mm == m], [v for _, v, mm in den if mm == m])
            for m in ("far", "near")}


def mode_ratios(num, den, fnum, fden, fratio, den_name):
    """The within-mode ratio of two [(rep, value, mode)] lists, a phrase per
    mode ("far: NUM (k runs) / DEN (k runs) = **R**", or why there is no
    ratio), and how many modes had one."""
    parts, n = [], 0
    for m, (a, b) in mode_pairs(num, den).items():
        if a and b:
            n += 1
            parts.append("%s: %s (%s) / %s (%s) = **%s**" % (
                m, fnum(med(a)), nruns(len(a)), fden(med(b)), nruns(len(b)), fratio % (med(a) / med(b))))
        else:
            parts.append("%s: %d rocemu and %d %s runs, no ratio" % (m, len(a), len(b), den_name))
    return parts, n


def nruns(n):
    return "%d run%s" % (n, "" if n == 1 else "s")


def mode_section(data):
    """The machine's mode per repetition (bench/machine_probe, run before and
    after every measure) beside the 64 KiB bandwidth and its TCP baseline,
    and that ratio within each mode; [] for a run without probes."""
    probed = [r for r in data.runs if r.get("probe")]
    if not probed:
        return []
    near = data.d["meta"].get("near_rtt_ns", 150)
    L = []
    A = L.append
    A("### The machine's mode\n")
    A("This VM's two CPUs sometimes share a cache and mostly do not. `bench/machine_probe` "
      "(~40 ms, before and after every measure) bounces a cache line between the client's and the "
      "server's CPU: a round trip under %d ns is **near** (the CPUs share a cache; ~55 ns seen), "
      "else **far** (~300-400 ns); a run whose two probes differ is **mixed**. rocemu's 64 KiB "
      "bandwidth follows the mode (bench/perf_analysis.md, \"64 KiB bandwidth\"). The headline "
      "above is the median of all repetitions whatever their mode; the last line compares like "
      "with like.\n" % near)
    wb = runs_with_mode(data, "write_bw", 65536, "bw_Bps")
    ch = tcp_best(data, "bw", 65536)[0]
    tb = runs_with_mode(data, ch["test"], ch["size"], BASE_FIELD[ch["test"]] or "bw_Bps") if ch else []
    A("| rep | runs near / far / mixed | line round trip, ns (probes: median [min-max]) | "
      "`ib_write_bw -s 65536` MB/s (mode) | %s MB/s (mode) |" % (ch["name"] if ch else "best TCP"))
    A("|---|---|---|---|---|")
    for rep in range(data.reps):
        rr = [r for r in probed if r["rep"] == rep]
        if not rr:
            continue
        cnt = {m: sum(1 for r in rr if r.get("mode") == m) for m in ("near", "far", "mixed")}
        rtts = [p["line_rtt_ns"] for r in rr for p in r["probe"]
                if isinstance(p.get("line_rtt_ns"), (int, float)) and p["line_rtt_ns"] >= 0]
        cell = lambda xs: ", ".join("%s (%s)" % (fbw(v), m or "?") for k, v, m in xs if k == rep) or "-"
        A("| %d | %d / %d / %d | %s | %s | %s |" % (
            rep, cnt["near"], cnt["far"], cnt["mixed"], spread(rtts, lambda x: "%.0f" % x),
            cell(wb), cell(tb)))
    A("")
    mbs = lambda x: fbw(x) + " MB/s"
    parts, _ = mode_ratios(wb, tb, mbs, mbs, "%.2f", "TCP")
    A("64 KiB ratio within one mode (medians of the runs whose probes before and after agree): " +
      "; ".join(parts) + ".\n")
    rate = [(k, v * 1e6, m) for k, v, m in runs_with_mode(data, "write_bw", 64, "msgrate_mpps")]
    link = runs_with_mode(data, "memif_testpmd", 64, "rx_pps")
    parts, both = mode_ratios(rate, link, lambda x: "%.2f Mmsg/s" % (x / 1e6),
                              lambda x: "%.2f Mpps" % (x / 1e6), "%.3f", "raw memif")
    A("64 B message rate against the raw memif link within one mode: " + "; ".join(parts) + "." +
      (" The raw link gains more from a near spell than rocemu does (2.2x against 1.6x in "
       "bench-20261203T043847Z), so the headline ratio, which pairs medians over both modes, can "
       "land above both of these." if both == 2 else "") + "\n")
    return L


def cpu_section(data):
    """CPU per delivered byte, rocemu against TCP, from the accounting runs."""
    field, unit = cpu_metric(data)
    L = ["### CPU per delivered byte (64 KiB messages)\n"]
    A = L.append
    A("`perf stat -p PID` on both processes of each pair over the window above (every thread: for "
      "rocemu the application's and the progress thread; for TCP the kernel's work in the system "
      "calls, counted to the process that made them, but not softirq work run elsewhere). "
      "Delivered bytes: what the receiver got in the window. %s\n" % (
          "Cycles are counted on this machine." if field == "cycles_per_byte" else
          "**This VM exposes no cycles counter** (`perf stat -e cycles` reports `<not supported>`), "
          "so the figure is **task-clock ns per byte** (CPU time, not cycles)."))
    A("| pair | %s per delivered byte, median [min-max] | delivered in the window (MB, median) | CPUs busy, both processes (median) |" % unit)
    A("|---|---|---|---|")
    vals = {}
    for kind, label in (("tcp", "TCP (qperf tcp_bw -m 64K), both processes"),
                        ("rocemu", "rocemu (ib_write_bw -s 65536), both processes")):
        v = acct_series(data, kind, "cpu", field)
        vals[kind] = v
        db = acct_series(data, kind, "cpu", "delivered_bytes")
        # task-clock over the window: how much of the two CPUs the pair had
        busy = [r["cpu"]["task_ns_per_byte"] * r["cpu"]["delivered_bytes"] / (r["window_s"] * 1e9)
                for r in (data.acct(kind) or {}).get("all", [])
                if (r.get("cpu") or {}).get("task_ns_per_byte") and r.get("window_s")]
        A("| %s | %s | %s | %s |" % (label, bs.fmt_summary(v, "%.3f".__mod__),
                                      "%.0f" % (bs.median(db) / 1e6) if db else "?",
                                      "%.2f" % bs.median(busy) if busy else "?"))
    r = bs.ratio(vals["rocemu"], vals["tcp"])
    A("\nrocemu / TCP: **%s** (target <= 0.5: %s). rocemu busy-polls: its progress threads and "
      "perftest's spinning count as CPU time whether data moves or not, so its figure falls only as "
      "its bandwidth rises, and each process takes all of the CPU the scheduler gives it (the last "
      "column: 2 is both CPUs, less when other work on the machine takes its share).\n" % (
          ftimes(r), bs.verdict(r, 0.5, False)))
    return "\n".join(L)


def baseline_checks(data):
    """Every TCP baseline at every size: its median, spread, and whether it
    is suspect (non-monotonic in size, or a repetition far from the others)."""
    L = ["| baseline | size | median [min-max] ±half-spread | check |", "|---|---|---|---|"]
    for tests, fmt in ((TCP_LAT, fus), (TCP_BW, fbw)):
        for t in tests:
            bsz = data.by_size(t, BASE_FIELD[t])
            for size in sorted(bsz):
                why = bs.suspect_reasons(bsz, size, fsize, fmt_val=BASE_FMT[t])
                L.append("| %s | %s | %s | %s |" % (
                    (LAT_TESTS.get(t) or (None, BW_TESTS.get(t)))[1] + (" (µs)" if t in TCP_LAT else " (MB/s)"),
                    fsize(size), bs.fmt_summary(bsz[size], fmt),
                    "**suspect**: " + "; ".join(why) if why else "ok"))
    return L


# --------------------------------------------------------------------------

def run_time(meta):
    """How long the run took, from its JSON's start and finish."""
    import datetime
    try:
        t = [datetime.datetime.fromisoformat(meta[k].rstrip("Z")) for k in ("started", "finished")]
    except (KeyError, ValueError):
        return "?"
    return "%.0f min" % ((t[1] - t[0]).total_seconds() / 60)


def render(data, imgs, doc_path):
    d = data.d
    m = d["meta"]
    mc = m.get("machine", {})
    L = []
    A = L.append
    A("# rocemu performance\n")
    A("<!-- generated by bench/perf_report.py from %s; rerun `make bench` -->\n" %
      os.path.relpath(data.path, os.path.dirname(doc_path)))
    if m.get("quick"):
        A("> **NOT A REAL RUN: `--quick`** (fewer sizes and repetitions, to check the pipeline). "
          "Its numbers are not results; the committed report comes from a full `make bench`.\n")
    A("All numbers below come from **one** `make bench` run (started %s, finished %s: %s), "
      "so every ratio compares numbers taken minutes apart on the same machine under the same "
      "background load. Medians over %d interleaved repetitions, [min-max] in brackets; every ratio "
      "is a ratio of medians, with the baseline's spread beside it.\n" % (
          m.get("started", "?")[:19].replace("T", " "), m.get("finished", "?")[:19].replace("T", " "),
          run_time(m), data.reps))
    A("## Machine and method\n")
    A("- CPU: %s, %s CPUs; kernel %s; free 2 MiB hugepages: %s (rocemu then runs with `--no-huge`)." % (
        mc.get("cpu"), mc.get("cpus"), mc.get("kernel"), mc.get("hugepages_free")))
    A("- Packages: " + ", ".join("%s %s" % (k, v) for k, v in (mc.get("packages") or {}).items() if v) + ".")
    A("- rocemu commit: `%s`, build `%s` (meson debugoptimized: -O2 -g)." % (mc.get("git"), os.path.basename(m.get("build", ""))))
    A("- Server side pinned to CPU %s, client side to CPU %s (`taskset`). On this 2-CPU machine each "
      "rocemu process therefore runs its application thread **and** its progress thread on one CPU." % (
          m.get("server_cpu"), m.get("client_cpu")))
    A("- rocemu: `rocemu run --port memif:server:SOCK --ip 10.91.0.1/24 -- PROG -d rocemu0 -x 1 -F ...` "
      "and the client with `memif:client:`, `--ip 10.91.0.2/24` and the server address. `-x 1` selects GID 1 "
      "(the IPv4-mapped RoCE v2 GID), `-F` silences perftest's CPU-frequency warning. Bandwidth tests run "
      "for `-D 2` seconds; latency tests 20000 iterations (3000 for ib_write_lat, 5000 at 64 KiB).")
    A("- Baselines on loopback (127.0.0.1), same pinning, each at the size of the rocemu figure it is "
      "compared with where the tool can send it: qperf `tcp_lat` (msg_size 2 B..64 KiB) and "
      "`tcp_bw` (64 B..1 MiB), sockperf `pp --tcp` (14 B, its smallest message) and `tp --tcp` (65000 B, "
      "its largest), UCX `ucx_perftest` tag_lat (2 B)/tag_bw with "
      "`UCX_TLS=tcp UCX_NET_DEVICES=lo`, libfabric `fi_pingpong -p tcp -e msg` (2 B, and 64 KiB and 1 MiB "
      "as bandwidth); the raw memif link with "
      "`dpdk-testpmd` (server txonly -> client rxonly, 64 B frames, `--no-huge -m 512`, Rx-pps over 6 s).")
    A("- Latencies are one-way (half the round trip), as every tool reports them. Bandwidths are in "
      "MB/s = 10^6 B/s, computed from each tool's message rate x message size (perftest's MB is 2^20).")
    A("- The order of the tests is reversed on every other repetition (interleaving), so a slow spell of "
      "the machine does not hit one tool only. The load average (1 min) was %s during the run.\n" % (
          spread([r["load"][0] for r in data.runs if r.get("load")], lambda x: "%.1f" % x)))

    # ---- targets (issue 17), then issue 9's one target that 17 does not repeat
    A("## Targets (issue 17)\n")
    tl, _ = targets17(data)
    L.extend(tl)
    L.extend(mode_section(data))
    L.extend(history_section(data))
    acc = {k: data.acct(k) for k in ("tcp", "rocemu")}
    ra = acc.get("rocemu") or {}
    A("Issue 9's system-call target, from the same accounting runs (median per 64 KiB WRITE over "
      "%d repetitions): client %s, server %s system calls; zero per message: %s.\n" % (
          ra.get("reps", 0),
          "%.3f" % ra["client"]["syscalls_per_msg"] if (ra.get("client") or {}).get("syscalls_per_msg") is not None else "?",
          "%.3f" % ra["server"]["syscalls_per_msg"] if (ra.get("server") or {}).get("syscalls_per_msg") is not None else "?",
          "yes" if ra.get("client") and ra.get("server") and
          max(ra["client"].get("syscalls_per_msg") or 1, ra["server"].get("syscalls_per_msg") or 1) < 0.001 else "no"))
    A("### The baselines, checked\n")
    A("A baseline is **suspect** when its median at a larger message size lies below every "
      "repetition at a smaller size (bandwidth or latency falling as messages grow: beyond its "
      "spread, so not noise), or when one of its repetitions is more than %.1fx off the median of "
      "the others. A suspect baseline is never a denominator above while a clean one is measured; "
      "the target table names the one used instead.\n" % bs.OUTLIER_FACTOR)
    L.extend(baseline_checks(data))
    A("")
    pmd = data.series("memif_testpmd", "rx_pps", 64)
    q1 = one_qp_series(data)
    qrows = []
    for q in [q for q in data.sizes("write_bw_qps") if q != 1]:
        s = data.series("write_bw_qps", "bw_Bps", q)
        qrows.append((q, s, [s[k] / q1[k] for k in s if q1.get(k)]))

    # ---- latency table
    A("## Latency (one-way, µs)\n")
    A("| test | size | median [min-max] | mean (median of runs) | p99 (median of runs) |\n|---|---|---|---|---|")
    for test in ("write_lat", "send_lat", "read_lat", "qperf_tcp_lat", "sockperf_pp", "ucx_tag_lat", "fi_pingpong"):
        field, label = LAT_TESTS[test]
        for s in data.sizes(test):
            v = list(data.series(test, field, s).values())
            mean = list(data.series(test, {"t_typical": "t_avg", "lat_p50_us": "lat_avg_us"}.get(field, "x"), s).values())
            p99 = list(data.series(test, "p99", s).values())
            A("| %s | %s | %s | %s | %s |" % (label, fsize(s), spread(v, fus),
                                              fus(med(mean)) if mean else "", fus(med(p99)) if p99 else ""))
    A("")
    A("![latency](img/perf-latency.svg)\n")

    # ---- bandwidth table
    A("## Bandwidth (MB/s = 10^6 B/s)\n")
    A("| test | size | median [min-max] | message rate (Mmsg/s, median) |\n|---|---|---|---|")
    for test in ("write_bw", "send_bw", "qperf_tcp_bw", "sockperf_tp", "ucx_tag_bw", "fi_pingpong_bw"):
        for s in data.sizes(test):
            v = list(data.series(test, "bw_Bps", s).values())
            A("| %s | %s | %s | %s |" % (BW_TESTS[test], fsize(s), spread(v, fbw),
                                         "%.4f" % (med(v) / s / 1e6) if v else ""))
    if pmd:
        A("| raw memif link (testpmd txonly -> rxonly) | 64 B frames | %s Mpps | |" % spread(
            list(pmd.values()), lambda x: "%.2f" % (x / 1e6)))
    A("")
    A("![bandwidth](img/perf-bandwidth.svg)\n")
    if qrows:
        A("### Many QPs (`ib_write_bw -s 65536 -q N`)\n")
        A("| QPs | MB/s median [min-max] | share of 1 QP (same rep) | per-QP MB/s |\n|---|---|---|---|")
        if q1:
            A("| 1 | %s | 100%% | %s |" % (spread(list(q1.values()), fbw), fbw(med(list(q1.values())))))
        for q, s, rr in qrows:
            v = list(s.values())
            errs = sorted({r.get("error") for r in data.runs
                           if r["test"] == "write_bw_qps" and r["size"] == q and r.get("error")})
            A("| %d | %s | %s | %s |" % (q, spread(v, fbw) + (" (failed: %s)" % "; ".join(errs) if errs else ""),
                                        spread(rr, lambda x: "%.0f%%" % (100 * x)) if rr else "",
                                        fbw(med(v) / q) if v else ""))
        A("")

    # ---- accounting
    nacc = max([(acc.get(k) or {}).get("reps", 0) for k in acc] or [0])
    win = ((acc.get("rocemu") or acc.get("tcp") or {}).get("window_s")) or 5
    A("## What a message costs: system calls, context switches, CPU (%.0f-second window)\n" % win)
    A("A bandwidth run of 64 KiB messages on each side (rocemu: `ib_write_bw -s 65536`; TCP: "
      "`qperf -m 64K tcp_bw`) in every repetition (%d), measured over a %.0f s window in the middle of "
      "the run; each figure below is the median over the repetitions. System calls and CPU time with "
      "`perf stat -e raw_syscalls:sys_enter,task-clock[,cycles] -p PID` (every thread) and their names "
      "with `perf trace -s`; context switches summed over `/proc/PID/task/*/status`; user and system "
      "time from `/proc/PID/stat` (all threads). Bytes: TCP from `/proc/PID/io` (wchar/rchar, exact); "
      "rocemu from perftest's rate x the window (perftest reports no byte count mid-run). A *message* is "
      "one 64 KiB `write()` for TCP and one 64 KiB RDMA WRITE for rocemu. rocemu's CPU time includes its "
      "busy-polling: it spins whether or not data moves.\n" % (nacc, win))
    A("| | side | msgs in window | syscalls/msg | voluntary cs/msg | involuntary cs/msg | user s/GB | system s/GB | syscalls seen (count) |")
    A("|---|---|---|---|---|---|---|---|---|")
    for kind, label in (("tcp", "TCP (qperf tcp_bw)"), ("rocemu", "rocemu (ib_write_bw)")):
        a = acc.get(kind)
        if not a:
            continue
        if a.get("error"):
            A("| %s | | failed: %s | | | | | | |" % (label, a["error"]))
            continue
        for side in ("client", "server"):
            x = a.get(side) or {}
            if x.get("error") or "messages" not in x:
                A("| %s | %s | failed | | | | | | |" % (label, side))
                continue
            names = ", ".join("%s %d" % kv for kv in sorted(x.get("syscall_names", {}).items(), key=lambda kv: -kv[1])[:5])
            A("| %s | %s | %.0f | %s | %.3f | %.3f | %.2f | %.2f | %s |" % (
                label, side, x["messages"],
                "%.3f" % x["syscalls_per_msg"] if x.get("syscalls_per_msg") is not None else "?",
                x["vol_per_msg"], x["invol_per_msg"], x["user_s_per_GB"], x["sys_s_per_GB"], names))
    A("")
    A("### Bytes copied per byte delivered\n")
    A("The copies of an RDMA WRITE on memif, each named:\n")
    A("| # | where | function | counted as |\n|---|---|---|---|")
    A("| 1 | requester: registered memory -> tx mbuf, ICRC folded in the same pass | `send_data_packet` -> `rocemu_mem_gather_crc` (`roce_crc32_copy`) | transport `copy_tx_bytes` |")
    A("| 2 | memif tx: mbuf -> shared-memory ring buffer | DPDK `eth_memif_tx` (a server, or a client in copy mode; a zero-copy client's `eth_memif_tx_zc` puts the mbuf itself in the ring) | port `pmd_copy_tx_bytes` (whole frames) |")
    A("| 3 | memif rx: ring buffer -> rx mbuf | DPDK `eth_memif_rx` (a server, or a client in copy mode; a zero-copy client receives into its own mbufs) | port `pmd_copy_rx_bytes` (whole frames) |")
    A("| 4 | responder: rx mbuf -> registered memory | `rc_responder.c` -> `rocemu_mem_remote_write` (memcpy) | transport `copy_rx_bytes` |")
    A("| | ICRC (a read, not a copy) | on rx only: `roce_mbuf_parse` verifies before placing; on tx it rides on copy 1 | |")
    cp = (acc.get("rocemu") or {}).get("copies")
    if cp:
        p = cp["parts"]
        A("\n**Measured: %.2f bytes copied per byte delivered** (median of the accounting runs; rocemu's own "
          "counters, `ROCEMU_STATS=1`, both processes, the whole run: %.1f MB placed in the server's memory): "
          "application -> frame %.2f, memif PMD tx %.2f, memif PMD rx %.2f, frame -> application %.2f "
          "(frame bytes include headers and ACKs; %d packets were retransmitted). The PMD's copies are "
          "the port's `pmd_copy_tx_bytes`/`pmd_copy_rx_bytes`: every frame the memif server moves, and "
          "every frame the client moves in copy mode (the default; with `ROCEMU_MEMIF_ZERO_COPY=1` the client's "
          "PMD copies nothing)." % (
              cp["total"], cp["delivered"] / 1e6, p["app_to_frame"], p["pmd_tx"], p["pmd_rx"],
              p["frame_to_app"], cp.get("retransmit_packets", 0)))
    else:
        A("\nNo counter-based figure in this run (the accounting run failed or predates the counters); "
          "by the code path it is 4 (3 with the memif client in zero-copy, `ROCEMU_MEMIF_ZERO_COPY=1`).")
    A("TCP over loopback copies 2 (user -> socket buffer in `write()`, socket buffer -> user in `read()`). "
      "The copies are what an emulated NIC costs: on hardware, copies 1-4 are the NIC's DMA reads and "
      "writes and cost the CPU nothing. DPDK's memif zero-copy (`zero-copy=yes`, client only) removes "
      "one of copies 2 and 3, not both: the server's PMD always copies; see the recommendations.\n")

    A(cpu_section(data))

    # ---- profile
    A("## Where the time goes (perf profile of `ib_write_bw`)\n")
    A("`perf record -e cpu-clock -F 4000 -p PID` for 4 s on each process in steady state (this VM has no "
      "hardware counters: `perf stat -e instructions` reports `<not supported>`, so cpu-clock sampling is used). "
      "Only self time is reported: DPDK's libraries and the -O2 build have no frame pointers, so call chains "
      "are unreliable. DPDK's shared objects ship without symbols: `librte_net.so` samples are its PCLMULQDQ CRC-32 fold loop "
      "(checked with `objdump -d`), `librte_net_memif.so` samples are the memif rx/tx loops.\n")
    A(profile_tables(d.get("profile", [])))

    # ---- analysis (hand-written)
    ana = os.path.join(HERE, "perf_analysis.md")
    if os.path.exists(ana):
        with open(ana) as f:
            A(fill(f.read(), values(data)))

    hs = host_section(data, with_failures=False)
    if not hs:
        # a run without the host part keeps the section of the host part's
        # own last run (BENCH_ONLY=host make bench), which names its JSON
        hs = old_host_section(doc_path)
    if hs:
        A(hs)

    if getattr(data, "wire", None):
        A("## Codec micro-benchmark (`bench/wire_bench`, same run)\n")
        A("Frames built and parsed per second on one CPU, and the ICRC's speed: the codec alone is "
          "far faster than the message rates above, so they are not limited by it.\n")
        A("```\n" + data.wire.strip() + "\n```\n")

    for line in failures_table("## Failures recorded in this run\n", data.failures()):
        A(line)
    A("## Rerun\n")
    A("```\nmake bench                 # or: scripts/run-bench.sh build (%d repetitions; this run: %s)\n"
      "REPS=7 make bench          # more repetitions\n"
      "BENCH_QUICK=1 make bench   # a check of the pipeline: report in bench/results/quick/, not here\n"
      "BENCH_ONLY=lat,base make bench   # a subset: lat,bw,qps,base,pmd,acct,prof,host\n"
      "BENCH_ONLY=host make bench       # the host part alone: replaces its section here\n```\n" % (data.reps, run_time(m)))
    A("Raw results: `bench/results/` (one JSON per run; `latest.json` is the last one).")
    return "\n".join(L) + "\n"


def values(data):
    """Named numbers of this run for the templates ({{name}}); '?' when missing."""
    v = {}
    d = data.d

    def mv(test, field, size):
        x = list(data.series(test, field, size).values())
        return med(x) if x else None
    lat = {t: mv(t, LAT_TESTS[t][0], 2 if t == "qperf_tcp_lat" else None) for t in LAT_TESTS}
    # the rocemu tests at 2 bytes
    for t in ("write_lat", "send_lat", "read_lat"):
        lat[t] = mv(t, "t_typical", 2)
    for t, x in lat.items():
        v[t] = fus(x) if x is not None else "?"
    # the best trustworthy TCP latency at 2 bytes, as in the target table
    lch = tcp_best(data, "lat", 2)[0]
    if lch:
        b = med(lch["values"])
        v["tcp_lat_best"], v["tcp_lat_best_name"] = fus(b), lch["name"]
        for t in ("write_lat", "send_lat", "read_lat"):
            v[t + "_ratio"] = "%.2f" % (lat[t] / b) if lat[t] else "?"
    wl = list(data.series("write_lat", "p99", 2).values())
    v["write_lat_p99"] = fus(med(wl)) if wl else "?"
    v["write_lat_min"] = fus(med(list(data.series("write_lat", "t_min", 2).values()) or [float("nan")]))
    bw = {"write_bw": mv("write_bw", "bw_Bps", 65536), "send_bw": mv("send_bw", "bw_Bps", 65536),
          "qperf_tcp_bw": mv("qperf_tcp_bw", None, 65536), "sockperf_tp": mv("sockperf_tp", "bw_Bps", 65000),
          "ucx_tag_bw": mv("ucx_tag_bw", "bw_Bps", 65536), "fi_pingpong_bw": mv("fi_pingpong_bw", "bw_Bps", 65536)}
    for k, x in bw.items():
        v[k + "_64k"] = fbw(x) if x else "?"
    if bw["write_bw"] and bw["qperf_tcp_bw"]:
        v["write_bw_qperf_ratio"] = "%.2f" % (bw["write_bw"] / bw["qperf_tcp_bw"])
    bch = tcp_best(data, "bw", 65536)[0]
    if bch:
        v["tcp_bw_best_64k"], v["tcp_bw_best_name"] = fbw(med(bch["values"])), bch["name"]
        if bw["write_bw"]:
            v["write_bw_tcp_ratio"] = "%.2f" % (bw["write_bw"] / med(bch["values"]))
    w1m = mv("write_bw", "bw_Bps", 1048576)
    v["write_bw_1m"] = fbw(w1m) if w1m else "?"
    w64 = mv("write_bw", "msgrate_mpps", 64)
    pmd = mv("memif_testpmd", "rx_pps", 64)
    v["write_bw_64_mpps"] = "%.3f" % w64 if w64 else "?"
    v["memif_mpps"] = "%.2f" % (pmd / 1e6) if pmd else "?"
    v["write64_memif_ratio"] = "%.3f" % (w64 * 1e6 / pmd) if w64 and pmd else "?"
    acc = {k: data.acct(k) for k in ("tcp", "rocemu")}
    cp = (acc.get("rocemu") or {}).get("copies")
    field, unit = cpu_metric(data)
    cpu = {k: bs.median(acct_series(data, k, "cpu", field)) for k in ("tcp", "rocemu")}
    v["cpu_unit"] = unit
    for k in cpu:
        v["cpu_per_byte_" + k] = "%.3f" % cpu[k] if cpu[k] is not None else "?"
    v["cpu_per_byte_ratio"] = "%.2f" % (cpu["rocemu"] / cpu["tcp"]) if cpu["rocemu"] and cpu["tcp"] else "?"
    v["copies_per_byte"] = "%.2f" % cp["total"] if cp else "3 (by the code path)"
    for kind in ("tcp", "rocemu"):
        for side in ("client", "server"):
            x = (acc.get(kind) or {}).get(side) or {}
            for f, fmt in (("syscalls_per_msg", "%.3f"), ("vol_per_msg", "%.3f"), ("invol_per_msg", "%.3f"),
                           ("user_s_per_GB", "%.2f"), ("sys_s_per_GB", "%.2f")):
                val = x.get(f)
                v["%s_%s_%s" % (kind, side, f)] = fmt % val if isinstance(val, (int, float)) and not math.isnan(val) else "?"
            names = x.get("syscall_names") or {}
            v["%s_%s_syscalls" % (kind, side)] = ", ".join(
                "`%s` %d" % kv for kv in sorted(names.items(), key=lambda kv: -kv[1])[:4]) or "none"
    for p in d.get("profile", []):
        for side in ("client", "server"):
            layers = {}
            for r in p.get(side) or []:
                layers[layer(r)] = layers.get(layer(r), 0) + r["pct"]
            for key, name in (("icrc", "ICRC"), ("memif", "memif PMD"), ("memcpy", "memcpy"),
                              ("clock", "clock reads"), ("kernel", "kernel"), ("lock", "engine lock")):
                tot = sum(val for k, val in layers.items() if k.startswith(name))
                v["prof%d_%s_%s" % (p["size"], side, key)] = "%.0f" % tot
            thr = {t["comm"]: t["pct"] for t in p.get(side + "_threads") or []}
            v["prof%d_%s_progress" % (p["size"], side)] = "%.0f" % thr.get("rocemu-progress", 0)
    v["load"] = spread([r["load"][0] for r in data.runs if r.get("load")], lambda x: "%.1f" % x)
    v["date"] = d["meta"].get("started", "?")[:10]
    return v


def fill(template, vals):
    import re as _re
    return _re.sub(r"\{\{(\w+)\}\}", lambda m: str(vals.get(m.group(1), "?")), template)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--doc", default=os.path.join(HERE, "..", "docs", "PERFORMANCE.md"))
    ap.add_argument("--img", default=os.path.join(HERE, "..", "docs", "img"))
    ap.add_argument("--wire", help="wire_bench output to include")
    a = ap.parse_args()
    with open(a.json) as f:
        data = Data(json.load(f))
    data.wire = None
    if a.wire and os.path.exists(a.wire):
        with open(a.wire) as f:
            data.wire = f.read()
    data.path = os.path.abspath(a.json)
    if data.d["meta"].get("only") == ["host"]:
        # a host-only run: its section replaces the one in the document
        text = replace_host_section(a.doc, host_section(data, with_failures=True))
        with open(a.doc, "w") as f:
            f.write(text)
        print(a.doc, "(host section)")
        return
    os.makedirs(a.img, exist_ok=True)
    imgs = plots(data, a.img)
    text = render(data, imgs, os.path.abspath(a.doc))
    with open(a.doc, "w") as f:
        f.write(text)
    print(a.doc, *imgs)
    # docs written from templates with this run's numbers
    vals = values(data)
    docs = os.path.dirname(os.path.abspath(a.doc))
    for name in ("tcp-vs-rdma.md", "tcp-vs-rdma.zh.md"):
        tpl = os.path.join(HERE, name + ".in")
        if os.path.exists(tpl):
            with open(tpl) as f:
                out = fill(f.read(), vals)
            with open(os.path.join(docs, name), "w") as f:
                f.write(out)
            print(os.path.join(docs, name))


if __name__ == "__main__":
    main()
