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
# usage: veth_kernel_peer.sh ROCEMU KIND
set -u
rocemu=${1:?usage: $0 ROCEMU af_packet|af_xdp}
kind=${2:?usage: $0 ROCEMU af_packet|af_xdp}

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; [ -f "$work/port.out" ] && sed 's/^/  rocemu: /' "$work/port.out"; exit 1; }

[ "$(id -u)" = 0 ] || skip "needs root (network namespaces)"
for tool in ip ping arping tshark; do
	command -v $tool >/dev/null || skip "$tool not installed"
done

tag=pt$$
nsr=${tag}r          # rocemu's namespace
nsk=${tag}k          # the kernel's namespace
ifr=${tag}vr
ifk=${tag}vk
work=$(mktemp -d /tmp/rocemu-port-veth-XXXXXX)
pid=

cleanup() {
	[ -n "$pid" ] && kill -INT "$pid" 2>/dev/null && sleep 0.5 && kill -KILL "$pid" 2>/dev/null
	ip netns del "$nsr" 2>/dev/null
	ip netns del "$nsk" 2>/dev/null
	[ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

ip netns add "$nsr" 2>/dev/null || skip "cannot create network namespaces"
ip netns add "$nsk" || skip "cannot create network namespaces"
ip link add "$ifr" type veth peer name "$ifk" || skip "cannot create a veth pair"
ip link set "$ifr" netns "$nsr"
ip link set "$ifk" netns "$nsk"
ip -n "$nsr" link set lo up
ip -n "$nsk" link set lo up
# rocemu owns the addresses on its side: the kernel there gets none, and no
# IPv6 either (its link-local would be the same as rocemu's GID 0)
ip netns exec "$nsr" sysctl -qw "net.ipv6.conf.$ifr.disable_ipv6=1"
ip -n "$nsr" link set "$ifr" up
ip -n "$nsk" addr add 10.71.0.1/24 dev "$ifk"
ip -n "$nsk" addr add fd00:71::1/64 dev "$ifk" nodad
ip -n "$nsk" link set "$ifk" up

ip netns exec "$nsr" "$rocemu" port --port "$kind:$ifr" --ip 10.71.0.2/24 --ip fd00:71::2/64 \
	--capture "$work/port.pcap" >"$work/port.out" 2>&1 &
pid=$!
for _ in $(seq 100); do
	grep -q "link up" "$work/port.out" 2>/dev/null && break
	if ! kill -0 "$pid" 2>/dev/null; then
		if [ "$kind" = af_xdp ] && grep -qiE "xdp|bpf" "$work/port.out"; then
			skip "af_xdp unavailable here: $(head -c 300 "$work/port.out")"
		fi
		fail "rocemu port exited early"
	fi
	sleep 0.1
done
grep -q "link up" "$work/port.out" || fail "port did not come up"

status=0
ip netns exec "$nsk" ping -c 3 -i 0.2 -W 2 10.71.0.2 >"$work/ping4.out" 2>&1 ||
	{ cat "$work/ping4.out"; echo "FAIL: IPv4 ping"; status=1; }
ip netns exec "$nsk" arping -c 3 -w 5 -I "$ifk" 10.71.0.2 >"$work/arping.out" 2>&1
grep -q "Received 3 response" "$work/arping.out" ||
	{ cat "$work/arping.out"; echo "FAIL: arping"; status=1; }
ip netns exec "$nsk" ping -6 -c 3 -i 0.2 -W 2 fd00:71::2 >"$work/ping6.out" 2>&1 ||
	{ cat "$work/ping6.out"; echo "FAIL: IPv6 ping"; status=1; }
grep -h "rtt" "$work/ping4.out" "$work/ping6.out"

kill -INT "$pid"
wait "$pid" || { status=1; echo "FAIL: rocemu port exit status"; }
pid=
grep -E "^(icmp_echo|arp_|nd_|rx_frames|tx_frames|drop_)" "$work/port.out"

# the capture: ARP both ways, ICMP and ICMPv6 echo both ways, ND, all clean
count() { tshark -r "$work/port.pcap" -Y "$1" 2>/dev/null | wc -l; }
[ "$(count 'arp.opcode == 1')" -ge 3 ] || { echo "FAIL: ARP requests missing from capture"; status=1; }
[ "$(count 'arp.opcode == 2')" -ge 3 ] || { echo "FAIL: ARP replies missing from capture"; status=1; }
[ "$(count 'icmp.type == 8')" -eq 3 ] || { echo "FAIL: ICMP echo requests in capture"; status=1; }
[ "$(count 'icmp.type == 0')" -eq 3 ] || { echo "FAIL: ICMP echo replies in capture"; status=1; }
[ "$(count 'icmpv6.type == 128')" -eq 3 ] || { echo "FAIL: ICMPv6 echo requests in capture"; status=1; }
[ "$(count 'icmpv6.type == 129')" -eq 3 ] || { echo "FAIL: ICMPv6 echo replies in capture"; status=1; }
[ "$(count 'icmpv6.type == 136 && icmpv6.nd.na.flag.s == 1')" -ge 1 ] ||
	{ echo "FAIL: solicited neighbour advertisement missing"; status=1; }
bad=$(tshark -r "$work/port.pcap" -Y '_ws.malformed || _ws.expert.severity >= 6291456' 2>&1 |
	grep -v "Running as user")
[ -z "$bad" ] || { echo "FAIL: tshark reports problems:"; echo "$bad"; status=1; }
# nanosecond timestamps: the pcap magic for nanosecond files
magic=$(od -An -tx4 -N4 "$work/port.pcap" | tr -d ' ')
[ "$magic" = a1b23c4d ] || { echo "FAIL: capture is not nanosecond pcap (magic $magic)"; status=1; }
echo "frames captured: $(count 'frame')"
[ $status = 0 ] && echo "PASS: $kind: ping, ping -6 and arping answered; capture clean"
exit $status
