"""autostep: the collector in a job that was not changed for it (`perftracker run`), and
the job's steps found without a step() call in its script.

run_boot/sitecustomize.py calls after_torch() once torch is imported: in a worker (a rank
variable in its environment) it starts the collector at once, in any other process when
it calls torch.distributed.init_process_group(). Then the steps come from the first of
these sources that shows itself; a better one replaces a worse one whenever it appears:

1. explicit: the script's own step() calls (it made a PerfTracker, or the step count
   moved without us). Everything below stands down, so no step is counted twice.
2. optimizer: the end of optimizer.step -- torch's global optimizer step post-hook
   (torch >= 2.0), else Optimizer._optimizer_step_code, the per-step call that every
   Optimizer subclass's step makes on older torch (its profiler's own hook: Optimizer's
   __init__ wraps each class's step once, and the wrapper calls it after the step). With
   several optimizers the step ends after the last one of the cycle they step in: the
   anchor is the optimizer that stepped just before the first one stepped again.
   Gradient accumulation needs nothing: only optimizer steps end steps.
3. learned: the sequence that repeats. Each data-loader item (when it has been fetched)
   and each torch.distributed collective call (before it runs) is a token; once the last
   tokens are one cycle repeated three times (and at least 4 tokens were seen), a step
   begins at each cycle's first token, the cycle rotated to start at a data-loader item
   when it has one (so a step runs from one item's work to the fetch of the next). A cycle
   that breaks (an epoch end, an evaluation) is followed again from its first token, and
   learned anew when it keeps breaking.
4. clock: nothing of the above, and no data-loader item or collective for GRACE_MIN_S (10)
   seconds (3 x S if longer) since the set-up, the process group's start or the last one
   (a job whose iterations are long is still learning its sequence), or CLOCK_AT_LATEST_S
   (60) after the set-up whatever comes: one log line says so, and a step is marked at
   every multiple of PERFTRACKER_RUN_SECONDS seconds of the wall clock (`perftracker run
   --seconds S`, default 1) in the main thread, through a signal handler that
   _thread.interrupt_main runs without a real signal (so no system call is interrupted);
   the window is then a time window of --steps x S seconds.

Every rank must number an iteration alike: the control plane arms all of them at the same
step number, and ranks start seconds apart and switch sources at their own moments. So
each source counts its own steps from the process's start, from what every rank sees
alike -- the n-th optimizer step, the n-th cycle of the learned sequence, the n-th
S-second period of the wall clock (CLOCK_REALTIME: one clock on a host, NTP's across
hosts) -- and a step's number is the pair (source, count) (src/util/step_number.h), never
a count carried over from the source before. The clock ticks on the period boundaries,
so the ranks' clock steps begin together; a learned step begins when its collective
returns (every rank leaves a collective together), not when the rank enters it.

note() says which source is in use; tracer.py's _identity passes it into every profiled
window, whose summary and report carry it as a warning ("steps: ..."). The hooks below
run on every optimizer step, collective and data-loader item, so their common path is a
few attribute tests (bench/collector/bench_overhead.py, section 5). Nothing here raises
into the program: a failure becomes one log line and the sources that still work.
"""
import os
import signal
import sys
import threading
import time

EXPLICIT, OPTIMIZER, LEARNED, CLOCK = "explicit", "optimizer", "learned", "clock"
_RANKS = {None: 0, CLOCK: 1, LEARNED: 2, OPTIMIZER: 3, EXPLICIT: 4}
_NOTES = {
    None: "no step found yet (perftracker run)",
    EXPLICIT: "the script's own step() calls",
    OPTIMIZER: "found from optimizer.step (perftracker run)",
    LEARNED: "learned from a repeating sequence of data-loader items and collectives (perftracker run)",
    CLOCK: "none found (no step() call, no optimizer.step, no repeating data-loader or collective sequence): "
           "a step every %g s (perftracker run --seconds)",
}
GRACE_MIN_S = 10.0
CLOCK_AT_LATEST_S = 60.0
_LEARN_MIN_TOKENS = 4
_LEARN_REPEATS = 3
_LEARN_MAX_PERIOD = 64
_LEARN_KEEP = _LEARN_REPEATS * _LEARN_MAX_PERIOD
_NEXT_TOKEN = -1            # a data-loader item; collectives are their operation's index (>= 0)

_tracer = None              # the PerfTracker this module made
_mode = None
_last_number = 0            # the step number after our last step: anything else is the script's step()
_optimizer_steps = 0        # the anchor optimizer's steps since the process started
_learned_steps = 0          # cycles of the learned sequence since the process started
_last_activity = time.monotonic()  # set-up, the process group's start, the last token (the clock's grace)
_making_tracer = False
_lock = threading.RLock()   # mode changes; reentrant: the clock's signal handler may run while the main thread holds it


def _log(message):
    try:
        sys.stderr.write("[perftracker] %s\n" % message)
    except Exception:
        pass


def note():
    """Which step source this process uses, for the report."""
    if _mode == CLOCK:
        return _NOTES[CLOCK] % _clock_seconds()
    return _NOTES[_mode]


def mode():
    return _mode


def _clock_seconds():
    try:
        seconds = float(os.environ.get("PERFTRACKER_RUN_SECONDS", "") or 1.0)
    except ValueError:
        seconds = 1.0
    return min(max(seconds, 0.01), 3600.0)


# ------------------------------------------------------------ sources and their order

def _number(source, count):
    """A step's number: its source and its count there (src/util/step_number.h)."""
    return _RANKS[source] * _STEP_SOURCE_SPAN + count


_STEP_SOURCE_SPAN = 10 ** 12  # the C side's PT_STEP_SOURCE_SPAN; checked against it at set-up


def _become(new_mode, why=""):
    """Moves to a better source (never to a worse one); True when new_mode is in use."""
    global _mode
    with _lock:
        if _RANKS[new_mode] < _RANKS[_mode]:
            return False
        if new_mode != _mode:
            _mode = new_mode
            _log("steps: %s%s" % (note(), why))
            if new_mode in (EXPLICIT, OPTIMIZER):
                _stop_learning()
            if new_mode is EXPLICIT:
                _number_explicit_steps()
    return True


def _number_explicit_steps():
    """The script's step() calls count from here, as (explicit, count): every step so far
    is the script's when no source had made one, else they were ours and count for
    nothing (ranks switch at different moments, so their counts differ)."""
    tracer = _tracer
    if tracer is None:
        return  # _start_collector does it once the collector is there
    number = tracer._step_number
    kept = number if number < _STEP_SOURCE_SPAN else 0
    tracer._renumber(_number(EXPLICIT, kept))


def user_tracer_created():
    """tracer.py: the script made its own PerfTracker, so it calls step() itself."""
    if not _making_tracer:
        _become(EXPLICIT)


def _step(source, count):
    """Our step, numbered by its source, unless the script steps by itself (then we stand
    down for good)."""
    global _last_number
    tracer = _tracer
    if tracer is None:
        return
    if tracer._step_number != _last_number:
        _become(EXPLICIT, " (step() was called outside perftracker run)")
        return
    _last_number = tracer._step_to(_RANKS[source] * _STEP_SOURCE_SPAN + count)  # _number(), inline: every step


# ------------------------------------------------------------ optimizer.step

_anchor = None              # id() of the optimizer whose step ends a step
_cycle_seen = []            # ids of optimizers stepped since the first one, until one repeats
_cycle_learned = False


def _on_optimizer_step(optimizer, *unused):
    """After every optimizer.step (any optimizer, any thread that steps one)."""
    global _optimizer_steps
    if _mode is EXPLICIT:
        return
    try:
        key = id(optimizer)
        if not _cycle_learned:
            _learn_optimizer_cycle(key)
        if _mode is not OPTIMIZER:
            _become(OPTIMIZER)
        if key == _anchor:
            _optimizer_steps += 1
            _step(OPTIMIZER, _optimizer_steps)
    except Exception as exc:
        _fail("optimizer step hook", exc)


def _learn_optimizer_cycle(key):
    """The anchor is the first optimizer until one steps again; then the one that stepped
    just before it (the last of the cycle)."""
    global _anchor, _cycle_learned
    if _anchor is None:
        _anchor = key
    if key in _cycle_seen:
        _anchor = _cycle_seen[-1]
        _cycle_learned = True
        if len(_cycle_seen) > 1:
            _log("steps: %d optimizers step in each step; a step ends after the last of them" % len(_cycle_seen))
        del _cycle_seen[:]
    else:
        _cycle_seen.append(key)


def _install_optimizer_hook(torch):
    try:
        import torch.optim.optimizer as optimizer_module  # (torch.optim does not name it)
    except ImportError:
        return False
    register = getattr(optimizer_module, "register_optimizer_step_post_hook", None)
    if register is not None:  # torch >= 2.0
        register(_on_optimizer_step)
        return True
    base = getattr(optimizer_module, "Optimizer", None)
    original = getattr(base, "_optimizer_step_code", None)
    if original is None or hasattr(original, "__perftracker_wraps__"):
        return original is not None

    def _optimizer_step_code(self):
        original(self)
        _on_optimizer_step(self)

    _optimizer_step_code.__perftracker_wraps__ = original
    base._optimizer_step_code = _optimizer_step_code
    return True


# ------------------------------------------------------------ the learned sequence

_tokens = []
_cycle = None               # the learned cycle of tokens
_phase = 0                  # index in _cycle of the token expected next
_misses = 0
_learning = True            # false once a better source took over


def _on_token(token):
    """After each data-loader item is fetched, after each collective call returns."""
    global _last_activity, _learned_steps
    if not _learning:
        return
    try:
        if _mode is None:
            _last_activity = time.monotonic()
        with _lock:
            start = _follow(token) if _cycle is not None else _learn(token)
            if start:
                _learned_steps += 1
        if start and _become(LEARNED):
            _step(LEARNED, _learned_steps)
    except Exception as exc:
        _fail("sequence learning", exc)


def _learn(token):
    global _cycle, _phase, _misses
    _tokens.append(token)
    if len(_tokens) > _LEARN_KEEP:
        del _tokens[:len(_tokens) - _LEARN_KEEP]
    period = _period(_tokens)
    if period:
        cycle = _tokens[-period:]
        first = cycle.index(_NEXT_TOKEN) if _NEXT_TOKEN in cycle else 0
        _cycle = cycle[first:] + cycle[:first]
        _phase, _misses = (period - first) % period, 0
        del _tokens[:]
    return False


def _period(tokens):
    """The shortest period p such that the last tokens are one cycle of p repeated
    _LEARN_REPEATS times; 0 when there is none (yet)."""
    n = len(tokens)
    if n < _LEARN_MIN_TOKENS:
        return 0
    for p in range(1, min(_LEARN_MAX_PERIOD, n // _LEARN_REPEATS) + 1):
        if all(tokens[n - i - 1] == tokens[n - i - 1 - p] for i in range(p * (_LEARN_REPEATS - 1))):
            return p
    return 0


def _follow(token):
    """True when token begins a cycle (a step begins before it)."""
    global _cycle, _phase, _misses
    if token == _cycle[_phase]:
        starts = _phase == 0
        _phase = (_phase + 1) % len(_cycle)
        if starts:
            _misses = 0
        return starts
    if token == _cycle[0]:  # a cycle cut short: the next one begins here
        _phase = 1 % len(_cycle)
        _misses += 1
        return True
    _misses += 1
    if _misses > _LEARN_REPEATS * len(_cycle):
        _cycle = None  # the job does something else now: learn again
        _tokens.append(token)
    return False


def _stop_learning():
    global _learning
    _learning = False
    del _tokens[:]
    try:
        from perftracker import collectives
        collectives.observer = None
    except Exception:
        pass


def _install_sequence_hooks(torch):
    if not _learning:  # the script steps by itself: nothing to learn
        return
    from perftracker import collectives
    collectives.observer = _on_token
    base = getattr(getattr(getattr(getattr(torch, "utils", None), "data", None), "dataloader", None),
                   "_BaseDataLoaderIter", None)
    original = getattr(base, "__next__", None)
    if original is None or hasattr(original, "__perftracker_wraps__"):
        return

    def __next__(self):
        item = original(self)  # the end of an epoch (StopIteration) is no token
        if _learning:
            _on_token(_NEXT_TOKEN)
        return item

    __next__.__perftracker_wraps__ = original
    base.__next__ = __next__


# ------------------------------------------------------------ the clock

_CLOCK_SIGNAL = getattr(signal, "SIGRTMAX", 64) - 2


def _clock_count(seconds):
    """The wall clock's period now: every rank of a host reads the same clock."""
    return int(time.time() // seconds)


def _on_clock(signum, frame):
    if _mode is CLOCK:
        count = _clock_count(_clock_seconds())
        behind = _last_number - _number(CLOCK, count)
        # A second handler in one period (a late one) makes no step; a wall clock set back by
        # more than a period still steps (one past the last), or the job would look stuck.
        if behind < 0 or behind > 1:
            _step(CLOCK, count)


def _process_group_started():
    dist = sys.modules.get("torch.distributed")
    try:
        return bool(dist is not None and dist.is_available() and dist.is_initialized())
    except Exception:
        return False


def _wait_for_silence(grace):
    """Until no source showed itself and nothing came for grace seconds (the set-up, the
    process group's start, a token), or CLOCK_AT_LATEST_S since the set-up; True when
    the clock is due then."""
    global _last_activity
    began, group_seen = time.monotonic(), False
    while _mode is None:
        now = time.monotonic()
        if not group_seen and _process_group_started():
            group_seen, _last_activity = True, now  # every rank leaves the rendezvous together
        if now - _last_activity >= grace or now - began >= max(CLOCK_AT_LATEST_S, grace):
            return True
        time.sleep(min(0.5, grace))
    return False


def _clock_thread(grace, seconds):
    if not _wait_for_silence(grace):
        return
    try:
        import _thread
    except ImportError:
        return
    if not _become(CLOCK, " (no step was found, and no collective or data-loader item came for %g s)" % grace):
        return
    while _mode is CLOCK:
        _thread.interrupt_main(_CLOCK_SIGNAL)
        now = time.time()
        time.sleep((now // seconds + 1) * seconds - now + 0.002)  # just past the next period's start


def _start_clock():
    """The fallback: armed now (a signal handler can only be set in the main thread),
    ticking only if no source shows itself within the grace time."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(_CLOCK_SIGNAL) not in (signal.SIG_DFL, None):
        return  # the program uses that signal: no clock
    signal.signal(_CLOCK_SIGNAL, _on_clock)
    seconds = _clock_seconds()
    threading.Thread(target=_clock_thread, args=(max(GRACE_MIN_S, 3 * seconds), seconds),
                     name="perftracker-clock", daemon=True).start()


# ------------------------------------------------------------ start

_failed = set()


def _fail(what, exc):
    """One log line per hook that failed; the program goes on (a failed learner stops)."""
    global _learning
    if what == "sequence learning":
        _learning = False
    if what not in _failed:
        _failed.add(what)
        _log("%s failed: %s: %s" % (what, type(exc).__name__, exc))


def _start_collector():
    global _tracer, _making_tracer, _last_number, _STEP_SOURCE_SPAN, _last_activity
    if _tracer is not None:
        return
    from perftracker import _perftracker, tracer
    _STEP_SOURCE_SPAN = _perftracker.STEP_SOURCE_SPAN
    if tracer._started:  # the script made a PerfTracker before torch was imported
        _become(EXPLICIT)
    _making_tracer = True
    try:
        _tracer = tracer.PerfTracker()
    finally:
        _making_tracer = False
    if _mode is EXPLICIT:
        _number_explicit_steps()
    _last_number = _tracer._step_number
    _last_activity = time.monotonic()


def _set_up(torch):
    _start_collector()
    from perftracker import collectives
    collectives.install()
    if not _install_optimizer_hook(torch):
        _log("optimizer.step cannot be hooked in this torch version: steps come from the sequence or the clock")
    _install_sequence_hooks(torch)
    _start_clock()


def after_torch(worker):
    """sitecustomize: torch has just been imported. A worker starts now; another process
    when it joins a process group."""
    torch = sys.modules["torch"]
    if worker:
        _set_up(torch)
        return
    dist = getattr(torch, "distributed", None)
    init = getattr(dist, "init_process_group", None)
    if init is None or hasattr(init, "__perftracker_wraps__"):
        return

    def init_process_group(*args, **kwargs):
        result = init(*args, **kwargs)
        try:
            # The control plane reads who this worker is from its environment.
            os.environ.setdefault("RANK", str(dist.get_rank()))
            os.environ.setdefault("WORLD_SIZE", str(dist.get_world_size()))
            _set_up(torch)
        except Exception as exc:
            _log("perftracker run: the collector was not started: %s: %s" % (type(exc).__name__, exc))
        return result

    init_process_group.__perftracker_wraps__ = init
    dist.init_process_group = init_process_group
