#!/usr/bin/env python3
"""How a triggered round scales with the job: the time from the CLI's start to the report
written, for 1024 simulated workers against 64 (the baseline), measured in the same run.

Workers are fake_workers processes (real agents and coordinator, simulated collector: see
tests/control/fake_fleet.h) with 50 ms steps; the CLI runs --wait 2 --steps 2, so about
0.2 s of every round is the job stepping through the window and the rest is the control
plane plus decoding, diagnosing and writing the report. Needs the build's perftracker
(PT_CLI, as scripts/bench.sh sets it) and fake_workers beside it."""
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROUNDS = 3
PER_PROCESS = 256


def master_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1] - 1


def measure(cli, fake, world, tmp):
    env = dict(os.environ)
    env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(master_port()), "WORLD_SIZE": str(world),
                "LOCAL_WORLD_SIZE": str(world), "PERFTRACKER_KEY_DIR": os.path.join(tmp, "keys-%d" % world),
                "PERFTRACKER_HEARTBEAT_MS": "500"})
    procs = []
    for first in range(0, world, PER_PROCESS):
        count = min(PER_PROCESS, world - first)
        procs.append(subprocess.Popen([fake, "--world", str(world), "--first", str(first), "--count", str(count),
                                       "--step-ms", "50", "--seconds", "600",
                                       "--job-secret-file", os.path.join(tmp, "job-secret-%d" % world)],
                                      env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True))
    try:
        for p in procs:
            if not p.stdout.readline().startswith("ready"):
                raise RuntimeError("fake workers did not start")
        times = []
        for _ in range(ROUNDS):
            t0 = time.perf_counter()
            r = subprocess.run([cli, "--trigger-on", "--auto-analyze", "--quiet", "--wait", "2", "--steps", "2",
                                "--output-dir", os.path.join(tmp, "out-%d" % world)], env=env,
                               capture_output=True, text=True)
            times.append(time.perf_counter() - t0)
            if r.returncode != 0:
                raise RuntimeError("round failed: " + r.stderr[-2000:])
        return statistics.median(times)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()


def main():
    cli = os.environ.get("PT_CLI") or (sys.argv[1] if len(sys.argv) > 1 else "build/bin/perftracker")
    fake = os.path.join(os.path.dirname(os.path.abspath(cli)), "fake_workers")
    if not os.access(fake, os.X_OK):
        print("bench_round: %s is not built" % fake)
        return 1
    tmp = tempfile.mkdtemp(prefix="pt-bench-control-")
    try:
        base = measure(cli, fake, 64, tmp)
        big = measure(cli, fake, 1024, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("round, trigger to report written (median of %d):" % ROUNDS)
    print("  64 workers   %.2f s   (baseline)" % base)
    print("  1024 workers %.2f s   ratio %.2fx for 16x the workers" % (big, big / base))
    print("  marginal cost per extra worker: %.2f ms" % ((big - base) / (1024 - 64) * 1000))
    return 0


if __name__ == "__main__":
    sys.exit(main())
