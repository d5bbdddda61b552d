#!/usr/bin/env python3
"""`perftracker analyze` and `perftracker diff` on a job with one hostile worker (issue 15,
items 1 and 10).

usage: hostile_summaries.py WORKDIR REGRESSIONS_DIR   (PT_CLI: the perftracker binary)

A good 4-worker job is made with `perftracker synth` and `perftracker summarize` (one
.ptsum per worker). Rank 2's summary is then replaced by each saved crasher of
fuzz/regressions/summary/ in turn (a metric name three times, which overflowed the
hardware section: SIGBUS; INT64_MAX times; step parts larger than their step). For each:
  - exit status 3 (report written, an input refused), no sanitizer report;
  - one stderr line names the worker (its file, and its rank) and the rule it broke;
  - report.json analyses ranks 0, 1 and 3 (never "error" or "missing"), lists rank 2's
    file as failed, and its warnings carry the same reason.
The same job is then the AFTER of `perftracker diff` against the good one: exit 3, one
stderr line naming the worker and the rule, diff.json compares 4 workers with 3 (the
other three), and its warnings carry the reason.
The summarizer itself never makes such a summary: the two kernels become one function
(both executions, with a warning), and that worker is analysed with the others.
Then rank 2's summary names 2^20 functions (the format's cap; valid, 45 MB decompressed):
under PERFTRACKER_ANALYZE_MEMORY_MB=256, analyze and diff refuse it by name for its memory
share (exit 3) and go on with the other three -- each name once cost the function store
30 KB, which took analyze past 5 GB.
"""
import json
import os
import re
import shutil
import subprocess
import sys

import summary_bombs

CLI = os.environ.get("PT_CLI", "perftracker")
MAKE_SEEDS = os.environ.get("PT_MAKE_SEEDS", "")
GOOD_RANKS = (0, 1, 3)
BAD_STEM = "node0_2_10002"
TIMEOUT_S = 300


def run(args, env=None):
    return subprocess.run([CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          errors="replace", timeout=TIMEOUT_S, env={**os.environ, **(env or {})})


def good_job(work):
    traces = os.path.join(work, "traces")
    if not os.path.exists(os.path.join(traces, "expected.json")):
        shutil.rmtree(traces, ignore_errors=True)
        p = run(["synth", "-n", "4", "--steps", "3", "--layers", "1", "-o", traces])
        assert p.returncode == 0, p.stderr
    summaries = os.path.join(work, "summaries")
    os.makedirs(summaries, exist_ok=True)
    for rank in range(4):
        stem = f"node0_{rank}_{10000 + rank}"
        out = os.path.join(summaries, stem + ".ptsum")
        # Always made anew: a summary cached by an older build may be in an older format.
        p = run(["summarize", os.path.join(traces, stem + ".json"), "-o", out])
        assert p.returncode == 0, p.stderr
    return traces, summaries


def job_with(work, name, good_dir, good_ext, bad_name, bad_bytes):
    job = os.path.join(work, "job-" + name)
    shutil.rmtree(job, ignore_errors=True)
    os.makedirs(job)
    for rank in GOOD_RANKS:
        stem = f"node0_{rank}_{10000 + rank}"
        shutil.copy(os.path.join(good_dir, stem + good_ext), job)
    with open(os.path.join(job, bad_name), "wb") as f:
        f.write(bad_bytes)
    return job


def check(name, job, out, rule, problems, who="rank 2", env=None):
    """who: what the line says besides the file (a refused summary's rank, where it was read)."""
    p = run(["analyze", "-q", "--force", "-j", "2", "-o", out, job], env)
    where = f"{name}: "
    if p.returncode != 3:
        problems.append(f"{where}exit status {p.returncode}, expected 3; stderr:\n{p.stderr[-2000:]}")
    if re.search(r"AddressSanitizer|UndefinedBehaviorSanitizer|runtime error", p.stderr):
        problems.append(f"{where}sanitizer report:\n{p.stderr[-3000:]}")
    lines = [l for l in p.stderr.splitlines() if BAD_STEM in l and who in l and re.search(rule, l)]
    if not lines:
        problems.append(f"{where}no stderr line names {BAD_STEM} (rank 2) and /{rule}/:\n{p.stderr[-2000:]}")
    try:
        with open(os.path.join(out, "report.json")) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        problems.append(f"{where}no report.json: {e}")
        return
    if report["job"]["workers_analyzed"] != 3 or report["job"]["workers_failed"] != 1:
        problems.append(f"{where}job: {report['job']}")
    by_rank = {}
    for w in report["workers"]:
        by_rank.setdefault(w["rank"], []).append(w)
    for rank in GOOD_RANKS:
        statuses = [w["status"] for w in by_rank.get(rank, [])]
        if not statuses or any(s in ("error", "missing") for s in statuses):
            problems.append(f"{where}rank {rank} is {statuses or 'absent'}")
    failed = [w for w in report["workers"] if w["status"] == "error"]
    if len(failed) != 1 or BAD_STEM not in failed[0]["name"]:
        problems.append(f"{where}failed workers: {failed}")
    if not any(BAD_STEM in w and re.search(rule, w) for w in report["warnings"]):
        problems.append(f"{where}no warning in the report names {BAD_STEM} and /{rule}/: {report['warnings']}")
    print(f"{name}: exit {p.returncode}; {lines[0].strip() if lines else '(no line)'}")


def check_diff(name, good, job, out, rule, problems, who="rank 2", env=None):
    p = run(["diff", "-q", "-j", "2", "-o", out, good, job], env)
    where = f"{name} (diff): "
    if p.returncode != 3:
        problems.append(f"{where}exit status {p.returncode}, expected 3; stderr:\n{p.stderr[-2000:]}")
    if re.search(r"AddressSanitizer|UndefinedBehaviorSanitizer|runtime error", p.stderr):
        problems.append(f"{where}sanitizer report:\n{p.stderr[-3000:]}")
    lines = [l for l in p.stderr.splitlines() if BAD_STEM in l and who in l and re.search(rule, l)]
    if not lines:
        problems.append(f"{where}no stderr line names {BAD_STEM} (rank 2) and /{rule}/:\n{p.stderr[-2000:]}")
    try:
        with open(os.path.join(out, "diff.json")) as f:
            diff = json.load(f)
    except (OSError, ValueError) as e:
        problems.append(f"{where}no diff.json: {e}")
        return
    workers = (diff["before"]["workers"], diff["after"]["workers"])
    if workers != (4, 3):
        problems.append(f"{where}workers compared (before, after): {workers}, expected (4, 3)")
    if not any(w.startswith("AFTER: ") and BAD_STEM in w and re.search(rule, w) for w in diff["warnings"]):
        problems.append(f"{where}no warning in diff.json names {BAD_STEM} and /{rule}/: {diff['warnings']}")
    print(f"{name} (diff): exit {p.returncode}; {lines[0].strip() if lines else '(no line)'}")


def colliding_kernels_trace(traces):
    """Rank 2's trace with two kernels that summarize to one function key: "gemm" on a
    2x1x1 grid of 128x1x1 blocks is "gemm2_1_1|128_1_1", and so is a kernel given that
    very name and no grid."""
    with open(os.path.join(traces, BAD_STEM + ".json")) as f:
        doc = json.load(f)
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel" and "nccl" not in e.get("name", "")]
    kernels[0]["name"] = "gemm"
    kernels[0].setdefault("args", {}).update({"grid": [2, 1, 1], "block": [128, 1, 1]})
    kernels[1]["name"] = "gemm2_1_1|128_1_1"
    kernels[1].setdefault("args", {}).pop("grid", None)
    kernels[1]["args"].pop("block", None)
    return json.dumps(doc).encode()


def check_colliding_kernels_merge(job, out, problems):
    """Two kernels of rank 2's trace summarize to one key: they are one function (both
    executions, with a warning), so the worker stays valid and is analysed like the rest."""
    where = "colliding-kernels: "
    p = run(["analyze", "-q", "--force", "-j", "2", "-o", out, job])
    if p.returncode != 0:
        problems.append(f"{where}exit status {p.returncode}, expected 0; stderr:\n{p.stderr[-2000:]}")
    if re.search(r"AddressSanitizer|UndefinedBehaviorSanitizer|runtime error", p.stderr):
        problems.append(f"{where}sanitizer report:\n{p.stderr[-3000:]}")
    try:
        with open(os.path.join(out, "report.json")) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        problems.append(f"{where}no report.json: {e}")
        return
    if report["job"]["workers_analyzed"] != 4 or report["job"]["workers_failed"] != 0:
        problems.append(f"{where}job: {report['job']}")
    if not any(BAD_STEM in w and "1 functions shared a name with another" in w for w in report["warnings"]):
        problems.append(f"{where}no warning names {BAD_STEM} and the merge: {report['warnings']}")
    s = run(["summarize", os.path.join(job, BAD_STEM + ".json"), "--json"])
    merged = [f for f in json.loads(s.stdout)["functions"] if f["name"] == "gemm2_1_1|128_1_1"] if s.returncode == 0 else []
    if len(merged) != 1 or merged[0]["count"] != 2:
        problems.append(f"{where}summarize gives {merged}, expected one function of both executions")
    print(f"colliding-kernels: exit {p.returncode}; merged into {merged}")


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    work, regressions = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    traces, summaries = good_job(work)
    cases = [
        ("repeated-metric-overflows-hardware.ptsum", r'metric "gpu0\.sm_active_pct" appears twice'),
        ("int64-max-times.ptsum", r"the profiled window is 9223372036854775807 ns"),
        ("step-parts-beyond-the-step.ptsum", r"step \d+'s exposed and idle times add up to"),
    ]
    problems = []
    for file, rule in cases:
        with open(os.path.join(regressions, file), "rb") as f:
            bad = f.read()
        job = job_with(work, file, summaries, ".ptsum", BAD_STEM + ".ptsum", bad)
        check(file, job, os.path.join(work, "out-" + file), rule, problems)
        check_diff(file, summaries, job, os.path.join(work, "diff-" + file), rule, problems)
    job = job_with(work, "colliding-kernels", traces, ".json", BAD_STEM + ".json", colliding_kernels_trace(traces))
    check_colliding_kernels_merge(job, os.path.join(work, "out-colliding-kernels"), problems)
    names = "million-names"
    job = job_with(work, names, summaries, ".ptsum", BAD_STEM + ".ptsum", summary_bombs.many_names(1 << 20, MAKE_SEEDS))
    budget = {"PERFTRACKER_ANALYZE_MEMORY_MB": "256"}
    share = r"needs more memory than its share"
    check(names, job, os.path.join(work, "out-" + names), share, problems, who=".ptsum", env=budget)
    check_diff(names, summaries, job, os.path.join(work, "diff-" + names), share, problems, who=".ptsum", env=budget)
    if problems:
        print("FAIL:\n" + "\n".join(problems))
        return 1
    print(f"PASS: {len(cases)} hostile workers refused by analyze and diff, naming worker and rule; the others "
          "analysed and compared; colliding kernel names merged; a million names refused for their memory share")
    return 0


if __name__ == "__main__":
    sys.exit(main())
