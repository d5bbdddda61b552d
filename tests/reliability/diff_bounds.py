#!/usr/bin/env python3
"""`perftracker diff` of crafted report.json pairs: what a report claims must not make the
diff's memory grow faster than the files (issue 39).

usage: diff_bounds.py WORKDIR [--mb-per-input-mb N]   (PT_CLI: the perftracker binary)

Each pair is written here and diffed; the diff's peak RSS (wait4's ru_maxrss, the diff
alone) must stay under BASE_MB plus N MB (default 100) per MB of the two files. The pairs:
  - W workers and W job-wide "GPU memory operations" and "CUDA Runtime" functions
    (W = 1000, 2000, 4000): one ratio each for every worker, W x W values asked of a file
    of 2W entries. The diff compares what the report's size allows and warns about the
    rest; peak RSS must also grow no faster than the files (4000 against 1000);
  - 40 000 memory operations each named for one of 4 000 workers, different in each run:
    every one added or removed, read through its one record, not through every worker;
  - 20 000 findings on each side, each matched by category and function.
Each diff must exit 0 and write diff.json; the first pair's must say what was left out.
Run in the release tree: sanitizers multiply memory.
"""
import json
import os
import subprocess
import sys

CLI = os.environ.get("PT_CLI", "perftracker")
BASE_MB = 16           # the process with nothing to compare
GROWTH_SLACK = 1.5     # peak RSS may grow this much faster than the input, no more
TIMEOUT_S = 300


def worker(w, classes):
    breakdown = {k: 1.0 for k in classes}
    return {"name": f"w{w}", "rank": w, "step_time_ms": 100.0, "status": "normal", "breakdown": breakdown,
            "steps": [dict({"step": s, "ms": 100.0}, **breakdown) for s in range(2)]}


def job_wide(workers, ratio):
    entry = {"avg bottleneck ratio (in [0,1])": ratio, "abnormal_workers": {}}
    return {"report_version": 1, "job": {"world_size": workers},
            "workers": [worker(w, ("memory_ms", "runtime_ms")) for w in range(workers)],
            "GPU memory operations": {f"memcpy{i}": entry for i in range(workers)},
            "CUDA Runtime": {f"cudaCall{i}": entry for i in range(workers)}}


def named_once(workers, functions, prefix):
    return {"report_version": 1, "workers": [worker(w, ("memory_ms",)) for w in range(workers)],
            "GPU memory operations": {f"{prefix}{i:x}": {"abnormal_workers": {f"w{i % workers}": 0.5}}
                                      for i in range(functions)}}


def findings(count, impact):
    return {"report_version": 1, "workers": [worker(0, ("compute_ms",))],
            "diagnosis": {"verdict": "v", "findings": [{"category": "c", "function": f"f{i}", "impact": impact}
                                                       for i in range(count)]}}


CASES = {f"job-wide-{w}": (lambda w=w: (job_wide(w, 0.001), job_wide(w, 0.002))) for w in (1000, 2000, 4000)}
CASES["named-once"] = lambda: (named_once(4000, 40000, "a"), named_once(4000, 40000, "b"))
CASES["findings"] = lambda: (findings(20000, 0.01), findings(20000, 0.02))


def write_case(name, paths):
    """Run as its own process (--write): a child forked by the test starts with the test's
    memory, which its peak RSS would count, so the test never holds the documents."""
    for path, doc in zip(paths, CASES[name]()):
        with open(path, "w") as f:
            json.dump(doc, f, separators=(",", ":"))


def diff(work, name):
    """(exit status, peak RSS in MB, MB of input, diff.json or None) of diffing a case's pair."""
    paths = [os.path.join(work, f"{name}-{side}.json") for side in ("before", "after")]
    subprocess.run([sys.executable, __file__, "--write", name, *paths], check=True, timeout=TIMEOUT_S)
    out = os.path.join(work, "out-" + name)
    p = subprocess.Popen([CLI, "diff", "-q", "-o", out, *paths], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    try:
        with open(os.path.join(out, "diff.json")) as f:
            document = json.load(f)
    except (OSError, ValueError):
        document = None
    return p.returncode, usage.ru_maxrss / 1024, sum(os.path.getsize(x) for x in paths) / 1e6, document


def main():
    if sys.argv[1] == "--write":
        write_case(sys.argv[2], sys.argv[3:5])
        return 0
    work = sys.argv[1]
    mb_per_mb = float(sys.argv[sys.argv.index("--mb-per-input-mb") + 1]) if "--mb-per-input-mb" in sys.argv else 100
    os.makedirs(work, exist_ok=True)
    problems = []
    results = {}
    for name in CASES:
        rc, rss_mb, input_mb, document = diff(work, name)
        bound = BASE_MB + mb_per_mb * input_mb
        results[name] = (rss_mb, input_mb)
        print(f"{name}: {input_mb:.2f} MB of input, exit {rc}, peak RSS {rss_mb:.0f} MB (bound {bound:.0f} MB)",
              flush=True)
        if rc != 0 or document is None:
            problems.append(f"{name}: exit {rc}, diff.json {'written' if document else 'missing'}")
        if rss_mb > bound:
            problems.append(f"{name}: peak RSS {rss_mb:.0f} MB over {bound:.0f} MB for {input_mb:.2f} MB of input")
        if name == "job-wide-1000" and document and not any("are not compared" in w for w in document["warnings"]):
            problems.append(f"{name}: no warning says which job-wide functions were left out: {document['warnings']}")
        if rss_mb > 4 * bound:
            problems.append("the rest not run: this one was far over")
            break
    if "job-wide-4000" in results:
        (small, small_in), (big, big_in) = results["job-wide-1000"], results["job-wide-4000"]
        if big > GROWTH_SLACK * (big_in / small_in) * small:
            problems.append(f"peak RSS grew from {small:.0f} MB to {big:.0f} MB for {big_in / small_in:.1f} times "
                            f"the input: faster than the input")
    for p in problems:
        print("FAIL:", p)
    if problems:
        return 1
    print(f"PASS: {len(CASES)} crafted report pairs diffed within {mb_per_mb:g} MB per MB of input")
    return 0


if __name__ == "__main__":
    sys.exit(main())
