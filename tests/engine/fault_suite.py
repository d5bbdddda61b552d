"""Fault-injection suite: for every injected fault the analysis must name the right
worker(s), category and function FIRST; healthy jobs must not be flagged. Several world
sizes and seeds, from Kineto traces and from summaries."""
import json
import os
import sys

from engine_common import TempDir, analyze, check_schema, run

FAULTS = ["none", "slow_gpu", "cpu_contention", "slow_dataloader", "gc_pause", "blocking_dtoh", "common_memcpy",
          "two_slow", "hang"]


def check_case(fault, workers, seed, fmt, extra, tmp):
    job = os.path.join(tmp, f"{fault}-{workers}-{seed}-{fmt}")
    run("synth", "--fault", fault, "-n", str(workers), "--seed", str(seed), "--format", fmt, *extra, "-o", job)
    with open(os.path.join(job, "expected.json")) as f:
        expected = json.load(f)
    rc, report, _ = analyze([job], os.path.join(job, "out"))
    where = f"{fault} n={workers} seed={seed} {fmt} {' '.join(extra)}"
    check_schema(report, where)
    diagnosis = report["diagnosis"]
    want_rc = 3 if expected["verdict"] == "hang" else 0  # a hang verdict exits 3 (README)
    if rc != want_rc:
        sys.exit(f"FAIL: {where}: analyze exited {rc}, expected {want_rc}")
    if diagnosis["verdict"] != expected["verdict"]:
        sys.exit(f"FAIL: {where}: verdict {diagnosis['verdict']} != {expected['verdict']}: {diagnosis['findings']}")
    if not expected["findings"]:
        named = [f for f in diagnosis["findings"] if not f["all_workers"]]
        if named:
            sys.exit(f"FAIL: {where}: a healthy job names workers: {named}")
        return
    want, got = expected["findings"][0], diagnosis["findings"][0]
    problems = []
    if got["category"] != want["category"]:
        problems.append(f"category {got['category']} != {want['category']}")
    if want.get("function") and got["function"] != want["function"]:
        problems.append(f"function {got['function']!r} != {want['function']!r}")
    if sorted(got["workers"]) != sorted(want["workers"]):
        problems.append(f"workers {got['workers']} != {want['workers']}")
    if got["all_workers"] != want["all_workers"]:
        problems.append(f"all_workers {got['all_workers']} != {want['all_workers']}")
    if problems:
        sys.exit(f"FAIL: {where}: " + "; ".join(problems) + f"\n  got: {json.dumps(got)[:600]}")
    # The workers list marks exactly the named workers (subset findings).
    if not want["all_workers"]:
        flagged = sorted(w["rank"] for w in report["workers"] if w["status"] in ("slow", "hang"))
        if not set(want["workers"]) <= set(flagged):
            sys.exit(f"FAIL: {where}: workers marked {flagged}, expected to include {want['workers']}")
        for w in report["workers"]:
            if w["rank"] in want["workers"]:
                continue
            if fault != "cpu_contention" and w["status"] != "normal":
                sys.exit(f"FAIL: {where}: healthy rank {w['rank']} marked {w['status']}")


def main():
    cases = []
    for fault in FAULTS:
        cases.append((fault, 8, 1, "kineto", []))
        cases.append((fault, 32, 7, "summary", []))
    cases.append(("slow_gpu", 16, 3, "kineto-gz", ["--rank", "5"]))
    cases.append(("slow_dataloader", 128, 11, "summary", ["--rank", "77"]))
    cases.append(("two_slow", 64, 5, "summary", ["--rank", "3,40"]))
    cases.append(("none", 256, 13, "summary", []))
    cases.append(("gc_pause", 8, 2, "kineto", ["--severity", "0.15"]))
    # Sensitivity: a fault costing 5% of the step is still named; healthy jobs of any size
    # and seed are not flagged.
    for fault in ("slow_gpu", "cpu_contention", "blocking_dtoh", "slow_dataloader"):
        cases.append((fault, 64, 3, "summary", ["--severity", "0.05"]))
    for seed in (21, 22, 23, 24):
        cases.append(("none", 8 if seed % 2 else 64, seed, "summary", []))
    with TempDir() as tmp:
        for case in cases:
            check_case(*case, tmp)
            print("ok", *case[:4], *case[4])
    print(f"PASS: {len(cases)} fault cases")


if __name__ == "__main__":
    main()
