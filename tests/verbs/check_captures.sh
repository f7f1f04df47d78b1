# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the program-pair tests (pair.sh, pair_veth.sh):
#   check_captures FILE.pcap...
# Each capture must hold RoCEv2 frames, decode in tshark without a malformed
# frame or an error-level expert note, and have every ICRC verified
# independently (icrc_check.py: zlib for every frame, cross-checked with
# scapy on a sample). Returns non-zero if any capture fails.
# Needs PY and SRC set; bash. CHECK_TSHARK_OPTS: more tshark options (the
# interop tests accept rxe's zero UDP checksums over IPv6 with it).
check_captures() {
	# The programs' payload is arbitrary bytes: keep Wireshark's payload
	# heuristics (RPC-over-RDMA, SMB Direct, ...) from dissecting it as theirs.
	local nohe="${CHECK_TSHARK_OPTS:-} --disable-heuristic eth_over_ib" # a payload that starts like an ethertype
	local h f n bad rc=0
	for h in smc smb_direct rpcordma nvme-rdma lnet iser infiniband.eoib infiniband_sdp fcoib; do
		nohe="$nohe --disable-protocol $h"
	done
	for f in "$@"; do
		if [ ! -s "$f" ]; then echo "capture $f: missing"; rc=1; continue; fi
		# one tshark pass: per frame the BTH opcode (RoCEv2 decoded), the
		# malformed marker and the expert severities (error = 0x800000).
		# tshark must finish: counts from a run cut short by the timeout (or
		# one that failed) are partial and prove nothing. The timeout only
		# guards against a hang, it is no deadline.
		local fields=$f.fields st
		timeout 1200 tshark -n $nohe -r "$f" -T fields -E separator=/t \
			-e infiniband.bth.opcode -e _ws.malformed -e _ws.expert.severity \
			>"$fields" 2>"$fields.err"
		st=$?
		if [ $st -ne 0 ]; then
			echo "capture $f: tshark exited $st: $(head -c 300 "$fields.err")"
			rc=1
			rm -f "$fields" "$fields.err"
			continue
		fi
		read -r n bad < <(awk -F'\t' '$1 != "" { n++ }
				{ b = ($2 != ""); k = split($3, s, ",")
				  for (i = 1; i <= k; i++) if (s[i] + 0 >= 8388608) b = 1
				  bad += b }
				END { print n + 0, bad + 0 }' "$fields")
		rm -f "$fields" "$fields.err"
		echo "capture $(basename "$f"): $n RoCEv2 frames, $bad malformed/error (tshark)"
		[ "$n" -gt 0 ] && [ "$bad" -eq 0 ] || rc=1
		$PY "$SRC/tests/verbs/icrc_check.py" "$f" || rc=1
	done
	return $rc
}
