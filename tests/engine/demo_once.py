"""Issue 17.6: `make demo` (scripts/demo.sh) says once how to open the page, and prints
the synthetic job's verdict once. Issue 37: the synthetic job's report goes to the build
folder, not among the user's rounds (the default output folder), and the demo says so;
the whole demo prints at most 60 lines (the round's report is the terminal digest). Runs
the real demo: the example job on 4 torch ranks and the trigger. Skips (77) without
Debian's torch or the collector module."""
import os
import shutil
import subprocess
import sys
import tempfile

BUILD = sys.argv[1]
REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def main():
    if not os.path.exists("/usr/bin/python3") or subprocess.run(["/usr/bin/python3", "-c", "import torch"],
                                                                  capture_output=True).returncode != 0:
        print("SKIP: no torch in /usr/bin/python3")
        sys.exit(77)
    out_dir = tempfile.mkdtemp(prefix="pt-demo-once-")
    env = dict(os.environ, PT_DEMO_OUTPUT=out_dir)
    try:
        p = subprocess.run([os.path.join(REPO, "scripts", "demo.sh"), BUILD], capture_output=True, text=True,
                           env=env, timeout=540)
        among_rounds = os.path.exists(os.path.join(out_dir, "synthetic-demo"))
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    text = p.stdout + p.stderr
    failures = []
    if p.returncode != 0:
        failures.append(f"the demo exited {p.returncode}: {text[-2000:]}")
    opens = [line for line in text.splitlines() if "app.py" in line]
    if len(opens) != 1 or not opens[0].startswith("View it: cd "):
        failures.append(f"how to open the page is said {len(opens)} times: {opens}")
    verdicts = [line for line in text.splitlines() if "verdict: degraded" in line]
    if len(verdicts) != 2:  # the synthetic job's (demo:) and the trigger's round (INFO:)
        failures.append(f"the verdict lines: {verdicts}")
    said = [line for line in text.splitlines() if line.startswith("demo: report in ")]
    where = said[0][len("demo: report in "):].split(" ")[0] if said else ""
    if among_rounds or not os.path.realpath(where).startswith(os.path.realpath(BUILD) + os.sep) or \
            not os.path.isfile(os.path.join(where, "report.json")):
        failures.append(f"the synthetic job's report is not in the build folder ({said}; among the rounds: "
                        f"{among_rounds})")
    if len(text.splitlines()) > 60:
        failures.append(f"the demo printed {len(text.splitlines())} lines")
    if failures:
        sys.exit("FAIL: " + "; ".join(failures))
    print("PASS: one 'View it:' line:", opens[0])


main()
