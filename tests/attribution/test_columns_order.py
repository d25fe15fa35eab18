"""The sort-free and radix paths of the column helpers give what the plain sorts give."""

from __future__ import annotations

import numpy as np
import pytest

from profiler_core.attribution import columns
from profiler_core.attribution.columns import (
    first_index_of,
    group_first_seen,
    last_index_of,
    nth_and_order,
    nth_within,
    pair_lookup,
    stable_order,
)


def _sorted_group_first_seen(key_columns: list[np.ndarray], valid: np.ndarray) -> tuple[np.ndarray, int]:
    """group_first_seen as the definition reads: each valid tuple numbered at its first appearance."""
    seen: dict[tuple[int, ...], int] = {}
    gid = np.full(len(valid), -1, dtype=np.int64)
    for i in np.flatnonzero(valid).tolist():
        gid[i] = seen.setdefault(tuple(int(c[i]) for c in key_columns), len(seen))
    return gid, len(seen)


@pytest.mark.parametrize("seed", range(6))
def test_group_first_seen_hashed_numbers_tuples_in_first_seen_order(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 40_000  # above the size from which the tuples are packed and hashed
    assert n >= columns._HASHED_GROUPS
    spans = [int(rng.integers(2, 60_000)) for _ in range(int(rng.integers(1, 5)))]
    key_columns = [rng.integers(-1, span, n) for span in spans]
    valid = rng.random(n) > 0.2
    gid, count = group_first_seen(key_columns, valid)
    want_gid, want_count = _sorted_group_first_seen(key_columns, valid)
    assert count == want_count
    assert np.array_equal(gid, want_gid)


def test_group_first_seen_past_62_bits_sorts() -> None:
    rng = np.random.default_rng(7)
    n = 20_000
    wide = [rng.integers(0, 1 << 40, n), rng.integers(0, 1 << 40, n) // (1 << 39)]  # 41 + 1 bits: packs
    wider = [rng.integers(0, 1 << 40, n), rng.integers(0, 1 << 30, n)]  # 70 bits: does not
    valid = np.ones(n, dtype=bool)
    assert columns._packed(wide) is not None and columns._packed(wider) is None
    for key_columns in (wide, wider):
        gid, count = group_first_seen(key_columns, valid)
        want_gid, want_count = _sorted_group_first_seen(key_columns, valid)
        assert count == want_count and np.array_equal(gid, want_gid)


@pytest.mark.parametrize("span", [1, 200, 255, 256, 40_000, 65_535, 65_536, 1 << 40])
def test_stable_order_is_the_stable_argsort(span: int) -> None:
    rng = np.random.default_rng(span % 97)
    values = rng.integers(-1, span, 5000) + (1 << 50 if span > 1 << 20 else 0)
    assert np.array_equal(stable_order(values), np.argsort(values, kind="stable"))
    assert np.array_equal(stable_order(values.astype(np.uint64) if span < 1 << 20 and values.min() >= 0
                                       else values), np.argsort(values, kind="stable"))


def test_pair_lookup_with_the_order_nth_came_from() -> None:
    rng = np.random.default_rng(3)
    left = rng.integers(-1, 300, 8000)
    right = rng.integers(-1, 300, 6000)
    nth, (right_nth, right_order) = nth_within(left), nth_and_order(right)
    assert np.array_equal(right_nth, nth_within(right))
    given = pair_lookup(left, nth, right, right_nth, right_order)
    assert np.array_equal(given, pair_lookup(left, nth, right, right_nth))
    # the lookup itself, by a dict of (key, nth) pairs
    where = {(int(k), int(j)): i for i, (k, j) in enumerate(zip(right, right_nth, strict=True))}
    assert given.tolist() == [where.get((int(k), int(j)), -1) for k, j in zip(left, nth, strict=True)]


@pytest.mark.parametrize("span", [5, 300, 70_000, 1 << 40])  # the last two: past the counted range
def test_pair_lookup_counted_and_sorted_agree_with_a_dict(span: int) -> None:
    rng = np.random.default_rng(span % 101)
    right = rng.integers(-1, span, 6000)
    left = np.concatenate([rng.choice(right, 7000), rng.integers(-5, span + 5, 1000)])  # some absent
    nth, (right_nth, right_order) = nth_within(left), nth_and_order(right)
    where = {(int(k), int(j)): i for i, (k, j) in enumerate(zip(right, right_nth, strict=True))}
    want = [where.get((int(k), int(j)), -1) for k, j in zip(left, nth, strict=True)]
    assert pair_lookup(left, nth, right, right_nth, right_order).tolist() == want
    assert pair_lookup(left, np.zeros_like(nth), right, right_nth, right_order).tolist() == \
        [where.get((int(k), 0), -1) for k in left]


@pytest.mark.parametrize("span", [5, 300, 70_000, 1 << 40])
def test_first_and_last_index_of_agree_with_a_dict(span: int) -> None:
    rng = np.random.default_rng(span % 89)
    keys = rng.integers(-1, span, 5000)
    query = np.concatenate([rng.choice(keys, 3000), rng.integers(-5, span + 5, 500)])
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for i, k in enumerate(keys.tolist()):
        first.setdefault(k, i)
        last[k] = i
    assert first_index_of(keys, query).tolist() == [first.get(q, -1) for q in query.tolist()]
    assert last_index_of(keys, query).tolist() == [last.get(q, -1) for q in query.tolist()]


@pytest.mark.parametrize("hashing", ["hash", "colliding hash"])
def test_row_codes_of_many_rows_number_them_as_first_seen(hashing: str) -> None:
    # above the size from which the row hashes are numbered by Arrow's hash table
    rng = np.random.default_rng(11)
    n = 3 * columns._HASHED_GROUPS
    floats = rng.choice(np.array([0.0, -0.0, 1.5, np.nan, -np.inf]), size=(n, 2))
    ints = rng.integers(0, 40, n)
    texts = [repr((*(None if v != v else v for v in r), k))
             for r, k in zip(floats.tolist(), ints.tolist(), strict=True)]
    seen: dict[str, int] = {}
    want = [seen.setdefault(t, len(seen)) for t in texts]
    with pytest.MonkeyPatch.context() as mp:
        if hashing != "hash":  # every row one hash: the rows themselves are sorted
            mp.setattr(columns, "row_hash", lambda bits: np.zeros(bits.shape[1], dtype=np.uint64))
        codes, first = columns.row_codes(floats, ints)
    assert codes.tolist() == want
    assert first.tolist() == [want.index(c) for c in range(len(seen))]
