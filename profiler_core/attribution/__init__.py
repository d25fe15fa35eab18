"""The attribution engine: timeline x counters x PyTorch records -> profile.json.

The names below load their module when first asked for: reading or analysing a profile imports
this package's table modules, and should not import the engine with them (0.3 s).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
