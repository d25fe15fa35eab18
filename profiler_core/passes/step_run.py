"""One step of a workload, run from a known state, with everything validation compares.

An inference step is judged by what it returns. A training step is judged by what it does:
the loss it returns, the gradient every parameter received, and every parameter after the
optimizer's update. So baseline and candidate each run one step from identical state (a
deep copy of the model together with its inputs, so an optimizer passed in the inputs keeps
pointing at the copy's parameters; the same RNG seed), and ``run_step`` records::

    StepRecord(outputs={"": loss}, gradients={"lm_head.weight": g, ...},
               parameters={"lm_head.weight": w_after, ...}, optimizers=["AdamW"], backward_ran=True)

Gradients are read just before the optimizer's step (a step pre-hook), so a step that zeroes
them afterwards still has them compared; without an optimizer they are read after the step.
The workload contract for training: ``get_model_and_inputs`` returns the model in train mode
and its optimizer among the inputs, e.g. ``(model, (input_ids, labels, optimizer))``; ``step``
runs forward, backward and ``optimizer.step()``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from profiler_core.passes.leaves import Leaves, snapshot_leaves

Step = Callable[[Any, tuple[Any, ...]], Any]


def base_module(model: Any) -> Any:
    """The module under a ``torch.compile`` wrapper (the model itself otherwise)."""
    return getattr(model, "_orig_mod", model)


def _walk_objects(value: Any, depth: int = 0) -> Iterator[Any]:
    yield value
    if depth >= 4:
        return
    children: Any = ()
    if isinstance(value, dict):
        children = value.values()
    elif isinstance(value, list | tuple):
        children = value
    for child in children:
        yield from _walk_objects(child, depth + 1)


def find_optimizers(inputs: tuple[Any, ...]) -> list[torch.optim.Optimizer]:
    """The optimizers among the inputs (nested in tuples, lists and dicts), each once, in order."""
    found: dict[int, torch.optim.Optimizer] = {}
    for value in _walk_objects(inputs):
        if isinstance(value, torch.optim.Optimizer):
            found.setdefault(id(value), value)
    return list(found.values())


def copy_state(model: Any, inputs: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]]:
    """A deep copy of model and inputs made together: an optimizer in the inputs follows the copied parameters."""
    return copy.deepcopy((model, inputs))


def parameter_names(model: Any) -> dict[int, str]:
    """id(parameter) -> its name in the (unwrapped) model."""
    module = base_module(model)
    if not isinstance(module, torch.nn.Module):
        return {}
    return {id(p): name for name, p in module.named_parameters()}


def parameter_versions(model: Any) -> dict[str, int]:
    """Each parameter's in-place version counter: it moves when anything updates the parameter."""
    module = base_module(model)
    if not isinstance(module, torch.nn.Module):
        return {}
    return {name: p._version for name, p in module.named_parameters()}


@dataclass
class StepRecord:
    """What one step of one model showed: outputs, gradients and updated parameters, by name."""

    outputs: Leaves
    gradients: dict[str, torch.Tensor] = field(default_factory=dict)
    parameters: dict[str, torch.Tensor] = field(default_factory=dict)
    optimizers: list[str] = field(default_factory=list)  # class names of the optimizers that stepped
    optimizer_steps: int = 0
    foreign_optimizers: list[str] = field(default_factory=list)  # stepped, but not among the inputs
    training: bool = False  # the model was in train mode
    backward_ran: bool = False  # some parameter received a gradient

    @property
    def updated(self) -> bool:
        """Whether an optimizer stepped the parameters."""
        return self.optimizer_steps > 0


class StateSnapshot:
    """Parameters, buffers and optimizer state of one model, to be put back in place.

    In place, so compiled code (and CUDA graphs, which hold the parameters' addresses) keep
    pointing at the same tensors; warm-up steps of a training plan are undone with it. The
    optimizers' per-parameter state is restored, not their settings: a pass may have changed
    those (a fused implementation) after the snapshot.
    """

    def __init__(self, model: Any, optimizers: list[torch.optim.Optimizer]) -> None:
        module = base_module(model)
        self._tensors = ([(t, t.detach().clone()) for t in list(module.parameters()) + list(module.buffers())]
                         if isinstance(module, torch.nn.Module) else [])
        self._optimizers = [(opt, _copied_state(opt.state)) for opt in optimizers]

    def restore(self) -> None:
        with torch.no_grad():
            for live, saved in self._tensors:
                live.copy_(saved)
                if isinstance(live, torch.nn.Parameter):
                    live.grad = None
        for opt, state in self._optimizers:
            opt.state.clear()
            opt.state.update(_copied_state(state))


def _copied_state(state: Any) -> dict[Any, dict[str, Any]]:
    """An optimizer's per-parameter state with its values copied (the parameter keys kept)."""
    return {p: {k: v.detach().clone() if isinstance(v, torch.Tensor) else copy.deepcopy(v)
                for k, v in entry.items()} for p, entry in state.items()}


def run_step(step: Step, model: Any, inputs: tuple[Any, ...], *, seed: int = 0,
             call: Callable[[Any, tuple[Any, ...], Step], Any] | None = None) -> StepRecord:
    """Run ``step`` once from the current state and record what validation compares.

    ``call(model, inputs, step)`` runs the step (default: ``step(model, inputs)``), so a
    transformed model's failures can be translated by the caller.
    """
    module = base_module(model)
    training = bool(getattr(module, "training", False))
    names = parameter_names(model) if training else {}
    optimizers = find_optimizers(inputs) if training else []
    grads: dict[str, torch.Tensor] = {}
    steps = 0

    def before_step(opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        nonlocal steps
        steps += 1
        for group in opt.param_groups:
            for p in group["params"]:
                if p.grad is not None and id(p) in names:
                    grads[names[id(p)]] = p.grad.detach().clone()

    foreign: list[str] = []
    known = {id(o) for o in optimizers}

    def any_step(opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if id(opt) not in known:
            foreign.append(type(opt).__name__)

    handles = [opt.register_step_pre_hook(before_step) for opt in optimizers]
    handles.append(register_optimizer_step_pre_hook(any_step))
    torch.manual_seed(seed)
    try:
        outputs = call(model, inputs, step) if call is not None else step(model, inputs)
        leaves = snapshot_leaves(outputs)
    finally:
        for handle in handles:
            handle.remove()
    record = StepRecord(outputs=leaves, training=training,
                        optimizers=[type(o).__name__ for o in optimizers], optimizer_steps=steps,
                        foreign_optimizers=foreign)
    if not training:
        return record
    params = dict(module.named_parameters()) if isinstance(module, torch.nn.Module) else {}
    if not grads:  # no optimizer stepped: whatever gradients the step left
        grads = {n: p.grad.detach().clone() for n, p in params.items() if p.grad is not None}
    record.gradients = grads
    record.backward_ran = bool(grads)
    if steps:
        record.parameters = {n: p.detach().clone() for n, p in params.items()}
    return record
