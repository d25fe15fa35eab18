"""MoE routing in the verdict: reroutes at near-tied routers are ties, later layers' are cascades,
decisive ones reject; rerouted positions are set aside from the logits' decisive measures."""

from __future__ import annotations

import torch

from profiler_core.passes.policy import DEFAULT_POLICY
from profiler_core.passes.reference import Reference
from profiler_core.passes.routing import RouterLayer, routing_changes
from profiler_core.passes.step_run import StepRecord
from profiler_core.passes.verdict import judge_steps


def _router(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


def test_reroutes_are_ties_cascades_or_beyond_rounding() -> None:
    # three tokens, four experts, top-2: token 0's 2nd and 3rd experts are nearly tied, token 1's are not
    layer0 = _router([[1.0, 0.5, 0.4999, -1.0], [1.0, 0.5, -0.5, -1.0], [1.0, 0.5, -0.5, -1.0]])
    cand0 = _router([[1.0, 0.4999, 0.5, -1.0], [1.0, 0.5, -0.5, -1.0], [1.0, 0.5, -0.5, -1.0]])
    layer1 = _router([[1.0, 0.5, -0.5, -1.0], [1.0, 0.5, -0.5, -1.0], [1.0, 0.5, -0.5, -1.0]])
    cand1 = _router([[1.0, -0.5, 0.5, -1.0], [1.0, 0.5, -0.5, -1.0], [1.0, -0.5, 0.5, -1.0]])
    layers = [RouterLayer("router_logits[1]", layer1, cand1, layer1), RouterLayer("router_logits[0]", layer0, cand0,
                                                                                  layer0)]
    r = routing_changes(layers, 2, DEFAULT_POLICY, "bfloat16")
    # layer 0: token 0 is a tie; layer 1: token 0 follows its earlier change, token 2 swaps a margin of 1.0
    assert (r.ties, r.cascades, r.beyond, r.changed, r.routed, r.tokens) == (1, 1, 1, 3, 6, 3)
    assert r.rerouted is not None and r.rerouted.tolist() == [True, False, True]
    assert r.beyond_margin == 1.0 and 0.0 < r.tie_margin < 1.0
    assert r.rejected(DEFAULT_POLICY)  # 1 of 3 tokens beyond rounding: far over 0.1%
    assert "1 token-layer(s) routed to other experts" in r.reason(DEFAULT_POLICY, "bfloat16")
    assert r.per_layer["router_logits[0]"]["ties"] == 1.0 and r.per_layer["router_logits[1]"]["cascades"] == 1.0


def test_a_tie_at_float32_precision_must_be_far_closer() -> None:
    base = _router([[1.0, 0.5, 0.49, -1.0]])
    cand = _router([[1.0, 0.49, 0.5, -1.0]])
    layers = [RouterLayer("router_logits[0]", base, cand, base)]
    assert routing_changes(layers, 2, DEFAULT_POLICY, "bfloat16").ties == 1  # 0.01 within bf16's 6 floors
    assert routing_changes(layers, 2, DEFAULT_POLICY, "float32").beyond == 1  # not within float32's


def _lm(tokens: int, vocab: int, seed: int) -> torch.Tensor:
    return torch.randn(1, tokens, vocab, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_rerouted_positions_are_reported_apart_and_the_rest_decide() -> None:
    tokens, vocab = 64, 100
    ref = _lm(tokens, vocab, 0) * 3
    cand = ref.clone()
    cand[0, :4] = _lm(4, vocab, 1)[0] * 3  # four positions became another model's: their tokens took other experts
    router = torch.randn(tokens, 8, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    top = router.topk(3, dim=-1).indices
    router_c = router.clone()
    for t in range(4):  # swap the 2nd and 3rd expert, made a near tie in the reference
        router[t, top[t, 2]] = router[t, top[t, 1]] - 1e-4
        router_c[t, top[t, 1]], router_c[t, top[t, 2]] = router[t, top[t, 2]], router[t, top[t, 1]]
    outputs = ({"logits": ref.float(), "router_logits[0]": router.float()},
               {"logits": cand.float(), "router_logits[0]": router_c.float()},
               {"logits": ref, "router_logits[0]": router})
    base, candidate, refd = (StepRecord(outputs=o) for o in outputs)
    v = judge_steps(base, candidate, Reference(refd, "cpu", ""), DEFAULT_POLICY, "bfloat16")
    assert v.passed, v.verdict
    logits = next(o for o in v.outputs if o.kind == "lm_logits")
    assert logits.metrics["rerouted_positions"] == 4 and logits.metrics["positions"] == tokens - 4
    assert logits.metrics["flips"] == 0 and v.metrics["reroutes_beyond_rounding"] == 0
    assert "4 choice(s) at a near-tied router" in v.verdict and "reported, not judged" in v.verdict
    # the same changes of logits without a router that explains them are rejected
    alone = judge_steps(StepRecord(outputs={"logits": ref.float()}), StepRecord(outputs={"logits": cand.float()}),
                        Reference(StepRecord(outputs={"logits": ref}), "cpu", ""), DEFAULT_POLICY, "bfloat16")
    assert not alone.passed and alone.verdict.startswith("rejected: output logits (lm_logits)")
