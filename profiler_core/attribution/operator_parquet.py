"""A large profile's operators as a Parquet table (profile.operators.parquet), and the lazy view read from it.

One row per operator, in profile order. Columns: ``key``, ``name``, ``call_index``, ``op_id``,
``input_shapes`` (JSON text), ``op_class``, ``execution_context``, ``is_fused``, ``fused_with``
and ``source_nodes`` (JSON arrays as text), ``kernel_ids`` (a list column), ``kernel_count``,
``duration_ns``, ``metrics.<field>`` (one per counter field, null where the value is null),
``metric_null_reasons`` (a JSON object as text), ``confidence``, ``library``, ``layer_role``,
``inherited_from``, ``module_path``, ``phase``. Strings are dictionary-encoded; nulls are None.

:func:`operators_to_arrow` writes an :class:`OperatorTable` column by column (the reasons are
worked out once per distinct pattern of missing counters, not per operator);
:class:`OperatorColumns` is what ``read_profile`` puts in ``profile.operators``: a
``Sequence[Operator]`` that builds each model on access. pyarrow is imported only here and in
profiler_core/columnar_profile.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from profiler_core.attribution.columns import NONE, Positional, distinct_row_dicts
from profiler_core.attribution.operator_table import CONFIDENCES, ROLES, OperatorTable
from profiler_core.ingest.arrow_columns import filled, from_numpy, string_array, to_numpy
from profiler_core.schema import Confidence, ExecutionContext, Operator, OperatorClass, construct_trusted

_BLOCK = 4096  # operators whose metrics are turned into Python floats at a time


def _dict_column(codes: np.ndarray, values: Sequence[str | None]) -> Any:
    """A dictionary-encoded string column (None values are nulls)."""
    import pyarrow as pa

    none = np.array([v is None for v in values] + [True])
    idx = np.where(codes == NONE, len(values), codes)
    dictionary = string_array(["" if v is None else v for v in values] or [""])
    return pa.DictionaryArray.from_arrays(from_numpy(idx.astype(np.int32), mask=none[idx]), dictionary)


def _encode(values: Sequence[Any]) -> tuple[np.ndarray, list[Any]]:
    """Codes and distinct values of a list of hashable values (first-seen order)."""
    distinct = list(dict.fromkeys(values))  # first-seen order
    index = {v: i for i, v in enumerate(distinct)}
    return np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values)), distinct


def _reasons_codes(ops: OperatorTable) -> tuple[np.ndarray, list[str]]:
    """Each operator's ``metric_null_reasons`` as a code into JSON texts, worked out once per distinct pattern."""
    n = len(ops)
    codes = np.zeros(n, dtype=np.int64)
    texts = ["{}"]
    agg = ops.agg
    flagged = np.flatnonzero(agg.flagged) if n else np.zeros(0, dtype=np.int64)
    if len(flagged):
        nulls = np.isnan(agg.values[flagged])
        pattern = np.hstack([agg.missing[flagged], agg.partial[flagged], nulls & agg.partial[flagged],
                             agg.sizes[flagged].reshape(-1, 1)]).astype(np.int64)
        _, first, inverse = np.unique(pattern, axis=0, return_index=True, return_inverse=True)
        for g in flagged[first].tolist():
            texts.append(json.dumps(agg.group(g, ops.specs)[1]))
        codes[flagged] = 1 + inverse.reshape(-1)
    for g in sorted(ops.inherited_note):
        reasons = agg.group(g, ops.specs)[1]
        reasons["_inherited"] = ops.inherited_note[g]
        codes[g] = len(texts)
        texts.append(json.dumps(reasons))
    return codes, texts


def operators_to_arrow(ops: OperatorTable, arrow_keys: Any | None = None) -> Any:
    """The operator table as an Arrow table (the Parquet file's columns, module docstring);
    ``arrow_keys``: its keys as an Arrow string array, when made already."""
    import pyarrow as pa

    n = len(ops)
    shapes_text = [json.dumps(v) if isinstance(v, tuple | list) else None for v in ops.input_shapes]
    fused_text = [json.dumps(list(f)) for f in ops.fused]
    cls_codes, cls_values = _encode(ops.op_class)
    ctx_codes, ctx_values = _encode(ops.context)
    lib_codes, lib_values = _encode(ops.library)
    mod_codes, mod_values = _encode(ops.module_path)
    phase_codes, phase_values = _encode(ops.phase)
    name_codes, name_values = _encode(ops.names)
    fused_sizes = np.array([len(f) for f in ops.fused] + [0], dtype=np.int64)
    rep = ops.inherited_from
    reason_codes, reason_texts = _reasons_codes(ops)
    cols: dict[str, Any] = {
        "key": string_array(ops.keys) if arrow_keys is None else arrow_keys,
        "name": _dict_column(name_codes, name_values),
        "call_index": from_numpy(ops.call_index.astype(np.int64)),
        "op_id": from_numpy(ops.op_id.astype(np.int64), mask=ops.op_id == NONE),
        "input_shapes": _dict_column(ops.shapes, shapes_text),
        "op_class": _dict_column(cls_codes, [c.value for c in cls_values]),
        "execution_context": _dict_column(ctx_codes, [c.value for c in ctx_values]),
        "is_fused": from_numpy(fused_sizes[ops.fused_with] > 0),
        "fused_with": _dict_column(ops.fused_with, fused_text),
        "source_nodes": _dict_column(np.zeros(n, dtype=np.int64), ["[]"]),
        "kernel_ids": pa.LargeListArray.from_arrays(from_numpy(ops.offsets.astype(np.int64)),
                                                    from_numpy(ops.members.astype(np.int64))),
        "kernel_count": from_numpy(np.diff(ops.offsets).astype(np.int64)),
        "duration_ns": from_numpy(ops.duration_ns.astype(np.int64)),
    }
    for c, spec in enumerate(ops.specs):
        values = ops.agg.values[:, c]
        cols[f"metrics.{spec.field}"] = from_numpy(values, mask=np.isnan(values))
    cols["metric_null_reasons"] = _dict_column(reason_codes, reason_texts)
    cols["confidence"] = _dict_column(ops.confidence.astype(np.int64), [c.value for c in CONFIDENCES])
    cols["library"] = _dict_column(lib_codes, lib_values)
    cols["layer_role"] = _dict_column(ops.layer_role.astype(np.int64), list(ROLES))
    cols["inherited_from"] = string_array([None if r == NONE else ops.keys[r] for r in rep.tolist()]) \
        if (rep != NONE).any() else pa.nulls(n, type=pa.string())
    cols["module_path"] = _dict_column(mod_codes, mod_values)
    cols["phase"] = _dict_column(phase_codes, phase_values)
    meta = {b"oprof.metric_fields": json.dumps([s.field for s in ops.specs]).encode(),
            b"oprof.schema_version": b"1"}
    return pa.table(cols).replace_schema_metadata(meta)


class _Strings:
    """A dictionary column as (codes, values): code -1 is None."""

    __slots__ = ("codes", "values")

    def __init__(self, arr: Any, convert: Any = None) -> None:
        arr = arr.dictionary_encode() if not hasattr(arr, "dictionary") else arr
        values = arr.dictionary.to_pylist()
        # "" stands in the dictionary for None (a null row): never a JSON text or an enum value
        self.values = [convert(v) if v else None for v in values] if convert else values
        self.codes = filled(arr.indices, NONE).astype(np.int64)

    def __getitem__(self, g: int) -> Any:
        c = self.codes[g]
        return None if c == NONE else self.values[c]


def strings_distinct(array: Any) -> bool:
    """Whether an Arrow string column holds no null and no value twice: one hash pass of Arrow's
    (772k operator keys: about 0.09 s once its memory is warm, where a dict of them takes 0.23 s)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    flat = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
    return flat.null_count == 0 and len(pc.dictionary_encode(flat).dictionary) == len(flat)


class OperatorColumns(Positional[Operator]):
    """Operators read from profile.operators.parquet: a read-only ``Sequence[Operator]`` built on access."""

    def __init__(self, arrow: Any) -> None:
        self.arrow = arrow  # kept: writing the profile again writes this table as it is
        meta = arrow.schema.metadata or {}
        self.metric_fields: tuple[str, ...] = tuple(json.loads(meta[b"oprof.metric_fields"]))

        def col(name: str) -> Any:
            return arrow.column(name).combine_chunks()

        def ints(name: str) -> np.ndarray:
            return filled(col(name), NONE).astype(np.int64)

        self.n = arrow.num_rows
        self.keys = col("key")  # an Arrow array: one Python string per operator only when asked
        self.name = _Strings(col("name"))
        self.call_index, self.op_id = ints("call_index"), ints("op_id")
        self.shapes = _Strings(col("input_shapes"), json.loads)
        self.op_class = _Strings(col("op_class"), OperatorClass)
        self.context = _Strings(col("execution_context"), ExecutionContext)
        self.is_fused = to_numpy(col("is_fused"))
        self.fused_with = _Strings(col("fused_with"), json.loads)
        self.source_nodes = _Strings(col("source_nodes"), json.loads)
        ids = col("kernel_ids")
        self.offsets = to_numpy(ids.offsets).astype(np.int64)
        self.members = to_numpy(ids.values).astype(np.int64)
        self.kernel_count, self.duration_ns = ints("kernel_count"), ints("duration_ns")
        self.reasons = _Strings(col("metric_null_reasons"), json.loads)
        self.confidence = _Strings(col("confidence"), Confidence)
        self.library = _Strings(col("library"))
        self.layer_role = _Strings(col("layer_role"))
        self.inherited_from = col("inherited_from")
        self.module_path = _Strings(col("module_path"))
        self.phase = _Strings(col("phase"))
        self._block: tuple[int, list[list[float | None]]] = (-1, [])

    @cached_property
    def keys_distinct(self) -> bool:
        """Whether every operator has a key and no key repeats (what the profile reader checks, and a
        view reads instead of indexing every key)."""
        return strings_distinct(self.keys)

    @cached_property
    def metrics(self) -> np.ndarray:
        """Every operator's metrics (NaN: null), rows by metric fields: read from the Arrow table when
        first asked for (a summary never does)."""
        # filled metric by metric into a (metrics, rows) array and kept transposed: writing a column
        # of a row-major (rows, metrics) array strides across memory
        metrics = np.zeros((len(self.metric_fields), self.n))
        for c, f in enumerate(self.metric_fields):
            metrics[c] = filled(self.arrow.column(f"metrics.{f}").combine_chunks(), np.nan)
        return metrics.T

    def metric_rows(self, lo: int, hi: int) -> np.ndarray:
        """:attr:`metrics` of operators ``lo`` to ``hi``: off the Arrow columns where the whole matrix
        is not filled (a reader of a few operators, such as a summary's top ten)."""
        if "metrics" in self.__dict__ or not self.metric_fields:
            return self.metrics[lo:hi]
        return np.stack([filled(self.arrow.column(f"metrics.{f}").slice(lo, hi - lo).combine_chunks(), np.nan)
                         for f in self.metric_fields], axis=1)

    def __len__(self) -> int:
        return self.n

    def _at(self, g: int) -> Operator:
        return self.model(g)

    def __iter__(self) -> Iterator[Operator]:
        return (self.model(g) for g in range(self.n))

    def models(self, *, read_only: bool = False) -> list[Operator]:
        """Every operator's model, as :meth:`model` builds one, from columns turned into Python values
        once (an analysis that reads every operator; :meth:`model` is the random access).

        ``read_only``: the caller never changes a model's lists or dicts, so operators whose metrics
        rows are the same bits share one dict (a dict of 20 metrics is about 1 KB per operator), and
        those with the same fused ops, source nodes or null reasons share one list or dict of them
        (about 180 bytes per operator)."""
        return self._models(0, self.n, read_only=read_only,
                            metrics=distinct_row_dicts(self.metrics, self.metric_fields))

    _CODED = {"name": "name", "input_shapes": "shapes", "op_class": "op_class", "execution_context": "context",
              "fused_with": "fused_with", "source_nodes": "source_nodes", "metric_null_reasons": "reasons",
              "confidence": "confidence", "library": "library", "layer_role": "layer_role",
              "module_path": "module_path", "phase": "phase"}

    def codes(self, field: str) -> tuple[np.ndarray, list[Any]]:
        """A model field that the table keeps dictionary-encoded, as each operator's code and the
        values (the very objects a read-only model holds; the last is None, for a null row)."""
        col: _Strings = getattr(self, self._CODED[field])
        return np.where(col.codes == NONE, len(col.values), col.codes), [*col.values, None]

    _NUMBERS = ("call_index", "kernel_count", "duration_ns")

    def column(self, field: str) -> list[Any] | None:
        """``op.<field>`` of every operator as its read-only model holds it, read off the table (None
        for a field the table does not give this way)."""
        if field in self._CODED:
            codes, values = self.codes(field)
            return [values[c] for c in codes.tolist()]
        if field in self._NUMBERS:
            return getattr(self, field).tolist()
        if field == "key":
            return self.keys.to_pylist()
        if field == "kernel_ids":
            members, bounds = self.members.tolist(), self.offsets.tolist()
            return [members[lo:hi] for lo, hi in zip(bounds, bounds[1:], strict=False)]
        return None

    def lazy_models(self) -> OperatorModels:
        """The read-only models of :meth:`models`, each block built when one of its operators is first
        asked for and then kept."""
        return OperatorModels(self)

    def _models(self, lo: int, hi: int, *, read_only: bool,
                metrics: tuple[list[dict[str, float | None]], list[int]], local: bool = False) -> list[Operator]:
        """The models of operators ``lo`` to ``hi`` (see :meth:`models`), ``metrics`` the table's
        distinct metrics dicts and each row's number among them (``local``: of rows ``lo`` to ``hi``
        only, numbered from ``lo``)."""
        def strs(col: _Strings) -> list[Any]:
            values = col.values
            return [None if c == NONE else values[c] for c in col.codes[lo:hi].tolist()]

        keys, inherited = self.keys[lo:hi].to_pylist(), self.inherited_from[lo:hi].to_pylist()
        names, shapes, classes, contexts = strs(self.name), strs(self.shapes), strs(self.op_class), strs(self.context)
        fused_with, sources, reasons = strs(self.fused_with), strs(self.source_nodes), strs(self.reasons)
        confidence, library, roles = strs(self.confidence), strs(self.library), strs(self.layer_role)
        modules, phases = strs(self.module_path), strs(self.phase)
        call_index, op_ids = self.call_index[lo:hi].tolist(), self.op_id[lo:hi].tolist()
        fused = self.is_fused[lo:hi].tolist()
        offsets = (self.offsets[lo:hi + 1] - self.offsets[lo]).tolist()
        members = self.members[self.offsets[lo]:self.offsets[hi]].tolist()
        counts, durations = self.kernel_count[lo:hi].tolist(), self.duration_ns[lo:hi].tolist()
        # each distinct metrics row (by its bits) becomes a dict once; every operator gets its own copy
        metrics_of, codes = metrics
        metric_codes = codes if local else codes[lo:hi]
        if not read_only:  # each model gets its own copies
            fused_with, sources = [list(v) for v in fused_with], [list(v) for v in sources]
            reasons = [dict(v) for v in reasons]
        return [construct_trusted(Operator, {
            "key": keys[g], "name": names[g], "call_index": call_index[g],
            "op_id": None if op_ids[g] == NONE else op_ids[g], "input_shapes": shapes[g],
            "op_class": classes[g], "execution_context": contexts[g], "is_fused": bool(fused[g]),
            "fused_with": fused_with[g], "source_nodes": sources[g],
            "kernel_ids": members[offsets[g]:offsets[g + 1]],
            "kernel_count": counts[g], "duration_ns": durations[g],
            "metrics": metrics_of[metric_codes[g]] if read_only else metrics_of[metric_codes[g]].copy(),
            "metric_null_reasons": reasons[g],
            "confidence": confidence[g], "library": library[g],
            "layer_role": roles[g], "inherited_from": inherited[g], "module_path": modules[g], "phase": phases[g],
        }) for g in range(hi - lo)]

    def _metrics(self, g: int) -> dict[str, float | None]:
        lo, rows = self._block
        if not lo <= g < lo + len(rows):
            lo = g - g % _BLOCK
            rows = [[None if v != v else v for v in r] for r in self.metric_rows(lo, lo + _BLOCK).tolist()]
            self._block = (lo, rows)
        return dict(zip(self.metric_fields, rows[g - lo], strict=True))

    def model(self, g: int) -> Operator:
        """Operator ``g`` as the model profile.json lists (built without validation: every value is typed)."""
        op_id = int(self.op_id[g])
        return construct_trusted(Operator, {
            "key": self.keys[g].as_py(), "name": self.name[g], "call_index": int(self.call_index[g]),
            "op_id": None if op_id == NONE else op_id, "input_shapes": self.shapes[g],
            "op_class": self.op_class[g], "execution_context": self.context[g], "is_fused": bool(self.is_fused[g]),
            "fused_with": list(self.fused_with[g]), "source_nodes": list(self.source_nodes[g]),
            "kernel_ids": self.members[self.offsets[g]:self.offsets[g + 1]].tolist(),
            "kernel_count": int(self.kernel_count[g]), "duration_ns": int(self.duration_ns[g]),
            "metrics": self._metrics(g), "metric_null_reasons": dict(self.reasons[g]),
            "confidence": self.confidence[g], "library": self.library[g], "layer_role": self.layer_role[g],
            "inherited_from": self.inherited_from[g].as_py(), "module_path": self.module_path[g],
            "phase": self.phase[g],
        })

    def execution_contexts(self) -> list[ExecutionContext]:
        return [self.context.values[c] for c in self.context.codes.tolist()]


class OperatorModels(Positional[Operator]):
    """A table's read-only operator models (:meth:`OperatorColumns.models`), built a block at a time
    when first asked for and then kept: every caller asking for a position gets the same model."""

    BLOCK = 4096
    LOCAL_BLOCKS = 16  # blocks built with their own rows' metrics dicts before every row is numbered at once

    def __init__(self, table: OperatorColumns) -> None:
        self.table = table
        self._n = len(table)
        self._blocks: list[list[Operator] | None] = [None] * -(-self._n // self.BLOCK)
        self._metrics: tuple[list[dict[str, float | None]], list[int]] | None = None
        self.position_by_id: dict[int, int] = {}  # id() of each model built -> its position
        self._built = 0

    def __len__(self) -> int:
        return self._n

    def _block(self, b: int) -> list[Operator]:
        block = self._blocks[b]
        if block is None:
            table, lo = self.table, b * self.BLOCK
            hi = min(self._n, lo + self.BLOCK)
            metrics = self._metrics
            if metrics is None and self._built < self.LOCAL_BLOCKS:
                # a reader of a few operators: their block's distinct metrics rows only (numbering a
                # long table's every row costs as much as building many blocks)
                dicts, codes = distinct_row_dicts(table.metric_rows(lo, hi), table.metric_fields)
                metrics, local = (dicts, codes), True
            else:
                if metrics is None:
                    metrics = self._metrics = distinct_row_dicts(table.metrics, table.metric_fields)
                local = False
            self._built += 1
            block = self._blocks[b] = table._models(lo, hi, read_only=True, metrics=metrics, local=local)
            self.position_by_id.update(zip(map(id, block), range(lo, lo + len(block)), strict=True))
        return block

    def _at(self, j: int) -> Operator:
        return self._block(j // self.BLOCK)[j % self.BLOCK]

    def __iter__(self) -> Iterator[Operator]:
        for b in range(len(self._blocks)):
            yield from self._block(b)

