"""Read the raw page of an Nsight Compute CSV export into Arrow columns (``pyarrow.csv``).

The raw page (``ncu --csv --page raw``) is one row per launch and one column per metric, the
units in its second row; it is the shape captures produce and can run to a million rows.
pyarrow parses it block by block; only the columns the reader keeps are converted, names,
stacks and launch dimensions are dictionary-encoded while parsing, and each distinct NVTX
stack or ``(x, y, z)`` is parsed once::

    "ID","Kernel Name","Grid Size",...,"dram__bytes_read.sum","gpu__time_duration.sum"
    "","","",...,"Kbyte","us"
    "0","gemm","(8, 4, 4)",...,"530.176","8.032"
    -> launches: ncu_id 0, name "gemm", grid_x/_y/_z 8, 4, 4 ...
       metrics:  dram__bytes_read.sum 530176.0, gpu__time_duration.sum 8032.0  (base units)

A metric column pyarrow could not read as numbers (thousands separators ``530,176``,
``n/a``) is converted here: separators dropped, ``n/a`` and blanks null. One holding text
(``launch__func_cache_config`` = ``CachePreferNone``) is left out when its unit is blank, and
is an error otherwise; a column mixing numbers and text is corrupt. The errors are the ones
the row-by-row reader gave, cell for cell.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest.arrow_columns import NameTable, from_numpy, one_chunk, string_array, to_numpy, validity
from profiler_core.ingest.ncu_nvtx import nvtx_stack, strip_nvtx_rename
from profiler_core.ingest.ncu_units import parse_dim3
from profiler_core.record_columns import NcuColumns

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from profiler_core.ingest.ncu_csv import RawLayout

MISSING = ("", "n/a", "N/A")
_DIMENSIONS = ("Grid Size", "Block Size")
_INTEGERS = ("ID", "Process ID", "Context", "Stream", "Device")
_TEXT_COLUMNS = ("Kernel Name", *_DIMENSIONS)
_BLOCK_BYTES = 1 << 24  # 16 MB per parse block: fewer, larger blocks infer column types from more rows
_CONVERSION = re.compile(r"In CSV column #(\d+): CSV conversion error")


def read_raw_columns(layout: RawLayout) -> NcuColumns:
    """The launches and metric columns of a raw page, in the file's row order (sorted later)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    keep = [layout.header[i] for i in layout.identity] + layout.metric_names
    text_types = {layout.header[i]: pa.dictionary(pa.int32(), pa.string())
                  for i in layout.identity if layout.header[i] in (*_TEXT_COLUMNS, layout.nvtx_name)}
    strings: dict[str, Any] = {}
    bad_rows: list[str] = []

    def invalid(row: pacsv.InvalidRow) -> str:
        text = (row.text or "").strip()
        if row.actual_columns == 1 and (not text or text.startswith("==")):
            return "skip"  # ncu's trailing ==PROF== messages
        where = f"row {row.number}" if row.number is not None else "a row"
        bad_rows.append(f"{where} has {row.actual_columns} fields, the header {len(layout.header)}")
        return "error"

    inferred: pa.Schema | None = None
    for attempt in range(2):
        try:
            with layout.open_at_header() as handle:
                reader = pacsv.open_csv(
                    handle,
                    read_options=pacsv.ReadOptions(skip_rows_after_names=1, block_size=_BLOCK_BYTES),
                    parse_options=pacsv.ParseOptions(invalid_row_handler=invalid),
                    convert_options=pacsv.ConvertOptions(
                        include_columns=keep, column_types={**strings, **text_types}, null_values=list(MISSING),
                        strings_can_be_null=False, quoted_strings_can_be_null=True,
                    ),
                )
                inferred = reader.schema
                table = reader.read_all()
            break
        except pa.ArrowException as err:
            if bad_rows:
                raise ArtifactFormatError(
                    f"{layout.path}: {bad_rows[0]}: the export is truncated or corrupt") from err
            if attempt or not _CONVERSION.search(str(err)) or "utf8" in str(err).lower():
                raise ArtifactFormatError(f"{layout.path}: {_reason(err)}; {layout.hint}") from err
            # The column types come from the first block; a later block holds a value they cannot
            # (``1,024`` after rows of ``998``): read the numeric columns as text this time and
            # convert them here.
            names = keep if inferred is None else inferred.names
            strings = {name: pa.string() for name in names if name not in text_types}
    try:
        launches = _launches(layout, table)
        metrics = _metrics(layout, table)
    except pa.ArrowException as err:  # a cell that is not UTF-8 text, in a column read as bytes
        raise ArtifactFormatError(f"{layout.path}: {_reason(err)}; {layout.hint}") from err
    return NcuColumns(path=layout.path, launches=launches, metrics=metrics,
                      metrics_returned=frozenset(), source="csv", units={})


def _reason(err: Exception) -> str:
    text = str(err).splitlines()[0]
    if "utf8" in text.lower() or "UTF8" in text:
        return "not UTF-8 text"
    return f"malformed CSV ({text})"


def _launches(layout: RawLayout, table: pa.Table) -> pa.Table:
    import numpy as np
    import pyarrow as pa

    rows = table.num_rows
    columns: dict[str, Any] = {}
    for column in _INTEGERS:
        target = {"ID": "ncu_id", "Process ID": "process_id"}.get(column, column.lower())
        columns[target] = _integers(layout, table, column) if column in table.column_names else \
            pa.nulls(rows, pa.int64())
    if columns["ncu_id"].null_count:
        first = int(np.flatnonzero(~validity(columns["ncu_id"]))[0])
        raise ArtifactFormatError(f"{layout.path}: row {first + 3} has no ID")
    stacks, stack_codes = _stacks(layout, table)
    names = _names(table, stacks, stack_codes)
    for column, prefix in zip(_DIMENSIONS, ("grid", "block"), strict=True):
        for axis, values in zip("xyz", _dimensions(layout, table, column), strict=True):
            columns[f"{prefix}_{axis}"] = values
    stack_type = pa.list_(pa.string())
    flat = [text for stack in stacks for text in stack]
    offsets = np.zeros(len(stacks) + 1, dtype=np.int32)
    np.cumsum([len(stack) for stack in stacks], out=offsets[1:])
    distinct = pa.ListArray.from_arrays(from_numpy(offsets), string_array(flat), type=stack_type)
    return pa.table({
        "ncu_id": columns["ncu_id"], "name": names,
        **{k: columns[k] for k in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")},
        "stream": columns["stream"], "device": columns["device"],
        "nvtx_stack": pa.DictionaryArray.from_arrays(from_numpy(stack_codes), distinct),
        "process_id": columns["process_id"], "context": columns["context"],
    })


def _integers(layout: RawLayout, table: pa.Table, column: str) -> pa.Array:
    """An identity column as int64: ncu's integers, perhaps with separators; blank or n/a is null."""
    import numpy as np
    import pyarrow as pa

    array = one_chunk(table.column(column))
    if pa.types.is_integer(array.type) or pa.types.is_null(array.type):
        return array.cast(pa.int64())
    values: list[int | None] = []
    for line, cell in enumerate(array.cast(pa.string()).to_pylist(), start=3):
        if cell is None or cell in MISSING:
            values.append(None)
            continue
        try:
            values.append(int(cell.replace(",", "")))
        except ValueError:
            raise ArtifactFormatError(
                f"{layout.path}: row {line}: column {column!r} holds {cell[:60]!r}, not an integer"
            ) from None
    mask = np.array([v is None for v in values], dtype=bool)
    return from_numpy(np.array([0 if v is None else v for v in values], dtype=np.int64), mask=mask)


def _stacks(layout: RawLayout, table: pa.Table) -> tuple[list[tuple[str, ...]], np.ndarray]:
    """Distinct NVTX stacks (parsed once each) and each row's index among them."""
    import numpy as np

    if layout.nvtx_name is None:
        return [()], np.zeros(table.num_rows, dtype=np.int32)
    cells = one_chunk(table.column(layout.nvtx_name))
    return [nvtx_stack(cell) for cell in cells.dictionary.to_pylist()], to_numpy(cells.indices)


def _names(table: pa.Table, stacks: list[tuple[str, ...]], stack_codes: np.ndarray) -> pa.DictionaryArray:
    """Kernel names, less the ``<range>/`` prefix ncu adds with ``--print-nvtx-rename kernel``."""
    import numpy as np

    names = one_chunk(table.column("Kernel Name"))
    if not any(stacks):
        return names
    texts, codes = names.dictionary.to_pylist(), to_numpy(names.indices).astype(np.int64)
    pairs, rows = np.unique(codes * len(stacks) + stack_codes, return_inverse=True)
    renamed = NameTable()
    remap = np.array([renamed.code(strip_nvtx_rename(texts[pair // len(stacks)], stacks[pair % len(stacks)]))
                      for pair in pairs.tolist()], dtype=np.int32)
    return renamed.array(remap[rows.reshape(-1)])


def _dimensions(layout: RawLayout, table: pa.Table, column: str) -> tuple[pa.Array, pa.Array, pa.Array]:
    """``(x, y, z)`` columns of a ``"(512, 1, 1)"`` column, null where ncu printed none."""
    import numpy as np

    cells = one_chunk(table.column(column))
    texts = cells.dictionary.to_pylist()
    codes = to_numpy(cells.indices)
    parsed = np.zeros((len(texts) + 1, 3), dtype=np.int64)
    missing = np.zeros(len(texts) + 1, dtype=bool)
    present, first_row = np.unique(codes, return_index=True)  # where each distinct cell first appears
    line_of = dict(zip(present.tolist(), (first_row + 3).tolist(), strict=True))
    for k, cell in enumerate(texts):
        dims = _dim3(layout, cell, column, line_of.get(k, 0))
        if dims is None:
            missing[k] = True
        else:
            parsed[k] = dims
    values, mask = parsed[codes], missing[codes]
    x, y, z = (from_numpy(np.ascontiguousarray(values[:, axis]), mask=mask) for axis in range(3))
    return x, y, z


def _dim3(layout: RawLayout, cell: str, column: str, line: int) -> tuple[int, int, int] | None:
    return parse_dim3(cell, column, f"{layout.path}: row {line}")


def _metrics(layout: RawLayout, table: pa.Table) -> pa.Table:
    """One float64 column per metric, in base units; text-valued metrics are left out (and recorded)."""
    import pyarrow as pa

    columns: dict[str, pa.Array] = {}
    for name in layout.metric_names:
        array = one_chunk(table.column(name))
        if pa.types.is_string(array.type):
            array = _numbers_of_text(layout, name, array)
            if array is None:
                continue
        elif not (pa.types.is_integer(array.type) or pa.types.is_floating(array.type) or pa.types.is_null(array.type)):
            array = _numbers_of_text(layout, name, array.cast(pa.string()))
            if array is None:
                continue
        array = array.cast(pa.float64())
        if array.null_count < len(array):
            layout.numeric.add(name)
        scale = layout.scales[name]
        if scale != 1.0:
            array = from_numpy(to_numpy(array) * scale, mask=~validity(array) if array.null_count else None)
        columns[name] = array
    return pa.table(columns)


def _numbers_of_text(layout: RawLayout, name: str, array: pa.Array) -> pa.Array | None:
    """Numbers of a text column (separators dropped, n/a null), or None for a text-valued metric."""
    import pyarrow as pa
    import pyarrow.compute as pc

    missing = pc.is_in(array, value_set=string_array(list(MISSING)))
    cleaned = pc.if_else(missing, pa.nulls(len(array), pa.string()), pc.replace_substring(array, ",", ""))
    try:
        return pc.cast(cleaned, pa.float64())
    except pa.ArrowInvalid:
        pass
    values: list[float | None] = []
    text = numeric = False
    for line, cell in enumerate(array.to_pylist(), start=3):
        if cell in MISSING:
            values.append(None)
            continue
        try:
            values.append(float(cell.replace(",", "")))
            numeric = True
        except ValueError:
            if layout.units.get(name) != "":
                raise ArtifactFormatError(
                    f"{layout.path}: row {line}: metric {name!r} has the non-numeric value {cell[:60]!r}: "
                    "the export is corrupt"
                ) from None
            text = True
            values.append(None)
    if text:
        layout.text.add(name)
        if numeric:
            layout.numeric.add(name)
        return None
    import numpy as np

    mask = np.array([v is None for v in values], dtype=bool)
    return from_numpy(np.array([0.0 if v is None else v for v in values], dtype=np.float64), mask=mask)
