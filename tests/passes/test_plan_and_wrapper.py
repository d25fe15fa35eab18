"""apply_pass_plan on the examples: validated plans, plan.json and a working workload_optimized.py."""

from __future__ import annotations

import json
import operator
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch.fx import GraphModule

from profiler_core.errors import (
    ArtifactFormatError,
    PassError,
    SchemaError,
    ValidationFailedError,
    WorkloadError,
)
from profiler_core.passes import (
    GraphChange,
    GraphInfo,
    PassContext,
    PassEffect,
    PassLevel,
    PassStatus,
    PlanStatus,
    apply_pass_plan,
    apply_passes,
    read_plan,
    register_pass,
    registry,
)
from profiler_core.workload import load_workload

WRONG = "deliberately_wrong"


@pytest.fixture
def wrong_pass() -> Iterator[str]:
    """A Level-1 pass that scales the graph's output by 1.01: validation must catch it."""

    def scale_output(gm: GraphModule, info: GraphInfo) -> GraphChange:
        output = next(n for n in gm.graph.nodes if n.op == "output")
        (value,) = output.args[0]
        with gm.graph.inserting_before(output):
            scaled = gm.graph.call_function(operator.mul, (value, 1.01))
        output.args = ((scaled,),)
        return GraphChange(True, details={"scaled": 1})

    @register_pass(WRONG, level=PassLevel.DYNAMO_FX, symptom="none: a test of validation", source="tests")
    def deliberately_wrong(ctx: PassContext) -> PassEffect:
        """Scale the output by 1.01."""
        return PassEffect(graph_rewrite=scale_output)

    yield WRONG
    registry.unregister_pass(WRONG)


@pytest.mark.slow
def test_plan_and_wrapper_for_sdpa_attention(small_examples: Path, tmp_path: Path) -> None:
    workload = small_examples / "sdpa_attention.py"
    plan = apply_pass_plan(workload, ["qkv_fusion", "sdpa"], device="cpu", out_dir=tmp_path, compiler="eager")
    assert plan.status is PlanStatus.VALIDATED and plan.validation is not None and plan.validation.passed
    assert plan.applied == ["qkv_fusion", "sdpa"]
    assert plan.record("qkv_fusion").details["linears_after"] == 2
    assert plan.record("sdpa").ops_added == {"scaled_dot_product_attention": 1}
    assert plan.artifacts == {"plan": str(tmp_path / "plan.json"),
                              "workload": str(tmp_path / "workload_optimized.py")}
    assert read_plan(tmp_path / "plan.json") == plan

    wrapped = load_workload(tmp_path / "workload_optimized.py", device="cpu")  # the same contract
    original = load_workload(workload, device="cpu")
    assert isinstance(wrapped.inputs, tuple) and not wrapped.custom_step
    torch.testing.assert_close(wrapped.inputs, original.inputs)
    transformed, _ = apply_passes(original.model, original.inputs, plan.applied, device="cpu",
                                  compiler="eager")
    expected = wrapped.step(transformed, original.inputs)
    got = wrapped.step(wrapped.model, wrapped.inputs)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)  # the same transformed model
    torch.testing.assert_close(got, original.step(original.model, original.inputs), rtol=1e-4, atol=1e-4)


def test_wrong_transform_is_rejected(small_examples: Path, tmp_path: Path, wrong_pass: str) -> None:
    workload = small_examples / "sdpa_attention.py"
    # the rejection names the output, the rule's numbers and the threshold, and the reference
    numbers = (r"plan rejected: output .*: RMSE\(candidate, fp64\) [0-9.e+-]+ > [0-9.e+-]+ = .*"
               r"reference float64 on cpu, TF32 off")
    with pytest.raises(ValidationFailedError, match=numbers):
        apply_pass_plan(workload, [wrong_pass], device="cpu", out_dir=tmp_path / "a", compiler="eager")
    plan = apply_pass_plan(workload, [wrong_pass], device="cpu", out_dir=tmp_path / "b", compiler="eager",
                           raise_on_failure=False)
    assert plan.status is PlanStatus.REJECTED and plan.validation is not None
    assert plan.validation.max_abs_err is not None and plan.validation.max_abs_err > 1e-3
    assert plan.validation.outputs[0].mismatched > 0
    assert (tmp_path / "b" / "plan.json").is_file()
    assert not (tmp_path / "b" / "workload_optimized.py").exists()  # none for a rejected plan
    assert read_plan(tmp_path / "b" / "plan.json").status is PlanStatus.REJECTED


@pytest.mark.slow
def test_gpt2_small_all_level1_passes(small_examples: Path) -> None:
    plan = apply_pass_plan(small_examples / "gpt2.py", ["bf16_promotion", "sdpa", "qkv_fusion"], device="cpu",
                           compiler="eager")
    assert plan.status is PlanStatus.VALIDATED
    assert [p.name for p in plan.passes] == ["qkv_fusion", "sdpa", "bf16_promotion"]  # Level-1 order
    qkv, sdpa, bf16 = plan.passes
    # 2 layers x (q, k, v, c_proj, c_fc, mlp c_proj) + the LM head; each layer's q/k/v become one GEMM.
    assert (qkv.details["linears_before"], qkv.details["linears_after"]) == (13, 9)
    assert sdpa.details["attention_blocks"] == 2 and sdpa.details["causal"] == 2
    assert bf16.details["gemms_promoted"] == {"linear": 9, "scaled_dot_product_attention": 2}
    assert bf16.details["casts_cancelled"] > 0
    assert plan.compute_precision == "bfloat16"
    assert plan.validation is not None and plan.validation.outputs[0].tolerance.rtol == 5e-2


def test_lstm_encoder_only_the_structural_fix_applies(small_examples: Path) -> None:
    plan = apply_pass_plan(small_examples / "lstm_encoder.py", ["qkv_fusion", "sdpa", "rnn_reroute"],
                           device="cpu", compiler="eager")
    assert plan.status is PlanStatus.VALIDATED
    assert {p.name: p.status for p in plan.passes} == {
        "rnn_reroute": PassStatus.APPLIED, "qkv_fusion": PassStatus.NOT_APPLIED,
        "sdpa": PassStatus.NOT_APPLIED}
    assert plan.record("sdpa").reason == "no softmax(q @ k^T) @ v pattern in the graph"
    assert plan.record("rnn_reroute").details["rerouted"][0]["type"] == "LSTM"


def test_findings_name_the_passes(small_examples: Path, tmp_path: Path) -> None:
    findings = tmp_path / "findings.json"
    findings.write_text(json.dumps({"findings": [
        {"id": "F1", "symptom": "Q/K/V GEMMs at 16% occupancy", "transformation": "qkv_fusion"},
        {"id": "F2", "symptom": "LayerNorm is memory-bound", "transformation": None},
    ]}))
    plan = apply_pass_plan(small_examples / "sdpa_attention.py", ["sdpa"], device="cpu", findings=findings,
                           compiler="eager")
    assert [(p.name, p.requested_by) for p in plan.passes] == [("qkv_fusion", ["finding F1"]),
                                                                ("sdpa", ["argument"])]


@pytest.mark.parametrize(("content", "error", "message"), [
    ('[{"symptom": "x"}]', ArtifactFormatError, "finding 0 has no 'transformation' key"),
    ('{"findings": 3}', ArtifactFormatError, "expected a list of findings"),
    ("not json", ArtifactFormatError, "not a readable JSON findings file"),
    ('[{"transformation": "kernel_rewrite"}]', PassError, "unknown pass 'kernel_rewrite'"),
], ids=["no-transformation", "not-a-list", "not-json", "unknown-transformation"])
def test_bad_findings(small_examples: Path, tmp_path: Path, content: str, error: type, message: str) -> None:
    findings = tmp_path / "findings.json"
    findings.write_text(content)
    with pytest.raises(error, match=message):
        apply_pass_plan(small_examples / "sdpa_attention.py", [], device="cpu", findings=findings)


def test_request_errors(tmp_path: Path, small_examples: Path) -> None:
    with pytest.raises(PassError, match="no pass to apply"):
        apply_pass_plan(small_examples / "sdpa_attention.py", [], device="cpu")
    with pytest.raises(WorkloadError, match="no such workload file"):
        apply_pass_plan(tmp_path / "missing.py", ["sdpa"], device="cpu")
    with pytest.raises(PassError, match="unknown compile mode 'turbo'"):
        apply_pass_plan(small_examples / "sdpa_attention.py", ["sdpa"], device="cpu", compile_mode="turbo")


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such plan file"),
    ('{"schema_version": 9}', "plan schema_version 9 is not supported"),
    ('{"schema_version": 1, "workload": "w.py", "device": "cpu", "status": "maybe", "passes": []}',
     "invalid plan at 'status'"),
], ids=["missing", "future-version", "bad-status"])
def test_read_plan_errors(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "plan.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SchemaError, match=message):
        read_plan(path)


def test_graph_info_maps_placeholders_in_order() -> None:
    from torch import fx

    graph = fx.Graph()
    a, b = graph.placeholder("a"), graph.placeholder("b")
    graph.output((a, b))
    gm = fx.GraphModule(torch.nn.Module(), graph)
    assert GraphInfo(0, (1, 2), False, False, "cpu").placeholder_values(gm) == {a: 1, b: 2}
