"""`perftracker diff` end to end on synthetic pairs with a known change.

`perftracker synth` writes a healthy job and jobs with one injected fault; synth's own answer
key (expected.json) says which rank and function the fault is in. The diff of healthy
against faulty must name that rank and function, whatever form the runs take (traces,
summaries, report.json, analyze output directories); a job against itself or against
another healthy seed must show no significant change; bad command lines and inputs get a
clear error and the right exit status."""
import json
import os
import sys

from engine_common import check, FAILURES, run, TempDir

def synth(tmp, name, *args):
    out = os.path.join(tmp, name)
    run("synth", "-n", "8", "-o", out, *args)
    return out


def expected(job):
    with open(os.path.join(job, "expected.json")) as f:
        return json.load(f)["findings"][0]


def diff(tmp, name, before, after, expect_rc=0):
    out = os.path.join(tmp, "diff-" + name)
    rc, stdout, stderr = run("diff", "-o", out, before, after, check=False)
    check(rc == expect_rc, f"{name}: exit status {rc} (expected {expect_rc})" + ("" if rc == expect_rc else stderr[-600:]))
    with open(os.path.join(out, "diff.json")) as f:
        return json.load(f), stdout, out


def no_significant_change(name, d):
    step = d["step_time"]
    changed = [c["class"] for c in d["classes"] if c["significant"] or c["ranks"]]
    listed = [f["name"] for f in d["added"] + d["removed"] if f["significant"]]
    check(d["verdict"]["change"] == "unchanged" and not step["significant"],
          f"{name}: unchanged ({d['verdict']['sentence']})")
    check(not changed and not d["functions"] and d["functions_changed"] == 0 and not listed,
          f"{name}: no class, function, addition or removal beyond noise ({changed} {listed[:3]})")
    check(d["verdict"]["cause"] is None, f"{name}: no cause named")


def names_the_fault(name, d, fault):
    cause = d["verdict"]["cause"] or {}
    check(d["verdict"]["change"] == "slower", f"{name}: slower ({d['verdict']['sentence'][:160]})")
    check(cause.get("function") == fault["function"], f"{name}: cause is the injected function "
          f"({str(cause.get('function'))[:80]} vs {fault['function'][:80]})")
    check(cause.get("ranks") == fault["workers"], f"{name}: cause names rank(s) {fault['workers']} ({cause.get('ranks')})")
    listed = [f for f in d["functions"] if f["name"] == fault["function"]]
    check(bool(listed) and any(r["rank"] in fault["workers"] and r["delta_ms"] > 0 for r in listed[0]["ranks"]),
          f"{name}: the function is listed with its rank's change")


def check_page(name, out):
    display = os.path.join(out, "PerfDisplay")
    with open(os.path.join(display, "data.js")) as f:
        data = f.read()
    check(os.path.exists(os.path.join(display, "diff.json")) and not os.path.exists(os.path.join(display, "report.json")),
          f"{name}: PerfDisplay keeps the diff as diff.json")
    check(data.startswith("/*") and "window.PT_REPORT = " in data and "<" not in data.split("*/", 1)[1],
          f"{name}: data.js holds the diff, HTML-safe")
    check(os.path.exists(os.path.join(display, "assets", "diff.js")), f"{name}: the page has its diff view")


def main():
    with TempDir() as tmp:
        healthy = synth(tmp, "healthy", "--seed", "1")
        healthy_again = synth(tmp, "healthy-again", "--seed", "1")
        other_seed = synth(tmp, "healthy-seed2", "--seed", "2")
        slow_gpu = synth(tmp, "slow_gpu", "--fault", "slow_gpu")
        slow_data = synth(tmp, "slow_dataloader", "--fault", "slow_dataloader")

        d, stdout, out = diff(tmp, "self", healthy, healthy_again)
        no_significant_change("job against itself", d)
        check("Verdict (unchanged)" in stdout, "self: the terminal summary gives the verdict")
        d, _, _ = diff(tmp, "seed", healthy, other_seed)
        no_significant_change("another healthy seed", d)

        d, stdout, out = diff(tmp, "slow_gpu", healthy, slow_gpu)
        fault = expected(slow_gpu)
        names_the_fault("healthy -> slow_gpu", d, fault)
        check(d["comparison"] == "rank by rank", "slow_gpu: same ranks compare rank by rank")
        check("Verdict (slower)" in stdout and f"Rank {fault['workers'][0]}" in stdout,
              "slow_gpu: the terminal summary names the rank")
        check(any(f["function"] == fault["function"] for f in d["findings"]["new"]),
              "slow_gpu: AFTER's diagnosis gained the finding")
        check_page("slow_gpu", out)
        d, _, _ = diff(tmp, "fixed", slow_gpu, healthy)
        check(d["verdict"]["change"] == "faster" and (d["verdict"]["cause"] or {}).get("function") == fault["function"],
              "slow_gpu -> healthy: faster, and says what was fixed")

        d, _, _ = diff(tmp, "slow_dataloader", healthy, slow_data)
        names_the_fault("healthy -> slow_dataloader", d, expected(slow_data))

        # Summaries (.ptsum), as the collector's workers send them.
        sum_healthy = synth(tmp, "sum-healthy", "--format", "summary")
        sum_slow = synth(tmp, "sum-slow", "--format", "summary", "--fault", "slow_gpu")
        d, _, _ = diff(tmp, "summaries", sum_healthy, sum_slow)
        check(d["before"]["source"] == "summaries" and d["after"]["source"] == "summaries", "summaries: source named")
        names_the_fault("summaries", d, expected(sum_slow))

        # report.json inputs: an analyze output directory, or the file itself.
        reports = {}
        for job in (healthy, slow_data):
            reports[job] = os.path.join(tmp, "report-" + os.path.basename(job))
            run("analyze", "--quiet", "-o", reports[job], job)
        d, _, _ = diff(tmp, "reports", reports[healthy], reports[slow_data])
        check(d["before"]["source"] == "report" and any("report.json" in n for n in d["notes"]),
              "reports: source named, and a note says what a report lacks")
        names_the_fault("reports", d, expected(slow_data))
        d, _, _ = diff(tmp, "report-vs-traces", os.path.join(reports[healthy], "report.json"), healthy)
        no_significant_change("a report against its own traces", d)

        # Different sizes: per-worker medians.
        four = os.path.join(tmp, "four")
        run("synth", "-n", "4", "-o", four)
        d, _, _ = diff(tmp, "sizes", healthy, four)
        check(d["comparison"] == "median worker" and any("per-worker medians" in n for n in d["notes"]),
              "8 against 4 workers: compared by the median worker, and said so")

        # An unreadable worker: the rest are compared, status 3, named in warnings.
        broken = synth(tmp, "broken", "--seed", "1")
        with open(os.path.join(broken, "node0_3_10003.json"), "w") as f:
            f.write('{"traceEvents": [')
        d, _, _ = diff(tmp, "broken", healthy, broken, expect_rc=3)
        check(d["after"]["workers"] == 7 and any("node0_3_10003.json" in w for w in d["warnings"]),
              "unreadable worker: 7 compared, the file named in warnings")

        # Bad command lines and inputs.
        for args, rc, says in [((healthy,), 2, "usage"), ((healthy, healthy, healthy), 2, "third"),
                               ((healthy, os.path.join(tmp, "nowhere")), 1, "no such file"),
                               ((healthy, os.path.join(tmp, "diff-self", "diff.json")), 1, "is a diff"),
                               ((healthy, os.path.join(tmp, "diff-self")), 1, "holds a diff")]:
            got, _, err = run("diff", "-o", os.path.join(tmp, "bad"), *args, check=False)
            check(got == rc and says in err, f"diff {' '.join(os.path.basename(a) for a in args)}: status {got}, "
                  f"says '{says}'" + ("" if says in err else f" ({err.strip()[-300:]})"))
    if FAILURES:
        sys.exit(f"FAIL: {len(FAILURES)} check(s) failed")
    print("PASS")


if __name__ == "__main__":
    main()
