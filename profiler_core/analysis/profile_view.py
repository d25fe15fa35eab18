"""An indexed, read-only view of one profile: what every rule, comparison and report asks of it.

Built once per profile: kernels by id, operators in launch order with their effective class
(the engine's ``op_class``, or the name classifier where the engine left ``other``), each
kernel's operator and class, total profiled kernel time, and evidence for any set of kernels.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from functools import cached_property
from operator import attrgetter, is_
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from profiler_core.analysis.findings import FindingEvidence
from profiler_core.attribution.aggregate import (
    FIELDS,
    Aggregated,
    CounterAggregation,
    aggregate_arrays,
    aggregate_samples,
    counter_matrix,
)
from profiler_core.attribution.columns import NONE, Positional, row_codes, unique_ints
from profiler_core.attribution.kernel_table import SOURCES, TIERS, KernelModels, KernelTable
from profiler_core.attribution.operator_class import classify_operator
from profiler_core.attribution.operator_parquet import OperatorColumns, OperatorModels
from profiler_core.attribution.profile_meta import TIER_CONFIDENCE
from profiler_core.gc_pause import gc_paused
from profiler_core.schema import Confidence, CounterSource, Kernel, Operator, OperatorClass, Profile, Tier

if TYPE_CHECKING:
    from profiler_core.analysis.roofline import Roofline

_ID = attrgetter("id")
CLASS_CODES: dict[OperatorClass, int] = {c: i for i, c in enumerate(OperatorClass)}  # an operator class as a code
_CONFIDENCE_ORDER = [Confidence.HIGH, Confidence.MEDIUM, Confidence.LOW, Confidence.NONE]
# Classes whose kernels do the operator's real work; a lighter kernel under them is an epilogue.
_HEAVY = (OperatorClass.ATTENTION, OperatorClass.GEMM, OperatorClass.CONVOLUTION, OperatorClass.RNN,
          OperatorClass.COMMUNICATION)


def weakest_confidence(levels: Iterable[Confidence]) -> Confidence:
    """The lowest confidence among ``levels`` (NONE when empty)."""
    worst = -1
    for level in levels:
        worst = max(worst, _CONFIDENCE_ORDER.index(level))
    return _CONFIDENCE_ORDER[worst] if worst >= 0 else Confidence.NONE


def pct(part: float, whole: float) -> float:
    """``part`` as a percentage of ``whole`` (0 when ``whole`` is 0)."""
    return 100.0 * part / whole if whole else 0.0


def kernel_counters(kernels: Iterable[Kernel], fields: Collection[str] | None = None,
                    ) -> dict[str, float | None]:
    """The aggregated counters of those ``kernels`` that carry any (unrounded)."""
    return aggregate_samples(((k.counters, k.duration_ns) for k in kernels if k.counters), fields)


_KEY_MASKS: dict[tuple[str, ...], int] = {}


def _key_mask(counters: dict[str, float | None]) -> int:
    """The catalog counters a kernel's dict names (a key present, even as None), as bits in
    ``FIELDS`` order; remembered per key tuple (kernels of one capture share a handful)."""
    keys = tuple(counters)
    mask = _KEY_MASKS.get(keys)
    if mask is None:
        mask = _KEY_MASKS[keys] = sum(1 << c for c, f in enumerate(FIELDS) if f in counters)
    return mask


class CounterRows:
    """Every kernel's counters as one matrix, built once per view: the rows of any set of its kernels.

    The rules aggregate the counters of many overlapping sets (a finding's kernels, every
    operator's); reading each kernel's counters dict once, not once per set, is the saving.
    """

    def __init__(self, kernels: Sequence[Kernel], table: Any = None) -> None:
        """``table``: the KernelTable ``kernels`` were built from (``models()``, in order), whose
        counter columns are read as they are instead of every kernel's dict."""
        fields = list(getattr(table, "counter_fields", ()))
        self.matrix_rows: np.ndarray | None = None  # each kernel row's row of ``matrix`` (None: its own)
        self._by_id = False  # a kernel's row is its id (its position): no dict of ids
        if (table is not None and table.have_counters and fields and len(table) == len(kernels)
                and ((isinstance(kernels, KernelModels) and kernels.table is table)  # kernel j: id j
                     or all(k.id == i for i, k in enumerate(kernels)))):
            self.kernels = kernels  # each holds every counter field, None where not measured
            self._by_id = True
            rows = np.asarray(table.counter_row)
            values = np.asarray(table.counter_values)
            # the table's own counter rows (kernels share them), in FIELDS' columns, and one row of
            # NaN after them for the kernels without counters: no row per kernel is laid out
            # laid out counter by counter (the matrix is the transpose of a row per counter): an
            # aggregation reads each counter of the rows it takes as one contiguous run
            if fields == list(FIELDS) and values.flags.f_contiguous and bool((rows != NONE).all()):
                self.matrix = values  # already so (a table read from Parquet): every kernel has a row
                self.matrix_rows = rows
            else:
                columns = np.full((len(FIELDS), len(values) + 1), np.nan)
                for c, f in enumerate(FIELDS):
                    if f in fields:
                        columns[c, :len(values)] = values[:, fields.index(f)]
                self.matrix = columns.T
                self.matrix_rows = np.where(rows != NONE, rows, len(values))
            self.durations = (np.asarray(table.end_ns) - np.asarray(table.start_ns)).astype(float)
            self.key_masks = np.full(len(kernels), _key_mask(dict.fromkeys(fields)), dtype=np.int64)
        else:
            self.kernels = [k for k in kernels if k.counters]
            self.matrix = counter_matrix(self.kernels)
            self.durations = np.array([k.duration_ns for k in self.kernels], dtype=float)
            self.key_masks = np.fromiter((_key_mask(k.counters) for k in self.kernels), dtype=np.int64,
                                         count=len(self.kernels))
        self.row_of: dict[int, int] = {} if self._by_id else {k.id: i for i, k in enumerate(self.kernels)}
        # the row of each of ``kernels`` by position (-1: it carries no counters)
        if len(self.kernels) == len(kernels):
            self.row_at = np.arange(len(kernels), dtype=np.int64)
        else:
            self.row_at = np.full(len(kernels), -1, dtype=np.int64)
            self.row_at[[i for i, k in enumerate(kernels) if k.counters]] = np.arange(len(self.kernels))

    def matrix_rows_of(self, rows: np.ndarray) -> np.ndarray | None:
        """Where the counters of kernel rows ``rows`` are in :attr:`matrix` (None: at the same rows)."""
        return None if self.matrix_rows is None else self.matrix_rows[rows]

    def kernel_matrix(self) -> np.ndarray:
        """Every kernel row's counters, a row each."""
        return self.matrix if self.matrix_rows is None else self.matrix[self.matrix_rows]

    def rows(self, kernels: Sequence[Kernel]) -> np.ndarray | None:
        """The rows of ``kernels`` (each carrying counters), or None when one is not this table's."""
        mine = self.kernels
        if self._by_id:
            out = np.fromiter(map(_ID, kernels), dtype=np.int64, count=len(kernels))
            if len(out) and (out.min() < 0 or out.max() >= len(mine)):
                return None
            return out if all(map(is_, map(mine.__getitem__, out.tolist()), kernels)) else None
        out = np.empty(len(kernels), dtype=np.int64)
        row_of = self.row_of
        for j, k in enumerate(kernels):
            i = row_of.get(k.id)
            if i is None or mine[i] is not k:
                return None
            out[j] = i
        return out


def _named_columns(mask: int, fields: Collection[str] | None,
                   cache: dict[int, list[tuple[int, str]]]) -> list[tuple[int, str]]:
    """(column, field) of the catalog fields a key mask names, less those ``fields`` leaves out."""
    cols = cache.get(mask)
    if cols is None:
        cols = cache[mask] = [(c, f) for c, f in enumerate(FIELDS)
                              if mask >> c & 1 and (fields is None or f in fields)]
    return cols


def kernel_counters_many(kernel_sets: Sequence[Sequence[Kernel]], fields: Collection[str] | None = None,
                         table: CounterRows | None = None) -> list[dict[str, float | None]]:
    """:func:`kernel_counters` of each set, aggregated in one pass (each set is its own group, its
    kernels in their given order, so every figure is the one a call per set gives). ``table``: the
    view's counters of every kernel, read instead of the kernels' dicts when it holds them all."""
    sets = [[k for k in ks if k.counters] for ks in kernel_sets]
    flat = [k for ks in sets for k in ks]
    if not flat:
        return [{} for _ in sets]
    idx = table.rows(flat) if table is not None else None
    matrix_rows = None
    if table is not None and idx is not None:
        matrix, durations = table.matrix, table.durations
        masks = table.key_masks[idx]
        matrix_rows = table.matrix_rows_of(idx)
    else:
        rows = {k.id: k for k in flat}
        ordered = list(rows.values())
        row_of = {kid: i for i, kid in enumerate(rows)}
        matrix = counter_matrix(ordered)
        durations = np.array([k.duration_ns for k in ordered], dtype=float)
        idx = np.fromiter((row_of[k.id] for k in flat), dtype=np.int64, count=len(flat))
        masks = np.fromiter((_key_mask(k.counters) for k in flat), dtype=np.int64, count=len(flat))
    return _aggregate_sets(matrix, durations, idx, masks, np.array([len(ks) for ks in sets], dtype=np.int64),
                           fields, matrix_rows)


def _aggregate_sets(matrix: np.ndarray, durations: np.ndarray, idx: np.ndarray, masks: np.ndarray,
                    sizes: np.ndarray, fields: Collection[str] | None,
                    matrix_rows: np.ndarray | None = None) -> list[dict[str, float | None]]:
    """The counters of consecutive sets of kernels: ``idx`` (rows of ``durations``, set after set, each
    set in its order; their counters ``matrix[idx]``, or ``matrix[matrix_rows]``) and ``masks`` (their
    key masks) cut by ``sizes``; ``{}`` for an empty set."""
    agg, named = _aggregate_arrays_named(matrix, durations, idx, masks, sizes, matrix_rows, fields)
    return _set_dicts(agg, named, sizes, range(len(sizes)), fields)


def _set_dicts(agg: Aggregated, named: np.ndarray, sizes: np.ndarray, sets: Iterable[int],
               fields: Collection[str] | None) -> list[dict[str, float | None]]:
    """The counters dict of each of ``sets`` (positions among the aggregated sets; ``{}`` for an empty one)."""
    cache: dict[int, list[tuple[int, str]]] = {}
    masks, counts = named.tolist(), sizes.tolist()
    out: list[dict[str, float | None]] = []
    for i in sets:
        if not counts[i]:
            out.append({})
            continue
        row = agg.row(i)
        out.append({f: row[c] for c, f in _named_columns(masks[i], fields, cache)})
    return out


def _aggregate_arrays_named(matrix: np.ndarray, durations: np.ndarray, idx: np.ndarray, masks: np.ndarray,
                            sizes: np.ndarray, matrix_rows: np.ndarray | None = None,
                            only: Collection[str] | None = None) -> tuple[Aggregated, np.ndarray]:
    """The aggregate of consecutive sets (as :func:`_aggregate_sets` takes them) and, per set, the
    key mask of the counters any of its kernels names (the OR of their masks; 0 for an empty set)."""
    grp = np.repeat(np.arange(len(sizes)), sizes)
    agg = aggregate_arrays(matrix, durations, idx, grp, len(sizes), matrix_rows=matrix_rows, only=only)
    return agg, _named_masks(masks, sizes)


def _named_masks(masks: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Per set of consecutive ``sizes`` rows, the OR of their key masks (0 for an empty set)."""
    starts = np.cumsum(sizes) - sizes
    present = sizes > 0
    named = np.zeros(len(sizes), dtype=np.int64)
    if present.any():
        named[present] = np.bitwise_or.reduceat(masks, starts[present])
    return named


def _tested(ops: Sequence[Operator], fields: tuple[str, ...], test: Callable[..., bool]) -> np.ndarray:
    """``test(op.<field>, ...)`` of each of ``ops``, asked operator by operator."""
    return np.fromiter((bool(test(*(getattr(op, f) for f in fields))) for op in ops), dtype=bool, count=len(ops))


def _combinations(codes: Sequence[np.ndarray], sizes: Sequence[int]) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """The distinct combinations of several code columns (``codes[i]`` below ``sizes[i]``), and each
    row's number among them."""
    if math.prod(sizes) >= 1 << 62:  # past one packed key: the rows of codes themselves
        distinct_rows, inverse = np.unique(np.stack(codes), axis=1, return_inverse=True)
        return [tuple(c) for c in distinct_rows.T.tolist()], inverse.ravel()
    key = np.zeros(len(codes[0]), dtype=np.int64)
    for column, size in zip(codes, sizes, strict=True):
        key = key * size + column
    distinct, inverse = unique_ints(key, inverse=True)
    combos: list[tuple[int, ...]] = []
    for k in distinct.tolist():
        parts = []
        for size in reversed(sizes):
            k, c = divmod(k, size)
            parts.append(c)
        combos.append(tuple(reversed(parts)))
    return combos, inverse.ravel()


T = TypeVar("T")


class ItemsAt(Positional[T]):
    """Items of a sequence given by their positions in it: item ``j`` is ``of[at[j]]``, read (and,
    from a lazy list, built) only when asked for."""

    def __init__(self, of: Sequence[T], at: np.ndarray) -> None:
        self.of = of
        self.at = at

    def __len__(self) -> int:
        return len(self.at)

    def _at(self, j: int) -> T:
        return self.of[int(self.at[j])]

    def __iter__(self) -> Iterator[T]:
        return map(self.of.__getitem__, self.at.tolist())


class OperatorsAt(ItemsAt[Operator]):
    """Some of a view's operators, given by their positions in its operator list (``of``): item ``j``
    is ``of[at[j]]``, its model built (by the view's lazy list) only when read, and
    :meth:`ProfileView.keys_of` reads their keys without a model."""


class _KernelOwners(Mapping[int, Operator]):
    """Kernel id -> its operator, where kernel j has id j: the owner rows read through the view's
    operator models (built only for the kernels asked about)."""

    def __init__(self, owner: np.ndarray, operators: Sequence[Operator]) -> None:
        self.owner, self.operators = owner, operators

    def __getitem__(self, kid: int) -> Operator:
        g = int(self.owner[kid]) if 0 <= kid < len(self.owner) else -1
        if g < 0:
            raise KeyError(kid)
        return self.operators[g]

    def __contains__(self, kid: object) -> bool:
        return isinstance(kid, int) and 0 <= kid < len(self.owner) and self.owner[kid] >= 0

    def __iter__(self) -> Iterator[int]:
        return iter(np.flatnonzero(self.owner >= 0).tolist())

    def __len__(self) -> int:
        return int(np.count_nonzero(self.owner >= 0))


class _ModelsByKey(Mapping[str, Operator]):
    """Operator key -> its model, for distinct keys: the view's key index read through its models
    (built only for the keys asked for)."""

    def __init__(self, index: dict[str, int], operators: Sequence[Operator]) -> None:
        self.index, self.operators = index, operators

    def __getitem__(self, key: str) -> Operator:
        return self.operators[self.index[key]]

    def __contains__(self, key: object) -> bool:
        return key in self.index

    def __iter__(self) -> Iterator[str]:
        return iter(self.index)

    def __len__(self) -> int:
        return len(self.index)


class _KeyRows(Mapping[str, int]):
    """Operator key -> its row in an aggregate of every operator (row g: operator g), for the
    operators with kernels aggregated: the view's key index read as the aggregate's, no dict built."""

    def __init__(self, index: dict[str, int], sizes: np.ndarray) -> None:
        self.index, self.sizes = index, sizes

    def __getitem__(self, key: str) -> int:
        g = self.index[key]
        if not self.sizes[g]:
            raise KeyError(key)
        return g

    def __iter__(self) -> Iterator[str]:
        return (key for key, g in self.index.items() if self.sizes[g])

    def __len__(self) -> int:
        return int(np.count_nonzero(self.sizes))


class _OpAggregate:
    """Every operator's aggregated counters, one row per operator: worked out counter by counter as
    they are read (:meth:`column`), all of them when a row is (dicts built only when asked)."""

    _COLUMN = {f: c for c, f in enumerate(FIELDS)}

    def __init__(self, group: Mapping[str, int], aggregation: CounterAggregation | None, named: np.ndarray, *,
                 every: bool = False) -> None:
        """``every``: row ``g`` is the view's operator ``g`` (every operator was aggregated, in order)."""
        self.group, self.aggregation, self.named, self.every = group, aggregation, named, every
        self.sizes = aggregation.sizes if aggregation is not None else np.zeros(0, dtype=np.int64)
        self._columns: dict[int, list[tuple[int, str]]] = {}
        # each counter worked out alone so far: (values, partial, missing), kept for the whole aggregate
        self._worked: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    @cached_property
    def agg(self) -> Aggregated:
        """The whole aggregate (every counter of every row; those already worked out alone are not
        worked out again)."""
        assert self.aggregation is not None
        a = self.aggregation
        values = np.empty((len(a.specs), a.n_groups)).T
        partial = np.empty((len(a.specs), a.n_groups), dtype=bool).T
        missing = np.empty((len(a.specs), a.n_groups), dtype=bool).T
        for c in range(len(a.specs)):
            worked = self._worked.pop(c) if c in self._worked else a.counter(c)
            values[:, c], partial[:, c], missing[:, c] = worked
        return Aggregated(values, missing, partial, a.sizes)

    def column(self, c: int) -> np.ndarray:
        """Counter ``c`` of every row (NaN: null), worked out alone unless the whole aggregate is."""
        if "agg" in self.__dict__:
            return self.agg.values[:, c]
        worked = self._worked.get(c)
        if worked is None:
            assert self.aggregation is not None
            worked = self._worked[c] = self.aggregation.counter(c)
        return worked[0]

    def counters(self, g: int) -> dict[str, float | None]:
        """The counters operator row ``g`` names, with their values (None where null): the row alone
        unless the whole aggregate is worked out (a report's top operators read a few rows)."""
        assert self.aggregation is not None
        row = self.agg.row(g) if "agg" in self.__dict__ else self.aggregation.group(g).row(0)
        return {f: row[c] for c, f in _named_columns(int(self.named[g]), None, self._columns)}

    def value(self, g: int, field: str) -> float | None:
        """One counter of row ``g``: None where no kernel names it or the aggregate is null."""
        c = self._COLUMN.get(field)
        if c is None or not int(self.named[g]) >> c & 1 or self.aggregation is None:
            return None
        v = float(self.column(c)[g])
        return None if v != v else v


def busy_and_span_ns(kernels: Iterable[Kernel]) -> tuple[int, int]:
    """(time any kernel runs, first start to last end) over ``kernels``, in ns."""
    busy = span_start = 0
    cur_start = cur_end = None
    last_end = 0
    for k in sorted(kernels, key=lambda k: k.start_ns):
        if cur_end is None:
            span_start = k.start_ns
        if cur_end is None or k.start_ns > cur_end:
            if cur_end is not None and cur_start is not None:
                busy += cur_end - cur_start
            cur_start, cur_end = k.start_ns, k.end_ns
        else:
            cur_end = max(cur_end, k.end_ns)
        last_end = max(last_end, k.end_ns)
    if cur_end is not None and cur_start is not None:
        busy += cur_end - cur_start
    return busy, (last_end - span_start if cur_end is not None else 0)


def idle_inside_pct(kernels: Iterable[Kernel]) -> float:
    """How much of the span from the first to the last of ``kernels`` no kernel of them runs (0-100)."""
    busy, span = busy_and_span_ns(kernels)
    return pct(span - busy, span)


_SHARED: ContextVar[dict[int, ProfileView] | None] = ContextVar("oprof_shared_views", default=None)


@contextlib.contextmanager
def shared_views() -> Iterator[None]:
    """While active, :meth:`ProfileView.of` builds one view per profile and hands it to every caller.

    One report diagnoses, compares and renders the same profiles several times over; a large
    profile's view (its models, its indexes) is built once for all of them, and let go on exit.
    """
    token = _SHARED.set({} if _SHARED.get() is None else _SHARED.get())
    try:
        yield
    finally:
        _SHARED.reset(token)


def _operator_models(rows: Sequence[Operator]) -> Sequence[Operator]:
    """The models of a profile's operators: a table's built a block at a time when read (read-only:
    operators whose metrics are the same share one dict), a list's as they are."""
    return rows.lazy_models() if isinstance(rows, OperatorColumns) else list(rows)


class KernelsAt(ItemsAt[Kernel]):
    """Some of a view's kernels, given by their positions in its kernel list: each model is built (by
    the view's lazy list) only when read, and :meth:`ProfileView.positions` reads the positions back
    without looking at a model."""


class ProfileView:
    """Indexes over a Profile; the profile itself is never modified."""

    @classmethod
    def of(cls, profile: Profile) -> ProfileView:
        """The view of ``profile``: the shared one inside :func:`shared_views`, else a new one."""
        shared = _SHARED.get()
        if shared is None:
            return cls(profile)
        view = shared.get(id(profile))
        if view is None or view.profile is not profile:
            view = shared[id(profile)] = cls(profile)
        return view

    @gc_paused()  # many acyclic models and rows: the cyclic collector only costs time here
    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        # A large profile holds its kernels and operators as tables whose every iteration builds the
        # models afresh; the rules walk them many times, so each is built once, a block at a time
        # when first read (most rules read columns, and a finding reads a few kernels and operators).
        table = profile.kernels
        self.kernels: Sequence[Kernel] = (table.lazy_models() if isinstance(table, KernelTable)
                                          else list(table))
        self.operators: Sequence[Operator] = _operator_models(profile.operators)
        # Per-operator caches (rules ask for the same operator's kernels and counters repeatedly).
        self._kernels_of: dict[str, Sequence[Kernel]] = {}
        self._counters_of: dict[str, dict[str, float | None]] = {}
        self._counter_values: dict[str, np.ndarray] = {}
        self._op_columns: dict[str, list[Any]] = {}  # op_column's lists that are costly to make again
        self._op_combinations: dict[tuple[str, ...], tuple[list[tuple[int, ...]], np.ndarray]] = {}  # op_mask's
        self._name_class: dict[str, OperatorClass] = {}
        self._work_class: dict[str, OperatorClass] = {}
        self._work_class_single: set[str] = set()  # keys whose work class was worked out on its own
        self._matches: dict[re.Pattern[str], dict[str, bool]] = {}
        self._name_masks: dict[re.Pattern[str], np.ndarray] = {}
        # hand-written attention groups per (operator list, window): the rules and decode-loop detection
        # ask for the same ones; the list is kept beside its groups so its id is not reused
        self.attention_groups: dict[tuple[int, int], tuple[Sequence[Operator], list[list[int]]]] = {}
        self.gemm_signatures: dict[int, tuple[Sequence[Operator], list[tuple | None]]] = {}  # patterns.py

    @cached_property
    def kernels_by_id(self) -> dict[int, Kernel]:
        """Kernel id -> its model."""
        return {k.id: k for k in self.kernels}

    # -- time
    @cached_property
    def total_ns(self) -> int:
        """Profiled kernel time: the sum of every kernel's timeline duration."""
        if self.kernels:
            return int(self._columns.duration.sum())
        return self.profile.coverage.duration_ns

    def share_pct(self, duration_ns: float) -> float:
        """``duration_ns`` as a share of profiled kernel time."""
        return pct(duration_ns, self.total_ns)

    @cached_property
    def measured_roofline(self) -> Roofline:
        """The profile's roofline on measured roofs, built once from the view's models."""
        from profiler_core.analysis.roofline import roofline

        return roofline(self.profile, measured_roofs=True, kernels=self.kernels, operators=self.operators,
                        op_keys=self.op_keys, op_index=None if self.keys_repeat else self._op_index)

    # -- operators
    @cached_property
    def ops_in_order(self) -> Sequence[Operator]:
        """Operators in launch order (first kernel start); kernel-less ones keep their list position."""
        ops = self.operators
        if isinstance(ops, OperatorModels):  # a model built only when read
            return OperatorsAt(ops, self.op_order)
        return [ops[g] for g in self.op_order.tolist()]

    @cached_property
    def op_order(self) -> np.ndarray:
        """The positions in ``operators`` of :attr:`ops_in_order`, in that order: an array over the
        operators (``work_class_codes``, ``op_counter_values``) indexed by it follows launch order."""
        members = self._members
        n = len(self.operators)
        starts = members.first_start
        # a kernel-less operator sorts at the start of the operator before it (-1 before any)
        known = np.flatnonzero(members.sizes > 0)
        carried = np.full(n, -1, dtype=np.int64)
        if len(known):
            last = np.maximum.accumulate(np.where(members.sizes > 0, np.arange(n), -1))
            carried = np.where(last >= 0, starts[np.maximum(last, 0)], -1)
        return np.lexsort((np.arange(n), carried))

    @cached_property
    def work_class_codes(self) -> np.ndarray:
        """:meth:`work_class` of every operator, by position in ``operators``, as its index in
        ``list(OperatorClass)`` (``CLASS_CODES``)."""
        if self._repeats:  # a repeated key: each operator as work_class has it
            return np.fromiter((CLASS_CODES[self.work_class(op)] for op in self.operators), dtype=np.int64,
                               count=len(self.operators))
        codes = self._work_class_codes.copy()
        for key in self._work_class_single:  # a class remembered before every operator's was worked out
            g = self._op_index.get(key)
            if g is not None:
                codes[g] = CLASS_CODES[self._work_class[key]]
        codes.flags.writeable = False
        return codes

    @cached_property
    def work_classes_in_order(self) -> list[OperatorClass]:
        """:meth:`work_class` of each of :attr:`ops_in_order`, read at once."""
        every = list(OperatorClass)
        return [every[c] for c in self.work_class_codes[self.op_order].tolist()]

    @cached_property
    def op_first_starts(self) -> np.ndarray:
        """The start of each operator's first kernel in the view (0 for one without), by position in
        ``operators``: ``first_start_ns(kernels_of(op))`` where keys are distinct."""
        starts = self._members.first_start.copy()
        starts.flags.writeable = False
        return starts

    @cached_property
    def op_kernel_counts(self) -> np.ndarray:
        """``len(kernels_of(op))`` of every operator, by position in ``operators``."""
        counts = self._members.sizes.copy()
        for g in self._repeats:
            counts[g] = len(self.kernels_of(self.operators[g]))
        return counts

    @property
    def keys_repeat(self) -> bool:
        """Whether two operators share a key (then ``operators_by_key`` holds the last of them)."""
        return bool(self._repeats)

    @cached_property
    def _repeats(self) -> list[int]:
        """The positions of the operators repeating an earlier one's key (none where keys are distinct):
        what the view answers by key, not by position, for them."""
        ops = self.operators
        if isinstance(ops, OperatorModels) and ops.table.keys_distinct:
            return []  # read off the key column: no index of every key is built for it
        if len(self._op_index) == len(ops):
            return []
        return [g for g, op in enumerate(self.operators) if self._row_of(op) != g]

    @cached_property
    def _op_aggregate_rows(self) -> np.ndarray:
        """Each operator's row in the counter aggregate, by position in ``operators`` (-1: none). A dict
        :meth:`op_counters` remembered for a key the aggregate holds is that row's, so it is not asked."""
        agg = self._op_aggregate
        if agg.every and agg.aggregation is not None and not self.keys_repeat:  # row g: operator g, if it has kernels
            return np.where(agg.sizes > 0, np.arange(len(self.operators)), -1)
        group = agg.group
        return np.fromiter((group.get(op.key, -1) for op in self.operators), dtype=np.int64,
                           count=len(self.operators))

    def op_counter_values(self, field: str) -> np.ndarray:
        """:meth:`op_counter` of every operator for ``field``, by position in ``operators`` (NaN where it
        is None): what a rule compares with a threshold, for all operators at once."""
        cached = self._counter_values.get(field)
        if cached is not None:
            return cached
        ops, agg, rows = self.operators, self._op_aggregate, self._op_aggregate_rows
        out = np.full(len(ops), np.nan)
        column = _OpAggregate._COLUMN.get(field)
        if column is not None and agg.aggregation is not None:
            read = np.flatnonzero(rows >= 0)
            named = (agg.named[rows[read]] >> column) & 1 == 1
            out[read[named]] = agg.column(column)[rows[read[named]]]
        for g in np.flatnonzero(rows < 0).tolist():  # the stored metrics, or a dict already worked out
            value = self.op_counter(ops[g], field)
            if value is not None:
                out[g] = value
        out.flags.writeable = False
        self._counter_values[field] = out
        return out

    @cached_property
    def operators_by_key(self) -> Mapping[str, Operator]:
        """Operator key -> its model (the last, should a key repeat)."""
        if self.keys_repeat:
            return {op.key: op for op in self.operators}
        return _ModelsByKey(self._op_index, self.operators)

    def op_mask(self, fields: str | tuple[str, ...], test: Callable[..., bool]) -> np.ndarray:
        """``test(op.<field>, ...)`` of every operator, by position in ``operators``: for operators
        read from a table, once per distinct value (or combination of values), without a model."""
        names = (fields,) if isinstance(fields, str) else fields
        ops = self.operators
        if isinstance(ops, OperatorModels):
            columns = [ops.table.codes(f) for f in names]
            if len(columns) == 1:
                codes, values = columns[0]
                used = np.zeros(len(values), dtype=bool)
                used[codes] = True  # the values some operator holds (not the null row's None, say)
                return np.array([u and bool(test(v)) for v, u in zip(values, used.tolist(), strict=True)],
                                dtype=bool)[codes]
            known = self._op_combinations.get(names)
            if known is None:  # the distinct combinations, worked out once per set of fields
                known = self._op_combinations[names] = _combinations([c for c, _ in columns],
                                                                     [len(v) for _, v in columns])
            combos, inverse = known
            told = [bool(test(*(vals[c] for (_, vals), c in zip(columns, combo, strict=True))))
                    for combo in combos]
            return np.array(told, dtype=bool)[inverse]
        return _tested(ops, names, test)

    def op_flags(self, ops: Sequence[Operator], fields: str | tuple[str, ...],
                 test: Callable[..., bool]) -> np.ndarray:
        """``test(op.<field>, ...)`` of each of ``ops``: :meth:`op_mask` for the view's own list or
        its launch order, else asked operator by operator."""
        if ops is self.operators:
            return self.op_mask(fields, test)
        if ops is self.ops_in_order:
            return self.op_mask_in_order(fields, test)
        return _tested(ops, (fields,) if isinstance(fields, str) else fields, test)

    def op_column(self, field: str, ops: Sequence[Operator] | None = None) -> list[Any]:
        """``op.<field>`` of each of ``ops`` (the view's operators when None): for the view's own
        list or its launch order, read off the table without a model where the operators are a
        table's (the very values its read-only models hold)."""
        mine = self.operators
        if ops is None:
            ops = mine
        if isinstance(mine, OperatorModels) and (ops is mine or ops is self.ops_in_order):
            coded = self.op_codes_in_order(field) if ops is not mine else None
            if coded is not None:
                codes, values = coded
                return [values[c] for c in codes.tolist()]
            cached = self._op_columns.get(field)
            if cached is None:
                cached = mine.table.column(field)
                if cached is not None and field in ("key", "kernel_ids"):
                    self._op_columns[field] = cached  # kept: these take a list per operator to make
            if cached is not None:
                return cached if ops is mine else [cached[g] for g in self.op_order.tolist()]
        return [getattr(op, field) for op in ops]

    def op_codes_in_order(self, field: str) -> tuple[np.ndarray, list[Any]] | None:
        """A field the operator table keeps dictionary-encoded, for :attr:`ops_in_order`: (each
        operator's code, the values the codes index); None where the operators are not a table's."""
        mine = self.operators
        if not isinstance(mine, OperatorModels) or field not in OperatorColumns._CODED:
            return None
        codes, values = mine.table.codes(field)
        return codes[self.op_order], values

    def op_mask_in_order(self, fields: str | tuple[str, ...], test: Callable[..., bool]) -> np.ndarray:
        """:meth:`op_mask` by position in :attr:`ops_in_order`."""
        return self.op_mask(fields, test)[self.op_order]

    def operators_of_keys(self, keys: Iterable[str]) -> Sequence[Operator]:
        """The operators of ``keys`` (those the view has, in that order), keys distinct: their models
        built only when read."""
        index = self._op_index
        return OperatorsAt(self.operators, np.array([g for k in keys if (g := index.get(k)) is not None],
                                                    dtype=np.int64))

    def launch_positions(self, ops: Sequence[Operator]) -> np.ndarray:
        """The positions in :attr:`ops_in_order` of ``ops`` (the view's own operators, keys distinct)."""
        rows = self._rows_of_set(ops)
        if rows is None:
            raise ValueError("launch_positions: an operator is not one of the view's own")
        inverse = self._launch_position
        return inverse[rows]

    @cached_property
    def _launch_position(self) -> np.ndarray:
        """Each operator's position in :attr:`ops_in_order`, by position in ``operators``."""
        order = self.op_order
        out = np.empty(len(order), dtype=np.int64)
        out[order] = np.arange(len(order))
        return out

    def operators_in_order_at(self, at: Sequence[int] | np.ndarray) -> Sequence[Operator]:
        """The operators at positions ``at`` of :attr:`ops_in_order`: their models built only when read
        where keys are distinct (else a list of them)."""
        if self.keys_repeat:
            ops = self.ops_in_order
            return [ops[i] for i in np.asarray(at, dtype=np.int64).tolist()]
        return OperatorsAt(self.operators, self.op_order[np.asarray(at, dtype=np.int64)])

    def joined(self, parts: Sequence[Sequence[Operator]]) -> Sequence[Operator]:
        """``parts`` one after the other: positions joined where each is an :class:`OperatorsAt` of the
        view's list, else a list of the models."""
        if all(isinstance(p, OperatorsAt) and p.of is self.operators for p in parts):
            orders = [p.at for p in parts]  # type: ignore[attr-defined]
            return OperatorsAt(self.operators, np.concatenate(orders) if orders else np.zeros(0, dtype=np.int64))
        return [op for p in parts for op in p]

    def rows_of_keys(self, keys: Iterable[str]) -> np.ndarray | None:
        """The positions in ``operators`` of the operators of ``keys`` (each a key the view has), or
        None where keys repeat (a key then names several operators)."""
        if self.keys_repeat:
            return None
        index = self._op_index
        return np.fromiter((index[k] for k in keys), dtype=np.int64)

    def keys_of(self, ops: Sequence[Operator]) -> list[str]:
        """The keys of ``ops``: off the key column where they are given by position in the view's list."""
        if isinstance(ops, OperatorsAt) and ops.of is self.operators:
            keys = self.op_keys
            return [keys[g] for g in ops.at.tolist()]
        return [op.key for op in ops]

    @cached_property
    def op_keys(self) -> list[str]:
        """Every operator's key, by position in ``operators`` (read off the table's column, where
        the operators are a table's)."""
        return self.op_column("key")

    @cached_property
    def _op_index(self) -> dict[str, int]:
        """Operator key -> its position in ``operators`` (the first, should a key repeat)."""
        keys = self.op_keys
        out = dict(zip(keys, range(len(keys)), strict=True))
        if len(out) < len(keys):  # a key repeats: the first of it
            out = {}
            for g, key in enumerate(keys):
                out.setdefault(key, g)
        return out

    @cached_property
    def _row_by_id(self) -> Mapping[int, int]:
        """:meth:`_row_of` by the model's ``id()``: the view keeps its models, so an id is one of its own
        for as long as the view lives (the first operator of a repeated key only, as ``_op_index``).
        Models a table builds when read register themselves: only those built can be asked about."""
        operators = self.operators
        if isinstance(operators, OperatorModels) and not self.keys_repeat:
            return operators.position_by_id
        return {id(operators[g]): g for g in self._op_index.values()}

    def _row_of(self, op: Operator) -> int | None:
        """``op``'s position in ``operators`` when it is the view's own model, else None."""
        return self._row_by_id.get(id(op))

    @cached_property
    def _members(self) -> _Members:
        """Every operator's kernels present in the view, as positions in ``kernels``, in timeline order."""
        ops = self.operators
        if isinstance(ops, OperatorModels):  # the table's kernel id lists, as its models hold them
            return _Members(np.diff(ops.table.offsets), ops.table.members[ops.table.offsets[0]:],
                            self.kernels, self._columns)
        counts = np.fromiter((len(op.kernel_ids) for op in ops), dtype=np.int64, count=len(ops))
        ids = np.fromiter(itertools.chain.from_iterable(op.kernel_ids for op in ops), dtype=np.int64,
                          count=int(counts.sum()))
        return _Members(counts, ids, self.kernels, self._columns)

    def op_class(self, op: Operator) -> OperatorClass:
        """The engine's class, or the name classifier's where the engine left OTHER."""
        if op.op_class is not OperatorClass.OTHER:
            return op.op_class
        return classify_operator(op.name, op.fused_with)

    def work_class(self, op: Operator) -> OperatorClass:
        """What the operator's kernels do, which rules judge by.

        Usually its class. But Inductor files a pointwise bias-add under ``aten::addmm`` (the
        GEMM itself ran in cuBLAS as ``aten::mm``): an operator classed GEMM or attention whose
        kernels are all named as something lighter works as that lighter class.
        """
        cached = self._work_class.get(op.key)
        if cached is None:
            if self._row_of(op) is not None and not self._work_class:
                self._work_class_all()  # every operator's at once: the rules ask for nearly all of them
                cached = self._work_class.get(op.key)
            if cached is None:
                cached = self._work_class[op.key] = self._work_class_of(op)
                self._work_class_single.add(op.key)
        return cached

    def _work_class_of(self, op: Operator) -> OperatorClass:
        kinds: dict[OperatorClass, int] = {}
        for k in self.kernels_of(op):
            kc = self.kernel_name_class(k)
            kinds[kc] = kinds.get(kc, 0) + k.duration_ns
        return _work_class_from(self.op_class(op), kinds)

    def _work_class_all(self) -> None:
        """:meth:`_work_class_of` of every operator of the view, read at once off its kernels' positions."""
        codes = self._work_class_codes
        every, out = list(OperatorClass), self._work_class
        for op, code in zip(self.operators, codes.tolist(), strict=True):
            if op.key not in out:
                out[op.key] = every[code]

    @cached_property
    def _work_class_codes(self) -> np.ndarray:
        """:meth:`_work_class_of` of every operator, by position in ``operators``, as a class code.

        Per operator and kernel name class: whether one of its kernels is named so, their time, and
        where the first of them comes among its kernels; a heavy class named decides, else an operator
        classed heavy works as its kernels' class of most time (ties: the first named), else as classed.
        """
        members, cols = self._members, self._columns
        n, n_classes = len(self.operators), len(CLASS_CODES)
        kclass = self._name_class_codes[cols.name[members.flat]] if len(members.flat) else np.zeros(0, dtype=np.int64)
        grp = np.repeat(np.arange(n), members.sizes)
        cell = grp * n_classes + kclass
        present = np.zeros(n * n_classes, dtype=bool)
        present[cell] = True
        named = present.reshape(n, n_classes)
        out = self.op_class_codes.copy()
        decided = np.zeros(n, dtype=bool)
        for heavy in _HEAVY:  # the first heavy class in _HEAVY's order that a kernel's name says
            take = named[:, CLASS_CODES[heavy]] & ~decided
            out[take] = CLASS_CODES[heavy]
            decided |= take
        named = named.copy()
        named[:, CLASS_CODES[OperatorClass.OTHER]] = False
        heavy_op = np.isin(self.op_class_codes, [CLASS_CODES[c] for c in _HEAVY])
        rest = np.flatnonzero(~decided & heavy_op & named.any(axis=1))
        if len(rest):  # the named class of most time, ties to the one named first
            # each class's time and first place among the operator's kernels, for these operators only
            row = np.full(n, -1, dtype=np.int64)
            row[rest] = np.arange(len(rest))
            at = np.flatnonzero(row[grp] >= 0)
            rest_cell = row[grp[at]] * n_classes + kclass[at]
            times = np.zeros(len(rest) * n_classes, dtype=np.int64)
            np.add.at(times, rest_cell, cols.duration[members.flat[at]])
            firsts = np.full(len(rest) * n_classes, len(cell), dtype=np.int64)
            np.minimum.at(firsts, rest_cell, at)
            score = np.where(named[rest], times.reshape(len(rest), n_classes), -1)
            best = score.max(axis=1, keepdims=True)
            out[rest] = np.where(score == best, firsts.reshape(len(rest), n_classes),
                                 np.iinfo(np.int64).max).argmin(axis=1)
        return out

    @cached_property
    def op_class_codes(self) -> np.ndarray:
        """:meth:`op_class` of every operator, by position in ``operators``, as a class code."""
        ops = self.operators
        if isinstance(ops, OperatorModels):  # off the table's codes: the classifier once per distinct
            table = ops.table                # (name, fused ops) of the operators classed OTHER
            class_codes, class_values = table.codes("op_class")
            classes = np.array([CLASS_CODES[c] if c is not None else -1 for c in class_values], dtype=np.int64)
            out = classes[class_codes]
            other = np.flatnonzero(out == CLASS_CODES[OperatorClass.OTHER])
            if len(other):
                (names, name_values), (fused, fused_values) = table.codes("name"), table.codes("fused_with")
                pairs, inverse = _combinations([names[other], fused[other]], [len(name_values), len(fused_values)])
                out[other] = np.array([CLASS_CODES[classify_operator(name_values[n], fused_values[f])]
                                       for n, f in pairs], dtype=np.int64)[inverse]
            return out
        return np.fromiter((CLASS_CODES[self.op_class(op)] for op in self.operators), dtype=np.int64,
                           count=len(self.operators))

    def kernel_name_class(self, kernel: Kernel) -> OperatorClass:
        """The class a kernel's own name (and fused ops) says, whoever launched it."""
        return self._class_of_name(kernel.name, kernel.fused_with)

    def _class_of_name(self, name: str, fused_with: Sequence[str]) -> OperatorClass:
        cached = self._name_class.get(name)
        if cached is None:
            cached = self._name_class[name] = classify_operator(name, list(fused_with))
        return cached

    def matches(self, pattern: re.Pattern[str], name: str) -> bool:
        """``pattern.search(name)`` as a bool, remembered per name: a large profile repeats a few
        hundred kernel names over its kernels, and the rules test each kernel's."""
        seen = self._matches.get(pattern)
        if seen is None:
            seen = self._matches[pattern] = {}
        hit = seen.get(name)
        if hit is None:
            hit = seen[name] = pattern.search(name) is not None
        return hit

    def gemm_kernel_ns(self, kernels: Iterable[Kernel] | None = None) -> int:
        """Time of the GEMM kernels (by each kernel's own name) among ``kernels`` (all when None).

        The denominator of "X% of all GEMM time": a cuDNN RNN's cell kernels or a Triton
        epilogue are not GEMM time, whoever launched them.
        """
        ks = self.kernels if kernels is None else kernels
        at = np.arange(len(ks)) if ks is self.kernels else self._own_at(ks)
        if at is None:
            return sum(k.duration_ns for k in ks if self.kernel_name_class(k) is OperatorClass.GEMM)
        gemm = self._name_class_codes[self._columns.name[at]] == CLASS_CODES[OperatorClass.GEMM]
        return int(self._columns.duration[at][gemm].sum())

    @cached_property
    def _name_class_codes(self) -> np.ndarray:
        """:meth:`kernel_name_class` of every distinct kernel name, by name code: each name classed as
        its first kernel (in the view's order) is, as asking kernel by kernel would class it."""
        cols, kernels, table = self._columns, self.kernels, self.profile.kernels
        out = np.zeros(len(cols.names), dtype=np.int64)
        codes, first = unique_ints(cols.name, index=True)
        if isinstance(table, KernelTable):  # kernel j at position j: its name and fused ops off the columns
            fused = table.fused
            out[codes] = [CLASS_CODES[self._class_of_name(cols.names[c], fused[f])]
                          for c, f in zip(codes.tolist(), table.fused_with[first].tolist(), strict=True)]
        else:
            out[codes] = [CLASS_CODES[self.kernel_name_class(kernels[p])] for p in first.tolist()]
        return out

    def own_kernel_positions(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The kernels of the operators at positions ``rows`` of ``operators`` (as :meth:`kernels_of`
        gives them) as positions in ``kernels``, set after set, and each set's size; None where two
        operators share a key (``kernels_of`` answers by key)."""
        if self.keys_repeat:
            return None
        return self._members.kernels_of_rows(rows)

    def kernels_of(self, op: Operator) -> Sequence[Kernel]:
        """The operator's kernels present in the profile, in timeline order."""
        cached = self._kernels_of.get(op.key)
        if cached is None:
            g = self._row_of(op)
            if g is not None:
                members = self._members
                cached = KernelsAt(self.kernels, members.flat[members.offsets[g]:members.offsets[g + 1]])
            else:
                ks = [self.kernels_by_id[i] for i in op.kernel_ids if i in self.kernels_by_id]
                cached = sorted(ks, key=lambda k: k.start_ns)
            self._kernels_of[op.key] = cached
        return cached

    def _own_at(self, kernels: Iterable[Kernel]) -> np.ndarray | None:
        """The positions of ``kernels`` when they are given as positions in the view's kernel list."""
        return kernels.at if isinstance(kernels, KernelsAt) and kernels.of is self.kernels else None

    def names_in(self, kernels: Sequence[Kernel]) -> list[str]:
        """Each of ``kernels``' names, read off the columns where they are the view's."""
        at = self._own_at(kernels)
        if at is None:
            return [k.name for k in kernels]
        names = self._columns.names
        return [names[c] for c in self._columns.name[at].tolist()]

    def fused_with_at(self, p: int) -> list[str]:
        """``kernels[p].fused_with``, read off the kernel table where the kernels are its models."""
        table = self.profile.kernels
        if isinstance(table, KernelTable):  # kernel j at position j
            return list(table.fused[int(table.fused_with[p])])
        return self.kernels[p].fused_with

    def durations_in(self, kernels: Sequence[Kernel]) -> np.ndarray:
        """Each of ``kernels``' duration in ns (int64), read off the columns where they are the view's."""
        at = self._own_at(kernels)
        if at is None:
            return np.fromiter((k.duration_ns for k in kernels), dtype=np.int64, count=len(kernels))
        return self._columns.duration[at]

    def max_registers(self, kernels: Sequence[Kernel]) -> float | None:
        """The most registers per thread any of ``kernels`` uses: ncu's counter where it is measured (and
        not 0), else the launch record's; None where neither is known for any."""
        table, at = self.profile.kernels, self._own_at(kernels)
        if at is None or not isinstance(table, KernelTable):
            found = [float(v) for k in kernels
                     if (v := (k.counters or {}).get("registers_per_thread") or k.registers_per_thread) is not None]
            return max(found) if found else None
        launch = np.asarray(table.registers_per_thread)[at].astype(float)
        launch[np.asarray(table.registers_per_thread)[at] == NONE] = np.nan
        value = launch
        if table.have_counters and "registers_per_thread" in table.counter_fields:
            rows = np.asarray(table.counter_row)[at]
            counted = np.full(len(at), np.nan)
            has = rows != NONE
            field = table.counter_fields.index("registers_per_thread")
            counted[has] = np.asarray(table.counter_values)[rows[has], field]
            value = np.where(np.isnan(counted) | (counted == 0), launch, counted)
        value = value[~np.isnan(value)]
        return float(value.max()) if len(value) else None

    def busy_and_span_at(self, at: np.ndarray) -> tuple[int, int]:
        """:func:`busy_and_span_ns` of the kernels at positions ``at``, read off the columns."""
        if not len(at):
            return 0, 0
        cols = self._columns
        order = np.argsort(cols.start[at], kind="stable")
        start, end = cols.start[at][order], cols.end[at][order]
        reach = np.maximum.accumulate(end)  # the latest end so far
        first = np.flatnonzero(np.r_[True, start[1:] > reach[:-1]])  # a busy stretch starts past every end
        last = np.r_[first[1:] - 1, len(start) - 1]
        return int((reach[last] - start[first]).sum()), int(reach[-1] - start[0])

    def first_start_ns(self, kernels: Sequence[Kernel]) -> int:
        """The start of the first of ``kernels`` (not empty), read off the columns where they are the view's."""
        at = self._own_at(kernels)
        return kernels[0].start_ns if at is None else int(self._columns.start[at[0]])

    @cached_property
    def op_durations(self) -> np.ndarray:
        """:meth:`op_duration_ns` of every operator, by position in ``operators``."""
        members, ops = self._members, self.operators
        out = np.where(members.sizes > 0, segment_sums(self._columns.duration[members.flat], members.sizes),
                       ops.table.duration_ns if isinstance(ops, OperatorModels)
                       else np.fromiter((op.duration_ns for op in ops), dtype=np.int64, count=len(ops)))
        for g in self._repeats:
            out[g] = self.op_duration_ns(ops[g])
        out.flags.writeable = False
        return out

    def op_duration_ns(self, op: Operator) -> int:
        """Sum of the operator's kernel durations (the stored figure when its kernels are absent)."""
        ks = self.kernels_of(op)
        return int(self.durations_in(ks).sum()) if ks else op.duration_ns

    def op_counters(self, op: Operator) -> dict[str, float | None]:
        """The operator's aggregated counters (recomputed from kernels when they carry counters)."""
        cached = self._counters_of.get(op.key)
        if cached is None:
            agg = self._op_aggregate
            g = agg.group.get(op.key)
            if g is not None:
                cached = agg.counters(g)
            else:  # an operator not among the profile's, or one whose kernels carry no counters
                ks = [k for k in self.kernels_of(op) if k.counters]
                cached = kernel_counters(ks) if ks else dict(op.metrics)
            self._counters_of[op.key] = cached
        return cached

    def op_counter(self, op: Operator, field: str) -> float | None:
        """``counter(op_counters(op), field)``, read from the aggregate without building the dict."""
        if op.key not in self._counters_of:
            agg = self._op_aggregate
            g = agg.group.get(op.key)
            if g is not None:
                return agg.value(g, field)
        value = self.op_counters(op).get(field)
        return float(value) if value is not None else None

    @cached_property
    def _op_aggregate(self) -> _OpAggregate:
        """Every operator's counters from its kernels, aggregated for all operators at once."""
        known = self._counters_of
        none_known = not known or not any(key in known for key in self.op_keys)
        ops: Sequence[Operator] = (self.operators if none_known
                                   else [op for op, key in zip(self.operators, self.op_keys, strict=True)
                                         if key not in known])
        table = self.counter_rows
        if not ops or not table.kernels:
            return _OpAggregate({}, None, np.zeros(0, dtype=np.int64))
        if len(ops) == len(self.operators):
            members = self._members  # each operator's kernels in timeline order, as kernels_of gives them
            grp = np.repeat(np.arange(len(ops)), members.sizes)
            rows = table.row_at[members.flat]
        else:
            rows, grp = self._timeline_rows(ops)
        keep = rows >= 0  # less those without counters
        rows, grp = rows[keep], grp[keep]
        sizes = np.bincount(grp, minlength=len(ops))
        aggregation = CounterAggregation(table.matrix, table.durations, rows, np.repeat(np.arange(len(sizes)), sizes),
                                         len(sizes), matrix_rows=table.matrix_rows_of(rows))
        named = _named_masks(table.key_masks[rows], sizes)
        every = len(ops) == len(self.operators)
        group: Mapping[str, int] = (
            _KeyRows(self._op_index, sizes) if every and not self.keys_repeat
            else {op.key: g for g, (op, n) in enumerate(zip(ops, sizes.tolist(), strict=True)) if n})
        return _OpAggregate(group, aggregation, named, every=every)

    def _timeline_rows(self, ops: Sequence[Operator]) -> tuple[np.ndarray, np.ndarray]:
        """The counter rows of each of ``ops``' kernels present in the view (-1: no counters), operator
        after operator, each one's in timeline order (a stable sort, as kernels_of gives them), and
        each row's operator (its index in ``ops``)."""
        table = self.counter_rows
        top = max(max(self.kernels_by_id), max((max(op.kernel_ids, default=0) for op in ops), default=0)) + 1
        start = np.zeros(top, dtype=np.int64)
        present = np.zeros(top, dtype=bool)
        row = np.full(top, -1, dtype=np.int64)
        ids = np.fromiter(self.kernels_by_id, dtype=np.int64, count=len(self.kernels_by_id))
        start[ids] = [k.start_ns for k in self.kernels_by_id.values()]
        present[ids] = True
        row[np.fromiter((k.id for k in table.kernels), dtype=np.int64, count=len(table.kernels))] = \
            np.arange(len(table.kernels))
        counts = np.fromiter((len(op.kernel_ids) for op in ops), dtype=np.int64, count=len(ops))
        flat = np.fromiter(itertools.chain.from_iterable(op.kernel_ids for op in ops), dtype=np.int64,
                           count=int(counts.sum()))
        grp = np.repeat(np.arange(len(ops)), counts)
        keep = (flat >= 0) & (flat < top)
        flat, grp = flat[keep], grp[keep]
        keep = present[flat]
        flat, grp = flat[keep], grp[keep]
        order = np.lexsort((start[flat], grp))
        return row[flat[order]], grp[order]

    @cached_property
    def counter_rows(self) -> CounterRows:
        """The counters of every kernel of the view, as one matrix."""
        table = self.profile.kernels
        return CounterRows(self.kernels, table if hasattr(table, "counter_values") else None)

    # -- kernels
    @cached_property
    def kernel_operator(self) -> Mapping[int, Operator]:
        """Kernel id -> its operator (attributed kernels only)."""
        if isinstance(self.kernels, KernelModels):  # kernel j has id j: read off the owner rows
            return _KernelOwners(self.kernel_owner_rows, self.operators)
        out: dict[int, Operator] = {}
        for op in self.operators:
            for kid in op.kernel_ids:
                out[kid] = op
        for k in self.kernels:
            key = k.attribution.operator_key
            if k.id not in out and key is not None and key in self.operators_by_key:
                out[k.id] = self.operators_by_key[key]
        return out

    @cached_property
    def kernel_owner_rows(self) -> np.ndarray:
        """:attr:`kernel_operator` of every kernel, by position in ``kernels``, as the operator's position
        in ``operators`` (-1: none): read off the operators' kernel positions (a kernel two operators
        list is the later one's), the kernels no operator lists by their attribution's operator."""
        members = self._members
        owner = np.full(len(self.kernels), -1, dtype=np.int64)
        grp = np.repeat(np.arange(len(self.operators)), members.sizes)
        order = np.lexsort((grp, members.flat))
        last = np.ones(len(order), dtype=bool)
        last[:-1] = members.flat[order[1:]] != members.flat[order[:-1]]
        owner[members.flat[order[last]]] = grp[order[last]]
        unlisted = np.flatnonzero(owner < 0).tolist()
        if unlisted:
            keys = self.op_keys  # the later of a repeated key, as operators_by_key has it
            row_of_key = dict(zip(keys, range(len(keys)), strict=True))
            kernels = self.kernels
            for p in unlisted:
                g = row_of_key.get(kernels[p].attribution.operator_key)  # type: ignore[arg-type]
                if g is not None:
                    owner[p] = g
        owner.flags.writeable = False
        return owner

    @cached_property
    def kernel_class_codes(self) -> np.ndarray:
        """:meth:`kernel_class` of every kernel, by position in ``kernels``, as its index in
        ``list(OperatorClass)``: its operator's class (:attr:`kernel_owner_rows`), a kernel of no
        operator classed by its own name."""
        owner = self.kernel_owner_rows
        op_codes = self.op_class_codes
        codes = np.where(owner >= 0, op_codes[np.maximum(owner, 0)] if len(op_codes) else -1, -1)
        kernels = self.kernels
        for p in np.flatnonzero(owner < 0).tolist():
            k = kernels[p]
            codes[p] = CLASS_CODES[classify_operator(k.name, k.fused_with)]
        return codes

    def is_unattributed(self, kernel: Kernel) -> bool:
        """True when no operator owns the kernel."""
        return kernel.attribution.tier is Tier.UNATTRIBUTED or kernel.id not in self.kernel_operator

    def kernel_class(self, kernel: Kernel) -> OperatorClass:
        """The class of the kernel's operator, or of the kernel name when it has none."""
        op = self.kernel_operator.get(kernel.id)
        if op is not None:
            return self.op_class(op)
        return classify_operator(kernel.name, kernel.fused_with)

    @cached_property
    def unattributed_mask(self) -> np.ndarray:
        """:meth:`is_unattributed` of every kernel, by position in ``kernels``."""
        unattributed = list(Tier).index(Tier.UNATTRIBUTED)
        return (self._columns.tier == unattributed) | (self.kernel_owner_rows < 0)

    @cached_property
    def unattributed_kernels(self) -> list[Kernel]:
        """Kernels no operator owns, in timeline order."""
        kernels = self.kernels
        return [kernels[p] for p in np.flatnonzero(self.unattributed_mask).tolist()]

    @cached_property
    def unattributed_ns(self) -> int:
        """Kernel time no operator owns (from the unattributed list when kernels are absent)."""
        if self.kernels:
            return int(self._columns.duration[self.unattributed_mask].sum())
        return sum(u.duration_ns for u in self.profile.unattributed)

    @cached_property
    def counterless_mask(self) -> np.ndarray:
        """Whether each kernel (by position in ``kernels``) carries no hardware counters: its counter
        source says missing, or its counters are empty."""
        table = self.profile.kernels
        if isinstance(table, KernelTable):  # a table's kernel lists every field or none
            missing = np.asarray(table.counter_source) == SOURCES.index(CounterSource.MISSING)
            return missing | (not (table.have_counters and table.counter_fields))
        return np.fromiter((k.counter_source is CounterSource.MISSING or not k.counters for k in self.kernels),
                           dtype=bool, count=len(self.kernels))

    # -- evidence
    @cached_property
    def _columns(self) -> _KernelColumns:
        table = self.profile.kernels
        if isinstance(table, KernelTable):  # the kernels are its models: kernel j (id j) at position j
            return _KernelColumns.of_table(table)  # read off the columns the models were built from
        return _KernelColumns(self.kernels)

    @property
    def kernel_columns(self) -> _KernelColumns:
        """Every kernel's times, name, kind, stream, tier and confidence, as arrays by its position in ``kernels``."""
        return self._columns

    def launch_gaps_ns(self, at: np.ndarray, max_gap_ns: int) -> int:
        """The idle gaps (0 < gap <= ``max_gap_ns``) between consecutive kernels of each stream, summed,
        over the kernels at positions ``at``: each gap from the latest end so far to the next start."""
        cols = self._columns
        order = np.lexsort((at, cols.start[at], cols.stream[at], cols.device[at]))  # by stream, start, position
        at = at[order]
        device, stream, start, end = cols.device[at], cols.stream[at], cols.start[at], cols.end[at]
        cuts = np.flatnonzero((device[1:] != device[:-1]) | (stream[1:] != stream[:-1])) + 1
        total = 0
        for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), len(at)], strict=True):
            if hi - lo < 2:
                continue
            gaps = start[lo + 1:hi] - np.maximum.accumulate(end[lo:hi - 1])
            total += int(gaps[(gaps > 0) & (gaps <= max_gap_ns)].sum())
        return total

    @property
    def kernel_durations(self) -> np.ndarray:
        """Each kernel's duration in ns (int64), by its position in ``kernels``."""
        return self._columns.duration

    @property
    def kernel_name_codes(self) -> np.ndarray:
        """Each kernel's name as a code (an index into :attr:`kernel_names`), by its position in ``kernels``."""
        return self._columns.name

    @property
    def kernel_names(self) -> list[str]:
        """The distinct kernel names, in the order each first appears."""
        return self._columns.names

    def name_matches(self, pattern: re.Pattern[str]) -> np.ndarray:
        """:meth:`matches` of every distinct kernel name, as booleans by name code."""
        mask = self._name_masks.get(pattern)
        if mask is None:
            mask = self._name_masks[pattern] = np.array([self.matches(pattern, name) for name in self._columns.names],
                                                        dtype=bool)
        return mask

    def positions(self, kernels: Sequence[Kernel]) -> np.ndarray | None:
        """The positions of ``kernels`` in the view's kernel list, or None when one is not the view's."""
        own = self._own_at(kernels)
        if own is not None:
            return own
        cols = self._columns
        ids = np.fromiter(map(_ID, kernels), dtype=np.int64, count=len(kernels))
        if len(ids) and (ids.min() < 0 or ids.max() >= len(cols.pos_at)):
            return None  # not the view's kernels, or ids too sparse to index: read from the models
        out = cols.pos_at[ids]
        if len(out) and out.min() < 0:
            return None
        # the very models of the view, not copies of them (a rule may hand over any kernels)
        if not all(map(is_, map(self.kernels.__getitem__, out.tolist()), kernels)):
            return None
        return out

    def counters_of(self, kernels: Iterable[Kernel], fields: Iterable[str] | None = None,
                    ) -> dict[str, float | None]:
        """Aggregated counters of ``kernels``, rounded to 4 places, as evidence carries them.

        With ``fields``, exactly those fields in that order (None where not measured).
        """
        ks = kernels if isinstance(kernels, KernelsAt) else list(kernels)
        return self._counters_at(ks, self.positions(ks), fields)

    def _counters_at(self, kernels: Sequence[Kernel], at: np.ndarray | None, fields: Iterable[str] | None,
                     ) -> dict[str, float | None]:
        """:meth:`counters_of` of ``kernels``, found at positions ``at`` of the view (None: not all the view's)."""
        wanted = None if fields is None else list(fields)
        table = self.counter_rows
        counters = kernel_counters_many([kernels], wanted, table)[0] if at is None else self.aggregate_at(at, wanted)
        if wanted is not None:
            counters = {f: counters.get(f) for f in wanted}
        return {f: (round(v, 4) if v is not None else None) for f, v in counters.items()}

    def aggregate_at(self, at: np.ndarray, fields: Collection[str] | None = None) -> dict[str, float | None]:
        """:func:`kernel_counters` of the view's kernels at positions ``at`` (unrounded), read off the
        counter rows: the kernels without counters left out, ``{}`` when none has any."""
        return self.counters_of_positions(at, np.array([len(at)], dtype=np.int64), fields)[0]

    def counters_of_many(self, kernel_sets: Sequence[Sequence[Kernel]], fields: Sequence[str],
                         ) -> list[dict[str, float | None]]:
        """:meth:`counters_of` for each of ``kernel_sets`` (with ``fields``), in one vectorised pass."""
        wanted = list(fields)
        return _rounded(kernel_counters_many(kernel_sets, wanted, self.counter_rows), wanted)

    def counters_of_op_sets(self, op_sets: Sequence[Sequence[Operator]], fields: Sequence[str],
                            ) -> list[dict[str, float | None]]:
        """:meth:`counters_of_many` of each set's :meth:`kernels_of_ops`, read by position in one pass."""
        found = self.kernel_positions_of_ops(op_sets)
        if found is None:
            return self.counters_of_many([self.kernels_of_ops(ops) for ops in op_sets], fields)
        wanted = list(fields)
        return _rounded(self.counters_of_positions(*found, wanted), wanted)

    def evidence(self, kernels: Sequence[Kernel], *, operator_count: int = 0,
                 facts: Iterable[str] = (), counter_fields: Iterable[str] | None = None,
                 ) -> FindingEvidence:
        """Evidence for a set of kernels: time, share, aggregated counters, tiers, confidence."""
        return self.evidence_at(kernels, self.positions(kernels), operator_count=operator_count, facts=facts,
                                counter_fields=counter_fields)

    def evidence_at(self, kernels: Sequence[Kernel], at: np.ndarray | None, *, operator_count: int = 0,
                    facts: Iterable[str] = (), counter_fields: Iterable[str] | None = None,
                    ) -> FindingEvidence:
        """:meth:`evidence` of ``kernels`` found at positions ``at`` (:meth:`positions`; None: not all the view's)."""
        if at is None:  # kernels not (all) the view's: read from the models
            duration = sum(k.duration_ns for k in kernels)
            by_name: Counter[str] = Counter()
            for k in kernels:
                by_name[k.name] += k.duration_ns
            names = [name for name, _ in by_name.most_common(5)]
            tiers = dict(Counter(k.attribution.tier.value for k in kernels))
            confidence = dict(Counter(k.attribution.confidence.value for k in kernels))
        else:
            cols = self._columns
            durations = cols.duration[at]
            duration = int(durations.sum())
            names = [cols.names[c] for c in _heaviest(cols.name[at], durations, 5)]
            tiers = {cols.tiers[c]: n for c, n in _counts_first_seen(cols.tier[at])}
            confidence = {cols.confidences[c]: n for c, n in _counts_first_seen(cols.confidence[at])}
        return FindingEvidence(
            duration_ns=duration,
            share_pct=round(self.share_pct(duration), 3),
            kernel_count=len(kernels),
            operator_count=operator_count,
            counters=self._counters_at(kernels, at, counter_fields),
            tiers=tiers,
            confidence=confidence,
            kernel_names=names,
            facts=list(facts),
        )

    def kernels_of_ops(self, ops: Iterable[Operator]) -> Sequence[Kernel]:
        """All kernels of ``ops``, in timeline order, each once."""
        ops = ops if isinstance(ops, OperatorsAt) else list(ops)
        # by positions where the operators are many (one set: a few operators merge faster one by one)
        found = self.kernel_positions_of_ops([ops]) if len(ops) >= 16 else None
        if found is not None:
            return KernelsAt(self.kernels, found[0])
        seen: dict[int, Kernel] = {}
        for op in ops:
            for k in self.kernels_of(op):
                seen[k.id] = k
        return sorted(seen.values(), key=lambda k: k.start_ns)

    def kernels_of_ops_at(self, ops: Iterable[Operator]) -> tuple[Sequence[Kernel], np.ndarray | None]:
        """:meth:`kernels_of_ops` and their :meth:`positions`, the positions read off the operators where
        they are many (those kernels are the view's own: no check of each)."""
        ops = ops if isinstance(ops, OperatorsAt) else list(ops)
        found = self.kernel_positions_of_ops([ops]) if len(ops) >= 16 and len(self._columns.pos_at) else None
        if found is not None:
            return KernelsAt(self.kernels, found[0]), found[0]
        ks = self.kernels_of_ops(ops)
        return ks, self.positions(ks)

    def _rows_of_set(self, ops: Sequence[Operator]) -> np.ndarray | None:
        """The positions in ``operators`` of ``ops``, or None when one is not the view's own model:
        read off an :class:`OperatorsAt` of the view's list (keys distinct) without its models."""
        if isinstance(ops, OperatorsAt) and ops.of is self.operators and not self.keys_repeat:
            return ops.at
        by_id = self._row_by_id
        at = list(map(by_id.get, map(id, ops)))
        return None if None in at else np.array(at, dtype=np.int64)

    def kernel_positions_of_ops(self, op_sets: Sequence[Sequence[Operator]]
                                ) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`kernels_of_ops` of each set, as positions in ``kernels``: one array, set after set
        (each set's kernels once, in timeline order, ties in the order its operators list them),
        and each set's size. None when an operator is not one of the view's own."""
        rows = [self._rows_of_set(ops) for ops in op_sets]
        if any(r is None for r in rows):
            return None
        return self.kernel_positions_of_rows(
            np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64),  # type: ignore[arg-type]
            np.array([len(ops) for ops in op_sets], dtype=np.int64))

    def kernel_positions_of_rows(self, rows: np.ndarray, set_sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`kernel_positions_of_ops` of sets of the view's operators given by their positions in
        ``operators`` (``rows``, set after set, cut by ``set_sizes``)."""
        # every member of every listed operator, in listing order (``occ``), with its set
        pos, sizes = self._members.kernels_of_rows(rows)
        total = len(pos)
        if len(set_sizes) == 1 and _distinct(pos):
            # one set listing each kernel once (the common case: a finding's operators): timeline
            # order is a stable sort by start, ties in listing order
            return pos[np.argsort(self._columns.start[pos], kind="stable")], np.array([total], dtype=np.int64)
        grp = np.repeat(np.repeat(np.arange(len(set_sizes)), set_sizes), sizes)
        start = self._columns.start[pos]
        if total > 1:
            # each set listed in strictly rising start already (an operator's kernels in launch order,
            # one operator per set: the usual case) holds no kernel twice and is in timeline order
            later = (start[1:] > start[:-1]) | (grp[1:] != grp[:-1])
            if later.all():
                return pos, np.bincount(grp, minlength=len(set_sizes)).astype(np.int64)
        occ = np.arange(total)
        # a kernel listed twice in one set is kept where it is first listed
        order = np.lexsort((occ, pos, grp))
        repeat = np.zeros(total, dtype=bool)
        repeat[order[1:]] = (grp[order[1:]] == grp[order[:-1]]) & (pos[order[1:]] == pos[order[:-1]])
        if repeat.any():
            pos, grp, occ, start = pos[~repeat], grp[~repeat], occ[~repeat], start[~repeat]
        order = np.lexsort((occ, start, grp))  # timeline order, first listing breaking ties
        return pos[order], np.bincount(grp, minlength=len(set_sizes)).astype(np.int64)

    def counters_of_positions(self, positions: np.ndarray, sizes: np.ndarray,
                              fields: Collection[str] | None = None) -> list[dict[str, float | None]]:
        """:func:`kernel_counters_many` of consecutive sets of the view's kernels, given as positions
        in ``kernels`` (set after set, cut by ``sizes``): the same figures, read off the counter rows."""
        table = self.counter_rows
        rows, kept = self._counter_rows_of_sets(positions, sizes)
        return _aggregate_sets(table.matrix, table.durations, rows, table.key_masks[rows], kept, fields,
                               table.matrix_rows_of(rows))

    def _counter_rows_of_sets(self, positions: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The counter rows of the kernels at ``positions`` (set after set) less the kernels without
        counters, and how many each set keeps."""
        rows = self.counter_rows.row_at[positions]
        keep = rows >= 0
        kept = np.bincount(np.repeat(np.arange(len(sizes)), sizes)[keep], minlength=len(sizes)).astype(np.int64)
        return rows[keep], kept

    def distinct_counters_of_positions(self, positions: np.ndarray, sizes: np.ndarray,
                                       ) -> tuple[list[dict[str, float | None]], np.ndarray]:
        """:meth:`counters_of_positions` as (the distinct dicts, each set's number among them): sets
        whose aggregates are the same bits (the same counters named, NaN as None) share one dict,
        built once. A profile repeating its calls has few distinct aggregates however long it is."""
        table = self.counter_rows
        rows, kept = self._counter_rows_of_sets(positions, sizes)
        agg, named = _aggregate_arrays_named(table.matrix, table.durations, rows, table.key_masks[rows], kept,
                                             table.matrix_rows_of(rows))
        codes, first = row_codes(agg.values, named, kept > 0)
        return _set_dicts(agg, named, kept, first.tolist(), None), codes

    def confidence_of(self, kernels: Iterable[Kernel]) -> Confidence:
        """The weakest attribution confidence among ``kernels``."""
        ks = kernels if isinstance(kernels, Sequence) else list(kernels)
        return self.confidence_at(ks, self.positions(ks))

    def confidence_at(self, kernels: Sequence[Kernel], at: np.ndarray | None) -> Confidence:
        """:meth:`confidence_of` ``kernels`` found at positions ``at`` (:meth:`positions`; None: not all the view's)."""
        if at is None:
            return weakest_confidence(k.attribution.confidence for k in kernels)
        cols = self._columns
        return _CONFIDENCE_ORDER[int(cols.weakness[at].max())] if len(at) else Confidence.NONE


def _work_class_from(cls: OperatorClass, kinds: dict[OperatorClass, int]) -> OperatorClass:
    """An operator's work class from its own class and its kernels' name classes (each with its
    time, in the order the kernels first name them): see :meth:`ProfileView.work_class`."""
    for heavy in _HEAVY:
        if heavy in kinds:
            return heavy
    if cls in _HEAVY and set(kinds) - {OperatorClass.OTHER}:
        return max((c for c in kinds if c is not OperatorClass.OTHER), key=kinds.__getitem__)
    return cls


def _distinct(values: np.ndarray) -> bool:
    """Whether no value of ``values`` repeats (a sort of them: as long as they are, not as the table)."""
    ordered = np.sort(values)
    return not (ordered[1:] == ordered[:-1]).any()


def segment_sums(values: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The sum of each consecutive segment of ``values`` (int64), cut by ``sizes`` (0 for an empty one)."""
    summed = np.concatenate(([0], np.cumsum(values, dtype=np.int64)))
    bounds = np.concatenate(([0], np.cumsum(sizes)))
    return summed[bounds[1:]] - summed[bounds[:-1]]


def _rounded(aggregates: Iterable[dict[str, float | None]], fields: list[str]) -> list[dict[str, float | None]]:
    """Each aggregate's ``fields``, rounded to four places (None where not measured)."""
    return [{f: (round(v, 4) if (v := counters.get(f)) is not None else None) for f in fields}
            for counters in aggregates]


class _Members:
    """Each operator's kernels present in a view, as positions into its kernel list: operator ``g``'s
    are ``flat[offsets[g]:offsets[g + 1]]``, in timeline order (by start; ties in ``kernel_ids`` order)."""

    def __init__(self, counts: np.ndarray, ids: np.ndarray, kernels: Sequence[Kernel], cols: _KernelColumns) -> None:
        """``counts``: how many kernel ids each operator lists; ``ids``: those ids, operator after operator."""
        n = len(counts)
        ids = ids[:int(counts.sum())]
        grp = np.repeat(np.arange(n), counts)
        if len(cols.pos_at) or not len(kernels):
            inside = (ids >= 0) & (ids < len(cols.pos_at))
            pos = np.full(len(ids), -1, dtype=np.int64)
            pos[inside] = cols.pos_at[ids[inside]]
        else:  # ids too sparse to index by: one dict lookup each
            at = {k.id: p for p, k in enumerate(kernels)}
            pos = np.fromiter((at.get(i, -1) for i in ids.tolist()), dtype=np.int64, count=len(ids))
        keep = pos >= 0
        pos, grp = pos[keep], grp[keep]
        order = np.lexsort((cols.start[pos], grp))  # stable: equal starts keep kernel_ids order
        self.flat = pos[order]
        self.sizes = np.bincount(grp, minlength=n).astype(np.int64)
        self.offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(self.sizes, out=self.offsets[1:])
        # each operator's first start (0 for one without kernels)
        self.first_start = np.zeros(n, dtype=np.int64)
        has = self.sizes > 0
        self.first_start[has] = cols.start[self.flat[self.offsets[:-1][has]]]

    def kernels_of_rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The kernels of operators ``rows``, operator after operator, and how many each has."""
        sizes = self.sizes[rows]
        first = np.cumsum(sizes) - sizes
        return self.flat[np.arange(int(sizes.sum())) - np.repeat(first - self.offsets[rows], sizes)], sizes


class _KernelColumns:
    """What evidence reads of every kernel of a view, as arrays by the kernel's position."""

    def __init__(self, kernels: Sequence[Kernel]) -> None:
        n = len(kernels)
        ids = np.fromiter(map(_ID, kernels), dtype=np.int64, count=n)
        # the position of each kernel id (-1: no kernel of the view has it); ids are unique in a profile
        # and, as the engine numbers them, 0..n-1 (ids far sparser than that are not indexed)
        top = int(ids.max()) + 1 if n else 0
        self.pos_at = np.full(top if ids.min(initial=0) >= 0 and top <= 4 * n + 1024 else 0, -1, dtype=np.int64)
        if len(self.pos_at):
            self.pos_at[ids] = np.arange(n)
        self.duration = np.fromiter((k.duration_ns for k in kernels), dtype=np.int64, count=n)
        self.start = np.fromiter((k.start_ns for k in kernels), dtype=np.int64, count=n)
        self.end = np.fromiter((k.end_ns for k in kernels), dtype=np.int64, count=n)
        self.device = np.fromiter((k.device for k in kernels), dtype=np.int64, count=n)
        self.stream = np.fromiter((k.stream for k in kernels), dtype=np.int64, count=n)
        self.is_kernel = np.fromiter((k.kind == "kernel" for k in kernels), dtype=bool, count=n)
        self.in_graph = np.fromiter((k.graph_id is not None for k in kernels), dtype=bool, count=n)
        name_code: dict[str, int] = {}
        self.name = np.fromiter((name_code.setdefault(k.name, len(name_code)) for k in kernels),
                                dtype=np.int64, count=n)
        self.names = list(name_code)
        tiers, levels = list(Tier), list(Confidence)
        tier_code, level_code = {t: i for i, t in enumerate(tiers)}, {c: i for i, c in enumerate(levels)}
        self.tier = np.fromiter((tier_code[k.attribution.tier] for k in kernels), dtype=np.int64, count=n)
        self.tiers = [t.value for t in tiers]
        self.confidence = np.fromiter((level_code[k.attribution.confidence] for k in kernels), dtype=np.int64,
                                      count=n)
        self.confidences = [c.value for c in levels]
        weakness = np.array([_CONFIDENCE_ORDER.index(c) for c in levels], dtype=np.int64)
        self.weakness = weakness[self.confidence] if n else np.zeros(0, dtype=np.int64)

    @classmethod
    def of_table(cls, table: KernelTable) -> _KernelColumns:
        """The columns of the models ``table.models()`` builds (kernel j, id j, at position j), read off
        the table's own: names coded in the order each first appears, as :meth:`__init__` codes them."""
        self = cls.__new__(cls)
        n = len(table)
        self.pos_at = np.arange(n, dtype=np.int64)
        self.start = np.asarray(table.start_ns, dtype=np.int64)
        self.end = np.asarray(table.end_ns, dtype=np.int64)
        self.duration = self.end - self.start
        self.device = np.asarray(table.device, dtype=np.int64)
        self.stream = np.asarray(table.stream, dtype=np.int64)
        kinds = np.asarray(table.kind)
        kernel_kinds = [c for c in unique_ints(kinds)[0].tolist() if table.strings.values[c] == "kernel"]
        self.is_kernel = np.isin(kinds, kernel_kinds)
        self.in_graph = np.asarray(table.graph_id_known, dtype=bool)
        uniq, first, inverse = unique_ints(np.asarray(table.name), index=True, inverse=True)
        texts, text_code = table.strings.values, dict[str, int]()
        code = np.empty(len(uniq), dtype=np.int64)
        for u in np.argsort(first, kind="stable").tolist():  # a text two string codes share is one name
            code[u] = text_code.setdefault(texts[int(uniq[u])], len(text_code))
        self.name = code[inverse.reshape(-1)] if n else np.zeros(0, dtype=np.int64)
        self.names = list(text_code)
        tiers, levels = list(Tier), list(Confidence)
        tier = np.asarray(table.tier, dtype=np.int64)
        self.tier = np.array([tiers.index(t) for t in TIERS], dtype=np.int64)[tier]
        self.tiers = [t.value for t in tiers]
        self.confidence = np.array([levels.index(TIER_CONFIDENCE[t]) for t in TIERS], dtype=np.int64)[tier]
        self.confidences = [c.value for c in levels]
        weakness = np.array([_CONFIDENCE_ORDER.index(c) for c in levels], dtype=np.int64)
        self.weakness = weakness[self.confidence]
        return self


def _counts_first_seen(codes: np.ndarray) -> list[tuple[int, int]]:
    """(code, count) of each distinct code, in the order each first appears (as a Counter's keys)."""
    if not len(codes):
        return []
    uniq, first, counts = unique_ints(codes, index=True, counts=True)
    order = np.argsort(first, kind="stable")
    return list(zip(uniq[order].tolist(), counts[order].tolist(), strict=True))


def _heaviest(codes: np.ndarray, weights: np.ndarray, n: int) -> list[int]:
    """The ``n`` codes of the largest summed weight, ties in the order each first appears
    (``Counter.most_common(n)`` over the codes in order)."""
    if not len(codes):
        return []
    uniq, first, inverse = unique_ints(codes, index=True, inverse=True)
    sums = np.zeros(len(uniq), dtype=np.int64)
    np.add.at(sums, inverse, weights)
    order = np.lexsort((first, -sums))[:n]
    return uniq[order].tolist()
