#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Issue 5 with real Linux queueing: two rocemu processes on af_packet ports in
# network namespaces trnA and trnB, joined through a bridge in trnM. The
# faults happen where the kernel forwards (the bridge ports in trnM), since
# AF_PACKET with qdisc bypass skips the sender's own qdisc:
#  - tc netem on the bridge ports' egress when sch_netem exists;
#  - otherwise nftables on the bridge ports' ingress (netdev family) for
#    RoCEv2 frames (udp dport 4791): `numgen random` drop, `dup to` the other
#    bridge port (duplicate), payload mangling (corrupt), and `meta priority`
#    steering a share into a slow htb class of the egress qdisc (reorder),
#    plus tbf rate limiting (delay by queueing). Every fault is checked to have
#    happened (nft rule counters, tc class statistics).
# Each scenario runs transport_netem_peer (SENDs checked exactly once / in
# order / intact, FETCH_ADDs applied exactly once).
# TRN_FORCE_NFT=1 uses nftables even where netem works; TRN_ONLY='loss1 reorder'
# runs only those nftables scenarios.
# Usage: netem_test.sh PEER_BINARY   (root, ip, tc and netem or nft; else exit 77)
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
M="ip netns exec trnM"
if [ -n "${TRN_FORCE_NFT:-}" ]; then
	mode=nft
elif $M tc qdisc add dev trnA1 root netem 2>/dev/null && $M tc qdisc del dev trnA1 root; then
	mode=netem
else
	mode=nft
fi
if [ $mode = nft ]; then
	command -v nft >/dev/null || { echo "SKIP: no netem (sch_netem) and no nft (package nftables)"; exit 77; }
	$M nft add table netdev trnprobe 2>/dev/null &&
		$M nft add chain netdev trnprobe c "{ type filter hook ingress device trnA1 priority 0; }" 2>/dev/null &&
		$M nft add rule netdev trnprobe c udp dport 4791 numgen random mod 100 '<' 1 counter drop 2>/dev/null &&
		$M nft delete table netdev trnprobe ||
		{ echo "SKIP: no netem (sch_netem) and nftables netdev ingress/numgen unusable"; exit 77; }
fi
echo "faults by: $mode"
ip -n trnA link set trnA0 up; ip -n trnB link set trnB0 up
for ns in trnA trnB trnM; do ip netns exec $ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1; done

# nft_setup KIND PCT [MATCH]: one rule per bridge port on ingress, RoCEv2 only
# (and MATCH, an extra nft match expression, when given).
nft_setup() {
	kind=$1 pct=$2 match=${3:-}
	$M nft delete table netdev trn 2>/dev/null
	[ "$kind" = none ] && return 0
	for p in A B; do
		in=trn${p}1
		other=$([ $p = A ] && echo trnB1 || echo trnA1)
		case $kind in
		drop) act="counter drop" ;;
		dup) act="counter dup to $other" ;;
		# a byte inside the RoCEv2 payload (UDP header 8 + BTH 12 + ... ):
		# the ICRC no longer matches, the receiver must drop the frame
		corrupt) act="counter @th,400,8 set 0xa5" ;;
		# reorder: into the slow class 1:3 of the egress htb qdisc
		reorder) act="counter meta priority set 1:3" ;;
		esac
		$M nft add table netdev trn
		$M nft add chain netdev trn in$p "{ type filter hook ingress device $in priority 0; }"
		$M nft add rule netdev trn in$p udp dport 4791 $match numgen random mod 100 '<' $pct $act || return 1
	done
}

# nft_hits: sum of the rules' packet counters
nft_hits() {
	$M nft list table netdev trn 2>/dev/null | sed -n 's/.*counter packets \([0-9]*\).*/\1/p' |
		awk '{s += $1} END {print s + 0}'
}

# qdisc_setup KIND: egress qdiscs on both bridge ports
qdisc_setup() {
	for l in trnA1 trnB1; do
		$M tc qdisc del dev $l root 2>/dev/null
		case $1 in
		reorder)
			# htb picks the class named by skb->priority (1:3, slow) or the default (1:10)
			$M tc qdisc add dev $l root handle 1: htb default 10 &&
				$M tc class add dev $l parent 1: classid 1:10 htb rate 10gbit quantum 60000 &&
				$M tc class add dev $l parent 1: classid 1:3 htb rate 20mbit ceil 20mbit quantum 9000 || return 1 ;;
		delay)
			$M tc qdisc add dev $l root handle 1: tbf rate 150mbit burst 20000 latency 20ms || return 1 ;;
		esac
	done
}

fail=0
run() {
	name=$1
	rm -f "$DIR"/server "$DIR"/client "$DIR"/server.ready "$DIR"/client.ready \
		"$DIR"/server.done "$DIR"/client.done
	ip netns exec trnB timeout 300 "$PEER" server af_packet:trnB0 10.81.0.2/24 10.81.0.1 "$DIR" $COUNT $SIZE > "$DIR/s.log" 2>&1 &
	spid=$!
	ip netns exec trnA timeout 300 "$PEER" client af_packet:trnA0 10.81.0.1/24 10.81.0.2 "$DIR" $COUNT $SIZE > "$DIR/c.log" 2>&1
	crc=$?
	wait $spid; src=$?
	if [ $crc = 0 ] && [ $src = 0 ]; then
		echo "ok   $name: $(tail -1 "$DIR/c.log")"
		[ -n "${TRN_VERBOSE:-}" ] && grep -h 'engine:' "$DIR/c.log" "$DIR/s.log"
		return 0
	fi
	echo "FAIL $name (client $crc, server $src)"; cat "$DIR/c.log" "$DIR/s.log"; fail=1
	return 1
}

# netem scenario: run NAME NETEM-ARGS...
run_netem() {
	name=$1; shift
	for l in trnA1 trnB1; do
		$M tc qdisc del dev $l root 2>/dev/null
		[ $# -gt 0 ] && $M tc qdisc add dev $l root netem "$@"
	done
	run $name
}

# nft scenario: run_nft NAME KIND PCT [QDISC]; the fault must have happened.
run_nft() {
	name=$1 kind=$2 pct=$3 q=${4:-none}
	case " ${TRN_ONLY:-$name} " in *" $name "*) ;; *) return ;; esac
	nft_setup $kind $pct || { echo "FAIL $name: nft rules not accepted"; fail=1; return; }
	qdisc_setup $q || { echo "FAIL $name: qdisc not accepted"; fail=1; return; }
	run "$name" || return
	hits=$(nft_hits)
	extra=""
	case $q in
	reorder)
		slow=$($M tc -s class show dev trnA1 | awk '/class htb 1:3/ {f=1} f && /Sent/ {print $2; exit}')
		slow2=$($M tc -s class show dev trnB1 | awk '/class htb 1:3/ {f=1} f && /Sent/ {print $2; exit}')
		extra=" slow band bytes ${slow:-0}+${slow2:-0}"
		[ "${slow:-0}" -gt 0 ] || [ "${slow2:-0}" -gt 0 ] || { echo "FAIL $name: nothing went through the slow band"; fail=1; } ;;
	delay)
		ov=$($M tc -s qdisc show dev trnB1 | sed -n 's/.*overlimits \([0-9]*\).*/\1/p' | head -1)
		ov2=$($M tc -s qdisc show dev trnA1 | sed -n 's/.*overlimits \([0-9]*\).*/\1/p' | head -1)
		extra=" tbf overlimits ${ov:-0}+${ov2:-0}"
		[ "${ov:-0}" -gt 0 ] || [ "${ov2:-0}" -gt 0 ] || { echo "FAIL $name: tbf never queued"; fail=1; } ;;
	esac
	echo "     $name: nft rule hits $hits$extra"
	case $kind in drop|corrupt)
		# a lost frame must have been resent (go-back-N after a NAK or a timeout)
		rt=$(sed -n 's/.*retransmitted \([0-9]*\).*/\1/p' "$DIR/c.log" | tail -1)
		[ "${rt:-0}" -gt 0 ] || { echo "FAIL $name: nothing retransmitted"; fail=1; } ;;
	esac
	if [ $kind != none ] && [ "$hits" -eq 0 ]; then
		echo "FAIL $name: the nft rules never fired"; fail=1
	fi
}

if [ $mode = netem ]; then
	run_netem clean
	run_netem loss1 loss 1%
	run_netem loss5 loss 5%
	run_netem reorder delay 1ms reorder 25% 50%
	run_netem duplicate duplicate 5%
	run_netem corrupt corrupt 2%
	run_netem mixed delay 200us 100us loss 2% duplicate 2% corrupt 1%
else
	run_nft clean none 0
	run_nft loss1 drop 1
	run_nft loss5 drop 5
	run_nft duplicate dup 5
	run_nft corrupt corrupt 2
	run_nft reorder reorder 10 reorder
	run_nft delay-loss drop 2 delay
fi

# Unmodified verbs programs under `rocemu run` over the same bridge, with 1%
# of the RoCEv2 frames dropped in each direction (their TCP handshake passes
# untouched): both must exit 0 (ibv_rc_pingpong -c checks every buffer), and
# the requester side's capture must show go-back-N at work (rocemu inspect:
# retransmitted packets; NAKs in either capture).
BUILD=${ROCEMU_BUILD_DIR:-}
ROCEMU=$BUILD/tools/rocemu
verbs_ok=1
if [ -z "$BUILD" ] || [ ! -x "$ROCEMU" ] || [ ! -e "$BUILD/verbs-provider/libibverbs.so.1" ]; then
	echo "skip verbs programs: rocemu or the verbs provider not built"; verbs_ok=0
elif objdump -T "$BUILD/verbs-provider/libibverbs.so.1" 2>/dev/null | grep -q __asan_init; then
	echo "skip verbs programs: sanitizer build (uninstrumented programs cannot load it)"; verbs_ok=0
fi
if [ $verbs_ok = 1 ]; then
	ip -n trnA addr add 10.81.0.1/24 dev trnA0; ip -n trnB addr add 10.81.0.2/24 dev trnB0
	ip -n trnA link set lo up; ip -n trnB link set lo up
fi
# total COUNTER FILE...: sum of one `rocemu inspect` totals counter
total() {
	what=$1; shift
	for f in "$@"; do "$ROCEMU" inspect "$f" 2>/dev/null | sed -n "/^totals/,\$ s/.* $what \([0-9]*\).*/\1/p"; done |
		awk '{s += $1} END {print s + 0}'
}
# run_prog NAME PROGRAM ARGS...: PROGRAM as server (trnA) and client (trnB)
# under 1% loss of RoCEv2 frames (only frames matching $LOSS_MATCH, if set).
run_prog() {
	name=$1; shift
	prog=$1; shift
	case " ${TRN_ONLY:-$name} " in *" $name "*) ;; *) return ;; esac
	command -v $prog >/dev/null || { echo "skip $name: $prog not installed"; return; }
	if [ $mode = netem ] && { [ -z "${LOSS_MATCH:-}" ] || ! command -v nft >/dev/null; }; then
		$M nft delete table netdev trn 2>/dev/null
		for l in trnA1 trnB1; do $M tc qdisc del dev $l root 2>/dev/null; $M tc qdisc add dev $l root netem loss 1%; done
	else
		qdisc_setup none
		nft_setup drop 1 "${LOSS_MATCH:-}"
	fi
	rm -f "$DIR"/*.pcap
	ip netns exec trnA timeout -s KILL 240 "$ROCEMU" run --port af_packet:trnA0 --ip 10.81.0.1/24 \
		--capture "$DIR/a.pcap" -- $prog -p 18517 "$@" > "$DIR/a.log" 2>&1 &
	pa=$!
	# until the server listens (or ended): no deadline, the timeout above
	# guards against a hang
	while ! ip netns exec trnA ss -ltn 2>/dev/null | grep -q ":18517 "; do
		kill -0 $pa 2>/dev/null || break
		sleep 0.1
	done
	ip netns exec trnB timeout -s KILL 240 "$ROCEMU" run --port af_packet:trnB0 --ip 10.81.0.2/24 \
		--capture "$DIR/b.pcap" -- $prog -p 18517 "$@" 10.81.0.1 > "$DIR/b.log" 2>&1
	rb=$?
	wait $pa; ra=$?
	hits=$([ $mode = nft ] && nft_hits || echo "netem")
	rt=$(total retransmitted "$DIR/a.pcap" "$DIR/b.pcap")
	naks=$(total naks "$DIR/a.pcap" "$DIR/b.pcap")
	if [ $ra = 0 ] && [ $rb = 0 ] && [ "$rt" -gt 0 ]; then
		echo "ok   $name: $prog $* under 1% loss: dropped $hits, captures show $rt retransmitted, $naks NAKs"
	else
		echo "FAIL $name: $prog $* (exit $ra/$rb; dropped $hits, $rt retransmitted, $naks NAKs)"
		tail -n 20 "$DIR/a.log" "$DIR/b.log"; fail=1
	fi
}
if [ $verbs_ok = 1 ]; then
	# ibv_rc_pingpong has no closing handshake: the client exits as soon as its
	# last receive completes, so if the ACK of the server's last SEND is lost the
	# server retransmits to a QP that no longer exists and fails with
	# RETRY_EXC_ERR, as it would on any NIC. Only frames that are not
	# ACKNOWLEDGE (BTH opcode 0x11, the byte after the 8-byte UDP header) are
	# dropped for it; ACK loss is covered by the scenarios above and by perftest.
	LOSS_MATCH='@th,64,8 != 0x11' run_prog v-rc-pingpong ibv_rc_pingpong -g 1 -c -n 2000
	run_prog v-write-bw ib_write_bw -x 1 -F -n 3000
	run_prog v-send-bw ib_send_bw -x 1 -F -n 3000
	run_prog v-read-bw ib_read_bw -x 1 -F -n 3000
	run_prog v-atomic-bw ib_atomic_bw -x 1 -F -n 3000
fi
nft_setup none 0; qdisc_setup none
exit $fail
