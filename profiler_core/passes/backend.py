"""The plan's torch.compile backend: Level-1 rewrites on each Dynamo graph, then Inductor with Levels 2-3.

Dynamo hands the backend one FX graph per compiled region (graph breaks make several), with
real example inputs, before AOTAutograd has decomposed anything: shared-input projections and
manual attention are still visible. The backend runs the plan's Level-1 rewrites in order
(recording node counts and the ops removed and added), then calls Inductor exactly as
``torch.compile(mode=...)`` would, with the plan's config patches and its post-grad passes
installed as ``post_grad_custom_post_pass``::

    compiled = torch.compile(model, backend=PlanBackend(rewrites=[("sdpa", canonicalize_attention)]))

While post-grad passes must report what they did, Inductor's FX-graph and AOTAutograd caches
are bypassed for this compile (a cache hit would skip the passes); their uuid() keeps the
caches correct for every later compile of the same plan.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
from torch.fx import GraphModule

from profiler_core.errors import PassError, ProfilerError
from profiler_core.passes.contract import GraphInfo, GraphRewrite
from profiler_core.passes.fx_nodes import call_node_count, op_histogram, refresh_meta
from profiler_core.passes.plan import GraphRecord
from profiler_core.passes.post_grad import PostGradPipeline
from profiler_core.passes.registry import PassLevel


@contextlib.contextmanager
def float32_matmul_precision(value: str | None) -> Iterator[None]:
    """Run the block under ``torch.set_float32_matmul_precision(value)``; restore afterwards."""
    if value is None:
        yield
        return
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(value)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


def _difference(a: Counter[str], b: Counter[str]) -> dict[str, int]:
    return dict(sorted((a - b).items()))


class PlanBackend:
    """A Dynamo backend applying one plan: callable as ``backend(gm, example_inputs)``."""

    def __init__(
        self,
        *,
        rewrites: Sequence[tuple[str, GraphRewrite]] = (),
        post_grad_passes: Sequence[Any] = (),
        inductor_config: Mapping[str, Any] | None = None,
        compile_mode: str | None = None,
        matmul_precision: str | None = None,
        compiler: str = "inductor",
        device: str = "cpu",
        training: bool = False,
        record_post_grad: bool = True,
    ) -> None:
        self.rewrites = tuple(rewrites)
        self.post_grad_passes = tuple(post_grad_passes)
        self.inductor_config = dict(inductor_config or {})
        self.compile_mode = compile_mode or "default"
        self.matmul_precision = matmul_precision
        self.compiler = compiler
        self.device = device
        self.training = training
        self.record_post_grad = record_post_grad
        self.graph_records: dict[str, list[GraphRecord]] = {name: [] for name, _ in self.rewrites}
        self.graphs_compiled = 0

    def __call__(self, gm: GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        index = self.graphs_compiled
        self.graphs_compiled += 1
        info = GraphInfo(index=index, example_inputs=tuple(example_inputs),
                         grad_enabled=torch.is_grad_enabled(), training=self.training, device=self.device,
                         compiler=self.compiler)
        for name, rewrite in self.rewrites:
            self.graph_records[name].append(self._run_rewrite(name, rewrite, gm, info))
        if self.compiler == "eager":
            return gm.forward
        return self._inductor(gm, list(example_inputs))

    def _run_rewrite(self, name: str, rewrite: GraphRewrite, gm: GraphModule, info: GraphInfo) -> GraphRecord:
        before, nodes_before = op_histogram(gm), call_node_count(gm)
        try:
            change = rewrite(gm, info)
            if change.applied:
                gm.graph.lint()
                gm.recompile()
                refresh_meta(gm)
        except ProfilerError:
            raise
        except Exception as err:
            raise PassError(
                f"pass '{name}' failed on Dynamo graph {info.index}: {type(err).__name__}: {err}; "
                "run the plan without it"
            ) from err
        after = op_histogram(gm)
        return GraphRecord(
            index=info.index, level=PassLevel.DYNAMO_FX, applied=change.applied, reason=change.reason,
            nodes_before=nodes_before, nodes_after=call_node_count(gm),
            ops_removed=_difference(before, after), ops_added=_difference(after, before),
            details=dict(change.details),
        )

    def inductor_options(self) -> dict[str, Any]:
        """The Inductor config patches this plan compiles with (mode options first, then the passes')."""
        from torch._inductor import list_mode_options

        options: dict[str, Any] = dict(list_mode_options(self.compile_mode))
        options.update(self.inductor_config)
        if self.post_grad_passes:
            existing = torch._inductor.config.post_grad_custom_post_pass
            chain = ([existing] if existing is not None else []) + list(self.post_grad_passes)
            options["post_grad_custom_post_pass"] = PostGradPipeline(chain)
            if self.record_post_grad:
                options["fx_graph_cache"] = False
        return options

    def _inductor(self, gm: GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        # torch.compile's own Inductor entry: applies the options exactly as mode=/options= would
        # (including its CUPTI workaround for CUDA graphs under a profiler).
        inner = torch._TorchCompileInductorWrapper(None, self.inductor_options(), None)
        caches = (torch._functorch.config.patch(enable_autograd_cache=False)
                  if self.post_grad_passes and self.record_post_grad else contextlib.nullcontext())
        with caches, float32_matmul_precision(self.matmul_precision):
            compiled = inner(gm, example_inputs)
        if self.matmul_precision is None:
            return compiled
        return _under_precision(compiled, self.matmul_precision)


def _under_precision(compiled: Callable[..., Any], precision: str) -> Callable[..., Any]:
    """``compiled``, run under a float32 matmul precision; keeps Dynamo's calling convention.

    The call is forwarded exactly as made, and ``_boxed_call`` is copied: Dynamo versions
    differ in whether they honour it for a backend's callable (torch 2.11 on the H200 calls
    it unboxed), and forwarding as-is is right under both.
    """

    def run(*args: Any, **kwargs: Any) -> Any:
        with float32_matmul_precision(precision):
            return compiled(*args, **kwargs)

    if getattr(compiled, "_boxed_call", False):
        run._boxed_call = True  # type: ignore[attr-defined]
    return run
