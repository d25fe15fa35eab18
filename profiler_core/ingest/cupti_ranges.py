"""Kernels and counters of a trace taken with torch.profiler's CUPTI range profiler.

``torch.profiler.profile(experimental_config=torch.profiler._ExperimentalConfig(
profiler_metrics=[...], profiler_measure_per_kernel=True))`` replaces Kineto's ``kernel``
events by one ``cuda_profiler_range`` event per kernel, its counters in ``args``::

    {"ph": "X", "cat": "cuda_profiler_range", "name": "ampere_sgemm_32x32_sliced1x4_tn",
     "pid": 0, "tid": 0, "ts": 1679055454045054, "dur": 121431,
     "args": {"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 38731776, ...}}
    -> TimelineKernel(name="ampere_sgemm_...", device=0, stream=0, correlation_id=<nth launch's>)
       CounterRow(name="ampere_sgemm_...", metrics={"smsp__sass_..._ffma_pred_on.sum": 38731776.0})

The events carry no correlation id: like HolisticTraceAnalysis, the n-th range is the n-th
kernel launch call of the trace (the range profiler serialises kernels), and only when the
two counts agree. Their ``ts``/``dur`` are Kineto's even split of the profiled span, not
measured times; ``gpu__time_duration.sum``, when it was among the metrics, replaces ``dur``.
Metric names are CUPTI's (the same as Nsight Compute's), so the counter catalog maps the
ones it knows; the report keeps every other one raw in its rows. A ``.sum`` over the whole
GPU is one number whichever unit it is rolled up from, so ``smsp__X.sum`` (HolisticTraceAnalysis
asks for this spelling) is read as the catalog's ``sm__X.sum``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profiler_core.metrics.catalog import field_for_ncu_name
from profiler_core.records import CounterRow, NcuReport, RuntimeCall, TimelineKernel

CATEGORY = "cuda_profiler_range"
SOURCE = "cupti-range"
_DURATION_METRIC = "gpu__time_duration.sum"
_LAUNCH_CALLS = frozenset({"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                           "cudaLaunchCooperativeKernel"})
_NUMBER = frozenset({int, float})


@dataclass(frozen=True, slots=True)
class ProfilerRange:
    """One ``cuda_profiler_range`` event: a kernel as the range profiler measured it."""

    name: str
    start_ns: int
    end_ns: int
    device: int
    metrics: dict[str, float]


def range_event(event: dict[str, Any], base_ns: int, us_to_ns: Any) -> ProfilerRange:
    """Parse one event (TypeError / KeyError on a malformed one, as the other event readers)."""
    name, pid, args = event["name"], event["pid"], event.get("args") or {}
    if type(name) is not str:
        raise TypeError(f"expected a string name, got {name!r}")
    if type(pid) is not int:
        raise TypeError(f"expected an integer device (pid), got {pid!r}")
    if not isinstance(args, dict):
        raise AttributeError("args")
    metrics = {}
    for key, value in args.items():
        if type(value) not in _NUMBER:
            raise TypeError(f"counter {key!r} is {value!r}, not a number")
        metrics[_catalog_name(key)] = float(value)
    start_ns = base_ns + us_to_ns(event["ts"])
    return ProfilerRange(name, start_ns, start_ns + us_to_ns(event["dur"]), pid, metrics)


def _catalog_name(name: str) -> str:
    """``smsp__X.sum`` as ``sm__X.sum`` where only the latter is in the catalog; any other name as is."""
    if name.startswith("smsp__") and name.endswith(".sum") and field_for_ncu_name(name) is None:
        sm = "sm__" + name[len("smsp__"):]
        if field_for_ncu_name(sm) is not None:
            return sm
    return name


@dataclass(frozen=True)
class RangeTimeline:
    """The kernels the ranges stand for, their counters as a report, and what to say about them."""

    kernels: list[TimelineKernel]
    counters: NcuReport
    notes: tuple[str, ...]


def ranges_as_timeline(path: Path, ranges: Sequence[ProfilerRange],
                       runtime_calls: Sequence[RuntimeCall]) -> RangeTimeline:
    """One kernel and one counter row per range, in range order, tied to the n-th launch call."""
    ordered = sorted(ranges, key=lambda r: r.start_ns)
    launches = sorted((c for c in runtime_calls if c.name in _LAUNCH_CALLS), key=lambda c: c.start_ns)
    tied = len(launches) == len(ordered)
    notes = []
    if not tied:
        notes.append(f"{len(ordered)} profiler ranges but {len(launches)} kernel launch calls: ranges are not "
                     "tied to operators")
    timed = all(_DURATION_METRIC in r.metrics for r in ordered)
    if not timed:
        notes.append("kernel times are Kineto's even split of the profiled span, not measured: add "
                     f"'{_DURATION_METRIC}' to profiler_metrics for real durations")
    kernels, rows = [], []
    for i, r in enumerate(ordered):
        end = r.start_ns + round(r.metrics[_DURATION_METRIC]) if timed else r.end_ns
        kernels.append(TimelineKernel(name=r.name, start_ns=r.start_ns, end_ns=end, stream=0, device=r.device,
                                      correlation_id=launches[i].correlation_id if tied else None))
        rows.append(CounterRow(ncu_id=i, name=r.name, grid=None, block=None, stream=None, device=r.device,
                               metrics=dict(r.metrics)))
    returned = frozenset(name for r in ordered for name in r.metrics)
    report = NcuReport(path=path, rows=rows, metrics_returned=returned, source=SOURCE)
    return RangeTimeline(kernels, report, tuple(notes))
