"""``compare(base, opt)``: what changed between a baseline and an optimized profile, and did it help.

Speedup and verdict are on profiled kernel time (timeline durations; ncu's replayed
timings never enter). Rows per operator class and per aligned operator group carry the time
delta, each side's share of its total, and every counter's shift with its direction. Kernels
found on one side only are listed; casts, copies and epilogues new in the optimized run are
priced in microseconds. The comparability verdict and its warnings travel with the result.
When the baseline's findings are known, each predicted counter shift is checked.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler
from pydantic_core import core_schema

from profiler_core.analysis.alignment import AlignedGroup, Alignment, AlignMethod, align_operators
from profiler_core.analysis.comparability import Comparability, check_comparability, shape_check
from profiler_core.analysis.counter_format import Direction, direction, format_value, shift_text
from profiler_core.analysis.findings import FindingsReport
from profiler_core.analysis.profile_view import ProfileView, kernel_counters_many, pct, segment_sums
from profiler_core.analysis.thresholds import DEFAULT_THRESHOLDS, Thresholds
from profiler_core.attribution.columns import Positional, stable_order, unique_ints
from profiler_core.attribution.operator_class import OverheadKind, overhead_kind
from profiler_core.gc_pause import gc_paused
from profiler_core.metrics.catalog import COUNTER_FIELDS
from profiler_core.schema import Kernel, Operator, OperatorClass, Profile, all_fields_set, construct_trusted

COMPARISON_SCHEMA_VERSION: Final = 1
_CLASSES: Final = list(OperatorClass)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CounterDelta(_Model):
    """One counter on both sides: ``tensor_core_active_pct 0.01 -> 61.3`` (up)."""

    field: str
    base: float | None
    opt: float | None
    delta: float | None
    direction: Direction
    text: str


class TimeRow(_Model):
    """Time on both sides (per iteration when the iteration counts differ) and the counters' shifts."""

    base_ns: int
    opt_ns: int
    delta_ns: int
    delta_pct: float | None  # None when the baseline spent no time here
    base_share_pct: float
    opt_share_pct: float
    base_kernels: int
    opt_kernels: int
    counters: list[CounterDelta] = Field(default_factory=list)


class ClassRow(TimeRow):
    op_class: OperatorClass


class OperatorRow(TimeRow):
    label: str
    op_class: OperatorClass
    method: AlignMethod
    base_keys: list[str]
    opt_keys: list[str]


@dataclass(frozen=True, slots=True)
class _RowColumns:
    """The operator rows of a comparison as columns: one entry per aligned group (``groups[i]``)."""

    groups: Sequence[AlignedGroup]
    b_raw: np.ndarray  # kernel time per group, baseline side (unscaled, int64)
    o_raw: np.ndarray
    b_n: np.ndarray  # kernels per group
    o_n: np.ndarray
    classes: np.ndarray  # OperatorClass codes (position in ``list(OperatorClass)``)
    pair: np.ndarray  # each group's counter deltas, by number in ``deltas``
    deltas: Sequence[list[CounterDelta]]
    totals: tuple[int, int]  # each view's total kernel time
    scale: tuple[float, float]

    def delta_ns(self) -> np.ndarray:
        # round(raw * scale) as the row gives it: the same float product, rounded half to even
        b = np.rint(self.b_raw.astype(np.float64) * self.scale[0]).astype(np.int64)
        o = np.rint(self.o_raw.astype(np.float64) * self.scale[1]).astype(np.int64)
        return o - b

    def row(self, i: int) -> OperatorRow:
        g = self.groups[i]
        time_row = _time_row(int(self.b_raw[i]), int(self.b_n[i]), int(self.o_raw[i]), int(self.o_n[i]),
                             self.totals, self.scale, list(self.deltas[int(self.pair[i])]))
        return _operator_row(g, _CLASSES[int(self.classes[i])], time_row)


class OperatorRows(Positional[OperatorRow]):
    """A comparison's operator rows, one per aligned group in baseline launch order.

    Two large profiles align hundreds of thousands of groups while a report shows the few that
    changed most: the rows are kept as columns (times, counts, classes, each group's counter
    deltas by number) and a row's model is built when it is read. :meth:`largest_changes` picks
    the top rows off the time column. Serialised (JSON, ``model_dump``) as the list of rows.
    """

    __slots__ = ("_columns", "_models")

    def __init__(self, models: Sequence[OperatorRow] = (), *, columns: _RowColumns | None = None) -> None:
        self._models: list[OperatorRow] | None = None if columns is not None else list(models)
        self._columns = columns

    def __len__(self) -> int:
        return len(self._models) if self._models is not None else len(self._columns.groups)  # type: ignore[union-attr]

    def _at(self, i: int) -> OperatorRow:
        return self._models[i] if self._models is not None else self._columns.row(i)  # type: ignore[union-attr]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, OperatorRows | list | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"OperatorRows({len(self)} rows)"

    def delta_ns(self) -> np.ndarray:
        """Each row's ``delta_ns`` (int64), in row order."""
        if self._models is not None:
            return np.fromiter((r.delta_ns for r in self._models), dtype=np.int64, count=len(self._models))
        return self._columns.delta_ns()  # type: ignore[union-attr]

    def largest_changes(self, k: int | None = None) -> list[OperatorRow]:
        """The ``k`` rows (all when None) of largest ``|delta_ns|``, larger first, row order on ties."""
        size = np.abs(self.delta_ns())
        n = len(size)
        k = n if k is None else max(0, min(k, n))
        if k == 0:
            return []
        if k < n:  # only the rows at least as large as the k-th largest are sorted
            candidates = np.flatnonzero(size >= np.partition(size, n - k)[n - k])
        else:
            candidates = np.arange(n)
        chosen = candidates[np.argsort(-size[candidates], kind="stable")[:k]]
        return [self[i] for i in chosen.tolist()]

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        rows = handler.generate_schema(list[OperatorRow])
        from_list = core_schema.no_info_after_validator_function(cls, rows)
        return core_schema.json_or_python_schema(
            json_schema=from_list,
            python_schema=core_schema.union_schema([core_schema.is_instance_schema(cls), from_list]),
            serialization=core_schema.plain_serializer_function_ser_schema(list, return_schema=rows))


class KernelOnlyRow(_Model):
    """A kernel name launched by one profile only."""

    name: str
    op_class: OperatorClass
    count: int
    duration_ns: int


class OverheadRow(_Model):
    """Casts, copies or epilogues the optimized run launches beyond the baseline's."""

    kind: OverheadKind
    kernel_names: list[str]
    kernel_count: int
    duration_ns: int
    share_of_opt_pct: float


class ShiftCheck(_Model):
    """Did the counter a baseline finding named move the way its fix predicts?"""

    rule_id: str
    field: str
    expected: Literal["up", "down"]
    base: float | None
    opt: float | None
    observed: Direction
    as_predicted: bool | None  # None when a side has no value
    text: str


class Comparison(_Model):
    """Everything ``oprof compare`` reports."""

    schema_version: Literal[1] = COMPARISON_SCHEMA_VERSION
    base_label: str | None = None
    opt_label: str | None = None
    per_iteration: bool = False
    base_total_ns: int
    opt_total_ns: int
    delta_ns: int
    delta_pct: float
    speedup: float | None
    verdict: Literal["faster", "slower", "unchanged"]
    comparability: Comparability
    classes: list[ClassRow]
    operators: OperatorRows
    only_in_base: list[KernelOnlyRow]
    only_in_opt: list[KernelOnlyRow]
    new_overhead: list[OverheadRow]
    new_overhead_ns: int
    shift_checks: list[ShiftCheck] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


def _scale(base: Profile, opt: Profile) -> tuple[float, float, bool]:
    b, o = base.capture.measured_iterations, opt.capture.measured_iterations
    if b and o and b != o:
        return 1.0 / b, 1.0 / o, True
    return 1.0, 1.0, False


def _counter_deltas_many(bases: Sequence[dict[str, float | None]], opts: Sequence[dict[str, float | None]],
                         t: Thresholds) -> list[list[CounterDelta]]:
    """Every row's counter deltas (``bases[i]`` against ``opts[i]``), taken a counter at a time.

    The figures a call of ``direction`` and ``shift_text`` per counter gives: the tolerance and
    the comparison run on the whole column as float64, and each distinct value is formatted once.
    """
    n = len(bases)
    out: list[list[CounterDelta]] = [[] for _ in range(n)]
    texts = _Texts()
    new, set_attr = CounterDelta.__new__, object.__setattr__
    every_field = all_fields_set(CounterDelta)  # each model names every field: they share its set
    for f in COUNTER_FIELDS:
        b_col = [d.get(f) for d in bases]
        o_col = [d.get(f) for d in opts]
        both = [i for i in range(n) if b_col[i] is not None and o_col[i] is not None]
        dirs: list[Direction] = ["n/a"] * n
        if both:
            b = np.array([b_col[i] for i in both], dtype=float)
            o = np.array([o_col[i] for i in both], dtype=float)
            points = t.counter_same_abs if f.endswith(("_pct", "_rate")) else 0.0
            tolerance = np.maximum(points, np.abs(b) * t.counter_same_rel_pct / 100.0)
            same, up = (np.abs(o - b) <= tolerance).tolist(), (o > b).tolist()
            for j, i in enumerate(both):
                dirs[i] = "same" if same[j] else ("up" if up[j] else "down")
        # each distinct value formatted once (0 and None directly: 0.0 and -0.0 are one key)
        b_txt = [texts[v] if v else format_value(v) for v in b_col]
        o_txt = [texts[v] if v else format_value(v) for v in o_col]
        for i in range(n):
            bv, ov = b_col[i], o_col[i]
            if bv is None and ov is None:
                continue
            # Trusted values built here, every field named: built without validation, as
            # construct_trusted does (a comparison of two large profiles has a million of these)
            values = {"field": f, "base": bv, "opt": ov,
                      "delta": (ov - bv) if bv is not None and ov is not None else None,
                      "direction": dirs[i], "text": f"{f} {b_txt[i]} -> {o_txt[i]}"}
            m = new(CounterDelta)
            set_attr(m, "__dict__", values)
            set_attr(m, "__pydantic_fields_set__", every_field)
            set_attr(m, "__pydantic_extra__", None)
            set_attr(m, "__pydantic_private__", None)
            out[i].append(m)
    return out


class _Texts(dict[float, str]):
    """``format_value`` of each value asked for, remembered."""

    def __missing__(self, value: float) -> str:
        text = self[value] = format_value(value)
        return text


def _time_rows(b_sets: Sequence[Sequence[Kernel]], o_sets: Sequence[Sequence[Kernel]], bv: ProfileView,
               ov: ProfileView, scale: tuple[float, float], t: Thresholds,
               b_counters: Sequence[dict[str, float | None]], o_counters: Sequence[dict[str, float | None]],
               ) -> list[dict]:
    """Each row's times and counter deltas (``b_sets[i]`` against ``o_sets[i]``, their counters given)."""
    return _time_rows_of([sum(k.duration_ns for k in ks) for ks in b_sets], [len(ks) for ks in b_sets],
                         [sum(k.duration_ns for k in ks) for ks in o_sets], [len(ks) for ks in o_sets],
                         bv, ov, scale, _counter_deltas_many(b_counters, o_counters, t))


def _time_rows_of(b_raws: Sequence[int], b_counts: Sequence[int], o_raws: Sequence[int], o_counts: Sequence[int],
                  bv: ProfileView, ov: ProfileView, scale: tuple[float, float],
                  deltas: Sequence[list[CounterDelta]]) -> list[dict]:
    """:func:`_time_rows` from each row's kernel time and count on either side, and its counter deltas."""
    totals = (bv.total_ns, ov.total_ns)  # read once, not once per row
    return [_time_row(b_raw, b_n, o_raw, o_n, totals, scale, counters)
            for b_raw, b_n, o_raw, o_n, counters in zip(b_raws, b_counts, o_raws, o_counts, deltas, strict=True)]


def _time_row(b_raw: int, b_n: int, o_raw: int, o_n: int, totals: tuple[int, int], scale: tuple[float, float],
              counters: list[CounterDelta]) -> dict:
    """One row's times (scaled per iteration), shares of each view's total (as ProfileView.share_pct
    gives them), kernel counts and counter deltas."""
    b_ns, o_ns = round(b_raw * scale[0]), round(o_raw * scale[1])
    return {
        "base_ns": b_ns, "opt_ns": o_ns, "delta_ns": o_ns - b_ns,
        "delta_pct": round(pct(o_ns - b_ns, b_ns), 3) if b_ns else None,
        "base_share_pct": round(pct(b_raw, totals[0]), 3),
        "opt_share_pct": round(pct(o_raw, totals[1]), 3),
        "base_kernels": b_n, "opt_kernels": o_n,
        "counters": counters,
    }


def _class_rows(bv: ProfileView, ov: ProfileView, scale: tuple[float, float],
                t: Thresholds) -> list[ClassRow]:
    # each class's kernels on either side, as positions in kernel order (ProfileView.kernel_class)
    b_codes, o_codes = bv.kernel_class_codes, ov.kernel_class_codes
    every = list(OperatorClass)
    b_n = np.bincount(b_codes, minlength=len(every))
    o_n = np.bincount(o_codes, minlength=len(every))
    present = [c for c in range(len(every)) if b_n[c] or o_n[c]]
    classes = [every[c] for c in present]
    # every kernel's class is a present one: sorted by class, the kernels are the present classes' in turn
    times = _time_rows_at(bv, ov, (stable_order(b_codes), b_n[present].astype(np.int64)),
                          (stable_order(o_codes), o_n[present].astype(np.int64)), scale, t)
    rows = [ClassRow(op_class=c, **row) for c, row in zip(classes, times, strict=True)]
    return sorted(rows, key=lambda r: -max(r.base_ns, r.opt_ns))


def _operator_rows(groups: Alignment, bv: ProfileView, ov: ProfileView,
                   scale: tuple[float, float], t: Thresholds) -> OperatorRows:
    if not bv.keys_repeat and not ov.keys_repeat:  # off the columns: no operator model is built
        # each group's operators by position in each view's list (the alignment gives launch order)
        return _operator_rows_at(groups, bv, ov, bv.op_order[groups.base], ov.op_order[groups.opt], scale, t)
    rows = []
    sides = [([bv.operators_by_key[k] for k in g.base_keys], [ov.operators_by_key[k] for k in g.opt_keys])
             for g in groups]
    b_found = bv.kernel_positions_of_ops([b_ops for b_ops, _ in sides])
    o_found = ov.kernel_positions_of_ops([o_ops for _, o_ops in sides])
    if b_found is not None and o_found is not None:
        times = _time_rows_at(bv, ov, b_found, o_found, scale, t)
    else:
        b_sets = [bv.kernels_of_ops(b_ops) for b_ops, _ in sides]
        o_sets = [ov.kernels_of_ops(o_ops) for _, o_ops in sides]
        # every row's counters in one vectorised pass per side (the figures of one aggregation per row)
        b_counters = kernel_counters_many(b_sets, table=bv.counter_rows)
        o_counters = kernel_counters_many(o_sets, table=ov.counter_rows)
        times = _time_rows(b_sets, o_sets, bv, ov, scale, t, b_counters, o_counters)
    for g, (b_ops, o_ops), time_row in zip(groups, sides, times, strict=True):
        first = (b_ops or o_ops)[0]
        rows.append(_operator_row(g, (bv if b_ops else ov).op_class(first), time_row))
    return OperatorRows(rows)


def _operator_row(g: AlignedGroup, cls: OperatorClass, time_row: dict) -> OperatorRow:
    """The row of one aligned group, its times given (:func:`_time_row`)."""
    if len(g.base_keys) == 1 and len(g.opt_keys) == 1 and g.base_keys[0] == g.opt_keys[0]:
        label = g.base_keys[0]
    else:
        label = f"{_keys_label(g.base_keys)} -> {_keys_label(g.opt_keys)}"
    # every field named, each already typed: built without validation
    return construct_trusted(OperatorRow, {
        **time_row, "label": label, "op_class": cls, "method": g.method, "base_keys": list(g.base_keys),
        "opt_keys": list(g.opt_keys)})


def _operator_rows_at(groups: Alignment, bv: ProfileView, ov: ProfileView, b_rows: np.ndarray,
                      o_rows: np.ndarray, scale: tuple[float, float], t: Thresholds) -> OperatorRows:
    """:func:`_operator_rows` where keys are distinct on both sides: each group's operators given by
    their positions in each view (``b_rows``, ``o_rows``: group after group). The rows stay columns."""
    b_sizes, o_sizes = groups.base_sizes, groups.opt_sizes
    b_found = bv.kernel_positions_of_rows(b_rows, b_sizes)
    o_found = ov.kernel_positions_of_rows(o_rows, o_sizes)
    pair, deltas = _counter_pairs(bv, ov, b_found, o_found, t)
    # each group's first operator (the baseline's, else the optimized one's) and its class
    b_first, o_first = np.cumsum(b_sizes) - b_sizes, np.cumsum(o_sizes) - o_sizes
    b_class = bv.op_class_codes[b_rows[np.minimum(b_first, max(len(b_rows) - 1, 0))]] if len(b_rows) else b_sizes
    o_class = ov.op_class_codes[o_rows[np.minimum(o_first, max(len(o_rows) - 1, 0))]] if len(o_rows) else o_sizes
    return OperatorRows(columns=_RowColumns(
        groups=groups, b_raw=_segment_times(bv, *b_found), o_raw=_segment_times(ov, *o_found),
        b_n=b_found[1], o_n=o_found[1], classes=np.where(b_sizes > 0, b_class, o_class), pair=pair,
        deltas=deltas, totals=(bv.total_ns, ov.total_ns), scale=scale))


def _counter_pairs(bv: ProfileView, ov: ProfileView, b_found: tuple[np.ndarray, np.ndarray],
                   o_found: tuple[np.ndarray, np.ndarray], t: Thresholds,
                   ) -> tuple[np.ndarray, list[list[CounterDelta]]]:
    """Each set's counter deltas (sets of kernels given as positions in each view, set after set, and
    each set's size), worked out once per distinct pair of aggregates: (each set's pair number, the
    deltas of each pair)."""
    (b_pos, b_sizes), (o_pos, o_sizes) = b_found, o_found
    b_counters, b_codes = bv.distinct_counters_of_positions(b_pos, b_sizes)
    o_counters, o_codes = ov.distinct_counters_of_positions(o_pos, o_sizes)
    _, first, pair = unique_ints(b_codes * len(o_counters) + o_codes, index=True, inverse=True)
    deltas = _counter_deltas_many([b_counters[b] for b in b_codes[first].tolist()],
                                  [o_counters[o] for o in o_codes[first].tolist()], t)
    return pair.ravel(), deltas


def _time_rows_at(bv: ProfileView, ov: ProfileView, b_found: tuple[np.ndarray, np.ndarray],
                  o_found: tuple[np.ndarray, np.ndarray], scale: tuple[float, float], t: Thresholds) -> list[dict]:
    """:func:`_time_rows` of sets of kernels given as positions in each view (positions set after set,
    and each set's size): times summed and counters aggregated on the columns."""
    pair, deltas = _counter_pairs(bv, ov, b_found, o_found, t)
    return _time_rows_of(_segment_times(bv, *b_found).tolist(), b_found[1].tolist(),
                         _segment_times(ov, *o_found).tolist(), o_found[1].tolist(),
                         bv, ov, scale, [list(deltas[p]) for p in pair.tolist()])


def _segment_times(view: ProfileView, positions: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The kernel time of each consecutive set of the view's kernels (``positions`` cut by ``sizes``)."""
    return segment_sums(view.kernel_durations[positions], sizes)


def _keys_label(keys: Sequence[str]) -> str:
    if not keys:
        return "(none)"
    if len(keys) <= 3:
        return " + ".join(keys)
    return f"{keys[0]} + {len(keys) - 1} more"


def kernel_identity(name: str) -> str:
    """A kernel's name as both captures know it: Kineto calls a memset ``Memset (Device)`` where a
    CUDA-graph replay records ``Memset (Unknown)`` (the memory kind is not known there)."""
    return "Memset" if name.startswith("Memset (") else name


def _name_tally(view: ProfileView) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """Per kernel identity (:func:`kernel_identity`), in the order each first appears: how many kernels,
    their summed time and the first one's position, read off the view's name and duration columns."""
    cols = view.kernel_columns
    codes = cols.name  # coded in the order each name first appears
    counts = np.bincount(codes, minlength=len(cols.names)).tolist()
    sums = np.zeros(len(cols.names), dtype=np.int64)
    np.add.at(sums, codes, cols.duration)
    _, first_at = unique_ints(codes, index=True)
    count: dict[str, int] = {}
    dur: dict[str, int] = {}
    first: dict[str, int] = {}
    for name, n, total, at in zip(cols.names, counts, sums.tolist(), first_at.tolist(), strict=True):
        ident = kernel_identity(name)
        count[ident] = count.get(ident, 0) + n
        dur[ident] = dur.get(ident, 0) + total
        first.setdefault(ident, at)
    return count, dur, first


def _kernel_only(bv: ProfileView, ov: ProfileView, scale: tuple[float, float],
                 ) -> tuple[list[KernelOnlyRow], list[KernelOnlyRow]]:
    (bc, bd, bf), (oc, od, of) = _name_tally(bv), _name_tally(ov)
    classes = list(OperatorClass)
    only_base = [KernelOnlyRow(name=n, op_class=classes[bv.kernel_class_codes[bf[n]]], count=bc[n],
                               duration_ns=round(bd[n] * scale[0])) for n in bc if n not in oc]
    only_opt = [KernelOnlyRow(name=n, op_class=classes[ov.kernel_class_codes[of[n]]], count=oc[n],
                              duration_ns=round(od[n] * scale[1])) for n in oc if n not in bc]
    return (sorted(only_base, key=lambda r: -r.duration_ns), sorted(only_opt, key=lambda r: -r.duration_ns))


def _new_overhead(bv: ProfileView, ov: ProfileView, scale: tuple[float, float]) -> list[OverheadRow]:
    """Overhead kernels in opt beyond the baseline's count of the same name (priced at their mean)."""
    base_count = _name_tally(bv)[0]
    count, dur, first = _name_tally(ov)
    per_kind: dict[OverheadKind, list[tuple[str, int, float]]] = defaultdict(list)
    for name, n in count.items():
        kind = overhead_kind(name, ov.fused_with_at(first[name]))
        extra = n - base_count.get(name, 0)
        if kind is None or extra <= 0:
            continue
        mean = dur[name] / n
        per_kind[kind].append((name, extra, extra * mean))
    rows: list[OverheadRow] = []
    for kind, items in per_kind.items():
        items.sort(key=lambda item: -item[2])
        duration = sum(d for _, _, d in items)
        rows.append(OverheadRow(kind=kind, kernel_names=[n for n, _, _ in items[:5]],
                                kernel_count=sum(n for _, n, _ in items),
                                duration_ns=round(duration * scale[1]),
                                share_of_opt_pct=round(ov.share_pct(duration), 3)))
    return sorted(rows, key=lambda r: -r.duration_ns)


def _ops_counters(view: ProfileView, ops: Sequence[Operator], fields: Collection[str]) -> dict[str, float | None]:
    """The aggregated counters (unrounded) ``fields`` of ``ops``' kernels, by position where they are
    the view's (each counter is aggregated on its own: the others are not worked out)."""
    kernels = view.kernels_of_ops(ops)
    at = view.positions(kernels)
    if at is not None:
        return view.aggregate_at(at, fields)
    return kernel_counters_many([kernels], fields, table=view.counter_rows)[0]


def _operators_of_keys(view: ProfileView, keys: list[str]) -> Sequence[Operator]:
    """The view's operators of ``keys`` (those it has), their models built only when read where keys
    are distinct."""
    if view.keys_repeat:
        by_key = view.operators_by_key
        return [by_key[k] for k in keys if k in by_key]
    return view.operators_of_keys(keys)


def _shift_checks(findings: FindingsReport, groups: Alignment, bv: ProfileView,
                  ov: ProfileView, t: Thresholds) -> list[ShiftCheck]:
    by_position = not bv.keys_repeat and not ov.keys_repeat
    named = {key for f in findings.findings if f.expected_shifts for key in f.operators}
    # the optimized keys of each baseline key a finding names (where keys repeat: by key)
    opt_of = groups.opt_keys_of_base(named) if named and not by_position else {}
    checks = []
    for f in findings.findings:
        if not f.expected_shifts:
            continue
        b_ops = _operators_of_keys(bv, list(f.operators))
        o_ops: Sequence[Operator]
        if by_position:  # each named operator's group, by launch position (no key looked up per group)
            o_ops = ov.operators_in_order_at(groups.opt_of_base(bv.launch_positions(b_ops)))
        else:
            o_ops = _operators_of_keys(ov, [k for key in f.operators for k in sorted(opt_of.get(key, ()))])
        b_agg, o_agg = _ops_counters(bv, b_ops, f.expected_shifts), _ops_counters(ov, o_ops, f.expected_shifts)
        for field, expected in f.expected_shifts.items():
            b, o = b_agg.get(field), (o_agg.get(field) if o_ops else None)
            observed = direction(field, b, o, same_abs=t.counter_same_abs,
                                 same_rel_pct=t.counter_same_rel_pct)
            checks.append(ShiftCheck(
                rule_id=f.rule_id, field=field, expected=expected, base=b, opt=o, observed=observed,
                as_predicted=None if observed == "n/a" else observed == expected,
                text=shift_text(field, b, o)))
    return checks


def comparison_json_fields(result: Comparison) -> dict[str, Any]:
    """The comparison's fields for its JSON document, each written by pydantic straight to JSON: what
    ``model_dump(mode="json")`` gives, without first building a dict per operator row and counter
    (two 1M-kernel profiles: 772k rows of 20 counters). The operator rows are left empty, for
    ``json_output.json_pieces(fields, "operators", result.operators)`` to write a batch at a time."""
    fields: dict[str, Any] = {name: getattr(result, name) for name in type(result).model_fields}
    fields["operators"] = []
    return fields


@gc_paused()  # many acyclic models and rows: the cyclic collector only costs time here
def compare(base: Profile, opt: Profile, *, thresholds: Thresholds = DEFAULT_THRESHOLDS,
            base_findings: FindingsReport | None = None, base_label: str | None = None,
            opt_label: str | None = None) -> Comparison:
    """Compare an optimized profile with its baseline (see the module docstring)."""
    from profiler_core.analysis.diagnose import diagnose  # local: diagnose imports the rule modules

    t = thresholds
    bv, ov = ProfileView.of(base), ProfileView.of(opt)
    b_scale, o_scale, per_iteration = _scale(base, opt)
    scale = (b_scale, o_scale)
    b_total, o_total = round(bv.total_ns * b_scale), round(ov.total_ns * o_scale)
    delta_pct = pct(o_total - b_total, b_total)
    verdict: Literal["faster", "slower", "unchanged"]
    if abs(delta_pct) <= t.unchanged_tolerance_pct:
        verdict = "unchanged"
    else:
        verdict = "slower" if delta_pct > 0 else "faster"
    groups = align_operators(bv, ov, attention_window=t.attention_window_ops)
    only_base, only_opt = _kernel_only(bv, ov, scale)
    overhead = _new_overhead(bv, ov, scale)
    comparability = check_comparability(base.capture, opt.capture, t, extra=(shape_check(base, opt, t),))
    findings = base_findings if base_findings is not None else diagnose(base, t)
    warnings = list(comparability.warnings)
    if per_iteration:
        warnings.append("totals are per measured iteration: the profiles measured different iteration counts")
    if not base.kernels or not opt.kernels:
        warnings.append("a profile holds no kernels: the comparison is empty")
    return Comparison(
        base_label=base_label or base.capture.workload, opt_label=opt_label or opt.capture.workload,
        per_iteration=per_iteration, base_total_ns=b_total, opt_total_ns=o_total,
        delta_ns=o_total - b_total, delta_pct=round(delta_pct, 3),
        speedup=round(b_total / o_total, 4) if o_total else None, verdict=verdict,
        comparability=comparability,
        classes=_class_rows(bv, ov, scale, t),
        operators=_operator_rows(groups, bv, ov, scale, t),
        only_in_base=only_base, only_in_opt=only_opt, new_overhead=overhead,
        new_overhead_ns=sum(r.duration_ns for r in overhead),
        shift_checks=_shift_checks(findings, groups, bv, ov, t),
        warnings=warnings,
    )


