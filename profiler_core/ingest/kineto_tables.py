"""A Kineto trace's kernels, cpu ops and runtime calls as Arrow tables, from the rows ``kineto_events`` makes.

One column per field of the record (``record_columns.KINETO_KERNEL_COLUMNS``, ``CPU_OP_COLUMNS``,
``KINETO_RUNTIME_COLUMNS``); strings are dictionary-encoded in first-seen order, integers are
int64 with nulls for None. A cpu op's ``Input Dims`` (nested lists of any depth) is kept as the
JSON text of each distinct shape list, its ``Input type`` as a list of strings::

    rows  [("aten::mm", 10, 50, 550, 7, None, ((512, 256), (256, 256)), ("float", "float"), "cpu_op", None)]
    -> name: dictionary ["aten::mm"], start_ns [10], ..., input_shapes: dictionary ["[[512,256],[256,256]]"]

The reader hands the tables on beneath ``record_columns.TableRecords``: the attribution engine
reads the columns, and a caller that reads a record gets the same record the rows stood for.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest.arrow_columns import NameTable, from_numpy, string_array
from profiler_core.ingest.kineto_events import CPU_OP_ROW, KERNEL_ROW, RUNTIME_ROW, Row
from profiler_core.record_columns import CPU_OP_COLUMNS, KINETO_KERNEL_COLUMNS, KINETO_RUNTIME_COLUMNS

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

_STRINGS = frozenset({"name", "kind", "category"})
_NULL_COLUMNS = ("short_name", "static_smem_bytes", "dynamic_smem_bytes")  # Kineto records none of these


def kernel_table(path: Path, rows: Sequence[Row]) -> pa.Table:
    """``KINETO_KERNEL_COLUMNS`` of kernel rows (``kineto_events.KERNEL_ROW``), in row order."""
    import pyarrow as pa

    found = _columns(path, "kernel", rows, KERNEL_ROW)
    for name in _NULL_COLUMNS:
        found[name] = (NameTable().array(_no_codes(len(rows))) if name == "short_name"
                       else pa.nulls(len(rows), pa.int64()))
    return pa.table({name: found[name] for name in KINETO_KERNEL_COLUMNS})


def cpu_op_table(path: Path, rows: Sequence[Row]) -> pa.Table:
    """``CPU_OP_COLUMNS`` of cpu op rows (``kineto_events.CPU_OP_ROW``), in row order."""
    import pyarrow as pa

    found = _columns(path, "cpu_op", rows, CPU_OP_ROW)
    return pa.table({name: found[name] for name in CPU_OP_COLUMNS})


def runtime_table(path: Path, rows: Sequence[Row]) -> pa.Table:
    """``KINETO_RUNTIME_COLUMNS`` of runtime call rows (``kineto_events.RUNTIME_ROW``), in row order."""
    import pyarrow as pa

    found = _columns(path, "runtime", rows, RUNTIME_ROW)
    return pa.table({name: found[name] for name in KINETO_RUNTIME_COLUMNS})


def _columns(path: Path, what: str, rows: Sequence[Row], fields: Sequence[str]) -> dict[str, pa.Array]:
    """Each field of ``rows`` as one Arrow array."""
    if not rows:
        values: list[Sequence[Any]] = [() for _ in fields]
    else:
        values = list(zip(*rows, strict=True))
    out: dict[str, pa.Array] = {}
    for name, column in zip(fields, values, strict=True):
        if name in _STRINGS:
            out[name] = _dictionary(column)
        elif name == "input_shapes":
            out[name] = _dictionary(column, lambda shape: orjson.dumps(shape).decode())
        elif name == "input_types":
            out[name] = _string_lists(column)
        else:
            try:
                out[name] = _ints(column)
            except OverflowError as err:
                big = next(v for v in column if v is not None and not -2**63 <= v < 2**63)
                raise ArtifactFormatError(
                    f"{path}: a {what} event's {name} is {big}, beyond any 64-bit integer; the trace was edited "
                    "or corrupted: capture it again with torch.profiler") from err
    return out


def _ints(values: Sequence[int | None]) -> pa.Array:
    """An int64 array of Python integers, null for None."""
    import numpy as np
    import pyarrow as pa

    try:  # no None: numpy converts the integers at C speed (counting the Nones first costs as much)
        return from_numpy(np.array(values, dtype=np.int64))
    except TypeError:
        pass
    objects = np.array(values, dtype=object)
    missing = np.equal(objects, None)  # type: ignore[call-overload]  # (object arrays compare elementwise)
    if missing.all():
        return pa.nulls(len(values), pa.int64())
    objects[missing] = 0
    return from_numpy(objects.astype(np.int64), mask=missing)


def _no_codes(rows: int) -> np.ndarray:
    import numpy as np

    return np.full(rows, -1, dtype=np.int32)


def _dictionary(values: Sequence[Any], text: Any = None) -> pa.Array:
    """A dictionary<int32, string> array of ``values`` (None: null), distinct values in first-seen order;
    ``text`` spells a distinct value that is not a string."""
    import pyarrow as pa

    indices, distinct = _first_seen(values)
    spelled = distinct if text is None else list(map(text, distinct))
    return pa.DictionaryArray.from_arrays(indices, string_array(spelled))


def _string_lists(values: Sequence[tuple[str, ...] | None]) -> pa.Array:
    """A dictionary<int32, list<string>> array of string tuples (None: null), as ncu's NVTX stacks are."""
    import numpy as np
    import pyarrow as pa

    indices, distinct = _first_seen(values)
    offsets = np.zeros(len(distinct) + 1, dtype=np.int32)
    np.cumsum([len(value) for value in distinct], out=offsets[1:])
    flat = string_array([text for value in distinct for text in value])
    return pa.DictionaryArray.from_arrays(indices, pa.ListArray.from_arrays(from_numpy(offsets), flat))


def _first_seen(values: Sequence[Any]) -> tuple[pa.Array, list[Any]]:
    """The int32 indices (null for None) of ``values`` into their distinct values, in first-seen order."""
    import numpy as np

    codes: dict[Any, int] = dict.fromkeys(values, 0)  # first-seen order, at C speed
    codes.pop(None, None)
    distinct = list(codes)
    codes.update(zip(distinct, range(len(distinct)), strict=True))
    codes[None] = -1
    indices = np.fromiter(map(codes.__getitem__, values), dtype=np.int32, count=len(values))
    missing = indices < 0
    return from_numpy(indices, mask=missing if missing.any() else None), distinct
