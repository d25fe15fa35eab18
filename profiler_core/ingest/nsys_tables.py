"""Host-side tables of an nsys export: CUDA API calls, NVTX ranges, GPU descriptions.

``tid`` is nsys's ``globalTid`` as stored (process and thread id packed together), the same
value in the runtime and NVTX tables, so per-thread joins work across processes.
Runtime names lose nsys's ABI-version suffix so they read like Kineto's::

    StringIds "cudaLaunchKernelExC_v11060" -> runtime_calls name "cudaLaunchKernelExC"

The call and range tables come back as Arrow columns (``record_columns.RUNTIME_COLUMNS``,
``NVTX_COLUMNS``), names dictionary-encoded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest.arrow_columns import (
    NameTable,
    column_of,
    first_true,
    from_numpy,
    int_column,
    sorted_by_start,
    to_numpy,
    validity,
)
from profiler_core.ingest.nsys_schema import REEXPORT, ExportSchema, StringIds

if TYPE_CHECKING:
    import pyarrow as pa

_RUNTIME_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")
_API_REQUIRED = ("start", "end", "globalTid", "correlationId", "nameId")
_VERSION_SUFFIX = re.compile(r"_v\d+$")
_NVTX_TABLE = "NVTX_EVENTS"
_NVTX_MARK = 34
_NVTX_RANGES = (59, 60)  # NvtxPushPopRange, NvtxStartEndRange
_NVTX_DOMAIN_CREATE = 75


def read_runtime_calls(schema: ExportSchema) -> pa.Table:
    """CUDA runtime (required) and driver (when exported) API calls, sorted by start."""
    import numpy as np
    import pyarrow as pa

    schema.require_table(_RUNTIME_TABLES[0])
    # A few dozen distinct API names: each is cleaned once, then shared by every call.
    strings = schema.strings(lambda name: _VERSION_SUFFIX.sub("", name))
    names = NameTable()
    parts: list[dict[str, Any]] = []
    for table in _RUNTIME_TABLES:
        if table not in schema.tables:
            continue
        schema.require(table, _API_REQUIRED)
        data = schema.arrow_table(table, "r", "r.start, r.end, r.globalTid, r.correlationId, r.nameId",
                                  ("start", "end"), ("globalTid", "correlationId"))
        name = names.encode(column_of(data, "nameId"), lambda i: None if i is None else strings[i])
        bad = first_true(name < 0)
        if bad is not None:
            raise ArtifactFormatError(
                f"{schema.path}: a {table} row (start {data.column('start')[bad].as_py()}) names no API call (its "
                f"StringIds entry is missing or not text); {REEXPORT}"
            )
        part = integer_columns(schema, table, data, {"start": "start_ns", "end": "end_ns", "globalTid": "tid",
                                               "correlationId": "correlation_id"})
        part["name"] = name
        parts.append(part)
    merged: dict[str, Any] = {"name": names.array(np.concatenate([p["name"] for p in parts]))}
    for column in ("start_ns", "end_ns", "tid", "correlation_id"):
        merged[column] = pa.concat_arrays([p[column] for p in parts])
    return sorted_by_start(pa.table(merged))


def read_nvtx_ranges(schema: ExportSchema, warnings: list[str]) -> pa.Table:
    """Push/pop and start/end ranges with an end; marks and unended ranges are counted in ``warnings``."""
    import numpy as np
    import pyarrow as pa

    texts, domain_names = NameTable(), NameTable()
    if _NVTX_TABLE not in schema.tables:
        warnings.append(
            "no NVTX_EVENTS table: the run recorded no NVTX ranges (nsys without `-t nvtx`, or the "
            "workload did not run under torch.autograd.profiler.emit_nvtx); NVTX attribution is unavailable"
        )
        empty = np.zeros(0, dtype=np.int32)
        return pa.table({"text": texts.array(empty), **{c: pa.nulls(0, pa.int64()) for c in
                         ("start_ns", "end_ns", "tid")}, "domain": domain_names.array(empty)})
    schema.require(_NVTX_TABLE, ("start", "end", "eventType", "globalTid"))
    columns = schema.columns(_NVTX_TABLE)
    if not {"text", "textId"} & columns:
        schema.require(_NVTX_TABLE, ("text",))
    # One scan reads the ranges, the marks and unended ranges (counted), and the domain names.
    selected = ", ".join(f"n.{c}" for c in ("start", "end", "eventType", "globalTid", "text", "textId", "domainId")
                         if c in columns)
    kinds = (_NVTX_MARK, *_NVTX_RANGES, _NVTX_DOMAIN_CREATE)
    where = f"WHERE n.eventType IN {kinds}"
    data = schema.arrow_table(_NVTX_TABLE, "n", selected, ("start", "eventType"), ("end", "globalTid"), where)
    event = to_numpy(column_of(data, "eventType"))
    ended = validity(column_of(data, "end"))
    is_range = (event == _NVTX_RANGES[0]) | (event == _NVTX_RANGES[1])
    _count_skipped(int((event == _NVTX_MARK).sum()), int((is_range & ~ended).sum()), warnings)
    strings = schema.strings()
    domains = _domains(data.filter(from_numpy(event == _NVTX_DOMAIN_CREATE)), strings) if "domainId" in columns else {}
    if not (is_range & ended).all():
        data = data.filter(from_numpy(is_range & ended))
    # Registered strings live in StringIds; a range pushed with no message at all is legal
    # NVTX, and its text is empty rather than invented.
    inline = _strings_or_nulls(data, "text")
    if inline.null_count == 0:  # every text inline (emit_nvtx: often one distinct text per range)
        text_column = inline.dictionary_encode()
    else:
        text = texts.encode(inline, lambda t: t)
        registered = texts.encode(column_of(data, "textId"), lambda i: "" if i is None else strings[i] or "")
        text_column = texts.array(np.where(text < 0, registered, text))
    part = integer_columns(schema, _NVTX_TABLE, data, {"start": "start_ns", "end": "end_ns", "globalTid": "tid"})
    domain = domain_names.encode(column_of(data, "domainId"), lambda i: domains.get(i))
    return sorted_by_start(pa.table({"text": text_column, **part, "domain": domain_names.array(domain)}))


def read_gpus(schema: ExportSchema) -> list[Mapping[str, Any]]:
    """TARGET_INFO_GPU rows as dicts keyed by nsys's column names (name, smCount, chipName...)."""
    if "TARGET_INFO_GPU" not in schema.tables:
        return []
    cursor = schema.conn.execute("SELECT * FROM TARGET_INFO_GPU")
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _count_skipped(marks: int, unended: int, warnings: list[str]) -> None:
    if marks:
        warnings.append(f"{marks} NVTX mark(s) skipped: a mark is an instant, not a range")
    if unended:
        warnings.append(f"{unended} NVTX range(s) skipped: never ended before the capture stopped")


def _domains(created: pa.Table, strings: StringIds) -> dict[int, str]:
    """``domainId -> name`` from the domain-create rows; the default domain (0) has no name."""
    domains = {}
    texts = _strings_or_nulls(created, "text").to_pylist()
    for domain_id, text, text_id in zip(column_of(created, "domainId").to_pylist(), texts,
                                        column_of(created, "textId").to_pylist(), strict=True):
        name = text if text is not None else strings[text_id]
        if domain_id and name is not None:
            domains[domain_id] = name
    return domains


def _strings_or_nulls(data: pa.Table, name: str) -> pa.Array:
    """A text column with every value that is not a string as null (nsys writes NULL there)."""
    import pyarrow as pa

    column = column_of(data, name)
    return column if pa.types.is_string(column.type) else pa.nulls(data.num_rows, pa.string())


def integer_columns(schema: ExportSchema, table: str, data: pa.Table, columns: dict[str, str]) -> dict[str, Any]:
    """``columns`` (nsys name -> column name) as int64 arrays; a column of other values is damage."""
    part: dict[str, Any] = {}
    for source, target in columns.items():
        array = int_column(data, source)
        if array is None:
            raise ArtifactFormatError(
                f"{schema.path}: column {table}.{source} holds values that are not integers; the file is "
                f"damaged: {REEXPORT}"
            )
        part[target] = array
    return part
