#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Issue 20.10: both ends of a veth pair in ONE network namespace.
#  1. With kernel addresses on both ends (the set-up a newcomer tries first)
#     ARP cannot work: rocemu leaves ARP for an address the kernel owns on
#     that interface to the kernel, and the kernel ignores an ARP request
#     whose sender address is one of its own. `rocemu port --ping` from one
#     end to the other must fail and say "cannot resolve ADDR (ARP)". A
#     program pair may still get through when both ends ARP for each other
#     (each learns the other from the other's request): ib_write_bw must then
#     pass, or fail saying "cannot resolve ADDR (ARP)", never fail silently.
#  2. The set-up that works (docs/verbs-provider.md): no kernel address on
#     the veth ends (rocemu answers ARP itself), the programs' TCP handshake
#     over 127.0.0.1. ib_write_bw passes.
set -u
TIMEOUT=${PAIR_TIMEOUT:-60}
. "$(dirname "$0")/pair_lib.sh"
pair_require ib_write_bw perftest
dir=$(mktemp -d /tmp/rocemu-v1ns-XXXXXX)
ns=v1ns$$
ns=${ns:0:10}
cleanup() {
	ip netns del $ns 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
ip netns add $ns || { echo "SKIP: cannot create network namespaces"; exit 77; }
ip -n $ns link set lo up
ip -n $ns link add v1a type veth peer name v1b || { echo "SKIP: cannot create veth"; exit 77; }
ip -n $ns link set v1a up
ip -n $ns link set v1b up
a=10.$pair_net.9.1 b=10.$pair_net.9.2
fail=0
tcp=$pair_tcp

# run_pair OUT_PREFIX: server on v1b, client on v1a; statuses in OUT.{s,c}.rc
run_pair() {
	local o=$1
	ip netns exec $ns timeout $TIMEOUT "$ROCEMU" run --port af_packet:v1b --ip $b/24 \
		--arp-timeout 300 --arp-retries 2 -- ib_write_bw -x 1 -F -n 200 -p $tcp \
		>$o.s.out 2>&1 &
	local sp=$!
	sleep 2
	ip netns exec $ns timeout $TIMEOUT "$ROCEMU" run --port af_packet:v1a --ip $a/24 \
		--arp-timeout 300 --arp-retries 2 -- ib_write_bw -x 1 -F -n 200 -p $tcp 127.0.0.1 \
		>$o.c.out 2>&1
	echo $? >$o.c.rc
	# a server whose client failed may wait for it: it gets a few seconds
	for _ in $(seq 50); do kill -0 $sp 2>/dev/null || break; sleep 0.1; done
	kill $sp 2>/dev/null
	wait $sp
	echo $? >$o.s.rc
	tcp=$((tcp + 1))
}

# 1. kernel addresses on both ends: ARP unanswered, and rocemu says so
ip -n $ns addr add $a/24 dev v1a
ip -n $ns addr add $b/24 dev v1b
ip netns exec $ns timeout $TIMEOUT "$ROCEMU" port --port af_packet:v1b --ip $b/24 \
	--duration 6 >$dir/port.b.out 2>&1 &
pb=$!
sleep 1
ip netns exec $ns timeout $TIMEOUT "$ROCEMU" port --port af_packet:v1a --ip $a/24 \
	--arp-timeout 300 --arp-retries 2 --ping $b --count 1 >$dir/port.a.out 2>&1
rc=$?
wait $pb
if [ $rc = 0 ] || ! grep -q "cannot resolve $b (ARP)" $dir/port.a.out; then
	echo "FAIL: rocemu port --ping $b: status $rc, no 'cannot resolve $b (ARP)':"
	cat $dir/port.a.out; fail=1
else
	echo "ok: kernel addresses on both ends: $(grep -m1 'cannot resolve' $dir/port.a.out)"
fi
run_pair $dir/kernel
if [ "$(cat $dir/kernel.c.rc)" != 0 ] && ! grep -q "cannot resolve $b (ARP)" $dir/kernel.c.out; then
	echo "FAIL: the client failed without saying 'cannot resolve $b (ARP)':"
	cat $dir/kernel.c.out; fail=1
elif [ "$(cat $dir/kernel.c.rc)" != 0 ]; then
	echo "ok: ib_write_bw failed, saying: $(grep -m1 'cannot resolve' $dir/kernel.c.out)"
else
	echo "ok: ib_write_bw got through (both ends learnt each other from their own requests)"
fi

# 2. no kernel address on the veth ends, TCP over 127.0.0.1: works
ip -n $ns addr flush dev v1a
ip -n $ns addr flush dev v1b
run_pair $dir/plain
if [ "$(cat $dir/plain.c.rc)" != 0 ] || [ "$(cat $dir/plain.s.rc)" != 0 ]; then
	echo "FAIL: without kernel addresses: client $(cat $dir/plain.c.rc), server $(cat $dir/plain.s.rc)"
	cat $dir/plain.c.out $dir/plain.s.out; fail=1
else
	echo "ok: no kernel address on the veth ends: ib_write_bw passes"
fi
exit $fail
