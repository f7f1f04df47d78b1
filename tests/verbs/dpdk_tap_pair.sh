#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The dpdk:DEVARGS port carrying real traffic (issue 22): host A's port is a
# DPDK PMD, net_tap, as a port on a spare NIC would be a PMD; host B is an
# af_packet port. Two namespaces joined by a veth pair; in A's namespace the
# tap the PMD creates is cross-connected with A's veth end by tc (u32 match
# all, mirred mirror, both ways), so the tap's frames go out on the veth and
# the veth's come into the tap. (A bridge cannot do it: the tap's kernel side
# has the PMD's own MAC, which a bridge delivers locally.) The kernels keep
# their own addresses on the veths for the program's TCP handshake; the
# rocemu ports have addresses of their own.
# ib_write_bw runs between them; both must exit 0, both captures must decode
# cleanly with every ICRC verified, and A's capture must hold the RoCE
# traffic both ways.
set -u
TIMEOUT=${PAIR_TIMEOUT:-120}
. "$(dirname "$0")/pair_lib.sh"
pair_require ib_write_bw perftest
command -v tc >/dev/null || { echo "SKIP: needs tc (iproute2)"; exit 77; }
ls /usr/lib/*/librte_net_tap.so* >/dev/null 2>&1 || ls /usr/lib/*/dpdk/*/librte_net_tap.so* >/dev/null 2>&1 ||
	{ echo "SKIP: DPDK's net_tap PMD not installed"; exit 77; }
[ -e /dev/net/tun ] || { echo "SKIP: no /dev/net/tun"; exit 77; }

dir=$(mktemp -d /tmp/rocemu-dtap-XXXXXX)
[ -n "${PAIR_KEEP:-}" ] && echo "files kept in $dir"
trap pair_cleanup EXIT
A=dtA$$ B=dtB$$
A=${A:0:10} B=${B:0:10}
tap=rt$$
tap=${tap:0:12}
ip netns add $A || { echo "SKIP: cannot create network namespaces"; exit 77; }
ip netns add $B || { echo "SKIP: cannot create network namespaces"; exit 77; }
ip link add ${A}e netns $A type veth peer name ${B}e netns $B || { echo "SKIP: cannot create veth"; exit 77; }
for ns in $A $B; do
	ip -n $ns link set lo up
	ip netns exec $ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1
done
ip -n $A addr add 10.88.0.1/24 dev ${A}e && ip -n $A link set ${A}e up
ip -n $B addr add 10.88.0.2/24 dev ${B}e && ip -n $B link set ${B}e up
export ROCEMU_STATS=1
on $A timeout -s KILL $TIMEOUT "$ROCEMU" run --port dpdk:net_tap0,iface=$tap --ip 10.88.0.11/24 \
	--capture $dir/a.pcap -- ib_write_bw -x 1 -F -n 500 -p 18517 >$dir/a.log 2>&1 &
pa=$!
# the PMD creates the tap when the port opens: cross-connect it then
while ! ip -n $A link show $tap >/dev/null 2>&1; do
	kill -0 $pa 2>/dev/null || break
	sleep 0.1
done
ip -n $A link set $tap up
for p in "$tap ${A}e" "${A}e $tap"; do
	set -- $p
	ip netns exec $A tc qdisc add dev $1 ingress &&
		ip netns exec $A tc filter add dev $1 parent ffff: protocol all u32 match u32 0 0 \
			action mirred egress mirror dev $2 ||
		{ echo "SKIP: tc cannot mirror between $1 and $2 (cls_u32, act_mirred)"; exit 77; }
done
pair_wait_listen $A $pa 18517
on $B timeout -s KILL $TIMEOUT "$ROCEMU" run --port af_packet:${B}e --ip 10.88.0.12/24 \
	--capture $dir/b.pcap -- ib_write_bw -x 1 -F -n 500 -p 18517 10.88.0.1 >$dir/b.log 2>&1
rb=$?
wait $pa
ra=$?
pa=
echo "== host A, dpdk:net_tap (exit $ra)"; cat $dir/a.log
echo "== host B, af_packet (exit $rb)"; cat $dir/b.log
fail=0
[ $ra -eq 0 ] && [ $rb -eq 0 ] || fail=1
check_captures $dir/a.pcap $dir/b.pcap || fail=1
for src in 10.88.0.11 10.88.0.12; do
	n=$(timeout 60 tshark -n -r $dir/a.pcap -Y "udp.dstport == 4791 && ip.src == $src" 2>/dev/null | wc -l)
	echo "RoCEv2 frames from $src in host A's capture: $n"
	[ "$n" -ge 500 ] || { echo "expected the RoCE traffic both ways through the PMD"; fail=1; }
done
exit $fail
