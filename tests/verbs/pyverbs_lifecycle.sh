#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# pyverbs_lifecycle.py under `rocemu run --config`: memif server and client
# and a ring pair opened, closed and reopened by pyverbs in one process.
set -u
. "$(dirname "$0")/pair_lib.sh"
pair_need_prog "$PY"
"$PY" -c 'import pyverbs.device' 2>/dev/null || { echo "SKIP: pyverbs missing (python3-pyverbs)"; exit 77; }
dir=$(mktemp -d /tmp/rocemu-pylife-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/rocemu.conf" <<CONF
[srv]
port = memif:server:$dir/m.sock
ip = 10.82.0.1/24
[cli]
port = memif:client:$dir/m.sock
ip = 10.82.0.2/24
[ra]
port = ring:pylife:a
ip = 10.82.1.1/24
[rb]
port = ring:pylife:b
ip = 10.82.1.2/24
CONF
timeout 120 "$ROCEMU" run --no-check --config "$dir/rocemu.conf" -- \
	"$PY" "$SRC/tests/verbs/pyverbs_lifecycle.py" || { echo "FAIL: pyverbs lifecycle"; exit 1; }
echo "PASS: pyverbs opens, closes and reopens memif and ring devices"
