#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX's ucx_perftest between two rocemu hosts, as a user runs it:
#   ucx_pair.sh memif|veth|xdp TLS TEST
# TLS is UCX_TLS (rc_verbs,ud_verbs,self or ud_verbs,self), TEST a
# ucx_perftest test (tag_lat, tag_bw). The only UCX settings are UCX_TLS and
# UCX_NET_DEVICES=rocemu0:1; nothing is preloaded: `rocemu run` gives the
# program rocemu's libibverbs and the /dev and /sys view UCX looks for.
#  memif: both processes here (no root), the perftest's TCP handshake on
#         127.0.0.1, RDMA over memif;
#  veth:  two network namespaces joined by a veth pair, af_packet ports;
#  xdp:   the same with af_xdp ports beside the kernel (issue 22.1): the
#         kernel keeps the addresses and the perftest's TCP, rocemu's XDP
#         program takes RoCEv2, neighbours come from the kernel's table.
# Both must exit 0 and the client print its Final line; host B's capture
# must decode cleanly with every ICRC verified; every RoCE frame must carry DSCP
# 26, UCX's traffic class for a RoCE v2 GID (it uses 0 on what it takes for
# RoCE v1, so this shows it read the GID types); the BTH opcodes must be
# those of the transports asked for (RC traffic with rc_verbs, only UD
# SENDs with ud_verbs alone).
set -u
TIMEOUT=${PAIR_TIMEOUT:-120}
. "$(dirname "$0")/mw_lib.sh"
mode=$1 tls=$2 test=$3
pair_need_prog ucx_perftest ucx-utils
if [ "$mode" = veth ] || [ "$mode" = xdp ]; then
	pair_require ucx_perftest ucx-utils
	if [ "$mode" = xdp ]; then
		# a machine without af_xdp skips; after this any af_xdp failure fails
		. "$(dirname "$0")/../port/port_lib.sh"
		port_need_af_xdp
	fi
	ipA=10.85.0.1 ipB=10.85.0.2
	pair_hosts ucx veth $ipA $ipB 24
	server=$ipA
	if [ "$mode" = xdp ]; then
		portA=(--port af_xdp:${nsA}e --ip $ipA/24)
		portB=(--port af_xdp:${nsB}e --ip $ipB/24)
		export ROCEMU_STATS=1
	fi
else
	ipA=10.86.$pair_net.1 ipB=10.86.$pair_net.2
	pair_hosts ucx local $ipA $ipB 24
	server=127.0.0.1
fi
export UCX_TLS=$tls UCX_NET_DEVICES=rocemu0:1
n=1000
sargv=(ucx_perftest -p $pair_tcp)
cargv=(ucx_perftest -p $pair_tcp $server -t $test -n $n)
pair_run $pair_tcp ""
grep -q "^Final: *$n " $dir/b.log || { echo "no Final line for $n iterations"; fail=1; }
# host B's capture holds both directions; decoding host A's copy as well would
# double the longest part of the test
check_captures $dir/b.pcap || fail=1
for f in $dir/b.pcap; do
	mw_roce $f
	echo "$(basename $f): $mw_all RoCE frames, $mw_v2 with DSCP 26, $mw_rc RC, $mw_ud UD (count x opcode: $mw_ops)"
	[ "$mw_all" -gt 0 ] && [ "$mw_v2" -eq "$mw_all" ] || { echo "frames without UCX's RoCE v2 traffic class"; fail=1; }
	case $tls in
	rc_verbs*) [ "$mw_rc" -gt 0 ] || { echo "no RC traffic with $tls"; fail=1; } ;;
	ud_verbs,self) [ "$mw_ud" -eq "$mw_all" ] || { echo "frames other than UD SENDs with $tls"; fail=1; } ;;
	esac
done
if [ "$mode" = xdp ]; then
	for h in a b; do
		grep -q "af_xdp on .*beside the kernel" $dir/$h.log ||
			{ echo "host $h: no af_xdp beside-the-kernel notice"; fail=1; }
	done
	# the kernel's ARP and the perftest's TCP never reached rocemu
	n=$(cap_awk $dir/b.pcap '$ARP != "" || $TCP != ""' | wc -l)
	[ "$n" -eq 0 ] || { echo "host b: $n ARP/TCP frames reached rocemu"; fail=1; }
fi
exit $fail
