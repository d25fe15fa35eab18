"""compare refuses two different workloads: the identity manifests record, and the operators' input shapes."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from profiler_core.analysis import compare
from profiler_core.analysis.comparability import shape_check
from profiler_core.attribution import attribute_run
from profiler_core.cli import load_commands
from profiler_core.passes.plan import read_plan
from profiler_core.passes.wrapper import render_optimized_workload
from profiler_core.workload import workload_identity

CAPTURES = Path(__file__).resolve().parents[2] / "examples" / "captures" / "h200"
runner = CliRunner()


@pytest.fixture(scope="module")
def profiles() -> dict:
    names = ("gpt2/baseline", "gpt2/optimized", "sdpa_attention/baseline", "sdpa_attention/optimized",
             "gpt2/cuda_graphs_trial")
    return {n: attribute_run(CAPTURES / n) for n in names}


@pytest.mark.slow
def test_gpt2_against_the_attention_layer_exits_2_naming_the_error(profiles: dict) -> None:
    base, other = CAPTURES / "gpt2" / "baseline", CAPTURES / "sdpa_attention" / "baseline"
    result = runner.invoke(load_commands(), ["compare", str(base), str(other)])
    assert result.exit_code == 2
    assert "measure different workloads" in result.stderr and "gpt2.py vs sdpa_attention.py" in result.stderr
    assert "--force" in result.stderr and "Traceback" not in result.output
    forced = runner.invoke(load_commands(), ["compare", "--force", str(base), str(other)])
    assert forced.exit_code == 0, forced.output
    assert "NOT COMPARABLE: workload differs" in forced.output


@pytest.mark.slow
def test_a_plan_of_the_same_workload_is_the_same_workload(profiles: dict) -> None:
    # the optimized captures measure workload_optimized.py; their plan names the original
    for name in ("gpt2", "sdpa_attention"):
        base, opt = profiles[f"{name}/baseline"], profiles[f"{name}/optimized"]
        assert opt.capture.workload.endswith("workload_optimized.py")
        assert base.capture.workload_identity == opt.capture.workload_identity == f"{name}.py"
        cmp = compare(base, opt)
        assert cmp.comparability.comparable and not cmp.comparability.workload_mismatches()
    # no plan beside it and no shapes: unknown, so not refused
    trial = compare(profiles["gpt2/baseline"], profiles["gpt2/cuda_graphs_trial"])
    assert not trial.comparability.workload_mismatches()


def test_the_shape_signature_tells_models_apart(profiles: dict) -> None:
    same = shape_check(profiles["gpt2/baseline"], profiles["gpt2/optimized"])
    other = shape_check(profiles["gpt2/baseline"], profiles["sdpa_attention/optimized"])
    assert same.status == "ok" and other.status == "mismatch"
    unknown = shape_check(profiles["gpt2/baseline"], profiles["gpt2/cuda_graphs_trial"])
    assert unknown.status == "unknown"


def test_a_generated_optimized_workload_declares_its_original(tmp_path: Path) -> None:
    plan = read_plan(CAPTURES / "gpt2" / "optimized" / "plan.json")
    original = tmp_path / "gpt2.py"
    original.write_text("def get_model_and_inputs(device='cuda'):\n    raise NotImplementedError\n")
    plan = plan.model_copy(update={"workload": str(original)})
    target = tmp_path / "plan" / "workload_optimized.py"
    target.parent.mkdir()
    target.write_text(render_optimized_workload(target, plan))
    assert workload_identity(target) == workload_identity(original) == "gpt2.py"
    # a plan of a plan keeps the first original's identity
    second = tmp_path / "again" / "workload_optimized.py"
    second.parent.mkdir()
    second.write_text(render_optimized_workload(second, plan.model_copy(update={"workload": str(target)})))
    assert workload_identity(second) == "gpt2.py"
