"""Inputs that are not one job, or not all of it, and one figure per saving (issue 37,
items 2, 3 and 4), through the CLI:

- mixed: two synthetic jobs of 4 and 8 ranks given together (world sizes 4 and 8, ranks
  0-3 claimed twice): exit 3, diagnosis.inputs "mixed", input_problem says why, and the
  one finding is that sentence (no worker compared or marked); with ../shared, the six
  real traces of unrelated jobs (world sizes 2, 8 and 128, windows thousands of hours
  apart) the issue analysed together.
- one job: the committed h200 jobs, dlrm-8rank (with ../shared) and synthetic jobs of 8
  and 16 ranks: inputs "complete", no input_problem, exit 0 (3 for a hang); one trace of
  a job alone: "partial", not mixed, exit 0.
- partial: a synthetic job's summaries without its slow rank: "partial", input_problem and
  the first finding name the rank, no finding says "check the links"; with the rank, it is
  named first.
- every finding of these reports: the ms per step its sentence gives for its saving is
  saves_ms (as the sentence rounds it), and none saves under 0.05% of the step but a hang,
  a lost rank, the input finding (no workers) or GPU work only its ranks do."""
import glob
import os
import re
import shutil

from engine_common import FAILURES, TRACES, TempDir, analyze, check, check_schema, run

SAVES_NOTHING = 0.0005
# The saving of a finding in its sentence: "saves 4.14 ms per step (23% of the step)",
# "fixing all of them 60.9 ms (10% of the step)".
SAVING = re.compile(r"(\d[\d.]*(?:e[-+]?\d+)?) ms(?: per step)? \((\d[\d.]*)% of the step\)")
H200 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "h200")
MIXED_REAL = ["hta/nccl_data.json.gz", "hta/trace_diff_control.json.gz", "hta/trace_diff_test.json.gz",
              "hta/sampled_rank-0.json.gz", "hta/sampled_rank-1.json.gz", "tracelens/b200_eager_rank0.json.gz"]


def as_sentence_prints(ms):
    """pt_put_ms's figure."""
    return "%.0f" % ms if ms >= 100 else "%.3g" % ms


def check_figures(report, where):
    """One figure per saving, and no finding that saves nothing."""
    for f in report["diagnosis"]["findings"]:
        what = f"{where}: {f['category']} finding {f['summary'][:90]!r}"
        saves = f.get("saves_ms", "absent")
        if f["category"] in ("hang", "lost") or not f["workers"]:
            check(saves is None, f"{what}: saves_ms is null ({saves})")
            continue
        check(isinstance(saves, (int, float)), f"{what}: saves_ms is a number ({saves})")
        if isinstance(saves, (int, float)) and f["category"] != "hardware":  # its sentence is about its metric
            m = SAVING.search(f["summary"])
            check(m is not None and m.group(1) == as_sentence_prints(saves),
                  f"{what}: its sentence says {m.group(1) if m else None} ms, saves_ms {saves}")
        if f["impact"] < SAVES_NOTHING:
            check(f["category"] in ("gpu_compute", "gpu_memory") and not f["all_workers"]
                  and "its GPU may be shared" in f["summary"],
                  f"{what}: a finding that saves nothing ({f['impact']}) is GPU work only its ranks do")


def analysed(inputs, out, want_rc, where):
    rc, report, stderr = analyze(inputs, out)
    check_schema(report, where)
    check(rc == want_rc, f"{where}: exit {rc}, expected {want_rc}")
    check_figures(report, where)
    return report, stderr


def check_mixed(report, stderr, where, evidence):
    d = report["diagnosis"]
    check(d.get("inputs") == "mixed", f"{where}: inputs {d.get('inputs')}")
    problem = d.get("input_problem") or ""
    check(problem.startswith("These inputs are not one job: ") and all(e in problem for e in evidence),
          f"{where}: input_problem names {evidence}: {problem}")
    check(len(d["findings"]) == 1 and d["findings"][0]["summary"] == problem and not d["findings"][0]["workers"],
          f"{where}: the one finding is the input's: {[f['summary'][:80] for f in d['findings']]}")
    check(all(w["status"] in ("normal", "missing", "error") for w in report["workers"]),
          f"{where}: no worker marked: {[(w['rank'], w['status']) for w in report['workers']]}")
    said = "the inputs are not one job" in stderr and "exit status 3" in stderr
    check(said, f"{where}: stderr says why the exit is 3" + ("" if said else f": {stderr[-300:]}"))


def check_one_job(report, where):
    d = report["diagnosis"]
    check(d.get("inputs") == "complete" and d.get("input_problem") is None,
          f"{where}: one whole job ({d.get('inputs')}: {d.get('input_problem')})")


def synth(tmp, name, *args):
    job = os.path.join(tmp, name)
    run("synth", "--quiet", "--format", "summary", "--steps", "3", *args, "-o", job)
    return job


def main():
    with TempDir() as tmp:
        four = synth(tmp, "four", "-n", "4", "--seed", "2")
        eight = synth(tmp, "eight", "-n", "8", "--fault", "slow_dataloader", "--rank", "5", "--seed", "3")
        sixteen = synth(tmp, "sixteen", "-n", "16", "--fault", "two_slow", "--seed", "4")
        hang = synth(tmp, "hang", "-n", "8", "--fault", "hang", "--seed", "5")

        report, stderr = analysed([four, eight], os.path.join(tmp, "mixed"), 3, "synth 4 + 8")
        check_mixed(report, stderr, "synth 4 + 8", ["world sizes 4 and 8", "ranks 0, 1, 2 and 3 are each claimed"])

        for job, rc in ((four, 0), (eight, 0), (sixteen, 0), (hang, 3)):
            name = os.path.basename(job)
            report, _ = analysed([job], os.path.join(tmp, name + "-out"), rc, "synth " + name)
            check_one_job(report, "synth " + name)
        for job in sorted(glob.glob(os.path.join(H200, "*", ""))):
            name = "h200 " + os.path.basename(os.path.dirname(job))
            report, _ = analysed([job], os.path.join(tmp, name.replace(" ", "-")), 0, name)
            check_one_job(report, name)
        one = sorted(glob.glob(os.path.join(H200, "native_healthy", "*.ptrace")))[0]
        report, _ = analysed([one], os.path.join(tmp, "one"), 0, "one trace")
        check(report["diagnosis"].get("inputs") == "partial", f"one trace: inputs {report['diagnosis'].get('inputs')}")

        # The slow rank's summary left out: the others' waiting points at it.
        partial = os.path.join(tmp, "partial")
        os.makedirs(partial)
        for path in glob.glob(os.path.join(eight, "*.ptsum")):
            if not os.path.basename(path).startswith("node0_5_"):
                shutil.copy(path, partial)
        report, _ = analysed([eight], os.path.join(tmp, "whole-out"), 0, "synth eight")
        check(report["diagnosis"]["findings"][0]["workers"] == [5], "synth eight: rank 5 named first")
        report, _ = analysed([partial], os.path.join(tmp, "partial-out"), 0, "synth eight without rank 5")
        d = report["diagnosis"]
        check(d.get("inputs") == "partial" and "rank 5 was not (not given to this analysis)" in (d.get("input_problem") or ""),
              f"partial: input_problem names rank 5: {d.get('input_problem')}")
        first = d["findings"][0] if d["findings"] else {}
        check(first.get("workers") == [5] and first.get("summary", "").startswith(
            "The slowest rank may be among the missing: rank 5 was not analysed"),
            f"partial: the first finding points at rank 5: {first.get('summary')}")
        check(not any("check the links" in f["summary"] for f in d["findings"]), "partial: no 'check the links'")

        if os.path.isdir(TRACES):
            real = [os.path.join(TRACES, p) for p in MIXED_REAL]
            report, stderr = analysed(real, os.path.join(tmp, "mixed-real"), 3, "six unrelated real traces")
            check_mixed(report, stderr, "six unrelated real traces",
                        ["world sizes 2, 8 and 128", "ranks 0 and 1 are each claimed", " h away from the others'"])
            report, _ = analysed([os.path.join(TRACES, "dlrm-8rank")], os.path.join(tmp, "dlrm"), 0, "dlrm-8rank")
            check_one_job(report, "dlrm-8rank")
            for job in sorted(glob.glob(os.path.join(TRACES, "h200", "*", ""))):
                name = "shared h200 " + os.path.basename(os.path.dirname(job))
                report, _ = analysed([job], os.path.join(tmp, name.replace(" ", "-")), 0, name)
                check_one_job(report, name)
        else:
            print(f"note: {TRACES} absent: the real mixed traces and dlrm-8rank are not checked")
    if FAILURES:
        raise SystemExit("FAIL:\n  " + "\n  ".join(FAILURES))
    print("PASS: mixed inputs flagged, whole jobs not, partial ones said, one figure per saving")


if __name__ == "__main__":
    main()
