"""Builds of a training workload: each run from its own call of ``get_model_and_inputs``.

A training step changes state: parameters, buffers, the optimizer's moments. Baseline, twin
(the reproducibility check) and candidate each need that state fresh, and each needs the
optimizer that steps *its* parameters, wherever the workload keeps it: among the inputs, on
the model (``model._opt``), in a module global, in a closure, in a helper object. A deep
copy follows only what it can reach from the model and inputs, so every build is instead a
fresh import of the workload file (a new module object: its globals are its own) and a fresh
call of its ``get_model_and_inputs``::

    first = load_workload(path, device)          # the baseline
    state = initial_state(first)                 # before anything steps
    twin = fresh_build(path, device)
    check_same_state(state, initial_state(twin), path)   # "parameter lm_head.weight differs; seed it"

Two builds are interchangeable only if the call is deterministic: the same parameters,
buffers, optimizer state and input tensors, bit for bit. A workload that does not seed its
random initialisation is refused by name. State the workload keeps in other modules it
imports is shared by every build and is not supported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from profiler_core.errors import WorkloadError
from profiler_core.passes.step_run import base_module, optimizers_of, parameter_names
from profiler_core.workload import ENTRY_POINT, Workload, load_workload


def fresh_build(path: str | Path, device: str) -> Workload:
    """The workload imported anew (its own module object) and built by a new call of its entry point."""
    return load_workload(path, device=device)


def _tensors(prefix: str, value: Any, out: dict[str, torch.Tensor], depth: int = 0) -> None:
    if isinstance(value, torch.Tensor):
        out[prefix] = value.detach().clone()
    elif isinstance(value, dict) and depth < 4:
        for key, item in value.items():
            _tensors(f"{prefix}[{key!r}]", item, out, depth + 1)
    elif isinstance(value, list | tuple) and depth < 4:
        for i, item in enumerate(value):
            _tensors(f"{prefix}[{i}]", item, out, depth + 1)


def initial_state(build: Workload) -> dict[str, torch.Tensor]:
    """Copies of a build's parameters, buffers, optimizer state and input tensors, by name.

    Names read ``parameter transformer.h.0.attn.c_attn.weight``, ``buffer ...``,
    ``AdamW state lm_head.weight.exp_avg``, ``input [0]``; an optimizer's hyper-parameters
    are compared too (``AdamW group 0 lr``).
    """
    module = base_module(build.model)
    state: dict[str, torch.Tensor] = {}
    if isinstance(module, torch.nn.Module):
        for name, p in module.named_parameters():
            state[f"parameter {name}"] = p.detach().clone()
        for name, b in module.named_buffers():
            state[f"buffer {name}"] = b.detach().clone()
    names = parameter_names(build.model)
    for opt in optimizers_of(build.model):
        kind = type(opt).__name__
        for i, group in enumerate(opt.param_groups):
            for key, value in group.items():
                if key != "params" and isinstance(value, int | float | bool):
                    state[f"{kind} group {i} {key}"] = torch.tensor(float(value), dtype=torch.float64)
        for param, entry in opt.state.items():
            for key, value in entry.items():
                _tensors(f"{kind} state {names.get(id(param), '?')}.{key}", value, state)
    _tensors("input ", list(build.inputs), state)
    return state


def _differs(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return True
    return not torch.equal(a.cpu(), b.cpu())


def check_same_state(first: dict[str, torch.Tensor], second: dict[str, torch.Tensor], path: str | Path) -> None:
    """WorkloadError naming the first piece of state two builds disagree on."""
    for name in sorted(first.keys() | second.keys()):
        if name not in first or name not in second:
            raise WorkloadError(
                f"{path}: {ENTRY_POINT} is not deterministic: {name} exists in one build and not in the "
                f"other; build the same model, optimizer and inputs on every call")
    for name, value in first.items():
        if _differs(value, second[name]):
            raise WorkloadError(
                f"{path}: {ENTRY_POINT} is not deterministic: {name} differs between two calls; seed it "
                f"(torch.manual_seed(0) at the top of {ENTRY_POINT}), since baseline and candidate each "
                "run from their own build of the model, optimizer and inputs")
