#!/usr/bin/python3
"""A small gloo training job with one collective fault, for the hang tests
(test_hangs_torch.py). Run with Debian's /usr/bin/python3 (torch 1.13) and the collector
on PYTHONPATH; --launch N starts N ranks with the variables torchrun would set.

Each step: a small matmul, all_reduce of a 1000-element "gradient", broadcast of a
10-element "metadata" tensor from rank 0, a short sleep, step(). At --fault-at (or, with
--fault-when-armed, at the first step every rank's collector is armed by a trigger) one
fault happens:

  stuck       the last rank blocks in Python (load_batch) before the all_reduce the
              others wait in
  other-op    rank 2 calls broadcast where the others call all_reduce
  size        rank 2's all_reduce has 10 elements, the others' 1000 (gloo aborts one
              process and the others raise: an error, not a hang)
  skip        the last rank leaves the all_reduce out and goes on to the broadcast
  order       ranks 0 and 1 reduce over the world group, then over a second group of the
              same ranks; ranks 2 and 3 the other way round (a deadlock)
  none        no fault (a healthy job)

Rank 0 prints "fault at step N" just before it. The job never ends by itself when it
hangs; the test kills it."""
import argparse
import os
import subprocess
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--launch", type=int, default=0, metavar="N")
    p.add_argument("--fault", default="none", choices=["none", "stuck", "other-op", "size", "skip", "order"])
    p.add_argument("--fault-at", type=int, default=80)
    p.add_argument("--fault-when-armed", action="store_true")
    p.add_argument("--iters", type=int, default=100000)
    p.add_argument("--step-sleep", type=float, default=0.03)
    return p.parse_args()


def launch(args):
    env = dict(os.environ)
    env.setdefault("MASTER_ADDR", "127.0.0.1")
    env.setdefault("OMP_NUM_THREADS", "1")
    argv = [sys.executable, os.path.abspath(__file__), "--fault", args.fault, "--fault-at", str(args.fault_at),
            "--iters", str(args.iters), "--step-sleep", str(args.step_sleep)]
    if args.fault_when_armed:
        argv.append("--fault-when-armed")
    procs = []
    for rank in range(args.launch):
        procs.append(subprocess.Popen(argv, env=dict(env, RANK=str(rank), LOCAL_RANK=str(rank),
                                                     WORLD_SIZE=str(args.launch), LOCAL_WORLD_SIZE=str(args.launch),
                                                     GROUP_RANK="0")))
    return max(abs(p.wait()) for p in procs)


def load_batch():
    """Where the stuck rank is: Python, not a collective."""
    while True:
        time.sleep(0.05)


def train(args):
    import torch
    import torch.distributed as dist
    from perftracker import PerfTracker, collector_stats

    tracer = PerfTracker()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    second = dist.new_group(list(range(world)))
    last = world - 1
    faulted = False
    for step in range(args.iters):
        a = torch.randn(64, 64)
        grad = (a @ a).flatten()[:1000].clone()
        meta = torch.zeros(10)
        fault = False
        if not faulted:
            if args.fault_when_armed:
                armed = torch.tensor([1.0 if collector_stats()["busy"] else 0.0])
                dist.all_reduce(armed, op=dist.ReduceOp.MIN)
                fault = armed.item() > 0
            else:
                fault = step == args.fault_at
        if fault and args.fault != "none":
            faulted = True
            if rank == 0:
                print("fault at step %d" % step, flush=True)
            if args.fault == "stuck" and rank == last:
                load_batch()
            if args.fault == "other-op" and rank == 2:
                dist.broadcast(grad, 0)
            elif args.fault == "size" and rank == 2:
                dist.all_reduce(torch.randn(10))
            elif args.fault == "skip" and rank == last:
                pass
            elif args.fault == "order":
                first, then = (None, second) if rank < 2 else (second, None)
                dist.all_reduce(grad, group=first)
                dist.all_reduce(grad, group=then)
            else:
                dist.all_reduce(grad)
        else:
            dist.all_reduce(grad)
        dist.broadcast(meta, 0)
        time.sleep(args.step_sleep)
        tracer.step()
    dist.destroy_process_group()
    return 0


def main():
    args = parse_args()
    return launch(args) if args.launch else train(args)


if __name__ == "__main__":
    sys.exit(main())
