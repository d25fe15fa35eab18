"""Host-side tables of an nsys export: CUDA API calls, NVTX ranges, GPU descriptions.

``tid`` is nsys's ``globalTid`` as stored (process and thread id packed together), the same
value in the runtime and NVTX tables, so per-thread joins work across processes.
Runtime names lose nsys's ABI-version suffix so they read like Kineto's::

    StringIds "cudaLaunchKernelExC_v11060" -> RuntimeCall(name="cudaLaunchKernelExC", ...)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from operator import attrgetter
from typing import Any

from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest.nsys_schema import REEXPORT, ExportSchema, StringIds
from profiler_core.ingest.record_factory import record_factory
from profiler_core.records import NvtxRange, RuntimeCall

_RUNTIME_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")
_API_REQUIRED = ("start", "end", "globalTid", "correlationId", "nameId")
_VERSION_SUFFIX = re.compile(r"_v\d+$")
_NVTX_TABLE = "NVTX_EVENTS"
_NVTX_MARK = 34
_NVTX_RANGES = (59, 60)  # NvtxPushPopRange, NvtxStartEndRange
_NVTX_DOMAIN_CREATE = 75
_BATCH_ROWS = 50_000
_make_call = record_factory(RuntimeCall, ("name", "start_ns", "end_ns", "tid", "correlation_id"))
_make_range = record_factory(NvtxRange, ("text", "start_ns", "end_ns", "tid", "domain"))


def read_runtime_calls(schema: ExportSchema) -> list[RuntimeCall]:
    """CUDA runtime (required) and driver (when exported) API calls, sorted by start."""
    schema.require_table(_RUNTIME_TABLES[0])
    calls: list[RuntimeCall] = []
    append, make = calls.append, _make_call
    # A few dozen distinct API names: each is cleaned once, then shared by every call.
    names = schema.strings(lambda name: _VERSION_SUFFIX.sub("", name))
    for table in _RUNTIME_TABLES:
        if table not in schema.tables:
            continue
        schema.require(table, _API_REQUIRED)
        typed = schema.integers_ok(table, "r", ("start", "end"), ("globalTid", "correlationId"))
        cursor = schema.conn.execute(
            f"SELECT r.start, r.end, r.globalTid, r.correlationId, r.nameId, {typed} FROM {table} AS r"
        )
        while rows := cursor.fetchmany(_BATCH_ROWS):
            for start, end, tid, correlation, name_id, ok in rows:
                name = names[name_id]
                if name is None or not ok:
                    if not ok:
                        raise schema.damaged(table, start)
                    raise ArtifactFormatError(
                        f"{schema.path}: a {table} row (start {start}) names no API call (its StringIds "
                        f"entry is missing or not text); {REEXPORT}"
                    )
                append(make(name, start, end, tid, correlation))
    calls.sort(key=attrgetter("start_ns"))
    return calls


def read_nvtx_ranges(schema: ExportSchema, warnings: list[str]) -> list[NvtxRange]:
    """Push/pop and start/end ranges with an end; marks and unended ranges are counted in ``warnings``."""
    if _NVTX_TABLE not in schema.tables:
        warnings.append(
            "no NVTX_EVENTS table: the run recorded no NVTX ranges (nsys without `-t nvtx`, or the "
            "workload did not run under torch.autograd.profiler.emit_nvtx); NVTX attribution is unavailable"
        )
        return []
    schema.require(_NVTX_TABLE, ("start", "end", "eventType", "globalTid"))
    columns = schema.columns(_NVTX_TABLE)
    if not {"text", "textId"} & columns:
        schema.require(_NVTX_TABLE, ("text",))
    _count_skipped(schema, warnings)
    strings = schema.strings()
    domains = _domains(schema, strings) if "domainId" in columns else {}
    selected = ", ".join(schema.column_or_null(_NVTX_TABLE, c, "n") for c in ("text", "textId", "domainId"))
    typed = schema.integers_ok(_NVTX_TABLE, "n", ("start", "end"), ("globalTid",))
    cursor = schema.conn.execute(
        f"SELECT n.start, n.end, n.globalTid, {selected}, {typed} FROM {_NVTX_TABLE} AS n "
        f"WHERE n.eventType IN {_NVTX_RANGES} AND n.end IS NOT NULL"
    )
    ranges: list[NvtxRange] = []
    append, make, domain_of = ranges.append, _make_range, domains.get
    while rows := cursor.fetchmany(_BATCH_ROWS):
        for start, end, tid, text, text_id, domain_id, ok in rows:
            if not ok:
                raise schema.damaged(_NVTX_TABLE, start)
            if type(text) is not str:
                # Registered strings live in StringIds; a range pushed with no message at all
                # is legal NVTX, and its text is empty rather than invented.
                text = strings[text_id] or ""
            append(make(text, start, end, tid, domain_of(domain_id)))
    ranges.sort(key=attrgetter("start_ns"))
    return ranges


def read_gpus(schema: ExportSchema) -> list[Mapping[str, Any]]:
    """TARGET_INFO_GPU rows as dicts keyed by nsys's column names (name, smCount, chipName...)."""
    if "TARGET_INFO_GPU" not in schema.tables:
        return []
    cursor = schema.conn.execute("SELECT * FROM TARGET_INFO_GPU")
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _count_skipped(schema: ExportSchema, warnings: list[str]) -> None:
    marks, unended = schema.conn.execute(
        f"SELECT coalesce(sum(eventType = {_NVTX_MARK}), 0), "
        f"coalesce(sum(eventType IN {_NVTX_RANGES} AND end IS NULL), 0) FROM {_NVTX_TABLE}"
    ).fetchone()
    if marks:
        warnings.append(f"{marks} NVTX mark(s) skipped: a mark is an instant, not a range")
    if unended:
        warnings.append(f"{unended} NVTX range(s) skipped: never ended before the capture stopped")


def _domains(schema: ExportSchema, strings: StringIds) -> dict[int, str]:
    """``domainId -> name`` from the domain-create rows; the default domain (0) has no name."""
    selected = ", ".join(schema.column_or_null(_NVTX_TABLE, c, "n") for c in ("text", "textId"))
    rows = schema.conn.execute(
        f"SELECT n.domainId, {selected} FROM {_NVTX_TABLE} AS n WHERE n.eventType = {_NVTX_DOMAIN_CREATE}"
    ).fetchall()
    domains = {}
    for domain_id, text, text_id in rows:
        name = text if type(text) is str else strings[text_id]
        if domain_id and name is not None:
            domains[domain_id] = name
    return domains
