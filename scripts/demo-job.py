#!/usr/bin/python3
"""The seed's example training job (training.py), adapted to a machine without GPUs.

Same shape as the vendor's example: every rank multiplies two 1000x1000 matrices, copies
the result to the CPU, sleeps `rank` (scaled) seconds, marks the step for PerfTracker and
waits at a barrier -- so the highest rank is the slow one, and PerfTracker's report has
to say so. Changed for CPU: gloo instead of NCCL, the matmul on the CPU, the sleep scaled
by --sleep-scale (the seed's is 1.0: rank seconds), fewer prints.

torchrun is not needed (Debian's crashes): --launch N starts N ranks itself, with the
variables torchrun would set (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE). Run with Debian's /usr/bin/python3 (it has torch) and the collector on
PYTHONPATH (build/python):

    PYTHONPATH=build/python /usr/bin/python3 scripts/demo-job.py --launch 4 --iters 1000

Stop it with Ctrl-C, or kill the launcher's pid: its ranks end with it.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launch_ranks import launch_ranks  # noqa: E402 (beside this file)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--launch", type=int, default=0, metavar="N", help="start N ranks on this machine")
    p.add_argument("--iters", type=int, default=1000, help="training iterations (the seed's: 1000)")
    p.add_argument("--sleep-scale", type=float, default=0.1,
                   help="each rank sleeps rank * this many seconds per step (the seed's: 1.0)")
    p.add_argument("--size", type=int, default=1000, help="matrix size (the seed's: 1000)")
    p.add_argument("--print-every", type=int, default=50, help="print the epoch every N steps (0: never)")
    p.add_argument("--hang-at", type=int, default=-1, metavar="STEP",
                   help="the highest rank sleeps forever in this step (to see a hang reported)")
    p.add_argument("--slow-after", type=int, default=-1, metavar="STEP",
                   help="from this step on the highest rank makes every step --slow-by slower (to see the "
                        "automatic trigger fire)")
    p.add_argument("--slow-by", type=float, default=0.25, metavar="FRACTION",
                   help="how much slower --slow-after makes each step (default 0.25: 25%%)")
    return p.parse_args()


def launch(args):
    """Starts args.launch ranks of this script (scripts/launch_ranks.py: they end with it)."""
    argv = [sys.executable, os.path.abspath(__file__), "--iters", str(args.iters), "--sleep-scale",
            str(args.sleep_scale), "--size", str(args.size), "--print-every", str(args.print_every),
            "--hang-at", str(args.hang_at), "--slow-after", str(args.slow_after), "--slow-by", str(args.slow_by)]
    return launch_ranks(argv, args.launch, "demo-job")


def train(args):
    import torch
    import torch.distributed as dist

    try:
        from c4d_perftracker_collector.PerfTracker import PerfTracker
        my_tracer = PerfTracker()
    except Exception:
        my_tracer = None

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    device = torch.device("cpu")
    if rank == 0:
        print("CUDA is not available: running on the CPU with gloo.", flush=True)

    def matmul():
        matrix_a = torch.randn(args.size, args.size)
        matrix_b = torch.randn(args.size, args.size)
        matrix_a = matrix_a.to(device)
        matrix_b = matrix_b.to(device)
        result = torch.matmul(matrix_a, matrix_b)
        result_cpu = result.to("cpu")
        del matrix_a, matrix_b, result
        return result_cpu

    loop_start, extra = time.perf_counter(), 0.0
    for i in range(args.iters):
        matmul()
        if i == args.hang_at and rank == dist.get_world_size() - 1:
            while True:  # a hung worker: the others will wait for it in dist.barrier()
                time.sleep(3600)
        if i == args.slow_after and rank == dist.get_world_size() - 1:
            extra = args.slow_by * (time.perf_counter() - loop_start) / max(i, 1)  # the job gets slower
        time.sleep(rank * args.sleep_scale + extra)
        if rank == 0 and args.print_every and i % args.print_every == 0:
            print("Epoch:", i, flush=True)
        if my_tracer is not None:
            my_tracer.step()
        dist.barrier()
    dist.destroy_process_group()
    return 0


def main():
    args = parse_args()
    if args.launch:
        return launch(args)
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
