"""``oprof capture``: one clean line on failure; ``--json`` keeps stdout to the manifest alone."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profiler_core.capture import pipeline
from profiler_core.capture.chip import NO_GPU_MESSAGE
from profiler_core.cli import load_commands
from profiler_core.errors import ToolNotFoundError
from tests.capture.conftest import FAKES, H200, FakeLog, FakeReader
from tests.capture.test_pipeline import WORKLOAD

app = load_commands()


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(_has_cuda(), reason="checks the no-GPU path; this machine has CUDA")
def test_no_gpu_fails_fast_with_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["capture", str(WORKLOAD), "--out", str(tmp_path / "run")])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [f"error: {NO_GPU_MESSAGE}"]
    assert not (tmp_path / "run").exists()


def test_no_gpu_message_is_the_whole_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_gpu(device: str) -> None:
        raise ToolNotFoundError(NO_GPU_MESSAGE)

    monkeypatch.setattr(pipeline, "detect_gpu", no_gpu)
    result = CliRunner().invoke(app, ["capture", str(WORKLOAD), "--json"])
    assert result.exit_code == 2 and result.stdout == ""
    assert "oprof demo" in result.stderr and "Traceback" not in result.stderr


def test_bad_option_combination_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["capture", str(WORKLOAD), "--dedup-iterations"])
    assert result.exit_code == 2
    assert "applies to --counters full" in result.stderr


def test_json_prints_only_the_manifest(
    fake_env: FakeLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from profiler_core.capture import config as config_module

    monkeypatch.setattr(pipeline, "detect_gpu", lambda device: H200)
    monkeypatch.setattr(pipeline, "open_clock_reader", lambda index: (FakeReader(), None))
    monkeypatch.setattr(
        config_module.CaptureConfig,
        "harness_argv",
        lambda self: [sys.executable, "-S", str(FAKES / "fake_harness.py")],
    )
    run = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "capture",
            str(WORKLOAD),
            "--out",
            str(run),
            "--json",
            "--no-nsys",
            "--compile-mode",
            "eager",
            "--iters",
            "2",
        ],
    )
    assert result.exit_code == 0, result.stderr
    manifest = json.loads(result.stdout)
    assert manifest["status"] == "complete" and manifest["workload"]["compile_mode"] == "eager"
    assert manifest == json.loads((run / "manifest.json").read_text())
    assert "kineto" in result.stderr and "counters" in result.stderr  # progress went to stderr
