#!/usr/bin/env python3
"""Cross-worker (reduce) step at scale: `perftracker analyze` over 1,024 and 8,192
worker summaries from the synthetic generator. Prints both times, their ratio (linear
growth means <= 9 for 8x the workers) and the summary size per worker.

  bench/scale/bench_scale.py [--cli build/bin/perftracker] [--small 1024] [--large 8192]
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time


def best_time(cmd, repeat):
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True)
        elapsed = time.perf_counter() - t0
        if p.returncode not in (0, 3):
            sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
        best = elapsed if best is None else min(best, elapsed)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=os.environ.get("PT_CLI", "build/bin/perftracker"))
    ap.add_argument("--small", type=int, default=1024)
    ap.add_argument("--large", type=int, default=8192)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="pt-bench-scale-")
    try:
        results = {}
        for n in (args.small, args.large):
            job = os.path.join(tmp, f"job{n}")
            t0 = time.perf_counter()
            subprocess.run([args.cli, "synth", "--fault", "slow_dataloader", "-n", str(n), "--format", "summary",
                            "-o", job], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            gen = time.perf_counter() - t0
            sums = glob.glob(os.path.join(job, "*.ptsum"))
            per_worker = sum(os.path.getsize(s) for s in sums) / len(sums)
            t = best_time([args.cli, "analyze", "--quiet", "-o", os.path.join(job, "out"), job], args.repeat)
            report = os.path.getsize(os.path.join(job, "out", "report.json"))
            results[n] = t
            print(f"{n:6d} workers: analyze {t:7.3f} s   summary {per_worker / 1024:5.1f} KiB/worker   "
                  f"report {report / 2**20:5.1f} MiB   (generated in {gen:.1f} s)")
        ratio = results[args.large] / results[args.small]
        print(f"\nratio {args.large}/{args.small} workers: {ratio:.2f} (linear = {args.large / args.small:.0f}; "
              f"must be <= {args.large / args.small + 1:.0f})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
