#!/usr/bin/env bash
# perftracker end to end, on this machine:
#   0. analyze a generated 16-worker job with an injected fault (rank 11's data loader is
#      slow) and print the diagnosis: the offline path, `perftracker analyze` (its report
#      goes to BUILD_DIR/synthetic-demo/, not among the user's rounds);
# then the whole PerfTracker workflow on the seed's example job:
#   1. start the job (scripts/demo-job.py: 4 ranks, gloo, CPU matmul, time.sleep(rank)),
#      each rank running PerfTracker() -- rank 0's agent hosts the job's coordinator;
#   2. from another process, as a user in the master's shell would:
#        c4d_perftracker --trigger-on --auto-analyze --wait 2 --steps 2 \
#                        --save-raw-trace all --output-dir DIR
#   3. stop the job and say where the report is.
# usage: scripts/demo.sh [BUILD_DIR]   (make demo runs it; PT_DEMO_OUTPUT picks DIR)
set -euo pipefail

build=$(cd "${1:-build}" && pwd)
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${PT_DEMO_OUTPUT:-/tmp/perftracker/output}
torch_python=/usr/bin/python3
cli="$build/bin/c4d_perftracker"

[[ -x $cli ]] || ln -sf perftracker "$cli"
if ! "$torch_python" -c 'import torch.distributed' 2>/dev/null; then
    echo "demo: $torch_python has no torch; install it with: scripts/install-deps.sh" >&2
    exit 1
fi
if ! compgen -G "$build/python/perftracker/_perftracker*.so" >/dev/null; then
    echo "demo: the collector module is missing from $build/python (build with: make)" >&2
    exit 1
fi

work=$(mktemp -d /tmp/perftracker-demo.XXXXXX)

echo "demo: (0) a synthetic 16-worker job whose rank 11 has a slow data loader:"
echo "demo: $ perftracker synth --fault slow_dataloader --rank 11 -n 16 -o JOB && perftracker analyze -o OUT JOB"
"$build/bin/perftracker" synth --fault slow_dataloader --rank 11 -n 16 --quiet -o "$work/synth" >/dev/null
synthetic="$build/synthetic-demo"
"$build/bin/perftracker" analyze --quiet --force -o "$synthetic" "$work/synth" >/dev/null 2>&1 || true
"$torch_python" - "$synthetic/report.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["diagnosis"]
print("demo: verdict:", d["verdict"])
for i, f in enumerate(d["findings"][:3], 1):
    print(f"demo:   {i}. [{f['category']}, {100 * f['impact']:.0f}% of step time] {f['summary']}")
PY
echo "demo: report in $synthetic/ (report.json, PerfDisplay/)"
echo
# A free MASTER_PORT whose MASTER_PORT + 1 (the coordinator's) is free too.
port=$("$torch_python" -c '
import socket
for _ in range(100):
    a, b = socket.socket(), socket.socket()
    a.bind(("127.0.0.1", 0))
    try:
        b.bind(("127.0.0.1", a.getsockname()[1] + 1))
    except OSError:
        continue
    print(a.getsockname()[1])
    break')
if [[ -z $port ]]; then
    echo "demo: no free pair of adjacent loopback ports in 100 tries (is something holding most ports?)" >&2
    exit 1
fi
export MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=4 OMP_NUM_THREADS=1
export PERFTRACKER_KEY_DIR="$work/keys" PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"

echo "demo: starting the seed's example job: 4 ranks (gloo, CPU), rank r sleeps r seconds per step"
setsid "$torch_python" "$repo/scripts/demo-job.py" --launch 4 --iters 100000 --sleep-scale 1.0 \
    --print-every 0 >"$work/job.log" 2>&1 &
job=$!
cleanup() {
    kill -TERM -- "-$job" 2>/dev/null || true
    wait "$job" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "demo: $ c4d_perftracker --trigger-on --auto-analyze --wait 2 --steps 2 --save-raw-trace all --output-dir $out"
for attempt in $(seq 1 90); do
    set +e
    "$cli" --trigger-on --auto-analyze --wait 2 --steps 2 --save-raw-trace all --output-dir "$out" \
        >"$work/report.txt" 2>"$work/cli.err"
    rc=$?
    set -e
    # Retry only while the job is still starting (its coordinator not up yet).
    if ((rc == 1)) && grep -q "no running job found" "$work/cli.err"; then
        kill -0 "$job" 2>/dev/null || { echo "demo: the job exited:" >&2; tail -20 "$work/job.log" >&2; exit 1; }
        sleep 1
        continue
    fi
    break
done
cat "$work/cli.err" >&2
cat "$work/report.txt"
if ((rc != 0 && rc != 3)); then
    echo "demo: the trigger failed (exit $rc); the job's log:" >&2
    tail -20 "$work/job.log" >&2
    exit "$rc"
fi
round=$(sed -n 's/^PerfTracker report: \(.*\)\/PerfDisplay\/ .*/\1/p' "$work/report.txt")
echo
echo "demo: the report is in $round"
echo "demo:   $round/report.json"
echo "demo:   $round/PerfDisplay/   (the page; the line above says how to open it)"
echo "demo:   $round/raw_trace/     (each rank's raw trace; perftracker export converts one to Chrome JSON)"
