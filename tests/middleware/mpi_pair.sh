#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# An MPI job of two ranks over rocemu, started the documented way
# (docs/middleware.md): one `rocemu run` command line for every rank under
# Open MPI's mpirun, with UCX as the point-to-point layer:
#   mpi_pair.sh memif|veth
#  memif: both ranks here, joined by memif (--rank-port memif:SOCK: rank 0
#         the server, rank 1 the client);
#  veth:  two network namespaces joined by a veth pair stand for two hosts,
#         each with an interface of the same name: mpirun runs in the first,
#         its rsh agent (nsrsh.sh) starts the daemon of the second with
#         `ip netns exec`, and every rank runs --rank-port af_packet:mpi0.
# Over memif, when run as root, the job runs a second time as user nobody.
# The program (mpi_pingpong.c, built here with mpicc) checks every byte of a
# ping-pong of 1 B..1 MiB and an allreduce. Both ranks must report, and the
# capture of rank 1 must decode cleanly with every ICRC verified and hold the
# job's traffic: RC SENDs (eager messages), RDMA READs (UCX's rendezvous for
# the large ones), DSCP 26 on every frame (UCX's RoCE v2 traffic class).
set -u
TIMEOUT=${PAIR_TIMEOUT:-180}
. "$(dirname "$0")/mw_lib.sh"
mode=$1
here=$(cd "$(dirname "$0")" && pwd)
pair_need_prog mpirun openmpi-bin
mw_need_cmd mpicc libopenmpi-dev
[ "$mode" = veth ] && pair_require mpirun openmpi-bin
dir=$(mktemp -d /tmp/rocemu-mpi-XXXXXX)
A=mpiA$$ B=mpiB$$
cleanup() {
	ip netns del $A 2>/dev/null
	ip netns del $B 2>/dev/null
	[ -n "${PAIR_KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT
fail=0
mpicc -Wall -Wextra -Werror -O2 -o $dir/mpi_pingpong "$here/mpi_pingpong.c" ||
	{ echo "FAIL: mpicc"; exit 1; }
# root in CI: Open MPI refuses root unless told
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Debian's openmpi-mca-params.conf says pml = ^ucx: --mca pml ucx overrides it
mpi=(mpirun -np 2 --mca pml ucx -x UCX_TLS=rc_verbs,ud_verbs,self -x UCX_NET_DEVICES=rocemu0:1)
job=(--capture $dir/rank-%r.pcap -- $dir/mpi_pingpong)

if [ "$mode" = memif ]; then
	timeout -s KILL $TIMEOUT "${mpi[@]}" --oversubscribe \
		"$ROCEMU" run --rank-port memif:$dir/job.sock --rank-ip 10.93.$pair_net.1/24 \
		"${job[@]}" >$dir/log 2>&1
	rc=$?
else
	ip netns add $A && ip netns add $B || { echo "SKIP: cannot create network namespaces"; exit 77; }
	ip link add mpi0 netns $A type veth peer name mpi0 netns $B ||
		{ echo "SKIP: cannot create veth"; exit 77; }
	ipA=10.94.0.1 ipB=10.94.0.2
	for ns in $A $B; do ip -n $ns link set lo up && ip -n $ns link set mpi0 up; done
	ip -n $A addr add $ipA/24 dev mpi0 && ip -n $B addr add $ipB/24 dev mpi0
	NSRSH_HOSTS="$ipA=$A $ipB=$B" timeout -s KILL $TIMEOUT ip netns exec $A \
		"${mpi[@]}" -H $ipA,$ipB --mca plm_rsh_agent "$here/nsrsh.sh" -x NSRSH_HOSTS \
		"$ROCEMU" run --rank-port af_packet:mpi0 --rank-ip $ipA/24 "${job[@]}" >$dir/log 2>&1
	rc=$?
fi
echo "== mpirun (exit $rc)"; cat $dir/log
[ $rc -eq 0 ] || fail=1
for r in 0 1; do
	grep -q "^mpi_pingpong: rank $r of 2: 88 messages .* checked$" $dir/log ||
		{ echo "FAIL: rank $r did not report"; fail=1; }
done
# memif, as root: the same job as user nobody, each rank in a user namespace
# of its own for the view (Open MPI's daemons and PMIx stay outside)
skip=0
if [ "$mode" = memif ] && [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && ! mw_userns_ok; then
	echo "SKIP (the job as nobody): this system lets no unprivileged user create a user namespace"
	skip=1
elif [ "$mode" = memif ] && [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	nobody_rocemu=$(mw_nobody_rocemu $dir)
	mkdir -m 777 $dir/nobody
	(cd $dir/nobody && mw_as_nobody env HOME=$dir/nobody TMPDIR=$dir/nobody \
		timeout -s KILL $TIMEOUT "${mpi[@]}" --oversubscribe "$nobody_rocemu" run \
		--rank-port memif:$dir/nobody/job.sock --rank-ip 10.93.$pair_net.1/24 \
		-- $dir/mpi_pingpong) >$dir/nobody.log 2>&1
	rc=$?
	echo "== the same job as nobody (exit $rc)"; cat $dir/nobody.log
	[ $rc -eq 0 ] && [ "$(grep -c '^mpi_pingpong: rank [01] of 2: 88 messages .* checked$' \
		$dir/nobody.log)" = 2 ] || { echo "FAIL: the job as nobody"; fail=1; }
fi
check_captures $dir/rank-1.pcap || fail=1
mw_roce $dir/rank-1.pcap
read -r sends reads < <(timeout 120 tshark -n -r $dir/rank-1.pcap -Y infiniband.bth -T fields \
	-e infiniband.bth.opcode 2>/dev/null |
	awk '$1 <= 5 { s++ } $1 == 12 { r++ } END { print s + 0, r + 0 }')
echo "rank-1.pcap: $mw_all RoCE frames, $mw_v2 with DSCP 26, $sends RC SENDs, $reads RDMA READ requests (count x opcode: $mw_ops)"
[ "$mw_all" -gt 0 ] && [ "$mw_v2" -eq "$mw_all" ] || { echo "FAIL: frames without UCX's RoCE v2 traffic class"; fail=1; }
[ "$sends" -gt 0 ] && [ "$reads" -gt 0 ] || { echo "FAIL: no eager SENDs or no rendezvous READs"; fail=1; }
[ $fail = 0 ] && [ $skip = 1 ] && exit 77
exit $fail
