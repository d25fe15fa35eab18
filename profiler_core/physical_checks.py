"""Counters a profile may not hold because no GPU could have measured them.

``read_profile`` checks every kernel's DRAM traffic against the chip it ran on: bytes read plus
written in the kernel's duration may not exceed the chip's DRAM bandwidth by more than
:data:`HEADROOM` (profiler_core/metrics/peaks.py; a GPU the table does not know is held to the
fastest one it does). The headroom covers what honest captures do: ncu measures bytes with the
caches flushed, the timeline measures time with them warm (H200's 50 MB L2 serves repeat reads
at several times DRAM speed), and short kernels round their duration down; the shipped H200
captures reach 1.34x (tv_resnet18), well inside it. A profile past it
was edited or damaged, and is refused with the first such kernel named::

    kernels[7] (id 7): 4.1e+18 DRAM bytes in 8032 ns is 5.1e+20 B/s, more than 10x the H200 SXM's
    DRAM bandwidth (4.8e+12 B/s): a damaged or edited counter

The checks work on arrays, so the JSON form (a list of models) and the columnar form (a
KernelTable) share them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from profiler_core.metrics.peaks import PEAKS, peaks_for_gpu

DRAM_FIELDS = ("dram_bytes_read", "dram_bytes_written")
HEADROOM = 10.0  # times the published DRAM bandwidth
MIN_DURATION_NS = 1000  # shorter kernels are held to the bytes the chip moves in 1 us


def dram_limit(gpu_name: str | None) -> tuple[float, str]:
    """(bytes per second no kernel can reach on this GPU, the chip's name for messages)."""
    peaks = peaks_for_gpu(gpu_name)
    if peaks is not None:
        return peaks.dram_bytes_per_s * HEADROOM, peaks.name
    fastest = max(PEAKS, key=lambda p: p.dram_bytes_per_s)
    return fastest.dram_bytes_per_s * HEADROOM, f"fastest known GPU ({fastest.name})"


def dram_problem(dram_bytes: np.ndarray, duration_ns: np.ndarray, gpu_name: str | None) -> str | None:
    """The first kernel whose DRAM bytes (NaN: not measured) its duration cannot carry, in words; None if none."""
    if not len(dram_bytes):
        return None
    limit, chip = dram_limit(gpu_name)
    seconds = np.maximum(duration_ns.astype(np.float64), MIN_DURATION_NS) * 1e-9
    with np.errstate(invalid="ignore"):
        over = np.flatnonzero(dram_bytes > limit * seconds)  # NaN compares False
    if not over.size:
        return None
    j = int(over[0])
    rate = dram_bytes[j] / seconds[j]
    return (f"kernels[{j}] (id {j}): {dram_bytes[j]:.3g} DRAM bytes in {int(duration_ns[j])} ns is {rate:.3g} B/s, "
            f"more than {HEADROOM:g}x the {chip}'s DRAM bandwidth ({limit / HEADROOM:.3g} B/s): a damaged or "
            "edited counter")


def dram_bytes_of(counters: list[dict[str, float | None]]) -> np.ndarray:
    """Bytes read plus written per kernel from each kernel's counters (NaN where neither was measured)."""
    out = np.full(len(counters), np.nan)
    for j, c in enumerate(counters):
        values = [c.get(f) for f in DRAM_FIELDS]
        known = [v for v in values if v is not None]
        if known:
            out[j] = float(sum(known))
    return out


def dram_bytes_columns(fields: tuple[str, ...], column: Callable[[int], np.ndarray], rows: np.ndarray) -> np.ndarray:
    """Bytes read plus written per kernel from a KernelTable's counter columns (NaN where not measured);
    ``column(c)``: counter ``c`` of every counter row (``KernelTable.counter_column``)."""
    cols = [column(fields.index(f)) for f in DRAM_FIELDS if f in fields]
    if not cols or not len(cols[0]):
        return np.full(len(rows), np.nan)
    values = np.stack(cols, axis=1)
    per_row = np.nansum(values, axis=1)
    per_row[np.all(np.isnan(values), axis=1)] = np.nan
    return np.where(rows >= 0, per_row[np.clip(rows, 0, None)], np.nan)
