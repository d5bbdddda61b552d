#!/usr/bin/env python3
"""JSON whitespace of any length is whitespace: a trace with a long run of it at its top
level analyses to the same report as the trace without it.

usage: json_whitespace.py WORKDIR
  (PT_CLI: the perftracker binary; PT_MAKE_SEEDS: fuzz/make_seeds, for the zstd form.)

The trace is a synthetic worker (`perftracker synth`, one rank) written compactly, cut at
every place its top level allows whitespace (before the object, around each key's ':',
around the event list's brackets and commas, after the object). At each place a run of
65 MiB (more than the 64 MiB the reader once held a run in) of mixed ' ', '\\t', '\\r',
'\\n' goes in, and `perftracker analyze` must write the report.json of the same trace
without it (generated_at aside), with no warning, in plain, gzip and zstd form; and 130
MiB in plain form read with -j 4, where the file is large enough to be read in parallel
spans (tests/reliability/test_parser_edges.c checks the splitter finds them). Then
`perftracker diff` must take a report.json with a 65 MiB run before and after its '{' as
a report. Files are streamed out a MiB at a time (the gzip form compressed as it goes,
the zstd form as frames: each piece compressed once, the run's MiB frame repeated), each
deleted once analysed: the test holds no run in memory and at most one on disk.
Prints one line per case and PASS, or FAIL with every broken check.
"""
import json
import os
import shutil
import subprocess
import sys
import time
import zlib

CLI = os.environ.get("PT_CLI", "perftracker")
MAKE_SEEDS = os.environ.get("PT_MAKE_SEEDS", "")
NAME = "node0_0_10000"
MIB = 1 << 20
WINDOW_PLUS = 65      # MiB: above the reader's largest buffer (64 MiB)
TWICE = 130           # MiB: twice over, read in parallel spans
TIMEOUT_S = 300
# One MiB of mixed whitespace: every JSON whitespace byte, in runs of several lengths.
UNIT = b"\r\n" + b" " * 29 + b"\t\t" + b" " * 13 + b"\n" + b"\t" * 5 + b" " * 11 + b"\r"
RUN_MIB = (UNIT * (MIB // len(UNIT) + 1))[:MIB]

PLACES = ["before the object", "before the first key", "between \"traceEvents\" and ':'",
          "between ':' and the list", "before the first event", "between an event and ','",
          "between ',' and an event", "before the list's ']'", "between ']' and ','",
          "between ',' and the next key", "before the object's '}'", "after the object"]


def trace_parts(doc):
    """The trace as text cut at each place: a run at place i goes between part i and i+1."""
    def member(key):
        return json.dumps(key) + ":" + json.dumps(doc[key], separators=(",", ":"))
    keys = list(doc)
    at = keys.index("traceEvents")
    before, after = keys[:at], keys[at + 1:]
    events = [json.dumps(e, separators=(",", ":")) for e in doc["traceEvents"]]
    assert after and len(events) >= 2, "the synthetic trace needs members after the list and 2 events"
    return ["", "{", "".join(member(k) + "," for k in before) + '"traceEvents"', ":", "[", events[0], ",",
            ",".join(events[1:]), "]", ",", ",".join(member(k) for k in after), "}", ""]


def pieces_with_run(parts, place, mib):
    """(bytes or None) pieces: None stands for one MiB of the run."""
    out = []
    for i, part in enumerate(parts):
        out.append(part.encode())
        if i == place:
            out.extend([None] * mib)
    return out


class Zstd:
    """zstd frames from make_seeds, each piece compressed once (the run's MiB: once)."""

    def __init__(self, work):
        self.work = work
        self.run_frame = self.frame(RUN_MIB)

    def frame(self, data):
        plain, packed = os.path.join(self.work, "piece"), os.path.join(self.work, "piece.zst")
        with open(plain, "wb") as f:
            f.write(data)
        subprocess.run([MAKE_SEEDS, "zstd", plain, packed], check=True, stdout=subprocess.DEVNULL)
        with open(packed, "rb") as f:
            return f.read()


def write_form(path, pieces, form, zstd):
    """Writes the pieces in the form, a MiB at a time."""
    with open(path, "wb") as f:
        if form == "plain":
            for p in pieces:
                f.write(RUN_MIB if p is None else p)
        elif form == "gzip":
            z = zlib.compressobj(1, zlib.DEFLATED, 31)
            for p in pieces:
                f.write(z.compress(RUN_MIB if p is None else p))
            f.write(z.flush())
        else:
            text = b""
            for p in pieces:  # consecutive text pieces make one frame
                if p is not None:
                    text += p
                    continue
                if text:
                    f.write(zstd.frame(text))
                    text = b""
                f.write(zstd.run_frame)
            if text:
                f.write(zstd.frame(text))


SUFFIX = {"plain": ".json", "gzip": ".json.gz", "zstd": ".json.zst"}


def analyze(job, out, threads):
    """(report without generated_at, or None; stderr; seconds)."""
    shutil.rmtree(out, ignore_errors=True)
    start = time.monotonic()
    p = subprocess.run([CLI, "analyze", "-q", "-j", str(threads), "-o", out, job], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=TIMEOUT_S)
    seconds = time.monotonic() - start
    err = p.stderr.decode(errors="replace")
    if p.returncode != 0 or not os.path.exists(os.path.join(out, "report.json")):
        return None, f"exit {p.returncode}: {err.strip()}", seconds
    with open(os.path.join(out, "report.json")) as f:
        report = json.load(f)
    report.pop("generated_at", None)
    return report, err, seconds


def about_the_file(err):
    """The lines of analyze's stderr that name the trace: a warning about it (progress and
    "report written" lines do not name it)."""
    return [line for line in err.splitlines() if NAME in line]


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    work = os.path.abspath(sys.argv[1])
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    good = os.path.join(work, "good")
    subprocess.run([CLI, "synth", "-n", "1", "--steps", "2", "--layers", "2", "-o", good], check=True,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(good, NAME + ".json"), "rb") as f:
        parts = trace_parts(json.load(f))
    assert len(parts) == len(PLACES) + 1
    forms = ["plain", "gzip", "zstd"] if MAKE_SEEDS else ["plain", "gzip"]
    zstd = Zstd(work) if MAKE_SEEDS else None
    job, out = os.path.join(work, "job"), os.path.join(work, "out")
    problems = []

    def run_case(label, form, pieces, threads):
        os.makedirs(job, exist_ok=True)
        path = os.path.join(job, NAME + SUFFIX[form])
        write_form(path, pieces, form, zstd)
        size = os.path.getsize(path)
        report, err, seconds = analyze(job, out, threads)
        os.unlink(path)
        print(f"{label}: {size / MIB:.1f} MiB on disk, {seconds:.2f} s", flush=True)
        return report, err

    baseline = {}
    for form in forms:
        report, err = run_case(f"{form}, no run", form, pieces_with_run(parts, -1, 0), 1)
        if report is None:
            problems.append(f"{form} without whitespace: {err}")
        baseline[form] = report
    if any(r is None for r in baseline.values()):
        return fail(problems)

    cases = [(place, form, WINDOW_PLUS, 1) for place in range(len(PLACES)) for form in forms]
    cases += [(place, "plain", TWICE, 4) for place in range(len(PLACES))]
    for place, form, mib, threads in cases:
        label = f"{mib} MiB {PLACES[place]}, {form}, -j {threads}"
        report, err = run_case(label, form, pieces_with_run(parts, place, mib), threads)
        if report is None:
            problems.append(f"{label}: no report: {err}")
        elif report != baseline[form]:
            keys = sorted(k for k in set(report) | set(baseline[form]) if report.get(k) != baseline[form].get(k))
            problems.append(f"{label}: the report differs from the one without whitespace in {keys}")
        elif about_the_file(err):
            problems.append(f"{label}: analyze said {about_the_file(err)}")

    problems += diff_takes_a_padded_report(work, job, out)
    return fail(problems) if problems else ok(len(cases))


def diff_takes_a_padded_report(work, job, out):
    """`perftracker diff` tells a report.json by its first key; the whitespace before and
    after its '{' must not hide it."""
    os.makedirs(job, exist_ok=True)
    write_form(os.path.join(job, NAME + ".json"), pieces_with_run(trace_parts_of_good(work), -1, 0), "plain", None)
    report, err, _ = analyze(job, out, 1)
    if report is None:
        return [f"diff: the report to pad was not written: {err}"]
    plain = os.path.join(work, "report.json")
    shutil.copy(os.path.join(out, "report.json"), plain)
    with open(plain, "rb") as f:
        text = f.read()
    assert text.startswith(b"{")
    padded = os.path.join(work, "padded", "report.json")
    os.makedirs(os.path.dirname(padded), exist_ok=True)
    write_form(padded, [None] * WINDOW_PLUS + [b"{"] + [None] * WINDOW_PLUS + [text[1:]], "plain", None)
    problems = []
    for name, after in (("unpadded", plain), ("padded", padded)):
        d = subprocess.run([CLI, "diff", "-q", "-o", os.path.join(work, "diff-" + name), plain, after],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT_S)
        verdict = d.stdout.decode(errors="replace").strip()
        print(f"diff report.json against the {name} one: exit {d.returncode}: {verdict}", flush=True)
        if d.returncode != 0:
            problems.append(f"diff against the {name} report.json: exit {d.returncode}: "
                            f"{d.stderr.decode(errors='replace').strip()}")
    os.unlink(padded)
    if not problems:
        results = []
        for name in ("unpadded", "padded"):
            with open(os.path.join(work, "diff-" + name, "diff.json")) as f:
                doc = json.load(f)
            doc.pop("generated_at", None)
            doc["after"].pop("input", None)  # the two files' paths
            results.append(doc)
        if results[0] != results[1]:
            problems.append("diff: the padded report.json compares differently from the same report unpadded")
    return problems


def trace_parts_of_good(work):
    with open(os.path.join(work, "good", NAME + ".json"), "rb") as f:
        return trace_parts(json.load(f))


def fail(problems):
    print("FAIL:\n  " + "\n  ".join(problems))
    return 1


def ok(cases):
    print(f"PASS: {cases} runs of whitespace read as none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
