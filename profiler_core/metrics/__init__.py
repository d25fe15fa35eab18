"""The hardware-counter catalog: the 20 counters, their per-chip ncu names and aggregation rules."""

from profiler_core.metrics.catalog import (
    CATALOG,
    Aggregation,
    CounterSpec,
    field_for_ncu_name,
    ncu_names_for_chip,
)

__all__ = ["CATALOG", "Aggregation", "CounterSpec", "field_for_ncu_name", "ncu_names_for_chip"]
