"""``unique_ints`` is ``np.unique`` of integer codes (distinct values, first index, inverse, counts),
counted over the codes' range where it is small and sorted where it is not."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from profiler_core.attribution.columns import unique_ints

CASES = {
    "small": np.random.default_rng(1).integers(-3, 50, 1000),  # negative codes too
    "dense": np.random.default_rng(2).integers(0, 5_000, 200_000),
    "wide": np.random.default_rng(3).integers(0, 1 << 40, 2_000),  # past the range table: sorted
    "int32": np.random.default_rng(4).integers(0, 90, 500).astype(np.int32),
    "one": np.array([5]),
    "negative": np.array([-1, -1, 2]),
    "empty": np.zeros(0, dtype=np.int64),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("flags", list(itertools.product([False, True], repeat=3)),
                         ids=lambda f: "".join("ixc"[i] if on else "-" for i, on in enumerate(f)))
def test_equals_numpy_unique(name: str, flags: tuple[bool, bool, bool]) -> None:
    codes = CASES[name]
    index, inverse, counts = flags
    want = np.unique(codes, return_index=index, return_inverse=inverse, return_counts=counts)
    want = want if isinstance(want, tuple) else (want,)
    got = unique_ints(codes, index=index, inverse=inverse, counts=counts)
    assert len(got) == len(want)
    assert got[0].dtype == want[0].dtype
    for g, w in zip(got, want, strict=True):
        assert np.asarray(g).ravel().tolist() == np.asarray(w).ravel().tolist()


def test_first_index_is_the_first_occurrence() -> None:
    codes = np.array([7, 3, 7, 3, 9, 3])
    uniq, first = unique_ints(codes, index=True)
    assert uniq.tolist() == [3, 7, 9] and first.tolist() == [1, 0, 4]
