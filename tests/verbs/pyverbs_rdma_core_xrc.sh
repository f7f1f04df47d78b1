#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# rdma-core's own XRC tests (shipped by python3-pyverbs in
# /usr/share/doc/rdma-core/tests, gzipped) run unmodified under `rocemu run`
# against one rocemu device: pyverbs' XRCD (a domain opened on a temporary
# file with O_CREAT), an XRC SRQ with its CQ, XRC_RECV QPs on the domain and
# XRC_SEND QPs; SEND and SEND with immediate through ibv_wr_* with
# ibv_wr_set_xrc_srqn, both atomics, traffic polled through an extended CQ
# and traffic on on-demand-paging regions, every message checked by the
# tests. All must pass: a skip is a failure.
set -u
. "$(dirname "$0")/pair_lib.sh"
pair_need_prog "$PY"
"$PY" -c 'import pyverbs.xrcd' 2>/dev/null || { echo "SKIP: pyverbs missing (python3-pyverbs)"; exit 77; }
tests=/usr/share/doc/rdma-core/tests
[ -e $tests/run_tests.py ] || { echo "SKIP: $tests/run_tests.py missing (python3-pyverbs)"; exit 77; }
dir=$(mktemp -d /tmp/rocemu-rdtxrc-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cp -r $tests "$dir/tests"
gunzip -f "$dir"/tests/*.gz
cat >"$dir/rocemu.conf" <<CONF
[xrcdev]
port = ring:rdtxrc$$:a
ip = 10.84.0.1/24
CONF
names=(test_qpex.QpExTestCase.test_qp_ex_xrc_send test_qpex.QpExTestCase.test_qp_ex_xrc_send_imm
	test_atomic.AtomicTest.test_xrc_atomic_fetch_and_add
	test_atomic.AtomicTest.test_xrc_atomic_cmp_and_swap
	test_cqex.CqExTestCase.test_xrc_traffic_cq_ex test_odp.OdpTestCase.test_odp_xrc_traffic)
timeout 200 "$ROCEMU" run --no-check --config "$dir/rocemu.conf" -- \
	"$PY" "$dir/tests/run_tests.py" --dev xrcdev --gid 1 -v "${names[@]}" >"$dir/log" 2>&1
rc=$?
cat "$dir/log"
[ $rc = 0 ] || { echo "FAIL: rdma-core's XRC tests exited $rc"; exit 1; }
grep -q "^Ran ${#names[@]} tests" "$dir/log" || { echo "FAIL: expected ${#names[@]} tests to run"; exit 1; }
[ "$(tail -n 1 "$dir/log")" = "OK" ] || { echo "FAIL: not all passed (a skip counts as a failure)"; exit 1; }
echo "PASS: rdma-core's ${#names[@]} XRC tests through rocemu's libibverbs"
