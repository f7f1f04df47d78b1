# SPDX-License-Identifier: BSD-3-Clause
"""The bench's arithmetic, as pure functions (tests/bench/test_bench_stats.py
checks them): medians and spreads of repetitions, the checks that make a
baseline suspect, the choice of the best trustworthy baseline, and the
verdict against a target.

A *series* is the list of one measure's values, one per repetition. A
baseline's *by-size* map is {message size: series}.
"""
import statistics

# a repetition this many times above or below the median of the others is
# "far from its other repetitions"
OUTLIER_FACTOR = 1.5


def median(xs):
    """The median of xs, None for an empty list."""
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summary(xs):
    """{n, median, min, max, rel_spread}: rel_spread is (max - min) / median,
    the baseline's spread shown beside every ratio; None when xs is empty."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    m = statistics.median(xs)
    return {"n": len(xs), "median": m, "min": min(xs), "max": max(xs),
            "rel_spread": (max(xs) - min(xs)) / m if m else None}


def fmt_summary(xs, fmt, spread=True):
    """'median [min-max]' (and the relative spread), 'failed' for none."""
    s = summary(xs)
    if not s:
        return "failed"
    if s["n"] == 1:
        return fmt(s["median"]) + " (1 repetition)"
    out = "%s [%s-%s]" % (fmt(s["median"]), fmt(s["min"]), fmt(s["max"]))
    if spread and s["rel_spread"] is not None:
        out += " ±%.0f%%" % (50 * s["rel_spread"])
    return out


def outliers(xs, factor=OUTLIER_FACTOR):
    """Indexes of the repetitions more than factor times above or below the
    median of the other repetitions (at least three repetitions needed)."""
    out = []
    if len(xs) < 3:
        return out
    for i, x in enumerate(xs):
        m = statistics.median(xs[:i] + xs[i + 1:])
        if m <= 0 or x <= 0:
            if m != x:
                out.append(i)
            continue
        if x / m > factor or m / x > factor:
            out.append(i)
    return out


def falls(by_size):
    """Where a measure that should grow (or stay) with message size falls:
    the pairs (smaller, larger) of sizes whose larger size's median lies below
    every repetition of the smaller size, i.e. the fall is beyond the smaller
    size's spread. Holds for bandwidth (more bytes per message never slow a
    stream down) and for latency (more bytes never arrive sooner)."""
    sizes = sorted(s for s, xs in by_size.items() if xs)
    out = []
    for i, small in enumerate(sizes):
        lo = min(by_size[small])
        for large in sizes[i + 1:]:
            if median(by_size[large]) < lo:
                out.append((small, large))
    return out


def suspect_reasons(by_size, size, fmt_size=str, factor=OUTLIER_FACTOR, fmt_val="%.4g".__mod__):
    """Why the baseline at `size` is not to be trusted, as sentences; empty
    when it is: it falls with message size beyond its spread (involving
    `size`), or one of its repetitions at `size` is far from the others."""
    why = []
    for small, large in falls(by_size):
        if size in (small, large):
            why.append("non-monotonic in size: %s median is below every repetition at %s" % (
                fmt_size(large), fmt_size(small)))
    xs = by_size.get(size) or []
    far = outliers(xs, factor)
    if far:
        why.append("%d of %d repetitions more than %.1fx off the others' median (%s)" % (
            len(far), len(xs), factor, ", ".join(fmt_val(xs[i]) for i in far)))
    return why


def choose_baseline(cands, higher_is_better):
    """The denominator among candidate baselines, each a dict with name,
    values (its series at the size) and suspect (reasons, empty when clean).
    Returns (chosen, best, note): best is the best median of all; chosen is
    the best median among the clean ones, or the best suspect one when none is
    clean; note says, in words, when chosen is not best or is suspect."""
    have = [c for c in cands if median(c["values"]) is not None]
    if not have:
        return None, None, "no baseline measured"
    pick = max if higher_is_better else min
    best = pick(have, key=lambda c: median(c["values"]))
    clean = [c for c in have if not c["suspect"]]
    if clean:
        chosen = pick(clean, key=lambda c: median(c["values"]))
        note = "" if chosen is best else "%s is better but suspect (%s); next best used" % (
            best["name"], "; ".join(best["suspect"]))
        return chosen, best, note
    return best, best, "every baseline is suspect; the best one is used anyway (%s)" % (
        "; ".join(best["suspect"]))


def ratio(num, den):
    """The ratio of two series' medians, None when either is missing."""
    a, b = median(num), median(den)
    return a / b if a is not None and b else None


def verdict(r, target, higher_is_better):
    """'met' or how far from the target: 'not met: 2.5x short' (the factor
    the ratio must still improve by)."""
    if r is None:
        return "not measured"
    if (r >= target) if higher_is_better else (r <= target):
        return "met"
    if r <= 0:
        return "not met: nothing measured above zero"
    gap = target / r if higher_is_better else r / target
    return "not met: %.1fx short" % gap
