"""One 3-step training job as every generation of torch's profiler writes it
(tests/data/torch_generations/, README.md there), through `analyze`, `diff` and `export`:

- kineto_torch1.8.json: Kineto of 2021 -- Operator / Runtime / Kernel / Memcpy / Memset,
  ProfilerStep#N an Operator, string tids, GPU tid "stream 7", "async" flows;
- kineto_torch1.10.json: ProfilerStep#N and the operators as cpu_op, the rest as in 1.8,
  numeric tids, "async_gpu" flows, deviceProperties;
- kineto_torch2.json: today's -- ProfilerStep#N a user_annotation (and its GPU-side copy a
  gpu_user_annotation), cuda_runtime, kernel, gpu_memcpy, gpu_memset, ac2g flows, ts from
  baseTimeNanoseconds;
- legacy_profiler.json: torch.autograd.profiler's bare list without categories; it records
  operators and kernels only, so its twin is torch 2's trace cut to those.

Every form must give the same steps (numbers and durations, read here from the files
themselves), the same per-class breakdown (each step's compute and exposed memory time
also recomputed here from the kernels and copies), and the same findings; `diff` of a
2021 trace against its torch 2 twin must find no step-time change; `export` of a 2021
trace writes its steps as today's ProfilerStep#N annotations, with their times, and
reads back to the same steps."""
import json
import os
import sys

from engine_common import FAILURES, TempDir, analyze, check, check_schema, run

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "torch_generations")
MODERN = "kineto_torch2.json"
OLD_KINETO = ["kineto_torch1.8.json", "kineto_torch1.10.json"]
LEGACY = "legacy_profiler.json"
CLASSES = ["compute_ms", "memory_ms", "communication_ms", "runtime_ms", "python_ms", "idle_ms"]
MS_TOLERANCE = 1e-3  # the report rounds to 6 significant digits


def load(path):
    with open(path) as f:
        doc = json.load(f)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def cpu_side_steps(events):
    """{N: (start us, duration us)} of the CPU-side ProfilerStep#N ranges, whatever their
    category: the GPU-side copy (gpu_user_annotation) is left out."""
    return {int(e["name"].split("#")[1]): (float(e["ts"]), float(e["dur"]))
            for e in events if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")
            and e.get("cat") != "gpu_user_annotation"}


def union_us(intervals):
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def expected_gpu_ms(events, start, dur):
    """A step's compute time (the union of its kernels) and exposed memory time (its copies
    and memsets not under a kernel), in ms, straight from the file."""
    def spans(cats):
        return [(max(float(e["ts"]), start), min(float(e["ts"]) + float(e["dur"]), start + dur))
                for e in events if e.get("ph") == "X" and e.get("cat") in cats
                and float(e["ts"]) < start + dur and float(e["ts"]) + float(e["dur"]) > start]
    kernels = spans(("kernel", "Kernel"))
    memory = spans(("gpu_memcpy", "gpu_memset", "Memcpy", "Memset"))
    compute = union_us(kernels)
    return compute / 1000, (union_us(kernels + memory) - compute) / 1000


def close(a, b):
    return abs(a - b) <= MS_TOLERANCE


def same_classes(got, want):
    return all(close(got[c], want[c]) for c in CLASSES)


def findings(report):
    return [(f["category"], f.get("function"), f["all_workers"], round(f["impact"], 3))
            for f in report["diagnosis"]["findings"]]


def analysed(path, out):
    rc, report, stderr = analyze([path], out)
    check_schema(report, path)
    assert rc == 0, f"{path}: exit {rc}\n{stderr}"
    return report


def check_like(name, report, twin, twin_name, file_steps):
    """report (of file name) against its twin's: steps, breakdown, findings."""
    worker, reference = report["workers"][0], twin["workers"][0]
    numbers = [s["step"] for s in worker["steps"]]
    check(numbers == sorted(file_steps), f"{name}: steps {numbers}, the file marks {sorted(file_steps)}")
    check(all(close(s["ms"], file_steps[s["step"]][1] / 1000) for s in worker["steps"] if s["step"] in file_steps),
          f"{name}: step times {[s['ms'] for s in worker['steps']]} are the ProfilerStep durations")
    check(numbers == [s["step"] for s in reference["steps"]] and
          all(close(a["ms"], b["ms"]) and same_classes(a, b) for a, b in zip(worker["steps"], reference["steps"])),
          f"{name}: each step's time and classes are {twin_name}'s")
    check(close(worker["step_time_ms"], reference["step_time_ms"]) and
          same_classes(worker["breakdown"], reference["breakdown"]),
          f"{name}: breakdown {worker['breakdown']} is {twin_name}'s {reference['breakdown']}")
    check(findings(report) == findings(twin), f"{name}: findings {findings(report)} are {twin_name}'s {findings(twin)}")
    check(report["diagnosis"]["verdict"] == twin["diagnosis"]["verdict"], f"{name}: verdict is {twin_name}'s")


def check_kineto_generations(tmp):
    modern_events = load(os.path.join(DATA, MODERN))
    steps = cpu_side_steps(modern_events)
    assert sorted(steps) == [5, 6, 7], steps  # the data itself
    modern = analysed(os.path.join(DATA, MODERN), os.path.join(tmp, "modern"))
    for s in modern["workers"][0]["steps"]:  # the twin is itself right, not only alike
        start, dur = steps[s["step"]]
        compute, memory = expected_gpu_ms(modern_events, start, dur)
        check(close(s["compute_ms"], compute) and close(s["memory_ms"], memory),
              f"{MODERN}: step {s['step']} compute {s['compute_ms']} / memory {s['memory_ms']} ms, "
              f"the kernels and copies say {compute} / {memory}")
    check(len(modern["diagnosis"]["findings"]) > 0, f"{MODERN}: the job has a finding to compare")
    for name in OLD_KINETO:
        events = load(os.path.join(DATA, name))
        file_steps = cpu_side_steps(events)
        assert {n: d for n, (_, d) in file_steps.items()} == {n: d for n, (_, d) in steps.items()}, name
        check_like(name, analysed(os.path.join(DATA, name), os.path.join(tmp, name)), modern, MODERN, file_steps)
    return modern_events


def check_legacy(tmp, modern_events):
    """The legacy profiler records operators and kernels only: its twin is torch 2's trace
    without runtime calls, copies and memsets."""
    twin_path = os.path.join(tmp, "torch2_operators_and_kernels.json")
    with open(os.path.join(DATA, MODERN)) as f:
        doc = json.load(f)
    doc["traceEvents"] = [e for e in modern_events
                          if e.get("cat") not in ("cuda_runtime", "gpu_memcpy", "gpu_memset")]
    with open(twin_path, "w") as f:
        json.dump(doc, f)
    twin = analysed(twin_path, os.path.join(tmp, "legacy-twin"))
    legacy = analysed(os.path.join(DATA, LEGACY), os.path.join(tmp, "legacy"))
    check_like(LEGACY, legacy, twin, "torch 2's operators and kernels",
               cpu_side_steps(load(os.path.join(DATA, LEGACY))))


def check_diff(tmp):
    for name in OLD_KINETO:
        out = os.path.join(tmp, "diff-" + name)
        run("diff", "--quiet", "-o", out, os.path.join(DATA, name), os.path.join(DATA, MODERN))
        with open(os.path.join(out, "diff.json")) as f:
            diff = json.load(f)
        step = diff["step_time"]
        check(diff["before"]["steps"] == diff["after"]["steps"] == 3,
              f"diff {name} {MODERN}: 3 steps on each side ({diff['before']['steps']}, {diff['after']['steps']})")
        check(diff["verdict"]["change"] == "unchanged" and not step["significant"] and close(step["delta_ms"], 0)
              and close(step["before_ms"], step["after_ms"]),
              f"diff {name} {MODERN}: {diff['verdict']['change']}, step {step['before_ms']} -> {step['after_ms']} ms")
        changed = [c["class"] for c in diff["classes"] if c["significant"] or not close(c["delta_ms"], 0)]
        check(not changed, f"diff {name} {MODERN}: no class changed ({changed})")


def check_export(tmp):
    for name in OLD_KINETO:
        src = os.path.join(DATA, name)
        dst = os.path.join(tmp, "export-" + name)
        run("export", src, "-o", dst)
        exported = load(dst)
        marks = {int(e["name"].split("#")[1]): (float(e["ts"]), float(e["dur"]))
                 for e in exported if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")}
        check(marks == cpu_side_steps(load(src)),
              f"export {name}: its steps are today's ProfilerStep#N annotations with their times ({marks})")
        again = analysed(dst, os.path.join(tmp, "again-" + name))["workers"][0]["steps"]
        want = sorted((n, d / 1000) for n, (_, d) in cpu_side_steps(load(src)).items())
        check(len(again) == len(want) and all(s["step"] == n and close(s["ms"], ms) for s, (n, ms) in zip(again, want)),
              f"export {name}: the exported trace reads back to the same steps "
              f"({[(s['step'], s['ms']) for s in again]}, want {want})")


def main():
    with TempDir() as tmp:
        modern_events = check_kineto_generations(tmp)
        check_legacy(tmp, modern_events)
        check_diff(tmp)
        check_export(tmp)
    if FAILURES:
        sys.exit(f"FAIL: {len(FAILURES)} checks failed")
    print("PASS: every torch.profiler generation gives the same steps, breakdown, findings, diff and export")


if __name__ == "__main__":
    main()
