#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# `make bench`: rocemu against TCP and the memif link, in one run.
#
#   scripts/run-bench.sh [BUILD_DIR]
#
# 1. installs the baseline tools when run as root and they are missing
#    (perftest, qperf, sockperf, ucx-utils, libfabric-bin, strace, linux-perf,
#    python3-matplotlib; DPDK's testpmd comes with dpdk);
# 2. builds rocemu and its libibverbs in BUILD_DIR;
# 3. runs bench/perf_bench.py (perftest over rocemu on memif, the loopback
#    baselines, the raw memif link, system-call/CPU accounting with perf
#    stat, a perf profile; 5 interleaved repetitions; the rocemu host's part
#    only with BENCH_ONLY=host, below), every command under a deadline,
#    failures recorded not fatal;
# 4. writes bench/results/bench-<UTC time>.json;
# 5. runs the codec micro-benchmarks (bench/wire_bench), then writes
#    docs/PERFORMANCE.md, docs/tcp-vs-rdma{,.zh}.md and docs/img/perf-*.svg
#    from the JSON (bench/perf_report.py).
#
# Environment: REPS (default 5), HOST_REPS (the host part's, default 5),
# BENCH_ONLY (comma list for perf_bench.py --only; BENCH_ONLY=host runs the
# host part alone, writes bench/results/host-<time>.json and replaces only
# the host section of docs/PERFORMANCE.md), BENCH_QUICK=1 (a check of the
# pipeline: fewer sizes, 2 repetitions; its report, marked as not a real
# run, goes to bench/results/quick/, never to docs/), NO_DOC=1 (JSON only),
# NO_INSTALL=1 (never apt-get).
set -eu
build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3
[ -x "$py" ] || py=python3

# ---- 1. tools
want="perftest qperf sockperf ucx-utils libfabric-bin strace linux-perf python3-matplotlib dpdk"
missing=""
for p in $want; do
	dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	if [ "$(id -u)" = 0 ] && [ "${NO_INSTALL:-0}" != 1 ]; then
		avail=""
		for p in $missing; do
			# only what this system's sources offer (netperf, for one, is non-free)
			if apt-cache policy "$p" 2>/dev/null | grep -q "Candidate: [0-9]"; then
				avail="$avail $p"
			else
				echo "run-bench: $p has no install candidate here; its part is skipped" >&2
			fi
		done
		if [ -n "$avail" ]; then
			echo "run-bench: installing$avail"
			DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -q $avail >/dev/null ||
				echo "run-bench: apt-get install$avail failed; the missing parts are recorded as failures" >&2
		fi
	else
		echo "run-bench: missing$missing (not root or NO_INSTALL=1): those parts will fail and be recorded" >&2
	fi
fi

# ---- 2. build (only what the bench runs)
[ -f "$build/build.ninja" ] || meson setup "$build"
ninja -C "$build" tools/rocemu verbs-provider/libibverbs.so.1

# ---- 3./4. run, then the report
stamp=$(date -u +%Y%m%dT%H%M%SZ)
json="$here/bench/results/bench-$stamp.json"
# the host part alone (issue 16) has a JSON of its own and replaces only
# its section of docs/PERFORMANCE.md
host_only=0
[ "${BENCH_ONLY:-}" = host ] && host_only=1 && json="$here/bench/results/host-$stamp.json"
# a quick run's report never replaces the committed one
docs="$here/docs"
if [ "${BENCH_QUICK:-0}" = 1 ]; then
	docs="$here/bench/results/quick"
	json="$docs/$(basename "$json")"
fi
mkdir -p "$here/bench/results" "$docs"
set -- --out "$json"
[ -n "${REPS:-}" ] && set -- "$@" --reps "$REPS"
[ -n "${BENCH_ONLY:-}" ] && set -- "$@" --only "$BENCH_ONLY"
[ -n "${HOST_REPS:-}" ] && set -- "$@" --host-reps "$HOST_REPS"
[ "${BENCH_QUICK:-0}" = 1 ] && set -- "$@" --quick
# never leave a busy-polling perftest or testpmd behind, even on ^C:
# perf_bench.py kills its own process groups; this catches the script itself
trap 'echo "run-bench: interrupted" >&2; exit 130' INT TERM
"$py" "$here/bench/perf_bench.py" "$build" "$@"
if [ $host_only = 1 ]; then
	[ "${NO_DOC:-0}" = 1 ] || "$py" "$here/bench/perf_report.py" "$json" --doc "$docs/PERFORMANCE.md"
	echo "run-bench: $json"
	exit 0
fi
[ "${BENCH_QUICK:-0}" = 1 ] || cp "$json" "$here/bench/results/latest.json"

# ---- 5. codec micro-benchmarks (their output goes into the report too)
wire="$(dirname "$json")/wire_bench-$stamp.txt"
if ninja -C "$build" bench/wire_bench >/dev/null 2>&1; then
	timeout 300 "$build/bench/wire_bench" >"$wire" 2>&1 || echo "run-bench: wire_bench failed" >&2
	cat "$wire"
fi
if [ "${NO_DOC:-0}" != 1 ]; then
	"$py" "$here/bench/perf_report.py" "$json" --doc "$docs/PERFORMANCE.md" --img "$docs/img" \
		--wire "$wire"
fi
echo "run-bench: $json"
