"""The closed loop: diagnose, transform, validate, re-measure, compare (``oprof optimize``)."""

from profiler_core.optimize.loop import OptimizeConfig, OptimizeResult, Trial, candidate_passes, optimize

__all__ = ["OptimizeConfig", "OptimizeResult", "Trial", "candidate_passes", "optimize"]
