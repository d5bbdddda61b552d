#!/usr/bin/env python3
"""Control-plane scenarios with real processes: fake_workers processes (real agents, the
coordinator hosted by the process holding rank 0, as in a job) and the real CLI, found
through the environment exactly as a user in the master's shell finds the job.

    test_multiprocess.py PERFTRACKER FAKE_WORKERS SCENARIO

Scenarios: scale (1024 workers in 4 processes), killed (SIGKILL mid-window), hung,
wrong-secret, save-master (via the c4d_perftracker name), two-nodes (two network
namespaces joined by a veth pair: a real multi-node job; skipped, exit 77, without root
and iproute2), no-job (no job, a job that ended, a job that was killed: each says why,
and a clean exit leaves no files), discover (the trigger finds a job with no
MASTER_ADDR/MASTER_PORT in its shell; `perftracker jobs`; two jobs told apart by --job or
the environment), rank0-lost (rank 0's process, which hosts the coordinator, killed in
the window: every worker not heard from is named, rank 0 first), long-round (a 200-step
window: the progress line keeps moving), tree-10k (10,240 workers through 1,280 node
relays; a relay killed in the second round names its 8 ranks and the round completes). Each asserts on what the user sees (exit
status, stderr) and on the report the round wrote.

Attacks on a running job by a peer on its port (hostile_peer.py speaks the protocol):
derived-key (the agent key perftracker once derived from public facts is refused),
live-rank (a JOIN as a connected rank is refused, and a round run meanwhile completes with
the real worker), auto-request (AUTO_REQUEST on a job that did not opt in starts nothing),
memory (16 peers sending 60 MiB frames leave rank 0's peak RSS bounded), fd-exhaustion
(rank 0 at RLIMIT_NOFILE 64 with 400 connections held open: the log stays small, the
process does not spin, the real trigger works), absurd-timeout (a TRIGGER with a timeout
of -2^62 ms is answered with an error naming the field)."""
import glob
import re
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

import hostile_peer


def free_port_pair():
    """A MASTER_PORT whose coordinator port (MASTER_PORT + 1) is free right now."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port > 1024:
            return port - 1
    raise RuntimeError("no free port")


class Job:
    def __init__(self, cli, fake, world, tmp, step_ms=20, extra_env=None):
        self.cli, self.fake, self.world, self.tmp = cli, fake, world, tmp
        self.step_ms = step_ms
        self.env = dict(os.environ)
        for k in list(self.env):
            if k.startswith("PERFTRACKER_") or k in ("RANK", "LOCAL_RANK", "TORCHELASTIC_RUN_ID"):
                del self.env[k]
        self.env.update({
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port_pair()),
            "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world),
            "PERFTRACKER_KEY_DIR": os.path.join(tmp, "keys"),
            "PERFTRACKER_HEARTBEAT_MS": "300", "PERFTRACKER_HANG_MIN_MS": "500",
            "PERFTRACKER_SUMMARY_TIMEOUT_S": "20", "PERFTRACKER_HEARTBEAT_TIMEOUT_S": "20",
        })
        self.env.update(extra_env or {})
        self.procs = []
        self.logs = []
        self.stdout_lines = []  # what the processes printed after "ready", read at stop()

    def start(self, first, count, *args, netns=None, nofile=None):
        log = open(os.path.join(self.tmp, "fake-%d.log" % first), "w+")
        # Without PERFTRACKER_SECRET rank 0's process makes the job secret; a torch job hands
        # it to the other ranks through its store, these processes through a private file.
        secret_file = os.path.join(self.tmp, "job-secret-%s" % self.env["MASTER_PORT"])
        cmd = [self.fake, "--world", str(self.world), "--first", str(first), "--count", str(count),
               "--step-ms", str(self.step_ms), "--seconds", "300", "--job-secret-file", secret_file, *args]
        if netns:
            cmd = ["ip", "netns", "exec", netns, *cmd]
        limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))) if nofile else None
        p = subprocess.Popen(cmd, env=self.env, stdout=subprocess.PIPE, stderr=log, text=True, preexec_fn=limit)
        self.procs.append(p)
        self.logs.append(log)
        return p

    def wait_ready(self, timeout=60):
        deadline = time.time() + timeout
        for p in self.procs:
            line = ""
            while not line.startswith("ready") and time.time() < deadline:
                line = p.stdout.readline()
                if not line and p.poll() is not None:
                    raise AssertionError("a fake_workers process exited early:\n" + self.log_text())
            assert line.startswith("ready"), "workers did not join in time:\n" + self.log_text()

    def trigger(self, *args, name=None, env=None, timeout=240, netns=None, unset=(), analyze=True):
        argv0 = name or self.cli
        run_env = dict(self.env)
        run_env.update(env or {})
        for k in unset:
            run_env.pop(k, None)
        cmd = [argv0, "--trigger-on", *(["--auto-analyze"] if analyze else []), "--output-dir",
               os.path.join(self.tmp, "out"), *args]
        if netns:
            cmd = ["ip", "netns", "exec", netns, *cmd]
        t0 = time.time()
        r = subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=timeout)
        r.seconds = time.time() - t0
        return r

    def log_text(self):
        out = []
        for f in self.logs:
            f.flush()
            f.seek(0)
            out.append(f.read())
        return "\n".join(out)

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            self.stdout_lines += p.stdout.read().splitlines() if p.stdout else []
        for f in self.logs:
            f.close()
        self.procs, self.logs = [], []


def round_dir(result):
    for line in result.stdout.splitlines():
        if line.startswith("PerfTracker report: "):
            return line.split(": ", 1)[1].split(" ")[0].rstrip("/").rsplit("/PerfDisplay", 1)[0]
    raise AssertionError("no report line in the CLI output:\n" + result.stdout[-3000:] + result.stderr[-3000:])


def load_report(result):
    with open(os.path.join(round_dir(result), "report.json")) as f:
        return json.load(f)


def worker(report, rank):
    return next(w for w in report["workers"] if w["rank"] == rank)


def findings(report, category):
    return [f for f in report["diagnosis"]["findings"] if f["category"] == category]


def check(cond, message, result=None, job=None):
    if not cond:
        extra = ""
        if result is not None:
            extra += "\n--- CLI stderr ---\n" + result.stderr[-4000:]
        if job is not None:
            extra += "\n--- workers ---\n" + job.log_text()[-4000:]
        raise AssertionError(message + extra)


def scenario_scale(job):
    """1024 workers in 4 processes: trigger -> 1024 summaries -> report naming rank 1023."""
    for first in range(0, 1024, 256):
        job.start(first, 256, "--special-rank", "1023", "--faulty-profile")
    job.wait_ready(timeout=120)
    r = job.trigger("--wait", "2", "--steps", "2")
    check(r.returncode == 0, "exit status %d" % r.returncode, r, job)
    report = load_report(r)
    check(report["job"]["workers_analyzed"] == 1024, "workers analysed: %s" % report["job"], r)
    check(report["job"]["missing_ranks"] == [], "missing ranks", r)
    slow = findings(report, "gpu_compute")
    check(slow and 1023 in slow[0]["workers"] and len(slow[0]["workers"]) < 8,
          "the slow GPU is not pinned on rank 1023: %s" % report["diagnosis"], r)
    check("summaries received 1024/1024" in r.stderr, "no final progress line", r)
    summaries = os.listdir(os.path.join(round_dir(r), "summaries"))
    check(len(summaries) == 1024, "%d summary files" % len(summaries), r)
    print("scale: 1024 workers, trigger to report in %.1f s" % r.seconds)


def tree_processes(world, per_node=8, cap=4096):
    """Whole nodes per fake_workers process, as many as the open-file hard limit allows
    (an agent costs two descriptors in tree mode, its socket and its relay's end): node 0
    with rank 0's coordinator alone, then the rest."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    per = min(cap, int((hard - 300) / 2.5) // per_node * per_node) if hard != resource.RLIM_INFINITY else cap
    if per < per_node:
        print("SKIP: the open-file hard limit (%d) is too low for even one node per process" % hard)
        sys.exit(77)
    spans = [(0, per_node)]
    spans += [(first, min(per, world - first)) for first in range(per_node, world, per)]
    return spans


def stored_summaries(result):
    """The names of the summaries the round stored: files in summaries/, or, above 4,096
    workers, the members of summaries/summaries.tar, listed by Python's tarfile (a reader
    that is not ours) with every member's bytes checked to be a summary's."""
    folder = os.path.join(round_dir_of(result), "summaries")
    names = os.listdir(folder)
    if names != ["summaries.tar"]:
        return names
    members = []
    with tarfile.open(os.path.join(folder, "summaries.tar"), "r:") as archive:
        for m in archive:
            assert m.isfile() and m.name.endswith(".ptsum"), "not a summary: %s" % m.name
            assert archive.extractfile(m).read(8) == b"PTSUMRY\n", "%s: not a summary's bytes" % m.name
            members.append(m.name)
    return members


def summary_ranks(result):
    """The ranks whose summaries the round stored (fake worker pids are 100000 + rank)."""
    return sorted(int(n.rsplit("_", 1)[1].split(".")[0]) - 100000 for n in stored_summaries(result))


def round_dir_of(result):
    m = re.search(r"round folder (\S+)", result.stderr)
    assert m, "no round folder in the CLI's output:\n" + result.stderr[-2000:]
    return m.group(1)


def scenario_tree_10k(job):
    """10,240 workers in 1,280 nodes of 8, each node through its relay (driven agents in a
    few processes). Round 1: every rank's summary arrives (10240/10240, one file per rank)
    and rank 0's coordinator holds 1,280 relay connections. Round 2: the relay of node
    1000 is killed as its window begins, its agents alive: its ranks 8000..8007 are named
    lost with the relay as the cause, and every other rank's summary still arrives."""
    world = job.world
    for first, count in tree_processes(world):
        job.start(first, count, "--tree", "--driven", "--ranks-per-node", "8",
                  "--kill-relay-of-node", "1000", "--kill-relay-in-window", "2")
    job.wait_ready(timeout=240)
    r = job.trigger("--wait", "2", "--steps", "2", analyze=False)
    check(r.returncode == 0, "round 1: exit status %d" % r.returncode, r, job)
    check("summaries received %d/%d" % (world, world) in r.stderr, "round 1: not every summary", r)
    check(summary_ranks(r) == list(range(world)), "round 1: the stored summaries are not one per rank", r)
    check(os.listdir(os.path.join(round_dir_of(r), "summaries")) == ["summaries.tar"],
          "round 1: %d workers' summaries are not one archive" % world, r)
    # The archive is analysed as the folder of files it replaces: every rank, as a worker.
    out = os.path.join(job.tmp, "reanalysed")
    a = subprocess.run([job.cli, "analyze", "--quiet", "-j", "2", "-o", out,
                        os.path.join(round_dir_of(r), "summaries")], capture_output=True, text=True, timeout=600)
    check(a.returncode == 0, "analyze of the archive: exit status %d\n%s" % (a.returncode, a.stderr[-2000:]), r)
    with open(os.path.join(out, "report.json")) as f:
        again = json.load(f)
    check(again["job"]["workers_analyzed"] == world and again["job"]["missing_count"] == 0,
          "analyze of the archive: %s" % again["job"], r)
    r = job.trigger("--wait", "2", "--steps", "2", analyze=False)
    lost = list(range(8000, 8008))
    check(r.returncode == 3, "round 2: exit status %d (want 3: partial)" % r.returncode, r, job)
    check("summaries received %d/%d" % (world - 8, world) in r.stderr, "round 2: summaries", r)
    check(summary_ranks(r) == [k for k in range(world) if k not in lost], "round 2: the wrong ranks are missing", r)
    for rank in lost:
        check(re.search(r"rank %d\b[^\n]*the relay of node 1000" % rank, r.stderr),
              "round 2: rank %d is not named lost with its relay" % rank, r)
    check(not re.search(r"rank 7999\b[^\n]*relay", r.stderr), "round 2: rank 7999 named lost", r)
    job.stop()
    peak = [l for l in job.stdout_lines if l.startswith("coordinator_peak")]
    check(peak and peak[0].split()[2:] == [str(world), "relays", str(world // 8)],
          "the coordinator did not hold one connection per node: %s" % peak, r)
    print("tree-10k: rounds of %d workers through %d relays" % (world, world // 8))


def scenario_killed(job):
    """A worker process killed (SIGKILL) inside its window: reported by rank, rest analysed."""
    job.start(0, 3)
    victim = job.start(3, 1, "--special-rank", "3", "--die-in-window")
    job.wait_ready()
    r = job.trigger("--wait", "3", "--steps", "2")
    check(r.returncode == 3, "exit status %d (want 3: partial)" % r.returncode, r, job)
    check(victim.wait(timeout=10) == -9, "the victim was not killed by SIGKILL", r, job)
    report = load_report(r)
    check(worker(report, 3)["status"] == "error", "rank 3: %s" % worker(report, 3), r)
    check(report["job"]["workers_analyzed"] == 3, "analysed %s" % report["job"], r)
    check(any("rank 3" in w and "died" in w for w in report["warnings"]), "no warning: %s" % report["warnings"], r)
    check("rank 3" in r.stderr and "died" in r.stderr, "the CLI did not say rank 3 died", r)


def scenario_hung(job):
    """A worker that stops stepping before the window: a hang finding with its stack."""
    job.start(0, 4, "--special-rank", "2", "--hang-at", "3")
    job.wait_ready()
    time.sleep(0.3)
    r = job.trigger("--wait", "2", "--steps", "2")
    check(r.returncode == 3, "exit status %d" % r.returncode, r, job)
    report = load_report(r)
    hang = findings(report, "hang")
    check(hang and hang[0]["workers"] == [2], "hang finding: %s" % report["diagnosis"], r)
    check("fake_train.py: train" in hang[0]["function"], "no stack: %s" % hang[0], r)
    check(report["diagnosis"]["verdict"] == "hang", "verdict", r)
    check("rank 2" in r.stderr and "hang" in r.stderr, "the CLI did not report the hang", r)


def scenario_wrong_secret(job):
    """A CLI without the job's key is refused (and the coordinator logs it); with it, it works."""
    job.start(0, 2)
    job.wait_ready()
    r = job.trigger("--wait", "1", env={"PERFTRACKER_SECRET": "a-guess"})
    check(r.returncode == 1, "exit status %d with a wrong secret" % r.returncode, r, job)
    check("refused" in r.stderr, "no refusal message", r)
    time.sleep(0.3)
    check("refused a control connection" in job.log_text() and "wrong job key" in job.log_text(),
          "the coordinator did not log the refusal", r, job)
    r = job.trigger("--wait", "1")
    check(r.returncode == 0, "exit status %d with the job's key file" % r.returncode, r, job)


def scenario_save_master(job):
    """The vendor's name and flags; only rank 0's raw trace is kept."""
    job.start(0, 4)
    job.wait_ready()
    link = os.path.join(job.tmp, "c4d_perftracker")
    os.symlink(job.cli, link)
    r = job.trigger("--wait", "1", "--steps", "2", "--save-raw-trace", "master", name=link)
    check(r.returncode == 0, "exit status %d" % r.returncode, r, job)
    raw = os.listdir(os.path.join(round_dir(r), "raw_trace"))
    check(raw == ["fakenode0_0_100000.ptrace"], "raw traces: %s" % raw, r)
    report = load_report(r)
    check(worker(report, 0).get("raw_trace") == "raw_trace/fakenode0_0_100000.ptrace", "report raw_trace", r)
    check("raw_trace" not in worker(report, 1), "rank 1 has a raw trace", r)
    check(os.path.isdir(os.path.join(round_dir(r), "PerfDisplay")), "no PerfDisplay", r)


def sh(*cmd):
    subprocess.run(cmd, check=True, capture_output=True)


def scenario_two_nodes(job):
    """Two nodes (network namespaces), two workers each. The coordinator binds MASTER_ADDR
    (node 0's address, not every interface); node 1's agents reach it over the veth link
    with the key derived from the job's environment; the CLI runs on node 0."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        print("SKIP: needs root and iproute2 for network namespaces")
        sys.exit(77)
    tag = "%d" % (os.getpid() % 100000)
    ns = ["ptn%s-0" % tag, "ptn%s-1" % tag]
    octet = 1 + os.getpid() % 250
    addr = ["10.213.%d.1" % octet, "10.213.%d.2" % octet]
    try:
        for n in ns:
            sh("ip", "netns", "add", n)
        sh("ip", "link", "add", "pv%s-0" % tag, "type", "veth", "peer", "name", "pv%s-1" % tag)
        for i in range(2):
            sh("ip", "link", "set", "pv%s-%d" % (tag, i), "netns", ns[i])
            sh("ip", "-n", ns[i], "addr", "add", addr[i] + "/24", "dev", "pv%s-%d" % (tag, i))
            sh("ip", "-n", ns[i], "link", "set", "pv%s-%d" % (tag, i), "up")
            sh("ip", "-n", ns[i], "link", "set", "lo", "up")
    except (subprocess.CalledProcessError, OSError) as e:
        for n in ns:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
        print("SKIP: cannot create network namespaces here (%s)" % e)
        sys.exit(77)
    try:
        job.env.update({"MASTER_ADDR": addr[0], "LOCAL_WORLD_SIZE": "2"})
        job.start(0, 2, netns=ns[0])
        job.start(2, 2, "--special-rank", "3", "--faulty-profile", netns=ns[1])
        job.wait_ready()
        r = job.trigger("--wait", "2", "--steps", "2", "--save-raw-trace", "all", netns=ns[0])
        check(r.returncode == 0, "exit status %d" % r.returncode, r, job)
        check("listening on %s:" % addr[0] in job.log_text(), "the coordinator did not bind MASTER_ADDR", r, job)
        report = load_report(r)
        check(report["job"]["workers_analyzed"] == 4, "analysed %s" % report["job"], r)
        slow = findings(report, "gpu_compute")
        check(slow and slow[0]["workers"] == [3], "rank 3 (node 1) not found slow: %s" % report["diagnosis"], r)
        raw = os.listdir(os.path.join(round_dir(r), "raw_trace"))
        check(len(raw) == 4, "raw traces: %s" % raw, r)
        # Node 1 has no way in except the link: the coordinator is not on its loopback.
        port = int(job.env["MASTER_PORT"]) + 1
        connect = "import socket; socket.create_connection(('%s', %d), 2)"
        for i, host, reachable in ((1, "127.0.0.1", False), (0, "127.0.0.1", False), (1, addr[0], True)):
            probe = subprocess.run(["ip", "netns", "exec", ns[i], sys.executable, "-c", connect % (host, port)],
                                   capture_output=True, text=True, timeout=60)
            check((probe.returncode == 0) == reachable, "node %d -> %s:%d reachable: %s" % (i, host, port,
                                                                                        probe.returncode == 0))
    finally:
        job.stop()
        for n in ns:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)


def runtime_files(job):
    d = job.env["PERFTRACKER_KEY_DIR"]
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def check_no_job(r, why, job=None):
    """Exit 1 and a first line that says why -- never the old empty reason."""
    check(r.returncode == 1, "exit status %d (want 1: no job)" % r.returncode, r, job)
    first = r.stderr.splitlines()[0] if r.stderr else ""
    check(re.match(r"perftracker: no running job found: \S", first), "no reason on the first line: %r" % first, r)
    check("perftracker:  " not in r.stderr, "an empty message", r)
    check(why in r.stderr, "stderr does not say %r" % why, r, job)


NO_JOB_ENV = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "LOCAL_WORLD_SIZE")


def scenario_no_job(job):
    """No job; a job that exited cleanly (no files left, so no stale key); a job killed
    with SIGKILL (its stale files recognised and removed). Each with and without
    MASTER_ADDR/MASTER_PORT in the trigger's shell."""
    r = job.trigger("--wait", "1", unset=NO_JOB_ENV)
    check_no_job(r, "no job has registered in " + job.env["PERFTRACKER_KEY_DIR"])
    r = job.trigger("--wait", "1")
    check_no_job(r, "nothing answers at 127.0.0.1:%d" % (int(job.env["MASTER_PORT"]) + 1))
    check("Connection refused" in r.stderr, "the reason (connection refused) is missing", r)

    job.start(0, 2)
    job.wait_ready()
    check(any(f.startswith("job-") for f in runtime_files(job)), "the running job published no job file: %s"
          % runtime_files(job), None, job)
    job.stop()
    check(runtime_files(job) == [], "a clean exit left files behind: %s" % runtime_files(job), None, job)
    for unset in ((), NO_JOB_ENV):
        r = job.trigger("--wait", "1", unset=unset)
        check_no_job(r, "no running job found", job)

    victim = job.start(0, 2)
    job.wait_ready()
    victim.kill()
    victim.wait()
    check(any(f.endswith(".key") for f in runtime_files(job)), "SIGKILL left no key file to test with", None, job)
    r = job.trigger("--wait", "1", unset=NO_JOB_ENV)
    check_no_job(r, "is no longer running; its files were removed", job)
    check(runtime_files(job) == [], "stale files were not removed: %s" % runtime_files(job), r)
    print("no-job: " + r.stderr.splitlines()[0])


def scenario_discover(job):
    """A shell with no MASTER_ADDR/MASTER_PORT finds the one running job; with two jobs
    it says how to pick one, and --job or MASTER_PORT picks it."""
    job.start(0, 2)
    job.wait_ready()
    jobs = subprocess.run([job.cli, "jobs"], env=job.env, capture_output=True, text=True, timeout=60)
    check(jobs.returncode == 0, "perftracker jobs exited %d" % jobs.returncode, jobs)
    first_port = job.env["MASTER_PORT"]
    rows = [line.split() for line in jobs.stdout.splitlines()[1:]]
    check([row[0] for row in rows] == [first_port], "perftracker jobs does not list the job:\n" + jobs.stdout, jobs)
    r = job.trigger("--wait", "1", "--steps", "2", unset=NO_JOB_ENV)
    check(r.returncode == 0, "exit status %d without MASTER_ADDR/MASTER_PORT" % r.returncode, r, job)
    check(load_report(r)["job"]["workers_analyzed"] == 2, "not both workers", r)

    second = Job(job.cli, job.fake, 3, job.tmp, job.step_ms)
    second.env["PERFTRACKER_KEY_DIR"] = job.env["PERFTRACKER_KEY_DIR"]
    try:
        second.start(0, 3)
        second.wait_ready()
        r = job.trigger("--wait", "1", unset=NO_JOB_ENV)
        check(r.returncode == 1 and "2 jobs are running on this machine; pick one with --job ID" in r.stderr,
              "two jobs, no choice: exit %d" % r.returncode, r)
        check(first_port in r.stderr and second.env["MASTER_PORT"] in r.stderr, "the jobs are not listed", r)
        r = job.trigger("--wait", "1", "--job", second.env["MASTER_PORT"], unset=NO_JOB_ENV)
        check(r.returncode == 0 and load_report(r)["job"]["workers_analyzed"] == 3, "--job did not pick the "
              "3-worker job (exit %d)" % r.returncode, r)
        r = job.trigger("--wait", "1", unset=("MASTER_ADDR",))  # MASTER_PORT of the first job picks it
        check(r.returncode == 0 and load_report(r)["job"]["workers_analyzed"] == 2, "MASTER_PORT did not pick "
              "the 2-worker job (exit %d)" % r.returncode, r)
    finally:
        second.stop()
    print("discover: ok")


def scenario_rank0_lost(job):
    """Rank 0's process is SIGKILLed in the window, and the coordinator with it: the CLI
    names every rank it did not hear from (rank 0 above all) on stderr and in the
    report's warnings, and exits 3."""
    job.start(1, 3)
    victim = job.start(0, 1, "--special-rank", "0", "--die-in-window")
    job.wait_ready()
    r = job.trigger("--wait", "3", "--steps", "2")
    check(victim.wait(timeout=30) == -9, "rank 0's process was not killed", r, job)
    check(r.returncode == 3, "exit status %d (want 3: workers missing)" % r.returncode, r, job)
    check(re.search(r"^perftracker: rank 0: missing: its process hosted the job's coordinator", r.stderr, re.M),
          "stderr does not name rank 0", r, job)
    report = load_report(r)
    profiled = {w["rank"] for w in report["workers"] if w["status"] in ("normal", "slow")}
    for rank in range(4):
        named = re.search(r"^perftracker: rank %d\b.*: (missing|died|exited)" % rank, r.stderr, re.M)
        warned = any(w.startswith("rank %d " % rank) for w in report["warnings"])
        check(rank in profiled or (named and warned), "rank %d is neither profiled nor named (stderr and "
              "warnings)" % rank, r, job)
    check(0 not in profiled and worker(report, 0)["status"] == "error", "rank 0: %s" % worker(report, 0), r)
    check(re.search(r"^perftracker: %d of 4 workers profiled; without a profile: rank 0 \(missing\)"
                    % len(profiled), r.stderr, re.M), "no closing line naming rank 0", r)
    print("rank0-lost: " + next(line for line in r.stderr.splitlines() if "rank 0:" in line))


def scenario_long_round(job):
    """A window of 200 steps of 60 ms: the progress line keeps moving through it."""
    job.start(0, 4)
    job.wait_ready()
    r = job.trigger("--wait", "2", "--steps", "200", timeout=400)
    check(r.returncode == 0, "exit status %d" % r.returncode, r, job)
    profiled = [int(m) for m in re.findall(r"steps profiled (\d+)/200", r.stderr)]
    check(len(set(profiled)) >= 3, "the progress did not move through the window: %s" % profiled, r)
    check(profiled == sorted(profiled), "the progress went backwards: %s" % profiled, r)
    check(profiled[-1] == 200, "the last line does not show the whole window: %s" % profiled, r)
    print("long-round: steps profiled %s" % profiled)


# ---------------------------------------------------------------- attacks by a peer on the port

SECRET = "multiprocess-test-secret"


def coordinator_port(job):
    return int(job.env["MASTER_PORT"]) + 1


def wait_for(predicate, what, job, timeout=60):
    """Waits for a condition (never asserts on how long it took, only that it came)."""
    deadline = time.time() + timeout
    while not predicate():
        check(time.time() < deadline, "gave up waiting for " + what, None, job)
        time.sleep(0.1)


def scenario_derived_key(job):
    """The agent key perftracker used to derive from public facts (the coordinator's address
    and port, which /proc/net/tcp shows, and the world size) no longer opens the job: rank 0
    made a random secret and handed it to the other process (as a torch job does through its
    store), and the intruder is refused while the job's own workers and CLI work."""
    job.start(0, 2)
    job.start(2, 2)
    job.wait_ready()
    port = coordinator_port(job)
    for run_id in ("", "none"):
        key = hostile_peer.old_derived_agent_key("127.0.0.1", port, job.world, run_id)
        peer = hostile_peer.Peer(port)
        kind, body = peer.authenticate(key, hostile_peer.ROLE_AGENT)
        peer.close()
        check(kind == hostile_peer.REFUSED, "a peer holding the derived key was let in (answer %s)"
              % hostile_peer.NAMES.get(kind, kind), None, job)
        check("authentication failed" in hostile_peer.text_of(body), "no reason given", None, job)
    wait_for(lambda: job.log_text().count("refused a worker connection from 127.0.0.1") >= 2, "the refusals logged",
             job)
    r = job.trigger("--wait", "1", "--steps", "2")
    check(r.returncode == 0 and load_report(r)["job"]["workers_analyzed"] == 4, "the job's own round failed "
          "(exit %d)" % r.returncode, r, job)
    print("derived-key: refused; the job's round profiled 4 workers across 2 processes")


def scenario_live_rank(job):
    """An impostor with the agent key JOINs as rank 1 while rank 1's worker is connected,
    again and again while a round runs: each JOIN is refused, the worker keeps its place,
    and the round completes with every real worker profiled."""
    job.start(0, 4)
    job.wait_ready()
    port, key = coordinator_port(job), hostile_peer.agent_key_from_secret(SECRET)
    answers, stop = [], threading.Event()

    def impostor():
        while not stop.is_set():
            peer = hostile_peer.Peer(port, timeout=10)
            kind, _ = peer.authenticate(key, hostile_peer.ROLE_AGENT)
            if kind != hostile_peer.WELCOME:
                answers.append(("not welcomed", kind))
                return
            peer.send(hostile_peer.JOIN, hostile_peer.join_body(1, job.world))
            peer.send(hostile_peer.HEARTBEAT, hostile_peer.heartbeat_body(0, stalled_ns=60 * 10**9))
            kind, body = peer.recv()
            answers.append((kind, hostile_peer.text_of(body) if kind == hostile_peer.REFUSED else ""))
            peer.close()
            stop.wait(0.2)

    thread = threading.Thread(target=impostor)
    thread.start()
    try:
        wait_for(lambda: answers, "the impostor's first answer", job)
        r = job.trigger("--wait", "3", "--steps", "2")
    finally:
        stop.set()
        thread.join()
    refused = [a for a in answers if a[0] == hostile_peer.REFUSED and "rank 1 is already connected" in a[1]]
    check(len(refused) == len(answers), "a JOIN as live rank 1 was not refused: %s" % answers[:5], None, job)
    check(r.returncode == 0, "the round did not complete with the real workers (exit %d)" % r.returncode, r, job)
    report = load_report(r)
    check(report["job"]["workers_analyzed"] == 4 and worker(report, 1)["status"] == "normal",
          "rank 1: %s" % worker(report, 1), r, job)
    check("joined again" not in job.log_text(), "the real rank 1 was evicted", r, job)
    print("live-rank: %d JOINs as rank 1 refused; the round profiled all 4 workers" % len(refused))


def scenario_auto_request(job):
    """A job that never opted in to automatic rounds: a peer holding the agent key joins as
    the rank that is not running and asks for one. Nothing starts, and rank 0 says why."""
    auto_dir = job.env["PERFTRACKER_AUTO_OUTPUT_DIR"]
    job.start(0, 3)
    job.wait_ready()
    peer = hostile_peer.Peer(coordinator_port(job))
    kind, _ = peer.authenticate(hostile_peer.agent_key_from_secret(SECRET), hostile_peer.ROLE_AGENT)
    check(kind == hostile_peer.WELCOME, "the agent key was not accepted", None, job)
    peer.send(hostile_peer.JOIN, hostile_peer.join_body(3, job.world))
    peer.send(hostile_peer.HEARTBEAT, hostile_peer.heartbeat_body(100))
    peer.send(hostile_peer.AUTO_REQUEST, hostile_peer.auto_request_body(100))
    try:
        wait_for(lambda: "did not opt in" in job.log_text() or "(automatic)" in job.log_text(),
                 "the coordinator's answer to AUTO_REQUEST", job)
    finally:
        peer.close()
    check("(automatic)" not in job.log_text(), "an automatic round started on a job that did not opt in", None, job)
    check("refused rank 3's request for an automatic profiling round: this job did not opt in" in job.log_text(),
          "no refusal logged", None, job)
    check(not glob.glob(os.path.join(auto_dir, "*")), "automatic output written: %s" % os.listdir(auto_dir), None, job)
    print("auto-request: refused, nothing written")


def vm_hwm_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        line = next(l for l in f if l.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def scenario_memory(job):
    """16 peers holding the agent key each send a 60 MiB frame: 8 without joining, 8 joined
    as ranks that are not running. Rank 0's peak RSS must not follow them (it grew by
    ~1 GB before the caps)."""
    rank0 = job.start(0, 4)
    job.wait_ready()
    port, key = coordinator_port(job), hostile_peer.agent_key_from_secret(SECRET)
    before = vm_hwm_mb(rank0.pid)
    size = 60 << 20
    body = hostile_peer.struct.pack("<Ii", 0, 0) + hostile_peer.blob(b"") + hostile_peer.blob(b"")
    header = hostile_peer.struct.pack("<IB", 1 + len(body) + 4 + size, hostile_peer.SUMMARY) + body + \
        hostile_peer.struct.pack("<I", size)
    sent = []

    def flood(rank):
        peer = hostile_peer.Peer(port, timeout=60)
        kind, _ = peer.authenticate(key, hostile_peer.ROLE_AGENT)
        if kind != hostile_peer.WELCOME:
            return
        if rank is not None:
            peer.send(hostile_peer.JOIN, hostile_peer.join_body(rank, job.world))
        total, chunk = 0, b"\0" * (1 << 20)
        try:
            peer.sock.sendall(header)
            while total < size:
                peer.sock.sendall(chunk)
                total += len(chunk)
        except OSError:
            pass
        sent.append(total)
        peer.close()

    threads = [threading.Thread(target=flood, args=(rank,)) for rank in [None] * 8 + list(range(4, 12))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    grown = vm_hwm_mb(rank0.pid) - before
    check(len(sent) == 16, "not every peer was let in to attack (%d)" % len(sent), None, job)
    check(grown < 300, "rank 0's peak RSS grew by %.0f MB under %d MB sent" % (grown, sum(sent) >> 20), None, job)
    check(rank0.poll() is None, "rank 0's process died", None, job)
    print("memory: %d MB sent by 16 peers, rank 0's peak RSS grew by %.0f MB" % (sum(sent) >> 20, grown))


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scenario_fd_exhaustion(job):
    """Rank 0's process runs with RLIMIT_NOFILE 64 and a peer holds 400 connections open
    without ever authenticating. The coordinator sheds the oldest of them instead of
    spinning on a listener it cannot accept from: its log gains a few lines (not millions),
    the process stays near idle, and the user's trigger gets in and completes."""
    rank0 = job.start(0, 2, nofile=64)
    job.wait_ready()
    log_path = os.path.join(job.tmp, "fake-0.log")
    lines_before = job.log_text().count("\n")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    held = []
    try:
        for _ in range(400):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", coordinator_port(job)))
            held.append(s)
        cpu0, t0 = cpu_seconds(rank0.pid), time.time()
        time.sleep(3)
        busy = (cpu_seconds(rank0.pid) - cpu0) / (time.time() - t0)
        check(os.path.getsize(log_path) < 1 << 20, "rank 0's log grew to %d bytes" % os.path.getsize(log_path),
              None, None)
        r = job.trigger("--wait", "1", "--steps", "2")
    finally:
        for s in held:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    added = job.log_text().count("\n") - lines_before
    check(r.returncode == 0, "the trigger failed while the connections were held (exit %d)" % r.returncode, r, job)
    check(added < 40, "rank 0's log gained %d lines" % added, r, job)
    check("shedding load" in job.log_text(), "the shedding was not logged", r, job)
    check(busy < 0.3, "rank 0's process used %.0f%% of a CPU while the connections were held" % (100 * busy), r, job)
    if os.environ.get("PT_TEST_VERBOSE"):
        print(job.log_text())
    print("fd-exhaustion: %d log lines, %.0f%% of a CPU while held, trigger ok" % (added, 100 * busy))


def scenario_absurd_timeout(job):
    """The user's own control key (the job's 0600 key file), a TRIGGER whose timeout is
    -2^62 ms (it overflowed the conversion to ns and was accepted): refused with an error
    naming the field; the coordinator goes on serving the real CLI."""
    job.start(0, 2)
    job.wait_ready()
    key_files = glob.glob(os.path.join(job.env["PERFTRACKER_KEY_DIR"], "**", "control-*.key"), recursive=True)
    check(len(key_files) == 1, "key files: %s" % key_files, None, job)
    peer = hostile_peer.Peer(coordinator_port(job))
    kind, _ = peer.authenticate(hostile_peer.control_key_from_file(key_files[0]), hostile_peer.ROLE_CONTROL)
    check(kind == hostile_peer.WELCOME, "the control key was not accepted", None, job)
    peer.send(hostile_peer.TRIGGER, hostile_peer.trigger_body(timeout_ms=-(1 << 62)))
    kind, body = peer.recv()
    peer.close()
    check(kind == hostile_peer.ERROR, "the absurd trigger was answered with %s" % hostile_peer.NAMES.get(kind, kind),
          None, job)
    text = hostile_peer.text_of(body)
    check("timeout_ms -4611686018427387904 is outside 0..604800000" in text, "the error does not say why: %r" % text,
          None, job)
    r = job.trigger("--wait", "1", "--steps", "2")
    check(r.returncode == 0, "the real trigger failed afterwards (exit %d)" % r.returncode, r, job)
    print("absurd-timeout: " + text)


SCENARIOS = {
    "scale": (1024, scenario_scale, 50),
    "killed": (4, scenario_killed, 20),
    "hung": (4, scenario_hung, 20),
    "wrong-secret": (2, scenario_wrong_secret, 20),
    "save-master": (4, scenario_save_master, 20),
    "two-nodes": (4, scenario_two_nodes, 20),
    "no-job": (2, scenario_no_job, 20),
    "discover": (2, scenario_discover, 20),
    "rank0-lost": (4, scenario_rank0_lost, 20),
    "long-round": (4, scenario_long_round, 60),
    "derived-key": (4, scenario_derived_key, 20),
    "live-rank": (4, scenario_live_rank, 20),
    "auto-request": (4, scenario_auto_request, 20),
    "memory": (16, scenario_memory, 20),
    "fd-exhaustion": (2, scenario_fd_exhaustion, 20),
    "absurd-timeout": (2, scenario_absurd_timeout, 20),
    "tree-10k": (10240, scenario_tree_10k, 100),
}

# Scenarios whose job runs with PERFTRACKER_SECRET, so that the attacker holds the agent key.
WITH_SECRET = ("live-rank", "auto-request", "memory")


def main():
    if len(sys.argv) != 4 or sys.argv[3] not in SCENARIOS:
        print(__doc__, file=sys.stderr)
        return 2
    cli, fake, name = sys.argv[1:]
    world, run, step_ms = SCENARIOS[name]
    tmp = tempfile.mkdtemp(prefix="pt-control-%s-" % name)
    extra = {}
    if name in WITH_SECRET:
        extra = {"PERFTRACKER_SECRET": SECRET, "PERFTRACKER_AUTO_OUTPUT_DIR": os.path.join(tmp, "auto"),
                 "PERFTRACKER_AUTO_INTERVAL_S": "0"}
        os.makedirs(extra["PERFTRACKER_AUTO_OUTPUT_DIR"])
    if name.startswith("tree"):
        extra = {"LOCAL_WORLD_SIZE": "8", "PERFTRACKER_HEARTBEAT_MS": "1000",
                 "PERFTRACKER_HEARTBEAT_TIMEOUT_S": "60", "PERFTRACKER_SUMMARY_TIMEOUT_S": "60"}
    job = Job(os.path.abspath(cli), os.path.abspath(fake), world, tmp, step_ms, extra)
    try:
        run(job)
    finally:
        job.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%s: ok" % name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
