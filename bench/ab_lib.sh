# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the interleaved A/B scripts (ab.sh, ab_progress_cpu.sh): the
# values per build and measure, and the report of medians and per-round
# ratios. bash, with `shopt -s lastpipe` in the caller (note runs at the
# end of a pipe).
#   ... | note TAG.KEY    one value per run ("-" for a run that printed
#                         none, so that rounds stay aligned)
#   ab_report KEY...      per build and key the median and every value,
#                         then B/A per round: median [min .. max]
declare -A res
note() { local v; v=$(cat); res[$1]+="${v:--} "; }

# the median of the numbers among $*, "none" when there is none
median() {
	printf '%s\n' "$@" | grep -E '^[0-9.]+$' | sort -g |
		awk '{a[NR] = $1} END {print NR ? a[int((NR + 1) / 2)] : "none"}'
}

ab_report() {
	local k tag v r n w=0
	for k in "$@"; do [ ${#k} -gt $w ] && w=${#k}; done
	for k in "$@"; do
		for tag in A B; do
			v=${res[$tag.$k]}
			printf "%s %-${w}s median %-9s all: %s\n" "$tag" "$k" "$(median $v)" "$v"
		done
	done
	echo "B/A per round (a lost run leaves its round out): median [min .. max]"
	for k in "$@"; do
		r=$(paste <(printf '%s\n' ${res[A.$k]}) <(printf '%s\n' ${res[B.$k]}) |
			awk '$1 + 0 > 0 && $2 + 0 > 0 {printf "%.3f\n", $2 / $1}' | sort -g)
		n=$(echo "$r" | grep -c .)
		if [ "$n" -eq 0 ]; then
			printf "%-${w}s none\n" "$k"
		else
			printf "%-${w}s %s [%s .. %s] (%d rounds)\n" "$k" "$(median $r)" \
				"$(echo "$r" | head -1)" "$(echo "$r" | tail -1)" "$n"
		fi
	done
}
