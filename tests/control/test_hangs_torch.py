#!/usr/bin/env python3
"""Hangs that name the collective, on real 4-rank gloo jobs (hang_job.py, Debian's torch
1.13 on the CPU), through the trigger and through the automatic hang report.

    test_hangs_torch.py PERFTRACKER BUILD_PYTHON_DIR FAULT MODE

FAULT: stuck | other-op | size | skip | order | none (hang_job.py's faults), or
       stuck-early: stuck in the second iteration, right after the ranks' first step():
       the job secret must have reached them before any step() could fetch it;
MODE:  trigger (the CLI from another process, after the fault) | auto (the job reports
       itself: PERFTRACKER_AUTO_TRIGGER=1, no CLI).

Each fault must come out as one "hang" finding naming the right ranks, group, call
number and call, with every rank's side in evidence.hang; a healthy job ("none") must get
no hang finding (trigger: a normal report; auto: no hang report at all).

Skips (exit 77) when /usr/bin/python3 has no torch or the collector is not built."""
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

TORCH_PYTHON = "/usr/bin/python3"
SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
FAULTS = ("stuck", "stuck-early", "other-op", "size", "skip", "order", "none")


def skip(why):
    print("SKIP: " + why)
    sys.exit(SKIP)


def free_master_port():
    for _ in range(100):
        with socket.socket() as a, socket.socket() as b:
            a.bind(("127.0.0.1", 0))
            port = a.getsockname()[1]
            try:
                b.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port
    raise RuntimeError("no free pair of ports")


def stop(job):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(job.pid, sig)
        except ProcessLookupError:
            break
        try:
            job.wait(timeout=30)
            break
        except subprocess.TimeoutExpired:
            continue
    job.wait()


def wait_for(predicate, timeout, what, context):
    deadline = time.time() + timeout
    while not predicate():
        if time.time() > deadline:
            raise AssertionError("timed out waiting for %s%s" % (what, context()))
        time.sleep(0.2)


def hang_findings(report):
    return [f for f in report["diagnosis"]["findings"] if f["category"] == "hang"]


def side(hang, rank):
    rows = [r for r in hang["ranks"] if r["rank"] == rank]
    assert rows, "rank %d is not shown in evidence.hang: %s" % (rank, json.dumps(hang, indent=1))
    return rows[0]


def check(fault, report, context):
    """The finding each fault must produce; returns its sentence."""
    found = hang_findings(report)
    if fault == "none":
        assert not found, "a healthy job got a hang finding: %s%s" % (json.dumps(found, indent=1), context)
        assert report["diagnosis"]["verdict"] != "hang", report["diagnosis"]
        return "no hang finding (verdict %s)" % report["diagnosis"]["verdict"]
    assert len(found) == 1, "want one hang finding, got %s%s" % (json.dumps(found, indent=1), context)
    f = found[0]
    hang = f["evidence"]["hang"]
    assert report["diagnosis"]["verdict"] == "hang", report["diagnosis"]
    assert hang["group"] == "0" or fault == "order", hang
    if fault in ("stuck", "stuck-early"):
        assert hang["kind"] == "missing" and f["workers"] == [3], json.dumps(f, indent=1)
        seq = hang["seq"]
        for rank in (0, 1, 2):
            row = side(hang, rank)
            assert row["role"] == "waits" and row["call"]["op"] == "all_reduce" and row["call"]["seq"] == seq, row
            assert row["call"]["state"] == "entered" and row["call"]["count"] == 1000, row
        row = side(hang, 3)
        assert row["role"] == "missing" and row["call"]["seq"] == seq - 1, row
        assert "hang_job.py: load_batch" in (row["stack"] or ""), row
        assert "load_batch" in f["function"], f["function"]
        assert f["summary"].startswith("Rank 3 has not joined all_reduce #%d (1000 x float32) of process group 0" % seq)
    elif fault == "other-op":
        assert hang["kind"] == "mismatch" and hang["mismatch"] == "operation" and f["workers"] == [2], f
        seq = hang["seq"]
        assert side(hang, 2)["call"]["op"] == "broadcast" and side(hang, 2)["call"]["seq"] == seq, hang
        for rank in (0, 1, 3):
            assert side(hang, rank)["call"]["op"] == "all_reduce" and side(hang, rank)["role"] == "agrees", hang
        assert "rank 2 called broadcast (1000 x float32) where ranks 0, 1 and 3 called all_reduce" in f["summary"]
    elif fault == "skip":
        assert hang["kind"] == "skipped" and f["workers"] == [3], json.dumps(f, indent=1)
        seq = hang["seq"]
        row = side(hang, 3)
        assert row["role"] == "differs" and row["call"]["op"] == "broadcast" and row["call"]["seq"] == seq, row
        assert side(hang, 0)["call"]["op"] == "all_reduce", hang
        assert f["summary"].startswith("Rank 3 skipped all_reduce #%d (1000 x float32) of process group 0" % seq)
    elif fault == "order":
        assert hang["kind"] == "deadlock" and sorted(hang["groups"]) == ["0", "1"], hang
        assert sorted(f["workers"]) == [0, 1, 2, 3], f
        for rank in (0, 1):
            assert side(hang, rank)["group"] == "0" and side(hang, rank)["call"]["state"] == "entered", hang
        for rank in (2, 3):
            assert side(hang, rank)["group"] == "1", hang
        assert "entered in opposite orders" in f["summary"], f["summary"]
    elif fault == "size":
        # gloo errors here instead of hanging: one process aborts (its peer sent more than
        # its call expects), the others raise. The report says so.
        assert hang["kind"] == "collective_error", json.dumps(f, indent=1)
        failed = [r["rank"] for r in hang["ranks"] if r["role"] == "failed"]
        assert failed and 2 not in failed, hang
        assert all(side(hang, r)["call"]["op"] == "all_reduce" and side(hang, r)["call"]["count"] == 1000
                   for r in failed), hang
        assert side(hang, 2)["role"] == "no answer", hang
        assert "rank 2 ended without a word" in f["summary"] and "size or dtype mismatch" in f["summary"], f
    return f["summary"]


def main():
    if len(sys.argv) != 5 or sys.argv[3] not in FAULTS or sys.argv[4] not in ("trigger", "auto"):
        print(__doc__, file=sys.stderr)
        return 2
    cli, python_dir = (os.path.abspath(a) for a in sys.argv[1:3])
    fault, mode = sys.argv[3], sys.argv[4]
    if not os.path.exists(TORCH_PYTHON) or subprocess.run([TORCH_PYTHON, "-c", "import torch.distributed"],
                                                          capture_output=True).returncode != 0:
        skip("%s has no torch" % TORCH_PYTHON)
    if not glob.glob(os.path.join(python_dir, "perftracker", "_perftracker*.so")):
        skip("the collector's Python module is not built in %s" % python_dir)

    tmp = tempfile.mkdtemp(prefix="pt-hangs-")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PERFTRACKER_") and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID")}
    env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_master_port()), "PYTHONPATH": python_dir,
                "PERFTRACKER_KEY_DIR": os.path.join(tmp, "keys"), "PERFTRACKER_JOIN_GRACE_S": "60",
                "PERFTRACKER_HANG_MIN_MS": "3000", "OMP_NUM_THREADS": "1"})
    args = ["--launch", "4", "--fault", fault]
    if fault == "stuck-early":
        args = ["--launch", "4", "--fault", "stuck", "--fault-at", "1"]
    if mode == "auto":
        env.update({"PERFTRACKER_AUTO_TRIGGER": "1", "PERFTRACKER_AUTO_OUTPUT_DIR": os.path.join(tmp, "auto")})
        if fault == "none":
            args += ["--iters", "200"]
    elif fault == "size":
        args.append("--fault-when-armed")  # the error ends the job: the round must be running first
    log = open(os.path.join(tmp, "job.log"), "w+")
    job = subprocess.Popen([TORCH_PYTHON, os.path.join(HERE, "hang_job.py"), *args], env=env, stdout=log,
                           stderr=subprocess.STDOUT, start_new_session=True)

    def job_log():
        log.flush()
        log.seek(0)
        return log.read()

    def context(r=None):
        cli_err = "\n--- CLI stderr ---\n%s" % r.stderr[-3000:] if r is not None else ""
        return "%s\n--- job ---\n%s" % (cli_err, job_log()[-5000:])

    try:
        if mode == "auto":
            if fault == "none":
                assert job.wait(timeout=300) == 0, "the healthy job failed%s" % context()
                reports = glob.glob(os.path.join(tmp, "auto", "*", "report.json"))
                hangs = [p for p in reports if json.load(open(p))["diagnosis"]["verdict"] == "hang"]
                assert not hangs, "a healthy job reported a hang by itself: %s%s" % (hangs, context())
                print("hangs %s/%s: no automatic hang report" % (fault, mode))
                return 0
            pattern = os.path.join(tmp, "auto", "*", "report.json")
            wait_for(lambda: glob.glob(pattern) and "report in" in job_log(), 240, "the automatic hang report",
                     context)
            with open(glob.glob(pattern)[0]) as f:
                report = json.load(f)
            assert any(w.startswith("automatic hang report") for w in report["warnings"]), report["warnings"]
            print("hangs %s/%s: %s" % (fault, mode, check(fault, report, context())))
            return 0
        if fault not in ("none", "size"):
            wait_for(lambda: "fault at step" in job_log(), 240, "the fault", context)
            time.sleep(1)  # it has hung: the trigger finds it so
        cmd = [cli, "--trigger-on", "--auto-analyze", "--wait", "2", "--steps", "2", "--output-dir",
               os.path.join(tmp, "out")]
        deadline = time.time() + 180
        while True:
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
            if not (r.returncode == 1 and "no running job found" in r.stderr) or time.time() > deadline:
                break
            time.sleep(1)
        reports = glob.glob(os.path.join(tmp, "out", "*", "report.json"))
        assert len(reports) == 1, "report.json: %s%s" % (reports, context(r))
        with open(reports[0]) as f:
            report = json.load(f)
        want = 0 if fault == "none" else 3
        assert r.returncode == want or (fault == "none" and r.returncode == 0), \
            "the CLI exited %d (want %d)%s" % (r.returncode, want, context(r))
        print("hangs %s/%s: %s" % (fault, mode, check(fault, report, context(r))))
        return 0
    finally:
        stop(job)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
