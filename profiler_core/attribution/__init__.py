"""The attribution engine: timeline x counters x PyTorch records -> profile.json.

The names below load their module when first asked for: reading or analysing a profile imports
this package's table modules, and should not import the engine with them (0.3 s).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiler_core.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from profiler_core.attribution.engine import attribute
    from profiler_core.attribution.names import kernel_join_key, normalize_kernel_name
    from profiler_core.attribution.sources import attribute_files, attribute_run

_MODULE_OF = {
    "attribute": "engine",
    "attribute_files": "sources",
    "attribute_run": "sources",
    "kernel_join_key": "names",
    "normalize_kernel_name": "names",
}

__all__ = [
    "attribute",
    "attribute_files",
    "attribute_run",
    "kernel_join_key",
    "normalize_kernel_name",
]


__getattr__ = lazy_exports(__name__, _MODULE_OF)
