"""perftracker: online performance troubleshooting for PyTorch training.

Mark each training step and the collector does the rest::

    from perftracker import PerfTracker
    tracer = PerfTracker()
    for batch in loader:
        ...
        tracer.step()

Profiling windows are started by the control plane (``perftracker --trigger-on``), by
``PerfTracker(wait=5, steps=2, output_dir=...)``, or by PERFTRACKER_WAIT /
PERFTRACKER_STEPS / PERFTRACKER_OUTPUT_DIR. See docs/collector.md.
"""
from perftracker.tracer import PerfTracker, collector_stats, wait_idle

__all__ = ["PerfTracker", "collector_stats", "wait_idle"]
