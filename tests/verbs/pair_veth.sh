#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Two hosts as two network namespaces joined by a veth pair: each runs an
# unmodified verbs program under `rocemu run` on an af_packet port over its
# veth end, sharing the address the kernel holds for the program's own TCP
# handshake (ARCHITECTURE.md §2).
#   pair_veth.sh PROGRAM [ARGS...]   (host B gets ARGS plus host A's address)
# Both must exit 0; both captures must decode in tshark without malformed or
# error frames, and every ICRC must verify independently (check_captures.sh).
set -u
BUILD=${ROCEMU_BUILD_DIR:?set by meson}
SRC=${ROCEMU_SOURCE_DIR:?set by meson}
ROCEMU=$BUILD/tools/rocemu
PY=${PYTHON:-/usr/bin/python3}
TIMEOUT=${PAIR_TIMEOUT:-60}
prog=$1
shift
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: needs iproute2"; exit 77; }
command -v "$prog" >/dev/null || { echo "SKIP: $prog not installed"; exit 77; }
[ -x "$ROCEMU" ] || { echo "SKIP: $ROCEMU not built"; exit 77; }
if objdump -T "$BUILD/verbs-provider/libibverbs.so.1" 2>/dev/null | grep -q __asan_init; then
	echo "SKIP: sanitizer build: uninstrumented system programs cannot load an ASan libibverbs"
	exit 77
fi

A=vpA$$ B=vpB$$
A=${A:0:10} B=${B:0:10}
dir=$(mktemp -d /tmp/rocemu-veth-XXXXXX)
cleanup() {
	[ -n "${pa:-}" ] && kill $pa 2>/dev/null
	ip netns del $A 2>/dev/null
	ip netns del $B 2>/dev/null
	[ -n "${PAIR_KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT
ip netns add $A && ip netns add $B || { echo "SKIP: cannot create network namespaces"; exit 77; }
ip link add ${A}e netns $A type veth peer name ${B}e netns $B || { echo "SKIP: cannot create veth"; exit 77; }
for ns in $A $B; do
	ip -n $ns link set lo up
	ip netns exec $ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1
done
ip -n $A addr add 10.83.0.1/24 dev ${A}e && ip -n $A link set ${A}e up
ip -n $B addr add 10.83.0.2/24 dev ${B}e && ip -n $B link set ${B}e up
tcp=18515

ip netns exec $A timeout -s KILL $TIMEOUT "$ROCEMU" run --port af_packet:${A}e --ip 10.83.0.1/24 \
	--capture $dir/a.pcap -- "$prog" -p $tcp "$@" >$dir/a.log 2>&1 &
pa=$!
for _ in $(seq 100); do
	ip netns exec $A ss -ltn 2>/dev/null | grep -q ":$tcp " && break
	kill -0 $pa 2>/dev/null || break
	sleep 0.1
done
ip netns exec $B timeout -s KILL $TIMEOUT "$ROCEMU" run --port af_packet:${B}e --ip 10.83.0.2/24 \
	--capture $dir/b.pcap -- "$prog" -p $tcp "$@" 10.83.0.1 >$dir/b.log 2>&1
rb=$?
wait $pa
ra=$?
pa=
echo "== host A ($prog $* ; exit $ra)"; cat $dir/a.log
echo "== host B ($prog $* 10.83.0.1 ; exit $rb)"; cat $dir/b.log
fail=0
[ $ra -eq 0 ] && [ $rb -eq 0 ] || fail=1
. "$SRC/tests/verbs/check_captures.sh"
check_captures $dir/a.pcap $dir/b.pcap || fail=1
exit $fail
