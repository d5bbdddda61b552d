"""PerfTracker: the Python face of the C collector (perftracker._perftracker).

Everything costly lives in C. This file only gathers configuration (arguments, then
PERFTRACKER_* environment variables), tells the C side where things are (the summarizer
binary, CUPTI, which GPU to sample, which path prefixes to cut from file names),
answers "who is this worker" when a window opens, and carries the job secret from rank 0
to the other ranks through the job's torch.distributed store (see _share_job_secret). It
never raises into the training script: any problem becomes one log line and a tracer
whose step() only counts.
"""
import atexit
import datetime
import glob
import hashlib
import os
import shutil
import socket
import sys
import sysconfig
import time

from perftracker import _perftracker, collectives

_DEFAULT_OUTPUT_DIR = "/tmp/perftracker/output"
_started = False


def _log(message):
    try:
        sys.stderr.write("[perftracker] %s\n" % message)
    except Exception:
        pass


_ENV_INT_LIMIT = 1 << 62


def _env_int(name, default):
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        _log("ignoring %s=%r (not an integer)" % (name, value))
        return default
    if not -_ENV_INT_LIMIT <= number <= _ENV_INT_LIMIT:  # the C core takes 64-bit sizes
        _log("ignoring %s=%r (out of range)" % (name, value))
        return default
    return number


def _env_flag(name, default):
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return default
    return value not in ("0", "false", "no", "off")


def _default_output_dir():
    """The vendor's shared /tmp/perftracker/output, or, when this user cannot safely write
    there (another user created it), output/ in this user's private runtime directory
    (/tmp/perftracker-<uid>, or its private fallback when another user squatted that name)
    -- asked of the C side, which makes the CLI's choice (src/control/round.c), so the
    rules live in one place; said in one log line."""
    directory, note = _perftracker._default_output_dir()
    if note:
        _log("%s (output_dir= or PERFTRACKER_OUTPUT_DIR chooses the folder)" % note)
    return directory


def _identity():
    """Who this worker is, asked when a window opens (torch.distributed is initialized by
    then even when PerfTracker() was built before init_process_group)."""
    info = {"host": socket.gethostname()}
    for key, var in (("rank", "RANK"), ("local_rank", "LOCAL_RANK"), ("world_size", "WORLD_SIZE")):
        value = os.environ.get(var, "")
        if value.strip().lstrip("-").isdigit():
            info[key] = int(value)
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            info["rank"] = dist.get_rank()
            info["world_size"] = dist.get_world_size()
            info["backend"] = str(dist.get_backend())
    except Exception:
        pass
    autostep = sys.modules.get("perftracker.autostep")  # under `perftracker run`: where the steps come from
    if autostep is not None:
        info["step_source"] = autostep.note()
    cuda = sys.modules.get("torch.cuda")
    try:
        if cuda is not None and cuda.is_initialized():
            info["cuda"] = 1
            info["device_count"] = cuda.device_count()
            info["device_name"] = cuda.get_device_name(cuda.current_device())
    except Exception:
        pass
    info["software"] = _software_versions()
    return info


def _software_versions():
    """"torch 2.5.1, cuda 12.4, nccl 2.21.5": what `perftracker diff` names when two runs
    differ in it (a change of version explains a change of speed)."""
    parts = []
    torch = sys.modules.get("torch")
    try:
        if torch is not None:
            parts.append("torch " + str(torch.__version__))
            if getattr(torch.version, "cuda", None):
                parts.append("cuda " + str(torch.version.cuda))
            if getattr(torch.version, "hip", None):
                parts.append("hip " + str(torch.version.hip))
            cuda = sys.modules.get("torch.cuda")
            if cuda is not None and cuda.is_initialized() and hasattr(cuda, "nccl"):
                version = cuda.nccl.version()  # (2, 21, 5); an int (2708) on older torch
                parts.append("nccl " + (".".join(str(v) for v in version) if isinstance(version, tuple)
                                        else str(version)))
    except Exception:
        pass
    return ", ".join(parts)


def _path_prefixes():
    """Prefixes cut from file names so frames read as the user knows them."""
    prefixes = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            prefixes.add(os.path.realpath(path))
            prefixes.add(path)
    for path in (os.getcwd(), os.path.dirname(os.path.abspath(sys.argv[0])) if sys.argv and sys.argv[0] else ""):
        if path and path != "/":
            prefixes.add(path)
            prefixes.add(os.path.realpath(path))
    return sorted((p.rstrip("/") + "/" for p in prefixes if p), key=len, reverse=True)


def _cli_path():
    explicit = os.environ.get("PERFTRACKER_CLI")
    if explicit:
        return explicit
    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "perftracker")
    if os.access(bundled, os.X_OK):
        return bundled
    return shutil.which("perftracker") or shutil.which("c4d_perftracker") or ""


def _cupti_candidates():
    found = []
    explicit = os.environ.get("PERFTRACKER_CUPTI_LIB")
    if explicit:
        found.append(explicit)
    for base in sys.path:
        if not base or not os.path.isdir(os.path.join(base, "nvidia")):
            continue
        for pattern in ("nvidia/cuda_cupti/lib/libcupti.so*", "nvidia/cu*/lib/libcupti.so*"):
            found.extend(sorted(glob.glob(os.path.join(base, pattern)), reverse=True))
    found += ["libcupti.so", "libcupti.so.13", "libcupti.so.12",
              "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so", "/usr/local/cuda/lib64/libcupti.so"]
    return found


def _nvml_target():
    """(uuid, index) of the GPU this worker most likely uses; index -1 when there is no
    NVIDIA driver (then NVML is not even tried)."""
    if not (os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia")):
        return "", -1
    local_rank = max(_env_int("LOCAL_RANK", 0), 0)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return "", local_rank
    items = [item.strip() for item in visible.split(",") if item.strip()]
    if not items:
        return "", -1
    pick = items[local_rank % len(items)]
    if pick.isdigit():
        return "", int(pick)
    return (pick, -1) if pick.startswith("GPU-") else ("", local_rank)


def _start(summary_dir, auto_trigger, sample_period_us):
    global _started
    cli = _cli_path()
    uuid, index = _nvml_target()
    gpu = _env_flag("PERFTRACKER_GPU", True)
    started = _perftracker.start(
        cli_path=cli,
        summary_dir=summary_dir,
        sample_period_us=sample_period_us,
        gpm_period_ms=_env_int("PERFTRACKER_GPM_PERIOD_MS", 100),
        gpu=gpu,
        cupti_libs=_cupti_candidates() if gpu else [],
        gpu_uuid=uuid,
        gpu_index=index,
        max_events=_env_int("PERFTRACKER_MAX_EVENTS", 4 << 20),
        max_gpu_events=_env_int("PERFTRACKER_MAX_GPU_EVENTS", 1 << 20),
        max_samples=_env_int("PERFTRACKER_MAX_SAMPLES", 2 << 20),
        prefixes=_path_prefixes(),
        identity=_identity,
        agent=_env_flag("PERFTRACKER_AGENT", True),
        auto_trigger=auto_trigger,
        quiet=_env_flag("PERFTRACKER_QUIET", False),
        cuda_api_count=_env_flag("PERFTRACKER_CUDA_API_COUNT", True),
    )
    if started and not _started:
        _started = True
        atexit.register(_perftracker.shutdown, float(_env_int("PERFTRACKER_EXIT_TIMEOUT", 60)))
        # DataLoader workers are forked, possibly while a window is open: they must not
        # keep the hook or think they own the parent's threads.
        os.register_at_fork(after_in_child=_forked_child)
    if not cli:
        _log("the perftracker CLI was not found (set PERFTRACKER_CLI): windows are recorded but not summarized")
    return started


# The job secret (docs/control-plane.md, "Authentication"). Only a job with ranks on
# several machines has one to share: the ranks on rank 0's machine connect through the
# coordinator's Unix socket, where the kernel vouches for them. Rank 0's agent makes it;
# the ranks on other machines do not connect until they have it. It travels through the
# store the job's ranks already share (torch.distributed's default store) under a name per
# elastic attempt, so a restarted job never reads the secret of the attempt before it.
# That store is open to whoever can reach its port, so rank 0 writes the secret only where
# nothing is yet (compare_set), and then reads it back every few seconds: a value there
# before it wrote, or changed after, is someone else's, and perftracker (not the training)
# stops. Only the training thread touches the store: as init_process_group returns
# (collectives.py wraps it), at PerfTracker(), then from step() (at most once a second, by
# the C side). A job can hang in its first collectives, before any step(): right after
# the rendezvous every rank is where rank 0 is, so there the other ranks wait a moment.
_SECRET_KEY = "perftracker/job-secret/v1/attempt-"
_SECRET_READY = "perftracker/job-secret-ready/v1/attempt-"
_SECRET_WAIT_AFTER_INIT_S = 5.0
_SECRET_CHECK_EVERY_S = 5.0
_said = set()
_published = None       # rank 0: (key, sha256 of the secret) it watches in the store
_secret_next_check = 0.0
_secret_abandoned = False


def _say_once(key, message):
    if key not in _said:
        _said.add(key)
        _log(message)


def _job_store():
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    from torch.distributed import distributed_c10d
    return distributed_c10d._get_default_store()


def _text(value):
    return value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)


def _digest(text):
    return hashlib.sha256(text.encode("ascii", "replace")).digest()


def _abandon(why):
    """Someone else wrote the job secret: perftracker stops in this process, loudly."""
    global _published, _secret_abandoned
    _published, _secret_abandoned = None, True
    _perftracker._job_secret_compromised(why)
    return True


def _publish(store, key, ready, secret):
    """Rank 0: writes the secret where nothing is yet, and makes sure it is its own that
    the store holds. False while it keeps watching."""
    global _published, _secret_next_check
    if hasattr(store, "compare_set"):
        held = _text(store.compare_set(key, "", secret))
    else:  # an older store: nothing may be there yet, and what is there must be ours
        if store.add(ready, 0) != 0:
            return _abandon("the job secret's ready mark %s was in the torch.distributed store before rank 0 "
                            "published: someone else wrote it" % ready)
        store.set(key, secret)
        held = _text(store.get(key))
    if held != secret:
        return _abandon("the torch.distributed store held a job secret under %s before rank 0 wrote one: someone "
                        "else planted it" % key)
    if store.add(ready, 1) != 1:
        return _abandon("the job secret's ready mark %s was in the torch.distributed store before rank 0 "
                        "published: someone else wrote it" % ready)
    _perftracker._job_secret_published()
    _published = (key, _digest(secret))
    _secret_next_check = time.monotonic() + _SECRET_CHECK_EVERY_S
    return False


def _watch_published():
    """Rank 0, every few seconds: the store still holds the secret it wrote."""
    global _secret_next_check
    now = time.monotonic()
    if now < _secret_next_check:
        return False
    _secret_next_check = now + _SECRET_CHECK_EVERY_S
    key, digest = _published
    try:
        store = _job_store()
        if store is None:
            return False
        held = _text(store.get(key))
    except Exception:
        return False  # the store is going away with the job: nothing to watch
    if _digest(held) != digest:
        return _abandon("the job secret in the torch.distributed store (%s) was overwritten after rank 0 wrote "
                        "it: someone else can write to the job's store" % key)
    return False


def _share_job_secret(wait_s=0.0):
    """Rank 0: puts the job secret into the store, then watches it. Any other rank: takes
    it from there once rank 0 has. True when nothing is left to do. Waits at most wait_s:
    store.add(key, 0) reads a counter without blocking (torch 1.13's store has no check()),
    and get() runs only once that counter, or a bounded store.wait(), says the value is
    there."""
    if _secret_abandoned:
        return True
    if _published is not None:
        return _watch_published()
    try:
        publish = _perftracker._job_secret_to_publish()
        if publish is None and not _perftracker._job_secret_needed():
            return True
        store = _job_store()
        if store is None:
            return False  # before init_process_group: step() tries again
        attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "").strip() or "0"
        key, ready = _SECRET_KEY + attempt, _SECRET_READY + attempt
        if publish is not None:
            return _publish(store, key, ready, publish)
        if store.add(ready, 0) < 1:
            if wait_s <= 0:
                return False  # rank 0 has not published it yet
            try:
                store.wait([key], datetime.timedelta(seconds=wait_s))
            except Exception:
                return False  # not within wait_s: step() tries again
        value = store.get(key)
        _perftracker._set_job_secret(_text(value))
        return True
    except ValueError as exc:  # what the store holds is not a job secret: asking again cannot help
        _say_once("secret-bad", "the job secret in torch.distributed's store is unusable (%s); the control plane "
                  "will not connect this worker (set PERFTRACKER_SECRET for the job instead)" % exc)
        return True
    except Exception as exc:
        _say_once("secret-store", "cannot use torch.distributed's store for the job secret yet (%s: %s); trying "
                  "again at later steps" % (type(exc).__name__, exc))
        return False


def _secret_after_init():
    """collectives.after_init: as init_process_group returns."""
    _share_job_secret(_SECRET_WAIT_AFTER_INIT_S)


def _until_ready():
    """What step() retries until it is done: the job secret, and the collective
    bookkeeping (it needs torch.distributed imported)."""
    secret = _share_job_secret()
    return collectives.install() and secret


def _forked_child():
    global _started, _published
    _started = False
    _published = None  # the parent watches the store's secret, not its DataLoader workers
    _perftracker._after_fork_child()


class PerfTracker(_perftracker.Tracer):
    """Marks training steps for perftracker's collector.

    PerfTracker() alone waits for the control plane (``perftracker --trigger-on``) or the
    environment. Given ``wait``/``steps``/``output_dir`` (or PERFTRACKER_WAIT,
    PERFTRACKER_STEPS, PERFTRACKER_OUTPUT_DIR) it profiles ``steps`` steps after ``wait``
    steps by itself and leaves the raw trace in output_dir (and its summary in
    output_dir/summaries/ unless ``summarize=False``). step() is the only call a training
    loop makes; it costs well under a microsecond when no window is open.
    """

    def __init__(self, wait=None, steps=None, output_dir=None, *, summarize=None, auto_trigger=None,
                 sample_period_us=None, enabled=None):
        super().__init__()
        self.output_dir = None
        try:
            if enabled is None:
                enabled = _env_flag("PERFTRACKER_ENABLED", True)
            if not enabled:
                return
            autostep = sys.modules.get("perftracker.autostep")
            if autostep is not None:  # `perftracker run`: the script steps by itself
                autostep.user_tracer_created()
            wait = wait if wait is not None else _env_int("PERFTRACKER_WAIT", None)
            steps = steps if steps is not None else _env_int("PERFTRACKER_STEPS", None)
            output_dir = output_dir or os.environ.get("PERFTRACKER_OUTPUT_DIR") or None
            local = wait is not None or steps is not None or output_dir is not None
            if summarize is None:
                summarize = _env_flag("PERFTRACKER_SUMMARIZE", True)
            if local:
                output_dir = os.path.abspath(output_dir or _default_output_dir())
                os.makedirs(output_dir, exist_ok=True)
                self.output_dir = output_dir
            if auto_trigger is None:
                auto_trigger = False
            if sample_period_us is None:
                sample_period_us = _env_int("PERFTRACKER_SAMPLE_PERIOD_US", 100)
            summary_dir = os.path.join(output_dir, "summaries") if local and summarize else ""
            _start(summary_dir, bool(auto_trigger), int(sample_period_us))
            collectives.after_init = _secret_after_init
            if not _until_ready():
                _perftracker._set_secret_hook(_until_ready)
            if local:
                wait = 5 if wait is None else int(wait)
                steps = 2 if steps is None else int(steps)
                if not _perftracker.arm(max(wait, 0), max(steps, 1), output_dir + "/"):
                    _log("a profiling window is already pending; PerfTracker(wait=%d, steps=%d) ignored"
                         % (wait, steps))
        except Exception as exc:  # the training loop must never see our failures
            _log("collector disabled: %s: %s" % (type(exc).__name__, exc))


def collector_stats():
    """What the collector did so far in this process (windows, last trace, drops)."""
    return _perftracker.stats()


def wait_idle(timeout=60.0):
    """Waits until no profiling window is pending or being written; False on timeout."""
    return _perftracker.wait_idle(float(timeout))
