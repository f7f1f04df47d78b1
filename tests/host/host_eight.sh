#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# One rocemu host, ten processes attached at once (issue 16): four
# ib_write_bw pairs and an ib_send_lat pair among themselves, switched by the
# host. Every program must exit 0; the host's one capture must hold every
# frame once, decode cleanly in tshark and have every ICRC verified
# (check_captures.sh); the host must have switched every frame it took
# (nothing dropped) and have released every QPN when the programs are gone.
# Bounded message counts, no durations: it finishes however loaded the machine.
set -u
TIMEOUT=${HOST_TIMEOUT:-400}
. "$(dirname "$0")/host_lib.sh"
pair_need_prog ib_write_bw perftest
pair_need_prog ib_send_lat perftest
command -v tshark >/dev/null || { echo "SKIP: tshark not installed"; exit 77; }
host_dir host8
host_start h "" --port memif:server:$dir/up.sock --ip 10.66.$pair_net.1/24 \
	--capture $dir/h.pcap || exit 1
fail=0
pids=()
base=$((pair_tcp % 20000 + 30000))
for k in 0 1 2 3; do
	host_run h "" $dir/s$k.log ib_write_bw -d rocemu0 -x 1 -F -p $((base + k)) -s 65536 -n 300 -u 20
	pids+=($!)
done
host_run h "" $dir/slat.log ib_send_lat -d rocemu0 -x 1 -F -p $((base + 4)) -s 2 -n 2000 -u 20
pids+=($!)
for k in 0 1 2 3 4; do pair_wait_listen "" ${pids[$k]} $((base + k)); done
for k in 0 1 2 3; do
	host_run h "" $dir/c$k.log ib_write_bw -d rocemu0 -x 1 -F -p $((base + k)) -s 65536 -n 300 -u 20 127.0.0.1
	pids+=($!)
done
host_run h "" $dir/clat.log ib_send_lat -d rocemu0 -x 1 -F -p $((base + 4)) -s 2 -n 2000 -u 20 127.0.0.1
pids+=($!)
sleep 1
echo "== rocemu stat while they run"
host_stat h | head -20
for p in "${pids[@]}"; do
	wait $p || fail=1
done
for f in s0 s1 s2 s3 slat c0 c1 c2 c3 clat; do
	echo "== $f"; grep -E '^ *[0-9]+ +[0-9]+ |rror|ailed' $dir/$f.log
done
stat=$(host_stat h)
echo "== rocemu stat after"; echo "$stat"
# a process's end releases its QPNs at once: none live, all ten gone
echo "$stat" | grep -q ' 0 processes attached (10 since start, 0 refused, 10 gone); QPNs: 0 live' ||
	{ echo "FAIL: processes or QPNs still held"; fail=1; }
echo "$stat" | grep -q 'dropped: no such QP 0, QP of a process gone 0, malformed 0' ||
	{ echo "FAIL: the host dropped frames"; fail=1; }
host_stop h
check_captures $dir/h.pcap || fail=1
exit $fail
