#!/usr/bin/env bash
# Fuzzes every parser with libFuzzer (fuzz/*.c; docs/security.md says what each covers).
#
#   scripts/fuzz.sh SECONDS [TARGET...]      `make fuzz` runs it with FUZZ_SECONDS (60)
#
# 1. Builds the targets with clang -fsanitize=fuzzer,address,undefined in $FUZZ_BUILD
#    (build-fuzz): the whole library is instrumented, so a bug anywhere downstream of a
#    parser (summarizer, diagnosis, report text) is found too.
# 2. Builds the seed corpora there (fuzz/build_corpus.py: synthetic workers, summaries,
#    frames, and trimmed copies of ../shared/data/traces when present; nothing checked in).
# 3. Runs each target for SECONDS on its seeds, its growing corpus
#    ($FUZZ_BUILD/corpus/<target>, kept between runs) and fuzz/regressions/<target>, and
#    prints the executions per target. Inputs are capped at the max_len of
#    fuzz/<target>.options: every structure a parser knows fits, and an execution stays
#    cheap (the cost of one grows with its input: see docs/security.md, "Fuzzing").
#
# Long campaigns (10 M executions each, outside CI; one target at a time on a shared
# machine):   FUZZ_RUNS=10000000 nice -n 10 scripts/fuzz.sh 0 kineto
# FUZZ_FLAGS adds libFuzzer flags; FUZZ_FLAGS=-entropic=0 about doubles kineto's rate (the
# entropic scheduler took a quarter of its time), worth it when executions are the goal.
# A crash, sanitizer report, leak, broken property, input slower than 10 s or single
# allocation over 1 GB is a failure: the input is saved under $FUZZ_BUILD/crashes/<target>/,
# the script says how to replay it, and it exits 1. Copy the input into
# fuzz/regressions/<target>/ with the fix: tests/reliability replays it from then on.
# Exit 77 (ctest's skip) when clang or its libFuzzer runtime is missing.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
shift || true
build=${FUZZ_BUILD:-$root/build-fuzz}
traces=${PT_TRACES:-$root/../shared/data/traces}
jobs=${JOBS:-$(nproc)}
all_targets=(kineto native summary json protocol coordinator display_path tar)
if (($#)); then targets=("$@"); else targets=("${all_targets[@]}"); fi

cc=${FUZZ_CC:-$(command -v clang || command -v clang-14 || true)}
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }' >"$probe/p.c"
if [[ -z $cc ]] || ! "$cc" -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" 2>/dev/null; then
    echo "fuzz: SKIP: clang with libFuzzer is not available (scripts/install-deps.sh installs clang and libclang-rt-14-dev)" >&2
    exit 77
fi

# -- 1. build ----------------------------------------------------------------------------
# Campaigns may run side by side (one target per core): they build and seed one at a time.
mkdir -p "$build"
exec 9>"$build/.build.lock"
flock 9
fuzz_cflags="-fsanitize=fuzzer-no-link -fsanitize-coverage-ignorelist=$root/fuzz/coverage-ignore.txt -O1 -gline-tables-only"
if [[ ! -f $build/CMakeCache.txt ]] || ! grep -q '^PT_FUZZ:BOOL=ON' "$build/CMakeCache.txt" ||
    ! grep -qxF "CMAKE_C_FLAGS:STRING=$fuzz_cflags" "$build/CMakeCache.txt"; then
    CC=$cc cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Debug -DPT_SANITIZE=address,undefined \
        -DPT_FUZZ=ON -DPT_WEB_CHARTS=OFF -DCMAKE_C_FLAGS="$fuzz_cflags" >/dev/null
fi
build_targets=(make_seeds)
for t in "${targets[@]}"; do build_targets+=("fuzz_$t"); done
cmake --build "$build" -j"$jobs" --target "${build_targets[@]}" >"$build/fuzz-build.log" 2>&1 || {
    tail -40 "$build/fuzz-build.log" >&2
    echo "fuzz: build failed (log: $build/fuzz-build.log)" >&2
    exit 1
}

# -- 2. seeds (rebuilt when the seed tool changed) ----------------------------------------
seeds=$build/seeds
if [[ ! -f $seeds/.stamp || $build/bin/make_seeds -nt $seeds/.stamp ]]; then
    rm -rf "$seeds"
    ASAN_OPTIONS=detect_leaks=0 python3 "$root/fuzz/build_corpus.py" "$build/bin/make_seeds" "$traces" "$seeds" >&2
    touch "$seeds/.stamp"
fi
flock -u 9

# -- 3. fuzz -------------------------------------------------------------------------------
# malloc_context_size: allocation stacks of 8 frames in a report instead of 30 (15% of an
# execution went to recording them); replaying the saved input shows the full stacks.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0:malloc_context_size=8}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
printf '%-14s %12s %8s %10s %8s  %s\n' target executions seconds "exec/s" corpus result
for t in "${targets[@]}"; do
    corpus=$build/corpus/$t crashes=$build/crashes/$t log=$build/fuzz-$t.log
    mkdir -p "$corpus" "$crashes"
    dirs=("$corpus" "$seeds/$t")
    [[ -d $root/fuzz/regressions/$t ]] && dirs+=("$root/fuzz/regressions/$t")
    dict=()
    [[ -f $root/fuzz/$t.dict ]] && dict=(-dict="$root/fuzz/$t.dict")
    max_len=$(sed -n 's/^max_len *= *\([0-9]*\)$/-max_len=\1/p' "$root/fuzz/$t.options" 2>/dev/null || true)
    rc=0
    # FUZZ_SEED/FUZZ_RUNS make a run repeatable (the short run in `make test` uses them,
    # so CI replays the same inputs every time instead of rolling new dice).
    budget=(-max_total_time="$seconds")
    [[ -n ${FUZZ_RUNS:-} ]] && budget=(-runs="$FUZZ_RUNS")
    [[ -n ${FUZZ_SEED:-} ]] && budget+=(-seed="$FUZZ_SEED")
    started=$SECONDS
    "$build/bin/fuzz_$t" "${budget[@]}" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
        -print_final_stats=1 -artifact_prefix="$crashes/" ${max_len:+"$max_len"} "${dict[@]}" ${FUZZ_FLAGS:-} "${dirs[@]}" \
        >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    result=ok
    if ((rc != 0)); then
        result="FAILED (exit $rc)"
        failed+=("$t")
    fi
    printf '%-14s %12s %8s %10s %8s  %s\n' "$t" "${execs:-?}" "$((SECONDS - started))" "${rate:-?}" \
        "$(find "$corpus" -type f | wc -l)" "$result"
done

if ((${#failed[@]})); then
    for t in "${failed[@]}"; do
        echo >&2
        echo "fuzz: $t failed; the end of $build/fuzz-$t.log:" >&2
        grep -E 'ERROR|SUMMARY|fuzz property|runtime error|Test unit written|artifact' "$build/fuzz-$t.log" | head -20 >&2 || true
        for f in "$build/crashes/$t"/*; do
            [[ -f $f ]] || continue
            echo "  replay: $build/bin/fuzz_$t $f" >&2
            echo "  keep:   cp $f $root/fuzz/regressions/$t/ (with the fix)" >&2
        done
    done
    exit 1
fi
