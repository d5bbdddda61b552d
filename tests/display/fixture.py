#!/usr/bin/env python3
"""fixture.py -- shared setup for the PerfDisplay tests: a PerfDisplay folder for a job with a
known fault, and either server started on it.

    fixture.py prepare --work DIR --perftracker BIN [--source synth|generated]
                       [--workers N] [--fault-rank R]
        -> prints {"display_dir": ..., "facts": {...}}
    fixture.py serve --kind app.py|perftracker --display-dir D --perftracker BIN
        -> becomes that server on a free port; its first line of output holds the URL

Sources:
  synth      the real pipeline: `perftracker synth --fault slow_gpu` writes Kineto traces,
             two names in them are made hostile (a kernel renamed <img src=x onerror=alert(1)>,
             a Python frame train.py: <img ...>), and `perftracker analyze -o DIR/out` writes
             report.json and PerfDisplay/. The expected culprit comes from synth's
             expected.json, not from the report under test.
  diff       `perftracker diff` of a healthy synth job against the same job with slow_gpu and
             the hostile names (prepare_diff); the page is the diff's PerfDisplay. Beside it a
             noisy diff whose step time counts within its noise threshold (steps apart).
  bounded    the same report in its bounded form (make_report.py --bounded, as perftracker
             writes above 4096 workers), with its parts as PerfDisplay/parts/*.js.
  generated  make_report.py: a report written directly (schema of docs/report-schema.md),
             for what synth does not produce: 4096 workers in seconds, a Hardware section,
             raw traces (DIR/out/raw_trace/, served by the raw_trace mapping), warnings, and
             markup in a worker's file name. perftracker writes its PerfDisplay.
  reports    the page as real reports make it (prepare_reports): `perftracker analyze` on the
             real traces of --traces (h200 slow data, with its load_batch frame renamed to
             hold the XSS string; h200 native with hardware samples; h200 kineto gpuheavy,
             with a finding that saves nothing; dlrm-8rank; a B200 rank 0 of 8; a rank
             sampled from a 128-rank job; a CPU-only trace) and on synth jobs
             (1 rank, 8 ranks with a slow data loader, a hang, 4096 ranks with a slow GPU).
             The culprits come from label.json and synth's expected.json.

The facts the browser test asserts on are derived here, once, for both sources.
Standard library only.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77  # ctest SKIP_RETURN_CODE
XSS = "<img src=x onerror=alert(1)>"
RAW_TRACE_CONTENT = b"perftracker raw trace stand-in\n"
HOSTILE_KERNEL_PART = "pytorch_flash::flash_fwd_kernel<"  # the kernel synth writes that we rename
HOSTILE_FRAME = "train.py(74): log_metrics"


def make_hostile(trace_dir):
    """Renames a kernel and a Python function in every synth trace to the XSS string."""
    for name in sorted(os.listdir(trace_dir)):
        if not name.endswith(".json") or name == "expected.json":
            continue
        path = os.path.join(trace_dir, name)
        with open(path) as f:
            trace = json.load(f)
        for event in trace.get("traceEvents", []):
            n = event.get("name", "")
            if event.get("cat") == "kernel" and HOSTILE_KERNEL_PART in n:
                event["name"] = XSS
            elif event.get("cat") == "python_function" and n == HOSTILE_FRAME:
                event["name"] = "train.py(74): " + XSS
        with open(path, "w") as f:
            json.dump(trace, f)


def from_synth(out, perftracker, workers, fault_rank):
    traces = os.path.join(os.path.dirname(out), "traces")
    shutil.rmtree(traces, ignore_errors=True)
    subprocess.check_call([perftracker, "synth", "--fault", "slow_gpu", "--rank", str(fault_rank),
                           "-n", str(workers), "--seed", "1", "-o", traces], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    with open(os.path.join(traces, "expected.json")) as f:
        expected = json.load(f)["findings"][0]
    make_hostile(traces)
    rc = subprocess.call([perftracker, "analyze", "--quiet", "-o", out, traces],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if rc not in (0, 3):
        raise RuntimeError("perftracker analyze failed with status %d" % rc)
    return {"fault_rank": expected["workers"][0], "fault_worker": expected["worker_names"][0],
            "fault_function": expected["function"]}


def from_synth_hang(out, perftracker, workers, fault_rank):
    """A hang the collectives explain: synth's hang_mismatch (rank fault_rank's first
    all-reduce of the hang step is a broadcast), its Kineto traces cut short by it."""
    traces = os.path.join(os.path.dirname(out), "traces")
    shutil.rmtree(traces, ignore_errors=True)
    subprocess.check_call([perftracker, "synth", "--fault", "hang_mismatch", "--rank", str(fault_rank),
                           "-n", str(workers), "--steps", "4", "--seed", "1", "-o", traces],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(traces, "expected.json")) as f:
        expected = json.load(f)["findings"][0]
    rc = subprocess.call([perftracker, "analyze", "--quiet", "-o", out, traces],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if rc not in (0, 3):
        raise RuntimeError("perftracker analyze failed with status %d" % rc)
    return {"fault_rank": expected["workers"][0], "fault_worker": expected["worker_names"][0],
            "fault_function": None, "hang_seq": expected["hang"]["seq"], "hang_group": expected["hang"]["group"]}


def from_generator(out, perftracker, workers, fault_rank, bounded=False):
    report = os.path.join(out, "report.json")
    facts = json.loads(subprocess.check_output(
        [sys.executable, os.path.join(HERE, "make_report.py"), report, "--workers", str(workers),
         "--fault-rank", str(fault_rank)] + (["--bounded"] if bounded else [])))
    # display --report writes the page and, for a bounded report, the scripts of its
    # parts (read from OUT/parts/) that the page's drill-down loads.
    subprocess.check_call([perftracker, "display", "--report", report, "--no-serve",
                           os.path.join(out, "PerfDisplay")], stderr=subprocess.DEVNULL)
    for name in facts.get("parts", []):
        script = os.path.join(out, "PerfDisplay", "parts", name[:-len(".json")] + ".js")
        if not os.path.isfile(script):
            raise RuntimeError("perftracker display --report did not write %s" % script)
    for path in facts["raw_traces"]:
        full = os.path.join(out, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(RAW_TRACE_CONTENT)
    kept = {k: facts[k] for k in ("fault_rank", "fault_worker", "fault_node", "fault_function", "raw_traces")}
    kept["bounded"] = bounded
    return kept


def hostile_places(report):
    """Where the XSS string sits in the report: the page must show each as text."""
    kernels = report.get("GPU Compute", {}).get("major_kernel_executions", {})
    return {
        "xss_kernel": next((k for k in kernels if k.startswith(XSS)), None),
        "xss_stack": next((k for k in report.get("Python functions", {}) if k.endswith(XSS)), None),
        "xss_in_findings": any(XSS in f.get("summary", "") for f in report["diagnosis"]["findings"]),
        "xss_in_warnings": any(XSS in w for w in report.get("warnings", [])),
        "markup_worker": next((n for n in [w.get("name", "") for w in report.get("workers", [])] +
                               report.get("scale", {}).get("worker_table", {}).get("name", []) if "<" in n), None),
    }


def prepare_diff(work, out, perftracker, workers, fault_rank):
    """`perftracker diff` of a healthy job against the same job with a slow GPU on fault_rank,
    whose traces also carry the hostile names: in the diff they are functions added (the
    renamed kernel and Python frame) and removed (their old names)."""
    runs = {}
    for name, fault in (("before", "none"), ("after", "slow_gpu")):
        runs[name] = os.path.join(work, name)
        shutil.rmtree(runs[name], ignore_errors=True)
        subprocess.check_call([perftracker, "synth", "--fault", fault, "--rank", str(fault_rank), "-n", str(workers),
                               "--seed", "1", "-o", runs[name]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(runs["after"], "expected.json")) as f:
        expected = json.load(f)["findings"][0]
    make_hostile(runs["after"])
    subprocess.check_call([perftracker, "diff", "--quiet", "-o", out, runs["before"], runs["after"]],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(out, "diff.json")) as f:
        diff = json.load(f)
    added = [f["name"] for f in diff["added"]]
    noisy = prepare_noisy_diff(work, perftracker)
    return os.path.join(out, "PerfDisplay"), {
        "noisy_dir": noisy,
        "fault_rank": expected["workers"][0], "fault_function": expected["function"], "xss": XSS,
        "xss_kernel": next((n for n in added if n.startswith(XSS)), None),
        "xss_stack": next((n for n in added if n.endswith(XSS)), None),
        "renamed_kernel": next((f["name"] for f in diff["removed"] if HOSTILE_KERNEL_PART in f["name"]), None),
        "workers": workers, "source": "diff"}


def prepare_noisy_diff(work, perftracker):
    """A diff whose step time counts although its change is within the noise threshold: two
    noisy healthy jobs (noise 0.3, 4 steps), AFTER one transformer block deeper. With these
    seeds every profiled step of AFTER is longer than every step of BEFORE, the separation
    docs/diff-schema.md counts without a noise model (+14.5 ms against +-15.7 ms)."""
    runs = os.path.join(work, "noisy")
    shutil.rmtree(runs, ignore_errors=True)
    for name, seed, layers in (("before", 2, 12), ("after", 12, 13)):
        subprocess.check_call([perftracker, "synth", "-n", "4", "--noise", "0.3", "--steps", "4", "--seed", str(seed),
                               "--layers", str(layers), "--format", "summary", "-j", "2", "-o", os.path.join(runs, name)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = os.path.join(runs, "out")
    subprocess.check_call([perftracker, "diff", "--quiet", "-o", out, os.path.join(runs, "before"), os.path.join(runs, "after")],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return os.path.join(out, "PerfDisplay")


def analyze(perftracker, inputs, out):
    """`perftracker analyze` as a user runs it; 3 (some input skipped or failed) is a report too."""
    rc = subprocess.call([perftracker, "analyze", "--quiet", "-o", out] + inputs,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if rc not in (0, 3):
        raise RuntimeError("perftracker analyze %s failed with status %d" % (inputs, rc))
    return os.path.join(out, "PerfDisplay")


def synth_job(perftracker, out, workers, fault, rank=None):
    """A synth job as summaries (fast at 4096 ranks); returns (folder, its expected culprit)."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [perftracker, "synth", "-n", str(workers), "--fault", fault, "--format", "summary", "--seed", "1",
           "-j", "2", "-o", out]
    if rank is not None:
        cmd += ["--rank", str(rank)]
    subprocess.check_call(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(out, "expected.json")) as f:
        found = json.load(f).get("findings") or [{}]
    return out, (found[0].get("workers") or [None])[0]


def hostile_copy(src, dst, frame, hostile):
    """The .json.gz traces of src, with one Python frame's name replaced, into dst."""
    import gzip
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    for name in sorted(os.listdir(src)):
        if not name.endswith(".json.gz"):
            continue
        with gzip.open(os.path.join(src, name), "rt", encoding="utf-8") as f:
            text = f.read()
        with gzip.open(os.path.join(dst, name), "wt", encoding="utf-8") as f:
            f.write(text.replace(json.dumps(frame), json.dumps(hostile)))
    return dst


def prepare_reports(work, out, perftracker, traces):
    """Every report the page checks run on (see the module's docstring): name -> folder, and
    what each must show."""
    dirs, facts = {}, {"xss": XSS, "expected": {}, "missing_traces": []}
    jobs = os.path.join(work, "jobs")
    os.makedirs(jobs, exist_ok=True)

    def real(name, *parts):
        path = os.path.join(traces, *parts)
        if not os.path.exists(path):
            facts["missing_traces"].append(path)
            return None
        return path

    slow = real("h200_slowdata", "h200", "kineto_slowdata_r3")
    if slow:
        with open(os.path.join(slow, "label.json")) as f:
            label = json.load(f)
        frame = "heldout_job.py(31): load_batch"
        copy = hostile_copy(slow, os.path.join(jobs, "h200_slowdata"), frame, frame + XSS)
        dirs["h200_slowdata"] = analyze(perftracker, [copy], os.path.join(out, "h200_slowdata"))
        facts["expected"]["h200_slowdata"] = {"culprit": label["culprit"], "frame": "load_batch" + XSS,
                                               "innermost": "sleep", "category": "python"}
    for name, parts in (("h200_native", ("h200", "native_healthy")), ("dlrm", ("dlrm-8rank",)),
                        ("h200_gpuheavy", ("h200", "kineto_gpuheavy_r0")),
                        ("b200", ("tracelens", "b200_eager_rank0.json.gz")),
                        ("sampled", ("hta", "sampled_rank-0.json.gz")),
                        ("cpu_only", ("bad-input", "rank_non_gpu.json.gz"))):
        path = real(name, *parts)
        if path:
            dirs[name] = analyze(perftracker, [path], os.path.join(out, name))
    for name, workers, fault, rank in (("synth1", 1, "none", None), ("synth8", 8, "slow_dataloader", 5),
                                       ("hang", 8, "hang", 6), ("large", 4096, "slow_gpu", 3071)):
        folder, culprit = synth_job(perftracker, os.path.join(jobs, name), workers, fault, rank)
        dirs[name] = analyze(perftracker, [folder], os.path.join(out, name))
        facts["expected"][name] = {"culprit": culprit, "workers": workers, "fault": fault}
    # A job given without its slow rank: the report is partial and says so with its verdict.
    folder, _ = synth_job(perftracker, os.path.join(jobs, "partial"), 8, "slow_gpu", 5)
    kept = sorted(os.path.join(folder, f) for f in os.listdir(folder)
                  if f.endswith(".ptsum") and "_5_" not in f)
    dirs["partial"] = analyze(perftracker, kept, os.path.join(out, "partial"))
    facts["reports"] = dirs
    first = dirs.get("h200_slowdata") or dirs["synth8"]
    return first, facts


def prepare(work, perftracker, source="synth", workers=8, fault_rank=5, traces=None):
    out = os.path.join(work, "out")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    if source == "diff":
        return prepare_diff(work, out, perftracker, workers, fault_rank)
    if source == "reports":
        return prepare_reports(work, out, perftracker, traces)
    if source == "synth" and workers > 64:
        raise SystemExit("fixture.py: synth writes ~1 MB of trace per worker; use --source generated above 64 workers")
    make = {"synth": from_synth, "hang": from_synth_hang,
            "bounded": lambda *a: from_generator(*a, bounded=True)}.get(source, from_generator)
    facts = make(out, perftracker, workers, fault_rank)
    with open(os.path.join(out, "report.json")) as f:
        report = json.load(f)
    facts.update(hostile_places(report))
    facts.setdefault("raw_traces", [])
    facts.update({"xss": XSS, "workers": workers, "source": source,
                  "sections": [k for k in report if k[0].isupper()]})
    return os.path.join(out, "PerfDisplay"), facts


def server_command(kind, display_dir, perftracker, python):
    """The command that serves display_dir on a free loopback port, as a user would run it."""
    if kind == "app.py":
        return [python, "app.py", "--port", "0"], display_dir
    return [perftracker, "display", display_dir, "--port", "0"], None


def start_server(kind, display_dir, perftracker, python="/usr/bin/python3"):
    """Starts a server; returns (process, base_url). The URL is read from what it prints."""
    cmd, cwd = server_command(kind, display_dir, perftracker, python)
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = proc.stdout.readline().decode("utf-8", "replace")
    m = re.search(r"(http://[^ ]+/)", line)
    if not m:
        proc.kill()
        err = proc.stderr.read().decode("utf-8", "replace")
        raise RuntimeError("server %s did not print its URL: %r %s" % (cmd, line, err))
    return proc, m.group(1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare")
    prep.add_argument("--work", required=True)
    prep.add_argument("--perftracker", required=True)
    prep.add_argument("--source", choices=("synth", "generated", "bounded", "diff", "hang", "reports"), default="synth")
    prep.add_argument("--traces", default=os.path.join(HERE, "..", "..", "..", "shared", "data", "traces"),
                      help="the real traces (reports source; ../shared/data/traces)")
    prep.add_argument("--workers", type=int, default=8)
    prep.add_argument("--fault-rank", type=int, default=5)
    serve = sub.add_parser("serve", help="exec the server (it prints its URL first)")
    serve.add_argument("--kind", choices=("app.py", "perftracker"), required=True)
    serve.add_argument("--display-dir", required=True)
    serve.add_argument("--perftracker", required=True)
    serve.add_argument("--python", default="/usr/bin/python3")
    a = p.parse_args()
    if a.command == "serve":
        cmd, cwd = server_command(a.kind, a.display_dir, a.perftracker, a.python)
        if cwd:
            os.chdir(cwd)
        os.execv(cmd[0], cmd)
    display_dir, facts = prepare(a.work, a.perftracker, a.source, a.workers, a.fault_rank, a.traces)
    print(json.dumps({"display_dir": display_dir, "facts": facts}))


if __name__ == "__main__":
    main()
