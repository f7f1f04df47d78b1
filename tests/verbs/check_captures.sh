# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the program-pair tests (pair.sh, pair_veth.sh, ...):
#   check_captures FILE.pcap...
# Each capture must hold RoCEv2 frames, decode in tshark without a malformed
# frame or an error-level expert note, and have every ICRC verified
# independently (icrc_check.py: zlib for every frame, cross-checked with
# scapy on a sample). Returns non-zero if any capture fails.
#   cap_awk FILE.pcap [AWK OPTIONS] 'PROGRAM'
# runs an awk program over the one tshark pass of FILE (made by
# check_captures, or now), one line per frame, columns named by variables:
# $OP BTH opcode, $MALF malformed marker, $SEV expert severities, $DQP BTH
# destination QP, $MAD MAD attribute ids, $LEN frame length, $IP4 / $IP6
# source address, $DS IPv4 DS field, $UDP UDP destination port, $ARP ARP
# opcode, $TCP TCP source port (empty where the frame has no such field). A
# test that wants more of a capture asks this file, not tshark again: each
# tshark pass over a capture of a bandwidth test costs seconds.
# Needs PY and SRC set; bash. CHECK_TSHARK_OPTS: more tshark options (the
# interop tests accept rxe's zero UDP checksums over IPv6 with it).
cap_fields() {
	# The programs' payload is arbitrary bytes: keep Wireshark's payload
	# heuristics (RPC-over-RDMA, SMB Direct, ...) from dissecting it as theirs.
	local nohe="${CHECK_TSHARK_OPTS:-} --disable-heuristic eth_over_ib" # a payload that starts like an ethertype
	local h f=$1 st
	for h in smc smb_direct rpcordma nvme-rdma lnet iser infiniband.eoib infiniband_sdp fcoib; do
		nohe="$nohe --disable-protocol $h"
	done
	# tshark must finish: counts from a run cut short by the timeout (or one
	# that failed) are partial and prove nothing. The timeout only guards
	# against a hang, it is no deadline. The column order is cap_awk's.
	timeout 1200 tshark -n $nohe -r "$f" -T fields -E separator=/t \
		-e infiniband.bth.opcode -e _ws.malformed -e _ws.expert.severity \
		-e infiniband.bth.destqp -e infiniband.mad.attributeid -e frame.len \
		-e ip.src -e ipv6.src -e ip.dsfield -e udp.dstport -e arp.opcode -e tcp.srcport \
		>"$f.fields.tmp" 2>"$f.fields.err"
	st=$?
	if [ $st -ne 0 ]; then
		echo "capture $f: tshark exited $st: $(head -c 300 "$f.fields.err")"
		rm -f "$f.fields.tmp" "$f.fields.err"
		return 1
	fi
	mv "$f.fields.tmp" "$f.fields"
	rm -f "$f.fields.err"
}

cap_awk() {
	local f=$1
	shift
	# made after the capture was written, or made again now
	[ "$f.fields" -nt "$f" ] || cap_fields "$f" || return 1
	awk -F'\t' -v OP=1 -v MALF=2 -v SEV=3 -v DQP=4 -v MAD=5 -v LEN=6 -v IP4=7 -v IP6=8 \
		-v DS=9 -v UDP=10 -v ARP=11 -v TCP=12 "$@" "$f.fields"
}

check_captures() {
	local f n bad rc=0 have=()
	for f in "$@"; do
		if [ ! -s "$f" ]; then echo "capture $f: missing"; rc=1; continue; fi
		# one tshark pass: per frame the BTH opcode (RoCEv2 decoded), the
		# malformed marker and the expert severities (error = 0x800000).
		if ! cap_fields "$f"; then rc=1; continue; fi
		read -r n bad < <(cap_awk "$f" '$OP != "" { n++ }
				{ b = ($MALF != ""); k = split($SEV, s, ",")
				  for (i = 1; i <= k; i++) if (s[i] + 0 >= 8388608) b = 1
				  bad += b }
				END { print n + 0, bad + 0 }')
		echo "capture $(basename "$f"): $n RoCEv2 frames, $bad malformed/error (tshark)"
		[ "$n" -gt 0 ] && [ "$bad" -eq 0 ] || rc=1
		have+=("$f")
	done
	# one process for every capture: importing scapy costs ~2 s
	[ ${#have[@]} -eq 0 ] || $PY "$SRC/tests/verbs/icrc_check.py" "${have[@]}" || rc=1
	return $rc
}
