#!/usr/bin/env python3
"""`perftracker display --report OUT/report.json DIR` for a bounded report: DIR gets the
scripts of the parts the report lists (read from OUT/parts/), the data the page's node
drill-down and worker detail load, each the same as its part. What the report names is
not trusted: a file name with a path in it, a part holding another index, a missing
part and a part listed again are each skipped with a warning naming it, nothing is written outside DIR, and the
page is still written.

    report_parts.py PERFTRACKER WORK_DIR"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = "(window.PT_REPORT_PARTS = window.PT_REPORT_PARTS || {})["


def display(cli, report, page):
    run = subprocess.run([cli, "display", "--report", report, "--no-serve", page], capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit("display --report failed (%d): %s" % (run.returncode, run.stderr))
    return run.stderr


def script_part(path):
    with open(path) as f:
        text = f.read()
    assert text.startswith(PREFIX) and text.endswith(";\n"), path
    index, rest = text[len(PREFIX):].split("] = ", 1)
    return int(index), json.loads(rest[:-2])


def main():
    cli, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    out = os.path.join(work, "out")
    os.makedirs(out)
    report = os.path.join(out, "report.json")
    subprocess.check_call([sys.executable, os.path.join(HERE, "make_report.py"), report, "--workers", "5000",
                           "--fault-rank", "77", "--bounded"], stdout=subprocess.DEVNULL)
    with open(report) as f:
        doc = json.load(f)
    files = [f["file"] for f in doc["scale"]["parts"]["files"]]
    assert len(files) == 5, files

    page = os.path.join(work, "page")
    err = display(cli, report, page)
    assert "with the 5 part(s)" in err, err
    for i, name in enumerate(files):
        index, part = script_part(os.path.join(page, "parts", name[:-5] + ".js"))
        with open(os.path.join(out, "parts", name)) as f:
            source = json.load(f)
        assert index == i and part == source, "part %d differs from %s" % (i, name)

    # A hostile report: a path as a file name, a part swapped for another, one missing.
    os.makedirs(os.path.join(work, "elsewhere"))
    doc["scale"]["parts"]["files"][1]["file"] = "../../elsewhere/x.json"
    shutil.copy(os.path.join(out, "parts", files[3]), os.path.join(out, "parts", files[2]))
    os.remove(os.path.join(out, "parts", files[4]))
    with open(report, "w") as f:
        json.dump(doc, f)
    page2 = os.path.join(work, "page2")
    err = display(cli, report, page2)
    for needle in ("part 1: \"../../elsewhere/x.json\" is not a part's file name", "is not part 2 of this report",
                   "part 4: %s: cannot open" % os.path.join(out, "parts", files[4]), "with the 2 part(s)"):
        assert needle in err, "%r not in:\n%s" % (needle, err)
    written = sorted(os.listdir(os.path.join(page2, "parts")))
    assert written == [files[0][:-5] + ".js", files[3][:-5] + ".js"], written
    assert os.listdir(os.path.join(work, "elsewhere")) == []
    assert os.path.isfile(os.path.join(page2, "index.html"))

    # One part listed a thousand times: read once, each repeat named and not read again
    # (each used to be read and parsed before its index was found wrong).
    first = dict(doc["scale"]["parts"]["files"][0])
    doc["scale"]["parts"]["files"] = [dict(first) for _ in range(1000)]
    with open(report, "w") as f:
        json.dump(doc, f)
    err = display(cli, report, os.path.join(work, "page-repeats"))
    assert "with the 1 part(s)" in err and err.count("is listed before; not read again") == 999, err[-2000:]
    assert "part 1: \"%s\" is listed before" % files[0] in err, err[-2000:]

    # A folder name that would drive the terminal (set its title): refused, and printed
    # with its control characters replaced.
    doc["scale"]["parts"]["folder"] = "parts\x1b]0;owned\x07"
    with open(report, "w") as f:
        json.dump(doc, f)
    err = display(cli, report, os.path.join(work, "page3"))
    assert "not a plain folder name" in err, err
    assert "\x1b" not in err and "\x07" not in err, repr(err)
    shutil.rmtree(work, ignore_errors=True)
    print("report_parts: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
