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
TIMEOUT=${PAIR_TIMEOUT:-240}
. "$(dirname "$0")/pair_lib.sh"
prog=$1
shift
pair_need_prog "$prog" "ibverbs-utils / perftest"
pair_hosts pair local 10.88.$pair_net.1 10.88.$pair_net.2 24
sargv=("$prog" -p $pair_tcp "$@")
cargv=("$prog" -p $pair_tcp "$@" 127.0.0.1)
pair_run $pair_tcp ""
check_captures $dir/a.pcap $dir/b.pcap || fail=1
exit $fail
