#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# `rocemu run` with the ibverbs-utils device tools, and its error lines:
# ibv_devices and ibv_devinfo -v see the configured device (name, GUID from
# the MAC, active port, RoCE v2 GIDs); a program without libibverbs, a bad
# port option and a broken config file each get exactly one error line.
set -u
. "$(dirname "$0")/pair_lib.sh"
pair_need_prog ibv_devinfo ibverbs-utils
dir=$(mktemp -d /tmp/rocemu-launch-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail=0
check() { # description, command status, grep pattern, file
	if [ "$2" -ne 0 ] || ! grep -qE -- "$3" "$4"; then
		echo "FAIL: $1 (status $2, wanted /$3/)"; cat "$4"; fail=1
	else
		echo "ok: $1"
	fi
}
one_line() { # description, expected status, pattern, file, status
	if [ "$5" -ne "$2" ] || [ "$(wc -l <"$4")" -ne 1 ] || ! grep -qE -- "$3" "$4"; then
		echo "FAIL: $1 (status $5, wanted $2 and one line /$3/)"; cat "$4"; fail=1
	else
		echo "ok: $1: $(cat "$4")"
	fi
}
port=(--port ring:ln:a --ip 10.66.0.1/24 --ip fd66::1/64 --mac 02:00:00:66:00:01)

timeout 30 "$ROCEMU" run "${port[@]}" -- ibv_devices >$dir/devices 2>&1
check "ibv_devices lists rocemu0 with the MAC's EUI-64" $? "rocemu0[[:space:]]+000000fffe660001" $dir/devices

timeout 30 "$ROCEMU" run "${port[@]}" -- ibv_devinfo -v >$dir/devinfo 2>&1
st=$?
check "ibv_devinfo -v: hca_id" $st "hca_id:[[:space:]]+rocemu0" $dir/devinfo
check "ibv_devinfo -v: firmware = rocemu version" $st "fw_ver:[[:space:]]+[0-9]+\.[0-9]+\.[0-9]+" $dir/devinfo
check "ibv_devinfo -v: port active" $st "state:[[:space:]]+PORT_ACTIVE" $dir/devinfo
check "ibv_devinfo -v: Ethernet link layer" $st "link_layer:[[:space:]]+Ethernet" $dir/devinfo
check "ibv_devinfo -v: IPv4 GID, RoCE v2" $st "GID\[ *1\]:[[:space:]]+::ffff:10\.66\.0\.1, RoCE v2" $dir/devinfo
check "ibv_devinfo -v: IPv6 GID, RoCE v2" $st "GID\[ *2\]:[[:space:]]+fd66::1, RoCE v2" $dir/devinfo
check "ibv_devinfo -v: ODP caps" $st "ODP_SUPPORT_IMPLICIT" $dir/devinfo

cat >$dir/two.conf <<CONF
[rocemu0]
port = ring:lc:a
ip = 10.67.0.1/24
[rocemu1]
port = ring:lc:b
ip = 10.67.0.2/24
CONF
timeout 30 "$ROCEMU" run --config $dir/two.conf -- ibv_devinfo -l >$dir/list 2>&1
check "config file with two devices" $? "2 HCAs? found" $dir/list
grep -q rocemu1 $dir/list || { echo "FAIL: rocemu1 missing"; fail=1; }

# ROCEMU_STATS=1: the device's counters are printed when its engine closes
ROCEMU_STATS=1 timeout 30 "$ROCEMU" run "${port[@]}" -- ibv_devinfo >$dir/stats 2>&1
check "ROCEMU_STATS=1 prints the port's counters at close" $? "^rocemu: rocemu0 port tx_frames [1-9]" $dir/stats
if grep -qE "^rocemu: rocemu0 (port|transport) [a-z_0-9]+ 0$" $dir/stats; then echo "FAIL: ROCEMU_STATS=1 printed a counter that is zero"; fail=1; fi
# ROCEMU_STATS=all: every counter, zero or not, so every drop reason shows
ROCEMU_STATS=all timeout 30 "$ROCEMU" run "${port[@]}" -- ibv_devinfo >$dir/allstats 2>&1
check "ROCEMU_STATS=all prints the drop reasons that are zero" $? "^rocemu: rocemu0 port drop_bad_icrc 0" $dir/allstats
grep -q "^rocemu: rocemu0 transport drop_unknown_qp 0" $dir/allstats ||
	{ echo "FAIL: ROCEMU_STATS=all: no transport drop_unknown_qp"; fail=1; }
timeout 30 "$ROCEMU" run "${port[@]}" -- ibv_devinfo >$dir/nostats 2>&1
if grep -q "^rocemu: rocemu0 port" $dir/nostats; then echo "FAIL: counters printed without ROCEMU_STATS"; fail=1; else echo "ok: no counters without ROCEMU_STATS"; fi

timeout 10 "$ROCEMU" run "${port[@]}" -- /bin/true >$dir/e1 2>&1
one_line "program without libibverbs: runs, one note" 0 "does not link libibverbs; starting it anyway" $dir/e1 $?
timeout 10 "$ROCEMU" run --port memif:sideways:/tmp/x --ip 10.0.0.1/24 -- ibv_devices >$dir/e2 2>&1
one_line "bad port option" 2 "memif" $dir/e2 $?
timeout 10 "$ROCEMU" run --prot x -- ibv_devices >$dir/e3 2>&1
one_line "unknown option" 2 "prot" $dir/e3 $?
printf '[rocemu0]\nport = ring:x:a\nip = 10.0.0.999/8\n' >$dir/bad.conf
timeout 10 "$ROCEMU" run --config $dir/bad.conf -- ibv_devices >$dir/e4 2>&1
one_line "broken config file" 2 "bad.conf:3:" $dir/e4 $?
# the library itself, without the launcher's check: one line, empty list
ROCEMU_CONFIG=$dir/bad.conf LD_LIBRARY_PATH=$BUILD/verbs-provider timeout 10 ibv_devices >$dir/e5 2>&1
grep -c "bad.conf:3:" $dir/e5 | grep -qx 1 && echo "ok: library reports the config error once" \
	|| { echo "FAIL: library config error"; cat $dir/e5; fail=1; }
exit $fail
