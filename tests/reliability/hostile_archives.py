#!/usr/bin/env python3
"""`perftracker analyze` on tar archives of summaries (a large round's summaries.tar),
made here with Python's tarfile, not with our writer.

usage: hostile_archives.py WORKDIR   (PT_CLI: the perftracker binary)

A 4-worker job (`perftracker synth`, `perftracker summarize`: one .ptsum each):
  - the four in an archive: the same report as the folder of files (every key but the
    time it was made), exit status 0;
  - with a symlink member to /etc/passwd, a folder, a member named ../../x.ptsum holding
    bytes that are no summary, and a trace-named member: the four analysed; the symlink
    and folder not read (a note counts them), the bogus summary named as an unreadable
    input with its reason (exit 3), nothing read outside the archive;
  - a checksum broken in the third header: the two members before it analysed, the
    archive named as damaged among the unreadable inputs, in the report's warnings too
    (exit 3);
  - cut inside the last member's data (a collector that died): the three whole members
    analysed, a note that it has no end marker, exit 0;
  - not an archive at all (a .tar of text): one unreadable input, nothing analysed,
    exit 1; a folder holding only an empty archive: nothing to analyse, exit 1;
  - a member of 3 KB whose payload says and yields 100 MiB, under
    PERFTRACKER_ANALYZE_MEMORY_MB=64: refused by name for its memory share as its payload
    grows past it (it used to be decompressed whole, then refused as no summary), the
    four analysed, exit 3.
"""
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile

import summary_bombs

CLI = os.environ.get("PT_CLI", "perftracker")
TIMEOUT_S = 300
STEMS = [f"node0_{rank}_{10000 + rank}" for rank in range(4)]


def run(args):
    return subprocess.run([CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          errors="replace", timeout=TIMEOUT_S)


def check(cond, what, p=None):
    if not cond:
        raise AssertionError(what + ("\n--- stderr ---\n" + p.stderr[-3000:] if p is not None else ""))


def make_summaries(work):
    traces, summaries = os.path.join(work, "traces"), os.path.join(work, "summaries")
    shutil.rmtree(traces, ignore_errors=True)
    shutil.rmtree(summaries, ignore_errors=True)
    p = run(["synth", "-n", "4", "--steps", "3", "--layers", "1", "-o", traces])
    check(p.returncode == 0, "synth", p)
    os.makedirs(summaries)
    for stem in STEMS:
        p = run(["summarize", os.path.join(traces, stem + ".json"), "-o", os.path.join(summaries, stem + ".ptsum")])
        check(p.returncode == 0, "summarize " + stem, p)
    return summaries


def archive(path, summaries, extra=()):
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as t:
        for stem in STEMS:
            t.add(os.path.join(summaries, stem + ".ptsum"), arcname=stem + ".ptsum")
        for info, data in extra:
            t.addfile(info, io.BytesIO(data) if data is not None else None)


def analyze(work, name, *inputs, env=None):
    out = os.path.join(work, "out-" + name)
    shutil.rmtree(out, ignore_errors=True)
    p = subprocess.run([CLI, "analyze", "--quiet", "-j", "2", "-o", out, *inputs], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, errors="replace", timeout=TIMEOUT_S,
                       env={**os.environ, **(env or {})})
    report = None
    if os.path.exists(os.path.join(out, "report.json")):
        with open(os.path.join(out, "report.json")) as f:
            report = json.load(f)
    return p, report


def analysed_ranks(report):
    return sorted(w["rank"] for w in report["workers"] if w["status"] not in ("error", "missing"))


def without_time(report):
    report = dict(report)
    report.pop("generated_at", None)
    return json.dumps(report, sort_keys=True)


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    summaries = make_summaries(work)

    good = os.path.join(work, "good", "summaries.tar")
    os.makedirs(os.path.dirname(good), exist_ok=True)
    archive(good, summaries)
    p_dir, from_files = analyze(work, "files", summaries)
    p, from_archive = analyze(work, "good", os.path.dirname(good))
    check(p_dir.returncode == 0 and p.returncode == 0, "good: exit %d / %d" % (p_dir.returncode, p.returncode), p)
    check(without_time(from_files) == without_time(from_archive), "good: the archive's report differs from the files'")
    check(analysed_ranks(from_archive) == [0, 1, 2, 3], "good: ranks %s" % analysed_ranks(from_archive))

    hostile = os.path.join(work, "hostile.tar")
    link = tarfile.TarInfo("node0_7_10007.ptsum")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    folder = tarfile.TarInfo("evil")
    folder.type = tarfile.DIRTYPE
    bogus_bytes = b"PTSUMRY\n" + b"\xff" * 100
    bogus = tarfile.TarInfo("../../x.ptsum")
    bogus.size = len(bogus_bytes)
    trace = tarfile.TarInfo("node0_8_10008.json")
    trace.size = 2
    archive(hostile, summaries, [(link, None), (folder, None), (bogus, bogus_bytes), (trace, b"{}")])
    p, report = analyze(work, "hostile", hostile)
    check(p.returncode == 3, "hostile: exit %d (want 3)" % p.returncode, p)
    check(analysed_ranks(report) == [0, 1, 2, 3], "hostile: ranks %s" % analysed_ranks(report), p)
    check("root:" not in p.stderr and "root:" not in json.dumps(report), "hostile: /etc/passwd was read", p)
    check("hostile.tar/x.ptsum" in p.stderr, "hostile: the bogus member is not named", p)
    check("2 of its members are not summaries" in p.stderr, "hostile: the link and the trace are not counted", p)
    check(any("x.ptsum" in w for w in report["warnings"]), "hostile: no warning names the bogus member", p)

    damaged = os.path.join(work, "damaged.tar")
    archive(damaged, summaries)
    with open(damaged, "r+b") as f:  # members are 512-byte headers + padded data
        sizes = [os.path.getsize(os.path.join(summaries, s + ".ptsum")) for s in STEMS]
        third = sum(512 + (n + 511) // 512 * 512 for n in sizes[:2])
        f.seek(third + 148)
        f.write(b"000000\0 ")  # a checksum that is wrong
    p, report = analyze(work, "damaged", damaged)
    check(p.returncode == 3, "damaged: exit %d (want 3)" % p.returncode, p)
    check(analysed_ranks(report) == [0, 1], "damaged: ranks %s" % analysed_ranks(report), p)
    check(f"byte {third}" in p.stderr and "damaged" in p.stderr, "damaged: the damage is not named", p)
    check(any("damaged" in w for w in report["warnings"]), "damaged: not in the report's warnings", p)

    cut = os.path.join(work, "cut.tar")
    archive(cut, summaries)
    whole = sum(512 + (n + 511) // 512 * 512 for n in sizes[:3])
    with open(cut, "r+b") as f:
        f.truncate(whole + 512 + sizes[3] // 2)
    p, report = analyze(work, "cut", cut)
    check(p.returncode == 0, "cut: exit %d (want 0)" % p.returncode, p)
    check(analysed_ranks(report) == [0, 1, 2], "cut: ranks %s" % analysed_ranks(report), p)
    check("no end marker" in p.stderr and "its 3 whole members are read" in p.stderr, "cut: no note", p)

    text = os.path.join(work, "text.tar")
    with open(text, "w") as f:
        f.write("not an archive\n" * 100)
    p, report = analyze(work, "text", text)
    check(p.returncode == 1 and report is None, "text: exit %d (want 1, no report)" % p.returncode, p)
    check("not a tar archive" in p.stderr, "text: not said why", p)
    empty = os.path.join(work, "empty", "summaries.tar")  # a folder holding only an empty archive
    os.makedirs(os.path.dirname(empty), exist_ok=True)
    tarfile.open(empty, "w").close()
    p, report = analyze(work, "empty", os.path.dirname(empty))
    check(p.returncode == 1 and report is None, "empty: exit %d (want 1, no report)" % p.returncode, p)
    check("nothing to analyse" in p.stderr, "empty: not said", p)

    claim = os.path.join(work, "claim.tar")
    bomb_bytes = summary_bombs.payload_claim(100 << 20)
    bomb = tarfile.TarInfo("node0_9_10009.ptsum")
    bomb.size = len(bomb_bytes)
    archive(claim, summaries, [(bomb, bomb_bytes)])
    p, report = analyze(work, "claim", claim, env={"PERFTRACKER_ANALYZE_MEMORY_MB": "64"})
    check(p.returncode == 3, "claim: exit %d (want 3)" % p.returncode, p)
    check(analysed_ranks(report) == [0, 1, 2, 3], "claim: ranks %s" % analysed_ranks(report), p)
    check(any("claim.tar/node0_9_10009.ptsum" in l and "needs more memory than its share" in l
              for l in p.stderr.splitlines()), "claim: the member is not refused by name for its share", p)
    print("hostile_archives: ok")


if __name__ == "__main__":
    main()
