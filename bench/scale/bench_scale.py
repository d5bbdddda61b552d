#!/usr/bin/env python3
"""The analysis at scale (issue 21): `perftracker analyze` over synthetic worker summaries
(`perftracker synth --format summary`, one slow data loader). Prints, in one run:

  - analysis time at each size and the ratio largest/smallest (linear growth: <= the
    ratio of workers + 1), and the ratio -j2 / -j1 at the largest size (CPU seconds too:
    on a loaded machine wall time says little);
  - report.json's size at each size (bounded form above 4,096 workers: <= 50 MB at 100k),
    and the parts' size beside it;
  - peak RSS against the summaries' size on disk (the goal: <= 2x).

The 100k fleet takes minutes to generate: --fleet-dir keeps fleets between runs (a folder
per size, made once: `--fleet-dir /work/scale-data`). This is a benchmark, not a CI test.

  bench/scale/bench_scale.py [--cli build/bin/perftracker] [--sizes 10000,100000]
                             [--fleet-dir DIR] [--repeat 1]
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def fleet(cli, root, n):
    """The fleet of n summaries under root (made once, kept), and its answer key."""
    job = os.path.join(root, f"fleet{n}")
    if not os.path.exists(os.path.join(job, "expected.json")):
        shutil.rmtree(job, ignore_errors=True)
        t0 = time.perf_counter()
        subprocess.run([cli, "synth", "--fault", "slow_dataloader", "--rank", str(n * 7 // 9), "-n", str(n),
                        "--format", "summary", "-j", "2", "-o", job], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(f"  (generated {n} summaries in {time.perf_counter() - t0:.0f} s)")
    with open(os.path.join(job, "expected.json")) as f:
        return job, json.load(f)


def warm(job):
    """Reads the fleet's files once, so every timed analysis finds them in the page cache:
    the first one after a bench that wrote gigabytes (bench_tree) otherwise reads 352 MB
    from the disk, which made -j2 look 1.3x slower than -j1 (it ran first)."""
    for name in os.listdir(job):
        with open(os.path.join(job, name), "rb") as f:
            while f.read(1 << 20):
                pass


def analyze(cli, job, out, threads):
    """One analysis under /usr/bin/time: (wall s, cpu s, peak RSS bytes, report)."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = ["/usr/bin/time", "-f", "%e %U %S %M", cli, "analyze", "--quiet", "-j", str(threads), "-o", out, job]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 3):
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    wall, user, system, rss_kb = p.stderr.strip().splitlines()[-1].split()
    with open(os.path.join(out, "report.json")) as f:
        report = json.load(f)
    return float(wall), float(user) + float(system), int(rss_kb) * 1024, report


def disk_bytes(folder, pattern):
    return sum(os.path.getsize(p) for p in glob.glob(os.path.join(folder, pattern)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=os.environ.get("PT_CLI", "build/bin/perftracker"))
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--fleet-dir", default=None, help="keep fleets here (default: a temporary folder)")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    root = args.fleet_dir or tempfile.mkdtemp(prefix="pt-bench-scale-")
    out_root = tempfile.mkdtemp(prefix="pt-bench-scale-out-")
    try:
        best = {}
        for n in sizes:
            job, expected = fleet(args.cli, root, n)
            warm(job)
            runs = [analyze(args.cli, job, os.path.join(out_root, f"out{n}"), 2) for _ in range(args.repeat)]
            wall, cpu, rss, report = min(runs, key=lambda r: r[0])
            out = os.path.join(out_root, f"out{n}")
            summaries = disk_bytes(job, "*.ptsum")
            report_bytes = os.path.getsize(os.path.join(out, "report.json"))
            parts = disk_bytes(os.path.join(out, "parts"), "*.json")
            culprit = expected["findings"][0]["workers"] if expected["findings"] else []
            named = report["diagnosis"]["findings"][0]["workers"] if report["diagnosis"]["findings"] else []
            best[n] = (wall, cpu)
            print(f"{n:7d} workers: analyze -j2 {wall:6.1f} s wall {cpu:6.1f} s cpu   peak RSS {rss / 2**20:6.0f} MiB = "
                  f"{rss / summaries:4.2f}x the summaries ({summaries / 2**20:.0f} MiB on disk)   report.json "
                  f"{report_bytes / 2**20:5.1f} MiB (parts {parts / 2**20:.0f} MiB)   culprit {culprit} named "
                  f"{'yes' if named == culprit else 'NO: ' + str(named[:4])}")
        large = sizes[-1]
        if len(sizes) > 1:
            ratio = best[large][1] / best[sizes[0]][1]
            print(f"\ncpu ratio {large}/{sizes[0]} workers: {ratio:.2f} (linear = {large / sizes[0]:.0f}; must be "
                  f"<= {large / sizes[0] + 1:.0f})")
        job, _ = fleet(args.cli, root, large)
        warm(job)
        wall1, cpu1, rss1, _ = analyze(args.cli, job, os.path.join(out_root, "out-j1"), 1)
        wall2, cpu2 = best[large]
        print(f"{large} workers: -j1 {wall1:.1f} s wall ({cpu1:.1f} s cpu, peak RSS {rss1 / 2**20:.0f} MiB), -j2 "
              f"{wall2:.1f} s wall: -j2/-j1 = {wall2 / wall1:.2f} (load average now "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    finally:
        shutil.rmtree(out_root, ignore_errors=True)
        if not args.fleet_dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
