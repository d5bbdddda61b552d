"""A trace from torch's legacy profiler, generated here with Debian's torch (CPU-only, built
without Kineto): `export_chrome_trace` writes Chrome's "JSON array format" -- a top-level
list -- whose events have no "cat" and whose pid is the string "CPU functions". Both
torch.autograd.profiler.profile() and torch.profiler.profile() write it on such a build.
`analyze` must read it as a CPU-only worker: the steps from ProfilerStep#N, the aten
operators as Python/operator work, no GPU.

Skips (77) when /usr/bin/python3 has no torch."""
import json
import os
import subprocess
import sys

from engine_common import TempDir, analyze, check_schema, run

TORCH_PYTHON = "/usr/bin/python3"
STEPS = 3

# Each step multiplies matrices (aten::mm), and records its range as ProfilerStep#N the
# way torch.profiler's schedule does.
PROFILE = r'''
import sys, torch
from torch.autograd.profiler import profile, record_function
x = torch.randn(96, 96)
with profile() as prof:
    for i in range(%(steps)d):
        with record_function("ProfilerStep#%%d" %% i):
            for _ in range(4):
                y = torch.mm(x, x)
            y.relu().sum()
prof.export_chrome_trace(sys.argv[1])
'''

SCHEDULED = r'''
import sys, torch
x = torch.randn(96, 96)
activities = [torch.profiler.ProfilerActivity.CPU]
schedule = torch.profiler.schedule(wait=1, warmup=1, active=%(steps)d)
with torch.profiler.profile(activities=activities, schedule=schedule,
                            on_trace_ready=lambda p: p.export_chrome_trace(sys.argv[1])) as prof:
    for i in range(2 + %(steps)d):
        torch.mm(x, x).relu().sum()
        prof.step()
'''


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def generate(script, path):
    p = subprocess.run([TORCH_PYTHON, "-c", script % {"steps": STEPS}, path], capture_output=True, text=True,
                       timeout=300)
    if p.returncode != 0:
        sys.exit(f"FAIL: generating {path} with torch failed:\n{p.stderr[-3000:]}")
    with open(path) as f:
        events = json.load(f)
    # The point of the test: the file really is the legacy format.
    assert isinstance(events, list) and events, f"{path}: not a top-level list"
    timed = [e for e in events if e.get("ph") == "X"]
    assert timed and not any("cat" in e for e in timed), f"{path}: timed events carry cat"
    assert all(e.get("pid") == "CPU functions" for e in timed), f"{path}: pid is not 'CPU functions'"
    return events


def check_analysis(path, out, events):
    steps = sorted(int(e["name"].split("#")[1]) for e in events if e["name"].startswith("ProfilerStep#"))
    assert len(steps) == STEPS, steps
    rc, report, stderr = analyze([path], out)
    check_schema(report, path)
    assert rc == 0, f"{path}: exit {rc}\n{stderr}"
    assert "holds no timed events" not in stderr, stderr
    assert "CPU-only" in stderr, stderr
    assert report["job"]["workers_analyzed"] == 1, report["job"]
    worker = report["workers"][0]
    assert worker["gpu_utilization"] == 0, worker
    assert [s["step"] for s in worker["steps"]] == steps, (worker["steps"], steps)
    python = report["Python functions"]
    assert any(name == "aten::mm" or name.endswith("|aten::mm") for name in python), sorted(python)[:10]

    # The summary agrees: the operators are Python/operator work, nothing else is busy.
    _, text, _ = run("summarize", path, "--json")
    summary = json.loads(text)
    busy = summary["busy_ms"]
    assert busy["python"] > 0 and all(busy[c] == 0 for c in busy if c != "python"), busy
    mm = [f for f in summary["functions"] if f["name"].split("|")[-1] == "aten::mm"]
    expected_mm = sum(1 for e in events if e["name"] == "aten::mm")
    assert sum(f["count"] for f in mm) == expected_mm, (mm, expected_mm)
    assert summary["pid"] == -1, "'CPU functions' is a label, not a process id: %s" % summary["pid"]
    print(f"ok {os.path.basename(path)}: {len(events)} events, steps {[s['step'] for s in worker['steps']]}, "
          f"{expected_mm} aten::mm")


def main():
    if not os.path.exists(TORCH_PYTHON) or subprocess.run([TORCH_PYTHON, "-c", "import torch"],
                                                          capture_output=True).returncode != 0:
        skip(f"{TORCH_PYTHON} has no torch (apt-get install python3-torch)")
    with TempDir() as tmp:
        for name, script in (("autograd_profiler", PROFILE), ("torch_profiler", SCHEDULED)):
            path = os.path.join(tmp, name + ".json")
            events = generate(script, path)
            check_analysis(path, os.path.join(tmp, name + "-out"), events)
    print("PASS: legacy array-format traces analyse")


if __name__ == "__main__":
    main()
