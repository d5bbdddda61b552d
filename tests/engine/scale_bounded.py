#!/usr/bin/env python3
"""The bounded report at scale (docs/report-schema.md, "The bounded form"): a synthetic job
of 4,500 workers (above the 4,096 of the full form) with one slow GPU, and the same job
without it.

Checks, each against something the report under test did not compute:
  - the culprit is named, first, and no other worker is, with the category and kernel of synth's answer
    key; its value (exposed compute ms per step) equals the mean of its steps' compute in a
    one-worker analysis of its summary alone (the full form, another path), and its excess
    over the median is the injected slowdown (severity x the healthy step) within 15%;
  - the culprit keeps full detail in "workers" (named, its steps), equal to that one-worker
    report's entry and to its row in the parts;
  - nothing grows as workers x functions: report.json under 300 bytes per worker, every
    section's per-worker map at most listed_max entries (each cut recorded with its true
    count), Heatmap rows only for the full-detail workers plus one per node;
  - the distributions and node aggregates agree with the worker table (Python's own
    nearest-rank quantiles and per-node maxima), and the parts hold every rank once;
  - the healthy job gets no finding and every worker is "normal";
  - a small job is the full form, without "scale".
"""
import glob
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_common import FAILURES, TempDir, analyze, check, run  # noqa: E402

WORKERS = 4500
CULPRIT = 3333
PER_WORKER_BYTES = 300


def synth(out, *extra):
    run("synth", "-n", str(WORKERS), "--format", "summary", "--seed", "3", "-j", "2", "-o", out, *extra)
    with open(os.path.join(out, "expected.json")) as f:
        return json.load(f)


def nearest_rank(sorted_values, p):
    at = math.ceil(p / 100 * len(sorted_values))
    return sorted_values[max(at, 1) - 1]


def check_fault_job(work):
    job = os.path.join(work, "fault")
    expected = synth(job, "--fault", "slow_gpu", "--rank", str(CULPRIT))
    out = os.path.join(work, "fault-out")
    _, report, _ = analyze([job], out)
    size = os.path.getsize(os.path.join(out, "report.json"))
    scale = report.get("scale")
    check(scale is not None and scale["form"] == "bounded", f"{WORKERS} workers: the bounded form")
    if scale is None:
        return
    check(size <= PER_WORKER_BYTES * WORKERS, f"report.json {size} bytes <= {PER_WORKER_BYTES} per worker")

    findings = report["diagnosis"]["findings"]
    truth = expected["findings"][0]
    first = findings[0] if findings else {}
    check(findings and all(f["workers"] == [CULPRIT] for f in findings), f"every finding names rank {CULPRIT} "
          f"alone: {[(f['category'], f['workers'][:4]) for f in findings]}")
    check(first.get("category") == truth["category"] and first.get("function") == truth["function"],
          "its category and kernel are synth's answer key")

    # The culprit alone, analysed through the full form: its value, independently.
    name = f"node{CULPRIT // 8}_{CULPRIT % 8}_{10000 + CULPRIT}.ptsum"
    _, alone, _ = analyze([os.path.join(job, name)], os.path.join(work, "alone"))
    own = alone["workers"][0]
    own_compute = sum(s["compute_ms"] for s in own["steps"]) / len(own["steps"])
    value = first.get("evidence", {}).get("values", {}).get(str(CULPRIT))
    check(value is not None and abs(value - own_compute) < 0.01,
          f"its value {value} ms = the mean compute of its steps analysed alone ({own_compute:.3f} ms)")
    injected = expected["severity"] * expected["healthy_step_ms"]
    excess = (value or 0) - first["evidence"]["median"]
    check(abs(excess - injected) <= 0.15 * injected, f"its excess {excess:.2f} ms is the injected {injected:.2f} ms")

    kept = [w for w in report["workers"] if w.get("rank") == CULPRIT]
    entry = kept[0] if kept else {}
    check(entry.get("detail") == "named" and entry.get("status") == "slow", "the culprit has full detail, named")
    for key in ("breakdown", "steps", "step_time_ms", "gpu_utilization", "name", "host"):
        check(entry.get(key) == own.get(key), f"its {key} equals the one-worker report's")
    full = [w for w in report["workers"] if "detail" in w]
    check(len(full) == scale["workers_in_full"] <= scale["full_detail_max"],
          f"{len(full)} workers in full detail (at most {scale['full_detail_max']})")

    # Nothing per worker x function.
    limit = scale["listed_max"]
    maps = [report["GPU Compute"]["workers with abnormal GPU utilization"], report["GPU Compute"]["detailed report"]]
    maps += [e["abnormal_workers"] for e in report["GPU memory operations"].values()]
    maps += [e["abnormal_workers"] for e in report["CUDA Runtime"].values()]
    maps += list(report["Python functions"].values())
    maps += [k["abnormal_workers"] for g in report["Communication"].values() for k in g.values()]
    check(all(len(m) <= limit for m in maps), f"every per-worker map of the sections <= {limit} entries")
    cuts = {(c["section"], c["key"]): c for c in scale["truncated"]}
    for stack, listed in report["Python functions"].items():
        cut = cuts.get(("Python functions", stack))
        if cut:
            check(cut["listed"] == len(listed) and cut["count"] > len(listed), f"cut of {stack[-40:]} recorded")
    heat = report["Heatmap"]
    check(heat["ranks"] == [w["rank"] for w in full], "Heatmap rows: the full-detail workers, rank order")
    nodes = scale["nodes"]
    check(len(heat["nodes"]["values"]) == len(nodes) == math.ceil(WORKERS / 8), f"{len(nodes)} node rows")

    # The aggregates against the worker table, in Python.
    table = scale["worker_table"]
    check(table["rank"] == list(range(WORKERS)), "the worker table has every rank once, in order")
    steps = sorted(v for v in table["step_time_ms"] if v is not None)
    quantiles = scale["distributions"]["step_time_ms"]["quantiles"]
    for p in (0, 50, 99, 100):
        check(abs(quantiles[f"p{p}"] - nearest_rank(steps, p)) < 1e-3,
              f"step time p{p} {quantiles[f'p{p}']} = the table's {nearest_rank(steps, p)}")
    counts = scale["distributions"]["step_time_ms"]["histogram"]["counts"]
    check(sum(counts) == WORKERS, "the histogram counts every worker")
    node = nodes[table["node"][CULPRIT]]
    members = [i for i, n in enumerate(table["node"]) if n == table["node"][CULPRIT]]
    check(node["not_normal"] == 1 and node["ranks"] == [members[0], members[-1]],
          f"the culprit's node {node['host']}: ranks {node['ranks']}, one not normal")
    column = [f["name"] for f in heat["functions"]].index(truth["function"])
    brightest = max(abs(v[column]) for v in heat["nodes"]["values"])
    check(abs(heat["nodes"]["values"][table["node"][CULPRIT]][column]) == brightest,
          "in the node heatmap the culprit's node is the brightest in its kernel's column")

    # Parts: every rank once, the culprit's entry as in report.json.
    ranks, in_part = [], None
    for path in sorted(glob.glob(os.path.join(out, "parts", "workers-*.json"))):
        with open(path) as f:
            part = json.load(f)
        ranks += [w["rank"] for w in part["workers"]]
        in_part = next((w for w in part["workers"] if w["rank"] == CULPRIT), in_part)
    check(ranks == list(range(WORKERS)), "the parts hold every rank once, in order")
    check(len(scale["parts"]["files"]) == math.ceil(WORKERS / 1024), "scale.parts lists every part")
    check(in_part is not None and all(in_part[k] == entry.get(k) for k in ("breakdown", "steps", "status")),
          "the culprit's part entry equals its report entry")
    scripts = glob.glob(os.path.join(out, "PerfDisplay", "parts", "workers-*.js"))
    check(len(scripts) == len(scale["parts"]["files"]), "each part is a PerfDisplay script too")


def check_healthy_job(work):
    job = os.path.join(work, "healthy")
    synth(job, "--fault", "slow_gpu", "--rank", str(CULPRIT), "--without-fault")
    _, report, _ = analyze([job], os.path.join(work, "healthy-out"))
    findings = report["diagnosis"]["findings"]
    check(report["diagnosis"]["verdict"] == "healthy" and not findings,
          f"healthy {WORKERS} workers: no finding ({[f['summary'][:80] for f in findings]})")
    statuses = set(report.get("scale", {}).get("worker_table", {}).get("status", ["?"]))
    check(statuses == {"normal"}, f"every worker normal: {statuses}")


def check_small_job(work):
    job = os.path.join(work, "small")
    run("synth", "-n", "16", "--format", "summary", "--fault", "slow_gpu", "-o", job)
    _, report, _ = analyze([job], os.path.join(work, "small-out"))
    check("scale" not in report and len(report["workers"]) == 16 and len(report["Heatmap"]["ranks"]) == 16,
          "16 workers: the full form, every worker in full")
    check(not os.path.exists(os.path.join(work, "small-out", "parts")), "16 workers: no parts")


def main():
    with TempDir() as work:
        check_small_job(work)
        check_fault_job(work)
        check_healthy_job(work)
    if FAILURES:
        sys.exit(f"{len(FAILURES)} check(s) failed")
    print("all checks passed")


if __name__ == "__main__":
    main()
