"""Rare but real inputs no other test gives (issue 18), each checked on its values.

- Ranks only distributedInfo knows: a clean job whose files are renamed (worker-d.json
  ... worker-a.json, no rank in the name): every rank, 0 included, comes from
  distributedInfo, with no warning and exit 0, each file keeping its own rank.
- Traces with no distributedInfo at all (no world size anywhere): ranks in file order,
  each one warned about, world size 4 from the count, a healthy verdict, exit 0.
- A trace that repeats ProfilerStep numbers on a second thread (Kineto does, on some
  threads): one step per number, the earliest non-empty copy -- so a later, shorter copy
  changes nothing, an earlier one of zero length is skipped, and an earlier non-empty one
  is the step (its duration, recomputed here).
- A healthy job whose communication is a large share of the step (64 ranks, one GPU per
  host, a small model): no worker named or marked, and any all-worker finding is about
  communication and costs no more than the exposed communication recomputed here.
"""
import json
import os
import shutil
import statistics
import sys

from engine_common import analyze, check, check_schema, FAILURES, run, TempDir

def ranks_from_distributed_info(tmp):
    job = os.path.join(tmp, "synth4")
    run("synth", "-n", "4", "--seed", "1", "-o", job)
    renamed = os.path.join(tmp, "renamed")
    os.makedirs(renamed)
    for rank, letter in enumerate("dcba"):  # rank 0 sorts last by name
        shutil.copy(os.path.join(job, f"node0_{rank}_{10000 + rank}.json"), os.path.join(renamed, f"worker-{letter}.json"))
    rc, report, stderr = analyze([renamed], os.path.join(tmp, "renamed-out"))
    check_schema(report, "renamed")
    check(rc == 0, f"renamed: exit 0 ({rc})")
    got = sorted((w["rank"], w["name"], w["rank_source"]) for w in report["workers"])
    want = [(rank, f"worker-{letter}.json", "distributedInfo") for rank, letter in enumerate("dcba")]
    check(got == want, f"renamed: ranks from distributedInfo, 0 included ({got})")
    check(report.get("warnings") == [] and "warning" not in stderr.lower(),
          f"renamed: no warning ({report.get('warnings')} {stderr.strip()[-200:]})")
    check(report["job"]["world_size"] == 4 and report["job"]["missing_ranks"] == [], f"renamed: job {report['job']}")


def no_distributed_info(tmp):
    job = os.path.join(tmp, "synth4")  # from ranks_from_distributed_info
    bare = os.path.join(tmp, "bare")
    os.makedirs(bare)
    for rank in range(4):
        name = f"node0_{rank}_{10000 + rank}.json"
        with open(os.path.join(job, name)) as f:
            doc = json.load(f)
        del doc["distributedInfo"]
        with open(os.path.join(bare, name), "w") as f:
            json.dump(doc, f)
    rc, report, _ = analyze([bare], os.path.join(tmp, "bare-out"))
    check_schema(report, "bare")
    check(rc == 0 and report["diagnosis"]["verdict"] == "healthy", f"no distributedInfo: healthy, exit 0 ({rc})")
    got = [(w["rank"], w["name"], w["rank_source"]) for w in sorted(report["workers"], key=lambda w: w["rank"])]
    check(got == [(r, f"node0_{r}_{10000 + r}.json", "file order") for r in range(4)],
          f"no distributedInfo: ranks in file order ({got})")
    check(len(report["warnings"]) == 4 and all("file order" in w for w in report["warnings"]),
          f"no distributedInfo: each worker warned about once ({report['warnings']})")
    check(report["job"]["world_size"] == 4, f"no distributedInfo: world size 4 ({report['job']})")


def summarize_steps(path):
    _, out, _ = run("summarize", "--json", path)
    s = json.loads(out)
    return [(x["step"], x["ms"]) for x in s["steps"]], s.get("warnings", [])


def repeated_step_numbers(tmp):
    job = os.path.join(tmp, "synth1")
    run("synth", "-n", "2", "--seed", "2", "-o", job)
    original = os.path.join(job, "node0_1_10001.json")
    with open(original) as f:
        doc = json.load(f)
    steps = [e for e in doc["traceEvents"] if e.get("cat") == "user_annotation"
             and e["name"].startswith("ProfilerStep#")]
    want, _ = summarize_steps(original)
    check([n for n, _ in want] == [int(e["name"].split("#")[1]) for e in steps], "original: one row per step")

    def variant(name, copies):
        d = json.loads(json.dumps(doc))
        d["traceEvents"] += copies
        path = os.path.join(tmp, name + ".json")
        with open(path, "w") as f:
            json.dump(d, f)
        return summarize_steps(path)

    later = [dict(e, tid=e["tid"] + 77, ts=e["ts"] + 1000, dur=e["dur"] / 3) for e in steps]
    got, warnings = variant("later-copies", later)
    check(got == want and not warnings, f"a later, shorter copy on another thread changes nothing ({got} vs {want})")
    empty = [dict(e, tid=e["tid"] + 78, ts=e["ts"] - 500, dur=0) for e in steps]
    got, _ = variant("empty-copies", empty)
    check(got == want, f"an earlier copy of zero length is skipped ({got} vs {want})")
    earlier = [dict(e, tid=e["tid"] + 79, ts=e["ts"] - 500, dur=e["dur"] / 2) for e in steps[1:2]]
    got, _ = variant("earlier-copy", earlier)
    expect = list(want)
    expect[1] = (want[1][0], round(steps[1]["dur"] / 2 / 1000, 6))
    check(len(got) == len(want) and [n for n, _ in got] == [n for n, _ in want]
          and abs(got[1][1] - expect[1][1]) < 1e-5 and got[0] == want[0] and got[2] == want[2],
          f"an earlier non-empty copy is that step ({got[1]} vs {expect[1]}), the others unchanged")


def communication_heavy_healthy_job(tmp):
    job = os.path.join(tmp, "comm-heavy")
    run("synth", "-n", "64", "--gpus-per-node", "1", "--layers", "2", "--seed", "3", "--format", "summary", "-o", job)
    _, report, _ = analyze([job], os.path.join(tmp, "comm-heavy-out"))
    check_schema(report, "comm-heavy")
    share = statistics.median(w["breakdown"]["communication_ms"] / w["step_time_ms"] for w in report["workers"])
    check(share > 0.3, f"comm-heavy: communication is {share:.0%} of the step, as the test needs")
    findings = report["diagnosis"]["findings"]
    named = [f for f in findings if not f["all_workers"]]
    check(not named, f"comm-heavy: no finding names workers ({[(f['category'], f['workers']) for f in named]})")
    marked = [w["rank"] for w in report["workers"] if w["status"] != "normal"]
    check(not marked, f"comm-heavy: every worker normal ({marked})")
    for f in findings:
        check(f["category"] == "communication" and f["impact"] <= share + 1e-6,
              f"comm-heavy: the all-worker finding is communication, impact {f['impact']:.3f} <= share {share:.3f}")


def main():
    with TempDir() as tmp:
        ranks_from_distributed_info(tmp)
        no_distributed_info(tmp)
        repeated_step_numbers(tmp)
        communication_heavy_healthy_job(tmp)
    if FAILURES:
        sys.exit(f"FAIL: {len(FAILURES)} check(s) failed")
    print("PASS")


if __name__ == "__main__":
    main()
