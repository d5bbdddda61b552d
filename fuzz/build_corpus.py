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
3. A target whose fuzz/<target>.options sets max_len (scripts/fuzz.sh passes it to
   libFuzzer, which cuts longer inputs, and a cut JSON document or summary is only an
   error) gets a fitted copy, "fit-<name>", of each JSON seed longer than that: fewer
   events per category, then shorter lists and strings, until it fits. The full-size
   seeds stay, for the replay tests.
"""
import configparser
import gzip
import json
import os
import subprocess
import sys

EVENTS_PER_CATEGORY = 12
FUZZ_DIR = os.path.dirname(os.path.abspath(__file__))


def trim(path, per_category=EVENTS_PER_CATEGORY):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="surrogateescape") as f:
        doc = json.load(f)
    return trim_doc(doc, per_category)


def trim_doc(doc, per_category):
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    kept, kept_per = [], {}
    for ev in events:
        if not isinstance(ev, dict):
            continue
        key = (ev.get("ph"), ev.get("cat"))
        if kept_per.get(key, 0) < per_category or str(ev.get("name", "")).startswith("ProfilerStep#"):
            kept_per[key] = kept_per.get(key, 0) + 1
            kept.append(ev)
    if isinstance(doc, dict):
        doc = dict(doc)
        doc["traceEvents"] = kept
        return doc
    return kept


def encode(doc):
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogateescape")


def max_len(target):
    """The max_len of fuzz/<target>.options, or None."""
    options = configparser.ConfigParser()
    options.read(os.path.join(FUZZ_DIR, f"{target}.options"))
    return options.getint("libfuzzer", "max_len", fallback=None)


def shorten(value, items, chars, top=True):
    """value with every list cut to items, every object to 4 x items members (a trace's
    top level, top=True, keeps all of its) and every string to chars."""
    if isinstance(value, list):
        return [shorten(v, items, chars, False) for v in value[:items]]
    if isinstance(value, dict):
        members = list(value.items()) if top else list(value.items())[: 4 * items]
        return {k: shorten(v, items, chars, False) for k, v in members}
    if isinstance(value, str):
        return value[:chars]
    return value


def fitted(doc, limit):
    """The first of ever smaller versions of doc that encodes within limit, or None."""
    trace = isinstance(doc, dict) and "traceEvents" in doc
    tries = [trim_doc(doc, n) for n in (3, 2, 1)] if trace else []
    tries += [shorten(doc, items, chars, trace) for items, chars in ((8, 80), (4, 48), (2, 32), (1, 24))]
    for t in tries:
        if len(encode(t)) <= limit:
            return t
    return None


def fit_seeds(out):
    """Adds fit-<name> beside every JSON seed longer than its target's max_len."""
    for target in sorted(os.listdir(out)):
        limit = max_len(target)
        folder = os.path.join(out, target)
        if not limit or not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if not name.endswith(".json") or os.path.getsize(path) <= limit:
                continue
            with open(path, "rb") as f:
                try:
                    doc = json.loads(f.read().decode("utf-8", "surrogateescape"))
                except ValueError:
                    continue
            small = fitted(doc, limit)
            if small is not None:
                with open(os.path.join(folder, "fit-" + name), "wb") as f:
                    f.write(encode(small))


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
        data = encode(doc)
        with open(os.path.join(kineto, f"real-{name}.json"), "wb") as f:
            f.write(data)
        if i == 0:
            with gzip.open(os.path.join(kineto, f"real-{name}.json.gz"), "wb") as f:
                f.write(data)
    fit_seeds(out)
    counts = {t: len(os.listdir(os.path.join(out, t))) for t in sorted(os.listdir(out))}
    print("build_corpus: seeds per target:", ", ".join(f"{t} {n}" for t, n in counts.items()))


if __name__ == "__main__":
    main()
