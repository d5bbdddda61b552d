#!/usr/bin/env bash
# `make bench`: every benchmark, each printing ratios against a baseline measured in the
# same run. Benchmarks of an area live in bench/<area>/; each runnable is bench_*.py or
# bench_*.sh. BUILD is the build tree (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
export PT_CLI=$PWD/$BUILD/bin/perftracker
status=0
for b in bench/*/bench_*; do
    [[ -x $b ]] || continue
    echo "=== $b"
    "$b" || { echo "benchmark $b failed" >&2; status=1; }
done
exit $status
