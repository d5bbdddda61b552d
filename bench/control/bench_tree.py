#!/usr/bin/env python3
"""A triggered round through the relay tree at 1k, 10k and 100k workers, in one run, with
the ratios against 1k, and the peak RSS of rank 0's process (which hosts the coordinator).

Workers are fake_workers processes (tests/control/fake_fleet.h): real agents, real node
relays (nodes of 8 ranks, each relay on a Unix socket of its own, as in a real job) and the
real coordinator in the process holding rank 0 (that process holds node 0 only), with a
simulated collector (50 ms steps) and small synthetic summaries (~3.4 KB). Agents and
relays are driven from one thread per process (pt_agent_create_driven); a process holds
as many whole nodes as its open-file hard limit allows (the script raises nothing; each
process raises its soft limit to the hard one and says so if that is too low). Every
process stops by itself after --seconds, whatever happens here.

Two figures per size, both from the CLI's start:
  collected  the round's end: every summary on disk (the control plane: coordinator,
             relays, agents, the CLI's collection); no analysis
  report     trigger -> report.json written (--auto-analyze: a second round, its
             collection + pt_diagnose + the report), at the sizes in
             PT_BENCH_TREE_REPORT_SIZES (default: every size)
With each, the CPU seconds (user + sys) it cost, by process group: the fleet (every
fake_workers process), rank 0's process alone (the coordinator, within the fleet's
figure) and the CLI (with its peak RSS); the load average before and after; and the CPU
seconds the host stole from this VM meanwhile (/proc/stat). The machine is shared: wall
seconds mean little without the CPU seconds, the load and the steal beside them.
Before the round, the joined job's idle cost: rank 0's process and the fleet, in cores.
Sizes: PT_BENCH_TREE_SIZES (default 1024,10240,100000); the simulated agents' heartbeat
period: PT_BENCH_TREE_HEARTBEAT_MS (default: the product's for the world, 1 s up to 20k
workers, 5 s at 100k), and their sampling period PT_BENCH_TREE_POLL_MS (250; the product
samples every 100 ms, which 100k agents on 2 cores cannot). Round outputs go to
PT_BENCH_TREE_OUT (default: a temporary folder; a tmpfs shows the figures without the
disk's file-system costs) and are kept until the end (see measure). A round that loses
workers still prints its figures, with how many were profiled and a digest of what the
fleet logged (PT_BENCH_TREE_LOGS=DIR keeps the fleet's and the CLI's logs there). Needs
PT_CLI (scripts/bench.sh sets it) and fake_workers beside it."""
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
IDLE_S = float(os.environ.get("PT_BENCH_TREE_IDLE_S", "5"))


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
    """user + sys of these processes (every thread), so far"""
    total = 0
    for pid in pids:
        try:
            f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
            total += int(f[11]) + int(f[12])
        except OSError:
            pass
    return total / os.sysconf("SC_CLK_TCK")


def stolen_seconds():
    """CPU seconds the hypervisor gave other guests while this VM's CPUs wanted to run (the
    steal column of /proc/stat, all CPUs), so far: a round on a host busy elsewhere shows it
    here and nowhere else (0 where the kernel does not account it)"""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK") if fields[0] == "cpu" and len(fields) > 8 else 0.0
    except (OSError, ValueError):
        return 0.0


def measure(cli, fake, world, tmp, out_root, with_report):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("PERFTRACKER_"):
            del env[k]
    env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(master_port()), "WORLD_SIZE": str(world),
                "LOCAL_WORLD_SIZE": str(PER_NODE), "PERFTRACKER_KEY_DIR": os.path.join(tmp, "keys-%d" % world),
                "PERFTRACKER_HEARTBEAT_TIMEOUT_S": "120", "PERFTRACKER_SUMMARY_TIMEOUT_S": "300"})
    if os.environ.get("PT_BENCH_TREE_HEARTBEAT_MS"):  # else the product's default for this world
        env["PERFTRACKER_HEARTBEAT_MS"] = os.environ["PT_BENCH_TREE_HEARTBEAT_MS"]
    secret = os.path.join(tmp, "job-secret-%d" % world)
    procs, logs = [], []
    for first, count in spans(world):
        logs.append(open(os.path.join(tmp, "fleet-%d-%d.log" % (world, first)), "w+"))
        procs.append(subprocess.Popen([fake, "--world", str(world), "--first", str(first), "--count", str(count),
                                       "--step-ms", "50", "--seconds", "1500", "--job-secret-file", secret,
                                       "--tree", "--driven", "--ranks-per-node", str(PER_NODE),
                                       "--poll-ms", os.environ.get("PT_BENCH_TREE_POLL_MS", "250")],
                                      env=env, stdout=subprocess.PIPE, stderr=logs[-1], text=True))
    out = {"processes": len(procs)}
    try:
        t0 = time.perf_counter()
        for p in procs:
            if not p.stdout.readline().startswith("ready"):
                raise RuntimeError("fake workers did not start (world %d)" % world)
        out["join"] = time.perf_counter() - t0
        pids = [p.pid for p in procs]
        # What the joined job costs between rounds: rank 0's process (its coordinator
        # reads every heartbeat) and the fleet, in cores, over IDLE_S seconds.
        idle0, fleet0, t0 = cpu_seconds(pids[:1]), cpu_seconds(pids), time.perf_counter()
        time.sleep(IDLE_S)
        span = time.perf_counter() - t0
        out["idle_cores"] = {"rank0": (cpu_seconds(pids[:1]) - idle0) / span, "fleet": (cpu_seconds(pids) - fleet0) / span}
        for kind in ("collected", "report") if with_report else ("collected",):
            outdir = os.path.join(out_root, "out-%d-%s" % (world, kind))
            args = [cli, "--trigger-on", "--quiet", "--wait", "2", "--steps", "2", "--output-dir", outdir]
            if kind == "report":
                args.insert(2, "--auto-analyze")
            load0 = os.getloadavg()[0]
            fleet0, rank0_0, stolen0 = cpu_seconds(pids), cpu_seconds(pids[:1]), stolen_seconds()
            t0 = time.perf_counter()
            with open(os.path.join(tmp, "cli-%d-%s.err" % (world, kind)), "w+") as errf:
                cli_env = dict(env)
                if os.environ.get("PERFTRACKER_PHASES"):  # the CLI's analysis phases, into its log
                    cli_env["PERFTRACKER_PHASES"] = "1"
                cli_proc = subprocess.Popen(args, env=cli_env, stdout=subprocess.DEVNULL, stderr=errf)
                deadline = time.monotonic() + ROUND_TIMEOUT
                while True:  # wait4, for the CLI's own CPU seconds
                    pid, status, usage = os.wait4(cli_proc.pid, os.WNOHANG)
                    if pid:
                        break
                    if time.monotonic() > deadline:
                        cli_proc.kill()
                        raise RuntimeError("round of %d: the CLI ran past %d s" % (world, ROUND_TIMEOUT))
                    time.sleep(0.02)
                out[kind] = time.perf_counter() - t0
                cli_proc.returncode = os.waitstatus_to_exitcode(status)
                errf.seek(0)
                err_text = errf.read()
            out[kind + "_cpu"] = {"fleet": cpu_seconds(pids) - fleet0, "rank0": cpu_seconds(pids[:1]) - rank0_0,
                                  "cli": usage.ru_utime + usage.ru_stime, "cli_sys": usage.ru_stime,
                                  "cli_rss_mb": usage.ru_maxrss / 1024}
            out[kind + "_load"] = (load0, os.getloadavg()[0])
            out[kind + "_stolen"] = stolen_seconds() - stolen0
            if kind == "report" and not os.path.exists(os.path.join(outdir, "report.json")) and not any(
                    f == "report.json" for _, _, files in os.walk(outdir) for f in files):
                raise RuntimeError("round of %d wrote no report.json" % world)
            # A round that lost workers is a result too: how many, and what the
            # coordinator said about them, are printed with it.
            out[kind + "_rc"] = cli_proc.returncode
            profiled = [l for l in err_text.splitlines() if " workers profiled" in l]
            out[kind + "_profiled"] = profiled[-1].split("profiled")[0].split(": ", 1)[-1].strip() if profiled else ""
            if cli_proc.returncode not in (0, 3) and not profiled:
                raise RuntimeError("round of %d failed (%d): %s" % (world, cli_proc.returncode, err_text[-2000:]))
            # Kept until the run ends: ext4 skips inodes freed in the last 5 s (300 s while
            # their block is dirty) when it allocates, so 100k files deleted here made the
            # next round's 100k creates cost the CLI 4x the kernel time (~200 us a file, not
            # ~50), which no user's round pays.
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
        out["fleet_log"] = fleet_log_digest(logs)
        keep = os.environ.get("PT_BENCH_TREE_LOGS")
        if keep:  # the fleet's and the CLI's logs, for a round that lost workers
            os.makedirs(keep, exist_ok=True)
            for name in os.listdir(tmp):
                if name.endswith((".log", ".err")) and "-%d-" % world in name:
                    shutil.copy(os.path.join(tmp, name), keep)
    return out


def round_cpu(r, beyond_idle):
    """CPU seconds the collected round cost, fleet and CLI; beyond_idle: less what the joined
    fleet costs anyway for as long as the round took (its idle cores, measured before it):
    100k simulated agents sampling on two cores cost ~0.7 of them with or without a round,
    which a real job spreads over its 12,500 nodes, and which a longer round pays for longer"""
    c = r["collected_cpu"]
    idle = r["idle_cores"]["fleet"] * r["collected"] if beyond_idle else 0.0
    return c["fleet"] - idle + c["cli"]


def fleet_log_digest(logs):
    """What the fleet's processes logged, by kind of line (the rank or node numbers taken
    out), the most frequent first: a lost rank's cause is in there."""
    kinds = {}
    for f in logs:
        f.seek(0)
        for line in f:
            key = " ".join("N" if any(ch.isdigit() for ch in w) else w for w in line.split()[:14])
            kinds[key] = kinds.get(key, 0) + 1
        f.close()
    return sorted(kinds.items(), key=lambda kv: -kv[1])[:8]


def main():
    cli = os.environ.get("PT_CLI") or (sys.argv[1] if len(sys.argv) > 1 else "build/bin/perftracker")
    fake = os.path.join(os.path.dirname(os.path.abspath(cli)), "fake_workers")
    if not os.access(fake, os.X_OK):
        print("bench_tree: %s is not built" % fake)
        return 1
    sizes = [int(s) for s in os.environ.get("PT_BENCH_TREE_SIZES", "1024,10240,100000").split(",")]
    report_sizes = [int(s) for s in os.environ.get("PT_BENCH_TREE_REPORT_SIZES", ",".join(map(str, sizes))).split(",")
                    if s]
    tmp = tempfile.mkdtemp(prefix="pt-bench-tree-")
    # Where the rounds write (PT_BENCH_TREE_OUT: e.g. a tmpfs, to see the figures without
    # the disk's file-system costs; default beside the fleet's files).
    out_root = tempfile.mkdtemp(prefix="pt-bench-tree-out-", dir=os.environ.get("PT_BENCH_TREE_OUT") or tmp)
    results = {}
    try:
        for n in sizes:
            results[n] = measure(cli, fake, n, tmp, out_root, with_report=n in report_sizes)
            print("  measured %d: %s" % (n, results[n]), flush=True)
    finally:
        shutil.rmtree(out_root, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    base = sizes[0]

    def figure(r, kind):
        if kind not in r:
            return ""
        c, load = r[kind + "_cpu"], r[kind + "_load"]
        text = "  %s %6.2f s" % (kind, r[kind])
        if r.get(kind + "_profiled"):
            text += " (%s profiled)" % r[kind + "_profiled"]
        if r is not results[base] and kind in results[base]:
            text += " (%5.2fx)" % (r[kind] / results[base][kind])
        return text + (" [CPU: fleet %.1f s of which rank 0 %.1f s, CLI %.1f s (kernel %.1f s, peak RSS %.0f MB); "
                       "load %.1f->%.1f; stolen by the host %.1f s]") % (c["fleet"], c["rank0"], c["cli"], c["cli_sys"],
                                                                 c["cli_rss_mb"], load[0], load[1], r[kind + "_stolen"])

    print("round through the relay tree (nodes of %d; one run, median of 1):" % PER_NODE)
    for n in sizes:
        r = results[n]
        print("  %6d workers  %2d processes  %5d relays  join %.1f s  rank-0 peak RSS %6.1f MB" % (
            n, r["processes"], r.get("relays", -1), r["join"], r.get("rank0_rss_mb", -1)))
        print("          idle (joined, no round): rank 0's process %.1f%% of a core, the fleet %.2f cores" % (
            100 * r["idle_cores"]["rank0"], r["idle_cores"]["fleet"]))
        print("        " + figure(r, "collected") + ("\n        " + figure(r, "report") if "report" in r else ""))
        for line, count in r.get("fleet_log", []):
            print("        fleet log %6d x  %s" % (count, line))
    if 10240 in results and 100000 in results:
        a, b = results[10240], results[100000]
        ratio = lambda k: " %s %.2fx" % (k, b[k] / a[k]) if k in a and k in b else ""
        print("  100k/10k:%s%s (goal <= 11); CPU of the collected round %.2fx, %.2fx beyond the joined fleet's "
              "idle cost" % (ratio("collected"), ratio("report"), round_cpu(b, False) / max(round_cpu(a, False), 1e-9),
                             round_cpu(b, True) / max(round_cpu(a, True), 1e-9)))
        print("  100k: collected in %.1f s%s (goal <= 30 s); rank-0 peak RSS %.1f MB (goal <= 256 MB)" % (
            b["collected"], ", report in %.1f s" % b["report"] if "report" in b else "", b.get("rank0_rss_mb", -1)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
