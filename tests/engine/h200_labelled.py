"""Real labelled GPU jobs: the diagnosis is judged by the rule in the README of
../shared/data/traces/h200, the truest test we have. Four of the six jobs are committed in
tests/data/h200 (one healthy, one per fault kind; see its README), so every clone runs
them; the others are added when ../shared is present.

- Healthy job: no finding names a subset of workers with an impact of 3% or more, and no
  all-worker Python finding reaches 5%.
- Faulty job: the first finding that names a subset of workers names exactly the culprit,
  with the right category (python, in the named function, for slow data and gc;
  gpu_compute for extra GPU work), and no all-worker Python finding ranks above it.

Also, on every job: no bottleneck ratio in the report exceeds 1, and each finding's
sentence matches its evidence (extra kernels are called extra work, not a slow GPU)."""
import glob
import json
import os
import sys

from engine_common import TempDir, analyze, check_schema

SUBSET_LIMIT = 0.03
COMMON_PYTHON_LIMIT = 0.05
CATEGORY = {"slow_data": "python", "gc": "python", "gpu_heavy": "gpu_compute"}
FUNCTION = {"slow_data": "load_batch", "gc": "log_metrics"}


def judge(label, findings):
    """The README's rule: a list of what is wrong (empty when the diagnosis is right)."""
    problems = []
    if label["culprit"] < 0:
        for f in findings:
            if not f["all_workers"] and f["impact"] >= SUBSET_LIMIT:
                problems.append(f"a healthy job names workers {f['workers']}: {f['summary']}")
            if f["all_workers"] and f["category"] == "python" and f["impact"] >= COMMON_PYTHON_LIMIT:
                problems.append(f"all-worker Python finding of {f['impact']:.1%}: {f['summary']}")
        return problems
    subset = [i for i, f in enumerate(findings) if not f["all_workers"]]
    if not subset:
        return ["no finding names the culprit"]
    first = findings[subset[0]]
    if first["workers"] != [label["culprit"]]:
        problems.append(f"names {first['workers']}, culprit is {label['culprit']}")
    if first["category"] != CATEGORY[label["fault"]]:
        problems.append(f"category {first['category']}, expected {CATEGORY[label['fault']]}")
    want = FUNCTION.get(label["fault"])
    if want and want not in first["function"]:
        problems.append(f"function {first['function'][-120:]!r} does not name {want}")
    for f in findings[:subset[0]]:
        if f["all_workers"] and f["category"] == "python":
            problems.append(f"an all-worker Python finding ranks above the culprit: {f['summary']}")
    if label["fault"] == "gpu_heavy" and "do not" not in first["summary"]:
        problems.append(f"extra kernels must be called extra work: {first['summary']}")
    return problems


def ratios(node, path=""):
    """Every bottleneck ratio in the report, with where it is."""
    if isinstance(node, dict):
        for key, value in node.items():
            if "bottleneck ratio" in key and isinstance(value, (int, float)):
                yield f"{path}/{key}", value
            yield from ratios(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from ratios(value, f"{path}[{i}]")


COMMITTED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "h200")


def labelled_jobs():
    """The committed jobs, then those of ../shared the committed ones do not repeat."""
    jobs = {os.path.basename(os.path.dirname(p)): p for p in glob.glob(os.path.join(COMMITTED, "*", "label.json"))}
    committed = len(jobs)
    shared = os.path.join(os.environ.get("PT_TRACES", ""), "h200")
    for p in glob.glob(os.path.join(shared, "*", "label.json")):
        jobs.setdefault(os.path.basename(os.path.dirname(p)), p)
    if len(jobs) == committed:
        print(f"note: {shared} absent; the {committed} committed jobs only")
    return [jobs[name] for name in sorted(jobs)], committed


def main():
    labels, committed = labelled_jobs()
    if committed < 4:
        sys.exit(f"FAIL: the committed labelled jobs are missing from {COMMITTED}")
    failures = []
    with TempDir() as tmp:
        for label_path in labels:
            job = os.path.dirname(label_path)
            name = os.path.basename(job)
            with open(label_path) as f:
                label = json.load(f)
            rc, report, _ = analyze([job], os.path.join(tmp, name))
            check_schema(report, name)
            problems = judge(label, report["diagnosis"]["findings"])
            problems += [f"{where} = {value} > 1" for where, value in ratios(report) if value > 1 + 1e-9]
            if rc not in (0, 3):
                problems.append(f"analyze exited {rc}")
            print(("ok   " if not problems else "FAIL ") + name)
            failures += [f"{name}: {p}" for p in problems]
    if failures:
        sys.exit("FAIL:\n  " + "\n  ".join(failures))
    print(f"PASS: {len(labels)} labelled real jobs diagnosed correctly")


if __name__ == "__main__":
    main()
