#!/usr/bin/env python3
"""The CLI against a coordinator that lies: hostile_coordinator registers like a job's
rank 0 (job file and control key in a private PERFTRACKER_KEY_DIR), speaks the real
protocol with the real key, and then says things no real coordinator says. The CLI must
refuse or bound each of them, and say what happened.

    test_hostile_coordinator.py PERFTRACKER HOSTILE_COORDINATOR SCENARIO

huge-world: a round of 2^31-1 workers (bytes patched past the encoder, which refuses
them), then the coordinator hangs up. Refused at once by the CLI's decoder (exit 1, a
message naming the field and its range, no round folder left). Before, the CLI named the
missing ranks one by one at quadratic cost and never finished.
big-world-lost: a round of 2^20 workers (the most perftracker describes), then the
coordinator hangs up: the first 1000 unheard ranks are named (stderr and warnings, rank 0
first), the rest counted, all in one pass; a report, exit 3.
bad-ranks: a failure for rank 5 (of the 6 the message claims; the round has 2), two for
rank 0, then one for rank -1 (patched past the encoder), then ROUND_DONE. Rank 5 and the
second rank 0 are ignored and counted in one warning; rank 0 is reported once; the CLI
stops reading at rank -1, says which field and range (stderr and warnings), and names
rank 1 missing; exit 3.
endless-round: PROGRESS forever after the round started: with --timeout 1 the CLI ends
the round itself (the deadline plus 30 s), names the workers missing, exits 3.

Each CLI run has a generous subprocess timeout: a CLI that never finishes fails the test
(no timing is asserted otherwise)."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile


def free_port_pair():
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port > 1024:
            return port - 1
    raise RuntimeError("no free port")


class Liar:
    def __init__(self, binary, tmp, world, mode):
        self.tmp = tmp
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PERFTRACKER_")}
        self.env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port_pair()), "WORLD_SIZE": "2",
                         "PERFTRACKER_KEY_DIR": os.path.join(tmp, "keys")})
        self.log = open(os.path.join(tmp, "liar.log"), "w+")
        self.proc = subprocess.Popen([binary, "--world", str(world), "--after-start", mode], env=self.env,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("ready"):
            self.log.seek(0)
            raise AssertionError("hostile_coordinator did not start: " + self.log.read())

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


def trigger(cli, liar, *args, timeout=300):
    env = {k: v for k, v in liar.env.items() if k not in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE")}
    cmd = [cli, "--trigger-on", "--auto-analyze", "--output-dir", os.path.join(liar.tmp, "out"), "--wait", "1",
           *args]
    try:
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise AssertionError("the CLI did not finish within %d s; stderr so far:\n%s"
                             % (timeout, (e.stderr or b"")[-3000:].decode(errors="replace")))


def check(cond, message, r=None):
    if not cond:
        raise AssertionError(message + ("\n--- CLI exit %d, stderr ---\n%s" % (r.returncode, r.stderr[-4000:])
                                        if r is not None else ""))


def rounds(liar):
    out = os.path.join(liar.tmp, "out")
    return sorted(os.listdir(out)) if os.path.isdir(out) else []


def report_of(liar):
    folders = rounds(liar)
    assert len(folders) == 1, "round folders: %s" % folders
    with open(os.path.join(liar.tmp, "out", folders[0], "report.json")) as f:
        return json.load(f)


def scenario_huge_world(cli, liar):
    r = trigger(cli, liar, timeout=120)
    check(r.returncode == 1, "exit status %d (want 1: round refused)" % r.returncode, r)
    check("the coordinator sent an invalid message (round-started message: progress.world_size 2147483647 is "
          "outside 1..1048576): refusing the round" in r.stderr, "the refusal does not name the field and range", r)
    check("connection closed" not in r.stderr, "the CLI blames a closed connection", r)
    check(rounds(liar) == [], "a round folder was left behind: %s" % rounds(liar), r)
    print("huge-world: " + next(line for line in r.stderr.splitlines() if "invalid message" in line))


def scenario_big_world_lost(cli, liar):
    r = trigger(cli, liar, timeout=500)
    check(r.returncode == 3, "exit status %d (want 3: workers missing)" % r.returncode, r)
    missing = [line for line in r.stderr.splitlines() if ": missing: " in line]
    check(len(missing) == 1000, "%d 'missing' lines on stderr (want the first 1000 ranks)" % len(missing), r)
    check(missing[0].startswith("perftracker: rank 0: missing: its process hosted the job's coordinator"),
          "rank 0 is not named first: %r" % missing[0], r)
    report = report_of(liar)
    job = report["job"]
    check(job["world_size"] == 1 << 20, "world size %s" % job.get("world_size"), r)
    named = sum(1 for w in report["warnings"] if ": missing" in w)
    check(named == 1000, "%d ranks named missing in the warnings (want 1000)" % named, r)
    rest = (1 << 20) - 1000
    check(any(w.startswith("%d more workers were not heard from" % rest) for w in report["warnings"]),
          "no warning counting the other %d ranks" % rest, r)
    check(job["missing_count"] == rest and len(job["missing_ranks"]) == 4096, "missing: %d counted, %d listed"
          % (job["missing_count"], len(job["missing_ranks"])), r)
    print("big-world-lost: 1000 ranks named, %d counted" % rest)


def scenario_bad_ranks(cli, liar):
    r = trigger(cli, liar, timeout=120)
    check(r.returncode == 3, "exit status %d (want 3)" % r.returncode, r)
    report = report_of(liar)
    warnings = report["warnings"]
    check(any("ignored 2 messages from the coordinator about ranks outside the job's 2 or already settled" in w
              for w in warnings), "no warning counting the ignored messages: %s" % warnings, r)
    died = [w for w in warnings if w.startswith("rank 0 ") and "died" in w]
    check(len(died) == 1, "rank 0's failure recorded %d times: %s" % (len(died), warnings), r)
    check(not any(w.startswith("rank -1") or w.startswith("rank 5 ") for w in warnings),
          "an out-of-range rank was recorded: %s" % warnings, r)
    check(r.stderr.count("rank 0 (liarhost, pid 4242): died") == 1, "stderr names rank 0's failure %d times"
          % r.stderr.count("rank 0 (liarhost, pid 4242): died"), r)
    refused = "worker-failed message: worker.rank -1 is outside 0..1048575"
    check(any(w.startswith("the coordinator sent an invalid message (%s): the CLI stopped reading it" % refused)
              for w in warnings), "no warning names the refused field and range: %s" % warnings, r)
    check(("rank 1: missing: the CLI stopped reading the job's coordinator, which sent an invalid message (%s)"
           % refused) in r.stderr, "stderr does not say why rank 1 is missing", r)
    check("connection closed" not in r.stderr and "went away" not in r.stderr,
          "the CLI blames a lost coordinator", r)
    job = report["job"]
    check(job["workers_failed"] == 2 and job["workers_analyzed"] == 0, "job: %s" % job, r)
    print("bad-ranks: " + next(w for w in warnings if w.startswith("ignored")) + "; "
          + next(w for w in warnings if w.startswith("the coordinator sent")))


def scenario_endless_round(cli, liar):
    r = trigger(cli, liar, "--timeout", "1", timeout=240)
    check(r.returncode == 3, "exit status %d (want 3: workers missing)" % r.returncode, r)
    report = report_of(liar)
    check(any("the round passed the CLI's limit (--timeout + 30 s)" in w for w in report["warnings"]),
          "no warning saying why the round ended: %s" % report["warnings"], r)
    check("rank 0: missing" in r.stderr and "rank 1: missing" in r.stderr, "the workers are not named", r)
    print("endless-round: ended by the CLI")


SCENARIOS = {
    "huge-world": (2 ** 31 - 1, "close", scenario_huge_world),
    "big-world-lost": (1 << 20, "close", scenario_big_world_lost),
    "bad-ranks": (2, "outcomes", scenario_bad_ranks),
    "endless-round": (2, "progress", scenario_endless_round),
}


def main():
    if len(sys.argv) != 4 or sys.argv[3] not in SCENARIOS:
        print(__doc__, file=sys.stderr)
        return 2
    cli, binary, name = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3]
    world, mode, run = SCENARIOS[name]
    tmp = tempfile.mkdtemp(prefix="pt-liar-%s-" % name)
    liar = None
    try:
        liar = Liar(binary, tmp, world, mode)
        run(cli, liar)
    finally:
        if liar:
            liar.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%s: ok" % name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
