#!/usr/bin/env python3
"""End to end, as a user runs it: the seed's example job (scripts/demo-job.py: gloo, CPU
matmul, time.sleep(rank)) on 4 real ranks with the collector, and the CLI triggered from
another process.

    test_e2e_torch.py PERFTRACKER DEMO_JOB BUILD_PYTHON_DIR
                      [straggler|hang|auto|ends-mid-window|no-collector|secret|window-fails|rounds-0.2|rounds-1|
                       ctrl-c|nothing-armed|starting|launcher-killed|killed-rank|already-hung]

straggler: --wait 2 --steps 2 --save-raw-trace all; the report must name the slowest rank
(3) with time.sleep as its cause, and every rank's raw trace must exist.
hang: rank 3 sleeps forever in its second step and the others block in dist.barrier();
the round must end by itself with a "hang" finding naming rank 3 only.
auto: PERFTRACKER_AUTO_TRIGGER=1 and no CLI; at step 200 the job gets twice as slow, and
the job must profile itself after that (not before) and leave a report in
PERFTRACKER_AUTO_OUTPUT_DIR.
ends-mid-window: --steps 1000 on a job that ends about 100 steps later: every rank, rank 0
(whose process hosts the coordinator) included, is either in the report with its cut-short
window or named on stderr and in the warnings, and the exit status says which.
no-collector: the job runs without the collector (PYTHONPATH forgotten; the script's
try/except swallows the ImportError): the trigger says no job was found, why, and names
rank 0's process as running without the collector.
secret: a single-node job with PerfTracker() built before init_process_group() on ranks 0
and 2 and after it on ranks 1 and 3, and no PERFTRACKER_SECRET: every rank joins through
the coordinator's Unix socket and a round profiles all four, each worker's connection
this user's and its own process's; no job secret is put in torch.distributed's store
(every rank is on rank 0's machine: none needs it); a peer holding the agent key
perftracker used to derive from public facts is refused. (A job on several machines,
whose secret does go through the store, is control.other_user.*.)
window-fails: the same job, rank 3's collector unable to summarize its window (its
summarizer binary is missing): the round names rank 3 with the real cause, not the
"out of memory copying the summary" every failed window used to be reported as.
ctrl-c: SIGINT to `--trigger-on --auto-analyze --wait 3 --steps 2` once every rank armed
its round's window (rank 3's steps take over 3 s, so the window is seconds away): the CLI must say
the round was cancelled on every worker (4 windows dropped), exit 130 and leave no round
folder; a trigger right after it must profile all 4 ranks (it waits while a cancelled
window still drains, instead of every rank failing "could not arm the window").
nothing-armed: every rank's collector is busy with a window its own script armed
(PERFTRACKER_WAIT=1000000), so no rank can arm the round's: the CLI must say the round
failed and why (each rank's collector refused the window), exit 1, and write no report
(it used to diagnose the job from nothing: "degraded", "every input failed to read").
starting: `perftracker jobs` on a 4-rank job that is still starting (its ranks import
torch and wait at a gate before they import perftracker, as a slow import would): it must
say rank 0 is still starting and to try again, not that it runs without the collector;
once the gate opens the job registers and is listed.
launcher-killed: the README's job (demo-job.py --launch 4) stopped by killing its launcher's
pid, once with SIGTERM (`kill PID`) and once with SIGKILL: its 4 ranks must end with it
(they used to keep running, orphaned), and rank 0's job file and control key with them
(killed by a signal, it runs no atexit handler).
rounds-S: the README's example at sleep scale S (rank r sleeps r x S s a step), with a
process burning the CPU rank 3 is pinned to, profiled in 5 rounds in a row: every round
names rank 3 first. The verdict must rest on who the others wait for, not on how noisy
each rank's steps are (the loaded machine makes every rank's matmul vary widely).
killed-rank: rank 3 is killed (SIGKILL) in the middle of a 60-step window; the others die
with it in gloo's barrier. The lost rank leads the verdict (a finding naming rank 3 first,
saying it was lost), the steps the crash cut short are not diagnosed as exposed
communication, and the report counts rank 3 among the missing ranks.
already-hung: rank 3 sleeps forever at step 14 and the others block in dist.barrier();
the trigger comes afterwards. It must not promise "profiling steps 20..21" (the job is
stuck at step 14), the report must not give a median step of 0 ms, and the hang finding
names rank 3's innermost Python frame (`demo-job.py: train`), not the raw stack key.

Skips (exit 77) when Debian's /usr/bin/python3 has no torch or the build has no collector
module."""
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

TORCH_PYTHON = "/usr/bin/python3"
SKIP = 77


def skip(why):
    print("SKIP: " + why)
    sys.exit(SKIP)


def free_master_port():
    """A MASTER_PORT that is free and whose MASTER_PORT + 1 (the coordinator's) is too:
    torch's TCPStore binds the first, perftracker's coordinator the second."""
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


def trigger(cli, env, out_dir, deadline, extra):
    """Runs the CLI; retries while the job is still starting (no coordinator yet)."""
    cmd = [cli, "--trigger-on", "--auto-analyze", "--wait", "2", "--steps", "2", "--output-dir", out_dir, *extra]
    while True:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        starting = r.returncode == 1 and "no running job found" in r.stderr
        if not starting or time.time() > deadline:
            return r
        time.sleep(1)


def stop(job):
    """Ends the job's whole process group (the launcher and its ranks)."""
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


def check_hang(r, tmp, context):
    assert r.returncode == 3, "the CLI exited %d (want 3: partial)%s" % (r.returncode, context)
    rounds = glob.glob(os.path.join(tmp, "out", "*", "report.json"))
    assert len(rounds) == 1, "report.json: %s%s" % (rounds, context)
    with open(rounds[0]) as f:
        report = json.load(f)
    assert report["diagnosis"]["verdict"] == "hang", json.dumps(report["diagnosis"], indent=1)
    top = report["diagnosis"]["findings"][0]
    assert top["category"] == "hang" and top["workers"] == [3], json.dumps(top, indent=1)
    # The Python stack rank 3's agent read while it was stuck (the sleeping frame itself is
    # a builtin, which Python frames do not show).
    assert "demo-job.py: train" in top["function"], json.dumps(top, indent=1)
    assert next(w for w in report["workers"] if w["rank"] == 3)["status"] == "hang", report["workers"]
    assert "rank 3" in r.stderr and "hang" in r.stderr, context
    print("e2e hang: %s" % top["summary"])
    return 0


def check_auto(job, log, tmp):
    code = job.wait(timeout=300)
    log.flush()
    log.seek(0)
    job_log = log.read()
    assert code == 0, "the job failed:\n" + job_log[-4000:]
    rounds = glob.glob(os.path.join(tmp, "auto", "*", "report.json"))
    assert len(rounds) == 1, "automatic reports: %s\n%s" % (rounds, job_log[-4000:])
    with open(rounds[0]) as f:
        report = json.load(f)
    assert report["job"]["workers_analyzed"] == 4, report["job"]
    why = [w for w in report["warnings"] if w.startswith("automatic round: rank")]
    assert why and "above its recent best" in why[0], report["warnings"]
    first = min(s["step"] for w in report["workers"] for s in w.get("steps", []))
    assert first >= 200, "profiled from step %d, before the slowdown began\n%s" % (first, job_log[-4000:])
    assert "automatic trigger: slowdown" in job_log, job_log[-4000:]
    print("e2e auto: %s; profiled from step %d" % (why[0], first))
    return 0


def check_ends_mid_window(r, tmp, context):
    """Nobody lost silently: each rank has a (cut-short) profile or is named."""
    rounds = glob.glob(os.path.join(tmp, "out", "*", "report.json"))
    assert len(rounds) == 1, "report.json: %s%s" % (rounds, context)
    with open(rounds[0]) as f:
        report = json.load(f)
    profiled = {w["rank"] for w in report["workers"] if w["status"] in ("normal", "slow")}
    for rank in range(4):
        if rank in profiled:
            assert re.search(r"^perftracker: rank %d \(.*\): profiled \d+ of the 1000 steps asked" % rank, r.stderr,
                             re.M), "rank %d's window was cut short without a word%s" % (rank, context)
            continue
        assert re.search(r"^perftracker: rank %d\b" % rank, r.stderr, re.M), \
            "rank %d has no profile and stderr does not name it%s" % (rank, context)
        assert any(w.startswith("rank %d " % rank) for w in report["warnings"]), \
            "rank %d is not named in the warnings: %s" % (rank, report["warnings"])
    want = 0 if profiled == {0, 1, 2, 3} else 3
    assert r.returncode == want, "exit %d with ranks %s profiled (want %d)%s" % (r.returncode, sorted(profiled),
                                                                               want, context)
    assert 0 in profiled, "rank 0's summary was lost at the job's end (the coordinator must wait for it)%s" % context
    print("e2e ends-mid-window: ranks %s profiled, exit %d" % (sorted(profiled), r.returncode))
    return 0


def job_ranks(job):
    """{rank: pid} of the launcher's children, from their environment (RANK=)."""
    ranks = {}
    try:
        with open("/proc/%d/task/%d/children" % (job.pid, job.pid)) as f:
            children = [int(p) for p in f.read().split()]
    except OSError:
        return ranks
    for pid in children:
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
            ranks[int(env[b"RANK"])] = pid
        except (OSError, KeyError, ValueError):
            continue
    return ranks


def burn_beside(pid):
    """A process spinning on the CPU the given process is pinned to (the last one)."""
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(pid, {cpu})
    return subprocess.Popen([sys.executable, "-c", "import os\nos.sched_setaffinity(0, {%d})\nwhile True: pass" % cpu])


def check_rounds(cli, env, job, tmp, job_log, scale):
    """Five rounds in a row on a loaded machine: rank 3 named first in each."""
    deadline = time.time() + 120
    ranks = job_ranks(job)
    while len(ranks) < 4 and time.time() < deadline:
        time.sleep(0.5)
        ranks = job_ranks(job)
    assert len(ranks) == 4, "the job's ranks: %s\n%s" % (ranks, job_log()[-3000:])
    burner = burn_beside(ranks[3])
    try:
        verdicts = []
        for i in range(5):
            out = os.path.join(tmp, "round%d" % i)
            r = trigger(cli, env, out, time.time() + 120, [])
            context = "\n--- CLI stderr ---\n%s\n--- job ---\n%s" % (r.stderr[-3000:], job_log()[-3000:])
            assert r.returncode == 0, "round %d: the CLI exited %d%s" % (i, r.returncode, context)
            reports = glob.glob(os.path.join(out, "*", "report.json"))
            assert len(reports) == 1, "round %d: report.json: %s%s" % (i, reports, context)
            with open(reports[0]) as f:
                findings = json.load(f)["diagnosis"]["findings"]
            top = findings[0] if findings else None
            verdicts.append(top["summary"] if top else "(no finding)")
            print("e2e rounds (scale %s) %d: %s" % (scale, i, verdicts[-1]))
            assert top and not top["all_workers"] and top["workers"][0] == 3 and top["summary"].startswith("Rank 3 "), \
                "round %d at sleep scale %s does not name rank 3 first: %s" % (i, scale, json.dumps(findings, indent=1))
        return 0
    finally:
        burner.kill()
        burner.wait()


def check_killed_rank(cli, env, job, tmp, job_log):
    """A rank killed mid-window: the lost rank leads, the crash is not communication."""
    deadline = time.time() + 120
    ranks = job_ranks(job)
    while len(ranks) < 4 and time.time() < deadline:
        time.sleep(0.5)
        ranks = job_ranks(job)
    assert len(ranks) == 4, "the job's ranks: %s\n%s" % (ranks, job_log()[-3000:])
    out = os.path.join(tmp, "out")
    cmd = [cli, "--trigger-on", "--auto-analyze", "--wait", "2", "--steps", "60", "--output-dir", out]
    while True:  # until the round is under way (the job may still be starting)
        cli_log = open(os.path.join(tmp, "cli.log"), "w+")
        proc = subprocess.Popen(cmd, env=env, stdout=cli_log, stderr=subprocess.STDOUT, text=True)
        started = time.time()
        while proc.poll() is None and time.time() - started < 8:
            time.sleep(0.2)
        cli_log.seek(0)
        if proc.poll() is None or "no running job found" not in cli_log.read() or time.time() > deadline:
            break
        time.sleep(1)
    os.kill(ranks[3], signal.SIGKILL)  # mid-window: 60 steps of ~0.2 s, 8 s in
    code = proc.wait(timeout=300)
    cli_log.seek(0)
    stderr = cli_log.read()
    context = "\n--- CLI ---\n%s\n--- job ---\n%s" % (stderr[-3000:], job_log()[-3000:])
    reports = glob.glob(os.path.join(out, "*", "report.json"))
    assert len(reports) == 1, "report.json: %s%s" % (reports, context)
    with open(reports[0]) as f:
        report = json.load(f)
    findings = report["diagnosis"]["findings"]
    assert code == 3, "the CLI exited %d (want 3: a rank lost)%s" % (code, context)
    assert findings and findings[0]["workers"][:1] == [3] and not findings[0]["all_workers"] and \
        findings[0]["category"] == "lost" and "lost" in findings[0]["summary"], \
        "the lost rank does not lead: %s%s" % (json.dumps(findings, indent=1), context)
    assert not any(f["category"] == "communication" for f in findings), \
        "the crash is diagnosed as communication: %s" % json.dumps(findings, indent=1)
    assert 3 in report["job"]["missing_ranks"], "rank 3 is not among the missing ranks: %s" % report["job"]
    assert report["job"]["missing_count"] >= 1, report["job"]
    print("e2e killed-rank: " + findings[0]["summary"])
    return 0


HUNG_AT = 14


def check_already_hung(cli, env, job, tmp, job_log):
    """The trigger on a job stuck at step HUNG_AT (rank 3 asleep, the others in barrier),
    a few seconds after it stopped: before the agents' 10 s stall threshold says so."""
    deadline = time.time() + 120
    while not glob.glob(os.path.join(env["PERFTRACKER_KEY_DIR"], "job-*.info")) and time.time() < deadline:
        time.sleep(0.2)  # registered: the ranks are past init_process_group
    time.sleep(6)  # 14 steps of ~0.1 s, then stuck for a few seconds
    r = trigger(cli, env, os.path.join(tmp, "out"), time.time() + 120, [])
    context = "\n--- CLI stderr ---\n%s\n--- job ---\n%s" % (r.stderr[-4000:], job_log()[-3000:])
    # No promise the job cannot keep: the ranks have done HUNG_AT (rank 3) and HUNG_AT + 1
    # steps, and --wait 2 starts the window two steps after the furthest.
    for first in re.findall(r"profiling steps (\d+)\.\.", r.stderr):
        assert int(first) <= HUNG_AT + 1 + 2, "the trigger promises steps from %s of a job stuck at step %d%s" % (
            first, HUNG_AT, context)
    reports = glob.glob(os.path.join(tmp, "out", "*", "report.json"))
    assert len(reports) == 1, "report.json: %s%s" % (reports, context)
    with open(reports[0]) as f:
        report = json.load(f)
    step = report["job"]["median_step_time_ms"]
    assert step is None or step > 0, "the report gives a median step of %r ms%s" % (step, context)
    assert "median step 0 ms" not in r.stdout + r.stderr, "the CLI says median step 0 ms%s" % context
    assert report["diagnosis"]["verdict"] == "hang", json.dumps(report["diagnosis"], indent=1)
    top = report["diagnosis"]["findings"][0]
    assert top["category"] == "hang" and top["workers"] == [3], json.dumps(top, indent=1)
    assert "|" not in top["summary"], "the hang sentence quotes the raw stack key: %s" % top["summary"]
    assert "demo-job.py: train" in top["summary"], "the hang sentence does not name the frame: %s" % top["summary"]
    print("e2e already-hung: %s (median step %s ms)\n%s" % (top["summary"], step, r.stderr))
    return 0


def check_no_collector(cli, env, job, context_log):
    """PYTHONPATH forgotten: the job runs, perftracker is not in it."""
    deadline = time.time() + 120
    while True:  # until rank 0 runs (its environment is what the explanation reads)
        r = subprocess.run([cli, "--trigger-on", "--auto-analyze"], env=env, capture_output=True, text=True,
                           timeout=120)
        if "without the perftracker collector" in r.stderr or time.time() > deadline or job.poll() is not None:
            break
        time.sleep(1)
    context = "\n--- CLI stderr ---\n%s\n--- job ---\n%s" % (r.stderr[-3000:], context_log()[-3000:])
    assert r.returncode == 1, "exit %d%s" % (r.returncode, context)
    assert re.match(r"perftracker: no running job found: \S", r.stderr), "no reason given%s" % context
    line = next((line for line in r.stderr.splitlines() if "without the perftracker collector" in line), "")
    assert re.search(r"pid \d+ \(.*demo-job\.py.*\) is rank 0 of a job with MASTER_PORT %s" % env["MASTER_PORT"], line) \
        and "PYTHONPATH" in line, "the job without the collector is not named%s" % context
    print("e2e no-collector: " + line)
    return 0


SECRET_JOB = r"""
import os, sys, time
import torch.distributed as dist
from perftracker import PerfTracker
rank = int(os.environ["RANK"])
early = rank % 2 == 0
tracer = PerfTracker() if early else None
dist.init_process_group("gloo")
if not early:
    tracer = PerfTracker()
for step in range(100000):
    time.sleep(0.05)
    tracer.step()
    dist.barrier()
"""

# The ready mark rank 0 sets once it has published the secret, under the default group's
# prefix and without it: a counter read (add 0) never blocks, as a get() of an absent key does.
READ_STORE = r"""
import datetime, sys, torch.distributed as dist
store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), None, False, timeout=datetime.timedelta(seconds=30))
ready = "perftracker/job-secret-ready/v1/attempt-0"
print(max(s.add(ready, 0) for s in (store, dist.PrefixStore("default_pg", store))))
"""


def check_secret(cli, env, tmp, ranks, job_log):
    """What scenario `secret` asserts (see the module's docstring)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import hostile_peer
    r = trigger(cli, env, os.path.join(tmp, "out"), time.time() + 120, [])
    context = "\n--- CLI stderr ---\n%s\n--- job ---\n%s" % (r.stderr[-4000:], job_log()[-4000:])
    assert r.returncode == 0, "the CLI exited %d%s" % (r.returncode, context)
    report = json.load(open(glob.glob(os.path.join(tmp, "out", "*", "report.json"))[0]))
    assert report["job"]["workers_analyzed"] == 4, report["job"]
    pids = [p.pid for p in ranks]
    for w in report["workers"]:
        c = w.get("connection") or {}
        assert c.get("uid") == os.geteuid() and c.get("pid") == pids[w["rank"]] and \
            "on this machine" in c.get("seen_from", ""), "rank %d's connection: %s" % (w["rank"], c)

    port = int(env["MASTER_PORT"]) + 1
    peer = hostile_peer.Peer(port)
    kind, _ = peer.authenticate(hostile_peer.old_derived_agent_key("127.0.0.1", port, 4), hostile_peer.ROLE_AGENT)
    peer.close()
    assert kind == hostile_peer.REFUSED, "the derived agent key was let in (%s)%s" % (kind, context)

    read = subprocess.run([TORCH_PYTHON, "-c", READ_STORE, env["MASTER_PORT"]], capture_output=True, text=True,
                          timeout=120)
    assert read.returncode == 0 and read.stdout.strip() == "0", \
        "a job on one machine published a job secret in its store: %s %s" % (read.stdout, read.stderr[-2000:])
    print("e2e secret: 4 ranks joined through the coordinator's socket (PerfTracker() before and after "
          "init_process_group), each its own process; no secret in the store; derived key refused")
    return 0


MISSING_SUMMARIZER = "/nonexistent/perftracker"


def check_window_fails(cli, env, tmp, ranks, job_log):
    r = trigger(cli, env, os.path.join(tmp, "out"), time.time() + 120, [])
    context = "\n--- CLI stderr ---\n%s\n--- job ---\n%s" % (r.stderr[-4000:], job_log()[-4000:])
    assert r.returncode == 3, "the CLI exited %d (want 3: rank 3 failed)%s" % (r.returncode, context)
    report = json.load(open(glob.glob(os.path.join(tmp, "out", "*", "report.json"))[0]))
    warning = next((w for w in report["warnings"] if w.startswith("rank 3")), "")
    assert "cannot run %s: No such file or directory" % MISSING_SUMMARIZER in warning, \
        "rank 3's warning does not give the cause: %r%s" % (warning, context)
    assert "out of memory" not in r.stderr + warning, "a missing file reported as out of memory%s" % context
    assert report["job"]["workers_analyzed"] == 3, report["job"]
    print("e2e window-fails: " + warning)
    return 0


GATED_JOB = r"""
import os, sys, time
import torch.distributed as dist
while not os.path.exists(sys.argv[1]):  # the gate: a slow start, before perftracker is imported
    time.sleep(0.1)
from perftracker import PerfTracker
tracer = PerfTracker()
dist.init_process_group("gloo")
for step in range(100000):
    time.sleep(0.05)
    tracer.step()
    dist.barrier()
"""


def check_starting(cli, env, tmp, log):
    script, gate = os.path.join(tmp, "gated_job.py"), os.path.join(tmp, "gate")
    with open(script, "w") as f:
        f.write(GATED_JOB)
    ranks = []
    for rank in range(4):
        own = dict(env, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="4", LOCAL_WORLD_SIZE="4")
        ranks.append(subprocess.Popen([TORCH_PYTHON, script, gate], env=own, stdout=log, stderr=subprocess.STDOUT))
    try:
        r = subprocess.run([cli, "jobs"], env=env, capture_output=True, text=True, timeout=60)
        line = next((l for l in r.stderr.splitlines() if "is rank 0 of a job with MASTER_PORT %s" % env["MASTER_PORT"]
                     in l), "")
        context = "\n--- jobs ---\n%s%s" % (r.stdout, r.stderr)
        assert r.returncode == 0 and "without the perftracker collector" not in line, \
            "a job still starting is said to run without the collector%s" % context
        assert "is still starting" in line and "try again" in line, "rank 0 is not named as starting%s" % context
        print("e2e starting: " + line)
        with open(gate, "w"):
            pass
        deadline = time.time() + 180
        while True:  # the job registers once PerfTracker() runs in rank 0
            r = subprocess.run([cli, "jobs"], env=env, capture_output=True, text=True, timeout=60)
            if r.stdout.strip() or time.time() > deadline:
                break
            time.sleep(1)
        assert re.search(r"^\s*%s\s" % env["MASTER_PORT"], r.stdout, re.M), \
            "the job never registered\n--- jobs ---\n%s%s" % (r.stdout, r.stderr)
        print("e2e starting: then listed: " + r.stdout.strip().splitlines()[-1])
        return 0
    finally:
        for p in ranks:
            p.kill()
            p.wait()


def check_ctrl_c(cli, env, job, tmp, job_log):
    out = os.path.join(tmp, "out")
    cmd = [cli, "--trigger-on", "--auto-analyze", "--wait", "3", "--steps", "2", "--output-dir", out]
    deadline = time.time() + 180
    while True:  # until the job's coordinator takes the round
        err = open(os.path.join(tmp, "cli.err"), "w+")
        cli_proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        # Until every rank armed the window (the first steps of a job starting on a loaded
        # machine are slow, so one may be armed a step later than the others).
        while cli_proc.poll() is None and "workers reached 4/4" not in open(err.name).read():
            time.sleep(0.1)
        if cli_proc.poll() is None or time.time() > deadline:
            break
        time.sleep(1)  # the job is still starting: no coordinator yet
    started = open(err.name).read()
    assert cli_proc.poll() is None, "the round never started:\n%s\n--- job ---\n%s" % (started, job_log()[-3000:])
    round_id = re.search(r"round (\d+): profiling steps", started).group(1)
    cli_proc.send_signal(signal.SIGINT)
    code = cli_proc.wait(timeout=120)
    said = open(err.name).read()
    context = "\n--- CLI stderr ---\n%s\n--- job ---\n%s" % (said[-3000:], job_log()[-3000:])
    assert code == 130, "the interrupted CLI exited %d (want 130)%s" % (code, context)
    assert "interrupted: round %s cancelled on every worker (4 dropped" % round_id in said, \
        "the CLI does not say the round was cancelled on every worker%s" % context
    left = os.listdir(out) if os.path.isdir(out) else []
    assert left == [], "the cancelled round left %s in %s%s" % (left, out, context)
    print("e2e ctrl-c: " + next(l for l in said.splitlines() if "cancelled" in l))

    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    context = "\n--- CLI stderr ---\n%s\n--- job ---\n%s" % (r.stderr[-3000:], job_log()[-3000:])
    assert r.returncode == 0, "the trigger after the cancelled one exited %d%s" % (r.returncode, context)
    assert "could not arm" not in r.stderr, "a rank could not arm the window%s" % context
    reports = glob.glob(os.path.join(out, "*", "report.json"))
    assert len(reports) == 1, "report.json: %s%s" % (reports, context)
    with open(reports[0]) as f:
        assert json.load(f)["job"]["workers_analyzed"] == 4, context
    waited = next((l for l in r.stderr.splitlines() if "waiting for" in l), "(it did not have to wait)")
    print("e2e ctrl-c: the next trigger profiled all 4 ranks; " + waited)
    return 0


def check_nothing_armed(cli, env, tmp, ranks, job_log):
    out = os.path.join(tmp, "out")
    r = trigger(cli, env, out, time.time() + 120, [])
    context = "\n--- CLI stderr ---\n%s\n--- job ---\n%s" % (r.stderr[-3000:], job_log()[-3000:])
    assert r.returncode == 1, "the CLI exited %d (want 1: no report)%s" % (r.returncode, context)
    reason = next((l for l in r.stderr.splitlines() if "the round failed: no worker was profiled" in l), "")
    assert reason, "the CLI does not say why the round failed%s" % context
    assert "4 of 4 workers: collector error: the collector could not arm the window: it was busy with another one" \
        in reason and "(ranks 0, 1, 2, 3)" in reason, "the reason does not name the refusal and the ranks%s" % context
    assert "report" not in r.stdout and not glob.glob(os.path.join(out, "*", "report.json")), \
        "a report was written for a round that profiled nobody%s" % context
    left = os.listdir(out) if os.path.isdir(out) else []
    assert left == [], "the failed round left %s in %s%s" % (left, out, context)
    print("e2e nothing-armed: " + reason)
    return 0


def children_of(pid):
    """The pids whose parent is pid (the launcher's ranks)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def running(pid):
    """Whether pid is a live process (a zombie has ended)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def check_launcher_killed(demo_job, env, tmp):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        log = open(os.path.join(tmp, "launcher-%d.log" % sig), "w+")
        ranks = []
        job = subprocess.Popen([TORCH_PYTHON, demo_job, "--launch", "4", "--iters", "100000", "--print-every", "1",
                                "--sleep-scale", "0.05", "--size", "64"], env=env, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.time() + 180
            while True:  # until the ranks train (rank 0 prints its epochs after the rendezvous)
                log.flush()
                with open(log.name) as f:
                    text = f.read()
                if "Epoch: 1" in text or time.time() > deadline or job.poll() is not None:
                    break
                time.sleep(0.5)
            ranks = children_of(job.pid)
            assert "Epoch: 1" in text and len(ranks) == 4, "the job did not start: ranks %s\n%s" % (ranks, text[-3000:])
            keys = env["PERFTRACKER_KEY_DIR"]
            published = lambda: glob.glob(os.path.join(keys, "job-*.info")) + \
                glob.glob(os.path.join(keys, "control-*.key"))  # noqa: E731
            assert len(published()) == 2, "rank 0 did not register the job: %s" % published()
            os.kill(job.pid, sig)
            job.wait(timeout=60)
            deadline = time.time() + 60  # a generous bound: a loaded machine is slow to end 4 torch processes
            while any(running(p) for p in ranks) and time.time() < deadline:
                time.sleep(0.5)
            left = [p for p in ranks if running(p)]
            assert not left, "killing the launcher with signal %d left its ranks %s running" % (sig, left)
            # The ranks die of the SIGTERM their launcher's death sends (PDEATHSIG): rank 0's
            # atexit never runs, and its job files must go all the same.
            assert not published(), "the job's files stayed behind it: %s" % published()
            print("e2e launcher-killed: signal %d to the launcher ended its 4 ranks %s and left no job file"
                  % (sig, ranks))
        finally:
            stop(job)
            for p in ranks:  # whatever the check found left, so the next test starts clean
                if running(p):
                    os.kill(p, signal.SIGKILL)
            log.close()
    return 0


def run_small_job(cli, env, tmp, log, check, rank_env=None):
    script = os.path.join(tmp, "small_job.py")
    with open(script, "w") as f:
        f.write(SECRET_JOB)
    ranks = []
    for rank in range(4):
        own = dict(env, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="4", LOCAL_WORLD_SIZE="4")
        own.update((rank_env or {}).get(rank, {}))
        ranks.append(subprocess.Popen([TORCH_PYTHON, script], env=own, stdout=log, stderr=subprocess.STDOUT))

    def job_log():
        log.flush()
        log.seek(0)
        return log.read()

    try:
        return check(cli, env, tmp, ranks, job_log)
    finally:
        for p in ranks:
            p.kill()
            p.wait()


def keep(tmp):
    """PT_E2E_KEEP=DIR keeps the scenario's files (round folders with their summaries, for
    `perftracker analyze DIR/.../summaries`) before they are removed."""
    where = os.environ.get("PT_E2E_KEEP")
    if where:
        shutil.copytree(tmp, os.path.join(where, os.path.basename(tmp)), dirs_exist_ok=True)


def main():
    scenario = sys.argv[4] if len(sys.argv) == 5 else "straggler"
    if len(sys.argv) not in (4, 5) or scenario not in ("straggler", "hang", "auto", "ends-mid-window", "no-collector",
                                                       "secret", "window-fails", "rounds-0.2", "rounds-1",
                                                       "ctrl-c", "nothing-armed", "starting", "launcher-killed",
                                                       "killed-rank", "already-hung"):
        print(__doc__, file=sys.stderr)
        return 2
    cli, demo_job, python_dir = (os.path.abspath(a) for a in sys.argv[1:4])
    hang = scenario == "hang"
    if not os.path.exists(TORCH_PYTHON) or subprocess.run([TORCH_PYTHON, "-c", "import torch.distributed"],
                                                          capture_output=True).returncode != 0:
        skip("%s has no torch (apt-get install python3-torch)" % TORCH_PYTHON)
    if not glob.glob(os.path.join(python_dir, "perftracker", "_perftracker*.so")) and scenario != "launcher-killed":
        skip("the collector's Python module is not built in %s" % python_dir)

    tmp = tempfile.mkdtemp(prefix="pt-e2e-")
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("PERFTRACKER_") or k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID"):
            del env[k]
    env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_master_port()), "PYTHONPATH": python_dir,
                "PERFTRACKER_KEY_DIR": os.path.join(tmp, "keys"), "PERFTRACKER_JOIN_GRACE_S": "60",
                "OMP_NUM_THREADS": "1"})
    if scenario == "launcher-killed":
        try:
            return check_launcher_killed(demo_job, env, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    log = open(os.path.join(tmp, "job.log"), "w+")
    if scenario == "starting":
        try:
            return check_starting(cli, env, tmp, log)
        finally:
            log.close()
            shutil.rmtree(tmp, ignore_errors=True)
    if scenario in ("secret", "window-fails", "nothing-armed"):
        try:
            if scenario == "secret":
                return run_small_job(cli, env, tmp, log, check_secret)
            if scenario == "nothing-armed":  # each rank's own window waits for a step it never reaches
                busy = {"PERFTRACKER_WAIT": "1000000", "PERFTRACKER_OUTPUT_DIR": os.path.join(tmp, "local")}
                return run_small_job(cli, env, tmp, log, check_nothing_armed, {rank: busy for rank in range(4)})
            return run_small_job(cli, env, tmp, log, check_window_fails, {3: {"PERFTRACKER_CLI": MISSING_SUMMARIZER}})
        finally:
            log.close()
            shutil.rmtree(tmp, ignore_errors=True)
    shape = ["--sleep-scale", "1.0"]
    if hang:
        shape = ["--sleep-scale", "0.1", "--size", "300", "--hang-at", "1"]
        env["PERFTRACKER_HANG_MIN_MS"] = "3000"
    iters = "100000"
    if scenario == "ends-mid-window":
        shape = ["--sleep-scale", "0.05", "--size", "64"]
        iters = "150"
    if scenario == "no-collector":
        del env["PYTHONPATH"]
    if scenario.startswith("rounds-"):
        shape = ["--sleep-scale", scenario.split("-", 1)[1]]
    if scenario == "killed-rank":
        shape = ["--sleep-scale", "0.05", "--size", "300"]
    if scenario == "already-hung":
        shape = ["--sleep-scale", "0.02", "--size", "300", "--hang-at", str(HUNG_AT)]
    if scenario == "auto":
        shape = ["--sleep-scale", "0.02", "--size", "64", "--slow-after", "200", "--slow-by", "1.0"]
        iters = "400"
        # Steps of ~60 ms that are mostly sleep; the threshold raised from the paper's 5%
        # to 40% and the injected slowdown to 100%. A false round before step 200 needs
        # the job itself 24 ms slower per step for 50 steps, which another build or test
        # on a shared 2-core machine does not do to sleeping ranks; the real slowdown is
        # still 2.5 times the threshold. (The step tracker's arithmetic at 5% is unit
        # tested in tests/control/test_protocol.c.)
        env.update({"PERFTRACKER_AUTO_TRIGGER": "1", "PERFTRACKER_AUTO_OUTPUT_DIR": os.path.join(tmp, "auto"),
                    "PERFTRACKER_AUTO_THRESHOLD_PCT": "40"})
    job = subprocess.Popen([TORCH_PYTHON, demo_job, "--launch", "4", "--iters", iters, "--print-every", "0",
                            *shape], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        if scenario == "auto":
            return check_auto(job, log, tmp)

        def job_log():
            log.flush()
            log.seek(0)
            return log.read()

        if scenario == "no-collector":
            return check_no_collector(cli, env, job, job_log)
        if scenario == "ctrl-c":
            return check_ctrl_c(cli, env, job, tmp, job_log)
        if scenario.startswith("rounds-"):
            return check_rounds(cli, env, job, tmp, job_log, scenario.split("-", 1)[1])
        if scenario == "killed-rank":
            return check_killed_rank(cli, env, job, tmp, job_log)
        if scenario == "already-hung":
            return check_already_hung(cli, env, job, tmp, job_log)
        extra = [] if hang else ["--save-raw-trace", "all"]
        if scenario == "ends-mid-window":
            extra = ["--steps", "1000"]
        r = trigger(cli, env, os.path.join(tmp, "out"), time.time() + 120, extra)
        log.flush()
        log.seek(0)
        job_log = log.read()
        context = "\n--- CLI stderr ---\n%s\n--- job ---\n%s" % (r.stderr[-4000:], job_log[-4000:])
        if hang:
            return check_hang(r, tmp, context)
        if scenario == "ends-mid-window":
            check_ends_mid_window(r, tmp, context)
            # The job ended by itself: rank 0 cleaned up, so no stale key or job file misleads
            # the next trigger.
            assert job.wait(timeout=300) == 0, "the job failed%s" % context
            left = os.listdir(env["PERFTRACKER_KEY_DIR"])
            assert left == [], "a clean exit left %s in the runtime directory" % left
            return 0
        assert r.returncode == 0, "the CLI exited %d%s" % (r.returncode, context)
        rounds = glob.glob(os.path.join(tmp, "out", "*", "report.json"))
        assert len(rounds) == 1, "report.json: %s%s" % (rounds, context)
        round_dir = os.path.dirname(rounds[0])
        with open(rounds[0]) as f:
            report = json.load(f)

        assert report["job"]["workers_analyzed"] == 4, report["job"]
        raw = sorted(os.listdir(os.path.join(round_dir, "raw_trace")))
        assert len(raw) == 4, "raw traces: %s" % raw
        for w in report["workers"]:
            path = os.path.join(round_dir, w["raw_trace"])
            assert os.path.getsize(path) > 0, "empty raw trace %s" % path
        assert os.path.isdir(os.path.join(round_dir, "PerfDisplay")), "no PerfDisplay"

        findings = report["diagnosis"]["findings"]
        assert findings, "no finding: %s%s" % (json.dumps(report["diagnosis"], indent=1), context)
        top = findings[0]
        assert 3 in top["workers"] and not top["all_workers"], \
            "the root cause does not name rank 3: %s" % json.dumps(findings, indent=1)
        assert "sleep" in top["function"], "the root cause is not time.sleep: %s" % json.dumps(top, indent=1)
        shares = next(v for k, v in report["Python functions"].items() if k.endswith("<built-in function sleep>"))
        slowest = max(shares, key=shares.get)
        assert slowest == next(w["name"] for w in report["workers"] if w["rank"] == 3), shares
        print("e2e: %s" % top["summary"])
        return 0
    finally:
        stop(job)
        log.close()
        keep(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
