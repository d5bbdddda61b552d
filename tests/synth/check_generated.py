#!/usr/bin/env python3
"""Generated traces, checked from outside the C code.

Usage: check_generated.py PERFTRACKER WORKDIR

1. `perftracker synth --format kineto-gz` writes a faulty 4-worker job; every file loads
   with Python's json module and has the shape of a Kineto trace (distributedInfo,
   deviceProperties, the vendor's file name, ProfilerStep annotations, kernel args).
2. Per-kernel totals computed here, independently, over the profiled window agree to the
   nanosecond with what `perftracker summarize --json` reports for the same file.
3. The all-reduces are lock-step: the i-th one ends at the same time on every rank.
4. The injected fault is where expected.json says: the faulty rank's named kernel is
   slower than everyone else's.
5. A gloo job (--backend gloo --noise 0.2): no NCCL kernel, distributedInfo backend
   gloo, gloo:all_reduce user_annotations on two threads of their own, the straggler
   waiting least in them, and the same seed giving the same bytes.
6. The CLI: --help, bad options (exit 2), --format summary, --size-mb.
7. The model's structure: in every profiled step each transformer block runs its kernels
   the number of times its layers say (layer norm twice forward and twice backward,
   attention and GELU once each way), on every rank.
"""
import collections
import decimal
import glob
import gzip
import json
import os
import re
import shutil
import subprocess
import sys

CLI, WORK = sys.argv[1], sys.argv[2]
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what)


def run(*args, expect=0):
    proc = subprocess.run([CLI, *args], capture_output=True, text=True)
    check(proc.returncode == expect, f"{' '.join(args)} exited {proc.returncode}, expected {expect}: {proc.stderr.strip()}")
    return proc


def ns(value):
    """Kineto times are microseconds with up to 3 decimals: exact integer nanoseconds."""
    return int(decimal.Decimal(value) * 1000)


def kernel_key(ev):
    args = ev.get("args", {})
    grid, block = args.get("grid", [0, 0, 0]), args.get("block", [0, 0, 0])
    if grid[0] > 0:
        return ev["name"] + "%d_%d_%d|%d_%d_%d" % (*grid, *block)
    return ev["name"]


def load(path):
    with gzip.open(path, "rt") as f:
        return json.load(f, parse_float=decimal.Decimal)


def profiler_steps(events):
    return [ev for ev in events if ev.get("cat") == "user_annotation" and ev["name"].startswith("ProfilerStep#")]


def check_trace(path, doc, world, backend="nccl"):
    name = os.path.basename(path)
    info = doc.get("distributedInfo", {})
    rank = info.get("rank")
    check(info.get("world_size") == world and info.get("backend") == backend, f"{name}: distributedInfo {info}")
    m = re.fullmatch(r"node(\d+)_(\d+)_(\d+)\.json(\.gz)?", name)
    check(m is not None, f"{name}: not <host>_<local_rank>_<pid>.json.gz")
    if m:
        check(int(m.group(1)) == rank // 8 and int(m.group(2)) == rank % 8, f"{name}: host/local rank vs rank {rank}")
    props = doc.get("deviceProperties", [])
    check(len(props) == 8 and props[0].get("name", "").startswith("NVIDIA H100"), f"{name}: deviceProperties")
    events = doc.get("traceEvents")
    check(isinstance(events, list) and len(events) > 1000, f"{name}: traceEvents")
    # The links' counters (docs/synth.md): a one-node NCCL job's NVLink, sampled every 10 ms,
    # never above the 60 GB/s an all-reduce reaches there (+2% jitter); gloo has none.
    counters = [ev for ev in events if ev.get("ph") == "C"]
    events = [ev for ev in events if ev.get("ph") != "C"]
    if backend == "nccl":
        want = f"gpu{rank % 8}.nvlink_tx_mibps" if isinstance(rank, int) else None
        values = [float(ev.get("args", {}).get("value", -1)) for ev in counters]
        check(counters and all(ev.get("name") == want and ev["ts"] >= 0 for ev in counters) and
              all(0 <= v <= 60e9 * 1.03 / 2**20 for v in values) and max(values) > 0,
              f"{name}: link counters {counters[:3]}")
        gaps = [b["ts"] - a["ts"] for a, b in zip(counters, counters[1:])]
        check(gaps and all(abs(g - 10000) < 0.01 for g in gaps), f"{name}: counters not every 10 ms")
    else:
        check(not counters, f"{name}: a gloo job's counters")
    cats = collections.Counter()
    for ev in events:
        cats[ev.get("cat")] += 1
        check(ev.get("ph") == "X", f"{name}: ph {ev.get('ph')}")
        check(isinstance(ev.get("name"), str) and ev["ts"] >= 0 and ev["dur"] >= 0, f"{name}: malformed {ev}")
        if ev.get("cat") == "kernel":
            args = ev["args"]
            check(len(args["grid"]) == 3 and len(args["block"]) == 3 and args["device"] == rank % 8,
                  f"{name}: kernel args {args}")
            if ev["name"].startswith("nccl"):
                check(args.get("Collective name") == "allreduce" and args.get("Group size") == world and
                      args.get("dtype") == "Float" and args.get("In msg nelems", 0) > 0, f"{name}: NCCL args {args}")
        if len(FAILURES) > 20:
            break
    for cat in ("kernel", "gpu_memcpy", "cuda_runtime", "cpu_op", "python_function", "user_annotation"):
        check(cats[cat] > 0, f"{name}: no {cat} events")
    steps = profiler_steps(events)
    check([s["name"] for s in steps] == ["ProfilerStep#10", "ProfilerStep#11", "ProfilerStep#12"],
          f"{name}: steps {[s['name'] for s in steps]}")
    return rank, events


def kernel_totals(events):
    """Per kernel key: executions and nanoseconds inside the profiled window (first step
    start to last step end), clipped to it: the summarizer's definition."""
    steps = profiler_steps(events)
    w0 = min(ns(s["ts"]) for s in steps)
    w1 = max(ns(s["ts"]) + ns(s["dur"]) for s in steps)
    totals = collections.defaultdict(lambda: [0, 0])
    for ev in events:
        if ev.get("cat") != "kernel" or ev["name"].startswith("nccl"):
            continue
        a, b = ns(ev["ts"]), ns(ev["ts"]) + ns(ev["dur"])
        inside = (w0 <= a < w1) if a == b else (a < w1 and b > w0)
        if not inside:
            continue
        t = totals[kernel_key(ev)]
        t[0] += 1
        t[1] += max(0, min(b, w1) - max(a, w0))
    return totals


def check_gloo_job():
    out = os.path.join(WORK, "gloo")
    args = ("synth", "--backend", "gloo", "--noise", "0.2", "--fault", "slow_dataloader", "-n", "4", "--seed", "5",
            "--quiet")
    run(*args, "-o", out)
    run(*args, "-o", out + "-again")
    paths = sorted(glob.glob(os.path.join(out, "*.json")))
    paths = [p for p in paths if not p.endswith("expected.json")]
    check(len(paths) == 4, f"gloo: expected 4 traces, found {paths}")
    in_gloo = {}
    for path in paths:
        with open(path) as f:
            raw = f.read()
        with open(os.path.join(out + "-again", os.path.basename(path))) as f:
            check(f.read() == raw, f"{path}: the same seed gave other bytes")
        rank, events = check_trace(path, json.loads(raw, parse_float=decimal.Decimal), 4, "gloo")
        check(not any(e.get("cat") == "kernel" and e["name"].startswith("nccl") for e in events), f"{path}: NCCL kernel")
        gloo = [e for e in events if e["name"] == "gloo:all_reduce"]
        check(gloo and all(e.get("cat") == "user_annotation" for e in gloo), f"{path}: gloo:all_reduce events")
        main_tid = profiler_steps(events)[0]["tid"]
        autograd = {e["tid"] for e in events if e["name"].startswith("autograd::engine::evaluate_function: ")}
        threads = {e["tid"] for e in gloo}
        check(len(threads) == 2 and main_tid not in threads and not threads & autograd, f"{path}: gloo threads {threads}")
        in_gloo[rank] = sum(ns(e["dur"]) for e in gloo)
    expected = json.load(open(os.path.join(out, "expected.json")))
    check(expected["backend"] == "gloo" and expected["noise"] == 0.2, f"gloo expected.json {expected}")
    check(in_gloo and min(in_gloo, key=in_gloo.get) == expected["findings"][0]["workers"][0],
          f"the straggler does not wait least in gloo:all_reduce: {in_gloo}")


# Kernel name prefix -> launches per layer per step (the block's forward and backward).
PER_LAYER = {
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel": 2,
    "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel": 2,
    "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel": 2,
    "void pytorch_flash::flash_fwd_kernel": 1,
    "void pytorch_flash::flash_bwd_dq_dk_dv_loop": 1,
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDA": 1,
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluBack": 1,
}


def check_model_structure():
    out = os.path.join(WORK, "structure")
    run("synth", "-n", "2", "--seed", "1", "--format", "kineto-gz", "-o", out, "--quiet")
    layers = json.load(open(os.path.join(out, "expected.json")))["layers"]
    for path in sorted(glob.glob(os.path.join(out, "node*.json.gz"))):
        events = load(path)["traceEvents"]
        steps = profiler_steps(events)
        check(len(steps) == 3, f"{path}: {len(steps)} profiled steps, expected 3")
        for step in steps:
            t0, t1 = ns(step["ts"]), ns(step["ts"]) + ns(step["dur"])
            inside = [e["name"] for e in events if e.get("cat") == "kernel" and t0 <= ns(e["ts"]) < t1]
            # Arguments only where Kineto writes them: kernels, copies, and the collective's
            # record_param_comms (with its Rank); never on runtime, Python or annotations.
            for e in events:
                if "args" in e and t0 <= ns(e["ts"]) < t1:
                    allowed = e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") or e["name"] == "record_param_comms" \
                        or e.get("ph") == "C"  # a counter's value
                    check(allowed, f"{os.path.basename(path)}: a {e.get('cat')} event {e['name'][:40]!r} has args "
                          f"{list(e['args'])[:4]}")
                    if not allowed:
                        break
            for prefix, per_layer in PER_LAYER.items():
                got = sum(name.startswith(prefix) for name in inside)
                check(got == per_layer * layers, f"{os.path.basename(path)} {step['name']}: {prefix[-40:]} "
                      f"launched {got} times, expected {per_layer} x {layers} layers")


def check_second_fault():
    """--second-fault/--second-rank/--second-severity reach the job: rank 2's GPU kernels
    (the second fault, slow_gpu) run longer than every other rank's, by about the severity
    asked, in the traces themselves; rank 1 has the first fault (a slow data loader)."""
    out = os.path.join(WORK, "second")
    run("synth", "--fault", "slow_dataloader", "--rank", "1", "--second-fault", "slow_gpu", "--second-rank", "2",
        "--second-severity", "0.5", "-n", "4", "--seed", "2", "--format", "kineto-gz", "-o", out, "--quiet")
    expected = json.load(open(os.path.join(out, "expected.json")))
    check(expected.get("second_fault") == "slow_gpu" and expected.get("second_severity") == 0.5, f"expected.json {expected}")
    found = {(f["category"], tuple(f["workers"])) for f in expected["findings"]}
    check(found == {("python", (1,)), ("gpu_compute", (2,))}, f"second fault's expected findings {found}")
    compute = {}
    for path in sorted(glob.glob(os.path.join(out, "*.json.gz"))):
        rank, events = check_trace(path, load(path), 4)
        compute[rank] = sum(total for _, total in kernel_totals(events).values())
    others = max(compute[r] for r in (0, 1, 3))
    check(compute[2] > 1.2 * others, f"rank 2's kernels are not slower: {compute}")


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    out = os.path.join(WORK, "job")
    run("synth", "--fault", "slow_gpu", "-n", "4", "--seed", "3", "--format", "kineto-gz", "-o", out, "--quiet")
    paths = sorted(glob.glob(os.path.join(out, "*.json.gz")))
    check(len(paths) == 4, f"expected 4 traces, found {paths}")
    expected = json.load(open(os.path.join(out, "expected.json")))
    finding = expected["findings"][0]
    check(finding["category"] == "gpu_compute" and finding["workers"] == [3], f"expected.json: {finding}")

    nccl_ends, medians = {}, {}
    for path in paths:
        rank, events = check_trace(path, load(path), 4)
        nccl_ends[rank] = [ns(e["ts"]) + ns(e["dur"]) for e in events
                           if e.get("cat") == "kernel" and e["name"].startswith("nccl")]
        mine = kernel_totals(events)
        proc = run("summarize", path, "--json")
        summary = json.loads(proc.stdout) if proc.returncode == 0 else {"functions": []}
        compared = 0
        for f in summary["functions"]:
            if f["class"] != "compute":
                continue
            count, total = mine.get(f["name"], (0, 0))
            check(count == f["count"], f"rank {rank} {f['name'][:60]}: count {count} vs summary {f['count']}")
            check(abs(total - round(f["total_ms"] * 1e6)) <= 1,
                  f"rank {rank} {f['name'][:60]}: {total} ns vs summary {f['total_ms']} ms")
            compared += 1
        check(compared >= 20, f"rank {rank}: only {compared} kernels compared")
        durs = sorted(ns(e["dur"]) for e in events if e.get("cat") == "kernel" and kernel_key(e) == finding["function"])
        check(len(durs) > 0, f"rank {rank}: the expected kernel never ran")
        medians[rank] = durs[len(durs) // 2] if durs else 0

    ends = list(nccl_ends.values())
    check(all(e == ends[0] for e in ends) and len(ends[0]) > 0, "all-reduce ends differ across ranks")
    check(medians[3] > 1.2 * max(medians[r] for r in (0, 1, 2)), f"faulty kernel medians {medians}")

    check_gloo_job()
    check_model_structure()
    check_second_fault()

    # The CLI.
    helped = run("synth", "--help")
    check(all(o in helped.stdout for o in ("--size-mb", "--fault", "--backend", "--noise")), "--help lacks options")
    run("synth", "--backend", "mpi", "-o", os.path.join(WORK, "x"), expect=2)
    run("synth", "--noise", "0.9", "-o", os.path.join(WORK, "x"), expect=2)
    run("synth", "--fault", "nope", "-o", os.path.join(WORK, "x"), expect=2)
    run("synth", "-n", "0", "-o", os.path.join(WORK, "x"), expect=2)
    run("synth", "--fault", "two_slow", "-n", "2", "-o", os.path.join(WORK, "x"), expect=2)
    run("synth", "-n", "8", expect=2)  # no -o

    summaries = os.path.join(WORK, "summaries")
    run("synth", "--format", "summary", "-n", "20", "--fault", "gc_pause", "--rank", "5,11", "-o", summaries, "--quiet")
    ptsum = sorted(glob.glob(os.path.join(summaries, "*.ptsum")))
    check(len(ptsum) == 20, f"expected 20 summaries, found {len(ptsum)}")
    key = json.load(open(os.path.join(summaries, "expected.json")))
    check(key["findings"][0]["workers"] == [5, 11], f"summary job expected.json {key}")
    check(not glob.glob(os.path.join(summaries, "*.json.gz")) and len(glob.glob(os.path.join(summaries, "*.json"))) == 1,
          "--format summary wrote traces")

    sized = os.path.join(WORK, "sized")
    run("synth", "--size-mb", "4", "-o", sized, "--quiet")
    files = glob.glob(os.path.join(sized, "*.json"))
    check(len(files) == 1, f"--size-mb wrote {files}")
    if files:
        size = os.path.getsize(files[0])
        check(3.4e6 < size < 4.6e6, f"--size-mb 4 wrote {size} bytes")
        with open(files[0]) as f:
            check(len(json.load(f)["traceEvents"]) > 10000, "sized trace too small")

    if FAILURES:
        print(f"{len(FAILURES)} failure(s)")
        return 1
    shutil.rmtree(WORK, ignore_errors=True)
    print("ok: generated JSON valid, kernel totals agree with the summarizer, CLI behaves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
