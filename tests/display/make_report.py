#!/usr/bin/env python3
"""make_report.py -- a realistic report.json (docs/report-schema.md) with a known fault, for
the PerfDisplay tests; generated, never hand-written.

    make_report.py OUT.json [--workers 8] [--fault-rank 5] [--seed 1] [--raw-trace master] [--bounded]

--bounded writes the bounded form perftracker writes above 4096 workers (the "scale" key;
full detail for the named and outlying workers, a table of every worker, per-node heatmap
rows) and its parts, OUT.json's folder/parts/workers-NNNN.json.

The job: synchronous data-parallel training, 8 GPUs per host. Rank FAULT has a slow GPU:
its GEMM kernel runs 1.52x slower, so its step computes ~170 ms longer and every other
worker waits for it inside the all-reduce (the straggler shows the *shortest*
communication). The diagnosis names it first. Two names are hostile on purpose, a kernel
and a Python frame called <img src=x onerror=alert(1)>, and a worker's file name and a
warning carry markup too: the page must show them as text.

Standard library only; deterministic for a given seed. Prints the facts the tests assert
on as one JSON line on stdout.
"""
import argparse
import json
import math
import os
import random

XSS = "<img src=x onerror=alert(1)>"
GEMM = ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nt16_32_1|128_1_1")
ADAM = ("void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float, float, int>, "
        "float, float, float, float, float, float, adamMode_t, float>(long, int volatile*, "
        "TensorListMetadata<4>, AdamFunctor<float, float, int>, float, float, float, float, "
        "float, float, adamMode_t, float)320_1_1|512_1_1")
INDEXING = ("void (anonymous namespace)::indexing_backward_kernel<c10::Half, 4>(long const*, "
            "long const*, c10::Half const*, c10::Half*, long, long, long, long, bool)256_16_1|32_4_1")
XSS_KERNEL = XSS + "1_1_1|32_1_1"
NCCL = "ncclDevKernel_AllReduce_Sum_f16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
SENDRECV = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"
BACKWARD = ("pretrain_gpt.py: <module>|megatron/training.py: pretrain|megatron/training.py: train|"
            "megatron/training.py: train_step|megatron/core/pipeline_parallel/schedules.py: "
            "forward_backward_pipelining_without_interleaving|megatron/core/pipeline_parallel/"
            "schedules.py: backward_step|megatron/core/pipeline_parallel/schedules.py: "
            "custom_backward|<built-in method run_backward of torch._C._EngineBase object at 0x>")
XSS_STACK = "pretrain_gpt.py: <module>|megatron/training.py: train|" + XSS
LOADER = ("pretrain_gpt.py: <module>|megatron/training.py: train|megatron/training.py: "
          "train_step|torch/utils/data/dataloader.py: __next__")

# kernel -> (median ms per execution, executions per step)
KERNELS = {GEMM: (1.02, 320), ADAM: (4.03, 10), INDEXING: (1.2, 12), XSS_KERNEL: (0.05, 40)}
SLOWDOWN = 1.52


def r(x, digits=4):
    return float("%.*g" % (digits, x))


def build(workers, fault, seed, raw_trace):
    rng = random.Random(seed)
    hosts_per = 8
    names, hosts = [], []
    for rank in range(workers):
        host = "node%d" % (rank // hosts_per)
        name = "%s_%d_%d.json" % (host, rank % hosts_per, 4711 + rank)
        if rank == 3 and workers > 3:
            name = "node0_3_<b>4714</b>.json"  # a file name with markup in it
        names.append(name)
        hosts.append(host)

    gemm_ms = KERNELS[GEMM][0] * KERNELS[GEMM][1]           # ~326 ms per step
    extra = gemm_ms * (SLOWDOWN - 1)                         # ~170 ms on the faulty GPU
    base = {"compute_ms": 560.0, "memory_ms": 9.0, "communication_ms": 120.0,
            "runtime_ms": 32.0, "python_ms": 60.0, "idle_ms": 31.5}
    step_ms = sum(base.values()) + extra                     # everyone waits for the straggler
    worker_list, compute, comm = [], [], []
    for rank in range(workers):
        noise = lambda s: rng.gauss(0, s)
        b = dict(base)
        b["compute_ms"] += noise(1.5) + (extra if rank == fault else 0)
        b["communication_ms"] += noise(1.0) + (0 if rank == fault else extra)
        b = {k: r(max(0.0, v)) for k, v in b.items()}
        b["idle_ms"] = r(max(0.0, step_ms - sum(v for k, v in b.items() if k != "idle_ms")))
        compute.append(b["compute_ms"])
        comm.append(b["communication_ms"])
        steps = []
        for i, step in enumerate((12, 13, 14)):
            scale = 1 + rng.gauss(0, 0.004)
            s = {k: r(v * scale) for k, v in b.items()}
            s["step"] = step
            s["ms"] = r(sum(v for k, v in s.items() if k != "step"))
            # One sync point a step (the gradients' all-reduce), then the optimizer's work.
            work = s["ms"] - s["communication_ms"] - s["idle_ms"]
            tail = min(work, 25.0)
            s["syncs"] = [[r(s["ms"] - tail), r(work - tail)]]
            s["tail_busy_ms"] = r(tail)
            steps.append({"step": s.pop("step"), "ms": s.pop("ms"), **s})
        w = {"rank": rank, "name": names[rank], "host": hosts[rank], "local_rank": rank % hosts_per,
             "pid": 4711 + rank, "rank_source": "distributedInfo", "step_time_ms": r(step_ms + noise(0.8)),
             "gpu_utilization": r(b["compute_ms"] / step_ms), "status": "slow" if rank == fault else "normal",
             "breakdown": b, "steps": steps}
        if raw_trace == "all" or (raw_trace == "master" and rank == 0):
            w["raw_trace"] = "raw_trace/" + names[rank].replace(".json", ".ptrace")
        worker_list.append(w)

    util = sorted(w["gpu_utilization"] for w in worker_list)
    median_util = util[len(util) // 2]
    fault_name = names[fault]
    gemm_ratio = gemm_ms / step_ms
    impact = r(extra / step_ms, 3)
    idle_rank = 0 if fault != 0 else 1                       # named by a finding that saves nothing
    indexing_ms = KERNELS[INDEXING][0] * KERNELS[INDEXING][1]  # its median over every worker

    functions = [("gpu_compute", GEMM), ("gpu_compute", ADAM), ("gpu_compute", INDEXING),
                 ("gpu_compute", XSS_KERNEL), ("gpu_memory", "Memcpy DtoD (Device -> Device)"),
                 ("gpu_memory", "Memcpy HtoD (Host -> Device)"), ("communication", NCCL),
                 ("communication", SENDRECV), ("cuda_runtime", "cudaLaunchKernel"),
                 ("cuda_runtime", "cudaMemcpyAsync"), ("python", BACKWARD), ("python", LOADER),
                 ("python", XSS_STACK)]
    shares_median = [gemm_ratio, 0.041, 0.015, 0.002, 0.0104, 0.004, 0.27, 0.07, 0.0397, 0.006,
                     0.168, 0.012, 0.011]
    values, shares = [], []
    for rank in range(workers):
        row_v, row_s = [], []
        for j, (cat, _) in enumerate(functions):
            v = rng.gauss(0, 0.002)
            if rank == fault and j == 0:
                v = extra / step_ms
            if rank == fault and j == 6:
                v = -extra / step_ms
            row_v.append(r(v, 3))
            row_s.append(r(max(0.0, shares_median[j] + v), 3))
        values.append(row_v)
        shares.append(row_s)
    # A cell is the worker's value less the median worker's (docs/report-schema.md): the
    # noise drawn above, centred on each column's median.
    for j in range(len(functions)):
        column = sorted(row[j] for row in values)
        mid = (column[(workers - 1) // 2] + column[workers // 2]) / 2
        for row in values:
            row[j] = r(row[j] - mid, 3)

    def others(rank):
        return [n for i, n in enumerate(names) if i != rank]

    python_section = {
        BACKWARD: {n: r(0.168 + rng.gauss(0, 0.004)) for n in names},
        LOADER: {n: r(0.012 + abs(rng.gauss(0, 0.001))) for n in names[: max(1, workers // 2)]},
        XSS_STACK: {n: r(0.011 + abs(rng.gauss(0, 0.0005))) for n in names},
    }
    report = {
        "report_version": 1,
        "perftracker_version": "0.1.0",
        "generated_at": "2026-11-29T07:30:00Z",
        "job": {"world_size": workers, "workers_analyzed": workers, "missing_ranks": [], "steps": 3,
                "median_step_time_ms": r(step_ms)},
        "workers": worker_list,
        "diagnosis": {
            "verdict": "degraded",
            "step_model": {"step_ms": r(step_ms), "steps": 3, "sync_points_per_step": 1,
                           "pace": [{"step": i, "rank": fault, "sets": 1, "of": 1, "lead_ms": r(extra),
                                     "above_noise": True} for i in range(3)]},
            "findings": [
                {"category": "gpu_compute", "function": GEMM, "workers": [fault], "all_workers": False,
                 "impact": impact,
                 "summary": ("Rank %d (%s) is the straggler: its GPU runs %s %.2fx slower than the other "
                             "workers, adding %.0f ms to every step while the others wait for it in "
                             "the all-reduce." % (fault, fault_name, GEMM.split("|")[0][:48], SLOWDOWN, extra)),
                 "evidence": {"section": "GPU Compute", "key": GEMM, "metric": "bottleneck ms per step",
                              "median": r(gemm_ms), "values": {str(fault): r(gemm_ms * SLOWDOWN)}}},
                {"category": "cuda_runtime", "function": "cudaLaunchKernel", "workers": list(range(workers)),
                 "all_workers": True, "impact": 0.021,
                 "summary": ("Every worker spends 4.0% of the window launching kernels (cudaLaunchKernel) "
                             "with the GPU idle: the model launches many small kernels; CUDA graphs "
                             "or kernel fusion would hide this."),
                 "evidence": {"section": "CUDA Runtime", "key": "cudaLaunchKernel",
                              "metric": "avg bottleneck ratio", "median": 0.0397, "values": {}}},
                {"category": "python", "function": XSS_STACK, "workers": list(range(workers)),
                 "all_workers": True, "impact": 0.004,
                 "summary": "Every worker spends 1.1% of the window in the Python frame `" + XSS + "`.",
                 "evidence": {"section": "Python functions", "key": XSS_STACK, "metric": "share",
                              "median": 0.011, "values": {}}},
                # A finding whose fix saves nothing (another worker's work sets the pace): the
                # page folds it under "not worth fixing" and marks no worker with it. Its value
                # is the heatmap's (median over every worker + its cell x the step).
                {"category": "gpu_compute", "function": INDEXING, "workers": [idle_rank], "all_workers": False,
                 "impact": 0,
                 "summary": ("Rank %d runs GPU kernels the other workers run less: `indexing_backward_kernel<...>`, "
                             "12 calls per step; fixing it saves 0 ms per step (0%% of the step) (the other "
                             "workers' own work then sets the pace)." % idle_rank),
                 "evidence": {"section": "GPU Compute", "key": INDEXING, "metric": "bottleneck ms per step",
                              "median": 0, "values": {str(idle_rank): r(indexing_ms + values[idle_rank][2] * step_ms, 6)}}},
            ],
        },
        "GPU Compute": {
            "min/median/max GPU utilization (in [0,1])": [util[0], median_util, util[-1]],
            "workers with abnormal GPU utilization": {fault_name: worker_list[fault]["gpu_utilization"]},
            "major_kernel_executions": {
                k: {"median cost per execution (ms)": ms, "bottleneck ratio (in [0,1])": r(ms * n / step_ms)}
                for k, (ms, n) in KERNELS.items()},
            "workers with potential GPU issues": [fault_name],
            "detailed report": {fault_name: {GEMM: {"median cost per execution (ms)": r(KERNELS[GEMM][0] * SLOWDOWN),
                                                    "median of other workers (ms)": KERNELS[GEMM][0],
                                                    "slowdown": SLOWDOWN}}},
        },
        "GPU memory operations": {
            "Memcpy DtoD (Device -> Device)": {
                "avg bottleneck ratio (in [0,1])": 0.0104,
                "abnormal_workers": {n: r(0.0104 + abs(rng.gauss(0, 0.0002))) for n in names[:3]}},
            "Memcpy HtoD (Host -> Device)": {"avg bottleneck ratio (in [0,1])": 0.004, "abnormal_workers": {}},
        },
        "Communication": {
            "nvlink ring": {NCCL: {
                "example_of_normal_worker": {"worker": names[0], "different from other workers": 1,
                                             "features": {"bottleneck ratio (in [0,1])": r(comm[0] / step_ms),
                                                          "avg throughput (%)": 73.76, "throughput std (%)": 11.38}},
                "abnormal_workers": [{"worker": fault_name,
                                      "features": {"bottleneck ratio (in [0,1])": r(comm[fault] / step_ms),
                                                   "avg throughput (%)": 74.1, "throughput std (%)": 2.1}}]}},
            "pcie sendrecv": {SENDRECV: {
                "example_of_normal_worker": {"worker": names[-1], "different from other workers": 0,
                                             "features": {"bottleneck ratio (in [0,1])": 0.0725,
                                                          "avg throughput (%)": 46.67, "throughput std (%)": 14.64}},
                "abnormal_workers": []}},
        },
        "CUDA Runtime": {
            "cudaLaunchKernel": {"avg bottleneck ratio (in [0,1])": 0.0397,
                                 "avg execution time / monitoring duration (in [0,1])": 0.0696,
                                 "abnormal_workers": {n: r(0.0397 + rng.gauss(0, 0.002)) for n in names}},
            "cudaMemcpyAsync": {"avg bottleneck ratio (in [0,1])": 0.006,
                                "avg execution time / monitoring duration (in [0,1])": 0.011,
                                "abnormal_workers": {}},
        },
        "Python functions": python_section,
        "Hardware": hardware(names, fault, rng),
        "Heatmap": {"functions": [{"category": c, "name": n} for c, n in functions],
                    "ranks": list(range(workers)), "values": values, "shares": shares},
        "warnings": [XSS + ".json: rank taken from the file name (no distributedInfo.rank)"],
    }
    facts = {"fault_rank": fault, "fault_worker": fault_name, "fault_node": hosts[fault], "fault_function": GEMM,
             "xss": XSS, "xss_kernel": XSS_KERNEL, "xss_stack": XSS_STACK, "workers": workers,
             "raw_traces": [w["raw_trace"] for w in worker_list if "raw_trace" in w]}
    return report, facts


BREAKDOWN_KEYS = ("compute_ms", "memory_ms", "communication_ms", "runtime_ms", "python_ms", "idle_ms")
QUANTILES = (0, 1, 5, 25, 50, 75, 95, 99, 100)
LISTED_MAX, FULL_DETAIL_MAX, PER_PART = 64, 1024, 1024


def distribution(values):
    """scale.distributions' entry: count, quantiles (nearest rank), a 32-bin histogram."""
    v = sorted(x for x in values if isinstance(x, (int, float)))
    if not v:
        return {"count": 0, "quantiles": None, "histogram": None}
    q = {"p%d" % p: v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))] for p in QUANTILES}
    lo, hi, counts = v[0], v[-1], [0] * 32
    for x in v:
        counts[min(31, int((x - lo) / (hi - lo) * 32)) if hi > lo else 0] += 1
    return {"count": len(v), "quantiles": q, "histogram": {"lo": lo, "hi": hi, "counts": counts}}


def bounded(report, parts_dir):
    """The report in the bounded form of docs/report-schema.md (what perftracker writes
    above 4096 workers), and its parts (OUT/parts/workers-NNNN.json). Returns the parts'
    file names. As perftracker writes it: a node's parts as [first, last], Heatmap.nodes
    as columns {hosts, values, shares}."""
    workers = report["workers"]
    by_name = {w["name"]: w for w in workers}
    truncated, listed = [], []

    def cut(section, key, field, mapping, order):
        items = sorted(mapping.items(), key=order)
        if len(items) > LISTED_MAX:
            truncated.append({"section": section, "key": key, "field": field, "listed": LISTED_MAX, "count": len(items)})
            items = items[:LISTED_MAX]
        listed.extend(n for n, _ in items)
        return dict(items)

    for key, entry in report["CUDA Runtime"].items():
        entry["abnormal_workers"] = cut("CUDA Runtime", key, "abnormal_workers", entry["abnormal_workers"], lambda e: -e[1])
    for key, entry in report["GPU memory operations"].items():
        entry["abnormal_workers"] = cut("GPU memory operations", key, "abnormal_workers", entry["abnormal_workers"], lambda e: -e[1])
    for key in list(report["Python functions"]):
        report["Python functions"][key] = cut("Python functions", key, None, report["Python functions"][key], lambda e: -e[1])

    # Full detail: named, outliers, listed, rank 0 and the median worker; at most 1024.
    detail = {}
    for w in workers:
        if w["status"] != "normal":
            detail.setdefault(w["rank"], "named")
    by_step = sorted(workers, key=lambda w: (w["step_time_ms"], w["rank"]))
    for w in by_step[:16] + by_step[-16:] + sorted(workers, key=lambda w: (w["gpu_utilization"], w["rank"]))[:16]:
        detail.setdefault(w["rank"], "outlier")
    for n in listed:
        detail.setdefault(by_name[n]["rank"], "listed")
    detail.setdefault(0, "example")
    detail.setdefault(by_step[len(by_step) // 2]["rank"], "example")
    keep = sorted(detail, key=lambda r: (detail[r] != "named", r))[:FULL_DETAIL_MAX]
    full = sorted(keep)
    kept_names = {workers[r]["name"] for r in full}

    hm = report["Heatmap"]
    nodes, node_of_host, node_rows = [], {}, []
    for w in workers:
        if w["host"] not in node_of_host:
            node_of_host[w["host"]] = len(nodes)
            nodes.append({"host": w["host"], "members": []})
        nodes[node_of_host[w["host"]]]["members"].append(w["rank"])
    scale_nodes = []
    for i, node in enumerate(nodes):
        m = node["members"]
        steps = sorted(workers[r]["step_time_ms"] for r in m)
        utils = sorted(workers[r]["gpu_utilization"] for r in m)
        scale_nodes.append({"host": node["host"], "workers": len(m), "ranks": [m[0], m[-1]],
                            "step_time_ms": [steps[0], steps[len(steps) // 2], steps[-1]],
                            "gpu_utilization": [utils[0], utils[len(utils) // 2], utils[-1]],
                            "slowest_rank": max(m, key=lambda r: (workers[r]["step_time_ms"], -r)),
                            "not_normal": sum(workers[r]["status"] != "normal" for r in m),
                            "parts": [m[0] // PER_PART, m[-1] // PER_PART]})
        values = [max((hm["values"][r][j] for r in m), key=abs) for j in range(len(hm["functions"]))]
        shares = [round(sum(hm["shares"][r][j] for r in m) / len(m), 4) for j in range(len(hm["functions"]))]
        node_rows.append({"values": values, "shares": shares})

    hw = report["Hardware"]
    files = []
    os.makedirs(parts_dir, exist_ok=True)
    for part, lo in enumerate(range(0, len(workers), PER_PART)):
        chunk = workers[lo:lo + PER_PART]
        name = "workers-%04d.json" % part
        with open(os.path.join(parts_dir, name), "w") as f:
            json.dump({"part": part, "ranks": [chunk[0]["rank"], chunk[-1]["rank"]], "workers": chunk,
                       "heatmap": {"ranks": [w["rank"] for w in chunk], "values": [hm["values"][w["rank"]] for w in chunk],
                                   "shares": [hm["shares"][w["rank"]] for w in chunk]},
                       "hardware": {w["name"]: hw["workers"][w["name"]] for w in chunk}}, f)
        files.append({"file": name, "ranks": [chunk[0]["rank"], chunk[-1]["rank"]], "workers": len(chunk)})

    dists = {"step_time_ms": distribution(w["step_time_ms"] for w in workers),
             "gpu_utilization": distribution(w["gpu_utilization"] for w in workers)}
    for k in BREAKDOWN_KEYS:
        dists[k] = distribution(w["breakdown"][k] for w in workers)
    for m, entry in hw["metrics"].items():
        entry["quantiles"] = distribution(hw["workers"][n][m]["avg"] for n in hw["workers"])["quantiles"]
    hw["workers"] = {n: v for n, v in hw["workers"].items() if n in kept_names}
    report["Heatmap"] = {"functions": hm["functions"], "ranks": full, "values": [hm["values"][r] for r in full],
                         "shares": [hm["shares"][r] for r in full],
                         "nodes": {"hosts": [n["host"] for n in nodes], "values": [n["values"] for n in node_rows],
                                   "shares": [n["shares"] for n in node_rows]}}
    report["workers"] = [dict(workers[r], detail=detail[r]) for r in full]
    report["scale"] = {
        "form": "bounded", "full_form_max_workers": 4096, "full_detail_max": FULL_DETAIL_MAX, "listed_max": LISTED_MAX,
        "workers_in_full": len(full), "truncated": truncated, "distributions": dists, "nodes": scale_nodes,
        "worker_table": {"rank": [w["rank"] for w in workers], "name": [w["name"] for w in workers],
                         "node": [node_of_host[w["host"]] for w in workers], "local_rank": [w["local_rank"] for w in workers],
                         "step_time_ms": [w["step_time_ms"] for w in workers], "gpu_utilization": [w["gpu_utilization"] for w in workers],
                         "status": [w["status"] for w in workers]},
        "parts": {"folder": "parts", "workers_per_part": PER_PART, "files": files}}
    return [f["file"] for f in files]


def hardware(names, fault, rng):
    metrics = {"sm_activity": ("%", 62.0), "dram_bandwidth": ("GB/s", 910.0),
               "nvlink_tx": ("GB/s", 84.0), "pcie_rx": ("GB/s", 3.1)}
    per_worker, series = {}, {}
    for i, n in enumerate(names):
        per_worker[n] = {}
        for m, (_, mean) in metrics.items():
            avg = mean * (1.25 if i == fault and m == "sm_activity" else 1) * (1 + rng.gauss(0, 0.01))
            per_worker[n][m] = {"avg": r(avg), "min": r(avg * 0.4), "max": r(min(avg * 1.5, 100) if m == "sm_activity" else avg * 1.5)}
        if i < 64:  # the schema keeps series for at most 64 workers
            series[n] = {}
            for m, (unit, _) in metrics.items():
                avg, top = per_worker[n][m]["avg"], 100.0 if unit == "%" else float("inf")
                series[n][m] = [[r(t * 0.5, 6), r(min(top, max(0.0, avg * (1 + 0.25 * math.sin(t / 6.0) + 0.05 * rng.gauss(0, 1)))))]
                                for t in range(240)]
    summary = {}
    for m, (unit, _) in metrics.items():
        avgs = sorted(per_worker[n][m]["avg"] for n in names)
        summary[m] = {"unit": unit, "min/median/max": [avgs[0], avgs[len(avgs) // 2], avgs[-1]]}
    return {"metrics": summary, "workers": per_worker, "series": series}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--fault-rank", type=int, default=5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--raw-trace", choices=("none", "master", "all"), default="master")
    p.add_argument("--bounded", action="store_true",
                   help="write the bounded form (docs/report-schema.md) and its parts beside OUT.json")
    a = p.parse_args()
    if not 0 <= a.fault_rank < a.workers:
        p.error("--fault-rank must be a rank of the job")
    report, facts = build(a.workers, a.fault_rank, a.seed, a.raw_trace)
    if a.bounded:
        facts["parts"] = bounded(report, os.path.join(os.path.dirname(os.path.abspath(a.out)), "parts"))
        facts["bounded"] = True
    with open(a.out, "w") as f:
        json.dump(report, f, indent=None if a.bounded else 2)
        f.write("\n")
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
