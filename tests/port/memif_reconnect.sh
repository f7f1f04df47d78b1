#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Integration: memif in any start order, and across restarts, with real
# `rocemu port` processes (no root needed: memif is a Unix socket).
#  A. A client starts first, its server 1.5 s later: the client says once that
#     it waits (no line of DPDK's), and its pings are answered.
#  B. That client exits and a new one comes at once to the same server: its
#     pings are answered (the server takes the new connection although the
#     old client announced its close).
#  C. The server stops and a new server starts 1 s later on the same socket:
#     the client, which stays, reconnects by itself, and the new server's
#     pings to it are answered.
#  D. The same with no pause between the two servers.
# At the end the client must have counted its reconnects (memif_reconnects).
#
# usage: memif_reconnect.sh ROCEMU
set -u
rocemu=${1:?usage: $0 ROCEMU}

. "$(dirname "$0")/port_lib.sh"
port_workdir mreconn

sock="$work/memif.sock"
srv_ip=10.75.0.1
cli_ip=10.75.0.2
status=0
fail() { echo "FAIL: $*"; status=1; }

# end ROLE IP NAME [ARGS...]: a rocemu memif ROLE (server/client) in the
# background, output in $work/NAME.out; its PID in $last
end() {
	local role=$1 ip=$2 name=$3
	shift 3
	timeout 60 "$rocemu" port --name "${role:0:3}" --port "memif:$role:$sock" --ip "$ip/24" "$@" \
		>"$work/$name.out" 2>&1 &
	last=$!
	pids+=("$last")
}
server() { end server "$srv_ip" "$@"; }
client() { end client "$cli_ip" "$@"; }
# stop PID: SIGINT, then wait for it; its exit status
stop() {
	kill -INT "$1" 2>/dev/null
	wait "$1"
}
# answered NAME COUNT TARGET: NAME's output says all COUNT pings were answered
answered() {
	grep -q "$2/$2 echo requests to $3 answered" "$work/$1.out"
}
show() { sed "s/^/  $1: /" "$work/$1.out" | grep -E "answered|reply|link did|failed|memif_|peer_closed"; }

# A. client first, server late
client cli1 --ping "$srv_ip" --count 2
cli1=$last
sleep 1.5
server srv1
srv1=$last
wait "$cli1" || fail "A: the client started first got no answers"
show cli1
answered cli1 2 "$srv_ip" || fail "A: client's pings (server started 1.5 s after it)"
# it said once that it waited, and DPDK said nothing of its attempts
[ "$(grep -c "waiting for a memif server on $sock" "$work/cli1.out")" = 1 ] ||
	fail "A: the client's 'waiting for a memif server' line (once)"
grep -q "Failed to connect" "$work/cli1.out" && fail "A: DPDK's connect failures in the client's output"

# B. a new client to the same server, at once
client cli2 --ping "$srv_ip" --count 2 --stay
cli2=$last
# until it reports its pings (or exits): no deadline of our own, the test's
# timeout catches a hang
while ! grep -q "echo requests to" "$work/cli2.out"; do
	kill -0 "$cli2" 2>/dev/null || break
	sleep 0.1
done
answered cli2 2 "$srv_ip" || fail "B: a second client's pings to the same server"

# C. the server stops; a new one comes 1 s later; the client stays
stop "$srv1" || fail "C: the first server exited with an error"
show srv1
sleep 1
server srv2 --ping "$cli_ip" --count 3
wait "$last" || fail "C: the new server's ping run exited with an error"
show srv2
answered srv2 3 "$cli_ip" || fail "C: the new server's pings to the client that stayed"

# D. and again with no pause between the servers
server srv3 --ping "$cli_ip" --count 3
wait "$last" || fail "D: the next server's ping run exited with an error"
show srv3
answered srv3 3 "$cli_ip" || fail "D: pings from a server started right after the last one exited"

stop "$cli2" || fail "the client exited with an error"
show cli2
n=$(awk '$1 == "memif_reconnects" {print $2}' "$work/cli2.out")
[ "${n:-0}" -ge 1 ] || fail "the client counted no reconnect (memif_reconnects)"
pids=()
[ $status = 0 ] && echo "PASS: memif: client first, new clients and restarted servers all exchange traffic"
exit $status
