#!/usr/bin/env python3
"""Ingest benchmark: `perftracker analyze` on one large generated Kineto trace, against
`wc -l` (the floor: reading the bytes) and Python's json.load (and pandas, HTA-style)
on the same file, measured in the same run. Prints times, ratios and peak memory.

  bench/ingest/bench_ingest.py [--mb 1000] [--cli build/bin/perftracker] [--keep DIR]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time


def timed(cmd, repeat=1, env=None):
    """Best wall time of `repeat` runs and the peak RSS (KiB) of the best one."""
    best, best_rss = None, 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True, env=env)
        elapsed = time.perf_counter() - t0
        if p.returncode not in (0, 3):
            sys.exit(f"{cmd[0]} failed ({p.returncode}): {p.stderr[-2000:]}")
        rss = int(p.stderr.strip().splitlines()[-1])
        if best is None or elapsed < best:
            best, best_rss = elapsed, rss
    return best, best_rss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=int(os.environ.get("PT_BENCH_MB", "1000")))
    ap.add_argument("--cli", default=os.environ.get("PT_CLI", "build/bin/perftracker"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", help="directory for the trace (reused when present)")
    ap.add_argument("--no-python", action="store_true", help="skip json.load / pandas (slow)")
    args = ap.parse_args()

    tmp = args.keep or tempfile.mkdtemp(prefix="pt-bench-ingest-")
    trace_dir = os.path.join(tmp, f"trace-{args.mb}mb")
    if not os.path.isdir(trace_dir):
        subprocess.run([args.cli, "synth", "--size-mb", str(args.mb), "-o", trace_dir], check=True,
                       stdout=subprocess.DEVNULL)
    trace = [os.path.join(trace_dir, f) for f in os.listdir(trace_dir) if f.endswith(".json") and f != "expected.json"][0]
    size = os.path.getsize(trace)
    subprocess.run(["cat", trace], stdout=subprocess.DEVNULL, check=True)  # page cache warm for everyone
    out = os.path.join(tmp, "out")
    threads = os.cpu_count() or 1
    print(f"trace: {trace} ({size / 2**20:.0f} MiB), {threads} CPUs")

    wc, rss_wc = timed(["wc", "-l", trace], args.repeat)
    one, rss_one = timed([args.cli, "analyze", "--quiet", "--force", "-j", "1", "-o", out, trace], args.repeat)
    many, rss_many = timed([args.cli, "analyze", "--quiet", "--force", "-j", str(threads), "-o", out, trace],
                           args.repeat)
    rows = [("wc -l", wc, rss_wc), ("analyze -j1", one, rss_one), (f"analyze -j{threads}", many, rss_many)]
    if not args.no_python:
        load = "import json,sys; json.load(open(sys.argv[1]))"
        py, rss_py = timed([sys.executable, "-c", load, trace])
        rows.append(("python3 json.load", py, rss_py))
        pandas = "/usr/bin/python3"
        if subprocess.run([pandas, "-c", "import pandas"], capture_output=True).returncode == 0:
            hta = "import json,sys,pandas as pd; pd.DataFrame(json.load(open(sys.argv[1]))['traceEvents'])"
            pd_time, rss_pd = timed([pandas, "-c", hta, trace])
            rows.append(("json.load + pandas.DataFrame (HTA-style)", pd_time, rss_pd))

    print(f"\n{'command':42} {'seconds':>8} {'MB/s':>8} {'peak RSS MiB':>13}")
    for name, t, rss in rows:
        shown = f"{rss / 1024:13.0f}" if rss else f"{'-':>13}"
        print(f"{name:42} {t:8.3f} {size / 2**20 / t:8.0f} {shown}")
    print("\nratios (same file, same run):")
    print(f"  analyze -j{threads} / wc -l      = {many / wc:6.2f}x   (aim: <= 3x)")
    print(f"  analyze -j1 / wc -l              = {one / wc:6.2f}x")
    for name, t, _ in rows[3:]:
        print(f"  {name} / analyze -j{threads} = {t / many:6.1f}x slower than perftracker")
    print(f"  peak RSS of analyze / file size  = {rss_many * 1024 / size:6.3f}   (streaming: memory does not scale with the JSON)")
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
