"""The kernel table's string columns are written with the distinct codes and each row's rank among
them that ``np.unique(codes, return_inverse=True)`` gives, found by a table over the codes' range."""

from __future__ import annotations

import numpy as np
import pytest

from profiler_core.columnar_profile import _unique_codes


@pytest.mark.parametrize("codes", [
    np.random.default_rng(1).integers(-3, 50, 1000),  # a negative code indexes from the end, as before
    np.random.default_rng(2).integers(0, 800_000, 200_000),  # sparse over a wide range
    np.array([5]), np.array([-1, -1, 2]), np.zeros(0, dtype=np.int64),
], ids=["small", "wide", "one", "negative", "empty"])
def test_codes_and_ranks_equal_numpy_unique(codes: np.ndarray) -> None:
    want_uniq, want_inverse = np.unique(codes, return_inverse=True)
    uniq, inverse = _unique_codes(codes)
    assert uniq.tolist() == want_uniq.tolist() and uniq.dtype == want_uniq.dtype
    assert inverse.ravel().tolist() == want_inverse.ravel().tolist()
