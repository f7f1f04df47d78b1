#!/bin/sh
# Run one group of conformance scenarios; results go to DIR/GROUP.tsv.
# usage: run_group.sh RUNNER GROUP DIR
set -eu
mkdir -p "$3"
exec "$1" --group "$2" --results "$3/$2.tsv"
