"""Roofline-capped gain bounds recomputed from a profile, the chip's roofs and the roofline's FLOPs and bytes."""

from __future__ import annotations

from profiler_core.analysis.roofline import roofline
from profiler_core.metrics.peaks import peaks_for_gpu
from profiler_core.schema import Profile
from profiler_core.transformations import Transformation

# A precision change's bound is capped by the target precision's roofline: the promoted GEMM still
# takes max(FLOPs / target peak, DRAM bytes x the byte ratio / bandwidth) (docs/roofline.md).
TARGET_ROOF = {Transformation.TF32: ("tf32_tensor", 1.0), Transformation.BF16_PROMOTION: ("bf16_tensor", 0.5)}


def _op_kernel_ns(prof: Profile, key: str) -> int:
    op = next(o for o in prof.operators if o.key == key)
    return sum(prof.kernels[i].duration_ns for i in op.kernel_ids)


def precision_bound_ns(prof: Profile, keys: list[str], roof: str, byte_ratio: float) -> float:
    chip = peaks_for_gpu(prof.capture.gpu_name)
    assert chip is not None
    peak, bandwidth = chip.flops_per_s(roof, measured=True), chip.bandwidth(measured=True)
    assert peak and bandwidth
    rows = roofline(prof, measured_roofs=True).by_key()
    bound = 0.0
    for key in keys:
        t_ns = _op_kernel_ns(prof, key)
        r = rows[key]
        if not r.flops or r.dram_bytes is None:
            bound += t_ns  # no FLOPs known: no floor, the whole time
            continue
        bound += max(0.0, t_ns - 1e9 * max(r.flops / peak, r.dram_bytes * byte_ratio / bandwidth))
    return bound


def headroom_ns(prof: Profile, keys: list[str]) -> int:
    """Time to the roof of the operators under 10% of it: t - max(compute floor, DRAM bytes / bandwidth)."""
    chip = peaks_for_gpu(prof.capture.gpu_name)
    assert chip is not None
    rows = roofline(prof, measured_roofs=True).by_key()
    far = set()
    headroom = 0.0
    for o in prof.operators:
        r = rows.get(o.key)
        if r is None or not r.dram_bytes:
            continue
        compute_s = sum(flops / (chip.flops_per_s(name, measured=True) or float("inf"))
                        for name, flops in r.flops_by_roof.items())
        floor_ns = 1e9 * max(compute_s, r.dram_bytes / chip.bandwidth(measured=True))
        t_ns = _op_kernel_ns(prof, o.key)
        if floor_ns < 0.10 * t_ns:
            far.add(o.key)
            headroom += t_ns - floor_ns
    assert set(keys) == far
    return int(headroom)
