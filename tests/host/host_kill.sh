#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# A process attached to a rocemu host is SIGKILLed under RDMA traffic (issue
# 16): an ib_write_bw server is killed while its client writes to it.
#  - the client's QP reports IBV_WC_RETRY_EXC_ERR (status 12), as with a
#    dead HCA peer: its retries reach the host, which drops them as "QP of a
#    process gone" (counted);
#  - the host releases the killed process and its QPN;
#  - a bystander ibv_rc_pingpong pair, started before the kill, completes;
#  - a new pair attaches after the kill and completes at once;
#  - the host's capture is clean.
# Bounded counts and progress polled from `rocemu stat`: no durations.
set -u
TIMEOUT=${HOST_TIMEOUT:-300}
. "$(dirname "$0")/host_lib.sh"
pair_need_prog ib_write_bw perftest
pair_need_prog ibv_rc_pingpong ibverbs-utils
command -v tshark >/dev/null || { echo "SKIP: tshark not installed"; exit 77; }
host_dir hostkill
host_start h "" --port memif:server:$dir/up.sock --ip 10.68.$pair_net.1/24 \
	--capture $dir/h.pcap || exit 1
fail=0
base=$((pair_tcp % 20000 + 30000))

# the victim's pair: far more iterations than run before the kill
host_write_pair h v $base || exit 1
vs=$wpair_s vc=$wpair_c
# the bystander pair, started only now: the frames counted above are the
# victim's own (with the bystander first, its frames could end the wait
# before the victim's client had connected, and the kill then hit perftest's
# setup, not its writes)
host_run h "" $dir/bs.log ibv_rc_pingpong -g 1 -c -n 2000 -s 1024 -p $((base + 1))
bs=$!
pair_wait_listen "" $bs $((base + 1))
host_run h "" $dir/bc.log ibv_rc_pingpong -g 1 -c -n 2000 -s 1024 -p $((base + 1)) 127.0.0.1
bc=$!
# the program itself: the deepest of the job's descendants (shell, timeout,
# then rocemu run, which execs the program)
victim=$vs
while c=$(pgrep -P $victim | head -1) && [ -n "$c" ]; do victim=$c; done
[ "$victim" = $vs ] && victim=
if [ -z "$victim" ] || ! grep -q ib_write_bw /proc/$victim/comm 2>/dev/null || ! kill -0 $vc 2>/dev/null; then
	echo "FAIL: the victim pair did not run (server $victim)"
	tail -n 5 $dir/vs.log $dir/vc.log
	exit 1
fi
echo "SIGKILL to the server, process $victim"
kill -KILL $victim

rc=0
wait $vc || rc=$?
echo "== client of the killed server (exit $rc)"
grep -iE 'status|error|fail' $dir/vc.log | head -5
[ $rc -ne 0 ] && [ $rc -ne 137 ] || { echo "FAIL: the client did not fail by itself (exit $rc)"; fail=1; }
# perftest: "Failed status 12: wr_id ..." (IBV_WC_RETRY_EXC_ERR)
grep -q 'Failed status 12' $dir/vc.log ||
	{ echo "FAIL: the client's QP did not report IBV_WC_RETRY_EXC_ERR"; fail=1; }
wait $vs

# a new pair, attached after the kill
host_run h "" $dir/ns.log ibv_rc_pingpong -g 1 -c -n 200 -s 4096 -p $((base + 2))
ns=$!
pair_wait_listen "" $ns $((base + 2))
host_run h "" $dir/nc.log ibv_rc_pingpong -g 1 -c -n 200 -s 4096 -p $((base + 2)) 127.0.0.1
nc=$!
for p in $bs $bc $ns $nc; do
	wait $p || { echo "FAIL: a pair that was not killed failed (pid $p)"; fail=1; }
done
for f in bs bc ns nc; do echo "== $f"; grep -E 'bytes in|rror|ailed' $dir/$f.log; done

stat=$(host_stat h)
echo "== rocemu stat after"
echo "$stat" | head -4
echo "$stat" | grep -q ' 0 processes attached (6 since start, 0 refused, 6 gone); QPNs: 0 live' ||
	{ echo "FAIL: processes or QPNs still held"; fail=1; }
gone=$(echo "$stat" | sed -n 's/.*QP of a process gone \([0-9]*\).*/\1/p')
[ "${gone:-0}" -gt 0 ] ||
	{ echo "FAIL: no retry of the client was counted as 'QP of a process gone'"; fail=1; }
echo "$stat" | grep -q 'no such QP 0,.* malformed 0' || { echo "FAIL: other drops"; fail=1; }
host_stop h
check_captures $dir/h.pcap || fail=1
exit $fail
