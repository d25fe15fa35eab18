"""Records that cannot be measurements: refused by the readers before attribution believes them.

A reader checks that each value has the right type; these checks say whether the values,
together, can have come from a GPU. A kernel that ends before it starts, lasts no time or
hours, starts at 10^300 us, or appears twice in a trace; an ncu duration below zero; a byte
counter in ``%`` or moving more bytes than any memory can in the kernel's time: each is an
``ArtifactFormatError`` naming the file, the record and the fix::

    dram__bytes_read.sum = 4.1e18 byte in 8032 ns  -> more than 100 TB/s: a scaled or edited export
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profiler_core.errors import ArtifactFormatError
from profiler_core.records import CounterRow, TimelineKernel

if TYPE_CHECKING:
    import pyarrow as pa

MAX_KERNEL_NS = 10**13  # ~2.8 hours: longer than any capture window
MAX_CLOCK_NS = 2**63 - 1  # timestamps are int64 nanoseconds in every tool
# No memory level of any GPU moves 100 TB/s (H200: DRAM 4.8 TB/s, L1 ~33 TB/s across SMs);
# 10^5 bytes per nanosecond is a bound no real counter reaches.
MAX_BYTES_PER_NS = 1e5
DURATION_METRIC = "gpu__time_duration.sum"


def check_timeline_kernels(path: Path, kernels: Sequence[TimelineKernel], source: str, *,
                           clock_base_ns: int = 0) -> None:
    """Refuse GPU activities whose times cannot be, and a trace holding one activity twice.

    ``clock_base_ns``: the earliest time the source can record (Kineto's ``baseTimeNanoseconds``:
    its ``ts`` values are never negative).
    """
    seen: set[tuple[object, ...]] = set()
    for index, k in enumerate(kernels):
        what = f"{path}: {source} {k.kind} #{index} {k.name[:80]!r}"
        if not clock_base_ns <= k.start_ns <= MAX_CLOCK_NS or not clock_base_ns <= k.end_ns <= MAX_CLOCK_NS:
            raise ArtifactFormatError(f"{what} has timestamps {k.start_ns}..{k.end_ns} ns, outside any clock; "
                                      "the trace was edited or corrupted: capture it again")
        duration = k.end_ns - k.start_ns
        if duration < 0:
            raise ArtifactFormatError(f"{what} ends before it starts ({duration} ns); the trace was edited or "
                                      "corrupted: capture it again")
        if duration == 0 and k.kind == "kernel":
            raise ArtifactFormatError(f"{what} lasts 0 ns: no kernel runs in no time; the trace was edited or "
                                      "corrupted: capture it again")
        if duration > MAX_KERNEL_NS:
            raise ArtifactFormatError(f"{what} lasts {duration} ns (hours): not a measurement; the trace was "
                                      "edited or corrupted: capture it again")
        key = (k.name, k.start_ns, k.end_ns, k.stream, k.device, k.correlation_id)
        if key in seen:
            raise ArtifactFormatError(f"{what} appears twice (same start, end, stream and correlation id): "
                                      "the trace was merged or edited and its time would count double; "
                                      "capture it again")
        seen.add(key)


def check_kernel_table(path: Path, kernels: pa.Table, source: str, *, clock_base_ns: int = 0) -> None:
    """:func:`check_timeline_kernels` over the columns of a kernel table (``record_columns``); where a
    value looks wrong, it runs on the table's records (in table order) to name the first that is."""
    import numpy as np

    from profiler_core.ingest.arrow_columns import from_numpy, one_chunk, to_numpy
    from profiler_core.ingest.column_records import python_values, timeline_records

    start = to_numpy(kernels.column("start_ns"))
    end = to_numpy(kernels.column("end_ns"))
    # first, so that end - start cannot overflow
    suspect = bool((start < clock_base_ns).any() or (end < clock_base_ns).any())
    if not suspect:
        duration = end - start
        kind = one_chunk(kernels.column("kind"))
        labels = kind.dictionary.to_pylist()
        is_kernel = to_numpy(kind.indices) == (labels.index("kernel") if "kernel" in labels else -1)
        suspect = bool((duration < 0).any() or (duration > MAX_KERNEL_NS).any() or (is_kernel & (duration == 0)).any())
    if not suspect:
        # The same activity twice has one start twice: only runs of equal starts need their whole
        # keys compared.
        ordered = start.size < 2 or bool((start[1:] >= start[:-1]).all())
        order = None if ordered else np.argsort(start, kind="stable")
        by_start = start if order is None else start[order]
        tied = np.flatnonzero(by_start[1:] == by_start[:-1])
        if tied.size:
            rows = np.unique(np.concatenate([tied, tied + 1]))
            rows = rows if order is None else order[rows]
            key = kernels.select(["name", "start_ns", "end_ns", "stream", "device", "correlation_id"])
            key = key.take(from_numpy(rows))
            suspect = len(set(zip(*(python_values(column) for column in key.columns), strict=True))) != len(rows)
    if suspect:
        check_timeline_kernels(path, timeline_records(kernels), source, clock_base_ns=clock_base_ns)


def expected_unit(metric: str) -> str | None:
    """The base unit ncu uses for ``metric``, from its name; None where the name does not say."""
    name = metric.split("__", 1)[-1]
    if metric == DURATION_METRIC:
        return "ns"
    if ".pct" in name or name.endswith("_pct"):
        return "%"
    if "bytes" in name and "per_second" not in name and ".per_" not in name and ".pct" not in name:
        return "byte"
    return None


def check_counter_unit(metric: str, base_unit: str, origin: str) -> None:
    """Refuse a counter whose unit contradicts its name (``%`` or blank on a byte counter)."""
    want = expected_unit(metric)
    if want is None:
        return
    family = base_unit.split("/", 1)[0]
    if family != want:
        raise ArtifactFormatError(
            f"{origin}: metric {metric!r} is in {base_unit or 'no unit'!r}, but its name says {want!r}: the "
            "export was edited or its units are wrong; re-export with --print-units base")


def check_counter_rows(path: Path, rows: Sequence[CounterRow]) -> None:
    """Refuse ncu rows with a negative duration or byte count, or more bytes than the time allows."""
    byte_metrics: list[str] | None = None
    for row in rows:
        if byte_metrics is None:
            byte_metrics = [m for m in row.metrics if expected_unit(m) == "byte"]
        duration = row.metrics.get(DURATION_METRIC)
        where = f"{path}: launch {row.ncu_id} {row.name[:80]!r}"
        if duration is not None and duration < 0:
            raise ArtifactFormatError(f"{where}: {DURATION_METRIC} is {duration} ns, below zero; the export was "
                                      "edited or corrupted: re-export the report")
        for metric in byte_metrics:
            value = row.metrics.get(metric)
            if value is None:
                continue
            if value < 0:
                raise ArtifactFormatError(f"{where}: {metric} is {value} bytes, below zero; re-export the report")
            if duration is not None and value > MAX_BYTES_PER_NS * max(duration, 1.0):
                raise ArtifactFormatError(
                    f"{where}: {metric} = {value:.3g} bytes in {duration:.0f} ns is more than 100 TB/s, beyond any "
                    "GPU memory: the values were scaled or edited; re-export with --print-units base")


def check_launch_ids(path: Path, ids: Any, hint: str) -> None:
    """Refuse an ncu export whose launch IDs (sorted, unique; an int array) skip some: whole rows were cut out of it.

    ncu numbers the launches it profiles 0, 1, 2, ... in one report; a gap means rows are
    missing, and joining the rest by launch order would hand later launches other launches'
    counters (or let them "inherit" ones nobody measured).
    """
    import numpy as np

    arr = np.asarray(ids, dtype=np.int64)
    off = np.flatnonzero(arr != np.arange(len(arr), dtype=np.int64))  # sorted, unique: the first gap
    if not off.size:
        return
    index = int(off[0])
    expected, got = (int(arr[index - 1]) + 1 if index else 0), int(arr[index])
    missing = f"ID {expected}" if got - expected == 1 else f"IDs {expected}..{got - 1}"
    where = f"from ID {expected - 1}" if index else "at the start"
    raise ArtifactFormatError(
        f"{path}: launch IDs jump {where} to ID {got}: the rows of {got - expected} launch(es) ({missing}) "
        f"are missing, so the export was cut or edited; {hint}")
