"""Parse Nsight Compute CSV exports (raw page and details page) into counter rows or columns.

The raw page (``--page raw``) is one row per launch and one column per metric, with units in the
second row; it is the shape captures produce and can run to a million rows, so it is read by
``pyarrow.csv`` into columns (``ncu_raw``) and the ``CounterRow`` records are built from those.
The details page ncu prints on stdout with ``--csv`` has one row per launch *and* metric; it is
small, read row by row and pivoted back to one row per launch.

A metric column holding text (``launch__func_cache_config`` = ``CachePreferNone``) reads as
``None``; a column mixing numbers and text is corrupt.
"""

from __future__ import annotations

import codecs
import csv
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TextIO

from profiler_core.confinement import open_input
from profiler_core.errors import ArtifactFormatError
from profiler_core.gc_pause import gc_paused
from profiler_core.ingest.ncu_nvtx import nvtx_stack, strip_nvtx_rename
from profiler_core.ingest.ncu_units import BASE_UNITS_HINT, normalise_unit, parse_dim3
from profiler_core.ingest.sanity import check_counter_rows, check_counter_unit, check_launch_ids
from profiler_core.record_columns import NcuColumns
from profiler_core.records import CounterRow, Dim3, NcuReport

if TYPE_CHECKING:
    import pyarrow as pa

EXPORT_HINT = "export the report with: ncu --import R.ncu-rep --csv --page raw --print-units base"
_REQUIRED = ("ID", "Kernel Name", "Block Size", "Grid Size")
_OPTIONAL_INT_COLUMNS = ("Process ID", "Context", "Stream", "Device")
_DETAIL_COLUMNS = ("Metric Name", "Metric Unit", "Metric Value")
_MISSING = frozenset({"", "n/a", "N/A"})
_PUSH_POP_PREFIX = "thread Domain:Push/Pop_Range"
_UTF8_BLOCK = 1 << 24
_IDENTITY = frozenset({"ID", "Kernel Name", "Block Size", "Grid Size", "Process ID", "Context", "Stream", "Device"})


def is_metric_column(name: str) -> bool:
    """ncu metric names are ``<unit>__<counter>[.rollup[.submetric]]``; identity columns have no ``__``."""
    return "__" in name and " " not in name and ":" not in name


def read_ncu_csv(path: Path, requested: frozenset[str] | None) -> NcuReport:
    """Rows of an ncu CSV export (raw or details page), in ID order, values in base units."""
    result = _read(path, requested)
    if isinstance(result, NcuReport):
        return result
    from profiler_core.ingest.column_records import ncu_report

    with gc_paused():
        return ncu_report(result)


def read_ncu_csv_columns(path: Path, requested: frozenset[str] | None) -> NcuColumns:
    """The launches of an ncu CSV export as columns (``NcuColumns``), in ID order, values in base units."""
    result = _read(path, requested)
    if isinstance(result, NcuReport):  # the details page: small, read as rows
        from profiler_core.ingest.column_records import counter_columns

        return counter_columns(result)
    return result


def _read(path: Path, requested: frozenset[str] | None) -> NcuReport | NcuColumns:
    try:
        with open_input(path, what="Nsight Compute CSV") as raw:
            if os.fstat(raw.fileno()).st_size == 0:
                raise ArtifactFormatError(f"{path}: empty file; {EXPORT_HINT}")
            raw.seek(-1, 2)
            if raw.read(1) != b"\n":
                raise ArtifactFormatError(f"{path}: the last line has no newline: the export is truncated")
            raw.seek(0)
            offset, header, units_line = _find_header_bytes(raw, path)
            _check_utf8(raw)
        table = _Table(path, header, requested)
        if not table.long_form:
            return table.read_raw(offset, units_line)
        with io.TextIOWrapper(open_input(path, what="Nsight Compute CSV"), newline="", encoding="utf-8") as fh:
            _find_header(fh, path)
            return table.report(table.read_details(csv.reader(fh)))
    except UnicodeDecodeError as err:
        raise ArtifactFormatError(f"{path}: not UTF-8 text ({err.reason}); {EXPORT_HINT}") from err
    except csv.Error as err:
        raise ArtifactFormatError(f"{path}: malformed CSV ({err}); {EXPORT_HINT}") from err


def _find_header_bytes(raw: BinaryIO, path: Path) -> tuple[int, list[str], str | None]:
    """The header's byte offset, its names, and the line after it (the raw page's units)."""
    offset = 0
    for line in raw:
        text = line.decode("utf-8")
        if text.startswith(('"ID"', "ID,")):
            after = raw.readline()
            return offset, next(csv.reader([text])), after.decode("utf-8") if after else None
        offset += len(line)
    raise ArtifactFormatError(
        f"{path}: no ncu CSV header (a line starting with \"ID\"): not an ncu export; {EXPORT_HINT}"
    )


def _check_utf8(raw: BinaryIO) -> None:
    """Raise UnicodeDecodeError unless the rest of ``raw`` is UTF-8 (0.2 s per 700 MB, block by block).

    pyarrow checks only the columns it converts, and cannot report a malformed row that is not
    UTF-8; the row reader decoded the whole file, and so does this.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    while block := raw.read(_UTF8_BLOCK):
        decoder.decode(block)
    decoder.decode(b"", final=True)


def _find_header(fh: TextIO, path: Path) -> list[str]:
    # The stdout form carries ncu's ==PROF== messages and the program's own output first.
    for line in fh:
        if line.startswith(('"ID"', "ID,")):
            return next(csv.reader([line]))
    raise ArtifactFormatError(
        f"{path}: no ncu CSV header (a line starting with \"ID\"): not an ncu export; {EXPORT_HINT}"
    )


@dataclass
class RawLayout:
    """What the raw page's header and units row say: the columns to read and their units."""

    path: Path
    header: list[str]
    offset: int  # byte offset of the header line (ncu's stdout form has messages before it)
    identity: list[int] = field(default_factory=list)  # header positions of the identity columns kept
    nvtx_name: str | None = None
    metric_names: list[str] = field(default_factory=list)
    units: dict[str, str] = field(default_factory=dict)  # metric -> base unit
    scales: dict[str, float] = field(default_factory=dict)  # metric -> factor into the base unit
    numeric: set[str] = field(default_factory=set)  # metrics with a number in some row
    text: set[str] = field(default_factory=set)  # metrics holding text (left out)
    hint: str = EXPORT_HINT

    def open_at_header(self) -> BinaryIO:
        """The file, positioned at the header line."""
        handle = open_input(self.path, what="Nsight Compute CSV")
        handle.seek(self.offset)
        return handle  # type: ignore[no-any-return]


def _finish(layout: RawLayout, columns: NcuColumns) -> NcuColumns:
    """The checks the row reader made after its last row, on columns: IDs, units, impossible values."""
    import numpy as np

    from profiler_core.ingest.arrow_columns import from_numpy, to_numpy

    path = layout.path
    mixed = layout.numeric & layout.text
    if mixed:
        raise ArtifactFormatError(f"{path}: metric(s) {', '.join(sorted(mixed))} mix numbers and text: corrupt export")
    launches, metrics = columns.launches, columns.metrics
    if not launches.num_rows:
        raise ArtifactFormatError(
            f"{path}: no kernel rows: ncu profiled nothing (check --kernel-name/--launch-skip "
            "filters and that the measured region calls cudaProfilerStart) or the export is truncated"
        )
    ids = to_numpy(launches.column("ncu_id"))
    if (ids[1:] < ids[:-1]).any():
        order = from_numpy(np.argsort(ids, kind="stable"))
        launches = launches.take(order)
        metrics = metrics.take(order) if metrics.num_columns else metrics
        ids = to_numpy(launches.column("ncu_id"))
    twice = np.flatnonzero(ids[1:] == ids[:-1])
    if twice.size:
        raise ArtifactFormatError(f"{path}: ID {int(ids[twice[0] + 1])} appears twice: corrupt export")
    check_launch_ids(path, ids, f"re-export the whole report ({EXPORT_HINT})")
    returned = frozenset(n for n in layout.units if n in layout.numeric)
    units = {n: u for n, u in layout.units.items() if n not in layout.text}
    for name, base in units.items():
        check_counter_unit(name, base, str(path))
    result = NcuColumns(path=path, launches=launches, metrics=metrics, metrics_returned=returned,
                        source="csv", units=units)
    if _impossible(metrics):
        from profiler_core.ingest.column_records import ncu_report

        check_counter_rows(path, ncu_report(result).rows)  # names the first launch at fault
    return result


def _impossible(metrics: pa.Table) -> bool:
    """Whether ``check_counter_rows`` would refuse some row (negative or faster-than-memory values)."""
    import numpy as np

    from profiler_core.ingest.arrow_columns import to_numpy, validity
    from profiler_core.ingest.sanity import DURATION_METRIC, MAX_BYTES_PER_NS, expected_unit

    names = metrics.column_names
    duration = None
    if DURATION_METRIC in names:
        column = metrics.column(DURATION_METRIC)
        duration = np.where(validity(column.chunk(0)), to_numpy(column), np.nan) if column.num_chunks else None
        if duration is not None and (duration < 0).any():
            return True
    for name in (n for n in names if expected_unit(n) == "byte"):
        column = metrics.column(name)
        if not column.num_chunks:
            continue
        values = np.where(validity(column.chunk(0)), to_numpy(column), np.nan)
        if (values < 0).any():
            return True
        if duration is not None and (values > MAX_BYTES_PER_NS * np.maximum(duration, 1.0)).any():
            return True
    return False


class _Table:
    """Column layout of one export and the per-metric state built while reading it."""

    def __init__(self, path: Path, header: list[str], requested: frozenset[str] | None) -> None:
        self.path = path
        self.header = header
        self.width = len(header)
        self.requested = requested
        self.index = {name: i for i, name in enumerate(header)}
        missing = [name for name in _REQUIRED if name not in self.index]
        if missing:
            raise ArtifactFormatError(
                f"{path}: ncu CSV lacks column(s) {', '.join(repr(m) for m in missing)}; {EXPORT_HINT}"
            )
        self.i_id, self.i_name = self.index["ID"], self.index["Kernel Name"]
        self.i_grid, self.i_block = self.index["Grid Size"], self.index["Block Size"]
        self.i_optional = tuple(self.index.get(c) for c in _OPTIONAL_INT_COLUMNS)
        self.long_form = all(name in self.index for name in _DETAIL_COLUMNS)
        self.nvtx_col = next((i for i, n in enumerate(header) if n.startswith(_PUSH_POP_PREFIX)), None)
        self.units: dict[str, str] = {}
        self.numeric: set[str] = set()
        self.text: set[str] = set()
        self._dims: dict[str, Dim3 | None] = {}

    # -- the raw page ---------------------------------------------------------------------------
    def read_raw(self, offset: int, units_line: str | None) -> NcuColumns:
        units_row = next(csv.reader([units_line]), None) if units_line else None
        if units_row is None or len(units_row) != self.width or units_row[self.index["ID"]] != "":
            raise ArtifactFormatError(
                f"{self.path}: the second row should hold the units (ID column empty); {EXPORT_HINT}"
            )
        layout = RawLayout(self.path, self.header, offset)
        for i, name in enumerate(self.header):
            if is_metric_column(name) and (self.requested is None or name in self.requested):
                base, scale = normalise_unit(units_row[i], name, str(self.path))
                layout.units[name] = base
                layout.scales[name] = scale
                layout.metric_names.append(name)
        layout.identity = [i for i, name in enumerate(self.header) if name in _IDENTITY]
        if self.nvtx_col is not None:
            layout.identity.append(self.nvtx_col)
            layout.nvtx_name = self.header[self.nvtx_col]
        from profiler_core.ingest.ncu_raw import read_raw_columns

        return _finish(layout, read_raw_columns(layout))

    def _skippable(self, row: list[str], line_no: int) -> bool:
        if not row or (len(row) == 1 and row[0].startswith("==")):
            return True  # a blank line, or ncu's trailing ==PROF== messages
        raise ArtifactFormatError(
            f"{self.path}: row {line_no} has {len(row)} fields, the header {self.width}: "
            "the export is truncated or corrupt"
        )

    def _cell(self, name: str, cell: str, line_no: int) -> float | None:
        if cell in _MISSING:
            return None
        try:
            value = float(cell.replace(",", ""))
        except ValueError:
            if self.units.get(name) != "":
                raise ArtifactFormatError(
                    f"{self.path}: row {line_no}: metric {name!r} has the non-numeric value {cell[:60]!r}: "
                    "the export is corrupt"
                ) from None
            self.text.add(name)  # a string-valued metric
            return None
        self.numeric.add(name)
        return value

    # -- the details page -------------------------------------------------------------------------
    def read_details(self, reader: Iterator[list[str]]) -> list[CounterRow]:
        i_name, i_unit, i_value = (self.index[c] for c in _DETAIL_COLUMNS)
        by_id: dict[str, tuple[list[str], int, dict[str, float | None]]] = {}
        units_seen: dict[tuple[str, str], tuple[str, float]] = {}
        for line_no, row in enumerate(reader, start=2):
            if len(row) != self.width and self._skippable(row, line_no):
                continue
            entry = by_id.get(row[self.index["ID"]])
            if entry is None:
                entry = by_id[row[self.index["ID"]]] = (row, line_no, {})
            name, unit = row[i_name], row[i_unit]
            if self.requested is not None and name not in self.requested:
                continue
            if (name, unit) not in units_seen:
                units_seen[(name, unit)] = normalise_unit(unit, name, str(self.path))
            base, scale = units_seen[(name, unit)]
            if self.units.setdefault(name, base) != base:
                raise ArtifactFormatError(
                    f"{self.path}: metric {name!r} comes in {self.units[name]!r} and {base!r}; "
                    f"{BASE_UNITS_HINT}"
                )
            value = self._cell(name, row[i_value], line_no)
            if name in self.numeric and name in self.text:
                raise ArtifactFormatError(
                    f"{self.path}: metric {name!r} mixes numbers and text: corrupt export"
                )
            entry[2][name] = value * scale if value is not None else None
        return [self._row(row, metrics, line_no) for row, line_no, metrics in by_id.values()]

    # -- shared -----------------------------------------------------------------------------------
    def _row(self, row: list[str], metrics: dict[str, float | None], line_no: int) -> CounterRow:
        stack = nvtx_stack(row[self.nvtx_col]) if self.nvtx_col is not None else ()
        name = row[self.i_name]
        if stack:
            name = strip_nvtx_rename(name, stack)
        i_process, i_context, i_stream, i_device = self.i_optional
        ncu_id: int | None
        process_id: int | None
        context: int | None
        stream: int | None
        device: int | None
        try:  # the common case: every id column present and an integer (a missing one: TypeError)
            ncu_id = int(row[self.i_id])
            process_id = int(row[i_process])  # type: ignore[index]
            context = int(row[i_context])  # type: ignore[index]
            stream = int(row[i_stream])  # type: ignore[index]
            device = int(row[i_device])  # type: ignore[index]
        except (ValueError, TypeError):
            ncu_id = self._int(row[self.i_id], "ID", line_no)
            process_id, context, stream, device = (
                None if i is None else self._int(row[i], column, line_no)
                for i, column in zip(self.i_optional, _OPTIONAL_INT_COLUMNS, strict=True)
            )
        if ncu_id is None:
            raise ArtifactFormatError(f"{self.path}: row {line_no} has no ID")
        # Positional: half the cost of keywords at 500k rows (tests pin the field order).
        return CounterRow(
            ncu_id,
            name,
            self._dim3(row[self.i_grid], "Grid Size", line_no),
            self._dim3(row[self.i_block], "Block Size", line_no),
            stream,
            device,
            metrics,
            stack,
            process_id,
            context,
        )

    def report(self, rows: list[CounterRow]) -> NcuReport:
        if not rows:
            raise ArtifactFormatError(
                f"{self.path}: no kernel rows: ncu profiled nothing (check --kernel-name/--launch-skip "
                "filters and that the measured region calls cudaProfilerStart) or the export is truncated"
            )
        rows.sort(key=attrgetter("ncu_id"))
        for before, after in zip(rows, rows[1:], strict=False):
            if before.ncu_id == after.ncu_id:
                raise ArtifactFormatError(f"{self.path}: ID {after.ncu_id} appears twice: corrupt export")
        # A metric came back when at least one launch has a number for it.
        returned = frozenset(n for n in self.units if n in self.numeric)
        units = {n: u for n, u in self.units.items() if n not in self.text}
        for name, base in units.items():
            check_counter_unit(name, base, str(self.path))
        check_counter_rows(self.path, rows)
        return NcuReport(path=self.path, rows=rows, metrics_returned=returned, source="csv", units=units)

    def _int(self, cell: str, column: str, line_no: int) -> int | None:
        if cell in _MISSING:
            return None
        try:
            return int(cell.replace(",", ""))
        except ValueError:
            raise ArtifactFormatError(
                f"{self.path}: row {line_no}: column {column!r} holds {cell[:60]!r}, not an integer"
            ) from None

    def _dim3(self, cell: str, column: str, line_no: int) -> Dim3 | None:
        if cell in self._dims:
            return self._dims[cell]
        value = parse_dim3(cell, column, f"{self.path}: row {line_no}")
        if value is not None:
            self._dims[cell] = value
        return value
