"""check_references and profile_problem for a large profile, on its columns instead of one model at a time.

Same checks, same words as profiler_core/schema.py and profiler_core/profile_checks.py; the
first problem found is named (the order of the checks follows theirs). A kernel's id is its
row in the kernel table, so ids are unique by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from profiler_core.attribution.columns import NONE, ArrowStrings, sorted_unique
from profiler_core.attribution.kernel_table import KernelTable
from profiler_core.errors import SchemaError
from profiler_core.ingest.arrow_columns import from_numpy, string_array, to_numpy
from profiler_core.physical_checks import dram_bytes_columns, dram_problem
from profiler_core.schema import Profile


@dataclass
class _Ops:
    keys: Any  # pyarrow string array
    inherited_from: Any  # pyarrow string array, nulls: none
    offsets: np.ndarray
    members: np.ndarray
    kernel_count: np.ndarray
    duration_ns: np.ndarray


def _ops(ops: Sequence[Any]) -> _Ops:
    import pyarrow as pa

    from profiler_core.attribution.operator_parquet import OperatorColumns
    from profiler_core.attribution.operator_table import OperatorTable

    if isinstance(ops, OperatorColumns):
        return _Ops(ops.keys, ops.inherited_from, ops.offsets, ops.members, ops.kernel_count, ops.duration_ns)
    if isinstance(ops, OperatorTable):
        rep = ops.inherited_from
        return _Ops(pa.array(ops.keys, type=pa.string()),
                    pa.array([None if r == NONE else ops.keys[r] for r in rep.tolist()], type=pa.string()),
                    ops.offsets, ops.members, np.diff(ops.offsets), ops.duration_ns)
    sizes = np.array([len(op.kernel_ids) for op in ops], dtype=np.int64)
    return _Ops(pa.array([op.key for op in ops], type=pa.string()),
                pa.array([op.inherited_from for op in ops], type=pa.string()),
                np.r_[0, np.cumsum(sizes)].astype(np.int64),
                np.fromiter((i for op in ops for i in op.kernel_ids), dtype=np.int64, count=int(sizes.sum())),
                np.array([op.kernel_count for op in ops], dtype=np.int64),
                np.array([op.duration_ns for op in ops], dtype=np.int64))


def _first(mask: np.ndarray) -> int | None:
    hit = np.flatnonzero(mask)
    return int(hit[0]) if len(hit) else None


def table_references(profile: Profile) -> None:
    """check_references on columns (``profile.kernels`` is a KernelTable)."""
    import pyarrow.compute as pc

    from profiler_core.attribution.operator_parquet import OperatorColumns, strings_distinct

    t = profile.kernels
    assert isinstance(t, KernelTable)
    ops = _ops(profile.operators)
    n = len(t)
    if ops.keys.null_count:
        g = _first(~to_numpy(pc.is_valid(ops.keys)))
        raise SchemaError(f"operator {g} has no key; each operator needs its own key")
    table = profile.operators
    if not (table.keys_distinct if isinstance(table, OperatorColumns) else strings_distinct(ops.keys)):
        seen: set[str] = set()
        dup = None
        for dup in ops.keys.to_pylist():
            if dup in seen:
                break
            seen.add(dup)
        raise SchemaError(f"operator key {dup!r} appears twice; each operator needs its own key")
    j = _first(t.end_ns < t.start_ns)
    if j is not None:
        raise SchemaError(f"kernel {j} ends ({int(t.end_ns[j])} ns) before it starts ({int(t.start_ns[j])} ns)")
    used = sorted_unique(t.operator[t.operator != NONE])
    if len(used):
        keys = t.operator_keys
        if isinstance(keys, ArrowStrings) and keys.arrow.type == ops.keys.type and keys.arrow.equals(ops.keys):
            bad = None  # the kernels' keys are the operator table's, key for key (as written)
        else:
            names = (keys.arrow.take(from_numpy(used)) if isinstance(keys, ArrowStrings)
                     else string_array([keys[g] for g in used.tolist()]))
            bad = _first(~to_numpy(pc.is_in(names, value_set=ops.keys)))
        if bad is not None:
            j = int(np.flatnonzero(t.operator == used[bad])[0])
            raise SchemaError(f"kernel {j} is attributed to operator {names[bad].as_py()!r}, "
                              "which the profile does not list")
    j = _first((t.inherited_from != NONE) & ((t.inherited_from < 0) | (t.inherited_from >= n)))
    if j is not None:
        raise SchemaError(f"kernel {j} inherits counters from kernel {int(t.inherited_from[j])}, which is not listed")
    out = (ops.members < 0) | (ops.members >= n)
    pos = _first(out)
    if pos is not None:
        g = int(np.searchsorted(ops.offsets, pos, side="right") - 1)
        raise SchemaError(f"operator {ops.keys[g].as_py()!r} lists kernel {int(ops.members[pos])}, "
                          "which the profile does not list")
    rep = ops.inherited_from
    bad_g = None
    if rep.null_count < len(rep):  # some operator inherits (layer deduplication)
        bad_rep = pc.and_(pc.is_valid(rep), pc.invert(pc.is_in(rep, value_set=ops.keys)))
        bad_g = _first(to_numpy(bad_rep))
    if bad_g is not None:
        raise SchemaError(f"operator {ops.keys[bad_g].as_py()!r} inherits from operator {rep[bad_g].as_py()!r}, "
                          "which is not listed")
    for u in profile.unattributed:
        if not 0 <= u.kernel_id < n:
            raise SchemaError(f"unattributed entry names kernel {u.kernel_id}, which the profile does not list")


def table_problem(profile: Profile, max_duration_ns: int) -> str | None:
    """profile_problem on columns: durations that add up, counts that match."""
    t = profile.kernels
    assert isinstance(t, KernelTable)
    if not len(t):
        return "it holds no kernels (not the output of an attribution)"
    dur = t.end_ns - t.start_ns
    j = _first(dur < 0)
    if j is not None:
        return f"kernels[{j}] (id {j}): negative duration (start_ns {int(t.start_ns[j])}, end_ns {int(t.end_ns[j])}, " \
               f"duration_ns {int(dur[j])})"
    j = _first(dur > max_duration_ns)
    if j is not None:
        return f"kernels[{j}] (id {j}): duration_ns {int(dur[j])} is more than {max_duration_ns} (2.8 hours)"
    ops = _ops(profile.operators)
    sizes = np.diff(ops.offsets)
    total = np.add.reduceat(np.r_[dur[ops.members], 0], ops.offsets[:-1]) if len(sizes) else np.zeros(0, np.int64)
    total = np.where(sizes > 0, total, 0)
    g = _first((ops.duration_ns != total) | (ops.kernel_count != sizes))
    if g is not None:
        where = f"operators[{g}] {ops.keys[g].as_py()!r}"
        if ops.duration_ns[g] != total[g]:
            return f"{where}: duration_ns {int(ops.duration_ns[g])} is not the sum of its kernels' durations " \
                   f"({int(total[g])})"
        return f"{where}: kernel_count {int(ops.kernel_count[g])} but {int(sizes[g])} kernel ids"
    cov = profile.coverage
    all_ns = int(dur.sum())
    if cov.kernel_count != len(t) or cov.duration_ns != all_ns:
        return (f"coverage says {cov.kernel_count} kernels, {cov.duration_ns} ns, but the profile holds "
                f"{len(t)} kernels, {all_ns} ns")
    if not t.have_counters:
        return None
    dram = dram_bytes_columns(t.counter_fields, t.counter_column, t.counter_row)
    return dram_problem(dram, dur, profile.capture.gpu_name)
