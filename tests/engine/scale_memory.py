#!/usr/bin/env python3
"""The analysis's memory at scale (issue 21: peak RSS <= 2x the summaries' size): what each
more worker costs the analysis, against what its summary costs on disk.

A synthetic job of 4,500 summaries (one slow data loader) and 1,500 of them, both
analysed in the bounded form (PERFTRACKER_REPORT_FULL_MAX=1000, so both reports have the
same shape) with -j1; the peak RSS of each analysis is the kernel's count for that process
(wait4), exact whatever the machine's load. The growth of the peak from 1,500 to 4,500
workers, over the growth of the summaries on disk, must be at most 2 (it was 3.8 when
every decoded worker kept a 120-byte record per function; the fixed cost of the process
is left out by taking the difference).

Also: the same job analysed with -j2 (the reduce writes the parts on two threads) gives
the same report.json and parts, byte for byte but the timestamp.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_common import CLI, FAILURES, TempDir, check, run  # noqa: E402

WORKERS = 4500
FEW = 1500
MAX_GROWTH = 2.0
STAMP = re.compile(rb'"generated_at":\s*"[^"]*"')


def peak_rss_bytes(job, out, threads):
    """Peak RSS of one analysis (its own, from wait4), and its exit status."""
    env = dict(os.environ, PERFTRACKER_REPORT_FULL_MAX="1000")
    p = subprocess.Popen([CLI, "analyze", "--quiet", "-j", str(threads), "-o", out, job], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode not in (0, 3):
        sys.exit(f"FAIL: analyze {job} exited {p.returncode}")
    return usage.ru_maxrss * 1024


def summaries_bytes(folder):
    return sum(os.path.getsize(p) for p in glob.glob(os.path.join(folder, "*.ptsum")))


def written(out):
    """report.json without its timestamp, and every part, as bytes."""
    with open(os.path.join(out, "report.json"), "rb") as f:
        files = {"report.json": STAMP.sub(b'"generated_at": ""', f.read(), count=1)}
    for p in sorted(glob.glob(os.path.join(out, "parts", "*"))):
        with open(p, "rb") as f:
            files[os.path.basename(p)] = f.read()
    return files


def main():
    with TempDir() as tmp:
        job = os.path.join(tmp, "job")
        run("synth", "-n", str(WORKERS), "--format", "summary", "--fault", "slow_dataloader", "--rank", "3500",
            "--seed", "5", "-j", "2", "-o", job)
        few = os.path.join(tmp, "few")
        os.mkdir(few)
        for p in sorted(glob.glob(os.path.join(job, "*.ptsum")))[:FEW]:  # any 1,500 of them
            shutil.copy(p, few)
        rss_few = peak_rss_bytes(few, os.path.join(tmp, "few-out"), 1)
        rss_all = peak_rss_bytes(job, os.path.join(tmp, "all-out"), 1)
        disk = summaries_bytes(job) - summaries_bytes(few)
        growth = (rss_all - rss_few) / disk
        print(f"peak RSS {rss_few / 2**20:.1f} MiB at {FEW} workers, {rss_all / 2**20:.1f} MiB at {WORKERS}; "
              f"the summaries between them {disk / 2**20:.1f} MiB on disk")
        check(growth <= MAX_GROWTH, f"each more worker costs {growth:.2f}x its summary (at most {MAX_GROWTH})")

        peak_rss_bytes(job, os.path.join(tmp, "all-out-j2"), 2)
        one, two = written(os.path.join(tmp, "all-out")), written(os.path.join(tmp, "all-out-j2"))
        check(len(one) > 2 and one.keys() == two.keys(), f"-j2 writes the same {len(one)} files as -j1")
        differing = [name for name in one if one[name] != two.get(name)]
        check(not differing, f"-j2's report and parts are -j1's, byte for byte (differing: {differing[:4]})")
    if FAILURES:
        sys.exit(f"FAIL: {len(FAILURES)} check(s)")
    print("PASS")


if __name__ == "__main__":
    main()
