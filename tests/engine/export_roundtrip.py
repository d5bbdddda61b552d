"""`perftracker export` keeps what a viewer needs: every "M" metadata record (process and
thread names, labels, sort order), every user annotation, and every record of every
other kind -- flow arrows ("s"/"f", the launch -> kernel "ac2g" ones), instants ("i"),
spans of categories the analysis ignores -- as they were, next to the events (every
kind is counted, issue 17.16); a native raw trace comes out with its processes and
threads named; and a gzip output is always named .gz.

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
        {"ph": "s", "id": 40728, "pid": 77, "tid": 77, "ts": 102.5, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 40728, "pid": 0, "tid": 7, "ts": 105, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        {"ph": "i", "s": "g", "name": "Iteration Start: PyTorch Profiler", "pid": "Traces",
         "tid": "Trace PyTorch Profiler", "ts": 99},
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
         "ts": 99, "dur": 60, "args": {"Op count": 0}},
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


def kinds(events):
    """How many records of each kind ("ph"), and the flows' and instants' own fields: a
    kind that is dropped, or a flow whose id or end changed, shows here."""
    count = {}
    for e in events:
        count[e.get("ph")] = count.get(e.get("ph"), 0) + 1
    marks = sorted(json.dumps(dict(e, ts=float(e.get("ts", 0))), sort_keys=True)  # 5.0 and 5 are one time
                   for e in events if e.get("ph") in ("s", "t", "f", "i", "I"))
    return count, marks


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
    (want_n, want_marks), (got_n, got_marks) = kinds(original), kinds(exported)
    assert got_n == want_n, f"{tag}: records by kind differ: {want_n} in, {got_n} out"
    assert got_marks == want_marks, f"{tag}: flows or instants changed: lost {sorted(set(want_marks) - set(got_marks))[:3]}"
    want_ua, got_ua = annotations(original), annotations(exported)
    assert got_ua == want_ua, f"{tag}: user annotations differ: lost {sorted(set(want_ua) - set(got_ua))[:5]}, " \
                              f"new {sorted(set(got_ua) - set(want_ua))[:5]}"
    # What the analysis reads is unchanged by the trip.
    _, before, _ = run("summarize", src, "--json")
    _, after, _ = run("summarize", out, "--json")
    b, a = json.loads(before), json.loads(after)
    assert (b["events"], b["steps"], b["busy_ms"]) == (a["events"], a["steps"], a["busy_ms"]), tag
    return len(want_md), len(want_ua), sum(want_n.get(k, 0) for k in ("s", "f", "t", "i", "I"))


def check_native_names(path, tmp, tag):
    """A native trace names nothing; the export names every process and thread that has
    records (the worker, its threads, each GPU and stream)."""
    out = os.path.join(tmp, tag + ".exported.json")
    export(path, out)
    events = load(out)
    named = {(e["pid"], e.get("tid", 0) if e["name"] == "thread_name" else None): e["args"]["name"]
             for e in events if e.get("ph") == "M" and e.get("name") in ("process_name", "thread_name")}
    places = {(e["pid"], e["tid"]) for e in events if e.get("ph") != "M"}
    unnamed = sorted(p for p in places if (p[0], None) not in named or p not in named)
    assert places and not unnamed, f"{tag}: processes or threads without a name: {unnamed[:5]}"
    return len(named)


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


# A native raw trace of our own (an H200 recording committed as test data): every
# process and thread the export names, checked against who each is.
NATIVE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "h200", "native_healthy",
                      "vm_0_1513.ptrace")


def check_native_thread_names(tmp):
    out = os.path.join(tmp, "native-names.json")
    export(NATIVE, out)
    events = load(out)
    names = {(e["name"], e["pid"], e.get("tid")): e["args"]["name"] for e in events if e.get("ph") == "M"}
    worker = 1513
    samples = {(e["pid"], e["tid"]) for e in events if e.get("ph") == "C"}
    places = {(e["pid"], e["tid"]) for e in events if e.get("ph") != "M"}
    assert samples and (worker, worker) in places and any(pid == 0 for pid, _ in places), sorted(places)[:5]
    for pid, tid in sorted(places):
        if pid == 0:
            want = f"stream {tid}"  # the GPU's streams
        elif (pid, tid) in samples:
            want = "hardware samples"
        elif tid == worker:
            want = f"main thread ({worker})"
        else:
            want = f"thread {tid}"
        got = names.get(("thread_name", pid, tid))
        assert got == want, f"native export names thread {pid}:{tid} {got!r}, not {want!r}"
    assert names.get(("process_name", 0, 0)) == "GPU 0 NVIDIA H200", names.get(("process_name", 0, 0))
    worker_name = names.get(("process_name", worker, 0), "")
    assert worker_name.startswith("rank ") and worker_name.endswith(f"pid {worker})"), worker_name
    print(f"ok the committed native trace's {len(places)} threads are named for who they are")


def main():
    with TempDir() as tmp:
        handmade = os.path.join(tmp, "handmade.json")
        with open(handmade, "w") as f:
            json.dump(HANDMADE, f)
        md, ua, marks = check_round_trip(handmade, tmp, "handmade")
        assert (md, ua, marks) == (5, 2, 3), (md, ua, marks)
        print(f"ok handmade: {md} metadata records, {ua} user annotations, {marks} flows and instants kept")
        same = subprocess.run([CLI, "export", handmade, "-o", handmade], capture_output=True, text=True)
        assert same.returncode == 1 and "same file" in same.stderr, (same.returncode, same.stderr)
        assert load(handmade) == HANDMADE["traceEvents"], "exporting a trace onto itself destroyed it"
        check_gzip_names(tmp)
        check_native_thread_names(tmp)
        if not os.path.isdir(TRACES):
            print(f"SKIP: real traces not found at {TRACES}; the hand-made and synthetic checks passed")
            sys.exit(77)
        files = sorted(glob.glob(os.path.join(TRACES, "*", "*.json.gz")) +
                       glob.glob(os.path.join(TRACES, "*", "*", "*.json.gz")))
        assert files, f"no traces under {TRACES}"
        total_md = total_marks = 0
        for i, path in enumerate(files):
            md, ua, marks = check_round_trip(path, tmp, f"real{i}")
            total_md += md
            total_marks += marks
            print(f"ok {os.path.relpath(path, TRACES)}: {md} metadata records, {ua} user annotations, "
                  f"{marks} flows and instants kept")
        assert total_md > 0, "no real trace had metadata records: the check checked nothing"
        assert total_marks > 0, "no real trace had flows or instants: the check checked nothing"
        natives = sorted(glob.glob(os.path.join(TRACES, "*", "*", "*.ptrace")))
        for i, path in enumerate(natives):
            print(f"ok {os.path.relpath(path, TRACES)}: {check_native_names(path, tmp, f'native{i}')} "
                  "processes and threads named")
    print("PASS: export keeps metadata, user annotations, flows and instants, and names a native trace's threads")


if __name__ == "__main__":
    main()
