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

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

T = TypeVar("T")

KERNEL_COLUMNS = (
    "name", "start_ns", "end_ns", "stream", "device", "kind", "short_name", "correlation_id",
    "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread",
    "static_smem_bytes", "dynamic_smem_bytes", "graph_id", "graph_node_id", "bytes_moved", "smem_bytes",
)
RUNTIME_COLUMNS = ("name", "start_ns", "end_ns", "tid", "correlation_id")
# A Kineto trace's tables (``ingest/kineto_tables.py``): its kernels and runtime calls also name their
# launching op (``external_id``); a cpu op's ``input_shapes`` is the JSON text of its nested shape
# lists, ``input_types`` a list<string>
KINETO_KERNEL_COLUMNS = (*KERNEL_COLUMNS, "external_id")
KINETO_RUNTIME_COLUMNS = (*RUNTIME_COLUMNS, "external_id")
CPU_OP_COLUMNS = (
    "name", "start_ns", "end_ns", "tid", "external_id", "sequence_number", "input_shapes", "input_types",
    "category", "fwd_thread_id",
)
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


class TableRecords(Sequence[T]):
    """The records of one Arrow table, built the first time a caller asks for one.

    The nsys and ncu readers hand these to their callers as the record lists of ``NsysTimeline``
    and ``NcuReport``: a caller that reads records gets them (indexing, iteration, ``==`` and
    ``+`` work as on the list, which is built once, whole); the attribution engine reads the
    columns instead (``column``; ``attribution.columns``) and never builds them::

        kernels = read_nsys("run.sqlite").kernels   # TableRecords over NsysColumns.kernels
        kernels.column("start_ns")                  # what the engine reads: no record is built
        kernels[0]                                  # TimelineKernel(...): the list is built here

    ``build`` turns a table into its records (a function of ``ingest/column_records.py``, so a
    pickled copy carries no closure). ``take`` keeps the rows at some positions: each column is
    taken when it is read, so the columns nobody reads are never copied. ``of_table`` works
    something out once for the whole table, shared by every take of it.
    """

    __slots__ = ("_build", "_memo", "_positions", "_records", "_table", "_taken")

    def __init__(self, table: pa.Table, build: Callable[[pa.Table], list[T]],
                 positions: np.ndarray | None = None, memo: dict[str, Any] | None = None) -> None:
        self._table = table
        self._build = build
        self._positions = positions  # rows of ``table``, in order (None: all of them)
        self._records: list[T] | None = None
        self._taken: dict[str, Any] = {}
        self._memo = {} if memo is None else memo  # of_table's results, shared with every take

    def of_table(self, key: str, compute: Callable[[pa.Table], Any]) -> tuple[Any, np.ndarray | None]:
        """``compute(table)`` of the whole table beneath these rows, worked out once for it and every
        take of it (``key`` names what it computes), and these rows' positions in it (None: all)."""
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = compute(self._table)
        return hit, self._positions

    @property
    def column_names(self) -> list[str]:
        return list(self._table.column_names)

    def column(self, name: str) -> pa.Array:
        """Column ``name`` of these rows, as one array."""
        hit = self._taken.get(name)
        if hit is None:
            import numpy as np
            import pyarrow as pa

            chunks = self._table.column(name)
            hit = (chunks.chunk(0) if chunks.num_chunks == 1 else
                   chunks.combine_chunks() if chunks.num_chunks else pa.nulls(0, chunks.type))
            if self._positions is not None:  # (pa.array of numpy would import pandas)
                rows = np.ascontiguousarray(self._positions, dtype=np.int64)
                hit = hit.take(pa.Array.from_buffers(pa.int64(), len(rows), [None, pa.py_buffer(rows)]))
            self._taken[name] = hit
        return hit

    @property
    def table(self) -> pa.Table:
        """These rows as one table."""
        if self._positions is None:
            return self._table
        import pyarrow as pa

        return pa.Table.from_arrays([self.column(n) for n in self.column_names], schema=self._table.schema)

    @property
    def records(self) -> list[T]:
        """The records, built on first use."""
        if self._records is None:
            self._records = self._build(self.table)
        return self._records

    def take(self, positions: np.ndarray) -> TableRecords[T]:
        """The rows at ``positions`` (integer array), in that order."""
        import numpy as np

        positions = np.asarray(positions, dtype=np.int64)
        if len(positions) == len(self) and (positions == np.arange(len(positions))).all():
            return self
        rows = positions if self._positions is None else self._positions[positions]
        taken = TableRecords(self._table, self._build, rows, self._memo)
        if self._records is not None:
            taken._records = [self._records[i] for i in positions.tolist()]
        return taken

    def __len__(self) -> int:
        return int(self._table.num_rows if self._positions is None else len(self._positions))

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> list[T]: ...
    def __getitem__(self, i: int | slice) -> T | list[T]:
        return self.records[i]

    def __iter__(self) -> Iterator[T]:
        return iter(self.records)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TableRecords):
            return self.records == other.records
        if isinstance(other, list):
            return self.records == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # compared as the list is

    def __add__(self, other: Sequence[T]) -> list[T]:
        return self.records + list(other)

    def __radd__(self, other: Sequence[T]) -> list[T]:
        return list(other) + self.records

    def __repr__(self) -> str:
        return f"TableRecords({len(self)} rows: {', '.join(self.column_names)})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (TableRecords, (self._table, self._build, self._positions))
