#!/usr/bin/env python3
"""Test (2) of issue 3: a real 4-rank torch.distributed job on gloo, shaped like the
seed's training.py, profiled by the collector in every rank and diagnosed by
`perftracker analyze`.

Each step every rank multiplies two matrices, sleeps (BASE_SLEEP, and rank 3 EXTRA_SLEEP
more: the seed's time.sleep(rank) reduced to one straggler), marks the step and waits in
dist.barrier(). Ranks are launched here with MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE/
LOCAL_RANK (Debian's torchrun crashes). Each rank profiles the same window by itself
(PerfTracker(wait=..., steps=...)), without hardware sampling: all four ranks share one
host, so host metrics differ between them only by the noise of whatever else runs on the
machine, and that noise is not what this test is about. The report must put rank 3 and
time.sleep first (a finding naming rank 3 alone, not one common to all workers), every
worker must be named by its real rank and carry the gloo backend, and the barrier must be
recognised as communication, longest on the ranks that wait for rank 3 (the straggler
waits least).

Timing: the barrier waits are compared by their median over the profiled steps, and the
margin asked is half of rank 3's extra sleep (150 ms), so one step disturbed by a loaded
machine cannot fail the test; ctest also runs it alone (RUN_SERIAL: four ranks fill two
cores).

usage: gloo_job_test.py WORKDIR   (exit 77 = skipped: no torch with gloo here)
"""
import json
import os
import shutil
import socket
import subprocess
import sys

WORLD = 4
BASE_SLEEP = 0.02
EXTRA_SLEEP = 0.30
ITERATIONS = 12
WAIT, STEPS = 4, 4

TRAINING = r'''
import os, sys, time
import torch
import torch.distributed as dist
try:
    from c4d_perftracker_collector.PerfTracker import PerfTracker
    my_tracer = PerfTracker(wait=%(wait)d, steps=%(steps)d, output_dir=os.environ["TRACE_DIR"])
except Exception:
    my_tracer = None
torch.set_num_threads(1)
dist.init_process_group("gloo")
device = torch.device("cpu")

def matmul():
    matrix_a = torch.randn(200, 200)
    matrix_b = torch.randn(200, 200)
    matrix_a = matrix_a.to(device)
    matrix_b = matrix_b.to(device)
    result = torch.matmul(matrix_a, matrix_b)
    result_cpu = result.to("cpu")
    del matrix_a, matrix_b, result

for i in range(%(iterations)d):
    matmul()
    time.sleep(%(base)f + (%(extra)f if dist.get_rank() == 3 else 0.0))
    if my_tracer is not None:
        my_tracer.step()
    dist.barrier()
from perftracker import wait_idle
assert wait_idle(120)
dist.destroy_process_group()
'''


def skip(message):
    print("SKIP:", message)
    sys.exit(77)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    workdir = os.path.abspath(sys.argv[1])
    cli = os.environ.get("PERFTRACKER_CLI")
    if not cli:
        raise SystemExit("PERFTRACKER_CLI must name the perftracker binary")
    probe = subprocess.run([sys.executable, "-c", "import torch.distributed as d; assert d.is_available() and "
                            "d.is_gloo_available()"], capture_output=True, text=True)
    if probe.returncode != 0:
        skip("%s has no torch with the gloo backend (%s)" % (sys.executable, probe.stderr.strip()[-200:]))
    shutil.rmtree(workdir, ignore_errors=True)
    traces = os.path.join(workdir, "traces")
    os.makedirs(traces)
    script = os.path.join(workdir, "training.py")
    with open(script, "w") as f:
        f.write(TRAINING % {"wait": WAIT, "steps": STEPS, "iterations": ITERATIONS,
                                "base": BASE_SLEEP, "extra": EXTRA_SLEEP})

    port = free_port()
    ranks = []
    for rank in range(WORLD):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                   WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank), TRACE_DIR=traces, PERFTRACKER_AGENT="0",
                   OMP_NUM_THREADS="1", PERFTRACKER_SAMPLE_PERIOD_US="0")
        log = open(os.path.join(workdir, "rank%d.log" % rank), "w")
        ranks.append((subprocess.Popen([sys.executable, script], cwd=workdir, env=env, stdout=log,
                                       stderr=subprocess.STDOUT), log))
    codes = []
    for proc, log in ranks:
        try:
            codes.append(proc.wait(timeout=300))
        except subprocess.TimeoutExpired:
            proc.kill()
            codes.append(-9)
        log.close()
    if any(codes):
        for rank in range(WORLD):
            print("---- rank %d ----" % rank)
            print(open(os.path.join(workdir, "rank%d.log" % rank)).read()[-3000:])
        raise SystemExit("ranks exited with %s" % codes)

    files = sorted(f for f in os.listdir(traces) if f.endswith(".ptrace"))
    if len(files) != WORLD:
        raise SystemExit("expected %d raw traces, found %s" % (WORLD, os.listdir(traces)))

    failures = []

    def check(condition, message):
        if not condition:
            failures.append(message)
            print("FAIL:", message)

    # Every worker's own summary: the barrier is communication, and the straggler waits least.
    barrier_ms = {}
    for name in files:
        stem = name[:-len(".ptrace")]
        summary = json.loads(subprocess.run([cli, "summarize", os.path.join(traces, "summaries", stem + ".ptsum"),
                                             "--json"], capture_output=True, text=True, check=True).stdout)
        check(summary.get("backend") == "gloo", "%s: backend gloo, got %r" % (name, summary.get("backend")))
        comm = [f for f in summary["functions"] if f["class"] == "communication"
                and f["name"].endswith("distributed_c10d.py: barrier")]
        check(len(comm) == 1, "%s: barrier recognised as communication: %s"
              % (name, [f["name"] for f in summary["functions"] if f["class"] == "communication"]))
        if comm:
            check(comm[0]["count"] >= STEPS, "%s: %d barrier calls, expected one per profiled step"
                  % (name, comm[0]["count"]))
            barrier_ms[summary["rank"]] = comm[0]["median_ms"]
    check(sorted(barrier_ms) == list(range(WORLD)), "every rank known from torch.distributed: %s" % barrier_ms)
    if len(barrier_ms) == WORLD:
        check(min(barrier_ms, key=barrier_ms.get) == 3, "rank 3 waits least in the barrier: %s" % barrier_ms)
        check(min(barrier_ms[r] for r in range(3)) > barrier_ms[3] + 1000 * EXTRA_SLEEP * 0.5,
              "ranks 0-2 wait for rank 3's extra sleep (median barrier ms): %s" % barrier_ms)

    report_dir = os.path.join(workdir, "report")
    analyze = subprocess.run([cli, "analyze", "--quiet", "--force", "-o", report_dir, traces], capture_output=True,
                             text=True)
    if analyze.returncode not in (0, 3):
        print(analyze.stdout[-2000:], analyze.stderr[-2000:])
        raise SystemExit("perftracker analyze exited %d" % analyze.returncode)
    with open(os.path.join(report_dir, "report.json")) as f:
        report = json.load(f)
    check(sorted(w["rank"] for w in report["workers"]) == list(range(WORLD)),
          "workers by rank: %s" % [w.get("rank") for w in report["workers"]])
    findings = report["diagnosis"]["findings"]
    check(len(findings) > 0, "the diagnosis has findings")
    if findings:
        first = findings[0]
        print("first finding:", json.dumps(first)[:600])
        check(first["workers"] == [3] and not first["all_workers"],
              "the first finding names rank 3 alone: workers %s, all_workers %s"
              % (first["workers"], first["all_workers"]))
        check(first["function"].endswith("<built-in function sleep>"),
              "the first finding is time.sleep: %s" % first["function"])
        values = {int(k): v for k, v in first.get("evidence", {}).get("values", {}).items()}
        if len(values) > 1:
            check(max(values, key=values.get) == 3, "rank 3 has the largest value: %s" % values)
    if failures:
        raise SystemExit("%d check(s) failed" % len(failures))
    print("gloo job: rank 3 and time.sleep named first; barrier per call (ms): %s"
          % {r: round(v, 1) for r, v in sorted(barrier_ms.items())})


if __name__ == "__main__":
    main()
