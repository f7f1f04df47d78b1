#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Integration: open, close and open again af_packet and af_xdp ports on one
# veth end, many times in one process (test_port_lifecycle IFACE), and the
# two kinds one after the other on the same interface (issue 14.1). The
# veth has two queues, so each af_xdp port also opens and closes a socket of
# its own on queue 1 (issue 22.1, port_xsk.c). Needs
# root and network namespaces; exits 77 (skipped) with the reason when it
# cannot run.
#
# usage: lifecycle_veth.sh TEST_PORT_LIFECYCLE
set -u
exe=${1:?usage: $0 TEST_PORT_LIFECYCLE}

. "$(dirname "$0")/port_lib.sh"

[ "$(id -u)" = 0 ] || skip "needs root (network namespaces)"
command -v ip >/dev/null || skip "ip not installed"

# under ASan: DPDK's own leak of one libxdp UMEM per af_xdp close, named
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(dirname "$0")/lsan_af_xdp.supp:fast_unwind_on_malloc=0"
PORT_VETH_QUEUES=2 port_netns pl$$ lifecycle
ip netns exec "$nsr" sysctl -qw "net.ipv6.conf.$ifr.disable_ipv6=1"
ip -n "$nsr" link set "$ifr" up
ip -n "$nsk" link set "$ifk" up
ip netns exec "$nsr" "$exe" "$ifr" && echo "PASS: af_packet and af_xdp reopened on $ifr"
