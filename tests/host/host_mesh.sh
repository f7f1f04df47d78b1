#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# N processes attached to one rocemu host, K RC QPs from each to every other,
# all-to-all (issue 16):  host_mesh.sh HOST_MESH_EXE N K [MSGS [ACK_TIMEOUT]]
# Each rank is host_mesh (host_mesh.c): it checks every byte of every message
# it receives. Every rank must exit 0; the host may drop no frame and must
# hold no process or QPN once they are gone. While the ranks still hold their
# QPs (--hold), `rocemu stat --host --json` must show every QP's frames from
# its direct rings (same-host frames the host does not see pass): at least
# one per message it received, and as many taken from direct rings as put
# into them. Bounded counts, no durations.
set -u
mesh=${1:?host_mesh executable} n=${2:?processes} k=${3:?QPs per peer} msgs=${4:-8} ack=${5:-17}
TIMEOUT=${HOST_TIMEOUT:-600}
. "$(dirname "$0")/host_lib.sh"
pair_need_prog "$mesh"
host_dir hostmesh
host_start h "" --port memif:server:$dir/up.sock --ip 10.69.$pair_net.1/24 || exit 1
mkdir $dir/mesh
fail=0 pids=() rc=1
for r in $(seq 0 $((n - 1))); do
	host_run h "" $dir/r$r.log "$mesh" --dir $dir/mesh --rank $r --nprocs $n --qps $k \
		--msgs $msgs --size 2048 --wait-s $TIMEOUT --hold --timeout $ack
	pids+=($!)
done
# every rank done: its QPs live until $dir/mesh/release
for r in $(seq 0 $((n - 1))); do
	while [ ! -e $dir/mesh/$r.done ] && kill -0 ${pids[$r]} 2>/dev/null; do sleep 0.2; done
done
if [ "$(ls $dir/mesh/*.done 2>/dev/null | wc -l)" = "$n" ]; then
	# frames still in a ring (a last ACK) are taken by the reader's thread:
	# a bounded number of looks until nothing is in flight
	for try in $(seq 100); do
		"$ROCEMU" stat --host $dir/h --json >$dir/stat.json
		"$PY" - $dir/stat.json $n $k $msgs >$dir/stat.check <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))
n, k, msgs = map(int, sys.argv[2:5])
procs = st["processes"]
out = sum(p["direct_frames_out"] for p in procs)
inn = sum(p["direct_frames_in"] for p in procs)
bad = []
if len(procs) != n:
    bad.append(f"{len(procs)} processes attached, not {n}")
for p in procs:
    if len(p["qps"]) != (n - 1) * k:
        bad.append(f"process {p['pid']}: {len(p['qps'])} QPs, not {(n - 1) * k}")
    if p["direct_rings_out"] != n - 1:
        bad.append(f"process {p['pid']}: {p['direct_rings_out']} direct rings, not {n - 1}")
    for q in p["qps"]:
        if q["direct_frames_in"] < msgs or q["direct_bytes_in"] < msgs * 2048:
            bad.append(f"process {p['pid']} QP {q['qpn']:#x}: {q['direct_frames_in']} frames "
                       f"{q['direct_bytes_in']} bytes from direct rings, {msgs} messages")
    if p["direct_frames_in"] < sum(q["direct_frames_in"] for q in p["qps"]):
        bad.append(f"process {p['pid']}: fewer direct frames than its QPs took")
if out != inn:
    bad.append(f"in flight: {out} frames put into direct rings, {inn} taken")
print(f"direct rings: {out} frames put, {inn} taken, {n} processes x {(n - 1) * k} QPs")
print("\n".join(bad[:10]))
sys.exit(1 if bad else 0)
PY
		rc=$?
		[ $rc = 0 ] && break
		grep -q "^in flight" $dir/stat.check && [ "$(wc -l <$dir/stat.check)" -le 2 ] || break
		sleep 0.2
	done
	cat $dir/stat.check
	[ $rc = 0 ] || { echo "FAIL: per-QP direct ring counters"; fail=1; }
	"$ROCEMU" stat --host $dir/h | grep -q "direct rings: $((n - 1)) out" ||
		{ echo "FAIL: rocemu stat shows no direct rings"; fail=1; }
fi
touch $dir/mesh/release
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
