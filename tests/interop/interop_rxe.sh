#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# rocemu against Linux Soft-RoCE (rdma_rxe in a qemu guest, bed.sh): every
# program of the matrix in both directions (rocemu server, rxe client and the
# reverse), over IPv4 and, where the program takes an IPv6 GID or address,
# IPv6; rsockets; then the restart cases (one rocemu process after another
# against the same rxe, connecting through rdma_cm and with plain verbs,
# client and server) and the REJ cases.
# docs/interop.md.
#   interop_rxe.sh [REGEX]   only the cases whose name matches REGEX (or
#                            $ROCEMU_INTEROP_CASES: meson test --suite interop)
# Each case passes when both programs exit 0 (a daemon server: is still
# running when the client is done) and rocemu's capture of it decodes in
# tshark without a malformed frame or an error, every ICRC verifies
# (check_captures.sh) and `rocemu inspect --check` finds no violation.
# Prints one line per case and a summary; exits 1 if any case failed.
set -u
. "$(dirname "$0")/bed.sh"
. "$SRC/tests/verbs/check_captures.sh"
filter=${1:-${ROCEMU_INTEROP_CASES:-.}}
T=${ROCEMU_INTEROP_TIMEOUT:-90} # seconds a program may run
bed_up

passed=() failed=() captures=()
ncase=0
# rxe sends RoCEv2 over IPv6 with a zero UDP checksum, which RFC 6935/6936
# allow for tunnels (docs/interop.md); tshark flags it unless told so.
CHECK_TSHARK_OPTS="-o udp.ignore_ipv6_zero_checksum:TRUE"

# subst SIDE FAMILY ARG: the argument with the placeholders of SIDE (rxe or
# emu) filled in: @G@ the side's GID index of the family, @S@ the server's
# address of the family, @S4@ its IPv4 address, @P@ the case's TCP/rdma_cm port.
subst() {
	local side=$1 fam=$2 a=$3 g s
	if [ "$side" = rxe ]; then
		g=$rxe_g4
		[ "$fam" = 6 ] && g=$rxe_g6
	else
		g=1
		[ "$fam" = 6 ] && g=2
	fi
	s=$srv4
	[ "$fam" = 6 ] && s=$srv6
	a=${a//@G@/$g}
	a=${a//@S4@/$srv4}
	a=${a//@S@/$s}
	printf '%s' "${a//@P@/$port}"
}

# emu_prefix CAPTURE: the command (array $emu) that runs a program under `rocemu
# run` on the bed's veth, at most $T seconds (ip netns exec execs timeout: in
# the background, $! is timeout's pid, and a TERM to it reaches the program)
emu_prefix() {
	emu=(ip netns exec "$bed_ns" timeout -s KILL $T "$ROCEMU" run --port af_packet:emu0
		--ip $bed_ip4/24 --ip $bed_ip6/64 --capture "$1" --)
}

# emu_wait_listen KIND PID: until rocemu's server PID listens (tcp: a TCP
# socket on $port; cm: its port is up, then 1 s for rdma_listen) or ended
emu_wait_listen() {
	local kind=$1 pid=$2 i
	for i in $(seq 200); do
		kill -0 $pid 2>/dev/null || return 1
		case $kind in
		tcp) on_bed ss -ltnH "sport = :$lport" 2>/dev/null | grep -q . && return 0 ;;
		cm) [ -s "$cdir/rocemu.pcap" ] && { sleep 1; return 0; } ;;
		*) return 0 ;;
		esac
		sleep 0.1
	done
	return 1
}

# rping_teardown_race LOG: the guest's rping client ended a complete run
# (DISCONNECTED) and then died of its own race: its CM thread, back in
# rdma_get_cm_event after the last event, found the channel its main thread
# had just closed (EBADF, exit 255). rping -V checked every ping before.
rping_teardown_race() {
	grep -q "^client DISCONNECT EVENT" "$1" &&
		[ "$(tail -n 1 "$1")" = "rdma_get_cm_event: Bad file descriptor" ] &&
		! grep -qiE "error|fail|mismatch" <(grep -v "rdma_get_cm_event: Bad file descriptor" "$1")
}

# run_case NAME SERVER FAMILY LISTEN 'SERVER ARGS' 'CLIENT ARGS' [daemon]
#   SERVER: rxe or emu (which side serves); LISTEN: tcp, cm or none (how to
#   tell that the server is ready; tcp:PORT, cm:PORT when the program's port
#   is fixed, not @P@); daemon: the server never exits by itself
run_case() {
	local name=$1 side=$2 fam=$3 kind=$4 sargs=$5 cargs=$6 daemon=${7:-}
	[[ $name =~ $filter ]] || return 0
	ncase=$((ncase + 1))
	local t0=$SECONDS t1=$SECONDS cside=emu job=c$ncase rs=0 rc=0 st=0 why= spid=
	cdir=$bed_dir/$ncase-$name
	mkdir -p "$cdir"
	port=$((18515 + ncase))
	lport=$port
	case $kind in *:*) lport=${kind#*:} kind=${kind%%:*} ;; esac
	[ "$side" = emu ] && cside=rxe
	srv4=$rxe_ip4 srv6=$rxe_ip6
	[ "$side" = emu ] && srv4=$bed_ip4 srv6=$bed_ip6
	local -a sv=() cv=() emu
	emu_prefix "$cdir/rocemu.pcap"
	local w
	for w in $sargs; do sv+=("$(subst $side $fam "$w")"); done
	for w in $cargs; do cv+=("$(subst $cside $fam "$w")"); done

	if [ "$side" = rxe ]; then
		guest_start $job "rxe-serve $kind $lport timeout -s KILL $T ${sv[*]}"
		guest_up $job $T || why="rxe server not ready"
		t1=$SECONDS
		if [ -z "$why" ]; then
			"${emu[@]}" "${cv[@]}" >"$cdir/client.log" 2>&1
			rc=$?
		fi
		if [ -n "$daemon" ]; then
			[ -e "$bed_run/jobs/$job.rc" ] && rs=1
			guest_run k$job 30 "kill \$(cat /host/jobs/$job.pid)"
		fi
		# a server whose client failed may wait for it forever: a short grace
		guest_wait $job $([ $rc -eq 0 ] && [ -z "$why" ] && echo $T || echo 10)
		st=$?
		[ -n "$daemon" ] || rs=$st
		cp "$bed_run/jobs/$job.out" "$cdir/server.log" 2>/dev/null
	else
		"${emu[@]}" "${sv[@]}" >"$cdir/server.log" 2>&1 &
		spid=$!
		emu_wait_listen $kind $spid || why="rocemu server not ready"
		t1=$SECONDS
		if [ -z "$why" ]; then
			guest_run $job $T "timeout -s KILL $T ${cv[*]}"
			rc=$?
			cp "$bed_run/jobs/$job.out" "$cdir/client.log" 2>/dev/null
		fi
		if [ -n "$daemon" ]; then
			kill -0 $spid 2>/dev/null || rs=1
			kill $spid 2>/dev/null
		elif [ $rc -ne 0 ] || [ -n "$why" ]; then
			# a server whose client failed may wait for it forever: a short grace
			for _ in $(seq 100); do kill -0 $spid 2>/dev/null || break; sleep 0.1; done
			kill $spid 2>/dev/null
		fi
		wait $spid
		st=$?
		[ -n "$daemon" ] || rs=$st
	fi
	[ -z "$why" ] && [ $rs -ne 0 ] && why="server exit $rs"
	if [ -z "$why" ] && [ $rc -ne 0 ] && [ "$side" = emu ] && rping_teardown_race "$cdir/client.log"; then
		rc=0
		echo "note: $name: rping's teardown race after a complete run (docs/interop.md)"
	fi
	[ -z "$why" ] && [ $rc -ne 0 ] && why="client exit $rc"
	[ -n "$why" ] && printf '%s\n' "server: ${sv[*]}" "client: ${cv[*]}" >"$cdir/argv.log"
	# the protocol check here, the decoding and ICRC checks of all captures at the end
	case_result "$name" "$why" $t0 "$(printf '%-13s IPv%s (server ready %2d s)' \
		"$([ $side = rxe ] && echo 'rxe server' || echo 'rocemu server')" $fam $((t1 - t0)))"
}

# case_result NAME WHY T0 WHAT: record a case (passed when WHY is empty)
# and print its line; a failed case's logs ($cdir) follow its line
case_result() {
	local name=$1 why=$2 t0=$3 what=$4 f
	if [ -z "$why" ] && ! timeout 120 "$ROCEMU" inspect --check --quiet "$cdir/rocemu.pcap" >"$cdir/checks.log" 2>&1; then
		why="inspect --check"
	fi
	if [ -z "$why" ]; then
		printf 'PASS %-34s %s %3d s\n' "$name" "$what" $((SECONDS - t0))
		passed+=("$name")
		captures+=("$cdir/rocemu.pcap")
		return
	fi
	printf 'FAIL %-34s %s %3d s: %s\n' "$name" "$what" $((SECONDS - t0)) "$why"
	failed+=("$name")
	bed_keep=1
	for f in "$cdir"/*.log; do
		echo "  --- $(basename "$f")"
		tail -n 25 "$f" | sed 's/^/  | /'
	done
}

# Connection requests for a port nobody listens on, answered with REJ 8
# (invalid service ID, IBA 12.6.7) by each side's CM, and taken as such by
# the other: rxe rejects rocemu's REQ; rocemu, listening on another port,
# rejects rxe's (a rocemu process that listens nowhere stays silent,
# docs/rdmacm.md), then serves rxe's REQ for the right port.
reject_cases() {
	local t0 why q=$((18515 + 900))
	ncase=$((ncase + 1))
	if [[ reject-by-rxe =~ $filter ]]; then
		t0=$SECONDS why=
		cdir=$bed_dir/$ncase-reject-by-rxe
		mkdir -p "$cdir"
		local -a emu
		emu_prefix "$cdir/rocemu.pcap"
		"${emu[@]}" rping -c -a $rxe_ip4 -p $q -C 1 >"$cdir/client.log" 2>&1 && why="rping connected"
		[ -z "$why" ] && ! grep -q "REJECTED, error 8" "$cdir/client.log" && why="no REJECTED 8"
		case_result reject-by-rxe "$why" $t0 "rocemu client"
	fi
	ncase=$((ncase + 1))
	if [[ reject-by-rocemu =~ $filter ]]; then
		t0=$SECONDS why=
		cdir=$bed_dir/$ncase-reject-by-rocemu
		port=$((18515 + ncase))
		mkdir -p "$cdir"
		local -a emu
		emu_prefix "$cdir/rocemu.pcap"
		"${emu[@]}" rping -s -a $bed_ip4 -p $port -C 1 -V >"$cdir/server.log" 2>&1 &
		local spid=$!
		emu_wait_listen cm $spid || why="rocemu server not ready"
		if [ -z "$why" ]; then
			guest_run r$ncase $T "timeout -s KILL $T rping -c -a $bed_ip4 -p $q -C 1" && why="rping connected"
			cp "$bed_run/jobs/r$ncase.out" "$cdir/client-rejected.log"
			[ -z "$why" ] && ! grep -q "REJECTED, error 8" "$cdir/client-rejected.log" && why="no REJECTED 8"
			guest_run c$ncase $T "timeout -s KILL $T rping -c -a $bed_ip4 -p $port -C 1 -V" ||
				why="${why:-rping to the listening port failed}"
			cp "$bed_run/jobs/c$ncase.out" "$cdir/client.log"
		fi
		for _ in $(seq 100); do kill -0 $spid 2>/dev/null || break; sleep 0.1; done
		kill $spid 2>/dev/null
		wait $spid || why="${why:-rocemu server exit $?}"
		case_result reject-by-rocemu "$why" $t0 "rxe client   "
	fi
}

# check_all: every passed case's capture through check_captures.sh, in one
# tshark and one ICRC pass over their concatenation (each pass costs seconds
# to start); when that fails, capture by capture to name the culprits.
check_all() {
	[ ${#captures[@]} -gt 0 ] || return 0
	local t0=$SECONDS c name culprit=
	mergecap -a -F nsecpcap -w "$bed_dir/all.pcap" "${captures[@]}" || return 1
	if check_captures "$bed_dir/all.pcap" >"$bed_dir/checks.log" 2>&1; then
		bed_log "captures of ${#captures[@]} cases: decode cleanly, every ICRC verifies ($((SECONDS - t0)) s)"
		sed 's/^/  /' "$bed_dir/checks.log"
		return 0
	fi
	for c in "${captures[@]}"; do
		check_captures "$c" >"$c.checks" 2>&1 && continue
		name=$(basename "$(dirname "$c")")
		name=${name#*-}
		echo "FAIL $name: capture check"
		sed 's/^/  | /' "$c.checks"
		passed=("${passed[@]/$name/}")
		failed+=("$name")
		culprit=1
	done
	if [ -z "$culprit" ]; then
		echo "FAIL: the captures together fail the check, each alone passes:"
		sed 's/^/  | /' "$bed_dir/checks.log"
		failed+=(capture-check)
	fi
}

# cases NAME SIDES FAMILIES LISTEN 'SERVER ARGS' 'CLIENT ARGS' [daemon]: the
# case with each of SIDES serving (rxe, emu), in each of FAMILIES (4, 6)
cases() {
	local name=$1 sides=$2 fams=$3 f s
	shift 3
	for f in $fams; do
		for s in $sides; do
			run_case "$name-$s-server$([ $f = 6 ] && echo -ipv6)" $s $f "$@"
		done
	done
}

BOTH="rxe emu"
N=20 # iterations: the guest's CPU is emulated
cases rc-pingpong "$BOTH" "4 6" tcp "ibv_rc_pingpong -g @G@ -p @P@ -n $N" "ibv_rc_pingpong -g @G@ -p @P@ -n $N @S4@"
cases rc-pingpong-check "$BOTH" 4 tcp "ibv_rc_pingpong -g @G@ -p @P@ -n $N -c" "ibv_rc_pingpong -g @G@ -p @P@ -n $N -c @S4@"
cases rc-pingpong-s64 "$BOTH" 4 tcp "ibv_rc_pingpong -g @G@ -p @P@ -n $N -s 64" "ibv_rc_pingpong -g @G@ -p @P@ -n $N -s 64 @S4@"
cases rc-pingpong-s8192 "$BOTH" 4 tcp "ibv_rc_pingpong -g @G@ -p @P@ -n $N -s 8192" "ibv_rc_pingpong -g @G@ -p @P@ -n $N -s 8192 @S4@"
cases uc-pingpong "$BOTH" 4 tcp "ibv_uc_pingpong -g @G@ -p @P@ -n $N -c" "ibv_uc_pingpong -g @G@ -p @P@ -n $N -c @S4@"
# UD messages must fit the path MTU (1024 on a 1500-byte Ethernet)
cases ud-pingpong "$BOTH" "4 6" tcp "ibv_ud_pingpong -g @G@ -p @P@ -n $N -s 512 -c" "ibv_ud_pingpong -g @G@ -p @P@ -n $N -s 512 -c @S4@"
cases srq-pingpong "$BOTH" 4 tcp "ibv_srq_pingpong -g @G@ -p @P@ -n $N -c" "ibv_srq_pingpong -g @G@ -p @P@ -n $N -c @S4@"
# perftest with its defaults (message size, outstanding READs/atomics) but
# the iteration count; -F: no cpufreq check
cases ib-send-lat "$BOTH" 4 tcp "ib_send_lat -x @G@ -p @P@ -F -n 100" "ib_send_lat -x @G@ -p @P@ -F -n 100 @S4@"
cases ib-write-bw "$BOTH" "4 6" tcp "ib_write_bw -x @G@ -p @P@ -F -n $N" "ib_write_bw -x @G@ -p @P@ -F -n $N @S4@"
cases ib-read-bw "$BOTH" 4 tcp "ib_read_bw -x @G@ -p @P@ -F -n $N" "ib_read_bw -x @G@ -p @P@ -F -n $N @S4@"
cases ib-atomic-bw "$BOTH" 4 tcp "ib_atomic_bw -x @G@ -p @P@ -F -n 100" "ib_atomic_bw -x @G@ -p @P@ -F -n 100 @S4@"

# rdma_cm. perftest -R takes IPv4 only (rdma_getaddrinfo with AF_INET), and
# its client connects right after the handshake that precedes its server's
# rdma_listen: against the emulated guest rocemu's client always comes first
# and gets REJ 8, after which perftest's retry reuses freed ids and crashes
# (docs/interop.md); the rxe client is slower than rocemu's server.
cases ib-write-bw-cm emu 4 cm "ib_write_bw -R -p @P@ -F -n $N" "ib_write_bw -R -p @P@ -F -n $N @S@"
cases ib-read-lat-cm emu 4 cm "ib_read_lat -R -p @P@ -F -n 100" "ib_read_lat -R -p @P@ -F -n 100 @S@"
cases rping "$BOTH" "4 6" cm "rping -s -a @S@ -p @P@ -C 10 -V" "rping -c -a @S@ -p @P@ -C 10 -V"
cases ucmatose "$BOTH" "4 6" cm "ucmatose -b @S@ -p @P@ -c 2 -C 10" "ucmatose -s @S@ -p @P@ -c 2 -C 10"
cases udaddy "$BOTH" "4 6" cm:7174 "udaddy -b @S@ -C 10" "udaddy -s @S@ -C 10"
# qperf's RC tests through rdma_cm, one client process a test: the server
# forks a child per test that listens only once the client asked for the
# test, and a client whose device is already open connects before a slow
# server listens (REJ 8, docs/interop.md). qperf's UD tests never use
# rdma_cm and give a LID-only address, which rxe refuses.
for t in rc_bw rc_rdma_read_lat; do
	cases qperf-${t//_/-} "$BOTH" 4 tcp "qperf -lp @P@" "qperf -lp @P@ -cm1 -t 1 @S4@ $t" daemon
done
# rsockets (rdma-core's rsocket protocol, version 1: rocemu's own rsocket*.c
# against librdmacm's on rxe), with their data checks (-T v): blocking,
# nonblocking and asynchronous (rpoll) streams, and riostream's iomap
# (direct RDMA WRITEs).
cases rstream-block "$BOTH" "4 6" cm "rstream -b @S@ -p @P@ -S 4096 -C 20 -T v -T b" "rstream -s @S@ -p @P@ -S 4096 -C 20 -T v -T b"
cases rstream-nonblock "$BOTH" 4 cm "rstream -b @S@ -p @P@ -S 65536 -C 10 -T v" "rstream -s @S@ -p @P@ -S 65536 -C 10 -T v"
# Asynchronous (-T a) with rxe serving only: rstream's client reads the last
# transfer through rpoll, and rdma-core's rpoll (rxe's side) reports POLLHUP
# with the data once the server's DISCONNECT is in, which rstream takes for
# an error (exit 16) before it read the data (docs/interop.md).
cases rstream-async-1m rxe 4 cm "rstream -b @S@ -p @P@ -S 1048576 -C 4 -T v -T a" "rstream -s @S@ -p @P@ -S 1048576 -C 4 -T v -T a"
cases riostream "$BOTH" 4 cm "riostream -b @S@ -p @P@ -S 16384 -C 10 -T v -T b" "riostream -s @S@ -p @P@ -S 16384 -C 10 -T v -T b"
# Restart: rocemu connects, exits, and a new rocemu process connects again
# to the same rxe at once, as client and as server; rxe's CM still holds the
# first connection (time-wait) and rejects a REQ or REP that repeats its QPN
# or communication ID as stale (REJ 10). The same with plain verbs
# (ibv_rc_pingpong, QPNs and PSNs exchanged over TCP).
for i in 1 2; do
	cases restart-$i "$BOTH" 4 cm "rping -s -a @S@ -p @P@ -C 2 -V" "rping -c -a @S@ -p @P@ -C 2 -V"
done
for i in 1 2; do
	cases restart-pingpong-$i "$BOTH" 4 tcp "ibv_rc_pingpong -g @G@ -p @P@ -n 5" "ibv_rc_pingpong -g @G@ -p @P@ -n 5 @S4@"
done
reject_cases

check_all
passed=(${passed[@]})
total=$((${#passed[@]} + ${#failed[@]}))
echo "interop with $(cat "$bed_run/kernel") rdma_rxe: ${#passed[@]} of $total cases passed${failed:+; failed: ${failed[*]}}"
[ $total -gt 0 ] || { echo "no case matches '$filter'"; exit 1; }
[ ${#failed[@]} -eq 0 ]
