#!/usr/bin/env python3
"""Whether two analyses wrote the same report: report.json byte for byte except the value of
"generated_at", and every file under parts/ byte for byte. For checking that a change to the
analysis's memory or speed changes no value (issue 21):

  bench/scale/same_reports.py OUT_A OUT_B
"""
import os
import re
import sys

STAMP = re.compile(rb'"generated_at":\s*"[^"]*"')


def report_bytes(out):
    with open(os.path.join(out, "report.json"), "rb") as f:
        return STAMP.sub(b'"generated_at": ""', f.read(), count=1)


def parts(out):
    folder = os.path.join(out, "parts")
    names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    return {n: open(os.path.join(folder, n), "rb").read() for n in names}


def main():
    a, b = sys.argv[1], sys.argv[2]
    problems = []
    if report_bytes(a) != report_bytes(b):
        problems.append("report.json differs")
    pa, pb = parts(a), parts(b)
    if pa.keys() != pb.keys():
        problems.append(f"parts differ in names: {sorted(pa.keys() ^ pb.keys())[:4]}")
    problems += [f"parts/{n} differs" for n in sorted(pa.keys() & pb.keys()) if pa[n] != pb[n]]
    print(f"{a} vs {b}: " + ("same (except generated_at)" if not problems else "; ".join(problems[:8])))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
