#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Capture failures are never silent.
#  - `rocemu run` and `rocemu port` check --capture before anything runs: a
#    file of /proc, a directory, a device, a missing or read-only directory,
#    two devices on one file: status 2 and one line naming the path;
#  - a capture file another rocemu is writing is refused (it is locked),
#    by both commands and by the library itself; the first writer's file
#    stays whole and readable;
#  - a full disk (a 64 KiB tmpfs): the file ends after the last whole
#    frame, capture_frames counts exactly the frames in it and
#    capture_frames_not_written the others, and the failure is one loud
#    line at exit: `rocemu port` then fails (status 1); a program under
#    `rocemu run` (ibv_rc_pingpong over memif) still succeeds and the
#    library prints the line.
# The read-only and full-disk cases mount a tmpfs in a private mount
# namespace (root, unshare); without root they are skipped, said at the end.
set -u
. "$(dirname "$0")/pair_lib.sh"
pair_need_prog ibv_devices ibverbs-utils
dir=$(mktemp -d /tmp/rocemu-capfail-XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
fail=0
skipped=

# refused WHAT PATTERN -- COMMAND...: status 2, one line on stderr matching PATTERN.
refused() {
	local what=$1 pat=$2 rc
	shift 3
	timeout 30 "$@" >$dir/out 2>$dir/err
	rc=$?
	if [ $rc = 2 ] && [ "$(wc -l <$dir/err)" = 1 ] && grep -qE -- "$pat" $dir/err; then
		echo "ok: $what: $(cat $dir/err)"
	else
		echo "FAIL: $what: status $rc, wanted 2 and one line /$pat/"
		cat $dir/out $dir/err
		fail=1
	fi
}

# Both commands, one bad path: the same check.
both_refuse() { # WHAT PATTERN PATH
	refused "run --capture $3 ($1)" "$2" -- \
		"$ROCEMU" run --port ring:cf:a --ip 10.69.0.1 --capture "$3" -- ibv_devices
	refused "port --capture $3 ($1)" "$2" -- \
		"$ROCEMU" port --port ring:cf:a --ip 10.69.0.1 --capture "$3" --duration 1
}

both_refuse "proc" "--capture /proc/version: a file of the kernel's proc file system" /proc/version
both_refuse "directory" "--capture $dir: is a directory" $dir
both_refuse "device" "--capture /dev/null: not a regular file" /dev/null
both_refuse "missing directory" "--capture $dir/none/a.pcap: directory $dir/none: No such file" \
	$dir/none/a.pcap
both_refuse "under /sys" "belongs to the kernel's sysfs file system" /sys/kernel/a.pcap
cat >$dir/two.conf <<CONF
[rocemu0]
port = ring:cg:a
ip = 10.69.1.1/24
capture = $dir/same.pcap
[rocemu1]
port = ring:cg:b
ip = 10.69.1.2/24
capture = $dir/same.pcap
CONF
refused "config: two devices, one capture file" "devices rocemu0 and rocemu1 both capture to $dir/same.pcap" -- \
	"$ROCEMU" run --config $dir/two.conf -- ibv_devices

# --- a file another rocemu is writing --------------------------------------
timeout 60 "$ROCEMU" port --port ring:lk:a --ip 10.69.2.1/24 --capture $dir/busy.pcap \
	--ping 10.69.2.1 --count 3 --stay --duration 30 >$dir/first.out 2>$dir/first.err &
first=$!
pids+=($first)
for _ in $(seq 200); do
	grep -q "gid\[1\]" $dir/first.out 2>/dev/null && break
	kill -0 $first 2>/dev/null || break
	sleep 0.1
done
refused "run: a capture file another rocemu writes" "--capture $dir/busy.pcap: another rocemu is writing it" -- \
	"$ROCEMU" run --port ring:lk2:a --ip 10.69.2.2 --capture $dir/busy.pcap -- ibv_devices
refused "port: a capture file another rocemu writes" "--capture $dir/busy.pcap: another rocemu is writing it" -- \
	"$ROCEMU" port --port ring:lk3:a --ip 10.69.2.3 --capture $dir/busy.pcap --duration 1
# the library, without the launcher's check: the device does not open
ROCEMU_CONFIG= ROCEMU_DEVICE=$(printf 'port=ring:lk4:a\nip=10.69.2.4/24\ncapture=%s' $dir/busy.pcap) \
	LD_LIBRARY_PATH=$BUILD/verbs-provider timeout 30 ibv_devinfo >$dir/lib.out 2>&1
rc=$?
if [ $rc != 0 ] && grep -q "busy.pcap: another rocemu is writing it" $dir/lib.out; then
	echo "ok: the library refuses it too (ibv_devinfo status $rc)"
else
	echo "FAIL: library with a busy capture file: status $rc"; cat $dir/lib.out; fail=1
fi
kill -TERM $first
wait $first
rc=$?
frames=$(awk '$1 == "capture_frames" {print $2}' $dir/first.out)
# frames in the file, rocemu's capture-point record apart
n=$("$ROCEMU" inspect --json $dir/busy.pcap 2>$dir/insp.err | "$PY" -c 'import json,sys; f=json.load(sys.stdin)["frames"]; print(f["total"] - f["rocemu_records"])')
if [ $rc = 0 ] && [ -n "$frames" ] && [ "$frames" -ge 1 ] && [ "$n" = "$frames" ] && [ ! -s $dir/insp.err ]; then
	echo "ok: the first writer's file is whole: $n frames, as its capture_frames says"
else
	echo "FAIL: first writer: status $rc, capture_frames '$frames', frames in file '$n'"
	cat $dir/first.out $dir/first.err $dir/insp.err
	fail=1
fi

# --- read-only directory, full disk (a tmpfs in a private mount namespace) --
if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null; then
	skipped="read-only directory and full disk need root and unshare -m"
else
	mkdir $dir/ro
	unshare -m bash -c 'mount -t tmpfs -o ro,size=64k tmpfs "$1/ro" && shift && exec "$@"' \
		sh $dir "$ROCEMU" run --port ring:ro:a --ip 10.69.3.1 --capture $dir/ro/a.pcap \
		-- ibv_devices >$dir/out 2>$dir/err
	rc=$?
	if [ $rc = 2 ] && grep -q -- "--capture $dir/ro/a.pcap: cannot create it in $dir/ro: Read-only file system" $dir/err; then
		echo "ok: read-only directory: $(cat $dir/err)"
	else
		echo "FAIL: read-only directory: status $rc"; cat $dir/out $dir/err; fail=1
	fi

	# `rocemu port`: pings to itself (looped back, two frames each) fill 64 KiB
	mkdir $dir/full
	unshare -m bash -c 'mount -t tmpfs -o size=64k tmpfs "$1/full" || exit 99
		"$2" port --port ring:fd:a --ip 10.69.4.1/24 --capture "$1/full/a.pcap" \
			--ping 10.69.4.1 --count 600 --interval 0 >"$1/port.out" 2>"$1/port.err"
		rc=$?; cp "$1/full/a.pcap" "$1/a.pcap"; exit $rc' sh $dir "$ROCEMU"
	rc=$?
	written=$(awk '$1 == "capture_frames" {print $2}' $dir/port.out)
	lost=$(awk '$1 == "capture_frames_not_written" {print $2}' $dir/port.out)
	records=$("$PY" - $dir/a.pcap <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
off, n = 24, 0
while off + 16 <= len(data):
    caplen = struct.unpack("<I", data[off + 8:off + 12])[0]
    if off + 16 + caplen > len(data):
        break
    rec = data[off + 16:off + 16 + caplen]
    off += 16 + caplen
    # rocemu's capture-point record (EtherType 0x88B5, "RCMU") is no frame
    if not (rec[12:14] == b"\x88\xb5" and rec[14:18] == b"RCMU" and rec[19] == 1):
        n += 1
# a whole number of records, nothing after the last
print(n if off == len(data) else "cut")
PY
)
	if [ $rc = 1 ] && [ -n "$written" ] && [ "$records" = "$written" ] && [ "${lost:-0}" -gt 0 ] &&
		grep -qE "^rocemu port: rocemu0: capture $dir/full/a.pcap FAILED: No space left on device; $written frames written, $lost NOT written$" $dir/port.err &&
		grep -q "600/600 echo requests" $dir/port.out; then
		echo "ok: full disk, rocemu port: status 1, $records whole frames in the file = capture_frames, $lost not written, said loudly"
	else
		echo "FAIL: full disk, rocemu port: status $rc, capture_frames '$written', records '$records', not written '$lost'"
		cat $dir/port.err; grep -E "capture|echo" $dir/port.out
		fail=1
	fi
	"$ROCEMU" inspect --check $dir/a.pcap >$dir/insp.out 2>$dir/insp.err
	if [ $? = 0 ] && [ ! -s $dir/insp.err ]; then
		echo "ok: the cut file reads cleanly (inspect --check, no warning)"
	else
		echo "FAIL: inspect on the cut file"; cat $dir/insp.out $dir/insp.err; fail=1
	fi

	# `rocemu run`: ibv_rc_pingpong over memif, host A's capture on a full disk
	port=$((20000 + ($$ % 20000)))
	unshare -m bash -c 'mount -t tmpfs -o size=64k tmpfs "$1/full" || exit 99
		shift; exec "$@"' sh $dir \
		timeout -s KILL 120 "$ROCEMU" run --port memif:server:$dir/m.sock --ip 10.69.5.1/24 \
		--capture $dir/full/s.pcap -- ibv_rc_pingpong -g 1 -p $port -n 200 -s 4096 \
		>$dir/s.log 2>&1 &
	srv=$!
	pids+=($srv)
	pair_wait_listen "" $srv $port
	timeout -s KILL 120 "$ROCEMU" run --port memif:client:$dir/m.sock --ip 10.69.5.2/24 \
		-- ibv_rc_pingpong -g 1 -p $port -n 200 -s 4096 127.0.0.1 >$dir/c.log 2>&1
	rc_c=$?
	wait $srv
	rc_s=$?
	if [ $rc_s = 0 ] && [ $rc_c = 0 ] &&
		grep -qE "^rocemu: rocemu0: capture $dir/full/s.pcap FAILED: No space left on device; [0-9]+ frames written, [1-9][0-9]* NOT written$" $dir/s.log; then
		echo "ok: full disk under rocemu run: the program succeeds, the library says: $(grep FAILED $dir/s.log)"
	else
		echo "FAIL: full disk under rocemu run: server $rc_s, client $rc_c"
		cat $dir/s.log $dir/c.log
		fail=1
	fi
fi
if [ $fail = 0 ] && [ -n "$skipped" ]; then
	echo "SKIP: $skipped (everything else passed)"
	exit 77
fi
exit $fail
