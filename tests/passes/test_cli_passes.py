"""``oprof apply-pass`` and ``oprof passes`` through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profiler_core.cli import load_commands
from profiler_core.passes import PlanStatus, read_plan

runner = CliRunner()


def _invoke(*args: str) -> object:
    return runner.invoke(load_commands(), list(args))


def test_passes_json_lists_every_pass_with_level_and_symptom() -> None:
    result = _invoke("passes", "--json")
    assert result.exit_code == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert {"qkv_fusion", "sdpa", "bf16_promotion", "tf32", "freezing", "cuda_graphs", "rnn_reroute",
            "cast_cancellation"} <= set(rows)
    assert rows["cuda_graphs"]["level"] == "inductor_config" and rows["cuda_graphs"]["level_number"] == 3
    assert "launch-bound" in rows["cuda_graphs"]["symptom"]
    assert rows["rnn_reroute"]["structural"] is True


def test_passes_table_goes_to_stdout() -> None:
    result = _invoke("passes")
    assert result.exit_code == 0
    assert result.stderr == "" and "qkv_fusion" in result.stdout


@pytest.mark.slow
def test_apply_pass_eager_writes_plan_and_wrapper(small_examples: Path, tmp_path: Path) -> None:
    result = _invoke("apply-pass", str(small_examples / "sdpa_attention.py"), "--pass", "qkv_fusion",
                     "-p", "sdpa", "-p", "cuda_graphs", "--device", "cpu", "--compiler", "eager",
                     "--out", str(tmp_path), "--json")
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["status"] == "validated"
    assert [(p["name"], p["status"]) for p in plan["passes"]] == [
        ("qkv_fusion", "APPLIED"), ("sdpa", "APPLIED"), ("cuda_graphs", "NOT APPLIED")]
    assert (tmp_path / "workload_optimized.py").is_file()
    assert read_plan(tmp_path / "plan.json").status is PlanStatus.VALIDATED


@pytest.mark.parametrize(("args", "message"), [
    (["--pass", "fuse_everything"], "error: unknown pass 'fuse_everything'; known passes:"),
    (["--pass", "sdpa", "--device", "tpu"], "error: unknown device 'tpu'; use cpu, cuda or cuda:N"),
    ([], "error: no pass to apply"),
], ids=["bad-pass", "bad-device", "no-pass"])
@pytest.mark.slow
def test_user_errors_exit_2_with_one_line(small_examples: Path, args: list[str], message: str) -> None:
    result = _invoke("apply-pass", str(small_examples / "sdpa_attention.py"), "--device", "cpu", *args)
    assert result.exit_code == 2
    assert result.stderr.startswith(message)
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_missing_workload_exits_2(tmp_path: Path) -> None:
    result = _invoke("apply-pass", str(tmp_path / "nope.py"), "--pass", "sdpa", "--device", "cpu")
    assert result.exit_code == 2
    assert "no such workload file" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_apply_pass_inductor_all_levels(small_examples: Path, tmp_path: Path) -> None:
    """The real path on CPU: Level-1 rewrites, the Level-2 post-grad pass and Level-3 freezing in Inductor."""
    result = _invoke("apply-pass", str(small_examples / "sdpa_attention.py"), "-p", "qkv_fusion",
                     "-p", "sdpa", "-p", "bf16_promotion", "-p", "freezing", "--device", "cpu",
                     "--out", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    assert "validation passed" in result.stdout
    plan = read_plan(tmp_path / "plan.json")
    assert plan.applied == ["qkv_fusion", "sdpa", "bf16_promotion", "freezing"]
    assert plan.inductor_config["freezing"] is True
    assert plan.record("freezing").details["parameters_frozen"] == 10  # LayerNorm + 4 linears, 2 each
    assert plan.inductor_config["post_grad_custom_post_pass"] == ["cast_cancellation"]
    bf16 = plan.record("bf16_promotion")
    assert [lv.value for lv in bf16.levels] == ["dynamo_fx", "post_grad"]
    assert [g.level.value for g in bf16.graphs] == ["dynamo_fx", "post_grad"]  # the post-grad pass ran
    assert "casts_cancelled" in bf16.details["post_grad"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("body", "args", "needle"),
    [
        ("import sys\nsys.exit(3)\n", [], "called sys.exit(3)"),
        ("import os\n\ndef get_model_and_inputs(device='cpu'):\n    os._exit(0)\n", [],
         "ended the process with exit code 0"),
        ("while True:\n    pass\n", ["--timeout", "45"], "ran past the 45 s limit"),
    ],
    ids=["sys-exit-at-import", "os-exit", "infinite-loop"],
)
def test_hostile_workload_is_one_line(tmp_path: Path, body: str, args: list[str], needle: str) -> None:
    workload = tmp_path / "hostile.py"
    workload.write_text(body)
    result = runner.invoke(load_commands(), [
        "apply-pass", str(workload), "-p", "sdpa", "--device", "cpu", "--compiler", "eager",
        "--out", str(tmp_path / "opt"), *args])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "hostile.py" in lines[0] and needle in lines[0], result.output
    assert not (tmp_path / "opt" / "plan.json").exists()
