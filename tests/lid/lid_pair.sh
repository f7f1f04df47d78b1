#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Unmodified verbs programs with LID-only address vectors (is_global = 0,
# dlid = the peer's LID from their own TCP exchange), which rocemu resolves to
# the peer's IPv4 in our /16 (docs/verbs-provider.md, "LID-only address
# vectors"):
#   lid_pair.sh memif|veth qperf TEST...
#       host A: `qperf -lp PORT` (never exits: stopped after the client),
#       host B: `qperf -lp PORT -t 1 A TEST...` (no -cm1: no rdma_cm); the
#       client must print a result for each test and no error;
#   lid_pair.sh memif|veth PROGRAM ARGS...   (ibv_*_pingpong without -g)
#       host A: PROGRAM -p PORT ARGS, host B: PROGRAM -p PORT ARGS A; both
#       must exit 0.
# The captures (host B's for qperf, whose server is killed) must decode in
# tshark without malformed or error frames, every ICRC must verify
# (check_captures.sh), and no frame may go to QP1 (no CM MAD: LID-only).
#  memif: both processes share one fresh network namespace whose loopback
#         holds host A's address (the programs' TCP), RDMA crosses memif;
#  veth:  two namespaces joined by a veth pair, af_packet ports.
# Both hosts are in one /16 (10.91.x.y), as the LID mapping requires. The
# links carry 4200-byte frames (RoCE MTU 4096): qperf's path MTU is 2048 and
# ud_bw sends 2048-byte datagrams (ibv_ud_pingpong too), which a 1500-byte
# Ethernet (RoCE MTU 1024) refuses, as on a real RoCE NIC.
set -u
BUILD=${ROCEMU_BUILD_DIR:?set by meson}
SRC=${ROCEMU_SOURCE_DIR:?set by meson}
ROCEMU=$BUILD/tools/rocemu
PY=${PYTHON:-/usr/bin/python3}
TIMEOUT=${PAIR_TIMEOUT:-120}
mode=$1
shift
prog=$1
shift
args=("$@")

[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: needs iproute2"; exit 77; }
command -v "$prog" >/dev/null || { echo "SKIP: $prog not installed"; exit 77; }
[ -x "$ROCEMU" ] || { echo "SKIP: $ROCEMU not built"; exit 77; }
if objdump -T "$BUILD/verbs-provider/libibverbs.so.1" 2>/dev/null | grep -q __asan_init; then
	echo "SKIP: sanitizer build: uninstrumented $prog cannot load an ASan libibverbs"
	exit 77
fi

dir=$(mktemp -d /tmp/rocemu-lidq-XXXXXX)
[ -n "${PAIR_KEEP:-}" ] && echo "files kept in $dir"
A=ldA$$ B=ldB$$
A=${A:0:10} B=${B:0:10}
pa=
cleanup() {
	[ -n "$pa" ] && kill $pa 2>/dev/null
	ip netns del $A 2>/dev/null
	ip netns del $B 2>/dev/null
	[ -n "${PAIR_KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT
port=$((20000 + ($$ % 20000)))
# third octets 20..170: both LIDs ((octet3 << 8) | octet4) stay below 0xC000
net=$((($$ % 150) + 20))
ip netns add $A || { echo "SKIP: cannot create network namespaces"; exit 77; }
ip -n $A link set lo up
# different third octets: the LIDs (low 16 bits) differ in both bytes
ipA=10.91.$net.1 ipB=10.91.$((net + 1)).2
if [ "$mode" = memif ]; then
	ip -n $A addr add $ipA/32 dev lo
	nsA=$A nsB=$A
	portA=(--port memif:server:$dir/m.sock --ip $ipA/16 --mtu 4200)
	portB=(--port memif:client:$dir/m.sock --ip $ipB/16 --mtu 4200)
else
	ip netns add $B
	ip link add ${A}e netns $A type veth peer name ${B}e netns $B || { echo "SKIP: cannot create veth"; exit 77; }
	ip -n $B link set lo up
	for ns in $A $B; do ip netns exec $ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1; done
	ip -n $A link set ${A}e mtu 4200 && ip -n $B link set ${B}e mtu 4200
	ip -n $A addr add $ipA/16 dev ${A}e && ip -n $A link set ${A}e up
	ip -n $B addr add $ipB/16 dev ${B}e && ip -n $B link set ${B}e up
	nsA=$A nsB=$B
	portA=(--port af_packet:${A}e --ip $ipA/16)
	portB=(--port af_packet:${B}e --ip $ipB/16)
fi

if [ "$prog" = qperf ]; then
	sargv=(qperf -lp $port)
	cargv=(qperf -lp $port -t 1 $ipA "${args[@]}")
else
	sargv=("$prog" -p $port "${args[@]}")
	cargv=("$prog" -p $port "${args[@]}" $ipA)
fi
ip netns exec $nsA timeout -s KILL $TIMEOUT "$ROCEMU" run "${portA[@]}" --capture $dir/a.pcap \
	-- "${sargv[@]}" >$dir/a.log 2>&1 &
pa=$!
for _ in $(seq 50); do
	ip netns exec $nsA ss -ltn 2>/dev/null | grep -q ":$port " && break
	kill -0 $pa 2>/dev/null || break
	sleep 0.1
done
ip netns exec $nsB timeout -s KILL $TIMEOUT "$ROCEMU" run "${portB[@]}" --capture $dir/b.pcap \
	-- "${cargv[@]}" >$dir/b.log 2>&1
rb=$?
if [ "$prog" = qperf ]; then
	# the server still serving is the expected state; then stop it
	if kill -0 $pa 2>/dev/null; then ra=0; else wait $pa; ra=$?; [ $ra -eq 0 ] && ra=1; fi
	kill $pa 2>/dev/null
	wait $pa 2>/dev/null
	caps=($dir/b.pcap)
else
	wait $pa
	ra=$?
	caps=($dir/a.pcap $dir/b.pcap)
fi
pa=
echo "== host A (${sargv[*]} ; exit $ra)"; cat $dir/a.log
echo "== host B (${cargv[*]} ; exit $rb)"; cat $dir/b.log
fail=0
[ $ra -eq 0 ] && [ $rb -eq 0 ] || fail=1
if [ "$prog" = qperf ]; then
	# qperf prints "TEST:" then its results; a failed test prints an error
	for t in "${args[@]}"; do
		grep -q "^$t:" $dir/b.log || { echo "no result for $t"; fail=1; }
	done
	# (DPDK's memif driver logs its own connection retries: not qperf's)
	grep -v '^memif_' $dir/b.log | grep -qiE 'failed|error' && { echo "qperf reported an error"; fail=1; }
fi
. "$SRC/tests/verbs/check_captures.sh"
check_captures "${caps[@]}" || fail=1
# LID-only: nothing went to QP1 (no CM MAD, no rdma_cm)
for f in "${caps[@]}"; do
	cm=$(timeout 60 tshark -n -r $f -Y 'infiniband.bth.destqp == 1' 2>/dev/null | wc -l)
	echo "frames to QP1 in $(basename $f): $cm"
	[ "$cm" -eq 0 ] || { echo "expected no CM traffic"; fail=1; }
done
exit $fail
