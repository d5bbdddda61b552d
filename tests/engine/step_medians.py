"""Step times are medians, recomputed here (issue 18: a median off by one went unseen,
because every job had three steps, where the middle index is the same either way).

Jobs of 4, 5 and 6 profiled steps, noisy (every step differs), and one whose rank 2 has
an outlier step (its last step stretched by half, here): for every worker of the report,
- step_time_ms is the median of its own steps' durations (the mean of the middle two
  for an even count), the steps listed being the ones profiled;
- its breakdown, scaled to that median step, sums to step_time_ms;
and the job's median_step_time_ms is the median over workers.
"""
import json
import os
import statistics
import sys

from engine_common import analyze, check, FAILURES, run, TempDir

PARTS = ("compute_ms", "memory_ms", "communication_ms", "runtime_ms", "python_ms", "idle_ms")


def close(a, b):
    return abs(a - b) <= 1.5e-3  # ms: the report lists each step's duration to the microsecond


def stretch_last_step(job, rank, factor):
    """Rank's last ProfilerStep lasts factor times longer (idle at its end)."""
    path = next(os.path.join(job, f) for f in os.listdir(job) if f.startswith(f"node0_{rank}_"))
    with open(path) as f:
        doc = json.load(f)
    steps = [e for e in doc["traceEvents"] if e.get("cat") == "user_annotation"
             and str(e.get("name", "")).startswith("ProfilerStep#")]
    last = max(steps, key=lambda e: e["ts"])
    last["dur"] = round(last["dur"] * factor, 3)
    with open(path, "w") as f:
        json.dump(doc, f)


def check_job(tmp, name, steps, *args, outlier=False):
    job = os.path.join(tmp, name)
    run("synth", "-n", "8", "--steps", str(steps), "-o", job, *args)
    if outlier:
        stretch_last_step(job, 2, 1.5)
    _, report, _ = analyze([job], os.path.join(tmp, name + "-out"))
    medians = []
    for w in report["workers"]:
        durations = [s["ms"] for s in w["steps"]]
        check(len(durations) == steps, f"{name} rank {w['rank']}: {len(durations)} steps listed, {steps} profiled")
        want = statistics.median(durations)
        check(close(w["step_time_ms"], want), f"{name} rank {w['rank']}: step_time_ms {w['step_time_ms']} is the "
              f"median of {durations} = {want}")
        parts = sum(w["breakdown"][p] for p in PARTS)
        check(abs(parts - w["step_time_ms"]) <= 1e-3 * w["step_time_ms"],
              f"{name} rank {w['rank']}: breakdown sums to {parts}, step {w['step_time_ms']}")
        medians.append(w["step_time_ms"])
    job_median = report["job"].get("median_step_time_ms")
    if job_median is not None:
        check(close(job_median, statistics.median(medians)),
              f"{name}: median_step_time_ms {job_median} = median over workers {statistics.median(medians)}")
    spread = max(max(s["ms"] for s in w["steps"]) - min(s["ms"] for s in w["steps"]) for w in report["workers"])
    check(spread > 0.01 * statistics.median(medians), f"{name}: the steps differ ({spread:.3f} ms), as the test needs")
    if outlier:
        rank2 = next(w for w in report["workers"] if w["rank"] == 2)
        longest = max(s["ms"] for s in rank2["steps"])
        check(longest > 1.3 * rank2["step_time_ms"], f"{name}: rank 2's outlier step ({longest} ms) is not its median")
    print(f"ok {name}: {len(report['workers'])} workers x {steps} steps")


def main():
    with TempDir() as tmp:
        check_job(tmp, "noisy-4", 4, "--noise", "0.3", "--seed", "3")
        check_job(tmp, "noisy-5", 5, "--noise", "0.2", "--seed", "4", "--format", "summary")
        check_job(tmp, "noisy-6", 6, "--noise", "0.3", "--seed", "5", "--backend", "gloo")
        check_job(tmp, "outlier-4", 4, "--seed", "6", outlier=True)
        check_job(tmp, "outlier-5", 5, "--seed", "7", "--fault", "gc_pause", outlier=True)
    if FAILURES:
        sys.exit(f"FAIL: {len(FAILURES)} check(s) failed")
    print("PASS")


if __name__ == "__main__":
    main()
