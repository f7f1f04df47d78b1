#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Two hosts running an unmodified rdma_cm program pair under `rocemu run`
# (rocemu's librdmacm.so.1 beside its libibverbs.so.1):
#   rdmacm_pair.sh memif|veth [--daemon] SERVER-ARGV... -- CLIENT-ARGV...
# --daemon: the server never exits by itself (qperf): it is stopped once the
# client is done, and only the client's capture (complete, its process ended
# normally) is checked.
# In both argument lists @A@ becomes host A's address and @PORT@ a port of
# this run. Host A (the server) starts first; host B runs the client.
#  memif: the two processes share a fresh network namespace whose loopback
#         holds host A's address, so a program's own TCP control connection
#         to @A@ (qperf) reaches host A through the kernel while RDMA and
#         the CM MADs cross memif between the two rocemu ports;
#  veth:  two namespaces joined by a veth pair, af_packet ports sharing the
#         kernel's addresses (as pair_veth.sh).
# Both must exit 0; both captures must decode in tshark without malformed or
# error frames and every ICRC must verify (check_captures.sh); the captures
# must also show the CM exchange on QP1 (REQ, REP, RTU or SIDR_REQ/REP).
# --port-opts "OPTS" (before --daemon): more port options for both hosts
# (e.g. "--ecn off"). --dsfield 0xNN: the IPv4 DS field (DSCP << 2 | ECN) of
# the connection that set TOS: in both captures, every frame of the busiest
# QP in each direction (the data connection's; perftest's own control
# connection sets no TOS) and at least two CM MADs carry it, and every
# RoCEv2 frame carries its ECN bits. --check SCRIPT: a Python script (path
# from the source root) that checks more in the captures, given
# a.pcap b.pcap (tests/rdmacm/xrc_cm_capture.py: XRC's REQ/REP fields).
set -u
TIMEOUT=${PAIR_TIMEOUT:-120}
. "$(dirname "$0")/pair_lib.sh"
mode=$1
shift
daemon= port_opts= dsfield= check=
while :; do
	case ${1:-} in
	--port-opts) port_opts=$2; shift 2 ;;
	--check) check=$2; shift 2 ;;
	--dsfield) dsfield=$2; shift 2 ;;
	--daemon) daemon=1; shift ;;
	*) break ;;
	esac
done
server=() client=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do server+=("$1"); shift; done
[ $# -gt 0 ] && shift
client=("$@")
prog=${server[0]}

pair_require "$prog"
[ -e "$BUILD/verbs-provider/librdmacm.so.1" ] || { echo "SKIP: rocemu's librdmacm not built (librdmacm-dev missing)"; exit 77; }
port=$pair_tcp
if [ "$mode" = memif ]; then
	ipA=10.89.$pair_net.1 ipB=10.89.$pair_net.2
else
	ipA=10.84.0.1 ipB=10.84.0.2
fi
pair_hosts cm "$mode" $ipA $ipB 24
read -r -a extra <<<"$port_opts"
portA+=("${extra[@]}")
portB+=("${extra[@]}")
# every host prints its engine's and CM's counters when it closes: a failed
# run's log then says where frames went (ARP, peer-closed drops, CM drops)
export ROCEMU_STATS=1
subst() { local a; for a in "$@"; do a=${a//@A@/$ipA}; printf '%s\n' "${a//@PORT@/$port}"; done; }
mapfile -t sargv < <(subst "${server[@]}")
mapfile -t cargv < <(subst "${client[@]}")

# qperf (the only --daemon server) listens on TCP; the others only on rdma_cm,
# where a REQ sent before rdma_listen is not answered (only a process with a
# listener REJects) and is retransmitted ~1 s later: a short wait is safe.
pair_run "${daemon:+$port}" "$daemon"
if [ -n "$daemon" ]; then
	check_captures $dir/b.pcap || fail=1
else
	check_captures $dir/a.pcap $dir/b.pcap || fail=1
fi
# The connection was made by CM MADs on QP1, and tshark decodes them.
cm=$(cap_awk $dir/b.pcap '$DQP == 1 { print $MAD }' | sort | uniq -c | tr '\n' ' ')
echo "CM MADs in host B's capture (count attribute-id): $cm"
echo "$cm" | grep -qE '0x0010|0x0017' || { echo "no REQ/SIDR_REQ decoded on QP1"; fail=1; }
if [ -n "$check" ]; then
	"$PY" "$SRC/$check" $dir/a.pcap $dir/b.pcap || fail=1
fi
if [ -n "$dsfield" ]; then
	for f in $dir/a.pcap $dir/b.pcap; do
		cap_awk $f -v OFS='\t' '$UDP == 4791 { print $DS, $IP4, $DQP }' >$dir/ds.txt
		echo "$(basename $f): frames by (DS field, source, destination QP):"
		sort $dir/ds.txt | uniq -c | sed 's/^/  /'
		"$PY" "$SRC/tests/verbs/dsfield_check.py" $((dsfield)) $dir/ds.txt ||
			{ echo "expected DS field $dsfield (see above)"; fail=1; }
	done
fi
exit $fail
