#!/usr/bin/env python3
"""A triggered round through the relay tree at 1k, 10k and 100k workers, in one run, with
the ratios against 1k, and the peak RSS of rank 0's process (which hosts the coordinator).

Workers are fake_workers processes (tests/control/fake_fleet.h): real agents, real node
relays (nodes of 8 ranks, each relay on a loopback address of its own, 127.1.x.y) and the
real coordinator in the process holding rank 0 (that process holds node 0 only), with a
simulated collector (50 ms steps) and small synthetic summaries (~3.4 KB). Agents and
relays are driven from one thread per process (pt_agent_create_driven); a process holds
as many whole nodes as its open-file hard limit allows (the script raises nothing; each
process raises its soft limit to the hard one and says so if that is too low). Every
process stops by itself after --seconds, whatever happens here.

Two figures per size, both from the CLI's start:
  collected  the round's end: every summary on disk (the control plane: coordinator,
             relays, agents, the CLI's collection); no analysis
  report     report.json written (--auto-analyze: collection + pt_diagnose + the report),
             at the sizes in PT_BENCH_TREE_REPORT_SIZES (default 1024 only: the analysis
             of 10k and 100k summaries is the analysis' own benchmark, bench/scale, and
             took minutes at 10k before its parallel rewrite)
Sizes: PT_BENCH_TREE_SIZES (default 1024,10240,100000); the simulated agents' heartbeat
and sampling periods: PT_BENCH_TREE_HEARTBEAT_MS (1000), PT_BENCH_TREE_POLL_MS (250) --
at 100k on 2 shared cores, their idle cost starves the round itself. Needs PT_CLI (scripts/bench.sh
sets it) and fake_workers beside it."""
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time

PER_NODE = 8
ROUND_TIMEOUT = 600


def master_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1] - 1


def spans(world):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    per = 8192 if hard == resource.RLIM_INFINITY else min(8192, int((hard - 300) / 2.5) // PER_NODE * PER_NODE)
    if per < PER_NODE:
        raise RuntimeError("the open-file hard limit (%d) is too low for one node per process" % hard)
    return [(0, PER_NODE)] + [(f, min(per, world - f)) for f in range(PER_NODE, world, per)]


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        try:
            f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
            total += int(f[11]) + int(f[12])
        except OSError:
            pass
    return total / os.sysconf("SC_CLK_TCK")


def measure(cli, fake, world, tmp, with_report):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("PERFTRACKER_"):
            del env[k]
    env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(master_port()), "WORLD_SIZE": str(world),
                "LOCAL_WORLD_SIZE": str(PER_NODE), "PERFTRACKER_KEY_DIR": os.path.join(tmp, "keys-%d" % world),
                "PERFTRACKER_HEARTBEAT_MS": os.environ.get("PT_BENCH_TREE_HEARTBEAT_MS", "1000"), "PERFTRACKER_HEARTBEAT_TIMEOUT_S": "120",
                "PERFTRACKER_SUMMARY_TIMEOUT_S": "300"})
    secret = os.path.join(tmp, "job-secret-%d" % world)
    procs = []
    for first, count in spans(world):
        procs.append(subprocess.Popen([fake, "--world", str(world), "--first", str(first), "--count", str(count),
                                       "--step-ms", "50", "--seconds", "1500", "--job-secret-file", secret,
                                       "--tree", "--driven", "--ranks-per-node", str(PER_NODE),
                                       "--poll-ms", os.environ.get("PT_BENCH_TREE_POLL_MS", "250")],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
    out = {"processes": len(procs)}
    try:
        t0 = time.perf_counter()
        for p in procs:
            if not p.stdout.readline().startswith("ready"):
                raise RuntimeError("fake workers did not start (world %d)" % world)
        out["join"] = time.perf_counter() - t0
        pids = [p.pid for p in procs]
        for kind in ("collected", "report") if with_report else ("collected",):
            args = [cli, "--trigger-on", "--quiet", "--wait", "2", "--steps", "2",
                    "--output-dir", os.path.join(tmp, "out-%d-%s" % (world, kind))]
            if kind == "report":
                args.insert(2, "--auto-analyze")
            cpu0 = cpu_seconds(pids)
            t0 = time.perf_counter()
            r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=ROUND_TIMEOUT)
            out[kind] = time.perf_counter() - t0
            if kind == "collected":
                out["fleet_cpu"] = cpu_seconds(pids) - cpu0
            if r.returncode != 0:
                raise RuntimeError("round of %d failed (%d): %s" % (world, r.returncode, r.stderr[-2000:]))
            shutil.rmtree(os.path.join(tmp, "out-%d-%s" % (world, kind)), ignore_errors=True)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                rest = p.communicate(timeout=60)[0]
            except subprocess.TimeoutExpired:
                p.kill()
                rest = p.communicate()[0]
            for line in rest.splitlines():
                if p is procs[0] and line.startswith("peak_rss_kb"):
                    out["rank0_rss_mb"] = int(line.split()[1]) / 1024
                if line.startswith("coordinator_peak"):
                    out["relays"] = int(line.split()[4])
    return out


def main():
    cli = os.environ.get("PT_CLI") or (sys.argv[1] if len(sys.argv) > 1 else "build/bin/perftracker")
    fake = os.path.join(os.path.dirname(os.path.abspath(cli)), "fake_workers")
    if not os.access(fake, os.X_OK):
        print("bench_tree: %s is not built" % fake)
        return 1
    sizes = [int(s) for s in os.environ.get("PT_BENCH_TREE_SIZES", "1024,10240,100000").split(",")]
    report_sizes = [int(s) for s in os.environ.get("PT_BENCH_TREE_REPORT_SIZES", "1024").split(",") if s]
    tmp = tempfile.mkdtemp(prefix="pt-bench-tree-")
    results = {}
    try:
        for n in sizes:
            results[n] = measure(cli, fake, n, tmp, with_report=n in report_sizes)
            print("  measured %d: %s" % (n, results[n]), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base = sizes[0]
    print("round through the relay tree (nodes of %d; one run, median of 1):" % PER_NODE)
    for n in sizes:
        r = results[n]
        line = "  %6d workers  %2d processes  %5d relays  collected %6.2f s" % (
            n, r["processes"], r.get("relays", -1), r["collected"])
        if n != base:
            line += " (%5.2fx)" % (r["collected"] / results[base]["collected"])
        if "report" in r:
            line += "  report %6.2f s" % r["report"]
            if n != base and "report" in results[base]:
                line += " (%5.2fx)" % (r["report"] / results[base]["report"])
        line += "  rank-0 peak RSS %6.1f MB  fleet CPU %.1f s  join %.1f s" % (
            r.get("rank0_rss_mb", -1), r["fleet_cpu"], r["join"])
        print(line)
    if 10240 in results and 100000 in results:
        a, b = results[10240], results[100000]
        print("  100k/10k: collected %.2fx (goal <= 11)%s" % (
            b["collected"] / a["collected"],
            ", report %.2fx" % (b["report"] / a["report"]) if "report" in b else ""))
        print("  100k: collected in %.1f s%s (goal <= 30 s); rank-0 peak RSS %.1f MB (goal <= 256 MB)" % (
            b["collected"], ", report in %.1f s" % b["report"] if "report" in b else "", b.get("rank0_rss_mb", -1)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
