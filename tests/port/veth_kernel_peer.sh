#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Integration: `rocemu port --port KIND:IFACE` (KIND = af_packet or af_xdp) in
# one network namespace, the Linux kernel in another, joined by a veth pair.
# The kernel side pings (IPv4 and IPv6) and arpings the emulated port and
# must get every answer; rocemu's capture must hold the ARP, ICMP and
# ICMPv6/ND frames and decode in tshark with no malformed frame and no expert
# warning or error. Needs root and network namespaces; exits 77 (skipped)
# with the reason when it cannot run.
#
# KIND af_packet_shared: the kernel on rocemu's side owns the same addresses
# (a real eth0 whose IP rocemu shares): the kernel answers ARP/ND/ping there,
# rocemu must not answer a second time (no DUP replies), and the RoCE port
# held open keeps the kernel from answering RoCE with port unreachable.
#
# KIND af_xdp_shared: the same, over af_xdp beside the kernel (issue 22.1):
# rocemu's XDP program hands it only RoCEv2, so its capture holds no ARP,
# ICMP or TCP at all; the kernel answers ping and arping, and a TCP transfer
# to the kernel's address arrives whole, while rocemu runs.
#
# usage: veth_kernel_peer.sh ROCEMU KIND
set -u
rocemu=${1:?usage: $0 ROCEMU af_packet|af_xdp|af_packet_shared|af_xdp_shared}
mode=${2:?usage: $0 ROCEMU af_packet|af_xdp|af_packet_shared|af_xdp_shared}
kind=${mode%_shared}

. "$(dirname "$0")/port_lib.sh"
fail() { echo "FAIL: $*"; [ -f "$work/port.out" ] && sed 's/^/  rocemu: /' "$work/port.out"; exit 1; }

[ "$(id -u)" = 0 ] || skip "needs root (network namespaces)"
for tool in ip ping arping tshark; do
	command -v $tool >/dev/null || skip "$tool not installed"
done
[ "$kind" = af_xdp ] && port_need_af_xdp

port_netns pt$$ veth
# rocemu owns the addresses on its side: the kernel there gets none, and no
# IPv6 either (its link-local would be the same as rocemu's GID 0)
if [ "$mode" != "$kind" ]; then
	ip -n "$nsr" addr add 10.71.0.2/24 dev "$ifr"
	ip -n "$nsr" addr add fd00:71::2/64 dev "$ifr" nodad
else
	ip netns exec "$nsr" sysctl -qw "net.ipv6.conf.$ifr.disable_ipv6=1"
fi
ip -n "$nsr" link set "$ifr" up
ip -n "$nsk" addr add 10.71.0.1/24 dev "$ifk"
ip -n "$nsk" addr add fd00:71::1/64 dev "$ifk" nodad
ip -n "$nsk" link set "$ifk" up

ip netns exec "$nsr" "$rocemu" port --port "$kind:$ifr" --ip 10.71.0.2/24 --ip fd00:71::2/64 \
	--capture "$work/port.pcap" >"$work/port.out" 2>&1 &
pid=$!
# (a machine without af_xdp was skipped above: any start failure now is a
# failure of rocemu, whatever its message says)
port_wait_up || fail "rocemu port exited early"
grep -q "link up" "$work/port.out" || fail "port did not come up"
# af_xdp: libxdp loads no program of its own, so says nothing of bpffs
[ "$kind" = af_xdp ] && grep -q "No bpffs" "$work/port.out" && fail "libxdp found no bpffs"

# RoCEv2 frames from the wire (scapy computes the ICRC): a good one is parsed
# and, with no transport on top, dropped as no_upper; a corrupted one is
# dropped as bad_icrc. They go first: the port takes frames in order, so once
# the pings below are answered these have been counted (no pause needed).
mac=$(sed -n 's/.* mac \([0-9a-f:]*\) .*/\1/p' "$work/port.out" | head -1)
roce_sent=0
if /usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null; then
	ip netns exec "$nsk" /usr/bin/python3 - "$ifk" "$mac" <<'PY' && roce_sent=1
import sys, logging
logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
from scapy.all import Ether, IP, UDP, Raw, sendp, get_if_hwaddr
from scapy.contrib.roce import BTH
iface, mac = sys.argv[1], sys.argv[2]
f = (Ether(dst=mac, src=get_if_hwaddr(iface)) / IP(src="10.71.0.1", dst="10.71.0.2") /
     UDP(sport=49152, dport=4791) / BTH(opcode=0x04, dqpn=0x11, psn=5) / Raw(b"rocemu!!" * 2))
good = bytes(f)
bad = bytearray(good)
bad[-8] ^= 0x01  # a payload bit: the ICRC no longer matches
sendp([Ether(good), Ether(bytes(bad))], iface=iface, verbose=False)
PY
else
	echo "note: scapy's RoCE layer missing, RoCE frames not injected"
fi

status=0
if [ "$mode" = af_xdp_shared ]; then
	grep -q "af_xdp on $ifr .*beside the kernel" "$work/port.out" ||
		{ echo "FAIL: no af_xdp beside-the-kernel notice"; status=1; }
	# 4 MiB over TCP to the kernel's address on rocemu's interface
	ip netns exec "$nsr" /usr/bin/python3 - >"$work/tcp_rx" <<'PY' &
import hashlib, socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.71.0.2", 18571)); s.listen(1); s.settimeout(60)
c, _ = s.accept(); c.settimeout(60); h = hashlib.sha256(); n = 0
while True:
    b = c.recv(65536)
    if not b: break
    h.update(b); n += len(b)
print(n, h.hexdigest())
PY
	tcp_rx=$!
	until ip netns exec "$nsr" ss -ltn | grep -q ":18571 "; do
		kill -0 $tcp_rx 2>/dev/null || break
		sleep 0.1
	done
	ip netns exec "$nsk" /usr/bin/python3 - >"$work/tcp_tx" <<'PY'
import hashlib, os, socket
data = os.urandom(4 << 20)
s = socket.create_connection(("10.71.0.2", 18571), timeout=60)
s.sendall(data); s.close()
print(len(data), hashlib.sha256(data).hexdigest())
PY
	wait $tcp_rx
	if [ -s "$work/tcp_tx" ] && cmp -s "$work/tcp_tx" "$work/tcp_rx"; then
		echo "TCP transfer while rocemu runs: $(cat "$work/tcp_rx")"
	else
		echo "FAIL: TCP transfer: sent '$(cat "$work/tcp_tx")', received '$(cat "$work/tcp_rx")'"
		status=1
	fi
fi
ip netns exec "$nsk" ping -c 3 -i 0.2 -W 20 10.71.0.2 >"$work/ping4.out" 2>&1 ||
	{ cat "$work/ping4.out"; echo "FAIL: IPv4 ping"; status=1; }
ip netns exec "$nsk" arping -c 3 -w 30 -I "$ifk" 10.71.0.2 >"$work/arping.out" 2>&1
grep -q "Received 3 response" "$work/arping.out" ||
	{ cat "$work/arping.out"; echo "FAIL: arping"; status=1; }
ip netns exec "$nsk" ping -6 -c 3 -i 0.2 -W 20 fd00:71::2 >"$work/ping6.out" 2>&1 ||
	{ cat "$work/ping6.out"; echo "FAIL: IPv6 ping"; status=1; }
grep -h "rtt" "$work/ping4.out" "$work/ping6.out"
if grep -q "DUP" "$work/ping4.out" "$work/ping6.out"; then
	echo "FAIL: duplicate echo replies"; status=1
fi

kill -INT "$pid"
wait "$pid" || { status=1; echo "FAIL: rocemu port exit status"; }
if [ $roce_sent = 1 ]; then
	grep -qE "^drop_no_upper +1$" "$work/port.out" || { echo "FAIL: good RoCE frame not parsed (drop_no_upper)"; status=1; }
	grep -qE "^drop_bad_icrc +1$" "$work/port.out" || { echo "FAIL: corrupted RoCE frame not counted (drop_bad_icrc)"; status=1; }
fi
pid=
grep -E "^(icmp_echo|arp_|nd_|rx_frames|tx_frames|drop_|left_to)" "$work/port.out"

# the capture: ARP both ways, ICMP and ICMPv6 echo both ways, ND, all clean
tshark -r "$work/port.pcap" -T fields -E separator=, -e arp.opcode -e icmp.type -e icmpv6.type \
	-e icmpv6.nd.na.flag.s >"$work/fields" 2>/dev/null
count() { awk -F, "$1" "$work/fields" | wc -l; }
if [ "$mode" = af_xdp_shared ]; then
	# the XDP program kept the kernel's traffic from rocemu: in the capture
	# only RoCE (the two frames injected; 0x88b5 is the capture-point record)
	# and nothing rocemu sent
	other=$(tshark -r "$work/port.pcap" -Y '!(udp.dstport == 4791) && !(eth.type == 0x88b5)' \
		2>/dev/null | wc -l)
	[ "$other" -eq 0 ] || { echo "FAIL: $other frames other than RoCEv2 reached rocemu"; status=1; }
	grep -qE "^tx_frames +0$" "$work/port.out" || { echo "FAIL: rocemu sent frames"; status=1; }
	[ $roce_sent = 0 ] || grep -qE "^rx_frames +2$" "$work/port.out" ||
		{ echo "FAIL: rocemu received other frames than the two RoCE ones"; status=1; }
else
[ "$(count '$1 == 1')" -ge 3 ] || { echo "FAIL: ARP requests missing from capture"; status=1; }
[ "$(count '$2 == 8')" -eq 3 ] || { echo "FAIL: ICMP echo requests in capture"; status=1; }
[ "$(count '$3 == 128')" -eq 3 ] || { echo "FAIL: ICMPv6 echo requests in capture"; status=1; }
fi
[ "$(count '$2 == 3')" -eq 0 ] || { echo "FAIL: ICMP destination unreachable in capture"; status=1; }
if [ "$mode" = af_xdp_shared ]; then
	:
elif [ "$mode" = af_packet_shared ]; then
	# the kernel answered (its frames leave with our MAC: af_packet sees them
	# and drops them as own_source_mac, so the capture holds them too)
	grep -qE "^icmp_echo_replies_tx +0$" "$work/port.out" || { echo "FAIL: rocemu answered ping for a kernel-owned address"; status=1; }
	grep -qE "^arp_replies_tx +0$" "$work/port.out" || { echo "FAIL: rocemu answered ARP for a kernel-owned address"; status=1; }
	grep -qE "^left_to_kernel +[1-9]" "$work/port.out" || { echo "FAIL: left_to_kernel not counted"; status=1; }
else
	[ "$(count '$1 == 2')" -ge 3 ] || { echo "FAIL: ARP replies missing from capture"; status=1; }
	[ "$(count '$2 == "0"')" -eq 3 ] || { echo "FAIL: ICMP echo replies in capture"; status=1; }
	[ "$(count '$3 == 129')" -eq 3 ] || { echo "FAIL: ICMPv6 echo replies in capture"; status=1; }
	[ "$(count '$3 == 136 && ($4 == 1 || $4 == "True")')" -ge 1 ] ||
		{ echo "FAIL: solicited neighbour advertisement missing"; status=1; }
fi
# the corrupted RoCE frame is expected to draw an ICRC complaint; nothing else may
bad=$(tshark -r "$work/port.pcap" -Y '(_ws.malformed || _ws.expert.severity >= 6291456) && !udp.port == 4791' 2>&1 |
	grep -v "Running as user")
[ -z "$bad" ] || { echo "FAIL: tshark reports problems:"; echo "$bad"; status=1; }
# nanosecond timestamps: the pcap magic for nanosecond files
magic=$(od -An -tx4 -N4 "$work/port.pcap" | tr -d ' ')
[ "$magic" = a1b23c4d ] || { echo "FAIL: capture is not nanosecond pcap (magic $magic)"; status=1; }
echo "frames captured: $(wc -l <"$work/fields")"
[ $status = 0 ] && echo "PASS: $mode: ping, ping -6 and arping answered; capture clean"
exit $status
