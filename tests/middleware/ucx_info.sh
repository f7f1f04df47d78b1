#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# `ucx_info -d` under `rocemu run` lists UCX's rc_verbs and ud_verbs
# transports on rocemu0:1, and the GIDs UCX reads the types of (from the
# private /sys view, not through libibverbs) are RoCE v2; as the calling
# user and, when that is root, as the unprivileged user nobody.
set -u
. "$(dirname "$0")/mw_lib.sh"
pair_need_prog ucx_info ucx-utils
dir=$(mktemp -d /tmp/rocemu-ucxinfo-XXXXXX)
trap 'rm -rf "$dir"' EXIT
chmod 755 "$dir"
fail=0
port=(--port memif:server:$dir/m.sock --ip 10.89.$pair_net.1/24 --ip fd00:89::1/64)
types='for i in 0 1 2; do
	echo "gid $i type: $(cat /sys/class/infiniband/rocemu0/ports/1/gid_attrs/types/$i)"; done'

# check LOG: transports on rocemu0's memory domain, and the GID types.
check() {
	local tl
	tl=$(awk '/^# Memory domain:/ { md = $4 } /^# +Transport:/ { t = $3 }
		/^# +Device:/ && md == "rocemu0" { print t, $3 }' "$1" | sort -u | tr '\n' ' ')
	echo "UCX transports on rocemu0: $tl"
	for want in "rc_verbs rocemu0:1" "ud_verbs rocemu0:1"; do
		echo "$tl" | grep -qF "$want" || { echo "FAIL: no $want"; fail=1; }
	done
	grep -q '^ucx_info exit 0$' "$1" || { echo "FAIL: ucx_info failed"; fail=1; }
	n=$(grep -c '^gid [012] type: RoCE v2$' "$1")
	[ "$n" = 3 ] || { echo "FAIL: GID types are not RoCE v2"; fail=1; }
}

# run R: ucx_info -d (rocemu run's check accepts it: libuct loads verbs as a
# plugin), then what UCX reads of the GID types, into $dir/log
run() {
	$1 run "${port[@]}" -- ucx_info -d >$dir/log 2>&1
	echo "ucx_info exit $?" >>$dir/log
	$1 run "${port[@]}" --no-check -- sh -c "$types" >>$dir/log 2>&1
}
run "$ROCEMU"
echo "== as uid $(id -u)"; grep -E 'Memory domain|Transport|Device|gid|rocemu|exit' $dir/log
check $dir/log
skip=0
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && ! mw_userns_ok; then
	echo "SKIP (the part as nobody): this system lets no unprivileged user create a user namespace"
	skip=1
elif [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	nobody_rocemu=$(mw_nobody_rocemu $dir)
	run "mw_as_nobody $nobody_rocemu"
	echo "== as nobody"; grep -E 'Memory domain|Transport|Device|gid|rocemu|exit' $dir/log
	check $dir/log
fi
[ $fail = 0 ] && [ $skip = 1 ] && exit 77
exit $fail
