"""The verdict: candidate judged against a float64 reference, per kind of output, with the rule printed."""

from __future__ import annotations

import torch

from profiler_core.passes.output_kinds import expert_flips, leaf_kind, logits_metrics, token_metrics
from profiler_core.passes.policy import DEFAULT_POLICY, ValidationPolicy
from profiler_core.passes.reference import Reference, float64_reference
from profiler_core.passes.step_run import StepRecord
from profiler_core.passes.verdict import judge_steps, verdict_record
from profiler_core.workload import default_step


def _records(base: dict, cand: dict, ref: dict | None) -> tuple[StepRecord, StepRecord, Reference]:
    reference = Reference(StepRecord(outputs=ref) if ref is not None else None, "cpu", "" if ref else "no float64")
    return StepRecord(outputs=base), StepRecord(outputs=cand), reference


def _noisy(x: torch.Tensor, rel: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (x.double() + rel * x.double().abs().mean() * torch.randn(x.shape, generator=g, dtype=torch.float64)).float()


def test_candidate_as_close_as_the_baseline_passes_and_ten_times_further_fails() -> None:
    ref = torch.randn(4096, dtype=torch.float64)
    base, good, bad = _noisy(ref, 1e-3, 1), _noisy(ref, 1e-3, 2), _noisy(ref, 1e-2, 3)
    ok = judge_steps(*_records({"y": base}, {"y": good}, {"y": ref}), DEFAULT_POLICY, "float32")
    no = judge_steps(*_records({"y": base}, {"y": bad}, {"y": ref}), DEFAULT_POLICY, "float32")
    assert ok.passed and ok.reference == "float64 on cpu, TF32 off"
    assert "validation passed against float64 on cpu" in ok.verdict and "RMSE" in ok.verdict
    y = no.outputs[0]
    assert not no.passed and y.rmse_candidate > y.threshold > 0
    assert abs(y.threshold - (2 * y.rmse_baseline + DEFAULT_POLICY.floor("float32") * y.rms_reference)) < 1e-12
    # the rejection names the output, the rule's numbers and the threshold, once
    assert no.verdict.startswith("rejected: output y: RMSE(candidate, fp64)")
    assert no.verdict.count(f"{y.threshold:.3g}") == 1 and no.reason == no.verdict


def test_a_bf16_plan_is_allowed_its_floor_and_no_more() -> None:
    ref = torch.randn(4096, dtype=torch.float64)
    base = ref.float()  # float32 rounding only: the baseline's error is ~1e-8
    bf16 = ref.bfloat16().float()  # one bf16 rounding: ~2^-9 relative
    wrong = _noisy(ref, 0.1, 4)
    assert judge_steps(*_records({"y": base}, {"y": bf16}, {"y": ref}), DEFAULT_POLICY, "bfloat16").passed
    assert not judge_steps(*_records({"y": base}, {"y": bf16}, {"y": ref}), DEFAULT_POLICY, "float32").passed
    assert not judge_steps(*_records({"y": base}, {"y": wrong}, {"y": ref}), DEFAULT_POLICY, "bfloat16").passed


def test_without_a_reference_the_table_judges_and_the_verdict_says_so() -> None:
    base = torch.randn(64)
    result = judge_steps(*_records({"y": base}, {"y": base + 1.0}, None), DEFAULT_POLICY, "float32")
    assert not result.passed and "outside rtol=0.0001" in result.reason
    assert result.reference.startswith("none: float64 could not run (no float64)")
    assert "reference none: float64 could not run" in result.verdict


def test_float64_that_cannot_run_falls_back_with_the_reason() -> None:
    class Float32Only(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.dtype != torch.float32:
                raise TypeError("this kernel takes float32 only")
            return x * 2

    ref = float64_reference(default_step, Float32Only().eval(), (torch.ones(3),), device="cpu")
    assert ref.record is None and "TypeError: this kernel takes float32 only" in ref.describe()
    fine = float64_reference(default_step, torch.nn.Linear(3, 2).eval(), (torch.ones(1, 3),), device="cpu")
    assert fine.record is not None and fine.record.outputs[""].dtype == torch.float64
    assert torch.get_default_dtype() == torch.float32 and torch.backends.cudnn.allow_tf32  # restored


def test_logits_near_ties_may_flip_but_a_scrambled_distribution_is_rejected() -> None:
    torch.manual_seed(0)
    ref = torch.randn(2, 8, 50, dtype=torch.float64) * 3
    ref[0, 0, :2] = torch.tensor([9.0, 9.0 - 1e-6])  # a near tie: rounding may pick either
    base = ref.float()
    cand = _noisy(ref, 2e-3, 5)
    cand[0, 0, :2] = torch.tensor([9.0 - 1e-6, 9.0])
    ok = judge_steps(*_records({"logits": base}, {"logits": cand}, {"logits": ref}), DEFAULT_POLICY, "bfloat16")
    logits = ok.outputs[0]
    assert ok.passed and logits.kind == "lm_logits" and logits.metrics["flips"] >= 1
    assert logits.metrics["far_flips"] == 0 and ok.metrics["next_token_agreement"] < 1.0
    assert "next-token agreement" in ok.verdict
    scrambled = base[..., torch.randperm(50)]
    no = judge_steps(*_records({"logits": base}, {"logits": scrambled}, {"logits": ref}), DEFAULT_POLICY, "bfloat16")
    assert not no.passed and "beyond each other's top-5" in no.verdict and "KL(fp64 || candidate)" in no.verdict


def test_logits_metrics_count_overlap_and_far_flips() -> None:
    base = torch.tensor([[5.0, 4.0, 0.0, -1.0], [0.0, 1.0, 2.0, 3.0]])
    cand = torch.tensor([[4.0, 5.0, 0.0, -1.0], [9.0, 1.0, 2.0, 3.0]])
    m = logits_metrics(base, cand, top_k=2)
    assert m["top1_agreement"] == 0.0 and m["flips"] == 2 and m["far_flips"] == 1  # row 1: 0 not in base's top-2
    assert m["topk_overlap"] == 0.75


def test_generated_tokens_diverging_within_top_k_pass_and_outside_fail() -> None:
    base = torch.tensor([[1, 2, 3, 4], [1, 2, 3, 4]])
    scores = [torch.tensor([[0.0, 0.0, 0.0, 5.0, 4.9], [0.0, 0.0, 0.0, 5.0, 0.0]])]  # one generated step
    near = torch.tensor([[1, 2, 3, 4], [1, 2, 3, 4]])
    near[0, 3] = 4
    cand_scores = [torch.tensor([[0.0, 0.0, 0.0, 4.9, 5.0], [0.0, 0.0, 0.0, 5.0, 0.0]])]
    base_ids = base.clone()
    base_ids[0, 3] = 3
    m = token_metrics(base_ids, near, scores, cand_scores, top_k=2)
    assert m["rows_diverged"] == 1 and m["far_divergences"] == 0 and m["token_agreement"] == 7 / 8
    far = token_metrics(base_ids, torch.tensor([[1, 2, 3, 0], [1, 2, 3, 4]]), scores, cand_scores, top_k=2)
    assert far["far_divergences"] == 1
    leaves = {"sequences": base_ids, "scores[0]": scores[0]}
    result = judge_steps(*_records(leaves, {"sequences": base_ids.flip(0) * 0, "scores[0]": scores[0]}, None),
                         DEFAULT_POLICY, "float32")
    assert not result.passed and result.outputs[0].kind == "token_ids" and "greedy token agreement" in result.verdict


def test_expert_choices_are_counted_per_token() -> None:
    base = torch.tensor([[3.0, 2.0, 1.0, 0.0], [0.0, 1.0, 2.0, 3.0], [1.0, 0.0, 3.0, 2.0]])
    cand = base.clone()
    cand[1] = torch.tensor([0.0, 2.5, 2.0, 3.0])  # top-2 {3, 2} -> {3, 1}
    cand[0] = torch.tensor([2.0, 3.0, 1.0, 0.0])  # order within the top-2 changes, the set does not
    assert expert_flips(base, cand, top_k=2) == (1, 3)
    assert leaf_kind("router_logits[1]", base) == "router_logits"
    assert leaf_kind("cache.layers[0].keys", base) == "intermediate"
    assert leaf_kind("logits", torch.zeros(2, 3, 4)) == "lm_logits" and leaf_kind("logits", base) == "output"


def test_intermediates_outside_the_rule_are_reported_not_decisive_unless_grossly_off() -> None:
    ref = torch.randn(2048, dtype=torch.float64)
    out = torch.randn(512, dtype=torch.float64)
    base = {"y": out.float(), "cache.layers[0].keys": ref.float()}
    drift = {"y": out.float(), "cache.layers[0].keys": _noisy(ref, 0.05, 6)}
    wrecked = {"y": out.float(), "cache.layers[0].keys": -ref.float()}
    reference = {"y": out, "cache.layers[0].keys": ref}
    ok = judge_steps(*_records(base, drift, reference), DEFAULT_POLICY, "float32")
    keys = next(c for c in ok.outputs if c.kind == "intermediate")
    assert ok.passed and keys.metrics["rule_breached"] == 1.0 and "intermediate(s) outside the rule" in ok.verdict
    no = judge_steps(*_records(base, wrecked, reference), DEFAULT_POLICY, "float32")
    assert not no.passed and "too far even for an intermediate" in no.verdict


def test_the_record_keeps_the_verdict_and_worst_outputs_first() -> None:
    ref = torch.randn(4096, dtype=torch.float64)
    result = judge_steps(*_records({"a": ref.float(), "b": ref.float()}, {"a": ref.float(), "b": _noisy(ref, 0.1, 7)},
                                   {"a": ref, "b": ref}), ValidationPolicy(), "float32")
    record = verdict_record(result)
    assert not record.passed and record.outputs[0].path == "b" and not record.outputs[0].passed
    assert record.reference == "float64 on cpu, TF32 off" and record.rule.startswith("RMSE(candidate, fp64)")
    assert record.verdict == result.verdict and record.outputs_judged == 2


def _training_records(base_p: torch.Tensor, cand_p: torch.Tensor, ref_p: torch.Tensor,
                      ref_grad: torch.Tensor) -> tuple[StepRecord, StepRecord, Reference]:
    """One updated parameter ``w``; every side has the same (float32) gradient but the reference's."""
    loss = {"loss": torch.tensor(1.0)}
    grad = ref_grad.float()

    def record(p: torch.Tensor, g: torch.Tensor, out: dict) -> StepRecord:
        return StepRecord(outputs=out, gradients={"w": g}, parameters={"w": p}, optimizer_steps=1, training=True,
                          backward_ran=True)

    ref = record(ref_p, ref_grad, {"loss": torch.tensor(1.0, dtype=torch.float64)})
    return record(base_p, grad, loss), record(cand_p, grad, loss), Reference(ref, "cpu", "")


def test_updated_parameters_whose_exact_gradient_is_zero_are_counted_not_judged() -> None:
    # Adam's first step moves every element by about lr = 1e-4 times the sign of its gradient; where the
    # exact gradient is zero, a bf16 candidate's rounding noise picks a sign and moves it a whole step.
    ref_grad = torch.cat([torch.zeros(512, dtype=torch.float64), torch.randn(512, dtype=torch.float64)])
    ref_p = torch.cat([torch.zeros(512), 1e-4 * ref_grad[512:].sign()]).double()
    base_p = ref_p.float()
    noise_sign = torch.randn(512, generator=torch.Generator().manual_seed(0)).sign()
    cand_p = torch.cat([5e-3 * noise_sign, ref_p[512:].float()])  # far beyond any floor, but only there
    result = judge_steps(*_training_records(base_p, cand_p, ref_p, ref_grad), DEFAULT_POLICY, "bfloat16")
    w = next(c for c in result.outputs if c.role == "parameter")
    assert result.passed and w.metrics["elements_not_judged"] == 512
    # the same damage on elements that have a gradient is judged, and rejected
    moved = ref_p.float().clone()
    moved[512:] += 5e-3 * noise_sign
    rejected = judge_steps(*_training_records(base_p, moved, ref_p, ref_grad), DEFAULT_POLICY, "bfloat16")
    assert not rejected.passed and "updated parameter w" in rejected.verdict


def test_an_updated_parameter_may_move_by_the_parameter_floor_and_no_more() -> None:
    ref_grad = torch.randn(1024, dtype=torch.float64)
    ref_p = 1e-4 * ref_grad.sign()  # a bias after one Adam step from zero: RMS 1e-4
    base_p = ref_p.float()
    flips = torch.ones(1024)
    flips[:16] = -1.0  # rounding flipped 1.6% of the gradients' signs: those elements moved by 2 lr
    benign = base_p * flips
    result = judge_steps(*_training_records(base_p, benign, ref_p, ref_grad), DEFAULT_POLICY, "bfloat16")
    w = next(c for c in result.outputs if c.role == "parameter")
    assert result.passed and abs(w.threshold - DEFAULT_POLICY.parameter_floor) < 1e-8
    lost = torch.zeros(1024) + 5e-3  # an update that went wrong by 50 learning rates
    assert not judge_steps(*_training_records(base_p, lost, ref_p, ref_grad), DEFAULT_POLICY, "bfloat16").passed
