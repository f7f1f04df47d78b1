#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Issue 5, a peer that disappears: two hosts (network namespaces, veth pair,
# af_packet ports) run an unmodified perftest program under `rocemu run` for
# a long duration; once traffic flows, host A (the server) is killed with
# SIGKILL. The survivor's outstanding work must complete with
# IBV_WC_RETRY_EXC_ERR (perftest: "Failed status 12") and the program must
# exit, within the retry budget the QP attributes imply (perftest's
# defaults: timeout 14 = 4.096 us x 2^14 = 67 ms, retry_cnt 7, so 8 x 67 ms
# = 537 ms) plus generous slack for a loaded machine; never a hang.
#   peer_kill.sh PROGRAM [ARGS...]
set -u
. "$(dirname "$0")/../verbs/pair_lib.sh"
prog=$1
shift
pair_require "$prog" perftest
BUDGET_MS=$((8 * 67))
LIMIT_MS=$((BUDGET_MS * 4 + 5000))

pair_hosts pk veth 10.84.0.1 10.84.0.2 24
# rocemu runs the programs directly here (no timeout wrapper): kill them hard
trap 'for p in ${pa:-} ${pb:-}; do kill -KILL $p 2>/dev/null; done; pair_cleanup' EXIT
tcp=18516

ip netns exec $nsA "$ROCEMU" run "${portA[@]}" -- "$prog" -p $tcp "$@" >$dir/a.log 2>&1 &
pa=$!
pair_wait_listen $nsA $pa $tcp
ip netns exec $nsB "$ROCEMU" run "${portB[@]}" -- "$prog" -p $tcp "$@" 10.84.0.1 >$dir/b.log 2>&1 &
pb=$!
# wait for the measurement to start (perftest prints its table header), then a bit
for _ in $(seq 200); do
	grep -q 'BW average\|#bytes' $dir/b.log 2>/dev/null && break
	kill -0 $pb 2>/dev/null || break
	sleep 0.1
done
sleep 2
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
	[ $((($(date +%s%N) - t0) / 1000000)) -gt $((LIMIT_MS * 4)) ] && break
	sleep 0.01
done
ms=$((($(date +%s%N) - t0) / 1000000))
echo "== survivor ($prog $* 10.84.0.1)"; cat $dir/b.log
fail=0
if [ -z "$rc" ]; then
	echo "FAIL: survivor still running ${ms} ms after the kill (hang)"; fail=1
else
	echo "survivor exited with $rc ${ms} ms after the peer was killed (retry budget ${BUDGET_MS} ms, limit ${LIMIT_MS} ms)"
	[ "$rc" -ne 0 ] || { echo "FAIL: survivor exited 0 although its peer vanished"; fail=1; }
	[ $ms -le $LIMIT_MS ] || { echo "FAIL: took longer than the limit"; fail=1; }
	grep -q 'status 12\|retry counter exceeded\|RETRY_EXC' $dir/b.log ||
		{ echo "FAIL: no IBV_WC_RETRY_EXC_ERR (status 12) reported"; fail=1; }
fi
exit $fail
