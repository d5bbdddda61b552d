#!/usr/bin/python3
"""The collective bookkeeping inside a real torch process (Debian's torch 1.13, gloo, one
rank): what a hang report's snapshot says about the calls made, and that the wrappers
change nothing the training script sees.

    PYTHONPATH=<build>/python /usr/bin/python3 test_collectives_py.py

- every wrapped call is numbered in its group, with its operation, element count, dtype
  and state (an async call is issued until its Work completes);
- results, return values and exceptions are the unwrapped function's, and a call before
  init_process_group raises what torch raises;
- a call that raises is recorded as failed with its error, and the agent hears of it;
- the snapshot holds every thread's stack, the training thread marked, without the
  bookkeeping's own frame;
- torch's Flight Recorder lines (a dump as torch pickles it) replace the wrappers' view of
  the groups they hold.
Skips (77) without torch or the collector module."""
import os
import socket
import sys
import threading

SKIP = 77


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def calls_of(snapshot, group):
    """[(seq, op, count, dtype, state, error)] of one group in a snapshot text."""
    out, current = [], None
    for line in snapshot.splitlines():
        fields = line.split("\t")
        if fields[0] == "group":
            current = fields[1]
        elif fields[0] == "call" and current == group:
            out.append((int(fields[1]), fields[2], int(fields[3]), fields[4], fields[5],
                        fields[7] if len(fields) > 7 else None))
    return out


def main():
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        print("SKIP: no torch")
        return SKIP
    os.environ.update({"PERFTRACKER_AGENT": "0", "PERFTRACKER_QUIET": "1", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(free_port()), "RANK": "0", "WORLD_SIZE": "1"})
    try:
        from perftracker import PerfTracker, _perftracker, collectives
    except ImportError as exc:
        print("SKIP: the collector module is not built (%s)" % exc)
        return SKIP
    tracer = PerfTracker()  # installs the wrappers (torch.distributed is imported)
    assert hasattr(dist.all_reduce, "__perftracker_wraps__"), "all_reduce is not wrapped"
    assert dist.distributed_c10d.all_reduce is dist.all_reduce

    # Before init_process_group: torch's own error, unrecorded.
    try:
        dist.all_reduce(torch.ones(3))
        raise AssertionError("all_reduce before init_process_group did not raise")
    except RuntimeError as exc:
        assert "init_process_group" in str(exc) or "default process group" in str(exc), exc

    dist.init_process_group("gloo")
    t = torch.arange(6, dtype=torch.float32)
    assert dist.all_reduce(t) is None and t.tolist() == [0, 1, 2, 3, 4, 5], t
    dist.broadcast(torch.zeros(4, dtype=torch.int64), 0)
    dist.barrier()
    work = dist.all_reduce(torch.ones(2, dtype=torch.float64), async_op=True)
    assert work is not None and hasattr(work, "wait")
    out = [torch.zeros(5)]
    dist.all_gather(out, torch.ones(5))
    calls = calls_of(_perftracker._coll_snapshot(), "0")
    assert [c[:4] for c in calls] == [(1, "all_reduce", 6, "float32"), (2, "broadcast", 4, "int64"),
                                      (3, "barrier", 0, "other"), (4, "all_reduce", 2, "float64"),
                                      (5, "all_gather", 5, "float32")], calls
    assert [c[4] for c in calls] == ["completed", "completed", "completed", "issued", "completed"], calls
    work.wait()
    collectives.refresh_pending()
    assert calls_of(_perftracker._coll_snapshot(), "0")[3][4] == "completed", "the async call stays issued"

    # A group of its own: numbered from 1 in it.
    sub = dist.new_group([0])
    dist.all_reduce(torch.ones(1), group=sub)
    groups = [line.split("\t")[1:] for line in _perftracker._coll_snapshot().splitlines() if line.startswith("group")]
    assert ["0", "gloo", "1", "0"] in groups and any(g[0] != "0" and g[3] == "0" for g in groups), groups

    # A call that raises: the same exception, recorded as failed with its text.
    try:
        dist.all_reduce(torch.ones(2), op="not an op")
        raise AssertionError("a bad op did not raise")
    except (TypeError, RuntimeError, ValueError) as exc:
        kind = type(exc)
    try:
        dist.all_reduce.__perftracker_wraps__(torch.ones(2), op="not an op")
    except Exception as exc:
        assert type(exc) is kind, (type(exc), kind)
    failed = calls_of(_perftracker._coll_snapshot(), "0")[-1]
    assert failed[1] == "all_reduce" and failed[4] == "failed" and failed[5] and kind.__name__ in failed[5], failed

    # The snapshot a hang report takes: every thread, the training one marked, no wrapper frame.
    release = threading.Event()

    def in_collective():
        release.wait(30)

    helper = threading.Thread(target=in_collective, name="pt-helper")
    helper.start()
    stack, threads, coll = _perftracker._hang_snapshot()
    release.set()
    helper.join()
    lines = [line.split("\t") for line in threads.splitlines()]
    training = [l for l in lines if l[3] == "1"]
    assert len(training) == 1 and training[0][1] == "MainThread" and "test_collectives_py.py: main" in training[0][4], lines
    assert any(l[1] == "pt-helper" and "in_collective" in l[4] for l in lines), lines
    assert stack == training[0][4], (stack, training)
    assert "collectives.py" not in threads, threads
    assert calls_of(coll, "0"), coll

    # torch's Flight Recorder, where it exists, replaces the wrappers' view of its groups.
    dump = {"version": "2.4", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0]"}},
            "entries": [
                {"process_group": ("0", "default_pg"), "collective_seq_id": 7, "profiling_name": "nccl:all_reduce",
                 "input_sizes": [[1024, 2]], "input_dtypes": ["Float"], "state": "completed", "time_created_ns": 0},
                {"process_group": ("0", "default_pg"), "collective_seq_id": 8, "profiling_name": "nccl:broadcast",
                 "input_sizes": [[16]], "input_dtypes": ["BFloat16"], "state": "started", "time_created_ns": 0},
                {"process_group": ("0", "default_pg"), "collective_seq_id": 0, "p2p_seq_id": 3, "is_p2p": True,
                 "profiling_name": "nccl:send", "input_sizes": [[4]], "input_dtypes": ["Float"], "state": "started"},
            ]}
    text = collectives.flight_recorder_text(dump, 5000)
    assert text.splitlines() == ["group\t0\tnccl\t1\t0", "call\t7\tall_reduce\t2048\tfloat32\tcompleted\t5",
                                 "call\t8\tbroadcast\t16\tbfloat16\tentered\t5"], text
    saved = collectives._flight_recorder
    collectives._flight_recorder = lambda: text
    try:
        _, _, coll = _perftracker._hang_snapshot()
    finally:
        collectives._flight_recorder = saved
    assert calls_of(coll, "0") == [(7, "all_reduce", 2048, "float32", "completed", None),
                                   (8, "broadcast", 16, "bfloat16", "entered", None)], coll
    assert coll.count("group\t0\t") == 1, coll

    dist.destroy_process_group()
    tracer.step()
    print("collective bookkeeping: %d calls numbered, states, failures, threads and the Flight Recorder ok"
          % len(calls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
