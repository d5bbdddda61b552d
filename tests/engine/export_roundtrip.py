"""`perftracker export` keeps what a viewer needs: every "M" metadata record (process and
thread names, labels, sort order) and every user annotation, as they were, next to the
events; and a gzip output is always named .gz.

Checked on a hand-made Kineto trace and a synthetic one (always), and on every real trace
in ../shared/data/traces (skips, 77, when that folder is absent, after the other checks
have run)."""
import glob
import gzip
import json
import os
import subprocess
import sys

from engine_common import CLI, TRACES, TempDir, run

# Names that need escaping, a string pid, a sort index, and annotations that are and are
# not steps.
HANDMADE = {
    "schemaVersion": 1,
    "traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 77, "tid": 0, "ts": 1, "args": {"name": "trainer \"0\" <a&b>"}},
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
        {"ph": "M", "name": "thread_name", "pid": 77, "tid": 77, "args": {"name": "thread 77 (python3)"}},
        {"ph": "M", "name": "thread_sort_index", "pid": 77, "tid": 77, "args": {"sort_index": 77}},
        {"ph": "M", "name": "process_sort_index", "pid": "Spans", "tid": 0, "args": {"sort_index": 536870912}},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 77, "tid": 77, "ts": 100, "dur": 50},
        {"ph": "X", "cat": "user_annotation", "name": "## forward ##", "pid": 77, "tid": 77, "ts": 101.5, "dur": 20},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 77, "tid": 77, "ts": 102, "dur": 10},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 105, "dur": 4,
         "args": {"device": 0, "stream": 7}},
    ],
}


def metadata(events):
    """The M records, as comparable strings (pid/tid as the file wrote them)."""
    return sorted(json.dumps([e["name"], e.get("pid"), e.get("tid"), e.get("args")], sort_keys=True)
                  for e in events if e.get("ph") == "M" and e.get("args"))


def annotations(events):
    """(name, start ns, duration ns) of every user annotation."""
    return sorted((e["name"], round(float(e["ts"]) * 1000), round(float(e.get("dur", 0)) * 1000))
                  for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation")


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def export(src, dst, *extra):
    p = subprocess.run([CLI, "export", src, "-o", dst, *extra], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: perftracker export {src} exited {p.returncode}\n{p.stderr[-3000:]}")
    return p.stderr


def check_round_trip(src, tmp, tag):
    original = load(src)
    out = os.path.join(tmp, tag + ".exported.json")
    export(src, out)
    exported = load(out)
    want_md, got_md = metadata(original), metadata(exported)
    assert got_md == want_md, f"{tag}: metadata differ\n  lost {sorted(set(want_md) - set(got_md))[:5]}" \
                              f"\n  new {sorted(set(got_md) - set(want_md))[:5]}"
    want_ua, got_ua = annotations(original), annotations(exported)
    assert got_ua == want_ua, f"{tag}: user annotations differ: lost {sorted(set(want_ua) - set(got_ua))[:5]}, " \
                              f"new {sorted(set(got_ua) - set(want_ua))[:5]}"
    # What the analysis reads is unchanged by the trip.
    _, before, _ = run("summarize", src, "--json")
    _, after, _ = run("summarize", out, "--json")
    b, a = json.loads(before), json.loads(after)
    assert (b["events"], b["steps"], b["busy_ms"]) == (a["events"], a["steps"], a["busy_ms"]), tag
    return len(want_md), len(want_ua)


def check_gzip_names(tmp):
    job = os.path.join(tmp, "synth")
    run("synth", "-n", "1", "--steps", "2", "--layers", "1", "--quiet", "-o", job)
    raw = sorted(glob.glob(os.path.join(job, "node*.json")))
    assert raw, os.listdir(job)
    asked = os.path.join(tmp, "asked.json")
    err = export(raw[0], asked, "--gzip")
    assert not os.path.exists(asked), "--gzip wrote gzip into a file named .json"
    with open(asked + ".gz", "rb") as f:
        assert f.read(2) == b"\x1f\x8b", "asked.json.gz is not gzip"
    assert "asked.json.gz" in err, err
    named = os.path.join(tmp, "named.json.gz")
    export(raw[0], named)  # .gz in the name alone means gzip
    with open(named, "rb") as f:
        assert f.read(2) == b"\x1f\x8b", "named.json.gz is not gzip"
    plain = os.path.join(tmp, "plain.json")
    export(raw[0], plain)
    with open(plain, "rb") as f:
        assert f.read(1) == b"{", "plain.json is not plain JSON"
    assert load(asked + ".gz") == load(plain) == load(named), "gzip and plain exports differ"
    print("ok --gzip writes asked.json.gz; .json.gz and .json outputs are what they say")


def main():
    with TempDir() as tmp:
        handmade = os.path.join(tmp, "handmade.json")
        with open(handmade, "w") as f:
            json.dump(HANDMADE, f)
        md, ua = check_round_trip(handmade, tmp, "handmade")
        assert (md, ua) == (5, 2), (md, ua)
        print(f"ok handmade: {md} metadata records, {ua} user annotations kept")
        same = subprocess.run([CLI, "export", handmade, "-o", handmade], capture_output=True, text=True)
        assert same.returncode == 1 and "same file" in same.stderr, (same.returncode, same.stderr)
        assert load(handmade) == HANDMADE["traceEvents"], "exporting a trace onto itself destroyed it"
        check_gzip_names(tmp)
        if not os.path.isdir(TRACES):
            print(f"SKIP: real traces not found at {TRACES}; the hand-made and synthetic checks passed")
            sys.exit(77)
        files = sorted(glob.glob(os.path.join(TRACES, "*", "*.json.gz")) +
                       glob.glob(os.path.join(TRACES, "*", "*", "*.json.gz")))
        assert files, f"no traces under {TRACES}"
        total_md = 0
        for i, path in enumerate(files):
            md, ua = check_round_trip(path, tmp, f"real{i}")
            total_md += md
            print(f"ok {os.path.relpath(path, TRACES)}: {md} metadata records, {ua} user annotations kept")
        assert total_md > 0, "no real trace had metadata records: the check checked nothing"
    print("PASS: export keeps metadata and user annotations")


if __name__ == "__main__":
    main()
