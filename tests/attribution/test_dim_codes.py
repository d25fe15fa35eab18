"""A kernel table's launch dimensions read back from Parquet are coded as coding them one row at a
time codes them: the same codes, the same first-seen order of the distinct values."""

from __future__ import annotations

import numpy as np
import pytest

from profiler_core.attribution.columns import Interner
from profiler_core.columnar_profile import _dim_codes


def _row_by_row(parts: list[np.ndarray]) -> tuple[list[list[int]], list]:
    dims = Interner()
    return [[dims.code(tuple(v)) for v in part.tolist()] for part in parts], dims.values


@pytest.mark.parametrize("high", [4, 1 << 20, 1 << 40])  # the last is past the packed key: row by row
def test_packed_coding_equals_row_by_row(high: int) -> None:
    rng = np.random.default_rng(high % 97)
    grid = rng.integers(1, high, (5000, 3)) % np.array([high, min(high, 1 << 16), min(high, 1 << 16)])
    grid[:, 1:] = np.minimum(grid[:, 1:], 65535) if high < (1 << 40) else grid[:, 1:]
    parts = [grid, rng.integers(1, 5, (3000, 3))]
    dims = Interner()
    got = _dim_codes(dims, parts)
    want, values = _row_by_row(parts)
    assert [g.tolist() for g in got] == want
    assert dims.values == values
    assert all(isinstance(x, int) for v in dims.values for x in v)


def test_no_rows_and_empty_parts() -> None:
    dims = Interner()
    assert [p.tolist() for p in _dim_codes(dims, [np.zeros((0, 3), dtype=np.int64)] * 2)] == [[], []]
    assert _dim_codes(dims, []) == [] and dims.values == []
