#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Two hosts as two network namespaces joined by a veth pair: each runs an
# unmodified verbs program under `rocemu run` on an af_packet port over its
# veth end, sharing the address the kernel holds for the program's own TCP
# handshake (ARCHITECTURE.md §2).
#   pair_veth.sh [--link af_xdp] [--mtu N --frame-len L] [--min-frames N] PROGRAM [ARGS...]
# (host B gets ARGS plus host A's address). Both must exit 0; both captures
# must decode in tshark without malformed or error frames, and every ICRC
# must verify independently (check_captures.sh).
# --mtu N: the veth link's MTU (jumbo frames); --frame-len L: the longest
# RoCEv2 frame in both captures must be exactly L bytes, and there must be
# many of them (the program's path MTU reached the wire).
# --link af_xdp: af_xdp ports beside the kernel instead (issue 22.1): the
# kernel keeps its addresses and the program's TCP, rocemu's XDP program
# takes only RoCEv2, and neighbours come from the kernel's table; both ports
# must say so at open and must have asked the kernel to resolve.
# --min-frames N (with --link af_xdp): each port must have received and sent
# at least N frames (its rx_frames and tx_frames counters).
# --queues N (with --link af_xdp): each veth end has N queues and each port
# takes all of them (issue 22.1); each port must say so, and on each end the
# kernel's per-queue XDP statistics must show RoCEv2 redirected to rocemu on
# every queue (on veth a frame sent on tx queue N arrives on rx queue N, so
# this needs both ports spreading flows over their queues). Pings between
# the kernel's addresses run beside it and must be answered.
set -u
TIMEOUT=${PAIR_TIMEOUT:-60}
. "$(dirname "$0")/pair_lib.sh"
mtu= frame_len= link=af_packet min_frames= queues=
while :; do
	case ${1:-} in
	--queues) queues=$2; export PAIR_VETH_QUEUES=$2; shift 2 ;;
	--link) link=$2; shift 2 ;;
	--mtu) mtu=$2; shift 2 ;;
	--frame-len) frame_len=$2; shift 2 ;;
	--min-frames) min_frames=$2; shift 2 ;;
	*) break ;;
	esac
done
prog=$1
shift
pair_require "$prog"
if [ $link = af_xdp ]; then
	# a machine without af_xdp skips; after this any af_xdp failure fails
	. "$(dirname "$0")/../port/port_lib.sh"
	port_need_af_xdp
fi
pair_hosts vp veth 10.83.0.1 10.83.0.2 24 $mtu
if [ $link = af_xdp ]; then
	# RoCE on a second address of the kernel's, which the programs' TCP
	# (to 10.83.0.1) never resolves: rocemu has the kernel resolve it
	ip -n $nsA addr add 10.83.1.1/24 dev ${nsA}e
	ip -n $nsB addr add 10.83.1.2/24 dev ${nsB}e
	portA=(--port af_xdp:${nsA}e --ip 10.83.1.1/24)
	portB=(--port af_xdp:${nsB}e --ip 10.83.1.2/24)
	export ROCEMU_STATS=1
fi
sargv=("$prog" -p 18515 "$@")
cargv=("$prog" -p 18515 "$@" 10.83.0.1)
if [ -n "$queues" ]; then
	# the kernel's own traffic beside rocemu's queues, for the whole run
	ip netns exec $nsA ping -q -i 0.2 -w $TIMEOUT 10.83.0.2 >$dir/ping.log 2>&1 &
	pping=$!
fi
pair_run 18515 ""
if [ -n "$queues" ]; then
	kill -INT $pping 2>/dev/null
	wait $pping
	cat $dir/ping.log
	got=$(sed -n 's/.* \([0-9]*\) received.*/\1/p' $dir/ping.log)
	[ "${got:-0}" -ge 1 ] || { echo "ping beside rocemu: no reply"; fail=1; }
	for h in a b; do
		grep -q "af_xdp on .* ($queues queues, flows spread" $dir/$h.log ||
			{ echo "host $h: no notice of $queues queues"; fail=1; }
	done
	for ns in $nsA $nsB; do
		stats=$(on $ns $PY "$(dirname "$0")/ethtool_stats.py" ${ns}e)
		for ((q = 0; q < queues; q++)); do
			v=$(echo "$stats" | sed -n "s/^rx_queue_${q}_xdp_redirect //p")
			echo "${ns}e: receive queue $q: ${v:-none} frames redirected to rocemu"
			[ "${v:-0}" -ge 20 ] || { echo "${ns}e: queue $q carried no RoCE"; fail=1; }
		done
	done
fi
check_captures $dir/a.pcap $dir/b.pcap || fail=1
if [ $link = af_xdp ]; then
	for h in a b; do
		grep -q "af_xdp on .*beside the kernel" $dir/$h.log ||
			{ echo "host $h: no af_xdp beside-the-kernel notice"; fail=1; }
		grep -qE "neigh_kernel_asked [1-9]" $dir/$h.log ||
			{ echo "host $h: the kernel was never asked to resolve"; fail=1; }
		grep -qE "neigh_resolved [1-9]" $dir/$h.log ||
			{ echo "host $h: no neighbour resolved"; fail=1; }
		! grep -qE "arp_requests_tx [1-9]" $dir/$h.log ||
			{ echo "host $h: rocemu sent ARP requests itself"; fail=1; }
		for c in rx_frames tx_frames; do
			v=$(sed -n "s/.* port $c \([0-9]*\)$/\1/p" $dir/$h.log | tail -1)
			[ -z "$min_frames" ] || [ "${v:-0}" -ge "$min_frames" ] ||
				{ echo "host $h: $c ${v:-none}, expected at least $min_frames"; fail=1; }
		done
		# the kernel's ARP and the programs' TCP never reached rocemu
		n=$(cap_awk $dir/$h.pcap '$ARP != "" || $TCP != ""' | wc -l)
		[ "$n" -eq 0 ] || { echo "host $h: $n ARP/TCP frames reached rocemu"; fail=1; }
	done
fi
if [ -n "$frame_len" ]; then
	for f in $dir/a.pcap $dir/b.pcap; do
		lens=$(cap_awk $f '$UDP == 4791 { print $LEN }' | sort -n | uniq -c | sort -k2 -n | tail -3 | tr '\n' ' ')
		echo "$(basename $f): the longest RoCEv2 frames (count length): $lens"
		set -- $lens
		while [ $# -gt 2 ]; do shift 2; done
		if [ "${2:-0}" -ne "$frame_len" ] || [ "${1:-0}" -lt 100 ]; then
			echo "expected many RoCEv2 frames of $frame_len bytes, the longest"
			fail=1
		fi
	done
fi
exit $fail
