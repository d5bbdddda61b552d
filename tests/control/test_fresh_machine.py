#!/usr/bin/env python3
"""The trigger on a machine as a new user finds it: a private /tmp, /proc and network (Linux
namespaces), so nothing another test or job left behind -- and no variable of ours -- helps.

    test_fresh_machine.py PERFTRACKER FAKE_WORKERS REPO BUILD_DIR {readme|shared-output}

readme: the commands of README.md's "Use" section (the block that runs the seed's example
job), word for word from the repository root, in a shell with no MASTER_ADDR, MASTER_PORT
or PERFTRACKER_* variable. `make` is skipped (this build is the one under test, mounted
as build/); the trigger is re-run while it says the job is still starting, as a person
would. The report must exist under /tmp/perftracker/output and name rank 3's sleep.
shared-output: /tmp/perftracker/output belongs to another user. A job and the trigger of a
second, unprivileged user: the trigger says what it does instead and writes its report in
that user's own /tmp/perftracker-<uid>/output; the collector's own default does the same.
foreign-job: as root, a job file and a lying coordinator another user planted are not
picked (the CLI says it ignored them and how to profile that user's job); root gets no
other user's key through MASTER_ADDR/MASTER_PORT; the trigger run as the job's user works.
squatted-dir: another user created /tmp/perftracker-<uid> first (0777) and planted a job
file in it: the victim's job registers in its private fallback, its trigger finds the
job there and says what the squatted directory is and where it looks instead.

Needs root, unshare and iproute2 (to make the namespaces and act as two users); skips
(exit 77) without them."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77
TORCH_PYTHON = "/usr/bin/python3"
OWNER_UID, USER_UID = 64001, 64002  # the folder's owner, and the user who triggers
CLEAN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}


def skip(why):
    print("SKIP: " + why)
    sys.exit(SKIP)


def sh(*cmd):
    subprocess.run(cmd, check=True, capture_output=True)


def enter_namespaces():
    """Re-runs this script as pid 1 of fresh mount, pid and network namespaces."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        skip("needs root, unshare and iproute2 for private namespaces")
    probe = subprocess.run(["unshare", "--mount", "--pid", "--fork", "--net", "--mount-proc", "true"],
                           capture_output=True)
    if probe.returncode != 0:
        skip("cannot create namespaces here: %s" % probe.stderr.decode().strip())
    env = dict(os.environ, PT_FRESH_INSIDE="1")
    return subprocess.run(["unshare", "--mount", "--pid", "--fork", "--net", "--mount-proc", sys.executable,
                           os.path.abspath(__file__), *sys.argv[1:]], env=env).returncode


def under_tmp(path):
    return os.path.realpath(path) == "/tmp" or os.path.realpath(path).startswith("/tmp/")


def fresh_machine(repo, build):
    """Returns where the build under test is now: REPO/build, which the README names (bound
    there first, in case the build itself lives under the /tmp about to be hidden). A
    checkout under /tmp is bound back into the fresh /tmp at the same path, from a handle
    on the old /tmp opened before it was hidden (no mount point is left on the host)."""
    sh("ip", "link", "set", "lo", "up")
    sh("mount", "--make-rprivate", "/")
    here = os.path.join(repo, "build")
    if os.path.realpath(build) != os.path.realpath(here):
        os.makedirs(here, exist_ok=True)
        sh("mount", "--bind", build, here)
    old_tmp = os.open("/tmp", os.O_RDONLY | os.O_DIRECTORY)
    try:
        sh("mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/tmp")
        if under_tmp(repo):
            inside = os.path.relpath(os.path.realpath(repo), "/tmp")
            os.makedirs(os.path.join("/tmp", inside), mode=0o755)
            # --no-canonicalize: mount(8) would resolve the /proc link to "/tmp/...", the new one.
            sh("mount", "--no-canonicalize", "--rbind", "/proc/%d/fd/%d/%s" % (os.getpid(), old_tmp, inside),
               os.path.join("/tmp", inside))
    finally:
        os.close(old_tmp)
    assert os.path.isdir(os.path.join(here, "bin")), "the build under test is hidden: " + here
    return here


def readme_block(repo):
    """The fenced block of README.md's "Use" section that runs the example job."""
    text = open(os.path.join(repo, "README.md")).read()
    use = re.search(r"^## Use\n(.*?)^## ", text, re.M | re.S)
    assert use, "README.md has no '## Use' section"
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", use.group(1), re.M | re.S)
    block = next((b for b in blocks if "--launch" in b and "--trigger-on" in b), None)
    assert block, "the Use section has no block that launches the example job and triggers it"
    return [line for line in block.splitlines() if line.strip()]


def run_line(line, repo, retry_while=None, deadline=None):
    while True:
        r = subprocess.run(["bash", "-c", line], cwd=repo, env=CLEAN_ENV, capture_output=True, text=True,
                           timeout=600)
        print("$ %s\n  exit %d\n%s%s" % (line, r.returncode, r.stdout[-1500:], r.stderr[-1500:]))
        if not retry_while or retry_while not in r.stdout + r.stderr or time.time() > deadline:
            return r
        time.sleep(2)


def scenario_readme(cli, fake, repo, build):
    lines = readme_block(repo)
    job = [line for line in lines if line.split("#")[0].rstrip().endswith("&")]
    assert len(job) == 1, "the block should start exactly one job in the background: %s" % lines
    deadline = time.time() + 240
    results = []
    for line in lines:
        if line.startswith("make"):
            continue  # the build under test
        if line in job:
            subprocess.run(["bash", "-c", line], cwd=repo, env=CLEAN_ENV)
            continue
        # Someone who sees "no running job" right after starting the job waits and retries.
        results.append((line, run_line(line, repo, "no running job", deadline)))
    trigger = next(r for line, r in results if "--trigger-on" in line)
    assert trigger.returncode == 0, "the README's trigger exited %d" % trigger.returncode
    listing = next(r for line, r in results if line.split("#")[0].split()[-1] == "jobs")
    script = next(os.path.basename(w) for w in job[0].split() if w.endswith(".py"))
    assert script in listing.stdout, "`perftracker jobs` did not list the job (%s)" % script
    reports = glob.glob("/tmp/perftracker/output/*/report.json")
    assert len(reports) == 1, "reports: %s" % reports
    report = json.load(open(reports[0]))
    assert report["job"]["workers_analyzed"] == 4, report["job"]
    top = report["diagnosis"]["findings"][0]
    assert 3 in top["workers"] and "sleep" in top["function"], json.dumps(top, indent=1)
    print("readme: ok; %s" % top["summary"])


def as_user(uid):
    return ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"]


def scenario_shared_output(cli, fake, repo, build):
    shared = "/tmp/perftracker/output"
    os.makedirs(shared)
    for path in ("/tmp/perftracker", shared):
        os.chown(path, OWNER_UID, OWNER_UID)
        os.chmod(path, 0o755)
    own = "/tmp/perftracker-%d" % USER_UID
    job_env = dict(CLEAN_ENV, MASTER_ADDR="127.0.0.1", MASTER_PORT="29500", WORLD_SIZE="2", LOCAL_WORLD_SIZE="2")
    job = subprocess.Popen(as_user(USER_UID) + [fake, "--world", "2", "--first", "0", "--count", "2", "--step-ms",
                                                 "20", "--seconds", "300"],
                           env=job_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = job.stdout.readline()
        assert line.startswith("ready"), "the job did not start: %s" % job.stderr.read()
        r = subprocess.run(as_user(USER_UID) + [cli, "--trigger-on", "--auto-analyze", "--wait", "1"],
                           env=CLEAN_ENV, capture_output=True, text=True, timeout=300)
        print(r.stderr)
        assert r.returncode == 0, "the trigger exited %d" % r.returncode
        said = "%s belongs to another user (uid %d) and this one (uid %d) cannot write there; writing to " \
               "%s/output instead" % (shared, OWNER_UID, USER_UID, own)
        assert said in r.stderr, "the trigger did not say what it did"
        reports = glob.glob(own + "/output/*/report.json")
        assert len(reports) == 1 and os.stat(reports[0]).st_uid == USER_UID, "reports: %s" % reports
        assert os.stat(own).st_mode & 0o777 == 0o700, "%s is not private" % own
        assert os.listdir(shared) == [], "something was written into the other user's folder"
    finally:
        job.terminate()
        job.wait(timeout=30)

    # The collector's own default (PerfTracker(wait=..., steps=...) without output_dir).
    script = ("from perftracker import PerfTracker, wait_idle\n"
              "t = PerfTracker(wait=0, steps=1)\n"
              "for _ in range(3):\n    t.step()\n"
              "assert wait_idle(120)\n")
    env = dict(CLEAN_ENV, PYTHONPATH=os.path.join(build, "python"), PERFTRACKER_AGENT="0", PERFTRACKER_GPU="0")
    r = subprocess.run(as_user(USER_UID) + [TORCH_PYTHON, "-c", script], env=env, capture_output=True, text=True,
                       timeout=300)
    print(r.stderr)
    assert r.returncode == 0, "the collector script failed"
    assert said in r.stderr, "the collector did not say where its output went, as the trigger does"
    assert glob.glob(own + "/output/*.ptrace"), "no raw trace in %s/output: %s" % (own, os.listdir(own + "/output"))
    print("shared-output: ok")


MALLORY, ALICE = 64010, 64011  # a hostile user, and a user with a real job


def start(cmd, env, uid=None):
    """A background process (as uid), its stdout a pipe; returns once it printed 'ready'."""
    log = tempfile.TemporaryFile("w+")  # a pipe nobody reads could fill and block it
    p = subprocess.Popen((as_user(uid) if uid is not None else []) + cmd, env=env, stdout=subprocess.PIPE,
                         stderr=log, text=True)
    p.log = log
    line = p.stdout.readline()
    if not line.startswith("ready"):
        raise AssertionError("%s did not start: %s" % (cmd[0], stop(p)[1]))
    return p


def stop(p):
    """Ends a process started by start(); returns what it printed (stdout, stderr)."""
    p.terminate()
    out, _ = p.communicate(timeout=30)
    p.log.seek(0)
    err = p.log.read()
    p.log.close()
    return out, err


def cli(binary, *args, uid=None, env=None):
    r = subprocess.run((as_user(uid) if uid is not None else []) + [binary, *args], env=env or CLEAN_ENV,
                       capture_output=True, text=True, timeout=300)
    print("$ %s%s\n  exit %d\n%s%s" % ("(uid %d) " % uid if uid is not None else "", " ".join(args), r.returncode,
                                       r.stdout[-1500:], r.stderr[-3000:]))
    return r


def job_env(master_port, world):
    return dict(CLEAN_ENV, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(master_port), WORLD_SIZE=str(world),
                LOCAL_WORLD_SIZE=str(world))


def start_job(fake, uid, master_port=29500):
    return start([fake, "--world", "2", "--first", "0", "--count", "2", "--step-ms", "20", "--seconds", "300"],
                 job_env(master_port, 2), uid)


def start_liar(fake, uid, env_extra=None):
    """Mallory's coordinator, registered like a job's: it claims 2^31-1 workers."""
    liar = os.path.join(os.path.dirname(fake), "hostile_coordinator")
    return start([liar, "--world", str(2 ** 31 - 1), "--after-start", "close"], dict(job_env(29600, 2),
                                                                                     **(env_extra or {})), uid)


def scenario_foreign_job(cli_path, fake, repo, build):
    """As root: another user's job file (with a lying coordinator behind it) is not picked,
    and the CLI says it ignored it; root gets no other user's key through MASTER_ADDR/
    MASTER_PORT either; what replaces both -- the trigger run as the job's user -- works."""
    liar = start_liar(fake, MALLORY)
    planted = "/tmp/perftracker-%d/job-127.0.0.1-29601.info" % MALLORY
    job = None
    try:
        assert os.stat(planted).st_uid == MALLORY, "the liar did not register"
        r = cli(cli_path, "--trigger-on", "--auto-analyze", "--wait", "1")
        assert r.returncode == 1 and "no running job found" in r.stderr, "root's trigger exited %d" % r.returncode
        said = "ignored %s: it belongs to uid %d, and the trigger trusts only job files of this user (uid 0)" \
               % (planted, MALLORY)
        assert said in r.stderr, "the trigger did not say it ignored the planted job file"
        assert "setpriv --reuid=%d --regid=%d --clear-groups perftracker --trigger-on" % (MALLORY, MALLORY) \
            in r.stderr, "the trigger did not say how to profile that user's job"
        listing = cli(cli_path, "jobs")
        assert listing.returncode == 0 and "29600" not in listing.stdout and said in listing.stderr, \
            "`perftracker jobs` listed or did not name the planted job"

        job = start_job(fake, ALICE)
        env = job_env(29500, 2)
        r = cli(cli_path, "--trigger-on", "--auto-analyze", "--wait", "1", env=env)
        assert r.returncode == 1 and "this shell has no key for it" in r.stderr, \
            "root got another user's key through MASTER_ADDR/MASTER_PORT (exit %d)" % r.returncode
        r = cli(cli_path, "--trigger-on", "--auto-analyze", "--wait", "1", "--output-dir", "/tmp/alice-out", uid=ALICE)
        assert r.returncode == 0, "the trigger as the job's user exited %d" % r.returncode
        reports = glob.glob("/tmp/alice-out/*/report.json")
        assert len(reports) == 1 and json.load(open(reports[0]))["job"]["workers_analyzed"] == 2, reports
    finally:
        if job:
            stop(job)
        out, _ = stop(liar)
    assert "connected" not in out, "a CLI talked to the planted coordinator"
    print("foreign-job: ok")


def scenario_squatted_dir(cli_path, fake, repo, build):
    """Mallory creates /tmp/perftracker-<alice> first (mode 0777) and plants a job file of
    her own coordinator in it. Alice's job still registers (in her private fallback), her
    trigger finds it, says what the squatted directory is (owner, mode) and where it looks
    instead, and never talks to Mallory's coordinator."""
    squat = "/tmp/perftracker-%d" % ALICE
    os.mkdir(squat)
    os.chown(squat, MALLORY, MALLORY)
    os.chmod(squat, 0o777)
    keys = "/tmp/mallory-keys"
    liar = start_liar(fake, MALLORY, {"PERFTRACKER_KEY_DIR": keys})
    job = None
    try:
        for name in os.listdir(keys):  # planted into the squat, as Mallory's files
            text = open(os.path.join(keys, name)).read().replace(keys + "/", squat + "/")
            path = os.path.join(squat, name)
            with open(path, "w") as f:
                f.write(text)
            os.chown(path, MALLORY, MALLORY)
            os.chmod(path, 0o600)
        job = start_job(fake, ALICE)
        r = cli(cli_path, "--trigger-on", "--auto-analyze", "--wait", "1", uid=ALICE)
        assert r.returncode == 0, "alice's trigger exited %d" % r.returncode
        fallbacks = glob.glob(squat + ".??????")
        assert len(fallbacks) == 1, "fallback directories: %s" % fallbacks
        st = os.stat(fallbacks[0])
        assert st.st_uid == ALICE and st.st_mode & 0o777 == 0o700, "the fallback is not alice's private directory"
        assert glob.glob(fallbacks[0] + "/job-*.info"), "alice's job did not register in the fallback"
        said = "%s is a directory of uid %d, mode 0777, not of this user (uid %d): perftracker does not use it; " \
               "this user's job files and keys are in %s instead" % (squat, MALLORY, ALICE, fallbacks[0])
        assert said in r.stderr, "the trigger did not say what it found and where it looks instead"
        assert "ignored %s/job-127.0.0.1-29601.info: it belongs to uid %d" % (squat, MALLORY) in r.stderr, \
            "the trigger did not name the planted job file"
        assert "connected to the job's coordinator at 127.0.0.1:29501 (job 29500" in r.stderr, "not alice's job"
        listing = cli(cli_path, "jobs", uid=ALICE)
        assert [row.split()[0] for row in listing.stdout.splitlines()[1:]] == ["29500"], "jobs: " + listing.stdout
        # Seventeen more private fallbacks, sorting after the job's (ones other jobs of hers
        # left), more than the CLI reads (PT_RUNTIME_DIRS_MAX): the job's sorts first and is
        # read, and the trigger still reaches it. The largest name is made between two runs
        # of eight, so that whether the directory lists oldest or newest first (tmpfs: by
        # kernel) it comes while the list of those kept is full and sorts after all of them.
        for suffix in ["zzzzz%d" % i for i in range(8)] + ["zzzzzz"] + ["zzzzz" + c for c in "ABCDEFGH"]:
            os.mkdir(squat + "." + suffix, 0o700)
            os.chown(squat + "." + suffix, ALICE, ALICE)
        again = cli(cli_path, "--trigger-on", "--auto-analyze", "--wait", "1", uid=ALICE)
        assert again.returncode == 0, "with two fallbacks, alice's trigger exited %d:\n%s" % (again.returncode,
                                                                                           again.stderr)
        assert "this user's job files and keys are in %s instead" % fallbacks[0] in again.stderr, again.stderr
        assert "connected to the job's coordinator at 127.0.0.1:29501 (job 29500" in again.stderr, "not alice's job"
    finally:
        job_log = stop(job)[1] if job else ""
        out, _ = stop(liar)
    assert "perftracker[coordinator]: " + said in job_log, "the job's log does not name the squat:\n" + job_log
    assert "connected" not in out, "alice's CLI talked to mallory's coordinator"
    print("squatted-dir: ok")


SCENARIOS = {"readme": scenario_readme, "shared-output": scenario_shared_output, "foreign-job": scenario_foreign_job,
             "squatted-dir": scenario_squatted_dir}


def main():
    if len(sys.argv) != 6 or sys.argv[5] not in SCENARIOS:
        print(__doc__, file=sys.stderr)
        return 2
    cli, fake, repo, build = (os.path.abspath(a) for a in sys.argv[1:5])
    if not os.environ.get("PT_FRESH_INSIDE"):
        return enter_namespaces()
    if sys.argv[5] == "readme" and subprocess.run([TORCH_PYTHON, "-c", "import torch.distributed"],
                                                  capture_output=True).returncode != 0:
        skip("%s has no torch (apt-get install python3-torch)" % TORCH_PYTHON)
    here = fresh_machine(repo, build)
    cli, fake = (os.path.join(here, os.path.relpath(p, build)) for p in (cli, fake))
    SCENARIOS[sys.argv[5]](cli, fake, repo, here)
    return 0


if __name__ == "__main__":
    sys.exit(main())
