"""Fault-injection suite: for every injected fault the analysis must name the right
worker(s), category and function FIRST; healthy jobs must not be flagged. Several world
sizes and seeds, from Kineto traces and from summaries, with NCCL and with gloo
(CPU-thread all-reduces, backward blocked on them), quiet and noisy (processes sharing
a GPU).

KNOWN_FAILURES are real shapes the diagnosis does not get right yet (issue 9; the
reason is next to each). They must fail the way they are known to (the diagnosis stays
silent: a healthy verdict, no finding); any other answer -- a wrong worker named, or the
right one, which means the case moves to the checked cases -- fails the suite."""
import json
import os
import sys

from engine_common import TempDir, analyze, check_schema, run

FAULTS = ["none", "slow_gpu", "cpu_contention", "slow_dataloader", "gc_pause", "blocking_dtoh", "common_memcpy",
          "two_slow", "hang"]
GLOO = ["--backend", "gloo"]
# Hangs the collectives explain (NCCL only): the analysis must also name the kind, the
# process group and the call number the traces carry (expected.json's "hang").
HANG_KINDS = ["hang_mismatch", "hang_size", "hang_skip", "hang_order", "hang_transport"]

# A slower GPU in noise as large as the slowdown: with --noise 0.2 a quarter of (rank,
# step) pairs run their kernels 10-30% slower, and a rank 20% slower in three steps is
# not reliably told from a rank the shared GPU slowed in each of them. The diagnosis
# stays silent rather than guess (its noise test is the worker's own step-to-step
# spread); reported here so that a change making it separable is noticed.
NOISE_AS_LARGE = "a 20% slower GPU inside +-20% per-step kernel noise, over three steps"
KNOWN_FAILURES = [
    (("slow_gpu", 8, 3, "summary", ["--noise", "0.2", "--severity", "0.2"]), NOISE_AS_LARGE),
]


def check_case(fault, workers, seed, fmt, extra, tmp):
    """None when the analysis gets the job right, else what it got wrong."""
    job = os.path.join(tmp, f"{fault}-{workers}-{seed}-{fmt}-{len(os.listdir(tmp))}")
    run("synth", "--fault", fault, "-n", str(workers), "--seed", str(seed), "--format", fmt, *extra, "-o", job)
    with open(os.path.join(job, "expected.json")) as f:
        expected = json.load(f)
    rc, report, _ = analyze([job], os.path.join(job, "out"))
    check_schema(report, describe((fault, workers, seed, fmt, extra)))
    diagnosis = report["diagnosis"]
    want_rc = 3 if expected["verdict"] == "hang" else 0  # a hang verdict exits 3 (README)
    if rc != want_rc:
        return f"analyze exited {rc}, expected {want_rc}"
    if diagnosis["verdict"] != expected["verdict"]:
        return f"verdict {diagnosis['verdict']} != {expected['verdict']}: {json.dumps(diagnosis['findings'])[:600]}"
    if not expected["findings"]:
        # A healthy synthetic job has nothing to fix: no finding at all, all-worker ones
        # included, and every worker normal.
        if diagnosis["findings"]:
            return f"a healthy job has findings: {json.dumps(diagnosis['findings'])[:600]}"
        marked = [w["rank"] for w in report["workers"] if w["status"] != "normal"]
        return f"a healthy job marks workers {marked}" if marked else None
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
    if want.get("hang"):
        have = got["evidence"].get("hang") or {}
        for key in ("kind", "group", "seq", "mismatch", "groups"):
            if key in want["hang"] and have.get(key) != want["hang"][key]:
                problems.append(f"hang {key} {have.get(key)!r} != {want['hang'][key]!r}")
    if problems:
        return "; ".join(problems) + f"\n  got: {json.dumps(got)[:600]}"
    # The workers list marks exactly the named workers (subset findings).
    if not want["all_workers"]:
        flagged = sorted(w["rank"] for w in report["workers"] if w["status"] in ("slow", "hang"))
        if not set(want["workers"]) <= set(flagged):
            return f"workers marked {flagged}, expected to include {want['workers']}"
        for w in report["workers"]:
            if w["rank"] in want["workers"]:
                continue
            if w["status"] != "normal":
                return f"healthy rank {w['rank']} marked {w['status']}"
    return None


def describe(case):
    fault, workers, seed, fmt, extra = case
    return f"{fault} n={workers} seed={seed} {fmt} {' '.join(extra)}".strip()


def cases():
    out = []
    for fault in FAULTS:
        out.append((fault, 8, 1, "kineto", []))
        out.append((fault, 32, 7, "summary", []))
    for fault in HANG_KINDS:
        out.append((fault, 8, 1, "kineto", ["--steps", "4"]))
        out.append((fault, 32, 7, "summary", ["--steps", "4", "--rank", "9"]))
    out.append(("hang", 64, 8, "summary", ["--steps", "5", "--hang-step", "2", "--rank", "40"]))
    out.append(("slow_gpu", 16, 3, "kineto-gz", ["--rank", "5"]))
    out.append(("slow_dataloader", 128, 11, "summary", ["--rank", "77"]))
    out.append(("two_slow", 64, 5, "summary", ["--rank", "3,40"]))
    out.append(("none", 256, 13, "summary", []))
    # The first worker is a worker too: every per-worker pass starts at rank 0.
    for fault in ("slow_gpu", "cpu_contention", "slow_dataloader", "gc_pause", "blocking_dtoh"):
        out.append((fault, 8, 9, "summary", ["--rank", "0"]))
    out.append(("two_slow", 8, 9, "summary", ["--rank", "0,7"]))
    out.append(("gc_pause", 8, 2, "kineto", ["--severity", "0.15"]))
    # Sensitivity: a fault costing 5% of the step is still named; healthy jobs of any size
    # and seed are not flagged.
    for fault in ("slow_gpu", "cpu_contention", "blocking_dtoh", "slow_dataloader"):
        out.append((fault, 64, 3, "summary", ["--severity", "0.05"]))
    for seed in (21, 22, 23, 24):
        out.append(("none", 8 if seed % 2 else 64, seed, "summary", []))
    # Gloo: all-reduces on CPU threads, backward blocked until the last one.
    for fault in FAULTS:
        out.append((fault, 8, 2, "summary", GLOO))
    out.append(("cpu_contention", 32, 7, "summary", GLOO))
    out.append(("slow_dataloader", 8, 4, "kineto", GLOO))
    out.append(("hang", 16, 5, "kineto-gz", GLOO + ["--gpus-per-node", "4"]))
    out.append(("two_slow", 32, 6, "summary", GLOO + ["--rank", "2,20"]))
    # Noise: healthy jobs are never flagged, whatever the seed, size or backend.
    for seed in (31, 32, 33, 34, 35, 36):
        out.append(("none", 8, seed, "summary", ["--noise", "0.3"] + (GLOO if seed % 2 else [])))
    out.append(("none", 32, 37, "summary", ["--noise", "0.3"] + GLOO))
    out.append(("none", 32, 38, "summary", ["--noise", "0.3", "--gpus-per-node", "32"]))
    out.append(("none", 8, 39, "kineto", ["--noise", "0.3"] + GLOO))
    # Faults in noise, at the noise the diagnosis separates them from today: extra work no
    # peer does at noise 0.3; the same work done slower at noise 0.05 (see KNOWN_FAILURES).
    for backend in ([], GLOO):
        out.append(("blocking_dtoh", 8, 41, "summary", ["--noise", "0.3", "--severity", "0.2"] + backend))
        for fault in ("slow_dataloader", "gc_pause", "slow_gpu"):
            out.append((fault, 8, 42, "summary", ["--noise", "0.05", "--severity", "0.2"] + backend))
    out.append(("slow_dataloader", 8, 43, "kineto", ["--noise", "0.05", "--severity", "0.3"] + GLOO))
    # Stragglers in noise: the lead is judged step by step (what all workers share in a
    # step is taken out first), against each worker's own spread.
    out.append(("slow_dataloader", 8, 42, "summary", ["--noise", "0.1", "--severity", "0.2"]))
    out.append(("gc_pause", 8, 2, "summary", ["--noise", "0.3", "--severity", "0.3"] + GLOO))
    out.append(("blocking_dtoh", 32, 44, "summary", ["--noise", "0.3", "--severity", "0.3"] + GLOO))
    return out


def main():
    checked = cases()
    with TempDir() as tmp:
        for case in checked:
            problem = check_case(*case, tmp)
            if problem:
                sys.exit(f"FAIL: {describe(case)}: {problem}")
            print("ok", describe(case))
        for case, reason in KNOWN_FAILURES:
            problem = check_case(*case, tmp)
            if not problem:
                sys.exit(f"FAIL: a known failure now passes (move it to the checked cases): {describe(case)}")
            if not problem.startswith("verdict healthy != ") or not problem.endswith(": []"):
                sys.exit(f"FAIL: a known failure fails differently (it should stay silent): {describe(case)}: "
                         f"{problem[:600]}")
            print(f"known failure, silent as known: {describe(case)}\n  why: {reason}")
    print(f"PASS: {len(checked)} fault cases ({len(KNOWN_FAILURES)} known failures reported)")


if __name__ == "__main__":
    main()
