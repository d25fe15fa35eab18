"""Per-operator counter aggregation, one rule per counter (see metrics/catalog.py).

A 2 us kernel at 90% occupancy and a 200 us kernel at 10% must not average to 50%: rates
are weighted by timeline duration, additive counts are summed, per-launch constants take
the maximum, latency ratios are weighted by executed instructions and IPC by active cycles.

    kernels: (d=200ns, occ=10), (d=2ns, occ=90)  ->  occ = (200*10 + 2*90) / 202 = 10.8

A counter missing on some kernels: sums and maxima become null (a partial sum is a wrong
number); weighted means are taken over the kernels that have it, and the reason says so.
Weights never mix kinds: a group whose weighting counter is missing on a kernel falls back
to duration weights for that group.

The work is vectorised over all operators at once (numpy ``bincount`` per counter), so a
million kernels aggregate in seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

import numpy as np

from profiler_core.metrics.catalog import CATALOG, FLOP_CATALOG, Aggregation, CounterSpec
from profiler_core.schema import Kernel

FIELDS: tuple[str, ...] = tuple(spec.field for spec in CATALOG)


def counter_matrix(kernels: Sequence[Kernel], specs: Sequence[CounterSpec] = CATALOG) -> np.ndarray:
    """Kernels x counters (``specs`` order, the catalog's by default), NaN where a counter is missing."""
    fields = [spec.field for spec in specs]
    out = np.full((len(kernels), len(fields)), np.nan)
    for i, k in enumerate(kernels):
        if k.counters:
            out[i] = [np.nan if (v := k.counters.get(f)) is None else v for f in fields]
    return out


def aggregate_groups(
    matrix: np.ndarray, durations_ns: np.ndarray, groups: Sequence[Sequence[int]],
    specs: Sequence[CounterSpec] = CATALOG,
) -> list[tuple[dict[str, float | None], dict[str, str]]]:
    """Aggregate ``matrix`` rows per group of kernel indices; (metrics, reasons) per group.

    ``specs`` names the matrix columns in order; it starts with the catalog's 20 (the weights).
    """
    n_groups = len(groups)
    if n_groups == 0:
        return []
    idx = np.fromiter((i for g in groups for i in g), dtype=np.int64)
    grp = np.repeat(np.arange(n_groups), [len(g) for g in groups])
    agg = aggregate_arrays(matrix, durations_ns, idx, grp, n_groups, specs)
    return [agg.group(g, specs) for g in range(n_groups)]


class Aggregated:
    """Per-operator aggregates as arrays: values (NaN: null), and which counters are missing or partial."""

    _BLOCK = 4096  # groups converted to Python floats at a time (all at once would double the memory)

    def __init__(self, values: np.ndarray, missing: np.ndarray, partial: np.ndarray, sizes: np.ndarray) -> None:
        self.values, self.missing, self.partial, self.sizes = values, missing, partial, sizes
        self._block: tuple[int, list[list[float | None]]] = (-1, [])
        self._flagged: np.ndarray | None = None

    def _row(self, g: int) -> list[float | None]:
        lo, rows = self._block
        if not lo <= g < lo + len(rows):
            lo = g - g % self._BLOCK
            block = self.values[lo:lo + self._BLOCK]
            rows = [[None if v != v else v for v in r] for r in block.tolist()]  # NaN -> None
            self._block = (lo, rows)
        return rows[g - lo]

    def row(self, g: int) -> list[float | None]:
        """One group's values in the specs' order, None where null."""
        return self._row(g)

    def group(self, g: int, specs: Sequence[CounterSpec]) -> tuple[dict[str, float | None], dict[str, str]]:
        """One group's (metrics, reasons for nulls or partial values), as profile.json holds them."""
        metrics: dict[str, float | None] = dict(zip([s.field for s in specs], self._row(g), strict=True))
        reasons: dict[str, str] = {}
        if self.flagged[g]:
            n = int(self.sizes[g])
            for spec, miss, part in zip(specs, self.missing[g].tolist(), self.partial[g].tolist(), strict=True):
                f = spec.field
                if miss:
                    reasons[f] = "no kernel of this operator has this counter"
                elif part:
                    reasons[f] = (f"only some of the {n} kernels have this counter; a partial {spec.aggregation} "
                                  "would mislead" if metrics[f] is None
                                  else f"weighted over the kernels of {n} that have this counter")
        return metrics, reasons

    @property
    def flagged(self) -> np.ndarray:
        """Groups with a missing or partial counter (they carry reasons)."""
        if self._flagged is None or len(self._flagged) != len(self.values):
            self._flagged = np.asarray(self.missing.any(axis=1) | self.partial.any(axis=1))
        return self._flagged

    def invalidate(self) -> None:
        """Forget cached rows after values were replaced."""
        self._block = (-1, [])
        self._flagged = None


def aggregate_arrays(matrix: np.ndarray, durations_ns: np.ndarray, idx: np.ndarray, grp: np.ndarray,
                     n_groups: int, specs: Sequence[CounterSpec] = CATALOG,
                     matrix_rows: np.ndarray | None = None, only: Collection[str] | None = None) -> Aggregated:
    """Aggregate kernels ``idx`` by group ids ``grp`` (kernels of a group in launch order).

    Their counters are ``matrix[idx]``, or ``matrix[matrix_rows]`` when kernels share counter rows.
    ``only``: the counters a caller reads; the others are not worked out (NaN, and marked missing).
    """
    aggregation = CounterAggregation(matrix, durations_ns, idx, grp, n_groups, specs, matrix_rows)
    # groups x counters, each counter's column written as one contiguous run (the transpose of a row
    # per counter; a column of row-major rows strides across every group)
    values = np.empty((len(specs), n_groups)).T
    partial = np.empty((len(specs), n_groups), dtype=bool).T
    missing = np.empty((len(specs), n_groups), dtype=bool).T
    for c, spec in enumerate(specs):
        if only is not None and spec.field not in only:  # not read by the caller
            values[:, c], partial[:, c], missing[:, c] = np.nan, False, True
            continue
        values[:, c], partial[:, c], missing[:, c] = aggregation.counter(c)
    return Aggregated(values, missing, partial, aggregation.sizes)


class CounterAggregation:
    """One aggregation (as :func:`aggregate_arrays` takes it), a counter at a time: :meth:`counter`
    works out one counter's column for every group, the same bits the whole aggregation gives it,
    so a caller reading a few counters of every operator works out those alone."""

    def __init__(self, matrix: np.ndarray, durations_ns: np.ndarray, idx: np.ndarray, grp: np.ndarray,
                 n_groups: int, specs: Sequence[CounterSpec] = CATALOG,
                 matrix_rows: np.ndarray | None = None) -> None:
        self.specs = specs
        self._taken = matrix, durations_ns, idx, matrix_rows
        self.col_of = {spec.field: i for i, spec in enumerate(specs)}
        self.grp, self.n_groups = grp, n_groups
        self.sizes = np.bincount(grp, minlength=n_groups)
        # the rows taken, counter by counter: each counter's values are read as one contiguous run (a
        # column of the row-major rows strides across every row), the same values in the same order. A
        # matrix laid out so already (the transpose of a row per counter) gives each counter's values
        # when it is read, one column at a time, without the rows-by-counters copy.
        taken = idx if matrix_rows is None else matrix_rows
        by_counter = matrix.T
        column: Callable[[int], np.ndarray]
        if by_counter.flags.c_contiguous:
            def column(c: int) -> np.ndarray:
                return by_counter[c].take(taken)
        else:
            column = np.ascontiguousarray(matrix[taken].T).__getitem__
        self.column = column
        dur = np.maximum(durations_ns[idx].astype(float), 0.0)
        self._weights = _Weights(column, self.col_of, dur, grp, n_groups)

    def group(self, g: int) -> Aggregated:
        """Group ``g`` aggregated alone, as the only group of its own aggregation: each counter's sums
        run over the same kernels in the same order, so its row has the bits the whole gives it."""
        matrix, durations_ns, idx, matrix_rows = self._taken
        sel = np.flatnonzero(self.grp == g)
        return aggregate_arrays(matrix, durations_ns, idx[sel], np.zeros(len(sel), dtype=np.int64), 1, self.specs,
                                None if matrix_rows is None else matrix_rows[sel])

    def counter(self, c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Counter ``c`` (of the specs) of every group: (values, NaN where null; partial; missing)."""
        spec, grp, n_groups, sizes = self.specs[c], self.grp, self.n_groups, self.sizes
        col = self.column(self.col_of[spec.field])
        nan = np.isnan(col)
        # a counter measured on every kernel taken (the common case) skips the masking: the same
        # values are summed in the same order either way
        have: np.ndarray | None = ~nan if nan.any() else None
        if have is None:
            count, filled = sizes, col
        else:
            count = np.bincount(grp, weights=have, minlength=n_groups)
            filled = np.where(have, col, 0.0)
        if spec.aggregation is Aggregation.SUM:
            # float: bincount of no kernels at all returns int64, which cannot hold NaN
            res = np.bincount(grp, weights=filled, minlength=n_groups).astype(float)
            res[count < sizes] = np.nan
        elif spec.aggregation is Aggregation.MAX:
            res = np.full(n_groups, -np.inf)
            np.maximum.at(res, grp, col if have is None else np.where(have, col, -np.inf))
            res[count < sizes] = np.nan
        else:
            res = self._weights.mean(spec.aggregation, have, filled)
        return res, (count > 0) & (count < sizes), count == 0


class _Weights:
    """The weights of the weighted means of one aggregation, each kind's worked out once: a counter
    measured on every kernel shares its kind's sums of weights."""

    def __init__(self, column: Callable[[int], np.ndarray], col_of: dict[str, int], dur: np.ndarray,
                 grp: np.ndarray, n_groups: int) -> None:
        """``column(c)``: the values of counter column ``c`` of the kernels taken."""
        self.column, self.col_of, self.dur, self.grp, self.n = column, col_of, dur, grp, n_groups
        self._kinds: dict[Aggregation, tuple[np.ndarray, np.ndarray]] = {}
        self._dense: dict[Aggregation, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._floor: np.ndarray | None = None

    def _kind(self, rule: Aggregation) -> tuple[np.ndarray, np.ndarray]:
        """The weights (NaN as 0) and where they are NaN."""
        hit = self._kinds.get(rule)
        if hit is None:
            if rule is Aggregation.INSTRUCTION_WEIGHTED:
                w = self.column(self.col_of["executed_instructions"])
            elif rule is Aggregation.ACTIVE_CYCLE_WEIGHTED:
                w = self.column(self.col_of["sm_active_cycles"])
            else:
                w = self.dur
            nan = np.isnan(w)
            hit = self._kinds[rule] = (np.where(nan, 0.0, w), nan)
        return hit

    def _duration_floor(self) -> np.ndarray:
        if self._floor is None:
            self._floor = np.maximum(self.dur, 1.0)
        return self._floor

    def mean(self, rule: Aggregation, have: np.ndarray | None, filled: np.ndarray) -> np.ndarray:
        """Each group's weighted mean of ``filled`` over the kernels that ``have`` it (None: all)."""
        grp, n = self.grp, self.n
        w, w_nan = self._kind(rule)
        if have is None:  # every kernel has the counter: the weights' sums are the kind's own
            dense = self._dense.get(rule)
            if dense is None:
                den = np.bincount(grp, weights=w, minlength=n)
                fallback = (np.bincount(grp, weights=w_nan, minlength=n) > 0) | (den <= 0)
                dden = np.bincount(grp, weights=self._duration_floor(), minlength=n) if fallback.any() else den
                dense = self._dense[rule] = (den, fallback, dden)
            den, fallback, dden = dense
            num = np.bincount(grp, weights=w * filled, minlength=n)
            if fallback.any():  # never mix weight kinds: duration weights for the whole group
                dnum = np.bincount(grp, weights=self._duration_floor() * filled, minlength=n)
                num = np.where(fallback, dnum, num)
                den = np.where(fallback, dden, den)
        else:
            w_missing = have & w_nan
            num = np.bincount(grp, weights=np.where(have, w * filled, 0.0), minlength=n)
            den = np.bincount(grp, weights=np.where(have, w, 0.0), minlength=n)
            fallback = (np.bincount(grp, weights=w_missing, minlength=n) > 0) | (den <= 0)
            if fallback.any():  # never mix weight kinds: duration weights for the whole group
                floor = self._duration_floor()
                dnum = np.bincount(grp, weights=np.where(have, floor * filled, 0.0), minlength=n)
                dden = np.bincount(grp, weights=np.where(have, floor, 0.0), minlength=n)
                num = np.where(fallback, dnum, num)
                den = np.where(fallback, dden, den)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den > 0, num / den, np.nan)


def specs_with_flops(fields_present: Iterable[str]) -> tuple[CounterSpec, ...]:
    """The 20, plus the FLOP counters among ``fields_present`` (profiles from captures without them
    keep exactly the 20)."""
    present = frozenset(fields_present)
    return CATALOG + tuple(spec for spec in FLOP_CATALOG if spec.field in present)


def aggregate_counters(kernels: Sequence[Kernel], specs: Sequence[CounterSpec] | None = None,
                       ) -> tuple[dict[str, float | None], dict[str, str]]:
    """Aggregate one operator's kernels; returns (metrics, reasons for nulls or partial values)."""
    if specs is None:
        specs = specs_with_flops(f for k in kernels for f in k.counters)
    fields = [spec.field for spec in specs]
    if not kernels:
        return dict.fromkeys(fields), dict.fromkeys(fields, "operator has no kernels")  # type: ignore[arg-type]
    matrix = counter_matrix(kernels, specs)
    durations = np.array([k.duration_ns for k in kernels], dtype=float)
    return aggregate_groups(matrix, durations, [list(range(len(kernels)))], specs)[0]


def aggregate_samples(samples: Iterable[tuple[Mapping[str, float | None], int]],
                      fields: Collection[str] | None = None) -> dict[str, float | None]:
    """The catalog's counters over (counters, duration_ns) samples, by the same rules as an operator's.

    For views over a profile (a class of operators, a module): the fields any sample names,
    limited to ``fields`` when given; a field no sample names is left out.

        aggregate_samples([({"achieved_occupancy_pct": 90.0}, 2_000), ({"achieved_occupancy_pct": 10.0}, 200_000)])
        -> {"achieved_occupancy_pct": 10.79...}
    """
    rows = list(samples)
    named = {f for counters, _ in rows for f in counters}
    wanted = [f for f in FIELDS if f in named and (fields is None or f in fields)]
    if not wanted:
        return {}
    col = {f: i for i, f in enumerate(FIELDS)}
    matrix = np.full((len(rows), len(FIELDS)), np.nan)
    for i, (counters, _) in enumerate(rows):
        for f, v in counters.items():
            if v is not None and f in col:
                matrix[i, col[f]] = v
    durations = np.array([d for _, d in rows], dtype=float)
    metrics, _ = aggregate_groups(matrix, durations, [list(range(len(rows)))])[0]
    return {f: metrics[f] for f in wanted}
