#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# rdma-core's own memory window tests (test_mr.MWTest, shipped by
# python3-pyverbs in /usr/share/doc/rdma-core/tests, gzipped) run unmodified
# under `rocemu run` against one rocemu device: pyverbs' MW, MWBindInfo and
# MWBind; type 1 through ibv_bind_mw, type 2 through IBV_WR_BIND_MW; WRITEs
# through them; invalidation by rebinding (type 1), LOCAL_INV, the peer's
# SEND with Invalidate, ibv_dealloc_mw, each followed by a "Remote access
# error"; a window of type 3 refused. All 7 must pass: a skip is a failure.
set -u
. "$(dirname "$0")/pair_lib.sh"
pair_need_prog "$PY"
"$PY" -c 'import pyverbs.mr' 2>/dev/null || { echo "SKIP: pyverbs missing (python3-pyverbs)"; exit 77; }
tests=/usr/share/doc/rdma-core/tests
[ -e $tests/run_tests.py ] || { echo "SKIP: $tests/run_tests.py missing (python3-pyverbs)"; exit 77; }
dir=$(mktemp -d /tmp/rocemu-rdtmw-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cp -r $tests "$dir/tests"
gunzip -f "$dir"/tests/*.gz
cat >"$dir/rocemu.conf" <<CONF
[mwdev]
port = ring:rdtmw$$:a
ip = 10.83.0.1/24
CONF
timeout 150 "$ROCEMU" run --no-check --config "$dir/rocemu.conf" -- \
	"$PY" "$dir/tests/run_tests.py" --dev mwdev --gid 1 -v test_mr.MWTest >"$dir/log" 2>&1
rc=$?
cat "$dir/log"
[ $rc = 0 ] || { echo "FAIL: rdma-core's MWTest exited $rc"; exit 1; }
grep -q '^Ran 7 tests' "$dir/log" || { echo "FAIL: expected 7 tests to run"; exit 1; }
[ "$(tail -n 1 "$dir/log")" = "OK" ] || { echo "FAIL: not all passed (a skip counts as a failure)"; exit 1; }
echo "PASS: rdma-core's 7 memory window tests through rocemu's libibverbs"
