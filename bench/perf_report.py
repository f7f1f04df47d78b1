#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Turn a perf_bench.py JSON file into docs/PERFORMANCE.md and SVG plots.

usage: perf_report.py RESULT.json [--doc docs/PERFORMANCE.md] [--img docs/img]

Medians with [min-max] over the repetitions; every ratio is taken between
numbers of the same run. The hand-written analysis (profile reading,
recommendations) lives in bench/perf_analysis.md and is included verbatim.
"""
import argparse
import json
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

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


def failures_table(title, fails):
    """The failed runs fails as a table under title, as lines; none when nothing failed."""
    if not fails:
        return []
    return ([title, "| test | size | rep | error |\n|---|---|---|---|"]
            + ["| %s | %s | %s | %s |" % (r["test"], r["size"], r["rep"], r.get("error", "")[:120])
               for r in fails]
            + [""])


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
      "every other one; load average (1 min) %s). Medians [min-max]; every ratio is taken per "
      "repetition between numbers of that repetition, then its median [min-max] is given. Server "
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
        ratios[mo] = (rb, rl)
        A("| %s | %s | %s | %s | %s |" % (
            label, spread(list(bw[mo].values()), fbw),
            spread(rb, lambda x: "%.2fx" % x) if rb else ("1" if mo == "direct" else "no pair"),
            spread(list(lat[mo].values()), fus),
            spread(rl, lambda x: "%.2fx" % x) if rl else ("1" if mo == "direct" else "no pair")))
    rb, rl = ratios["host"]
    A("")
    A("Targets on the default path (a host without capture): `ib_write_bw` >= 0.8x: %s; "
      "`ib_send_lat` <= 1.5x: %s.\n" % (
          ("**%s** (median %.2fx)" % ("met" if med(rb) >= 0.8 else "not met", med(rb))) if rb else "not measured",
          ("**%s** (median %.2fx)" % ("met" if med(rl) <= 1.5 else "not met", med(rl))) if rl else "not measured"))

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
            spread(rr, lambda x: "%.3f" % x) if rr else "-",
            spread(rd, lambda x: "%.2fx" % x) if rd else ("1" if mo == "direct" else "no pair")))
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


def replace_host_section(doc, section):
    """The document with its host section replaced (appended if it has none)."""
    text = open(doc).read() if os.path.exists(doc) else "# rocemu performance\n"
    b, e = text.find(HOST_BEGIN), text.find(HOST_END)
    if b >= 0 and e > b:
        return text[:b] + section.rstrip("\n") + text[e + len(HOST_END):]
    return text.rstrip("\n") + "\n\n" + section


# --------------------------------------------------------------------------

def render(data, imgs, doc_dir):
    d = data.d
    m = d["meta"]
    mc = m.get("machine", {})
    L = []
    A = L.append
    A("# rocemu performance\n")
    A("<!-- generated by bench/perf_report.py from %s; rerun `make bench` -->\n" %
      os.path.relpath(data.path, os.path.dirname(doc_dir)))
    A("All numbers below come from **one** `make bench` run (started %s, finished %s), "
      "so every ratio compares numbers taken minutes apart on the same machine under the same "
      "background load. Medians over %d repetitions, [min-max] in brackets.\n" % (
          m.get("started", "?")[:19].replace("T", " "), m.get("finished", "?")[:19].replace("T", " "),
          data.reps))
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
    A("- Baselines on loopback (127.0.0.1), same pinning: qperf `tcp_lat` (msg_size 2 B..64 KiB) and "
      "`tcp_bw` (64 B..1 MiB), sockperf `pp --tcp -m 64` and `tp --tcp`, UCX `ucx_perftest` tag_lat/tag_bw with "
      "`UCX_TLS=tcp UCX_NET_DEVICES=lo`, libfabric `fi_pingpong -p tcp -e msg`; the raw memif link with "
      "`dpdk-testpmd` (server txonly -> client rxonly, 64 B frames, `--no-huge -m 512`, Rx-pps over 6 s).")
    A("- Latencies are one-way (half the round trip), as every tool reports them. Bandwidths are in "
      "MB/s = 10^6 B/s, computed from each tool's message rate x message size (perftest's MB is 2^20).")
    A("- The order of the tests is reversed on every other repetition (interleaving), so a slow spell of "
      "the machine does not hit one tool only. The load average (1 min) was %s during the run.\n" % (
          spread([r["load"][0] for r in data.runs if r.get("load")], lambda x: "%.1f" % x)))

    # ---- targets
    A("## Targets (issue 9)\n")
    A("| target | measured (same run) | met? |\n|---|---|---|")
    wl = data.series("write_lat", "t_typical", 2)
    tcpl = [data.series(t, LAT_TESTS[t][0], None if t != "qperf_tcp_lat" else 2) for t in TCP_LAT]
    rs = ratio_stats(wl, tcpl)
    best_name = None
    bests = {t: med(list(s.values())) for t, s in zip(TCP_LAT, tcpl) if s}
    if bests:
        best_name = min(bests, key=bests.get)
    if rs:
        A("| `ib_write_lat -s 2` t_typical <= 0.25 x best TCP latency | %s us vs %s %s us: ratio **%s** | %s |" % (
            fus(med(list(wl.values()))), LAT_TESTS[best_name][1], fus(bests[best_name]),
            spread(rs, lambda x: "%.2f" % x), "yes" if med(rs) <= 0.25 else "no: %.0fx the allowed latency" % (med(rs) / 0.25)))
    else:
        A("| `ib_write_lat -s 2` <= 0.25 x best TCP | no complete pair | no |")
    sl = data.series("send_lat", "t_typical", 2)
    rs2 = ratio_stats(sl, tcpl)
    if rs2:
        A("| (for reference) `ib_send_lat -s 2` vs the same | %s us: ratio %s | %s |" % (
            fus(med(list(sl.values()))), spread(rs2, lambda x: "%.2f" % x),
            "would be met" if med(rs2) <= 0.25 else "would not: %.1fx the allowed latency" % (med(rs2) / 0.25)))
    wb = data.series("write_bw", "bw_Bps", 65536)
    qb = data.series("qperf_tcp_bw", None, 65536)
    r1 = ratio_stats(wb, [qb])
    tcpb = [data.series("qperf_tcp_bw", None, 65536), data.series("sockperf_tp", "bw_Bps", 65000),
            data.series("ucx_tag_bw", "bw_Bps", 65536), data.series("fi_pingpong_bw", "bw_Bps", 65536)]
    r2 = ratio_stats(wb, tcpb, best=max)
    if r1:
        A("| `ib_write_bw -s 65536` >= 1.5 x qperf tcp_bw (64 KiB) | %s vs %s MB/s: ratio **%s** | %s |" % (
            fbw(med(list(wb.values()))), fbw(med(list(qb.values()))), spread(r1, lambda x: "%.2f" % x),
            "yes" if med(r1) >= 1.5 else "no (%.1fx short)" % (1.5 / med(r1))))
    else:
        A("| `ib_write_bw -s 65536` >= 1.5 x qperf tcp_bw | no complete pair | no |")
    if r2:
        A("| `ib_write_bw -s 65536` >= best TCP baseline at 64 KiB | ratio to the best of qperf, sockperf (65000 B), UCX, fi_pingpong: **%s** | %s |" % (
            spread(r2, lambda x: "%.2f" % x), "yes" if med(r2) >= 1 else "no (%.1fx short)" % (1 / med(r2))))
    w64 = data.series("write_bw", "msgrate_mpps", 64)
    pmd = data.series("memif_testpmd", "rx_pps", 64)
    r3 = ratio_stats({k: v * 1e6 for k, v in w64.items()}, [pmd])
    if r3:
        A("| `ib_write_bw -s 64` rate >= 0.4 x raw memif 64 B rate | %s Mpps vs %s Mpps: ratio **%s** | %s |" % (
            "%.3f" % med(list(w64.values())), "%.2f" % (med(list(pmd.values())) / 1e6),
            spread(r3, lambda x: "%.3f" % x), "yes" if med(r3) >= 0.4 else "no (%.0fx short)" % (0.4 / med(r3))))
    else:
        A("| `ib_write_bw -s 64` >= 0.4 x memif | no complete pair | no |")
    acc = {a["kind"]: a for a in d.get("accounting", [])}
    ra = acc.get("rocemu", {})
    if ra.get("client") and ra["client"].get("syscalls_per_msg") is not None:
        A("| zero system calls per message (rocemu data path) | %.3f (client) and %.3f (server) per 64 KiB WRITE | %s |" % (
            ra["client"]["syscalls_per_msg"], ra["server"].get("syscalls_per_msg") or float("nan"),
            "yes" if max(ra["client"]["syscalls_per_msg"], ra["server"].get("syscalls_per_msg") or 0) < 0.001 else "no"))
    else:
        A("| zero system calls per message | accounting failed | ? |")
    q1 = wb
    qrows = []
    for q in data.sizes("write_bw_qps"):
        s = data.series("write_bw_qps", "bw_Bps", q)
        qrows.append((q, s, ratio_stats(s, [q1], best=max)))
    q1024 = [r for r in qrows if r[0] == 1024]
    if q1024 and q1024[0][2]:
        rr = q1024[0][2]
        A("| 1024 QPs >= 80%% of single-QP bandwidth | %s MB/s: **%s** of 1 QP | %s |" % (
            fbw(med(list(q1024[0][1].values()))), spread(rr, lambda x: "%.0f%%" % (100 * x)),
            "yes" if med(rr) >= 0.8 else "no"))
    else:
        err = [r.get("error") for r in data.runs if r["test"] == "write_bw_qps" and r["size"] == 1024]
        A("| 1024 QPs >= 80%% of single-QP bandwidth | failed: %s | no |" % ("; ".join(sorted(set(e for e in err if e))) or "no result"))
    A("")

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
    A("## What a message costs: system calls, context switches, CPU (5-second window)\n")
    A("A bandwidth run of 64 KiB messages on each side (rocemu: `ib_write_bw -s 65536`; TCP: "
      "`qperf -m 64K tcp_bw`), measured over a 5 s window in the middle of the run: system calls with "
      "`perf stat -e raw_syscalls:sys_enter -p PID` (every thread) and their names with `perf trace -s`; "
      "context switches summed over `/proc/PID/task/*/status`; CPU time from `/proc/PID/stat` (all threads). "
      "Bytes: TCP from `/proc/PID/io` (wchar/rchar, exact); rocemu from perftest's rate x the window "
      "(perftest reports no byte count mid-run). A *message* is one 64 KiB `write()` for TCP and one 64 KiB "
      "RDMA WRITE for rocemu. rocemu's CPU time includes its busy-polling: it spins whether or not data moves.\n")
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
    A("| 2 | memif tx: mbuf -> shared-memory ring buffer | DPDK `eth_memif_tx` (copy mode: rte_memcpy per descriptor) | port `tx_bytes` (whole frames) |")
    A("| 3 | memif rx: ring buffer -> rx mbuf | DPDK `eth_memif_rx` (copy mode) | port `rx_bytes` (whole frames) |")
    A("| 4 | responder: rx mbuf -> registered memory | `rc_responder.c` -> `rocemu_mem_remote_write` (memcpy) | transport `copy_rx_bytes` |")
    A("| | ICRC (a read, not a copy) | on rx only: `roce_mbuf_parse` verifies before placing; on tx it rides on copy 1 | |")
    cp = (acc.get("rocemu") or {}).get("copies")
    if cp:
        p = cp["parts"]
        A("\n**Measured: %.2f bytes copied per byte delivered** (rocemu's own counters, `ROCEMU_STATS=1`, "
          "both processes, the whole accounting run: %.1f MB placed in the server's memory): "
          "application -> frame %.2f, memif PMD tx %.2f, memif PMD rx %.2f, frame -> application %.2f "
          "(frame bytes include headers and ACKs; %d packets were retransmitted). The PMD's copies are "
          "counted as the port's frame bytes because DPDK's memif copies every frame once on each side in "
          "copy mode, the mode rocemu uses." % (
              cp["total"], cp["delivered"] / 1e6, p["app_to_frame"], p["pmd_tx"], p["pmd_rx"],
              p["frame_to_app"], cp.get("retransmit_packets", 0)))
    else:
        A("\nNo counter-based figure in this run (the accounting run failed or predates the counters); "
          "by the code path it is 4.")
    A("TCP over loopback copies 2 (user -> socket buffer in `write()`, socket buffer -> user in `read()`). "
      "The copies are what an emulated NIC costs: on hardware, copies 1-4 are the NIC's DMA reads and "
      "writes and cost the CPU nothing. DPDK's memif zero-copy (`zero-copy=yes`, client only) removes "
      "one of copies 2 and 3, not both: the server's PMD always copies; see the recommendations.\n")

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
    A("```\nmake bench                 # or: scripts/run-bench.sh build\nREPS=5 make bench          # more repetitions\n"
      "BENCH_ONLY=lat,base make bench   # a subset: lat,bw,qps,base,pmd,acct,prof,host\n"
      "BENCH_ONLY=host make bench       # the host part alone: replaces its section here\n```\n")
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
    tcp = {t: lat[t] for t in TCP_LAT if lat[t] is not None}
    if tcp:
        b = min(tcp, key=tcp.get)
        v["tcp_lat_best"], v["tcp_lat_best_name"] = fus(tcp[b]), LAT_TESTS[b][1]
        for t in ("write_lat", "send_lat", "read_lat"):
            v[t + "_ratio"] = "%.2f" % (lat[t] / tcp[b]) if lat[t] else "?"
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
    w1m = mv("write_bw", "bw_Bps", 1048576)
    v["write_bw_1m"] = fbw(w1m) if w1m else "?"
    w64 = mv("write_bw", "msgrate_mpps", 64)
    pmd = mv("memif_testpmd", "rx_pps", 64)
    v["write_bw_64_mpps"] = "%.3f" % w64 if w64 else "?"
    v["memif_mpps"] = "%.2f" % (pmd / 1e6) if pmd else "?"
    v["write64_memif_ratio"] = "%.3f" % (w64 * 1e6 / pmd) if w64 and pmd else "?"
    acc = {a["kind"]: a for a in d.get("accounting", [])}
    cp = (acc.get("rocemu") or {}).get("copies")
    v["copies_per_byte"] = "%.2f" % cp["total"] if cp else "4 (by the code path)"
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
