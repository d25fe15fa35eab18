"""Frozen records from the columnar tables of ``profiler_core.record_columns``.

Each column becomes one Python list (``tolist`` on a null-free column, ``to_pylist`` where
nulls stand for None; a dictionary column looks its codes up in its distinct values), and
the records are built from the lists in one ``map`` over the fast slot constructors of
``record_factory``::

    kernels.name  dictionary ["gemm", "relu"], codes [0, 1, 0]  -> ["gemm", "relu", "gemm"]
    kernels.grid_x/_y/_z  [8, 512, 8] / [4, 1, 4] / [4, 1, 4]    -> [(8, 4, 4), (512, 1, 1), (8, 4, 4)]
    -> [TimelineKernel(name="gemm", grid=(8, 4, 4), ...), ...]

The nsys, ncu and Kineto readers hand these builders to ``record_columns.TableRecords``, which calls
one when a caller first reads a record; the attribution engine reads the tables and calls none.
A column a table does not have (an nsys kernel has no ``external_id``) leaves its field at the
record's default.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from profiler_core.gc_pause import gc_paused
from profiler_core.ingest.arrow_columns import dense_indices, one_chunk, to_numpy
from profiler_core.ingest.record_factory import record_factory
from profiler_core.record_columns import CPU_OP_COLUMNS, NcuColumns, TableRecords
from profiler_core.records import CounterRow, CpuOp, Dim3, NcuReport, NvtxRange, RuntimeCall, TimelineKernel

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

_KERNEL_FIELDS = (
    "name", "start_ns", "end_ns", "stream", "device", "kind", "short_name", "correlation_id", "grid", "block",
    "registers_per_thread", "static_smem_bytes", "dynamic_smem_bytes", "graph_id", "graph_node_id",
    "bytes_moved", "smem_bytes",
)
_RUNTIME_FIELDS = ("name", "start_ns", "end_ns", "tid", "correlation_id")
_EXTERNAL = ("external_id",)  # Kineto's kernels and runtime calls also carry the launching op's id
_NVTX_FIELDS = ("text", "start_ns", "end_ns", "tid", "domain")
_SLICE_ROWS = 1 << 16  # rows converted at a time: their per-column lists are all that is held besides
T = TypeVar("T")
_Values = Callable[["pa.Table", str], list[Any]]
_make_kernel = record_factory(TimelineKernel, _KERNEL_FIELDS)
_make_kernel_ext = record_factory(TimelineKernel, _KERNEL_FIELDS + _EXTERNAL)
_make_call = record_factory(RuntimeCall, _RUNTIME_FIELDS)
_make_call_ext = record_factory(RuntimeCall, _RUNTIME_FIELDS + _EXTERNAL)
_make_cpu_op = record_factory(CpuOp, CPU_OP_COLUMNS)
_make_range = record_factory(NvtxRange, _NVTX_FIELDS)


def python_values(column: pa.ChunkedArray | pa.Array, distinct: np.ndarray | None = None) -> list[Any]:
    """The values of ``column`` as a list of Python objects, None for null.

    ``distinct``: ``distinct_values`` of a dictionary column, when the caller converts it in slices.
    """
    import pyarrow as pa

    array = one_chunk(column) if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(array.type):
        if distinct is None:
            distinct = distinct_values(array)
        return distinct[dense_indices(array.indices, len(distinct) - 1)].tolist()  # type: ignore[no-any-return]
    if array.null_count == 0 and (pa.types.is_integer(array.type) or pa.types.is_floating(array.type)):
        return to_numpy(array).tolist()  # type: ignore[no-any-return]
    return array.to_pylist()  # type: ignore[no-any-return]


def distinct_values(array: pa.Array) -> np.ndarray:
    """The dictionary of a dictionary array as a numpy object array, None appended (for null)."""
    import numpy as np
    import pyarrow as pa

    values = array.dictionary.to_pylist()
    if pa.types.is_list(array.dictionary.type):  # NVTX stacks: one tuple per distinct stack
        values = [tuple(v) for v in values]
    distinct = np.empty(len(values) + 1, dtype=object)
    for k, value in enumerate(values):  # (a slice assignment would unpack the tuples)
        distinct[k] = value
    return distinct


def dims(table: pa.Table, prefix: str) -> list[Dim3 | None]:
    """``(x, y, z)`` per row from the ``{prefix}_x/_y/_z`` columns; None where ``x`` is null.

    Equal dimensions share one tuple (a capture launches a few hundred distinct shapes).
    """
    xs, ys, zs = (python_values(table.column(f"{prefix}_{axis}")) for axis in "xyz")
    shared: dict[Dim3, Dim3] = {}
    if table.column(f"{prefix}_x").null_count == 0:
        return [shared.setdefault(d, d) for d in zip(xs, ys, zs, strict=True)]
    return [None if d[0] is None else shared.setdefault(d, d) for d in zip(xs, ys, zs, strict=True)]


def timeline_records(kernels: pa.Table) -> list[TimelineKernel]:
    """``TimelineKernel`` per row of an ``NsysColumns.kernels`` table."""
    return _in_slices(kernels, _timeline_slice)


def runtime_records(calls: pa.Table) -> list[RuntimeCall]:
    """``RuntimeCall`` per row of an ``NsysColumns.runtime_calls`` table (or a Kineto one, which has
    ``external_id`` too)."""
    fields, make = ((_RUNTIME_FIELDS + _EXTERNAL, _make_call_ext) if "external_id" in calls.column_names
                    else (_RUNTIME_FIELDS, _make_call))
    return _in_slices(calls, lambda part, values: list(map(make, *(values(part, n) for n in fields))))


def cpu_op_records(ops: pa.Table) -> list[CpuOp]:
    """``CpuOp`` per row of a Kineto cpu op table (``record_columns.CPU_OP_COLUMNS``); each distinct
    ``input_shapes`` JSON text becomes its nested tuples once."""
    from profiler_core.ingest.kineto_events import shapes_from_text

    return _in_slices(ops, lambda part, values: list(map(_make_cpu_op, *(values(part, n) for n in CPU_OP_COLUMNS))),
                      decode={"input_shapes": shapes_from_text})


def nvtx_records(ranges: pa.Table) -> list[NvtxRange]:
    """``NvtxRange`` per row of an ``NsysColumns.nvtx_ranges`` table."""
    return _in_slices(ranges, lambda part, values: list(map(_make_range, *(values(part, n) for n in _NVTX_FIELDS))))


METRICS = "\0metrics"  # the struct column of a counter table: one field per metric, in the export's order


def counter_table(launches: pa.Table, metrics: pa.Table) -> pa.Table:
    """``launches`` with ``metrics`` as one struct column (:data:`METRICS`, left out when there is no
    metric): one table whose rows keep a launch and its counters together when taken or sliced."""
    return launches.append_column(METRICS, pa_struct(metrics)) if metrics.column_names else launches


def counter_table_records(table: pa.Table) -> list[CounterRow]:
    """``CounterRow`` per row of a :func:`counter_table`."""
    names = [f.name for f in table.schema.field(METRICS).type] if METRICS in table.column_names else []
    return _in_slices(table, lambda part, values: _counter_slice(part, values, names))


def _in_slices(table: pa.Table, build: Callable[[pa.Table, _Values], list[T]],
               decode: dict[str, Callable[[Any], Any]] | None = None) -> list[T]:
    """``build`` over consecutive slices of ``table``: the per-column lists of one slice at a time.

    A dictionary column's distinct values become Python objects once, not once per slice
    (``decode``: per column, what turns each distinct value into the record's).
    """
    import pyarrow as pa

    distinct = {name: distinct_values(one_chunk(table.column(name))) for name in table.column_names
                if pa.types.is_dictionary(table.schema.field(name).type)}
    for name, convert in (decode or {}).items():
        if name in distinct:
            values_of = distinct[name]
            for k in range(len(values_of) - 1):  # the last entry is null's None
                values_of[k] = convert(values_of[k])

    def values(part: pa.Table, name: str) -> list[Any]:
        return python_values(part.column(name), distinct.get(name))

    records: list[T] = []
    with gc_paused():  # millions of acyclic records: the cyclic collector only costs time here
        for start in range(0, table.num_rows, _SLICE_ROWS):
            records += build(table.slice(start, _SLICE_ROWS), values)
    return records


def _timeline_slice(kernels: pa.Table, values: _Values) -> list[TimelineKernel]:
    names, make = ((_KERNEL_FIELDS + _EXTERNAL, _make_kernel_ext) if "external_id" in kernels.column_names
                   else (_KERNEL_FIELDS, _make_kernel))
    fields = {name: values(kernels, name) for name in names if name not in ("grid", "block")}
    fields["grid"], fields["block"] = dims(kernels, "grid"), dims(kernels, "block")
    return list(map(make, *(fields[name] for name in names)))


def _counter_slice(launches: pa.Table, values: _Values, names: list[str]) -> list[CounterRow]:
    if names:
        packed = one_chunk(launches.column(METRICS))
        columns = [python_values(field) for field in packed.flatten()]
        per_row = [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]
    else:
        per_row = [{} for _ in range(launches.num_rows)]
    return list(map(
        CounterRow,
        values(launches, "ncu_id"),
        values(launches, "name"),
        dims(launches, "grid"),
        dims(launches, "block"),
        values(launches, "stream"),
        values(launches, "device"),
        per_row,
        values(launches, "nvtx_stack"),
        values(launches, "process_id"),
        values(launches, "context"),
    ))


def pa_struct(table: pa.Table) -> pa.Array:
    """The columns of ``table`` as one struct array (a column that slices with the rows)."""
    import pyarrow as pa

    return pa.StructArray.from_arrays([one_chunk(c) for c in table.columns], names=table.column_names)


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


def ncu_report(columns: NcuColumns) -> NcuReport:
    """``columns``' launches as ``CounterRow`` records (one metrics dict per launch), built when first
    read (``record_columns.TableRecords``)."""
    return NcuReport(path=columns.path, rows=TableRecords(counter_table(columns.launches, columns.metrics),
                                                          counter_table_records),
                     metrics_returned=columns.metrics_returned, source=columns.source, units=columns.units)
