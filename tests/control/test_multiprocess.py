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
window: the progress line keeps moving). Each asserts on what the user sees (exit
status, stderr) and on the report the round wrote."""
import re
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time


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

    def start(self, first, count, *args, netns=None):
        log = open(os.path.join(self.tmp, "fake-%d.log" % first), "w+")
        cmd = [self.fake, "--world", str(self.world), "--first", str(first), "--count", str(count),
               "--step-ms", str(self.step_ms), "--seconds", "300", *args]
        if netns:
            cmd = ["ip", "netns", "exec", netns, *cmd]
        p = subprocess.Popen(cmd, env=self.env, stdout=subprocess.PIPE, stderr=log, text=True)
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

    def trigger(self, *args, name=None, env=None, timeout=240, netns=None, unset=()):
        argv0 = name or self.cli
        run_env = dict(self.env)
        run_env.update(env or {})
        for k in unset:
            run_env.pop(k, None)
        cmd = [argv0, "--trigger-on", "--auto-analyze", "--output-dir", os.path.join(self.tmp, "out"), *args]
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
}


def main():
    if len(sys.argv) != 4 or sys.argv[3] not in SCENARIOS:
        print(__doc__, file=sys.stderr)
        return 2
    cli, fake, name = sys.argv[1:]
    world, run, step_ms = SCENARIOS[name]
    tmp = tempfile.mkdtemp(prefix="pt-control-%s-" % name)
    job = Job(os.path.abspath(cli), os.path.abspath(fake), world, tmp, step_ms)
    try:
        run(job)
    finally:
        job.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%s: ok" % name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
