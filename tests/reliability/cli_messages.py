#!/usr/bin/env python3
"""What the offline commands say and how they exit, through the real CLI (issue 11).

usage: cli_messages.py WORKDIR   (PT_CLI: the perftracker binary)

  analyze_one_rank      one rank's traces of a 4-rank job: exit 0, the absent ranks a note
  analyze_hang          a hang verdict: exit 3, and stderr says why
  analyze_mixed_jobs    two jobs' traces together (4 and 8 ranks): exit 3, stderr says the
                        inputs are not one job, the report's verdict says why (issue 37.2)
  synth_bad_fault       --fault bogus names --fault and lists the kinds; exit 2
  without_o             summarize and export say that -o is missing; exit 2
  export_not_a_trace    export of JSON without a single event ("[1, 2, 3]", an empty
                        event list): exit 1 saying so, and no output file
  display_outer_folder  `display OUT` serves OUT/PerfDisplay (issue 17.9)
  display_port_taken    a port in use: one line saying so and how to pick another; exit 1
  not_a_trace_beside_traces  a label.json beside the traces: a note, not a worker (17.7)
  nothing_analysable    random files, a truncated .json.gz, an empty folder, a missing
                        path: exit 1, no report; a bad option: exit 2 (17.8)
  progress_lines        analyze shows progress for 4 files or more (through a pipe, one
                        line a tenth, ending at "4/4 files"), none for 2 or 3
  unwritable_output     analyze and summarize with an -o that cannot be written: exit 1
                        naming the path, and nothing said about the input (a FIFO, which
                        reading would either refuse or block on): it was not read first
Issue 37 (items 5 to 7; the trigger's side is cli_trigger.py, the reference cli_reference.py):
  terminal_report       analyze's stdout: the verdict and findings first, the job in one
                        line, each section as a rounded digest naming ranks (no file name,
                        no 17-digit float), its figures those of report.json; --verbose
                        adds the seed's JSON sections; the 8-rank DLRM trace in few lines
  grouped_warnings      the same warning on 4 workers is one stderr line naming ranks 0-3
  missing_values        -o, -j, --wait, --steps, --output-dir given last: "needs a value",
                        not "unknown option"; exit 2
  no_job_mentions_run   the trigger with no job names `perftracker run` as a way to start one
  app_port_taken        PerfDisplay's app.py on a taken port says so and names --port
  existing_report       analyze -o into a folder holding a report refuses (exit 1, the old
                        report untouched, nothing read); --force replaces it
  no_empty_output       analyze of a non-trace leaves no -o folder behind (the folders it
                        made are removed; one that existed stays)
Each case prints one line; the script fails if any case does."""
import gzip
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from case_runner import case, expect, run_cases  # noqa: E402 (this folder: the cases' runner)

CLI = os.environ.get("PT_CLI", "perftracker")
TIMEOUT_S = 120


def run(*args, timeout=TIMEOUT_S):
    p = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def fresh(path):
    """An output folder with nothing in it yet: analyze refuses one holding a report, and
    the work folder keeps what an earlier run of this script wrote."""
    shutil.rmtree(path, ignore_errors=True)
    return path


def synth(work, name, *args):
    out = os.path.join(work, name)
    if not os.path.exists(os.path.join(out, "expected.json")):
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run([CLI, "synth", "-n", "4", "--steps", "3", "--layers", "2", "--quiet", *args, "-o", out],
                       check=True, capture_output=True)
    return out


@case
def analyze_one_rank(work, problems):
    job = synth(work, "healthy")
    rc, _, err = run("analyze", "-q", "-o", fresh(os.path.join(work, "one-out")),
                     os.path.join(job, "node0_1_10001.json"))
    expect(rc == 0, f"exit {rc}, expected 0 (ranks not given are not a failure): {err[-400:]}", problems)
    notes = [line for line in err.splitlines() if line.startswith("perftracker: note: 3 ranks of the job")]
    expect(notes, f"no note about the ranks not given: {err[-400:]}", problems)
    expect("warning: 3 ranks" not in err, "the ranks not given are still a warning", problems)
    report = json.load(open(os.path.join(work, "one-out", "report.json")))
    expect(report["job"]["missing_ranks"] == [0, 2, 3], f"missing_ranks {report['job']['missing_ranks']}", problems)
    return notes[0] if notes else ""


@case
def analyze_hang(work, problems):
    job = synth(work, "hang", "--fault", "hang")
    rc, _, err = run("analyze", "-q", "-o", fresh(os.path.join(work, "hang-out")), job)
    report = json.load(open(os.path.join(work, "hang-out", "report.json")))
    expect(report["diagnosis"]["verdict"] == "hang", f"verdict {report['diagnosis']['verdict']}", problems)
    expect(rc == 3, f"exit {rc} on a hang verdict, expected 3", problems)
    lines = [line for line in err.splitlines() if "verdict is a hang" in line]
    expect(lines, f"stderr does not say why the exit is 3: {err[-300:]}", problems)
    return lines[0] if lines else ""


@case
def analyze_mixed_jobs(work, problems):
    four, eight = synth(work, "healthy"), synth(work, "eight", "-n", "8")
    rc, _, err = run("analyze", "-q", "-o", fresh(os.path.join(work, "mixed-out")), four, eight)
    expect(rc == 3, f"exit {rc} on two jobs' traces, expected 3", problems)
    lines = [line for line in err.splitlines() if "the inputs are not one job" in line and "exit status 3" in line]
    expect(lines, f"stderr does not say why the exit is 3: {err[-300:]}", problems)
    diagnosis = json.load(open(os.path.join(work, "mixed-out", "report.json")))["diagnosis"]
    expect(diagnosis.get("inputs") == "mixed" and "world sizes 4 and 8" in (diagnosis.get("input_problem") or ""),
           f"the verdict's sentence: {diagnosis.get('inputs')}: {diagnosis.get('input_problem')}", problems)
    return lines[0] if lines else ""


@case
def synth_bad_fault(work, problems):
    rc, _, err = run("synth", "--fault", "bogus", "-o", os.path.join(work, "never"))
    expect(rc == 2, f"exit {rc}, expected 2", problems)
    line = err.strip().splitlines()[0] if err.strip() else ""
    expect("'bogus' for option --fault" in line, f"the option is not named: {line!r}", problems)
    expect("slow_gpu" in line and "hang" in line, f"the kinds are not listed: {line!r}", problems)
    return line


@case
def without_o(work, problems):
    """summarize and export: the reason comes before the usage text."""
    trace = os.path.join(synth(work, "healthy"), "node0_0_10000.json")
    said = []
    for command, reason in (("summarize", "-o SUMMARY is missing"), ("export", "-o OUT is missing")):
        rc, _, err = run(command, trace)
        expect(rc == 2, f"{command}: exit {rc}, expected 2", problems)
        line = err.splitlines()[0] if err else ""
        expect(reason in line, f"{command}: no reason before the usage: {line!r}", problems)
        said.append(line)
    return " / ".join(said)


@case
def display_outer_folder(work, problems):
    """Issue 17.9: `display OUT` serves OUT/PerfDisplay (it used to refuse OUT and ask for
    OUT/PerfDisplay)."""
    out = fresh(os.path.join(work, "display-out"))
    run("analyze", "-q", "-o", out, synth(work, "healthy"))
    p = subprocess.Popen([CLI, "display", "--port", "0", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        line = p.stdout.readline()
        m = re.search(r"serving (\S+) at (http://127\.0\.0\.1:\d+/)", line)
        expect(m and m.group(1) == os.path.join(out, "PerfDisplay"), f"not serving {out}/PerfDisplay: {line!r}",
               problems)
        if m:
            with urllib.request.urlopen(m.group(2), timeout=30) as page:
                expect(b"<html" in page.read().lower(), "the page is not the PerfDisplay page", problems)
    finally:
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
    expect(p.returncode == 0, f"exit {p.returncode} after Ctrl-C, expected 0: {err[-300:]}", problems)
    return line.strip()


@case
def display_port_taken(work, problems):
    """Issue 17.9: a port another program holds is said so, once, with how to pick another
    (it used to print libmicrohttpd's line, ours, and a hint naming PerfDisplay/PerfDisplay)."""
    out = fresh(os.path.join(work, "display-out"))
    run("analyze", "-q", "-o", out, synth(work, "healthy"))
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        rc, _, err = run("display", "--port", str(port), os.path.join(out, "PerfDisplay"), timeout=30)
    lines = err.strip().splitlines()
    expect(rc == 1, f"exit {rc}, expected 1", problems)
    expect(len(lines) == 1, f"{len(lines)} lines on stderr, expected one: {lines}", problems)
    said = lines[0] if lines else ""
    expect(f"port {port}" in said and "taken" in said and "--port" in said,
           f"does not say the port is taken and how to pick another: {said!r}", problems)
    expect("PerfDisplay/PerfDisplay" not in err, f"a doubled path: {err!r}", problems)
    return said


@case
def not_a_trace_beside_traces(work, problems):
    """Issue 17.7: a label.json beside the traces is noted, not a failed worker of rank -1."""
    job = os.path.join(work, "labelled")
    shutil.rmtree(job, ignore_errors=True)
    shutil.copytree(synth(work, "healthy"), job)
    with open(os.path.join(job, "label.json"), "w") as f:
        json.dump({"mode": "perftracker", "fault": "healthy", "culprit": -1, "world": 4}, f)
    out = fresh(os.path.join(work, "labelled-out"))
    rc, _, err = run("analyze", "-q", "-o", out, job)
    expect(rc == 0, f"exit {rc}, expected 0: {err[-400:]}", problems)
    report = json.load(open(os.path.join(out, "report.json")))
    expect(report["job"]["workers_failed"] == 0, f"workers_failed {report['job']['workers_failed']}", problems)
    ranks = sorted(w["rank"] for w in report["workers"])
    expect(ranks == [0, 1, 2, 3], f"workers' ranks {ranks}", problems)
    notes = [line for line in err.splitlines() if line.startswith("perftracker: note:") and "label.json" in line]
    expect(notes and "not a worker" in notes[0], f"no note names label.json: {err[-400:]}", problems)
    return notes[0] if notes else ""


@case
def nothing_analysable(work, problems):
    """Issue 17.8: nothing to analyse is exit 1 and no report, for every subcommand; only a
    wrong command line is exit 2 (with the usage)."""
    rnd = os.path.join(work, "random-files")
    os.makedirs(rnd, exist_ok=True)
    gen = random.Random(17)
    for name in ("a.json", "b.json.gz", "c.ptrace"):
        with open(os.path.join(rnd, name), "wb") as f:
            f.write(bytes(gen.randrange(256) for _ in range(3000)))
    truncated = os.path.join(work, "truncated.json.gz")
    with open(os.path.join(synth(work, "healthy"), "node0_0_10000.json"), "rb") as f:
        data = gzip.compress(f.read())
    with open(truncated, "wb") as f:
        f.write(data[: len(data) // 2])
    empty = os.path.join(work, "empty-folder")
    os.makedirs(empty, exist_ok=True)
    missing = os.path.join(work, "no-such-trace.json")
    said = []
    for what, args in (("random files", [rnd]), ("a truncated .json.gz", [truncated]), ("an empty folder", [empty]),
                       ("a missing path", [missing])):
        out = os.path.join(work, "nothing-out", what.replace(" ", "-"))
        shutil.rmtree(out, ignore_errors=True)
        rc, stdout, err = run("analyze", "-o", out, *args)
        expect(rc == 1, f"analyze {what}: exit {rc}, expected 1", problems)
        expect(not os.path.exists(os.path.join(out, "report.json")), f"analyze {what}: a report was written",
               problems)
        expect("report written to" not in err and "usage:" not in err, f"analyze {what}: {err[-300:]!r}", problems)
        expect("other workers are still analysed" not in err, f"analyze {what}: speaks of other workers", problems)
        said.append(err.strip().splitlines()[-1] if err.strip() else "")
    for command in (["export", missing, "-o", os.path.join(work, "x.json")],
                    ["summarize", missing, "-o", os.path.join(work, "x.ptsum")],
                    ["diff", "-o", os.path.join(work, "diff-out"), missing, truncated]):
        rc, _, err = run(*command)
        expect(rc == 1, f"{command[0]} of a missing path: exit {rc}, expected 1: {err[-200:]}", problems)
    rc, _, err = run("analyze", "--bogus", rnd)
    expect(rc == 2 and "unknown option" in err, f"analyze --bogus: exit {rc}, expected 2 naming the option", problems)
    return " / ".join(said)


@case
def progress_lines(work, problems):
    """Progress through a pipe: for four files, lines ending with all four; two files are
    read before a bar would help, and say nothing."""
    said = []
    for n in (2, 3, 4):
        job = os.path.join(work, f"progress{n}")
        if not os.path.exists(os.path.join(job, "expected.json")):
            subprocess.run([CLI, "synth", "-n", str(n), "--steps", "2", "--layers", "1", "--format", "summary",
                            "--quiet", "-o", job], check=True, capture_output=True)
        rc, _, err = run("analyze", "-q", "-o", fresh(os.path.join(work, f"progress{n}-out")), job)
        lines = [line for line in err.splitlines() if re.match(r"perftracker: +\d+% \(\d+/\d+ files\)", line)]
        expect(rc == 0, f"{n} files: exit {rc}: {err[-300:]}", problems)
        if n < 4:
            expect(not lines, f"{n} files: progress shown: {lines}", problems)
        else:
            expect(lines and lines[-1] == "perftracker: 100% (4/4 files)", f"4 files: progress {lines}", problems)
            said.append(lines[-1] if lines else "no progress")
    return "; ".join(said)


@case
def unwritable_output(work, problems):
    fifo = os.path.join(work, "blocks-its-reader.json")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    blocker = os.path.join(work, "a-file")
    with open(blocker, "w") as f:
        f.write("not a directory\n")
    said = []
    for args in (["analyze", "-o", os.path.join(blocker, "out"), fifo],
                 ["summarize", fifo, "-o", os.path.join(blocker, "x.ptsum")]):
        try:
            rc, _, err = run(*args, timeout=60)
        except subprocess.TimeoutExpired:
            problems.append(f"{args[0]}: read its input before finding that -o cannot be written (still blocked "
                            "on the FIFO after 60 s)")
            continue
        expect(rc == 1, f"{args[0]}: exit {rc}, expected 1", problems)
        lines = [line for line in err.splitlines() if blocker in line]
        expect(lines, f"{args[0]}: no stderr line names {blocker}: {err[-300:]}", problems)
        expect(fifo not in err, f"{args[0]}: the input was read before -o was checked: {err[-300:]}", problems)
        said += lines[:1]
    return " / ".join(said)


@case
def export_not_a_trace(work, problems):
    said = []
    for name, text in (("list-of-numbers.json", "[1, 2, 3]"), ("no-events.json", '{"traceEvents": []}')):
        src, dst = os.path.join(work, name), os.path.join(work, name + ".exported.json")
        with open(src, "w") as f:
            f.write(text)
        if os.path.exists(dst):
            os.unlink(dst)
        rc, _, err = run("export", src, "-o", dst)
        expect(rc == 1, f"{name}: exit {rc}, expected 1: {err[-300:]}", problems)
        lines = [line for line in err.splitlines() if src in line and "no events" in line]
        expect(lines, f"{name}: no stderr line names it and says it holds no events: {err[-300:]}", problems)
        expect(not os.path.exists(dst), f"{name}: an output file was written", problems)
        said += lines[:1]
    return " / ".join(said)


# ------------------------------------------------------------------ issue 37, items 5 to 7

def share(ratio):
    """A ratio as the terminal rounds it (docs/cli.md, "The terminal report")."""
    pct = 100 * ratio
    if pct == 0:
        return "0%"
    if abs(pct) < 0.01:
        return "<0.01%"
    return f"{pct:.1f}%" if abs(pct) >= 1 else f"{pct:#.2g}%"


def rank_runs(ranks):
    ranks, runs = sorted(set(ranks)), []
    for r in ranks:
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def ranks_named(report, names):
    by_name = {w["name"]: w["rank"] for w in report["workers"]}
    ranks = [by_name[n] for n in names]
    return "none" if not ranks else ("rank " if len(ranks) == 1 else "ranks ") + rank_runs(ranks)


def check_terminal_report(what, report, text, problems):
    """What analyze prints against report.json: the order, the figures, the names."""
    lines = text.splitlines()
    d, job = report["diagnosis"], report["job"]
    verdict_at = next((i for i, line in enumerate(lines) if "INFO: verdict: " in line), None)
    expect(verdict_at is not None and verdict_at <= 1, f"{what}: the verdict is on line {verdict_at}, not first",
           problems)
    if verdict_at is None:
        return
    expect(lines[verdict_at].endswith("INFO: verdict: " + d["verdict"]), f"{what}: {lines[verdict_at]!r}", problems)
    want = [f"  {i}. [{f['category']}, impact {100 * f['impact']:.1f}%] {f['summary']}"
            for i, f in enumerate(d["findings"], 1)]
    first = verdict_at + 1 + (d.get("inputs", "complete") != "complete")  # "Partial: ..." under it
    got = lines[first:first + len(want)]
    expect(got == want, f"{what}: the findings do not follow the verdict as reported: {got[:2]} != {want[:2]}",
           problems)
    steps, ms = job["steps"], job["median_step_time_ms"]
    ms_text = f"{ms:.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 10 else f"{ms:.2f}" if ms >= 1 else f"{ms:.3g}"
    job_line = (f"Job: {job['workers_analyzed']} of {job['world_size']} workers analysed; {steps} profiled "
                f"step{'' if steps == 1 else 's'}, median step {ms_text} ms")
    expect(job_line in lines, f"{what}: no line {job_line!r}", problems)
    for w in report["workers"]:
        expect(w["name"] not in text, f"{what}: a worker is named by its file {w['name']}, not its rank", problems)
    long_float = re.search(r"\d\.\d{5,}", text)
    expect(not long_float, f"{what}: an unrounded number {long_float and long_float.group(0)}", problems)
    util = report["GPU Compute"]["min/median/max GPU utilization (in [0,1])"]
    want_util = f"GPU utilization min {share(util[0])}, median {share(util[1])}, max {share(util[2])}"
    expect(want_util in text, f"{what}: the utilization is not {want_util!r}", problems)
    runtime = report["CUDA Runtime"]
    if runtime:
        api, e = max(runtime.items(), key=lambda kv: kv[1]["avg bottleneck ratio (in [0,1])"])
        want_api = (f"    {share(e['avg bottleneck ratio (in [0,1])'])} "
                    f"({share(e['avg execution time / monitoring duration (in [0,1])'])} with overlap) {api}; above "
                    f"1% on: {ranks_named(report, list(e['abnormal_workers']))}")
        expect(want_api in lines, f"{what}: the largest runtime call is not {want_api!r}", problems)
    for section in ("GPU Compute", "GPU memory operations", "Communication", "CUDA Runtime", "Python functions"):
        expect(section + ":" in lines, f"{what}: the section {section} is not named", problems)
    return len(lines)


@case
def terminal_report(work, problems):
    """Issue 37 item 5: the report a person reads. It used to print each section's JSON
    (17-digit floats, workers by file name) and the verdict after them, ~170 lines for
    the 8-rank DLRM trace."""
    said = []
    jobs = [("synth slow_gpu", synth(work, "slow-gpu-8", "-n", "8", "--fault", "slow_gpu", "--rank", "5"))]
    dlrm = os.path.join(os.environ.get("PT_TRACES", ""), "dlrm-8rank")
    if os.path.isdir(dlrm):
        jobs.append(("dlrm-8rank", dlrm))
    for what, job in jobs:
        out = fresh(os.path.join(work, "terminal-" + what.replace(" ", "-")))
        rc, text, err = run("analyze", "-o", out, job)
        expect(rc == 0, f"{what}: exit {rc}: {err[-300:]}", problems)
        report = json.load(open(os.path.join(out, "report.json")))
        count = check_terminal_report(what, report, text, problems)
        expect(count is not None and count <= 45, f"{what}: {count} lines", problems)
        said.append(f"{what}: {count} lines")
        rc, verbose, _ = run("analyze", "--verbose", "--force", "-o", out, job)
        expect(rc == 0 and "INFO: verdict: " in verbose.splitlines()[1], f"{what} --verbose: the verdict is not first",
               problems)
        expect('"min/median/max GPU utilization (in [0,1])": [' in verbose and "(gpu_compute.c) INFO: {" in verbose,
               f"{what} --verbose: the seed's JSON sections are missing", problems)
    return "; ".join(said)


@case
def grouped_warnings(work, problems):
    """Issue 37 item 5: one warning that every worker has is one line, by rank (it used to
    be one line per worker)."""
    job = os.path.join(work, "cpu-only-job")
    os.makedirs(job, exist_ok=True)
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "torch_generations",
                       "kineto_torch2.json")
    trace = json.load(open(src))
    events = [e for e in trace["traceEvents"]
              if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "ac2g")]
    for rank in range(4):
        with open(os.path.join(job, f"rank{rank}.json"), "w") as f:
            json.dump(dict(trace, traceEvents=events, distributedInfo={"rank": rank, "world_size": 4}), f)
    out = fresh(os.path.join(work, "cpu-only-out"))
    rc, _, err = run("analyze", "-q", "-o", out, job)
    lines = [line for line in err.splitlines() if "no GPU events" in line]
    want = "perftracker: warning: 4 workers (ranks 0-3): no GPU events: CPU-only analysis for this worker"
    expect(rc == 0, f"exit {rc}: {err[-300:]}", problems)
    expect(lines == [want], f"the warning every worker has is not one line by rank: {lines}", problems)
    report = json.load(open(os.path.join(out, "report.json")))
    expect(sum("no GPU events" in w for w in report["warnings"]) == 4, "report.json no longer lists each worker's",
           problems)
    return lines[0] if lines else ""


@case
def missing_values(work, problems):
    """Issue 37 item 6: an option given last without its value is named as such (it used to
    read "unknown option --wait")."""
    said = []
    trace = os.path.join(synth(work, "healthy"), "node0_0_10000.json")
    for args, flag in ((["analyze", trace, "-o"], "-o"), (["analyze", trace, "-j"], "-j"),
                       (["diff", trace, trace, "-o"], "-o"), (["--trigger-on", "--wait"], "--wait"),
                       (["--trigger-on", "--auto-analyze", "--steps"], "--steps"),
                       (["trigger", "--output-dir"], "--output-dir")):
        rc, _, err = run(*args, timeout=30)
        first = err.splitlines()[0] if err else ""
        expect(rc == 2, f"{' '.join(args[:1] + args[-1:])}: exit {rc}, expected 2", problems)
        expect(f"{flag} needs a value" in first and "unknown" not in err,
               f"{args[0]} {flag}: not said that its value is missing: {first!r}", problems)
        said.append(first)
    return said[3]


@case
def no_job_mentions_run(work, problems):
    """Issue 37 item 6: with no job running, the trigger names both ways to start one (it
    named only PerfTracker() in the script)."""
    keys = os.path.join(work, "no-job-keys")
    os.makedirs(keys, mode=0o700, exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PERFTRACKER_") and k not in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")}
    env["PERFTRACKER_KEY_DIR"] = keys
    p = subprocess.run([CLI, "--trigger-on", "--auto-analyze", "--output-dir", os.path.join(work, "no-job-out")],
                       capture_output=True, text=True, timeout=60, env=env)
    first = p.stderr.splitlines()[0] if p.stderr else ""
    expect(p.returncode == 1, f"exit {p.returncode}, expected 1", problems)
    expect("no running job found" in first and "perftracker run" in first and "PerfTracker()" in first,
           f"the first line does not name `perftracker run`: {first!r}", problems)
    return first


@case
def app_port_taken(work, problems):
    """Issue 37 item 6: `python3 app.py` on a taken port names --port (it printed only
    "Address already in use")."""
    out = fresh(os.path.join(work, "app-port-out"))
    run("analyze", "-q", "-o", out, synth(work, "healthy"))
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        p = subprocess.run([sys.executable, os.path.join(out, "PerfDisplay", "app.py"), "--port", str(port)],
                           capture_output=True, text=True, timeout=30)
    said = p.stderr.strip()
    expect(p.returncode == 1, f"exit {p.returncode}, expected 1", problems)
    expect(f"port {port}" in said and "taken" in said and "--port" in said and len(said.splitlines()) == 1,
           f"does not say the port is taken and how to pick another: {said!r}", problems)
    return said


@case
def existing_report(work, problems):
    """Issue 37 item 7: analyze -o into a folder that holds a report refuses before reading
    anything (it replaced the report without a word); --force replaces it."""
    out = fresh(os.path.join(work, "existing-out"))
    job = synth(work, "healthy")
    rc, _, _ = run("analyze", "-q", "-o", out, job)
    expect(rc == 0, f"first analysis: exit {rc}", problems)
    before = open(os.path.join(out, "report.json"), "rb").read()
    fifo = os.path.join(work, "never-read.json")  # reading it would block: it is not read
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    try:
        rc, _, err = run("analyze", "-q", "-o", out, fifo, timeout=60)
    except subprocess.TimeoutExpired:
        problems.append("the input was read before the folder was refused (blocked on the FIFO)")
        return ""
    line = err.strip().splitlines()[-1] if err.strip() else ""
    expect(rc == 1, f"exit {rc}, expected 1", problems)
    expect(out in line and "already holds a report" in line and "--force" in line,
           f"the refusal does not say why and how: {line!r}", problems)
    expect(open(os.path.join(out, "report.json"), "rb").read() == before, "the old report was changed", problems)
    rc, _, err = run("analyze", "-q", "--force", "-o", out, synth(work, "hang", "--fault", "hang"))
    replaced = json.load(open(os.path.join(out, "report.json")))
    expect(rc == 3 and replaced["diagnosis"]["verdict"] == "hang", f"--force did not replace it: exit {rc}",
           problems)
    return line


@case
def no_empty_output(work, problems):
    """Issue 37 item 7: analyze of a non-trace leaves no empty -o folder (it left the
    folder it had made for the report)."""
    bogus = os.path.join(work, "bogus.json")
    with open(bogus, "w") as f:
        f.write('{"not": "a trace"}')
    made = os.path.join(work, "made-for-nothing")
    shutil.rmtree(made, ignore_errors=True)
    rc, _, err = run("analyze", "-q", "-o", os.path.join(made, "deeper", "out"), bogus)
    expect(rc == 1, f"exit {rc}, expected 1: {err[-200:]}", problems)
    expect(not os.path.exists(made), f"{made} was left behind: {os.listdir(made) if os.path.isdir(made) else ''}",
           problems)
    existing = os.path.join(work, "existing-empty")
    os.makedirs(existing, exist_ok=True)
    rc, _, _ = run("analyze", "-q", "-o", existing, bogus)
    expect(rc == 1 and os.path.isdir(existing), "a folder that existed before was removed", problems)
    return err.strip().splitlines()[-1] if err.strip() else ""


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    work = os.path.abspath(sys.argv[1])
    os.makedirs(work, exist_ok=True)
    return run_cases(lambda name, fn, problems: fn(work, problems))


if __name__ == "__main__":
    sys.exit(main())
