#!/bin/sh
# Run a libFuzzer target for a bounded time (the `fuzz` suite).
# usage: run_fuzz.sh TARGET SECONDS SEED_CORPUS WORK_DIR
# New inputs go to WORK_DIR/corpus (in the build dir), never into the
# committed seed corpus; a crash leaves its input in WORK_DIR/.
set -eu
target=$1 seconds=$2 seeds=$3 work=$4
mkdir -p "$work/corpus" "$seeds"
# libFuzzer exits 77 on a finding by default: meson would call that "skipped".
# -timeout: one input running 25 s is a hang; its input is saved in WORK_DIR
# (libFuzzer's default, 1200 s, is longer than meson lets the test run, and
# meson's kill leaves nothing behind).
exec "$target" -max_total_time="$seconds" -print_final_stats=1 \
	-error_exitcode=1 -timeout_exitcode=1 -timeout=25 \
	-artifact_prefix="$work/" "$work/corpus" "$seeds"
