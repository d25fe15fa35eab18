"""Which of the 20 counters a chip offers, and under which ncu name: never a substitute.

``ncu --query-metrics --chip <chip>`` lists a chip's *base* metric names and their type::

    dram__bytes_op_read      Counter     byte     # of bytes read from DRAM

A full name adds a rollup and a submetric to the base (``dram__bytes_op_read.sum``,
``sm__throughput.avg.pct_of_peak_sustained_elapsed``, ``lts__t_sector_hit_rate.pct``); which
suffixes are valid depends on the type. A counter whose chip-specific name is absent resolves
to ``available=False`` with the reason, so a profile shows a null rather than another metric.

Launch statistics (``launch__*``) come from the driver, not the chip's counters, so the lists
never include them; they are offered on every chip.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from profiler_core.errors import ArtifactFormatError
from profiler_core.metrics.catalog import ALL_SPECS, CATALOG
from profiler_core.schema import CounterAvailability

_ROLLUPS = frozenset({"sum", "avg", "min", "max"})
_COUNTER_SUBMETRICS = frozenset({
    "per_second", "per_cycle_active", "per_cycle_elapsed", "per_cycle_in_frame", "per_cycle_in_region",
    "pct_of_peak_sustained_active", "pct_of_peak_sustained_elapsed", "pct_of_peak_sustained_frame",
    "pct_of_peak_sustained_region", "peak_sustained", "peak_sustained_active", "peak_sustained_elapsed",
    "peak_sustained_frame", "peak_sustained_region", "peak_sustained_active.per_second",
    "peak_sustained_elapsed.per_second", "peak_sustained_frame.per_second",
    "peak_sustained_region.per_second",
})
_RATIO_SUFFIXES = frozenset({"pct", "ratio", "max_rate"})
_ALWAYS_OFFERED_PREFIXES = ("launch__",)
_METRIC_ROW = re.compile(r"^(\S+)\s+([A-Z][a-z]+)(?:\s|$)")


@dataclass(frozen=True)
class ChipMetricList:
    """The base metric names ``ncu --query-metrics --chip <chip>`` listed, with their types."""

    chip: str
    types: Mapping[str, str]  # base name -> "Counter" | "Ratio" | "Throughput"

    def why_not(self, ncu_name: str) -> str | None:
        """None when the chip offers ``ncu_name``; otherwise the reason it does not."""
        if ncu_name.startswith(_ALWAYS_OFFERED_PREFIXES):
            return None
        base, _, suffix = ncu_name.partition(".")
        kind = self.types.get(base)
        if kind is None:
            return f"{ncu_name} not offered by ncu on {self.chip}"
        if not _suffix_valid(kind, suffix):
            return f"{ncu_name}: .{suffix} is not a valid suffix for the {kind} {base} on {self.chip}"
        return None


def load_chip_metric_list(path: str | Path) -> ChipMetricList:
    """Parse ``ncu --query-metrics --chip X`` output (plain or ``.gz``)."""
    list_path = Path(path)
    opener = gzip.open if list_path.name.endswith(".gz") else open
    chip: str | None = None
    types: dict[str, str] = {}
    try:
        with opener(list_path, "rt", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("Chip "):
                    chip = line.split()[1].lower() if len(line.split()) > 1 else None
                    continue
                match = _METRIC_ROW.match(line)
                if match and "__" in match.group(1):
                    types[match.group(1)] = match.group(2)
    except (OSError, EOFError, UnicodeDecodeError) as err:
        raise ArtifactFormatError(f"{list_path}: cannot read the metric list ({err})") from err
    if chip is None or not types:
        raise ArtifactFormatError(
            f"{list_path}: not an ncu metric list (expected a 'Chip <name>' line and metric rows); "
            "produce one with: ncu --query-metrics --chip <chip>"
        )
    return ChipMetricList(chip=chip, types=types)


def metrics_for_chip(
    chip: str, available: ChipMetricList | Iterable[str] | None = None, *, flop_counters: bool = False,
) -> list[CounterAvailability]:
    """The 20 counters (and the FLOP counters if asked) under ``chip``'s ncu names, each marked
    available or not, with the reason.

    ``available`` is the chip's metric list, or a set of names ncu offered or returned (full or
    base names); ``None`` resolves names only and marks every counter available.
    """
    chip = chip.lower()
    if isinstance(available, ChipMetricList) and available.chip != chip:
        raise ArtifactFormatError(f"the metric list is for {available.chip}, not {chip}")
    names = None if available is None or isinstance(available, ChipMetricList) else frozenset(available)
    result: list[CounterAvailability] = []
    for spec in ALL_SPECS if flop_counters else CATALOG:
        ncu_name = spec.ncu_name_for(chip)
        if isinstance(available, ChipMetricList):
            reason = available.why_not(ncu_name)
        elif names is not None and ncu_name not in names and ncu_name.partition(".")[0] not in names:
            reason = f"{ncu_name} not offered by ncu on {chip}"
        else:
            reason = None
        result.append(CounterAvailability(field=spec.field, ncu_name=ncu_name, available=reason is None,
                                          reason=reason))
    return result


# Marketing names -> chip, most specific first. The chip is what ncu's --chip takes.
_NAME_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), chip)
    for pattern, chip in (
        (r"\bG?H(100|200|800|20)\b", "gh100"),
        (r"\bG?B(100|200)\b", "gb100"),
        (r"\bRTX\s*(PRO\s*6000|5090)\b", "gb202"),
        (r"\bRTX\s*(4090|6000\s*Ada)\b|\bL40S?\b", "ad102"),
        (r"\bL4\b", "ad104"),
        (r"\bA(100|800|30)\b", "ga100"),
        (r"\bRTX\s*(3090|3080)\b|\bA(10G?|40)\b", "ga102"),
        (r"\bV100\b", "gv100"),
        (r"\bT4\b", "tu104"),
    )
)
# Compute capability -> the family's largest chip (metric names agree within a family).
_CC_CHIPS = {
    (7, 0): "gv100", (7, 5): "tu102", (8, 0): "ga100", (8, 6): "ga102", (8, 9): "ad102",
    (9, 0): "gh100", (10, 0): "gb100", (12, 0): "gb202",
}
_CC = re.compile(r"^(?:sm_?)?(\d+)(?:\.(\d))?$", re.IGNORECASE)


def chip_from_name(name: str) -> str | None:
    """The ncu chip for a GPU name (``NVIDIA H200``) or compute capability (``9.0``, ``sm_90``)."""
    text = name.strip()
    cc = _CC.match(text)
    if cc:
        if cc.group(2) is not None:
            key = (int(cc.group(1)), int(cc.group(2)))
        else:  # "sm_90" / "90" / "120": the last digit is the minor version
            digits = cc.group(1)
            if len(digits) < 2:
                return None
            key = (int(digits[:-1]), int(digits[-1]))
        return _CC_CHIPS.get(key)
    for pattern, chip in _NAME_PATTERNS:
        if pattern.search(text):
            return chip
    return None


def _suffix_valid(kind: str, suffix: str) -> bool:
    if kind == "Ratio":
        return suffix in _RATIO_SUFFIXES
    if kind in ("Counter", "Throughput"):
        rollup, _, submetric = suffix.partition(".")
        return rollup in _ROLLUPS and (not submetric or submetric in _COUNTER_SUBMETRICS)
    return True  # a type this module does not know: the base name is evidence enough
