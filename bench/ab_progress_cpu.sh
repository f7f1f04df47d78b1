#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Interleaved A/B of one rocemu build in two CPU arrangements over memif:
#  A, the bench's: server process on CPU 1, client on CPU 0, each running its
#    application and its progress thread on that one CPU;
#  B, --progress-cpu: each process may use CPUs 0 and 1; the client's
#    application on CPU 0 and its progress thread pinned and spinning on
#    CPU 1, the server the reverse (two processes, two threads each, on 2
#    CPUs: each CPU shares one application with the other side's thread).
# Each round runs ib_write_bw -s 65536, ib_write_bw -s 64, ib_write_lat -s 2
# and ib_send_lat -s 2 in A then B; prints medians and every value, B/A per
# round with its range, and the CPU seconds both processes used per run.
#
#   bench/ab_progress_cpu.sh BUILD [ROUNDS]
set -u
shopt -s lastpipe
[ $# -ge 1 ] || { sed -n '3,15p' "$0"; exit 2; }
D=$(cd "$1" && pwd) R=${2:-5}
[ -x "$D/tools/rocemu" ] || { echo "no $D/tools/rocemu" >&2; exit 2; }
[ "$(nproc)" -ge 2 ] || { echo "needs 2 CPUs" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# pin_app FILE PID CPU: once the provider said where its thread went, the
# application's thread (the program's main thread) goes to CPU
pin_app() {
	for _ in $(seq 200); do
		grep -q "progress thread on CPU" "$1" 2>/dev/null && break
		sleep 0.02
	done
	taskset -p -c "$3" "$2" >/dev/null
}

# one perftest pair in arrangement A or B; prints the client's result line
# and leaves the two processes' user+system seconds (/usr/bin/time) in $tmp/cpu
pair() {
	local mode=$1 prog=$2; shift 2
	local port=$((18000 + RANDOM % 900)) sock="$tmp/m$RANDOM.sock"
	local sargs=(-c 1) cargs=(-c 0) sopt=() copt=()
	if [ "$mode" = B ]; then
		sargs=(-c 0,1) cargs=(-c 0,1) sopt=(--progress-cpu 0) copt=(--progress-cpu 1)
	fi
	taskset "${sargs[@]}" /usr/bin/time -f "cpu %U %S" -o "$tmp/st" timeout 60 \
		"$D/tools/rocemu" run --no-check "${sopt[@]}" --port "memif:server:$sock" \
		--ip 10.91.0.1/24 -- "$prog" -d rocemu0 -x 1 -F -p "$port" "$@" >"$tmp/srv" 2>&1 &
	if [ "$mode" = B ]; then
		sleep 0.1
		pin_app "$tmp/srv" "$(pgrep -n -f -- "-p $port")" 1
	else
		sleep 0.5
	fi
	taskset "${cargs[@]}" /usr/bin/time -f "cpu %U %S" -o "$tmp/ct" timeout 60 \
		"$D/tools/rocemu" run --no-check "${copt[@]}" --port "memif:client:$sock" \
		--ip 10.91.0.2/24 -- "$prog" -d rocemu0 -x 1 -F -p "$port" "$@" 127.0.0.1 \
		>"$tmp/cli" 2>&1 &
	if [ "$mode" = B ]; then
		sleep 0.1
		pin_app "$tmp/cli" "$(pgrep -n -f -- "-p $port.*127.0.0.1")" 0
	fi
	wait
	grep -E '^ *[0-9]+ +[0-9]+ ' "$tmp/cli" | tail -1
	awk '{s += $2 + $3} END {printf "%.2f\n", s}' "$tmp/st" "$tmp/ct" >"$tmp/cpu"
}

. "$(dirname "$0")/ab_lib.sh"
for ((i = 0; i < R; i++)); do
	for tag in A B; do
		pair $tag ib_write_bw -s 65536 -D 2 | awk '{printf "%.0f", $4 * 1.048576}' | note $tag.bw64k_MBps
		note $tag.cpu_s_bw64k <"$tmp/cpu"
		pair $tag ib_write_bw -s 64 -D 2 | awk '{print $5}' | note $tag.rate64_Mpps
		pair $tag ib_write_lat -s 2 -n 3000 | awk '{print $5}' | note $tag.write_lat_us
		note $tag.cpu_s_write_lat <"$tmp/cpu"
		pair $tag ib_send_lat -s 2 -n 5000 | awk '{print $5}' | note $tag.send_lat_us
	done
done
echo "build = $D; A = one CPU per process; B = --progress-cpu, apps on the other CPU"
ab_report bw64k_MBps rate64_Mpps write_lat_us send_lat_us cpu_s_bw64k cpu_s_write_lat
