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
from profiler_core.ingest.nsys_schema import REEXPORT, ExportSchema
from profiler_core.records import NvtxRange, RuntimeCall

_RUNTIME_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")
_API_REQUIRED = ("start", "end", "globalTid", "correlationId", "nameId")
_VERSION_SUFFIX = re.compile(r"_v\d+$")
_NVTX_TABLE = "NVTX_EVENTS"
_NVTX_MARK = 34
_NVTX_RANGES = (59, 60)  # NvtxPushPopRange, NvtxStartEndRange
_NVTX_DOMAIN_CREATE = 75
_BATCH_ROWS = 50_000


def read_runtime_calls(schema: ExportSchema) -> list[RuntimeCall]:
    """CUDA runtime (required) and driver (when exported) API calls, sorted by start."""
    schema.require_table(_RUNTIME_TABLES[0])
    calls: list[RuntimeCall] = []
    clean: dict[str, str] = {}
    for table in _RUNTIME_TABLES:
        if table not in schema.tables:
            continue
        schema.require(table, _API_REQUIRED)
        schema.check_integers(table, ("start", "end"), ("globalTid", "correlationId"))
        cursor = schema.conn.execute(
            f"SELECT r.start, r.end, r.globalTid, r.correlationId, s.value "
            f"FROM {table} AS r LEFT JOIN StringIds AS s ON s.id = r.nameId"
        )
        append = calls.append
        while rows := cursor.fetchmany(_BATCH_ROWS):
            for start, end, tid, correlation, raw in rows:
                name = clean.get(raw)
                if name is None:
                    if type(raw) is not str:
                        raise ArtifactFormatError(
                            f"{schema.path}: a {table} row (start {start}) names no API call (its StringIds "
                            f"entry is missing or not text); {REEXPORT}"
                        )
                    name = clean[raw] = _VERSION_SUFFIX.sub("", raw)
                append(RuntimeCall(name=name, start_ns=start, end_ns=end, tid=tid,
                                   correlation_id=correlation))
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
    schema.check_integers(_NVTX_TABLE, ("start", "eventType"), ("end", "globalTid", "textId", "domainId"))
    text = _text_expression(columns)
    join = " LEFT JOIN StringIds AS s ON s.id = n.textId" if "textId" in columns else ""
    _count_skipped(schema, warnings)
    domains = _domains(schema, text, join) if "domainId" in columns else {}
    domain = "n.domainId" if "domainId" in columns else "NULL"
    cursor = schema.conn.execute(
        f"SELECT n.start, n.end, n.globalTid, {text}, {domain} FROM {_NVTX_TABLE} AS n{join} "
        f"WHERE n.eventType IN {_NVTX_RANGES} AND n.end IS NOT NULL"
    )
    ranges: list[NvtxRange] = []
    append = ranges.append
    while rows := cursor.fetchmany(_BATCH_ROWS):
        for start, end, tid, label, domain_id in rows:
            # A range pushed without a message is legal NVTX; its text is empty, not invented.
            append(NvtxRange(text=label if type(label) is str else "", start_ns=start, end_ns=end, tid=tid,
                             domain=domains.get(domain_id)))
    ranges.sort(key=attrgetter("start_ns"))
    return ranges


def read_gpus(schema: ExportSchema) -> list[Mapping[str, Any]]:
    """TARGET_INFO_GPU rows as dicts keyed by nsys's column names (name, smCount, chipName...)."""
    if "TARGET_INFO_GPU" not in schema.tables:
        return []
    cursor = schema.conn.execute("SELECT * FROM TARGET_INFO_GPU")
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _text_expression(columns: frozenset[str]) -> str:
    if {"text", "textId"} <= columns:
        return "COALESCE(n.text, s.value)"
    return "n.text" if "text" in columns else "s.value"


def _count_skipped(schema: ExportSchema, warnings: list[str]) -> None:
    marks, unended = schema.conn.execute(
        f"SELECT coalesce(sum(eventType = {_NVTX_MARK}), 0), "
        f"coalesce(sum(eventType IN {_NVTX_RANGES} AND end IS NULL), 0) FROM {_NVTX_TABLE}"
    ).fetchone()
    if marks:
        warnings.append(f"{marks} NVTX mark(s) skipped: a mark is an instant, not a range")
    if unended:
        warnings.append(f"{unended} NVTX range(s) skipped: never ended before the capture stopped")


def _domains(schema: ExportSchema, text: str, join: str) -> dict[int, str]:
    """``domainId -> name`` from the domain-create rows; the default domain (0) has no name."""
    rows = schema.conn.execute(
        f"SELECT n.domainId, {text} FROM {_NVTX_TABLE} AS n{join} WHERE n.eventType = {_NVTX_DOMAIN_CREATE}"
    ).fetchall()
    return {domain_id: name for domain_id, name in rows if domain_id and type(name) is str}
