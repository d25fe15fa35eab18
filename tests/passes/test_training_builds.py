"""Training steps whose optimizer lives anywhere: every run from its own build, identical state or refused."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from profiler_core.errors import WorkloadError
from profiler_core.passes import apply_pass_plan
from profiler_core.passes.builds import check_same_state, fresh_build, initial_state
from profiler_core.passes.step_run import optimizers_of

pytest.importorskip("transformers")

# A GPT-2 language model, tiny and randomly initialised, trained one step with AdamW. {build}
# puts the optimizer somewhere and {take} finds it in step(); {seed} seeds the build or not.
_GPT2 = '''
import torch
from transformers import GPT2Config, GPT2LMHeadModel

def build(device):
    {seed}
    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=96, n_positions=32, bos_token_id=0,
                        eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(config).to(device).train()
    ids = torch.randint(0, 96, (2, 16), device=device)
    return model, ids, torch.optim.AdamW(model.parameters(), lr=1e-3)

class Trainer:
    def __init__(self, optimizer):
        self.optimizer = optimizer

{body}

def train(model, ids, optimizer):
    optimizer.zero_grad(set_to_none=True)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    return loss.detach()
'''

_PLACES = {
    "inputs": '''
def get_model_and_inputs(device="cpu"):
    model, ids, opt = build(device)
    return model, (ids, opt)

def step(model, inputs):
    ids, opt = inputs
    return train(model, ids, opt)
''',
    "model_attribute": '''
def get_model_and_inputs(device="cpu"):
    model, ids, opt = build(device)
    model._opt = opt
    return model, (ids,)

def step(model, inputs):
    return train(model, inputs[0], model._opt)
''',
    "module_global": '''
OPT = None

def get_model_and_inputs(device="cpu"):
    global OPT
    model, ids, OPT = build(device)
    return model, (ids,)

def step(model, inputs):
    return train(model, inputs[0], OPT)
''',
    "closure": '''
def get_model_and_inputs(device="cpu"):
    global step
    model, ids, opt = build(device)

    def step(model, inputs):
        return train(model, inputs[0], opt)

    return model, (ids,)
''',
    "trainer_object": '''
def get_model_and_inputs(device="cpu"):
    model, ids, opt = build(device)
    return model, (ids, Trainer(opt))

def step(model, inputs):
    ids, trainer = inputs
    return train(model, ids, trainer.optimizer)
''',
}


def gpt2_workload(tmp_path: Path, place: str, *, seeded: bool = True) -> Path:
    """A tiny GPT-2 training workload keeping its AdamW at ``place``."""
    path = tmp_path / f"gpt2_{place}.py"
    seed = "torch.manual_seed(0)" if seeded else "pass"
    path.write_text(textwrap.dedent(_GPT2).format(seed=seed, body=textwrap.dedent(_PLACES[place])))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("place", sorted(_PLACES))
def test_a_training_step_validates_wherever_its_optimizer_lives(tmp_path: Path, place: str) -> None:
    plan = apply_pass_plan(gpt2_workload(tmp_path, place), ["fused_optimizer"], device="cpu", compiler="eager")
    v = plan.validation
    assert v is not None and v.passed, v.reason if v else None
    assert plan.applied == ["fused_optimizer"]
    grads = {c.path for c in v.outputs if c.role == "gradient"}
    params = {c.path for c in v.outputs if c.role == "parameter"}
    model = fresh_build(tmp_path / f"gpt2_{place}.py", "cpu").model
    names = {n for n, _ in model.named_parameters()}
    assert grads == params == names  # every parameter's gradient and update compared
    assert "updated by AdamW" in v.notes[0]


def test_each_build_has_its_own_module_and_optimizer(tmp_path: Path) -> None:
    path = gpt2_workload(tmp_path, "module_global")
    first, second = fresh_build(path, "cpu"), fresh_build(path, "cpu")
    assert first.module is not second.module
    (opt1,), (opt2,) = optimizers_of(first.model), optimizers_of(second.model)
    assert opt1 is first.module.OPT and opt2 is second.module.OPT and opt1 is not opt2
    check_same_state(initial_state(first), initial_state(second), path)  # seeded: identical


def test_an_unseeded_workload_is_refused_naming_what_differs(tmp_path: Path) -> None:
    path = gpt2_workload(tmp_path, "model_attribute", seeded=False)
    with pytest.raises(WorkloadError, match=r"get_model_and_inputs is not deterministic: parameter "
                                            r"transformer\.\S+ differs between two calls; seed it"):
        apply_pass_plan(path, ["fused_optimizer"], device="cpu", compiler="eager")


def test_differing_optimizer_state_and_inputs_are_named() -> None:
    base = {"parameter w": torch.ones(2), "AdamW group 0 lr": torch.tensor(1e-3, dtype=torch.float64),
            "input [0]": torch.arange(3)}
    moved_lr = dict(base, **{"AdamW group 0 lr": torch.tensor(1e-2, dtype=torch.float64)})
    with pytest.raises(WorkloadError, match="AdamW group 0 lr differs"):
        check_same_state(base, moved_lr, "w.py")
    with pytest.raises(WorkloadError, match=r"input \[0\] differs"):
        check_same_state(base, dict(base, **{"input [0]": torch.arange(3) + 1}), "w.py")
    with pytest.raises(WorkloadError, match="buffer b exists in one build and not in the other"):
        check_same_state(base, dict(base, **{"buffer b": torch.zeros(1)}), "w.py")


def test_an_optimizer_kept_in_an_imported_module_is_refused(tmp_path: Path) -> None:
    (tmp_path / "shared_state.py").write_text("OPT = None\n")
    path = tmp_path / "imported.py"
    path.write_text(textwrap.dedent('''
        import torch
        import shared_state

        def get_model_and_inputs(device="cpu"):
            torch.manual_seed(0)
            model = torch.nn.Linear(4, 2).to(device).train()
            shared_state.OPT = torch.optim.SGD(model.parameters(), lr=0.1)
            return model, (torch.randn(3, 4, device=device),)

        def step(model, inputs):
            shared_state.OPT.zero_grad()
            loss = model(*inputs).square().mean()
            loss.backward()
            shared_state.OPT.step()
            return loss.detach()
    '''))
    with pytest.raises(WorkloadError, match=r"runs SGD\.step\(\) on an optimizer that does not hold the "
                                            r"parameters of the model it was built with"):
        apply_pass_plan(path, ["fused_optimizer"], device="cpu", compiler="eager")
