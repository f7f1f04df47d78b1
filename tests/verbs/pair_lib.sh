# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the tests that run unmodified programs under `rocemu run`
# (pair.sh, pair_veth.sh, rdmacm_pair.sh, launcher.sh, tests/lid/lid_pair.sh,
# tests/transport/peer_kill.sh): the build paths, prerequisites, the two
# hosts' network set-up, and running a server and a client. bash; set
# TIMEOUT (seconds a host may run) before pair_run.
BUILD=${ROCEMU_BUILD_DIR:?set by meson}
SRC=${ROCEMU_SOURCE_DIR:?set by meson}
ROCEMU=$BUILD/tools/rocemu
PY=${PYTHON:-/usr/bin/python3}
# a TCP port and a subnet octet (20..219) of this run, so parallel runs do
# not collide
pair_tcp=$((20000 + ($$ % 20000)))
pair_net=$((($$ % 200) + 20))

# pair_need_prog PROGRAM [PACKAGE]: skip (exit 77) unless PROGRAM and a
# non-sanitizer rocemu build (rocemu and its libibverbs) are there.
pair_need_prog() {
	command -v "$1" >/dev/null || { echo "SKIP: $1 not installed${2:+ ($2)}"; exit 77; }
	[ -x "$ROCEMU" ] || { echo "SKIP: $ROCEMU not built"; exit 77; }
	[ -e "$BUILD/verbs-provider/libibverbs.so.1" ] || { echo "SKIP: verbs provider not built"; exit 77; }
	if objdump -T "$BUILD/verbs-provider/libibverbs.so.1" 2>/dev/null | grep -q __asan_init; then
		echo "SKIP: sanitizer build: uninstrumented $1 cannot load an ASan libibverbs"
		echo "      (the provider runs under ASan/UBSan in verbs-args instead)"
		exit 77
	fi
}

# pair_require PROGRAM [PACKAGE]: pair_need_prog, plus root and iproute2
# (network namespaces).
pair_require() {
	[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
	command -v ip >/dev/null || { echo "SKIP: needs iproute2"; exit 77; }
	pair_need_prog "$@"
}

pair_cleanup() {
	[ -n "${pa:-}" ] && kill $pa 2>/dev/null
	[ -n "${A:-}" ] && ip netns del $A 2>/dev/null
	[ -n "${B:-}" ] && ip netns del $B 2>/dev/null
	[ -n "${PAIR_KEEP:-}" ] || rm -rf "$dir"
}

# on NS COMMAND...: COMMAND in network namespace NS, or here if NS is empty.
on() {
	local ns=$1
	shift
	if [ -n "$ns" ]; then ip netns exec "$ns" "$@"; else "$@"; fi
}

# pair_hosts TAG MODE IP_A IP_B PREFIX [MTU]: a work directory ($dir) and the
# two hosts, cleaned up at exit. Sets nsA, nsB and the port options portA,
# portB (arrays) for `rocemu run`.
#  local: both processes here (no namespace, no root), RDMA over memif; a
#         program's TCP reaches host A at 127.0.0.1;
#  memif: one fresh namespace for both processes, whose loopback holds IP_A
#         (a program's own TCP control connection reaches host A through the
#         kernel) while RDMA crosses memif between the two rocemu ports;
#  veth:  two namespaces joined by a veth pair; af_packet ports share the
#         kernel's addresses (ARCHITECTURE.md §2). PAIR_VETH_QUEUES=N gives
#         each end N queues.
pair_hosts() {
	local tag=$1 mode=$2 ipa=$3 ipb=$4 len=$5 mtu=${6:-}
	dir=$(mktemp -d /tmp/rocemu-$tag-XXXXXX)
	[ -n "${PAIR_KEEP:-}" ] && echo "files kept in $dir"
	trap pair_cleanup EXIT
	nsA= nsB=
	portA=(--port memif:server:$dir/m.sock --ip $ipa/$len ${mtu:+--mtu $mtu})
	portB=(--port memif:client:$dir/m.sock --ip $ipb/$len ${mtu:+--mtu $mtu})
	[ "$mode" = local ] && return
	A=${tag}A$$ B=${tag}B$$
	A=${A:0:10} B=${B:0:10}
	ip netns add $A || { echo "SKIP: cannot create network namespaces"; exit 77; }
	ip -n $A link set lo up
	if [ "$mode" = memif ]; then
		ip -n $A addr add $ipa/32 dev lo
		nsA=$A nsB=$A
		return
	fi
	ip netns add $B || { echo "SKIP: cannot create network namespaces"; exit 77; }
	# PAIR_VETH_QUEUES=N: N receive and transmit queues on each end
	local q=${PAIR_VETH_QUEUES:+numrxqueues $PAIR_VETH_QUEUES numtxqueues $PAIR_VETH_QUEUES}
	ip link add ${A}e $q netns $A type veth peer name ${B}e $q netns $B ||
		{ echo "SKIP: cannot create veth"; exit 77; }
	ip -n $B link set lo up
	for ns in $A $B; do ip netns exec $ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1; done
	if [ -n "$mtu" ]; then ip -n $A link set ${A}e mtu $mtu && ip -n $B link set ${B}e mtu $mtu; fi
	ip -n $A addr add $ipa/$len dev ${A}e && ip -n $A link set ${A}e up
	ip -n $B addr add $ipb/$len dev ${B}e && ip -n $B link set ${B}e up
	nsA=$A nsB=$B
	portA=(--port af_packet:${A}e --ip $ipa/$len)
	portB=(--port af_packet:${B}e --ip $ipb/$len)
}

# pair_wait_listen NS PID TCP_PORT: wait until something in namespace NS
# listens on TCP_PORT, or process PID has ended. No deadline: a loaded
# machine only makes this slower (the hosts' own timeout catches a hang).
pair_wait_listen() {
	while ! on "$1" ss -ltn 2>/dev/null | grep -q ":$3 "; do
		kill -0 $2 2>/dev/null || break
		sleep 0.1
	done
}

# pair_run TCP_PORT DAEMON: host A runs sargv, host B cargv (arrays), each
# under `rocemu run` with a capture ($dir/a.pcap, b.pcap) and a log. Host B
# starts once host A listens on TCP_PORT, or (TCP_PORT empty) shortly after
# host A's port is up. DAEMON non-empty: host A never exits by itself (qperf's
# server); still running after the client is its success, then it is
# stopped. Sets ra and rb (exit statuses) and fail (1 unless both are 0),
# and prints both logs. A test that defines pair_before_b has it called once
# host A is ready, before host B starts (dpdk_tap_pair.sh wires up the tap
# host A's port created).
pair_run() {
	local tcp=$1 daemon=$2
	on "$nsA" timeout -s KILL $TIMEOUT "$ROCEMU" run "${portA[@]}" --capture $dir/a.pcap \
		-- "${sargv[@]}" >$dir/a.log 2>&1 &
	pa=$!
	if [ -n "$tcp" ]; then
		pair_wait_listen "$nsA" $pa $tcp
	else
		# host A's port is open once its capture exists (a memif server's
		# socket is there then). An rdma_cm client may still come before
		# the server listens: its REQ is retransmitted (CM timers), so no
		# pause is added here.
		while [ ! -e $dir/a.pcap ]; do
			kill -0 $pa 2>/dev/null || break
			sleep 0.1
		done
	fi
	if declare -F pair_before_b >/dev/null; then pair_before_b; fi
	on "$nsB" timeout -s KILL $TIMEOUT "$ROCEMU" run "${portB[@]}" --capture $dir/b.pcap \
		-- "${cargv[@]}" >$dir/b.log 2>&1
	rb=$?
	if [ -n "$daemon" ]; then
		if kill -0 $pa 2>/dev/null; then
			# still serving, as it should: stop the program itself ($pa is
			# the shell around `timeout`, which hands SIGTERM on) and take
			# its status: ended by that SIGTERM (143) or cleanly is fine, a
			# crash or an error exit on the way out is not
			pkill -TERM -P $pa 2>/dev/null
			wait $pa
			ra=$?
			case $ra in 0 | 143) ra=0 ;; *) echo "host A's daemon ended with status $ra" ;; esac
		else
			wait $pa; ra=$?; [ $ra -eq 0 ] && ra=1
		fi
	else
		wait $pa
		ra=$?
	fi
	pa=
	echo "== host A (${sargv[*]} ; exit $ra)"; cat $dir/a.log
	echo "== host B (${cargv[*]} ; exit $rb)"; cat $dir/b.log
	fail=0
	[ $ra -eq 0 ] && [ $rb -eq 0 ] || fail=1
}

. "$(dirname "${BASH_SOURCE[0]}")/check_captures.sh"
