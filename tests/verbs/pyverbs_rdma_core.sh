#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# rdma-core's own Python tests (shipped by python3-pyverbs in
# /usr/share/doc/rdma-core/tests, gzipped) run unmodified under `rocemu run`
# against one rocemu device on an in-process ring:
#   pyverbs_rdma_core.sh WHAT COUNT TEST...
# WHAT names them in the messages, COUNT is how many tests the TEST names
# (unittest names: a module, class or method) must run, and all of them must
# pass: a skip counts as a failure. In make test:
#   memory windows (test_mr.MWTest, 7): type 1 through ibv_bind_mw, type 2
#     through IBV_WR_BIND_MW, WRITEs through them, invalidation by rebinding
#     (type 1), LOCAL_INV, the peer's SEND with Invalidate and ibv_dealloc_mw,
#     each followed by a "Remote access error"; a type 3 window refused;
#   memory regions (test_mr.MRTest, 5): ibv_rereg_mr of the access flags (the
#     peer's R_Key still works, or fails with "Remote access error" once
#     remote write is gone), of the PD and of the translation, each followed
#     by traffic, the QPs restated after the expected error; bad reg flags;
#   on-demand paging (15 of test_odp): RC SEND, WRITE, READ, both atomics and
#     SRQ receives, UD, XRC, implicit ODP, ibv_advise_mr prefetch (sync and
#     async, with and without page faults);
#   device memory (12): ibv_alloc_dm limits and comp_mask, copies to and from
#     it and their alignment, ibv_reg_dm_mr, SEND and WRITE traffic on it;
#   XRC (6 methods): an XRCD opened on a temporary file with O_CREAT, an XRC
#     SRQ with its CQ, XRC_RECV and XRC_SEND QPs; SEND and SEND with immediate
#     through ibv_wr_* with ibv_wr_set_xrc_srqn, both atomics, traffic polled
#     through an extended CQ and on on-demand-paging regions, every message
#     checked by the tests;
#   shared PD (test_shared_pd, 1): the context's cmd_fd dup'ed and imported
#     (ibv_import_device), its PD and MR imported by handle into the second
#     context, whose QP WRITEs to a peer and is written into through the
#     imported MR, then unimported.
set -u
what=$1 count=$2
shift 2
. "$(dirname "$0")/pair_lib.sh"
pair_need_prog "$PY"
"$PY" -c 'import pyverbs.device' 2>/dev/null || { echo "SKIP: pyverbs missing (python3-pyverbs)"; exit 77; }
tests=/usr/share/doc/rdma-core/tests
[ -e $tests/run_tests.py ] || { echo "SKIP: $tests/run_tests.py missing (python3-pyverbs)"; exit 77; }
dir=$(mktemp -d /tmp/rocemu-rdt-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cp -r $tests "$dir/tests"
gunzip -f "$dir"/tests/*.gz
cat >"$dir/rocemu.conf" <<CONF
[rdtdev]
port = ring:rdt$$:a
ip = 10.84.$(($$ % 200 + 20)).1/24
CONF
# Stopped 15 s before meson's limit with SIGABRT, which Python's
# faulthandler answers with every thread's Python stack: a hang then says
# which test and which verb it was in (meson's own kill leaves no log).
limit=$((${ROCEMU_TEST_TIMEOUT:-215} - 15))
PYTHONFAULTHANDLER=1 timeout -s ABRT -k 5 $limit "$ROCEMU" run --no-check \
	--config "$dir/rocemu.conf" -- \
	"$PY" "$dir/tests/run_tests.py" --dev rdtdev --gid 1 -v "$@" >"$dir/log" 2>&1
rc=$?
cat "$dir/log"
case $rc in
0) ;;
124 | 134) echo "FAIL: rdma-core's $what tests still running after $limit s (their stacks above)"; exit 1 ;;
*) echo "FAIL: rdma-core's $what tests exited $rc"; exit 1 ;;
esac
grep -Eq "^Ran $count tests? in" "$dir/log" || { echo "FAIL: expected $count tests to run"; exit 1; }
[ "$(tail -n 1 "$dir/log")" = "OK" ] || { echo "FAIL: not all passed (a skip counts as a failure)"; exit 1; }
echo "PASS: rdma-core's $count $what tests through rocemu's libibverbs"
