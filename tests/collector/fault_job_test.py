#!/usr/bin/env python3
"""scripts/fault_job.py, the recorder of our labelled corpus, on the CPU: a real 3-rank
DDP job over gloo, profiled by the collector in every rank, with one injected fault. The
diagnosis must name the culprit first, in the right category and function. (On a GPU
machine the same script records the Kineto and native corpus; here it runs the CPU path,
which has no GPU activity, so only faults that show on the CPU are checked.)

usage: fault_job_test.py WORKDIR   (exit 77 = skipped: no torch with gloo here)
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "fault_job.py")
TORCH_PYTHON = os.environ.get("PT_TORCH_PYTHON", "/usr/bin/python3")
SMALL = ["--world", "3", "--mode", "perftracker", "--device", "cpu", "--d-model", "96", "--layers", "1",
         "--batch", "4", "--seq", "64", "--wait", "3", "--steps", "3"]
CASES = [("slow_data", 2, "python", "load_batch"), ("gc", 1, "python", "log_metrics")]


def has_torch():
    probe = "import torch, torch.distributed as d; assert d.is_available() and d.is_gloo_available()"
    return subprocess.run([TORCH_PYTHON, "-c", probe], capture_output=True).returncode == 0


def record(workdir, fault, culprit):
    out = os.path.join(workdir, fault)
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([TORCH_PYTHON, SCRIPT, "--out", out, "--fault", fault, "--culprit", str(culprit), *SMALL],
                   check=True, timeout=600, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "label.json")) as f:
        label = json.load(f)
    assert label == {**label, "fault": fault, "culprit": culprit, "world": 3}, label
    traces = sorted(os.path.join(out, n) for n in os.listdir(out) if n.endswith(".ptrace"))
    assert len(traces) == 3, f"{fault}: expected 3 raw traces, found {traces}"
    return out, traces


def diagnose(out, traces):
    report_dir = os.path.join(out, "report")
    subprocess.run([os.environ["PERFTRACKER_CLI"], "analyze", "--quiet", "--force", "-o", report_dir, *traces],
                   check=True, stderr=subprocess.DEVNULL)
    with open(os.path.join(report_dir, "report.json")) as f:
        return json.load(f)["diagnosis"]["findings"]


def main():
    if not has_torch():
        print(f"SKIP: {TORCH_PYTHON} has no torch with gloo")
        sys.exit(77)
    workdir = sys.argv[1]
    os.makedirs(workdir, exist_ok=True)
    for fault, culprit, category, function in CASES:
        out, traces = record(workdir, fault, culprit)
        subset = [f for f in diagnose(out, traces) if not f["all_workers"]]
        assert subset, f"{fault}: nothing names a worker"
        first = subset[0]
        problems = []
        if first["workers"] != [culprit]:
            problems.append(f"names {first['workers']}, not rank {culprit}")
        if first["category"] != category or function not in first["function"]:
            problems.append(f"{first['category']} {first['function'][-100:]!r}, not {category} in {function}")
        if problems:
            sys.exit(f"FAIL: {fault}: " + "; ".join(problems) + f"\n  {first['summary']}")
        print(f"ok {fault}: rank {culprit}, {first['summary'][:120]}")
    print(f"PASS: {len(CASES)} recorded fault jobs diagnosed")


if __name__ == "__main__":
    main()
