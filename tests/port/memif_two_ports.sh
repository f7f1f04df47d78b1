#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Integration: two `rocemu port` processes joined by memif (server and
# client) resolve each other (ARP for IPv4, ND for IPv6) and ping each other
# (`--ping ... --stay`), each capturing its side. Both must see every reply,
# and both captures must hold the ARP/ND exchange and the echo frames and
# decode cleanly in tshark.
#
# usage: memif_two_ports.sh ROCEMU
set -u
rocemu=${1:?usage: $0 ROCEMU}

. "$(dirname "$0")/port_lib.sh"
command -v tshark >/dev/null || skip "tshark not installed"

port_workdir memif

sock="$work/memif.sock"
"$rocemu" port --name srv --port "memif:server:$sock" --ip 10.72.0.1/24 --ip fd00:72::1/64 \
	--capture "$work/srv.pcap" --ping 10.72.0.2 --count 3 --stay >"$work/srv.out" 2>&1 &
pids+=($!)
sleep 0.3
"$rocemu" port --name cli --port "memif:client:$sock" --ip 10.72.0.2/24 --ip fd00:72::2/64 \
	--capture "$work/cli.pcap" --ping fd00:72::1 --count 3 --stay >"$work/cli.out" 2>&1 &
pids+=($!)

for _ in $(seq 300); do
	grep -q "echo requests to" "$work/srv.out" && grep -q "echo requests to" "$work/cli.out" && break
	sleep 0.1
done
status=0
for p in "${pids[@]}"; do
	kill -INT "$p" 2>/dev/null
	wait "$p" || status=1
done
pids=()
sed 's/^/  srv: /' "$work/srv.out" | grep -E "reply|answered|ping|link|drop_"
sed 's/^/  cli: /' "$work/cli.out" | grep -E "reply|answered|ping|link|drop_"
grep -q "3/3 echo requests to 10.72.0.2 answered" "$work/srv.out" ||
	{ echo "FAIL: server's pings (IPv4, ARP) not all answered"; status=1; }
grep -q "3/3 echo requests to fd00:72::1 answered" "$work/cli.out" ||
	{ echo "FAIL: client's pings (IPv6, ND) not all answered"; status=1; }

for side in srv cli; do
	f="$work/$side.pcap"
	# one tshark pass: ARP opcode, announcement flag, ICMP type, ICMPv6 type
	tshark -r "$f" -T fields -E separator=, -e arp.opcode -e arp.isannouncement -e icmp.type \
		-e icmpv6.type >"$work/$side.fields" 2>/dev/null
	count() { awk -F, "$1" "$work/$side.fields" | wc -l; }
	[ "$(count '$1 == 1 && $2 != "True" && $2 != 1')" -ge 1 ] || { echo "FAIL: $side: no ARP request"; status=1; }
	[ "$(count '$1 == 2')" -ge 1 ] || { echo "FAIL: $side: no ARP reply"; status=1; }
	[ "$(count '$4 == 135')" -ge 1 ] || { echo "FAIL: $side: no neighbour solicitation"; status=1; }
	[ "$(count '$3 == 8')" -eq 3 ] || { echo "FAIL: $side: ICMP echo requests"; status=1; }
	[ "$(count '$3 == 0 && $3 != ""')" -eq 3 ] || { echo "FAIL: $side: ICMP echo replies"; status=1; }
	[ "$(count '$4 == 128')" -eq 3 ] || { echo "FAIL: $side: ICMPv6 echo requests"; status=1; }
	[ "$(count '$4 == 129')" -eq 3 ] || { echo "FAIL: $side: ICMPv6 echo replies"; status=1; }
	bad=$(tshark -r "$f" -Y '_ws.malformed || _ws.expert.severity >= 6291456' 2>&1 | grep -v "Running as user")
	[ -z "$bad" ] || { echo "FAIL: $side: tshark reports problems:"; echo "$bad"; status=1; }
	echo "$side: $(wc -l <"$work/$side.fields") frames captured"
done
[ $status = 0 ] && echo "PASS: memif: both sides resolved and pinged each other; captures clean"
exit $status
