"""``sorted_unique`` is ``np.unique`` for 1-D arrays, whatever their values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from profiler_core.attribution.columns import sorted_unique


@given(st.lists(st.integers(min_value=-(2**62), max_value=2**62), max_size=200))
def test_sorted_unique_is_np_unique(values: list[int]) -> None:
    a = np.array(values, dtype=np.int64)
    got, want = sorted_unique(a), np.unique(a)
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_sorted_unique_of_nothing_and_of_repeats() -> None:
    assert sorted_unique(np.array([], dtype=np.int64)).size == 0
    assert sorted_unique(np.array([3, 1, 3, 3, 1])).tolist() == [1, 3]


_NAN_PAYLOAD = np.frombuffer(np.uint64(0x7FF8_0000_0000_0001).tobytes(), dtype=np.float64)[0]


@given(st.lists(st.tuples(st.sampled_from([0.0, -0.0, 1.5, np.nan, _NAN_PAYLOAD, -np.inf]),
                          st.sampled_from([0.0, 2.0, np.nan]), st.integers(-2, 2**40)), max_size=60),
       st.sampled_from(["hash", "colliding hash", "few buckets"]))
def test_row_codes_number_rows_as_they_are_written_out(rows: list[tuple[float, float, int]], hashing: str) -> None:
    # rows are one where their text is one: any NaN is None, 0.0 and -0.0 print apart; rows are
    # grouped by a hash, checked bit for bit: a hash that collides (every row alike, or rows spread
    # over three buckets) must give the same numbers through the sort of whole rows
    import profiler_core.attribution.columns as columns
    from profiler_core.attribution.columns import row_codes

    if hashing != "hash":
        real = columns.row_hash
        fake = (lambda bits: np.zeros(bits.shape[1], dtype=np.uint64)) if hashing == "colliding hash" else \
            (lambda bits: real(bits) % np.uint64(3))
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(columns, "row_hash", fake)
            _check_row_codes(rows, row_codes)
        return
    _check_row_codes(rows, row_codes)


def _check_row_codes(rows: list[tuple[float, float, int]], row_codes: Any) -> None:
    floats = np.array([r[:2] for r in rows], dtype=np.float64).reshape(len(rows), 2)
    ints = np.array([r[2] for r in rows], dtype=np.int64)
    codes, first = row_codes(floats, ints)
    texts = [repr(tuple(None if v != v else v for v in r)) for r in rows]
    seen: dict[str, int] = {}
    want = [seen.setdefault(t, len(seen)) for t in texts]  # numbered as first seen
    assert codes.tolist() == want
    assert first.tolist() == [texts.index(t) for t in seen]


def test_row_codes_of_no_rows_and_of_no_columns() -> None:
    from profiler_core.attribution.columns import row_codes

    codes, first = row_codes(np.zeros((0, 3)))
    assert codes.size == 0 and first.size == 0
    codes, first = row_codes(np.zeros((4, 0)))
    assert codes.tolist() == [0, 0, 0, 0] and first.tolist() == [0]
    codes, first = row_codes(np.zeros((3, 0)), np.array([5, 7, 5]))
    assert codes.tolist() == [0, 1, 0] and first.tolist() == [0, 1]
