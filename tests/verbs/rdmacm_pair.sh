#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Two hosts running an unmodified rdma_cm program pair under `rocemu run`
# (rocemu's librdmacm.so.1 beside its libibverbs.so.1):
#   rdmacm_pair.sh memif|veth [--daemon] SERVER-ARGV... -- CLIENT-ARGV...
# --daemon: the server never exits by itself (qperf): it is stopped once the
# client is done, and only the client's capture (complete, its process ended
# normally) is checked.
# In both argument lists @A@ becomes host A's address and @PORT@ a port of
# this run. Host A (the server) starts first; host B runs the client.
#  memif: the two processes share a fresh network namespace whose loopback
#         holds host A's address, so a program's own TCP control connection
#         to @A@ (qperf) reaches host A through the kernel while RDMA and
#         the CM MADs cross memif between the two rocemu ports;
#  veth:  two namespaces joined by a veth pair, af_packet ports sharing the
#         kernel's addresses (as pair_veth.sh).
# Both must exit 0; both captures must decode in tshark without malformed or
# error frames and every ICRC must verify (check_captures.sh); the captures
# must also show the CM exchange on QP1 (REQ, REP, RTU or SIDR_REQ/REP).
set -u
BUILD=${ROCEMU_BUILD_DIR:?set by meson}
SRC=${ROCEMU_SOURCE_DIR:?set by meson}
ROCEMU=$BUILD/tools/rocemu
PY=${PYTHON:-/usr/bin/python3}
TIMEOUT=${PAIR_TIMEOUT:-120}
mode=$1
shift
daemon=
[ "${1:-}" = --daemon ] && { daemon=1; shift; }
server=() client=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do server+=("$1"); shift; done
[ $# -gt 0 ] && shift
client=("$@")
prog=${server[0]}

[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: needs iproute2"; exit 77; }
command -v "$prog" >/dev/null || { echo "SKIP: $prog not installed"; exit 77; }
[ -x "$ROCEMU" ] || { echo "SKIP: $ROCEMU not built"; exit 77; }
[ -e "$BUILD/verbs-provider/librdmacm.so.1" ] || { echo "SKIP: rocemu's librdmacm not built (librdmacm-dev missing)"; exit 77; }
if objdump -T "$BUILD/verbs-provider/libibverbs.so.1" 2>/dev/null | grep -q __asan_init; then
	echo "SKIP: sanitizer build: uninstrumented system programs cannot load an ASan libibverbs"
	exit 77
fi

dir=$(mktemp -d /tmp/rocemu-cmpair-XXXXXX)
[ -n "${PAIR_KEEP:-}" ] && echo "files kept in $dir"
A=cmA$$ B=cmB$$
A=${A:0:10} B=${B:0:10}
cleanup() {
	[ -n "${pa:-}" ] && kill $pa 2>/dev/null
	ip netns del $A 2>/dev/null
	ip netns del $B 2>/dev/null
	[ -n "${PAIR_KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT
port=$((20000 + ($$ % 20000)))
net=$((($$ % 200) + 20))
ip netns add $A || { echo "SKIP: cannot create network namespaces"; exit 77; }
ip -n $A link set lo up
if [ "$mode" = memif ]; then
	ipA=10.89.$net.1 ipB=10.89.$net.2
	ip -n $A addr add $ipA/32 dev lo
	nsA=$A nsB=$A
	portA=(--port memif:server:$dir/m.sock --ip $ipA/24)
	portB=(--port memif:client:$dir/m.sock --ip $ipB/24)
else
	ipA=10.84.0.1 ipB=10.84.0.2
	ip netns add $B
	ip link add ${A}e netns $A type veth peer name ${B}e netns $B || { echo "SKIP: cannot create veth"; exit 77; }
	ip -n $B link set lo up
	for ns in $A $B; do ip netns exec $ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1; done
	ip -n $A addr add $ipA/24 dev ${A}e && ip -n $A link set ${A}e up
	ip -n $B addr add $ipB/24 dev ${B}e && ip -n $B link set ${B}e up
	nsA=$A nsB=$B
	portA=(--port af_packet:${A}e --ip $ipA/24)
	portB=(--port af_packet:${B}e --ip $ipB/24)
fi
subst() { local a; for a in "$@"; do a=${a//@A@/$ipA}; printf '%s\n' "${a//@PORT@/$port}"; done; }
mapfile -t sargv < <(subst "${server[@]}")
mapfile -t cargv < <(subst "${client[@]}")

ip netns exec $nsA timeout -s KILL $TIMEOUT "$ROCEMU" run "${portA[@]}" --capture $dir/a.pcap \
	-- "${sargv[@]}" >$dir/a.log 2>&1 &
pa=$!
# The server is ready when it listens: on its TCP port (qperf, the only
# --daemon server) or, for programs without TCP, shortly after its port is
# up (its capture file exists). A REQ that arrives before rdma_listen is not
# answered (only a process with a listener REJects), so the client's CM
# retransmits it ~1 s later: a short wait is safe.
for _ in $(seq 50); do
	if [ -n "$daemon" ]; then
		ip netns exec $nsA ss -ltn 2>/dev/null | grep -q ":$port " && break
	elif [ -e $dir/a.pcap ]; then
		sleep 0.5
		break
	fi
	kill -0 $pa 2>/dev/null || break
	sleep 0.1
done
ip netns exec $nsB timeout -s KILL $TIMEOUT "$ROCEMU" run "${portB[@]}" --capture $dir/b.pcap \
	-- "${cargv[@]}" >$dir/b.log 2>&1
rb=$?
if [ -n "$daemon" ]; then
	# still serving is the expected state; then stop it
	if kill -0 $pa 2>/dev/null; then ra=0; else wait $pa; ra=$?; [ $ra -eq 0 ] && ra=1; fi
	kill $pa 2>/dev/null
	wait $pa 2>/dev/null
else
	wait $pa
	ra=$?
fi
pa=
echo "== host A (${sargv[*]} ; exit $ra)"; cat $dir/a.log
echo "== host B (${cargv[*]} ; exit $rb)"; cat $dir/b.log
fail=0
[ $ra -eq 0 ] && [ $rb -eq 0 ] || fail=1
. "$SRC/tests/verbs/check_captures.sh"
if [ -n "$daemon" ]; then
	check_captures $dir/b.pcap || fail=1
else
	check_captures $dir/a.pcap $dir/b.pcap || fail=1
fi
# The connection was made by CM MADs on QP1, and tshark decodes them.
cm=$(timeout 60 tshark -n -r $dir/b.pcap -Y 'infiniband.bth.destqp == 1' -T fields \
	-e infiniband.mad.attributeid 2>/dev/null | sort | uniq -c | tr '\n' ' ')
echo "CM MADs in host B's capture (count attribute-id): $cm"
echo "$cm" | grep -qE '0x0010|0x0017' || { echo "no REQ/SIDR_REQ decoded on QP1"; fail=1; }
exit $fail
