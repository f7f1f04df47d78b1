#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Send rate limits on the wire (issue 15.4): rate_limit_test (argv[1]: the
# program) paces QPs with ibv_modify_qp_rate_limit, IBV_QP_RATE_LIMIT and an
# address vector's static rate and names each paced flow "paced DQPN KBPS
# BURST"; here tshark reads rocemu0's capture, and every paced flow's frames,
# from the first to the last, must not exceed its rate (less the bucket's BURST
# bytes, and 2% for the capture's clock). Frame sizes are the wire's: frame.len
# plus the 4-byte FCS a capture leaves out.
set -u -o pipefail
prog=$1
command -v tshark >/dev/null || { echo "SKIP: tshark not installed"; exit 77; }
dir=$(mktemp -d /tmp/rocemu-rate-XXXXXX)
trap 'rm -rf "$dir"' EXIT
"$prog" "$dir/a.pcap" | tee "$dir/out" || exit 1
grep -q '^paced ' "$dir/out" || { echo "FAIL: no paced flow named"; exit 1; }
[ -s "$dir/a.pcap" ] || { echo "FAIL: no capture"; exit 1; }
fail=0
while read -r _ dqpn kbps burst; do
	tshark -r "$dir/a.pcap" -Y "ip.src == 10.79.6.1 && infiniband.bth.destqp == $dqpn" \
		-T fields -e frame.time_epoch -e frame.len >"$dir/f" 2>/dev/null
	awk -v k=$kbps -v q=$dqpn -v burst=$burst 'NR == 1 { t0 = $1 } { t = $1; b += $2 + 4; n++ }
		END {
			if (n < 10) { printf "FAIL: QPN %s: %d frames in the capture\n", q, n; exit 1 }
			rate = (b - burst) * 8 / (t - t0) / 1000
			printf "QPN %s: %d frames, %d bytes in %.3f s: %.0f kbit/s, limit %d\n", q, n, b, t - t0, rate, k
			if (rate > k * 1.02) { print "FAIL: above the limit"; exit 1 }
		}' "$dir/f" || fail=1
done < <(grep '^paced ' "$dir/out")
exit $fail
