#!/usr/bin/env python3
"""bench_overhead -- what the collector costs, against baselines measured in the same run.

1. step() when no window is open, against another no-argument C method call.
2. A call-heavy pure-Python workload (recursion, small methods, builtins) run plain, under
   a do-nothing C profile hook (what CPython charges for any profile hook: on 3.11 it
   switches the interpreter to its slower tracing dispatch and builds a frame object per
   call; on 3.12+ also under do-nothing sys.monitoring callbacks for the events
   perftracker's 3.12 hook takes), under perftracker's window, under cProfile and under torch.profiler(
   with_stack=True) when torch is importable. Rounds alternate; medians of the thread's
   CPU time are reported (wall time on a shared machine is mostly other people's load).
   The target is that perftracker adds less than half of cProfile's added time.
3. The hardware sampler's CPU use at 100 us (and at 1 ms), against no sampler, over a
   window spent sleeping (separate processes, since the period is set per process).
   Without a GPU the sampler wakes every 10 ms whatever the period (nothing on the host
   changes faster); with one, the GPU tier runs at the period asked.
4. The raw trace's size against the same events as Chrome/Kineto JSON (`perftracker
   export`).
5. Steps found from optimizer.step (`perftracker run`, python/perftracker/autostep.py)
   against an explicit step() after each optimizer.step, when torch is importable: a
   training loop of SGD steps on a small model, run with neither, with step(), and with
   the optimizer hook (rounds alternate, medians of thread CPU time). Printed: each one's
   added cost per step and the found step's cost over the explicit one's (target: about 1,
   against the whole loop).

usage: PYTHONPATH=<build>/python python3 bench_overhead.py PERFTRACKER_CLI [WORKDIR]
"""
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
import timeit

os.environ.setdefault("PERFTRACKER_AGENT", "0")
os.environ.setdefault("PERFTRACKER_SUMMARIZE", "0")
os.environ.setdefault("PERFTRACKER_QUIET", "1")

from perftracker import PerfTracker, wait_idle, collector_stats  # noqa: E402
from perftracker import _perftracker  # noqa: E402

ROUNDS = 7


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class Point:
    def __init__(self, x):
        self.x = x

    def norm(self):
        return abs(self.x)


def mix(n):
    total = 0
    for i in range(n):
        p = Point(i)
        total += p.norm()
        total += len(str(i))
    return total


def workload():
    fib(20)
    mix(20000)


clock = time.thread_time


def timed(fn):
    t0 = clock()
    fn()
    return clock() - t0


def run_plain():
    return timed(workload), 0


def null_hook_runner(switch):
    """The workload under a do-nothing hook that switch(True) installs and switch(False)
    removes."""
    def run():
        t0 = clock()
        switch(True)
        workload()
        switch(False)
        return clock() - t0, 0
    return run


run_null_hook = null_hook_runner(_perftracker._null_profile)
run_null_monitoring = null_hook_runner(lambda on: _perftracker._null_monitoring(on))


def run_perftracker(tracer, outdir):
    _perftracker.arm(tracer.steps_done + 1, 1, outdir + "/")
    t0 = clock()
    tracer.step()          # the window opens here ...
    workload()
    tracer.step()          # ... and closes here
    elapsed = clock() - t0
    wait_idle(60)
    return elapsed, collector_stats()["last_cpu_records"]


def run_cprofile():
    profiler = cProfile.Profile()
    t0 = clock()
    profiler.enable()
    workload()
    profiler.disable()
    elapsed = clock() - t0
    return elapsed, pstats.Stats(profiler).total_calls


def torch_runner():
    try:
        import torch  # noqa: F401
        import torch.profiler as tp
    except Exception:
        return None, "torch is not importable in this Python"

    def run():
        t0 = clock()
        with tp.profile(activities=[tp.ProfilerActivity.CPU], with_stack=True) as prof:
            workload()
        elapsed = clock() - t0
        return elapsed, len(prof.events() or [])
    import torch.autograd
    note = ("torch %s, Kineto %s" % (torch.__version__, "available" if torch.autograd.kineto_available()
                                      else "NOT available: with_stack=True still installs torch's C++ Python "
                                           "tracer as the profile hook (it records every call), but without "
                                           "Kineto nothing is exported, hence 0 events"))
    return run, note


def step_cost():
    tracer = PerfTracker()
    number = 2_000_000
    x = 5
    step = min(timeit.repeat(tracer.step, number=number, repeat=5)) / number * 1e9
    base = min(timeit.repeat(x.bit_length, number=number, repeat=5)) / number * 1e9
    return step, base


SAMPLER_CHILD = r'''
import os, time
from perftracker import PerfTracker, wait_idle, collector_stats
t = PerfTracker(wait=1, steps=1, output_dir=os.environ["OUT"])
t.step()                      # the window opens
c0, w0 = time.process_time(), time.perf_counter()
time.sleep(1.0)
c1, w1 = time.process_time(), time.perf_counter()
t.step()                      # and closes
wait_idle(60)
print("%f %d" % ((c1 - c0) / (w1 - w0), collector_stats()["last_sample_period_us"]))
'''


def sampler_cost(workdir):
    results = {}
    for period in (0, 1000, 100):
        env = dict(os.environ, PERFTRACKER_SAMPLE_PERIOD_US=str(period), OUT=os.path.join(workdir, "s%d" % period))
        out = subprocess.run([sys.executable, "-c", SAMPLER_CHILD], env=env, capture_output=True, text=True,
                             check=True).stdout.split()
        results[period] = (float(out[0]), int(out[1]))
    return results


OPTIMIZER_STEPS = 2000


def found_step_cost():
    """Section 5: (ns per optimizer step plain, with step(), with the hook) or None."""
    try:
        import torch
        import torch.optim.optimizer as optimizer_module
    except ImportError:
        return None
    from perftracker import autostep
    tracer = PerfTracker()
    model = torch.nn.Linear(16, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    base = optimizer_module.Optimizer
    plain_code = base._optimizer_step_code if not hasattr(optimizer_module, "register_optimizer_step_post_hook") \
        else None

    def loop(explicit):
        t0 = clock()
        for _ in range(OPTIMIZER_STEPS):
            optimizer.step()
            if explicit:
                tracer.step()
        return (clock() - t0) / OPTIMIZER_STEPS * 1e9

    def hooked():
        # autostep as `perftracker run` sets it up, counting into this tracer; the mode and
        # the optimizer's count are reset each round since the explicit rounds move the
        # step number (which would make it stand down for good).
        before = tracer.steps_done
        autostep._tracer, autostep._mode, autostep._last_number = tracer, autostep.OPTIMIZER, tracer._step_number
        autostep._optimizer_steps = before
        if plain_code is not None:
            base._optimizer_step_code = hooked_code
        try:
            return loop(False)
        finally:
            counted.append(tracer.steps_done - before == OPTIMIZER_STEPS)
            if plain_code is not None:
                base._optimizer_step_code = plain_code

    autostep._install_optimizer_hook(torch)  # torch >= 2.0: global, and stays
    hooked_code = base._optimizer_step_code if plain_code is not None else None
    if plain_code is not None:
        base._optimizer_step_code = plain_code
    counted = []
    runs = {"plain": lambda: loop(False) if plain_code is not None else None, "explicit": lambda: loop(True),
            "found": hooked}
    times = {name: [] for name in runs}
    for _ in range(ROUNDS + 1):  # the first round warms up
        for name, fn in runs.items():
            times[name].append(fn())
    med = {name: statistics.median(v[1:]) if v[1] is not None else None for name, v in times.items()}
    return med, all(counted)


def main():
    cli = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("PERFTRACKER_CLI", "perftracker")
    workdir = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="pt-bench-")
    os.makedirs(workdir, exist_ok=True)
    print("Python %s on %s" % (sys.version.split()[0], sys.executable))

    step_ns, base_ns = step_cost()
    print("\n1. step() with no window: %.1f ns per call; x.bit_length(): %.1f ns; step() adds %.1f ns"
          % (step_ns, base_ns, step_ns - base_ns))

    tracer = PerfTracker()
    outdir = os.path.join(workdir, "window")
    torch_run, torch_note = torch_runner()
    runners = {"plain": run_plain, "do-nothing profile hook": run_null_hook}
    if sys.version_info >= (3, 12):   # perftracker's hook is sys.monitoring there
        runners["do-nothing monitoring hook"] = run_null_monitoring
    runners.update({"perftracker": lambda: run_perftracker(tracer, outdir), "cProfile": run_cprofile})
    if torch_run:
        runners["torch.profiler(with_stack=True)"] = torch_run
    for fn in runners.values():  # warm up caches and lazy imports
        fn()
    times = {name: [] for name in runners}
    events = {}
    for _ in range(ROUNDS):
        for name, fn in runners.items():
            elapsed, count = fn()
            times[name].append(elapsed)
            events[name] = count
    med = {name: statistics.median(v) for name, v in times.items()}
    base = med["plain"]
    print("\n2. call-heavy workload (fib(20) + 20k object/method/builtin calls), thread CPU time, median of %d "
          "rounds:" % ROUNDS)
    for name in runners:
        added = med[name] - base
        print("   %-34s %8.1f ms  added %7.1f ms (%5.1f%%)  events recorded: %s"
              % (name, med[name] * 1e3, added * 1e3, 100 * added / base, events[name]))
    ours, theirs = med["perftracker"] - base, med["cProfile"] - base
    floor_name = "do-nothing monitoring hook" if sys.version_info >= (3, 12) else "do-nothing profile hook"
    floor = med[floor_name] - base
    print("   perftracker's added time / cProfile's: %.2f (target < 0.5: %s)"
          % (ours / theirs, "met" if ours < 0.5 * theirs else "NOT met"))
    print("   above the %s: perftracker %.1f ms, cProfile %.1f ms (ratio %.2f); that hook alone is "
          "%.0f%% of cProfile's added time" % (floor_name, (ours - floor) * 1e3, (theirs - floor) * 1e3,
                                              (ours - floor) / (theirs - floor), 100 * floor / theirs))
    if torch_run:
        print("   torch.profiler: %s" % torch_note)
    else:
        print("   torch.profiler: not measured (%s)" % torch_note)

    samples = sampler_cost(workdir)
    print("\n3. hardware sampler CPU use while the process sleeps (% of one core):")
    for period, (cpu, achieved) in samples.items():
        label = "off" if period == 0 else "%d us" % period
        print("   sampler %-7s %6.2f%%   achieved period: %s" % (label, 100 * cpu,
                                                             "%d us" % achieved if achieved > 0 else "-"))

    traces = [f for f in os.listdir(outdir) if f.endswith(".ptrace")]
    raw = os.path.join(outdir, traces[0])
    exported = os.path.join(workdir, "window.json")
    subprocess.run([cli, "export", raw, "-o", exported], check=True, capture_output=True)
    raw_size, json_size = os.path.getsize(raw), os.path.getsize(exported)
    print("\n4. raw trace %d bytes vs Chrome/Kineto JSON %d bytes: ratio %.3f (target <= 0.1), %.1f bytes/event"
          % (raw_size, json_size, raw_size / json_size, raw_size / max(events["perftracker"], 1)))

    found = found_step_cost()
    if found is None:
        print("\n5. steps found from optimizer.step: not measured (no torch)")
        return
    med, counted = found
    print("\n5. an SGD step on Linear(16, 4), thread CPU time per step, median of %d rounds of %d:"
          % (ROUNDS, OPTIMIZER_STEPS))
    plain = med["plain"]
    for name, label in (("plain", "optimizer.step()"), ("explicit", "optimizer.step(); tracer.step()"),
                        ("found", "optimizer.step(), step found")):
        if med[name] is None:
            continue
        added = "" if plain is None or name == "plain" else "  adds %6.0f ns" % (med[name] - plain)
        print("   %-34s %8.0f ns%s" % (label, med[name], added))
    print("   found step / explicit step() (the whole loop): %.3f (target: about 1)%s"
          % (med["found"] / med["explicit"], "" if counted else "  -- the hook did NOT count the steps"))


if __name__ == "__main__":
    main()
