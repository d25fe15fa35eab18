"""The attributed timeline as a Chrome trace (opens in ui.perfetto.dev and chrome://tracing).

One process per GPU, one thread (track) per stream. Each kernel is a complete event (``ph: X``)
named by its operator (the kernel name when unattributed), with the tier, confidence and key
counters in ``args``. Operators are enclosing slices on the same track: one slice per run of
the operator's consecutive kernels on that stream, so slices always nest (an operator whose
kernels interleave with another's gets one slice per run, labelled "part i/n").
Timestamps are microseconds from the first kernel, with nanosecond precision.

    trace = export_perfetto(profile)
    json.dumps(trace)          # {"traceEvents": [...], "displayTimeUnit": "ns", ...}
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from profiler_core.analysis.profile_view import ProfileView
from profiler_core.metrics.catalog import HEADLINE_COUNTERS
from profiler_core.schema import Kernel, Operator, Profile

_ARG_COUNTERS = (*HEADLINE_COUNTERS, "registers_per_thread", "local_memory_wavefronts")


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


def export_perfetto(profile: Profile) -> dict[str, Any]:
    """A Chrome trace dict of the attributed timeline (see the module docstring)."""
    view = ProfileView(profile)
    kernels = sorted(profile.kernels, key=lambda k: (k.device, k.stream, k.start_ns))
    t0 = min((k.start_ns for k in kernels), default=0)
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
    for op in profile.operators:
        for event in _operator_events(view, op, position, t0):
            slices.append(((event["pid"], event["tid"], event["ts"], -event["dur"], 0), event))
    for k in kernels:
        event = _kernel_event(view, k, t0)
        slices.append(((event["pid"], event["tid"], event["ts"], -event["dur"], 1), event))
    slices.sort(key=lambda item: item[0])
    return {
        "traceEvents": meta + [event for _, event in slices],
        "displayTimeUnit": "ns",
        "otherData": {"producer": "operator-profiler", "workload": profile.capture.workload,
                      "gpu": profile.capture.gpu_name, "chip": profile.capture.chip,
                      "kernels": len(profile.kernels), "operators": len(profile.operators)},
    }
