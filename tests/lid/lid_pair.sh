#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Unmodified verbs programs with LID-only address vectors (is_global = 0,
# dlid = the peer's LID from their own TCP exchange), which rocemu resolves to
# the peer's IPv4 in our /16 (docs/verbs-provider.md, "LID-only address
# vectors"):
#   lid_pair.sh memif|veth qperf TEST...
#       host A: `qperf -lp PORT` (never exits: stopped after the client),
#       host B: `qperf -lp PORT -t 1 A TEST...` (no -cm1: no rdma_cm); the
#       client must print a result for each test and no error;
#   lid_pair.sh memif|veth PROGRAM ARGS...   (ibv_*_pingpong without -g)
#       host A: PROGRAM -p PORT ARGS, host B: PROGRAM -p PORT ARGS A; both
#       must exit 0.
# The captures (host B's for qperf, whose server is killed) must decode in
# tshark without malformed or error frames, every ICRC must verify
# (check_captures.sh), and no frame may go to QP1 (no CM MAD: LID-only).
#  memif: both processes share one fresh network namespace whose loopback
#         holds host A's address (the programs' TCP), RDMA crosses memif;
#  veth:  two namespaces joined by a veth pair, af_packet ports.
# Both hosts are in one /16 (10.91.x.y), as the LID mapping requires. The
# links carry 4200-byte frames (RoCE MTU 4096): qperf's path MTU is 2048 and
# ud_bw sends 2048-byte datagrams (ibv_ud_pingpong too), which a 1500-byte
# Ethernet (RoCE MTU 1024) refuses, as on a real RoCE NIC.
set -u
TIMEOUT=${PAIR_TIMEOUT:-120}
. "$(dirname "$0")/../verbs/pair_lib.sh"
mode=$1
shift
prog=$1
shift
args=("$@")

pair_require "$prog"
port=$pair_tcp
# third octets 20..170: both LIDs ((octet3 << 8) | octet4) stay below 0xC000,
# and differ in both bytes
net=$((($$ % 150) + 20))
ipA=10.91.$net.1 ipB=10.91.$((net + 1)).2
pair_hosts ld "$mode" $ipA $ipB 16 4200

if [ "$prog" = qperf ]; then
	sargv=(qperf -lp $port)
	cargv=(qperf -lp $port -t 1 $ipA "${args[@]}")
else
	sargv=("$prog" -p $port "${args[@]}")
	cargv=("$prog" -p $port "${args[@]}" $ipA)
fi
daemon=$([ "$prog" = qperf ] && echo 1)
pair_run $port "$daemon"
if [ -n "$daemon" ]; then caps=($dir/b.pcap); else caps=($dir/a.pcap $dir/b.pcap); fi
if [ "$prog" = qperf ]; then
	# qperf prints "TEST:" then its results; a failed test prints an error
	for t in "${args[@]}"; do
		grep -q "^$t:" $dir/b.log || { echo "no result for $t"; fail=1; }
	done
	# (DPDK's memif driver logs its own connection retries: not qperf's)
	grep -v '^memif_' $dir/b.log | grep -qiE 'failed|error' && { echo "qperf reported an error"; fail=1; }
fi
check_captures "${caps[@]}" || fail=1
# LID-only: nothing went to QP1 (no CM MAD, no rdma_cm)
for f in "${caps[@]}"; do
	cm=$(cap_awk $f '$DQP == 1' | wc -l)
	echo "frames to QP1 in $(basename $f): $cm"
	[ "$cm" -eq 0 ] || { echo "expected no CM traffic"; fail=1; }
done
exit $fail
