"""step_graph_capture: the whole training step recorded as one CUDA graph and replayed.

``whole_step_cuda_graphs`` compiles the step in mode ``reduce-overhead``: Dynamo breaks the
step at ``loss.backward()`` and at the optimizer's ``step()``, so forward, backward and the
update replay as separate graphs with the autograd engine's host work between them, and the
GPU idles there (on an H200 GPT-2 step, a quarter of the step). This pass records the step
as it runs, forward (compiled by the plan's backend), backward, optimizer update, into **one**
``torch.cuda.CUDAGraph`` (PyTorch's "whole network capture"), and each later call replays it:

    first call   warm up on a side stream (Inductor compiles there), record the step once, put
                 parameters, buffers and optimizer state back where they were, replay once
    every call   copy new input values into the recorded inputs, replay, hand out copies of the
                 outputs, fire the optimizers' step hooks (they run on the host, which a replay skips)

What the graph needs, checked before it is tried (``step_graph_capture_applicable``):
every optimizer is Adam or AdamW (their state starts at zeros, so it can be reset in place for a
graph that holds its addresses; they are switched to ``capturable=True`` and, where supported,
``fused=True``: one kernel per update), or SGD without momentum (no state); no learning-rate
scheduler steps them (a graph bakes a float learning rate in). What is checked while warming
up: the step starts its gradients afresh (``zero_grad``), since a replay recomputes them from
None, and it never waits for the GPU on the host (one warm-up step runs with CUDA's sync debug
mode set to "error"): a step that does (``.item()``, data-dependent shapes, MoE routing read on
the host) cannot be recorded, and the pass fails naming that before any recording starts.
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.optim.optimizer import _global_optimizer_post_hooks, _global_optimizer_pre_hooks
from torch.utils._pytree import tree_flatten, tree_map

from profiler_core.errors import PassError
from profiler_core.passes.compile_step import _switch
from profiler_core.passes.contract import PassContext, PassEffect, Step
from profiler_core.passes.registry import PassLevel, register_pass
from profiler_core.passes.step_run import base_module
from profiler_core.rundir.layout import GRAPH_CAPTURE_ENV

WARMUP_STEPS = 3  # side-stream steps before recording (PyTorch's whole-network example uses 3; the checks need 3)
_ZERO_STATE = ("Adam", "AdamW")  # optimizers whose per-parameter state starts as zeros (step included)


def _optimizer_problem(opt: torch.optim.Optimizer) -> str | None:
    """None when ``opt`` can run inside one recorded graph, else why not."""
    kind = type(opt).__name__
    if kind in _ZERO_STATE and type(opt).__module__.startswith("torch.optim"):
        if any(g.get("differentiable") for g in opt.param_groups):
            return f"{kind} is differentiable, which cannot be captured"
        return None
    if kind == "SGD" and type(opt).__module__.startswith("torch.optim"):
        if any(g.get("momentum", 0) for g in opt.param_groups):
            return ("SGD with momentum starts its buffer from the first gradient, which a recorded step "
                    "cannot repeat")
        return None
    return (f"{kind}'s state cannot be reset in place for a recorded graph (Adam, AdamW and SGD without "
            "momentum can)")


def _schedulers_of(optimizers: tuple[Any, ...]) -> list[str]:
    import gc

    ids = {id(o) for o in optimizers}
    scheduler = torch.optim.lr_scheduler.LRScheduler
    return [type(s).__name__ for s in gc.get_objects()  # type(), not isinstance: no __class__ lookups
            if issubclass(type(s), scheduler) and id(getattr(s, "optimizer", None)) in ids]


def step_graph_capture_applicable(ctx: PassContext) -> str | None:
    """None when the whole step may be recorded as one CUDA graph, else why not."""
    if not ctx.training:
        return "the model is in eval mode: for an inference step use cuda_graphs"
    if not ctx.on_cuda:
        return (f"a CUDA graph records GPU work; on device '{ctx.device}' the step cannot be recorded "
                "(run the plan on a CUDA device)")
    if not ctx.optimizers:
        return "no torch.optim optimizer updates the model's parameters: whole_step_cuda_graphs serves such a step"
    for opt in ctx.optimizers:
        why = _optimizer_problem(opt)
        if why is not None:
            return why
    schedulers = _schedulers_of(ctx.optimizers)
    if schedulers:
        return (f"a learning-rate scheduler ({schedulers[0]}) changes the rate between steps, which a recorded "
                "graph would freeze")
    return None


@contextlib.contextmanager
def _hooks_silenced(optimizers: tuple[torch.optim.Optimizer, ...]) -> Iterator[None]:
    """The optimizers' step hooks (global and their own) off: warm-up and recording steps are not
    steps the user made; each replay fires them once instead."""
    tables: list[Any] = [_global_optimizer_pre_hooks, _global_optimizer_post_hooks,
              *(t for o in optimizers for t in (o._optimizer_step_pre_hooks, o._optimizer_step_post_hooks))]
    saved = [dict(t) for t in tables]
    for table in tables:
        table.clear()
    try:
        yield
    finally:
        for table, hooks in zip(tables, saved, strict=True):
            table.clear()
            table.update(hooks)


def _fire_step_hooks(opt: torch.optim.Optimizer) -> None:
    """What ``opt.step()`` tells its observers, once per replay (the replay ran no host code)."""
    for hook in (*_global_optimizer_pre_hooks.values(), *opt._optimizer_step_pre_hooks.values()):
        hook(opt, (), {})
    for hook in (*opt._optimizer_step_post_hooks.values(), *_global_optimizer_post_hooks.values()):
        hook(opt, (), {})


@contextlib.contextmanager
def _launches_traced(path: str | None) -> Iterator[None]:
    """With ``path`` (the harness's Kineto phase names it), the recording runs under torch.profiler and
    its trace is written there: the host ops and launches the graph holds, which its replays, inside
    the measured region, no longer record (their kernels carry only the replay's launch). Written
    only when the recording succeeds, gzip-compressed, in one rename."""
    if not path:
        yield
        return
    import gzip
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    from profiler_core.atomic_write import write_bytes_atomic

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        yield
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "graph_capture.json"
        prof.export_chrome_trace(str(raw))
        write_bytes_atomic(path, gzip.compress(raw.read_bytes(), compresslevel=6))


def _tensors(value: Any) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(value)
    return [v for v in leaves if isinstance(v, torch.Tensor)]


class GraphedStep:
    """A training step recorded as one CUDA graph on its first call and replayed on every call."""

    def __init__(self, step: Step, optimizers: tuple[torch.optim.Optimizer, ...], warmup: int = WARMUP_STEPS) -> None:
        functools.update_wrapper(self, step)
        self.step = step
        self.optimizers = optimizers
        self.warmup = warmup
        self.graph: torch.cuda.CUDAGraph | None = None
        self._inputs: list[torch.Tensor] = []
        self._outputs: Any = None
        self._grads: list[tuple[torch.nn.Parameter, torch.Tensor]] = []
        self._state: list[tuple[torch.optim.Optimizer, Any, dict[str, Any]]] = []

    def __call__(self, model: Any, inputs: tuple[Any, ...]) -> Any:
        if self.graph is None:
            self._record(model, inputs)
        else:
            self._use(inputs)
        assert self.graph is not None
        self._reinstall()
        self.graph.replay()
        for p, g in self._grads:
            p.grad = g
        for opt in self.optimizers:
            _fire_step_hooks(opt)
        return tree_map(lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v, self._outputs)

    # -------------------------------------------------------------- first call

    def _record(self, model: Any, inputs: tuple[Any, ...]) -> None:
        module = base_module(model)
        params = list(module.parameters()) if isinstance(module, torch.nn.Module) else []
        saved = [(t, t.detach().clone()) for t in params + (list(module.buffers()) if params else [])]
        states = {(id(o), p): {k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in e.items()}
                  for o in self.optimizers for p, e in o.state.items()}
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with _hooks_silenced(self.optimizers):
            with torch.cuda.stream(side):
                for i in range(max(self.warmup, 3)):
                    if i == 1:
                        self._check_fresh_gradients(model, inputs, params)
                    elif i == 2:
                        self._check_no_host_sync(model, inputs)
                    else:
                        self.step(model, inputs)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            for p in params:
                p.grad = None
            graph = torch.cuda.CUDAGraph()
            stream = torch.cuda.current_stream()
            try:
                with _launches_traced(os.environ.get(GRAPH_CAPTURE_ENV)), torch.cuda.graph(graph):
                    self._outputs = self.step(model, inputs)
            except Exception as err:
                torch.cuda.set_stream(stream)  # a failed capture leaves its side stream current
                first = str(err).splitlines()[0] if str(err) else type(err).__name__
                raise PassError(
                    f"step_graph_capture: the step cannot be recorded as one CUDA graph ({type(err).__name__}: "
                    f"{first}); it synchronises with the host or allocates outside the graph (e.g. .item(), "
                    "data-dependent shapes); use whole_step_cuda_graphs, which graphs what it can") from err
        self.graph = graph
        self._inputs = _tensors(inputs)
        self._grads = [(p, p.grad) for p in params if p.grad is not None]
        self._state = [(o, p, e) for o in self.optimizers for p, e in o.state.items()]
        with torch.no_grad():  # undo the warm-up: the first replay is the first step
            for live, value in saved:
                live.copy_(value)
            for opt, p, entry in self._state:
                before = states.get((id(opt), p))
                for key, value in entry.items():
                    if isinstance(value, torch.Tensor):
                        if before is not None and isinstance(before.get(key), torch.Tensor):
                            value.copy_(before[key])
                        else:
                            value.zero_()

    def _check_fresh_gradients(self, model: Any, inputs: tuple[Any, ...], params: list[torch.nn.Parameter]) -> None:
        """Run one warm-up step with NaN planted in every gradient: a step that does not start its
        gradients afresh carries them into the update, which a replay (gradients from None) would not."""
        for p in params:
            if p.grad is not None:
                p.grad = torch.full_like(p.grad, float("nan"))
        carried: list[bool] = []

        def look(opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
            grads = [p.grad for g in opt.param_groups for p in g["params"] if p.grad is not None]
            carried.append(any(bool(torch.isnan(g).any()) for g in grads))

        handles = [opt.register_step_pre_hook(look) for opt in self.optimizers]
        try:
            self.step(model, inputs)
        finally:
            for h in handles:
                h.remove()
        if any(carried):
            raise PassError("step_graph_capture: the step adds to the gradients left by the previous one (no "
                            "zero_grad before backward), which a recorded graph cannot repeat; zero the "
                            "gradients in the step, or use whole_step_cuda_graphs")

    def _check_no_host_sync(self, model: Any, inputs: tuple[Any, ...]) -> None:
        """Run one warm-up step with CUDA's synchronising calls made errors: a step that waits for the
        GPU (``.item()``, a device-to-host copy, data-dependent shapes) cannot be recorded, and
        finding that during a recording would leave the process's CUDA random-number state stuck in
        capture mode."""
        previous = torch.cuda.get_sync_debug_mode()
        with warnings.catch_warnings():  # "a prototype feature": what it catches is enough to refuse early
            warnings.simplefilter("ignore", UserWarning)
            torch.cuda.set_sync_debug_mode("error")
        try:
            self.step(model, inputs)
        except RuntimeError as err:
            if "synchronizing" not in str(err):
                raise
            raise PassError("step_graph_capture: the step waits for the GPU on the host (a synchronising CUDA call: "
                            ".item(), a device-to-host copy, data-dependent shapes), which a CUDA graph cannot "
                            "record; use whole_step_cuda_graphs, which graphs what it can") from err
        finally:
            torch.cuda.set_sync_debug_mode(previous)

    # -------------------------------------------------------------- every call

    def _use(self, inputs: tuple[Any, ...]) -> None:
        """Copy new input values into the recorded inputs (their addresses are in the graph)."""
        new = _tensors(inputs)
        if len(new) != len(self._inputs):
            raise PassError(f"step_graph_capture: the step was recorded with {len(self._inputs)} input tensors and "
                            f"is called with {len(new)}; call it with inputs of the recorded structure")
        for static, value in zip(self._inputs, new, strict=True):
            if value is static:
                continue
            if value.shape != static.shape or value.dtype != static.dtype:
                raise PassError(f"step_graph_capture: an input changed from {tuple(static.shape)} {static.dtype} "
                                f"to {tuple(value.shape)} {value.dtype}; a recorded graph replays one shape")
            static.copy_(value)

    def _reinstall(self) -> None:
        """Put the recorded optimizer state back where something replaced it (a snapshot restored, or
        the state cleared): its values are copied in, or reset to the start (zeros) when it is gone."""
        for opt, p, entry in self._state:
            live = opt.state.get(p)
            if live is entry:
                continue
            with torch.no_grad():
                for key, value in entry.items():
                    if isinstance(value, torch.Tensor):
                        if live and isinstance(live.get(key), torch.Tensor):
                            value.copy_(live[key])
                        else:
                            value.zero_()
            opt.state[p] = entry


def graph_whole_step(step: Step, optimizers: tuple[torch.optim.Optimizer, ...]) -> Step:
    """``step`` recorded as one CUDA graph on its first call, replayed afterwards (:class:`GraphedStep`)."""
    return GraphedStep(step, optimizers)


@register_pass(
    "step_graph_capture",
    level=PassLevel.INDUCTOR_CONFIG,
    symptom=("launch gaps between the graphed regions of a training step: host work between forward, "
             "backward and the optimizer's step"),
    order=32,
    aliases=("whole_step_graph", "one_graph_step"),
    applicable=step_graph_capture_applicable,
    supersedes=("whole_step_cuda_graphs",),
)
def step_graph_capture(ctx: PassContext) -> PassEffect:
    """Record the whole training step (forward, backward, optimizer update) as one CUDA graph and replay it."""
    reason = step_graph_capture_applicable(ctx)
    if reason is not None:
        return PassEffect.not_applied(reason)
    switched: dict[str, str] = {}
    for i, opt in enumerate(ctx.optimizers):
        if type(opt).__name__ in _ZERO_STATE:
            now, _ = _switch(opt)
            for group in opt.param_groups:
                group["capturable"] = True
            switched[f"{i}:{type(opt).__name__}"] = f"{now}, capturable"
    return PassEffect(
        step_transform=functools.partial(graph_whole_step, optimizers=tuple(ctx.optimizers)),
        captures_step=True,
        details={"scope": "forward, loss, backward and optimizer step in one CUDA graph",
                 "warmup_steps": WARMUP_STEPS, "optimizers": switched},
    )
