# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the middleware tests (UCX, libfabric, Open MPI, librpma under
# `rocemu run`): pair_lib.sh's hosts and runs, and what the captures must
# show about a stack's traffic. bash.
. "$(dirname "${BASH_SOURCE[0]}")/../verbs/pair_lib.sh"

# A clean environment for the stacks: none of the user's UCX_/FI_/OMPI_
# settings leak into a test (each test sets what it documents).
for v in $(env | sed -n 's/^\(\(UCX\|FI\|OMPI\|PMIX\|PMI\)_[A-Za-z0-9_]*\)=.*/\1/p'); do
	unset "$v"
done

# mw_roce PCAP: one tshark pass over PCAP's RoCE frames; sets mw_all (RoCE
# frames), mw_v2 (with DSCP 26: UCX's traffic class on a RoCE v2 GID),
# mw_rc (RC opcodes), mw_ud (UD SENDs) and mw_ops ("count opcode" list).
mw_roce() {
	read -r mw_all mw_v2 mw_rc mw_ud mw_ops < <(timeout 120 tshark -n -r "$1" -Y infiniband.bth \
		-T fields -E separator=/t -e infiniband.bth.opcode -e ip.dsfield.dscp 2>/dev/null |
		awk -F'\t' '{ n++; op = $1 + 0; if ($2 + 0 == 26) v2++
			if (op < 32) rc++; if (op == 100 || op == 101) ud++; ops[op]++ }
			END { s = ""; for (o in ops) s = s ops[o] "x" o " "
			      print n + 0, v2 + 0, rc + 0, ud + 0, s }')
}

# mw_need_cmd CMD PACKAGE: skip (77) without CMD.
mw_need_cmd() {
	command -v "$1" >/dev/null || { echo "SKIP: $1 not installed ($2)"; exit 77; }
}

# mw_nobody_rocemu DIR: copy rocemu and its libraries under DIR so that an
# unprivileged user can run them whatever the build directory's modes; prints
# the copy's rocemu. Needs root and setpriv (the caller skips otherwise).
mw_nobody_rocemu() {
	mkdir -p "$1/b/tools" "$1/b/verbs-provider"
	cp "$ROCEMU" "$1/b/tools/"
	find "$BUILD/verbs-provider" -maxdepth 1 -name 'lib*.so*' ! -type d \
		-exec cp -P {} "$1/b/verbs-provider/" \;
	chmod -R a+rX "$1"
	echo "$1/b/tools/rocemu"
}

# mw_as_nobody COMMAND...: COMMAND as user nobody, without supplementary groups.
mw_as_nobody() {
	setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
}

# Can an unprivileged user make the user and mount namespace the launcher's
# view needs here? Not in a chroot (the kernel refuses it to a chrooted
# process) nor where user.max_user_namespaces is 0: the parts of a test that
# run as nobody are then skipped, and the test says so.
mw_userns_ok() {
	mw_as_nobody unshare -Urm true 2>/dev/null
}
