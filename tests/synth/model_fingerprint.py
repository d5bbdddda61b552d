#!/usr/bin/env python3
"""The synthetic model, pinned: every expected answer in the engine tests is calibrated
on what `perftracker synth` generates, so a change to it must be deliberate.

Usage: model_fingerprint.py PERFTRACKER WORKDIR [--update]

2-rank jobs (seed 1; two_slow: 4 ranks) are generated -- healthy (NCCL, gloo, noisy) and with
each fault -- and for each rank and event (category, name) the count and the total duration (microseconds, to the
nanosecond) are compared with tests/data/synth_fingerprint.json; the structural kinds (and
their twins), per rank and category, with tests/data/synth_fingerprint_structural.json -- the trace's meaning,
not its bytes (the writer may format it differently). A difference names the events
that changed. After changing the model on purpose, run it with --update and commit the
new file with the change.
"""
import collections
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PINNED = os.path.join(HERE, "..", "data", "synth_fingerprint.json")
# Every fault kind, each backend and the noise: a fault's events are calibrated too (its
# expected impact is the same job without it).
FAULTS = ["slow_gpu", "cpu_contention", "slow_dataloader", "gc_pause", "blocking_dtoh", "common_memcpy", "two_slow",
          "hang", "hang_mismatch", "hang_size", "hang_skip", "hang_order", "hang_transport"]
JOBS = dict({"healthy": ["--seed", "1"], "gloo": ["--seed", "1", "--backend", "gloo"],
             "noise": ["--seed", "1", "--noise", "0.3"]},
            **{fault: ["--seed", "1", "--fault", fault] + (["-n", "4"] if fault == "two_slow" else []) for fault in FAULTS})


# The structural kinds, pinned per trace and event category (a small file; a change still
# says which trace and which category moved), with and without their fault.
STRUCTURAL_PINNED = os.path.join(HERE, "..", "data", "synth_fingerprint_structural.json")
STRUCTURAL = {f"{kind}{'/twin' if twin else ''}": ["--seed", "1", "--fault", kind, "-n", str(n), *extra,
                                                  *(["--without-fault"] if twin else [])]
              for kind, n, extra in [("unbucketed_allreduce", 2, []), ("unoverlapped_allreduce", 2, []),
                                     ("intermittent_stall", 2, []), ("loader_starved", 2, []),
                                     ("single_process_loader", 1, []), ("slow_gpu_mlp", 2, []),
                                     ("empty_cache", 2, []), ("pipeline_imbalance", 2, []),
                                     ("absent_straggler", 2, [])]
              for twin in (False, True)}


def structural_fingerprint(cli, work):
    out = {}
    for job, args in STRUCTURAL.items():
        path = os.path.join(work, "structural", job)
        subprocess.run([cli, "synth", "--quiet", "-o", path, *args], check=True)
        for name in sorted(os.listdir(path)):
            if not name.startswith("node"):
                continue
            with open(os.path.join(path, name)) as f:
                events = json.load(f)["traceEvents"]
            totals = collections.defaultdict(lambda: [0, 0])
            for e in events:
                if e.get("ph") == "X":
                    totals[e.get("cat")][0] += 1
                    totals[e.get("cat")][1] += round(e.get("dur", 0) * 1000)
            out[f"{job}/{name}"] = {k: v for k, v in sorted(totals.items())}
    return out


def compare(pinned_path, got, problems):
    with open(pinned_path) as f:
        want = json.load(f)
    for trace in sorted(set(want) | set(got)):
        a, b = want.get(trace, {}), got.get(trace, {})
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                problems.append(f"{trace}: {key[:90]}: pinned {a.get(key)} (count, ns), now {b.get(key)}")


def fingerprint(cli, work):
    out = {}
    for job, args in JOBS.items():
        path = os.path.join(work, job)
        subprocess.run([cli, "synth", "-n", "2", "--quiet", "-o", path, *args], check=True)
        for name in sorted(os.listdir(path)):
            if not name.startswith("node"):
                continue
            with open(os.path.join(path, name)) as f:
                events = json.load(f)["traceEvents"]
            totals = collections.defaultdict(lambda: [0, 0])
            for e in events:
                if e.get("ph") == "X":
                    key = f"{e.get('cat')}|{e['name']}"
                    totals[key][0] += 1
                    totals[key][1] += round(e.get("dur", 0) * 1000)  # ns, exact
            out[f"{job}/{name}"] = {k: v for k, v in sorted(totals.items())}
    return out


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    cli, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    got = fingerprint(cli, work)
    got_structural = structural_fingerprint(cli, work)
    if "--update" in sys.argv[3:]:
        for path, data in ((PINNED, got), (STRUCTURAL_PINNED, got_structural)):
            with open(path, "w") as f:
                json.dump(data, f, indent=0, sort_keys=True)
                f.write("\n")
            print(f"wrote {path}")
        return 0
    problems = []
    compare(PINNED, got, problems)
    compare(STRUCTURAL_PINNED, got_structural, problems)
    if problems:
        print("FAIL: the synthetic model changed (run with --update if that was meant):\n  "
              + "\n  ".join(problems[:30]) + (f"\n  ... {len(problems) - 30} more" if len(problems) > 30 else ""))
        return 1
    kinds = sum(len(v) for v in got.values()) + sum(len(v) for v in got_structural.values())
    print(f"PASS: {kinds} event kinds over {len(got) + len(got_structural)} traces as pinned")
    return 0


if __name__ == "__main__":
    sys.exit(main())
