#!/usr/bin/env python3
"""What the trigger prints, and what it leaves, on a running job (issue 37, items 5 to 7).

usage: cli_trigger.py FAKE_WORKERS WORKDIR   (PT_CLI: the perftracker binary)

The job is tests/control's fake_workers (real agents and coordinator, simulated steps),
found through the environment as a user in the master's shell finds it.
  report_first      stdout opens with the verdict and its findings, names workers by
                    rank, never by file, rounds its numbers; then says where the report is
                    and how to open it without promising port 5000 (--port N); --verbose
                    adds the seed's JSON sections
  warnings_on_stdout  a rank that dies in its window: the report's warnings are on stdout,
                    after the verdict, naming rank 3
  refused_round     a second trigger while a round runs is refused without first
                    announcing a round folder
  closed_output     a trigger whose stderr reader is gone (`2>&1 | head`) still ends its
                    round with a whole report: exit 0, every round folder has report.json
Each case prints one line; the script fails if any case does."""
import glob
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "control"))
from test_multiprocess import Job  # noqa: E402 (tests/control: fake_workers processes as a job)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from case_runner import case, expect, run_cases  # noqa: E402 (this folder: the cases' runner)

CLI = os.environ.get("PT_CLI", "perftracker")


def round_dirs(job):
    return sorted(glob.glob(os.path.join(job.tmp, "out", "*")))


def round_of(result):
    m = re.search(r"^PerfTracker report: (\S+)/PerfDisplay/ ", result.stdout, re.M)
    return m.group(1) if m else None


@case
def report_first(job, problems):
    r = job.trigger("--wait", "2", "--steps", "2")
    expect(r.returncode == 0, f"exit {r.returncode}: {r.stderr[-400:]}", problems)
    folder = round_of(r)
    if not folder:
        problems.append(f"no report line: {r.stdout[-400:]}")
        return ""
    report = json.load(open(os.path.join(folder, "report.json")))
    lines = r.stdout.splitlines()
    expect(lines[:1] == ["Diagnosis:"] and lines[1].endswith("INFO: verdict: " + report["diagnosis"]["verdict"]),
           f"stdout does not open with the verdict: {lines[:2]}", problems)
    for w in report["workers"]:
        expect(w["name"] not in r.stdout, f"a worker is named by its file {w['name']}", problems)
    long_float = re.search(r"\d\.\d{5,}", r.stdout)
    expect(not long_float, f"an unrounded number {long_float and long_float.group(0)}", problems)
    view = [line for line in lines if line.startswith("View it: ")]
    expect(len(view) == 1 and f"cd {folder}/PerfDisplay && python3 app.py" in view[0] and "--port" in view[0],
           f"the View line does not say how to pick a port: {view}", problems)
    expect(len(lines) <= 40, f"{len(lines)} lines for a 4-worker round", problems)
    v = job.trigger("--wait", "2", "--steps", "2", "--verbose")
    expect(v.returncode == 0 and v.stdout.startswith("Diagnosis:") and "(gpu_compute.c) INFO: {" in v.stdout
           and '"min/median/max GPU utilization (in [0,1])": [' in v.stdout,
           f"--verbose: no JSON sections after the verdict: {v.stdout[:300]}", problems)
    return f"{len(lines)} lines; " + (view[0][:90] if view else "")


@case
def warnings_on_stdout(job, problems):
    """Rank 3, in a process of its own, dies in its window: the report stands on ranks 0-2
    and its warnings, on stdout, say what became of rank 3."""
    r = job.trigger("--wait", "2", "--steps", "2", "--timeout", "20")
    expect(r.returncode == 3, f"exit {r.returncode}, expected 3: {r.stderr[-400:]}", problems)
    text = r.stdout
    verdict_at, warnings_at = text.find("INFO: verdict: "), text.find("\nWarnings (")
    expect(0 <= verdict_at < warnings_at, f"no warnings after the verdict on stdout: {text[:600]}", problems)
    block = text[warnings_at:].split("\n\n", 1)[0].splitlines()[1:]
    named = [line for line in block if line.startswith("  ") and "rank 3" in line]
    expect(named, f"no warning line names rank 3: {block[:6]}", problems)
    return named[0].strip()[:120] if named else ""


@case
def refused_round(job, problems):
    first = subprocess.Popen([CLI, "--trigger-on", "--auto-analyze", "--wait", "150", "--steps", "2",
                              "--output-dir", os.path.join(job.tmp, "out")], env=job.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)  # its round is under way
        r = job.trigger("--wait", "1")
    finally:
        first.communicate(timeout=240)
    out_dir = os.path.join(job.tmp, "out")
    expect(r.returncode == 1 and "still running" in r.stderr, f"exit {r.returncode}: {r.stderr[-300:]}", problems)
    expect(out_dir not in r.stderr and "round folder" not in r.stderr,
           f"the refused trigger announced a round folder: {r.stderr.strip()}", problems)
    return r.stderr.strip().splitlines()[-1]


@case
def closed_output(job, problems):
    """The reader of stderr goes away at once, as `2>&1 | head -1` does after a line."""
    before = set(round_dirs(job))
    p = subprocess.Popen([CLI, "--trigger-on", "--auto-analyze", "--wait", "20", "--steps", "2", "--output-dir",
                          os.path.join(job.tmp, "out")], env=job.env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    p.stderr.close()
    rc = p.wait(timeout=240)
    made = sorted(set(round_dirs(job)) - before)
    whole = [d for d in made if os.path.isfile(os.path.join(d, "report.json"))]
    expect(rc == 0, f"exit {rc} (-13: killed by SIGPIPE)", problems)
    expect(made and whole == made, f"round folders without a report: {sorted(set(made) - set(whole))}", problems)
    return f"exit {rc}; {len(whole)} whole round folder(s)"


def on_a_running_job(fake, work, name, fn, problems):
    """Case `name` on a 4-rank fake job of its own (warnings_on_stdout: rank 3 dies in its
    window), stopped after it whatever happens."""
    tmp = os.path.join(work, name)
    subprocess.run(["rm", "-rf", tmp], check=True)
    os.makedirs(tmp)
    job = Job(CLI, fake, 4, tmp, step_ms=20)
    try:
        if name == "warnings_on_stdout":
            job.start(0, 3)
            job.start(3, 1, "--special-rank", "3", "--die-in-window")
        else:
            job.start(0, 4)
        job.wait_ready()
        return fn(job, problems)
    finally:
        job.stop()


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    fake, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    return run_cases(lambda name, fn, problems: on_a_running_job(fake, work, name, fn, problems))


if __name__ == "__main__":
    sys.exit(main())
