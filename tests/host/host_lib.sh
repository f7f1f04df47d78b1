# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the rocemu host tests (tests/host/*.sh): hosts started with
# --detach and stopped at exit, programs attached to them, captures checked.
# bash; pair_lib.sh's paths and helpers (on, pair_need_prog, check_captures).
. "$(dirname "${BASH_SOURCE[0]}")/../verbs/pair_lib.sh"

host_pids=()
host_jobs=()
host_watchdogs=()

# host_kill_tree SIGNAL PID: PID and every process below it (a job started
# with & is a subshell: killing it alone leaves its program running).
host_kill_tree() {
	local c
	for c in $(ps -o pid= --ppid "$2" 2>/dev/null); do host_kill_tree "$1" "$c"; done
	kill "-$1" "$2" 2>/dev/null
}

host_cleanup() {
	local p
	for p in "${host_watchdogs[@]}"; do kill -KILL "$p" 2>/dev/null; done
	for p in "${host_jobs[@]}"; do host_kill_tree KILL "$p"; done
	for p in "${host_pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${host_pids[@]}"; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null
	done
	pair_cleanup
}

# host_dir TAG: the work directory ($dir), cleaned up at exit with every host
# and program started here.
host_dir() {
	dir=$(mktemp -d /tmp/rocemu-$1-XXXXXX)
	chmod 755 "$dir"
	[ -n "${PAIR_KEEP:-}" ] && echo "files kept in $dir"
	trap host_cleanup EXIT
}

# host_start NAME NS ARGS...: `rocemu host --name $dir/NAME ARGS` in network
# namespace NS (empty: here), detached; returns once it serves attaches.
host_start() {
	local name=$1 ns=$2
	shift 2
	if ! on "$ns" "$ROCEMU" host --name "$dir/$name" --detach --pid-file "$dir/$name.pid" \
		--verbose "$@" >"$dir/$name.log" 2>&1; then
		echo "rocemu host $name did not start:"
		cat "$dir/$name.log"
		return 1
	fi
	host_pids+=("$(cat "$dir/$name.pid")")
	# A detached host outlives a test that is killed (a timeout's SIGKILL
	# runs no EXIT trap): a watchdog in a session of its own, where the
	# test's process group signals do not reach it, stops the host when
	# this shell is gone. host_cleanup kills the watchdogs first.
	setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done
		kill -TERM "$2" 2>/dev/null || exit 0
		for _ in $(seq 50); do kill -0 "$2" 2>/dev/null || exit 0; sleep 0.1; done
		kill -KILL "$2" 2>/dev/null' host-watchdog "$$" "${host_pids[-1]}" \
		</dev/null >/dev/null 2>&1 &
	host_watchdogs+=($!)
}

# host_wait_up NAME: wait until host NAME's uplink is up (a memif peer
# connected), as long as the host lives: frames sent before are lost, and an
# ARP request lost that way is asked again only after 1 s, longer than a QP
# with ibv_rc_pingpong's retry budget (7 x 67 ms) waits for its first ACK.
host_wait_up() {
	local pid
	pid=$(cat "$dir/$1.pid") || return 1
	while kill -0 "$pid" 2>/dev/null; do
		host_stat "$1" | head -1 | grep -q '(link up)' && return 0
		sleep 0.1
	done
	echo "rocemu host $1 ended before its uplink came up"
	return 1
}

# host_stop NAME: SIGTERM, wait for its end (its capture is complete then);
# prints its log (counters last).
host_stop() {
	local pid
	pid=$(cat "$dir/$1.pid" 2>/dev/null) || return 0
	kill -TERM "$pid" 2>/dev/null
	for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	echo "== host $1"
	grep -v ' 0$' "$dir/$1.log"
}

# host_stat NAME: rocemu stat, or nothing (and 1) once the host is gone.
host_stat() {
	"$ROCEMU" stat --host "$dir/$1" 2>/dev/null
}

# host_stat_idle NAME: host_stat once the host shows no process attached,
# or after 100 looks 0.1 s apart (it learns of an exit from its control
# connection's end, so after the processes ended it may take a moment)
host_stat_idle() {
	local stat
	for _ in $(seq 100); do
		stat=$(host_stat "$1")
		echo "$stat" | grep -q " 0 processes attached" && break
		sleep 0.1
	done
	echo "$stat"
}

# host_write_pair NAME TAG PORT: an ib_write_bw pair on host NAME (4 KiB
# writes, far more than run before the caller stops it), logs $dir/TAGs.log
# and $dir/TAGc.log; returns once the client's writes flow (the host switched
# 2000 more frames; it must capture, so that every frame passes it), with
# the server's pid in $wpair_s and the client's in $wpair_c; 1 if the client ended
# before.
host_write_pair() {
	local name=$1 tag=$2 port=$3 before now
	host_run "$name" "" "$dir/${tag}s.log" ib_write_bw -d rocemu0 -x 1 -F -p "$port" -s 4096 \
		-n 100000000
	wpair_s=$!
	pair_wait_listen "" $wpair_s "$port"
	host_run "$name" "" "$dir/${tag}c.log" ib_write_bw -d rocemu0 -x 1 -F -p "$port" -s 4096 \
		-n 100000000 127.0.0.1
	wpair_c=$!
	before=$(host_switched "$name")
	while kill -0 $wpair_c 2>/dev/null; do
		now=$(host_switched "$name")
		[ -n "$now" ] && [ "$now" -gt $((${before:-0} + 2000)) ] && return 0
		sleep 0.2
	done
	echo "FAIL: the ib_write_bw pair did not run"
	tail -n 5 "$dir/${tag}s.log" "$dir/${tag}c.log"
	return 1
}

# host_switched NAME: frames host NAME switched to processes so far.
host_switched() {
	host_stat "$1" | sed -n 's/.*switched \([0-9]*\) frames to processes.*/\1/p'
}

# host_run NAME NS LOG PROGRAM ARGS...: PROGRAM attached to host NAME, in the
# background (its pid in $!, remembered for cleanup).
host_run() {
	local name=$1 ns=$2 log=$3
	shift 3
	on "$ns" timeout -s KILL "${TIMEOUT:-300}" "$ROCEMU" run --no-check --host "$dir/$name" \
		-- "$@" >"$log" 2>&1 &
	host_jobs+=($!)
}

. "$(dirname "${BASH_SOURCE[0]}")/../verbs/check_captures.sh"
