"""Small Arrow helpers the columnar readers share: dictionary-encoded names, integer columns.

Names are resolved once per distinct value, never per row: a column of 1M StringIds ids
naming 300 kernels costs 300 lookups and one ``take``::

    ids [7, 7, 9, 7]  --lookup {7: "gemm", 9: "relu"}-->  codes [0, 0, 1, 0], names ["gemm", "relu"]

``pyarrow`` and ``numpy`` are imported by the functions, so importing a reader stays cheap.
Arrays cross between numpy and Arrow through their buffers (``to_numpy``, ``from_numpy``,
``string_array``): pyarrow's own ``pa.array(...)`` and ``Array.to_numpy()`` import pandas on
first use (half a second and 45 MB), which the commands that read captures never need.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa


class NameTable:
    """Distinct strings in first-seen order, each with its code: the dictionary of one column."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self._codes: dict[str, int] = {}

    def code(self, text: str) -> int:
        """The code of ``text``, adding it on first sight."""
        code = self._codes.get(text)
        if code is None:
            code = self._codes[text] = len(self.values)
            self.values.append(text)
        return code

    def encode(self, column: pa.Array, lookup: Callable[[Any], str | None]) -> np.ndarray:
        """Codes (int32, -1 where ``lookup`` gives None) of ``column``'s values mapped through ``lookup``.

        ``lookup`` is called once per distinct value (null included, as None).
        """
        import numpy as np

        encoded = column.dictionary_encode()
        distinct = encoded.dictionary.to_pylist() + [None]  # the last entry stands for null
        remap = np.array([self._code_or_missing(lookup(v)) for v in distinct], dtype=np.int32)
        return remap[dense_indices(encoded.indices, len(distinct) - 1)]  # type: ignore[no-any-return]

    def constant(self, text: str, rows: int) -> np.ndarray:
        """``rows`` codes of one text."""
        import numpy as np

        return np.full(rows, self.code(text), dtype=np.int32)

    def array(self, codes: np.ndarray) -> pa.DictionaryArray:
        """A dictionary<int32, string> array of ``codes`` (null where a code is -1)."""
        import numpy as np
        import pyarrow as pa

        indices = from_numpy(codes.astype(np.int32, copy=False), mask=codes < 0)
        return pa.DictionaryArray.from_arrays(indices, string_array(self.values))

    def _code_or_missing(self, text: str | None) -> int:
        return -1 if text is None else self.code(text)


def dense_indices(indices: pa.Array, null_code: int) -> np.ndarray:
    """The values of an integer array as numpy, ``null_code`` where null."""
    return filled(indices, null_code)


def filled(array: pa.Array | pa.ChunkedArray, fill: float) -> np.ndarray:
    """The values of a fixed-width array as numpy, ``fill`` where null (``fill_null`` without the
    scalar it makes, whose conversion imports pandas). Read-only where it is a view of the array."""
    import numpy as np
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = one_chunk(array)
    values = to_numpy(array)
    if array.null_count == 0:
        return values
    return np.where(validity(array), values, fill)


def to_numpy(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The values of a fixed-width (integer, float, boolean) array, a view where it can be; nulls hold junk."""
    import numpy as np
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = one_chunk(array)
    if pa.types.is_boolean(array.type):
        return _bits(array.buffers()[1], array.offset, len(array))
    dtype = np.dtype(array.type.to_pandas_dtype())
    data = array.buffers()[1]
    if data is None or not len(array):
        return np.zeros(len(array), dtype=dtype)
    return np.frombuffer(data, dtype=dtype, count=array.offset + len(array))[array.offset:]


def validity(array: pa.Array) -> np.ndarray:
    """True where ``array`` holds a value."""
    import numpy as np

    if array.null_count == 0:
        return np.ones(len(array), dtype=bool)
    if array.null_count == len(array):
        return np.zeros(len(array), dtype=bool)
    return _bits(array.buffers()[0], array.offset, len(array))


def from_numpy(values: np.ndarray, mask: np.ndarray | None = None) -> pa.Array:
    """An Arrow array of a numpy integer, float or bool array, null where ``mask`` is True."""
    import numpy as np
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    kind = pa.bool_() if values.dtype == bool else pa.from_numpy_dtype(values.dtype)
    data = pa.py_buffer(np.packbits(values, bitorder="little") if values.dtype == bool else values)
    nulls = 0 if mask is None else int(mask.sum())
    bitmap = pa.py_buffer(np.packbits(~mask, bitorder="little")) if mask is not None and nulls else None
    return pa.Array.from_buffers(kind, len(values), [bitmap, data], null_count=nulls)


def string_array(values: Sequence[str | None]) -> pa.Array:
    """An Arrow string array of ``values`` (None: null)."""
    import numpy as np
    import pyarrow as pa

    missing = [v is None for v in values]
    encoded = [b"" if v is None else v.encode() for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    kind = pa.string() if offsets[-1] < 2**31 else pa.large_string()
    offsets = offsets.astype(np.int32) if kind == pa.string() else offsets
    nulls = sum(missing)
    bitmap = pa.py_buffer(np.packbits(~np.array(missing, dtype=bool), bitorder="little")) if nulls else None
    return pa.Array.from_buffers(kind, len(values), [bitmap, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))],
                                 null_count=nulls)


def _bits(buffer: pa.Buffer | None, offset: int, length: int) -> np.ndarray:
    import numpy as np

    if buffer is None or not length:
        return np.zeros(length, dtype=bool)
    bits = np.unpackbits(np.frombuffer(buffer, dtype=np.uint8), bitorder="little", count=offset + length)
    return bits[offset:].astype(bool)


def column_of(table: pa.Table, name: str) -> pa.Array:
    """Column ``name`` as one array (all-null int64 when the query did not select it)."""
    import pyarrow as pa

    if name not in table.column_names:
        return pa.nulls(table.num_rows, pa.int64())
    return one_chunk(table.column(name))


def one_chunk(column: pa.ChunkedArray) -> pa.Array:
    """``column`` as one array (``combine_chunks`` of no chunks would import pandas)."""
    import pyarrow as pa

    if column.num_chunks == 1:
        return column.chunk(0)
    return column.combine_chunks() if column.num_chunks else pa.nulls(0, column.type)


def int_column(table: pa.Table, name: str) -> pa.Array | None:
    """Column ``name`` as int64 (all-null when the query did not select it); None if it holds non-integers."""
    import pyarrow as pa

    array = column_of(table, name)
    if pa.types.is_null(array.type):
        return pa.nulls(table.num_rows, type=pa.int64())
    if not pa.types.is_integer(array.type):
        return None
    return array.cast(pa.int64())


def sorted_by_start(table: pa.Table) -> pa.Table:
    """``table`` in ``start_ns`` order; rows with equal starts keep their order (a stable sort)."""
    import numpy as np

    start = to_numpy(table.column("start_ns"))
    if start.size < 2 or bool((start[1:] >= start[:-1]).all()):
        return table
    return table.take(from_numpy(np.argsort(start, kind="stable")))


def first_true(mask: np.ndarray) -> int | None:
    """Index of the first True in ``mask``, or None."""
    import numpy as np

    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else None
