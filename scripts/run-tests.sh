#!/bin/sh
# Run every test suite: unit, conformance and integration on the plain (gcc)
# build; unit, conformance and fuzz on the clang ASan/UBSan build (libFuzzer
# needs clang, so the fuzz suite runs there only). Prints one closing line "N passed, N failed, N skipped"
# over all runs. Exit status: non-zero if anything failed.
set -u
build=${1:-build}
asan=${2:-build-asan}
here=$(cd "$(dirname "$0")" && pwd)
status=0
logs=""
run() {
	dir=$1; shift
	echo "=== meson test -C $dir $*"
	meson test -C "$dir" --print-errorlogs "$@" || status=1
	cp "$dir/meson-logs/testlog.json" "$dir/meson-logs/testlog-$(echo "$*" | tr -c 'a-z0-9' _).json" 2>/dev/null
	logs="$logs $dir/meson-logs/testlog-$(echo "$*" | tr -c 'a-z0-9' _).json"
}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
run "$build" --suite unit
run "$build" --suite conformance --num-processes 1
# make conformance: rerun the scenarios and regenerate docs/CONFORMANCE.md from this run
echo "=== ninja -C $build conformance"
ninja -C "$build" conformance || status=1
run "$build" --suite integration --num-processes 1
run "$asan" --suite unit
run "$asan" --suite conformance --num-processes 1
run "$asan" --suite fuzz --num-processes 1
/usr/bin/python3 "$here/test-summary.py" $logs || status=1
exit $status
