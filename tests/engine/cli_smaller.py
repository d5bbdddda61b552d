"""Issue 17.6, the smaller things a new user meets at the terminal, through the real CLI:
--quiet keeps the verdict (analyze: the verdict and findings; diff: the verdict line);
`--coordinator 127.0.0.1:1` is answered about that address, not about "where the
environment puts the coordinator"; with --verbose (the sections' JSON) the terminal says
what abnormal_workers means where it means "above 1%" (every worker can be listed there)."""
import json
import os
import re
import sys

from engine_common import check, FAILURES, require_traces, run, TRACES, TempDir

def quiet_keeps_the_verdict(tmp):
    job = os.path.join(TRACES, "h200", "native_healthy")
    rc, out, _ = run("analyze", "--quiet", "-o", os.path.join(tmp, "a"), job)
    with open(os.path.join(tmp, "a", "report.json")) as f:
        diagnosis = json.load(f)["diagnosis"]
    verdict = re.findall(r"INFO: verdict: (\w+)\n", out)
    numbered = re.findall(r"^  (\d+)\. \[", out, re.M)
    check(verdict == [diagnosis["verdict"]] and numbered == [str(i + 1) for i in range(len(diagnosis["findings"]))]
          and diagnosis["findings"] and diagnosis["findings"][0]["summary"] in out,
          f"analyze --quiet prints the verdict ({verdict}) and its {len(numbered)} findings")
    check("GPU Compute:" not in out and "abnormal_workers" not in out, "analyze --quiet prints no report section")
    control = os.path.join(TRACES, "hta", "trace_diff_control.json.gz")
    test = os.path.join(TRACES, "hta", "trace_diff_test.json.gz")
    rc, out, _ = run("diff", "--quiet", "-o", os.path.join(tmp, "d"), control, test)
    with open(os.path.join(tmp, "d", "diff.json")) as f:
        v = json.load(f)["verdict"]
    check(out == f"Verdict ({v['change']}): {v['sentence']}\n",
          "diff --quiet prints the verdict line alone: " + out[:100])


def coordinator_named_by_the_flag(tmp):
    rc, out, err = run("--trigger-on", "--auto-analyze", "--coordinator", "127.0.0.1:1", "--output-dir",
                       os.path.join(tmp, "t"), check=False)
    check(rc == 1 and "no coordinator answers at 127.0.0.1:1, the address --coordinator names" in err
          and "environment" not in err and "MASTER_PORT + 1" in err and not os.path.exists(os.path.join(tmp, "t")),
          f"--coordinator 127.0.0.1:1 is answered about that address (exit {rc}): {err.strip()[:200]}")


def abnormal_workers_said(tmp):
    job = os.path.join(TRACES, "dlrm-8rank")
    rc, out, _ = run("analyze", "--verbose", "-o", os.path.join(tmp, "dlrm"), job)  # the sections' JSON
    with open(os.path.join(tmp, "dlrm", "report.json")) as f:
        report = json.load(f)
    listed = report["CUDA Runtime"]["cudaLaunchKernel"]["abnormal_workers"]
    # The report lists all 8 ranks there: each one's ratio is above the threshold.
    check(len(listed) == 8 and all(r > 0.01 for r in listed.values()), "cudaLaunchKernel: all 8 workers above 0.01")
    legend = re.findall(r"\n  \(abnormal_workers: the workers whose bottleneck ratio .*? is above 0\.01 \(1%\), "
                        r"with their ratio; not a comparison between workers, so every worker can be listed\)\n"
                        r"(\w[^:\n]*):\n", out)
    check(legend == ["Communication", "Python functions"],
          f"the terminal says what abnormal_workers means after GPU memory operations and CUDA Runtime: {legend}")


def main():
    require_traces()
    with TempDir() as tmp:
        quiet_keeps_the_verdict(tmp)
        coordinator_named_by_the_flag(tmp)
        abnormal_workers_said(tmp)
    if FAILURES:
        sys.exit(f"FAIL: {len(FAILURES)} check(s) failed")
    print("PASS")


main()
