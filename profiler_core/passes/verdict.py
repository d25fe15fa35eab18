"""The verdict on a candidate step: judged against the float64 reference, per kind of output, rule printed.

``judge_steps`` starts from the leaf-by-leaf comparison of step_validation.py (structure,
shapes, dtypes, integer and plain values compared exactly), then judges every floating leaf by
what it is (output_kinds.py) under the policy (policy.py)::

    output, loss, gradient, updated parameter   RMSE(candidate, fp64) <= k*RMSE(baseline, fp64) + floor*RMS(fp64)
    language-model logits                       no next token outside the other side's top-k; KL within bound
    generated token ids                         greedy agreement; divergences within the other's top-k
    KV cache, hidden states, router logits      the rule, reported; rejects only below a cosine of 0.99
    router logits                               changes of experts: ties, cascades, beyond rounding (routing.py)

Without a float64 reference (reference.py says why) the floating leaves keep the tolerance
table's verdict, and the verdict says so. The verdict names the reference, the rule, the worst
output and its numbers, once; for an MoE model, how many tokens chose other experts::

    validation passed against float64 on cpu, TF32 off; worst output logits: next-token agreement
    99.7% (1 of 320 positions flipped, within top-5), KL 2.1e-06 <= 1.2e-05; 0.3% of tokens (2 of 640)
    took other experts in some layer: 2 choice(s) at a near-tied router, 0 after ..., 0 beyond rounding

An MoE's tokens that took other experts (routing.py) are set aside from the logits' decisive
measures and reported apart; reroutes beyond what rounding can swap reject the plan.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field

from profiler_core.passes.output_kinds import (
    generation_scores,
    kl_divergence,
    leaf_kind,
    logits_metrics,
    token_metrics,
)
from profiler_core.passes.policy import ValidationPolicy
from profiler_core.passes.reference import Reference
from profiler_core.passes.routing import RouterLayer, Routing, routing_changes
from profiler_core.passes.step_run import StepRecord
from profiler_core.passes.step_validation import compare_steps
from profiler_core.passes.validation import DtypePolicy, OutputComparison, ValidationResult, leaf_label

_DECISIVE = ("lm_logits", "token_ids", "output")


def _rms(x: torch.Tensor) -> float:
    return float(x.pow(2).mean().sqrt()) if x.numel() else 0.0


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    na, nb = float(a.norm()), float(b.norm())
    if na == 0.0 or nb == 0.0:
        return 1.0 if na == nb else 0.0
    return float((a * b).sum()) / (na * nb)


def _f(x: float) -> str:
    return f"{x:.3g}"


def calibrated(c: OutputComparison, base: torch.Tensor, cand: torch.Tensor, ref: torch.Tensor,
               policy: ValidationPolicy, precision: str, *, scale_floor: float = 0.0,
               judged: torch.Tensor | None = None, abs_floor: float = 0.0) -> OutputComparison:
    """``c`` judged by the calibrated rule: RMSE(candidate, fp64) <= k*RMSE(baseline, fp64) + floor*RMS(fp64).

    ``judged``: a boolean mask of the elements the rule applies to (the others are counted in
    ``metrics['elements_not_judged']``); all of them when None. ``abs_floor``: the least the
    floor term may be, in the output's units (updated parameters: ``policy.parameter_floor``).
    """
    b, x = base.detach().double().flatten(), cand.detach().to(base.device).double().flatten()
    r = ref.detach().to(base.device).double().flatten()
    finite = torch.isfinite(r) & torch.isfinite(b)
    if judged is not None:
        keep = judged.detach().to(base.device).flatten().bool()
        skipped = int((finite & ~keep).sum())
        finite = finite & keep
        c = c.model_copy(update={"metrics": {**c.metrics, "elements_not_judged": float(skipped)}})
        if not bool(finite.any()):
            return c.model_copy(update={"passed": True, "excess": 0.0, "reason": ""})
    if bool((finite & ~torch.isfinite(x)).any()):
        bad = int((finite & ~torch.isfinite(x)).sum())
        return c.model_copy(update={"passed": False, "excess": math.inf,
                                    "reason": f"{bad} non-finite values where the baseline and fp64 are finite"})
    b, x, r = b[finite], x[finite], r[finite]
    e_b, e_c, rms = _rms(b - r), _rms(x - r), _rms(r)
    scale = max(rms, scale_floor)
    k = policy.multiplier(precision, c.dtype or "float32", c.numel)
    floor = policy.floor(precision)
    threshold = k * e_b + max(floor * scale, abs_floor)
    excess = e_c / threshold if threshold > 0 else (0.0 if e_c == 0 else math.inf)
    passed = e_c <= threshold
    cosine = _cosine(x, r)
    reason = "" if passed else (
        f"RMSE(candidate, fp64) {_f(e_c)} > {_f(threshold)} = {k:g}*{_f(e_b)} (baseline's RMSE) + "
        + (f"{_f(abs_floor)} (the floor for updated parameters)" if abs_floor > floor * scale
           else f"{floor:.2g}*{_f(scale)} (RMS of fp64)") + f"; cosine similarity {cosine:.5f}")
    return c.model_copy(update={"passed": passed, "reason": reason, "rmse_candidate": e_c, "rmse_baseline": e_b,
                                "rms_reference": scale, "k": k, "threshold": threshold, "cosine": cosine,
                                "excess": excess})


def _as_intermediate(c: OutputComparison, cand: torch.Tensor, other: torch.Tensor,
                     policy: ValidationPolicy) -> OutputComparison:
    """An intermediate passes unless grossly off: the rule's breach is kept in its metrics."""
    if c.passed or (c.excess is not None and math.isinf(c.excess)) or (
            c.rmse_candidate is None and c.max_abs_err is None):  # non-finite where the other side is finite
        return c
    cosine = c.cosine if c.cosine is not None else _cosine(cand.double().flatten(), other.double().flatten())
    metrics = {**c.metrics, "rule_breached": 1.0}
    if cosine >= policy.min_intermediate_cosine:
        return c.model_copy(update={"passed": True, "cosine": cosine, "metrics": metrics,
                                    "reason": f"outside the rule as an intermediate ({c.reason})"})
    return c.model_copy(update={"cosine": cosine, "metrics": metrics,
                                "reason": f"{c.reason}; cosine similarity {cosine:.5f} is below "
                                          f"{policy.min_intermediate_cosine:g}, too far even for an intermediate"})


def _centered_rms(logits: torch.Tensor) -> float:
    x = logits.double()
    return _rms(x - x.mean(-1, keepdim=True))


def _judge_logits(c: OutputComparison, base: torch.Tensor, cand: torch.Tensor, ref: torch.Tensor | None,
                  policy: ValidationPolicy, precision: str, set_aside: torch.Tensor | None = None) -> OutputComparison:
    """Next-token agreement, top-k and KL; positions in ``set_aside`` (an MoE's rerouted tokens,
    routing.py) are reported apart and the rest decide."""
    extra: dict[str, float] = {}
    flat = base.shape[:-1].numel()
    if set_aside is not None and set_aside.numel() == flat and bool(set_aside.any()):
        keep = ~set_aside.to(base.device).reshape(-1)
        rows = [t.reshape(flat, t.shape[-1]) for t in (base, cand.to(base.device))]
        apart = logits_metrics(rows[0][~keep], rows[1][~keep], policy.top_k)
        extra = {"rerouted_positions": apart["positions"], "rerouted_top1_agreement": apart["top1_agreement"],
                 "rerouted_kl": apart["kl"]}
        base, cand = rows[0][keep], rows[1][keep]
        ref = ref.reshape(flat, ref.shape[-1])[keep.to(ref.device)] if ref is not None else None
    m = logits_metrics(base, cand, policy.top_k)
    k = policy.multiplier(precision, c.dtype or "float32", c.numel)
    if ref is not None:
        kl, kl_base = kl_divergence(ref, cand), kl_divergence(ref, base)
        bound, against = policy.kl_bound(precision, _centered_rms(ref), kl_base, k), "fp64"
        m["kl_baseline"] = kl_base
    else:
        kl, bound, against = m["kl"], policy.kl_bound(precision, _centered_rms(base), 0.0, k), "baseline"
    m.update({"kl": kl, "kl_bound": bound, **extra})
    far, flips, n = int(m["far_flips"]), int(m["flips"]), int(m["positions"])
    excess = max(kl / bound if bound > 0 else (0.0 if kl == 0 else math.inf), 1.0 + far if far else 0.0)
    passed = far == 0 and kl <= bound
    where = f" (the {n} positions whose tokens kept their experts)" if extra else ""
    reason = "" if passed else (
        f"next-token agreement {100 * m['top1_agreement']:.1f}%{where} ({flips} of {n} positions flipped, {far} "
        f"beyond each other's top-{policy.top_k}); KL({against} || candidate) {_f(kl)} "
        f"{'>' if kl > bound else '<='} {_f(bound)}")
    return c.model_copy(update={"passed": passed, "reason": reason, "metrics": {**c.metrics, **m},
                                "excess": excess})


def _judge_tokens(c: OutputComparison, base: torch.Tensor, cand: torch.Tensor, base_leaves: dict[str, Any],
                  cand_leaves: dict[str, Any], policy: ValidationPolicy) -> OutputComparison:
    if base.shape != cand.shape:
        return c
    m = token_metrics(base, cand, generation_scores(base_leaves), generation_scores(cand_leaves), policy.top_k)
    far, unchecked = int(m["far_divergences"]), int(m["unchecked_divergences"])
    passed = far == 0 and unchecked == 0
    reason = "" if passed else (
        f"greedy token agreement {100 * m['token_agreement']:.1f}%; {int(m['rows_diverged'])} of {int(m['rows'])} "
        f"sequences diverge, {far} to a token outside the other's top-{policy.top_k}"
        + (f", {unchecked} without scores to check (generate with output_scores=True, "
           "return_dict_in_generate=True)" if unchecked else ""))
    return c.model_copy(update={"kind": "token_ids", "passed": passed, "reason": reason, "metrics": m,
                                "excess": 0.0 if passed else 1.0 + far + unchecked})


def _without_gradient(ref: StepRecord | None) -> dict[str, torch.Tensor]:
    """Per parameter, the elements whose float64 gradient is zero to float32's resolution.

    Their exact gradient is zero (a key projection's bias under softmax, say), so what an update
    does to them is rounding noise that an adaptive optimizer scales up to a whole step (Adam
    divides by the gradient's own magnitude): a lower-precision candidate moves them by about
    the learning rate where the float32 baseline barely moves them. Such elements are counted,
    not judged; every element with a real gradient is.
    """
    if ref is None or not ref.gradients:
        return {}
    largest = max((float(g.detach().abs().max()) for g in ref.gradients.values() if g.numel()), default=0.0)
    if largest == 0.0:
        return {}
    cut = largest * 2.0 ** -24
    return {name: g.detach().abs() <= cut for name, g in ref.gradients.items()
            if isinstance(g, torch.Tensor) and g.is_floating_point()}


def _leaves(record: StepRecord, role: str) -> dict[str, Any]:
    return {"output": record.outputs, "gradient": record.gradients, "parameter": record.parameters}[role]


def judge_steps(base: StepRecord, cand: StepRecord, reference: Reference, policy: ValidationPolicy,
                precision: str, *, router_top_k: int | None = None) -> ValidationResult:
    """The candidate's step against the baseline's and the float64 reference; never raises on a mismatch."""
    table = compare_steps(base, cand, DtypePolicy(precision))
    ref = reference.record if policy.reference else None
    grad_scale = policy.gradient_floor * max(
        (_rms(g.double()) for g in (ref.gradients if ref is not None else base.gradients).values()), default=0.0)
    no_gradient = _without_gradient(ref)
    routing = _routing(table, base, cand, ref, policy, precision, router_top_k or policy.router_top_k)
    judged: list[OutputComparison] = []
    for c in table.outputs:
        b, x = _leaves(base, c.role).get(c.path), _leaves(cand, c.role).get(c.path)
        r = _leaves(ref, c.role).get(c.path) if ref is not None else None
        if not (isinstance(b, torch.Tensor) and isinstance(x, torch.Tensor)):
            judged.append(c)
            continue
        kind = leaf_kind(c.path, b) if c.role == "output" else "output"
        c = c.model_copy(update={"kind": kind})
        if kind == "token_ids":
            judged.append(_judge_tokens(c, b, x, base.outputs, cand.outputs, policy))
            continue
        numeric = c.tolerance is not None and b.shape == x.shape and b.dtype == x.dtype and b.numel() > 0
        if not numeric:
            judged.append(c)
            continue
        r = r if isinstance(r, torch.Tensor) and r.shape == b.shape and r.is_floating_point() else None
        if r is not None:
            c = calibrated(c, b, x, r, policy, precision, scale_floor=grad_scale if c.role == "gradient" else 0.0,
                           judged=~no_gradient[c.path] if c.role == "parameter" and c.path in no_gradient else None,
                           abs_floor=policy.parameter_floor if c.role == "parameter" else 0.0)
        if kind == "lm_logits":  # the RMSE figures stay as a report; the logits' own measures decide
            judged.append(_judge_logits(c, b, x, r, policy, precision, routing.rerouted))
            continue
        if kind == "router_logits":
            c = c.model_copy(update={"metrics": {**c.metrics, **routing.per_layer.get(c.path, {})}})
        if kind in ("router_logits", "intermediate"):
            c = _as_intermediate(c, x, r if r is not None else b, policy)
        if kind == "generation_scores" and not c.passed:  # after a divergence they score other prefixes
            c = c.model_copy(update={"passed": True, "metrics": {**c.metrics, "rule_breached": 1.0},
                                     "reason": f"reported, the generated tokens decide ({c.reason})"})
        judged.append(c)
    if routing.rejected(policy):
        judged = _reject_routers(judged, routing, policy, precision)
    return _summarize(table, judged, reference if ref is not None else None, reference, policy, precision, routing)


def _routing(table: ValidationResult, base: StepRecord, cand: StepRecord, ref: StepRecord | None,
             policy: ValidationPolicy, precision: str, top_k: int) -> Routing:
    """The MoE routers' changes of experts, when the outputs hold router logits (routing.py)."""
    layers = []
    for c in table.outputs:
        b, x = base.outputs.get(c.path), cand.outputs.get(c.path)
        if c.role != "output" or not isinstance(b, torch.Tensor) or not isinstance(x, torch.Tensor):
            continue
        if leaf_kind(c.path, b) != "router_logits" or b.shape != x.shape or not b.is_floating_point():
            continue
        r = ref.outputs.get(c.path) if ref is not None else None
        layers.append(RouterLayer(c.path, b, x, r if isinstance(r, torch.Tensor) else None))
    return routing_changes(layers, top_k, policy, precision)


def _reject_routers(judged: list[OutputComparison], routing: Routing, policy: ValidationPolicy,
                    precision: str) -> list[OutputComparison]:
    """The router layer with the most reroutes beyond rounding carries the rejection."""
    routers = [c for c in judged if c.kind == "router_logits"]
    worst = max(routers, key=lambda c: c.metrics.get("beyond_rounding", 0.0), default=None)
    if worst is None:
        return judged
    failed = worst.model_copy(update={"passed": False, "reason": routing.reason(policy, precision),
                                      "excess": 1.0 + routing.beyond})
    return [failed if c is worst else c for c in judged]


def _headline(judged: list[OutputComparison], routing: Routing) -> tuple[dict[str, float], list[str]]:
    metrics: dict[str, float] = {}
    said: list[str] = []
    logits = [c for c in judged if c.kind == "lm_logits" and "positions" in c.metrics]
    if logits:
        positions = sum(c.metrics["positions"] + c.metrics.get("rerouted_positions", 0.0) for c in logits)
        agree = sum(c.metrics["top1_agreement"] * c.metrics["positions"]
                    + c.metrics.get("rerouted_top1_agreement", 0.0) * c.metrics.get("rerouted_positions", 0.0)
                    for c in logits) / max(positions, 1.0)
        metrics["next_token_agreement"] = agree
        said.append(f"next-token agreement {100 * agree:.1f}% over {int(positions)} positions")
        apart = [c for c in logits if c.metrics.get("rerouted_positions")]
        if apart:
            n = sum(c.metrics["rerouted_positions"] for c in apart)
            there = sum(c.metrics["rerouted_top1_agreement"] * c.metrics["rerouted_positions"] for c in apart) / n
            metrics["rerouted_next_token_agreement"] = there
            said.append(f"{100 * there:.1f}% at the {int(n)} positions whose tokens took other experts "
                        "(reported, not judged)")
    if routing.routed:
        metrics["tokens_rerouted"] = routing.changed / routing.routed
        metrics["reroutes_beyond_rounding"] = float(routing.beyond)
        said.append(routing.summary())
    breached = [c for c in judged if c.metrics.get("rule_breached") and c.passed]
    if breached:
        said.append(f"{len(breached)} intermediate(s) outside the rule but within cosine similarity "
                    f"(worst {leaf_label(max(breached, key=lambda c: c.excess or 0.0))})")
    return metrics, said


def _numbers(c: OutputComparison) -> str:
    if c.kind == "lm_logits" and "positions" in c.metrics:
        m = c.metrics
        kept = " whose tokens kept their experts" if m.get("rerouted_positions") else ""
        return (f"next-token agreement {100 * m['top1_agreement']:.1f}% ({int(m['flips'])} of {int(m['positions'])} "
                f"positions{kept} flipped, {int(m['far_flips'])} beyond top-k), KL {_f(m['kl'])} "
                f"{'<=' if m['kl'] <= m['kl_bound'] else '>'} {_f(m['kl_bound'])}")
    if c.rmse_candidate is not None and c.threshold is not None:
        return (f"RMSE {_f(c.rmse_candidate)} {'<=' if c.rmse_candidate <= c.threshold else '>'} "
                f"{_f(c.threshold)} (baseline's {_f(c.rmse_baseline or 0.0)}, cosine {c.cosine:.5f})")
    if c.kind == "token_ids" and c.metrics:
        return f"greedy token agreement {100 * c.metrics['token_agreement']:.1f}%"
    if c.max_abs_err is not None:
        return f"max abs err {_f(c.max_abs_err)}, max rel err {_f(c.max_rel_err or 0.0)}"
    return ""


def _summarize(table: ValidationResult, judged: list[OutputComparison], used: Reference | None,
               reference: Reference, policy: ValidationPolicy, precision: str, routing: Routing) -> ValidationResult:
    failed = sorted((c for c in judged if not c.passed), key=lambda c: c.excess if c.excess is not None
                    else math.inf, reverse=True)
    scored = [c for c in judged if c.excess is not None and c.kind in _DECISIVE]
    worst = failed[0] if failed else max(scored, key=lambda c: c.excess or 0.0, default=None)
    described = reference.describe() if policy.reference else "none: the policy turns the float64 reference off"
    rule = policy.rule_text(precision) if used is not None else (
        f"|candidate - baseline| <= atol + rtol*|baseline| at the {precision} tolerance")
    metrics, said = _headline(judged, routing)
    if failed:
        worst = failed[0]
        kind = f" ({worst.kind})" if worst.kind != "output" else ""
        head = f"rejected: {leaf_label(worst)}{kind}: {worst.reason}"
        rest = f"; {len(failed) - 1} more output(s) outside" if len(failed) > 1 else ""
        line = f"{head}{rest}; reference {described}"
    else:
        numbers = _numbers(worst) if worst is not None else ""
        line = f"validation passed against {described}" + (
            f"; worst {leaf_label(worst)}: {numbers}" if worst is not None and numbers else "")
    line += "".join(f"; {s}" for s in said)
    notes = list(table.notes)
    if used is None:
        notes.append(f"float64 reference: {described}")
    return table.model_copy(update={
        "passed": not failed, "outputs": judged, "reason": line if failed else "",
        "worst": leaf_label(worst) if worst is not None else None, "notes": notes,
        "reference": described, "rule": rule, "verdict": line, "metrics": metrics})


class OutputNumbers(BaseModel):
    """One output's numbers in a verdict record: what it is, the rule's figures, its own measures."""

    model_config = ConfigDict(extra="forbid")
    path: str
    role: str = "output"
    kind: str = "output"
    passed: bool
    rmse_candidate: float | None = None
    rmse_baseline: float | None = None
    threshold: float | None = None
    cosine: float | None = None
    metrics: dict[str, float] = Field(default_factory=dict)


class VerdictRecord(BaseModel):
    """A plan's verdict as optimize.json keeps it per trial: reference, rule, the line, per-output numbers."""

    model_config = ConfigDict(extra="forbid")
    passed: bool
    reference: str = ""
    rule: str = ""
    verdict: str = ""
    metrics: dict[str, float] = Field(default_factory=dict)
    outputs: list[OutputNumbers] = Field(default_factory=list)  # the worst MAX_RECORDED, worst first
    outputs_judged: int = 0


MAX_RECORDED = 16


def verdict_record(result: ValidationResult) -> VerdictRecord:
    """The verdict of ``result`` with the numbers of its MAX_RECORDED worst outputs."""
    numeric = [c for c in result.outputs if c.excess is not None or c.rmse_candidate is not None or not c.passed]
    numeric.sort(key=lambda c: (c.passed, -(c.excess if c.excess is not None else math.inf)))
    return VerdictRecord(
        passed=result.passed, reference=result.reference, rule=result.rule,
        verdict=result.verdict or result.reason, metrics=dict(result.metrics), outputs_judged=len(result.outputs),
        outputs=[OutputNumbers(path=c.path, role=c.role, kind=c.kind, passed=c.passed,
                               rmse_candidate=c.rmse_candidate, rmse_baseline=c.rmse_baseline,
                               threshold=c.threshold, cosine=c.cosine, metrics=dict(c.metrics))
                 for c in numeric[:MAX_RECORDED]])
