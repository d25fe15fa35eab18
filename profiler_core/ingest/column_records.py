"""Frozen records from the columnar tables of ``profiler_core.record_columns``.

Each column becomes one Python list (``tolist`` on a null-free column, ``to_pylist`` where
nulls stand for None; a dictionary column looks its codes up in its distinct values), and
the records are built from the lists in one ``map`` over the fast slot constructors of
``record_factory``::

    kernels.name  dictionary ["gemm", "relu"], codes [0, 1, 0]  -> ["gemm", "relu", "gemm"]
    kernels.grid_x/_y/_z  [8, 512, 8] / [4, 1, 4] / [4, 1, 4]    -> [(8, 4, 4), (512, 1, 1), (8, 4, 4)]
    -> [TimelineKernel(name="gemm", grid=(8, 4, 4), ...), ...]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiler_core.ingest.arrow_columns import dense_indices, one_chunk, to_numpy
from profiler_core.ingest.record_factory import record_factory
from profiler_core.record_columns import NcuColumns
from profiler_core.records import CounterRow, Dim3, NcuReport, NvtxRange, RuntimeCall, TimelineKernel

if TYPE_CHECKING:
    import pyarrow as pa

_KERNEL_FIELDS = (
    "name", "start_ns", "end_ns", "stream", "device", "kind", "short_name", "correlation_id", "grid", "block",
    "registers_per_thread", "static_smem_bytes", "dynamic_smem_bytes", "graph_id", "graph_node_id",
    "bytes_moved", "smem_bytes",
)
_RUNTIME_FIELDS = ("name", "start_ns", "end_ns", "tid", "correlation_id")
_NVTX_FIELDS = ("text", "start_ns", "end_ns", "tid", "domain")
_make_kernel = record_factory(TimelineKernel, _KERNEL_FIELDS)
_make_call = record_factory(RuntimeCall, _RUNTIME_FIELDS)
_make_range = record_factory(NvtxRange, _NVTX_FIELDS)


def python_values(column: pa.ChunkedArray | pa.Array) -> list[Any]:
    """The values of ``column`` as a list of Python objects, None for null."""
    import numpy as np
    import pyarrow as pa

    array = one_chunk(column) if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(array.type):
        distinct = np.empty(len(array.dictionary) + 1, dtype=object)
        values = array.dictionary.to_pylist()
        if pa.types.is_list(array.dictionary.type):  # NVTX stacks: one tuple per distinct stack
            values = [tuple(v) for v in values]
        for k, value in enumerate(values):  # (a slice assignment would unpack the tuples)
            distinct[k] = value
        distinct[-1] = None
        return distinct[dense_indices(array.indices, len(array.dictionary))].tolist()  # type: ignore[no-any-return]
    if array.null_count == 0 and (pa.types.is_integer(array.type) or pa.types.is_floating(array.type)):
        return to_numpy(array).tolist()  # type: ignore[no-any-return]
    return array.to_pylist()  # type: ignore[no-any-return]


def dims(table: pa.Table, prefix: str) -> list[Dim3 | None]:
    """``(x, y, z)`` per row from the ``{prefix}_x/_y/_z`` columns; None where ``x`` is null."""
    xs, ys, zs = (python_values(table.column(f"{prefix}_{axis}")) for axis in "xyz")
    if table.column(f"{prefix}_x").null_count == 0:
        return list(zip(xs, ys, zs, strict=True))
    return [None if x is None else (x, y, z) for x, y, z in zip(xs, ys, zs, strict=True)]


def timeline_records(kernels: pa.Table) -> list[TimelineKernel]:
    """``TimelineKernel`` per row of an ``NsysColumns.kernels`` table."""
    values = {name: python_values(kernels.column(name)) for name in _KERNEL_FIELDS if name not in ("grid", "block")}
    values["grid"], values["block"] = dims(kernels, "grid"), dims(kernels, "block")
    return list(map(_make_kernel, *(values[name] for name in _KERNEL_FIELDS)))


def runtime_records(calls: pa.Table) -> list[RuntimeCall]:
    """``RuntimeCall`` per row of an ``NsysColumns.runtime_calls`` table."""
    return list(map(_make_call, *(python_values(calls.column(name)) for name in _RUNTIME_FIELDS)))


def nvtx_records(ranges: pa.Table) -> list[NvtxRange]:
    """``NvtxRange`` per row of an ``NsysColumns.nvtx_ranges`` table."""
    return list(map(_make_range, *(python_values(ranges.column(name)) for name in _NVTX_FIELDS)))


def counter_records(launches: pa.Table, metrics: pa.Table) -> list[CounterRow]:
    """``CounterRow`` per row of ``NcuColumns.launches``, its metrics dict from the same row of ``metrics``."""
    names = metrics.column_names
    columns = [python_values(metrics.column(name)) for name in names]
    per_row = [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)] if names else \
        [{} for _ in range(launches.num_rows)]
    stacks = python_values(launches.column("nvtx_stack"))
    return list(map(
        CounterRow,
        python_values(launches.column("ncu_id")),
        python_values(launches.column("name")),
        dims(launches, "grid"),
        dims(launches, "block"),
        python_values(launches.column("stream")),
        python_values(launches.column("device")),
        per_row,
        stacks,
        python_values(launches.column("process_id")),
        python_values(launches.column("context")),
    ))


def counter_columns(report: NcuReport) -> NcuColumns:
    """``NcuColumns`` of a report read as rows (the details page, ``.ncu-rep``); small inputs only."""
    import pyarrow as pa

    rows = report.rows
    names = list(dict.fromkeys(name for row in rows for name in row.metrics))
    stacks: dict[tuple[str, ...], int] = {}

    def dim(attr: str, axis: int) -> pa.Array:
        return pa.array([None if getattr(r, attr) is None else getattr(r, attr)[axis] for r in rows], pa.int64())

    launches = pa.table({
        "ncu_id": pa.array([r.ncu_id for r in rows], pa.int64()),
        "name": pa.array([r.name for r in rows], pa.string()).dictionary_encode(),
        **{f"{prefix}_{axis}": dim(prefix, k) for prefix in ("grid", "block") for k, axis in enumerate("xyz")},
        "stream": pa.array([r.stream for r in rows], pa.int64()),
        "device": pa.array([r.device for r in rows], pa.int64()),
        "nvtx_stack": pa.DictionaryArray.from_arrays(
            pa.array([stacks.setdefault(r.nvtx_stack, len(stacks)) for r in rows], pa.int32()),
            pa.array([list(s) for s in list(stacks)], pa.list_(pa.string()))),
        "process_id": pa.array([r.process_id for r in rows], pa.int64()),
        "context": pa.array([r.context for r in rows], pa.int64()),
    })
    metrics = pa.table({n: pa.array([r.metrics.get(n) for r in rows], pa.float64()) for n in names})
    return NcuColumns(path=report.path, launches=launches, metrics=metrics,
                      metrics_returned=report.metrics_returned, source=report.source, units=report.units)
