#!/usr/bin/env python3
"""autostep's decisions, one by one, without torch or a job: python/perftracker/autostep.py
loaded afresh for each case, a counting tracer in place of the collector, and fake torch
modules for the two optimizer hooks (torch >= 2.0's global post-hook, which this machine's
torch 1.13 does not have, and 1.x's Optimizer._optimizer_step_code).

    test_autostep.py AUTOSTEP_PY
"""
import importlib.util
import sys
import types

NEXT = -1
BARRIER, ALL_REDUCE = 13, 0


SPAN = 10 ** 12  # src/util/step_number.h's PT_STEP_SOURCE_SPAN


class CountingTracer:
    """The collector's step numbers (src/collect/collector.c, util/step_number.h), in
    Python: (source, count) as source * SPAN + count; step() is one past the last,
    _step_to() never less than that, _renumber() only forward; steps_done is the count."""

    def __init__(self):
        self._step_number = 0

    @property
    def steps_done(self):
        return self._step_number % SPAN

    def step(self):
        self._step_number += 1

    def _step_to(self, number):
        self._step_number = max(number, self._step_number + 1)
        return self._step_number

    def _renumber(self, number):
        self._step_number = max(number, self._step_number)


def fresh(path):
    spec = importlib.util.spec_from_file_location("autostep_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module._log = lambda message: module.said.append(message)
    module.said = []
    module._tracer = CountingTracer()
    return module


def feed(a, tokens):
    """The step count after each token."""
    counts = []
    for token in tokens:
        a._on_token(token)
        counts.append(a._tracer.steps_done)
    return counts


def test_one_collective_per_iteration(path):
    a = fresh(path)
    counts = feed(a, [BARRIER] * 10)
    # Learned once 4 tokens are one cycle repeated 3 times; then a step at each barrier.
    assert counts == [0, 0, 0, 0, 1, 2, 3, 4, 5, 6], counts
    assert a.mode() == a.LEARNED and "repeating sequence" in a.note(), a.note()


def test_cycle_starts_at_the_data_loader_item(path):
    a = fresh(path)
    cycle = [ALL_REDUCE, NEXT, BARRIER]
    feed(a, cycle * 3)
    assert a._cycle == [NEXT, BARRIER, ALL_REDUCE], a._cycle
    before = a._tracer.steps_done
    feed(a, [ALL_REDUCE])
    assert a._tracer.steps_done == before, "a step began at the collective, not at the data-loader item"
    feed(a, [NEXT])
    assert a._tracer.steps_done == before + 1


def test_a_broken_cycle_is_learned_again(path):
    a = fresh(path)
    feed(a, [NEXT, BARRIER] * 4)
    steps = a._tracer.steps_done
    # An evaluation between epochs: other collectives, then a new steady pattern.
    feed(a, [ALL_REDUCE] * 20)
    assert a._cycle == [ALL_REDUCE], a._cycle
    assert a._tracer.steps_done > steps


def test_no_repetition_no_step(path):
    a = fresh(path)
    counts = feed(a, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])
    assert counts[-1] == 0 and a.mode() is None, counts


def optimizer_1x():
    """torch 1.x's shape: each optimizer class's step ends in _optimizer_step_code()."""
    class Optimizer:
        def _optimizer_step_code(self):
            pass

        def step(self):
            self._optimizer_step_code()

    optim = types.ModuleType("torch.optim.optimizer")
    optim.Optimizer = Optimizer
    return optim


def optimizer_2x():
    hooks = []

    class Optimizer:
        def step(self):
            for hook in hooks:
                hook(self, (), {})

    optim = types.ModuleType("torch.optim.optimizer")
    optim.Optimizer = Optimizer
    optim.register_optimizer_step_post_hook = hooks.append
    return optim


def install(a, optim):
    torch = types.ModuleType("torch")
    torch.optim = types.ModuleType("torch.optim")
    sys.modules.update({"torch": torch, "torch.optim": torch.optim, "torch.optim.optimizer": optim})
    try:
        assert a._install_optimizer_hook(torch)
    finally:
        for name in ("torch", "torch.optim", "torch.optim.optimizer"):
            sys.modules.pop(name, None)


def test_optimizer_hooks_both_torch_versions(path):
    for make in (optimizer_1x, optimizer_2x):
        a = fresh(path)
        optim = make()
        install(a, optim)
        opt = optim.Optimizer()
        for _ in range(5):
            opt.step()
        assert a._tracer.steps_done == 5 and a.mode() == a.OPTIMIZER, (make.__name__, a._tracer.steps_done)
        assert a.note() == "found from optimizer.step (perftracker run)", a.note()


def test_two_optimizers_one_step_per_iteration(path):
    a = fresh(path)
    optim = optimizer_1x()
    install(a, optim)
    first, second = optim.Optimizer(), optim.Optimizer()
    for _ in range(6):
        first.step()
        second.step()
    # The first iteration's step ends at the first optimizer (the cycle is not known yet),
    # every later one after the second: 6 steps for 6 iterations.
    assert a._tracer.steps_done == 6, a._tracer.steps_done
    assert a._anchor == id(second)


def test_gradient_accumulation_counts_optimizer_steps_only(path):
    a = fresh(path)
    optim = optimizer_1x()
    install(a, optim)
    opt = optim.Optimizer()
    for _ in range(3):
        feed(a, [NEXT] * 4)  # four micro-batches, then the optimizer
        opt.step()
    # The 4th item of the first iteration makes a period-1 cycle (learned, its first step
    # to begin at the next item), but the first optimizer.step comes first: from then on
    # only optimizer steps count.
    assert a.mode() == a.OPTIMIZER and a._tracer.steps_done == 3, (a.mode(), a._tracer.steps_done)
    feed(a, [NEXT] * 8)
    assert a._tracer.steps_done == 3, "data-loader items still make steps after the optimizer took over"


def test_explicit_step_is_not_counted_twice(path):
    a = fresh(path)
    optim = optimizer_1x()
    install(a, optim)
    opt = optim.Optimizer()
    opt.step()
    a._tracer.step()  # the script's own step()
    for _ in range(5):
        opt.step()
        a._tracer.step()
    # The script's steps count from where autostep stood down (its first one there was
    # followed by optimizer steps of ours): 5 of them, numbered as explicit steps.
    assert a.mode() == a.EXPLICIT and a._tracer.steps_done == 5, (a.mode(), a._tracer.steps_done)
    assert a._tracer._step_number == 4 * SPAN + 5, a._tracer._step_number
    b = fresh(path)
    b.user_tracer_created()  # PerfTracker() in the script: nothing counted by autostep at all
    install(b, optimizer_1x())
    feed(b, [BARRIER] * 10)
    assert b.mode() == b.EXPLICIT and b._tracer.steps_done == 0


def test_the_end_of_an_epoch_is_no_token(path):
    """An epoch's last next() raises StopIteration: were it a token, a cycle of (item,
    barrier) would see (item, item) at each epoch's end, and a step with no work in it."""
    a = fresh(path)
    a._cycle = None

    class _BaseDataLoaderIter:
        def __init__(self, n):
            self.left = n

        def __next__(self):
            if not self.left:
                raise StopIteration
            self.left -= 1
            return self.left

    dataloader = types.ModuleType("torch.utils.data.dataloader")
    dataloader._BaseDataLoaderIter = _BaseDataLoaderIter
    torch = types.SimpleNamespace(utils=types.SimpleNamespace(data=types.SimpleNamespace(dataloader=dataloader)))
    package, collectives = types.ModuleType("perftracker"), types.ModuleType("perftracker.collectives")
    package.collectives = collectives
    sys.modules.update({"perftracker": package, "perftracker.collectives": collectives})
    try:
        a._install_sequence_hooks(torch)
        assert collectives.observer == a._on_token
    finally:
        sys.modules.pop("perftracker", None)
        sys.modules.pop("perftracker.collectives", None)
    for _ in range(3):  # three epochs of 4 items, each item followed by a barrier
        iterator = _BaseDataLoaderIter(4)
        while True:
            try:
                next(iterator)
            except StopIteration:
                break
            a._on_token(BARRIER)
    assert a._cycle == [NEXT, BARRIER] and a._misses == 0, (a._cycle, a._misses)
    assert a._tracer.steps_done == 12 - 3, a._tracer.steps_done  # a step per item once learned


def test_better_sources_replace_worse_ones(path):
    a = fresh(path)
    a._become(a.CLOCK)
    feed(a, [BARRIER] * 5)
    assert a.mode() == a.LEARNED
    optim = optimizer_1x()
    install(a, optim)
    optim.Optimizer().step()
    assert a.mode() == a.OPTIMIZER
    assert not a._become(a.LEARNED) and not a._become(a.CLOCK) and a.mode() == a.OPTIMIZER


class Clock:
    """time.time() as the test sets it, for autostep's wall-clock steps."""

    def __init__(self, now):
        self.now = now

    def time(self):
        return self.now


def on_clock(a, clock, now):
    clock.now = now
    a.time = types.SimpleNamespace(time=clock.time, monotonic=clock.time, sleep=lambda s: None)
    a._on_clock(None, None)


def test_ranks_that_switch_at_their_own_moments_number_steps_alike(path):
    """Rank 0 started 3 s before rank 3: its clock made 3 steps more before both learned
    the barrier's cycle at the same barrier. Every step after that has one number on both
    (a count carried over from the clock would keep them 3 apart)."""
    ranks = [fresh(path), fresh(path)]
    for a, started in zip(ranks, (1000.0, 1003.0)):
        a._become(a.CLOCK)
        clock = Clock(started)
        for second in range(int(started), 1006):
            on_clock(a, clock, second + 0.01)
    assert ranks[0]._tracer.steps_done == 1005 and ranks[1]._tracer.steps_done == 1005, \
        "clock steps are numbered by the wall clock's period, not counted"
    assert ranks[0]._tracer._step_number == ranks[1]._tracer._step_number
    numbers = [[], []]
    for _ in range(10):
        for a, seen in zip(ranks, numbers):
            a._on_token(BARRIER)
            seen.append(a._tracer._step_number)
    assert numbers[0] == numbers[1], numbers
    assert numbers[0][-1] == 2 * SPAN + 6, "learned steps count from the first cycle: %d" % numbers[0][-1]
    assert all(a.mode() == a.LEARNED for a in ranks)


def test_one_clock_step_per_period(path):
    """A handler that runs late (the main thread was in a long C call) steps once, with
    the period it runs in; a second one in the same period makes no step."""
    a = fresh(path)
    a._become(a.CLOCK)
    clock = Clock(0)
    a._clock_seconds = lambda: 0.5
    for now, want in ((100.01, 200), (100.3, 200), (101.7, 203), (101.99, 203), (102.0, 204),
                      (101.9, 204), (101.4, 205)):  # the wall clock set back: a period, then more
        on_clock(a, clock, now)
        assert a._tracer._step_number == 1 * SPAN + want, (now, a._tracer._step_number, want)


def test_the_scripts_own_steps_count_from_zero_after_autosteps(path):
    """PerfTracker() made by the script once autostep had made clock steps (rank by rank,
    a different number of them): the script's steps are counted from 0 on every rank."""
    a = fresh(path)
    a._become(a.CLOCK)
    on_clock(a, Clock(0), 1234.5)
    a.user_tracer_created()
    a._tracer.step()
    assert a._tracer._step_number == 4 * SPAN + 1, a._tracer._step_number
    b = fresh(path)  # no step before the script's PerfTracker: its steps so far are kept
    b._tracer.step()
    b.user_tracer_created()
    assert b._tracer._step_number == 4 * SPAN + 1, b._tracer._step_number


def main():
    path = sys.argv[1]
    tests = [(name, fn) for name, fn in sorted(globals().items()) if name.startswith("test_")]
    for name, fn in tests:
        fn(path)
        print("ok   %s" % name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
