"""The uneven-work finding's sentence names each (rank, step) once and only pairs that are
true of the job. A step has a segment per sync point (two in synth's unbucketed job: the
gradient all-reduces, then the loss's), and the slowest rank of both segments of one
step is one fact, not two ("rank 0 in step 10, rank 0 in step 10" was printed).

Each pair the sentence names is checked against the workers' own per-step work, computed
here from report.json's per-step breakdown (compute, memory, runtime and Python time):
in that step the rank named is among the three busiest workers. The sentence lists at
most six pairs, and says "..." when it cuts the list (8 steps: cut; 3 steps: whole)."""
import os
import re

from engine_common import FAILURES, TempDir, analyze, check, run

LISTED = 6


def steps_work(report):
    """{step number: {rank: work ms}} from each worker's per-step breakdown."""
    work = {}
    for w in report["workers"]:
        for s in w.get("steps", []):
            busy = sum(s.get(k, 0) for k in ("compute_ms", "memory_ms", "runtime_ms", "python_ms"))
            work.setdefault(s["step"], {})[w["rank"]] = busy
    return work


def main():
    with TempDir() as tmp:
        cases = [("unbucketed_allreduce", 16, 1, ["--noise", "0.1"]), ("none", 16, 4, ["--noise", "0.3"]),
                 ("unbucketed_allreduce", 16, 1, ["--noise", "0.1", "--steps", "8"])]
        seen_sentence = 0
        for fault, n, seed, extra in cases:
            job = os.path.join(tmp, f"{fault}-{n}")
            run("synth", "--quiet", "--fault", fault, "-n", str(n), "--seed", str(seed), "--format", "summary",
                *extra, "-o", job)
            _, report, _ = analyze([job], os.path.join(job, "out"))
            for f in report["diagnosis"]["findings"]:
                if f["function"] != "uneven work per step: the slowest rank moves":
                    continue
                seen_sentence += 1
                listed = re.search(r"\(([^)]*)\), each time", f["summary"]).group(1)
                pairs = re.findall(r"rank (\d+) in step (\d+)", listed)
                check(len(pairs) == len(set(pairs)), f"{fault}: each (rank, step) said once: {listed}")
                # A step names its pacer at least: with more steps than LISTED the list is cut
                # there and says so, with fewer it is whole.
                steps = len(report["diagnosis"]["step_model"]["pace"])
                if steps > LISTED:
                    check(len(pairs) == LISTED and listed.endswith(", ..."),
                          f"{fault}, {steps} steps: {LISTED} pairs and '...' ({listed})")
                else:
                    check(len(pairs) >= steps and not listed.endswith("..."),
                          f"{fault}, {steps} steps: every pair, no '...' ({listed})")
                work = steps_work(report)
                for rank, step in pairs:
                    by_rank = work.get(int(step), {})
                    ranked = sorted(by_rank, key=lambda r: -by_rank[r])
                    check(int(rank) in ranked[:3], f"{fault}: rank {rank} is among the busiest of step {step} "
                          f"(busiest: {ranked[:3]})")
        check(seen_sentence >= 1, f"an uneven-work sentence was checked ({seen_sentence})")
    if FAILURES:
        raise SystemExit(f"FAIL: {len(FAILURES)} check(s)")
    print("PASS")


if __name__ == "__main__":
    main()
