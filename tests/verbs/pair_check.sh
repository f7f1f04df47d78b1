#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Two hosts, each running pair_check (tests/verbs/pair_check.c: a verbs
# program that checks every byte it moves) under `rocemu run`:
#   pair_check.sh PAIR_CHECK [OPTIONS] -- PAIR_CHECK_ARGS...
# Options:
#   --link memif|veth|xdp|v6   memif (default): two processes here over memif;
#          veth: two namespaces, af_packet ports sharing the kernel's
#          addresses; xdp: two namespaces, af_xdp ports that own their
#          addresses (the kernel has none: the programs meet on a Unix
#          socket); v6: memif with an IPv6 address as well, RoCE over its GID
#   --client-opt OPT   a port option for host B's `rocemu run` (repeatable),
#          e.g. --fault-drop=tx:20000
#   --expect-loss      host A must report lost UC messages (uc-loss under faults)
#   --kill-first-client   host A serves two clients; the first is killed
#          with SIGKILL in the middle of its rounds, the second must pass
#          (memif: the link goes down and comes back under RDMA traffic)
#   --memif-zc     memif: host B's client asks for zero-copy (ROCEMU_MEMIF_ZERO_COPY=1)
# Both must exit 0; both captures must decode cleanly in tshark and every
# ICRC must verify (check_captures.sh). On memif, the copies the PMDs made
# must be those of the mode: host B (the memif client) none in zero-copy,
# every frame in copy mode; host A (the server) every frame. With memif's
# direct channel (the default; ROCEMU_MEMIF_DIRECT=0 turns it off), frames
# must have crossed each way at each end, and RoCE frames over the channel.
set -u
TIMEOUT=${PAIR_TIMEOUT:-300}
. "$(dirname "$0")/pair_lib.sh"
checker=$1
shift
link=memif copts=() expect_loss= kill_first= memif_zc=
while [ $# -gt 0 ] && [ "$1" != -- ]; do
	case $1 in
	--link) link=$2; shift ;;
	--client-opt) copts+=("$2"); shift ;;
	--expect-loss) expect_loss=1 ;;
	--kill-first-client) kill_first=1 ;;
	--memif-zc) memif_zc=1 ;;
	*) echo "usage: $0 PAIR_CHECK [--link L] [--client-opt O] [--expect-loss] [--kill-first-client] [--memif-zc] -- ARGS"; exit 2 ;;
	esac
	shift
done
[ $# -gt 0 ] && shift
args=("$@")

[ -x "$checker" ] || { echo "SKIP: $checker not built"; exit 77; }
case $link in
memif|v6)
	pair_need_prog "$checker"
	if [ $link = v6 ]; then
		pair_hosts pc local 10.87.$pair_net.1 10.87.$pair_net.2 24
		portA+=(--ip fd00:87:$pair_net::1/64)
		portB+=(--ip fd00:87:$pair_net::2/64)
	else
		pair_hosts pc local 10.87.$pair_net.1 10.87.$pair_net.2 24
	fi
	srv=(-p $pair_tcp) cli=(-p $pair_tcp 127.0.0.1) ;;
veth)
	pair_require "$checker"
	pair_hosts pcv veth 10.86.0.1 10.86.0.2 24
	srv=(-p 18601) cli=(-p 18601 10.86.0.1) ;;
xdp)
	pair_require "$checker"
	# a machine without af_xdp skips; after this any af_xdp failure fails
	. "$(dirname "$0")/../port/port_lib.sh"
	port_need_af_xdp
	pair_hosts pcx veth 10.85.0.1 10.85.0.2 24
	# rocemu owns the addresses: the kernel keeps none on the veth ends
	for ns in $nsA $nsB; do ip -n $ns addr flush dev ${ns}e; done
	portA=(--port af_xdp:${nsA}e --ip 10.85.0.1/24)
	portB=(--port af_xdp:${nsB}e --ip 10.85.0.2/24)
	srv=(-u $dir/oob.sock) cli=(-u $dir/oob.sock -c) ;;
*) echo "unknown link $link"; exit 2 ;;
esac
export ROCEMU_STATS=1
# zero-copy is the PMD's: the direct channel (the default) would take its place
[ -n "$memif_zc" ] && export ROCEMU_MEMIF_DIRECT=0

# host NS LOG CAPTURE: pair_check "${hargs[@]}" under `rocemu run "${hport[@]}"`
host() {
	on "$1" timeout -s KILL $TIMEOUT "$ROCEMU" run "${hport[@]}" --capture $3 -- "$checker" \
		"${hargs[@]}" >$2 2>&1
}

sessions=1
[ -n "$kill_first" ] && sessions=2
hport=("${portA[@]}") hargs=("${args[@]}" -l $sessions "${srv[@]}")
host "$nsA" $dir/a.log $dir/a.pcap &
pa=$!
ra= rb=
if [ -n "$kill_first" ]; then
	# the first client: killed once it is well into its rounds
	# started directly (no shell in between): $pb is the program itself
	nsexec=()
	[ -n "$nsB" ] && nsexec=(ip netns exec "$nsB")
	"${nsexec[@]}" "$ROCEMU" run "${portB[@]}" "${copts[@]}" -- "$checker" "${args[@]}" \
		"${cli[@]}" >$dir/b1.log 2>&1 &
	pb=$!
	while ! grep -q "round 3 ok" $dir/b1.log 2>/dev/null; do
		kill -0 $pb 2>/dev/null || break
		sleep 0.05
	done
	kill -KILL $pb 2>/dev/null
	wait $pb 2>/dev/null
	grep -q "round 3 ok" $dir/b1.log || { echo "FAIL: the first client never reached round 3"; cat $dir/b1.log; }
fi
hport=("${portB[@]}" "${copts[@]}") hargs=("${args[@]}" "${cli[@]}")
if [ -n "$memif_zc" ]; then
	ROCEMU_MEMIF_ZERO_COPY=1 host "$nsB" $dir/b.log $dir/b.pcap
else
	host "$nsB" $dir/b.log $dir/b.pcap
fi
rb=$?
# a client that failed leaves the server waiting for it: stop the server
[ $rb -ne 0 ] && { pkill -TERM -P $pa; kill -TERM $pa; } 2>/dev/null
wait $pa
ra=$?
pa=
echo "== host A (exit $ra)"; cat $dir/a.log
[ -n "$kill_first" ] && { echo "== host B, first client (killed)"; cat $dir/b1.log; }
echo "== host B (exit $rb)"; cat $dir/b.log
fail=0
[ $ra -eq 0 ] && [ $rb -eq 0 ] || fail=1
if [ -n "$kill_first" ]; then
	grep -q "round 3 ok" $dir/b1.log || fail=1
	grep -q "^session 2: PASS" $dir/a.log || { echo "FAIL: the second client's session"; fail=1; }
fi
if [ -n "$expect_loss" ]; then
	lost=$(sed -n 's/.* \([0-9]*\) lost$/\1/p' $dir/a.log)
	[ "${lost:-0}" -gt 0 ] || { echo "FAIL: faults injected, yet no UC message lost"; fail=1; }
	grep -qE "rocemu: .* port (drop_fault_tx_drop|fault_tx_corrupted) [1-9]" $dir/b.log ||
		{ echo "FAIL: host B's fault injector counted nothing"; fail=1; }
fi
if [ $link = v6 ]; then
	# RoCE over IPv6 only: the data frames must be IPv6
	n6=$(cap_awk $dir/b.pcap '$IP6 != "" && $UDP == 4791' | wc -l)
	n4=$(cap_awk $dir/b.pcap '$IP4 != "" && $UDP == 4791' | wc -l)
	echo "RoCEv2 frames in host B's capture: $n6 over IPv6, $n4 over IPv4"
	[ "$n6" -gt 0 ] && [ "$n4" -eq 0 ] || { echo "FAIL: RoCE did not run over IPv6 only"; fail=1; }
fi
if [ $link = memif ] || [ $link = v6 ]; then
	# where the frames went (ROCEMU_STATS=1 at exit): "rocemu: DEV port NAME VALUE"
	copied() { sed -n "s/^rocemu: .* port $2 \([0-9]*\)$/\1/p" $1 | tail -1; }
	if [ "${ROCEMU_MEMIF_DIRECT:-1}" != 0 ]; then
		# memif's direct channel (the default on both ends): RoCE frames
		# cross it without a PMD copy, other frames (ARP) are copied by
		# it, and the PMD carries only what went before it was up. Each
		# end must have sent and received, by some path; and RoCE frames
		# must have crossed the channel (one way at least: a UC stream
		# has no ACKs).
		roce=0
		for h in a b; do
			for f in tx rx; do
				d=$(copied $dir/$h.log direct_${f}_bytes) c=$(copied $dir/$h.log direct_copy_${f}_bytes)
				p=$(copied $dir/$h.log pmd_copy_${f}_bytes)
				echo "host $h $f: direct channel ${d:-0} bytes, its copies ${c:-0}, PMD copies ${p:-0}"
				[ $((${d:-0} + ${c:-0} + ${p:-0})) -gt 0 ] ||
					{ echo "FAIL: host $h: no frame crossed ($f)"; fail=1; }
			done
			# RoCE frames wrapped in place, or copied out (small-frame mode)
			r=$(copied $dir/$h.log direct_rx_bytes) s=$(copied $dir/$h.log direct_small_rx_bytes)
			roce=$((roce + ${r:-0} + ${s:-0}))
		done
		[ $roce -gt 0 ] || { echo "FAIL: no RoCE frame crossed the direct channel"; fail=1; }
	else
		for f in tx rx; do
			a=$(copied $dir/a.log pmd_copy_${f}_bytes) b=$(copied $dir/b.log pmd_copy_${f}_bytes)
			echo "memif PMD copies ($f): server ${a:-0} bytes, client ${b:-0} bytes"
			[ "${a:-0}" -gt 0 ] || { echo "FAIL: the memif server's PMD copied nothing ($f)"; fail=1; }
			if [ -n "$memif_zc" ]; then
				[ -z "$b" ] || { echo "FAIL: the memif client's PMD copied in zero-copy ($f)"; fail=1; }
			else
				[ "${b:-0}" -gt 0 ] || { echo "FAIL: client in copy mode, no copies counted ($f)"; fail=1; }
			fi
		done
	fi
	# copy mode, the default, is not announced; zero-copy asked for and
	# not possible would be ("memif client on SOCK: copy mode (WHY)")
	if grep -q "memif client on .*: copy mode" $dir/b.log; then
		echo "FAIL: a copy-mode notice: $(grep "memif client on" $dir/b.log)"; fail=1
	fi
fi
check_captures $dir/a.pcap $dir/b.pcap || fail=1
exit $fail
