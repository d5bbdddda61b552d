"""Communication throughput, checked against a computation written here from the NCCL
tests' definition of bus bandwidth (issue 18: the report's figures were never checked,
only its keys).

A hand-built 4-rank Kineto job on H100s (NVLink, 450 GB/s): each step runs one
all-gather (1 M float32 in, 4 M out: its bus bandwidth counts the OUTPUT size times
(n-1)/n) and one all-reduce (2 M bfloat16: 2(n-1)/n times its size), twice as large in
every other step, with durations that differ call by call. For every rank:

- `summarize --json`: busbw_avg_gbps, throughput_avg_pct and throughput_std_pct (the
  population standard deviation over calls), bytes_avg and bytes_max (the size the bus
  bandwidth counts: the output for an all-gather) of both collectives equal the
  computation;
- `analyze`'s Communication section: each collective's example normal worker carries
  that worker's own average and standard deviation, each in its place.
"""
import json
import math
import os
import statistics
import sys

from engine_common import analyze, check, check_schema, FAILURES, run, TempDir

WORLD, STEPS = 4, 4
PEAK_GBPS = 450.0  # H100 NVLink
ALLGATHER = "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1_execute_segment_k_off_kernel"
# (collective, name, in elements, out elements, dtype, bytes per element)
CALLS = [("allgather", ALLGATHER, 1 << 20, 4 << 20, "Float", 4), ("allreduce", ALLREDUCE, 2 << 20, 2 << 20, "BFloat16", 2)]
def scale(step):
    """Elements per call, times this: calls of different sizes."""
    return 1 + step % 2


def duration_us(rank, step, call):
    """Different for every call, so that the standard deviation is not zero."""
    return 200.0 + 37.0 * step + 11.0 * rank + 90.0 * call


def trace(rank):
    pid, events, seq, t = 1000 + rank, [], 0, 1_000_000.0
    for step in range(STEPS):
        start = t
        events.append({"ph": "X", "cat": "kernel", "name": GEMM, "pid": 0, "tid": 7, "ts": t + 10, "dur": 2000.0,
                       "args": {"device": 0, "stream": 7, "grid": [132, 1, 1], "block": [384, 1, 1]}})
        t += 2100
        for call, (coll, name, n_in, n_out, dtype, _) in enumerate(CALLS):
            seq += 1
            dur = duration_us(rank, step, call)
            events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 28, "ts": t, "dur": dur,
                           "args": {"device": 0, "stream": 28, "grid": [24, 1, 1], "block": [640, 1, 1],
                                    "Collective name": coll, "In msg nelems": n_in * scale(step),
                                    "Out msg nelems": n_out * scale(step),
                                    "Group size": WORLD, "dtype": dtype, "Process Group Name": "0",
                                    "Global rank start": 0, "Global rank stride": 1, "Seq": seq}})
            t += dur + 50
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step + 1}", "pid": pid, "tid": pid,
                       "ts": start, "dur": t - start})
        t += 10
    return {"schemaVersion": 1, "traceEvents": events,
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": WORLD},
            "deviceProperties": [{"id": i, "name": "NVIDIA H100 80GB HBM3"} for i in range(8)],
            "metadata": {"system": {"pid": pid, "uname": {"node": "node0"}}}}


def expected(rank):
    """name -> (busbw average GB/s, throughput average %, throughput population sd %, bytes per call average,
    largest)."""
    out = {}
    for call, (coll, name, n_in, n_out, _, size) in enumerate(CALLS):
        ring = (WORLD - 1) / WORLD
        factor, elements = (ring, n_out) if coll == "allgather" else (2 * ring, n_in)
        sizes = [elements * scale(s) * size for s in range(STEPS)]
        busbw = [sizes[s] * factor / (duration_us(rank, s, call) * 1000) for s in range(STEPS)]  # B/ns
        pct = [100 * b / PEAK_GBPS for b in busbw]
        out[name] = (statistics.fmean(busbw), statistics.fmean(pct), statistics.pstdev(pct), statistics.fmean(sizes),
                     max(sizes))
    return out


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


def main():
    with TempDir() as tmp:
        job = os.path.join(tmp, "job")
        os.makedirs(job)
        for rank in range(WORLD):
            with open(os.path.join(job, f"node0_{rank}_{1000 + rank}.json"), "w") as f:
                json.dump(trace(rank), f)
        per_rank = {}
        for rank in range(WORLD):
            _, out, _ = run("summarize", "--json", os.path.join(job, f"node0_{rank}_{1000 + rank}.json"))
            functions = {f["name"]: f for f in json.loads(out)["functions"] if f["class"] == "communication"}
            want = expected(rank)
            per_rank[f"node0_{rank}_{1000 + rank}.json"] = functions
            for name, (busbw, avg, sd, bytes_avg, bytes_max) in want.items():
                got = functions.get(name)
                check(got is not None, f"rank {rank}: {name[:30]} summarized")
                if got:
                    check(close(got["busbw_avg_gbps"], busbw), f"rank {rank} {name[:24]}: busbw {got['busbw_avg_gbps']} "
                          f"= {busbw:.6f} GB/s")
                    check(close(got["throughput_avg_pct"], avg), f"rank {rank} {name[:24]}: avg throughput "
                          f"{got['throughput_avg_pct']} = {avg:.6f}%")
                    check(close(got["throughput_std_pct"], sd), f"rank {rank} {name[:24]}: throughput sd "
                          f"{got['throughput_std_pct']} = {sd:.6f}%")
                    check(close(got["bytes_avg"], bytes_avg) and close(got["bytes_max"], bytes_max),
                          f"rank {rank} {name[:24]}: bytes per call {got['bytes_avg']} = {bytes_avg}, "
                          f"largest {got['bytes_max']} = {bytes_max}")

        _, report, _ = analyze([job], os.path.join(tmp, "out"))
        check_schema(report, "comm_throughput")
        entries = {name: entry for group in report["Communication"].values() for name, entry in group.items()}
        for name in (ALLGATHER, ALLREDUCE):
            check(name in entries, f"report: {name[:30]} in the Communication section")
            if name not in entries:
                continue
            normal = entries[name]["example_of_normal_worker"]
            mine = per_rank.get(normal["worker"], {}).get(name)
            check(mine is not None, f"report: the example worker {normal['worker']} is one of the job's")
            if mine:
                features = normal["features"]
                check(close(features["avg throughput (%)"], mine["throughput_avg_pct"]),
                      f"report {name[:24]}: avg throughput {features['avg throughput (%)']} is the worker's average")
                check(close(features["throughput std (%)"], mine["throughput_std_pct"]),
                      f"report {name[:24]}: throughput std {features['throughput std (%)']} is the worker's sd")
    if FAILURES:
        sys.exit(f"FAIL: {len(FAILURES)} check(s) failed")
    print("PASS")


if __name__ == "__main__":
    main()
