#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Integration: a memif peer killed outright (SIGKILL) while it streams must
# not take the surviving end with it, and the survivor must serve the next
# peer. Host A (memif server) runs pair_check -t data for KILLS+1 sessions;
# KILLS clients are killed with SIGKILL at a random point once their first
# round passed (RDMA traffic in both directions, the direct channel up, the
# server's PMD left alone), then one more client, without the channel
# (ROCEMU_MEMIF_DIRECT=0: it talks through the PMD only, as a peer that is
# not rocemu would), must pass all its rounds. The server must still run
# after every kill, its last session must pass, and it must exit 0; it must
# have seen each peer killed before its last round go (peer_vanished).
#
# Cheap by default (2 kills, a few seconds); MEMIF_KILLS=N runs N (the
# reproduction of the crash of a survivor in librte_net_memif.so: count the
# "survivor died" lines; before the PMD was left alone, 2 in 81 kills).
#
# usage: memif_peer_kill.sh PAIR_CHECK
set -u
TIMEOUT=${PAIR_TIMEOUT:-300}
. "$(dirname "$0")/../verbs/pair_lib.sh"
checker=${1:?usage: $0 PAIR_CHECK}
[ -x "$checker" ] || { echo "SKIP: $checker not built"; exit 77; }
pair_need_prog "$checker"
kills=${MEMIF_KILLS:-2}
pair_hosts mk local 10.84.$pair_net.1 10.84.$pair_net.2 24
export ROCEMU_STATS=1
# random malloc garbage, as CI's loop did: a use after free shows sooner
export MALLOC_PERTURB_=$((RANDOM % 255 + 1))
rounds=20
args=(-t data -n $rounds -s 16384)

# started directly (no shell in between): $! is rocemu itself, which execs
# into the program, so the SIGKILL reaches the process that holds the port
start() { # LOG ROLE_PORT_ARRAY... -- program args
	local log=$1
	shift
	"$ROCEMU" run "$@" >"$log" 2>&1 &
	last=$!
}
# wait until LOG says "round 1 ok" (or PID ended); then a random 0-190 ms
in_stream() {
	while ! grep -q "round 1 ok" "$1" 2>/dev/null; do
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.02
	done
	sleep "0.$((RANDOM % 20))"
}

fail=0 crashes=0 done_kills=0 mid_stream=0
start $dir/a.log "${portA[@]}" -- timeout -s KILL $TIMEOUT "$checker" "${args[@]}" \
	-l $((kills + 1)) -p $pair_tcp
pa=$last
pair_wait_listen "" $pa $pair_tcp
for k in $(seq 1 "$kills"); do
	start $dir/b$k.log "${portB[@]}" -- "$checker" "${args[@]}" -p $pair_tcp 127.0.0.1
	pb=$last
	streamed=1
	in_stream $dir/b$k.log $pb || streamed=
	# killed before its last round: its port cannot have closed
	grep -q "round $((rounds - 1)) ok" $dir/b$k.log || mid_stream=$((mid_stream + 1))
	kill -KILL $pb 2>/dev/null
	wait $pb 2>/dev/null
	done_kills=$k
	sleep 0.1 # the survivor's PMD tears the connection down now
	if ! kill -0 $pa 2>/dev/null; then
		crashes=$((crashes + 1))
		echo "FAIL: kill $k: the survivor (server) died"
		break
	fi
	if [ -z "$streamed" ]; then
		echo "FAIL: client $k ended before its first round"; sed 's/^/  /' $dir/b$k.log
		fail=1
		break
	fi
done
if [ $fail = 0 ] && [ $crashes = 0 ]; then
	ROCEMU_MEMIF_DIRECT=0 start $dir/b.log "${portB[@]}" -- "$checker" "${args[@]}" \
		-p $pair_tcp 127.0.0.1
	wait $last || { echo "FAIL: the last client failed"; sed 's/^/  /' $dir/b.log; fail=1; }
fi
wait $pa
ra=$?
pa=
if [ $ra -ne 0 ]; then
	echo "FAIL: the server ended with status $ra"
	[ $ra -gt 128 ] && [ $ra -ne 137 ] && [ $crashes = 0 ] && crashes=1
	fail=1
fi
grep -q "^session $((kills + 1)): PASS" $dir/a.log ||
	{ echo "FAIL: the server's last session did not pass"; fail=1; }
grep -E "^session|memif|direct_resets|peer_|pmd_" $dir/a.log | sed 's/^/  server: /'
vanished=$(sed -n 's/^rocemu: .* port peer_vanished \([0-9]*\)$/\1/p' $dir/a.log | tail -1)
[ "${vanished:-0}" -ge "$mid_stream" ] ||
	{ echo "FAIL: the server saw ${vanished:-0} of $mid_stream peers killed mid-stream go"; fail=1; }
echo "kills: $done_kills of $kills, survivor crashes: $crashes"
[ $fail = 0 ] && echo "PASS: $kills peers killed outright, the survivor served the next one"
exit $fail
