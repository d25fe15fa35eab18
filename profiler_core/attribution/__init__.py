"""The attribution engine: timeline x counters x PyTorch records -> profile.json."""

from profiler_core.attribution.engine import attribute
from profiler_core.attribution.names import kernel_join_key, normalize_kernel_name
from profiler_core.attribution.sources import attribute_files, attribute_run, find_run_artifacts

__all__ = [
    "attribute",
    "attribute_files",
    "attribute_run",
    "find_run_artifacts",
    "kernel_join_key",
    "normalize_kernel_name",
]
