#!/usr/bin/env python3
"""The structural fault kinds, checked from the traces they write, with no perftracker code.

Usage: check_structural.py PERFTRACKER WORKDIR

For every kind from unbucketed_allreduce on, at 1, 2 or 3 workers where the kind makes
sense and at 8 with noise, the job and its twin (--without-fault: same seed, same noise)
are written as Kineto JSON, and:

1. the true saving expected.json gives is the one the traces show: the job's step is the
   slowest written worker's mean ProfilerStep, and the saving (step with - step without) /
   step with, computed here from both jobs' files;
2. the twin has no fault: its expected.json finds nothing, and the fault's mark (the frame,
   the calls, the extra layer, the missing overlap ...) is absent from its traces;
3. the fault is where expected.json says: that mark is on the ranks it names and only
   there, the files it says are missing are missing, and the function and parts it names
   are keys of `perftracker summarize` for those ranks.
"""
import collections
import glob
import json
import os
import re
import shutil
import subprocess
import sys

CLI, WORK = sys.argv[1], sys.argv[2]
FAILURES = []

# (kind, workers, extra arguments): 1-3 workers where the kind makes sense, 8 with noise.
CASES = [
    ("unbucketed_allreduce", 2, []),
    ("unbucketed_allreduce", 3, ["--steps", "2"]),
    ("unbucketed_allreduce", 8, ["--noise", "0.1", "--steps", "2"]),
    ("unoverlapped_allreduce", 2, []),
    ("unoverlapped_allreduce", 3, ["--rank", "1"]),
    ("unoverlapped_allreduce", 8, ["--noise", "0.1"]),
    ("intermittent_stall", 1, ["--steps", "5"]),
    ("intermittent_stall", 3, ["--steps", "7", "--rank", "2"]),
    ("intermittent_stall", 8, ["--steps", "5", "--noise", "0.1"]),
    ("loader_starved", 1, []),
    ("loader_starved", 2, ["--backend", "gloo"]),
    ("loader_starved", 8, ["--noise", "0.3"]),
    ("single_process_loader", 1, []),
    ("single_process_loader", 2, []),
    ("single_process_loader", 8, ["--noise", "0.1", "--steps", "2"]),
    ("slow_gpu_mlp", 2, []),
    ("slow_gpu_mlp", 3, ["--rank", "0"]),
    ("slow_gpu_mlp", 8, ["--noise", "0.1"]),
    ("empty_cache", 1, []),
    ("empty_cache", 3, ["--steps", "2"]),
    ("empty_cache", 8, ["--noise", "0.1", "--steps", "2"]),
    ("pipeline_imbalance", 2, ["--steps", "2"]),
    ("pipeline_imbalance", 3, ["--steps", "2", "--rank", "0"]),
    ("pipeline_imbalance", 8, ["--noise", "0.05", "--steps", "2"]),
    ("absent_straggler", 2, []),
    ("absent_straggler", 3, ["--rank", "1"]),
    ("absent_straggler", 8, ["--noise", "0.1"]),
]
CLASS_OF = {"gpu_compute": "compute", "cuda_runtime": "runtime", "python": "python", "communication": "comm"}


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what)
    return cond


def run(*args):
    proc = subprocess.run([CLI, *args], capture_output=True, text=True)
    check(proc.returncode == 0, f"{' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()[:300]}")
    return proc


class Worker:
    """One trace: its rank, events, ProfilerSteps and helpers over them (times in us)."""

    def __init__(self, path):
        with open(path) as f:
            doc = json.load(f)
        self.name = os.path.basename(path)
        self.pid = int(self.name.split("_")[2].split(".")[0])
        self.rank = self.pid - 10000  # the vendor's name: <host>_<local_rank>_<pid>, pid 10000 + rank
        self.events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
        self.steps = sorted((e for e in self.events if e.get("cat") == "user_annotation"
                             and e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
        self.info = doc.get("distributedInfo")

    def mean_step(self):
        return sum(s["dur"] for s in self.steps) / len(self.steps)

    def named(self, name, cat=None):
        return [e for e in self.events if e["name"] == name and (cat is None or e.get("cat") == cat)]

    def kernels(self, nccl=False):
        return [e for e in self.events if e.get("cat") == "kernel" and e["name"].startswith("nccl") == nccl]

    def per_step(self, events):
        """How many of the events start in each ProfilerStep."""
        return [sum(1 for e in events if s["ts"] <= e["ts"] < s["ts"] + s["dur"]) for s in self.steps]

    def step_of(self, event):
        for s in self.steps:
            if s["ts"] <= event["ts"] < s["ts"] + s["dur"]:
                return int(s["name"].split("#")[1])
        return None


def load_job(path):
    with open(os.path.join(path, "expected.json")) as f:
        expected = json.load(f)
    workers = {w.rank: w for w in map(Worker, sorted(glob.glob(os.path.join(path, "node*.json"))))}
    return expected, workers


def job_step(workers):
    """The pace of a lock-step job: its slowest worker's mean step (us)."""
    return max(w.mean_step() for w in workers.values())


def busy(intervals):
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def overlap(worker):
    """The share of a worker's all-reduce time during which its GPU computes."""
    compute = sorted((e["ts"], e["ts"] + e["dur"]) for e in worker.kernels())
    total = covered = 0.0
    for e in worker.kernels(nccl=True):
        a, b = e["ts"], e["ts"] + e["dur"]
        total += b - a
        inside = [(max(a, c), min(b, d)) for c, d in compute if d > a and c < b]
        covered += busy(inside)
    return covered / total if total else 0.0


def normalized(frame):
    """A frame as the summarizer names it: "file.py(12): f" -> "file.py: f", "... at 0x7f3c>" -> "... at 0x>"."""
    frame = re.sub(r"\.py\(\d+\):", ".py:", frame, count=1)
    return re.sub(r" at 0x[0-9a-fA-F]+", " at 0x", frame, count=1)


def stacks(worker):
    """Every call stack of the worker's CPU events, rebuilt per thread from their times."""
    out = set()
    cpu = [e for e in worker.events if e.get("cat") in ("python_function", "cpu_op", "user_annotation")
           and not e["name"].startswith("ProfilerStep#")]
    for tid in {e["tid"] for e in cpu}:
        open_frames = []
        for e in sorted((e for e in cpu if e["tid"] == tid), key=lambda e: (e["ts"], -e["dur"])):
            while open_frames and open_frames[-1][0] <= e["ts"] + 1e-4:
                open_frames.pop()
            parent = open_frames[-1][1] + "|" if open_frames else ""
            stack = parent + normalized(e["name"])
            out.add(stack)
            open_frames.append((e["ts"] + e["dur"], stack))
    return out


def kernel_keys(worker):
    """Kernel keys as the summarizer's: compute kernels with grid and block, collectives by name."""
    keys = set()
    for e in worker.events:
        if e.get("cat") != "kernel":
            continue
        grid, block = e["args"]["grid"], e["args"]["block"]
        keys.add(e["name"] if e["name"].startswith("nccl") else e["name"] + "%d_%d_%d|%d_%d_%d" % (*grid, *block))
    return keys


def summary_keys(path):
    proc = run("summarize", path, "--json")
    return {(f["class"], f["name"]) for f in json.loads(proc.stdout)["functions"]} if proc.returncode == 0 else set()


# ------------------------------------------------------------ each kind's mark

def mark_unbucketed(exp, workers, finding, twin):
    per_step = finding["collectives_per_step"] if finding else None
    for w in workers.values():
        counts = w.per_step(w.kernels(nccl=True))
        frames = w.named("train.py(64): average_gradients")
        if twin:
            check(not frames and all(c == counts[0] and c < 10 for c in counts),
                  f"unbucketed twin rank {w.rank}: {len(frames)} average_gradients, all-reduces per step {counts}")
        else:
            check(len(frames) == len(w.steps) and all(c == per_step for c in counts),
                  f"unbucketed rank {w.rank}: all-reduces per step {counts}, expected {per_step} each")
    if finding:
        check(per_step == 12 * exp["layers"] + 3, f"unbucketed: {per_step} collectives for {exp['layers']} layers")


def mark_unoverlapped(exp, workers, finding, twin):
    faulty = set(finding["workers"]) if finding else set()
    for w in workers.values():
        o, hooks = overlap(w), w.named("train.py(52): allreduce_hook")
        if w.rank in faulty:
            check(o < 0.02 and hooks, f"unoverlapped: the faulty rank {w.rank} overlaps {o:.2f}, {len(hooks)} hooks")
        else:
            check(o > 0.3 and not hooks, f"unoverlapped{' twin' if twin else ''}: rank {w.rank} overlaps {o:.2f}, "
                  f"{len(hooks)} hooks")


def mark_stall(exp, workers, finding, twin):
    faulty = set(finding["workers"]) if finding else set()
    for w in workers.values():
        saves = w.named("train.py(112): save_checkpoint")
        if w.rank not in faulty:
            check(not saves, f"stall{' twin' if twin else ''}: rank {w.rank} saves {len(saves)} checkpoints")
            continue
        steps = sorted(w.step_of(e) for e in saves)
        check(steps == finding["stall_steps"], f"stall: rank {w.rank} stalls in {steps}, expected "
              f"{finding['stall_steps']}")
        check(all(250e3 <= e["dur"] <= 405e3 for e in saves), f"stall: {[e['dur'] for e in saves]} us, not 250-400 ms")
        calm = [s["dur"] for s in w.steps if int(s["name"].split("#")[1]) not in steps]
        for e in saves:  # the stalled step is longer than the rank's others by about the stall
            step = next(s for s in w.steps if int(s["name"].split("#")[1]) == w.step_of(e))
            check(step["dur"] - max(calm) > 0.8 * e["dur"], f"stall: step {step['name']} {step['dur']} us vs {calm}")


def loader_time(w):
    return sum(e["dur"] for e in w.named("torch/utils/data/dataloader.py(631): __next__")) / len(w.steps)


def mark_starved(exp, workers, finding, twin):
    extra = exp["severity"] * exp["healthy_step_ms"] * 1000
    for w in workers.values():
        t = loader_time(w)
        polls = w.named("<built-in method poll of select.poll object at 0x7f3c29d1a0f0>")
        check(polls, f"starved: rank {w.rank} never polls its loader's queue")
        if twin:
            check(t < 2000, f"starved twin: rank {w.rank} waits {t:.0f} us per step in __next__")
        else:
            check(t > 0.8 * extra, f"starved: rank {w.rank} waits {t:.0f} us per step, expected ~{extra:.0f}")


def mark_single_process(exp, workers, finding, twin):
    leaves = ["<built-in method read of _io.BufferedReader object at 0x7f3c29d1a3b0>",
              "<built-in method encode_batch of tokenizers.Tokenizer object at 0x7f3c29d1a4d0>",
              "<built-in method stack of type object at 0x7f3c2a1e5c80>"]
    for w in workers.values():
        step, t = w.mean_step(), loader_time(w)
        shares = [sum(e["dur"] for e in w.named(leaf)) / len(w.steps) / step for leaf in leaves]
        if twin:
            check(t < 0.03 * step and not any(shares), f"single-process twin: rank {w.rank} loads {t / step:.3f} of "
                  f"its step, leaves {shares}")
            continue
        check(0.15 < t / step < 0.45 and all(0.02 < s < 0.15 for s in shares),
              f"single-process: rank {w.rank} loads {t / step:.3f} of its step, leaves {shares}")
        if len(workers) == 1:  # a single GPU job: no distributedInfo, and the GPU busy ~70%
            window = (w.steps[0]["ts"], w.steps[-1]["ts"] + w.steps[-1]["dur"])
            gpu = busy([(max(e["ts"], window[0]), min(e["ts"] + e["dur"], window[1])) for e in w.kernels()
                        if e["ts"] < window[1] and e["ts"] + e["dur"] > window[0]])
            share = gpu / (window[1] - window[0])
            check(w.info is None and 0.66 < share < 0.80, f"single GPU: distributedInfo {w.info}, GPU busy {share:.3f}")


def mark_mlp(exp, workers, finding, twin):
    by_name = collections.Counter()
    for w in workers.values():
        for e in w.kernels():
            by_name[e["name"]] += e["dur"]
    top = sum(d for _, d in by_name.most_common(3))
    check(top > 0.95 * sum(by_name.values()), f"mlp: three kernel names are {top / sum(by_name.values()):.3f} of it")
    faulty = set(finding["workers"]) if finding else set()
    gemm = [n for n, _ in by_name.most_common(1)][0]
    medians = {}
    for w in workers.values():
        d = sorted(e["dur"] for e in w.kernels() if e["name"] == gemm)
        medians[w.rank] = d[len(d) // 2]
    healthy = max(m for r, m in medians.items() if r not in faulty)
    for r in faulty:
        check(medians[r] > 1.2 * healthy, f"mlp: the faulty rank's GEMM median {medians[r]} vs {healthy}")
    if twin:  # within the noise
        check(max(medians.values()) < 1.2 * min(medians.values()), f"mlp twin: GEMM medians {medians}")


def mark_empty_cache(exp, workers, finding, twin):
    layers = exp["layers"]
    for w in workers.values():
        frees = w.per_step(w.named("cudaFree", "cuda_runtime"))
        mallocs = w.per_step(w.named("cudaMalloc", "cuda_runtime"))
        if twin:
            check(not any(frees) and not any(mallocs), f"empty_cache twin: rank {w.rank} frees {frees} {mallocs}")
            continue
        check(frees == [3 * layers] * len(w.steps) and mallocs == [4 * layers] * len(w.steps),
              f"empty_cache: rank {w.rank} per step {frees} cudaFree, {mallocs} cudaMalloc")
        t = sum(e["dur"] for e in w.named("cudaFree") + w.named("cudaMalloc")) / len(w.steps)
        check(t > 0.25 * w.mean_step(), f"empty_cache: rank {w.rank} spends {t / w.mean_step():.3f} in them")


def mark_pipeline(exp, workers, finding, twin):
    stages, layers = exp["pipeline_stages"], exp["layers_per_stage"]
    per = exp["layers"] // stages
    replicas = exp["workers"] // stages
    if twin:
        check(layers == [per] * stages, f"pipeline twin: layers per stage {layers}")
    else:
        heavy = finding["stage"]
        light = heavy - 1 if heavy > 0 else 1  # the neighbour the block was taken from
        want = [per + 1 if s == heavy else per - 1 if s == light else per for s in range(stages)]
        check(layers == want, f"pipeline: layers per stage {layers}, expected {want}")
        check(finding["workers"] == [heavy * replicas + d for d in range(replicas)], f"pipeline: {finding['workers']}")
    flash = "void pytorch_flash::flash_fwd_kernel"
    for w in workers.values():
        stage = w.rank // replicas
        counts = w.per_step([e for e in w.kernels() if e["name"].startswith(flash)])
        want = layers[stage] * exp["microbatches"]
        # the pipeline's first microbatches of a step may start before the stage's own step
        check(sum(counts) == want * len(w.steps) and max(counts) <= want + layers[stage],
              f"pipeline: rank {w.rank} (stage {stage}) runs {counts} attention blocks per step, expected {want}")


def mark_absent(exp, workers, finding, twin, expected_files):
    missing = set(finding["missing_ranks"]) if finding else set(expected_files["missing"])
    check(missing and not missing & set(workers) and set(workers) | missing == set(range(exp["workers"])),
          f"absent: ranks written {sorted(workers)}, missing {sorted(missing)}")
    waits = {r: sum(e["dur"] for e in w.kernels(nccl=True)) / len(w.steps) for r, w in workers.items()}
    expected_files["waits"] = waits


MARKS = {"unbucketed_allreduce": mark_unbucketed, "unoverlapped_allreduce": mark_unoverlapped,
         "intermittent_stall": mark_stall, "loader_starved": mark_starved,
         "single_process_loader": mark_single_process, "slow_gpu_mlp": mark_mlp,
         "empty_cache": mark_empty_cache, "pipeline_imbalance": mark_pipeline}


def check_case(kind, n, extra, index):
    base = os.path.join(WORK, f"{index:02d}_{kind}_{n}")
    args = ["synth", "--quiet", "--fault", kind, "-n", str(n), "--seed", str(20 + index), *extra]
    run(*args, "-o", base)
    run(*args, "--without-fault", "-o", base + "_twin")
    exp, workers = load_job(base)
    twin_exp, twin_workers = load_job(base + "_twin")
    what = f"{kind} -n {n} {' '.join(extra)}"
    if not check(workers and twin_workers, f"{what}: no traces"):
        return
    # 1. The true saving, from both jobs' ProfilerSteps.
    with_fault, without = job_step(workers), job_step(twin_workers)
    saving = (with_fault - without) / with_fault
    for e in (exp, twin_exp):
        check(abs(e["true_saving"] - saving) < 2e-5, f"{what}: true_saving {e['true_saving']}, traces say {saving:.6f}")
        check(abs(e["step_ms"]["with_fault"] - with_fault / 1000) < 1e-3 and
              abs(e["step_ms"]["without_fault"] - without / 1000) < 1e-3,
              f"{what}: step_ms {e['step_ms']}, traces {with_fault / 1000:.4f} / {without / 1000:.4f}")
    check(saving > 0.03, f"{what}: fixing it saves only {saving:.3f}")
    # 2. The twin finds nothing and has the same traces written.
    check(twin_exp["findings"] == [] and twin_exp["verdict"] == "healthy" and twin_exp["without"] == [kind],
          f"{what}: the twin's expected.json {twin_exp['findings']} {twin_exp['verdict']} {twin_exp['without']}")
    check(sorted(workers) == sorted(twin_workers), f"{what}: twin wrote {sorted(twin_workers)}, job {sorted(workers)}")
    # 3. The fault is where expected.json says.
    check(len(exp["findings"]) == 1 and exp["findings"][0]["fault"] == kind, f"{what}: findings {exp['findings']}")
    finding = exp["findings"][0]
    if kind == "absent_straggler":
        job_files, twin_files = {}, {"missing": finding["missing_ranks"]}
        mark_absent(exp, workers, finding, False, job_files)
        mark_absent(twin_exp, twin_workers, None, True, twin_files)
        # everyone left waits for the absent rank: their all-reduces last longer than in the twin
        injected = exp["severity"] * exp["healthy_step_ms"] * 1000
        for r, t in job_files["waits"].items():
            check(t - twin_files["waits"][r] > 0.5 * injected,
                  f"{what}: rank {r} waits {t:.0f} us per step, {twin_files['waits'][r]:.0f} without the straggler")
        check(finding["workers"] == finding["missing_ranks"] and finding["function"] is None, f"{what}: {finding}")
    else:
        MARKS[kind](exp, workers, finding, False)
        MARKS[kind](twin_exp, twin_workers, None, True)
    all_workers = finding["all_workers"]
    check(all_workers == (kind in ("unbucketed_allreduce", "loader_starved", "single_process_loader", "empty_cache")),
          f"{what}: all_workers {all_workers}")
    named = sorted(workers) if all_workers else finding["workers"]
    if not all_workers:
        check(finding["worker_names"] == [f"node{r // 8}_{r % 8}_{10000 + r}.json" for r in named],
              f"{what}: worker_names {finding['worker_names']}")
    # The function and its parts: stacks and kernels the named ranks have and no other rank
    # has, named as the summarizer names them (runtime calls: its keys of them).
    keys = [k for k in [finding["function"]] + finding["parts"] if k]
    written = [r for r in named if r in workers]
    for r in sorted(workers):
        w = workers[r]
        have = stacks(w) | kernel_keys(w)
        if any(k in ("cudaFree", "cudaMalloc", "cudaStreamWaitEvent") for k in keys):
            have |= {name for cls, name in summary_keys(os.path.join(base, w.name)) if cls == "runtime"}
        for key in keys:
            shared = (kind in ("absent_straggler", "slow_gpu_mlp", "pipeline_imbalance") or
                      key == "cudaStreamWaitEvent" or key.startswith("nccl"))
            if r in written:
                check(key in have, f"{what}: rank {r} has no {key[-80:]!r}")
            elif not shared:  # a kernel every rank runs, or a runtime call, is only slower there
                check(key not in have, f"{what}: rank {r}, not named, has {key[-80:]!r}")
    if kind == "absent_straggler":  # what the absent rank runs slower: every rank runs it
        check(all(finding["parts"][0] in kernel_keys(w) for w in workers.values()), f"{what}: parts {finding['parts']}")


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    for index, (kind, n, extra) in enumerate(CASES):
        check_case(kind, n, extra, index)
    if FAILURES:
        print(f"{len(FAILURES)} failure(s)")
        return 1
    shutil.rmtree(WORK, ignore_errors=True)
    print(f"ok: {len(CASES)} structural jobs: true savings as their twins' traces show, twins without the fault, "
          "faults where expected.json says")
    return 0


if __name__ == "__main__":
    sys.exit(main())
