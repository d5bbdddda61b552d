#!/usr/bin/env python3
"""Builds the fuzz targets' seed corpora in a build tree (nothing here is checked in).

usage: build_corpus.py MAKE_SEEDS TRACES_DIR OUT_DIR

1. MAKE_SEEDS corpus OUT_DIR TRACE... writes the synthetic seeds of every target
   (fuzz/make_seeds.c) and the summaries of the real traces.
2. Each real trace in TRACES_DIR (../shared/data/traces) is trimmed into a small seed for
   the Kineto target: its top-level members as they are (distributedInfo,
   deviceProperties, producer quirks) and the first few events of every category, so the
   fuzzer starts from every producer's real layout without re-reading megabytes per run.
   The real files are only read, never copied whole. Without TRACES_DIR the synthetic
   seeds stand alone.
"""
import gzip
import json
import os
import subprocess
import sys

EVENTS_PER_CATEGORY = 12


def trim(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="surrogateescape") as f:
        doc = json.load(f)
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    kept, per_category = [], {}
    for ev in events:
        if not isinstance(ev, dict):
            continue
        key = (ev.get("ph"), ev.get("cat"))
        if per_category.get(key, 0) < EVENTS_PER_CATEGORY or str(ev.get("name", "")).startswith("ProfilerStep#"):
            per_category[key] = per_category.get(key, 0) + 1
            kept.append(ev)
    if isinstance(doc, dict):
        doc = dict(doc)
        doc["traceEvents"] = kept
        return doc
    return kept


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    make_seeds, traces_dir, out = sys.argv[1:]
    traces = []
    if os.path.isdir(traces_dir):
        for root, _, files in os.walk(traces_dir):
            traces += [os.path.join(root, f) for f in sorted(files) if f.endswith((".json", ".json.gz"))]
    else:
        print(f"build_corpus: {traces_dir} absent: synthetic seeds only")
    traces.sort()
    subprocess.run([make_seeds, "corpus", out, *traces], check=True)
    kineto = os.path.join(out, "kineto")
    for i, path in enumerate(traces):
        try:
            doc = trim(path)
        except (OSError, ValueError) as exc:
            print(f"build_corpus: {path}: {exc} (skipped)")
            continue
        name = os.path.basename(path).replace(".json.gz", "").replace(".json", "")
        data = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogateescape")
        with open(os.path.join(kineto, f"real-{name}.json"), "wb") as f:
            f.write(data)
        if i == 0:
            with gzip.open(os.path.join(kineto, f"real-{name}.json.gz"), "wb") as f:
                f.write(data)
    counts = {t: len(os.listdir(os.path.join(out, t))) for t in sorted(os.listdir(out))}
    print("build_corpus: seeds per target:", ", ".join(f"{t} {n}" for t, n in counts.items()))


if __name__ == "__main__":
    main()
