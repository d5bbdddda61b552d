#!/usr/bin/python3
"""staggered_launcher.py GAP_S N COMMAND... -- starts N ranks of COMMAND as
scripts/launch_ranks.py does (RANK, LOCAL_RANK, WORLD_SIZE, ... set; they end with the
launcher), but GAP_S seconds apart, as a cluster's ranks start: slow nodes, image pulls,
a scheduler that places them one by one. test_run_torch.py's `staggered` scenario runs
the README's example job through it, so each rank's collector starts, and finds its
steps, at its own moment."""
import ctypes
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from launch_ranks import _die_with_launcher  # noqa: E402 (scripts/)


def main():
    gap, world, argv = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    procs = []

    def stop_ranks(signum, frame):
        for p in procs:
            if p.poll() is None:
                p.terminate()
        sys.exit(128 + signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop_ranks)
    libc, me = ctypes.CDLL(None, use_errno=True), os.getpid()
    env = dict(os.environ)
    env.setdefault("MASTER_ADDR", "127.0.0.1")
    env.setdefault("OMP_NUM_THREADS", "1")
    for rank in range(world):
        if rank:
            time.sleep(gap)
        env_rank = dict(env, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                        LOCAL_WORLD_SIZE=str(world), GROUP_RANK="0")
        procs.append(subprocess.Popen(argv, env=env_rank, preexec_fn=lambda: _die_with_launcher(libc, me)))
    return max(abs(p.wait()) for p in procs)


if __name__ == "__main__":
    sys.exit(main())
