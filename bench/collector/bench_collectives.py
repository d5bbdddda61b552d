#!/usr/bin/python3
"""bench_collectives -- what the always-on collective bookkeeping costs per call.

Measured against baselines in the same run, rounds alternating, medians of the thread's
CPU time (wall time on a shared machine is mostly other people's load):

1. the bookkeeping alone: the wrapper around a do-nothing function with all_reduce's
   signature, against that function called directly -- the cost every collective pays;
2. the C part of it: one _coll_enter plus one _coll_leave, from Python;
3. a real collective: torch.distributed.all_reduce of one float32 on a 1-rank gloo group,
   wrapped against unwrapped -- the bookkeeping as a share of the cheapest real call.

usage: PYTHONPATH=<build>/python /usr/bin/python3 bench_collectives.py
"""
import os
import statistics
import sys
import time

os.environ.setdefault("PERFTRACKER_AGENT", "0")
os.environ.setdefault("PERFTRACKER_QUIET", "1")

from perftracker import _perftracker, collectives  # noqa: E402

ROUNDS = 9
CALLS = 20000


def cpu_per_call(fn, calls=CALLS):
    start = time.thread_time_ns()
    for _ in range(calls):
        fn()
    return (time.thread_time_ns() - start) / calls


def paired(a, b, calls=CALLS):
    """Median ns per call of a and of b, measured in alternating rounds."""
    ta, tb = [], []
    for _ in range(ROUNDS):
        ta.append(cpu_per_call(a, calls))
        tb.append(cpu_per_call(b, calls))
    return statistics.median(ta), statistics.median(tb)


def main():
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        print("bench_collectives: needs torch (Debian's /usr/bin/python3 has it)")
        return 77
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": os.environ.get("PT_BENCH_PORT", "29599"),
                       "RANK": "0", "WORLD_SIZE": "1"})
    dist.init_process_group("gloo")
    assert collectives.install(), "the bookkeeping did not install"
    tensor = torch.ones(1)

    def fake_all_reduce(tensor, op=None, group=None, async_op=False):
        return None

    wrapped_fake = collectives._wrap(fake_all_reduce, "all_reduce", "tensor")
    plain, wrapped = paired(lambda: fake_all_reduce(tensor), lambda: wrapped_fake(tensor))
    group = collectives._group_index(None)
    enter, leave, done = _perftracker._coll_enter, _perftracker._coll_leave, _perftracker.COLL_COMPLETED
    c_part, _ = paired(lambda: leave(enter(group, 0, 1, 0), done), lambda: None)
    original = dist.all_reduce.__perftracker_wraps__
    real_plain, real_wrapped = paired(lambda: original(tensor), lambda: dist.all_reduce(tensor), calls=5000)
    dist.destroy_process_group()
    print("collective bookkeeping, per call (median thread CPU time of %d alternating rounds):" % ROUNDS)
    print("  wrapper around a do-nothing all_reduce: %.2f us (the function alone: %.2f us) -> +%.2f us per call"
          % (wrapped / 1e3, plain / 1e3, (wrapped - plain) / 1e3))
    print("  of which the C bookkeeping (_coll_enter + _coll_leave): %.2f us" % (c_part / 1e3))
    print("  gloo all_reduce of 1 float, 1 rank: %.2f us plain, %.2f us with the bookkeeping (+%.1f%%)"
          % (real_plain / 1e3, real_wrapped / 1e3, 100.0 * (real_wrapped - real_plain) / real_plain))
    return 0


if __name__ == "__main__":
    sys.exit(main())
