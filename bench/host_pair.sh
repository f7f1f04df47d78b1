#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Same-host process-to-process through a rocemu host against a direct memif
# pair (issue 16, docs/host.md), by hand: bench/host_pair.sh [BUILD [REPS]]
# (REPS 5 by default; the modes interleaved within each repetition)
#   direct:  two `rocemu run` processes joined by memif (standalone mode)
#   host:    both attached to one `rocemu host` (no capture: the host pairs
#            them on a direct ring)
#   hostcap: the same with --capture (every frame through the host's thread)
# Prints the client's perftest result line of ib_write_bw -s 65536 and
# ib_send_lat -s 2 per mode and repetition, then per mode and program the
# median, minimum and maximum over the repetitions (ib_write_bw: BW average,
# MB/s; ib_send_lat: t_typical, us) and the median's ratio to the direct
# pair's (issue 16's targets: ib_write_bw >= 0.8x, ib_send_lat <= 1.5x).
# Not pinned; run it on an idle machine (`uptime`): numbers of a loaded
# machine are not results.
set -u
BUILD=$(cd "${1:-build}" && pwd)
REPS=${2:-5}
results=$(mktemp /tmp/rocemu-hostpair-results-XXXXXX)
R=$BUILD/tools/rocemu
one() { # MODE PROG ARGS...
	local mode=$1 d p cap= S C line
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
	line=$(grep -E '^ *[0-9]+ +[0-9]+ ' $d/c.log | head -1)
	printf '%-8s %-12s %s\n' $mode $1 "$line"
	# the value compared: ib_write_bw's BW average, ib_send_lat's t_typical
	[ -n "$line" ] && echo "$mode $1 $(echo $line | awk -v p=$1 \
		'{print (p == "ib_write_bw") ? $4 : $5}')" >>$results
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
echo
echo "mode     program      median      min      max  (n)  median/direct"
"${PYTHON:-python3}" - $results <<'PY'
import statistics, sys
vals = {}
for line in open(sys.argv[1]):
    mode, prog, v = line.split()
    vals.setdefault((mode, prog), []).append(float(v))
for prog in ("ib_write_bw", "ib_send_lat"):
    base = vals.get(("direct", prog))
    for mode in ("direct", "host", "hostcap"):
        v = vals.get((mode, prog))
        if not v:
            continue
        med = statistics.median(v)
        ratio = f"{med / statistics.median(base):.2f}x" if base else "-"
        print(f"{mode:8} {prog:12} {med:9.2f} {min(v):8.2f} {max(v):8.2f}  ({len(v)})  {ratio}")
PY
rm -f $results
