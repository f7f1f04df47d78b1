# SPDX-License-Identifier: BSD-3-Clause
"""bench/bench_stats.py: the medians, spreads, suspect-baseline checks and
best-baseline choice that every ratio of `make bench` rests on."""
import glob
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.environ.get("ROCEMU_SOURCE_DIR",
                                               os.path.join(os.path.dirname(__file__), "..", "..")),
                                "bench"))
import bench_stats as bs  # noqa: E402
import perf_bench as pb  # noqa: E402
import perf_report as pr  # noqa: E402


class Summary(unittest.TestCase):
    def test_median_and_spread(self):
        s = bs.summary([4.0, 1.0, 3.0, 2.0, 5.0])
        self.assertEqual((s["n"], s["median"], s["min"], s["max"]), (5, 3.0, 1.0, 5.0))
        self.assertAlmostEqual(s["rel_spread"], 4.0 / 3.0)
        self.assertEqual(bs.median([1.0, 2.0, 10.0, 11.0]), 6.0)
        self.assertIsNone(bs.summary([]))
        self.assertIsNone(bs.median([None]))

    def test_format(self):
        self.assertEqual(bs.fmt_summary([10.0, 8.0, 12.0], "%.0f".__mod__), "10 [8-12] ±20%")
        self.assertEqual(bs.fmt_summary([], str), "failed")
        self.assertIn("1 repetition", bs.fmt_summary([3.0], "%.0f".__mod__))

    def test_ratio_of_medians(self):
        self.assertAlmostEqual(bs.ratio([2.0, 4.0, 6.0], [1.0, 2.0, 100.0]), 2.0)
        self.assertIsNone(bs.ratio([1.0], []))
        self.assertIsNone(bs.ratio([], [1.0]))


class Suspect(unittest.TestCase):
    def test_outliers(self):
        self.assertEqual(bs.outliers([100, 105, 98, 40, 101]), [3])
        self.assertEqual(bs.outliers([100, 105, 98, 160, 101]), [3])
        self.assertEqual(bs.outliers([100, 120, 90, 130, 110]), [])
        self.assertEqual(bs.outliers([1, 100]), [])  # too few to say

    def test_bandwidth_falling_with_size(self):
        # the case: flat, then lower at 64 KiB than every 16 KiB run
        bw = {4096: [1600, 1330, 1600], 16384: [1800, 1750, 2200], 65536: [1620, 1140, 1680]}
        self.assertEqual(bs.falls(bw), [(16384, 65536)])
        why = bs.suspect_reasons(bw, 65536)
        self.assertEqual(len(why), 1)
        self.assertIn("non-monotonic", why[0])
        self.assertEqual(bs.suspect_reasons(bw, 4096), [])

    def test_fall_within_spread_is_not_suspect(self):
        bw = {16384: [1600, 1600, 2200], 65536: [1620, 1140, 1680]}
        self.assertEqual(bs.falls(bw), [])

    def test_latency_falling_with_size(self):
        lat = {2: [46.2, 45.7, 49.0], 16: [44.9, 44.3, 45.9], 128: [43.6, 40.6, 45.2],
               1024: [46.4, 46.2, 47.7]}
        self.assertIn((2, 16), bs.falls(lat))
        self.assertIn((2, 128), bs.falls(lat))
        self.assertTrue(bs.suspect_reasons(lat, 2))
        self.assertEqual(bs.suspect_reasons(lat, 1024), [])

    def test_far_repetition(self):
        why = bs.suspect_reasons({65536: [2700, 2650, 900, 2720, 2690]}, 65536)
        self.assertEqual(len(why), 1)
        self.assertIn("1 of 5", why[0])


class Choice(unittest.TestCase):
    def cand(self, name, values, suspect=()):
        return {"name": name, "values": values, "suspect": list(suspect)}

    def test_best_bandwidth(self):
        c = [self.cand("qperf", [1600, 1620]), self.cand("sockperf", [2700, 2710]),
             self.cand("ucx", [900])]
        chosen, best, note = bs.choose_baseline(c, higher_is_better=True)
        self.assertEqual((chosen["name"], best["name"], note), ("sockperf", "sockperf", ""))

    def test_best_latency(self):
        c = [self.cand("qperf", [46.0]), self.cand("ucx", [8.8, 9.0]), self.cand("fi", [9.4])]
        chosen, _, _ = bs.choose_baseline(c, higher_is_better=False)
        self.assertEqual(chosen["name"], "ucx")

    def test_suspect_best_is_replaced(self):
        c = [self.cand("qperf", [3000], ["non-monotonic"]), self.cand("sockperf", [2700])]
        chosen, best, note = bs.choose_baseline(c, higher_is_better=True)
        self.assertEqual((chosen["name"], best["name"]), ("sockperf", "qperf"))
        self.assertIn("qperf", note)
        self.assertIn("non-monotonic", note)

    def test_all_suspect(self):
        c = [self.cand("a", [5.0], ["far"]), self.cand("b", [7.0], ["falls"])]
        chosen, best, note = bs.choose_baseline(c, higher_is_better=False)
        self.assertEqual(chosen["name"], "a")
        self.assertIn("every baseline is suspect", note)

    def test_nothing_measured(self):
        chosen, best, note = bs.choose_baseline([self.cand("a", [])], True)
        self.assertIsNone(chosen)
        self.assertEqual(note, "no baseline measured")


class Verdict(unittest.TestCase):
    def test_verdicts(self):
        self.assertEqual(bs.verdict(1.6, 1.5, True), "met")
        self.assertEqual(bs.verdict(0.6, 1.5, True), "not met: 2.5x short")
        self.assertEqual(bs.verdict(0.15, 0.2, False), "met")
        self.assertEqual(bs.verdict(3.0, 1.0, False), "not met: 3.0x short")
        self.assertEqual(bs.verdict(None, 1.0, False), "not measured")
        self.assertIn("not met", bs.verdict(0.0, 1.0, True))


class Report(unittest.TestCase):
    """perf_report's target table on a made-up run: the best TCP bandwidth
    falls with size, so the next best one is the denominator, and says so."""

    def run_data(self):
        runs = []

        def add(test, size, rep, **kv):
            runs.append(dict(test=test, size=size, rep=rep, ok=True, **kv))
        for rep in range(5):
            add("write_bw", 65536, rep, bw_Bps=3000e6 + rep * 10e6)
            # qperf: the best at 64 KiB, but below every 16 KiB repetition
            add("qperf_tcp_bw", "64-1M", rep,
                bw_by_size={"16384": 9000e6 + rep * 1e6, "65536": 5000e6 + rep * 1e6})
            add("sockperf_tp", 4096, rep, bw_Bps=1000e6)
            add("sockperf_tp", 65000, rep, bw_Bps=2000e6 + rep * 1e6)
            add("ucx_tag_lat", 2, rep, lat_p50_us=8.0)
            add("send_lat", 2, rep, t_typical=4.0)
        return pr.Data({"meta": {"reps": 5}, "runs": runs})

    def test_suspect_best_is_passed_over(self):
        lines, res = pr.targets17(self.run_data())
        self.assertEqual(res["bw_base"]["test"], "sockperf_tp")
        self.assertAlmostEqual(res["bw"], 3020e6 / 2002e6)
        text = "\n".join(lines)
        self.assertIn("qperf tcp_bw is better but suspect", text)
        self.assertAlmostEqual(res["send_lat"], 0.5)
        self.assertIn("not met: 2.5x short", text)

    def test_merge_median(self):
        m = pr.merge_median([{"a": 1, "b": {"c": 10}}, {"a": 3, "b": {"c": 30}}, {"a": 2, "b": {}}])
        self.assertEqual((m["a"], m["b"]["c"]), (2, 20))


class MachineMode(unittest.TestCase):
    """The machine's mode (bench/machine_probe) per run, and the 64 KiB
    ratio taken within one mode only."""

    def run_data(self, probed=True):
        runs = []
        # rep: (rocemu's mode, MB/s), (sockperf's mode, MB/s)
        plan = [(("far", 4000), ("far", 5000)), (("far", 4400), ("near", 6500)),
                (("near", 8000), ("near", 6000)), (("mixed", 9000), ("far", 5400)),
                (("far", 4200), ("far", 5200))]
        for rep, ((wm, wv), (tm, tv)) in enumerate(plan):
            for test, size, mode, v in (("write_bw", 65536, wm, wv), ("sockperf_tp", 65000, tm, tv)):
                r = dict(test=test, size=size, rep=rep, ok=True, bw_Bps=v * 1e6)
                if probed:
                    rtt = 60.0 if mode == "near" else 350.0
                    r.update(mode=mode, probe=[{"line_rtt_ns": rtt}, {"line_rtt_ns": rtt}])
                runs.append(r)
        return pr.Data({"meta": {"reps": 5, "near_rtt_ns": 150}, "runs": runs})

    def test_ratio_within_one_mode(self):
        d = self.run_data()
        wb = pr.runs_with_mode(d, "write_bw", 65536, "bw_Bps")
        tb = pr.runs_with_mode(d, "sockperf_tp", 65000, "bw_Bps")
        pairs = pr.mode_pairs(wb, tb)
        # the mixed run (9000) is in neither mode
        self.assertEqual(sorted(pairs["far"][0]), [4000e6, 4200e6, 4400e6])
        self.assertEqual(sorted(pairs["far"][1]), [5000e6, 5200e6, 5400e6])
        self.assertEqual((pairs["near"][0], sorted(pairs["near"][1])), ([8000e6], [6000e6, 6500e6]))
        text = "\n".join(pr.mode_section(d))
        self.assertIn("far: 4200 MB/s (3 runs) / 5200 MB/s (3 runs) = **0.81**", text)
        self.assertIn("near: 8000 MB/s (1 run) / 6250 MB/s (2 runs) = **1.28**", text)
        self.assertIn("| 3 | 0 / 1 / 1 |", text)

    def test_rate_within_one_mode(self):
        d = self.run_data()
        # 64 B: rocemu far 2.0 and 2.4, near 3.6; the raw link far 15, near 35
        for rep, (mode, v, lm, lv) in enumerate([("far", 2.0, "far", 15e6), ("near", 3.6, "near", 35e6),
                                                  ("far", 2.4, "mixed", 30e6)]):
            d.runs.append(dict(test="write_bw", size=64, rep=rep, ok=True, msgrate_mpps=v, mode=mode))
            d.runs.append(dict(test="memif_testpmd", size=64, rep=rep, ok=True, rx_pps=lv, mode=lm))
        text = "\n".join(pr.mode_section(d))
        self.assertIn("far: 2.20 Mmsg/s (2 runs) / 15.00 Mpps (1 run) = **0.147**", text)
        self.assertIn("near: 3.60 Mmsg/s (1 run) / 35.00 Mpps (1 run) = **0.103**", text)

    def test_no_probes_no_section(self):
        self.assertEqual(pr.mode_section(self.run_data(probed=False)), [])

    def test_run_mode(self):
        self.assertEqual(pb.run_mode({"mode": "near"}, {"mode": "near"}), "near")
        self.assertEqual(pb.run_mode({"mode": "near"}, {"mode": "far"}), "mixed")
        self.assertIsNone(pb.run_mode({"error": "no probe"}, {"mode": "far"}))
        self.assertEqual(pb.machine_probe("/nonexistent")["error"],
                         "no bench/machine_probe in the build")


class QpsPairs(unittest.TestCase):
    """The 1024-QP row: each repetition's 1024-QP run over the 1-QP run
    beside it, the worst over pairs of one machine mode."""

    @staticmethod
    def mk(test, rep, size, bw, mode, ok=True):
        return {"test": test, "rep": rep, "size": size, "bw_Bps": bw, "mode": mode, "ok": ok}

    def test_sweep_puts_one_qp_beside_the_largest(self):
        self.assertEqual(pb.qps_sweep([16, 64, 256, 1024]), [16, 64, 256, 1, 1024])
        self.assertEqual(pb.qps_sweep([1024]), [1, 1024])
        self.assertEqual(pb.qps_sweep([1024, 1, 16]), [16, 1, 1024])
        # the reversed repetitions keep the two next to each other
        sw = list(reversed(pb.qps_sweep([16, 64, 256, 1024])))
        self.assertEqual(sw.index(1), sw.index(1024) + 1)

    def test_pairs_by_mode(self):
        R = self.mk
        runs = [R("write_bw", 0, 65536, 11000e6, "near"),   # not used: the sweep has its own
                R("write_bw_qps", 0, 1, 10000e6, "near"), R("write_bw_qps", 0, 1024, 6000e6, "near"),
                R("write_bw_qps", 1, 1, 6000e6, "far"), R("write_bw_qps", 1, 1024, 4800e6, "far"),
                # rep 2: the 1-QP run near, the 1024-QP run far: a mixed pair
                R("write_bw_qps", 2, 1, 11000e6, "near"), R("write_bw_qps", 2, 1024, 3000e6, "far"),
                # rep 3: a run with a mixed probe pair
                R("write_bw_qps", 3, 1, 6000e6, "far"), R("write_bw_qps", 3, 1024, 2000e6, "mixed"),
                # rep 4: the 1024-QP run failed: no pair
                R("write_bw_qps", 4, 1, 6000e6, "far"), R("write_bw_qps", 4, 1024, None, "far", ok=False),
                R("write_bw_qps", 1, 256, 5000e6, "far")]
        pairs = pr.qps_pairs(runs, 1024)
        self.assertEqual([p["rep"] for p in pairs], [0, 1, 2, 3])
        self.assertEqual([p["mode"] for p in pairs], ["near", "far", "mixed", "mixed"])
        self.assertAlmostEqual(pairs[0]["ratio"], 0.6)
        self.assertAlmostEqual(pairs[1]["ratio"], 0.8)
        same = [p["ratio"] for p in pairs if p["mode"] != "mixed"]
        self.assertAlmostEqual(min(same), 0.6)  # not rep 2's 0.27 across modes
        note = pr.qps_pairs_note(pairs)
        self.assertIn("(2 of 4;", note)
        self.assertIn("rep 2 0.27 (mixed)", note)

    def test_old_files_use_write_bw(self):
        R = self.mk
        runs = [R("write_bw", 0, 65536, 10000e6, "far"), R("write_bw_qps", 0, 1024, 5000e6, "far"),
                R("write_bw", 1, 65536, 10000e6, None), R("write_bw_qps", 1, 1024, 5000e6, None)]
        pairs = pr.qps_pairs(runs, 1024)
        self.assertEqual([(p["rep"], p["ratio"], p["mode"]) for p in pairs],
                         [(0, 0.5, "far"), (1, 0.5, "mixed")])
        self.assertEqual(pr.qps_pairs([], 1024), [])


class History(unittest.TestCase):
    """The targets across runs: every full run's ratios recomputed from its
    own file; quick and partial runs left out, an unreadable file named."""

    @staticmethod
    def write(dirname, name, meta, runs):
        path = os.path.join(dirname, name)
        with open(path, "w") as f:
            json.dump({"meta": meta, "runs": runs}, f)
        return path

    def test_rows_and_section(self):
        def runs(bw):
            return [{"test": t, "size": sz, "rep": rep, "ok": True, "bw_Bps": v}
                    for rep in range(3)
                    for t, sz, v in (("write_bw", 65536, bw), ("sockperf_tp", 65000, 2000e6),
                                     ("write_bw_qps", 1, bw), ("write_bw_qps", 1024, bw / 2))]
        with tempfile.TemporaryDirectory() as d:
            meta = {"reps": 3, "machine": {"kernel": "k1", "git": "abc"}}
            old = self.write(d, "bench-1.json", dict(meta, started="2026-01-01T00:00:00Z"), runs(3000e6))
            cur = self.write(d, "bench-2.json", dict(meta, started="2026-01-02T00:00:00Z",
                                                     only=["acct", "base", "bw", "lat"]), runs(4000e6))
            self.write(d, "bench-3.json", dict(meta, started="2026-01-03T00:00:00Z", quick=True), runs(1e6))
            self.write(d, "bench-4.json", dict(meta, started="2026-01-04T00:00:00Z", only=["qps"]), runs(1e6))
            with open(os.path.join(d, "bench-5.json"), "w") as f:
                f.write("{not json")
            rows = pr.history_rows(sorted(glob.glob(os.path.join(d, "bench-*.json"))), cur)
            self.assertEqual([r.get("started") for r in rows], ["2026-01-01 00:00", "2026-01-02 00:00", None])
            self.assertAlmostEqual(rows[0]["res"]["bw"], 1.5)
            self.assertAlmostEqual(rows[1]["res"]["bw"], 2.0)
            self.assertAlmostEqual(rows[1]["res"]["qps_worst"], 0.5)  # no probes: every pair counts
            self.assertEqual([r.get("current") for r in rows], [False, True, None])
            self.assertEqual(rows[2]["error"], "JSONDecodeError")
            data = pr.Data(json.load(open(cur)))
            data.path = cur
            text = "\n".join(pr.history_section(data))
            self.assertIn("| **2026-01-02 00:00** | **k1** | **`abc`** | **3** | **-** | **2.00** |", text)
            self.assertIn("| 2026-01-01 00:00 | k1 | `abc` | 3 | - | 1.50 |", text)
            self.assertIn("bench-5.json: unreadable (JSONDecodeError)", text)
            self.assertNotIn("2026-01-03", text)


if __name__ == "__main__":
    unittest.main()
