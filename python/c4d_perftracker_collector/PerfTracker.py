"""``from c4d_perftracker_collector.PerfTracker import PerfTracker``: perftracker's collector
under the name the vendor's training scripts import."""
from perftracker.tracer import PerfTracker

__all__ = ["PerfTracker"]
