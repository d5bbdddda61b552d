#!/usr/bin/env python3
"""fault_job.py -- record a small labelled training job with one injected fault.

The labelled corpus the diagnosis is tested against (../shared/data/traces/h200 and what
this script adds to it) comes from here: a DDP job of N processes, one of them (the
culprit) carrying one fault, profiled for a few steps either by torch.profiler (Kineto
JSON, rankN.pt.trace.json.gz) or by perftracker's collector (raw traces), plus
label.json saying what the right answer is.

    fault_job.py --out DIR --fault slow_data --culprit 3 [--world 4] [--mode kineto]
    fault_job.py --out DIR --fault healthy --seed 2 --mode perftracker

Faults (all on the culprit only):
  healthy         none
  slow_data       load_batch sleeps 40 ms per step (a slow input pipeline)
  gc              log_metrics runs gc.collect() over 600k live objects every step
  gpu_heavy       augment_batch runs 12 extra matmuls (2048^3 on a GPU) per step
  sync_copies     collect_stats makes 200 synchronous device-to-host copies (.item()) per step
  cpu_contention  a busy process is pinned to the culprit's cores (ranks are pinned apart)
  hang            the culprit stops before its all-reduce in the second profiled step
                  (perftracker mode: the collector reports it; the job is then killed)

The model is the h200 corpus's: a TransformerEncoder (d=384, 4 layers) with a Linear
head, AdamW, random batches of 8 x 256, DDP over gloo (several processes may share one
GPU; NCCL refuses that). Ranks are started with torch.multiprocessing, not torchrun.
--device cpu runs the same job on the CPU (a smoke test: no GPU activity to record).
"""
import argparse
import gc
import gzip
import json
import os
import shutil
import socket
import sys
import time

FAULTS = ("healthy", "slow_data", "gc", "gpu_heavy", "sync_copies", "cpu_contention", "hang")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="folder for the traces and label.json")
    p.add_argument("--fault", choices=FAULTS, default="healthy")
    p.add_argument("--culprit", type=int, default=None, help="faulty rank (default: the last)")
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--mode", choices=("kineto", "perftracker"), default="kineto")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--wait", type=int, default=6, help="steps before the profiled ones")
    p.add_argument("--steps", type=int, default=3, help="profiled steps")
    p.add_argument("--d-model", type=int, default=384)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--heavy-size", type=int, default=None, help="gpu_heavy matmul size (2048 on a GPU)")
    args = p.parse_args(argv)
    if args.culprit is None:
        args.culprit = args.world - 1 if args.fault != "healthy" else -1
    if args.fault == "healthy":
        args.culprit = -1
    if args.fault != "healthy" and not 0 <= args.culprit < args.world:
        p.error(f"--culprit must be a rank in 0..{args.world - 1}")
    if args.fault == "hang" and args.mode != "perftracker":
        p.error("--fault hang needs --mode perftracker: torch.profiler writes nothing for a step that never ends")
    return args


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pin(rank, world):
    """Ranks on separate cores, so that contention on one rank's cores is that rank's."""
    cores = sorted(os.sched_getaffinity(0))
    share = max(1, len(cores) // (world + 1))
    mine = cores[rank * share:(rank + 1) * share] or cores
    os.sched_setaffinity(0, mine)
    return mine


def spin(cores, seconds):
    os.sched_setaffinity(0, cores)
    end = time.time() + seconds
    while time.time() < end:
        pass


class Faults:
    """What the culprit does differently; every hook is a no-op elsewhere."""

    def __init__(self, args, rank, torch, device):
        self.on = rank == args.culprit
        self.kind = args.fault if self.on else "healthy"
        self.torch, self.device = torch, device
        size = args.heavy_size or (2048 if device.type == "cuda" else 256)
        self.heavy = [torch.randn(size, size, device=device) for _ in range(2)] if self.kind == "gpu_heavy" else None
        self.live = [[i] for i in range(600_000)] if self.kind == "gc" else None

    def load_batch(self):
        if self.kind == "slow_data":
            time.sleep(0.04)

    def augment_batch(self, x):
        if self.heavy is not None:
            for _ in range(12):
                self.torch.matmul(self.heavy[0], self.heavy[1])
        return x

    def collect_stats(self, loss):
        if self.kind == "sync_copies":
            for _ in range(200):
                loss.detach().sum().item()

    def log_metrics(self):
        if self.kind == "gc":
            gc.collect()


def worker(rank, args, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(args.world), LOCAL_RANK=str(rank))
    if args.fault == "cpu_contention":
        pin(rank, args.world)
    import torch
    import torch.distributed as dist
    torch.manual_seed(args.seed * 1000 + rank)
    use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    device = torch.device("cuda", 0) if use_cuda else torch.device("cpu")
    if not use_cuda:
        torch.set_num_threads(1)
    tracer = None
    if args.mode == "perftracker":
        from perftracker import PerfTracker
        tracer = PerfTracker(wait=args.wait, steps=args.steps, output_dir=out)
    dist.init_process_group("gloo")
    layer = torch.nn.TransformerEncoderLayer(args.d_model, nhead=6 if args.d_model % 6 == 0 else 4,
                                             dim_feedforward=4 * args.d_model, batch_first=True)
    model = torch.nn.Sequential(torch.nn.TransformerEncoder(layer, args.layers),
                                torch.nn.Linear(args.d_model, args.d_model)).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
    faults = Faults(args, rank, torch, device)

    def load_batch():
        faults.load_batch()
        return torch.randn(args.batch, args.seq, args.d_model).to(device)

    def train_step(step):
        x = faults.augment_batch(load_batch())
        loss = ddp(x).pow(2).mean()
        optimizer.zero_grad(set_to_none=True)
        if args.fault == "hang" and faults.on and step == args.wait + 1:
            time.sleep(3600)  # never reaches the all-reduce: the others block in it
        loss.backward()
        optimizer.step()
        faults.collect_stats(loss)
        faults.log_metrics()

    total = args.wait + args.steps + 2
    if args.mode == "kineto":
        from torch.profiler import ProfilerActivity, profile, schedule
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if use_cuda else [])
        path = os.path.join(out, f"rank{rank}.pt.trace.json")

        def export(prof):
            prof.export_chrome_trace(path)

        with profile(activities=activities, schedule=schedule(wait=args.wait - 1, warmup=1, active=args.steps),
                     on_trace_ready=export, with_stack=True, record_shapes=True) as prof:
            for step in range(total):
                train_step(step)
                prof.step()
        with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.remove(path)
    else:
        for step in range(total):
            train_step(step)
            tracer.step()
        from perftracker import wait_idle
        wait_idle(120)
    dist.barrier()
    dist.destroy_process_group()


def main(argv=None):
    args = parse_args(argv)
    import torch.multiprocessing as mp
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    spinner = None
    if args.fault == "cpu_contention":
        cores = sorted(os.sched_getaffinity(0))
        share = max(1, len(cores) // (args.world + 1))
        mine = cores[args.culprit * share:(args.culprit + 1) * share] or cores
        spinner = mp.get_context("spawn").Process(target=spin, args=(mine, 3600), daemon=True)
        spinner.start()
    try:
        ctx = mp.spawn(worker, args=(args, free_port(), out), nprocs=args.world, join=False)
        deadline = time.time() + (60 if args.fault == "hang" else 3600)
        while not ctx.join(timeout=1):
            if time.time() > deadline:  # a hang: the collector has written its report by now
                for p in ctx.processes:
                    p.kill()
                break
    finally:
        if spinner:
            spinner.kill()
    label = {"mode": args.mode, "fault": args.fault, "culprit": args.culprit, "world": args.world,
             "model": f"d{args.d_model} x{args.layers} batch {args.batch}x{args.seq}", "seed": args.seed}
    with open(os.path.join(out, "label.json"), "w") as f:
        json.dump(label, f)
    print(f"fault_job: {args.fault} (culprit {args.culprit}) recorded in {out}")


if __name__ == "__main__":
    sys.exit(main())
