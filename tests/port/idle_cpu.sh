#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Integration (resource check, not a benchmark): a running `rocemu port` with
# nothing to do must use under 5% of one core, measured from /proc/PID/stat
# (utime + stime) and /proc/PID/task/*/schedstat over a few seconds, and must
# still answer a ping from a kernel peer after that idle period. Then the same
# CPU bound for a memif port (connected to a second rocemu port). The RTTs are
# printed, not asserted. Needs root and network namespaces (exit 77 if not).
#
# usage: idle_cpu.sh ROCEMU
set -u
rocemu=${1:?usage: $0 ROCEMU}
limit_pct=5
seconds=4

. "$(dirname "$0")/port_lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces)"
command -v ping >/dev/null || skip "ping not installed"

port_netns pi$$ idle
ip netns exec "$nsr" sysctl -qw "net.ipv6.conf.$ifr.disable_ipv6=1"
# no IPv6 on the kernel side either: its router solicitations and MLD reports
# would be traffic, and this measures an idle port
ip netns exec "$nsk" sysctl -qw "net.ipv6.conf.$ifk.disable_ipv6=1"
ip -n "$nsr" link set "$ifr" up
ip -n "$nsk" addr add 10.73.0.1/24 dev "$ifk"
ip -n "$nsk" link set "$ifk" up

ip netns exec "$nsr" "$rocemu" port --port "af_packet:$ifr" --ip 10.73.0.2/24 \
	>"$work/port.out" 2>&1 &
pid=$!
port_wait_up || { cat "$work/port.out"; echo "FAIL: rocemu port exited"; exit 1; }
# resolve once so the kernel's ARP cache is warm, then leave it alone
ip netns exec "$nsk" ping -c 1 -W 2 10.73.0.2 >/dev/null || { echo "FAIL: first ping"; exit 1; }
sleep 1

ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
sched_ns() { cat /proc/"$pid"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {print s + 0}'; }
hz=$(getconf CLK_TCK)
status=0
# idle_check KIND: the port $pid (KIND: a word before "port", or nothing) must
# use under limit_pct of a core over $seconds, by /proc/PID/stat and by
# schedstat; else status=1.
idle_check() {
	local t0 s0 w0 t1 s1 w1 wall_ns stat_pct sched_pct pct
	t0=$(ticks); s0=$(sched_ns); w0=$(date +%s%N)
	sleep $seconds
	t1=$(ticks); s1=$(sched_ns); w1=$(date +%s%N)
	wall_ns=$((w1 - w0))
	stat_pct=$(awk -v t=$((t1 - t0)) -v hz="$hz" -v w=$wall_ns 'BEGIN {printf "%.2f", 100 * t / hz / (w / 1e9)}')
	sched_pct=$(awk -v s=$((s1 - s0)) -v w=$wall_ns 'BEGIN {printf "%.2f", 100 * s / w}')
	echo "${1:+$1 }idle CPU over ${seconds}s: /proc/stat ${stat_pct}% of a core, schedstat ${sched_pct}% (threads: $(ls /proc/$pid/task | wc -l))"
	for pct in "$stat_pct" "$sched_pct"; do
		awk -v p="$pct" -v l=$limit_pct 'BEGIN {exit !(p < l)}' ||
			{ echo "FAIL: idle ${1:+$1 }port uses ${pct}% of a core (limit ${limit_pct}%)"; status=1; }
	done
}
idle_check ""

# after the idle period, a ping is still answered (RTT printed for the record)
ip netns exec "$nsk" ping -c 5 -i 0.5 -W 2 10.73.0.2 >"$work/ping.out" 2>&1 ||
	{ cat "$work/ping.out"; echo "FAIL: ping after idle"; status=1; }
grep -E "time=|rtt" "$work/ping.out"

kill -INT "$pid"
wait "$pid" || status=1
pid=

# the same for memif, which has no receive doorbell (1 ms timed sleeps)
"$rocemu" port --port "memif:server:$work/m.sock" --ip 10.74.0.1/24 >"$work/ms.out" 2>&1 &
pid=$!
"$rocemu" port --port "memif:client:$work/m.sock" --ip 10.74.0.2/24 --ping 10.74.0.1 --count 1 \
	--stay >"$work/mc.out" 2>&1 &
mpid=$!
for _ in $(seq 100); do
	grep -q "echo requests to" "$work/mc.out" 2>/dev/null && break
	sleep 0.1
done
grep -q "1/1 echo requests" "$work/mc.out" || { cat "$work/mc.out"; echo "FAIL: memif ping"; status=1; }
sleep 1
idle_check memif
kill -INT "$pid" "$mpid"
wait "$pid" || status=1
wait "$mpid" || status=1
pid=
[ $status = 0 ] && echo "PASS: idle ports (af_packet, memif) below ${limit_pct}% of a core; ping answered after idle"
exit $status
