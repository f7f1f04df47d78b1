#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# One pinned `ib_write_bw -s 65536 -q 1024 -D 15` pair over memif (server on
# CPU 1, client on CPU 0, as `make bench`), ROCEMU_STATS=1, profiled on both
# sides for 4 s from 8.5 s in (perftest fills its 1024 buffers first):
# perf record -e cpu-clock, perf stat --per-thread, and every thread's
# /proc schedstat (time run, time runnable but waiting) before and after.
# Writes srv.* and cli.* into OUTDIR and prints MB/s, the machine's mode
# before and after, the counters that tell the slow kinds apart
# (bench/perf_analysis.md, "Many QPs") and each progress thread's time.
# Run it under the measurement lock.
#
#   bench/prof_qps.sh BUILD OUTDIR
set -u
[ $# -eq 2 ] || { sed -n '3,13p' "$0"; exit 2; }
B=$(cd "$1" && pwd) O=$2 D=15
mkdir -p "$O"
PROBE=$B/bench/machine_probe
mode() { "$PROBE" 2>/dev/null | awk '$1 == "line_rtt_ns" {r = $2} END {print (r == "" ? "?" : (r < 150 ? "near" : "far"))}'; }
counter() { awk -v k="$1" '$1 == "rocemu:" && $4 == k {v = $5} END {print v + 0}' "$2"; }
# comm, schedstat (run ns, wait ns, slices) of each thread of pid $1
threads() { for t in /proc/"$1"/task/*; do echo "$(cat "$t"/comm) $(cat "$t"/schedstat)"; done; }
sock=$O/m.sock port=$((18000 + RANDOM % 900))
args=(-d rocemu0 -x 1 -F -p "$port" -s 65536 -q 1024 -D "$D")
m0=$(mode)
ROCEMU_STATS=1 taskset -c 1 timeout 90 "$B/tools/rocemu" run --no-check \
	--port "memif:server:$sock" --ip 10.91.0.1/24 -- ib_write_bw "${args[@]}" >"$O/srv" 2>&1 &
sleep 0.5
ROCEMU_STATS=1 taskset -c 0 timeout 90 "$B/tools/rocemu" run --no-check \
	--port "memif:client:$sock" --ip 10.91.0.2/24 -- ib_write_bw "${args[@]}" 127.0.0.1 >"$O/cli" 2>&1 &
sleep 8
pid[0]=$(pgrep -f "^ib_write_bw ${args[*]}\$" | head -1)
pid[1]=$(pgrep -f "^ib_write_bw ${args[*]} 127.0.0.1" | head -1)
n=(srv cli)
for i in 0 1; do
	[ -n "${pid[$i]}" ] || { echo "no ${n[$i]} ib_write_bw" >&2; continue; }
	(threads "${pid[$i]}" >"$O/${n[$i]}.ss0"; sleep 4; threads "${pid[$i]}" >"$O/${n[$i]}.ss1") &
	perf record -q -e cpu-clock -F 2000 -o "$O/${n[$i]}.data" -p "${pid[$i]}" -- sleep 4 2>/dev/null &
	perf stat --per-thread -e task-clock,context-switches -p "${pid[$i]}" -o "$O/${n[$i]}.stat" -- sleep 4 2>/dev/null &
done
wait
m1=$(mode)
echo "MB/s $(grep -E '^ *65536 +[0-9]+ ' "$O/cli" | awk '{printf "%.0f", $4 * 1.048576}') mode $m0/$m1 load $(cut -d' ' -f1 /proc/loadavg)"
echo "client: direct_tx_capped $(counter direct_tx_capped "$O/cli") progress_woken $(counter progress_woken "$O/cli")" \
	"retransmit_timeouts $(counter retransmit_timeouts "$O/cli") retransmit_packets $(counter retransmit_packets "$O/cli")"
echo "server: direct_tx_capped $(counter direct_tx_capped "$O/srv") dup_requests $(counter dup_requests "$O/srv")"
for s in srv cli; do
	[ -s "$O/$s.ss1" ] && paste "$O/$s.ss0" "$O/$s.ss1" | awk -v s=$s '$1 == "rocemu-progress" || $1 == "ib_write_bw" {
		printf "%s %-15s run %5.0f ms, runnable waiting %5.0f ms\n", s, $1, ($6 - $2) / 1e6, ($7 - $3) / 1e6}'
done
