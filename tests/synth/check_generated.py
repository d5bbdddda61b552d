#!/usr/bin/env python3
"""Generated traces, checked from outside the C code.

Usage: check_generated.py PERFTRACKER WORKDIR

1. `perftracker synth --format kineto-gz` writes a faulty 4-worker job; every file loads
   with Python's json module and has the shape of a Kineto trace (distributedInfo,
   deviceProperties, the vendor's file name, ProfilerStep annotations, kernel args).
2. Per-kernel totals computed here, independently, over the profiled window agree to the
   nanosecond with what `perftracker summarize --json` reports for the same file.
3. The all-reduces are lock-step: the i-th one ends at the same time on every rank.
4. The injected fault is where expected.json says: the faulty rank's named kernel is
   slower than everyone else's.
5. The CLI: --help, bad options (exit 2), --format summary, --size-mb.
"""
import collections
import decimal
import glob
import gzip
import json
import os
import re
import shutil
import subprocess
import sys

CLI, WORK = sys.argv[1], sys.argv[2]
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what)


def run(*args, expect=0):
    proc = subprocess.run([CLI, *args], capture_output=True, text=True)
    check(proc.returncode == expect, f"{' '.join(args)} exited {proc.returncode}, expected {expect}: {proc.stderr.strip()}")
    return proc


def ns(value):
    """Kineto times are microseconds with up to 3 decimals: exact integer nanoseconds."""
    return int(decimal.Decimal(value) * 1000)


def kernel_key(ev):
    args = ev.get("args", {})
    grid, block = args.get("grid", [0, 0, 0]), args.get("block", [0, 0, 0])
    if grid[0] > 0:
        return ev["name"] + "%d_%d_%d|%d_%d_%d" % (*grid, *block)
    return ev["name"]


def load(path):
    with gzip.open(path, "rt") as f:
        return json.load(f, parse_float=decimal.Decimal)


def check_trace(path, doc, world):
    name = os.path.basename(path)
    info = doc.get("distributedInfo", {})
    rank = info.get("rank")
    check(info.get("world_size") == world and info.get("backend") == "nccl", f"{name}: distributedInfo {info}")
    m = re.fullmatch(r"node(\d+)_(\d+)_(\d+)\.json\.gz", name)
    check(m is not None, f"{name}: not <host>_<local_rank>_<pid>.json.gz")
    if m:
        check(int(m.group(1)) == rank // 8 and int(m.group(2)) == rank % 8, f"{name}: host/local rank vs rank {rank}")
    props = doc.get("deviceProperties", [])
    check(len(props) == 8 and props[0].get("name", "").startswith("NVIDIA H100"), f"{name}: deviceProperties")
    events = doc.get("traceEvents")
    check(isinstance(events, list) and len(events) > 1000, f"{name}: traceEvents")
    cats = collections.Counter()
    for ev in events:
        cats[ev.get("cat")] += 1
        check(ev.get("ph") == "X", f"{name}: ph {ev.get('ph')}")
        check(isinstance(ev.get("name"), str) and ev["ts"] >= 0 and ev["dur"] >= 0, f"{name}: malformed {ev}")
        if ev.get("cat") == "kernel":
            args = ev["args"]
            check(len(args["grid"]) == 3 and len(args["block"]) == 3 and args["device"] == rank % 8,
                  f"{name}: kernel args {args}")
            if ev["name"].startswith("nccl"):
                check(args.get("Collective name") == "allreduce" and args.get("Group size") == world and
                      args.get("dtype") == "Float" and args.get("In msg nelems", 0) > 0, f"{name}: NCCL args {args}")
        if len(FAILURES) > 20:
            break
    for cat in ("kernel", "gpu_memcpy", "cuda_runtime", "cpu_op", "python_function", "user_annotation"):
        check(cats[cat] > 0, f"{name}: no {cat} events")
    steps = [ev for ev in events if ev.get("cat") == "user_annotation"]
    check([s["name"] for s in steps] == ["ProfilerStep#10", "ProfilerStep#11", "ProfilerStep#12"],
          f"{name}: steps {[s['name'] for s in steps]}")
    return rank, events


def kernel_totals(events):
    """Per kernel key: executions and nanoseconds inside the profiled window (first step
    start to last step end), clipped to it: the summarizer's definition."""
    steps = [ev for ev in events if ev.get("cat") == "user_annotation"]
    w0 = min(ns(s["ts"]) for s in steps)
    w1 = max(ns(s["ts"]) + ns(s["dur"]) for s in steps)
    totals = collections.defaultdict(lambda: [0, 0])
    for ev in events:
        if ev.get("cat") != "kernel" or ev["name"].startswith("nccl"):
            continue
        a, b = ns(ev["ts"]), ns(ev["ts"]) + ns(ev["dur"])
        inside = (w0 <= a < w1) if a == b else (a < w1 and b > w0)
        if not inside:
            continue
        t = totals[kernel_key(ev)]
        t[0] += 1
        t[1] += max(0, min(b, w1) - max(a, w0))
    return totals


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    out = os.path.join(WORK, "job")
    run("synth", "--fault", "slow_gpu", "-n", "4", "--seed", "3", "--format", "kineto-gz", "-o", out, "--quiet")
    paths = sorted(glob.glob(os.path.join(out, "*.json.gz")))
    check(len(paths) == 4, f"expected 4 traces, found {paths}")
    expected = json.load(open(os.path.join(out, "expected.json")))
    finding = expected["findings"][0]
    check(finding["category"] == "gpu_compute" and finding["workers"] == [3], f"expected.json: {finding}")

    nccl_ends, medians = {}, {}
    for path in paths:
        rank, events = check_trace(path, load(path), 4)
        nccl_ends[rank] = [ns(e["ts"]) + ns(e["dur"]) for e in events
                           if e.get("cat") == "kernel" and e["name"].startswith("nccl")]
        mine = kernel_totals(events)
        proc = run("summarize", path, "--json")
        summary = json.loads(proc.stdout) if proc.returncode == 0 else {"functions": []}
        compared = 0
        for f in summary["functions"]:
            if f["class"] != "compute":
                continue
            count, total = mine.get(f["name"], (0, 0))
            check(count == f["count"], f"rank {rank} {f['name'][:60]}: count {count} vs summary {f['count']}")
            check(abs(total - round(f["total_ms"] * 1e6)) <= 1,
                  f"rank {rank} {f['name'][:60]}: {total} ns vs summary {f['total_ms']} ms")
            compared += 1
        check(compared >= 20, f"rank {rank}: only {compared} kernels compared")
        durs = sorted(ns(e["dur"]) for e in events if e.get("cat") == "kernel" and kernel_key(e) == finding["function"])
        check(len(durs) > 0, f"rank {rank}: the expected kernel never ran")
        medians[rank] = durs[len(durs) // 2] if durs else 0

    ends = list(nccl_ends.values())
    check(all(e == ends[0] for e in ends) and len(ends[0]) > 0, "all-reduce ends differ across ranks")
    check(medians[3] > 1.2 * max(medians[r] for r in (0, 1, 2)), f"faulty kernel medians {medians}")

    # The CLI.
    helped = run("synth", "--help")
    check("--size-mb" in helped.stdout and "--fault" in helped.stdout, "--help lacks options")
    run("synth", "--fault", "nope", "-o", os.path.join(WORK, "x"), expect=2)
    run("synth", "-n", "0", "-o", os.path.join(WORK, "x"), expect=2)
    run("synth", "--fault", "two_slow", "-n", "2", "-o", os.path.join(WORK, "x"), expect=2)
    run("synth", "-n", "8", expect=2)  # no -o

    summaries = os.path.join(WORK, "summaries")
    run("synth", "--format", "summary", "-n", "20", "--fault", "gc_pause", "--rank", "5,11", "-o", summaries, "--quiet")
    ptsum = sorted(glob.glob(os.path.join(summaries, "*.ptsum")))
    check(len(ptsum) == 20, f"expected 20 summaries, found {len(ptsum)}")
    key = json.load(open(os.path.join(summaries, "expected.json")))
    check(key["findings"][0]["workers"] == [5, 11], f"summary job expected.json {key}")
    check(not glob.glob(os.path.join(summaries, "*.json.gz")) and len(glob.glob(os.path.join(summaries, "*.json"))) == 1,
          "--format summary wrote traces")

    sized = os.path.join(WORK, "sized")
    run("synth", "--size-mb", "4", "-o", sized, "--quiet")
    files = glob.glob(os.path.join(sized, "*.json"))
    check(len(files) == 1, f"--size-mb wrote {files}")
    if files:
        size = os.path.getsize(files[0])
        check(3.4e6 < size < 4.6e6, f"--size-mb 4 wrote {size} bytes")
        with open(files[0]) as f:
            check(len(json.load(f)["traceEvents"]) > 10000, "sized trace too small")

    if FAILURES:
        print(f"{len(FAILURES)} failure(s)")
        return 1
    shutil.rmtree(WORK, ignore_errors=True)
    print("ok: generated JSON valid, kernel totals agree with the summarizer, CLI behaves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
