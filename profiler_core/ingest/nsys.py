"""Read an Nsight Systems SQLite export (``nsys export --type sqlite``) into Arrow columns or records.

Each table is read with one query into Arrow columns (the ADBC SQLite driver, no Python
object per value); names come from ``StringIds`` once per distinct id and are kept
dictionary-encoded (a 1M-kernel export reads in about 3 s)::

    CUPTI_ACTIVITY_KIND_KERNEL(start=14459713, end=14461473, streamId=7, correlationId=76,
                               demangledName=-> "triton_per_fused_native_layer_norm_0", gridX=512, ...)
    -> NsysColumns.kernels row (name="triton_per_fused_native_layer_norm_0", start_ns=14459713, stream=7, ...)
    -> TimelineKernel(name="triton_per_fused_native_layer_norm_0", start_ns=14459713, stream=7, ...)

``read_nsys_columns`` returns the tables (``profiler_core.record_columns.NsysColumns``);
``read_nsys`` the frozen records built from them. Columns differ between nsys versions, so
every query is built from ``PRAGMA table_info``: optional columns missing from an export read
as ``None``; a missing required table or column is an ``ArtifactFormatError`` that names it.
The file is opened read-only.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest.arrow_columns import NameTable, column_of, first_true, sorted_by_start
from profiler_core.ingest.column_records import nvtx_records, runtime_records, timeline_records
from profiler_core.ingest.driver_copies import driver_copy_kind
from profiler_core.ingest.nsys_schema import REEXPORT, ExportSchema, open_export
from profiler_core.ingest.nsys_tables import (
    integer_columns,
    read_gpus,
    read_nvtx_ranges,
    read_runtime_calls,
)
from profiler_core.ingest.sanity import check_kernel_table
from profiler_core.record_columns import KERNEL_COLUMNS, NsysColumns, TableRecords
from profiler_core.records import NsysTimeline

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

_KERNEL_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL")
_KERNEL_REQUIRED = ("start", "end", "deviceId", "streamId", "correlationId")
_KERNEL_NOT_NULL = ("start", "end", "deviceId", "streamId")
# nsys column -> KERNEL_COLUMNS name, for the columns copied as they are.
_KERNEL_COPIED = {
    "start": "start_ns", "end": "end_ns", "streamId": "stream", "deviceId": "device",
    "correlationId": "correlation_id", "gridX": "grid_x", "gridY": "grid_y", "gridZ": "grid_z",
    "blockX": "block_x", "blockY": "block_y", "blockZ": "block_z", "registersPerThread": "registers_per_thread",
    "staticSharedMemory": "static_smem_bytes", "dynamicSharedMemory": "dynamic_smem_bytes",
    "graphId": "graph_id", "graphNodeId": "graph_node_id",
}
_COPY_COPIED = {"start": "start_ns", "end": "end_ns", "streamId": "stream", "deviceId": "device",
                "correlationId": "correlation_id", "bytes": "bytes_moved", "graphNodeId": "graph_node_id"}
# Nullable columns whose type is checked: join keys and the two summed into smem_bytes (grid and
# block only ever get copied; a text among them still fails, as a column that is not integers).
_KERNEL_CHECKED = ("correlationId", "staticSharedMemory", "dynamicSharedMemory")
_STRING_COLUMNS = ("name", "kind", "short_name")


def read_nsys(path: str | os.PathLike[str]) -> NsysTimeline:
    """Read the kernels, runtime calls, NVTX ranges and GPUs of an nsys SQLite export as records.

    The records are built when a caller first reads one (``record_columns.TableRecords``); the
    attribution engine reads the columns beneath them and builds none.
    """
    columns = read_nsys_columns(path)
    return NsysTimeline(path=columns.path, kernels=TableRecords(columns.kernels, timeline_records),
                        runtime_calls=TableRecords(columns.runtime_calls, runtime_records),
                        nvtx_ranges=TableRecords(columns.nvtx_ranges, nvtx_records),
                        gpus=columns.gpus, warnings=columns.warnings)


def read_nsys_columns(path: str | os.PathLike[str]) -> NsysColumns:
    """Read the kernels, runtime calls, NVTX ranges and GPUs of an nsys SQLite export as Arrow tables."""
    path = Path(path)
    conn = open_export(path)
    schema: ExportSchema | None = None
    try:
        schema = ExportSchema.load(path, conn)
        names, short_names, kinds = NameTable(), NameTable(), NameTable()
        parts = [_read_kernels(schema, names, short_names, kinds)]
        parts += _read_copies(schema, "CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy", names, kinds)
        parts += _read_copies(schema, "CUPTI_ACTIVITY_KIND_MEMSET", "memset", names, kinds)
        if not sum(len(part["name"]) for part in parts):
            raise ArtifactFormatError(
                f"{path}: the export has no GPU kernels; the profiled range launched none, or nsys "
                f"ran without `-t cuda`: profile again and {REEXPORT}"
            )
        kernels = _kernel_table(parts, {"name": names, "kind": kinds, "short_name": short_names})
        check_kernel_table(path, kernels, "nsys")
        warnings: list[str] = []
        return NsysColumns(
            path=path,
            kernels=kernels,
            runtime_calls=read_runtime_calls(schema),
            nvtx_ranges=read_nvtx_ranges(schema, warnings),
            gpus=read_gpus(schema),
            warnings=warnings,
        )
    except (sqlite3.Error, UnicodeDecodeError) as err:
        # Text that is not UTF-8 (a damaged page) fails where a name becomes a Python str.
        raise ArtifactFormatError(
            f"{path}: SQLite cannot read it ({type(err).__name__}: {err}); the file is corrupt or "
            f"truncated: {REEXPORT}"
        ) from err
    finally:
        if schema is not None:
            schema.close()
        conn.close()


def _read_kernels(schema: ExportSchema, names: NameTable, short_names: NameTable,
                  kinds: NameTable) -> dict[str, Any]:
    table = next((t for t in _KERNEL_TABLES if t in schema.tables), None)
    if table is None:
        raise ArtifactFormatError(
            f"{schema.path}: the export has no {_KERNEL_TABLES[0]} table, so no CUDA kernel was recorded "
            f"(nsys ran without `-t cuda`, or the table was left out of the export); profile with "
            f"`nsys profile -t cuda,nvtx` and {REEXPORT}"
        )
    schema.require(table, _KERNEL_REQUIRED)
    if not {"demangledName", "shortName"} & schema.columns(table):
        schema.require(table, ("demangledName",))
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    selected = [c for c in (*_KERNEL_COPIED, "demangledName", "shortName") if c in schema.columns(table)]
    data = schema.arrow_table(table, "k", ", ".join(f"k.{c}" for c in selected), _KERNEL_NOT_NULL,
                              _KERNEL_CHECKED)
    # Each name is looked up once per distinct id: 1M rows name a few hundred kernels.
    strings = schema.strings()
    rows = data.num_rows
    short = short_names.encode(column_of(data, "shortName"), lambda i: None if i is None else strings[i])
    demangled = names.encode(column_of(data, "demangledName"), lambda i: None if i is None else strings[i] or None)
    name = demangled
    fallback = demangled < 0
    if fallback.any():  # no demangled name: the short one, where there is one
        by_short = np.full(len(short_names.values) + 1, -1, dtype=np.int32)  # [-1] (no short name) stays -1
        for code in np.unique(short[fallback]).tolist():
            if code >= 0:
                by_short[code] = names.code(short_names.values[code])
        name = np.where(fallback, by_short[short], demangled)
    nameless = first_true(name < 0)
    if nameless is not None:
        raise _nameless(schema.path, table, data.column("start")[nameless].as_py())
    part = integer_columns(schema, table, data, _KERNEL_COPIED)
    part["smem_bytes"] = pc.add(part["static_smem_bytes"], part["dynamic_smem_bytes"])
    part.update(name=name, short_name=short, kind=_kernel_kinds(name, names, kinds),
                bytes_moved=pa.nulls(rows, pa.int64()))
    return part


def _kernel_kinds(name: np.ndarray, names: NameTable, kinds: NameTable) -> np.ndarray:
    """Kind codes of the kernel rows: "kernel", or "memcpy"/"memset" for the driver's copy kernels
    (a CUDA graph's copy and set nodes, :mod:`profiler_core.ingest.driver_copies`)."""
    import numpy as np

    by_name = np.full(len(names.values) + 1, kinds.code("kernel"), dtype=np.int32)  # [-1]: never read
    for code, text in enumerate(names.values):
        copy = driver_copy_kind(text)
        if copy is not None:
            by_name[code] = kinds.code(copy)
    return by_name[name]  # type: ignore[no-any-return]


def _read_copies(schema: ExportSchema, table: str, kind: str, names: NameTable,
                 kinds: NameTable) -> list[dict[str, Any]]:
    """Memcpy / memset activities; nsys leaves the table out when there were none."""
    if table not in schema.tables:
        return []
    schema.require(table, _KERNEL_REQUIRED)
    import numpy as np
    import pyarrow as pa

    labels = schema.enum_labels("ENUM_CUDA_MEMCPY_OPER") if kind == "memcpy" else {}
    selected = [c for c in (*_COPY_COPIED, "copyKind") if c in schema.columns(table)]
    data = schema.arrow_table(table, "c", ", ".join(f"c.{c}" for c in selected), _KERNEL_NOT_NULL,
                              ("correlationId", "bytes", "graphNodeId"))
    rows = data.num_rows
    if kind == "memset":
        name = names.constant("CUDA memset", rows)
    else:
        name = names.encode(column_of(data, "copyKind"), lambda copy: (
            "CUDA memcpy" if copy is None else f"CUDA memcpy {labels.get(copy, f'kind {copy}')}"))
    part = integer_columns(schema, table, data, _COPY_COPIED)
    nulls = pa.nulls(rows, pa.int64())
    part.update(name=name, short_name=np.full(rows, -1, dtype=np.int32), kind=kinds.constant(kind, rows))
    for column in KERNEL_COLUMNS:
        part.setdefault(column, nulls)
    return [part]


def _kernel_table(parts: list[dict[str, Any]], strings: dict[str, NameTable]) -> pa.Table:
    """One table of every part's rows, in start order (stable: equal starts keep table order)."""
    import numpy as np
    import pyarrow as pa

    merged: dict[str, Any] = {}
    for column in KERNEL_COLUMNS:
        values = [part[column] for part in parts]
        if column in _STRING_COLUMNS:
            merged[column] = strings[column].array(np.concatenate(values))
        else:
            merged[column] = pa.concat_arrays(values) if len(values) > 1 else values[0]
    return sorted_by_start(pa.table(merged))


def _nameless(path: Path, table: str, start: object) -> ArtifactFormatError:
    return ArtifactFormatError(
        f"{path}: a {table} row (start {start}) names no kernel (its StringIds entry is missing or "
        f"not text); {REEXPORT}"
    )
