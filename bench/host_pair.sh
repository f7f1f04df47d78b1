#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Same-host process-to-process through a rocemu host against a direct memif
# pair (issue 16, docs/host.md), by hand: bench/host_pair.sh [BUILD [REPS]]
#   direct:  two `rocemu run` processes joined by memif (standalone mode)
#   host:    both attached to one `rocemu host` (no capture: the host pairs
#            them on a direct ring)
#   hostcap: the same with --capture (every frame through the host's thread)
# Prints the client's perftest result line of ib_write_bw -s 65536 and
# ib_send_lat -s 2 per mode and repetition. Not pinned; run it on an idle
# machine (`uptime`).
set -u
BUILD=$(cd "${1:-build}" && pwd)
REPS=${2:-2}
R=$BUILD/tools/rocemu
one() { # MODE PROG ARGS...
	local mode=$1 d p cap= S C
	shift
	d=$(mktemp -d /tmp/rocemu-hostpair-XXXXXX)
	p=$((31000 + RANDOM % 1000))
	if [ $mode = direct ]; then
		S=(--port memif:server:$d/m.sock --ip 10.72.0.1/24)
		C=(--port memif:client:$d/m.sock --ip 10.72.0.2/24)
	else
		[ $mode = hostcap ] && cap="--capture $d/h.pcap"
		"$R" host --name $d/h --detach --pid-file $d/h.pid --port memif:server:$d/up.sock \
			--ip 10.72.0.1/24 $cap >/dev/null 2>&1 || { echo "rocemu host did not start"; return 1; }
		S=(--host $d/h) C=(--host $d/h)
	fi
	timeout -s KILL 120 "$R" run --no-check "${S[@]}" -- "$@" -p $p >$d/s.log 2>&1 &
	while ! ss -ltn | grep -q ":$p " && kill -0 $! 2>/dev/null; do sleep 0.1; done
	timeout -s KILL 120 "$R" run --no-check "${C[@]}" -- "$@" -p $p 127.0.0.1 >$d/c.log 2>&1
	wait
	printf '%-8s %-12s %s\n' $mode $1 "$(grep -E '^ *[0-9]+ +[0-9]+ ' $d/c.log | head -1)"
	[ -f $d/h.pid ] && kill $(cat $d/h.pid)
	sleep 0.5
	rm -rf $d
}
echo "load: $(uptime)"
for r in $(seq $REPS); do
	for m in direct host hostcap; do
		one $m ib_write_bw -d rocemu0 -x 1 -F -s 65536 -n 5000
		one $m ib_send_lat -d rocemu0 -x 1 -F -s 2 -n 10000
	done
done
echo "load: $(uptime)"
