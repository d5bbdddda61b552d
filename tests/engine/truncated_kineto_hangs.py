"""Kineto traces cut short by a hang, written the way torch 2.x writes them: each
collective's record_param_comms CPU op carries "Collective name", "In msg nelems",
"dtype", "Process Group Name", "Process Group Ranks" ("[0, 1, 2, 3]") and "Seq"; its NCCL
kernel the same args without "Seq". What a rank's trace holds says how far its
collectives got, so the analysis must say, from the files alone:

  missing    rank 2's trace ends before all_reduce #7 (its last is #6); the others issued
             #7 and its kernel runs until their traces stop
  mismatch   rank 1's #7 is a broadcast
  size       rank 3's #7 has half the elements
  truncated  as missing, and rank 2's file is also cut in the middle of an event (the
             process died writing it): rank 2 is an error, the others still say who
             they wait for
  healthy    every rank's #7 completed: no hang finding

Each case: 4 ranks, 8 steps of 10 ms; in the hang cases the traces go on 60 ms past the
last step (the others blocked), so the analysis sees them stopped."""
import json
import os
import sys

from engine_common import TempDir, analyze

STEP_US = 10000
RANKS = 4


def comms_args(seq, op="allreduce", nelems=4096, dtype="Float", with_seq=True):
    args = {"Collective name": op, "In msg nelems": nelems, "Out msg nelems": nelems, "Group size": RANKS,
            "dtype": dtype, "Process Group Name": "0", "Process Group Description": "default_pg",
            "Process Group Ranks": "[0, 1, 2, 3]", "Rank": 0}
    if with_seq:
        args["Seq"] = seq
    return args


def trace(rank, last_seq, stuck_call=None, stop_us=None):
    """Steps 1..last_seq, each with one all-reduce numbered as the step; then, when
    stuck_call is given, call #last_seq+1 issued and its kernel running to stop_us."""
    events = []
    for step in range(1, last_seq + 1):
        t = step * STEP_US
        events.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d" % step, "pid": 100 + rank,
                       "tid": 100 + rank, "ts": t, "dur": STEP_US - 10})
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 100 + rank, "tid": 100 + rank,
                       "ts": t + 100, "dur": 4000})
        events.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 100 + rank,
                       "tid": 100 + rank, "ts": t + 5000, "dur": 20, "args": comms_args(step)})
        events.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)",
                       "pid": 0, "tid": 7, "ts": t + 5100, "dur": 3000,
                       "args": dict(comms_args(step, with_seq=False), device=0, stream=7, grid=[4, 1, 1],
                                    block=[256, 1, 1])})
    if stuck_call:
        t = (last_seq + 1) * STEP_US
        op, nelems = stuck_call
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 100 + rank, "tid": 100 + rank,
                       "ts": t + 100, "dur": 4000})
        events.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 100 + rank,
                       "tid": 100 + rank, "ts": t + 5000, "dur": 20,
                       "args": comms_args(last_seq + 1, op=op, nelems=nelems)})
        events.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)",
                       "pid": 0, "tid": 7, "ts": t + 5100, "dur": stop_us - (t + 5100),
                       "args": dict(comms_args(last_seq + 1, op=op, nelems=nelems, with_seq=False), device=0,
                                    stream=7, grid=[4, 1, 1], block=[256, 1, 1])})
    return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": RANKS},
            "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], "baseTimeNanoseconds": 1764403200000000000,
            "traceEvents": events}


def write_job(tmp, name, traces, cut_rank=None):
    job = os.path.join(tmp, name)
    os.makedirs(job)
    for rank, t in enumerate(traces):
        text = json.dumps(t)
        if rank == cut_rank:
            text = text[: len(text) * 2 // 3]  # the process died while writing it
        with open(os.path.join(job, "node0_%d_%d.json" % (rank, 100 + rank)), "w") as f:
            f.write(text)
    return job


def case(tmp, name, odd_rank=None, odd_call=None, cut=False):
    stop = 9 * STEP_US + 60000
    traces = []
    for rank in range(RANKS):
        if name == "healthy":
            traces.append(trace(rank, 8))
        elif name in ("missing", "truncated") and rank == odd_rank:
            traces.append(trace(rank, 6))
        else:
            call = odd_call if rank == odd_rank and odd_call else ("allreduce", 4096)
            traces.append(trace(rank, 6, call, stop))
    job = write_job(tmp, name, traces, cut_rank=odd_rank if cut else None)
    rc, report, _ = analyze([job], os.path.join(job, "out"))
    return rc, report


def hang_of(report, where):
    found = [f for f in report["diagnosis"]["findings"] if f["category"] == "hang"]
    if len(found) != 1:
        sys.exit("FAIL: %s: %d hang findings: %s" % (where, len(found), json.dumps(report["diagnosis"])[:1500]))
    return found[0], found[0]["evidence"]["hang"]


def main():
    with TempDir() as tmp:
        rc, report = case(tmp, "missing", odd_rank=2)
        f, h = hang_of(report, "missing")
        assert rc == 3 and h["kind"] == "missing" and h["group"] == "0" and h["seq"] == 7, h
        assert f["workers"] == [2], f
        assert h["call"]["op"] == "allreduce" and h["call"]["count"] == 4096 and h["call"]["dtype"] == "Float", h
        rows = {r["rank"]: r for r in h["ranks"]}
        assert rows[2]["role"] == "missing" and rows[2]["call"]["seq"] == 6, rows[2]
        assert all(rows[r]["role"] == "waits" and rows[r]["call"]["state"] == "entered" for r in (0, 1, 3)), rows
        assert f["summary"].startswith("Rank 2 has not joined allreduce #7 (4096 x Float) of process group 0 "
                                       "(ranks 0-3), which ranks 0, 1 and 3 wait in; rank 2 stopped before it: its "
                                       "trace ends (its last call in this group: allreduce #6, completed)"), f["summary"]
        print("missing: " + f["summary"])

        rc, report = case(tmp, "mismatch", odd_rank=1, odd_call=("broadcast", 4096))
        f, h = hang_of(report, "mismatch")
        assert h["kind"] == "mismatch" and h["mismatch"] == "operation" and h["seq"] == 7 and f["workers"] == [1], f
        print("mismatch: " + f["summary"])

        rc, report = case(tmp, "size", odd_rank=3, odd_call=("allreduce", 2048))
        f, h = hang_of(report, "size")
        assert h["kind"] == "mismatch" and h["mismatch"] == "size" and f["workers"] == [3], f
        assert "rank 3 called allreduce (2048 x Float) where ranks 0-2 called allreduce (4096 x Float)" in f["summary"]
        print("size: " + f["summary"])

        rc, report = case(tmp, "truncated", odd_rank=2, cut=True)
        f, h = hang_of(report, "truncated")
        assert h["kind"] == "missing" and h["seq"] == 7, h
        assert {r["rank"]: r for r in h["ranks"]}[2]["answered"] is False, h
        statuses = {w["name"] or w["rank"]: w["status"] for w in report["workers"]}
        assert statuses.get("node0_2_102.json") == "error" and statuses.get(2) == "missing", statuses
        assert "rank 2 has no summary" in f["summary"], f["summary"]
        print("truncated: " + f["summary"])

        rc, report = case(tmp, "healthy")
        assert not [f for f in report["diagnosis"]["findings"] if f["category"] == "hang"], report["diagnosis"]
        assert report["diagnosis"]["verdict"] != "hang", report["diagnosis"]
        print("healthy: no hang finding (verdict %s)" % report["diagnosis"]["verdict"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
