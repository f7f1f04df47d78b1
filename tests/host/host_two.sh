#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Two rocemu hosts, four processes attached to each, all-to-all (issue 16):
#   host_two.sh memif|veth
# memif: the two hosts' uplinks are a memif pair (no root needed);
# veth:  each host in a network namespace on one end of a veth pair
#        (af_packet, sharing the kernel's address), its processes in the
#        same namespace.
# The eight processes play every pairing once, as a round-robin tournament:
# seven rounds of four concurrent `ibv_rc_pingpong -c -e` pairs (every
# received buffer checked, waits on completion events), same-host and
# cross-host pairs alike, each process a fresh attach. Every pair must
# exit 0; neither host may drop a frame but for a process that has exited;
# both hosts' captures must be clean.
set -u
mode=${1:?memif or veth}
TIMEOUT=${HOST_TIMEOUT:-200}
. "$(dirname "$0")/host_lib.sh"
pair_need_prog ibv_rc_pingpong ibverbs-utils
command -v tshark >/dev/null || { echo "SKIP: tshark not installed"; exit 77; }
host_dir host2$mode
ipA=10.67.$pair_net.1 ipB=10.67.$pair_net.2
nsA= nsB=
if [ "$mode" = veth ]; then
	[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
	A=hA$$ B=hB$$
	A=${A:0:10} B=${B:0:10}
	ip netns add $A || { echo "SKIP: cannot create network namespaces"; exit 77; }
	ip netns add $B || exit 1
	ip link add ${A}e netns $A type veth peer name ${B}e netns $B || { echo "SKIP: cannot create veth"; exit 77; }
	for ns in $A $B; do
		ip -n $ns link set lo up
		ip netns exec $ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1
	done
	ip -n $A addr add $ipA/24 dev ${A}e && ip -n $A link set ${A}e up
	ip -n $B addr add $ipB/24 dev ${B}e && ip -n $B link set ${B}e up
	nsA=$A nsB=$B
	upA=(--port af_packet:${A}e) upB=(--port af_packet:${B}e)
	tcpA=$ipA tcpB=$ipB
else
	upA=(--port memif:server:$dir/up.sock) upB=(--port memif:client:$dir/up.sock)
	tcpA=127.0.0.1 tcpB=127.0.0.1
fi
host_start a "$nsA" "${upA[@]}" --ip $ipA/24 --capture $dir/a.pcap || exit 1
host_start b "$nsB" "${upB[@]}" --ip $ipB/24 --capture $dir/b.pcap || exit 1
host_wait_up a && host_wait_up b || exit 1
# process k: host a for 0..3, b for 4..7
host_of() { [ $1 -lt 4 ] && echo a || echo b; }
ns_of() { [ $1 -lt 4 ] && echo "$nsA" || echo "$nsB"; }
tcp_of() { [ $1 -lt 4 ] && echo $tcpA || echo $tcpB; }
fail=0 pairs=0 cross=0
base=$((pair_tcp % 20000 + 30000))
for r in 0 1 2 3 4 5 6; do
	# circle method: 0 stays, 1..7 turn by one each round
	order=(0)
	for i in 0 1 2 3 4 5 6; do order+=($((1 + (i + r) % 7))); done
	spids=() cpids=() names=()
	for i in 0 1 2 3; do
		s=${order[$i]} c=${order[$((7 - i))]} port=$((base + r * 4 + i))
		names+=("$s-$c")
		host_run $(host_of $s) "$(ns_of $s)" $dir/r$r-$s-$c.s ibv_rc_pingpong -g 1 -c -e -n 300 \
			-s 4096 -p $port
		spids+=($!)
	done
	for i in 0 1 2 3; do
		s=${order[$i]} port=$((base + r * 4 + i))
		pair_wait_listen "$(ns_of $s)" ${spids[$i]} $port
	done
	for i in 0 1 2 3; do
		s=${order[$i]} c=${order[$((7 - i))]} port=$((base + r * 4 + i))
		host_run $(host_of $c) "$(ns_of $c)" $dir/r$r-$s-$c.c ibv_rc_pingpong -g 1 -c -e -n 300 \
			-s 4096 -p $port $(tcp_of $s)
		cpids+=($!)
	done
	for i in 0 1 2 3; do
		s=${order[$i]} c=${order[$((7 - i))]} rs=0 rc=0
		wait ${spids[$i]} || rs=$?
		wait ${cpids[$i]} || rc=$?
		pairs=$((pairs + 1))
		[ "$(host_of $s)" != "$(host_of $c)" ] && cross=$((cross + 1))
		res=$(grep -h 'bytes in' $dir/r$r-$s-$c.c | head -1)
		echo "round $r: process $s ($(host_of $s)) <- $c ($(host_of $c)): exit $rs/$rc ${res:-}"
		if [ $rs -ne 0 ] || [ $rc -ne 0 ]; then
			fail=1
			tail -n 5 $dir/r$r-$s-$c.s $dir/r$r-$s-$c.c
		fi
	done
done
echo "$pairs pairs, $cross across the two hosts"
for h in a b; do
	st=$(host_stat $h)
	echo "$st" | head -4
	# (frames for a process that has exited are counted, not an error:
	# ibv_rc_pingpong ends with no final handshake, so its peer's last
	# frames may come after it)
	echo "$st" | grep -q 'dropped: no such QP 0, QP of a process gone [0-9]*, malformed 0' ||
		{ echo "FAIL: host $h dropped frames"; fail=1; }
	echo "$st" | grep -q ' 0 processes attached (28 since start, 0 refused, 28 gone); QPNs: 0 live' ||
		{ echo "FAIL: host $h: processes or QPNs still held"; fail=1; }
done
host_stop a
host_stop b
check_captures $dir/a.pcap $dir/b.pcap || fail=1
exit $fail
