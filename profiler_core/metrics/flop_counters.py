"""Measured floating-point work: FLOPs per precision from the FLOP counters of a kernel or operator.

Non-tensor work is counted from SASS thread instructions, as Nsight Compute's own roofline
sections do (an FMA is a multiply and an add)::

    fp32 = 2 * inst_ffma + inst_fadd + inst_fmul     (likewise fp16 from h*, fp64 from d*)

Tensor-core work is the tensor-path op counters, one math op per FLOP (a GEMM of M x N x K
counts 2MNK). A precision whose counters were not all measured is left out, never guessed;
``complete`` says whether every counter of the breakdown was there.

    measured_flops({"inst_ffma": 10, "inst_fadd": 2, "inst_fmul": 0, "tensor_ops_bf16": 4096, ...})
    -> MeasuredFlops(by_precision={"fp32": 22.0, "bf16": 4096.0}, ...)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# precision -> (FMA, add, multiply) instruction fields; FLOPs = 2*FMA + add + mul
_SCALAR: dict[str, tuple[str, str, str]] = {
    "fp32": ("inst_ffma", "inst_fadd", "inst_fmul"),
    "fp16": ("inst_hfma", "inst_hadd", "inst_hmul"),
    "fp64": ("inst_dfma", "inst_dadd", "inst_dmul"),
}
# precision -> tensor-path op fields (summed; a chip lacking one leaves it null and it counts 0
# only when another spelling of the same precision was measured)
_TENSOR: dict[str, tuple[str, ...]] = {
    "fp16": ("tensor_ops_fp16", "tensor_ops_fp16_acc16"),
    "bf16": ("tensor_ops_bf16",),
    "tf32": ("tensor_ops_tf32",),
    "fp64": ("tensor_ops_fp64",),
    "fp8": ("tensor_ops_fp8", "tensor_ops_fp8_acc16"),
}
# every counter measured_flops reads
MEASURED_FLOP_FIELDS: tuple[str, ...] = (*(f for fs in _SCALAR.values() for f in fs),
                                *(f for fs in _TENSOR.values() for f in fs))
# The roof a precision's work runs against: tensor-core work on the tensor roofs, the rest on the
# CUDA-core ones (names as in metrics/peaks.py).
TENSOR_ROOF = {"fp16": "fp16_tensor", "bf16": "bf16_tensor", "tf32": "tf32_tensor", "fp64": "fp64_tensor",
               "fp8": "fp8_tensor"}
SCALAR_ROOF = {"fp32": "fp32", "fp16": "fp16", "fp64": "fp64"}


@dataclass(frozen=True)
class MeasuredFlops:
    """FLOPs counted by ncu, split by the roof they run against (``fp32``, ``bf16_tensor`` ...)."""

    by_roof: dict[str, float] = field(default_factory=dict)
    complete: bool = False  # every FLOP counter was measured (none null)

    @property
    def total(self) -> float:
        return sum(self.by_roof.values())

    @property
    def tensor(self) -> float:
        return sum(v for k, v in self.by_roof.items() if k.endswith("_tensor"))

    @property
    def dominant_roof(self) -> str | None:
        """The roof that carries most of the work (None when nothing was counted)."""
        nonzero = {k: v for k, v in self.by_roof.items() if v > 0}
        return max(nonzero, key=nonzero.__getitem__) if nonzero else None


def measured_flops(counters: Mapping[str, float | None]) -> MeasuredFlops | None:
    """FLOPs by roof from one kernel's (or an operator's summed) counters; None when none was measured."""
    by_roof: dict[str, float] = {}
    complete = True
    seen = False
    for precision, (fma, add, mul) in _SCALAR.items():
        values = [counters.get(f) for f in (fma, add, mul)]
        if any(v is None for v in values):
            complete = False
            continue
        seen = True
        flops = 2.0 * values[0] + values[1] + values[2]  # type: ignore[operator]
        if flops:
            by_roof[SCALAR_ROOF[precision]] = flops
    for precision, fields in _TENSOR.items():
        values = [counters.get(f) for f in fields]
        present = [v for v in values if v is not None]
        if not present:
            continue  # not measured, or the chip has no such path (the availability list says which)
        seen = True
        flops = float(sum(present))
        if flops:
            by_roof[TENSOR_ROOF[precision]] = flops
    if not seen:
        return None
    return MeasuredFlops(by_roof=by_roof, complete=complete)
