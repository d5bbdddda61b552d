"""`perftracker diff`'s terminal summary against its diff.json, figure by figure.

What the terminal prints must be what diff.json holds: the verdict's change in ms and in
percent (of BEFORE's step, which this test recomputes from before_ms and after_ms, so a
percentage of the wrong run or before and after swapped shows), the step and class rows,
the functions added and removed with their time and calls, and the rank a function is new
on. Two synth pairs, each diffed both ways: a slow data loader on rank 3 (slower, then
faster) and a blocking copy on rank 3 (functions added, then removed)."""
import json
import os
import re

from engine_common import check, FAILURES, run, TempDir

LABELS = {"compute": "GPU compute", "memory": "GPU memory ops", "communication": "communication",
          "runtime": "CUDA runtime", "python": "Python", "idle": "idle"}


def shown(ms):
    """The terminal's rounding (diff_report.c): three significant digits at most, no exponent."""
    a = abs(ms)
    return "%.*f" % (0 if a >= 100 else 1 if a >= 10 else 2 if a >= 1 else 3, ms)


def shown_pct(pct):
    return "%+.*f%%" % (0 if abs(pct) >= 100 else 1, pct)


def synth(tmp, name, *args):
    out = os.path.join(tmp, name)
    run("synth", "-n", "8", "--format", "summary", "-o", out, *args)
    return out


def diff(tmp, name, before, after):
    out = os.path.join(tmp, "diff-" + name)
    _, stdout, _ = run("diff", "-o", out, before, after)
    with open(os.path.join(out, "diff.json")) as f:
        return json.load(f), stdout


def check_verdict(name, d, text):
    st = d["step_time"]
    delta = st["after_ms"] - st["before_ms"]
    pct = 100 * delta / st["before_ms"]
    m = re.search(r"AFTER is ([\d.]+) ms \(([\d.]+)%\) (slower|faster) per step than BEFORE \(([\d.]+) ms → ([\d.]+) ms\)",
                  text)
    check(m is not None, f"{name}: the verdict line gives the change ({text[:300]})")
    if not m:
        return
    check(m.group(3) == ("slower" if delta > 0 else "faster"), f"{name}: {m.group(3)} for a change of {delta:+.2f} ms")
    check(abs(float(m.group(1)) - abs(delta)) <= 0.06 * max(1, abs(delta)) / 10 + 0.051,
          f"{name}: the verdict's {m.group(1)} ms is |after - before| = {abs(delta):.3f}")
    check(abs(float(m.group(2)) - abs(pct)) <= 0.051, f"{name}: the verdict's {m.group(2)}% is of BEFORE's step "
          f"({abs(pct):.2f}%; of AFTER's it would be {100 * abs(delta) / st['after_ms']:.2f}%)")
    before, after = float(m.group(4)), float(m.group(5))
    check(abs(before - st["before_ms"]) < 0.051 * max(1, st["before_ms"] / 10) and
          abs(after - st["after_ms"]) < 0.051 * max(1, st["after_ms"] / 10),
          f"{name}: BEFORE → AFTER reads {before} → {after}, diff.json {st['before_ms']} → {st['after_ms']}")


def check_rows(name, d, text):
    rows = [("step time", d["step_time"])] + [(LABELS[c["class"]], c) for c in d["classes"]]
    for label, c in rows:
        line = next((l for l in text.splitlines() if l.startswith("  " + label + " ")), None)
        check(line is not None, f"{name}: a row for {label}")
        if not line:
            continue
        want = [shown(c["before_ms"]) + " ms", shown(c["after_ms"]) + " ms", "%+.*f ms" % (
            len(shown(c["delta_ms"]).split(".")[1]) if "." in shown(c["delta_ms"]) else 0, c["delta_ms"])]
        if c.get("delta_pct") is not None:
            want.append("(" + shown_pct(c["delta_pct"]) + ")")
        check(all(w in line for w in want), f"{name}: {label}'s row shows {want} ({line.strip()})")
        check(line.rstrip().endswith("*") == bool(c["significant"]), f"{name}: {label}'s * says whether it counts")


def check_listed(name, d, text, key, title, side_ms, side_calls):
    listed = d[key]
    header = re.search(r"^%s \((\d+); time and calls per step on the median (BEFORE|AFTER) worker\):$" % title, text,
                       re.M)
    if not listed:
        check(header is None, f"{name}: no '{title}' list when diff.json has none")
        return 0
    check(header is not None and int(header.group(1)) == d[key + "_count"],
          f"{name}: '{title}' counts {d[key + '_count']} ({header.group(0) if header else 'no header'})")
    lines = text[header.end():].split("\n\n")[0].splitlines()[1:] if header else []
    entries = [l for l in lines if not l.startswith("      on rank") and not l.startswith("  ...")]
    check(len(entries) == min(5, len(listed)), f"{name}: {len(entries)} of {len(listed)} {key} shown")
    for f, line in zip(listed, entries):
        want = [LABELS[f["class"]], shown(f[side_ms]) + " ms", "%d calls" % round(f[side_calls]), f["name"][:40]]
        check(all(w in line for w in want), f"{name}: {key} {f['name'][:40]} shows {want} ({line.strip()})")
    with_ranks = [f for f in listed[:5] if f["ranks"]]
    for f in with_ranks:
        r = f["ranks"][0]
        note = "on rank %d: %+.*f ms" % (r["rank"], len(shown(r["delta_ms"]).split(".")[1])
                                         if "." in shown(r["delta_ms"]) else 0, r["delta_ms"])
        check(note in text, f"{name}: {key} {f['name'][:40]} says the rank it is new on ({note})")
    return len(with_ranks)


def main():
    with TempDir() as tmp:
        healthy = synth(tmp, "healthy")
        slow = synth(tmp, "slow", "--fault", "slow_dataloader", "--rank", "3")
        copy = synth(tmp, "copy", "--fault", "blocking_dtoh", "--rank", "3")
        noted = 0
        for name, before, after in (("slower", healthy, slow), ("faster", slow, healthy),
                                    ("added", healthy, copy), ("removed", copy, healthy)):
            d, text = diff(tmp, name, before, after)
            check_verdict(name, d, text)
            check_rows(name, d, text)
            noted += check_listed(name, d, text, "added", "Added in AFTER", "after_ms", "after_calls")
            noted += check_listed(name, d, text, "removed", "Removed in AFTER", "before_ms", "before_calls")
        check(noted >= 2, f"the copy new on rank 3 is noted with its rank when added and when removed ({noted})")
    if FAILURES:
        print("%d checks failed" % len(FAILURES))
        return 1
    print("diff_terminal: ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
