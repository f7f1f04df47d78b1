#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# libfabric's verbs provider under `rocemu run`, as a user runs it:
#   fabric_pair.sh memif|veth info
#   fabric_pair.sh memif|veth pingpong msg|rdm|dgram
# info: `fi_info -p verbs` on host A lists rocemu0's MSG and DGRAM
#       endpoints and the verbs;ofi_rxm RDM endpoint.
# pingpong: fi_pingpong -p verbs -e msg, -p "verbs;ofi_rxm" -e rdm, or
#       -p verbs -e dgram, over every size of -S all with data checks (-c),
#       between two hosts; both must exit 0 having done the largest size (6m;
#       for dgram, whose message is one packet, the path MTU: 4k over memif,
#       1k over the 1500-byte veth), and host B's capture must decode cleanly
#       with every ICRC verified and hold the rdma_cm connection on QP1 (dgram:
#       UD SENDs only, no connection).
#  memif: one network namespace in which an interface (one end of a veth
#         pair; the verbs provider skips loopback interfaces) holds both hosts'
#         addresses: the provider finds a device through the kernel interface
#         that has its address, the control connection reaches host A through
#         the kernel, RDMA crosses memif;
#  veth:  two namespaces joined by a veth pair, af_packet ports.
set -u
TIMEOUT=${PAIR_TIMEOUT:-180}
. "$(dirname "$0")/mw_lib.sh"
mode=$1 what=$2 ep=${3:-}
pair_require fi_pingpong libfabric-bin
[ -e "$BUILD/verbs-provider/librdmacm.so.1" ] || { echo "SKIP: rocemu's librdmacm not built"; exit 77; }
if [ "$mode" = memif ]; then
	ipA=10.87.$pair_net.1 ipB=10.87.$pair_net.2
else
	ipA=10.83.0.1 ipB=10.83.0.2
fi
pair_hosts fab "$mode" $ipA $ipB 24
if [ "$mode" = memif ]; then
	# the verbs provider skips loopback interfaces: both addresses go on one
	# end of a veth pair inside the namespace (any interface that is up would do)
	ip -n $nsA addr del $ipA/32 dev lo
	ip -n $nsA link add fab0 type veth peer name fab1 || { echo "SKIP: cannot create veth"; exit 77; }
	ip -n $nsA addr add $ipA/32 dev fab0 && ip -n $nsA addr add $ipB/32 dev fab0
	ip -n $nsA link set fab0 up && ip -n $nsA link set fab1 up
fi
export ROCEMU_STATS=1

if [ "$what" = info ]; then
	# host A alone (a memif server needs no peer to start)
	on "$nsA" timeout -s KILL $TIMEOUT "$ROCEMU" run "${portA[@]}" -- fi_info -p verbs \
		>$dir/a.log 2>&1
	ra=$?
	cat $dir/a.log
	fail=0
	[ $ra -eq 0 ] || { echo "fi_info exit $ra"; fail=1; }
	# one line per endpoint: provider domain type
	awk '/^provider:/ { p = $2 } /domain:/ { d = $2 } /type:/ { print p, d, $2 }' $dir/a.log |
		sort -u >$dir/eps
	echo "endpoints (provider domain type):"; cat $dir/eps
	for want in "verbs rocemu0 FI_EP_MSG" "verbs rocemu0-dgram FI_EP_DGRAM" \
		"verbs;ofi_rxm rocemu0 FI_EP_RDM"; do
		grep -qxF "$want" $dir/eps || { echo "missing: $want"; fail=1; }
	done
	exit $fail
fi

if [ "$ep" = rdm ]; then prov="verbs;ofi_rxm"; else prov=verbs; fi
# -I 2: every size of -S all twice each way (10 iterations of the 6 MiB
# messages take most of a minute on a loaded machine)
sargv=(fi_pingpong -p "$prov" -e $ep -S all -I 2 -c -B $pair_tcp)
cargv=(fi_pingpong -p "$prov" -e $ep -S all -I 2 -c -P $pair_tcp $ipA)
pair_run $pair_tcp ""
last=6m
if [ "$ep" = dgram ]; then
	if [ "$mode" = memif ]; then last=4k; else last=1k; fi
fi
for h in a b; do
	grep -qE "^$last +2 +=2 " $dir/$h.log || { echo "host $h: no result line for $last"; fail=1; }
done
# host B's capture holds both directions of the traffic (some 50 000 frames);
# decoding host A's copy too would double the longest part of the test
check_captures $dir/b.pcap || fail=1
if [ "$ep" = dgram ]; then
	mw_roce $dir/b.pcap
	echo "RoCE frames in host B's capture: $mw_all, UD SENDs $mw_ud, RC $mw_rc"
	[ "$mw_ud" -gt 0 ] && [ "$mw_rc" -eq 0 ] || { echo "expected UD SENDs only"; fail=1; }
	exit $fail
fi
# the connection is made before any data: the first 2000 frames hold it
cm=$(timeout 60 tshark -n -c 2000 -r $dir/b.pcap -Y 'infiniband.bth.destqp == 1' -T fields \
	-e infiniband.mad.attributeid 2>/dev/null | sort | uniq -c | tr '\n' ' ')
echo "CM MADs in host B's capture (count attribute-id): $cm"
echo "$cm" | grep -q '0x0010' || { echo "no REQ decoded on QP1"; fail=1; }
exit $fail
