#!/usr/bin/env python3
"""Another user of the machine against a real 4-rank torch job (gloo, CPU): the job runs
as this user, the attacker as `nobody` (uid 65534), started before the job and attacking
while it runs and while the owner triggers a round.

    test_other_user.py PERFTRACKER BUILD_PYTHON_DIR SCENARIO

join: a job shaped as two nodes of two ranks (MASTER_ADDR is this machine's non-loopback
address, LOCAL_WORLD_SIZE=2), so rank 0 publishes the job secret in the job's store for
the ranks of "other machines". The attacker reads that secret from the store as soon as
it is there and, with the real agent key, JOINs over TCP as ranks 1, 2 and 3 again and
again; it also connects to the coordinator's Unix socket. Every attempt must be refused,
the real ranks never ("refused this worker" nowhere in the job's output), the owner's
`--trigger-on --auto-analyze` must profile all 4 workers, each with the connection the
coordinator saw (this user's uid, the rank process's own pid), and the attempts must be
named as "security:" warnings in the report and as SECURITY lines on the CLI's stderr.
join-one-node: the same on a single-node job (LOCAL_WORLD_SIZE=4, loopback): no secret is
published at all (the key the attacker plants in the store is ignored), its JOINs with
the key of its own planted secret are refused, and the report is the job's.
planted: the two-node job, the attacker writing a secret of its own under the job's key
before rank 0 publishes: rank 0 must say loudly that perftracker stopped (someone else
planted the secret) and the training must go on stepping.
overwritten: the attacker waits until rank 0 has published, then overwrites the secret:
within seconds rank 0 must say the secret was overwritten and stop perftracker; the
training goes on.

Skips (exit 77) unless run as root (the attacker needs a uid of its own), with torch in
/usr/bin/python3 and the collector built; `join` and the store scenarios also need an
address of this machine that is not loopback."""
import glob
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

TORCH_PYTHON = "/usr/bin/python3"
SKIP = 77
NOBODY = 65534
HERE = os.path.dirname(os.path.abspath(__file__))
SECRET_KEY = "perftracker/job-secret/v1/attempt-0"
READY_KEY = "perftracker/job-secret-ready/v1/attempt-0"

JOB = r"""
import os, sys, time
import torch.distributed as dist
from perftracker import PerfTracker
rank = int(os.environ["RANK"])
tracer = PerfTracker()
dist.init_process_group("gloo")
for step in range(100000):
    time.sleep(0.02 * (1 + rank))
    tracer.step()
    dist.barrier()
    if step % 50 == 0:
        print("rank %d step %d" % (rank, step), flush=True)
"""

# Runs as nobody, after hostile_peer.py's source: the attack, then a JSON line of what
# happened to every attempt.
ATTACK = r"""
import datetime, json, sys, time
import torch.distributed as dist
mode, host, store_port, coord_port, job_uid, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
    int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
SECRET_KEY, READY_KEY = "perftracker/job-secret/v1/attempt-0", "perftracker/job-secret-ready/v1/attempt-0"
events = []
planted = os.urandom(32).hex()
deadline = time.time() + seconds
store = None
stores = []


def note(kind, **kw):
    events.append(dict(kind=kind, **kw))
    print(json.dumps(events[-1]), flush=True)


def connect_store():
    global store, stores
    try:
        store = dist.TCPStore(host, store_port, None, False, timeout=datetime.timedelta(seconds=2))
    except Exception:
        store = None
        return
    stores = [store, dist.PrefixStore("default_pg", store)]
    note("store-connected")
    if mode in ("planted", "join-one-node"):
        for s in stores:
            s.set(SECRET_KEY, planted)
        note("planted")


def read_secret():
    for s in stores:
        try:
            if s.add(READY_KEY, 0) >= 1:
                return s.get(SECRET_KEY).decode()
        except Exception:
            pass
    return None


def try_tcp_join(key, rank):
    try:
        peer = Peer(coord_port, host=host, timeout=5)
    except OSError as e:
        return "unreachable: %s" % e
    try:
        kind, body = peer.authenticate(key, ROLE_AGENT)
        if kind != WELCOME:
            return "refused at auth: %s" % body[4:].decode(errors="replace")
        peer.send(JOIN, join_body(rank, 4, host=b"attacker", pid=os.getpid()))
        peer.send(HEARTBEAT, heartbeat_body(1))
        peer.sock.settimeout(1.5)
        try:
            kind, body = peer.recv()
        except socket.timeout:
            return "JOINED"
        return "JOINED" if kind not in (REFUSED, None) else "refused at join: %s" % body[4:].decode(errors="replace")
    except (OSError, AssertionError) as e:
        return "closed: %s" % e
    finally:
        peer.close()


def try_unix():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect("\0perftracker-coord-%d-%d" % (job_uid, coord_port))
    except OSError as e:
        return "no socket: %s" % e
    try:
        data = s.recv(64)
        return "closed" if not data else "got %d bytes" % len(data)
    except OSError as e:
        return "closed: %s" % e
    finally:
        s.close()


overwritten = False
while time.time() < deadline:
    if store is None:
        connect_store()
    secret = read_secret() if store is not None else None
    if mode == "overwritten":
        if secret and not overwritten:
            for s in stores:
                s.set(SECRET_KEY, planted)
            overwritten = True
            note("overwritten")
        time.sleep(0.2)
        continue
    if mode == "planted":
        time.sleep(0.2)
        continue
    if secret and secret != planted and not any(e["kind"] == "read-secret" for e in events):
        note("read-secret", secret=secret)
    key = derive(bytes.fromhex(secret if secret and secret != planted else planted), "agent")
    for rank in (1, 2, 3):
        note("tcp-join", rank=rank, real_key=bool(secret and secret != planted), outcome=try_tcp_join(key, rank))
    note("unix", outcome=try_unix())
    time.sleep(0.3)
"""


def skip(why):
    print("SKIP: " + why)
    sys.exit(SKIP)


def this_machines_address():
    """An address of this machine that is not loopback: where a multi-node job's rank 0
    would listen."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.255", 9))  # no packet is sent: this only picks a route
            address = s.getsockname()[0]
            if not address.startswith("127."):
                return address
        except OSError:
            pass
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    found = [a for a in re.findall(r"inet (\d+\.\d+\.\d+\.\d+)/", out) if not a.startswith("127.")]
    return found[0] if found else None


def free_master_port(host):
    for _ in range(100):
        with socket.socket() as a, socket.socket() as b:
            a.bind((host, 0))
            port = a.getsockname()[1]
            try:
                b.bind((host, port + 1))
            except OSError:
                continue
            return port
    raise RuntimeError("no free pair of ports")


def start_attacker(mode, host, port, seconds):
    with open(os.path.join(HERE, "hostile_peer.py")) as f:
        code = f.read() + ATTACK
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}

    def become_nobody():
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)

    p = subprocess.Popen([TORCH_PYTHON, "-c", code, mode, host, str(port), str(port + 1), str(os.geteuid()),
                          str(seconds)], env=env, cwd="/", preexec_fn=become_nobody, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    p.events = []

    def read():
        for line in p.stdout:
            if line.startswith("{"):
                p.events.append(json.loads(line))
    p.reader = threading.Thread(target=read, daemon=True)
    p.reader.start()
    return p


def wait_for(predicate, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def start_job(tmp, env, host, port, local_world, before_others=None):
    """The job's 4 ranks; before_others() runs once rank 0 is started, before the others
    (then rank 0's store is up and waiting for them)."""
    script = os.path.join(tmp, "job.py")
    with open(script, "w") as f:
        f.write(JOB)
    log = open(os.path.join(tmp, "job.log"), "w+")
    ranks = []
    for rank in range(4):
        if rank == 1 and before_others:
            before_others()
        own = dict(env, MASTER_ADDR=host, MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank % local_world),
                   WORLD_SIZE="4", LOCAL_WORLD_SIZE=str(local_world), GROUP_RANK=str(rank // local_world))
        ranks.append(subprocess.Popen([TORCH_PYTHON, script], env=own, stdout=log, stderr=subprocess.STDOUT))
    return ranks, log


def read_log(log):
    log.flush()
    log.seek(0)
    return log.read()


def trigger(cli, env, host, port, out_dir, deadline):
    cmd = [cli, "--trigger-on", "--auto-analyze", "--wait", "2", "--steps", "2", "--output-dir", out_dir]
    own = dict(env, MASTER_ADDR=host, MASTER_PORT=str(port))
    while True:
        r = subprocess.run(cmd, env=own, capture_output=True, text=True, timeout=300)
        if not (r.returncode == 1 and "no running job found" in r.stderr) or time.time() > deadline:
            return r
        time.sleep(1)


def attacker_events(attacker):
    attacker.wait(timeout=120)
    attacker.reader.join(timeout=10)
    assert attacker.events, "the attacker did nothing: %s" % attacker.stderr.read()[-2000:]
    return attacker.events


def process_texts(ranks):
    """Each rank's command line and environment, while it runs."""
    places = {}
    for p in ranks:
        for what in ("cmdline", "environ"):
            with open("/proc/%d/%s" % (p.pid, what), "rb") as f:
                places["rank pid %d %s" % (p.pid, what)] = f.read()
    return places


def check_no_leak(secret, places, job_log, r, tmp):
    """The secret the attacker read from the store is nowhere else: no rank's command line
    or environment, no log, nothing the job or the CLI wrote."""
    places = dict(places, **{"the job's log": job_log.encode(), "the CLI's output": (r.stdout + r.stderr).encode()})
    for root, _, files in os.walk(tmp):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                places[os.path.join(root, name)] = f.read()
    leaked = [where for where, data in places.items() if secret.encode() in data]
    assert not leaked, "the job secret appears in %s" % leaked


def check_join(cli, env, tmp, host, port, local_world, scenario):
    attacker = start_attacker(scenario, host, port, 40)
    time.sleep(1)  # it is there first, waiting for the store
    ranks, log = start_job(tmp, env, host, port, local_world)
    try:
        r = trigger(cli, env, host, port, os.path.join(tmp, "out"), time.time() + 120)
        places = process_texts(ranks)
        events = attacker_events(attacker)
        job_log = read_log(log)
    finally:
        attacker.kill()
        for p in ranks:
            p.kill()
            p.wait()
    context = "\n--- CLI stderr ---\n%s\n--- job ---\n%s\n--- attacker ---\n%s" % (r.stderr[-3000:], job_log[-3000:],
                                                                                 json.dumps(events[-12:]))
    joins = [e for e in events if e["kind"] == "tcp-join"]
    unix = [e for e in events if e["kind"] == "unix"]
    assert joins and unix, "the attacker made no attempt%s" % context
    let_in = [e for e in joins + unix if e["outcome"] == "JOINED" or e["outcome"].startswith("got ")]
    assert not let_in, "the other user got in: %s%s" % (let_in[:3], context)
    if scenario == "join":
        real = [e for e in joins if e["real_key"]]
        assert real, "the attacker never held the real agent key (the store's secret)%s" % context
        assert all("over TCP" in e["outcome"] for e in real), "a JOIN with the real key was not refused as a " \
            "worker of this machine over TCP: %s%s" % (real[:2], context)
    else:
        assert not any(e["kind"] == "read-secret" for e in events), "a one-node job published its secret%s" % context
    assert "refused this worker" not in job_log, "a real rank was refused%s" % context
    assert r.returncode == 0, "the CLI exited %d%s" % (r.returncode, context)
    report = json.load(open(glob.glob(os.path.join(tmp, "out", "*", "report.json"))[0]))
    assert report["job"]["workers_analyzed"] == 4, report["job"]
    pids = {rank: p.pid for rank, p in enumerate(ranks)}
    for w in report["workers"]:
        c = w.get("connection")
        assert c and c["uid"] == os.geteuid() and c["pid"] == pids[w["rank"]], \
            "rank %d is not the job's own process: %s (job pids %s)%s" % (w["rank"], c, pids, context)
    security = [w for w in report["warnings"] if w.startswith("security:")]
    assert any("user %d" % NOBODY in w for w in security), "the other user's socket attempt is not in the " \
        "warnings: %s" % report["warnings"]
    if scenario == "join":
        assert any("over TCP and was refused" in w for w in security), report["warnings"]
    assert "SECURITY:" in r.stderr, "the CLI did not say it%s" % context
    if scenario == "join":
        check_no_leak(next(e["secret"] for e in events if e["kind"] == "read-secret"), places, job_log, r, tmp)
    print("%s: %d TCP JOINs as ranks 1-3 (%d with the real key) and %d socket connections refused; report: 4 "
          "workers, each this user's own process; %d security warnings, e.g. %r" %
          (scenario, len(joins), sum(e["real_key"] for e in joins), len(unix), len(security), security[0][:160]))
    return 0


def check_store(cli, env, tmp, host, port, scenario):
    attacker = start_attacker(scenario, host, port, 90)
    did = "planted" if scenario == "planted" else "overwritten"
    wrote = lambda: any(e["kind"] == did for e in attacker.events)  # noqa: E731
    # planted: rank 0's store is up (waiting for the other ranks) before rank 0 can publish
    ranks, log = start_job(tmp, env, host, port, 2, (lambda: wait_for(wrote, 90)) if did == "planted" else None)
    try:
        wait_for(wrote, 90)
        wait_for(lambda: "perftracker: STOPPED for this job" in read_log(log), 30)
        steps = lambda: len(re.findall(r"^rank 0 step", read_log(log), re.M))  # noqa: E731
        step_lines = steps()
        stepping = wait_for(lambda: steps() > step_lines, 60)
        later = read_log(log)
        alive = [p.poll() is None for p in ranks]
        attacker.kill()
        events = attacker_events(attacker)
    finally:
        attacker.kill()
        for p in ranks:
            p.kill()
            p.wait()
    context = "\n--- job ---\n%s\n--- attacker ---\n%s" % (later[-4000:], json.dumps(events[-6:]))
    assert any(e["kind"] == did for e in events), "the attacker never got to write the secret%s" % context
    want = "someone else planted it" if scenario == "planted" else "was overwritten after rank 0 wrote it"
    stopped = [l for l in later.splitlines() if "perftracker: STOPPED for this job" in l]
    assert stopped and want in stopped[0], "rank 0 did not stop perftracker saying %r%s" % (want, context)
    assert all(alive), "the training did not go on%s" % context
    assert stepping, "rank 0 stopped stepping%s" % context
    print("%s: %s" % (scenario, stopped[0][:240]))
    return 0


def main():
    if len(sys.argv) != 4 or sys.argv[3] not in ("join", "join-one-node", "planted", "overwritten"):
        print(__doc__, file=sys.stderr)
        return 2
    cli, python_dir, scenario = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3]
    if os.geteuid() != 0:
        skip("the attacker needs a user of its own: run as root")
    if subprocess.run([TORCH_PYTHON, "-c", "import torch.distributed"], capture_output=True).returncode != 0:
        skip("%s has no torch (apt-get install python3-torch)" % TORCH_PYTHON)
    if not glob.glob(os.path.join(python_dir, "perftracker", "_perftracker*.so")):
        skip("the collector's Python module is not built in %s" % python_dir)
    host = "127.0.0.1" if scenario == "join-one-node" else this_machines_address()
    if not host:
        skip("this machine has no address but loopback: a two-node job cannot be shaped on it")
    tmp = tempfile.mkdtemp(prefix="pt-other-user-")
    os.chmod(tmp, 0o700)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PERFTRACKER_") and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID")}
    env.update({"PYTHONPATH": python_dir, "PERFTRACKER_KEY_DIR": os.path.join(tmp, "keys"),
                "PERFTRACKER_JOIN_GRACE_S": "60", "OMP_NUM_THREADS": "1"})
    port = free_master_port(host)
    try:
        if scenario in ("join", "join-one-node"):
            return check_join(cli, env, tmp, host, port, 4 if scenario == "join-one-node" else 2, scenario)
        return check_store(cli, env, tmp, host, port, scenario)
    finally:
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    sys.exit(main())
