#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# `rocemu run` starts any program, as a shell would, with rocemu's
# libibverbs: python3 with pyverbs and a #! script reach the device (one
# note on stderr: the launcher cannot see libibverbs in them), a program
# that links libibverbs gets no note, --no-check silences the note, and a
# file that cannot run gets the shell's status (126 not executable or a
# directory, 127 not found) with one line saying what is wrong.
set -u
. "$(dirname "$0")/pair_lib.sh"
pair_need_prog ibv_devices ibverbs-utils
"$PY" -c 'import pyverbs.device' 2>/dev/null || { echo "SKIP: pyverbs missing (python3-pyverbs)"; exit 77; }
dir=$(mktemp -d /tmp/rocemu-progs-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail=0
port=(--port ring:lpg:a --ip 10.68.0.1/24)

# expect WHAT STATUS OUT_PATTERN ERR_LINES ERR_PATTERN -- COMMAND...: the
# command's status, its stdout matches OUT_PATTERN (empty: anything), its
# stderr has exactly ERR_LINES lines matching ERR_PATTERN (empty: none).
expect() {
	local what=$1 want=$2 outp=$3 lines=$4 errp=$5 rc ok=1
	shift 6
	timeout 60 "$@" >$dir/out 2>$dir/err
	rc=$?
	[ $rc = "$want" ] || ok=0
	[ -z "$outp" ] || grep -qE -- "$outp" $dir/out || ok=0
	[ "$(wc -l <$dir/err)" = "$lines" ] || ok=0
	[ -z "$errp" ] || grep -qE -- "$errp" $dir/err || ok=0
	if [ $ok = 1 ]; then
		echo "ok: $what${errp:+: $(head -1 $dir/err)}"
	else
		echo "FAIL: $what: status $rc (wanted $want)"
		echo "-- stdout"; cat $dir/out; echo "-- stderr"; cat $dir/err
		fail=1
	fi
}

expect "a program linking libibverbs: no note" 0 "rocemu0" 0 "" -- \
	"$ROCEMU" run "${port[@]}" -- ibv_devices

pyverbs='import pyverbs.device as d; print(" ".join(x.name.decode() for x in d.get_device_list()))'
expect "python3 with pyverbs runs and sees rocemu0, with one note" 0 "^rocemu0$" 1 \
	"python3 does not link libibverbs; starting it anyway" -- \
	"$ROCEMU" run "${port[@]}" -- "$PY" -c "$pyverbs"
expect "--no-check: python3 without the note" 0 "^rocemu0$" 0 "" -- \
	"$ROCEMU" run --no-check "${port[@]}" -- "$PY" -c "$pyverbs"
expect "the program's exit status is the launcher's" 3 "" 1 "does not link libibverbs" -- \
	"$ROCEMU" run "${port[@]}" -- "$PY" -c 'import sys; sys.exit(3)'

printf '#!/bin/sh\nexec ibv_devices\n' >$dir/list.sh
chmod +x $dir/list.sh
expect "./script.sh runs, what it starts sees rocemu0, one note" 0 "rocemu0" 1 \
	"list.sh is a script \(/bin/sh\)" -- \
	bash -c 'cd "$0" && exec "$@"' $dir "$ROCEMU" run "${port[@]}" -- ./list.sh
printf '#!%s\n%s\n' "$PY" "$pyverbs" >$dir/app.py
chmod +x $dir/app.py
expect "an executable python script" 0 "^rocemu0$" 1 "app.py is a script \($PY\)" -- \
	"$ROCEMU" run "${port[@]}" -- $dir/app.py

printf 'int main(void) { return 0; }\n' >$dir/file.c
expect "a file that is not executable: 126, says so" 126 "" 1 \
	"file.c: not executable \(chmod \+x it, or name its interpreter" -- \
	"$ROCEMU" run "${port[@]}" -- $dir/file.c
expect "a directory: 126" 126 "" 1 "is a directory" -- \
	"$ROCEMU" run "${port[@]}" -- $dir
expect "a missing path: 127" 127 "" 1 "missing: no such file" -- \
	"$ROCEMU" run "${port[@]}" -- $dir/missing
expect "a name nothing in PATH answers to: 127" 127 "" 1 "rocemu-no-such-program: command not found" -- \
	"$ROCEMU" run "${port[@]}" -- rocemu-no-such-program
mkdir $dir/bin
cp $dir/file.c $dir/bin/notexec
expect "a name in PATH whose file is not executable: 126" 126 "" 1 "bin/notexec: not executable" -- \
	env PATH="$dir/bin:$PATH" "$ROCEMU" run "${port[@]}" -- notexec
exit $fail
