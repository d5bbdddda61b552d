#!/usr/bin/env bash
# `make bench`: every benchmark, each printing ratios against a baseline measured in the
# same run. Benchmarks of an area live in bench/<area>/: executables named bench_*, or a
# CMake target bench_<area> when they need compiling. BUILD is the build tree (default
# build).
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
# Benchmarks that need compiled helpers run as CMake targets (bench_<area>).
for target in bench_collector; do
    if cmake --build "$BUILD" --target help 2>/dev/null | grep -q "$target"; then
        echo "=== cmake --build $BUILD --target $target"
        cmake --build "$BUILD" --target "$target" || { echo "benchmark $target failed" >&2; status=1; }
    fi
done
exit $status
