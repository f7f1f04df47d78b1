#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# `rocemu port` as a user meets it: bad options fail with status 2 and one
# clear line naming the option; --help succeeds; a ping to an address nobody
# answers ends with "cannot resolve ADDR (ARP)" and status 1 instead of
# hanging; a ping to our own address is answered through loopback; --ip
# without a prefix takes the documented default. memif (issue 20.3, 20.4): a
# client with no server says once that it waits, then fails with one line
# (ECONNREFUSED with --memif-wait 0, ETIMEDOUT after a wait) and no line of
# DPDK's; a second server on a socket path another process listens on fails
# with "socket path in use by another server".
# Uses ring and memif ports, so it needs neither root nor a network.
#
# usage: cmd_port_errors.sh ROCEMU
set -u
rocemu=${1:?usage: $0 ROCEMU}
status=0

expect_error() { # OPTION-NAME ARGS...
	local name=$1 out rc
	shift
	out=$("$rocemu" port "$@" 2>&1 >/dev/null)
	rc=$?
	if [ $rc != 2 ] || [ "$(printf '%s\n' "$out" | wc -l)" != 1 ] || ! grep -q -- "$name" <<<"$out"; then
		echo "FAIL: rocemu port $*: status $rc, message: $out"
		status=1
	else
		echo "ok: rocemu port $* -> $out"
	fi
}

expect_error "--ip" --port ring:e1:a --ip 10.0.0.1/33
expect_error "--mac" --port ring:e1:a --mac 01:02:03:04:05:06
expect_error "--mtu" --port ring:e1:a --mtu 12
expect_error "--port" --port nonsense:x
expect_error "--port" --ip 10.0.0.1/24
expect_error "--frobnicate" --port ring:e1:a --frobnicate 1
expect_error "--count" --port ring:e1:a --ping 10.0.0.2 --count many
expect_error "--capture-filter" --port ring:e1:a --capture-filter arp
expect_error "--progress-cpu" --port ring:e1:a --progress-cpu 1023
expect_error "--progress-cpu" --port ring:e1:a --progress-cpu one

"$rocemu" port --help | grep -q -- "--capture-rotate" || { echo "FAIL: --help"; status=1; }

# expect_run WHAT STATUS PATTERN... -- ARGS...: `rocemu port ARGS` (30 s at
# most) exits with STATUS and its output matches every extended regex PATTERN.
expect_run() {
	local what=$1 want=$2 out rc p ok=1
	shift 2
	local pats=()
	while [ "$1" != -- ]; do pats+=("$1"); shift; done
	shift
	out=$(timeout 30 "$rocemu" port "$@" 2>&1)
	rc=$?
	[ $rc = "$want" ] || ok=0
	for p in "${pats[@]}"; do grep -qE -- "$p" <<<"$out" || ok=0; done
	if [ $ok = 1 ]; then
		echo "ok: $what"
	else
		echo "FAIL: $what: status $rc"
		echo "$out"
		status=1
	fi
}

expect_run "unanswered ping ends with 'cannot resolve 10.0.0.9 (ARP)' after 2 ARP requests" 1 \
	"cannot resolve 10\.0\.0\.9 \(ARP\)" "^arp_requests_tx +2$" -- \
	--port ring:e2:a --ip 10.0.0.1/24 --arp-timeout 50 --arp-retries 2 --ping 10.0.0.9 --count 1
# --ip without a prefix: one rule for `port`, `run` and the config file
# (/24 for IPv4, /64 for IPv6), said in both commands' --help
expect_run "--ip without a prefix takes /24 (IPv4) and /64 (IPv6)" 0 \
	"gid\[1\] 10\.0\.0\.1/24 " "gid\[2\] fd00::1/64 " "gid\[3\] 10\.0\.1\.1/16 " -- \
	--port ring:e4:a --ip 10.0.0.1 --ip fd00::1 --ip 10.0.1.1/16 --duration 1
for cmd in port run; do
	"$rocemu" $cmd --help | grep -q -- "--ip ADDR\[/PREFIX\]" &&
		"$rocemu" $cmd --help | grep -q "PREFIX defaults to 24 for IPv4, 64 for IPv6" &&
		echo "ok: rocemu $cmd --help says ADDR[/PREFIX] and the default" ||
		{ echo "FAIL: rocemu $cmd --help on --ip"; status=1; }
done
expect_run "ping to our own address answered through loopback" 0 \
	"2/2 echo requests to 10.0.0.1 answered" "^loopback_frames +4$" -- \
	--port ring:e3:a --ip 10.0.0.1/24 --ping 10.0.0.1 --count 2
# memif without a server: nothing from DPDK, one notice, one error
work=$(mktemp -d /tmp/rocemu-cmdport-XXXXXX)
trap 'kill $srv 2>/dev/null; wait $srv 2>/dev/null; rm -rf "$work"' EXIT
srv=
expect_memif() { # WHAT WAIT_MS WAITING_LINES ERROR_PATTERN
	local out rc t0 t1
	t0=$(date +%s%N)
	out=$(timeout 30 "$rocemu" port --port "memif:client:$work/none.sock" --ip 10.0.9.2/24 \
		--memif-wait "$2" 2>&1)
	rc=$?
	t1=$(date +%s%N)
	if [ $rc = 1 ] && [ "$(grep -c "waiting for a memif server on $work/none.sock" <<<"$out")" = "$3" ] &&
		grep -qE -- "$4" <<<"$out" && ! grep -qiE "memif_|Failed to connect|EAL" <<<"$out" &&
		[ $(((t1 - t0) / 1000000)) -ge "$2" ] && [ "$(wc -l <<<"$out")" -le 2 ]; then
		echo "ok: $1"
	else
		echo "FAIL: $1: status $rc after $(((t1 - t0) / 1000000)) ms:"
		echo "$out"
		status=1
	fi
}
expect_memif "memif client, no server, --memif-wait 0: refused at once" 0 0 \
	"no memif server listening on .*none\.sock"
expect_memif "memif client, no server, --memif-wait 700: one notice, then timed out" 700 1 \
	"no memif server on .*none\.sock within 700 ms"
# a server, then a second one on the same path in another process
"$rocemu" port --port "memif:server:$work/s.sock" --ip 10.0.8.1/24 >"$work/srv.out" 2>&1 &
srv=$!
for _ in $(seq 100); do grep -q "link" "$work/srv.out" && break; sleep 0.1; done
expect_run "a second memif server on one socket path: 'socket path in use by another server'" 1 \
	"^rocemu port: memif:server:.*/s\.sock: socket path in use by another server$" -- \
	--port "memif:server:$work/s.sock" --ip 10.0.8.2/24
if out=$(timeout 30 "$rocemu" port --port "memif:server:$work/s.sock" --ip 10.0.8.2/24 2>&1) ||
	grep -qiE "Address already in use|memif_socket|EAL" <<<"$out"; then
	echo "FAIL: the second server's output has DPDK's lines: $out"
	status=1
fi
exit $status
