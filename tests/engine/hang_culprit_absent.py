"""A hang whose culprit's trace is absent (issue 18): the rank that stopped died with its
trace, or never wrote one. The others' traces alone must still give the hang: the verdict,
exit 3, the missing rank named (job.missing_ranks, a warning, the sentence) and the call
the others are blocked in -- the one synth's answer key gives (expected.json's hang
group and seq), which is the first call the waiting ranks have not completed: NCCL ranks
issue the later calls too, but block in that one.

Failed before src/diagnose/hangs.c's missing_of placed such a hang where the waiting ranks
block (their earliest call in flight): it named their LAST issued call (#52 where the key
says #49)."""
import json
import os
import re
import sys

from engine_common import analyze, check, check_schema, FAILURES, run, TempDir

def case(tmp, name, *args):
    job = os.path.join(tmp, name)
    run("synth", "--fault", "hang", "-o", job, *args)
    with open(os.path.join(job, "expected.json")) as f:
        want = json.load(f)["findings"][0]
    culprit = want["workers"][0]
    for f in os.listdir(job):
        if re.match(rf"node\d+_{culprit % 8}_{10000 + culprit}\.", f):
            os.remove(os.path.join(job, f))
    rc, report, _ = analyze([job], os.path.join(tmp, name + "-out"))
    check_schema(report, name)
    d = report["diagnosis"]
    check(rc == 3 and d["verdict"] == "hang", f"{name}: a hang, exit 3 ({rc}, {d['verdict']})")
    check(report["job"]["missing_ranks"] == [culprit], f"{name}: rank {culprit} missing ({report['job']['missing_ranks']})")
    check(any(str(culprit) in w for w in report["warnings"]), f"{name}: a warning names rank {culprit}")
    first = d["findings"][0] if d["findings"] else {}
    hang = (first.get("evidence") or {}).get("hang") or {}
    check(first.get("category") == "hang" and hang.get("kind") == "missing", f"{name}: a 'missing' hang first")
    check(f"Rank {culprit} " in first.get("summary", ""), f"{name}: the sentence names rank {culprit}")
    want_hang = want["hang"]
    check(hang.get("group") == want_hang["group"] and hang.get("seq") == want_hang["seq"],
          f"{name}: blocked in group {want_hang['group']} call #{want_hang['seq']} "
          f"(analysis: group {hang.get('group')} #{hang.get('seq')})")


def main():
    with TempDir() as tmp:
        case(tmp, "summary-8", "-n", "8", "--seed", "1", "--format", "summary")
        case(tmp, "kineto-8", "-n", "8", "--seed", "4", "--rank", "3")
        case(tmp, "summary-32", "-n", "32", "--seed", "5", "--rank", "17", "--format", "summary")
    if FAILURES:
        sys.exit(f"FAIL: {len(FAILURES)} check(s) failed")
    print("PASS")


if __name__ == "__main__":
    main()
