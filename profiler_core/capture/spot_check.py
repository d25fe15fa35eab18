"""How well one sampled launch stands for its configuration: the spread of K samples.

In per-config mode every launch inherits the counters of its configuration's
representative. ``--spot-check K`` measures K launches per configuration; the spread is,
for each counter, the largest relative deviation of any sample from its configuration's
mean, over all configurations with repeats::

    config A: dram_bytes_read 100, 110  -> mean 105, max |x - mean| / mean = 0.048
    config B: dram_bytes_read 50, 50    -> 0.0          => spread[dram_bytes_read] = 0.048
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from profiler_core.capture.determinism import kernel_name_normalizer
from profiler_core.rundir.manifest import SpotCheckRecord


def _rel_deviation(values: Sequence[float]) -> float | None:
    mean = sum(values) / len(values)
    worst = max(abs(v - mean) for v in values)
    if mean == 0:
        return 0.0 if worst == 0 else None  # undefined around zero: reported, not guessed
    return worst / abs(mean)


def counter_spread(rows: Sequence[Any], ncu_names: Mapping[str, str],
                   samples_per_config: int) -> SpotCheckRecord:
    """Per-counter spread of CounterRow samples grouped by (name, grid, block)."""
    norm = kernel_name_normalizer()
    groups: dict[tuple[Any, ...], list[Any]] = {}
    labels: dict[tuple[Any, ...], str] = {}
    for row in rows:
        key = (norm(row.name), row.grid, row.block)
        groups.setdefault(key, []).append(row)
        labels.setdefault(key, f"{row.name} grid {row.grid} block {row.block}")
    record = SpotCheckRecord(samples_per_config=samples_per_config, configs=len(groups))
    repeated = {key: members for key, members in groups.items() if len(members) > 1}
    record.configs_with_repeats = len(repeated)
    for field, ncu_name in ncu_names.items():
        worst: float | None = None
        worst_key: tuple[Any, ...] | None = None
        undefined = False
        for key, members in repeated.items():
            values = [m.metrics.get(ncu_name) for m in members]
            present = [float(v) for v in values if v is not None]
            if len(present) < 2:
                continue
            dev = _rel_deviation(present)
            if dev is None:
                undefined = True
                continue
            if worst is None or dev > worst:
                worst, worst_key = dev, key
        if worst is None and not undefined and not repeated:
            continue
        record.max_rel_deviation[field] = worst
        if worst_key is not None:
            record.worst_config[field] = labels[worst_key]
    return record


def load_counter_rows(path: Any) -> list[Any]:
    """CounterRows of a counters CSV (the ingest reader, imported here)."""
    from profiler_core.ingest import read_ncu

    return list(read_ncu(path).rows)
