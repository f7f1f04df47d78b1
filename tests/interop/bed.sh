# SPDX-License-Identifier: BSD-3-Clause
# The Soft-RoCE test bed, sourced by the interop tests (bash): one qemu guest
# running Debian's kernel with rdma_rxe (rxe_image.sh builds it), on a bridge
# in a network namespace of its own, which rocemu joins with an af_packet
# port on a veth:
#
#   netns $bed_ns
#     emu0 10.87.0.1/24 fd00:87::1/64  (kernel TCP + rocemu af_packet:emu0)
#       = veth = emu0br --+
#                         br0 (bridge, no address)
#                tap0 ----+-- qemu: eth0 10.87.0.11/24 fd00:87::11/64, rxe0
#
# Commands run in the guest through its agent (guest/rxe-agent) over a 9p
# share ($bed_run, on the host). Everything started here is stopped and the
# namespace deleted when the shell exits, however it exits; a namespace left
# by a run that was killed with SIGKILL is removed by the next run. The run's
# files (captures, logs, the guest's console) are removed unless
# $ROCEMU_INTEROP_KEEP or $bed_keep is set (interop_rxe.sh: a case failed).
#   bed_up            build or reuse the image, set up the namespace, boot
#   guest_start ID CMD / guest_wait ID SECS / guest_run ID SECS CMD
#   guest_up ID SECS  wait until a job touched $JOB.up (a server listens)
#   on_bed CMD...     CMD inside the namespace (for rocemu)
# Needs root; exits 77 with the reason when the bed cannot run here.
BUILD=${ROCEMU_BUILD_DIR:?set by meson}
SRC=${ROCEMU_SOURCE_DIR:?set by meson}
ROCEMU=$BUILD/tools/rocemu
PY=${PYTHON:-/usr/bin/python3}
bed_cache=${ROCEMU_INTEROP_CACHE:-/var/tmp/rocemu-interop}
bed_ns=rxi$$
bed_ip4=10.87.0.1 bed_ip6=fd00:87::1
rxe_ip4=10.87.0.11 rxe_ip6=fd00:87::11
bed_qemu=

bed_skip() {
	echo "SKIP: $*"
	exit 77
}

bed_log() { echo "[$(date +%T)] $*"; }

bed_down() {
	if [ -n "$bed_qemu" ]; then
		kill "$bed_qemu" 2>/dev/null
		for _ in $(seq 30); do kill -0 "$bed_qemu" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$bed_qemu" 2>/dev/null
		wait "$bed_qemu" 2>/dev/null
		bed_qemu=
	fi
	# anything else still running in the namespace was started by this run
	local p
	for p in $(ip netns pids "$bed_ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
	ip netns del "$bed_ns" 2>/dev/null
	if [ -n "${ROCEMU_INTEROP_KEEP:-}${bed_keep:-}" ]; then
		[ -n "${bed_dir:-}" ] && echo "files of the run kept in $bed_dir"
	else
		rm -rf "${bed_dir:-/nonexistent}"
	fi
}

# Namespaces of earlier runs whose shell is gone (killed with SIGKILL): their
# processes (a qemu, a rocemu) and the namespace itself.
bed_sweep() {
	local ns pid p
	for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^rxi[0-9]+$/ { print $1 }'); do
		pid=${ns#rxi}
		kill -0 "$pid" 2>/dev/null && continue
		for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
		ip netns del "$ns" 2>/dev/null && echo "removed namespace $ns of a killed run"
	done
}

bed_require() {
	[ "$(id -u)" = 0 ] || bed_skip "needs root (network namespaces, a tap for qemu)"
	local t
	for t in qemu-system-x86_64 ip tshark apt-get dpkg-deb cpio busybox setpriv; do
		command -v $t >/dev/null || bed_skip "$t not installed (make deps installs it)"
	done
	[ -c /dev/net/tun ] || bed_skip "no /dev/net/tun"
	[ -x "$ROCEMU" ] || bed_skip "$ROCEMU not built"
	[ -e "$BUILD/verbs-provider/librdmacm.so.1" ] || bed_skip "rocemu's librdmacm not built (librdmacm-dev missing)"
	if objdump -T "$BUILD/verbs-provider/libibverbs.so.1" 2>/dev/null | grep -q __asan_init; then
		bed_skip "sanitizer build: uninstrumented programs cannot load an ASan libibverbs"
	fi
}

bed_up() {
	bed_require
	trap bed_down EXIT
	trap 'exit 143' TERM
	trap 'exit 130' INT
	trap 'exit 129' HUP
	bed_sweep
	bed_dir=$(mktemp -d /tmp/rocemu-interop-XXXXXX)
	bed_run=$bed_dir/guest
	mkdir -p "$bed_run/jobs"
	[ -n "${ROCEMU_INTEROP_KEEP:-}" ] && echo "files kept in $bed_dir"
	local t0=$SECONDS img
	img=$("$SRC/tests/interop/rxe_image.sh" "$bed_cache") || { echo "FAIL: no guest image"; exit 1; }
	bed_log "guest image $img ($((SECONDS - t0)) s), kernel $(cat "$img/kernel-package")"

	ip netns add "$bed_ns" || bed_skip "cannot create a network namespace"
	local n="ip -n $bed_ns"
	$n link set lo up
	$n link add br0 type bridge forward_delay 0 stp_state 0 mcast_snooping 0
	$n tuntap add dev tap0 mode tap
	$n link add emu0 type veth peer name emu0br
	$n link set tap0 master br0
	$n link set emu0br master br0
	ip netns exec "$bed_ns" sysctl -qw net.ipv6.conf.br0.disable_ipv6=1
	$n addr add $bed_ip4/24 dev emu0
	$n addr add $bed_ip6/64 dev emu0 nodad
	# The host's TCP in one-segment frames: rocemu's af_packet port captures
	# what the kernel sends on emu0, and a GSO frame of several segments is
	# captured truncated (IPv4 total length exceeds packet length).
	$n link set emu0 gso_max_segs 1
	for i in br0 tap0 emu0br emu0; do $n link set $i up; done

	# The guest dies with this shell even on SIGKILL (parent-death signal).
	# csum=off: the guest segments its TCP itself (no 64 KiB TSO frames on
	# the bridge, which rocemu's af_packet port would capture truncated).
	t0=$SECONDS
	setpriv --pdeathsig KILL ip netns exec "$bed_ns" qemu-system-x86_64 \
		-name rocemu-interop-rxe -accel tcg -cpu max -smp 1 -m 512 \
		-nodefaults -no-user-config -display none -no-reboot \
		-kernel "$img/vmlinuz" -initrd "$img/initrd.gz" \
		-append "console=ttyS0 panic=-1 quiet rxe.ip4=$rxe_ip4/24 rxe.ip6=$rxe_ip6/64" \
		-netdev tap,id=n0,ifname=tap0,script=no,downscript=no \
		-device virtio-net-pci,netdev=n0,mac=52:54:00:87:00:11,csum=off \
		-fsdev local,id=fs0,path="$bed_run",security_model=none \
		-device virtio-9p-pci,fsdev=fs0,mount_tag=host \
		-serial file:"$bed_dir/console.log" >"$bed_dir/qemu.log" 2>&1 &
	bed_qemu=$!
	local limit=$((SECONDS + ${ROCEMU_INTEROP_BOOT_TIMEOUT:-300}))
	while [ ! -s "$bed_run/ready" ]; do
		if [ -e "$bed_run/failed" ] || ! kill -0 $bed_qemu 2>/dev/null || [ $SECONDS -gt $limit ]; then
			echo "FAIL: the guest did not come up; qemu:"
			cat "$bed_dir/qemu.log"
			echo "console:"
			tail -n 40 "$bed_dir/console.log"
			exit 1
		fi
		sleep 0.2
	done
	bed_log "guest up after $((SECONDS - t0)) s (guest uptime $(cat "$bed_run/ready") s), kernel $(cat "$bed_run/kernel")"
	# the guest's GID indexes of its addresses (rocemu: 0 link-local, then one per --ip)
	rxe_g4=$(awk -v a="$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${rxe_ip4//./ })" '$2 == a { print $1 }' "$bed_run/gids")
	rxe_g6=$(awk '$2 ~ /^fd00:0087:/ { print $1 }' "$bed_run/gids")
	[ -n "$rxe_g4" ] && [ -n "$rxe_g6" ] || { echo "FAIL: rxe0's GID table:"; cat "$bed_run/gids"; exit 1; }
	bed_log "rxe0 GIDs: IPv4 index $rxe_g4, IPv6 index $rxe_g6"
	# the guest's programs find their libraries and rxe0
	if ! guest_run smoke 120 "ibv_devinfo -d rxe0 >/dev/null && rping -h 2>&1 | grep -q 'client side'"; then
		echo "FAIL: the guest's user space does not run:"
		cat "$bed_run/jobs/smoke.out"
		exit 1
	fi
}

on_bed() { ip netns exec "$bed_ns" "$@"; }

# guest_start ID CMD: run the shell command CMD in the guest (job ID)
guest_start() {
	local j=$bed_run/jobs/$1
	rm -f "$j".*
	printf '%s\n' "$2" >"$bed_run/jobs/.$1.tmp"
	mv "$bed_run/jobs/.$1.tmp" "$j.sh"
}

# guest_wait ID SECS: wait for job ID; its output is in $bed_run/jobs/ID.out.
# Returns its exit status, or 124 when it did not end within SECS.
guest_wait() {
	local j=$bed_run/jobs/$1 limit=$((SECONDS + $2))
	while [ ! -e "$j.rc" ]; do
		[ $SECONDS -ge $limit ] && return 124
		kill -0 $bed_qemu 2>/dev/null || return 125
		sleep 0.1
	done
	return "$(cat "$j.rc")"
}

guest_run() {
	guest_start "$1" "$3"
	guest_wait "$1" "$2"
}

# guest_up ID SECS: wait until job ID is ready ($JOB.up) or ended.
guest_up() {
	local j=$bed_run/jobs/$1 limit=$((SECONDS + $2))
	while [ ! -e "$j.up" ] && [ ! -e "$j.rc" ]; do
		[ $SECONDS -ge $limit ] && return 124
		sleep 0.05
	done
	[ -e "$j.up" ]
}
