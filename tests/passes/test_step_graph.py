"""step_graph_capture: the whole training step as one recorded CUDA graph.

Off the GPU: what the pass refuses, by name, and how the plan drops the pass it supersedes.
On the GPU: a real transformers GPT-2 step validated through it, replays equal to eager
steps, and the steps it cannot record refused with the reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from profiler_core.errors import PassError
from profiler_core.passes import PassContext, PassEffect, PassStatus, apply_pass_plan, get_pass
from profiler_core.passes.manager import _drop_superseded, _Planned, _without_cudagraphs
from profiler_core.passes.step_graph import GraphedStep, step_graph_capture_applicable
from tests.passes.test_training_builds import gpt2_workload

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _ctx(opt_factory: object = None, *, device: str = "cuda:0", train: bool = True) -> PassContext:
    model = torch.nn.Linear(4, 4).train(train)
    opts = (opt_factory(model.parameters()),) if callable(opt_factory) else ()
    return PassContext(model=model, inputs=(), device=device, optimizers=opts)


def test_it_says_why_a_step_cannot_be_recorded() -> None:
    assert step_graph_capture_applicable(_ctx(torch.optim.AdamW)) is None
    assert step_graph_capture_applicable(_ctx(torch.optim.Adam)) is None
    assert step_graph_capture_applicable(_ctx(lambda p: torch.optim.SGD(p, lr=0.1))) is None
    why = {
        "eval": step_graph_capture_applicable(_ctx(torch.optim.AdamW, train=False)),
        "cpu": step_graph_capture_applicable(_ctx(torch.optim.AdamW, device="cpu")),
        "bare": step_graph_capture_applicable(_ctx()),
        "momentum": step_graph_capture_applicable(_ctx(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9))),
        "adagrad": step_graph_capture_applicable(_ctx(torch.optim.Adagrad)),
    }
    assert "eval mode" in (why["eval"] or "")
    assert "on device 'cpu' the step cannot be recorded" in (why["cpu"] or "")
    assert "no torch.optim optimizer" in (why["bare"] or "")
    assert "SGD with momentum" in (why["momentum"] or "")
    assert "Adagrad's state cannot be reset" in (why["adagrad"] or "")


def test_a_learning_rate_scheduler_is_refused_by_name() -> None:
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.AdamW(model.parameters())
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1)
    ctx = PassContext(model=model, inputs=(), device="cuda", optimizers=(opt,))
    assert "scheduler (StepLR)" in (step_graph_capture_applicable(ctx) or "")
    del sched


def test_it_supersedes_the_reduce_overhead_step_and_turns_inductor_graphs_off() -> None:
    ours, theirs = get_pass("step_graph_capture"), get_pass("whole_step_cuda_graphs")
    mine = PassEffect(captures_step=True)
    assert ours.supersedes == ("whole_step_cuda_graphs",)
    other = PassEffect(compile_step=True, compile_mode="reduce-overhead", details={"scope": "step"})
    planned = _drop_superseded([_Planned(theirs, other, ("kept",)), _Planned(ours, mine, ("argument",))])
    assert not planned[0].effect.applied and planned[1].effect.applied
    assert planned[0].effect.reason.startswith("superseded by step_graph_capture")
    assert planned[0].effect.details == {"scope": "step"} and planned[0].requested_by == ("kept",)
    declined = _drop_superseded([_Planned(theirs, other, ()), _Planned(ours, PassEffect.not_applied("cpu"), ())])
    assert declined[0].effect.applied  # a pass that declined supersedes nothing
    notes: list[str] = []
    assert _without_cudagraphs("reduce-overhead", notes) == "default"
    assert _without_cudagraphs("max-autotune", notes) == "max-autotune-no-cudagraphs"
    assert _without_cudagraphs("default", notes) == "default" and len(notes) == 2
    assert "step_graph_capture" in theirs.suggests  # tried once the reduce-overhead step is kept
    assert get_pass("bf16_autocast").suggests[:2] == ("step_graph_capture", "whole_step_cuda_graphs")


# ---------------------------------------------------------------------------------- on the GPU


def _linear_step(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    (x,) = inputs
    model._opt.zero_grad(set_to_none=True)
    loss = model(x).square().mean()
    loss.backward()
    model._opt.step()
    return loss.detach()


def _linear(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)).cuda()
    model._opt = torch.optim.AdamW(model.parameters(), lr=1e-2, capturable=True)
    return model


@pytest.mark.gpu
@needs_cuda
def test_replays_match_eager_steps_and_fire_the_optimizer_hooks() -> None:
    eager, graphed = _linear(), _linear()
    xs = [torch.randn(16, 32, device="cuda", generator=torch.Generator("cuda").manual_seed(i)) for i in range(4)]
    run = GraphedStep(_linear_step, (graphed._opt,))
    seen: list[int] = []
    handle = graphed._opt.register_step_pre_hook(lambda opt, a, k: seen.append(1))
    losses = [(float(_linear_step(eager, (x,))), float(run(graphed, (x,)))) for x in xs]
    handle.remove()
    assert run.graph is not None and len(seen) == len(xs)  # once per call, not per warm-up step
    for want, got in losses:
        assert got == pytest.approx(want, rel=1e-5)
    for a, b in zip(eager.parameters(), graphed.parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
        assert b.grad is not None  # the replay's gradients are the parameters' again
    assert int(graphed._opt.state[next(graphed.parameters())]["step"]) == len(xs)  # warm-ups undone


@pytest.mark.gpu
@needs_cuda
def test_the_recording_is_traced_where_the_harness_asks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the harness's Kineto phase names a file: the recording's launches are traced into it, each
    # under its op, and the replays then hold exactly those launches (AdamW's update among them)
    from profiler_core.attribution.graphs import recorded_launches
    from profiler_core.ingest import read_kineto
    from profiler_core.rundir.layout import GRAPH_CAPTURE_ENV

    target = tmp_path / "graph_capture.json.gz"
    monkeypatch.setenv(GRAPH_CAPTURE_ENV, str(target))
    graphed = _linear()
    run = GraphedStep(_linear_step, (graphed._opt,))
    run(graphed, (torch.randn(16, 32, device="cuda"),))
    (launches,) = recorded_launches(read_kineto(target, launches_only=True))
    ops = [launch.op.name if launch.op is not None else None for launch in launches]
    assert None not in ops and "aten::addmm" in ops
    update = [launch for launch, name in zip(launches, ops, strict=True)
              if name.startswith(("aten::_foreach", "aten::_fused_adam"))]  # type: ignore[union-attr]
    assert update and {launch.optimizer for launch in update} == {"optimizer.AdamW"}
    assert {launch.optimizer for launch in launches if launch.op.name == "aten::addmm"} == {None}  # type: ignore[union-attr]
    # not asked: nothing traced, nothing written
    monkeypatch.delenv(GRAPH_CAPTURE_ENV)
    again = _linear()
    GraphedStep(_linear_step, (again._opt,))(again, (torch.randn(16, 32, device="cuda"),))
    assert [p.name for p in tmp_path.iterdir()] == ["graph_capture.json.gz"]


@pytest.mark.gpu
@needs_cuda
def test_a_cleared_optimizer_state_starts_again_from_zero() -> None:
    fresh, graphed = _linear(), _linear()
    x = torch.randn(16, 32, device="cuda")
    start = [p.detach().clone() for p in graphed.parameters()]
    run = GraphedStep(_linear_step, (graphed._opt,))
    run(graphed, (x,))
    with torch.no_grad():  # what a state snapshot of the fresh build does: values back, state emptied
        for p, s in zip(graphed.parameters(), start, strict=True):
            p.copy_(s)
    graphed._opt.state.clear()
    run(graphed, (x,))
    _linear_step(fresh, (x,))
    for a, b in zip(fresh.parameters(), graphed.parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
@needs_cuda
def test_steps_it_cannot_record_are_refused_with_the_reason() -> None:
    def accumulating(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
        loss = model(inputs[0]).square().mean()
        loss.backward()
        model._opt.step()
        return loss.detach()

    def syncing(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
        loss = _linear_step(model, inputs)
        if loss.item() > 1e9:  # a host read: nothing to record
            raise AssertionError
        return loss

    x = torch.randn(16, 32, device="cuda")
    model = _linear()
    with pytest.raises(PassError, match="adds to the gradients left by the previous one"):
        GraphedStep(accumulating, (model._opt,))(model, (x,))
    model = _linear()
    with pytest.raises(PassError, match="waits for the GPU on the host"):
        GraphedStep(syncing, (model._opt,))(model, (x,))


@pytest.mark.gpu
@pytest.mark.slow
@needs_cuda
def test_a_transformers_training_step_validates_as_one_graph(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    passes = ["bf16_autocast", "whole_step_cuda_graphs", "step_graph_capture"]
    plan = apply_pass_plan(gpt2_workload(tmp_path, "model_attribute"), passes, device="cuda")
    v = plan.validation
    assert v is not None and v.passed, v.reason if v else None
    assert plan.applied == ["bf16_autocast", "step_graph_capture"]
    superseded = plan.record("whole_step_cuda_graphs")
    assert superseded.status is PassStatus.NOT_APPLIED and "superseded by step_graph_capture" in superseded.reason
    assert plan.compile_mode == "default" and plan.inductor_config.get("triton.cudagraphs") is False
    assert sum(c.role == "gradient" for c in v.outputs) == sum(c.role == "parameter" for c in v.outputs) == 28
    assert plan.record("step_graph_capture").details["optimizers"] == {"0:AdamW": "fused, capturable"}
