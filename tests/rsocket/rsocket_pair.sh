#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Two hosts running an unmodified rsocket program pair (rstream, riostream,
# or a sockets program under librspreload) under `rocemu run`:
#   rsocket_pair.sh memif|veth [--expect WHAT,...] SERVER-ARGV... -- CLIENT-ARGV...
# As tests/verbs/rdmacm_pair.sh (@A@ is host A's address, @PORT@ a port of
# this run; memif: one namespace, veth: two), and then, in host B's capture
# decoded by tshark, the rsocket protocol itself (docs/rdmacm.md, "rsockets"):
#  - the REQ's and the REP's rdma_cm private data are rsocket connection data:
#    version 1, a target SGL of 2 entries;
#  - each direction carries RDMA WRITE WITH IMMEDIATE data messages
#    (immediate 0x0.......) and credit updates that grant a buffer (immediate
#    0x8......., 16-byte write), and a DISCONNECT (immediate 0xe0000000);
#  - --expect iomap: iomap entries (immediate 0xc......., 24-byte write) and
#    direct RDMA WRITEs (riostream); --expect keepalive: 0-byte RDMA WRITEs.
# Both programs must exit 0 (their own data checks: -T v); both captures must
# decode without malformed or error frames and every ICRC must verify.
set -u
TIMEOUT=${PAIR_TIMEOUT:-200}
. "$ROCEMU_SOURCE_DIR/tests/verbs/pair_lib.sh"
mode=$1
shift
expect=
[ "${1:-}" = --expect ] && { expect=$2; shift 2; }
server=() client=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do server+=("$1"); shift; done
[ $# -gt 0 ] && shift
client=("$@")

# the program: the first word that is not env or a variable (env LD_PRELOAD=...)
for a in "${server[@]}"; do
	case $a in env | *=*) ;; *) prog=$a; break ;; esac
done
pair_require "$prog" rdmacm-utils
[ -e "$BUILD/verbs-provider/librdmacm.so.1" ] || { echo "SKIP: rocemu's librdmacm not built (librdmacm-dev missing)"; exit 77; }
for a in "${server[@]}"; do
	case $a in *librspreload*) [ -e "${a#*=}" ] || { echo "SKIP: ${a#*=} missing (librdmacm1)"; exit 77; } ;; esac
done
port=$pair_tcp
if [ "$mode" = memif ]; then
	ipA=10.87.$pair_net.1 ipB=10.87.$pair_net.2
else
	ipA=10.86.0.1 ipB=10.86.0.2
fi
pair_hosts rs "$mode" $ipA $ipB 24
# env LD_PRELOAD=... PROGRAM: the launcher starts env, which links no libibverbs
if [ "${server[0]}" = env ]; then portA+=(--no-check); portB+=(--no-check); fi
export ROCEMU_STATS=1
subst() { local a; for a in "$@"; do a=${a//@A@/$ipA}; printf '%s\n' "${a//@PORT@/$port}"; done; }
mapfile -t sargv < <(subst "${server[@]}")
mapfile -t cargv < <(subst "${client[@]}")

pair_run "" ""
check_captures $dir/a.pcap $dir/b.pcap || fail=1

# The rsocket protocol in host B's capture: opcode, immediate, DMA length,
# and the private data of REQ and REP. tshark shows the immediate once per
# header it finds it in ("v,v"): keep the first.
fields=$(timeout 120 tshark -n -r $dir/b.pcap -T fields -E separator=/t -e ip.src \
	-e infiniband.bth.opcode -e infiniband.immdt -e infiniband.reth.dmalen \
	-e infiniband.cm.req.ip_cm.private -e infiniband.cm.rep.private 2>/dev/null)
summary=$(echo "$fields" | awk -F'\t' -v a=$ipA -v b=$ipB '
	{ split($3, imm, ","); i = tolower(imm[1]); dir = ($1 == a) ? "AB" : "BA"
	  if ($5 != "") req = $5
	  if ($6 != "") rep = $6
	  if (i != "") {
		op = substr(i, 1, 1)
		if (op ~ /^[01]/) n[dir "data"]++
		if (op ~ /^[89]/ && $4 == 16) n[dir "grant"]++
		if (op ~ /^[cd]/ && $4 == 24) n[dir "iomap"]++
		if (i == "e0000000") n[dir "disconnect"]++
	  } else if ($2 == 10 && $4 == 0) {
		n[dir "keepalive"]++ # RDMA WRITE Only, 0 bytes
	  } else if ($2 == 10 || $2 == 8) {
		n[dir "direct"]++ # RDMA WRITE Only or Last, no immediate
	  } }
	END { printf "REQ %s\nREP %s\n", substr(req, 1, 48), substr(rep, 1, 48)
	      for (k in n) printf "%s %d\n", k, n[k] }' | sort)
echo "rsocket messages in host B's capture (direction, kind, count):"
echo "$summary"
conn_ok() { # version 1, IOMAP flag (and NET clear: both hosts little endian), SGL of 2
	local h=$(echo "$summary" | awk -v k=$1 '$1 == k { print $2 }')
	[ "${h:0:4}" = 0102 ] && [ "${h:40:8}" = 00000002 ]
}
conn_ok REQ || { echo "REQ private data is not rsocket connection data v1"; fail=1; }
conn_ok REP || { echo "REP private data is not rsocket connection data v1"; fail=1; }
want="data grant disconnect"
case ",$expect," in *,iomap,*) want="$want iomap direct" ;; esac
case ",$expect," in *,keepalive,*) want="$want keepalive" ;; esac
for w in $want; do
	for d in AB BA; do
		# keepalive and DISCONNECT: one side is enough
		case $w in keepalive | disconnect) d=any ;; esac
		if [ $d = any ]; then
			echo "$summary" | grep -qE "^(AB|BA)$w [1-9]" && continue
		else
			echo "$summary" | grep -q "^$d$w [1-9]" && continue
		fi
		echo "no $w message ($d) in host B's capture"
		fail=1
	done
done
exit $fail
