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

pair_hosts dt veth 10.88.0.1 10.88.0.2 24
tap=rt$$
tap=${tap:0:12}
portA=(--port dpdk:net_tap0,iface=$tap --ip 10.88.0.11/24)
portB=(--port af_packet:${B}e --ip 10.88.0.12/24)
export ROCEMU_STATS=1
# the PMD creates the tap when host A's port opens, before its program
# listens: cross-connect it with A's veth end then
pair_before_b() {
	ip -n $A link set $tap up
	local p
	for p in "$tap ${A}e" "${A}e $tap"; do
		set -- $p
		ip netns exec $A tc qdisc add dev $1 ingress &&
			ip netns exec $A tc filter add dev $1 parent ffff: protocol all u32 match u32 0 0 \
				action mirred egress mirror dev $2 ||
			{ echo "SKIP: tc cannot mirror between $1 and $2 (cls_u32, act_mirred)"; exit 77; }
	done
}
sargv=(ib_write_bw -x 1 -F -n 500 -p 18517)
cargv=(ib_write_bw -x 1 -F -n 500 -p 18517 10.88.0.1)
pair_run 18517 ""
check_captures $dir/a.pcap $dir/b.pcap || fail=1
for src in 10.88.0.11 10.88.0.12; do
	n=$(timeout 60 tshark -n -r $dir/a.pcap -Y "udp.dstport == 4791 && ip.src == $src" 2>/dev/null | wc -l)
	echo "RoCEv2 frames from $src in host A's capture: $n"
	[ "$n" -ge 500 ] || { echo "expected the RoCE traffic both ways through the PMD"; fail=1; }
done
exit $fail
