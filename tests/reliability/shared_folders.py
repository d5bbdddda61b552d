#!/usr/bin/env python3
"""Root's CLI writing into folders another user controls (issue 15, item 3).

    shared_folders.py PERFTRACKER FAKE_WORKERS

Another user (a throwaway uid) plants the output folder and races root's writes from a
process of its own: it keeps a symlink to a root-only 0600 file under every temporary name
the CLI used (report.json.tmp<pid>, made before the CLI even starts, since the test knows
its pid), and swaps every folder root creates there for a symlink to a root-only folder.
Whatever happens, the root-only files must stay as they were, and the CLI must refuse
with a message or fall back to its private folder and say so:

  analyze_planted_0777    `analyze -o F`, F made mode 0777 by the other user: refused,
                          the message names F's owner
  analyze_sticky_1777     `analyze -o F`, F root's and 1777 like /tmp: written (exit 0);
                          report.json is a regular file, private (0600), PerfDisplay 0700
  analyze_sticky_squatted the same, with PerfDisplay planted as a symlink: refused
  trigger_default_planted /tmp/perftracker/output planted 0777 by the other user: the
                          trigger (a real job) writes to /tmp/perftracker-0/output and says so
  trigger_explicit_planted `--output-dir F` planted the same way: refused
  default_squatted        /tmp/perftracker/output planted as above and /tmp/perftracker-0
                          squatted (the other user's, 0777): the trigger writes to output/
                          in root's private fallback /tmp/perftracker-0.XXXXXX (where the
                          job registered too) and says so, nothing lands in the squat; the
                          Python collector's default folder is the same one, and says so

Runs in a private mount namespace with its own /tmp (so /tmp/perftracker is this test's).
Needs root and unshare; skips (77) without them."""
import glob
import os
import signal
import socket
import stat
import subprocess
import sys
import time

SKIP = 77
ATTACKER = 64101
ROOT_ONLY = "/tmp/shared-folders/root-only"  # 0700, files 0600: what must stay intact
SECRET = ROOT_ONLY + "/secret.txt"
ROOT_ONLY_FILES = {"secret.txt": b"ROOT-ONLY secret\n", "report.json": b"ROOT-ONLY report\n",
                   "index.html": b"ROOT-ONLY page\n", "data.js": b"ROOT-ONLY data\n"}
TMP_NAMES = ("report.json", "PerfDisplay/data.js", "PerfDisplay/report.json", "PerfDisplay/index.html")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def skip(why):
    print("SKIP: " + why)
    sys.exit(SKIP)


def sh(*cmd):
    subprocess.run(cmd, check=True, capture_output=True)


def enter_namespace():
    if os.geteuid() != 0 or not shutil_which("unshare"):
        skip("needs root and unshare (a private /tmp, and a second user to attack with)")
    for path in sys.argv[1:3]:
        if os.path.realpath(path).startswith("/tmp/"):
            skip("%s lives under /tmp, which this test hides behind its own" % path)
    probe = subprocess.run(["unshare", "--mount", "--fork", "true"], capture_output=True)
    if probe.returncode != 0:
        skip("cannot create a mount namespace here: %s" % probe.stderr.decode().strip())
    env = dict(os.environ, PT_SHARED_FOLDERS_INSIDE="1")
    return subprocess.run(["unshare", "--mount", "--fork", sys.executable, os.path.abspath(__file__),
                           *sys.argv[1:]], env=env).returncode


def shutil_which(name):
    return any(os.access(os.path.join(d, name), os.X_OK) for d in os.environ.get("PATH", "").split(":"))


def private_tmp():
    sh("mount", "--make-rprivate", "/")
    sh("mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/tmp")
    os.makedirs(ROOT_ONLY, mode=0o700)
    os.chmod("/tmp/shared-folders", 0o755)
    for name, data in ROOT_ONLY_FILES.items():
        path = os.path.join(ROOT_ONLY, name)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o600)


def root_only_intact(case):
    now = {}
    for name in os.listdir(ROOT_ONLY):
        path = os.path.join(ROOT_ONLY, name)
        now[name] = open(path, "rb").read() if os.path.isfile(path) and not os.path.islink(path) else None
    changed = {k: (v or b"")[:40] for k, v in now.items() if ROOT_ONLY_FILES.get(k) != v}
    changed.update({k: "(gone)" for k in ROOT_ONLY_FILES if k not in now})
    check(not changed, "%s: the root-only files are intact (%s)" % (case, "yes" if not changed else
                                                                     "changed: %r" % changed))


def plant(path, owner, mode):
    """A folder as another user would make it (and its parent too when that is new)."""
    os.makedirs(path)
    os.chown(path, owner, owner)
    os.chmod(path, mode)


# ------------------------------------------------------------ the other user's process

def race(folder, pids, ready_fd):
    """As the attacker: plant symlinks under the CLI's temporary names and swap every folder
    root makes in `folder` for a symlink to ROOT_ONLY, until killed."""
    os.setgroups([])
    os.setgid(ATTACKER)
    os.setuid(ATTACKER)
    moved = 0
    first = True
    while True:
        for pid in pids:
            for name in TMP_NAMES:
                p = os.path.join(folder, "%s.tmp%d" % (name, pid))
                try:
                    if not os.path.islink(p):
                        if os.path.lexists(p):
                            os.unlink(p)
                        os.symlink(SECRET, p)
                except OSError:
                    pass
        try:
            entries = os.listdir(folder)
        except OSError:
            entries = []
        for name in entries:
            p = os.path.join(folder, name)
            try:
                st = os.lstat(p)
                if stat.S_ISDIR(st.st_mode) and st.st_uid != ATTACKER:
                    os.rename(p, os.path.join(folder, ".moved-%d" % moved))
                    moved += 1
                    os.symlink(ROOT_ONLY, p)
            except OSError:
                pass
        if first:
            os.write(ready_fd, b"r")
            os.close(ready_fd)
            first = False
        time.sleep(0.002)


def start_race(folder, pids):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            race(folder, pids, w)
        finally:
            os._exit(0)
    os.close(w)
    os.read(r, 1)  # its first pass is done: the symlinks are in place
    os.close(r)
    return pid


def stop(pid):
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def run_raced(argv, folder, env=None, timeout=240):
    """Runs the CLI as root with the attacker racing in folder; the CLI's pid is known
    before it starts, so its temporary names are planted first. Returns (rc, stderr)."""
    go_r, go_w = os.pipe()
    err_path = "/tmp/shared-folders/stderr-%d" % time.monotonic_ns()
    pid = os.fork()
    if pid == 0:
        os.close(go_w)
        os.read(go_r, 1)
        fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 2)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.execve(argv[0], argv, env or os.environ)
    os.close(go_r)
    attacker = start_race(folder, [pid])
    os.write(go_w, b"g")
    os.close(go_w)
    deadline = time.monotonic() + timeout
    status = None
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        status = -1
    stop(attacker)
    err = open(err_path, encoding="utf-8", errors="replace").read()
    print(err.rstrip())
    return (os.waitstatus_to_exitcode(status) if status != -1 else -1), err


def root_files_in(folder):
    """What root created in folder (the attacker's own entries excluded)."""
    out = []
    for d, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = os.path.join(d, name)
            if os.lstat(p).st_uid == 0:
                out.append(p)
    return out


# ------------------------------------------------------------ cases

def traces(cli):
    out = "/tmp/shared-folders/traces"
    if not os.path.isdir(out):
        subprocess.run([cli, "synth", "-n", "4", "--seed", "1", "--quiet", "-o", out], check=True,
                       capture_output=True)
    return out


def analyze_planted_0777(cli, fake):
    folder = "/tmp/shared-folders/a/output"
    os.makedirs(os.path.dirname(folder), exist_ok=True)
    plant(folder, ATTACKER, 0o777)
    rc, err = run_raced([cli, "analyze", "--quiet", "-o", folder, traces(cli)], folder)
    check(rc == 1, "analyze_planted_0777: refused (exit %d)" % rc)
    check("%s belongs to another user (uid %d)" % (folder, ATTACKER) in err,
          "analyze_planted_0777: the message names the folder and its owner")
    check(not root_files_in(folder), "analyze_planted_0777: nothing written there: %s" % root_files_in(folder))
    root_only_intact("analyze_planted_0777")


def analyze_sticky_1777(cli, fake):
    folder = "/tmp/shared-folders/sticky"
    plant(folder, 0, 0o1777)
    rc, err = run_raced([cli, "analyze", "--quiet", "-o", folder, traces(cli)], folder)
    check(rc == 0, "analyze_sticky_1777: written (exit %d)" % rc)
    report = os.path.join(folder, "report.json")
    st = os.lstat(report) if os.path.lexists(report) else None
    check(st is not None and stat.S_ISREG(st.st_mode) and st.st_uid == 0 and st.st_mode & 0o777 == 0o600,
          "analyze_sticky_1777: report.json is root's regular file, mode 0600 (%s)"
          % (oct(st.st_mode) if st else "missing"))
    display = os.path.join(folder, "PerfDisplay")
    st = os.lstat(display) if os.path.lexists(display) else None
    check(st is not None and stat.S_ISDIR(st.st_mode) and st.st_mode & 0o777 == 0o700,
          "analyze_sticky_1777: PerfDisplay is a private folder (%s)" % (oct(st.st_mode) if st else "missing"))
    data = os.path.join(display, "data.js")
    check(os.path.isfile(data) and os.stat(data).st_mode & 0o077 == 0 and
          b"window.PT_REPORT" in open(data, "rb").read(), "analyze_sticky_1777: data.js holds the report, private")
    root_only_intact("analyze_sticky_1777")


def analyze_sticky_squatted(cli, fake):
    folder = "/tmp/shared-folders/squatted"
    plant(folder, 0, 0o1777)
    pid = os.fork()
    if pid == 0:  # the other user's symlink, made before root comes
        os.setgroups([])
        os.setgid(ATTACKER)
        os.setuid(ATTACKER)
        os.symlink(ROOT_ONLY, os.path.join(folder, "PerfDisplay"))
        os._exit(0)
    os.waitpid(pid, 0)
    rc, err = run_raced([cli, "analyze", "--quiet", "-o", folder, traces(cli)], folder)
    check(rc == 1, "analyze_sticky_squatted: refused (exit %d)" % rc)
    check("%s/PerfDisplay" % folder in err and "symlink" in err,
          "analyze_sticky_squatted: the message names the planted PerfDisplay symlink")
    root_only_intact("analyze_sticky_squatted")


def free_master_port():
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port > 1024:
            return port - 1
    raise RuntimeError("no free port")


def with_job(fake, body):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERFTRACKER_")}
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_master_port()), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2")
    job = subprocess.Popen([fake, "--world", "2", "--first", "0", "--count", "2", "--step-ms", "20",
                            "--seconds", "300"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = job.stdout.readline()
        assert line.startswith("ready"), "the job did not start: %s" % job.stderr.read()
        body(env)
    finally:
        job.terminate()
        job.wait(timeout=30)


def trigger_default_planted(cli, fake):
    folder = "/tmp/perftracker/output"
    plant("/tmp/perftracker", ATTACKER, 0o777)
    plant(folder, ATTACKER, 0o777)

    def body(env):
        rc, err = run_raced([cli, "--trigger-on", "--auto-analyze", "--wait", "1"], folder, env)
        check(rc == 0, "trigger_default_planted: the round ran (exit %d)" % rc)
        check("writing to /tmp/perftracker-0/output instead" in err and "uid %d" % ATTACKER in err,
              "trigger_default_planted: it says where it writes instead, and why")
        reports = glob.glob("/tmp/perftracker-0/output/*/report.json")
        check(len(reports) == 1, "trigger_default_planted: the report is in the private folder: %s" % reports)
        check(not root_files_in("/tmp/perftracker"),
              "trigger_default_planted: nothing written in the planted folder: %s" % root_files_in("/tmp/perftracker"))
        root_only_intact("trigger_default_planted")
    with_job(fake, body)


def trigger_explicit_planted(cli, fake):
    folder = "/tmp/shared-folders/t/output"
    os.makedirs(os.path.dirname(folder), exist_ok=True)
    plant(folder, ATTACKER, 0o777)

    def body(env):
        rc, err = run_raced([cli, "--trigger-on", "--auto-analyze", "--wait", "1", "--output-dir", folder],
                            folder, env)
        check(rc != 0, "trigger_explicit_planted: refused (exit %d)" % rc)
        check("%s belongs to another user (uid %d)" % (folder, ATTACKER) in err,
              "trigger_explicit_planted: the message names the folder and its owner")
        check(not root_files_in(folder), "trigger_explicit_planted: nothing written there: %s" % root_files_in(folder))
        root_only_intact("trigger_explicit_planted")
    with_job(fake, body)


def python_default_output_dir(cli):
    """(folder, stderr) of the Python collector's default output folder, or None when this
    build has no Python module."""
    package = os.path.join(os.path.dirname(os.path.dirname(cli)), "python")
    if not glob.glob(os.path.join(package, "perftracker", "_perftracker*.so")):
        return None
    r = subprocess.run([sys.executable, "-c", "from perftracker import tracer; print(tracer._default_output_dir())"],
                       env=dict(os.environ, PYTHONPATH=package), capture_output=True, text=True, timeout=60)
    return (r.stdout.strip() if r.returncode == 0 else "(failed: %s)" % r.stderr.strip()[-500:]), r.stderr


def default_squatted(cli, fake):
    for old in ["/tmp/perftracker"] + glob.glob("/tmp/perftracker-0*"):  # earlier cases' folders
        subprocess.run(["rm", "-rf", old], check=True)
    folder = "/tmp/perftracker/output"
    plant("/tmp/perftracker", ATTACKER, 0o777)
    plant(folder, ATTACKER, 0o777)
    squat = "/tmp/perftracker-0"
    plant(squat, ATTACKER, 0o777)

    def body(env):
        rc, err = run_raced([cli, "--trigger-on", "--auto-analyze", "--wait", "1"], folder, env)
        check(rc == 0, "default_squatted: the round ran (exit %d)" % rc)
        fallbacks = [d for d in glob.glob(squat + ".??????") if os.lstat(d).st_uid == 0]
        check(len(fallbacks) == 1, "default_squatted: one private fallback of root's: %s" % fallbacks)
        own = os.path.join(fallbacks[0] if fallbacks else squat + ".XXXXXX", "output")
        check("writing to %s instead" % own in err and "uid %d" % ATTACKER in err,
              "default_squatted: it says it writes to %s instead, and why" % own)
        reports = glob.glob(own + "/*/report.json")
        check(len(reports) == 1, "default_squatted: the report is in the private fallback: %s" % reports)
        check(not root_files_in(squat), "default_squatted: nothing written in the squat: %s" % root_files_in(squat))
        check(not root_files_in("/tmp/perftracker"),
              "default_squatted: nothing written in the planted folder: %s" % root_files_in("/tmp/perftracker"))
        python = python_default_output_dir(cli)
        if python is None:
            print("note default_squatted: no Python module in this build; the collector's default is not checked")
        else:
            chosen, said = python
            check(chosen == own, "default_squatted: the Python collector's default is the CLI's, %s (got %s)"
                  % (own, chosen))
            check("writing to %s instead" % own in said, "default_squatted: the collector says so: %r" % said[-300:])
        root_only_intact("default_squatted")
    with_job(fake, body)


CASES = [analyze_planted_0777, analyze_sticky_1777, analyze_sticky_squatted, trigger_default_planted,
         trigger_explicit_planted, default_squatted]


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    if not os.environ.get("PT_SHARED_FOLDERS_INSIDE"):
        return enter_namespace()
    cli, fake = (os.path.abspath(a) for a in sys.argv[1:3])
    only = sys.argv[3:]
    private_tmp()
    for case in CASES:
        if not only or case.__name__ in only:
            print("--- %s" % case.__name__, flush=True)
            try:
                case(cli, fake)
            except Exception as e:  # one broken case does not hide the others
                check(False, "%s: %s: %s" % (case.__name__, type(e).__name__, e))
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
