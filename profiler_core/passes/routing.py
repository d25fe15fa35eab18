"""Which tokens an MoE plan sent to other experts, and whether rounding explains each.

A sparse mixture-of-experts model picks each token's experts by the top-k of its router's
logits. Where two experts' logits are nearly tied, the rounding of a lower-precision plan
picks the other one, and from there that token's hidden state (and, through attention, a
little of its neighbours') is a different model's. Such a token's logits are not rounding
noise, but they are not a broken pass either: every MoE model served in bf16 does this.

A change of experts at a token, in a router layer, is:

- a **tie** when the float64 reference's margin between the k-th and the (k+1)-th expert's
  logits is within ``policy.tie_floors`` floors of the plan's precision times the router
  logits' RMS (the rounding that precision carries could swap them);
- a **cascade** when the token already took other experts in an earlier layer;
- **beyond rounding** otherwise. A plan whose reroutes beyond rounding exceed
  ``policy.max_reroutes_beyond_rounding`` of the tokens is rejected (a broken router, a
  fold with the wrong statistics: those reroute tokens with decisive margins).

The tokens rerouted in any layer are set aside from the logits' decisive measures and
reported on their own (next-token agreement there); the others are judged as any language
model's logits are (verdict.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

from profiler_core.passes.output_kinds import expert_choices
from profiler_core.passes.policy import ValidationPolicy

_INDEX = re.compile(r"\[(\d+)\]")


@dataclass
class RouterLayer:
    """One router's logits on each side: baseline, candidate and (when it ran) float64."""

    path: str
    base: torch.Tensor
    cand: torch.Tensor
    ref: torch.Tensor | None


@dataclass
class Routing:
    """The changes of experts across a model's routers (see the module docstring)."""

    tokens: int = 0  # tokens per router layer
    routed: int = 0  # token-layer choices, all layers
    changed: int = 0  # token-layer choices that differ
    ties: int = 0
    cascades: int = 0
    beyond: int = 0  # beyond rounding
    beyond_margin: float = 0.0  # the largest float64 margin among those
    tie_margin: float = 0.0  # the largest margin a tie may have, in the widest layer
    rerouted: torch.Tensor | None = None  # per token: took other experts in some layer
    per_layer: dict[str, dict[str, float]] = field(default_factory=dict)

    def rejected(self, policy: ValidationPolicy) -> bool:
        """Whether the reroutes beyond rounding are too many (a broken router, not rounding)."""
        return self.tokens > 0 and self.beyond > policy.max_reroutes_beyond_rounding * self.tokens

    def reason(self, policy: ValidationPolicy, precision: str) -> str:
        """The rejection's numbers, once."""
        return (f"{self.beyond} token-layer(s) routed to other experts where the float64 router's margin (up to "
                f"{self.beyond_margin:.3g}) is beyond the {self.tie_margin:.3g} that {precision} rounding can "
                f"swap; at most {policy.max_reroutes_beyond_rounding:.1%} of {self.tokens} tokens may be")

    def summary(self) -> str:
        """The headline: how many tokens chose other experts, and why."""
        n = int(self.rerouted.sum()) if self.rerouted is not None else self.changed
        return (f"{100 * n / max(self.tokens, 1):.1f}% of tokens ({n} of {self.tokens}) took other experts in some "
                f"layer: {self.ties} choice(s) at a near-tied router, {self.cascades} after the token's change in "
                f"an earlier layer, {self.beyond} beyond rounding")


def _layer_order(path: str) -> tuple[int, ...]:
    return tuple(int(i) for i in _INDEX.findall(path))


def routing_changes(layers: list[RouterLayer], top_k: int, policy: ValidationPolicy, precision: str) -> Routing:
    """The changes of experts across ``layers`` (router logits, in any order), classified."""
    layers = sorted(layers, key=lambda layer: _layer_order(layer.path))
    shapes = {tuple(layer.base.reshape(-1, layer.base.shape[-1]).shape) for layer in layers}
    aligned = len(shapes) == 1  # every layer routes the same tokens: they line up position by position
    out = Routing()
    seen: torch.Tensor | None = None
    for layer in layers:
        b = layer.base.detach().double().reshape(-1, layer.base.shape[-1])
        c = layer.cand.detach().double().to(b.device).reshape(-1, b.shape[-1])
        r = (layer.ref.detach().double().to(b.device).reshape(-1, b.shape[-1])
             if layer.ref is not None and layer.ref.numel() == b.numel() else b)
        k = min(top_k, b.shape[-1])
        if c.shape != b.shape or k >= b.shape[-1]:
            continue
        changed = (expert_choices(b, k) != expert_choices(c, k)).any(-1)
        top = r.topk(k + 1, dim=-1).values
        margin = top[:, k - 1] - top[:, k]
        tie_margin = policy.tie_floors * policy.floor(precision) * float(r.pow(2).mean().sqrt())
        cascade = changed & seen if aligned and seen is not None else torch.zeros_like(changed)
        tie = changed & ~cascade & (margin <= tie_margin)
        beyond = changed & ~cascade & ~tie
        out.tokens = max(out.tokens, b.shape[0])
        out.routed += b.shape[0]
        out.changed += int(changed.sum())
        out.ties += int(tie.sum())
        out.cascades += int(cascade.sum())
        out.beyond += int(beyond.sum())
        out.tie_margin = max(out.tie_margin, tie_margin)
        if bool(beyond.any()):
            out.beyond_margin = max(out.beyond_margin, float(margin[beyond].max()))
        out.per_layer[layer.path] = {"tokens_rerouted": float(changed.sum()), "tokens": float(b.shape[0]),
                                     "ties": float(tie.sum()), "cascades": float(cascade.sum()),
                                     "beyond_rounding": float(beyond.sum()), "tie_margin": tie_margin}
        if aligned:
            seen = changed if seen is None else seen | changed
    out.rerouted = seen
    return out
