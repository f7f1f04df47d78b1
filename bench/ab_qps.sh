#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Interleaved A/B of two rocemu builds for many QPs over memif, pinned like
# `make bench` (server on CPU 1, client on CPU 0): each round runs, for build
# A then build B, `ib_write_bw -s 65536 -q 1` (2 s) and `-q 1024` (6 s, as
# the bench), each between two runs of bench/machine_probe, with
# ROCEMU_STATS=1 on both sides. Prints every run (MB/s, machine mode, the
# client's and server's retransmission and drop counters), then per build
# the medians, the 1024/1 ratio of each pair whose runs saw one mode, and
# B/A per round.
#
#   bench/ab_qps.sh BUILD_A BUILD_B [ROUNDS]
#
# A build is a meson build directory with tools/rocemu; the probe is taken
# from BUILD_B (bench/machine_probe). Same-build A/B of an environment
# variable: a directory with tools/rocemu = `#!/bin/sh` / `VAR=X exec
# BUILD/tools/rocemu "$@"`.
set -u
shopt -s lastpipe
[ $# -ge 2 ] || { sed -n '3,17p' "$0"; exit 2; }
A=$(cd "$1" && pwd) B=$(cd "$2" && pwd) R=${3:-4}
for b in "$A" "$B"; do
	[ -x "$b/tools/rocemu" ] || { echo "no $b/tools/rocemu" >&2; exit 2; }
done
PROBE=$B/bench/machine_probe
[ -x "$PROBE" ] || PROBE=$(dirname "$0")/../build/bench/machine_probe
[ -x "$PROBE" ] || { echo "no bench/machine_probe" >&2; exit 2; }
NEAR_NS=150 # as perf_bench.py: a line round trip under this is near
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the machine's mode now: near, far or ? (no reading)
mode() {
	"$PROBE" 2>/dev/null | awk -v n=$NEAR_NS '
		$1 == "line_rtt_ns" {r = $2}
		END {print (r == "" || r < 0 || r >= 1e6) ? "?" : (r < n ? "near" : "far")}'
}

# counter NAME FILE: a ROCEMU_STATS line's value, 0 when absent
counter() { awk -v k="$1" '$1 == "rocemu:" && $4 == k {v = $5} END {print v + 0}' "$2"; }

# one pinned pair; prints "MBps mode" and leaves both outputs in $tmp
pair() {
	local build=$1 q=$2 d=$3
	local port=$((18000 + RANDOM % 900)) sock="$tmp/m$RANDOM.sock" m0 m1 bw
	m0=$(mode)
	ROCEMU_STATS=1 taskset -c 1 timeout 90 "$build/tools/rocemu" run --no-check \
		--port "memif:server:$sock" --ip 10.91.0.1/24 -- ib_write_bw -d rocemu0 -x 1 -F \
		-p "$port" -s 65536 -q "$q" -D "$d" >"$tmp/srv" 2>&1 &
	sleep 0.5
	ROCEMU_STATS=1 taskset -c 0 timeout 90 "$build/tools/rocemu" run --no-check \
		--port "memif:client:$sock" --ip 10.91.0.2/24 -- ib_write_bw -d rocemu0 -x 1 -F \
		-p "$port" -s 65536 -q "$q" -D "$d" 127.0.0.1 >"$tmp/cli" 2>&1
	wait
	m1=$(mode)
	bw=$(grep -E '^ *65536 +[0-9]+ ' "$tmp/cli" | awk '{printf "%.0f", $4 * 1.048576}')
	echo "${bw:--} $([ "$m0" = "$m1" ] && echo "$m0" || echo mixed)"
}

. "$(dirname "$0")/ab_lib.sh"
declare -A pm
printf "%-5s %-3s %5s %8s %-5s | client: %s | server: %s\n" round bld QPs MB/s mode \
	"retransmit_timeouts retransmit_packets drop_mbuf_exhausted direct_tx_capped" \
	"dup_requests"
for ((i = 0; i < R; i++)); do
	for tag in A B; do
		d=${!tag}
		for q in 1 1024; do
			dur=2
			[ $q -gt 1 ] && dur=6
			pair "$d" $q $dur | read -r bw md
			echo "$bw" | note "$tag.bw_q$q"
			pm[$tag.$i.$q]="$bw $md"
			printf "%-5d %-3s %5d %8s %-5s | %s %s %s %s | %s\n" $i $tag $q "$bw" "$md" \
				"$(counter retransmit_timeouts "$tmp/cli")" \
				"$(counter retransmit_packets "$tmp/cli")" \
				"$(counter drop_mbuf_exhausted "$tmp/cli")" \
				"$(counter direct_tx_capped "$tmp/cli")" \
				"$(counter dup_requests "$tmp/srv")"
		done
		# the round's ratio, when both runs saw one mode
		read -r b1 m1 <<<"${pm[$tag.$i.1]}"
		read -r bq mq <<<"${pm[$tag.$i.1024]}"
		if [ "$m1" = "$mq" ] && [ "$m1" != mixed ] && [ "$m1" != "?" ] &&
			[ "$b1" != - ] && [ "$bq" != - ]; then
			awk -v a="$bq" -v b="$b1" 'BEGIN {printf "%.3f", a / b}' | note "$tag.ratio_$m1"
		else
			echo - | note "$tag.ratio_far"
			echo - | note "$tag.ratio_near"
			continue
		fi
		[ "$m1" = far ] && echo - | note "$tag.ratio_near" || echo - | note "$tag.ratio_far"
	done
done
echo "A = $A"
echo "B = $B"
ab_report bw_q1 bw_q1024 ratio_far ratio_near
uptime
