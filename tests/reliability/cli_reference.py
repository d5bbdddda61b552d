#!/usr/bin/env python3
"""The CLI's one reference agrees with everything else that lists options (issue 37 item 6).

usage: cli_reference.py SOURCE_DIR BUILD_DIR WORKDIR   (PT_CLI: the perftracker binary)

For every command (run, jobs, the trigger, analyze, diff, summarize, export, synth,
display) the options and the exit statuses are read from four places, each parsed on its
own terms:
  help     `perftracker CMD --help`: the usage lines and the option table (lines that
           start with an option), and its "Exit status:" sentence
  man      docs/perftracker.1: the command's .SS subsection, its synopsis and the tags of
           its .TP entries, and its "Exit status:" paragraph
  README   the "Command line" section: the command's synopsis in its code block, and its
           row of the exit-status table
and the test fails when one lacks an option or an exit status another has (-h/--help,
which every command takes, is left out). Besides:
  commands   `perftracker --help` lists the commands the man page describes
  cli.md     docs/cli.md is the current text of the man page (scripts/cli-doc.sh --print;
             skipped without groff)
  man lint   groff reads the page without a warning
  install    `cmake --install` puts the page in PREFIX/share/man/man1 (and c4d_perftracker.1)
Each check prints one line; the script fails if any does."""
import os
import re
import shutil
import subprocess
import sys

CLI = os.environ.get("PT_CLI", "perftracker")
COMMANDS = ["run", "jobs", "trigger", "analyze", "diff", "summarize", "export", "synth", "display"]
FLAG = re.compile(r"(?<![\w\-])(--?[A-Za-z][\w\-]*)")
UNIVERSAL = {"-h", "--help"}
FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILURES.append(what)


def flags_in(text):
    return {f for f in FLAG.findall(text)} - UNIVERSAL


def exit_statuses(sentence):
    """'0 written; 1 ...; 126/127 ...' -> {0, 1, 126, 127}: the number that opens each clause."""
    codes = set()
    for clause in sentence.split(";"):
        m = re.match(r"\s*(\d+(?:/\d+)*)\b", clause)
        if m:
            codes |= {int(c) for c in m.group(1).split("/")}
    return codes


# ------------------------------------------------------------------ --help

def help_text(command):
    argv = ["--trigger-on", "--help"] if command == "trigger" else [command, "--help"]
    p = subprocess.run([CLI, *argv], capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        FAILURES.append(f"{command} --help: exit {p.returncode}")
    return p.stdout


def from_help(text):
    lines = text.splitlines()
    flags, in_usage = set(), False
    for line in lines:
        if line.startswith("usage:"):
            in_usage = True
        elif in_usage and not re.match(r"\s+\[", line):
            in_usage = False
        if in_usage:
            flags |= flags_in(line.split(":", 1)[1] if line.startswith("usage:") else line)
        words = line.split()
        if re.match(r"\s+-", line):  # an option table's line: its option, and a second after a comma
            flags |= flags_in(words[0]) | (flags_in(words[1]) if words[0].endswith(",") and len(words) > 1 else set())
    m = re.search(r"^Exit status:(.*?)(?:\n\s*\n|\Z)", text, re.S | re.M)
    return flags, exit_statuses(" ".join(m.group(1).split())) if m else set()


# ------------------------------------------------------------------ the man page

def unroff(line):
    line = re.sub(r"\\f[BIRP]|\\f\(..|\\&", "", line).replace("\\-", "-").replace("\\e", "\\")
    return re.sub(r'^\.(B|I|BI|IB|BR|RB|IR|RI)\s+', "", line).replace('"', "")


def man_sections(page):
    """{command: (synopsis and .TP tags, exit-status sentence)} from the COMMANDS section."""
    text = page.split("\n.SH COMMANDS\n", 1)[1].split("\n.SH ", 1)[0]
    sections = {}
    for block in re.split(r"^\.SS ", text, flags=re.M)[1:]:
        lines = block.splitlines()
        name = unroff(lines[0]).split()[1]
        command = "trigger" if name == "--trigger-on" else name
        synopsis, tags, exit_lines, i = [], [], [], 1
        while i < len(lines) and not lines[i].startswith("."):
            synopsis.append(unroff(lines[i]))
            i += 1
        for j, line in enumerate(lines):
            if line.startswith(".TP") and j + 1 < len(lines):
                tags.append(unroff(lines[j + 1]))
            if unroff(line).startswith("Exit status:"):
                k = j
                while k < len(lines) and (k == j or not lines[k].startswith(".")):
                    exit_lines.append(unroff(lines[k]))
                    k += 1
        sections[command] = (flags_in(" ".join(synopsis + tags)),
                             exit_statuses(" ".join(exit_lines).split("Exit status:", 1)[-1]))
    return sections


# ------------------------------------------------------------------ the README

def readme_sections(readme):
    part = readme.split("\n## Command line\n", 1)[1].split("\n## ", 1)[0]
    block = part.split("```\n", 2)[1]
    synopses, current = {}, None
    for line in block.splitlines():
        if line.startswith("perftracker "):
            name = line.split()[1]
            current = "trigger" if name == "--trigger-on" else name
            synopses[current] = line[len("perftracker " + name):]
        elif current and line.startswith(" "):
            synopses[current] += " " + line
    exits = {}
    for row in re.findall(r"^\| `([^`]+)` \| (.*) \|$", part, re.M):
        exits["trigger" if row[0] == "--trigger-on" else row[0]] = exit_statuses(row[1])
    flags = {c: flags_in(s) for c, s in synopses.items()}
    if "trigger" in flags:
        flags["trigger"] |= {"--trigger-on"}  # the synopsis's own first word
    return {c: (flags.get(c, set()), exits.get(c, set())) for c in set(flags) | set(exits)}


# ------------------------------------------------------------------ the checks

def compare(sources):
    for command in COMMANDS:
        for what, index in (("options", 0), ("exit statuses", 1)):
            seen = {name: (got[command][index] if command in got else None) for name, got in sources.items()}
            union = set().union(*(v for v in seen.values() if v is not None))
            gaps = {name: sorted(union - v, key=str) if v is not None else "no entry" for name, v in seen.items()
                    if v is None or union - v}
            listed = " ".join(map(str, sorted(union, key=str)))
            check(not gaps and (union or what == "options"),
                  f"{command}: {what} agree ({listed})" + (f"; missing: {gaps}" if gaps else ""))


def commands_listed(man):
    p = subprocess.run([CLI, "--help"], capture_output=True, text=True, timeout=30)
    listed = set(re.findall(r"^  (\w+)\s{2,}", p.stdout, re.M))
    check(listed == set(man), f"perftracker --help lists the commands the man page has: {sorted(listed)} vs "
          f"{sorted(man)}")


def cli_md_current(source):
    script = os.path.join(source, "scripts", "cli-doc.sh")
    if not shutil.which("groff"):
        print("skip docs/cli.md: no groff to render the man page")
        return
    want = subprocess.run([script, "--print"], capture_output=True, text=True, timeout=60, check=True).stdout
    with open(os.path.join(source, "docs", "cli.md")) as f:
        have = f.read()
    check(have == want, "docs/cli.md is the man page's text" + ("" if have == want else
                                                                  ": run scripts/cli-doc.sh"))


def man_lint(source):
    if not shutil.which("groff"):
        print("skip man lint: no groff")
        return
    p = subprocess.run(["groff", "-man", "-ww", "-z", os.path.join(source, "docs", "perftracker.1")],
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and not p.stderr.strip(), f"groff reads docs/perftracker.1 without a warning "
          f"{p.stderr.strip()[:300]}")


def installed(source, build, work):
    prefix = os.path.join(work, "prefix")
    shutil.rmtree(prefix, ignore_errors=True)
    p = subprocess.run(["cmake", "--install", build, "--prefix", prefix], capture_output=True, text=True,
                       timeout=300)
    page = os.path.join(prefix, "share", "man", "man1", "perftracker.1")
    alias = os.path.join(prefix, "share", "man", "man1", "c4d_perftracker.1")
    same = os.path.isfile(page) and open(page).read() == open(os.path.join(source, "docs", "perftracker.1")).read()
    check(p.returncode == 0 and same and os.path.realpath(alias) == os.path.realpath(page),
          f"cmake --install puts the man page in PREFIX/share/man/man1 (and c4d_perftracker.1): exit "
          f"{p.returncode} {p.stderr.strip()[-300:]}")


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    source, build, work = (os.path.abspath(a) for a in sys.argv[1:])
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(source, "docs", "perftracker.1")) as f:
        man = man_sections(f.read())
    with open(os.path.join(source, "README.md")) as f:
        readme = readme_sections(f.read())
    helps = {c: from_help(help_text(c)) for c in COMMANDS}
    compare({"help": helps, "man": man, "README": readme})
    commands_listed(man)
    cli_md_current(source)
    man_lint(source)
    installed(source, build, work)
    if FAILURES:
        print(f"FAIL: {len(FAILURES)} check(s)")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
