#!/usr/bin/env python3
"""What listens where (docs/security.md, first table), checked on real processes.

usage: listening_sockets.py WORKDIR   (PYTHONPATH reaches build/python; PT_CLI: perftracker)

Training processes run the real collector and control agent through the public API, in
the environment torchrun gives a 2-rank job, and the test reads which TCP sockets each
process has in LISTEN state (/proc/net/tcp{,6} matched to /proc/PID/fd):
  - single node (LOCAL_WORLD_SIZE == WORLD_SIZE): rank 0 listens on 127.0.0.1:MASTER_PORT+1
    and nowhere else; rank 1 listens nowhere;
  - two nodes, MASTER_ADDR not an address of this machine: rank 0 listens on
    0.0.0.0:MASTER_PORT+1 and logs that it does; rank 1 still listens nowhere;
  - PERFTRACKER_AGENT=0: nothing listens at all;
  - `perftracker display` listens on 127.0.0.1 only by default, and with --bind localhost.
"""
import os
import socket
import subprocess
import sys
import time

CLI = os.environ.get("PT_CLI", "perftracker")

CHILD = r'''
import sys, time
from perftracker import PerfTracker
t = PerfTracker()
for _ in range(20):
    t.step()
    time.sleep(0.01)
print("READY", flush=True)
sys.stdin.read()
'''


def free_port():
    """A MASTER_PORT whose successor (the coordinator's port) is free on every address."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            with socket.socket() as s:
                s.bind(("0.0.0.0", port + 1))
            return port
        except OSError:
            continue
    raise AssertionError("no free port pair")


def listening(pid):
    """(address, port) of every TCP socket in LISTEN state that pid holds."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    found = []
    for table, family in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 6)):
        if not os.path.exists(table):
            continue
        with open(table) as f:
            next(f)
            for line in f:
                cols = line.split()
                local, state, inode = cols[1], cols[3], cols[9]
                if state != "0A" or inode not in inodes:  # 0A: LISTEN
                    continue
                addr_hex, port_hex = local.split(":")
                raw = bytes.fromhex(addr_hex)
                if family == 4:
                    addr = socket.inet_ntop(socket.AF_INET, raw[::-1])
                else:
                    addr = socket.inet_ntop(socket.AF_INET6, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
                found.append((addr, int(port_hex, 16)))
    return found


def start_rank(rank, env_extra, work):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)
    env.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "PERFTRACKER_KEY_DIR": os.path.join(work, "keys"),
                "PERFTRACKER_CLI": CLI})
    env.update(env_extra)
    proc = subprocess.Popen([sys.executable, "-c", CHILD], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=work)
    line = proc.stdout.readline().decode()
    if "READY" not in line:
        proc.kill()
        raise AssertionError(f"rank {rank} did not start: {proc.stderr.read().decode()[-500:]}")
    return proc


def stop(proc):
    proc.stdin.close()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return proc.stderr.read().decode("utf-8", "replace")


def job_case(name, env_extra, expect_rank0, work, failures, log_pattern=None):
    port = free_port()
    env = {"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "PERFTRACKER_AGENT": "1",
           "PERFTRACKER_SECRET": "listening-sockets-test-secret", **env_extra}
    env["MASTER_PORT"] = str(port)
    procs = [start_rank(r, env, work) for r in (0, 1)]
    time.sleep(0.5)  # the coordinator thread binds right after start
    got = [sorted(listening(p.pid)) for p in procs]
    logs = [stop(p) for p in procs]
    want0 = [(a, port + 1) for a in expect_rank0]
    problems = []
    if got[0] != want0:
        problems.append(f"rank 0 listens on {got[0]}, expected {want0}; its log: {logs[0][-600:]}")
    if got[1]:
        problems.append(f"rank 1 listens on {got[1]}, expected nothing")
    if log_pattern and log_pattern not in logs[0]:
        problems.append(f"rank 0 did not log {log_pattern!r}: {logs[0][-400:]}")
    print(f"{'ok  ' if not problems else 'FAIL'} {name:40s} rank 0 {got[0]} rank 1 {got[1]}")
    failures += [f"{name}: {p}" for p in problems]


def display_case(work, failures):
    subprocess.run([CLI, "synth", "-n", "2", "--steps", "2", "--layers", "1", "-o", os.path.join(work, "job")],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run([CLI, "analyze", "-q", "--force", "-o", os.path.join(work, "report"), os.path.join(work, "job")],
                   check=True, stderr=subprocess.DEVNULL)
    # The default, and --bind localhost (a name, which the server maps to 127.0.0.1).
    for name, extra in (("perftracker display (defaults)", []), ("perftracker display --bind localhost",
                                                                  ["--bind", "localhost"])):
        proc = subprocess.Popen([CLI, "display", os.path.join(work, "report", "PerfDisplay"), "--port", "0", *extra],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 30  # a bound on a failed start, not a measurement
            got = []
            while time.monotonic() < deadline and not got and proc.poll() is None:
                time.sleep(0.1)
                got = listening(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
        ok = got and all(addr == "127.0.0.1" for addr, _ in got)
        print(f"{'ok  ' if ok else 'FAIL'} {name:40s} {got}")
        if not ok:
            failures.append(f"{name} listens on {got}, expected 127.0.0.1 only; "
                            f"its stderr: {proc.stderr.read().decode('utf-8', 'replace')[-300:]}")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    work = os.path.abspath(sys.argv[1])
    os.makedirs(os.path.join(work, "keys"), mode=0o700, exist_ok=True)
    os.chmod(os.path.join(work, "keys"), 0o700)
    failures = []
    job_case("single node: loopback only", {"LOCAL_WORLD_SIZE": "2"}, ["127.0.0.1"], work, failures)
    job_case("two nodes, MASTER_ADDR not ours: any", {"LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "192.0.2.1",
                                                      "GROUP_RANK": "0"}, ["0.0.0.0"], work, failures,
             log_pattern="0.0.0.0")
    job_case("PERFTRACKER_AGENT=0: nothing", {"LOCAL_WORLD_SIZE": "2", "PERFTRACKER_AGENT": "0"}, [], work, failures)
    display_case(work, failures)
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("PASS: every listening socket is where docs/security.md says")


if __name__ == "__main__":
    main()
