"""The pass manager: orders passes by level, runs them, compiles once, records APPLIED / NOT APPLIED.

    model, record = apply_passes(model, inputs, ["qkv_fusion", "sdpa", "bf16_promotion"], device="cuda")

Steps: resolve the names (aliases, findings), order them (Level 1, then 2, then 3; within a
level by each pass's ``order``), deep-copy the model (the caller's stays the baseline), call
each pass function once, then compile the copy with one PlanBackend that carries every Level-1
rewrite, Level-2 post-grad pass and Level-3 setting. The first call of the compiled model
(``warmup``) runs the rewrites, so graph-level legality and "what changed" are known when this
returns. A pass that raises becomes a PassError naming it; the model is then left untouched.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from profiler_core.compile_mode import TORCH_COMPILE_MODES
from profiler_core.errors import PassError, ProfilerError
from profiler_core.passes.backend import PlanBackend
from profiler_core.passes.contract import PassContext, PassEffect, RunFacts
from profiler_core.passes.convolution import cudnn_conv_precision
from profiler_core.passes.findings import finding_label, passes_named_by
from profiler_core.passes.inductor_config import TRACE_TIME_CONFIG
from profiler_core.passes.plan import GraphRecord, PassRecord, PassStatus, PlanRecord
from profiler_core.passes.registry import PassLevel, PassSpec, get_pass
from profiler_core.passes.step_run import optimizers_of
from profiler_core.workload import default_step

log = logging.getLogger(__name__)

COMPILE_MODES = TORCH_COMPILE_MODES
COMPILERS = ("inductor", "eager")
# Lower precision ranks higher: the plan's compute precision is the highest-ranked one applied.
_PRECISION_RANK = {"float64": 0, "float32": 1, "tf32": 2, "float16": 3, "bfloat16": 4}

Step = Callable[[Any, tuple[Any, ...]], Any]


@dataclass(frozen=True)
class _Planned:
    spec: PassSpec
    effect: PassEffect
    requested_by: tuple[str, ...]


def resolve_requests(pass_names: Iterable[str], findings: Sequence[Mapping[str, Any]] = ()
                     ) -> list[tuple[PassSpec, tuple[str, ...], tuple[Mapping[str, Any], ...]]]:
    """(spec, requested_by, findings) per distinct pass, in application order; PassError if unknown."""
    requests: dict[str, tuple[PassSpec, list[str], list[Mapping[str, Any]]]] = {}
    arrival: dict[str, int] = {}
    for name in pass_names:
        spec = get_pass(name)
        entry = requests.setdefault(spec.name, (spec, [], []))
        arrival.setdefault(spec.name, len(arrival))
        if "argument" not in entry[1]:
            entry[1].append("argument")
    for name, finding in passes_named_by(findings):
        spec = get_pass(name)
        entry = requests.setdefault(spec.name, (spec, [], []))
        arrival.setdefault(spec.name, len(arrival))
        entry[1].append(finding_label(finding, findings))
        entry[2].append(finding)
    ordered = sorted(requests.values(), key=lambda e: (e[0].level.number, e[0].order, arrival[e[0].name]))
    return [(spec, tuple(by), tuple(found)) for spec, by, found in ordered]


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def merge_details(items: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Combine per-graph details: numbers add up, dicts merge the same way, lists concatenate."""
    merged: dict[str, Any] = {}
    for item in items:
        for key, value in item.items():
            old = merged.get(key)
            if isinstance(value, bool) or old is None:
                merged[key] = copy.deepcopy(value)
            elif isinstance(value, int | float) and isinstance(old, int | float):
                merged[key] = old + value
            elif isinstance(value, Mapping) and isinstance(old, Mapping):
                merged[key] = merge_details([old, value])
            elif isinstance(value, list) and isinstance(old, list):
                merged[key] = old + value
            else:
                merged[key] = value
    return merged


def _run_pass(spec: PassSpec, ctx: PassContext) -> PassEffect:
    try:
        effect = spec.function(ctx)
    except ProfilerError:
        raise
    except Exception as err:
        raise PassError(f"pass '{spec.name}' failed while being applied: {type(err).__name__}: {err}; "
                        "run the plan without it") from err
    if not isinstance(effect, PassEffect):
        raise PassError(f"pass '{spec.name}' ({spec.source}) returned {type(effect).__name__}, not a "
                        "PassEffect; fix the pass function")
    return effect


def _unwrap(model: Any, notes: list[str]) -> Any:
    if isinstance(model, torch._dynamo.eval_frame.OptimizedModule):
        notes.append("the workload's model was already torch.compile'd; the plan recompiles its "
                     "original module with the plan's backend")
        return model._orig_mod
    return model


def run_transformed(model: Any, inputs: tuple[Any, ...], step: Step) -> Any:
    """``step(model, inputs)`` for a transformed model; its failures become PassErrors."""
    try:
        return step(model, inputs)
    except ProfilerError:
        raise
    except Exception as err:
        # Dynamo wraps what a backend raises (BackendCompilerFailed): surface a pass's own error.
        inner = getattr(err, "inner_exception", None) or err.__cause__
        if isinstance(inner, ProfilerError):
            raise inner from err
        first_line = str(err).splitlines()[0] if str(err) else ""
        raise PassError(f"the transformed model failed: {type(err).__name__}: {first_line}; apply the "
                        "passes one at a time to find the one at fault") from err


def _status(planned: _Planned, backend: PlanBackend,
            warmed: bool) -> tuple[PassStatus, str, list[GraphRecord]]:
    effect, name = planned.effect, planned.spec.name
    graphs = list(backend.graph_records.get(name, [])) if effect.graph_rewrite else []
    post = [GraphRecord(index=i, level=PassLevel.POST_GRAD, applied=c.applied, reason=c.reason,
                        details=_jsonable(dict(c.details)))
            for p in effect.post_grad_passes for i, c in enumerate(getattr(p, "changes", []))]
    deciding = graphs if effect.graph_rewrite else post if effect.post_grad_passes else None
    if deciding is None:
        return PassStatus.APPLIED, "", graphs + post
    if deciding:
        if any(g.applied for g in deciding):
            return PassStatus.APPLIED, "", graphs + post
        reasons = list(dict.fromkeys(g.reason for g in deciding if g.reason))
        return PassStatus.NOT_APPLIED, "; ".join(reasons) or "changed nothing", graphs + post
    if not warmed:
        return PassStatus.PENDING, "decided when the compiled model is first called", []
    if effect.graph_rewrite:
        return PassStatus.NOT_APPLIED, "Dynamo produced no compiled graph (the model ran eagerly)", []
    if backend.compiler != "inductor":
        why = f"post-grad passes need the inductor compiler, not '{backend.compiler}'"
        return PassStatus.NOT_APPLIED, why, []
    return PassStatus.NOT_APPLIED, "Inductor did not run the post-grad pass", []


def _record(planned: _Planned, backend: PlanBackend, warmed: bool, facts: RunFacts | None) -> PassRecord:
    spec, effect = planned.spec, planned.effect
    levels = {spec.level}
    if effect.graph_rewrite is not None:
        levels.add(PassLevel.DYNAMO_FX)
    if effect.post_grad_passes:
        levels.add(PassLevel.POST_GRAD)
    if effect.inductor_config or effect.compile_mode or effect.matmul_precision:
        levels.add(PassLevel.INDUCTOR_CONFIG)
    base: dict[str, Any] = {
        "name": spec.name, "level": spec.level, "levels": sorted(levels, key=lambda lv: lv.number),
        "structural": spec.structural, "requested_by": list(planned.requested_by),
    }
    details = _jsonable(dict(effect.details))
    if not effect.applied:
        return PassRecord(**base, status=PassStatus.NOT_APPLIED, reason=effect.reason, details=details)
    status, reason, graphs = _status(planned, backend, warmed)
    dynamo = [g for g in graphs if g.level is PassLevel.DYNAMO_FX]
    post = [g for g in graphs if g.level is PassLevel.POST_GRAD]
    details.update(merge_details(g.details for g in dynamo))
    if post and effect.graph_rewrite is not None:
        details["post_grad"] = merge_details(g.details for g in post)
    elif post:
        details.update(merge_details(g.details for g in post))
    if effect.verify is not None and facts is not None and status is PassStatus.APPLIED:
        check = effect.verify(facts)
        details.update(_jsonable(dict(check.details)))
        if not check.applied:
            status, reason = PassStatus.NOT_APPLIED, check.reason
    settings_only = (spec.level is PassLevel.INDUCTOR_CONFIG and not effect.post_grad_passes
                     and (effect.inductor_config or effect.compile_mode or effect.matmul_precision))
    if settings_only and backend.compiler != "inductor" and status is PassStatus.APPLIED:
        status = PassStatus.NOT_APPLIED
        reason = f"the '{backend.compiler}' compiler applies no Inductor settings"
    removed: Counter[str] = Counter()
    added: Counter[str] = Counter()
    for g in dynamo:
        removed.update(g.ops_removed)
        added.update(g.ops_added)
    return PassRecord(
        **base, status=status, reason=reason, details=details, graphs=graphs,
        nodes_before=sum(g.nodes_before or 0 for g in dynamo) if dynamo else None,
        nodes_after=sum(g.nodes_after or 0 for g in dynamo) if dynamo else None,
        ops_removed=dict(sorted(removed.items())), ops_added=dict(sorted(added.items())),
    )


def _inductor_counters() -> Counter[str]:
    return Counter(dict(torch._dynamo.utils.counters["inductor"]))


def _with_trace_config(compiled: Any, trace_config: Mapping[str, Any]) -> Any:
    """``compiled``, whose calls (where Dynamo traces) run under ``trace_config`` (e.g. freezing)."""
    if not trace_config:
        return compiled
    inner = compiled.forward

    def forward(*args: Any, **kwargs: Any) -> Any:
        with torch._inductor.config.patch(dict(trace_config)):
            return inner(*args, **kwargs)

    compiled.forward = forward
    return compiled


def _flatten_rnn_weights(model: Any) -> None:
    """Put each RNN's weights back into one contiguous cuDNN buffer after the copy.

    A deep copy gives every RNN parameter its own storage; cuDNN then compacts them on every
    call (and warns so), a cost the original model does not pay and a capture would charge to
    the plan. ``flatten_parameters`` does nothing on CPU.
    """
    if isinstance(model, nn.Module):
        for module in model.modules():
            if isinstance(module, nn.RNNBase):
                module.flatten_parameters()


def apply_passes(
    model: Any,
    inputs: tuple[Any, ...],
    pass_names: Iterable[str],
    *,
    device: str,
    findings: Sequence[Mapping[str, Any]] | None = None,
    compile_mode: str | None = None,
    step: Step | None = None,
    compiler: str = "inductor",
    warmup: bool = True,
    copy_model: bool = True,
) -> tuple[Any, PlanRecord]:
    """Apply the named passes (and those ``findings`` name) to a copy of ``model``; return it compiled.

    ``copy_model=False`` transforms ``model`` itself: for a training build, whose optimizer
    must keep pointing at the parameters of the model that runs, and for workload wrappers,
    whose original model serves nothing else. The step the plan runs is dropped: see
    :func:`apply_passes_to_step`.
    """
    compiled, _, record = apply_passes_to_step(
        model, inputs, pass_names, device=device, findings=findings, compile_mode=compile_mode, step=step,
        compiler=compiler, warmup=warmup, copy_model=copy_model)
    return compiled, record


def _drop_superseded(planned: list[_Planned]) -> list[_Planned]:
    """Each pass another applied pass supersedes turned NOT APPLIED, naming the one that replaces it."""
    by = {name: p.spec.name for p in planned if p.effect.applied for name in p.spec.supersedes}
    return [_Planned(p.spec, PassEffect.not_applied(
                f"superseded by {by[p.spec.name]}, which graphs the step its own way", **dict(p.effect.details)),
                p.requested_by)
            if p.effect.applied and p.spec.name in by else p for p in planned]


def _without_cudagraphs(mode: str, notes: list[str]) -> str:
    """The compile mode less its CUDA graphs, for a plan whose step is recorded as one graph."""
    plain = {"reduce-overhead": "default", "max-autotune": "max-autotune-no-cudagraphs"}.get(mode, mode)
    if plain != mode:
        notes.append(f"compile mode '{mode}' runs as '{plain}': the step is recorded as one CUDA graph, "
                     "inside which Inductor's own graphs cannot be")
    return plain


def _plan_step(step: Step, active: Sequence[PassEffect], optimizers: Sequence[Any], backend: PlanBackend) -> Step:
    """The step the plan runs: the passes' wrappers around ``step``, optimizers and step compiled as asked."""
    compile_step = any(e.compile_step for e in active)
    if any(e.compile_optimizer for e in active) and not compile_step:  # a compiled step covers them
        for opt in optimizers:
            opt.step = torch.compile(opt.step, backend=backend)
    run = step
    for effect in active:
        if effect.step_transform is not None:
            run = effect.step_transform(run)
    if compile_step:
        run = torch.compile(run, backend=backend)
    return run


def apply_passes_to_step(
    model: Any,
    inputs: tuple[Any, ...],
    pass_names: Iterable[str],
    *,
    device: str,
    findings: Sequence[Mapping[str, Any]] | None = None,
    compile_mode: str | None = None,
    step: Step | None = None,
    compiler: str = "inductor",
    warmup: bool = True,
    copy_model: bool = True,
) -> tuple[Any, Step, PlanRecord]:
    """:func:`apply_passes`, also returning the step the plan runs (the workload's, or a pass's wrapper of it)."""
    mode = compile_mode or "default"
    if mode not in COMPILE_MODES:
        raise PassError(f"unknown compile mode '{compile_mode}'; use one of {', '.join(COMPILE_MODES)}")
    if compiler not in COMPILERS:
        raise PassError(f"unknown compiler '{compiler}'; use one of {', '.join(COMPILERS)}")
    requests = resolve_requests(pass_names, findings or ())
    if not requests:
        raise PassError("no pass to apply: name one (see 'oprof passes') or give findings that name a "
                        "transformation")
    notes: list[str] = []
    try:
        work = copy.deepcopy(_unwrap(model, notes)) if copy_model else _unwrap(model, notes)
    except Exception as err:
        raise PassError(f"the model cannot be copied ({type(err).__name__}: {err}); passes work on a copy "
                        "so the original stays the baseline") from err
    _flatten_rnn_weights(work)
    # A fresh Dynamo cache: earlier compiles of this model's code must not serve this plan.
    torch._dynamo.reset()
    planned: list[_Planned] = []
    training = bool(getattr(work, "training", False))
    optimizers = tuple(optimizers_of(work)) if training else ()
    for spec, requested_by, found in requests:
        ctx = PassContext(model=work, inputs=tuple(inputs), device=device, findings=found, compiler=compiler,
                          optimizers=optimizers)
        if spec.inference_only and training:
            effect = PassEffect.not_applied(f"'{spec.name}' is for inference; the model is in train mode")
        else:
            effect = _run_pass(spec, ctx)
        log.info("%s (level %d %s): %s%s", spec.name, spec.level.number, spec.level.value,
                 "contributes" if effect.applied else "NOT APPLIED",
                 f" - {effect.reason}" if effect.reason else "")
        planned.append(_Planned(spec, effect, requested_by))
    planned = _drop_superseded(planned)
    active = [p.effect for p in planned if p.effect.applied]
    captures_step = any(e.captures_step for e in active)
    if captures_step:
        mode = _without_cudagraphs(mode, notes)
    compiler = next((e.compiler for e in reversed(active) if e.compiler), compiler)
    effect_modes = [e.compile_mode for e in active if e.compile_mode]
    if mode == "default" and effect_modes:
        mode = effect_modes[-1]
    config: dict[str, Any] = {}
    for effect in active:
        config.update(effect.inductor_config)
    if captures_step:
        config["triton.cudagraphs"] = False  # the step is one recorded graph; Inductor must not graph inside it
    backend = PlanBackend(
        rewrites=[(p.spec.name, p.effect.graph_rewrite) for p in planned
                  if p.effect.applied and p.effect.graph_rewrite is not None],
        post_grad_passes=[gp for e in active for gp in e.post_grad_passes],
        inductor_config=config, compile_mode=mode,
        matmul_precision=next((e.matmul_precision for e in reversed(active) if e.matmul_precision), None),
        compiler=compiler, device=device, training=training,
        record_post_grad=warmup,  # without a first call nothing is reported: keep Inductor's caches on
    )
    compiled = _with_trace_config(torch.compile(work, backend=backend),
                                  {k: v for k, v in config.items() if k in TRACE_TIME_CONFIG}
                                  if compiler == "inductor" else {})
    run = _plan_step(step or default_step, active, optimizers, backend)
    compile_s: float | None = None
    facts: RunFacts | None = None
    if warmup:
        before = _inductor_counters()
        start = time.perf_counter()
        run_transformed(compiled, tuple(inputs), run)
        compile_s = time.perf_counter() - start
        facts = RunFacts(backend.graphs_compiled, dict(_inductor_counters() - before))
    records = [_record(p, backend, warmup, facts) for p in planned]
    for rec in records:
        log.info("%s: %s%s", rec.name, rec.status.value, f" - {rec.reason}" if rec.reason else "")
    # Tolerance follows what actually changed: a bf16 pass that found no GEMM loosens nothing.
    precisions = [p.effect.compute_precision for p, r in zip(planned, records, strict=True)
                  if p.effect.compute_precision and r.status is not PassStatus.NOT_APPLIED]
    compute = max(precisions, key=lambda p: _PRECISION_RANK.get(p, 0), default="float32")
    conv = cudnn_conv_precision(work, device)
    if conv and _PRECISION_RANK.get(conv, 0) > _PRECISION_RANK.get(compute, 0):
        compute = conv
        notes.append("cuDNN runs this model's float32 convolutions in TF32 (torch.backends.cudnn.allow_tf32), "
                     "baseline included: validated at the TF32 tolerance")
    shown = {k: v for k, v in backend.inductor_options().items() if k != "post_grad_custom_post_pass"}
    if compiler != "inductor":
        shown = {}
    elif backend.post_grad_passes:
        shown["post_grad_custom_post_pass"] = [getattr(p, "name", type(p).__name__)
                                               for p in backend.post_grad_passes]
    return compiled, run, PlanRecord(
        passes=records, compile_mode=mode, compiler=compiler, inductor_config=_jsonable(shown),
        matmul_precision=backend.matmul_precision, compute_precision=compute,
        graphs_compiled=backend.graphs_compiled, compile_s=compile_s, notes=notes,
    )
