"""The yardstick on a CPU: each recipe validated and timed for real beside the loop's plan.

Only the GPU capture is faked (FakeCapture returns the real H200 pair's profiles). The recipes
run the workload's code in this process, through the same function the timing child runs
(``walltime.recipe_in_process``), with torch.compile's "eager" backend so no C++ compile runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiler_core.errors import WorkloadError
from profiler_core.optimize import OptimizeConfig, OptimizeResult, optimize, walltime, yardstick
from profiler_core.optimize import trial as trial_mod
from profiler_core.optimize.yardstick import RecipeResult, judge
from profiler_core.passes import policy as policy_mod
from tests.analysis.real_profiles import pair_profile
from tests.optimize.test_loop import EAGER, EXAMPLE, FakeCapture


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPROF_EXAMPLE_SMALL", "1")


@pytest.fixture
def children_in_process(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """walltime.run_child, run here instead of in a fresh interpreter (same code path, less start-up)."""
    calls: list[list[str]] = []

    def run_child(workload: Path, *, iters: int, warmup: int, compile_mode: str, device: str, python: str,
                  extra: list[str] | None = None, **_: object) -> dict:
        calls.append(list(extra or []))
        args = dict(zip((extra or [])[::2], (extra or [])[1::2], strict=True))
        if "--recipe" in args:
            return walltime.recipe_in_process(workload, args["--recipe"], iters=iters, warmup=warmup,
                                              device=device, backend=args["--backend"])
        wt = walltime.measure_in_process(workload, iters=iters, warmup=warmup, compile_mode=compile_mode,
                                         device=device)
        return {"iterations_ms": list(wt.iterations_ms)}

    monkeypatch.setattr(walltime, "run_child", run_child)
    return calls


@pytest.mark.slow
def test_every_run_times_the_recipes_beside_the_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small: None,
                                                     children_in_process: list[list[str]]) -> None:
    # a policy that allows bf16 no more than float32's floor: both autocast recipes fail validation for real,
    # judged as the loop's plans are (against float64)
    roundoff = {**policy_mod.UNIT_ROUNDOFF, "bfloat16": policy_mod.UNIT_ROUNDOFF["float32"]}
    monkeypatch.setattr(policy_mod, "DEFAULT_POLICY", policy_mod.ValidationPolicy(unit_roundoff=roundoff))
    monkeypatch.setattr(trial_mod, "capture_profile", FakeCapture([pair_profile("base")]))
    out = tmp_path / "run"
    result = optimize(EXAMPLE, OptimizeConfig(out_dir=out, budget=1, device="cpu", wall_iters=3, wall_warmup=1,
                                              capture=EAGER, yardstick_backend="eager"))
    stick = result.yardstick
    assert stick is not None
    by_name = {r.recipe: r for r in stick.recipes}
    assert list(by_name) == ["compile", "bf16_compile", "bf16_compile_reduce_overhead"]
    plain = by_name["compile"]
    assert plain.outcome == "timed" and plain.median_ms is not None and plain.median_ms > 0
    assert plain.wall_time["iterations"] == 3 and plain.max_abs_err is not None and plain.max_abs_err < 1e-4
    for name in ("bf16_compile", "bf16_compile_reduce_overhead"):
        r = by_name[name]
        assert r.outcome == "rejected_validation" and r.median_ms is None
        assert r.max_abs_err is not None and r.max_abs_err > 1e-4 and "RMSE(candidate, fp64)" in r.reason
        assert r.verdict.startswith("rejected: ") and "reference float64 on cpu" in r.verdict
    # nothing was kept: the plan is the baseline, timed as the recipes are
    assert result.kept_passes == [] and stick.plan_ms == result.wall_time["baseline"]["median_ms"]
    assert stick.best_recipe == "compile" and stick.best_recipe_ms == plain.median_ms
    assert stick.plan_vs_recipe == pytest.approx(plain.median_ms / stick.plan_ms)
    assert stick.verdict.startswith("the loop kept nothing; the workload as written is")
    assert ("faster than the best recipe" in stick.verdict) is (stick.plan_vs_recipe >= 1.0)
    assert "beat" not in stick.verdict  # nothing kept: no plan to credit
    assert "torch.compile(model)" in stick.verdict
    assert [c[:2] for c in children_in_process if c] == [["--recipe", n] for n in by_name]

    saved = OptimizeResult.model_validate_json((out / "optimize.json").read_text())
    assert saved.yardstick == stick
    raw = json.loads((out / "optimize.json").read_text())["yardstick"]
    assert {"recipes", "plan_ms", "best_recipe", "best_recipe_ms", "plan_vs_recipe", "verdict"} <= set(raw)
    page = (out / "report.html").read_text()
    assert "By hand: the recipe instead of the loop" in page
    assert "rejected_validation" in page and "autocast(bfloat16) + torch.compile(model)" in page


@pytest.mark.slow
def test_no_yardstick_skips_the_recipes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small: None,
                                        children_in_process: list[list[str]]) -> None:
    monkeypatch.setattr(trial_mod, "capture_profile", FakeCapture([pair_profile("base")]))
    result = optimize(EXAMPLE, OptimizeConfig(out_dir=tmp_path / "run", budget=1, device="cpu", wall_iters=2,
                                              wall_warmup=0, capture=EAGER, yardstick=False))
    assert result.yardstick is None and "baseline" in result.wall_time
    assert not any("--recipe" in c for c in children_in_process)
    assert "By hand" not in (tmp_path / "run" / "report.html").read_text()


def test_a_recipe_that_crashes_is_reported_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    def run_child(*args: object, **kwargs: object) -> dict:
        raise WorkloadError("model.py: recipe bf16_compile raised RuntimeError: Dynamo does not support X")

    monkeypatch.setattr(walltime, "run_child", run_child)
    r = yardstick.measure_recipe(EXAMPLE, yardstick.recipe_named("bf16_compile"), iters=2, warmup=0, device="cpu",
                                 python="python")
    assert (r.outcome, r.median_ms) == ("crashed", None) and "Dynamo does not support X" in r.reason


def _timed(name: str, ms: float) -> RecipeResult:
    return RecipeResult(recipe=name, code=name, outcome="timed", median_ms=ms)


@pytest.mark.parametrize(("plan_ms", "ahead", "ratio"), [(2.82, True, 3.01 / 2.82), (2.96, False, 2.16 / 2.96)])
def test_the_verdict_says_who_is_ahead_and_by_how_much(plan_ms: float, ahead: bool, ratio: float) -> None:
    recipes = [_timed("compile", 3.5), _timed("bf16_compile", 3.01 if ahead else 2.16),
               RecipeResult(recipe="bf16_compile_reduce_overhead", code="ro", outcome="crashed", reason="boom")]
    stick = judge(recipes, plan_ms, "the kept plan")
    assert stick.best_recipe == "bf16_compile" and stick.plan_vs_recipe == pytest.approx(ratio)
    shown = f"{ratio:.2f}x" if ahead else f"{1 / ratio:.2f}x"
    assert stick.verdict.startswith("the loop beat" if ahead else "the loop is behind") and shown in stick.verdict


def test_a_gap_inside_the_run_to_run_spread_is_called_noise() -> None:
    # the shipped H200 GPT-2 training run: the whole-step plan against autocast + reduce-overhead
    run = json.loads((Path(__file__).parents[2] / "examples" / "captures" / "h200" / "hf_gpt2_train"
                      / "optimize.json").read_text())
    recipes = [RecipeResult.model_validate(r) for r in run["yardstick"]["recipes"]]
    plan = run["wall_time"]["optimized"]
    stick = judge(recipes, plan["median_ms"], "the kept plan", plan_wall=plan)
    assert stick.verdict.startswith("the loop is behind the best recipe by 1.03x") and stick.within_noise is True
    assert stick.verdict.endswith("within noise: the p10-p90 ranges overlap (4.388-4.921 vs 4.240-4.640 ms)")
    # a plan whose whole range sits below the recipe's is ahead, and not by noise
    fast = {"median_ms": 3.0, "p10_ms": 2.9, "p90_ms": 3.1}
    clear = judge(recipes, fast["median_ms"], "the kept plan", plan_wall=fast)
    assert clear.within_noise is False and "noise" not in clear.verdict
    assert judge(recipes, 3.0, "the kept plan").within_noise is None  # no figures, no claim


def test_with_nothing_kept_no_plan_is_credited() -> None:
    stick = judge([_timed("compile", 242.2)], 167.3, "the baseline (nothing kept)", nothing_kept=True)
    assert stick.verdict.startswith("the loop kept nothing; the workload as written is 1.45x faster than")
    assert "beat" not in stick.verdict and stick.plan_vs_recipe == pytest.approx(242.2 / 167.3)
    slower = judge([_timed("compile", 100.0)], 167.3, "the baseline (nothing kept)", nothing_kept=True)
    assert "1.67x slower than the best recipe" in slower.verdict


def test_no_timed_recipe_means_no_comparison() -> None:
    stick = judge([RecipeResult(recipe="compile", code="c", outcome="crashed")], 1.0, "plan")
    assert stick.best_recipe is None and stick.plan_vs_recipe is None and "nothing to measure" in stick.verdict


def test_a_generate_recipe_is_judged_by_its_tokens_against_float64(monkeypatch: pytest.MonkeyPatch) -> None:
    # autocast(bf16) around generate(): the tokens decide (top-k where they diverge), the scores are reported
    pytest.importorskip("transformers")
    monkeypatch.setenv("OPROF_EXAMPLE_SMALL", "1")
    workload = Path(__file__).parents[2] / "examples" / "hf_llama_generate.py"
    data = walltime.recipe_in_process(workload, "bf16_compile", iters=1, warmup=0, device="cpu", backend="eager")
    check = data["validation"]
    assert check["reference"].startswith("float64 on cpu, TF32 off (generate() returned its scores")
    assert "greedy token agreement" in check["verdict"] and "exact comparison" not in check["verdict"]
    assert check["passed"] is check["verdict"].startswith("validation passed")
