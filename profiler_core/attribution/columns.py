"""Columns of the attribution engine: records to numpy arrays, strings dictionary-encoded.

A million kernels are a million Python objects; the joins run on arrays instead. Strings
(kernel names, operator names, NVTX texts, details) become integer codes into one list of
unique values, so what depends only on a name (its join key, its library, how an Inductor
kernel resolves) is computed once per unique name and broadcast with ``np.take``:

    names ["mm", "add", "mm"]  ->  codes [0, 1, 0], values ["mm", "add"]

Records a reader handed on beneath their Arrow columns (``record_columns.TableRecords``: nsys,
ncu) are read off the columns (``column``, ``encode_attr``, ``dim_codes``), with the codes and
the first-seen order a pass over the records gives; a list of records is read one by one.

Sentinels: ``-1`` stands for None in integer columns whose values are never negative
(ids, counts, codes); columns that may hold any integer carry a separate mask.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from operator import attrgetter
from typing import Any, TypeVar, overload

import numpy as np

from profiler_core.record_columns import TableRecords

NONE = -1


T = TypeVar("T")


class Positional(Sequence[T]):
    """A read-only sequence whose item at position ``j`` (0 <= j < len) is ``_at(j)``: a negative
    position counts from the end and a slice is a list, as a list's."""

    def _at(self, j: int) -> T:
        raise NotImplementedError

    @overload
    def __getitem__(self, j: int) -> T: ...
    @overload
    def __getitem__(self, j: slice) -> list[T]: ...
    def __getitem__(self, j: int | slice) -> T | list[T]:
        if isinstance(j, slice):
            return [self._at(i) for i in range(*j.indices(len(self)))]
        n = len(self)
        if not -n <= j < n:
            raise IndexError(j)
        return self._at(j % n)


class Interner:
    """Dictionary encoding: each distinct value gets the next code, in first-seen order."""

    __slots__ = ("codes", "values")

    def __init__(self) -> None:
        self.codes: dict[Hashable, int] = {}
        self.values: list[Any] = []

    def code(self, value: Hashable) -> int:
        hit = self.codes.get(value)
        if hit is None:
            hit = self.codes[value] = len(self.values)
            self.values.append(value)
        return hit

    def encode(self, values: Iterable[Hashable]) -> np.ndarray:
        """Codes of ``values`` (int64 array)."""
        codes, add = self.codes, self.code
        return np.fromiter((codes[v] if v in codes else add(v) for v in values), dtype=np.int64)

    def __len__(self) -> int:
        return len(self.values)


class ArrowStrings(Sequence[str]):
    """Distinct strings kept as the Arrow array they were read as; a Python list only once an item
    or the whole list is asked for (a 1M-kernel profile's 773k operator keys: 0.5 s and 60 MB that
    reading and checking the profile, or summarising it, never need)."""

    __slots__ = ("_values", "arrow")

    def __init__(self, arrow: Any) -> None:
        self.arrow = arrow
        self._values: list[str] | None = None

    @property
    def values(self) -> list[str]:
        if self._values is None:
            self._values = self.arrow.to_pylist()
        return self._values

    def __len__(self) -> int:
        return len(self.arrow)

    def __getitem__(self, i: Any) -> Any:
        if self._values is None and isinstance(i, (int, np.integer)):
            return self.arrow[int(i)].as_py()  # one string: the list is not made for it
        return self.values[i]

    def __iter__(self) -> Any:
        return iter(self.values)

    def at(self, codes: list[int]) -> list[str]:
        """The strings at positions ``codes``, without making the whole list where it is not made yet."""
        if self._values is not None:
            return [self._values[c] for c in codes]
        import pyarrow as pa

        return self.arrow.take(pa.array(codes, type=pa.int64())).to_pylist()  # type: ignore[no-any-return]


def string_list(strings: Sequence[str]) -> Sequence[str]:
    """``strings`` as a list to index many times over (an :class:`ArrowStrings` turned into one)."""
    return strings.values if isinstance(strings, ArrowStrings) else strings


def full_codes(n: int, value: int) -> np.ndarray:
    """``np.full(n, value)`` as int64, by ``np.zeros`` where ``value`` is 0: its pages are mapped
    when first written, so a column that stays mostly at its default (a tier's claims, a code for
    None) does not write 8 MB per million rows up front."""
    return np.zeros(n, dtype=np.int64) if value == 0 else np.full(n, value, dtype=np.int64)


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """``np.unique(a)`` for a 1-D array, by sort and mask: NumPy 2.4's plain ``np.unique`` takes a
    hashing path that is ~40x slower on a million int64 values (0.6 s against 0.015 s)."""
    flat = np.sort(np.asarray(a).ravel())
    if flat.size == 0:
        return flat
    keep = np.empty(flat.size, dtype=bool)
    keep[0] = True
    np.not_equal(flat[1:], flat[:-1], out=keep[1:])
    return flat[keep]


_DENSE_SPAN = 1 << 16  # a code range up to this (or up to 4 codes per value) is counted, not sorted


def unique_ints(codes: np.ndarray, *, index: bool = False, inverse: bool = False,
                counts: bool = False) -> tuple[np.ndarray, ...]:
    """``np.unique(codes, return_index=index, return_inverse=inverse, return_counts=counts)`` of a
    1-D integer array, always as a tuple: where the values span a small range (codes into a
    dictionary, group numbers) by a table over the range instead of a sort (1M codes: ~0.1 s for
    ``np.unique`` with an index or inverse, ~0.01 s counted). The first index is the first
    occurrence and the inverse indexes the sorted distinct values, as ``np.unique`` gives them."""
    a = np.asarray(codes).ravel()
    dense = _dense_span(a)
    if dense is None:
        out: Any = np.unique(a, return_index=index, return_inverse=inverse, return_counts=counts)  # type: ignore[call-overload]
        return tuple(out) if isinstance(out, tuple) else (out,)
    lo, span = dense
    shifted = (a - lo).astype(np.int64, copy=False)
    tally = np.bincount(shifted, minlength=span)
    present = np.flatnonzero(tally)
    result = [(present + lo).astype(a.dtype, copy=False)]
    if index:
        result.append(first_rows(shifted, span)[present])
    if inverse:
        rank = np.cumsum(tally > 0) - 1
        result.append(rank[shifted])
    if counts:
        result.append(tally[present])
    return tuple(result)


def row_codes(floats: np.ndarray, *ints: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row of ``floats`` (2-D) beside the same row of each 1-D integer column in ``ints``
    numbered by its bits, in order of first appearance: (each row's number, the first row of each).

    Rows get one number only where they are identical as values are written out: every NaN is one
    value (a None, whatever its payload), 0.0 and -0.0 are two.
    """
    n, width = len(floats), floats.shape[1]
    if n == 0 or width + len(ints) == 0:
        return np.zeros(n, dtype=np.int64), np.zeros(min(n, 1), dtype=np.int64)
    # the values' bits a column at a time, each column contiguous (hashed and compared column by
    # column; a column of row-major rows strides across every row: 772k rows of 22, 1.0 -> 0.3 s)
    key = np.empty((width + len(ints), n), dtype=np.float64)
    key[:width] = floats.T
    measured = key[:width]
    measured[np.isnan(measured)] = np.nan  # one bit pattern
    for j, col in enumerate(ints):  # the integers' bits as they are
        key[width + j] = np.ascontiguousarray(col, dtype=np.int64).view(np.float64)
    bits = key.view(np.uint64)
    # rows numbered by a hash of their bits (a sort of 8-byte values, not of whole rows), kept only
    # where every row equals its group's first row bit for bit; else the rows themselves are sorted
    found = _rows_by_hash(bits)
    if found is None:
        rows = np.ascontiguousarray(key.T)
        _, first, inverse = np.unique(rows.view(np.dtype((np.void, 8 * rows.shape[1]))).ravel(),
                                      return_index=True, return_inverse=True)
    else:
        first, inverse = found
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[inverse.ravel()], first[order]


def _rows_by_hash(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Groups of equal rows by a hash of each row, ``bits`` (2-D uint64) holding a column per row: the
    first row of each group and each row's group, as ``np.unique(rows, return_index=True,
    return_inverse=True)`` gives them up to the groups' order; None where two different rows share
    a hash."""
    h = row_hash(bits)
    if len(h) >= _HASHED_GROUPS:
        inverse, count = _numbered_first_seen(h)
        first = first_rows(inverse, count)
    else:
        order = np.argsort(h, kind="stable")  # equal hashes in row order: each group's first row leads
        sorted_h = h[order]
        starts = np.empty(len(h), dtype=bool)
        starts[0] = True
        np.not_equal(sorted_h[1:], sorted_h[:-1], out=starts[1:])
        group_of_sorted = np.cumsum(starts) - 1
        first = order[starts]
        inverse = np.empty(len(h), dtype=np.int64)
        inverse[order] = group_of_sorted
    lead = first[inverse]
    if not all((column == column[lead]).all() for column in bits):  # a column at a time
        return None
    return first, inverse


def row_hash(bits: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row, ``bits`` (2-D uint64) holding a column per row: equal rows hash alike."""
    h = np.full(bits.shape[1], np.uint64(0x9E3779B97F4A7C15))
    with np.errstate(over="ignore"):
        for column in bits:
            h ^= column
            h *= np.uint64(0x100000001B3)
            h ^= h >> np.uint64(29)
    return h


def distinct_row_dicts(values: np.ndarray, fields: Sequence[str]) -> tuple[list[dict[str, float | None]], list[int]]:
    """Each distinct row of ``values`` (by :func:`row_codes`) as a dict of ``fields`` (NaN: None),
    and each row's number among them: the dicts of a table whose rows repeat, built once."""
    codes, first = row_codes(values)
    return ([dict(zip(fields, [None if v != v else v for v in r], strict=True)) for r in values[first].tolist()],
            codes.tolist())


def arrow_column(records: Sequence[object], name: str) -> Any:
    """The Arrow column beneath attribute ``name`` of ``records`` (one array), where the records are
    a reader's ``TableRecords`` with that column; else None (the records are read one by one)."""
    if isinstance(records, TableRecords) and name in records.column_names:
        return records.column(name)
    return None


def column(records: Sequence[object], attr: str, none: int = NONE) -> np.ndarray:
    """One integer attribute of every record (int64; ``none`` where it is None)."""
    array = arrow_column(records, attr)
    if array is not None:
        import pyarrow as pa

        if pa.types.is_integer(array.type):
            from profiler_core.ingest.arrow_columns import filled

            return filled(array, none).astype(np.int64)  # a copy: callers may write to it
    get = attrgetter(attr)
    return np.fromiter((none if (v := get(r)) is None else v for r in records), dtype=np.int64, count=len(records))


def known(records: Sequence[object], attr: str) -> np.ndarray:
    """Where attribute ``attr`` of each record is not None (bool)."""
    array = arrow_column(records, attr)
    if array is not None:
        from profiler_core.ingest.arrow_columns import validity

        return validity(array)
    return np.fromiter((getattr(r, attr) is not None for r in records), dtype=bool, count=len(records))


def values(records: Sequence[object], attr: str) -> list[Any]:
    """One attribute of every record, as a list."""
    array = arrow_column(records, attr)
    if array is not None:
        from profiler_core.ingest.column_records import python_values

        return python_values(array)
    return list(map(attrgetter(attr), records))


def taken(records: Sequence[T], positions: np.ndarray) -> Sequence[T]:
    """The records at ``positions``, in that order (still columns where they were)."""
    if isinstance(records, TableRecords):
        return records.take(positions)
    return [records[i] for i in positions.tolist()]


def encode_attr(interner: Interner, records: Sequence[object], attr: str,
                convert: Callable[[Any], Hashable] | None = None,
                decode: Callable[[Any], Hashable] | None = None) -> np.ndarray:
    """``interner.encode(convert(r.attr) for r in records)``: the same codes, given in the same
    (first-seen) order, read off the records' column where they have one (each distinct value
    converted and coded once). ``decode``: what turns a column's value (not None) into the record's,
    for a column that spells it otherwise (a Kineto cpu op's ``input_shapes``, kept as JSON text)."""
    array = arrow_column(records, attr)
    if array is None:
        got: Iterable[Hashable] = map(attrgetter(attr), records)
        return interner.encode(map(convert, got) if convert is not None else got)
    import pyarrow as pa

    from profiler_core.ingest.arrow_columns import dense_indices
    from profiler_core.ingest.column_records import distinct_values

    if not pa.types.is_dictionary(array.type):
        array = array.dictionary_encode()
    distinct = distinct_values(array)  # None last, for null
    codes = dense_indices(array.indices, len(distinct) - 1).astype(np.int64)
    mapping = np.full(len(distinct), NONE, dtype=np.int64)
    for c in first_seen(codes, len(distinct)).tolist():
        value = distinct[c] if decode is None or distinct[c] is None else decode(distinct[c])
        mapping[c] = interner.code(convert(value) if convert is not None else value)
    return mapping[codes]  # type: ignore[no-any-return]


def dim_codes(records: Sequence[object], attr: str, dims: Interner) -> np.ndarray:
    """Grid or block of each record as a code into ``dims`` (``(x, y, z)`` tuples in first-seen
    order; -1 where unknown), read off the ``attr_x/_y/_z`` columns where the records have them
    (each distinct triple of the reader's whole table found once, for every take of it)."""
    if not (isinstance(records, TableRecords) and all(f"{attr}_{axis}" in records.column_names for axis in "xyz")):
        codes, add = dims.codes, dims.code
        return np.fromiter(
            (NONE if (d := getattr(r, attr)) is None else (codes[t] if (t := tuple(d)) in codes else add(t))
             for r in records), dtype=np.int64, count=len(records))
    (whole, count, triples), positions = records.of_table(f"dims:{attr}", lambda table: _dim_keys(table, attr))
    key = whole if positions is None else whole[positions]
    mapping = np.full(count + 1, NONE, dtype=np.int64)  # the last entry: unknown
    for g in first_seen(key, count).tolist():
        mapping[g] = dims.code(triples[g])
    return mapping[key]  # type: ignore[no-any-return]


def _dim_keys(table: Any, attr: str) -> tuple[np.ndarray, int, list[tuple[int | None, ...]]]:
    """Each row's number among the distinct ``(x, y, z)`` of the ``attr_x/_y/_z`` columns of ``table``
    (-1 where x is null), how many there are, and each one's triple (a null y or z: None)."""
    from profiler_core.ingest.arrow_columns import filled, one_chunk, validity

    xs = [one_chunk(table.column(f"{attr}_{axis}")) for axis in "xyz"]
    # a null y or z: None in the record's tuple; it is filled with a value below the axis's others,
    # so the values keep a small range (counted, not sorted, by dense_codes)
    nulls, axes = [], []
    for x in xs:
        values = filled(x, 0).astype(np.int64)
        known_values = values[validity(x)] if x.null_count else values
        null = int(known_values.min()) - 1 if known_values.size else -1  # no value of the axis is this
        if x.null_count:
            values[~validity(x)] = null
        nulls.append(null)
        axes.append(values)
    key, count = dense_codes(axes[0])
    for axis in axes[1:]:  # one code per distinct (x, y, z), kept dense so the products stay small
        axis_codes, size = dense_codes(axis)
        key, count = dense_codes(key * size + axis_codes)
    key[~validity(xs[0])] = NONE
    first = first_rows(key, count)
    triples = [tuple(None if (v := int(a[row])) == null else v for a, null in zip(axes, nulls, strict=True))
               if row < len(key) else () for row in first.tolist()]
    return key, count, triples


def dense_codes(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Each value's rank among the distinct values (int64), and how many distinct values there are
    (over a small range of integers by a table of the values present, else by a sort)."""
    dense = _dense_span(values)
    if dense is not None:
        lo, span = dense
        shifted = values - lo
        present = np.zeros(span, dtype=bool)
        present[shifted] = True
        rank = np.cumsum(present) - 1
        return rank[shifted].astype(np.int64, copy=False), int(rank[-1]) + 1
    distinct = sorted_unique(values)
    return np.searchsorted(distinct, values).astype(np.int64), len(distinct)


def first_seen(codes: np.ndarray, size: int) -> np.ndarray:
    """The codes (of ``0 .. size - 1``) that ``codes`` holds, in order of first appearance."""
    first = first_rows(codes, size)
    present = np.flatnonzero(first < len(codes))
    return present[np.argsort(first[present], kind="stable")]


def first_rows(codes: np.ndarray, size: int) -> np.ndarray:
    """The first position of each code ``0 .. size - 1`` in ``codes`` (``len(codes)`` where absent;
    negative codes are skipped)."""
    n = len(codes)
    first = np.full(size, n, dtype=np.int64)
    at = np.flatnonzero(codes >= 0)
    np.minimum.at(first, codes[at], at)
    return first


def stable_order(values: np.ndarray) -> np.ndarray:
    """``np.argsort(values, kind="stable")``, the same order: integers spanning fewer than 65,536
    values are sorted as 8- or 16-bit ones, which NumPy's stable sort orders by radix (1M codes of a
    few hundred names: 0.01 s against 0.06 s as int64)."""
    if values.dtype.kind in "iu" and len(values) > 1024:
        lo = int(values.min())
        span = int(values.max()) - lo
        if span < 1 << 16:
            small = np.uint8 if span < 1 << 8 else np.uint16
            return np.argsort((values - lo).astype(small), kind="stable")
    return np.argsort(values, kind="stable")


def nth_within(codes: np.ndarray) -> np.ndarray:
    """For each position, how many earlier positions hold the same code (0 for the first)."""
    return nth_and_order(codes)[0]


def nth_and_order(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`nth_within` of ``codes``, and the stable order of ``codes`` it was worked out from: the
    order of the (code, nth) pairs too, which :func:`pair_lookup` takes instead of sorting them."""
    n = len(codes)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = stable_order(codes)
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    run_start = np.repeat(starts, np.diff(np.r_[starts, n]))
    out = np.empty(n, dtype=np.int64)
    out[order] = np.arange(n) - run_start
    return out, order


def pair_lookup(keys: np.ndarray, nth: np.ndarray, other_keys: np.ndarray, other_nth: np.ndarray,
                other_order: np.ndarray | None = None) -> np.ndarray:
    """Index in ``other`` of the same (key, nth) pair, or -1: the invocation-order join.
    ``other_order``: the order of ``other``'s pairs, where :func:`nth_and_order` gave ``other_nth``
    (the stable order of the keys is the pairs' order: within one key the nth rises with position)."""
    if len(keys) == 0:
        return np.zeros(0, dtype=np.int64)
    if len(other_keys) == 0:
        return np.full(len(keys), NONE, dtype=np.int64)
    if other_order is not None and (dense := _dense_span(other_keys, len(keys))) is not None:
        # over a small range of keys, key k's pairs fill the sorted order from the count of keys
        # below k, nth after nth: the pair (k, j) is there at place j, if k has more than j
        lo, size = dense
        counts = np.bincount(other_keys - lo, minlength=size)
        below = np.cumsum(counts) - counts
        inside = (keys >= lo) & (keys < lo + size)
        k = np.where(inside, keys - lo, 0)
        found = inside & (nth < counts[k])
        return np.where(found, other_order[np.where(found, below[k] + nth, 0)], NONE)
    width = int(max(nth.max(initial=0), other_nth.max(initial=0))) + 1
    combined = other_keys * width + other_nth
    order = np.argsort(combined, kind="stable") if other_order is None else other_order
    sorted_comb = combined[order]
    want = keys * width + nth
    pos = np.minimum(np.searchsorted(sorted_comb, want), len(sorted_comb) - 1)
    return np.where(sorted_comb[pos] == want, order[pos], NONE)


def _dense_span(keys: np.ndarray, queries: int = 0) -> tuple[int, int] | None:
    """(the least key, the range's size) where integer ``keys`` span a range small enough to count
    over (up to :data:`_DENSE_SPAN`, or 4 entries per key or query); else None (no keys, or not
    integers)."""
    if keys.dtype.kind not in "iu" or not len(keys):
        return None
    lo = int(keys.min())
    size = int(keys.max()) - lo + 1
    return (lo, size) if size <= max(_DENSE_SPAN, 4 * max(len(keys), queries)) else None


def last_index_of(keys: np.ndarray, query: np.ndarray) -> np.ndarray:
    """For each query, the last position holding it in ``keys`` (-1 where absent): a dict built in order."""
    if len(keys) == 0:
        return np.full(len(query), NONE, dtype=np.int64)
    span = _dense_span(keys, len(query))
    if span is not None:
        lo, size = span
        last = np.full(size, NONE, dtype=np.int64)
        np.maximum.at(last, keys - lo, np.arange(len(keys)))
        return _at_key(last, query, lo)
    order = np.argsort(keys, kind="stable")  # past the counted range: over 65,536 values, no radix
    sorted_keys = keys[order]
    pos = np.searchsorted(sorted_keys, query, side="right") - 1
    pos_c = np.maximum(pos, 0)
    return np.where((pos >= 0) & (sorted_keys[pos_c] == query), order[pos_c], NONE)


def first_index_of(keys: np.ndarray, query: np.ndarray) -> np.ndarray:
    """For each query, the first position holding it in ``keys`` (-1 where absent): ``setdefault`` order."""
    if len(keys) == 0:
        return np.full(len(query), NONE, dtype=np.int64)
    span = _dense_span(keys, len(query))
    if span is not None:
        lo, size = span
        first = first_rows(keys - lo, size)
        return _at_key(np.where(first < len(keys), first, NONE), query, lo)
    order = np.argsort(keys, kind="stable")  # past the counted range: over 65,536 values, no radix
    sorted_keys = keys[order]
    pos = np.searchsorted(sorted_keys, query, side="left")
    pos_c = np.minimum(pos, len(keys) - 1)
    return np.where(sorted_keys[pos_c] == query, order[pos_c], NONE)


def _at_key(table: np.ndarray, query: np.ndarray, lo: int) -> np.ndarray:
    """``table[q - lo]`` for each query ``q`` (-1 where ``q`` is outside the table)."""
    at = query - lo
    inside = (at >= 0) & (at < len(table))
    return np.where(inside, table[np.where(inside, at, 0)], NONE)


def group_first_seen(key_columns: Sequence[np.ndarray], valid: np.ndarray) -> tuple[np.ndarray, int]:
    """Group ids of equal key tuples, numbered in order of first appearance (-1 where not ``valid``)."""
    n = len(valid)
    every = bool(valid.all())
    if n >= _HASHED_GROUPS:
        # one int64 per tuple, numbered by Arrow's hash in order of first appearance (no sort); every
        # tuple valid (the usual case), the columns are read as they are
        packed = _packed(list(key_columns) if every else [c[valid] for c in key_columns])
        if packed is not None:
            codes, count = _numbered_first_seen(packed)
            if every:
                return codes, count
            gid = np.full(n, NONE, dtype=np.int64)
            gid[valid] = codes
            return gid, count
    gid = np.full(n, NONE, dtype=np.int64)
    idx = np.flatnonzero(valid)
    if len(idx) == 0:
        return gid, 0
    cols = [c[idx] for c in key_columns]
    order = np.lexsort(cols[::-1])  # stable: equal keys keep launch order
    change = np.zeros(len(idx), dtype=bool)
    change[0] = True
    for c in cols:
        sc = c[order]
        change[1:] |= sc[1:] != sc[:-1]
    run = np.cumsum(change) - 1
    first_pos = idx[order][change]  # each run's first position (its launch order)
    rank = np.empty(len(first_pos), dtype=np.int64)
    rank[np.argsort(first_pos, kind="stable")] = np.arange(len(first_pos))
    gid[idx[order]] = rank[run]
    return gid, len(first_pos)


_HASHED_GROUPS = 1 << 14  # tuples from which group_first_seen packs and hashes them instead of sorting


def _numbered_first_seen(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Each of the 64-bit ``values`` numbered among the distinct ones in order of first appearance
    (int64), and how many there are: by Arrow's hash table, without a sort."""
    import pyarrow as pa

    encoded = pa.array(values).dictionary_encode()
    return encoded.indices.to_numpy().astype(np.int64), len(encoded.dictionary)


def _packed(cols: Sequence[np.ndarray]) -> np.ndarray | None:
    """Integer columns as one int64 per row, equal exactly where the rows' tuples are (each column
    shifted to start at 0 and given its own range of digits); None where the ranges need more than
    62 bits together."""
    key = np.zeros(len(cols[0]), dtype=np.int64)
    width = 1
    for c in cols:
        if c.dtype.kind not in "iu":
            return None
        lo, hi = int(c.min()), int(c.max())
        span = hi - lo + 1
        width *= span
        if width >= 1 << 62:
            return None
        key *= span
        key += (c - lo).astype(np.int64, copy=False)
    return key
