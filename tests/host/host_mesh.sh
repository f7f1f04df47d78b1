#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# N processes attached to one rocemu host, K RC QPs from each to every other,
# all-to-all (issue 16):  host_mesh.sh HOST_MESH_EXE N K [MSGS]
# Each rank is host_mesh (host_mesh.c): it checks every byte of every message
# it receives. Every rank must exit 0; the host may drop no frame and must
# hold no process or QPN once they are gone. Bounded counts, no durations.
set -u
mesh=${1:?host_mesh executable} n=${2:?processes} k=${3:?QPs per peer} msgs=${4:-8}
TIMEOUT=${HOST_TIMEOUT:-600}
. "$(dirname "$0")/host_lib.sh"
pair_need_prog "$mesh"
host_dir hostmesh
host_start h "" --port memif:server:$dir/up.sock --ip 10.69.$pair_net.1/24 || exit 1
mkdir $dir/mesh
fail=0 pids=()
for r in $(seq 0 $((n - 1))); do
	host_run h "" $dir/r$r.log "$mesh" --dir $dir/mesh --rank $r --nprocs $n --qps $k \
		--msgs $msgs --size 2048 --wait-s $TIMEOUT
	pids+=($!)
done
for r in $(seq 0 $((n - 1))); do
	wait ${pids[$r]} || { echo "FAIL: rank $r"; tail -n 5 $dir/r$r.log; fail=1; }
done
echo "$n processes x $k QPs to each of the others, $msgs messages a QP"
stat=$(host_stat h)
echo "$stat" | head -4
echo "$stat" | grep -q "dropped: no such QP 0, QP of a process gone 0, malformed 0" ||
	{ echo "FAIL: the host dropped frames"; fail=1; }
echo "$stat" | grep -q " 0 processes attached ($n since start, 0 refused, $n gone); QPNs: 0 live" ||
	{ echo "FAIL: processes or QPNs still held"; fail=1; }
host_stop h >/dev/null
exit $fail
