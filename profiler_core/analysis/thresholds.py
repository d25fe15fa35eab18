"""Every number a diagnosis or a comparison decides on, in one table.

``Thresholds`` is a frozen dataclass: change a value with ``dataclasses.replace`` (or the
``--threshold NAME=VALUE`` CLI option), never by mutation. Each field's ``doc`` metadata is
the one place its meaning is written down; docs/diagnose.md lists them all and a test keeps
the two in step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

from profiler_core.errors import ProfilerError


def _t(default: float, doc: str) -> Any:
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The decision thresholds of diagnose and compare (percentages are 0-100)."""

    # -- reporting
    min_finding_share_pct: float = _t(
        1.0, "A finding whose operators hold less than this share of profiled kernel time is dropped.")
    # -- Tensor Cores idle on FP32 GEMMs -> bf16_promotion / tf32
    tensor_core_idle_pct: float = _t(
        5.0, "A GEMM whose tensor_core_active_pct is at or below this runs off the Tensor Cores.")
    # -- parallel projections -> qkv_fusion
    low_occupancy_pct: float = _t(
        25.0, "Achieved occupancy below this on parallel projection GEMMs licenses horizontal fusion.")
    min_parallel_projections: int = _t(
        2, "Fewest GEMMs with one input signature, side by side, that count as parallel projections.")
    max_parallel_projections: int = _t(
        4, "More identical GEMMs in a row than this are sequential steps (a recurrence), not branches.")
    # -- manual attention -> sdpa
    attention_window_ops: int = _t(
        8, "Most operators between a score GEMM and its softmax, and between the softmax and the value GEMM.")
    # -- recurrent region -> rnn_reroute (structural)
    recurrent_min_gemms: int = _t(
        32, "Fewest same-shaped GEMMs that make an unrolled recurrent region.")
    recurrent_gemm_max_rows: int = _t(
        64, "A recurrent step GEMM has at most this many rows (M = batch); larger M is a batched layer.")
    tiny_gemm_us: float = _t(
        10.0, "Same-shaped GEMMs whose median time (microseconds) is at or below this are tiny.")
    split_k_min_epilogues: int = _t(
        16, "Fewest split-K reduce epilogue kernels that mark a GEMM loop split too thin.")
    rnn_opaque_min_pct: float = _t(
        10.0, "Share of kernel time in opaque or unattributed RNN kernels that makes an RNN finding.")
    # -- memory-bound elementwise chains -> elementwise_fusion
    memory_bound_dram_pct: float = _t(
        60.0, "An elementwise operator at or above this dram_throughput_pct is memory-bound ...")
    memory_bound_sm_max_pct: float = _t(
        40.0, "... provided its sm_throughput_pct stays below this.")
    elementwise_chain_min_ops: int = _t(
        2, "Fewest consecutive memory-bound elementwise operators that make a fusable chain.")
    # -- decode loop -> static_kv_cache (structural)
    decode_min_forwards: int = _t(
        3, "Fewest one-token decode forwards per measured step that make a generate() decode loop.")
    # -- launch-bound -> cuda_graphs
    launch_bound_kernel_us: float = _t(
        5.0, "A kernel shorter than this (microseconds) is too short to hide its launch.")
    launch_bound_min_kernel_pct: float = _t(
        50.0, "Share of all kernels (by count) that must be that short for a launch-bound finding.")
    launch_bound_min_kernels: int = _t(
        20, "Fewest kernels in a profile before launch overhead is judged at all.")
    launch_gap_min_pct: float = _t(
        45.0, "Share of the timeline (kernels plus the gaps between them) spent in such gaps that makes a step "
              "launch-bound even when its kernels are not tiny.")
    launch_gap_max_us: float = _t(
        100.0, "Idle gaps between kernels longer than this (microseconds) are host work, not launch cost.")
    launch_latency_idle_pct: float = _t(
        50.0, "An operator of many kernels whose GPU idles more than this share of its own span is limited "
              "by launch latency (the bottleneck label and the opaque RNN's finding say so).")
    # -- host-bound step -> cuda_graphs, fewer launches, larger batch
    host_bound_busy_pct: float = _t(
        25.0, "A measured step whose GPU is busy less than this share of it is host-bound.")
    # -- spills (note)
    spill_wavefronts_min: float = _t(
        0, "local_memory_wavefronts above this means registers spilled to local memory.")
    # -- attribution and counter coverage
    high_unattributed_pct: float = _t(
        10.0, "Unattributed share of kernel time at or above this is a structural finding.")
    counters_missing_pct: float = _t(
        20.0, "Share of kernel time without counters at or above this makes a blind-spot note.")
    # -- cast overhead -> freezing
    cast_overhead_pct: float = _t(
        5.0, "Share of kernel time in dtype-cast kernels inside a compiled graph that licenses freezing.")
    # -- convolution networks -> conv_bn_folding, channels_last, bf16_promotion
    conv_tensor_core_low_pct: float = _t(
        25.0, "A convolution whose tensor_core_active_pct is at or below this leaves the Tensor Cores mostly idle.")
    layout_transpose_min_pct: float = _t(
        1.0, "Share of kernel time in layout-transposition kernels (nchwToNhwc) that licenses channels_last.")
    # -- eager models and optimizer steps -> inductor_compile, fused_optimizer
    small_kernel_us: float = _t(
        20.0, "A kernel at or below this (microseconds) is small: its launch costs about as much as its work.")
    eager_elementwise_min_ops: int = _t(
        20, "Fewest small eager elementwise operators that license compiling the model.")
    optimizer_min_kernels: int = _t(
        20, "Fewest small kernels under the optimizer's step, per iteration, that license a fused optimizer.")
    # -- compare
    workload_shape_overlap_min: float = _t(
        0.3, "Two profiles sharing fewer of their operators' input shapes than this (over the smaller set) "
             "measure different workloads.")
    clock_tolerance_pct: float = _t(
        2.0, "Two captures whose median SM clocks differ by more than this are not comparable.")
    unchanged_tolerance_pct: float = _t(
        1.0, "A total-time change within this percentage is reported as unchanged.")
    counter_same_abs: float = _t(
        0.5, "A percentage counter (*_pct, *_rate) within this many points of its baseline is unchanged ...")
    counter_same_rel_pct: float = _t(
        2.0, "... and any counter within this percentage of its baseline value does too.")

    def as_dict(self) -> dict[str, float]:
        """Field name -> value."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


DEFAULT_THRESHOLDS = Thresholds()


def threshold_docs() -> dict[str, str]:
    """Field name -> its documentation line."""
    return {f.name: f.metadata["doc"] for f in fields(Thresholds)}


def thresholds_with(overrides: dict[str, float], base: Thresholds = DEFAULT_THRESHOLDS) -> Thresholds:
    """``base`` with some values replaced; an unknown name raises ProfilerError listing the known ones."""
    known = threshold_docs()
    unknown = sorted(set(overrides) - set(known))
    if unknown:
        raise ProfilerError(
            f"unknown threshold {', '.join(unknown)}; known thresholds: {', '.join(sorted(known))}"
        )
    # int or float per field, checked against the field's declared type below
    typed: dict[str, Any] = {}
    for f in fields(Thresholds):
        if f.name in overrides:
            value = overrides[f.name]
            if not math.isfinite(value) or value < 0:
                raise ProfilerError(f"threshold {f.name}={value} cannot be: thresholds are finite and not "
                                    f"negative (default {getattr(base, f.name)})")
            if f.name.endswith("_pct") and value > 100:
                raise ProfilerError(f"threshold {f.name}={value} is a percentage; give 0 to 100")
            if f.type in ("int", int):
                if not float(value).is_integer():
                    raise ProfilerError(f"threshold {f.name} counts things; give a whole number, not {value}")
                value = int(value)
            typed[f.name] = value
    return replace(base, **typed)


def parse_threshold_overrides(items: list[str]) -> dict[str, float]:
    """``["low_occupancy_pct=30"]`` -> ``{"low_occupancy_pct": 30.0}``; a malformed item raises."""
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            if not sep:
                raise ValueError
            out[name.strip()] = float(value)
        except ValueError as err:
            raise ProfilerError(
                f"threshold override {item!r} is not NAME=NUMBER (e.g. low_occupancy_pct=30)"
            ) from err
    return out
