#!/usr/bin/env python3
"""bench_gpu -- what a profiling window costs a real training step, perftracker against
torch.profiler, on one GPU, in one run.

Two models, each trained with AdamW under bf16 autocast on random batches:
  gpu-bound     nn.TransformerEncoder, 12 layers, d_model 1024, batch 16 x 256 tokens;
  launch-bound  48 layers, d_model 256, batch 2 x 16 tokens (the CPU launching kernels
                is the bottleneck, so per-launch costs show fully).
Every configuration runs in its own process (CUPTI allows one subscriber, and each tool
keeps state per process): warm-up steps, then IDLE_STEPS timed steps with nothing on,
then WINDOW_STEPS timed steps inside the tool's window. Each step ends with
torch.cuda.synchronize(), as a loss.item() would. The ratio is the window's mean step time
over the idle steps' median, so both sides come from the same process and GPU.

Printed per configuration: idle step, window step, the ratio, the window's start cost
(the step whose end opened it), and for perftracker the records per step (Python calls,
GPU records, CUDA API calls recorded and only counted) and the hardware sampler's CPU
share of one core and achieved period.

Goals (issue 10), checked for perftracker's default settings:
  window / idle step  <= 1.10 gpu-bound, <= 1.25 launch-bound;
  sampler (100 us asked) <= 3% of one core, its achieved period reported.
Exit status: 0 when every goal is met, 1 when one is missed, 77 when there is no CUDA GPU
(one line says so: nothing is measured).

usage: PYTHONPATH=<build>/python PERFTRACKER_CLI=<build>/bin/perftracker \
       python3 bench/gpu/bench_gpu.py [--out DIR] [--only MODEL] [--quick]
BENCH_GPU_DEVICE=cpu runs the same code on the CPU (a plumbing test where there is no
GPU; its numbers mean nothing and its GPU checks fail).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODELS = {
    "gpu-bound": dict(layers=12, d_model=1024, heads=16, batch=16, seq=256),
    "launch-bound": dict(layers=48, d_model=256, heads=4, batch=2, seq=16),
}
GOALS = {"gpu-bound": 1.10, "launch-bound": 1.25}
SAMPLER_GOAL_PCT = 3.0
WARMUP_STEPS, IDLE_STEPS, WINDOW_STEPS = 10, 20, 8
CHILD_TIMEOUT_S = 240

# (label, tool, extra environment)
CONFIGS = [
    ("perftracker", "perftracker", {}),
    ("perftracker, API calls not counted", "perftracker", {"PERFTRACKER_CUDA_API_COUNT": "0"}),
    ("torch.profiler", "torch", {}),
]


DEVICE = os.environ.get("BENCH_GPU_DEVICE", "cuda")


def no_gpu_reason():
    if DEVICE == "cpu":
        return None
    try:
        import torch
    except Exception as exc:  # noqa: BLE001
        return "torch is not importable (%s)" % exc
    if not torch.cuda.is_available():
        return "torch %s sees no CUDA GPU" % torch.__version__
    return None


# ------------------------------------------------------------------ one configuration (child)

def child(model_name, tool, out_path, quick):
    import torch
    import torch.nn as nn

    spec = MODELS[model_name]
    warmup, idle, window = (3, 6, 4) if quick else (WARMUP_STEPS, IDLE_STEPS, WINDOW_STEPS)
    tracer = None
    if tool == "perftracker":
        from perftracker import PerfTracker
        trace_dir = tempfile.mkdtemp(prefix="pt-bench-gpu-")
        # The window opens at the step() that completes warmup + idle steps.
        tracer = PerfTracker(wait=warmup + idle, steps=window, output_dir=trace_dir)

    torch.manual_seed(0)
    device = torch.device(DEVICE)
    on_gpu = DEVICE == "cuda"
    layer = nn.TransformerEncoderLayer(spec["d_model"], spec["heads"], dim_feedforward=4 * spec["d_model"],
                                       batch_first=True)
    model = nn.TransformerEncoder(layer, spec["layers"], enable_nested_tensor=False).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(spec["batch"], spec["seq"], spec["d_model"], device=device)

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        optimizer.step()
        if on_gpu:
            torch.cuda.synchronize()

    def timed_steps(n):
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            train_step()
            if tracer is not None:
                tracer.step()
            times.append(time.perf_counter() - t0)
        return times

    result = {"model": model_name, "tool": tool, "device": torch.cuda.get_device_name(0) if on_gpu else "CPU",
              "torch": torch.__version__, "python": sys.version.split()[0]}
    timed_steps(warmup)
    idle_times = timed_steps(idle)          # the last one's step() opens perftracker's window
    prof = None
    if tool == "torch":
        import torch.profiler as tp
        activities = [tp.ProfilerActivity.CPU] + ([tp.ProfilerActivity.CUDA] if on_gpu else [])
        prof = tp.profile(activities=activities,
                          record_shapes=True, with_stack=True)
        t0 = time.perf_counter()
        prof.__enter__()
        result["window_start_s"] = time.perf_counter() - t0
    window_times = timed_steps(window)      # perftracker: the last one's step() closes the window
    if prof is not None:
        t0 = time.perf_counter()
        prof.__exit__(None, None, None)
        result["window_end_s"] = time.perf_counter() - t0
        try:
            result["records_per_step"] = len(prof.profiler.kineto_results.events()) / window
        except Exception:  # noqa: BLE001  (the attribute moved between torch versions)
            pass
    idle_median = statistics.median(idle_times[:-1])
    result.update(idle_ms=1e3 * idle_median, window_ms=1e3 * statistics.mean(window_times),
                  window_median_ms=1e3 * statistics.median(window_times),
                  window_max_ms=1e3 * max(window_times))
    if tool == "perftracker":
        from perftracker import collector_stats, wait_idle
        result["window_start_s"] = idle_times[-1] - idle_median
        wait_idle(180)
        s = collector_stats()
        result.update(
            windows_done=s["windows_done"], last_error=s["last_error"],
            cpu_records_per_step=s["last_cpu_records"] / window,
            gpu_records_per_step=s["last_gpu_records"] / window,
            api_recorded_per_step=s["last_api_recorded"] / window,
            api_counted_per_step=s["last_api_counted"] / window,
            sampler_cpu_pct=s["last_sampler_cpu_pct"], sample_period_us=s["last_sample_period_us"],
            sampler_reads=s["last_sampler_reads"],
            samples=s["last_samples"], cupti_compiled=s["cupti_compiled"])
    result["ratio"] = result["window_ms"] / result["idle_ms"]
    with open(out_path, "w") as f:
        json.dump(result, f)


# ------------------------------------------------------------------ the run (parent)

def run_config(model_name, label, tool, env_extra, out_dir, quick):
    out = os.path.join(out_dir, "%s_%s.json" % (model_name, label.replace(" ", "_").replace(",", "")))
    log = out[:-5] + ".log"
    env = dict(os.environ, PERFTRACKER_AGENT="0", **env_extra)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", model_name, tool, out] + (["--quick"] if quick else [])
    with open(log, "w") as logf:
        try:
            rc = subprocess.run(cmd, env=env, stdout=logf, stderr=subprocess.STDOUT, timeout=CHILD_TIMEOUT_S).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    if rc != 0 or not os.path.exists(out):
        with open(log) as f:
            tail = f.read()[-1500:]
        return None, "exited %s; log %s:\n%s" % (rc, log, tail)
    with open(out) as f:
        return json.load(f), None


def fmt(value, pattern="%.1f"):
    return "-" if value is None else pattern % value


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="where results and logs go (default: a temporary dir)")
    parser.add_argument("--only", choices=sorted(MODELS), help="one model only")
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke test, not a measurement)")
    parser.add_argument("--child", nargs=3, metavar=("MODEL", "TOOL", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.child[2], args.quick)
        return 0

    reason = no_gpu_reason()
    if reason:
        print("bench_gpu: no GPU here (%s): nothing measured" % reason)
        return 77
    out_dir = args.out or tempfile.mkdtemp(prefix="pt-bench-gpu-")
    os.makedirs(out_dir, exist_ok=True)
    failures = []
    results = []
    for model_name in ([args.only] if args.only else list(MODELS)):
        for label, tool, env_extra in CONFIGS:
            if "not counted" in label and model_name != "launch-bound":
                continue  # the variant matters where launches dominate
            started = time.monotonic()
            r, error = run_config(model_name, label, tool, env_extra, out_dir, args.quick)
            if error:
                failures.append("%s / %s: %s" % (model_name, label, error))
                print("FAIL: %s / %s %s" % (model_name, label, error))
                continue
            r["label"] = label
            results.append(r)
            print("  %-12s %-36s idle %7.2f ms  window %7.2f ms (median %.2f, max %.2f)  ratio %.3f  "
                  "start %.2f s  [%.0f s]" % (model_name, label, r["idle_ms"], r["window_ms"],
                                              r["window_median_ms"], r["window_max_ms"], r["ratio"],
                                              r.get("window_start_s", 0), time.monotonic() - started))
            if tool == "perftracker":
                print("  %-12s %-36s per step: %s Python calls, %s GPU records (%s API calls recorded, %s only "
                      "counted); sampler %s%% of a core, achieved period %s us, %s samples" %
                      ("", "", fmt(r["cpu_records_per_step"], "%.0f"), fmt(r["gpu_records_per_step"], "%.0f"),
                       fmt(r["api_recorded_per_step"], "%.0f"), fmt(r["api_counted_per_step"], "%.0f"),
                       fmt(r["sampler_cpu_pct"], "%.2f"), r["sample_period_us"], r["samples"]))
                print("  %-12s %-36s sampler reads: %s" % ("", "", r["sampler_reads"] or "-"))
            elif "records_per_step" in r:
                print("  %-12s %-36s per step: %.0f profiler events; window end (post-processing) %.1f s"
                      % ("", "", r["records_per_step"], r.get("window_end_s", 0)))

    print("\nbench_gpu: %s, torch %s, Python %s" % (results[0]["device"], results[0]["torch"], results[0]["python"])
          if results else "\nbench_gpu: no configuration finished")
    for r in results:
        if r["tool"] != "perftracker" or r["label"] != "perftracker":
            continue
        goal = GOALS[r["model"]]
        ok = r["ratio"] <= goal
        print("%s: %s window / idle step %.3f (goal <= %.2f)" % ("PASS" if ok else "FAIL", r["model"], r["ratio"], goal))
        if not ok:
            failures.append("%s ratio %.3f > %.2f" % (r["model"], r["ratio"], goal))
        ok = r["windows_done"] == 1 and not r["last_error"] and r["gpu_records_per_step"] > 0
        print("%s: %s window written with GPU records (%s)" % ("PASS" if ok else "FAIL", r["model"],
                                                               r["last_error"] or "no error"))
        if not ok:
            failures.append("%s window not recorded" % r["model"])
        cpu = r["sampler_cpu_pct"]
        ok = cpu is not None and 0 <= cpu <= SAMPLER_GOAL_PCT
        print("%s: %s sampler %.2f%% of one core (goal <= %.0f%%), achieved period %s us" %
              ("PASS" if ok else "FAIL", r["model"], cpu if cpu is not None else -1, SAMPLER_GOAL_PCT,
               r["sample_period_us"]))
        if not ok:
            failures.append("%s sampler %.2f%% of a core" % (r["model"], cpu if cpu is not None else -1))
    torch_ratios = ["%s %.3f" % (r["model"], r["ratio"]) for r in results if r["tool"] == "torch"]
    print("      torch.profiler(with_stack, record_shapes) in the same run: %s" % (", ".join(torch_ratios) or "-"))
    print("bench_gpu: %d goal(s) missed; results in %s" % (len(failures), out_dir))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
