"""Readers that turn profiler artifacts into the records in ``profiler_core.records``."""

from profiler_core.ingest.inductor import read_inductor
from profiler_core.ingest.kineto import read_kineto
from profiler_core.ingest.ncu import read_ncu, read_ncu_columns
from profiler_core.ingest.nsys import read_nsys, read_nsys_columns

__all__ = ["read_inductor", "read_kineto", "read_ncu", "read_ncu_columns", "read_nsys", "read_nsys_columns"]
