"""The vendor's import path, kept working:
``from c4d_perftracker_collector.PerfTracker import PerfTracker``."""
from perftracker.tracer import PerfTracker

__all__ = ["PerfTracker"]
