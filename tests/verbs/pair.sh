#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Two hosts over memif, each an unmodified verbs program under `rocemu run`:
#   pair.sh PROGRAM [ARGS...]
# Host A (memif server, 10.88.x.1) runs PROGRAM ARGS, host B (memif client,
# 10.88.x.2) runs PROGRAM ARGS 127.0.0.1. Both must exit 0 within the
# timeout, and both captures must decode in tshark without a malformed frame
# or an error-level expert note, and with every RoCEv2 frame's ICRC verified
# independently (check_captures.sh, icrc_check.py).
set -u
BUILD=${ROCEMU_BUILD_DIR:?set by meson}
SRC=${ROCEMU_SOURCE_DIR:?set by meson}
ROCEMU=$BUILD/tools/rocemu
PY=${PYTHON:-/usr/bin/python3}
TIMEOUT=${PAIR_TIMEOUT:-240}
prog=$1
shift

command -v "$prog" >/dev/null || { echo "SKIP: $prog not installed (ibverbs-utils / perftest)"; exit 77; }
[ -x "$ROCEMU" ] || { echo "SKIP: $ROCEMU not built"; exit 77; }
if objdump -T "$BUILD/verbs-provider/libibverbs.so.1" 2>/dev/null | grep -q __asan_init; then
	echo "SKIP: sanitizer build: uninstrumented system programs cannot load an ASan libibverbs"
	echo "      (the provider runs under ASan/UBSan in verbs-args instead)"
	exit 77
fi

dir=$(mktemp -d /tmp/rocemu-pair-XXXXXX)
trap 'kill $pa 2>/dev/null; [ -n "${PAIR_KEEP:-}" ] || rm -rf "$dir"' EXIT
# a TCP port and subnet of our own, so parallel tests do not collide
tcp=$((20000 + ($$ % 20000)))
net=$((($$ % 200) + 20))

run_pair() {
	rm -f $dir/a.pcap $dir/b.pcap
	timeout -s KILL $TIMEOUT "$ROCEMU" run --port memif:server:$dir/m.sock --ip 10.88.$net.1/24 --capture $dir/a.pcap \
		-- "$prog" -p $tcp "$@" >$dir/a.log 2>&1 &
	pa=$!
	for _ in $(seq 100); do
		ss -ltn 2>/dev/null | grep -q ":$tcp " && break
		kill -0 $pa 2>/dev/null || break
		sleep 0.1
	done
	timeout -s KILL $TIMEOUT "$ROCEMU" run --port memif:client:$dir/m.sock --ip 10.88.$net.2/24 --capture $dir/b.pcap \
		-- "$prog" -p $tcp "$@" 127.0.0.1 >$dir/b.log 2>&1
	rb=$?
	wait $pa
	ra=$?
}
run_pair "$@"
echo "== host A ($prog $* ; exit $ra)"; cat $dir/a.log
echo "== host B ($prog $* 127.0.0.1 ; exit $rb)"; cat $dir/b.log
fail=0
[ $ra -eq 0 ] && [ $rb -eq 0 ] || fail=1
. "$SRC/tests/verbs/check_captures.sh"
check_captures $dir/a.pcap $dir/b.pcap || fail=1
exit $fail
