# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the program-pair tests (pair.sh, pair_veth.sh):
#   check_captures FILE.pcap...
# Each capture must hold RoCEv2 frames, decode in tshark without a malformed
# frame or an error-level expert note, and (when scapy is there) have every
# ICRC verified independently. Returns non-zero if any capture fails.
# Needs PY and SRC set.
check_captures() {
	# The programs' payload is arbitrary bytes: keep Wireshark's payload
	# heuristics (RPC-over-RDMA, SMB Direct, ...) from dissecting it as theirs.
	local nohe="--disable-heuristic eth_over_ib" # a payload that starts like an ethertype
	local h f n bad rc=0
	for h in smc smb_direct rpcordma nvme-rdma lnet iser infiniband.eoib infiniband_sdp fcoib; do
		nohe="$nohe --disable-protocol $h"
	done
	for f in "$@"; do
		if [ ! -s "$f" ]; then echo "capture $f: missing"; rc=1; continue; fi
		n=$(timeout 120 tshark -n -r "$f" -Y infiniband 2>/dev/null | wc -l)
		bad=$(timeout 120 tshark -n $nohe -r "$f" -Y '_ws.malformed || _ws.expert.severity >= "error"' 2>/dev/null | wc -l)
		echo "capture $(basename "$f"): $n RoCEv2 frames, $bad malformed/error (tshark)"
		[ "$n" -gt 0 ] && [ "$bad" -eq 0 ] || rc=1
		if $PY -c 'import scapy' 2>/dev/null; then
			$PY "$SRC/tests/verbs/icrc_check.py" "$f" || rc=1
		fi
	done
	return $rc
}
