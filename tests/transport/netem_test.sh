#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Issue 5 with real Linux queueing: two rocemu processes on af_packet ports in
# network namespaces trnA and trnB, joined through a bridge in trnM whose
# ports run tc netem (loss, reordering, duplication, corruption, delay) on
# egress, where the kernel forwards. Each scenario runs transport_netem_peer
# (SENDs checked exactly once / in order / intact, FETCH_ADDs applied once).
# Usage: netem_test.sh PEER_BINARY   (root, ip, tc; else exit 77)
set -u
PEER=$1
COUNT=${TRN_COUNT:-1500}
SIZE=${TRN_SIZE:-3000}
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
command -v ip >/dev/null && command -v tc >/dev/null || { echo "SKIP: needs ip and tc"; exit 77; }

cleanup() {
	for ns in trnA trnB trnM; do ip netns del $ns 2>/dev/null; done
	rm -rf "$DIR"
}
DIR=$(mktemp -d /tmp/trnetem.XXXXXX)
trap cleanup EXIT
cleanup 2>/dev/null; DIR=$(mktemp -d /tmp/trnetem.XXXXXX)

ip netns add trnA && ip netns add trnB && ip netns add trnM || { echo "SKIP: cannot create namespaces"; exit 77; }
ip link add trnA0 netns trnA type veth peer name trnA1 netns trnM || exit 77
ip link add trnB0 netns trnB type veth peer name trnB1 netns trnM || exit 77
ip -n trnM link add trnbr type bridge
for l in trnA1 trnB1; do ip -n trnM link set $l master trnbr; ip -n trnM link set $l up; done
ip -n trnM link set trnbr up
ip netns exec trnM tc qdisc add dev trnA1 root netem 2>/dev/null && ip netns exec trnM tc qdisc del dev trnA1 root || { echo "SKIP: no netem (sch_netem)"; exit 77; }
ip -n trnA link set trnA0 up; ip -n trnB link set trnB0 up
for ns in trnA trnB trnM; do ip netns exec $ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1; done

fail=0
run() {
	name=$1; shift
	for l in trnA1 trnB1; do
		ip netns exec trnM tc qdisc del dev $l root 2>/dev/null
		[ $# -gt 0 ] && ip netns exec trnM tc qdisc add dev $l root netem "$@"
	done
	rm -f "$DIR"/server "$DIR"/client "$DIR"/server.ready "$DIR"/client.ready
	ip netns exec trnB timeout 300 "$PEER" server af_packet:trnB0 10.81.0.2/24 10.81.0.1 "$DIR" $COUNT $SIZE > "$DIR/s.log" 2>&1 &
	spid=$!
	ip netns exec trnA timeout 300 "$PEER" client af_packet:trnA0 10.81.0.1/24 10.81.0.2 "$DIR" $COUNT $SIZE > "$DIR/c.log" 2>&1
	crc=$?
	wait $spid; src=$?
	if [ $crc = 0 ] && [ $src = 0 ]; then
		echo "ok   $name: $(tail -1 "$DIR/c.log")"
	else
		echo "FAIL $name (client $crc, server $src)"; cat "$DIR/c.log" "$DIR/s.log"; fail=1
	fi
}
run clean
run loss1 loss 1%
run loss5 loss 5%
run reorder delay 1ms reorder 25% 50%
run duplicate duplicate 5%
run corrupt corrupt 2%
run mixed delay 200us 100us loss 2% duplicate 2% corrupt 1%
exit $fail
