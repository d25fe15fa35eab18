"""Columnar twins of the reader records: one Arrow table per kind of record, one column per field.

A 1M-kernel capture read into frozen records is millions of Python objects; read into columns
it is a few arrays. The nsys and ncu readers build these tables first and the record lists
(``NsysTimeline``, ``NcuReport``) from them, so a consumer that can take columns skips the
objects altogether::

    NsysColumns.kernels                 (pyarrow.Table, sorted by start_ns)
      name: dictionary<int32, string>   "triton_per_fused_native_layer_norm_0", ...  (one entry per distinct name)
      start_ns, end_ns: int64           14459713, 14461473, ...
      grid_x, grid_y, grid_z: int64     512, 1, 1  (null where the export has no grid)
    -> read_nsys(path).kernels[0] == TimelineKernel(name=..., start_ns=14459713, grid=(512, 1, 1), ...)

Column names are the record's field names; a ``Dim3`` field is three columns (``grid_x`` ..
``grid_z``). Strings are dictionary-encoded (each distinct text once, normalised once); nulls
are the records' ``None``. Every table is one chunk per column, so ``column(i).chunk(0)``
or ``to_numpy()`` reach the values without a copy. pyarrow is imported only by the readers
that build these tables, never by importing this module; the records are built from them in
``ingest/column_records.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

KERNEL_COLUMNS = (
    "name", "start_ns", "end_ns", "stream", "device", "kind", "short_name", "correlation_id",
    "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread",
    "static_smem_bytes", "dynamic_smem_bytes", "graph_id", "graph_node_id", "bytes_moved", "smem_bytes",
)
RUNTIME_COLUMNS = ("name", "start_ns", "end_ns", "tid", "correlation_id")
NVTX_COLUMNS = ("text", "start_ns", "end_ns", "tid", "domain")
COUNTER_ID_COLUMNS = (
    "ncu_id", "name", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
    "stream", "device", "nvtx_stack", "process_id", "context",
)


@dataclass(frozen=True)
class NsysColumns:
    """An Nsight Systems export as three tables (see the module docstring for their columns)."""

    path: Path
    kernels: pa.Table  # KERNEL_COLUMNS; kernels, memcpys and memsets, sorted by start (stable)
    runtime_calls: pa.Table  # RUNTIME_COLUMNS, sorted by start
    nvtx_ranges: pa.Table  # NVTX_COLUMNS, sorted by start
    gpus: list[Mapping[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class NcuColumns:
    """The launches of an Nsight Compute export: identity columns and one float64 column per metric.

    ``launches`` has COUNTER_ID_COLUMNS (``nvtx_stack`` a list<string> column, empty where ncu
    recorded none); ``metrics`` has one column per metric that came back numeric, in base units,
    null where ncu printed ``n/a`` or nothing; both in ``ncu_id`` order, row for row.
    """

    path: Path
    launches: pa.Table
    metrics: pa.Table
    metrics_returned: frozenset[str]
    source: str  # "csv" | "ncu-rep"
    units: Mapping[str, str] = field(default_factory=dict)
