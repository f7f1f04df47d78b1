#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# rocemu run's private view of /sys/class/infiniband, /sys/class/infiniband_verbs
# and /dev/infiniband (tools/run/view.c), which UCX reads instead of asking
# libibverbs:
#   view.sh root|user|unavailable
#  root:        as the calling user (root in CI): the view's files say what
#               the configuration says (GIDs of --ip, RoCE v2 types, netdev,
#               state, locality), the uverbs node is a read-write character
#               device, the rest of /dev and /sys/class is intact, a program
#               opening the device refreshes the view from its engine (rate),
#               --no-view gives the host's file system, and nothing leaks
#               into the host's mount namespace;
#  user:        the same view for an unprivileged user (nobody, through a user
#               namespace): needs root to become that user, else skipped;
#  unavailable: where neither a mount nor a user namespace can be made (root
#               without CAP_SYS_ADMIN in a user namespace that may create no
#               more): one clear line, and the program still runs.
set -u
. "$(dirname "$0")/mw_lib.sh"
what=$1
pair_need_prog ibv_devinfo ibverbs-utils
dir=$(mktemp -d /tmp/rocemu-view-XXXXXX)
trap 'rm -rf "$dir"' EXIT
chmod 755 "$dir"
fail=0
port=(--port memif:server:$dir/m.sock --ip 10.88.$pair_net.1/24 --ip fd00:88::1/64
	--mac 02:00:00:00:88:01)
d=/sys/class/infiniband/rocemu0

# What the program sees, one "name: value" line each.
cat >$dir/probe.sh <<'PROBE'
d=/sys/class/infiniband/rocemu0
echo "uid: $(id -u)"
echo "uverbs0: $(stat -c '%F %a' /dev/infiniband/uverbs0 2>&1)"
[ -r /dev/infiniband/uverbs0 ] && [ -w /dev/infiniband/uverbs0 ] && echo "uverbs0 rw: yes"
for i in 0 1 2 3; do echo "type $i: $(cat $d/ports/1/gid_attrs/types/$i 2>&1 | sed 's/.*: //')"; done
echo "ndev 1: $(cat $d/ports/1/gid_attrs/ndevs/1)"
for i in 0 1 2 3; do echo "gid $i: $(cat $d/ports/1/gids/$i)"; done
for f in node_guid node_type ports/1/state ports/1/phys_state ports/1/link_layer \
	device/numa_node; do echo "$f: $(cat $d/$f)"; done
echo "local_cpus nonzero: $(tr -d ',0\n' <$d/device/local_cpus | grep -c .)"
echo "uverbs ibdev: $(cat /sys/class/infiniband_verbs/uverbs0/ibdev)"
echo "devices: $(ls /sys/class/infiniband)"
echo "class net: $(ls -d /sys/class/net/lo)"
echo "dev null: $(echo x >/dev/null && head -c 3 /dev/zero | wc -c)"
echo "dev shm: $(ls -d /dev/shm)"
ibv_devinfo -v >/tmp/devinfo.$$ 2>&1
echo "devinfo width: $(sed -n 's/.*active_width:[[:space:]]*\([0-9]*\)X.*/\1/p' /tmp/devinfo.$$)"
echo "devinfo speed: $(sed -n 's/.*active_speed:[[:space:]]*\([0-9.]*\) Gbps.*/\1/p' /tmp/devinfo.$$)"
rm -f /tmp/devinfo.$$
echo "rate after open: $(cat $d/ports/1/rate)"
PROBE

expected() {
	cat <<EOF2
uid: $1
uverbs0: character special file 666
uverbs0 rw: yes
type 0: RoCE v2
type 1: RoCE v2
type 2: RoCE v2
type 3: No such file or directory
ndev 1: rocemu0
gid 0: fe80:0000:0000:0000:0000:00ff:fe00:8801
gid 1: 0000:0000:0000:0000:0000:ffff:0a58:$(printf '%02x01' $pair_net)
gid 2: fd00:0088:0000:0000:0000:0000:0000:0001
gid 3: 0000:0000:0000:0000:0000:0000:0000:0000
node_guid: 0000:00ff:fe00:8801
node_type: 1: CA
ports/1/state: 4: ACTIVE
ports/1/phys_state: 5: LinkUp
ports/1/link_layer: Ethernet
device/numa_node: -1
local_cpus nonzero: 1
uverbs ibdev: rocemu0
devices: rocemu0
class net: /sys/class/net/lo
dev null: 3
dev shm: /dev/shm
EOF2
}

# check_probe LOG UID: the probe's lines as expected; the rate the engine
# reported once open: lanes x lane speed, as ibv_devinfo saw it.
check_probe() {
	sed -n '/^uid:/,/^dev shm:/p' "$1" >$dir/got
	if diff -u <(expected "$2") $dir/got; then echo "ok: the view as configured"; else fail=1; fi
	local w s rate
	w=$(sed -n 's/^devinfo width: //p' "$1") s=$(sed -n 's/^devinfo speed: //p' "$1")
	rate=$(sed -n 's/^rate after open: //p' "$1")
	echo "ibv_devinfo: ${w}X ${s} Gbps; the view's rate once open: $rate"
	if [ -n "$w" ] && [ -n "$s" ] &&
		awk -v w="$w" -v s="$s" -v r="$rate" 'BEGIN {
			split(r, f, " "); exit !(f[1] + 0 == w * s && index(r, "(" w "X") > 0) }'; then
		echo "ok: the view refreshed from the engine"
	else
		echo "FAIL: the view's rate does not match the open device"; fail=1
	fi
}

host_state() {
	ls -d /dev/infiniband /sys/class/infiniband 2>&1
	ls /sys/class/infiniband 2>/dev/null
	grep -c rocemu-view /proc/self/mountinfo
}

case $what in
root)
	host_state >$dir/before
	"$ROCEMU" run "${port[@]}" --no-check -- sh $dir/probe.sh >$dir/view.log 2>&1
	echo "== rocemu run (exit $?)"; cat $dir/view.log
	check_probe $dir/view.log "$(id -u)"
	# --no-view: the host's own file system
	"$ROCEMU" run "${port[@]}" --no-view --no-check -- sh -c \
		'ls /sys/class/infiniband 2>/dev/null; grep -c rocemu-view /proc/self/mountinfo' \
		>$dir/noview.log 2>&1
	echo "== --no-view"; cat $dir/noview.log
	if [ "$(tail -1 $dir/noview.log)" = 0 ] && ! grep -q rocemu0 $dir/noview.log; then
		echo "ok: --no-view shows the host's file system"
	else
		echo "FAIL: --no-view still has a view"; fail=1
	fi
	host_state >$dir/after
	if diff $dir/before $dir/after >/dev/null && [ "$(tail -1 $dir/after)" = 0 ]; then
		echo "ok: the host's /dev and /sys are unchanged"
	else
		echo "FAIL: the host changed:"; diff $dir/before $dir/after; fail=1
	fi
	;;
user)
	[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to become an unprivileged user"; exit 77; }
	command -v setpriv >/dev/null || { echo "SKIP: setpriv missing (util-linux)"; exit 77; }
	mw_as_nobody "$(mw_nobody_rocemu $dir)" run "${port[@]}" --no-check -- sh $dir/probe.sh \
		>$dir/view.log 2>&1
	echo "== rocemu run as nobody (exit $?)"; cat $dir/view.log
	if grep -q 'cannot create a user and mount namespace' $dir/view.log; then
		echo "SKIP: this system allows no unprivileged user namespaces"; exit 77
	fi
	check_probe $dir/view.log 65534
	;;
unavailable)
	[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to drop CAP_SYS_ADMIN in a user namespace"; exit 77; }
	command -v setpriv >/dev/null || { echo "SKIP: setpriv missing (util-linux)"; exit 77; }
	unshare -Ur true 2>/dev/null ||
		{ echo "SKIP: this system lets no one create a user namespace (a chroot?)"; exit 77; }
	unshare -Ur sh -c 'echo 0 >/proc/sys/user/max_user_namespaces &&
		exec setpriv --bounding-set -sys_admin --inh-caps -sys_admin "$@"' sh \
		"$ROCEMU" run "${port[@]}" -- ibv_devices >$dir/log 2>&1
	rc=$?
	echo "== rocemu run without namespaces (exit $rc)"; cat $dir/log
	[ $rc -eq 0 ] || { echo "FAIL: the program did not run"; fail=1; }
	n=$(grep -c '^rocemu run: no private /sys and /dev view (cannot create a user and mount namespace: ' $dir/log)
	[ "$n" = 1 ] || { echo "FAIL: not one clear line about the missing view"; fail=1; }
	grep -q rocemu0 $dir/log || { echo "FAIL: ibv_devices did not list rocemu0"; fail=1; }
	;;
esac
exit $fail
