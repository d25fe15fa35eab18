"""Readers that turn profiler artifacts into the records in ``profiler_core.records``."""

from profiler_core.ingest.inductor import read_inductor
from profiler_core.ingest.ncu import read_ncu

__all__ = ["read_inductor", "read_ncu"]
