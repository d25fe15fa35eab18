"""Read an Nsight Systems SQLite export (``nsys export --type sqlite``) into an :class:`NsysTimeline`.

Each table is read with one query, fetched in batches and turned into records in a tight
loop; names come from ``StringIds`` once per distinct id (a 500k-kernel export reads in
seconds)::

    CUPTI_ACTIVITY_KIND_KERNEL(start=14459713, end=14461473, streamId=7, correlationId=76,
                               demangledName=-> "triton_per_fused_native_layer_norm_0", gridX=512, ...)
    -> TimelineKernel(name="triton_per_fused_native_layer_norm_0", start_ns=14459713, stream=7, ...)

Columns differ between nsys versions, so every query is built from ``PRAGMA table_info``:
optional columns missing from an export read as ``None``; a missing required table or
column is an ``ArtifactFormatError`` that names it. The file is opened read-only.
"""

from __future__ import annotations

import os
import sqlite3
from operator import attrgetter
from pathlib import Path

from profiler_core.errors import ArtifactFormatError
from profiler_core.gc_pause import gc_paused
from profiler_core.ingest.nsys_schema import REEXPORT, ExportSchema, open_export
from profiler_core.ingest.nsys_tables import read_gpus, read_nvtx_ranges, read_runtime_calls
from profiler_core.ingest.record_factory import record_factory
from profiler_core.ingest.sanity import check_timeline_kernels
from profiler_core.records import NsysTimeline, TimelineKernel

_KERNEL_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL")
_KERNEL_REQUIRED = ("start", "end", "deviceId", "streamId", "correlationId")
_KERNEL_NOT_NULL = ("start", "end", "deviceId", "streamId")
_KERNEL_OPTIONAL = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread",
                    "staticSharedMemory", "dynamicSharedMemory", "graphId", "graphNodeId")
# Nullable columns whose type is checked per row: join keys and the two summed into smem_bytes.
# (Each typeof() costs about 5% of the fetch; grid and block only ever get copied.)
_KERNEL_CHECKED = ("correlationId", "staticSharedMemory", "dynamicSharedMemory")
_BATCH_ROWS = 50_000
_make_kernel = record_factory(TimelineKernel, (
    "name", "start_ns", "end_ns", "stream", "device", "short_name", "correlation_id", "grid", "block",
    "registers_per_thread", "static_smem_bytes", "dynamic_smem_bytes", "smem_bytes", "graph_id",
    "graph_node_id",
))


def read_nsys(path: str | os.PathLike[str]) -> NsysTimeline:
    """Read the kernels, runtime calls, NVTX ranges and GPUs of an nsys SQLite export."""
    path = Path(path)
    conn = open_export(path)
    try:
        with gc_paused():
            schema = ExportSchema.load(path, conn)
            kernels = _read_kernels(schema)
            kernels += _read_copies(schema, "CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy")
            kernels += _read_copies(schema, "CUPTI_ACTIVITY_KIND_MEMSET", "memset")
            if not kernels:
                raise ArtifactFormatError(
                    f"{path}: the export has no GPU kernels; the profiled range launched none, or nsys "
                    f"ran without `-t cuda`: profile again and {REEXPORT}"
                )
            kernels.sort(key=attrgetter("start_ns"))  # stable: rows with equal starts keep table order
            check_timeline_kernels(path, kernels, "nsys")
            warnings: list[str] = []
            return NsysTimeline(
                path=path,
                kernels=kernels,
                runtime_calls=read_runtime_calls(schema),
                nvtx_ranges=read_nvtx_ranges(schema, warnings),
                gpus=read_gpus(schema),
                warnings=warnings,
            )
    except (sqlite3.Error, UnicodeDecodeError) as err:
        # sqlite3 raises UnicodeDecodeError itself for TEXT that is not UTF-8 (a damaged page).
        raise ArtifactFormatError(
            f"{path}: SQLite cannot read it ({type(err).__name__}: {err}); the file is corrupt or "
            f"truncated: {REEXPORT}"
        ) from err
    finally:
        conn.close()


def _read_kernels(schema: ExportSchema) -> list[TimelineKernel]:
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
    # Each name is looked up once and shared: 500k rows name a few hundred kernels.
    strings = schema.strings()
    columns = ", ".join(schema.column_or_null(table, c, "k") for c in ("demangledName", "shortName",
                                                                        *_KERNEL_OPTIONAL))
    cursor = schema.conn.execute(
        f"SELECT k.start, k.end, k.deviceId, k.streamId, k.correlationId, {columns}, "
        f"{schema.integers_ok(table, 'k', _KERNEL_NOT_NULL, _KERNEL_CHECKED)} "
        f"FROM {table} AS k"
    )
    kernels: list[TimelineKernel] = []
    append, make = kernels.append, _make_kernel
    while rows := cursor.fetchmany(_BATCH_ROWS):
        for (start, end, device, stream, correlation, demangled_id, short_id,
             gx, gy, gz, bx, by, bz, registers, static_smem, dynamic_smem, graph, node, ok) in rows:
            short_name = strings[short_id]
            name = strings[demangled_id] or short_name
            if name is None or not ok:
                raise _nameless(schema.path, table, start) if ok else schema.damaged(table, start)
            append(make(
                name, start, end, stream, device, short_name, correlation,
                None if gx is None else (gx, gy, gz), None if bx is None else (bx, by, bz),
                registers, static_smem, dynamic_smem,
                None if static_smem is None or dynamic_smem is None else static_smem + dynamic_smem,
                graph, node,
            ))
    return kernels


def _read_copies(schema: ExportSchema, table: str, kind: str) -> list[TimelineKernel]:
    """Memcpy / memset activities; nsys leaves the table out when there were none."""
    if table not in schema.tables:
        return []
    schema.require(table, _KERNEL_REQUIRED)
    labels = schema.enum_labels("ENUM_CUDA_MEMCPY_OPER") if kind == "memcpy" else {}
    copy_kind = schema.column_or_null(table, "copyKind", "c") if kind == "memcpy" else "NULL"
    optional = ", ".join(schema.column_or_null(table, c, "c") for c in ("bytes", "graphNodeId"))
    typed = schema.integers_ok(table, "c", _KERNEL_NOT_NULL, ("correlationId", "bytes", "graphNodeId"))
    cursor = schema.conn.execute(
        f"SELECT c.start, c.end, c.deviceId, c.streamId, c.correlationId, {optional}, {copy_kind}, {typed} "
        f"FROM {table} AS c"
    )
    records: list[TimelineKernel] = []
    while rows := cursor.fetchmany(_BATCH_ROWS):
        for start, end, device, stream, correlation, size, node, copy, ok in rows:
            if not ok:
                raise schema.damaged(table, start)
            if kind == "memset":
                name = "CUDA memset"
            elif copy is None:
                name = "CUDA memcpy"
            else:
                name = f"CUDA memcpy {labels.get(copy, f'kind {copy}')}"
            records.append(TimelineKernel(
                name=name, start_ns=start, end_ns=end, stream=stream, device=device, kind=kind,
                correlation_id=correlation, bytes_moved=size, graph_node_id=node,
            ))
    return records


def _nameless(path: Path, table: str, start: object) -> ArtifactFormatError:
    return ArtifactFormatError(
        f"{path}: a {table} row (start {start}) names no kernel (its StringIds entry is missing or "
        f"not text); {REEXPORT}"
    )
