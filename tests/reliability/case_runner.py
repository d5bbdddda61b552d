"""The cases of a reliability script: each a function registered with @case, which appends
what is wrong to `problems` (expect) and returns what it saw. run_cases runs every case, a
case that raises being a failure of that case only, prints one line per case, and gives the
script's exit status: 1 if any case failed, else 0."""

CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def expect(cond, what, problems):
    if not cond:
        problems.append(what)


def run_cases(call):
    """call(name, fn, problems) runs one case (setting up what it needs) and returns what it
    saw."""
    failed = 0
    for name, fn in CASES.items():
        problems = []
        try:
            said = call(name, fn, problems)
        except Exception as e:  # a case that crashes is a failure, the others still run
            problems.append(f"{type(e).__name__}: {e}")
            said = ""
        if problems:
            failed += 1
            print(f"FAIL {name}: " + "; ".join(problems))
        else:
            print(f"ok   {name}: {said}")
    return 1 if failed else 0
