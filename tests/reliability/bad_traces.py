#!/usr/bin/env python3
"""The bad-trace corpus: generated broken, hostile and odd worker files, each mixed into a
job of good synthetic workers and analysed.

usage: bad_traces.py WORKDIR [--max-rss-mb N] [--max-seconds S] [--list] [KIND...]
  (PT_CLI: the perftracker binary; PT_MAKE_SEEDS: fuzz/make_seeds, for native traces and
   zstd frames.)

Every kind is built by a function below from a good synthetic job (`perftracker synth`,
4 ranks): nothing is a checked-in file. For each kind the test runs
`perftracker analyze JOB` with a timeout and checks:
  - no crash and no sanitizer report (stderr), no hang (timeout), exit status as the
    README documents (0 every input read, ranks not given only noted; 3 some unreadable);
  - report.json is written, is strict JSON (no NaN), and analyses every GOOD worker
    (status normal/slow/hang, never error/missing);
  - the bad file is named, with its problem, in one line on stderr and in "warnings"
    (kinds that are legal but odd -- events out of order, a symlink -- need no warning);
  - with --max-rss-mb / --max-seconds (the release-tree run): peak RSS and wall time of
    the analysis stay under the bounds (the 100 MB string must not need GBs).
It prints one line per kind and PASS with the count, or FAIL with every broken check.
Kinds that need PT_MAKE_SEEDS skip without it; the run then exits 77 (ctest: skipped),
naming them, once every other kind has passed.
"""
import argparse
import gzip
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

CLI = os.environ.get("PT_CLI", "perftracker")
MAKE_SEEDS = os.environ.get("PT_MAKE_SEEDS", "")
BAD = "node0_3_10003"           # the slot the bad file takes: rank 3 of 4
GOOD = ["node0_0_10000.json", "node0_1_10001.json", "node0_2_10002.json"]
TIMEOUT_S = 180

KINDS = []


def kind(name, outcome, warning=None, exit_codes=(3,), loud=False, env=None, check=None):
    """outcome: 'refused' (the file is skipped and named), 'warned' (read, and a warning
    names it), 'accepted' (legal input: read, no warning needed). warning: a regex the
    line naming the bad file must match (case-insensitive). loud: run without -q, so the
    report's sections are printed too, and check that no control character from the
    inputs reaches the terminal. env: variables for that analysis. check: a function
    (report, raw report bytes) returning a list of problems, for what the kind must
    leave in the report besides the common checks."""
    def register(build):
        KINDS.append({"name": name, "build": build, "outcome": outcome, "warning": warning,
                      "exit": set(exit_codes), "loud": loud, "env": env or {}, "check": check})
        return build
    return register


class Ctx:
    """The good job and helpers every builder uses."""

    def __init__(self, work):
        self.work = work
        self.good_dir = os.path.join(work, "good")
        self.rng = random.Random(6)
        if not os.path.exists(os.path.join(self.good_dir, "expected.json")):
            shutil.rmtree(self.good_dir, ignore_errors=True)
            subprocess.run([CLI, "synth", "-n", "4", "--steps", "2", "--layers", "2", "-o", self.good_dir],
                           check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(self.good_dir, BAD + ".json"), "rb") as f:
            self.rank3_bytes = f.read()
        self.rank3 = json.loads(self.rank3_bytes)

    def doc(self):
        return json.loads(self.rank3_bytes)

    def events(self, doc):
        return doc["traceEvents"]


def write(path, data):
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(path, mode) as f:
        f.write(data)
    return path


def dump(doc):
    return json.dumps(doc, separators=(",", ":"))


def make_seeds(*args):
    if not MAKE_SEEDS:
        raise SkipKind("PT_MAKE_SEEDS not set")
    subprocess.run([MAKE_SEEDS, *args], check=True, stdout=subprocess.DEVNULL)


class SkipKind(Exception):
    pass


# ----------------------------------------------------------------------------- not a trace

@kind("truncated_random_offsets", "refused", r"truncat|ends (before|inside)|malformed")
def _(job, ctx):
    """The same trace cut at five random byte offsets (five files: each refused)."""
    out = []
    for i in range(5):
        cut = ctx.rng.randrange(1, len(ctx.rank3_bytes) - 1)
        out.append(write(os.path.join(job, f"node0_{3 + i}_{10003 + i}.json"), ctx.rank3_bytes[:cut]))
    return out


@kind("gzip_truncated", "refused", r"gzip stream is truncated")
def _(job, ctx):
    data = gzip.compress(ctx.rank3_bytes)
    return [write(os.path.join(job, BAD + ".json.gz"), data[: len(data) // 2])]


@kind("gzip_corrupt", "refused", r"gzip data is corrupt|truncated")
def _(job, ctx):
    data = bytearray(gzip.compress(ctx.rank3_bytes))
    for i in range(40, len(data) - 40, 97):
        data[i] ^= 0x5A
    return [write(os.path.join(job, BAD + ".json.gz"), bytes(data))]


@kind("zstd_truncated", "refused", r"zstd stream is truncated|zstd data is corrupt")
def _(job, ctx):
    plain = write(os.path.join(ctx.work, "rank3.json"), ctx.rank3_bytes)
    whole = os.path.join(ctx.work, "rank3.json.zst")
    make_seeds("zstd", plain, whole)
    with open(whole, "rb") as f:
        data = f.read()
    return [write(os.path.join(job, BAD + ".json.zst"), data[: len(data) * 2 // 3])]


@kind("not_json", "refused", r"not a trace")
def _(job, ctx):
    return [write(os.path.join(job, BAD + ".json"), bytes(ctx.rng.randrange(256) for _ in range(4096)))]


@kind("text_not_json", "refused", r"not a trace|not JSON")
def _(job, ctx):
    return [write(os.path.join(job, BAD + ".json"), "this is a log file, not a trace\n" * 100)]


@kind("json_but_not_a_trace", "refused", r"not a Chrome/Kineto trace", exit_codes=(0,))
def _(job, ctx):
    """JSON that is no trace at all (a label or config file): named and skipped, not a
    failed worker, so its rank is only a rank not given (exit 0)."""
    return [write(os.path.join(job, BAD + ".json"), dump({"hello": "world", "list": [1, 2, 3]}))]


@kind("trace_events_not_a_list", "refused", r"\"traceEvents\" is not a list")
def _(job, ctx):
    return [write(os.path.join(job, BAD + ".json"), dump({"traceEvents": {"ph": "X"}}))]


@kind("trailing_garbage", "refused", r"after the end of the trace")
def _(job, ctx):
    return [write(os.path.join(job, BAD + ".json"), ctx.rank3_bytes + b"\n{\"more\": 1}")]


@kind("zero_byte_files", "refused", r"empty")
def _(job, ctx):
    """A directory of 0-byte files: every one named, the good workers still analysed."""
    return [write(os.path.join(job, f"node0_{3 + i}_{10003 + i}.json"), b"") for i in range(4)]


@kind("utf8_bom", "accepted", exit_codes=(0,))
def _(job, ctx):
    """A UTF-8 byte-order mark before the JSON (Windows editors write one): every JSON tool
    takes it, so do we."""
    return [write(os.path.join(job, BAD + ".json"), b"\xef\xbb\xbf" + ctx.rank3_bytes)]


@kind("gzip_zero_padding", "accepted", exit_codes=(0,))
def _(job, ctx):
    """Zero bytes after the gzip member, as a tape or block-device copy leaves them:
    `gzip -d` decompresses it, so do we."""
    return [write(os.path.join(job, BAD + ".json.gz"), gzip.compress(ctx.rank3_bytes) + bytes(10240))]


@kind("zstd_zero_padding", "refused", r"zstd data is corrupt")
def _(job, ctx):
    """The same after a zstd frame: `zstd -d` refuses it ("unsupported format"), and so do
    we, with the reason."""
    plain = write(os.path.join(ctx.work, "rank3.json"), ctx.rank3_bytes)
    whole = os.path.join(ctx.work, "rank3.json.zst")
    make_seeds("zstd", plain, whole)
    with open(whole, "rb") as f:
        data = f.read()
    return [write(os.path.join(job, BAD + ".json.zst"), data + bytes(10240))]


@kind("two_trace_event_lists", "refused", r"second \"traceEvents\" list")
def _(job, ctx):
    """Two "traceEvents" lists in one object: JSON parsers keep the last, streaming readers
    both, so which events are the worker is ambiguous; the file is refused, not merged."""
    head, tail = ctx.rank3_bytes.split(b'"traceEvents":[', 1)
    doc = ctx.doc()
    second = dump(ctx.events(doc)[: len(ctx.events(doc)) // 2]).encode()
    return [write(os.path.join(job, BAD + ".json"), head + b'"traceEvents":' + second + b',"traceEvents":[' + tail)]


# ----------------------------------------------------------------------------- bad events

@kind("zero_events", "refused", r"nothing|no .*event|no step|empty")
def _(job, ctx):
    doc = ctx.doc()
    doc["traceEvents"] = []
    return [write(os.path.join(job, BAD + ".json"), dump(doc))]


@kind("all_events_missing_ts", "refused", r"no timed events|ts, dur or name")
def _(job, ctx):
    doc = ctx.doc()
    for ev in ctx.events(doc):
        ev.pop("ts", None)
    return [write(os.path.join(job, BAD + ".json"), dump(doc))]


@kind("some_events_missing_ts_dur_name", "warned", r"ts, dur or name", exit_codes=(0,))
def _(job, ctx):
    doc = ctx.doc()
    for i, ev in enumerate(ctx.events(doc)):
        if ev.get("cat") in ("kernel", "cpu_op") and i % 7 == 0:
            ev.pop(("ts", "dur", "name")[i % 3], None)
    return [write(os.path.join(job, BAD + ".json"), dump(doc))]


@kind("negative_durations", "warned", r"negative duration", exit_codes=(0,))
def _(job, ctx):
    doc = ctx.doc()
    for i, ev in enumerate(ctx.events(doc)):
        if ev.get("cat") == "kernel" and i % 5 == 0:
            ev["dur"] = -abs(ev.get("dur", 1)) - 1
    return [write(os.path.join(job, BAD + ".json"), dump(doc))]


@kind("nan_durations", "warned", r"ts, dur or name", exit_codes=(0,))
def _(job, ctx):
    """NaN is not JSON, but Python writes it: those events are skipped and counted, the
    rest of the worker is analysed."""
    doc = ctx.doc()
    for i, ev in enumerate(ctx.events(doc)):
        if i % 11 == 0 and "dur" in ev:
            ev["dur"] = float("nan")
    return [write(os.path.join(job, BAD + ".json"), json.dumps(doc))]


@kind("wrongly_typed_fields", "warned", r"ts, dur or name", exit_codes=(0,))
def _(job, ctx):
    """Valid JSON with strings, objects and lists where numbers belong: those events are
    skipped with a warning, the rest of the worker is analysed."""
    doc = ctx.doc()
    weird = ["abc", {"x": 1}, [1, 2], True, None]
    for i, ev in enumerate(ctx.events(doc)):
        if i % 9 == 0:
            ev[("ts", "dur", "pid", "tid", "name", "args")[i % 6]] = weird[i % len(weird)]
    return [write(os.path.join(job, BAD + ".json"), dump(doc))]


@kind("huge_numbers", "warned", r"world size 999999999 ignored|rank 999999999 ignored", exit_codes=(0, 3))
def _(job, ctx):
    """Times near int64's end, absurd grids and sizes, a world size and rank of ~1e9:
    no overflow (UBSan), no billion-entry report."""
    doc = ctx.doc()
    doc["distributedInfo"]["world_size"] = 999999999
    doc["distributedInfo"]["rank"] = 999999999
    for i, ev in enumerate(ctx.events(doc)):
        if i % 13 == 0:
            ev["dur"] = 9.2e15
        if i % 17 == 0:
            ev["ts"] = 9.2e15 - i
        if ev.get("cat") == "kernel" and i % 3 == 0:
            ev.setdefault("args", {})["grid"] = [2 ** 40, -5, 10 ** 30]
            ev["args"]["In msg nelems"] = 10 ** 19
            ev["args"]["Group size"] = 10 ** 12
    return [write(os.path.join(job, BAD + ".json"), dump(doc))]


@kind("ts_out_of_order", "accepted", exit_codes=(0,))
def _(job, ctx):
    """Chrome traces need not be sorted: the same events shuffled are the same worker."""
    doc = ctx.doc()
    ctx.rng.shuffle(ctx.events(doc))
    return [write(os.path.join(job, BAD + ".json"), dump(doc))]


@kind("only_cpu_events", "accepted", exit_codes=(0,))
def _(job, ctx):
    doc = ctx.doc()
    doc["traceEvents"] = [ev for ev in ctx.events(doc) if ev.get("cat") in ("cpu_op", "python_function",
                                                                            "user_annotation")]
    return [write(os.path.join(job, BAD + ".json"), dump(doc))]


@kind("clock_offset_by_hours", "warned", r"clock", exit_codes=(3,))  # another run: not one job
def _(job, ctx):
    doc = ctx.doc()
    doc["baseTimeNanoseconds"] += 3 * 3600 * 10 ** 9
    return [write(os.path.join(job, BAD + ".json"), dump(doc))]


# ----------------------------------------------------------------------------- the job

@kind("duplicate_ranks", "warned", r"both claim rank 1", exit_codes=(3,))  # read, warned, not one job
def _(job, ctx):
    shutil.copy(os.path.join(ctx.good_dir, GOOD[1]), os.path.join(job, BAD + ".json"))
    return [os.path.join(job, BAD + ".json")]


@kind("missing_ranks", "warned", r"rank of the job has no trace: 3", exit_codes=(0,))  # a note: not given
def _(job, ctx):
    return []  # rank 3 simply absent; the warning names the rank


@kind("mixed_world_sizes", "warned", r"world size 8 differs from the 4", exit_codes=(3,))  # not one job
def _(job, ctx):
    doc = ctx.doc()
    doc["distributedInfo"]["world_size"] = 8
    return [write(os.path.join(job, BAD + ".json"), dump(doc))]


# ----------------------------------------------------------------------------- hostile content

@kind("string_of_100_mb", "warned", r"larger than .*MiB were skipped", exit_codes=(0,))
def _(job, ctx):
    """One event whose name is a 100 MB string: skipped in a streaming pass, the rest of
    the worker analysed, memory bounded by the 64 MiB event cap (not by the string)."""
    head, tail = ctx.rank3_bytes.split(b'"traceEvents":[', 1)
    big = b'{"ph":"X","cat":"cpu_op","name":"' + b"A" * (100 << 20) + b'","pid":1,"tid":1,"ts":1,"dur":1},'
    return [write(os.path.join(job, BAD + ".json"), head + b'"traceEvents":[' + big + tail)]


@kind("compression_bomb_of_events", "warned", r"more than 1000000 events", exit_codes=(0,),
      env={"PERFTRACKER_ANALYZE_MAX_EVENTS": "1000000"})
def _(job, ctx):
    """740 KB of gzip holding 5 M tiny valid kernels: beyond the event budget (lowered
    here to 1 M; 40 M by default) events are counted, not kept, so memory stays bounded."""
    head, tail = ctx.rank3_bytes.split(b'"traceEvents":[', 1)
    ts = min(ev["ts"] for ev in ctx.events(ctx.rank3) if str(ev.get("name", "")).startswith("ProfilerStep#"))
    tiny = b'{"ph":"X","cat":"kernel","name":"k","ts":%d,"dur":1},' % int(ts + 1)
    with gzip.open(os.path.join(job, BAD + ".json.gz"), "wb", compresslevel=6) as f:
        f.write(head + b'"traceEvents":[')
        chunk = tiny * 100000
        for _ in range(50):
            f.write(chunk)
        f.write(tail)
    return [os.path.join(job, BAD + ".json.gz")]


def nul_names_distinct(report, raw):
    """Two kernels whose names differ only after a NUL (as \\u0000, and as a raw byte) are
    four functions of the report's heatmap, none of them cut at the NUL."""
    names = {f.get("name", "") for f in report.get("Heatmap", {}).get("functions", [])}
    blob = json.dumps(report, ensure_ascii=False)
    problems = []
    for suffix in ("escA", "escB", "rawA", "rawB"):
        hits = [n for n in names if n.startswith("hostile_gemm\ufffd" + suffix)]
        if not hits:
            problems.append(f"kernel hostile_gemm<NUL>{suffix} is not in the heatmap as its own function: "
                            f"{sorted(n for n in names if n.startswith('hostile'))}")
    if "\u0000" in blob or "\x00" in blob:
        problems.append("a NUL reached the report")
    return problems


def million_steps_bounded(report, raw):
    worker = next((w for w in report.get("workers", []) if w.get("name") == BAD + ".json.gz"), {})
    problems = []
    if len(worker.get("steps", [])) != 10000:
        problems.append(f"the worker has {len(worker.get('steps', []))} steps in the report, expected the cap, 10000")
    if len(raw) > (32 << 20):
        problems.append(f"report.json is {len(raw) >> 20} MB for one worker of capped steps")
    return problems


@kind("nul_in_kernel_names", "accepted", exit_codes=(0,), check=nul_names_distinct)
def _(job, ctx):
    """Kernel names that differ only after a NUL: as \\u0000 and as a raw NUL byte (not
    JSON, but a writer's bug can leave one). Cut at the NUL they merged into one kernel."""
    doc = ctx.doc()
    ts = min(ev["ts"] for ev in ctx.events(doc) if str(ev.get("name", "")).startswith("ProfilerStep#"))
    for i, suffix in enumerate(("escA", "escB", "rawA", "rawB")):
        name = "hostile_gemm" + ("\x00" if i < 2 else "\x01") + suffix  # \x01 marks the raw ones
        doc["traceEvents"].append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 99,
                                   "ts": ts + 10 + i * 5000, "dur": 4000 + i})  # long: the heatmap shows them
    data = dump(doc).encode().replace(b"\\u0001", b"\x00")  # the raw ones: a real NUL byte
    return [write(os.path.join(job, BAD + ".json"), data)]


@kind("million_steps", "warned", r"marks 1000000 steps; the first 10000 were analysed", exit_codes=(0,),
      check=million_steps_bounded)
def _(job, ctx):
    """A gzip of a million steps, each with one kernel: steps are deduplicated in
    O(n log n) (the old O(n^2) pass hung) and the summary keeps the first 10000, so the
    report stays a few MB (200 k steps made 117 MB)."""
    doc = ctx.doc()
    head = dump({k: v for k, v in doc.items() if k != "traceEvents"})[:-1].encode() + b',"traceEvents":['
    ts = min(ev["ts"] for ev in ctx.events(doc) if str(ev.get("name", "")).startswith("ProfilerStep#"))
    path = os.path.join(job, BAD + ".json.gz")
    step = b'{"ph":"X","cat":"user_annotation","name":"ProfilerStep#%d","pid":10003,"tid":10003,"ts":%d,"dur":90},'
    kernel = b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":%d,"dur":50},'
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(head)
        for block in range(100):
            f.write(b"".join(step % (i, ts + i * 100) + kernel % (ts + i * 100 + 10)
                             for i in range(block * 10000, (block + 1) * 10000)))
        f.write(b'{"ph":"X","cat":"cpu_op","name":"end","pid":10003,"tid":10003,"ts":%d,"dur":1}]}' % ts)
    return [path]


@kind("deeply_nested_args", "accepted", exit_codes=(0,))
def _(job, ctx):
    """Args nested 200 000 deep (skipped without recursion) and a top-level member nested
    as deep (parsed with a depth limit, ignored)."""
    text = ctx.rank3_bytes.decode()
    deep = "[" * 200000 + "]" * 200000
    text = text.replace('"args":{', '"args":{"deep":' + deep + ",", 5)
    text = text.rstrip()[:-1] + ',"metadata":' + '{"a":' * 200000 + "1" + "}" * 200000 + "}"
    return [write(os.path.join(job, BAD + ".json"), text)]


@kind("invalid_utf8_names", "accepted", exit_codes=(0,))
def _(job, ctx):
    data = ctx.rank3_bytes
    for bad in (b"\xff\xfe", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82"):
        data = data.replace(b'"name":"aten::', b'"name":"' + bad + b"aten::", 3)
    data = data.replace(b'"name":"cuda', b'"name":"\\ud800\\udfff\\ud800 cuda', 3)
    return [write(os.path.join(job, BAD + ".json"), data)]


@kind("script_in_names", "accepted", exit_codes=(0,))
def _(job, ctx):
    """Markup in kernel, operator and host names: report.json and the page's data.js must
    carry it escaped (checked below), never as markup."""
    doc = ctx.doc()
    for i, ev in enumerate(ctx.events(doc)):
        if i % 4 == 0 and "name" in ev:
            ev["name"] = "<script>alert(1)</script>" + ev["name"]
    doc.setdefault("metadata", {})["system"] = {"uname": {"node": "<img src=x onerror=alert(1)>"}}
    return [write(os.path.join(job, BAD + ".json"), dump(doc))]


@kind("terminal_escapes_in_names", "accepted", exit_codes=(3,), loud=True)
def _(job, ctx):
    """A file name and kernel names carrying terminal control sequences (OSC title, BEL,
    CSI as ESC [ and as the C1 byte U+009B), with a clock 3 h off so that a warning
    prints the name (and exit 3: a window hours from the others' is not the same job):
    nothing the CLI prints may carry them (they become '?')."""
    doc = ctx.doc()
    doc["baseTimeNanoseconds"] += 3 * 3600 * 10 ** 9
    for i, ev in enumerate(ctx.events(doc)):
        if ev.get("cat") == "kernel":
            ev["name"] = "\x1b]0;PWNED\x07\x1b[2J\u009b31m" + ev["name"]
    name = "node0_3_10003\x1b]0;PWNED\x07\u009b2J.json"
    return [write(os.path.join(job, name), dump(doc))]


# ----------------------------------------------------------------------------- other formats

def summary_bytes(ctx):
    out = os.path.join(ctx.work, "rank3.ptsum")
    if not os.path.exists(out):
        subprocess.run([CLI, "summarize", os.path.join(ctx.good_dir, BAD + ".json"), "-o", out], check=True)
    with open(out, "rb") as f:
        return f.read()


@kind("summary_truncated", "refused", r"summary is corrupt|truncated")
def _(job, ctx):
    data = summary_bytes(ctx)
    return [write(os.path.join(job, BAD + ".ptsum"), data[: len(data) * 3 // 4])]


@kind("summary_newer_version", "refused", r"version 7 is not supported")
def _(job, ctx):
    data = bytearray(summary_bytes(ctx))
    data[8] = 7
    return [write(os.path.join(job, BAD + ".ptsum"), bytes(data))]


@kind("summary_huge_payload_claim", "refused", r"payload too large|corrupt")
def _(job, ctx):
    data = bytearray(summary_bytes(ctx))
    data[16:24] = (1 << 62).to_bytes(8, "little")
    return [write(os.path.join(job, BAD + ".ptsum"), bytes(data))]


@kind("summary_metric_bomb", "refused", r"count out of range")
def _(job, ctx):
    """886 bytes of summary whose payload (27 MB of zeros, compressed) declares a million
    hardware metrics: 1.7 KB each in memory, 2.4 GB before the metric cap."""
    n = 1000000
    payload = bytes([0, 0, 0, 4, 0, 1]) + b"x" + bytes([0, 0, 0, 0, 0, 0, 4]) + bytes(11 + 8 + 3)
    v, count = n, bytearray()
    while v >= 0x80:
        count.append((v & 0x7F) | 0x80)
        v >>= 7
    count.append(v)
    payload += bytes(count) + bytes(27 * n) + bytes([0])
    plain = write(os.path.join(ctx.work, "metric-bomb.payload"), payload)
    frame = os.path.join(ctx.work, "metric-bomb.zst")
    make_seeds("zstd", plain, frame)
    with open(frame, "rb") as f:
        z = f.read()
    header = b"PTSUMRY\n" + (1).to_bytes(4, "little") + bytes(4) + len(payload).to_bytes(8, "little")
    return [write(os.path.join(job, BAD + ".ptsum"), header + z)]


@kind("too_many_counters", "warned", r"counters beyond the first 4096", exit_codes=(0,))
def _(job, ctx):
    """5000 distinct hardware counters in one trace: the first 4096 are summarized."""
    doc = ctx.doc()
    ts = min(ev["ts"] for ev in ctx.events(doc) if str(ev.get("name", "")).startswith("ProfilerStep#"))
    doc["traceEvents"] += [{"ph": "C", "name": f"gpu0.metric{i}", "pid": 1, "ts": ts + 1, "args": {"value": i}}
                           for i in range(5000)]
    return [write(os.path.join(job, BAD + ".json"), dump(doc))]


@kind("native_cut_mid_write", "refused", r"truncated|worker probably stopped")
def _(job, ctx):
    """The collector's raw trace cut as a killed writer leaves it, at three offsets."""
    whole = os.path.join(ctx.work, "rank3.ptrace")
    make_seeds("native", whole, "--rank", "3", "--workers", "4", "--steps", "2")
    with open(whole, "rb") as f:
        data = f.read()
    return [write(os.path.join(job, f"node0_{3 + i}_{10003 + i}.ptrace"), data[: len(data) * (i + 1) // 4])
            for i in range(3)]


@kind("native_event_count_bomb", "refused", r"corrupt")
def _(job, ctx):
    """2 KB of zstd holding one 64 MiB event block that claims 64 M kernels: refused
    before 7 GB of columns are allocated."""
    def varint(v):
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        return bytes(out)
    length = (64 << 20) - 16
    payload = bytes([0]) + varint(length - 16) + varint(0) + varint(0)
    stream = b"\x89PTRACE\n" + bytes([1, 0, 0, 0, 3]) + varint(length) + payload + bytes(length - len(payload))
    plain = write(os.path.join(ctx.work, "bomb.stream"), stream)
    make_seeds("zstd", plain, os.path.join(job, BAD + ".ptrace"))
    os.unlink(plain)
    return [os.path.join(job, BAD + ".ptrace")]


# ----------------------------------------------------------------------------- the file system

@kind("fifo_in_place_of_a_file", "refused", r"not a regular file")
def _(job, ctx):
    """What an unreadable file is for root: reading a FIFO would block forever."""
    path = os.path.join(job, BAD + ".json")
    os.mkfifo(path)
    return [path]


@kind("fifo_named_on_the_command_line", "refused", r"not a regular file")
def _(job, ctx):
    path = os.path.join(ctx.work, "fifo-arg-" + BAD + ".json")
    if os.path.exists(path):
        os.unlink(path)
    os.mkfifo(path)
    return [path]  # passed as an argument as well as the job directory


@kind("directory_in_place_of_a_file", "refused", r"not a regular file|directory")
def _(job, ctx):
    path = os.path.join(job, BAD + ".json")
    os.mkdir(path)
    return [path]


@kind("dangling_symlink", "refused", r"no such file|cannot open|dangling")
def _(job, ctx):
    path = os.path.join(job, BAD + ".json")
    os.symlink(os.path.join(job, "nowhere.json"), path)
    return [path]


@kind("symlink_loop", "refused", r"symbolic links|cannot open|loop")
def _(job, ctx):
    path = os.path.join(job, BAD + ".json")
    os.symlink(path, path)
    return [path]


@kind("symlink_to_a_good_trace", "accepted", exit_codes=(0,))
def _(job, ctx):
    path = os.path.join(job, BAD + ".json")
    os.symlink(os.path.join(ctx.good_dir, BAD + ".json"), path)
    return [path]


# ----------------------------------------------------------------------------- the checks

def run_analyze(args, out, quiet=True, env=None):
    """Runs analyze, returning (rc, stderr, seconds, peak RSS in MB (0: not measured),
    everything printed as bytes)."""
    start = time.monotonic()
    proc = subprocess.Popen([CLI, "analyze", *(["-q"] if quiet else []), "-j", "2", "-o", out, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            env={**os.environ, **(env or {})})
    try:
        printed, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None, f"TIMEOUT after {TIMEOUT_S} s", TIMEOUT_S, 0, b""
    seconds = time.monotonic() - start
    return proc.returncode, err.decode("utf-8", "replace"), seconds, 0, printed + err


def run_measured(args, out, quiet=True, env=None):
    """Like run_analyze, with the child's own peak RSS from wait4 (stdout discarded)."""
    start = time.monotonic()
    err_path = out + ".stderr"
    os.makedirs(os.path.dirname(err_path), exist_ok=True)
    with open(err_path, "wb") as err_file:
        pid = os.fork()
        if pid == 0:
            os.setsid()
            os.dup2(err_file.fileno(), 2)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            try:
                os.environ.update(env or {})
                os.execvp(CLI, [CLI, "analyze", *(["-q"] if quiet else []), "-j", "2", "-o", out, *args])
            finally:
                os._exit(127)
        deadline = start + TIMEOUT_S
        while True:
            wpid, status, usage = os.wait4(pid, os.WNOHANG)
            if wpid:
                break
            if time.monotonic() > deadline:
                os.killpg(pid, signal.SIGKILL)
                os.wait4(pid, 0)
                return None, f"TIMEOUT after {TIMEOUT_S} s", TIMEOUT_S, 0, b""
            time.sleep(0.02)
    with open(err_path, "rb") as f:
        err = f.read().decode("utf-8", "replace")
    rc = os.waitstatus_to_exitcode(status)
    return rc, err, time.monotonic() - start, usage.ru_maxrss / 1024, err.encode()


def strict_json(path):
    def no_constants(name):
        raise ValueError(f"non-JSON constant {name}")
    with open(path, "rb") as f:
        raw = f.read()
    raw.decode("utf-8")  # strict: invalid UTF-8 raises
    return json.loads(raw, parse_constant=no_constants), raw


def check_kind(k, ctx, args, problems_out):
    job = os.path.join(ctx.work, "jobs", k["name"])
    shutil.rmtree(job, ignore_errors=True)
    os.makedirs(job)
    for name in GOOD:
        shutil.copy(os.path.join(ctx.good_dir, name), job)
    try:
        bad_files = k["build"](job, ctx)
    except SkipKind as why:
        print(f"skip {k['name']}: {why}")
        return f"{k['name']} ({why})"
    out = os.path.join(ctx.work, "out", k["name"])
    shutil.rmtree(out, ignore_errors=True)
    cli_args = [job]
    if k["name"] == "fifo_named_on_the_command_line":
        cli_args += bad_files
    runner = run_measured if args.max_rss_mb and not k["loud"] else run_analyze
    rc, err, seconds, rss, printed = runner(cli_args, out, quiet=not k["loud"], env=k["env"])
    problems = []
    where = k["name"]
    if rc is None:
        problems.append(err)
    elif rc < 0 or rc not in k["exit"]:
        problems.append(f"exit status {rc}, expected one of {sorted(k['exit'])}")
    for marker in ("AddressSanitizer", "runtime error:", "LeakSanitizer", "ThreadSanitizer", "out of memory"):
        if marker in err:
            problems.append(f"stderr reports {marker!r}")
    if args.max_rss_mb and rss > args.max_rss_mb:
        problems.append(f"peak RSS {rss:.0f} MB > {args.max_rss_mb} MB")
    if args.max_seconds and seconds > args.max_seconds:
        problems.append(f"took {seconds:.1f} s > {args.max_seconds} s")
    report = None
    if rc is not None:
        try:
            report, raw = strict_json(os.path.join(out, "report.json"))
        except (OSError, ValueError) as exc:
            problems.append(f"report.json unusable: {exc}")
    if report is not None:
        by_name = {w.get("name"): w for w in report.get("workers", [])}
        for name in GOOD:
            w = by_name.get(name)
            if not w or w.get("status") not in ("normal", "slow", "hang"):
                problems.append(f"good worker {name} not analysed: {w}")
        warnings = report.get("warnings", [])
        if k["outcome"] in ("refused", "warned"):
            names = [os.path.basename(p) for p in bad_files] or ["rank"]
            for name in names:
                hits = [w for w in warnings if name in w and re.search(k["warning"], w, re.I)]
                if not hits:
                    problems.append(f"no warning names {name} with /{k['warning']}/: {warnings[:6]}")
                lines = [line for line in err.splitlines() if name in line and re.search(k["warning"], line, re.I)]
                if not lines:
                    problems.append(f"no stderr line names {name} with /{k['warning']}/: {err[-600:]!r}")
        if k["outcome"] == "refused":
            for path in bad_files:
                w = by_name.get(os.path.basename(path))
                if w and w.get("status") != "error":
                    problems.append(f"refused file {os.path.basename(path)} has status {w.get('status')}")
        if k["outcome"] in ("accepted", "warned") and bad_files and k["name"] != "duplicate_ranks":
            w = by_name.get(os.path.basename(bad_files[0]))
            if not w or w.get("status") not in ("normal", "slow", "hang"):
                problems.append(f"readable file {os.path.basename(bad_files[0])} was not analysed: {w}")
        if k["name"] == "script_in_names":
            with open(os.path.join(out, "PerfDisplay", "data.js"), "rb") as f:
                page_data = f.read()
            for blob, what in ((raw, "report.json"), (page_data, "data.js")):
                if b"<script" in blob or b"<img" in blob:
                    problems.append(f"{what} carries raw markup")
            if "<script>alert(1)</script>" not in json.dumps(report, ensure_ascii=False):
                problems.append("the hostile names did not reach the report (nothing was tested)")
        if k["loud"]:
            for seq, what in ((b"\x1b", "ESC"), (b"\x07", "BEL"), (b"\xc2\x9b", "C1 CSI")):
                if seq in printed:
                    problems.append(f"{what} from the inputs reached the terminal")
            if b"PWNED" not in printed:
                problems.append("the hostile names were not printed at all (nothing was tested)")
        if k["check"]:
            problems += k["check"](report, raw)
        if k["name"] == "ts_out_of_order":
            base = by_name.get(BAD + ".json", {}).get("step_time_ms")
            if base is None or abs(base - ctx.baseline_step_ms) > 1e-6:
                problems.append(f"shuffled events changed rank 3's step time: {base} != {ctx.baseline_step_ms}")
    first_line = next((line for line in err.splitlines() if any(os.path.basename(p) in line for p in bad_files)),
                      err.splitlines()[0] if err.splitlines() else "")
    rss_text = f" {rss:6.0f} MB" if args.max_rss_mb else ""
    status = "ok  " if not problems else "FAIL"
    print(f"{status} {where:34s} exit {rc} {seconds:5.1f} s{rss_text} | {first_line[:150]}")
    for p in problems:
        problems_out.append(f"{where}: {p}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("work")
    parser.add_argument("kinds", nargs="*")
    parser.add_argument("--max-rss-mb", type=float, default=0)
    parser.add_argument("--max-seconds", type=float, default=0)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    if args.list:
        for k in KINDS:
            print(k["name"], k["outcome"])
        return
    os.makedirs(args.work, exist_ok=True)
    ctx = Ctx(os.path.abspath(args.work))
    run_analyze([ctx.good_dir], os.path.join(ctx.work, "out", "baseline"))
    baseline, _ = strict_json(os.path.join(ctx.work, "out", "baseline", "report.json"))
    ctx.baseline_step_ms = next(w["step_time_ms"] for w in baseline["workers"] if w["name"] == BAD + ".json")
    problems = []
    selected = [k for k in KINDS if not args.kinds or k["name"] in args.kinds]
    skipped = [why for why in (check_kind(k, ctx, args, problems) for k in selected) if why]
    if problems:
        print(f"FAIL: {len(problems)} problems in {len(selected)} kinds")
        for p in problems:
            print("  " + p)
        sys.exit(1)
    if skipped:
        print(f"SKIP: {len(skipped)} of {len(selected)} kinds could not be built here: {'; '.join(skipped)} "
              f"(the other {len(selected) - len(skipped)} passed)")
        sys.exit(77)
    print(f"PASS: {len(selected)} kinds of bad input; every good worker analysed every time")


if __name__ == "__main__":
    main()
