#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Interleaved A/B of two rocemu builds over memif, pinned like `make bench`
# (server on CPU 1, client on CPU 0): each round runs, for build A then build
# B, ib_write_bw -s 65536, ib_write_bw -s 64, ib_write_lat -s 2 (typical,
# average, 99th percentile) and ib_send_lat -s 2, so a slow spell of a
# shared machine hits both builds.
# Prints the median and every value per build and measure, then B/A per
# round (the two runs of a round are minutes apart at most): the median ratio
# and its range, the spread to read any difference against.
#
#   bench/ab.sh BUILD_A BUILD_B [ROUNDS]
#
# A build is a meson build directory with tools/rocemu (for the old tree:
# `git worktree add /tmp/old REV && meson setup /tmp/old/build
# --buildtype debugoptimized && ninja -C /tmp/old/build tools/rocemu
# verbs-provider/libibverbs.so.1`). Needs perftest; root only for nothing.
set -u
shopt -s lastpipe # note() below runs in this shell, at the end of a pipe
[ $# -ge 2 ] || { sed -n '3,18p' "$0"; exit 2; }
A=$(cd "$1" && pwd) B=$(cd "$2" && pwd) R=${3:-5}
for b in "$A" "$B"; do
	[ -x "$b/tools/rocemu" ] || { echo "no $b/tools/rocemu" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# one perftest pair; prints the client's result line
pair() {
	local build=$1 prog=$2; shift 2
	local port=$((18000 + RANDOM % 900)) sock="$tmp/m$RANDOM.sock"
	taskset -c 1 timeout 60 "$build/tools/rocemu" run --no-check --port "memif:server:$sock" \
		--ip 10.91.0.1/24 -- "$prog" -d rocemu0 -x 1 -F -p "$port" "$@" >"$tmp/srv" 2>&1 &
	sleep 0.5
	taskset -c 0 timeout 60 "$build/tools/rocemu" run --no-check --port "memif:client:$sock" \
		--ip 10.91.0.2/24 -- "$prog" -d rocemu0 -x 1 -F -p "$port" "$@" 127.0.0.1 2>&1 |
		grep -E '^ *[0-9]+ +[0-9]+ '
	wait
}

. "$(dirname "$0")/ab_lib.sh"
for ((i = 0; i < R; i++)); do
	for tag in A B; do
		d=${!tag}
		pair "$d" ib_write_bw -s 65536 -D 2 | awk '{printf "%.0f", $4 * 1.048576}' | note $tag.bw64k_MBps
		pair "$d" ib_write_bw -s 64 -D 2 | awk '{print $5}' | note $tag.rate64_Mpps
		pair "$d" ib_write_lat -s 2 -n 3000 >"$tmp/wlat"
		awk '{print $5}' "$tmp/wlat" | note $tag.write_lat_us
		awk '{print $6}' "$tmp/wlat" | note $tag.write_lat_avg_us
		awk '{print $8}' "$tmp/wlat" | note $tag.write_lat_p99_us
		pair "$d" ib_send_lat -s 2 -n 5000 | awk '{print $5}' | note $tag.send_lat_us
	done
done
echo "A = $A"
echo "B = $B"
ab_report bw64k_MBps rate64_Mpps write_lat_us write_lat_avg_us write_lat_p99_us send_lat_us
