#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Two hosts as two network namespaces joined by a veth pair: each runs an
# unmodified verbs program under `rocemu run` on an af_packet port over its
# veth end, sharing the address the kernel holds for the program's own TCP
# handshake (ARCHITECTURE.md §2).
#   pair_veth.sh PROGRAM [ARGS...]   (host B gets ARGS plus host A's address)
# Both must exit 0; both captures must decode in tshark without malformed or
# error frames, and every ICRC must verify independently (check_captures.sh).
set -u
TIMEOUT=${PAIR_TIMEOUT:-60}
. "$(dirname "$0")/pair_lib.sh"
prog=$1
shift
pair_require "$prog"
pair_hosts vp veth 10.83.0.1 10.83.0.2 24
sargv=("$prog" -p 18515 "$@")
cargv=("$prog" -p 18515 "$@" 10.83.0.1)
pair_run 18515 ""
check_captures $dir/a.pcap $dir/b.pcap || fail=1
exit $fail
