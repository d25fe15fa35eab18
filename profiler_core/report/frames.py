"""profile.json as pandas DataFrames: one row per kernel, one per operator (for notebooks and CSV).

Columns carry units in their names (``duration_ns``, ``dram_bytes_read``); every counter of
the catalog is a column, null where the profile has null. Ids, nanoseconds and counted
counters (bytes, cycles, instructions) are nullable integers (``Int64``), so CSV holds
``1048576``, not ``1048576.0``, and an empty cell for null. ::

    kernels, operators = profile_frames(read_profile("profile.json"))
    operators.groupby("op_class")["duration_ns"].sum()
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from profiler_core.atomic_write import write_files_atomic
from profiler_core.metrics.catalog import CATALOG, COUNTER_FIELDS, Aggregation
from profiler_core.schema import Profile

# Counters that count something (summed or a per-launch maximum): integers wherever ncu gave integers.
_COUNT_UNITS = {"ns", "byte", "cycle", "inst", "wavefront", "register/thread", "byte/block"}
COUNT_COUNTERS = tuple(s.field for s in CATALOG
                       if s.unit in _COUNT_UNITS and s.aggregation in (Aggregation.SUM, Aggregation.MAX))
KERNEL_INT_COLUMNS = ("kernel_id", "stream", "device", "start_ns", "duration_ns", "inherited_from")
OPERATOR_INT_COLUMNS = ("call_index", "op_id", "kernel_count", "duration_ns")


def _integer_columns(frame: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """``columns`` as nullable integers (``Int64``) where every value present is a whole number."""
    for col in columns:
        if col not in frame.columns:
            continue
        values = pd.to_numeric(frame[col], errors="coerce")
        present = values.dropna()
        if len(present) == frame[col].notna().sum() and bool((present % 1 == 0).all()):
            frame[col] = values.astype("Int64")
    return frame


def kernel_frame(profile: Profile) -> pd.DataFrame:
    """One row per kernel: identity, timeline, attribution and the 20 counters."""
    rows = []
    for k in profile.kernels:
        a = k.attribution
        row = {
            "kernel_id": k.id, "name": k.name, "kind": k.kind, "stream": k.stream, "device": k.device,
            "start_ns": k.start_ns, "duration_ns": k.duration_ns,
            "grid": None if k.grid is None else "x".join(map(str, k.grid)),
            "block": None if k.block is None else "x".join(map(str, k.block)),
            "operator": a.operator_key, "tier": a.tier.value, "confidence": a.confidence.value,
            "tiers_agree": a.tiers_agree, "reason": a.reason, "counter_source": k.counter_source.value,
            "inherited_from": k.inherited_from, "library": k.library, "fused_with": ",".join(k.fused_with),
        }
        row.update({f: k.counters.get(f) for f in COUNTER_FIELDS})
        rows.append(row)
    return _integer_columns(pd.DataFrame(rows), KERNEL_INT_COLUMNS + COUNT_COUNTERS)


def operator_frame(profile: Profile) -> pd.DataFrame:
    """One row per operator invocation with its aggregated counters and share of kernel time."""
    total = profile.coverage.duration_ns or 1
    rows = []
    ops = profile.operators
    # a table's models built at once, read-only (this only reads them), not one at a time
    for op in ops.models(read_only=True) if hasattr(ops, "models") else ops:
        row = {
            "operator": op.key, "name": op.name, "call_index": op.call_index, "op_id": op.op_id,
            "op_class": op.op_class.value, "execution_context": op.execution_context.value,
            "library": op.library, "kernel_count": op.kernel_count, "duration_ns": op.duration_ns,
            "share_pct": 100.0 * op.duration_ns / total, "confidence": op.confidence.value,
            "is_fused": op.is_fused, "fused_with": ",".join(op.fused_with), "layer_role": op.layer_role,
            "inherited_from": op.inherited_from,
        }
        row.update({f: op.metrics.get(f) for f in COUNTER_FIELDS})
        rows.append(row)
    return _integer_columns(pd.DataFrame(rows), OPERATOR_INT_COLUMNS + COUNT_COUNTERS)


def profile_frames(profile: Profile) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(kernels, operators) DataFrames of one profile."""
    return kernel_frame(profile), operator_frame(profile)


def write_csv(profile: Profile, out_dir: str | Path) -> tuple[Path, Path]:
    """Write kernels.csv and operators.csv into ``out_dir`` (together: both or neither)."""
    out = Path(out_dir)
    kernels, operators = profile_frames(profile)
    written = write_files_atomic(out, {"kernels.csv": kernels.to_csv(index=False).encode(),
                                       "operators.csv": operators.to_csv(index=False).encode()})
    return written[0], written[1]
