"""DataFrame / CSV export of a real profile."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from profiler_core.cli import load_commands
from profiler_core.report.frames import profile_frames
from profiler_core.schema import read_profile


def test_frames_match_the_profile(joinable: Path) -> None:
    prof = read_profile(joinable / "expected" / "profile.json")
    kernels, operators = profile_frames(prof)
    assert len(kernels) == len(prof.kernels) == 44 and len(operators) == len(prof.operators)
    assert kernels["duration_ns"].sum() == prof.coverage.duration_ns
    assert operators["share_pct"].sum() == pytest.approx(100.0)
    by_class = operators.groupby("op_class")["duration_ns"].sum()
    assert by_class["gemm"] == sum(o.duration_ns for o in prof.operators if o.op_class.value == "gemm")
    assert kernels.loc[0, "dram_bytes_read"] == prof.kernels[0].counters["dram_bytes_read"]


def test_export_cli_writes_csv(tmp_path: Path, joinable: Path) -> None:
    result = CliRunner().invoke(load_commands(), ["export", str(joinable / "expected" / "profile.json"),
                                                  "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    ops = pd.read_csv(tmp_path / "operators.csv")
    assert "aten::mm#0" in set(ops["operator"]) and "tensor_core_active_pct" in ops.columns
