"""Per-kernel totals in the summary agree with an independent computation over the same
file with Python's json module (exact integer nanoseconds via Decimal)."""
import gzip
import io
import json
import os
import subprocess
import sys
from decimal import Decimal

from engine_common import TRACES, TempDir, run


def ns(value):
    return int((Decimal(str(value)) * 1000).to_integral_value(rounding="ROUND_HALF_UP"))


COMMITTED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "h200")


def read_text(path):
    if path.endswith(".zst"):  # Python has no zstd module before 3.14: the zstd tool
        return io.StringIO(subprocess.run(["zstd", "-dc", path], check=True, capture_output=True).stdout.decode())
    return gzip.open(path, "rt") if path.endswith(".gz") else open(path)


def python_totals(path):
    with read_text(path) as f:
        doc = json.load(f, parse_float=Decimal)
    events = doc if isinstance(doc, list) else doc["traceEvents"]
    steps = [e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
             and str(e.get("name", "")).startswith("ProfilerStep#")]
    seen, spans = set(), []
    for e in sorted(steps, key=lambda e: ns(e["ts"])):
        if e["name"] not in seen:
            seen.add(e["name"])
            spans.append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
    kernels = [e for e in events if e.get("ph") == "X" and str(e.get("cat", "")).lower() == "kernel"
               and "ts" in e and "dur" in e]
    if spans:
        w0, w1 = min(s for s, _ in spans), max(e for _, e in spans)
    else:
        w0 = min(ns(e["ts"]) for e in kernels)
        w1 = max(ns(e["ts"]) + ns(e["dur"]) for e in kernels)
    totals = {}
    for e in kernels:
        name = e["name"]
        if any(s in name.lower() for s in ("nccl", "rccl", "msccl")):
            continue
        args = e.get("args", {})
        grid, block = args.get("grid"), args.get("block")
        key = name + (f"{grid[0]}_{grid[1]}_{grid[2]}|{block[0]}_{block[1]}_{block[2]}" if grid and grid[0] else "")
        a, b = max(ns(e["ts"]), w0), min(ns(e["ts"]) + ns(e["dur"]), w1)
        totals[key] = totals.get(key, 0) + max(0, b - a)
    return totals


def check(path):
    rc, out, _ = run("summarize", "--json", path)
    summary = json.loads(out)
    ours = {f["name"]: round(f["total_ms"] * 1e6) for f in summary["functions"] if f["class"] == "compute"}
    theirs = python_totals(path)
    top = sorted(theirs, key=theirs.get, reverse=True)[:10]
    for key in top:
        if key not in ours:
            sys.exit(f"FAIL: {path}: top kernel missing from the summary: {key[:120]}")
    compared = 0
    for key, total in ours.items():
        if theirs.get(key) != total:
            sys.exit(f"FAIL: {path}: {key[:120]}: summary {total} ns != python {theirs.get(key)} ns")
        compared += 1
    print(f"ok {os.path.basename(path)}: {compared} kernels agree")
    return compared


def main():
    with TempDir() as tmp:
        job = os.path.join(tmp, "job")
        run("synth", "--fault", "slow_gpu", "-n", "4", "--format", "kineto-gz", "-o", job)
        files = [os.path.join(job, f) for f in sorted(os.listdir(job)) if f.endswith(".json.gz")]
        compared = sum(check(f) for f in files[:2])
        real = [os.path.join(TRACES, "dlrm-8rank", "worker0_step_12.1694128201545.pt.trace.json.gz"),
                os.path.join(TRACES, "hta", "nccl_data.json.gz"),
                os.path.join(TRACES, "tracelens", "mi300_resnet_act_checkpoint.json.gz")]
        # Our own real traces, committed (tests/data/h200): checked in every clone.
        compared += sum(check(os.path.join(COMMITTED, job, "rank1.pt.trace.json.zst"))
                        for job in ("kineto_gc_r1", "kineto_slowdata_r3"))
        if os.path.isdir(TRACES):
            compared += sum(check(f) for f in real)
        else:
            print(f"note: ../shared traces absent ({TRACES}); checked synthetic and committed ones")
    print(f"PASS: {compared} kernel totals agree")


if __name__ == "__main__":
    main()
