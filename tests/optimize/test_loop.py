"""``optimize()`` end to end on a CPU: real passes, real validation, real profiles for the captures.

Only the GPU capture is replaced: the fake returns the real H200 pair's profiles (the baseline
for the baseline capture, the optimized half or the baseline again for a trial), after checking
that a trial hands it the plan's ``workload_optimized.py`` and that this wrapper runs. Passes are
applied and validated for real on examples/sdpa_attention.py at its small size, in eager mode.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import profiler_core.analysis as analysis
from profiler_core.analysis.findings import Finding, FindingKind
from profiler_core.capture.config import CaptureConfig, CompileMode
from profiler_core.cli import load_commands
from profiler_core.errors import CaptureCancelledError
from profiler_core.optimize import OptimizeConfig, OptimizeResult, loop, optimize
from profiler_core.optimize import trial as trial_mod
from profiler_core.optimize.trial import plan_compile
from profiler_core.passes import validation
from profiler_core.passes.manager import COMPILE_MODES
from profiler_core.passes.policy import DEFAULT_POLICY
from profiler_core.schema import Profile
from profiler_core.transformations import Transformation
from profiler_core.workload import load_workload
from tests.analysis.real_profiles import pair_profile

REPO = Path(__file__).parent.parent.parent
EXAMPLE = REPO / "examples" / "sdpa_attention.py"
EAGER = CaptureConfig(compile_mode=CompileMode.EAGER)


class FakeCapture:
    """Stands in for loop._capture_profile: records each call and returns scripted real profiles."""

    def __init__(self, trials: list[Profile | BaseException]) -> None:
        self.trials = list(trials)
        self.calls: list[tuple[Path, Path, CaptureConfig]] = []
        self.wrapper_outputs: list[torch.Size] = []

    def __call__(self, workload: Path, run_dir: Path, base: CaptureConfig, progress: object,
                 cancel: threading.Event | None) -> Profile:
        self.calls.append((Path(workload), Path(run_dir), base))
        if len(self.calls) == 1:
            return pair_profile("base")
        # what a real capture would do first: load the wrapper by the workload contract and run a step
        wl = load_workload(workload, device="cpu")
        self.wrapper_outputs.append(wl.step(wl.model, wl.inputs).shape)
        nxt = self.trials.pop(0)
        if isinstance(nxt, BaseException):
            raise nxt
        return nxt


def _other_gpu(profile: Profile) -> Profile:
    """The same profile, as if captured on another GPU (so compare() calls it not comparable)."""
    return profile.model_copy(update={"capture": profile.capture.model_copy(update={"gpu_name": "NVIDIA A100"})})


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPROF_EXAMPLE_SMALL", "1")


def _finding(rule: str, transformation: Transformation) -> Finding:
    return Finding(rule_id=rule, title=rule, kind=FindingKind.OPTIMIZATION, symptom="s", bottleneck="b",
                   transformation=transformation, gain_bound_pct=99.0)


@pytest.fixture
def elementwise_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """diagnose() as it is, plus a top-ranked finding whose transformation no graph pass implements;
    on the pair's optimized capture (which has no finding of its own) also a manual-attention one."""
    real = analysis.diagnose

    def diagnose(profile: Profile, *args: object, **kwargs: object) -> analysis.FindingsReport:
        report = real(profile, *args, **kwargs)
        extra = [_finding("memory_bound_elementwise", Transformation.ELEMENTWISE_FUSION)]
        if (profile.capture.workload or "").endswith(" opt"):
            extra.append(_finding("manual_attention", Transformation.SDPA))
        return report.model_copy(update={"findings": [*extra, *report.findings]})

    monkeypatch.setattr(analysis, "diagnose", diagnose)


@pytest.fixture
def strict_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bf16 rule no bf16 GEMM can meet (float32's), so bf16_promotion fails validation for real."""
    tight = validation.DEFAULT_TOLERANCES["float32"]
    monkeypatch.setattr(validation, "DEFAULT_TOLERANCES", {**validation.DEFAULT_TOLERANCES, "bfloat16": tight})
    monkeypatch.setitem(DEFAULT_POLICY.unit_roundoff, "bfloat16", DEFAULT_POLICY.unit_roundoff["float32"])


@pytest.mark.slow
def test_loop_keeps_the_faster_pass_and_rejects_the_rest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         small: None, elementwise_first: None,
                                                         strict_bf16: None) -> None:
    # candidates on the pair's baseline, best bound first: (elementwise_fusion), cuda_graphs,
    # bf16_promotion, qkv_fusion, sdpa; after qkv_fusion is kept, those of its capture:
    # (elementwise_fusion, already considered), sdpa
    fake = FakeCapture([pair_profile("opt"), pair_profile("opt")])
    monkeypatch.setattr(trial_mod, "capture_profile", fake)
    out = tmp_path / "run"
    steps: list[tuple[str, int, int, str]] = []
    result = optimize(EXAMPLE, OptimizeConfig(out_dir=out, device="cpu", wall_iters=0, capture=EAGER),
                      progress=lambda *a: steps.append(a))

    outcomes = [(t.transformation, t.outcome) for t in result.trials]
    assert outcomes == [("elementwise_fusion", "no_pass"), ("cuda_graphs", "skipped"),
                        ("bf16_promotion", "rejected_validation"), ("qkv_fusion", "kept"),
                        ("sdpa", "not_faster")]
    by_name = {t.transformation: t for t in result.trials}
    assert "no graph pass implements 'elementwise_fusion'" in by_name["elementwise_fusion"].reason
    assert by_name["elementwise_fusion"].run_dir is None
    assert "CUDA device" in by_name["cuda_graphs"].reason and by_name["cuda_graphs"].run_dir is None
    bf16 = by_name["bf16_promotion"]
    assert bf16.max_abs_err is not None and bf16.max_abs_err > 1e-4
    assert bf16.reason.startswith("rejected: output (tensor): RMSE(candidate, fp64)")
    assert bf16.validation is not None and bf16.validation["reference"] == "float64 on cpu, TF32 off"
    assert bf16.validation["outputs"][0]["rmse_candidate"] > bf16.validation["outputs"][0]["threshold"]
    page = (out / "report.html").read_text()
    assert "<h2>Trials</h2>" in page and "RMSE(candidate, fp64)" in page
    assert result.validation_failures == 1
    assert result.kept_passes == ["qkv_fusion"]
    assert by_name["sdpa"].passes == ["qkv_fusion", "sdpa"]  # tried on top of what was kept

    # the captures: the workload itself, then each validated plan's wrapper in its own trial dir
    base_call, *trial_calls = fake.calls
    assert base_call[0] == EXAMPLE.resolve() and base_call[1] == out / "baseline"
    # trials are numbered as they spend budget: a pass that cannot apply gets no directory
    assert [c[0] for c in trial_calls] == [out / "trial-2-qkv_fusion" / "workload_optimized.py",
                                           out / "trial-3-sdpa" / "workload_optimized.py"]
    assert [c[1] for c in trial_calls] == [out / "trial-2-qkv_fusion" / "capture", out / "trial-3-sdpa" / "capture"]
    assert all(c[2].device == "cpu" and c[2].compile_mode is CompileMode.EAGER for c in fake.calls)
    assert fake.wrapper_outputs == [torch.Size([2, 16, 32])] * 2
    assert "PASSES = ['qkv_fusion', 'sdpa']" in (out / "trial-3-sdpa" / "workload_optimized.py").read_text()
    assert not (out / "trial-1-bf16_promotion" / "workload_optimized.py").exists()
    assert json.loads((out / "trial-1-bf16_promotion" / "plan.json").read_text())["status"] == "rejected"
    assert bf16.validation is not None and bf16.validation["passed"] is False
    assert [t.finding for t in result.trials] == ["memory_bound_elementwise", "host_bound", "tensor_core_idle",
                                                  "parallel_projections", "manual_attention"]
    rediagnosed = json.loads((out / "trial-2-qkv_fusion" / "findings.json").read_text())
    assert [f["rule_id"] for f in rediagnosed["findings"]] == ["memory_bound_elementwise", "manual_attention",
                                                               "host_bound", "far_below_roofline"]
    assert rediagnosed["findings"][-1]["transformation"] is None  # a note: nothing for the loop to try
    assert not (out / "trial-3-sdpa" / "findings.json").exists()  # written for kept trials only

    kept = by_name["qkv_fusion"]
    base_ns, opt_ns = pair_profile("base").coverage.duration_ns, pair_profile("opt").coverage.duration_ns
    assert kept.kernel_ns == opt_ns and kept.speedup_vs_best == pytest.approx(base_ns / opt_ns, rel=1e-3)
    assert by_name["sdpa"].speedup_vs_best == pytest.approx(1.0)
    assert result.baseline_kernel_ns == base_ns and result.optimized_kernel_ns == opt_ns
    assert result.validation["max_abs_err"] == kept.max_abs_err is not None
    assert result.final_run_dir == str(out / "trial-2-qkv_fusion")

    for name in ("optimize.json", "findings.json", "comparison.json", "report.html"):
        assert (out / name).is_file(), name
    assert not (out / "walltime.json").exists()  # wall_iters=0
    assert OptimizeResult.model_validate_json((out / "optimize.json").read_text()) == result
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["speedup"] == pytest.approx(result.kernel_speedup) and result.kernel_speedup > 3
    findings = json.loads((out / "findings.json").read_text())
    assert findings["findings"][0]["transformation"] == "elementwise_fusion"
    assert "sdpa_attention.py: optimization" in (out / "report.html").read_text()
    assert steps and all(s[0] == "optimize" for s in steps)


def test_a_kept_pass_re_diagnoses_and_drops_the_symptoms_it_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     small: None) -> None:
    # bf16_promotion is kept with the pair's optimized capture, where diagnose() finds nothing:
    # qkv_fusion and sdpa, licensed by the baseline, are not tried although budget is left
    fake = FakeCapture([pair_profile("opt")])
    monkeypatch.setattr(trial_mod, "capture_profile", fake)
    result = optimize(EXAMPLE, OptimizeConfig(out_dir=tmp_path / "run", budget=4, device="cpu", wall_iters=0,
                                              capture=EAGER))
    assert [(t.transformation, t.outcome) for t in result.trials] == [
        ("cuda_graphs", "skipped"), ("bf16_promotion", "kept"), ("cuda_graphs", "skipped"),
        ("whole_step_cuda_graphs", "skipped"), ("channels_last", "skipped")]
    # what bf16 suggests on top (CUDA graphs, the whole step's graphs, channels_last) is asked for, and
    # cannot apply here (a CPU, an inference step, no convolution): no budget spent
    assert [t.finding for t in result.trials[2:]] == ["kept:bf16_promotion"] * 3
    assert "eval mode" in result.trials[3].reason and "no nn.Conv2d" in result.trials[4].reason
    assert result.kept_passes == ["bf16_promotion"] and len(fake.calls) == 2
    after = json.loads((tmp_path / "run" / "trial-1-bf16_promotion" / "findings.json").read_text())
    # only the host-bound step is left (the tiny model's GPU idles), its cuda_graphs already tried,
    # and the note that its tiny kernels sit far below both roofs (no pass licensed)
    assert [(f["rule_id"], f["transformation"]) for f in after["findings"]] == [
        ("host_bound", "cuda_graphs"), ("far_below_roofline", None)]


@pytest.mark.slow
def test_budget_counts_passes_tried_not_transformations_without_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small: None, elementwise_first: None) -> None:
    fake = FakeCapture([pair_profile("base"), pair_profile("base")])
    monkeypatch.setattr(trial_mod, "capture_profile", fake)
    result = optimize(EXAMPLE, OptimizeConfig(out_dir=tmp_path / "run", budget=2, device="cpu", wall_iters=0,
                                              capture=EAGER))
    # neither the transformation no pass implements nor the pass that cannot apply here costs budget
    assert [(t.transformation, t.outcome) for t in result.trials] == [
        ("elementwise_fusion", "no_pass"), ("cuda_graphs", "skipped"), ("bf16_promotion", "not_faster"),
        ("qkv_fusion", "not_faster")]
    assert result.kept_passes == [] and result.validation_failures == 0
    assert result.final_run_dir == str(tmp_path / "run" / "baseline")
    assert result.kernel_speedup == 1.0 and result.optimized_kernel_ns == result.baseline_kernel_ns
    assert "profiled kernel time" in result.trials[-1].reason


@pytest.mark.slow
def test_failed_and_not_comparable_trials_keep_the_loop_going(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             small: None) -> None:
    fake = FakeCapture([RuntimeError("ncu lost the GPU"), _other_gpu(pair_profile("opt")), pair_profile("opt")])
    monkeypatch.setattr(trial_mod, "capture_profile", fake)
    said: list[str] = []
    result = optimize(EXAMPLE, OptimizeConfig(out_dir=tmp_path / "run", device="cpu", wall_iters=0, capture=EAGER),
                      progress=lambda phase, step, total, message: said.append(message))
    assert [(t.transformation, t.outcome) for t in result.trials] == [
        ("cuda_graphs", "skipped"), ("bf16_promotion", "failed"), ("qkv_fusion", "not_comparable"),
        ("sdpa", "kept")]
    outcomes = [m for m in said if m.split(":")[0] in {"cuda_graphs", "bf16_promotion", "qkv_fusion", "sdpa"}]
    assert [m.split(" (")[0] for m in outcomes] == [  # every outcome told once, as it happens
        "cuda_graphs: skipped", "bf16_promotion: failed", "qkv_fusion: not_comparable", "sdpa: kept"]
    assert "bf16_promotion: failed (RuntimeError: ncu lost the GPU)" in said
    assert result.trials[1].reason == "RuntimeError: ncu lost the GPU"
    assert "gpu_name" in result.trials[2].reason or "A100" in result.trials[2].reason
    assert result.kept_passes == ["sdpa"]


def test_a_pass_that_raises_is_a_failed_trial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small: None) -> None:
    import profiler_core.passes as passes
    from profiler_core.errors import PassError

    real = passes.apply_pass_plan

    def apply_pass_plan(path: Path, names: list[str], **kwargs: object) -> object:
        if "bf16_promotion" in names:
            raise PassError("bf16_promotion: the model cannot be copied")
        return real(path, names, **kwargs)

    monkeypatch.setattr(passes, "apply_pass_plan", apply_pass_plan)
    monkeypatch.setattr(trial_mod, "capture_profile", FakeCapture([pair_profile("opt")]))
    result = optimize(EXAMPLE, OptimizeConfig(out_dir=tmp_path / "run", budget=3, device="cpu", wall_iters=0,
                                              capture=EAGER))
    assert [t.outcome for t in result.trials] == ["skipped", "failed", "kept"]
    assert "cannot be copied" in result.trials[1].reason
    assert (tmp_path / "run" / "optimize.json").is_file()


def test_cancel_stops_before_the_next_trial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small: None) -> None:
    cancel = threading.Event()
    fake = FakeCapture([])

    def capture_then_cancel(*args: object) -> Profile:
        profile = fake(*args)  # type: ignore[arg-type]
        cancel.set()
        return profile

    monkeypatch.setattr(trial_mod, "capture_profile", capture_then_cancel)
    with pytest.raises(CaptureCancelledError, match="cancelled"):
        optimize(EXAMPLE, OptimizeConfig(out_dir=tmp_path / "run", device="cpu", wall_iters=0, capture=EAGER),
                 cancel=cancel)
    assert not any((tmp_path / "run").glob("trial-*"))


@pytest.mark.parametrize("mode", list(CompileMode), ids=[m.value for m in CompileMode])
def test_plan_compile_maps_every_capture_mode_to_one_apply_pass_plan_accepts(mode: CompileMode) -> None:
    compile_mode, compiler = plan_compile(mode)
    if mode is CompileMode.EAGER:
        assert (compile_mode, compiler) == (None, "eager")  # "eager" is no Inductor mode
    else:
        assert compile_mode in COMPILE_MODES and compiler == "inductor" and compile_mode == mode.value


# ------------------------------------------------------------------ the CLI


def _cli(args: list[str]) -> object:
    return CliRunner().invoke(load_commands(), args)


@pytest.mark.slow
@pytest.mark.parametrize("strict, code", [(False, 0), (True, 1)], ids=["validated", "validation-failed"])
def test_cli_exit_code_says_whether_a_pass_failed_validation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small: None, request: pytest.FixtureRequest,
        strict: bool, code: int) -> None:
    if strict:
        request.getfixturevalue("strict_bf16")
    monkeypatch.setattr(trial_mod, "capture_profile", FakeCapture([pair_profile("base")]))
    out = tmp_path / "run"
    res = _cli(["optimize", str(EXAMPLE), "--device", "cpu", "--compile-mode", "eager", "--budget", "2",
                "--wall-iters", "0", "--out", str(out), "--json"])
    assert res.exit_code == code, res.output  # type: ignore[attr-defined]
    printed = OptimizeResult.model_validate_json(res.stdout)  # type: ignore[attr-defined]
    assert printed == OptimizeResult.model_validate_json((out / "optimize.json").read_text())
    assert printed.trials[1].outcome == ("rejected_validation" if strict else "not_faster")
    if strict:
        assert "failed numerical validation" in res.stderr  # type: ignore[attr-defined]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message a machine without a GPU gets")
def test_cli_without_a_gpu_is_one_error_line_and_exit_2(tmp_path: Path, small: None) -> None:
    res = _cli(["optimize", str(EXAMPLE), "--out", str(tmp_path / "run"), "--wall-iters", "0"])
    assert res.exit_code == 2  # type: ignore[attr-defined]
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]  # type: ignore[attr-defined]
    assert len(errors) == 1 and "GPU" in errors[0]
    assert "Traceback" not in res.output  # type: ignore[attr-defined]
    assert not (tmp_path / "run" / "optimize.json").exists()


_TRAINING = '''
import torch
from torch import nn

def get_model_and_inputs(device="cpu"):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), {dropout}nn.Linear(16, 4)).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    return model, (torch.randn(6, 8, device=device), torch.randn(6, 4, device=device), opt)

def step(model, inputs):
    x, y, opt = inputs
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()
'''


@pytest.fixture
def training_findings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Findings that license an inference-only pass first, then the fused optimizer."""
    real = analysis.diagnose

    def diagnose(profile: Profile, *args: object, **kwargs: object) -> analysis.FindingsReport:
        report = real(profile, *args, **kwargs)
        extra = [_finding("cast_overhead", Transformation.FREEZING),
                 _finding("optimizer_small_kernels", Transformation.FUSED_OPTIMIZER)]
        return report.model_copy(update={"findings": extra})

    monkeypatch.setattr(analysis, "diagnose", diagnose)


@pytest.mark.slow
def test_a_training_loop_skips_inference_passes_and_times_each_trial(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, training_findings: None) -> None:
    workload = tmp_path / "train.py"
    workload.write_text(_TRAINING.format(dropout=""))
    monkeypatch.setattr(trial_mod, "capture_profile", FakeCapture([pair_profile("opt")]))
    monkeypatch.setattr(loop, "model_trains", lambda run_dir: True)
    result = optimize(workload, OptimizeConfig(out_dir=tmp_path / "run", device="cpu", budget=1, wall_iters=0,
                                               capture=EAGER))
    assert result.training
    freezing, fused = result.trials
    assert (freezing.transformation, freezing.outcome) == ("freezing", "skipped")
    assert "not tried" in freezing.reason and freezing.wall_s is None  # costs no budget and no time
    assert fused.transformation == "fused_optimizer" and fused.outcome == "kept"
    assert fused.wall_s is not None and fused.wall_s > 0
    plan = json.loads((tmp_path / "run" / "trial-1-fused_optimizer" / "plan.json").read_text())
    assert any(c["role"] == "gradient" for c in plan["validation"]["outputs"])


def test_a_workload_that_draws_random_numbers_stops_the_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, training_findings: None) -> None:
    workload = tmp_path / "train.py"
    workload.write_text(_TRAINING.format(dropout="nn.Dropout(0.5), "))
    monkeypatch.setattr(trial_mod, "capture_profile", FakeCapture([]))
    result = optimize(workload, OptimizeConfig(out_dir=tmp_path / "run", device="cpu", budget=3, wall_iters=0,
                                               capture=EAGER))
    # the baseline is judged once, before any trial: no trial is spent on a workload no pass could pass
    assert result.trials == []
    assert result.notes and "different results on two runs" in result.notes[0]


def _timeline_sdpa_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """diagnose() whose only finding licenses sdpa with its bound on the timeline (as launch-bound ones are)."""
    real = analysis.diagnose

    def diagnose(profile: Profile, *args: object, **kwargs: object) -> analysis.FindingsReport:
        finding = _finding("launch_bound", Transformation.SDPA).model_copy(update={"gain_basis": "timeline"})
        return real(profile, *args, **kwargs).model_copy(update={"findings": [finding]})

    monkeypatch.setattr(analysis, "diagnose", diagnose)


@pytest.mark.slow
@pytest.mark.parametrize(("plan_ms", "outcome"), [(1.0, "kept"), (2.0, "not_faster")])
def test_a_timeline_finding_is_judged_on_end_to_end_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         small: None, plan_ms: float, outcome: str) -> None:
    from profiler_core.optimize import walltime

    _timeline_sdpa_first(monkeypatch)
    # the trial's capture has the baseline's very kernel time: judged on kernels it would be not_faster
    monkeypatch.setattr(trial_mod, "capture_profile", FakeCapture([pair_profile("base")]))
    timed: list[str] = []

    def measure(workload: Path, **kwargs: object) -> walltime.WallTime:
        timed.append(Path(workload).name)
        return walltime.WallTime((plan_ms,) * 3 if Path(workload).name == "workload_optimized.py" else (2.0,) * 3)

    monkeypatch.setattr(walltime, "measure", measure)
    out = tmp_path / "run"
    result = optimize(EXAMPLE, OptimizeConfig(out_dir=out, budget=1, device="cpu", wall_iters=3, capture=EAGER))
    (trial,) = result.trials
    assert (trial.transformation, trial.outcome, trial.judged_on) == ("sdpa", outcome, "wall_time")
    assert (trial.best_wall_ms, trial.wall_ms) == (2.0, plan_ms)
    assert f"end-to-end median 2.000 -> {plan_ms:.3f} ms" in trial.reason
    assert "profiled kernel time" in trial.reason
    # each run is timed once, and a refusal once more (the plan first); the final figures reuse the trial's
    again = ["workload_optimized.py", EXAMPLE.name] if outcome == "not_faster" else []
    assert timed == [EXAMPLE.name, "workload_optimized.py", *again]
    assert ("again, the plan first: 2.000 -> 2.000 ms; pooled 2.000 -> 2.000 ms" in trial.reason) == bool(again)
    assert result.wall_time["baseline"]["median_ms"] == 2.0
    assert result.kept_passes == (["sdpa"] if outcome == "kept" else [])
    assert (result.wall_speedup == pytest.approx(2.0)) if outcome == "kept" else result.wall_speedup is None


def test_a_kernel_time_finding_is_not_judged_on_wall_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          small: None, elementwise_first: None) -> None:
    monkeypatch.setattr(trial_mod, "capture_profile", FakeCapture([pair_profile("opt")]))
    result = optimize(EXAMPLE, OptimizeConfig(out_dir=tmp_path / "run", budget=1, device="cpu", wall_iters=0,
                                              capture=EAGER))
    tried = [t for t in result.trials if t.run_dir is not None]
    assert tried and all(t.judged_on == "kernel_time" and t.wall_ms is None for t in tried)


def test_a_loop_killed_in_a_trial_keeps_the_trials_before_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             small: None) -> None:
    # the first capture of a trial is the third call (baseline, then cuda_graphs is not applied on a CPU,
    # bf16_promotion's capture is killed the way a timeout's signal would)
    monkeypatch.setattr(trial_mod, "capture_profile", FakeCapture([KeyboardInterrupt()]))
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        optimize(EXAMPLE, OptimizeConfig(out_dir=out, device="cpu", wall_iters=0, capture=EAGER))
    saved = OptimizeResult.model_validate_json((out / "optimize.json").read_text())
    assert [(t.transformation, t.outcome) for t in saved.trials] == [("cuda_graphs", "skipped")]


def test_a_generate_step_marks_graph_passes_not_applicable_before_any_trial(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # generate() runs the model's own forward: torch.compile(model) never compiles it, so graph passes
    # would each spend a trial to find "Dynamo produced no compiled graph"; static_kv_cache stays
    pytest.importorskip("transformers")
    from types import SimpleNamespace

    from profiler_core.optimize.loop import _judge_baseline

    monkeypatch.setenv("OPROF_EXAMPLE_SMALL", "1")
    state = SimpleNamespace(workload=Path(__file__).parents[2] / "examples" / "hf_llama_generate.py",
                            cfg=SimpleNamespace(device="cpu"), result=SimpleNamespace(notes=[]), cannot_apply={},
                            by_model=set())
    assert _judge_baseline(state)  # type: ignore[arg-type]
    why = state.cannot_apply
    for name in ("bf16_promotion", "qkv_fusion", "sdpa", "tf32", "freezing", "cast_cancellation"):
        assert "the step calls generate()" in why[name], name
    assert "static_kv_cache" not in why
    assert "conv_bn_folding" in why and "generate()" not in why["conv_bn_folding"]  # its own reason
    # a generate() step's reasons stand: none is asked again after a kept structural pass
    assert state.by_model == set()
