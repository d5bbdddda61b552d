#!/usr/bin/python3
"""The seed's training.py as `perftracker run` finds it: gloo on the CPU, and no perftracker
in it -- no collector import, no PerfTracker(), no step(). Rank r sleeps r x --sleep-scale
seconds per iteration, so rank 3 is the slow one, and every iteration ends in
dist.barrier(). --mode shapes the loop around the seed's:

  seed           the seed's loop as it is: matmul, sleep, barrier (no optimizer: the
                 steps must be learned from the repeating barrier)
  accumulation   a model trained with 4 micro-batches per optimizer.step (each micro-batch
                 sleeps a quarter of the rank's time), gradients all-reduced by hand
  two-optimizers two models, each with its optimizer, both stepped in each iteration
  eval           evaluation: a DataLoader, forward under no_grad, the metric all-reduced;
                 no optimizer anywhere
  no-step        a single process with no optimizer, no collective, no DataLoader
  explicit       the seed's script with its PerfTracker() and step() kept, plus an
                 optimizer: steps must not be counted twice

Launch (what torchrun would do; Debian's torchrun crashes on Python 3.11):
    run_job.py --launch 4 --mode MODE ...    (starts 4 ranks with RANK, WORLD_SIZE, ...)
With --iters N the job ends; at its end each rank prints "iterations I steps S source X",
read from the collector when one is loaded (the test's probe, not part of the job).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from launch_ranks import launch_ranks  # noqa: E402 (scripts/)

MODES = ("seed", "accumulation", "two-optimizers", "eval", "no-step", "explicit")
MICRO_BATCHES = 4


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--launch", type=int, default=0, metavar="N")
    p.add_argument("--mode", choices=MODES, default="seed")
    p.add_argument("--iters", type=int, default=100000)
    p.add_argument("--sleep-scale", type=float, default=0.2)
    p.add_argument("--size", type=int, default=200)
    p.add_argument("--hang-at", type=int, default=-1, metavar="ITERATION",
                   help="the highest rank sleeps forever in this iteration (the others wait in dist.barrier())")
    return p.parse_args()


def launch(args):
    """Starts args.launch ranks of this script (scripts/launch_ranks.py: they end with it)."""
    argv = [sys.executable, os.path.abspath(__file__), "--mode", args.mode, "--iters", str(args.iters),
            "--sleep-scale", str(args.sleep_scale), "--size", str(args.size), "--hang-at", str(args.hang_at)]
    return launch_ranks(argv, args.launch, "run_job")


def probe(iterations):
    """The test's view of what the collector counted (sys.modules: nothing is imported)."""
    stats = sys.modules.get("perftracker")
    autostep = sys.modules.get("perftracker.autostep")
    steps = stats.collector_stats()["steps_done"] if stats else -1
    if stats:
        stats.wait_idle(60)
    # One write: the ranks share the launcher's stdout, and print() writes the newline apart.
    sys.stdout.flush()
    os.write(1, b"iterations %d steps %d source %s\n" % (iterations, steps, str(autostep.mode() if autostep else None).encode()))


def no_step(args):
    import torch
    total = 0.0
    for i in range(args.iters):
        total += float(torch.randn(args.size, args.size).sum())
        time.sleep(args.sleep_scale)
    probe(args.iters)
    return 0


def train(args):
    import torch
    import torch.distributed as dist
    tracer = None
    if args.mode == "explicit":
        try:
            from c4d_perftracker_collector.PerfTracker import PerfTracker
            tracer = PerfTracker()
        except Exception:
            tracer = None
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    torch.manual_seed(rank)

    def matmul():
        a, b = torch.randn(args.size, args.size), torch.randn(args.size, args.size)
        return torch.matmul(a, b)

    models = [torch.nn.Linear(args.size, 1) for _ in range(2 if args.mode == "two-optimizers" else 1)]
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.01) for m in models]
    loader = None
    if args.mode == "eval":
        data = torch.utils.data.TensorDataset(torch.randn(64, args.size))
        loader = torch.utils.data.DataLoader(data, batch_size=8)

    def train_step():
        micro = MICRO_BATCHES if args.mode == "accumulation" else 1
        for _ in range(micro):
            x = matmul()
            time.sleep(rank * args.sleep_scale / micro)
            for model in models:
                model(x).sum().backward()
        if args.mode == "accumulation":
            for p in models[0].parameters():
                dist.all_reduce(p.grad)
        for optimizer in optimizers:
            optimizer.step()
            optimizer.zero_grad()

    def eval_step(batch):
        with torch.no_grad():
            score = models[0](torch.matmul(batch, torch.randn(args.size, args.size))).sum()
        time.sleep(rank * args.sleep_scale)
        dist.all_reduce(score.reshape(1))

    i = 0
    while i < args.iters:
        for batch in (loader if loader is not None else [None]):
            if i >= args.iters:
                break
            if args.mode == "seed":
                matmul()
                if i == args.hang_at and rank == dist.get_world_size() - 1:
                    print("rank %d hangs in iteration %d" % (rank, i), flush=True)
                    while True:
                        time.sleep(3600)
                time.sleep(rank * args.sleep_scale)
            elif args.mode == "eval":
                eval_step(batch[0])
            else:
                train_step()
            if tracer is not None:
                tracer.step()
            dist.barrier()
            i += 1
    probe(i)
    dist.destroy_process_group()
    return 0


def main():
    args = parse_args()
    if args.launch:
        return launch(args)
    return no_step(args) if args.mode == "no-step" else train(args)


if __name__ == "__main__":
    sys.exit(main())
