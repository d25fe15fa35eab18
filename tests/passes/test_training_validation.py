"""Validation of training steps: loss, gradients and updated parameters from identical state; bad workloads."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

from profiler_core.errors import WorkloadError
from profiler_core.passes import apply_pass_plan
from profiler_core.passes.contract import GraphChange, PassEffect
from profiler_core.passes.registry import PassLevel, register_pass, unregister_pass
from profiler_core.passes.step_run import StateSnapshot, copy_state, find_optimizers, run_step
from profiler_core.passes.step_validation import compare_steps
from profiler_core.passes.validation import DtypePolicy
from tests.passes.models import EXAMPLES

_TRAIN = '''
import torch
from torch import nn

def get_model_and_inputs(device="cpu"):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.{act}(), {dropout}nn.Linear(16, 4)).to(device).train()
    x, y = torch.randn(6, 8, device=device), torch.randn(6, 4, device=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    {globals}
    return model, ({inputs})

def step(model, inputs):
    x, y, *rest = inputs
    opt = rest[0] if rest else OPT
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    {optimizer_step}
    {returns}
'''


def _workload(tmp_path: Path, name: str = "train.py", *, act: str = "ReLU", dropout: str = "",
              inputs: str = "x, y, optimizer", globals_: str = "", optimizer_step: str = "opt.step()",
              returns: str = "return loss.detach()") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(_TRAIN.format(act=act, dropout=dropout, inputs=inputs, globals=globals_,
                                                  optimizer_step=optimizer_step, returns=returns)))
    return path


def _state() -> tuple[nn.Module, tuple]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    return model, (torch.randn(6, 8), torch.randn(6, 4), opt)


def _step(model: nn.Module, inputs: tuple) -> torch.Tensor:
    x, y, opt = inputs
    opt.zero_grad(set_to_none=True)  # the gradients are gone after the step: read before opt.step()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


def test_a_step_records_loss_gradients_and_updates_from_a_joint_copy() -> None:
    model, inputs = _state()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    copy_model, copy_inputs = copy_state(model, inputs)
    record = run_step(_step, copy_model, copy_inputs)
    assert find_optimizers(copy_inputs)[0] is copy_inputs[2]
    assert record.training and record.backward_ran and record.optimizers == ["AdamW"] and record.optimizer_steps == 1
    assert sorted(record.gradients) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    assert all(g.abs().sum() > 0 for g in record.gradients.values())  # read before zero_grad cleared them
    for name, p in model.named_parameters():  # the original did not move: the copy's optimizer stepped the copy
        torch.testing.assert_close(p, before[name], rtol=0, atol=0)
        assert not torch.equal(record.parameters[name], before[name])


def test_a_restored_snapshot_repeats_the_step_exactly() -> None:
    model, inputs = copy_state(*_state())
    snapshot = StateSnapshot(model, find_optimizers(inputs))
    first = run_step(_step, model, inputs)
    snapshot.restore()
    second = run_step(_step, model, inputs)
    result = compare_steps(first, second, DtypePolicy())
    assert result.passed and result.max_abs_err == 0.0
    assert {c.role for c in result.outputs} == {"output", "gradient", "parameter"}
    assert "compared 1 output tensor(s), 4 gradients and 4 parameters updated by AdamW" in result.notes[0]


def test_a_changed_gradient_fails_and_names_the_parameter() -> None:
    model, inputs = _state()
    base = run_step(_step, *copy_state(model, inputs))
    other_model, other_inputs = copy_state(model, inputs)
    with torch.no_grad():
        other_model[2].weight[0, 0] += 0.05  # the last layer's weight moves: its bias gradient and more change
    cand = run_step(_step, other_model, other_inputs)
    result = compare_steps(base, cand, DtypePolicy())
    assert not result.passed
    failed = {(c.role, c.path) for c in result.outputs if not c.passed}
    assert ("parameter", "2.weight") in failed and ("gradient", "0.weight") in failed
    assert "gradient of" in result.reason and "updated parameter 2.weight" in result.reason


def test_a_parameter_left_in_bf16_fails_on_dtype() -> None:
    model, inputs = _state()
    base = run_step(_step, *copy_state(model, inputs))
    cand = run_step(_step, *copy_state(model, inputs))
    cand.parameters["0.weight"] = cand.parameters["0.weight"].bfloat16()
    result = compare_steps(base, cand, DtypePolicy("bfloat16"))
    assert not result.passed and "updated parameter 0.weight: dtype torch.bfloat16 differs" in result.reason
    assert not any("stay float32" in n for n in result.notes)


@pytest.fixture
def _scaling_pass() -> object:
    """A Level-1 rewrite that scales the output of every graph by 1.01: the loss and the gradients move."""

    def scale(gm: torch.fx.GraphModule, info: object) -> GraphChange:
        out = next(n for n in gm.graph.nodes if n.op == "output")
        (value,) = out.args[0] if isinstance(out.args[0], tuple) else (out.args[0],)
        with gm.graph.inserting_before(out):
            scaled = gm.graph.call_function(torch.mul, (value, 1.01))
        out.args = ((scaled,),) if isinstance(out.args[0], tuple) else (scaled,)
        gm.recompile()
        return GraphChange(True)

    @register_pass("test_scale_output", level=PassLevel.DYNAMO_FX, symptom="test only")
    def scale_pass(ctx: object) -> PassEffect:
        """Scale the model's output."""
        return PassEffect(graph_rewrite=scale)

    yield "test_scale_output"
    unregister_pass("test_scale_output")


@pytest.mark.slow
def test_a_training_plan_that_changes_the_numbers_is_rejected_naming_gradients(tmp_path: Path,
                                                                                _scaling_pass: str) -> None:
    plan = apply_pass_plan(_workload(tmp_path), [_scaling_pass], device="cpu", compiler="eager",
                           raise_on_failure=False)
    v = plan.validation
    assert v is not None and not v.passed
    roles = {c.role for c in v.outputs if not c.passed}
    assert roles >= {"output", "gradient"}  # AdamW's first update is lr * sign(g): the scaled gradients agree
    assert "gradient of" in v.reason


@pytest.mark.slow
def test_the_bert_training_example_validates_loss_gradients_and_updates(small_examples: Path) -> None:
    pytest.importorskip("transformers")
    plan = apply_pass_plan(small_examples / "hf_bert_train.py", ["qkv_fusion"], device="cpu", compiler="eager")
    v = plan.validation
    assert v is not None and v.passed and plan.applied == ["qkv_fusion"]
    grads = [c for c in v.outputs if c.role == "gradient"]
    params = [c for c in v.outputs if c.role == "parameter"]
    assert len(grads) == len(params) > 30  # every parameter of the model (the tied decoder weight counted once)
    assert any("attention.self.query.weight" in c.path for c in grads)
    assert v.notes[0].startswith("training step: compared 1 output tensor(s)")
    assert "updated by AdamW" in v.notes[0]


def test_dropout_left_on_is_refused_before_any_pass_is_judged(tmp_path: Path) -> None:
    workload = _workload(tmp_path, dropout="nn.Dropout(0.5), ")
    with pytest.raises(WorkloadError, match=r"different random seeds: (output|gradient) .* moved .*dropout"):
        apply_pass_plan(workload, ["qkv_fusion"], device="cpu", compiler="eager")


def test_sampling_in_an_inference_step_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sample.py"
    path.write_text(textwrap.dedent('''
        import torch
        def get_model_and_inputs(device="cpu"):
            return torch.nn.Linear(4, 8).eval(), (torch.randn(2, 4),)
        def step(model, inputs):
            probs = model(*inputs).softmax(-1)
            return {"logits": model(*inputs), "tokens": torch.multinomial(probs, 1)}
    '''))
    with pytest.raises(WorkloadError, match=r"output \['tokens'\] moved"):
        apply_pass_plan(path, ["qkv_fusion"], device="cpu", compiler="eager")


@pytest.mark.slow
def test_an_optimizer_in_a_module_global_is_the_builds_own(tmp_path: Path) -> None:
    workload = _workload(tmp_path, inputs="x, y", globals_="global OPT; OPT = optimizer")
    plan = apply_pass_plan(workload, ["qkv_fusion"], device="cpu", compiler="eager", raise_on_failure=False)
    v = plan.validation
    assert v is not None and v.passed
    assert {c.role for c in v.outputs} == {"output", "gradient", "parameter"}
    assert "4 gradients and 4 parameters updated by AdamW" in v.notes[0]


@pytest.mark.slow
def test_a_training_step_without_optimizer_says_what_was_compared(tmp_path: Path) -> None:
    workload = _workload(tmp_path, inputs="x, y", globals_="global OPT; OPT = None", optimizer_step="",
                         returns="return loss.detach()")
    text = workload.read_text().replace("opt.zero_grad(set_to_none=True)", "pass")
    workload.write_text(text)
    plan = apply_pass_plan(workload, ["qkv_fusion"], device="cpu", compiler="eager", raise_on_failure=False)
    v = plan.validation
    assert v is not None and v.passed
    assert "without an optimizer in the inputs: compared 1 output tensor(s) and 4 gradients" in v.notes[0]
    assert {c.role for c in v.outputs} == {"output", "gradient"}


@pytest.mark.slow
def test_a_step_returning_nothing_compares_gradients_and_updates(tmp_path: Path) -> None:
    plan = apply_pass_plan(_workload(tmp_path, returns="return None"), ["qkv_fusion"], device="cpu",
                           compiler="eager", raise_on_failure=False)
    v = plan.validation
    assert v is not None and v.passed
    assert "no output (the step returns nothing)" in v.notes[0]


def test_an_inference_step_returning_nothing_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "silent.py"
    path.write_text(textwrap.dedent('''
        import torch
        def get_model_and_inputs(device="cpu"):
            return torch.nn.Linear(4, 8).eval(), (torch.randn(2, 4),)
        def step(model, inputs):
            model(*inputs)
    '''))
    with pytest.raises(WorkloadError, match="returned nothing and ran no backward pass"):
        apply_pass_plan(path, ["qkv_fusion"], device="cpu", compiler="eager")


def test_examples_directory_has_the_training_example() -> None:
    assert (EXAMPLES / "hf_bert_train.py").is_file()
