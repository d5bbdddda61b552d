"""Shared helpers for the engine tests: run the CLI, read reports, fail loudly."""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

CLI = os.environ.get("PT_CLI", "build/bin/perftracker")
TRACES = os.environ.get("PT_TRACES", os.path.join(os.path.dirname(__file__), "../../../shared/data/traces"))

SECTIONS = ["GPU Compute", "GPU memory operations", "Communication", "CUDA Runtime", "Python functions"]
TOP_KEYS = ["report_version", "perftracker_version", "generated_at", "job", "workers", "diagnosis"] + SECTIONS


# The failed checks of this test run: check() prints each check and keeps the failed ones,
# so a test reports every broken value, not only the first, and then fails on FAILURES.
FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILURES.append(what)


def run(*args, check=True):
    """Runs the CLI; returns (exit status, stdout, stderr)."""
    p = subprocess.run([CLI, *args], capture_output=True, text=True)
    if check and p.returncode not in (0, 3):
        sys.exit(f"FAIL: perftracker {' '.join(args)} exited {p.returncode}\n{p.stderr[-4000:]}")
    return p.returncode, p.stdout, p.stderr


def analyze(inputs, out, *extra):
    rc, stdout, stderr = run("analyze", "--quiet", "--force", "-o", out, *extra, *inputs)
    with open(os.path.join(out, "report.json")) as f:
        return rc, json.load(f), stderr


def check_schema(report, where):
    for key in TOP_KEYS:
        if key not in report:
            sys.exit(f"FAIL: {where}: report lacks {key!r}")
    gpu = report["GPU Compute"]
    for key in ("min/median/max GPU utilization (in [0,1])", "workers with abnormal GPU utilization",
                "major_kernel_executions", "workers with potential GPU issues", "detailed report"):
        if key not in gpu:
            sys.exit(f"FAIL: {where}: GPU Compute lacks {key!r}")
    for kind, entry in report["GPU memory operations"].items():
        assert set(entry) == {"avg bottleneck ratio (in [0,1])", "abnormal_workers"}, (where, kind, entry)
    for api, entry in report["CUDA Runtime"].items():
        assert set(entry) == {"avg bottleneck ratio (in [0,1])",
                              "avg execution time / monitoring duration (in [0,1])", "abnormal_workers"}, (where, api)
    for group, kernels in report["Communication"].items():
        for name, entry in kernels.items():
            normal = entry["example_of_normal_worker"]
            assert set(normal) == {"worker", "different from other workers", "features"}, (where, group, name)
            assert set(normal["features"]) == {"bottleneck ratio (in [0,1])", "avg throughput (%)",
                                               "throughput std (%)"}
            assert isinstance(entry["abnormal_workers"], list)
    d = report["diagnosis"]
    assert d["verdict"] in ("healthy", "degraded", "hang"), d["verdict"]
    assert 0 <= d["joint_impact"] <= 1 and d["step_model"]["step_ms"] >= 0, d
    impacts = [f["impact"] for f in d["findings"]]
    assert impacts == sorted(impacts, reverse=True), f"{where}: findings not sorted by impact"
    for f in d["findings"]:
        assert f["category"] in ("gpu_compute", "gpu_memory", "communication", "cuda_runtime", "python", "hang", "lost",
                                 "hardware", "host", "cpu_bound", "other"), f
        assert 0 <= f["impact"] <= 1, f
        assert isinstance(f["workers"], list) and isinstance(f["all_workers"], bool) and f["summary"], f
    for w in report["workers"]:
        for key in ("rank", "name", "host", "step_time_ms", "gpu_utilization", "status"):
            assert key in w, (where, key, w)
    check_values(report, where)


def _close(a, b, rel=1e-5, abs_=1e-6):
    return abs(a - b) <= max(abs_, rel * max(abs(a), abs(b)))


def check_values(report, where):
    """The report's figures that other figures of it determine, recomputed: the GPU
    utilization range and its abnormal workers, each worker's breakdown against its step
    time, and the job's median step and worker count."""
    workers = report["workers"]
    job = report["job"]
    failed = sum(w["status"] == "error" for w in workers)
    missing = sorted(w["rank"] for w in workers if w["status"] == "missing")
    analyzed = len(workers) - failed - len(missing)
    assert (job["workers_analyzed"], job["workers_failed"]) == (analyzed, failed), \
        f"{where}: workers analyzed/failed {job['workers_analyzed']}/{job['workers_failed']}, rows say {analyzed}/{failed}"
    assert missing == job["missing_ranks"][: len(missing)] and job["missing_count"] >= len(missing), \
        f"{where}: missing rows {missing[:10]} vs missing_ranks {job['missing_ranks'][:10]}"
    utils = sorted(w["gpu_utilization"] for w in workers if w.get("gpu_utilization") is not None)
    gpu = report["GPU Compute"]
    if utils:
        lo, mid, hi = gpu["min/median/max GPU utilization (in [0,1])"]
        want = (utils[0], statistics.median(utils), utils[-1])
        assert all(_close(a, b) for a, b in zip((lo, mid, hi), want)), f"{where}: GPU utilization {lo, mid, hi} != {want}"
        by_name = {}  # a name two workers share (inputs of two jobs) is either's
        for w in workers:
            by_name.setdefault(w["name"], []).append(w["gpu_utilization"])
        for name, value in gpu["workers with abnormal GPU utilization"].items():
            assert any(_close(value, u) for u in by_name.get(name, [])), f"{where}: abnormal utilization of {name}: {value}"
    steps = [w["step_time_ms"] for w in workers if w.get("step_time_ms") is not None]
    for w in workers:
        if w.get("step_time_ms") is None or "breakdown" not in w:
            continue
        parts = sum(w["breakdown"].values())
        assert abs(parts - w["step_time_ms"]) <= 1e-3 * w["step_time_ms"] + 1e-3, \
            f"{where}: rank {w['rank']}'s breakdown sums to {parts}, its step is {w['step_time_ms']}"
    if steps and job.get("median_step_time_ms") is not None:
        assert _close(job["median_step_time_ms"], statistics.median(steps), rel=1e-5, abs_=1e-3), \
            f"{where}: median_step_time_ms {job['median_step_time_ms']} != {statistics.median(steps)}"


class TempDir:
    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="pt-engine-")
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)


def require_traces():
    if not os.path.isdir(TRACES):
        print(f"SKIP: real traces not found at {TRACES} (they live in ../shared/data/traces of the dev checkout)")
        sys.exit(77)
