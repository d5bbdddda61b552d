"""launch_ranks.py -- what torchrun --nproc_per_node=N does, minus the elastic agent, for
the example jobs (scripts/demo-job.py, tests/control/run_job.py): Debian's torchrun
crashes on Python 3.11.

The ranks go with the launcher, as a user stopping the job expects: SIGINT, SIGTERM and
SIGHUP to the launcher end them (SIGTERM, which also ends a rank blocked in a
collective), and each rank asks the kernel for SIGTERM when the launcher dies without
passing anything on (kill -9 included, which no handler sees)."""
import ctypes
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1


def _die_with_launcher(libc, launcher_pid):
    """In each rank, before it runs (subprocess's preexec_fn)."""
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != launcher_pid:  # the launcher died before the line above
        os._exit(1)


def launch_ranks(argv, world, name, master_port="29500"):
    """Starts world ranks of argv with RANK, LOCAL_RANK, WORLD_SIZE, ... set, waits for
    them and returns the worst exit status."""
    env = dict(os.environ)
    env.setdefault("MASTER_ADDR", "127.0.0.1")
    env.setdefault("MASTER_PORT", master_port)
    env.setdefault("OMP_NUM_THREADS", "1")  # N ranks share the cores
    procs, stopping = [], []

    def stop_ranks(signum, frame):
        stopping.append(signum)
        for p in procs:
            if p.poll() is None:
                p.terminate()

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop_ranks)
    libc, me = ctypes.CDLL(None, use_errno=True), os.getpid()
    for rank in range(world):
        env_rank = dict(env, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                        LOCAL_WORLD_SIZE=str(world), GROUP_RANK="0")
        procs.append(subprocess.Popen(argv, env=env_rank, preexec_fn=lambda: _die_with_launcher(libc, me)))
        if stopping:  # a signal came while the ranks were starting
            stop_ranks(stopping[0], None)
    codes = [p.wait() for p in procs]
    if stopping:
        print("%s: stopped by signal %d; all %d ranks ended" % (name, stopping[0], len(procs)), file=sys.stderr,
              flush=True)
    return max(abs(c) for c in codes)
