#!/usr/bin/env python3
"""`perftracker run` on real 4-rank gloo jobs that know nothing of perftracker
(tests/control/run_job.py: the seed's training.py without the collector import and step()),
started through a launcher script as torchrun would start them, and triggered from
another process as a user does.

    test_run_torch.py PERFTRACKER RUN_JOB SCENARIO

seed, accumulation, two-optimizers, eval: `perftracker run /usr/bin/python3 run_job.py
--launch 4 --mode SCENARIO`, then `perftracker --trigger-on --auto-analyze`: the report
must name rank 3 and time.sleep, say where the steps came from (optimizer.step, or learned
for the seed's loop and the evaluation, which have no optimizer), and each step must be one
whole iteration -- at least 3/4 of rank 3's sleep per iteration, which a step per
micro-batch (1/4) or per optimizer (two per iteration) cannot be.
explicit: the seed's script with its PerfTracker() and step() kept, run the same way.
hang: rank 3 stops for good after the steps were learned: the round ends by itself with a
"hang" finding naming rank 3 only, as without perftracker run.
counts: jobs that end by themselves: the script's own step() kept (explicit) is counted
once per iteration, not twice; a job with no optimizer, collective or DataLoader gets the
clock (--seconds) and says so; `/usr/bin/python3 run_job.py` started directly works too.
staggered: the README's example job (the seed's loop, --sleep-scale 1: rank r sleeps r s in
each iteration) with its 4 ranks started STAGGER_S apart (staggered_launcher.py), triggered
at once with --wait 3 --steps 3 --save-raw-trace all, as the README's user does: the raw
traces (one clock: one machine) must show every rank profiling the same steps, numbered
alike, whose windows overlap by at least 90% of each rank's window.
bootstrap: the environment and startup of the job's processes are what they are without
perftracker -- the same sys.path, the sitecustomize that would have run (Debian's, a
user's on PYTHONPATH) still runs, only PYTHONPATH's first entry and PERFTRACKER_RUN /
PERFTRACKER_CLI added -- and a process without torch never loads the collector; the
command's exit status comes back, bad options and a missing command are refused clearly.

Skips (77) without Debian's torch or the collector module."""
import glob
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

TORCH_PYTHON = "/usr/bin/python3"
SKIP = 77
SLEEP_SCALE = 0.2
SOURCES = {"seed": "steps: learned from a repeating sequence", "eval": "steps: learned from a repeating sequence",
           "accumulation": "steps: found from optimizer.step", "two-optimizers": "steps: found from optimizer.step",
           "explicit": "steps: the script's own step() calls"}

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_e2e_torch import free_master_port, skip, stop, trigger  # noqa: E402


def base_env(tmp):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("PERFTRACKER_") or k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "PYTHONPATH"):
            del env[k]
    env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_master_port()),
                "PERFTRACKER_KEY_DIR": os.path.join(tmp, "keys"), "PERFTRACKER_JOIN_GRACE_S": "60",
                "OMP_NUM_THREADS": "1"})
    return env


def check_triggered(cli, run_job, scenario, tmp):
    env = base_env(tmp)
    log = open(os.path.join(tmp, "job.log"), "w+")
    job = subprocess.Popen([cli, "run", TORCH_PYTHON, run_job, "--launch", "4", "--mode", scenario,
                            "--sleep-scale", str(SLEEP_SCALE)],
                           env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        r = trigger(cli, env, os.path.join(tmp, "out"), time.time() + 180, ["--save-raw-trace", "all"])
        log.flush()
        log.seek(0)
        job_log = log.read()
        context = "\n--- CLI stderr ---\n%s\n--- job ---\n%s" % (r.stderr[-4000:], job_log[-4000:])
        assert r.returncode == 0, "the CLI exited %d%s" % (r.returncode, context)
        reports = glob.glob(os.path.join(tmp, "out", "*", "report.json"))
        assert len(reports) == 1, "report.json: %s%s" % (reports, context)
        with open(reports[0]) as f:
            report = json.load(f)
        assert report["job"]["workers_analyzed"] == 4, report["job"]
        findings = report["diagnosis"]["findings"]
        assert findings, "no finding: %s%s" % (json.dumps(report["diagnosis"], indent=1), context)
        top = findings[0]
        assert top["workers"][0] == 3 and not top["all_workers"] and "sleep" in top["function"], \
            "the root cause is not rank 3's time.sleep: %s%s" % (json.dumps(findings, indent=1), context)
        # Each worker's "<trace>: steps: <source>" line (not the windows' alignment warning,
        # "... do not hold the same steps: ...", which a loaded machine can cause).
        said = [w for w in report["warnings"] if re.match(r"[^ ]+: steps: ", w)]
        assert said and all(SOURCES[scenario] in w for w in said), \
            "the report does not say where the steps came from (%s): %s" % (SOURCES[scenario], report["warnings"])
        iteration_ms = 3 * SLEEP_SCALE * 1000
        for w in report["workers"]:
            assert w["step_time_ms"] >= 0.75 * iteration_ms, \
                "rank %d's step is %.0f ms, not one iteration (rank 3 sleeps %.0f ms in each): %s" % (
                    w["rank"], w["step_time_ms"], iteration_ms, json.dumps(report["workers"], indent=1)[:3000])
        loaded = len(re.findall(r"^\[perftracker\] " + re.escape(SOURCES[scenario]), job_log, re.M))
        assert loaded == 4, "%d processes took their steps from where the report says, not the 4 ranks:\n%s" % (
            loaded, job_log[-3000:])
        print("run %s: %s; %s; step %.0f ms" % (scenario, top["summary"], said[0],
                                                min(w["step_time_ms"] for w in report["workers"])))
        return 0
    finally:
        stop(job)
        log.close()


STAGGER_S = 2.0
MIN_OVERLAP = 0.9


def profiled_windows(cli, raw_dir):
    """{trace: (first step number, [(start_s, end_s) of each step])} from the raw traces,
    exported to Kineto JSON (their times are the machine's CLOCK_MONOTONIC)."""
    windows = {}
    for trace in sorted(glob.glob(os.path.join(raw_dir, "*.ptrace"))):
        out = trace + ".json"
        subprocess.run([cli, "export", trace, "-o", out], check=True, capture_output=True, timeout=120)
        with open(out) as f:
            data = json.load(f)
        events = data["traceEvents"] if isinstance(data, dict) else data
        steps = sorted((e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6, int(e["name"].split("#")[1]))
                       for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))
        windows[os.path.basename(trace)] = (steps[0][2] if steps else -1, [(a, b) for a, b, _ in steps])
    return windows


def window_overlaps(windows):
    """Each rank's share of its window (first step's start to last step's end) that every
    other rank's window covers too."""
    spans = {name: (steps[0][0], steps[-1][1]) for name, (_, steps) in windows.items() if steps}
    common = min(end for _, end in spans.values()) - max(start for start, _ in spans.values())
    return {name: max(common, 0.0) / (end - start) for name, (start, end) in spans.items()}


def check_staggered(cli, run_job, tmp):
    env = base_env(tmp)
    log = open(os.path.join(tmp, "job.log"), "w+")
    launcher = os.path.join(os.path.dirname(os.path.abspath(__file__)), "staggered_launcher.py")
    job = subprocess.Popen([cli, "run", TORCH_PYTHON, launcher, str(STAGGER_S), "4", TORCH_PYTHON, run_job,
                            "--mode", "seed", "--sleep-scale", "1"],
                           env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out = os.path.join(tmp, "out")
        cmd = [cli, "--trigger-on", "--auto-analyze", "--wait", "3", "--steps", "3", "--output-dir", out,
               "--save-raw-trace", "all"]
        deadline = time.time() + 180
        while True:  # at once: retried only while rank 0 has not registered the job yet
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
            if not (r.returncode == 1 and "no running job found" in r.stderr) or time.time() > deadline:
                break
            time.sleep(0.5)
        log.flush()
        log.seek(0)
        context = "\n--- CLI stderr ---\n%s\n--- job ---\n%s" % (r.stderr[-4000:], log.read()[-4000:])
        assert r.returncode == 0, "the CLI exited %d%s" % (r.returncode, context)
        raw = glob.glob(os.path.join(out, "*", "raw_trace"))
        assert len(raw) == 1, "raw_trace: %s%s" % (raw, context)
        windows = profiled_windows(cli, raw[0])
        assert len(windows) == 4 and all(len(steps) == 3 for _, steps in windows.values()), \
            "%s%s" % (windows, context)
        firsts = {first for first, _ in windows.values()}
        assert len(firsts) == 1, "the ranks profiled different steps: %s%s" % (
            {name: first for name, (first, _) in windows.items()}, context)
        overlaps = window_overlaps(windows)
        shown = ", ".join("%s %.0f%%" % (name, 100 * share) for name, share in sorted(overlaps.items()))
        assert min(overlaps.values()) >= MIN_OVERLAP, \
            "the ranks' profiled steps overlap by less than %.0f%% of a window: %s\n%s%s" % (
                100 * MIN_OVERLAP, shown, json.dumps(windows, indent=1), context)
        reports = glob.glob(os.path.join(out, "*", "report.json"))
        with open(reports[0]) as f:
            misaligned = [w for w in json.load(f)["warnings"] if "profiled windows" in w]
        assert not misaligned, "the analysis says the windows do not line up: %s" % misaligned
        print("run staggered: ranks started %.0f s apart profiled steps %d..%d together; overlap %s"
              % (STAGGER_S, firsts.pop(), list(windows.values())[0][0] + 2, shown))
        return 0
    finally:
        stop(job)
        log.close()


def check_hang(cli, run_job, tmp):
    """The seed's loop, rank 3 asleep for good in its 8th iteration (after the steps were
    learned): the round must end by itself and name rank 3's hang."""
    env = dict(base_env(tmp), PERFTRACKER_HANG_MIN_MS="3000")
    log = open(os.path.join(tmp, "job.log"), "w+")
    job = subprocess.Popen([cli, "run", TORCH_PYTHON, run_job, "--launch", "4", "--mode", "seed", "--sleep-scale",
                            "0.1", "--hang-at", "8"],
                           env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # Triggered once it hangs: a round that begins earlier profiles steps before it.
        deadline = time.time() + 180
        while "hangs in iteration" not in open(log.name).read():
            assert time.time() < deadline and job.poll() is None, "the job never hung:\n%s" % open(log.name).read()
            time.sleep(0.2)
        r = trigger(cli, env, os.path.join(tmp, "out"), time.time() + 180, [])
        log.flush()
        log.seek(0)
        context = "\n--- CLI stderr ---\n%s\n--- job ---\n%s" % (r.stderr[-4000:], log.read()[-4000:])
        assert r.returncode == 3, "the CLI exited %d (want 3: partial)%s" % (r.returncode, context)
        reports = glob.glob(os.path.join(tmp, "out", "*", "report.json"))
        assert len(reports) == 1, "report.json: %s%s" % (reports, context)
        with open(reports[0]) as f:
            report = json.load(f)
        assert report["diagnosis"]["verdict"] == "hang", json.dumps(report["diagnosis"], indent=1)
        top = report["diagnosis"]["findings"][0]
        assert top["category"] == "hang" and top["workers"] == [3], json.dumps(top, indent=1)
        assert "run_job.py: train" in top["function"], json.dumps(top, indent=1)
        print("run hang: %s" % top["summary"])
        return 0
    finally:
        stop(job)
        log.close()


def run_to_end(cmd, env, timeout=300):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, "%s exited %d:\n%s" % (cmd, r.returncode, (r.stdout + r.stderr)[-4000:])
    return r


def probes(output):
    return [tuple(m) for m in re.findall(r"iterations (\d+) steps (-?\d+) source (\w+?)(?=iterations|\s|$)", output)]


def check_counts(cli, run_job, tmp):
    env = dict(base_env(tmp), PERFTRACKER_AGENT="0")
    # The script's own step() kept, with an optimizer too: once per iteration.
    r = run_to_end([cli, "run", "--", TORCH_PYTHON, run_job, "--launch", "4", "--mode", "explicit", "--iters", "20",
                    "--sleep-scale", "0.01"], env)
    assert probes(r.stdout) == [("20", "20", "explicit")] * 4, r.stdout + r.stderr[-3000:]
    # Started directly (no launcher), one rank; no optimizer, collective or DataLoader: the clock.
    one = dict(env, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    r = run_to_end([cli, "run", "--seconds", "0.5", TORCH_PYTHON, run_job, "--mode", "no-step", "--iters", "70",
                    "--sleep-scale", "0.2"], one)
    (iterations, steps, source), = probes(r.stdout)
    assert source == "clock" and int(steps) >= 1, r.stdout + r.stderr
    assert "none found" in r.stderr and "a step every 0.5 s" in r.stderr, r.stderr
    print("run counts: explicit 20 steps in 20 iterations; no step source: %s clock steps" % steps)
    return 0


PROBE = r"""
import json, os, sys
print(json.dumps({"path": sys.path, "env": dict(os.environ), "user_site": "user_sitecustomize_ran" in sys.modules,
                  "perftracker": sorted(m for m in sys.modules if m.startswith("perftracker")),
                  "torch": "torch" in sys.modules}))
"""


def check_bootstrap(cli, tmp):
    user = os.path.join(tmp, "user")
    os.makedirs(user)
    with open(os.path.join(user, "sitecustomize.py"), "w") as f:  # a user's own, on their PYTHONPATH
        f.write("import sys\nsys.modules['user_sitecustomize_ran'] = sys\n")
    env = dict(base_env(tmp), PYTHONPATH=user, RANK="0", WORLD_SIZE="1")
    for python in (TORCH_PYTHON, "python3"):
        plain = json.loads(run_to_end([python, "-c", PROBE], env).stdout)
        ran = json.loads(run_to_end([cli, "run", python, "-c", PROBE], env).stdout)
        assert ran["path"] == plain["path"], "sys.path changed:\n%s\n%s" % (plain["path"], ran["path"])
        assert ran["user_site"] and plain["user_site"], "the user's sitecustomize did not run under perftracker run"
        added = {k: v for k, v in ran["env"].items() if plain["env"].get(k) != v}
        assert set(added) <= {"PYTHONPATH", "PERFTRACKER_RUN", "PERFTRACKER_CLI", "_"}, added
        assert added["PYTHONPATH"].endswith(":" + user) and added["PYTHONPATH"].count(":") == 1, added
        assert ran["perftracker"] == [] and not ran["torch"], \
            "a process that does not import torch loaded %s" % ran["perftracker"]
    # Debian's own sitecustomize (apport's hook) still runs under /usr/bin/python3.
    check = "import sys; print('sitecustomize' in sys.modules and sys.modules['sitecustomize'].__file__)"
    plain = run_to_end([TORCH_PYTHON, "-c", check], dict(env, PYTHONPATH="")).stdout
    ran = run_to_end([cli, "run", TORCH_PYTHON, "-c", check], dict(env, PYTHONPATH="")).stdout
    assert plain == ran, "the system's sitecustomize: %r without perftracker, %r with it" % (plain, ran)
    # With torch imported, a worker loads the collector.
    r = run_to_end([cli, "run", TORCH_PYTHON, "-c", "import torch, sys; print('perftracker.autostep' in sys.modules)"],
                   dict(env, PERFTRACKER_AGENT="0"))
    assert r.stdout.strip() == "True", r.stdout + r.stderr
    # The command line: the command's own exit status, and clear refusals.
    for args, status, message in ((["/bin/sh", "-c", "exit 7"], 7, ""), ([], 2, "no command to run"),
                                  (["--seconds", "0", "true"], 2, "--seconds wants seconds from 0.01 to 3600: 0"),
                                  (["--seconds", "1e9", "true"], 2, "--seconds wants"),
                                  (["--seconds"], 2, "--seconds wants"), (["--bogus", "true"], 2, "unknown option"),
                                  (["/nonexistent/train"], 127, "cannot run /nonexistent/train: No such file")):
        r = subprocess.run([cli, "run", *args], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == status and message in r.stderr, (args, r.returncode, r.stderr)
    print("run bootstrap: same sys.path and sitecustomize; only PYTHONPATH's first entry and %s added"
          % ", ".join(sorted(set(added) - {"PYTHONPATH", "_"})))
    return 0


def main():
    scenarios = ("seed", "accumulation", "two-optimizers", "eval", "explicit", "hang", "counts", "bootstrap",
                 "staggered")
    if len(sys.argv) != 4 or sys.argv[3] not in scenarios:
        print(__doc__, file=sys.stderr)
        return 2
    cli, run_job = (os.path.abspath(a) for a in sys.argv[1:3])
    scenario = sys.argv[3]
    if not os.path.exists(TORCH_PYTHON) or subprocess.run([TORCH_PYTHON, "-c", "import torch.distributed"],
                                                          capture_output=True).returncode != 0:
        skip("%s has no torch" % TORCH_PYTHON)
    boot = os.path.join(os.path.dirname(os.path.dirname(cli)), "python")
    if not glob.glob(os.path.join(boot, "perftracker", "_perftracker*.so")):
        skip("the collector's Python module is not built in %s" % boot)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with tempfile.TemporaryDirectory(prefix="pt-run-") as tmp:
        if scenario == "counts":
            return check_counts(cli, run_job, tmp)
        if scenario == "bootstrap":
            return check_bootstrap(cli, tmp)
        if scenario == "hang":
            return check_hang(cli, run_job, tmp)
        if scenario == "staggered":
            return check_staggered(cli, run_job, tmp)
        return check_triggered(cli, run_job, scenario, tmp)


if __name__ == "__main__":
    sys.exit(main())
