#!/usr/bin/env bash
# The collector's 3.12+ hook (sys.monitoring) on a real interpreter: builds the extension
# against the first Python >= 3.12 found (python3.13, python3.12 on PATH, pyenv's) in its
# own tree, then runs the pure-Python workload test with it. Skips (77) when there is no
# such Python with its headers.
#   usage: python_monitoring_test.sh SOURCE_DIR WORK_DIR
set -uo pipefail
src=$1 work=$2
py=""
for candidate in python3.13 python3.12 "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3.1[2-9]; do
    path=$(command -v "$candidate" 2>/dev/null) || continue
    if "$path" -c 'import sys, sysconfig, os; sys.exit(0 if sys.version_info >= (3, 12) and os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)' 2>/dev/null; then
        py=$path; break
    fi
done
if [[ -z "$py" ]]; then
    echo "SKIP: no Python >= 3.12 with development headers here"
    exit 77
fi
echo "building the collector against $py ($("$py" -c 'import sys; print(sys.version.split()[0])'))"
build=$work/build
if ! { cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$py" >"$work.log" 2>&1 &&
       cmake --build "$build" -j"$(nproc)" --target pt_python_module perftracker-cli >>"$work.log" 2>&1; }; then
    tail -30 "$work.log"
    echo "FAIL: the build against $py failed"
    exit 1
fi
PYTHONPATH=$build/python PERFTRACKER_AGENT=0 PERFTRACKER_CLI=$build/bin/perftracker \
    "$py" "$src/tests/collector/python_workload_test.py" "$work/run"
