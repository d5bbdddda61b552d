"""analyze on per-worker summaries gives byte-for-byte the report analyze gives on the
traces (SOURCE_DATE_EPOCH pins the timestamp), and the same inputs give the same bytes
twice; summaries stay small."""
import filecmp
import glob
import os
import re
import sys

from engine_common import TRACES, TempDir, run


def report_of(inputs, out):
    run("analyze", "--quiet", "-o", out, *inputs)
    return os.path.join(out, "report.json")


def main():
    with TempDir() as tmp:
        sets = []
        job = os.path.join(tmp, "job")
        run("synth", "--fault", "slow_dataloader", "-n", "8", "-o", job)
        sets.append(("synth", sorted(glob.glob(os.path.join(job, "*.json"))), False))
        committed = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "h200")
        for name in ("native_healthy", "kineto_slowdata_r3"):  # real traces in every clone
            sets.append((name, sorted(glob.glob(os.path.join(committed, name, "*.pt*"))), True))
        if os.path.isdir(TRACES):
            sets.append(("dlrm", sorted(glob.glob(os.path.join(TRACES, "dlrm-8rank", "*.gz"))), True))
        for label, traces, real in sets:
            traces = [t for t in traces if not t.endswith("expected.json")]
            sums = os.path.join(tmp, label + "-sums")
            os.makedirs(sums)
            sizes = []
            for t in traces:
                dest = os.path.join(sums, re.sub(r"(\.json)?(\.gz|\.zst)?$", "", os.path.basename(t)) + ".ptsum")
                run("summarize", t, "-o", dest)
                sizes.append(os.path.getsize(dest))
            a = report_of(traces, os.path.join(tmp, label + "-a"))
            b = report_of(sorted(glob.glob(os.path.join(sums, "*.ptsum"))), os.path.join(tmp, label + "-b"))
            c = report_of(traces, os.path.join(tmp, label + "-c"))
            if not filecmp.cmp(a, b, shallow=False):
                sys.exit(f"FAIL: {label}: report from summaries differs from report from traces ({a} vs {b})")
            if not filecmp.cmp(a, c, shallow=False):
                sys.exit(f"FAIL: {label}: two runs over the same traces differ")
            largest = max(sizes)
            if largest > 64 * 1024:
                sys.exit(f"FAIL: {label}: a summary is {largest} bytes (budget: tens of KB)")
            print(f"ok {label}: identical reports; summaries {min(sizes)}..{largest} bytes")
    print("PASS")


if __name__ == "__main__":
    main()
