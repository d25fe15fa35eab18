"""``oprof attribute`` through the real CLI: run-dir and explicit-file forms, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profiler_core.cli import load_commands
from profiler_core.profile_io import read_profile

runner = CliRunner()


@pytest.fixture
def run_dir(tmp_path: Path, joinable: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(joinable / "kineto.json", run / "kineto.json")
    shutil.copy(joinable / "nsys.sqlite", run / "timeline.sqlite")
    shutil.copy(joinable / "ncu_per_config_raw.csv", run / "counters.csv")
    shutil.copy(joinable / "torch_trace.tgz", run / "torch_trace.tgz")
    return run


def test_run_dir_form(run_dir: Path) -> None:
    result = runner.invoke(load_commands(), ["attribute", str(run_dir), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["coverage"]["counters_inherited"]["kernel_count"] == 30
    prof = read_profile(run_dir / "profile.json")
    assert prof.capture.timeline_source == "nsys" and len(prof.kernels) == 44


def test_explicit_form(tmp_path: Path, joinable: Path) -> None:
    out = tmp_path / "p.json"
    result = runner.invoke(load_commands(), [
        "attribute", "--kineto", str(joinable / "kineto.json"), "--ncu", str(joinable / "ncu_full_raw.csv"),
        "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "cupti_correlation" in result.output and "aten::" in result.output
    assert read_profile(out).capture.timeline_source == "kineto"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["attribute"], "nothing to attribute"),
        (["attribute", "--ncu", "x.csv"], "no timeline given"),
        (["attribute", "--kineto", "missing.json"], "missing.json"),
    ],
    ids=["no-input", "no-timeline", "missing-file"],
)
def test_user_errors_are_one_line(args: list[str], needle: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(load_commands(), args)
    assert result.exit_code == 2
    assert needle in result.output and "Traceback" not in result.output
    assert not list(tmp_path.glob("*.json")), "no output file on failure"


def test_empty_run_dir(tmp_path: Path) -> None:
    result = runner.invoke(load_commands(), ["attribute", str(tmp_path)])
    assert result.exit_code == 2 and "holds no timeline" in result.output


def test_analysis_commands_take_a_run_directory(run_dir: Path, tmp_path: Path) -> None:
    # no profile.json yet: the run is attributed on the fly, exactly as 'oprof attribute' would
    result = runner.invoke(load_commands(), ["compare", str(run_dir), str(run_dir), "--json"])
    assert result.exit_code == 0, result.output
    cmp = json.loads(result.stdout)
    assert cmp["verdict"] == "unchanged" and cmp["base_total_ns"] == cmp["opt_total_ns"] > 0
    result = runner.invoke(load_commands(), ["diagnose", str(run_dir), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["kernel_count"] == 44
    assert not (run_dir / "profile.json").exists()  # read-only commands write nothing into the run


def test_analysis_command_names_an_empty_directory(tmp_path: Path) -> None:
    result = runner.invoke(load_commands(), ["summary", str(tmp_path)])
    assert result.exit_code == 2
    assert str(tmp_path) in result.stderr and "Traceback" not in result.output
