"""The quick start's text: ``Next:`` commands that run as printed in a new shell, and the demo table's legend."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from profiler_core.cli import next_steps
from profiler_core.cli.demo_table import legend
from profiler_core.cli.next_steps import oprof_program


def _venv(root: Path) -> Path:
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "oprof").write_text("#!/bin/sh\n")
    return root / ".venv"


@pytest.mark.skipif(os.name == "nt", reason="POSIX virtualenv layout")
def test_a_checkout_venv_is_named_relative_with_how_to_activate(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    venv = _venv(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    monkeypatch.setattr(next_steps.shutil, "which", lambda _: str(venv / "bin" / "oprof"))  # an active venv
    run = oprof_program()
    assert run.program == os.path.join(".venv", "bin", "oprof")
    assert run.note is not None and "source .venv/bin/activate" in run.note


def test_a_global_install_is_the_bare_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "base_prefix", sys.prefix)
    monkeypatch.setattr(next_steps.shutil, "which", lambda _: "/usr/local/bin/oprof")
    assert oprof_program() == next_steps.Invocation("oprof")


def test_without_a_script_it_falls_back_to_the_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "no-venv"))
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    monkeypatch.setattr(next_steps.shutil, "which", lambda _: None)
    run = oprof_program()
    assert run.program.endswith(" -m profiler_core") and run.note is not None


@pytest.mark.skipif(os.name == "nt", reason="a POSIX shell")
def test_the_printed_program_runs_in_a_new_shell() -> None:
    """What this test's own interpreter would print runs with a bare PATH, as a new shell has."""
    program = oprof_program().program
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
    if "-m profiler_core" in program:
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(f"{program} --help", shell=True, env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert "compare" in done.stdout


def test_the_legend_separates_baseline_columns_from_before_after() -> None:
    lines = legend([("tv_resnet18", "kernels 0.98x, step 1.29x: ...")])
    baseline, before_after = lines[0], lines[1]
    assert baseline.startswith("Baseline capture only") and "top finding" in baseline
    assert "kernel time (" not in baseline and "end to end" not in baseline
    assert before_after.startswith("Before -> after") and "kernel time" in before_after and "end to end" in before_after
    assert "CUDA graphs remove launch gaps, not kernels" in lines[2]
    assert lines[-1] == "  tv_resnet18: kernels 0.98x, step 1.29x: ..."
    assert len(legend([])) == 3
