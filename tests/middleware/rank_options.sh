#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# rocemu run's per-rank options (tools/run/rank.c), as an MPI launcher's
# environment drives them: the device each rank gets ($ROCEMU_DEVICE as the
# program sees it), and the one-line errors. No device is opened.
set -u
. "$(dirname "$0")/mw_lib.sh"
[ -x "$ROCEMU" ] || { echo "SKIP: $ROCEMU not built"; exit 77; }
dir=$(mktemp -d /tmp/rocemu-rank-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail=0
opts=(--rank-port memif:$dir/job.sock --rank-ip 10.95.0.1/24 --capture $dir/r%r.pcap --no-view
	--no-check)
show='printf "%s" "$ROCEMU_DEVICE" | grep -E "^(port|ip|capture)=" | tr "\n" " "'

# expect NAME WANT_STATUS WANT_OUTPUT ENV... -- ROCEMU-RUN-ARGS...
expect() {
	local name=$1 status=$2 want=$3 envs=() got rc
	shift 3
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	got=$(env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u PMIX_RANK -u PMI_RANK \
		-u PMI_SIZE -u SLURM_PROCID -u SLURM_NTASKS "${envs[@]}" "$ROCEMU" run "$@" 2>&1)
	rc=$?
	if [ $rc = "$status" ] && [ "$got" = "$want" ]; then
		echo "ok: $name"
	else
		echo "FAIL: $name: exit $rc, output:"; echo "  $got"; echo "expected exit $status:"
		echo "  $want"; fail=1
	fi
}

expect "Open MPI rank 0: memif server, first address" 0 \
	"port=memif:server:$dir/job.sock ip=10.95.0.1/24 capture=$dir/r0.pcap " \
	OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 -- "${opts[@]}" -- sh -c "$show"
expect "Open MPI rank 1: memif client, next address" 0 \
	"port=memif:client:$dir/job.sock ip=10.95.0.2/24 capture=$dir/r1.pcap " \
	OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 -- "${opts[@]}" -- sh -c "$show"
expect "Slurm rank 1, any other spec as given" 0 \
	"port=af_packet:eth7 ip=10.95.0.11/24 " \
	SLURM_PROCID=1 SLURM_NTASKS=4 -- --rank-port af_packet:eth7 --rank-ip 10.95.0.10/24 \
	--no-view --no-check -- sh -c "$show"
expect "Hydra rank 0" 0 "port=memif:server:$dir/job.sock ip=10.95.0.1/24 capture=$dir/r0.pcap " \
	PMI_RANK=0 PMI_SIZE=2 -- "${opts[@]}" -- sh -c "$show"
expect "no rank in the environment" 2 \
	"rocemu run: --rank-port: no MPI rank in the environment (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK or SLURM_PROCID): start rocemu run from mpirun/srun" \
	-- "${opts[@]}" -- true
expect "memif joins two ranks only" 2 \
	"rocemu run: --rank-port memif: a memif link joins two ranks (this is rank 0 of 3); use af_packet ports for more" \
	OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=3 -- "${opts[@]}" -- true
expect "the rank picks server or client" 2 \
	"rocemu run: --rank-port memif:SOCKET: the rank chooses server or client" \
	OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 -- --rank-port memif:server:$dir/x.sock \
	--ip 10.95.0.1/24 -- true
expect "an address beyond the subnet" 2 \
	"rocemu run: --rank-ip 10.95.0.253/24: rank 2's address leaves the /24 subnet" \
	SLURM_PROCID=2 SLURM_NTASKS=3 -- --rank-port af_packet:eth7 --rank-ip 10.95.0.253/24 -- true
expect "not an IPv4 address" 2 \
	"rocemu run: --rank-ip 'fd00::1/64': expected IPv4ADDR/PREFIX (prefix 1..30)" \
	SLURM_PROCID=0 -- --rank-port af_packet:eth7 --rank-ip fd00::1/64 -- true
exit $fail
