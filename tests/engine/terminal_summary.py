"""What `perftracker analyze` prints (without --quiet) is the report it wrote: every
section by name, the verdict, and each finding numbered in order with its category, its
impact to a tenth of a percent and its sentence -- compared line by line with report.json
(the engine tests otherwise run with --quiet and read only the file)."""
import json
import os
import subprocess
import sys

from engine_common import CLI, SECTIONS, TempDir, run


def main():
    failures = []
    with TempDir() as tmp:
        for fault, extra in (("two_slow", ["--rank", "2,5"]), ("none", []), ("hang", [])):
            job = os.path.join(tmp, fault)
            run("synth", "--fault", fault, "-n", "8", "--format", "summary", "-o", job, *extra)
            out = os.path.join(tmp, fault + "-out")
            p = subprocess.run([CLI, "analyze", "-o", out, job], capture_output=True, text=True)
            with open(os.path.join(out, "report.json")) as f:
                report = json.load(f)
            text = p.stdout
            d = report["diagnosis"]
            want = [f"verdict: {d['verdict']}"] + [
                f"  {i}. [{f['category']}, impact {100 * f['impact']:.1f}%] {f['summary']}"
                for i, f in enumerate(d["findings"], 1)]
            tail = text.split("Diagnosis:\n", 1)[1].splitlines() if "Diagnosis:\n" in text else []
            got = [line.split(") INFO: ", 1)[-1] for line in tail]  # without the log prefix
            got = [line for line in got if line.startswith(("verdict:", "  "))][: len(want)]
            if got != want:
                failures.append(f"{fault}: printed diagnosis\n    {got}\n  != report's\n    {want}")
            missing = [s for s in SECTIONS if f"\n{s}:\n" not in "\n" + text]
            if missing:
                failures.append(f"{fault}: sections not printed: {missing}")
            if p.returncode != (3 if d["verdict"] == "hang" else 0):
                failures.append(f"{fault}: exit {p.returncode} for verdict {d['verdict']}")
            print(f"ok {fault}: {len(d['findings'])} finding(s) printed as reported" if not failures else "")
    if failures:
        sys.exit("FAIL:\n  " + "\n  ".join(failures))
    print("PASS")


if __name__ == "__main__":
    main()
