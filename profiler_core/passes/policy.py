"""The validation policy: how a transformed model's outputs are judged, in one object.

``apply-pass``, the MCP server and the optimize loop all judge with a ``ValidationPolicy``
(``DEFAULT_POLICY`` unless told otherwise). Its central rule calibrates against a float64
reference run of the original step (reference.py), as ``torch._dynamo.utils.same(fp64_ref=...)``
and PyTorch's benchmark accuracy checks do::

    RMSE(candidate, fp64) <= k * RMSE(baseline, fp64) + floor * RMS(fp64)

The baseline's own error says how much rounding this model carries at its precision; the
candidate may carry ``k`` times that (``k`` = 2, or 3 where a pass computes in a lower
precision than the output's dtype, and for tensors of fewer than 1,000 elements, where noise
dominates RMSE). The floor is relative to the output's magnitude and set by the plan's compute
precision: ``FLOOR_UNITS`` units of rounding (2^-24 for float32, 2^-11 for tf32 and float16,
2^-9 for bfloat16), the error a few roundings through the depth of a model leave. It is what
admits a bf16 plan next to a float32 baseline, whose own error is a million times smaller.

Per kind of output (output_kinds.py) the policy holds what that kind's users check:
language-model logits by next-token agreement, top-k overlap and KL divergence; generated
token ids by greedy agreement; intermediates (KV caches, hidden states, router logits) by the
calibrated rule, reported, rejecting only when grossly off.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

UNIT_ROUNDOFF = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "tf32": 2.0 ** -11, "float16": 2.0 ** -11,
                 "bfloat16": 2.0 ** -9}
FLOOR_UNITS = 8.0  # units of rounding a whole model's output may carry beyond k times the baseline's error
_RANK = {"float64": 0, "float32": 1, "tf32": 2, "float16": 3, "bfloat16": 4}


@dataclass(frozen=True)
class ValidationPolicy:
    """The rule and thresholds every caller judges with (see the module docstring)."""

    reference: bool = True  # run the float64 reference; False judges by the tolerance table
    k: float = 2.0  # the candidate may carry k times the baseline's error against float64 ...
    k_lower_precision: float = 3.0  # ... or this many where the plan computes in a lower precision
    k_small: float = 3.0  # for tensors of fewer than SMALL_NUMEL elements: noise dominates RMSE
    floor_units: float = FLOOR_UNITS
    top_k: int = 5  # where next tokens differ, each side's token must be in the other's top-k
    kl_floor_factor: float = 2.0  # logits may move by this many floors before KL rejects them
    min_intermediate_cosine: float = 0.99  # an intermediate rejects only below this cosine similarity
    router_top_k: int = 2  # experts per token, when the model's config does not say
    # An MoE token that takes other experts is a tie when the float64 router's margin between the
    # k-th and (k+1)-th expert is within this many floors of the router logits' RMS (two logits,
    # each moved by up to three floors, can swap); routing.py.
    tie_floors: float = 6.0
    max_reroutes_beyond_rounding: float = 0.001  # of the tokens: more rejects the plan (a broken router)
    gradient_floor: float = 1e-3  # a gradient's scale is at least this fraction of the largest one's
    # An updated parameter's floor term is at least this, in its own units: PyTorch's training accuracy
    # check (torch._dynamo.utils.same with fp64_ref) adds tol/10 with tol = 1e-2 for training. One
    # adaptive step moves each element by about the learning rate whatever its gradient's size, so a
    # gradient's sign flipped by rounding moves the element by twice that; the gradients themselves
    # are judged by the relative rule above.
    parameter_floor: float = 1e-3
    unit_roundoff: dict[str, float] = field(default_factory=lambda: dict(UNIT_ROUNDOFF))

    SMALL_NUMEL = 1000

    def floor(self, precision: str) -> float:
        """The relative floor of the calibrated rule for a plan computing in ``precision``."""
        return self.floor_units * self.unit_roundoff.get(precision, UNIT_ROUNDOFF["float32"])

    def multiplier(self, precision: str, dtype_name: str, numel: int) -> float:
        """k for one output: larger for a precision-lowering plan and for small tensors."""
        k = self.k
        if _RANK.get(precision, 1) > _RANK.get(dtype_name, 1):
            k = max(k, self.k_lower_precision)
        if numel < self.SMALL_NUMEL:
            k = max(k, self.k_small)
        return k

    def kl_bound(self, precision: str, rms_ref: float, kl_baseline: float, k: float) -> float:
        """Mean KL(fp64 || candidate) allowed, in nats per position: k times the baseline's, plus the
        KL that logits moved by ``kl_floor_factor`` floors give (KL ~ var(delta)/2 for small delta)."""
        return k * kl_baseline + 0.5 * (self.kl_floor_factor * self.floor(precision) * rms_ref) ** 2

    def rule_text(self, precision: str) -> str:
        """The calibrated rule as the verdict prints it."""
        return (f"RMSE(candidate, fp64) <= k*RMSE(baseline, fp64) + {self.floor(precision):.2g}*RMS(fp64), "
                f"k={self.k:g} ({self.k_lower_precision:g} for a lower compute precision or under "
                f"{self.SMALL_NUMEL} elements)")

    def as_dict(self) -> dict[str, Any]:
        """The settings, for the record."""
        return {"reference": self.reference, "k": self.k, "k_lower_precision": self.k_lower_precision,
                "k_small": self.k_small, "floor_units": self.floor_units, "top_k": self.top_k,
                "min_intermediate_cosine": self.min_intermediate_cosine, "parameter_floor": self.parameter_floor,
                "tie_floors": self.tie_floors, "max_reroutes_beyond_rounding": self.max_reroutes_beyond_rounding}


DEFAULT_POLICY = ValidationPolicy()
