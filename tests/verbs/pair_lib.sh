# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the two-host program tests (pair_veth.sh, rdmacm_pair.sh,
# tests/lid/lid_pair.sh): prerequisites, the two hosts' network set-up, and
# running a server and a client under `rocemu run`. bash; needs BUILD,
# ROCEMU and TIMEOUT set.

# pair_require PROGRAM: skip (exit 77) unless root, iproute2, PROGRAM and a
# non-sanitizer rocemu build are there.
pair_require() {
	[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
	command -v ip >/dev/null || { echo "SKIP: needs iproute2"; exit 77; }
	command -v "$1" >/dev/null || { echo "SKIP: $1 not installed"; exit 77; }
	[ -x "$ROCEMU" ] || { echo "SKIP: $ROCEMU not built"; exit 77; }
	if objdump -T "$BUILD/verbs-provider/libibverbs.so.1" 2>/dev/null | grep -q __asan_init; then
		echo "SKIP: sanitizer build: uninstrumented $1 cannot load an ASan libibverbs"
		exit 77
	fi
}

pair_cleanup() {
	[ -n "${pa:-}" ] && kill $pa 2>/dev/null
	ip netns del $A 2>/dev/null
	ip netns del $B 2>/dev/null
	[ -n "${PAIR_KEEP:-}" ] || rm -rf "$dir"
}

# pair_hosts TAG MODE IP_A IP_B PREFIX [MTU]: a work directory ($dir) and the
# two hosts, cleaned up at exit. Sets nsA, nsB and the port options portA,
# portB (arrays) for `rocemu run`.
#  memif: one fresh namespace for both processes, whose loopback holds IP_A
#         (a program's own TCP control connection reaches host A through the
#         kernel) while RDMA crosses memif between the two rocemu ports;
#  veth:  two namespaces joined by a veth pair; af_packet ports share the
#         kernel's addresses (ARCHITECTURE.md §2).
pair_hosts() {
	local tag=$1 mode=$2 ipa=$3 ipb=$4 len=$5 mtu=${6:-}
	dir=$(mktemp -d /tmp/rocemu-$tag-XXXXXX)
	[ -n "${PAIR_KEEP:-}" ] && echo "files kept in $dir"
	A=${tag}A$$ B=${tag}B$$
	A=${A:0:10} B=${B:0:10}
	trap pair_cleanup EXIT
	ip netns add $A || { echo "SKIP: cannot create network namespaces"; exit 77; }
	ip -n $A link set lo up
	if [ "$mode" = memif ]; then
		ip -n $A addr add $ipa/32 dev lo
		nsA=$A nsB=$A
		portA=(--port memif:server:$dir/m.sock --ip $ipa/$len ${mtu:+--mtu $mtu})
		portB=(--port memif:client:$dir/m.sock --ip $ipb/$len ${mtu:+--mtu $mtu})
		return
	fi
	ip netns add $B || { echo "SKIP: cannot create network namespaces"; exit 77; }
	ip link add ${A}e netns $A type veth peer name ${B}e netns $B || { echo "SKIP: cannot create veth"; exit 77; }
	ip -n $B link set lo up
	for ns in $A $B; do ip netns exec $ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1; done
	if [ -n "$mtu" ]; then ip -n $A link set ${A}e mtu $mtu && ip -n $B link set ${B}e mtu $mtu; fi
	ip -n $A addr add $ipa/$len dev ${A}e && ip -n $A link set ${A}e up
	ip -n $B addr add $ipb/$len dev ${B}e && ip -n $B link set ${B}e up
	nsA=$A nsB=$B
	portA=(--port af_packet:${A}e --ip $ipa/$len)
	portB=(--port af_packet:${B}e --ip $ipb/$len)
}

# pair_run TCP_PORT DAEMON: host A runs sargv, host B cargv (arrays), each
# under `rocemu run` with a capture ($dir/a.pcap, b.pcap) and a log. Host B
# starts once host A listens on TCP_PORT, or (TCP_PORT empty) shortly after
# host A's port is up. DAEMON non-empty: host A never exits by itself (qperf's
# server); still running after the client is its success, then it is
# stopped. Sets ra and rb (exit statuses) and prints both logs.
pair_run() {
	local tcp=$1 daemon=$2
	ip netns exec $nsA timeout -s KILL $TIMEOUT "$ROCEMU" run "${portA[@]}" --capture $dir/a.pcap \
		-- "${sargv[@]}" >$dir/a.log 2>&1 &
	pa=$!
	for _ in $(seq 100); do
		if [ -n "$tcp" ]; then
			ip netns exec $nsA ss -ltn 2>/dev/null | grep -q ":$tcp " && break
		elif [ -e $dir/a.pcap ]; then
			sleep 0.5
			break
		fi
		kill -0 $pa 2>/dev/null || break
		sleep 0.1
	done
	ip netns exec $nsB timeout -s KILL $TIMEOUT "$ROCEMU" run "${portB[@]}" --capture $dir/b.pcap \
		-- "${cargv[@]}" >$dir/b.log 2>&1
	rb=$?
	if [ -n "$daemon" ]; then
		if kill -0 $pa 2>/dev/null; then ra=0; else wait $pa; ra=$?; [ $ra -eq 0 ] && ra=1; fi
		kill $pa 2>/dev/null
		wait $pa 2>/dev/null
	else
		wait $pa
		ra=$?
	fi
	pa=
	echo "== host A (${sargv[*]} ; exit $ra)"; cat $dir/a.log
	echo "== host B (${cargv[*]} ; exit $rb)"; cat $dir/b.log
}

. "$(dirname "${BASH_SOURCE[0]}")/check_captures.sh"
