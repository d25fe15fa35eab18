"""DataFrame / CSV export of a real profile."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from profiler_core.cli import load_commands
from profiler_core.profile_io import read_profile
from profiler_core.report.frames import profile_frames


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


def test_csv_writes_integer_columns_as_integers(tmp_path: Path, joinable: Path) -> None:
    import csv

    from profiler_core.report.frames import COUNT_COUNTERS, KERNEL_INT_COLUMNS, OPERATOR_INT_COLUMNS, write_csv

    prof = read_profile(joinable / "expected" / "profile.json")
    kernels_csv, operators_csv = write_csv(prof, tmp_path)
    for path, columns in ((kernels_csv, KERNEL_INT_COLUMNS), (operators_csv, OPERATOR_INT_COLUMNS)):
        rows = list(csv.DictReader(path.read_text().splitlines()))
        for col in (*columns, *COUNT_COUNTERS):
            cells = [r[col] for r in rows if r[col] != ""]  # empty: null in the profile
            assert all(c.lstrip("-").isdigit() for c in cells), (path.name, col, cells[:3])
    rows = list(csv.DictReader(kernels_csv.read_text().splitlines()))
    assert int(rows[0]["dram_bytes_read"]) == prof.kernels[0].counters["dram_bytes_read"]
    assert rows[0]["start_ns"] == str(prof.kernels[0].start_ns)
    assert "." in rows[0]["sm_throughput_pct"]  # rates stay decimal
    assert "dram_bytes_read" in COUNT_COUNTERS and "l2_hit_rate" not in COUNT_COUNTERS
