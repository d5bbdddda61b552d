#!/usr/bin/env python3
"""`make demo` says what it does, not what apt and the compiler do (issue 37 item 7: it
printed ~1,300 lines of package and build output).

usage: quiet_setup.py SOURCE_DIR WORKDIR

apt-get, dpkg-query, sudo and cmake are replaced by stand-ins on PATH that print hundreds
of lines (and, in the failing cases, an error among them), so what is checked is the
scripts' and the Makefile's handling of that output, on any machine, in a second:
  install_quiet     scripts/install-deps.sh with every package missing and apt printing
                    600 lines: at most 2 lines, exit 0
  install_fails     apt failing ("E: Unable to locate package ..."): exit 1, the E: line
                    and the log's name shown, not the 300 lines around it
  build_quiet       `make build QUIET=1` with a build printing 400 lines: at most 2 lines
  build_fails       a compiler error among 400 lines: exit 2, the error line and the
                    log's name shown, in at most 100 lines
  demo_is_quiet     `make demo` builds quietly (QUIET is set for it, not by the user)
Each case prints one line; the script fails if any case does."""
import os
import shutil
import stat
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from case_runner import case, expect, run_cases  # noqa: E402 (this folder: the cases' runner)



def stand_in(bin_dir, name, body):
    path = os.path.join(bin_dir, name)
    with open(path, "w") as f:
        f.write("#!/bin/bash\n" + body + "\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


NOISY_APT = 'for i in $(seq 1 300); do echo "Selecting previously unselected package lib$i."; done'


def stand_ins(work, name, installed, apt_fails=False, cmake_fails=False):
    """A bin folder of stand-ins; returns the environment that puts it first on PATH."""
    bin_dir = os.path.join(work, name, "bin")
    shutil.rmtree(os.path.dirname(bin_dir), ignore_errors=True)
    os.makedirs(bin_dir)
    stand_in(bin_dir, "dpkg-query", 'echo -n "install ok installed"' if installed else "exit 1")
    stand_in(bin_dir, "sudo", 'exec "$@"')
    failure = '[[ "$1" == install ]] && { echo "E: Unable to locate package python3-torch"; exit 100; }'
    stand_in(bin_dir, "apt-get", NOISY_APT + "\n" + (failure if apt_fails else "") + "\nexit 0")
    error = 'echo "src/cli/analyze.c:12:5: error: expected expression"; echo "gmake: *** [all] Error 2"; exit 2'
    stand_in(bin_dir, "cmake", "\n".join([  # configures quietly; builds with 400 lines
        'build=""; mode=configure',
        'while (($#)); do case "$1" in -B) build=$2; shift;; --build) build=$2; mode=build; shift;; esac; shift; done',
        'mkdir -p "$build/bin"',
        '[[ $mode == configure ]] && exit 0',
        'for i in $(seq 1 400); do echo "[ $((i / 4))%] Building C object src/CMakeFiles/f$i.c.o"; done',
        error if cmake_fails else "exit 0"]))
    return dict(os.environ, PATH=bin_dir + ":/usr/bin:/bin", TMPDIR=os.path.join(work, name))


def run(cmd, env, cwd):
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    return p.returncode, (p.stdout + p.stderr).splitlines()


@case
def install_quiet(source, work, problems):
    rc, lines = run([os.path.join(source, "scripts", "install-deps.sh")], stand_ins(work, "iq", False), source)
    expect(rc == 0, f"exit {rc}", problems)
    expect(len(lines) <= 2, f"{len(lines)} lines: {lines[:3]}", problems)
    return f"{len(lines)} line(s): {lines[0][:100] if lines else ''}"


@case
def install_fails(source, work, problems):
    rc, lines = run([os.path.join(source, "scripts", "install-deps.sh")], stand_ins(work, "if", False, apt_fails=True),
                    source)
    expect(rc != 0, "exit 0 although apt failed", problems)
    expect(any(line.startswith("E: Unable to locate package") for line in lines),
           f"the error is not shown: {lines[-3:]}", problems)
    expect(any("whole output is in" in line for line in lines), "the log is not named", problems)
    expect(len(lines) <= 25, f"{len(lines)} lines", problems)
    return f"exit {rc}, {len(lines)} lines"


@case
def build_quiet(source, work, problems):
    build = os.path.join(work, "bq", "build")
    rc, lines = run(["make", "-s", "build", "QUIET=1", "BUILD=" + build, "JOBS=1"], stand_ins(work, "bq", True),
                    source)
    expect(rc == 0, f"exit {rc}: {lines[-5:]}", problems)
    expect(len(lines) <= 2, f"{len(lines)} lines: {lines[:3]}", problems)
    return f"{len(lines)} line(s): {lines[0][:100] if lines else ''}"


@case
def build_fails(source, work, problems):
    build = os.path.join(work, "bf", "build")
    rc, lines = run(["make", "-s", "build", "QUIET=1", "BUILD=" + build, "JOBS=1"],
                    stand_ins(work, "bf", True, cmake_fails=True), source)
    expect(rc != 0, "exit 0 although the build failed", problems)
    expect(any("error: expected expression" in line for line in lines), f"the error is not shown: {lines[-4:]}",
           problems)
    expect(any("build.log" in line for line in lines), "the log is not named", problems)
    expect(len(lines) <= 100, f"{len(lines)} lines", problems)
    return f"exit {rc}, {len(lines)} lines"


@case
def demo_is_quiet(source, work, problems):
    """Through to scripts/demo.sh, which stops at once here (the stand-in build has no
    collector module): what came before it is the installs' and the build's."""
    build = os.path.join(work, "dq", "build")
    rc, lines = run(["make", "-s", "demo", "BUILD=" + build, "JOBS=1"], stand_ins(work, "dq", True), source)
    building = [line for line in lines if "Building C object" in line]
    expect(not building, f"make demo printed {len(building)} build lines", problems)
    expect(len(lines) <= 4, f"{len(lines)} lines: {lines[:5]}", problems)
    return f"{len(lines)} line(s) before the demo itself"


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    source, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    return run_cases(lambda name, fn, problems: fn(source, work, problems))


if __name__ == "__main__":
    sys.exit(main())
