"""The training view: kernel time per phase of the step, before and after each kept pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiler_core.errors import ProfilerError
from profiler_core.profile_io import write_profile
from profiler_core.report.training_view import (
    build_training_view,
    phase_kernel_ns,
    read_training_view,
    training_view_markdown,
)
from profiler_core.rundir import PROFILE_NAME
from profiler_core.schema import Profile
from tests.analysis.profile_builder import ProfileBuilder, k

EW = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"


def _step(forward_us: float, backward_us: float, optimizer_us: float, optimizer_ops: int = 4) -> Profile:
    b = ProfileBuilder()
    phases = {b.op("aten::mm", k("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n", forward_us)): "forward",
              b.op("aten::mm", k("sm90_xmma_gemm_f32f32_f32f32_f32_nt_n", backward_us)): "backward"}
    for _ in range(optimizer_ops):
        phases[b.op("aten::mul_", k(EW, optimizer_us / optimizer_ops))] = "optimizer"
    profile = b.build()
    for op in profile.operators:
        op.phase = phases[op.key]  # type: ignore[assignment]
    return profile


def test_kernel_time_is_split_by_phase() -> None:
    ns = phase_kernel_ns(_step(300, 600, 80))
    assert ns == {"forward": 300_000, "backward": 600_000, "optimizer": 80_000, "no phase": 0}
    inference = ProfileBuilder()
    inference.op("aten::mm", k("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n", 300))
    assert phase_kernel_ns(inference.build()) == {}


def test_each_kept_pass_says_which_phase_it_moved() -> None:
    view = build_training_view(_step(300, 600, 80), [("fused_optimizer", _step(300, 600, 10, optimizer_ops=1)),
                                                     ("bf16_autocast", _step(120, 250, 10, optimizer_ops=1))])
    assert view is not None
    assert [r.label for r in view.rows] == ["baseline", "+ fused_optimizer", "+ bf16_autocast"]
    assert view.rows[1].moved == "optimizer -0.07 ms"
    assert view.rows[2].moved == "backward -0.35 ms"
    lines = training_view_markdown(view)
    assert lines[0] == "| step | forward | backward | optimizer | no phase | moved |"
    assert lines[3] == "| + fused_optimizer | 0.30 ms | 0.60 ms | 0.01 ms | 0.00 ms | optimizer -0.07 ms |"


def test_a_run_directory_is_read_and_a_bad_one_named(tmp_path: Path) -> None:
    (tmp_path / "baseline").mkdir()
    write_profile(tmp_path / "baseline" / PROFILE_NAME, _step(300, 600, 80))
    trial = tmp_path / "trial-1-fused_optimizer"
    (trial / "capture").mkdir(parents=True)
    write_profile(trial / "capture" / PROFILE_NAME, _step(300, 600, 10, optimizer_ops=1))
    trials = [{"transformation": "fused_optimizer", "outcome": "kept", "run_dir": str(trial)},
              {"transformation": "bf16_autocast", "outcome": "not_faster", "run_dir": str(tmp_path / "x")}]
    (tmp_path / "optimize.json").write_text(json.dumps({"trials": trials}))
    view = read_training_view(tmp_path)
    assert view is not None and [r.label for r in view.rows] == ["baseline", "+ fused_optimizer"]
    with pytest.raises(ProfilerError, match="not a readable optimization run"):
        read_training_view(tmp_path / "missing")


def test_the_optimize_report_shows_the_training_view_of_a_real_step() -> None:
    # the shipped H200 GPT-2 training step: baseline FP32, then bf16 autocast kept
    from profiler_core.attribution import attribute_run
    from profiler_core.report import render_html
    from profiler_core.report.training_view import NO_PHASE, PHASES, training_view_html

    run = Path(__file__).parents[2] / "examples" / "captures" / "h200" / "hf_gpt2_train_step_graph"
    base, opt = attribute_run(run / "baseline"), attribute_run(run / "bf16_trial")
    view = build_training_view(base, [("bf16_autocast", opt)])
    assert view is not None and [r.label for r in view.rows] == ["baseline", "+ bf16_autocast"]
    for row, prof in zip(view.rows, (base, opt), strict=True):
        assert sum(row.phase_ns.get(p, 0) for p in (*PHASES, NO_PHASE)) == sum(k.duration_ns for k in prof.kernels)
        assert all(row.phase_ns.get(p, 0) > 0 for p in PHASES)
    assert view.rows[1].moved.startswith("backward -")  # bf16 shortens the backward pass most
    html = render_html(opt, baseline=base, training=training_view_html(view))
    assert '<section id="training">' in html and "+ bf16_autocast" in html


def test_a_compiled_optimizer_s_graph_replays_count_as_the_optimizer() -> None:
    # the whole GPT-2 step compiled in reduce-overhead: Dynamo traced through AdamW.step, so no
    # Optimizer.step range exists; its graph (the combo kernels) follows the backward and is the optimizer's
    from profiler_core.attribution import attribute_run

    # the autocast trial of the same step, shipped with the step-graph run of the same workload
    captures = Path(__file__).parents[2] / "examples" / "captures" / "h200"
    bf16 = attribute_run(captures / "hf_gpt2_train_step_graph" / "bf16_trial")
    graphed = attribute_run(captures / "hf_gpt2_train" / "optimized")
    view = build_training_view(bf16, [("whole_step_cuda_graphs", graphed)])
    assert view is not None
    before, after = view.rows
    assert 0 < after.phase_ns["optimizer"] < 0.5 * before.phase_ns["optimizer"]
    assert after.phase_ns["forward"] == pytest.approx(before.phase_ns["forward"], rel=0.05)
    assert after.moved.startswith("optimizer -")
    ops = {op.key: op for op in graphed.operators}
    combo = [k for k in graphed.kernels if k.name.startswith("triton_for_fused_")]
    assert combo and all(ops[k.attribution.operator_key].phase == "optimizer" for k in combo)
