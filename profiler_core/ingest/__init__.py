"""Readers that turn profiler artifacts into the records in ``profiler_core.records``.

Each reader loads its module when first asked for: reading a profile's Parquet tables uses this
package's Arrow helpers (``arrow_columns``) and should not import every reader with them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiler_core.lazy_exports import lazy_exports

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


__getattr__ = lazy_exports(__name__, _MODULE_OF)
