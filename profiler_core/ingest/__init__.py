"""Readers that turn profiler artifacts into the records in ``profiler_core.records``.

Each reader loads its module when first asked for: reading a profile's Parquet tables uses this
package's Arrow helpers (``arrow_columns``) and should not import every reader with them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from profiler_core.ingest.inductor import read_inductor
    from profiler_core.ingest.kineto import read_kineto
    from profiler_core.ingest.ncu import read_ncu, read_ncu_columns
    from profiler_core.ingest.nsys import read_nsys, read_nsys_columns

_MODULE_OF = {
    "read_inductor": "inductor",
    "read_kineto": "kineto",
    "read_ncu": "ncu",
    "read_ncu_columns": "ncu",
    "read_nsys": "nsys",
    "read_nsys_columns": "nsys",
}

__all__ = ["read_inductor", "read_kineto", "read_ncu", "read_ncu_columns", "read_nsys", "read_nsys_columns"]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
