#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# A rocemu host stopped (SIGTERM) while its processes run RDMA traffic, then
# started again under the same name (issue 16):
#  - every attached process gets the port-down async event
#    (IBV_EVENT_PORT_ERR, seen by ibv_asyncwatch in ibv_get_async_event);
#  - the attached processes end by themselves with an error, none hangs (the
#    client's QP reports IBV_WC_RETRY_EXC_ERR: its port is down and sends
#    nothing more);
#  - a new pair attaches to the restarted host and completes; its capture is
#    clean.
# Bounded counts and progress polled from `rocemu stat`: no durations (a hang
# is the programs' own timeout, a failure).
set -u
TIMEOUT=${HOST_TIMEOUT:-300}
. "$(dirname "$0")/host_lib.sh"
pair_need_prog ib_write_bw perftest
pair_need_prog ibv_rc_pingpong ibverbs-utils
pair_need_prog ibv_asyncwatch ibverbs-utils
command -v stdbuf >/dev/null || { echo "SKIP: stdbuf not installed"; exit 77; }
command -v tshark >/dev/null || { echo "SKIP: tshark not installed"; exit 77; }
host_dir hostrestart
ip=10.70.$pair_net.1/24
# with a capture every frame passes the host, whose counters show the traffic
host_start h "" --port memif:server:$dir/up.sock --ip $ip --capture $dir/h1.pcap || exit 1
fail=0
base=$((pair_tcp % 20000 + 30000))

# a third process that only waits in ibv_get_async_event (line-buffered:
# it never exits by itself)
host_run h "" $dir/aw.log stdbuf -oL ibv_asyncwatch -d rocemu0
aw=$!
host_write_pair h "" $base || exit 1
s=$wpair_s c=$wpair_c
echo "== stopping the host under traffic"
host_stop h | head -3
rs=0 rc=0
wait $c || rc=$?
wait $s || rs=$?
echo "== the pair: server exit $rs, client exit $rc"
# the event comes from the process's own progress (the link is checked
# every 100 ms): wait for it as long as the watcher lives
for _ in $(seq 600); do
	grep -q IBV_EVENT_PORT_ERR $dir/aw.log && break
	kill -0 $aw 2>/dev/null || break
	sleep 0.1
done
cat $dir/aw.log
grep -q 'event_type IBV_EVENT_PORT_ERR (10), port 1' $dir/aw.log ||
	{ echo "FAIL: no IBV_EVENT_PORT_ERR async event after the host stopped"; fail=1; }
host_kill_tree TERM $aw
grep -iE 'status|error|fail' $dir/c.log $dir/s.log | head -6
[ $rc -ne 137 ] && [ $rs -ne 137 ] || { echo "FAIL: a process hung (killed by its timeout)"; fail=1; }
[ $rc -ne 0 ] || { echo "FAIL: the client reported success"; fail=1; }
grep -q 'Failed status 12' $dir/c.log ||
	{ echo "FAIL: the client's QP did not report IBV_WC_RETRY_EXC_ERR"; fail=1; }

echo "== the host again, same name"
host_start h "" --port memif:server:$dir/up2.sock --ip $ip --capture $dir/h.pcap || exit 1
host_run h "" $dir/ns.log ibv_rc_pingpong -g 1 -c -n 200 -s 4096 -p $((base + 1))
ns=$!
pair_wait_listen "" $ns $((base + 1))
host_run h "" $dir/nc.log ibv_rc_pingpong -g 1 -c -n 200 -s 4096 -p $((base + 1)) 127.0.0.1
nc=$!
for p in $ns $nc; do wait $p || { echo "FAIL: the new pair failed"; fail=1; }; done
grep -hE 'bytes in|rror|ailed' $dir/ns.log $dir/nc.log
host_stop h >/dev/null
check_captures $dir/h.pcap || fail=1
exit $fail
