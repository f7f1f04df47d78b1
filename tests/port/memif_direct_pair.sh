#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Integration: memif's direct channel (ROCEMU_MEMIF_DIRECT=1 on both ends,
# emulator/port/port_memif_direct.c) between two real rocemu processes.
#  1. pair_check -t data (tests/verbs/pair_check.c: WRITE, READ, atomics and
#     SEND, every byte compared) must pass, and the frames must have crossed
#     on the channel: both ends count direct_rx_bytes, and their PMDs copied
#     less than 1% of that (the first ARP frames, before the peer's offer is
#     mapped, may still take the PMD);
#  2. an ib_write_bw -s 65536 stream: copies per delivered byte, from the
#     counters of both processes (application -> frame, the PMDs' copies,
#     the channel's own copies, frame -> application) must be 2.0 (at most
#     2.01: the ACKs and ARP frames add a few bytes).
# usage: memif_direct_pair.sh PAIR_CHECK
set -u
TIMEOUT=60
. "$(dirname "$0")/../verbs/pair_lib.sh"
checker=${1:?usage: $0 PAIR_CHECK}
[ -x "$checker" ] || { echo "SKIP: $checker not built"; exit 77; }
pair_need_prog "$checker"
command -v ib_write_bw >/dev/null || { echo "SKIP: ib_write_bw not installed (perftest)"; exit 77; }
pair_hosts md local 10.88.$pair_net.1 10.88.$pair_net.2 24
export ROCEMU_STATS=1 ROCEMU_MEMIF_DIRECT=1

# run LOG_TAG SERVER_ARGS -- CLIENT_ARGS: host A then host B, both must exit 0
run() {
	local tag=$1 n
	shift
	n=$(printf '%s\n' "$@" | grep -n '^--$' | cut -d: -f1)
	local sa=("${@:1:n-1}") ca=("${@:n+1}")
	timeout -s KILL $TIMEOUT "$ROCEMU" run "${portA[@]}" -- "${sa[@]}" >$dir/$tag.a.log 2>&1 &
	pa=$!
	pair_wait_listen "" $pa $pair_tcp
	timeout -s KILL $TIMEOUT "$ROCEMU" run "${portB[@]}" -- "${ca[@]}" >$dir/$tag.b.log 2>&1
	rb=$?
	[ $rb -ne 0 ] && kill -TERM $pa 2>/dev/null
	wait $pa
	ra=$?
	pa=
	if [ $ra -ne 0 ] || [ $rb -ne 0 ]; then
		echo "FAIL: $tag: exit $ra (server) / $rb (client)"
		sed "s/^/  $tag server: /" $dir/$tag.a.log | tail -30
		sed "s/^/  $tag client: /" $dir/$tag.b.log | tail -30
		return 1
	fi
}
# ctr LOG GROUP NAME: a counter at exit (0 when not listed)
ctr() { sed -n "s/^rocemu: [^ ]* $2 $3 \([0-9]*\)$/\1/p" $1 | tail -1 | grep . || echo 0; }

fail=0
run data "$checker" -t data -n 2 -p $pair_tcp -- "$checker" -t data -n 2 -p $pair_tcp 127.0.0.1 ||
	fail=1
for side in a b; do
	log=$dir/data.$side.log
	d=$(ctr $log port direct_rx_bytes) p=$(($(ctr $log port pmd_copy_rx_bytes) + $(ctr $log port pmd_copy_tx_bytes)))
	echo "data, host $side: direct_rx_bytes $d, PMD copies $p bytes, drops: $(grep -c 'port drop_direct' $log)"
	[ "$d" -gt 0 ] || { echo "FAIL: host $side took nothing from the direct channel"; fail=1; }
	[ $((p * 100)) -lt "$d" ] || { echo "FAIL: host $side: the PMD still copied $p bytes"; fail=1; }
	grep -q "port drop_direct" $log && { echo "FAIL: host $side dropped descriptors"; fail=1; }
done

bw=(ib_write_bw -d rocemu0 -x 1 -F -p $pair_tcp -s 65536 -n 1000)
run bw "${bw[@]}" -- "${bw[@]}" 127.0.0.1 || fail=1
a=$dir/bw.a.log b=$dir/bw.b.log
delivered=$(ctr $a transport copy_rx_bytes)
copies=0
for log in $a $b; do
	for c in "transport copy_tx_bytes" "transport copy_rx_bytes" "port pmd_copy_tx_bytes" \
		"port pmd_copy_rx_bytes" "port direct_copy_tx_bytes" "port direct_copy_rx_bytes"; do
		copies=$((copies + $(ctr $log $c)))
	done
done
echo "ib_write_bw: $delivered bytes delivered, $copies bytes copied," \
	"direct_tx_bytes $(ctr $b port direct_tx_bytes)"
if [ "$delivered" -lt $((1000 * 65536)) ]; then
	echo "FAIL: ib_write_bw delivered $delivered bytes"; fail=1
elif ! awk -v c=$copies -v d=$delivered 'BEGIN { printf "copies per delivered byte: %.4f\n", c / d; exit !(c / d <= 2.01) }'; then
	echo "FAIL: more than 2 copies per delivered byte"; fail=1
fi
[ $fail = 0 ] && echo "PASS: memif direct channel: data checked, 2 copies per byte"
exit $fail
