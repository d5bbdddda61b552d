"""Impacts are what fixing saves: for every fault kind, with noise on and 8 to 256
workers, the impact of the finding that names the fault is checked against the true
saving, measured by generating the same job without that fault (`perftracker synth
--without-fault`: same seed, same noise):

    |impact - true saving| <= max(2 points of the step, 20% of the true saving)

where the true saving is (step with the fault - step without) / step with, a step being
the slowest worker's mean step (the pace of a lock-step job). With two faults (one rank's data loader and another
rank's slower GPU), each finding is checked against removing its fault alone, and the
joint impact against removing both.

`whatif_truth.py --table` prints every case as a table (impact, true saving) instead of
stopping at the first failure: the before/after record of docs/report-schema.md."""
import json
import os
import sys

from engine_common import TempDir, analyze, check_schema, run

GLOO = ["--backend", "gloo"]
TOLERANCE_POINTS = 0.02
TOLERANCE_SHARE = 0.2

# (fault, workers, seed, extra): every kind but none (nothing to save) and hang (a hung
# job has no step to shorten), quiet and noisy, both backends, 8 to 256 workers.
CASES = [
    ("slow_gpu", 8, 1, ["--noise", "0.05"]),
    ("slow_gpu", 16, 2, ["--noise", "0.1", "--rank", "8,9,10,11,12,13,14,15", "--severity", "0.2"]),
    ("slow_gpu", 64, 3, ["--noise", "0.05"] + GLOO),
    ("two_slow", 32, 4, ["--noise", "0.05"]),
    ("cpu_contention", 8, 5, ["--noise", "0.1"]),
    ("cpu_contention", 128, 6, ["--noise", "0.05"] + GLOO),
    ("slow_dataloader", 8, 7, ["--noise", "0.3"]),
    ("slow_dataloader", 256, 8, ["--noise", "0.1"]),
    ("slow_dataloader", 16, 9, ["--noise", "0.3"] + GLOO),
    ("gc_pause", 8, 10, ["--noise", "0.3", "--severity", "0.15"] + GLOO),
    ("gc_pause", 64, 11, ["--noise", "0.1"]),
    ("blocking_dtoh", 8, 12, ["--noise", "0.3"]),
    ("blocking_dtoh", 32, 13, ["--noise", "0.1"] + GLOO),
    ("common_memcpy", 8, 14, ["--noise", "0.1"]),
    ("common_memcpy", 256, 15, ["--noise", "0.05"] + GLOO),
    ("slow_gpu", 8, 16, ["--noise", "0.05", "--severity", "0.08"]),
    ("slow_dataloader", 32, 17, ["--noise", "0.1", "--severity", "0.06"]),
    # Rank 0 is a worker like the others: every per-worker pass starts there.
    ("slow_gpu", 8, 18, ["--noise", "0.05", "--rank", "0"]),
    ("cpu_contention", 8, 19, ["--noise", "0.1", "--rank", "0"]),
]

# The structural kinds (docs/synth.md): faults no comparison of one function across
# workers finds -- collectives not bucketed or not overlapped, a stall in some steps, a
# data loader every worker waits on, one cause over several kernels or runtime calls.
STRUCTURAL = [
    ("unbucketed_allreduce", 8, 1, []),
    ("unbucketed_allreduce", 16, 1, ["--noise", "0.1"]),
    ("unbucketed_allreduce", 128, 1, ["--noise", "0.3"]),
    ("unoverlapped_allreduce", 8, 1, []),
    ("unoverlapped_allreduce", 16, 1, ["--noise", "0.1"]),
    ("unoverlapped_allreduce", 8, 1, ["--noise", "0.1"]),
    ("unoverlapped_allreduce", 32, 1, ["--noise", "0.3"]),
    ("unoverlapped_allreduce", 128, 1, []),
    ("intermittent_stall", 16, 1, ["--noise", "0.1"]),
    ("loader_starved", 16, 1, ["--noise", "0.1"]),
    ("single_process_loader", 16, 1, ["--noise", "0.1"]),
    ("single_process_loader", 1, 1, []),
    ("slow_gpu_mlp", 16, 1, ["--noise", "0.1"]),
    ("empty_cache", 16, 1, ["--noise", "0.1"]),
    ("pipeline_imbalance", 8, 1, []),
    ("pipeline_imbalance", 32, 1, []),
    ("pipeline_imbalance", 128, 1, ["--noise", "0.1"]),
    ("pipeline_imbalance", 16, 1, ["--noise", "0.1"]),
    ("pipeline_imbalance", 8, 1, ["--noise", "0.1"]),
    ("pipeline_imbalance", 8, 1, ["--noise", "0.3"]),
    ("absent_straggler", 8, 1, ["--noise", "0.1"]),
    ("absent_straggler", 16, 1, ["--noise", "0.1"]),
    ("absent_straggler", 64, 1, ["--noise", "0.1"]),
]
# Structural cases the impact is not right on yet (issue 36), each with why. They must be
# wrong the way they are known to be (the right finding, its impact above the true
# saving by more than the bound); any other answer fails, so a change that brings one
# within the bound is noticed and the case moves to STRUCTURAL.
KNOWN_OVERCLAIMS = [
]

# Two faults at once: rank A's data loader and rank B's GPU, so that A's stall sets the
# step and fixing B alone saves little.
TWO_FAULTS = [
    ("slow_dataloader", 8, 21, ["--rank", "2", "--severity", "0.7", "--second-fault", "slow_gpu", "--second-rank", "5",
                                "--second-severity", "0.35", "--noise", "0.05"]),
    ("gc_pause", 16, 22, ["--rank", "3", "--severity", "0.2", "--second-fault", "cpu_contention", "--second-rank", "12",
                          "--second-severity", "0.25", "--noise", "0.1"] + GLOO),
]


def mean_step_ms(report):
    """The job's step: the slowest worker's mean step. In lock-step every worker waits for
    the slowest, whose window holds the whole loop (the others' windows end before its
    last work, which they would wait for in the next step)."""
    return max(sum(s["ms"] for s in w["steps"]) / len(w["steps"]) for w in report["workers"] if w.get("steps"))


def job(tmp, name, fault, workers, seed, extra, without=None):
    path = os.path.join(tmp, name)
    args = ["synth", "--quiet", "--fault", fault, "-n", str(workers), "--seed", str(seed), "--format", "summary",
            *extra, "-o", path]
    if without:
        args.append("--without-fault=" + without)
    run(*args)
    rc, report, _ = analyze([path], os.path.join(path, "out"))
    check_schema(report, name)
    with open(os.path.join(path, "expected.json")) as f:
        return report, json.load(f)


def matching(report, want):
    """The report's finding for an expected one: same category and workers (or, for a
    fault of every worker, a finding about every worker)."""
    for f in report["diagnosis"]["findings"]:
        if f["category"] != want["category"]:
            continue
        if want.get("all_workers") and f.get("all_workers"):
            return f
        if not want.get("all_workers") and not f.get("all_workers") and sorted(f["workers"]) == sorted(want["workers"]):
            return f
    return None


def within(impact, truth):
    return abs(impact - truth) <= max(TOLERANCE_POINTS, TOLERANCE_SHARE * truth)


def describe(fault, workers, seed, extra):
    return f"{fault} n={workers} seed={seed} {' '.join(extra)}"


def check_single(tmp, case, rows, known_overclaim=None):
    fault, workers, seed, extra = case
    name = f"{fault}-{workers}-{seed}-{len(extra)}"
    with_fault, expected = job(tmp, name, fault, workers, seed, extra)
    without, _ = job(tmp, name + "-fixed", fault, workers, seed, extra, "all")
    truth = 1 - mean_step_ms(without) / mean_step_ms(with_fault)
    found = matching(with_fault, expected["findings"][0])
    impact = found["impact"] if found else 0.0  # no finding claims no saving
    rows.append((describe(*case), fault, impact, truth, within(impact, truth)))
    if known_overclaim:
        if found and impact > truth and not within(impact, truth):
            return None
        return (f"known to overclaim ({known_overclaim}), but the finding {'claims ' + format(impact, '.3f') if found else 'is missing'}"
                f" against a true saving of {truth:.3f}: move the case to STRUCTURAL if it is now right")
    if not within(impact, truth) and not found:
        return f"no finding names the fault: {json.dumps(with_fault['diagnosis']['findings'])[:500]}"
    if not within(impact, truth):
        return f"impact {impact:.3f} against a true saving of {truth:.3f}: {found['summary']}"
    return None


def check_two(tmp, case, rows):
    fault, workers, seed, extra = case
    name = f"two-{fault}-{workers}-{seed}"
    both, expected = job(tmp, name, fault, workers, seed, extra)
    step = mean_step_ms(both)
    problems = []
    for which, want in zip(("first", "second"), expected["findings"]):
        fixed, _ = job(tmp, f"{name}-{which}", fault, workers, seed, extra, which)
        truth = 1 - mean_step_ms(fixed) / step
        found = matching(both, want)
        impact = found["impact"] if found else 0.0
        ok = within(impact, truth)
        rows.append((describe(*case) + f" [{want['fault']} alone]", want["fault"], impact, truth, ok))
        if not ok:
            problems.append(f"{want['fault']} alone: impact {impact:.3f}, true saving {truth:.3f}: "
                            f"{found['summary'] if found else 'no finding names it'}")
    fixed, _ = job(tmp, f"{name}-all", fault, workers, seed, extra, "all")
    truth = 1 - mean_step_ms(fixed) / step
    joint = both["diagnosis"]["joint_impact"]
    rows.append((describe(*case) + " [both: joint_impact]", "both", joint, truth, within(joint, truth)))
    if not within(joint, truth):
        problems.append(f"joint impact {joint:.3f}, true saving of fixing both {truth:.3f}")
    return "; ".join(problems) or None


def main():
    table = "--table" in sys.argv[1:]
    rows = []
    failures = []
    with TempDir() as tmp:
        for case, known in [(c, None) for c in CASES + STRUCTURAL] + KNOWN_OVERCLAIMS:
            if failures and not table:
                break
            problem = check_single(tmp, case, rows, known)
            print(("ok   " if not problem else "FAIL ") + describe(*case) + (" (known to overclaim)" if known else ""))
            if problem:
                failures.append(f"{describe(*case)}: {problem}")
        for case in TWO_FAULTS if not failures or table else []:
            problem = check_two(tmp, case, rows)
            print(("ok   " if not problem else "FAIL ") + describe(*case))
            if problem:
                failures.append(f"{describe(*case)}: {problem}")
                if not table:
                    break
    if table:
        print(f"\n| case | impact | true saving | within |\n|---|---|---|---|")
        for what, _, impact, truth, ok in rows:
            print(f"| {what} | {impact:.1%} | {truth:.1%} | {'yes' if ok else 'NO'} |")
    if failures:
        sys.exit("FAIL:\n  " + "\n  ".join(failures))
    print(f"PASS: {sum(1 for row in rows if row[4])} impacts within max(2 points, 20%) of the true saving; "
          f"{len(KNOWN_OVERCLAIMS)} known overclaims as known")


if __name__ == "__main__":
    main()
