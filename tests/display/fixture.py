#!/usr/bin/env python3
"""fixture.py -- shared setup for the PerfDisplay tests: a PerfDisplay folder written by the
perftracker binary from a report with a known fault, and either server started on it.

    fixture.py prepare --work DIR --perftracker BIN [--workers N] [--fault-rank R]
        -> prints {"display_dir": ..., "facts": {...}} (facts: see make_report.py)
    fixture.py serve --kind app.py|perftracker --display-dir D --perftracker BIN
        -> becomes that server on a free port; its first line of output holds the URL

The layout is the workflow's: DIR/out/report.json, DIR/out/PerfDisplay/ and
DIR/out/raw_trace/ (one small file per raw trace the report names), so the servers'
raw_trace mapping is exercised too. Standard library only.
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
RAW_TRACE_CONTENT = b"perftracker raw trace stand-in\n"


def prepare(work, perftracker, workers=8, fault_rank=5, seed=1):
    out = os.path.join(work, "out")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    report = os.path.join(out, "report.json")
    facts = json.loads(subprocess.check_output(
        [sys.executable, os.path.join(HERE, "make_report.py"), report, "--workers", str(workers),
         "--fault-rank", str(fault_rank), "--seed", str(seed)]))
    display_dir = os.path.join(out, "PerfDisplay")
    subprocess.check_call([perftracker, "display", "--report", report, "--no-serve", display_dir],
                          stderr=subprocess.DEVNULL)
    for path in facts["raw_traces"]:
        full = os.path.join(out, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(RAW_TRACE_CONTENT)
    return display_dir, facts


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
    display_dir, facts = prepare(a.work, a.perftracker, a.workers, a.fault_rank)
    print(json.dumps({"display_dir": display_dir, "facts": facts}))


if __name__ == "__main__":
    main()
