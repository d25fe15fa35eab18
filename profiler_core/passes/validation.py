"""Numerical validation: the transformed model must give the baseline's outputs, within tolerance.

Both models run the same step on the same inputs; outputs may be tensors or anything holding
them (tuples, lists, dicts, named tuples, dataclasses, ``transformers`` ModelOutputs and Cache
objects: see leaves.py), compared leaf by leaf, by path (``past_key_values.layers[2].keys``).
Each tensor leaf must have the baseline's shape and dtype, and pass ``|candidate - baseline|
<= atol + rtol * |baseline|`` elementwise (NaN matches NaN, an infinity only the same
infinity). Integer and bool tensors, and plain-data leaves, must be equal. A leaf present on
one side only is a mismatch. A failure names the worst leaf first.

Tolerances are for *whole-model* outputs, so looser than per-operator defaults: errors grow
with depth. The tolerance of a leaf is the looser of its dtype's and the plan's compute
precision's (a float32 output computed through bf16 GEMMs is held to the bf16 tolerance):

    precision   rtol    atol    why
    float64     1e-7    1e-7
    float32     1e-4    1e-4    compiled code reorders reductions and fuses ops
    tf32        5e-3    5e-3    10-bit mantissa (2^-11 ~ 4.9e-4 per rounding), through depth
    float16     1e-2    1e-2    10-bit mantissa, narrow range
    bfloat16    5e-2    5e-2    8-bit mantissa (2^-9 ~ 2e-3 per rounding), through depth

The reported relative error divides by ``max(|baseline|, atol)``, so elements near zero do not
dominate it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from profiler_core.passes.leaves import Leaves, output_leaves, snapshot_leaves

PRECISIONS = ("float64", "float32", "tf32", "float16", "bfloat16")


class Tolerance(BaseModel):
    """Elementwise bound: |candidate - baseline| <= atol + rtol * |baseline|."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    rtol: float
    atol: float


DEFAULT_TOLERANCES: Mapping[str, Tolerance] = {
    "float64": Tolerance(rtol=1e-7, atol=1e-7),
    "float32": Tolerance(rtol=1e-4, atol=1e-4),
    "tf32": Tolerance(rtol=5e-3, atol=5e-3),
    "float16": Tolerance(rtol=1e-2, atol=1e-2),
    "bfloat16": Tolerance(rtol=5e-2, atol=5e-2),
}

_FLOAT_NAMES = {torch.float64: "float64", torch.float32: "float32", torch.float16: "float16",
                torch.bfloat16: "bfloat16", torch.complex128: "float64", torch.complex64: "float32"}


@dataclass(frozen=True)
class DtypePolicy:
    """Tolerances per precision, and the lowest precision the transformed model computes in."""

    compute_precision: str = "float32"
    tolerances: Mapping[str, Tolerance] = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))

    def tolerance_for(self, dtype: torch.dtype) -> Tolerance | None:
        """The tolerance for an output of ``dtype``; None means exact equality."""
        name = _FLOAT_NAMES.get(dtype)
        if name is None:
            return None
        own = self.tolerances[name]
        compute = self.tolerances.get(self.compute_precision, own)
        return Tolerance(rtol=max(own.rtol, compute.rtol), atol=max(own.atol, compute.atol))


class OutputComparison(BaseModel):
    """One output leaf compared: where it sits, what it is, how far apart, and the verdict."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str  # leaf path, e.g. "[0]", "['logits']" or "past_key_values.layers[2].keys"; "" for a bare tensor
    role: Literal["output", "gradient", "parameter"] = "output"  # a training step compares all three
    shape: list[int] | None = None
    dtype: str | None = None
    candidate_shape: list[int] | None = None
    candidate_dtype: str | None = None
    max_abs_err: float | None = None  # None: not compared numerically (or infinite: NaN on one side)
    max_rel_err: float | None = None
    mismatched: int = 0  # elements outside tolerance
    numel: int = 0
    tolerance: Tolerance | None = None  # None: compared for exact equality (or by the calibrated rule)
    passed: bool
    reason: str = ""
    # judged against the float64 reference (verdict.py): what kind of output, and the rule's numbers
    kind: str = "output"  # lm_logits, token_ids, router_logits, intermediate, output (output_kinds.py)
    rmse_candidate: float | None = None  # RMSE(candidate, fp64)
    rmse_baseline: float | None = None  # RMSE(baseline, fp64)
    rms_reference: float | None = None  # RMS(fp64): the scale the floor is relative to
    k: float | None = None
    threshold: float | None = None  # k * rmse_baseline + floor * rms_reference
    cosine: float | None = None  # cosine similarity of candidate and fp64 reference: the second opinion
    excess: float | None = None  # the measure over its threshold: above 1 fails (the worst leaf is the largest)
    metrics: dict[str, float] = Field(default_factory=dict)  # per-kind measures (top-1 agreement, KL, flips)


class ValidationResult(BaseModel):
    """The verdict over all outputs, with the worst errors and every leaf's comparison."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    passed: bool
    max_abs_err: float | None  # worst over the outputs compared numerically; None: none could be
    max_rel_err: float | None
    compute_precision: str
    outputs: list[OutputComparison]
    reason: str = ""
    worst: str | None = None  # path of the leaf furthest outside its tolerance (or furthest apart)
    notes: list[str] = Field(default_factory=list)  # what was compared, when that is not obvious
    reference: str = ""  # what the verdict was judged against: "float64 on cpu, TF32 off", or why none
    rule: str = ""  # the calibrated rule, as printed
    verdict: str = ""  # the one line a person reads: the rule, the worst output and its numbers
    metrics: dict[str, float] = Field(default_factory=dict)  # headline measures: next-token agreement, expert flips


def snapshot_outputs(outputs: Any) -> Leaves:
    """Every leaf of ``outputs``, tensors detached and copied (CUDA-graph outputs are overwritten next run)."""
    return snapshot_leaves(outputs)


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def compare_tensors(path: str, base: torch.Tensor, cand: torch.Tensor, policy: DtypePolicy, *,
                    role: str = "output", atol_scale: float | None = None) -> OutputComparison:
    """One tensor leaf under ``policy``; ``atol_scale`` multiplies atol (gradients: by their magnitude)."""
    common: dict[str, Any] = {
        "path": path, "role": role, "shape": list(base.shape), "dtype": str(base.dtype).removeprefix("torch."),
        "candidate_shape": list(cand.shape), "candidate_dtype": str(cand.dtype).removeprefix("torch."),
        "numel": base.numel(),
    }
    if base.shape != cand.shape:
        why = f"shape {tuple(cand.shape)} differs from the baseline's {tuple(base.shape)}"
        return OutputComparison(**common, passed=False, reason=why)
    if base.dtype != cand.dtype:
        return OutputComparison(**common, passed=False,
                                reason=f"dtype {cand.dtype} differs from the baseline's {base.dtype}")
    tol = policy.tolerance_for(base.dtype)
    if tol is not None and atol_scale is not None:
        tol = Tolerance(rtol=tol.rtol, atol=tol.atol * atol_scale)
    cand = cand.to(base.device)
    if base.is_complex():
        base, cand = torch.view_as_real(base), torch.view_as_real(cand)
    if tol is None:
        equal = torch.equal(base, cand)
        mismatched = int((base != cand).sum()) if not equal else 0
        zero = 0.0 if equal else None
        return OutputComparison(**common, max_abs_err=zero, max_rel_err=zero, mismatched=mismatched,
                                passed=equal,
                                reason="" if equal else f"{mismatched} elements differ (exact comparison)")
    if base.numel() == 0:
        return OutputComparison(**common, max_abs_err=0.0, max_rel_err=0.0, tolerance=tol, passed=True)
    b, c = base.double(), cand.double()
    same = (b == c) | (torch.isnan(b) & torch.isnan(c))  # equal infinities and NaN pairs count as equal
    diff = torch.where(same, torch.zeros_like(b), (c - b).abs())
    diff = torch.nan_to_num(diff, nan=math.inf)  # NaN on one side only: infinitely wrong
    rel = diff / b.abs().clamp_min(tol.atol) if tol.atol > 0 else diff / b.abs()
    rel = torch.where(diff == 0, torch.zeros_like(rel), rel)
    bound = tol.atol + tol.rtol * b.abs().nan_to_num(posinf=0.0, neginf=0.0)
    mismatched = int((diff > bound).sum())
    max_abs, max_rel = float(diff.max()), float(rel.max())
    reason = ""
    if mismatched:
        reason = (f"{mismatched} of {base.numel()} elements outside rtol={tol.rtol:g}, atol={tol.atol:g} "
                  f"(max abs err {max_abs:.3g}, max rel err {max_rel:.3g})")
    return OutputComparison(**common, max_abs_err=_finite_or_none(max_abs),
                            max_rel_err=_finite_or_none(max_rel), mismatched=mismatched, tolerance=tol,
                            passed=mismatched == 0, reason=reason)


def _compare_values(path: str, base: Any, cand: Any, policy: DtypePolicy) -> OutputComparison:
    if isinstance(base, float) and isinstance(cand, float):
        return compare_tensors(path, torch.tensor([base], dtype=torch.float64),
                               torch.tensor([cand], dtype=torch.float64), policy)
    try:
        equal = type(base) is type(cand) and bool(base == cand)
    except Exception:  # a value whose == is not a truth value
        equal = False
    return OutputComparison(path=path, passed=equal,
                            reason="" if equal else f"{_short(cand)} differs from the baseline's {_short(base)}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def compare_leaves(baseline: Leaves, candidate: Leaves, policy: DtypePolicy,
                   role: str = "output") -> list[OutputComparison]:
    """Compare two leaf maps path by path; a path on one side only is a mismatch."""
    comparisons: list[OutputComparison] = []
    for path, base in baseline.items():
        if path not in candidate:
            comparisons.append(OutputComparison(path=path, role=role, passed=False,  # type: ignore[arg-type]
                                                reason="output structure differs: missing from the candidate"))
            continue
        cand = candidate[path]
        if isinstance(base, torch.Tensor) and isinstance(cand, torch.Tensor):
            comparisons.append(compare_tensors(path, base, cand, policy, role=role))
        elif isinstance(base, torch.Tensor) or isinstance(cand, torch.Tensor):
            what = type(cand).__name__ if isinstance(base, torch.Tensor) else "a tensor"
            comparisons.append(OutputComparison(path=path, role=role, passed=False,  # type: ignore[arg-type]
                                                reason=f"output structure differs: the candidate has {what} here"))
        else:
            comparisons.append(_compare_values(path, base, cand, policy).model_copy(update={"role": role}))
    for path in candidate:
        if path not in baseline:
            comparisons.append(OutputComparison(path=path, role=role, passed=False,  # type: ignore[arg-type]
                                                reason="output structure differs: not in the baseline's output"))
    return comparisons


def _severity(c: OutputComparison) -> float:
    if c.max_rel_err is None:
        return float("inf")
    return c.max_rel_err


def leaf_label(c: OutputComparison) -> str:
    """How a reason names a leaf: ``output logits``, ``gradient of layers.0.weight``."""
    if c.role == "gradient":
        return f"gradient of {c.path}"
    if c.role == "parameter":
        return f"updated parameter {c.path}"
    return f"output {c.path or '(tensor)'}"


MAX_REASONS = 5  # leaves named in a failure's reason; the rest are counted


def summarize(comparisons: list[OutputComparison], policy: DtypePolicy, *,
              notes: list[str] | None = None) -> ValidationResult:
    """The verdict over ``comparisons``: worst leaf first in the reason, at most MAX_REASONS named."""
    failed = sorted((c for c in comparisons if not c.passed), key=_severity, reverse=True)
    numeric = [c for c in comparisons if c.max_rel_err is not None]
    max_abs = max((c.max_abs_err for c in comparisons if c.max_abs_err is not None), default=0.0)
    max_rel = max((c.max_rel_err for c in numeric if c.max_rel_err is not None), default=0.0)
    worst_leaf = failed[0] if failed else max(numeric, key=_severity, default=None)
    parts = [f"{leaf_label(c)}: {c.reason}" for c in failed[:MAX_REASONS]]
    if len(failed) > MAX_REASONS:
        parts.append(f"and {len(failed) - MAX_REASONS} more leaves outside tolerance")
    return ValidationResult(passed=not failed, max_abs_err=max_abs, max_rel_err=max_rel,
                            compute_precision=policy.compute_precision, outputs=comparisons,
                            reason="; ".join(parts),
                            worst=(leaf_label(worst_leaf) if worst_leaf is not None else None),
                            notes=list(notes or []))


def validate_outputs(baseline: Any, candidate: Any, *,
                     dtype_policy: DtypePolicy | None = None) -> ValidationResult:
    """Compare two outputs leaf by leaf under ``dtype_policy``; never raises on a mismatch."""
    policy = dtype_policy or DtypePolicy()
    if policy.compute_precision not in policy.tolerances:
        raise ValueError(f"compute precision {policy.compute_precision!r} has no tolerance; "
                         f"use one of {', '.join(policy.tolerances)}")
    comparisons = compare_leaves(output_leaves(baseline), output_leaves(candidate), policy)
    return summarize(comparisons, policy)
