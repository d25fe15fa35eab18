"""``sorted_unique`` is ``np.unique`` for 1-D arrays, whatever their values."""

from __future__ import annotations

import numpy as np
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
