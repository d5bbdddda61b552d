#!/usr/bin/env python3
"""Mutation testing for src/: does the suite notice a realistic one-point bug?

No mutation tool for C is packaged here, so this is a small one (standard library only).
It lists every place in src/*.c where an operator applies, samples N of them spread over
the modules (src/<module>/) with a seeded RNG, and for each one: writes the mutated file,
rebuilds the dedicated tree (build-mutate, incremental), runs the tests that cover that
module (MODULE_TESTS: ctest -R patterns, stopping at the first failure, with a per-mutant
timeout) and puts the file back. The original is always restored: in a `finally`, on
SIGINT/SIGTERM, and at the next start from the backup (<file>.mutate-orig) a killed run
leaves.

A mutant that every test passes in the Release tree is tried once more in a second tree
built as `make test-asan` builds (build-mutate-asan: ASan + UBSan), against the module's
tests that `make test` runs there (label `sanitized`): a leak, an overflow into unused
memory or an undefined shift changes no output, and `make test` still catches it. Only
survivors pay for that stage (--no-sanitized skips it).

A mutant is
  killed      a test failed or timed out (in either tree; "sanitized:" says the second),
  survived    every test passed in both trees: a test is missing (or the mutant is equivalent),
  equivalent  its object file is byte-identical to the original's (the compiler proved it),
  stillborn   it does not compile (-Werror); neither is counted in the score,
  error       no test matched, or every test that failed fails without the mutant too
              (checked once per test on the real sources): not counted either.
Score = killed / (killed + survived). Each survivor is printed as file:line, operator,
before -> after. --json writes every result; --retest FILE reruns only a previous run's
survivors (after adding tests) and prints the new score over the same sample.

  scripts/mutate.py --sample 50 --seed 1            # what `make mutate` runs
  scripts/mutate.py --files src/compare --sample 10 # one module
  scripts/mutate.py --list --files diff.c           # the candidate mutants, not run
  scripts/mutate.py --retest old.json --tests 'unit\.test_diff'  # only these tests
"""
import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BACKUP_SUFFIX = ".mutate-orig"

# The tests that cover each module, as ctest -R patterns: the module's own unit tests and
# the end-to-end tests its code takes part in. Fast ones first (ctest runs in order and
# --stop-on-failure ends the mutant at the first failure).
ENGINE = "engine\\.(fault_suite|whatif_truth|diff_synthetic|h200_labelled|kernel_totals|truncated_kineto_hangs|comm_throughput|step_medians|gpu_values|rare_inputs)"
MODULE_TESTS = {
    "util": ["unit\\.", "reliability\\.(parser_edges|output_folders|cli_messages)", "display\\.test_site", ENGINE],
    "trace": ["unit\\.test_(kineto|json|timeline)", "reliability\\.(parser_edges|native_writer_late_facts)",
              "synth\\.(test_kineto_writer|json_and_cli)", "engine\\.(kernel_totals|summaries_equal_traces|legacy_trace|comm_throughput|"
              "truncated_kineto_hangs|kernel_names_both_paths|real_traces|export_roundtrip)", "reliability\\.bad_traces$"],
    "summarize": ["unit\\.test_(summary|timeline|demangle|summary_check)", "synth\\.test_hangs", "reliability\\.hostile_summar",
                  "engine\\.(summaries_equal_traces|kernel_totals|fault_suite|truncated_kineto_hangs|h200_labelled|"
                  "comm_throughput|diff_values|step_medians)"],
    "diagnose": ["unit\\.test_diagnose", "synth\\.test_hangs", ENGINE],
    "compare": ["unit\\.test_diff", "engine\\.diff_", "reliability\\.cli_messages"],
    "report": ["display\\.test_perfdisplay", "unit\\.test_diff", "engine\\.(fault_suite|diff_synthetic|export_roundtrip|"
               "terminal_summary|cli_smaller)",
               "reliability\\.cli_messages"],
    "synth": ["synth\\.(test_|json_and_cli|model_fingerprint)", "engine\\.(fault_suite|whatif_truth|diff_synthetic|truncated_kineto_hangs)"],
    "cli": ["reliability\\.cli_messages", "display\\.http\\.perftracker", "synth\\.json_and_cli",
            "engine\\.(fault_suite|diff_synthetic|duplicate_inputs|export_roundtrip|terminal_summary|rare_inputs|"
            "cli_smaller)",
            "reliability\\.hostile_summaries"],
    "control": ["control\\.(protocol|discover|rounds$)", "reliability\\.hostile_(worker|summary)",
                "control\\.process\\.(scale|killed|hung|wrong-secret|no-job|discover)",
                "control\\.e2e_torch\\.ends-mid-window"],  # a window finished as the process exits
    "collect": ["collector\\.test_", "control\\.bookkeeping$", "control\\.rounds$", "collector\\.python_workloadpython3"],
    "display": ["display\\.test_", "display\\.http\\.perftracker", "reliability\\.listening_sockets"],
}

# --- operators: (name, regex over code with strings and comments blanked, replacement) -----
_CMP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}


def _cmp_flip(m):
    return _CMP[m.group(0).strip()].join(m.group(0).split(m.group(0).strip()))


def _off_by_one(m):
    n = int(m.group(1))
    return str(n + 1) if n == 0 or random.Random(m.start()).random() < 0.5 else str(n - 1)


def _constant(m):
    text = m.group(0)
    value = float(text.rstrip("fF"))
    return repr(value * 2 if value else 1.0)


# Operators act on one token (or one argument pair) of one line; the line's strings, chars
# and comments are blanked before matching so they are never mutated.
OPERATORS = [
    # < <= > >= == != -> the boundary or the opposite (not ->, <<, >>, <=>, arrows).
    ("comparison_flip", re.compile(r"(?<![<>=!\-])(<=|>=|==|!=|<|>)(?![<>=])"), _cmp_flip),
    # An integer literal one up or down (0 -> 1): loop bounds, indices, thresholds.
    ("off_by_one", re.compile(r"(?<![\w.])(\d+)(?![\w.])"), _off_by_one),
    # A floating constant doubled (0 -> 1.0): thresholds, ratios, units.
    ("constant_change", re.compile(r"(?<![\w.])(\d+\.\d*(?:[eE][-+]?\d+)?|\d*\.\d+(?:[eE][-+]?\d+)?)[fF]?(?![\w.])"),
     _constant),
    ("and_or_swap", re.compile(r"&&|\|\|"), lambda m: "||" if m.group(0) == "&&" else "&&"),
    ("arith_flip", re.compile(r"(?<=[\w)\]]) ([-+]) (?=[\w(])"), lambda m: f" {'-' if m.group(1) == '+' else '+'} "),
    # f(a, b) with two simple arguments -> f(b, a).
    ("swap_args", re.compile(r"(?<=\w)\(\s*([\w.\->\[\]*&]+)\s*,\s*([\w.\->\[\]*&]+)\s*\)"),
     lambda m: f"({m.group(2)}, {m.group(1)})"),
]
DROP_STATEMENT = "drop_statement"
# A whole line that is one assignment, increment or call statement (no declaration, no
# control flow): dropped.
_STATEMENT = re.compile(r"^\s*(?!return\b|break\b|continue\b|goto\b|case\b|default\b|else\b)"
                        r"[\w.\->\[\]*()]+\s*(=|\+=|-=|\*=|/=|\|=|&=|\+\+|--|\()[^;{}]*;\s*$")
_DECLARATION = re.compile(r"^\s*(const\s+|static\s+|unsigned\s+|struct\s+|enum\s+)*"
                          r"(int|char|double|float|size_t|bool|long|short|u?int\d+_t|ssize_t|[a-z_]+_t|pt_\w+)\b[\s*]+\w+")
_SKIP_LINE = re.compile(r"^\s*(#|static_assert|_Static_assert|assert\s*\()")


def blank_strings_and_comments(lines):
    """The lines with string/char literals and comments replaced by spaces (same lengths)."""
    out, in_block = [], False
    for line in lines:
        chars, i = list(line), 0
        while i < len(chars):
            if in_block:
                if line.startswith("*/", i):
                    chars[i] = chars[i + 1] = " "
                    in_block, i = False, i + 2
                    continue
                chars[i] = " "
            elif line.startswith("/*", i):
                in_block = True
                chars[i] = chars[i + 1] = " "
                i += 2
                continue
            elif line.startswith("//", i):
                chars[i:] = " " * (len(chars) - i)
                break
            elif chars[i] in "\"'":
                quote, j = chars[i], i + 1
                while j < len(chars) and chars[j] != quote:
                    j += 2 if chars[j] == "\\" else 1
                for k in range(i, min(j + 1, len(chars))):
                    chars[k] = " "
                i = j + 1
                continue
            i += 1
        out.append("".join(chars[: len(line)]))
    return out


def candidates(path):
    """Every (line number, operator, column start, column end, replacement) in one file."""
    with open(path) as f:
        lines = f.read().split("\n")
    code = blank_strings_and_comments(lines)
    found = []
    for no, (text, clean) in enumerate(zip(lines, code), 1):
        if not clean.strip() or _SKIP_LINE.match(clean):
            continue
        # Array sizes, enum values and initialiser tables are not behaviour worth sampling.
        if re.match(r"^\s*(\[|\{|\w+\s*=\s*\d+,)", clean) or re.search(r"\w\s*\[\s*\d+\s*\]\s*[;=,]", clean):
            continue
        for name, pattern, replace in OPERATORS:
            for m in pattern.finditer(clean):
                if name == "off_by_one" and re.search(r"=\s*\{+\s*$", clean[: m.start()]):
                    continue  # "= {{0}}": the zero initialiser of a struct, not a value
                before = text[m.start(): m.end()]
                after = replace(m)
                if after != m.group(0):
                    found.append((no, name, m.start(), m.end(), before, after))
        if _STATEMENT.match(clean) and not _DECLARATION.match(clean):
            found.append((no, DROP_STATEMENT, 0, len(text), text.strip(), ";"))
    return found


def module_of(rel):
    parts = rel.split(os.sep)
    return parts[1] if len(parts) > 2 else "src"


def source_files(filters):
    out = []
    for dirpath, _, names in os.walk(os.path.join(ROOT, "src")):
        for name in sorted(names):
            if name.endswith(".c"):
                rel = os.path.relpath(os.path.join(dirpath, name), ROOT)
                if not filters or any(f in rel for f in filters):
                    out.append(rel)
    return sorted(out)


def sample(files, n, seed):
    """n mutants spread over the modules: round-robin over modules, each a random draw."""
    rng = random.Random(seed)
    by_module = {}
    for rel in files:
        for c in candidates(os.path.join(ROOT, rel)):
            by_module.setdefault(module_of(rel), []).append((rel,) + c)
    for pool in by_module.values():
        rng.shuffle(pool)
    chosen, modules = [], sorted(by_module)
    while len(chosen) < n and any(by_module.values()):
        for mod in modules:
            if by_module[mod] and len(chosen) < n:
                chosen.append(by_module[mod].pop())
    return chosen, {m: len(v) for m, v in by_module.items()}


# --- applying, building, testing -------------------------------------------------------
class Restorer:
    """Puts a mutated file back whatever happens (exception, SIGINT, SIGTERM)."""

    def __init__(self, path):
        self.path, self.backup = path, path + BACKUP_SUFFIX

    def __enter__(self):
        shutil.copy2(self.path, self.backup)
        return self

    def __exit__(self, *exc):
        os.replace(self.backup, self.path)
        os.utime(self.path)  # newer than the mutant's object: the next build recompiles it


def restore_leftovers():
    for rel in source_files([]):
        backup = os.path.join(ROOT, rel) + BACKUP_SUFFIX
        if os.path.exists(backup):
            print(f"restoring {rel} from a previous run's backup", file=sys.stderr)
            os.replace(backup, os.path.join(ROOT, rel))
            os.utime(os.path.join(ROOT, rel))


def object_file(build, rel):
    """The object file CMake builds from src/<rel> (any target), or None."""
    tail = rel[len("src/"):] + ".o"
    for dirpath, _, names in os.walk(os.path.join(build, "src")):
        for name in names:
            full = os.path.join(dirpath, name)
            if full.endswith(tail) and os.path.basename(tail) == name:
                return full
    return None


def digest(path):
    if not path or not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def build(build_dir, jobs, timeout):
    try:
        p = subprocess.run(["cmake", "--build", build_dir, f"-j{jobs}"], capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, "build timed out"
    return p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]


def run_tests(build_dir, module, timeout, jobs, only=None, label=None):
    """(verdict, detail): killed when a test fails or the run passes the timeout."""
    pattern = only or "|".join(f"({p})" for p in MODULE_TESTS.get(module, ["unit\\."]))
    # Never the slow whole-system tests a pattern might catch by accident (browsers, the
    # torch jobs other than the one a module names, root-only namespaces, fuzzing).
    cmd = ["ctest", "-R", pattern] + (["-L", label] if label else []) + [
           "--stop-on-failure", f"-j{jobs}", "--timeout", str(timeout), "-E",
           "fresh_machine|hangs\\.|browser|npm_ci|fuzz_short|valgrind|"
           "e2e_torch\\.(straggler|hang|auto|no-collector|secret|window-fails|rounds)"]
    start = time.monotonic()
    # Its own process group, so that a timeout ends the tests ctest started too.
    p = subprocess.Popen(cmd, cwd=build_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        p.stdout, _ = p.communicate(timeout=timeout * 2)
    except BaseException as e:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        if isinstance(e, subprocess.TimeoutExpired):
            return "killed", "timed out", time.monotonic() - start
        raise
    failed = re.findall(r"\d+ - (\S+) \((Failed|Timeout|SEGFAULT|Subprocess aborted|Child aborted|[^)]*)\)",
                        p.stdout)
    if p.returncode != 0:
        return "killed", ", ".join(f"{n} ({why})" for n, why in failed) or p.stdout[-300:], time.monotonic() - start
    if "No tests were found" in p.stdout:
        return "error", "no tests matched " + pattern, 0
    return "survived", re.search(r"(\d+)% tests passed.*", p.stdout).group(0) if "tests passed" in p.stdout else "",\
        time.monotonic() - start


def write_mutant(mutant):
    rel, line, op, start, end, before, after = mutant
    path = os.path.join(ROOT, rel)
    with open(path) as f:
        lines = f.read().split("\n")
    text = lines[line - 1]
    lines[line - 1] = (" " * (len(text) - len(text.lstrip())) + after) if op == DROP_STATEMENT \
        else text[:start] + after + text[end:]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def sanitized_stage(mutant, args):
    """The Release survivor against `make test`'s sanitized tests of its module, in the
    ASan tree (checked_kill then checks that a failing test passes there without it)."""
    ok, log = build(args.sanitized_build, args.jobs, args.build_timeout)
    if not ok:
        return "survived", "the sanitized tree did not build the mutant: " + log.strip()[-160:], 0
    verdict, detail, seconds = run_tests(args.sanitized_build, module_of(mutant[0]), args.timeout, args.test_jobs,
                                         args.tests, label="sanitized")
    if verdict == "killed":
        return "killed", "sanitized: " + detail, seconds
    return ("survived" if verdict != "error" else verdict), detail, seconds


def mutate_one(mutant, args):
    rel = mutant[0]
    path = os.path.join(ROOT, rel)
    obj = object_file(args.build, rel)
    original_obj = digest(obj)
    with Restorer(path):
        write_mutant(mutant)
        ok, log = build(args.build, args.jobs, args.build_timeout)
        if not ok:
            errors = [l for l in log.splitlines() if "error" in l.lower()] or log.strip().splitlines() or [""]
            return "stillborn", errors[0][:200], 0
        if original_obj and digest(object_file(args.build, rel)) == original_obj:
            return "equivalent", "same object code", 0
        verdict, detail, seconds = run_tests(args.build, module_of(rel), args.timeout, args.test_jobs, args.tests)
        if verdict != "survived" or not args.sanitized_build:
            return verdict, detail, seconds
        again, why, more = sanitized_stage(mutant, args)
        return again, why, seconds + more


def fails_unmutated(args, build_dir, tests, cache):
    """Whether each of these tests fails on the real sources too (a busy machine, a test
    broken by someone else): such a failure says nothing about the mutant. Cached per tree."""
    missing = [t for t in tests if (build_dir, t) not in cache]
    if missing:
        build(build_dir, args.jobs, 3600)  # the real sources: the mutant's file is restored
        for t in missing:
            p = subprocess.run(["ctest", "-R", "^" + re.escape(t) + "$", "--timeout", str(args.timeout)],
                               cwd=build_dir, capture_output=True, text=True, start_new_session=True)
            cache[(build_dir, t)] = p.returncode != 0
    return all(cache[(build_dir, t)] for t in tests)


def checked_kill(verdict, detail, args, cache):
    """A kill stands only if a test it names passes without the mutant (in the tree it failed in)."""
    if verdict != "killed" or detail.endswith("timed out"):
        return verdict, detail
    tests = re.findall(r"(\S+) \(", detail)
    build_dir = args.sanitized_build if detail.startswith("sanitized: ") else args.build
    if tests and fails_unmutated(args, build_dir, tests, cache):
        return "error", detail + " -- fails without the mutant too: not counted"
    return verdict, detail


def describe(m):
    rel, line, op, _, _, before, after = m
    return f"{rel}:{line} {op}: {before.strip()} -> {after.strip()}"


def source_line(m):
    with open(os.path.join(ROOT, m[0])) as f:
        return f.read().split("\n")[m[1] - 1].strip()


def report(results):
    counts = {}
    for r in results:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    killed, survived = counts.get("killed", 0), counts.get("survived", 0)
    print("\n=== mutation score ===")
    print("  " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    by_module = {}
    for r in results:
        k, s = by_module.get(r["module"], (0, 0))
        by_module[r["module"]] = (k + (r["verdict"] == "killed"), s + (r["verdict"] == "survived"))
    print("  by module: " + ", ".join(f"{m} {k}/{k + s}" for m, (k, s) in sorted(by_module.items())))
    if killed + survived:
        print(f"SCORE: {killed}/{killed + survived} killed = {100.0 * killed / (killed + survived):.1f}%")
    survivors = [r for r in results if r["verdict"] == "survived"]
    for r in survivors:
        print(f"SURVIVOR {r['where']}\n    in: {r.get('line', '')[:160]}")
    return killed, survived


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sample", type=int, default=50, help="how many mutants (spread over the modules)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--files", action="append", default=[], help="only files whose path contains this (repeatable)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build-mutate"), help="the dedicated build tree")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per test (ctest --timeout)")
    ap.add_argument("--build-timeout", type=int, default=600)
    ap.add_argument("--jobs", type=int, default=2, help="build jobs")
    ap.add_argument("--test-jobs", type=int, default=1, help="ctest -j")
    ap.add_argument("--list", action="store_true", help="print the sampled mutants and exit")
    ap.add_argument("--json", help="write every result here")
    ap.add_argument("--retest", help="rerun only the survivors of this --json file")
    ap.add_argument("--tests", help="a ctest -R pattern run instead of the module's tests (does a new test kill it?)")
    ap.add_argument("--sanitized-build", default=os.path.join(ROOT, "build-mutate-asan"),
                    help="the ASan + UBSan tree a Release survivor is tried in")
    ap.add_argument("--no-sanitized", action="store_true", help="score on the Release tree only")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    args.sanitized_build = None if args.no_sanitized else os.path.abspath(args.sanitized_build)

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)
    restore_leftovers()

    previous = []
    if args.retest:
        with open(args.retest) as f:
            previous = json.load(f)
        chosen = [tuple(r["mutant"]) for r in previous if r["verdict"] == "survived"]
        print(f"retesting {len(chosen)} survivors of {args.retest}")
    else:
        chosen, pools = sample(source_files(args.files), args.sample, args.seed)
        print(f"{len(chosen)} mutants sampled (seed {args.seed}) from candidates per module: "
              + ", ".join(f"{m} {n}" for m, n in sorted(pools.items())))
    if args.list:
        for m in chosen:
            print(describe(m))
        return 0
    if not os.path.exists(os.path.join(args.build, "CMakeCache.txt")):
        subprocess.run(["cmake", "-S", ROOT, "-B", args.build, "-DCMAKE_BUILD_TYPE=Release"], check=True,
                       stdout=subprocess.DEVNULL)
    ok, log = build(args.build, args.jobs, 3600)
    if not ok:
        sys.exit(f"the unmutated tree does not build:\n{log}")
    if args.sanitized_build:
        if not os.path.exists(os.path.join(args.sanitized_build, "CMakeCache.txt")):
            subprocess.run(["cmake", "-S", ROOT, "-B", args.sanitized_build, "-DCMAKE_BUILD_TYPE=Debug",
                            "-DPT_SANITIZE=address,undefined"], check=True, stdout=subprocess.DEVNULL)
        ok, log = build(args.sanitized_build, args.jobs, 3600)
        if not ok:
            sys.exit(f"the unmutated sanitized tree does not build:\n{log}")

    results, unmutated_failures = [], {}
    try:
        for i, m in enumerate(chosen, 1):
            verdict, detail, seconds = mutate_one(m, args)
            verdict, detail = checked_kill(verdict, detail, args, unmutated_failures)
            results.append({"mutant": list(m), "where": describe(m), "module": module_of(m[0]), "verdict": verdict,
                            "detail": detail, "line": source_line(m)})
            print(f"[{i}/{len(chosen)}] {verdict:10s} {describe(m)}  ({detail}; {seconds:.0f}s)", flush=True)
    except KeyboardInterrupt:
        print("\ninterrupted: the file is restored; the score covers the mutants run so far", file=sys.stderr)
    finally:
        build(args.build, args.jobs, 3600)  # leave the trees built from the real sources
        if args.sanitized_build:
            build(args.sanitized_build, args.jobs, 3600)
    if args.retest:
        rerun = {r["where"]: r for r in results}
        results = [rerun.get(r["where"], r) for r in previous]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
