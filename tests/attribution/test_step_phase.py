"""Forward / backward / optimizer phases from the host ranges of a real training step's trace.

The host side is real: a training step (forward, backward, AdamW) profiled on the CPU, whose
ranges (``autograd::engine::evaluate_function: ...``, ``Optimizer.step#AdamW.step``) and
threads are the profiler's own. A CPU run launches no kernels, so each operator chosen below
gets one launch at its start on its thread, and one kernel with that launch's correlation id.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from profiler_core.attribution.step_phase import kernel_phases, range_phase
from profiler_core.records import CpuOp, KinetoTrace, RuntimeCall, TimelineKernel
from tests.attribution.object_engine import operator_phase


@pytest.fixture(scope="module")
def training_ops() -> list[CpuOp]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = torch.optim.AdamW(model.parameters(), foreach=False)
    x, y = torch.randn(4, 8), torch.randn(4, 4)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [CpuOp(name=e.name, start_ns=int(e.time_range.start * 1000), end_ns=int(e.time_range.end * 1000),
                  tid=e.thread) for e in prof.events()]


def _launch_under(ops: list[CpuOp], picks: list[CpuOp]) -> tuple[KinetoTrace, list[TimelineKernel]]:
    calls, kernels = [], []
    for i, op in enumerate(picks):
        calls.append(RuntimeCall(name="cudaLaunchKernel", start_ns=op.start_ns, end_ns=op.start_ns + 1, tid=op.tid,
                                 correlation_id=100 + i))
        kernels.append(TimelineKernel(name=f"k{i}", start_ns=10 * i, end_ns=10 * i + 5, stream=7, device=0,
                                      correlation_id=100 + i))
    return KinetoTrace(path=Path("step.json"), kernels=kernels, cpu_ops=ops, runtime_calls=calls), kernels


def _inside(ops: list[CpuOp], prefix: str, name: str) -> CpuOp:
    ranges = [r for r in ops if r.name.startswith(prefix)]
    return next(op for op in ops if op.name == name and any(
        r.tid == op.tid and r.start_ns <= op.start_ns and op.end_ns <= r.end_ns for r in ranges))


def test_the_real_step_has_the_ranges_phases_are_read_from(training_ops: list[CpuOp]) -> None:
    names = {op.name for op in training_ops}
    assert "Optimizer.step#AdamW.step" in names
    assert any(n.startswith("autograd::engine::evaluate_function: AddmmBackward0") for n in names)
    assert range_phase("Optimizer.step#AdamW.step") == "optimizer"
    assert range_phase("autograd::engine::evaluate_function: AddmmBackward0") == "backward"
    assert range_phase("aten::addmm") is None


def test_launches_get_the_phase_of_their_enclosing_range(training_ops: list[CpuOp]) -> None:
    forward = next(op for op in training_ops if op.name == "aten::addmm")
    backward = _inside(training_ops, "autograd::engine::evaluate_function:", "aten::mm")
    update = _inside(training_ops, "Optimizer.step#", "aten::addcdiv_")
    trace, kernels = _launch_under(training_ops, [forward, backward, update])
    phases = kernel_phases(trace, [*(k.correlation_id for k in kernels), None])
    assert phases == ["forward", "backward", "optimizer", None]


def test_an_inference_trace_gets_no_phase(training_ops: list[CpuOp]) -> None:
    plain = [op for op in training_ops if range_phase(op.name) is None]
    trace, kernels = _launch_under(plain, plain[:3])
    assert kernel_phases(trace, [k.correlation_id for k in kernels]) == [None, None, None]


def test_an_operator_takes_its_first_known_phase() -> None:
    assert operator_phase([None, "backward", "forward"]) == "backward"
    assert operator_phase([None, None]) is None
