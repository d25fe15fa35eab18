"""``oprof yardstick RUN_DIR`` on a CPU: a finished optimize run timed again beside the recipes.

Most tests copy the small files of a shipped H200 run (optimize.json, walltime.json, the kept
plan's plan.json; no traces) and fake the two timings (``walltime.measure`` and
``yardstick.measure_recipe``), so they check what is read, regenerated, judged and written. The
last one times a tiny workload for real, in fresh interpreters, with the recipes' "eager" backend.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from profiler_core.cli import load_commands
from profiler_core.errors import OutputError, WorkloadError
from profiler_core.optimize import walltime, yardstick
from profiler_core.optimize.remeasure import remeasure
from profiler_core.optimize.result import OptimizeResult
from profiler_core.optimize.walltime import WallTime
from profiler_core.optimize.yardstick import RecipeResult
from profiler_core.passes import wrapper
from profiler_core.rundir.layout import OPTIMIZE_NAME, OPTIMIZED_WORKLOAD_NAME, PLAN_NAME, WALLTIME_NAME

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "examples" / "captures" / "h200" / "tv_resnet18"
WORKLOAD = REPO / "examples" / "tv_resnet18.py"
runner = CliRunner()
app = load_commands()

BASE_MS, PLAN_MS = 2.0, 1.0
RECIPE_MS = {"compile": 1.5, "bf16_compile": 1.25}  # bf16_compile_reduce_overhead crashes

TINY = '''import torch


def get_model_and_inputs(device="cpu"):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device).eval()
    return model, (torch.randn(8, 16, device=device),)
'''


class FakeTimings:
    """walltime.measure and yardstick.measure_recipe, answering fixed figures and recording their calls."""

    def __init__(self) -> None:
        self.measured: list[tuple[Path, dict[str, object]]] = []
        self.recipes: list[tuple[Path, str, dict[str, object]]] = []

    def measure(self, workload: Path, **kwargs: object) -> WallTime:
        assert Path(workload).is_file()  # the plan's file lives while it is timed
        self.measured.append((Path(workload), kwargs))
        ms = PLAN_MS if Path(workload).name == OPTIMIZED_WORKLOAD_NAME else BASE_MS
        return WallTime((ms * 0.9, ms, ms * 1.1))

    def measure_recipe(self, workload: Path, recipe: yardstick.Recipe, **kwargs: object) -> RecipeResult:
        self.recipes.append((Path(workload), recipe.name, kwargs))
        if recipe.name not in RECIPE_MS:
            return RecipeResult(recipe=recipe.name, code=recipe.code, outcome="crashed",
                                reason="recipe raised RuntimeError: no graph; more detail")
        figures = WallTime((RECIPE_MS[recipe.name],) * 3)
        return RecipeResult(recipe=recipe.name, code=recipe.code, outcome="timed", median_ms=figures.median_ms,
                            wall_time=figures.as_dict(), max_abs_err=1e-3)


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> FakeTimings:
    fake = FakeTimings()
    monkeypatch.setattr(walltime, "measure", fake.measure)
    monkeypatch.setattr(yardstick, "measure_recipe", fake.measure_recipe)
    return fake


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the shipped run's small files, its workload at ``examples/`` above it, and a working
    directory elsewhere (so the workload is found from the run directory, not from here)."""
    run_dir = tmp_path / "runs" / "tv_resnet18"
    (run_dir / "optimized").mkdir(parents=True)
    for name in (OPTIMIZE_NAME, WALLTIME_NAME, f"optimized/{PLAN_NAME}"):
        shutil.copyfile(SHIPPED / name, run_dir / name)
    (tmp_path / "examples").mkdir()
    shutil.copyfile(WORKLOAD, tmp_path / "examples" / WORKLOAD.name)
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    return run_dir


def _remeasure(run_dir: Path, **kwargs: object) -> OptimizeResult:
    settings: dict[str, object] = {"workload": None, "wall_iters": 3, "warmup": 1, "device": "cpu",
                                   "backend": "eager", "python": "python", **kwargs}
    return remeasure(run_dir, **settings)  # type: ignore[arg-type]


def test_the_plan_is_regenerated_and_timed_beside_the_recipes(run: Path, fakes: FakeTimings) -> None:
    # as the loop writes it: a field added since the file was written is there with its default
    before = json.loads(OptimizeResult.model_validate_json((run / OPTIMIZE_NAME).read_text()).model_dump_json())
    walltime_before = (run / WALLTIME_NAME).read_bytes()
    lines: list[str] = []
    result = _remeasure(run, progress=lambda phase, step, total, m: lines.append(f"{phase} {step}/{total} {m}"))

    regenerated = run / "optimized" / OPTIMIZED_WORKLOAD_NAME
    assert regenerated.is_file()
    source = regenerated.read_text()
    assert "PASSES = ['cuda_graphs']" in source and "COMPILE_MODE = 'reduce-overhead'" in source
    assert str((run.parent.parent / "examples" / WORKLOAD.name).resolve()) in source  # the workload found
    compile(source, str(regenerated), "exec")

    workload = (run.parent.parent / "examples" / WORKLOAD.name).resolve()
    assert [p for p, _ in fakes.measured] == [workload, regenerated]
    assert all(kw["compile_mode"] == "default" and kw["iters"] == 3 and kw["warmup"] == 1
               and kw["device"] == "cpu" for _, kw in fakes.measured)
    assert [(p, name) for p, name, _ in fakes.recipes] == [(workload, r.name) for r in yardstick.RECIPES]
    assert all(kw["backend"] == "eager" for _, _, kw in fakes.recipes)

    written = json.loads((run / OPTIMIZE_NAME).read_text())
    assert written == json.loads(result.model_dump_json())
    stick = written["yardstick"]
    assert stick["plan_ms"] == PLAN_MS and stick["best_recipe"] == "bf16_compile"
    assert stick["best_recipe_ms"] == RECIPE_MS["bf16_compile"]
    assert stick["plan_vs_recipe"] == pytest.approx(RECIPE_MS["bf16_compile"] / PLAN_MS)
    assert stick["verdict"].startswith("the loop beat the best recipe by 1.25x (the kept plan 1.000 ms")
    assert [r["outcome"] for r in stick["recipes"]] == ["timed", "timed", "crashed"]
    assert stick["baseline_wall_time"]["median_ms"] == BASE_MS and stick["plan_wall_time"]["median_ms"] == PLAN_MS
    assert stick["remeasured"].endswith(" on cpu, torch " + torch.__version__)
    # the loop's own figures stay: wall_time, wall_speedup and walltime.json as the loop wrote them
    assert written["wall_time"] == before["wall_time"] and written["wall_speedup"] == before["wall_speedup"]
    assert (run / WALLTIME_NAME).read_bytes() == walltime_before

    note = written["notes"][-1]
    old = before["wall_time"]
    assert note == (f"yardstick re-measured by `oprof yardstick` at {stick['remeasured']}: baseline {BASE_MS:.3f} ms, "
                    f"plan {PLAN_MS:.3f} ms, each recipe timed beside them; no new capture (the loop's own "
                    f"end-to-end medians, kept in wall_time: baseline {old['baseline']['median_ms']:.3f} ms, "
                    f"optimized {old['optimized']['median_ms']:.3f} ms)")
    assert written["notes"][:-1] == before["notes"]
    changed = {"yardstick", "notes"}
    assert {k: v for k, v in written.items() if k not in changed} == \
        {k: v for k, v in before.items() if k not in changed}
    assert lines[0].startswith("yardstick 0/5 timing 3 end-to-end iterations of the baseline")
    assert lines[-1] == f"yardstick 5/5 {stick['verdict']}"


def test_an_existing_optimized_workload_is_used_as_it_is(run: Path, fakes: FakeTimings) -> None:
    mine = run / "optimized" / OPTIMIZED_WORKLOAD_NAME
    mine.write_text("# the loop's own file\n")
    _remeasure(run)
    assert mine.read_text() == "# the loop's own file\n" and fakes.measured[1][0] == mine


def test_a_read_only_run_gets_its_plan_written_elsewhere(run: Path, fakes: FakeTimings,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    real = wrapper.write_optimized_workload

    def refuse_the_run_dir(path: Path, plan: object) -> Path:
        if Path(path).parent == run / "optimized":
            raise OutputError(f"{path}: cannot write (Read-only file system); choose a writable path")
        return real(path, plan)  # type: ignore[arg-type]

    monkeypatch.setattr(wrapper, "write_optimized_workload", refuse_the_run_dir)
    _remeasure(run)
    plan = fakes.measured[1][0]
    assert plan.name == OPTIMIZED_WORKLOAD_NAME and run not in plan.parents
    assert not plan.exists()  # a temporary file, gone once timed
    assert not (run / "optimized" / OPTIMIZED_WORKLOAD_NAME).exists()


def test_nothing_kept_judges_the_baseline(run: Path, fakes: FakeTimings) -> None:
    data = json.loads((run / OPTIMIZE_NAME).read_text())
    data.update(kept_passes=[], final_run_dir="baseline")
    (run / OPTIMIZE_NAME).write_text(json.dumps(data))
    shutil.rmtree(run / "optimized")  # no plan is needed
    result = _remeasure(run)
    assert len(fakes.measured) == 1
    assert result.yardstick is not None and result.yardstick.plan_ms == BASE_MS
    assert result.yardstick.plan_wall_time == {} and result.yardstick.baseline_wall_time["median_ms"] == BASE_MS
    assert result.yardstick.verdict.startswith("the loop kept nothing; the workload as written is 1.60x slower than")


def test_the_cli_prints_the_table_and_the_verdict(run: Path, fakes: FakeTimings) -> None:
    result = runner.invoke(app, ["yardstick", str(run), "--device", "cpu", "--backend", "eager",
                                 "--wall-iters", "3", "--warmup", "1"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    for row in ("baseline (as written)", "the loop: cuda_graphs", "torch.compile(model)", "crashed",
                "recipe raised RuntimeError: no graph ...", "2.000", "1.000", "1.250"):
        assert row in out
    assert "yardstick: the loop beat the best recipe by 1.25x" in out and f"updated {run / OPTIMIZE_NAME}" in out
    assert "timing 3 end-to-end iterations of the baseline" in result.stderr


def test_the_cli_json_is_the_updated_optimize_json(run: Path, fakes: FakeTimings, tmp_path: Path) -> None:
    elsewhere = tmp_path / "mine.py"
    shutil.copyfile(WORKLOAD, elsewhere)
    result = runner.invoke(app, ["yardstick", str(run), "--device", "cpu", "--workload", str(elsewhere), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == json.loads((run / OPTIMIZE_NAME).read_text())
    assert fakes.measured[0][0] == elsewhere.resolve()
    assert str(elsewhere.resolve()) in (run / "optimized" / OPTIMIZED_WORKLOAD_NAME).read_text()


def _one_line_error(args: list[str]) -> str:
    result = runner.invoke(app, ["yardstick", *args, "--device", "cpu"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = [ln for ln in result.stderr.strip().splitlines() if not ln.startswith("yardstick ")]  # progress
    assert len(errors) == 1 and errors[0].startswith("error: "), result.stderr
    return errors[0]


def test_a_folder_without_optimize_json_is_one_line(tmp_path: Path, fakes: FakeTimings) -> None:
    line = _one_line_error([str(tmp_path)])
    assert str(tmp_path / OPTIMIZE_NAME) in line and "point at an `oprof optimize` run directory" in line
    assert fakes.measured == []


def test_a_malformed_optimize_json_is_one_line(run: Path, fakes: FakeTimings) -> None:
    (run / OPTIMIZE_NAME).write_text('{"workload": 3}')
    line = _one_line_error([str(run)])
    assert str(run / OPTIMIZE_NAME) in line and "point at an `oprof optimize` run directory" in line


def test_a_missing_plan_is_one_line(run: Path, fakes: FakeTimings) -> None:
    (run / "optimized" / PLAN_NAME).unlink()
    line = _one_line_error([str(run)])
    assert str(run / "optimized" / PLAN_NAME) in line and "cuda_graphs" in line
    assert fakes.measured == []


def test_a_missing_workload_is_one_line(run: Path, fakes: FakeTimings) -> None:
    (run.parent.parent / "examples" / WORKLOAD.name).unlink()
    line = _one_line_error([str(run)])
    assert "'examples/tv_resnet18.py' is not found" in line and "--workload" in line
    line = _one_line_error([str(run), "--workload", "nowhere.py"])
    assert "nowhere.py: no such workload file" in line


def test_a_failed_timing_is_one_line(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(workload: Path, **_: object) -> WallTime:
        raise WorkloadError(f"{workload}: wall-time run failed: ModuleNotFoundError: torchvision")

    monkeypatch.setattr(walltime, "measure", broken)
    before = (run / OPTIMIZE_NAME).read_text()
    line = _one_line_error([str(run)])
    assert "timing the baseline failed" in line and "torchvision" in line
    assert (run / OPTIMIZE_NAME).read_text() == before  # nothing written


@pytest.mark.slow
def test_a_tiny_run_is_remeasured_for_real_on_cpu(tmp_path: Path) -> None:
    (tmp_path / "tiny.py").write_text(TINY)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / OPTIMIZE_NAME).write_text(
        OptimizeResult(workload="tiny.py", created_at="20260101T000000Z", run_dir=".").model_dump_json(indent=1))
    import sys

    result = remeasure(run_dir, workload=None, wall_iters=3, warmup=1, device="cpu", backend="eager",
                       python=sys.executable, compile_mode="eager")
    stick = result.yardstick
    assert stick is not None and stick.plan_ms == stick.baseline_wall_time["median_ms"] > 0
    assert [r.recipe for r in stick.recipes] == [r.name for r in yardstick.RECIPES]
    assert all(r.outcome in ("timed", "rejected_validation", "crashed") for r in stick.recipes)
    plain = stick.recipes[0]
    assert plain.outcome == "timed" and plain.median_ms is not None and plain.wall_time["iterations"] == 3, plain
    assert stick.verdict.startswith("the loop kept nothing; the workload as written is")
    assert result.wall_time == {} and not (run_dir / WALLTIME_NAME).exists()  # the loop's own: none here
