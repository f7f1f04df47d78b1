#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UD multicast with rdmacm-utils' mckey between three processes (issue 15.3):
# four namespaces on a Linux bridge with IGMP snooping and the bridge as
# querier, as a switch of a RoCE fabric would be. Hosts R1 and R2 run
# `mckey -m GROUP` (receivers), host S `mckey -m GROUP -s` (sender), each
# under `rocemu run` on an af_packet port; host X runs no rocemu and joins
# nothing. Checked:
#  - both receivers get every datagram (mckey exits 0 only then);
#  - the bridge learnt the group from the rocemu ports' IGMP reports: its
#    multicast database lists the group on R1's, R2's and S's ports;
#  - so X's port saw no RoCE frame of the group (snooping forwards a known
#    group to its members only), while the receivers' captures hold the
#    group's datagrams: SEND ONLY with immediate to BTH destination QP
#    0xFFFFFF, IPv4 destination the group, Ethernet 01:00:5e:01:02:03;
#  - every capture decodes cleanly with every ICRC verified, and each host's
#    capture holds its IGMPv2 membership report for the group;
#  - the ports answered the bridge's membership queries (mcast_queries_rx).
set -u
TIMEOUT=${PAIR_TIMEOUT:-120}
. "$(dirname "$0")/pair_lib.sh"
pair_require mckey rdmacm-utils
command -v tshark >/dev/null || { echo "SKIP: tshark not installed"; exit 77; }
command -v bridge >/dev/null || { echo "SKIP: needs iproute2's bridge"; exit 77; }
GROUP=239.1.2.3 COUNT=20 net=10.87.0
dir=$(mktemp -d /tmp/rocemu-mckey-XXXXXX)
hosts="R1 R2 S X"
BR=mcbr$$
BR=${BR:0:10}
pids=()
cleanup() {
	local p n
	for p in "${pids[@]}"; do kill $p 2>/dev/null; done
	wait 2>/dev/null
	for n in $hosts; do ip netns del $BR$n 2>/dev/null; done
	ip netns del $BR 2>/dev/null
	[ -n "${PAIR_KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT

# the bridge in a namespace of its own; one namespace per host on it
ip netns add $BR || { echo "SKIP: cannot create network namespaces"; exit 77; }
ip -n $BR link add br0 type bridge mcast_snooping 1 \
	mcast_query_response_interval 100 mcast_query_interval 200 \
	mcast_startup_query_interval 100 mcast_startup_query_count 20 ||
	{ echo "SKIP: cannot create a bridge"; exit 77; }
# The querier last, once the response interval (1 s) is set: for that long
# after it is turned on, Linux's bridge counts no querier and floods every
# group to every port (br_multicast_querier_exists: the other-query delay
# timer), which is a kernel timer, not a matter of scheduling.
ip -n $BR link set br0 type bridge mcast_querier 1
querier_since=$(date +%s.%N)
ip -n $BR link set br0 up
i=1
for n in $hosts; do
	ns=$BR$n
	ip netns add $ns
	ip -n $ns link set lo up
	ip netns exec $ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1
	ip link add h$n netns $ns type veth peer name p$n netns $BR ||
		{ echo "SKIP: cannot create veth"; exit 77; }
	ip -n $BR link set p$n master br0 up
	ip -n $ns addr add $net.$i/24 dev h$n
	ip -n $ns link set h$n up
	eval ip_$n=$net.$i
	i=$((i + 1))
done

# host X watches its link for the group's RoCE frames the whole time
# (dumpcap says "File:" once the interface is open; tshark's "Capturing on"
# comes before its dumpcap opens it)
ip netns exec ${BR}X timeout -s INT $TIMEOUT dumpcap -i hX -w $dir/x.pcap \
	-f "udp port 4791" >$dir/x.log 2>&1 &
pids+=($!)
while ! grep -q "^File: " $dir/x.log 2>/dev/null; do
	kill -0 ${pids[-1]} 2>/dev/null || { cat $dir/x.log; echo "FAIL: dumpcap on hX did not start"; exit 1; }
	sleep 0.2
done

export ROCEMU_STATS=1
# host N: mckey ARGS... under rocemu on its veth, logging to $dir/N.log
mckey_on() {
	local n=$1 ip
	shift
	ip=ip_$n
	ip netns exec $BR$n timeout -s KILL $TIMEOUT "$ROCEMU" run --port af_packet:h$n \
		--ip ${!ip}/24 --capture $dir/$n.pcap -- stdbuf -oL mckey -m $GROUP -b ${!ip} -C $COUNT "$@" \
		>$dir/$n.log 2>&1
}
mckey_on R1 &
r1=$!
mckey_on R2 &
r2=$!
pids+=($r1 $r2)
# the receivers must be members before the sender's datagrams go out: once
# the bridge knows them (their QPs are attached before the report is sent)
for n in R1 R2; do
	while ! bridge -n $BR mdb show dev br0 2>/dev/null | grep -q "port p$n grp $GROUP"; do
		kill -0 $r1 $r2 2>/dev/null || break
		sleep 0.2
	done
done
# the bridge's querier counts from 1 s after it was turned on (above)
while awk -v t0=$querier_since -v t=$(date +%s.%N) 'BEGIN { exit !(t - t0 < 2) }'; do
	sleep 0.2
done
mckey_on S -s
rs=$?
wait $r1
rr1=$?
wait $r2
rr2=$?
fail=0
for n in R1 R2 S; do echo "--- host $n:"; cat $dir/$n.log; done
echo "mckey exit statuses: R1 $rr1, R2 $rr2, S $rs"
[ $rr1 = 0 ] && [ $rr2 = 0 ] && [ $rs = 0 ] || fail=1

# the bridge's multicast database: the group on the three rocemu ports
bridge -n $BR mdb show dev br0 >$dir/mdb.txt
echo "bridge multicast database:"; cat $dir/mdb.txt
for n in R1 R2 S; do
	grep -q "port p$n grp $GROUP" $dir/mdb.txt || { echo "FAIL: $GROUP not learnt on p$n"; fail=1; }
done
grep -q "port pX grp $GROUP" $dir/mdb.txt && { echo "FAIL: X is no member"; fail=1; }

# X saw none of the group's frames
kill -INT ${pids[0]} 2>/dev/null
wait ${pids[0]} 2>/dev/null
nx=$(tshark -n -r $dir/x.pcap -Y "ip.dst == $GROUP" 2>/dev/null | wc -l)
echo "host X received $nx RoCE frames for $GROUP"
[ "$nx" = 0 ] || fail=1

check_captures $dir/R1.pcap $dir/R2.pcap $dir/S.pcap || fail=1
for n in R1 R2; do
	got=$(tshark -n -r $dir/$n.pcap -Y "ip.dst == $GROUP && eth.dst == 01:00:5e:01:02:03 &&
		infiniband.bth.destqp == 0xffffff && infiniband.bth.opcode == 101" 2>/dev/null | wc -l)
	echo "$n.pcap: $got SEND ONLY with immediate datagrams to the group"
	[ "$got" -ge $COUNT ] || fail=1
done
for n in R1 R2 S; do
	ip=ip_$n
	rep=$(tshark -n -r $dir/$n.pcap -Y "igmp.type == 0x16 && igmp.maddr == $GROUP &&
		ip.src == ${!ip}" 2>/dev/null | wc -l)
	echo "$n.pcap: $rep IGMPv2 reports for $GROUP"
	[ "$rep" -ge 1 ] || fail=1
done
q=$(awk '$4 == "mcast_queries_rx" { s += $5 } END { print s + 0 }' $dir/R1.log $dir/R2.log)
echo "membership queries answered by the receivers: $q"
[ "$q" -ge 1 ] || fail=1
exit $fail
