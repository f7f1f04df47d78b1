#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# librpma between two rocemu hosts: librpma's connection and read examples,
# written against the installed <librpma.h> (rpma_example.c, built here with
# the package's pkg-config flags):
#   rpma_pair.sh memif|veth connection|read
# connection: private data both ways, then disconnect seen by both;
# read:       the client reads 1 MiB the server registered and checks it.
# Both must exit 0 and say what they checked; both captures must decode
# cleanly with every ICRC verified and show the rdma_cm connection on QP1
# (REQ, REP, RTU, DREQ, DREP), and for read the RDMA READ.
#  memif: both processes here, no root;
#  veth:  two namespaces joined by a veth pair, af_packet ports.
set -u
TIMEOUT=${PAIR_TIMEOUT:-120}
. "$(dirname "$0")/mw_lib.sh"
mode=$1 what=$2
here=$(cd "$(dirname "$0")" && pwd)
pair_need_prog ibv_devices ibverbs-utils
pkg-config --exists librpma || { echo "SKIP: librpma-dev not installed"; exit 77; }
[ -e "$BUILD/verbs-provider/librdmacm.so.1" ] || { echo "SKIP: rocemu's librdmacm not built"; exit 77; }
if [ "$mode" = veth ]; then
	pair_require ibv_devices ibverbs-utils
	ipA=10.82.0.1 ipB=10.82.0.2
	pair_hosts rpma veth $ipA $ipB 24
else
	ipA=10.81.$pair_net.1 ipB=10.81.$pair_net.2
	pair_hosts rpma local $ipA $ipB 24
fi
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror -O2 -o $dir/rpma_example "$here/rpma_example.c" \
	$(pkg-config --cflags --libs librpma) -libverbs || { echo "FAIL: cannot build rpma_example"; exit 1; }
export ROCEMU_STATS=1
sargv=($dir/rpma_example server $ipA $pair_tcp $what)
cargv=($dir/rpma_example client $ipA $pair_tcp $what)
pair_run "" ""
grep -q "^rpma_example server: $what done$" $dir/a.log || { echo "FAIL: server did not finish"; fail=1; }
grep -q '^rpma_example client: \(read 1 MiB, every byte checked\|private data checked both ways\)$' \
	$dir/b.log || { echo "FAIL: client did not finish"; fail=1; }
check_captures $dir/a.pcap $dir/b.pcap || fail=1
read -r req rep rtu dreq drep reads < <(timeout 60 tshark -n -r $dir/b.pcap -Y infiniband.bth \
	-T fields -e infiniband.bth.destqp -e infiniband.mad.attributeid -e infiniband.bth.opcode \
	2>/dev/null | awk -F'\t' '$1 == 1 && $2 == "0x0010" { q++ } $1 == 1 && $2 == "0x0013" { p++ }
		$1 == 1 && $2 == "0x0014" { t++ } $1 == 1 && $2 == "0x0015" { d++ }
		$1 == 1 && $2 == "0x0016" { e++ } $3 == 12 { r++ }
		END { print q + 0, p + 0, t + 0, d + 0, e + 0, r + 0 }')
echo "host B's capture: REQ $req, REP $rep, RTU $rtu, DREQ $dreq, DREP $drep on QP1; $reads RDMA READ requests"
[ "$req" -gt 0 ] && [ "$rep" -gt 0 ] && [ "$rtu" -gt 0 ] && [ "$dreq" -gt 0 ] && [ "$drep" -gt 0 ] ||
	{ echo "FAIL: the connection's CM messages are not all there"; fail=1; }
[ "$what" = connection ] || [ "$reads" -gt 0 ] || { echo "FAIL: no RDMA READ"; fail=1; }
exit $fail
