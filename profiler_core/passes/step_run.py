"""One step of a workload, run from a known state, with everything validation compares.

An inference step is judged by what it returns. A training step is judged by what it does:
the loss it returns, the gradient every parameter received, and every parameter after the
optimizer's update. So baseline and candidate each run one step from identical state (each
its own build of the workload, see builds.py; the same RNG seed), and ``run_step`` records::

    StepRecord(outputs={"": loss}, gradients={"lm_head.weight": g, ...},
               parameters={"lm_head.weight": w_after, ...}, optimizers=["AdamW"], backward_ran=True)

Gradients are read just before an optimizer steps (a global step pre-hook: the optimizer may
live anywhere, among the inputs, on the model, in a module global or a closure), so a step
that zeroes them afterwards still has them compared; without an optimizer they are read after
the step. An optimizer that steps none of the running model's parameters is "foreign": it
belongs to another build, and validation refuses the workload.
"""

from __future__ import annotations

import copy
import gc
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


def optimizers_of(model: Any) -> list[torch.optim.Optimizer]:
    """Every live optimizer that updates a parameter of ``model``, wherever it is held, in creation order.

    The workload may keep its optimizer anywhere (the inputs, a model attribute, a module global,
    a closure, a helper object), so the search is over every live object, not a few places.
    """
    module = base_module(model)
    if not isinstance(module, torch.nn.Module):
        return []
    ids = {id(p) for p in module.parameters()}
    if not ids:
        return []
    return [obj for obj in gc.get_objects() if issubclass(type(obj), torch.optim.Optimizer)
            and any(id(p) in ids for g in obj.param_groups for p in g["params"])]


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
    foreign_optimizers: list[str] = field(default_factory=list)  # stepped, but none of this model's parameters
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
    grads: dict[str, torch.Tensor] = {}
    stepped: list[str] = []
    foreign: list[str] = []

    def before_step(opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        params = [p for group in opt.param_groups for p in group["params"]]
        if not any(id(p) in names for p in params):
            foreign.append(type(opt).__name__)
            return
        stepped.append(type(opt).__name__)
        for p in params:
            if p.grad is not None and id(p) in names:
                grads[names[id(p)]] = p.grad.detach().clone()

    handles = [register_optimizer_step_pre_hook(before_step)]
    torch.manual_seed(seed)
    try:
        outputs = call(model, inputs, step) if call is not None else step(model, inputs)
        leaves = snapshot_leaves(outputs)
    finally:
        for handle in handles:
            handle.remove()
    record = StepRecord(outputs=leaves, training=training, optimizers=list(dict.fromkeys(stepped)),
                        optimizer_steps=len(stepped), foreign_optimizers=foreign)
    if not training:
        return record
    params = dict(module.named_parameters()) if isinstance(module, torch.nn.Module) else {}
    if not grads:  # no optimizer stepped: whatever gradients the step left
        grads = {n: p.grad.detach().clone() for n, p in params.items() if p.grad is not None}
    record.gradients = grads
    record.backward_ran = bool(grads)
    if stepped:
        record.parameters = {n: p.detach().clone() for n, p in params.items()}
    return record
