#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Does `rocemu inspect` stay flat in memory as the capture grows?
# Generates a 10 MB and a ~1 GB capture (bench/inspect_gen.py: RC WRITEs
# and ACKs over 16 QPs, every ICRC right) and reports the peak RSS and the
# speed of `rocemu inspect` (summary, --check and --plot) on each; then a
# 100 MB one over 4096 QPs: memory follows the number of flows, not the size.
#
# usage: bench/inspect_memory.sh [BUILD_DIR] [BIG_MB]
#   BUILD_DIR  default: build        BIG_MB  default: 1024
#   TMPDIR     where the captures go (deleted afterwards unless KEEP=1)
# A benchmark, not a test: it prints numbers and fails only if a run fails.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
big_mb=${2:-1024}
rocemu="$build/tools/rocemu"
py=/usr/bin/python3
[ -x "$py" ] || py=python3
[ -x "$rocemu" ] || { echo "no $rocemu: build first (ninja -C $build tools/rocemu)" >&2; exit 1; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/inspect-bench.XXXXXX")
cleanup() { [ "${KEEP:-0}" = 1 ] || rm -rf "$dir"; }
trap cleanup EXIT

# Peak RSS (kB) and wall time (s) of one run, from the kernel's accounting
# of the child (getrusage), so no external tool is needed.
measure() {
	"$py" - "$@" <<'PY'
import resource, subprocess, sys, time
t = time.monotonic()
p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)
dt = time.monotonic() - t
if p.returncode not in (0,):
    sys.exit("run failed: exit %d: %s" % (p.returncode, " ".join(sys.argv[1:])))
print("%d %.2f" % (resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, dt))
PY
}

printf '%-10s %-6s %-8s %10s %12s %10s\n' capture QPs mode "MB" "peak RSS kB" "MB/s"
for run in "10:16" "$big_mb:16" "100:4096"; do
	mb=${run%:*}
	qps=${run#*:}
	cap="$dir/bench-$mb-$qps.pcap"
	"$py" "$here/inspect_gen.py" "$cap" "$mb" "$qps" >/dev/null
	size=$(($(stat -c %s "$cap") / 1048576))
	for mode in summary check plot; do
		case $mode in
		summary) set -- "$rocemu" inspect "$cap" ;;
		check) set -- "$rocemu" inspect --check --json "$cap" ;;
		plot) set -- "$rocemu" inspect --plot --svg "$dir/plot.svg" "$cap" ;;
		esac
		r=$(measure "$@")
		rss=${r% *}
		secs=${r#* }
		rate=$(awk -v s="$size" -v t="$secs" 'BEGIN { printf "%.0f", (t > 0 ? s / t : 0) }')
		printf '%-10s %-6s %-8s %10s %12s %10s\n' "$mb MB" "$qps" "$mode" "$size" "$rss" "$rate"
	done
	rm -f "$cap"
done
