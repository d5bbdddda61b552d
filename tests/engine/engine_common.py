"""Shared helpers for the engine tests: run the CLI, read reports, fail loudly."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

CLI = os.environ.get("PT_CLI", "build/bin/perftracker")
TRACES = os.environ.get("PT_TRACES", os.path.join(os.path.dirname(__file__), "../../../shared/data/traces"))

SECTIONS = ["GPU Compute", "GPU memory operations", "Communication", "CUDA Runtime", "Python functions"]
TOP_KEYS = ["report_version", "perftracker_version", "generated_at", "job", "workers", "diagnosis"] + SECTIONS


def run(*args, check=True):
    """Runs the CLI; returns (exit status, stdout, stderr)."""
    p = subprocess.run([CLI, *args], capture_output=True, text=True)
    if check and p.returncode not in (0, 3):
        sys.exit(f"FAIL: perftracker {' '.join(args)} exited {p.returncode}\n{p.stderr[-4000:]}")
    return p.returncode, p.stdout, p.stderr


def analyze(inputs, out, *extra):
    rc, stdout, stderr = run("analyze", "--quiet", "-o", out, *extra, *inputs)
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
