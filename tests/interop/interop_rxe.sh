#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# rocemu against Linux Soft-RoCE (rdma_rxe in a qemu guest, bed.sh): every
# program of the matrix in both directions (rocemu server, rxe client and the
# reverse), over IPv4 and, where the program takes an IPv6 GID or address,
# IPv6; rsockets; then the restart cases (one rocemu process after another
# against the same rxe, connecting through rdma_cm and with plain verbs,
# client and server) and the REJ cases; then the VLAN round (rocemu on
# --vlan 100 against rxe through the guest's eth0.100: the 802.1Q tags of
# every RoCEv2 frame, in rocemu's capture and in one of the link, tap0; and
# the guest's frames on VLAN 200 and untagged dropped and counted).
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

# The RDMA side of a round: rocemu's port options (GID 1 its first --ip, GID
# 2 its second), the guest's GID index of its IPv4 RDMA address, and the
# IPv4 RDMA addresses of both sides (rdma_cm's); the TCP of the programs
# always runs between $bed_ip4 and $rxe_ip4. The VLAN round changes them.
emu_port=(--ip $bed_ip4/24 --ip $bed_ip6/64)
rxe_cm4=$rxe_ip4 emu_cm4=$bed_ip4

# subst SIDE FAMILY ARG: the argument with the placeholders of SIDE (rxe or
# emu) filled in: @G@ the side's GID index of the family, @S@ the server's
# RDMA address of the family, @S4@ its IPv4 address for TCP, @P@ the case's
# TCP/rdma_cm port.
subst() {
	local side=$1 fam=$2 a=$3 g s
	if [ "$side" = rxe ]; then
		g=$rxe_g4
		[ "$fam" = 6 ] && g=$rxe_g6
	else
		g=1
		[ "$fam" = 6 ] && g=2
	fi
	s=$srvcm4
	[ "$fam" = 6 ] && s=$srv6
	a=${a//@D@/$([ "$side" = rxe ] && echo rxe0 || echo rocemu0)}
	a=${a//@DGID@/$([ "$side" = rxe ] && echo n || echo y)}
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
		"${emu_port[@]}" --capture "$1" --)
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
	srv4=$rxe_ip4 srv6=$rxe_ip6 srvcm4=$rxe_cm4
	[ "$side" = emu ] && srv4=$bed_ip4 srv6=$bed_ip6 srvcm4=$emu_cm4
	local -a sv=() cv=() emu
	emu_prefix "$cdir/rocemu.pcap"
	wire_start || why="the capture of tap0 did not start (wire.log)"
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

# wire_start: in the VLAN round, a capture of the link itself for the case
# ($cdir/wire.pcap): every frame crossing tap0, the bridge's port to the
# guest, which every frame between rocemu and the guest crosses; rocemu's
# own capture records what it meant to send. wire_stop ends it.
# wire_capture.py, not dumpcap: dumpcap stopped without the frames still in
# its TPACKET_V3 ring and, on loaded machines (CI, fresh-machine run r7),
# left a case's wire capture empty although tap0 had carried the case.
# tap0's own counters around the case are the check on the capture: the
# capture must hold at least as many frames as tap0 carried between them.
wire_pid= wire_n0=
tap0_frames() {
	on_bed cat /sys/class/net/tap0/statistics/rx_packets /sys/class/net/tap0/statistics/tx_packets |
		awk '{ n += $1 } END { print n + 0 }'
}
wire_start() {
	[ -n "${vlan_pcp:-}" ] || return 0
	ip netns exec "$bed_ns" "$PY" "$SRC/tests/interop/wire_capture.py" tap0 "$cdir/wire.pcap" >"$cdir/wire.log" 2>&1 &
	wire_pid=$!
	until grep -q "^capturing on" "$cdir/wire.log"; do
		kill -0 $wire_pid 2>/dev/null || { wire_pid=; return 1; }
		sleep 0.1
	done
	wire_n0=$(tap0_frames)
}
# wire_stop: ends the capture; fails when it holds fewer frames than tap0
# carried while it ran
wire_stop() {
	[ -n "$wire_pid" ] || return 0
	local n1 got lost
	n1=$(tap0_frames)
	kill -INT $wire_pid 2>/dev/null
	wait $wire_pid 2>/dev/null
	wire_pid=
	got=$(awk '/^frames: / { print $2 }' "$cdir/wire.log")
	lost=$(awk '/^dropped: / { print $2 }' "$cdir/wire.log")
	echo "tap0 carried $((n1 - wire_n0)) frames while the capture ran; it holds ${got:-none}" >>"$cdir/wire.log"
	[ -n "$got" ] && [ "$got" -ge $((n1 - wire_n0)) ] && [ "${lost:-1}" = 0 ]
}

# case_opcodes PCAP MIN OPCODE...: each BTH OPCODE (decimal) in at least MIN
# frames of PCAP (the operations a case's program was asked for went over
# the wire as such)
case_opcodes() {
	local pcap=$1 min=$2 op n rc=0
	shift 2
	for op in "$@"; do
		n=$(timeout 60 tshark -n -r "$pcap" -Y "infiniband.bth.opcode == $op" 2>/dev/null | wc -l)
		echo "opcode $op: $n frames (at least $min wanted)"
		[ "$n" -ge "$min" ] || rc=1
	done
	return $rc
}

# case_result NAME WHY T0 WHAT: record a case (passed when WHY is empty)
# and print its line; a failed case's logs ($cdir) follow its line
case_result() {
	local name=$1 why=$2 t0=$3 what=$4 f
	wire_stop || why=${why:-"the capture of tap0 lost frames (wire.log)"}
	if [ -z "$why" ] && ! timeout 120 "$ROCEMU" inspect --check --quiet "$cdir/rocemu.pcap" >"$cdir/checks.log" 2>&1; then
		why="inspect --check"
	fi
	if [ -z "$why" ] && [ -n "${vlan_pcp:-}" ] && ! vlan_tags "$cdir/rocemu.pcap" "$vlan_pcp" >"$cdir/tags.log" 2>&1; then
		why="802.1Q tags"
	fi
	if [ -z "$why" ] && [ -n "${vlan_pcp:-}" ] && ! vlan_tags "$cdir/wire.pcap" "$vlan_pcp" >"$cdir/wire-tags.log" 2>&1; then
		why="802.1Q tags on the wire (tap0)"
	fi
	if [ -z "$why" ] && [ -n "${want_ops:-}" ] && ! case_opcodes "$cdir/rocemu.pcap" $want_ops >"$cdir/opcodes.log" 2>&1; then
		why="BTH opcodes"
	fi
	if [ -z "$why" ]; then
		printf 'PASS %-34s %s %3d s\n' "$name" "$what" $((SECONDS - t0))
		[ -n "${vlan_pcp:-}" ] && sed 's/^/  /' "$cdir/tags.log" &&
			echo "  on the wire ($(tail -n 1 "$cdir/wire.log")):" && sed 's/^/  /' "$cdir/wire-tags.log"
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

# ---------------------------------------------------------------- VLAN round
# rocemu on 802.1Q VLAN 100 against Soft-RoCE on a kernel VLAN netdev (issue
# 22), in the same guest after the matrix (docs/interop.md, "VLAN"). Linux
# refuses an rxe device on a VLAN netdev ("rxe creation allowed on top of a
# real device only"); as on a RoCE NIC, rxe0 reaches the VLAN through the GID
# of eth0.100's address, whose netdev is eth0.100 (gid_attrs/ndevs). The
# guest's VLAN netdevs map every priority to PCP 3 (egress-qos-map); rocemu
# runs with --vlan 100, the programs with SL 3 where they take one (-l 3).
# The programs' own TCP stays untagged, between $bed_ip4 and $rxe_ip4 (this
# host's kernel has no 8021q).
vlan_emu4=10.87.100.1 vlan_rxe4=10.87.100.11 vlan200_emu4=10.87.200.1 vlan200_rxe4=10.87.200.11
vlan_cases="vlan-rc-pingpong-rxe-server vlan-rc-pingpong-emu-server vlan-rping-rxe-server vlan-rping-emu-server vlan-drop"

# vlan_setup_start: eth0.100 and eth0.200 in the guest and rxe0's GIDs on
# them, as a job that runs beside the matrix's first cases (the new GIDs
# take free slots: the matrix's indexes stay); vlan_setup_wait: its end, and
# rxe0's GID index of eth0.100's IPv4 address (rxe_vg4).
vlan_a100=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${vlan_rxe4//./ })
vlan_a200=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${vlan200_rxe4//./ })
vlan_setup_start() {
	local g=/sys/class/infiniband/rxe0/ports/1 a100=$vlan_a100 a200=$vlan_a200
	printf '%s\n' $vlan_cases | grep -qE -- "$filter" || return 0
	vlan_t0=$SECONDS
	emu_mac=$(on_bed cat /sys/class/net/emu0/address)
	guest_start vlan-up "set -e
modprobe 8021q
for v in 100 200; do
	ip link add link eth0 name eth0.\$v type vlan id \$v egress-qos-map 0:3 1:3 2:3 3:3 4:3 5:3 6:3 7:3
	ip link set eth0.\$v up
done
ip addr add $vlan_rxe4/24 dev eth0.100
ip addr add $vlan200_rxe4/24 dev eth0.200
# rocemu answers no ARP on VLAN 200 (it drops the frames): its MAC by hand
ip neigh replace $vlan200_emu4 lladdr $emu_mac dev eth0.200 nud permanent
set +e
# (what Linux says to an rxe device on a VLAN netdev; deleted again if made)
echo \"rdma link add rxe1 type rxe netdev eth0.100: \$(rdma link add rxe1 type rxe netdev eth0.100 2>&1 &&
	echo made && rdma link delete rxe1)\"
# the GID table's entries on the VLAN netdevs, one grep and one awk a poll
# (a fork costs much under TCG): index, GID, netdev, type
i=0
until grep -H . $g/gids/* $g/gid_attrs/ndevs/* $g/gid_attrs/types/* 2>/dev/null | awk '
	{ c = index(\$0, \":\"); n = split(substr(\$0, 1, c - 1), p, \"/\")
	  v[p[n - 1], p[n]] = substr(\$0, c + 1); k[p[n]] = 1 }
	END { for (i in k) if (v[\"ndevs\", i] ~ /^eth0\\./) {
		print i, v[\"gids\", i], v[\"ndevs\", i], v[\"types\", i]
		f += (v[\"gids\", i] \" \" v[\"ndevs\", i] == \"$a100 eth0.100\" ||
		      v[\"gids\", i] \" \" v[\"ndevs\", i] == \"$a200 eth0.200\") }
	      exit f != 2 }' >/tmp/vgids; do
	i=\$((i + 1))
	[ \$i -gt 600 ] && { echo 'rxe0 has no GID of the VLAN addresses:'; cat /tmp/vgids; exit 1; }
	sleep 0.2
done
sort -n /tmp/vgids
echo \"(after \$i polls)\"
ip -d link show eth0.100 | grep -oE '(vlan protocol|egress-qos-map).*'"
}
vlan_setup_wait() {
	guest_wait vlan-up 600 || return 1
	rxe_vg4=$(awk -v a=$vlan_a100 '$2 == a && $3 == "eth0.100" { print $1 }' "$bed_run/jobs/vlan-up.out")
	[ -n "$rxe_vg4" ] || return 1
	bed_log "VLAN 100 and 200 in the guest (set up $((SECONDS - vlan_t0)) s ago); rxe0's GIDs on them (index, GID, netdev, type):"
	sed 's/^/  /' "$bed_run/jobs/vlan-up.out"
}

# vlan_tags CAPTURE PCP: the capture's RoCEv2 and ARP frames counted by
# (kind, sender, VID, PCP); every RoCEv2 frame must carry VID 100, rocemu's
# with PCP PCP, the guest's with PCP 3; rocemu's ARP frames VID 100 PCP 0.
vlan_tags() {
	local t=$cdir/tags.txt rc=0
	# (!icmp: an ICMP error quotes a UDP header)
	timeout 120 tshark -n -r "$1" -Y '(udp.dstport == 4791 && !icmp) || arp' -T fields \
		-e udp.dstport -e ip.src -e arp.src.proto_ipv4 -e vlan.id -e vlan.priority >"$t.raw" 2>/dev/null ||
		{ echo "tshark failed on $1"; return 1; }
	awk -F'\t' -v e=$vlan_emu4 -v r=$vlan_rxe4 '{
		src = ($1 == 4791 ? $2 : $3); who = (src == e ? "rocemu" : src == r ? "rxe" : src)
		print ($1 == 4791 ? "roce" : "arp"), who, ($4 == "" ? "untagged -" : $4 " " $5) }' "$t.raw" |
		sort | uniq -c >"$t"
	echo "frames by (kind, sender, VID, PCP):"
	cat "$t"
	grep -q " roce rocemu 100 $2$" "$t" || { echo "no RoCEv2 frame from rocemu with VID 100 PCP $2"; rc=1; }
	grep -q " roce rxe 100 3$" "$t" || { echo "no RoCEv2 frame from rxe with VID 100 PCP 3"; rc=1; }
	if grep " roce " "$t" | grep -vqE " roce (rocemu 100 $2|rxe 100 3)$"; then
		echo "RoCEv2 frames tagged otherwise"
		rc=1
	fi
	if grep " arp rocemu " "$t" | grep -vq " 100 0$"; then
		echo "ARP frames of rocemu not VID 100 PCP 0"
		rc=1
	fi
	return $rc
}

# vlan-drop: Soft-RoCE's RoCEv2 frames to rocemu's MAC on VLAN 200 and
# untagged, dropped and counted by rocemu's port on VLAN 100: rping from the
# guest to an address on VLAN 200 and to the host kernel's untagged address,
# until rocemu's capture holds a connection request of each kind.
vlan_drop() {
	local name=vlan-drop t0=$SECONDS why= ppid seen n200 nun c200 cun limit
	[[ $name =~ $filter ]] || return 0
	ncase=$((ncase + 1))
	cdir=$bed_dir/$ncase-$name
	mkdir -p "$cdir"
	# (ip netns exec execs timeout, which passes the TERM to rocemu: it
	# prints its counters)
	ip netns exec "$bed_ns" timeout -k 10 $T "$ROCEMU" port --port af_packet:emu0 --ip $vlan_emu4/24 --vlan 100 \
		--capture "$cdir/rocemu.pcap" >"$cdir/port.log" 2>&1 &
	ppid=$!
	limit=$((SECONDS + T))
	until [ -s "$cdir/rocemu.pcap" ] || [ $SECONDS -ge $limit ]; do
		kill -0 $ppid 2>/dev/null || break
		sleep 0.1
	done
	[ -s "$cdir/rocemu.pcap" ] || why="rocemu port did not start"
	if [ -z "$why" ]; then
		guest_start d$ncase "
timeout -s KILL $T rping -c -a $vlan200_emu4 -C 1 & echo \$! >/host/jobs/d$ncase.pids
timeout -s KILL $T rping -c -a $bed_ip4 -C 1 & echo \$! >>/host/jobs/d$ncase.pids
wait"
		limit=$((SECONDS + T))
		while :; do
			# rocemu flushes its capture every link check (a few times a second)
			seen=$(timeout 60 tshark -n -r "$cdir/rocemu.pcap" -Y "udp.dstport == 4791 && !icmp && eth.dst == $emu_mac" \
				-T fields -e vlan.id 2>/dev/null | awk '{ print $1 == "" ? "untagged" : "vid" $1 }' | sort -u | tr '\n' ' ')
			[[ " $seen" == *" vid200 "* && " $seen" == *" untagged "* ]] && break
			[ $SECONDS -ge $limit ] && { why="no RoCEv2 frame of the guest's on VLAN 200 and untagged in ${T} s (seen: $seen)"; break; }
			[ -e "$bed_run/jobs/d$ncase.rc" ] && { why="the guest's rping ended (seen: $seen)"; break; }
			sleep 1
		done
		guest_run k$ncase 30 "kill \$(cat /host/jobs/d$ncase.pids)"
		guest_wait d$ncase 30
		cp "$bed_run/jobs/d$ncase.out" "$cdir/client.log" 2>/dev/null
	fi
	kill $ppid 2>/dev/null
	wait $ppid
	if [ -z "$why" ]; then
		read -r n200 nun < <(timeout 120 tshark -n -r "$cdir/rocemu.pcap" \
			-Y "udp.dstport == 4791 && !icmp && eth.dst == $emu_mac" -T fields -e vlan.id 2>/dev/null |
			awk '$1 == 200 { v++ } $1 == "" { u++ } END { print v + 0, u + 0 }')
		c200=$(awk '$1 == "drop_vlan_other" { print $2 }' "$cdir/port.log")
		cun=$(awk '$1 == "drop_vlan_untagged" { print $2 }' "$cdir/port.log")
		# every such frame counted (the counters also hold the other frames
		# of VLAN 200 and untagged to rocemu's MAC: ARP, the kernel's TCP)
		[ "${c200:-0}" -ge "$n200" ] || why="drop_vlan_other ${c200:-0} < $n200 RoCEv2 frames on VLAN 200"
		[ "${cun:-0}" -ge "$nun" ] || why="${why:+$why; }drop_vlan_untagged ${cun:-0} < $nun untagged RoCEv2 frames"
	fi
	case_result $name "$why" $t0 "$(printf 'rxe client    VLAN 200: %s RoCEv2 frames, drop_vlan_other %s; untagged: %s, drop_vlan_untagged %s' \
		"${n200:-?}" "${c200:-?}" "${nun:-?}" "${cun:-?}")"
}

vlan_round() {
	local t0=$SECONDS
	printf '%s\n' $vlan_cases | grep -qE -- "$filter" || return 0
	if ! vlan_setup_wait; then
		echo "FAIL vlan-setup: the guest's VLAN netdevs or rxe0's GIDs on them:"
		sed 's/^/  | /' "$bed_run/jobs/vlan-up.out"
		failed+=(vlan-setup)
		bed_keep=1
		return
	fi
	emu_port=(--ip $vlan_emu4/24 --vlan 100)
	rxe_g4=$rxe_vg4 rxe_cm4=$vlan_rxe4 emu_cm4=$vlan_emu4
	vlan_pcp=3
	cases vlan-rc-pingpong "$BOTH" 4 tcp "ibv_rc_pingpong -g @G@ -l 3 -p @P@ -n $N -c" "ibv_rc_pingpong -g @G@ -l 3 -p @P@ -n $N -c @S4@"
	# rdma_cm: as the active side rocemu sends SL 0 (no SA, no egress map); as
	# the passive side it takes the REQ's, rxe's 3 (docs/ports.md)
	vlan_pcp=0
	cases vlan-rping rxe 4 cm "rping -s -a @S@ -p @P@ -C 5 -V" "rping -c -a @S@ -p @P@ -C 5 -V"
	vlan_pcp=3
	cases vlan-rping emu 4 cm "rping -s -a @S@ -p @P@ -C 5 -V" "rping -c -a @S@ -p @P@ -C 5 -V"
	vlan_pcp=
	vlan_drop
	bed_log "VLAN round: $((SECONDS - t0)) s"
}

BOTH="rxe emu"
vlan_setup_start
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
# UCX (ucx_perftest, its TCP handshake on @P@) over rc_verbs with ud_verbs
# for wire-up, as the middleware tests run it between two rocemu hosts: tag
# matching (SENDs), RMA puts (RDMA WRITEs) and gets (RDMA READs). Only UCP's
# tests: UCT's send the client's device name to the server, which has
# another one. On rxe's side UCX's check of a UD packet's destination GID
# is off (UCX_UD_ETH_DGID_CHECK=n): with it, UCX on this kernel's rxe drops
# every UD packet it receives, rxe's own too (two ucx_perftest in the guest,
# rxe0 to rxe0, time out the same way); rocemu's side keeps it on, and
# passes it (docs/interop.md).
ucx="UCX_NET_DEVICES=@D@:1 UCX_TLS=rc_verbs,ud_verbs,self UCX_UD_ETH_DGID_CHECK=@DGID@"
# Each case's capture must hold the operation it asked for, at least 400
# times in 500 iterations: RC SEND only (4), RDMA WRITE only (10), RDMA READ
# request (12) and response only (16).
for t in tag_lat:4 ucp_put_bw:10 ucp_get:12,16; do
	want_ops="400 ${t#*:}"
	want_ops=${want_ops//,/ }
	t=${t%:*}
	cases ucx-${t//_/-} "$BOTH" 4 tcp "env $ucx ucx_perftest -p @P@" \
		"env $ucx ucx_perftest -p @P@ @S4@ -t $t -n 500"
done
want_ops=
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
vlan_round

check_all
passed=(${passed[@]})
total=$((${#passed[@]} + ${#failed[@]}))
echo "interop with $(cat "$bed_run/kernel") rdma_rxe: ${#passed[@]} of $total cases passed${failed:+; failed: ${failed[*]}}"
[ $total -gt 0 ] || { echo "no case matches '$filter'"; exit 1; }
[ ${#failed[@]} -eq 0 ]
