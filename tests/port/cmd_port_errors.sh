#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# `rocemu port` as a user meets it: bad options fail with status 2 and one
# clear line naming the option; --help succeeds; a ping to an address nobody
# answers ends with "cannot resolve ADDR (ARP)" and status 1 instead of
# hanging; a ping to our own address is answered through loopback; --ip
# without a prefix takes the documented default.
# Uses a ring port (in-process), so it needs neither root nor a network.
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
exit $status
