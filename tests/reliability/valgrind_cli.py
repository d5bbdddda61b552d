#!/usr/bin/env python3
"""Valgrind memcheck over the release CLI on real traces (issue 6: "Valgrind-clean on the
CLI for the real traces").

usage: valgrind_cli.py WORKDIR   (PT_CLI: the release perftracker, PT_TRACES: the real
traces, PT_MAKE_SEEDS: fuzz/make_seeds for one native raw trace)

The sanitizer trees check the same code with ASan+UBSan; this checks the optimised
binary users run, whose code differs (inlining, vectorised string scans), for reads of
uninitialised memory, invalid accesses and definite leaks. Kept short for CI: two ranks
of DLRM (gzip), the ROCm trace (no distributedInfo), the CPU-only trace, a native raw
trace, summaries of them analysed again, and a corrupt file among them. Any memcheck
error fails the test (--error-exitcode); SKIP (77) without valgrind or the traces.
"""
import glob
import os
import shutil
import subprocess
import sys

CLI = os.environ.get("PT_CLI", "perftracker")
TRACES = os.environ.get("PT_TRACES", "")
MAKE_SEEDS = os.environ.get("PT_MAKE_SEEDS", "")
VALGRIND = ["valgrind", "--tool=memcheck", "--error-exitcode=99", "--leak-check=full",
            "--errors-for-leak-kinds=definite", "--show-leak-kinds=definite", "--track-origins=yes",
            "--quiet"]


def run(what, args):
    proc = subprocess.run(VALGRIND + [CLI, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
    err = proc.stderr.decode("utf-8", "replace")
    memcheck = [line for line in err.splitlines() if line.startswith("==")]
    if proc.returncode == 99 or memcheck:
        print(f"FAIL {what}: memcheck reported errors:\n" + "\n".join(memcheck[:60]))
        sys.exit(1)
    print(f"ok   {what}: exit {proc.returncode}, no memcheck errors")
    return proc.returncode


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    if not shutil.which("valgrind"):
        print("SKIP: valgrind is not installed (scripts/install-deps.sh installs it)")
        sys.exit(77)
    picks = sorted(glob.glob(os.path.join(TRACES, "dlrm-8rank", "worker[01]_*.json.gz")))
    picks += [os.path.join(TRACES, "hta", "mi250_minitoy_train_rocm.json.gz"),
              os.path.join(TRACES, "bad-input", "rank_non_gpu.json.gz")]
    if not TRACES or not all(os.path.isfile(p) for p in picks) or len(picks) < 4:
        print(f"SKIP: the real traces are not at {TRACES!r} (../shared/data/traces)")
        sys.exit(77)
    work = os.path.abspath(sys.argv[1])
    shutil.rmtree(work, ignore_errors=True)
    job = os.path.join(work, "job")
    os.makedirs(job)
    for p in picks:
        os.symlink(p, os.path.join(job, os.path.basename(p)))
    with open(os.path.join(job, "broken.json"), "w") as f:
        f.write('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur"')
    if MAKE_SEEDS:
        subprocess.run([MAKE_SEEDS, "native", os.path.join(job, "node0_5_10005.ptrace"), "--rank", "5",
                        "--workers", "8"], check=True)
    rc = run("analyze on real traces (+ a native trace, a broken file)",
             ["analyze", "-q", "-j", "2", "-o", os.path.join(work, "out"), job])
    if rc != 3:
        sys.exit(f"FAIL: analyze exited {rc}, expected 3 (the broken file is skipped)")
    summaries = os.path.join(work, "summaries")
    os.makedirs(summaries)
    for p in picks[:2]:
        run(f"summarize {os.path.basename(p)}",
            ["summarize", p, "-o", os.path.join(summaries, os.path.basename(p).split(".")[0] + ".ptsum")])
    run("analyze on summaries", ["analyze", "-q", "-o", os.path.join(work, "out-summaries"), summaries])
    print("PASS: the release CLI is Valgrind-clean on the real traces")


if __name__ == "__main__":
    main()
