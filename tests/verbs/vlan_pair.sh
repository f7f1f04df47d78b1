#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# rocemu on an 802.1Q VLAN (issue 22): two namespaces joined by a veth pair,
# each with an af_packet port on its veth end, --vlan 100. The kernels keep
# the addresses on the untagged veths for the programs' own TCP handshake
# (as pair_veth.sh), so their untagged frames cross the same link: the ports
# must drop them (vlan_untagged) while the RoCE traffic runs tagged.
# (This machine's kernel has no 8021q, so no kernel VLAN device can be the
# peer here; the tags are checked on the wire instead.)
# ib_write_bw with --sl 3 runs between them. Checked:
#  - both exit 0 and both captures decode cleanly with every ICRC verified;
#  - in each capture, every RoCEv2 frame a host sent carries VID 100 and PCP
#    3 (the SL), and its ARP frames VID 100 PCP 0; the same in a capture of
#    the link itself, which does not take rocemu's word for what it sent:
#    dumpcap on each veth end, each keeping what arrived from the other end
#    (an af_packet port sends past the kernel's taps, PACKET_QDISC_BYPASS,
#    so a veth end's capture holds only its peer's frames), merged;
#  - the GID table as a libibverbs program sees it (gid_ndev.c): every GID
#    names the VLAN netdev IFACE.100 in gid_attrs/ndevs, and its
#    ndev_ifindex is that netdev's index in the kernel (0 here: there is no
#    kernel VLAN netdev); without --vlan, IFACE and IFACE's index;
#  - then frames on VLAN 200 and untagged RoCE frames sent to A's port
#    (scapy, on B's veth) are dropped and counted (vlan_other,
#    vlan_untagged) while tagged VID 100 ARP requests are answered, tagged.
set -u
TIMEOUT=${PAIR_TIMEOUT:-120}
. "$(dirname "$0")/pair_lib.sh"
pair_require ib_write_bw perftest
command -v tshark >/dev/null || { echo "SKIP: tshark not installed"; exit 77; }
command -v dumpcap >/dev/null || { echo "SKIP: dumpcap (tshark's) not installed"; exit 77; }
GID_NDEV=$BUILD/tests/verbs/gid_ndev
[ -x "$GID_NDEV" ] || { echo "SKIP: $GID_NDEV not built (no system libibverbs)"; exit 77; }
"$PY" -c 'import scapy' 2>/dev/null || { echo "SKIP: python3-scapy not installed"; exit 77; }
ipA=10.86.0.1 ipB=10.86.0.2
pair_hosts vl veth $ipA $ipB 24
portA+=(--vlan 100)
portB+=(--vlan 100)
export ROCEMU_STATS=1
sargv=(ib_write_bw -x 1 -F --sl 3 -n 500 -p 18516)
cargv=(ib_write_bw -x 1 -F --sl 3 -n 500 -p 18516 $ipA)
# the link's own capture: what arrives at each veth end
pw=()
stop_wire() {
	for p in "${pw[@]}"; do kill -INT $p 2>/dev/null && wait $p; done
	pw=()
}
trap 'stop_wire; pair_cleanup' EXIT
for ns in $A $B; do
	ip netns exec $ns dumpcap -i ${ns}e -f inbound -w $dir/wire-$ns.pcap >$dir/dumpcap-$ns.log 2>&1 &
	pw+=($!)
	# "Capturing on" comes before dumpcap opens the interface, "File:" after
	until grep -q "^File: " $dir/dumpcap-$ns.log; do
		kill -0 ${pw[-1]} 2>/dev/null ||
			{ cat $dir/dumpcap-$ns.log; echo "dumpcap did not start"; exit 1; }
		sleep 0.1
	done
done
pair_run 18516 ""
stop_wire
mergecap -w $dir/wire.pcap $dir/wire-$A.pcap $dir/wire-$B.pcap || fail=1
check_captures $dir/a.pcap $dir/b.pcap || fail=1

# Per capture, the tags of what each host sent: (kind, source, VLAN, PCP).
for f in a b wire; do
	timeout 60 tshark -n -r $dir/$f.pcap -Y 'udp.dstport == 4791 || arp' -T fields \
		-e udp.dstport -e ip.src -e arp.src.proto_ipv4 -e vlan.id -e vlan.priority \
		2>/dev/null | awk -F'\t' '{ print ($1 == 4791 ? "roce " $2 : "arp " $3),
			($4 == "" ? "untagged -" : $4 " " $5) }' | sort | uniq -c >$dir/tags.txt
	echo "$f.pcap: frames by (kind, source, VLAN, PCP):"; sed 's/^/  /' $dir/tags.txt
	for ip in $ipA $ipB; do
		grep -q " roce $ip 100 3$" $dir/tags.txt || { echo "no RoCEv2 frame from $ip with VID 100 PCP 3"; fail=1; }
		if grep " roce $ip " $dir/tags.txt | grep -vq " 100 3$"; then
			echo "RoCEv2 frames from $ip without VID 100 PCP 3"; fail=1
		fi
	done
	grep -q " arp .* 100 0$" $dir/tags.txt || { echo "no ARP frame with VID 100 PCP 0"; fail=1; }
done

# The GID table's netdev, with the VLAN and without.
gids() { # EXPECTED_NDEV EXPECTED_IFINDEX ROCEMU_RUN_OPTIONS...
	local want=$1 idx=$2
	shift 2
	on $A timeout -s KILL 120 "$ROCEMU" run --port af_packet:${A}e --ip $ipA/24 "$@" \
		-- "$GID_NDEV" >$dir/gids.txt 2>&1 || { cat $dir/gids.txt; echo "gid_ndev failed"; fail=1; }
	echo "GID table ($*): index gid type ndev_ifindex ndev"; sed 's/^/  /' $dir/gids.txt
	n=$(awk -v n=$want -v i=$idx '$3 == "RoCEv2" && $4 == i && $5 == n' $dir/gids.txt | wc -l)
	all=$(awk '$3 == "RoCEv2"' $dir/gids.txt | wc -l)
	[ "$all" -ge 2 ] && [ "$n" -eq "$all" ] ||
		{ echo "expected every GID on netdev $want (index $idx)"; fail=1; }
}
gids ${A}e.100 0 --vlan 100
gids ${A}e $(ip netns exec $A cat /sys/class/net/${A}e/ifindex)

# Frames of other VLANs, untagged, and tagged 100: a port that runs until
# told, then prints its counters.
on $A timeout -s KILL 120 "$ROCEMU" port --port af_packet:${A}e --ip $ipA/24 --vlan 100 \
	--duration 10 --capture $dir/n.pcap >$dir/n.log 2>&1 &
pa=$!
while [ ! -e $dir/n.pcap ]; do kill -0 $pa 2>/dev/null || break; sleep 0.1; done
macA=$(ip netns exec $A cat /sys/class/net/${A}e/address)
ip netns exec $B "$PY" - ${B}e $macA $ipA $ipB <<'EOF'
import sys
from scapy.all import ARP, Dot1Q, Ether, IP, UDP, Raw, sendp
ifc, mac, ipa, ipb = sys.argv[1:5]
src = "02:00:00:00:86:02"
bth = bytes([0x04, 0, 0xff, 0xff, 0, 0, 0, 0x11, 0, 0, 0, 0]) + bytes(16)
roce = IP(src=ipb, dst=ipa) / UDP(sport=49152, dport=4791) / Raw(bth)
frames = [Ether(src=src, dst=mac) / Dot1Q(vlan=200) / roce] * 3     # another VLAN
frames += [Ether(src=src, dst=mac) / roce] * 2                      # untagged
frames += [Ether(src=src, dst="ff:ff:ff:ff:ff:ff") / Dot1Q(vlan=100, prio=5) /
           ARP(op=1, hwsrc=src, psrc=ipb, pdst=ipa)] * 2             # ours
sendp(frames, iface=ifc, verbose=False)
EOF
wait $pa
pa=
echo "== rocemu port on VLAN 100"; cat $dir/n.log
ctr() { awk -v k=$1 '$1 == k { print $2 }' $dir/n.log; }
[ "$(ctr drop_vlan_other)" = 3 ] || { echo "expected drop_vlan_other 3"; fail=1; }
[ "$(ctr drop_vlan_untagged)" = 2 ] || { echo "expected drop_vlan_untagged 2"; fail=1; }
replies=$(timeout 60 tshark -n -r $dir/n.pcap -Y "arp.opcode == 2 && vlan.id == 100" 2>/dev/null | wc -l)
echo "ARP replies tagged VID 100: $replies"
[ "$replies" -ge 1 ] || { echo "the tagged ARP request was not answered on VLAN 100"; fail=1; }
exit $fail
