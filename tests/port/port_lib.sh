# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the port's shell tests. The namespace tests (idle_cpu.sh,
# veth_kernel_peer.sh): rocemu in one network namespace, the Linux kernel in
# another, joined by a veth pair. The memif tests (memif_two_ports.sh,
# memif_reconnect.sh): rocemu processes in the background (port_workdir).
# bash.

skip() { echo "SKIP: $*"; exit 77; }

# port_workdir NAME: a work directory $work (/tmp/rocemu-port-NAME-*) and an
# array pids; at exit every PID in pids gets SIGINT, then SIGKILL, and the
# directory goes unless KEEP is set.
port_workdir() {
	work=$(mktemp -d /tmp/rocemu-port-$1-XXXXXX)
	pids=()
	trap port_workdir_cleanup EXIT
}
port_workdir_cleanup() {
	for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null; done
	sleep 0.3
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	[ -n "${KEEP:-}" ] || rm -rf "$work"
}

# port_cleanup: stop the rocemu port ($pid), delete both namespaces, and the
# work directory unless KEEP is set.
port_cleanup() {
	[ -n "$pid" ] && kill -INT "$pid" 2>/dev/null && sleep 0.5 && kill -KILL "$pid" 2>/dev/null
	ip netns del "$nsr" 2>/dev/null
	ip netns del "$nsk" 2>/dev/null
	[ -n "${KEEP:-}" ] || rm -rf "$work"
}

# port_netns TAG NAME: a work directory $work (/tmp/rocemu-port-NAME-*), the
# namespaces $nsr (rocemu's) and $nsk (the kernel's) with lo up, joined by the
# veth pair $ifr (in $nsr) / $ifk (in $nsk), both still down; all removed at
# exit (port_cleanup, which also stops the port whose PID is in $pid). Skips
# when namespaces or the veth pair cannot be made.
port_netns() {
	nsr=${1}r nsk=${1}k ifr=${1}vr ifk=${1}vk
	work=$(mktemp -d /tmp/rocemu-port-$2-XXXXXX)
	pid=
	trap port_cleanup EXIT
	ip netns add "$nsr" 2>/dev/null || skip "cannot create network namespaces"
	ip netns add "$nsk" || skip "cannot create network namespaces"
	# PORT_VETH_QUEUES=N: N receive and transmit queues on each end
	local q=${PORT_VETH_QUEUES:+numrxqueues $PORT_VETH_QUEUES numtxqueues $PORT_VETH_QUEUES}
	ip link add "$ifr" $q type veth peer name "$ifk" $q || skip "cannot create a veth pair"
	ip link set "$ifr" netns "$nsr"
	ip link set "$ifk" netns "$nsk"
	ip -n "$nsr" link set lo up
	ip -n "$nsk" link set lo up
}

# port_wait_up: wait until the port ($pid) logs "link up" in $work/port.out;
# 1 if it exited first. No deadline: a loaded machine only makes this slower
# (the test's timeout catches a port that never comes up).
port_wait_up() {
	until grep -q "link up" "$work/port.out" 2>/dev/null; do
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.1
	done
}

# port_need_af_xdp: skip (77) when this machine cannot do af_xdp at all:
# DPDK has no af_xdp driver, or the kernel refuses AF_XDP sockets. Checked
# before rocemu runs, so that afterwards every af_xdp failure is rocemu's
# (a failure, never a skip).
port_need_af_xdp() {
	ls /usr/lib/*/dpdk/pmds-*/librte_net_af_xdp.so* >/dev/null 2>&1 ||
		ls /usr/lib/dpdk/pmds-*/librte_net_af_xdp.so* >/dev/null 2>&1 ||
		skip "DPDK has no af_xdp driver (librte_net_af_xdp) here"
	/usr/bin/python3 -c 'import socket; socket.socket(44, socket.SOCK_RAW).close()' 2>/dev/null ||
		skip "the kernel refuses AF_XDP sockets (CONFIG_XDP_SOCKETS)"
}
