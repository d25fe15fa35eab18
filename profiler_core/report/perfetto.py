"""The attributed timeline as a Chrome trace (opens in ui.perfetto.dev and chrome://tracing).

One process per GPU, one thread (track) per stream. Each kernel is a complete event (``ph: X``)
named by its operator (the kernel name when unattributed), with the tier, confidence and key
counters in ``args``. Operators are enclosing slices on the same track: one slice per run of
the operator's consecutive kernels on that stream, so slices always nest (an operator whose
kernels interleave with another's gets one slice per run, labelled "part i/n").
Timestamps are microseconds from the first kernel, with nanosecond precision.

Each stream also gets counter tracks (achieved occupancy, DRAM throughput, Tensor Core
activity: a kernel's measured value while it runs, 0 between kernels), so the gaps between
kernels show as drops to zero. Given the host side of the same timeline
(:mod:`profiler_core.report.host_timeline`), a "Host" process holds one track per CPU thread
(operators, annotations or NVTX ranges, and the CUDA API calls inside them) and every launch
is a flow arrow from its ``cudaLaunchKernel`` to its kernel: a launch-bound step shows as
short kernels whose arrows come late.

    trace = export_perfetto(profile, host=read_host_timeline(run_dir, profile.capture.timeline_source))
    json.dumps(trace)          # {"traceEvents": [...], "displayTimeUnit": "ns", ...}
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from profiler_core.analysis.profile_view import ProfileView
from profiler_core.metrics.catalog import HEADLINE_COUNTERS
from profiler_core.report.host_timeline import HostTimeline
from profiler_core.schema import Kernel, Operator, Profile

_ARG_COUNTERS = (*HEADLINE_COUNTERS, "registers_per_thread", "local_memory_wavefronts")
# counter tracks per stream: the profile field and the track's label
COUNTER_TRACKS = (("achieved_occupancy_pct", "occupancy %"), ("dram_throughput_pct", "DRAM throughput %"),
                  ("tensor_core_active_pct", "Tensor Core active %"))
HOST_PID = 0x7FFF  # the host process (GPU processes are device + 1)


def _us(ns: int) -> float:
    return round(ns / 1000.0, 3)


def _pid(device: int) -> int:
    return device + 1  # pid 0 is special in some viewers


def _kernel_event(view: ProfileView, kernel: Kernel, t0: int) -> dict[str, Any]:
    op = view.kernel_operator.get(kernel.id)
    args: dict[str, Any] = {
        "kernel": kernel.name,
        "operator": op.key if op else None,
        "op_class": view.kernel_class(kernel).value,
        "tier": kernel.attribution.tier.value,
        "confidence": kernel.attribution.confidence.value,
        "counter_source": kernel.counter_source.value,
        "duration_ns": kernel.duration_ns,
    }
    for field in _ARG_COUNTERS:
        value = kernel.counters.get(field)
        if value is not None:
            args[field] = round(float(value), 3)
    if kernel.grid:
        args["grid"] = list(kernel.grid)
    if kernel.block:
        args["block"] = list(kernel.block)
    if kernel.fused_with:
        args["fused_with"] = list(kernel.fused_with)
    if kernel.attribution.reason:
        args["reason"] = kernel.attribution.reason
    return {"ph": "X", "cat": f"kernel,{kernel.attribution.tier.value}",
            "name": op.key if op else (kernel.short_name or kernel.name),
            "pid": _pid(kernel.device), "tid": kernel.stream,
            "ts": _us(kernel.start_ns - t0), "dur": _us(kernel.duration_ns), "args": args}


def _operator_events(view: ProfileView, op: Operator, position: dict[int, int],
                     t0: int) -> list[dict[str, Any]]:
    """One slice per run of the operator's consecutive kernels on each stream."""
    runs: list[list[Kernel]] = []
    per_track: dict[tuple[int, int], list[Kernel]] = defaultdict(list)
    for k in view.kernels_of(op):
        per_track[(k.device, k.stream)].append(k)
    for ks in per_track.values():  # kernels_of is in start order, so each track's list is too
        run = [ks[0]]
        for k in ks[1:]:
            if position[k.id] == position[run[-1].id] + 1:
                run.append(k)
            else:
                runs.append(run)
                run = [k]
        runs.append(run)
    events = []
    for i, run in enumerate(sorted(runs, key=lambda r: r[0].start_ns)):
        start, end = run[0].start_ns, max(k.end_ns for k in run)
        name = op.key if len(runs) == 1 else f"{op.key} (part {i + 1}/{len(runs)})"
        events.append({
            "ph": "X", "cat": "operator", "name": name, "pid": _pid(run[0].device), "tid": run[0].stream,
            "ts": _us(start - t0), "dur": _us(end - start),
            "args": {"operator": op.name, "key": op.key, "op_class": view.op_class(op).value,
                     "execution_context": op.execution_context.value, "confidence": op.confidence.value,
                     "kernels": len(run), "fused_with": list(op.fused_with),
                     "input_shapes": op.input_shapes},
        })
    return events


def _counter_events(kernels: list[Kernel], t0: int) -> list[dict[str, Any]]:
    """Per stream, one counter event at each kernel's start (its values) and one at its end (zeros)."""
    events: list[dict[str, Any]] = []
    by_track: dict[tuple[int, int], list[Kernel]] = defaultdict(list)
    for k in kernels:
        if k.kind == "kernel":
            by_track[(k.device, k.stream)].append(k)
    for (device, stream), ks in sorted(by_track.items()):
        name = f"stream {stream} counters"
        for i, k in enumerate(ks):
            values = {label: round(float(v), 3) for field, label in COUNTER_TRACKS
                      if (v := k.counters.get(field)) is not None}
            if not values:
                continue
            events.append({"ph": "C", "name": name, "pid": _pid(device), "ts": _us(k.start_ns - t0), "args": values})
            nxt = ks[i + 1].start_ns if i + 1 < len(ks) else None
            if nxt is None or nxt > k.end_ns:  # back to zero in the gap before the next kernel
                events.append({"ph": "C", "name": name, "pid": _pid(device), "ts": _us(k.end_ns - t0),
                               "args": dict.fromkeys(values, 0)})
    return events


def _host_events(host: HostTimeline, kernels: list[Kernel], t0: int, window: tuple[int, int]
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Metadata, slices and launch flows of the host side, clipped to the calls that overlap ``window``."""
    lo, hi = window
    slices = sorted((s for s in host.slices if s.end_ns >= lo and s.start_ns <= hi),
                    key=lambda s: (s.tid, s.start_ns, -(s.end_ns - s.start_ns)))
    meta: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": HOST_PID, "tid": 0,
         "args": {"name": f"Host ({host.source}: operators and CUDA API calls)"}},
        {"ph": "M", "name": "process_sort_index", "pid": HOST_PID, "tid": 0, "args": {"sort_index": -1}}]
    for tid in sorted({s.tid for s in slices}):
        meta.append({"ph": "M", "name": "thread_name", "pid": HOST_PID, "tid": tid,
                     "args": {"name": f"thread {tid}"}})
    events: list[dict[str, Any]] = []
    open_end: dict[int, list[int]] = defaultdict(list)  # per thread: ends of the slices open (to keep nesting)
    for s in slices:
        stack = open_end[s.tid]
        while stack and stack[-1] <= s.start_ns:
            stack.pop()
        end = min(s.end_ns, stack[-1]) if stack else s.end_ns  # clip a call that outlives its parent
        stack.append(end)
        events.append({"ph": "X", "cat": s.category, "name": s.name, "pid": HOST_PID, "tid": s.tid,
                       "ts": _us(s.start_ns - t0), "dur": _us(end - s.start_ns)})
    flows: list[dict[str, Any]] = []
    for k in kernels:
        launch = host.launches.get((k.device, k.stream, k.start_ns))
        if launch is None:
            continue
        tid, at = launch
        flows.append({"ph": "s", "cat": "launch", "name": "launch", "id": k.id, "pid": HOST_PID, "tid": tid,
                      "ts": _us(at - t0)})
        flows.append({"ph": "f", "bp": "e", "cat": "launch", "name": "launch", "id": k.id, "pid": _pid(k.device),
                      "tid": k.stream, "ts": _us(k.start_ns - t0)})
    return meta, events, flows


def export_perfetto(profile: Profile, *, host: HostTimeline | None = None) -> dict[str, Any]:
    """A Chrome trace dict of the attributed timeline (see the module docstring)."""
    view = ProfileView.of(profile)
    kernels = sorted(profile.kernels, key=lambda k: (k.device, k.stream, k.start_ns))
    t0 = min((k.start_ns for k in kernels), default=0)
    if host is not None:  # the first launch comes before the first kernel: time starts there
        launched = [at for k in kernels if (launch := host.launches.get((k.device, k.stream, k.start_ns)))
                    for at in (launch[1],)]
        window = (min([t0, *launched]), max((k.end_ns for k in kernels), default=0))
        t0 = min([t0, *launched, *(h.start_ns for h in host.slices if h.end_ns >= window[0]
                                   and h.start_ns <= window[1])])  # a call open at the first launch
    else:
        window = (t0, t0)
    by_track: dict[tuple[int, int], list[Kernel]] = defaultdict(list)
    for k in kernels:
        by_track[(k.device, k.stream)].append(k)
    position = {k.id: i for ks in by_track.values() for i, k in enumerate(ks)}
    meta: list[dict[str, Any]] = []
    gpu = profile.capture.gpu_name or "GPU"
    for device in sorted({d for d, _ in by_track}):
        meta.append({"ph": "M", "name": "process_name", "pid": _pid(device), "tid": 0,
                     "args": {"name": f"GPU {device} ({gpu})"}})
        meta.append({"ph": "M", "name": "process_sort_index", "pid": _pid(device), "tid": 0,
                     "args": {"sort_index": device}})
    for device, stream in sorted(by_track):
        meta.append({"ph": "M", "name": "thread_name", "pid": _pid(device), "tid": stream,
                     "args": {"name": f"stream {stream}"}})
        meta.append({"ph": "M", "name": "thread_sort_index", "pid": _pid(device), "tid": stream,
                     "args": {"sort_index": stream}})
    slices: list[tuple[tuple, dict[str, Any]]] = []
    for op in view.operators:  # the view's models (a table's built a block at a time)
        for event in _operator_events(view, op, position, t0):
            slices.append(((event["pid"], event["tid"], event["ts"], -event["dur"], 0), event))
    for k in kernels:
        event = _kernel_event(view, k, t0)
        slices.append(((event["pid"], event["tid"], event["ts"], -event["dur"], 1), event))
    slices.sort(key=lambda item: item[0])
    host_meta: list[dict[str, Any]] = []
    host_slices: list[dict[str, Any]] = []
    flows: list[dict[str, Any]] = []
    if host is not None and kernels:
        host_meta, host_slices, flows = _host_events(host, kernels, t0, window)
    return {
        "traceEvents": meta + host_meta + host_slices + [event for _, event in slices]
        + _counter_events(kernels, t0) + flows,
        "displayTimeUnit": "ns",
        "otherData": {"producer": "operator-profiler", "workload": profile.capture.workload,
                      "gpu": profile.capture.gpu_name, "chip": profile.capture.chip,
                      "kernels": len(profile.kernels), "operators": len(profile.operators),
                      "host": host.source if host is not None else None, "launch_flows": len(flows) // 2},
    }
