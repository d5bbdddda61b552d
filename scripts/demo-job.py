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
import signal
import subprocess
import sys
import time


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


def _die_with_launcher(libc, launcher_pid):
    """In each rank, before it runs (subprocess's preexec_fn): the kernel sends it SIGTERM
    when the launcher dies, however it dies -- kill -9 included, which no handler sees."""
    PR_SET_PDEATHSIG = 1
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != launcher_pid:  # the launcher died before the line above
        os._exit(1)


def launch(args):
    """What torchrun --nproc_per_node=N would do, minus the elastic agent. The ranks go
    with the launcher: SIGINT, SIGTERM and SIGHUP end them (SIGTERM), and each rank
    gets SIGTERM from the kernel if the launcher dies without passing anything on."""
    env = dict(os.environ)
    env.setdefault("MASTER_ADDR", "127.0.0.1")
    env.setdefault("MASTER_PORT", "29500")
    env.setdefault("OMP_NUM_THREADS", "1")  # N ranks share the cores
    argv = [sys.executable, os.path.abspath(__file__), "--iters", str(args.iters), "--sleep-scale",
            str(args.sleep_scale), "--size", str(args.size), "--print-every", str(args.print_every),
            "--hang-at", str(args.hang_at), "--slow-after", str(args.slow_after), "--slow-by", str(args.slow_by)]
    procs = []
    stopping = []

    def stop_ranks(signum, frame):
        stopping.append(signum)
        for p in procs:
            if p.poll() is None:
                p.terminate()  # SIGTERM: a rank blocked in a collective ends too

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop_ranks)
    import ctypes
    libc, me = ctypes.CDLL(None, use_errno=True), os.getpid()
    for rank in range(args.launch):
        env_rank = dict(env, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(args.launch),
                        LOCAL_WORLD_SIZE=str(args.launch), GROUP_RANK="0")
        procs.append(subprocess.Popen(argv, env=env_rank, preexec_fn=lambda: _die_with_launcher(libc, me)))
        if stopping:  # a signal came while the ranks were starting
            stop_ranks(stopping[0], None)
    codes = [p.wait() for p in procs]
    if stopping:
        print("demo-job: stopped by signal %d; all %d ranks ended" % (stopping[0], len(procs)), file=sys.stderr,
              flush=True)
    return max(abs(c) for c in codes)


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
