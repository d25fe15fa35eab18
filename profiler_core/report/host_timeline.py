"""The host side of a profile's timeline, for the Perfetto export: threads' calls and kernel launches.

The profile keeps GPU activities only. The run that gave its durations also recorded the host:
Kineto's ``cpu_op`` and CUDA runtime events, or nsys's NVTX ranges and CUDA API calls. Both sit on
the clock of the profile's own timeline (one process), so a launch can be drawn as a flow from
its ``cudaLaunchKernel`` to its kernel. The other timeline source of a run is another process on
another clock and is never mixed in.

    host = read_host_timeline(run_dir, profile.capture.timeline_source)
    export_perfetto(profile, host=host)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from profiler_core.records import KinetoTrace, NsysTimeline, RuntimeCall, TimelineKernel


@dataclass(frozen=True)
class HostSlice:
    """One host call on one thread: an operator, an annotation, an NVTX range or a CUDA API call."""

    tid: int
    name: str
    start_ns: int
    end_ns: int
    category: str  # "cpu_op", "user_annotation", "nvtx", "cuda_runtime"


@dataclass(frozen=True)
class HostTimeline:
    """Host slices and the launch behind each GPU activity of the same timeline."""

    source: str  # "kineto" or "nsys"
    slices: list[HostSlice] = field(default_factory=list)
    # (device, stream, start_ns) of a GPU activity -> (tid, start_ns) of the API call that launched it
    launches: dict[tuple[int, int, int], tuple[int, int]] = field(default_factory=dict)


def _launches(kernels: Sequence[TimelineKernel],
              calls: Sequence[RuntimeCall]) -> dict[tuple[int, int, int], tuple[int, int]]:
    by_corr = {c.correlation_id: c for c in calls if c.correlation_id is not None}
    out: dict[tuple[int, int, int], tuple[int, int]] = {}
    for k in kernels:
        call = by_corr.get(k.correlation_id) if k.correlation_id is not None else None
        if call is not None:
            out[(k.device, k.stream, k.start_ns)] = (call.tid, call.start_ns)
    return out


def host_from_kineto(trace: KinetoTrace) -> HostTimeline:
    """Kineto's host operators and annotations, its CUDA API calls, and each kernel's launch."""
    slices = [HostSlice(op.tid, op.name, op.start_ns, op.end_ns, op.category) for op in trace.cpu_ops
              if op.end_ns >= op.start_ns]
    slices += [HostSlice(c.tid, c.name, c.start_ns, c.end_ns, "cuda_runtime") for c in trace.runtime_calls
               if c.end_ns >= c.start_ns]
    return HostTimeline("kineto", slices, _launches(trace.kernels, trace.runtime_calls))


def host_from_nsys(timeline: NsysTimeline) -> HostTimeline:
    """nsys's NVTX ranges (one per operator under emit_nvtx), its CUDA API calls, and each activity's launch."""
    slices = [HostSlice(r.tid, r.text, r.start_ns, r.end_ns, "nvtx") for r in timeline.nvtx_ranges
              if r.end_ns >= r.start_ns]
    slices += [HostSlice(c.tid, c.name, c.start_ns, c.end_ns, "cuda_runtime") for c in timeline.runtime_calls
               if c.end_ns >= c.start_ns]
    return HostTimeline("nsys", slices, _launches(timeline.kernels, timeline.runtime_calls))


def read_host_timeline(run_dir: Path, timeline_source: str | None) -> HostTimeline | None:
    """The host side of ``run_dir``'s timeline source; None when the run keeps no such file."""
    from profiler_core.ingest import read_kineto, read_nsys
    from profiler_core.rundir import find_run_artifacts

    art = find_run_artifacts(run_dir)
    if timeline_source == "nsys" and art.nsys is not None:
        return host_from_nsys(read_nsys(art.nsys))
    if timeline_source in ("kineto", None) and art.kineto is not None:
        return host_from_kineto(read_kineto(art.kineto))
    return None
