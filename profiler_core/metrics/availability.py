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
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from profiler_core.errors import ArtifactFormatError
from profiler_core.metrics.catalog import ALL_SPECS, CATALOG, CounterSpec
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


WhyNot = Callable[[CounterSpec, str], str | None]  # (counter, its ncu name) -> why it is unavailable, or None


def counter_availability(chip: str | None, specs: Iterable[CounterSpec], why_not: WhyNot) -> list[CounterAvailability]:
    """Each counter of ``specs`` under ``chip``'s ncu name, available unless ``why_not`` says why not.

    The one place a counter's availability is decided; what it is decided against differs:
    a chip's metric list before the counter run (:func:`offered_by`), or what the run
    returned afterwards (:func:`returned_by`).
    """
    out = []
    for spec in specs:
        name = spec.ncu_name_for(chip)
        reason = why_not(spec, name)
        out.append(CounterAvailability(field=spec.field, ncu_name=name, available=reason is None, reason=reason))
    return out


def offered_by(chip: str | None, available: ChipMetricList | Iterable[str] | None, *,
               ncu_version: str | None = None) -> WhyNot:
    """The rule for a chip's metric list, or a set of names ncu offered or returned (full or base names).

    ``launch__*`` names are launch attributes, reported on every chip; ``available`` None (the
    chip or its list is unknown) keeps every name, unverified.
    """
    if isinstance(available, ChipMetricList):
        return lambda _spec, name: available.why_not(name)
    if available is None:
        return lambda _spec, _name: None
    names = frozenset(available)
    tool = f"ncu {ncu_version}" if ncu_version else "ncu"

    def why_not(_spec: CounterSpec, name: str) -> str | None:
        if name.startswith(_ALWAYS_OFFERED_PREFIXES) or name in names or name.partition(".")[0] in names:
            return None
        return f"{name} not offered by {tool} on {chip}"

    return why_not


def returned_by(metrics_returned: Collection[str] | None, chip: str | None) -> WhyNot:
    """The rule for a counter run's report: a counter is there when ncu returned it (under any of its names)."""
    if metrics_returned is None:
        return lambda _spec, _name: "no counter run was given"

    def why_not(spec: CounterSpec, name: str) -> str | None:
        if name in metrics_returned or any(n in metrics_returned for n in spec.ncu_names):
            return None
        return f"ncu returned no '{name}' (not offered on {chip or 'this chip'}, or not requested)"

    return why_not


def metrics_for_chip(
    chip: str, available: ChipMetricList | Iterable[str] | None = None, *, flop_counters: bool = False,
    ncu_version: str | None = None,
) -> list[CounterAvailability]:
    """The 20 counters (and the FLOP counters if asked) under ``chip``'s ncu names, each marked
    available or not, with the reason.

    ``available`` is the chip's metric list, or a set of names ncu offered or returned (full or
    base names); ``None`` resolves names only and marks every counter available.
    """
    chip = chip.lower()
    if isinstance(available, ChipMetricList) and available.chip != chip:
        raise ArtifactFormatError(f"the metric list is for {available.chip}, not {chip}")
    return counter_availability(chip, ALL_SPECS if flop_counters else CATALOG,
                                offered_by(chip, available, ncu_version=ncu_version))


def _suffix_valid(kind: str, suffix: str) -> bool:
    if kind == "Ratio":
        return suffix in _RATIO_SUFFIXES
    if kind in ("Counter", "Throughput"):
        rollup, _, submetric = suffix.partition(".")
        return rollup in _ROLLUPS and (not submetric or submetric in _COUNTER_SUBMETRICS)
    return True  # a type this module does not know: the base name is evidence enough
