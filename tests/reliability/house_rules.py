#!/usr/bin/env python3
"""The house rules a new engineer relies on to find their way (ARCHITECTURE.md):

  1. ARCHITECTURE.md names every file of src/, web/ and python/, and every file name it
     gives exists (a renamed or removed file leaves no stale entry behind).
  2. No source file of src/ or web/ is over MAX_LINES lines.
  3. The C files of src/ call one another one way: no group of files calls around in a
     circle, but the one ALLOWED_CIRCLES names, with the reason its design gives.

A call is a call of a function another file defines (not static), found by reading the
sources with comments and strings removed; macros are not followed.

    house_rules.py SOURCE_DIR
    house_rules.py --self-test      (each rule broken once in a small tree is caught)
Exit status: 0 all hold; 1 a rule is broken (each breach on its own line).
"""
import collections
import os
import re
import subprocess
import sys

MAX_LINES = 1500
SOURCE_EXTENSIONS = ('.c', '.h', '.js', '.py', '.css', '.html')
NOT_SOURCE = re.compile(r'(^|/)(CMakeLists\.txt|package(-lock)?\.json|README\.txt|[^/]*\.cmake)$')
# Files that call each other by design; each group exactly as it is, and why.
ALLOWED_CIRCLES = {
    frozenset({'src/control/coordinator.c', 'src/control/coord_messages.c'}):
        "a peer's end is called at once by whoever finds a peer hostile (coordinator_state.h)",
}


def tree_files(root, top):
    """The project's files under top: those git tracks in a checkout (so what a build or
    an install leaves there is not the project's), else every file."""
    try:
        tracked = subprocess.run(['git', '-C', root, 'ls-files', '-z', '--', top], capture_output=True, check=True,
                                 timeout=60).stdout.decode('utf-8', 'replace').split('\0')
    except (OSError, subprocess.SubprocessError):
        tracked = None
    if tracked and any(tracked):
        for path in sorted(p for p in tracked if p):
            if not NOT_SOURCE.search(path) and '__pycache__' not in path and os.path.exists(os.path.join(root, path)):
                yield path
        return
    for d, dirs, files in os.walk(os.path.join(root, top)):
        dirs[:] = sorted(x for x in dirs if x != '__pycache__' and not x.startswith('.'))
        for f in sorted(files):
            path = os.path.relpath(os.path.join(d, f), root)
            if not NOT_SOURCE.search(path) and not f.endswith('.pyc'):
                yield path


def architecture_names(root):
    text = open(os.path.join(root, 'ARCHITECTURE.md'), encoding='utf-8').read()
    names = set()
    for quoted in re.findall(r'`([^`\n]+)`', text):
        for token in re.findall(r'[\w./-]+\.(?:c|h|js|py|css|html|md|sh)\b', quoted):
            names.add(token)
    return names


def check_map(root, breaches):
    named = architecture_names(root)
    basenames = {os.path.basename(n) for n in named}
    files = [f for top in ('src', 'web', 'python') for f in tree_files(root, top)]
    for f in files:
        if os.path.basename(f) not in basenames and f not in named:
            breaches.append('ARCHITECTURE.md does not name %s' % f)
    every = {os.path.relpath(os.path.join(d, f), root) for top in ('src', 'web', 'python', 'scripts', 'tests', 'bench',
                                                                   'docs', 'fuzz', '.')
             for d, _, fs in os.walk(os.path.join(root, top)) for f in fs}
    every_base = {os.path.basename(p) for p in every}
    for n in sorted(named):
        if n not in every and os.path.basename(n) not in every_base and not any(p.endswith('/' + n) for p in every):
            breaches.append('ARCHITECTURE.md names %s, which does not exist' % n)
    return len(files)


def check_sizes(root, breaches):
    for top in ('src', 'web'):
        for f in tree_files(root, top):
            if f.endswith(SOURCE_EXTENSIONS):
                with open(os.path.join(root, f), encoding='utf-8', errors='replace') as fh:
                    lines = sum(1 for _ in fh)
                if lines > MAX_LINES:
                    breaches.append('%s has %d lines (at most %d)' % (f, lines, MAX_LINES))


def bare_code(text):
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    text = re.sub(r'//[^\n]*', ' ', text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"'(\\.|[^'\\\n])'", "''", text)


def call_graph(root):
    code = {f: bare_code(open(os.path.join(root, f), encoding='utf-8', errors='replace').read())
            for f in tree_files(root, 'src') if f.endswith('.c')}
    defined = {}
    definition = re.compile(r'^(?!static\b)[A-Za-z_][\w \t*]*?\b(\w+)\s*\([^;{]*\)\s*\{', re.M)
    for f, text in code.items():
        for m in definition.finditer(text):
            defined.setdefault(m.group(1), f)
    calls = collections.defaultdict(dict)
    for f, text in code.items():
        for name in set(re.findall(r'\b(\w+)\s*\(', text)):
            g = defined.get(name)
            if g and g != f:
                calls[f].setdefault(g, name)
    return code, calls


def circles(nodes, calls):
    """Strongly connected groups of more than one file (Tarjan, iterative)."""
    index, low, on_stack, stack, groups, counter = {}, {}, set(), [], [], [0]
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(calls.get(start, {}))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            advanced = False
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(calls.get(w, {})))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                group = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    group.add(w)
                    if w == v:
                        break
                if len(group) > 1:
                    groups.append(frozenset(group))
    return groups


def check_circles(root, breaches):
    code, calls = call_graph(root)
    for group in circles(code, calls):
        if group in ALLOWED_CIRCLES:
            continue
        edges = ['%s -> %s (%s)' % (f, g, name) for f in sorted(group) for g, name in sorted(calls[f].items())
                 if g in group]
        breaches.append('these files call each other in a circle: %s' % '; '.join(edges))
    return len(code)


def breaches_of(root):
    breaches = []
    check_map(root, breaches)
    check_sizes(root, breaches)
    check_circles(root, breaches)
    return breaches


def self_test():
    """Each rule, broken once in a small tree, is caught; the same tree unbroken passes."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix='pt-house-') as root:
        def write(path, text):
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), 'w') as f:
                f.write(text)
        write('src/x/a.c', 'int a(void)\n{\n    return 1;\n}\n')
        write('src/x/b.c', 'int a(void);\nint b(void)\n{\n    return a();\n}\n')
        write('web/page.js', '\n' * MAX_LINES)
        write('ARCHITECTURE.md', '`a.c` `b.c` `page.js`\n')
        assert breaches_of(root) == [], breaches_of(root)
        write('src/x/a.c', 'int b(void);\nint a(void)\n{\n    return b();\n}\n')
        write('src/x/c.c', 'int c;\n')
        write('web/page.js', '\n' * (MAX_LINES + 1))
        write('ARCHITECTURE.md', '`a.c` `b.c` `page.js` `gone.c`\n')
        found = breaches_of(root)
        for want in ('does not name src/x/c.c', 'names gone.c', 'page.js has 1501 lines', 'in a circle'):
            assert any(want in b for b in found), (want, found)
    print('self-test: each rule caught when broken, and a tree that keeps them passes')


def main():
    if sys.argv[1:] == ['--self-test']:
        self_test()
        return
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    breaches = []
    mapped = check_map(root, breaches)
    check_sizes(root, breaches)
    c_files = check_circles(root, breaches)
    for b in breaches:
        print('FAIL ' + b)
    print('%d files mapped, %d C files in the call graph, %d breach(es)' % (mapped, c_files, len(breaches)))
    sys.exit(1 if breaches else 0)


if __name__ == '__main__':
    main()
