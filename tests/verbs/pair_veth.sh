#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Two hosts as two network namespaces joined by a veth pair: each runs an
# unmodified verbs program under `rocemu run` on an af_packet port over its
# veth end, sharing the address the kernel holds for the program's own TCP
# handshake (ARCHITECTURE.md §2).
#   pair_veth.sh [--mtu N --frame-len L] PROGRAM [ARGS...]
# (host B gets ARGS plus host A's address). Both must exit 0; both captures
# must decode in tshark without malformed or error frames, and every ICRC
# must verify independently (check_captures.sh).
# --mtu N: the veth link's MTU (jumbo frames); --frame-len L: the longest
# RoCEv2 frame in both captures must be exactly L bytes, and there must be
# many of them (the program's path MTU reached the wire).
set -u
TIMEOUT=${PAIR_TIMEOUT:-60}
. "$(dirname "$0")/pair_lib.sh"
mtu= frame_len=
while :; do
	case ${1:-} in
	--mtu) mtu=$2; shift 2 ;;
	--frame-len) frame_len=$2; shift 2 ;;
	*) break ;;
	esac
done
prog=$1
shift
pair_require "$prog"
pair_hosts vp veth 10.83.0.1 10.83.0.2 24 $mtu
sargv=("$prog" -p 18515 "$@")
cargv=("$prog" -p 18515 "$@" 10.83.0.1)
pair_run 18515 ""
check_captures $dir/a.pcap $dir/b.pcap || fail=1
if [ -n "$frame_len" ]; then
	for f in $dir/a.pcap $dir/b.pcap; do
		lens=$(timeout 60 tshark -n -r $f -Y 'udp.dstport == 4791' -T fields -e frame.len \
			2>/dev/null | sort -n | uniq -c | sort -k2 -n | tail -3 | tr '\n' ' ')
		echo "$(basename $f): the longest RoCEv2 frames (count length): $lens"
		set -- $lens
		while [ $# -gt 2 ]; do shift 2; done
		if [ "${2:-0}" -ne "$frame_len" ] || [ "${1:-0}" -lt 100 ]; then
			echo "expected many RoCEv2 frames of $frame_len bytes, the longest"
			fail=1
		fi
	done
fi
exit $fail
