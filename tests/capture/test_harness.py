"""The harness child on CPU: a bad workload exits 3 with one line; a good one reports its run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from profiler_core.capture import harness

TINY = """
import torch

def get_model_and_inputs(device="cuda"):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    return model.to(device), (torch.randn(4, 8, device=device),)
"""


def _workload(tmp_path: Path, text: str, name: str = "wl.py") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.slow  # a fresh interpreter importing torch: a few seconds
def test_missing_entry_point_exits_3_with_one_line(tmp_path: Path) -> None:
    path = _workload(tmp_path, "import torch\nMODEL = None\n", "no_entry.py")
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "profiler_core.capture.harness",
            "--workload",
            str(path),
            "--phase",
            "plain",
            "--device",
            "cpu",
            "--compile-mode",
            "eager",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == harness.WORKLOAD_ERROR_EXIT
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(harness.WORKLOAD_ERROR_PREFIX)
    message = harness.workload_error_line(done.stderr)
    assert str(path) in message and "get_model_and_inputs(device)" in message and "add one" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("MODEL = None\n", "defines no get_model_and_inputs(device) function; add one"),
        ("import not_a_real_package_xyz\n", "import failed"),
        (
            TINY + "\ndef step(model, inputs):\n    raise ValueError('bad shape')\n",
            "step() raised ValueError during warmup: bad shape (at wl.py:",
        ),
        ("def get_model_and_inputs(device='cuda'):\n    return 3\n", "must return (model, inputs)"),
    ],
    ids=["missing-entry-point", "import-error", "step-raises", "wrong-return"],
)
def test_workload_faults_become_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    path = _workload(tmp_path, text)
    code = harness.main(
        ["--workload", str(path), "--phase", "plain", "--device", "cpu", "--compile-mode", "eager"]
    )
    out, err = capsys.readouterr()
    assert code == 3 and out == ""
    assert err.count("\n") == 1 and expected in harness.workload_error_line(err)


def test_plain_phase_on_cpu_reports_the_measured_iterations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _workload(tmp_path, TINY)
    code = harness.main(
        [
            "--workload",
            str(path),
            "--phase",
            "plain",
            "--device",
            "cpu",
            "--compile-mode",
            "eager",
            "--warmup",
            "1",
            "--iters",
            "3",
        ]
    )
    out, _ = capsys.readouterr()
    assert code == 0
    result = harness.parse_result(out)
    assert result is not None and json.loads(out.strip().splitlines()[-1]) == result
    assert (result["phase"], result["warmup"], result["iters"]) == ("plain", 1, 3)
    assert len(result["iteration_ms"]) == 3 and result["measured_ms"] >= sum(result["iteration_ms"]) * 0.5
    # the iterations alone (region_ms) lie within the region; no CUDA events off the GPU
    assert sum(result["iteration_ms"]) <= result["region_ms"] <= result["measured_ms"]
    assert "gpu_ms" not in result
    assert result["versions"]["torch"] and result["device_info"] == {"device": "cpu"}


@pytest.mark.slow  # torch.profiler start-up: a few seconds
def test_kineto_phase_on_cpu_writes_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _workload(tmp_path, TINY)
    out_trace = tmp_path / "run" / "kineto.json"
    code = harness.main(
        [
            "--workload",
            str(path),
            "--phase",
            "kineto",
            "--device",
            "cpu",
            "--compile-mode",
            "eager",
            "--out",
            str(out_trace),
        ]
    )
    result = harness.parse_result(capsys.readouterr().out)
    assert code == 0 and result["kernels"] == 0  # CPU: no kernels, and no error for it
    events = json.loads(out_trace.read_text())["traceEvents"]
    assert any(e.get("name") == "aten::linear" for e in events)


def test_region_phase_needs_cuda(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = harness.main(
        [
            "--workload",
            str(_workload(tmp_path, TINY)),
            "--phase",
            "region",
            "--device",
            "cpu",
            "--compile-mode",
            "eager",
        ]
    )
    assert code == 3 and "needs --device cuda" in capsys.readouterr().err


def test_cuda_asked_without_cuda_is_a_workload_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code = harness.main(
        ["--workload", str(_workload(tmp_path, TINY)), "--phase", "plain", "--device", "cuda"]
    )
    assert code == 3 and "CUDA is not available" in capsys.readouterr().err


def test_result_line_is_found_after_tool_chatter() -> None:
    text = (
        'workload print\n{"oprof_harness": 1, "phase": "region"}\n==PROF== Disconnected from process 797\n'
        '{"not": "ours"}\n'
    )
    assert harness.parse_result(text) == {"oprof_harness": 1, "phase": "region"}
    assert harness.parse_result("nothing here\n") is None


def test_workload_error_line_survives_tool_prefixes() -> None:
    text = "==PROF== x\n[nsys] oprof-workload-error: w.py: raised KeyError\n"
    assert harness.workload_error_line(text) == "w.py: raised KeyError"
    assert harness.workload_error_line("clean\n") is None
