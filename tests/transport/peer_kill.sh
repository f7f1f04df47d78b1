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
BUILD=${ROCEMU_BUILD_DIR:?set by meson}
ROCEMU=$BUILD/tools/rocemu
prog=$1
shift
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: needs iproute2"; exit 77; }
command -v "$prog" >/dev/null || { echo "SKIP: $prog not installed (perftest)"; exit 77; }
[ -x "$ROCEMU" ] || { echo "SKIP: $ROCEMU not built"; exit 77; }
[ -e "$BUILD/verbs-provider/libibverbs.so.1" ] || { echo "SKIP: verbs provider not built"; exit 77; }
if objdump -T "$BUILD/verbs-provider/libibverbs.so.1" 2>/dev/null | grep -q __asan_init; then
	echo "SKIP: sanitizer build: uninstrumented system programs cannot load an ASan libibverbs"
	exit 77
fi
BUDGET_MS=$((8 * 67))
LIMIT_MS=$((BUDGET_MS * 4 + 5000))

A=pkA$$ B=pkB$$
A=${A:0:10} B=${B:0:10}
dir=$(mktemp -d /tmp/rocemu-kill-XXXXXX)
cleanup() {
	[ -n "${pa:-}" ] && kill -KILL $pa 2>/dev/null
	[ -n "${pb:-}" ] && kill -KILL $pb 2>/dev/null
	ip netns del $A 2>/dev/null
	ip netns del $B 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
ip netns add $A && ip netns add $B || { echo "SKIP: cannot create network namespaces"; exit 77; }
ip link add ${A}e netns $A type veth peer name ${B}e netns $B || { echo "SKIP: cannot create veth"; exit 77; }
for ns in $A $B; do
	ip -n $ns link set lo up
	ip netns exec $ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1
done
ip -n $A addr add 10.84.0.1/24 dev ${A}e && ip -n $A link set ${A}e up
ip -n $B addr add 10.84.0.2/24 dev ${B}e && ip -n $B link set ${B}e up
tcp=18516

ip netns exec $A "$ROCEMU" run --port af_packet:${A}e --ip 10.84.0.1/24 \
	-- "$prog" -p $tcp "$@" >$dir/a.log 2>&1 &
pa=$!
for _ in $(seq 100); do
	ip netns exec $A ss -ltn 2>/dev/null | grep -q ":$tcp " && break
	kill -0 $pa 2>/dev/null || break
	sleep 0.1
done
ip netns exec $B "$ROCEMU" run --port af_packet:${B}e --ip 10.84.0.2/24 \
	-- "$prog" -p $tcp "$@" 10.84.0.1 >$dir/b.log 2>&1 &
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
