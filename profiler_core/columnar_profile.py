"""The columnar form of a large profile: profile.json (coverage, metadata, pointers) + Parquet tables.

    profile.json                     schema version 1, ``kernels: []``, ``operators: []``,
                                     ``kernel_table: {"format": "parquet", "path": "profile.kernels.<gen>.parquet",
                                     "kernel_count": N, "bytes": B, "sha256": H}``, ``operator_table: {...}``
    profile.kernels.<gen>.parquet    one row per kernel, in kernel-id order (columns: docs/attribution.md)
    profile.operators.<gen>.parquet  one row per operator, in profile order (attribution/operator_parquet.py)

The three change as one set (profiler_core/columnar_files.py): a new generation's tables
first, then profile.json (temp file, rename), then the old tables are removed, so a reader
sees the old set or the new one. Tables are read through the input gate every reader uses and
checked against the size and SHA-256 profile.json records. ``read_profile`` loads them into a
``KernelTable`` (attribution/kernel_table.py) and ``OperatorColumns``: ``profile.kernels`` and
``profile.operators`` then build each model on access, so diagnose, report, compare and export
read the columnar form unchanged. pyarrow is imported here only, when a large profile is written
or read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from profiler_core.attribution.columns import NONE, ArrowStrings, Interner, unique_ints
from profiler_core.attribution.kernel_table import SOURCES, TIERS, EvidenceColumns, KernelTable, padded_counters
from profiler_core.attribution.operator_table import OperatorTable
from profiler_core.attribution.profile_meta import TIER_CONFIDENCE, TIER_ORDER
from profiler_core.columnar_files import read_table_bytes, write_file_set
from profiler_core.errors import SchemaError
from profiler_core.ingest.arrow_columns import filled, from_numpy, string_array, to_numpy, validity
from profiler_core.schema import KernelTableRef, OperatorTableRef, Profile

_CHUNK = 20_000  # operators serialised per batch


def _strings(codes: np.ndarray, strings: list[Any]) -> Any:
    import pyarrow as pa

    uniq, inverse = unique_ints(codes, inverse=True)
    values = [strings[c] for c in uniq.tolist()]
    none = np.array([v is None for v in values] + [False])[inverse] if len(values) else np.zeros(0, dtype=bool)
    dictionary = string_array(["" if v is None else v for v in values])
    return pa.DictionaryArray.from_arrays(from_numpy(inverse.astype(np.int32), mask=none), dictionary)


def _ints(values: np.ndarray, none: np.ndarray | None = None) -> Any:

    return from_numpy(values.astype(np.int64), mask=(values == NONE) if none is None else none)


def _operator_key_column(operator: np.ndarray, keys: Sequence[str], arrow_keys: Any | None) -> Any:
    """Each kernel's operator key, dictionary-encoded by the keys its kernels name, in operator order
    (null: no operator). ``arrow_keys``: ``keys`` as an Arrow string array, when one is made already:
    where every operator has a kernel it is the dictionary itself, not 772k strings made again."""
    import pyarrow as pa

    n = len(keys)
    codes = np.where(operator == NONE, n, operator)
    if arrow_keys is not None and n and np.bincount(codes, minlength=n + 1)[:n].all():
        unnamed = codes == n
        # the codes are the dictionary's positions; a kernel of no operator points past the keys
        dictionary = pa.concat_arrays([arrow_keys, string_array([""])]) if unnamed.any() else arrow_keys
        return pa.DictionaryArray.from_arrays(from_numpy(codes.astype(np.int32), mask=unnamed), dictionary)
    return _strings(codes, [*keys, None])


def to_arrow(t: KernelTable, arrow_keys: Any | None = None) -> Any:
    """The kernel table as an Arrow table (the Parquet file's columns); ``arrow_keys``: its operator
    keys as an Arrow string array, when the operator table's key column is made of them already."""
    import pyarrow as pa

    s = t.strings.values
    dims = np.array(t.dims + [(0, 0, 0)], dtype=np.int64).reshape(-1, 3)
    cols: dict[str, Any] = {"name": _strings(t.name, s), "short_name": _strings(t.short_name, s),
                            "kind": _strings(t.kind, s), "stream": _ints(t.stream, np.zeros(len(t), bool)),
                            "device": _ints(t.device, np.zeros(len(t), bool)),
                            "start_ns": from_numpy(t.start_ns), "end_ns": from_numpy(t.end_ns),
                            "duration_ns": from_numpy(t.end_ns - t.start_ns)}
    for label, codes in (("grid", t.grid), ("block", t.block)):
        for axis, xyz in enumerate("xyz"):
            cols[f"{label}_{xyz}"] = _ints(dims[codes, axis], codes == NONE)
    for label in ("registers_per_thread", "static_smem_bytes", "dynamic_smem_bytes"):
        cols[label] = _ints(getattr(t, label))
    src = [v.value for v in SOURCES]
    cols["counter_source"] = _strings(t.counter_source.astype(np.int64), src)
    cols["ncu_id"] = _ints(t.ncu_id)
    cols["inherited_from"] = _ints(t.inherited_from)
    if t.have_counters:
        rows = np.where(t.counter_row != NONE, t.counter_row, len(t.counter_values))
        padded = padded_counters(t.counter_values)
        for c, f in enumerate(t.counter_fields):
            values = padded[rows, c]
            cols[f"counters.{f}"] = from_numpy(values, mask=np.isnan(values))
    cols["operator_key"] = _operator_key_column(t.operator, t.operator_keys, arrow_keys)
    cols["tier"] = _strings(t.tier.astype(np.int64), [x.value for x in TIERS])
    cols["confidence"] = _strings(t.tier.astype(np.int64), [TIER_CONFIDENCE[x].value for x in TIERS])
    for tier, ev in zip(TIER_ORDER, t.evidence, strict=True):
        none = np.full(len(t), t.strings.codes[None])
        cols[f"evidence.{tier.value}.operator"] = _strings(np.where(ev.has, ev.operator, none), s)
        cols[f"evidence.{tier.value}.op_id"] = _ints(ev.op_id, ~ev.has | (ev.op_id == NONE))
        cols[f"evidence.{tier.value}.detail"] = _strings(np.where(ev.has, ev.detail, none), s)
    cols["tiers_agree"] = from_numpy(t.tiers_agree == 1, mask=t.tiers_agree == NONE)
    cols["reason"] = _strings(t.reason, s)
    cols["fused_with"] = _strings(t.fused_with, [json.dumps(list(f)) for f in t.fused])
    cols["graph_id"] = _ints(t.graph_id, ~t.graph_id_known)
    cols["library"] = _strings(t.library, s)
    cols["module_path"] = _strings(t.module_path, s)
    meta = {b"oprof.counter_fields": json.dumps(list(t.counter_fields)).encode(),
            b"oprof.have_counters": b"1" if t.have_counters else b"0", b"oprof.schema_version": b"1"}
    return pa.table(cols).replace_schema_metadata(meta)


def write_columnar_profile(path: str | os.PathLike[str], profile: Profile) -> Path:
    """Write ``profile`` (kernels as a KernelTable) as profile.json + its Parquet tables, as one set.

    Operators kept as columns (an ``OperatorTable`` from the engine, or ``OperatorColumns`` read
    back) go to the operators table; a plain list of models stays in profile.json. The tables are
    named by a fresh generation and written first, profile.json last (profiler_core/columnar_files.py).
    """
    import pyarrow.parquet as pq

    from profiler_core.atomic_write import write_stream_atomic

    table = profile.kernels
    if not isinstance(table, KernelTable):
        raise TypeError("write_columnar_profile needs a profile whose kernels are a KernelTable")
    target = Path(path)
    # Each table is made into Arrow as its file is written and let go after: the kernel table's
    # Arrow copy (400 MB at 1M kernels) is gone before the operators' is made.
    def write(arrow: Any, handle: IO[bytes]) -> None:
        # no min/max statistics: the reader never filters by them, and at 1M kernels working them
        # out (every string column's too) is 0.2 s of the write's CPU
        pq.write_table(arrow, handle, compression="zstd", write_statistics=False)

    # the engine's kernels name their operators by the operator table's own list of keys: made into
    # Arrow once, it is the operator table's key column and the kernel table's dictionary of keys
    ops = profile.operators
    arrow_keys = (string_array(ops.keys) if isinstance(ops, OperatorTable) and ops.keys is table.operator_keys
                  else None)
    tables: dict[str, Any] = {"kernels": lambda handle: write(to_arrow(table, arrow_keys), handle)}
    operator_rows: list[int] = []
    if _operator_arrow(ops, make=False):

        def write_operators(handle: IO[bytes]) -> None:
            arrow = _operator_arrow(ops, arrow_keys=arrow_keys)
            operator_rows.append(arrow.num_rows)
            write(arrow, handle)

        tables["operators"] = write_operators

    def write_json(refs: dict[str, tuple[str, int, str]]) -> Path:
        name, size, digest = refs["kernels"]
        ref = KernelTableRef(path=name, kernel_count=len(table), bytes=size, sha256=digest)
        op_ref = None
        if "operators" in refs:
            name, size, digest = refs["operators"]
            op_ref = OperatorTableRef(path=name, operator_count=operator_rows[-1], bytes=size, sha256=digest)
        return write_stream_atomic(target, lambda handle: _write_json(handle, profile, ref, op_ref))

    return write_file_set(target, tables, write_json)


def _operator_arrow(ops: Any, *, make: bool = True, arrow_keys: Any | None = None) -> Any:
    """The operators as an Arrow table, when they are columns; None for a list of models
    (``make=False``: only whether they are columns; ``arrow_keys``: an OperatorTable's keys as an
    Arrow string array, made already)."""
    from profiler_core.attribution.operator_parquet import OperatorColumns, operators_to_arrow

    if isinstance(ops, OperatorTable):
        return operators_to_arrow(ops, arrow_keys) if make else True
    if isinstance(ops, OperatorColumns):
        return ops.arrow if make else True
    return None


def _write_json(out: IO[bytes], profile: Profile, ref: KernelTableRef, op_ref: OperatorTableRef | None) -> None:
    def dump(model: Any) -> bytes:
        return model.__pydantic_serializer__.to_json(model)

    out.write(b'{"schema_version":1,"capture":' + dump(profile.capture) + b',"operators":[')
    ops = [] if op_ref is not None else profile.operators
    records = getattr(ops, "record", None)
    for lo in range(0, len(ops), _CHUNK):
        chunk = [records(g, shapes_as_lists=False) if records else ops[g].model_dump()
                 for g in range(lo, min(lo + _CHUNK, len(ops)))]
        for rec in chunk:
            if rec.get("phase") is None:
                rec.pop("phase", None)
        body = orjson.dumps(chunk)[1:-1]
        out.write((b"," if lo else b"") + body)
    out.write(b'],"kernels":[],"unattributed":[' + b",".join(dump(u) for u in profile.unattributed) + b"]")
    out.write(b',"coverage":' + dump(profile.coverage) + b',"counters":[')
    out.write(b",".join(dump(c) for c in profile.counters))
    out.write(b'],"warnings":' + orjson.dumps(profile.warnings) + b',"kernel_table":' + dump(ref))
    out.write((b',"operator_table":' + dump(op_ref) if op_ref is not None else b"") + b"}")


def _parquet_bytes(profile_path: Path, ref: Any, what: str, listed: int) -> Any:
    """The bytes of the Parquet table ``ref`` points at, checked against its size and digest."""
    if listed:
        raise SchemaError(f"{profile_path}: lists {what.split('_')[0]}s and a {what.replace('_', ' ')}; "
                          "a profile holds one or the other")
    return read_table_bytes(profile_path, ref, what)


def _parse_parquet(profile_path: Path, ref: Any, what: str, rows: int, data: Any,
                   columns: list[str] | None = None) -> Any:
    """The table in ``data`` (the bytes of ``ref``'s file), or only its ``columns``, checked against its row count."""
    parquet = profile_path.parent / ref.path
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        # ParquetFile, not read_table: the latter goes through pyarrow.dataset, whose import pulls
        # in pandas (0.3 s) for the same table
        arrow = pq.ParquetFile(pa.BufferReader(data)).read(columns=columns)
    except (pa.ArrowException, OSError) as err:
        raise _unreadable(parquet, what, err) from err
    _check_rows(profile_path, parquet, arrow.num_rows, rows)
    return arrow


def _unreadable(parquet: Path, what: str, err: Exception) -> SchemaError:
    said = " ".join(str(err).split())  # Arrow's message may run over several lines
    return SchemaError(f"{parquet}: not a readable Parquet {what.replace('_', ' ')} ({said}); the file is "
                       "truncated or damaged: re-run 'oprof attribute'")


def _check_rows(profile_path: Path, parquet: Path, found: int, rows: int) -> None:
    if found != rows:
        raise SchemaError(f"{parquet}: {found} rows, but {profile_path.name} says {rows}; re-run 'oprof attribute'")


def _key_column(profile_path: Path, ref: Any, data: Any) -> Any:
    """The operator table's key column alone (None without one): decoded before the kernel table is,
    while the whole operator table is decoded once the kernel table is built (the kernel columns
    not read yet stay Arrow until first read, the rest is released)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        names = pq.ParquetFile(pa.BufferReader(data)).schema_arrow.names
    except (pa.ArrowException, OSError):
        return None  # reading the whole table names the damage
    if "key" not in names:
        return None
    keys = _parse_parquet(profile_path, ref, "operator_table", ref.operator_count, data, ["key"])
    return keys.column("key").combine_chunks()


class _ParquetColumns:
    """A Parquet table's schema and row count, each column decoded when first read, from the file's
    bytes as read and checked once (never the file again). The kernel table is read this way: a
    command decodes only the columns it uses (every column of 1M kernels: 0.55 GB of Arrow)."""

    def __init__(self, parquet: Path, what: str, data: Any) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._parquet, self._what = parquet, what
        try:
            self._file = pq.ParquetFile(pa.BufferReader(data))
            self.schema = self._file.schema_arrow
        except (pa.ArrowException, OSError) as err:
            raise _unreadable(parquet, what, err) from err
        self.num_rows = self._file.metadata.num_rows

    def column(self, name: str) -> _ParquetColumn:
        if self.schema.get_field_index(name) < 0:
            raise KeyError(f"no column '{name}'")
        return _ParquetColumn(self, name)

    def read(self, name: str) -> Any:
        import pyarrow as pa

        try:
            return self._file.read(columns=[name]).column(0)
        except (pa.ArrowException, OSError) as err:
            raise _unreadable(self._parquet, self._what, err) from err


class _ParquetColumn:
    """One column of a :class:`_ParquetColumns`, decoded when asked for (``combine_chunks``)."""

    __slots__ = ("_name", "_table")

    def __init__(self, table: _ParquetColumns, name: str) -> None:
        self._table, self._name = table, name

    def combine_chunks(self) -> Any:
        return self._table.read(self._name).combine_chunks()


def _open_parquet(profile_path: Path, ref: Any, what: str, rows: int, data: Any) -> _ParquetColumns:
    """The table in ``data`` (the bytes of ``ref``'s file), its columns decoded when read, checked
    against its row count."""
    parquet = profile_path.parent / ref.path
    table = _ParquetColumns(parquet, what, data)
    _check_rows(profile_path, parquet, table.num_rows, rows)
    return table


def attach_kernel_table(profile_path: Path, profile: Profile) -> None:
    """Load the Parquet tables a profile.json points at into ``profile.kernels`` / ``profile.operators``."""
    ref = profile.kernel_table
    assert ref is not None
    arrow = _open_parquet(profile_path, ref, "kernel_table", ref.kernel_count,
                          _parquet_bytes(profile_path, ref, "kernel_table", len(profile.kernels)))
    parquet = profile_path.parent / ref.path
    op_ref = profile.operator_table
    op_data = listed = None
    if op_ref is not None:
        op_data = _parquet_bytes(profile_path, op_ref, "operator_table", len(profile.operators))
        listed = _key_column(profile_path, op_ref, op_data)
    try:
        kernels = from_arrow(arrow, listed)
    except (KeyError, ValueError, TypeError) as err:
        raise SchemaError(f"{parquet}: not an oprof kernel table ({type(err).__name__}: {err}); "
                          "re-run 'oprof attribute'") from err
    del arrow, listed
    fields = {**profile.__dict__, "kernels": kernels}
    if op_ref is not None:
        from profiler_core.attribution.operator_parquet import OperatorColumns

        op_arrow = _parse_parquet(profile_path, op_ref, "operator_table", op_ref.operator_count, op_data)
        del op_data
        try:
            fields["operators"] = OperatorColumns(op_arrow)
        except (KeyError, ValueError, TypeError, AttributeError) as err:
            raise SchemaError(f"{profile_path.parent / op_ref.path}: not an oprof operator table "
                              f"({type(err).__name__}: {err}); re-run 'oprof attribute'") from err
    object.__setattr__(profile, "__dict__", fields)


def columnar_references(profile: Profile) -> None:
    """profile_io.check_references for a profile whose kernels are a KernelTable, on the columns."""
    from profiler_core.attribution.table_checks import table_references

    table_references(profile)


def columnar_problem(profile: Profile) -> str | None:
    """profile_checks.profile_problem for a profile whose kernels are a KernelTable, on the columns."""
    from profiler_core.attribution.table_checks import table_problem
    from profiler_core.profile_checks import MAX_DURATION_NS

    return table_problem(profile, MAX_DURATION_NS)


def _dim_codes(dims: Interner, parts: list[np.ndarray]) -> list[np.ndarray]:
    """``dims``' codes of every (x, y, z) row of ``parts``, each part's rows in order: the codes
    :meth:`Interner.code` gives the rows one by one (first seen, first coded), found by sorting
    one packed key per row. A launch dimension too large for the key (CUDA's limits fit: x below
    2**31, y and z below 2**16) is coded row by row instead."""
    rows = np.concatenate(parts) if parts else np.zeros((0, 3), dtype=np.int64)
    if len(rows) and (len(dims) or (rows < 0).any() or rows[:, 0].max() >= 1 << 31 or rows[:, 1:].max() >= 1 << 16):
        flat = np.fromiter((dims.code(tuple(v)) for v in rows.tolist()), dtype=np.int64, count=len(rows))
    elif len(rows):
        key = (rows[:, 0] << 32) | (rows[:, 1] << 16) | rows[:, 2]
        order = np.argsort(key, kind="stable")
        ordered = key[order]
        starts = np.empty(len(key), dtype=bool)
        starts[0] = True
        np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
        group = np.cumsum(starts) - 1  # per sorted row: its distinct value's rank by key
        first = order[starts]  # each distinct value's first row (the sort is stable)
        by_first = np.argsort(first, kind="stable")
        code = np.empty(len(first), dtype=np.int64)
        code[by_first] = np.arange(len(first)) + len(dims)
        for value in rows[first[by_first]].tolist():
            dims.code(tuple(value))
        flat = np.empty(len(key), dtype=np.int64)
        flat[order] = code[group]
    else:
        flat = np.zeros(0, dtype=np.int64)
    return np.split(flat, np.cumsum([len(part) for part in parts])[:-1]) if parts else []


def _operator_keys(column: Any, listed: Any = None) -> tuple[Sequence[str], np.ndarray]:
    """The kernel table's operator keys and each kernel's code into them (NONE: no operator).

    The column's dictionary holds each key once (as written): it is kept as Arrow, a Python list
    only when asked for. A dictionary that repeats a key or holds a null is coded key by key.
    ``listed``: the operator table's key column. A dictionary equal to it (as written) is not
    searched for repeats here: reading the profile checks the operator keys are distinct.
    """
    import pyarrow.compute as pc

    dictionary = column.dictionary
    if dictionary.null_count == 0 and (
            (listed is not None and dictionary.type == listed.type and dictionary.equals(listed))
            or pc.count_distinct(dictionary).as_py() == len(dictionary)):
        return ArrowStrings(dictionary), filled(column.indices, NONE).astype(np.int64)
    keys = Interner()
    table = np.array([NONE if v is None else keys.code(v) for v in dictionary.to_pylist()] + [NONE], dtype=np.int64)
    return keys.values, table[filled(column.indices, len(dictionary)).astype(np.int64)]


_INT_COLUMNS = ("stream", "device", "start_ns", "end_ns", "registers_per_thread", "static_smem_bytes",
                "dynamic_smem_bytes", "ncu_id", "inherited_from", "graph_id",
                *(f"{label}_{axis}" for label in ("grid", "block") for axis in "xyz"),
                *(f"evidence.{tier.value}.op_id" for tier in TIER_ORDER))
_CODE_COLUMNS = ("name", "short_name", "kind", "counter_source", "operator_key", "tier", "reason", "fused_with",
                 "library", "module_path",
                 *(f"evidence.{tier.value}.{part}" for tier in TIER_ORDER for part in ("operator", "detail")))


def _check_columns(arrow: Any, fields: Sequence[str], have_counters: bool) -> None:
    """Raises ValueError naming the first column of the kernel table that is missing or of another type
    than :func:`to_arrow` writes: checked when the table is read, since most columns are decoded later."""
    import pyarrow as pa

    kinds: list[tuple[Sequence[str], Any, str]] = [
        (_INT_COLUMNS, pa.types.is_integer, "integers"),
        (_CODE_COLUMNS, lambda t: pa.types.is_dictionary(t) and pa.types.is_string(t.value_type)
         and pa.types.is_integer(t.index_type), "dictionary-encoded strings"),
        (("tiers_agree",), pa.types.is_boolean, "booleans"),
        ([f"counters.{f}" for f in fields] if have_counters else [], pa.types.is_floating, "floats")]
    schema = arrow.schema
    for names, is_kind, what in kinds:
        for name in names:
            index = schema.get_field_index(name)
            if index < 0:
                raise ValueError(f"no column '{name}'")
            if not is_kind(schema.field(index).type):
                raise ValueError(f"column '{name}' holds {schema.field(index).type}, not {what}")


def from_arrow(arrow: Any, listed: Any = None) -> KernelTable:
    """A KernelTable from the Parquet file's columns (inverse of :func:`to_arrow`); ``listed``: the
    operator table's key column, if the profile has one (see :func:`_operator_keys`).

    The columns are checked here, and the operator keys and the strings' codes worked out (codes
    are given in first-seen order, so the dictionaries are interned in one fixed order); every
    other column becomes numpy when first read (:meth:`KernelTable.deferred`), and each function
    that decodes one holds only its own Arrow columns.
    """
    strings = Interner()
    strings.code(None)
    meta = arrow.schema.metadata or {}
    fields = tuple(json.loads(meta[b"oprof.counter_fields"]))
    have_counters = meta[b"oprof.have_counters"] == b"1"
    n = arrow.num_rows
    _check_columns(arrow, fields, have_counters)

    def col(name: str) -> Any:
        return arrow.column(name).combine_chunks()

    def coder(name: str, into: Interner = strings) -> Callable[[], np.ndarray]:
        """Interns the column's dictionary now; the function gives each row's code."""
        arr = col(name)
        values = arr.dictionary.to_pylist()
        table = np.array([into.code(v) for v in values] + [into.code(None)], dtype=np.int64)
        indices = arr.indices
        return lambda: table[filled(indices, len(values)).astype(np.int64)]

    def inter(name: str) -> Callable[[], np.ndarray]:
        column = arrow.column(name)
        return lambda: filled(column.combine_chunks(), NONE).astype(np.int64)

    pending: dict[str, Callable[[], dict[str, Any]]] = {}

    def later(name: str, values: Callable[[], Any]) -> None:
        pending[name] = lambda: {name: values()}

    fused = Interner()
    fused_with = coder("fused_with", fused)
    fused_values = [tuple(json.loads(v)) if v is not None else () for v in fused.values]
    operator_keys, operator = _operator_keys(col("operator_key"), listed)
    evidence_codes = [(coder(f"evidence.{tier.value}.operator"), inter(f"evidence.{tier.value}.op_id"),
                       coder(f"evidence.{tier.value}.detail")) for tier in TIER_ORDER]
    none = strings.codes[None]

    def evidence() -> dict[str, Any]:
        out = []
        for ops, op_ids, details in evidence_codes:
            o = ops()
            out.append(EvidenceColumns(o != none, o, op_ids(), details()))
        return {"evidence": tuple(out)}

    pending["evidence"] = evidence
    for name in ("name", "short_name", "kind", "reason", "library", "module_path"):
        later(name, coder(name))
    src = Interner()
    for x in SOURCES:
        src.code(x.value)
    source = coder("counter_source", src)
    later("counter_source", lambda: source().astype(np.int8))
    tier_names = Interner()
    for t in TIERS:
        tier_names.code(t.value)
    tiers = coder("tier", tier_names)
    later("tier", lambda: tiers().astype(np.int8))
    later("fused_with", fused_with)
    for name in ("stream", "device", "start_ns", "end_ns", "registers_per_thread", "static_smem_bytes",
                 "dynamic_smem_bytes", "ncu_id", "inherited_from"):
        later(name, inter(name))
    launch_columns = {label: [arrow.column(f"{label}_{a}") for a in "xyz"] for label in ("grid", "block")}

    def launch() -> dict[str, Any]:
        dims = Interner()
        launch = {}
        for label, columns in launch_columns.items():
            xyz = [c.combine_chunks() for c in columns]
            known = validity(xyz[0])
            launch[label] = known, np.stack([filled(c, 0) for c in xyz], axis=1).astype(np.int64)
        codes_of = _dim_codes(dims, [vals[known] for known, vals in launch.values()])
        out: dict[str, Any] = {"dims": dims.values}
        for (label, (known, _)), dim_codes in zip(launch.items(), codes_of, strict=True):
            out[label] = np.full(n, NONE, dtype=np.int64)
            out[label][known] = dim_codes
        return out

    for name in ("grid", "block", "dims"):
        pending[name] = launch
    counter_columns = [arrow.column(f"counters.{f}") for f in fields] if have_counters else []

    def counters() -> dict[str, Any]:
        # filled counter by counter into a (counters, rows) array and handed on transposed: writing a
        # column of a row-major (rows, counters) array strides across memory (1M kernels: 0.53 -> 0.04 s)
        values = np.zeros((len(fields), n))
        for c, column in enumerate(counter_columns):
            values[c] = filled(column.combine_chunks(), np.nan)
        counter_columns.clear()  # KernelTable.counter_column reads the matrix from now on
        return {"counter_values": values.T}

    def counter_column(c: int) -> np.ndarray:
        return filled(counter_columns[c].combine_chunks(), np.nan) if have_counters else np.zeros(n)

    pending["counter_values"] = counters
    later("counter_row", lambda: np.arange(n))
    agree_column = arrow.column("tiers_agree")

    def agree() -> np.ndarray:
        arr = agree_column.combine_chunks()
        return np.where(validity(arr), to_numpy(arr).astype(np.int8), NONE).astype(np.int8)

    later("tiers_agree", agree)
    graph_column = arrow.column("graph_id")

    def graph() -> dict[str, Any]:
        arr = graph_column.combine_chunks()
        return {"graph_id": filled(arr, 0).astype(np.int64), "graph_id_known": validity(arr)}

    pending["graph_id"] = pending["graph_id_known"] = graph
    table = KernelTable.deferred(
        pending, strings=strings, fused=fused_values, operator_keys=operator_keys, counter_fields=fields,
        have_counters=have_counters, operator=operator)
    table.__dict__["_counter_column"] = counter_column
    return table
