"""``aggregate_arrays`` against a plain per-counter oracle: every figure the same bits.

The function skips the masking for a counter measured on every kernel taken and works each weight
kind's sums out once; the oracle masks every counter and works every weight out again. Counters
here are measured everywhere, nowhere or in part, weights are missing or zero in part, groups are
empty or one kernel long, so both paths and the duration fallback are taken.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler_core.attribution.aggregate import CounterAggregation, aggregate_arrays
from profiler_core.metrics.catalog import CATALOG, Aggregation, CounterSpec


def oracle(matrix: np.ndarray, durations_ns: np.ndarray, idx: np.ndarray, grp: np.ndarray, n_groups: int,
           specs: tuple[CounterSpec, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    col_of = {spec.field: i for i, spec in enumerate(specs)}
    sizes = np.bincount(grp, minlength=n_groups)
    m = matrix[idx]
    dur = np.maximum(durations_ns[idx].astype(float), 0.0)
    values = np.empty((n_groups, len(specs)))
    partial = np.empty((n_groups, len(specs)), dtype=bool)
    missing = np.empty((n_groups, len(specs)), dtype=bool)
    for c, spec in enumerate(specs):
        col = m[:, col_of[spec.field]]
        have = ~np.isnan(col)
        count = np.bincount(grp, weights=have, minlength=n_groups)
        filled = np.where(have, col, 0.0)
        if spec.aggregation is Aggregation.SUM:
            res = np.bincount(grp, weights=filled, minlength=n_groups).astype(float)
            res[count < sizes] = np.nan
        elif spec.aggregation is Aggregation.MAX:
            res = np.full(n_groups, -np.inf)
            np.maximum.at(res, grp, np.where(have, col, -np.inf))
            res[count < sizes] = np.nan
        else:
            if spec.aggregation is Aggregation.INSTRUCTION_WEIGHTED:
                w = m[:, col_of["executed_instructions"]]
            elif spec.aggregation is Aggregation.ACTIVE_CYCLE_WEIGHTED:
                w = m[:, col_of["sm_active_cycles"]]
            else:
                w = dur
            w_missing = have & np.isnan(w)
            w = np.where(np.isnan(w), 0.0, w)
            num = np.bincount(grp, weights=np.where(have, w * filled, 0.0), minlength=n_groups)
            den = np.bincount(grp, weights=np.where(have, w, 0.0), minlength=n_groups)
            fallback = (np.bincount(grp, weights=w_missing, minlength=n_groups) > 0) | (den <= 0)
            dnum = np.bincount(grp, weights=np.where(have, np.maximum(dur, 1.0) * filled, 0.0), minlength=n_groups)
            dden = np.bincount(grp, weights=np.where(have, np.maximum(dur, 1.0), 0.0), minlength=n_groups)
            num = np.where(fallback, dnum, num)
            den = np.where(fallback, dden, den)
            with np.errstate(invalid="ignore", divide="ignore"):
                res = np.where(den > 0, num / den, np.nan)
        values[:, c] = res
        partial[:, c] = (count > 0) & (count < sizes)
        missing[:, c] = count == 0
    return values, missing, partial, sizes


_SPECS = tuple(CATALOG)


@st.composite
def _case(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    rows = draw(st.integers(1, 12))
    n_groups = draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    matrix = rng.choice([0.0, -0.0, 1.0, 3.5, 1e6, 0.25], size=(rows, len(_SPECS))) * rng.random((rows, 1))
    for c in range(len(_SPECS)):  # each counter measured everywhere, nowhere, or in part
        how = draw(st.sampled_from(["all", "none", "some"]))
        if how == "none":
            matrix[:, c] = np.nan
        elif how == "some":
            matrix[rng.random(rows) < 0.4, c] = np.nan
    durations = rng.choice([0, 1, 5, 1000, -3], size=rows).astype(np.int64)
    taken = draw(st.integers(0, 3 * rows))
    idx = rng.integers(0, rows, size=taken)
    grp = np.sort(rng.integers(0, n_groups, size=taken))  # kernels of a group together; a group may be empty
    return matrix, durations, idx, grp, n_groups


@settings(max_examples=400, deadline=None)
@given(_case())
def test_aggregate_arrays_gives_the_oracles_bits(case: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int],
                                                 ) -> None:
    matrix, durations, idx, grp, n_groups = case
    got = aggregate_arrays(matrix, durations, idx, grp, n_groups, _SPECS)
    values, missing, partial, sizes = oracle(matrix, durations, idx, grp, n_groups, _SPECS)
    assert got.values.tobytes() == values.tobytes()  # NaN where NaN, -0.0 where -0.0
    assert (got.missing == missing).all() and (got.partial == partial).all() and (got.sizes == sizes).all()
    # a matrix laid out counter by counter (as a view's counter rows are) is read without the transpose
    by_counter = aggregate_arrays(np.asfortranarray(matrix), durations, idx, grp, n_groups, _SPECS)
    assert by_counter.values.tobytes() == values.tobytes()
    assert (by_counter.missing == missing).all() and (by_counter.partial == partial).all()
    # only some counters worked out (the weights' counters among those left out): theirs to the bit
    only = [spec.field for c, spec in enumerate(_SPECS) if (c * 7 + len(idx)) % 3 == 0]
    some = aggregate_arrays(np.asfortranarray(matrix), durations, idx, grp, n_groups, _SPECS, only=only)
    kept = np.array([spec.field in only for spec in _SPECS])
    assert some.values[:, kept].tobytes() == values[:, kept].tobytes()
    assert (some.missing[:, kept] == missing[:, kept]).all() and (some.partial[:, kept] == partial[:, kept]).all()
    assert np.isnan(some.values[:, ~kept]).all() and some.missing[:, ~kept].all()
    # one counter at a time, in an order of the case's own (weights' counters before or after the
    # counters weighted by them): each column the oracle's bits
    one = CounterAggregation(np.asfortranarray(matrix), durations, idx, grp, n_groups, _SPECS)
    order = np.random.default_rng(len(idx) + n_groups).permutation(len(_SPECS))
    for c in order.tolist():
        got_values, got_partial, got_missing = one.counter(c)
        assert got_values.tobytes() == values[:, c].tobytes()
        assert (got_partial == partial[:, c]).all() and (got_missing == missing[:, c]).all()
    for g in range(n_groups):  # a group alone: its row's bits
        alone = one.group(g)
        assert alone.values.tobytes() == values[g:g + 1].tobytes()
        assert (alone.missing == missing[g]).all() and (alone.partial == partial[g]).all()


def test_rows_shared_through_matrix_rows_aggregate_as_the_rows_taken_out() -> None:
    rng = np.random.default_rng(7)
    matrix = rng.random((5, len(_SPECS)))
    matrix[1, 3] = np.nan
    durations = np.array([10, 20, 30, 40, 50, 60], dtype=np.int64)
    idx = np.array([0, 2, 3, 5])
    rows = np.array([4, 1, 1, 0])
    grp = np.array([0, 0, 1, 1])
    got = aggregate_arrays(matrix, durations, idx, grp, 2, _SPECS, matrix_rows=rows)
    want = oracle(matrix[rows], durations[idx], np.arange(4), grp, 2, _SPECS)
    assert got.values.tobytes() == want[0].tobytes() and (got.partial == want[2]).all()
