#!/usr/bin/env python3
"""Resource faults for `perftracker analyze`: nothing is lost, nothing half-written.

usage: resource_faults.py WORKDIR [--group plain|mount] [CASE...]   (PT_CLI: the
perftracker binary, PT_MAKE_SEEDS: fuzz/make_seeds for the native writer)

Cases (each prints one line; a case that needs what the machine lacks -- mount, or
PT_MAKE_SEEDS -- SKIPs and says why, the others still run, and the run then exits 77 so
that ctest shows it skipped). --group mount runs the cases that need mount, --group plain
the others; ctest registers the two groups as two tests, so a machine without mount
privileges skips only the first.
  out_dir_missing          -o a/b/c that does not exist: created, report written (exit 0)
  out_dir_under_a_file     -o FILE/sub: exit 1 with one line naming the path, no crash
  out_dir_read_only        -o on a tmpfs mounted read-only (needs mount): exit 1, one line
  disk_full_tmpfs          -o on a 64 KB tmpfs holding yesterday's report (needs mount):
                           exit 1 naming the problem; the old report.json intact, no temp
                           files left behind
  disk_full_fsize          the same with RLIMIT_FSIZE (writes fail with EFBIG, SIGXFSZ
                           ignored): works without privileges
  trace_larger_than_memory a 400 MB trace analysed under a 320 MB address-space limit
                           (RLIMIT_AS): streaming holds, the report is complete
  gzip_bomb_under_as_limit an 8 MB gzip of 50 M valid events among three good workers,
                           -j 2 under a 2 GB address-space limit: the bomb needs more than
                           its share of memory and is refused by name (exit 3), the good
                           workers are analysed (it used to end everything with exit 70)
  allocation_failure_is_one_files_error  the same bomb with the share forced far above the
                           limit (PERFTRACKER_ANALYZE_MEMORY_MB): its allocations fail, and
                           that is its own error, the others are analysed
  many_function_names      a valid summary naming 100 000 functions (350 KB of file) among
                           three good summaries, under PERFTRACKER_ANALYZE_MEMORY_MB=256: it is
                           analysed within the budget (peak RSS; each name once cost 30 KB)
  million_function_names   the same naming 2^20, the format's cap: refused by name, its share
                           being too small for it, the others analysed, within the budget
  many_files_of_names      12 such summaries of 100 000 names each (all different), each within
                           its share alone: what the first keep (~45 MB each) is taken from
                           the later ones' shares, so those are refused by name and the total
                           stays within the 256 MB budget (it used to reach 23 GB)
  summary_archive_bomb     a tar of three good summaries and 13 of some KB whose string tables
                           decode to 150 MB each, -j 16 under 1024 MB: every bomb refused by
                           name, the good ones analysed, peak RSS within the budget
  zstd_window_beyond_share a 4 KB .json.zst whose frame asks for a 128 MiB window among three
                           good traces, -j 16 under 160 MB: refused by name before its window
                           is allocated, the others analysed, within the budget
  zstd_wrapped_summary     a .ptsum that is a 4 KB zstd file of a summary header and 200 MiB,
                           under 160 MB: read whole as a summary is, it is refused by name as
                           its buffer passes its share, within the budget
  no_thread_can_start      -j 2 under a 20 MB address-space limit, where no worker thread
                           gets its 8 MB stack: the files are read on the main thread (it
                           used to wait forever for threads that never started)
  growing_file             a trace that a background writer keeps appending to: analyze
                           reads it only to its size at open and refuses it as still being
                           written, instead of following it until the disk is full
  writer_killed_kineto     `perftracker synth --size-mb 300` SIGKILLed mid-file: nothing under
                           the final name; the temporary JSON is refused as truncated, the
                           other workers analysed
  writer_killed_native     the collector's raw-trace writer SIGKILLed mid-file: the
                           .partial file is refused as truncated, not half-read
"""
import glob
import gzip
import io
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tarfile
import time

import summary_bombs

CLI = os.environ.get("PT_CLI", "perftracker")
MAKE_SEEDS = os.environ.get("PT_MAKE_SEEDS", "")
CASES = {}
NEEDS_MOUNT = set()
SKIPPED = 77


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def needs_mount(fn):
    NEEDS_MOUNT.add(fn.__name__)
    return fn


class Skip(Exception):
    pass


def analyze(args, limits=None, timeout=300, env=None):
    """Runs analyze; limits: {resource.RLIMIT_*: bytes} set in the child; env: variables."""
    def preexec():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a full "disk" is an error, not a kill
        for res, value in (limits or {}).items():
            resource.setrlimit(res, (value, value))
    proc = subprocess.run([CLI, "analyze", "-q", "--force", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          timeout=timeout, preexec_fn=preexec, env={**os.environ, **(env or {})})
    return proc.returncode, proc.stderr.decode("utf-8", "replace")


TIME = "/usr/bin/time"  # GNU time: the peak RSS of the one process it starts


def analyze_measured(args, budget_mb, timeout=300):
    """analyze under PERFTRACKER_ANALYZE_MEMORY_MB=budget_mb: (exit status, stderr, peak RSS
    in MiB). Measured by GNU time, which forks analyze from its own small process: a child
    forked from this Python (which holds the bombs it built) starts with Python's peak."""
    if not os.path.exists(TIME):
        raise Skip(f"no {TIME} to measure peak RSS with")
    proc = subprocess.run([TIME, "-f", "peak-rss-kb %M", CLI, "analyze", "-q", "--force", *args],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout,
                          env={**os.environ, "PERFTRACKER_ANALYZE_MEMORY_MB": str(budget_mb)})
    err = proc.stderr.decode("utf-8", "replace")
    lines = err.rstrip("\n").split("\n")
    peak = int(lines[-1].split()[-1]) >> 10 if lines[-1].startswith("peak-rss-kb ") else 1 << 30
    return proc.returncode, "\n".join(lines[:-1]), peak


def expect(cond, what, problems):
    if not cond:
        problems.append(what)


def no_crash(rc, err, problems):
    expect(rc is not None and rc >= 0, f"killed by signal {-rc if rc else '?'}", problems)
    for marker in ("AddressSanitizer", "runtime error:", "Segmentation", "core dumped"):
        expect(marker not in err, f"stderr reports {marker!r}", problems)


def good_job(work):
    job = os.path.join(work, "good")
    if not os.path.exists(os.path.join(job, "expected.json")):
        shutil.rmtree(job, ignore_errors=True)
        subprocess.run([CLI, "synth", "-n", "4", "--steps", "2", "--layers", "2", "-o", job], check=True,
                       stdout=subprocess.DEVNULL)
    return job


def job_with(work, name, bad_path, bad_name):
    """A copy of ranks 0-2 of the good job plus one file in rank 3's place."""
    job = os.path.join(work, name)
    shutil.rmtree(job, ignore_errors=True)
    os.makedirs(job)
    good = good_job(work)
    for f in ("node0_0_10000.json", "node0_1_10001.json", "node0_2_10002.json"):
        shutil.copy(os.path.join(good, f), job)
    shutil.copy(bad_path, os.path.join(job, bad_name))
    return job


def try_mount(target, options):
    os.makedirs(target, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", target], stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise Skip(f"cannot mount a tmpfs here ({r.stderr.decode().strip() or 'not permitted'})")


def umount(target):
    subprocess.run(["umount", target], stderr=subprocess.DEVNULL)


# ---------------------------------------------------------------------------------- output

@case
def out_dir_missing(work, problems):
    out = os.path.join(work, "missing", "a", "b", "c")
    shutil.rmtree(os.path.join(work, "missing"), ignore_errors=True)
    rc, err = analyze(["-o", out, good_job(work)])
    no_crash(rc, err, problems)
    expect(rc == 0, f"exit {rc}, expected 0: {err[-300:]}", problems)
    expect(os.path.isfile(os.path.join(out, "report.json")), "report.json not written", problems)
    expect(os.path.isfile(os.path.join(out, "PerfDisplay", "index.html")), "PerfDisplay not written", problems)
    return "created a/b/c"


@case
def out_dir_under_a_file(work, problems):
    blocker = os.path.join(work, "a-file")
    with open(blocker, "w") as f:
        f.write("not a directory\n")
    out = os.path.join(blocker, "sub")
    rc, err = analyze(["-o", out, good_job(work)])
    no_crash(rc, err, problems)
    expect(rc == 1, f"exit {rc}, expected 1", problems)
    lines = [line for line in err.splitlines() if blocker in line]
    expect(lines, f"no stderr line names {blocker}: {err[-300:]}", problems)
    return lines[0] if lines else ""


@case
@needs_mount
def out_dir_read_only(work, problems):
    target = os.path.join(work, "ro")
    try_mount(target, "ro,size=1m")
    try:
        out = os.path.join(target, "out")
        rc, err = analyze(["-o", out, good_job(work)])
        no_crash(rc, err, problems)
        expect(rc == 1, f"exit {rc}, expected 1", problems)
        lines = [line for line in err.splitlines() if "Read-only" in line and target in line]
        expect(lines, f"no stderr line says read-only and names the path: {err[-300:]}", problems)
        return lines[0] if lines else ""
    finally:
        umount(target)


def check_disk_full(out, rc, err, problems, old):
    no_crash(rc, err, problems)
    expect(rc == 1, f"exit {rc}, expected 1 (the report could not be written)", problems)
    lines = [line for line in err.splitlines() if ("space" in line or "too large" in line) and out in line]
    expect(lines, f"no stderr line names the path and the full disk: {err[-400:]}", problems)
    with open(os.path.join(out, "report.json"), "rb") as f:
        now = f.read()
    expect(now == old, "yesterday's report.json was damaged by a failed write", problems)
    leftovers = [os.path.join(d, f) for d, _, files in os.walk(out) for f in files if ".tmp" in f]
    expect(not leftovers, f"temporary files left behind: {leftovers[:5]}", problems)
    return lines[0] if lines else ""


OLD_REPORT = b'{"report_version": 1, "note": "yesterday\'s report, must survive"}\n'


@case
@needs_mount
def disk_full_tmpfs(work, problems):
    target = os.path.join(work, "full")
    try_mount(target, "size=64k")
    try:
        out = os.path.join(target, "out")
        os.makedirs(out)
        with open(os.path.join(out, "report.json"), "wb") as f:
            f.write(OLD_REPORT)
        with open(os.path.join(target, "filler"), "wb") as f:  # leave ~8 KB free
            try:
                f.write(b"\0" * (56 << 10))
            except OSError:
                pass
        rc, err = analyze(["-o", out, good_job(work)])
        return check_disk_full(out, rc, err, problems, OLD_REPORT)
    finally:
        umount(target)


@case
def disk_full_fsize(work, problems):
    out = os.path.join(work, "fsize-out")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    with open(os.path.join(out, "report.json"), "wb") as f:
        f.write(OLD_REPORT)
    rc, err = analyze(["-o", out, good_job(work)], limits={resource.RLIMIT_FSIZE: 16 << 10})
    return check_disk_full(out, rc, err, problems, OLD_REPORT)


# ---------------------------------------------------------------------------------- memory

@case
def trace_larger_than_memory(work, problems):
    big = os.path.join(work, "big")
    trace = os.path.join(big, "node0_0_10000.json")
    if not os.path.exists(trace) or os.path.getsize(trace) < (400 << 20):
        shutil.rmtree(big, ignore_errors=True)
        subprocess.run([CLI, "synth", "--size-mb", "400", "-o", big], check=True, stdout=subprocess.DEVNULL)
        if os.path.exists(os.path.join(big, "expected.json")):
            os.unlink(os.path.join(big, "expected.json"))
    size_mb = os.path.getsize(trace) >> 20
    limit_mb = 320
    out = os.path.join(work, "big-out")
    start = time.monotonic()
    rc, err = analyze(["-j", "1", "-o", out, big], limits={resource.RLIMIT_AS: limit_mb << 20})
    seconds = time.monotonic() - start
    no_crash(rc, err, problems)
    expect(rc in (0, 3), f"exit {rc} under a {limit_mb} MB address-space limit: {err[-400:]}", problems)
    expect("out of memory" not in err, "ran out of memory: the trace was not streamed", problems)
    if rc in (0, 3):
        with open(os.path.join(out, "report.json")) as f:
            report = json.load(f)
        worker = next((w for w in report["workers"] if w["name"] == "node0_0_10000.json"), None)
        expect(worker and worker["status"] == "normal" and len(worker["steps"]) > 100,
               f"the big worker was not analysed whole: {str(worker)[:300]}", problems)
    return f"{size_mb} MB trace under RLIMIT_AS {limit_mb} MB: exit {rc} in {seconds:.1f} s"


def write_event_bomb(path, millions):
    """A gzip of the good rank 3's head, `millions` M tiny valid kernels and its tail: one
    compressed member of a million kernels, repeated (a multi-member gzip), so building it
    takes no time; 8 MB for 50 M events."""
    with open(os.path.join(good_job(os.path.dirname(os.path.dirname(path))), "node0_3_10003.json"), "rb") as f:
        data = f.read()
    head, tail = data.split(b'"traceEvents":[', 1)
    ts = min(ev["ts"] for ev in json.loads(data)["traceEvents"] if str(ev.get("name", "")).startswith("ProfilerStep#"))
    member = gzip.compress(b'{"ph":"X","cat":"kernel","name":"k","ts":%d,"dur":1},' % int(ts + 1) * 1000000, 9)
    with open(path, "wb") as f:
        f.write(gzip.compress(head + b'"traceEvents":['))
        for _ in range(millions):
            f.write(member)
        f.write(gzip.compress(tail))


def check_one_refused(work, out, rc, err, bad_name, why, problems):
    """Exit 3, the bad file named on stderr with `why`, marked error; the others normal."""
    no_crash(rc, err, problems)
    expect(rc == 3, f"exit {rc}, expected 3 (report written, one input refused): {err[-400:]}", problems)
    lines = [line for line in err.splitlines() if bad_name in line and re.search(why, line)]
    expect(lines, f"no stderr line names {bad_name} with /{why}/: {err[-400:]}", problems)
    if rc in (0, 3):
        with open(os.path.join(out, "report.json")) as f:
            report = json.load(f)
        statuses = {w["name"]: w["status"] for w in report["workers"]}
        expect(statuses.get(bad_name) == "error", f"{bad_name}: status {statuses.get(bad_name)}", problems)
        for good in ("node0_0_10000.json", "node0_1_10001.json", "node0_2_10002.json"):
            expect(statuses.get(good) == "normal", f"good worker {good}: {statuses.get(good)}", problems)
    return lines[0] if lines else ""


BOMB_LIMIT = 2 << 30


def bomb_job(work):
    job = job_with(work, "bomb-job", os.path.join(good_job(work), "node0_3_10003.json"), "node0_3_10003.json")
    os.unlink(os.path.join(job, "node0_3_10003.json"))
    write_event_bomb(os.path.join(job, "node0_3_10003.json.gz"), 50)
    return job


@case
def gzip_bomb_under_as_limit(work, problems):
    out = os.path.join(work, "bomb-out")
    rc, err = analyze(["-j", "2", "-o", out, bomb_job(work)], limits={resource.RLIMIT_AS: BOMB_LIMIT})
    return check_one_refused(work, out, rc, err, "node0_3_10003.json.gz", r"needs more memory than its share",
                             problems)


@case
def allocation_failure_is_one_files_error(work, problems):
    """-j 1: the good files are read before the bomb, so nothing but the bomb can be the
    one whose allocation fails."""
    out = os.path.join(work, "bomb-oom-out")
    rc, err = analyze(["-j", "1", "-o", out, bomb_job(work)], limits={resource.RLIMIT_AS: BOMB_LIMIT},
                      env={"PERFTRACKER_ANALYZE_MEMORY_MB": "1000000"})
    expect("perftracker: out of memory" not in err, "the process ran out of memory, not the one file", problems)
    return check_one_refused(work, out, rc, err, "node0_3_10003.json.gz", r"out of memory while reading it",
                             problems)


# ------------------------------------------------------------------ memory shares of decoding

GOOD_STEMS = ("node0_0_10000", "node0_1_10001", "node0_2_10002")


def good_summaries(work):
    """Ranks 0-2 of the good job as summaries (made anew: a summary cached by an older
    build may be in an older format)."""
    folder = os.path.join(work, "good-summaries")
    os.makedirs(folder, exist_ok=True)
    good = good_job(work)
    for stem in GOOD_STEMS:
        subprocess.run([CLI, "summarize", os.path.join(good, stem + ".json"), "-o",
                        os.path.join(folder, stem + ".ptsum")], check=True, stdout=subprocess.DEVNULL)
    return [os.path.join(folder, stem + ".ptsum") for stem in GOOD_STEMS]


def summary_job(work, name, bad_bytes):
    """The three good summaries and rank 3's summary as bad_bytes."""
    job = os.path.join(work, name)
    shutil.rmtree(job, ignore_errors=True)
    os.makedirs(job)
    for path in good_summaries(work):
        shutil.copy(path, job)
    with open(os.path.join(job, "node0_3_10003.ptsum"), "wb") as f:
        f.write(bad_bytes)
    return job


def worker_statuses(out):
    with open(os.path.join(out, "report.json")) as f:
        return {w["name"]: w["status"] for w in json.load(f)["workers"]}


def within_budget(peak_mb, budget_mb, problems):
    expect(peak_mb <= budget_mb, f"peak RSS {peak_mb} MiB, over the {budget_mb} MiB budget", problems)


SHARE_REFUSAL = r"needs more memory than its share"


@case
def many_function_names(work, problems):
    budget = 256
    job = summary_job(work, "names-100k-job", summary_bombs.many_names(100000, MAKE_SEEDS, 3, 4, "node0_3_10003"))
    out = os.path.join(work, "names-100k-out")
    rc, err, peak = analyze_measured(["-j", "2", "-o", out, job], budget)
    no_crash(rc, err, problems)
    expect(rc == 0, f"exit {rc}, expected 0 (every worker analysed): {err[-400:]}", problems)
    within_budget(peak, budget, problems)
    if rc in (0, 3):
        got = worker_statuses(out)
        expect(len(got) == 4 and all(v not in ("error", "missing") for v in got.values()), f"workers: {got}",
               problems)
    size_kb = os.path.getsize(os.path.join(job, "node0_3_10003.ptsum")) >> 10
    return f"{size_kb} KB summary of 100000 names: exit {rc}, peak {peak} MiB of {budget}"


@case
def million_function_names(work, problems):
    budget = 256
    job = summary_job(work, "names-1m-job", summary_bombs.many_names(1 << 20, MAKE_SEEDS, 3, 4, "node0_3_10003"))
    out = os.path.join(work, "names-1m-out")
    rc, err, peak = analyze_measured(["-j", "2", "-o", out, job], budget)
    within_budget(peak, budget, problems)
    line = check_one_refused(work, out, rc, err, "node0_3_10003.ptsum", SHARE_REFUSAL, problems)
    return f"peak {peak} MiB of {budget}: {line[:110]}"


@case
def many_files_of_names(work, problems):
    budget, bombs = 256, range(4, 16)
    job = os.path.join(work, "names-many-job")
    shutil.rmtree(job, ignore_errors=True)
    os.makedirs(job)
    for path in good_summaries(work):
        shutil.copy(path, job)
    for rank in bombs:
        stem = f"node0_{rank}_{10000 + rank}"
        with open(os.path.join(job, stem + ".ptsum"), "wb") as f:
            f.write(summary_bombs.many_names(100000, MAKE_SEEDS, rank, 16, stem, prefix=f"r{rank}."))
    out = os.path.join(work, "names-many-out")
    rc, err, peak = analyze_measured(["-j", "2", "-o", out, job], budget)
    no_crash(rc, err, problems)
    expect(rc == 3, f"exit {rc}, expected 3 (report written, inputs refused): {err[-400:]}", problems)
    within_budget(peak, budget, problems)
    refused = [l for l in err.splitlines() if re.search(SHARE_REFUSAL, l)]
    expect(refused, f"no file refused for its share: {err[-400:]}", problems)
    if rc in (0, 3):
        got = worker_statuses(out)
        for stem in GOOD_STEMS:
            expect(got.get(stem + ".json") == "normal", f"good worker {stem}: {got.get(stem + '.json')}", problems)
        for rank in bombs:  # each analysed, or refused and named
            stem = f"node0_{rank}_{10000 + rank}"
            named = any(stem + ".ptsum" in l for l in refused)
            expect(named or got.get(stem) not in (None, "error", "missing"),
                   f"{stem}: neither analysed ({got.get(stem)}) nor refused for its share", problems)
    return f"{len(refused)} of {len(bombs)} refused: exit {rc}, peak {peak} MiB of {budget}"


@case
def summary_archive_bomb(work, problems):
    budget, bombs = 1024, range(4, 17)
    job = os.path.join(work, "archive-bomb-job")
    shutil.rmtree(job, ignore_errors=True)
    os.makedirs(job)
    with tarfile.open(os.path.join(job, "summaries.tar"), "w", format=tarfile.USTAR_FORMAT) as t:
        for path in good_summaries(work):
            t.add(path, arcname=os.path.basename(path))
        for rank in bombs:
            stem = f"node0_{rank}_{10000 + rank}"
            blob = summary_bombs.string_bomb(150, 1 << 20, rank, 17, stem)
            info = tarfile.TarInfo(stem + ".ptsum")
            info.size = len(blob)
            t.addfile(info, io.BytesIO(blob))
    out = os.path.join(work, "archive-bomb-out")
    rc, err, peak = analyze_measured(["-j", "16", "-o", out, job], budget)
    no_crash(rc, err, problems)
    expect(rc == 3, f"exit {rc}, expected 3 (report written, inputs refused): {err[-400:]}", problems)
    within_budget(peak, budget, problems)
    for rank in bombs:
        member = f"summaries.tar/node0_{rank}_{10000 + rank}.ptsum"
        expect(any(member in l and re.search(SHARE_REFUSAL, l) for l in err.splitlines()),
               f"no stderr line refuses {member} for its share: {err[-400:]}", problems)
    if rc in (0, 3):
        got = worker_statuses(out)
        for stem in GOOD_STEMS:  # a summary's worker keeps its trace's name
            expect(got.get(stem + ".json") == "normal", f"good worker {stem}: {got.get(stem + '.json')}", problems)
    size_kb = os.path.getsize(os.path.join(job, "summaries.tar")) >> 10
    return f"{size_kb} KB archive, {len(bombs)} bombs of 150 MB: exit {rc}, peak {peak} MiB of {budget}"


@case
def zstd_window_beyond_share(work, problems):
    budget = 160
    frame = summary_bombs.zstd_frame([b'{"traceEvents":[', (ord(" "), 200 << 20), b"]}"], window_log=27)
    bomb = os.path.join(work, "window-bomb.json.zst")
    with open(bomb, "wb") as f:
        f.write(frame)
    job = job_with(work, "window-bomb-job", bomb, "node0_3_10003.json.zst")
    out = os.path.join(work, "window-bomb-out")
    rc, err, peak = analyze_measured(["-j", "16", "-o", out, job], budget)
    within_budget(peak, budget, problems)
    line = check_one_refused(work, out, rc, err, "node0_3_10003.json.zst", SHARE_REFUSAL + r".*zstd.*window",
                             problems)
    return f"{len(frame)} bytes asking for 128 MiB: peak {peak} MiB of {budget}: {line[:80]}"


@case
def zstd_wrapped_summary(work, problems):
    budget = 160
    head = summary_bombs.summary_file(0, b"")  # the magic a summary is known by, read after unzstd
    job = summary_job(work, "wrapped-job", summary_bombs.zstd_frame([head, (0, 200 << 20)], window_log=20))
    out = os.path.join(work, "wrapped-out")
    rc, err, peak = analyze_measured(["-j", "2", "-o", out, job], budget)
    within_budget(peak, budget, problems)
    no_crash(rc, err, problems)
    expect(rc == 3, f"exit {rc}, expected 3: {err[-400:]}", problems)
    lines = [l for l in err.splitlines() if "node0_3_10003.ptsum" in l and re.search(SHARE_REFUSAL, l)]
    expect(lines, f"no stderr line refuses node0_3_10003.ptsum for its share: {err[-400:]}", problems)
    return f"peak {peak} MiB of {budget}: {lines[0][-150:] if lines else ''}"


@case
def no_thread_can_start(work, problems):
    good = good_job(work)
    out = os.path.join(work, "no-thread-out")
    inputs = [os.path.join(good, f) for f in ("node0_0_10000.json", "node0_1_10001.json")]
    try:
        rc, err = analyze(["-j", "2", "-o", out, *inputs], limits={resource.RLIMIT_AS: 20 << 20}, timeout=120)
    except subprocess.TimeoutExpired:
        problems.append("analyze still waiting after 120 s for worker threads that could not start")
        return ""
    no_crash(rc, err, problems)
    expect(rc == 0, f"exit {rc}, expected 0: {err[-400:]}", problems)
    return f"exit {rc}"


# A writer that keeps a trace growing: 64 MB at once (so that reading what was there at
# open takes a while), then 1 MB every millisecond or so, until it is killed or reaches
# 768 MB (a bound on the disk this test may take, should analyze follow the file).
GROWING_WRITER = r"""
import sys, time
path, head = sys.argv[1], sys.argv[2].encode()
chunk = b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1},' * 15000
with open(path, "wb") as f:
    f.write(head)
    for _ in range(64):
        f.write(chunk)
    f.flush()
    print("ready", flush=True)
    written = 64
    while written < 768:
        f.write(chunk)
        f.flush()
        written += 1
        time.sleep(0.001)
"""


@case
def growing_file(work, problems):
    job = job_with(work, "growing-job", os.path.join(good_job(work), "node0_3_10003.json"), "node0_3_10003.json")
    path = os.path.join(job, "node0_3_10003.json")
    writer = subprocess.Popen([sys.executable, "-c", GROWING_WRITER, path, '{"traceEvents":['],
                              stdout=subprocess.PIPE, text=True)
    try:
        expect(writer.stdout.readline().strip() == "ready", "the writer did not start", problems)
        out = os.path.join(work, "growing-out")
        rc, err = analyze(["-j", "2", "-o", out, job])
        still_writing = writer.poll() is None
    finally:
        writer.kill()
        writer.wait()
    size_mb = os.path.getsize(path) >> 20
    os.unlink(path)  # the disk back
    expect(still_writing, "the writer had stopped before analyze did: nothing was tested", problems)
    line = check_one_refused(work, out, rc, err, "node0_3_10003.json", r"grew while it was read", problems)
    return f"writer at {size_mb} MB when analyze ended: {line}"


# ---------------------------------------------------------------------------------- writers killed

def kill_when_bigger(cmd, path, min_bytes, timeout=60):
    """SIGKILLs cmd once path (or, for a glob pattern, the one file it matches) holds
    min_bytes; returns that file's path and size."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    found = None
    try:
        while time.monotonic() < deadline:
            matches = glob.glob(path) if "*" in path else [path]
            found = next((m for m in matches if os.path.exists(m) and os.path.getsize(m) >= min_bytes), None)
            if found:
                break
            if proc.poll() is not None:
                raise AssertionError(f"{cmd[0]} finished before it could be killed")
            time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    if not found:
        raise AssertionError(f"{path} never reached {min_bytes} bytes")
    return found, os.path.getsize(found)


def check_refused_partial(work, name, partial, bad_name, problems):
    job = job_with(work, name, partial, bad_name)
    rc, err = analyze(["-o", os.path.join(work, name + "-out"), job])
    no_crash(rc, err, problems)
    expect(rc == 3, f"exit {rc}, expected 3", problems)
    lines = [line for line in err.splitlines() if bad_name in line and "truncated" in line]
    expect(lines, f"no stderr line calls {bad_name} truncated: {err[-400:]}", problems)
    with open(os.path.join(work, name + "-out", "report.json")) as f:
        report = json.load(f)
    statuses = {w["name"]: w["status"] for w in report["workers"]}
    expect(statuses.get(bad_name) == "error", f"the partial file was half-read: {statuses.get(bad_name)}", problems)
    for good in ("node0_0_10000.json", "node0_1_10001.json", "node0_2_10002.json"):
        expect(statuses.get(good) == "normal", f"good worker {good}: {statuses.get(good)}", problems)
    return lines[0] if lines else ""


@case
def writer_killed_kineto(work, problems):
    out = os.path.join(work, "killed-synth")
    shutil.rmtree(out, ignore_errors=True)
    final = os.path.join(out, "node0_0_10000.json")
    # The writer streams into a temporary dotfile and renames it at the end (util/outdir.h).
    partial, size = kill_when_bigger([CLI, "synth", "--size-mb", "300", "-o", out],
                                     os.path.join(out, ".node0_0_10000.json.tmp-*"), 20 << 20)
    expect(not os.path.exists(final), "a killed writer left a file under the final name", problems)
    line = check_refused_partial(work, "killed-kineto-job", partial, "node0_3_10003.json", problems)
    return f"killed at {size >> 20} MB: {line}"


@case
def writer_killed_native(work, problems):
    if not MAKE_SEEDS:
        raise Skip("PT_MAKE_SEEDS not set")
    final = os.path.join(work, "killed.ptrace")
    partial = final + ".partial"
    for p in (final, partial):
        if os.path.exists(p):
            os.unlink(p)
    _, size = kill_when_bigger([MAKE_SEEDS, "native", final, "--workers", "4", "--steps", "400", "--pace-us", "20"],
                            partial, 100 << 10)
    expect(not os.path.exists(final), "a killed writer left a file under the final name", problems)
    line = check_refused_partial(work, "killed-native-job", partial, "node0_3_10003.ptrace", problems)
    rc, err = analyze(["-o", os.path.join(work, "partial-out"), partial])  # named explicitly, alone
    expect(rc == 1 and "truncated" in err, f"the .partial file alone: exit {rc}: {err[-300:]}", problems)
    return f"killed at {size >> 10} KB: {line}"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    work = os.path.abspath(sys.argv[1])
    os.makedirs(work, exist_ok=True)
    args = sys.argv[2:]
    group = None
    if args[:1] == ["--group"] and len(args) > 1 and args[1] in ("plain", "mount"):
        group, args = args[1], args[2:]
    selected = args or [name for name in CASES
                        if group is None or (name in NEEDS_MOUNT) == (group == "mount")]
    failures, skipped = [], []
    for name in selected:
        problems = []
        try:
            detail = CASES[name](work, problems)
        except Skip as why:
            print(f"SKIP {name}: {why}")
            skipped.append(f"{name} ({why})")
            continue
        except (AssertionError, subprocess.SubprocessError, OSError) as exc:
            problems.append(f"{type(exc).__name__}: {exc}")
            detail = ""
        print(f"{'ok  ' if not problems else 'FAIL'} {name:26s} | {str(detail)[:160]}")
        failures += [f"{name}: {p}" for p in problems]
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        sys.exit(1)
    if skipped:
        print(f"SKIP: {len(skipped)} of {len(selected)} cases could not run here: {'; '.join(skipped)} "
              f"(the other {len(selected) - len(skipped)} passed)")
        sys.exit(SKIPPED)
    print(f"PASS: {len(selected)} resource-fault cases")


if __name__ == "__main__":
    main()
