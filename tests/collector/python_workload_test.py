#!/usr/bin/env python3
"""Test (1) of issue 3: a pure-Python workload with known calls, profiled by the real
collector in a child interpreter, then checked call stack by call stack.

Every call of the workload is planned, so the counts below are exact. Each sleep is
bracketed by perf_counter_ns() in the workload itself, so its time in the trace is
bounded on both sides without a guess about the machine's load: at least the nominal
sleep (a sleep never ends early), at most what the workload measured around it. The raw trace is read back through
`perftracker export` (stacks rebuilt from the events) and through `perftracker
summarize` (the engine's own call-tree rebuild), and the two must agree. Also checked:
both import paths, the vendor's path, names of builtins and of standard-library frames,
that step() itself is not recorded, a thread started inside the window, the local
trigger's files, a window refused because cProfile is active (no exception, one log
line), and a capped window that counts what it dropped.

usage: python_workload_test.py WORKDIR   (PYTHONPATH must reach the built package and
PERFTRACKER_CLI name the perftracker binary; ctest sets both)
"""
import json
import os
import shutil
import subprocess
import sys
import time

WORKLOAD = r'''
import json, sys, threading, time
from time import perf_counter_ns
from perftracker import PerfTracker, collector_stats, wait_idle
from c4d_perftracker_collector.PerfTracker import PerfTracker as VendorPerfTracker
assert VendorPerfTracker is PerfTracker

SLEPT = {"leaf": [], "outer": [], "helper": []}   # ns measured around each sleep

def leaf_sleep():
    t0 = perf_counter_ns()
    time.sleep(0.004)
    SLEPT["leaf"].append(perf_counter_ns() - t0)

def compute(n):
    acc = []
    acc.append(n)
    return sum(range(n))

def gen():
    yield 1
    yield 2

def boom():
    raise ValueError("expected")

def inner():
    for _ in range(3):
        leaf_sleep()
    compute(2000)
    json.dumps({"a": 1})

def outer():
    inner()
    inner()
    try:
        boom()
    except ValueError:
        pass
    list(gen())
    t0 = perf_counter_ns()
    time.sleep(0.010)
    SLEPT["outer"].append(perf_counter_ns() - t0)

def worker():
    for _ in range(4):
        t0 = perf_counter_ns()
        time.sleep(0.002)
        SLEPT["helper"].append(perf_counter_ns() - t0)

tracer = PerfTracker(wait=2, steps=3, output_dir="out")
for step in range(7):
    outer()
    if step == 3:
        helper = threading.Thread(target=worker, name="helper")
        helper.start()
        helper.join()
    tracer.step()
assert wait_idle(60)
print("STATS " + json.dumps(collector_stats()))
print("SLEPT " + json.dumps(SLEPT))
'''

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


def run(cmd, cwd, env=None, expect=0):
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=300)
    if proc.returncode != expect:
        print(proc.stdout, proc.stderr)
        raise SystemExit("%s exited %d (expected %d)" % (" ".join(cmd), proc.returncode, expect))
    return proc


def rebuild_stacks(trace):
    """{tid: {stack: [calls, exclusive ns]}} from exported events (times exact to the ns).
    Every recorded call lasts at least the hook's own nanoseconds, so a frame that ends
    at or before an event's start is never its parent."""
    by_tid = {}
    for ev in trace["traceEvents"]:
        if ev.get("ph") != "X" or ev.get("cat") not in ("python_function", "cpu_op"):
            continue
        start = round(ev["ts"] * 1000)
        by_tid.setdefault(ev["tid"], []).append((start, start + round(ev["dur"] * 1000), ev["name"]))
    result = {}
    for tid, events in by_tid.items():
        events.sort(key=lambda e: (e[0], -(e[1] - e[0])))
        stacks, open_frames = {}, []  # open: [start, end, stack, time in children]

        def close():
            start, end, stack, children = open_frames.pop()
            stacks[stack][1] += (end - start) - children
            if open_frames:
                open_frames[-1][3] += end - start

        for start, end, name in events:
            while open_frames and open_frames[-1][1] <= start:
                close()
            stack = (open_frames[-1][2] + "|" if open_frames else "") + name
            stacks.setdefault(stack, [0, 0])[0] += 1
            open_frames.append([start, end, stack, 0])
        while open_frames:
            close()
        result[tid] = stacks
    return result


def workload_checks(workdir, cli):
    env = dict(os.environ)
    with open(os.path.join(workdir, "workload.py"), "w") as f:
        f.write(WORKLOAD)
    proc = run([sys.executable, "workload.py"], workdir, env)
    stats = json.loads(proc.stdout.split("STATS ", 1)[1].split("\n", 1)[0])
    slept = json.loads(proc.stdout.split("SLEPT ", 1)[1])
    check(stats["windows_done"] == 1 and stats["windows_failed"] == 0, "one window written: %s" % stats)
    check(stats["last_dropped"] == 0, "nothing dropped: %s" % stats["last_dropped"])
    log = proc.stderr
    check(log.count("GPU collection unavailable") == 1, "exactly one GPU-unavailable line, got:\n" + log)
    out = os.path.join(workdir, "out")
    traces = [f for f in os.listdir(out) if f.endswith(".ptrace")]
    check(len(traces) == 1, "one raw trace in the output dir: %s" % os.listdir(out))
    raw = os.path.join(out, traces[0])
    host, local_rank, pid = traces[0][:-len(".ptrace")].rsplit("_", 2)
    check(local_rank == "0" and pid.isdigit(), "the trace is named <host>_<local_rank>_<pid>: %s" % traces[0])
    summary_file = os.path.join(out, "summaries", traces[0][:-len(".ptrace")] + ".ptsum")
    check(os.path.exists(summary_file), "the worker summarized its own trace: %s" % summary_file)

    exported = os.path.join(workdir, "trace.json")
    run([cli, "export", raw, "-o", exported], workdir)
    with open(exported) as f:
        trace = json.load(f)
    per_tid = rebuild_stacks(trace)
    main = per_tid.get(int(pid), {})
    M = "workload.py: <module>"
    O = M + "|workload.py: outer"
    I = O + "|workload.py: inner"
    expected_counts = {
        M: 1,
        O: 3,
        I: 6,
        I + "|workload.py: leaf_sleep": 18,
        I + "|workload.py: leaf_sleep|<built-in function sleep>": 18,
        I + "|workload.py: leaf_sleep|<built-in function perf_counter_ns>": 36,
        I + "|workload.py: leaf_sleep|<built-in method append of list object at 0x>": 18,
        I + "|workload.py: compute": 6,
        I + "|workload.py: compute|<built-in method append of list object at 0x>": 6,
        I + "|workload.py: compute|<built-in function sum>": 6,
        I + "|json/__init__.py: dumps": 6,
        O + "|workload.py: boom": 3,
        O + "|workload.py: gen": 9,
        O + "|<built-in function sleep>": 3,
        O + "|<built-in function perf_counter_ns>": 6,
        O + "|<built-in method append of list object at 0x>": 3,
    }
    for stack, count in expected_counts.items():
        got = main.get(stack, [0, 0])[0]
        check(got == count, "%s: %d calls, expected %d" % (stack, got, count))
    check(not any("method step" in s for s in main), "step() itself is not recorded")
    check(not any("profile" in s.lower() for s in main), "no collector frames in stacks: %s"
          % [s for s in main if "profile" in s.lower()])

    # A sleep never ends early, and the trace sees it inside the workload's own
    # perf_counter_ns() bracket, so: calls x nominal <= traced <= the brackets of the
    # longest `calls` sleeps of that kind (whichever steps the window held). Neither bound
    # depends on the machine's load. The 1% slack covers only the two clocks: the
    # collector reads the TSC and maps it onto CLOCK_MONOTONIC through the window's first
    # and last step marks, so a rare preemption between the two reads there skews the map
    # by a fraction of a percent; perf_counter_ns is CLOCK_MONOTONIC itself.
    ms = 1_000_000

    def check_sleeps(what, traced_ns, calls, nominal_ms, measured):
        lower = calls * nominal_ms * ms * (1 - 1e-2)
        upper = sum(sorted(measured, reverse=True)[:calls]) * (1 + 1e-2) + calls * 20_000
        print("%s: %d sleeps traced as %.3f ms, bounds %.3f..%.3f ms" % (what, calls, traced_ns / ms, lower / ms,
                                                                        upper / ms))
        check(len(measured) >= calls and lower <= traced_ns <= upper,
              "%s: %d sleeps of %d ms traced as %.3f ms, expected %.3f..%.3f ms (measured around them)"
              % (what, calls, nominal_ms, traced_ns / ms, lower / ms, upper / ms))

    sleep_leaf = main.get(I + "|workload.py: leaf_sleep|<built-in function sleep>", [0, 0])[1]
    check_sleeps("leaf_sleep", sleep_leaf, 18, 4, slept["leaf"])
    outer_sleep = main.get(O + "|<built-in function sleep>", [0, 0])[1]
    check_sleeps("outer", outer_sleep, 3, 10, slept["outer"])
    # Time is not moved from child to parent: leaf_sleep's own time (a few bytecodes per
    # call) is far below the sleeps it calls, however loaded the machine.
    leaf_self = main.get(I + "|workload.py: leaf_sleep", [0, 0])[1]
    check(leaf_self < sleep_leaf / 2, "leaf_sleep's own time excludes its sleep: %.3f ms vs %.3f ms asleep"
          % (leaf_self / ms, sleep_leaf / ms))
    # Exclusive times partition the window: they add up to the root's duration exactly.
    steps = sorted((e for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    check([e["name"] for e in steps] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"],
          "steps 2-4 profiled: %s" % [e["name"] for e in steps])
    window = round((steps[-1]["ts"] + steps[-1]["dur"] - steps[0]["ts"]) * 1000) if steps else 0
    total = sum(v[1] for s, v in main.items() if s.startswith(M))
    check(total == window, "main-thread exclusive times sum to the window: %d vs %d ns" % (total, window))

    helper = [stacks for tid, stacks in per_tid.items() if tid != int(pid)]
    T = ("threading.py: _bootstrap|threading.py: _bootstrap_inner|threading.py: run|workload.py: worker"
         "|<built-in function sleep>")
    check(len(helper) == 1 and helper[0].get(T, [0])[0] == 4, "the helper thread's 4 sleeps: %s" % helper)
    if helper and T in helper[0]:
        check_sleeps("helper thread", helper[0][T][1], 4, 2, slept["helper"])

    # The engine's summary of the same trace agrees on the big stacks.
    summary = json.loads(run([cli, "summarize", summary_file, "--json"], workdir).stdout)
    python = {f["name"]: f for f in summary["functions"] if f["class"] == "python"}
    for stack in (I + "|workload.py: leaf_sleep|<built-in function sleep>", O + "|<built-in function sleep>"):
        f = python.get(stack)
        check(f is not None, "summary has %s" % stack)
        if f:
            check(f["count"] == expected_counts[stack], "summary count of %s: %s" % (stack, f["count"]))
            check(abs(f["total_ms"] * ms - main[stack][1]) <= 1000,
                  "summary exclusive of %s: %.3f ms vs %.3f ms" % (stack, f["total_ms"], main[stack][1] / ms))
    check([s["step"] for s in summary["steps"]] == [2, 3, 4], "summary steps: %s" % summary["steps"])
    check(summary["producer"] == "perftracker" and summary["pid"] == int(pid), "summary identity")


PROFILER_CLASH = r'''
import cProfile, sys, threading
from perftracker import PerfTracker, collector_stats, wait_idle
# A second thread, hooked with the main one as the window opens: when the window is given
# up (cProfile owns the main thread), its hook must go too.
ask, answer = threading.Event(), []
def helper():
    ask.wait()
    answer.append(sys.getprofile())
other = threading.Thread(target=helper)
other.start()
t = PerfTracker(wait=2, steps=1, output_dir="clash")
t.step()
profiler = cProfile.Profile()
profiler.enable()
t.step()          # the window would open here: cProfile owns the hook
t.step()
profiler.disable()
wait_idle(30)
ask.set()
other.join()
s = collector_stats()
if sys.version_info >= (3, 12):   # cProfile uses sys.monitoring there: no clash, both record
    assert s["windows_done"] == 1 and s["windows_failed"] == 0, s
else:
    assert s["windows_done"] == 0 and s["windows_failed"] == 1, s
    assert answer == [None], "the other thread kept a profile hook after the window was given up: %r" % answer
print("OK")
'''

CAPPED = r'''
import json
from perftracker import PerfTracker, collector_stats, wait_idle
def f():
    pass
t = PerfTracker(wait=1, steps=1, output_dir="capped")
t.step()
for _ in range(20000):
    f()
t.step()
wait_idle(30)
print("STATS " + json.dumps(collector_stats()))
'''


FAILING_SUMMARY = r'''
import json
from perftracker import PerfTracker, collector_stats, wait_idle
t = PerfTracker(wait=1, steps=1, output_dir="failing")
t.step()
t.step()
wait_idle(30)
print("STATS " + json.dumps(collector_stats()))
'''


STACK_PROBE = r'''
from perftracker import PerfTracker, _perftracker
tracer = PerfTracker()
def waiting_in_training():
    return _perftracker._training_stack()
print("STACK " + waiting_in_training())
'''


FORK = r'''
import os, sys
from perftracker import PerfTracker, collector_stats, wait_idle

def hooked():   # 3.12+: the hook is a sys.monitoring tool; before, the profile hook
    if sys.version_info >= (3, 12):
        return any(sys.monitoring.get_tool(i) == "perftracker" for i in range(6))
    return sys.getprofile() is not None

t = PerfTracker(wait=1, steps=1, output_dir="forked")
t.step()                                   # the window opens
was_hooked = hooked()
pid = os.fork()                            # as a DataLoader starting its workers
if pid == 0:
    clean = not hooked() and not collector_stats()["busy"]
    os._exit(0 if clean else 3)
_, status = os.waitpid(pid, 0)
t.step()                                   # the window closes
wait_idle(30)
print("FORK", was_hooked, os.waitstatus_to_exitcode(status), collector_stats()["windows_done"], hooked())
'''


EARLY_EXIT = r'''
from perftracker import PerfTracker
t = PerfTracker(wait=5, steps=2, output_dir="early")
t.step()
t.step()
'''


def failure_checks(workdir, cli):
    # A program that ends before its window opens exits at once (nothing to wait for).
    with open(os.path.join(workdir, "early.py"), "w") as f:
        f.write(EARLY_EXIT)
    started = time.monotonic()
    proc = run([sys.executable, "early.py"], workdir)
    check(time.monotonic() - started < 10, "early exit took %.1f s" % (time.monotonic() - started))
    check("ended before its profiling window opened" in proc.stderr, "early exit is logged: " + proc.stderr)

    # A child forked during a window runs untraced and leaves the parent's window alone.
    with open(os.path.join(workdir, "fork.py"), "w") as f:
        f.write(FORK)
    proc = run([sys.executable, "fork.py"], workdir)
    check("FORK True 0 1 False" in proc.stdout, "fork during a window: %r %r" % (proc.stdout, proc.stderr[-500:]))

    # The agent's python_stack hook (used when a worker looks hung) sees the training
    # thread's stack from another thread.
    with open(os.path.join(workdir, "stack.py"), "w") as f:
        f.write(STACK_PROBE)
    proc = run([sys.executable, "stack.py"], workdir)
    check("STACK stack.py: <module>|stack.py: waiting_in_training" in proc.stdout,
          "python_stack hook: %r" % proc.stdout)

    with open(os.path.join(workdir, "clash.py"), "w") as f:
        f.write(PROFILER_CLASH)
    proc = run([sys.executable, "clash.py"], workdir)
    check("OK" in proc.stdout, "cProfile clash handled without an exception")
    expected_lines = 1 if sys.version_info < (3, 12) else 0
    check(proc.stderr.count("another profiler") == expected_lines, "log lines for the clash:\n" + proc.stderr)

    with open(os.path.join(workdir, "capped.py"), "w") as f:
        f.write(CAPPED)
    env = dict(os.environ, PERFTRACKER_MAX_EVENTS="4096", PERFTRACKER_MAX_EVENTS_IGNORED="x")
    proc = run([sys.executable, "capped.py"], workdir, env)
    stats = json.loads(proc.stdout.split("STATS ", 1)[1])
    check(stats["last_cpu_records"] == 4096, "the cap holds: %d records" % stats["last_cpu_records"])
    check(stats["last_dropped"] >= 20000 - 4096, "drops counted: %d" % stats["last_dropped"])
    summary = json.loads(run([cli, "summarize", stats["last_trace"], "--json"], workdir).stdout)
    check(any("dropped" in w for w in summary["warnings"]), "the trace says it dropped events: %s"
          % summary["warnings"])

    # A summarizer that fails: its own message, from the first character to the last (the
    # trailing newline trimmed), is the window's error, not a generic one.
    failing_cli = os.path.join(workdir, "failing-cli")
    with open(failing_cli, "w") as f:
        f.write("#!/bin/sh\nprintf 'summarize: the disk is full\\n\\n' >&2\nexit 1\n")
    os.chmod(failing_cli, 0o755)
    with open(os.path.join(workdir, "failing.py"), "w") as f:
        f.write(FAILING_SUMMARY)
    proc = run([sys.executable, "failing.py"], workdir, dict(os.environ, PERFTRACKER_CLI=failing_cli))
    failed = json.loads(proc.stdout.split("STATS ", 1)[1])
    check(failed["windows_failed"] == 1 and failed["last_error"] == "summarizing failed: summarize: the disk is full",
          "the summarizer's message is the error: %r" % failed.get("last_error"))

    # A raw trace cut short (a worker killed mid-write) is refused with a clear message.
    cut = os.path.join(workdir, "cut.ptrace")
    with open(stats["last_trace"], "rb") as f:
        data = f.read()
    with open(cut, "wb") as f:
        f.write(data[: len(data) // 2])
    proc = run([cli, "summarize", cut, "-o", cut + ".ptsum"], workdir, expect=1)
    check("truncated" in proc.stderr, "truncated trace named as such: " + proc.stderr)
    check(not os.path.exists(cut + ".ptsum"), "no summary from a truncated trace")


def main():
    workdir = os.path.abspath(sys.argv[1])
    cli = os.environ.get("PERFTRACKER_CLI")
    if not cli:
        raise SystemExit("PERFTRACKER_CLI must name the perftracker binary")
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    workload_checks(workdir, cli)
    failure_checks(workdir, cli)
    if failures:
        raise SystemExit("%d check(s) failed" % len(failures))
    print("python workload: all checks passed (%s)" % sys.version.split()[0])


if __name__ == "__main__":
    main()
