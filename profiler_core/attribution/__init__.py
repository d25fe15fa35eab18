"""The attribution engine: timeline x counters x PyTorch records -> profile.json."""

from profiler_core.attribution.engine import attribute
from profiler_core.attribution.names import kernel_join_key, normalize_kernel_name
from profiler_core.attribution.sources import attribute_files, attribute_run

__all__ = [
    "attribute",
    "attribute_files",
    "attribute_run",
    "kernel_join_key",
    "normalize_kernel_name",
]
