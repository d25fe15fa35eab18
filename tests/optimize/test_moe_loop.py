"""The loop on a MoE, on a CPU: the real H200 MoE capture's findings, the small Mixtral's passes for real.

Only the GPU capture is replaced: the baseline capture returns the shipped H200 Mixtral baseline
(whose host_syncs finding licenses moe_grouped_experts), a trial the shipped optimized capture.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from profiler_core.api import load_profile
from profiler_core.capture.config import CaptureConfig, CompileMode
from profiler_core.optimize import OptimizeConfig, optimize
from profiler_core.optimize import trial as trial_mod
from profiler_core.schema import Profile

pytest.importorskip("transformers")

REPO = Path(__file__).parent.parent.parent
MOE = REPO / "examples" / "captures" / "h200" / "hf_mixtral_moe_grouped"


class MoeCapture:
    """The baseline capture is the shipped MoE baseline; each trial's the shipped optimized capture."""

    def __init__(self) -> None:
        self.calls: list[Path] = []

    def __call__(self, workload: Path, run_dir: Path, base: CaptureConfig, progress: object,
                 cancel: threading.Event | None) -> Profile:
        self.calls.append(Path(workload))
        return load_profile(MOE / ("baseline" if len(self.calls) == 1 else "optimized"))


@pytest.mark.slow
def test_the_loop_tries_the_experts_pass_first_and_asks_graphs_again(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPROF_EXAMPLE_SMALL", "1")
    monkeypatch.setattr(trial_mod, "capture_profile", MoeCapture())
    result = optimize(REPO / "examples" / "hf_mixtral_moe.py",
                      OptimizeConfig(out_dir=tmp_path / "run", budget=2, device="cpu", wall_iters=0,
                                     capture=CaptureConfig(compile_mode=CompileMode.EAGER), yardstick=False))
    first = result.trials[0]
    assert (first.transformation, first.finding, first.outcome) == ("moe_grouped_experts", "host_syncs", "kept")
    assert first.validation is not None and first.validation["passed"]
    # cuda_graphs, which the kept pass suggests, was ruled out on the original model for the experts'
    # host reads; asked again of the changed model, only the CPU is in its way now
    graphs = next(t for t in result.trials if t.transformation == "cuda_graphs")
    assert graphs.outcome == "skipped" and "offs.tolist()" not in graphs.reason
    assert "CUDA device" in graphs.reason
    assert result.kept_passes[0] == "moe_grouped_experts"
