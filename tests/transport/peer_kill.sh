#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Issue 5, a peer that disappears: two hosts (network namespaces, veth pair,
# af_packet ports) run an unmodified perftest program under `rocemu run` for
# a long duration; once traffic flows (megabytes have crossed the veth),
# host A (the server) is killed with SIGKILL. The survivor's outstanding work
# must complete with IBV_WC_RETRY_EXC_ERR (perftest: "Failed status 12")
# after the QP's retry budget: perftest's retry_cnt 7 means 7 resends on
# timeout, the 8th expiry gives up (the survivor's counters must show at
# least 8 retransmit_timeouts, retry_exceeded and silent timeouts: nothing
# came from the dead peer). The budget takes 27 periods of 67 ms (timeout 14)
# with the timer's back-off, about 1.8 s; the time is printed, and only a
# hang (the survivor still running a minute after the kill) fails, so a
# loaded machine cannot fail the test.
#   peer_kill.sh PROGRAM [ARGS...]
set -u
. "$(dirname "$0")/../verbs/pair_lib.sh"
prog=$1
shift
pair_require "$prog" perftest
HANG_MS=60000

pair_hosts pk veth 10.84.0.1 10.84.0.2 24
# rocemu runs the programs directly here (no timeout wrapper): kill them hard
trap 'for p in ${pa:-} ${pb:-}; do kill -KILL $p 2>/dev/null; done; pair_cleanup' EXIT
tcp=18516

export ROCEMU_STATS=1 # the survivor's counters at exit
ip netns exec $nsA "$ROCEMU" run "${portA[@]}" -- "$prog" -p $tcp "$@" >$dir/a.log 2>&1 &
pa=$!
pair_wait_listen $nsA $pa $tcp
ip netns exec $nsB "$ROCEMU" run "${portB[@]}" -- "$prog" -p $tcp "$@" 10.84.0.1 >$dir/b.log 2>&1 &
pb=$!
# traffic flows once 4 MB have reached host A's veth end (perftest's own
# output is buffered in a file until it exits: no progress can be read there)
rx_bytes() { ip netns exec $nsA cat /sys/class/net/${nsA}e/statistics/rx_bytes; }
start=$(rx_bytes)
while [ $(($(rx_bytes) - start)) -lt 4000000 ]; do
	kill -0 $pb 2>/dev/null || break
	sleep 0.05
done
kill -0 $pb 2>/dev/null || { echo "FAIL: client ended before the kill"; cat $dir/a.log $dir/b.log; exit 1; }
# kill the server and everything it started (rocemu run execs the program)
kill -KILL $pa
t0=$(date +%s%N)
wait $pa 2>/dev/null
pa=
rc=
while :; do
	if ! kill -0 $pb 2>/dev/null; then
		wait $pb; rc=$?; pb=; break
	fi
	[ $((($(date +%s%N) - t0) / 1000000)) -gt $HANG_MS ] && break
	sleep 0.01
done
ms=$((($(date +%s%N) - t0) / 1000000))
echo "== survivor ($prog $* 10.84.0.1)"; cat $dir/b.log
fail=0
if [ -z "$rc" ]; then
	echo "FAIL: survivor still running ${ms} ms after the kill (hang)"; fail=1
else
	echo "survivor exited with $rc ${ms} ms after the peer was killed (27 x 67 ms = 1.8 s of timer)"
	[ "$rc" -ne 0 ] || { echo "FAIL: survivor exited 0 although its peer vanished"; fail=1; }
	grep -q 'status 12\|retry counter exceeded\|RETRY_EXC' $dir/b.log ||
		{ echo "FAIL: no IBV_WC_RETRY_EXC_ERR (status 12) reported"; fail=1; }
	ctr() { awk -v n="$1" '$1 == "rocemu:" && $4 == n { s += $5 } END { print s + 0 }' $dir/b.log; }
	echo "survivor: retransmit_timeouts $(ctr retransmit_timeouts), silent $(ctr retransmit_timeouts_silent), retry_exceeded $(ctr retry_exceeded)"
	[ "$(ctr retransmit_timeouts)" -ge 8 ] || { echo "FAIL: fewer than retry_cnt + 1 = 8 timer expiries"; fail=1; }
	[ "$(ctr retransmit_timeouts_silent)" -ge 7 ] || { echo "FAIL: the dead peer's expiries were not silent"; fail=1; }
	[ "$(ctr retry_exceeded)" -ge 1 ] || { echo "FAIL: retry_exceeded not counted"; fail=1; }
fi
exit $fail
