"""What a pass function receives and returns: the one contract built-ins and plugins share.

A pass is a plain function ``fn(ctx: PassContext) -> PassEffect``. It runs once, before the
model is compiled, and either declines (``PassEffect.not_applied(reason)``) or says what it
contributes at each level::

    Level 1  graph_rewrite(gm, GraphInfo) -> GraphChange   run on every Dynamo FX graph, before
             AOTAutograd (module-level edits are made on ``ctx.model`` directly, in place)
    Level 2  post_grad_pass                                 an Inductor CustomGraphPass with a uuid()
    Level 3  inductor_config / compile_mode / matmul_precision

A pass for a training step may also act on the step itself: change the optimizers in
``ctx.optimizers`` in place (every optimizer that updates the model's parameters, wherever
the workload keeps it), wrap the step function (``step_transform``), or have the plan compile
the optimizers' ``step`` (``compile_optimizer``) or the whole step (``compile_step``) with the
plan's backend, or record the step as one CUDA graph itself (``captures_step``; such a pass
is registered as superseding the passes that graph the step another way).

The manager does the ceremony (ordering, logging, APPLIED / NOT APPLIED, wrapping failures).
A Level-1 rewrite decides legality per graph: it returns ``GraphChange(applied=False,
reason=...)`` when the graph holds nothing it may change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from torch._inductor.custom_graph_pass import CustomGraphPass


@dataclass(frozen=True)
class PassContext:
    """What a pass sees: the working copy of the model, example inputs, device and findings."""

    model: Any  # torch.nn.Module: a private copy; module-level passes may edit it in place
    inputs: tuple[Any, ...]
    device: str
    findings: tuple[Mapping[str, Any], ...] = ()  # the findings that named this pass
    compiler: str = "inductor"  # what the plan compiles with unless a pass asks otherwise ("eager": nothing)
    optimizers: tuple[Any, ...] = ()  # torch.optim optimizers updating the model's parameters (training)

    @property
    def training(self) -> bool:
        """Whether the model is in train mode."""
        return bool(getattr(self.model, "training", False))

    @property
    def on_cuda(self) -> bool:
        """Whether the plan targets a CUDA device."""
        return self.device.startswith("cuda")


@dataclass(frozen=True)
class GraphChange:
    """What a Level-1 rewrite did to one Dynamo graph (or why it left the graph alone)."""

    applied: bool
    reason: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GraphInfo:
    """The facts about one Dynamo graph a rewrite may need beyond the graph itself."""

    index: int  # which Dynamo graph: graph breaks make several
    example_inputs: tuple[Any, ...]  # real values, one per placeholder, in placeholder order
    grad_enabled: bool  # autograd state the graph is compiled under (freezing needs it off)
    training: bool
    device: str
    compiler: str = "inductor"  # what compiles the graph after the rewrites ("eager": nothing)

    def placeholder_values(self, gm: torch.fx.GraphModule) -> dict[Any, Any]:
        """Map each placeholder node of ``gm`` to its real example value."""
        nodes = [n for n in gm.graph.nodes if n.op == "placeholder"]
        return dict(zip(nodes, self.example_inputs, strict=False))


GraphRewrite = Callable[["torch.fx.GraphModule", GraphInfo], GraphChange]
Step = Callable[[Any, tuple[Any, ...]], Any]
StepTransform = Callable[[Step], Step]  # the workload's step -> the step the plan runs


@dataclass(frozen=True)
class RunFacts:
    """What the first call of the compiled model showed, for passes that verify themselves then."""

    graphs_compiled: int
    inductor_counters: Mapping[str, int]  # torch._dynamo.utils.counters["inductor"], this call's delta


Verify = Callable[[RunFacts], GraphChange]


@dataclass(frozen=True)
class PassEffect:
    """A pass's contribution to the plan, or its reason for declining."""

    applied: bool = True
    reason: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)
    graph_rewrite: GraphRewrite | None = None
    post_grad_passes: Sequence[CustomGraphPass] = ()
    inductor_config: Mapping[str, Any] = field(default_factory=dict)
    compile_mode: str | None = None
    matmul_precision: str | None = None  # torch.set_float32_matmul_precision value, for compiled code
    compute_precision: str | None = None  # lowest precision introduced: sets validation tolerance
    compiler: str | None = None  # "inductor": compile the plan with Inductor although it was asked for eager
    verify: Verify | None = None  # called after the first call; may turn APPLIED into NOT APPLIED
    step_transform: StepTransform | None = None  # wraps the step function (autocast around the step)
    compile_optimizer: bool = False  # compile each optimizer's step() with the plan's backend
    compile_step: bool = False  # compile the whole step (forward, backward, optimizer) with the plan's backend
    captures_step: bool = False  # step_transform records the step as one CUDA graph: the plan adds none of its own

    @classmethod
    def not_applied(cls, reason: str, **details: Any) -> PassEffect:
        """A pass that declines, with the reason shown to the user."""
        return cls(applied=False, reason=reason, details=details)
